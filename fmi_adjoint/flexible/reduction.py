"""Component mode synthesis: Craig-Bampton and free-interface reductions of an FE model.

The flexible components of Vanpaemel et al. (seed 003, Sec. 5.1) are reduced "by component
mode synthesis by the Craig-Bampton technique" (Craig and Bampton, *AIAA J.* 6 (1968) 1313):
the displacements ``u`` of the FE model are approximated as ``u = T q`` with a few reduced
coordinates ``q``, and the reduced matrices are ``M_r = T^T M T``, ``K_r = T^T K T``
(``D_r`` likewise, or built from damping ratios, :class:`ModalDamping`).

Craig-Bampton (:class:`CraigBampton`)
    The DOFs are split into interface (boundary) DOFs ``b``, all DOFs of the interface nodes
    (where joints and force elements attach), and the internal DOFs ``i``::

        u_b = q_b                                  (the interface DOFs themselves)
        u_i = Psi q_b + Phi eta,   Psi = -K_ii^-1 K_ib     (static constraint modes)
                                   K_ii Phi = M_ii Phi Omega^2  (fixed-interface normal modes)

    The frequencies of the reduced model converge to the FE model's from above as modes are
    added (``T`` spans a growing subspace: Rayleigh-Ritz).

Rigid-body modes -- the question users ask most
    A free body (no support: its ``K`` has a null space of rigid motions, 6 for a body in
    space) has rigid-body modes at zero frequency.  In Craig-Bampton they are **not** among the
    fixed-interface normal modes when the interface holds the body statically determinate
    (one node with 6 DOFs of a beam or shell mesh; three non-collinear nodes of a solid mesh):
    with ``u_b = 0`` the body cannot move, ``K_ii`` is non-singular and every ``Phi`` is
    elastic.  The rigid motions are represented *exactly* by the constraint modes: a rigid
    motion ``u`` satisfies ``K u = 0``, hence ``u_i = -K_ii^-1 K_ib u_b = Psi u_b``.  They show
    as zero eigenvalues of the reduced ``(K_r, M_r)``; :attr:`ReducedModel.rigid_body_modes`
    counts them (the null space of the interface's condensed stiffness
    ``K_bb + K_bi Psi``): 6 for a free body, 0 for a body already supported in the FE model.
    Do not add rigid-body modes to a Craig-Bampton basis: they are in it already.

    An interface that does *not* hold the body (one node of a solid mesh: the body rotates
    about it) leaves fixed-interface mechanism modes, ``K_ii`` is singular and the reduction is
    refused with a :class:`~fmi_adjoint.errors.ModelError` that names the fix.

    The free-interface basis (:class:`FreeInterfaceModes`, the lowest modes of the unsupported
    body, as used with the floating frame of reference, seed 004) does contain the rigid-body
    modes: they are detected from the null space of ``K`` (eigenvalues of ``(K, M)`` that
    shift-invert finds below :func:`~fmi_adjoint.flexible.fe.zero_threshold`), counted, and kept or dropped
    (``keep_rigid_body_modes``); mode counts and frequency limits count elastic modes.

Mode selection: :class:`ModeCount` (the ``n`` lowest) or :class:`FrequencyLimit` (all below
``f`` Hz).  A limit below the first mode keeps none (Craig-Bampton is then Guyan's static
condensation) and says so in :attr:`ReducedModel.notes`; repeated frequencies (symmetric
sections) and a count that splits a group of them are noted too: the shapes within a group
are any basis of its eigenspace, so compare subspaces, not single modes.

Damping (:class:`NoDamping`, :class:`RayleighDamping`, :class:`ModalDamping`) is built on the
reduced model and returned as terms linear in their parameters (``alpha``, ``beta``,
``zeta``), so that identification can scale them.

Reductions are cached in the build cache (:class:`~fmi_adjoint.cache.BuildCache`, kind
``flexible_reduction``, key: the FE model's fingerprint and the reduction's options): a second
reduction of the same mesh is a cache read.  Damping is applied after the cache: changing a
damping ratio does not reduce again.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
from pathlib import Path

import numpy as np
import scipy
import scipy.linalg
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..cache import BuildCache, fingerprint, source_fingerprint
from ..errors import ModelError
from .fe import ZERO_EIGENVALUE, FEModel, ScaledMatrix, lowest_modes, zero_threshold

__all__ = ["AbstractDamping", "AbstractModeSelection", "AbstractReduction", "CraigBampton", "FreeInterfaceModes",
           "FrequencyLimit", "ModalDamping", "ModeCount", "NoDamping", "RayleighDamping", "ReducedModel", "reduce"]

#: Two frequencies closer than this (relative) are one repeated frequency.
REPEATED = 1e-6
#: Version of the cached files; a change makes new keys.
CACHE_FORMAT = 1
#: The cache kind of reductions.
CACHE_KIND = "flexible_reduction"
#: Most modes a frequency limit may keep before it is refused (a limit in rad/s given as Hz).
MAX_LIMIT_MODES = 2000


class AbstractModeSelection:
    """Which normal modes to keep: :class:`ModeCount` or :class:`FrequencyLimit`."""


@dataclasses.dataclass(frozen=True)
class ModeCount(AbstractModeSelection):
    """The ``count`` lowest (elastic) normal modes; 0 keeps none."""

    count: int

    def __post_init__(self) -> None:
        if not isinstance(self.count, int) or isinstance(self.count, bool) or self.count < 0:
            raise ModelError(f"ModeCount: count = {self.count!r}; give a whole number >= 0.")


@dataclasses.dataclass(frozen=True)
class FrequencyLimit(AbstractModeSelection):
    """Every (elastic) normal mode below ``hz``."""

    hz: float

    def __post_init__(self) -> None:
        if not isinstance(self.hz, (int, float)) or not math.isfinite(self.hz) or self.hz <= 0:
            raise ModelError(f"FrequencyLimit: hz = {self.hz!r}; give a positive frequency in Hz.")


class AbstractReduction:
    """A reduction method: :class:`CraigBampton` or :class:`FreeInterfaceModes`."""

    modes: AbstractModeSelection


def _mode_selection(modes: object, where: str) -> None:
    if not isinstance(modes, AbstractModeSelection):
        raise ModelError(f"{where}: modes = {modes!r}; give ModeCount(n) or FrequencyLimit(hz).")


@dataclasses.dataclass(frozen=True)
class CraigBampton(AbstractReduction):
    """Craig-Bampton: every DOF of ``interface_nodes`` kept, plus fixed-interface normal modes
    (module docstring)."""

    interface_nodes: tuple[int, ...]
    modes: AbstractModeSelection = ModeCount(10)

    def __post_init__(self) -> None:
        nodes = tuple(int(node) for node in self.interface_nodes)
        if not nodes or len(set(nodes)) != len(nodes):
            raise ModelError(f"CraigBampton: interface_nodes = {self.interface_nodes!r}; give one or more distinct "
                             "node ids (where joints and forces attach).")
        object.__setattr__(self, "interface_nodes", nodes)
        _mode_selection(self.modes, "CraigBampton")


@dataclasses.dataclass(frozen=True)
class FreeInterfaceModes(AbstractReduction):
    """The lowest normal modes of the unsupported body (module docstring); rigid-body modes
    are found from the null space of ``K`` and kept first unless ``keep_rigid_body_modes`` is
    False."""

    modes: AbstractModeSelection = ModeCount(10)
    keep_rigid_body_modes: bool = True

    def __post_init__(self) -> None:
        _mode_selection(self.modes, "FreeInterfaceModes")


class AbstractDamping:
    """Damping of the reduced model: :class:`NoDamping`, :class:`RayleighDamping` or
    :class:`ModalDamping`."""

    def terms(self, mass: np.ndarray, stiffness: np.ndarray) -> tuple[tuple[ScaledMatrix, ...], tuple[str, ...]]:
        """The damping terms of the reduced ``mass`` and ``stiffness``, and notes."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class NoDamping(AbstractDamping):
    """No damping from ratios (a damping matrix of the FE model is still projected)."""

    def terms(self, mass: np.ndarray, stiffness: np.ndarray) -> tuple[tuple[ScaledMatrix, ...], tuple[str, ...]]:
        return (), ()


