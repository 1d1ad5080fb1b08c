"""Measurement data: CSV files with a ``time`` column and one column per channel.

The CSV dialects of test benches are read as well (issue 26, part 1): any of the delimiters
``,``, ``;``, tab and ``|`` (sniffed from the header row, or given), decimal commas where the
delimiter is not a comma (``1,5`` is 1.5 in a ``;`` file), and units either in the header
(``a1 [mm/s^2]``) or in a unit row right below it (``s;mm/s^2``).  Every check of the plain
file applies unchanged: size limit, UTF-8, finite plain decimals, increasing time.
"""

from __future__ import annotations

import array
import codecs
import collections
import csv
import dataclasses
import io
import math
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO, cast

import numpy as np

from .errors import DataError
from .files import atomic_output, read_regular
from .text import excerpt

__all__ = ["DELIMITERS", "MAX_COLUMNS", "Measurement", "check_csv_columns", "name_list", "parse_csv", "read_csv",
           "read_csv_bytes", "sniff_delimiter", "split_unit", "write_csv", "write_csv_rows"]

_MAX_BYTES = 512 * 1024 * 1024
#: Most columns a CSV file may have (the time column included).
MAX_COLUMNS = 10_000
#: A plain decimal number in ASCII digits, blanks around it allowed.
_DECIMAL = re.compile(r"[ \t]*[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[ \t]*", re.ASCII)
#: The same with a decimal comma (``-1,5e-3``): accepted where the delimiter is not a comma.
_DECIMAL_COMMA = re.compile(r"[ \t]*[+-]?(?:[0-9]+,?[0-9]*|,[0-9]+)(?:[eE][+-]?[0-9]+)?[ \t]*", re.ASCII)
_NON_FINITE = {"nan", "inf", "infinity", "snan", "qnan"}
#: A cell of a unit row (``s``, ``[mm/s^2]``, ``N*m``, ``°C``, empty): no other characters.
_UNIT_CELL = re.compile(r"[\w\[\]/^*·.()°µμ²³%+\- \t]*")
#: The delimiters a header row is sniffed for, the most frequent winning (ties: the first).
DELIMITERS = (",", ";", "\t", "|")
#: ``name [unit]`` in a header cell: a blank before the bracket (``q[1]`` is an array element's name).
_NAME_UNIT = re.compile(r"(.*?\S)\s+\[([^\[\]]*)\]\s*")


@dataclasses.dataclass(frozen=True, eq=False)
class Measurement:
    """Sampled channels: ``values[i, c]`` of channel ``columns[c]`` at ``times[i]``.

    This is the data contract every reader returns (:mod:`fmi_adjoint.bench`): ``units[c]``
    is the unit string of channel ``c`` as the file states it ("" where it states none, and
    ``units`` may be empty: no unit known), ``time_unit`` that of the times ("": seconds
    assumed), ``source`` the file (named in messages).
    """

    times: np.ndarray
    columns: tuple[str, ...]
    values: np.ndarray
    source: str = ""
    units: tuple[str, ...] = ()
    time_unit: str = ""

    def unit(self, name: str) -> str:
        """The unit of one channel ("" if none is stated)."""
        index = self.columns.index(name)
        return self.units[index] if index < len(self.units) else ""

    def column(self, name: str) -> np.ndarray:
        """Values of one channel."""
        if name not in self.columns:
            raise DataError(f"{self.source or 'data'}: no column {excerpt(name)}. Columns: {name_list(self.columns)}.")
        return self.values[:, self.columns.index(name)]


def name_list(names, shown: int = 20) -> str:
    """Column names for a message: each capped (:func:`excerpt`), at most ``shown`` of them."""
    def one(name: str) -> str:
        text = excerpt(name)
        return text[1:-1] if text.endswith(("'", '"')) and name.isprintable() else text

    more = f", ... ({len(names)} in all)" if len(names) > shown else ""
    return ", ".join(one(n) for n in names[:shown]) + more


