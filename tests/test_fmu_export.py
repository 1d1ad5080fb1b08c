"""The exported FMI 2.0 / FMI 3.0 Co-Simulation FMUs (issue 5, "What must be shown").

* fmpy runs of every bundled example's FMU equal the in-process Python engine at the
  communication points (1e-9 relative to each output's maximum; outputs built from
  accelerations or multipliers of a constrained model at the index-3 round-off floor of
  tests/test_native_engine.py) and equal the in-process C engine bit for bit;
* fmpy's validation and the FMI XSDs accept every FMU;
* a C host (tests/fmu_host.c, no Python) loads the binary with dlopen, runs it, and
  valgrind finds no leak or memory error over 100 instantiate/step/free cycles;
* a rebuild from sources/ with fmpy's CMake project gives bit-identical results;
* parameters set before initialization, tunable parameters and inputs changed between
  communication steps act as in the matching in-process runs;
* FMU states (get/set, serialize/deserialize) reproduce continuations exactly, and
  instances are independent;
* bad input (an element without C code, no compiler, unwritable or missing output
  folders, a write failure) ends with exit code 2, one ``fmi-adjoint: error:`` line and
  no partial file.
* an FMU exported with generalized-alpha (Arnold & Brüls 2007; issue 13) runs that scheme:
  bit for bit the in-process C engine (restored states included), its token covers the
  scheme, and the trusted import identifies it on its embedded model with that scheme.

The in-process C engine is driven through ``fa_engine.h`` (ctypes on the library of
:func:`fmi_adjoint.native.build_native`) wherever a run with a parameter change
between steps is needed: the Python engine has no API to change parameters mid-run.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import uuid
import zipfile
from pathlib import Path

import fmpy
import fmpy.validation
import numpy as np
import pytest
from fmpy.fmi2 import FMU2Slave
from fmpy.fmi3 import FMU3Slave
from lxml import etree

from fmi_adjoint import ModelError, compile_model, load_model, simulate, write_csv
from fmi_adjoint.cli.main import main
from fmi_adjoint.compiled import Derivation
from fmi_adjoint.examples import example_path
from fmi_adjoint.fmu.archive import open_fmu
from fmi_adjoint.export import export_fmu, export_scheme, validate_against_schema
from fmi_adjoint.native import model_c_sources
from fmi_adjoint.errors import CompilerError
from fmi_adjoint.native import build_native, find_c_compiler
from fmi_adjoint.integrate import HHT, AbstractScheme, GeneralizedAlpha
from fmi_adjoint.integrate.schemes import scheme_from_settings
from test_native_engine import INDEX3_ROUNDOFF, SAME_ALGORITHM
from test_cli import gradient_json
from tolerances import EXACT
from bundled import looped_examples

try:
    CC = find_c_compiler()
except CompilerError:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: FMUs cannot be built", allow_module_level=True)

TESTS_DIR = Path(__file__).resolve().parent
REPO = TESTS_DIR.parent
FMPY_DIR = Path(fmpy.__file__).resolve().parent
FMI_HEADERS = FMPY_DIR / "c-code"
VERSIONS = (2, 3)
MAX_STEPS = 3000          # shortened horizons: at most this many internal steps
MULTIPLES = (1, 5)        # communication step = k * internal step


# --------------------------------------------------------------------------- helpers --


def _uses_a_or_lambda(model, name: str) -> bool:
    """An output built from accelerations or multipliers (see tests/test_native_engine.py)."""
    expr = next(o for o in model.outputs if o.name == name).expression
    return any(key in str(expr) for key in ("der2(", "lam(", "reaction("))


def _tolerance(model, compiled, name: str) -> float:
    return INDEX3_ROUNDOFF if (compiled.m and _uses_a_or_lambda(model, name)) else SAME_ALGORITHM


@dataclasses.dataclass
class Exported:
    """One exported FMU, unzipped, with its variables read from modelDescription.xml."""

    name: str
    version: int
    path: Path
    folder: Path
    token: str
    identifier: str
    vr: dict[str, int]            # every variable by name
    parameters: list[str]         # parameters and inputs in value-reference order
    outputs: list[str]
    xml: bytes

    @property
    def binary(self) -> Path:
        platform = "linux64" if self.version == 2 else "x86_64-linux"
        return self.folder / "binaries" / platform / f"{self.identifier}.so"

    @property
    def resources(self) -> str:
        folder = self.folder / "resources"
        return folder.as_uri() if self.version == 2 else str(folder) + os.sep


def _unpack(name: str, version: int, path: Path) -> Exported:
    folder = path.with_suffix("")
    shutil.rmtree(folder, ignore_errors=True)
    with zipfile.ZipFile(path) as archive:
        archive.extractall(folder)
    xml = (folder / "modelDescription.xml").read_bytes()
    root = etree.fromstring(xml)
    token = root.get("guid" if version == 2 else "instantiationToken")
    identifier = root.find("CoSimulation").get("modelIdentifier")
    variables = list(root.find("ModelVariables"))
    vr = {v.get("name"): int(v.get("valueReference")) for v in variables}
    parameters = [v.get("name") for v in variables if v.get("causality") in ("parameter", "input")]
    outputs = [v.get("name") for v in variables if v.get("causality") == "output"]
    return Exported(name, version, path, folder, token, identifier, vr, parameters, outputs, xml)


@pytest.fixture(scope="module")
def fmu(tmp_path_factory):
    """``fmu(name, version, solver=None)``: the bundled example exported once (module scope),
    with its own integrator or ``solver``."""
    folder = tmp_path_factory.mktemp("fmus")
    cache: dict[tuple[str, int, AbstractScheme | None], Exported] = {}

    def get(name: str, version: int, solver: AbstractScheme | None = None) -> Exported:
        if (name, version, solver) not in cache:
            stem = name if solver is None else f"{name}_{solver.name}"
            path = export_fmu(example_path(name), folder / f"{stem}_fmi{version}.fmu", fmi_version=version,
                              solver=solver)
            cache[name, version, solver] = _unpack(name, version, Path(path))
        return cache[name, version, solver]

    return get


@functools.cache
def _model(name: str):
    model = load_model(example_path(name))
    return model, compile_model(model)


@functools.cache
def _native(name: str):
    return build_native(_model(name)[0])


def _horizon(name: str) -> tuple[int, float, float]:
    """(steps, step, alpha): at most MAX_STEPS steps, a multiple of every k in MULTIPLES."""
    s = _model(name)[0].simulation
    lcm = int(np.lcm.reduce(MULTIPLES))
    n = min(round(s.t_end / s.step), MAX_STEPS) // lcm * lcm
    return n, s.step, s.alpha


@functools.cache
def _reference(name: str, values: tuple = ()):
    """Python-engine and C-engine outputs over the shortened horizon (parameters `values`)."""
    model, compiled = _model(name)
    n, h, _ = _horizon(name)
    p = compiled.parameter_vector(dict(values)) if values else compiled.defaults.copy()
    scheme = scheme_from_settings(model.simulation)  # the scheme the FMU runs (HHT or generalized-alpha)
    traj = simulate(compiled, p, t_end=n * h, step=h, solver=scheme)
    times, y = _native(name).simulate(p, t_end=n * h, step=h, solver=scheme)
    assert np.array_equal(times, traj.t)
    return traj.t, traj.outputs(), y


def _relative_errors(result, names, reference, compiled, rows) -> dict[str, float]:
    errors = {}
    for name in names:
        k = compiled.output_names.index(name)
        scale = np.max(np.abs(reference[:, k])) or 1.0
        errors[name] = float(np.max(np.abs(result[name] - reference[rows, k])) / scale)
    return errors


class _Settings(ctypes.Structure):
    """``fa_settings`` of fa_engine.h, field for field."""

    _fields_ = [("scheme", ctypes.c_int), ("alpha", ctypes.c_double), ("rho_inf", ctypes.c_double),
                ("step", ctypes.c_double), ("rtol", ctypes.c_double), ("max_iterations", ctypes.c_int),
                ("reuse_jacobian", ctypes.c_int)]


def _engine_run(name: str, n_steps: int, values: dict | None = None, changes: dict | None = None,
                t0: float = 0.0) -> np.ndarray:
    """Outputs of the in-process C engine (fa_engine.h) at steps 0..n_steps.

    ``changes[i] = {parameter: value}`` is applied after step i (before step i + 1), as an
    FMU host does between communication steps.
    """
    model, compiled = _model(name)
    lib = _native(name).library
    lib.fa_engine_new.restype = ctypes.c_void_p
    lib.fa_engine_free.argtypes = [ctypes.c_void_p]
    lib.fa_engine_parameters.restype = ctypes.POINTER(ctypes.c_double)
    lib.fa_engine_parameters.argtypes = [ctypes.c_void_p]
    lib.fa_engine_initialize.argtypes = [ctypes.c_void_p, ctypes.c_double, ctypes.POINTER(_Settings)]
    lib.fa_engine_step.argtypes = [ctypes.c_void_p]
    lib.fa_engine_outputs.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_double)]
    lib.fa_engine_message.restype = ctypes.c_char_p
    lib.fa_engine_message.argtypes = [ctypes.c_void_p]
    settings = _Settings()
    lib.fa_engine_settings_default(ctypes.byref(settings))
    settings.step, settings.alpha = model.simulation.step, model.simulation.alpha
    engine = lib.fa_engine_new()
    try:
        p = lib.fa_engine_parameters(engine)
        # The in-process library is cached without parameter values: the caller sets them all
        # (as NativeLibrary does), here the model's, as an exported FMU has them.
        for k, value in enumerate(compiled.defaults):
            p[k] = value
        for key, value in (values or {}).items():
            p[compiled.parameter_names.index(key)] = value
        assert lib.fa_engine_initialize(engine, t0, ctypes.byref(settings)) == 0, lib.fa_engine_message(engine)
        y = np.zeros((n_steps + 1, compiled.n_y))
        row = ctypes.POINTER(ctypes.c_double)
        lib.fa_engine_outputs(engine, y[0].ctypes.data_as(row))
        for i in range(1, n_steps + 1):
            for key, value in (changes or {}).get(i - 1, {}).items():
                p[compiled.parameter_names.index(key)] = value
            assert lib.fa_engine_step(engine) == 0, lib.fa_engine_message(engine)
            lib.fa_engine_outputs(engine, y[i].ctypes.data_as(row))
        return y
    finally:
        lib.fa_engine_free(engine)


class Slave:
    """An fmpy FMU2Slave / FMU3Slave with the default fmpy logger (never a custom one)."""

    def __init__(self, fmu: Exported, instance: str = "instance", initialize: bool = True,
                 values: dict | None = None, t0: float = 0.0):
        self.fmu = fmu
        cls = FMU2Slave if fmu.version == 2 else FMU3Slave
        self.slave = cls(guid=fmu.token, unzipDirectory=str(fmu.folder), modelIdentifier=fmu.identifier,
                         instanceName=instance)
        self.slave.instantiate()
        self.t = t0
        if values:
            self.set(values)
        if initialize:
            self.initialize(t0)

    def initialize(self, t0: float = 0.0):
        if self.fmu.version == 2:
            self.slave.setupExperiment(startTime=t0)
            self.slave.enterInitializationMode()
        else:
            self.slave.enterInitializationMode(startTime=t0)
        self.slave.exitInitializationMode()
        self.t = t0

    def set(self, values: dict):
        vrs = [self.fmu.vr[k] for k in values]
        if self.fmu.version == 2:
            self.slave.setReal(vrs, list(values.values()))
        else:
            self.slave.setFloat64(vrs, list(values.values()))

    def get(self, names) -> list[float]:
        vrs = [self.fmu.vr[k] for k in names]
        return self.slave.getReal(vrs) if self.fmu.version == 2 else self.slave.getFloat64(vrs)

    def outputs(self) -> list[float]:
        return self.get(self.fmu.outputs)

    def step(self, h: float):
        self.slave.doStep(currentCommunicationPoint=self.t, communicationStepSize=h)
        self.t += h

    def run(self, n: int, h: float, changes: dict | None = None) -> np.ndarray:
        """Outputs at n + 1 communication points; ``changes[i]`` is set after point i."""
        rows = [self.outputs()]
        for i in range(n):
            if changes and i in changes:
                self.set(changes[i])
            self.step(h)
            rows.append(self.outputs())
        return np.array(rows)

    def close(self):
        self.slave.terminate()
        self.slave.freeInstance()


# ------------------------------------------------- 1. FMU equals the in-process run --


@pytest.mark.slow  # FMU builds and runs of every bundled model
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", looped_examples())
def test_fmu_equals_the_python_engine_and_the_c_engine(fmu, name, version):
    exported = fmu(name, version)
    model, compiled = _model(name)
    n, h, _ = _horizon(name)
    t, reference, native = _reference(name)
    assert exported.outputs == list(compiled.output_names)
    for k in MULTIPLES:
        result = fmpy.simulate_fmu(str(exported.path), stop_time=n * h, output_interval=k * h)
        rows = np.arange(0, n + 1, k)
        assert len(result) == len(rows)
        assert np.max(np.abs(result["time"] - t[rows])) <= EXACT * t[-1]
        errors = _relative_errors(result, exported.outputs, reference, compiled, rows)
        for out, error in errors.items():
            assert error <= _tolerance(model, compiled, out), (out, k, error)
            j = compiled.output_names.index(out)
            assert np.array_equal(result[out], native[rows, j]), f"{out}: FMU and in-process C engine differ"


@pytest.mark.parametrize("version", VERSIONS)
def test_fmu_equals_the_simulate_command(fmu, tmp_path, version):
    """The issue's wording: `fmi-adjoint simulate` (CSV, printed with repr) vs the FMU."""
    name = "engine_mount"
    model, compiled = _model(name)
    n, h, alpha = 1000, *_horizon(name)[1:]
    csv = tmp_path / "sim.csv"
    assert main(["simulate", name, "--t-end", repr(n * h), "--step", repr(h), "--alpha", repr(alpha),
                 "-o", str(csv)]) == 0
    data = np.genfromtxt(csv, delimiter=",", names=True)
    result = fmpy.simulate_fmu(str(fmu(name, version).path), stop_time=n * h, output_interval=h)
    for out in compiled.output_names:
        scale = np.max(np.abs(data[out]))
        assert np.max(np.abs(result[out] - data[out])) / scale <= _tolerance(model, compiled, out), out


