"""Which executor runs the parallel work of a command (``--workers``, ``--dask``)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..errors import ExecutorError
from .base import AbstractExecutor

__all__ = ["choose_executor"]


def choose_executor(*, workers: int | None = None, dask: str | None = None, tasks: int = 1,
                    preload: Sequence[str] = (), dask_timeout: float | None = None) -> AbstractExecutor | None:
    """The executor for ``tasks`` tasks that can run at once; None: run them in this process.

    ``dask``: the address of an existing Dask scheduler (:class:`~fmi_adjoint.scale.dask.DaskExecutor`),
    connected within ``dask_timeout`` seconds per step (default: the executor's).
    Otherwise a :class:`~fmi_adjoint.scale.pool.LocalPool` of ``workers`` processes (default:
    one per CPU, at most ``tasks``), or None when that is one process or there is one task.
    ``preload``: modules the pool's fork server imports once for all workers.
    """
    if workers is not None and dask:
        raise ExecutorError(f"give either --workers {workers} (local processes) or --dask {dask} (a cluster), not "
                            "both; unset FMI_ADJOINT_DASK to run locally.")
    if workers is not None and workers < 1:
        raise ExecutorError(f"--workers {workers}: give at least 1.")
    if dask:
        from .dask import DaskExecutor

        return DaskExecutor(dask) if dask_timeout is None else DaskExecutor(dask, timeout=dask_timeout)
    count = workers if workers is not None else min(os.cpu_count() or 1, tasks)
    if count <= 1 or tasks <= 1:
        return None
    from .pool import LocalPool

    return LocalPool(count, preload=preload)
