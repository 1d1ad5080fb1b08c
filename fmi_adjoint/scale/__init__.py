"""Parallel work: the executor contract, a local process pool and a Dask adapter (issue 14)."""

from .base import AbstractExecutor, CallTask, SerialExecutor, Task, WorkerContext

__all__ = ["AbstractExecutor", "CallTask", "SerialExecutor", "Task", "WorkerContext"]
