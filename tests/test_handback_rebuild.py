"""``apply``: a hand-back that importers cannot miss.

* ``apply -o`` on an FMU exported by fmi-adjoint (sdof, FMI 2 and 3) rebuilds its binary
  with the identified values compiled in: ``fmpy.simulate_fmu`` WITHOUT start values runs
  the identified model (the C engine of the identified model, to EXACT), while the original
  FMU still runs the old one; only the binary, the two regenerated sources, the model
  description and ``export.json`` change (every other entry byte for byte), and the rebuilt
  FMU is trusted again (its embedded model builds to its binary);
* a binary for another platform is kept, with a warning that it still has the old values;
* ``apply --ssp`` writes an SSP 1.0 archive valid against fmpy's SSD and SSV schemas, read
  by ``fmpy.ssp.ssd.read_ssd``, whose Co-Simulation FMU runs in
  ``fmpy.ssp.simulation.simulate_ssp`` with the identified outputs (equal to
  ``fmpy.simulate_fmu`` with the identified start values, to EXACT);
* third-party FMUs (tests/handwritten_fmus.py) keep the start-value hand-back with a note
  pointing to --ssp; their SSP archives bind the values (FMI 2 CS: simulated with the
  binding applied; FMI 3 and Model Exchange: written, valid, with a note);
* bad input: exit 2, one error line, no output file (and no temporary file) left.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import zipfile
from pathlib import Path

import fmpy
import numpy as np
import pytest
from fmpy.ssp.simulation import simulate_ssp
from fmpy.ssp.ssd import Parameter, ParameterSet, read_ssd
from lxml import etree

import fmi_adjoint.fmu.ssp as ssp_module
from fmi_adjoint import load_model
from fmi_adjoint.cli.main import main
from fmi_adjoint.engines import NativeEngine
from fmi_adjoint.examples import example_path
from fmi_adjoint.fmu.archive import PLATFORM_DIRS, open_fmu
from fmi_adjoint.export import export_fmu
from fmi_adjoint.fmu.handback import FmuError
from fmi_adjoint.toolchain import c_compiler
from handwritten_fmus import build_fmu
from tolerances import EXACT

if c_compiler() is None:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: the FMUs cannot be built", allow_module_level=True)

SSP_SCHEMAS = Path(fmpy.__file__).resolve().parent / "ssp" / "schema"
SDOF_SETTINGS = {"m": 1.25}               # as `identify --set m=1.25` records it
SDOF_IDENTIFIED = {"c": 1.7, "d": 0.3}    # as `identify -o` records the identified values
SDOF_STEPS = 4000                         # 4 s at the model's step 1e-3
VERSIONS = (2, 3)


def _cli(argv) -> tuple[int, str]:
    """``main`` with captured stderr (usable in module-scoped fixtures)."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    assert "Traceback" not in err.getvalue()
    return code, err.getvalue()


def _result(path: Path, parameters: dict, settings: dict | None = None) -> Path:
    """A RESULT.json as `identify -o` writes it (the fields read_result_parameters reads)."""
    path.write_text(json.dumps({"parameters": parameters, "settings": settings or {}}), encoding="utf-8")
    return path


