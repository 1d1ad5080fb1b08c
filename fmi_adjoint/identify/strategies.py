"""Identification strategies: how one start reaches the minimum of a non-convex fit (issue 32).

A strategy turns a problem into *stages*, each an ordinary :func:`~fmi_adjoint.identify.identify`
run started from the previous stage's result; the last stage is always the full problem,
fitted with statistics (:meth:`AbstractStrategy.stages`, the one contract).

* :class:`SingleShooting`: the full problem at once (one stage).
* :class:`GrowingWindows`: continuation over growing data windows (growing-horizon fitting):
  each experiment's least-squares cost restricted to its samples at ``t <= T`` and simulated up
  to ``T`` (:meth:`~fmi_adjoint.costs.LeastSquaresCost.window`), for ``T`` = an eighth, a
  quarter, half and the whole record.  A short window has a wide basin: the phase error of a wrong stiffness
  grows with time, so over a short span the cost is close to quadratic in the parameters; each
  window's minimum lies in the basin of the next.
* :class:`ExperimentContinuation`: one experiment alone, then all of them (a mild experiment
  first leads into the joint fit's basin).
* :class:`AutomaticStrategy` (the default, ``--strategy auto``): growing windows where they
  apply (time-domain least-squares costs on every experiment, and windows that hold at least
  :data:`SAMPLES_PER_PARAMETER` samples per identified parameter), else single shooting
  (spectra, orders and POD costs are not sums over time: a window does not apply; FMU problems).
  Experiment continuation is not chosen for a single start: which experiment must go first is
  not known beforehand (on the engine mount the 100 N sweep first reaches the joint minimum, the
  300 N sweep first does not); a multi-start samples it (see :meth:`AutomaticStrategy.cycle`).

Why windows, and not multiple shooting
--------------------------------------
Chosen by measurement on the engine mount's joint fit of both bundled sweeps from the paper's
start values (the problem of issue 32): single shooting ends in a wrong minimum (least squares:
cost 6795 against 0.631, 92 to 172 standard errors off; L-BFGS-B: 7285, on the bounds); growing
windows reach the joint minimum with default options (L-BFGS-B and least squares; all four
parameters within 1.1 standard errors), with least squares in a thirtieth of the failing
single-shooting fit's time (docs/tutorials/first-identification.md#why-growing-windows,
``benchmarks/strategy_cost.py``).  Multiple shooting (Bock's
method: segment start states optimized with continuity conditions) is the textbook remedy as
well but is not built: windows reached the minimum on every problem measured (engine mount,
triple pendulum, strut), with the existing exact gradients and no new unknowns or constraints.

Window rule (measured: docs/tutorials/first-identification.md#why-growing-windows; the multi-start
runs over strategies: docs/tutorials/cluster.md, "Multi-start, clusters and checkpoints"): fractions halve from
the whole record down to :data:`SMALLEST_WINDOW` (1/8: with 1/4 as the shortest window the
strut's L-BFGS-B fit of twelve parameters ends 14.7 standard errors off, as single shooting
does; with 1/8 within 2.4, as least squares from every start; the engine mount and the triple
pendulum reach their minimum with either); a window is dropped when an experiment's part of it
holds fewer than :data:`SAMPLES_PER_PARAMETER` samples per identified parameter.  A stage whose
start (the previous window's result) cannot be simulated over the longer window starts again
from the latest earlier window's result that simulates, else from the start values; the
result then carries a warning (:attr:`StagedResult.notices`).  Override with ``--strategy single``
(a start known to lie in the basin: windows cost their extra stages) or
``GrowingWindows((f1, f2, ...))`` in the library.
"""

from __future__ import annotations

import abc
import copy
import dataclasses
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar, Protocol, TextIO, runtime_checkable

import numpy as np

from ..costs.least_squares import LeastSquaresCost
from ..errors import ConvergenceError, IdentificationError
from .optimize import AbstractOptimizer, IdentificationResult, identify, optimizer
from .problem import AbstractProblem, Experiment, IdentificationProblem

