"""Exported Co-Simulation FMUs take any communication step, interpolate inputs and expose the
model's coordinates (issue 30, parts 3, 4 and 5).

* Any step (``fa_fmu_do_step`` in ``fmi_adjoint/export/fmi/fa_fmu_common.c``): a
  communication step between two points of the grid ``t0 + i h`` takes the grid steps, any
  other is divided into ``max(1, round(step / h))`` equal internal steps.  On the data's own
  time grid (the ``simulate`` command's, whose last step absorbs the remainder) the
  FMU gives the in-process run bit for bit, also where the end time is not a multiple of
  the step (sdof's 6 pi); ``export`` -> ``simulate`` -> ``validate`` works for every looped
  example in FMI 2 and 3; fmpy's default run and a run at an output interval of a fraction of
  the step work; off the grid the results converge with the order of the integrator as the
  communication step shrinks.
* Interpolated inputs (FMI 2 ``fmi2SetRealInputDerivatives``, order 1): a ramp driven through
  input derivatives gives the in-process run of the same ramp (to round-off); the held input
  differs by an error of first order in the communication step.
* Exposed coordinates: ``q.<name>``, ``v.<name>``, ``lambda.<row>`` (local, read only) equal
  the in-process trajectory; units carry their SI ``BaseUnit``.

Cost: the FMUs are exported once per module through the suite's build cache (the binary of
an example is shared by every test of this file); the round trips (FMI 2 and 3) of the
examples not in :data:`FAST_ROUND_TRIPS` are marked slow.
"""

from __future__ import annotations

import json
import math
import zipfile
from collections.abc import Callable
from pathlib import Path

import fmpy
import fmpy.validation
import numpy as np
import pytest
from fmpy import read_model_description
from fmpy.fmi1 import FMICallException
from lxml import etree

from fmi_adjoint import NativeEngine, load_model, read_csv
from fmi_adjoint.examples import example_path
from fmi_adjoint.export import validate_against_schema
from fmi_adjoint.export.fmu_export import si_decomposition
from fmi_adjoint.toolchain import c_compiler
from captured_cli import cli as _cli
from exported_fmus import exported_fmu
from fmu_slave import Slave
from bundled import looped_examples
from tolerances import EXACT, ORDER, RAMP_INPUT_ROUNDOFF

if c_compiler() is None:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: the FMUs cannot be built", allow_module_level=True)

VERSIONS = (2, 3)
#: The round trips of the fast suite, FMI 2 and 3 (each FMU builds in under 10 s cold: one
#: coordinate, inputs, constraints, a massless node); the others are marked slow (their
#: exports take 10-170 s each cold on this machine, every looped example in both versions
#: about 8 min).
FAST_ROUND_TRIPS = ("sdof", "two_mass", "single_mass", "cart_pendulum", "slider_crank", "engine_mount")
#: Steps of the round trip's data (sdof: its own t_end = 6 pi, 18 850 steps and a remainder).
ROUND_TRIP_STEPS = 300


def _round_trips() -> list:
    cases = []
    for name in looped_examples():
        for version in VERSIONS:
            slow = name not in FAST_ROUND_TRIPS
            cases.append(pytest.param(name, version, id=f"{name}-{version}",
                                      marks=[pytest.mark.slow] if slow else []))
    return cases


# ------------------------------------------------------------------------------ fixtures --


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fmu_any_step")


@pytest.fixture(scope="module")
def exported() -> Callable[[str, int], Path]:
    """``exported(name, version)``: the bundled example's FMU, exported once per process and
    shared with the round trips and the Model Exchange runs (tests/exported_fmus.py)."""
    return exported_fmu


def _engine(name: str, text: str | None = None, folder: Path | None = None) -> NativeEngine:
    if text is None:
        return NativeEngine.build(load_model(example_path(name)))
    assert folder is not None
    path = folder / f"{name}.toml"
    path.write_text(text)
    return NativeEngine.build(load_model(path))


def _step(name: str) -> float:
    return load_model(example_path(name)).simulation.step