@dataclasses.dataclass(frozen=True)
class RayleighDamping(AbstractDamping):
    """``D_r = alpha M_r + beta K_r``: the damping ratio of a mode of circular frequency
    ``omega`` is ``alpha / (2 omega) + beta omega / 2``."""

    alpha: float = 0.0
    beta: float = 0.0

    def __post_init__(self) -> None:
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ModelError(f"RayleighDamping: {name} = {value!r}; give a finite number >= 0.")

    def terms(self, mass: np.ndarray, stiffness: np.ndarray) -> tuple[tuple[ScaledMatrix, ...], tuple[str, ...]]:
        return (ScaledMatrix("alpha", float(self.alpha), mass), ScaledMatrix("beta", float(self.beta), stiffness)), ()


@dataclasses.dataclass(frozen=True)
class ModalDamping(AbstractDamping):
    """Damping ratios of the reduced model's own (free-interface) modes, the elastic ones in
    the order of frequency: ``D_r = sum_k 2 zeta_k omega_k (M_r phi_k)(M_r phi_k)^T`` with
    ``phi_k`` normalized so that ``phi_k^T M_r phi_k = 1`` (then ``phi_k^T D_r phi_k =
    2 zeta_k omega_k``).  Rigid-body modes (``omega = 0``) are undamped.

    ``ratios`` is one ratio for every elastic mode (one term, parameter ``zeta``) or one per
    mode from the lowest (terms ``zeta_1``, ``zeta_2``, ...; modes beyond them undamped, with
    a note).
    """

    ratios: float | tuple[float, ...]

    def __post_init__(self) -> None:
        values = self.ratios if isinstance(self.ratios, tuple) else (self.ratios,)
        if not values or any(not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 for v in values):
            raise ModelError(f"ModalDamping: ratios = {self.ratios!r}; give a ratio >= 0 (0.02 is 2 %) or a tuple of "
                             "them.")

    def terms(self, mass: np.ndarray, stiffness: np.ndarray) -> tuple[tuple[ScaledMatrix, ...], tuple[str, ...]]:
        values, vectors = lowest_modes(stiffness, mass, stiffness.shape[0])
        zero = zero_threshold(stiffness, mass)
        elastic = np.flatnonzero(values > zero)
        omega = np.sqrt(values[elastic])
        shapes = mass @ vectors[:, elastic]
        if not isinstance(self.ratios, tuple):
            matrix = (shapes * (2 * omega)) @ shapes.T
            return (ScaledMatrix("zeta", float(self.ratios), matrix),), ()
        terms = tuple(ScaledMatrix(f"zeta_{k + 1}", float(ratio), 2 * omega[k] * np.outer(shapes[:, k], shapes[:, k]))
                      for k, ratio in enumerate(self.ratios[:elastic.size]))
        notes = []
        if len(self.ratios) < elastic.size:
            notes.append(f"modal damping: {len(self.ratios)} ratios for {elastic.size} elastic modes of the reduced "
                         f"model; modes {len(self.ratios) + 1} to {elastic.size} are undamped.")
        if len(self.ratios) > elastic.size:
            notes.append(f"modal damping: {len(self.ratios)} ratios but only {elastic.size} elastic modes; the last "
                         f"{len(self.ratios) - elastic.size} ratios are unused.")
        return terms, tuple(notes)


