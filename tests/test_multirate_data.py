"""Several files per experiment: multi-rate channels on one clock (issue 26, part 2).

A fast logger and a slow logger record one run; ``--data fast.csv@with=slow.csv`` makes them
one experiment whose channels are each compared at their own sample times
(:mod:`fmi_adjoint.bench.merge`).  The exact check: the merged experiment's cost and adjoint
gradient equal the sum of the two single-channel experiments' (the same run compared channel
by channel), which fails if a channel were interpolated onto the other's grid, resampled, or
compared at the other's times.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fmi_adjoint.bench.merge import merge_measurements
from fmi_adjoint.cli.loading import load_problem, problem_spec
from fmi_adjoint.cli.main import main
from fmi_adjoint.data import Measurement, read_csv, write_csv
from fmi_adjoint.errors import DataError
from fmi_adjoint.identify.data_costs import CostOptions

from captured_cli import cli, error_line
from tolerances import EXACT, NOISE_FREE_RECOVERY

#: The truth of the synthetic run (two_mass: c2 = 1000 nominal).
TRUTH = {"c2": 1500.0, "d2": 2.0}


@pytest.fixture(scope="module")
def loggers(tmp_path_factory):
    """two_mass at the truth: x2 by a fast logger (every sample, mm), v1 by a slow one (every
    10th sample from the 5th, m/s)."""
    work = tmp_path_factory.mktemp("multirate")
    sim = work / "sim.csv"
    settings = [arg for name, value in TRUTH.items() for arg in ("--set", f"{name}={value}")]
    assert main(["simulate", "two_mass", *settings, "-o", str(sim)]) == 0
    run = read_csv(sim)
    fast, slow = work / "fast.csv", work / "slow.csv"
    write_csv(fast, run.times, {"x2 [mm]": 1e3 * run.column("x2")})
    write_csv(slow, run.times[5::10], {"v1 [m/s]": run.column("v1")[5::10]})
    return run, fast, slow


def test_merged_times_are_the_union_and_each_channel_keeps_its_own_samples():
    a = Measurement(np.array([0.0, 0.1, 0.2, 0.3]), ("x",), np.array([[1.0], [2.0], [3.0], [4.0]]), "a.csv", ("m",))
    b = Measurement(np.array([50.0, 250.0]), ("y",), np.array([[7.0], [8.0]]), "b.mf4", ("N",), time_unit="ms")
    merged = merge_measurements([a, b])
    assert merged.times.tolist() == [0.0, 0.05, 0.1, 0.2, 0.25, 0.3]
    assert merged.columns == ("x", "y") and merged.units == ("m", "N") and merged.source == "a.csv + b.mf4"
    x, y = merged.column("x"), merged.column("y")
    assert np.array_equal(np.isnan(x), [False, True, False, False, True, False])
    assert x[~np.isnan(x)].tolist() == [1.0, 2.0, 3.0, 4.0] and y[~np.isnan(y)].tolist() == [7.0, 8.0]


def test_a_channel_in_two_files_and_repeated_times_are_refused():
    a = Measurement(np.array([0.0, 0.1]), ("x",), np.zeros((2, 1)), "a.csv")
    with pytest.raises(DataError, match=r"channel 'x' is in a.csv and in b.csv.*--map"):
        merge_measurements([a, Measurement(np.array([0.0, 0.2]), ("x",), np.zeros((2, 1)), "b.csv")])
    with pytest.raises(DataError, match="increase strictly"):
        merge_measurements([a, Measurement(np.array([0.0, 0.0]), ("y",), np.zeros((2, 1)), "b.csv")])


def _problem(files: list[str]):
    options = CostOptions(weighting=None)  # unit weights: the same in both problems
    spec = problem_spec("two_mass", files, {}, list(TRUTH), t_end=None, step=None, cost=options)
    return load_problem(spec)[1]


def test_the_merged_experiment_is_the_sum_of_its_channels(loggers):
    _, fast, slow = loggers
    merged = _problem([f"{fast}@with={slow}"])
    apart = _problem([str(fast), str(slow)])
    cost = merged.experiments[0].cost
    assert cost.channels == ("x2", "v1")
    # Each channel compared at its own times only: x2 at every sample, v1 at every 10th.
    assert np.count_nonzero(np.isfinite(cost.data[:, 0])) == len(apart.experiments[0].cost.sample_times)
    assert np.count_nonzero(np.isfinite(cost.data[:, 1])) == len(apart.experiments[1].cost.sample_times)
    x = np.array([1200.0, 1.5])
    together, separate = merged.evaluate(x, "adjoint"), apart.evaluate(x, "adjoint")
    assert together.J == pytest.approx(separate.J, rel=EXACT, abs=0)
    assert np.allclose(together.gradient, separate.gradient, rtol=EXACT, atol=0)
    assert together.J > 0 and np.all(np.abs(together.gradient) > 0)


def test_identify_from_two_loggers_recovers_the_truth(loggers, tmp_path):
    _, fast, slow = loggers
    out = tmp_path / "result.json"
    code, _, err = cli(["identify", "two_mass", "--data", f"{fast}@with={slow}", "--params", "c2,d2", "-o", out])
    assert code == 0, err
    payload = json.loads(out.read_text(encoding="utf-8"))
    for name, value in TRUTH.items():
        assert abs(payload["parameters"][name] - value) <= NOISE_FREE_RECOVERY * value
    record = payload["data_preprocessing"][0]
    assert record["file"] == f"{fast} + {slow}" and record["format"] == "merged"
    assert record["masked_samples"]["v1"] > record.get("masked_samples", {}).get("x2", 0)


def test_with_needs_a_file_and_the_file_must_exist(loggers, tmp_path):
    _, fast, _ = loggers
    code, _, err = cli(["identify", "two_mass", "--data", f"{fast}@with=", "--params", "c2"])
    assert code == 2 and "with= needs a file" in error_line(err)
    code, _, err = cli(["identify", "two_mass", "--data", f"{fast}@with={tmp_path / 'none.csv'}", "--params", "c2"])
    assert code == 2 and "none.csv" in error_line(err)


def test_detrending_or_resampling_merged_loggers_is_refused(loggers):
    _, fast, slow = loggers
    for option in (["--detrend", "offset"], ["--resample"]):
        code, _, err = cli(["identify", "two_mass", "--data", f"{fast}@with={slow}", "--params", "c2", *option])
        assert code == 2 and "with=" in error_line(err) and "separate experiments" in error_line(err)
