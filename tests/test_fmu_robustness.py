"""FMU import under adverse conditions found in review: Jacobian columns that vanish where a
few probes would look, --set of identified parameters, non-finite outputs, XML in another
encoding, damaged archives, spoofed fmi-adjoint resources, and validate's input checks."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from fmi_adjoint import write_csv
from fmi_adjoint.fmu.archive import open_fmu
from fmi_adjoint.export import export_fmu
from fmi_adjoint.examples import example_path
from fmi_adjoint.toolchain import c_compiler
from handwritten_fmus import build_fmu
from test_cli import gradient_json, run
from tolerances import FMU_GRADIENT_VS_FD

if c_compiler() is None:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: the FMUs cannot be built", allow_module_level=True)


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fmu_robust")


@pytest.fixture(scope="module")
def vdp(work) -> dict[str, Path]:
    return {"good": build_fmu("van_der_pol_me", work),
            "wrong": build_fmu("van_der_pol_me", work, ("FA_WRONG_DERIVATIVE_MU",))}


@pytest.fixture(scope="module")
def late_input(work) -> dict[str, Path]:
    """Van der Pol at rest (x = 0) until a step input at t = 1.6 s: d f/d mu vanishes until
    then, so probes at t_N/4, t_N/2 and 3 t_N/4 of [0, 2] s would all see a zero column."""
    t = np.linspace(0.0, 2.0, 201)
    inputs = work / "late_inputs.csv"
    write_csv(inputs, t, {"u": np.where(t < 1.6, 0.0, 3.0)})
    data = work / "late_data.csv"
    write_csv(data, t, {"x0": 0.1 * t})
    return {"inputs": inputs, "data": data}


def _late_gradient(fmu, late_input, capsys, gradient="auto"):
    return gradient_json(["--fmu", fmu, "--data", late_input["data"], "--inputs", late_input["inputs"],
                          "--params", "mu", "--set", "x0_start=0", "--set", "x1_start=0", "--step", 0.01,
                          "--gradient", gradient, "--workers", 1], capsys)


def test_a_column_that_vanishes_at_a_few_points_is_still_checked(vdp, late_input, capsys):
    good = _late_gradient(vdp["good"], late_input, capsys)
    wrong = _late_gradient(vdp["wrong"], late_input, capsys)
    fd = _late_gradient(vdp["good"], late_input, capsys, "fd")
    assert good["gradient_path"]["columns"]["mu"].startswith("directional derivative")
    assert "differs" in wrong["gradient_path"]["columns"]["mu"]
    for result in (good, wrong):
        assert result["gradient"]["mu"] == pytest.approx(fd["gradient"]["mu"], rel=FMU_GRADIENT_VS_FD)


def test_set_values_of_identified_parameters_are_the_start(vdp, work, capsys):
    t = np.linspace(0.0, 3.0, 301)
    data = work / "zero.csv"
    write_csv(data, t, {"x0": np.zeros(t.size)})
    costs = [gradient_json(["--fmu", vdp["good"], "--data", data, "--params", "mu", "--set", f"mu={mu}"],
                           capsys)["cost"]
             for mu in (0.5, 1.0, 2.0)]
    assert len(set(costs)) == 3


def test_non_finite_outputs_are_named(work, capsys):
    duffing = build_fmu("duffing_cs", work)
    t = np.linspace(0.0, 1.0, 101)
    data = work / "duffing_zero.csv"
    write_csv(data, t, {"x": np.zeros(t.size)})
    code, out, err = run(["gradient", "--fmu", duffing, "--data", data, "--params", "delta", "--set", "beta=1e300",
                          "--set", "x_start=1e10", "--workers", 1], capsys)
    assert code == 2 and "not finite" in err and "'x'" in err
    assert err.count("\n") == 1 and out == ""


def _rezip(source: Path, target: Path, change) -> Path:
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            name, data = change(info.filename, data)
            if name is not None:
                zout.writestr(name, data)
    return target


def test_doctype_in_utf16_is_refused(vdp, work, capsys):
    def utf16(name, data):
        if name != "modelDescription.xml":
            return name, data
        text = data.decode("utf-8").replace('<?xml version="1.0" encoding="UTF-8"?>', "")
        text = '<?xml version="1.0" encoding="UTF-16"?>\n<!DOCTYPE x [<!ENTITY e "INJECTED">]>\n' + text.lstrip()
        return name, text.encode("utf-16")

    bad = _rezip(vdp["good"], work / "utf16.fmu", utf16)
    code, _, err = run(["gradient", "--fmu", bad, "--data", "x.csv", "--params", "mu"], capsys)
    assert code == 2 and "DOCTYPE" in err


def test_damaged_archive_is_one_error(vdp, work, capsys):
    damaged = work / "damaged.fmu"
    data = bytearray(vdp["good"].read_bytes())
    with zipfile.ZipFile(vdp["good"]) as archive:
        info = archive.getinfo("sources/van_der_pol.c") if "sources/van_der_pol.c" in archive.namelist() else \
            archive.infolist()[-1]
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start + 5] ^= 0xFF  # corrupt the compressed bytes: the CRC check fails on extraction
    damaged.write_bytes(bytes(data))
    code, out, err = run(["gradient", "--fmu", damaged, "--data", "x.csv", "--params", "mu"], capsys)
    assert code == 2 and "cannot be extracted" in err and out == ""


def test_spoofed_fmi_adjoint_resources_are_not_trusted(work):
    exported = export_fmu(example_path("sdof"), work / "sdof.fmu", fmi_version=2)
    with open_fmu(exported) as archive:
        assert archive.native is not None

    def swap(name, data):
        if name == "resources/model.toml":
            return name, data.replace(b"sin(t)", b"2*sin(t)")
        return name, data

    spoofed = _rezip(exported, work / "spoofed.fmu", swap)
    with open_fmu(spoofed) as archive:
        assert archive.native is None  # the embedded model no longer matches the token


def test_validate_checks_inputs_and_data_before_writing(vdp, work, capsys):
    t = np.linspace(0.0, 2.0, 21)
    data = work / "v_data.csv"
    write_csv(data, t, {"x0": np.ones(t.size)})
    bogus = work / "bogus_inputs.csv"
    write_csv(bogus, t[:6], {"bogus": np.zeros(6)})
    short = work / "short_inputs.csv"
    write_csv(short, t[:6], {"u": np.zeros(6)})
    only_time = work / "only_time.csv"
    only_time.write_text("time\n0\n1\n", encoding="utf-8")
    cases = [(["--data", data, "--inputs", bogus], "'bogus' matches no input"),
             (["--data", data, "--inputs", short], "extend the input file"),
             (["--data", only_time], "no column besides 'time'")]
    for extra, message in cases:
        report = work / f"report_{abs(hash(message))}"
        code, _, err = run(["validate", vdp["good"], *extra, "-o", report], capsys)
        assert code == 2 and message in err, err
        assert not report.exists()


def test_result_json_names_the_gradient_path(vdp, work, capsys):
    t = np.linspace(0.0, 2.0, 201)
    data = work / "r_data.csv"
    write_csv(data, t, {"x0": 2.0 * np.cos(t)})
    out = work / "r.json"
    code, _, err = run(["identify", "--fmu", vdp["good"], "--data", data, "--params", "mu", "--max-iter", 2,
                        "-o", out], capsys)
    assert code in (0, 1), err
    payload = json.loads(out.read_text())
    assert payload["gradient_method"]["method"] == "sensitivity"
    assert payload["gradient_method"]["columns"]["mu"].startswith("directional derivative")


def test_apply_hands_back_the_settings_the_identification_assumed(vdp, work, capsys):
    """A fixed parameter set with --set during identification is part of the identified model."""
    t = np.linspace(0.0, 2.0, 201)
    data = work / "s_data.csv"
    write_csv(data, t, {"x0": 2.0 * np.cos(t)})
    result, fmu_out, ssv = work / "s.json", work / "s.fmu", work / "s.ssv"
    code, _, err = run(["identify", "--fmu", vdp["good"], "--data", data, "--params", "mu", "--set", "x1_start=0.25",
                        "--max-iter", 2, "-o", result], capsys)
    assert code in (0, 1), err
    assert json.loads(result.read_text())["settings"] == {"x1_start": 0.25}
    code, _, err = run(["apply", result, "--fmu", vdp["good"], "-o", fmu_out, "--ssv", ssv], capsys)
    assert code == 0, err
    identified = json.loads(result.read_text())["parameters"]["mu"]
    with open_fmu(fmu_out) as archive:
        assert archive.variables["x1_start"].start == 0.25
        assert archive.variables["mu"].start == identified
    assert 'name="x1_start"' in ssv.read_text()
