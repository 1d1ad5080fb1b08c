"""One instance of an FMU, living in a worker process: set parameters, initialize, step or evaluate.

fmpy is the only FMI runtime, and it runs in a separate process (:mod:`.worker`), never in
the tool's: a binary that crashes, hangs or prints ends in one :class:`FmuError` naming the
FMU, the FMI call and the fix, and the tool's stdout stays clean.  :class:`FmuSession` is the
parent's handle on that process, with the methods the identification needs; a whole
simulation is one request, point evaluations carry their point (``set_point`` travels with
the next evaluation).  A co-simulation master sends one request per component and macro step
(:meth:`FmuSession.step_request`, :meth:`FmuSession.exchange_request`) to all its components'
sessions at once (:func:`run_each`), so that they step in parallel.

The instance is created once and reset between runs (``fmi2Reset`` / ``fmi3Reset``).  At
every start all real parameters are set to their start values from the model description,
overridden by the caller's values, as an importer should; fixed parameters are therefore
handled exactly like tunable ones, before initialization.

Waiting on the worker
---------------------
Every wait polls in short slices, so Ctrl-C (KeyboardInterrupt) and the CLI's SIGTERM
exception arrive at once; whatever interrupts a wait kills the worker before it propagates.
One FMI call may take at most ``timeout`` seconds (``--fmu-timeout``, default
:data:`DEFAULT_TIMEOUT`); the worker announces each call (:class:`~.worker.Progress`), so a
long simulation of quick steps never times out, and a ``doStep`` that never returns does
after ``timeout``.  The worker's start (importing numpy and fmpy) gets at least
:data:`STARTUP_ALLOWANCE` seconds whatever the timeout.

Once a reply has begun, its whole frame must arrive within ``timeout`` seconds, and the
size its header announces may not exceed what the request can be answered with
(:func:`~.replies.reply_limit`): the frame is read here, not by
``multiprocessing.connection``, whose ``recv_bytes`` has no deadline and allocates whatever
the header claims (issue 31: a binary that announced 2 GB and stalled hung the run).
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import TextIO

import numpy as np

from ..errors import FmuError
from .archive import FmuArchive
from .replies import MalformedReply, expectation, one_line, reply_limit, split
from .variables import NUMERIC_KINDS, element_names, reference_key, resolve
from .worker import Progress, decode_reply, pack

__all__ = ["DEFAULT_TIMEOUT", "STARTUP_ALLOWANCE", "FmuSession", "INTERFACES", "run_each", "run_parallel",
           "start_values", "state_references"]

INTERFACES = ("ModelExchange", "CoSimulation")

#: Longest one FMI call may take [s] (``--fmu-timeout``): far above a normal call (micro- to
#: milliseconds), short enough that a hanging binary is noticed within a minute.
DEFAULT_TIMEOUT = 60.0
#: Least time the worker gets to start (Python, numpy, fmpy) before its first FMI call [s].
STARTUP_ALLOWANCE = 60.0
_POLL = 0.2  # [s] slice of every wait: how soon Ctrl-C and deadlines are noticed
_EXIT_GRACE = 2.0  # [s] a closing worker may take to free its instance before it is killed
_WORKER_SCRIPT = str(Path(__file__).resolve().with_name("worker.py"))


def check_timeout(timeout: float) -> float:
    """``timeout`` if it is a positive finite number of seconds, else an FmuError."""
    if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0):
        raise FmuError(f"--fmu-timeout {timeout!r}: give the longest time one FMI call may take, a positive "
                       f"number of seconds (default {DEFAULT_TIMEOUT:g}).")
    return float(timeout)


def _worker_environment() -> dict[str, str]:
    """The worker's environment: the parent's, with one BLAS thread unless the user chose.

    The worker solves only small systems (Radau stages of an FMU's few states); a threaded
    OpenBLAS spends ~1 ms per tiny triangular solve waking its threads (measured: ``dgetrs``
    of a 6x6 system 2 ms with threads on a loaded 2-core machine, 2 µs with one).
    """
    env = dict(os.environ)
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(name, "1")
    return env


def _kill(process: subprocess.Popen) -> None:
    """Kill the worker's whole process group, then reap the worker (safe to call twice; used
    by the finalizer at interpreter exit).

    The worker leads a process group of its own (``process_group=0``); a binary that forks
    leaves its children in that group, and ``PR_SET_PDEATHSIG`` is not inherited across
    ``fork``, so only the group signal ends them (issue 31, finding 7).  The group is
    signalled before the worker is reaped: until then its id cannot be reused, so the signal
    reaches no stranger's group.  A child that leaves the group (``setsid``) escapes it, as
    it escapes any tool short of a cgroup.
    """
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _exited(process: subprocess.Popen, timeout: float) -> bool:
    """Whether the worker exits within ``timeout`` seconds, leaving it unreaped (``WNOWAIT``),
    so that :func:`_kill` can still signal its process group safely."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:  # reaped already
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


