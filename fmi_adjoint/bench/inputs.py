"""Measured inputs (issue 26, part 7): a data channel that drives a model input.

A test bench records its excitation (a shaker's displacement, a road profile, a motor's torque)
next to the responses.  :func:`input_channel` takes one channel of a
:class:`~fmi_adjoint.data.Measurement` as the time course of a model input: on the clock the
compared channels are on (the same time unit, time shift and window start, so that excitation
and response stay aligned), converted to the input's unit (:func:`~fmi_adjoint.bench.units.convert_unit`:
incompatible units refused by name), and checked.  The model interpolates it linearly between
samples, not held (:func:`fmi_adjoint.model.table_function`), in a force, a prescribed
displacement or any expression that names the input.

What is refused, each with the fix:

* a channel the file does not have (the file's channels named);
* a gap (a NaN or infinite sample): an excitation has no value there, and dropping the sample
  would interpolate across the gap silently; fill or cut it;
* a record that does not cover the simulated time ``[0, t_end]`` (on the compared clock): the
  input would be held at its end value, which the bench never did.

The whole record is kept, not only the window: interpolation at the window's edges uses the
samples beyond it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..data import Measurement, name_list
from ..errors import DataError
from ..text import excerpt
from .contract import MissingChannel
from .units import DRIVING, UnitConversion, convert_unit, time_factor

__all__ = ["MeasuredChannel", "check_coverage", "input_channel", "missing_input_channel"]


@dataclasses.dataclass(frozen=True, eq=False)
class MeasuredChannel:
    """One input's time course from a data channel (module docstring).

    Attributes
    ----------
    input : str
        The model input it drives.
    times, values : numpy.ndarray
        Strictly increasing seconds on the compared clock; values in the input's unit.
    source : str
        ``file: channel [unit]`` and the conversion, for reports.
    conversion : UnitConversion
    """

    input: str
    times: np.ndarray
    values: np.ndarray
    source: str
    conversion: UnitConversion

    def record(self) -> dict:
        """JSON-ready summary for RESULT.json (``data_preprocessing.inputs``)."""
        return {"source": self.source, "samples": int(self.times.size), "from": float(self.times[0]),
                "to": float(self.times[-1]), "unit": self.conversion.record()}


def input_channel(measurement: Measurement, channel: str, *, input_name: str, input_unit: str, model: str,
                  shift: float = 0.0) -> MeasuredChannel:
    """Channel ``channel`` of ``measurement`` as the time course of input ``input_name`` (in
    ``input_unit``, "" if none is declared) of ``model``; ``shift`` seconds are subtracted from
    the times after their unit's conversion (the compared channels' time shift and window start).

    Raises
    ------
    DataError
        No such channel, incompatible units, a unit that is no unit, a gap, times that do not
        increase (module docstring).
    """
    where = measurement.source or "data"
    if channel not in measurement.columns:
        raise missing_input_channel(MissingChannel(where, channel, measurement.columns), input_name)
    conversion = convert_unit(measurement.unit(channel), input_unit, channel=channel, output=input_name,
                              source=where, model=model, role=DRIVING)
    values = np.array(measurement.column(channel), dtype=float)
    if conversion.status == "converted":
        values = conversion.factor * values + conversion.offset
    times = np.asarray(measurement.times, dtype=float) * time_factor(measurement.time_unit, where) - shift
    bad = ~np.isfinite(values)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise DataError(f"{where}: channel {excerpt(channel)}, which drives the input {excerpt(input_name)}, has "
                        f"{int(bad.sum())} sample(s) without a finite value (the first at t = {times[first]:g} s); "
                        "an excitation needs a value at every time: fill the gaps or cut the record.")
    if times.size < 2 or np.any(np.diff(times) <= 0):
        raise DataError(f"{where}: the times of channel {excerpt(channel)} do not increase strictly; sort the "
                        "record or remove repeated times.")
    unit = measurement.unit(channel)
    text = f"{where}: {channel}" + (f" [{unit}]" if unit else "")
    if conversion.status == "converted":
        text += f", converted to {input_unit}"
    return MeasuredChannel(input_name, times, values, text, conversion)


def missing_input_channel(error: MissingChannel, input_name: str) -> DataError:
    """The error for a channel that should drive ``input_name`` and is not in the file."""
    return DataError(f"{error.source} has no channel {excerpt(error.channel)} to drive the input "
                     f"{excerpt(input_name)}. Channels: {name_list(list(error.available))}; give one of them.")


def check_coverage(channel: MeasuredChannel, t_end: float, *, t0: float = 0.0) -> None:
    """Refuse a record that does not cover ``[t0, t_end]`` (module docstring)."""
    lo, hi = float(channel.times[0]), float(channel.times[-1])
    tolerance = 1e-9 * max(abs(t_end - t0), abs(hi - lo), 1e-300)
    if lo > t0 + tolerance or hi < t_end - tolerance:
        raise DataError(f"{channel.source}: the input {excerpt(channel.input)} is recorded from {lo:g} s to {hi:g} s "
                        f"(on the compared clock), but the run covers {t0:g} s to {t_end:g} s; give --t-end {hi:g} "
                        "or less, choose a window inside the record, or record the input over the whole run.")