@pytest.mark.parametrize("version", VERSIONS)
def test_a_later_start_time_gives_the_same_run_as_in_process(fmu, version):
    """Consistent initialization at t0 > 0 (time-dependent excitation of engine_mount)."""
    name = "engine_mount"
    model, compiled = _model(name)
    _, h, alpha = _horizon(name)
    t0, n = 250 * h, 800
    traj = simulate(compiled, t0=t0, t_end=t0 + n * h, step=h, solver=HHT(alpha=alpha))
    result = fmpy.simulate_fmu(str(fmu(name, version).path), start_time=t0, stop_time=t0 + n * h, output_interval=h)
    assert np.max(np.abs(result["time"] - traj.t)) <= EXACT * traj.t[-1]
    errors = _relative_errors(result, compiled.output_names, traj.outputs(), compiled, slice(None))
    for out, error in errors.items():
        assert error <= _tolerance(model, compiled, out), (out, error)
    assert np.array_equal(np.column_stack([result[o] for o in compiled.output_names]),
                          _engine_run(name, n, t0=t0))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", looped_examples())
def test_the_default_experiment_runs(fmu, name, version):
    """A tool that runs the FMU's DefaultExperiment (stopTime, stepSize) must not fail:
    stepSize and stopTime lie on the FMU's internal step grid."""
    exported = fmu(name, version)
    experiment = etree.fromstring(exported.xml).find("DefaultExperiment")
    step = float(experiment.get("stepSize"))
    stop = float(experiment.get("stopTime"))
    internal = _model(name)[0].simulation.step
    assert step == internal
    assert abs(stop / step - round(stop / step)) <= EXACT * (stop / step), (
        f"DefaultExperiment stopTime = {stop!r} is not a multiple of the internal step {step!r}: "
        "a host that runs the default experiment ends with a rejected partial step")
    result = fmpy.simulate_fmu(str(exported.path), output_interval=step)
    assert result["time"][-1] == pytest.approx(stop, rel=EXACT)


# ------------------------------------------------- 2. validation, contents, metadata --


