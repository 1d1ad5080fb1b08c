"""The local process pool: tasks run in worker processes on this machine (issue 14).

Why not :class:`concurrent.futures.ProcessPoolExecutor`: when one of its workers dies (an FMU
binary that segfaults, the kernel's out-of-memory killer), the executor becomes
``BrokenProcessPool`` and every pending future fails.  Here a dead worker is replaced and its
task runs again, as the :class:`~fmi_adjoint.scale.base.AbstractExecutor` contract asks.

Design
------
* **Start method**: "forkserver" with this module preloaded, so a new worker is a fork of a
  small server that has already imported the worker loop (about 10 ms instead of about
  0.1 s for a fresh interpreter); "spawn" where there is no forkserver.  Never plain "fork":
  the parent runs optimizer threads that submit concurrently, and forking a multi-threaded
  process can copy a held lock into the child.  With either method a worker imports the
  parent's main script again (as ``__mp_main__``), so scripts need the
  ``if __name__ == "__main__":`` guard.
* **Workers** (:func:`_serve`) run one task at a time: a pickled task arrives over a
  :func:`multiprocessing.Pipe`, ``task.run(context)`` runs, ``("ok", result)`` or
  ``("error", exception, traceback text)`` goes back.  The loop owns the worker's one
  :class:`~fmi_adjoint.scale.base.WorkerContext` as a local variable.  An exception that
  cannot travel back (not picklable) is replaced by an :class:`ExecutorError` carrying its
  type name and message.
* **One dispatcher thread** in the parent hands queued tasks to idle workers in submission
  order and waits (:func:`multiprocessing.connection.wait`) on the worker pipes, the workers'
  process sentinels and a wake-up pipe written by :meth:`LocalPool.submit`.  Only this thread
  talks to workers and resolves running futures; the lock guards the queue and the worker
  list.  Workers start on demand, up to the configured count.
* **Fault tolerance**: a worker that dies (its sentinel becomes ready, or its pipe reaches
  end-of-file) is reaped; its task goes back to the *front* of the queue and runs on another
  or a freshly started worker.  A task whose worker died ``max_retries + 1`` times fails
  with :class:`ExecutorError` naming the task and the exit code or signal (the retry count
  of Dask's ``allowed-failures``).
* **Signals and shutdown**: workers ignore SIGINT from the first line of :func:`_serve` (Ctrl-C
  reaches only the parent, which closes the pool; one that arrives while a worker is still
  starting ends that worker, which is replaced like any dead worker) and end when the pool's
  process dies, even by SIGKILL and in the middle of a task (:func:`_die_with_parent`:
  ``PR_SET_PDEATHSIG`` and a thread that watches multiprocessing's parent sentinel; the
  forkserver itself outlives the pool's process while it has children, so the kernel's signal
  alone would not do). :meth:`LocalPool.close` cancels queued futures, sends end-of-file to idle
  workers, terminates busy ones, kills what is left after a grace period and reaps every
  process. Until then an :mod:`atexit` hook closes a pool the program forgot.
"""

from __future__ import annotations

import atexit
import collections
from collections.abc import Sequence
import ctypes
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from concurrent.futures import Future
from multiprocessing.connection import Connection, wait
from typing import Any

from ..errors import ExecutorError
from .base import AbstractExecutor, Task, WorkerContext, settle

__all__ = ["LocalPool"]

#: prctl option: the signal the kernel sends to a process when its parent dies (Linux).
_PR_SET_PDEATHSIG = 1

#: Seconds an idle worker gets to leave its loop at :meth:`LocalPool.close` before SIGKILL.
_STOP_GRACE = 2.0

_CRASH_FIX = "the task crashes its worker; run it serially (--workers 1) to see the error"


# -- the worker process -----------------------------------------------------------------------
def _die_with_parent() -> None:
    """End this worker when the process that owns the pool dies, even by SIGKILL.

    Two mechanisms, because the direct parent differs: ``PR_SET_PDEATHSIG`` (Linux) is the
    kernel's, immediate even while a task holds the GIL, and watches the direct parent: the
    pool's process under "spawn", but the server under "forkserver" (which lives on while it
    has children).  A daemon thread waiting on multiprocessing's parent sentinel (a pipe the
    pool's process keeps open for each worker) watches the pool's process under both methods
    and on every platform.
    """
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the thread below still ends the worker
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)
    owner = multiprocessing.parent_process()
    if owner is not None:
        threading.Thread(target=_exit_when_ready, args=(owner.sentinel,), name="fmi-adjoint-parent-watch",
                         daemon=True).start()


def _exit_when_ready(sentinel: int) -> None:
    wait([sentinel])
    os._exit(1)  # the pool's process is gone: nobody will read a result


def _label(task: object) -> str:
    return "a task that could not be unpickled" if task is None else repr(task)


