"""The data contract of the bench readers and the one rule every reader follows (issue 26, part 1).

A reader turns a file into a :class:`~fmi_adjoint.data.Measurement`: strictly increasing
``times`` (seconds, or ``time_unit``), the ``columns`` asked for and nothing else, their
``values`` (NaN where the file has a gap), ``units`` one string per column as the file states
it ("" for none), and ``source`` (the file, named in messages).  To add a format:

1. subclass :class:`AbstractFormat` in a new module of this package, one format per module;
2. give ``name``, ``suffixes`` and ``extra`` (the pip extra of an optional library, or None);
3. implement ``matches`` from the first bytes of the file (magic bytes first, the suffix
   only where the format has none) and ``read``, which reads only the channels asked for
   (lazily where the library allows) and raises :class:`~fmi_adjoint.errors.DataError`
   naming the file, the problem and the fix;
4. list the class in :data:`fmi_adjoint.bench.FORMATS` (before the formats it must win over).
"""

from __future__ import annotations

import abc
import importlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np

from ..data import Measurement, name_list
from ..errors import DataError
from ..files import file_kind
from ..text import excerpt

__all__ = ["AbstractFormat", "EXTRA", "MAX_SAMPLES", "MissingChannel", "check_channels", "check_regular",
           "check_samples", "check_times", "measurement_of", "numeric", "require"]

#: The pip extra that installs the optional readers' libraries.
EXTRA = "bench"
#: Most samples of one channel read from a binary file (512 MiB of float64, the size limit of a
#: CSV file): checked from the file's metadata before any sample is read.
MAX_SAMPLES = 512 * 1024 * 1024 // 8


class AbstractFormat(abc.ABC):
    """One file format: how it is recognised and read (see the module docstring)."""

    #: Short name recorded in RESULT.json (``mdf``, ``mat-v5``, ...).
    name: ClassVar[str]
    #: File name endings of the format (lower case, with the dot).
    suffixes: ClassVar[tuple[str, ...]]

    @classmethod
    @abc.abstractmethod
    def matches(cls, head: bytes, suffix: str) -> bool:
        """Whether a file whose first bytes are ``head`` (at least 1 KiB, or the whole file)
        and whose name ends in ``suffix`` (lower case) is of this format."""

    @classmethod
    @abc.abstractmethod
    def read(cls, path: Path, channels: Sequence[str] | None, *, present_only: bool = False) -> Measurement:
        """The channels ``channels`` (None: all) of the file ``path``; with ``present_only``
        those of them the file has (:func:`check_channels`)."""


def require(module: str, what: str):
    """Import the optional library ``module`` or raise one error naming the extra."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise DataError(f"reading {what} needs the library {module}: pip install fmi-adjoint[{EXTRA}].") from None


def check_regular(path: Path, what: str) -> int:
    """The size of ``path``, refusing anything but a regular file (FIFOs and devices would
    block or never end: the rule of :func:`~fmi_adjoint.files.read_regular`)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise DataError(f"{path}: file not found; give the path of {what}.") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read it ({exc.strerror or exc}); give the path of {what}.") from None
    if stat.S_ISDIR(info.st_mode):
        raise DataError(f"{path}: file not found (it is a folder); give the path of {what}.")
    if not stat.S_ISREG(info.st_mode):
        raise DataError(f"{path}: it is {file_kind(info.st_mode)}, not a regular file; give the path of {what}.")
    return info.st_size


def check_times(times: np.ndarray, where: str, what: str = "time") -> np.ndarray:
    """A finite, strictly increasing, one-dimensional float time vector, or one error."""
    times = np.asarray(times, dtype=float).ravel()
    if times.size < 2:
        raise DataError(f"{where}: the {what} vector has {times.size} sample(s); at least two are needed.")
    if not np.all(np.isfinite(times)):
        first = int(np.flatnonzero(~np.isfinite(times))[0])
        raise DataError(f"{where}: {what} sample {first} is not finite; every time must be a number.")
    bad = np.flatnonzero(np.diff(times) <= 0)
    if bad.size:
        i = int(bad[0]) + 1
        raise DataError(f"{where}: {what} sample {i} ({float(times[i])!r}) does not increase (previous "
                        f"{float(times[i - 1])!r}); the time must be strictly increasing: sort the samples and "
                        "drop duplicates.")
    return times


def check_channels(available: Sequence[str], channels: Sequence[str] | None, where: str,
                   present_only: bool = False) -> list[str]:
    """The channels to read: ``channels`` (each must be available; with ``present_only`` those
    available, at least one) or all of ``available``."""
    if channels is None:
        return list(available)
    missing = [c for c in channels if c not in available]
    if present_only and len(missing) < len(channels):
        return [c for c in channels if c in available]
    if present_only:
        raise DataError(f"{where}: no channel is named like an output ({name_list(list(channels))}). Channels: "
                        f"{name_list(list(available))}. Map each output to its channel with --map OUTPUT=CHANNEL.")
    if missing:
        raise MissingChannel(where, missing[0], tuple(available))
    return list(channels)


class MissingChannel(DataError):
    """A channel asked for that the file does not have; the message's fix is the command
    line's for outputs (``--map``); who asks for another purpose (a measured input) words its own
    from ``source``, ``channel`` and ``available``."""

    def __init__(self, source: str, channel: str, available: tuple[str, ...]):
        self.source, self.channel, self.available = source, channel, available
        super().__init__(f"{source}: no channel {excerpt(channel)}. Channels: {name_list(list(available))}. "
                         "Map an output to an existing channel with --map OUTPUT=CHANNEL.")


def measurement_of(times: np.ndarray, columns: Sequence[str], vectors: Sequence[np.ndarray], units: Sequence[str],
                   where: str, time_unit: str = "") -> Measurement:
    """A :class:`Measurement` from one time vector and one vector per channel (checked)."""
    times = check_times(times, where)
    values = np.empty((times.size, len(columns)))
    for c, (name, vector) in enumerate(zip(columns, vectors)):
        vector = np.asarray(vector)
        if vector.size != times.size:
            raise DataError(f"{where}: channel {excerpt(name)} has {vector.size} samples, the time vector "
                            f"{times.size}; give vectors of one length (one rate per file).")
        values[:, c] = vector.ravel()
    return Measurement(times=times, columns=tuple(columns), values=values, source=where, units=tuple(units),
                       time_unit=time_unit)


def numeric(array, where: str, name: str) -> np.ndarray:
    """``array`` as a one-dimensional float vector, refusing strings, structs and matrices."""
    array = np.asarray(array)
    if array.dtype.kind not in "biuf":
        kind = {"U": "strings", "S": "strings", "O": "objects (cells or strings)", "V": "a struct or record"}.get(
            array.dtype.kind, f"values of type {array.dtype}")
        raise DataError(f"{where}: {excerpt(name)} holds {kind}, not numbers; store each channel as a numeric "
                        "vector.")
    if sum(n > 1 for n in array.shape) > 1:
        raise DataError(f"{where}: {excerpt(name)} is a {'x'.join(map(str, array.shape))} array, not a vector; "
                        "store each channel as a vector of its own.")
    return array.astype(float).ravel()


def check_samples(count: int, where: str, name: str) -> None:
    """Refuse a channel of more than :data:`MAX_SAMPLES` samples before reading it."""
    if count > MAX_SAMPLES:
        raise DataError(f"{where}: channel {excerpt(name)} has {count} samples, more than the limit of {MAX_SAMPLES} "
                        "(512 MiB); decimate the record or cut it into time windows in the bench software.")
