"""Round trip of every bundled example through its exported FMU (FMI 2 and 3).

For each example: export it, write data with ``fmi-adjoint simulate`` (a CSV whose times are
parsed back from text, as a user's would be) at values slightly off the defaults for one or
two parameters the outputs are sensitive to, then identify those parameters from the
defaults twice on the same FMU:

* ``--gradient fd``: central differences of whole runs of the FMU's binary (through fmpy);
* the default path: the native discrete adjoint of the model embedded in the FMU.

Both must recover the values the data was made with, and agree with each other.  The FMU is
Co-Simulation only, so ``--gradient sensitivity`` is refused (exit 2, naming ``--gradient fd``).
Two data layouts that do not sit exactly on the FMU's grid are also checked: times off the
grid by round-off (``t + 1e-15``) and samples every 1.5 steps, which are interpolated from the
FMU's grid (:mod:`fmi_adjoint.fmu.loading`) as the in-process path interpolates them from
its trajectory (:class:`~fmi_adjoint.costs.Sampler`).

fmpy's default run of every FMU (Co-Simulation, its stop time and output interval taken
from the FMU) equals the in-process run bit for bit at its points.  The round trip through
``validate`` on the data's own time grid (T not a multiple of the step) is
tests/test_fmu_any_step.py's; the Model Exchange runs of the same FMUs are
tests/test_fmu_model_exchange_export.py's.

Cost: every FMU is exported once per process (per xdist worker) by tests/exported_fmus.py, and
shared with the Model Exchange tests; its binary compiles through the suite's build cache
(kind "fmu"), as does the embedded model that the adjoint path rebuilds to check the binary
(:attr:`~fmi_adjoint.fmu.archive.FmuArchive.native`).  The runs are a few hundred steps.
"""

from __future__ import annotations

import dataclasses
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import fmpy
import fmpy.validation
import numpy as np
import pytest

from fmi_adjoint import load_model, read_csv, write_csv
from fmi_adjoint.examples import example_names, example_path
from fmi_adjoint.export import validate_against_schema
from fmi_adjoint.toolchain import c_compiler
from captured_cli import cli as _cli
from exported_fmus import ALONE_VERSIONS, exported_fmu
from tolerances import EXACT, FMU_GRADIENT_VS_FD, NOISE_FREE_RECOVERY
from bundled import looped_examples

if c_compiler() is None:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: the FMUs cannot be built", allow_module_level=True)

VERSIONS = (2, 3)


@dataclasses.dataclass(frozen=True)
class Case:
    """What the data of one example is made with: ``true`` values of the identified
    parameters (a few per cent off the defaults, strictly inside the model's bounds) and the
    number of steps of the model's own step the run lasts."""

    true: dict[str, float]
    steps: int

    @property
    def params(self) -> str:
        return ",".join(self.true)


#: Parameters chosen per example for their effect on the outputs within a short run.
CASES = {
    "beam_pod": Case({"EI": 310.0, "k_v": 1050.0}, 200),           # bending modes after the pulse
    "cart_pendulum": Case({"m_c": 1.05, "d_c": 0.55}, 300),         # cart pushed by F
    "engine_mount": Case({"c_E1": 7.6e4, "d_E": 0.52}, 300),        # elastomer of the mount
    "engine_tvd": Case({"c_1": 5.1e5, "J_TVD": 0.0041}, 250),       # first shaft spring, damper inertia
    "sdof": Case({"c": 1.05, "d": 0.52}, 500),
    "single_mass": Case({"c": 1.05}, 300),                          # its only parameter (u is an input)
    "slider_crank": Case({"c_s": 520.0, "d_s": 2.1}, 300),
    "strut": Case({"k": 23800.0, "c_1": 2050.0}, 300),              # k stays below its bound 24000
    "triple_pendulum": Case({"c_f": 10.5, "m": 0.52}, 300),
    "two_mass": Case({"c1": 1050.0, "d2": 1.05}, 300),
    "heavy_top": Case({"m": 0.52, "l": 0.052}, 300),
    "slider_crank_bodies": Case({"c_s": 520.0, "d_s": 2.1}, 300),
    "triple_pendulum_bodies": Case({"c_f": 10.5, "m": 0.52}, 300),
    "engine_on_mounts": Case({"c_z": 2.1e5, "d_z": 260.0}, 300),
    "macpherson_flexible": Case({"k": 23800.0, "c_1": 2050.0}, 300),  # as strut: spring and friction
}

#: The examples of the two off-grid cases (cheap to build).
OFF_GRID_EXAMPLE = "sdof"
BETWEEN_EXAMPLE = "two_mass"


