"""Multi-start design (issue 32): run :func:`~fmi_adjoint.design.optimize.run_design` from
every start of a :class:`~fmi_adjoint.design.starts.StartPlan`, keep the best.

Why: a concave criterion has a local minimum at every outward vertex of the knots' box
(:mod:`fmi_adjoint.design.starts`); on the undamped oscillator of Sec. 5.3.2 the constant start
ends at ``u = +1`` (``J = -12.04``) and the starts with a sign change reach the Pontryagin
switch (``J = -16.9378``, eqs. (5.26), (5.27)).

The starts are independent, so they run as tasks on an executor
(:class:`~fmi_adjoint.scale.AbstractExecutor`; ``--workers``/``--dask``): a
:class:`StartTask` carries the :class:`DesignRecipe` (model text and tables, settings, spec),
never the built problem; a worker builds the problem once through the build cache (the scales
are fixed at the spec's start input in :meth:`~fmi_adjoint.design.DesignProblem.build`, so
every worker gets the same objective) and keeps it for its next start.  Without an executor
the starts run one after another on the problem already built.  Either way each start returns
a small :class:`StartOutcome`; the parent evaluates the winner once more for the result.

Which start wins: the feasible ones (every constraint within
:data:`~fmi_adjoint.design.optimize.VIOLATION_TOLERANCE`) before the others, then the lowest
criterion; ties go to the earlier start, so the result does not depend on the executor.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Callable, Mapping

import numpy as np

from ..errors import ConvergenceError
from ..model_file import ModelSource
from ..scale import AbstractExecutor, WorkerContext
from ..warm import prepare_model
from .optimize import VIOLATION_TOLERANCE, DesignIteration, DesignResult, StopDiagnosis, run_design, violations
from .problem import DesignProblem, DesignSpec
from .starts import StartPlan

__all__ = ["DesignRecipe", "SAME_BEST", "StartOutcome", "StartTask", "run_design_starts"]

#: Starts whose criterion lies within this fraction of the best one's count as having reached
#: the best (a reached vertex is the same to round-off; 1e-6 separates neighbouring switches
#: of 64 knots on Sec. 5.3.2, whose criteria differ by 1e-4 relative).
SAME_BEST = 1e-6


@dataclasses.dataclass(frozen=True)
class DesignRecipe:
    """What a worker builds a design problem from: the model file's text and tables, the
    ``--set`` values, the spec and the memory limit (picklable; never a compiled object)."""

    source: ModelSource
    settings: tuple[tuple[str, float], ...]
    spec: DesignSpec
    memory_limit: int | str | None = None

    @classmethod
    def create(cls, source: ModelSource, settings: Mapping[str, float], spec: DesignSpec,
               memory_limit: int | str | None = None) -> DesignRecipe:
        return cls(source, tuple(sorted((k, float(v)) for k, v in settings.items())), spec, memory_limit)

    def build(self) -> DesignProblem:
        return DesignProblem.build(self.spec, prepare_model(self.source).with_values(dict(self.settings)),
                                   memory_limit=self.memory_limit)

    def digest(self) -> str:
        """SHA-256 naming the problem (the key a worker keeps the built problem under)."""
        h = hashlib.sha256(self.source.digest().encode())
        h.update(repr((self.settings, self.spec, self.memory_limit)).encode())
        return h.hexdigest()


@dataclasses.dataclass(frozen=True, eq=False)
class StartOutcome:
    """Where one start ended: its label and start knots (design variables ``z_start``), the
    final ``z``, criterion at start and end, iterations, evaluations, the optimizer's message
    and the diagnosis of its stop, the penalty weight it ended with and whether every
    constraint is met."""

    label: str
    z_start: np.ndarray
    z: np.ndarray
    criterion_start: float
    criterion: float
    objective: float
    history: tuple[DesignIteration, ...]
    evaluations: int
    success: bool
    message: str
    stop: StopDiagnosis | None
    penalty_weight: float
    feasible: bool

    @property
    def iterations(self) -> int:
        return max(len(self.history) - 1, 0)

    @classmethod
    def of(cls, label: str, result: DesignResult) -> StartOutcome:
        left = violations(result.problem, result.final)
        return cls(label, result.z_start, result.z, result.start.criterion, result.final.criterion,
                   result.final.objective, result.history, result.evaluations, result.success, result.message,
                   result.stop, result.problem.penalty_weight, all(v <= VIOLATION_TOLERANCE for v in left.values()))


def _start(problem: DesignProblem, label: str, z0: np.ndarray, max_iterations: int,
           progress: Callable[[DesignIteration], None] | None = None) -> StartOutcome:
    """One start; a start input whose run fails (Newton, overflow) is an outcome that loses,
    not the end of the design (the given start ran when the problem was built)."""
    try:
        result = run_design(problem, max_iterations=max_iterations, z_start=z0, progress=progress)
    except ConvergenceError as exc:
        return StartOutcome(label, z0, z0, math.inf, math.inf, math.inf, (), 1, False,
                            f"the start input could not be simulated: {exc}", None, problem.penalty_weight, False)
    return StartOutcome.of(label, result)


@dataclasses.dataclass(frozen=True, eq=False)
class StartTask:
    """One start of a multi-start design, run in a worker."""

    recipe: DesignRecipe
    key: str
    label: str
    z_start: np.ndarray
    max_iterations: int

    def run(self, context: WorkerContext) -> StartOutcome:
        with context.resident(self.key, self.recipe.build) as problem:
            return _start(problem, self.label, self.z_start, self.max_iterations)

    def __repr__(self) -> str:
        return f"StartTask({self.label})"


def run_design_starts(problem: DesignProblem, plan: StartPlan, *, max_iterations: int = 200,
                      executor: AbstractExecutor | None = None, recipe: DesignRecipe | None = None,
                      progress: Callable[[int, StartOutcome], None] | None = None,
                      iteration_progress: Callable[[DesignIteration], None] | None = None) -> DesignResult:
    """Run the design from every start of ``plan`` and return the best as a
    :class:`~fmi_adjoint.design.optimize.DesignResult` whose :attr:`starts` lists them all.

    ``executor`` (with the ``recipe`` ``problem`` was built from) runs the starts as
    :class:`StartTask`; without it they run here, one after another.  ``progress`` receives
    ``(index, outcome)`` as each start ends (in plan order); ``iteration_progress`` every
    iterate of a single in-process start.  The result's ``start`` is the spec's start input
    (the reference of its standard-error ratios), its history that of the winning start,
    its ``evaluations`` those of all starts.
    """
    lo, hi = problem.spec.bounds
    bound_map = problem.spec.bound_map
    given = problem.spec.start_values()
    starts = [(label, bound_map.inverse(values, lo, hi))
              for label, values in plan.knot_values(problem.knot_times, lo, hi, given)]
    outcomes: list[StartOutcome] = []
    if executor is not None and len(starts) > 1:
        if recipe is None:
            raise ValueError("run_design_starts: an executor needs the recipe the problem was built from.")
        key = recipe.digest()
        futures = [executor.submit(StartTask(recipe, key, label, z0, max_iterations)) for label, z0 in starts]
        try:
            for index, future in enumerate(futures):
                outcomes.append(future.result())
                if progress:
                    progress(index, outcomes[-1])
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    else:
        single = iteration_progress if len(starts) == 1 else None
        for index, (label, z0) in enumerate(starts):
            outcomes.append(_start(problem, label, z0, max_iterations, single))
            if progress:
                progress(index, outcomes[-1])
    best = min(range(len(outcomes)), key=lambda k: (not outcomes[k].feasible, outcomes[k].criterion, k))
    winner = outcomes[best]
    reference = abs(winner.criterion) if winner.criterion != 0 else 1.0
    reached = sum(1 for o in outcomes
                  if o.feasible == winner.feasible and abs(o.criterion - winner.criterion) <= SAME_BEST * reference)
    final_problem = problem.with_penalty_weight(winner.penalty_weight)
    final = final_problem.evaluate(winner.z)
    start_z = problem.start()
    start = problem.evaluate(start_z)
    return DesignResult(problem=final_problem, z_start=start_z, z=winner.z, start=start, final=final,
                        history=winner.history, evaluations=sum(o.evaluations for o in outcomes) + 2,
                        success=winner.success, message=winner.message, stop=winner.stop, starts=tuple(outcomes),
                        best_start=best, reached_best=reached)
