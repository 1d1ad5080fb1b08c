"""Integration of index-3 DAEs with HHT or generalized-alpha (one step, two sets of constants).

The step residual, in the unified form of :mod:`fmi_adjoint.integrate.schemes` (HHT:
Lauss et al. 2018, eq. (15), Oberpeilsteiner 2018, Sec. 2.4.2; generalized-alpha: Arnold
& Brüls 2007)::

    f1 = q_i - q_{i-1} - h v_{i-1} - h^2 [(1/2 - beta) abar_{i-1} + beta abar_i]
    f2 = v_i - v_{i-1} - h [(1 - gamma) abar_{i-1} + gamma abar_i]
    f5 = abar_i - c_a a_i - c_ao a_{i-1} - c_bo abar_{i-1}
    f3 = c_m (M a)_i + F_i - c_old F_{i-1},   F = C_q^T lambda - Q
    f4 = C(q_i, t_i) / (beta c_a h^2)

``f1``, ``f2`` and ``f5`` are explicit in ``(q_i, v_i, abar_i)``, so Newton iterates on
``(a_i, lambda_i)`` with the exact iteration matrix (Lauss et al. eq. (16) reduced; the
constraint rows scaled by ``1/(beta c_a h^2)`` as in Negrut et al. 2007)::

    [ S      C_q^T ]     S = c_m M + b (c_m J_M + J_C - J_Q) - g J_V,
    [ C_q    0     ]     b = beta c_a h^2,  g = gamma c_a h

The discrete adjoint (:mod:`fmi_adjoint.adjoint`) differentiates exactly this residual.

Order: for a constant mass matrix (redundant absolute coordinates, all examples of the
papers) HHT is second order for every alpha.  When ``M`` depends on ``q`` and
``alpha != 0`` the published HHT form pairs ``M(q_{i+1}) a_{i+1}`` with forces at
``t_{i+1+alpha}``; then ``a`` deviates from the generalized-alpha pseudo-acceleration by
``alpha (M_{i+1}^{-1} M_i - I) qddot_i = O(alpha h)`` and velocities, and in the limit
positions, converge at first order only (on slider_crank with ``alpha = -0.1`` positions
fall by about 4 per halving down to ``h = T/512`` and by 2 from ``T/1024`` on: the first-order
term is small but it dominates in the limit).  Generalized-alpha (``integrator =
"generalized_alpha"``) keeps second order there with numerical damping
(``tests/test_generalized_alpha.py`` measures both).
"""

from __future__ import annotations

import math

import numpy as np

from ..compiled import CompiledModel
from ..errors import ConvergenceError, ModelError
from .dependence import describe_dependence
from .initialization import constraint_labels, initial_state
from .inputs import RunInputs
from .schemes import (HHT, NEWTON_ITERATION_LIMIT, NEWTON_MAX_ITERATIONS, NEWTON_REUSE_CONTRACTION, NEWTON_ROUNDOFF,
                      NEWTON_RTOL, AbstractScheme, scheme_from_settings)
from .trajectory import Trajectory

__all__ = ["HHT", "MAX_STEPS", "NEWTON_ITERATION_LIMIT", "NEWTON_MAX_ITERATIONS", "NEWTON_REUSE_CONTRACTION",
           "NEWTON_RTOL", "prepare_run",
           "time_grid", "simulate"]


#: Most steps one run may take (the Python engine stores every step for its sweeps; the
#: native engine keeps checkpoints above its memory budget, but the outputs of every step).
MAX_STEPS = 50_000_000


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
    if n_steps > MAX_STEPS:
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
    solver: AbstractScheme | None = None,
    t0: float = 0.0,
) -> Trajectory:
    """Integrate the model from a consistent initial state.

    Parameters
    ----------
    model : CompiledModel
    p : numpy.ndarray, optional
        Parameter vector (defaults: the model's nominal values).
    t_end, step : float, optional
        Defaults from the model's simulation settings.
    solver : AbstractScheme, optional
        :class:`HHT` or :class:`~fmi_adjoint.integrate.schemes.GeneralizedAlpha`; defaults
        to the model's simulation settings (``integrator``, ``alpha``, ``rho_inf``).
    t0 : float

    Returns
    -------
    Trajectory

    Raises
    ------
    ConvergenceError
        If Newton fails in a step (the message names the time, the step and the residual).
    """
    run = prepare_run(model, p, t_end=t_end, step=step, solver=solver, t0=t0)
    # Overflow in a diverging step is detected from the values, not reported as warnings.
    with np.errstate(all="ignore"):
        init = initial_state(model, run.p, run.grid[0])
        return _integrate(model, run.p, run.scheme, run.grid, init)


