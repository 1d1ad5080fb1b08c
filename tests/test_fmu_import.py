"""Identification on FMU-wrapped models and the way back (issue 6, "What must be shown").

* FMUs exported by fmi-adjoint (engine_mount, FMI 2 and 3) take the native adjoint path:
  ``gradient --fmu`` and ``identify --fmu`` give the numbers of in-process ``gradient`` and
  ``identify`` bit for bit;
* the hand-written FMUs (fmus/): Van der Pol (FMI 2 ME, directional derivatives) recovers
  mu and x0_start from CVode data up to the trapezoidal rule's second-order discretization
  error (measured by halving the step); Duffing (FMI 3 CS, no derivatives) recovers delta
  (tunable) and alpha (fixed) from data made by the FMU itself;
* the sensitivity path equals finite differences; a wrong Jacobian column is detected by the
  probe and replaced (and would give a wrong gradient without the replacement);
* the FMI 3 Model Exchange Van der Pol (fmus/van_der_pol_me3, the same equations) goes through
  the FMI 3 ME calls of the session: its sensitivity gradient equals finite differences and
  its identified values equal those of the FMI 2 FMU at the same step (the same trapezoidal
  integrator), and ``--gradient auto`` chooses that path (the FMI 3 spelling of
  providesDirectionalDerivatives, which fmpy drops, is read from the XML);
* parallel finite differences equal serial ones; FD stencils next to a bound stay inside;
* ``apply``: SSV files valid against fmpy's schema that read back exactly and re-simulate
  like the re-parameterized FMU, whose archive differs from the input only in the start
  attributes of the identified parameters; ``validate`` writes its report;
* bad input ends with exit code 2, one ``fmi-adjoint: error:`` line, no output file, and
  nothing extracted outside the private temporary folder.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import fmpy
import fmpy.validation
import numpy as np
import pytest
from fmpy.ssp.ssd import read_ssv
from lxml import etree

import fmi_adjoint.fmu.gradients as gradients_module
from fmi_adjoint import compile_model, load_model, read_csv, simulate, write_csv
from fmi_adjoint.costs import LeastSquaresCost
from fmi_adjoint.examples import example_path
from fmi_adjoint.examples.engine_mount_data import TRUE_VALUES
from fmi_adjoint.fmu.archive import open_fmu
from fmi_adjoint.fmu.differences import stencil
from fmi_adjoint.fmu.experiment import FmuExperiment
from fmi_adjoint.fmu.problem import FmuProblem
from fmi_adjoint.fmu.handback import simulate_with_fmpy
from fmi_adjoint.toolchain import c_compiler
from captured_cli import cli as _cli
from handwritten_fmus import build_fmu
from test_cli import RECOVERY, gradient_json, run
from tolerances import CROSS_IMPLEMENTATION, EXACT, FMU_GRADIENT_VS_FD, FMU_NOISE_FREE_RECOVERY

if c_compiler() is None:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: the FMUs cannot be built", allow_module_level=True)

FMPY_SSV_SCHEMA = Path(fmpy.__file__).resolve().parent / "ssp" / "schema" / "SystemStructureParameterValues.xsd"

EM_PARAMS_GRADIENT = "c_E1,d_E"
EM_PARAMS_IDENTIFY = "c_E1,c_E2"
EM_T_END = 0.05

VDP_TRUE = {"mu": 1.5, "x0_start": 1.8}
VDP_T_END = 5.0
VDP_SAMPLES = 251           # every 0.02 s
#: Trust-region least squares on the sensitivity Jacobian: a few iterations from the start.
VDP_METHOD = ("--method", "least_squares")

DUFFING_TRUE = {"delta": 0.35, "alpha": 1.3}
DUFFING_T_END = 5.0
DUFFING_SAMPLES = 501       # every 0.01 s = the communication step




def _identify(argv, output: Path) -> dict:
    code, _, err = _cli(["identify", *argv, "-o", output])
    assert code == 0, err
    return json.loads(output.read_text(encoding="utf-8"))


def _rel(a, b) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b) / np.maximum(np.maximum(np.abs(a), np.abs(b)), 1e-300)))


# ------------------------------------------------------------------------------ fixtures --


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fmu_import")


@pytest.fixture(scope="module")
def fmus(work) -> dict[str, Path]:
    from fmi_adjoint.export import export_fmu

    built = {f"em{v}": export_fmu(example_path("engine_mount"), work / f"em{v}.fmu", fmi_version=v) for v in (2, 3)}
    built["vdp"] = build_fmu("van_der_pol_me", work)
    built["vdp_wrong"] = build_fmu("van_der_pol_me", work, ("FA_WRONG_DERIVATIVE_MU",))
    built["vdp3"] = build_fmu("van_der_pol_me3", work)
    built["duffing"] = build_fmu("duffing_cs", work)
    return {k: Path(v) for k, v in built.items()}


@pytest.fixture(scope="module")
def em_data(work) -> Path:
    """engine_mount at its true values, a1 every second step on [0, 0.05] s."""
    model = compile_model(load_model(example_path("engine_mount")).with_values(TRUE_VALUES))
    traj = simulate(model, t_end=EM_T_END)
    path = work / "em.csv"
    write_csv(path, traj.t[::2], {"a1": traj.outputs()[::2, model.output_index("a1")]})
    return path


@pytest.fixture(scope="module")
def em_identified_in_process(work, em_data) -> dict:
    return _identify(["engine_mount", "--data", em_data, "--params", EM_PARAMS_IDENTIFY], work / "em_in_process.json")


def _simulated_csv(path: Path, fmu: Path, times: np.ndarray, outputs: list[str], values: dict) -> Path:
    """Outputs of ``fmu`` at ``values`` re-simulated through fmpy, written as a data CSV."""
    with open_fmu(fmu) as archive:
        Y = simulate_with_fmpy(archive, times, outputs, start_values=values)
    write_csv(path, times, {name: Y[:, k] for k, name in enumerate(outputs)})
    return path


@pytest.fixture(scope="module")
def vdp_data(work, fmus) -> Path:
    """Van der Pol at VDP_TRUE through fmpy's CVode (rtol 1e-10)."""
    times = np.linspace(0.0, VDP_T_END, VDP_SAMPLES)
    return _simulated_csv(work / "vdp.csv", fmus["vdp"], times, ["x0", "x1"], VDP_TRUE)