def _end_time(name: str) -> float:
    """The data's end: sdof's own 6 pi (18 849.56 steps, the issue's case), else 300.6 steps
    (the remainder 0.6 h above h/2: ``time_grid`` takes it as a step of its own)."""
    model = load_model(example_path(name))
    return model.simulation.t_end if name == "sdof" else (ROUND_TRIP_STEPS + 0.6) * model.simulation.step


# ------------------------------------------------------- 1. export -> simulate -> validate --


@pytest.mark.parametrize(("name", "version"), _round_trips())
def test_export_simulate_validate_round_trip(name, version, exported, work):
    """The issue's round trip on the data's own time grid, whose end is not a multiple of the
    step: fmpy's validation and the XSD accept the FMU, ``validate`` succeeds, and the FMU
    stepped to the data's times (one communication step per data interval, the last one
    shortened) gives the data bit for bit.

    Fails on the old runtime: the last communication step (0.6 h; sdof 0.556 h) was refused
    ("not a whole multiple of the FMU's fixed internal step").
    """
    fmu = exported(name, version)
    assert fmpy.validation.validate_fmu(str(fmu)) == []
    with zipfile.ZipFile(fmu) as archive:
        assert validate_against_schema(archive.read("modelDescription.xml"), version) == []
    t_end = _end_time(name)
    data = work / f"{name}_{version}.csv"
    code, _, err = _cli(["simulate", name, "--t-end", repr(t_end), "-o", data])
    assert code == 0, err
    code, _, err = _cli(["validate", fmu, "--data", data, "-o", work / f"report_{name}_{version}"])
    assert code == 0, err
    report = json.loads((work / f"report_{name}_{version}" / "report.json").read_text())
    # validate's own error is not asserted: it runs the FMU at the data's shortest interval
    # (the last, 0.6 h) and interpolates to the data's times (fmi_adjoint/fmu/validation.py),
    # so it measures that run's discretization (engine_mount's multiplier output: 38 %).
    assert report["samples"] == ROUND_TRIP_STEPS + 2 or name == "sdof"
    assert all(math.isfinite(row["rms_error"]) for row in report["outputs"].values())

    measured = read_csv(data)
    times = measured.times
    assert times[-1] == t_end and not math.isclose(t_end / _step(name), round(t_end / _step(name)))
    s = Slave(fmu, work)
    outputs = [v.name for v in s.description.modelVariables if v.causality == "output"]
    rows = [s.get(outputs)]
    for t in times[1:]:
        s.step_to(float(t))
        rows.append(s.get(outputs))
    s.close()
    got = np.array(rows)
    for j, output in enumerate(outputs):
        assert np.array_equal(got[:, j], measured.column(output)), output


@pytest.mark.parametrize("version", VERSIONS)
def test_fmpy_default_run_and_a_short_output_interval(version, exported):
    """fmpy's default run (its output interval from the FMU) and a run at an output interval
    of 0.3 internal steps (every communication step far below the step; the internal steps
    are the communication steps) both end at the stop time; the default run's points lie on
    the FMU's grid and equal the in-process run bit for bit.

    Fails on the old runtime: the 0.3 h communication steps were refused.
    """
    fmu = exported("sdof", version)
    h = _step("sdof")
    default = fmpy.simulate_fmu(str(fmu))
    stop = float(read_model_description(str(fmu)).defaultExperiment.stopTime)
    assert default["time"][-1] == pytest.approx(stop, rel=EXACT)
    traj = _engine("sdof").simulate(t_end=stop, step=h)
    index = np.rint(default["time"] / h).astype(int)
    assert np.max(np.abs(traj.t[index] - default["time"])) <= EXACT * stop
    assert np.array_equal(default["x"], traj.outputs()[index, 0])

    short = fmpy.simulate_fmu(str(fmu), stop_time=0.05, output_interval=0.3 * h, output=["x", "q.x", "v.x"])
    assert short["time"][-1] == pytest.approx(0.05, rel=EXACT)
    fine = _engine("sdof").simulate(t_end=0.05, step=0.3 * h)
    assert np.max(np.abs(short["x"] - fine.outputs()[:, 0])) <= EXACT * np.max(np.abs(fine.q))
    assert np.array_equal(short["x"], short["q.x"])


# ------------------------------------------------------------- 2. grid, round-off, order --