def read_csv(path: str | os.PathLike, *, time_column: str = "time", unit: str = "seconds", min_rows: int = 2,
             events: bool = False) -> Measurement:
    """Read and validate a CSV file of samples.

    The first row is the header; it must contain ``time_column`` (the abscissa: time by
    default; spectra use ``frequency``, order spectra ``speed``, with ``unit`` named in
    messages).  Every other cell must be a finite plain ASCII decimal number (``1``,
    ``-2.5``, ``.5e-3``; surrounding blanks allowed); the abscissa must be strictly
    increasing, except that with ``events`` a time may appear in two consecutive rows: the
    left and right limits at an event, as FMI tools (fmpy, CVode drivers) write them.

    Only a regular file of at most 512 MiB is read (FIFOs and devices are refused before
    opening, reading stops at the limit), with at most 10 000 columns.  Messages never
    echo the file's content: a header without ``time_column`` is not listed, and a bad
    cell appears only as a repr-escaped excerpt of at most 40 characters (:func:`excerpt`).

    Raises
    ------
    DataError
        Naming the file, the row and column of the first problem, and the fix.
    """
    path = Path(path)
    return parse_csv(read_csv_bytes(path), str(path), time_column=time_column, unit=unit, min_rows=min_rows,
                     events=events)


def read_csv_bytes(path: str | os.PathLike) -> bytes:
    """The bytes of a CSV file, with the checks of :func:`read_csv` (regular file, at most
    512 MiB); :func:`parse_csv` reads them.  Data travels to parallel workers as these bytes."""
    return read_regular(path, _MAX_BYTES, "a CSV file", DataError)


def parse_csv(raw: bytes, where: str, *, time_column: str = "time", unit: str = "seconds", min_rows: int = 2,
              events: bool = False, delimiter: str | None = None) -> Measurement:
    """:func:`read_csv` of the bytes ``raw`` of the file ``where`` (named in messages).

    ``delimiter`` (None: :func:`sniff_delimiter`) separates the cells; where it is not a
    comma, numbers may use a decimal comma.  Units come from ``name [unit]`` header cells or
    from a unit row right below the header (a row whose ``time_column`` cell is not a number).

    Streaming: the bytes are checked as UTF-8 and decoded a chunk at a time, and the numbers
    go into one float array sized from the count of line breaks, so the memory beyond
    ``raw`` is the values (8 bytes a cell) and a chunk of text.  (Decoding the whole file
    into one string, then a ``StringIO`` (4 bytes a character) and Python lists took 8.5x
    the file's size: a 490 MB file needed 4.16 GB, issue 31.)
    """
    _check_utf8(raw, where)
    if delimiter is None:
        delimiter = sniff_delimiter(raw)
    elif delimiter not in DELIMITERS:
        raise DataError(f"{where}: the delimiter {delimiter!r} is not one of {', '.join(map(repr, DELIMITERS))}.")
    text = io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8", newline="")
    lines = _without_bom(text)
    reader = csv.reader(lines, delimiter=delimiter)
    try:
        return _parse(reader, where, time_column, unit, min_rows, events, _line_count(raw), delimiter != ",")
    except csv.Error as exc:
        raise DataError(f"{where}, line {reader.line_num}: not a readable CSV row ({exc}); save it as UTF-8 "
                        "CSV.") from None
    except MemoryError:
        raise DataError(f"{where}: too many values to hold in memory; split or decimate the file.") from None


#: Bytes of the file searched for its header row by :func:`sniff_delimiter`.
_HEADER_BYTES = 4 * 1024 * 1024


def sniff_delimiter(raw: bytes) -> str:
    """The delimiter of a CSV file: the one of :data:`DELIMITERS` found most often in its
    first non-blank row (the header), ``,`` if none is."""
    for line in raw[:_HEADER_BYTES].splitlines():
        if line.strip():
            counts = [line.count(d.encode()) for d in DELIMITERS]
            best = max(range(len(DELIMITERS)), key=lambda i: (counts[i], -i))
            return DELIMITERS[best] if counts[best] else ","
    return ","


def split_unit(cell: str) -> tuple[str, str]:
    """A header cell ``name [unit]`` as ``(name, unit)``; ``(cell, "")`` without a bracketed
    unit after a blank (``q[1]`` is a name)."""
    match = _NAME_UNIT.fullmatch(cell)
    if match and match.group(1):
        return match.group(1).strip(), match.group(2).strip()
    return cell.strip(), ""


#: Bytes checked as UTF-8 at a time.
_CHUNK = 1 << 24