__all__ = ["AbstractStrategy", "AutomaticStrategy", "ExperimentContinuation", "GrowingWindows", "SMALLEST_WINDOW",
           "SAMPLES_PER_PARAMETER", "STRATEGY_NAMES", "SingleShooting", "Stage", "StageSummary", "StagedResult",
           "identify_staged", "run_stages", "stage_notices", "stage_starts", "strategy_named", "window_experiment",
           "window_fractions", "windowed"]

#: The shortest data window, as a fraction of the record (windows 1/8, 1/4, 1/2, then the whole;
#: measured: 1/4 as the shortest window leaves the strut's L-BFGS-B fit in a wrong minimum).
SMALLEST_WINDOW = 0.125
#: A final stage that ends where the full cost is below this fraction of its value at the start
#: values ends at an exact fit (noise-free data fitted to round-off, already by the previous
#: window): an optimizer that stops there on a failed line search (L-BFGS-B at round-off; its
#: gradient test compares with the stage's start, itself at round-off) has converged.
EXACT_FIT = 1e-20
#: A window is used only when every experiment's part of it holds at least this many samples
#: per identified parameter (fewer leave the window's minimum undetermined).
SAMPLES_PER_PARAMETER = 10


# -- data windows -------------------------------------------------------------------------
def window_experiment(experiment: Experiment, t_end: float) -> Experiment:
    """``experiment`` restricted to its samples at ``t <= t_end`` and simulated up to ``t_end``."""
    cost = experiment.cost
    if not isinstance(cost, LeastSquaresCost):
        raise IdentificationError(f"experiment '{experiment.name}': a data window needs a time-domain least-squares "
                                  "cost; use --strategy single for this cost.")
    return dataclasses.replace(experiment, cost=cost.window(t_end), t_end=t_end)


def windowed(problem: IdentificationProblem, ends: Mapping[int, float]) -> IdentificationProblem:
    """A copy of ``problem`` whose experiments at positions ``ends`` are data windows ending
    there (the others unchanged); it counts its own simulations."""
    other = copy.copy(problem)
    other.experiments = tuple(window_experiment(e, ends[k]) if k in ends else e
                              for k, e in enumerate(problem.experiments))
    other.simulations = 0
    return other


def _record_end(experiment: Experiment) -> float:
    if experiment.t_end is not None:
        return float(experiment.t_end)
    return float(experiment.model.model.simulation.t_end)


def _window_end(experiment: Experiment, fraction: float) -> float:
    """The last sample time at or before ``fraction`` of the record (windows end on a sample)."""
    times = experiment.cost.sample_times  # a LeastSquaresCost
    limit = fraction * _record_end(experiment)
    inside = times[times <= limit * (1 + 1e-12)]
    return float(inside[-1]) if inside.size else float(limit)


# -- stages -------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class Stage:
    """One stage of a strategy: the problem fitted, and what it is (for progress and RESULT.json)."""

    problem: IdentificationProblem
    text: str
    details: Mapping[str, object] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class StageSummary:
    """What one stage did (RESULT.json ``stages``)."""

    stage: str
    iterations: int
    simulations: int
    cost_initial: float
    cost: float
    success: bool
    seconds: float
    #: A warning about this stage ("" none): it did not start from the previous stage's result
    #: (:func:`run_stages`); kept in checkpoints, so that a resumed run warns as well.
    note: str = ""

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def stage_starts(iterations: Sequence[int], method: str | AbstractOptimizer) -> tuple[int, ...]:
    """Where each stage begins in a staged result's ``cost_history`` (and
    ``gradient_norm_history``), from the stages' iteration counts (:attr:`StageSummary.iterations`,
    RESULT.json ``strategy.stages[k].iterations``) and the optimizer ``method``: an L-BFGS-B stage
    records its start and each iteration (``iterations + 1`` entries), a least-squares stage each
    Jacobian evaluation, its start included (``iterations`` entries).  For plots and reports
    that mark the stage boundaries on the convergence history."""
    extra = optimizer(method).start_entries
    starts, at = [], 0
    for count in iterations:
        starts.append(at)
        at += int(count) + extra
    return tuple(starts)


def stage_notices(stages: Sequence[StageSummary]) -> tuple[str, ...]:
    """The warnings of ``stages`` (their notes), for the result's ``warnings``."""
    return tuple(s.note for s in stages if s.note)


