"""Measurement data: CSV files with a ``time`` column and one column per channel."""

from __future__ import annotations

import csv
import dataclasses
import math
import os
from pathlib import Path

import numpy as np

from .errors import DataError
from .files import atomic_output

__all__ = ["Measurement", "read_csv", "write_csv"]

_MAX_BYTES = 512 * 1024 * 1024


@dataclasses.dataclass(frozen=True, eq=False)
class Measurement:
    """Sampled channels: ``values[i, c]`` of channel ``columns[c]`` at ``times[i]``."""

    times: np.ndarray
    columns: tuple[str, ...]
    values: np.ndarray
    source: str = ""

    def column(self, name: str) -> np.ndarray:
        """Values of one channel."""
        if name not in self.columns:
            raise DataError(f"{self.source or 'data'}: no column {name!r}. Columns: {', '.join(self.columns)}.")
        return self.values[:, self.columns.index(name)]


def read_csv(path: str | os.PathLike, *, time_column: str = "time", unit: str = "seconds", min_rows: int = 2
) -> Measurement:
    """Read and validate a CSV file of samples.

    The first row is the header; it must contain ``time_column`` (the abscissa: time by
    default; spectra use ``frequency``, order spectra ``speed``, with ``unit`` named in
    messages).  Every other cell must be a finite number; the abscissa must be strictly
    increasing.

    Raises
    ------
    DataError
        Naming the file, the row and column of the first problem, and the fix.
    """
    path = Path(path)
    where = str(path)
    if not path.is_file():
        raise DataError(f"{where}: file not found; give the path of a CSV file.")
    if path.stat().st_size > _MAX_BYTES:
        raise DataError(f"{where}: the file is larger than {_MAX_BYTES // 2**20} MiB; split or decimate it.")
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            # Keep the file's line numbers for messages; blank lines are skipped.
            numbered = [
                (number, row)
                for number, row in enumerate(csv.reader(handle), start=1)
                if row and any(cell.strip() for cell in row)
            ]
    except (UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"{where}: not a readable CSV text file ({exc}); save it as UTF-8 CSV.") from None
    rows = [row for _, row in numbered]
    lines = [number for number, _ in numbered]
    if not rows:
        raise DataError(f"{where}: the file is empty; it needs a header row with '{time_column}' and data rows.")
    header = [cell.strip() for cell in rows[0]]
    if time_column not in header:
        raise DataError(f"{where}: the header {header} has no '{time_column}' column; add one (in {unit}).")
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes or any(not h for h in header):
        raise DataError(f"{where}: header names must be unique and non-empty (problem: {dupes or 'empty name'}).")
    if len(rows) < min_rows + 1:
        needed = "one data row is" if min_rows == 1 else f"{'two' if min_rows == 2 else min_rows} data rows are"
        raise DataError(f"{where}: at least {needed} needed, found {len(rows) - 1}.")
    values = np.empty((len(rows) - 1, len(header)))
    for index, row in enumerate(rows[1:], start=1):
        r = lines[index]
        if len(row) != len(header):
            raise DataError(f"{where}, line {r}: {len(row)} cells but the header has {len(header)}; fix the row.")
        for c, cell in enumerate(row):
            try:
                value = float(cell)
            except ValueError:
                raise DataError(
                    f"{where}, line {r}, column '{header[c]}': {cell!r} is not a number; fix or remove the row."
                ) from None
            if not math.isfinite(value):
                raise DataError(
                    f"{where}, line {r}, column '{header[c]}': the value {cell.strip()!r} is not finite; "
                    "remove the row or fill the gap."
                )
            values[index - 1, c] = value
    k = header.index(time_column)
    times = values[:, k]
    bad = np.flatnonzero(np.diff(times) <= 0)
    if bad.size:
        r = lines[int(bad[0]) + 2]
        plural = "frequencies" if time_column == "frequency" else f"{time_column}s"
        raise DataError(
            f"{where}, line {r}: {time_column} {float(times[bad[0] + 1])!r} does not increase "
            f"(previous {float(times[bad[0]])!r}); "
            f"sort the rows by {time_column} and drop duplicate {plural}."
        )
    columns = tuple(h for j, h in enumerate(header) if j != k)
    data = np.delete(values, k, axis=1)
    return Measurement(times=times, columns=columns, values=data, source=where)


def write_csv(path: str | os.PathLike, times: np.ndarray, columns: dict[str, np.ndarray]) -> None:
    """Write a ``time`` column and the given columns (17 significant digits), atomically."""
    with atomic_output(path) as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["time", *columns])
        stacked = np.column_stack([np.asarray(times)] + [np.asarray(v) for v in columns.values()])
        for row in stacked:
            writer.writerow([repr(float(x)) for x in row])
