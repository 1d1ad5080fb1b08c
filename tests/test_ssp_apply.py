"""``fmi-adjoint apply RESULT.json --system SYSTEM.ssp -o IDENTIFIED.ssp`` (issue 28: the
hand-back of ``identify --ssp``, :mod:`fmi_adjoint.ssp.handback`).

The system is the feedthrough chain of ``test_ssp_validate`` (its SSD: u0 -> A -> B -> out, each
y = k u + c, the FMU's own k = 2, c = 0.5) as an ``.ssp`` whose bindings cover each case: A
binds ``resources/gains.ssv`` (k = 2, c = 0.5), B binds k = 2 inline in the SSD, and nothing
binds B.c; the archive also holds a file nobody references.  The RESULT.json is the record
``identify --ssp`` writes (its parameters, ``--set`` settings and the problem's
``solver_info``, with the system's identity), made here without a fit: A.c and B.k identified,
B.c set.

Cost: one FMU build (cached per process), three runs of the master (about 0.3 s each, two
worker processes), fmpy's in-process simulation of 3 steps, and a few archive read-backs.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from lxml import etree

from fmi_adjoint.data import read_csv
from fmi_adjoint.identify.data_costs import CostOptions, DataFile
from fmi_adjoint.ssp.handback import hand_back_system
from fmi_adjoint.ssp.master import MasterSettings
from fmi_adjoint.ssp.problem import SystemProblem, system_experiment, system_target
from fmi_adjoint.ssp.reading import open_system
from fmi_adjoint.toolchain import c_compiler
from handwritten_fmus import build_fmu
from test_ssp_validate import _SSD as CHAIN_SSD
from tolerances import EXACT

if c_compiler() is None:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: the FMUs cannot be built", allow_module_level=True)

STEP, T_END = 0.05, 0.5
#: The identified values (not round numbers: the hand-back must carry every digit) and a --set one.
IDENTIFIED = {"A.c": 0.6999999999999087, "B.k": 2.499999999917678}
SETTINGS = {"B.c": 0.3}
VALUES = {**SETTINGS, **IDENTIFIED}
_SSV = """<?xml version="1.0" encoding="UTF-8"?>
<ssv:ParameterSet xmlns:ssv="http://ssp-standard.org/SSP1/SystemStructureParameterValues" version="1.0" name="gains">
  <ssv:Parameters>
    <ssv:Parameter name="k"><ssv:Real value="2.0"/></ssv:Parameter>
    <ssv:Parameter name="c"><ssv:Real value="0.5"/></ssv:Parameter>
  </ssv:Parameters>
</ssv:ParameterSet>
"""
_INLINE = ('<ssd:ParameterBinding{prefix}><ssd:ParameterValues><ssv:ParameterSet '
           'xmlns:ssv="http://ssp-standard.org/SSP1/SystemStructureParameterValues" version="1.0" name="inline">'
           '<ssv:Parameters><ssv:Parameter name="{name}"><ssv:Real value="2.0"/></ssv:Parameter></ssv:Parameters>'
           '</ssv:ParameterSet></ssd:ParameterValues></ssd:ParameterBinding>')
_COMPONENT = ('<ssd:Component name="{name}" source="{source}" type="application/x-fmu-sharedlibrary">'
              '<ssd:Connectors><ssd:Connector name="u" kind="input"><ssc:Real/></ssd:Connector>'
              '<ssd:Connector name="y" kind="output"><ssc:Real/></ssd:Connector></ssd:Connectors>{bindings}'
              '</ssd:Component>')


def _bindings(*items: str) -> str:
    return f"<ssd:ParameterBindings>{''.join(items)}</ssd:ParameterBindings>" if items else ""


def _ssd(a: str, b: str, system: str = "", fmu: str = "resources/feedthrough.fmu") -> str:
    """test_ssp_validate's chain with the components' and the system's ``bindings``."""
    text = CHAIN_SSD.format(components=_COMPONENT.format(name="A", source=fmu, bindings=a)
                            + _COMPONENT.format(name="B", source=fmu, bindings=b))
    return text.replace("<ssd:Elements>", f"{system}<ssd:Elements>", 1)


