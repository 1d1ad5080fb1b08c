"""Flexible bodies in the floating frame of reference formulation (FFRF; Shabana, *Dynamics of
Multibody Systems*, Ch. 5; Nishi et al., seed 004).

A :class:`FloatingFrameBody` is the same reduced finite-element model as a
:class:`~fmi_adjoint.mbs.FlexibleBody` (the Craig-Bampton basis clamped at the reference node,
:func:`~fmi_adjoint.mbs.flexible.fncf_basis`), described by

    q = [R  e  eta]

* ``R`` (3): the global position of the frame's origin, the *reference node* (``<body>_x, _y, _z``);
* ``e`` (4): the Euler parameters of the frame's rotation ``A(e)`` (:mod:`.rotations`, eq. (2.20)),
  with the normalization constraint ``e . e - 1 = 0`` named ``<body>_normalization`` (as
  :class:`~fmi_adjoint.mbs.SpatialRigidBody`);
* ``eta`` (``n``): the modal coordinates of the deformation modes ``Psi`` (``<body>_eta<k>``).

A node ``p`` at ``x_p`` in the frame, displaced by ``Psi_p eta``, is at
``r_p = R + A (x_p + Psi_p eta)`` (Shabana eq. (5.6) with the modal reduction of Sec. 5.4);
its rotation is ``A (I + [phi_p eta]x)`` (``phi_p`` the rotation rows of the modes, linearized
in the deformation like FNCF's eq. (10)).  In body axes the velocity of every FE DOF is

    V = B_R A^T R_dot + B_w(eta) w' + Psi eta_dot,       w' = 2 G(e) e_dot   (eq. (2.26))

(``B_R``: a unit translation of every node; ``B_w``: ``-[x_p + Psi_p eta]x`` on a node's
translations and ``I`` on its rotations), so the kinetic energy ``1/2 V^T M^FE V`` gives the mass
matrix from the *inertia invariants* (Shabana Sec. 5.5, written for the whole FE mass matrix):

    m I = B_R^T M B_R,   C(eta) = B_R^T M B_w(eta),   J(eta) = B_w^T M B_w,
    D = B_R^T M Psi,     F(eta) = B_w^T M Psi,        M_ee = Psi^T M Psi,

``C`` and ``F`` linear and ``J`` quadratic in ``eta`` (with lumped masses ``C = -[S]x``,
``S = S0 + S1 eta = sum m_p (x_p + Psi_p eta)``, ``D = S1`` and ``J`` the inertia tensor of the
deformed body about the frame's origin), and

    M(q) = [[ m I,     2 A C G,      A D     ],
            [  .,     4 G^T J G,   2 G^T F   ],
            [  .,         .,        M_ee     ]]        (Shabana eq. (5.15))

The constant blocks ``m I`` and ``M_ee`` are structured MASS terms; the configuration-dependent
ones are pieces of the kinetic energy (the frame, one per mode, one per pair of modes:
:func:`_mass_pieces`), each a group of mass-matrix entries that add, with its numbers as named
data, so that a body is four component types at any number of modes;
:func:`fmi_adjoint.model.quadratic_velocity_terms` derives the quadratic velocity terms from
each piece (Lagrange's equations, linear in ``M``, as for
:class:`~fmi_adjoint.mbs.SpatialRigidBody`; the part along ``e`` is taken by the normalization's
multiplier).  Stiffness ``Psi^T K Psi`` and the
reduced damping act on ``eta`` (structured STIFFNESS and DAMPING terms scaled by the factors,
as in FNCF).  The weight ``M^FE B_R A^T g`` gives the generalized forces ``m g`` (``R``),
``2 G^T C^T A^T g`` (``e``: the moment of the first moment ``S(eta)``) and ``D^T A^T g``
(``eta``; with lumped masses ``S1^T A^T g``).

Left out (said where it matters): the rotary inertia of the nodes enters through
``w' + phi_p eta_dot`` (the node rotation rate to first order in the deformation); the rotation
of a node's inertia tensor by the deformation itself (second order in ``eta``, which FNCF's
linear node rotation of eq. (10) keeps through its Euler tensor) is not.  At small deformation
the two formulations agree (tests/test_ffrf.py measures how closely).

:class:`PlanarFloatingFrameBody` is the same formulation in the x-y plane (``q = [R_x R_y theta
eta]``, the FE model's in-plane part; its class docstring): no Euler parameters, ``3 + 3 n``
mass entries, a build of seconds.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sps
import sympy as sp

from ..errors import ModelError
from ..flexible import FEModel
from ..flexible.fe import planar_part
from ..model import Coordinate, MassEntry
from ..structured import MASS, MatrixTerm, SparseMatrix
from . import rotations as rot
from .bodies import AxisAngle, BodyKinematics, Cardan, RotationMatrix
from .flexible import FncfBasis, NodalBody, fncf_basis, rot_skew
from .names import Number

if TYPE_CHECKING:
    from .context import Lowering

__all__ = ["FloatingFrameBody", "FloatingFrameInvariants", "PlanarFloatingFrameBody", "PlanarFrameInvariants",
           "floating_frame_invariants", "planar_frame_invariants"]


@dataclasses.dataclass(frozen=True, eq=False)
class FloatingFrameInvariants:
    """The inertia invariants of a reduced body (module docstring), numbers.

    Attributes
    ----------
    mass : float
        ``m``, from ``B_R^T M B_R = m I``.
    C0, C1 : numpy.ndarray (3, 3), (n, 3, 3)
        ``C(eta) = C0 + sum_k eta_k C1[k]``.
    J0, J1, J2 : numpy.ndarray (3, 3), (n, 3, 3), (n, n, 3, 3)
        ``J(eta) = J0 + sum_k eta_k J1[k] + sum_kl eta_k eta_l J2[k, l]``.
    D : numpy.ndarray (3, n)
    F0, F1 : numpy.ndarray (3, n), (n, 3, n)
        ``F(eta) = F0 + sum_k eta_k F1[k]``.
    modal_mass : numpy.ndarray (n, n)
        ``Psi^T M Psi``.
    """

    mass: float
    C0: np.ndarray
    C1: np.ndarray
    J0: np.ndarray
    J1: np.ndarray
    J2: np.ndarray
    D: np.ndarray
    F0: np.ndarray
    F1: np.ndarray
    modal_mass: np.ndarray


def _dof_layout(fe: FEModel, basis: FncfBasis, axes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                                     np.ndarray]:
    """Per FE DOF: the row of its node in ``basis``, its component, whether it is a translation,
    ``B_R`` (a unit translation along each of the first ``axes`` global axes) and the modes
    ``Psi`` (the translation or rotation rows of the basis)."""
    ids = basis.node_ids
    dofs = np.asarray(fe.dofs, dtype=int)
    rows = np.array([int(np.flatnonzero(ids == node)[0]) for node in dofs[:, 0]])
    comp = dofs[:, 1]
    translational = comp < 3
    B_R = np.zeros((fe.size, axes))
    along = np.flatnonzero(translational & (comp < axes))
    B_R[along, comp[along]] = 1.0
    psi = np.where(translational[:, None], basis.translations[rows, comp % 3, :], basis.rotations[rows, comp % 3, :])
    return rows, comp, translational, B_R, psi


def _rigid_mass(mass_matrix: np.ndarray, where: str) -> float:
    """``m`` from ``B_R^T M B_R = m I`` (refused if it is not)."""
    mass = float(np.trace(mass_matrix) / len(mass_matrix))
    if not mass > 0 or np.abs(mass_matrix - mass * np.eye(len(mass_matrix))).max() > 1e-9 * mass:
        raise ModelError(f"{where}: the FE mass matrix does not move the body's mass rigidly (B_R^T M B_R = "
                         f"{mass_matrix.tolist()} is not m I with m > 0); give a mass matrix in which a rigid "
                         "translation carries the total mass in every direction.")
    return mass


def floating_frame_invariants(fe: FEModel, basis: FncfBasis, where: str) -> FloatingFrameInvariants:
    """The inertia invariants of ``fe`` in the deformation basis ``basis`` (module docstring)."""
    n = basis.modes
    size = fe.size
    rows, comp, translational, B_R, psi = _dof_layout(fe, basis, 3)

    def cross_rows(vectors: np.ndarray) -> np.ndarray:
        """``-[u_p]x`` on the translational rows (``u_p`` per node, (nodes, 3))."""
        out = np.zeros((size, 3))
        for i in np.flatnonzero(translational):
            out[i] = -np.asarray(rot_skew(vectors[rows[i]]))[comp[i]]
        return out

    Bw0 = cross_rows(basis.positions)
    Bw0[np.flatnonzero(~translational), comp[~translational] - 3] = 1.0
    Bw1 = [cross_rows(basis.translations[:, :, k]) for k in range(n)]
    M = sps.csr_matrix(fe.mass)
    MB_R, MBw0, MBw1, MPsi = M @ B_R, M @ Bw0, [M @ b for b in Bw1], M @ psi
    mass = _rigid_mass(B_R.T @ MB_R, where)
    J2 = np.array([[Bw1[k].T @ MBw1[m] for m in range(n)] for k in range(n)]).reshape(n, n, 3, 3)
    return FloatingFrameInvariants(
        mass=mass, C0=B_R.T @ MBw0, C1=np.array([B_R.T @ b for b in MBw1]).reshape(n, 3, 3),
        J0=Bw0.T @ MBw0, J1=np.array([Bw1[k].T @ MBw0 + Bw0.T @ MBw1[k] for k in range(n)]).reshape(n, 3, 3),
        J2=J2, D=B_R.T @ MPsi, F0=Bw0.T @ MPsi, F1=np.array([b.T @ MPsi for b in Bw1]).reshape(n, 3, n),
        modal_mass=(psi.T @ MPsi + (psi.T @ MPsi).T) / 2)


def _number(x: float, scale: float) -> sp.Expr | None:
    """``x`` as data, or None where it is round-off of ``scale`` (a zero of the exact invariant)."""
    return None if abs(x) <= 1e-14 * scale else sp.Float(float(x), 17)


def _linear(c0: np.ndarray, c1: np.ndarray, eta: tuple[sp.Symbol, ...], shape: tuple[int, int]) -> sp.Matrix:
    """``c0 + sum_k eta_k c1[k]`` as a sympy matrix of data times coordinates."""
    scale = max(np.abs(c0).max(initial=0.0), np.abs(c1).max(initial=0.0), 1e-300)

    def entry(r: int, s: int) -> sp.Expr:
        terms = [_number(c0[r, s], scale)] + [
            None if (f := _number(c1[k, r, s], scale)) is None else f * eta[k] for k in range(len(eta))]
        return sp.Add(*(t for t in terms if t is not None))

    return sp.Matrix(*shape, lambda r, s: entry(r, s))


def _symmetric_pair(J2: np.ndarray, k: int, m: int) -> np.ndarray:
    """The 3x3 coefficient of ``eta_k eta_m`` (``k <= m``) in ``J(eta)``, symmetrized."""
    value = (J2[k, m] + J2[k, m].T + J2[m, k] + J2[m, k].T) / 2
    return value / 2 if k == m else value


class _Piece:
    """One piece of the kinetic energy (:func:`_mass_pieces`): its entries ``(row, col, value)``
    and the named numbers they read (``MassEntry.data``), the numbers written as symbols so that
    pieces of one form are one component type even where a number is zero."""

    def __init__(self, label: str):
        self.label = label
        self.entries: list[tuple[str, str, sp.Expr]] = []
        self.data: dict[str, float] = {}

    def _datum(self, key: str, value: float) -> sp.Symbol:
        self.data[key] = float(value)
        return sp.Symbol(key, real=True)

    def vector(self, name: str, values: np.ndarray) -> sp.Matrix:
        """A 3-vector of numbers as the symbols ``<name> 0 .. <name> 2`` (a name with a space:
        never a model name, which the data's names may not be)."""
        return sp.Matrix([self._datum(f"{name} {r}", float(values[r])) for r in range(3)])

    def matrix(self, name: str, values: np.ndarray) -> sp.Matrix:
        """A 3x3 matrix of numbers as the symbols ``<name> <r><s>``."""
        return sp.Matrix(3, 3, lambda r, c: self._datum(f"{name} {r}{c}", float(values[r, c])))

    def symmetric(self, name: str, values: np.ndarray) -> sp.Matrix:
        """The symmetric part of a 3x3 matrix as six symbols ``<name> <r><s>``, ``r <= s``."""
        part = (values + values.T) / 2
        return sp.Matrix(3, 3, lambda r, c: self._datum(f"{name} {min(r, c)}{max(r, c)}", part[min(r, c), max(r, c)]))

    def add(self, rows: tuple[str, ...], cols: tuple[str, ...], entries: dict[tuple[int, int], sp.Expr],
            times: sp.Expr = sp.S.One) -> None:
        """Entries ``(i, j)`` of a block over ``rows x cols``, each times ``times``."""
        self.entries += [(rows[i], cols[j], times * value) for (i, j), value in entries.items() if value != 0]


def _block(matrix: sp.Matrix) -> dict[tuple[int, int], sp.Expr]:
    return {(i, j): matrix[i, j] for i in range(matrix.rows) for j in range(matrix.cols)}


def _mass_pieces(inv: FloatingFrameInvariants, e: sp.Matrix, eta: tuple[sp.Symbol, ...],
                 names: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]) -> list[_Piece]:
    """The configuration-dependent blocks of ``M(q)`` (module docstring, Shabana eq. (5.15)) as
    pieces of the kinetic energy, each over few coordinates:

    * ``frame`` (``R, e``): ``2 A C0 G`` and ``4 G^T J0 G``;
    * ``mode<k>`` (``R, e, eta_k``): ``2 eta_k A C1_k G``, ``A D_k``, ``4 eta_k G^T J1_k G`` and
      ``2 G^T F0_k`` (``D_k``, ``F0_k``: column ``k``);
    * ``modes<k>_<m>``, ``k <= m`` (``e, eta_k, eta_m``): ``4 eta_k eta_m G^T J2_km G``,
      ``2 eta_k G^T F1_k`` in column ``m`` and (``k < m``) ``2 eta_m G^T F1_m`` in column ``k``.

    ``C, J, F`` are affine or quadratic in ``eta``, so the pieces sum to the blocks exactly.
    Each piece is one mass group whose numbers are named data (:class:`_Piece`), so a body has
    four component types (frame, mode, pair, square), derived once whatever the number of modes:
    the build grows with the ``n^2 / 2`` instances, not with a polynomial of ``n^2`` terms in ``e``
    and ``eta`` (the body as one block, cold: 11 s with two modes, 62 s with eight, on the beam of
    tests/test_ffrf.py; the pieces: 12 s and 14 s, 24 s with forty).
    A piece whose numbers are all round-off of their invariants (:func:`_number`) is left out."""
    R, enames, etanames = names
    n = len(eta)
    A, G = rot.A(e), rot.G(e)
    scales = {"C": max(np.abs(inv.C0).max(), np.abs(inv.C1).max(initial=0.0), 1e-300),
              "J": max(np.abs(inv.J0).max(), np.abs(inv.J1).max(initial=0.0), np.abs(inv.J2).max(initial=0.0)),
              "F": max(np.abs(inv.F0).max(initial=0.0), np.abs(inv.F1).max(initial=0.0), 1e-300),
              "D": max(np.abs(inv.D).max(initial=0.0), 1e-300)}

    def negligible(*parts: tuple[str, np.ndarray]) -> bool:
        return all(_number(float(np.abs(values).max(initial=0.0)), scales[kind]) is None for kind, values in parts)

    def rotation_rotation(piece: _Piece, J: np.ndarray, times: sp.Expr = sp.S.One) -> None:
        piece.add(enames, enames, rot.rotational_mass(e, piece.symmetric("J", J)), times)

    def translation_rotation(piece: _Piece, C: np.ndarray, times: sp.Expr = sp.S.One) -> None:
        piece.add(R, enames, _block(2 * rot.matmul(A, rot.matmul(piece.matrix("C", C), G))), times)

    def rotation_mode(piece: _Piece, name: str, F: np.ndarray, column: str, times: sp.Expr = sp.S.One) -> None:
        piece.add(enames, (column,), _block(2 * rot.matmul(G.T, piece.vector(name, F))), times)

    frame = _Piece("frame")
    translation_rotation(frame, inv.C0)
    rotation_rotation(frame, inv.J0)
    pieces = [frame]
    for k in range(n):
        if negligible(("C", inv.C1[k]), ("D", inv.D[:, k]), ("J", inv.J1[k]), ("F", inv.F0[:, k])):
            continue
        mode = _Piece(f"mode{k}")
        translation_rotation(mode, inv.C1[k], eta[k])
        mode.add(R, (etanames[k],), _block(rot.matmul(A, mode.vector("D", inv.D[:, k]))))
        rotation_rotation(mode, inv.J1[k], eta[k])
        rotation_mode(mode, "F", inv.F0[:, k], etanames[k])
        pieces.append(mode)
    for k in range(n):
        for m in range(k, n):
            J, F_m, F_k = _symmetric_pair(inv.J2, k, m), inv.F1[k][:, m], inv.F1[m][:, k]
            if negligible(("J", J), ("F", F_m), ("F", F_k if k < m else np.zeros(3))):
                continue
            pair = _Piece(f"modes{k}_{m}")
            rotation_rotation(pair, J, eta[k] * eta[m])
            rotation_mode(pair, "F", F_m, etanames[m], eta[k])
            if k < m:
                rotation_mode(pair, "H", F_k, etanames[k], eta[m])
            pieces.append(pair)
    return pieces


