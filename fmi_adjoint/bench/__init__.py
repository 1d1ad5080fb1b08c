"""Test-bench data as it comes (issue 26, parts 1-4): readers for MDF 3/4, MAT v5 and v7.3,
HDF5 and CSV/TSV files behind one data contract (:mod:`.contract`), the conversion of their
units (:mod:`.units`) and the preprocessing that makes them a cost's data (:mod:`.preprocess`).

:func:`detect_format` chooses the reader from the file's first bytes (magic bytes: ``MDF``,
the MATLAB header and its version, the HDF5 signature), so a ``.dat`` file of either kind or
a renamed file is read by the right reader; text without NUL bytes is CSV.  The libraries of
the binary formats (asammdf, h5py) and pint are the optional extra ``fmi-adjoint[bench]``:
without them, reading such a file is one error naming the extra.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..data import Measurement
from ..errors import DataError
from .contract import AbstractFormat, check_regular
from .csv_text import CsvFormat
from .hdf5 import Hdf5Format
from .matlab import MatV5Format, MatV73Format
from .mdf import MdfFormat

__all__ = ["FORMATS", "AbstractFormat", "detect_format", "read_data"]

#: The formats in the order they are tried (the first whose ``matches`` is true reads the file).
FORMATS: tuple[type[AbstractFormat], ...] = (MdfFormat, MatV73Format, MatV5Format, Hdf5Format, CsvFormat)
#: Bytes read to recognise a format (the MAT v7.3 HDF5 signature sits at offset 512).
_HEAD_BYTES = 1024


def detect_format(path: str | Path) -> type[AbstractFormat]:
    """The format of the file ``path`` from its first bytes (module docstring)."""
    path = Path(path)
    check_regular(path, "a data file (CSV, MDF, MAT or HDF5)")
    try:
        with open(path, "rb") as handle:
            head = handle.read(_HEAD_BYTES)
    except OSError as exc:
        raise DataError(f"{path}: cannot read it ({exc.strerror or exc}).") from None
    suffix = path.suffix.lower()
    for fmt in FORMATS:
        if fmt.matches(head, suffix):
            return fmt
    raise DataError(f"{path}: not a data file this version reads (binary, but neither MDF, MAT nor HDF5); save "
                    "it as MDF4, MAT, HDF5 or CSV.")


def read_data(path: str | Path, channels: Sequence[str] | None = None, *, present_only: bool = False
              ) -> Measurement:
    """The channels ``channels`` (None: all) of the data file ``path``, whatever its format.

    With ``present_only`` only those of ``channels`` the file has are read (at least one).
    """
    return detect_format(path).read(Path(path), channels, present_only=present_only)
