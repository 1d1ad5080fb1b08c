"""Pontryagin bang-bang solution of the single-mass input design, Oberpeilsteiner (2018), Sec. 5.3.2.

An independent reference for the optimal input design of ``examples/single_mass.toml``
(numpy and scipy only; nothing of :mod:`fmi_adjoint` is imported).  The extended system,
eq. (5.23), of the undamped oscillator and its sensitivity to ``c = omega^2``::

    z = (x, v, x_c, v_c),   z' = A z + b u,   z(0) = 0,
    A = [[0, 1, 0, 0], [-omega^2, 0, 0, 0], [0, 0, 0, 1], [-1, 0, -omega^2, 0]],   b = (0, 1, 0, 0),

the criterion, eq. (5.8) with the output ``y = x``::

    J = -int_0^T 1/2 x_c^2 dt,

and the adjoint system, eq. (5.25) (``p' = -H_z^T`` with the Hamiltonian (5.24); the sign of
its ``p_1 z_2`` term is printed as ``-`` there, but (5.25)'s ``p_2' = -p_1`` and the general
form (5.11) both give ``+p_1 z_2``, which is what is used here)::

    p' = -A^T p + (0, 0, x_c, 0),   p(T) = 0.

The input is bang-bang with one switch, ``u = u^+ = 1`` on ``[0, t1)`` and ``u^- = -1`` on
``[t1, T]`` (eq. (5.26); ``J`` is even in ``u``, so the mirrored input is as good).

Exactness: on each arc the input is constant, so ``w = (z, u)`` obeys the autonomous linear
system ``w' = F w``; ``J`` is a quadratic form of ``w`` integrated over the arc, which Van Loan's
block exponential (C. F. Van Loan, IEEE Trans. Autom. Control 23 (1978) 395-404, Theorem 1)
gives to round-off::

    expm([[-F^T, Q], [0, F]] s) = [[., G(s)], [0, e^{F s}]],   e^{F^T s} G(s) = int_0^s e^{F^T r} Q e^{F r} dr.

The derivative ``dJ/dt1 = (u^+ - u^-) p_2(t1)`` (the switching function of eq. (5.27): moving
the switch by ``dt1`` changes ``u`` by ``u^+ - u^-`` on ``[t1, t1 + dt1]``, and
``delta J = int H_u delta u dt = int p_2 delta u dt``); ``p_2(t1)`` follows, again exactly, from
the block exponential of the coupled state-adjoint system (5.18) on the second arc, run
backwards from ``p(T) = 0``.  No finite difference enters the root.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import expm
from scipy.optimize import brentq

__all__ = ["adjoint_p2", "criterion", "criterion_derivative", "criterion_grid", "switching_time",
           "system_matrix"]

#: Bounds of the input, eq. (5.26): u^+ = -u^- = 1.
U_PLUS = 1.0
U_MINUS = -1.0


def system_matrix(omega: float = 1.0) -> np.ndarray:
    """``A`` of eq. (5.23) (the input vector is ``b = e_2``)."""
    w2 = omega * omega
    return np.array([[0.0, 1.0, 0.0, 0.0], [-w2, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [-1.0, 0.0, -w2, 0.0]])


def _augmented(omega: float) -> np.ndarray:
    """``F`` of ``w = (z, u)``, ``w' = F w`` on an arc of constant ``u`` (5 x 5)."""
    F = np.zeros((5, 5))
    F[:4, :4] = system_matrix(omega)
    F[1, 4] = 1.0
    return F


def _arc(F: np.ndarray, Q: np.ndarray, s: float) -> tuple[np.ndarray, np.ndarray]:
    """``(e^{F s}, int_0^s e^{F^T r} Q e^{F r} dr)`` by Van Loan's block exponential."""
    n = F.shape[0]
    block = np.zeros((2 * n, 2 * n))
    block[:n, :n] = -F.T
    block[:n, n:] = Q
    block[n:, n:] = F
    E = expm(block * s)
    phi = E[n:, n:]
    return phi, phi.T @ E[:n, n:]


