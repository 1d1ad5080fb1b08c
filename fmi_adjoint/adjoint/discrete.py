"""The discrete adjoint of the integration scheme (Lauss et al. 2018, eqs. (3)-(11), (16)-(20)).

For residuals ``f_i(x_i, x_{i-1}, p) = 0`` (``x = (q, v, a, lambda, abar)``, the step of
:mod:`fmi_adjoint.integrate.schemes`: HHT or generalized-alpha) and a cost
``J = Phi(Y(x_0..x_N, p), p)``, the adjoint variables ``mu_i`` solve backwards::

    (df_i/dx_i)^T mu_i = -dJ/dx_i - (df_{i+1}/dx_i)^T mu_{i+1},   mu_{N+1} = 0

and ``dJ/dp = dPhi/dp + sum_i (dJ/dY dY/dp)_explicit + sum_i mu_i^T df_i/dp
+ (dx_0/dp)^T w_0`` with ``w_0 = dJ/dx_0 + (df_1/dx_0)^T mu_1``.  Beyond the paper,
``df_i/dp`` includes parameters in the mass matrix and the constraints, ``dY/dp`` the
outputs', and the last term carries parameter-dependent initial conditions through the
consistent initialization (one linear solve with ``(dG/dz)^T``).

Because ``f1``, ``f2`` and ``f5`` are explicit formulas, each backward step reduces to
one solve with the *transposed Newton matrix* of that step: from the rows of
``(df_i/dx_i)^T`` for ``q``, ``v`` and ``abar``, ``mu1 = r_q - K3q^T mu3 - C_q^T mu4/b``,
``mu2 = r_v + J_V^T mu3`` and ``mu5 = r_abar + beta h^2 mu1 + gamma h mu2``
(``K3q = c_m J_M + J_C - J_Q``, ``b = beta c_a h^2``, ``g = gamma c_a h``); substituted into
the ``a`` row this leaves
``[[S^T, C_q^T], [C_q, 0]] (mu3, mu4) = (r_a + c_a r_abar + b r_q + g r_v, r_lambda)`` with
``S`` the Newton matrix block.  ``mu5``, the adjoint of the pseudo-acceleration recursion,
is carried to the previous step (HHT: ``abar = a``, and ``mu5`` only passes ``r_abar`` on).
So the sweep costs less than the forward run.
The sweep only reads the trajectory; it never calls the integrator.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from ..compiled import CompiledModel
from ..costs.base import AbstractCost
from ..costs.sampling import Sampler
from ..errors import DataError
from ..integrate.trajectory import Trajectory
from .linearization import StepLinearization, chunk_width, chunks, initial_state_jacobians, linearize

__all__ = ["AdjointStates", "AdjointTrajectory", "GradientResult", "StateSeeds", "adjoint_gradient", "adjoint_seed",
           "adjoint_states", "adjoint_sweep", "adjoint_trajectory", "initial_state_term", "sampled_outputs"]


@dataclasses.dataclass(frozen=True)
class GradientResult:
    """Cost and gradient with respect to the full parameter vector of the model."""

    J: float
    gradient: np.ndarray
    method: str


def channel_indices(model: CompiledModel, cost: AbstractCost) -> np.ndarray:
    """Positions of the cost's channels among the model outputs (DataError if one is unknown)."""
    names = model.output_names
    missing = [c for c in cost.channels if c not in names]
    if missing:
        raise DataError(
            f"data column(s) {missing} match no output of model '{model.model.name}'. "
            f"Outputs: {', '.join(names)}. Rename the columns or add outputs to the model."
        )
    return np.array([names.index(c) for c in cost.channels], dtype=int)


def sampled_outputs(traj: Trajectory, cost: AbstractCost) -> tuple[Sampler, np.ndarray, np.ndarray]:
    """``(sampler, channel indices, Y)`` of a trajectory for a cost."""
    channels = channel_indices(traj.model, cost)
    sampler = Sampler.from_grid(traj.t, cost.sample_times)
    Y = sampler.sample(traj.outputs()[:, channels])
    return sampler, channels, Y


def adjoint_seed(traj: Trajectory, cost: AbstractCost) -> tuple[float, np.ndarray, np.ndarray]:
    """What every engine's sweep starts from: ``(J, ybar, dJ/dp explicit)``.

    ``ybar`` is ``dJ/dY`` on the step grid, shape ``(N+1, n_y)`` (the cost's sample
    derivatives scattered by the transpose of the interpolation)."""
    model = traj.model
    sampler, channels, Y = sampled_outputs(traj, cost)
    value = cost.evaluate(Y, traj.p)
    ybar = np.zeros((traj.n_steps + 1, model.n_y))
    ybar[:, channels] = sampler.scatter(value.dJ_dY)
    gradient = np.zeros(model.n_p) if value.dJ_dp is None else np.array(value.dJ_dp, dtype=float)
    return value.J, ybar, gradient


