"""Regression tests of the FMU import defects of issue 30 (part 6, correctness; part 4, import side).

Each test names the defect it guards and fails on the code before the fix:

* a. discrete inputs: a Model Exchange FMU accepts an Integer input only in Initialization and
  Event Mode (FMI 2.0, sec. 3.2.3), so a change of one is an event; under Co-Simulation it is
  held, never interpolated ("0.5 is not a whole number");
* b. ``validate`` compares event rows (a repeated time stamp) as ``identify`` does, with the
  re-simulation's own event (:func:`fmi_adjoint.fmu.me_run.match_event_rows`), through the
  interface ``identify`` would choose (Model Exchange; Co-Simulation refused);
* c. a state's start value with ``initial="exact"`` (the Reference FMU VanDerPol's ``x0``) is
  identified like a parameter, and one that cannot be is refused naming why;
* d. a cost over data with events is continuous in the parameters: samples between the data's
  event and the run's are compared on the data's side of the run's event;
* e. ``apply --ssp`` says which interface an SSP importer runs and warns when fmpy would run
  another than the identification's;
* f. a Co-Simulation FMU declaring ``canInterpolateInputs`` gets the input derivatives; one that
  does not is warned about with the RMS difference of the held input; the fallback to finite
  differences is said on stderr with its cost.
"""

from __future__ import annotations

import json
from pathlib import Path

import fmpy
import numpy as np
import pytest

from fmi_adjoint import read_csv, write_csv
from fmi_adjoint.fmu.archive import open_fmu
from fmi_adjoint.fmu.experiment import FmuExperiment, Tolerances
from fmi_adjoint.fmu.session import FmuSession
from fmi_adjoint.fmu.simulation import FmuSimulator, can_interpolate_inputs
from fmi_adjoint.fmu.ssp import importer_interface
from fmi_adjoint.fmu.validation import sample_recorded, simulate_with_fmpy
from fmi_adjoint.toolchain import c_compiler
from captured_cli import cli, error_line
from handwritten_fmus import build_fmu
from tolerances import CVODE_REPLAY, EXACT, FMU_NOISE_FREE_RECOVERY, NOISE_FREE_RECOVERY

if c_compiler() is None:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: the FMUs cannot be built", allow_module_level=True)

NAMES = ("feedthrough", "stair", "bouncing_ball", "van_der_pol_exact", "input_ramp_cs", "van_der_pol_mecs")


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fmu_import_defects")


@pytest.fixture(scope="module")
def fmus(work) -> dict[str, Path]:
    return {name: Path(build_fmu(name, work)) for name in NAMES}


def _identify(argv, output: Path) -> tuple[dict, str]:
    code, _, err = cli(["identify", *argv, "--method", "least_squares", "-o", output])
    assert code == 0, err
    return json.loads(output.read_text(encoding="utf-8")), err


def _cvode(fmu: Path, t_end: float, interval: float, start: dict, outputs: list[str]) -> np.ndarray:
    """fmpy's CVode (rtol 1e-10); at an event fmpy records two rows with the same time."""
    return fmpy.simulate_fmu(str(fmu), fmi_type="ModelExchange", relative_tolerance=1e-10, stop_time=t_end,
                             output_interval=interval, start_values=start, output=outputs)


def _write(path: Path, run: np.ndarray, outputs: list[str]) -> Path:
    write_csv(path, run["time"], {name: np.asarray(run[name], dtype=float) for name in outputs})
    return path


# ------------------------------------------------------------------ a. discrete inputs --

@pytest.fixture(scope="module")
def feedthrough_files(work) -> tuple[Path, Path]:
    """u = sin 3t (continuous) and the Integer n = floor(4 t) (discrete: changes at 0.25,
    0.5, 0.75, 1) sampled every 0.05 s; data y = 1.7 u + 0.3 and m = 2 n."""
    times = np.round(np.linspace(0.0, 1.0, 21), 12)
    u, n = np.sin(3.0 * times), np.floor(4.0 * times + 1e-9)
    inputs, data = work / "ft_inputs.csv", work / "ft_data.csv"
    write_csv(inputs, times, {"u": u, "n": n})
    write_csv(data, times, {"y": 1.7 * u + 0.3, "m": 2.0 * n})
    return inputs, data