@pytest.fixture(scope="module")
def vdp_identified(work, fmus, vdp_data, run_once) -> tuple[Path, dict]:
    """Identified with the default tolerances of the adaptive Model Exchange integration (once
    per test run: the other worker reads the result and writes its own RESULT.json)."""
    path = work / "vdp_result.json"
    if not path.exists():
        payload = run_once("fmu_import_vdp", lambda: _identify(["--fmu", fmus["vdp"], "--data", vdp_data, "--params",
                                                                 "mu,x0_start", *VDP_METHOD], work / "vdp_once.json"))
        path.write_text(json.dumps(payload, indent=2), encoding="utf-8")
    return path, json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def duffing_data(work, fmus) -> Path:
    """Duffing at DUFFING_TRUE, made by the FMU itself (through fmpy's CS driver)."""
    times = np.linspace(0.0, DUFFING_T_END, DUFFING_SAMPLES)
    return _simulated_csv(work / "duffing.csv", fmus["duffing"], times, ["x", "v"], DUFFING_TRUE)


@pytest.fixture(scope="module")
def duffing_identified(work, fmus, duffing_data) -> tuple[Path, dict]:
    path = work / "duffing_result.json"
    # Default --workers (CPU count): the parallel finite differences of the real CLI path.
    return path, _identify(["--fmu", fmus["duffing"], "--data", duffing_data, "--params", "delta,alpha"], path)


@pytest.fixture(scope="module", params=["vdp", "duffing"])
def handback(request, fmus, vdp_data, vdp_identified, duffing_data, duffing_identified) -> dict:
    """An identified hand-written FMU: what ``apply`` and ``validate`` work on."""
    if request.param == "vdp":
        result, payload = vdp_identified
        return dict(name="vdp", fmu=fmus["vdp"], data=vdp_data, result=result, payload=payload, step=0.02,
                    outputs=["x0", "x1"], t_end=VDP_T_END, method="sensitivity")
    result, payload = duffing_identified
    return dict(name="duffing", fmu=fmus["duffing"], data=duffing_data, result=result, payload=payload, step=0.01,
                outputs=["x", "v"], t_end=DUFFING_T_END, method="fd")


@pytest.fixture(scope="module")
def applied(handback, work) -> dict:
    """``apply RESULT.json --fmu X.fmu -o Y.fmu --ssv Z.ssv`` on the identified FMU."""
    folder = work / f"applied_{handback['name']}"
    folder.mkdir()
    fmu, ssv = folder / "identified.fmu", folder / "identified.ssv"
    code, _, err = _cli(["apply", handback["result"], "--fmu", handback["fmu"], "-o", fmu, "--ssv", ssv])
    assert code == 0, err
    assert str(fmu) in err and str(ssv) in err
    return {**handback, "new_fmu": fmu, "ssv": ssv}


