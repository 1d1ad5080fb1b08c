"""Jacobians of the step residual (HHT or generalized-alpha) along a frozen trajectory, evaluated in chunks.

Both the adjoint sweep and the forward sensitivities need, at every step ``i``, the
blocks of ``df_i/dx_i`` and ``df_{i+1}/dx_i`` (Lauss et al. 2018, eqs. (16)-(19)) and
``df_i/dp`` (eq. (20), extended by ``dC/dp`` and ``d(M a)/dp``).  They are evaluated
with the generated vectorized functions for a whole chunk of steps at once, so the
sequential loops only do small dense algebra.  Chunks bound the memory used.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..integrate.initialization import state_selection
from ..integrate.trajectory import Trajectory

__all__ = ["StepLinearization", "linearize", "chunks", "initial_state_jacobians"]


@dataclasses.dataclass(frozen=True, eq=False)
class StepLinearization:
    """Linearization of the steps ``idx`` (arrays with a leading step axis).

    ``matrix[k]`` is the Newton matrix ``[[S, C_q^T], [C_q, 0]]`` of step ``idx[k]``
    (meaningful for ``idx[k] >= 1``); ``inverse[k]`` its inverse.
    """

    idx: np.ndarray
    h: np.ndarray
    JM: np.ndarray
    K: np.ndarray
    JV: np.ndarray
    Cq: np.ndarray
    inverse: np.ndarray
    Ma_p: np.ndarray
    F_p: np.ndarray
    C_p: np.ndarray
    Y_q: np.ndarray
    Y_v: np.ndarray
    Y_a: np.ndarray
    Y_lam: np.ndarray
    Y_p: np.ndarray


def chunks(n_points: int, width: int, reverse: bool = False):
    """Consecutive index ranges covering ``0..n_points-1``."""
    starts = range(0, n_points, width)
    ranges = [np.arange(s, min(s + width, n_points)) for s in starts]
    return reversed(ranges) if reverse else iter(ranges)


def chunk_width(traj: Trajectory, budget_bytes: float = 6e7) -> int:
    """Steps per chunk so that the dense blocks of one chunk stay within a budget."""
    model = traj.model
    k = model.n + model.m
    per_step = 8.0 * (5 * k * k + (k + model.n_y) * (model.n_p + k))
    return int(max(32, min(8192, budget_bytes // per_step)))


def linearize(traj: Trajectory, idx: np.ndarray) -> StepLinearization:
    """Evaluate all step Jacobians at the steps ``idx`` of ``traj``."""
    model = traj.model
    n, m = model.n, model.m
    co = traj.scheme.coefficients()
    c_m = co.c_m
    args = (traj.q[idx], traj.v[idx], traj.a[idx], traj.lam[idx], traj.t[idx], traj.p)
    M, JM, K, JV, Cq = model.jacobian_terms(*args)
    Ma_p, F_p, C_p = model.parameter_terms(*args)
    Y_q, Y_v, Y_a, Y_lam, Y_p = model.output_jacobians(*args)
    h = np.where(idx >= 1, traj.t[idx] - traj.t[np.maximum(idx - 1, 0)], 1.0)
    bh2 = (co.beta * co.c_a * h * h)[:, None, None]
    gh = (co.gamma * co.c_a * h)[:, None, None]
    matrix = np.zeros((len(idx), n + m, n + m))
    matrix[:, :n, :n] = c_m * M + bh2 * (c_m * JM + K) - gh * JV
    matrix[:, :n, n:] = np.swapaxes(Cq, 1, 2)
    matrix[:, n:, :n] = Cq
    if idx[0] == 0:
        matrix[0] = np.eye(n + m)  # step 0 has no residual; keep the batch invertible
    inverse = np.linalg.inv(matrix)
    return StepLinearization(
        idx=idx, h=h, JM=JM, K=K, JV=JV, Cq=Cq, inverse=inverse, Ma_p=Ma_p, F_p=F_p, C_p=C_p,
        Y_q=Y_q, Y_v=Y_v, Y_a=Y_a, Y_lam=Y_lam, Y_p=Y_p,
    )


def initial_state_jacobians(traj: Trajectory) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(dG/dz, dG/dp, selection)`` of the consistent initialization at the solution.

    ``selection`` picks ``(q, v, a, lambda)`` out of ``z``; ``dx0/dp = -(G_z^{-1} G_p)[selection]``.
    """
    model = traj.model
    init = traj.init
    Gz, Gp = model.init_jacobians(*init.split(), traj.t[0], traj.p)
    return Gz, Gp, state_selection(model.n, model.m)
