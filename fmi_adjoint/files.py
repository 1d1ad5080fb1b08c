"""Writing output files atomically, so that a failure never leaves half a file."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .errors import OutputFileError

__all__ = ["OutputFileError", "atomic_output", "check_writable"]

def check_writable(path: str | os.PathLike) -> None:
    """Fail early (before long computations) if ``path`` cannot be written."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise OutputFileError(f"cannot write {str(target)!r}: the folder {str(folder)!r} does not exist; create it first.")
    if not os.access(folder, os.W_OK):
        raise OutputFileError(f"cannot write {str(target)!r}: the folder {str(folder)!r} is not writable.")
    if target.is_dir():
        raise OutputFileError(f"cannot write {str(target)!r}: it is a folder; give a file name.")


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
        If the folder does not exist or is not writable.
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
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8", "newline": ""})) as handle:
            yield handle
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, OutputFileError):
            raise OutputFileError(
                f"cannot write {str(target)!r}: {exc.strerror or exc}; free disk space or choose another folder."
            ) from None
        raise
