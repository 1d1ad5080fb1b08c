"""The elements the core engine needs: spring-dampers, polynomial laws and loads."""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import sympy as sp

from ..errors import ModelError
from .base import AbstractForceElement, AbstractTwoPointElement, ElementContext

__all__ = ["LinearSpringDamper", "PolynomialSpringDamper", "ExpressionLoad", "TableLoad"]

Number = str | float | int


@dataclasses.dataclass(frozen=True)
class LinearSpringDamper(AbstractTwoPointElement):
    """Linear spring and viscous damper in parallel: ``f = k (s - L0) + d s_dot``.

    Attributes
    ----------
    stiffness, damping, free_length : str or float
        Expressions of parameters (e.g. ``"2*d"``); SI units, N/m and Ns/m for
        translational coordinates, Nm/rad and Nms/rad for rotational ones.
    """

    type_name: ClassVar[str] = "linear_spring_damper"
    stiffness: Number = 0.0
    damping: Number = 0.0
    free_length: Number = 0.0

    def law(self, s: sp.Expr, s_dot: sp.Expr, ctx: ElementContext) -> sp.Expr:
        k = ctx.expression(self.stiffness, self.where("stiffness"))
        d = ctx.expression(self.damping, self.where("damping"))
        length = ctx.expression(self.free_length, self.where("free_length"))
        return k * (s - length) + d * s_dot


@dataclasses.dataclass(frozen=True)
class PolynomialSpringDamper(AbstractTwoPointElement):
    """Polynomial spring and damper: ``f = sum_j k_j (s - L0)**j + sum_j d_j s_dot**j``.

    ``stiffness = ["c_E1", 0, "c_E2"]`` gives ``c_E1 s + c_E2 s**3``: the list holds
    the coefficients of powers 1, 2, 3, ... (Lauss et al. 2018, Sec. 5: elastomer and
    hydro-damper laws).
    """

    type_name: ClassVar[str] = "polynomial_spring_damper"
    stiffness: tuple[Number, ...] = ()
    damping: tuple[Number, ...] = ()
    free_length: Number = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        for prop in ("stiffness", "damping"):
            value = getattr(self, prop)
            if isinstance(value, (str, int, float)):
                value = (value,)
            object.__setattr__(self, prop, tuple(value))
        if not self.stiffness and not self.damping:
            raise ModelError(f"{self.where()}: give at least one stiffness or damping coefficient.")

    def law(self, s: sp.Expr, s_dot: sp.Expr, ctx: ElementContext) -> sp.Expr:
        length = ctx.expression(self.free_length, self.where("free_length"))
        f = sp.Integer(0)
        for j, coef in enumerate(self.stiffness, start=1):
            f += ctx.expression(coef, self.where(f"stiffness[{j - 1}]")) * (s - length) ** j
        for j, coef in enumerate(self.damping, start=1):
            f += ctx.expression(coef, self.where(f"damping[{j - 1}]")) * s_dot**j
        return f


@dataclasses.dataclass(frozen=True)
class ExpressionLoad(AbstractForceElement):
    """A generalized force on one coordinate given by an expression.

    The expression may use ``t``, parameters, positions (by coordinate name) and
    velocities (``der(x)``); e.g. ``"100*sin(4*pi*25**t*t)"`` or ``"m_L*g"``.
    Positive values act in the positive direction of the coordinate.
    """

    type_name: ClassVar[str] = "load"
    coordinate: str = ""
    expression: Number = 0.0

    def generalized_forces(self, ctx: ElementContext) -> dict[str, sp.Expr]:
        ctx.position(self.coordinate)  # validates the name
        return {self.coordinate: ctx.expression(self.expression, self.where("expression"))}


@dataclasses.dataclass(frozen=True)
class TableLoad(AbstractForceElement):
    """A load ``scale * F(t)`` with ``F`` interpolated linearly in a table.

    Outside the table range the end values are held.  ``scale`` may be an
    expression of parameters (e.g. an identified gain).  In a model file the table
    comes from a CSV file with a ``time`` column (see :mod:`fmi_adjoint.model_file`).
    """

    type_name: ClassVar[str] = "table_load"
    coordinate: str = ""
    times: tuple[float, ...] = ()
    values: tuple[float, ...] = ()
    scale: Number = 1.0

    def __post_init__(self) -> None:
        times = tuple(float(x) for x in self.times)
        values = tuple(float(x) for x in self.values)
        object.__setattr__(self, "times", times)
        object.__setattr__(self, "values", values)
        if len(times) < 2 or len(times) != len(values):
            raise ModelError(f"{self.where()}: the table needs at least two rows of (time, value).")
        if not all(math.isfinite(x) for x in times + values):
            raise ModelError(f"{self.where()}: the table contains NaN or infinite values; clean the CSV file.")
        if any(b <= a for a, b in zip(times, times[1:])):
            raise ModelError(f"{self.where()}: the table times are not strictly increasing; sort the CSV file.")

    def generalized_forces(self, ctx: ElementContext) -> dict[str, sp.Expr]:
        ctx.position(self.coordinate)
        scale = ctx.expression(self.scale, self.where("scale"))
        return {self.coordinate: scale * ctx.table(self.times, self.values, self.where("table"))}
