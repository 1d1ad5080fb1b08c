"""Forward sensitivities by direct differentiation of the same discrete scheme (HHT or
generalized-alpha, :mod:`fmi_adjoint.integrate.schemes`).

``S_i = dx_i/dp`` (``x`` includes the pseudo-acceleration ``abar``) obeys
``(df_i/dx_i) S_i = -(df_i/dx_{i-1}) S_{i-1} - df_i/dp`` with
``S_0 = dx_0/dp`` from the consistent initialization.  Each step is one solve with the
Newton matrix for all parameter columns at once.  The result, ``dY/dp`` at the sample
times, gives the residual Jacobian of Gauss-Newton and the Fisher information.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np

from ..costs.base import AbstractCost
from ..integrate.trajectory import Trajectory
from .discrete import GradientResult, sampled_outputs
from .linearization import StepLinearization, chunk_width, chunks, initial_state_jacobians, linearize

__all__ = ["StateSensitivity", "output_sensitivities", "sensitivity_gradient", "state_sensitivity_steps"]


def output_sensitivities(
    traj: Trajectory, sample_times: np.ndarray, channels: np.ndarray, params: np.ndarray | None = None
) -> np.ndarray:
    """``dY/dp`` of the outputs ``channels`` at ``sample_times``.

    Parameters
    ----------
    traj : Trajectory
    sample_times : numpy.ndarray
    channels : numpy.ndarray of int
        Output indices.
    params : numpy.ndarray of int, optional
        Parameter indices (default: all).

    Returns
    -------
    numpy.ndarray, shape (n_samples, n_channels, n_params)
    """
    from ..costs.sampling import Sampler

    model = traj.model
    params = np.arange(model.n_p) if params is None else np.asarray(params, dtype=int)
    sampler = Sampler.from_grid(traj.t, sample_times)
    needed = np.zeros(traj.n_steps + 1, dtype=bool)
    needed[sampler.k] = True
    needed[sampler.k + 1] = True
    dY = np.zeros((traj.n_steps + 1, len(channels), len(params)))
    for lin, k, i, S in state_sensitivity_steps(traj, params):
        if needed[i]:
            dY[i] = (lin.Y_q[k][channels] @ S.q + lin.Y_v[k][channels] @ S.v + lin.Y_a[k][channels] @ S.a
                     + lin.Y_lam[k][channels] @ S.lam + lin.Y_p[k][channels][:, params])
    return sampler.sample(dY)


@dataclasses.dataclass(frozen=True)
class StateSensitivity:
    """``dq/dp, dv/dp, da/dp, dlambda/dp`` of one step, shape ``(size, len(params))``."""

    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    lam: np.ndarray


def state_sensitivity_steps(traj: Trajectory, params: np.ndarray
                            ) -> Iterator[tuple[StepLinearization, int, int, StateSensitivity]]:
    """The forward sensitivity recursion (module docstring), step by step: yields
    ``(lin, k, i, S)`` with ``lin`` the linearization of the chunk holding step ``i`` (at
    position ``k``) and ``S`` the state sensitivities of that step."""
    model = traj.model
    n, N = model.n, traj.n_steps
    co = traj.scheme.coefficients()
    beta, gamma, c_m, c_old = co.beta, co.gamma, co.c_m, co.c_old
    Gz, Gp, selection = initial_state_jacobians(traj)
    S = -np.linalg.solve(Gz, Gp[:, params])[selection]
    Sq, Sv, Sa, Sl = S[:n], S[n : 2 * n], S[2 * n : 3 * n], S[3 * n :]
    Sb = Sa  # abar_0 = a_0
    prev: tuple[np.ndarray, ...] = ()  # (K, JV, Cq, F_p) of the previous step (step 0 sets it first)
    for idx in chunks(N + 1, chunk_width(traj)):
        lin = linearize(traj, idx)
        F_p = lin.F_p[:, :, params]
        for k, i in enumerate(idx):
            if i >= 1:
                h = lin.h[k]
                bh2, gh = beta * co.c_a * h * h, gamma * co.c_a * h
                K0, JV0, Cq0, Fp0 = prev
                rest = co.c_ao * Sa + co.c_bo * Sb  # known part of dabar_i/dp (f5)
                b1 = Sq + h * Sv + 0.5 * h * h * (1.0 - 2.0 * beta) * Sb + beta * h * h * rest
                b2 = Sv + h * (1.0 - gamma) * Sb + gamma * h * rest
                b3 = c_old * (K0 @ Sq - JV0 @ Sv + Cq0.T @ Sl) - (
                    c_m * lin.Ma_p[k][:, params] + F_p[k] - c_old * Fp0
                )
                b4 = -lin.C_p[k][:, params] / bh2
                top = b3 - (c_m * lin.JM[k] + lin.K[k]) @ b1 + lin.JV[k] @ b2
                bottom = b4 - lin.Cq[k] @ b1 / bh2
                x = lin.inverse[k] @ np.concatenate((top, bottom))
                Sa, Sl = x[:n], x[n:]
                Sq, Sv, Sb = b1 + bh2 * Sa, b2 + gh * Sa, co.c_a * Sa + rest
            yield lin, k, int(i), StateSensitivity(q=Sq, v=Sv, a=Sa, lam=Sl)
            prev = (lin.K[k], lin.JV[k], lin.Cq[k], F_p[k])


def sensitivity_gradient(traj: Trajectory, cost: AbstractCost, params: np.ndarray | None = None) -> GradientResult:
    """Gradient of a cost from forward sensitivities (cost grows with the number of parameters).

    Entries of parameters not in ``params`` are zero.
    """
    model = traj.model
    params = np.arange(model.n_p) if params is None else np.asarray(params, dtype=int)
    _, channels, Y = sampled_outputs(traj, cost)
    value = cost.evaluate(Y, traj.p)
    dY = output_sensitivities(traj, cost.sample_times, channels, params)
    gradient = np.zeros(model.n_p)
    gradient[params] = np.einsum("sc,scp->p", value.dJ_dY, dY)
    if value.dJ_dp is not None:
        gradient[params] += np.asarray(value.dJ_dp)[params]
    return GradientResult(J=value.J, gradient=gradient, method="forward")
