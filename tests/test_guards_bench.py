"""Bench-clock data and data beyond the model's end time (issue 26, part 4 and "What must be
shown"): the messages, exit codes and ``success`` flags, through the command line, for a
European bench CSV (``;``, decimal commas, a unit row) and a MAT v5 file.

Before issue 26 data beyond the end time silently extended the run (later: with a note, exit 0,
``success: true``); now they are refused unless ``--t-end`` states the span or a window keeps
the samples up to the end time.  The refusals fail on the code before them (exit 0 and a
RESULT.json); the acceptances fail if the refusal is too eager (exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import io as scipy_io

from fmi_adjoint import read_csv

from captured_cli import cli, error_line
from tolerances import WITHIN_STD_ERRORS

#: sdof (Oberpeilsteiner 2018, Sec. 3.1.1) at c = 2, d = 0.3: the "measured" system; its end
#: time is 6 pi = 18.8496 s.
TRUTH = {"c": 2.0, "d": 0.3}
SDOF_END = 6 * np.pi
#: Seconds on the bench's clock at the start of the record.
CLOCK = 1234.5


@pytest.fixture(scope="module")
def sdof_signal(tmp_path_factory):
    """sdof simulated for 25 s at the true values, 1 mm of deterministic noise; every 10th sample."""
    work = tmp_path_factory.mktemp("bench_guards")
    code, _, err = cli(["simulate", "sdof", *(f"--set={k}={v}" for k, v in TRUTH.items()), "--t-end", "25",
                        "-o", work / "sim.csv"])
    assert code == 0, err
    sim = read_csv(work / "sim.csv")
    times = np.round(sim.times, 9)[::10]
    x = sim.column("x")[::10] + 1e-3 * np.random.default_rng(11).standard_normal(times.size)
    return work, times, x


def write_semicolon_csv(path: Path, times, x) -> Path:
    """A bench CSV: ``;`` between cells, decimal commas, a unit row."""
    rows = ["time;x", "s;m", *(f"{t!r};{v!r}".replace(".", ",") for t, v in zip(map(float, times), map(float, x)))]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def write_mat(path: Path, times, x) -> Path:
    scipy_io.savemat(path, {"time": np.asarray(times, float), "x": np.asarray(x, float), "x_unit": "m"})
    return path


WRITERS = {"csv-semicolon": ("run.csv", write_semicolon_csv), "mat-v5": ("run.mat", write_mat)}


def bench_file(sdof_signal, fmt: str, *, last: float, offset: float = 0.0, tag: str = "") -> Path:
    """The record up to ``last`` s of the model's clock, written with times shifted by ``offset``."""
    work, times, x = sdof_signal
    keep = times <= last + 1e-9
    name, write = WRITERS[fmt]
    return write(work / f"{tag}{last:g}_{offset:g}_{name}", times[keep] + offset, x[keep])


def identify(argv, result: Path):
    code, out, err = cli(["identify", "sdof", "--params", "c,d", *argv, "-o", result])
    payload = json.loads(result.read_text(encoding="utf-8")) if result.exists() else None
    return code, err, payload


def assert_found(payload):
    for name, truth in TRUTH.items():
        assert abs(payload["parameters"][name] - truth) <= WITHIN_STD_ERRORS * payload["std_errors"][name], name


# -- the bench clock -------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", WRITERS)
def test_bench_clock_data_are_refused_with_the_shift_to_give(sdof_signal, tmp_path, fmt):
    data = bench_file(sdof_signal, fmt, last=5.0, offset=CLOCK)
    code, err, payload = identify(["--data", data], tmp_path / "RESULT.json")
    assert code == 2 and payload is None  # refused before any run: no RESULT.json
    line = error_line(err)
    assert f"{data}: the samples start at t = {CLOCK:g} s" in line
    assert "--time-shift start" in line and f"subtract {CLOCK:g} s" in line


