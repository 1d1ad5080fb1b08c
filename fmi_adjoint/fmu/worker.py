"""The process that runs an FMU binary on behalf of fmi-adjoint (issue 10, finding 6).

An FMU binary is code from a third party.  It may crash (SIGSEGV), never return from a
call, or print to stdout.  It therefore never runs in the tool's own process: every
:class:`~fmi_adjoint.fmu.session.FmuSession` starts one worker process that loads the
binary through fmpy and owns its one instance; the parent sends requests and waits for
the replies with a timeout.

Design
------
* **A plain subprocess running this file as a script** (``python -P -u worker.py``), not
  ``multiprocessing``: the worker imports only numpy and fmpy (0.5 s) instead of the whole
  package (sympy, 2.5 s per worker with "spawn"); a "forkserver" would pay that import once
  but adds a server and multiprocessing's resource tracker, the source of the "leaked
  semaphore" warnings.  The worker needs a few project modules (the Radau IIA integrator,
  the Model Exchange run and its sensitivities, the errors they raise) and loads just those
  (:func:`_project_module`).
* **Requests and replies are pickles over two pipes** (``multiprocessing.connection``
  framing on raw file descriptors).  The parent is trusted, so requests are ordinary
  pickles; replies come from the process that runs the binary and are read by an
  unpickler that refuses every class (:func:`decode_reply`): plain tuples, numbers,
  strings and bytes only (arrays travel as ``(shape, bytes)``).  The binary runs in this
  process and can write into the reply pipe, so the parent also checks every reply's
  structure against its request (:mod:`.replies`).  The pipes are descriptors of their own,
  never stdin/stdout: what the binary prints cannot reach them (next point).
* **The call in progress is published in a small memory-mapped file** in the extraction
  folder (:class:`Progress`): a counter and the text FmuSession used to put in its error
  messages ("fmi2DoStep at t = 0.5 s").  Writing it costs a memcpy per FMI call; after a
  crash or a timeout the parent reads it to name the call.  The counter also makes the
  timeout apply to *one* FMI call, not to a whole simulation sent as one request: the
  parent's deadline moves whenever the counter moves.
* **File descriptors 1 and 2 of the worker are a log file** in the extraction folder
  (set by the parent when it starts the worker, before the binary is loaded), so nothing
  the binary or fmpy's logger prints reaches the tool's stdout; the CLI copies the log to
  stderr with ``--verbose``.
* **Signals**: the worker runs in its own process group and ignores SIGINT, so Ctrl-C
  reaches only the parent, which kills the worker's whole process group (a binary that
  forks leaves its children there); with ``PR_SET_PDEATHSIG`` the kernel kills the worker
  when the parent dies, even by SIGKILL.

Whole simulations are one request (Co-Simulation: every ``doStep``; Model Exchange: the
adaptive Radau IIA run of :mod:`.me_run` with its sensitivities runs in the worker); the per-point
requests of the sensitivity path carry the point with them (``set_point`` is sent with
the next evaluation).  A co-simulation master (:mod:`fmi_adjoint.ssp.master`) steps an instance
one macro step per request (``step``: inputs, ``doStep``, outputs) and iterates algebraic loops
with ``exchange`` (inputs, outputs at the communication point).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import mmap
import os
import pickle
import signal
import struct
import sys
from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["PROBE_STEP", "Progress", "decode_reply", "pack", "unpack", "state_jacobian"]

#: Relative step of the central differences of the right-hand side (state columns).
PROBE_STEP = 1e-6

_PROGRESS_BYTES = 512
_HEADER = struct.Struct("<QI")  # call counter, length of the text
_TEXTS_KEPT = 256  # encoded texts kept by a Progress (texts with a time in them are not repeated)


class Progress:
    """The call in progress, in a memory-mapped file shared by the worker and its parent.

    Layout: an unsigned 64-bit counter (incremented with every call), the length of the
    text, the UTF-8 text (at most ``_PROGRESS_BYTES - 12`` bytes).
    """

    def __init__(self, path: str, create: bool = False):
        fd = os.open(path, os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0), 0o600)
        try:
            if create:
                os.ftruncate(fd, _PROGRESS_BYTES)
            self._map = mmap.mmap(fd, _PROGRESS_BYTES)
        finally:
            os.close(fd)
        self._count = 0
        # A run announces the same few texts tens of thousands of times: each is encoded once
        # and written only when it changes (the counter is written every time).
        self._encoded: dict[str, bytes] = {}
        self._text = b""

    def publish(self, what: str) -> None:
        """Announce the call about to be made (the text first, then the counter)."""
        self._count += 1
        self.describe(what)

    def describe(self, what: str) -> None:
        """Name the work in progress with the counter as it stands (:meth:`publish` advances it
        first; compiled code counts its own calls: :meth:`counter_address`)."""
        data = self._encoded.get(what)
        if data is None:
            data = what.encode("utf-8", "replace")[: _PROGRESS_BYTES - _HEADER.size]
            if len(self._encoded) < _TEXTS_KEPT:
                self._encoded[what] = data
        if data is not self._text:
            self._map[_HEADER.size:_HEADER.size + len(data)] = data
            self._text = data
        _HEADER.pack_into(self._map, 0, self._count, len(data))

    @property
    def count(self) -> int:
        """The calls announced so far by this process (each FMI call announces itself once)."""
        return self._count

    def counter_address(self) -> int:
        """The address of the call counter in the map, for compiled code that makes FMI calls
        itself (:mod:`.me_kernel`): it advances the counter by one per call, as :meth:`publish`
        does; :meth:`resync` afterwards.  Valid while the map is open (the buffer export that
        reads it is released at once, so :meth:`close` still works)."""
        return ctypes.addressof(ctypes.c_uint64.from_buffer(self._map, 0))

    def resync(self) -> None:
        """Take the counter from the map after compiled code advanced it."""
        self._count = _HEADER.unpack_from(self._map, 0)[0]

    def read(self) -> tuple[int, str]:
        """(counter, text of the last call announced)."""
        count, length = _HEADER.unpack(self._map[: _HEADER.size])
        length = min(length, _PROGRESS_BYTES - _HEADER.size)
        return count, bytes(self._map[_HEADER.size:_HEADER.size + length]).decode("utf-8", "replace")

    def close(self) -> None:
        self._map.close()


# -- the wire format ----------------------------------------------------------------------
def pack(array) -> tuple:
    """An array of floats as plain data: (shape, bytes of float64)."""
    array = np.ascontiguousarray(array, dtype=np.float64)
    return tuple(array.shape), array.tobytes()


def unpack(packed) -> np.ndarray:
    """The array of :func:`pack` (a copy the caller owns).

    ValueError unless ``packed`` is ``(shape, bytes)`` with a shape of non-negative ints
    whose product times 8 is the number of bytes: a reply comes from the process that runs
    the binary, and ``reshape`` would take a -1 extent or a lying shape as a wildcard.
    """
    if not (isinstance(packed, tuple) and len(packed) == 2):
        raise ValueError(f"{str(type(packed).__name__)} instead of an array (shape, bytes)")
    shape, data = packed
    if not (isinstance(shape, tuple) and len(shape) <= 32 and all(type(n) is int and n >= 0 for n in shape)):
        raise ValueError(f"the shape {_shape_text(shape)} is not a tuple of sizes")
    if not isinstance(data, bytes) or len(data) != 8 * math.prod(shape):
        size = len(data) if isinstance(data, bytes) else type(data).__name__
        raise ValueError(f"{size} bytes do not hold an array of shape {_shape_text(shape)} (float64)")
    return np.frombuffer(data, dtype=np.float64).reshape(shape).copy()


def _shape_text(shape) -> str:
    """A short text for a claimed shape, never its whole ``repr`` (a forged one may nest
    200 000 deep, or hold huge numbers)."""
    if not isinstance(shape, tuple):
        return f"of type {type(shape).__name__}"
    if len(shape) > 32:
        return f"of {len(shape)} dimensions"
    return "(" + ", ".join(str(n) if type(n) is int and n.bit_length() <= 64 else type(n).__name__
                           for n in shape) + ")"


class _PlainData(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"the FMU worker sent an object of {module}.{name}; only plain data is accepted")


def decode_reply(data: bytes):
    """A reply of the worker: plain data only (no class is ever looked up, so no code runs)."""
    import io

    return _PlainData(io.BytesIO(data)).load()


# -- the state Jacobian, shared by the worker's integration and the parent's sensitivities --
def state_jacobian(session, at: Callable, t: float, x: np.ndarray, outputs: Sequence[int] = (),
                   sources: list | None = None) -> np.ndarray:
    """``d(f, g)/dx`` at (t, x): the FMU's directional derivatives where ``sources[j] == "fmu"``,
    else central differences of the right-hand side (a refused column switches that state to
    differences for good: ``sources`` is updated in place).

    ``session`` is the worker's instance or the parent's :class:`FmuSession` (same methods).
    """
    sources = ["fd"] * session.n_states if sources is None else sources
    unknowns = list(session.derivative_refs) + list(outputs)
    cols = np.empty((len(unknowns), session.n_states))
    at(t, x)
    for j, ref in enumerate(session.state_refs):
        if sources[j] == "fmu":
            try:
                cols[:, j] = session.directional(unknowns, ref)
                continue
            except session.Failure:
                sources[j] = "fd"  # refused: central differences from now on
        d = PROBE_STEP * (abs(x[j]) + 1.0)
        xp, xm = x.copy(), x.copy()
        xp[j] += d
        xm[j] -= d
        at(t, xp)
        plus = session.rhs(outputs)
        at(t, xm)
        minus = session.rhs(outputs)
        cols[:, j] = (plus - minus) / (2 * d)
        at(t, x)
    return cols


# -- the worker side ----------------------------------------------------------------------
class _Failure(Exception):
    """An FMI call failed; the message is the complete error line (the parent raises FmuError)."""


def _project_module(name: str):
    """Import ``fmi_adjoint.<name>`` without running ``fmi_adjoint/__init__.py`` (sympy, 2 s).

    The parent packages are registered as bare namespace modules with their real folders as
    ``__path__``; the submodules are then imported as usual, from the same files as in the
    parent, so the worker runs exactly the project's code.
    """
    import importlib
    import types

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parts = ["fmi_adjoint", *name.split(".")[:-1]]
    for k in range(len(parts)):
        package = ".".join(parts[: k + 1])
        if package not in sys.modules:
            module = types.ModuleType(package)
            module.__path__ = [os.path.join(root, *parts[1: k + 1])]
            sys.modules[package] = module
    return importlib.import_module(f"fmi_adjoint.{name}")


#: kind -> FMI 3 type of fmpy's ``get<Type>``/``set<Type>`` (enumerations are Int64 in FMI 3).
_FMI3_TYPES = {"float64": "Float64", "float32": "Float32", "int8": "Int8", "uint8": "UInt8", "int16": "Int16",
               "uint16": "UInt16", "int32": "Int32", "uint32": "UInt32", "int64": "Int64", "uint64": "UInt64",
               "enumeration": "Int64", "boolean": "Boolean"}


def _typed(ref) -> tuple[str, int, int | None, int]:
    """A wire reference as ``(kind, vr, element, size)``: a plain int is a float64 scalar."""
    if isinstance(ref, (int, np.integer)):
        return ("float64", int(ref), None, 1)
    kind, vr, element, size = ref
    return str(kind), int(vr), None if element is None else int(element), int(size)


def _convert(fmu_name: str, kind: str, value: float):
    """``value`` in the Python type fmpy's setter of ``kind`` takes (floats stay floats)."""
    if kind in ("float64", "float32"):
        return value
    if kind == "boolean":
        return value != 0.0
    if not (math.isfinite(value) and value == int(value)):
        raise _Failure(f"{fmu_name}: {value!r} is not a whole number, so it cannot be set to an {kind} variable; "
                       "give whole numbers for integer variables.")
    return int(value)


