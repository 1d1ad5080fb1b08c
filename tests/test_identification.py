"""Identification at the API level: recovering parameters, the bundled measurement,
parameter scaling and the standard-error statistics."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from fmi_adjoint import (
    Experiment,
    IdentificationProblem,
    LeastSquaresCost,
    ParameterScaling,
    compile_model,
    identify,
    load_model,
    parse_model,
    read_csv,
    simulate,
)
from fmi_adjoint.errors import IdentificationError, ModelError
from fmi_adjoint.examples import EXAMPLES_DIR, example_path
from fmi_adjoint.examples.engine_mount_data import (
    AMPLITUDES,
    CSV_NAME,
    CSV_NAMES,
    NOISE_FRACTION,
    SAMPLE_EVERY,
    TRUE_VALUES,
    clean_measurement,
)

from tolerances import EXACT, NOISE_FREE_COST_DROP

#: Noise-free data, started from the paper's initial values: the identified values must
#: equal the true ones to this relative accuracy (the optimizer's tolerance is 1e-12 on
#: the cost decrease; the parameters are determined to about sqrt of that).
RECOVERY = 1e-6

#: Identified values from noisy data lie within this many standard errors of the truth.
STD_ERRORS = 3.0

#: least_squares on a linear-in-parameters problem against numpy's closed-form solution
#: (the trust-region method stops on a relative cost decrease of 1e-12).
LINEAR_FIT = 1e-8

#: Relative tolerance of the scaling derivative against central differences (step 1e-6).
SCALING_FD = 1e-7

ENGINE_NAMES = list(TRUE_VALUES)


@pytest.fixture(scope="module")
def engine_model():
    return compile_model(load_model(example_path("engine_mount")))


@pytest.fixture(scope="module")
def clean():
    return clean_measurement()


@pytest.fixture(scope="module")
def bundled():
    return read_csv(EXAMPLES_DIR / CSV_NAME)


def _engine_problem(model, times, a1, amplitude=100.0, start=None):
    exp = Experiment(model, LeastSquaresCost(times, a1, ("a1",)), values={"A": amplitude},
                     t_end=float(times[-1]), name=f"engine_A{amplitude:g}")
    return IdentificationProblem([exp], ENGINE_NAMES, start=start)


def _both_sweeps(model, start=None):
    experiments = []
    for amplitude in AMPLITUDES:
        data = read_csv(EXAMPLES_DIR / CSV_NAMES[amplitude])
        experiments += _engine_problem(model, data.times, data.column("a1"), amplitude).experiments
    return IdentificationProblem(experiments, ENGINE_NAMES, start=start)


@pytest.fixture(scope="module")
def noisy_result(engine_model, bundled):
    # The demo's procedure: the 100 N sweep from the paper's start values, then both sweeps.
    first = identify(_engine_problem(engine_model, bundled.times, bundled.column("a1")), "least_squares",
                     progress=None, statistics=False)
    return identify(_both_sweeps(engine_model, dict(zip(ENGINE_NAMES, first.parameters))), "least_squares",
                    progress=None)


# -- engine mount --------------------------------------------------------------------------


@pytest.mark.slow
def test_engine_mount_clean_data_recovers_true_values(engine_model, clean):
    times, a1 = clean
    problem = _engine_problem(engine_model, times, a1)
    start = dict(zip(ENGINE_NAMES, problem.start))
    assert start == {"c_E1": 7.38e4, "c_E2": 4.0e9, "d_E": 0.5, "d_H2": 1.2}  # the paper's initial values
    result = identify(problem, "least_squares", progress=None)
    assert result.success, result.message
    for k, name in enumerate(ENGINE_NAMES):
        true = TRUE_VALUES[name]
        assert abs(result.parameters[k] - true) <= RECOVERY * abs(true), (name, result.parameters[k], true)
    assert result.cost < NOISE_FREE_COST_DROP * result.cost_initial
    assert result.active_bounds == ()


@pytest.mark.slow
def test_engine_mount_noisy_data_within_std_errors(noisy_result):
    result = noisy_result
    assert result.success, result.message
    # A parameter on a bound has no meaningful standard error; none may end there.
    assert result.active_bounds == ()
    assert result.std_errors is not None and all(s is not None and s > 0 for s in result.std_errors)
    for k, name in enumerate(ENGINE_NAMES):
        error = abs(result.parameters[k] - TRUE_VALUES[name])
        assert error <= STD_ERRORS * result.std_errors[k], (name, result.parameters[k], result.std_errors[k])
    # Correlation matrix: symmetric, unit diagonal, entries in [-1, 1].
    corr = np.array(result.correlation)
    assert corr.shape == (4, 4)
    assert np.allclose(corr, corr.T, rtol=0, atol=EXACT)
    assert np.allclose(np.diag(corr), 1.0, rtol=0, atol=EXACT)
    assert np.all(np.abs(corr) <= 1.0 + EXACT)


@pytest.mark.slow
def test_engine_mount_noisy_result_is_consistent(noisy_result, engine_model, bundled):
    """Reported cost and history belong to the reported parameters."""
    result = noisy_result
    problem = _both_sweeps(engine_model, dict(zip(ENGINE_NAMES, result.initial)))
    assert result.cost == pytest.approx(problem.cost(result.parameters), rel=EXACT)
    assert result.cost_initial == pytest.approx(problem.cost(problem.start), rel=EXACT)
    assert result.cost < result.cost_initial
    assert min(result.cost_history) == pytest.approx(result.cost, rel=EXACT)
    assert result.simulations >= result.iterations >= 1
    assert set(result.active_bounds) <= set(ENGINE_NAMES)
    for k, name in enumerate(ENGINE_NAMES):
        on_bound = np.isclose(result.parameters[k], [problem.lower[k], problem.upper[k]], rtol=EXACT, atol=0).any()
        assert on_bound == (name in result.active_bounds), name
        assert problem.lower[k] <= result.parameters[k] <= problem.upper[k], name


@pytest.mark.parametrize("amplitude", AMPLITUDES)
def test_bundled_measurement_is_clean_signal_plus_one_percent_noise(amplitude):
    """The bundled CSV files are what engine_mount_data.py says they are."""
    times, a1 = clean_measurement(amplitude)
    bundled = read_csv(EXAMPLES_DIR / CSV_NAMES[amplitude])
    assert bundled.columns == ("a1",)
    assert times.size == 5001 and SAMPLE_EVERY == 2
    assert np.array_equal(bundled.times, times)
    assert bundled.times[0] == 0.0 and bundled.times[-1] == 1.0
    noise = bundled.column("a1") - a1
    n = noise.size
    sigma = NOISE_FRACTION * float(np.sqrt(np.mean(a1**2)))
    # Sample standard deviation of n Gaussian draws: relative standard error 1/sqrt(2(n-1)).
    assert abs(np.std(noise, ddof=1) / sigma - 1.0) <= 5.0 / np.sqrt(2 * (n - 1))
    # Mean zero: standard error sigma/sqrt(n).
    assert abs(np.mean(noise)) <= 5.0 * sigma / np.sqrt(n)
    # White: lag-1 autocorrelation has standard error 1/sqrt(n).
    lag1 = float(np.corrcoef(noise[:-1], noise[1:])[0, 1])
    assert abs(lag1) <= 5.0 / np.sqrt(n)
    # Gaussian: fraction beyond 2 sigma is 4.55 % (binomial standard error ~0.3 %).
    beyond = np.mean(np.abs(noise) > 2 * sigma)
    assert abs(beyond - 0.0455) <= 5.0 * np.sqrt(0.0455 * 0.9545 / n)
    # Independent of the signal.
    assert abs(float(np.corrcoef(noise, a1)[0, 1])) <= 5.0 / np.sqrt(n)


# -- sdof, L-BFGS-B with adjoint gradients -------------------------------------------------


@pytest.fixture(scope="module")
def sdof_model():
    return compile_model(load_model(example_path("sdof")))


def _sdof_problem(model, true, step=1e-2):
    traj = simulate(model, model.parameter_vector(true), step=step)
    y = traj.outputs()[:, model.output_index("x")]
    exp = Experiment(model, LeastSquaresCost(traj.t, y, ("x",)), t_end=float(traj.t[-1]), step=step)
    return IdentificationProblem([exp], ["c", "d"])


def test_lbfgsb_with_adjoint_gradients_recovers_sdof(sdof_model, monkeypatch):
    problem = _sdof_problem(sdof_model, {"c": 1.3, "d": 0.4})
    assert list(problem.start) == [1.0, 0.5]
    methods = []
    evaluate = problem.evaluate

    def recording(x, method="adjoint", *args, **kwargs):
        methods.append(method)
        return evaluate(x, method, *args, **kwargs)

    monkeypatch.setattr(problem, "evaluate", recording)
    result = identify(problem, "lbfgsb", progress=None)
    assert result.success, result.message
    assert result.method == "lbfgsb"
    assert methods and set(methods) == {"adjoint"}
    assert abs(result.parameters[0] - 1.3) <= RECOVERY * 1.3
    assert abs(result.parameters[1] - 0.4) <= RECOVERY * 0.4
    assert list(result.initial) == [1.0, 0.5]
    assert result.cost_history[0] == pytest.approx(result.cost_initial, rel=EXACT)
    assert result.cost < NOISE_FREE_COST_DROP * result.cost_initial


@pytest.fixture(scope="module")
def sdof_noisy_problem(sdof_model):
    """sdof data from c = 1.3, d = 0.4 with a little deterministic noise (no exact fit)."""
    step = 1e-2
    traj = simulate(sdof_model, sdof_model.parameter_vector({"c": 1.3, "d": 0.4}), step=step)
    y = traj.outputs()[:, 0] + 1e-3 * np.random.default_rng(3).normal(size=traj.t.size)
    exp = Experiment(sdof_model, LeastSquaresCost(traj.t, y, ("x",)), t_end=float(traj.t[-1]), step=step)
    return IdentificationProblem([exp], ["c", "d"])


@pytest.fixture(scope="module")
def sdof_by_scaling(sdof_noisy_problem):
    return {
        scaling: identify(sdof_noisy_problem, "least_squares", scaling=scaling, progress=None)
        for scaling in ("auto", "bounds", "log", "none")
    }


@pytest.mark.parametrize("scaling", ["bounds", "log", "none"])
def test_identification_result_does_not_depend_on_scaling(sdof_by_scaling, scaling):
    reference, result = sdof_by_scaling["auto"], sdof_by_scaling[scaling]
    assert result.success, result.message
    assert np.allclose(result.parameters, reference.parameters, rtol=RECOVERY, atol=0)
    assert result.cost == pytest.approx(reference.cost, rel=EXACT)
    for k, true in enumerate([1.3, 0.4]):
        assert abs(result.parameters[k] - true) <= STD_ERRORS * result.std_errors[k]


def test_progress_lines(sdof_model):
    import io

    problem = _sdof_problem(sdof_model, {"c": 1.3, "d": 0.4})
    stream = io.StringIO()
    result = identify(problem, "lbfgsb", progress=stream, max_iterations=3)
    lines = stream.getvalue().splitlines()
    assert len(lines) == len(result.cost_history) >= 2
    assert all(line.startswith("iter") and "c=" in line and "d=" in line for line in lines)
    assert result.iterations <= 3


def test_progress_goes_to_the_current_stderr(sdof_model):
    """BUG (minor): ``identify(progress=sys.stderr)`` binds the stream at import time.

    The docstring says progress lines go to stderr by default; with
    ``contextlib.redirect_stderr`` (or any later replacement of ``sys.stderr``) they still
    go to the stream that was ``sys.stderr`` when fmi_adjoint.identify was imported.
    """
    import contextlib
    import io

    problem = _sdof_problem(sdof_model, {"c": 1.3, "d": 0.4})
    stream = io.StringIO()
    with contextlib.redirect_stderr(stream):
        result = identify(problem, "lbfgsb", max_iterations=2)
    lines = stream.getvalue().splitlines()
    assert len(lines) == len(result.cost_history) >= 2, stream.getvalue()


def test_iteration_limit_reports_no_success(sdof_model):
    problem = _sdof_problem(sdof_model, {"c": 1.3, "d": 0.4})
    result = identify(problem, "lbfgsb", max_iterations=1, progress=None)
    assert not result.success
    assert result.iterations == 1


def test_unknown_optimizer_and_scaling(sdof_model):
    problem = _sdof_problem(sdof_model, {"c": 1.3, "d": 0.4})
    with pytest.raises(IdentificationError, match="'newton'"):
        identify(problem, "newton", progress=None)
    with pytest.raises(IdentificationError, match="'linear'"):
        identify(problem, "lbfgsb", scaling="linear", progress=None)


# -- ParameterScaling ----------------------------------------------------------------------

SCALING_CASES = {
    # kind: (start, lower, upper, test values)
    "bounds": ([2.0, -3.0], [0.5, -10.0], [8.0, 1.0], [[0.5, -10.0], [8.0, 1.0], [3.7, -0.25]]),
    "log": ([2.0, 1e5], [0.0, 1e3], [np.inf, 1e7], [[1e-3, 1e3], [50.0, 1e7], [2.0, 3.3e5]]),
    "none": ([2.0, -3.0], [-np.inf, -np.inf], [np.inf, np.inf], [[-7.5, 0.0], [1e6, -3.0], [2.0, 4.25]]),
}


@pytest.mark.parametrize("kind", list(SCALING_CASES))
def test_scaling_round_trip(kind):
    start, lower, upper, values = SCALING_CASES[kind]
    scale = ParameterScaling.create(["a", "b"], start, lower, upper, kind)
    assert scale.kinds == (kind, kind)
    for p in values:
        p = np.array(p)
        u = scale.to_scaled(p)
        assert np.allclose(scale.to_physical(u), p, rtol=EXACT, atol=0)
        assert np.allclose(scale.to_scaled(scale.to_physical(u)), u, rtol=EXACT, atol=EXACT)


def test_scaling_values():
    bounds = ParameterScaling.create(["a"], [2.0], [0.0], [8.0], "bounds")
    assert bounds.to_scaled(np.array([0.0]))[0] == -1.0
    assert bounds.to_scaled(np.array([4.0]))[0] == pytest.approx(0.0, abs=EXACT)
    assert bounds.to_scaled(np.array([8.0]))[0] == pytest.approx(1.0, rel=EXACT)
    assert bounds.scaled_bounds() == [(-1.0, 1.0)]
    log = ParameterScaling.create(["a"], [2.0], [0.5], [np.inf], "log")
    assert log.to_scaled(np.array([2.0 * np.e]))[0] == pytest.approx(1.0, rel=EXACT)
    assert log.scaled_bounds()[0][0] == pytest.approx(np.log(0.25), rel=EXACT)
    assert log.scaled_bounds()[0][1] is None
    none = ParameterScaling.create(["a", "b"], [-4.0, 0.0], [-10.0, -1.0], [np.inf, 1.0], "none")
    assert np.allclose(none.to_scaled(np.array([-8.0, 0.5])), [-2.0, 0.5], rtol=EXACT, atol=0)
    assert none.scaled_bounds() == [(-2.5, None), (-1.0, 1.0)]


def test_scaling_auto_choice():
    scale = ParameterScaling.create(
        ["bounded", "positive", "free"], [1.0, 2.0, -1.0], [0.0, 0.0, -np.inf], [5.0, np.inf, np.inf], "auto"
    )
    assert scale.kinds == ("bounds", "log", "none")
    u = scale.to_scaled(np.array([4.0, 3.0, 2.5]))
    assert np.allclose(scale.to_physical(u), [4.0, 3.0, 2.5], rtol=EXACT, atol=0)


@pytest.mark.parametrize("kind", [*SCALING_CASES, "auto"])
def test_scaling_derivative_matches_finite_differences(kind):
    start, lower, upper, values = SCALING_CASES[kind if kind != "auto" else "bounds"]
    scale = ParameterScaling.create(["a", "b"], start, lower, upper, kind)
    for p in values:
        u = scale.to_scaled(np.array(p))
        d = scale.derivative(u)
        for k in range(2):
            du = 1e-6 * max(1.0, abs(u[k]))
            up, um = u.copy(), u.copy()
            up[k] += du
            um[k] -= du
            fd = (scale.to_physical(up)[k] - scale.to_physical(um)[k]) / (2 * du)
            assert d[k] == pytest.approx(fd, rel=SCALING_FD), (kind, p, k)
            # and p_k depends on u_k only (diagonal)
            other = 1 - k
            assert scale.to_physical(up)[other] == scale.to_physical(u)[other]


def test_scaling_rejects_start_outside_bounds_and_bad_kinds():
    with pytest.raises(IdentificationError, match=r"'a' = 12 lies outside its bounds \[0, 10\]"):
        ParameterScaling.create(["a"], [12.0], [0.0], [10.0])
    with pytest.raises(IdentificationError, match="finite bounds"):
        ParameterScaling.create(["a"], [1.0], [0.0], [np.inf], "bounds")
    with pytest.raises(IdentificationError, match="positive start"):
        ParameterScaling.create(["a"], [-1.0], [-2.0], [np.inf], "log")


# -- statistics -----------------------------------------------------------------------------

LINEAR_TOML = """
[model]
name = "linear"

