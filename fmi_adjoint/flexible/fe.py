"""A finite-element model as a checked value: nodes, DOF numbering, mass and stiffness matrices.

Flexible bodies start from the mass and stiffness matrices of a finite-element model
(Vanpaemel et al., seed 003, Sec. 3 and 5.1: the component is reduced by Craig-Bampton from
its FE matrices; Nishi et al., seed 004: a beam of 10 elements).  Whether the matrices come
from the built-in beams (:mod:`.beams`) or an FE tool (:mod:`.importers`), they arrive here,
are checked once, and travel on as a frozen :class:`FEModel`.

DOF numbering
    Row ``k`` of the matrices is the DOF ``dofs[k] = (node id, component)`` with the component
    ``0..5`` = ``ux uy uz rx ry rz`` (:data:`DOF_NAMES`); a node of a solid mesh has only the
    first three.  Every DOF belongs to a node with coordinates; a node may have no DOF (an
    orientation node of a beam mesh).

The checks (each a :class:`~fmi_adjoint.errors.ModelError` naming the node and DOF, or the
matrix, and the fix):

* shapes agree with the DOF table, entries are finite, node ids are unique positive integers;
* ``M``, ``K`` (and ``D``) are symmetric to :data:`SYMMETRY_TOLERANCE` of their largest entry
  (then symmetrized exactly: text formats print a limited number of digits);
* ``M`` is positive definite on the free DOFs (a DOF with no mass at all is named: the usual
  cause is a rotation DOF of a solid node that an exporter kept);
* ``K`` is positive semi-definite: the generalized eigenvalues of ``(K, M)`` are not below
  ``-`` :data:`DEFINITENESS_TOLERANCE` times ``trace K / trace M``.  The null space of ``K``, its
  rigid-body modes (6 for a free body), is allowed: :mod:`.reduction` counts it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable
from typing import Any

import numpy as np
import scipy.linalg
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..errors import ModelError

__all__ = ["DOF_NAMES", "FEModel", "ScaledMatrix", "lowest_modes", "natural_frequencies", "planar_part",
           "spectral_scale", "zero_threshold"]

#: The six DOF components of a node, in the order of the DOF table (0..5).
DOF_NAMES = ("ux", "uy", "uz", "rx", "ry", "rz")
#: Relative asymmetry ``max |A - A^T| / max |A|`` accepted (then symmetrized): text files print
#: 7 to 17 significant digits.
SYMMETRY_TOLERANCE = 1e-6
#: A generalized eigenvalue of ``(K, M)`` below ``-DEFINITENESS_TOLERANCE * trace K / trace M``
#: (the order of the largest eigenvalue) makes ``K`` indefinite: rigid-body modes computed in
#: floating point give about ``1e-16`` of it.
DEFINITENESS_TOLERANCE = 1e-8
#: Up to this many DOFs the definiteness checks and eigen-solutions are dense (exact, fast);
#: above, sparse shift-invert Lanczos.
DENSE_LIMIT = 1500
#: Eigen-solutions (:func:`lowest_modes`) are scaled by ``max_j K_jj / M_jj``, an estimate of the
#: largest eigenvalue of ``(K, M)`` (:func:`spectral_scale`), whose round-off every computed
#: eigenvalue carries (a zero one too: about eps times it).  The shift ``s`` is this fraction
#: of it: dense, ``K + s M`` must stay safely positive definite for its Cholesky factorization;
#: sparse (Lanczos on an LU), the shift must not lie far from the lowest eigenvalues, or the
#: iteration separates them poorly.
DENSE_SHIFT = 1e-8
SPARSE_SHIFT = 1e-10
#: A computed eigenvalue below ``ZERO_EIGENVALUE`` times the spectral scale is zero (a rigid-body
#: or mechanism mode): 1e4 times the round-off.  So the first elastic eigenvalue must lie above
#: 1e-12 of the largest: an Euler-Bernoulli beam (spread ~ N^4 for N Hermite elements without
#: rotary inertia) up to about 1 000 elements, any solid or shell model of practical size.
ZERO_EIGENVALUE = 1e-12
#: DOFs one FE model may have (a reduction of a larger model belongs in the FE tool).
MAX_DOFS = 2_000_000


@dataclasses.dataclass(frozen=True, eq=False)
class ScaledMatrix:
    """One term ``value * matrix`` of a matrix that is linear in a parameter.

    A beam's stiffness ``K = E K_E + G K_G`` (Euler-Bernoulli, :mod:`.beams`) or a Rayleigh
    damping ``D = alpha M + beta K`` (:mod:`.reduction`) is the sum of its terms; identification
    scales a term by its parameter (the structured :class:`~fmi_adjoint.structured.MatrixTerm`
    with the factor ``parameter``).

    Attributes
    ----------
    parameter : str or None
        What the term is linear in (``"E"``, ``"G"``, ``"rho"``, ``"alpha"``, ``"zeta_3"``), or
        None for a term that is not linear in any single parameter (Timoshenko bending, see
        :mod:`.beams`): it scales only with the whole matrix.
    value : float
        The parameter's value the model was built with.
    matrix : scipy.sparse.csr_matrix or numpy.ndarray
        The term per unit of the parameter (the whole term if ``parameter`` is None).
    """

    parameter: str | None
    value: float
    matrix: sp.csr_matrix | np.ndarray

    def term(self) -> sp.csr_matrix | np.ndarray:
        """``value * matrix``."""
        return self.value * self.matrix


def _read_only(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


def _sparse(matrix: object, name: str, n: int, source: str) -> sp.csr_matrix:
    try:
        result = sp.csr_matrix(matrix, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ModelError(f"{source}: the {name} matrix is not a matrix of numbers ({exc}); give a scipy sparse "
                         "matrix or a numpy array.") from None
    if result.shape != (n, n):
        raise ModelError(f"{source}: the {name} matrix is {result.shape[0]} x {result.shape[1]}, the DOF table has "
                         f"{n} DOFs; give one row and column per DOF of the table.")
    if not np.all(np.isfinite(result.data)):
        raise ModelError(f"{source}: the {name} matrix has entries that are not finite numbers (nan or inf); "
                         "export it again from the FE tool.")
    result.sum_duplicates()
    result.eliminate_zeros()
    result.sort_indices()
    return result


@dataclasses.dataclass(frozen=True, eq=False)
class FEModel:
    """A checked finite-element model (module docstring): a value, its numpy arrays read-only
    (the sparse matrices are not made read-only, which scipy's own operations refuse: do not
    change them in place).

    Parameters
    ----------
    node_ids : sequence of int
        Positive, unique node ids.
    coordinates : array of shape (nodes, 3)
        Node coordinates in the body frame [m].
    dofs : array of shape (ndof, 2)
        ``(node id, component 0..5)`` of each row/column of the matrices (:data:`DOF_NAMES`).
    mass, stiffness : sparse or dense (ndof, ndof)
        Symmetric; ``M`` positive definite, ``K`` positive semi-definite.  Stored as
        symmetrized CSR matrices.
    damping : sparse or dense (ndof, ndof), optional
        A physical damping matrix (symmetric; definiteness is not checked).
    source : str
        Where the model came from (``"beams: 10 Euler-Bernoulli elements"``, a file name), for
        messages.

    Attributes
    ----------
    key : str
        SHA-256 of every array (:meth:`fingerprint`), computed once when built.

    Raises
    ------
    ModelError
        One of the checks of the module docstring fails; the message names the node, the DOF
        or the matrix and the fix.
    """

    node_ids: np.ndarray
    coordinates: np.ndarray
    dofs: np.ndarray
    mass: sp.csr_matrix
    stiffness: sp.csr_matrix
    damping: sp.csr_matrix | None = None
    source: str = "FE model"
    key: str = dataclasses.field(init=False, repr=False)
    _index: dict[tuple[int, int], int] = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        source = self.source
        ids = np.asarray(self.node_ids)
        if ids.ndim != 1 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer):
            raise ModelError(f"{source}: node ids must be a non-empty list of integers; got {ids.dtype} of shape "
                             f"{ids.shape}.")
        ids = ids.astype(np.int64)
        if np.any(ids <= 0):
            raise ModelError(f"{source}: node id {int(ids[ids <= 0][0])} is not positive; number nodes from 1.")
        unique, counts = np.unique(ids, return_counts=True)
        if np.any(counts > 1):
            raise ModelError(f"{source}: node {int(unique[counts > 1][0])} is listed twice; give each node once.")
        xyz = np.asarray(self.coordinates, dtype=float)
        if xyz.shape != (ids.size, 3) or not np.all(np.isfinite(xyz)):
            raise ModelError(f"{source}: coordinates must be finite, one (x, y, z) row per node ({ids.size} x 3); got "
                             f"shape {xyz.shape}.")
        table = np.asarray(self.dofs)
        if table.ndim != 2 or table.shape[1] != 2 or table.shape[0] == 0 or not np.issubdtype(table.dtype, np.integer):
            raise ModelError(f"{source}: the DOF table must be integer rows (node id, component 0..5); got shape "
                             f"{table.shape}.")
        if table.shape[0] > MAX_DOFS:
            raise ModelError(f"{source}: {table.shape[0]} DOFs, more than {MAX_DOFS}; reduce the model in the FE tool "
                             "first (superelement / substructure).")
        table = table.astype(np.int64)
        position = {int(node): k for k, node in enumerate(ids)}
        for node, component in table:
            if int(node) not in position:
                raise ModelError(f"{source}: a DOF belongs to node {int(node)}, which has no coordinates; add the node "
                                 "to the node list (or correct the DOF map).")
            if not 0 <= component < 6:
                raise ModelError(f"{source}: node {int(node)} has DOF component {int(component)}; components are 0..5 "
                                 f"({' '.join(DOF_NAMES)}); drop other DOFs (temperature, warping) in the export.")
        index: dict[tuple[int, int], int] = {}
        for k, (node, component) in enumerate(table):
            key = (int(node), int(component))
            if key in index:
                raise ModelError(f"{source}: DOF {_label(*key)} appears twice in the DOF table (rows {index[key]} and "
                                 f"{k}); each DOF must be numbered once.")
            index[key] = k
        n = table.shape[0]
        mass_matrix = _symmetric(_sparse(self.mass, "mass", n, source), "mass", source)
        stiffness_matrix = _symmetric(_sparse(self.stiffness, "stiffness", n, source), "stiffness", source)
        damping_matrix = (None if self.damping is None
                          else _symmetric(_sparse(self.damping, "damping", n, source), "damping", source))
        for name, value in (("node_ids", _read_only(ids)), ("coordinates", _read_only(xyz)),
                            ("dofs", _read_only(table)), ("mass", mass_matrix), ("stiffness", stiffness_matrix),
                            ("damping", damping_matrix), ("_index", index)):
            object.__setattr__(self, name, value)
        _check_mass(self)
        _check_stiffness(self)
        object.__setattr__(self, "key", _fingerprint(self))

    def __repr__(self) -> str:
        return f"FEModel({self.source!r}, {self.node_ids.size} nodes, {self.size} DOFs)"

    @property
    def size(self) -> int:
        """Number of DOFs."""
        return int(self.dofs.shape[0])

    def dof_label(self, k: int) -> str:
        """``"node 7 uz"``: DOF ``k`` for messages."""
        return _label(int(self.dofs[k, 0]), int(self.dofs[k, 1]))

    def dof_index(self, node: int, component: int) -> int:
        """The row of the DOF ``component`` (0..5, :data:`DOF_NAMES`) of ``node``.

        Raises
        ------
        ModelError
            The node has no such DOF.
        """
        try:
            return self._index[(int(node), int(component))]
        except KeyError:
            raise ModelError(f"{self.source}: there is no DOF {_label(int(node), int(component))}; give a node and "
                             "component of the DOF table.") from None

    def dof_indices(self, nodes: Iterable[int]) -> np.ndarray:
        """The row indices of every DOF of ``nodes`` (sorted).

        Raises
        ------
        ModelError
            A node is not in the model, or has no DOF.
        """
        wanted = [int(node) for node in nodes]
        known = set(int(node) for node in self.node_ids)
        for node in wanted:
            if node not in known:
                raise ModelError(f"{self.source}: node {node} is not in the model (nodes {_span(self.node_ids)}); "
                                 "give node ids of the FE model.")
        rows = np.flatnonzero(np.isin(self.dofs[:, 0], wanted))
        missing = sorted(set(wanted) - set(int(node) for node in self.dofs[rows, 0]))
        if missing:
            raise ModelError(f"{self.source}: node {missing[0]} has no DOF in the matrices; choose a node that carries "
                             "DOFs.")
        return rows

    def fingerprint(self) -> str:
        """SHA-256 of every array of the model (the key of its reductions in the build cache)."""
        return self.key


def _fingerprint(model: FEModel) -> str:
    digest = hashlib.sha256(b"FEModel 1")
    for array in (model.node_ids, model.coordinates, model.dofs):
        _hash_array(digest, array)
    for matrix in (model.mass, model.stiffness, model.damping):
        if matrix is None:
            digest.update(b"none")
        else:
            for array in (matrix.indptr, matrix.indices, matrix.data):
                _hash_array(digest, array)
    return digest.hexdigest()


def _hash_array(digest: Any, array: np.ndarray) -> None:
    contiguous = np.ascontiguousarray(array, dtype=np.float64 if array.dtype.kind == "f" else np.int64)
    digest.update(f"{contiguous.dtype.str}{contiguous.shape}".encode())
    digest.update(contiguous.tobytes())


def _label(node: int, component: int) -> str:
    name = DOF_NAMES[component] if 0 <= component < 6 else f"component {component}"
    return f"node {node} {name}"


def _span(ids: np.ndarray) -> str:
    return f"{int(ids.min())}..{int(ids.max())}" if ids.size > 1 else str(int(ids[0]))


def _symmetric(matrix: sp.csr_matrix, name: str, source: str) -> sp.csr_matrix:
    largest = float(abs(matrix).max()) if matrix.nnz else 0.0
    difference = (matrix - matrix.T).tocoo()
    if difference.nnz:
        k = int(np.argmax(np.abs(difference.data)))
        if abs(difference.data[k]) > SYMMETRY_TOLERANCE * largest:
            raise ModelError(f"{source}: the {name} matrix is not symmetric: entry ({difference.row[k]}, "
                             f"{difference.col[k]}) differs from its transpose by {abs(difference.data[k]):.3g} "
                             f"(largest entry {largest:.3g}); export the full symmetric matrix (both triangles or "
                             "a symmetric storage flag).")
    result = ((matrix + matrix.T) * 0.5).tocsr()
    result.eliminate_zeros()
    result.sort_indices()
    return result


def _positive_definite(matrix: sp.spmatrix) -> bool:
    """Whether the symmetric ``matrix`` is positive definite: a sparse LU with a symmetric
    fill-reducing permutation and diagonal pivots is ``P A P^T = L D L^T``-like, so its pivots
    are all positive exactly then (Sylvester).  Dense Cholesky where SuperLU pivots off the
    diagonal after all."""
    try:
        lu = spla.splu(sp.csc_matrix(matrix), permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                       options={"SymmetricMode": True})
    except RuntimeError:  # an exactly singular pivot
        return False
    if np.array_equal(lu.perm_r, lu.perm_c):
        return bool(np.all(lu.U.diagonal() > 0))
    try:  # pragma: no cover - SuperLU kept the diagonal pivots on every matrix tried
        scipy.linalg.cholesky(sp.csr_matrix(matrix).toarray())
    except np.linalg.LinAlgError:  # pragma: no cover
        return False
    return True  # pragma: no cover


def _check_mass(model: FEModel) -> None:
    mass = model.mass
    diagonal = mass.diagonal()
    bad = np.flatnonzero(diagonal <= 0.0)
    if bad.size:
        k = int(bad[0])
        raise ModelError(f"{model.source}: DOF {model.dof_label(k)} has {'no' if diagonal[k] == 0 else 'negative'} "
                         f"mass (M[{k},{k}] = {diagonal[k]:.3g}), so M is not positive definite; remove the DOF from "
                         "the export (a rotation of a solid node) or use a consistent or rotary-inertia mass.")
    if _positive_definite(mass):
        return
    if model.size <= DENSE_LIMIT:
        values, vectors = scipy.linalg.eigh(mass.toarray(), subset_by_index=[0, 0])
    else:
        values, vectors = spla.eigsh(mass, k=1, which="SA")
    k = int(np.argmax(np.abs(vectors[:, 0])))
    raise ModelError(f"{model.source}: the mass matrix is not positive definite (eigenvalue {values[0]:.3g}, largest "
                     f"at DOF {model.dof_label(k)}); check the density and the mass export of that node.")


def _check_stiffness(model: FEModel) -> None:
    # K + s M is positive definite exactly when every eigenvalue of (K, M) exceeds -s: one
    # factorization answers; the eigenpair is computed only for the message.
    scale = float(np.sum(np.abs(model.stiffness.diagonal())) / np.sum(model.mass.diagonal()))
    shift = DEFINITENESS_TOLERANCE * scale
    if _positive_definite(model.stiffness + shift * model.mass):
        return
    if model.size <= DENSE_LIMIT:
        values, vectors = scipy.linalg.eigh(model.stiffness.toarray(), model.mass.toarray(), subset_by_index=[0, 0])
    else:
        # The eigenvalue nearest -trace K / trace M: a negative one if there is any of that order.
        values, vectors = spla.eigsh(model.stiffness.tocsc(), k=1, M=model.mass.tocsc(), sigma=-scale, which="LM")
    k = int(np.argmax(np.abs(vectors[:, 0])))
    raise ModelError(f"{model.source}: the stiffness matrix is not positive semi-definite (eigenvalue "
                     f"omega^2 = {values[0]:.3g} of (K, M), against trace K / trace M = {scale:.3g}; mode largest at "
                     f"DOF {model.dof_label(k)}); check the sign and units of the stiffness export (a negative "
                     "spring or a geometric-stiffness term).")


def _dense(stiffness: Any) -> bool:
    return stiffness.shape[0] <= DENSE_LIMIT or not sp.issparse(stiffness)


def spectral_scale(stiffness: Any, mass: Any) -> float:
    """``max_j |K_jj| / M_jj``: the order of the largest eigenvalue of ``(K, M)`` (a lower
    bound by the Rayleigh quotient of a unit vector ``e_j``)."""
    diagonal_k = stiffness.diagonal() if sp.issparse(stiffness) else np.diag(stiffness)
    diagonal_m = mass.diagonal() if sp.issparse(mass) else np.diag(mass)
    return float(np.max(np.abs(diagonal_k) / diagonal_m))


def zero_threshold(stiffness: Any, mass: Any) -> float:
    """Eigenvalues of ``(K, M)`` from :func:`lowest_modes` below this are zero (rigid-body or
    mechanism modes): :data:`ZERO_EIGENVALUE` times :func:`spectral_scale`."""
    return ZERO_EIGENVALUE * spectral_scale(stiffness, mass)


def lowest_modes(stiffness: Any, mass: Any, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``count`` lowest eigenpairs of ``K x = lambda M x``, ``x^T M x = 1``, ascending.

    Shift-invert in both paths: the eigenvalues ``mu = 1 / (lambda + s)`` of
    ``M x = mu (K + s M) x``, ``s`` = :data:`DENSE_SHIFT` or :data:`SPARSE_SHIFT` times
    :func:`spectral_scale` (``K + s M`` is positive definite for a semi-definite ``K``, so a free
    body is fine).  Round-off is then relative to the *lowest* modes, not to the highest: a
    plain dense ``eigh(K, M)`` of a beam of 64 Hermite elements, whose rotational DOFs have
    little mass, loses the first frequency to 6e-7 (Cholesky of ``M``), this to 1e-12.
    Dense up to :data:`DENSE_LIMIT` DOFs, else Lanczos (:func:`scipy.sparse.linalg.eigsh`).
    """
    n = stiffness.shape[0]
    count = min(count, n)
    dense = _dense(stiffness)
    shift = (DENSE_SHIFT if dense else SPARSE_SHIFT) * spectral_scale(stiffness, mass)
    if dense:
        dense_mass = mass.toarray() if sp.issparse(mass) else np.asarray(mass)
        dense_stiffness = stiffness.toarray() if sp.issparse(stiffness) else np.asarray(stiffness)
        mu, vectors = scipy.linalg.eigh(dense_mass, dense_stiffness + shift * dense_mass,
                                        subset_by_index=[n - count, n - 1])
        mu, vectors = mu[::-1], vectors[:, ::-1]
        # x^T (K + s M) x = 1 from eigh; x^T M x = mu then, but normalized directly it holds
        # to round-off rather than to the round-off of mu.
        return 1.0 / mu - shift, vectors / np.sqrt(np.einsum("ij,ij->j", vectors, dense_mass @ vectors))
    # A fixed start vector: ARPACK's default is random, and a reduction must be reproducible.
    start = np.random.default_rng(0).standard_normal(n)
    values, vectors = spla.eigsh(stiffness.tocsc(), k=count, M=mass.tocsc(), sigma=-shift, which="LM", v0=start)
    order = np.argsort(values)
    return values[order], vectors[:, order]


