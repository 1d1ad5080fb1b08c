"""From a read file to a cost's data: channel mapping, time window and shift, units, gaps,
detrending and resampling (issue 26, parts 2-4), each explicit and recorded.

:func:`prepare` applies, in this order, what a :class:`Preprocessing` asks for:

1. **Mapping** (``--map OUTPUT=CHANNEL``): the channel is compared with the output and named
   after it; with a mapping, only mapped channels are compared.
2. **Time in seconds**: a time vector in ms (a unit row, an HDF5 ``unit`` attribute) is
   converted (:func:`~fmi_adjoint.bench.units.time_factor`).
3. **Time shift** (``--time-shift S`` or ``--time-shift start``): ``t - S``, or ``t - t_0``.
   Never automatic: data that start at 0.3 s may be a record whose first 0.3 s were trimmed
   (then the run must cover them), or a clock offset (then they must be shifted); only the
   user knows which, and a guess either way gives a silently wrong fit.  Data on a bench's
   clock are refused (:func:`~fmi_adjoint.identify.guards.check_data_start`) with this fix.
4. **Window** (``--data FILE@window=T0:T1``, on the clock after the time shift): the samples
   with ``T0 <= t <= T1``, shifted to start at t = 0 — every run starts at t = 0, so a window
   of a long record is an experiment of its own (several windows of one file: several
   experiments).  ``time_shift`` records the whole shift (``S + T0``).
5. **Units**: each channel converted to its output's unit (:mod:`~fmi_adjoint.bench.units`).
6. **Gaps**: here, samples with NaN in any compared channel are dropped (counted in
   ``masked_samples``); the cost's data (:mod:`fmi_adjoint.identify.data_costs`) then puts the
   NaN back and masks them per channel with zero sample weights, so a gap in one channel keeps
   the other channels' samples (rows are dropped only where every channel is NaN, or with
   ``--detrend`` or ``--resample``, which need whole rows).
7. **Detrend** (``--detrend offset|linear``): each channel's mean, or least-squares line,
   removed — only on request, as it changes what is compared (the model output is not
   detrended: use it for channels whose offset is a sensor's, not the model's).
8. **Resampling** (``--resample``): onto the integrator's step grid, where the data are
   denser than it, after a zero-phase low-pass filter at 0.8 times the grid's Nyquist
   frequency (anti-aliasing: the 4th-order Butterworth filter applied forwards and backwards,
   ``scipy.signal.sosfiltfilt``).

Channels that drive model inputs (``--input INPUT=CHANNEL``, :attr:`Preprocessing.inputs`) are
not compared: :func:`prepare` leaves them out (unless an output is mapped to the same
channel), and :func:`input_channels` takes them on the compared clock (steps 2-4: the same
time unit, shift and window start, :func:`clock_shift`; the whole record, not only the window)
in the inputs' units (:mod:`fmi_adjoint.bench.inputs`).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from ..data import Measurement, name_list
from ..errors import DataError
from ..text import excerpt
from .contract import MissingChannel
from .inputs import MeasuredChannel, input_channel, missing_input_channel
from .units import UnitConversion, convert_unit, time_factor

__all__ = ["AbstractDetrend", "DETRENDS", "Prepared", "Preprocessing", "RemoveLinearTrend", "RemoveOffset",
           "TimeShift", "clock_shift", "input_channels", "prepare"]

#: The anti-aliasing filter's cut-off as a share of the new grid's Nyquist frequency.
ANTI_ALIAS_SHARE = 0.8
#: Its order (Butterworth; doubled by the forward-backward pass).
ANTI_ALIAS_ORDER = 4


class AbstractDetrend(abc.ABC):
    """A trend removed from each channel (``--detrend``)."""

    name: ClassVar[str]

    @abc.abstractmethod
    def apply(self, times: np.ndarray, values: np.ndarray) -> np.ndarray:
        """``values`` (samples x channels) without the trend."""


@dataclasses.dataclass(frozen=True)
class RemoveOffset(AbstractDetrend):
    """Subtract each channel's mean."""

    name: ClassVar[str] = "offset"

    def apply(self, times: np.ndarray, values: np.ndarray) -> np.ndarray:
        return values - values.mean(axis=0)


@dataclasses.dataclass(frozen=True)
class RemoveLinearTrend(AbstractDetrend):
    """Subtract each channel's least-squares line ``a + b t``."""

    name: ClassVar[str] = "linear"

    def apply(self, times: np.ndarray, values: np.ndarray) -> np.ndarray:
        basis = np.column_stack([np.ones_like(times), times - times.mean()])
        coefficients, *_ = np.linalg.lstsq(basis, values, rcond=None)
        return values - basis @ coefficients


#: ``--detrend`` names.
DETRENDS: dict[str, AbstractDetrend] = {d.name: d for d in (RemoveOffset(), RemoveLinearTrend())}