@dataclasses.dataclass(frozen=True)
class _FloatingFrame(NodalBody):
    """What the spatial and the planar floating-frame bodies share: the node frames of their
    markers."""

    def node_frame(self, ctx: Lowering, node: int, local_rotation: sp.Matrix,
                   marker: str) -> tuple[sp.Matrix, sp.Matrix]:
        """Global position ``R + A (x_p + Psi_p eta)`` and rotation ``A (I + [phi_p eta]x)`` of ``node``
        (module docstring; planar: ``A = Rz(theta)`` and ``phi_p`` along z) and its marker."""
        basis = self.basis
        k = basis.node(node, f"marker '{marker}'")
        kin = self.kinematics()
        eta = [kin.q(f"eta{m}") for m in range(basis.modes)]
        scale = max(np.abs(basis.translations).max(initial=0.0), np.abs(basis.positions).max(initial=0.0), 1e-300)

        def affine(c0: np.ndarray, c1: np.ndarray, s: float) -> sp.Matrix:
            out = []
            for r in range(len(c0)):
                terms = [_number(c0[r], s)] + [None if (f := _number(c1[r, m], s)) is None else f * eta[m]
                                               for m in range(len(eta))]
                out.append(sp.Add(*(t for t in terms if t is not None)))
            return sp.Matrix(out)

        A = kin.rotation()
        u = affine(basis.positions[k], basis.translations[k], scale)
        theta = affine(np.zeros(3), basis.rotations[k], max(np.abs(basis.rotations).max(initial=0.0), 1e-300))
        position = kin.origin() + rot.matmul(A, u)
        rotation = rot.matmul(A, sp.eye(3) + rot.skew(list(theta)))
        return position, rot.matmul(rotation, local_rotation)


