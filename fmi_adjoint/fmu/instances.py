"""The FMU instances of one identification problem: its worker processes, local or on an executor.

One :class:`~.session.FmuSession` always exists (the problem's own run); further sessions are
opened when simulations run in parallel (finite-difference columns), all on the archive's one
extraction folder.  With an executor (a Dask cluster) the simulations travel as
:class:`~.tasks.FmuJobTask` (the FMU as its bytes) and are answered there, in sandboxed
sessions of the workers.  Replies are processed the same way wherever they come from.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..scale import AbstractExecutor
from .archive import FmuArchive
from .session import FmuSession, check_timeout, run_parallel
from .tasks import FmuBytes, FmuJobTask

__all__ = ["FmuInstances"]


class FmuInstances:
    """Worker processes running ``interface`` of ``archive`` (close when done).

    Parameters
    ----------
    workers : int, optional
        Most simulations at a time (default: the CPU count).
    executor : AbstractExecutor, optional
        Runs the parallel simulations instead of local worker processes.
    timeout : float
        Longest one FMI call may take [s].
    log : text stream, optional
        Receives the binary's output when a session closes (``--verbose``).
    """

    def __init__(self, archive: FmuArchive, interface: str, *, workers: int | None = None,
                 executor: AbstractExecutor | None = None, timeout: float, log=None):
        self.archive, self.interface = archive, interface
        self.timeout, self.log = check_timeout(timeout), log
        self.workers = workers if workers is not None else (os.cpu_count() or 1)
        self.executor = executor
        self.session = FmuSession(archive, interface, timeout=self.timeout, log=log)
        self._pool: list[FmuSession] = []
        self._bytes: FmuBytes | None = None

    def run(self, job: tuple[str, tuple]):
        """One simulation in the problem's own session."""
        return self.session.run(job)

    def run_many(self, jobs: Sequence[tuple[str, tuple]]) -> list:
        """The replies to ``jobs``, in order, run in parallel where possible."""
        if not jobs:
            return []
        if self.executor is not None:
            if self._bytes is None:
                self._bytes = FmuBytes.of(self.archive)
            fmu = self._bytes
            return list(self.executor.map([FmuJobTask(fmu, self.interface, self.timeout, job) for job in jobs]))
        wanted = min(self.workers, len(jobs)) - 1
        if wanted <= 0:
            return [self.run(job) for job in jobs]
        # Workers that died (a crash or a timeout already reported) are replaced.
        self._pool = [s for s in self._pool if s.alive]
        if len(self._pool) < wanted:
            self._pool += FmuSession.open_many(self.archive, self.interface, wanted - len(self._pool),
                                               timeout=self.timeout, log=self.log)
        return run_parallel([self.session, *self._pool[:wanted]], jobs)

    def fmu_calls(self) -> int:
        """The calls announced so far by the local worker processes still alive: every FMI call
        once, and a few steps of their own (reading the model description, instantiating).
        Simulations answered on an executor are not counted."""
        return sum(session._progress.read()[0] for session in [self.session, *self._pool] if session.alive)

    def close(self) -> None:
        """Free the instances and end every worker process."""
        sessions = [self.session, *self._pool]
        try:
            for session in sessions:
                session.close()
        finally:
            for session in sessions:  # an interrupt during a graceful close: kill the rest
                session.kill()