@dataclasses.dataclass(frozen=True)
class TimeShift:
    """``--time-shift``: subtract ``seconds`` from the times (None: the first sample's time)."""

    seconds: float | None = None

    def amount(self, times: np.ndarray) -> float:
        return float(times[0]) if self.seconds is None else self.seconds


@dataclasses.dataclass(frozen=True)
class Preprocessing:
    """What :func:`prepare` does to one data file (module docstring)."""

    mapping: tuple[tuple[str, str], ...] = ()
    window: tuple[float, float] | None = None
    time_shift: TimeShift | None = None
    detrend: AbstractDetrend | None = None
    resample: bool = False
    #: ``(input, channel)``: channels that drive model inputs (module docstring).
    inputs: tuple[tuple[str, str], ...] = ()

    def channels(self) -> tuple[str, ...] | None:
        """The compared channels a file is read for (None: those named like outputs)."""
        return tuple(channel for _, channel in self.mapping) or None

    def input_channels(self) -> tuple[str, ...]:
        """The channels that drive inputs (read besides the compared ones)."""
        return tuple(channel for _, channel in self.inputs if channel not in (self.channels() or ()))


def clock_shift(measurement: Measurement, preprocessing: Preprocessing) -> tuple[float, float]:
    """Seconds per unit of the file's times and the seconds subtracted from them (the time
    shift and the window's start: steps 2-4 of the module docstring)."""
    factor, shift = _time_shift(measurement, preprocessing)
    if preprocessing.window is not None:
        shift += preprocessing.window[0]
    return factor, shift


def _time_shift(measurement: Measurement, preprocessing: Preprocessing) -> tuple[float, float]:
    """Seconds per unit of the file's times and ``--time-shift`` in seconds (steps 2-3)."""
    factor = time_factor(measurement.time_unit, measurement.source)
    times = measurement.times * factor if factor != 1.0 else measurement.times
    return factor, 0.0 if preprocessing.time_shift is None else preprocessing.time_shift.amount(times)


def input_channels(measurement: Measurement, preprocessing: Preprocessing, *, units: dict[str, str],
                   model: str, merged: bool = False) -> tuple[MeasuredChannel, ...]:
    """The channels of ``preprocessing.inputs`` as input time courses on the compared clock,
    each in its input's unit (``units``: by input name; "" where none is declared).

    ``merged``: a record of several loggers on one clock (``with=``, NaN where a channel's logger
    has no sample): each channel keeps its own samples, shifted as the whole record is (the
    shift of ``--time-shift start`` is the record's first time, not the channel's)."""
    _, shift = clock_shift(measurement, preprocessing)
    courses = []
    for name, channel in preprocessing.inputs:
        own = measurement
        if merged and channel in measurement.columns:
            keep = np.isfinite(measurement.column(channel))
            own = dataclasses.replace(measurement, times=measurement.times[keep], values=measurement.values[keep])
        courses.append(input_channel(own, channel, input_name=name, input_unit=units.get(name, ""), model=model,
                                     shift=shift))
    return tuple(courses)


@dataclasses.dataclass(frozen=True, eq=False)
class Prepared:
    """The data a cost compares, what was done to them (``record``, for RESULT.json) and the
    warnings on them (``notices``: texts naming the cause and the fix)."""

    measurement: Measurement
    record: dict
    notices: tuple[str, ...] = ()


