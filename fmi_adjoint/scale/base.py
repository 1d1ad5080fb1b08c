"""The executor contract: every piece of parallel work of fmi-adjoint is a :class:`Task`
run by an :class:`AbstractExecutor` (issue 14).

What runs in parallel
---------------------
* the experiments of one cost (their costs and gradients are summed in experiment order),
* the evaluations of the starts of a multi-start (one optimizer thread per start in the
  parent; each evaluation is a task),
* finite-difference columns,
* Monte-Carlo re-identifications.

Tasks are small picklable objects holding *what to build* (model text, data bytes,
settings), never compiled objects; a worker builds what a task names once, through the
build cache, and keeps it in its :class:`WorkerContext` for the next task of the same
problem.  Results come back in submission order, so sums over tasks have one fixed order
and serial, process-pool and Dask runs give the same numbers bit for bit.
"""

from __future__ import annotations

import abc
import collections
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, InvalidStateError
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar, runtime_checkable

__all__ = ["AbstractExecutor", "CallTask", "RESIDENT_LIMIT", "SerialExecutor", "Task", "WorkerContext", "settle"]

T = TypeVar("T")

#: Built problems a worker keeps (least recently used dropped first).  A multi-start keeps
#: one; a sweep over models keeps a few.
RESIDENT_LIMIT = 8


class WorkerContext:
    """What one worker process keeps between tasks: built problems, by key.

    One context exists per worker process (the local pool creates it in the worker's main
    function, the Dask adapter in a worker plugin, the serial executor in its instance), so
    nothing here is module-level state.  Objects are used under a per-key lock: a Dask worker
    with several threads runs the tasks of one problem one after another (the compiled
    engines are not re-entrant).
    """

    def __init__(self, limit: int = RESIDENT_LIMIT):
        self.limit = limit
        self._objects: collections.OrderedDict[str, Any] = collections.OrderedDict()
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        #: Objects built by this context (for tests and the benchmark's overhead figures).
        self.builds = 0

    @contextmanager
    def resident(self, key: str, build: Callable[[], T]) -> Iterator[T]:
        """The object stored under ``key``, built by ``build()`` on first use; held under
        the key's lock while the ``with`` block runs."""
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            with self._guard:
                found = key in self._objects
                if found:
                    self._objects.move_to_end(key)
                    obj = self._objects[key]
            if not found:
                obj = build()
                self.builds += 1
                evicted = []
                with self._guard:
                    self._objects[key] = obj
                    while len(self._objects) > self.limit:
                        evicted.append(self._objects.popitem(last=False)[1])
                for old in evicted:
                    _close(old)
            yield obj

    def close(self) -> None:
        """Close every kept object that has a ``close`` method (an FMU session, its folder);
        the worker's last act."""
        with self._guard:
            objects = list(self._objects.values())
            self._objects.clear()
        for obj in objects:
            _close(obj)


def _close(obj: Any) -> None:
    close = getattr(obj, "close", None)
    if callable(close):
        close()


@runtime_checkable
class Task(Protocol):
    """A unit of parallel work: picklable, deterministic, and self-contained."""

    def run(self, context: WorkerContext) -> Any:
        """Do the work in a worker (``context`` keeps built objects between tasks)."""
        ...


class CallTask:
    """A task that calls an importable function (module-level, picklable by reference)."""

    def __init__(self, function: Callable[..., Any], *args: Any):
        self.function = function
        self.args = args

    def run(self, context: WorkerContext) -> Any:
        return self.function(*self.args)

    def __repr__(self) -> str:
        return f"CallTask({getattr(self.function, '__qualname__', self.function)!r}, {len(self.args)} args)"


def settle(future: Future, *, result: Any = None, error: BaseException | None = None) -> None:
    """Resolve ``future`` with ``result`` or ``error`` unless it is already done (cancelled by
    its owner): the executors' one way to hand back what a worker sent."""
    try:
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)
    except InvalidStateError:
        pass


class AbstractExecutor(abc.ABC):
    """Runs tasks: serially in this process, in a local process pool, or on a Dask cluster.

    Contract
    --------
    * :meth:`submit` returns a :class:`concurrent.futures.Future`; its result is the task's
      return value, or the exception the task raised (re-raised by ``result()``).
    * A worker that dies mid-task has its task run again on another worker (the task is
      deterministic, so the result does not change); a task that kills its worker on every
      retry fails with :class:`~fmi_adjoint.errors.ExecutorError`.
    * :meth:`submit` may be called from several threads at once.
    * :meth:`close` (also on ``with`` exit) stops the workers; pending futures are cancelled.
    """

    #: Short name for reports (``serial``, ``pool``, ``dask``).
    name: str = "executor"

    @property
    @abc.abstractmethod
    def workers(self) -> int:
        """Number of tasks that can run at the same time."""

    @abc.abstractmethod
    def submit(self, task: Task) -> Future:
        """Start ``task``; the future holds its result."""

    def map(self, tasks: Iterable[Task]) -> list:
        """Results of ``tasks`` in their order (the first failure is raised after all ended).

        Ctrl-C while waiting (or any other exception that is not an :class:`Exception`) is
        raised at once, and the tasks that have not started are cancelled."""
        futures = [self.submit(task) for task in tasks]
        results: list = []
        failure: Exception | None = None
        try:
            for future in futures:
                try:
                    results.append(future.result())
                except Exception as exc:  # noqa: BLE001 -- raised below, after every task ended
                    failure = failure or exc
                    results.append(None)
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        if failure is not None:
            raise failure
        return results

    @abc.abstractmethod
    def close(self) -> None:
        """Stop the workers (idempotent)."""

    def describe(self) -> dict:
        """JSON-ready description for result files."""
        return {"executor": self.name, "workers": self.workers}

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


class SerialExecutor(AbstractExecutor):
    """Runs every task at once in the calling thread (the reference for determinism)."""

    name = "serial"

    def __init__(self) -> None:
        self.context = WorkerContext()

    @property
    def workers(self) -> int:
        return 1

    def submit(self, task: Task) -> Future:
        future: Future = Future()
        try:
            future.set_result(task.run(self.context))
        except BaseException as exc:  # noqa: BLE001 -- carried by the future, like the other executors
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            future.set_exception(exc)
        return future

    def close(self) -> None:
        """Close what the tasks kept in this executor's context (as a worker does at its end)."""
        self.context.close()