def adjoint_gradient(traj: Trajectory, cost: AbstractCost) -> GradientResult:
    """Exact gradient of the discretized cost by one backward sweep (Python engine).

    Parameters
    ----------
    traj : Trajectory
        The forward run at the parameters of interest.
    cost : AbstractCost

    Returns
    -------
    GradientResult
        ``gradient`` has one entry per model parameter.
    """
    J, ybar, gradient = adjoint_seed(traj, cost)
    return GradientResult(J=J, gradient=adjoint_sweep(traj, ybar, gradient), method="adjoint")


def adjoint_sweep(traj: Trajectory, ybar: np.ndarray, gradient: np.ndarray) -> np.ndarray:
    """The backward sweep for ``dJ/dY = ybar`` on the step grid; returns ``gradient`` (the
    explicit ``dJ/dp``) plus every term the sweep adds (see module docstring)."""
    sweep = adjoint_trajectory(traj, np.asarray(ybar, dtype=float)[:, :, None])
    return np.array(gradient, dtype=float) + sweep.gradient[:, 0] + initial_state_term(traj, sweep.w0)[:, 0]


@dataclasses.dataclass(frozen=True)
class StateSeeds:
    """``dJ/dq, dJ/dv, dJ/da, dJ/dlambda`` of a chunk of steps, shape ``(steps, size, columns)``."""

    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    lam: np.ndarray


@dataclasses.dataclass(frozen=True)
class AdjointStates:
    """What a backward sweep leaves: ``mu3``, ``mu4`` of every step (row ``N+1`` zero; row 0
    unused), shape ``(N+2, n|m, columns)``; ``w0 = dJ/dx_0`` (total, through step 1) of the
    state ``(q, v, a, lambda)``, shape ``(3n+m, columns)``; and ``sum_i mu_i^T df_i/dp``
    per column, shape ``(n_p, columns)``."""

    mu3: np.ndarray
    mu4: np.ndarray
    w0: np.ndarray
    gradient: np.ndarray


def adjoint_states(traj: Trajectory, seeds: Callable[[StepLinearization], StateSeeds],
                   columns: int) -> AdjointStates:
    """Backward sweep of ``columns`` adjoints at once, for state seeds given per chunk.

    ``seeds(lin)`` returns the explicit ``dJ/dx_i`` of the chunk's steps ``lin.idx`` (it
    is called once per chunk, last chunk first).  The recursion is that of the module
    docstring, with matrices of ``columns`` right-hand sides.
    """
    model = traj.model
    n, m, N = model.n, model.m, traj.n_steps
    co = traj.scheme.coefficients()
    beta, gamma, c_m, c_old = co.beta, co.gamma, co.c_m, co.c_old
    gradient = np.zeros((model.n_p, columns))
    mu3 = np.zeros((N + 2, n, columns))  # row N+1 stays zero: mu_{N+1} = 0
    mu4 = np.zeros((N + 2, m, columns))
    mu1_next = np.zeros((n, columns))
    mu2_next = np.zeros((n, columns))
    mu5_next = np.zeros((n, columns))
    h_next = 0.0
    w0 = np.zeros((3 * n + m, columns))
    for idx in chunks(N + 1, chunk_width(traj), reverse=True):
        lin = linearize(traj, idx)
        seed = seeds(lin)
        for k in range(len(idx) - 1, -1, -1):
            i = idx[k]
            K, JV, Cq = lin.K[k], lin.JV[k], lin.Cq[k]
            # (df_{i+1}/dx_i)^T mu_{i+1}: Newmark couplings, the pseudo-acceleration
            # recursion and the alpha-weighted old forces.
            m3 = mu3[i + 1]
            cq = -mu1_next - c_old * (K.T @ m3)
            cv = -h_next * mu1_next - mu2_next + c_old * (JV.T @ m3)
            ca = -co.c_ao * mu5_next
            cb = (-0.5 * h_next * h_next * (1.0 - 2.0 * beta) * mu1_next - h_next * (1.0 - gamma) * mu2_next
                  - co.c_bo * mu5_next)
            cl = -c_old * (Cq @ m3)
            rq, rv, ra, rl, rb = -seed.q[k] - cq, -seed.v[k] - cv, -seed.a[k] - ca, -seed.lam[k] - cl, -cb
            if i == 0:
                # abar_0 = a_0: the pseudo-acceleration's adjoint joins that of a_0.
                w0 = np.concatenate((-rq, -rv, -(ra + rb), -rl))
                break
            h = lin.h[k]
            bh2, gh = beta * co.c_a * h * h, gamma * co.c_a * h
            # Eliminating mu1, mu2, mu5 leaves the transposed Newton matrix for (mu3, mu4).
            x = lin.inverse[k].T @ np.concatenate((ra + co.c_a * rb + bh2 * rq + gh * rv, rl))
            mu3[i], mu4[i] = x[:n], x[n:]
            mu1_next = rq - (c_m * lin.JM[k] + K).T @ mu3[i] - (Cq.T @ mu4[i]) / bh2
            mu2_next = rv + JV.T @ mu3[i]
            mu5_next = rb + beta * h * h * mu1_next + gamma * h * mu2_next
            h_next = h
        # Parameter terms mu_i^T df_i/dp, vectorized over the chunk (eq. (20) extended).
        steps = idx >= 1
        bh2 = beta * co.c_a * lin.h * lin.h
        gradient += np.einsum("knc,knp->pc", mu3[idx][steps], (c_m * lin.Ma_p + lin.F_p)[steps])
        gradient += np.einsum("kmc,kmp->pc", mu4[idx][steps] / bh2[steps, None, None], lin.C_p[steps])
        gradient -= c_old * np.einsum("knc,knp->pc", mu3[idx + 1], lin.F_p)
    return AdjointStates(mu3=mu3, mu4=mu4, w0=w0, gradient=gradient)


