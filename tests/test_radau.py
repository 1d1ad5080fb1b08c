"""Adaptive Radau IIA (fmi_adjoint.integrate.radau): coefficients, accuracy, events, frozen replay and
the exact discrete sensitivities against closed forms and finite differences of the frozen scheme."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from fmi_adjoint.errors import ConvergenceError
from fmi_adjoint.integrate.radau import (
    RADAU_A,
    RADAU_B,
    RADAU_C,
    RadauRun,
    integrate_radau,
    radau_sensitivities,
    radau_step,
    sensitivities_at_stops,
    values_at_stops,
)
from fmi_adjoint.integrate.radau import _ERROR_WEIGHTS, _GAMMA0
from tolerances import (
    EXACT, FROZEN_FD, FROZEN_FD_LINEAR, GLOBAL_ERROR_AT_1E_10, GLOBAL_ERROR_AT_1E_8, ORDER, RADAU_BALL_CLOSED_FORM,
    ZENO_TIME,
)

FD_STEP = 1e-5


class AnalyticSystem:
    """Test systems with analytic derivatives: an OdeSystem, and the derivatives for SensitivityInputs."""

    n_states = 0
    n_indicators = 0

    def __init__(self, p: np.ndarray) -> None:
        self.p = np.asarray(p, dtype=float)

    # -- OdeSystem
    def rhs(self, t, x):
        return self.f(t, x, self.mode)

    def jacobian(self, t, x):
        return self.fx(t, x, self.mode)

    def indicators(self, t, x):
        return self.z(t, x)

    def next_time_event(self):
        return None

    def event(self, t, x, kind):
        return self.jump(t, x, kind)

    def accepted(self, step):
        self.accepted_steps = getattr(self, "accepted_steps", 0) + 1

    def completed_step(self, t, x):
        return False

    mode = 0

    # -- model (override)
    def f(self, t, x, mode):
        raise NotImplementedError

    def fx(self, t, x, mode):
        raise NotImplementedError

    def fp(self, t, x, mode):
        raise NotImplementedError

    def ft(self, t, x, mode):
        return np.zeros(self.n_states)

    def z(self, t, x):
        return np.zeros(0)

    def z_derivatives(self, t, x):
        """(z_t (k,), z_x (k, n), z_p (k, n_p))."""
        raise NotImplementedError

    def jump(self, t, x, kind):
        return x

    def jump_derivatives(self, t, x, kind):
        """(Delta_t (n,), Delta_x (n, n), Delta_p (n, n_p)) of the jump applied at (t, x)."""
        n = self.n_states
        return np.zeros(n), np.eye(n), np.zeros((n, self.p.size))

    def mode_of_step(self, step):
        return 0


class Derivatives:
    """SensitivityInputs of a run of an AnalyticSystem (evaluated on a fresh copy of it)."""

    def __init__(self, system: AnalyticSystem, run: RadauRun, initial_state_parameters: int = 0) -> None:
        # p = (the system's parameters, then initial_state_parameters entries of x0), which
        # enter only through S0: zero columns in every df/dp, dz/dp and dDelta/dp.
        self.system, self.run, self.extra = system, run, initial_state_parameters

    def _pad(self, array):
        return np.concatenate([array, np.zeros(array.shape[:-1] + (self.extra,))], axis=-1)

    def _stages(self, k):
        s = self.run.steps[k]
        h = s.t1 - s.t0
        times = (s.t0 + RADAU_C[0] * h, s.t0 + RADAU_C[1] * h, s.t1)
        return s, times, [s.x0 + s.Z[j] for j in range(3)], self.system.mode_of_step(s)

    def stage_jacobians(self, k):
        s, times, xs, mode = self._stages(k)
        return (np.array([self.system.fx(t, x, mode) for t, x in zip(times, xs)]),
                self._pad(np.array([self.system.fp(t, x, mode) for t, x in zip(times, xs)])))

    def stage_time_derivatives(self, k):
        s, times, xs, mode = self._stages(k)
        return np.array([self.system.ft(t, x, mode) for t, x in zip(times, xs)])

    def indicator_directional(self, e, dt, dx, dp):
        event = self.run.events[e]
        zt, zx, zp = self.system.z_derivatives(event.t, event.x_minus)
        i = event.indicator
        return zt[i] * dt + zx[i] @ dx + self._pad(zp)[i] @ dp

    def jump_directional(self, e, dt, dx, dp):
        event = self.run.events[e]
        jt, jx, jp = self.system.jump_derivatives(event.t, event.x_minus, event.kind)
        return np.outer(jt, dt) + jx @ dx + self._pad(jp) @ dp


class Dahlquist(AnalyticSystem):
    """x' = -k x; p = (k,)."""

    n_states = 1

    def f(self, t, x, mode):
        return -self.p[0] * x

    def fx(self, t, x, mode):
        return np.array([[-self.p[0]]])

    def fp(self, t, x, mode):
        return np.array([[-x[0]]])