def _write_ssp(path: Path, fmu: Path, ssd: str) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("SystemStructure.ssd", ssd, compress_type=zipfile.ZIP_DEFLATED)
        archive.write(fmu, "resources/feedthrough.fmu")
        archive.writestr("resources/gains.ssv", _SSV, compress_type=zipfile.ZIP_DEFLATED)
        archive.writestr("documentation/notes.txt", "not referenced by the SSD\n")
    return path


def _record(system_path, values=IDENTIFIED, settings=SETTINGS, **changes) -> dict:
    """The RESULT.json ``identify --ssp`` writes of ``system_path`` (without the fit's statistics):
    the problem's own solver_info, so the identity is the one identify records."""
    with open_system(system_path) as system:
        target = system_target(system.structure, system.archives)
        data = DataFile.from_path(str(Path(system_path).parent / "data.csv"), outputs=target.output_names)
        experiment = system_experiment(target, data, settings, name="data", t_end=None, step=STEP, cost=CostOptions())
        problem = SystemProblem(system.structure, system.archives, [experiment], list(values), MasterSettings(STEP))
        info = problem.solver_info()
    return {"parameters": dict(values), "settings": dict(settings), "model": None, "success": True, **info,
            **changes}


def _write_json(path: Path, record: dict) -> Path:
    path.write_text(json.dumps(record))
    return path


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """(folder, chain.ssp, RESULT.json of it); data.csv: the identified run (``simulate --ssp``
    with the values given by --set), inputs.csv: u0 = 1 + t."""
    from captured_cli import cli

    folder = tmp_path_factory.mktemp("ssp_apply")
    fmu = build_fmu("feedthrough", folder)
    ssp = _write_ssp(folder / "chain.ssp", fmu, _ssd(_bindings('<ssd:ParameterBinding source="resources/gains.ssv"/>'),
                                                    _bindings(_INLINE.format(prefix="", name="k"))))
    (folder / "inputs.csv").write_text("time,u0\n0,1\n1,2\n")
    sets = [f"--set={name}={value!r}" for name, value in VALUES.items()]
    code, _, err = cli(["simulate", "--ssp", ssp, "--step", STEP, "--t-end", T_END, "--inputs", folder / "inputs.csv",
                        *sets, "-o", folder / "data.csv"])
    assert code == 0, err
    return folder, ssp, _write_json(folder / "result.json", _record(ssp))


def _apply(result, system, out, *extra):
    from captured_cli import cli

    return cli(["apply", result, "--system", system, "-o", out, *extra])


def _bound(path) -> dict[str, float]:
    with open_system(path) as system:
        return {f"{p.component}.{p.name}": p.value for p in system.structure.parameters}


def _canonical(data: bytes) -> bytes:
    parser = etree.XMLParser(remove_blank_text=True)
    return etree.tostring(etree.fromstring(data, parser), method="c14n")


@pytest.fixture(scope="module")
def identified(chain, tmp_path_factory):
    """IDENTIFIED.ssp written by ``apply`` (and its stderr)."""
    folder, ssp, result = chain
    out = tmp_path_factory.mktemp("identified") / "IDENTIFIED.ssp"
    code, _, err = _apply(result, ssp, out)
    assert code == 0, err
    return out, err


def test_identify_records_the_system_and_its_digest_ignores_only_bindings(chain, tmp_path):
    folder, ssp, result = chain
    record = json.loads(result.read_text())["system_identity"]
    token = "{92370763-976e-4c77-b39a-cbad01027d18}"  # fmus/feedthrough's guid
    assert record["components"] == {"A": token, "B": token}
    # no bindings, and re-saved by a tool (generation time, a description, an annotation)
    resaved = _ssd("", "").replace('version="1.0" name="chain">', 'version="1.0" name="chain" generationTool="x" '
                                   'generationDateAndTime="2026-01-01T00:00:00Z">', 1).replace(
        '<ssd:System name="chain">', '<ssd:System name="chain" description="the rig">').replace(
        "</ssd:Units>", '</ssd:Units><ssd:Annotations><ssc:Annotation type="x"><x/></ssc:Annotation>'
        "</ssd:Annotations>")
    unbound = _write_ssp(tmp_path / "unbound.ssp", folder / "feedthrough.fmu", resaved)
    rewired = _write_ssp(tmp_path / "rewired.ssp", folder / "feedthrough.fmu",
                         _ssd("", "").replace('endElement="B" endConnector="u"', 'endConnector="out"')
                         .replace('startElement="B" startConnector="y" endConnector="out"',
                                  'startConnector="u0" endElement="B" endConnector="u"'))
    # the same SSD in the default namespace with an unused declaration (another tool's spelling;
    # C14N, the first digest, counted prefixes and declarations: the reviewer's case)
    respelled = (_ssd("", "").replace("xmlns:ssd=", 'xmlns:extra="urn:x" xmlns=').replace("<ssd:", "<")
                 .replace("</ssd:", "</"))
    assert "ssd:" not in respelled
    default_ns = _write_ssp(tmp_path / "respelled.ssp", folder / "feedthrough.fmu", respelled)
    with open_system(unbound) as a, open_system(rewired) as b, open_system(default_ns) as c:
        assert a.structure.digest == record["structure_sha256"]
        assert c.structure.digest == record["structure_sha256"]
        assert b.structure.digest != record["structure_sha256"]


