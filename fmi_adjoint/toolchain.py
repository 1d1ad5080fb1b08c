"""The system C compiler used for element checks, the native engine and FMU export."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from .errors import CompilerError

__all__ = ["c_compiler", "compile_shared", "compiler_message"]


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


def compile_shared(sources: Sequence[Path], library: Path, *, flags: Sequence[str] = (), optimize: str = "-O2",
                   what: str = "the generated C code", compiler: str | None = None) -> None:
    """Compile C99 ``sources`` into the shared library ``library`` (the one compiler call).

    Raises
    ------
    CompilerError
        No C compiler, the compiler cannot run (e.g. a full disk), or the code does not
        compile; the message is one line with the compiler's first diagnostic.
    """
    compiler = compiler or c_compiler()
    if compiler is None:
        raise CompilerError("no C compiler found (tried $CC, cc, gcc, clang); install gcc or set CC.")
    command = [compiler, "-std=c99", optimize, "-shared", "-fPIC", *flags, "-o", str(library),
               *map(str, sources), "-lm"]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, errors="replace")
    except OSError as exc:
        raise CompilerError(f"the C compiler could not run for {what} ({exc.strerror or exc}); check the "
                            "compiler installation.") from None
    if proc.returncode != 0:
        raise CompilerError(f"compiling {what} failed: {compiler_message(proc.stderr)}; check free space in the "
                            "temporary folder (TMPDIR) and the compiler installation.")