def _problem(archive, data_path: Path, names, step: float, t_end: float, method: str, **kwargs) -> FmuProblem:
    data = read_csv(data_path)
    exp = FmuExperiment(LeastSquaresCost(data.times, data.values, data.columns), t_end=t_end, step=step)
    return FmuProblem(archive, [exp], names, method, **kwargs)


# --------------------------------------------------- 1. exported FMUs: the adjoint path --


@pytest.mark.parametrize("version", [2, 3])
def test_exported_fmu_gradient_equals_in_process(version, fmus, em_data, capsys):
    common = ["--data", em_data, "--params", EM_PARAMS_GRADIENT]
    via_fmu = gradient_json(["--fmu", fmus[f"em{version}"], *common], capsys)
    in_process = gradient_json(["engine_mount", *common], capsys)
    assert via_fmu["gradient_path"]["method"] == "adjoint"
    assert via_fmu["method"] == in_process["method"] == "adjoint"
    assert list(via_fmu["gradient"]) == EM_PARAMS_GRADIENT.split(",")
    # The embedded model with the FMU's start values is the in-process problem: bit for bit.
    assert _rel(via_fmu["cost"], in_process["cost"]) <= EXACT
    assert _rel(list(via_fmu["gradient"].values()), list(in_process["gradient"].values())) <= EXACT
    assert all(v != 0.0 for v in via_fmu["gradient"].values())


@pytest.mark.parametrize("version", [2, 3])
def test_exported_fmu_identify_equals_in_process(version, fmus, em_data, em_identified_in_process, work):
    payload = _identify(["--fmu", fmus[f"em{version}"], "--data", em_data, "--params", EM_PARAMS_IDENTIFY],
                        work / f"em{version}_result.json")
    expected = em_identified_in_process
    assert payload["success"] and expected["success"]
    assert list(payload["parameters"]) == EM_PARAMS_IDENTIFY.split(",")
    for name, value in expected["parameters"].items():
        assert _rel(payload["parameters"][name], value) <= EXACT, name
    assert payload["iterations"] == expected["iterations"]
    # The identification moved: c_E1 from its start value 7.38e4 towards the true 1.23e5.
    assert abs(payload["parameters"]["c_E1"] - TRUE_VALUES["c_E1"]) < 0.1 * TRUE_VALUES["c_E1"]
    gm = payload["gradient_method"]
    assert set(gm) == {"method", "reason"}
    assert gm["method"] == "adjoint" and "fmi-adjoint" in gm["reason"] and "adjoint" in gm["reason"]
    assert payload["fmu"] == str(fmus[f"em{version}"]) and payload["model"] is None


# ---------------------------------------------- 2. hand-written FMUs: parameter recovery --


@pytest.mark.slow  # an FMU identification
def test_van_der_pol_recovers_parameters_to_1e7_with_default_tolerances(vdp_identified):
    """CVode data (rtol 1e-10), adaptive Radau IIA identification at the default tolerances:
    the parameters within 1e-7 relative, and the reported discretization-error estimate of the
    fit (``discretization_error``) bounds what the tolerances cost."""
    _, payload = vdp_identified
    assert payload["success"]
    assert payload["gradient_method"]["method"] == "sensitivity"
    assert payload["interface"] == "ModelExchange"
    estimate = payload["discretization_error"]
    assert estimate["tolerances"]["rtol"] == 1e-8
    for name, true in VDP_TRUE.items():
        assert abs(payload["parameters"][name] - true) <= FMU_NOISE_FREE_RECOVERY * abs(true), name
        assert abs(estimate["parameter_bias"][name]) <= FMU_NOISE_FREE_RECOVERY * abs(true), name


def test_duffing_recovers_tunable_and_fixed_parameter(duffing_identified):
    _, payload = duffing_identified
    assert payload["success"]
    assert payload["gradient_method"]["method"] == "fd"
    assert "finite differences" in payload["gradient_method"]["reason"]
    for name, true in DUFFING_TRUE.items():
        assert payload["initial"][name] != true
        assert abs(payload["parameters"][name] - true) <= RECOVERY * abs(true), name


# ------------------------------------------- 3. sensitivity path against finite differences --

VDP_GRADIENT_PARAMS = "mu,x0_start,x1_start"


def _vdp_gradients(fmu, data, capsys, *extra):
    common = ["--fmu", fmu, "--data", data, "--params", VDP_GRADIENT_PARAMS, *extra]
    sens = gradient_json(common, capsys)
    fd = gradient_json([*common, "--gradient", "fd", "--workers", 1], capsys)
    assert fd["method"] == "fd" and fd["gradient_path"]["method"] == "fd"
    assert _rel(sens["cost"], fd["cost"]) <= EXACT
    return sens, fd