def _schema(version: int, name: str) -> etree.XMLSchema:
    return etree.XMLSchema(etree.parse(str(FMPY_DIR / "schema" / f"fmi{version}" / name)))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", looped_examples())
def test_fmpy_validation_and_the_xsd_accept_the_fmu(fmu, name, version):
    exported = fmu(name, version)
    assert fmpy.validation.validate_fmu(str(exported.path)) == []
    assert validate_against_schema(exported.xml, version) == []
    schema = _schema(version, f"fmi{version}ModelDescription.xsd")  # independent of the exporter's helper
    schema.assertValid(etree.fromstring(exported.xml))
    if version == 3:
        build = (exported.folder / "sources" / "buildDescription.xml").read_bytes()
        _schema(3, "fmi3BuildDescription.xsd").assertValid(etree.fromstring(build))
        assert validate_against_schema(build, 3, "fmi3BuildDescription.xsd") == []


@pytest.mark.parametrize("version", VERSIONS)
def test_the_schema_check_rejects_a_broken_description(fmu, version):
    """The validation above can fail: a variable without valueReference is rejected."""
    root = etree.fromstring(fmu("engine_mount", version).xml)
    variable = root.find("ModelVariables")[1]
    del variable.attrib["valueReference"]
    broken = etree.tostring(root)
    assert validate_against_schema(broken, version)
    assert not _schema(version, f"fmi{version}ModelDescription.xsd").validate(root)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", looped_examples())
def test_variables_carry_causality_units_descriptions_and_start_values(fmu, name, version):
    exported = fmu(name, version)
    model, compiled = _model(name)
    root = etree.fromstring(exported.xml)
    variables = {v.get("name"): v for v in root.find("ModelVariables")}
    units = {u.get("name") for u in root.iter("Unit")}
    # The model's parameters; Model Exchange adds the drift tolerance (tests/test_fmu_drift_tolerance.py).
    assert [p for p in exported.parameters if p != "me.drift_tolerance"] == [p.name for p in model.all_parameters]
    for k, par in enumerate(model.all_parameters):
        var = variables[par.name]
        typed = var.find("Real") if version == 2 else var
        assert exported.vr[par.name] == 1 + k
        assert var.get("causality") == par.causality
        assert var.get("variability") == ("tunable" if par.causality == "parameter" else "continuous")
        assert float(typed.get("start")) == float(par.value)
        assert (typed.get("unit") or "") == (par.unit or "")
        assert (var.get("description") or "") == (par.description or "")
        if par.unit:
            assert par.unit in units
    for j, out in enumerate(model.outputs):
        var = variables[out.name]
        typed = var.find("Real") if version == 2 else var
        assert exported.vr[out.name] == 1 + len(model.all_parameters) + j
        assert var.get("causality") == "output"
        assert (typed.get("unit") or "") == (out.unit or "")
        assert (var.get("description") or "") == (out.description or "")
    if version == 3:
        assert variables["time"].get("causality") == "independent" and exported.vr["time"] == 0
    # The binary's parameter defaults are the start values of the description.
    slave = Slave(exported, initialize=False)
    try:
        values = slave.get(exported.parameters)
    finally:
        slave.slave.freeInstance()
    starts = [float((variables[p].find("Real") if version == 2 else variables[p]).get("start"))
              for p in exported.parameters]
    assert values == starts


@pytest.mark.parametrize("version", VERSIONS)
def test_inputs_of_the_model_become_fmu_inputs(fmu, version):
    exported = fmu("engine_mount", version)
    root = etree.fromstring(exported.xml)
    inputs = [v.get("name") for v in root.find("ModelVariables") if v.get("causality") == "input"]
    assert inputs == ["F_ext"]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_log_categories_of_the_runtime_are_declared(fmu, version):
    """fmiXSetDebugLogging takes categories from <LogCategories>; the runtime logs under
    'logEvents' and 'logStatusError' (fa_fmu_common.h: "declare both in modelDescription.xml")."""
    root = etree.fromstring(fmu("engine_mount", version).xml)
    declared = {c.get("name") for c in root.iter("Category")}
    assert {"logEvents", "logStatusError"} <= declared


@pytest.mark.parametrize("version", VERSIONS)
def test_fmu_layout_sources_and_resources(fmu, version):
    exported = fmu("engine_mount", version)
    with zipfile.ZipFile(exported.path) as archive:
        names = set(archive.namelist())
    layer = f"fa_fmi{version}.c"
    for source in ("model.c", "model.h", "fa_engine.c", "fa_engine.h", layer, "fa_fmu_common.c",
                   "fa_fmu_common.h", "fmu_config.h"):
        assert f"sources/{source}" in names
    assert "resources/model.toml" in names
    assert (exported.folder / "resources" / "model.toml").read_text() == example_path("engine_mount").read_text()
    assert exported.binary.relative_to(exported.folder).as_posix() in names
    if version == 3:
        assert "sources/buildDescription.xml" in names
    # No Python in the binary's dependencies.
    needed = _needed_libraries(exported.binary)
    assert not any("python" in lib for lib in needed), needed


def _needed_libraries(binary: Path) -> list[str]:
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf is missing")
    text = subprocess.run([readelf, "-d", str(binary)], capture_output=True, text=True, check=True).stdout
    return [line.split("[")[1].split("]")[0] for line in text.splitlines() if "(NEEDED)" in line]


def test_the_fmu_file_is_readable_like_other_outputs(fmu):
    """Other CLI outputs get 0666 & ~umask (files.atomic_output); a 0600 .fmu cannot be
    handed to colleagues on a shared machine."""
    mask = os.umask(0o022)
    os.umask(mask)
    mode = fmu("engine_mount", 2).path.stat().st_mode & 0o777
    assert mode == 0o666 & ~mask, oct(mode)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_binary_exports_only_fmi_functions(fmu, version):
    """Internal symbols (fa_residual, fa_engine_step, ...) must not be exported: two
    different fmi-adjoint FMUs in one process would otherwise bind to each other's code."""
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm is missing")
    text = subprocess.run([nm, "-D", "--defined-only", str(fmu("engine_mount", version).binary)],
                          capture_output=True, text=True, check=True).stdout
    symbols = [line.split()[-1] for line in text.splitlines() if line.strip()]
    foreign = [s for s in symbols if not s.startswith(f"fmi{version}")]
    assert not foreign, f"exported non-FMI symbols: {foreign[:8]} ..."