@dataclasses.dataclass(frozen=True)
class FloatingFrameBody(_FloatingFrame):
    """A flexible body in the floating frame of reference formulation (module docstring).

    The attributes are those of every :class:`~fmi_adjoint.mbs.flexible.NodalBody` (the same
    FE model, reference node, interface nodes, modes, damping and factors as
    :class:`~fmi_adjoint.mbs.FlexibleBody`), so that one body can be written in either
    formulation by changing the class; ``mass_factor`` scales all inertia invariants and the
    weight.
    """

    @functools.cached_property
    def invariants(self) -> FloatingFrameInvariants:
        """The inertia invariants (module docstring)."""
        assert self.fe is not None
        return floating_frame_invariants(self.fe, self.basis, self.where("fe"))

    def kinematics(self) -> BodyKinematics:
        suffixes = ("x", "y", "z", "e0", "e1", "e2", "e3", *(f"eta{k}" for k in range(self.basis.modes)))
        return BodyKinematics(self.name, "spatial", False, tuple(f"{self.name}_{s}" for s in suffixes))

    def lower(self, ctx: Lowering) -> None:
        basis, inv = self.basis, self.invariants
        n = basis.modes
        kin = self.kinematics()
        names = kin.coordinates
        R, enames, etanames = names[:3], names[3:7], names[7:]
        e = kin.euler_parameters()
        eta = tuple(kin.q(f"eta{k}") for k in range(n))
        e_start: tuple[float, ...] = (1.0, 0.0, 0.0, 0.0)
        if isinstance(self.rotation, (AxisAngle, Cardan, RotationMatrix)):
            e_start = self.rotation.euler(self.where("rotation"))
        position = [ctx.parameter_expression(x, self.where("position")) for x in self.position]
        mass_factor = ctx.parameter_expression(self.mass_factor, self.where("mass_factor"))
        for k, name in enumerate(R):
            ctx.add_coordinate(Coordinate(name, "translational", mass=0.0, initial_position=position[k]))
        for k, name in enumerate(enames):
            ctx.add_coordinate(Coordinate(name, "rotational", mass=0.0, initial_position=float(e_start[k])))
        for name in etanames:
            ctx.add_coordinate(Coordinate(name, mass=0.0))
        # Constant blocks: m I over R and Psi^T M Psi over eta (structured MASS terms).
        ctx.add_matrix_term(MatrixTerm(f"{self.name}_translation_mass", MASS, R,
                                       SparseMatrix.of(inv.mass * np.eye(3), self.where("mass")), mass_factor))
        ctx.add_matrix_term(MatrixTerm(f"{self.name}_modal_mass", MASS, etanames,
                                       SparseMatrix.of(inv.modal_mass, self.where("mass")), mass_factor))
        # Configuration-dependent blocks (Shabana eq. (5.15)) as pieces of the kinetic energy
        # (_mass_pieces), each a group of mass entries with data coefficients.
        for piece in _mass_pieces(inv, e, eta, (R, enames, etanames)):
            data = tuple(piece.data.items())
            for row, col, value in piece.entries:
                ctx.add_mass_entry(MassEntry(row, col, mass_factor * value, group=f"{self.name}_{piece.label}",
                                             data=data))
        ctx.add_constraint(f"{self.name}_normalization", sum(x**2 for x in e) - 1)
        # Weight: m g on R, 2 G^T C^T A^T g on e, D^T A^T g on eta (module docstring).
        g = ctx.gravity
        if any(x.is_zero is not True for x in g):
            A, G = rot.A(e), rot.G(e)
            C = _linear(inv.C0, inv.C1, eta, (3, 3))
            D = _linear(inv.D, np.zeros((0, 3, n)), (), (3, n))
            local_g = rot.matmul(A.T, g)
            for k, name in enumerate(R):
                if g[k].is_zero is not True:
                    ctx.add_generalized_force(name, mass_factor * inv.mass * g[k])
            for name, value in zip(enames, 2 * rot.matmul(G.T, rot.matmul(C.T, local_g))):
                ctx.add_generalized_force(name, mass_factor * value)
            for name, value in zip(etanames, rot.matmul(D.T, local_g)):
                if value != 0:
                    ctx.add_generalized_force(name, mass_factor * value)
        self.lower_elastic(ctx, etanames)