@pytest.mark.parametrize("version", VERSIONS)
def test_steps_on_the_grid_are_bit_identical_to_the_engine(version, exported, work):
    """Communication steps of 1, 3 and 7 internal steps, their points carrying round-off
    (sums of the step, t + 1e-15), give the in-process run bit for bit at those points; a
    communication step of round-off length changes nothing."""
    h = _step("slider_crank")
    fmu = exported("slider_crank", version)
    traj = _engine("slider_crank").simulate(t_end=120 * h, step=h)
    s = Slave(fmu, work)
    outputs = [v.name for v in s.description.modelVariables if v.causality == "output"]
    k, t = 0, 0.0
    for m in (1, 3, 7, 1, 7, 3) * 4:
        k += m
        t += m * h
        s.step_to(t + 1e-15)
        assert np.array_equal(s.get(outputs), traj.outputs()[k]), k
    before = s.get(outputs)
    s.step_to(s.t + 1e-13)  # a communication step of round-off length
    assert np.array_equal(s.get(outputs), before)
    s.close()


def _sdof_run(fmu: Path, work: Path, step: float, n: int) -> float:
    """x of sdof through its FMU after n communication steps of ``step``."""
    s = Slave(fmu, work)
    for i in range(1, n + 1):
        s.step_to(i * step)
    x = s.get(["x"])[0]
    s.close()
    return x


def test_results_converge_as_the_communication_step_shrinks(exported, work):
    """sdof through its FMU at communication steps 1.37 h / 2^k, k = 0..3 (never a multiple of
    the internal step h: each communication step is one internal step) converges to a run at
    a 64 times smaller step with HHT's order 2 (ORDER; measured slopes 2.00), and each run
    equals the in-process run at that constant step (EXACT).  A communication step of 2.6 h
    is divided into three equal steps of 0.867 h: the in-process run at that step.

    Fails on the old runtime (the steps were refused), and when the FMU steps back onto its
    grid inside a communication step (step sizes changing every communication step: first
    order, errors 3-20 times larger; measured while choosing the rule, see fa_fmu_do_step).
    """
    fmu = exported("sdof", 2)
    h = _step("sdof")
    engine = _engine("sdof")
    n, base = 400, 1.37 * h
    steps = [base / 2**k for k in range(4)]
    reference = engine.simulate(t_end=n * base, step=steps[-1] / 64).outputs()[-1, 0]
    scale = np.max(np.abs(engine.simulate(t_end=n * base, step=h).q))
    errors = []
    for k, step in enumerate(steps):
        x = _sdof_run(fmu, work, step, n * 2**k)
        assert abs(x - engine.simulate(t_end=n * base, step=step).outputs()[-1, 0]) <= EXACT * scale, step
        errors.append(abs(x - reference))
    orders = np.diff(np.log(errors)) / np.diff(np.log(steps))
    assert np.all(np.abs(orders - 2.0) <= ORDER), (errors, orders)
    x = _sdof_run(fmu, work, 2.6 * h, 100)
    assert abs(x - engine.simulate(t_end=260 * h, step=2.6 * h / 3).outputs()[-1, 0]) <= EXACT * scale


@pytest.mark.parametrize("version", VERSIONS)
def test_invalid_communication_steps_are_refused_by_name(version, exported, work, capfd):
    s = Slave(exported("sdof", version), work)
    for bad in (0.0, -1e-3, math.inf):
        with pytest.raises(FMICallException):
            s.slave.doStep(currentCommunicationPoint=0.0, communicationStepSize=bad)
        assert "must be positive and finite" in capfd.readouterr().out
    with pytest.raises(FMICallException):
        s.slave.doStep(currentCommunicationPoint=0.5, communicationStepSize=1e-3)
    assert "differs from the FMU's time" in capfd.readouterr().out
    s.close()


@pytest.mark.parametrize("version", VERSIONS)
def test_fmu_state_restores_an_off_grid_time_and_input_slope(version, exported, work):
    """A state saved off the grid (and, FMI 2, with an input derivative) continues as the
    run it was saved from, bit for bit."""
    h = _step("two_mass")
    s = Slave(exported("two_mass", version), work)
    s.step_to(3.3 * h)
    if version == 2:
        s.slave.setRealInputDerivatives([s.vr["F"]], [1], [40.0])
    state = s.slave.getFMUState()
    s.step_to(7.9 * h)
    first = s.get(["x2", "v1", "F"])
    s.slave.setFMUState(state)
    s.t = 3.3 * h
    s.step_to(7.9 * h)
    assert np.array_equal(s.get(["x2", "v1", "F"]), first)
    s.slave.freeFMUState(state)
    s.close()