@dataclasses.dataclass(frozen=True, eq=False)
class ReducedModel:
    """A reduced flexible body (module docstring): ``u = transformation @ q``.

    Attributes
    ----------
    method : AbstractReduction
    mass, stiffness, damping : numpy.ndarray (n, n)
        The reduced matrices (read-only); ``damping`` is the sum of :attr:`damping_terms`.
    damping_terms : tuple of ScaledMatrix
        The damping, term by term, linear in its parameter.
    transformation : numpy.ndarray (FE DOFs, n)
        ``T``: FE displacements of the reduced coordinates (node output recovery).
    coordinates : tuple of str
        What each reduced coordinate is: ``"node 3 uy"`` (an interface DOF) or ``"mode 2"``.
    interface_dofs : numpy.ndarray of int
        FE DOF indices of the interface DOFs (the first reduced coordinates); empty for
        free-interface modes.
    frequencies : numpy.ndarray
        Frequencies [Hz] of the kept normal modes (fixed-interface for Craig-Bampton; for
        free-interface modes the rigid-body ones, if kept, first).
    rigid_body_modes : int
        Rigid-body modes of the FE model (module docstring).
    notes : tuple of str
        What the user should know (no mode kept, repeated frequencies, cache notes).
    fe_key : str
        The fingerprint of the FE model reduced.
    """

    method: AbstractReduction
    mass: np.ndarray
    stiffness: np.ndarray
    damping: np.ndarray
    damping_terms: tuple[ScaledMatrix, ...]
    transformation: np.ndarray
    coordinates: tuple[str, ...]
    interface_dofs: np.ndarray
    frequencies: np.ndarray
    rigid_body_modes: int
    notes: tuple[str, ...]
    fe_key: str

    @property
    def size(self) -> int:
        """Number of reduced coordinates."""
        return int(self.mass.shape[0])

    def system_frequencies(self) -> np.ndarray:
        """Frequencies [Hz] of the reduced model as it stands (free interface): rigid-body
        modes at about zero first."""
        values, _ = lowest_modes(self.stiffness, self.mass, self.size)
        return np.sqrt(np.clip(values, 0.0, None)) / (2 * np.pi)