def _error_reply(task: object, exc: BaseException) -> bytes:
    """``("error", exception, traceback text)``, pickled; the exception is replaced by an
    :class:`ExecutorError` if the parent could not rebuild it."""
    text = "".join(traceback.format_exception(exc))
    if not isinstance(exc, Exception):  # SystemExit or KeyboardInterrupt raised by the task itself
        exc = ExecutorError(f"{_label(task)} raised {type(exc).__name__}({exc}) in a pool worker; a task must "
                            "return a value or raise an Exception, never exit the process.")
    try:
        reply = pickle.dumps(("error", exc, text), protocol=pickle.HIGHEST_PROTOCOL)
        pickle.loads(reply)  # the parent must be able to rebuild it, not just this process to write it
    except Exception:  # noqa: BLE001 -- any failure means: send a plain description instead
        stand_in = ExecutorError(f"{_label(task)} raised {type(exc).__qualname__}: {exc} (the exception cannot be "
                                 "pickled, so it is reported as this error); raise picklable exceptions from tasks.")
        reply = pickle.dumps(("error", stand_in, text), protocol=pickle.HIGHEST_PROTOCOL)
    return reply


def _run_one(request: bytes, context: WorkerContext) -> bytes:
    """Unpickle a task, run it, and pickle the reply (never raises)."""
    task: Any = None
    try:
        task = pickle.loads(request)
        result = task.run(context)
    except BaseException as exc:  # noqa: BLE001 -- every outcome of a task is a reply
        return _error_reply(task, exc)
    try:
        return pickle.dumps(("ok", result), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 -- reported to the parent, like the task's own errors
        return _error_reply(task, ExecutorError(
            f"the result of {_label(task)} cannot be pickled ({type(exc).__name__}: {exc}); return plain data "
            "(numbers, arrays, tuples, instances of module-level classes) from Task.run."))


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)


def _serve(conn: Connection) -> None:
    """Main function of a worker process: run the tasks sent over ``conn``, one at a time,
    until end-of-file.  The worker's one :class:`WorkerContext` lives here."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The pool stops busy workers with SIGTERM (an interrupted run): leave through the finally
    # below, so that what the tasks kept (FMU sessions, extracted folders) is removed.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    _die_with_parent()
    context = WorkerContext()
    try:
        while True:
            try:
                request = conn.recv_bytes()
            except (EOFError, OSError):
                return
            reply = _run_one(request, context)
            try:
                conn.send_bytes(reply)
            except OSError:  # the parent is gone
                return
    finally:
        context.close()  # what the tasks kept (an FMU session and its folder)


# -- the parent: bookkeeping and the dispatcher -------------------------------------------------
class _WorkerTraceback(Exception):
    """The traceback of a task's exception in its worker process (set as ``__cause__``)."""

    def __str__(self) -> str:
        return "\n" + str(self.args[0]) if self.args else ""


class _Job:
    """A submitted task: its pickle (made once, reused by retries), its future, its deaths."""

    __slots__ = ("task", "payload", "future", "started", "deaths")

    def __init__(self, task: Task, payload: bytes, future: Future):
        self.task = task
        self.payload = payload
        self.future = future
        self.started = False
        self.deaths = 0


class _Worker:
    """A worker process, the parent's end of its pipe, and the job it runs (``None``: idle)."""

    __slots__ = ("process", "conn", "job")

    def __init__(self, process: Any, conn: Connection):
        self.process = process
        self.conn = conn
        self.job: _Job | None = None


def _exit_status(code: int | None) -> str:
    if code is None:
        return "unknown exit status"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _context(method: str, preload: tuple[str, ...] = ()) -> Any:
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        # Takes effect when the (process-wide) server starts; a server already running keeps
        # its own list and still works, the workers then import these modules themselves.
        context.set_forkserver_preload([__name__, *preload])
    return context