def _max_rel(a, b) -> float:
    """Max abs difference relative to the magnitude of the outputs."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def _schema(name: str) -> etree.XMLSchema:
    return etree.XMLSchema(etree.parse(str(SSP_SCHEMAS / name)))


def _bound_parameter_set(ssp: Path) -> tuple[str, ParameterSet]:
    """The component's name and its bound parameter set (read by read_ssd), with names
    qualified by the component as simulate_ssp expects them: applying a ParameterBinding
    the way SSP 1.0 defines it (fmpy 0.3's simulate_ssp applies only the set it is given)."""
    component = read_ssd(str(ssp)).system.elements[0]
    (binding,) = component.parameterBindings
    (parameter_set,) = binding.parameterValues
    qualified = ParameterSet(name=parameter_set.name)
    for p in parameter_set.parameters:
        qualified.parameters.append(Parameter(name=f"{component.name}.{p.name}", type=p.type, value=p.value))
    return component.name, qualified


def _ssp_outputs(result, component: str, reference, outputs) -> tuple[np.ndarray, np.ndarray]:
    """simulate_ssp's rows hold the time at the start of a step and the outputs at its end:
    row k is reference row k + 1.  Returns (ssp outputs, matching reference outputs)."""
    n = min(len(result), len(reference) - 1)
    ssp = np.column_stack([result[f"{component}.{name}"][:n] for name in outputs])
    ref = np.column_stack([reference[name][1:n + 1] for name in outputs])
    assert n > 10
    return ssp, ref


# ------------------------------------------------------------------------------ fixtures --


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("handback_rebuild")


@pytest.fixture(scope="module")
def sdof_result(work) -> Path:
    return _result(work / "sdof_result.json", SDOF_IDENTIFIED, SDOF_SETTINGS)


@pytest.fixture(scope="module")
def exported(work) -> dict[int, Path]:
    """sdof exported as FMI 2 and FMI 3 Co-Simulation FMUs."""
    return {v: Path(export_fmu(example_path("sdof"), work / f"sdof{v}.fmu", fmi_version=v)) for v in VERSIONS}


@pytest.fixture(scope="module", params=VERSIONS)
def applied(request, work, exported, sdof_result) -> dict:
    """``apply -o --ssv --ssp`` on the exported sdof (FMI 2 or 3)."""
    version = request.param
    folder = work / f"fmi{version}"
    folder.mkdir()
    fmu, ssv, ssp = folder / "identified.fmu", folder / "identified.ssv", folder / "identified.ssp"
    code, err = _cli(["apply", sdof_result, "--fmu", exported[version], "-o", fmu, "--ssv", ssv, "--ssp", ssp])
    assert code == 0, err
    return dict(version=version, original=exported[version], fmu=fmu, ssv=ssv, ssp=ssp, err=err)


@pytest.fixture(scope="module")
def identified_run() -> np.ndarray:
    """Output x of sdof at the identified values: the C engine, the FMU's step and scheme."""
    model = load_model(example_path("sdof")).with_values({**SDOF_SETTINGS, **SDOF_IDENTIFIED})
    h = model.simulation.step
    traj = NativeEngine.build(model).simulate(t_end=SDOF_STEPS * h, step=h)
    return traj.outputs()[:, 0]


@pytest.fixture(scope="module")
def third_party(work) -> dict:
    """Hand-written FMUs (another origin) with identified values: FMI 3 CS, FMI 2 CS, FMI 2 ME."""
    folder = work / "third_party"
    folder.mkdir()
    cases = {"duffing_cs": {"delta": 0.35, "alpha": 1.3}, "faulty_decay_cs": {"k": 2.5},
             "van_der_pol_me": {"mu": 1.5}}
    out = {}
    for name, values in cases.items():
        fmu = build_fmu(name, folder)
        result = _result(folder / f"{name}_result.json", values)
        new, ssp = folder / f"{name}_identified.fmu", folder / f"{name}.ssp"
        code, err = _cli(["apply", result, "--fmu", fmu, "-o", new, "--ssp", ssp])
        assert code == 0, err
        out[name] = dict(fmu=Path(fmu), new=new, ssp=ssp, values=values, err=err)
    return out


# ------------------------------------------------------------------ 1. apply -o, rebuilt --


def test_rebuilt_fmu_runs_the_identified_values_without_start_values(applied, identified_run):
    h = 1e-3
    kwargs = dict(stop_time=SDOF_STEPS * h, output_interval=h)
    rebuilt = fmpy.simulate_fmu(str(applied["fmu"]), **kwargs)  # no start values: compiled-in defaults
    original = fmpy.simulate_fmu(str(applied["original"]), **kwargs)
    assert len(rebuilt) == SDOF_STEPS + 1
    assert _max_rel(rebuilt["x"], identified_run) <= EXACT
    assert _max_rel(original["x"], identified_run) > 1e-2  # the original still runs the old values


def test_only_the_rebuilt_entries_change(applied):
    platform = PLATFORM_DIRS[applied["version"]]
    expected = {f"binaries/{platform}/sdof.so", "modelDescription.xml", "resources/export.json",
                "sources/fmu_config.h", "sources/model.c"}
    with zipfile.ZipFile(applied["original"]) as old, zipfile.ZipFile(applied["fmu"]) as new:
        assert [i.filename for i in old.infolist()] == [i.filename for i in new.infolist()]
        changed = {i.filename for i in old.infolist() if old.read(i) != new.read(i.filename)}
        assert changed == expected
        model_c = new.read("sources/model.c").decode()
        assert "fa_default_parameters[FA_NP > 0 ? FA_NP : 1] = {1.25, 1.7, 0.3};" in model_c
        record = json.loads(new.read("resources/export.json"))
        assert record["values"] == {**SDOF_SETTINGS, **SDOF_IDENTIFIED}
    with open_fmu(applied["original"]) as old, open_fmu(applied["fmu"]) as new:
        for name, variable in new.variables.items():
            wanted = {**SDOF_SETTINGS, **SDOF_IDENTIFIED}.get(name, old.variables[name].start)
            assert variable.start == wanted, name
        assert new.description.guid != old.description.guid  # another parameterization, another token


def test_rebuilt_fmu_is_trusted_again(applied):
    with open_fmu(applied["fmu"]) as archive:
        assert archive.native is not None, archive.native_distrust
        assert archive.native["values"] == {**SDOF_SETTINGS, **SDOF_IDENTIFIED}
    assert "compiled in" in applied["err"]


def test_binaries_of_other_platforms_are_kept_with_a_warning(exported, sdof_result, tmp_path):
    source = tmp_path / "multi.fmu"
    foreign = ("binaries/win64/sdof.dll", b"MZ a binary built elsewhere")
    with zipfile.ZipFile(exported[2]) as old, zipfile.ZipFile(source, "w", zipfile.ZIP_DEFLATED) as new:
        for info in old.infolist():
            new.writestr(info, old.read(info))
        new.writestr(*foreign)
    output = tmp_path / "identified.fmu"
    code, err = _cli(["apply", sdof_result, "--fmu", source, "-o", output])
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("fmi-adjoint: warning:")]
    assert len(warnings) == 1 and foreign[0] in warnings[0] and "old parameter values" in warnings[0]
    with zipfile.ZipFile(output) as new:
        assert new.read(foreign[0]) == foreign[1]
    with open_fmu(output) as archive:
        assert archive.native is not None, archive.native_distrust


