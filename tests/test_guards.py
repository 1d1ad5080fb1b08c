"""Guards against silently wrong identifications (issue 32, part 3): each through the command
line (exit code, the message, ``success`` in RESULT.json), and the normal fits raise none.

The regression tests (bench clock, run extended past the model's end time, pooled units, a
parameter that did not move) failed on the code before the guards: exit 0, ``success: true``
and nothing said.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from fmi_adjoint import read_csv, write_csv
from fmi_adjoint.cli.main import main
from fmi_adjoint.errors import DataError
from fmi_adjoint.examples import example_path
from fmi_adjoint.costs import LeastSquaresCost
from fmi_adjoint.identify.guards import (
    BOUND_RTOL,
    COST_UNTRUSTED_RATIO,
    COST_WARNING_RATIO,
    SENSITIVITY_RTOL,
    Notice,
    bound_notices,
    channel_lag,
    check_data_start,
    cost_notices,
    sensitivity_notices,
)
from fmi_adjoint.identify.optimize import IdentificationResult

from captured_cli import error_line
from tolerances import EXACT, NOISE_LEVEL_OF_500_SAMPLES, WITHIN_STD_ERRORS

#: Phrases of the guards' notes and warnings: none may appear in a normal fit.
GUARD_PHRASES = ("far from the start", "past the end time", "different units", "did not move", "cannot see",
                 "ended on a bound", "times the noise floor", "best matched by the model's response shifted")

#: sdof (Oberpeilsteiner 2018, Sec. 3.1.1) at c = 2, d = 0.3: the "measured" system.
SDOF_TRUTH = ("--set", "c=2", "--set", "d=0.3")


def run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out, captured.err


def guard_texts(texts) -> list[str]:
    return [text for text in texts if any(phrase in text for phrase in GUARD_PHRASES)]


@pytest.fixture(scope="module")
def sdof_run(tmp_path_factory):
    """sdof simulated for 25 s at the true values, 1 mm of deterministic noise on x."""
    work = tmp_path_factory.mktemp("guards")
    assert main(["simulate", "sdof", *SDOF_TRUTH, "--t-end", "25", "-o", str(work / "sim.csv")]) == 0
    sim = read_csv(work / "sim.csv")
    x = sim.column("x") + 1e-3 * np.random.default_rng(7).standard_normal(sim.times.size)
    return work, np.round(sim.times, 9), x


def sdof_data(sdof_run, name: str, *, last: float, offset: float = 0.0) -> Path:
    """Every 10th sample of the sdof run up to ``last`` s, times shifted by ``offset``."""
    work, times, x = sdof_run
    keep = np.flatnonzero(times <= last + 1e-9)[::10]
    path = work / name
    write_csv(path, times[keep] + offset, {"x": x[keep]})
    return path


# -- data far from t = 0 -------------------------------------------------------------------
@pytest.mark.parametrize("command", ["identify", "gradient"])
def test_data_on_the_bench_clock_are_refused(sdof_run, tmp_path, capsys, command):
    data = sdof_data(sdof_run, "bench.csv", last=5.0, offset=1234.5)
    result = tmp_path / "RESULT.json"
    extra = ["-o", result] if command == "identify" else []
    code, out, err = run([command, "sdof", "--data", data, "--params", "c,d", *extra], capsys)
    assert code == 2
    line = error_line(err)
    assert "bench.csv" in line and "t = 1234.5 s" in line
    assert "subtract 1234.5 s" in line and "--t-end 1239.5" in line
    assert not result.exists() and out == ""


def test_an_explicit_t_end_covers_an_offset(sdof_run, capsys):
    # Data from 30 to 35 s: after the model's end time (18.85 s) and six record lengths from
    # t = 0, refused by default; --t-end 35 states that the run covers the first 30 s.
    data = sdof_data(sdof_run, "late.csv", last=5.0, offset=30.0)
    code, _, err = run(["gradient", "sdof", "--data", data, "--params", "c,d"], capsys)
    assert code == 2 and "subtract 30 s" in error_line(err)
    code, out, err = run(["gradient", "sdof", "--data", data, "--params", "c,d", "--t-end", "35", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["cost"] > 0
    assert guard_texts(err.splitlines()) == []


def test_samples_before_t0_are_refused(sdof_run, capsys):
    data = sdof_data(sdof_run, "pretrigger.csv", last=5.0, offset=-0.5)
    code, _, err = run(["identify", "sdof", "--data", data, "--params", "c,d"], capsys)
    assert code == 2
    line = error_line(err)
    assert "t = -0.5 s" in line and "add 0.5 s" in line


@pytest.mark.parametrize(("first", "refused"), [(0.5, False), (4.9, False), (18.9, True)])
def test_the_start_offset_limit_is_the_record_length_and_the_end_time(first, refused):
    # A record of 5 s on a model ending at 18.85 s: an offset up to max(5, 18.85) s is a
    # trimmed transient or a late window, beyond it a clock offset.
    times = first + np.linspace(0.0, 5.0, 11)
    if refused:
        with pytest.raises(DataError, match="far from the start"):
            check_data_start("d.csv", times, model_t_end=18.85, t_end=None)
    else:
        check_data_start("d.csv", times, model_t_end=18.85, t_end=None)
    check_data_start("d.csv", times, model_t_end=18.85, t_end=float(times[-1]))  # stated: accepted


# -- data beyond the end time ----------------------------------------------------------------
def test_data_beyond_an_explicit_t_end_are_refused(sdof_run, capsys):
    data = sdof_data(sdof_run, "long.csv", last=20.0)
    code, _, err = run(["identify", "sdof", "--data", data, "--params", "c,d", "--t-end", "10"], capsys)
    assert code == 2
    line = error_line(err)
    assert "--t-end 10 s ends before the last sample" in line and "give --t-end 20" in line


def test_data_beyond_the_model_end_time_are_refused_without_t_end(sdof_run, tmp_path, capsys):
    # Before issue 26 (part 4) the run was extended to the last sample, with a note, exit 0.
    data = sdof_data(sdof_run, "long.csv", last=20.0)
    result = tmp_path / "RESULT.json"
    code, _, err = run(["identify", "sdof", "--data", data, "--params", "c,d", "-o", result], capsys)
    assert code == 2 and not result.exists()
    line = error_line(err)
    assert "long.csv: the last sample at t = 20 s lies past the end time 18.8496 s of sdof" in line
    assert "Give --t-end 20" in line and "@window=0:18.8496" in line
    # An explicit --t-end states the end: accepted, and the truth is found.
    code, _, err = run(["identify", "sdof", "--data", data, "--params", "c,d", "--t-end", "20", "-o", result], capsys)
    payload = json.loads(result.read_text(encoding="utf-8"))
    assert code == 0 and payload["success"] is True and guard_texts(payload["warnings"]) == []
    assert abs(payload["parameters"]["c"] - 2.0) <= WITHIN_STD_ERRORS * payload["std_errors"]["c"]


# -- channels of different units -------------------------------------------------------------
@pytest.fixture(scope="module")
def two_mass_data(tmp_path_factory):
    """two_mass at c2 = 1500 N/m: x2 [m] and v1 [m/s], each with 1 % of its RMS as noise."""
    work = tmp_path_factory.mktemp("units")
    assert main(["simulate", "two_mass", "--set", "c2=1500", "-o", str(work / "sim.csv")]) == 0
    sim = read_csv(work / "sim.csv")
    rng = np.random.default_rng(3)
    columns = {}
    for name in ("x2", "v1"):
        y = sim.column(name)
        columns[name] = y + 0.01 * np.sqrt(np.mean(y**2)) * rng.standard_normal(y.size)
    write_csv(work / "two.csv", sim.times[::4], {k: v[::4] for k, v in columns.items()})
    return work / "two.csv"


def test_pooled_channels_of_different_units_are_warned(two_mass_data, tmp_path, capsys):
    """With ``--channel-weighting unit`` (the pooled variance of before issue 26); by default the
    channels are weighted by their noise levels and nothing is pooled (no warning)."""
    code, _, err = run(["gradient", "two_mass", "--data", two_mass_data, "--params", "c2"], capsys)
    assert code == 0 and not any("different units" in line for line in err.splitlines())
    result = tmp_path / "RESULT.json"
    code, _, err = run(["identify", "two_mass", "--data", two_mass_data, "--params", "c2", "--channel-weighting",
                        "unit", "-o", result], capsys)
    payload = json.loads(result.read_text(encoding="utf-8"))
    warnings = [line for line in err.splitlines() if "different units" in line]
    assert len(warnings) == 1 and warnings[0].startswith("fmi-adjoint: warning: the channels x2 [m], v1 [m/s]")
    assert "standard errors are wrong" in warnings[0] and "--scale x2=" in warnings[0]
    assert guard_texts(payload["warnings"]) == [warnings[0].removeprefix("fmi-adjoint: warning: ")]
    # A warning on the weighting, not on the fit (c2 is found: the data are consistent).
    assert code == 0 and payload["success"] is True
    assert abs(payload["parameters"]["c2"] - 1500.0) <= WITHIN_STD_ERRORS * payload["std_errors"]["c2"]
    # gradient says it too.
    code, _, err = run(["gradient", "two_mass", "--data", two_mass_data, "--params", "c2", "--channel-weighting",
                        "unit"], capsys)
    assert code == 0 and sum("different units" in line for line in err.splitlines()) == 1


def test_the_suggested_scales_silence_the_unit_warning(two_mass_data, capsys):
    code, _, err = run(["gradient", "two_mass", "--data", two_mass_data, "--params", "c2", "--channel-weighting",
                        "unit"], capsys)
    suggested = err.split("from the data: ")[1].rstrip(".\n").split()
    assert suggested[0::2] == ["--scale", "--scale"]
    # The suggested scale is each channel's noise level: 1 % of its RMS.
    sim = read_csv(two_mass_data)
    for option in suggested[1::2]:
        name, value = option.split("=")
        rms = float(np.sqrt(np.mean(sim.column(name) ** 2)))
        assert float(value) == pytest.approx(0.01 * rms, rel=NOISE_LEVEL_OF_500_SAMPLES)
    code, _, err = run(["gradient", "two_mass", "--data", two_mass_data, "--params", "c2", *suggested], capsys)
    assert code == 0 and guard_texts(err.splitlines()) == []
    # A scale (or weight) on one of two units leaves one unscaled unit: nothing pooled unweighted.
    code, _, err = run(["gradient", "two_mass", "--data", two_mass_data, "--params", "c2", "--weight", "v1=2"], capsys)
    assert code == 0 and guard_texts(err.splitlines()) == []


# -- a fit that does not move ----------------------------------------------------------------
@pytest.fixture(scope="module")
def sdof_unused(tmp_path_factory):
    """sdof with a parameter k_unused that no expression uses."""
    text = example_path("sdof").read_text(encoding="utf-8")
    marker = "[parameters]\n"
    text = text.replace(marker, marker + 'k_unused = { value = 3.0, unit = "N/m", bounds = [0.1, 10.0] }\n')
    path = tmp_path_factory.mktemp("unused") / "sdof_unused.toml"
    path.write_text(text, encoding="utf-8")
    return path


FOURIER = ("--cost", "fourier", "--channel", "x", "--band", "0.1:2")


@pytest.mark.parametrize(("params", "head"), [
    ("c,k_unused", "k_unused (zero gradient: the compared outputs do not depend on it) did not move from its start"),
    ("k_unused", "the fit did not move from its start: k_unused (zero gradient"),
])
def test_a_parameter_that_did_not_move_makes_the_fit_untrusted(sdof_run, sdof_unused, tmp_path, capsys, params,
                                                               head):
    # The Fourier cost has no Fisher information (no statistics): before the guard this fit
    # reported success with k_unused at its start value and nothing said.
    data = sdof_data(sdof_run, "fourier.csv", last=5.0)
    result = tmp_path / "RESULT.json"
    code, _, err = run(["identify", sdof_unused, "--data", data, "--params", params, *FOURIER, "-o", result], capsys)
    payload = json.loads(result.read_text(encoding="utf-8"))
    warnings = [line for line in err.splitlines() if "did not move" in line]
    assert len(warnings) == 1 and warnings[0].startswith(f"fmi-adjoint: warning: {head}")
    assert "Drop such a parameter from --params" in warnings[0]
    assert guard_texts(payload["warnings"]) == [warnings[0].removeprefix("fmi-adjoint: warning: ")]
    assert code == 1 and payload["success"] is False
    assert payload["parameters"]["k_unused"] == payload["initial"]["k_unused"] == 3.0
    # --allow-unidentifiable accepts a parameter the outputs do not depend on (still said).
    code, _, err = run(["identify", sdof_unused, "--data", data, "--params", params, *FOURIER, "-o", result,
                        "--allow-unidentifiable"], capsys)
    assert code == 0 and json.loads(result.read_text(encoding="utf-8"))["success"] is True
    assert any("did not move" in line for line in err.splitlines())


def test_an_untrusted_notice_is_a_warning():
    with pytest.raises(ValueError, match="warning=True"):
        Notice("x", untrusted=True)


# -- the guards of the fit (issue 26, part 8) -------------------------------------------------
def fit(argv, tmp_path, capsys, name="RESULT.json"):
    """identify with RESULT.json: (exit code, stderr lines, RESULT.json)."""
    result = tmp_path / name
    code, _, err = run(["identify", *argv, "-o", result], capsys)
    return code, err.splitlines(), json.loads(result.read_text(encoding="utf-8"))


def one(texts, phrase: str) -> str:
    found = [text for text in texts if phrase in text]
    assert len(found) == 1, texts
    return found[0]


def fake_result(names, parameters, cost: float = 1.0) -> IdentificationResult:
    values = np.asarray(parameters, dtype=float)
    return IdentificationResult(names=tuple(names), initial=values, parameters=values, cost_initial=cost, cost=cost,
                                cost_history=[cost], gradient_norm_history=[0.0], iterations=1, simulations=1,
                                success=True, message="", method="lbfgsb", std_errors=None, correlation=None,
                                seconds=0.0)


def test_a_cost_far_above_the_noise_floor_makes_the_fit_untrusted(sdof_run, tmp_path, capsys):
    # The stiffness fixed at 1.5 N/m (the data's is 2): the damping alone cannot explain the data.
    # Before: a warning with success true and exit 0.
    data = sdof_data(sdof_run, "normal.csv", last=5.0)
    code, err, payload = fit(["sdof", "--data", data, "--params", "d", "--set", "c=1.5"], tmp_path, capsys)
    text = one(payload["warnings"], "times the noise floor")
    ratio = float(text.split(" is ")[1].split(" times")[0])
    assert ratio > COST_UNTRUSTED_RATIO and f"the final cost {payload['cost']:.4g}" in text
    for cause in ("a wrong local minimum (try --starts)", "structure", "wrong units or channel mapping",
                  "time offset"):
        assert cause in text
    assert "the result is not trusted (success false)" in text
    assert f"fmi-adjoint: warning: {text}" in err
    assert code == 1 and payload["success"] is False
    # The phase drift of a wrong stiffness is no constant time lag: that guard stays silent.
    assert not [w for w in payload["warnings"] if "best matched" in w]


def test_the_cost_guard_thresholds():
    floor = 1e-3
    assert cost_notices(fake_result(["c"], [1.0], COST_WARNING_RATIO * floor / 2), floor) == ()
    warned = cost_notices(fake_result(["c"], [1.0], (COST_WARNING_RATIO + COST_UNTRUSTED_RATIO) / 2 * floor), floor)
    assert len(warned) == 1 and warned[0].warning and not warned[0].untrusted
    assert "other start values with --set NAME=VALUE" in cost_notices(
        fake_result(["c"], [1.0], 2 * COST_UNTRUSTED_RATIO * floor), floor, starts_available=False)[0].text
    (untrusted,) = cost_notices(fake_result(["c"], [1.0], 2 * COST_UNTRUSTED_RATIO * floor), floor)
    assert untrusted.untrusted
    assert cost_notices(fake_result(["c"], [1.0], 1.0), None) == ()  # no noise floor estimated: nothing said
    # Noise-free data: the floor is the signal's curvature, the ratio only warns.
    (hint,) = cost_notices(fake_result(["c"], [1.0], 2 * COST_UNTRUSTED_RATIO * floor), floor, noise_resolved=False)
    assert hint.warning and not hint.untrusted and "noise-free" in hint.text


def test_a_parameter_on_a_bound_is_warned_with_the_bound(sdof_run, tmp_path, capsys):
    data = sdof_data(sdof_run, "normal.csv", last=5.0)
    code, err, payload = fit(["sdof", "--data", data, "--params", "c,d", "--bounds", "c=0.5:1.8"], tmp_path, capsys)
    text = one(payload["warnings"], "ended on a bound")
    assert text.startswith("c ended on a bound: c = 1.8, its upper bound 1.8 (--bounds c=0.5:1.8).")
    assert "widen the bound" in text and "the model cannot explain the data with c inside it" in text
    assert f"fmi-adjoint: warning: {text}" in err
    # One warning for the bound (result_warnings' own is replaced, not repeated).
    assert sum("ended on a bound" in line for line in err) == 1


def test_a_parameter_near_a_bound_counts_as_on_it():
    problem = SimpleNamespace(lower=np.array([0.5, 0.0]), upper=np.array([1.8, 10.0]))
    near = fake_result(["c", "d"], [1.8 * (1 - BOUND_RTOL / 2), 0.3])
    (notice,) = bound_notices(problem, near)
    assert notice.text.startswith("c ended on a bound") and "its upper bound 1.8" in notice.text
    assert not notice.untrusted
    # A bound at 0: relative to the width of the bounds.
    assert "its lower bound 0" in bound_notices(problem, fake_result(["c", "d"], [1.0, 10 * BOUND_RTOL / 2]))[0].text
    assert bound_notices(problem, fake_result(["c", "d"], [1.8 * (1 - 100 * BOUND_RTOL), 0.3])) == ()


def test_an_output_that_cannot_see_a_parameter_is_warned_before_the_fit(sdof_run, sdof_unused, tmp_path, capsys):
    data = sdof_data(sdof_run, "normal.csv", last=5.0)
    code, err, payload = fit([sdof_unused, "--data", data, "--params", "c,d,k_unused"], tmp_path, capsys)
    text = one(payload["warnings"], "cannot see")
    assert text.startswith("the compared outputs x cannot see k_unused (zero sensitivity: they do not depend on it) "
                           "at the start values")
    assert "Drop such a parameter from --params" in text
    # Said before the fit's first iteration.
    said = err.index(f"fmi-adjoint: warning: {text}")
    assert said < min(k for k, line in enumerate(err) if " iter " in line)
    assert code == 1 and payload["success"] is False  # k_unused is also not determined (Fisher information)


def test_a_negligible_sensitivity_is_warned():
    times = np.linspace(0.0, 1.0, 11)
    cost = LeastSquaresCost(times, np.zeros((11, 2)), ("y1", "y2"))
    matrix = np.random.default_rng(4).standard_normal((22, 3))
    matrix[:, 1] *= SENSITIVITY_RTOL / 10  # seen, but far less than the others
    matrix[:, 2] *= SENSITIVITY_RTOL * 10  # small, but not negligible
    problem = SimpleNamespace(has_residuals=True, names=("a", "b", "c"), start=np.ones(3), lower=np.zeros(3),
                              upper=np.full(3, 10.0), experiments=[SimpleNamespace(cost=cost, name="run")],
                              residuals=lambda x, jacobian=True: (np.zeros(22), matrix))
    (notice,) = sensitivity_notices(problem)
    assert notice.text.startswith("the compared outputs y1, y2 cannot see b (its reach |dr/dp| |p| is ")
    assert "negligible" in notice.text and " c " not in notice.text and not notice.untrusted
    matrix[:, 1] = 0.0
    assert "b (zero sensitivity" in sensitivity_notices(problem)[0].text


@pytest.fixture(scope="module")
def sdof_amplitude(tmp_path_factory):
    """sdof with the excitation's amplitude A as a parameter: a time offset cannot be absorbed by it."""
    text = example_path("sdof").read_text(encoding="utf-8")
    text = text.replace("[parameters]\n", '[parameters]\nA = { value = 1.0, unit = "N", bounds = [0.1, 10.0] }\n')
    text = text.replace('expression = "sin(t)"', 'expression = "A*sin(t)"')
    path = tmp_path_factory.mktemp("amplitude") / "sdof_A.toml"
    path.write_text(text, encoding="utf-8")
    return path