class LocalPool(AbstractExecutor):
    """Runs tasks in ``workers`` processes of this machine (``None``: one per CPU).

    ``max_retries`` is how often a task whose worker died is run again before its future
    fails with :class:`ExecutorError` (so a task may kill ``max_retries + 1`` workers).
    ``preload``: modules the fork server imports once for all workers (the first pool of a
    process decides: the server is process-wide).
    Workers start on the first :meth:`submit`; use the pool in a ``with`` block or call
    :meth:`close`.
    """

    name = "pool"

    def __init__(self, workers: int | None = None, *, max_retries: int = 3, preload: Sequence[str] = ()):
        count = (os.cpu_count() or 1) if workers is None else workers
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ExecutorError(f"LocalPool(workers={workers!r}): the number of worker processes must be a whole "
                                "number of at least 1; give e.g. --workers 4, or none for one per CPU.")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ExecutorError(f"LocalPool(max_retries={max_retries!r}): the retries of a task whose worker died "
                                "must be a whole number of at least 0; give e.g. max_retries=3.")
        self._count = count
        self.max_retries = max_retries
        #: Modules the fork server imports once, so that workers start with them (e.g.
        #: ``fmi_adjoint.identify.parallel``: 1.3 s per worker otherwise).
        self.preload = tuple(preload)
        #: "forkserver" where available, else "spawn" (never "fork": see the module docstring).
        self.start_method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
        self._lock = threading.Lock()
        self._pending: collections.deque[_Job] = collections.deque()
        self._procs: list[_Worker] = []
        self._idle: collections.deque[_Worker] = collections.deque()  # longest idle first
        self._closed = False
        self._failure: BaseException | None = None  # what stopped the dispatcher, if not close()
        self._deaths = 0
        self._dispatcher: threading.Thread | None = None
        self._wake_reader: Connection | None = None
        self._wake_writer: Connection | None = None
        self._wake_pending = False

    # -- the public side ----------------------------------------------------------------------
    @property
    def workers(self) -> int:
        return self._count

    @property
    def worker_deaths(self) -> int:
        """Worker processes that died while the pool was open (killed, crashed, exited)."""
        with self._lock:
            return self._deaths

    def worker_pids(self) -> list[int]:
        """Process ids of the running workers (for tests and diagnostics)."""
        with self._lock:
            return [w.process.pid for w in self._procs]

    def describe(self) -> dict:
        return {"executor": self.name, "workers": self._count, "start_method": self.start_method,
                "max_retries": self.max_retries}

    def submit(self, task: Task) -> Future:
        future: Future = Future()
        try:
            payload = pickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 -- carried by the future, like the task's own errors
            future.set_exception(ExecutorError(
                f"{task!r} cannot be sent to a worker process ({type(exc).__name__}: {exc}); a task must be "
                "picklable: module-level classes and functions, no lambdas, open files or locks."))
            return future
        with self._lock:
            if self._failure is not None:
                raise ExecutorError(f"this LocalPool stopped ({type(self._failure).__name__}: {self._failure}); "
                                    "open a new pool, or run serially (--workers 1).") from self._failure
            if self._closed:
                raise ExecutorError("this LocalPool is closed; submit tasks before close() (or the end of its "
                                    "'with' block), or open a new pool.")
            self._pending.append(_Job(task, payload, future))
            if self._dispatcher is None:
                self._start_dispatcher()
            self._wake()
        return future

    def close(self) -> None:
        with self._lock:
            self._closed = True
            queued = list(self._pending)
            self._pending.clear()
            thread = self._dispatcher
            self._wake()
        for job in queued:
            self._abandon(job)
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        atexit.unregister(self.close)

    # -- the dispatcher -----------------------------------------------------------------------
    def _start_dispatcher(self) -> None:
        """Start the dispatcher thread and its wake-up pipe (called under the lock)."""
        self._wake_reader, self._wake_writer = multiprocessing.Pipe(duplex=False)
        self._dispatcher = threading.Thread(target=self._dispatch, name="fmi-adjoint-pool", daemon=True)
        self._dispatcher.start()
        atexit.register(self.close)

    def _wake(self) -> None:
        """Wake the dispatcher (called under the lock; at most one wake-up is in the pipe, so
        a writer never blocks on a full pipe)."""
        if self._wake_writer is not None and not self._wake_pending:
            self._wake_writer.send_bytes(b"")
            self._wake_pending = True

    def _dispatch(self) -> None:
        failure: BaseException | None = None
        try:
            self._serve_queue(_context(self.start_method, self.preload))
        except BaseException as exc:  # noqa: BLE001 -- reported through every future, below
            failure = exc
        finally:
            self._shutdown(failure)

    def _serve_queue(self, context: Any) -> None:
        assert self._wake_reader is not None
        while True:
            with self._lock:
                if self._closed:
                    return
                missing = min(self._count - len(self._procs), len(self._pending) - len(self._idle))
            for _ in range(missing):
                worker = self._start_worker(context)
                with self._lock:
                    self._procs.append(worker)
                    self._idle.append(worker)
            self._assign()
            with self._lock:
                procs = list(self._procs)
            handles: dict[Any, _Worker] = {}
            for w in procs:
                handles[w.conn] = w
                handles[w.process.sentinel] = w
            ready = wait([self._wake_reader, *handles])
            if self._wake_reader in ready:
                with self._lock:
                    self._wake_reader.recv_bytes()
                    self._wake_pending = False
            for w in procs:
                exited = w.process.sentinel in ready
                if exited or w.conn in ready:
                    self._collect(w, exited)

    def _start_worker(self, context: Any) -> _Worker:
        parent_end, child_end = context.Pipe()
        process = context.Process(target=_serve, args=(child_end,), name="fmi-adjoint-pool-worker", daemon=True)
        try:
            process.start()
        except BaseException:
            parent_end.close()
            raise
        finally:
            child_end.close()  # the worker holds the only other end: its death means end-of-file here
        return _Worker(process, parent_end)

    def _assign(self) -> None:
        """Send queued jobs, oldest first, to idle workers, longest idle first (so that the
        work spreads over all workers even when tasks are shorter than a submission)."""
        while True:
            with self._lock:
                if self._closed or not self._idle or not self._pending:
                    return
                worker = self._idle.popleft()
                job = self._pending.popleft()
            if not job.started:
                if not job.future.set_running_or_notify_cancel():  # cancelled by its owner while queued
                    with self._lock:
                        self._idle.appendleft(worker)
                    continue
                job.started = True
            worker.job = job
            try:
                worker.conn.send_bytes(job.payload)
            except OSError:
                pass  # the worker died; its sentinel reports it and the job is queued again

    def _collect(self, worker: _Worker, exited: bool) -> None:
        """Read the reply of ``worker`` if there is one (a worker may die right after it
        answered), and bury the worker if it died."""
        ended = exited
        try:
            if worker.conn.poll():
                reply = worker.conn.recv_bytes()
                job, worker.job = worker.job, None
                if job is not None:  # (a reply always answers a job)
                    with self._lock:
                        self._idle.append(worker)
                    self._resolve(job, reply)
        except (EOFError, OSError):
            ended = True
        if ended:
            self._bury(worker)

    def _resolve(self, job: _Job, reply: bytes) -> None:
        try:
            outcome = pickle.loads(reply)
        except Exception as exc:  # noqa: BLE001 -- the future carries it
            outcome = ("error", ExecutorError(
                f"the reply for {job.task!r} cannot be unpickled in the parent process ({type(exc).__name__}: "
                f"{exc}); tasks must return objects of classes the parent can import."), "")
        if outcome[0] == "ok":
            settle(job.future, result=outcome[1])
            return
        _, error, text = outcome
        if text and error.__cause__ is None:
            error.__cause__ = _WorkerTraceback(text)
        settle(job.future, error=error)

    def _bury(self, worker: _Worker) -> None:
        """Reap a dead worker; queue its job again, or fail it after too many deaths."""
        worker.process.join(_STOP_GRACE)
        if worker.process.exitcode is None:  # end-of-file without an exit: make it one
            worker.process.kill()
            worker.process.join()
        status = _exit_status(worker.process.exitcode)
        worker.conn.close()
        worker.process.close()
        job, worker.job = worker.job, None
        with self._lock:
            self._procs.remove(worker)
            if worker in self._idle:
                self._idle.remove(worker)
            self._deaths += 1
            if job is not None and job.deaths < self.max_retries:
                job.deaths += 1
                self._pending.appendleft(job)  # first in line: it was the oldest running
                return
        if job is not None:
            settle(job.future, error=ExecutorError(
                f"{job.task!r} ended its worker process {job.deaths + 1} times (last: {status}); {_CRASH_FIX}."))

    def _shutdown(self, failure: BaseException | None) -> None:
        """Stop every worker and resolve every future left (runs last in the dispatcher)."""
        with self._lock:
            self._closed = True
            self._failure = failure
            procs, self._procs = self._procs, []
            self._idle.clear()
            left = list(self._pending)
            self._pending.clear()
        for w in procs:
            if w.job is None:
                w.conn.close()  # end-of-file: the worker leaves its loop
            else:
                w.process.terminate()
        deadline = time.monotonic() + _STOP_GRACE
        for w in procs:
            w.process.join(max(0.0, deadline - time.monotonic()))
            if w.process.exitcode is None:
                w.process.kill()
                w.process.join()
            w.conn.close()
            w.process.close()
        for job in left + [w.job for w in procs if w.job is not None]:
            self._abandon(job, failure)
        with self._lock:
            for end in (self._wake_reader, self._wake_writer):
                if end is not None:
                    end.close()
            self._wake_reader = self._wake_writer = None

    @staticmethod
    def _abandon(job: _Job, failure: BaseException | None = None) -> None:
        """At close: cancel a job that never started, fail one that did (it ran, or waits for
        a retry).  After an internal failure: fail every job with it."""
        if failure is None:
            if job.future.cancel():
                return
            error = ExecutorError(f"the LocalPool was closed before {job.task!r} finished; close the pool only "
                                  "after the results are in.")
        else:
            error = ExecutorError(f"the LocalPool stopped ({type(failure).__name__}: {failure}) before "
                                  f"{job.task!r} finished; rerun, or run serially (--workers 1).")
            error.__cause__ = failure
        settle(job.future, error=error)
