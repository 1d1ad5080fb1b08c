"""Sensors: model outputs from the kinematics and the multipliers (issue 23, item 5).

Every sensor lowers to one or more :class:`~fmi_adjoint.model.Output` with a unit.  A sensor
with several components gives outputs ``<sensor>_<component>`` (``_x``, ``_y``, ``_z``; a
joint reaction ``_fx`` ... ``_tz``), a scalar sensor the output ``<sensor>``.  Velocities are
written with ``der(q)``, accelerations with ``der2(q)`` and reactions with ``lam(c)``
(:mod:`fmi_adjoint.expressions`), so the outputs are exact functions of the engine's state.

Frames (``frame=``): ``"global"`` (the inertial axes), ``"body"`` (the axes of the
marker's body) or ``"marker"`` (the marker's own axes: how a sensor mounted at the marker
is oriented).  A vector ``w`` in global axes is ``A^T w`` in a frame with rotation ``A``.

Accelerometers: :class:`MarkerAcceleration` gives ``A^T r_P''`` (the kinematic
acceleration); with ``gravity=True`` it gives the specific force a real accelerometer
measures, ``A^T (r_P'' - g)`` (``g`` the system's gravity vector: at rest it reads
``+9.81`` upwards).  Gyros: :class:`AngularVelocity` in body or marker axes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import sympy as sp

from ..calculus import Differentiator
from ..errors import ModelError
from ..expressions import special
from ..model import Output
from ..text import check_identifier
from . import rotations as rot
from .forces import joint_coordinate
from .names import symbol

if TYPE_CHECKING:
    from .context import Lowering

__all__ = [
    "MarkerPosition",
    "MarkerVelocity",
    "MarkerAcceleration",
    "Orientation",
    "AngularVelocity",
    "AngularAcceleration",
    "RelativeDisplacement",
    "Distance",
    "JointCoordinate",
    "JointReaction",
    "BeamStrain",
    "FRAMES",
    "joint_reaction",
]

FRAMES = ("global", "body", "marker")
_AXES = ("x", "y", "z")



def _components(value: object, allowed: Sequence[str], where: str) -> tuple[str, ...]:
    items = (value,) if isinstance(value, str) else tuple(value)  # type: ignore[arg-type]
    if not items or any(c not in allowed for c in items) or len(set(items)) != len(items):
        raise ModelError(f"{where}: components {value!r} must be distinct names out of {', '.join(allowed)}.")
    return tuple(c for c in allowed if c in items)


def _frame_rotation(ctx: Lowering, marker: str, frame: str, where: str) -> sp.Matrix:
    m = ctx.marker(marker, where)
    if frame == "global":
        return sp.eye(3)
    if frame == "body":
        return m.body.rotation()
    if frame == "marker":
        return m.rotation
    raise ModelError(f"{where}: frame {frame!r} is not one of {', '.join(FRAMES)}.")


@dataclasses.dataclass(frozen=True)
class _Sensor:
    """Base: a name and the output helper."""

    name: str

    def __post_init__(self) -> None:
        check_identifier(self.name, "sensor")

    def where(self, prop: str = "") -> str:
        return f"sensor '{self.name}' ({type(self).__name__})" + (f".{prop}" if prop else "")

    def _emit(self, ctx: Lowering, values: dict[str, sp.Expr], unit: str, description: str) -> None:
        for component, expr in values.items():
            name = f"{self.name}_{component}" if component else self.name
            ctx.add_output(Output(name, expr, unit, f"{description} ({component})" if component else description))


@dataclasses.dataclass(frozen=True)
class _VectorSensor(_Sensor):
    marker: str = ""
    frame: str = "global"
    components: tuple[str, ...] = _AXES

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.frame not in FRAMES:
            raise ModelError(f"{self.where('frame')}: {self.frame!r} is not one of {', '.join(FRAMES)}.")
        object.__setattr__(self, "components", _components(self.components, _AXES, self.where("components")))

    def _vector(self, ctx: Lowering, global_vector: sp.Matrix, unit: str, description: str) -> None:
        A = _frame_rotation(ctx, self.marker, self.frame, self.where("frame"))
        w = A.T * global_vector if self.frame != "global" else global_vector
        self._emit(ctx, {c: w[_AXES.index(c)] for c in self.components}, unit,
                   f"{description} of marker {self.marker}, {self.frame} axes")


@dataclasses.dataclass(frozen=True)
class MarkerPosition(_VectorSensor):
    """Position of a marker's origin (m), ``A^T r_P`` in the chosen frame."""

    def lower(self, ctx: Lowering) -> None:
        self._vector(ctx, ctx.marker(self.marker, self.where("marker")).position, "m", "position")


