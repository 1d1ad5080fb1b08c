"""Applied forces and torques from expressions (issue 23, item 4).

A force ``F`` at a marker ``P`` contributes ``Q = J_v^T F`` with ``J_v = d v_P / d q_dot``
(``= dr_P/dq``) and a torque ``T`` on a body ``Q = (d omega/d q_dot)^T T`` (virtual work,
dissertation Sec. 2.3.2, eq. (2.33); for a spatial body ``d omega/d e_dot = 2 E`` so
``Q_e = 2 E^T T``).  The vector entries are expressions of ``t``, parameters, inputs,
coordinates and ``der(x)``; only the velocity is differentiated, so a damping force
``-c der(x)`` gives ``Q_x = -c der(x)``.  ``frame="global"`` gives the vector in
global axes, ``"body"`` in the body axes of the marker's body (a follower force),
``"marker"`` in the marker's axes (forces only).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import sympy as sp

from ..calculus import Differentiator
from ..errors import ModelError
from ..text import check_identifier
from .names import Number

if TYPE_CHECKING:
    from .context import Lowering

__all__ = ["Force", "Torque"]



def _vector(value: object, where: str) -> tuple[Number, ...]:
    if isinstance(value, (str, int, float, sp.Expr)) or not isinstance(value, Sequence) or len(value) != 3:
        raise ModelError(f"{where}: give 3 values (numbers or expressions), got {value!r}.")
    return tuple(value)


def _scatter(ctx: Lowering, coordinates: Sequence[str], vector: sp.Matrix, velocity: sp.Matrix | None,
             position: sp.Matrix | None = None) -> None:
    """``Q_k = (d velocity / d der(q_k))^T vector``: the virtual work of ``vector`` along the
    Jacobian of ``velocity`` (a point's velocity or a body's angular velocity, linear in the
    ``der(q)``).  Only the velocity is differentiated: ``der(x)`` inside the force (a damper
    ``-c der(x)``) stays a factor.  For a point, ``position`` instead of its velocity: the
    same Jacobian ``d position / d q_k``, without forming the velocity."""
    calculus = Differentiator()
    for coord in coordinates:
        if position is not None:
            column = sp.Matrix([calculus.derivative(x, ctx.symbol(coord)) for x in position])
        else:
            column = velocity.diff(ctx.der(coord))  # type: ignore[union-attr]
        q_k = sp.Integer(0) if column.is_zero_matrix else (vector.T * column)[0, 0]
        if q_k.is_zero is not True:
            ctx.add_generalized_force(coord, q_k)


@dataclasses.dataclass(frozen=True)
class Force:
    """A force ``vector`` applied at ``marker`` (``frame``: "global", "body" or "marker")."""

    name: str
    marker: str
    vector: tuple[Number, ...]
    frame: str = "global"

    def __post_init__(self) -> None:
        check_identifier(self.name, "force")
        object.__setattr__(self, "vector", _vector(self.vector, self.where("vector")))
        if self.frame not in ("global", "body", "marker"):
            raise ModelError(f"{self.where('frame')}: {self.frame!r} is not 'global', 'body' or 'marker'.")

    def where(self, prop: str = "") -> str:
        return f"force '{self.name}' (Force){'.' + prop if prop else ''}"

    def lower(self, ctx: Lowering) -> None:
        frame = ctx.marker(self.marker, self.where("marker"))
        F = sp.Matrix([ctx.expression(x, self.where("vector")) for x in self.vector])
        if self.frame == "body":
            F = frame.body.rotation() * F
        elif self.frame == "marker":
            F = frame.rotation * F
        # Q_k = F . dr_P/dq_k = F . d v_P / d der(q_k) (J_v^T F).
        _scatter(ctx, frame.body.coordinates, F, None, position=frame.position)


@dataclasses.dataclass(frozen=True)
class Torque:
    """A torque ``vector`` on ``body`` (``frame``: "global" or "body")."""

    name: str
    body: str
    vector: tuple[Number, ...]
    frame: str = "global"

    def __post_init__(self) -> None:
        check_identifier(self.name, "torque")
        object.__setattr__(self, "vector", _vector(self.vector, self.where("vector")))
        if self.frame not in ("global", "body"):
            raise ModelError(f"{self.where('frame')}: {self.frame!r} is not 'global' or 'body'.")

    def where(self, prop: str = "") -> str:
        return f"torque '{self.name}' (Torque){'.' + prop if prop else ''}"

    def lower(self, ctx: Lowering) -> None:
        body = ctx.body(self.body, self.where("body"))
        T = sp.Matrix([ctx.expression(x, self.where("vector")) for x in self.vector])
        omega = body.angular_velocity_body() if self.frame == "body" else body.angular_velocity()
        _scatter(ctx, body.coordinates, T, omega)
