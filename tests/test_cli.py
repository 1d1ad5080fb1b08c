"""The ``fmi-adjoint`` command line: examples, simulate, gradient, identify, demo."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fmi_adjoint import (HHT, GeneralizedAlpha, LeastSquaresCost, adjoint_gradient, compile_model, load_model, read_csv,
                         simulate, write_csv)
from fmi_adjoint.cli.main import main
from fmi_adjoint.examples import example_names, example_path
from fmi_adjoint.examples.engine_mount_data import TRUE_VALUES

from tolerances import ADJOINT_VS_FORWARD, EXACT, GRADIENT_VS_FD, NOISE_FREE_COST_DROP

#: Parameters identified from noise-free simulated data: relative accuracy required.
RECOVERY = 1e-6

#: Identified values from noisy data lie within this many standard errors of the truth.
STD_ERRORS = 3.0

CONSOLE_SCRIPT = Path(sys.executable).parent / "fmi-adjoint"
GRADIENT_KEYS = {"cost", "gradient", "method", "forward_seconds", "gradient_seconds", "cost_function", "engine",
                 "integrator"}
RESULT_KEYS = {"parameters", "initial", "cost_history", "iterations", "simulations", "success", "std_errors"}


def run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out, captured.err


def gradient_json(argv, capsys) -> dict:
    code, out, err = run(["gradient", *argv, "--json"], capsys)
    assert code == 0, err
    return json.loads(out)


def _model(name, values=None):
    model = load_model(example_path(name))
    return compile_model(model.with_values(values) if values else model)


def _engine(name):
    from fmi_adjoint.engines import NativeEngine

    return NativeEngine.build(load_model(example_path(name)))


def path_header(path) -> list[str]:
    return Path(path).read_text(encoding="utf-8").splitlines()[0].split(",")


def _relerr(a, b):
    return abs(a - b) / max(abs(a), abs(b))


# -- examples ------------------------------------------------------------------------------


def test_examples_lists_the_bundled_models(capsys):
    code, out, err = run(["examples"], capsys)
    assert code == 0
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    assert {"sdof", "engine_mount", "slider_crank"} <= set(names)
    assert names == example_names() == sorted(names)
    assert "Lauss" in out and "Oberpeilsteiner" in out


# -- simulate ------------------------------------------------------------------------------


def test_simulate_sdof_csv_equals_api(tmp_path, capsys):
    out_csv = tmp_path / "out.csv"
    code, out, err = run(["simulate", "sdof", "-o", out_csv], capsys)
    assert code == 0, err
    assert out == ""
    assert str(out_csv) in err
    model = _model("sdof")
    traj = simulate(model)
    written = read_csv(out_csv)
    assert path_header(out_csv) == ["time", "x"]
    assert written.columns == tuple(model.output_names) == ("x",)
    assert np.array_equal(written.times, traj.t)
    assert np.array_equal(written.values, traj.outputs())
    assert written.times[-1] == 6 * math.pi
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv"]


def test_simulate_writes_one_column_per_output(tmp_path, capsys):
    # The Python engine for an exact comparison with the API (the default native engine is
    # compared with the FMU in tests/test_simulate_engines.py).
    out_csv = tmp_path / "crank.csv"
    code, _, err = run(["simulate", "slider_crank", "--t-end", "0.2", "--engine", "python", "-o", out_csv], capsys)
    assert code == 0, err
    model = _model("slider_crank")
    traj = simulate(model, t_end=0.2)
    assert path_header(out_csv) == ["time", "xs", "slider_acc", "rod_force_x", "crank_speed"]
    assert path_header(out_csv)[1:] == list(model.output_names)
    written = read_csv(out_csv)
    assert np.array_equal(written.times, traj.t)
    assert np.array_equal(written.values, traj.outputs())


def test_simulate_to_stdout(capsys):
    code, out, err = run(["simulate", "sdof", "--step", "1e-2", "--t-end", "1"], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "time,x"
    table = np.array([[float(v) for v in line.split(",")] for line in lines[1:]])
    model = _model("sdof")
    traj = simulate(model, t_end=1.0, step=1e-2)
    assert np.array_equal(table[:, 0], traj.t)
    assert np.array_equal(table[:, 1:], traj.outputs())


# Each option alone, on top of a short, coarse baseline; compared with the API.
BASELINE = ["--t-end", "3", "--step", "1e-2"]
OPTION_CASES = {
    "set_c": (["--set", "c=2.0"], {"values": {"c": 2.0}}),
    "set_two": (["--set", "c=2.0", "--set", "d=0.1"], {"values": {"c": 2.0, "d": 0.1}}),
    "set_m_with_spaces": (["--set", " m = 1.7 "], {"values": {"m": 1.7}}),
    "alpha": (["--alpha", "-0.3"], {"solver": HHT(alpha=-0.3)}),
    "alpha_zero": (["--alpha", "0"], {"solver": HHT(alpha=0.0)}),
    # generalized-alpha (Arnold & Brüls 2007) with the given and with the model's default rho_inf
    "generalized_alpha": (["--integrator", "generalized_alpha", "--rho-inf", "0.5"],
                          {"solver": GeneralizedAlpha(rho_inf=0.5)}),
    "generalized_alpha_default": (["--integrator", "generalized_alpha"], {"solver": GeneralizedAlpha(rho_inf=0.8)}),
    "rho_inf_before_integrator": (["--rho-inf", "0", "--integrator", "generalized_alpha"],
                                  {"solver": GeneralizedAlpha(rho_inf=0.0)}),
    "step": (["--step", "5e-3"], {"step": 5e-3}),
    "t_end": (["--t-end", "2.5"], {"t_end": 2.5}),
}


@pytest.fixture(scope="module")
def sdof_baseline():
    return simulate(_model("sdof"), t_end=3.0, step=1e-2)


@pytest.mark.parametrize("case", list(OPTION_CASES))
def test_simulate_options_take_effect(case, tmp_path, capsys, sdof_baseline):
    extra, api = OPTION_CASES[case]
    out_csv = tmp_path / "out.csv"
    code, _, err = run(["simulate", "sdof", *BASELINE, *extra, "-o", out_csv], capsys)
    assert code == 0, err
    model = _model("sdof")
    traj = simulate(
        model,
        model.parameter_vector(api.get("values", {})),
        t_end=api.get("t_end", 3.0),
        step=api.get("step", 1e-2),
        solver=api.get("solver"),
    )
    written = read_csv(out_csv)
    assert np.array_equal(written.times, traj.t)
    assert np.array_equal(written.values, traj.outputs())
    # ... and the option changed the result.
    base = sdof_baseline
    same = base.t.shape == traj.t.shape and np.array_equal(base.outputs(), traj.outputs())
    assert not same
    if "t_end" in api:
        assert written.times[-1] == api["t_end"]
    if "step" in api:
        assert written.times[1] == api["step"] and written.times.size == 601


def test_simulate_slider_crank_with_generalized_alpha_equals_api(tmp_path, capsys):
    """``--integrator generalized_alpha --rho-inf 0.5`` on a constrained model with a
    configuration-dependent mass matrix: each engine's CSV equals that engine's API run with
    ``GeneralizedAlpha(rho_inf=0.5)`` bit for bit, and differs from the model's HHT run."""
    model, engine = _model("slider_crank"), _engine("slider_crank")
    solver = GeneralizedAlpha(rho_inf=0.5)
    api = {"python": simulate(model, t_end=0.3, solver=solver), "native": engine.simulate(t_end=0.3, solver=solver)}
    hht = simulate(model, t_end=0.3)
    for name, traj in api.items():
        out_csv = tmp_path / f"{name}.csv"
        code, _, err = run(["simulate", "slider_crank", "--t-end", "0.3", "--integrator", "generalized_alpha",
                            "--rho-inf", "0.5", "--engine", name, "-o", out_csv], capsys)
        assert code == 0, err
        written = read_csv(out_csv)
        assert np.array_equal(written.times, traj.t), name
        assert np.array_equal(written.values, traj.outputs()), name
        k = model.output_index("slider_acc")
        assert np.max(np.abs(written.values[:, k] - hht.outputs()[:, k])) > 1e-4 * np.max(np.abs(hht.outputs()[:, k]))