# --------------------------------------------------------------------------- planar


@dataclasses.dataclass(frozen=True, eq=False)
class PlanarFrameInvariants:
    """The inertia invariants of a planar reduced body (:class:`PlanarFloatingFrameBody`;
    Shabana Sec. 5.5 in the plane), numbers.

    With ``Bt(eta) = Bt0 + Bt1 eta`` the body-axis velocity of every FE DOF per unit frame
    rotation rate (``[-u_y, u_x]`` of each node's deformed position ``u = x_p + Psi_p eta`` on its
    translations, 1 on its rotation):

    Attributes
    ----------
    mass : float
        ``m``, from ``B_R^T M B_R = m I`` (2x2).
    s0, s1 : numpy.ndarray (2,), (2, n)
        ``s(eta) = B_R^T M Bt(eta) = s0 + s1 eta`` (the frame-rotation coupling).
    D : numpy.ndarray (2, n)
        ``B_R^T M Psi``.
    j0, j1, j2 : float, (n,), (n, n)
        ``j(eta) = Bt^T M Bt = j0 + j1 . eta + eta^T j2 eta`` (the polar moment about the frame).
    f0, f1 : numpy.ndarray (n,), (n, n)
        ``f(eta)_k = Bt(eta)^T M Psi_k = f0[k] + sum_j eta_j f1[j, k]``.
    first_moment : numpy.ndarray (2,)
        ``S0 = B_R^T M u0`` (the weight's moment: ``S(eta) = S0 + D eta``).
    modal_mass : numpy.ndarray (n, n)
        ``Psi^T M Psi``.
    """

    mass: float
    s0: np.ndarray
    s1: np.ndarray
    D: np.ndarray
    j0: float
    j1: np.ndarray
    j2: np.ndarray
    f0: np.ndarray
    f1: np.ndarray
    first_moment: np.ndarray
    modal_mass: np.ndarray


