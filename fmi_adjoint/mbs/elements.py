"""The internal force element that carries generalized forces built by multibody components.

Applied forces, gravity and laws applied through the chain rule (virtual work,
dissertation Sec. 2.3.2, eq. (2.33): ``Q = sum_K (dr_K/dq)^T f_K``) end up as expressions per
coordinate.  They enter the Model through one element of this class; it is not registered
for model files (its expressions are built sympy expressions, never text).
"""

from __future__ import annotations

import dataclasses

import sympy as sp

from ..errors import ModelError
from ..forces.base import AbstractForceElement, ElementContext

__all__ = ["GeneralizedForces"]


@dataclasses.dataclass(frozen=True)
class GeneralizedForces(AbstractForceElement):
    """Generalized forces ``Q_k`` given as expressions (positions, ``der(x)``, ``t``,
    parameters, inputs) per coordinate.

    Attributes
    ----------
    forces : tuple of (coordinate, expression)
    """

    type_name = "mbs_generalized_forces"

    forces: tuple[tuple[str, sp.Expr], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "forces", tuple((str(c), e) for c, e in self.forces))
        names = [c for c, _ in self.forces]
        if len(set(names)) != len(names):
            raise ModelError(f"{self.where('forces')}: a coordinate appears twice; add its terms into one.")

    def generalized_forces(self, ctx: ElementContext) -> dict[str, sp.Expr]:
        result: dict[str, sp.Expr] = {}
        for coordinate, expr in self.forces:
            ctx.position(coordinate)  # unknown coordinate: ModelError naming it
            result[coordinate] = ctx.expression(expr, self.where(f"forces[{coordinate}]"))
        return result
