"""The continuous adjoint of the index-3 equations of motion (Oberpeilsteiner 2018, Sec. 3.3.4).

An alternative to the discrete adjoint (:mod:`fmi_adjoint.adjoint.discrete`): the adjoint
DAE of the *continuous* equations of motion is discretized on its own, by a backward
differentiation formula (BDF) running backwards over the step times of the frozen forward
trajectory.  Its gradient is not the exact derivative of the discretized cost; it
converges to the exact gradient of the continuous cost as the step size goes to zero, and
so does the discrete adjoint.  The tests use it to show that the two agree as ``h -> 0``.

Symbols (dissertation -> code)
------------------------------
Equations of motion (3.28) ``M v' = f - C_q^T lambda``, ``C(q) = 0``.  The project writes
them as ``M a + F = 0`` with ``F = C_q^T lambda - Q`` (:mod:`fmi_adjoint.compiled`), so

==============================  =====================================================
``f``                           ``Q``; ``f_xi`` -> ``-F_p`` (forces only)
``A`` (3.37)                    ``(J_M + K)^T``  (``J_M = d(M a)/dq``, ``K = J_C - J_Q``)
``B`` (3.38)                    ``J_V^T``        (``J_V = dQ/dv``)
``h_y^T`` (3.16)                ``W (y - ybar(t))`` of :class:`~fmi_adjoint.costs.LeastSquaresCost`
``y_q^T h_y^T``, ``y_v^T h_y^T``  ``g_q``, ``g_v`` below
``p, w, mu``                    adjoint variables of ``q' = v``, of the force balance, of ``C = 0``
``tau = T - t``                 reversed step grid, ``tau_n = T - t_{N-n}``
``gamma``                       ``tau_n - tau_{n-1}`` (the step, uneven steps allowed)
==============================  =====================================================

Implemented equations
---------------------
* Adjoint DAE (3.32)-(3.34), in backward time (3.45)::

      dp/dtau      = -g_q - A w - C_q^T mu
      d(M w)/dtau  = -g_v + p + B w
      0            = C_q w

* End conditions (3.40)-(3.44) at ``t = T`` (:func:`consistent_end_conditions`).  The
  costs of this project are integrals without a Mayer term (``phi = 0``), for which they
  reduce to ``p(T) = 0``, ``w(T) = 0``.  When the outputs depend on velocities in a
  constrained model, ``p(T) = 0`` violates the hidden constraint ``d/dt (C_q w) = 0``
  (``C_q M^-1 (y_v^T h_y^T - p) = 0`` at ``T``); like the ``xi`` of Sec. 3.3.4.2, a term
  ``nu^T C_q q_xi(T)`` (zero for parameter-free constraints) lets ``p(T)`` move by
  ``C_q^T nu`` to the consistent value, and ``-nu^T C_p(T)`` joins the gradient.  Without
  this the BDF history starts from an inconsistent ``p`` and the gradient stops converging.
* The Jacobians are evaluated at ``(q_i, v_i)`` of the trajectory with accelerations and
  multipliers recomputed at ``t_i`` (the HHT ones belong to ``t_i + alpha h``, see
  ``_accelerations``).
* BDF (3.46) with coefficients ``alpha_i`` from differentiating the interpolation
  polynomial through ``tau_n .. tau_{n-k}`` (on an even grid the standard BDF
  coefficients, e.g. ``(3/2, -2, 1/2)`` for ``k = 2``); the order starts at ``k = 1`` and
  grows by one per step up to ``max_order`` (Sec. 3.3.4.4/3.3.4.5).  Each step solves
  (3.52) for ``(w, mu)`` with ``W = alpha_0^2 M + gamma^2 A - alpha_0 gamma B`` and the
  right-hand side ``r`` below (3.51), then (3.50) for ``p``.
* Gradient (3.39) ``grad J = -int f_xi^T w dt``, evaluated with the trapezoidal rule on the
  step grid, extended (the text says the derivation "may be extended") by the terms the
  same derivation (3.29)-(3.31) gives when the parameters also enter

  - the mass matrix: ``int (M a)_p^T w dt`` (``(M a)_p`` joins ``f_xi`` in (3.29));
  - the constraints: ``int C_p^T mu dt`` (from ``mu^T C`` in the augmented cost) and,
    inside ``F_p``, ``(C_q^T lambda)_p``; the end term ``xi^T (C_q v)_p`` of Sec. 3.3.4.2
    vanishes because ``xi = 0`` without a Mayer term;
  - the outputs: ``int h_y y_p dt``;
  - the initial state: the boundary terms at ``t = 0`` of the integration by parts (3.30),
    which the text drops because ``q_xi(0) = v_xi(0) = 0`` there:
    ``-(q_xi(0)^T p(0) + v_xi(0)^T M(0) w(0))`` with ``(q_xi(0), v_xi(0))`` from the
    consistent initialization (one linear solve, as in the discrete adjoint).

Accuracy
--------
The BDF-``k`` solution of the adjoint DAE is of order ``k``; the trapezoidal quadrature of
(3.39) and the HHT trajectory the Jacobians are evaluated on are of order 2 (HHT: for
constant mass matrices or ``alpha = 0``, see :mod:`fmi_adjoint.integrate.hht`).  The
gradient is therefore of order ``min(k, 2)``; ``max_order = 2`` is the default and higher
orders (up to 6, where BDF stops being zero-stable) do not improve it.

Limitations (they raise :class:`NotImplementedError` naming the cause)
----------------------------------------------------------------------
* Only :class:`~fmi_adjoint.costs.LeastSquaresCost` is an integral ``int h(y, t) dt`` of
  the form (3.16); the sampled data are interpolated linearly in time, ``ybar(t)``, and
  the samples must span the simulated interval ``[t_0, T]``.  Other costs (Fourier,
  engine orders, POD) are functions of the whole sampled signal, not integrals.
* Outputs may depend on ``q``, ``v``, ``t`` and ``p`` (3.27); outputs depending on
  accelerations or Lagrange multipliers are rejected (the derivation has no
  ``y_a``/``y_lambda`` terms, and ``a``, ``lambda`` are not states of (3.28)).
* Velocity-dependent outputs of a model whose ``[[M, C_q^T], [C_q, 0]]`` is singular at
  ``T`` (a massless coordinate without constraint): the consistent end value is not
  determined by Sec. 3.3.4.2.
* Stiff modes that the step does not resolve (e.g. the fluid mode of ``engine_mount``,
  ``omega h > 1`` for ``h > 1e-4``) are damped differently by HHT and by the BDF: the two
  gradients then agree only once ``h`` resolves the mode.

The sweep only reads the trajectory; it never calls the integrator.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..costs.base import AbstractCost
from ..costs.least_squares import LeastSquaresCost
from ..errors import DataError
from ..integrate.trajectory import Trajectory
from .discrete import GradientResult, channel_indices, sampled_outputs
from .linearization import chunk_width, chunks, initial_state_jacobians

__all__ = [
    "ContinuousAdjoint",
    "MAX_BDF_ORDER",
    "bdf_coefficients",
    "consistent_end_conditions",
    "continuous_adjoint",
    "continuous_adjoint_gradient",
]

#: BDF formulas are zero-stable up to order 6.
MAX_BDF_ORDER = 6


@dataclasses.dataclass(frozen=True, eq=False)
class ContinuousAdjoint:
    """Solution of the adjoint DAE (3.45) and the gradient (3.39).

    Attributes
    ----------
    J : float
        The cost of the trajectory (as evaluated by the cost, step 2 of Sec. 3.3.4.5).
    gradient : numpy.ndarray, shape (n_p,)
        ``dJ/dp`` for every model parameter.
    t : numpy.ndarray, shape (N+1,)
        Forward step times (the adjoint arrays are indexed by them, not by ``tau``).
    p, w : numpy.ndarray, shape (N+1, n)
        Adjoint variables ``p(t)``, ``w(t)`` (step 5 of Sec. 3.3.4.5).
    mu : numpy.ndarray, shape (N+1, m)
        Adjoint multipliers; ``mu(T)`` is not an unknown of the scheme and is extrapolated
        linearly from the first two steps.
    max_order : int
        Highest BDF order used.
    """

    J: float
    gradient: np.ndarray
    t: np.ndarray
    p: np.ndarray
    w: np.ndarray
    mu: np.ndarray
    max_order: int


def bdf_coefficients(nodes: np.ndarray) -> np.ndarray:
    """Weights of the BDF derivative (3.46) at ``nodes[0]`` on possibly uneven nodes.

    Parameters
    ----------
    nodes : numpy.ndarray, shape (k+1,)
        ``tau_n, tau_{n-1}, ..., tau_{n-k}`` (distinct).

    Returns
    -------
    numpy.ndarray, shape (k+1,)
        ``c_i`` with ``dF/dtau(tau_n) ~ sum_i c_i F(tau_{n-i})``, the derivative at
        ``tau_n`` of the interpolation polynomial.  The text's ``alpha_i`` are
        ``gamma c_i`` with ``gamma = tau_n - tau_{n-1}``; on an even grid they are the
        standard coefficients (``k = 1``: ``(1, -1)``; ``k = 2``: ``(3/2, -2, 1/2)``).
    """
    nodes = np.asarray(nodes, dtype=float)
    x0 = nodes[0]
    k = nodes.size - 1
    c = np.empty(k + 1)
    # L_0'(x0) = sum_{j>0} 1/(x0 - x_j); L_i'(x0) = prod_{j != i, j > 0}(x0 - x_j) / prod_{j != i}(x_i - x_j).
    c[0] = np.sum(1.0 / (x0 - nodes[1:]))
    for i in range(1, k + 1):
        others = np.delete(nodes, i)
        num = np.prod(x0 - np.delete(others, 0))
        c[i] = num / np.prod(nodes[i] - others)
    return c


def consistent_end_conditions(
    M: np.ndarray,
    Cq: np.ndarray,
    phi_q: np.ndarray,
    phi_v: np.ndarray,
    CqV_q: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Adjoint end values ``p(T), w(T)`` consistent with ``C_q w = 0`` (eqs. (3.42)-(3.44)).

    Parameters
    ----------
    M : numpy.ndarray, shape (n, n)
        Mass matrix at ``T``.
    Cq : numpy.ndarray, shape (m, n)
        Constraint Jacobian at ``T``.
    phi_q, phi_v : numpy.ndarray, shape (n,)
        ``y_q^T phi_y^T`` and ``y_v^T phi_y^T`` of a Mayer term ``phi(y(T))``.
    CqV_q : numpy.ndarray, shape (m, n), optional
        ``(C_q v)_q`` at ``T``; needed only when ``xi != 0`` (a Mayer term depending on
        velocities in a constrained model).

    Returns
    -------
    p, w, xi : numpy.ndarray
        Solution of (3.43) for ``(w, xi)`` and of (3.44) for ``p``.

    Raises
    ------
    NotImplementedError
        If ``xi != 0`` and ``CqV_q`` is not given.
    numpy.linalg.LinAlgError
        If the saddle-point matrix of (3.43) is singular.
    """
    n, m = M.shape[0], Cq.shape[0]
    matrix = np.zeros((n + m, n + m))
    matrix[:n, :n] = M
    matrix[:n, n:] = Cq.T
    matrix[n:, :n] = Cq
    x = np.linalg.solve(matrix, np.concatenate((-phi_v, np.zeros(m))))  # (3.43)
    w, xi = x[:n], x[n:]
    p = -np.asarray(phi_q, dtype=float).copy()  # (3.44)
    if np.any(xi != 0):
        if CqV_q is None:
            raise NotImplementedError(
                "the end conditions (3.44) need (C_q v)_q because the Mayer term depends on velocities "
                "in a constrained model; pass CqV_q."
            )
        p -= CqV_q.T @ xi
    return p, w, xi


