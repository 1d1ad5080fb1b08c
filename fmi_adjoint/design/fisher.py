"""Fisher information of the discrete scheme and the exact gradient of a criterion on it.

For identified parameters ``p`` (a subset of all model parameters ``P``), sampled output
channels ``c`` with noise levels ``sigma_c`` and sample weights ``eta_s`` (1: independent
samples; quadrature weights: the integral of the dissertation's eq. (5.8))::

    M = sum_s eta_s Dt_s^T R^-1 Dt_s,   Dt_s = dY_s/dp diag(p_scale),   R = diag(sigma^2)

(eq. (5.6), scaled so that the criteria are unit-free).  ``dY/dp`` comes from the forward
sensitivities of the HHT or generalized-alpha scheme as it ran
(:mod:`fmi_adjoint.adjoint.sensitivities`), so ``M`` is the information of exactly the
computed outputs.

Gradient of ``Psi(M)`` with respect to every model parameter (the knot values of a
designed input among them) by the adjoint of the *extended* system, the scheme and its
sensitivity recursion together (the discrete counterpart of the dissertation's Sec. 5.1.3,
whose continuous derivation is for ODEs in minimal coordinates only; this one holds for
index-3 DAEs with constraints, massless nodes and parameters anywhere).  With
``G_s = dPsi/d(dY_s/dp)`` and ``g_i = G`` scattered to the step grid, Psi's derivative is
``sum_j d^2 J_j/(dP dp_j)`` for the linear output functionals ``J_j = sum_i g_ij^T Y_i``
(``g`` frozen).  So:

1. one forward sensitivity run gives ``s_ij = dx_i/dp_j`` at every step;
2. one backward sweep with ``len(p)`` columns gives the adjoints ``Lambda_ij`` of the
   sensitivity recursion: the ordinary discrete adjoint of ``J_j`` (the same transposed
   Newton matrices);
3. the second-order terms: ``r_i = d/dx_i sum_j [Lambda_ij^T (df_i/dx_i s_ij + df_i/dx_{i-1}
   s_{i-1,j} + df_i/dp_j) + Lambda_{i+1,j}^T (df_{i+1}/dx_i s_ij + df_{i+1}/dp_j) + g_ij^T
   dY_i/dp_j]`` (the second bracket: the old forces ``-c_old F(x_i)`` of step ``i+1``) and the
   same derivative by ``P``, from the generated directional second derivatives
   (:func:`fmi_adjoint.compiled.second_order_table`); only ``f3`` (``M a``, ``F``) and ``f4``
   (``C``) are nonlinear;
4. one more backward sweep with the seeds ``r_i`` (plus the output penalties) gives
   ``mu_i`` and ``sum_i mu_i^T df_i/dP``;
5. the consistent initialization closes it: ``nu_j = -G_z^-T E^T w0(Lambda_j)``, its
   second-order term ``d/d(z, P) nu_j^T (G_z zeta_j + G_p e_j)`` and ``omega = -G_z^-T
   (E^T w0(mu) + ...)``, ``omega^T G_P``.

Cost: one forward run, one sensitivity run, the adjoint sweeps of the ``len(p)`` functionals
``J_j`` (the native engine runs them one column at a time) and one of the state, whatever the
number of knots.  The trajectory must be stored (no checkpoints): the second-order terms are
evaluated at every step at once.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..adjoint.linearization import initial_state_jacobians
from ..compiled import SecondOrder
from ..costs.sampling import Sampler
from ..engines import AbstractEngine
from ..errors import ModelError
from ..integrate.trajectory import Trajectory

__all__ = ["FisherSetup", "SECOND_ORDER_CHUNK", "Sensitivities", "fisher_matrix", "criterion_gradient",
           "sensitivities"]

#: Doubles of second-order output evaluated at once (the steps are taken in chunks of this size).
SECOND_ORDER_CHUNK = 4_000_000


@dataclasses.dataclass(frozen=True, eq=False)
class FisherSetup:
    """What defines the information matrix.

    Attributes
    ----------
    params : numpy.ndarray of int
        Indices of the identified parameters in the model's parameter vector.
    channels : numpy.ndarray of int
        Indices of the measured outputs.
    sigma : numpy.ndarray
        Noise standard deviation of each channel (``R = diag(sigma^2)``).
    sample_times : numpy.ndarray
    weights : numpy.ndarray
        ``eta_s`` per sample.
    scale : numpy.ndarray
        Parameter scale (nominal magnitudes): ``M`` is that of ``p / scale``.
    """

    params: np.ndarray
    channels: np.ndarray
    sigma: np.ndarray
    sample_times: np.ndarray
    weights: np.ndarray
    scale: np.ndarray

    def __post_init__(self) -> None:
        if not (len(self.sigma) == len(self.channels) and np.all(np.asarray(self.sigma) > 0)):
            raise ModelError("give one positive noise level per measured output.")
        if len(self.weights) != len(self.sample_times) or len(self.scale) != len(self.params):
            raise ModelError("give one weight per sample and one scale per parameter.")
        if not np.all(np.asarray(self.scale) > 0):
            raise ModelError("parameter scales must be positive; give nominal values different from 0.")


@dataclasses.dataclass(frozen=True, eq=False)
class Sensitivities:
    """State sensitivities at every step (shape ``(N+1, size, len(params))``) and the
    output sensitivities of all outputs ``(N+1, n_y, len(params))``."""

    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    lam: np.ndarray
    y: np.ndarray


def sensitivities(engine: AbstractEngine, traj: Trajectory, params: np.ndarray) -> Sensitivities:
    """The forward sensitivities of the scheme at every step (the engine's sweep), and those
    of all outputs."""
    if traj.checkpoints is not None:
        raise ModelError(f"optimal input design needs every state of the run, but this run of {traj.n_steps} steps "
                         "kept only checkpoints (it exceeds the engine's memory budget); give the engine a larger "
                         "memory_budget, or shorten the experiment (--t-end) or lengthen the step (--step).")
    model = traj.model
    n, m = model.n, model.m
    S = engine.state_sensitivities(traj, params)
    Sq, Sv, Sa, Sl = S[:, :n], S[:, n:2 * n], S[:, 2 * n:3 * n], S[:, 3 * n:3 * n + m]
    Y_q, Y_v, Y_a, Y_lam, Y_p = model.output_jacobians(traj.q, traj.v, traj.a, traj.lam, traj.t, traj.p)
    y = (np.einsum("iyn,inc->iyc", Y_q, Sq) + np.einsum("iyn,inc->iyc", Y_v, Sv)
         + np.einsum("iyn,inc->iyc", Y_a, Sa) + np.einsum("iyn,inc->iyc", Y_lam, Sl) + Y_p[:, :, params])
    return Sensitivities(q=Sq, v=Sv, a=Sa, lam=Sl, y=y)


def _scaled_samples(traj: Trajectory, setup: FisherSetup, sens: Sensitivities) -> tuple[Sampler, np.ndarray]:
    sampler = Sampler.from_grid(traj.t, setup.sample_times)
    D = sampler.sample(sens.y[:, setup.channels, :]) * np.asarray(setup.scale)[None, None, :]
    return sampler, D / np.asarray(setup.sigma)[None, :, None]


def fisher_matrix(traj: Trajectory, setup: FisherSetup, sens: Sensitivities) -> np.ndarray:
    """``M`` of the module docstring (scaled, unit-free)."""
    _, D = _scaled_samples(traj, setup, sens)
    return np.einsum("s,scj,sck->jk", np.asarray(setup.weights), D, D)


def criterion_gradient(engine: AbstractEngine, traj: Trajectory, setup: FisherSetup, dpsi_dM: np.ndarray,
                       second: SecondOrder, sens: Sensitivities, output_seed: np.ndarray | None = None) -> np.ndarray:
    """Exact gradient, with respect to every model parameter, of ``Psi(M) + Phi(Y)`` at the
    run ``traj`` (module docstring), given ``dPsi/dM`` (symmetric) and ``dPhi/dY`` on the
    step grid (``output_seed``, shape ``(N+1, n_y)``; penalties on the outputs).

    Returns
    -------
    numpy.ndarray, shape (n_p,)
    """
    model = traj.model
    params = np.asarray(setup.params, dtype=int)
    n_p, N1, P = model.n_p, traj.n_steps + 1, len(params)
    sampler, D = _scaled_samples(traj, setup, sens)
    dpsi_dM = 0.5 * (dpsi_dM + dpsi_dM.T)
    # dPsi/dD_s (unscaled D), scattered to the step grid: g (N+1, n_y, P).
    G = 2.0 * np.einsum("s,scj,jk->sck", np.asarray(setup.weights), D, dpsi_dM)
    G = G / np.asarray(setup.sigma)[None, :, None] * np.asarray(setup.scale)[None, None, :]
    g = np.zeros((N1, model.n_y, P))
    g[:, setup.channels, :] = sampler.scatter(G)

    # 2. Adjoints Lambda_j of the sensitivity recursion: ordinary sweeps, one column per p_j.
    lam_adj = engine.adjoint_trajectory(traj, g)

    # 3. Second-order terms at every step, batched over (step, column).
    co = traj.scheme.coefficients()
    h = np.diff(traj.t)
    bh2 = np.concatenate(([np.inf], co.beta * co.c_a * h * h))  # step 0 has no residual
    mu3 = np.moveaxis(lam_adj.mu3, 2, 1)  # (N+1, P, n); row 0 is zero
    mu4 = np.moveaxis(lam_adj.mu4, 2, 1)
    wM = co.c_m * mu3
    wF = mu3.copy()
    wF[:-1] -= co.c_old * mu3[1:]  # the old forces of step i+1 (mu_{N+1} = 0)
    wC = mu4 / bh2[:, None, None]
    wY = np.moveaxis(g, 2, 1)
    directions = tuple(np.moveaxis(x, 2, 1) for x in (sens.q, sens.v, sens.a, sens.lam))
    unit = np.zeros((P, n_p))
    unit[np.arange(P), params] = 1.0
    gradient = np.zeros(n_p)
    r = tuple(np.zeros((N1, size)) for size in (model.n, model.n, model.n, model.m))
    # In chunks of steps: the parameter part of the output has n_p entries per step and column.
    width = max(1, int(SECOND_ORDER_CHUNK // max(1, P * (n_p + 4 * model.n + 2 * model.m))))
    for lo in range(0, N1, width):
        k = slice(lo, min(lo + width, N1))
        rows = k.stop - k.start
        state = (traj.q[k, None, :], traj.v[k, None, :], traj.a[k, None, :], traj.lam[k, None, :],
                 np.broadcast_to(traj.t[k, None], (rows, P)), traj.p)
        parts = second.step_second(*state, wM[k], wF[k], wC[k], wY[k], *(x[k] for x in directions),
                                   np.broadcast_to(unit, (rows, P, n_p)))
        gradient += parts[4].sum(axis=(0, 1))
        for total, part in zip(r, parts[:4]):
            total[k] = part.sum(axis=1)

    # 4. The state adjoint mu with the second-order seeds and the penalties' dPhi/dY.
    ybar = np.zeros((N1, model.n_y)) if output_seed is None else np.asarray(output_seed, dtype=float)
    xbar = np.concatenate(r, axis=1)[:, :, None]
    mu_adj = engine.adjoint_trajectory(traj, ybar[:, :, None], xbar)
    gradient = gradient + mu_adj.gradient[:, 0]

    # 5. The consistent initialization, for the sensitivities (nu_j) and the state (omega).
    Gz, Gp, selection = initial_state_jacobians(traj)
    nz = Gz.shape[0]
    rhs = np.zeros((nz, P))
    rhs[selection] = lam_adj.w0
    nu = -np.linalg.solve(Gz.T, rhs)  # (nz, P)
    zeta = -np.linalg.solve(Gz, Gp[:, params])  # dz0/dp_j
    init_state = tuple(np.broadcast_to(x, (P,) + np.shape(x)) for x in traj.init.split())
    dp0 = np.zeros((P, n_p))
    dp0[np.arange(P), params] = 1.0
    Iz, Ip = second.init_second(*init_state, np.full(P, traj.t[0]), traj.p, nu.T, zeta.T, dp0)
    gradient = gradient + Ip.sum(axis=0)
    rhs_state = np.zeros(nz)
    rhs_state[selection] = mu_adj.w0[:, 0]
    omega = -np.linalg.solve(Gz.T, rhs_state + Iz.sum(axis=0))
    return gradient + Gp.T @ omega