[simulation]
t_end = 2.0
step = 0.01

[parameters]
a = 0.3
b = -1.0
c = 2.0

[[coordinates]]
name = "x"
mass = 1.0

[[outputs]]
name = "y"
expression = "a + b*t + c*sin(3*t)"
"""


def _regressors(t):
    return np.column_stack([np.ones_like(t), t, np.sin(3 * t)])


@pytest.fixture(scope="module")
def linear_case():
    model = compile_model(parse_model(LINEAR_TOML))
    traj = simulate(model)
    times = traj.t  # the step times: the sampled output is exact, not interpolated
    rng = np.random.default_rng(11)
    truth = np.array([0.5, 0.8, -1.5])
    data = _regressors(times) @ truth + rng.normal(0.0, 0.05, times.size)
    exp = Experiment(model, LeastSquaresCost(times, data, ("y",)))
    return model, times, data, IdentificationProblem([exp], ["a", "b", "c"])


def test_statistics_match_textbook_formula(linear_case):
    _, times, data, problem = linear_case
    # Trapezoidal weights of the cost J = 1/2 sum eta_i (y_i - ybar_i)^2.
    eta = np.zeros_like(times)
    eta[:-1] += np.diff(times) / 2
    eta[1:] += np.diff(times) / 2
    w = np.sqrt(eta)
    X = w[:, None] * _regressors(times)
    beta, *_ = np.linalg.lstsq(X, w * data, rcond=None)
    r = X @ beta - w * data
    n, k = X.shape
    s2 = float(r @ r) / (n - k)
    cov = s2 * np.linalg.inv(X.T @ X)
    expected_std = np.sqrt(np.diag(cov))
    expected_corr = cov / np.outer(expected_std, expected_std)

    stats = problem.statistics(beta)
    assert stats["n_residuals"] == n
    assert stats["residual_variance"] == pytest.approx(s2, rel=EXACT)
    assert np.allclose(stats["std_errors"], expected_std, rtol=EXACT, atol=0)
    assert np.allclose(stats["correlation"], expected_corr, rtol=0, atol=EXACT)

    # identify() reaches the same least-squares solution and reports the same errors.
    result = identify(problem, "least_squares", progress=None)
    assert np.allclose(result.parameters, beta, rtol=LINEAR_FIT, atol=0)
    assert np.allclose(result.std_errors, expected_std, rtol=LINEAR_FIT, atol=0)


def test_statistics_at_zero_residual_do_not_warn(linear_case):
    """BUG: at a perfect fit (r = 0) statistics() divides 0/0 for the correlation.

    It emits "RuntimeWarning: invalid value encountered in divide" and returns NaN
    correlations, which ``fmi-adjoint identify`` then writes as the non-JSON token NaN.
    """
    model, times, _, _ = linear_case
    simulated = simulate(model).outputs()[:, model.output_index("y")]  # at the model's own values
    assert np.allclose(simulated, _regressors(times) @ np.array([0.3, -1.0, 2.0]), rtol=0, atol=EXACT)
    exp = Experiment(model, LeastSquaresCost(times, simulated, ("y",)))
    problem = IdentificationProblem([exp], ["a", "b", "c"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stats = problem.statistics(problem.start)
    assert stats["residual_variance"] == 0.0
    assert stats["std_errors"] == [0.0, 0.0, 0.0]
    corr = stats["correlation"]
    assert corr is None or np.all(np.isfinite(np.array(corr, dtype=float)))


def test_statistics_singular_hessian_gives_none(linear_case):
    """A parameter the data cannot see gets no standard error; the others get theirs with it
    held fixed: equal to those of the problem without it."""
    model, times, data, _ = linear_case
    toml = LINEAR_TOML.replace("c = 2.0", "c = 2.0\nunused = 1.0")
    model2 = compile_model(parse_model(toml))
    exp = Experiment(model2, LeastSquaresCost(times, 1.01 * data, ("y",)))  # a residual: nonzero errors
    problem = IdentificationProblem([exp], ["a", "unused"])
    stats = problem.statistics(problem.start)
    assert stats["std_errors"][1] is None and stats["unidentifiable"] == [1]
    assert stats["correlation"] is None
    alone = IdentificationProblem([exp], ["a"]).statistics(problem.start[:1])
    # The residual variance divides by N - n_p, one more parameter in the first problem.
    dof = stats["n_residuals"]
    expected = alone["std_errors"][0] * math.sqrt((dof - 1) / (dof - 2))
    assert alone["std_errors"][0] > 0
    assert abs(stats["std_errors"][0] - expected) <= EXACT * expected


def test_problem_rejects_inconsistent_setups(linear_case):
    model, times, data, _ = linear_case
    exp = Experiment(model, LeastSquaresCost(times, data, ("y",)))
    with pytest.raises(IdentificationError, match="at least one experiment"):
        IdentificationProblem([], ["a"])
    with pytest.raises(IdentificationError, match="at least one parameter"):
        IdentificationProblem([exp], [])
    with pytest.raises(IdentificationError, match="duplicates"):
        IdentificationProblem([exp], ["a", "a"])
    with pytest.raises(IdentificationError, match="'b'.*not identified"):
        IdentificationProblem([exp], ["a"], bounds={"b": (0.0, 1.0)})
    with pytest.raises(ModelError, match="no parameter 'zz'"):
        IdentificationProblem([exp], ["zz"])