@dataclasses.dataclass(frozen=True)
class MarkerVelocity(_VectorSensor):
    """Velocity of a marker's origin (m/s), ``A^T r_P'`` (the inertial velocity in the frame's axes)."""

    def lower(self, ctx: Lowering) -> None:
        r = ctx.marker(self.marker, self.where("marker")).position
        self._vector(ctx, r.applyfunc(ctx.velocity_of), "m/s", "velocity")


@dataclasses.dataclass(frozen=True)
class MarkerAcceleration(_VectorSensor):
    """Acceleration of a marker's origin (m/s^2): ``A^T r_P''``, or with ``gravity=True`` the
    specific force of an accelerometer ``A^T (r_P'' - g)`` (module docstring)."""

    gravity: bool = False

    def lower(self, ctx: Lowering) -> None:
        r = ctx.marker(self.marker, self.where("marker")).position
        acc = r.applyfunc(ctx.acceleration_of)
        if self.gravity:
            acc = acc - ctx.gravity
        self._vector(ctx, acc, "m/s^2", "specific force" if self.gravity else "acceleration")


@dataclasses.dataclass(frozen=True)
class AngularVelocity(_VectorSensor):
    """Angular velocity of the marker's body (rad/s): a gyro in the chosen axes."""

    def lower(self, ctx: Lowering) -> None:
        omega = ctx.marker(self.marker, self.where("marker")).body.angular_velocity()
        self._vector(ctx, omega, "rad/s", "angular velocity")


@dataclasses.dataclass(frozen=True)
class AngularAcceleration(_VectorSensor):
    """Angular acceleration of the marker's body (rad/s^2), ``A^T d(omega)/dt``
    (in body axes this equals the derivative of the body-axes angular velocity)."""

    def lower(self, ctx: Lowering) -> None:
        omega = ctx.marker(self.marker, self.where("marker")).body.angular_velocity()
        self._vector(ctx, omega.applyfunc(ctx.velocity_of), "rad/s^2", "angular acceleration")


@dataclasses.dataclass(frozen=True)
class Orientation(_Sensor):
    """Orientation of a marker (rad) as Cardan angles: ``A_P = Rx(a) Ry(b) Rz(c)``
    (:func:`.rotations.cardan_from_matrix`), outputs ``<name>_x`` = a, ``_y`` = b, ``_z`` = c.

    ``a`` and ``c`` wrap at +-pi and the angles are singular at ``b = +-pi/2``.  A marker that
    only rotates about z (planar bodies, ground) gives its unwrapped planar angle as ``_z``
    (default component then: ``z`` only; ``_x`` and ``_y`` are zero).
    """

    marker: str = ""
    components: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.components is not None:
            object.__setattr__(self, "components", _components(self.components, _AXES, self.where("components")))

    def lower(self, ctx: Lowering) -> None:
        m = ctx.marker(self.marker, self.where("marker"))
        if m.planar_angle is not None and m.body.planar:
            angles = (sp.Integer(0), sp.Integer(0), m.planar_angle)
            default: tuple[str, ...] = ("z",)
        else:
            angles = rot.cardan_from_matrix(m.rotation)
            default = _AXES
        chosen = self.components if self.components is not None else default
        self._emit(ctx, {c: angles[_AXES.index(c)] for c in chosen}, "rad",
                   f"Cardan angle of marker {self.marker}")