# ------------------------------------------------------------------------- 2. --ssp ----


def test_ssp_validates_and_reads_back(applied):
    with zipfile.ZipFile(applied["ssp"]) as archive:
        names = archive.namelist()
        assert names == ["SystemStructure.ssd", "resources/identified.fmu", "resources/sdof_result.ssv"]
        ssd = etree.fromstring(archive.read("SystemStructure.ssd"))
        ssv = etree.fromstring(archive.read("resources/sdof_result.ssv"))
        assert archive.read("resources/identified.fmu") == applied["fmu"].read_bytes()
    for document, schema in ((ssd, "SystemStructureDescription.xsd"), (ssv, "SystemStructureParameterValues.xsd")):
        validator = _schema(schema)
        assert validator.validate(document), validator.error_log
    assert ssd.get("version") == "1.0"
    structure = read_ssd(str(applied["ssp"]))
    (component,) = structure.system.elements
    assert component.type == "application/x-fmu-sharedlibrary" and component.source == "resources/identified.fmu"
    assert {(c.name, c.kind) for c in component.connectors} == {("x", "output"), ("m", "parameter"),
                                                                ("c", "parameter"), ("d", "parameter")}
    (binding,) = component.parameterBindings
    assert binding.source == "resources/sdof_result.ssv"
    read = {p.name: float(p.value) for p in binding.parameterValues[0].parameters}
    assert read == {**SDOF_SETTINGS, **SDOF_IDENTIFIED}  # repr round trip: exact


def test_ssp_simulates_the_identified_values(applied):
    h = 1e-3
    reference = fmpy.simulate_fmu(str(applied["original"]), stop_time=400 * h, output_interval=h,
                                  start_values={**SDOF_SETTINGS, **SDOF_IDENTIFIED})
    if applied["version"] == 3:
        # fmpy 0.3's simulate_ssp instantiates every FMU through the FMI 1 or 2 API.
        assert "FMI 3" in applied["err"] and "simulate_ssp" in applied["err"]
        return
    component, parameter_set = _bound_parameter_set(applied["ssp"])
    # The binding applied, as an SSP master does; and not applied: the embedded FMU is the
    # rebuilt one, so a master that ignores bindings runs the identified values too.
    for given in (parameter_set, None):
        result = simulate_ssp(str(applied["ssp"]), stop_time=400 * h, step_size=h, parameter_set=given)
        ssp, ref = _ssp_outputs(result, component, reference, ["x"])
        assert _max_rel(ssp, ref) <= EXACT


# ------------------------------------------------------------------- 3. third-party FMUs --