#: The time offset put into the data (the sensor lags the model).
DELAY = 0.3


def delayed_data(sdof_run) -> Path:
    """The sdof record of 5 s (every 10th sample) delayed by DELAY: x(t - DELAY), 0 before."""
    work, times, x = sdof_run
    keep = np.flatnonzero(times <= 5.0 + 1e-9)[::10]
    path = work / "delayed.csv"
    write_csv(path, times[keep], {"x": np.interp(times[keep] - DELAY, times, x, left=0.0)})
    return path


def test_a_channel_that_lags_the_model_is_warned_with_the_lag(sdof_run, sdof_amplitude, tmp_path, capsys):
    data = delayed_data(sdof_run)
    interval = float(np.diff(read_csv(data).times)[0])
    truth = ["--set", "c=2", "--set", "d=0.3"]
    code, err, payload = fit([sdof_amplitude, "--data", data, "--params", "A", *truth, "--set", "A=0.8"], tmp_path,
                             capsys)
    text = one(payload["warnings"], "best matched by the model's response shifted by")
    assert text.startswith("channel x of delayed is best matched by the model's response shifted by +")
    lag = float(text.split("shifted by ")[1].split(" s ")[0])
    assert abs(lag - DELAY) <= interval  # within one sample interval
    assert "the data lag behind the model" in text and "--params x.delay" in text
    assert f"--time-shift {lag:.4g} with --data FILE@window=0:" in text
    assert f"fmi-adjoint: warning: {text}" in err
    # The suggested fix: the lag is gone, the amplitude found.
    window = float(read_csv(data).times[-1]) - lag
    code, err, payload = fit([sdof_amplitude, "--data", f"{data}@window=0:{window:.6g}", "--time-shift", f"{lag:.6g}",
                              "--params", "A", *truth, "--set", "A=0.8"], tmp_path, capsys, "shifted.json")
    assert guard_texts(payload["warnings"]) == [] and code == 0 and payload["success"] is True
    assert abs(payload["parameters"]["A"] - 1.0) <= WITHIN_STD_ERRORS * payload["std_errors"]["A"]