def criterion(t1: float, omega: float = 1.0, T: float = 2 * math.pi) -> float:
    """``J(t1) = -int_0^T 1/2 x_c^2 dt`` (eq. (5.8) for eq. (5.23)) for ``u = +1`` on ``[0, t1)``
    and ``-1`` on ``[t1, T]``; ``t1 = T`` is the constant input ``u = 1``, ``t1 = 0`` its negative.

    Exact to round-off: the quadratic of each constant-input arc is integrated with Van Loan's
    block exponential (module docstring).
    """
    if not 0.0 <= t1 <= T:
        raise ValueError(f"t1 = {t1!r} is outside [0, T = {T!r}]; give a switching time inside the horizon.")
    F = _augmented(omega)
    Q = np.zeros((5, 5))
    Q[2, 2] = 1.0  # x_c^2
    total = 0.0
    w = np.array([0.0, 0.0, 0.0, 0.0, U_PLUS])
    for s, u in ((t1, U_PLUS), (T - t1, U_MINUS)):
        w[4] = u
        if s > 0.0:
            phi, G = _arc(F, Q, s)
            total += float(w @ G @ w)
            w = phi @ w
    return -0.5 * total


def _coupled(omega: float) -> np.ndarray:
    """State-adjoint system (5.18) of ``(z, p, u)`` on an arc of constant ``u`` (9 x 9):
    ``z' = A z + b u`` (5.23), ``p' = -A^T p + (0, 0, z_3, 0)`` (5.25)."""
    A = system_matrix(omega)
    C = np.zeros((9, 9))
    C[:4, :4] = A
    C[1, 8] = 1.0
    C[4:8, 4:8] = -A.T
    C[6, 2] = 1.0  # p_3' = z_3 + omega^2 p_4
    return C


def _at_switch(t1: float, omega: float, T: float) -> np.ndarray:
    """``(z(t1), p(t1), u^-)`` in the layout of :func:`_coupled` for the one-switch input.

    ``z(t1)`` follows from the first arc (``u = u^+``, ``z(0) = 0``).  On the second arc the
    coupled system is linear, so ``p(T)`` is an affine function of the unknown ``p(t1)``; the
    end condition ``p(T) = 0`` (eq. (5.14) with ``p_f = 0``) fixes it by one 4 x 4 solve."""
    z1 = (expm(_augmented(omega) * t1) @ np.array([0.0, 0.0, 0.0, 0.0, U_PLUS]))[:4]
    E2 = expm(_coupled(omega) * (T - t1))
    p1 = np.linalg.solve(E2[4:8, 4:8], -(E2[4:8, :4] @ z1 + E2[4:8, 8] * U_MINUS))
    return np.concatenate([z1, p1, [U_MINUS]])


def _adjoint(times: np.ndarray, t1: float, omega: float, T: float) -> np.ndarray:
    """``p(t)`` of eq. (5.25) (``p(T) = 0``) at ``times``, shape ``(len(times), 4)``: the coupled
    system run from the switch, forwards on the second arc (``u^-``) and backwards on the first
    (``u^+``; ``z`` and ``p`` are continuous at the switch, only ``u`` jumps), from one time to
    the next with the exponential of each interval (cached by length: a uniform grid has few
    distinct lengths, so many times cost few exponentials)."""
    C = _coupled(omega)
    second = _at_switch(t1, omega, T)
    first = second.copy()
    first[8] = U_PLUS
    exponentials: dict[float, np.ndarray] = {}
    result = np.empty((len(times), 4))
    order = np.argsort(times)
    after = [int(i) for i in order if times[i] >= t1]
    before = [int(i) for i in order[::-1] if times[i] < t1]
    for indices, state in ((after, second), (before, first)):
        t = t1
        for i in indices:
            h = float(times[i]) - t
            if h not in exponentials:
                exponentials[h] = expm(C * h)
            state = exponentials[h] @ state
            t = float(times[i])
            result[i] = state[4:8]
    return result


