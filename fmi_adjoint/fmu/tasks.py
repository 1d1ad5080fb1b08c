"""FMU simulations as executor tasks (issue 14): the finite-difference columns of an FMU
problem on a Dask cluster.

An FMU travels as its bytes (:class:`FmuBytes`), never as an open archive or a session.
A worker writes the bytes into a private folder once, checks and extracts them with
:func:`~fmi_adjoint.fmu.archive.open_fmu` (the same checks as on the command's machine),
and runs them in its own sandboxed :class:`~fmi_adjoint.fmu.session.FmuSession` (the
binary in a subprocess with a timeout per FMI call, issue 10), which it keeps in its
:class:`~fmi_adjoint.scale.WorkerContext` for the next task of the same FMU.  A task is one
whole simulation (the request :meth:`.problem.FmuProblem.job` builds); the reply is processed in
the command's process exactly as a local worker's, so the numbers do not depend on where
the simulation ran.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import tempfile
from pathlib import Path

from ..scale import WorkerContext
from .archive import FmuArchive, open_fmu
from .session import FmuSession

__all__ = ["FmuBytes", "FmuJobTask"]


@dataclasses.dataclass(frozen=True)
class FmuBytes:
    """An FMU as it travels to workers: its file name (for messages) and bytes."""

    name: str
    raw: bytes
    digest: str

    @classmethod
    def of(cls, archive: FmuArchive) -> FmuBytes:
        """The bytes of the FMU file ``archive`` was opened from."""
        raw = Path(archive.path).read_bytes()
        return cls(Path(archive.path).name, raw, hashlib.sha256(raw).hexdigest())


class _ResidentFmu:
    """An FMU opened in a worker: its private folder, archive and sandboxed session."""

    def __init__(self, fmu: FmuBytes, interface: str, timeout: float):
        self.folder = Path(tempfile.mkdtemp(prefix="fmi_adjoint_fmu_task_"))
        try:
            # The user's file name when it is a plain *.fmu name (messages name it), else a fixed one.
            name = Path(fmu.name).name
            path = self.folder / (name if name.endswith(".fmu") and not name.startswith(".") else "model.fmu")
            path.write_bytes(fmu.raw)
            self.archive = open_fmu(path)
            try:
                self.session = FmuSession(self.archive, interface, timeout=timeout)
            except BaseException:
                self.archive.close()
                raise
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise

    def close(self) -> None:
        try:
            self.session.close()
        finally:
            self.session.kill()
            self.archive.close()
            shutil.rmtree(self.folder, ignore_errors=True)


@dataclasses.dataclass(frozen=True, eq=False)
class FmuJobTask:
    """One simulation request (``(op, args)`` of :meth:`.simulation.FmuSimulator.job`) of an
    FMU, run in a worker's sandboxed session."""

    fmu: FmuBytes
    interface: str
    timeout: float
    job: tuple

    def run(self, context: WorkerContext):
        key = f"fmu:{self.fmu.digest}:{self.interface}:{self.timeout!r}"
        with context.resident(key, lambda: _ResidentFmu(self.fmu, self.interface, self.timeout)) as resident:
            if not resident.session.alive:  # a crash or a timeout of an earlier task ended it
                resident.session = FmuSession(resident.archive, self.interface, timeout=self.timeout)
            return resident.session.run(self.job)

    def __repr__(self) -> str:
        return f"FmuJobTask({self.fmu.name}, {self.job[0]})"
