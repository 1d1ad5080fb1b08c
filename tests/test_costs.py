"""Costs of sampled outputs (fmi_adjoint.costs): trapezoidal weights, the sampler and its
transpose, and the weighted least-squares cost."""

from __future__ import annotations

import numpy as np
import pytest

from fmi_adjoint.costs import LeastSquaresCost, Sampler, trapezoidal_weights
from fmi_adjoint.errors import DataError
from tolerances import CENTRAL_DIFFERENCE_OF_QUADRATIC, EXACT

RNG_SEED = 2024


def uneven_times(rng, n=40, t0=0.3, t1=2.7):
    inner = np.sort(rng.uniform(t0, t1, n - 2))
    return np.concatenate(([t0], inner, [t1]))


# -- trapezoidal weights -----------------------------------------------------------------------


def test_trapezoidal_weights_on_an_even_grid():
    eta = trapezoidal_weights(np.linspace(0.0, 1.0, 11))
    np.testing.assert_allclose(eta, [0.05] + [0.1] * 9 + [0.05], rtol=EXACT)


@pytest.mark.parametrize("coefficients", [(1.0, 0.0), (0.0, 1.0), (-2.5, 3.75)])
def test_trapezoidal_weights_integrate_degree_one_exactly(coefficients):
    rng = np.random.default_rng(RNG_SEED)
    times = uneven_times(rng)
    c0, c1 = coefficients
    integral = c0 * (times[-1] - times[0]) + c1 * (times[-1] ** 2 - times[0] ** 2) / 2
    quadrature = trapezoidal_weights(times) @ (c0 + c1 * times)
    assert quadrature == pytest.approx(integral, rel=EXACT, abs=EXACT)


def test_trapezoidal_weights_are_not_exact_for_degree_two():
    """The check above can fail: a quadratic is integrated with the known O(h^2) error."""
    times = np.linspace(0.0, 1.0, 11)
    quadrature = trapezoidal_weights(times) @ times**2
    assert quadrature - 1.0 / 3.0 == pytest.approx(0.1**2 / 6, rel=EXACT)  # (b-a) h^2 f''/12


def test_trapezoidal_weights_need_two_times():
    with pytest.raises(DataError, match="two sample times"):
        trapezoidal_weights(np.array([1.0]))


# -- sampler -----------------------------------------------------------------------------------


def test_sampler_reproduces_linear_functions_and_grid_values():
    grid = np.array([0.0, 0.1, 0.25, 0.3, 0.7, 1.0])
    sampler = Sampler.from_grid(grid, np.array([0.0, 0.05, 0.25, 0.31, 0.999, 1.0]))
    values = np.column_stack((2.0 - 3.0 * grid, 0.5 * grid))
    expected = np.column_stack((2.0 - 3.0 * sampler_times(sampler, grid), 0.5 * sampler_times(sampler, grid)))
    np.testing.assert_allclose(sampler.sample(values), expected, rtol=EXACT, atol=EXACT)
    on_grid = Sampler.from_grid(grid, grid)
    np.testing.assert_allclose(on_grid.sample(values), values, rtol=EXACT, atol=EXACT)


def sampler_times(sampler, grid):
    return (1 - sampler.theta) * grid[sampler.k] + sampler.theta * grid[sampler.k + 1]


def test_sampler_matches_numpy_interp():
    rng = np.random.default_rng(RNG_SEED)
    grid = np.cumsum(rng.uniform(0.01, 0.1, 200))
    times = np.sort(rng.uniform(grid[0], grid[-1], 77))
    values = rng.standard_normal(grid.size)
    sampler = Sampler.from_grid(grid, times)
    np.testing.assert_allclose(sampler.sample(values), np.interp(times, grid, values), rtol=EXACT, atol=EXACT)


def test_scatter_is_the_transpose_of_sample():
    rng = np.random.default_rng(RNG_SEED)
    grid = np.cumsum(rng.uniform(0.01, 0.1, 150))
    times = np.sort(rng.uniform(grid[0], grid[-1], 90))
    times[:3] = grid[0], grid[10], grid[-1]  # samples on grid points and at both ends
    sampler = Sampler.from_grid(grid, times)
    for shape in [(), (3,), (2, 4)]:
        y = rng.standard_normal((grid.size,) + shape)
        c = rng.standard_normal((times.size,) + shape)
        lhs = np.sum(sampler.scatter(c) * y)
        rhs = np.sum(c * sampler.sample(y))
        assert lhs == pytest.approx(rhs, rel=EXACT, abs=EXACT)
        assert sampler.scatter(c).shape == y.shape


