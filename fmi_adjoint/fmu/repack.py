"""A changed copy of a checked FMU: the same entries, names, order, timestamps, compression and
attributes, with some entries replaced, dropped or added (the hand-back of
:mod:`.start_values` and :mod:`.rebuild`)."""

from __future__ import annotations

import shutil
import zipfile
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import BinaryIO

from ..errors import FmuError
from .archive import FmuArchive

__all__ = ["check_not_the_input", "write_fmu_entries"]


def write_fmu_entries(archive: FmuArchive, handle: BinaryIO, replacements: Mapping[str, bytes], *,
                      dropped: Collection[str] = (), added: Mapping[str, bytes] | None = None) -> None:
    """Write the entries of ``archive`` as a zip into ``handle``: the entries named in
    ``replacements`` with those bytes, the files named in ``dropped`` left out, every other
    one byte for byte; the same names, order, timestamps, compression and attributes.  The
    new files ``added`` come last (deflated, mode 0644, the model description's timestamp).

    The copy is made from the checked extraction (``archive.entries`` in
    ``archive.directory``), never by reading the ``.fmu`` again: :func:`open_fmu` already
    bounded every entry's size, the entries are streamed file to zip (memory stays one
    buffer, whatever an entry's header claims), and the bytes written are the bytes checked.
    """
    names = {entry.name for entry in archive.entries if not entry.is_dir}
    added = dict(added or {})
    unknown = sorted((set(replacements) | set(dropped)) - names)
    if unknown or set(added) & names:
        raise FmuError(f"internal error: {archive.path.name} has no entries {unknown} to replace or drop, or has "
                       f"{sorted(set(added) & names)} already.")
    stamp = next((e.date_time for e in archive.entries if e.name == "modelDescription.xml"), (1980, 1, 1, 0, 0, 0))
    with zipfile.ZipFile(handle, "w") as target_zip:
        for entry in archive.entries:
            if entry.name in dropped and not entry.is_dir:
                continue
            info = zipfile.ZipInfo(entry.name + "/" if entry.is_dir else entry.name, date_time=entry.date_time)
            info.compress_type = entry.compress_type
            # The attributes mean what they meant in the original only with its system and
            # versions (DOS attributes of a Windows-made entry are no Unix mode).
            info.external_attr = entry.external_attr
            info.create_system, info.create_version = entry.create_system, entry.create_version
            info.extract_version = entry.extract_version
            info.extra, info.comment = entry.extra, entry.comment
            if entry.is_dir or entry.name in replacements:
                target_zip.writestr(info, b"" if entry.is_dir else replacements[entry.name])
                continue
            with open(archive.directory / entry.name, "rb") as source, target_zip.open(info, "w") as sink:
                shutil.copyfileobj(source, sink)
        for name, data in added.items():
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.compress_type, info.external_attr = zipfile.ZIP_DEFLATED, 0o100644 << 16
            target_zip.writestr(info, data)


def check_not_the_input(archive: FmuArchive, output) -> None:
    """FmuError if ``output`` is the FMU being read."""
    if Path(output).resolve() == archive.path.resolve():
        raise FmuError(f"-o {output}: refusing to overwrite the input FMU; give another file name.")