class _Instance:
    """The fmpy instance of the FMU in the worker: set parameters, initialize, step, evaluate.

    An instance is created once and reset between runs (``fmi2Reset`` / ``fmi3Reset``).  At
    every start all real parameters are set to their start values (sent by the parent, from
    the checked model description), overridden by the caller's values, as an importer should.
    """

    Failure = _Failure

    def __init__(self, progress: Progress, fmu_name: str, directory: str, interface: str, n_states: int,
                 state_refs: list[int], derivative_refs: list[int], n_indicators: int):
        from fmpy import instantiate_fmu, read_model_description

        self.progress = progress
        self.fmu_name = fmu_name
        self.interface = interface
        self.n_states = n_states
        self.state_refs = state_refs
        self.derivative_refs = derivative_refs
        progress.publish("reading the model description")
        description = read_model_description(directory, validate=False)
        self.fmi3 = description.fmiVersion.startswith("3")
        #: Names of the real variables by value reference (the notes name variables, not numbers).
        self.names = {int(v.valueReference): str(v.name) for v in description.modelVariables
                      if v.type in ("Real", "Float64")}
        #: FMI 3 Co-Simulation: the inputs at a time, set when the FMU calls back
        #: (:meth:`intermediate_inputs`), and the first failure inside that callback.
        self._inputs_at: Callable[[float], tuple[Sequence, Sequence[float]]] | None = None
        self._callback_failure: Exception | None = None
        cs = description.coSimulation
        callback = (self._intermediate_update if self.fmi3 and interface == "CoSimulation" and cs is not None
                    and cs.providesIntermediateUpdate else None)
        progress.publish(f"instantiating the {interface} FMU")
        try:
            self.fmu = instantiate_fmu(directory, description, fmi_type=interface, intermediate_update=callback)
        except Exception as exc:  # fmpy: bare Exception or OSError from the loader
            raise _Failure(f"{fmu_name}: cannot instantiate the {interface} FMU ({exc}).") from None
        # The parent's count, bounded when the FMU was opened (archive.MAX_EVENT_INDICATORS).
        self.n_indicators = int(n_indicators)
        self._used = self._terminated = False
        self.next_event_time: float | None = None
        self._vector = ctypes.c_double * max(n_states, 1)  # the ctypes type of a state vector
        #: Parameter columns (by value reference) the probe of an earlier request believed, or
        #: rejected (:func:`.me_sensitivities.run_sensitivities`): checked once per worker.
        self.trusted_columns: dict[int, bool] = {}

    #: Put before every call's text in the progress buffer: a system's component names itself there
    #: (the parent's error after a crash or a timeout quotes that text).
    call_prefix = ""

    def _call(self, what: str, function: Callable, *args):
        self.progress.publish(self.call_prefix + what if self.call_prefix else what)
        try:
            return function(*args)
        except Exception as exc:  # fmpy raises FMICallException / OSError
            raise _Failure(
                f"{self.fmu_name}: {what} failed ({exc}); check the parameter values and inputs, or the FMU's log "
                "(rerun with --verbose)."
            ) from None

    def set_real(self, refs: Sequence, values: Sequence[float]) -> None:
        """Set values by reference (typed references too: :meth:`set_values`)."""
        self.set_values(refs, values)

    def get_real(self, refs: Sequence) -> np.ndarray:
        """Values by reference as floats (typed references too: :meth:`get_values`)."""
        return self.get_values(refs)

    def _accessor(self, prefix: str, kind: str) -> tuple[str, Callable]:
        """(FMI type name, fmpy method) of ``get``/``set`` for ``kind``: FMI 2 has Real,
        Integer (also enumerations) and Boolean; FMI 3 one per type, enumerations as Int64."""
        if self.fmi3:
            name = _FMI3_TYPES.get(kind)
        else:
            name = {"float64": "Real", "int32": "Integer", "enumeration": "Integer", "boolean": "Boolean"}.get(kind)
        if name is None:
            raise _Failure(f"{self.fmu_name}: cannot {prefix} values of kind {kind!r} through FMI "
                           f"{3 if self.fmi3 else 2}; only numeric variables can be read or set.")
        return name, getattr(self.fmu, prefix + name)

    def get_values(self, refs: Sequence) -> np.ndarray:
        """Values of numeric variables of any type, as floats (a Boolean is 0.0 or 1.0).

        ``refs`` are ints (float64 scalars) or ``(kind, vr, element, size)``
        (:meth:`~fmi_adjoint.fmu.variables.VariableRef.wire`).  Scalars are read with one
        call per kind; an array element is read with its whole array (``nValues`` =
        ``size``: FMI 3 transfers arrays whole), once per array.
        """
        typed = [_typed(r) for r in refs]
        out = np.empty(len(typed))
        scalars: dict[str, list[int]] = {}
        arrays: dict[tuple[str, int, int], list[tuple[int, int]]] = {}
        for position, (kind, vr, element, size) in enumerate(typed):
            if element is None:
                scalars.setdefault(kind, []).append(position)
            else:
                arrays.setdefault((kind, vr, size), []).append((position, element))
        for kind, positions in scalars.items():
            name, getter = self._accessor("get", kind)
            values = self._call(f"getting {name} values", getter, [typed[p][1] for p in positions])
            out[positions] = np.asarray(values, dtype=float)
        for (kind, vr, size), wanted in arrays.items():
            name, getter = self._accessor("get", kind)
            values = np.asarray(self._call(f"getting the {name} array {vr}", getter, [vr], size), dtype=float)
            for position, element in wanted:
                out[position] = values[element]
        return out

    def set_values(self, refs: Sequence, values: Sequence[float]) -> None:
        """Set numeric variables of any type (see :meth:`get_values` for ``refs``).

        Integers and Booleans must be whole numbers in range (the parent checks ``--set``
        values at the front door; this guards the wire).  One element of an array is set
        by getting the whole array, changing the element and setting the whole array;
        when every element is given no get is needed (start values before initialization,
        where getting may not be allowed).
        """
        typed = [_typed(r) for r in refs]
        scalars: dict[str, tuple[list[int], list]] = {}
        arrays: dict[tuple[str, int, int], dict[int, float]] = {}
        for (kind, vr, element, size), value in zip(typed, values):
            if element is None:
                vrs, vals = scalars.setdefault(kind, ([], []))
                vrs.append(vr)
                vals.append(_convert(self.fmu_name, kind, float(value)))
            else:
                arrays.setdefault((kind, vr, size), {})[element] = float(value)
        for kind, (vrs, vals) in scalars.items():
            name, setter = self._accessor("set", kind)
            self._call(f"setting {name} values", setter, vrs, vals)
        for (kind, vr, size), elements in arrays.items():
            name, setter = self._accessor("set", kind)
            if len(elements) == size:
                whole = [elements[k] for k in range(size)]
            else:
                _, getter = self._accessor("get", kind)
                whole = [float(v) for v in self._call(f"getting the {name} array {vr}", getter, [vr], size)]
                for k, value in elements.items():
                    whole[k] = value
            self._call(f"setting the {name} array {vr}", setter, [vr],
                       [_convert(self.fmu_name, kind, v) for v in whole])

    def start(self, refs: Sequence[int], values: Sequence[float], t0: float, t_end: float) -> float | None:
        """Reset (after a previous run), set parameters and inputs, initialize at ``t0``.

        Model Exchange instances end in continuous-time mode after the event iteration.
        Returns the next time event (None if there is none).
        """
        self.enter_initialization(refs, values, t0, t_end)
        return self.exit_initialization()

    def enter_initialization(self, refs: Sequence, values: Sequence[float], t0: float, t_end: float) -> None:
        """The first half of :meth:`start`: reset, set ``values``, enter Initialization Mode (where a
        system's master sets the coupled inputs and reads outputs: :mod:`.me_system`)."""
        fmu = self.fmu
        if self._used:
            self._call("fmiReset", fmu.reset)
        self._used, self._terminated = True, False
        if not self.fmi3:
            self._call("fmi2SetupExperiment", fmu.setupExperiment, None, t0, t_end)
        self.set_real(refs, values)
        if self.fmi3:
            self._call("fmi3EnterInitializationMode", fmu.enterInitializationMode, None, t0, t_end)
        else:
            self._call("fmi2EnterInitializationMode", fmu.enterInitializationMode)

    def leave_initialization(self) -> None:
        """``fmiExitInitializationMode``: a Model Exchange instance is in Event Mode afterwards (a
        system's master runs the event iteration of all its components, :mod:`.me_system`)."""
        self._call("exiting initialization mode", self.fmu.exitInitializationMode)

    def exit_initialization(self) -> float | None:
        """The second half of :meth:`start`: exit Initialization Mode; a Model Exchange instance
        then runs the event iteration and enters continuous-time mode.  The next time event."""
        self.leave_initialization()
        if self.interface == "ModelExchange":
            self._event_iteration()
            self._call("entering continuous-time mode", self.fmu.enterContinuousTimeMode)
        return self.next_event_time

    def _event_iteration(self) -> None:
        for _ in range(1000):
            # fmpy returns (discrete states need update, terminate, nominals changed, values
            # changed, next event time defined, next event time) for FMI 2 and 3 alike.
            update = self.fmu.updateDiscreteStates if self.fmi3 else self.fmu.newDiscreteStates
            info = self._call("the event iteration", update)
            if info[1]:
                raise _Failure(f"{self.fmu_name}: the FMU asked to terminate during initialization.")
            self.next_event_time = float(info[5]) if info[4] else None
            if not info[0]:
                return
        raise _Failure(f"{self.fmu_name}: the event iteration at initialization did not settle.")

    def run_cs(self, refs, values, grid, outputs, input_refs, input_table) -> np.ndarray:
        """Co-simulation over the communication points ``grid``; ``outputs`` at every point.

        ``input_table[k]`` are the inputs at the start of communication step k.
        """
        self.start(refs, values, float(grid[0]), float(grid[-1]))
        out = np.empty((grid.size, len(outputs)))
        out[0] = self.get_real(outputs)
        for k in range(grid.size - 1):
            t, h = float(grid[k]), float(grid[k + 1] - grid[k])
            if len(input_refs) and k > 0:
                self.set_real(input_refs, input_table[k])
            self._do_step(t, h)
            out[k + 1] = self.get_real(outputs)
        self._call("terminating", self.fmu.terminate)
        self._terminated = True
        return out

    def _intermediate_update(self, environment, t, set_requested, get_allowed, step_finished, can_return_early,
                             early_return_requested, early_return_time) -> None:
        """``fmi3IntermediateUpdateCallback`` (FMI 3.0, sec. 4.2.3): when the FMU requests it
        (``intermediateVariableSetRequested``), set the inputs at its time ``t`` from the source
        of :meth:`intermediate_inputs`; nothing else (no intermediate outputs, no early return).
        No exception may cross the FMU's C frames: the first is kept and raised by
        :meth:`_do_step` when ``fmi3DoStep`` returns."""
        source = self._inputs_at
        if source is None or not set_requested or self._callback_failure is not None:
            return
        try:
            refs, values = source(float(t))
            self.set_values(refs, values)
        except Exception as exc:  # raised after the step (_do_step)
            self._callback_failure = exc

    @contextlib.contextmanager
    def intermediate_inputs(self, source: Callable[[float], tuple[Sequence, Sequence[float]]]):
        """Inside the block, an FMI 3 Co-Simulation FMU that provides intermediate update gets
        its inputs ``source(t) -> (refs, values)`` at every time it calls back during
        ``fmi3DoStep`` (our exported FMUs: each internal step's end time), instead of holding
        them over the communication step."""
        self._inputs_at, self._callback_failure = source, None
        try:
            yield
        finally:
            self._inputs_at = None

    def _do_step(self, t: float, h: float) -> None:
        """``fmi2DoStep``/``fmi3DoStep`` from ``t`` by ``h``; an FMU asking to terminate (FMI 3
        ``terminateSimulation``) or refusing the step (fmpy raises on ``fmi2Discard`` and
        ``fmi2Error``) ends the run with a _Failure naming the time, as does a failure to set
        the inputs when the FMU called back (:meth:`_intermediate_update`)."""
        if self.fmi3:
            result = self._call(f"fmi3DoStep at t = {t:g} s", self.fmu.doStep, t, h)
            failure, self._callback_failure = self._callback_failure, None
            if isinstance(failure, _Failure):
                raise failure
            if failure is not None:
                raise _Failure(f"{self.fmu_name}: setting the inputs in the FMU's intermediate update during the "
                               f"step from t = {t:g} s failed ({failure}).")
            if result and len(result) > 1 and result[1]:  # terminateSimulation
                raise _Failure(f"{self.fmu_name}: the FMU asked to terminate at t = {t:g} s.")
        else:
            self._call(f"fmi2DoStep at t = {t:g} s", self.fmu.doStep, t, h)

    def step(self, t: float, h: float, input_refs: Sequence, inputs: Sequence[float], slopes: Sequence[float],
             output_refs: Sequence) -> np.ndarray:
        """One communication step of a co-simulation master (:mod:`fmi_adjoint.ssp.master`):
        set ``inputs``, and with ``slopes`` their first time derivatives: FMI 2
        (``canInterpolateInputs``) through ``fmi2SetRealInputDerivatives`` (order 1;
        ``input_refs`` are then float64 scalars), FMI 3 (``providesIntermediateUpdate``) as the
        ramps ``u + slope (t' - t)`` set at the FMU's intermediate updates; step from ``t`` by
        ``h``, and return the values of ``output_refs`` at ``t + h``."""
        self.set_values(input_refs, inputs)
        if len(slopes) and self.fmi3:  # no input derivatives in FMI 3: the ramps at its intermediate updates
            values, rates = [float(u) for u in inputs], [float(s) for s in slopes]

            def ramps(time: float) -> tuple[Sequence, list[float]]:
                return input_refs, [u + r * (time - t) for u, r in zip(values, rates)]

            with self.intermediate_inputs(ramps):
                self._do_step(float(t), float(h))
            return self.get_values(output_refs)
        if len(slopes):
            refs = [_typed(r)[1] for r in input_refs]
            self._call(f"fmi2SetRealInputDerivatives at t = {t:g} s", self.fmu.setRealInputDerivatives, refs,
                       [1] * len(refs), [float(s) for s in slopes])
        self._do_step(float(t), float(h))
        return self.get_values(output_refs)

    def exchange(self, input_refs: Sequence, inputs: Sequence[float], output_refs: Sequence) -> np.ndarray:
        """Set ``inputs`` and return ``output_refs`` at the current communication point (one
        iteration of an algebraic loop between direct-feedthrough ports)."""
        self.set_values(input_refs, inputs)
        return self.get_values(output_refs)

    def initial_states(self) -> np.ndarray:
        buffer = (ctypes.c_double * self.n_states)()
        self._call("getting the continuous states", self.fmu.getContinuousStates, buffer, self.n_states)
        return np.array(buffer[:], dtype=float)

    def set_point(self, t: float, x, input_refs: Sequence[int] = (), u: Sequence[float] = ()) -> None:
        # The hot path of a Model Exchange run (every right-hand side): no work beyond the calls.
        self._call("setting the time", self.fmu.setTime, float(t))
        if self.n_states:
            states = self._vector(*map(float, x))
            self._call("setting the continuous states", self.fmu.setContinuousStates, states, self.n_states)
        if len(input_refs):
            self.set_real(input_refs, u)

    def derivatives(self) -> np.ndarray:
        if not self.n_states:
            return np.zeros(0)
        buffer = self._vector()
        getter = self.fmu.getContinuousStateDerivatives if self.fmi3 else self.fmu.getDerivatives
        self._call("getting the state derivatives", getter, buffer, self.n_states)
        return np.frombuffer(memoryview(buffer), dtype=np.float64)  # a fresh buffer per call: the array owns it

    def rhs(self, outputs: Sequence[int] = ()) -> np.ndarray:
        """State derivatives followed by the real values ``outputs`` at the current point."""
        return np.concatenate([self.derivatives(), self.get_real(outputs)])

    def directional(self, unknowns: Sequence[int], known: int, seed: float = 1.0) -> np.ndarray:
        # fmpy's FMI 2 and FMI 3 wrappers take (unknowns, knowns, seed) alike.
        values = self._call("fmiGetDirectionalDerivative", self.fmu.getDirectionalDerivative,
                            list(unknowns), [known], [seed])
        return np.asarray(values, dtype=float)

    # -- events and FMU states (the adaptive Model Exchange run, :mod:`.me_run`) ------------------
    def event_indicators(self) -> np.ndarray:
        if not self.n_indicators:
            return np.zeros(0)
        buffer = (ctypes.c_double * self.n_indicators)()
        self._call("getting the event indicators", self.fmu.getEventIndicators, buffer, self.n_indicators)
        return np.array(buffer[:], dtype=float)

    def completed_integrator_step(self) -> tuple[bool, bool]:
        """(enter event mode, terminate); the run may restore earlier FMU states, so
        ``noSetFMUStatePriorToCurrentPoint`` is false."""
        enter, terminate = self._call("fmiCompletedIntegratorStep", self.fmu.completedIntegratorStep, False)
        return bool(enter), bool(terminate)

    def event_mode_update(self, t: float) -> np.ndarray:
        """Event mode at the point set, the event iteration, back to continuous-time mode; the
        continuous states afterwards (:attr:`next_event_time` updated)."""
        self.enter_event_mode(t)
        self.settle_discrete_states(t)
        self.enter_continuous_time_mode()
        return self.initial_states() if self.n_states else np.zeros(0)

    # The phases of the event iteration (FMI 2.0, sec. 3.2.2; FMI 3.0, sec. 3.2.4), also driven one
    # by one by a system's master, which couples the instances between them (:mod:`.me_system`).
    def enter_event_mode(self, t: float) -> None:
        self._call(f"entering event mode at t = {t:g} s", self.fmu.enterEventMode)

    def update_discrete_states(self, t: float) -> bool:
        """One ``fmi2NewDiscreteStates`` / ``fmi3UpdateDiscreteStates``; whether another is needed
        (:attr:`next_event_time` updated).  A request to terminate is a Failure."""
        update = self.fmu.updateDiscreteStates if self.fmi3 else self.fmu.newDiscreteStates
        # fmpy: (update needed, terminate, nominals changed, values changed, next time defined, next time)
        info = self._call(f"the event iteration at t = {t:g} s", update)
        if info[1]:
            raise _Failure(f"{self.fmu_name}: the FMU asked to terminate at t = {t:g} s; shorten the run "
                           "(--t-end) to end before it.")
        self.next_event_time = float(info[5]) if info[4] else None
        return bool(info[0])

    def settle_discrete_states(self, t: float) -> None:
        """:meth:`update_discrete_states` until no further update is needed (at most 1000)."""
        for _ in range(1000):
            if not self.update_discrete_states(t):
                return
        raise _Failure(f"{self.fmu_name}: the event iteration at t = {t:g} s did not settle in 1000 "
                       "iterations; the FMU is faulty: report it to its author.")

    def enter_continuous_time_mode(self) -> None:
        self._call("entering continuous-time mode", self.fmu.enterContinuousTimeMode)

    def get_fmu_state(self):
        getter = self.fmu.getFMUState if self.fmi3 else self.fmu.getFMUstate
        return self._call("getting the FMU state", getter)

    def set_fmu_state(self, state) -> None:
        setter = self.fmu.setFMUState if self.fmi3 else self.fmu.setFMUstate
        self._call("setting the FMU state", setter, state)

    def free_fmu_state(self, state) -> None:
        free = self.fmu.freeFMUState if self.fmi3 else self.fmu.freeFMUstate
        self._call("freeing an FMU state", free, state)

    def run_me_adaptive(self, request: dict) -> dict:
        """The adaptive Model Exchange run of :mod:`.me_run` (Radau IIA, events, sensitivities)."""
        return run_model_exchange(self, request)

    def close(self) -> None:
        """Terminate and free the instance; failures are irrelevant here (the process ends)."""
        if self._used and not self._terminated:
            try:
                self.fmu.terminate()
            except Exception:  # noqa: BLE001 - the worker exits right after; nothing to report to
                pass
        try:
            self.fmu.freeInstance()
        except Exception:  # noqa: BLE001 - as above
            pass