class AbstractStrategy(abc.ABC):
    """How one start reaches its minimum: the stages it fits (see the module docstring)."""

    #: The ``--strategy`` name.
    name: ClassVar[str]

    @abc.abstractmethod
    def stages(self, problem: IdentificationProblem) -> tuple[Stage, ...]:
        """The stages of ``problem``, fitted one after another, each from the previous result;
        the last is ``problem`` itself."""

    def unavailable(self, problem: AbstractProblem) -> str | None:
        """Why this strategy does not apply to ``problem`` (None: it does)."""
        return None

    def variants(self, problem: IdentificationProblem) -> tuple[AbstractStrategy, ...]:
        """The strategies one start point is run with (several for :class:`ExperimentContinuation`
        without a first experiment: each experiment first in turn)."""
        return (self,)


@dataclasses.dataclass(frozen=True)
class SingleShooting(AbstractStrategy):
    """The full problem at once: one :func:`identify` run."""

    name: ClassVar[str] = "single"

    def stages(self, problem: IdentificationProblem) -> tuple[Stage, ...]:
        return (Stage(problem, "all data"),)


@dataclasses.dataclass(frozen=True)
class GrowingWindows(AbstractStrategy):
    """Continuation over data windows: each experiment's samples at ``t <= f * t_end`` for each
    fraction ``f`` of ``fractions`` (increasing, each in (0, 1)), then the whole record.
    ``fractions`` None: chosen by :func:`window_fractions`."""

    fractions: tuple[float, ...] | None = None
    name: ClassVar[str] = "windows"

    def __post_init__(self) -> None:
        if self.fractions is not None:
            f = tuple(float(v) for v in self.fractions)
            if not f or any(not 0 < v < 1 for v in f) or any(b <= a for a, b in zip(f, f[1:])):
                raise IdentificationError(f"window fractions {list(f)}: give increasing fractions of the record "
                                          "between 0 and 1 (the whole record is always the last stage).")
            object.__setattr__(self, "fractions", f)

    def unavailable(self, problem: AbstractProblem) -> str | None:
        if not isinstance(problem, IdentificationProblem):
            return "data windows apply to model files (an FMU problem is fitted by single shooting)"
        if not all(isinstance(e.cost, LeastSquaresCost) for e in problem.experiments):
            return ("data windows need time-domain least-squares costs (--cost time); spectra, orders and POD costs "
                    "are fitted by single shooting")
        if self.fractions is None and not window_fractions(problem):
            return (f"the record is too short for data windows (half of it holds fewer than "
                    f"{SAMPLES_PER_PARAMETER} samples per parameter)")
        return None

    def stages(self, problem: IdentificationProblem) -> tuple[Stage, ...]:
        reason = self.unavailable(problem)
        if reason is not None:
            raise IdentificationError(f"--strategy windows: {reason}; use --strategy single.")
        fractions = self.fractions if self.fractions is not None else window_fractions(problem)
        out = []
        for f in fractions:
            ends = {k: _window_end(e, f) for k, e in enumerate(problem.experiments)}
            shown = ", ".join(sorted({f"{t:g}" for t in ends.values()}))
            out.append(Stage(windowed(problem, ends), f"window t <= {shown} s",
                             {"window_fraction": f, "t_end": [ends[k] for k in sorted(ends)]}))
        return (*out, Stage(problem, "all data", {"window_fraction": 1.0}))


def window_fractions(problem: IdentificationProblem) -> tuple[float, ...]:
    """The automatic windows: halving from the whole record down to :data:`SMALLEST_WINDOW`,
    each kept when every experiment's part holds :data:`SAMPLES_PER_PARAMETER` samples per
    identified parameter (``()``: too short a record for windows)."""
    fractions = []
    f = 0.5
    while f >= SMALLEST_WINDOW * (1 - 1e-12):
        fractions.append(f)
        f /= 2
    need = SAMPLES_PER_PARAMETER * len(problem.names)
    kept = []
    for f in sorted(fractions):
        counts = [np.count_nonzero(e.cost.sample_times <= _window_end(e, f))
                  for e in problem.experiments]
        if min(counts) >= need:
            kept.append(f)
    return tuple(kept)