def test_discrete_input_changes_are_events_under_model_exchange(fmus, work, feedthrough_files):
    """Before: "fmi2SetInteger failed" (the Integer input set in Continuous-Time Mode).  Now
    the fit of k, c is exact and m follows n held, with its changes at the samples' times
    (the sample at a change takes the new value: zero residual in m)."""
    inputs, data = feedthrough_files
    payload, _ = _identify(["--fmu", fmus["feedthrough"], "--data", data, "--inputs", inputs, "--params", "k,c",
                            "--interface", "me"], work / "ft_me.json")
    assert payload["success"] and payload["interface"] == "ModelExchange"
    for name, true in {"k": 1.7, "c": 0.3}.items():
        assert abs(payload["parameters"][name] - true) <= NOISE_FREE_RECOVERY * true, name
    assert payload["cost"] <= EXACT


def test_integer_input_is_held_under_co_simulation(fmus, feedthrough_files):
    """Before: "0.5 is not a whole number" (n interpolated at communication points between its
    samples).  Now n is held: after each step from t_k the output m is 2 n(t_k), n's last
    sample at or before t_k, on a grid (0.03 s) that meets n's samples only at 0 and 0.6."""
    inputs, _ = feedthrough_files
    archive = open_fmu(fmus["feedthrough"])
    session = FmuSession(archive, "CoSimulation")
    try:
        signal = read_csv(inputs)

        class Cost:
            channels = ("m",)
            sample_times = np.arange(0.0, 0.99, 0.03)

        exp = FmuExperiment(Cost(), t_end=0.99, step=0.03, inputs=signal)  # type: ignore[arg-type]
        simulator = FmuSimulator(archive, "CoSimulation", Tolerances(), [])
        m = np.asarray(session.run(simulator.job(session, exp, {})))[:, 0]
    finally:
        session.close()
        archive.close()
    grid = exp.grid()
    held = np.floor(4.0 * grid[:-1] + 1e-9)
    assert np.array_equal(m[1:], 2.0 * held)


# --------------------------------------------------------------- b. validate event rows --

def test_sample_recorded_meets_the_data_event_rows_with_the_runs_own_event():
    """A run with an event at 0.5 (recorded twice: before and after); data with the event at
    0.5000001 (another solver's), a plain row at 0.7 and a plain row at the run's event time."""
    recorded_times = np.array([0.0, 0.25, 0.5, 0.5, 0.75, 1.0])
    recorded = np.array([0.0, 1.0, 2.0, -2.0, -1.0, 0.0])[:, None]
    times = np.array([0.25, 0.5000001, 0.5000001, 0.7, 1.0])
    got = sample_recorded(recorded_times, recorded, times)[:, 0]
    assert np.allclose(got, [1.0, 2.0, -2.0, -1.2, 0.0], rtol=0.0, atol=EXACT)
    # A single row exactly at the run's event is its left limit, as identify's Model Exchange run reads it.
    assert sample_recorded(recorded_times, recorded, np.array([0.25, 0.5, 0.75]))[1, 0] == 2.0


@pytest.fixture(scope="module")
def stair_data(fmus, work) -> Path:
    """fmpy's CVode data of the stair FMU itself (events at 0.5, 1, 1.5 s recorded twice)."""
    return _write(work / "stair_events.csv", _cvode(fmus["stair"], 2.0, 0.05, {}, ["counter", "level"]),
                  ["counter", "level"])


def test_validate_meets_stair_data_of_the_same_fmu(fmus, work, stair_data):
    """Before: counter max error 1, level 2 (np.interp put both rows of each time event on one
    side, and Co-Simulation was taken by default)."""
    data = stair_data
    code, _, err = cli(["validate", fmus["stair"], "--data", data, "-o", work / "stair_report"])
    assert code == 0, err
    report = json.loads((work / "stair_report" / "report.json").read_text(encoding="utf-8"))
    assert report["interface"] == "ModelExchange"  # as identify: only Model Exchange meets both rows
    assert report["outputs"]["counter"]["max_abs_error"] == 0.0
    assert report["outputs"]["level"]["max_abs_error"] <= CVODE_REPLAY


def test_validate_refuses_co_simulation_for_event_rows_as_identify_does(fmus, work, stair_data):
    code, _, err = cli(["validate", fmus["stair"], "--data", stair_data, "--interface", "cs",
                        "-o", work / "stair_cs"])
    assert code == 2 and "cannot meet both rows: use --interface me" in error_line(err)