class FmuSession:
    """A live instance of the FMU of ``archive`` for one interface, in its own process.

    Parameters
    ----------
    archive : FmuArchive
        Its extraction folder is shared: the worker loads the binary from there and keeps
        its log and call buffer there.
    interface : {"ModelExchange", "CoSimulation"}, optional
        None: no instance (only :meth:`simulate_fmu`).
    timeout : float
        Longest one FMI call may take [s].
    log : text stream, optional
        Where the binary's captured stdout/stderr is copied, line by line and prefixed with
        the FMU's name, when the session closes (the CLI's ``--verbose``: ``sys.stderr``).
        Without it the log is deleted unread.
    wait : bool
        False: return while the worker still instantiates (its errors then come with the
        first request), so that several workers start in parallel (:meth:`open_many`).

    Raises
    ------
    FmuError
        Unknown interface, no binary for it, the instantiation failed, or the worker crashed
        or hung while instantiating.
    """

    #: The error of a refused FMI call (the worker-side twin is ``worker._Failure``).
    Failure = FmuError

    def __init__(self, archive: FmuArchive, interface: str | None, *, timeout: float = DEFAULT_TIMEOUT,
                 log: TextIO | None = None, wait: bool = True):
        if interface is not None and interface not in INTERFACES:
            raise FmuError(f"interface {interface!r} is not one of {', '.join(INTERFACES)}.")
        if interface is not None and not (archive.model_exchange if interface == "ModelExchange"
                                          else archive.co_simulation):
            raise FmuError(f"{archive.path.name}: the FMU has no {interface} interface with a binary for this "
                           "platform.")
        self.archive = archive
        self.interface = interface
        self.fmi3 = archive.fmi_version == 3
        self._params = [v for v in archive.variables.values()
                        if v.causality == "parameter" and v.variability in ("fixed", "tunable") and v.is_real]
        self.state_refs: list = state_references(archive, 0)
        self.derivative_refs: list = state_references(archive, 1)
        self.n_states = archive.n_states
        self._launch(archive.path.name, archive.directory, timeout, log)
        if interface is not None:
            self._instantiate("instantiate", (str(archive.directory), interface, self.n_states, self.state_refs,
                                              self.derivative_refs, archive.number_of_event_indicators), wait)

    def _launch(self, label: str, folder: Path, timeout: float, log: TextIO | None) -> None:
        """Start the worker (its log and call buffer in ``folder``; ``label`` names it in errors)."""
        #: What errors name: the FMU's file name (a system's: :mod:`fmi_adjoint.ssp.monolithic`).
        self.label = label
        self.folder = folder
        self.timeout = check_timeout(timeout)
        self.log = log
        self.next_event_time: float | None = None
        # set_point waiting to travel with the next evaluation
        self._point: tuple[float, list[float], list[int], list[float]] | None = None
        self._busy = self._instantiating = False
        self._expected: tuple[str, Callable[[object], object]] = ("no request", lambda payload: payload)
        self._limit = 0
        self._process: subprocess.Popen | None = None
        self._spawn()

    def _instantiate(self, op: str, args: tuple, wait: bool) -> None:
        """Send the request that creates the worker's instance (killing the worker if that fails)."""
        try:
            self.submit(op, args)
            self._instantiating = True
            if wait:
                self._instantiated()
        except BaseException:
            self.kill()
            raise

    @classmethod
    def open_many(cls, archive: FmuArchive, interface: str, count: int, **options) -> list[FmuSession]:
        """``count`` sessions, their workers started and instantiated in parallel."""
        sessions: list[FmuSession] = []
        try:
            for _ in range(count):
                sessions.append(cls(archive, interface, wait=False, **options))
            for session in sessions:
                session._instantiated()
        except BaseException:
            for session in sessions:
                session.kill()
            raise
        return sessions

    def _instantiated(self) -> None:
        if self._instantiating:
            self._instantiating = False
            self.result()

    @property
    def alive(self) -> bool:
        """Whether the worker still runs (a crash, a timeout or :meth:`close` ends it)."""
        return self._process is not None

    # -- the worker process ----------------------------------------------------------------
    def _spawn(self) -> None:
        folder = self.folder
        log_fd, log_path = tempfile.mkstemp(prefix="worker-", suffix=".log", dir=folder)
        self._log_path = Path(log_path)
        self._progress_path = self._log_path.with_suffix(".call")
        request_read = request_write = reply_read = reply_write = None
        try:
            self._progress = Progress(str(self._progress_path), create=True)
            request_read, request_write = os.pipe()
            reply_read, reply_write = os.pipe()
            self._process = subprocess.Popen(
                # -P: the script's folder (fmi_adjoint/fmu) is not put on sys.path.
                [sys.executable, "-P", "-u", _WORKER_SCRIPT, str(request_read), str(reply_write),
                 str(self._progress_path), self.label, str(os.getpid())],
                stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd, pass_fds=(request_read, reply_write),
                env=_worker_environment(),
                process_group=0,  # Ctrl-C in a terminal reaches the parent only
            )
        except BaseException:
            for fd in (request_write, reply_read):
                if fd is not None:
                    os.close(fd)
            raise
        finally:
            os.close(log_fd)
            for fd in (request_read, reply_write):
                if fd is not None:
                    os.close(fd)
        self._requests = Connection(request_write, readable=False)
        self._replies = Connection(reply_read, writable=False)
        self._finalizer = weakref.finalize(self, _kill, self._process)
        self._seen, self._since = 0, time.monotonic()

    def submit(self, op: str, args: tuple) -> None:
        """Send one request (answer it with :meth:`result`; see :func:`run_parallel`)."""
        if self._process is None:
            raise FmuError(f"{self.label}: the FMU's process has ended; open the FMU again.")
        self._instantiated()
        if self._busy:
            raise FmuError(f"internal error: {self.label}: a request is already in progress.")
        expected, limit = expectation(op, args, self.n_states), reply_limit(op, args, self.n_states)
        try:
            self._requests.send_bytes(pickle.dumps((op, args), protocol=pickle.HIGHEST_PROTOCOL))
        except (BrokenPipeError, ConnectionError):
            raise self._ended() from None
        except BaseException:
            self.kill()
            raise
        self._busy, self._expected = True, expected
        self._limit = limit
        self._since = time.monotonic()

    def _check_deadline(self) -> None:
        """FmuError (and the worker killed) if the call in progress is older than the timeout."""
        count, what = self._progress.read()
        now = time.monotonic()
        if count != self._seen:
            self._seen, self._since = count, now
            return
        limit = self.timeout if count else max(self.timeout, STARTUP_ALLOWANCE)
        if now - self._since > limit:
            self.kill()
            call = what if count else "starting the FMU's process"
            raise FmuError(
                f"{self.label}: {call} did not return within {limit:g} s, so the FMU's process was "
                "stopped; if the FMU is only slow, raise --fmu-timeout, otherwise have the FMU fixed."
            )

    def result(self):
        """The answer to the request in progress (waits; FmuError on a crash or a timeout)."""
        if not self._busy:
            raise FmuError(f"internal error: {self.label}: no request is in progress.")
        call, check = self._expected
        try:
            while not self._replies.poll(_POLL):
                self._check_deadline()
            data = self._receive(call)
        except (EOFError, OSError):
            raise self._ended() from None
        except MalformedReply as exc:
            raise self._malformed(call, exc) from None
        except BaseException:
            self.kill()
            raise
        self._busy = False
        try:
            status, payload = split(decode_reply(data))
            if status == "ok":
                return check(payload)
        except (pickle.UnpicklingError, ValueError, TypeError, EOFError, IndexError, KeyError, OverflowError,
                RecursionError, MemoryError, MalformedReply) as exc:
            # RecursionError and MemoryError too: what a forged reply makes of the checks
            # (deep nesting, huge repeated references) is still a forged reply.
            raise self._malformed(call, exc) from None
        finally:
            del data  # a large reply is freed before the error or the caller's work
        kind, message = payload
        name = self.label
        # The text is the worker's, and so within reach of the binary: one line, after our
        # own prefix naming the FMU and the call, so that it cannot pose as the tool's line.
        if kind == "convergence":  # the integrator's own text, which the optimizer may report as a note
            from ..errors import ConvergenceError

            raise ConvergenceError(one_line(message))
        if kind == "internal":
            text = one_line(message.removeprefix(f"{name}: "))
            raise FmuError(f"internal error in the FMU's process of {name} during {call} ({text}); please report it.")
        # The worker's own code (the Model Exchange loop, its budgets) names the FMU first; the
        # one-line text then reads as before.  Any other text is quoted after our prefix.
        if message.startswith(f"{name}: "):
            raise FmuError(one_line(message))
        raise FmuError(f'{name}: {call} failed; the FMU\'s process reported: "{one_line(message)}"')

    def _malformed(self, call: str, exc: BaseException) -> FmuError:
        """The error for a forged or corrupt reply; the worker is killed first: whatever wrote
        the reply, the worker is no longer trusted with the next request."""
        self.kill()
        reason = one_line(str(exc)[:300]) if not isinstance(exc, RecursionError) else "nested too deeply"
        return FmuError(f"{self.label}: the FMU's process answered {call} with a malformed reply "
                        f"({reason or type(exc).__name__}); the FMU binary corrupts or forges what its host "
                        "process sends. Have the FMU fixed.")

    def _receive(self, call: str) -> bytearray:
        """One reply frame (``multiprocessing.connection``'s framing: a big-endian signed 4-byte
        length, or -1 and an 8-byte length), read within ONE deadline of ``timeout`` seconds
        from its first byte, its announced size checked against the request's limit before
        the body is read.

        Raises EOFError (nothing at all: the worker ended), OSError (end of file within the
        frame: the worker died writing), MalformedReply (a size out of bounds) or FmuError
        (the frame did not complete in time; the worker is killed).
        """
        fd = self._replies.fileno()
        deadline = time.monotonic() + self.timeout
        header = self._read(fd, 4, deadline, call, first=True)
        (size,) = struct.unpack("!i", header)
        if size == -1:
            (size,) = struct.unpack("!Q", self._read(fd, 8, deadline, call))
        if not 0 <= size <= self._limit:
            raise MalformedReply(f"a reply announced as {size} bytes, outside 0 to {self._limit} bytes, the most "
                                 "this request is answered with")
        return self._read(fd, size, deadline, call)

    def _read(self, fd: int, size: int, deadline: float, call: str, *, first: bool = False) -> bytearray:
        """Exactly ``size`` bytes from ``fd`` by ``deadline``; the buffer grows with what arrives,
        never with what a header claims."""
        data = bytearray()
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while len(data) < size:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise FmuError(
                    f"{self.label}: the FMU's process began its answer to {call} but did not finish "
                    f"it within {self.timeout:g} s, so the FMU's process was stopped; the FMU binary stalls or "
                    "forges what its host process sends. Have the FMU fixed (if the machine is only "
                    "overloaded, raise --fmu-timeout).")
            if not poller.poll(1000 * min(left, _POLL)):  # slices: Ctrl-C is noticed at once
                continue
            chunk = os.read(fd, min(size - len(data), 1 << 20))
            if not chunk:
                if first and not data:
                    raise EOFError
                raise OSError("end of file within a reply")
            data += chunk
        return data

    def _request(self, op: str, args: tuple = ()):
        self.submit(op, args)
        return self.result()

    def run(self, job: tuple[str, tuple]):
        """Send one job (:meth:`cs_job`, :meth:`me_job`) and wait for its reply."""
        self._point = None
        return self._request(*job)

    def _ended(self) -> FmuError:
        """The error for a worker that died during a request: the signal and the call."""
        process = self._process
        if process is None:
            return FmuError(f"{self.label}: the FMU's process has ended; open the FMU again.")
        _kill(process)
        count, what = self._progress.read()
        call = what if count else "starting the FMU's process"
        self.kill()
        status = process.returncode
        if status is not None and status < 0:
            try:
                how = f"crashed with {signal.Signals(-status).name}"
            except ValueError:
                how = f"was ended by signal {-status}"
        else:
            how = f"ended its process (exit status {status})"
        return FmuError(f"{self.label}: the FMU binary {how} during {call}; the FMU is faulty: "
                        "rerun with --verbose to see its log, and report it to its author.")

    def kill(self) -> None:
        """Kill the worker at once and release everything (interrupts, errors, timeouts; a
        no-op once the worker has ended)."""
        if self._process is None:
            return
        self._finalizer()
        self._release()

    def _release(self) -> None:
        for connection in (self._requests, self._replies):
            connection.close()
        self._progress.close()
        self._process = None
        self._busy = False
        try:
            if self.log is not None:
                self._copy_log()
        finally:
            self._log_path.unlink(missing_ok=True)
            self._progress_path.unlink(missing_ok=True)

    def _copy_log(self) -> None:
        try:
            text = self._log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return
        for line in text.splitlines():
            print(f"[{self.label}] {line}", file=self.log)

    def close(self) -> None:
        """Free the instance and end the worker (killed if it does not exit within 2 s)."""
        if self._process is None:
            return
        if self._busy:
            self.kill()
            return
        try:
            self._requests.send_bytes(pickle.dumps(("exit", ())))
            _exited(self._process, _EXIT_GRACE)
        except OSError:
            pass  # killed below
        finally:
            self.kill()  # the process group too: whatever the binary forked

    # -- values and runs -------------------------------------------------------------------
    def _call(self, method: str, *args):
        point, self._point = self._point, None
        return self._request("call", (point, method, args))

    def refs(self, names: Sequence[str]) -> list:
        """References of variables given by name, as the worker takes them: an int for a
        float64 scalar, else ``(kind, vr, element, size)`` (integers, Booleans, FMI 3
        types and array elements ``A[i,j]``: :func:`.variables.resolve`)."""
        return [resolve(self.archive, n).wire() for n in names]

    def set_real(self, refs: Sequence, values: Sequence[float]) -> None:
        """Set numeric variables by reference (:meth:`refs`), each through its own type."""
        if len(refs):
            self._call("set_values", list(refs), [float(v) for v in values])

    def get_real(self, refs: Sequence) -> np.ndarray:
        """Numeric variables by reference (:meth:`refs`), as floats."""
        if not len(refs):
            return np.zeros(0)
        return self._call("get_values", list(refs))

    def _start_values(self, values: Mapping[str, float], inputs: Mapping[str, float]) -> tuple[list, list]:
        return start_values(self.archive, values, inputs)

    def start(self, values: Mapping[str, float], inputs: Mapping[str, float], t0: float, t_end: float) -> None:
        """Reset (after a previous run), set parameters and inputs, and initialize at ``t0``.

        Model Exchange instances end in continuous-time mode after the event iteration;
        :attr:`next_event_time` is the next time event (None if there is none).
        """
        self._point = None
        self.next_event_time = self._call("start", *self._start_values(values, inputs), float(t0), float(t_end))

    def cs_job(self, values: Mapping[str, float], grid: np.ndarray, outputs: Sequence[str],
               inputs: Callable[[float], dict[str, float]] | None = None) -> tuple[str, tuple]:
        """The request of :meth:`run_cs` (for :func:`run_parallel`)."""
        u0 = inputs(float(grid[0])) if inputs else {}
        table = (np.array([list(inputs(float(t)).values()) for t in grid]) if inputs and u0
                 else np.zeros((grid.size, 0)))
        refs, vals = self._start_values(values, u0)
        return "run_cs", (refs, vals, pack(grid), self.refs(outputs), self.refs(list(u0)), pack(table))

    def run_cs(self, values: Mapping[str, float], grid: np.ndarray, outputs: Sequence[str],
               inputs: Callable[[float], dict[str, float]] | None = None) -> np.ndarray:
        """Co-simulation over the communication points ``grid``; outputs at every point.

        Inputs are set at the start of each communication step (their value there).
        """
        self._point = None
        return self._request(*self.cs_job(values, grid, outputs, inputs))

    # -- a co-simulation master's steps (:mod:`fmi_adjoint.ssp.master`) --------------------
    def step_request(self, t: float, h: float, input_refs: Sequence, inputs: Sequence[float],
                     output_refs: Sequence, slopes: Sequence[float] = ()) -> tuple[str, tuple]:
        """The request of :meth:`step`, to send with :meth:`submit` (answered by :meth:`result`)
        or :func:`run_each`, so that several components step at once."""
        return "call", (None, "step", (float(t), float(h), list(input_refs), [float(v) for v in inputs],
                                       [float(v) for v in slopes], list(output_refs)))

    def step(self, t: float, h: float, input_refs: Sequence, inputs: Sequence[float], output_refs: Sequence,
             slopes: Sequence[float] = ()) -> np.ndarray:
        """One communication step of a started Co-Simulation instance: set the inputs (references
        of :meth:`refs`) and, with ``slopes``, their time derivatives (FMI 2
        ``fmi2SetRealInputDerivatives``, order 1, for an FMU that ``canInterpolateInputs``),
        ``doStep`` from ``t`` by ``h``, and return the outputs at ``t + h``."""
        self._point = None
        return self._request(*self.step_request(t, h, input_refs, inputs, output_refs, slopes))

    def exchange_request(self, input_refs: Sequence, inputs: Sequence[float],
                         output_refs: Sequence) -> tuple[str, tuple]:
        """The request of :meth:`exchange` (for :meth:`submit` or :func:`run_each`)."""
        return "call", (None, "exchange", (list(input_refs), [float(v) for v in inputs], list(output_refs)))

    def exchange(self, input_refs: Sequence, inputs: Sequence[float], output_refs: Sequence) -> np.ndarray:
        """Set inputs and read outputs at the current communication point, in one request (an
        iteration on an algebraic loop)."""
        self._point = None
        return self._request(*self.exchange_request(input_refs, inputs, output_refs))

    def simulate_fmu(self, **options) -> dict[str, np.ndarray]:
        """``fmpy.simulate_fmu`` on the extraction folder, in the worker; the result by column."""
        signal_table = options.pop("input", None)
        if signal_table is not None:
            names = list(signal_table.dtype.names)
            options["input"] = (names, pack(np.column_stack([signal_table[n] for n in names])))
        return self._request("simulate_fmu", (str(self.archive.directory), options))

    # -- Model Exchange evaluation ---------------------------------------------------------
    def initial_states(self) -> np.ndarray:
        """Continuous states after initialization."""
        return self._call("initial_states")

    def set_point(self, t: float, x: np.ndarray, input_refs: Sequence[int] = (), u: Sequence[float] = ()) -> None:
        """Set time, states and inputs of a Model Exchange instance (sent with the next evaluation)."""
        self._point = (float(t), [float(v) for v in x], list(input_refs), [float(v) for v in u])

    def derivatives(self) -> np.ndarray:
        """State derivatives at the current point."""
        return self._call("derivatives")

    def rhs(self, outputs: Sequence[int] = ()) -> np.ndarray:
        """State derivatives followed by the real variables ``outputs``, in one request."""
        return self._call("rhs", list(outputs))

    def directional(self, unknowns: Sequence[int], known: int, seed: float = 1.0) -> np.ndarray:
        """Directional derivative of ``unknowns`` with respect to one known (a Jacobian column).

        Raises FmuError if the FMU refuses (e.g. a parameter as known in FMI 2).
        """
        return self._call("directional", list(unknowns), int(known), float(seed))