def test_two_different_fmus_in_one_process_do_not_interfere(fmu, tmp_path):
    """A host that loads one FMU with RTLD_GLOBAL (e.g. Python's ctypes.RTLD_GLOBAL) must not
    change the results of another fmi-adjoint FMU (subprocess: a wrong binding may crash)."""
    first, second = fmu("engine_mount", 2), fmu("sdof", 2)
    n, h = 200, _model("sdof")[0].simulation.step
    script = textwrap.dedent(f"""
        import ctypes, sys, numpy as np, fmpy
        ctypes.CDLL({str(first.binary)!r}, mode=ctypes.RTLD_GLOBAL)
        r = fmpy.simulate_fmu({str(second.path)!r}, stop_time={n * h!r}, output_interval={h!r})
        np.save({str(tmp_path / "x.npy")!r}, r["x"])
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    expected = _engine_run("sdof", n)[:, 0]
    assert np.array_equal(np.load(tmp_path / "x.npy"), expected)


# ----------------------------------------------------------------- 3. the C host --


@pytest.fixture(scope="module")
def host(tmp_path_factory) -> Path:
    """tests/fmu_host.c compiled with the system compiler."""
    exe = tmp_path_factory.mktemp("host") / "fmu_host"
    proc = subprocess.run([CC, "-std=c99", "-O1", "-g", "-Wall", "-Wextra", f"-I{FMI_HEADERS}",
                           "-o", str(exe), str(TESTS_DIR / "fmu_host.c"), "-ldl"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return exe


def _host_command(host: Path, exported: Exported, comm: float, n: int, *extra: str, outputs=None) -> list[str]:
    command = [str(host), "-v", str(exported.version), "-l", str(exported.binary), "-t", exported.token,
               "-r", exported.resources, "-H", repr(comm), "-n", str(n)]
    for out in outputs if outputs is not None else exported.outputs:
        command += ["-o", str(exported.vr[out])]
    return command + list(extra)


def _parse_host(stdout: str) -> tuple[np.ndarray, str]:
    lines = stdout.strip().splitlines()
    assert lines and lines[-1].startswith("DONE"), stdout[-500:]
    return np.array([[float(x) for x in line.split()] for line in lines[:-1]]), lines[-1]


HOST_K, HOST_N = 5, 200            # communication step 5 h, 200 communication steps


@pytest.mark.parametrize("version", VERSIONS)
def test_c_host_runs_the_fmu_without_python(host, fmu, version):
    exported = fmu("engine_mount", version)
    model, compiled = _model("engine_mount")
    h = model.simulation.step
    values = {"c_E1": 1.0e5, "F_ext": 2.5}
    sets = [arg for k, v in values.items() for arg in ("-s", f"{exported.vr[k]}={v!r}")]
    proc = subprocess.run(_host_command(host, exported, HOST_K * h, HOST_N, *sets, "-c", "3", "-x", "1e300",
                                        "-S", "-G"), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data, done = _parse_host(proc.stdout)
    # one logged error per cycle for the rejected step, plus the rejected GUID/token
    assert done == "DONE cycles=3 errors_logged=4"
    assert "must be positive and finite" in proc.stderr and "mismatch" in proc.stderr
    assert data.shape == (HOST_N + 1, 1 + len(exported.outputs))
    rows = np.arange(0, HOST_K * HOST_N + 1, HOST_K)
    p = compiled.parameter_vector(values)
    traj = simulate(compiled, p, t_end=HOST_K * HOST_N * h, step=h, solver=HHT(alpha=model.simulation.alpha))
    assert np.max(np.abs(data[:, 0] - traj.t[rows])) <= EXACT * traj.t[-1]
    reference = traj.outputs()
    native = _engine_run("engine_mount", HOST_K * HOST_N, values)
    for j, out in enumerate(exported.outputs):
        k = compiled.output_names.index(out)
        scale = np.max(np.abs(reference[:, k]))
        assert np.max(np.abs(data[:, 1 + j] - reference[rows, k])) / scale <= _tolerance(model, compiled, out), out
        assert np.array_equal(data[:, 1 + j], native[rows, k]), out


@pytest.mark.parametrize("version", VERSIONS)
def test_c_host_sees_errors_not_crashes(host, fmu, version):
    """A Newton failure (an absurd input value mid-run), a singular initialization and a
    non-finite value end with an Error status and a logged message."""
    exported = fmu("engine_mount", version)
    h = _model("engine_mount")[0].simulation.step
    cases = [
        (["-m", f"3:{exported.vr['F_ext']}=1e300"], "Newton did not converge"),
        (["-s", f"{exported.vr['m_L']}=0"], "singular"),
        (["-s", f"{exported.vr['c_E1']}=nan"], "not finite"),
    ]
    for extra, message in cases:
        proc = subprocess.run(_host_command(host, exported, h, 10, *extra), capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 3, (extra, proc.returncode, proc.stderr[-2000:])
        logged = [line for line in proc.stderr.splitlines() if line.startswith("LOG status=3")]
        assert any(message in line for line in logged), (extra, proc.stderr[-2000:])


@pytest.mark.parametrize("version", VERSIONS)
def test_valgrind_finds_no_leak_over_100_cycles(host, fmu, version):
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        pytest.skip("valgrind is not installed")
    exported = fmu("engine_mount", version)
    h = _model("engine_mount")[0].simulation.step
    command = [valgrind, "--leak-check=full", "--errors-for-leak-kinds=definite,indirect,possible",
               "--error-exitcode=1", "-q"]
    args = _host_command(host, exported, 4 * h, 25, "-s", f"{exported.vr['c_E1']}=1e5", "-c", "100",
                         "-x", "1e300", "-S", "-G")
    proc = subprocess.run(command + args, capture_output=True, text=True, timeout=600)
    report = "\n".join(line for line in proc.stderr.splitlines() if line.startswith("=="))
    assert proc.returncode == 0, report or proc.stderr[-3000:]
    assert "DONE cycles=100" in proc.stdout
    assert "definitely lost" not in report and "Invalid" not in report, report


def test_valgrind_check_detects_a_leak(host, fmu, tmp_path):
    """The harness can fail: a host that never frees its instances is reported."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        pytest.skip("valgrind is not installed")
    exported = fmu("engine_mount", 2)
    leaky = tmp_path / "leaky_host.c"
    source = (TESTS_DIR / "fmu_host.c").read_text()
    freeing = "free_instance(&a, c);\n    }"
    assert source.count(freeing) == 1
    leaky.write_text(source.replace(freeing, "(void)free_instance;\n    }"))
    exe = tmp_path / "leaky_host"
    subprocess.run([CC, "-std=c99", f"-I{FMI_HEADERS}", "-o", str(exe), str(leaky), "-ldl"], check=True,
                   capture_output=True)
    h = _model("engine_mount")[0].simulation.step
    proc = subprocess.run([valgrind, "--leak-check=full", "--error-exitcode=1", "-q",
                           *_host_command(exe, exported, h, 2, "-c", "3")], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1 and "definitely lost" in proc.stderr


# ---------------------------------------------------------- 4. rebuild from sources --


@pytest.mark.slow  # rebuilds FMUs from their sources
@pytest.mark.parametrize("version", VERSIONS)
def test_rebuild_from_sources_gives_identical_results(fmu, tmp_path, version):
    if shutil.which("cmake") is None:
        pytest.skip("cmake is missing (fmpy.build.build_platform_binary needs it)")
    from fmpy.build import build_platform_binary
    from fmpy.util import create_zip_archive

    exported = fmu("slider_crank", version)
    folder = tmp_path / "unzipped"
    with zipfile.ZipFile(exported.path) as archive:
        archive.extractall(folder)
    binary = folder / exported.binary.relative_to(exported.folder)
    shutil.rmtree(folder / "binaries")
    (tmp_path / "build").mkdir()
    build_platform_binary(folder, tmp_path / "build")
    assert binary.exists()  # really rebuilt: the exported binary was deleted
    rebuilt = tmp_path / "rebuilt.fmu"
    create_zip_archive(rebuilt, folder)
    assert fmpy.validation.validate_fmu(str(rebuilt)) == []
    n, h, _ = _horizon("slider_crank")
    a = fmpy.simulate_fmu(str(exported.path), stop_time=n * h, output_interval=h)
    b = fmpy.simulate_fmu(str(rebuilt), stop_time=n * h, output_interval=h)
    for out in exported.outputs:
        assert np.array_equal(a[out], b[out]), out


# ------------------------------------------------------- 5. parameters and inputs --


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name, values", [
    ("engine_mount", {"c_E1": 1.23e5, "c_E2": 2.5e9, "d_E": 5.0, "F_ext": -40.0}),
    ("slider_crank", None),
])
def test_start_values_take_effect_as_in_process(fmu, name, version, values):
    model, compiled = _model(name)
    if values is None:  # every parameter changed by 1 % (as tests/test_native_engine.py)
        values = {p: float(v) * 1.01 for p, v in zip(compiled.parameter_names, compiled.defaults) if v}
    n, h, _ = _horizon(name)
    t, reference, native = _reference(name, tuple(values.items()))
    default = _reference(name)[1]
    result = fmpy.simulate_fmu(str(fmu(name, version).path), stop_time=n * h, output_interval=h,
                               start_values=values)
    errors = _relative_errors(result, compiled.output_names, reference, compiled, slice(None))
    for out, error in errors.items():
        assert error <= _tolerance(model, compiled, out), (out, error)
        k = compiled.output_names.index(out)
        assert np.array_equal(result[out], native[:, k]), out
    # ... and the values made a difference.
    assert max(np.max(np.abs(reference[:, k] - default[:, k])) / np.max(np.abs(default[:, k]))
               for k in range(compiled.n_y)) > 1e-3