def test_validate_meets_bouncing_ball_data_with_eight_bounces(fmus, work):
    """Before: 40 % RMS in v (each bounce's rows compared across the jump).  e = 0.7 over 2.4 s."""
    run = _cvode(fmus["bouncing_ball"], 2.4, 0.01, {"e": 0.7}, ["h", "v"])
    assert np.count_nonzero(np.diff(run["time"]) == 0) == 8
    data = read_csv(_write(work / "ball_events.csv", run, ["h", "v"]), events=True)
    archive = open_fmu(fmus["bouncing_ball"])
    try:
        simulated = simulate_with_fmpy(archive, data.times, ["h", "v"], start_values={"e": 0.7},
                                       interface="ModelExchange")
    finally:
        archive.close()
    scale = np.max(np.abs(data.values), axis=0)
    assert np.all(np.max(np.abs(simulated - data.values), axis=0) <= CVODE_REPLAY * scale)


# -------------------------------------------------------- d. costs over moving events --

@pytest.mark.slow
def test_bouncing_ball_is_identified_from_three_seconds_in_one_stage(fmus, work):
    """h and v over 0-3 s (six bounces, true e = 0.8, 100 samples per second and the bounces'
    two rows), from e = 0.78 without the windows strategy.  Before: stuck at e = 0.779 (each
    bounce of the run crossing a sample time made the cost jump; at e = 0.798 the gradient had
    the wrong sign).  Now a sample between the data's bounce and the run's is compared with the
    run's value on the data's side of its bounce (:func:`fmi_adjoint.fmu.me_run.between_matched_events`),
    so the cost is continuous and the fit reaches the truth."""
    run = _cvode(fmus["bouncing_ball"], 3.0, 0.01, {}, ["h", "v"])
    assert np.count_nonzero(np.diff(run["time"]) == 0) == 6
    data = _write(work / "ball_3s.csv", run, ["h", "v"])
    payload, err = _identify(["--fmu", fmus["bouncing_ball"], "--data", data, "--params", "e", "--set", "e=0.78",
                              "--strategy", "single"], work / "ball_3s.json")
    assert payload["success"] and "not smooth" not in err
    assert abs(payload["parameters"]["e"] - 0.8) <= NOISE_FREE_RECOVERY * 0.8


@pytest.mark.slow
def test_bouncing_ball_is_identified_from_three_seconds_from_e_0_7_by_default(fmus, work):
    """The defect as issue 30 reported it: h and v over 0-3 s (six bounces), from e = 0.7, ended
    in "ABNORMAL: " with no explanation.  With the default strategy (windows that grow event by
    event where the data jump, then the whole record) the fit reaches the truth, without the
    warning that the cost is not smooth (docs/how-to/import-fmu.md)."""
    run = _cvode(fmus["bouncing_ball"], 3.0, 0.01, {}, ["h", "v"])
    data = _write(work / "ball_3s_from_07.csv", run, ["h", "v"])
    payload, err = _identify(["--fmu", fmus["bouncing_ball"], "--data", data, "--params", "e", "--set", "e=0.7"],
                             work / "ball_3s_from_07.json")
    assert payload["success"] and "not smooth" not in err and "ABNORMAL" not in err
    assert abs(payload["parameters"]["e"] - 0.8) <= NOISE_FREE_RECOVERY * 0.8


# ------------------------------------------------------------- c. exact start values --

@pytest.fixture(scope="module")
def vdp_exact_fit(fmus, work) -> tuple[dict, Path]:
    data = _write(work / "vdp_exact.csv", _cvode(fmus["van_der_pol_exact"], 2.0, 0.05, {"x0": 1.5, "mu": 1.2},
                                                 ["x0", "x1"]), ["x0", "x1"])
    output = work / "vdp_exact.json"
    payload, _ = _identify(["--fmu", fmus["van_der_pol_exact"], "--data", data, "--params", "x0,mu",
                            "--interface", "me"], output)
    return payload, output


def test_state_start_value_with_initial_exact_is_identified(vdp_exact_fit):
    """Before: "no real parameter named 'x0'".  x0 (a state, output, initial="exact") and mu
    from CVode data through the sensitivity path."""
    payload, _ = vdp_exact_fit
    assert payload["success"] and payload["gradient_method"]["method"] == "sensitivity"
    assert payload["initial"] == {"x0": 2.0, "mu": 1.0}
    for name, true in {"x0": 1.5, "mu": 1.2}.items():
        assert abs(payload["parameters"][name] - true) <= FMU_NOISE_FREE_RECOVERY * true, name


def test_a_calculated_start_value_is_refused_naming_why(fmus, work, vdp_exact_fit):
    code, _, err = cli(["identify", "--fmu", fmus["van_der_pol_exact"], "--data", work / "vdp_exact.csv",
                        "--params", "der(x1)"])
    line = error_line(err)
    assert code == 2 and 'initial="calculated"' in line and "Start values (initial=\"exact\"): x0, x1." in line


# ------------------------------------------------------------------ e. apply --ssp --