def planar_frame_invariants(fe: FEModel, basis: FncfBasis, where: str) -> PlanarFrameInvariants:
    """The planar inertia invariants of the in-plane FE model ``fe`` (DOFs ``ux uy rz``,
    :func:`fmi_adjoint.flexible.fe.planar_part`) in the basis ``basis``."""
    rows, comp, translational, B_R, psi = _dof_layout(fe, basis, 2)
    size = fe.size
    # [-u_y, u_x] per node: the DOF of the node's other in-plane translation, with its sign.
    partner = {(int(rows[i]), int(comp[i])): i for i in range(size)}
    turn = sps.lil_matrix((size, size))
    for i in np.flatnonzero(translational):
        other = partner.get((int(rows[i]), 1 - int(comp[i])))
        if other is not None:
            turn[i, other] = -1.0 if comp[i] == 0 else 1.0
    turn = turn.tocsr()
    u0 = np.where(comp == 0, basis.positions[rows, 0], np.where(comp == 1, basis.positions[rows, 1], 0.0))
    Bt0 = turn @ u0 + (comp == 5).astype(float)
    Bt1 = turn @ psi
    M = sps.csr_matrix(fe.mass)
    MB_R, MBt0, MBt1, MPsi = M @ B_R, M @ Bt0, M @ Bt1, M @ psi
    modal = psi.T @ MPsi
    return PlanarFrameInvariants(
        mass=_rigid_mass(B_R.T @ MB_R, where), s0=B_R.T @ MBt0, s1=B_R.T @ MBt1, D=B_R.T @ MPsi,
        j0=float(Bt0 @ MBt0), j1=2 * (Bt1.T @ MBt0), j2=(Bt1.T @ MBt1 + (Bt1.T @ MBt1).T) / 2, f0=psi.T @ MBt0,
        f1=Bt1.T @ MPsi, first_moment=B_R.T @ (M @ u0), modal_mass=(modal + modal.T) / 2)