# -- gradient ------------------------------------------------------------------------------

PERTURBED = {"c_s": 620.0, "d_s": 2.7, "m_s": 0.85}
CRANK_PARAMS = "c_s,d_s,m_s,m_r,phi0"


@pytest.fixture(scope="module")
def crank_data(tmp_path_factory):
    """slider_crank measurements (0.2 s) at perturbed parameters, two experiments."""
    folder = tmp_path_factory.mktemp("crank")
    engine = _engine("slider_crank")
    model = engine.compiled
    files = {}
    for label, settings in {"a": {}, "b": {"T0": 1.0, "phi0": 0.2}}.items():
        # The native engine, as the commands use it: at the data's own values J is exactly 0.
        traj = engine.simulate(model.parameter_vector({**PERTURBED, **settings}), t_end=0.2)
        Y = traj.outputs()
        xs, acc = Y[:, model.output_index("xs")], Y[:, model.output_index("slider_acc")]
        files[label] = folder / f"{label}.csv"
        write_csv(files[label], traj.t, {"xs": xs, "slider_acc": acc})
        files[f"{label}_xs"] = folder / f"{label}_xs.csv"
        write_csv(files[f"{label}_xs"], traj.t, {"xs": xs})
        files[f"{label}_acc"] = folder / f"{label}_acc.csv"
        write_csv(files[f"{label}_acc"], traj.t, {"slider_acc": acc})
    return files