def test_apply_ssp_warns_that_fmpy_runs_co_simulation(fmus, work, vdp_exact_fit):
    """Before: silence, and fmpy ran the Co-Simulation binary of a Model Exchange fit."""
    _, result = vdp_exact_fit
    code, _, err = cli(["apply", result, "--fmu", fmus["van_der_pol_exact"], "--ssp", work / "vdp_exact.ssp"])
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("fmi-adjoint: warning:")]
    assert len(warnings) == 1 and "ignores implementation" in warnings[0] and "Model Exchange" in warnings[0]
    archive = open_fmu(fmus["van_der_pol_exact"])
    try:
        notes, warned = importer_interface(archive, "CoSimulation")
    finally:
        archive.close()
    assert warned == [] and len(notes) == 1 and "as the identification did" in notes[0]


# ------------------------------------------------------------- f. interpolated inputs --

def test_input_derivatives_reach_an_fmu_that_interpolates(fmus, work):
    """input_ramp_cs (canInterpolateInputs) integrates k u exactly for a u linear within each
    step: on data made of the trapezoid sums of u's samples (the steps' own points) k is
    recovered, with no held-input warning.  Before: u held, k biased by 0.8 %.  Differences, the
    only gradient of a Co-Simulation FMU, are no fallback: no note, the reason in RESULT.json."""
    archive = open_fmu(fmus["input_ramp_cs"])
    try:
        assert can_interpolate_inputs(archive)
    finally:
        archive.close()
    times = np.round(np.arange(0.0, 2.0 + 1e-9, 0.1), 12)
    u = np.sin(2.0 * times)
    x = 1.5 * np.concatenate([[0.0], np.cumsum(0.05 * (u[1:] + u[:-1]))])
    inputs, data = work / "ramp_inputs.csv", work / "ramp_data.csv"
    write_csv(inputs, times, {"u": u})
    write_csv(data, times, {"x": x})
    payload, err = _identify(["--fmu", fmus["input_ramp_cs"], "--data", data, "--inputs", inputs, "--params", "k"],
                             work / "ramp.json")
    assert abs(payload["parameters"]["k"] - 1.5) <= NOISE_FREE_RECOVERY * 1.5
    assert "holds each input" not in err
    # Co-Simulation only: differences are the only path, not a fallback; RESULT.json says why.
    assert "extra whole simulations" not in err
    assert "no Model Exchange interface" in json.dumps(payload["gradient_method"])


def test_held_input_warning_names_the_rms_difference(fmus, work):
    """van_der_pol_mecs declares canInterpolateInputs="false": a fast input over coarse steps
    gets one warning naming the input and the RMS difference of holding it."""
    times = np.round(np.arange(0.0, 2.0 + 1e-9, 0.01), 12)
    u = np.sin(6.0 * times)
    inputs = work / "vdp_inputs.csv"
    write_csv(inputs, times, {"u": u})
    run = fmpy.simulate_fmu(str(fmus["van_der_pol_mecs"]), fmi_type="CoSimulation", stop_time=2.0,
                            output_interval=0.01, output=["x0"],
                            input=np.array(list(zip(times, u)), dtype=[("time", float), ("u", float)]))
    data = _write(work / "vdp_input_data.csv", run, ["x0"])
    code, _, err = cli(["identify", "--fmu", fmus["van_der_pol_mecs"], "--data", data, "--inputs", inputs,
                        "--params", "mu", "--interface", "cs", "--step", "0.1", "--method", "least_squares"])
    assert code == 1, err  # a significant bias: the result is not trusted
    warnings = [line for line in err.splitlines() if "holds each input" in line]
    assert len(warnings) == 1 and "the input u " in warnings[0]
    assert "RMS difference between the held and the interpolated u over the run" in warnings[0]


def test_validate_records_on_the_datas_grid_or_its_smallest_inner_step():
    """fmpy's output interval for validate: the median step when the samples (all but an uneven
    last one) lie on its grid; else the smallest step before the last interval, so that no
    sample falls between recorded rows by more than round-off of the grid."""
    from fmi_adjoint.fmu.validation import _output_interval

    on_grid = np.append(np.arange(0.0, 1.0, 0.01), 1.0 - 0.004)  # an uneven last interval
    assert _output_interval(on_grid) == pytest.approx(0.01, rel=EXACT)
    jittered = np.array([0.0, 0.01, 0.0205, 0.03, 0.04, 0.05])
    assert _output_interval(jittered) == pytest.approx(0.0095, rel=EXACT)
    assert _output_interval(np.array([0.0, 0.0])) is None