def test_scatter_matrix_is_the_transpose_of_the_sample_matrix():
    grid = np.array([0.0, 0.2, 0.5, 1.0])
    sampler = Sampler.from_grid(grid, np.array([0.1, 0.5, 0.75, 1.0]))
    S = sampler.sample(np.eye(grid.size))  # (n_samples, n_grid)
    T = sampler.scatter(np.eye(4))  # (n_grid, n_samples)
    np.testing.assert_allclose(T, S.T, rtol=EXACT, atol=EXACT)
    np.testing.assert_allclose(S.sum(axis=1), 1.0, rtol=EXACT)


def test_sampler_rejects_times_outside_the_grid():
    grid = np.linspace(0.0, 1.0, 11)
    with pytest.raises(DataError, match="simulate longer"):
        Sampler.from_grid(grid, np.array([0.5, 1.5]))
    with pytest.raises(DataError, match="simulate longer"):
        Sampler.from_grid(grid, np.array([-0.5, 0.5]))


# -- least-squares cost ------------------------------------------------------------------------


def make_cost(**kwargs):
    rng = np.random.default_rng(RNG_SEED)
    times = uneven_times(rng, n=25)
    data = rng.standard_normal((times.size, 3))
    return LeastSquaresCost(times, data, ("a", "b", "c"), **kwargs), rng


def test_cost_is_half_the_weighted_trapezoidal_sum():
    weights = np.array([1.0, 0.5, 2.0])
    scales = np.array([3.0, 0.2, 1.0])
    cost, rng = make_cost(weights=weights, scales=scales)
    Y = rng.standard_normal(cost.data.shape)
    eta = trapezoidal_weights(cost.sample_times)
    expected = 0.0
    for i in range(Y.shape[0]):
        for ch in range(3):
            expected += 0.5 * eta[i] * weights[ch] / scales[ch] ** 2 * (Y[i, ch] - cost.data[i, ch]) ** 2
    value = cost.evaluate(Y, np.zeros(2))
    assert value.J == pytest.approx(expected, rel=EXACT)
    assert value.dJ_dp is None


def test_cost_derivative_by_finite_differences_and_formula():
    cost, rng = make_cost(weights=[1.0, 0.5, 2.0], scales=[3.0, 0.2, 1.0])
    Y = rng.standard_normal(cost.data.shape)
    value = cost.evaluate(Y, np.zeros(0))
    eta = trapezoidal_weights(cost.sample_times)
    formula = eta[:, None] * (np.array([1.0, 0.5, 2.0]) / np.array([3.0, 0.2, 1.0]) ** 2) * (Y - cost.data)
    np.testing.assert_allclose(value.dJ_dY, formula, rtol=EXACT, atol=EXACT)
    # J is quadratic in Y: central differences are exact up to round-off.
    direction = rng.standard_normal(Y.shape)
    h = 1e-3
    fd = (cost.evaluate(Y + h * direction, None).J - cost.evaluate(Y - h * direction, None).J) / (2 * h)
    assert fd == pytest.approx(np.sum(value.dJ_dY * direction), rel=CENTRAL_DIFFERENCE_OF_QUADRATIC)


def test_residuals_square_to_the_cost():
    cost, rng = make_cost(weights=[1.0, 0.0, 4.0], scales=[2.0, 1.0, 0.5])
    Y = rng.standard_normal(cost.data.shape)
    r, factors = cost.residuals(Y)
    assert r.shape == (Y.size,)
    assert factors.shape == Y.shape
    assert 0.5 * r @ r == pytest.approx(cost.evaluate(Y, None).J, rel=EXACT)
    np.testing.assert_allclose(r, (factors * (Y - cost.data)).ravel(), rtol=EXACT)


def test_weights_and_scales_act_per_channel():
    base, rng = make_cost()
    Y = rng.standard_normal(base.data.shape)

    def channel_costs(cost):
        out = []
        for ch in range(3):
            Yc = cost.data.copy()
            Yc[:, ch] = Y[:, ch]
            out.append(cost.evaluate(Yc, None).J)
        return np.array(out)

    plain = channel_costs(base)
    assert np.all(plain > 0)
    assert base.evaluate(Y, None).J == pytest.approx(plain.sum(), rel=EXACT)
    weighted, _ = make_cost(weights=[2.0, 0.0, 0.25])
    np.testing.assert_allclose(channel_costs(weighted), plain * [2.0, 0.0, 0.25], rtol=EXACT)
    scaled, _ = make_cost(scales=[10.0, 1.0, 0.1])
    np.testing.assert_allclose(channel_costs(scaled), plain / np.array([10.0, 1.0, 0.1]) ** 2, rtol=EXACT)
    # Scaling data and outputs of a channel by its scale leaves the cost unchanged.
    s = np.array([10.0, 1.0, 0.1])
    rescaled = LeastSquaresCost(base.sample_times, base.data * s, base.channels, scales=s)
    assert rescaled.evaluate(Y * s, None).J == pytest.approx(base.evaluate(Y, None).J, rel=EXACT)