def _check_utf8(raw: bytes, where: str) -> None:
    """Refuse bytes that are not UTF-8, naming the first bad byte (in chunks: no copy of
    the whole file is made)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(raw)
    for start in range(0, len(raw), _CHUNK):
        pending = len(decoder.getstate()[0])
        try:
            decoder.decode(view[start:start + _CHUNK], final=start + _CHUNK >= len(raw))
        except UnicodeDecodeError as exc:
            raise DataError(f"{where}: not a UTF-8 text file (byte {start - pending + exc.start}); save it as UTF-8 "
                            "CSV.") from None
    decoder.decode(b"", final=True)


def _without_bom(lines: Iterable[str]) -> Iterator[str]:
    """The lines with a byte-order mark removed from the first (:func:`decode_text`)."""
    first = True
    for line in lines:
        yield line.removeprefix("\ufeff") if first else line
        first = False


def _line_count(raw: bytes) -> int:
    """The lines of ``raw`` as the CSV reader splits them (at ``\\n``, ``\\r`` and ``\\r\\n``):
    at least the data rows, so the float array never grows."""
    return raw.count(b"\n") + raw.count(b"\r") - raw.count(b"\r\n") + 1


def _cells(values: np.ndarray) -> Any:
    """A flat float64 array as a memoryview: one Python float stored per item assignment,
    several times faster than numpy's own item assignment."""
    return memoryview(cast(Any, values))


def _parse(reader, where: str, time_column: str, unit: str, min_rows: int, events: bool = False,
           capacity: int = 1024, decimal_comma: bool = False) -> Measurement:
    header: list[str] | None = None
    units: list[str] = []
    unit_row_possible = False
    k = 0
    times = data = np.empty(0)
    tview = dview = _cells(times)
    lines = array.array("q")  # the file's line of each data row, for messages; blank lines are skipped
    rows = 0
    for row in reader:
        if not row or not any(cell.strip() for cell in row):
            continue
        if header is None:
            header, units = _header(row, where, reader.line_num, time_column, unit)
            k = header.index(time_column)
            times, data = np.empty(max(capacity - 1, 1)), np.empty((max(capacity - 1, 1), len(header) - 1))
            tview, dview = _cells(times), _cells(data.reshape(-1))
            unit_row_possible = True
            continue
        line = reader.line_num
        if unit_row_possible:
            unit_row_possible = False
            if (len(row) == len(header) and not any(_is_number(cell, decimal_comma) for cell in row)
                    and all(_UNIT_CELL.fullmatch(cell) for cell in row)):
                if any(units):
                    raise DataError(f"{where}, line {line}: units are given twice, in the header ('name [unit]') "
                                    "and in a unit row; keep one of them.")
                units = [cell.strip().removeprefix("[").removesuffix("]").strip() for cell in row]
                continue
        if len(row) != len(header):
            raise DataError(f"{where}, line {line}: {len(row)} cells but the header has {len(header)}; fix the row.")
        if rows == len(times):  # more rows than expected (a caller without a line count): grow
            times, data = np.concatenate((times, np.empty_like(times))), np.concatenate((data, np.empty_like(data)))
            tview, dview = _cells(times), _cells(data.reshape(-1))
        base = rows * (len(header) - 1) - 1
        for c, cell in enumerate(row):
            value = _cell(cell, where, line, header[c], decimal_comma)
            if c == k:
                tview[rows] = value
            else:
                dview[base + c + (c < k)] = value
        lines.append(line)
        rows += 1
    if header is None:
        raise DataError(f"{where}: the file is empty; it needs a header row with '{time_column}' and data rows.")
    if len(lines) < min_rows:
        needed = "one data row is" if min_rows == 1 else f"{'two' if min_rows == 2 else min_rows} data rows are"
        raise DataError(f"{where}: at least {needed} needed, found {len(lines)}.")
    del tview, dview
    # Blank lines and quoted line breaks leave rows unused; give them back if they are many.
    times, data = (times[:rows], data[:rows]) if 2 * rows >= len(times) else (times[:rows].copy(), data[:rows].copy())
    steps = np.diff(times)
    if events:
        # A repeated time is an event's left and right limit: twice at most, never first.
        repeated = steps == 0
        third = np.flatnonzero(repeated[1:] & repeated[:-1])
        if third.size:
            r = lines[int(third[0]) + 2]
            raise DataError(f"{where}, line {r}: {time_column} {float(times[third[0] + 2])!r} appears a third time; "
                            "a time may repeat once (the left and right limits at an event): drop the extra row.")
        steps = np.where(repeated, 1.0, steps)
    bad = np.flatnonzero(steps <= 0)
    if bad.size:
        r = lines[int(bad[0]) + 1]
        plural = "frequencies" if time_column == "frequency" else f"{time_column}s"
        raise DataError(
            f"{where}, line {r}: {time_column} {float(times[bad[0] + 1])!r} does not increase "
            f"(previous {float(times[bad[0]])!r}); "
            f"sort the rows by {time_column} and drop duplicate {plural}."
        )
    columns = tuple(h for j, h in enumerate(header) if j != k)
    channel_units = tuple(u for j, u in enumerate(units) if j != k) if any(units) else ()
    return Measurement(times=times, columns=columns, values=data, source=where, units=channel_units,
                       time_unit=units[k] if units else "")


