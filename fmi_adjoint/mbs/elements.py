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
    parameters, inputs) per coordinate, in parts: one part per component that added them.

    The parts sum to the element's generalized forces; the component assembly
    (:mod:`fmi_adjoint.assembly`) derives and scatters each part as a component instance of
    its own (a bushing's forces on its two bodies, a body's weight), so that instances of one
    component type share their derivation.

    Attributes
    ----------
    parts : tuple of tuple of (coordinate, expression)
    """

    type_name = "mbs_generalized_forces"

    parts: tuple[tuple[tuple[str, sp.Expr], ...], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", tuple(tuple((str(c), e) for c, e in part) for part in self.parts))
        for part in self.parts:
            names = [c for c, _ in part]
            if len(set(names)) != len(names):
                raise ModelError(f"{self.where('parts')}: a coordinate appears twice in a part; add its terms "
                                 "into one.")

    @property
    def forces(self) -> tuple[tuple[str, sp.Expr], ...]:
        """The parts summed per coordinate (name symbols), in the order coordinates first appear."""
        sums: dict[str, list[sp.Expr]] = {}
        for part in self.parts:
            for coordinate, expr in part:
                sums.setdefault(coordinate, []).append(expr)
        return tuple((coordinate, sp.Add(*terms)) for coordinate, terms in sums.items())

    def generalized_force_parts(self, ctx: ElementContext) -> list[dict[str, sp.Expr]]:
        result = []
        for k, part in enumerate(self.parts):
            forces: dict[str, sp.Expr] = {}
            for coordinate, expr in part:
                ctx.position(coordinate)  # unknown coordinate: ModelError naming it
                forces[coordinate] = ctx.expression(expr, self.where(f"parts[{k}][{coordinate}]"))
            result.append(forces)
        return result

    def generalized_forces(self, ctx: ElementContext) -> dict[str, sp.Expr]:
        result: dict[str, list[sp.Expr]] = {}
        for part in self.generalized_force_parts(ctx):
            for coordinate, expr in part.items():
                result.setdefault(coordinate, []).append(expr)
        return {coordinate: sp.Add(*terms) for coordinate, terms in result.items()}
