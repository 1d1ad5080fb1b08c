"""The trapezoidal rule for first-order ODEs ``x' = f(t, x)`` and its forward sensitivities.

Used for Model Exchange FMUs, whose right-hand side comes from the FMU: the project's
own fixed-step implicit integrator (the first-order counterpart of HHT with
``alpha = 0``: trapezoidal, A-stable, second order), so that the sensitivities below are
the exact derivatives of the computed discrete solution::

    x_{n+1} = x_n + h/2 (f_n + f_{n+1})
    (I - h/2 A_{n+1}) S_{n+1} = (I + h/2 A_n) S_n + h/2 (F_n + F_{n+1})

with ``A = df/dx``, ``F = df/dp`` and ``S = dx/dp``.  Newton's method on the step residual
uses ``A`` at the current iterate and stops when the update is below ``tol`` relative to
the state scale, then applies that last update (the same polish as HHT).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from ..errors import ConvergenceError

__all__ = ["OdeTrajectory", "integrate_trapezoidal", "trapezoidal_sensitivities"]


@dataclasses.dataclass(frozen=True, eq=False)
class OdeTrajectory:
    """States ``x`` and right-hand sides ``f`` at the grid times ``t`` (rows)."""

    t: np.ndarray
    x: np.ndarray
    f: np.ndarray
    newton_iterations: np.ndarray


def integrate_trapezoidal(
    f: Callable[[float, np.ndarray], np.ndarray],
    jacobian: Callable[[float, np.ndarray], np.ndarray],
    x0: np.ndarray,
    grid: np.ndarray,
    *,
    scale: np.ndarray | None = None,
    tol: float = 1e-12,
    max_iterations: int = 25,
    step_done: Callable[[float, np.ndarray], None] | None = None,
) -> OdeTrajectory:
    """Integrate ``x' = f(t, x)`` over ``grid`` with the trapezoidal rule.

    Parameters
    ----------
    f, jacobian : callable
        Right-hand side and its Jacobian ``df/dx`` (shape ``(n, n)``).
    x0 : numpy.ndarray
    grid : numpy.ndarray
        Strictly increasing step times.
    scale : numpy.ndarray, optional
        State scale for the convergence test (default: 1 + |x0|).
    tol : float
        Newton stops when ``max |dx_i| / (|x_i| + scale_i) <= tol``.
    step_done : callable, optional
        Called with ``(t, x)`` after every accepted step (FMUs: fmiCompletedIntegratorStep).

    Raises
    ------
    ConvergenceError
        Naming the time and the fix when Newton does not converge or the state is not finite.
    """
    grid = np.asarray(grid, dtype=float)
    x = np.array(x0, dtype=float)
    n = x.size
    scale = np.ones(n) + np.abs(x) if scale is None else np.asarray(scale, dtype=float)
    X = np.empty((grid.size, n))
    F = np.empty((grid.size, n))
    iterations = np.zeros(grid.size, dtype=int)
    X[0], F[0] = x, f(float(grid[0]), x)
    eye = np.eye(n)
    for k in range(grid.size - 1):
        t1, h = float(grid[k + 1]), float(grid[k + 1] - grid[k])
        x1 = X[k] + h * F[k]  # explicit Euler predictor
        converged = False
        for it in range(1, max_iterations + 1):
            f1 = f(t1, x1)
            residual = x1 - X[k] - 0.5 * h * (F[k] + f1)
            try:
                dx = np.linalg.solve(eye - 0.5 * h * jacobian(t1, x1), -residual)
            except np.linalg.LinAlgError:
                raise ConvergenceError(f"the trapezoidal step to t = {t1:.6g} s has a singular Newton matrix; "
                                       "use a smaller step (--step) or check the parameter values.") from None
            x1 = x1 + dx
            if not np.all(np.isfinite(x1)):
                break
            if np.max(np.abs(dx) / (np.abs(x1) + scale)) <= tol:
                converged = True
                iterations[k + 1] = it
                break
        if not converged:
            raise ConvergenceError(
                f"the trapezoidal step to t = {t1:.6g} s did not converge in {max_iterations} Newton iterations; "
                "use a smaller step (--step) or check the parameter values."
            )
        X[k + 1], F[k + 1] = x1, f(t1, x1)
        if step_done is not None:
            step_done(t1, x1)
    return OdeTrajectory(t=grid, x=X, f=F, newton_iterations=iterations)


def trapezoidal_sensitivities(grid: np.ndarray, A: np.ndarray, Fp: np.ndarray, S0: np.ndarray) -> np.ndarray:
    """Forward sensitivities ``S_n = dx_n/dp`` of the trapezoidal solution.

    Parameters
    ----------
    grid : numpy.ndarray, shape (N+1,)
    A : numpy.ndarray, shape (N+1, n, n)
        ``df/dx`` at the grid points of the solution.
    Fp : numpy.ndarray, shape (N+1, n, n_p)
        ``df/dp`` there.
    S0 : numpy.ndarray, shape (n, n_p)
        ``dx_0/dp`` (from the initialization).
    """
    grid = np.asarray(grid, dtype=float)
    n = S0.shape[0]
    S = np.empty((grid.size,) + S0.shape)
    S[0] = S0
    eye = np.eye(n)
    for k in range(grid.size - 1):
        h = float(grid[k + 1] - grid[k])
        rhs = (eye + 0.5 * h * A[k]) @ S[k] + 0.5 * h * (Fp[k] + Fp[k + 1])
        try:
            S[k + 1] = np.linalg.solve(eye - 0.5 * h * A[k + 1], rhs)
        except np.linalg.LinAlgError:
            raise ConvergenceError(f"the sensitivity step to t = {grid[k + 1]:.6g} s has a singular matrix; "
                                   "use a smaller step (--step).") from None
    return S
