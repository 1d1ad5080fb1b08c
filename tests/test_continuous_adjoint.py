"""The continuous adjoint (Oberpeilsteiner 2018, Sec. 3.3.4) converges to the discrete adjoint.

Both gradients approximate the gradient of the same continuous cost
``J = int_0^T h(y, t) dt``: the discrete adjoint exactly differentiates the HHT solution and
the trapezoidal rule of J (second order in h: HHT is second order for constant mass
matrices, the trapezoidal rule is second order), the continuous adjoint solves the adjoint
DAE (3.45) with BDF-k (order k, eqs. (3.46)-(3.52)) on the HHT trajectory and integrates
(3.39) with the trapezoidal rule (order 2).  Their difference is therefore O(h^min(k, 2)):
first order for BDF-1, second order for BDF-2.  The tests measure the slope of a log-log
fit over four step sizes and check it against that prediction within ``ORDER``.

The data are given at every step time (a fixed function ybar(t) of time), so that all
step sizes discretize the same continuous cost.
"""

from __future__ import annotations

import numpy as np
import pytest

from fmi_adjoint.adjoint import adjoint_gradient
from fmi_adjoint.adjoint.continuous import (
    bdf_coefficients,
    consistent_end_conditions,
    continuous_adjoint,
    continuous_adjoint_gradient,
)
from fmi_adjoint.costs import AbstractCost, CostValue, LeastSquaresCost
from fmi_adjoint.errors import DataError
from fmi_adjoint.integrate import simulate
from tolerances import CLOSED_FORM, EXACT, ORDER

SDOF_STEPS = (0.01, 0.005, 0.0025, 0.00125)  # T = 6 pi of the closed form (3.14)
CRANK_STEPS = (0.005, 0.0025, 0.00125, 0.000625)
CRANK_T = 1.0


def fitted_order(steps, errors) -> float:
    return float(np.polyfit(np.log(steps), np.log(errors), 1)[0])


def crank_data(t: np.ndarray) -> np.ndarray:
    """Smooth targets for the slider position xs and the crank speed (a velocity output)."""
    return np.column_stack((0.39 + 0.005 * np.sin(3 * t), 1.5 + 0.5 * np.cos(2 * t)))


def scaled_difference(got: np.ndarray, want: np.ndarray, p: np.ndarray) -> float:
    """|p (got - want)| / |p want|: relative difference of the dimensionless sensitivities p_k dJ/dp_k."""
    return float(np.linalg.norm(p * (got - want)) / np.linalg.norm(p * want))


@pytest.fixture(scope="module")
def sdof_runs(compiled_example):
    """Per step: discrete adjoint, continuous adjoint with BDF-1 and BDF-2 (data xbar = 0)."""
    model = compiled_example("sdof")
    runs = []
    for h in SDOF_STEPS:
        traj = simulate(model, t_end=6 * np.pi, step=h)
        cost = LeastSquaresCost(traj.t, np.zeros((traj.t.size, 1)), ("x",))
        runs.append(
            (
                adjoint_gradient(traj, cost),
                continuous_adjoint_gradient(traj, cost, max_order=1),
                continuous_adjoint_gradient(traj, cost, max_order=2),
            )
        )
    return model, runs


@pytest.fixture(scope="module")
def crank_runs(compiled_example):
    """Slider-crank (index 3, M(q), parameters in forces, mass matrix, constraints and initial state)."""
    model = compiled_example("slider_crank")
    runs = []
    for h in CRANK_STEPS:
        traj = simulate(model, t_end=CRANK_T, step=h)
        cost = LeastSquaresCost(traj.t, crank_data(traj.t), ("xs", "crank_speed"))
        runs.append(
            (
                traj.p,
                adjoint_gradient(traj, cost),
                continuous_adjoint_gradient(traj, cost, max_order=1),
                continuous_adjoint_gradient(traj, cost, max_order=2),
            )
        )
    return model, runs


# --- the BDF formula and the end conditions -------------------------------------------


def test_bdf_coefficients_are_the_standard_ones_on_an_even_grid():
    # (3.46): alpha_i = gamma c_i; standard BDF coefficients for k = 1, 2, 3.
    gamma = 0.3
    for k, want in ((1, [1, -1]), (2, [1.5, -2, 0.5]), (3, [11 / 6, -3, 1.5, -1 / 3])):
        nodes = 2.0 - gamma * np.arange(k + 1)
        got = gamma * bdf_coefficients(nodes)
        assert np.allclose(got, want, rtol=EXACT, atol=EXACT)