@pytest.mark.parametrize("fmt", WRITERS)
def test_bench_clock_data_shifted_to_zero_are_identified(sdof_signal, tmp_path, fmt):
    data = bench_file(sdof_signal, fmt, last=5.0, offset=CLOCK)
    code, err, payload = identify(["--data", data, "--time-shift", "start"], tmp_path / "RESULT.json")
    assert code == 0 and payload["success"] is True, err
    assert payload["data_preprocessing"][0]["time_shift"] == pytest.approx(CLOCK)
    assert_found(payload)
    assert not [w for w in payload["warnings"] if "t = 0" in w or "end time" in w]


# -- data beyond the model's end time -----------------------------------------------------------
@pytest.mark.parametrize("fmt", WRITERS)
@pytest.mark.parametrize("command", ["identify", "gradient"])
def test_data_beyond_the_end_time_are_refused_without_t_end(sdof_signal, tmp_path, fmt, command):
    data = bench_file(sdof_signal, fmt, last=20.0)
    result = tmp_path / "RESULT.json"
    extra = ["-o", result] if command == "identify" else []
    code, out, err = cli([command, "sdof", "--data", data, "--params", "c,d", *extra])
    assert code == 2 and not result.exists() and out == ""
    line = error_line(err)
    assert f"{data}: the last sample at t = 20 s lies past the end time {SDOF_END:g} s of sdof" in line
    assert "Give --t-end 20 if the experiment ran that long" in line
    assert f"--data {data}@window=0:{SDOF_END:g}" in line


@pytest.mark.parametrize("fmt", WRITERS)
def test_an_explicit_t_end_that_covers_the_data_is_accepted(sdof_signal, tmp_path, fmt):
    data = bench_file(sdof_signal, fmt, last=20.0)
    code, err, payload = identify(["--data", data, "--t-end", "20"], tmp_path / "RESULT.json")
    assert code == 0 and payload["success"] is True, err
    assert_found(payload)
    assert not [w for w in payload["warnings"] if "end time" in w]


def test_a_window_up_to_the_end_time_is_accepted(sdof_signal, tmp_path):
    data = bench_file(sdof_signal, "csv-semicolon", last=20.0)
    code, err, payload = identify(["--data", f"{data}@window=0:{SDOF_END:.6f}"], tmp_path / "RESULT.json")
    assert code == 0 and payload["success"] is True, err
    assert_found(payload)


def test_an_explicit_t_end_shorter_than_the_data_is_refused(sdof_signal, tmp_path):
    data = bench_file(sdof_signal, "csv-semicolon", last=20.0)
    code, err, payload = identify(["--data", data, "--t-end", "10"], tmp_path / "RESULT.json")
    assert code == 2 and payload is None
    line = error_line(err)
    assert f"--t-end 10 s ends before the last sample of {data} at 20 s; give --t-end 20 or more" in line


def test_data_up_to_the_end_time_need_no_t_end(sdof_signal, tmp_path):
    # The last sample exactly at the end time (to the printed digits of the time column).
    data = bench_file(sdof_signal, "csv-semicolon", last=SDOF_END, tag="end")
    code, err, payload = identify(["--data", data], tmp_path / "RESULT.json")
    assert code == 0 and payload["success"] is True, err
    assert_found(payload)


# -- the same on an FMU -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def sdof_fmu(tmp_path_factory):
    path = tmp_path_factory.mktemp("fmu") / "sdof.fmu"
    code, _, err = cli(["export", "sdof", "--fmi", "2", "-o", path])
    assert code == 0, err
    return path


def test_fmu_data_beyond_its_stop_time_are_refused_without_t_end(sdof_fmu, sdof_signal):
    # The FMU's DefaultExperiment stopTime is the model's 6 pi s, written as 18.85.
    data = bench_file(sdof_signal, "csv-semicolon", last=20.0)
    code, _, err = cli(["gradient", "--fmu", sdof_fmu, "--data", data, "--params", "c,d"])
    assert code == 2
    line = error_line(err)
    assert "the last sample at t = 20 s lies past the end time 18.85 s of sdof.fmu" in line
    assert "Give --t-end 20" in line
    code, out, err = cli(["gradient", "--fmu", sdof_fmu, "--data", data, "--params", "c,d", "--t-end", "20", "--json"])
    assert code == 0, err
    assert json.loads(out)["cost"] > 0