def test_channel_lag_of_shifted_and_periodic_signals():
    times = np.linspace(0.0, 10.0, 1001)
    interval = times[1] - times[0]
    model = np.sin(2 * np.pi * times)
    noise = 0.01 * np.random.default_rng(1).standard_normal(times.size)
    # A sine is its own best match one period on (the longer lag is not taken): no lag.
    lag, correlation, at_zero = channel_lag(times, model, model + noise)
    assert abs(lag) <= interval and correlation == at_zero
    # Shifted by five samples either way: found (not the same shift plus or minus a period).
    for shift in (5 * interval, -5 * interval):
        lag, correlation, at_zero = channel_lag(times, model, np.sin(2 * np.pi * (times - shift)) + noise)
        assert abs(lag - shift) <= interval / 10 and correlation > at_zero
    assert channel_lag(times, np.ones_like(times), model) == (0.0, 0.0, 0.0)  # a constant response: no lag


# -- normal fits raise no guard --------------------------------------------------------------
def test_a_normal_fit_raises_no_guard(sdof_run, tmp_path, capsys):
    data = sdof_data(sdof_run, "normal.csv", last=5.0)
    result = tmp_path / "RESULT.json"
    code, _, err = run(["identify", "sdof", "--data", data, "--params", "c,d", "-o", result], capsys)
    payload = json.loads(result.read_text(encoding="utf-8"))
    assert guard_texts(err.splitlines()) == [] and guard_texts(payload["warnings"]) == []
    assert code == 0 and payload["success"] is True
    for name, truth in (("c", 2.0), ("d", 0.3)):
        assert abs(payload["parameters"][name] - truth) <= WITHIN_STD_ERRORS * payload["std_errors"][name]


