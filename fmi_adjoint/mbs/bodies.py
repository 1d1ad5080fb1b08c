"""Bodies: ground, point mass, planar and spatial rigid body (dissertation Sec. 2.2-2.3).

Every body frame sits at the body's centre of mass (markers give other points), so the
kinetic energy separates into translation and rotation (Sec. 2.3.1, eq. (2.31) without its
middle term) and the mass matrix is block diagonal (eq. (2.41)):

* point mass: ``m I`` on ``<body>_x, <body>_y[, <body>_z]``;
* planar rigid body (x, y, phi in the global x-y plane, rotation about global z):
  ``diag(m, m, Izz)``;
* spatial rigid body (x, y, z, e0..e3, Euler parameters, :mod:`.rotations`): ``m I`` and the
  rotational block ``4 G^T J G`` (Sec. 2.3.1 with the dissertation's G = our 2G), with the
  normalization constraint ``e . e - 1 = 0`` named ``<body>_normalization``.

The rotational block depends on ``e``; :func:`fmi_adjoint.model.assemble` then adds the
quadratic velocity terms of Lagrange's equations, ``dT/dq - (d/dq (M v)) v``.  On the manifold
``e . e = 1``, ``e . e_dot = 0`` these differ from the dissertation's gyroscopic term
``+2 G_d_dot^T I_M G_d_dot e`` (G_d = 2G; eqs. (2.38)-(2.39) moved to the right-hand side:
eq. (2.40) as printed carries it with a minus sign, which contradicts (2.38)-(2.39) and
Euler's equations) only along ``e``, because ``G e = 0``; that part is taken up by the
multiplier of the normalization constraint, so the motion is the same (Sec. 2.3.4: the
constrained Lagrange equations of eq. (2.47) hold for any kinetic energy ``T(q, v)`` in
redundant coordinates).  Projected with ``G`` both give Euler's equations
``J omega'_dot + omega' x J omega' = torque`` (tests/test_mbs_core.py checks this).
``4 G^T J G`` is singular along ``e``; the normalization constraint's Jacobian ``2 e^T`` makes
the augmented matrix regular.

Kinematics (used by markers, joints, forces and sensors): expressions in *name symbols*
(``sp.Symbol("<body>_x", real=True)``) and ``der(...)`` specials
(:func:`fmi_adjoint.expressions.special`).
"""

from __future__ import annotations

import abc
import dataclasses

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypeAlias

import numpy as np
import sympy as sp

from ..errors import ModelError
from ..model import Coordinate, MassEntry
from ..text import check_identifier
from . import rotations as rot
from .frames import GROUND, GROUND_KINEMATICS, BodyKinematics
from .names import Number

if TYPE_CHECKING:
    from .context import Lowering

__all__ = [
    "Body",
    "BodyKinematics",
    "Ground",
    "PointMass",
    "PlanarRigidBody",
    "SpatialRigidBody",
    "AxisAngle",
    "Cardan",
    "RotationMatrix",
    "Rotation",
    "as_rotation",
    "GROUND",
]






# --------------------------------------------------------------------------- rotations


@dataclasses.dataclass(frozen=True)
class AxisAngle:
    """Rotation by ``angle`` [rad] about ``axis`` (need not be unit length, not zero)."""

    axis: tuple[float, float, float]
    angle: float

    def euler(self, where: str) -> tuple[float, ...]:
        return rot.euler_from_axis_angle(self.axis, self.angle, where)


@dataclasses.dataclass(frozen=True)
class Cardan:
    """Cardan angles ``(a, b, c)`` [rad]: ``A = Rx(a) Ry(b) Rz(c)`` (:mod:`.rotations`)."""

    angles: tuple[float, float, float]

    def euler(self, where: str) -> tuple[float, ...]:
        return rot.euler_from_cardan(self.angles, where)


@dataclasses.dataclass(frozen=True)
class RotationMatrix:
    """A rotation matrix (rows); its columns are the body axes in global coordinates.
    Checked orthonormal with det +1 within 1e-9."""

    rows: tuple[tuple[float, ...], ...]

    def euler(self, where: str) -> tuple[float, ...]:
        return rot.euler_from_matrix(self.rows, where)