def test_apply_binds_the_values_updating_existing_bindings_and_copying_the_rest(chain, identified):
    folder, ssp, _ = chain
    out, err = identified
    assert _bound(out) == {"A.k": 2.0, **VALUES}  # every digit; A.k, bound before, as it was
    assert "A.c, B.k updated in their bindings; B.c bound by new bindings to resources/result_B.ssv" in err
    with zipfile.ZipFile(ssp) as before, zipfile.ZipFile(out) as after:
        names = [info.filename for info in before.infolist()]
        assert [info.filename for info in after.infolist()] == [*names, "resources/result_B.ssv"]
        for info in before.infolist():
            same = after.getinfo(info.filename)
            assert (same.date_time, same.compress_type) == (info.date_time, info.compress_type)
        for name in ("resources/feedthrough.fmu", "documentation/notes.txt"):
            assert after.read(name) == before.read(name), name
        # gains.ssv: c's value replaced, nothing else (k, declaration, layout)
        assert after.read("resources/gains.ssv") == before.read("resources/gains.ssv").replace(
            b'value="0.5"', f'value="{VALUES["A.c"]!r}"'.encode())
        # the SSD: B's inline k replaced and one binding added to B; A's binding not duplicated
        ssd = etree.fromstring(after.read("SystemStructure.ssd"))
        expected = etree.fromstring(before.read("SystemStructure.ssd").replace(
            b'<ssv:Real value="2.0"/>', f'<ssv:Real value="{VALUES["B.k"]!r}"/>'.encode()))
        bindings = expected.find(".//{*}Component[@name='B']/{*}ParameterBindings")
        etree.SubElement(bindings, f"{{{ssd.nsmap['ssd']}}}ParameterBinding", source="resources/result_B.ssv")
        assert _canonical(etree.tostring(ssd)) == _canonical(etree.tostring(expected))


def test_applied_again_it_updates_the_bindings_it_added(chain, identified, tmp_path):
    """IDENTIFIED.ssp is the same system with other bound values: the result is accepted, and
    every value, B.c included, is now updated in place (no binding added twice)."""
    _, _, result = chain
    out, _ = identified
    code, _, err = _apply(result, out, tmp_path / "again.ssp")
    assert code == 0, err
    assert "B.c, A.c, B.k updated in their bindings)" in err
    with zipfile.ZipFile(out) as first, zipfile.ZipFile(tmp_path / "again.ssp") as second:
        assert second.namelist() == first.namelist()
        for name in first.namelist():
            assert second.read(name) == first.read(name), name


def test_a_failure_after_writing_leaves_no_file(chain, tmp_path, monkeypatch):
    """The archive is moved onto -o only once it reads back with the values."""
    from fmi_adjoint.ssp import handback

    def broken(path, *args):
        assert Path(path).is_file()  # written, in the output's folder
        raise handback.FmuError("internal error: does not read back")

    _, ssp, _ = chain
    monkeypatch.setattr(handback, "_check_written", broken)
    with open_system(ssp) as opened, pytest.raises(handback.FmuError, match="does not read back"):
        hand_back_system(opened, ssp, VALUES, tmp_path / "out.ssp")
    assert list(tmp_path.iterdir()) == []