def test_defaults_are_unit_weights_and_scales():
    cost, _ = make_cost()
    np.testing.assert_array_equal(cost.weights, np.ones(3))
    np.testing.assert_array_equal(cost.scales, np.ones(3))
    assert cost.channels == ("a", "b", "c")


def test_one_dimensional_data_is_one_channel():
    times = np.linspace(0.0, 1.0, 5)
    cost = LeastSquaresCost(times, np.zeros(5), ("x",))
    assert cost.data.shape == (5, 1)
    # J = 1/2 int_0^1 1 dt = 1/2 for y = 1 (the trapezoidal rule is exact on constants).
    assert cost.evaluate(np.ones((5, 1)), None).J == pytest.approx(0.5, rel=EXACT)


def test_a_time_repeated_once_is_an_event_and_weighs_nothing_extra():
    """FMU data repeat a time stamp at an event (left and right limit): accepted, and the
    trapezoidal weights integrate as if the two rows were one jump of zero width."""
    times = np.array([0.0, 0.25, 0.5, 0.5, 0.75, 1.0])
    y = np.array([0.0, 0.0, 0.0, 1.0, 1.0, 1.0])[:, None]
    cost = LeastSquaresCost(times, np.zeros((6, 1)), ("x",))
    # J = 1/2 int_0^1 y^2 dt with a unit step at t = 0.5: exactly 1/4 (no interval straddles it).
    assert cost.evaluate(y, None).J == pytest.approx(0.25, rel=EXACT)


@pytest.mark.parametrize(
    "change, fragment",
    [
        ({"data": "nan"}, "NaN"),
        ({"data": "inf"}, "NaN or infinite"),
        ({"times": "nan"}, "NaN"),
        ({"times": "unsorted"}, "not increasing"),
        ({"times": "triplicate"}, "a time may repeat once"),
        ({"data": "wrong_rows"}, "shape"),
        ({"data": "wrong_columns"}, "shape"),
        ({"weights": [1.0, -1.0, 1.0]}, "weights"),
        ({"weights": [1.0, np.nan, 1.0]}, "weights"),
        ({"scales": [1.0, 0.0, 1.0]}, "scales"),
        ({"scales": [1.0, -2.0, 1.0]}, "scales"),
        ({"scales": [1.0, np.inf, 1.0]}, "scales"),
    ],
)
def test_invalid_cost_definitions_raise_data_error(change, fragment):
    times = np.linspace(0.0, 1.0, 6)
    data = np.zeros((6, 3))
    kwargs = {}
    if change.get("data") == "nan":
        data[2, 1] = np.nan
    elif change.get("data") == "inf":
        data[3, 0] = np.inf
    elif change.get("data") == "wrong_rows":
        data = np.zeros((5, 3))
    elif change.get("data") == "wrong_columns":
        data = np.zeros((6, 2))
    if change.get("times") == "nan":
        times[4] = np.nan
    elif change.get("times") == "unsorted":
        times[[2, 3]] = times[[3, 2]]
    elif change.get("times") == "triplicate":
        times[3] = times[4] = times[2]
    for key in ("weights", "scales"):
        if key in change:
            kwargs[key] = change[key]
    with pytest.raises(DataError) as info:
        LeastSquaresCost(times, data, ("a", "b", "c"), **kwargs)
    assert fragment in str(info.value)
    assert isinstance(info.value, ValueError)


def test_single_sample_is_rejected():
    with pytest.raises(DataError):
        LeastSquaresCost(np.array([0.0]), np.zeros((1, 1)), ("x",))


@pytest.mark.parametrize(
    "kwargs",
    [{"weights": [1.0, 2.0]}, {"scales": [1.0, 2.0, 3.0, 4.0]}],
    ids=["two_weights_for_three_channels", "four_scales_for_three_channels"],
)
def test_weights_and_scales_of_the_wrong_length_raise_data_error(kwargs):
    """One weight and one scale per channel (docstring: shape (n_channels,))."""
    times = np.linspace(0.0, 1.0, 6)
    with pytest.raises(DataError) as info:
        LeastSquaresCost(times, np.zeros((6, 3)), ("a", "b", "c"), **kwargs)
    assert ("weights" if "weights" in kwargs else "scales") in str(info.value)


def test_two_dimensional_sample_times_raise_data_error():
    """sample_times has shape (n_samples,); a column vector is a wrong shape."""
    times = np.linspace(0.0, 1.0, 6)[:, None]
    with pytest.raises(DataError):
        LeastSquaresCost(times, np.zeros((6, 1)), ("a",))


def test_sampler_rejects_an_unsorted_time_outside_the_grid():
    """Only the first and last sample times are checked against the grid; an unsorted
    array with a time beyond the simulation in the middle is silently clamped to t_end."""
    grid = np.linspace(0.0, 1.0, 11)
    with pytest.raises(DataError):
        Sampler.from_grid(grid, np.array([0.5, 2.0, 0.7]))