@dataclasses.dataclass(frozen=True)
class ExperimentContinuation(AbstractStrategy):
    """Experiment ``first`` alone, then all experiments from its result (``--strategy experiments``,
    ``--continuation``).

    A joint fit of experiments of different nonlinearity often has a narrow basin around the
    true values (engine_mount's 300 N sweep: a start 30 % off in c_E1 ends in a wrong
    minimum), while the mildest experiment alone converges from far away and lands inside
    that basin.  Which experiment is mildest need not be known: with ``first`` None every one
    is tried first (:meth:`variants`, one start each).
    """

    first: int | None = None
    name: ClassVar[str] = "experiments"

    def unavailable(self, problem: AbstractProblem) -> str | None:
        if not isinstance(problem, IdentificationProblem):
            return "experiment continuation applies to model files (and FMUs exported by fmi-adjoint)"
        if len(problem.experiments) < 2:
            return "experiment continuation fits each experiment alone first and needs two or more --data files"
        if self.first is not None and not 0 <= self.first < len(problem.experiments):
            return f"experiment {self.first} is not among 0..{len(problem.experiments) - 1}"
        return None

    def variants(self, problem: IdentificationProblem) -> tuple[AbstractStrategy, ...]:
        if self.first is not None:
            return (self,)
        return tuple(ExperimentContinuation(k) for k in range(len(problem.experiments)))

    def stages(self, problem: IdentificationProblem) -> tuple[Stage, ...]:
        reason = self.unavailable(problem)
        if reason is not None:
            raise IdentificationError(f"--strategy experiments: {reason}.")
        first = 0 if self.first is None else self.first
        return (Stage(problem.restricted([first]), f"experiment {first} alone", {"experiments": [first]}),
                Stage(problem, "all data", {"experiments": list(range(len(problem.experiments)))}))


@runtime_checkable
class ProblemWithWindows(Protocol):
    """A problem that brings its own data-window continuation (an FMU problem's windows that
    grow event by event, :class:`~fmi_adjoint.fmu.windows.EventWindows`): an optional part of
    the problem contract, declared here because identify/ cannot import fmu/."""

    def window_strategy(self) -> AbstractStrategy | None:
        """The problem's own windows, or None where they do not apply."""
        ...


@dataclasses.dataclass(frozen=True)
class AutomaticStrategy(AbstractStrategy):
    """The default: :class:`GrowingWindows` where they apply, else :class:`SingleShooting`
    (module docstring); a multi-start cycles through every applicable strategy (:meth:`cycle`)."""

    name: ClassVar[str] = "auto"

    def choose(self, problem: AbstractProblem) -> AbstractStrategy:
        """The strategy of one start on ``problem``: the problem's own windows where it brings
        them (``problem.window_strategy()``: an FMU problem's windows that grow event by event,
        :class:`~fmi_adjoint.fmu.windows.EventWindows`; None where its data have no events), else
        :class:`GrowingWindows` where they apply, else :class:`SingleShooting`."""
        chosen = problem.window_strategy() if isinstance(problem, ProblemWithWindows) else None
        if chosen is not None:
            return chosen
        windows = GrowingWindows()
        return windows if windows.unavailable(problem) is None else SingleShooting()

    def cycle(self, problem: AbstractProblem) -> tuple[AbstractStrategy, ...]:
        """The strategies a multi-start gives its start points in turn: :meth:`choose`'s first
        (start 0, the given start values, gets it), then experiment continuation from each
        experiment, then single shooting, as far as they apply."""
        chosen = self.choose(problem)
        count = len(problem.experiments) if isinstance(problem, IdentificationProblem) else 0
        others: list[AbstractStrategy] = [ExperimentContinuation(k) for k in range(count)]
        others.append(SingleShooting())
        return (chosen, *[s for s in others if s != chosen and s.unavailable(problem) is None])

    def variants(self, problem: IdentificationProblem) -> tuple[AbstractStrategy, ...]:
        return (self.choose(problem),)

    def stages(self, problem: IdentificationProblem) -> tuple[Stage, ...]:
        return self.choose(problem).stages(problem)


