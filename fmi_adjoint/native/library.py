"""The native C engine: the model's generated C code and the runtime as a shared library.

:func:`build_native` writes the generated sources (:mod:`.model_code`) next to the runtime
(``fmi_adjoint/native/runtime``: the HHT engine the FMUs carry, the linear-algebra kernels and
the batch driver with the adjoint and sensitivity sweeps), compiles them (one compiler
process per file, in parallel) into the build cache and loads the library.
:class:`NativeLibrary` mirrors the driver's C functions one to one; the engine contract
on top of it is :class:`fmi_adjoint.engines.NativeEngine`.
"""

from __future__ import annotations

import ctypes
import dataclasses
import platform
import shutil
import sysconfig
from pathlib import Path
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ..cache import BuildCache, compiler_fingerprint, fingerprint
from ..compiled import (SECOND_INIT_ARGS, SECOND_STEP_ARGS, Derivation, SecondOrder, group_sizes, model_key)
from ..errors import CompilerError, ConvergenceError, FmiAdjointError, ModelError
from ..integrate.inputs import RunInputs, checked_parameters, checked_scheme
from ..integrate.schemes import AbstractScheme
from ..model import Model
from ..sparsity import storage_override
from ..toolchain import c_compiler, compile_shared
from .model_header import uses_sparse_solver
from .solver import IN_PROCESS_LINK_FLAGS, solver_key_part, sparse_solver

__all__ = ["RUNTIME_DIR", "NativeLibrary", "build_native", "find_c_compiler", "write_sources", "ENGINE_RUNTIME",
           "SPARSE_RUNTIME", "MatrixSizes"]

RUNTIME_DIR = Path(__file__).resolve().parent / "runtime"
#: Runtime files of the engine (FMUs add their FMI layer; the batch driver is in-process only).
ENGINE_RUNTIME = ("fa_engine.h", "fa_engine.c", "fa_linalg.h", "fa_linalg.c")
#: Added for a model with a matrix stored sparse (the solver itself is the cached archive of
#: :func:`fmi_adjoint.native.solver.sparse_solver`).
SPARSE_RUNTIME = ("fa_sparse.h",)
_DRIVER = "fa_driver.c"
_LIBRARY = "fa_native.so"
#: The functions Python calls: a cached library without them is a damaged entry (rebuilt).
_ENGINE_SYMBOLS = ("fa_sizes", "fa_engine_state_size", "fa_sensitivity_carry_size", "fa_simulate", "fa_run",
                   "fa_recompute", "fa_adjoint_segment", "fa_adjoint_initial", "fa_sensitivities_segment")
_OPTIMIZE = "-O2"
# FA_EXPORT_ALL keeps the engine's functions visible so tests can drive them directly.
_FLAGS = ("-DFA_EXPORT_ALL",)

_double_p = ctypes.POINTER(ctypes.c_double)
_int_p = ctypes.POINTER(ctypes.c_int)


def find_c_compiler() -> str:
    """The system C compiler (CompilerError naming the fix if there is none)."""
    compiler = c_compiler()
    if compiler is None:
        raise CompilerError("no C compiler found (tried $CC, cc, gcc, clang); install gcc or set CC.")
    return compiler


