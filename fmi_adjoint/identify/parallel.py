"""An identification problem whose experiments and finite-difference points run as tasks
on an executor (issue 14).

:class:`DistributedProblem` is an :class:`~fmi_adjoint.identify.IdentificationProblem`
whose per-experiment work (:meth:`~fmi_adjoint.identify.IdentificationProblem.part`) and
finite-difference stencil points run as :class:`PartTask`/:class:`CostTask` on an
:class:`~fmi_adjoint.scale.AbstractExecutor`.  Each task carries the
:class:`~fmi_adjoint.identify.spec.ProblemSpec` (model text, data bytes, settings) and its
digest; a worker builds the problem from it once, through the build cache, and keeps it in
its :class:`~fmi_adjoint.scale.WorkerContext`.  The parent sums the parts in experiment
order with the same :func:`~fmi_adjoint.identify.problem.ordered_sum` as the serial
problem, so every number equals the serial run's bit for bit, whatever the worker count.

Cost of a task: pickling the spec, whose size is that of the data files; the work it
carries (simulations over the same data) grows with the same size.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from ..scale import AbstractExecutor, WorkerContext
from .problem import IdentificationProblem
from .spec import ProblemSpec

__all__ = ["CostTask", "DistributedProblem", "PartTask"]


@dataclasses.dataclass(frozen=True, eq=False)
class PartTask:
    """:meth:`IdentificationProblem.part` of one experiment, run in a worker."""

    spec: ProblemSpec
    key: str
    index: int
    x: np.ndarray
    kind: str
    noise_std: tuple[tuple[str, float], ...] | None = None

    def run(self, context: WorkerContext):
        with context.resident(self.key, self.spec.build) as problem:
            noise = None if self.noise_std is None else dict(self.noise_std)
            return problem.part(self.index, self.x, self.kind, noise)

    def __repr__(self) -> str:
        return f"PartTask(experiment {self.index}, {self.kind})"


@dataclasses.dataclass(frozen=True, eq=False)
class CostTask:
    """The total cost of the experiments ``indices`` at one point (a finite-difference stencil
    point), run in a worker."""

    spec: ProblemSpec
    key: str
    x: np.ndarray
    indices: tuple[int, ...]

    def run(self, context: WorkerContext) -> float:
        with context.resident(self.key, self.spec.build) as problem:
            return problem.restricted(self.indices).cost(self.x)

    def __repr__(self) -> str:
        return "CostTask"


class DistributedProblem(IdentificationProblem):
    """``local`` (built here from ``spec``) with its experiments run on ``executor``.

    The local problem supplies names, bounds and start values and answers everything that
    does not simulate; the executor runs the simulations.  Its evaluations may be called from
    several threads at once (the starts of a multi-start): they only submit tasks.
    """

    thread_safe = True

    def __init__(self, local: IdentificationProblem, spec: ProblemSpec, executor: AbstractExecutor):
        if local.names != spec.names:
            raise ValueError("the local problem and the spec identify different parameters")
        self.__dict__.update(local.__dict__)
        self.spec = spec
        self.executor = executor
        self.key = spec.digest()

    def _parts(self, x: np.ndarray, kind: str, noise_std: Mapping[str, float] | None = None) -> list:
        noise = None if noise_std is None else tuple(sorted(noise_std.items()))
        x = np.array(x, dtype=float)
        tasks = [PartTask(self.spec, self.key, i, x, kind, noise) for i in self.indices]
        parts = self.executor.map(tasks)
        self.simulations += len(parts)
        return parts

    def _costs(self, points: Sequence[np.ndarray]) -> list[float]:
        costs = self.executor.map([CostTask(self.spec, self.key, np.array(x, dtype=float), self.indices)
                                   for x in points])
        self.simulations += len(points) * len(self.experiments)
        return costs