def test_bdf_differentiates_polynomials_of_degree_k_exactly_on_uneven_nodes():
    nodes = np.array([1.0, 0.9, 0.75, 0.72])
    c = bdf_coefficients(nodes)
    for degree in range(4):
        exact = degree * nodes[0] ** (degree - 1) if degree else 0.0
        assert abs(c @ nodes**degree - exact) <= EXACT * np.abs(c) @ np.abs(nodes**degree)


def test_consistent_end_conditions_solve_eq_3_42():
    rng = np.random.default_rng(3)
    n, m = 5, 2
    L = rng.standard_normal((n, n))
    M = L @ L.T + n * np.eye(n)
    Cq = rng.standard_normal((m, n))
    CqV_q = rng.standard_normal((m, n))
    phi_q, phi_v = rng.standard_normal(n), rng.standard_normal(n)
    p, w, xi = consistent_end_conditions(M, Cq, phi_q, phi_v, CqV_q)
    assert np.allclose(p + CqV_q.T @ xi, -phi_q, rtol=0, atol=EXACT * 10)  # first row of (3.42)
    assert np.allclose(M @ w + Cq.T @ xi, -phi_v, rtol=0, atol=EXACT * 100)  # (3.41)
    assert np.allclose(Cq @ w, 0.0, rtol=0, atol=EXACT * 100)  # (3.34) at T
    with pytest.raises(NotImplementedError, match="CqV_q"):
        consistent_end_conditions(M, Cq, phi_q, phi_v)


# --- SDOF oscillator: closed form and order ---------------------------------------------


def test_sdof_continuous_adjoint_approaches_the_closed_form(sdof_runs, golden):
    model, runs = sdof_runs
    values = golden("sdof_closed_form")["values"]
    want = np.array([values["dJ_dc"], values["dJ_dd"]])
    cd = [model.parameter_index("c"), model.parameter_index("d")]
    errors = np.array([np.abs(bdf2.gradient[cd] - want) / np.abs(want) for _, _, bdf2 in runs])
    for column in range(2):
        order = fitted_order(SDOF_STEPS, errors[:, column])
        assert abs(order - 2.0) <= ORDER, f"errors {errors[:, column]}, order {order:.3f}"
    assert np.all(errors[-1] <= CLOSED_FORM), errors[-1]


def test_sdof_continuous_minus_discrete_has_the_bdf_order(sdof_runs):
    """O(h) with BDF-1, O(h^2) with BDF-2 (HHT and the trapezoidal rule are second order)."""
    model, runs = sdof_runs
    for k in (1, 2):
        for name in ("m", "c", "d"):  # m: mass matrix, c, d: forces
            j = model.parameter_index(name)
            errors = np.array([abs(r[k].gradient[j] - r[0].gradient[j]) / abs(r[0].gradient[j]) for r in runs])
            order = fitted_order(SDOF_STEPS, errors)
            assert abs(order - k) <= ORDER, f"BDF-{k}, {name}: differences {errors}, order {order:.3f}"


def test_sdof_adjoint_variables_solve_the_bdf2_equations(compiled_example):
    """(3.47)/(3.48) with k = 2 for m x'' = -c x - 2 d x' + sin t (c = 1, 2 d = 1, m = 1, xbar = 0):
    (3/2 p_n - 2 p_{n-1} + 1/2 p_{n-2}) / gamma = -x - w, same for w with right side p - w;
    end values zero (3.35)/(3.36) because J has no Mayer term."""
    model = compiled_example("sdof")
    h = 0.01
    traj = simulate(model, t_end=2.0, step=h)
    cost = LeastSquaresCost(traj.t, np.zeros((traj.t.size, 1)), ("x",))
    adj = continuous_adjoint(traj, cost)
    assert np.all(adj.p[-1] == 0) and np.all(adj.w[-1] == 0)
    p, w, x = adj.p[:, 0], adj.w[:, 0], traj.q[:, 0]
    # forward index i is tau_n, i + 1 is tau_{n-1}; BDF-2 from the second backward step on.
    i = np.arange(0, traj.n_steps - 1)
    bdf_p = (1.5 * p[i] - 2.0 * p[i + 1] + 0.5 * p[i + 2]) / h
    bdf_w = (1.5 * w[i] - 2.0 * w[i + 1] + 0.5 * w[i + 2]) / h
    scale = np.max(np.abs(p)) / h
    assert np.max(np.abs(bdf_p + x[i] + w[i])) <= EXACT * scale
    assert np.max(np.abs(bdf_w - p[i] + w[i])) <= EXACT * scale


