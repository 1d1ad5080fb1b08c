"""Sensor models as identifiable cost parameters (issue 26, part 6): a channel's delay, gain
and bias, ``yhat(t) = gain * y(t - delay) + bias``, named ``<channel>.delay`` etc.

The delay is differentiated through the output interpolation (the slope of the interpolant
that was evaluated), so the adjoint gradient equals central differences of the same discrete
cost; a delay of 3.7 ms, a gain of 1.02 and a bias of 0.05 put into synthetic data are
recovered within their standard errors.
"""

from __future__ import annotations

import numpy as np
import pytest

from fmi_adjoint import Experiment, IdentificationProblem, LeastSquaresCost, compile_model, identify, load_model
from fmi_adjoint.costs import SensorCost, SensorModel
from fmi_adjoint.errors import IdentificationError
from fmi_adjoint.examples import example_path

from tolerances import ADJOINT_VS_FORWARD, EXACT, GRADIENT_VS_FD, WITHIN_STD_ERRORS

T_END, STEP = 10.0, 1e-3
NAMES = ["c", "d", "x.delay", "x.gain", "x.bias"]
#: c, d of sdof and the sensor: 3.7 ms late (between two steps of 1 ms: the cost is smooth in
#: the delay there), 2 % gain, bias 0.05 m.
TRUE = np.array([2.0, 0.3, 0.0037, 1.02, 0.05])
NOISE = 0.002


@pytest.fixture(scope="module")
def sdof():
    return compile_model(load_model(example_path("sdof")))


@pytest.fixture(scope="module")
def problem(sdof):
    """Data of a sensor with the true delay, gain and bias (the model's response on its own
    step grid, read through the same interpolation) plus white noise, every 10 ms."""
    probe = Experiment(sdof, LeastSquaresCost(np.linspace(0, T_END, 3), np.zeros(3), ("x",)), t_end=T_END, step=STEP)
    traj = probe.simulate(probe.parameters(("c", "d"), TRUE[:2]))
    times = np.arange(0.0, T_END, 0.01)
    x = traj.outputs()[:, 0]
    data = TRUE[3] * np.interp(times - TRUE[2], traj.t, x, left=x[0]) + TRUE[4]
    data = data + NOISE * np.random.default_rng(1).standard_normal(times.size)
    exp = Experiment(sdof, LeastSquaresCost(times, data, ("x",)), t_end=T_END, step=STEP)
    return IdentificationProblem([exp], NAMES, start={"c": 1.8, "d": 0.35})


def test_sensor_parameters_start_at_an_ideal_sensor_within_default_bounds(problem):
    assert problem.sensors == {"x.delay": ("x", "delay"), "x.gain": ("x", "gain"), "x.bias": ("x", "bias")}
    assert problem.start[2:].tolist() == [0.0, 1.0, 0.0]
    assert problem.lower[2] < 0 < problem.upper[2] and problem.lower[3] < 1 < problem.upper[3]
    assert np.isinf(problem.lower[4]) and np.isinf(problem.upper[4])


@pytest.mark.parametrize("point", [TRUE, np.array([1.9, 0.33, 0.0023, 0.97, -0.02])])
def test_adjoint_equals_central_differences_for_the_sensor_parameters(problem, point):
    """The adjoint gradient (model parameters through the sweep with the transformed output
    derivative, sensor parameters from the cost) against fourth-order central differences of
    the same cost, at delays between step times.  Fails if the delay's derivative uses another
    slope than the interpolant's (e.g. the output's exact derivative at t - tau) or if the gain
    is left out of dJ/dY."""
    adjoint = problem.evaluate(point, "adjoint").gradient
    fd = problem.finite_differences(point)
    assert np.all(np.abs(adjoint - fd) <= GRADIENT_VS_FD * np.abs(fd)), (adjoint, fd)
    forward = problem.evaluate(point, "forward").gradient
    assert np.all(np.abs(adjoint - forward) <= ADJOINT_VS_FORWARD * np.abs(forward)), (adjoint, forward)
    with pytest.raises(IdentificationError, match="continuous"):
        problem.evaluate(point, "continuous")


def test_the_residual_jacobian_equals_the_gradient(problem):
    """J_r^T r is the gradient (the Gauss-Newton path uses J_r; EXACT up to the adjoint's
    round-off, compared at the gradient tier)."""
    point = np.array([1.9, 0.33, 0.0023, 0.97, -0.02])
    r, Jr = problem.residuals(point)
    gradient = problem.evaluate(point, "adjoint").gradient
    assert np.all(np.abs(Jr.T @ r - gradient) <= GRADIENT_VS_FD * np.abs(gradient))


def test_delay_gain_and_bias_are_recovered_within_their_standard_errors(problem):
    """Measured: every parameter within 1.8 standard errors of its true value (delay 3.50 ms
    +- 0.39 ms, gain 1.0189 +- 0.0006, bias 0.04991 +- 0.00007)."""
    result = identify(problem, "least_squares", progress=None)
    errors = np.abs(np.asarray(result.parameters) - TRUE) / np.asarray(result.std_errors, dtype=float)
    assert np.all(errors <= WITHIN_STD_ERRORS), errors


def test_an_ideal_sensor_is_the_plain_cost(problem, sdof):
    """No delay, unit gain, no bias on the step grid: the sensor cost equals the least-squares
    cost of the outputs at the sample times (EXACT)."""
    exp = problem.experiments[0]
    cost = exp.cost
    assert isinstance(cost, SensorCost)
    traj = exp.simulate(exp.parameters(("c", "d"), TRUE[:2]))
    Y = traj.outputs()[:, :1]
    inner = cost.inner
    plain = inner.evaluate(np.column_stack([np.interp(inner.sample_times, traj.t, Y[:, 0])]), traj.p).J
    ideal = cost.with_sensors((SensorModel(),)).evaluate(Y, traj.p).J
    assert abs(ideal - plain) <= EXACT * plain


def test_sensor_parameters_need_a_time_domain_least_squares_cost(sdof):
    from fmi_adjoint.costs import PODCost

    times = np.linspace(0, 1, 20)
    pod = PODCost(times, np.column_stack([np.sin(times)]), ("x",), modes=(1,))
    with pytest.raises(IdentificationError, match="least-squares cost"):
        IdentificationProblem([Experiment(sdof, pod, t_end=1.0)], ["c", "x.delay"])
