"""Which loop takes the steps of a Model Exchange run in the FMU's worker (issue 30, part 6).

* :class:`CompiledLoop` (the default): the plain steps in C, calling the FMU's functions directly
  (:mod:`.me_kernel`, :mod:`fmi_adjoint.integrate.radau_walk`); events, the event search, the
  sensitivities and every error in Python.
* :class:`PythonLoop`: every step in Python (:func:`~fmi_adjoint.integrate.radau.integrate_radau`),
  the reference the compiled loop is tested against.

The compiled loop's library (``integrate/fa_radau.c`` and ``fmu/fa_me_system.c``, C99 with libm) is
compiled once per C compiler and source into the build cache (kind ``"me_loop"``) and travels to
the worker with each request as ``(sha256, bytes)``: the bytes the cache checked are the bytes the
worker loads (:func:`.me_kernel.load_library`), wherever the worker runs.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import platform
import sysconfig
from pathlib import Path

from ..cache import BuildCache, compiler_fingerprint, fingerprint
from ..toolchain import c_compiler, compile_shared

__all__ = ["CompiledLoop", "PythonLoop", "loop_library"]

_SOURCES = (Path(__file__).resolve().parents[1] / "integrate" / "fa_radau.c",
            Path(__file__).resolve().with_name("fa_me_system.c"))
_LIBRARY = "fa_me_loop.so"
_FLAGS = ("-O2",)


@dataclasses.dataclass(frozen=True)
class CompiledLoop:
    """The plain steps of a Model Exchange run in compiled code (the default)."""

    def kernel(self) -> tuple[str, bytes]:
        """What the worker loads: ``(sha256, bytes)`` of the loop's library."""
        return loop_library(BuildCache.default())


@dataclasses.dataclass(frozen=True)
class PythonLoop:
    """Every step of a Model Exchange run in Python (the reference)."""

    def kernel(self) -> None:
        """No library: the worker runs :func:`~fmi_adjoint.integrate.radau.integrate_radau` alone."""
        return None


@functools.lru_cache(maxsize=4)
def loop_library(cache: BuildCache) -> tuple[str, bytes]:
    """``(sha256, bytes)`` of the loop's library in ``cache``, compiled on
    the first call for this C compiler and these sources.

    Raises
    ------
    CompilerError
        No C compiler, or the sources do not compile.
    """
    compiler = c_compiler()
    sources = hashlib.sha256(b"".join(path.read_bytes() for path in _SOURCES)).hexdigest()
    key = fingerprint("me_loop", compiler_fingerprint(compiler, _FLAGS) if compiler else "none", sources,
                      platform.machine(), sysconfig.get_platform())

    def build(folder: Path) -> None:
        compile_shared(_SOURCES, folder / _LIBRARY, optimize=_FLAGS[0], what="the compiled Model Exchange loop",
                       compiler=compiler)

    _, files = cache.read("me_loop", key, build, [_LIBRARY])
    data = files[_LIBRARY]
    return hashlib.sha256(data).hexdigest(), data