Rotation: TypeAlias = "AxisAngle | Cardan | RotationMatrix"


def as_rotation(value: object, where: str) -> Rotation | None:
    """A rotation object from ``None``, an object, or a mapping with ``axis`` and ``angle``,
    ``cardan`` or ``matrix`` (the forms of a model file)."""
    if value is None or isinstance(value, (AxisAngle, Cardan, RotationMatrix)):
        return value
    if isinstance(value, Mapping):
        keys = set(value)
        if keys == {"axis", "angle"}:
            return AxisAngle(tuple(value["axis"]), value["angle"])
        if keys == {"cardan"}:
            return Cardan(tuple(value["cardan"]))
        if keys == {"matrix"}:
            return RotationMatrix(tuple(tuple(row) for row in value["matrix"]))
    raise ModelError(f"{where}: a rotation is {{axis = [..], angle = ..}}, {{cardan = [a, b, c]}} or "
                     f"{{matrix = [[..], [..], [..]]}}; got {value!r}.")




# --------------------------------------------------------------------------- bodies


def _vector(value: object, n: int, where: str) -> tuple[Number, ...]:
    if isinstance(value, (str, int, float, sp.Expr)) or not isinstance(value, Sequence):
        raise ModelError(f"{where}: give {n} values (numbers or expressions), got {value!r}.")
    items = tuple(value)
    if len(items) != n:
        raise ModelError(f"{where}: give {n} values, got {len(items)} ({value!r}).")
    return items


def _fixed(flag: object, suffix: str, where: str, allowed: tuple[str, ...]) -> bool:
    """``fixed_position``/``fixed_velocity``: True/False for all coordinates of the body, or
    a collection of coordinate suffixes (``("phi",)``; spatial bodies: ``"rotation"`` for
    the Euler parameters)."""
    if isinstance(flag, bool):
        return flag
    items = (flag,) if isinstance(flag, str) else tuple(flag)  # type: ignore[arg-type]
    unknown = [x for x in items if x not in allowed]
    if unknown:
        raise ModelError(f"{where}: {unknown!r} are not coordinates of the body; give true/false or some of "
                         f"{', '.join(allowed)}.")
    return suffix in items


def _check_positive(ctx: Lowering, value: sp.Expr, where: str, what: str) -> None:
    nominal = ctx.nominal(value, where)
    if not nominal > 0:
        raise ModelError(f"{where}: the {what} is {nominal:g} at the nominal parameter values; a body needs a "
                         f"positive {what} in every free direction (give a positive value, or fix the body to ground).")


@dataclasses.dataclass(frozen=True)
class Body(abc.ABC):
    """Base of all bodies: a name, initial values, and :meth:`kinematics`."""

    name: str

    def __post_init__(self) -> None:
        check_identifier(self.name, "body")
        if self.name == GROUND and not isinstance(self, Ground):
            raise ModelError(f"body '{GROUND}': the name is reserved for the ground; choose another name.")

    def where(self, prop: str = "") -> str:
        suffix = f".{prop}" if prop else ""
        return f"body '{self.name}' ({type(self).__name__}){suffix}"

    @abc.abstractmethod
    def kinematics(self) -> BodyKinematics:
        """The body's kinematics (:class:`BodyKinematics`)."""

    @property
    def coordinates(self) -> tuple[str, ...]:
        return self.kinematics().coordinates

    def lower(self, ctx: Lowering) -> None:  # noqa: B027 - the ground adds nothing
        """Add coordinates, mass-matrix entries and constraints to ``ctx``."""


@dataclasses.dataclass(frozen=True)
class Ground(Body):
    """The inertial frame.  ``mbs.Marker("pivot", "ground")`` needs no declared ground."""

    name: str = GROUND

    def kinematics(self) -> BodyKinematics:
        return GROUND_KINEMATICS