def adjoint_p2(t: float | np.ndarray, t1: float, omega: float = 1.0, T: float = 2 * math.pi) -> np.ndarray:
    """``p_2(t)`` of eq. (5.25) (``p(T) = 0``) for the one-switch input at ``t1``, an array for
    scalar or array ``t``.  Its sign gives the optimal input by eq. (5.26): ``u* = u^-`` where
    ``p_2 > 0``, ``u^+`` where ``p_2 < 0``; its value at the switch is the switching function
    ``f(t1)`` of eq. (5.27)."""
    times = np.atleast_1d(np.asarray(t, dtype=float))
    return _adjoint(times, t1, omega, T)[:, 1]


def criterion_derivative(t1: float, omega: float = 1.0, T: float = 2 * math.pi) -> float:
    """``dJ/dt1 = (u^+ - u^-) p_2(t1)``, the switching function ``f(t1)`` of eq. (5.27)
    scaled by ``u^+ - u^-`` (exact; module docstring)."""
    return (U_PLUS - U_MINUS) * float(_at_switch(t1, omega, T)[5])


def criterion_grid(n: int, omega: float = 1.0, T: float = 2 * math.pi) -> tuple[np.ndarray, np.ndarray]:
    """``(t1, J(t1))`` for the ``n + 1`` switch times ``t1 = k T/n``, as :func:`criterion`.

    One block exponential for the step ``delta = T/n`` serves every arc: the Van Loan block of
    an arc of length ``k delta`` is its ``k``-th power (``expm(B k delta) = expm(B delta)^k``),
    and the second arcs (lengths ``(n - k) delta``) use the same powers.  The ``n``
    successive products add round-off only (measured: 1.6e-13 relative against
    :func:`criterion` for ``n = 2000``)."""
    if n < 1:
        raise ValueError(f"n = {n!r}: the grid needs at least one interval; give n >= 1.")
    F = _augmented(omega)
    Q = np.zeros((5, 5))
    Q[2, 2] = 1.0
    block = np.zeros((10, 10))
    block[:5, :5] = -F.T
    block[:5, 5:] = Q
    block[5:, 5:] = F
    step = expm(block * (T / n))
    powers = np.empty((n + 1, 10, 10))
    powers[0] = np.eye(10)
    for k in range(n):
        powers[k + 1] = powers[k] @ step
    phi = powers[:, 5:, 5:]
    G = np.transpose(phi, (0, 2, 1)) @ powers[:, :5, 5:]
    w0 = np.array([0.0, 0.0, 0.0, 0.0, U_PLUS])
    first = np.einsum("i,kij,j->k", w0, G, w0)
    w1 = phi @ w0
    w1[:, 4] = U_MINUS
    second = np.einsum("ki,kij,kj->k", w1, G[::-1], w1)
    return np.linspace(0.0, T, n + 1), -0.5 * (first + second)


def switching_time(omega: float = 1.0, T: float = 2 * math.pi, grid: int = 2000) -> float:
    """The optimal switch ``t1*``: the global minimum of :func:`criterion` over ``(0, T)``,
    where ``dJ/dt1 = 0`` (eqs. (5.22), (5.27)).

    A scan of ``J`` on ``grid + 1`` switch times (:func:`criterion_grid`) brackets the
    minimum; :func:`scipy.optimize.brentq` finds the root of the exact
    :func:`criterion_derivative` in that bracket.  For ``omega = 1``, ``T = 2 pi``:
    ``t1* = 1.2424220416992207``, ``J(t1*) = -16.93775383610914`` (against ``-12.03994671``
    for the constant input; ``tests/test_design_examples.py`` checks them).
    """
    times, values = criterion_grid(grid, omega, T)
    k = int(np.argmin(values))
    if k == 0 or k == grid:
        raise ValueError(f"J has its minimum at the end of the horizon (t1 = {times[k]!r}); no interior switch.")
    return float(brentq(criterion_derivative, times[k - 1], times[k + 1], args=(omega, T), xtol=1e-14, rtol=1e-15))