def prepare_run(model: CompiledModel, p: np.ndarray | None, *, t_end: float | None = None,
                step: float | None = None, solver: AbstractScheme | None = None,
                t0: float = 0.0) -> RunInputs:
    """The front door of every engine's forward run: the checked :class:`RunInputs`
    (defaults from the model's simulation settings where an argument is ``None``).

    Refuses a parameter vector of the wrong shape or with non-finite values, an object that
    is not an integration scheme, a bad time span, and a run past the end of a time table
    (the engines would otherwise hold its end value).
    """
    settings = model.model.simulation
    solver = solver or scheme_from_settings(settings)
    grid = time_grid(t0, settings.t_end if t_end is None else t_end, settings.step if step is None else step)
    run = RunInputs.checked(model.defaults if p is None else p, solver, grid, parameter_names=model.parameter_names,
                            model_name=model.model.name)
    for where, first, last in model.table_spans:
        if grid[0] < first or grid[-1] > last:
            raise ModelError(
                f"{where}: the table covers [{first:g}, {last:g}] s but the simulation runs over "
                f"[{grid[0]:g}, {grid[-1]:g}] s; extend the table (measured data: a record that covers the run) or "
                f"shorten the simulation (--t-end)."
            )
    return run


def _integrate(model: CompiledModel, p: np.ndarray, solver: AbstractScheme, grid: np.ndarray, init) -> Trajectory:
    n, m = model.n, model.m
    co = solver.coefficients()
    beta, gamma, c_m, c_old = co.beta, co.gamma, co.c_m, co.c_old
    n_steps = len(grid) - 1
    Q = np.empty((n_steps + 1, n))
    V = np.empty((n_steps + 1, n))
    Z = np.empty((n_steps + 1, n + m))  # (a, lambda) per step
    iterations = np.zeros(n_steps, dtype=np.int32)
    q, v, a, lam = (np.array(x, dtype=float) for x in init.state)
    abar = a.copy()  # pseudo-acceleration, abar_0 = a_0 (schemes.py)
    Q[0], V[0], Z[0, :n], Z[0, n:] = q, v, a, lam
    F_old = model.residual_terms(q, v, a, lam, grid[0], p)[1]
    force_scale = 0.0  # largest force-term magnitude of accepted steps: floor of the force test
    position_scale = float(np.abs(q).max()) if n else 0.0  # largest accepted |q|
    matrix = np.zeros((n + m, n + m))
    rhs = np.empty(n + m)
    rtol = solver.rtol
    newton = model.step_newton
    residual = model.step_residual
    z = np.concatenate((a, lam))
    reuse = solver.reuse_jacobian
    factored: tuple | None = None  # (LU factors, h) of the iteration matrix (modified Newton)
    stale = False
    factorizations = 0
    Cq = np.zeros((m, n))
    for i in range(1, n_steps + 1):
        t = float(grid[i])
        h = t - float(grid[i - 1])
        bh2, gh = beta * co.c_a * h * h, gamma * co.c_a * h
        # Known part of abar_i (f5): zero for HHT, where abar = a.
        rest = co.c_ao * z[:n] + co.c_bo * abar
        q_pred = q + h * v + (0.5 - beta) * h * h * abar + beta * h * h * rest
        v_pred = v + (1.0 - gamma) * h * abar + gamma * h * rest
        rhs_old = c_old * F_old
        z = z.copy()
        delta_prev = 0.0
        try:
            for iteration in range(1, solver.max_iterations + 1):
                a_new = z[:n]
                q_new = q_pred + bh2 * a_new
                # Full Newton refactors every iteration; modified Newton only without a
                # factorization of this step size (t_i - t_{i-1} differ in their last bits:
                # only a real change counts) or when convergence slowed.
                refresh = not reuse or factored is None or stale or abs(h - factored[1]) > 1e-9 * h
                if refresh:
                    Ma, F, C, M, JM, K, JV, Cq = newton(q_new, v_pred + gh * a_new, a_new, z[n:], t, p)
                else:
                    Ma, F, C = residual(q_new, v_pred + gh * a_new, a_new, z[n:], t, p)
                inertia = c_m * Ma
                rhs[:n] = rhs_old - inertia - F
                rhs[n:] = -C / bh2
                # Residual test, scaled by the magnitude of the terms of each equation so that
                # round-off always passes it: forces against the force terms of the row (and
                # the largest force seen), constraints against |C_q| (|q| + position scale).
                # Floors: magnitudes of the predictor (a physical state) and of accepted
                # steps, never of later iterates, which may be far off.  A global force floor
                # is needed because F of a massless node is already a cancelled sum.
                terms = np.abs(rhs_old) + np.abs(inertia) + np.abs(F)
                if iteration == 1:
                    force_scale = max(force_scale, float(terms.max()))
                    position_scale = max(position_scale, float(np.abs(q_new).max()))
                # Round-off floor (NEWTON_ROUNDOFF): the forces that cancel in a row at rest,
                # the elastic ones |K| (|q| + position scale) and the constraint forces
                # |C_q|^T |lambda|, from the current or the last assembled K and C_q.
                stiff = np.abs(K) @ (np.abs(q_new) + position_scale) + np.abs(Cq).T @ np.abs(z[n:])
                converged = bool(np.all(np.abs(rhs[:n]) <= rtol * (terms + force_scale) + NEWTON_ROUNDOFF * stiff))
                if m:
                    c_terms = np.abs(Cq) @ (np.abs(q_new) + position_scale)
                    converged = converged and bool(np.all(np.abs(C) <= rtol * c_terms))
                if refresh:
                    factored = None
                    matrix[:n, :n] = c_m * M + bh2 * (c_m * JM + K) - gh * JV
                    matrix[:n, n:] = Cq.T
                    matrix[n:, :n] = Cq
                    factored = (_factor(matrix), h)
                    stale = False
                    factorizations += 1
                assert factored is not None  # refreshed above when missing
                delta = _solve(factored[0], rhs)
                if not np.all(np.isfinite(delta)):
                    raise _failure(model, solver, i, n_steps, t, h, rhs, iteration)
                z += delta
                size = float(np.abs(delta).max()) if delta.size else 0.0
                if reuse and iteration > 1 and size > NEWTON_REUSE_CONTRACTION * delta_prev:
                    stale = True
                delta_prev = size
                # The update after a converged residual polishes the iterate to round-off,
                # which keeps the discrete cost smooth in the parameters.
                if converged:
                    force_scale = max(force_scale, float(terms.max()))
                    position_scale = max(position_scale, float(np.abs(q_new).max()))
                    break
            else:
                raise _failure(model, solver, i, n_steps, t, h, rhs, solver.max_iterations)
            q = q_pred + bh2 * z[:n]
            v = v_pred + gh * z[:n]
            abar = co.c_a * z[:n] + rest
            F_old = residual(q, v, z[:n], z[n:], t, p)[1]
        except np.linalg.LinAlgError:
            raise _failure(model, solver, i, n_steps, t, h, rhs, iteration, singular=True, Cq=Cq) from None
        except (ValueError, OverflowError, ZeroDivisionError):
            # Scalar model code raises these where numpy would give NaN or inf.
            raise _failure(model, solver, i, n_steps, t, h, np.full(1, np.nan), iteration) from None
        if not (np.isfinite(q).all() and np.isfinite(F_old).all()):
            raise _failure(model, solver, i, n_steps, t, h, F_old, iteration)
        Q[i], V[i], Z[i] = q, v, z
        iterations[i - 1] = iteration
    return Trajectory(
        model=model,
        p=p.copy(),
        scheme=solver,
        t=grid,
        q=Q,
        v=V,
        a=Z[:, :n],
        lam=Z[:, n:],
        init=init,
        newton_iterations=iterations,
        factorizations=factorizations,
    )


