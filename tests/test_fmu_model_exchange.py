"""Adaptive Model Exchange identification of FMUs (issue 15, "What must be shown").

Data come from fmpy's CVode (rtol 1e-10); fmi-adjoint integrates the Model Exchange
interface with its own adaptive Radau IIA in the FMU's worker process.

* accuracy: Van der Pol (FMI 2 and FMI 3) and Dahlquist (FMI 3) recover their parameters to
  1e-7 at the default tolerances, and the reported ``discretization_error.parameter_bias``
  matches the true discretization error (the fit against one at --rtol 1e-13), at the default
  tolerances and at rtol 1e-6, where that error is measurable;
* events: the bouncing ball recovers its restitution ``e`` through exact sensitivities across
  its state events, which equal central differences of whole simulations for e, g, h_start;
  data with a repeated time stamp at an event (left and right limit) are read;
* consistency: one FMU with both interfaces gives the same parameters through Co-Simulation
  (its own RK4) and Model Exchange, and ``validate`` re-simulates each;
* variable types: zero states with an input (feedthrough), an Integer output compared as a
  number (stair), FMI 3 array elements and Float32 (state_space3);
* honest results: an unidentifiable parameter is named and makes ``success`` false unless
  ``--allow-unidentifiable``; the gradient path and its reason are recorded; an interface the
  FMU lacks is refused with the fix.

Runs are short (1-2 s of model time, 21-41 samples) and start near the truth, with
``--method least_squares``: the file must stay fast on a loaded machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import fmpy
import numpy as np
import pytest

import fmi_adjoint.fmu.problem as problem_module
from fmi_adjoint import read_csv, write_csv
from fmi_adjoint.toolchain import c_compiler
from fmi_adjoint.fmu.experiment import DEFAULT_ATOL, DEFAULT_RTOL
from captured_cli import cli as _cli
from handwritten_fmus import build_fmu
from tolerances import CROSS_IMPLEMENTATION, EXACT, GRADIENT_VS_FD, NOISE_FREE_RECOVERY, ZERO_RESIDUAL_FMU

if c_compiler() is None:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: the FMUs cannot be built", allow_module_level=True)

#: Issue 15: parameters identified at the default Model Exchange tolerances (rtol 1e-8) from
#: CVode data (rtol 1e-10) lie within 1e-7 relative of the truth.  The remaining error is the
#: data's own (CVode's): measured 9.5e-10 (mu), 5.2e-10 (x0_start), 5.4e-10 (k), 5.3e-10 (x_start).
ME_RECOVERY = 1e-7

#: The reported parameter bias must lie within this factor of the true discretization error
#: (issue 15) ...
BIAS_FACTOR = 10.0
#: ... unless the true error is below round-off (relative to the parameter), where only an
#: estimate that is also negligible can be asked for.
ROUND_OFF = 1e-12
NEGLIGIBLE_BIAS = 1e-9

#: Co-Simulation (the FMU's RK4 at h_internal = 1e-4, outputs accurate to ~1e-11) against
#: Model Exchange (Radau IIA, default rtol 1e-8): the identified parameters agree to the solvers'
#: accuracy (issue 15: ~1e-8 relative; measured 2e-14).
INTERFACES_AGREE = 1e-8

TIGHT = ["--rtol", "1e-13", "--atol", "1e-15"]


# ------------------------------------------------------------------------------- helpers --




def _identify(argv, output: Path, expect: int = 0) -> tuple[dict, str]:
    code, _, err = _cli(["identify", *argv, "--method", "least_squares", "-o", output])
    assert code == expect, err
    return json.loads(output.read_text(encoding="utf-8")), err


def _gradient(argv) -> dict:
    code, out, err = _cli(["gradient", *argv, "--json"])
    assert code == 0, err
    return json.loads(out)


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b))


def _sets(values: dict) -> list[str]:
    return [f"--set={name}={value!r}" for name, value in values.items()]


def _one_error(code: int, err: str, *words: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fmi-adjoint: error:"), err
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def _cvode(fmu: Path, t_end: float, samples: int, start: dict, outputs: list[str], inputs=None) -> np.ndarray:
    """fmpy's CVode (rtol 1e-10) on [0, t_end] with output_interval t_end / (samples - 1).
    At an event fmpy records two rows with the same time (left and right limit)."""
    return fmpy.simulate_fmu(str(fmu), fmi_type="ModelExchange", relative_tolerance=1e-10, stop_time=t_end,
                             output_interval=t_end / (samples - 1), start_values=start, output=outputs,
                             input=inputs)


def _write(path: Path, result: np.ndarray, outputs: list[str], *, until: float | None = None,
           repeated: bool = False) -> Path:
    """The CVode result as a data CSV; without ``repeated`` both rows of a repeated time
    stamp are dropped (only the regular samples remain)."""
    t = result["time"]
    keep = np.ones(t.size, dtype=bool)
    if not repeated:
        same = np.diff(t) == 0
        keep &= ~np.r_[same, False] & ~np.r_[False, same]
    if until is not None:
        keep &= t <= until + 1e-12
    write_csv(path, t[keep], {name: np.asarray(result[name][keep], dtype=float) for name in outputs})
    return path


# ------------------------------------------------------------------------------ fixtures --

FMU_NAMES = ("van_der_pol_me", "van_der_pol_me3", "dahlquist", "van_der_pol_mecs", "bouncing_ball", "stair",
             "feedthrough", "state_space3")


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fmu_model_exchange")


@pytest.fixture(scope="module")
def fmus(work) -> dict[str, Path]:
    return {name: Path(build_fmu(name, work)) for name in FMU_NAMES}


#: The models of the accuracy cases: the FMU that makes the data (CVode), outputs, truth, start.
#: 1 s of model time, 21 samples.  Both Van der Pol FMUs fit the same data.
ACCURACY_MODELS = {
    "van_der_pol": ("van_der_pol_me", ["x0", "x1"], {"mu": 1.5, "x0_start": 1.8}, {"mu": 1.4, "x0_start": 1.7}),
    "dahlquist": ("dahlquist", ["x"], {"k": 1.3, "x_start": 1.2}, {"k": 1.2, "x_start": 1.1}),
}
#: case: (identified FMU, model)
ACCURACY_CASES = {
    "van_der_pol_fmi2": ("van_der_pol_me", "van_der_pol"),
    "van_der_pol_fmi3": ("van_der_pol_me3", "van_der_pol"),
    "dahlquist_fmi3": ("dahlquist", "dahlquist"),
}
#: Tolerances loose enough for a discretization error well above round-off.
LOOSE = ["--rtol", "1e-6", "--atol", "1e-8"]


@pytest.fixture(scope="module")
def accuracy_data(work, fmus) -> dict[str, Path]:
    out = {}
    for model, (fmu_name, outputs, truth, _) in ACCURACY_MODELS.items():
        out[model] = _write(work / f"{model}.csv", _cvode(fmus[fmu_name], 1.0, 21, truth, outputs), outputs)
    return out


@pytest.fixture(scope="module")
def tight_fits() -> dict[str, dict]:
    """The reference identifications at --rtol 1e-13, one per model, and the fits of each case
    (filled by accuracy_fit)."""
    return {}


@pytest.fixture(scope="module", params=list(ACCURACY_CASES))
def accuracy_fit(request, work, fmus, accuracy_data, tight_fits, run_once) -> dict:
    """Identified at the default tolerances, at LOOSE tolerances, and (once per model, started
    at the first default result) at --rtol 1e-13 --atol 1e-15.  The reference run's own error
    estimate (runs at 1e-15) is not needed and skipped.  The FMI 3 Van der Pol shares the
    FMI 2 one's reference: the same equations, whose fits agree bit for bit
    (tests/test_fmu_import.py)."""
    # pytest may set a parametrized module fixture up again after another parameter's tests:
    # the fits are kept in tight_fits (not parametrized, so never torn down in between).
    if request.param not in tight_fits:
        tight_fits[request.param] = run_once(f"fmu_model_exchange_{request.param}",
                                             lambda: _accuracy_fits(request.param, work, fmus, accuracy_data,
                                                                    run_once))
    return tight_fits[request.param]


def _accuracy_fits(case, work, fmus, accuracy_data, run_once) -> dict:
    fmu_name, model = ACCURACY_CASES[case]
    _, _, truth, start = ACCURACY_MODELS[model]
    common = ["--fmu", fmus[fmu_name], "--data", accuracy_data[model], "--params", ",".join(truth)]
    default, _ = _identify([*common, *_sets(start)], work / f"{case}_default.json")
    loose, _ = _identify([*common, *_sets(start), *LOOSE], work / f"{case}_loose.json")

    def tight_fit() -> dict:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(problem_module.FmuProblem, "discretization_error", lambda self, x: None)
            return _identify([*common, *TIGHT, *_sets(default["parameters"])], work / f"{case}_tight.json")[0]

    return {"case": case, "truth": truth, "start": start, "default": default, "loose": loose,
            "tight": run_once(f"fmu_model_exchange_tight_{model}", tight_fit)}


# ------------------------------------------------------------------------ 1. accuracy --


@pytest.mark.slow  # identifications through Model Exchange FMUs
def test_model_exchange_recovers_parameters_to_1e7(accuracy_fit):
    payload, truth = accuracy_fit["default"], accuracy_fit["truth"]
    assert payload["success"], payload["message"]
    assert payload["interface"] == "ModelExchange"
    assert payload["gradient_method"]["method"] == "sensitivity"
    assert payload["integrator"]["rtol"] == DEFAULT_RTOL and payload["integrator"]["atol"] == DEFAULT_ATOL
    for name, true in truth.items():
        assert payload["initial"][name] == accuracy_fit["start"][name]
        assert abs(payload["parameters"][name] - true) <= ME_RECOVERY * abs(true), name


def _check_bias(fit: dict, tight: dict, truth: dict) -> None:
    """The reported parameter bias against the true discretization error (fit - tight): within
    BIAS_FACTOR in magnitude, or both negligible when the true error is below round-off."""
    assert tight["success"], tight["message"]
    assert tight["integrator"]["rtol"] == 1e-13 and tight["integrator"]["atol"] == 1e-15
    estimate = fit["discretization_error"]
    assert estimate["tolerances"]["rtol"] == fit["integrator"]["rtol"]
    assert estimate["reference_tolerances"]["rtol"] < estimate["tolerances"]["rtol"]
    assert set(estimate["parameter_bias"]) == set(truth)
    for name, value in truth.items():
        true_error = fit["parameters"][name] - tight["parameters"][name]
        bias = estimate["parameter_bias"][name]
        if abs(true_error) < ROUND_OFF * abs(value):
            assert abs(bias) < NEGLIGIBLE_BIAS * abs(value), (name, true_error, bias)
        else:
            assert abs(bias) <= BIAS_FACTOR * abs(true_error), (name, true_error, bias)
            assert abs(true_error) <= BIAS_FACTOR * abs(bias), (name, true_error, bias)


def test_reported_bias_at_default_tolerances(accuracy_fit):
    """Measured (1 s, 21 samples): at rtol 1e-10 the true error is below round-off in every
    case (the fit at rtol 1e-13 does not move from the default one: 0.0), so the estimate
    must be negligible: measured 9.9e-15 (mu), 2.0e-15 (x0_start), 2.1e-14 (k), 1.0e-16
    (x_start) relative."""
    _check_bias(accuracy_fit["default"], accuracy_fit["tight"], accuracy_fit["truth"])
    assert accuracy_fit["default"]["discretization_error"]["tolerances"] == {"rtol": DEFAULT_RTOL,
                                                                             "atol": DEFAULT_ATOL, "max_step": None}


def test_reported_bias_matches_a_measurable_discretization_error(accuracy_fit):
    """At rtol 1e-6 the error is measurable.  Measured |estimate| / |true| relative errors:
    Van der Pol 9.39e-10 / 9.42e-10 (mu), 1.28e-10 / 1.29e-10 (x0_start); Dahlquist
    8.57e-11 / 9.10e-11 (k), 3.21e-12 / 3.31e-12 (x_start)."""
    loose = accuracy_fit["loose"]
    assert loose["success"], loose["message"]
    assert loose["integrator"]["rtol"] == 1e-6
    _check_bias(loose, accuracy_fit["tight"], accuracy_fit["truth"])
    # The regime this test is for: at least one parameter's error is above round-off.
    assert any(abs(loose["parameters"][n] - accuracy_fit["tight"]["parameters"][n]) >= ROUND_OFF * abs(v)
               for n, v in accuracy_fit["truth"].items())


def test_reported_bias_has_the_sign_of_the_error(accuracy_fit):
    loose, tight = accuracy_fit["loose"], accuracy_fit["tight"]
    for name, value in accuracy_fit["truth"].items():
        true_error = loose["parameters"][name] - tight["parameters"][name]
        if abs(true_error) >= ROUND_OFF * abs(value):
            assert np.sign(loose["discretization_error"]["parameter_bias"][name]) == np.sign(true_error), name


def test_auto_gradient_on_model_exchange_is_sensitivity_with_its_reason(accuracy_fit):
    """``--gradient auto`` (the default) on a Model Exchange FMU: the sensitivity path, and the
    reason counts the right-hand sides against whole-run differences."""
    gm = accuracy_fit["default"]["gradient_method"]
    assert gm["method"] == "sensitivity"
    assert gm["reason"].startswith("Model Exchange interface") and "right-hand sides" in gm["reason"], gm
    assert gm["interface"] == "ModelExchange"


# -------------------------------------------------------------------------- 2. events --

BALL_TRUE_E = 0.8


@pytest.fixture(scope="module")
def ball_run(fmus) -> np.ndarray:
    """Bounces at 0.45, 1.17 and 1.75 s; each recorded by fmpy as two rows of one time."""
    return _cvode(fmus["bouncing_ball"], 2.0, 41, {"e": BALL_TRUE_E}, ["h", "v"])


def test_bouncing_ball_identifies_e_through_model_exchange(fmus, ball_run, work):
    """Data on [0, 1] s (one bounce, at 0.45 s).  Longer windows make the cost jump where a
    further bounce enters the window (on [0, 1.1] s a start at 0.7 ends in a local minimum at
    e = 0.676, on [0, 2] s at 0.691): a property of the data, not of the gradient."""
    data = _write(work / "ball_1s.csv", ball_run, ["h", "v"], until=1.0)
    payload, _ = _identify(["--fmu", fmus["bouncing_ball"], "--data", data, "--params", "e", "--set", "e=0.7",
                            "--gradient", "sensitivity"], work / "ball.json")
    assert payload["success"] and payload["gradient_method"]["method"] == "sensitivity"
    assert payload["interface"] == "ModelExchange"
    assert abs(payload["parameters"]["e"] - BALL_TRUE_E) <= NOISE_FREE_RECOVERY * BALL_TRUE_E


def test_bouncing_ball_data_with_repeated_time_stamps(fmus, ball_run, work):
    """fmpy's two rows at the bounce (CVode puts it 3.5e-11 s before the exact 0.4515 s) meet
    the run's own event, not the run at fmpy's time stamp, where the run is on one side of
    its event.  Fitting g moves the bounce, so it tests that; e alone does not (the first
    bounce's time does not depend on e).  Before, the cost at the truth was 0.77 and the fit
    ended at e = 0.685, g = 8.21 with success true."""
    data = _write(work / "ball_events.csv", ball_run, ["h", "v"], until=1.0, repeated=True)
    assert np.any(np.diff(_written_times(data)) == 0)  # the bounce at 0.45 s: two rows
    common = ["--fmu", fmus["bouncing_ball"], "--data", data, "--params", "e,g"]
    at_truth = _gradient([*common, "--gradient", "sensitivity"])
    assert at_truth["cost"] <= ZERO_RESIDUAL_FMU, at_truth  # the data's own noise-free values
    payload, _ = _identify([*common, "--set", "e=0.78", "--set", "g=9.7", "--gradient", "sensitivity"],
                           work / "ball_events.json")
    assert payload["success"]
    for name, true in (("e", BALL_TRUE_E), ("g", 9.81)):
        assert abs(payload["parameters"][name] - true) <= NOISE_FREE_RECOVERY * true, payload["parameters"]


def test_sensitivities_at_repeated_time_stamps_equal_finite_differences(fmus, ball_run, work):
    """The rows at a repeated time stamp follow the run's event as the parameters move it:
    their derivative is ``g_x D + g_t T + g_p`` at the moving event, against whole-run
    differences (which move the event as well)."""
    data = _write(work / "ball_events_2s.csv", ball_run, ["h", "v"], repeated=True)
    common = ["--fmu", fmus["bouncing_ball"], "--data", data, "--params", "e,g,h_start", "--set", "e=0.75",
              "--set", "g=9.7"]
    sens = _gradient([*common, "--gradient", "sensitivity"])
    fd = _gradient([*common, "--gradient", "fd", "--workers", 1])
    assert sens["method"] == "sensitivity" and fd["method"] == "fd"
    assert sens["cost"] > 1e-3
    for name in ("e", "g", "h_start"):
        assert _rel(sens["gradient"][name], fd["gradient"][name]) <= GRADIENT_VS_FD, (name, sens, fd)


def _written_times(path: Path) -> np.ndarray:
    """The time column as written (without the data reader's checks)."""
    return np.loadtxt(path, delimiter=",", skiprows=1, usecols=0)


def test_sensitivities_across_events_equal_finite_differences(fmus, ball_run, work):
    """Three bounces in [0, 2] s, at e = 0.75: exact sensitivities (the reinitialisation and
    the event times differentiated) against central differences of whole simulations.
    Measured: 3.2e-9 (e), 6.7e-11 (g), 7.2e-10 (h_start) relative; the bound is issue 15's."""
    data = _write(work / "ball_2s.csv", ball_run, ["h", "v"])
    common = ["--fmu", fmus["bouncing_ball"], "--data", data, "--params", "e,g,h_start", "--set", "e=0.75"]
    sens = _gradient([*common, "--gradient", "sensitivity"])
    fd = _gradient([*common, "--gradient", "fd", "--workers", 1])
    assert sens["method"] == "sensitivity" and fd["method"] == "fd"
    assert _rel(sens["cost"], fd["cost"]) <= EXACT
    assert sens["cost"] > 1e-3  # away from the fit: the gradient is not round-off
    for name in ("e", "g", "h_start"):
        assert _rel(sens["gradient"][name], fd["gradient"][name]) <= GRADIENT_VS_FD, (name, sens, fd)


@pytest.mark.parametrize(("params", "setting"), [("e,floor,g", "floor=0.1"), ("e,g,h_start", "k_curve=0.01")],
                         ids=["parameter-in-indicator", "curved-surface"])
def test_sensitivities_where_trial_points_leave_the_event_surface(fmus, ball_run, work, params, setting):
    """The reinitialisation's difference points must stay on the event's side of the surface
    (:func:`~fmi_adjoint.fmu.me_sensitivities._onto_event_side`): with the floor a parameter
    (``z_p != 0``) a replay at ``floor ± δ`` finds the ball on the wrong side, and on a curved
    surface (``z = h + k v²``) a tangent step leaves it at second order; without the projection
    the FMU did not bounce on one side and the gradient was off by orders of magnitude
    (d/dfloor 1.1e11 against 1.37; d/de -0.617 against -0.00706).  Measured after: 2e-9 and
    2.5e-7 relative."""
    data = _write(work / "ball_2s.csv", ball_run, ["h", "v"])
    common = ["--fmu", fmus["bouncing_ball"], "--data", data, "--params", params, "--set", "e=0.75",
              "--set", setting]
    sens = _gradient([*common, "--gradient", "sensitivity"])
    fd = _gradient([*common, "--gradient", "fd", "--workers", 1])
    assert sens["method"] == "sensitivity" and "sensitivity_fallback" not in sens["gradient_path"], sens
    assert sens["cost"] > 1e-3
    for name in params.split(","):
        assert _rel(sens["gradient"][name], fd["gradient"][name]) <= GRADIENT_VS_FD, (name, sens, fd)


def test_a_parameter_that_moves_a_time_event_falls_back_to_differences(fmus, work):
    """stair's time events come every ``period``: FMI gives no derivative of a time event's
    instant, and a replay at ``period ± δ`` would enter event mode where its FMU has none
    (d/dperiod came out as -359 against 3.4e-14).  The worker says so, the problem continues
    with whole-run differences, and RESULT.json says why."""
    t = np.r_[0.0, np.linspace(0.013, 1.413, 20)]  # samples off the event times
    data = work / "stair_period.csv"
    write_csv(data, t, {"level": 2.0 * np.floor(t / 0.5) + np.exp(-t) + 0.01 * np.sin(7 * t)})
    common = ["--fmu", fmus["stair"], "--data", data, "--params", "a,c,period", "--interface", "me"]
    code, out, err = _cli(["gradient", *common, "--gradient", "sensitivity", "--json"])
    assert code == 0, err
    sens = json.loads(out)
    fd = _gradient([*common, "--gradient", "fd", "--workers", 1])
    assert "time event" in sens["gradient_path"]["sensitivity_fallback"], sens
    assert sens["method"] == "fd" and "no exact sensitivities" in err and "time event" in err
    assert sens["gradient"] == fd["gradient"]


# --------------------------------------------------------------------- 3. consistency --

MECS_TRUE = {"mu": 1.5, "x0_start": 1.8}


@pytest.fixture(scope="module")
def mecs_fits(fmus, work) -> dict:
    fmu = fmus["van_der_pol_mecs"]
    data = _write(work / "mecs.csv", _cvode(fmu, 1.0, 21, MECS_TRUE, ["x0", "x1"]), ["x0", "x1"])
    fits = {}
    for interface in ("cs", "me"):
        result = work / f"mecs_{interface}.json"
        payload, _ = _identify(["--fmu", fmu, "--data", data, "--params", "mu,x0_start", "--set", "mu=1.4",
                                "--set", "x0_start=1.7", "--interface", interface], result)
        fits[interface] = {"payload": payload, "result": result}
    return {"fmu": fmu, "data": data, **fits}


def test_both_interfaces_give_the_same_parameters(mecs_fits):
    cs, me = mecs_fits["cs"]["payload"], mecs_fits["me"]["payload"]
    assert cs["success"] and me["success"]
    assert cs["interface"] == "CoSimulation" and me["interface"] == "ModelExchange"
    assert cs["gradient_method"]["method"] == "fd" and me["gradient_method"]["method"] == "sensitivity"
    assert cs["gradient_method"]["interface_reason"] == "requested (--interface cs)"
    assert "discretization_error" not in cs and "discretization_error" in me
    for name, true in MECS_TRUE.items():
        assert _rel(cs["parameters"][name], me["parameters"][name]) <= INTERFACES_AGREE, name
        assert abs(me["parameters"][name] - true) <= ME_RECOVERY * true, name


def test_validate_accepts_each_identified_fmu(mecs_fits, work):
    """``apply`` then ``validate``: fmpy re-simulates the FMU with the identified values (its
    Co-Simulation interface, the FMU's RK4) like the CVode data, relative RMS error."""
    for interface in ("cs", "me"):
        new = work / f"mecs_identified_{interface}.fmu"
        code, _, err = _cli(["apply", mecs_fits[interface]["result"], "--fmu", mecs_fits["fmu"], "-o", new])
        assert code == 0, err
        folder = work / f"mecs_report_{interface}"
        code, _, err = _cli(["validate", new, "--data", mecs_fits["data"], "-o", folder])
        assert code == 0, err
        report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
        for name in ("x0", "x1"):
            assert report["outputs"][name]["relative_rms_error"] <= CROSS_IMPLEMENTATION, (interface, name, report)


def test_a_refused_parameter_column_is_not_taken_for_a_zero_one(fmus, work):
    """van_der_pol_mecs gives directional derivatives, but refuses them for h_internal (the
    Co-Simulation substep, which its Model Exchange equations do not contain).  The refused
    column (NaN) compared with the replays' zero column had slipped past the probe (zero
    scale) and made the gradient NaN; it must be the replays' zero, named as refused."""
    data = _write(work / "mecs_short.csv", _cvode(fmus["van_der_pol_mecs"], 0.5, 11, MECS_TRUE, ["x0", "x1"]),
                  ["x0", "x1"])
    sens = _gradient(["--fmu", fmus["van_der_pol_mecs"], "--data", data, "--params", "mu,h_internal",
                      "--interface", "me", "--gradient", "sensitivity"])
    assert sens["gradient"]["h_internal"] == 0.0 and np.isfinite(sens["gradient"]["mu"]), sens
    assert "refused" in sens["gradient_path"]["columns"]["h_internal"], sens["gradient_path"]


def test_validate_follows_the_identified_interface(mecs_fits, work):
    for interface in ("cs", "me"):
        folder = work / f"mecs_report_interface_{interface}"
        code, _, err = _cli(["validate", mecs_fits["fmu"], "--data", mecs_fits["data"], "-o", folder,
                             "--interface", interface])
        assert code == 0, err


# ------------------------------------------------------------------- 4. variable types --


def test_zero_states_with_an_input_identify_k_and_c(fmus, work):
    """feedthrough (no continuous states, y = k u + c) through Model Exchange, u(t) from a file."""
    times = np.linspace(0.0, 1.0, 21)
    u = np.sin(3.0 * times)
    inputs, data = work / "u.csv", work / "feedthrough.csv"
    write_csv(inputs, times, {"u": u})
    write_csv(data, times, {"y": 1.7 * u + 0.3})
    payload, _ = _identify(["--fmu", fmus["feedthrough"], "--data", data, "--inputs", inputs, "--params", "k,c"],
                           work / "feedthrough.json")
    assert payload["success"] and payload["interface"] == "ModelExchange"
    assert payload["unidentifiable"] == []
    assert payload["initial"] == {"k": 2.0, "c": 0.5}
    for name, true in {"k": 1.7, "c": 0.3}.items():
        assert abs(payload["parameters"][name] - true) <= NOISE_FREE_RECOVERY * true, name


def test_integer_output_is_compared_as_a_number(fmus, work):
    """stair: ``level`` (Real) and ``counter`` (Integer, incremented at time events at 0.5,
    1.0, 1.5 s) as data columns; a from 2.0 (the FMU's start) to 2.5."""
    run = _cvode(fmus["stair"], 2.0, 41, {"a": 2.5}, ["level", "counter"])
    data = _write(work / "stair.csv", run, ["level", "counter"])
    counter = read_csv(data).column("counter")
    assert set(counter) == {0.0, 1.0, 2.0, 3.0}
    payload, _ = _identify(["--fmu", fmus["stair"], "--data", data, "--params", "a", "--interface", "me"],
                           work / "stair.json")
    assert payload["success"] and payload["interface"] == "ModelExchange"
    assert payload["initial"]["a"] == 2.0
    assert abs(payload["parameters"]["a"] - 2.5) <= NOISE_FREE_RECOVERY * 2.5


def test_event_rows_take_model_exchange_and_co_simulation_is_refused(fmus, work):
    """stair data from fmpy with both rows at its time events: Co-Simulation gives one value
    per communication point, so one row of each pair could never match (the fit came out
    3.5 % off with success true).  auto takes Model Exchange and says why; --interface cs is
    refused naming --interface me."""
    run = _cvode(fmus["stair"], 1.2, 13, {"a": 2.5, "c": 1.5}, ["level"])
    data = _write(work / "stair_events.csv", run, ["level"], repeated=True)
    assert np.any(np.diff(_written_times(data)) == 0)
    common = ["--fmu", fmus["stair"], "--data", data, "--params", "a"]
    code, out, err = _cli(["gradient", *common, "--gradient", "fd", "--workers", 1, "--json"])
    assert code == 0, err
    path = json.loads(out)["gradient_path"]
    assert path["interface"] == "ModelExchange" and "repeats the time 0.5 s" in path["interface_reason"], path
    code, _, err = _cli(["gradient", *common, "--gradient", "fd", "--interface", "cs"])
    _one_error(code, err, "repeats the time 0.5 s", "Co-Simulation", "use --interface me")


#: state_space3 runs (u = 1): A[1,2] = 0.7 (start 0.5), gain at its start 1; and gain = 1.25
#: (start 1), A at its start.
SS_RUNS: dict[str, dict] = {"a12": {"A": [-1.0, 0.7, -0.5, -2.0]}, "gain": {"gain": 1.25}}


@pytest.fixture(scope="module")
def state_space_data(fmus, work) -> dict:
    times = np.array([0.0, 2.0])
    inputs = work / "ss_u.csv"
    write_csv(inputs, times, {"u": np.ones(2)})
    signal = np.array([(t, 1.0) for t in times], dtype=[("time", np.float64), ("u", np.float64)])
    out = {"fmu": fmus["state_space3"], "inputs": inputs}
    for label, values in SS_RUNS.items():
        run = _cvode(fmus["state_space3"], 2.0, 41, values, ["y64"], inputs=signal)
        out[label] = _write(work / f"ss_{label}.csv", run, ["y64"])
    return out


def test_array_and_non_real_parameters_are_refused_with_the_fix(state_space_data):
    """A whole array and an UInt8 parameter cannot be identified: exit 2, one line naming the
    variable and the fix."""
    common = ["--fmu", state_space_data["fmu"], "--data", state_space_data["a12"], "--inputs",
              state_space_data["inputs"]]
    code, out, err = _cli(["gradient", *common, "--params", "A"])
    _one_error(code, err, "'A'", "2x2 array", "A[i,j] with i,j in 1..2")
    code, out, err = _cli(["gradient", *common, "--params", "mode"])
    _one_error(code, err, "'mode'", "UInt8", "--set mode=VALUE")


@pytest.mark.parametrize(("data", "name", "true"), [("a12", "A[1,2]", 0.7), ("gain", "gain", 1.25)],
                         ids=["array-element", "float32"])
def test_array_element_and_float32_parameter_are_identified(state_space_data, work, data, name, true):
    """An FMI 3 array element, and a Float32 parameter (it reaches the FMU rounded to 24 bits,
    relative 6e-8, which the data were made with)."""
    payload, _ = _identify(["--fmu", state_space_data["fmu"], "--data", state_space_data[data], "--inputs",
                            state_space_data["inputs"], "--params", name], work / f"ss_{data}.json")
    assert payload["success"]
    assert abs(payload["parameters"][name] - true) <= NOISE_FREE_RECOVERY * true


# ------------------------------------------------------------------ 5. honest results --


@pytest.fixture(scope="module")
def flat_k(fmus, work) -> dict:
    """feedthrough with u = 0: y = c, k has no effect on the output."""
    times = np.linspace(0.0, 1.0, 11)
    inputs, data = work / "u0.csv", work / "feedthrough_u0.csv"
    write_csv(inputs, times, {"u": np.zeros(times.size)})
    write_csv(data, times, {"y": np.full(times.size, 0.3)})
    common = ["--fmu", fmus["feedthrough"], "--data", data, "--inputs", inputs, "--params", "k,c"]
    out = {}
    for label, extra in (("strict", []), ("allowed", ["--allow-unidentifiable"])):
        result = work / f"flat_k_{label}.json"
        code, _, err = _cli(["identify", *common, *extra, "--method", "least_squares", "-o", result])
        assert code in (0, 1), err
        out[label] = {"code": code, "err": err, "payload": json.loads(result.read_text(encoding="utf-8"))}
    return out


def test_unidentifiable_parameter_is_reported(flat_k):
    strict = flat_k["strict"]
    warnings = [line for line in strict["err"].splitlines() if line.startswith("fmi-adjoint: warning: k:")]
    assert len(warnings) == 1 and "--allow-unidentifiable" in warnings[0], strict["err"]
    payload = strict["payload"]
    assert payload["unidentifiable"] == ["k"]
    assert payload["success"] is False
    assert any(text.startswith("k:") for text in payload["warnings"])
    assert abs(payload["parameters"]["c"] - 0.3) <= NOISE_FREE_RECOVERY * 0.3  # c is still fitted


def test_allow_unidentifiable_accepts_the_fit(flat_k):
    allowed = flat_k["allowed"]
    assert allowed["code"] == 0
    assert allowed["payload"]["success"] is True
    assert allowed["payload"]["unidentifiable"] == ["k"]


def test_unidentifiable_fit_exits_with_failure(flat_k):
    assert flat_k["strict"]["code"] == 1


def test_interface_the_fmu_lacks_is_refused(fmus, work):
    ball = work / "ball_refused.csv"
    write_csv(ball, np.linspace(0.0, 1.0, 11), {"h": np.ones(11)})
    result = work / "refused.json"
    code, out, err = _cli(["identify", "--fmu", fmus["bouncing_ball"], "--data", ball, "--params", "e",
                           "--interface", "cs", "-o", result])
    _one_error(code, err, "--interface cs", "no CoSimulation interface", "--interface me")
    assert out == "" and not result.exists()