class VanDerPol(AnalyticSystem):
    """x1' = x2, x2' = mu (1 - x1^2) x2 - x1; p = (mu,)."""

    n_states = 2

    def f(self, t, x, mode):
        mu = self.p[0]
        return np.array([x[1], mu * (1.0 - x[0] ** 2) * x[1] - x[0]])

    def fx(self, t, x, mode):
        mu = self.p[0]
        return np.array([[0.0, 1.0], [-2.0 * mu * x[0] * x[1] - 1.0, mu * (1.0 - x[0] ** 2)]])

    def fp(self, t, x, mode):
        return np.array([[0.0], [(1.0 - x[0] ** 2) * x[1]]])


class BouncingBall(AnalyticSystem):
    """h' = v, v' = -g; indicator h; if h <= 0 and v < 0: (h, v) -> (-h, -e v).  p = (e, g)."""

    n_states = 2
    n_indicators = 1

    def f(self, t, x, mode):
        return np.array([x[1], -self.p[1]])

    def fx(self, t, x, mode):
        return np.array([[0.0, 1.0], [0.0, 0.0]])

    def fp(self, t, x, mode):
        return np.array([[0.0, 0.0], [0.0, -1.0]])

    def z(self, t, x):
        return np.array([x[0]])

    def z_derivatives(self, t, x):
        return np.zeros(1), np.array([[1.0, 0.0]]), np.zeros((1, 2))

    def _bounces(self, x):
        return x[0] <= 0.0 and x[1] < 0.0

    def jump(self, t, x, kind):
        return np.array([-x[0], -self.p[0] * x[1]]) if self._bounces(x) else x

    def jump_derivatives(self, t, x, kind):
        if not self._bounces(x):
            return super().jump_derivatives(t, x, kind)
        return np.zeros(2), np.diag([-1.0, -self.p[0]]), np.array([[0.0, 0.0], [-x[1], 0.0]])


