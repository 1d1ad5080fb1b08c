"""The C engine of exported FMUs, built as a shared library and driven in-process.

:func:`build_native` writes the model's generated C code next to the runtime sources,
compiles them with the system C compiler and returns a :class:`NativeModel` whose
:meth:`~NativeModel.simulate` runs the C HHT engine.  Tests and benchmarks compare it
with :func:`fmi_adjoint.integrate.simulate`: both print the same derivatives and run the
same algorithm.
"""

from __future__ import annotations

import ctypes
import dataclasses
import shutil
import tempfile
import weakref
from pathlib import Path

import numpy as np

from ..compiled import differentiate
from ..errors import CompilerError, ConvergenceError, FmiAdjointError
from ..model import Model
from ..toolchain import c_compiler, compile_shared
from .model_code import model_c_sources

__all__ = ["RUNTIME_DIR", "CompilerError", "NativeModel", "build_native", "write_sources", "find_c_compiler"]

RUNTIME_DIR = Path(__file__).resolve().parent / "runtime"


def find_c_compiler() -> str:
    """The system C compiler (CompilerError naming the fix if there is none)."""
    compiler = c_compiler()
    if compiler is None:
        raise CompilerError("no C compiler found (tried $CC, cc, gcc, clang); install gcc or set CC.")
    return compiler


def write_sources(model: Model, folder: Path) -> list[Path]:
    """Write ``model.h``, ``model.c`` and the runtime sources into ``folder``."""
    header, source = model_c_sources(differentiate(model))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.h").write_text(header)
    (folder / "model.c").write_text(source)
    files = [folder / "model.c"]
    for name in ("fa_engine.h", "fa_engine.c", "fa_driver.c"):
        shutil.copy(RUNTIME_DIR / name, folder / name)
        if name.endswith(".c"):
            files.append(folder / name)
    return files


@dataclasses.dataclass(frozen=True, eq=False)
class NativeModel:
    """A compiled C engine for one model; its build folder is removed with the object."""

    model: Model
    library: ctypes.CDLL
    folder: Path
    n: int
    m: int
    n_p: int
    n_y: int

    def simulate(self, p: np.ndarray | None = None, *, t_end: float, step: float, alpha: float,
                 t0: float = 0.0, rtol: float = 1e-10) -> tuple[np.ndarray, np.ndarray]:
        """Run the C engine; returns step times and outputs ``(N+1, n_y)``.

        ``t_end - t0`` must be a whole number of steps (the FMU's communication grid).
        """
        n_steps = int(round((t_end - t0) / step))
        if n_steps < 1 or abs(n_steps * step - (t_end - t0)) > 1e-9 * step * n_steps:
            raise FmiAdjointError(f"t_end - t0 = {t_end - t0} is not a whole number of steps h = {step}.")
        y = np.zeros((n_steps + 1, self.n_y))
        message = ctypes.create_string_buffer(512)
        ptr = ctypes.POINTER(ctypes.c_double)
        params = None if p is None else np.ascontiguousarray(p, dtype=float).ctypes.data_as(ptr)
        status = self.library.fa_simulate(
            ctypes.c_double(t0), ctypes.c_double(step), ctypes.c_double(alpha), ctypes.c_double(rtol),
            ctypes.c_long(n_steps), params,
            y.ctypes.data_as(ptr), message, ctypes.c_int(512),
        )
        if status != 0:
            raise ConvergenceError(message.value.decode() or "the C engine failed")
        return t0 + step * np.arange(n_steps + 1, dtype=float), y


def build_native(model: Model, optimize: str = "-O2") -> NativeModel:
    """Generate, compile and load the C engine of ``model``.

    Raises
    ------
    CompilerError
        If no C compiler is found or compilation fails (the compiler's message is included).
    """
    find_c_compiler()  # before any work: no compiler is the one error then
    try:
        path = Path(tempfile.mkdtemp(prefix="fmi_adjoint_native_"))
    except OSError as exc:
        raise CompilerError(f"cannot create a build folder for the C engine ({exc.strerror or exc}); "
                            "free space in the temporary folder or point TMPDIR elsewhere.") from None
    # Interrupted or failed anywhere before the finalizer owns it, the folder is removed.
    try:
        sources = write_sources(model, path)
        library = path / "fa_native.so"
        # FA_EXPORT_ALL keeps the engine's functions visible so tests can drive them directly.
        compile_shared(sources, library, flags=["-DFA_EXPORT_ALL"], optimize=optimize,
                       what=f"the C engine of '{model.name}'")
        dll = ctypes.CDLL(str(library))
        sizes = (ctypes.c_int * 4)()
        dll.fa_sizes(sizes)
        native = NativeModel(model, dll, path, *sizes)
        # The loaded library stays mapped after its file is removed (POSIX).
        weakref.finalize(native, shutil.rmtree, path, True)
    except OSError as exc:
        shutil.rmtree(path, ignore_errors=True)
        raise CompilerError(f"building the C engine of '{model.name}' failed ({exc.strerror or exc}); free space "
                            "in the temporary folder or point TMPDIR elsewhere.") from None
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return native
