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
               progress: Callable[[DesignIteration], None] | None = None) -> DesignResult:
    """Minimize the design objective from the spec's start input (or ``z_start``).

    ``progress`` receives every accepted iterate (the command line prints one line each).
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

    start = evaluate(z0)
    history = [DesignIteration(0, start.objective, start.criterion, start.penalty,
                               float(np.linalg.norm(start.gradient)))]
    if progress:
        progress(history[0])

    def callback(z: np.ndarray) -> None:
        value = evaluate(z)
        entry = DesignIteration(len(history), value.objective, value.criterion, value.penalty,
                                float(np.linalg.norm(value.gradient)))
        history.append(entry)
        if progress:
            progress(entry)

    lo, hi = problem.spec.bounds
    bounds = [(lo, hi)] * len(z0) if problem.spec.bound_map.box else None
    result = minimize(fun, z0, jac=True, method="L-BFGS-B", callback=callback, bounds=bounds,
                      options={"maxiter": max_iterations, "ftol": 1e-13, "gtol": 1e-9, "maxcor": 20})
    final = problem.evaluate(result.x)
    return DesignResult(problem=problem, z_start=z0, z=np.asarray(result.x), start=start, final=final,
                        history=tuple(history), evaluations=count[0] + 1, success=bool(result.success),
                        message=str(result.message))