def _cases(name: str, versions=VERSIONS) -> list:
    """(name, version) parameters.  Every xdist worker that runs a test of one FMU exports it
    once (module fixture); the binary comes from the build cache after the first."""
    return [pytest.param(name, v, id=f"{name}-{v}") for v in versions]


#: The looped examples (tests/bundled.py: an example tested alone keeps its case, unused).
LOOPED = sorted(set(CASES) & set(looped_examples()))
ROUND_TRIPS = [p for name in LOOPED for p in _cases(name)]
#: The gradient comparison on the FMI 3 export of every example (the FMI 2 and 3 binaries run
#: the same engine; both versions are identified in the round trip above).
GRADIENT_CHECKS = [p for name in LOOPED for p in _cases(name, (3,))]




def _json(command: str, argv) -> dict:
    code, out, err = _cli([command, *argv, "--json"])
    assert code == 0, err
    return json.loads(out)


def _identify(fmu: Path, data: Path, params: str, *extra) -> dict:
    return _json("identify", ["--fmu", fmu, "--data", data, "--params", params, "--method", "least_squares",
                              "--workers", 1, *extra])


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b))


def _step(name: str) -> float:
    return load_model(example_path(name)).simulation.step


def _simulate_csv(name: str, out: Path, values: dict[str, float], t_end: float, *extra) -> Path:
    """``fmi-adjoint simulate`` at ``values`` to a CSV (times written as text)."""
    sets = [arg for key, value in values.items() for arg in ("--set", f"{key}={value!r}")]
    code, _, err = _cli(["simulate", name, *sets, "--t-end", repr(t_end), *extra, "-o", out])
    assert code == 0, err
    return out


# ------------------------------------------------------------------------------ fixtures --


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fmu_round_trip")


@pytest.fixture(scope="module")
def exported() -> Callable[[str, int], Path]:
    """``exported(name, version)``: the bundled example's FMU (both interfaces), exported once
    per process (tests/exported_fmus.py)."""
    return exported_fmu


@pytest.fixture(scope="module")
def measured(work) -> Callable[[str], Path]:
    """``measured(name)``: the example's outputs at ``CASES[name].true`` over its steps."""
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            case = CASES[name]
            cache[name] = _simulate_csv(name, work / f"{name}.csv", case.true, case.steps * _step(name))
        return cache[name]

    return get


# ------------------------------------------------------------------- 1. the round trip --


def test_every_example_has_a_case():
    assert set(looped_examples()) <= set(CASES) <= set(example_names())
    for name, case in CASES.items():
        parameters = {p.name: p for p in load_model(example_path(name)).all_parameters}
        for key, value in case.true.items():
            p = parameters[key]
            assert p.causality == "parameter" and value != p.value, (name, key)
            lo, hi = p.bounds if p.bounds is not None else (-np.inf, np.inf)
            assert lo < value < hi, (name, key, p.bounds)


@pytest.mark.slow  # identifications through FMU binaries
@pytest.mark.parametrize(("name", "version"), ROUND_TRIPS)
def test_fd_through_the_binary_and_the_adjoint_identify_the_data_values(name, version, exported, measured):
    """``identify --gradient fd`` (the binary) and the default path (the adjoint of the
    embedded model) from the defaults: both recover the values the data was made with.

    Tiers: the data is the FMU's own engine's output (``simulate`` and the FMU's binary run
    the same C engine bit for bit, tests/test_fmu_export.py), so the fit has an exact zero-
    residual minimum.  The error of the differenced Jacobian (FMU_GRADIENT_VS_FD, checked on
    the gradient below) changes the Gauss-Newton path to it, not the minimum itself; both paths
    then stop within the optimizer's tolerance of it (NOISE_FREE_RECOVERY), against the truth
    and against each other.
    """
    case = CASES[name]
    fmu, data = exported(name, version), measured(name)
    fd = _identify(fmu, data, case.params, "--gradient", "fd")
    adjoint = _identify(fmu, data, case.params)
    assert fd["gradient_method"]["method"] == "fd" and fd["interface"] == "CoSimulation"
    assert adjoint["gradient_method"]["method"] == "adjoint"
    for payload in (fd, adjoint):
        assert payload["success"], payload.get("message")
        assert list(payload["parameters"]) == list(case.true)
    for key, true in case.true.items():
        assert fd["initial"][key] == adjoint["initial"][key] != true
        assert _rel(fd["parameters"][key], true) <= NOISE_FREE_RECOVERY, (key, fd["parameters"][key])
        assert _rel(adjoint["parameters"][key], true) <= NOISE_FREE_RECOVERY, (key, adjoint["parameters"][key])
        assert _rel(fd["parameters"][key], adjoint["parameters"][key]) <= NOISE_FREE_RECOVERY, key


