"""Parallel work: the executor contract, a local process pool and a Dask adapter (issue 14)."""

from .base import AbstractExecutor, CallTask, SerialExecutor, Task, WorkerContext
from .dask import DaskExecutor
from .pool import LocalPool

__all__ = ["AbstractExecutor", "CallTask", "DaskExecutor", "LocalPool", "SerialExecutor", "Task", "WorkerContext"]
