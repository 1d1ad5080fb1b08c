"""Measured inputs (issue 26, part 7): a data channel drives a model input, interpolated
linearly, as a prescribed displacement (here) or in any expression.

The model is a mass on a spring and damper to a base whose displacement ``z`` is an
``[inputs]`` entry, prescribed as ``b = z``: a shaker under a mass.  The checks:

* a table sampled at the step times drives the base exactly as the closed-form displacement
  does (linear interpolation is exact at its samples; the drive's velocity at the start is the
  first segment's slope, the table's rate, which fails if the rate were taken as 0);
* both engines agree, and the adjoint gradient equals central differences with the input;
* ``identify --input z=CHANNEL`` recovers the stiffness from a semicolon CSV in mm (converted to
  the input's m) and from an MDF4 file, to the same values; a window of the record keeps the
  input aligned with the compared channels;
* each bad input is one error line and exit code 2.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from fmi_adjoint.bench.preprocess import Preprocessing
from fmi_adjoint.cli.loading import load_problem, problem_spec
from fmi_adjoint.engines import choose_engine
from fmi_adjoint.identify.data_costs import CostOptions
from fmi_adjoint.model import InputSignal, PrescribedMotion
from fmi_adjoint.model_file import parse_model

from captured_cli import cli, error_line
from tolerances import ENGINES_AGREE, EXACT, GRADIENT_VS_FD, SAME_DATA_OTHER_FORMAT, SECANT_START, WITHIN_STD_ERRORS

MODEL = """
[model]
name = "shaker_mass"
description = "a mass on a spring and damper to a base driven by a shaker"

[simulation]
t_end = 1.0
step = 1e-3

[parameters]
m = { value = 1.0, unit = "kg" }
k = { value = 100.0, unit = "N/m", bounds = [10.0, 1000.0] }
d = { value = 1.0, unit = "N*s/m", bounds = [0.01, 100.0] }

[inputs]
z = { value = 0.0, unit = "m", description = "base displacement (the shaker)" }

[[coordinates]]
name = "x"
mass = "m"

[[coordinates]]
name = "b"
mass = "1"

[[forces]]
type = "linear_spring_damper"
name = "mount"
coordinates = ["x", "b"]
stiffness = "k"
damping = "d"

[[prescribed]]
coordinate = "b"
expression = "z"

