"""Markers: body-fixed frames (position and orientation in body axes).

A marker ``P`` on body ``b`` sits at ``r_P = u_b + A_b s_P`` (dissertation Sec. 2.2.1.1) with
the orientation ``A_P = A_b A_m``.  ``s_P`` may contain parameter expressions (joint
locations are identifiable); the marker's own orientation ``A_m`` is a rotation object
(:class:`~.bodies.AxisAngle`, :class:`~.bodies.Cardan`, :class:`~.bodies.RotationMatrix`, numbers)
or, for markers on planar bodies, a planar angle about z (number or expression of
parameters).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import sympy as sp

from ..errors import ModelError
from ..text import check_identifier
from . import rotations as rot
from .bodies import AxisAngle, Cardan, RotationMatrix, as_rotation
from .frames import BodyKinematics, MarkerFrame
from .names import Number

if TYPE_CHECKING:
    from .context import Lowering

__all__ = ["Marker", "MarkerFrame"]



@dataclasses.dataclass(frozen=True)
class Marker:
    """A body-fixed frame.

    Attributes
    ----------
    name : str
    body : str
        Name of the body (``"ground"`` for the inertial frame).
    position : 3 (or 2) numbers or expressions of parameters, in body axes
    orientation : rotation object / mapping (numbers), or a planar angle about z (number or
        expression of parameters); default: the body's axes.
    """

    name: str
    body: str
    position: tuple[Number, ...] = (0.0, 0.0, 0.0)
    orientation: object = None

    def __post_init__(self) -> None:
        check_identifier(self.name, "marker")
        if not isinstance(self.body, str):
            raise ModelError(f"marker '{self.name}': body must be a body name, got {self.body!r}.")
        position = self.position
        if isinstance(position, (str, int, float, sp.Expr)) or not isinstance(position, Sequence) \
                or len(position) not in (2, 3):
            raise ModelError(f"marker '{self.name}': position must be 2 or 3 values in body axes, got {position!r}.")
        position = tuple(position) + ((0.0,) if len(position) == 2 else ())
        object.__setattr__(self, "position", position)
        if not isinstance(self.orientation, (str, int, float, sp.Expr)) or isinstance(self.orientation, bool):
            rotation = as_rotation(self.orientation, self.where("orientation"))
            if rotation is not None:
                rotation.euler(self.where("orientation"))  # a bad axis or matrix: reported here
            object.__setattr__(self, "orientation", rotation)

    def where(self, prop: str = "") -> str:
        suffix = f".{prop}" if prop else ""
        return f"marker '{self.name}'{suffix}"

    def frame(self, ctx: Lowering, body: BodyKinematics) -> MarkerFrame:
        """The marker's kinematics on ``body`` (called by :meth:`Lowering.marker`)."""
        local = sp.Matrix([ctx.parameter_expression(x, self.where("position")) for x in self.position])
        angle: sp.Expr | None = None
        orientation = self.orientation
        if orientation is None:
            local_rotation = sp.eye(3)
            angle = sp.Integer(0)
        elif isinstance(orientation, (AxisAngle, Cardan, RotationMatrix)):
            e = orientation.euler(self.where("orientation"))
            local_rotation = sp.Matrix(3, 3, [sp.Float(float(x), 17) for x in rot.matrix_from_euler(e).flat])
            axis = rot.matrix_from_euler(e)
            if abs(axis[2, 2] - 1.0) < 1e-15:  # a rotation about z: a planar angle
                angle = sp.Float(float(sp.atan2(axis[1, 0], axis[0, 0])), 17)
        else:
            angle = ctx.parameter_expression(orientation, self.where("orientation"))
            local_rotation = rot.Rz(angle)
        if body.planar and not body.ground:
            if local[2].is_zero is not True:
                raise ModelError(f"{self.where('position')}: body '{body.name}' is planar; a marker on it lies in "
                                 "the plane z = 0 (give z = 0 or two values).")
            if angle is None:
                raise ModelError(f"{self.where('orientation')}: body '{body.name}' is planar; give the marker's "
                                 "orientation as an angle about z.")
        return MarkerFrame(
            name=self.name,
            body=body,
            local=local,
            local_rotation=local_rotation,
            position=body.position(local),
            rotation=body.rotation() if orientation is None else rot.matmul(body.rotation(), local_rotation),
            planar_angle=None if angle is None else body.angle() + angle,
        )
