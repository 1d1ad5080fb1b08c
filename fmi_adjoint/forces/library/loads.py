"""Model-level loads: generalized forces given by expressions or tables of time."""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import sympy as sp

from ...errors import ModelError
from ..base import AbstractForceElement, ElementContext

__all__ = ["ExpressionLoad", "TableLoad"]

Number = str | float | int


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

    @classmethod
    def example(cls) -> ExpressionLoad:
        """Representative instance for ``plugins check``."""
        return cls(name="probe", coordinate="end_a", expression="0.3*end_a**2 + 0.2*der(end_a) + sin(t)")


@dataclasses.dataclass(frozen=True)
class TableLoad(AbstractForceElement):
    """A load ``scale * F(t)`` with ``F`` interpolated linearly in a table.

    Outside the table range the end values are held.  ``scale`` may be an expression of
    parameters (e.g. an identified gain).  In a model file the table comes from a CSV
    file with a ``time`` column (keys ``file`` and ``column``), which must lie inside the
    model file's folder unless ``--allow-external-tables`` is given: a model file is data
    and must not make the tool read other files of the machine (see
    :meth:`fmi_adjoint.model_file._Reader.table_fields`).
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
        scale = ctx.parameter_expression(self.scale, self.where("scale"))
        return {self.coordinate: scale * ctx.table(self.times, self.values, self.where("table"))}

    @classmethod
    def example(cls) -> TableLoad:
        """Representative instance for ``plugins check``."""
        return cls(name="probe", coordinate="end_a", times=(0.0, 1.0, 2.0), values=(0.0, 2.0, -1.0), scale=1.5)