def write_sources(files: dict[str, str], folder: Path, runtime: tuple[str | Path, ...] = ENGINE_RUNTIME) -> list[Path]:
    """Write generated files and copy runtime files into ``folder``; returns the C sources.

    A runtime entry is a file name in :data:`RUNTIME_DIR` or a path (the export's FMI layer)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    names = []
    for entry in runtime:
        source = RUNTIME_DIR / entry if isinstance(entry, str) else Path(entry)
        shutil.copy(source, folder / source.name)
        names.append(source.name)
    return sorted(folder / name for name in (*files, *names) if name.endswith(".c"))


class MatrixSizes(NamedTuple):
    """The factorization's size of one matrix of the C engine (issue 24, part 4).

    ``factor_entries``: stored entries of the factors (dense ``n^2``, band its storage,
    sparse the non-zeros of L and U); ``bytes``: memory the matrix holds (storage, pivots,
    work vector, and for sparse storage the solver's pattern, matrix copy and factors)."""

    factor_entries: int
    bytes: int


class NativeRun(NamedTuple):
    """What ``fa_run`` returns: the states (empty for a checkpointed run), the outputs of
    every step, the checkpoint states (``None`` for a stored run), the consistent initial
    ``z``, the Newton iterations of each step and of the initialization, the factorizations."""

    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    lam: np.ndarray
    y: np.ndarray
    checkpoints: np.ndarray | None
    z0: np.ndarray
    iterations: np.ndarray
    init_iterations: int
    factorizations: int


def _pointer(array: np.ndarray):
    return array.ctypes.data_as(_double_p)


def _optional_pointer(array: np.ndarray | None):
    """A NULL pointer for ``None`` (the C function's optional arguments)."""
    return _double_p() if array is None else _pointer(array)


def _scheme_args(solver: AbstractScheme) -> tuple:
    """``(scheme code, its parameter)`` as the C functions take them (``fa_scheme_coefficients``)."""
    return ctypes.c_int(solver.code), ctypes.c_double(solver.parameter)


def _rows(array: np.ndarray) -> np.ndarray:
    """A float64 C-contiguous view (a copy only where the layout needs one: the Python
    engine's ``a`` and ``lam`` are column slices of one array)."""
    return np.ascontiguousarray(array, dtype=float)


@dataclasses.dataclass(frozen=True, eq=False)
class NativeLibrary:
    """A loaded native engine of one model; the functions of ``fa_driver.c``.

    Nothing is validated here (issue 29: one place validates engine inputs).  The engine
    front door (:class:`fmi_adjoint.engines.NativeEngine`) hands a checked
    :class:`~fmi_adjoint.integrate.inputs.RunInputs` (parameters, scheme, grid) and arrays it
    sized from this library's ``n, m, n_p, n_y`` and a trajectory whose shapes its
    constructor checked; the C code trusts them in turn.  The methods for callers with raw
    values (:meth:`simulate`, :meth:`run`, :meth:`run_checkpointed`, :meth:`matrix_sizes`:
    tests and benchmarks) make that value first, with the same check (:meth:`inputs`).
    """

    model: Model
    library: ctypes.CDLL
    folder: Path
    n: int
    m: int
    n_p: int
    n_y: int
    state_size: int

    # -- raw values in: the front door's check, then the trusted calls -------------------------
    def _parameters(self, p: np.ndarray | None, *, finite: bool = True) -> np.ndarray:
        if p is None:
            return np.array([par.value for par in self.model.all_parameters], dtype=float)
        return checked_parameters(p, tuple(par.name for par in self.model.all_parameters), self.model.name,
                                  finite=finite)

    def inputs(self, grid: np.ndarray, p: np.ndarray | None, solver: AbstractScheme) -> RunInputs:
        """The checked :class:`RunInputs` of raw values (``p`` None: the model's values)."""
        return RunInputs.checked(self._parameters(p), solver, grid,
                                 parameter_names=tuple(par.name for par in self.model.all_parameters),
                                 model_name=self.model.name)

    def simulate(self, p: np.ndarray | None = None, *, t_end: float, step: float, solver: AbstractScheme,
                 t0: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Fixed-step run as an FMU does it; returns step times and outputs ``(N+1, n_y)``.

        ``t_end - t0`` must be a whole number of steps (the FMU's communication grid).  The
        solver's scheme, constant and ``rtol`` are used; like an FMU, the run takes the default
        ``max_iterations``, and the C engine reports non-finite parameter values (as a
        ConvergenceError).  The run takes full Newton whatever ``solver.reuse_jacobian`` says: an
        FMU exported with modified Newton (``--newton modified`` or the model's ``[simulation]
        newton``) differs from it by the Newton tolerance times the contraction.
        """
        n_steps = int(round((t_end - t0) / step))
        if n_steps < 1 or abs(n_steps * step - (t_end - t0)) > 1e-9 * step * n_steps:
            raise ModelError(f"t_end - t0 = {t_end - t0} is not a whole number of steps h = {step}; give a "
                             "t_end on the communication grid.")
        solver = checked_scheme(solver)
        y = np.zeros((n_steps + 1, self.n_y))
        message = ctypes.create_string_buffer(512)
        status = self.library.fa_simulate(
            ctypes.c_double(t0), ctypes.c_double(step), *_scheme_args(solver), ctypes.c_double(solver.rtol),
            ctypes.c_long(n_steps), _pointer(self._parameters(p, finite=False)), _pointer(y), message,
            ctypes.c_int(512),
        )
        if status != 0:
            raise ConvergenceError(message.value.decode(errors="replace") or "the C engine failed")
        return t0 + step * np.arange(n_steps + 1, dtype=float), y

    def run(self, grid: np.ndarray, p: np.ndarray | None, solver: AbstractScheme) -> NativeRun:
        """:meth:`forward` of raw values, storing the states of every step."""
        return self.forward(self.inputs(grid, p, solver))

    def run_checkpointed(self, grid: np.ndarray, p: np.ndarray | None, solver: AbstractScheme,
                         every: int) -> tuple[np.ndarray, np.ndarray, NativeRun]:
        """:meth:`forward` of raw values with a checkpoint every ``every`` steps:
        ``(outputs, checkpoint states, the run)``."""
        if not (int(every) == every >= 1):
            raise ModelError(f"every = {every!r} must be a whole number of steps >= 1.")
        run = self.forward(self.inputs(grid, p, solver), every=int(every))
        assert run.checkpoints is not None
        return run.y, run.checkpoints, run

    def matrix_sizes(self, *, step: float, n_steps: int = 1, p: np.ndarray | None = None,
                     initialization: bool = False) -> MatrixSizes:
        """The size of the Newton matrix's factorization (``initialization``: of the
        initialization matrix) after a run of ``n_steps`` steps of ``step`` from t = 0
        (``fa_matrix_sizes``)."""
        sizes = (ctypes.c_long * 2)()
        self._call("fa_matrix_sizes", ctypes.c_double(0.0), ctypes.c_double(step), ctypes.c_long(n_steps),
                   _pointer(self._parameters(p)), ctypes.c_int(int(initialization)), sizes, what="C engine")
        return MatrixSizes(int(sizes[0]), int(sizes[1]))

    # -- checked values in: trusted ----------------------------------------------------------------
    def _call(self, function: str, *args, what: str) -> None:
        message = ctypes.create_string_buffer(1024)
        status = getattr(self.library, function)(*args, message, ctypes.c_int(1024))
        if status != 0:
            raise ConvergenceError(message.value.decode(errors="replace") or f"the {what} failed")

    def forward(self, run: RunInputs, *, every: int = 0) -> NativeRun:
        """Forward run (``fa_run``): with ``every = 0`` the states of every step, with
        ``every >= 1`` a checkpoint of the engine state every ``every`` steps instead; the
        outputs of every step always (computed by the C code)."""
        N = run.n_steps
        rows = N + 1 if every == 0 else 0
        Q, V, A = (np.zeros((rows, self.n)) for _ in range(3))
        L = np.zeros((rows, self.m))
        Y = np.zeros((N + 1, self.n_y))
        states = np.zeros((N // every + 1, self.state_size)) if every else None
        z0 = np.zeros(3 * self.n + 3 * self.m)
        iterations = np.zeros(max(N, 1), dtype=np.int32)
        init_iterations = ctypes.c_int(0)
        factorizations = ctypes.c_long(0)
        stored = every == 0
        solver = run.scheme
        self._call("fa_run", _pointer(run.grid), ctypes.c_long(N), *_scheme_args(solver),
                   ctypes.c_double(solver.rtol), ctypes.c_int(solver.max_iterations),
                   ctypes.c_int(int(solver.reuse_jacobian)), _pointer(run.p), ctypes.c_long(every),
                   *((_pointer(x) if stored else None) for x in (Q, V, A, L)), _pointer(Y), _optional_pointer(states),
                   _pointer(z0), iterations.ctypes.data_as(_int_p), ctypes.byref(init_iterations),
                   ctypes.byref(factorizations), what="C engine")
        return NativeRun(Q, V, A, L, Y, states, z0, iterations[:N], init_iterations.value, factorizations.value)

    def recompute(self, grid: np.ndarray, i0: int, i1: int, state: np.ndarray) -> tuple[np.ndarray, ...]:
        """``(q, v, a, lam)`` of the steps ``i0..i1`` recomputed from the checkpoint ``state``
        of step ``i0`` (bit for bit the stored run's).  The C code checks the state (FMUs
        restore states too)."""
        rows = i1 - i0 + 1
        Q, V, A = (np.zeros((rows, self.n)) for _ in range(3))
        L = np.zeros((rows, self.m))
        self._call("fa_recompute", _pointer(_rows(grid)), ctypes.c_long(i0),
                   ctypes.c_long(i1), _pointer(_rows(state)), _pointer(Q), _pointer(V),
                   _pointer(A), _pointer(L), what="recomputation of a segment")
        return Q, V, A, L

    def adjoint_segment(self, run: RunInputs, i_lo: int, i_hi: int, states: tuple[np.ndarray, ...],
                        ybar: np.ndarray, carry: np.ndarray, w0: np.ndarray, gradient: np.ndarray,
                        xbar: np.ndarray | None = None, mu_out: np.ndarray | None = None) -> int:
        """Adjoint sweep over the steps ``i_hi..i_lo`` of ``run`` (``fa_adjoint_segment``);
        ``states`` (``q, v, a, lam``) and ``ybar`` (``dJ/dY``, ``n_y`` per row) hold those
        rows; ``carry`` (``1 + 4n``), ``w0`` (``3n + m``) and ``gradient`` (``n_p``) are
        updated in place.  Optional: ``xbar``, explicit ``dJ/d(q, v, a, lambda)`` of those
        rows (added to the output terms), and ``mu_out``, filled with ``(mu3, mu4)`` of every
        row.  After a modified-Newton run (``run.scheme.reuse_jacobian``) the transposed solves
        are refined with an earlier step's factors.  Returns the Newton matrices factored."""
        q, v, a, lam = (_rows(x) for x in states)
        factorizations = ctypes.c_long(0)
        self._call("fa_adjoint_segment", _pointer(run.grid), ctypes.c_long(i_lo), ctypes.c_long(i_hi),
                   *_scheme_args(run.scheme), ctypes.c_int(int(run.scheme.reuse_jacobian)), _pointer(run.p),
                   _pointer(q), _pointer(v), _pointer(a), _pointer(lam),
                   _pointer(_rows(ybar)), _optional_pointer(None if xbar is None else _rows(xbar)), _pointer(carry),
                   _pointer(w0), _pointer(gradient), _optional_pointer(mu_out), ctypes.byref(factorizations),
                   what="adjoint sweep")
        return int(factorizations.value)

    def adjoint_initial(self, run: RunInputs, z0: np.ndarray, w0: np.ndarray, gradient: np.ndarray) -> None:
        """The initial state's term of the gradient (``fa_adjoint_initial``), in place."""
        self._call("fa_adjoint_initial", _pointer(_rows(z0)), ctypes.c_double(run.grid[0]),
                   _pointer(run.p), _pointer(w0), _pointer(gradient), what="adjoint sweep")

    def sensitivity_carry(self, n_params: int) -> np.ndarray:
        """A zero carry for ``fa_sensitivities_segment`` with ``n_params`` columns."""
        return np.zeros(int(self.library.fa_sensitivity_carry_size(ctypes.c_int(n_params))))

    def sensitivities_segment(self, run: RunInputs, i_lo: int, i_hi: int, states: tuple[np.ndarray, ...],
                              z0: np.ndarray, params: np.ndarray, needed: np.ndarray, carry: np.ndarray,
                              states_out: np.ndarray | None = None) -> np.ndarray:
        """``dY/dp[:, params]`` at the needed steps of ``i_lo..i_hi`` (``fa_sensitivities_segment``),
        shape ``(needed[i_lo:i_hi+1].sum(), n_y, len(params))``; ``params``: distinct indices
        (the front door's :meth:`~fmi_adjoint.engines.AbstractEngine.output_sensitivities`
        checks them), ``needed``: a uint8 mask of the grid, ``carry`` (:meth:`sensitivity_carry`)
        is updated in place.  ``states_out`` (optional, ``(rows, 3n+m, len(params))``)
        receives the state sensitivities ``(dq, dv, da, dlambda)/dp`` of every row."""
        q, v, a, lam = (_rows(x) for x in states)
        params = np.ascontiguousarray(params, dtype=np.int32)
        dY = np.zeros((int(needed[i_lo:i_hi + 1].sum()), self.n_y, len(params)))
        self._call("fa_sensitivities_segment", _pointer(run.grid), ctypes.c_long(i_lo), ctypes.c_long(i_hi),
                   *_scheme_args(run.scheme), _pointer(run.p), _pointer(q), _pointer(v), _pointer(a), _pointer(lam),
                   _pointer(_rows(z0)), ctypes.c_int(len(params)),
                   params.ctypes.data_as(_int_p), needed.ctypes.data_as(ctypes.POINTER(ctypes.c_ubyte)),
                   _pointer(carry), _pointer(dY), _optional_pointer(states_out), what="sensitivity sweep")
        return dY


def native_key(model: Model, compiler: str) -> str:
    """Build-cache key of the native library: the model's key, the compiler and flags, the
    machine (a home folder may be shared by machines of different architectures), the matrix
    storage forced by ``$FMI_ADJOINT_MATRIX_STORAGE`` and the sparse solver it may link."""
    forced = storage_override()
    return fingerprint("native", model_key(model), compiler_fingerprint(compiler, [_OPTIMIZE, *_FLAGS]),
                       platform.machine(), sysconfig.get_platform(), "storage", forced.name if forced else "auto",
                       solver_key_part())


def build_native(model: Model, *, cache: BuildCache | None = None,
                 derivation: Derivation | None = None, second_order: bool = False) -> NativeLibrary:
    """Generate, compile (through the build cache) and load the native engine of ``model``.

    ``second_order``: the library also carries the second-order functions
    (:func:`fmi_adjoint.compiled.second_order_table`, for optimal input design) and their
    batch drivers; :func:`native_second_order` wraps them.

    Raises
    ------
    CompilerError
        If no C compiler is found or compilation fails (the compiler's message is included).
    ModelError
        A numeric element without C code.
    """
    compiler = find_c_compiler()  # before any work: no compiler is the one error then
    derivation = derivation or Derivation(model)
    cache = cache or BuildCache.default()

    def build(folder: Path) -> None:
        from .sources import model_c_sources  # the code generators (sympy): only a build needs them

        generated = model_c_sources(derivation, defaults=False, second_order=second_order, cache=cache)
        # A matrix stored sparse links the solver compiled once into the cache (C++).
        solver = sparse_solver(cache, what=f"model '{model.name}'") if uses_sparse_solver(generated) else None
        runtime = ENGINE_RUNTIME + (_DRIVER,) + (SPARSE_RUNTIME if solver else ())
        sources = write_sources(generated, folder / "src", runtime)
        compile_shared(sources, folder / _LIBRARY, flags=_FLAGS, optimize=_OPTIMIZE,
                       what=f"the C engine of '{model.name}'", compiler=compiler,
                       archives=(solver.archive,) if solver else (), linker=solver.compiler if solver else None,
                       link_flags=IN_PROCESS_LINK_FLAGS if solver else ())
        shutil.rmtree(folder / "src")

    try:
        key = native_key(model, compiler)
        # Loaded through the descriptor its owner, mode and checksum were checked on.
        entry, dll = cache.load_library("native", fingerprint(key, "second order") if second_order else key, build,
                                        _LIBRARY, symbols=_ENGINE_SYMBOLS)
    except FmiAdjointError:
        raise
    except OSError as exc:
        raise CompilerError(f"building or loading the C engine of '{model.name}' failed "
                            f"({getattr(exc, 'strerror', None) or exc}); free space in the cache folder "
                            "(FMI_ADJOINT_CACHE) or run 'fmi-adjoint cache clear'.") from None
    dll.fa_sensitivity_carry_size.restype = ctypes.c_long
    dll.fa_engine_state_size.restype = ctypes.c_size_t
    sizes = (ctypes.c_int * 4)()
    dll.fa_sizes(sizes)
    return NativeLibrary(model, dll, entry, sizes[0], sizes[1], sizes[2], sizes[3], int(dll.fa_engine_state_size()))


def native_second_order(library: NativeLibrary) -> SecondOrder:
    """The second-order functions of a library built with ``second_order=True``, with the
    calling convention of the numpy ones (:class:`fmi_adjoint.compiled.SecondOrder`:
    arguments broadcast over leading batch axes, ``t`` giving the batch shape)."""
    d = library.library
    sizes = group_sizes(library.n, library.m, library.n_y, library.n_p)

    def batched(name: str, groups: tuple[str, ...], outputs: tuple[int, ...]) -> Callable[..., tuple[np.ndarray, ...]]:
        try:
            function = getattr(d, f"fa_{name}_batch")
        except AttributeError:
            raise FmiAdjointError(f"native engine of '{library.model.name}': built without the second-order "
                                  "functions; build it with build_native(..., second_order=True).") from None

        def call(*args: np.ndarray) -> tuple[np.ndarray, ...]:
            named = dict(zip(groups, args))
            shape = np.shape(named["t"])
            count = int(np.prod(shape))
            arrays = []
            for group in groups:
                value = np.asarray(named[group], dtype=float)
                if group == "p":
                    arrays.append(np.ascontiguousarray(value))
                    if value.shape != (library.n_p,):
                        raise FmiAdjointError(f"native engine: p has shape {value.shape}; the model needs "
                                              f"({library.n_p},).")
                elif group == "t":
                    arrays.append(np.ascontiguousarray(np.broadcast_to(value, shape).reshape(count)))
                else:
                    full = np.broadcast_to(value, shape + (sizes[group],))
                    arrays.append(np.ascontiguousarray(full.reshape(count, sizes[group])))
            results = [np.zeros((count, size)) for size in outputs]
            function(ctypes.c_long(count), *(_pointer(a) for a in arrays), *(_pointer(r) for r in results))
            return tuple(r.reshape(shape + (r.shape[1],)) for r in results)

        return call

    return SecondOrder(
        step_second=batched("step_second", SECOND_STEP_ARGS,
                            (sizes["q"], sizes["v"], sizes["a"], sizes["lam"], sizes["p"])),
        init_second=batched("init_second", SECOND_INIT_ARGS, (sizes["dz"], sizes["p"])))