def test_sensitivity_gradient_equals_finite_differences(fmus, vdp_data, capsys):
    sens, fd = _vdp_gradients(fmus["vdp"], vdp_data, capsys)
    assert sens["method"] == "sensitivity" and sens["gradient_path"]["method"] == "sensitivity"
    columns = sens["gradient_path"]["columns"]
    for name in VDP_GRADIENT_PARAMS.split(","):
        assert columns[name].startswith("directional derivative"), columns[name]
        assert _rel(sens["gradient"][name], fd["gradient"][name]) <= FMU_GRADIENT_VS_FD, name
    assert columns["state 0"] == columns["state 1"] == "directional derivative"


def test_wrong_derivative_column_is_replaced(fmus, vdp_data, capsys, monkeypatch):
    sens, fd = _vdp_gradients(fmus["vdp_wrong"], vdp_data, capsys)
    columns = sens["gradient_path"]["columns"]
    assert columns["mu"].startswith("finite differences of replays (")
    assert "differs" in columns["mu"]
    assert columns["x0_start"].startswith("directional derivative")
    assert columns["x1_start"].startswith("directional derivative")
    for name in VDP_GRADIENT_PARAMS.split(","):
        assert _rel(sens["gradient"][name], fd["gradient"][name]) <= FMU_GRADIENT_VS_FD, name

    # Without the replacement (every column trusted) the mu component is wrong.
    monkeypatch.setattr(gradients_module, "PROBE_TOLERANCE", 1e300)
    trusted = gradient_json(["--fmu", fmus["vdp_wrong"], "--data", vdp_data, "--params", VDP_GRADIENT_PARAMS],
                            capsys)
    assert trusted["gradient_path"]["columns"]["mu"].startswith("directional derivative")
    error = _rel(trusted["gradient"]["mu"], fd["gradient"]["mu"])
    assert error > 1e3 * FMU_GRADIENT_VS_FD, error
    for name in ("x0_start", "x1_start"):  # the other columns are right
        assert _rel(trusted["gradient"][name], fd["gradient"][name]) <= FMU_GRADIENT_VS_FD, name


# ------------------------------------------ 3b. FMI 3 Model Exchange (fmus/van_der_pol_me3) --

