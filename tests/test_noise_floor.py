"""LeastSquaresCost.noise_floor: the cost that measurement noise alone gives at a perfect fit,
estimated from the data (second differences / Gasser-Sroka-Jennen-Steinmetz pseudo-residuals)."""

from __future__ import annotations

import numpy as np
import pytest
from tolerances import EXACT

from fmi_adjoint.costs.least_squares import LeastSquaresCost
from fmi_adjoint.errors import DataError
from tolerances import NOISE_FLOOR_ESTIMATE

RNG_SEED = 2024

STATISTICAL = NOISE_FLOOR_ESTIMATE

N_SAMPLES = 200_001
SIGMA = np.array([0.01, 0.2, 0.05])
WEIGHTS = np.array([2.0, 0.5, 1.0])
SCALES = np.array([0.1, 3.0, 1.0])


def expected_noise_cost(times, sigma, weights, scales) -> float:
    """1/2 sum_i eta_i sum_c w_c sigma_c^2 / s_c^2, with sum_i eta_i = t_N - t_0 (trapezoidal rule)."""
    return 0.5 * (times[-1] - times[0]) * float(np.sum(weights * sigma**2 / scales**2))


def smooth_signal(times) -> np.ndarray:
    return np.column_stack([np.sin(np.pi * times), 3.0 * np.cos(0.7 * times) + 1.0, 0.2 * times**2])


def test_white_noise_on_a_smooth_signal():
    rng = np.random.default_rng(RNG_SEED)
    times = np.linspace(0.0, 10.0, N_SAMPLES)
    clean = smooth_signal(times)
    data = clean + SIGMA * rng.standard_normal(clean.shape)
    cost = LeastSquaresCost(times, data, ("x", "y", "z"), weights=WEIGHTS, scales=SCALES)
    expected = expected_noise_cost(times, SIGMA, WEIGHTS, SCALES)
    assert cost.noise_floor() == pytest.approx(expected, rel=STATISTICAL)
    np.testing.assert_allclose(cost.noise_variances(), SIGMA**2, rtol=STATISTICAL)
    # The normalisation is that of J itself: the cost of the noise-free signal is the realized
    # noise cost, whose expectation noise_floor estimates.
    realized = cost.evaluate(clean, np.zeros(0)).J
    assert cost.noise_floor() == pytest.approx(realized, rel=STATISTICAL)


def test_white_noise_on_unevenly_spaced_samples():
    rng = np.random.default_rng(RNG_SEED + 1)
    # Short and long steps in turn (ratio about 4): the pseudo-residuals' normalisation
    # 1 + a^2 + b^2 is then about 1.68, 12 % away from the even-grid 1.5.
    spacing = np.where(np.arange(N_SAMPLES) % 2, 0.2e-4, 0.8e-4) * rng.uniform(0.9, 1.1, N_SAMPLES)
    times = np.cumsum(spacing)
    clean = smooth_signal(times)
    data = clean + SIGMA * rng.standard_normal(clean.shape)
    cost = LeastSquaresCost(times, data, ("x", "y", "z"), weights=WEIGHTS, scales=SCALES)
    assert cost.noise_floor() == pytest.approx(expected_noise_cost(times, SIGMA, WEIGHTS, SCALES), rel=STATISTICAL)
    assert cost.noise_floor() == pytest.approx(cost.evaluate(clean, np.zeros(0)).J, rel=STATISTICAL)