def _factor(matrix: np.ndarray) -> tuple:
    """LU factors of the iteration matrix (LAPACK getrf; LinAlgError if it is singular or
    not finite).  LAPACK directly: scipy.linalg.lu_factor's checks and warnings cost more
    than the factorization of these small matrices."""
    if not np.all(np.isfinite(matrix)):
        raise np.linalg.LinAlgError("not finite")
    from scipy.linalg.lapack import dgetrf  # noqa: PLC0415 (scipy.linalg on first use, not at the CLI's start)

    lu, piv, info = dgetrf(matrix)
    if info != 0:
        raise np.linalg.LinAlgError("singular")
    return lu, piv


def _solve(factors: tuple, rhs: np.ndarray) -> np.ndarray:
    """Solve with the factors of :func:`_factor` (LAPACK getrs)."""
    from scipy.linalg.lapack import dgetrs  # noqa: PLC0415 (as in _factor)

    x, _ = dgetrs(factors[0], factors[1], rhs)
    return x


def _failure(model, solver: AbstractScheme, i, n_steps, t, h, residual, iterations, singular=False,
             Cq: np.ndarray | None = None) -> ConvergenceError:
    """The error of a step whose Newton iteration failed, with the scheme's advice
    (:meth:`~fmi_adjoint.integrate.schemes.AbstractScheme.divergence_advice`); a singular
    iteration matrix whose cause is dependent constraints names them instead."""
    norm = float(np.linalg.norm(residual)) if np.all(np.isfinite(residual)) else float("nan")
    where = (f"model '{model.model.name}': Newton did not converge at t = {t:.9g} s (step {i} of {n_steps}, "
             f"h = {h:.3g} s)")
    if singular:
        named = None if Cq is None or not np.all(np.isfinite(Cq)) else describe_dependence(
            Cq, constraint_labels(model), model.coordinate_names)
        if named:
            return ConvergenceError(f"{where}: the iteration matrix is singular because {named}, or avoid that "
                                    "configuration (other parameter values or initial positions).")
        what = "the iteration matrix is singular"
    elif norm != norm:
        what = f"the solution became NaN or infinite in iteration {iterations}"
    else:
        what = f"residual norm {norm:.3g} after {iterations} iterations"
    return ConvergenceError(f"{where}: {what}. {solver.divergence_advice()}")
