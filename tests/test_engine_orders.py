"""Engine-order amplitudes over a run-up (Sec. 4.4.2.3): exact amplitudes of steady orders,
the window placement t_k(n), and adjoint gradients against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

from fmi_adjoint import (
    Coordinate,
    Experiment,
    ExpressionLoad,
    IdentificationProblem,
    LinearSpringDamper,
    Model,
    Output,
    Parameter,
    SimulationSettings,
    compile_model,
)
from fmi_adjoint.costs import EngineOrderCost, RunUp
from fmi_adjoint.errors import DataError
from tolerances import ADJOINT_VS_FORWARD, GRADIENT_VS_FD

EXACT_SPECTRUM = 1e-10
RUNUP = RunUp(n0=1000.0, n1=3000.0, t0=0.0, t1=2.0)


def test_window_centre_follows_the_run_up():
    assert RUNUP.time_at(np.array([1000.0, 2000.0, 3000.0])) == pytest.approx([0.0, 1.0, 2.0])


@pytest.mark.parametrize("order", [2, 4, 6])
def test_steady_order_amplitude_is_exact_and_other_orders_vanish(order):
    # A steady tone at order `order` of 1800 rpm: amplitude 0.7 at that order, 0 at others.
    rpm = 1800.0
    n = rpm / 60
    t = np.linspace(0.0, 2.0, 200001)
    y = 0.7 * np.cos(2 * np.pi * order * n * t + 0.3)
    for probe, expected in ((order, 0.7), (order + 2, 0.0)):
        cost = EngineOrderCost(t, "y", probe, [rpm], [0.0], RUNUP)
        assert cost.amplitudes(y[:, None])[0] == pytest.approx(expected, abs=EXACT_SPECTRUM)


def test_speeds_outside_the_samples_are_refused():
    t = np.linspace(0.0, 2.0, 2001)
    with pytest.raises(DataError, match="leaves the samples"):
        EngineOrderCost(t, "y", 6, [1000.0], [0.1], RUNUP)


def shaft_model() -> Model:
    """A torsional oscillator driven by an order-2 torque over a 1000 -> 3000 rpm run-up."""
    return Model(
        name="shaft",
        coordinates=(Coordinate("phi", kind="rotational", mass="J"),),
        parameters=(Parameter("J", 0.02), Parameter("c", 2.0e3), Parameter("d", 1.5), Parameter("T0", 10.0)),
        forces=(
            LinearSpringDamper("shaft", coordinates=("phi",), stiffness="c", damping="d", free_length=0.0),
            # speed n(t) = 1000 + 1000 t rpm: crank angle 2 pi (n0 t + (n1-n0)/(2(t1-t0)) t^2)/60
            ExpressionLoad("firing", coordinate="phi",
                           expression="T0*sin(2*2*pi*(1000*t + 500*t**2)/60)"),
        ),
        outputs=(Output("phi", "phi"),),
        simulation=SimulationSettings(t_end=2.0, step=5e-4, alpha=-0.05),
    )


@pytest.mark.parametrize("kind", ["amplitude", "power"])
def test_adjoint_gradient_of_the_order_cost_matches_finite_differences(kind):
    model = compile_model(shaft_model())
    t = np.arange(0.0, 2.0 + 1e-12, 5e-4)
    speeds = np.linspace(1300.0, 2700.0, 8)
    cost = EngineOrderCost(t, "phi", 2, speeds, np.full(speeds.size, 2e-3), RUNUP, kind=kind)
    problem = IdentificationProblem([Experiment(model, cost)], ["c", "d", "J"])
    adjoint = problem.evaluate(problem.start, "adjoint")
    forward = problem.evaluate(problem.start, "forward")
    fd = problem.finite_differences(problem.start)
    assert adjoint.J > 0
    assert np.allclose(adjoint.gradient, forward.gradient, rtol=ADJOINT_VS_FORWARD, atol=0)
    assert np.allclose(adjoint.gradient, fd, rtol=GRADIENT_VS_FD, atol=0)