@dataclasses.dataclass(frozen=True)
class RelativeDisplacement(_Sensor):
    """Position of marker j relative to marker i in marker i's axes, ``A_i^T (r_j - r_i)`` (m)."""

    marker_i: str = ""
    marker_j: str = ""
    components: tuple[str, ...] = _AXES

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "components", _components(self.components, _AXES, self.where("components")))

    def lower(self, ctx: Lowering) -> None:
        mi, mj = ctx.marker(self.marker_i, self.where("marker_i")), ctx.marker(self.marker_j, self.where("marker_j"))
        d = mi.rotation.T * (mj.position - mi.position)
        self._emit(ctx, {c: d[_AXES.index(c)] for c in self.components}, "m",
                   f"displacement of {self.marker_j} from {self.marker_i} in {self.marker_i} axes")


@dataclasses.dataclass(frozen=True)
class Distance(_Sensor):
    """Distance of two marker origins, ``|r_j - r_i|`` (m)."""

    marker_i: str = ""
    marker_j: str = ""

    def lower(self, ctx: Lowering) -> None:
        where = self.where("markers")
        d = ctx.marker(self.marker_j, where).position - ctx.marker(self.marker_i, where).position
        self._emit(ctx, {"": sp.sqrt((d.T * d)[0, 0])}, "m", f"distance of {self.marker_i} and {self.marker_j}")


@dataclasses.dataclass(frozen=True)
class JointCoordinate(_Sensor):
    """A joint's coordinate (relative angle in rad or displacement in m, :mod:`.joints`) or
    its time derivative (``derivative`` = 1: rate, 2: acceleration).

    A spatial revolute joint's angle is ``atan2(...)`` and wraps at +-pi, unless a
    :class:`~.forces.JointForce` acts on the joint: then its auxiliary coordinate carries the
    angle continuously (it counts turns) and the sensor outputs that coordinate.
    """

    joint: str = ""
    derivative: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.derivative not in (0, 1, 2) or isinstance(self.derivative, bool):
            raise ModelError(f"{self.where('derivative')}: {self.derivative!r} is not 0 (coordinate), 1 (rate) or "
                             "2 (acceleration).")

    def lower(self, ctx: Lowering) -> None:
        s, kind = joint_coordinate(ctx, self.joint, self.where("joint"))
        unwrapped = ctx.joint_coordinate_name(self.joint)
        if unwrapped is not None:
            s = symbol(unwrapped)
        for _ in range(self.derivative):
            s = ctx.velocity_of(s)
        base = "m" if kind == "translational" else "rad"
        unit = base + ("", "/s", "/s^2")[self.derivative]
        what = ("coordinate", "rate", "acceleration")[self.derivative]
        self._emit(ctx, {"": s}, unit, f"{what} of joint {self.joint}")


REACTION_COMPONENTS = ("fx", "fy", "fz", "tx", "ty", "tz")