@pytest.mark.parametrize("version", VERSIONS)
def test_export_set_values_become_the_fmu_defaults(tmp_path, version):
    out = tmp_path / "em.fmu"
    assert main(["export", "engine_mount", "--fmi", str(version), "--set", "c_E1=1.23e5", "--set", "d_E=5",
                 "-o", str(out)]) == 0
    exported = _unpack("engine_mount", version, out)
    root = etree.fromstring(exported.xml)
    start = {v.get("name"): (v.find("Real") if version == 2 else v).get("start") for v in root.find("ModelVariables")}
    assert float(start["c_E1"]) == 1.23e5 and float(start["d_E"]) == 5.0
    model, compiled = _model("engine_mount")
    n, h, _ = _horizon("engine_mount")
    n = 1000
    values = {"c_E1": 1.23e5, "d_E": 5.0}
    result = fmpy.simulate_fmu(str(out), stop_time=n * h, output_interval=h)
    native = _engine_run("engine_mount", n, values)
    for out_name in compiled.output_names:
        assert np.array_equal(result[out_name], native[:, compiled.output_names.index(out_name)]), out_name
    p = compiled.parameter_vector(values)
    traj = simulate(compiled, p, t_end=n * h, step=h, solver=HHT(alpha=model.simulation.alpha))
    errors = _relative_errors(result, compiled.output_names, traj.outputs(), compiled, slice(None))
    for out_name, error in errors.items():
        assert error <= _tolerance(model, compiled, out_name), (out_name, error)


def _compare_changed(run: np.ndarray, unchanged: np.ndarray, k1: int):
    """Identical up to and including communication point k1, clearly different after."""
    assert np.array_equal(run[: k1 + 1], unchanged[: k1 + 1])
    scale = np.max(np.abs(unchanged), axis=0)
    assert np.max(np.abs(run[k1 + 1:] - unchanged[k1 + 1:]) / scale) > 1e-4


@pytest.mark.parametrize("version", VERSIONS)
def test_a_tunable_parameter_changed_between_steps_takes_effect(fmu, version):
    """c_E1 changed at t1: equals the in-process C engine with the same change (bit for bit),
    equals the unchanged run before t1 and differs after, and equals a run restored from
    an FMU state saved at t1 in which the change is made."""
    exported = fmu("engine_mount", version)
    h = _model("engine_mount")[0].simulation.step
    k, n, k1 = 4, 400, 150               # communication step 4 h; change after point 150
    change = {"c_E1": 1.5e5}

    a = Slave(exported, "unchanged")
    unchanged = [a.outputs()]
    saved = None
    for i in range(n):
        if i == k1:
            state = a.slave.getFMUState()
            saved = a.slave.serializeFMUState(state)
            a.slave.freeFMUState(state)
        a.step(k * h)
        unchanged.append(a.outputs())
    a.close()
    unchanged = np.array(unchanged)

    b = Slave(exported, "changed")
    changed = b.run(n, k * h, {k1: change})
    b.close()
    _compare_changed(changed, unchanged, k1)

    engine = _engine_run("engine_mount", n * k, changes={k1 * k: change})
    assert np.array_equal(changed, engine[::k])

    c = Slave(exported, "restored", initialize=False)
    state = c.slave.deserializeFMUState(saved)
    c.slave.setFMUState(state)
    c.slave.freeFMUState(state)
    c.t = k1 * k * h
    restored = c.run(n - k1, k * h, {0: change})
    c.close()
    assert np.array_equal(restored, changed[k1:])


@pytest.mark.parametrize("version", VERSIONS)
def test_the_input_changed_between_steps_takes_effect(fmu, version):
    """F_ext of engine_mount (an FMU input, default 0) stepped at t1 acts as a force on the
    load mass from t1 on: as in the in-process C engine, and mechanically the same as
    raising g by F_ext / m_L at t1 (the same force on x1)."""
    exported = fmu("engine_mount", version)
    model, compiled = _model("engine_mount")
    h = model.simulation.step
    n, k1, force = 600, 200, 50.0
    g, m_L = (float(compiled.defaults[compiled.parameter_names.index(p)]) for p in ("g", "m_L"))

    s = Slave(exported, "input")
    assert s.get(["F_ext"]) == [0.0]
    stepped = s.run(n, h, {k1: {"F_ext": force}})
    s.close()
    unchanged = _reference("engine_mount")[2][: n + 1]
    _compare_changed(stepped, unchanged, k1)
    assert np.array_equal(stepped, _engine_run("engine_mount", n, changes={k1: {"F_ext": force}}))

    s = Slave(exported, "gravity")
    shifted = s.run(n, h, {k1: {"g": g + force / m_L}})
    s.close()
    for j, out in enumerate(compiled.output_names):
        scale = np.max(np.abs(stepped[:, j]))
        assert np.max(np.abs(shifted[:, j] - stepped[:, j])) / scale <= _tolerance(model, compiled, out), out


@pytest.mark.parametrize("version", VERSIONS)
def test_invalid_values_and_newton_failures_end_in_error_not_crash(fmu, version):
    from fmpy.fmi1 import FMICallException

    exported = fmu("engine_mount", version)
    h = _model("engine_mount")[0].simulation.step
    compiled = _model("engine_mount")[1]
    s = Slave(exported, "errors")
    with pytest.raises(FMICallException):
        s.set({"c_E1": float("nan")})
    assert s.get(["c_E1"]) == [compiled.defaults[compiled.parameter_names.index("c_E1")]]  # nothing was set
    s.run(3, h)
    s.set({"F_ext": 1e300})
    with pytest.raises(FMICallException):
        s.step(h)
    with pytest.raises(FMICallException):       # the error state persists
        s.slave.doStep(currentCommunicationPoint=s.t, communicationStepSize=h)
    s.slave.reset()                             # ... until Reset
    s.initialize()
    assert s.run(3, h).shape == (4, 3)
    s.close()


# ------------------------------------------------------------------ 6. FMU states --


@pytest.mark.parametrize("scheme", ["hht", "generalized_alpha"])
@pytest.mark.parametrize("version", VERSIONS)
def test_fmu_state_and_serialization_reproduce_the_continuation(fmu, version, scheme):
    """A restored state, and one deserialized into a fresh instance, continue exactly as the
    uninterrupted in-process C run of the export's scheme.  With generalized-alpha the state
    must hold the pseudo-acceleration abar, whose recursion reads the previous step's (Arnold &
    Brüls 2007, eq. (7b)): without it the continuation would differ."""
    name = "slider_crank"
    model, compiled = _model(name)
    solver = GA if scheme == "generalized_alpha" else HHT(alpha=model.simulation.alpha)
    exported = fmu(name, version, GA if scheme == "generalized_alpha" else None)
    h = model.simulation.step
    native = _native(name).simulate(compiled.defaults.copy(), t_end=450 * h, step=h, solver=solver)[1]
    s = Slave(exported, "state")
    s.run(100, 3 * h)
    t1 = s.t
    state = s.slave.getFMUState()
    blob = s.slave.serializeFMUState(state)
    first = s.run(50, 3 * h)
    assert np.array_equal(first, native[300::3])
    s.slave.setFMUState(state)
    s.t = t1
    if version == 3:
        assert s.slave.getFloat64([0]) == [pytest.approx(t1, rel=EXACT)]
    assert np.array_equal(s.run(50, 3 * h), first)
    # The state survives serialization into a fresh, uninitialized instance.
    other = Slave(exported, "fresh", initialize=False)
    restored = other.slave.deserializeFMUState(blob)
    other.slave.setFMUState(restored)
    other.t = t1
    assert np.array_equal(other.run(50, 3 * h), first)
    other.slave.freeFMUState(restored)
    other.close()
    s.slave.freeFMUState(state)
    s.close()


def _reserialized(blob: bytes, changes: dict[int, float]) -> bytes:
    """``blob`` (a serialized FMU state: 32-byte header, then doubles) with the doubles at the
    given indices changed and the FNV-1a checksum of the payload recomputed, as fa_fmu_common.c
    writes it: a state the checksum cannot tell from a genuine one."""
    payload = np.frombuffer(blob[32:], dtype=np.float64).copy()
    for index, value in changes.items():
        payload[index] = value
    data = payload.tobytes()
    checksum = 14695981039346656037
    for byte in data:
        checksum = ((checksum ^ byte) * 1099511628211) % 2**64
    return blob[:24] + checksum.to_bytes(8, sys.byteorder) + data