[[outputs]]
name = "x"
expression = "x"
unit = "m"
"""

#: The shaker's displacement in closed form (m) and the truth of the synthetic record.
SHAKER = "0.01*sin(5*t) + 0.004*sin(23*t)"
TRUTH = {"k": 130.0, "d": 1.5}
NOISE = 1e-6


def _shaker(t: np.ndarray) -> np.ndarray:
    return 0.01 * np.sin(5 * t) + 0.004 * np.sin(23 * t)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return parse_model(MODEL, "shaker_mass.toml")


def _measured(model, t: np.ndarray, z: np.ndarray):
    return dataclasses.replace(model, signals=(InputSignal("z", ((tuple(t), tuple(z)),), source="test"),))


def test_a_table_at_the_step_times_drives_the_base_as_the_closed_form_does(model):
    t = np.linspace(0.0, 1.0, 1001)  # the step times
    driven = choose_engine(_measured(model, t, _shaker(t)), "native").engine.simulate()
    exact = choose_engine(dataclasses.replace(model, prescribed=(PrescribedMotion("b", SHAKER),)),
                          "native").engine.simulate()
    b = list(driven.model.coordinate_names).index("b")
    # The drive's initial velocity is the first segment's slope (the table's rate): 0 if the
    # rate were dropped, 0.092 m/s for the closed form.
    assert driven.v[0, b] == pytest.approx((_shaker(t[1]) - _shaker(t[0])) / t[1], rel=EXACT)
    assert exact.v[0, b] == pytest.approx(0.01 * 5 + 0.004 * 23, rel=EXACT)
    # Positions: the drive sees the samples exactly; the start's velocity differs by the
    # secant's error (about 5e-8 m/s), which the damper passes on over the run (SECANT_START).
    assert np.allclose(driven.q[:, b], exact.q[:, b], rtol=0, atol=EXACT)
    assert np.max(np.abs(driven.outputs() - exact.outputs())) < SECANT_START * np.max(np.abs(exact.outputs()))


def test_both_engines_agree_and_the_adjoint_equals_central_differences(model):
    t = np.linspace(0.0, 1.0, 337)  # samples off the step grid: interpolated between them
    measured = _measured(model, t, _shaker(t))
    native = choose_engine(measured, "native").engine
    python = choose_engine(measured, "python").engine
    p = native.compiled.parameter_vector()
    a, b = native.simulate(p), python.simulate(p)
    assert np.max(np.abs(a.outputs() - b.outputs())) <= ENGINES_AGREE * np.max(np.abs(a.outputs()))
    assert np.max(np.abs(a.v - b.v)) <= ENGINES_AGREE * np.max(np.abs(a.v))

    from fmi_adjoint.costs import LeastSquaresCost

    data = 1.01 * a.outputs()[::10]
    cost = LeastSquaresCost(a.t[::10], data, ("x",))
    gradient = native.adjoint_gradient(a, cost).gradient
    k = native.compiled.parameter_index("k")
    h = 1e-4 * p[k]
    plus, minus = p.copy(), p.copy()
    plus[k] += h
    minus[k] -= h
    fd = (native.adjoint_gradient(native.simulate(plus), cost).J
          - native.adjoint_gradient(native.simulate(minus), cost).J) / (2 * h)
    assert gradient[k] == pytest.approx(fd, rel=GRADIENT_VS_FD)


@pytest.fixture(scope="module")
def bench(tmp_path_factory, model):
    """The record of the truth: x in m with noise, the shaker in mm, ';' and decimal commas, and
    the same channels in an MDF4 file."""
    work = tmp_path_factory.mktemp("shaker")
    (work / "shaker_mass.toml").write_text(MODEL)
    t = np.linspace(0.0, 1.0, 1001)
    truth = dataclasses.replace(model, prescribed=(PrescribedMotion("b", SHAKER),)).with_values(TRUTH)
    x = choose_engine(truth, "native").engine.simulate().outputs()[:, 0]
    x = x + NOISE * np.random.default_rng(7).standard_normal(x.size)
    csv = work / "bench.csv"
    lines = ["time;x [m];z_shaker [mm]"] + [f"{a:.6f};{b:.12e};{1e3 * c:.12e}".replace(".", ",")
                                            for a, b, c in zip(t, x, _shaker(t))]
    csv.write_text("\n".join(lines) + "\n")
    asammdf = pytest.importorskip("asammdf")
    mdf = asammdf.MDF(version="4.10")
    mdf.append([asammdf.Signal(x, t, name="x", unit="m"), asammdf.Signal(1e3 * _shaker(t), t, name="z_shaker",
                                                                      unit="mm")])
    mf4 = work / "bench.mf4"
    mdf.save(mf4, overwrite=True)
    return work


def _identify(work, data: str, *extra: str) -> dict:
    out = work / f"result_{abs(hash((data, extra)))}.json"
    code, _, err = cli(["identify", str(work / "shaker_mass.toml"), "--data", data, "--params", "k,d",
                        "--input", "z=z_shaker", "--strategy", "single", "-o", str(out), *extra])
    assert code == 0, err
    return json.loads(out.read_text())


def test_identify_with_the_shaker_channel_recovers_the_mount_from_csv_and_mdf4(bench):
    from_csv = _identify(bench, str(bench / "bench.csv"))
    for name, value in TRUTH.items():
        estimate = from_csv["parameters"][name]
        assert abs(estimate - value) <= WITHIN_STD_ERRORS * from_csv["std_errors"][name]
    assert from_csv["data_preprocessing"][0]["inputs"] == {"z": "z_shaker"}
    from_mdf = _identify(bench, str(bench / "bench.mf4"))
    for name in TRUTH:
        assert from_mdf["parameters"][name] == pytest.approx(from_csv["parameters"][name], rel=SAME_DATA_OTHER_FORMAT)


def test_a_time_shift_keeps_the_input_aligned_with_the_compared_channels(bench):
    """The record on the bench's clock (from 1234.5 s) with ``--time-shift start``: the input is
    shifted with the compared channels (unshifted, it would be held at its first value over the
    run, or refused as not covering it)."""
    rows = (bench / "bench.csv").read_text().splitlines()
    shifted = [rows[0]] + [f"{float(r.split(';')[0].replace(',', '.')) + 1234.5:.6f}".replace(".", ",") + ";"
                           + r.split(";", 1)[1] for r in rows[1:]]
    (bench / "clock.csv").write_text("\n".join(shifted) + "\n")
    result = _identify(bench, str(bench / "clock.csv"), "--time-shift", "start")
    assert result["data_preprocessing"][0]["time_shift"] == pytest.approx(1234.5, rel=EXACT)
    on_zero = _identify(bench, str(bench / "bench.csv"))
    for name in TRUTH:
        assert result["parameters"][name] == pytest.approx(on_zero["parameters"][name], rel=SAME_DATA_OTHER_FORMAT)


def _problem_with(work, inputs):
    spec = problem_spec(str(work / "shaker_mass.toml"), [str(work / "bench.csv")], {}, ["k"], t_end=None, step=None,
                        cost=CostOptions(), preprocessing=Preprocessing(inputs=inputs))
    return load_problem(spec)[1]


def test_the_driving_channel_is_not_compared_and_the_experiments_model_carries_the_record(bench):
    problem = _problem_with(bench, (("z", "z_shaker"),))
    experiment = problem.experiments[0]
    assert experiment.cost.channels == ("x",)
    (signal,) = experiment.model.model.signals
    assert signal.measured and signal.input == "z" and "z_shaker [mm], converted to m" in signal.source
    assert signal.tables[0][1][1] == pytest.approx(_shaker(np.array([1e-3]))[0], rel=EXACT)


@pytest.mark.parametrize("args, message", [
    (["--input", "z=nope"], r"has no channel 'nope' to drive the input 'z'\. Channels: x, z_shaker; give one"),
    (["--input", "k=z_shaker"], r"'k' is not an input of model 'shaker_mass'; inputs: z"),
    (["--input", "z"], r"--input 'z': expected INPUT=CHANNEL"),
    (["--input", "z=z_shaker", "--input", "z=x"], r"the input 'z' is given twice"),
    (["--input", "z=z_shaker", "--t-end", "2"], r"recorded from 0 s to 1 s .* covers 0 s to 2 s; give --t-end 1"),
])
def test_bad_inputs_are_one_error_line_and_exit_code_2(bench, args, message):
    code, _, err = cli(["identify", str(bench / "shaker_mass.toml"), "--data", str(bench / "bench.csv"),
                        "--params", "k", *args])
    assert code == 2
    assert __import__("re").search(message, error_line(err)), err


def test_gaps_and_incompatible_units_in_the_driving_channel_are_refused(bench):
    asammdf = pytest.importorskip("asammdf")
    t = np.linspace(0.0, 1.0, 1001)
    z = 1e3 * _shaker(t)
    z[9] = np.nan
    mdf = asammdf.MDF(version="4.10")
    mdf.append([asammdf.Signal(z, t, name="z_shaker", unit="mm")])
    mdf.save(bench / "gap.mf4", overwrite=True)
    code, _, err = cli(["simulate", str(bench / "shaker_mass.toml"), "--input", "z=z_shaker", "--input-data",
                        str(bench / "gap.mf4")])
    assert code == 2 and "1 sample(s) without a finite value (the first at t = 0.009 s)" in error_line(err)
    (bench / "newton.csv").write_text((bench / "bench.csv").read_text().replace("z_shaker [mm]", "z_shaker [N]"))
    code, _, err = cli(["simulate", str(bench / "shaker_mass.toml"), "--input", "z=z_shaker", "--input-data",
                        str(bench / "newton.csv")])
    assert code == 2 and "incompatible units" in error_line(err)
    code, _, err = cli(["simulate", str(bench / "shaker_mass.toml"), "--input", "z=z_shaker"])
    assert code == 2 and "--input INPUT=CHANNEL and --input-data DATA go together" in error_line(err)


def test_simulate_with_the_shaker_channel_equals_the_closed_form_drive_at_the_samples(bench, model):
    out = bench / "sim.csv"
    code, _, err = cli(["simulate", str(bench / "shaker_mass.toml"), "--input", "z=z_shaker", "--input-data",
                        str(bench / "bench.mf4"), "--set", "k=130", "--set", "d=1.5", "-o", str(out)])
    assert code == 0, err
    simulated = np.genfromtxt(out, delimiter=",", names=True)
    truth = dataclasses.replace(model, prescribed=(PrescribedMotion("b", SHAKER),)).with_values(TRUTH)
    exact = choose_engine(truth, "native").engine.simulate().outputs()[:, 0]
    assert np.max(np.abs(simulated["x"] - exact)) < SECANT_START * np.max(np.abs(exact))


def test_an_fmu_takes_its_inputs_from_inputs_csv(bench):
    code, _, err = cli(["identify", "--fmu", str(bench / "none.fmu"), "--data", str(bench / "bench.csv"),
                        "--params", "k", "--input", "z=z_shaker"])
    assert code == 2 and "--inputs INPUTS.csv" in error_line(err)


def test_the_command_lines_channel_replaces_the_model_files_measured_input(bench, model):
    """A model file whose input is driven by its own record (``[inputs] z = { file, channel }``):
    ``--input`` drives it with the experiment's channel instead (with the file's record, a
    base at rest, x would stay 0)."""
    t = np.linspace(0.0, 1.0, 11)
    (bench / "rest.csv").write_text("time,z0 [m]\n" + "".join(f"{a:.3f},0\n" for a in t))
    text = MODEL.replace('z = { value = 0.0, unit = "m",', 'z = { value = 0.0, unit = "m", file = "rest.csv", '
                         'channel = "z0",')
    (bench / "rest_model.toml").write_text(text)
    out = bench / "replaced.csv"
    code, _, err = cli(["simulate", str(bench / "rest_model.toml"), "--input", "z=z_shaker", "--input-data",
                        str(bench / "bench.mf4"), "--set", "k=130", "--set", "d=1.5", "-o", str(out)])
    assert code == 0, err
    truth = dataclasses.replace(model, prescribed=(PrescribedMotion("b", SHAKER),)).with_values(TRUTH)
    exact = choose_engine(truth, "native").engine.simulate().outputs()[:, 0]
    simulated = np.genfromtxt(out, delimiter=",", names=True)["x"]
    assert np.max(np.abs(simulated - exact)) < SECANT_START * np.max(np.abs(exact))


def test_two_loggers_share_the_compared_clock_and_the_data_file_is_not_overwritten(bench):
    """``--time-shift start`` on a record of two loggers shifts the driving channel by the
    record's first time (100 s), not its own logger's (100.5 s): here it starts 0.5 s into
    the run, which is refused, where shifting it by its own start would drive the model 0.5 s
    early.  And ``-o`` naming the ``--input-data`` file is refused before anything is written."""
    t = np.linspace(0.0, 1.0, 1001)
    (bench / "xa.csv").write_text("time,x [m]\n" + "".join(f"{100.0 + a:.4f},0\n" for a in t))
    (bench / "zb.csv").write_text("time,z_shaker [mm]\n" + "".join(f"{100.5 + a:.4f},{1e3 * z:.9e}\n"
                                                                 for a, z in zip(t, _shaker(t))))
    code, _, err = cli(["identify", str(bench / "shaker_mass.toml"), "--data",
                        f"{bench / 'xa.csv'}@with={bench / 'zb.csv'}", "--time-shift", "start", "--params", "k",
                        "--input", "z=z_shaker"])
    assert code == 2 and "recorded from 0.5 s to 1.5 s (on the compared clock)" in error_line(err), err
    before = (bench / "bench.csv").read_bytes()
    code, _, err = cli(["simulate", str(bench / "shaker_mass.toml"), "--input", "z=z_shaker", "--input-data",
                        str(bench / "bench.csv"), "-o", str(bench / "bench.csv")])
    assert code == 2 and "input data file" in error_line(err) and (bench / "bench.csv").read_bytes() == before
