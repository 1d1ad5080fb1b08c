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
from scipy.optimize import minimize

from ..errors import ConvergenceError
from .problem import DesignProblem, DesignValue

__all__ = ["DesignIteration", "DesignResult", "run_design", "violations"]


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

    def fun(z: np.ndarray) -> tuple[float, np.ndarray]:
        try:
            value = evaluate(z)
        except ConvergenceError:
            # A failed trial step: a value above all seen makes the line search backtrack.
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
    left = violations(problem, final)
    if any(v > VIOLATION_TOLERANCE for v in left.values()):
        success = False
        worst_name = max(left, key=left.__getitem__)
        message += (f"; {worst_name} still violated by {left[worst_name]:.3g} of its scale after "
                    f"{PENALTY_RAISES} raises of the penalty weight")
    return DesignResult(problem=problem, z_start=z0, z=z, start=start, final=final, history=tuple(history),
                        evaluations=count[0] + 1, success=success, message=message)


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
