"""Fourier-coefficient costs (Oberpeilsteiner 2018, Sec. 4.2): exact coefficients of known
signals, the Hann window and its amplitude correction, and adjoint gradients of every kind
against finite differences on two examples."""

from __future__ import annotations

import numpy as np
import pytest

from fmi_adjoint import Experiment, IdentificationProblem, compile_model, load_model, simulate
from fmi_adjoint.costs import FourierCoefficients, FourierCost
from fmi_adjoint.errors import DataError
from fmi_adjoint.examples import example_path
from tolerances import ADJOINT_VS_FORWARD, FEW_ULPS, GRADIENT_VS_FD, ORDER

EXACT_SPECTRUM = 1e-10
T = 2.0
OMEGA = 2 * np.pi / T


def signal(t, a, b, a0=0.0):
    """a0/2 + sum_k a_k cos(k w t) + b_k sin(k w t), k = 1.."""
    y = np.full_like(t, a0 / 2)
    for k, (ak, bk) in enumerate(zip(a, b), start=1):
        y += ak * np.cos(k * OMEGA * t) + bk * np.sin(k * OMEGA * t)
    return y


A_TRUE = np.array([2.0, 0.0, -1.5, 0.4, 0.0, 0.7])
B_TRUE = np.array([0.0, 3.0, 0.25, 0.0, -2.0, 0.1])


def test_rectangular_window_gives_the_coefficients_of_a_sum_of_sines():
    t = np.linspace(0.0, T, 2001)
    coef = FourierCoefficients(t, OMEGA * np.arange(0, 7))
    A, B = coef(signal(t, A_TRUE, B_TRUE, a0=1.2))
    assert np.allclose(A, np.r_[1.2, A_TRUE], rtol=0, atol=EXACT_SPECTRUM)
    assert np.allclose(B, np.r_[0.0, B_TRUE], rtol=0, atol=EXACT_SPECTRUM)


@pytest.mark.parametrize("periods", [2, 3, 5])
def test_hann_window_with_amplitude_correction_recovers_the_coefficients(periods):
    # Sec. 4.2.1, eq. (4.10): over n >= 2 periods the Hann window halves each coefficient;
    # the amplitude correction g_c = 2 restores it.
    t = np.linspace(0.0, periods * T, 4000 * periods + 1)
    coef = FourierCoefficients(t, OMEGA * np.arange(1, 7), window="hann")
    A, B = coef(signal(t, A_TRUE, B_TRUE, a0=1.2))
    assert np.allclose(A, A_TRUE, rtol=0, atol=EXACT_SPECTRUM)
    assert np.allclose(B, B_TRUE, rtol=0, atol=EXACT_SPECTRUM)


def test_hann_window_over_one_period_leaks_as_eq_4_9():
    # Eq. (4.9): a~_k = (-a_{k-1} + 2 a_k - a_{k+1}) / 4, times the correction 2.
    t = np.linspace(0.0, T, 4001)
    coef = FourierCoefficients(t, OMEGA * np.arange(2, 6), window="hann")
    A, _ = coef(signal(t, A_TRUE, B_TRUE))
    a = np.r_[0.0, A_TRUE, 0.0]  # a_0 = 0 here, a_7 = 0
    expected = [2 * (-a[k - 1] + 2 * a[k] - a[k + 1]) / 4 for k in range(2, 6)]
    assert np.allclose(A, expected, rtol=0, atol=EXACT_SPECTRUM)


def test_any_frequency_equals_the_integral_over_a_window():
    t = np.linspace(0.0, 3.0, 30001)
    y = np.exp(-t) * np.sin(7.3 * t)
    omegas = np.array([1.1, 7.3, 12.0])
    coef = FourierCoefficients(t, omegas, window="hann", t_lower=0.5, t_upper=2.5)
    A, B = coef(y)
    inside = (t >= 0.5) & (t <= 2.5)
    w = 1 - np.cos(2 * np.pi * (t[inside] - 0.5) / 2.0)
    for k, om in enumerate(omegas):
        ref_a = 2 / 2.0 * np.trapezoid(y[inside] * w * np.cos(om * t[inside]), t[inside])
        ref_b = 2 / 2.0 * np.trapezoid(y[inside] * w * np.sin(om * t[inside]), t[inside])
        assert A[k] == pytest.approx(ref_a, abs=FEW_ULPS)
        assert B[k] == pytest.approx(ref_b, abs=FEW_ULPS)