def joint_reaction(
    rows: Sequence[tuple[sp.Expr, sp.Expr]],
    coordinates: Sequence[str],
    origin: sp.Matrix,
    omega: sp.Matrix,
    point: sp.Matrix,
) -> tuple[sp.Matrix, sp.Matrix]:
    """Force and torque (global axes, torque about ``point``) that constraint rows exert on one
    body, from their multipliers.

    ``rows``: ``(C_k(q), lambda_k)`` of the joint.  The generalized constraint force on the
    body's coordinates ``q_b`` is ``Q_b = -sum_k (dC_k/dq_b)^T lambda_k`` (the ``-C_q^T
    lambda`` of ``M a + C_q^T lambda = Q``).  By virtual work it equals
    ``J_u^T F + J_w^T T_c`` with ``J_u = d origin / d q_b`` and ``J_w = d omega / d der(q_b)``,
    ``F`` the force and ``T_c`` the torque about the centre of mass (the body origin).  With the
    body origin among the coordinates, ``J_u`` selects the translational coordinates, so
    ``F = Q_u``; ``T_c`` solves ``J_w^T T_c = Q_rot`` in the least-squares sense,
    ``T_c = (J_w J_w^T)^+ J_w Q_rot``: for Euler parameters ``J_w = 2E``, ``E E^T = (e.e) I`` and
    the component of ``Q_e`` along ``e`` (taken up by the normalization multiplier) drops out
    (``E e = 0``); for a planar body only ``T_z`` exists.  The torque about ``point`` is
    ``T_c - (point - origin) x F``.
    """
    n = len(coordinates)
    q = [symbol(c) for c in coordinates]
    Q = sp.zeros(n, 1)
    calculus = Differentiator()
    for expr, lam in rows:
        for k, qk in enumerate(q):
            d = calculus.derivative(expr, qk)
            if d != 0:
                Q[k] -= d * lam
    Ju = origin.jacobian(sp.Matrix(q)) if n else sp.zeros(3, 0)
    Jw = omega.jacobian(sp.Matrix([special("der", c) for c in coordinates])) if n else sp.zeros(3, 0)
    trans = [k for k in range(n) if any(Ju[i, k] != 0 for i in range(3))]
    F = sp.zeros(3, 1)
    for k in trans:
        for i in range(3):
            if Ju[i, k] != 0:
                F[i] += Q[k] / Ju[i, k]  # Ju is a selection (unit entries) on the origin's coordinates
    rot_idx = [k for k in range(n) if k not in trans]
    Tc = sp.zeros(3, 1)
    if rot_idx:
        Jr = Jw[:, rot_idx]
        Qr = sp.Matrix([Q[k] for k in rot_idx])
        gram = (Jr * Jr.T).applyfunc(sp.expand)
        proj = Jr * Qr
        for i in range(3):
            if gram[i, i] != 0:
                Tc[i] = proj[i] / gram[i, i]
        off = [gram[i, j] for i in range(3) for j in range(3) if i != j]
        if any(x != 0 for x in off):
            raise ModelError("joint reaction: the angular-velocity Jacobian of the body is not orthogonal; this body "
                             "type is not supported by JointReaction.")
    arm = point - origin
    T = Tc - arm.cross(F)
    return F, T


@dataclasses.dataclass(frozen=True)
class JointReaction(_Sensor):
    """Reaction force (N) and torque (N m) a joint transmits: a load cell.

    The force and torque that **body i exerts on body j** through the joint (marker i on body
    i, marker j on body j), the torque taken about the origin of ``marker`` (default: the
    joint's marker j), both in ``marker``'s axes (``frame="marker"``) or global axes.  They
    come from the multipliers ``lam(...)`` of the joint's constraint rows (including its
    drive) by :func:`joint_reaction`; if body j is the ground, from body i with the sign
    reversed (Newton's third law).  Outputs ``<name>_fx, _fy, _fz, _tx, _ty, _tz`` (choose with
    ``components``).  For planar bodies only ``fx, fy, tz`` exist (the others are zero: the
    model has no out-of-plane equations).

    Example: a pendulum hanging at rest from ground (marker i) gives ``f = +m g`` upwards on
    the pendulum (body j).

    Convention against Adams: here the reaction is that of **body i on body j**.  An Adams
    joint force request reports, by default, the force on the joint's I marker (exerted by the
    J part): with Adams' I marker given as ``marker_i`` that is the negative of this sensor's
    value; giving it as ``marker_j`` (and Adams' J as ``marker_i``) gives the same sign.
    """

    joint: str = ""
    marker: str | None = None
    frame: str = "marker"
    components: tuple[str, ...] = REACTION_COMPONENTS

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.frame not in ("marker", "global"):
            raise ModelError(f"{self.where('frame')}: {self.frame!r} is not 'marker' or 'global'.")
        object.__setattr__(self, "components",
                           _components(self.components, REACTION_COMPONENTS, self.where("components")))

    def lower(self, ctx: Lowering) -> None:
        where = self.where("joint")
        joint = ctx.joint_component(self.joint, where)
        rows = [(ctx.constraint(c), special("lam", c)) for c in ctx.joint_constraints(self.joint, where)]
        mi = ctx.marker(joint.marker_i, where)  # type: ignore[attr-defined]
        mj = ctx.marker(joint.marker_j, where)  # type: ignore[attr-defined]
        at = ctx.marker(self.marker, self.where("marker")) if self.marker is not None else mj
        body, sign = (mj.body, 1) if not mj.body.ground else (mi.body, -1)
        F, T = joint_reaction(rows, body.coordinates, body.origin(), body.angular_velocity(), at.position)
        F, T = sign * F, sign * T
        if self.frame == "marker":
            F, T = at.rotation.T * F, at.rotation.T * T
        values = dict(zip(REACTION_COMPONENTS, list(F) + list(T)))
        units = {c: "N" if c.startswith("f") else "N*m" for c in REACTION_COMPONENTS}
        for c in self.components:
            ctx.add_output(Output(f"{self.name}_{c}", values[c], units[c],
                                  f"joint {self.joint}: {'force' if c[0] == 'f' else 'torque'} of body i on body j, "
                                  f"{self.frame} axes ({c})"))