def run_model_exchange(instance, request: dict) -> dict:
    """The adaptive Model Exchange run of :mod:`.me_run` for an FMU's instance or a system's
    (:class:`~fmi_adjoint.fmu.me_system.SystemInstance`)."""
    _project_module("integrate.radau")
    return _project_module("fmu.me_run").run_model_exchange(instance, request)


def _instantiate_system(progress: Progress, label: str, components: Sequence[tuple], plan: dict):
    """A system of Model Exchange FMUs in this one worker (:mod:`.me_system`): one instance per
    component, ``components[k] = (name, file name, directory, n_states, state_refs,
    derivative_refs, n_indicators)``, coupled as ``plan`` says."""
    instances = []
    try:
        for name, file_name, directory, n_states, state_refs, derivative_refs, n_indicators in components:
            instances.append(_Instance(progress, f"{label}: component {name!r} ({file_name})", directory,
                                       "ModelExchange", n_states, state_refs, derivative_refs, n_indicators))
            instances[-1].call_prefix = f"component {name!r}: "
    except BaseException:
        for instance in instances:
            instance.close()
        raise
    _project_module("integrate.radau")  # the package of the integrator, before the system's module imports it
    system = _project_module("fmu.me_system")
    return system.SystemInstance(progress, label, [c[0] for c in components], instances, plan, run_model_exchange)


