"""A Model Exchange FMU as the compiled system of Radau IIA's plain steps (issue 30, part 6).

In the FMU's worker, next to the binary: ``fa_me_system.c`` (next to this file) calls the FMU's C
functions directly, through the addresses fmpy's loader resolved, for everything a step without
an event needs (:mod:`.me_integration`'s ``rhs``, ``jacobian``, ``indicators``, ``accepted`` and
``completed_step``, with the same calls in the same order), and ``fa_radau.c``
(:mod:`fmi_adjoint.integrate.radau_walk`) takes those steps; the sensitivities' replays of the
steps between events run here too (:meth:`FmuKernel.replay`).  Events, the event search, the
sensitivities' algebra and every error stay in Python (:mod:`.me_integration`, :mod:`.me_run`,
:mod:`.me_sensitivities`).  An FMI call that fails in C is recorded there and raised here as the
worker's error for that call, without calling the FMU again.

The library is compiled by the parent (:mod:`.me_loop`, the build cache) and sent with the
request as bytes; the worker loads it from an anonymous in-memory file (``memfd_create``), so no
file of it exists that another process could swap.

:class:`FmuKernel` keeps the C structure in step with the Python system: before each call the
state columns' sources, whether the output columns are used and whether a state event was just
handled; after it the same back, the stage Jacobians of the accepted steps (``StepPartials``),
the FMU calls (the worker's counter, advanced by C) and the columns used (``ColumnCalls``).
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
from collections.abc import Sequence

import numpy as np

from ..integrate.radau import RADAU_C, RadauRun, RadauStep
from ..integrate.radau_walk import CompiledWalk, FaOde, pointer
from .me_integration import FmuOdeSystem, StepPartials
from .worker import PROBE_STEP

__all__ = ["FmuKernel", "compiled_walk", "load_library"]

_double_p = ctypes.POINTER(ctypes.c_double)
_long_p = ctypes.POINTER(ctypes.c_long)
_vr_p = ctypes.POINTER(ctypes.c_uint)

#: The FMI functions the loop calls, per version: (field of fa_fmu, exported name).
_FUNCTIONS = {
    2: (("set_time", "fmi2SetTime"), ("set_states", "fmi2SetContinuousStates"),
        ("get_derivatives", "fmi2GetDerivatives"), ("set_real", "fmi2SetReal"), ("get_real", "fmi2GetReal"),
        ("get_indicators", "fmi2GetEventIndicators"), ("completed", "fmi2CompletedIntegratorStep"),
        ("directional", "fmi2GetDirectionalDerivative")),
    3: (("set_time", "fmi3SetTime"), ("set_states", "fmi3SetContinuousStates"),
        ("get_derivatives", "fmi3GetContinuousStateDerivatives"), ("set_real", "fmi3SetFloat64"),
        ("get_real", "fmi3GetFloat64"), ("get_indicators", "fmi3GetEventIndicators"),
        ("completed", "fmi3CompletedIntegratorStep"), ("directional", "fmi3GetDirectionalDerivative")),
}

_LOADED: dict[str, ctypes.CDLL] = {}


class FaFmu(ctypes.Structure):
    """``fa_fmu`` of fa_me_system.c (the same fields in the same order)."""

    _fields_ = [
        ("fmi3", ctypes.c_long), ("component", ctypes.c_void_p),
        *((name, ctypes.c_void_p) for name, _ in _FUNCTIONS[2]),
        ("n", ctypes.c_long), ("n_indicators", ctypes.c_long), ("n_inputs", ctypes.c_long),
        ("n_outputs", ctypes.c_long),
        ("state_refs", _vr_p), ("derivative_refs", _vr_p), ("input_refs", _vr_p), ("output_refs", _vr_p),
        ("n_input_times", ctypes.c_long), ("input_times", _double_p), ("input_table", _double_p),
        ("sources", _long_p), ("output_columns", ctypes.c_long), ("probe_step", ctypes.c_double),
        ("c", ctypes.c_double * 3), ("partials", ctypes.c_long), ("event_start", ctypes.c_long),
        ("stops", _double_p), ("n_stops", ctypes.c_long),
        ("left", _double_p), ("right", _double_p), ("gx_left", _double_p), ("gx_right", _double_p),
        ("rec_J", _double_p), ("rec_ft", _double_p), ("rec_has_ft", _long_p),
        ("state_columns", ctypes.c_long), ("output_column_count", ctypes.c_long),
        ("counter", ctypes.c_void_p), ("work", _double_p),
        ("failed_call", ctypes.c_long), ("failed_status", ctypes.c_long), ("failed_t", ctypes.c_double),
    ]


#: What each failure code of fa_me_system.c names (the worker's own texts for these calls), and
#: the FMI function per version; the last is the FMU's request to terminate.
_CALLS = {
    1: ("setting the time", {2: "fmi2SetTime", 3: "fmi3SetTime"}),
    2: ("setting the continuous states", {2: "fmi2SetContinuousStates", 3: "fmi3SetContinuousStates"}),
    3: ("setting {} values", {2: "fmi2SetReal", 3: "fmi3SetFloat64"}),
    4: ("getting the state derivatives", {2: "fmi2GetDerivatives", 3: "fmi3GetContinuousStateDerivatives"}),
    5: ("getting the event indicators", {2: "fmi2GetEventIndicators", 3: "fmi3GetEventIndicators"}),
    6: ("fmiCompletedIntegratorStep", {2: "fmi2CompletedIntegratorStep", 3: "fmi3CompletedIntegratorStep"}),
    7: ("getting {} values", {2: "fmi2GetReal", 3: "fmi3GetFloat64"}),
}
_TERMINATE = 8
_STATUS = ("ok", "warning", "discard", "error", "fatal", "pending")


def load_library(kernel: tuple[str, bytes]) -> ctypes.CDLL:
    """The loop's library from the ``(sha256, bytes)`` the parent sent, loaded once per process
    from an anonymous in-memory file, sealed against writes before it is loaded.

    The file's descriptor stays open for the life of the process, as the library does: the
    dynamic loader knows a library by its path, and ``/proc/self/fd/N`` of a closed descriptor
    would name the next file opened as ``N`` (a second library loaded so would be this one).
    """
    digest, data = kernel
    library = _LOADED.get(digest)
    if library is None:
        if hashlib.sha256(data).hexdigest() != digest:
            raise ValueError("the compiled loop's library does not match its digest")
        fd = os.memfd_create("fmi_adjoint_me_loop", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                        fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            library = ctypes.CDLL(f"/proc/self/fd/{fd}")
        except BaseException:
            os.close(fd)
            raise
        _LOADED[digest] = library
    return library


def _refs(values: Sequence) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(list(values), dtype=np.uint32))


class FmuKernel:
    """The :class:`~fmi_adjoint.integrate.radau_walk.CompiledSystem` of an FMU system."""

    def __init__(self, library: ctypes.CDLL, instance, system: FmuOdeSystem):
        self.library, self.instance, self.system = library, instance, system
        fmu = instance.fmu
        n, k = system.n_states, len(system.output_refs)
        m = self._fmu = FaFmu()
        m.fmi3 = int(bool(instance.fmi3))
        m.component = fmu.component
        for field, name in _FUNCTIONS[3 if instance.fmi3 else 2]:
            function = getattr(fmu.dll, name, None)
            setattr(m, field, None if function is None else ctypes.cast(function, ctypes.c_void_p).value)
        self._arrays = {
            "state_refs": _refs(instance.state_refs), "derivative_refs": _refs(instance.derivative_refs),
            "input_refs": _refs(system.input_refs), "output_refs": _refs(system.output_refs),
            "input_times": np.ascontiguousarray(system.input_times, dtype=float),
            "input_table": np.ascontiguousarray(system.input_table, dtype=float).reshape(
                system.input_times.size, len(system.input_refs)),
            "sources": np.zeros(n, dtype=np.int64),
            "stops": np.ascontiguousarray(system.stops, dtype=float),
            "work": np.zeros(6 * n + len(system.input_refs) + 3 * k + 1),
        }
        for name in ("left", "right", "gx_left", "gx_right"):
            if not getattr(system, name).flags.c_contiguous:
                raise ValueError(f"FmuOdeSystem.{name} must be C-contiguous")
        a = self._arrays
        m.n, m.n_indicators, m.n_inputs, m.n_outputs = n, system.n_indicators, len(system.input_refs), k
        for name in ("state_refs", "derivative_refs", "input_refs", "output_refs"):
            setattr(m, name, pointer(a[name], _vr_p))
        m.n_input_times = a["input_times"].size
        m.input_times, m.input_table = pointer(a["input_times"]), pointer(a["input_table"])
        m.sources, m.stops, m.work = pointer(a["sources"], _long_p), pointer(a["stops"]), pointer(a["work"])
        m.probe_step = PROBE_STEP
        m.c[:] = [float(v) for v in RADAU_C]
        m.partials = int(system.partials)
        m.n_stops = a["stops"].size
        for name in ("left", "right", "gx_left", "gx_right"):
            setattr(m, name, pointer(getattr(system, name)))
        m.counter = instance.progress.counter_address()
        self._ode = FaOde(ctypes.addressof(m), *(ctypes.cast(getattr(library, f"fa_fmu_{name}"), ctypes.c_void_p).value
                                                for name in ("rhs", "jacobian", "indicators", "accepted", "completed")))
        self._record: dict[str, np.ndarray] = {}
        self._replayed: RadauRun | None = None
        self._replay_arrays: dict[str, np.ndarray] = {}
        #: Steps taken and replayed in C so far (the reply reports them).
        self.committed = self.replayed = 0

    def ode(self) -> FaOde:
        return self._ode

    def step_bytes(self) -> int:
        n = self.system.n_states
        return 8 * (3 * n * n + 3 * n + 1) if self.system.partials else 0

    def prepare(self, capacity: int) -> None:
        system, m, n = self.system, self._fmu, self.system.n_states
        self._arrays["sources"][:] = [source == "fmu" for source in system.sources]
        m.output_columns = int(system.output_columns)
        m.event_start = int(system.event_start)
        m.state_columns = m.output_column_count = 0
        m.failed_call = 0
        m.component = self.instance.fmu.component
        size = capacity if system.partials else 1
        self._record = {"J": np.empty((size, 3, n, n)), "ft": np.empty((size, 3, n)),
                        "has_ft": np.zeros(size, dtype=np.int64)}
        m.rec_J, m.rec_ft = pointer(self._record["J"]), pointer(self._record["ft"])
        m.rec_has_ft = pointer(self._record["has_ft"], _long_p)
        self.instance.progress.describe("the compiled Radau IIA loop (setting the time, states and inputs, getting the "
                                       "derivatives, directional derivatives and event indicators)")

    def collect(self, steps: Sequence[RadauStep]) -> None:
        system, m, record = self.system, self._fmu, self._record
        self.instance.progress.resync()
        self.committed += len(steps)
        self._raise_failure()
        for j, used in enumerate(self._arrays["sources"]):
            if not used:
                system.sources[j] = "fd"
        system.output_columns = bool(m.output_columns)
        system.event_start = bool(m.event_start)
        system.calls.state_columns += int(m.state_columns)
        system.calls.output_columns += int(m.output_column_count)
        if system.partials:
            for k in range(len(steps)):
                ft = record["ft"][k].copy() if record["has_ft"][k] else None
                system.steps.append(StepPartials(J=record["J"][k].copy(), ft=ft))
        if steps:
            system.last_step = steps[-1]


    def replay(self, run: RadauRun, start: int, stop: int, params: Sequence[int], F: np.ndarray,
               D: np.ndarray | None, left: np.ndarray, right: np.ndarray, Dout: np.ndarray | None) -> int:
        """:func:`.me_sensitivities.replay` of the steps ``start:stop`` of ``run``, whose end nodes
        have no event, into its arrays (``F``, ``D``: per step; ``left``, ``right``, ``Dout``: per
        sample time); the steps replayed (fewer than asked when an FMI call failed: Python repeats
        that step and raises its error)."""
        if self._replayed is not run:
            steps = run.steps
            self._replay_arrays = {
                "t": np.array([(step.t0, step.t1) for step in steps], dtype=float).reshape(len(steps), 2),
                "x0": np.array([step.x0 for step in steps], dtype=float).reshape(len(steps), -1),
                "Z": np.array([step.Z for step in steps], dtype=float).reshape(len(steps), 3, -1),
                "x_end": np.ascontiguousarray(run.x[1:], dtype=float),
            }
            self._replayed = run
        a, m = self._replay_arrays, self._fmu
        m.component = self.instance.fmu.component
        m.failed_call = 0
        refs = _refs(params)
        k = refs.size
        for name, array in (("F", F), ("D", D), ("left", left), ("right", right), ("Dout", Dout)):
            if array is not None and not (array.flags.c_contiguous and array.dtype == np.float64):
                raise ValueError(f"the replay's {name} must be a C-contiguous float64 array")
        self.instance.progress.describe("the compiled replay of a Model Exchange run (the right-hand side and "
                                        "directional derivatives at the recorded stage points)")
        function = self.library.fa_fmu_replay
        function.restype = ctypes.c_long
        done = function(ctypes.byref(m), ctypes.c_long(stop - start), pointer(a["t"][start:stop]),
                        pointer(a["x0"][start:stop]), pointer(a["Z"][start:stop]), pointer(a["x_end"][start:stop]),
                        pointer(refs, _vr_p), ctypes.c_long(k), pointer(F[start:stop]),
                        None if D is None else pointer(D[start:stop]), pointer(left), pointer(right),
                        None if Dout is None else pointer(Dout))
        self.instance.progress.resync()
        self.replayed += int(done)
        self._raise_failure()
        return int(done)

    def _raise_failure(self) -> None:
        """The worker's error for the FMI call that failed in C (or the FMU's request to
        terminate), raised without calling the FMU again: after Error an FMU may refuse every
        call but Reset (FMI 2.0 sec. 2.1.3)."""
        m = self._fmu
        call = int(m.failed_call)
        if not call:
            return
        name, t = self.instance.fmu_name, float(m.failed_t)
        m.failed_call = 0
        if call == _TERMINATE:
            raise self.instance.Failure(f"{name}: the FMU asked to terminate at t = {t:g} s.")
        version = 3 if self.instance.fmi3 else 2
        what, functions = _CALLS[call]
        status = int(m.failed_status)
        label = _STATUS[status] if 0 <= status < len(_STATUS) else "illegal return code"
        raise self.instance.Failure(
            f"{name}: {what.format('Float64' if version == 3 else 'Real')} failed ({functions[version]} failed with "
            f"status {status} ({label}).); check the parameter values and inputs, or the FMU's log (rerun with "
            "--verbose).")


def compiled_walk(kernel: tuple[str, bytes] | None, instance, system: FmuOdeSystem) -> CompiledWalk | None:
    """The compiled loop for ``system``, or None where the Python loop runs every step: no library
    sent (:class:`.me_loop.PythonLoop`), no continuous states, or outputs or inputs that are not
    real scalars (read and set through the typed accessors in Python)."""
    if kernel is None or system.n_states == 0:
        return None
    if not all(isinstance(r, (int, np.integer)) for r in [*system.output_refs, *system.input_refs]):
        return None
    try:
        library = load_library(kernel)
    except OSError:  # no memfd or no loading from it (a hardened system): every step in Python
        return None
    compiled = FmuKernel(library, instance, system)
    system.kernel = compiled
    return CompiledWalk(compiled)