@pytest.mark.parametrize("method", ["adjoint", "forward", "fd"])
def test_gradient_json_format(method, crank_data, capsys):
    result = gradient_json(["slider_crank", "--data", crank_data["a"], "--params", CRANK_PARAMS, "--method", method],
                           capsys)
    assert set(result) == GRADIENT_KEYS
    assert result["method"] == method
    assert result["engine"] == "native"
    assert list(result["gradient"]) == CRANK_PARAMS.split(",")
    assert all(isinstance(v, float) and math.isfinite(v) for v in result["gradient"].values())
    for key in ("cost", "forward_seconds", "gradient_seconds"):
        assert isinstance(result[key], float) and math.isfinite(result[key]) and result[key] >= 0, key
    assert result["cost"] > 0


def test_gradient_methods_agree(crank_data, capsys):
    argv = ["slider_crank", "--data", crank_data["a"], "--params", CRANK_PARAMS]
    adj = gradient_json([*argv, "--method", "adjoint"], capsys)
    fwd = gradient_json([*argv, "--method", "forward"], capsys)
    fd = gradient_json([*argv, "--method", "fd"], capsys)
    assert adj["cost"] == fwd["cost"] == fd["cost"]
    for name in CRANK_PARAMS.split(","):
        a, f, d = adj["gradient"][name], fwd["gradient"][name], fd["gradient"][name]
        assert abs(a) > 0, name
        assert _relerr(a, f) <= ADJOINT_VS_FORWARD, (name, a, f)
        assert _relerr(a, d) <= GRADIENT_VS_FD, (name, a, d)