class _Advance:
    """The budget of fmpy's simulation loop, which is Python (issue 31, finding 4).

    The per-call timeout cannot see a loop that never ends but keeps calling the FMU: every
    step announces itself.  fmpy steps to the next output point, input change or time event
    the FMU announces; an FMU announcing a time event in the past sends it back in time
    (CVode integrates backwards), one at the current time keeps it in place, and one a hair
    ahead (events every 1e-300 s) crawls.  So each step must not go back, at most
    :attr:`STALLED` steps in a row may stay at one time (several events at one instant),
    and the steps may exceed the output points by at most :attr:`EVENTS`.
    """

    STALLED = 100
    EVENTS = 100_000

    def __init__(self, fmu_name: str, options: dict):
        self.fmu_name = fmu_name
        self.last = float(options.get("start_time") or 0.0)
        self.stop = float(options.get("stop_time") or self.last)
        interval = options.get("output_interval")
        span = max(self.stop - self.last, 0.0)
        # fmpy's own interval when none is given: about span / 500
        points = span / float(interval) if interval and interval > 0 else 500.0
        self.budget = int(min(2.0 * points, 1e12)) + self.EVENTS
        self.steps = self.stalled = 0

    def check(self, time: float) -> None:
        """_Failure naming the time if the step after ``time`` breaks the budget."""
        if not math.isfinite(time) or time < self.last:
            raise _Failure(f"{self.fmu_name}: fmpy.simulate_fmu went back in time from t = {self.last:.17g} s to "
                           f"t = {time!r} s: the FMU announced a time event before the current time (nextEventTime "
                           "in the past); the FMU is faulty: report it to its author.")
        self.stalled = self.stalled + 1 if time == self.last else 0
        self.steps += 1
        self.last = time
        if self.stalled > self.STALLED:
            raise _Failure(f"{self.fmu_name}: fmpy.simulate_fmu stayed at t = {time:.17g} s for {self.stalled} steps "
                           "in a row: the FMU announces a time event at the current time again and again; the FMU is "
                           "faulty: report it to its author.")
        if self.steps > self.budget:
            raise _Failure(f"{self.fmu_name}: fmpy.simulate_fmu took {self.steps} steps and reached only "
                           f"t = {time:.9g} s of {self.stop:g} s (at most {self.EVENTS} more steps than output points "
                           "are allowed): the FMU's events come faster than the simulation can advance; validate "
                           "a shorter span (a data file ending earlier) or have the FMU fixed.")