@dataclasses.dataclass(frozen=True, eq=False)
class _Basis:
    """What the cache holds: the reduction without damping."""

    transformation: np.ndarray
    mass: np.ndarray
    stiffness: np.ndarray
    frequencies: np.ndarray
    interface_dofs: np.ndarray
    coordinates: tuple[str, ...]
    rigid_body_modes: int
    notes: tuple[str, ...]


def _lowest_modes(stiffness: sp.csr_matrix, mass: sp.csr_matrix, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``count`` lowest eigenpairs of ``K x = lambda M x`` (``x^T M x = 1``; :func:`.fe.lowest_modes`)."""
    return lowest_modes(stiffness, mass, count)


def _modes_below(stiffness: sp.csr_matrix, mass: sp.csr_matrix, limit: float) -> tuple[np.ndarray, np.ndarray]:
    """Every eigenpair with ``lambda <= limit`` (and one more, to see the next frequency)."""
    n = stiffness.shape[0]
    count = min(20, n)
    while True:
        values, vectors = _lowest_modes(stiffness, mass, count)
        if values[-1] > limit or count == n:
            keep = int(np.searchsorted(values, limit, side="right"))
            return values[:keep + 1], vectors[:, :keep + 1]
        if count >= MAX_LIMIT_MODES:
            raise ModelError(f"the frequency limit keeps more than {MAX_LIMIT_MODES} modes (the "
                             f"{count}th is at {math.sqrt(max(values[-1], 0)) / (2 * math.pi):.4g} Hz); give a lower "
                             "limit (in Hz, not rad/s) or ModeCount.")
        count = min(2 * count, n, MAX_LIMIT_MODES)


def _select(stiffness: sp.csr_matrix, mass: sp.csr_matrix, selection: AbstractModeSelection, skip: int,
            what: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The selected modes after ``skip`` rigid ones: values, vectors and notes (no mode
    kept, repeated frequencies, a cut through a group)."""
    n = stiffness.shape[0]
    available = n - skip
    notes = []
    if isinstance(selection, ModeCount):
        if selection.count > available:
            raise ModelError(f"{what}: ModeCount({selection.count}) but the model has only {available} "
                             f"{'elastic ' if skip else ''}modes; give at most {available}.")
        want = selection.count + skip
        values, vectors = _lowest_modes(stiffness, mass, min(want + 1, n)) if want else (np.zeros(0), np.zeros((n, 0)))
        kept = want
    else:
        assert isinstance(selection, FrequencyLimit)
        values, vectors = _modes_below(stiffness, mass, (2 * math.pi * selection.hz) ** 2)
        kept = int(np.searchsorted(values, (2 * math.pi * selection.hz) ** 2, side="right"))
        kept = max(kept, skip)
        if kept == skip:
            first = math.sqrt(max(values[skip], 0.0)) / (2 * math.pi) if values.size > skip else float("nan")
            notes.append(f"{what}: no {'elastic ' if skip else ''}mode below {selection.hz:g} Hz (the first is at "
                         f"{first:.4g} Hz); "
                         + ("the reduction is Guyan's static condensation." if what == "Craig-Bampton"
                            else "only the rigid-body modes are kept."))
    frequencies = np.sqrt(np.clip(values, 0.0, None)) / (2 * np.pi)
    for start in range(skip, min(kept, frequencies.size) - 1):
        a, b = frequencies[start], frequencies[start + 1]
        if abs(b - a) <= REPEATED * b:
            notes.append(f"{what}: modes {start + 1 - skip} and {start + 2 - skip} share the frequency {a:.6g} Hz "
                         "(a symmetric section?); their shapes are any basis of that eigenspace: compare subspaces, "
                         "not single modes.")
    if skip < kept < frequencies.size and \
            abs(frequencies[kept] - frequencies[kept - 1]) <= REPEATED * frequencies[kept]:
        notes.append(f"{what}: the selection keeps mode {kept - skip} but not mode {kept + 1 - skip} of the same "
                     f"frequency {frequencies[kept]:.6g} Hz, so the basis depends on round-off; keep "
                     f"{kept + 1 - skip} modes.")
    return values[:kept], vectors[:, :kept], notes


def _signed(vectors: np.ndarray) -> np.ndarray:
    """Each column with its largest entry positive (deterministic shapes)."""
    if vectors.size == 0:
        return vectors
    rows = np.argmax(np.abs(vectors), axis=0)
    return vectors * np.sign(vectors[rows, np.arange(vectors.shape[1])])


def _craig_bampton(model: FEModel, method: CraigBampton) -> _Basis:
    boundary = model.dof_indices(method.interface_nodes)
    internal = np.setdiff1d(np.arange(model.size), boundary)
    stiffness, mass = model.stiffness, model.mass
    n_b = boundary.size
    notes: list[str] = []
    if internal.size == 0:
        notes.append("Craig-Bampton: every DOF is an interface DOF; the model is not reduced.")
        transformation = np.eye(model.size)[:, boundary]
        frequencies = np.zeros(0)
        order_labels = [model.dof_label(int(k)) for k in boundary]
    else:
        k_ii = stiffness[internal][:, internal].tocsc()
        m_ii = mass[internal][:, internal].tocsc()
        k_ib = stiffness[internal][:, boundary]
        probe, _ = _lowest_modes(k_ii, m_ii, 1)
        zero = zero_threshold(k_ii, m_ii)
        if probe[0] < zero:
            values_all, shapes_all = _lowest_modes(k_ii, m_ii, min(12, internal.size))
            mechanisms = int(np.sum(values_all < zero))
            worst = internal[int(np.argmax(np.abs(shapes_all[:, 0])))]
            raise ModelError(f"Craig-Bampton: the interface nodes {list(method.interface_nodes)} leave the body free "
                             f"to move with the interface fixed ({mechanisms} fixed-interface mechanism mode"
                             f"{'s' if mechanisms > 1 else ''}, largest motion at DOF {model.dof_label(int(worst))}): "
                             "K_ii is singular.  Add interface nodes that hold the body statically determinate "
                             "(three non-collinear nodes of a solid mesh, or one node with rotations), or use "
                             f"FreeInterfaceModes.  (If the interface does hold the body, its spectrum is too wide "
                             f"to tell: first eigenvalue {values_all[0]:.3g} against max K_jj/M_jj "
                             f"{zero / ZERO_EIGENVALUE:.3g}, below their ratio {ZERO_EIGENVALUE:g}; coarsen the "
                             "mesh, as a slender Euler-Bernoulli beam of more than about 1 000 elements does.)")
        lu = spla.splu(k_ii)
        psi = -lu.solve(k_ib.toarray())
        values, vectors, more = _select(k_ii, m_ii, method.modes, 0, "Craig-Bampton")
        notes += more
        vectors = _signed(vectors)
        frequencies = np.sqrt(np.clip(values, 0.0, None)) / (2 * np.pi)
        transformation = np.zeros((model.size, n_b + values.size))
        transformation[boundary, np.arange(n_b)] = 1.0
        transformation[np.ix_(internal, np.arange(n_b))] = psi
        transformation[np.ix_(internal, n_b + np.arange(values.size))] = vectors
        order_labels = [model.dof_label(int(k)) for k in boundary] + [f"mode {k + 1}" for k in range(values.size)]
    reduced_mass = transformation.T @ (mass @ transformation)
    reduced_stiffness = transformation.T @ (stiffness @ transformation)
    reduced_mass, reduced_stiffness = _symmetric(reduced_mass), _symmetric(reduced_stiffness)
    # Rigid-body modes: the null space of the interface's condensed stiffness K_bb + K_bi Psi
    # (the constraint-mode block of K_r; module docstring).
    condensed = reduced_stiffness[:n_b, :n_b]
    # Its zero eigenvalues are round-off of the cancellation K_bb + K_bi Psi, relative to K_bb.
    condensed_mass = reduced_mass[:n_b, :n_b]
    condensed_values = scipy.linalg.eigh(condensed, condensed_mass, eigvals_only=True)
    bb = stiffness[boundary][:, boundary]
    rigid = int(np.sum(condensed_values < zero_threshold(bb, sp.csr_matrix(condensed_mass))))
    return _Basis(transformation, reduced_mass, reduced_stiffness, frequencies, boundary, tuple(order_labels), rigid,
                  tuple(notes))


def _free_interface(model: FEModel, method: FreeInterfaceModes) -> _Basis:
    stiffness, mass = model.stiffness, model.mass
    zero = zero_threshold(stiffness, mass)
    count = min(7, model.size)
    probe, _ = _lowest_modes(stiffness, mass, count)
    while np.all(probe < zero) and count < model.size:  # more than one free part
        count = min(2 * count, model.size)
        probe, _ = _lowest_modes(stiffness, mass, count)
    rigid = int(np.sum(probe < zero))
    values, vectors, notes = _select(stiffness, mass, method.modes, rigid, "free-interface modes")
    if rigid and not method.keep_rigid_body_modes:
        values, vectors = values[rigid:], vectors[:, rigid:]
        notes.append(f"free-interface modes: the {rigid} rigid-body modes are dropped (keep_rigid_body_modes=False); "
                     "the reference frame of the formulation carries the rigid motion.")
    elif rigid:
        # An arbitrary basis of the null space from the eigen-solver: make it M-orthonormal
        # and clean (its eigenvalues are zero but for round-off).
        values = values.copy()
        values[:rigid] = 0.0
    vectors = _signed(vectors)
    frequencies = np.sqrt(np.clip(values, 0.0, None)) / (2 * np.pi)
    rigid_kept = rigid if method.keep_rigid_body_modes else 0
    labels = tuple([f"rigid-body mode {k + 1}" for k in range(rigid_kept)]
                   + [f"mode {k + 1}" for k in range(values.size - rigid_kept)])
    reduced_mass = _symmetric(vectors.T @ (mass @ vectors))
    reduced_stiffness = _symmetric(vectors.T @ (stiffness @ vectors))
    return _Basis(vectors, reduced_mass, reduced_stiffness, frequencies, np.zeros(0, dtype=np.int64), labels, rigid,
                  tuple(notes))


def _symmetric(matrix: np.ndarray) -> np.ndarray:
    return 0.5 * (matrix + matrix.T)


_ARRAYS = ("transformation", "mass", "stiffness", "frequencies", "interface_dofs")


def _cache_key(model: FEModel, method: AbstractReduction) -> str:
    return fingerprint("flexible reduction", str(CACHE_FORMAT), source_fingerprint(), model.key, repr(method),
                       np.__version__, scipy.__version__)


def _basis(model: FEModel, method: AbstractReduction, cache: BuildCache, notes: list[str]) -> _Basis:
    computed: list[_Basis] = []

    def build(folder: Path) -> None:
        basis = _compute(model, method)
        computed.append(basis)
        buffer = io.BytesIO()
        np.savez(buffer, **{name: getattr(basis, name) for name in _ARRAYS})
        (folder / "reduction.npz").write_bytes(buffer.getvalue())
        (folder / "reduction.json").write_text(json.dumps({
            "coordinates": list(basis.coordinates), "rigid_body_modes": basis.rigid_body_modes,
            "notes": list(basis.notes), "fe_key": model.key, "method": repr(method)}))

    _, files = cache.read(CACHE_KIND, _cache_key(model, method), build, ("reduction.npz", "reduction.json"),
                          note=notes.append)
    if computed:
        return computed[0]
    with np.load(io.BytesIO(files["reduction.npz"]), allow_pickle=False) as arrays:
        loaded = {name: np.array(arrays[name]) for name in _ARRAYS}
    meta = json.loads(files["reduction.json"])
    return _Basis(coordinates=tuple(meta["coordinates"]), rigid_body_modes=int(meta["rigid_body_modes"]),
                  notes=tuple(meta["notes"]), **loaded)


def _compute(model: FEModel, method: AbstractReduction) -> _Basis:
    if isinstance(method, CraigBampton):
        return _craig_bampton(model, method)
    if isinstance(method, FreeInterfaceModes):
        return _free_interface(model, method)
    raise ModelError(f"reduce: method {method!r}; give CraigBampton(interface_nodes, modes) or "
                     "FreeInterfaceModes(modes).")


def reduce(model: FEModel, method: AbstractReduction, *, damping: AbstractDamping | None = None,
           cache: BuildCache | None = None) -> ReducedModel:
    """Reduce ``model`` by ``method`` (module docstring), with ``damping``, through ``cache``.

    Parameters
    ----------
    model : FEModel
    method : CraigBampton or FreeInterfaceModes
    damping : NoDamping (default), RayleighDamping or ModalDamping
        Applied to the reduced model; a damping matrix of the FE model is projected and added
        as a term with ``parameter=None``.
    cache : BuildCache, optional
        Default :meth:`BuildCache.default`; its notes travel in :attr:`ReducedModel.notes`.

    Raises
    ------
    ModelError
        A bad argument, or a singular reduction (module docstring).
    """
    if not isinstance(model, FEModel):
        raise ModelError(f"reduce: model is a {type(model).__name__}; give an FEModel (fmi_adjoint.flexible).")
    if not isinstance(method, AbstractReduction):
        raise ModelError(f"reduce: method {method!r}; give CraigBampton(interface_nodes, modes) or "
                         "FreeInterfaceModes(modes).")
    damping = NoDamping() if damping is None else damping
    if not isinstance(damping, AbstractDamping):
        raise ModelError(f"reduce: damping {damping!r}; give NoDamping(), RayleighDamping(alpha, beta) or "
                         "ModalDamping(ratios).")
    notes: list[str] = []
    basis = _basis(model, method, BuildCache.default() if cache is None else cache, notes)
    terms, damping_notes = damping.terms(basis.mass, basis.stiffness)
    if model.damping is not None:
        projected = basis.transformation.T @ (model.damping @ basis.transformation)
        terms = terms + (ScaledMatrix(None, 1.0, _symmetric(projected)),)
    total = sum((term.term() for term in terms), np.zeros_like(basis.mass))
    arrays = [basis.mass, basis.stiffness, total, basis.transformation, basis.interface_dofs, basis.frequencies]
    for array in arrays:
        array.setflags(write=False)
    for term in terms:
        if isinstance(term.matrix, np.ndarray):
            term.matrix.setflags(write=False)
    return ReducedModel(method, basis.mass, basis.stiffness, total, terms, basis.transformation, basis.coordinates,
                        basis.interface_dofs, basis.frequencies, basis.rigid_body_modes,
                        basis.notes + tuple(damping_notes) + tuple(notes), model.key)