def natural_frequencies(model: FEModel, count: int, *, fixed_nodes: Iterable[int] = ()) -> np.ndarray:
    """The lowest ``count`` natural frequencies [Hz] of ``model`` with the DOFs of ``fixed_nodes``
    clamped (a free body's rigid-body modes come first, at about zero).

    The reference the Craig-Bampton frequencies converge to (:mod:`.reduction`).
    """
    fixed = list(fixed_nodes)
    free = np.setdiff1d(np.arange(model.size), model.dof_indices(fixed) if fixed else [])
    if not 0 < count <= free.size:
        raise ModelError(f"natural_frequencies: count {count}; give 1 to {free.size} (the free DOFs).")
    values, _ = lowest_modes(model.stiffness[free][:, free], model.mass[free][:, free], count)
    return np.sqrt(np.clip(values, 0.0, None)) / (2 * np.pi)


#: The in-plane DOF components of a body in the global x-y plane: ``ux uy rz`` (:func:`planar_part`).
PLANAR_COMPONENTS = (0, 1, 5)
#: A coupling between in-plane and out-of-plane DOFs above this fraction of the largest entry of
#: ``M`` or ``K`` makes :func:`planar_part` refuse the model (exact decoupling gives round-off).
PLANAR_COUPLING = 1e-9


