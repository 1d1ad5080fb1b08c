"""Kinematic frames: what the lowering context hands components (bodies, markers, joints,
forces, sensors) about a body or a marker.

:class:`BodyKinematics` describes a body's coordinates, origin and rotation (dissertation
Sec. 2.2.1.1, eq. (2.20) and (2.26)); :class:`MarkerFrame` a body-fixed frame on it.  They are
values, independent of the components that make them, so that the lowering context
(:mod:`.context`) can name them without importing the components (issue 29: no import cycles).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import sympy as sp

from . import rotations as rot
from .names import der, symbol

__all__ = ["GROUND", "GROUND_KINEMATICS", "BodyKinematics", "MarkerFrame"]


#: The reserved body name of the ground (need not be declared).
GROUND = "ground"


# --------------------------------------------------------------------------- kinematics


@dataclasses.dataclass(frozen=True)
class BodyKinematics:
    """The kinematics of a body (what markers, joints, forces and sensors use).

    ``Lowering.body(name)`` returns this.  Expressions are in name symbols of the body's
    coordinates and ``der(...)`` specials.

    Attributes
    ----------
    name : str
        The body's name (``"ground"`` for the ground).
    kind : {"ground", "point", "planar", "spatial"}
    planar : bool
        True if the body stays in the global x-y plane and rotates about z only (ground
        counts as planar and spatial alike: see :attr:`ground`).
    coordinates : tuple of str
        Names of the body's coordinates.
    """

    name: str
    kind: str
    planar: bool
    coordinates: tuple[str, ...]

    @property
    def ground(self) -> bool:
        return self.kind == "ground"

    def q(self, suffix: str) -> sp.Symbol:
        """Name symbol of the coordinate ``<body>_<suffix>``."""
        return symbol(f"{self.name}_{suffix}")

    def origin(self) -> sp.Matrix:
        """Global position (3x1) of the body frame's origin (the centre of mass)."""
        if self.kind == "ground":
            return sp.zeros(3, 1)
        z = sp.Integer(0) if self.planar else self.q("z")
        return sp.Matrix([self.q("x"), self.q("y"), z])

    def rotation(self) -> sp.Matrix:
        """Rotation matrix body -> global (3x3): I, Rz(phi) or A(e) (eq. (2.20))."""
        if self.kind == "planar":
            return rot.Rz(self.q("phi"))
        if self.kind == "spatial":
            return sp.Matrix(3, 3, _euler_rotation(self.euler_parameters()))
        return sp.eye(3)

    def position(self, local: Sequence[sp.Expr]) -> sp.Matrix:
        """Global position ``u + A R`` of the body-fixed point ``R = local`` (Sec. 2.2.1.1)."""
        if self.kind in ("ground", "point"):  # A = I: no matrix product (lowering a lattice makes thousands)
            origin = self.origin()
            return sp.Matrix([origin[k] + local[k] for k in range(3)])
        origin, rotation, weights = self.origin(), self.rotation(), list(local)
        entries = []
        for k in range(3):
            # One sum per entry (rot.combination): forming A R and adding u re-flattens each sum.
            entry = rot.combination([origin[k], *rotation.row(k)], [1, *weights])
            if entry is None:
                entry = origin[k] + rot.matmul(rotation.row(k), sp.Matrix(weights))[0, 0]
            entries.append(entry)
        return sp.Matrix(entries)

    def angular_velocity(self) -> sp.Matrix:
        """Angular velocity (3x1) in global axes: ``(0, 0, der(phi))`` or ``2 E(e) e_dot``."""
        if self.kind == "planar":
            return sp.Matrix([0, 0, der(f"{self.name}_phi")])
        if self.kind == "spatial":
            return 2 * rot.E(self.euler_parameters()) * self.euler_rates()
        return sp.zeros(3, 1)

    def angular_velocity_body(self) -> sp.Matrix:
        """Angular velocity (3x1) in body axes: ``2 G(e) e_dot`` (eq. (2.26))."""
        if self.kind == "spatial":
            return 2 * rot.G(self.euler_parameters()) * self.euler_rates()
        return self.angular_velocity()

    def euler_parameters(self) -> tuple[sp.Symbol, ...]:
        """Symbols of ``e0..e3`` (spatial bodies)."""
        return tuple(self.q(f"e{k}") for k in range(4))

    def euler_rates(self) -> sp.Matrix:
        """``der(e0)..der(e3)`` (4x1, spatial bodies)."""
        return sp.Matrix([der(f"{self.name}_e{k}") for k in range(4)])

    def angle(self) -> sp.Expr:
        """Rotation angle about z of a planar body (0 for ground and point masses)."""
        return self.q("phi") if self.kind == "planar" else sp.Integer(0)


GROUND_KINEMATICS = BodyKinematics(GROUND, "ground", True, ())


@functools.lru_cache(maxsize=4096)
def _euler_rotation(e: tuple[sp.Symbol, ...]) -> tuple[sp.Expr, ...]:
    """The entries of ``A(e)`` (:func:`.rotations.A`), formed once per body: its markers, joints
    and forces ask for it again and again (issue 24)."""
    return tuple(rot.A(e))


@dataclasses.dataclass(frozen=True, eq=False)
class MarkerFrame:
    """The kinematics of a marker (what ``Lowering.marker(name)`` returns).

    Attributes
    ----------
    name : str
    body : BodyKinematics
    local : sympy.Matrix
        Position in body axes (3x1).
    local_rotation : sympy.Matrix
        Orientation relative to the body (3x3).
    position : sympy.Matrix
        Global position (3x1) in name symbols.
    rotation : sympy.Matrix
        Global orientation ``A_body A_marker`` (3x3): columns are the marker axes.
    planar_angle : sympy.Expr or None
        Angle of the marker's x axis from the global x axis about z, if the marker only
        rotates about z (planar bodies, ground, point masses with a planar orientation).
    """

    name: str
    body: BodyKinematics
    local: sp.Matrix
    local_rotation: sp.Matrix
    position: sp.Matrix
    rotation: sp.Matrix
    planar_angle: sp.Expr | None

    def angular_velocity(self) -> sp.Matrix:
        """Angular velocity (3x1, global axes) of the marker (that of its body)."""
        return self.body.angular_velocity()

    def axis(self, local: Sequence[sp.Expr]) -> sp.Matrix:
        """A marker-fixed direction ``local`` (marker axes) in global axes."""
        return rot.matmul(self.rotation, sp.Matrix(list(local)))