def _simulate_fmu(progress: Progress, fmu_name: str, directory: str, options: dict) -> dict:
    """fmpy's own drivers (``fmpy.simulate_fmu``); the result columns as packed arrays."""
    from fmpy import read_model_description, simulate_fmu

    progress.publish("reading the model description")
    description = read_model_description(directory, validate=False)
    signal_table = options.pop("input", None)
    if signal_table is not None:
        names, table = signal_table
        dtype = [(name, np.float64) for name in names]
        signal_table = np.array([tuple(row) for row in unpack(table)], dtype=dtype)

    guard = _Advance(fmu_name, options)

    def step_finished(time, recorder) -> bool:
        guard.check(float(time))
        progress.publish(f"fmpy.simulate_fmu, the step after t = {time:g} s")
        return True

    progress.publish("fmpy.simulate_fmu at the start")
    try:
        result = simulate_fmu(directory, validate=False, model_description=description, input=signal_table,
                              step_finished=step_finished, **options)
    except _Failure:
        raise
    except Exception as exc:  # fmpy raises bare Exceptions
        raise _Failure(f"{fmu_name}: re-simulation through fmpy failed ({exc}); rerun with --verbose to see the "
                       "FMU's log.") from None
    return {name: pack(result[name]) for name in result.dtype.names}


