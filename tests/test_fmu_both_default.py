"""The exported FMU has both interfaces by default and is trusted as a Co-Simulation one is
(issue 30, parts 1 and 5).

What is shown:

* ``export`` without ``--interface`` (command line and API) writes Co-Simulation and Model
  Exchange in one FMU (FMI 2 and 3), which fmpy's validation and the FMI XSD accept;
* the importer trusts an fmi-adjoint FMU exported with ``me`` or ``both`` as it trusts ``cs``
  (the embedded model builds to its one binary and the description is the export's), so
  ``--gradient auto`` takes the adjoint path; ``export.json`` claiming another interface than
  the description declares, or naming none of them, and two interfaces naming different
  binaries, are not trusted;
* ``apply -o`` of a both-FMU rebuilds it with the identified values compiled in, keeps both
  interfaces and is trusted again: its Co-Simulation run equals the in-process C engine at
  the identified values (EXACT), its Model Exchange run without start values equals the
  original FMU's Model Exchange run with the identified start values (bit for bit);
* the FMU state of a Model Exchange instance (fmi2GetFMUstate/SetFMUstate, fmi3GetFMUState/
  SetFMUState, also serialized) restores the instance's time, states and parameters: run,
  set the state, rerun gives the same values bit for bit; a state saved by a Co-Simulation
  instance is refused by a Model Exchange instance, naming both.
"""

from __future__ import annotations

import inspect
import json
import re
import zipfile
from pathlib import Path

import fmpy
import fmpy.validation
import numpy as np
import pytest
from fmpy.fmi2 import FMU2Slave
from lxml import etree
from test_fmu_archive_security import _rezip
from test_fmu_model_exchange_export import Instance
from test_handback_rebuild import _cli
from tolerances import EXACT

from fmi_adjoint import load_model
from fmi_adjoint.cli.main import build_parser
from fmi_adjoint.engines import NativeEngine
from fmi_adjoint.examples import example_path
from fmi_adjoint.export import DEFAULT_INTERFACE, INTERFACES, export_fmu, validate_against_schema
from fmi_adjoint.fmu.archive import PLATFORM_DIRS, open_fmu
from fmi_adjoint.fmu.choice import choose_gradient
from fmi_adjoint.toolchain import c_compiler

if c_compiler() is None:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: the FMUs cannot be built", allow_module_level=True)

VERSIONS = (2, 3)
IDENTIFIED = {"c": 1.7, "d": 0.3}  # sdof, as `identify -o` records identified values
STEPS = 2000                       # 2 s at sdof's step 1e-3


def _interfaces(path: Path) -> set[str]:
    root = etree.fromstring(zipfile.ZipFile(path).read("modelDescription.xml"))
    return {tag for tag in ("CoSimulation", "ModelExchange") if root.find(tag) is not None}


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("both_default")


@pytest.fixture(scope="module")
def exported(work):
    """exported(name, version, interface) -> path, each exported once per module."""
    made: dict[tuple, Path] = {}

    def export(name: str, version: int, interface: str) -> Path:
        key = (name, version, interface)
        if key not in made:
            made[key] = Path(export_fmu(example_path(name), work / f"{name}_{version}_{interface}.fmu",
                                        fmi_version=version, interface=interface))
        return made[key]

    return export


# ------------------------------------------------------------------------ 1. the default --


@pytest.mark.parametrize("version", VERSIONS)
def test_export_writes_both_interfaces_by_default(version, work):
    assert DEFAULT_INTERFACE == "both" and DEFAULT_INTERFACE in INTERFACES
    assert inspect.signature(export_fmu).parameters["interface"].default == DEFAULT_INTERFACE
    # The command line spells the default itself (no import of the exporter).
    assert build_parser("export").parse_args(["export", "sdof", "-o", "x.fmu"]).interface == DEFAULT_INTERFACE
    out = work / f"cli_{version}.fmu"
    code, err = _cli(["export", "sdof", "--fmi", version, "-o", out])
    assert code == 0, err
    assert f"(FMI {version}.0 Co-Simulation and Model Exchange)" in err
    assert _interfaces(out) == {"CoSimulation", "ModelExchange"}
    assert fmpy.validation.validate_fmu(str(out)) == []
    assert validate_against_schema(zipfile.ZipFile(out).read("modelDescription.xml"), version) == []
    with open_fmu(out) as archive:
        assert archive.model_exchange and archive.co_simulation
        assert archive.native is not None, archive.native_distrust