@pytest.mark.slow
def test_the_bundled_engine_mount_fit_raises_no_guard(tmp_path, capsys):
    """The one guard it raises is the bound of d_H2 (the cubic hydro damping, which the 100 N
    sweep barely excites: it ends on its lower bound 0.01, as it did before the guards)."""
    result = tmp_path / "RESULT.json"
    data = example_path("engine_mount").with_name("engine_mount_measured.csv")
    code, _, err = run(["identify", "engine_mount", "--data", data, "--params", "c_E1,c_E2,d_E,d_H2", "-o", result],
                       capsys)
    payload = json.loads(result.read_text(encoding="utf-8"))
    assert payload["active_bounds"] == ["d_H2"] and code == 0 and payload["success"] is True
    bound = "d_H2 ended on a bound: d_H2 = 0.01, its lower bound 0.01 (--bounds d_H2=0.01:100)."
    assert [text[:len(bound)] for text in guard_texts(payload["warnings"])] == [bound]
    assert [line for line in guard_texts(err.splitlines()) if bound not in line] == []
    assert all(abs(payload["parameters"][n] - payload["initial"][n]) > EXACT * abs(payload["initial"][n])
               for n in payload["parameters"])


@pytest.mark.parametrize("name", ["beam_pod", "triple_pendulum"])
def test_the_other_bundled_measurements_raise_no_guard(name, capsys):
    # beam_pod: 11 channels of one unit; triple_pendulum: 20 s of data on a 20 s model.
    data = example_path(name).with_name(f"{name}_measured.csv")
    first = {"beam_pod": "EI", "triple_pendulum": "m_c"}[name]
    code, _, err = run(["gradient", name, "--data", data, "--params", first], capsys)
    assert code == 0 and guard_texts(err.splitlines()) == []


