"""ASAM MDF 3 and 4 files (``.mdf``, ``.mf4``, ``.dat`` of test benches) through asammdf.

Only the selected channels are read: asammdf reads the file's blocks of metadata when it
opens it and a channel's samples when they are asked for (``MDF.select``), so a file of
several GB costs the memory of the channels used.  Each channel comes with its own time base
(its channel group's master channel); the channels of one experiment must share one (channels
of several rates: select them from one group, or resample them into one before).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..data import Measurement
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

__all__ = ["MdfFormat"]

#: The identification block of MDF 3 and 4 (finalized and unfinalized files).
_MAGIC = (b"MDF     ", b"UnFinMF ")


class MdfFormat(AbstractFormat):
    """MDF 3/4 (magic bytes ``MDF     `` or ``UnFinMF ``)."""

    name = "mdf"
    suffixes = (".mf4", ".mdf", ".mf3")

    @classmethod
    def matches(cls, head: bytes, suffix: str) -> bool:
        return head[:8] in _MAGIC

    @classmethod
    def read(cls, path: Path, channels: Sequence[str] | None, *, present_only: bool = False) -> Measurement:
        where = str(path)
        check_regular(path, "an MDF file")
        asammdf = require("asammdf", "MDF files")
        # asammdf logs recoverable oddities of a file; messages here come only from fmi-adjoint.
        logging.getLogger("asammdf").setLevel(logging.ERROR)
        try:
            mdf = asammdf.MDF(where)
        except DataError:
            raise
        except Exception as exc:  # noqa: BLE001 (asammdf raises many kinds for a damaged file)
            raise DataError(f"{where}: not a readable MDF file ({type(exc).__name__}: {excerpt(str(exc))}); "
                            "export it again from the test bench's software.") from None
        try:
            masters = {mdf.groups[g].channels[i].name for g, i in mdf.masters_db.items()}
            available = [name for name in mdf.channels_db if name not in masters]
            names = check_channels(available, channels, where, present_only)
            if not names:
                raise DataError(f"{where}: no channel besides the time; record the measured channels.")
            for name in names:
                if len(mdf.channels_db[name]) > 1:
                    raise DataError(f"{where}: the channel name {excerpt(name)} occurs in "
                                    f"{len(mdf.channels_db[name])} channel groups; rename it in the file.")
                group = mdf.channels_db[name][0][0]
                check_samples(int(mdf.groups[group].channel_group.cycles_nr), where, name)
            try:
                signals = mdf.select(names)
            except Exception as exc:  # noqa: BLE001
                raise DataError(f"{where}: the channels cannot be read ({type(exc).__name__}: "
                                f"{excerpt(str(exc))}); export the file again.") from None
        finally:
            mdf.close()
        times = np.asarray(signals[0].timestamps, dtype=float)
        for name, signal in zip(names[1:], signals[1:]):
            other = np.asarray(signal.timestamps, dtype=float)
            if other.shape != times.shape or not np.array_equal(other, times):
                raise DataError(f"{where}: the channels {excerpt(names[0])} and {excerpt(name)} have different "
                                "time bases (channel groups of different rates); compare channels of one rate "
                                "per experiment.")
        vectors = [numeric(signal.samples, where, name) for name, signal in zip(names, signals)]
        return measurement_of(times, names, vectors, [str(s.unit or "") for s in signals], where, "s")