@pytest.mark.parametrize(("name", "version"), GRADIENT_CHECKS)
def test_fd_gradient_through_the_binary_equals_the_adjoint(name, version, exported, measured):
    """At the defaults: the cost of the binary's runs equals that of the in-process model
    file (the same C engine; EXACT), and the differenced gradient equals the adjoint one
    within the accuracy of the differences (FMU_GRADIENT_VS_FD, per component)."""
    case = CASES[name]
    common = ["--data", measured(name), "--params", case.params]
    fd = _json("gradient", ["--fmu", exported(name, version), *common, "--gradient", "fd", "--workers", 1])
    adjoint = _json("gradient", [name, *common])
    assert fd["method"] == "fd" and adjoint["method"] == "adjoint"
    assert _rel(fd["cost"], adjoint["cost"]) <= EXACT
    for key, value in adjoint["gradient"].items():
        assert value != 0.0, key
        assert _rel(fd["gradient"][key], value) <= FMU_GRADIENT_VS_FD, (key, fd["gradient"][key], value)


@pytest.mark.parametrize(("name", "version"), _cases(OFF_GRID_EXAMPLE))
def test_sensitivities_are_refused_for_a_co_simulation_fmu(name, version, measured):
    """An FMU exported with ``--interface cs`` has no Model Exchange interface: ``--gradient
    sensitivity`` ends with exit code 2 and one error line that names the path that works
    (``--gradient fd``).  One example per version: the refusal depends only on the interfaces."""
    fmu = exported_fmu(name, version, "cs")
    for command in ("identify", "gradient"):
        code, out, err = _cli([command, "--fmu", fmu, "--data", measured(name), "--params",
                               CASES[name].params, "--gradient", "sensitivity"])
        assert code == 2 and out == "", (command, out)
        assert err.count("fmi-adjoint: error:") == 1 and "--gradient fd" in err, (command, err)


@pytest.mark.parametrize(("name", "version"), _cases(OFF_GRID_EXAMPLE))
def test_the_fmu_declares_the_model_bounds(name, version, exported):
    """Every path on one FMU should identify within the same bounds: the model's, which the
    adjoint path takes from the embedded model and the binary paths can only take from the
    FMI ``min``/``max`` attributes (:class:`~fmi_adjoint.fmu.problem.FmuProblem`)."""
    from fmi_adjoint.fmu.archive import open_fmu

    parameters = {p.name: p for p in load_model(example_path(name)).all_parameters}
    with open_fmu(exported(name, version)) as archive:
        for key in CASES[name].true:
            variable = archive.variable(key, "parameter")
            assert (variable.min, variable.max) == parameters[key].bounds, (key, variable.min, variable.max)


#: fmpy's default run of every looped example (FMI 3 in the fast suite, whose round trips
#: build only those FMUs; FMI 2 marked slow).
DEFAULT_RUNS = [pytest.param(name, version, id=f"{name}-{version}", marks=[pytest.mark.slow] if version == 2 else [])
                for name in LOOPED for version in VERSIONS]
#: The examples tested alone, in the one FMI version of their Model Exchange runs (slow: two of
#: the FMUs are built for these tests only, and their runs are long).
ALONE = [pytest.param(name, version, id=f"{name}-{version}", marks=[pytest.mark.slow])
         for name, version in ALONE_VERSIONS.items()]
#: Steps of the validate round trip's data, plus 0.6 of a step (tests/test_fmu_any_step.py's).
ROUND_TRIP_STEPS = 300


@pytest.mark.parametrize(("name", "version"), DEFAULT_RUNS + ALONE)
def test_fmpy_default_run_equals_the_in_process_run(name, version, exported, example_engine):
    """``fmpy.simulate_fmu(fmu)`` with nothing but the FMU: Co-Simulation, the stop time of the
    FMU's default experiment (the model's end rounded to whole steps), and fmpy's default
    output interval (the FMU's step, doubled until at most 1000 intervals remain; sdof's 0.032 s
    leaves a last interval of two steps).  The run ends at the stop time, its points lie on the
    step's grid, and its outputs are the in-process run's bit for bit (the same C engine)."""
    fmu = exported(name, version)
    model = load_model(example_path(name))
    h = model.simulation.step
    result = fmpy.simulate_fmu(str(fmu))
    stop = float(fmpy.read_model_description(str(fmu)).defaultExperiment.stopTime)
    assert result["time"][-1] == pytest.approx(stop, rel=EXACT)
    trajectory = example_engine(name).simulate(t_end=stop, step=h)
    index = np.rint(result["time"] / h).astype(int)
    assert np.max(np.abs(trajectory.t[index] - result["time"])) <= EXACT * stop
    outputs = trajectory.outputs()[index]
    for k, output in enumerate(model.outputs):
        assert np.array_equal(result[output.name], outputs[:, k]), output.name