def _affine(c0: float, c1: np.ndarray, eta: tuple[sp.Symbol, ...], scale: float) -> sp.Expr:
    """``c0 + c1 . eta`` with data coefficients (round-off zeros dropped)."""
    terms = [_number(c0, scale)] + [None if (f := _number(c1[k], scale)) is None else f * eta[k]
                                    for k in range(len(eta))]
    return sp.Add(*(t for t in terms if t is not None))


@dataclasses.dataclass(frozen=True)
class PlanarFloatingFrameBody(_FloatingFrame):
    """A flexible body moving in the global x-y plane, in the floating frame of reference
    (Shabana, *Dynamics of Multibody Systems*, Ch. 5, the planar case; Nishi et al., seed 004):

        q = [R_x  R_y  theta  eta]

    ``<body>_x, _y`` the frame's origin (the reference node), ``<body>_phi`` its rotation
    ``theta`` about z (a :class:`~fmi_adjoint.mbs.PlanarRigidBody`'s coordinates: joints, markers
    and sensors treat it as a planar body) and ``<body>_eta<k>`` the modal coordinates.  The FE
    model's in-plane part (``ux uy rz``, :func:`fmi_adjoint.flexible.fe.planar_part`: the nodes
    in the plane z = 0, the in-plane motion decoupled) is reduced like the spatial body's
    (:func:`~fmi_adjoint.mbs.flexible.fncf_basis`, clamped at the reference node).

    With ``A = Rz(theta)`` (2x2) and the invariants of :class:`PlanarFrameInvariants`, the
    kinetic energy ``1/2 V^T M V``, ``V = B_R A^T R_dot + Bt(eta) theta_dot + Psi eta_dot``,
    gives (Shabana eq. (5.15) in the plane)

        M(q) = [[ m I,   A s(eta),   A D   ],
                [  .,     j(eta),   f(eta) ],
                [  .,       .,       M_ee  ]]

    with ``s, f`` linear and ``j`` quadratic in ``eta``: ``m I`` and ``M_ee`` structured MASS
    terms, the rest ``3 + 3 n`` mass entries, whose quadratic velocity terms
    :func:`fmi_adjoint.model.quadratic_velocity_terms` derives.  No Euler parameters and no
    normalization constraint: the mass matrix has ``n^2 / 2`` polynomial terms instead of the
    spatial body's ``O(n^2)`` entries times the Euler-parameter monomials, so it builds in
    seconds.  The weight is ``-dV/dq`` of ``V = -g . (m R + A S(eta))``, ``S = S0 + D eta``.

    Attributes: those of :class:`~fmi_adjoint.mbs.flexible.NodalBody` (``position``: 2 values,
    or 3 with z = 0; no ``rotation``) and ``angle``, the initial rotation about z [rad].
    """

    angle: Number = 0.0

    def __post_init__(self) -> None:
        if len(tuple(self.position)) == 2:
            object.__setattr__(self, "position", (*self.position, 0.0))
        super().__post_init__()
        if self.rotation is not None:
            raise ModelError(f"{self.where('rotation')}: a planar body turns about z only; give angle = ... [rad] "
                             "instead of rotation.")
        if sp.sympify(self.position[2]).is_zero is not True:
            raise ModelError(f"{self.where('position')}: a planar body stays in the x-y plane; give z = 0, got "
                             f"{self.position!r}.")

    @functools.cached_property
    def planar_fe(self) -> FEModel:
        """The in-plane part of the FE model (:func:`~fmi_adjoint.flexible.fe.planar_part`)."""
        assert self.fe is not None
        return planar_part(self.fe, self.where("fe"))

    @functools.cached_property
    def basis(self) -> FncfBasis:
        """The reduction of the in-plane FE model, clamped at the reference node."""
        return fncf_basis(self.planar_fe, self.reference_node, self.interface_nodes, self.modes, self.damping,
                          self.where())

    @functools.cached_property
    def invariants(self) -> PlanarFrameInvariants:
        """The planar inertia invariants (class docstring)."""
        return planar_frame_invariants(self.planar_fe, self.basis, self.where("fe"))

    def kinematics(self) -> BodyKinematics:
        suffixes = ("x", "y", "phi", *(f"eta{k}" for k in range(self.basis.modes)))
        return BodyKinematics(self.name, "planar", True, tuple(f"{self.name}_{s}" for s in suffixes))

    def lower(self, ctx: Lowering) -> None:
        inv = self.invariants
        n = self.basis.modes
        names = self.kinematics().coordinates
        R, theta_name, etanames = names[:2], names[2], names[3:]
        kin = self.kinematics()
        theta = kin.q("phi")
        eta = tuple(kin.q(f"eta{k}") for k in range(n))
        position = [ctx.parameter_expression(x, self.where("position")) for x in self.position[:2]]
        mass_factor = ctx.parameter_expression(self.mass_factor, self.where("mass_factor"))
        for k, name in enumerate(R):
            ctx.add_coordinate(Coordinate(name, "translational", mass=0.0, initial_position=position[k]))
        ctx.add_coordinate(Coordinate(theta_name, "rotational", mass=0.0,
                                      initial_position=ctx.parameter_expression(self.angle, self.where("angle"))))
        for name in etanames:
            ctx.add_coordinate(Coordinate(name, mass=0.0))
        ctx.add_matrix_term(MatrixTerm(f"{self.name}_translation_mass", MASS, R,
                                       SparseMatrix.of(inv.mass * np.eye(2), self.where("mass")), mass_factor))
        ctx.add_matrix_term(MatrixTerm(f"{self.name}_modal_mass", MASS, etanames,
                                       SparseMatrix.of(inv.modal_mass, self.where("mass")), mass_factor))
        c, s = sp.cos(theta), sp.sin(theta)
        A = sp.Matrix([[c, -s], [s, c]])
        scale = max(np.abs(inv.s0).max(), np.abs(inv.s1).max(initial=0.0), np.abs(inv.D).max(initial=0.0), 1e-300)
        local_s = [_affine(inv.s0[r], inv.s1[r], eta, scale) for r in range(2)]
        entries: list[tuple[str, str, sp.Expr]] = []
        for r in range(2):
            entries.append((R[r], theta_name, A[r, 0] * local_s[0] + A[r, 1] * local_s[1]))
            for k in range(n):
                d = [_number(inv.D[a, k], scale) or 0 for a in range(2)]
                entries.append((R[r], etanames[k], A[r, 0] * d[0] + A[r, 1] * d[1]))
        j_scale = max(abs(inv.j0), np.abs(inv.j1).max(initial=0.0), np.abs(inv.j2).max(initial=0.0), 1e-300)
        quadratic = [f * eta[k] * eta[m] for k in range(n) for m in range(k, n)
                     if (f := _number(inv.j2[k, m] * (1 if k == m else 2), j_scale)) is not None]
        entries.append((theta_name, theta_name, _affine(inv.j0, inv.j1, eta, j_scale) + sp.Add(*quadratic)))
        f_scale = max(np.abs(inv.f0).max(initial=0.0), np.abs(inv.f1).max(initial=0.0), 1e-300)
        entries += [(theta_name, etanames[k], _affine(inv.f0[k], inv.f1[:, k], eta, f_scale)) for k in range(n)]
        for row, col, value in entries:
            if value != 0:
                ctx.add_mass_entry(MassEntry(row, col, mass_factor * value))
        # Weight: Q = d/dq [g . (m R + A S(eta))] (class docstring).
        g = ctx.gravity
        if any(x.is_zero is not True for x in (g[0], g[1])):
            S = [_affine(inv.first_moment[r], inv.D[r], eta, scale) for r in range(2)]
            work = sum(g[r] * (A[r, 0] * S[0] + A[r, 1] * S[1]) for r in range(2))
            for k, name in enumerate(R):
                if g[k].is_zero is not True:
                    ctx.add_generalized_force(name, mass_factor * inv.mass * g[k])
            for name, q in ((theta_name, theta), *zip(etanames, eta)):
                value = sp.diff(work, q)
                if value != 0:
                    ctx.add_generalized_force(name, mass_factor * value)
        self.lower_elastic(ctx, etanames)