def test_the_identified_ssp_runs_the_identified_system(chain, identified, tmp_path):
    """simulate --ssp of IDENTIFIED.ssp (no --set) is the run with the values set, and
    validate --ssp of it against that run has zero error."""
    from captured_cli import cli

    folder, _, _ = chain
    out, _ = identified
    inputs, data = folder / "inputs.csv", folder / "data.csv"
    code, _, err = cli(["simulate", "--ssp", out, "--step", STEP, "--t-end", T_END, "--inputs", inputs,
                        "-o", tmp_path / "run.csv"])
    assert code == 0, err
    ours, theirs = read_csv(tmp_path / "run.csv"), read_csv(data)
    for name in ("A.y", "B.y", "out"):
        scale = np.max(np.abs(theirs.column(name)))
        assert np.max(np.abs(ours.column(name) - theirs.column(name))) <= EXACT * scale, name
    code, _, err = cli(["validate", "--ssp", out, "--step", STEP, "--data", data, "--inputs", inputs,
                        "-o", tmp_path / "report"])
    assert code == 0, err
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    for name, stats in report["outputs"].items():
        assert stats["max_abs_error"] <= EXACT * np.max(np.abs(theirs.column(name))), name


def test_fmpy_reads_the_bindings_but_simulate_ssp_sets_only_its_parameter_set(identified):
    """fmpy 0.3: ``read_ssd`` sees the identified values in the bindings; ``simulate_ssp``
    ignores bindings (the FMU's own k = 2, c = 0.5) and runs the identified values only when they
    are passed as its ``parameter_set``.  With u0 = 0: A.y = c_A and, a step later, B.y = k_B c_A + c_B."""
    from fmpy.ssp.simulation import simulate_ssp
    from fmpy.ssp.ssd import Parameter, ParameterSet, read_ssd

    out, err = identified
    assert "does not apply an SSD's parameter bindings" in err
    ssd = read_ssd(str(out))
    read = {}
    for component in ssd.system.elements:
        for binding in component.parameterBindings:
            for parameter_set in binding.parameterValues:
                read.update({f"{component.name}.{p.name}": float(p.value) for p in parameter_set.parameters})
    assert read == {"A.k": 2.0, **VALUES}
    plain = simulate_ssp(str(out), stop_time=3 * STEP, step_size=STEP)
    assert abs(plain["B.y"][-1] - (2.0 * 0.5 + 0.5)) <= EXACT
    given = ParameterSet(name="identified", parameters=[])
    for name, value in read.items():
        parameter = Parameter(name=name)
        parameter.value = value
        given.parameters.append(parameter)
    bound = simulate_ssp(str(out), stop_time=3 * STEP, step_size=STEP, parameter_set=given)
    expected = VALUES["B.k"] * VALUES["A.c"] + VALUES["B.c"]
    assert abs(bound["B.y"][-1] - expected) <= EXACT * expected


def test_a_shared_parameter_set_is_overridden_not_edited(chain, tmp_path):
    """gains.ssv bound to A and (system-level, prefix B.) to B: changing it would change both,
    so it stays; A.c gets a binding after A's, B.k a system-level one (prefix B.) after the
    system's; A.k, bound inline at system level, is updated there."""
    folder, _, _ = chain
    shared = '<ssd:ParameterBinding source="resources/gains.ssv"/>'
    system = _bindings('<ssd:ParameterBinding source="resources/gains.ssv" prefix="B."/>',
                       _INLINE.format(prefix="", name="A.k"))
    ssp = _write_ssp(tmp_path / "shared.ssp", folder / "feedthrough.fmu", _ssd(_bindings(shared), "", system))
    values = {"A.c": 0.75, "B.k": 3.5, "A.k": 1.25}
    with open_system(ssp) as opened:
        report = hand_back_system(opened, ssp, values, tmp_path / "out.ssp", name="fit")
    assert dict(report.updated) == {"A.k": "the inline ParameterValues of the system in the SSD"}
    assert dict(report.added) == {"A.c": "resources/fit_A.ssv", "B.k": "resources/fit_B.ssv"}
    assert _bound(tmp_path / "out.ssp") == {**values, "B.c": 0.5}
    with zipfile.ZipFile(ssp) as before, zipfile.ZipFile(tmp_path / "out.ssp") as after:
        assert after.read("resources/gains.ssv") == before.read("resources/gains.ssv")
        ssd = etree.fromstring(after.read("SystemStructure.ssd"))
    sources = [(b.get("source"), b.get("prefix")) for b in ssd.findall("{*}System/{*}ParameterBindings/*")]
    assert sources == [("resources/gains.ssv", "B."), (None, None), ("resources/fit_B.ssv", "B.")]


