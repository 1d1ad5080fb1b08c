"""The system C compiler used for element checks, the native engine and FMU export."""

from __future__ import annotations

import os
import shutil

__all__ = ["c_compiler"]


def c_compiler() -> str | None:
    """``$CC``, else ``cc``, ``gcc`` or ``clang`` from the PATH; None if there is none."""
    for candidate in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None
