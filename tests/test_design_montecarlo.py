"""Monte-Carlo check of the predicted standard errors (:mod:`fmi_adjoint.design.montecarlo`).

Model: the bundled single_mass, the undamped oscillator ``m x'' = -c x + u`` (``m = 1``, ``c = 1``,
``T = 2 pi``), here with the step 0.01 (629 samples), input ``u`` on 9 knots in ``[-1, 1]``, parameter ``c``,
output ``x`` measured with ``sigma = 0.05``.  Two inputs:

* weak: the constant ``u = 0.2`` (``x = 0.2 (1 - cos t)``);
* strong: a bang-bang-like polygon, ``+0.9`` on the first two knots and ``-0.9`` after
  (close to the single-switch optimum of the dissertation's Sec. 5.3.2).

Predicted standard errors of ``c``: 5.09e-3 and 9.76e-4 (ratio 5.2); relative to ``c``
small enough (0.5 %) for the linearization behind the Cramér-Rao bound to hold.

Statistical accuracy, with ``R`` successful fits of independent normal noise:

* an empirical standard deviation has the relative standard error ``1/sqrt(2 (R - 1))``
  (4.1 % at ``R = 300``); check (a) allows :data:`STD_SIGMAS` = 4 of them (16 %, inside the
  issue's 20 %).  The ratio of two such estimates from independent experiments has the
  relative standard error ``1/sqrt(R - 1)`` (5.8 %), so the issue's 20 % for the ratio (b) is
  3.5 of them; the common random numbers (the same noise for both inputs) make the ratio
  sharper still;
* the mean has the standard error ``std / sqrt(R)``; check (c) allows 4 of them.

Measured (seed 0, R = 300): empirical/predicted 0.979 (weak) and 0.988 (strong), ratio of
spreads 5.17 against 5.22 predicted, means within 0.7 standard errors of the truth; 4
simulations per fit, 1.5 to 3 s per input depending on the load.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from fmi_adjoint.design import DesignProblem, DesignSpec
from fmi_adjoint.design.montecarlo import monte_carlo, monte_carlo_record
from fmi_adjoint.errors import ModelError
from fmi_adjoint.examples import example_path
from fmi_adjoint.model_file import load_model
from tolerances import EXACT

#: Noisy re-identifications per input (the issue asks for at least 50).
RUNS = 300
#: Standard errors of an empirical standard deviation allowed between it and the prediction.
STD_SIGMAS = 4.0
#: Standard errors of the mean allowed between the mean estimate and the truth.
MEAN_SIGMAS = 4.0
#: The issue's tolerance on the ratio of spreads between two inputs.
RATIO_TOLERANCE = 0.20

KNOTS = 9

def _spec(**changes) -> DesignSpec:
    return DesignSpec(input="u", params=("c",), knots=KNOTS, bounds=(-1.0, 1.0), noise={"x": 0.05}, step=0.01,
                      **changes)


@pytest.fixture(scope="module")
def model():
    """The bundled single_mass (Sec. 5.3.2), run here with the step 0.01."""
    return load_model(example_path("single_mass"))


@pytest.fixture(scope="module")
def problem(model) -> DesignProblem:
    return DesignProblem.build(_spec(), model)


def _z(problem: DesignProblem, knots: np.ndarray) -> np.ndarray:
    lo, hi = problem.spec.bounds
    return problem.spec.bound_map.inverse(np.asarray(knots, dtype=float), lo, hi)


INPUTS = {
    "weak": np.full(KNOTS, 0.2),
    "strong": np.array([0.9, 0.9] + [-0.9] * (KNOTS - 2)),
}


@pytest.fixture(scope="module")
def results(problem):
    return {name: monte_carlo(problem, _z(problem, knots), RUNS, seed=0) for name, knots in INPUTS.items()}


@pytest.mark.parametrize("name", list(INPUTS))
def test_empirical_std_matches_cramer_rao(results, name):
    """(a) The spread of the estimates is the Cramér-Rao bound, within 4 standard errors of an std."""
    result = results[name]
    assert result.failed == 0
    assert result.estimates.shape == (RUNS, 1)
    tolerance = STD_SIGMAS * result.std_relative_error
    assert tolerance < RATIO_TOLERANCE  # R resolves the std more finely than the 20 %
    assert abs(result.std_ratio[0] - 1.0) <= tolerance, result.describe()


def test_ratio_of_spreads_is_the_predicted_ratio(results):
    """(b) The strong input's gain in precision is the predicted one, within the issue's 20 %."""
    weak, strong = results["weak"], results["strong"]
    predicted = weak.predicted[0] / strong.predicted[0]
    empirical = weak.std[0] / strong.std[0]
    assert predicted > 3.0  # the two inputs really differ, so the ratio says something
    assert abs(empirical / predicted - 1.0) <= RATIO_TOLERANCE, (empirical, predicted)


@pytest.mark.parametrize("name", list(INPUTS))
def test_mean_is_unbiased(results, name):
    """(c) The mean estimate is the truth within 4 standard errors of the mean."""
    result = results[name]
    assert result.truth[0] == 1.0
    assert abs(result.mean[0] - result.truth[0]) <= MEAN_SIGMAS * result.standard_error_of_mean[0], result.describe()


def test_predicted_std_is_the_problems_cramer_rao_bound(problem, results):
    """The prediction is the design problem's own bound at the same input (no second formula)."""
    M, _, _ = problem.fisher(_z(problem, INPUTS["strong"]))
    np.testing.assert_array_equal(results["strong"].predicted, problem.standard_errors(M))


def test_same_seed_same_noise(problem):
    """Common random numbers: the seed fixes the draws; another seed gives other estimates."""
    z = _z(problem, INPUTS["weak"])
    first, again, other = (monte_carlo(problem, z, 5, seed=s) for s in (7, 7, 8))
    np.testing.assert_array_equal(first.estimates, again.estimates)
    assert not np.array_equal(first.estimates, other.estimates)


def test_record_is_json(results):
    result = results["strong"]
    record = json.loads(json.dumps(monte_carlo_record(result)))
    entry = record["parameters"]["c"]
    assert record["runs"] == RUNS and record["failed"] == 0
    assert entry["std"] == float(result.std[0]) and entry["predicted_std"] == float(result.predicted[0])
    assert len(entry["estimates"]) == RUNS
    assert record["std_relative_error"] == pytest.approx(1 / math.sqrt(2 * (RUNS - 1)), rel=EXACT)


def test_integral_weights_are_refused(model):
    """With trapezoidal weights M is not the information of independent samples."""
    problem = DesignProblem.build(_spec(integral=True), model)
    with pytest.raises(ModelError, match="integral=False"):
        monte_carlo(problem, problem.start(), 50)


@pytest.mark.parametrize("runs", [1, 2.5, True])
def test_bad_number_of_runs_is_refused(problem, runs):
    with pytest.raises(ModelError, match="runs"):
        monte_carlo(problem, problem.start(), runs)


def test_wrong_number_of_design_variables_is_refused(problem):
    with pytest.raises(ModelError, match="9 knots"):
        monte_carlo(problem, np.zeros(KNOTS - 1), 50)