# -- the same guards on an FMU ---------------------------------------------------------------
@pytest.fixture(scope="module")
def sdof_fmu(tmp_path_factory):
    path = tmp_path_factory.mktemp("fmu") / "sdof.fmu"
    assert main(["export", "sdof", "--fmi", "2", "-o", str(path)]) == 0
    return path


def test_fmu_data_guards(sdof_fmu, sdof_run, capsys):
    bench = sdof_data(sdof_run, "bench.csv", last=5.0, offset=1234.5)
    code, _, err = run(["gradient", "--fmu", sdof_fmu, "--data", bench, "--params", "c,d"], capsys)
    assert code == 2 and "subtract 1234.5 s" in error_line(err)
    # Past the FMU's DefaultExperiment stopTime (the model's 6 pi s): refused without --t-end.
    long = sdof_data(sdof_run, "long.csv", last=20.0)
    code, _, err = run(["gradient", "--fmu", sdof_fmu, "--data", long, "--params", "c,d"], capsys)
    assert code == 2 and "long.csv: the last sample at t = 20 s lies past the end time" in error_line(err)
    assert "of sdof.fmu" in error_line(err)
    code, _, err = run(["gradient", "--fmu", sdof_fmu, "--data", long, "--params", "c,d", "--t-end", "20"], capsys)
    assert code == 0 and guard_texts(err.splitlines()) == []
