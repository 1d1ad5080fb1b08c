"""``fmi-adjoint design``: the files it writes (DESIGN.json, INPUT.csv, the figure), that
INPUT.csv drives a ``table_load`` copy of the model exactly as the design did, and one clear
error (exit code 2, no output file) for each kind of bad input.

The model is an undamped single-mass oscillator ``m x'' = -c x + u`` with outputs ``x``,
``v = x'`` and a sensor ``xs = gain x``; short runs (3 s, h = 0.02, 6 knots, few iterations)
keep every command fast.  All runs share the test session's build cache (conftest.py), and
the designed model is the same in every run of the same knot layout, so it is built once.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
from pathlib import Path

import numpy as np
import pytest

from fmi_adjoint.cli.main import main
from fmi_adjoint.data import read_csv
from fmi_adjoint.design import CubicSpline, DesignProblem, DesignSpec, DOptimal, SigmoidMap
from fmi_adjoint.model_file import load_model

from tolerances import EXACT

MODEL = """\
[model]
name = "osc"
description = "Undamped single-mass oscillator driven by an input force"

[simulation]
t_end = 3.0
step = 0.02

[parameters]
m = { value = 1.0, unit = "kg" }
c = { value = 4.0, unit = "N/m" }
gain = { value = 2.0, unit = "1", description = "sensor gain: acts on xs only" }

[inputs]
u = { value = 0.0, unit = "N" }

[[coordinates]]
name = "x"
mass = "m"

[[forces]]
type = "linear_spring_damper"
name = "spring"
coordinates = ["x"]
stiffness = "c"
damping = 0.0
free_length = 0.0

[[forces]]
type = "load"
name = "drive"
coordinate = "x"
expression = "u"

[[outputs]]
name = "x"
expression = "x"

[[outputs]]
name = "v"
expression = "der(x)"

