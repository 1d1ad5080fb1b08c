"""POD costs (Nishi et al., eq. (5)): modes of the measured data, exact identities, and
adjoint gradients against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

from fmi_adjoint import Experiment, IdentificationProblem, LeastSquaresCost, compile_model, load_model, simulate
from fmi_adjoint.costs import PODCost, proper_orthogonal_modes
from fmi_adjoint.errors import DataError
from fmi_adjoint.examples import example_path
from tolerances import ADJOINT_VS_FORWARD, EXACT, GRADIENT_VS_FD

# Positions and velocities: a multiplier channel carries index-3 round-off (~1e-9 of its
# signal) that finite differences of the cost cannot resolve at the 1e-6 tier.
CHANNELS = ("xs", "crank_speed")


@pytest.fixture(scope="module")
def crank():
    model = compile_model(load_model(example_path("slider_crank")))
    truth = simulate(model, model.parameter_vector({"r": 0.11, "m_r": 0.6}), t_end=1.0)
    idx = [model.output_index(c) for c in CHANNELS]
    return model, truth.t[::4], truth.outputs()[::4][:, idx]


def test_modes_are_orthonormal_and_reconstruct_the_data(crank):
    _, _, data = crank
    modes, ratios = proper_orthogonal_modes(data)
    assert np.allclose(modes.T @ modes, np.eye(len(CHANNELS)), rtol=0, atol=EXACT)
    assert ratios.sum() == pytest.approx(1.0, rel=EXACT)
    assert np.all(np.diff(ratios) <= 0)
    assert np.allclose((data @ modes) @ modes.T, data, rtol=0, atol=EXACT * np.abs(data).max())


def test_all_modes_give_the_time_domain_least_squares_cost(crank):
    _, times, data = crank
    Y = data * 1.01 + 0.002
    pod = PODCost(times, data, CHANNELS, modes=(1, 2)).evaluate(Y, np.zeros(0))
    ls = LeastSquaresCost(times, data, CHANNELS).evaluate(Y, np.zeros(0))
    assert pod.J == pytest.approx(ls.J, rel=EXACT)
    assert np.allclose(pod.dJ_dY, ls.dJ_dY, rtol=0, atol=EXACT * np.abs(ls.dJ_dY).max())


@pytest.mark.parametrize("modes", [(1,), (2,), (1, 2)])
def test_adjoint_gradient_of_pod_costs_matches_finite_differences(crank, modes):
    model, times, data = crank
    cost = PODCost(times, data, CHANNELS, modes=modes)
    problem = IdentificationProblem([Experiment(model, cost, t_end=1.0)], ["r", "m_r", "c_s"])
    adjoint = problem.evaluate(problem.start, "adjoint")
    forward = problem.evaluate(problem.start, "forward")
    fd = problem.finite_differences(problem.start)
    assert adjoint.J > 0
    assert np.allclose(adjoint.gradient, forward.gradient, rtol=ADJOINT_VS_FORWARD, atol=0)
    assert np.allclose(adjoint.gradient, fd, rtol=GRADIENT_VS_FD, atol=0)


def test_invalid_modes_are_named(crank):
    _, times, data = crank
    with pytest.raises(DataError, match="from 1 to 2"):
        PODCost(times, data, CHANNELS, modes=(3,))
    with pytest.raises(DataError, match="distinct"):
        PODCost(times, data, CHANNELS, modes=(1, 1))