# ------------------------------------------------------------------------ 2. the trust check --


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("interface", ["me", "both"])
def test_model_exchange_exports_are_trusted(interface, version, exported):
    """As a Co-Simulation export is: the adjoint path of the embedded model is chosen."""
    with open_fmu(exported("sdof", version, interface)) as archive:
        assert archive.model_exchange and archive.co_simulation == (interface == "both")
        assert archive.native is not None, archive.native_distrust
        assert archive.native_distrust is None and archive.native["interface"] == interface
        assert choose_gradient(archive, "auto", "auto", False, 2).method == "adjoint"


@pytest.mark.parametrize(("record", "why"), [
    ("cs", "differs from the one exported"),   # the description declares Model Exchange too
    ("me", "differs from the one exported"),   # ... and Co-Simulation
    ("bogus", "'bogus', which is none of cs, me, both (a tampered file)"),
    (3, "the interface '3', which is none of"),
])
def test_an_edited_interface_record_is_not_trusted(record, why, exported, work):
    source = exported("sdof", 2, "both")
    settings = json.loads(zipfile.ZipFile(source).read("resources/export.json"))
    assert settings["interface"] == "both"
    edited = _rezip(source, work / f"record_{record}.fmu",
                    replace={"resources/export.json": json.dumps({**settings, "interface": record}).encode()})
    with open_fmu(edited) as archive:
        assert archive.native is None
        assert why in archive.native_distrust


def test_interfaces_naming_different_binaries_are_not_trusted(exported, work):
    """Only the binary of one interface is compared with the embedded model's: a Model Exchange
    interface with a binary of its own would run unchecked."""
    source = exported("sdof", 2, "both")
    xml = zipfile.ZipFile(source).read("modelDescription.xml").decode()
    edited_xml, count = re.subn(r'<ModelExchange modelIdentifier="sdof"', '<ModelExchange modelIdentifier="other"', xml)
    assert count == 1
    binary = zipfile.ZipFile(source).read(f"binaries/{PLATFORM_DIRS[2]}/sdof.so")
    edited = _rezip(source, work / "two_binaries.fmu", replace={"modelDescription.xml": edited_xml.encode()},
                    extra=[(f"binaries/{PLATFORM_DIRS[2]}/other.so", binary)])
    with open_fmu(edited) as archive:
        assert archive.model_exchange and archive.co_simulation
        assert archive.native is None
        assert "name different binaries" in archive.native_distrust


# --------------------------------------------------------------------------- 3. apply -o --


@pytest.fixture(scope="module", params=VERSIONS)
def applied(request, work, exported) -> dict:
    """``apply -o`` of sdof exported with both interfaces (FMI 2 or 3)."""
    version = request.param
    original = exported("sdof", version, "both")
    result = work / f"result_{version}.json"
    result.write_text(json.dumps({"parameters": IDENTIFIED, "settings": {}}), encoding="utf-8")
    fmu = work / f"identified_{version}.fmu"
    code, err = _cli(["apply", result, "--fmu", original, "-o", fmu])
    assert code == 0, err
    return dict(version=version, original=original, fmu=fmu, err=err)


def test_apply_rebuilds_a_both_fmu_and_keeps_its_interfaces(applied):
    assert "compiled in and as start values" in applied["err"], applied["err"]
    assert _interfaces(applied["fmu"]) == {"CoSimulation", "ModelExchange"}
    assert fmpy.validation.validate_fmu(str(applied["fmu"])) == []
    with open_fmu(applied["fmu"]) as archive:
        assert archive.native is not None, archive.native_distrust  # trusted again
        assert archive.native["interface"] == "both"
        assert {name: archive.native["values"][name] for name in IDENTIFIED} == IDENTIFIED