@pytest.mark.parametrize(("name", "version"), ALONE)
def test_export_simulate_validate_of_the_examples_tested_alone(name, version, exported, work):
    """tests/test_fmu_any_step.py's round trip for the examples left out of the loops: fmpy's
    validation and the XSD accept the FMU (both interfaces); data from ``simulate`` over 300.6
    steps (the end not a multiple of the step); ``validate`` of the FMU on it succeeds; and
    fmpy's run of the FMU at the data's step (the last communication step shortened to the
    data's end, as ``simulate``'s last step) gives the data bit for bit."""
    fmu = exported(name, version)
    assert fmpy.validation.validate_fmu(str(fmu)) == []
    with zipfile.ZipFile(fmu) as archive:
        assert validate_against_schema(archive.read("modelDescription.xml"), version) == []
    h = _step(name)
    t_end = (ROUND_TRIP_STEPS + 0.6) * h
    data = _simulate_csv(name, work / f"{name}_alone.csv", {}, t_end)
    report = work / f"report_{name}_alone"
    code, _, err = _cli(["validate", fmu, "--data", data, "-o", report])
    assert code == 0, err
    rows = json.loads((report / "report.json").read_text())
    assert rows["samples"] == ROUND_TRIP_STEPS + 2
    assert all(np.isfinite(row["rms_error"]) for row in rows["outputs"].values())
    measured = read_csv(data)
    assert measured.times[-1] == t_end
    result = fmpy.simulate_fmu(str(fmu), fmi_type="CoSimulation", stop_time=t_end, output_interval=h,
                               output=list(measured.columns))
    assert np.array_equal(result["time"][:-1], measured.times[:-1])
    for column in measured.columns:
        assert np.array_equal(result[column], measured.column(column)), column


# --------------------------------------------------------- 2. data times off the grid --


@pytest.mark.parametrize(("name", "version"), _cases(OFF_GRID_EXAMPLE))
def test_times_off_the_grid_by_round_off(name, version, exported, measured, work):
    """Every data time moved by 1e-15 s (the last one past the grid's end): still the FMU's
    own grid, interpolated at round-off, and the fit recovers the values."""
    case = CASES[name]
    data = read_csv(measured(name))
    shifted = work / f"{name}_shifted_fmi{version}.csv"
    write_csv(shifted, data.times + 1e-15, dict(zip(data.columns, data.values.T)))
    times = read_csv(shifted).times
    assert times[0] > 0.0 and np.all(times != data.times)
    fd = _identify(exported(name, version), shifted, case.params, "--gradient", "fd")
    assert fd["success"], fd.get("message")
    for key, true in case.true.items():
        assert _rel(fd["parameters"][key], true) <= NOISE_FREE_RECOVERY, (key, fd["parameters"][key])


@pytest.mark.parametrize(("name", "version"), _cases(BETWEEN_EXAMPLE))
def test_samples_between_grid_points_are_interpolated_like_in_process(name, version, exported, work):
    """Data every 1.5 steps (from a run at half the step, so every other sample lies midway
    between two grid points of the FMU): ``gradient --fmu --gradient fd`` interpolates the
    FMU's grid linearly, as the in-process ``gradient`` of the model file interpolates its
    trajectory.  Same grid values (same engine), same interpolation: the costs agree at
    EXACT, the gradients within the differences' accuracy (FMU_GRADIENT_VS_FD)."""
    case = CASES[name]
    h = _step(name)
    fine = _simulate_csv(name, work / f"{name}_fine_fmi{version}.csv", case.true, case.steps * h,
                         "--step", repr(h / 2))
    rows = read_csv(fine)
    between = work / f"{name}_between_fmi{version}.csv"
    write_csv(between, rows.times[::3], dict(zip(rows.columns, rows.values[::3].T)))
    times = read_csv(between).times
    offset = times / h - np.round(times / h)
    assert np.max(np.abs(offset)) == pytest.approx(0.5) and np.count_nonzero(np.abs(offset) > 0.25) > 10
    common = ["--data", between, "--params", case.params]
    fd = _json("gradient", ["--fmu", exported(name, version), *common, "--gradient", "fd", "--workers", 1])
    in_process = _json("gradient", [name, *common])
    assert fd["method"] == "fd" and in_process["method"] == "adjoint"
    assert fd["cost"] > 0.0  # the half-step data is not the FMU's run
    assert _rel(fd["cost"], in_process["cost"]) <= EXACT
    for key, value in in_process["gradient"].items():
        assert _rel(fd["gradient"][key], value) <= FMU_GRADIENT_VS_FD, (key, fd["gradient"][key], value)