def _hidden_constraint_multiplier(model, M: np.ndarray, Cq: np.ndarray, residual: np.ndarray) -> np.ndarray:
    """``nu`` making ``p(T) + C_q^T nu`` consistent with ``d/dt (C_q w) = 0`` at ``T`` (``w(T) = 0``).

    With ``w(T) = 0``, (3.33) gives ``M w' = g_v - p`` at ``T`` and the hidden constraint
    ``C_q w' = 0``; ``p(T)`` is free in the range of ``C_q^T`` (the boundary term of (3.31)
    becomes ``nu^T C_q q_xi(T) = -nu^T C_p(T)``, zero unless the constraints depend on
    parameters), so ``[[M, C_q^T], [C_q, 0]] (w', nu) = (g_v - p, 0)`` fixes ``nu``.
    This is the limit of the first implicit-Euler step, made explicit so that the BDF
    history starts from consistent values.  ``residual = g_v(T) - p(T)``.
    """
    n, m = Cq.shape[1], Cq.shape[0]
    if m == 0 or not np.any(residual != 0):
        return np.zeros(m)
    matrix = np.zeros((n + m, n + m))
    matrix[:n, :n] = M
    matrix[:n, n:] = Cq.T
    matrix[n:, :n] = Cq
    try:
        x = np.linalg.solve(matrix, np.concatenate((residual, np.zeros(m))))
    except np.linalg.LinAlgError:
        raise NotImplementedError(
            f"model '{model.model.name}': the outputs depend on velocities at t_end and the matrix "
            "[[M, C_q^T], [C_q, 0]] is singular there (a massless coordinate without constraint), so the "
            "consistent adjoint end values are not determined by Sec. 3.3.4.2. Use position outputs or the "
            "discrete adjoint (adjoint_gradient)."
        ) from None
    return x[n:]


