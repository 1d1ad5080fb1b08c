"""The ``strut`` example: Vanpaemel et al., Sec. 5 (MacPherson strut, eq. (22), (23),
Table 1), reduced to one coordinate.

(a) the 13 identified parameters carry the start values and bounds of their Table 1;
(b) at those start values the adjoint gradient matches fourth-order finite differences
    (their Table 1 reached ratios 0.987 to 1.007; we require 1 % and the suite's much
    tighter GRADIENT_VS_FD tier) and forward sensitivities (ADJOINT_VS_FORWARD);
(c) a bounds-scaled identification on the noise-free data removes the cost and recovers
    the true values (L and y0 only through their sum, the only combination the
    one-coordinate model determines; see strut.toml).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fmi_adjoint import Experiment, IdentificationProblem, LeastSquaresCost, identify, load_model, simulate
from fmi_adjoint.examples import example_path
from fmi_adjoint.examples.strut_data import NAMES, OUTPUT, TRUE_VALUES, clean_measurement
from fmi_adjoint.forces.library.friction import PacejkaFriction
from tolerances import ADJOINT_VS_FORWARD, EXACT, GRADIENT_VS_FD

#: Table 1 of Vanpaemel et al.: parameter -> (initial value, lower bound, upper bound), SI.
TABLE_1 = {
    "k": (23500.0, 22000.0, 24000.0),
    "L": (0.343, 0.34, 0.35),
    "c_1": (2000.0, 500.0, 5000.0),
    "c_2": (3000.0, 500.0, 5000.0),
    "a_f1": (100.0, 0.0, 500.0),
    "b_f1": (50.0, 10.0, 2000.0),
    "c_f1": (1.2, 1.0, 1.9),
    "e_f1": (-10.0, -50.0, 1.0),
    "a_f2": (100.0, 0.0, 500.0),
    "b_f2": (50.0, 10.0, 2000.0),
    "c_f2": (1.2, 1.0, 1.9),
    "e_f2": (-10.0, -50.0, 1.0),
    "y0": (-0.21445, -0.22, -0.21),
}

#: Parameters of the model that are fixed (not identified, no bounds).
FIXED = {"m", "g", "F0", "F_dyn", "v_eps"}

#: Model parameter bound to each property of the pacejka_friction element.
FRICTION_BINDING = {
    "c1": "c_1", "c2": "c_2", "a_f1": "a_f1", "b_f1": "b_f1", "c_f1": "c_f1", "e_f1": "e_f1",
    "a_f2": "a_f2", "b_f2": "b_f2", "c_f2": "c_f2", "e_f2": "e_f2", "v_eps": "v_eps",
}

#: Ratio adjoint / finite differences: the agreement their Table 1 demonstrates (0.987-1.007).
PAPER_RATIO = 0.01

#: Cost reduction the identification on noise-free data must reach (fraction).
COST_REDUCTION = 0.999

#: Noise-free data: identified values equal the true ones to this relative accuracy (the
#: optimizer stops on a relative cost/step change of 1e-12; parameters follow to about its
#: square root), as in tests/test_identification.py.
RECOVERY = 1e-6


@pytest.fixture(scope="module")
def model(compiled_example):
    return compiled_example("strut")


@pytest.fixture(scope="module")
def problem(model):
    times, deflection = clean_measurement()
    experiment = Experiment(model, LeastSquaresCost(times, deflection, (OUTPUT,)), name="strut")
    return IdentificationProblem([experiment], NAMES)


@pytest.fixture(scope="module")
def gradients(problem):
    x0 = problem.start
    return {
        "adjoint": problem.evaluate(x0, "adjoint").gradient,
        "forward": problem.evaluate(x0, "forward").gradient,
        "fd": problem.finite_differences(x0, 1e-3, order=4),
    }


# -- (a) the model ---------------------------------------------------------------------------


def test_identified_parameters_have_the_start_values_and_bounds_of_table_1():
    definition = load_model(example_path("strut"))
    params = definition.all_parameters
    bounded = [p for p in params if math.isfinite(p.bounds[0]) or math.isfinite(p.bounds[1])]
    assert [p.name for p in bounded] == list(TABLE_1)
    for p in bounded:
        assert (p.value, *p.bounds) == TABLE_1[p.name], p.name
    # Everything else is a fixed, declared parameter: no property of an element was left
    # unbound (that would add an automatic '<element>_<property>' parameter).
    others = [p for p in params if p not in bounded]
    assert {p.name for p in others} == FIXED
    assert all(p.bounds == (-math.inf, math.inf) for p in others)
    assert NAMES == tuple(TABLE_1)


def test_friction_parameters_agree_with_the_element_declaration():
    # Two transcriptions of Table 1: the model file and the pacejka_friction element.
    definition = load_model(example_path("strut"))
    (element,) = [f for f in definition.forces if isinstance(f, PacejkaFriction)]
    for decl in PacejkaFriction.parameters:
        assert getattr(element, decl.name) == FRICTION_BINDING[decl.name]
        if decl.name == "v_eps":
            continue
        par = definition.parameter(FRICTION_BINDING[decl.name])
        assert (par.value, par.bounds) == (decl.default, decl.bounds), decl.name


def test_true_values_lie_inside_the_bounds():
    for name, (_, lo, hi) in TABLE_1.items():
        assert lo <= TRUE_VALUES[name] <= hi, name


def test_starts_at_static_equilibrium_and_outputs_the_offset_deflection(model):
    p = model.parameter_vector(TRUE_VALUES)
    traj = simulate(model, p)
    value = dict(zip(model.parameter_names, p))
    x0 = value["L"] - (value["F0"] - value["m"] * value["g"]) / value["k"]
    assert traj.q[0, 0] == pytest.approx(x0, rel=EXACT)
    assert traj.v[0, 0] == 0.0
    assert abs(traj.a[0, 0]) <= EXACT * value["F0"] / value["m"]
    Y = traj.outputs()
    deflection = Y[:, model.output_index("deflection")]
    np.testing.assert_allclose(deflection, -traj.q[:, 0] - value["y0"], rtol=0, atol=EXACT * value["L"])
    # The synthetic load strokes the strut at more than 0.2 m/s in rebound and in
    # compression, crossing v = 0 many times, so both friction branches are exercised.
    v = traj.v[:, 0]
    assert v.max() > 0.2 and v.min() < -0.2
    assert np.count_nonzero(np.diff(np.sign(v[1:])) != 0) >= 10


def test_clean_measurement_is_the_model_output_at_the_true_values(model, problem):
    times, deflection = clean_measurement()
    assert times[0] == 0.0 and times[-1] == pytest.approx(model.model.simulation.t_end, rel=EXACT)
    assert problem.cost(np.array([TRUE_VALUES[n] for n in NAMES])) == 0.0
    assert problem.cost(problem.start) > 0.0


# -- (b) gradients at the start values ---------------------------------------------------------


def test_adjoint_over_finite_differences_within_one_percent(gradients):
    ratio = gradients["adjoint"] / gradients["fd"]
    assert np.all(np.abs(ratio - 1) < PAPER_RATIO), dict(zip(NAMES, ratio))


def test_adjoint_matches_finite_differences_to_the_suite_tier(gradients):
    rel = np.abs(gradients["adjoint"] - gradients["fd"]) / np.abs(gradients["adjoint"])
    assert np.all(rel < GRADIENT_VS_FD), dict(zip(NAMES, rel))


def test_adjoint_matches_forward_sensitivities(gradients):
    rel = np.abs(gradients["adjoint"] - gradients["forward"]) / np.abs(gradients["adjoint"])
    assert np.all(rel < ADJOINT_VS_FORWARD), dict(zip(NAMES, rel))


def test_free_length_and_offset_enter_only_through_their_sum(gradients):
    # x - L does not depend on L (motion ratio 1, linear spring), so the deflection -x - y0
    # depends on L + y0 only and dJ/dL = dJ/dy0 exactly (up to round-off).
    g = gradients["adjoint"]
    i_L, i_y0 = NAMES.index("L"), NAMES.index("y0")
    assert g[i_L] == pytest.approx(g[i_y0], rel=EXACT)


# -- (c) identification -----------------------------------------------------------------------


@pytest.mark.slow
def test_identification_on_noise_free_data(problem):
    result = identify(problem, "least_squares", scaling="bounds", progress=None, statistics=False)
    assert result.cost_initial == pytest.approx(problem.cost(problem.start), rel=EXACT)
    assert result.cost <= (1 - COST_REDUCTION) * result.cost_initial
    assert np.all(result.parameters >= problem.lower) and np.all(result.parameters <= problem.upper)
    found = dict(zip(NAMES, result.parameters))
    for name in NAMES:
        if name in ("L", "y0"):
            continue
        assert found[name] == pytest.approx(TRUE_VALUES[name], rel=RECOVERY), name
    assert found["L"] + found["y0"] == pytest.approx(TRUE_VALUES["L"] + TRUE_VALUES["y0"], rel=RECOVERY)
