"""Files in and out: outputs written atomically (a failure never leaves half a file) and
only onto regular files; inputs read only from regular files, with a bounded reader.

Why regular files only: an output path that is a symlink, FIFO, device node or socket
would be replaced by the rename of :func:`atomic_output` (as root, ``-o /dev/null`` would
replace ``/dev/null``), and an input that is a FIFO or a device blocks forever or never
ends (``/dev/zero``).  Sizes are checked before reading, and reading stops at the limit
plus one byte, because ``st_size`` of special files (``/proc``) says nothing.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .errors import OutputFileError

__all__ = ["OutputFileError", "atomic_output", "check_writable", "check_not_input", "decode_text", "file_kind",
           "read_regular", "same_file"]


def file_kind(mode: int) -> str:
    """What a ``st_mode`` describes, for messages ("a FIFO", "a folder", ...)."""
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISREG, "a regular file")):
        if test(mode):
            return name
    return "not a regular file"


def check_writable(path: str | os.PathLike) -> None:
    """Fail early (before long computations) if ``path`` cannot be written.

    An existing ``path`` must be a regular file (checked with ``lstat``: a symlink is
    refused, not followed), because the atomic rename replaces whatever is there.
    """
    if str(path).endswith(("/", os.sep)):  # Path() would drop the slash and write a file
        raise OutputFileError(f"cannot write {str(path)!r}: the name ends with '/', so it names a folder; give a "
                              "file name.")
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise OutputFileError(f"cannot write {str(target)!r}: the folder {str(folder)!r} does not exist; create it "
                              "first.")
    if not os.access(folder, os.W_OK):
        raise OutputFileError(f"cannot write {str(target)!r}: the folder {str(folder)!r} is not writable.")
    _check_regular_or_absent(target)


def _check_regular_or_absent(target: Path) -> None:
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise OutputFileError(f"cannot write {str(target)!r}: {exc.strerror or exc}; choose another file.") from None
    if stat.S_ISDIR(mode):
        raise OutputFileError(f"cannot write {str(target)!r}: it is a folder; give a file name.")
    if not stat.S_ISREG(mode):
        raise OutputFileError(
            f"cannot write {str(target)!r}: it is {file_kind(mode)}, which would be replaced; "
            "give the name of a regular file or of a file that does not exist yet."
        )


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two paths name one file: equal once resolved (symlinks, ``..``), or, for
    existing files, the same inode (:func:`os.path.samefile`: hard links)."""
    if Path(a).resolve() == Path(b).resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): not the same file
        return False


def check_not_input(output: str | os.PathLike, inputs: Iterable[tuple[str, str | os.PathLike | None]],
                    option: str = "-o") -> None:
    """Refuse an output that is one of the command's inputs (``(role, path)`` pairs; a
    ``None`` path is skipped), because writing the output would destroy the input."""
    for role, path in inputs:
        if path is not None and same_file(path, output):
            raise OutputFileError(
                f"{option} {str(output)!r} is the {role} {str(path)!r} of this command; writing it would overwrite "
                "the input: give another output file name."
            )


def decode_text(raw: bytes) -> str:
    """UTF-8 text with an optional byte-order mark removed (UnicodeDecodeError if not UTF-8).

    The built-in UTF-8 codec, not "utf-8-sig": that codec is imported on first use, which
    fails once the process can no longer read the standard library (e.g. after dropping
    privileges), and a BOM is all it adds.
    """
    return raw.decode("utf-8").removeprefix("\ufeff")


def read_regular(path: str | os.PathLike, limit: int, what: str, error: type[Exception]) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    ``error`` (a project error class) is raised, naming ``what`` the file is and the fix,
    if ``path`` is missing, not a regular file (FIFO, device, socket, folder), or larger
    than ``limit``.  The file is opened non-blocking (a FIFO swapped in after the check
    cannot block the open) and re-checked with ``fstat``; reading stops at ``limit + 1``
    bytes whatever the file claims its size is.
    """
    where = str(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise error(f"{where}: file not found; give the path of {what}.") from None
    except OSError as exc:
        raise error(f"{where}: cannot read it ({exc.strerror or exc}); give the path of {what}.") from None
    if stat.S_ISDIR(mode):
        raise error(f"{where}: file not found (it is a folder); give the path of {what}.")
    if not stat.S_ISREG(mode):
        raise error(f"{where}: it is {file_kind(mode)}, not a regular file; give the path of {what}.")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise error(f"{where}: cannot read it ({exc.strerror or exc}); give the path of {what}.") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{where}: it is {file_kind(info.st_mode)}, not a regular file; give the path of {what}.")
        too_large = error(f"{where}: the file is larger than {_size(limit)}; this is not {what} "
                          "(split or decimate it if it is).")
        if info.st_size > limit:
            raise too_large
        # The whole file in one read where it can (then no second copy is joined: a 490 MB
        # CSV cost 980 MB here, issue 31); reading goes on in chunks if the file grew.
        chunks, total = [], 0
        first = min(info.st_size + 1, limit + 1)
        while total <= limit:
            chunk = os.read(fd, min(max(first - total, 1 << 20), limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise too_large
        return b"".join(chunks)
    except OSError as exc:
        if isinstance(exc, error):
            raise
        raise error(f"{where}: cannot read it ({exc.strerror or exc}); give the path of {what}.") from None
    finally:
        os.close(fd)


def _size(limit: int) -> str:
    return f"{limit // 2**20} MiB" if limit >= 2**20 else f"{limit} bytes"


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, mode: str = "w") -> Iterator:
    """Open a temporary file next to ``path``; rename it onto ``path`` only on success.

    Raises
    ------
    OutputFileError
        If the folder does not exist or is not writable, or ``path`` exists and is not a
        regular file (checked again right before the rename).
    """
    target = Path(path)
    check_writable(target)
    folder = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=folder)
    except OSError as exc:
        raise OutputFileError(
            f"cannot write {str(target)!r}: {exc.strerror or exc}; choose a writable folder."
        ) from None
    try:
        os.chmod(tmp, 0o666 & ~_umask())
        text_options: dict[str, Any] = {} if "b" in mode else {"encoding": "utf-8", "newline": ""}
        with os.fdopen(fd, mode, **text_options) as handle:
            yield handle
        # The path may have changed while the output was computed.
        _check_regular_or_absent(target)
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, OutputFileError):
            raise OutputFileError(
                f"cannot write {str(target)!r}: {exc.strerror or exc}; free disk space or choose another folder."
            ) from None
        raise
