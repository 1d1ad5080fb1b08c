"""The Dask adapter: tasks run on the workers of a Dask ``distributed`` cluster (issue 14).

Design
------
* **distributed is optional** (``pip install 'fmi-adjoint[dask]'``): it is imported in the
  constructor, so importing this module costs nothing and a missing install is one
  :class:`~fmi_adjoint.errors.ExecutorError` with the command that fixes it.
* **One WorkerContext per Dask worker process** lives in a worker plugin registered under
  :data:`PLUGIN_NAME` (``distributed.WorkerPlugin``, ``Client.register_plugin``); the task
  wrapper :func:`_run` finds it through ``distributed.get_worker().plugins``.  The plugin is
  idempotent: several executors on one cluster share the contexts, a restarted worker gets a
  fresh one.  Its class derives from ``distributed.WorkerPlugin`` and so can only be defined
  once distributed is imported; :func:`_context_plugin` defines it, and its instances pickle
  as a call of that function, so a worker rebuilds one without looking the class up by name.
* **Tasks** are submitted as ``_run(task)`` with ``pure=False`` and a unique key (two equal
  tasks are two runs, never one cached result).  A :class:`concurrent.futures.Future` is
  resolved by a done callback of the Dask future (Dask calls it in its callback thread); the
  exception a task raised is re-raised by ``result()`` with its own type, as Dask rebuilds it.
* **Worker death**: the scheduler runs the task of a worker that died on another worker, up
  to ``distributed.scheduler.allowed-failures`` times (3 by default); then Dask gives up with
  ``KilledWorker``, which becomes an :class:`ExecutorError` with the fix.
"""

from __future__ import annotations

import functools
import threading
import uuid
from concurrent.futures import Future
from typing import Any

from ..errors import ExecutorError
from .base import AbstractExecutor, Task, WorkerContext, settle

__all__ = ["DaskExecutor", "PLUGIN_NAME"]

#: Name of the worker plugin that holds the WorkerContext of a Dask worker.
PLUGIN_NAME = "fmi-adjoint-worker-context"

_MISSING = "--dask needs the optional dependency Dask distributed; install it with: pip install 'fmi-adjoint[dask]'"


def _context_plugin() -> Any:
    """A new worker plugin holding one :class:`WorkerContext` (made in ``setup``, on the worker)."""
    from distributed import WorkerPlugin

    class ContextPlugin(WorkerPlugin):
        idempotent = True  # a second executor on the same cluster keeps the contexts

        def __init__(self) -> None:
            self.context: WorkerContext | None = None

        def setup(self, worker: Any) -> None:
            self.context = WorkerContext()

        def teardown(self, worker: Any) -> None:
            if self.context is not None:
                self.context.close()
            self.context = None

        def __reduce__(self) -> tuple:
            return (_context_plugin, ())

    return ContextPlugin()


def _run(task: Task) -> Any:
    """What a Dask worker runs: ``task.run`` with the worker's context."""
    from distributed import get_worker

    try:
        plugin = get_worker().plugins.get(PLUGIN_NAME)
    except ValueError:  # not inside a worker (a client's local fallback): nothing to keep
        plugin = None
    context = getattr(plugin, "context", None)
    return task.run(context if context is not None else WorkerContext())


