"""An identification problem whose experiments and finite-difference points run as tasks
on an executor (issue 14).

:class:`DistributedProblem` is an :class:`~fmi_adjoint.identify.IdentificationProblem`
whose per-experiment work (:meth:`~fmi_adjoint.identify.IdentificationProblem.part`) and
finite-difference stencil points run as :class:`PartTask`/:class:`CostTask` on an
:class:`~fmi_adjoint.scale.AbstractExecutor`.  Each task carries the
:class:`~fmi_adjoint.identify.spec.ProblemSpec` (model text, data bytes, settings) and its
digest; a worker builds the problem from it once, through the build cache, and keeps it in
its :class:`~fmi_adjoint.scale.WorkerContext`.  The parent sums the parts in experiment
order with the same :func:`~fmi_adjoint.identify.parts.ordered_sum` as the serial
problem, so every number equals the serial run's bit for bit, whatever the worker count.

A data window of :class:`~fmi_adjoint.identify.strategies.GrowingWindows` (an experiment
restricted to its samples up to ``T`` and simulated up to ``T``) travels with the task as
that end time; the worker applies the same :func:`~fmi_adjoint.identify.strategies.window_experiment`
to its copy, so windowed stages are equal on every executor too.

Cost of a task: pickling the spec, whose size is that of the data files; the work it
carries (simulations over the same data) grows with the same size.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from ..scale import AbstractExecutor, WorkerContext
from .parts import AbstractPart, part_kind
from .problem import IdentificationProblem
from .spec import ProblemSpec
from .strategies import windowed

__all__ = ["CostTask", "DistributedProblem", "PartTask"]


@dataclasses.dataclass(frozen=True, eq=False)
class PartTask:
    """:meth:`IdentificationProblem.part` of one experiment, run in a worker."""

    spec: ProblemSpec
    key: str
    index: int
    x: np.ndarray
    #: What the worker computes (a part object: it carries its own settings, e.g. noise levels).
    kind: AbstractPart
    #: End of the experiment's data window (None: the whole record).
    window: float | None = None

    def run(self, context: WorkerContext):
        with context.resident(self.key, self.spec.build) as problem:
            if self.window is not None:
                problem = windowed(problem, {self.index: self.window})
            return problem.part(self.index, self.x, self.kind)

    def __repr__(self) -> str:
        return f"PartTask(experiment {self.index}, {self.kind.name})"


@dataclasses.dataclass(frozen=True, eq=False)
class CostTask:
    """The total cost of the experiments ``indices`` at one point (a finite-difference stencil
    point), run in a worker."""

    spec: ProblemSpec
    key: str
    x: np.ndarray
    indices: tuple[int, ...]
    #: Ends of data windows by experiment index (empty: whole records).
    windows: tuple[tuple[int, float], ...] = ()

    def run(self, context: WorkerContext) -> float:
        with context.resident(self.key, self.spec.build) as problem:
            if self.windows:
                problem = windowed(problem, dict(self.windows))
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
        #: End time of each experiment's whole record: a local experiment that ends earlier is
        #: a data window (:func:`~fmi_adjoint.identify.strategies.windowed`), sent with its tasks.
        self.record_ends = tuple(e.t_end for e in local.experiments)

    def _windows(self) -> dict[int, float]:
        """Data windows of this problem's experiments, by index in the spec."""
        return {i: float(e.t_end) for i, e in zip(self.indices, self.experiments)
                if e.t_end is not None and e.t_end != self.record_ends[i]}

    def _parts(self, x: np.ndarray, kind: str | AbstractPart, noise_std: Mapping[str, float] | None = None) -> list:
        kind = part_kind(kind, noise_std)
        x = np.array(x, dtype=float)
        windows = self._windows()
        tasks = [PartTask(self.spec, self.key, i, x, kind, windows.get(i)) for i in self.indices]
        parts = self.executor.map(tasks)
        self.simulations += len(parts)
        return parts

    def _costs(self, points: Sequence[np.ndarray]) -> list[float]:
        windows = tuple(sorted(self._windows().items()))
        costs = self.executor.map([CostTask(self.spec, self.key, np.array(x, dtype=float), self.indices, windows)
                                   for x in points])
        self.simulations += len(points) * len(self.experiments)
        return costs
