"""HDF5 files and MATLAB v7.3 MAT files (which are HDF5 files) through h5py.

The layout accepted:

* **HDF5**: each channel is a one-dimensional numeric dataset, named by its path without
  the leading ``/`` (``a1``, ``run3/a1``); its time vector is the dataset ``time`` in the same
  group (``run3/time``); its unit is the dataset's string attribute ``unit`` (or ``units``).
* **MAT v7.3**: the variables at the top level: ``time`` and one numeric vector per channel
  (``n x 1`` or ``1 x n``); the optional char variable ``NAME_unit`` gives the unit of ``NAME``.
  Structs and cell arrays are refused: save each channel as a vector of its own.

Datasets are read only when selected (h5py reads a dataset's bytes when it is sliced), so a
large file costs the memory of the channels used.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..data import Measurement, name_list
from ..errors import DataError
from ..text import excerpt
from .contract import (
    AbstractFormat,
    check_channels,
    check_regular,
    check_samples,
    measurement_of,
    numeric,
    require,
)

__all__ = ["HDF5_SIGNATURE", "Hdf5Format", "read_hdf5"]

#: The HDF5 format signature (at offset 0, or 512, 1024, ... after a user block).
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


class Hdf5Format(AbstractFormat):
    """Plain HDF5 (the signature at offset 0)."""

    name = "hdf5"
    suffixes = (".h5", ".hdf5", ".hdf")

    @classmethod
    def matches(cls, head: bytes, suffix: str) -> bool:
        return head[:8] == HDF5_SIGNATURE

    @classmethod
    def read(cls, path: Path, channels: Sequence[str] | None, *, present_only: bool = False) -> Measurement:
        return read_hdf5(path, channels, matlab=False, present_only=present_only)


def read_hdf5(path: Path, channels: Sequence[str] | None, *, matlab: bool, present_only: bool = False
              ) -> Measurement:
    """The channels of an HDF5 file, or of a MAT v7.3 file with ``matlab`` (module docstring)."""
    where = str(path)
    what = "a MAT v7.3 file" if matlab else "an HDF5 file"
    check_regular(path, what)
    h5py = require("h5py", "MAT v7.3 and HDF5 files")
    try:
        handle = h5py.File(where, "r")
    except OSError as exc:
        raise DataError(f"{where}: not a readable HDF5 file ({excerpt(str(exc))}); save it again.") from None
    with handle:
        available = _variables(handle, h5py) if matlab else _datasets(handle, h5py)
        names = check_channels(available, channels, where, present_only)
        if not names:
            raise DataError(f"{where}: no channel besides 'time'; store each measured channel as a numeric vector.")
        groups = {name.rpartition("/")[0] for name in names}
        if len(groups) > 1:
            raise DataError(f"{where}: the channels come from several groups ({name_list(sorted(groups), 5)}); "
                            "compare channels of one group (one time vector) per experiment.")
        group = groups.pop()
        time_path = f"{group}/time" if group else "time"
        if time_path not in handle or not isinstance(handle[time_path], h5py.Dataset):
            raise DataError(f"{where}: no dataset {excerpt(time_path)}, the time vector of the channels; store "
                            "the time as a numeric vector named 'time' next to them.")
        for name in (time_path, *names):
            if isinstance(handle[name], h5py.Dataset):
                check_samples(int(np.prod(handle[name].shape)), where, name)
        times = numeric(handle[time_path][()], where, time_path)
        vectors, units = [], []
        for name in names:
            node = handle[name]
            if not isinstance(node, h5py.Dataset) or node.attrs.get("MATLAB_class") in (b"struct", b"cell"):
                raise DataError(f"{where}: {excerpt(name)} is a struct or group, not a vector; save each "
                                "channel as a numeric vector of its own.")
            vectors.append(numeric(node[()], where, name))
            units.append(_matlab_unit(handle, name, h5py) if matlab else _attribute_unit(node))
        time_unit = _matlab_unit(handle, "time", h5py) if matlab else _attribute_unit(handle[time_path])
    return measurement_of(times, names, vectors, units, where, time_unit)


def _datasets(handle, h5py) -> list[str]:
    """Every dataset but the time vectors, by path."""
    names: list[str] = []

    def visit(name, node):
        if isinstance(node, h5py.Dataset) and name.rpartition("/")[2] != "time":
            names.append(name)

    handle.visititems(visit)
    return names


def _variables(handle, h5py) -> list[str]:
    """The top-level variables of a MAT v7.3 file but ``time`` and the ``NAME_unit`` texts."""
    return [name for name in handle
            if not name.startswith("#") and name != "time" and not name.endswith("_unit")]


def _attribute_unit(node) -> str:
    for key in ("unit", "units"):
        if key in node.attrs:
            value = node.attrs[key]
            value = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
            if isinstance(value, np.ndarray) and value.size == 1:
                value = value.item()
                value = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
            return str(value)
    return ""


def _matlab_unit(handle, name: str, h5py) -> str:
    """The MATLAB char variable ``NAME_unit`` (UTF-16 code units), "" if there is none."""
    node = handle.get(f"{name}_unit")
    if node is None or not isinstance(node, h5py.Dataset):
        return ""
    codes = np.asarray(node[()]).ravel()
    if codes.dtype.kind not in "iu":
        return ""
    return "".join(chr(int(c)) for c in codes)