class DaskExecutor(AbstractExecutor):
    """Runs tasks on a Dask cluster.

    ``address`` is the scheduler (``tcp://host:8786``; ``None``: a local cluster that
    Dask starts and this executor closes), or ``client`` an existing
    ``distributed.Client`` (never closed here).  ``timeout`` is the connection timeout in
    seconds.  :attr:`workers` is the number of worker threads when the executor connected.
    """

    name = "dask"

    def __init__(self, address: str | None = None, *, client: Any = None, timeout: float = 10.0):
        try:
            import distributed
        except ImportError:
            raise ExecutorError(_MISSING) from None
        if client is not None and address is not None:
            raise ExecutorError(f"DaskExecutor got both address={address!r} and a client; give one of them.")
        self._lock = threading.Lock()
        self._running: dict[str, tuple[Task, Any, Future]] = {}
        self._closed = False
        self._own_client = client is None
        if client is None:
            try:
                client = distributed.Client(address, timeout=timeout, set_as_default=False)
            except (OSError, TimeoutError, ValueError) as exc:
                where = f"the Dask scheduler at {address!r}" if address else "a local Dask cluster"
                raise ExecutorError(f"cannot connect to {where} ({exc}); start the scheduler ('dask scheduler') and "
                                    "its workers or check the address, or drop --dask to run locally.") from None
        self.client = client
        try:
            client.register_plugin(_context_plugin(), name=PLUGIN_NAME)
            # Worker processes, not threads: a worker runs the tasks of one problem one after
            # another (WorkerContext).  A cluster whose workers are still starting is waited for.
            try:
                client.wait_for_workers(1, timeout=timeout)
            except (TimeoutError, OSError):
                raise ExecutorError(f"the Dask scheduler at {client.scheduler.address} has no workers after "
                                    f"{timeout:g} s; start some ('dask worker {client.scheduler.address} --nthreads "
                                    "1'), or drop --dask to run locally.") from None
            self._workers = max(1, len(client.nthreads()))
            #: The scheduler's address (for reports).
            self.address: str = client.scheduler.address
        except BaseException:
            self.close()
            raise

    @property
    def workers(self) -> int:
        return self._workers

    def describe(self) -> dict:
        return {"executor": self.name, "workers": self._workers, "scheduler": self.address}

    def submit(self, task: Task) -> Future:
        future: Future = Future()
        key = f"{type(task).__name__}-{uuid.uuid4().hex}"
        with self._lock:
            if self._closed:
                raise ExecutorError("this DaskExecutor is closed; submit tasks before close() (or the end of its "
                                    "'with' block), or connect a new one.")
            try:
                dask_future = self.client.submit(_run, task, key=key, pure=False)
            except Exception as exc:  # noqa: BLE001 -- carried by the future, like the task's own errors
                future.set_exception(ExecutorError(
                    f"{task!r} cannot be sent to the Dask cluster ({type(exc).__name__}: {exc}); a task must be "
                    "picklable: module-level classes and functions, no lambdas, open files or locks."))
                return future
            self._running[key] = (task, dask_future, future)
        dask_future.add_done_callback(functools.partial(self._resolve, key))
        future.add_done_callback(functools.partial(self._forward_cancel, key))
        return future

    def _resolve(self, key: str, dask_future: Any) -> None:
        """Done callback of a Dask future: resolve its concurrent future."""
        from distributed import KilledWorker

        with self._lock:
            entry = self._running.pop(key, None)
        if entry is None:  # cancelled (by its owner or by close)
            return
        task, _, future = entry
        try:
            if dask_future.status == "finished":
                settle(future, result=dask_future.result())
                return
            if dask_future.status == "cancelled":
                future.cancel()
                return
            error = dask_future.exception()
        except BaseException as exc:  # noqa: BLE001 -- the results could not be fetched; the future carries why
            error = exc
        if isinstance(error, KilledWorker):
            error = ExecutorError(f"{task!r} ended every Dask worker that ran it ({error}); the task crashes its "
                                  "worker; run it serially (--workers 1, without --dask) to see the error.")
        settle(future, error=error)

    def _forward_cancel(self, key: str, future: Future) -> None:
        """Done callback of a concurrent future: a cancelled one cancels its Dask task."""
        if not future.cancelled():
            return
        with self._lock:
            entry = self._running.pop(key, None)
        if entry is not None:
            try:
                entry[1].cancel()
            except Exception:  # noqa: BLE001 -- the client is closing: the task goes with it
                pass

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            entries = list(self._running.values())
            self._running.clear()
        if entries:
            try:
                self.client.cancel([dask_future for _, dask_future, _ in entries])
            except Exception:  # noqa: BLE001 -- a client that is already gone has nothing to cancel
                pass
        for _, _, future in entries:
            future.cancel()
        if self._own_client:
            self.client.close()
