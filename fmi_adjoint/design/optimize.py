"""Solving the design problem: quasi-Newton (L-BFGS) on the unconstrained variables.

The dissertation iterates a gradient method (eq. (5.15), ``delta u = -kappa H_u``, with a
line search for ``kappa``) and reports its "quite poor but stable" linear convergence
(Sec. 5.3.3).  With exact gradients of the discrete criterion a limited-memory quasi-Newton
method (scipy's L-BFGS-B: with box bounds on the knots, the default, or without bounds when a
smooth map keeps the input inside) does the same job in far fewer simulations.

A trial input whose run fails (Newton does not converge, or the sensitivities overflow) is
treated as a bad step: the line search gets a value above every value seen and backtracks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from ..errors import ConvergenceError
from ..linesearch import probe_line, projected_descent
from .problem import DesignProblem, DesignValue

__all__ = ["DesignIteration", "DesignResult", "StopDiagnosis", "diagnose_stop", "run_design", "violations"]


@dataclasses.dataclass(frozen=True)
class DesignIteration:
    """One accepted iterate."""

    iteration: int
    objective: float
    criterion: float
    penalty: float
    gradient_norm: float
    penalty_weight: float


@dataclasses.dataclass(frozen=True, eq=False)
class DesignResult:
    """Start and final design with their information matrices and Cramér-Rao bounds.

    ``M_*`` are scaled (unit-free, :mod:`fmi_adjoint.design.fisher`); ``standard_errors_*``
    are in the parameters' units.  ``end_misses`` are ``y(T) - target`` of the final run,
    ``limit_excess`` the largest ``|y| - L`` (negative: inside), ``rate_excess`` the largest
    ``|du/dt| - rate`` between knots.
    """

    problem: DesignProblem
    z_start: np.ndarray
    z: np.ndarray
    start: DesignValue
    final: DesignValue
    history: tuple[DesignIteration, ...]
    evaluations: int
    success: bool
    message: str
    #: Why the optimizer stopped, whether that can be trusted, and what to do (:func:`diagnose_stop`).
    stop: StopDiagnosis | None = None
    #: Every start of a multi-start design (:mod:`fmi_adjoint.design.multistart`), in plan
    #: order; empty for a single run of :func:`run_design`.
    starts: tuple = ()
    #: Index (in :attr:`starts`) of the start this result continues, and how many starts
    #: ended within :data:`~fmi_adjoint.design.multistart.SAME_BEST` of its criterion.
    best_start: int = 0
    reached_best: int = 1

    @property
    def standard_errors_start(self) -> np.ndarray:
        return self.problem.standard_errors(self.start.M)

    @property
    def standard_errors_final(self) -> np.ndarray:
        return self.problem.standard_errors(self.final.M)

    def end_misses(self) -> dict[str, float]:
        names = self.problem.compiled.output_names
        Y = self.final.trajectory.outputs()
        return {name: float(Y[-1, names.index(name)] - target) for name, target in self.problem.spec.end.items()}

    def limit_excess(self) -> dict[str, float]:
        names = self.problem.compiled.output_names
        Y = self.final.trajectory.outputs()
        return {name: float(np.abs(Y[:, names.index(name)]).max() - limit)
                for name, limit in self.problem.spec.limits.items()}

    def rate_excess(self) -> float | None:
        rate = self.problem.spec.rate
        if rate is None:
            return None
        slope = np.diff(self.final.knots) / np.diff(self.problem.knot_times)
        return float(np.abs(slope).max() - rate)


def run_design(problem: DesignProblem, *, max_iterations: int = 200, z_start: np.ndarray | None = None,
               progress: Callable[[DesignIteration], None] | None = None, polish: bool = True) -> DesignResult:
    """Minimize the design objective from the spec's start input (or ``z_start``).

    ``progress`` receives every accepted iterate (the command line prints one line each).
    ``polish``: after convergence, move the switches of a bang-bang design knot by knot
    while that lowers the objective (:func:`_shift_switches`), then converge again.
    """
    z0 = problem.start() if z_start is None else np.asarray(z_start, dtype=float)
    last: dict[bytes, DesignValue] = {}
    count = [0]

    def evaluate(z: np.ndarray) -> DesignValue:
        key = np.asarray(z, dtype=float).tobytes()
        if key not in last:
            count[0] += 1
            last.clear()
            last[key] = problem.evaluate(z)
        return last[key]

    worst = [0.0]
    failed = [0]

    def fun(z: np.ndarray) -> tuple[float, np.ndarray]:
        try:
            value = evaluate(z)
        except ConvergenceError:
            # A failed trial step: a value above all seen makes the line search backtrack.
            failed[0] += 1
            return worst[0] + 1.0 + abs(worst[0]), np.zeros_like(z)
        worst[0] = max(worst[0], value.objective)
        return value.objective, value.gradient

    def record(value: DesignValue) -> None:
        entry = DesignIteration(len(history), value.objective, value.criterion, value.penalty,
                                float(np.linalg.norm(value.gradient)), problem.penalty_weight)
        history.append(entry)
        if progress:
            progress(entry)

    history: list[DesignIteration] = []
    start = evaluate(z0)
    worst[0] = start.objective
    record(start)
    lo, hi = problem.spec.bounds
    bounds = [(lo, hi)] * len(z0) if problem.spec.bound_map.box else None

    def stage(z: np.ndarray) -> tuple[np.ndarray, bool, str]:
        """Minimize from ``z`` with what is left of the iteration budget."""
        left = max_iterations - (len(history) - 1)
        if left <= 0:
            return z, False, "iteration budget used up"
        options = {"maxiter": left, "ftol": 1e-13, "gtol": 1e-9, "maxcor": 20}
        from scipy.optimize import minimize  # noqa: PLC0415 (scipy.optimize: 0.25 s at import)

        result = minimize(fun, z, jac=True, method="L-BFGS-B", callback=lambda x: record(evaluate(x)),
                          bounds=bounds, options=options)
        return np.asarray(result.x), bool(result.success), str(result.message)

    z, success, message = stage(z0)
    z, moved = _shift_switches(problem, z) if polish else (z, 0)
    if moved:
        z, success, message = stage(z)
    for _ in range(PENALTY_RAISES):
        if not _violated(problem, evaluate(z)) or len(history) > max_iterations:
            break
        # Sequential penalty method: a tenfold weight, continued from here (problem docstring).
        problem = problem.with_penalty_weight(10.0 * problem.penalty_weight)
        last.clear()
        z, success, message = stage(z)
    final = problem.evaluate(z)
    stop = diagnose_stop(problem, z, final, message, success=success, history=tuple(history),
                         max_iterations=max_iterations, failed_trials=failed[0])
    success = success or stop.trusted
    left = violations(problem, final)
    if any(v > VIOLATION_TOLERANCE for v in left.values()):
        success = False
        worst_name = max(left, key=left.__getitem__)
        message += (f"; {worst_name} still violated by {left[worst_name]:.3g} of its scale after "
                    f"{PENALTY_RAISES} raises of the penalty weight")
        stop = dataclasses.replace(stop, trusted=False, advice=stop.advice + (
            f" The constraint '{worst_name}' is still violated: loosen it, or give more --knots so that the input "
            "can meet it."))
    return DesignResult(problem=problem, z_start=z0, z=z, start=start, final=final, history=tuple(history),
                        evaluations=count[0] + 1 + stop.probes, success=success, message=message, stop=stop)


@dataclasses.dataclass(frozen=True)
class StopDiagnosis:
    """Why the optimizer stopped, translated from scipy's L-BFGS-B status (issue 32).

    ``cause`` is one of :data:`CAUSES`; ``trusted``: the end is a (local) minimum to working
    precision; ``advice``: what the stop means and the fix that works for it; ``order``:
    the measured order of the Taylor remainder along the last search direction (2 where the
    objective is smooth, 1 at a kink; None if not probed); ``probes``: evaluations spent on
    the diagnosis.
    """

    cause: str
    trusted: bool
    advice: str
    order: float | None = None
    probes: int = 0

    def record(self) -> dict:
        return {"cause": self.cause, "trusted": self.trusted, "advice": self.advice,
                "taylor_order": None if self.order is None or not np.isfinite(self.order) else float(self.order)}


#: The causes :func:`diagnose_stop` tells apart.
CAUSES = ("converged", "iteration limit", "non-smooth", "flat", "failed runs", "line search")

#: Probe step along the projected gradient, as a fraction of ``hi - lo`` of the knots, and
#: the ratio of the two steps of the Taylor test.
PROBE_STEP = 1e-3
PROBE_RATIO = 8.0
#: Differences of the objective below this many units of round-off of its value are noise.
ROUNDOFF = 1e3


def diagnose_stop(problem: DesignProblem, z: np.ndarray, value: DesignValue, message: str, *, success: bool,
                  history: tuple[DesignIteration, ...], max_iterations: int, failed_trials: int = 0) -> StopDiagnosis:
    """Translate the optimizer's stop into its cause and a fix (issue 32).

    * ``STOP: TOTAL NO. OF ITERATIONS REACHED LIMIT`` (or the budget used up): the iteration
      limit; raising ``--max-iterations`` continues.
    * ``ABNORMAL`` (scipy's "line search failed", also ``ROUNDING ERRORS PREVENT PROGRESS``):
      the line search found no step that lowers the objective along the quasi-Newton direction.
      More iterations do not help.  A Taylor test along the projected gradient ``d`` tells why:
      the remainder ``r(h) = f(z + h d) - f(z) - h g.d`` falls like ``h^2`` where ``f`` is
      smooth, like ``h`` at a kink (:meth:`fmi_adjoint.linesearch.LineProbe.kink`, the test the
      identification's stop uses too; ``g.d`` is that of the step actually taken, and knots
      within ``h`` of the bound the direction points at are not moved).  A kink is a non-smooth objective (the
      E-criterion where the smallest eigenvalues cross, hinge penalties of ``--limit`` and
      ``--rate``, a non-smooth force of the model); no measurable change at all is a flat
      objective (round-off); trial inputs whose runs failed are named; otherwise the stop is
      reported as a plain line-search failure.  Only a flat objective with a projected
      gradient below 1e-6 of the start's is trusted as a minimum.
    """
    if success:
        return StopDiagnosis("converged", True, "converged: " + message)
    if "ITERATIONS REACHED LIMIT" in message or "EVALUATIONS EXCEEDS LIMIT" in message or "budget used up" in message:
        recent = [h.objective for h in history[-11:]]
        fall = (recent[0] - recent[-1]) / max(abs(recent[0]), 1e-300) if len(recent) > 1 else 0.0
        return StopDiagnosis("iteration limit", False, (
            f"the iteration limit ({max_iterations}) was reached while the objective still fell by {100 * fall:.3g} % "
            f"over the last {len(recent) - 1} iterations: the design is not converged; raise --max-iterations to "
            "continue."))
    lo, hi = problem.spec.bounds
    g = np.asarray(value.gradient, dtype=float)
    h = PROBE_STEP * (hi - lo)
    # The projected gradient: components that push a knot out of its box do not count, nor
    # (for the probes) those of knots closer than h to the bound they point at, so that the
    # probe steps are taken in full (:func:`fmi_adjoint.linesearch.projected_descent`).
    box = problem.spec.bound_map.box
    lower, upper = (lo, hi) if box else (-np.inf, np.inf)
    d = projected_descent(g, z, np.full_like(z, lower), np.full_like(z, upper), h if box else 0.0)
    norm = float(np.linalg.norm(d))
    start_norm = history[0].gradient_norm if history else norm
    f0 = value.objective
    noise = ROUNDOFF * np.finfo(float).eps * max(abs(f0), 1e-300)
    order: float | None = None
    probes = 0
    remainders: list[float] = []
    kink = False
    if norm > 0:
        d /= norm
        probe = probe_line(lambda trial: _objective(problem, trial), z, d, g, f0, (h, h / PROBE_RATIO), lower, upper)
        probes = len(probe.steps)
        remainders = list(probe.remainders)
        order = probe.order(noise)
        kink = probe.kink(noise)
    small = norm <= 1e-6 * max(start_norm, 1e-300)
    if norm == 0 or (remainders and all(abs(r) <= noise for r in remainders)):
        trusted = small or norm == 0
        return StopDiagnosis("flat", trusted, (
            "the line search failed because the objective does not change measurably along the search direction "
            "(differences at round-off level)" + (
                ": the gradient is small too, so this is a minimum to working precision." if trusted else
                f", although the gradient ({norm:.3g}) is not small: the criterion is flat here, e.g. a parameter "
                "the outputs barely see. Measure another output (--noise), lengthen the experiment (--t-end) or "
                "try other starts (--starts N --seed S).")), order, probes)
    if kink:
        return StopDiagnosis("non-smooth", False, (
            f"the line search failed at a kink: along the search direction the objective is not smooth (Taylor "
            f"remainder of order {order:.2f}, 2 for a smooth function) at {_kink_sources(problem)}. The result is "
            "not a verified minimum, and raising --max-iterations does not help. Use a smooth criterion (--criterion "
            "A or D), more --knots, or other starts (--starts N --seed S); where a force of the model is not "
            "smooth, keep the design away from it with an output --limit (or smooth the force)."), order, probes)
    if failed_trials:
        return StopDiagnosis("failed runs", False, (
            f"the line search failed: {failed_trials} trial input(s) could not be simulated (Newton did not converge "
            "or the sensitivities overflowed), so the optimizer could not step past them. Narrow the input's "
            "--bounds, add an amplitude --limit, shorten --t-end or use a smaller --step."), order, probes)
    smooth = (f"although the objective is smooth there (Taylor order {order:.2f})" if order is not None else
              "(whether the objective is smooth there was not measured: a Taylor remainder is at round-off)")
    return StopDiagnosis("line search", False, (
        f"the line search found no lower objective along the quasi-Newton direction {smooth}; the result may not be a "
        "minimum. Try other starts (--starts N --seed S) or more --knots; raising --max-iterations does not help."),
        order, probes)


def _kink_sources(problem: DesignProblem) -> str:
    """Where the objective of ``problem`` can have kinks (for :func:`diagnose_stop`)."""
    spec = problem.spec
    sources = []
    if problem.criterion.name == "E" and len(spec.params) > 1:
        sources.append("the E-criterion where the smallest eigenvalues of M cross (its soft minimum sharpens as M "
                       "grows)")
    elif problem.criterion.name == "A-cov":
        sources.append("the A-cov criterion near a singular M")
    elif problem.criterion.name not in ("A", "D", "E"):
        sources.append(f"the criterion '{problem.criterion.name}' itself")
    if spec.limits:
        sources.append("the hinge penalties of --limit")
    if spec.rate is not None:
        sources.append("the hinge penalty of --rate")
    sources.append("a non-smooth force of the model (hinge, stop, friction)")
    return "; or ".join(sources)


#: How often the penalty weight may be raised tenfold, and the violations that make it so:
#: end misses and amplitude excess relative to their scale, rate excess relative to the rate.
PENALTY_RAISES = 4
VIOLATION_TOLERANCE = 1e-3


def violations(problem: DesignProblem, value: DesignValue) -> dict[str, float]:
    """What is left of each constraint, relative to its scale (0 or negative: met): end
    conditions ``end <output>`` (miss over the output's scale), amplitude limits ``limit
    <output>`` (excess over the limit), ``rate`` (excess over the rate) and ``bounds`` (the
    signal at the steps outside ``[lo, hi]``, over ``hi - lo``)."""
    spec = problem.spec
    names = problem.compiled.output_names
    Y = value.trajectory.outputs()
    out: dict[str, float] = {}
    for name, target in spec.end.items():
        out[f"end {name}"] = abs(float(Y[-1, names.index(name)]) - target) / problem.output_scale[name]
    for name, limit in spec.limits.items():
        out[f"limit {name}"] = (float(np.abs(Y[:, names.index(name)]).max()) - limit) / limit
    if spec.rate is not None:
        slope = np.abs(np.diff(value.knots) / np.diff(problem.knot_times))
        out["rate"] = (float(slope.max()) - spec.rate) / spec.rate
    lo, hi = spec.bounds
    u = problem.signal_matrix @ value.knots
    out["bounds"] = float(np.max(np.maximum(u - hi, lo - u))) / (hi - lo)
    return out


def _violated(problem: DesignProblem, value: DesignValue) -> bool:
    """Does a constraint of ``value`` exceed its tolerance?"""
    return any(v > VIOLATION_TOLERANCE for v in violations(problem, value).values())


#: A knot counts as being on a bound within this fraction of ``hi - lo``.
SATURATED = 1e-3


def _shift_switches(problem: DesignProblem, z: np.ndarray) -> tuple[np.ndarray, int]:
    """Move the switches of a bang-bang design while the objective falls.

    A criterion that is concave in the input (every criterion of a model linear in the
    input, e.g. the A-criterion of the oscillators of Sec. 5.3) is minimized at a vertex of
    the knots' box: the input is bang-bang.  Then every vertex whose switching function
    (the gradient) points outwards is a local minimum, and a gradient method stops at the
    first such vertex it meets; on the oscillator of Sec. 5.3.2 that is several knot
    spacings from the Pontryagin switch, because the criterion is flat in the switching
    time.  Moving a switch by one knot is a move to a neighbouring vertex; along that edge
    the criterion is concave, so comparing the two vertices is enough.  Each try costs one
    evaluation without gradient.  Returns the new ``z`` and the number of moves.
    """
    lo, hi = problem.spec.bounds
    margin = SATURATED * (hi - lo)
    moves = 0
    current = _objective(problem, z)
    improved = True
    while improved and moves < 4 * len(z):
        improved = False
        xi = problem.knot_values(z)
        high, low = xi >= hi - margin, xi <= lo + margin
        for k in range(len(z) - 1):
            if not ((high[k] and low[k + 1]) or (low[k] and high[k + 1])):
                continue
            for src, dst in ((k + 1, k), (k, k + 1)):
                trial = z.copy()
                trial[dst] = z[src]
                value = _objective(problem, trial)
                if value < current:
                    z, current, moves, improved = trial, value, moves + 1, True
                    break
            if improved:
                break
    return z, moves


def _objective(problem: DesignProblem, z: np.ndarray) -> float:
    """The objective without gradient (a failed run counts as no improvement)."""
    try:
        return problem.evaluate(z, gradient=False).objective
    except ConvergenceError:
        return np.inf