def planar_part(model: FEModel, where: str) -> FEModel:
    """The in-plane part of ``model`` (DOFs ``ux uy rz`` of every node, :data:`PLANAR_COMPONENTS`):
    its motion in the x-y plane, the out-of-plane DOFs held (the planar floating-frame body,
    :class:`fmi_adjoint.mbs.ffrf.PlanarFloatingFrameBody`).

    Exact when the two motions decouple, which is checked: every node in the plane ``z = 0``,
    and the in-plane/out-of-plane blocks of ``M`` and ``K`` zero to :data:`PLANAR_COUPLING` of
    their largest entry (a beam in the x-y plane whose section's principal axes are ``z`` and
    the in-plane normal; Shabana, *Dynamics of Multibody Systems*, Sec. 5.3-5.5, planar case).

    Raises
    ------
    ModelError
        A node off the plane, a node without ``ux`` or ``uy``, or coupled blocks.
    """
    xyz = np.asarray(model.coordinates)
    scale = max(float(np.abs(xyz).max()), 1e-300)
    off = np.flatnonzero(np.abs(xyz[:, 2]) > 1e-12 * scale)
    if off.size:
        raise ModelError(f"{where}: node {int(model.node_ids[off[0]])} of {model.source} is at z = "
                         f"{xyz[off[0], 2]:g}, off the x-y plane of a planar body; lay the FE model in the x-y plane "
                         "(beam direction in x-y), or use the spatial body.")
    keep = np.isin(model.dofs[:, 1], PLANAR_COMPONENTS)
    inside, outside = np.flatnonzero(keep), np.flatnonzero(~keep)
    for name, matrix in (("mass", model.mass), ("stiffness", model.stiffness)):
        coupling = matrix[inside][:, outside]
        largest = max(float(np.abs(matrix).max()), 1e-300)
        if coupling.nnz and float(np.abs(coupling).max()) > PLANAR_COUPLING * largest:
            row, col = np.unravel_index(int(np.argmax(np.abs(coupling.toarray()))), coupling.shape)
            raise ModelError(f"{where}: the {name} matrix of {model.source} couples the in-plane DOF "
                             f"{model.dof_label(int(inside[row]))} with the out-of-plane DOF "
                             f"{model.dof_label(int(outside[col]))}; a planar body needs a model whose in-plane "
                             "motion (ux, uy, rz) decouples (a beam with a section principal axis along z), or use "
                             "the spatial body.")
    for node in np.unique(model.dofs[:, 0]):  # a node without DOFs (a beam's orientation node) is fine
        for component in (0, 1):
            model.dof_index(int(node), component)  # raises, naming the node
    damping = None if model.damping is None else model.damping[inside][:, inside]
    return FEModel(model.node_ids, model.coordinates, model.dofs[inside], model.mass[inside][:, inside],
                   model.stiffness[inside][:, inside], damping, f"{model.source} (in-plane part)")
