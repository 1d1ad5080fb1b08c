"""The gradient paths of an FMU problem as strategy objects: each gives the outputs at the sample
times and their derivatives ``dY/dp``, from which the problem forms the gradient of any cost and
the Jacobian of least-squares residuals.

* :class:`SensitivityPath` (Model Exchange): one request per experiment; the worker returns
  the exact sensitivities of its Radau IIA run (:mod:`.me_sensitivities`), or why they do
  not exist for it (a parameter moves a time event, a reinitialisation is not smooth): the
  path then returns that reason as an :class:`Unavailable` value, and the problem decides to
  continue with whole-run differences (:meth:`.FmuProblem.path_outputs`);
* :class:`DifferencePath` (any interface): central differences of whole simulations, in
  parallel (:class:`.instances.FmuInstances`); on Model Exchange the perturbed runs replay the
  nominal run's steps (``nodes``), so the differences are those of one discrete scheme and
  are not blurred by the error control choosing other steps.

A path reads and runs its problem only through :class:`Simulations` (the experiments, the
parameters' scales and bounds, single runs and parallel batches) and never changes it.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from .differences import FD_REL_STEP, stencil
from .simulation import RunOutputs, SensitivityRequest

if TYPE_CHECKING:
    from .experiment import FmuExperiment

__all__ = ["AbstractGradientPath", "DifferencePath", "PROBE_TOLERANCE", "REPLAY_REL_STEP", "SensitivityPath",
           "Simulations", "Unavailable"]

#: A parameter column of the FMU agrees with the replays' differences below this (relative; the
#: differences' own error is ~1e-9, a wrong column is off by far more).
PROBE_TOLERANCE = 1e-6

#: Relative step of the replays' central differences (partials of smooth FMU functions at one
#: point: truncation ~1e-12, round-off ~1e-10).
REPLAY_REL_STEP = 1e-6


@dataclasses.dataclass(frozen=True)
class Unavailable:
    """A gradient path has no derivatives at the point asked, and why (one line, e.g. the
    worker's "a parameter moves a time event")."""

    reason: str


class Simulations(Protocol):
    """What a gradient path reads and runs of its problem (:class:`~.problem.FmuProblem` is one).

    ``names``, ``nominal``, ``lower`` and ``upper`` are per identified parameter: its name, the
    scale of its difference steps, and its bounds.
    """

    @property
    def experiments(self) -> Sequence[FmuExperiment]: ...

    @property
    def names(self) -> Sequence[str]: ...

    @property
    def nominal(self) -> np.ndarray: ...

    @property
    def lower(self) -> np.ndarray: ...

    @property
    def upper(self) -> np.ndarray: ...

    def run(self, exp: FmuExperiment, x: np.ndarray, *,
            sensitivity: SensitivityRequest | None = None) -> RunOutputs:
        """One simulation of ``exp`` at the identified values ``x`` (with exact sensitivities if asked)."""
        ...

    def run_points(self, points: Sequence[np.ndarray],
                   nodes: Sequence[np.ndarray | None] | None = None) -> list[list[RunOutputs]]:
        """Every experiment at each of ``points``, in parallel: per point, one run per experiment
        (``nodes``: per experiment, the node times a Model Exchange run replays)."""
        ...


class AbstractGradientPath(abc.ABC):
    """Outputs and their parameter derivatives, one :class:`RunOutputs` per experiment."""

    method: str

    @property
    def columns(self) -> dict[str, str]:
        """Where each Jacobian column came from, by parameter (RESULT.json); none by default."""
        return {}

    @abc.abstractmethod
    def outputs(self, problem: Simulations, x: np.ndarray) -> list[RunOutputs] | Unavailable:
        """Runs of every experiment at ``x`` with ``dY`` filled, or why the path has no
        derivatives there."""


class SensitivityPath(AbstractGradientPath):
    """Exact sensitivities of the Model Exchange run (see the module docstring)."""

    method = "sensitivity"

    def __init__(self, names, trust_columns: bool):
        self.names = tuple(names)
        #: Per parameter: try the FMU's directional derivative (until the probe rejects it).
        self.directional = [trust_columns] * len(self.names)
        self._columns: dict[str, str] = {}

    @property
    def columns(self) -> dict[str, str]:
        return self._columns

    def outputs(self, problem: Simulations, x: np.ndarray) -> list[RunOutputs] | Unavailable:
        asked = list(self.directional)
        request = SensitivityRequest(self.names, REPLAY_REL_STEP * np.maximum(np.abs(x), problem.nominal),
                                     tuple(self.directional), PROBE_TOLERANCE)
        runs = []
        for exp in problem.experiments:
            runs.append(problem.run(exp, x, sensitivity=request))
        for run in runs:
            if "sensitivities_unavailable" in run.info:
                return Unavailable(str(run.info["sensitivities_unavailable"]))
        info = runs[0].info
        if "directional" in info:
            self.directional = [a and b for a, b in zip(self.directional, info["directional"])]
        for name, wanted, note in zip(self.names, asked, info.get("columns") or []):
            if wanted or name not in self._columns:  # a column once rejected keeps the reason why
                self._columns[name] = note
        if not info.get("columns"):
            for name in self.names:
                self._columns.setdefault(name, "finite differences of replays of the run")
        return runs


class DifferencePath(AbstractGradientPath):
    """Central differences of whole simulations (see the module docstring)."""

    method = "fd"

    def __init__(self, rel_step: float = FD_REL_STEP):
        self.rel_step = rel_step

    def outputs(self, problem: Simulations, x: np.ndarray) -> list[RunOutputs]:
        nominal = [problem.run(exp, x) for exp in problem.experiments]
        points = stencil(x, self.rel_step * np.maximum(np.abs(x), problem.nominal), problem.lower, problem.upper,
                         problem.names)
        perturbed = problem.run_points(points.points, nodes=[run.nodes for run in nominal])
        out = []
        for e, run in enumerate(nominal):
            samples = [runs[e].Y for runs in perturbed]
            out.append(RunOutputs(Y=run.Y, dY=points.combine(samples), nodes=run.nodes, info=run.info))
        return out