def test_invalid_inputs_are_named():
    t = np.linspace(0, 1, 11)
    with pytest.raises(DataError, match="window"):
        FourierCoefficients(t, [1.0], window="blackman")
    with pytest.raises(DataError, match="fewer than three samples"):
        FourierCoefficients(t, [1.0], t_lower=0.0, t_upper=0.1)
    coef = FourierCoefficients(t, [1.0, 2.0])
    with pytest.raises(DataError, match="measured_A and measured_B"):
        FourierCost(coef, "x", measured_amplitude=[1.0, 2.0], kind="complex")
    with pytest.raises(DataError, match="one per frequency"):
        FourierCost(coef, "x", measured_amplitude=[1.0])
    with pytest.raises(DataError, match="no frequency"):
        FourierCost.band(coef, 10.0, 20.0, channel="x", measured_amplitude=[1.0, 2.0])


CASES = {
    "sdof": dict(channel="x", t_end=18.0, step=1e-2, true={"c": 1.4, "d": 0.35}, params=["c", "d", "m"],
                 omegas=np.linspace(0.5, 2.0, 7), window="hann"),
    "engine_mount": dict(channel="a1", t_end=0.3, step=1e-4, true={"c_E1": 1.23e5, "d_E": 5.0},
                         params=["c_E1", "c_E2", "d_E", "d_H2"], omegas=2 * np.pi * np.arange(5, 60, 5.0),
                         window="rectangular"),
}


def _problem(name, kind, band=False):
    case = CASES[name]
    model = compile_model(load_model(example_path(name)))
    truth = simulate(model, model.parameter_vector(case["true"]), t_end=case["t_end"], step=case["step"])
    times = truth.t[::2]
    y = truth.outputs()[::2, model.output_index(case["channel"])]
    coef = FourierCoefficients(times, case["omegas"], window=case["window"])
    A, B = coef(y)
    kwargs = dict(channel=case["channel"], measured_A=A, measured_B=B, kind=kind)
    if band:
        omegas = case["omegas"]
        cost = FourierCost.band(coef, omegas[1], omegas[-3], **kwargs)
    else:
        cost = FourierCost(coef, **kwargs)
    exp = Experiment(model, cost, t_end=case["t_end"], step=case["step"])
    return IdentificationProblem([exp], case["params"])


@pytest.mark.parametrize("kind", ["power", "amplitude", "complex"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_adjoint_gradient_of_every_fourier_cost_matches_finite_differences(name, kind):
    problem = _problem(name, kind, band=(kind == "power"))
    adjoint = problem.evaluate(problem.start, "adjoint")
    forward = problem.evaluate(problem.start, "forward")
    fd = problem.finite_differences(problem.start)
    assert adjoint.J > 0
    assert np.allclose(adjoint.gradient, forward.gradient, rtol=ADJOINT_VS_FORWARD, atol=0)
    assert np.allclose(adjoint.gradient, fd, rtol=GRADIENT_VS_FD, atol=0)


@pytest.mark.parametrize("name", sorted(CASES))
def test_taylor_remainder_of_the_amplitude_cost_is_second_order(name):
    problem = _problem(name, "amplitude")
    x = problem.start
    ev = problem.evaluate(x, "adjoint")
    direction = np.random.default_rng(4).uniform(-1, 1, x.size) * x
    eps = np.array([1e-1, 5e-2, 2.5e-2, 1.25e-2]) * 1e-2
    remainder = [abs(problem.cost(x + e * direction) - ev.J - e * ev.gradient @ direction) for e in eps]
    slopes = np.diff(np.log(remainder)) / np.diff(np.log(eps))
    assert np.all(np.abs(slopes - 2.0) < ORDER), slopes