@pytest.mark.parametrize("version", VERSIONS)
def test_a_state_of_another_integrator_setting_is_refused(fmu, version):
    """An FMU runs the scheme it was exported with: a state whose scheme code or rho_inf (engine
    state fields 14 and 15, after the FMU's 4 + 3 n_p leading values: mode, start time, preview
    flag, time and the inputs' values, times and slopes) were changed, with a valid
    checksum, is refused at fmi2SetFMUState/fmi3SetFMUState, and the instance goes on."""
    from fmpy.fmi1 import FMICallException

    exported = fmu("slider_crank", version, GA)
    h = _model("slider_crank")[0].simulation.step
    s = Slave(exported, "target")
    s.run(10, h)
    state = s.slave.getFMUState()
    blob = bytes(s.slave.serializeFMUState(state))
    s.slave.freeFMUState(state)
    lead = 4 + 3 * len(_model("slider_crank")[1].parameter_names)
    scheme, rho_inf = lead + 14, lead + 15
    genuine = s.slave.deserializeFMUState(_reserialized(blob, {}))  # the rewriting itself is faithful
    s.slave.setFMUState(genuine)
    s.slave.freeFMUState(genuine)
    for changes in ({scheme: 0.0}, {rho_inf: 0.6}):
        foreign = s.slave.deserializeFMUState(_reserialized(blob, changes))
        with pytest.raises(FMICallException):
            s.slave.setFMUState(foreign)
        s.slave.freeFMUState(foreign)
    assert s.run(2, h).shape[0] == 3  # still usable
    s.close()


@pytest.mark.parametrize("version", VERSIONS)
def test_bad_serialized_states_are_rejected(fmu, version):
    from fmpy.fmi1 import FMICallException

    exported = fmu("engine_mount", version)
    foreign = fmu("sdof", version)
    s = Slave(exported, "target")
    state = s.slave.getFMUState()
    blob = s.slave.serializeFMUState(state)
    s.slave.freeFMUState(state)
    f = Slave(foreign, "foreign")
    state = f.slave.getFMUState()
    foreign_blob = f.slave.serializeFMUState(state)
    f.slave.freeFMUState(state)
    f.close()
    corrupted = bytearray(blob)
    corrupted[-3] ^= 0x40
    for bad in (bytes(corrupted), blob[:-8], foreign_blob, b"not a state at all" * 4):
        with pytest.raises(FMICallException):
            s.slave.deserializeFMUState(bad)
    h = _model("engine_mount")[0].simulation.step
    assert s.run(2, h).shape == (3, 3)  # still usable
    s.close()


@pytest.mark.parametrize("version", VERSIONS)
def test_two_instances_at_once_are_independent(fmu, version):
    exported = fmu("engine_mount", version)
    h = _model("engine_mount")[0].simulation.step
    values = {"c_E1": 1.1e5, "F_ext": 10.0}
    n = 300
    a, b = Slave(exported, "a"), Slave(exported, "b", values=values)
    rows_a, rows_b = [a.outputs()], [b.outputs()]
    for i in range(n):
        a.step(h)
        rows_a.append(a.outputs())
        if i % 2 == 0:
            b.step(2 * h)
            rows_b.append(b.outputs())
        if i == n // 2:
            a.set({"A": 80.0})  # a change in one instance must not reach the other
    a.close()
    b.close()
    solo_a = _engine_run("engine_mount", n, changes={n // 2 + 1: {"A": 80.0}})
    solo_b = _engine_run("engine_mount", n, values)
    assert np.array_equal(np.array(rows_a), solo_a)
    assert np.array_equal(np.array(rows_b), solo_b[::2][: len(rows_b)])


# ---------------------------------------------------------------- 7. bad input --

NUMERIC_MODEL = """
[model]
name = "numeric"
description = "a numeric force element (hand-written C code)"

[simulation]
t_end = 1.0
step = 1e-3
alpha = -0.05

[parameters]
m = {{ value = 1.5, unit = "kg" }}
k1 = {{ value = 400.0, unit = "N/m" }}
k3 = {{ value = 2e5, unit = "N/m^3" }}
d = {{ value = 1.5, unit = "Ns/m" }}

[[coordinates]]
name = "x"
mass = "m"
initial_position = 0.02

[[coordinates]]
name = "base"
mass = 5.0

[[forces]]
type = "{element}"
name = "numeric_spring"
coordinates = ["x", "base"]
k1 = "k1"
k3 = "k3"
d = "d"

[[forces]]
type = "polynomial_spring_damper"
name = "mount"
coordinates = ["base"]
k1 = 1e4
k2 = 0
k3 = 0
d1 = 20.0
d2 = 0
d3 = 0

[[outputs]]
name = "x"
expression = "x"
"""


def _assert_clean_failure(rc: int, stderr: str, folder: Path, *, mentions: str):
    """Exit code 2, exactly one 'fmi-adjoint: error:' line, no traceback, nothing written."""
    assert rc == 2, stderr
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("fmi-adjoint: error:")]
    assert len(errors) == 1 and len(stderr.strip().splitlines()) == 1, stderr
    assert mentions.lower() in errors[0].lower(), errors[0]
    if folder.is_dir():
        leftovers = [p.name for p in folder.iterdir() if p.suffix in (".fmu", ".part") or ".part" in p.name]
        assert not leftovers, leftovers


def _numeric_plugin(tmp_path: Path) -> Path:
    """A distribution registering the numeric element of tests/test_numeric_element.py
    through the real entry-point mechanism (a .dist-info folder on PYTHONPATH)."""
    site = tmp_path / "site"
    info = site / "numeric_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: numeric-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[fmi_adjoint.forces]\nnumeric_cubic_spring_no_c = numeric_plugin:NoCCodeSpring\n")
    (site / "numeric_plugin.py").write_text(f"import sys\nsys.path.insert(0, {str(TESTS_DIR)!r})\n"
                                            "from test_numeric_element import NoCCodeSpring\n")
    return site


def test_model_code_refuses_an_element_without_c_code():
    from test_numeric_element import NoCCodeSpring, model_with

    model = model_with(NoCCodeSpring("numeric_spring", coordinates=("x", "base"), k1="k1", k3="k3", d="d"))
    with pytest.raises(ModelError, match="'numeric_spring'.*has no C code"):
        model_c_sources(Derivation(model))


@pytest.mark.parametrize("version", [2, 3])
def test_a_numeric_element_with_c_code_is_exported(tmp_path, monkeypatch, version):
    """The hand-written C of a numeric element is linked into the FMU (the element's C code)."""
    import fmpy
    from importlib import metadata

    from fmi_adjoint import compile_model, load_model, simulate
    from fmi_adjoint.forces import registry
    from test_numeric_element import NumericCubicSpring
    from test_registry import FakeEntryPoint

    entries = list(metadata.entry_points(group=registry.GROUP))
    entries.append(FakeEntryPoint("numeric_cubic_spring", NumericCubicSpring))
    monkeypatch.setattr(registry, "_DEFAULT", registry.Registry(entries))
    source = tmp_path / "numeric.toml"
    source.write_text(NUMERIC_MODEL.format(element="numeric_cubic_spring"))
    fmu = export_fmu(source, tmp_path / "numeric.fmu", fmi_version=version)
    model = load_model(source)
    settings = model.simulation
    n = 200
    traj = simulate(compile_model(model), t_end=n * settings.step)
    result = fmpy.simulate_fmu(str(fmu), stop_time=n * settings.step, output_interval=settings.step,
                               output=[o.name for o in model.outputs])
    for k, out in enumerate(model.outputs):
        scale = np.max(np.abs(traj.outputs()[:, k])) or 1.0
        assert np.max(np.abs(result[out.name] - traj.outputs()[:, k])) / scale <= SAME_ALGORITHM, out.name


def test_cli_refuses_an_element_without_c_code_in_process(tmp_path, monkeypatch, capsys):
    from importlib import metadata

    from fmi_adjoint.forces import registry
    from test_numeric_element import NoCCodeSpring
    from test_registry import FakeEntryPoint

    entries = list(metadata.entry_points(group=registry.GROUP))
    entries.append(FakeEntryPoint("numeric_cubic_spring_no_c", NoCCodeSpring))
    monkeypatch.setattr(registry, "_DEFAULT", registry.Registry(entries))
    source = tmp_path / "numeric.toml"
    source.write_text(NUMERIC_MODEL.format(element="numeric_cubic_spring_no_c"))
    out = tmp_path / "out"
    out.mkdir()
    rc = main(["export", str(source), "-o", str(out / "numeric.fmu")])
    _assert_clean_failure(rc, capsys.readouterr().err, out, mentions="C code")