def prepare(measurement: Measurement, preprocessing: Preprocessing, *, output_names: Sequence[str],
            output_units: Sequence[str], model: str, step: float, fmt: str = "csv") -> Prepared:
    """Apply ``preprocessing`` to ``measurement`` (module docstring) for a model ``model``
    with outputs ``output_names`` in ``output_units`` ("" where none is declared), integrated
    with the step ``step`` (the grid of ``resample``).

    Raises
    ------
    DataError
        A mapping to no output or channel, a window without samples, units of different
        dimensions, a channel without any finite sample.
    """
    where = measurement.source
    record: dict = {"file": where, "format": fmt}
    notices: list[str] = []
    times, columns, values = measurement.times, measurement.columns, measurement.values
    units = list(measurement.units) if measurement.units else [""] * len(columns)
    for name, channel in preprocessing.inputs:
        if channel not in columns:
            raise missing_input_channel(MissingChannel(where, channel, tuple(columns)), name)
    driving = set(preprocessing.input_channels()) - set(output_names)
    if driving & set(columns):  # channels that drive inputs are not compared
        keep = [c for c, name in enumerate(columns) if name not in driving]
        columns, values, units = tuple(columns[c] for c in keep), values[:, keep], [units[c] for c in keep]
    if preprocessing.inputs:
        record["inputs"] = dict(preprocessing.inputs)
    originals = list(columns)
    if preprocessing.mapping:
        index, renamed = [], []
        for output, channel in preprocessing.mapping:
            if output not in output_names:
                raise DataError(f"--map {excerpt(output)}={excerpt(channel)}: {excerpt(output)} is not an output "
                                f"of {model}. Outputs: {name_list(list(output_names))}.")
            if channel not in columns:
                raise DataError(f"--map {excerpt(output)}={excerpt(channel)}: {where} has no channel "
                                f"{excerpt(channel)}. Channels: {name_list(list(columns))}.")
            index.append(columns.index(channel))
            renamed.append(output)
        values, columns, units = values[:, index], tuple(renamed), [units[i] for i in index]
        originals = [originals[i] for i in index]
        record["mapping"] = dict((o, c) for o, c in preprocessing.mapping)
    factor, shift = _time_shift(measurement, preprocessing)
    if factor != 1.0:
        times = times * factor
        record["time_unit"] = {"unit": measurement.time_unit, "to_seconds": factor}
    if preprocessing.window is not None:
        t0, t1 = preprocessing.window
        inside = (times - shift >= t0) & (times - shift <= t1)
        if np.count_nonzero(inside) < 2:
            clock = f" after the --time-shift of {shift:g} s" if shift else ""
            raise DataError(f"{where}: the window {t0:g}:{t1:g} s holds {np.count_nonzero(inside)} sample(s) of the "
                            f"record ({float(times[0] - shift):g} to {float(times[-1] - shift):g} s{clock}); choose a "
                            "window inside it.")
        times, values = times[inside], values[inside]
        shift += t0
        record["window"] = [t0, t1]
    if shift:
        times = times - shift
        record["time_shift"] = shift
    conversions: dict[str, dict] = {}
    values = np.array(values, dtype=float)
    for c, name in enumerate(columns):
        if name not in output_names:
            continue  # refused with the list of outputs by the cost's checks
        conversion: UnitConversion = convert_unit(units[c], output_units[list(output_names).index(name)],
                                                  channel=originals[c], output=name, source=where, model=model)
        if conversion.status == "converted":
            values[:, c] = conversion.factor * values[:, c] + conversion.offset
        if conversion.notice:
            notices.append(conversion.notice)
        if units[c]:  # a file without units has nothing to record
            conversions[name] = conversion.record()
    if conversions:
        record["units"] = conversions
    gaps = ~np.isfinite(values)
    if gaps.any():
        empty = [columns[c] for c in range(len(columns)) if gaps[:, c].all()]
        if empty:
            raise DataError(f"{where}: channel {excerpt(empty[0])} has no finite sample; record it or leave it out.")
        keep = ~gaps.any(axis=1)
        if np.count_nonzero(keep) < 2:
            raise DataError(f"{where}: fewer than two samples have a value in every channel; compare the channels "
                            "in separate experiments.")
        record["masked_samples"] = {columns[c]: int(gaps[:, c].sum()) for c in range(len(columns)) if gaps[:, c].any()}
        times, values = times[keep], values[keep]
    if preprocessing.detrend is not None:
        values = preprocessing.detrend.apply(times, values)
        record["detrend"] = preprocessing.detrend.name
    if preprocessing.resample:
        times, values, resampled = _resample(times, values, step)
        record["resampled"] = resampled
    out = Measurement(times, tuple(columns), values, where, tuple(units) if any(units) else ())
    return Prepared(out, record, tuple(notices))


def _resample(times: np.ndarray, values: np.ndarray, step: float) -> tuple[np.ndarray, np.ndarray, dict]:
    """The samples on the grid ``t_0 + k step`` inside the record, low-pass filtered first
    where they are denser than the grid (module docstring, step 8)."""
    from scipy import signal

    grid = times[0] + step * np.arange(int(np.floor((times[-1] - times[0]) / step * (1 + 1e-12))) + 1)
    if grid.size < 2:
        raise DataError(f"--resample: the record spans {float(times[-1] - times[0]):g} s, less than two steps of "
                        f"{step:g} s; give a smaller --step or leave --resample out.")
    spacing = float(np.median(np.diff(times)))
    info: dict = {"step": step, "samples_before": int(times.size), "samples_after": int(grid.size)}
    if spacing < step:
        # Even spacing first (the filter assumes it), at the data's own median spacing.
        fine = times[0] + spacing * np.arange(int(np.floor((times[-1] - times[0]) / spacing)) + 1)
        even = np.column_stack([np.interp(fine, times, values[:, c]) for c in range(values.shape[1])])
        cutoff = ANTI_ALIAS_SHARE * 0.5 / step
        sos = signal.butter(ANTI_ALIAS_ORDER, cutoff, fs=1.0 / spacing, output="sos")
        padlen = min(3 * (2 * len(sos) + 1), even.shape[0] - 1)
        filtered = signal.sosfiltfilt(sos, even, axis=0, padlen=padlen)
        times, values = fine, filtered
        info["anti_alias"] = {"filter": f"butterworth order {ANTI_ALIAS_ORDER}, forward-backward",
                              "cutoff_hz": cutoff}
    out = np.column_stack([np.interp(grid, times, values[:, c]) for c in range(values.shape[1])])
    return grid, out, info