def test_third_party_fmu_keeps_start_values_with_a_note(third_party):
    case = third_party["duffing_cs"]
    notes = [line for line in case["err"].splitlines() if line.startswith("fmi-adjoint: note:")]
    assert any("start values only" in line and "fmpy.simulate_fmu" in line for line in notes), case["err"]
    with zipfile.ZipFile(case["fmu"]) as old, zipfile.ZipFile(case["new"]) as new:
        assert [i.filename for i in old.infolist()] == [i.filename for i in new.infolist()]
        changed = {i.filename for i in old.infolist() if old.read(i) != new.read(i.filename)}
    assert changed == {"modelDescription.xml"}
    with open_fmu(case["new"]) as archive:
        for name, value in case["values"].items():
            assert archive.variables[name].start == value


def test_third_party_ssp_binds_and_simulates_the_identified_values(third_party):
    case = third_party["faulty_decay_cs"]  # FMI 2 Co-Simulation: what simulate_ssp runs
    h = 0.01
    kwargs = dict(stop_time=1.0, output_interval=h, validate=False)  # its XML uses an undeclared unit
    identified = fmpy.simulate_fmu(str(case["fmu"]), start_values=case["values"], **kwargs)
    old = fmpy.simulate_fmu(str(case["fmu"]), **kwargs)
    component, parameter_set = _bound_parameter_set(case["ssp"])
    bound = simulate_ssp(str(case["ssp"]), stop_time=1.0, step_size=h, parameter_set=parameter_set)
    ssp, ref = _ssp_outputs(bound, component, identified, ["x"])
    assert _max_rel(ssp, ref) <= EXACT
    # Without the binding the (start-value) FMU's binary runs its old defaults: the note's point.
    unbound = simulate_ssp(str(case["ssp"]), stop_time=1.0, step_size=h)
    ssp, ref = _ssp_outputs(unbound, component, old, ["x"])
    assert _max_rel(ssp, ref) <= EXACT
    assert _max_rel(old["x"], identified["x"]) > 1e-2


@pytest.mark.parametrize("name", ["duffing_cs", "van_der_pol_me"])
def test_third_party_ssp_without_fmpy_simulation_is_valid_with_a_note(third_party, name):
    case = third_party[name]
    with zipfile.ZipFile(case["ssp"]) as archive:
        ssd = etree.fromstring(archive.read("SystemStructure.ssd"))
    validator = _schema("SystemStructureDescription.xsd")
    assert validator.validate(ssd), validator.error_log
    (component,) = read_ssd(str(case["ssp"])).system.elements
    kinds = {c.name: c.kind for c in component.connectors}
    with open_fmu(case["fmu"]) as fmu:
        for kind in ("input", "output", "parameter"):
            assert sorted(n for n, k in kinds.items() if k == kind) == sorted(fmu.names(kind))
    values = {p.name: float(p.value) for p in component.parameterBindings[0].parameterValues[0].parameters}
    assert values == case["values"]
    wanted = "needs Co-Simulation" if name == "van_der_pol_me" else "FMI 1 and 2"
    assert wanted in case["err"]


# ---------------------------------------------------------------------- 4. bad input ----


