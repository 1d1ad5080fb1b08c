"""The system C (and C++) compiler used for element checks, the native engine and FMU export.

C++ is needed only for models whose Newton or initialization matrix is stored sparse
(:mod:`fmi_adjoint.sparsity`): their libraries link the sparse solver
(``native/runtime/fa_sparse.cpp``, compiled once into the build cache by
:mod:`fmi_adjoint.native.solver`).  Every other model builds with a C compiler alone.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

from .errors import CompilerError

__all__ = ["c_compiler", "compile_shared", "compiler_jobs", "compiler_message", "cxx_compiler", "parallel_jobs",
           "run_tool"]


def c_compiler() -> str | None:
    """``$CC``, else ``cc``, ``gcc`` or ``clang`` from the PATH; None if there is none."""
    for candidate in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


def cxx_compiler() -> str | None:
    """``$CXX``, else ``c++``, ``g++`` or ``clang++`` from the PATH; None if there is none."""
    for candidate in (os.environ.get("CXX"), "c++", "g++", "clang++"):
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


def run_tool(command: list[str], what: str, compiler: str) -> None:
    """Run a compiler, linker or archiver; CompilerError with its first diagnostic on failure."""
    _run(command, what, compiler)


def _run(command: list[str], what: str, compiler: str) -> None:
    try:
        proc = subprocess.run(command, capture_output=True, text=True, errors="replace")
    except OSError as exc:
        raise CompilerError(f"the C compiler could not run for {what} ({exc.strerror or exc}); check the "
                            "compiler installation.") from None
    if proc.returncode != 0:
        raise CompilerError(f"compiling {what} failed: {compiler_message(proc.stderr)}; check free space in the "
                            "temporary folder (TMPDIR) and the compiler installation.")


#: Compiler processes run at once, set by :func:`compiler_jobs` (``--jobs``); None: the CPU count.
_JOBS: contextvars.ContextVar[int | None] = contextvars.ContextVar("fmi_adjoint_compiler_jobs", default=None)


@contextlib.contextmanager
def compiler_jobs(jobs: int | None) -> Iterator[None]:
    """Run at most ``jobs`` compiler processes at once inside the block (``--jobs``; None: the
    CPU count).

    Raises
    ------
    CompilerError
        ``jobs`` below 1.
    """
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise CompilerError(f"--jobs {jobs!r}: give a whole number of at least 1 (default: the CPU count).")
    token = _JOBS.set(jobs)
    try:
        yield
    finally:
        _JOBS.reset(token)


def parallel_jobs() -> int:
    """Compiler processes to run at once: :func:`compiler_jobs`' value, else the CPU count."""
    return _JOBS.get() or os.cpu_count() or 1


def compile_shared(sources: Sequence[Path], library: Path, *, flags: Sequence[str] = (), optimize: str = "-O2",
                   what: str = "the generated C code", compiler: str | None = None,
                   archives: Sequence[Path] = (), linker: str | None = None,
                   link_flags: Sequence[str] = ()) -> None:
    """Compile C99 ``sources`` into the shared library ``library``.

    ``archives`` (static libraries, e.g. the cached sparse solver) are linked after the
    objects, by ``linker`` (default: the C compiler; the C++ compiler for C++ archives) with
    ``link_flags`` added to the link command.

    Each source is compiled by its own compiler process, in parallel (generated code is
    split into one file per function so that build time grows with the model, not with
    the square of one huge function), then the objects are linked.  Object files are
    written next to the library and removed; the result does not depend on the folder
    (no debug information), so equal inputs give bit-identical libraries.

    Raises
    ------
    CompilerError
        No C compiler, the compiler cannot run (e.g. a full disk), or the code does not
        compile; the message is one line with the compiler's first diagnostic.
    """
    compiler = compiler or c_compiler()
    if compiler is None:
        raise CompilerError("no C compiler found (tried $CC, cc, gcc, clang); install gcc or set CC.")
    common = [compiler, "-std=c99", optimize, "-fPIC", *flags]
    objects = [library.parent / f"{library.stem}.{k}.{Path(source).stem}.o" for k, source in enumerate(sources)]
    try:
        workers = max(1, min(len(sources), parallel_jobs()))
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            jobs = [pool.submit(_run, [*common, "-c", "-o", str(obj), str(src)], what, compiler)
                    for src, obj in zip(sources, objects)]
            try:
                for job in jobs:
                    job.result()
            except BaseException:  # a failed compile, Ctrl-C, SIGTERM: the queued compiles do not start
                for job in jobs:
                    job.cancel()
                raise
        _run([linker or compiler, "-shared", *[f for f in flags if not f.startswith(("-D", "-I"))], "-o",
              str(library), *map(str, objects), *map(str, archives), *link_flags, "-lm"], what, linker or compiler)
    finally:
        for obj in objects:
            obj.unlink(missing_ok=True)
