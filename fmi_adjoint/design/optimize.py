"""Solving the design problem: quasi-Newton (L-BFGS) on the unconstrained variables.

The dissertation iterates a gradient method (eq. (5.15), ``delta u = -kappa H_u``, with a
line search for ``kappa``) and reports its "quite poor but stable" linear convergence
(Sec. 5.3.3).  With exact gradients of the discrete criterion a limited-memory quasi-Newton
method (scipy's L-BFGS-B, no bounds: the bound map keeps the input inside) does the same
job in far fewer simulations.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
from scipy.optimize import minimize

from .problem import DesignProblem, DesignValue

__all__ = ["DesignIteration", "DesignResult", "run_design"]


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

    def fun(z: np.ndarray) -> tuple[float, np.ndarray]:
        value = evaluate(z)
        return value.objective, value.gradient

    def record(value: DesignValue) -> None:
        entry = DesignIteration(len(history), value.objective, value.criterion, value.penalty,
                                float(np.linalg.norm(value.gradient)), problem.penalty_weight)
        history.append(entry)
        if progress:
            progress(entry)

    history: list[DesignIteration] = []
    start = evaluate(z0)
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
    z, moved = _shift_switches(problem, z, evaluate) if polish else (z, 0)
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
    return DesignResult(problem=problem, z_start=z0, z=z, start=start, final=final, history=tuple(history),
                        evaluations=count[0] + 1, success=success, message=message)


#: How often the penalty weight may be raised tenfold, and the violations that make it so:
#: end misses and amplitude excess relative to their scale, rate excess relative to the rate.
PENALTY_RAISES = 4
VIOLATION_TOLERANCE = 1e-3


def _violated(problem: DesignProblem, value: DesignValue) -> bool:
    """Does a penalty term of ``value`` exceed its tolerance?"""
    spec = problem.spec
    names = problem.compiled.output_names
    Y = value.trajectory.outputs()
    for name, target in spec.end.items():
        if abs(Y[-1, names.index(name)] - target) > VIOLATION_TOLERANCE * problem.output_scale[name]:
            return True
    for name, limit in spec.limits.items():
        if float(np.abs(Y[:, names.index(name)]).max()) > (1.0 + VIOLATION_TOLERANCE) * limit:
            return True
    lo, hi = spec.bounds
    u = problem.signal_matrix @ value.knots
    if float(np.max(np.maximum(u - hi, lo - u))) > VIOLATION_TOLERANCE * (hi - lo):
        return True
    if spec.rate is not None:
        slope = np.abs(np.diff(value.knots) / np.diff(problem.knot_times))
        if float(slope.max()) > (1.0 + VIOLATION_TOLERANCE) * spec.rate:
            return True
    return False


#: A knot counts as being on a bound within this fraction of ``hi - lo``.
SATURATED = 1e-3


def _shift_switches(problem: DesignProblem, z: np.ndarray, evaluate: Callable[[np.ndarray], DesignValue]
                    ) -> tuple[np.ndarray, int]:
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
    current = evaluate(z).objective
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
                value = evaluate(trial).objective
                if value < current:
                    z, current, moves, improved = trial, value, moves + 1, True
                    break
            if improved:
                break
    return z, moves