#: ``--strategy`` names and their strategies.
STRATEGY_NAMES: dict[str, Callable[[], AbstractStrategy]] = {
    "auto": AutomaticStrategy, "single": SingleShooting, "windows": GrowingWindows,
    "experiments": ExperimentContinuation,
}


def strategy_named(name: str) -> AbstractStrategy:
    """The strategy of a ``--strategy`` name."""
    if name not in STRATEGY_NAMES:
        raise IdentificationError(f"strategy {name!r} is not one of {', '.join(STRATEGY_NAMES)}.")
    return STRATEGY_NAMES[name]()


# -- running the stages -------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class StagedResult:
    """The result of one start's stages: the full problem's result (start values and start cost
    of the full problem; histories, iterations, simulations and time of all stages), the
    concrete strategy that ran, and what each stage did."""

    result: IdentificationResult
    strategy: AbstractStrategy
    stages: tuple[StageSummary, ...]

    @property
    def notices(self) -> tuple[str, ...]:
        """Warnings for the result (:func:`stage_notices`): a stage that could not start from the
        previous stage's result, so that the continuation was (partly) lost."""
        return stage_notices(self.stages)


#: Wraps a stage's problem at a start point (``(problem, x, label) -> problem`` identify runs on):
#: the multi-start records or replays its evaluations there.
View = Callable[[IdentificationProblem, np.ndarray, str], AbstractProblem]


def _plain_view(problem: IdentificationProblem, x: np.ndarray, label: str) -> AbstractProblem:
    return problem.with_start(x)


def run_stages(strategy: AbstractStrategy, problem: IdentificationProblem, x0: np.ndarray, method: str = "lbfgsb", *,
               scaling: str = "auto", max_iterations: int = 200, progress: TextIO | str | None = None,
               statistics: bool = True, label: str = "", view: View = _plain_view) -> StagedResult:
    """Fit the stages of ``strategy`` (a concrete one: see :meth:`AbstractStrategy.variants`)
    from ``x0``.  With more than one stage, the full problem's cost at ``x0`` is evaluated first
    (residuals without Jacobian for least-squares costs, else the cost and gradient), so that
    ``cost_initial`` is that of the full problem; ``success`` is the last stage's (the full
    problem converged).  ``max_iterations`` applies to each stage.  A stage that cannot simulate
    the previous stage's result starts from the latest earlier result that simulates, else from
    ``x0``, and says so in its :attr:`StageSummary.note` (:attr:`StagedResult.notices`: the
    caller's warnings)."""
    if isinstance(strategy, AutomaticStrategy):
        strategy = strategy.choose(problem)
    stages = strategy.stages(problem)
    started = time.perf_counter()
    x = np.asarray(x0, dtype=float)
    extra_simulations, J0 = 0, None
    if len(stages) > 1:
        full = view(problem, x, label)
        before = full.simulations
        try:
            if all(isinstance(e.cost, LeastSquaresCost) for e in problem.experiments):
                r, _ = full.residuals(x, jacobian=False)
                J0 = 0.5 * float(r @ r)
            else:
                J0 = full.evaluate(x, full.gradient_method).J
        except ConvergenceError:
            # The start values do not simulate over the whole record (the bouncing ball from
            # e = 0.55: its bounces accumulate at 1.56 s, inside a 2 s record) while the first
            # windows do: the stages go on; the full cost at the start is unknown (NaN).
            J0 = None
        extra_simulations = full.simulations - before
    results: list[IdentificationResult] = []
    summaries: list[StageSummary] = []
    note = ""
    stream = sys.stderr if isinstance(progress, str) else progress  # identify refuses other strings
    for k, stage in enumerate(stages):
        last = k == len(stages) - 1
        if stream is not None and len(stages) > 1:
            # One line where each stage begins: its iterations count from 0 again, on its own cost.
            stream.write(f"{label}stage {k + 1}/{len(stages)}: {stage.text}\n")
            stream.flush()
        text = label if len(stages) == 1 else f"{label}[{stage.text}] "
        name = stage.text

        def fit(x_start: np.ndarray, stage: Stage = stage, text: str = text, stats: bool = statistics and last
                ) -> IdentificationResult:
            return identify(view(stage.problem, x_start, text), method, scaling=scaling,
                            max_iterations=max_iterations, progress=progress, statistics=stats, label=text)

        try:
            r_k = fit(x)
        except ConvergenceError:
            # The previous stage's result cannot be simulated over this stage (a short window
            # may leave parameters far off that its span does not feel; measured on the strut):
            # start again from the last earlier result that simulates (the continuation goes
            # on from a shorter window), and from the start values only when none does (they
            # simulate over the whole record: the full cost was evaluated there).
            if k == 0 or len(stages) == 1:
                raise
            r_k, source = _restarted(fit, results[:-1], summaries[:-1], np.asarray(x0, dtype=float))
            name = f"{stage.text} (from {source}: the previous stage's result did not simulate)"
            note = _restart_note(stage.text, stages[k - 1].text, source, last)
        results.append(r_k)
        summaries.append(StageSummary(name, r_k.iterations, r_k.simulations, r_k.cost_initial, r_k.cost,
                                      r_k.success, r_k.seconds, note))
        note = ""
        x = r_k.parameters
    final = results[-1]
    if len(results) > 1:
        if J0 is not None and not final.success and final.cost <= EXACT_FIT * J0:
            final = dataclasses.replace(final, success=True, message=(
                f"converged: the previous stage's result fits all data to round-off (cost {final.cost:.3g}, "
                f"{final.cost / J0:.1e} of the cost at the start values); the optimizer found no further decrease "
                f"({final.message})"))
        final = dataclasses.replace(
            final, initial=np.array(x0, dtype=float), cost_initial=float("nan") if J0 is None else J0,
            cost_history=[c for r in results for c in r.cost_history],
            gradient_norm_history=[g for r in results for g in r.gradient_norm_history],
            iterations=sum(r.iterations for r in results),
            simulations=extra_simulations + sum(r.simulations for r in results),
            failed_simulations=sum(r.failed_simulations for r in results),
            seconds=time.perf_counter() - started,
        )
    return StagedResult(final, strategy, tuple(summaries))