class SwitchedDecay(AnalyticSystem):
    """x1' = -k x1 + u, x2' = x1, with a time event at T = 0.5 (u: 0 -> u_on, x2 -> x2 + jump) and
    one step event (the first completed step at t >= 0.25: x1 -> scale x1).  p = (k, u_on, jump, scale)."""

    n_states = 2
    SWITCH, STEP_EVENT_AFTER = 0.5, 0.25

    def __init__(self, p):
        super().__init__(p)
        self.mode = 0
        self.step_event_done = False
        self.calls: list[tuple[float, str]] = []

    def f(self, t, x, mode):
        k, u_on = self.p[0], self.p[1]
        return np.array([-k * x[0] + (u_on if mode else 0.0), x[0]])

    def fx(self, t, x, mode):
        return np.array([[-self.p[0], 0.0], [1.0, 0.0]])

    def fp(self, t, x, mode):
        return np.array([[-x[0], float(mode), 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])

    def next_time_event(self):
        return None if self.mode else self.SWITCH

    def completed_step(self, t, x):
        if not self.step_event_done and t >= self.STEP_EVENT_AFTER:
            self.step_event_done = True
            return True
        return False

    def event(self, t, x, kind):
        self.calls.append((t, kind))
        if kind == "time":
            self.mode = 1
            return np.array([x[0], x[1] + self.p[2]])
        return np.array([self.p[3] * x[0], x[1]])

    def jump_derivatives(self, t, x, kind):
        jp = np.zeros((2, 4))
        if kind == "time":
            jp[1, 2] = 1.0
            return np.zeros(2), np.eye(2), jp
        jp[0, 3] = x[0]
        return np.zeros(2), np.diag([self.p[3], 1.0]), jp

    def mode_of_step(self, step):
        return int(step.t0 >= self.SWITCH)


class NonFinite(Dahlquist):
    """x' = -k x, but the right-hand side is NaN after t = 0.5."""

    def f(self, t, x, mode):
        return np.full(1, np.nan) if t > 0.5 else super().f(t, x, mode)


class Clock(AnalyticSystem):
    """No states; one indicator t - 0.55 (a state event of a zero-state system)."""

    n_indicators = 1

    def __init__(self, p):
        super().__init__(p)
        self.completed = 0

    def z(self, t, x):
        return np.array([t - self.p[0]])

    def z_derivatives(self, t, x):
        return np.ones(1), np.zeros((1, 0)), -np.ones((1, 1))

    def completed_step(self, t, x):
        self.completed += 1
        return False


def frozen_fd(make, p, x0, run, t_end, stops, *, rtol=1e-10, atol=1e-12, state_parameters=()):
    """Central differences of the frozen replay of ``run`` at the stops (right values), one column per
    entry of p and then one per index in state_parameters (a perturbed x0 component)."""
    columns = []
    for i in range(len(p) + len(state_parameters)):
        values = []
        for sign in (1.0, -1.0):
            pp, xx = np.array(p, dtype=float), np.array(x0, dtype=float)
            if i < len(p):
                delta = FD_STEP * max(1.0, abs(pp[i]))
                pp[i] += sign * delta
            else:
                j = state_parameters[i - len(p)]
                delta = FD_STEP * max(1.0, abs(xx[j]))
                xx[j] += sign * delta
            replay = integrate_radau(make(pp), xx, 0.0, t_end, stops=stops, rtol=rtol, atol=atol,
                                     nodes=run.replay_nodes)
            values.append(values_at_stops(replay)[1])
        columns.append((values[0] - values[1]) / (2.0 * delta))
    return np.stack(columns, axis=-1)


def relative_error(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


# --------------------------------------------------------------------------- coefficients


def test_radau_order_conditions():
    A, b, c = RADAU_A, RADAU_B, RADAU_C
    for q in range(1, 6):  # B(5)
        assert abs(b @ c ** (q - 1) - 1.0 / q) <= EXACT
    for q in range(1, 4):  # C(3)
        np.testing.assert_allclose(A @ c ** (q - 1), c**q / q, rtol=0, atol=EXACT)
    np.testing.assert_array_equal(b, A[2])  # stiffly accurate
    assert c[2] == 1.0


def test_embedded_formula_has_order_three():
    """bh = b + A^T e with weight g0 on f(t0, y0) satisfies the order conditions up to 3, not 4."""
    bh = RADAU_B + _ERROR_WEIGHTS @ RADAU_A
    assert abs(_GAMMA0 - np.max(np.linalg.eigvals(RADAU_A).real)) <= EXACT
    for q in range(1, 4):
        assert abs(bh @ RADAU_C ** (q - 1) + (_GAMMA0 if q == 1 else 0.0) - 1.0 / q) <= EXACT
    assert abs(bh @ RADAU_C**3 - 0.25) > 1e-3


class Smooth(AnalyticSystem):
    """x1' = -x1^2 + sin t, x2' = x1 x2 (a smooth non-linear problem)."""

    n_states = 2

    def f(self, t, x, mode):
        return np.array([-x[0] ** 2 + math.sin(t), x[0] * x[1]])

    def fx(self, t, x, mode):
        return np.array([[-2.0 * x[0], 0.0], [x[1], x[0]]])


def test_raw_error_estimate_is_fourth_order():
    system, x0 = Smooth(np.zeros(0)), np.array([1.0, 0.5])
    hs = np.array([0.05, 0.025, 0.0125, 0.00625])
    raw = [np.linalg.norm(radau_step(system, 0.3, 0.3 + h, x0)[1]) for h in hs]
    slopes = np.diff(np.log(raw)) / np.diff(np.log(hs))
    assert np.all(np.abs(slopes - 4.0) <= ORDER), slopes


# --------------------------------------------------------------------------- Dahlquist


@pytest.mark.parametrize("rtol", [1e-6, 1e-8, 1e-10])
def test_dahlquist_global_error_follows_tolerance(rtol):
    k, stops = 2.0, np.linspace(0.0, 2.0, 21)
    run = integrate_radau(Dahlquist([k]), np.ones(1), 0.0, 2.0, stops=stops, rtol=rtol, atol=1e-3 * rtol)
    x = values_at_stops(run)[1][:, 0]
    error = np.max(np.abs(x - np.exp(-k * stops)) / np.exp(-k * stops))
    assert error <= 10.0 * rtol
    np.testing.assert_array_equal(run.t[run.stop_nodes], stops)


def test_dahlquist_error_falls_with_tolerance():
    k, stops = 2.0, np.linspace(0.0, 2.0, 21)
    errors = []
    for rtol in (1e-6, 1e-8, 1e-10):
        run = integrate_radau(Dahlquist([k]), np.ones(1), 0.0, 2.0, stops=stops, rtol=rtol, atol=1e-3 * rtol)
        errors.append(np.max(np.abs(values_at_stops(run)[1][:, 0] - np.exp(-k * stops))))
    assert errors[0] > errors[1] > errors[2]


def test_dahlquist_sensitivity():
    k, stops = 2.0, np.linspace(0.0, 2.0, 21)
    make = Dahlquist
    run = integrate_radau(make([k]), np.ones(1), 0.0, 2.0, stops=stops, rtol=1e-10, atol=1e-13)
    sens = radau_sensitivities(run, Derivatives(make([k]), run), np.zeros((1, 1)))
    D = sensitivities_at_stops(run, sens)[1][:, 0, 0]
    analytic = -stops * np.exp(-k * stops)
    assert np.max(np.abs(D - analytic)) <= 10.0 * 1e-10 * np.max(np.abs(analytic))
    fd = frozen_fd(make, [k], np.ones(1), run, 2.0, stops, atol=1e-13)[:, 0, 0]
    assert relative_error(D, fd) <= FROZEN_FD_LINEAR
    assert not np.any(sens.T)


# --------------------------------------------------------------------------- Van der Pol


@pytest.mark.parametrize("mu", [1.0, 5.0])
def test_van_der_pol(mu):
    x0, t_end, stops = np.array([2.0, 0.0]), 2.0, np.linspace(0.0, 2.0, 5)
    run = integrate_radau(VanDerPol([mu]), x0, 0.0, t_end, stops=stops, rtol=1e-10, atol=1e-10)
    reference = solve_ivp(lambda t, x: VanDerPol([mu]).f(t, x, 0), (0.0, t_end), x0, method="Radau",
                          t_eval=stops, rtol=1e-13, atol=1e-13)
    x = values_at_stops(run)[1]
    assert np.max(np.abs(x - reference.y.T)) <= GLOBAL_ERROR_AT_1E_10
    assert run.n_rejected <= len(run.steps) // 4 + 2
    # work: Newton converges to round-off in 3-4 iterations per step (measured mean 3.2-3.4)
    assert run.n_newton <= 4 * (len(run.steps) + run.n_rejected)
    assert run.n_jacobians == len(run.steps)

    replay = integrate_radau(VanDerPol([mu]), x0, 0.0, t_end, stops=stops, rtol=1e-10, atol=1e-10,
                             nodes=run.replay_nodes)
    np.testing.assert_array_equal(replay.t, run.t)
    np.testing.assert_array_equal(replay.x, run.x)

    S0 = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])  # p = (mu, x1_0, x2_0)
    sens = radau_sensitivities(run, Derivatives(VanDerPol([mu]), run, 2), S0)
    D = sensitivities_at_stops(run, sens)[1]
    fd = frozen_fd(VanDerPol, [mu], x0, run, t_end, stops, atol=1e-10, state_parameters=(0, 1))
    for column in range(3):
        assert relative_error(D[..., column], fd[..., column]) <= FROZEN_FD