def test_cli_refuses_an_element_without_c_code_in_a_subprocess(tmp_path):
    site = _numeric_plugin(tmp_path)
    source = tmp_path / "numeric.toml"
    source.write_text(NUMERIC_MODEL.format(element="numeric_cubic_spring_no_c"))
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, PYTHONPATH=str(site))
    check = subprocess.run([sys.executable, "-m", "fmi_adjoint", "simulate", str(source), "--t-end", "0.002"],
                           capture_output=True, text=True, env=env, timeout=120)
    assert check.returncode == 0, check.stderr  # the plugin is installed and the model runs
    proc = subprocess.run([sys.executable, "-m", "fmi_adjoint", "export", str(source), "--fmi", "3", "-o",
                           str(out / "numeric.fmu")], capture_output=True, text=True, env=env, timeout=120)
    _assert_clean_failure(proc.returncode, proc.stderr, out, mentions="C code")


def test_the_error_names_the_element_without_c_code(tmp_path):
    """A clear error says which element of the model lacks C code."""
    site = _numeric_plugin(tmp_path)
    source = tmp_path / "numeric.toml"
    source.write_text(NUMERIC_MODEL.format(element="numeric_cubic_spring_no_c"))
    proc = subprocess.run([sys.executable, "-m", "fmi_adjoint", "export", str(source), "-o",
                           str(tmp_path / "numeric.fmu")], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(site)), timeout=120)
    assert proc.returncode == 2
    assert "numeric_spring" in proc.stderr or "numeric_cubic_spring" in proc.stderr, proc.stderr


def test_no_compiler_in_a_subprocess(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    env = {"PATH": str(empty), "CC": "/nonexistent/cc", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    proc = subprocess.run([sys.executable, "-m", "fmi_adjoint", "export", "engine_mount", "--fmi", "2", "-o",
                           str(out / "em.fmu")], capture_output=True, text=True, env=env, timeout=120)
    _assert_clean_failure(proc.returncode, proc.stderr, out, mentions="compiler")


def test_no_compiler_in_process(tmp_path, monkeypatch, capsys):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("CC", "/nonexistent/cc")
    out = tmp_path / "out"
    out.mkdir()
    rc = main(["export", "sdof", "--fmi", "3", "-o", str(out / "sdof.fmu")])
    _assert_clean_failure(rc, capsys.readouterr().err, out, mentions="compiler")


def test_a_compiler_that_fails(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CC", shutil.which("false") or "/bin/false")
    out = tmp_path / "out"
    out.mkdir()
    rc = main(["export", "sdof", "-o", str(out / "sdof.fmu")])
    _assert_clean_failure(rc, capsys.readouterr().err, out, mentions="compil")


@pytest.mark.parametrize("how", ["main", "subprocess"])
def test_missing_output_folder(tmp_path, capsys, how):
    target = tmp_path / "missing" / "em.fmu"
    if how == "main":
        rc, err = main(["export", "engine_mount", "-o", str(target)]), capsys.readouterr().err
    else:
        proc = subprocess.run([sys.executable, "-m", "fmi_adjoint", "export", "engine_mount", "-o", str(target)],
                              capture_output=True, text=True, timeout=120)
        rc, err = proc.returncode, proc.stderr
    _assert_clean_failure(rc, err, tmp_path, mentions="does not exist")
    assert not (tmp_path / "missing").exists()


def test_unwritable_output_folder():
    """A folder the user cannot write (as root: run as 'nobody' after the imports, since the
    interpreter itself may live in root's home)."""
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="fmi_adjoint_unwritable_"))
    os.chmod(base, 0o755)  # traversable for 'nobody'
    folder = base / "readonly"
    folder.mkdir()
    script = textwrap.dedent(f"""
        import os, sys
        from fmi_adjoint.cli.main import main
        import fmi_adjoint.export, fmi_adjoint.cli.loading, fmi_adjoint.files  # noqa: F401
        if os.geteuid() == 0:
            os.setgid(65534)
            os.setuid(65534)
        sys.exit(main(["export", "engine_mount", "-o", {str(folder / "em.fmu")!r}]))
    """)
    folder.chmod(0o555)
    try:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        _assert_clean_failure(proc.returncode, proc.stderr, folder, mentions="not writable")
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(0o755)
        shutil.rmtree(base)


@pytest.mark.parametrize("target", ["/proc/fmi_adjoint_test.fmu", "/sys/fmi_adjoint_test.fmu"])
def test_a_folder_that_refuses_new_files(target, capsys):
    """os.access may allow writing (root) while creating a file fails: still a clear error."""
    if not Path(target).parent.is_dir():
        pytest.skip(f"{Path(target).parent} does not exist")
    try:
        rc = main(["export", "sdof", "-o", target])
    except OSError as exc:
        pytest.fail(f"main() raised {exc!r} instead of reporting an error with exit code 2")
    _assert_clean_failure(rc, capsys.readouterr().err, Path(target).parent, mentions=Path(target).name)


def test_a_write_failure_while_zipping_leaves_nothing(tmp_path, monkeypatch, capsys):
    """Disk full while the archive is written: exit 2, a clear error, no .fmu and no .part."""
    original = zipfile.ZipFile.write
    calls = []

    def failing_write(self, *args, **kwargs):
        calls.append(args[0])
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "write", failing_write)
    out = tmp_path / "out"
    out.mkdir()
    try:
        rc = main(["export", "sdof", "-o", str(out / "sdof.fmu")])
    except OSError as exc:
        assert list(out.iterdir()) == []  # at least nothing is left behind
        pytest.fail(f"main() raised {exc!r} instead of reporting an error with exit code 2")
    assert len(calls) == 3
    _assert_clean_failure(rc, capsys.readouterr().err, out, mentions="sdof.fmu")
    assert list(out.iterdir()) == []


def test_an_existing_fmu_survives_a_failed_export(tmp_path, monkeypatch, capsys):
    target = tmp_path / "sdof.fmu"
    target.write_bytes(b"previous export")
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    monkeypatch.setenv("CC", "/nonexistent/cc")
    assert main(["export", "sdof", "-o", str(target)]) == 2
    assert "compiler" in capsys.readouterr().err
    assert target.read_bytes() == b"previous export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sdof.fmu"]


def test_bad_fmi_version_and_step(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["export", "sdof", "--fmi", "4", "-o", str(tmp_path / "x.fmu")])
    assert exit_info.value.code == 2
    capsys.readouterr()
    assert main(["export", "sdof", "--step", "-1", "-o", str(tmp_path / "x.fmu")]) == 2
    _assert_clean_failure(2, capsys.readouterr().err, tmp_path, mentions="step")
    assert main(["export", "sdof", "--alpha", "0.5", "-o", str(tmp_path / "x.fmu")]) == 2
    _assert_clean_failure(2, capsys.readouterr().err, tmp_path, mentions="alpha")
    assert main(["export", "sdof", "--set", "nope=1", "-o", str(tmp_path / "x.fmu")]) == 2
    _assert_clean_failure(2, capsys.readouterr().err, tmp_path, mentions="nope")


# ------------------------------------------- 8. generalized-alpha (Arnold & Brüls 2007) --

#: The scheme of the generalized-alpha exports below and the length of their runs.  rho_inf =
#: 0.5: the comparison with the Python engine then holds at the HHT tiers; at larger rho_inf the
#: scheme itself carries the round-off of accelerations and multipliers further (it grows like
#: (1 - rho_inf)^-3, integrate/schemes.py), which the bit-for-bit comparison does not depend on.
GA = GeneralizedAlpha(rho_inf=0.5)
GA_STEPS = 600


