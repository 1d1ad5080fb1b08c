"""Cost and adjoint gradient of the sdof oscillator against the closed forms of
Oberpeilsteiner (2018), Sec. 3.2.1, eq. (3.14).

m x'' = -c x - 2 d x' + sin(t), x(0) = x'(0) = 0, m = 1, c = 1, d = 0.5, T = 6 pi,
data xbar = 0, J = int_0^T x^2 / 2 dt.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from fmi_adjoint.costs import LeastSquaresCost
from tolerances import CLOSED_FORM, EXACT, PRINTED_8_DECIMALS

GOLDEN = "sdof_closed_form"


def closed_forms() -> dict[str, float]:
    """The printed expressions of eq. (3.14), evaluated with 30 digits."""
    with mpmath.workdps(30):
        pi, s3, exp, sin, cos = mpmath.pi, mpmath.sqrt(3), mpmath.exp, mpmath.sin, mpmath.cos
        J = (
            9 * pi
            - 3
            - exp(-6 * pi) * (2 + cos(6 * s3 * pi))
            + 2 * exp(-3 * pi) * (s3 * sin(3 * s3 * pi) + 3 * cos(3 * s3 * pi))
        ) / 6
        J_c = (
            exp(-6 * pi)
            * (
                16
                - 27 * exp(6 * pi)
                + 3 * s3 * (3 + 8 * pi) * sin(6 * s3 * pi)
                + 11 * cos(6 * s3 * pi)
                + 8 * exp(3 * pi) * (9 * pi * cos(3 * s3 * pi) - s3 * (4 + 9 * pi) * sin(3 * s3 * pi))
            )
            / 36
        )
        J_d = (
            exp(-6 * pi)
            * (
                14
                + exp(6 * pi) * (36 - 54 * pi)
                + 36 * pi
                - 3 * s3 * (1 + 2 * pi) * sin(6 * s3 * pi)
                + 2 * (2 + 9 * pi) * cos(6 * s3 * pi)
                + 2 * exp(3 * pi) * (-5 * s3 * sin(3 * s3 * pi) - 9 * (3 + 4 * pi) * cos(3 * s3 * pi))
            )
            / 9
        )
        return {"J": float(J), "dJ_dc": float(J_c), "dJ_dd": float(J_d)}


def test_golden_values_are_the_printed_closed_forms(golden):
    data = golden(GOLDEN)
    assert "Oberpeilsteiner" in data["source"] and "(3.14)" in data["source"]
    evaluated = closed_forms()
    for key, value in data["values"].items():
        assert abs(value - evaluated[key]) <= PRINTED_8_DECIMALS, (key, value, evaluated[key])


def test_closed_form_J_is_the_integral_of_the_closed_form_solution():
    """Cross-check of the printed J with the solution x(t) of the same problem (m=1, c=1, d=0.5)."""
    s3 = mpmath.sqrt(3)

    def x(t):
        return mpmath.exp(-t / 2) * (mpmath.sin(s3 * t / 2) / s3 + mpmath.cos(s3 * t / 2)) - mpmath.cos(t)

    with mpmath.workdps(25):
        J = mpmath.quad(lambda t: x(t) ** 2 / 2, mpmath.linspace(0, 6 * mpmath.pi, 13))
    assert float(J) == pytest.approx(closed_forms()["J"], rel=EXACT)


@pytest.fixture(scope="module")
def sdof_run(example_engine):
    """188 496 steps of the native engine (the default; tests/test_engines.py shows the
    Python reference engine computes the same run and sweeps to round-off)."""
    engine = example_engine("sdof")
    model = engine.compiled
    assert model.model.simulation.alpha == -0.05
    T = 6 * np.pi
    traj = engine.simulate(step=1e-4, t_end=T)
    times = np.append(np.arange(0.0, T, 1e-3), T)
    cost = LeastSquaresCost(times, np.zeros(times.size), ("x",))
    return engine, traj, cost


def test_cost_and_adjoint_gradient_match_the_closed_forms(sdof_run, golden):
    engine, traj, cost = sdof_run
    model = engine.compiled
    ref = golden(GOLDEN)["values"]
    result = engine.adjoint_gradient(traj, cost)
    assert result.method == "adjoint"
    assert result.gradient.shape == (model.n_p,)
    got = {
        "J": result.J,
        "dJ_dc": result.gradient[model.parameter_index("c")],
        "dJ_dd": result.gradient[model.parameter_index("d")],
    }
    for key, value in got.items():
        assert value == pytest.approx(ref[key], rel=CLOSED_FORM), (key, value, ref[key])


def test_forward_sensitivities_match_the_closed_forms(sdof_run, golden):
    engine, traj, cost = sdof_run
    model = engine.compiled
    ref = golden(GOLDEN)["values"]
    params = np.array([model.parameter_index("c"), model.parameter_index("d")])
    result = engine.sensitivity_gradient(traj, cost, params)
    assert result.J == pytest.approx(ref["J"], rel=CLOSED_FORM)
    assert result.gradient[params[0]] == pytest.approx(ref["dJ_dc"], rel=CLOSED_FORM)
    assert result.gradient[params[1]] == pytest.approx(ref["dJ_dd"], rel=CLOSED_FORM)
    assert result.gradient[model.parameter_index("m")] == 0.0  # not requested