# --------------------------------------------------------------------------- bouncing ball


def ball_closed_form(e, g, h0, t):
    """(h, v) at time t and the impact times before it, for complex (e, g, h0) (complex-step derivatives)."""
    tau = np.sqrt(2.0 * h0 / g)
    impacts, k = [], 0
    while True:
        t_next = tau * (1.0 + 2.0 * sum(e**j for j in range(1, k + 1)))
        if t_next.real > t:
            break
        impacts.append(t_next)
        k += 1
    if k == 0:
        return h0 - 0.5 * g * t**2, -g * t, impacts
    s = t - impacts[-1]
    u = e**k * g * tau
    return u * s - 0.5 * g * s**2, u - g * s, impacts


def complex_step(function, p, index, *args):
    pc = np.array(p, dtype=complex)
    pc[index] += 1e-30j
    return np.imag(function(*pc, *args)) / 1e-30


def test_bouncing_ball_events_and_sensitivities():
    e, g, h0, t_end = 0.8, 9.81, 1.0, 3.0
    stops = np.linspace(0.0, t_end, 31)
    system = BouncingBall([e, g])
    run = integrate_radau(system, np.array([h0, 0.0]), 0.0, t_end, stops=stops, rtol=1e-10, atol=1e-12)
    assert system.accepted_steps == len(run.steps)  # the hook sees every accepted step, once
    _, _, impacts = ball_closed_form(e, g, h0, t_end)
    # A bounce that lands exactly on h = 0 leaves h = -0 <= 0, so the indicator re-enters z > 0
    # right after it: a second state event, where the model does nothing (FMI semantics).
    bounces = [event for event in run.events if event.x_minus[1] < 0.0]
    assert len(bounces) == len(impacts) == 6
    assert all(np.array_equal(event.x_plus, event.x_minus) for event in run.events if event not in bounces)
    event_times = np.array([event.t for event in bounces])
    np.testing.assert_allclose(event_times, np.real(impacts), rtol=0, atol=RADAU_BALL_CLOSED_FORM)
    assert all(event.kind == "state" and event.indicator == 0 for event in run.events)
    assert all(run.moving[event.node] for event in run.events) and np.sum(run.moving) == len(run.events)

    replay = integrate_radau(BouncingBall([e, g]), np.array([h0, 0.0]), 0.0, t_end, stops=stops, rtol=1e-10,
                             atol=1e-12, nodes=run.replay_nodes)
    np.testing.assert_array_equal(replay.t, run.t)
    np.testing.assert_array_equal(replay.x, run.x)

    S0 = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])  # p = (e, g, h0)
    sens = radau_sensitivities(run, Derivatives(BouncingBall([e, g]), run, 1), S0)
    # event-time derivatives against the closed form
    p = [e, g, h0]
    for k, event in enumerate(bounces):
        analytic = [complex_step(lambda *a, k=k: ball_closed_form(*a, t_end)[2][k], p, i) for i in range(3)]
        np.testing.assert_allclose(sens.T[event.node], analytic, rtol=RADAU_BALL_CLOSED_FORM,
                                   atol=RADAU_BALL_CLOSED_FORM)
    assert not np.any(sens.T[~run.moving])

    D = sensitivities_at_stops(run, sens)[1]
    x = values_at_stops(run)[1]
    for m, t in enumerate(stops):
        closed = ball_closed_form(e, g, h0, t)
        np.testing.assert_allclose(x[m], [closed[0], closed[1]], rtol=0, atol=RADAU_BALL_CLOSED_FORM)
        for i in range(3):
            hv = [complex_step(lambda *a, t=t, j=j: ball_closed_form(*a, t)[j], p, i) for j in range(2)]
            np.testing.assert_allclose(D[m, :, i], hv, rtol=RADAU_BALL_CLOSED_FORM, atol=RADAU_BALL_CLOSED_FORM)

    fd = frozen_fd(lambda pp: BouncingBall(pp[:2]), [e, g], np.array([h0, 0.0]), run, t_end, stops,
                   state_parameters=(0,))
    for column in range(3):
        assert relative_error(D[..., column], fd[..., column]) <= FROZEN_FD


