"""Several files of one experiment (issue 26, part 2: multi-rate channels).

A test bench often records one experiment in several files: a fast data logger (accelerations
at 10 kHz, MDF4) and a slow one (temperatures, displacements at 100 Hz, CSV), on one clock.
:func:`merge_measurements` makes them one :class:`~fmi_adjoint.data.Measurement`: its times
are the union of the files' sample times (in seconds), and each channel holds its own samples
at its own times and NaN elsewhere.  The NaN are the gaps of a channel that the costs already
handle exactly: sample weight 0 in that channel only, the trapezoidal rule of the channel
bridging them (:class:`~fmi_adjoint.costs.LeastSquaresCost`), so every channel is compared
at the times it was measured, with its own trapezoidal weights, and nothing is interpolated
or resampled.

The files must share the clock (their times are compared as they are, after conversion to
seconds); a channel name may appear in one file only, and each file needs strictly
increasing times (an event row, a repeated time, has no meaning across files).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..data import Measurement
from ..errors import DataError
from ..text import excerpt
from .units import time_factor

__all__ = ["merge_measurements", "MERGED_SOURCE_SEPARATOR"]

#: Joins the files' names into the merged measurement's ``source`` (messages, RESULT.json).
MERGED_SOURCE_SEPARATOR = " + "


def merge_measurements(measurements: Sequence[Measurement]) -> Measurement:
    """One measurement of the channels of ``measurements`` on the union of their times
    (module docstring); a single measurement is returned as it is.

    Raises
    ------
    DataError
        Fewer than one measurement, a channel in two files (naming both), times that are not
        strictly increasing within a file.
    """
    if not measurements:
        raise DataError("no data file to merge; give at least one.")
    if len(measurements) == 1:
        return measurements[0]
    owner: dict[str, str] = {}
    times_in_seconds: list[np.ndarray] = []
    for measurement in measurements:
        where = measurement.source or "data"
        for name in measurement.columns:
            if name in owner:
                raise DataError(f"channel {excerpt(name)} is in {owner[name]} and in {where}; an experiment's files "
                                "must record different channels: map one of them (--map) or leave one file out.")
            owner[name] = where
        seconds = np.asarray(measurement.times, dtype=float) * time_factor(measurement.time_unit, where)
        if seconds.size and not np.all(np.diff(seconds) > 0):
            raise DataError(f"{where}: the times must increase strictly to be merged with other files (a repeated "
                            "time is an event row); give each file its own samples.")
        times_in_seconds.append(seconds)
    times = np.unique(np.concatenate(times_in_seconds))
    columns: list[str] = []
    units: list[str] = []
    blocks: list[np.ndarray] = []
    for measurement, seconds in zip(measurements, times_in_seconds):
        block = np.full((times.size, len(measurement.columns)), np.nan)
        block[np.searchsorted(times, seconds)] = np.asarray(measurement.values, dtype=float)
        blocks.append(block)
        columns += measurement.columns
        units += list(measurement.units) if measurement.units else [""] * len(measurement.columns)
    source = MERGED_SOURCE_SEPARATOR.join(m.source or "data" for m in measurements)
    return Measurement(times, tuple(columns), np.hstack(blocks), source, tuple(units) if any(units) else (), "s")