def _accelerations(traj: Trajectory, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Accelerations and multipliers at the step times ``idx``, recomputed from ``(q, v)``.

    With ``alpha != 0`` the HHT variables ``(a_i, lambda_i)`` approximate the accelerations
    and multipliers at ``t_i + alpha h`` (``M a_i`` balances ``(1+alpha) Q_i - alpha Q_{i-1}``),
    i.e. at ``t_i`` only to first order.  The adjoint DAE needs them at ``t_i`` (in ``A``,
    (3.37), and in ``(M a)_p``), so they are solved from the equations of motion and the
    acceleration-level constraints at ``(q_i, v_i, t_i)``: the last ``n + m`` rows of the
    consistent-initialization system ``G`` (:mod:`fmi_adjoint.compiled`), which are
    linear in ``(a, lambda)``.  This keeps the gradient second order for every ``alpha``.
    """
    model = traj.model
    n, m = model.n, model.m
    k = len(idx)
    z = np.zeros((k, 3 * n + 3 * m))
    z[:, :n] = traj.q[idx]
    z[:, n + m : 2 * n + m] = traj.v[idx]
    z[:, 2 * n + 2 * m : 3 * n + 2 * m] = traj.a[idx]
    z[:, 3 * n + 2 * m :] = traj.lam[idx]
    args = [z[:, b0:b1] for b0, b1 in zip(*_bounds(n, m))]
    G = model.init_residual(*args, traj.t[idx], traj.p)[0]
    Gz = model.init_jacobians(*args, traj.t[idx], traj.p)[0]
    G = np.broadcast_to(G, (k, 3 * n + 3 * m))[:, 2 * n + 2 * m :]
    Gz = np.broadcast_to(Gz, (k, 3 * n + 3 * m, 3 * n + 3 * m))[:, 2 * n + 2 * m :, 2 * n + 2 * m :]
    correction = np.linalg.solve(Gz, -G[..., None])[..., 0]
    x = z[:, 2 * n + 2 * m :] + correction
    return x[:, :n], x[:, n:]


def _bounds(n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    b = np.cumsum([0, n, m, n, m, n, m])
    return b[:-1], b[1:]


def _integrand_derivative(traj: Trajectory, cost: AbstractCost, channels: np.ndarray) -> np.ndarray:
    """``h_y^T(t_i)`` at every step time, shape ``(N+1, n_channels)``.

    ``h = 1/2 (y - ybar(t))^T W (y - ybar(t))`` with ``W = diag(weight / scale^2)`` and
    ``ybar`` the linear interpolant of the data: the integrand whose trapezoidal rule on
    the sample times is :class:`LeastSquaresCost`.
    """
    if not isinstance(cost, LeastSquaresCost):
        raise NotImplementedError(
            f"the continuous adjoint needs an integral cost J = int h(y, t) dt (dissertation eq. (3.16)); "
            f"{type(cost).__name__} is not one. Use a LeastSquaresCost, or the discrete adjoint "
            "(adjoint_gradient) for this cost."
        )
    ts = cost.sample_times
    t0, T = float(traj.t[0]), float(traj.t[-1])
    slack = 1e-9 * (T - t0)
    if abs(ts[0] - t0) > slack or abs(ts[-1] - T) > slack:
        raise NotImplementedError(
            f"the data span [{ts[0]:.6g}, {ts[-1]:.6g}] s but the simulation [{t0:.6g}, {T:.6g}] s; the continuous "
            "adjoint integrates h(y, t) over the simulated interval, so the samples must start at t0 and end at "
            "t_end (simulate to the last sample time or trim the data)."
        )
    if cost.sample_weights is not None:
        raise NotImplementedError(
            "the continuous adjoint interpolates the data in time and cannot skip masked samples (NaN gaps, "
            "per-sample weights); use the discrete adjoint (adjoint_gradient) for this cost.")
    Y = traj.outputs()[:, channels]
    ybar = np.column_stack([np.interp(traj.t, ts, cost.data[:, c]) for c in range(len(channels))])
    # LeastSquaresCost.__post_init__ turns weights and scales into arrays (never None).
    W = np.asarray(cost.weights) / np.asarray(cost.scales) ** 2
    return (Y - ybar) * W[None, :]


def _check_outputs(traj: Trajectory, channels: np.ndarray, width: int) -> None:
    """Reject outputs depending on accelerations or multipliers (not in eq. (3.27))."""
    model = traj.model
    bad = set()
    for idx in chunks(traj.n_steps + 1, width):
        _, _, Y_a, Y_lam, _ = model.output_jacobians(
            traj.q[idx], traj.v[idx], traj.a[idx], traj.lam[idx], traj.t[idx], traj.p
        )
        for c in channels:
            if np.any(Y_a[:, c] != 0) or np.any(Y_lam[:, c] != 0):
                bad.add(model.output_names[c])
    if bad:
        raise NotImplementedError(
            f"output(s) {sorted(bad)} depend on accelerations or Lagrange multipliers; the continuous adjoint "
            "of the dissertation (eq. (3.27): y = y(q, v)) has no such terms. Use outputs of positions and "
            "velocities, or the discrete adjoint (adjoint_gradient)."
        )


def continuous_adjoint(traj: Trajectory, cost: AbstractCost, max_order: int = 2) -> ContinuousAdjoint:
    """Solve the adjoint DAE (3.45) backwards with BDF and evaluate the gradient (3.39).

    Parameters
    ----------
    traj : Trajectory
        The forward run at the parameters of interest; its step grid is the BDF grid.
    cost : LeastSquaresCost
        Read as the integral ``int_{t0}^{T} h(y, t) dt`` of its linearly interpolated data
        (see the module docstring); the samples must span ``[t0, T]``.
    max_order : int
        Highest BDF order ``k`` (1 to 6); the scheme starts with ``k = 1`` and raises the
        order by one per step.  The gradient is of order ``min(max_order, 2)`` in ``h``.

    Returns
    -------
    ContinuousAdjoint

    Raises
    ------
    NotImplementedError
        For costs that are not integrals, data not spanning the simulation, outputs
        depending on accelerations or multipliers, and velocity outputs of a model whose
        ``[[M, C_q^T], [C_q, 0]]`` is singular at ``T``.
    DataError
        If ``max_order`` is not an integer in 1..6, or a channel is not a model output.
    """
    if isinstance(max_order, bool) or not isinstance(max_order, (int, np.integer)) or not (
        1 <= max_order <= MAX_BDF_ORDER
    ):
        raise DataError(f"max_order = {max_order!r}: the BDF order must be an integer from 1 to {MAX_BDF_ORDER}.")
    model = traj.model
    n, m, N = model.n, model.m, traj.n_steps
    channels = channel_indices(model, cost)
    width = chunk_width(traj)
    hy = _integrand_derivative(traj, cost, channels)
    _check_outputs(traj, channels, width)
    _, _, Ys = sampled_outputs(traj, cost)
    J = cost.evaluate(Ys, traj.p).J

    t = traj.t
    T = float(t[-1])
    P = np.zeros((N + 1, n))
    Wv = np.zeros((N + 1, n))
    MU = np.full((N + 1, m), np.nan)
    MW = np.zeros((N + 1, n))  # M w at the step times (the BDF differentiates M w, not w)
    # Trapezoidal weights of the gradient quadrature on the step grid.
    eta = np.zeros(N + 1)
    eta[:-1] += np.diff(t) / 2
    eta[1:] += np.diff(t) / 2
    gradient = np.zeros(model.n_p)
    M0 = None
    coefficients: dict[tuple, np.ndarray] = {}
    C_p_end = None
    for idx in chunks(N + 1, width, reverse=True):
        a_t, lam_t = _accelerations(traj, idx)
        args = (traj.q[idx], traj.v[idx], a_t, lam_t, t[idx], traj.p)
        M, JM, K, JV, Cq = model.jacobian_terms(*args)
        Ma_p, F_p, C_p = model.parameter_terms(*args)
        Y_q, Y_v, _, _, Y_p = model.output_jacobians(*args)
        yb = hy[idx]
        g_q = np.einsum("kcn,kc->kn", Y_q[:, channels], yb)
        g_v = np.einsum("kcn,kc->kn", Y_v[:, channels], yb)
        for k in range(len(idx) - 1, -1, -1):
            i = idx[k]  # forward step index; tau_n = T - t_i with n = N - i
            A = (JM[k] + K[k]).T  # (3.37)
            B = JV[k].T  # (3.38)
            if i == N:
                # End conditions (3.42)-(3.44) without a Mayer term, then the hidden constraint.
                p_end, w_end, _ = consistent_end_conditions(M[k], Cq[k], np.zeros(n), np.zeros(n))
                nu = _hidden_constraint_multiplier(model, M[k], Cq[k], g_v[k] - p_end)
                p_end = p_end + Cq[k].T @ nu
                gradient -= C_p[k].T @ nu  # boundary term nu^T C_q q_xi(T) = -nu^T C_p(T)
                P[i], Wv[i], MW[i] = p_end, w_end, M[k] @ w_end
                continue
            n_tau = N - i
            order = min(n_tau, max_order)
            hist = np.arange(i, i + order + 1)  # forward indices of tau_n, tau_{n-1}, ..., tau_{n-k}
            gam = t[i + 1] - t[i]  # tau_n - tau_{n-1}
            key = (order,) + tuple(np.round((t[hist[1:]] - t[i]) / gam, 12))
            alpha = coefficients.get(key)  # (3.46): alpha_i = gamma c_i, scale-free
            if alpha is None:  # on an even grid computed once per order
                alpha = coefficients[key] = gam * bdf_coefficients(T - t[hist])
            a0 = alpha[0]
            Wmat = a0 * a0 * M[k] + gam * gam * A - a0 * gam * B  # below (3.51)
            r = (
                -a0 * gam * g_v[k]
                - gam * gam * g_q[k]
                - np.einsum("j,jn->n", alpha[1:], gam * P[hist[1:]] + a0 * MW[hist[1:]])
            )
            matrix = np.zeros((n + m, n + m))
            matrix[:n, :n] = Wmat
            matrix[:n, n:] = gam * gam * Cq[k].T
            matrix[n:, :n] = Cq[k]
            x = np.linalg.solve(matrix, np.concatenate((r, np.zeros(m))))  # (3.52)
            w, mu = x[:n], x[n:]
            # (3.50)
            P[i] = -(gam / a0) * (g_q[k] + A @ w + Cq[k].T @ mu) - np.einsum("j,jn->n", alpha[1:], P[hist[1:]]) / a0
            Wv[i], MU[i], MW[i] = w, mu, M[k] @ w
        if idx[0] == 0:
            M0 = M[0]
        # Gradient (3.39) extended: -int f_xi^T w = int (M a + F)_p^T w, + int C_p^T mu, + int h_y y_p.
        e = eta[idx]
        gradient += np.einsum("k,kn,knp->p", e, Wv[idx], Ma_p + F_p)
        if m:
            # mu(T) is not a BDF unknown; its term is added after the sweep.
            inner = idx < N
            gradient += np.einsum("k,km,kmp->p", e[inner], MU[idx[inner]], C_p[inner])
            if idx[-1] == N:
                C_p_end = C_p[-1]
        gradient += np.einsum("k,kc,kcp->p", e, yb, Y_p[:, channels])

    if m:
        # mu(T) by linear extrapolation from the first two BDF steps (O(h^2), weight h/2).
        MU[N] = 2.0 * MU[N - 1] - MU[N - 2] if N >= 2 else MU[N - 1]
        assert C_p_end is not None  # the first chunk of the reverse sweep holds step N
        gradient += eta[N] * (C_p_end.T @ MU[N])

    # Boundary terms of (3.30) at t = 0 for a parameter-dependent initial state.
    Gz, Gp, selection = initial_state_jacobians(traj)
    dx0 = -np.linalg.solve(Gz, Gp)[selection]
    q_p, v_p = dx0[:n], dx0[n : 2 * n]
    gradient -= q_p.T @ P[0] + v_p.T @ (M0 @ Wv[0])
    return ContinuousAdjoint(J=J, gradient=gradient, t=t, p=P, w=Wv, mu=MU, max_order=int(max_order))


def continuous_adjoint_gradient(traj: Trajectory, cost: AbstractCost, max_order: int = 2) -> GradientResult:
    """Gradient of an integral cost by the continuous adjoint (see :func:`continuous_adjoint`).

    Returns
    -------
    GradientResult
        ``method == "continuous"``.
    """
    result = continuous_adjoint(traj, cost, max_order)
    return GradientResult(J=result.J, gradient=result.gradient, method="continuous")