# --------------------------------------------------------------------------- time and step events


def test_time_and_step_events():
    p, x0, t_end = np.array([1.5, 2.0, 0.3, 0.7]), np.array([1.0, 0.0]), 1.0
    stops = np.linspace(0.0, t_end, 11)
    system = SwitchedDecay(p)
    run = integrate_radau(system, x0, 0.0, t_end, stops=stops, rtol=1e-10, atol=1e-10)
    kinds = [(event.kind, event.t) for event in run.events]
    assert [kind for kind, _ in kinds] == ["step", "time"]
    assert kinds[1][1] == 0.5 and kinds[0][1] >= 0.25
    assert system.calls == [(t, kind) for kind, t in kinds]
    assert not np.any(run.moving)
    time_event = run.events[1]
    assert time_event.x_plus[1] == time_event.x_minus[1] + p[2]
    # the stop at 0.5 is the time-event node: left and right values differ by the jump
    left, right = values_at_stops(run)
    m = int(np.flatnonzero(stops == 0.5)[0])
    assert right[m, 1] - left[m, 1] == pytest.approx(p[2], rel=EXACT)

    replay = integrate_radau(SwitchedDecay(p), x0, 0.0, t_end, stops=stops, rtol=1e-10, atol=1e-10,
                             nodes=run.replay_nodes)
    np.testing.assert_array_equal(replay.t, run.t)
    np.testing.assert_array_equal(replay.x, run.x)

    sens = radau_sensitivities(run, Derivatives(SwitchedDecay(p), run), np.zeros((2, 4)))
    assert not np.any(sens.T)
    D_left, D_right = sensitivities_at_stops(run, sens)
    assert D_right[m, 1, 2] - D_left[m, 1, 2] == pytest.approx(1.0, rel=EXACT)
    fd = frozen_fd(SwitchedDecay, p, x0, run, t_end, stops, atol=1e-10)
    for column in range(4):
        assert relative_error(D_right[..., column], fd[..., column]) <= FROZEN_FD