def _same_parameters(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for name in a:
        assert _rel(a[name], b[name]) <= EXACT, (name, a[name], b[name])


def test_fmi3_model_exchange_sensitivity_gradient_equals_finite_differences(fmus, vdp_data, capsys):
    """``--gradient sensitivity`` on the FMI 3 ME FMU: parameter columns from
    fmi3GetDirectionalDerivative (probed), states and outputs through the FMI 3 ME calls."""
    sens, fd = _vdp_gradients(fmus["vdp3"], vdp_data, capsys, "--gradient", "sensitivity")
    assert sens["method"] == "sensitivity" and sens["gradient_path"]["method"] == "sensitivity"
    columns = sens["gradient_path"]["columns"]
    for name in VDP_GRADIENT_PARAMS.split(","):
        assert columns[name].startswith("directional derivative"), columns[name]
        assert _rel(sens["gradient"][name], fd["gradient"][name]) <= FMU_GRADIENT_VS_FD, name
    # The same equations as the FMI 2 FMU through the same integrator: the same cost.
    fmi2 = gradient_json(["--fmu", fmus["vdp"], "--data", vdp_data, "--params", VDP_GRADIENT_PARAMS], capsys)
    assert _rel(sens["cost"], fmi2["cost"]) <= EXACT
    for name in VDP_GRADIENT_PARAMS.split(","):
        assert _rel(sens["gradient"][name], fmi2["gradient"][name]) <= FMU_GRADIENT_VS_FD, name


def test_fmi3_model_exchange_gradient_picks_the_sensitivity_path(fmus, vdp_data, capsys):
    """``gradient --fmu`` (auto) on the FMI 3 ME FMU with directional derivatives: the
    sensitivity path with every column from the FMU, the numbers of the FMI 2 FMU.  fmpy 0.3.32
    drops the FMI 3 attribute providesDirectionalDerivatives (it knows only the FMI 2 spelling),
    so the importer must read it from the XML; otherwise auto falls back to finite differences."""
    # --workers 1: should the path wrongly be fd, this stays serial (and fails fast).
    sens, fd = _vdp_gradients(fmus["vdp3"], vdp_data, capsys, "--workers", 1)
    assert sens["gradient_path"]["method"] == "sensitivity", sens["gradient_path"]
    assert sens["method"] == "sensitivity"
    columns = sens["gradient_path"]["columns"]
    assert columns["state 0"] == columns["state 1"] == "directional derivative"
    fmi2 = gradient_json(["--fmu", fmus["vdp"], "--data", vdp_data, "--params", VDP_GRADIENT_PARAMS], capsys)
    for name in VDP_GRADIENT_PARAMS.split(","):
        assert columns[name].startswith("directional derivative"), columns[name]
        assert _rel(sens["gradient"][name], fd["gradient"][name]) <= FMU_GRADIENT_VS_FD, name
        assert _rel(sens["gradient"][name], fmi2["gradient"][name]) <= EXACT, name


@pytest.mark.slow  # two FMU identifications
def test_fmi3_model_exchange_identify_auto_equals_fmi2(fmus, vdp_data, vdp_identified, work):
    """``identify --fmu`` (auto) on the FMI 3 ME FMU takes the sensitivity path through the FMI 3
    Model Exchange calls and gives the FMI 2 result bit for bit (same data, start, integrator,
    every Jacobian column from the FMU), moved from the start value to the truth."""
    _, fmi2 = vdp_identified
    payload = _identify(["--fmu", fmus["vdp3"], "--data", vdp_data, "--params", "mu,x0_start", *VDP_METHOD,
                         "--workers", 1], work / "vdp3_result_auto.json")
    assert payload["gradient_method"]["method"] == "sensitivity", payload["gradient_method"]
    assert payload["success"]
    _same_parameters(payload["parameters"], fmi2["parameters"])
    assert payload["iterations"] == fmi2["iterations"]
    for name, true in VDP_TRUE.items():
        assert abs(payload["parameters"][name] - true) < 1e-2 * abs(payload["initial"][name] - true), name


# ------------------------------------------------ 4. parallel FD, stencils next to bounds --


def test_parallel_finite_differences_equal_serial(fmus, duffing_data):
    with open_fmu(fmus["duffing"]) as archive:
        problems = [_problem(archive, duffing_data, ["delta", "alpha", "x_start"], 0.01, DUFFING_T_END, "fd",
                             workers=w) for w in (1, 2)]
        try:
            x = np.array([0.3, 1.1, 0.9])
            serial, parallel = (p.finite_differences(x) for p in problems)
            assert problems[1].instances._pool  # really ran in worker processes
        finally:
            for p in problems:
                p.close()
    assert np.all(serial != 0.0)
    assert _rel(parallel, serial) <= EXACT


def test_fd_stencil_next_to_bounds_is_one_sided_and_inside(fmus, duffing_data):
    lower, upper = {"delta": 0.2, "alpha": 0.5}, {"delta": 1.0, "alpha": 1.0}
    bounds = {n: (lower[n], upper[n]) for n in lower}
    with open_fmu(fmus["duffing"]) as archive:
        bounded = _problem(archive, duffing_data, ["delta", "alpha"], 0.01, DUFFING_T_END, "fd", workers=1,
                           bounds=bounds)
        free = _problem(archive, duffing_data, ["delta", "alpha"], 0.01, DUFFING_T_END, "fd", workers=1)
        try:
            x = np.array([lower["delta"], upper["alpha"]])  # delta at its lower, alpha at its upper bound
            steps = 1e-4 * np.maximum(np.abs(x), bounded.nominal)
            points = stencil(x, steps, bounded.lower, bounded.upper, bounded.names)
            recipes = points.recipes
            P = np.array(points.points)
            assert np.all(P >= bounded.lower) and np.all(P <= bounded.upper)
            for k, (first, weights) in enumerate(recipes):
                offsets = P[first:first + len(weights), k] - x[k]
                others = np.delete(P[first:first + len(weights)], k, axis=1)
                assert np.all(others == np.delete(x, k))
                assert len(weights) == 3 and offsets[0] == 0.0
                assert np.all(offsets[1:] > 0) if k == 0 else np.all(offsets[1:] < 0), (k, offsets)
                assert abs(sum(weights)) <= EXACT * max(map(abs, weights))  # a difference formula
            # The one-sided (second-order) differences agree with central ones of the free problem.
            one_sided, central = bounded.finite_differences(x), free.finite_differences(x)
            assert _rel(one_sided, central) <= FMU_GRADIENT_VS_FD
            # Away from the bounds the stencil is central.
            inner = stencil(np.array([0.5, 0.8]), steps, bounded.lower, bounded.upper, bounded.names).recipes
            assert all(len(w) == 2 for _, w in inner)
        finally:
            bounded.close()
            free.close()


def test_fd_stencil_stays_inside_a_narrow_interval(fmus, duffing_data):
    with open_fmu(fmus["duffing"]) as archive:
        problem = _problem(archive, duffing_data, ["delta"], 0.01, DUFFING_T_END, "fd", workers=1,
                           bounds={"delta": (0.2, 0.2 + 3e-5)})  # the step is 1e-4 * 0.2 = 2e-5
        try:
            points = stencil(np.array([0.2]), 1e-4 * np.maximum(0.2, problem.nominal), problem.lower, problem.upper,
                             problem.names).points
        finally:
            problem.close()
    P = np.array(points)
    assert np.all(P >= problem.lower) and np.all(P <= problem.upper), P.ravel()


# ------------------------------------------------------------------- 5. SSV round trip --


def test_ssv_is_valid_and_reads_back_exactly(applied):
    schema = etree.XMLSchema(etree.parse(str(FMPY_SSV_SCHEMA)))
    document = etree.parse(str(applied["ssv"]))
    assert schema.validate(document), schema.error_log
    parameter_set = read_ssv(str(applied["ssv"]))  # validates too
    identified = applied["payload"]["parameters"]
    read = {p.name: p for p in parameter_set.parameters}
    assert list(read) == list(identified)
    for name, value in identified.items():
        assert read[name].type == "Real"
        assert float(read[name].value) == value, name  # repr round trip: exact


def test_ssv_resimulation_equals_reparameterized_fmu_and_identified_model(applied):
    data = read_csv(applied["data"])
    ssv = {p.name: float(p.value) for p in read_ssv(str(applied["ssv"])).parameters}
    names = list(applied["payload"]["parameters"])
    x = np.array([applied["payload"]["parameters"][n] for n in names])
    with open_fmu(applied["fmu"]) as original, open_fmu(applied["new_fmu"]) as new:
        via_ssv = simulate_with_fmpy(original, data.times, applied["outputs"], start_values=ssv)
        via_fmu = simulate_with_fmpy(new, data.times, applied["outputs"])
        unidentified = simulate_with_fmpy(original, data.times, applied["outputs"])
        problem = _problem(original, applied["data"], names, applied["step"], applied["t_end"], applied["method"],
                           workers=1)
        try:
            identified = problem.sampled_outputs(0, x)
        finally:
            problem.close()
    scale = float(np.max(np.abs(via_ssv)))
    assert np.max(np.abs(via_ssv - via_fmu)) <= EXACT * scale
    assert np.max(np.abs(via_ssv - unidentified)) > 1e-3 * scale  # the values took effect
    if applied["method"] == "fd":
        # Co-simulation: the FMU's own RK4 on the same communication grid in both.
        assert np.max(np.abs(via_ssv - identified)) <= EXACT * scale
    else:
        # CVode (rtol 1e-10) against the adaptive Radau IIA run (rtol 1e-10): both solutions
        # agree to their tolerances.
        assert np.max(np.abs(via_ssv - identified)) <= CROSS_IMPLEMENTATION * scale


# ---------------------------------------------------------- 6. the re-parameterized FMU --


def _attributes(tree) -> list[tuple[str, str, dict]]:
    out = []
    for element in tree.iter():
        if isinstance(element.tag, str):
            out.append((element.tag, element.get("name"), dict(element.attrib)))
    return out


def test_reparameterized_fmu_changes_only_the_identified_start_values(applied):
    identified = applied["payload"]["parameters"]
    with zipfile.ZipFile(applied["fmu"]) as old, zipfile.ZipFile(applied["new_fmu"]) as new:
        assert [i.filename for i in old.infolist()] == [i.filename for i in new.infolist()]
        for info in old.infolist():
            if info.filename != "modelDescription.xml":
                assert new.read(info.filename) == old.read(info), info.filename
        before = _attributes(etree.fromstring(old.read("modelDescription.xml")))
        after = _attributes(etree.fromstring(new.read("modelDescription.xml")))
    assert [(t, n) for t, n, _ in before] == [(t, n) for t, n, _ in after]
    changed = set()
    owner = None
    for (tag, name, a), (_, _, b) in zip(before, after):
        owner = name if tag in ("ScalarVariable", "Float64", "Float32") else owner
        if a == b:
            continue
        assert set(a) | {"start"} == set(b) | {"start"} and {k: v for k, v in a.items() if k != "start"} == \
            {k: v for k, v in b.items() if k != "start"}, (tag, name)
        assert owner in identified, (tag, owner)
        assert float(b["start"]) == identified[owner]
        changed.add(owner)
    assert changed == set(identified)


def test_reparameterized_fmu_passes_fmpy_validation(applied):
    assert fmpy.validation.validate_fmu(str(applied["new_fmu"])) == []


def test_apply_refuses_to_overwrite_the_input_fmu(handback, tmp_path, capsys):
    fmu = tmp_path / "model.fmu"
    shutil.copy(handback["fmu"], fmu)
    original = fmu.read_bytes()
    code, out, err = run(["apply", handback["result"], "--fmu", fmu, "-o", fmu], capsys)
    _assert_one_error(code, err, "overwrite")
    assert fmu.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.fmu"]  # no partial file


def test_apply_refusal_writes_no_ssv_either(handback, tmp_path, capsys):
    fmu = tmp_path / "model.fmu"
    shutil.copy(handback["fmu"], fmu)
    ssv = tmp_path / "out.ssv"
    code, out, err = run(["apply", handback["result"], "--fmu", fmu, "-o", fmu, "--ssv", ssv], capsys)
    _assert_one_error(code, err, "overwrite")
    assert not ssv.exists()


# ------------------------------------------------------------------------- 7. validate --


def test_validate_reports_smaller_errors_for_the_identified_fmu(applied, tmp_path, private_tmp, capsys):
    reports = {}
    for label, fmu in (("original", applied["fmu"]), ("identified", applied["new_fmu"])):
        folder = tmp_path / label
        code, out, err = run(["validate", fmu, "--data", applied["data"], "-o", folder], capsys)
        assert code == 0, err
        assert str(folder / "report.json") in err
        report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
        assert (folder / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert set(report["outputs"]) == set(applied["outputs"])
        for name in applied["outputs"]:
            stats = report["outputs"][name]
            assert stats["rms_error"] >= 0 and stats["max_abs_error"] >= stats["rms_error"]
            assert name in out
        reports[label] = report
    for name in applied["outputs"]:
        original, identified = reports["original"]["outputs"][name], reports["identified"]["outputs"][name]
        assert identified["rms_error"] < 1e-2 * original["rms_error"], name
        assert identified["max_abs_error"] < 1e-2 * original["max_abs_error"], name
    assert list(private_tmp.iterdir()) == []  # the extraction folders are removed after use


# ------------------------------------------------------------------------ 8. bad input --


def _assert_one_error(code: int, err: str, *words: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("fmi-adjoint: error:"), err
    assert "Traceback" not in err
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def _rezip(source: Path, target: Path, *, drop=(), replace=None, extra=()) -> Path:
    replace = replace or {}
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if any(info.filename.startswith(prefix) for prefix in drop):
                continue
            dst.writestr(info.filename, replace.get(info.filename, src.read(info)))
        for name, data in extra:
            dst.writestr(zipfile.ZipInfo(name), data)
    return target


def _description(fmus) -> bytes:
    with zipfile.ZipFile(fmus["vdp"]) as archive:
        return archive.read("modelDescription.xml")


BAD_FMUS = {
    "traversal": ("path traversal", "../evil.txt"),
    "absolute": ("path traversal", "abs_evil.txt"),
    "no_binary": ("no binary for this platform", "linux64"),
    "malformed": ("malformed XML", "modelDescription.xml"),
    "xxe": ("DOCTYPE or ENTITY", "refused"),
    "not_a_zip": ("not a zip archive", "bad.fmu"),
}


def _make_bad_fmu(kind: str, fmus, folder: Path, private_tmp: Path) -> tuple[Path, list[Path]]:
    """The bad FMU and the files a naive extraction would create (must not exist)."""
    bad = folder / "bad.fmu"
    source = fmus["vdp"]
    if kind == "traversal":
        # Extracted naively into private_tmp/fmi_adjoint_fmu_XXXX/, it would land in private_tmp.
        _rezip(source, bad, extra=[("../evil.txt", b"owned"), ("resources/../../../evil.txt", b"owned")])
        return bad, [private_tmp / "evil.txt", folder / "evil.txt", folder.parent / "evil.txt"]
    if kind == "absolute":
        target = folder / "abs_evil.txt"
        _rezip(source, bad, extra=[(str(target), b"owned")])
        return bad, [target]
    if kind == "no_binary":
        return _rezip(source, bad, drop=("binaries/",)), []
    if kind == "malformed":
        text = _description(fmus)
        return _rezip(source, bad, replace={"modelDescription.xml": text[: len(text) // 2]}), []
    if kind == "xxe":
        text = _description(fmus).decode()
        head, _, rest = text.partition("?>")
        rest = rest.replace('description="Van der Pol', 'description="&e; Van der Pol', 1)
        poisoned = f'{head}?>\n<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>{rest}'
        assert "&e;" in poisoned
        return _rezip(source, bad, replace={"modelDescription.xml": poisoned.encode()}), []
    if kind == "not_a_zip":
        bad.write_text("time,x0\n0,1\n", encoding="utf-8")
        return bad, []
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", list(BAD_FMUS))
def test_bad_fmu_is_refused(kind, fmus, vdp_data, tmp_path, private_tmp, capsys):
    bad, forbidden = _make_bad_fmu(kind, fmus, tmp_path, private_tmp)
    result = tmp_path / "RESULT.json"
    ssv = tmp_path / "out.ssv"
    result_in = tmp_path / "in.json"
    result_in.write_text(json.dumps({"parameters": {"mu": 1.2}}), encoding="utf-8")
    commands = [
        ["identify", "--fmu", bad, "--data", vdp_data, "--params", "mu", "-o", result],
        ["gradient", "--fmu", bad, "--data", vdp_data, "--params", "mu"],
        ["apply", result_in, "--fmu", bad, "-o", tmp_path / "new.fmu", "--ssv", ssv],
        ["validate", bad, "--data", vdp_data, "-o", tmp_path / "report"],
    ]
    for argv in commands:
        code, out, err = run(argv, capsys)
        _assert_one_error(code, err, *BAD_FMUS[kind])
        assert out == ""
    for path in [result, ssv, tmp_path / "new.fmu", tmp_path / "report", *forbidden]:
        assert not path.exists(), path
    assert list(private_tmp.iterdir()) == []  # the extraction folder is removed again


@pytest.fixture
def bad_csvs(tmp_path, vdp_data) -> dict[str, Path]:
    data = read_csv(vdp_data)
    files = {"column": tmp_path / "y.csv", "inputs": tmp_path / "inputs.csv"}
    write_csv(files["column"], data.times, {"y": data.column("x0")})
    write_csv(files["inputs"], data.times, {"w": np.zeros(data.times.size)})
    return files


def test_bad_names_and_paths(fmus, vdp_data, duffing_data, bad_csvs, tmp_path, private_tmp, capsys):
    result = tmp_path / "RESULT.json"
    vdp = ["--fmu", fmus["vdp"], "--data", vdp_data]
    cases = {
        "unknown parameter": (["identify", *vdp, "--params", "mu,nosuch", "-o", result], ("'nosuch'", "mu")),
        "column matches no output": (["identify", "--fmu", fmus["vdp"], "--data", bad_csvs["column"], "--params",
                                      "mu", "-o", result], ("'y'", "x0")),
        "unknown input column": (["identify", *vdp, "--params", "mu", "--inputs", bad_csvs["inputs"], "-o", result],
                                 ("'w'", "u")),
        "adjoint on a third-party FMU": (["identify", *vdp, "--params", "mu", "--gradient", "adjoint", "-o", result],
                                         ("--gradient adjoint", "fmi-adjoint")),
        "sensitivity on a CS FMU": (["identify", "--fmu", fmus["duffing"], "--data", duffing_data, "--params",
                                     "delta", "--gradient", "sensitivity", "-o", result],
                                    ("--gradient sensitivity", "Model Exchange")),
        "gradient: unknown parameter": (["gradient", *vdp, "--params", "nosuch"], ("'nosuch'",)),
        "validate: column matches no output": (["validate", fmus["vdp"], "--data", bad_csvs["column"], "-o",
                                                tmp_path / "report"], ("'y'",)),
    }
    for label, (argv, words) in cases.items():
        code, out, err = run(argv, capsys)
        try:
            _assert_one_error(code, err, *words)
        except AssertionError as exc:
            raise AssertionError(f"{label}: {exc}") from None
        assert out == "", label
        assert not result.exists() and not (tmp_path / "report").exists(), label
    assert list(private_tmp.iterdir()) == []


def test_apply_with_bad_result_file(fmus, tmp_path, private_tmp, capsys):
    garbled = tmp_path / "garbled.json"
    garbled.write_text('{"parameters": {"mu": 1.2', encoding="utf-8")
    no_parameters = tmp_path / "empty.json"
    no_parameters.write_text(json.dumps({"cost": 1.0}), encoding="utf-8")
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"parameters": {"mu": 1.2, "nosuch": 3.0}}), encoding="utf-8")
    not_finite = tmp_path / "nan.json"
    not_finite.write_text('{"parameters": {"mu": NaN}}', encoding="utf-8")
    cases = {
        tmp_path / "missing.json": ("missing.json", "file not found"),
        garbled: ("garbled.json", "not a readable JSON"),
        no_parameters: ("empty.json", "no 'parameters'"),
        unknown: ("van_der_pol_me.fmu", "'nosuch'"),
        not_finite: ("nan.json", "'mu'", "finite"),
    }
    fmu_out, ssv_out = tmp_path / "new.fmu", tmp_path / "new.ssv"
    for result, words in cases.items():
        code, out, err = run(["apply", result, "--fmu", fmus["vdp"], "-o", fmu_out, "--ssv", ssv_out], capsys)
        _assert_one_error(code, err, *words)
        assert out == ""
        assert not fmu_out.exists() and not ssv_out.exists(), result
    assert list(private_tmp.iterdir()) == []