def test_gradient_with_generalized_alpha(crank_data, capsys):
    """``gradient --integrator generalized_alpha``: the scheme is reported and used (another
    cost than HHT's), its adjoint gradient agrees with forward sensitivities, and with finite
    differences of the same discrete cost (as test_gradient_methods_agree for HHT) on the
    position channel xs.  With slider_acc in the data the finite differences are not a
    reference at GRADIENT_VS_FD: generalized-alpha carries the round-off of the accelerations
    on through its recursion (fmi_adjoint/integrate/schemes.py, GeneralizedAlpha), so the
    cost is noisy at 1e-10 relative (HHT: 1e-11; rho_inf = 0.9: 3.5e-9, whatever the Newton
    rtol) and fourth-order differences at step 1e-3 err by up to 1.2e-6 (m_s; rho_inf = 0.9:
    3.6e-5), with random sign, and less at larger steps, while the adjoint matches the forward
    sensitivities to 1e-9."""
    options = ["--integrator", "generalized_alpha", "--rho-inf", "0.8"]
    argv = ["slider_crank", "--data", crank_data["a"], "--params", CRANK_PARAMS]
    adj = gradient_json([*argv, *options, "--method", "adjoint"], capsys)
    fwd = gradient_json([*argv, *options, "--method", "forward"], capsys)
    hht = gradient_json(argv, capsys)
    assert adj["integrator"] == fwd["integrator"] == "generalized_alpha(rho_inf=0.8)"
    assert hht["integrator"] == "hht(alpha=-0.1)"
    assert adj["cost"] == fwd["cost"]
    assert _relerr(adj["cost"], hht["cost"]) > 1e-3
    for name in CRANK_PARAMS.split(","):
        a, f = adj["gradient"][name], fwd["gradient"][name]
        assert abs(a) > 0, name
        assert _relerr(a, f) <= ADJOINT_VS_FORWARD, (name, a, f)
    argv_xs = ["slider_crank", "--data", crank_data["a_xs"], "--params", CRANK_PARAMS, *options]
    adj_xs = gradient_json([*argv_xs, "--method", "adjoint"], capsys)
    fd_xs = gradient_json([*argv_xs, "--method", "fd"], capsys)
    assert fd_xs["integrator"] == "generalized_alpha(rho_inf=0.8)"
    for name in CRANK_PARAMS.split(","):
        a, d = adj_xs["gradient"][name], fd_xs["gradient"][name]
        assert abs(a) > 0, name
        assert _relerr(a, d) <= GRADIENT_VS_FD, (name, a, d)


def test_gradient_cost_equals_api(crank_data, capsys):
    result = gradient_json(["slider_crank", "--data", crank_data["a"], "--params", "c_s,d_s"], capsys)
    model = _model("slider_crank")
    data = read_csv(crank_data["a"])
    traj = simulate(model, t_end=0.2)
    api = adjoint_gradient(traj, LeastSquaresCost(data.times, data.values, data.columns))
    assert result["cost"] == pytest.approx(api.J, rel=EXACT)
    for name in ("c_s", "d_s"):
        assert result["gradient"][name] == pytest.approx(api.gradient[model.parameter_index(name)], rel=EXACT)


def test_gradient_text_output(crank_data, capsys):
    code, out, err = run(["gradient", "slider_crank", "--data", crank_data["a"], "--params", "c_s,d_s"], capsys)
    assert code == 0, err
    assert out.startswith("cost J = ")
    assert "dJ/dc_s" in out and "dJ/dd_s" in out and "adjoint" in out


def test_gradient_set_changes_the_start(crank_data, capsys):
    """--set moves the point where the gradient is taken; at the data's own values J = 0."""
    argv = ["slider_crank", "--data", crank_data["a"], "--params", "c_s,d_s"]
    nominal = gradient_json(argv, capsys)
    at_truth = gradient_json([*argv, *sum((["--set", f"{k}={v!r}"] for k, v in PERTURBED.items()), [])], capsys)
    assert nominal["cost"] > 0
    assert at_truth["cost"] == 0.0
    assert at_truth["gradient"] == {"c_s": 0.0, "d_s": 0.0}


def test_multi_experiment_cost_is_the_sum(crank_data, capsys):
    a, b = crank_data["a"], crank_data["b"]
    spec_b = f"{b}@T0=1.0,phi0=0.2"
    # (phi0 is set per experiment, so it is not identified: identified values override '@' settings)
    params = ["--params", "c_s,d_s,m_s"]
    both = gradient_json(["slider_crank", "--data", a, "--data", spec_b, *params], capsys)
    only_a = gradient_json(["slider_crank", "--data", a, *params], capsys)
    only_b = gradient_json(["slider_crank", "--data", spec_b, *params], capsys)
    without_settings = gradient_json(["slider_crank", "--data", b, *params], capsys)
    assert only_a["cost"] > 0 and only_b["cost"] > 0
    assert both["cost"] == pytest.approx(only_a["cost"] + only_b["cost"], rel=EXACT)
    for name in ("c_s", "d_s", "m_s"):
        expected = only_a["gradient"][name] + only_b["gradient"][name]
        assert both["gradient"][name] == pytest.approx(expected, rel=EXACT, abs=EXACT * abs(only_a["gradient"][name]))
    # The settings after '@' matter (else this test would prove nothing).
    assert _relerr(without_settings["cost"], only_b["cost"]) > 1e-3