def _export_record(exported: Exported) -> dict:
    return json.loads((exported.folder / "resources" / "export.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("version", VERSIONS)
def test_generalized_alpha_fmu_equals_the_c_engine_and_the_python_engine(fmu, version):
    """An FMU exported with ``GeneralizedAlpha(rho_inf=0.5)`` (Arnold & Brüls 2007, eqs. (7);
    slider_crank: configuration-dependent mass matrix and constraints) runs that scheme:
    bit for bit the in-process C engine's ``simulate(..., solver=GeneralizedAlpha(0.5))`` at
    every communication point (intervals h and 5 h), within the round-off floor of the Python
    engine's run of the same scheme, and far from the HHT run of the model's own settings."""
    name = "slider_crank"
    exported = fmu(name, version, GA)
    model, compiled = _model(name)
    h, n = model.simulation.step, GA_STEPS
    record = _export_record(exported)
    assert (record["integrator"], record["rho_inf"]) == ("generalized_alpha", 0.5) and "alpha" not in record
    config = (exported.folder / "sources" / "fmu_config.h").read_text()
    assert "#define FA_SCHEME 1\n" in config and "#define FA_SCHEME_PARAMETER 0.5\n" in config
    p = compiled.defaults.copy()
    times, native = _native(name).simulate(p, t_end=n * h, step=h, solver=GA)
    traj = simulate(compiled, p, t_end=n * h, step=h, solver=GA)
    assert np.array_equal(times, traj.t)
    hht = _native(name).simulate(p, t_end=n * h, step=h, solver=HHT(alpha=model.simulation.alpha))[1]
    for k in MULTIPLES:
        result = fmpy.simulate_fmu(str(exported.path), stop_time=n * h, output_interval=k * h)
        rows = np.arange(0, n + 1, k)
        assert len(result) == len(rows)
        assert np.max(np.abs(result["time"] - times[rows])) <= EXACT * times[-1]
        errors = _relative_errors(result, exported.outputs, traj.outputs(), compiled, rows)
        for out, error in errors.items():
            assert error <= _tolerance(model, compiled, out), (out, k, error)
            j = compiled.output_names.index(out)
            assert np.array_equal(result[out], native[rows, j]), f"{out}: FMU and in-process C engine differ"
    # The scheme made a difference (slider_acc: 3e-3 relative between the schemes).
    j = compiled.output_names.index("slider_acc")
    assert np.max(np.abs(native[:, j] - hht[:, j])) > 1e3 * INDEX3_ROUNDOFF * np.max(
        np.abs(native[:, j]))


@pytest.mark.parametrize("version", VERSIONS)
def test_generalized_alpha_fmu_passes_validation(fmu, version):
    exported = fmu("slider_crank", version, GA)
    assert fmpy.validation.validate_fmu(str(exported.path)) == []
    assert validate_against_schema(exported.xml, version) == []


def test_the_instantiation_token_covers_the_scheme(fmu, tmp_path):
    """The token hashes the scheme: an HHT export hashes the tuple of the exports made before
    generalized-alpha existed (sha256 of the model text and (values, step, alpha, version));
    a generalized-alpha export of the same model gets another token (its tuple has five
    fields, so the two can never coincide); an export.json edited to another rho_inf or to
    HHT no longer reproduces the token, and one forged consistently (token recomputed and
    written into the model description) is caught by the rebuild of the binary, which
    depends on the scheme: either way the embedded model is not trusted (its adjoint would
    differentiate another scheme than the binary runs)."""
    from fmi_adjoint.export import instantiation_token

    hht, ga = fmu("slider_crank", 2), fmu("slider_crank", 2, GA)
    text = example_path("slider_crank").read_text(encoding="utf-8")
    settings = _model("slider_crank")[0].simulation
    digest = hashlib.sha256((text + repr((None, settings.step, settings.alpha, 2))).encode()).digest()
    assert hht.token == "{" + str(uuid.UUID(bytes=digest[:16], version=4)) + "}"
    assert ga.token != hht.token
    with open_fmu(ga.path) as archive:
        assert archive.native is not None and archive.native_distrust is None
        assert export_scheme(archive.native) == GA
    record = _export_record(ga)
    hht_record = {**{k: v for k, v in record.items() if k != "rho_inf"}, "integrator": "hht", "alpha": settings.alpha}
    forged_token = instantiation_token(text, None, record["step"], HHT(alpha=settings.alpha), 2)
    cases = {
        "rho_inf": ({**record, "rho_inf": 0.6}, None, "do not reproduce the FMU's instantiation token"),
        "hht": (hht_record, None, "do not reproduce the FMU's instantiation token"),
        "hht_with_token": (hht_record, forged_token, "the binary does not match the embedded model"),
    }
    for label, (edited, token, reason) in cases.items():
        forged = tmp_path / f"forged_{label}.fmu"
        with zipfile.ZipFile(ga.path) as source, zipfile.ZipFile(forged, "w", zipfile.ZIP_DEFLATED) as target:
            for info in source.infolist():
                data = source.read(info)
                if info.filename == "resources/export.json":
                    data = json.dumps(edited).encode()
                if token and info.filename == "modelDescription.xml":
                    data = data.replace(ga.token.encode(), token.encode())
                target.writestr(info, data)
        with open_fmu(forged) as archive:
            assert archive.native is None, label
            assert reason in archive.native_distrust, (label, archive.native_distrust)


def test_a_generalized_alpha_model_file_exports_and_identifies_with_its_scheme(tmp_path, capsys):
    """``[simulation] integrator = "generalized_alpha"`` in a model file: ``export`` without
    options writes a generalized-alpha FMU (export.json), the trusted import identifies it
    on its embedded model with that scheme (the native discrete adjoint), and its cost and
    gradient are those of the model file and of the bundled model with ``--integrator
    generalized_alpha --rho-inf 0.8`` (same engine, same scheme: EXACT), while HHT gives
    another gradient.  The same holds for an FMU exported with those options (FMI 3)."""
    text = example_path("slider_crank").read_text(encoding="utf-8")
    assert text.count("alpha = -0.1\n") == 1
    toml = tmp_path / "crank_ga.toml"
    toml.write_text(text.replace("alpha = -0.1\n", 'integrator = "generalized_alpha"\nrho_inf = 0.8\n'),
                    encoding="utf-8")
    from_file, with_options = tmp_path / "crank_ga.fmu", tmp_path / "crank_options.fmu"
    assert main(["export", str(toml), "-o", str(from_file)]) == 0
    assert main(["export", "slider_crank", "--fmi", "3", "--integrator", "generalized_alpha", "--rho-inf", "0.8",
                 "-o", str(with_options)]) == 0
    capsys.readouterr()
    for path in (from_file, with_options):
        with zipfile.ZipFile(path) as archive:
            record = json.loads(archive.read("resources/export.json"))
        assert (record["integrator"], record["rho_inf"]) == ("generalized_alpha", 0.8), path.name
    # Data from perturbed parameters (0.3 s, every 10th step).
    _, compiled = _model("slider_crank")
    perturbed = compiled.parameter_vector({"c_s": 620.0, "d_s": 2.7, "m_s": 0.85})
    times, y = _native("slider_crank").simulate(perturbed, t_end=0.3, step=1e-3, solver=GA)
    data = tmp_path / "data.csv"
    write_csv(data, times[::10], {out: y[::10, compiled.output_index(out)] for out in ("xs", "slider_acc")})
    common = ["--data", data, "--params", "c_s,d_s,m_s"]
    reference = gradient_json([toml, *common], capsys)
    assert reference["integrator"] == "generalized_alpha(rho_inf=0.8)"
    runs = {
        "fmu": gradient_json(["--fmu", from_file, *common], capsys),
        "fmu_options": gradient_json(["--fmu", with_options, *common], capsys),
        "bundled_options": gradient_json(["slider_crank", *common, "--integrator", "generalized_alpha",
                                          "--rho-inf", "0.8"], capsys),
    }
    for label, result in runs.items():
        assert result["integrator"] == reference["integrator"], label
        assert result["method"] == "adjoint", label
        if label.startswith("fmu"):
            assert result["gradient_path"]["method"] == "adjoint", label
        assert abs(result["cost"] - reference["cost"]) <= EXACT * abs(reference["cost"]), label
        for name, value in reference["gradient"].items():
            assert value != 0.0
            assert abs(result["gradient"][name] - value) <= EXACT * abs(value), (label, name)
    hht = gradient_json(["slider_crank", *common], capsys)
    assert hht["integrator"] == "hht(alpha=-0.1)"
    assert abs(hht["gradient"]["m_s"] - reference["gradient"]["m_s"]) > 1e-3 * abs(reference["gradient"]["m_s"])