def _restarted(fit: Callable[[np.ndarray], IdentificationResult], results: Sequence[IdentificationResult],
               summaries: Sequence[StageSummary], x0: np.ndarray) -> tuple[IdentificationResult, str]:
    """The stage fitted from the latest of the earlier stages' ``results`` that simulates over
    it, else from ``x0``; with where it started (for the stage's name and notice)."""
    for r, summary in zip(reversed(results), reversed(summaries)):
        try:
            return fit(r.parameters), f"the result of stage '{summary.stage}'"
        except ConvergenceError:
            continue
    return fit(x0), "the start values"


def _restart_note(stage: str, previous: str, source: str, last: bool) -> str:
    """The warning of a stage that did not start from the previous stage's result."""
    if source == "the start values":
        what = ("the final fit is single shooting from the start values, which may end in a wrong minimum"
                if last else "the continuation starts again from the start values")
    else:
        what = "the continuation skipped the stages after it"
    return (f"stage '{stage}' could not simulate the result of stage '{previous}' (a short data window left "
            f"parameters it does not feel far off) and started from {source}: {what}; check the result with "
            "--starts 8 (a multi-start also tries the other strategies) or start values closer to the truth "
            "(--set).")


def identify_staged(problem: IdentificationProblem, strategy: AbstractStrategy | None = None,
                    method: str = "lbfgsb", *, scaling: str = "auto", max_iterations: int = 200,
                    progress: TextIO | str | None = None, statistics: bool = True) -> StagedResult:
    """:func:`~fmi_adjoint.identify.identify` with a strategy (default: :class:`AutomaticStrategy`)
    from the problem's start values; ``progress`` None (default) prints nothing, a text stream
    or "stderr" gets one line per iteration.  The result's :attr:`StagedResult.notices` are
    warnings for the caller to show."""
    strategy = AutomaticStrategy() if strategy is None else strategy
    variants = strategy.variants(problem)
    if len(variants) != 1:
        raise IdentificationError(f"strategy {strategy!r} runs {len(variants)} starts per point; give the first "
                                  "experiment (ExperimentContinuation(first=K)) or use run_starts.")
    return run_stages(variants[0], problem, problem.start, method, scaling=scaling, max_iterations=max_iterations,
                      progress=progress, statistics=statistics)