def _die_with_parent(parent: int) -> None:
    """Ask the kernel to kill this process when its parent dies (Linux), even by SIGKILL."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the worker still ends at end-of-file on its request pipe
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _live(instance: _Instance | None) -> _Instance:
    if instance is None:
        raise _Failure("internal error: the FMU worker got a request before 'instantiate'.")
    return instance


def _encode_result(value):
    if isinstance(value, np.ndarray):
        return ("array", pack(value))
    return ("value", value)


def _serve(request_fd: int, reply_fd: int, progress_path: str, fmu_name: str, parent: int) -> None:
    """Answer requests until the parent closes the pipe or asks to exit."""
    from multiprocessing.connection import Connection

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent)
    requests = Connection(request_fd, writable=False)
    replies = Connection(reply_fd, readable=False)
    progress = Progress(progress_path)
    instance: _Instance | None = None  # or a system's SystemInstance, which has the same interface
    result: tuple
    reply: tuple
    while True:
        try:
            op, args = pickle.loads(requests.recv_bytes())
        except EOFError:
            break
        if op == "exit":
            break
        try:
            if op == "instantiate":
                instance = _Instance(progress, fmu_name, *args)
                result = ("value", None)
            elif op == "instantiate_system":
                instance = _instantiate_system(progress, *args)
                result = ("value", None)
            elif op == "simulate_fmu":
                result = ("value", _simulate_fmu(progress, fmu_name, *args))
            elif op == "run_cs":
                refs, values, grid, outputs, input_refs, input_table = args
                result = ("array", pack(_live(instance).run_cs(refs, values, unpack(grid), outputs, input_refs,
                                                               unpack(input_table))))
            elif op == "run_me_adaptive":
                result = ("value", _live(instance).run_me_adaptive(args[0]))
            elif op == "call":
                point, method, method_args = args
                if method not in ("start", "initial_states", "derivatives", "rhs", "get_real", "set_real",
                                  "get_values", "set_values", "directional", "step", "exchange"):
                    raise _Failure(f"internal error: the FMU worker has no method {method!r}.")
                live = _live(instance)
                if point is not None:
                    t, x, input_refs, u = point
                    live.set_point(t, x, input_refs, u)
                result = _encode_result(getattr(live, method)(*method_args))
            else:
                raise _Failure(f"internal error: the FMU worker has no request {op!r}.")
            reply = ("ok", result)
        except _Failure as exc:
            reply = ("error", "fmu", str(exc))
        except Exception as exc:  # noqa: BLE001 - sent to the parent, which raises it as one error line
            errors = sys.modules.get("fmi_adjoint.errors")
            kind = "convergence" if errors is not None and isinstance(exc, errors.ConvergenceError) else "internal"
            reply = ("error", kind, str(exc) if kind == "convergence" else f"{type(exc).__name__}: {exc}")
        replies.send_bytes(pickle.dumps(reply))
    progress.publish("freeing the instance")
    if instance is not None:
        instance.close()


if __name__ == "__main__":
    _serve(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]))