def state_references(archive: FmuArchive, which: int) -> list[int]:
    """Per state element the value reference of the state (``which`` 0) or of its derivative (1).
    An element of an array state has no reference of its own (-1): its Jacobian columns come from
    differences (FmuProblem never asks the FMU for them)."""
    return [pair[which].valueReference if size == 1 and not pair[which].shape else -1
            for *pair, size in archive.continuous_states for _ in range(size)]


def start_values(archive: FmuArchive, values: Mapping[str, float],
                 inputs: Mapping[str, float]) -> tuple[list, list]:
    """References and values set before initialization: the start value of every fixed or
    tunable numeric parameter (whole arrays element by element, so the worker sets them
    without reading them first), overridden by ``values`` (names as addressed, ``A[1,2]``
    included), then the inputs.

    Numbers are told apart by :func:`~.variables.reference_key` (base type class, value
    reference, element): in FMI 2 a Real and an Integer parameter may share a value
    reference and are still two parameters, so neither value may replace the other.
    """
    chosen: dict[tuple[str, int, int | None], tuple] = {}
    for v in archive.variables.values():
        if v.causality != "parameter" or v.variability not in ("fixed", "tunable") or v.kind not in NUMERIC_KINDS:
            continue
        if v.shape and v.start_values is not None:
            for name, start in zip(element_names(v), v.start_values):
                ref = resolve(archive, name)
                chosen[reference_key(archive, ref)] = (ref.wire(), start)
        elif not v.shape and v.start is not None:
            ref = resolve(archive, v.name)
            chosen[reference_key(archive, ref)] = (ref.wire(), v.start)
    for name, value in values.items():
        ref = resolve(archive, name)
        chosen[reference_key(archive, ref)] = (ref.wire(), value)
    refs = [ref for ref, _ in chosen.values()]
    vals = [float(value) for _, value in chosen.values()]
    for name, value in inputs.items():
        refs.append(resolve(archive, name).wire())
        vals.append(float(value))
    return refs, vals