def _header(row: list[str], where: str, line: int, time_column: str, unit: str) -> tuple[list[str], list[str]]:
    """The checked header cells and their units (``name [unit]``; "" where none is given)
    (linear time: a 100 000-column header is refused at once)."""
    if len(row) > MAX_COLUMNS:
        raise DataError(f"{where}, line {line}: {len(row)} columns, more than the limit of {MAX_COLUMNS}; "
                        "keep only the measured channels.")
    named = [split_unit(cell) for cell in row]
    header = [name for name, _ in named]
    if time_column not in header:
        # The row is not listed: it may be the first line of any file, not a header.
        raise DataError(f"{where}, line {line}: the header has no '{time_column}' column; add one (in {unit}) "
                        "as the first row names the columns.")
    counts = collections.Counter(header)
    dupes = [name for name, count in counts.items() if count > 1]
    if dupes or "" in counts:
        problem = "an empty name" if "" in counts else "repeated " + ", ".join(excerpt(d) for d in dupes[:3])
        raise DataError(f"{where}, line {line}: header names must be unique and non-empty ({problem}); "
                        "rename the columns.")
    return header, [u for _, u in named]


def _is_number(cell: str, decimal_comma: bool) -> bool:
    """Whether a cell is a number (or a non-finite spelling): a unit row has none."""
    return bool(_DECIMAL.fullmatch(cell) or (decimal_comma and _DECIMAL_COMMA.fullmatch(cell))
                or cell.strip(" \t").lower().lstrip("+-") in _NON_FINITE)


def _cell(cell: str, where: str, line: int, column: str, decimal_comma: bool = False) -> float:
    """A plain ASCII decimal number (Python's ``float`` also takes ``1_0``, non-ASCII digits
    and ``inf``/``nan`` spellings, which are not numbers of a measurement file); with
    ``decimal_comma`` also ``-1,5e-3``."""
    if decimal_comma and "," in cell and _DECIMAL_COMMA.fullmatch(cell):
        cell = cell.replace(",", ".")
    if _DECIMAL.fullmatch(cell):
        value = float(cell)
        if math.isfinite(value):
            return value
    elif cell.strip(" \t").lower().lstrip("+-") not in _NON_FINITE:
        raise DataError(
            f"{where}, line {line}, column {excerpt(column)}: {excerpt(cell)} is not a number (plain decimal "
            "digits, e.g. -1.5e-3); fix or remove the row."
        )
    raise DataError(
        f"{where}, line {line}, column {excerpt(column)}: the value {excerpt(cell.strip())} is not finite; "
        "remove the row or fill the gap."
    )


def check_csv_columns(names, what: str = "output") -> None:
    """Refuse column names that the written CSV could not be read back with: ``time``
    (the abscissa column every file starts with) and repeated names."""
    seen = set()
    for name in names:
        if name == "time":
            raise DataError(f"the {what} 'time' would give the CSV file two 'time' columns, which read_csv "
                            f"refuses; rename the {what}.")
        if name in seen:
            raise DataError(f"the {what} {excerpt(name)} appears twice; CSV column names must be unique.")
        seen.add(name)


def write_csv(path: str | os.PathLike, times: np.ndarray, columns: dict[str, np.ndarray]) -> None:
    """Write a ``time`` column and the given columns (17 significant digits), atomically.

    Raises
    ------
    DataError
        If a column is named ``time`` (the file could not be read back).
    """
    check_csv_columns(columns, "column")
    with atomic_output(path) as handle:
        write_csv_rows(handle, times, columns)


def write_csv_rows(handle: TextIO, times: np.ndarray, columns: dict[str, np.ndarray]) -> None:
    """Write the CSV text of :func:`write_csv` to an open text stream (e.g. stdout)."""
    check_csv_columns(columns, "column")
    writer = csv.writer(handle, lineterminator="\n")
    writer.writerow(["time", *columns])
    stacked = np.column_stack([np.asarray(times)] + [np.asarray(v) for v in columns.values()])
    for row in stacked:
        writer.writerow([repr(float(x)) for x in row])
