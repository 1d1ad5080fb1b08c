"""MATLAB MAT files: v5 (and v6, v7) through scipy.io, v7.3 (an HDF5 file) through h5py.

The layout accepted (both versions): the variable ``time`` and one numeric vector per
channel of the same length (``n x 1`` or ``1 x n``); the optional char variable ``NAME_unit``
gives the unit of channel ``NAME``.  Structs and cell arrays are refused: save each channel as
a vector of its own (``save('run.mat', 'time', 'a1', 'a1_unit')``).

A v5 file is read whole by scipy (within the size limit of CSV files, 512 MiB); a v7.3 file
a channel at a time (:func:`~fmi_adjoint.bench.hdf5.read_hdf5`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..data import Measurement
from ..errors import DataError
from ..text import excerpt
from .contract import AbstractFormat, check_channels, check_regular, measurement_of, numeric
from .hdf5 import HDF5_SIGNATURE, read_hdf5

__all__ = ["MAX_MAT_BYTES", "MatV5Format", "MatV73Format"]

#: The largest MAT v5 file read (scipy reads it whole): the limit of CSV files.
MAX_MAT_BYTES = 512 * 1024 * 1024


def _version(head: bytes) -> bytes:
    """The two version bytes of a MAT header (0x0100 for v5, 0x0200 for v7.3), either endianness."""
    return head[124:126]


class MatV73Format(AbstractFormat):
    """MAT v7.3: a 512-byte MATLAB header, then HDF5."""

    name = "mat-v7.3"
    suffixes = (".mat",)

    @classmethod
    def matches(cls, head: bytes, suffix: str) -> bool:
        return head[:6] == b"MATLAB" and (_version(head) in (b"\x00\x02", b"\x02\x00")
                                          or head[512:520] == HDF5_SIGNATURE)

    @classmethod
    def read(cls, path: Path, channels: Sequence[str] | None, *, present_only: bool = False) -> Measurement:
        return read_hdf5(path, channels, matlab=True, present_only=present_only)


class MatV5Format(AbstractFormat):
    """MAT v5 (a 128-byte MATLAB header, version 0x0100)."""

    name = "mat-v5"
    suffixes = (".mat",)

    @classmethod
    def matches(cls, head: bytes, suffix: str) -> bool:
        return head[:6] == b"MATLAB" and _version(head) in (b"\x00\x01", b"\x01\x00")

    @classmethod
    def read(cls, path: Path, channels: Sequence[str] | None, *, present_only: bool = False) -> Measurement:
        import scipy.io

        where = str(path)
        size = check_regular(path, "a MAT file")
        if size > MAX_MAT_BYTES:
            raise DataError(f"{where}: the MAT v5 file is larger than 512 MiB; save it as v7.3 "
                            "(save -v7.3), which is read a channel at a time.")
        try:
            listing = scipy.io.whosmat(where)
        except Exception as exc:  # noqa: BLE001 (scipy raises several kinds for a damaged file)
            raise DataError(f"{where}: not a readable MAT file ({type(exc).__name__}: {excerpt(str(exc))}); "
                            "save it again.") from None
        variables = {name: cls_ for name, _, cls_ in listing}
        available = [n for n in variables if n != "time" and not n.endswith("_unit")]
        names = check_channels(available, channels, where, present_only)
        if "time" not in variables:
            raise DataError(f"{where}: no variable 'time'; save the time vector as 'time' next to the channels.")
        for name in names:
            if variables[name] in ("struct", "cell", "object", "char"):
                raise DataError(f"{where}: {excerpt(name)} is a {variables[name]}, not a numeric vector; save each "
                                "channel as a numeric vector of its own.")
        wanted = ["time", *names, *(f"{n}_unit" for n in ["time", *names] if f"{n}_unit" in variables)]
        try:
            content = scipy.io.loadmat(where, variable_names=wanted, squeeze_me=False)
        except Exception as exc:  # noqa: BLE001
            raise DataError(f"{where}: not a readable MAT file ({type(exc).__name__}: {excerpt(str(exc))}); "
                            "save it again.") from None
        times = numeric(content["time"], where, "time")
        vectors = [numeric(content[name], where, name) for name in names]
        units = [_text(content.get(f"{name}_unit")) for name in names]
        return measurement_of(times, names, vectors, units, where, _text(content.get("time_unit")))


def _text(value) -> str:
    """A MATLAB char variable as loaded by scipy ("" for None)."""
    if value is None:
        return ""
    array = np.asarray(value)
    if array.dtype.kind == "U":
        return "".join(array.ravel().tolist()).strip()
    return ""