[[outputs]]
name = "xs"
expression = "gain*x"
"""

#: The drive of MODEL, and the same force read from a table.
LOAD = 'type = "load"\nname = "drive"\ncoordinate = "x"\nexpression = "u"\n'
TABLE_LOAD = 'type = "table_load"\nname = "drive"\ncoordinate = "x"\nfile = "INPUT.csv"\ncolumn = "u"\n'

LO, HI = -1.0, 1.0
KNOTS = 6
MAX_ITERATIONS = 5
BASE = ["--input", "u", "--params", "m,c", "--knots", KNOTS, "--bounds", f"u={LO:g}:{HI:g}"]
HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


def run(argv, capsys):
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse's own errors (the tool's one-line form)
        code = exc.code
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("design_model") / "osc.toml"
    path.write_text(MODEL, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def designed(model_file, tmp_path_factory):
    """One design run with every output file, its exit code and its printed text."""
    folder = tmp_path_factory.mktemp("design_out")
    files = {"json": folder / "DESIGN.json", "csv": folder / "INPUT.csv", "png": folder / "DESIGN.png"}
    argv = ["design", model_file, *BASE, "--max-iterations", MAX_ITERATIONS, "-o", files["json"],
            "--csv", files["csv"]]
    if HAS_MATPLOTLIB:
        argv += ["--plot", files["png"]]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    assert "Traceback" not in err.getvalue()
    return code, out.getvalue(), err.getvalue(), files


def test_design_record(designed):
    code, out, err, files = designed
    record = json.loads(files["json"].read_text(encoding="utf-8"))
    assert code == (0 if record["success"] else 1), err
    assert record["model"] == "osc" and record["input"] == {"name": "u", "unit": "N", "bounds": [LO, HI]}
    assert (record["basis"], record["bound_map"], record["criterion"]["name"]) == ("linear", "box", "A")
    assert (record["t_end"], record["step"], record["sample"], record["samples"]) == (3.0, 0.02, 0.02, 151)
    # No --noise: every output with sigma 1, and a note says so.
    assert record["noise"] == {"x": 1.0, "v": 1.0, "xs": 1.0}
    assert "note: no --noise given" in err

    criterion = record["criterion"]
    assert criterion["final"] < criterion["start"]
    # The default multi-start (issue 32): every start reported, the history is the winner's.
    starts = record["starts"]
    runs = starts["runs"]
    assert starts["count"] == len(runs) == 8 and 1 <= starts["reached_best"] <= 8
    winner = runs[starts["best"]]
    assert winner["criterion"] == criterion["final"] == min(run["criterion"] for run in runs)
    assert runs[0]["label"].startswith("given start") and runs[0]["criterion_start"] == criterion["start"]
    assert runs[0]["knots_start"] == pytest.approx(record["knots"]["start"], rel=EXACT)
    assert all(1 <= run["iterations"] <= MAX_ITERATIONS and run["stop"] for run in runs)
    history = record["history"]
    assert 2 <= len(history) <= MAX_ITERATIONS + 1
    assert [h["iteration"] for h in history] == list(range(len(history)))
    assert history[0]["criterion"] == winner["criterion_start"]
    objectives = [h["objective"] for h in history]
    assert all(b <= a for a, b in zip(objectives, objectives[1:]))  # L-BFGS-B accepts descent steps only
    assert all(h["penalty"] == 0 for h in history)  # no end conditions, limits or rate
    # One progress line per start (iteration lines only for a single start, tested below).
    assert [line.split(" (")[0] for line in err.splitlines() if line.startswith("start ")] == [
        f"start {k}/8" for k in range(1, 9)]
    assert record["evaluations"] >= sum(run["evaluations"] for run in runs)
    assert record["stop"]["cause"] == winner["stop"]

    knots = record["knots"]
    assert np.allclose(knots["times"], np.linspace(0.0, 3.0, KNOTS), rtol=0, atol=EXACT)
    assert knots["start"] == pytest.approx([LO + 0.75 * (HI - LO)] * KNOTS, rel=EXACT)
    assert all(LO <= u <= HI for u in knots["final"])

    names = [p["name"] for p in record["parameters"]]
    scale = np.array([p["scale"] for p in record["parameters"]])
    assert names == ["m", "c"] and scale.tolist() == [1.0, 4.0]
    assert record["fisher"]["scaled"] is True
    se = record["standard_errors"]
    for when in ("start", "final"):
        M = np.array(record["fisher"][when])
        np.testing.assert_allclose(M, M.T, rtol=EXACT)
        # The standard errors are the Cramér-Rao bounds of the recorded (scaled) matrix.
        expected = np.sqrt(np.diag(np.linalg.inv(M))) * scale
        np.testing.assert_allclose([se[when][n] for n in names], expected, rtol=EXACT)
    for name in names:
        assert se["final"][name] <= se["start"][name]
        assert se["ratio"][name] == pytest.approx(se["final"][name] / se["start"][name], rel=EXACT)
    assert record["end_misses"] == {} and record["limit_excess"] == {} and record["rate_excess"] is None
    assert record["evaluations"] >= len(history)

    # The summary: criterion and standard errors start -> final, the files written.
    assert f"criterion {criterion['start']:.6e} -> {criterion['final']:.6e}" in out
    for name in names:
        assert f"{se['start'][name]:.4e} -> {se['final'][name]:.4e}" in out
    for path in files.values():
        if path.suffix != ".png" or HAS_MATPLOTLIB:
            assert f"wrote {path}" in out


def test_input_csv_is_the_input_on_the_step_grid(designed):
    _, _, _, files = designed
    record = json.loads(files["json"].read_text(encoding="utf-8"))
    table = read_csv(files["csv"])
    assert tuple(table.columns) == ("u",)
    np.testing.assert_allclose(table.times, np.arange(151) * 0.02, rtol=0, atol=EXACT)
    u = table.column("u")
    assert np.all((u >= LO) & (u <= HI))
    # Linear basis: the signal passes through the knot values at the knot times.
    at_knots = np.interp(record["knots"]["times"], table.times, u)
    np.testing.assert_allclose(at_knots, record["knots"]["final"], rtol=EXACT)


def check_table_reproduces_design(csv: Path, knots: list[float], spec: DesignSpec, settings: dict[str, float],
                                  model_file: Path, folder: Path, capsys) -> None:
    """``csv`` as a ``table_load`` in a copy of the model (simulated by the command line)
    gives the output x of the designed run at the ``knots`` to round-off."""
    assert LOAD in MODEL
    copy = folder / "osc_table.toml"
    copy.write_text(MODEL.replace(LOAD, TABLE_LOAD), encoding="utf-8")
    (folder / "INPUT.csv").write_bytes(csv.read_bytes())
    simulated = folder / "x.csv"
    sets = [arg for name, value in settings.items() for arg in ("--set", f"{name}={value!r}")]
    code, _, err = run(["simulate", copy, *sets, "-o", simulated], capsys)
    assert code == 0, err
    x_table = read_csv(simulated).column("x")

    # The designed run: the same design problem (the same build, from the cache) at the knots.
    problem = DesignProblem.build(spec, load_model(model_file).with_values(settings))
    p = problem.compiled.defaults.copy()
    p[problem.knot_index] = knots
    x_design = problem.simulate(p).outputs()[:, problem.compiled.output_names.index("x")]
    assert len(x_table) == len(x_design) == 151
    assert np.max(np.abs(x_table - x_design)) <= EXACT * np.max(np.abs(x_design))


def test_input_csv_drives_a_table_load_copy_of_the_model(designed, model_file, tmp_path, capsys):
    _, _, _, files = designed
    record = json.loads(files["json"].read_text(encoding="utf-8"))
    spec = DesignSpec(input="u", params=("m", "c"), knots=KNOTS, bounds=(LO, HI),
                      noise={"x": 1.0, "v": 1.0, "xs": 1.0})
    check_table_reproduces_design(files["csv"], record["knots"]["final"], spec, {}, model_file, tmp_path, capsys)


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed")
def test_design_plot_is_a_png(designed):
    _, _, _, files = designed
    assert files["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_design_options_reach_the_record(model_file, tmp_path, capsys):
    """Criterion, basis, bound map, noise, constraints, sampling and start as given; the
    cubic spline's INPUT.csv (sampled at every step, where the engines evaluate it) drives
    a table_load copy of the model as the design did."""
    out, csv = tmp_path / "d.json", tmp_path / "in.csv"
    code, _, err = run(["design", model_file, *BASE, "--criterion", "D", "--basis", "cubic", "--bound-map", "sigmoid",
                        "--noise", "x=0.01", "--noise", "v=0.1", "--end", "x=0", "--limit", "v=2", "--rate", "10",
                        "--sample", "0.1", "--integral", "--start", "0.2", "--set", "c=5",
                        "--max-iterations", 2, "-o", out, "--csv", csv], capsys)
    record = json.loads(out.read_text(encoding="utf-8"))
    assert code == (0 if record["success"] else 1), err
    assert "--noise" not in err  # no note: the noise was given
    assert (record["criterion"]["name"], record["basis"], record["bound_map"]) == ("D", "cubic", "sigmoid")
    assert record["noise"] == {"x": 0.01, "v": 0.1}
    assert record["constraints"] == {"end": {"x": 0.0}, "limits": {"v": 2.0}, "rate": 10.0}
    assert set(record["end_misses"]) == {"x"} and set(record["limit_excess"]) == {"v"}
    assert record["rate_excess"] is not None
    assert (record["sample"], record["samples"], record["integral"]) == (0.1, 31, True)
    assert record["knots"]["start"] == pytest.approx([0.2] * KNOTS, rel=EXACT)
    assert record["settings"] == {"c": 5.0} and record["parameters"][1]["scale"] == 5.0
    assert len(record["history"]) <= 3
    same_weight = [h for h in record["history"] if h["penalty_weight"] == record["history"][-1]["penalty_weight"]]
    assert same_weight[-1]["objective"] <= same_weight[0]["objective"]

    spec = DesignSpec(input="u", params=("m", "c"), knots=KNOTS, bounds=(LO, HI), noise={"x": 0.01, "v": 0.1},
                      criterion=DOptimal(), basis=CubicSpline(), bound_map=SigmoidMap(), end={"x": 0.0},
                      limits={"v": 2.0}, rate=10.0, sample=0.1, integral=True, start=0.2)
    folder = tmp_path / "copy"
    folder.mkdir()
    check_table_reproduces_design(csv, record["knots"]["final"], spec, {"c": 5.0}, model_file, folder, capsys)


#: Bad inputs: the options (after MODEL; BASE unless replaced) and words the one-line
#: message must contain: the problem and the fix.
BAD = {
    "unknown input": (["--input", "w", "--params", "m,c", "--knots", 6, "--bounds", "w=-1:1"],
                      ["no input 'w'", "inputs: u", "[inputs]"]),
    "bounds lo >= hi": (["--input", "u", "--params", "m,c", "--knots", 6, "--bounds", "u=1:-1"],
                        ["u=1:-1", "lower bound must be below the upper"]),
    "bounds equal": (["--input", "u", "--params", "m,c", "--knots", 6, "--bounds", "u=1:1"],
                     ["u=1:1", "lower bound must be below the upper"]),
    "bounds of another name": (["--input", "u", "--params", "m,c", "--knots", 6, "--bounds", "c=-1:1"],
                               ["names 'c'", "give --bounds u=LO:HI"]),
    "bounds twice": ([*BASE, "--bounds", "u=-2:2"], ["given 2 times", "--bounds u=LO:HI once"]),
    "bounds malformed": (["--input", "u", "--params", "m,c", "--knots", 6, "--bounds", "u=1"],
                         ["expected NAME=LO:HI"]),
    "invisible parameter": ([*BASE[:3], "m,gain", *BASE[4:], "--noise", "x=0.01"],
                            ["'gain' does not affect the measured outputs", "singular",
                             "--noise OUT=SIGMA", "drop it from --params"]),
    "unknown parameter": ([*BASE[:3], "m,k", *BASE[4:]], ["no parameter 'k'", "Parameters: m, c, gain"]),
    "one knot": ([*BASE[:5], 1, *BASE[6:]], ["--knots 1", "at least 2 knots"]),
    "unknown output in --noise": ([*BASE, "--noise", "y=1"], ["--noise 'y'", "no such output", "outputs: x, v, xs"]),
    "unknown output in --end": ([*BASE, "--end", "y=0"], ["--end 'y'", "no such output", "outputs: x, v, xs"]),
    "unknown output in --limit": ([*BASE, "--limit", "y=1"], ["--limit 'y'", "no such output", "outputs: x, v, xs"]),
    "malformed --noise": ([*BASE, "--noise", "x"], ["--noise 'x'", "expected NAME=VALUE"]),
    "malformed --end": ([*BASE, "--end", "x=zero"], ["--end x=zero", "not a number"]),
    "malformed --set": ([*BASE, "--set", "m"], ["--set 'm'", "expected NAME=VALUE"]),
    "negative noise": ([*BASE, "--noise", "x=-1"], ["--noise x=-1", "positive"]),
    "start outside bounds": ([*BASE, "--start", "2"], ["strictly inside"]),
    "zero iterations": ([*BASE, "--max-iterations", 0], ["--max-iterations 0", "at least 1"]),
    "zero starts": ([*BASE, "--starts", 0], ["--starts 0", "at least 1 start"]),
    "negative seed": ([*BASE, "--seed", -1], ["--seed -1", "at least 0"]),
    "zero workers": ([*BASE, "--workers", 0], ["--workers 0", "at least 1"]),
    "workers and dask": ([*BASE, "--workers", 2, "--dask", "tcp://127.0.0.1:1"], ["--workers 2", "--dask", "not both"]),
    "unknown criterion": ([*BASE, "--criterion", "F"], ["--criterion", "invalid choice: 'F'", "--help"]),
    "unknown basis": ([*BASE, "--basis", "quadratic"], ["--basis", "invalid choice: 'quadratic'"]),
    "unknown bound map": ([*BASE, "--bound-map", "tanh"], ["--bound-map", "invalid choice: 'tanh'"]),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_input_is_one_clear_error_and_writes_nothing(case, model_file, tmp_path, capsys):
    options, words = BAD[case]
    # A case's own --max-iterations comes later and wins.
    argv = ["design", model_file, "--max-iterations", 1, *options, "-o", tmp_path / "d.json",
            "--csv", tmp_path / "in.csv", "--plot", tmp_path / "d.png"]
    code, out, err = run(argv, capsys)
    assert code == 2
    lines = err.splitlines()
    assert lines[-1].startswith("fmi-adjoint: error: ")
    assert [line for line in lines if "error" in line] == lines[-1:]
    for word in words:
        assert word in lines[-1], (word, lines[-1])
    assert list(tmp_path.iterdir()) == []


def test_output_file_that_is_the_model_is_refused(model_file, capsys):
    before = model_file.read_bytes()
    code, _, err = run(["design", model_file, *BASE, "-o", model_file], capsys)
    assert code == 2 and "would overwrite the input" in err
    assert model_file.read_bytes() == before



def test_monte_carlo_check_reaches_the_summary_and_the_record(model_file, tmp_path, capsys):
    """--monte-carlo RUNS: the empirical spread of RUNS re-identifications with the start and
    the designed input, next to the prediction (printed and in DESIGN.json)."""
    out = tmp_path / "d.json"
    code, stdout, err = run(["design", model_file, *BASE, "--noise", "x=0.01", "--max-iterations", 3,
                             "--monte-carlo", 20, "-o", out], capsys)
    record = json.loads(out.read_text(encoding="utf-8"))
    assert code == (0 if record["success"] else 1), err
    for label in ("start", "final"):
        check = record["monte_carlo"][label]
        assert check["runs"] == 20 and check["failed"] == 0
        for name in ("m", "c"):
            entry = check["parameters"][name]
            assert len(entry["estimates"]) == 20 and 0.3 < entry["std_ratio"] < 3.0
        assert f"Monte-Carlo, {label} input:" in stdout


def test_monte_carlo_needs_two_runs_and_independent_samples(model_file, tmp_path, capsys):
    out = tmp_path / "d.json"
    for extra in (["--monte-carlo", 1], ["--monte-carlo", 5, "--integral"]):
        code, _, err = run(["design", model_file, *BASE, *extra, "-o", out], capsys)
        assert code == 2 and "--monte-carlo" in err and "Traceback" not in err
        assert not out.exists()