def test_the_rebuilt_co_simulation_runs_the_identified_model(applied):
    """Without start values: the compiled-in values, the in-process C engine's run to EXACT."""
    model = load_model(example_path("sdof")).with_values(IDENTIFIED)
    h = model.simulation.step
    reference = NativeEngine.build(model).simulate(t_end=STEPS * h, step=h).outputs()[:, 0]
    kwargs = dict(fmi_type="CoSimulation", stop_time=STEPS * h, output_interval=h)
    rebuilt = fmpy.simulate_fmu(str(applied["fmu"]), **kwargs)
    original = fmpy.simulate_fmu(str(applied["original"]), **kwargs)
    assert len(rebuilt) == STEPS + 1
    scale = np.max(np.abs(reference))
    assert np.max(np.abs(rebuilt["x"] - reference)) <= EXACT * scale
    assert np.max(np.abs(original["x"] - reference)) > 1e-2 * scale  # the original runs the old values


def test_the_rebuilt_model_exchange_runs_the_identified_model(applied):
    """fmpy's CVode on the rebuilt FMU without start values is the original's with the
    identified start values: the same program with the same numbers, bit for bit."""
    kwargs = dict(fmi_type="ModelExchange", stop_time=2.0, output_interval=0.01, relative_tolerance=1e-8)
    rebuilt = fmpy.simulate_fmu(str(applied["fmu"]), **kwargs)
    started = fmpy.simulate_fmu(str(applied["original"]), start_values=IDENTIFIED, **kwargs)
    original = fmpy.simulate_fmu(str(applied["original"]), **kwargs)
    assert np.array_equal(rebuilt["x"], started["x"])
    assert not np.allclose(original["x"], started["x"])


# -------------------------------------------------- 4. FMU state of Model Exchange instances --


def _euler(instance: Instance, t: float, steps: int, h: float = 1e-3) -> np.ndarray:
    """Explicit Euler steps through the FMI calls; rows (t, x, xdot) after each step."""
    rows = []
    for _ in range(steps):
        x = instance.states() + h * instance.derivatives()
        t += h
        instance.fmu.setTime(t)
        instance.set_states(x)
        instance.fmu.completedIntegratorStep()
        rows.append(np.concatenate([[t], x, instance.derivatives()]))
    return np.array(rows)


@pytest.mark.parametrize("version", VERSIONS)
def test_model_exchange_state_restores_the_run(version, exported):
    path = exported("slider_crank", version, "both")
    with open_fmu(path) as archive:
        assert archive.can_get_and_set_state
    instance = Instance(path, version)
    fmu = instance.fmu
    get, put = (fmu.getFMUstate, fmu.setFMUstate) if version == 2 else (fmu.getFMUState, fmu.setFMUState)
    serialize = fmu.serializeFMUstate if version == 2 else fmu.serializeFMUState
    deserialize = fmu.deSerializeFMUstate if version == 2 else fmu.deserializeFMUState
    try:
        t = _euler(instance, 0.0, 100)[-1, 0]
        state = get()
        first = _euler(instance, t, 200)
        put(state)
        again = _euler(instance, t, 200)
        put(deserialize(serialize(state)))
        restored = _euler(instance, t, 200)
        assert np.array_equal(first, again) and np.array_equal(first, restored)
    finally:
        fmu.terminate()
        fmu.freeInstance()


def test_a_co_simulation_state_is_refused_by_a_model_exchange_instance(exported, capfd):
    path = exported("slider_crank", 2, "both")
    md = fmpy.read_model_description(str(path))
    slave = FMU2Slave(guid=md.guid, unzipDirectory=fmpy.extract(str(path)),
                      modelIdentifier=md.coSimulation.modelIdentifier, instanceName="cs")
    slave.instantiate()
    slave.setupExperiment(startTime=0.0)
    slave.enterInitializationMode()
    slave.exitInitializationMode()
    saved = slave.serializeFMUstate(slave.getFMUstate())
    instance = Instance(path, 2)
    try:
        with pytest.raises(Exception, match="fmi2SetFMUstate"):
            instance.fmu.setFMUstate(instance.fmu.deSerializeFMUstate(saved))
        assert "saved by a Co-Simulation instance, this is a Model Exchange instance" in capfd.readouterr().out
    finally:
        instance.fmu.freeInstance()
        slave.terminate()
        slave.freeInstance()