# --------------------------------------------------------------------------- degenerate systems and errors


def test_zero_state_system_walks_its_stops_and_locates_a_clock_event():
    stops = np.linspace(0.0, 1.0, 11)
    system = Clock(np.array([0.55]))
    run = integrate_radau(system, np.zeros(0), 0.0, 1.0, stops=stops)
    np.testing.assert_array_equal(run.t[run.stop_nodes], stops)
    assert run.x.shape == (run.t.size, 0) and run.n_rhs == 0
    assert len(run.events) == 1 and run.events[0].kind == "state"
    assert abs(run.events[0].t - 0.55) <= 8 * np.finfo(float).eps
    assert run.t.size == 12 and system.completed == 11
    sens = radau_sensitivities(run, Derivatives(Clock(np.array([0.55])), run), np.zeros((0, 1)))
    assert sens.T[run.events[0].node, 0] == pytest.approx(1.0, rel=EXACT)


def test_non_finite_rhs_raises_naming_the_time():
    with pytest.raises(ConvergenceError, match=r"t = 0\.5.*raise --rtol/--atol"):
        integrate_radau(NonFinite([1.0]), np.ones(1), 0.0, 1.0)


def test_non_finite_initial_state_raises():
    with pytest.raises(ConvergenceError, match=r"t = 0 s"):
        integrate_radau(Dahlquist([1.0]), np.array([np.nan]), 0.0, 1.0)


class StiffTracking(AnalyticSystem):
    """x' = -lam (x - cos t) - sin t (solution cos t), lam = 1e6: stiff, so explicit steps would be ~1e-6."""

    n_states = 1

    def f(self, t, x, mode):
        return -self.p[0] * (x - math.cos(t)) - math.sin(t)

    def fx(self, t, x, mode):
        return np.array([[-self.p[0]]])


def test_stiff_problem_takes_large_steps():
    stops = np.linspace(0.0, 2.0, 5)
    run = integrate_radau(StiffTracking([1e6]), np.ones(1), 0.0, 2.0, stops=stops, rtol=1e-8, atol=1e-10)
    assert np.max(np.abs(values_at_stops(run)[1][:, 0] - np.cos(stops))) <= GLOBAL_ERROR_AT_1E_8
    assert len(run.steps) < 200
    assert run.n_newton <= 5 * (len(run.steps) + run.n_rejected)


def test_max_step_vector_atol_and_step_guard():
    run = integrate_radau(VanDerPol([1.0]), np.array([2.0, 0.0]), 0.0, 1.0, rtol=1e-6, atol=np.array([1e-8, 1e-6]),
                          max_step=0.05)
    assert np.max(np.diff(run.t)) <= 0.05 * (1.0 + EXACT) and run.t[-1] == 1.0  # t1 - t0 rounds
    with pytest.raises(ConvergenceError, match="max_steps = 5"):
        integrate_radau(VanDerPol([1.0]), np.array([2.0, 0.0]), 0.0, 1.0, max_step=0.05, max_steps=5)