def initial_state_term(traj: Trajectory, w0: np.ndarray) -> np.ndarray:
    """``(dx0/dp)^T w0 = -G_p^T G_z^{-T} E^T w0`` per column: the initial state's share of
    the gradient (one solve with the transposed initialization Jacobian)."""
    Gz, Gp, selection = initial_state_jacobians(traj)
    rhs = np.zeros((Gz.shape[0], w0.shape[1]))
    rhs[selection] = w0
    return -Gp.T @ np.linalg.solve(Gz.T, rhs)


@dataclasses.dataclass(frozen=True)
class AdjointTrajectory:
    """Adjoint variables of ``C`` sweeps at every step: ``mu3 (N+1, n, C)``, ``mu4 (N+1, m, C)``
    (row 0 zero: step 0 has no residual), ``w0 = dJ/dx_0 (3n+m, C)`` and ``gradient (n_p, C)``:
    ``sum_i mu_i^T df_i/dp + (dY/dp)^T ybar``, without the initial state's term
    (:func:`initial_state_term`)."""

    mu3: np.ndarray
    mu4: np.ndarray
    w0: np.ndarray
    gradient: np.ndarray


def adjoint_trajectory(traj: Trajectory, ybar: np.ndarray, xbar: np.ndarray | None = None) -> AdjointTrajectory:
    """Backward sweeps for explicit ``dJ/dY = ybar (N+1, n_y, C)`` and ``dJ/dx = xbar
    (N+1, 3n+m, C)`` (the engines' ``adjoint_trajectory``, Python reference)."""
    model = traj.model
    n, m = model.n, model.m
    columns = ybar.shape[2]
    explicit = np.zeros((model.n_p, columns))

    def seeds(lin: StepLinearization) -> StateSeeds:
        yb = ybar[lin.idx]
        explicit[:] += np.einsum("kyp,kyc->pc", lin.Y_p, yb)
        parts = [np.einsum("kyn,kyc->knc", Y, yb) for Y in (lin.Y_q, lin.Y_v, lin.Y_a, lin.Y_lam)]
        if xbar is not None:
            xb = xbar[lin.idx]
            bounds = (0, n, 2 * n, 3 * n, 3 * n + m)
            parts = [part + xb[:, bounds[k]:bounds[k + 1]] for k, part in enumerate(parts)]
        return StateSeeds(*parts)

    states = adjoint_states(traj, seeds, columns)
    rows = traj.n_steps + 1
    mu3, mu4 = states.mu3[:rows].copy(), states.mu4[:rows].copy()
    mu3[0] = 0.0
    mu4[0] = 0.0
    return AdjointTrajectory(mu3=mu3, mu4=mu4, w0=states.w0, gradient=states.gradient + explicit)