# ---------------------------------------------------------------- 3. interpolated inputs --


RAMP_START, RAMP_SLOPE = 5.0, 40.0


def _ramp_model(work: Path) -> NativeEngine:
    """two_mass with its input F replaced by the ramp 5 N + 40 N/s t (the in-process reference)."""
    text = example_path("two_mass").read_text()
    assert text.count('expression = "F"') == 1
    text = text.replace('expression = "F"', f'expression = "{RAMP_START!r} + {RAMP_SLOPE!r} * t"')
    return _engine("two_mass_ramp", text, work)


def _driven(fmu: Path, work: Path, comm: float, n: int, derivatives: bool) -> np.ndarray:
    """x2, v1, v2 of two_mass at n communication points of ``comm``, F set to the ramp at every
    point, with its derivative (FMI 2) or held."""
    s = Slave(fmu, work)
    rows = [s.get(["x2", "v1", "v2"])]
    for i in range(n):
        s.set({"F": RAMP_START + RAMP_SLOPE * s.t})
        if derivatives:
            s.slave.setRealInputDerivatives([s.vr["F"]], [1], [RAMP_SLOPE])
        s.step_to((i + 1) * comm)
        rows.append(s.get(["x2", "v1", "v2"]))
    s.close()
    return np.array(rows)