def test_noise_free_straight_lines_give_zero():
    # Dyadic times, values and spacing ratios h_-/(h_- + h_+): every product and sum is exact,
    # so the floor is exactly zero.
    even = np.arange(0, 64) * 0.25
    uneven = np.cumsum(np.array([1, 3, 1, 3, 5, 3, 1, 1, 7, 1, 1, 3]) * 0.125)
    for times in (even, uneven):
        data = np.column_stack([1.5 + 0.5 * times, -3.0 * times, np.full(times.size, 7.0)])
        cost = LeastSquaresCost(times, data, ("a", "b", "c"), weights=[1.0, 2.0, 0.5], scales=[1.0, 0.5, 4.0])
        assert cost.noise_floor() == 0.0
        assert np.all(cost.noise_variances() == 0.0)
    # Any line on any grid: zero up to round-off of the signal's magnitude.
    rng = np.random.default_rng(RNG_SEED)
    times = np.sort(rng.uniform(0.0, 3.0, 500))
    data = 0.3 + np.pi * times
    cost = LeastSquaresCost(times, data, ("x",))
    assert cost.noise_floor() <= 0.5 * (times[-1] - times[0]) * (EXACT * np.abs(data).max()) ** 2


def test_weights_and_scales_against_an_independent_computation():
    rng = np.random.default_rng(RNG_SEED)
    times = np.linspace(1.0, 4.0, 301)
    data = rng.standard_normal((times.size, 3)) * [1.0, 10.0, 0.01]
    weights, scales = np.array([0.3, 2.0, 5.0]), np.array([2.0, 7.0, 0.003])
    cost = LeastSquaresCost(times, data, ("a", "b", "c"), weights=weights, scales=scales)
    variances = np.mean(np.diff(data, n=2, axis=0) ** 2, axis=0) / 6  # the textbook formula, evenly spaced
    np.testing.assert_allclose(cost.noise_variances(), variances, rtol=EXACT)
    expected = sum(0.5 * 3.0 * w * v / s**2 for w, v, s in zip(weights, variances, scales))
    assert cost.noise_floor() == pytest.approx(expected, rel=EXACT)
    unweighted = LeastSquaresCost(times, data, ("a", "b", "c"))
    assert unweighted.noise_floor() == pytest.approx(0.5 * 3.0 * variances.sum(), rel=EXACT)


def test_curvature_raises_the_estimate_by_its_second_differences():
    # y = t^2 on an even grid: every second difference is 2 h^2, so sigma^2 = (2 h^2)^2 / 6.
    h = 0.125
    times = np.arange(0, 41) * h
    cost = LeastSquaresCost(times, times**2, ("x",))
    assert cost.noise_variances()[0] == pytest.approx((2 * h**2) ** 2 / 6, rel=EXACT)
    assert cost.noise_floor() == pytest.approx(0.5 * times[-1] * (2 * h**2) ** 2 / 6, rel=EXACT)


def test_two_samples_are_too_few():
    """No estimate from two samples: the variances are refused, the floor is unknown (None), so
    an identification on two samples ends without the noise warning instead of failing."""
    cost = LeastSquaresCost(np.array([0.0, 1.0]), np.array([1.0, 2.0]), ("x",))
    with pytest.raises(DataError, match="at least three samples"):
        cost.noise_variances()
    assert cost.noise_floor() is None


@pytest.mark.parametrize("quantum", [0.02, 0.05, 0.1])
def test_quantized_data_keep_their_noise_estimate(quantum):
    """ADC-quantized slow signal: more than half the second differences are exactly 0, so a
    median-based jump test would call every quantizer step a jump and the floor would be 0
    (then every fit's cost would be 'far above the noise floor').  No term is excluded: the
    estimate is the plain mean of the pseudo-residual terms, computed independently here."""
    rng = np.random.default_rng(5)
    t = np.linspace(0.0, 20.0, 2001)
    y = quantum * np.round((np.sin(t) + 1e-3 * rng.standard_normal(t.size)) / quantum)
    cost = LeastSquaresCost(t, y[:, None], ("y",))
    e = y[1:-1] - 0.5 * (y[:-2] + y[2:])
    expected = np.mean(e**2 / 1.5)
    assert expected > 0
    assert cost.noise_variances()[0] == pytest.approx(expected, rel=EXACT)
    assert cost.jump_times().size == 0