# --- slider-crank: constraints, M(q), consistent end conditions ----------------------------


def test_slider_crank_continuous_minus_discrete_has_the_bdf_order(crank_runs):
    model, runs = crank_runs
    for k in (1, 2):
        errors = np.array([scaled_difference(r[k + 1].gradient, r[1].gradient, r[0]) for r in runs])
        order = fitted_order(CRANK_STEPS, errors)
        assert abs(order - k) <= ORDER, f"BDF-{k}: differences {errors}, order {order:.3f}"


def test_slider_crank_adjoint_satisfies_the_constraint(compiled_example):
    model = compiled_example("slider_crank")
    traj = simulate(model, t_end=0.5, step=0.005)
    cost = LeastSquaresCost(traj.t, crank_data(traj.t), ("xs", "crank_speed"))
    adj = continuous_adjoint(traj, cost)
    Cq = model.jacobian_terms(traj.q, traj.v, traj.a, traj.lam, traj.t, traj.p)[4]
    residual = np.einsum("kmn,kn->km", Cq, adj.w)  # (3.49)
    assert np.max(np.abs(residual)) <= EXACT * np.max(np.abs(Cq)) * np.max(np.abs(adj.w))
    assert np.all(np.isfinite(adj.mu))


# --- unsupported cases ---------------------------------------------------------------------


class SampledMaximum(AbstractCost):
    """A cost that is no integral over time: the largest sampled output."""

    def __init__(self, sample_times, channels):
        self.sample_times, self.channels = np.asarray(sample_times), tuple(channels)

    def evaluate(self, Y, p):
        dJ = np.zeros_like(Y)
        dJ.flat[np.argmax(Y)] = 1.0
        return CostValue(J=float(Y.max()), dJ_dY=dJ)


@pytest.fixture(scope="module")
def crank_short(compiled_example):
    model = compiled_example("slider_crank")
    return simulate(model, t_end=0.1, step=0.01)


@pytest.mark.parametrize("channel", ["slider_acc", "rod_force_x"])
def test_acceleration_and_multiplier_outputs_are_rejected(crank_short, channel):
    traj = crank_short
    cost = LeastSquaresCost(traj.t, np.zeros((traj.t.size, 1)), (channel,))
    with pytest.raises(NotImplementedError, match=f"{channel}.*accelerations or Lagrange multipliers"):
        continuous_adjoint_gradient(traj, cost)


def test_non_integral_costs_are_rejected(crank_short):
    traj = crank_short
    cost = SampledMaximum(traj.t, ("xs",))
    with pytest.raises(NotImplementedError, match="integral cost"):
        continuous_adjoint_gradient(traj, cost)


def test_data_must_span_the_simulation(crank_short):
    traj = crank_short
    times = traj.t[2:]
    cost = LeastSquaresCost(times, np.zeros((times.size, 1)), ("xs",))
    with pytest.raises(NotImplementedError, match="samples must start at t0"):
        continuous_adjoint_gradient(traj, cost)


@pytest.mark.parametrize("order", [0, 7, 1.5, True])
def test_bdf_order_must_be_1_to_6(crank_short, order):
    traj = crank_short
    cost = LeastSquaresCost(traj.t, np.zeros((traj.t.size, 1)), ("xs",))
    with pytest.raises(DataError, match="BDF order"):
        continuous_adjoint_gradient(traj, cost, max_order=order)


def test_unknown_channel_is_a_data_error(crank_short):
    traj = crank_short
    cost = LeastSquaresCost(traj.t, np.zeros((traj.t.size, 1)), ("nope",))
    with pytest.raises(DataError, match="nope"):
        continuous_adjoint_gradient(traj, cost)


def test_chunking_does_not_change_the_result(compiled_example, monkeypatch):
    import fmi_adjoint.adjoint.continuous as continuous

    model = compiled_example("slider_crank")
    traj = simulate(model, t_end=0.5, step=0.005)
    cost = LeastSquaresCost(traj.t, crank_data(traj.t), ("xs", "crank_speed"))
    whole = continuous_adjoint(traj, cost)
    monkeypatch.setattr(continuous, "chunk_width", lambda traj: 7)
    pieces = continuous_adjoint(traj, cost)
    scale = np.max(np.abs(whole.gradient))
    assert np.max(np.abs(pieces.gradient - whole.gradient)) <= EXACT * scale
    assert np.array_equal(np.isnan(pieces.mu), np.isnan(whole.mu))
