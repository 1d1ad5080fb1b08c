"""Identification strategies (issue 32): growing data windows by default.

* A data window keeps exactly the samples at t <= T with the trapezoidal weights of the kept
  samples, and the windowed problem's cost equals the cost of the full run's prefix computed
  independently (the simulation up to T is the first part of the simulation up to the end).
* The automatic rule: windows 1/8, 1/4, 1/2 of the record for time-domain least squares with enough
  samples; single shooting for spectra, for too short a record, and for an FMU-like problem.
* The engine mount's joint fit of both bundled sweeps from the paper's start values: single
  shooting ends in a wrong minimum (far beyond 3 standard errors); the default options (growing
  windows) reach the joint minimum, all four parameters within 3 standard errors of the truth,
  serially, on Dask and with --starts 8 (slow).
* The triple pendulum (bundled time-domain data) and the strut (its data with 1 % noise) from
  their start values with default options: the truth within 3 standard errors (slow).
* A staged (windowed) multi-start resumes from half its checkpoint to the same result.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from captured_cli import cli
from fmi_adjoint.cli.loading import load_problem, problem_spec
from fmi_adjoint.costs import LeastSquaresCost
from fmi_adjoint.costs.least_squares import trapezoidal_weights
from fmi_adjoint.errors import ConvergenceError, DataError, IdentificationError
from fmi_adjoint.examples import EXAMPLES_DIR, example_path
from fmi_adjoint.examples.engine_mount_data import AMPLITUDES, CSV_NAMES, TRUE_VALUES
from fmi_adjoint.identify.checkpoint import CheckpointLog
from fmi_adjoint.identify.multistart import SampledStrategies, open_checkpoint
from fmi_adjoint.identify.strategies import (
    AutomaticStrategy,
    ExperimentContinuation,
    GrowingWindows,
    SingleShooting,
    window_fractions,
)
from tolerances import EXACT, WITHIN_STD_ERRORS

ENGINE_DATA = [f"{EXAMPLES_DIR / CSV_NAMES[a]}@A={a!r}" for a in AMPLITUDES]
ENGINE_NAMES = list(TRUE_VALUES)
ENGINE_JOINT = ["engine_mount", *[x for spec in ENGINE_DATA for x in ("--data", spec)],
                "--params", ",".join(ENGINE_NAMES)]


@pytest.fixture(scope="module")
def joint():
    """The engine mount's joint problem of both bundled sweeps, from the paper's start values."""
    _, problem = load_problem(problem_spec(str(example_path("engine_mount")), ENGINE_DATA, {}, ENGINE_NAMES,
                                           t_end=None, step=None))
    return problem


def _z(result: dict, truth: dict) -> dict:
    """(identified - true) / standard error per parameter."""
    return {n: (v - truth[n]) / result["std_errors"][n] for n, v in result["parameters"].items()}


# -- windows ---------------------------------------------------------------------------------


def test_a_window_keeps_the_samples_up_to_its_end_with_their_own_weights():
    t = np.array([0.0, 0.1, 0.25, 0.3, 0.5, 0.8])
    y = np.column_stack([np.sin(t), np.cos(t)])
    cost = LeastSquaresCost(t, y, ("a", "b"), weights=np.array([1.0, 2.0]), scales=np.array([0.5, 3.0]))
    w = cost.window(0.3)
    np.testing.assert_array_equal(w.sample_times, t[:4])
    np.testing.assert_array_equal(w.data, y[:4])
    assert w.channels == ("a", "b")
    np.testing.assert_array_equal(w.weights, cost.weights)
    np.testing.assert_array_equal(w.scales, cost.scales)
    # The cost of a window is J over the kept samples with their own trapezoidal weights.
    Y = y[:4] + 0.01
    eta = trapezoidal_weights(t[:4])
    expected = 0.5 * np.sum(eta[:, None] * (0.01**2) * (np.array([1.0, 2.0]) / np.array([0.5, 3.0]) ** 2))
    assert w.evaluate(Y, np.zeros(0)).J == pytest.approx(expected, rel=EXACT)
    with pytest.raises(DataError, match="holds 1 sample"):
        cost.window(0.05)


def test_window_stages_truncate_each_experiment_and_end_with_the_full_problem(joint):
    stages = GrowingWindows().stages(joint)
    assert [s.details["window_fraction"] for s in stages] == [0.125, 0.25, 0.5, 1.0]
    assert stages[-1].problem is joint
    for stage, fraction in zip(stages[:-1], (0.125, 0.25, 0.5)):
        for exp, full in zip(stage.problem.experiments, joint.experiments):
            T = exp.t_end
            assert T == pytest.approx(fraction * full.t_end, rel=EXACT)
            np.testing.assert_array_equal(exp.cost.sample_times, full.cost.sample_times[full.cost.sample_times <= T])
            np.testing.assert_array_equal(exp.cost.data, full.cost.data[: exp.cost.sample_times.size])
    # The windowed problem's cost at the start values, against the full runs' samples up to T
    # put into a cost built independently of the window.
    quarter = stages[0].problem
    expected = 0.0
    for exp in joint.experiments:
        Y = joint.sampled_outputs(joint.experiments.index(exp), joint.start)
        T = 0.125 * exp.t_end
        keep = exp.cost.sample_times <= T * (1 + EXACT)
        part = LeastSquaresCost(exp.cost.sample_times[keep], exp.cost.data[keep], exp.cost.channels)
        expected += part.evaluate(Y[keep], np.zeros(0)).J
    assert quarter.cost(joint.start) == pytest.approx(expected, rel=EXACT)


def test_the_automatic_choice(joint):
    auto = AutomaticStrategy()
    assert window_fractions(joint) == (0.125, 0.25, 0.5)
    assert auto.choose(joint) == GrowingWindows()
    assert auto.cycle(joint) == (GrowingWindows(), ExperimentContinuation(0), ExperimentContinuation(1),
                                 SingleShooting())
    # Too short a record: half of 30 samples is fewer than 10 per parameter of 4.
    short = joint.restricted([0])
    exp = short.experiments[0]
    cut = 30
    short.experiments = (type(exp)(exp.model, exp.cost.window(exp.cost.sample_times[cut - 1]), exp.values,
                                   t_end=float(exp.cost.sample_times[cut - 1]), step=exp.step, name=exp.name,
                                   engine=exp.engine),)
    assert window_fractions(short) == ()
    assert auto.choose(short) == SingleShooting()
    assert "too short" in GrowingWindows().unavailable(short)
    # Not a least-squares problem (an FMU problem here): single shooting; explicit windows refused.
    assert auto.choose(object()) == SingleShooting()
    with pytest.raises(IdentificationError, match="--strategy windows: data windows apply to model files"):
        SampledStrategies(GrowingWindows()).starts([np.ones(4)], object())
    with pytest.raises(IdentificationError, match="increasing fractions"):
        GrowingWindows((0.5, 0.25))


def test_a_multistart_cycles_the_strategies_over_the_start_points(joint):
    points = [joint.start * (1 + 0.01 * k) for k in range(6)]
    starts = SampledStrategies().starts(points, joint)
    assert [s.strategy.name for s in starts] == ["windows", "experiments", "experiments", "single", "windows",
                                                "experiments"]
    assert [s.first for s in starts] == [None, 0, 1, None, None, 0]
    # An explicit strategy runs at every point; experiments: each experiment first in turn.
    starts = SampledStrategies(ExperimentContinuation()).starts(points[:2], joint)
    assert [(s.first, float(s.point[0])) for s in starts] == [(0, points[0][0]), (1, points[0][0]),
                                                              (0, points[1][0]), (1, points[1][0])]


def test_bare_start_points_run_with_the_automatic_strategy_in_the_library_too(joint):
    """run_starts on plain points: the same default as the CLI (--strategy auto), not single
    shooting; identify_staged prints nothing by default (the library never writes to stderr)."""
    import inspect

    from fmi_adjoint.identify.multistart import run_starts
    from fmi_adjoint.identify.strategies import identify_staged

    outcome = run_starts(joint, [joint.start], max_iterations=1, statistics=False)
    (start,) = outcome.starts
    assert start.strategy.name == "windows"
    assert [s.stage for s in start.stages][-1] == "all data" and len(start.stages) == 4
    assert inspect.signature(identify_staged).parameters["progress"].default is None


def test_windows_on_fourier_costs_are_refused_by_name(tmp_path):
    code, _, err = cli(["identify", "triple_pendulum", "--cost", "fourier", "--data",
                        EXAMPLES_DIR / "triple_pendulum_spectrum.csv", "--channel", "phi1", "--band", "1.4:1.9",
                        "--window", "hann", "--spectrum", "amplitude", "--params", "c_f,d_f", "--max-iter", "1",
                        "--strategy", "windows", "-o", tmp_path / "r.json"])
    assert code == 2, err
    assert "data windows need time-domain least-squares costs" in err and "--strategy" in err
    assert not (tmp_path / "r.json").exists()


def test_a_windowed_multistart_resumes_from_half_its_checkpoint(tmp_path):
    data = tmp_path / "data.csv"
    code, _, err = cli(["simulate", "sdof", "--step", "1e-2", "--set", "c=1.3", "--set", "d=0.4", "-o", data])
    assert code == 0, err
    run = ["identify", "sdof", "--data", data, "--params", "c,d", "--step", "1e-2", "--starts", "3",
           "--bounds", "c=0.5:3", "--bounds", "d=0.1:2", "--workers", "1"]
    full = tmp_path / "full.ckpt"
    code, out, err = cli([*run, "--checkpoint", full, "--json"])
    assert code in (0, 1), err
    reference = json.loads(out)
    assert [r["strategy"] for r in reference["multistart"]["results"]] == ["windows", "single", "windows"]
    assert len(reference["multistart"]["results"][0]["stages"]) == 4
    log, header, records = CheckpointLog.resume(str(full))
    log.close()
    # The first half of the records, as if the run had been stopped there.
    half = tmp_path / "half.ckpt"
    log, _ = open_checkpoint(str(half), header, resume=False)
    with log:
        for record in records[: len(records) // 2]:
            log.append(record.kind, dict(record.meta), dict(record.arrays))
    code, out, err = cli([*run, "--resume", half, "--json"])
    assert code in (0, 1), err
    resumed = json.loads(out)

    def numbers(result):
        keep = {k: result[k] for k in ("parameters", "cost", "cost_initial", "cost_history", "iterations",
                                       "simulations", "strategy")}
        keep["starts"] = [{k: v for k, v in r.items() if k != "seconds"} for r in result["multistart"]["results"]]
        for part in [keep["strategy"], *keep["starts"]]:  # every number but the times
            part["stages"] = [{k: v for k, v in s.items() if k != "seconds"} for s in part.get("stages", [])]
        return keep

    assert numbers(resumed) == numbers(reference)


# -- the engine mount's joint fit -------------------------------------------------------------


@pytest.mark.slow
def test_single_shooting_misses_the_engine_mount_joint_minimum(tmp_path):
    code, out, err = cli(["identify", *ENGINE_JOINT, "--strategy", "single", "--workers", "1", "--json"])
    result = json.loads(out)
    assert result["strategy"] == {"requested": "single", "used": "single",
                                  "stages": [result["strategy"]["stages"][0]]}
    assert max(abs(z) for z in _z(result, TRUE_VALUES).values()) > 10 * WITHIN_STD_ERRORS
    assert any("times the noise floor" in w for w in result["warnings"])


@pytest.mark.slow
def test_default_options_reach_the_engine_mount_joint_minimum_serially_and_on_dask(tmp_path):
    pytest.importorskip("distributed")
    from distributed import LocalCluster

    code, out, err = cli(["identify", *ENGINE_JOINT, "--workers", "1", "--json"])
    assert code == 0, err
    serial = json.loads(out)
    assert serial["strategy"]["requested"] == "auto" and serial["strategy"]["used"] == "windows"
    assert [s["stage"] for s in serial["strategy"]["stages"]] == ["window t <= 0.125 s", "window t <= 0.25 s",
                                                                 "window t <= 0.5 s", "all data"]
    assert serial["iterations"] == sum(s["iterations"] for s in serial["strategy"]["stages"])
    for name, z in _z(serial, TRUE_VALUES).items():
        assert abs(z) <= WITHIN_STD_ERRORS, (name, z)
    # cost_initial is the full problem's cost at the paper's start values, far above the end.
    assert serial["cost_initial"] > 1e3 * serial["cost"]
    assert serial["warnings"] == [] and serial["success"] is True
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0") as c:
        code, out, err = cli(["identify", *ENGINE_JOINT, "--dask", c.scheduler_address, "--json"])
    assert code == 0, err
    dask = json.loads(out)
    assert dask["executor"]["executor"] == "dask"
    keys = ("parameters", "std_errors", "cost", "cost_initial", "cost_history", "iterations", "simulations")
    assert {k: dask[k] for k in keys} == {k: serial[k] for k in keys}  # the same numbers on every executor

    def stages(result):  # every number of the stages but their times
        return [{k: v for k, v in s.items() if k != "seconds"} for s in result["strategy"]["stages"]]

    assert stages(dask) == stages(serial)


@pytest.mark.slow
def test_eight_starts_with_default_options_reach_the_engine_mount_joint_minimum(tmp_path):
    code, out, err = cli(["identify", *ENGINE_JOINT, "--starts", "8", "--json"])
    assert code == 0, err
    result = json.loads(out)
    summary = result["multistart"]
    assert [r["strategy"] for r in summary["results"]] == ["windows", "experiments", "experiments", "single"] * 2
    # Starts 0 and 4 (both windows) reach the joint minimum; which of the two is lowest is
    # round-off (start 4 with numpy 2.3, scipy 1.16 and OpenBLAS's Prescott kernel): both count.
    best = summary["clusters"][0]
    assert {0, 4} <= set(best["starts"]) and summary["best_start"] in best["starts"]
    assert summary["best_strategy"] == "windows"
    assert summary["reached_best_cluster"] >= 2  # reported, and more than the one start
    for name, z in _z(result, TRUE_VALUES).items():
        assert abs(z) <= WITHIN_STD_ERRORS, (name, z)


# -- the triple pendulum and the strut --------------------------------------------------------


@pytest.mark.slow
def test_default_options_find_the_triple_pendulum_from_its_start_values():
    from fmi_adjoint.examples.triple_pendulum_data import CSV_NAME, NAMES, START_VALUES, TRUE_VALUES as TRUE

    sets = [x for name, value in START_VALUES.items() for x in ("--set", f"{name}={value!r}")]
    code, out, err = cli(["identify", "triple_pendulum", "--data", EXAMPLES_DIR / CSV_NAME, "--params",
                          ",".join(NAMES), *sets, "--json"])
    assert code == 0, err
    result = json.loads(out)
    assert result["initial"] == START_VALUES and result["strategy"]["used"] == "windows"
    for name, z in _z(result, TRUE).items():
        assert abs(z) <= WITHIN_STD_ERRORS, (name, z)


@pytest.mark.slow
def test_default_options_find_the_strut_from_table_1(tmp_path):
    """The strut's noise-free data with 1 % noise (seeded); y0 fixed at its true value (only
    L + y0 is identifiable, see strut.toml), the other twelve from Table 1's start values, with
    the default options: growing windows and Gauss-Newton (``--method auto``, least squares for
    a time-domain cost): 2.43 standard errors with OpenBLAS's Haswell and Prescott kernels alike.
    L-BFGS-B, the default before issue 32 was finished, is not robust on these twelve
    parameters: its windows end at their 200-iteration limit and the result depends on
    round-off (2.43 standard errors with one kernel, 4.0 and exit 1 with Haswell)."""
    from fmi_adjoint.examples.strut_data import NAMES, OUTPUT, TRUE_VALUES as TRUE, clean_measurement

    t, y = clean_measurement()
    y = y + 0.01 * np.sqrt(np.mean(y**2)) * np.random.default_rng(32).standard_normal(y.size)
    data = tmp_path / "strut.csv"
    data.write_text(f"time,{OUTPUT}\n" + "".join(f"{float(a)!r},{float(b)!r}\n" for a, b in zip(t, y)))
    names = [n for n in NAMES if n != "y0"]
    code, out, err = cli(["identify", "strut", "--data", data, "--params", ",".join(names),
                          "--set", f"y0={TRUE['y0']!r}", "--json"])
    assert code == 0, err
    result = json.loads(out)
    assert result["strategy"]["used"] == "windows"
    assert result["method"] == "least_squares"  # --method auto on a time-domain cost
    for name, z in _z(result, TRUE).items():
        assert abs(z) <= WITHIN_STD_ERRORS, (name, z)


@pytest.mark.parametrize("sum_of_squares, expected", [(True, "least_squares"), (False, "lbfgsb")])
def test_the_default_optimizer_is_gauss_newton_where_there_are_residuals(sum_of_squares, expected):
    """``--method auto``: Gauss-Newton for least-squares costs, L-BFGS-B for the others (which
    have no residuals)."""
    from fmi_adjoint.identify.optimize import default_optimizer

    class Problem:
        has_residuals = sum_of_squares

    assert default_optimizer(Problem()) == expected


# -- stages that cannot be simulated -----------------------------------------------------------


class _Line:
    """r(x) = x - target (one parameter), cannot be simulated away from ``only`` if given, nor
    beyond ``|x| > limit``."""

    names, lower, upper, gradient_method = ("p",), np.array([-20.0]), np.array([20.0]), "adjoint"

    def __init__(self, target: float, start: float = 0.0, only: float | None = None, limit: float | None = None):
        self.target, self.start, self.only, self.simulations = target, np.array([start]), only, 0
        self.limit = limit
        self.experiments = ()  # no least-squares experiments: the start cost comes from evaluate

    def with_start(self, x):
        return _Line(self.target, float(x[0]), self.only, self.limit)

    def residuals(self, x, jacobian=True):
        self.simulations += 1
        if self.only is not None and float(x[0]) != self.only:
            raise ConvergenceError("Newton did not converge")
        if self.limit is not None and abs(float(x[0])) > self.limit:
            raise ConvergenceError("Newton did not converge")
        return np.array([x[0] - self.target]), np.ones((1, 1))

    def evaluate(self, x, method="adjoint"):
        from fmi_adjoint.identify import Evaluation

        r, _ = self.residuals(x)
        return Evaluation(0.5 * float(r @ r), r.copy(), method, 0.0, 0.0, 1)

    def statistics(self, x):
        return {"std_errors": None, "correlation": None}


def test_a_stage_that_cannot_simulate_the_previous_result_starts_from_the_start_values():
    from fmi_adjoint.identify.strategies import AbstractStrategy, Stage, run_stages

    class TwoStages(AbstractStrategy):
        name = "two"

        def stages(self, problem):
            # The second stage (the full problem) simulates only at the start values 0.
            return (Stage(_Line(3.0), "first"), Stage(problem, "all data"))

    full = _Line(1.0, only=0.0)
    with pytest.raises(ConvergenceError, match="Newton"):  # from the first stage's result 3: no simulation
        full.with_start(np.array([3.0])).residuals(np.array([3.0]))
    staged = run_stages(TwoStages(), full, np.array([0.0]), "least_squares")
    assert [s.stage for s in staged.stages] == [
        "first", "all data (from the start values: the previous stage's result did not simulate)"]
    assert staged.stages[0].cost == pytest.approx(0.0, abs=EXACT)
    assert staged.result.cost_initial == pytest.approx(0.5, rel=EXACT)  # the full problem at x0 = 0
    # The fit is single shooting now, which the result must say (RESULT.json and stderr
    # take the notices as warnings), with the cause and a fix.
    (notice,) = staged.notices
    assert staged.stages[1].note == notice and staged.stages[0].note == ""
    for words in ("could not simulate the result of stage 'first'", "single shooting from the start values",
                  "--starts 8", "--set"):
        assert words in notice, (words, notice)


def test_a_stage_that_cannot_simulate_the_previous_result_goes_on_from_an_earlier_window():
    from fmi_adjoint.identify.strategies import AbstractStrategy, Stage, run_stages, stage_notices

    class ThreeStages(AbstractStrategy):
        name = "three"

        def stages(self, problem):
            # Stage 2 ends at 10, which the full problem (|x| <= 4) cannot simulate; stage 1's
            # result 3 it can: the continuation goes on from there, not from the start values.
            return (Stage(_Line(3.0), "first"), Stage(_Line(10.0), "second"), Stage(problem, "all data"))

    full = _Line(1.0, limit=4.0)
    staged = run_stages(ThreeStages(), full, np.array([0.0]), "least_squares")
    assert [s.stage for s in staged.stages] == [
        "first", "second", "all data (from the result of stage 'first': the previous stage's result did not "
        "simulate)"]
    assert staged.stages[1].cost == pytest.approx(0.0, abs=EXACT)  # stage 2 did reach 10
    assert staged.result.parameters[0] == pytest.approx(1.0, abs=EXACT)
    assert staged.result.success
    (notice,) = staged.notices
    assert stage_notices(staged.stages) == staged.notices
    for words in ("could not simulate the result of stage 'second'", "started from the result of stage 'first'",
                  "--starts 8"):
        assert words in notice, (words, notice)
    assert "single shooting" not in notice
