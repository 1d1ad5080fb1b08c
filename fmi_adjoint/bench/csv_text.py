"""CSV and TSV files (any delimiter of :data:`~fmi_adjoint.data.DELIMITERS`, decimal commas,
unit rows or ``name [unit]`` headers): :func:`~fmi_adjoint.data.parse_csv` with its checks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..data import Measurement, parse_csv, read_csv_bytes
from .contract import AbstractFormat, check_channels

__all__ = ["CsvFormat", "select"]


def select(measurement: Measurement, channels: Sequence[str] | None, present_only: bool = False) -> Measurement:
    """The channels ``channels`` of ``measurement`` (None: all; see :func:`check_channels`)."""
    if channels is None:
        return measurement
    names = check_channels(measurement.columns, channels, measurement.source, present_only)
    index = [measurement.columns.index(c) for c in names]
    units = tuple(measurement.unit(c) for c in names) if measurement.units else ()
    return Measurement(measurement.times, tuple(names), measurement.values[:, index], measurement.source, units,
                       measurement.time_unit)


class CsvFormat(AbstractFormat):
    """Text with a header row: read whole, within the 512 MiB limit of :func:`read_csv_bytes`."""

    name = "csv"
    suffixes = (".csv", ".tsv", ".txt", ".dat")

    @classmethod
    def matches(cls, head: bytes, suffix: str) -> bool:
        # Text: no NUL byte (every binary format here has them in its first block).
        return b"\0" not in head

    @classmethod
    def read(cls, path: Path, channels: Sequence[str] | None, *, present_only: bool = False) -> Measurement:
        return select(parse_csv(read_csv_bytes(path), str(path)), channels, present_only)