def test_multi_experiment_identification(crank_data, tmp_path, capsys):
    result_json = tmp_path / "result.json"
    code, _, err = run(
        ["identify", "slider_crank", "--data", crank_data["a"], "--data", f"{crank_data['b']}@T0=1.0,phi0=0.2",
         "--params", "c_s,d_s,m_s", "--method", "least_squares", "-o", result_json],
        capsys,
    )
    assert code == 0, err
    result = json.loads(result_json.read_text())
    assert result["data"] == [str(crank_data["a"]), f"{crank_data['b']}@T0=1.0,phi0=0.2"]
    assert result["initial"] == {"c_s": 500.0, "d_s": 2.0, "m_s": 0.8}
    for name in ("c_s", "d_s", "m_s"):
        assert _relerr(result["parameters"][name], PERTURBED[name]) <= RECOVERY, name


def test_identify_with_generalized_alpha_recovers_its_own_data(tmp_path, capsys):
    """Data simulated with generalized-alpha (rho_inf = 0.8) at perturbed parameters:
    ``identify --integrator generalized_alpha --rho-inf 0.8`` recovers them (measured 4e-10
    relative), which HHT, with another discretization error, does not (measured 2e-3..1e-2)."""
    engine = _engine("slider_crank")
    model = engine.compiled
    traj = engine.simulate(model.parameter_vector(PERTURBED), t_end=0.2, solver=GeneralizedAlpha(rho_inf=0.8))
    data = tmp_path / "ga.csv"
    write_csv(data, traj.t, {out: traj.outputs()[:, model.output_index(out)] for out in ("xs", "slider_acc")})
    results = {}
    for label, extra in {"ga": ["--integrator", "generalized_alpha", "--rho-inf", "0.8"], "hht": []}.items():
        result_json = tmp_path / f"{label}.json"
        code, _, err = run(["identify", "slider_crank", "--data", data, "--params", "c_s,d_s,m_s", "--method",
                            "least_squares", *extra, "-o", result_json], capsys)
        assert code == 0, err
        results[label] = json.loads(result_json.read_text())
    assert results["ga"]["integrator"] == "generalized_alpha(rho_inf=0.8)"
    assert results["hht"]["integrator"] == "hht(alpha=-0.1)"
    for name in ("c_s", "d_s", "m_s"):
        assert _relerr(results["ga"]["parameters"][name], PERTURBED[name]) <= RECOVERY, name
    assert max(_relerr(results["hht"]["parameters"][k], v) for k, v in PERTURBED.items()) > 100 * RECOVERY


def test_weight_and_scale(crank_data, capsys):
    """W = diag(w / s^2): the cost of each channel is multiplied by w / s^2."""
    params = ["--params", "c_s,d_s"]
    j_xs = gradient_json(["slider_crank", "--data", crank_data["a_xs"], *params], capsys)
    j_acc = gradient_json(["slider_crank", "--data", crank_data["a_acc"], *params], capsys)
    plain = gradient_json(["slider_crank", "--data", crank_data["a"], *params], capsys)
    assert plain["cost"] == pytest.approx(j_xs["cost"] + j_acc["cost"], rel=EXACT)
    cases = [
        (["--weight", "xs=4"], 4.0, 1.0),
        (["--scale", "slider_acc=2"], 1.0, 0.25),
        (["--weight", "xs=3", "--scale", "xs=0.5", "--weight", "slider_acc=0.5"], 12.0, 0.5),
        (["--weight", "slider_acc=0"], 1.0, 0.0),
    ]
    for options, f_xs, f_acc in cases:
        got = gradient_json(["slider_crank", "--data", crank_data["a"], *params, *options], capsys)
        assert got["cost"] == pytest.approx(f_xs * j_xs["cost"] + f_acc * j_acc["cost"], rel=EXACT), options
        for name in ("c_s", "d_s"):
            expected = f_xs * j_xs["gradient"][name] + f_acc * j_acc["gradient"][name]
            assert got["gradient"][name] == pytest.approx(expected, rel=EXACT), (options, name)
    single = gradient_json(["slider_crank", "--data", crank_data["a_xs"], *params, "--scale", "xs=10"], capsys)
    assert single["cost"] == pytest.approx(j_xs["cost"] / 100.0, rel=EXACT)