def test_an_ssd_is_handed_back_as_a_complete_ssp(chain, tmp_path):
    folder, _, _ = chain
    fmu = folder / "feedthrough.fmu"
    (tmp_path / "feedthrough.fmu").write_bytes(fmu.read_bytes())
    (tmp_path / "gains.ssv").write_text(_SSV)
    ssd = tmp_path / "chain.ssd"
    ssd.write_text(_ssd(_bindings('<ssd:ParameterBinding source="gains.ssv"/>'), "", fmu="./feedthrough.fmu"))
    result = _write_json(tmp_path / "result.json", _record(folder / "chain.ssp"))
    code, _, err = _apply(result, ssd, tmp_path / "IDENTIFIED.ssp")
    assert code == 0, err
    assert _bound(tmp_path / "IDENTIFIED.ssp") == {"A.k": 2.0, **VALUES}
    with zipfile.ZipFile(tmp_path / "IDENTIFIED.ssp") as written:
        assert sorted(written.namelist()) == ["SystemStructure.ssd", "feedthrough.fmu", "gains.ssv",
                                              "resources/result_B.ssv"]
        assert written.read("feedthrough.fmu") == fmu.read_bytes()


@pytest.mark.parametrize("case, message", [
    ("other structure", "was identified on another system structure than"),
    ("other FMU", "was identified with another FMU as component 'B'"),
    ("other components", "was identified on a system of the components 'A, C'"),
    ("FMU result", "is the result of an identification of the FMU 'model.fmu', not of a system: hand it back with "
                   "`fmi-adjoint apply"),
    ("model result", "is the result of a model file's identification, not of a system"),
    ("unknown component", "the system has no component 'C'; components: A, B"),
    ("unknown parameter", "component 'A': feedthrough.fmu: no parameter named 'k9'. Parameters: k, c."),
    ("output is the system", "is the system"),
    ("output is an .ssd", "apply --system writes an .ssp archive"),
    ("--ssv too", "--ssv and --ssp write the hand-back of one FMU"),
    ("system result with --fmu", "is the result of `identify --ssp` on the system"),
])
def test_refusals_are_one_line_and_write_nothing(chain, tmp_path, case, message):
    from captured_cli import cli, error_line

    folder, ssp, result = chain
    record = json.loads(result.read_text())
    out, extra = tmp_path / "IDENTIFIED.ssp", []
    if case == "other structure":
        record["system_identity"]["structure_sha256"] = "0" * 64
    elif case == "other FMU":
        record["system_identity"]["components"]["B"] = "{another}"
    elif case == "other components":
        record["system_identity"]["components"] = {"A": "x", "C": "y"}
    elif case == "FMU result":
        record = {**{k: v for k, v in record.items() if k not in ("system", "system_identity")}, "fmu": "model.fmu"}
    elif case == "model result":
        record = {k: v for k, v in record.items() if k not in ("system", "system_identity")}
        record["model"] = "sdof"
    elif case == "unknown component":
        record["parameters"] = {"C.k": 1.0}
    elif case == "unknown parameter":
        record["parameters"] = {"A.k9": 1.0}
    elif case == "output is the system":
        out = ssp
    elif case == "output is an .ssd":
        out = tmp_path / "IDENTIFIED.ssd"
    elif case == "--ssv too":
        extra = ["--ssv", tmp_path / "x.ssv"]
    path = _write_json(tmp_path / "r.json", record)
    before = sorted(p.name for p in folder.iterdir())
    if case == "system result with --fmu":
        code, _, err = cli(["apply", path, "--fmu", folder / "feedthrough.fmu", "-o", tmp_path / "x.fmu"])
    else:
        code, _, err = _apply(path, ssp, out, *extra)
    assert code == 2 and message in error_line(err), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    assert sorted(p.name for p in folder.iterdir()) == before
