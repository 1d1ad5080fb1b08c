"""Flexible bodies in the flexible natural coordinates formulation (FNCF; Vanpaemel et al., seed 003, Sec. 3).

A :class:`FlexibleBody` is a finite-element model (:class:`fmi_adjoint.flexible.FEModel`)
reduced by Craig-Bampton (:func:`fmi_adjoint.flexible.reduce`) whose motion is described by

    q = [sigma  pi  gamma  delta]                                      (Sec. 3.1)

* ``sigma`` (3): the position of the body frame, whose origin is the *reference node*;
* ``pi`` (9): the rotation matrix ``A`` of the frame, column by column (``A[r, c] = pi[3 c + r]``,
  the columns are the frame's axes: rigid *natural* coordinates);
* ``delta`` (``n``): the participation factors of the deformation modes ``Psi``, relative to the
  frame (the reduction with the reference node clamped, see below);
* ``gamma`` (9 ``n``): redundant coordinates ``gamma = delta (x) pi`` (eq. (8)),
  ``gamma[9 k + i] = delta_k pi_i``.

A point ``p`` of the body (a node at ``x_p`` in the frame, deforming by ``Psi_p delta``) is then
at ``u_p = sigma + A x_p + A Psi_p delta``, *linear* in ``q`` (eq. (9)): ``A x_p`` is linear in
``pi`` and ``delta_k A psi_pk`` in ``gamma``.  Its rotation ``R_p = A (I + [phi_p delta]x)``
(``phi_p`` the rotation rows of the modes) is linear too (eq. (10)).  Hence

* a **constant mass matrix** ``M_qq = r_q^T M^FE r_q`` (eq. (11)) over ``sigma, pi, gamma``
  (a :class:`~fmi_adjoint.structured.MatrixTerm` of role MASS, scaled by ``mass_factor``);
* a **constant stiffness matrix** ``Psi^T K^FE Psi`` over ``delta`` (eq. (12)), scaled by
  ``stiffness_factor`` (the identifiable stiffness scale, e.g. ``EI / EI0``), and the reduced
  damping over ``delta``;
* **gravity** ``r_q^T M^FE g``, a constant load per axis;
* **quadratic constraints** (eq. (13)): the orthonormality of ``A`` (6 rows) and ``gamma -
  delta (x) pi = 0`` (9 ``n`` rows);

all structured terms (issue 24, part 2): data, no symbolic work per entry.  The equations are
eqs. (14)-(15); their adjoint needs exactly the constant second derivatives the structured
kernels provide (eqs. (19)-(21)).

The deformation basis is Craig-Bampton's with the reference node among the interface nodes,
whose six constraint columns are dropped: the static constraint modes of the other interface
nodes (the reference node held) and the fixed-interface normal modes (all interface nodes
held) -- the basis of the body clamped at its reference node, so that the frame follows that
node (a *clamped* reference condition; any other choice of frame only re-mixes the rigid
motion).  :class:`NodeMarker` puts a marker on any node (on interface nodes the reduction is
exact for the forces of joints and elements attached there): joints, force elements and sensors
of :mod:`fmi_adjoint.mbs` use it like any marker.

Where the paper is silent or restrictive, said here:

* eq. (11) assumes a lumped ``M^FE`` of point masses.  The translational rows of ``M^FE`` are
  used as given (lumped or consistent); a beam's nodes also have rotational inertia, which
  eq. (11) cannot express (node rotations are not positions).  It enters through the node
  rotations of eq. (10), linear in ``q``, and the Euler tensor of each node's rotation block
  (:func:`_rotary_mass`): again a constant matrix.  Without it a twist of a beam would carry
  no kinetic energy.  Couplings between different nodes' rotations, or between rotations and
  translations, in a consistent matrix are left out (exact for a lumped matrix:
  :class:`~fmi_adjoint.flexible.LumpedMass`);
* the node rotation of eq. (10) is linearized in the deformation (``I + [theta]x``), as the
  small-deformation assumption of Sec. 3.2 allows.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sps
import sympy as sp

from ..errors import ModelError
from ..flexible import CraigBampton, FEModel, ModeCount, ReducedModel, reduce
from ..flexible.reduction import AbstractDamping, AbstractModeSelection, NoDamping
from ..model import Coordinate
from ..structured import DAMPING, LOAD, MASS, STIFFNESS, MatrixTerm, QuadraticConstraints, SparseMatrix
from . import rotations as rot
from .bodies import AxisAngle, Body, BodyKinematics, Cardan, RotationMatrix, as_rotation
from .markers import Marker, MarkerFrame
from .names import Number, der

if TYPE_CHECKING:
    from .context import Lowering

__all__ = ["FlexibleBody", "FncfBasis", "NaturalKinematics", "NodalBody", "NodeMarker"]


@dataclasses.dataclass(frozen=True)
class NaturalKinematics(BodyKinematics):
    """The frame of a body in natural coordinates: origin ``sigma``, rotation ``A(pi)``."""

    def origin(self) -> sp.Matrix:
        return sp.Matrix([self.q(f"s{r}") for r in range(3)])

    def rotation(self) -> sp.Matrix:
        return sp.Matrix(3, 3, lambda r, c: self.q(f"p{3 * c + r}"))

    def rotation_rates(self) -> sp.Matrix:
        return sp.Matrix(3, 3, lambda r, c: der(f"{self.name}_p{3 * c + r}"))

    def angular_velocity(self) -> sp.Matrix:
        """``w`` with ``[w]x = A_dot A^T`` (global axes)."""
        return _vee(self.rotation_rates() * self.rotation().T)

    def angular_velocity_body(self) -> sp.Matrix:
        return self.rotation().T * self.angular_velocity()


def _vee(skew: sp.Matrix) -> sp.Matrix:
    """The vector of a (numerically) skew matrix, from its antisymmetric part."""
    return sp.Matrix([(skew[2, 1] - skew[1, 2]) / 2, (skew[0, 2] - skew[2, 0]) / 2, (skew[1, 0] - skew[0, 1]) / 2])


@dataclasses.dataclass(frozen=True, eq=False)
class FncfBasis:
    """The reduced body in the form the FNCF needs (module docstring).

    Attributes
    ----------
    positions : numpy.ndarray (nodes, 3)
        ``x_p``: every node in the frame (relative to the reference node).
    node_ids : numpy.ndarray
    translations : numpy.ndarray (nodes, 3, n)
        ``psi_p``: the translation rows of the deformation modes (zero where a node has none).
    rotations : numpy.ndarray (nodes, 3, n)
        ``phi_p``: their rotation rows.
    stiffness : numpy.ndarray (n, n)
        ``Psi^T K Psi`` (eq. (12)).
    damping : tuple of (float, numpy.ndarray)
        The reduced damping terms over ``delta`` (value, matrix per unit).
    mass_qq : numpy.ndarray
        ``r_q^T M r_q`` over ``sigma, pi, gamma`` (eq. (11)).
    gravity : numpy.ndarray (3, 12 + 9 n)
        ``r_q^T M e_axis`` per global axis.
    frequencies : numpy.ndarray
        Fixed-interface frequencies [Hz] of the kept normal modes.
    """

    node_ids: np.ndarray
    positions: np.ndarray
    translations: np.ndarray
    rotations: np.ndarray
    stiffness: np.ndarray
    damping: tuple[tuple[float, np.ndarray], ...]
    mass_qq: np.ndarray
    gravity: np.ndarray
    frequencies: np.ndarray
    reduced: ReducedModel

    @property
    def modes(self) -> int:
        return int(self.stiffness.shape[0])

    def node(self, node: int, where: str) -> int:
        found = np.flatnonzero(self.node_ids == int(node))
        if not found.size:
            raise ModelError(f"{where}: node {node} is not a node of the FE model; give one of its node ids.")
        return int(found[0])


def _rotary_mass(fe: FEModel, ids: np.ndarray, rotations: np.ndarray, n: int) -> np.ndarray:
    """The rotational inertia of the nodes in natural coordinates (module docstring): with a
    node's rotation ``R_p`` linear in ``q`` (eq. (10)), ``vec(R_p) = B_p q`` (row-major), and
    its inertia ``J_p`` (the node's own rotation block of ``M^FE``), the kinetic energy
    ``1/2 tr(R_p_dot E_p R_p_dot^T)`` with the Euler tensor ``E_p = tr(J_p)/2 I - J_p`` is
    ``1/2 q_dot^T B_p^T (I (x) E_p) B_p q_dot``: a constant matrix, as natural coordinates give
    for rigid bodies."""
    size = 12 + 9 * n
    total = np.zeros((size, size))
    mass = sps.csr_matrix(fe.mass)
    for k, node in enumerate(ids):
        try:
            rows = [fe.dof_index(int(node), 3 + c) for c in range(3)]
        except ModelError:
            continue  # a node without rotations (a solid's)
        J = np.asarray(mass[rows][:, rows].todense())
        if not np.any(J):
            continue
        E = np.trace(J) / 2 * np.eye(3) - J
        B = np.zeros((9, size))
        for r in range(3):
            for c in range(3):
                B[3 * r + c, 3 + 3 * c + r] += 1.0
        for m in range(n):
            S = np.array(rot_skew(rotations[k, :, m]), dtype=float)
            for r in range(3):
                for c in range(3):
                    B[3 * r:3 * r + 3, 12 + 9 * m + 3 * c + r] += S[c]
        total += B.T @ np.kron(np.eye(3), E) @ B
    return total


def fncf_basis(fe: FEModel, reference: int, interface: Sequence[int], modes: AbstractModeSelection,
               damping: AbstractDamping, where: str) -> FncfBasis:
    """The reduction and the constant FNCF matrices of ``fe`` (module docstring)."""
    nodes = (int(reference), *(int(i) for i in interface if int(i) != int(reference)))
    reduced = reduce(fe, CraigBampton(nodes, modes), damping=damping)
    reference_dofs = {fe.dof_label(int(k)) for k in fe.dof_indices([int(reference)])}
    keep = np.array([k for k, label in enumerate(reduced.coordinates) if label not in reference_dofs], dtype=int)
    if keep.size == 0:
        raise ModelError(f"{where}: no deformation mode is left (the reduction kept only the reference node's DOFs); "
                         "keep normal modes (modes=ModeCount(n) with n > 0) or add interface nodes.")
    psi = np.asarray(reduced.transformation)[:, keep]
    ids = np.asarray(fe.node_ids, dtype=int)
    ref_row = int(np.flatnonzero(ids == int(reference))[0])
    positions = np.asarray(fe.coordinates, dtype=float) - np.asarray(fe.coordinates, dtype=float)[ref_row]
    n = keep.size
    translations = np.zeros((ids.size, 3, n))
    rotations = np.zeros((ids.size, 3, n))
    translational_dofs: list[int] = []
    for row, (node, component) in enumerate(np.asarray(fe.dofs, dtype=int)):
        k = int(np.flatnonzero(ids == node)[0])
        (translations if component < 3 else rotations)[k, component % 3, :] = psi[row]
        if component < 3:
            translational_dofs.append(row)
    stiffness = np.asarray(reduced.stiffness)[np.ix_(keep, keep)]
    stiffness = (stiffness + stiffness.T) / 2
    damping_terms = tuple((float(term.value), np.asarray(term.matrix)[np.ix_(keep, keep)])
                          for term in reduced.damping_terms)
    # r_q of every translational DOF (eq. (9)) and M_qq = r_q^T M r_q (eq. (11)).
    size = 12 + 9 * n
    triplets: list[tuple[int, int, float]] = []
    for row in translational_dofs:
        node, r = (int(x) for x in fe.dofs[row])
        k = int(np.flatnonzero(ids == node)[0])
        triplets.append((row, r, 1.0))
        for c in range(3):
            triplets.append((row, 3 + 3 * c + r, float(positions[k, c])))
            triplets += [(row, 12 + 9 * m + 3 * c + r, float(translations[k, c, m])) for m in range(n)]
    rows, cols, values = (np.array(x) for x in zip(*triplets))
    r_q = sps.csr_matrix((values, (rows, cols)), shape=(fe.size, size))
    mass = sps.csr_matrix(fe.mass)
    selector = np.zeros(fe.size)
    selector[translational_dofs] = 1.0
    mass_t = sps.diags(selector) @ mass @ sps.diags(selector)  # the translational rows (module docstring)
    mass_qq = np.asarray((r_q.T @ mass_t @ r_q).todense()) + _rotary_mass(fe, ids, rotations, n)
    mass_qq = (mass_qq + mass_qq.T) / 2
    gravity = np.zeros((3, size))
    dofs = np.asarray(fe.dofs, dtype=int)
    for axis in range(3):
        unit = ((dofs[:, 1] == axis) & (selector > 0)).astype(float)
        gravity[axis] = np.asarray(r_q.T @ (mass_t @ unit)).reshape(-1)
    return FncfBasis(ids, positions, translations, rotations, stiffness, damping_terms, mass_qq, gravity,
                     np.asarray(reduced.frequencies), reduced)


@dataclasses.dataclass(frozen=True)
class NodalBody(Body):
    """A body with FE nodes that markers sit on (:class:`NodeMarker`): :class:`FlexibleBody`,
    :class:`~fmi_adjoint.mbs.ffrf.FloatingFrameBody` and
    :class:`~fmi_adjoint.mbs.ffrf.PlanarFloatingFrameBody`, which take the same attributes.

    Attributes
    ----------
    fe : FEModel
        The body's FE model in its own axes (a :func:`fmi_adjoint.flexible.beam_model`'s ``fe``,
        or an imported one).
    reference_node : int
        The node the body frame is attached to (its origin; the deformation is measured from it).
    interface_nodes : tuple of int
        Nodes where joints and force elements attach (static constraint modes: exact there).
    modes : ModeCount or FrequencyLimit
        The fixed-interface normal modes kept (default 10).
    damping : NoDamping, RayleighDamping or ModalDamping
        Of the reduced body (:func:`fmi_adjoint.flexible.reduce`); scaled by ``damping_factor``.
    position : 3 numbers or expressions of parameters
        Initial global position of the reference node.
    rotation : initial orientation (:func:`~.bodies.as_rotation`), default the identity.
    mass_factor, stiffness_factor, damping_factor : numbers or expressions of parameters
        Scale the mass (and weight), the stiffness and the damping: the identifiable density,
        stiffness (``EI / EI0``) and damping scales (issue 25, part 4).
    """

    fe: FEModel | None = None
    reference_node: int = 1
    interface_nodes: tuple[int, ...] = ()
    modes: AbstractModeSelection = ModeCount(10)
    damping: AbstractDamping = NoDamping()
    position: tuple[Number, ...] = (0.0, 0.0, 0.0)
    rotation: object = None
    mass_factor: Number = 1.0
    stiffness_factor: Number = 1.0
    damping_factor: Number = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.fe, FEModel):
            raise ModelError(f"{self.where('fe')}: give the body's FEModel (fmi_adjoint.flexible).")
        object.__setattr__(self, "interface_nodes", tuple(int(i) for i in self.interface_nodes))
        object.__setattr__(self, "rotation", as_rotation(self.rotation, self.where("rotation")))
        if len(tuple(self.position)) != 3:
            raise ModelError(f"{self.where('position')}: give 3 values, got {self.position!r}.")

    @functools.cached_property
    def basis(self) -> FncfBasis:
        """The reduction clamped at the reference node and its constant matrices (computed
        once; the reduction is cached)."""
        assert self.fe is not None
        return fncf_basis(self.fe, self.reference_node, self.interface_nodes, self.modes, self.damping, self.where())

    def lower_elastic(self, ctx: Lowering, deformation: Sequence[str]) -> None:
        """Stiffness ``Psi^T K Psi`` (eq. (12)) and the reduced damping over the deformation
        coordinates: structured terms scaled by ``stiffness_factor`` and ``damping_factor`` (every
        formulation's, the deformation being measured from the same clamped frame)."""
        basis = self.basis
        names = tuple(deformation)
        ctx.add_matrix_term(MatrixTerm(f"{self.name}_stiffness", STIFFNESS, names,
                                       SparseMatrix.of(basis.stiffness, self.where("stiffness")),
                                       ctx.parameter_expression(self.stiffness_factor, self.where("stiffness_factor"))))
        damping_factor = ctx.parameter_expression(self.damping_factor, self.where("damping_factor"))
        for k, (value, matrix) in enumerate(basis.damping):
            if np.any(matrix):
                ctx.add_matrix_term(MatrixTerm(f"{self.name}_damping_{k}", DAMPING, names,
                                               SparseMatrix.of(matrix, self.where("damping")), damping_factor * value))

    def deformation_coordinates(self) -> tuple[str, ...]:
        """The names of the deformation coordinates (``delta`` of FNCF, ``eta`` of the floating
        frame): the last :attr:`FncfBasis.modes` coordinates of every formulation."""
        return self.kinematics().coordinates[-self.basis.modes:]

    def node_modes(self, node: int, where: str) -> np.ndarray:
        """``Psi_p`` (6, n): the six DOFs ``ux uy uz rx ry rz`` of ``node`` relative to the frame
        per unit deformation coordinate (zero rows where the reduced model has no such DOF)."""
        k = self.basis.node(node, where)
        return np.vstack([self.basis.translations[k], self.basis.rotations[k]])

    @abc.abstractmethod
    def node_frame(self, ctx: Lowering, node: int, local_rotation: sp.Matrix,
                   marker: str) -> tuple[sp.Matrix, sp.Matrix]:
        """Global position (3x1) and rotation (3x3) of ``node`` and the marker ``marker`` on it."""


@dataclasses.dataclass(frozen=True)
class FlexibleBody(NodalBody):
    """A flexible body in flexible natural coordinates (module docstring); its attributes are
    :class:`NodalBody`'s."""

    def kinematics(self) -> BodyKinematics:
        n = self.basis.modes
        names = ([f"s{r}" for r in range(3)] + [f"p{i}" for i in range(9)] + [f"g{j}" for j in range(9 * n)]
                 + [f"d{k}" for k in range(n)])
        return NaturalKinematics(self.name, "natural", False, tuple(f"{self.name}_{s}" for s in names))

    def lower(self, ctx: Lowering) -> None:
        basis = self.basis
        n = basis.modes
        names = self.kinematics().coordinates
        sigma, pi, gamma, delta = names[:3], names[3:12], names[12:12 + 9 * n], names[12 + 9 * n:]
        start = np.eye(3)
        if isinstance(self.rotation, (AxisAngle, Cardan, RotationMatrix)):
            start = np.asarray(rot.matrix_from_euler(self.rotation.euler(self.where("rotation"))), dtype=np.float64)
        position = [ctx.parameter_expression(x, self.where("position")) for x in self.position]
        for k, name in enumerate(sigma):
            ctx.add_coordinate(Coordinate(name, mass=0.0, initial_position=position[k]))
        for i, name in enumerate(pi):
            ctx.add_coordinate(Coordinate(name, kind="rotational", mass=0.0,
                                          initial_position=float(start[i % 3, i // 3])))
        for name in (*gamma, *delta):
            ctx.add_coordinate(Coordinate(name, mass=0.0))
        inertial = (*sigma, *pi, *gamma)
        mass_factor = ctx.parameter_expression(self.mass_factor, self.where("mass_factor"))
        ctx.add_matrix_term(MatrixTerm(f"{self.name}_mass", MASS, inertial,
                                       SparseMatrix.of(basis.mass_qq, self.where("mass")), mass_factor))
        for axis, g in enumerate(ctx.gravity):
            if g.is_zero is not True and np.any(basis.gravity[axis]):
                weight = SparseMatrix.of(basis.gravity[axis].reshape(-1, 1), self.where("weight"))
                ctx.add_matrix_term(MatrixTerm(f"{self.name}_weight_{'xyz'[axis]}", LOAD, inertial, weight,
                                               mass_factor * g))
        self.lower_elastic(ctx, delta)
        ctx.add_matrix_term(_orthonormality(f"{self.name}_frame", pi))
        ctx.add_matrix_term(_kronecker(f"{self.name}_gamma", n, pi, gamma, delta))

    def node_frame(self, ctx: Lowering, node: int, local_rotation: sp.Matrix,
                   marker: str) -> tuple[sp.Matrix, sp.Matrix]:
        """Global position (eq. (9)) and rotation (eq. (10)) of ``node`` and its marker."""
        basis = self.basis
        k = basis.node(node, f"marker '{marker}'")
        kin = self.kinematics()
        n = basis.modes
        p = [kin.q(f"p{i}") for i in range(9)]
        g = [kin.q(f"g{j}") for j in range(9 * n)]
        x, psi, phi = basis.positions[k], basis.translations[k], basis.rotations[k]
        position = []
        for r in range(3):
            terms = [kin.q(f"s{r}")]
            terms += [sp.Float(float(x[c]), 17) * p[3 * c + r] for c in range(3) if x[c] != 0.0]
            terms += [sp.Float(float(psi[c, m]), 17) * g[9 * m + 3 * c + r]
                      for m in range(n) for c in range(3) if psi[c, m] != 0.0]
            position.append(sp.Add(*terms))
        # R_p = A + sum_m delta_m A [phi_pm]x, (A S)[r, s] = sum_c A[r, c] S[c, s] and
        # A[r, c] delta_m = gamma[9 m + 3 c + r].
        entries: list[list[list[sp.Expr]]] = [[[p[3 * s + r]] for s in range(3)] for r in range(3)]
        for m in range(n):
            skew = rot_skew(phi[:, m])
            for r in range(3):
                for s in range(3):
                    entries[r][s] += [sp.Float(skew[c][s], 17) * g[9 * m + 3 * c + r] for c in range(3)
                                      if skew[c][s] != 0.0]
        rotation = sp.Matrix(3, 3, [sp.Add(*entries[r][s]) for r in range(3) for s in range(3)])
        return sp.Matrix(position), rotation * local_rotation


def rot_skew(w: Sequence[float] | np.ndarray) -> list[list[float]]:
    """``[w]x`` (numbers)."""
    return [[0.0, -float(w[2]), float(w[1])], [float(w[2]), 0.0, -float(w[0])], [-float(w[1]), float(w[0]), 0.0]]


def _orthonormality(name: str, pi: Sequence[str]) -> QuadraticConstraints:
    """``a_j . a_j - 1 = 0`` and ``a_i . a_j = 0`` (``a_j = pi[3j:3j+3]``): 6 rows."""
    rows = [(0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2)]
    c0 = [-1.0, -1.0, -1.0, 0.0, 0.0, 0.0]
    hessians = []
    for r, (i, j) in enumerate(rows):
        for k in range(3):
            a, b = 3 * i + k, 3 * j + k
            hessians.append((r, a, b, 2.0))  # 1/2 q^T H q with H symmetrized: a.a and a.b
    return QuadraticConstraints(name, tuple(pi), np.array(c0), SparseMatrix.of(np.zeros((6, 9)), f"{name}: J0"),
                                hessians)


def _kronecker(name: str, n: int, pi: Sequence[str], gamma: Sequence[str],
               delta: Sequence[str]) -> QuadraticConstraints:
    """``gamma[9 m + i] - delta_m pi_i = 0`` (eq. (8)): 9 ``n`` bilinear rows."""
    coordinates = (*pi, *gamma, *delta)
    jacobian = SparseMatrix.of((np.arange(9 * n), 9 + np.arange(9 * n), np.ones(9 * n)), f"{name}: J0",
                               (9 * n, len(coordinates)))
    hessians = [(9 * m + i, 9 + 9 * n + m, i, -2.0) for m in range(n) for i in range(9)]
    return QuadraticConstraints(name, coordinates, np.zeros(9 * n), jacobian, hessians)


@dataclasses.dataclass(frozen=True)
class NodeMarker(Marker):
    """A marker on a node of a :class:`NodalBody` (its position and rotation follow the
    node's deformation: eqs. (9)-(10) for FNCF, the floating frame's for FFRF);
    ``orientation`` as for any marker."""

    node: int = 0

    def frame(self, ctx: Lowering, body: BodyKinematics) -> MarkerFrame:
        component = ctx.body_component(self.body, self.where("body"))
        if not isinstance(component, NodalBody):
            raise ModelError(f"{self.where('body')}: body '{self.body}' is not a flexible body (FlexibleBody, "
                             "FloatingFrameBody or PlanarFloatingFrameBody); a NodeMarker sits on a node of one "
                             "(use Marker on rigid bodies).")
        if any(sp.sympify(x).is_zero is not True for x in self.position):
            raise ModelError(f"{self.where('position')}: a node marker sits at its node; leave position at 0.")
        local_rotation = sp.eye(3)
        if self.orientation is not None:
            if not isinstance(self.orientation, (AxisAngle, Cardan, RotationMatrix)):
                raise ModelError(f"{self.where('orientation')}: give a rotation object (AxisAngle, Cardan, "
                                 "RotationMatrix) for a marker on a flexible body.")
            e = self.orientation.euler(self.where("orientation"))
            local_rotation = sp.Matrix(3, 3, [sp.Float(float(x), 17) for x in rot.matrix_from_euler(e).flat])
        position, rotation = component.node_frame(ctx, self.node, local_rotation, self.name)
        return _NodeFrame(name=self.name, body=body, local=sp.zeros(3, 1), local_rotation=local_rotation,
                          position=position, rotation=rotation, planar_angle=None)


@dataclasses.dataclass(frozen=True, eq=False)
class _NodeFrame(MarkerFrame):
    """A node marker's frame: its angular velocity is that of the node, ``[w]x = R_dot R^T``."""

    def angular_velocity(self) -> sp.Matrix:
        rates = self.rotation.applyfunc(_time_derivative)
        return _vee(rates * self.rotation.T)


def _time_derivative(expr: sp.Expr) -> sp.Expr:
    """``d/dt`` of an expression linear in name-symbol coordinates (``der(x)`` for ``x``)."""
    return sp.Add(*(expr.diff(s) * der(s.name) for s in expr.free_symbols))