def test_an_input_ramp_through_input_derivatives_equals_the_in_process_ramp(exported, work):
    """F = 5 + 40 t through fmi2SetRealInputDerivatives at communication steps of 10 and
    2.5 internal steps equals the in-process model whose load is that ramp, to round-off
    (RAMP_INPUT_ROUNDOFF: the FMU evaluates u_c + du (t - t_c), the model 5 + 40 t; measured
    4e-16).  The held input differs by an error of first order in the communication step
    (ORDER; measured 1.8e-2, 3.6e-2, 7.6e-2: slopes 0.99 and 1.08).  Off the grid (2.5 h) the
    ramp stays within the integration error of the shortened steps (3.2e-5).

    Fails on the old runtime (fmi2SetRealInputDerivatives refused) and if the derivative were
    ignored or evaluated at the communication point instead of each internal step's end.
    """
    fmu = exported("two_mass", 2)
    description = read_model_description(str(fmu))
    assert description.coSimulation.canInterpolateInputs
    h = _step("two_mass")
    n_steps = 400
    reference = _ramp_model(work)
    traj = reference.simulate(t_end=n_steps * h, step=h)
    expected = traj.outputs()
    scale = np.max(np.abs(expected), axis=0)
    held_errors = []
    for m in (10, 20, 40):
        ramp = _driven(fmu, work, m * h, n_steps // m, derivatives=True)
        error = np.max(np.abs(ramp - expected[::m]) / scale)
        assert error <= RAMP_INPUT_ROUNDOFF, (m, error)
        held = _driven(fmu, work, m * h, n_steps // m, derivatives=False)
        held_errors.append(np.max(np.abs(held - expected[::m]) / scale))
    orders = np.diff(np.log(held_errors)) / np.log(2.0)
    assert np.all(np.abs(orders - 1.0) <= ORDER), (held_errors, orders)
    # Off the grid too (2.5 h, shortened steps): the ramp within the integration error of a
    # run at those steps, far below the held input's error.
    off = _driven(fmu, work, 2.5 * h, n_steps * 2 // 5, derivatives=True)
    assert np.max(np.abs(off[-1] - expected[-1]) / scale) < held_errors[0]


def test_input_derivatives_of_order_two_or_of_a_parameter_are_refused(exported, work, capfd):
    s = Slave(exported("two_mass", 2), work)
    with pytest.raises(FMICallException):
        s.slave.setRealInputDerivatives([s.vr["F"]], [2], [1.0])
    assert "order 2 for the input 'F'" in capfd.readouterr().out
    with pytest.raises(FMICallException):
        s.slave.setRealInputDerivatives([s.vr["c1"]], [1], [1.0])
    assert "is not an input" in capfd.readouterr().out
    s.close()


def test_only_fmus_with_inputs_declare_can_interpolate_inputs(exported):
    assert not read_model_description(str(exported("sdof", 2))).coSimulation.canInterpolateInputs
    assert read_model_description(str(exported("two_mass", 2))).coSimulation.canInterpolateInputs


# ------------------------------------------------------------- 4. exposed coordinates --


@pytest.mark.parametrize("version", VERSIONS)
def test_exposed_coordinates_equal_the_in_process_trajectory(version, exported, work, capfd):
    """q, v and lambda of slider_crank (three coordinates, two constraint rows) read through
    the FMU equal the in-process trajectory bit for bit; setting them is refused by name."""
    h = _step("slider_crank")
    fmu = exported("slider_crank", version)
    engine = _engine("slider_crank")
    compiled = engine.compiled
    traj = engine.simulate(t_end=50 * h, step=h)
    s = Slave(fmu, work)
    names = ([f"q.{c}" for c in compiled.coordinate_names] + [f"v.{c}" for c in compiled.coordinate_names]
             + [f"lambda.{r}" for r in compiled.constraint_names])
    local = [v for v in s.description.modelVariables if v.causality == "local"]
    # Then the accelerations der(v.<c>) of the Model Exchange interface (exported by default).
    assert [v.name for v in local] == names + [f"der(v.{c})" for c in compiled.coordinate_names]
    assert all(v.variability == "continuous" for v in local)
    outputs = [v for v in s.description.modelVariables if v.causality == "output"]
    assert min(v.valueReference for v in local) == max(v.valueReference for v in outputs) + 1
    assert np.array_equal(s.get(names), np.concatenate([traj.q[0], traj.v[0], traj.lam[0]]))
    for k in range(1, 51):
        s.step_to(k * h)
    assert np.array_equal(s.get(names), np.concatenate([traj.q[50], traj.v[50], traj.lam[50]]))
    coordinate = compiled.coordinate_names[0]
    with pytest.raises(FMICallException):
        s.set({f"v.{coordinate}": 1.0})
    assert f"velocity of the coordinate '{coordinate}'" in capfd.readouterr().out
    s.close()


@pytest.mark.parametrize("version", VERSIONS)
def test_units_carry_their_si_base_units(version, exported):
    """Every unit of two_mass's description has the BaseUnit of its SI decomposition; the
    exposed coordinates carry m and m/s."""
    with zipfile.ZipFile(exported("two_mass", version)) as archive:
        root = etree.fromstring(archive.read("modelDescription.xml"))
    units = {u.get("name"): u.find("BaseUnit") for u in root.iter("Unit")}
    assert {"N", "N/m", "Ns/m", "m", "m/s"} <= set(units)
    assert dict(units["Ns/m"].attrib) == {"kg": "1", "s": "-1"}
    assert dict(units["N"].attrib) == {"kg": "1", "m": "1", "s": "-2"}
    description = read_model_description(str(exported("two_mass", version)))
    unit_of = {v.name: v.declaredType or v.unit for v in description.modelVariables}
    assert unit_of["q.x1"] == "m" and unit_of["v.x1"] == "m/s"


@pytest.mark.parametrize(("unit", "base"), [
    ("N*s/m", {"kg": 1, "s": -1}), ("kg m^2", {"kg": 1, "m": 2}), ("Nm/rad", {"kg": 1, "m": 2, "s": -2, "rad": -1}),
    ("Ns^3/m^3", {"kg": 1, "m": -2, "s": 1}), ("Nm^2", {"kg": 1, "m": 3, "s": -2}), ("1/s", {"s": -1}),
    ("Pa", {"kg": 1, "m": -1, "s": -2}), ("1", {}), ("rpm", {"rad": 1, "s": -1, "factor": math.pi / 30}),
    ("mm", None), ("deg", None), ("N/m/s", None), ("m^x", None),
])
def test_si_decomposition(unit, base):
    """Known symbols decompose; a unit with a prefix or an unknown symbol gets no BaseUnit."""
    assert si_decomposition(unit) == base