def run_each(sessions: Sequence[FmuSession], requests: Sequence[tuple[str, tuple]]) -> list:
    """The answers to ``requests[k]`` sent to ``sessions[k]``, all at once (each session's worker
    runs its own: components of a co-simulation step in parallel).  The first error (a refused
    call, a crash, a timeout) kills the workers still busy and propagates, as does any
    interrupt."""
    results: list = [None] * len(sessions)
    running: dict[int, FmuSession] = {}
    try:
        for k, (session, (op, args)) in enumerate(zip(sessions, requests, strict=True)):
            session.submit(op, args)
            running[k] = session
        while running:
            ready = wait([s._replies for s in running.values()], timeout=_POLL)
            for k, session in list(running.items()):
                if session._replies in ready:
                    del running[k]
                    results[k] = session.result()
                else:
                    session._check_deadline()
    except BaseException:
        for session in running.values():
            session.kill()
        raise
    return results


def run_parallel(sessions: Sequence[FmuSession], jobs: Sequence[tuple[str, tuple]]) -> list:
    """The answers to ``jobs`` (requests such as :meth:`FmuSession.cs_job`), each sent to the
    next idle session, in job order.  The first error (a refused call, a crash, a timeout)
    kills the workers still busy and propagates, as does any interrupt."""
    results = [None] * len(jobs)
    pending = list(enumerate(jobs))
    running: dict[FmuSession, int] = {}
    try:
        while pending or running:
            for session in sessions:
                if session not in running and pending:
                    index, (op, args) = pending.pop(0)
                    session.submit(op, args)
                    running[session] = index
            ready = wait([s._replies for s in running], timeout=_POLL)
            for session in list(running):
                if session._replies in ready:
                    index = running.pop(session)
                    results[index] = session.result()
                else:
                    session._check_deadline()
    except BaseException:
        for session in running:
            session.kill()
        raise
    return results