@dataclasses.dataclass(frozen=True)
class PointMass(Body):
    """A point mass at ``(x, y, z)`` (``planar=True``: ``(x, y)``, z = 0); no rotation.

    Attributes
    ----------
    mass : number or expression of parameters
    position, velocity : initial values (3, or 2 when planar), global
    planar : bool
    fixed_position, fixed_velocity : bool or tuple of str
        Hold the initial values while the initial state is made consistent: all (True) or
        those of the named coordinates (suffixes, e.g. ``("x",)``).
    """

    mass: Number = 1.0
    position: tuple[Number, ...] = (0.0, 0.0, 0.0)
    velocity: tuple[Number, ...] = (0.0, 0.0, 0.0)
    planar: bool = False
    fixed_position: bool | tuple[str, ...] = False
    fixed_velocity: bool | tuple[str, ...] = False

    def kinematics(self) -> BodyKinematics:
        suffixes = ("x", "y") if self.planar else ("x", "y", "z")
        return BodyKinematics(self.name, "point", self.planar, tuple(f"{self.name}_{s}" for s in suffixes))

    def lower(self, ctx: Lowering) -> None:
        names = self.coordinates
        n = len(names)
        pos, vel = tuple(self.position), tuple(self.velocity)
        if self.planar and len(pos) == 3 and pos[2] in (0, 0.0):
            pos = pos[:2]
        if self.planar and len(vel) == 3 and vel[2] in (0, 0.0):
            vel = vel[:2]
        pos, vel = _vector(pos, n, self.where("position")), _vector(vel, n, self.where("velocity"))
        mass = ctx.parameter_expression(self.mass, self.where("mass"))
        _check_positive(ctx, mass, self.where("mass"), "mass")
        suffixes = tuple(name[len(self.name) + 1:] for name in names)
        for name, suffix, p0, v0 in zip(names, suffixes, pos, vel):
            ctx.add_coordinate(Coordinate(
                name, "translational", mass, ctx.parameter_expression(p0, self.where("position")),
                ctx.parameter_expression(v0, self.where("velocity")),
                _fixed(self.fixed_position, suffix, self.where("fixed_position"), suffixes),
                _fixed(self.fixed_velocity, suffix, self.where("fixed_velocity"), suffixes)))


@dataclasses.dataclass(frozen=True)
class PlanarRigidBody(Body):
    """A rigid body moving in the global x-y plane: coordinates ``<body>_x``, ``<body>_y``
    (centre of mass) and ``<body>_phi`` (rotation about global z, counter-clockwise);
    ``A = Rz(phi)``; mass matrix ``diag(m, m, Izz)``.

    Attributes
    ----------
    mass, inertia : numbers or expressions of parameters (inertia: Izz about the COM)
    position : initial (x, y); angle : initial phi [rad]
    velocity : initial (vx, vy); angular_velocity : initial phi_dot [rad/s]
    fixed_position, fixed_velocity : bool or tuple of str
        All (True) or the named coordinates (``("phi",)``) are held while the initial state
        is made consistent.
    """

    mass: Number = 1.0
    inertia: Number = 1.0
    position: tuple[Number, ...] = (0.0, 0.0)
    angle: Number = 0.0
    velocity: tuple[Number, ...] = (0.0, 0.0)
    angular_velocity: Number = 0.0
    fixed_position: bool | tuple[str, ...] = False
    fixed_velocity: bool | tuple[str, ...] = False

    def kinematics(self) -> BodyKinematics:
        return BodyKinematics(self.name, "planar", True, tuple(f"{self.name}_{s}" for s in ("x", "y", "phi")))

    def lower(self, ctx: Lowering) -> None:
        pos, vel = _vector(self.position, 2, self.where("position")), _vector(self.velocity, 2, self.where("velocity"))
        mass = ctx.parameter_expression(self.mass, self.where("mass"))
        inertia = ctx.parameter_expression(self.inertia, self.where("inertia"))
        _check_positive(ctx, mass, self.where("mass"), "mass")
        _check_positive(ctx, inertia, self.where("inertia"), "inertia")
        allowed = ("x", "y", "phi")
        fp = [_fixed(self.fixed_position, s, self.where("fixed_position"), allowed) for s in allowed]
        fv = [_fixed(self.fixed_velocity, s, self.where("fixed_velocity"), allowed) for s in allowed]
        for k, (suffix, p0, v0) in enumerate(zip(("x", "y"), pos, vel)):
            ctx.add_coordinate(Coordinate(
                f"{self.name}_{suffix}", "translational", mass, ctx.parameter_expression(p0, self.where("position")),
                ctx.parameter_expression(v0, self.where("velocity")), fp[k], fv[k]))
        ctx.add_coordinate(Coordinate(
            f"{self.name}_phi", "rotational", inertia, ctx.parameter_expression(self.angle, self.where("angle")),
            ctx.parameter_expression(self.angular_velocity, self.where("angular_velocity")), fp[2], fv[2]))


