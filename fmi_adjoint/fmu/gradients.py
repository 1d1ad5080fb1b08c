"""The gradient paths of an FMU problem as strategy objects: each gives the outputs at the sample
times and their derivatives ``dY/dp``, from which the problem forms the gradient of any cost and
the Jacobian of least-squares residuals.

* :class:`SensitivityPath` (Model Exchange): one request per experiment; the worker returns
  the exact sensitivities of its Radau IIA run (:mod:`.me_sensitivities`), or why they do
  not exist for it (a parameter moves a time event, a reinitialisation is not smooth), and
  the problem then continues with whole-run differences (:meth:`.FmuProblem.fall_back_to_differences`);
* :class:`DifferencePath` (any interface): central differences of whole simulations, in
  parallel (:class:`.instances.FmuInstances`); on Model Exchange the perturbed runs replay the
  nominal run's steps (``nodes``), so the differences are those of one discrete scheme and
  are not blurred by the error control choosing other steps.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING

import numpy as np

from .differences import FD_REL_STEP, stencil
from .simulation import RunOutputs, SensitivityRequest

if TYPE_CHECKING:
    from .problem import FmuProblem

__all__ = ["AbstractGradientPath", "DifferencePath", "PROBE_TOLERANCE", "REPLAY_REL_STEP", "SensitivityPath"]

#: A parameter column of the FMU agrees with the replays' differences below this (relative; the
#: differences' own error is ~1e-9, a wrong column is off by far more).
PROBE_TOLERANCE = 1e-6

#: Relative step of the replays' central differences (partials of smooth FMU functions at one
#: point: truncation ~1e-12, round-off ~1e-10).
REPLAY_REL_STEP = 1e-6


class AbstractGradientPath(abc.ABC):
    """Outputs and their parameter derivatives, one :class:`RunOutputs` per experiment."""

    method: str

    @abc.abstractmethod
    def outputs(self, problem: FmuProblem, x: np.ndarray) -> list[RunOutputs]:
        """Runs of every experiment at ``x`` with ``dY`` filled."""


class SensitivityPath(AbstractGradientPath):
    """Exact sensitivities of the Model Exchange run (see the module docstring)."""

    method = "sensitivity"

    def __init__(self, names, trust_columns: bool):
        self.names = tuple(names)
        #: Per parameter: try the FMU's directional derivative (until the probe rejects it).
        self.directional = [trust_columns] * len(self.names)
        self.columns: dict[str, str] = {}

    def outputs(self, problem: FmuProblem, x: np.ndarray) -> list[RunOutputs]:
        request = SensitivityRequest(self.names, REPLAY_REL_STEP * np.maximum(np.abs(x), problem.nominal),
                                     tuple(self.directional), PROBE_TOLERANCE)
        runs = []
        for exp in problem.experiments:
            runs.append(problem.run(exp, x, sensitivity=request))
        for run in runs:
            if "sensitivities_unavailable" in run.info:
                return problem.fall_back_to_differences(str(run.info["sensitivities_unavailable"]), x)
        info = runs[0].info
        if "directional" in info:
            self.directional = [a and b for a, b in zip(self.directional, info["directional"])]
        for name, note in zip(self.names, info.get("columns") or []):
            self.columns[name] = note
        if not info.get("columns"):
            for name in self.names:
                self.columns.setdefault(name, "finite differences of replays of the run")
        return runs


class DifferencePath(AbstractGradientPath):
    """Central differences of whole simulations (see the module docstring)."""

    method = "fd"

    def __init__(self, rel_step: float = FD_REL_STEP):
        self.rel_step = rel_step

    def outputs(self, problem: FmuProblem, x: np.ndarray) -> list[RunOutputs]:
        nominal = [problem.run(exp, x) for exp in problem.experiments]
        points = stencil(x, self.rel_step * np.maximum(np.abs(x), problem.nominal), problem.lower, problem.upper,
                         problem.names)
        jobs = [problem.job(exp, p, nodes=run.nodes) for p in points.points
                for exp, run in zip(problem.experiments, nominal)]
        replies = problem.instances.run_many(jobs)
        problem.simulations += len(jobs)
        n_exp = len(problem.experiments)
        out = []
        for e, (exp, run) in enumerate(zip(problem.experiments, nominal)):
            samples = [problem.simulator.finish(exp, replies[i * n_exp + e]).Y for i in range(len(points.points))]
            out.append(RunOutputs(Y=run.Y, dY=points.combine(samples), nodes=run.nodes, info=run.info))
        return out