# -- identify ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sdof_data(tmp_path_factory):
    """sdof simulated from c = 1.3, d = 0.4 at step 1e-2 (made with the CLI itself)."""
    path = tmp_path_factory.mktemp("sdof") / "sdof_data.csv"
    assert main(["simulate", "sdof", "--step", "1e-2", "--set", "c=1.3", "--set", "d=0.4", "-o", str(path)]) == 0
    return path


@pytest.mark.parametrize("method", ["lbfgsb", "least_squares"])
def test_identify_sdof(method, sdof_data, tmp_path, capsys):
    result_json = tmp_path / "result.json"
    code, out, err = run(
        ["identify", "sdof", "--data", sdof_data, "--params", "c,d", "--step", "1e-2", "--method", method,
         "-o", result_json],
        capsys,
    )
    assert code == 0, err
    # The result goes to the file only (no --json); stdout holds the parameter table.
    assert out.splitlines()[0].split()[:4] == ["parameter", "initial", "identified", "std"], out
    result = json.loads(result_json.read_text(encoding="utf-8"))
    assert RESULT_KEYS <= set(result)
    assert result["initial"] == {"c": 1.0, "d": 0.5}
    assert result["success"] is True
    assert result["method"] == method
    assert abs(result["parameters"]["c"] - 1.3) <= RECOVERY * 1.3
    assert abs(result["parameters"]["d"] - 0.4) <= RECOVERY * 0.4
    assert set(result["std_errors"]) == {"c", "d"}
    assert all(v is not None and v >= 0 for v in result["std_errors"].values())
    assert result["iterations"] >= 1 and result["simulations"] >= result["iterations"]
    history = result["cost_history"]
    assert len(history) >= 2 and history[-1] < NOISE_FREE_COST_DROP * history[0]
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_identify_json_to_stdout_and_bounds(sdof_data, capsys):
    code, out, err = run(
        ["identify", "sdof", "--data", sdof_data, "--params", "c,d", "--step", "1e-2", "--method", "least_squares",
         "--bounds", "c=0.5:1.2"],
        capsys,
    )
    # The true c = 1.3 lies outside the bounds: the fit converges onto the upper bound.
    assert code == 0, err
    result = json.loads(out)
    assert result["parameters"]["c"] == pytest.approx(1.2, rel=EXACT)
    assert result["active_bounds"] == ["c"]


def test_identify_not_converged_exits_1(sdof_data, tmp_path, capsys):
    result_json = tmp_path / "result.json"
    code, _, err = run(
        ["identify", "sdof", "--data", sdof_data, "--params", "c,d", "--step", "1e-2", "--max-iter", "1",
         "-o", result_json],
        capsys,
    )
    assert code == 1, err
    assert "fmi-adjoint: error" not in err
    result = json.loads(result_json.read_text())
    assert result["success"] is False


