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


def compiler_message(stderr: str, limit: int = 300) -> str:
    """The first diagnostic of a compiler's output as one line (for a one-line error).

    The first line mentioning ``error`` (else the first non-empty line), with control
    characters replaced and capped at ``limit`` characters; the full output belongs in a log.
    """
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    chosen = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "no message")
    chosen = "".join(ch if ch.isprintable() else "?" for ch in chosen)
    return chosen if len(chosen) <= limit else chosen[: limit - 3] + "..."
