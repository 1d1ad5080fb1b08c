"""Hilber-Hughes-Taylor integration of index-3 DAEs.

The step residual (Lauss et al. 2018, eq. (15); Oberpeilsteiner 2018, Sec. 2.4.2)::

    f1 = q_i - q_{i-1} - h v_{i-1} - h^2/2 [(1-2 beta) a_{i-1} + 2 beta a_i]
    f2 = v_i - v_{i-1} - h [(1-gamma) a_{i-1} + gamma a_i]
    f3 = (M a)_i / (1+alpha) + F_i - alpha/(1+alpha) F_{i-1},   F = C_q^T lambda - Q
    f4 = C(q_i, t_i) / (beta h^2)

with ``beta = (1-alpha)^2/4`` and ``gamma = (1-2 alpha)/2``.  ``f1`` and ``f2`` are
explicit in ``(q_i, v_i)``, so Newton iterates on ``(a_i, lambda_i)`` with the exact
iteration matrix (eq. (16) reduced; the constraint rows scaled by ``1/(beta h^2)`` as
in Negrut et al. 2007)::

    [ S      C_q^T ]     S = M/(1+alpha) + beta h^2 (J_M/(1+alpha) + J_C - J_Q) - gamma h J_V
    [ C_q    0     ]

The discrete adjoint (:mod:`fmi_adjoint.adjoint`) differentiates exactly this residual.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..compiled import CompiledModel
from ..errors import ConvergenceError, ModelError
from .initialization import initial_state
from .trajectory import Trajectory

__all__ = ["HHT", "time_grid", "simulate"]


@dataclasses.dataclass(frozen=True)
class HHT:
    """HHT-alpha integrator settings.

    Attributes
    ----------
    alpha : float
        Numerical damping, in [-1/3, 0]; 0 gives the trapezoidal Newmark rule.
    rtol : float
        Newton stops when every correction of ``a`` and ``lambda`` is below
        ``rtol * (|value| + typical magnitude)``.  Newton converges quadratically,
        so the accepted iterate is accurate to about ``rtol**2`` relative, i.e. to
        round-off.  It also stops when corrections below ``1e-7`` relative no longer
        contract (the round-off floor of a badly scaled multiplier).
    max_iterations : int
        Newton iterations allowed per step.
    """

    alpha: float = -0.05
    rtol: float = 1e-10
    max_iterations: int = 25

    def __post_init__(self) -> None:
        if not isinstance(self.alpha, (int, float)) or not -1.0 / 3.0 <= self.alpha <= 0.0:
            raise ModelError(f"HHT alpha = {self.alpha!r} is outside [-1/3, 0], where the method is stable.")
        if not 0 < self.rtol < 1e-3:
            raise ModelError(f"HHT rtol = {self.rtol!r} must lie in (0, 1e-3).")
        if self.max_iterations < 1:
            raise ModelError(f"HHT max_iterations = {self.max_iterations!r} must be at least 1.")

    @property
    def beta(self) -> float:
        """Newmark beta = (1 - alpha)^2 / 4."""
        return (1.0 - self.alpha) ** 2 / 4.0

    @property
    def gamma(self) -> float:
        """Newmark gamma = (1 - 2 alpha) / 2."""
        return (1.0 - 2.0 * self.alpha) / 2.0


def time_grid(t0: float, t_end: float, step: float) -> np.ndarray:
    """Step times ``t0 + i h`` ending exactly at ``t_end``.

    When ``t_end - t0`` is not a multiple of ``h`` the last step absorbs the remainder
    and has a length between ``h/2`` and ``3h/2``.
    """
    for name, value in (("t0", t0), ("t_end", t_end), ("step", step)):
        if not math.isfinite(value):
            raise ModelError(f"{name} = {value!r} is not finite.")
    if step <= 0:
        raise ModelError(f"step = {step!r} must be positive.")
    if t_end <= t0:
        raise ModelError(f"t_end = {t_end!r} must be larger than t0 = {t0!r}.")
    n_steps = max(1, round((t_end - t0) / step))
    if n_steps > 50_000_000:
        raise ModelError(f"t_end/step gives {n_steps} steps; choose a larger step or a shorter time span.")
    grid = t0 + step * np.arange(n_steps + 1, dtype=float)
    grid[-1] = t_end
    return grid


def simulate(
    model: CompiledModel,
    p: np.ndarray | None = None,
    *,
    t_end: float | None = None,
    step: float | None = None,
    solver: HHT | None = None,
    t0: float = 0.0,
) -> Trajectory:
    """Integrate the model with HHT from a consistent initial state.

    Parameters
    ----------
    model : CompiledModel
    p : numpy.ndarray, optional
        Parameter vector (defaults: the model's nominal values).
    t_end, step : float, optional
        Defaults from the model's simulation settings.
    solver : HHT, optional
        Defaults to ``HHT(alpha=model's default alpha)``.
    t0 : float

    Returns
    -------
    Trajectory

    Raises
    ------
    ConvergenceError
        If Newton fails in a step (the message names the time, the step and the residual).
    """
    settings = model.model.simulation
    p = model.defaults.copy() if p is None else np.asarray(p, dtype=float)
    if p.shape != (model.n_p,):
        raise ModelError(f"parameter vector has shape {p.shape}; model '{model.model.name}' needs ({model.n_p},).")
    if not np.all(np.isfinite(p)):
        bad = [model.parameter_names[k] for k in np.flatnonzero(~np.isfinite(p))]
        raise ModelError(f"parameter(s) {bad} are not finite; give finite values.")
    solver = solver or HHT(alpha=settings.alpha)
    grid = time_grid(t0, settings.t_end if t_end is None else t_end, settings.step if step is None else step)
    # Overflow in a diverging step is detected from the values, not reported as warnings.
    with np.errstate(all="ignore"):
        init = initial_state(model, p, grid[0])
        return _integrate(model, p, solver, grid, init)


def _integrate(model: CompiledModel, p: np.ndarray, solver: HHT, grid: np.ndarray, init) -> Trajectory:
    n, m = model.n, model.m
    alpha, beta, gamma = solver.alpha, solver.beta, solver.gamma
    c_m, c_old = 1.0 / (1.0 + alpha), alpha / (1.0 + alpha)
    n_steps = len(grid) - 1
    Q = np.empty((n_steps + 1, n))
    V = np.empty((n_steps + 1, n))
    Z = np.empty((n_steps + 1, n + m))  # (a, lambda) per step
    iterations = np.zeros(n_steps, dtype=np.int32)
    q, v, a, lam = (np.array(x, dtype=float) for x in init.state)
    Q[0], V[0], Z[0, :n], Z[0, n:] = q, v, a, lam
    F_old = model.residual_terms(q, v, a, lam, grid[0], p)[1]
    # Typical magnitudes of a and lambda for the Newton test; they grow with the solution.
    scale = np.empty(n + m)
    scale[:n] = np.abs(a).max()
    scale[n:] = np.abs(lam).max() if m else 0.0
    matrix = np.zeros((n + m, n + m))
    rhs = np.empty(n + m)
    rtol = solver.rtol
    newton = model.step_newton
    residual = model.step_residual
    z = np.concatenate((a, lam))
    for i in range(1, n_steps + 1):
        t = float(grid[i])
        h = t - float(grid[i - 1])
        bh2, gh = beta * h * h, gamma * h
        q_pred = q + h * v + (0.5 - beta) * h * h * z[:n]
        v_pred = v + (1.0 - gamma) * h * z[:n]
        rhs_old = c_old * F_old
        z = z.copy()
        error_old = np.inf
        try:
            for iteration in range(1, solver.max_iterations + 1):
                a_new = z[:n]
                Ma, F, C, M, JM, K, JV, Cq = newton(q_pred + bh2 * a_new, v_pred + gh * a_new, a_new, z[n:], t, p)
                rhs[:n] = rhs_old - c_m * Ma - F
                rhs[n:] = -C / bh2
                matrix[:n, :n] = c_m * M + bh2 * (c_m * JM + K) - gh * JV
                matrix[:n, n:] = Cq.T
                matrix[n:, :n] = Cq
                delta = np.linalg.solve(matrix, rhs)
                z += delta
                np.maximum(scale[:n], np.abs(z[:n]).max(), out=scale[:n])
                if m:
                    np.maximum(scale[n:], np.abs(z[n:]).max(), out=scale[n:])
                error = (np.abs(delta) / (rtol * (np.abs(z) + scale) + 1e-300)).max()
                if not error < np.inf:  # NaN or inf: diverged
                    raise _failure(model, i, n_steps, t, h, rhs, iteration)
                if error <= 1.0:
                    break
                # Round-off floor: corrections far below 1e-6 relative that no longer contract.
                if iteration >= 3 and error * rtol <= 1e-7 and error > 0.5 * error_old:
                    break
                error_old = error
            else:
                raise _failure(model, i, n_steps, t, h, rhs, solver.max_iterations)
            q = q_pred + bh2 * z[:n]
            v = v_pred + gh * z[:n]
            F_old = residual(q, v, z[:n], z[n:], t, p)[1]
        except np.linalg.LinAlgError:
            raise _failure(model, i, n_steps, t, h, rhs, iteration, singular=True) from None
        except (ValueError, OverflowError, ZeroDivisionError):
            # Scalar model code raises these where numpy would give NaN or inf.
            raise _failure(model, i, n_steps, t, h, np.full(1, np.nan), iteration) from None
        if not (np.isfinite(q).all() and np.isfinite(F_old).all()):
            raise _failure(model, i, n_steps, t, h, F_old, iteration)
        Q[i], V[i], Z[i] = q, v, z
        iterations[i - 1] = iteration
    return Trajectory(
        model=model,
        p=p.copy(),
        alpha=alpha,
        beta=beta,
        gamma=gamma,
        t=grid,
        q=Q,
        v=V,
        a=Z[:, :n],
        lam=Z[:, n:],
        init=init,
        newton_iterations=iterations,
    )


def _failure(model, i, n_steps, t, h, residual, iterations, singular=False) -> ConvergenceError:
    norm = float(np.linalg.norm(residual)) if np.all(np.isfinite(residual)) else float("nan")
    if singular:
        what = "the iteration matrix is singular"
    elif norm != norm:
        what = f"the solution became NaN or infinite in iteration {iterations}"
    else:
        what = f"residual norm {norm:.3g} after {iterations} iterations"
    return ConvergenceError(
        f"model '{model.model.name}': Newton did not converge at t = {t:.9g} s (step {i} of {n_steps}, "
        f"h = {h:.3g} s): {what}. Remedies: a smaller step (--step), parameter values that are physically "
        "meaningful (positive masses and stiffnesses), or more numerical damping (alpha towards -1/3)."
    )