@dataclasses.dataclass(frozen=True)
class BeamStrain(_Sensor):
    """A strain gauge on a beam element of a flexible body (issue 25, part 5): the axial strain
    (m/m) of the fibre ``fibre = (y, z)`` of the section, ``position`` (0 to 1) along the element
    from ``nodes[0]`` to ``nodes[1]`` (:func:`fmi_adjoint.flexible.strain.beam_strain_row`:
    ``eps = du/dx - y v'' - z w''``, Euler-Bernoulli), recovered from the reduced basis:
    ``eps = r Psi_e q_d``, a constant row times the body's deformation coordinates ``q_d``
    (:meth:`~fmi_adjoint.mbs.flexible.NodalBody.deformation_coordinates`), so linear in the state
    and exactly differentiable.  ``orientation`` is the beam's orientation vector (its local
    ``y``; default ``(0, 1, 0)``, as :func:`~fmi_adjoint.flexible.line_mesh`).  On any of
    :class:`~fmi_adjoint.mbs.FlexibleBody`, :class:`~fmi_adjoint.mbs.ffrf.FloatingFrameBody`,
    :class:`~fmi_adjoint.mbs.ffrf.PlanarFloatingFrameBody` (in-plane: its ``fibre`` z only
    concerns the out-of-plane bending it leaves out)."""

    body: str = ""
    nodes: tuple[int, ...] = ()
    position: float = 0.0
    fibre: tuple[float, ...] = (0.0, 0.0)
    orientation: tuple[float, ...] = (0.0, 1.0, 0.0)

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(tuple(self.nodes)) != 2 or len(set(self.nodes)) != 2:
            raise ModelError(f"{self.where('nodes')}: {self.nodes!r}; give the two end nodes of one beam element, "
                             "e.g. (1, 2).")
        if len(tuple(self.orientation)) != 3:
            raise ModelError(f"{self.where('orientation')}: {self.orientation!r}; give 3 numbers.")

    def lower(self, ctx: Lowering) -> None:
        # Imported here: the flexible bodies bring the finite elements and scipy, which a model
        # without them never needs (a third of lowering a lattice of point masses).
        from ..flexible.strain import beam_strain_row
        from .flexible import NodalBody

        component = ctx.body_component(self.body, self.where("body"))
        if not isinstance(component, NodalBody):
            raise ModelError(f"{self.where('body')}: body '{self.body}' is not a flexible body; a strain gauge sits "
                             "on a beam element of a FlexibleBody or a floating-frame body.")
        first, second = (component.basis.node(node, self.where("nodes")) for node in self.nodes)
        positions = component.basis.positions
        row = beam_strain_row(positions[first], positions[second], xi=self.position, fibre=self.fibre,
                              orientation=self.orientation, where=self.where())
        modes = np.vstack([component.node_modes(node, self.where("nodes")) for node in self.nodes])
        coefficients = row @ modes
        scale = max(float(np.abs(row).max()) * float(np.abs(modes).max(initial=0.0)), 1e-300)
        terms = [sp.Float(float(c), 17) * symbol(name)
                 for c, name in zip(coefficients, component.deformation_coordinates()) if abs(c) > 1e-14 * scale]
        self._emit(ctx, {"": sp.Add(*terms)}, "m/m",
                   f"strain of body {self.body}, element {self.nodes[0]}-{self.nodes[1]} at {self.position:g}, "
                   f"fibre (y, z) = {tuple(self.fibre)}")