def test_identify_at_exact_fit_writes_valid_json(tmp_path):
    """BUG: starting at the exact parameters (zero residual) the correlation is 0/0.

    ``IdentificationProblem.statistics`` emits a RuntimeWarning to stderr and
    ``identify`` writes the non-standard token NaN into RESULT.json.
    """
    data = tmp_path / "data.csv"
    assert main(["simulate", "sdof", "--step", "1e-2", "--t-end", "3", "-o", str(data)]) == 0
    result_json = tmp_path / "result.json"
    proc = subprocess.run(
        [sys.executable, "-m", "fmi_adjoint", "identify", "sdof", "--data", str(data), "--params", "c,d",
         "--step", "1e-2", "-o", str(result_json)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    text = result_json.read_text()

    def reject(token):
        raise ValueError(f"non-standard JSON token {token}")

    problems = []
    if "Warning" in proc.stderr:
        problems.append(f"warning on stderr: {proc.stderr!r}")
    try:
        result = json.loads(text, parse_constant=reject)
    except ValueError as exc:
        problems.append(f"RESULT.json is not valid JSON: {exc}")
        result = json.loads(text)
    assert result["parameters"] == pytest.approx({"c": 1.0, "d": 0.5}, rel=EXACT)
    assert not problems, problems


# -- real processes ------------------------------------------------------------------------


def test_module_and_console_script_run(tmp_path):
    assert CONSOLE_SCRIPT.exists(), CONSOLE_SCRIPT
    proc = subprocess.run([str(CONSOLE_SCRIPT), "examples"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert [line.split()[0] for line in proc.stdout.splitlines()] == example_names()
    out_csv = tmp_path / "out.csv"
    proc = subprocess.run(
        [sys.executable, "-m", "fmi_adjoint", "simulate", "sdof", "--step", "1e-2", "--t-end", "2", "-o", str(out_csv)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONWARNINGS": "error"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == f"wrote 201 rows to {out_csv}"
    traj = simulate(_model("sdof"), t_end=2.0, step=1e-2)
    assert np.array_equal(read_csv(out_csv).values, traj.outputs())


def test_identify_progress_lines_on_stderr(sdof_data, tmp_path):
    """One progress line per iteration on stderr, the result on stdout (real process)."""
    proc = subprocess.run(
        [str(CONSOLE_SCRIPT), "identify", "sdof", "--data", str(sdof_data), "--params", "c,d", "--step", "1e-2",
         "--method", "least_squares"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    # The iteration lines; a line names each stage where it begins; the parameter table follows.
    lines = [line for line in proc.stderr.splitlines() if " iter " in line]
    stage_lines = [line for line in proc.stderr.splitlines() if line.startswith("stage ")]
    assert stage_lines == [f"stage {k}/{len(result['strategy']['stages'])}: {s['stage']}"
                           for k, s in enumerate(result["strategy"]["stages"], start=1)]
    assert len(lines) == len(result["cost_history"]) and lines
    # The default strategy fits data windows first: each stage's lines carry its name and count
    # its own iterations from 0.
    counts: dict[str, int] = {}
    for line, cost in zip(lines, result["cost_history"]):
        stage, _, rest = line.partition("iter ")
        k = counts[stage] = counts.get(stage, -1) + 1
        assert f"iter {rest}".startswith(f"iter {k:4d}  J={cost:.6e}"), line
        assert "c=" in line and "d=" in line
    assert list(counts) == [f"[{s['stage']}] " for s in result["strategy"]["stages"]]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("how", ["module", "console_script"])
def test_real_process_error(how, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("time,x\n0,1\n1,oops\n")
    command = [sys.executable, "-m", "fmi_adjoint"] if how == "module" else [str(CONSOLE_SCRIPT)]
    out_json = tmp_path / "r.json"
    proc = subprocess.run(
        [*command, "identify", "sdof", "--data", str(bad), "--params", "c", "-o", str(out_json)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fmi-adjoint: error: ")
    assert "bad.csv" in lines[0] and "line 3" in lines[0] and "'oops'" in lines[0]
    assert proc.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv"]


# -- demo ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_demo(tmp_path, capsys):
    folder = tmp_path / "demo_out"
    code, out, err = run(["demo", "-o", folder], capsys)
    assert code == 0, err
    result = json.loads((folder / "engine_mount_result.json").read_text(encoding="utf-8"))
    assert set(result["parameters"]) == set(TRUE_VALUES)
    assert result["true_values"] == TRUE_VALUES
    assert result["initial"] == {"c_E1": 7.38e4, "c_E2": 4.0e9, "d_E": 0.5, "d_H2": 1.2}
    for name, true in TRUE_VALUES.items():
        value, std = result["parameters"][name], result["std_errors"][name]
        assert std is not None and std > 0, name
        assert abs(value - true) <= STD_ERRORS * std, (name, value, true, std)
    png = folder / "engine_mount_fit.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000
    assert sorted(p.name for p in folder.iterdir()) == ["engine_mount_fit.png", "engine_mount_report.html",
                                                        "engine_mount_result.json"]
    from test_report import assert_report_is_result

    assert_report_is_result((folder / "engine_mount_report.html").read_text(encoding="utf-8"), result)
    for name in TRUE_VALUES:
        assert name in out
    assert "iter" in err
