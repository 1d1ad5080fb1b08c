"""``--cost time|fourier|orders|pod`` on the command line: the CLI builds the same cost as the
API (same J and gradient), identifies from spectra, plots, and rejects misused options."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fmi_adjoint import Experiment, IdentificationProblem, compile_model, load_model, simulate, write_csv
from fmi_adjoint.identify.data_costs import step_grid
from fmi_adjoint.costs import EngineOrderCost, FourierCoefficients, FourierCost, PODCost, RunUp
from fmi_adjoint.examples import example_path

from test_cli import gradient_json, run
from tolerances import EXACT, GRADIENT_VS_FD

#: Parameters identified from noise-free simulated data: relative accuracy required.
RECOVERY = 1e-6

TRUE = {"c": 1.3, "d": 0.4}
T_END = 4 * np.pi
STEP = 1e-3


@pytest.fixture(scope="module")
def sdof():
    model = compile_model(load_model(example_path("sdof")))
    truth = simulate(model, model.parameter_vector(TRUE), t_end=T_END, step=STEP)
    return model, truth


@pytest.fixture(scope="module")
def series(sdof, tmp_path_factory):
    """The true response at every step (so spectra of data and model use the same grid)."""
    _, truth = sdof
    path = tmp_path_factory.mktemp("costs") / "sdof.csv"
    write_csv(path, truth.t, {"x": truth.outputs()[:, 0]})
    return path


def _api_gradient(model, cost, names=("c", "d")):
    problem = IdentificationProblem([Experiment(model, cost, t_end=T_END, step=STEP)], list(names))
    return problem, problem.evaluate(problem.start, "adjoint")


COMMON = ["sdof", "--params", "c,d", "--step", STEP, "--t-end", T_END]


def test_fourier_cost_from_a_time_series_equals_the_api(sdof, series, capsys):
    model, truth = sdof
    got = gradient_json([*COMMON, "--data", series, "--cost", "fourier", "--channel", "x", "--band", "0.1:0.5",
                         "--window", "hann"], capsys)
    df = 1 / truth.t[-1]
    k = np.arange(1, 40)
    omegas = 2 * np.pi * k[(k * df >= 0.1) & (k * df <= 0.5)] * df
    coef = FourierCoefficients(truth.t, omegas, window="hann")
    A, B = coef(truth.outputs()[:, 0])
    _, ev = _api_gradient(model, FourierCost(coef, "x", measured_A=A, measured_B=B, kind="power"))
    assert got["cost"] == pytest.approx(ev.J, rel=EXACT)
    assert np.allclose(list(got["gradient"].values()), ev.gradient, rtol=EXACT, atol=0)
    assert got["cost_function"] == "fourier"


def _spectrum_csv(path, hz, amplitude, extra=None):
    lines = ["frequency,amplitude" + ("".join(f",{k}" for k in extra) if extra else "")]
    for j, (f, a) in enumerate(zip(hz, amplitude)):
        cells = [repr(float(f)), repr(float(a))] + ([repr(float(extra[k][j])) for k in extra] if extra else [])
        lines.append(",".join(cells))
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_measured_spectrum_csv_gives_zero_cost_at_the_truth(sdof, tmp_path, capsys):
    model, truth = sdof
    hz = np.linspace(0.05, 0.6, 23)
    coef = FourierCoefficients(step_grid(T_END, STEP), 2 * np.pi * hz)
    amplitude = np.hypot(*coef(truth.outputs()[:, 0]))
    spectrum = _spectrum_csv(tmp_path / "spectrum.csv", hz, amplitude)
    args = ["sdof", "--params", "c,d", "--step", STEP, "--t-end", T_END, "--data", spectrum, "--cost", "fourier",
            "--channel", "x", "--spectrum", "amplitude"]
    at_truth = gradient_json([*args, "--set", "c=1.3", "--set", "d=0.4"], capsys)
    assert at_truth["cost"] == pytest.approx(0.0, abs=EXACT * amplitude.max() ** 2)
    nominal = gradient_json(args, capsys)
    _, ev = _api_gradient(model, FourierCost(coef, "x", measured_amplitude=amplitude, kind="amplitude"))
    assert nominal["cost"] == pytest.approx(ev.J, rel=EXACT)
    assert np.allclose(list(nominal["gradient"].values()), ev.gradient, rtol=EXACT, atol=0)
    fd = gradient_json([*args, "--method", "fd"], capsys)
    assert np.allclose(list(nominal["gradient"].values()), list(fd["gradient"].values()), rtol=GRADIENT_VS_FD)


def test_spectrum_weights_and_band_select_frequencies(sdof, tmp_path, capsys):
    _, truth = sdof
    hz = np.linspace(0.05, 0.6, 12)
    amplitude = np.full(hz.size, 0.3)
    weights = np.zeros(hz.size)
    weights[3] = 2.0
    args = ["sdof", "--params", "c,d", "--step", STEP, "--t-end", T_END, "--cost", "fourier", "--channel", "x",
            "--spectrum", "amplitude"]
    weighted = gradient_json([*args, "--data", _spectrum_csv(tmp_path / "w.csv", hz, amplitude, {"weight": weights})],
                             capsys)
    single = gradient_json([*args, "--data", _spectrum_csv(tmp_path / "s.csv", hz[3:4], amplitude[3:4])], capsys)
    assert weighted["cost"] == pytest.approx(2 * single["cost"], rel=EXACT)
    band = gradient_json([*args, "--data", _spectrum_csv(tmp_path / "b.csv", hz, amplitude),
                          "--band", f"{hz[3] - 1e-3}:{hz[3] + 1e-3}"], capsys)
    assert band["cost"] == pytest.approx(single["cost"], rel=EXACT)


def test_orders_cost_equals_the_api(sdof, tmp_path, capsys):
    model, _ = sdof
    # A fictitious run-up: sdof's response analysed as "order 1" of speeds 60..120 rpm.
    runup = RunUp(30.0, 150.0, 0.0, 12.0)
    speeds = np.array([70.0, 80.0, 90.0])
    measured = np.array([0.2, 0.3, 0.25])
    path = tmp_path / "orders.csv"
    path.write_text("speed,amplitude\n" + "".join(f"{s:.17g},{a:.17g}\n" for s, a in zip(speeds, measured)),
                    encoding="utf-8")
    got = gradient_json([*COMMON, "--data", path, "--cost", "orders", "--channel", "x", "--order", "1",
                         "--runup", "30:150:0:12"], capsys)
    cost = EngineOrderCost(step_grid(T_END, STEP), "x", 1.0, speeds, measured, runup)
    _, ev = _api_gradient(model, cost)
    assert got["cost"] == pytest.approx(ev.J, rel=EXACT)
    assert np.allclose(list(got["gradient"].values()), ev.gradient, rtol=EXACT, atol=0)
    band = gradient_json([*COMMON, "--data", path, "--cost", "orders", "--channel", "x", "--order", "1",
                          "--runup", "30:150:0:12", "--speeds", "75:95"], capsys)
    _, ev2 = _api_gradient(model, EngineOrderCost(step_grid(T_END, STEP), "x", 1.0, speeds[1:], measured[1:], runup))
    assert band["cost"] == pytest.approx(ev2.J, rel=EXACT)


def test_pod_cost_equals_the_api(tmp_path, capsys):
    model = compile_model(load_model(example_path("slider_crank")))
    truth = simulate(model, model.parameter_vector({"r": 0.11}), t_end=1.0)
    channels = ("xs", "crank_speed")
    data = truth.outputs()[::5][:, [model.output_index(c) for c in channels]]
    path = tmp_path / "crank.csv"
    write_csv(path, truth.t[::5], dict(zip(channels, data.T)))
    for modes in ("1", "2", "1,2"):
        got = gradient_json(["slider_crank", "--params", "r,c_s", "--data", path, "--cost", "pod", "--modes", modes],
                            capsys)
        cost = PODCost(truth.t[::5], data, channels, modes=tuple(int(m) for m in modes.split(",")))
        problem = IdentificationProblem([Experiment(model, cost, t_end=float(truth.t[::5][-1]))], ["r", "c_s"])
        ev = problem.evaluate(problem.start, "adjoint")
        assert got["cost"] == pytest.approx(ev.J, rel=EXACT)
        assert np.allclose(list(got["gradient"].values()), ev.gradient, rtol=EXACT, atol=0)


def test_identify_from_a_spectrum_writes_result_and_plot(sdof, tmp_path, capsys):
    _, truth = sdof
    hz = np.linspace(0.05, 0.6, 23)
    coef = FourierCoefficients(step_grid(T_END, STEP), 2 * np.pi * hz)
    spectrum = _spectrum_csv(tmp_path / "spectrum.csv", hz, np.hypot(*coef(truth.outputs()[:, 0])))
    result, png = tmp_path / "result.json", tmp_path / "fit.png"
    code, _, err = run(["identify", *COMMON, "--data", spectrum, "--cost", "fourier", "--channel", "x",
                        "--spectrum", "amplitude", "-o", result, "--plot", png], capsys)
    assert code == 0, err
    payload = json.loads(result.read_text())
    for name, value in TRUE.items():
        assert payload["parameters"][name] == pytest.approx(value, rel=RECOVERY)
    assert payload["cost_function"]["cost"] == "fourier"
    assert payload["cost_function"]["kind"] == "amplitude"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("cost, extra", [("time", []), ("pod", ["--modes", "1"])])
def test_plot_for_time_series_costs(sdof, series, tmp_path, capsys, cost, extra):
    out = tmp_path / "fit.png"
    code, _, err = run(["identify", *COMMON, "--data", series, "--cost", cost, *extra, "--plot", out,
                        "--set", "c=1.25", "--set", "d=0.42", "-o", tmp_path / "r.json"], capsys)
    assert code == 0, err
    assert out.read_bytes()[:4] == b"\x89PNG"


BAD = [
    (["--cost", "orders", "--channel", "x", "--order", "6"], "--runup"),
    (["--cost", "orders", "--channel", "x", "--runup", "1:2:0:1"], "--order"),
    (["--cost", "time", "--band", "1:2"], "--band applies to --cost fourier"),
    (["--cost", "pod", "--order", "2"], "--order applies to --cost orders"),
    (["--cost", "fourier", "--channel", "x"], "--frequencies F1,F2,... or --band"),
    (["--cost", "fourier", "--channel", "nope", "--band", "0.1:0.4"], "'nope' is not an output"),
    (["--cost", "fourier", "--channel", "x", "--band", "0.001:0.002"], "holds no harmonic"),
    (["--cost", "fourier", "--channel", "x", "--band", "2:1"], "LO < HI"),
    (["--cost", "pod", "--modes", "0"], "integers from 1"),
    (["--cost", "pod", "--modes", "2"], "from 1 to 1"),
    (["--cost", "fourier", "--band", "0.1:0.4", "--weight", "x=2"], "--cost time only"),
    (["--cost", "orders", "--channel", "x", "--order", "1", "--runup", "30:150:0:12"], "speed"),
    (["--cost", "time", "--channel", "x"], "--channel applies"),
    (["--cost", "pod", "--window", "hann"], "--window applies"),
    (["--cost", "orders", "--channel", "x", "--order", "1", "--runup", "1:2:3"], "N0:N1:T0:T1"),
]


@pytest.mark.parametrize("extra, message", BAD, ids=[m for _, m in BAD])
def test_misused_cost_options_are_named(series, capsys, extra, message):
    code, out, err = run(["gradient", *COMMON, "--data", series, *extra], capsys)
    assert code == 2
    assert message in err, err
    assert err.count("\n") == 1 and out == ""


def test_spectrum_csv_problems_are_named(tmp_path, capsys):
    bad_column = tmp_path / "bad.csv"
    bad_column.write_text("frequency,amp\n0.1,1\n0.2,2\n", encoding="utf-8")
    unsorted = tmp_path / "unsorted.csv"
    unsorted.write_text("frequency,amplitude\n0.2,1\n0.1,2\n0.3,2\n", encoding="utf-8")
    for path, message in ((bad_column, "unknown: amp"), (unsorted, "sort the rows by frequency")):
        code, _, err = run(["gradient", *COMMON, "--data", path, "--cost", "fourier", "--channel", "x"], capsys)
        assert code == 2 and message in err, err
    code, _, err = run(["identify", *COMMON, "--data", unsorted, "--cost", "fourier", "--channel", "x",
                        "--method", "least_squares"], capsys)
    assert code == 2


def test_least_squares_optimizer_needs_the_time_cost(series, tmp_path, capsys):
    out = tmp_path / "r.json"
    code, _, err = run(["identify", *COMMON, "--data", series, "--cost", "pod", "--method", "least_squares",
                        "-o", out], capsys)
    assert code == 2 and "use --method lbfgsb" in err
    assert not out.exists()


def test_continuous_adjoint_method_on_the_command_line(sdof, series, capsys):
    """``--method continuous`` is the BDF continuous adjoint of the API, on the same cost (how it
    converges to the discrete adjoint as h -> 0 is tested in test_continuous_adjoint)."""
    from fmi_adjoint import LeastSquaresCost, continuous_adjoint_gradient

    model, truth = sdof
    discrete = gradient_json([*COMMON, "--data", series], capsys)
    continuous = gradient_json([*COMMON, "--data", series, "--method", "continuous"], capsys)
    assert continuous["cost"] == discrete["cost"]
    traj = simulate(model, model.parameter_vector({}), t_end=T_END, step=STEP)
    cost = LeastSquaresCost(truth.t, truth.outputs()[:, :1], ("x",))
    api = continuous_adjoint_gradient(traj, cost)
    idx = [model.parameter_index(n) for n in ("c", "d")]
    assert np.allclose(list(continuous["gradient"].values()), api.gradient[idx], rtol=EXACT, atol=0)


def test_continuous_adjoint_refuses_spectral_costs_by_name(series, capsys):
    code, _, err = run(["gradient", *COMMON, "--data", series, "--cost", "pod", "--method", "continuous"], capsys)
    assert code == 2 and "integral cost" in err and "discrete adjoint" in err
