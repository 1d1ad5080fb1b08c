"""Units of measured channels against the units of model outputs, through pint (issue 26, part 3).

This module alone interprets unit strings.  A channel's values are converted to its output's
unit, ``y = factor * x + offset`` (the offset is zero but for temperature scales): mm/s^2 to
m/s^2 is ``factor = 1e-3``, degrees to radians ``pi/180``.  The rules, each for a reason:

* the same string on both sides, or no unit on one side: no conversion (nothing to check
  against: recorded as ``unchecked``);
* both units known to pint and of the same dimension: converted;
* of different dimensions (m against N): refused, naming both — no factor makes them
  comparable, and the likely cause is a wrong channel mapping;
* a name pint does not know (``counts``, ``digit``, a vendor's abbreviation): a warning, not
  a refusal — it may well be right, it just cannot be checked — and no conversion;
* a string that is no unit expression at all (``m/s^^2``, ``2 m``: a syntax error or a number
  in it): refused, since the file is then probably read wrong.

Degrees and radians are both dimensionless in pint (a radian is 1), so degrees against an
output in ``1`` or ``rad`` convert by ``pi/180``.
"""

from __future__ import annotations

import dataclasses
import functools
import math

from ..errors import DataError
from ..text import excerpt
from .contract import require

__all__ = ["COMPARED", "DRIVING", "ChannelRole", "UnitConversion", "convert_unit", "time_factor"]


@functools.cache
def _registry():
    pint = require("pint", "units")
    return pint.UnitRegistry(autoconvert_offset_to_baseunit=True)


@dataclasses.dataclass(frozen=True)
class UnitConversion:
    """How a channel's values become its output's: ``factor * x + offset``.

    ``status`` is ``same`` (equal strings), ``converted``, ``unchecked`` (no unit on a side)
    or ``unknown`` (a unit pint does not know: not converted, a warning in ``notice``).
    """

    data_unit: str
    output_unit: str
    factor: float = 1.0
    offset: float = 0.0
    status: str = "same"
    notice: str = ""

    def record(self) -> dict:
        """JSON-ready summary for RESULT.json."""
        out: dict = {"data_unit": self.data_unit, "output_unit": self.output_unit, "status": self.status}
        if self.status == "converted":
            out.update(factor=self.factor, offset=self.offset)
        return out


def _parse(text: str, what: str):
    """The pint unit of ``text``; None if pint does not know a name in it."""
    pint = require("pint", "units")
    registry = _registry()
    try:
        return registry.parse_units(text.replace("µ", "u").replace("μ", "u"))
    except pint.UndefinedUnitError:
        return None
    except Exception as exc:  # noqa: BLE001 (pint's parser raises many kinds, even AssertionError, on garbage)
        raise DataError(f"{what}: {excerpt(text)} is not a unit ({type(exc).__name__}); write it like m/s^2, "
                        "mm, deg or N*m.") from None


@dataclasses.dataclass(frozen=True)
class ChannelRole:
    """What a channel is converted for, in messages: ``what`` (an output it is compared with,
    an input it drives), ``verb`` (what is done with it) and ``fix`` (for incompatible units)."""

    what: str
    verb: str
    fix: str


#: A channel compared with a model output (the default).
COMPARED = ChannelRole("output", "compared with", "map the output to the right channel (--map OUTPUT=CHANNEL) or "
                       "correct the unit")
#: A channel that drives a model input (:mod:`fmi_adjoint.bench.inputs`).
DRIVING = ChannelRole("input", "drives", "drive the input with a channel of its dimension, or correct the input's "
                      "unit or the file's")


def convert_unit(data_unit: str, output_unit: str, *, channel: str, output: str, source: str,
                 model: str, role: ChannelRole = COMPARED) -> UnitConversion:
    """The conversion of channel ``channel`` of ``source`` (in ``data_unit``) to output
    ``output`` of ``model`` (in ``output_unit``); see the module docstring.  ``role``: an input
    the channel drives instead of an output (:data:`DRIVING`), in messages.

    Raises
    ------
    DataError
        Units of different dimensions (naming both), or a unit string that is no unit.
    """
    data_unit, output_unit = data_unit.strip(), output_unit.strip()
    if data_unit == output_unit:
        return UnitConversion(data_unit, output_unit)
    if not data_unit or not output_unit:
        return UnitConversion(data_unit, output_unit, status="unchecked")
    source_unit = _parse(data_unit, f"{source}: the unit of channel {excerpt(channel)}")
    target_unit = _parse(output_unit, f"the unit of {role.what} {excerpt(output)} of {model}")
    if source_unit is None or target_unit is None:
        unknown, where = (data_unit, f"channel {excerpt(channel)} of {source}") if source_unit is None else (
            output_unit, f"{role.what} {excerpt(output)} of {model}")
        return UnitConversion(data_unit, output_unit, status="unknown", notice=(
            f"the unit {excerpt(unknown)} of {where} is not a known unit: {excerpt(channel)} {role.verb} "
            f"{excerpt(output)} unconverted; write the unit like m/s^2, mm or deg if it is one."))
    if source_unit.dimensionality != target_unit.dimensionality:
        raise DataError(f"{source}: channel {excerpt(channel)} is in {excerpt(data_unit)}, the {role.what} "
                        f"{excerpt(output)} of {model} in {excerpt(output_unit)}: incompatible units "
                        f"({source_unit.dimensionality} against {target_unit.dimensionality}); {role.fix}.")
    registry = _registry()
    offset = float(registry.Quantity(0.0, source_unit).to(target_unit).magnitude)
    factor = float(registry.Quantity(1.0, source_unit).to(target_unit).magnitude) - offset
    if not (math.isfinite(factor) and factor != 0 and math.isfinite(offset)):
        raise DataError(f"{source}: channel {excerpt(channel)}: {excerpt(data_unit)} to {excerpt(output_unit)} "
                        "has no finite conversion; correct the unit.")
    return UnitConversion(data_unit, output_unit, factor, offset, "converted")


def time_factor(time_unit: str, source: str) -> float:
    """Seconds per unit of a file's time vector (1 for "" and ``s``)."""
    time_unit = time_unit.strip()
    if time_unit in ("", "s", "sec"):
        return 1.0
    unit = _parse(time_unit, f"{source}: the unit of the time")
    if unit is None or unit.dimensionality != _registry().parse_units("s").dimensionality:
        raise DataError(f"{source}: the time is in {excerpt(time_unit)}, not a unit of time; give it in s (or ms, "
                        "min, ...).")
    return float(_registry().Quantity(1.0, unit).to("s").magnitude)