@dataclasses.dataclass(frozen=True)
class SpatialRigidBody(Body):
    """A rigid body in space: ``<body>_x, _y, _z`` (centre of mass, global) and Euler
    parameters ``<body>_e0.._e3`` (:mod:`.rotations`) with the normalization constraint
    ``<body>_normalization``; mass matrix ``m I`` and ``4 G^T J G`` (eq. (2.41)).

    Attributes
    ----------
    mass : number or expression of parameters
    inertia : 3 principal values (Ixx, Iyy, Izz) or 6 values (Ixx, Iyy, Izz, Ixy, Ixz, Iyz)
        of the inertia tensor about the centre of mass in body axes; the products are the
        tensor's off-diagonal entries (``Ixy = -int x y dm``).  Numbers or expressions.
        Checked at the nominal parameter values: positive definite, and the principal
        moments satisfy the triangle inequality ``I_a <= I_b + I_c`` (else ModelError).
    position : initial (x, y, z) of the centre of mass
    rotation : initial orientation, AxisAngle, Cardan, RotationMatrix or a mapping
        (:func:`as_rotation`); numbers.  Default: the identity.
    velocity : initial linear velocity (global)
    angular_velocity : initial angular velocity, global axes unless ``body_frame_angular_velocity``
        (then body axes); ``e_dot = E^T omega / 2 = G^T omega' / 2``.
    fixed_position, fixed_velocity : bool or tuple of str
        All (True) or the named ones of ``x, y, z, rotation, e0, e1, e2, e3`` are held while
        the initial state is made consistent; ``rotation`` holds e1..e3 (e0 follows from the
        normalization, so it is not over-fixed).  Single Euler parameters hold less: a body
        on a hinge about z starting at the identity keeps its spin with
        ``fixed_velocity=("e3",)`` (``omega_z = 2 (e0 e3' - e3 e0' + ...)``), where
        ``"rotation"`` would over-fix the hinge's rows.
    """

    mass: Number = 1.0
    inertia: tuple[Number, ...] = (1.0, 1.0, 1.0)
    position: tuple[Number, ...] = (0.0, 0.0, 0.0)
    rotation: object = None
    velocity: tuple[Number, ...] = (0.0, 0.0, 0.0)
    angular_velocity: tuple[Number, ...] = (0.0, 0.0, 0.0)
    body_frame_angular_velocity: bool = False
    fixed_position: bool | tuple[str, ...] = False
    fixed_velocity: bool | tuple[str, ...] = False

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "rotation", as_rotation(self.rotation, self.where("rotation")))
        self.initial_euler_parameters()  # a bad axis or matrix is reported here, naming the body
        if isinstance(self.inertia, (str, int, float, sp.Expr)) or len(tuple(self.inertia)) not in (3, 6):
            raise ModelError(f"{self.where('inertia')}: give 3 principal values (Ixx, Iyy, Izz) or 6 values "
                             f"(Ixx, Iyy, Izz, Ixy, Ixz, Iyz); got {self.inertia!r}.")

    def kinematics(self) -> BodyKinematics:
        suffixes = ("x", "y", "z", "e0", "e1", "e2", "e3")
        return BodyKinematics(self.name, "spatial", False, tuple(f"{self.name}_{s}" for s in suffixes))

    def inertia_tensor(self, ctx: Lowering) -> sp.Matrix:
        """The inertia tensor J about the centre of mass in body axes (3x3)."""
        values = [ctx.parameter_expression(x, self.where("inertia")) for x in self.inertia]
        if len(values) == 3:
            values += [sp.Integer(0)] * 3
        ixx, iyy, izz, ixy, ixz, iyz = values
        return sp.Matrix([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])

    def initial_euler_parameters(self) -> tuple[float, ...]:
        rotation = as_rotation(self.rotation, self.where("rotation")) or AxisAngle((0.0, 0.0, 1.0), 0.0)
        return rotation.euler(self.where("rotation"))

    def lower(self, ctx: Lowering) -> None:
        kin = self.kinematics()
        pos = _vector(self.position, 3, self.where("position"))
        vel = _vector(self.velocity, 3, self.where("velocity"))
        omega = _vector(self.angular_velocity, 3, self.where("angular_velocity"))
        mass = ctx.parameter_expression(self.mass, self.where("mass"))
        _check_positive(ctx, mass, self.where("mass"), "mass")
        J = self.inertia_tensor(ctx)
        nominal = np.array([[ctx.nominal(J[i, j], self.where("inertia")) for j in range(3)] for i in range(3)])
        eig = np.linalg.eigvalsh(nominal)
        if not eig[0] > 1e-12 * max(1.0, abs(eig[-1])):
            raise ModelError(f"{self.where('inertia')}: the inertia tensor is not positive definite at the nominal "
                             f"values (principal moments {', '.join(f'{x:.4g}' for x in eig)}); a free body needs "
                             "positive inertia about every axis; give positive principal moments.")
        # Triangle inequality of the principal moments: I_a + I_b - I_c = 2 int z^2 dm >= 0.
        if eig[2] > (eig[0] + eig[1]) * (1 + 1e-9):
            raise ModelError(f"{self.where('inertia')}: the principal moments {eig[0]:.6g}, {eig[1]:.6g}, {eig[2]:.6g} "
                             "violate the triangle inequality (the largest exceeds the sum of the other two, "
                             f"{eig[0] + eig[1]:.6g}) at the nominal values; no mass distribution has this inertia "
                             "tensor. Give the moments about the centre of mass in body axes, e.g. from the CAD model.")
        e0 = self.initial_euler_parameters()
        w = sp.Matrix([ctx.parameter_expression(x, self.where("angular_velocity")) for x in omega])
        ev = [sp.Float(x, 17) for x in e0]
        back = rot.G(ev) if self.body_frame_angular_velocity else rot.E(ev)
        edot0 = back.T * w / 2
        allowed = ("x", "y", "z", "rotation", "e0", "e1", "e2", "e3")
        # True holds x, y, z and "rotation" (e1..e3); single Euler parameters only by name.
        fp = [_fixed(self.fixed_position, s, self.where("fixed_position"), allowed)
              and not (s[0] == "e" and isinstance(self.fixed_position, bool)) for s in allowed]
        fv = [_fixed(self.fixed_velocity, s, self.where("fixed_velocity"), allowed)
              and not (s[0] == "e" and isinstance(self.fixed_velocity, bool)) for s in allowed]
        for k, (name, p0, v0) in enumerate(zip(kin.coordinates[:3], pos, vel)):
            ctx.add_coordinate(Coordinate(
                name, "translational", mass, ctx.parameter_expression(p0, self.where("position")),
                ctx.parameter_expression(v0, self.where("velocity")), fp[k], fv[k]))
        # "fixed" holds e1..e3 and their rates; e0 stays free, so the normalization
        # constraint (and its time derivative) are not over-fixed: e0 keeps its (consistent)
        # value, the root near the given one.
        for k, name in enumerate(kin.coordinates[3:]):
            ctx.add_coordinate(Coordinate(name, "rotational", 0.0, float(e0[k]), sp.expand(edot0[k]),
                                          (fp[3] and k > 0) or fp[4 + k], (fv[3] and k > 0) or fv[4 + k]))
        # Rotational block 4 G^T J G (Sec. 2.3.1, eq. (2.41); the dissertation's G is our 2 G).
        e = kin.euler_parameters()
        names = kin.coordinates[3:]
        for (i, j), entry in rot.rotational_mass(e, J).items():
            ctx.add_mass_entry(MassEntry(names[i], names[j], entry))
        ctx.add_constraint(f"{self.name}_normalization", sum(x**2 for x in e) - 1)