def _one_error(code: int, err: str, *words: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fmi-adjoint: error:"), err
    for word in words:
        assert word in lines[0], (word, lines[0])


@pytest.mark.parametrize("case", ["no_parameters", "unknown_parameter", "output_is_a_folder", "ssp_is_a_folder",
                                  "no_compiler", "late_failure"])
def test_bad_input_leaves_no_output(case, exported, sdof_result, tmp_path, monkeypatch):
    result = sdof_result
    fmu, ssv, ssp = tmp_path / "out.fmu", tmp_path / "out.ssv", tmp_path / "out.ssp"
    fmu.write_bytes(b"an earlier output")  # replaced only on success
    words: tuple[str, ...] = ()
    if case == "no_parameters":
        result = _result(tmp_path / "result.json", {})
        words = ("no 'parameters' object", "identify -o")
    elif case == "unknown_parameter":
        result = _result(tmp_path / "result.json", {"zeta": 1.0})
        words = ("no parameter named 'zeta'",)
    elif case == "output_is_a_folder":
        fmu.unlink()
        fmu.mkdir()
        words = ("is a folder", "give a file name")
    elif case == "ssp_is_a_folder":
        ssp.mkdir()
        words = ("is a folder", "give a file name")
    elif case == "no_compiler":
        monkeypatch.delenv("CC", raising=False)
        monkeypatch.setenv("PATH", str(tmp_path / "empty"))
        words = ("C compiler", "install gcc or set CC")
    else:
        def failing(*args, **kwargs):
            raise FmuError("the SSP archive failed late, after the FMU and the SSV were written")

        monkeypatch.setattr(ssp_module, "write_ssp", failing)
        words = ("failed late",)
    before = sorted(p.name for p in tmp_path.iterdir())
    code, err = _cli(["apply", result, "--fmu", exported[2], "-o", fmu, "--ssv", ssv, "--ssp", ssp])
    _one_error(code, err, *words)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no new file, no .part left
    if fmu.is_file():
        assert fmu.read_bytes() == b"an earlier output"


# ------------------------------------------------- 5. edited start values are compiled in --


def test_rebuild_compiles_in_the_start_values_the_identification_used(exported, work, tmp_path, identified_run):
    """An exported FMU whose start value of m was edited after export (still trusted: start
    values may differ) is identified with m = 1.25; the rebuild must compile in m = 1.25 too,
    not the export's m = 1, so that fmpy without start values runs the identified model."""
    with zipfile.ZipFile(exported[2]) as archive:
        xml = archive.read("modelDescription.xml").decode("utf-8")
    edited_xml, count = re.subn(r'(<ScalarVariable name="m".*?<Real[^>]*?start=")[^"]*"', r'\g<1>1.25"', xml,
                                count=1, flags=re.S)
    assert count == 1
    edited = tmp_path / "sdof_m.fmu"
    with zipfile.ZipFile(exported[2]) as source, zipfile.ZipFile(edited, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            data = edited_xml.encode() if info.filename == "modelDescription.xml" else source.read(info)
            target.writestr(info, data)
    with open_fmu(edited) as archive:
        assert archive.native is not None, archive.native_distrust
        assert archive.variables["m"].start == 1.25
    result = _result(tmp_path / "result.json", SDOF_IDENTIFIED)  # no --set: m came from the XML
    out = tmp_path / "identified.fmu"
    code, err = _cli(["apply", result, "--fmu", edited, "-o", out])
    assert code == 0, err
    h = 1e-3
    rebuilt = fmpy.simulate_fmu(str(out), stop_time=SDOF_STEPS * h, output_interval=h)  # no start values
    assert _max_rel(rebuilt["x"], identified_run) <= EXACT


# ------------------------------------ 6. sources/ of the rebuilt FMU are only our own (31) --

HOSTILE_BUILD = (b'<?xml version="1.0" encoding="UTF-8"?>\n<fmiBuildDescription fmiVersion="3.0"><BuildConfiguration '
                 b'modelIdentifier="sdof"><SourceFileSet language="C99" compiler="sh" compilerOptions="-c evil">'
                 b'<SourceFile name="evil.c"/></SourceFileSet></BuildConfiguration></fmiBuildDescription>\n')


@pytest.mark.parametrize("version", VERSIONS)
def test_rebuild_keeps_no_foreign_sources(version, exported, sdof_result, tmp_path):
    """Issue 31, finding 7: ``apply -o`` rebuilt and re-trusted an FMI 3 FMU but kept its hostile
    ``sources/buildDescription.xml`` (compiler "sh", an extra evil.c) that fmpy.build would compile."""
    source = tmp_path / "planted.fmu"
    with zipfile.ZipFile(exported[version]) as old, zipfile.ZipFile(source, "w", zipfile.ZIP_DEFLATED) as new:
        fresh = {i.filename: old.read(i) for i in old.infolist()}
        for info in old.infolist():
            data = HOSTILE_BUILD if info.filename == "sources/buildDescription.xml" else old.read(info)
            new.writestr(info, data)
        new.writestr("sources/evil.c", b"int evil(void) { return 666; }\n")
        if version == 2:  # FMI 2 exports have none: a planted one
            new.writestr("sources/buildDescription.xml", HOSTILE_BUILD)
    with open_fmu(source) as archive:
        assert archive.native is not None, archive.native_distrust  # sources/ are not part of the trust check
    output = tmp_path / "identified.fmu"
    code, err = _cli(["apply", sdof_result, "--fmu", source, "-o", output])
    assert code == 0, err
    with zipfile.ZipFile(output) as rebuilt:
        sources = sorted(n for n in rebuilt.namelist() if n.startswith("sources/"))
        assert sources == sorted(n for n in fresh if n.startswith("sources/"))  # exactly what export writes
        if version == 3:
            assert rebuilt.read("sources/buildDescription.xml") == fresh["sources/buildDescription.xml"]
    dropped = "sources/evil.c" + (", sources/buildDescription.xml" if version == 2 else "")
    assert f"{dropped} left out of the rebuilt FMU" in err
    with open_fmu(output) as archive:
        assert archive.native is not None, archive.native_distrust