class IntegrateAndFire(AnalyticSystem):
    """x' = a + b sin(w t) - k x; indicator z = x - thr - 0.2 t; event: x -> r.  p = (a, b, w, k, thr, r).

    Exercises the df/dt terms of Phi_t0, Phi_t1 (time-dependent rhs), z_t and z_p, and a jump
    that depends on p only (Delta_x = 0)."""

    n_states = 1
    n_indicators = 1

    def f(self, t, x, mode):
        a, b, w, k = self.p[:4]
        return np.array([a + b * math.sin(w * t) - k * x[0]])

    def fx(self, t, x, mode):
        return np.array([[-self.p[3]]])

    def fp(self, t, x, mode):
        w = self.p[2]
        return np.array([[1.0, math.sin(w * t), self.p[1] * t * math.cos(w * t), -x[0], 0.0, 0.0]])

    def ft(self, t, x, mode):
        b, w = self.p[1], self.p[2]
        return np.array([b * w * math.cos(w * t)])

    def z(self, t, x):
        return np.array([x[0] - self.p[4] - 0.2 * t])

    def z_derivatives(self, t, x):
        return np.array([-0.2]), np.array([[1.0]]), np.array([[0.0, 0.0, 0.0, 0.0, -1.0, 0.0]])

    def jump(self, t, x, kind):
        return np.array([self.p[5]])

    def jump_derivatives(self, t, x, kind):
        return np.zeros(1), np.zeros((1, 1)), np.array([[0.0, 0.0, 0.0, 0.0, 0.0, 1.0]])


def test_state_events_of_a_time_dependent_system():
    p, x0, t_end = np.array([2.0, 1.0, 3.0, 0.5, 1.0, 0.1]), np.zeros(1), 3.0
    stops = np.linspace(0.0, t_end, 13)
    run = integrate_radau(IntegrateAndFire(p), x0, 0.0, t_end, stops=stops, rtol=1e-8, atol=1e-10)
    assert len(run.events) == 4
    # rejected steps right after events: replay_nodes then returns to the cut step's end
    replay = integrate_radau(IntegrateAndFire(p), x0, 0.0, t_end, stops=stops, rtol=1e-8, atol=1e-10,
                             nodes=run.replay_nodes)
    np.testing.assert_array_equal(replay.t, run.t)
    np.testing.assert_array_equal(replay.x, run.x)
    for event in run.events:  # each event node lies on the indicator's root to round-off
        assert abs(event.x_minus[0] - p[4] - 0.2 * event.t) <= EXACT
    sens = radau_sensitivities(run, Derivatives(IntegrateAndFire(p), run), np.zeros((1, 6)))
    assert np.all(sens.T[[event.node for event in run.events]][:, [0, 4]] != 0.0)
    D = sensitivities_at_stops(run, sens)[1]
    fd = frozen_fd(IntegrateAndFire, p, x0, run, t_end, stops, rtol=1e-8, atol=1e-10)
    for column in range(6):
        assert relative_error(D[..., column], fd[..., column]) <= FROZEN_FD


def test_an_event_not_located_within_the_iteration_limit_is_an_error(monkeypatch):
    """The node of a state event must be the root that its time derivative differentiates: a
    search that runs out of iterations before the bracket closes stops the run, naming the
    bracket, instead of taking a point short of the root."""
    import fmi_adjoint.integrate.radau as radau

    monkeypatch.setattr(radau, "_EVENT_MAX_ITERATIONS", 2)
    with pytest.raises(ConvergenceError, match=r"state event between t = 0\.4.* was not located in 2 iterations"):
        integrate_radau(BouncingBall([0.8, 9.81]), np.array([1.0, 0.0]), 0.0, 1.0, rtol=1e-10, atol=1e-12)


def test_accumulating_state_events_are_an_error_naming_the_time():
    """A ball with e = 0.55 comes to rest at t* = sqrt(2 h0/g) (1 + e)/(1 - e) = 1.5552 s after
    infinitely many bounces; the run stops there with one error instead of taking tiny steps
    and spurious events until max_steps (it used to take minutes)."""
    e, g, h0 = 0.55, 9.81, 1.0
    rest = math.sqrt(2.0 * h0 / g) * (1.0 + e) / (1.0 - e)
    with pytest.raises(ConvergenceError, match=r"state events accumulate at t = 1\.555\d* s .*Zeno") as info:
        integrate_radau(BouncingBall([e, g]), np.array([h0, 0.0]), 0.0, 3.0, rtol=1e-8, atol=1e-10)
    at = float(str(info.value).split("t = ")[1].split(" s")[0])
    assert abs(at - rest) <= ZENO_TIME * rest
