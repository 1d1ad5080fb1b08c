"""Identification across a system of Model Exchange FMUs integrated as one ODE, with exact
sensitivities through the couplings (issue 28, part 3: :mod:`fmi_adjoint.ssp.monolithic_problem`,
``identify --ssp --interface me``).

The two-mass oscillator split into two Model Exchange FMUs of ``test_ssp_monolithic`` (A: m1 on its
ground spring ``A.k1``; B: m2 on the coupling spring ``B.kc``, whose force acts back on m1), with
bounds on both stiffnesses.  Synthetic data of ``A.x1`` and ``B.x2`` are made by the system at the
true values (rtol 1e-10) with noise of 1 % of the larger output (seed 0):

* the problem's gradient (exact sensitivities of each run) equals central differences of the
  system's cost on the nominal run's nodes to ``GRADIENT_VS_FD``, at the start and away from it;
  so does the gradient path that runs the stencil on an executor (``--gradient fd``);
* ``identify --ssp --interface me`` from a wrong start recovers both stiffnesses within their
  standard errors, reports the Model Exchange integration, the exact sensitivities and the
  discretization error, and succeeds (the data are of the continuous system, up to the
  integration error, which the guard finds far below the standard errors); ``apply --system``
  writes the values into the SSP's bindings, and the written system runs them;
* options of the other interface are refused by name.

The same parameters through the co-simulation of Co-Simulation halves, with differences:
``test_ssp_identify``.

Cost: two exports (about 3 s cold); runs of 0.3-0.6 s; the identification about 8 runs with
sensitivities (module about 20 s).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fmi_adjoint.data import write_csv
from fmi_adjoint.fmu.experiment import Tolerances
from fmi_adjoint.identify.data_costs import CostOptions, DataFile
from fmi_adjoint.scale import SerialExecutor
from fmi_adjoint.ssp.monolithic import simulate_monolithic
from fmi_adjoint.ssp.monolithic_problem import MonolithicSystemProblem
from fmi_adjoint.ssp.problem import system_experiment, system_target
from fmi_adjoint.ssp.reading import open_system
from fmi_adjoint.toolchain import c_compiler
from tolerances import EXACT, GRADIENT_VS_FD, WITHIN_STD_ERRORS

if c_compiler() is None:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: the FMUs cannot be built", allow_module_level=True)

from test_ssp_master import _write_ssp, export_models  # noqa: E402 (after the skip: it builds too)
from test_ssp_monolithic import ME_A, ME_B, _split  # noqa: E402

BOUNDED_A = ME_A.replace("k1 = 1000.0", 'k1 = { value = 1000.0, unit = "N/m", bounds = [100.0, 10000.0] }')
BOUNDED_B = ME_B.replace("kc = 500.0", 'kc = { value = 500.0, unit = "N/m", bounds = [50.0, 5000.0] }')
TRUTH = {"A.k1": 1000.0, "B.kc": 500.0}
START = {"A.k1": 1200.0, "B.kc": 420.0}
T_END, NOISE = 0.2, 0.01
TOL = Tolerances(rtol=1e-8, atol=1e-10)


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    """(folder, SSP file, data file) of the split system and its synthetic measurement."""
    folder = tmp_path_factory.mktemp("ssp_monolithic_identify")
    archives = export_models(folder, {"A": BOUNDED_A, "B": BOUNDED_B}, interface="me")
    try:
        structure = _split(archives)
        ssp = _write_ssp(folder, structure)
        times = np.linspace(0.0, T_END, 101)
        run = simulate_monolithic(structure, archives, T_END, times=times, values=TRUTH,
                                  tolerances=Tolerances(rtol=1e-10, atol=1e-12))
    finally:
        for archive in archives.values():
            archive.close()
    result = run.result
    sigma = NOISE * max(np.max(np.abs(result.column(name))) for name in ("A.x1", "B.x2"))
    rng = np.random.default_rng(0)
    columns = {name: result.column(name) + sigma * rng.standard_normal(times.size) for name in ("A.x1", "B.x2")}
    data = folder / "data.csv"
    write_csv(data, times, columns)
    return folder, ssp, data


def test_the_gradient_is_exact_and_equals_central_differences_of_the_systems_cost(system):
    _, ssp, data = system
    with open_system(ssp) as opened:
        target = system_target(opened.structure, opened.archives, "ModelExchange")
        experiment = system_experiment(target, DataFile.from_path(str(data)), {}, name="data", t_end=None,
                                       step=T_END / 100, cost=CostOptions())
        problem = MonolithicSystemProblem(opened.structure, opened.archives, [experiment], list(TRUTH), TOL)
        for x in (np.array([START["A.k1"], START["B.kc"]]), np.array([900.0, 560.0])):
            exact = problem.evaluate(x)
            assert exact.method == "sensitivity" and exact.simulations == 1  # one run: its replays in the worker
            fd = problem.evaluate(x, "fd")  # central differences of whole runs on the nominal run's nodes
            assert fd.method == "fd" and fd.simulations == 5
            np.testing.assert_allclose(exact.gradient, fd.gradient, rtol=GRADIENT_VS_FD)
            assert np.all(np.abs(fd.gradient) > 0)
        executor = SerialExecutor()  # the difference stencil as executor tasks (the FMUs travel as bytes)
        try:
            problem.executor = executor
            np.testing.assert_allclose(problem.evaluate(x, "fd").gradient, fd.gradient, rtol=EXACT)
        finally:
            executor.close()


def _identify(ssp, data, out, *extra):
    from captured_cli import cli

    starts = [f"--set={name}={value}" for name, value in START.items()]
    return cli(["identify", "--ssp", ssp, "--interface", "me", "--rtol", "1e-8", "--atol", "1e-10", "--params",
                "A.k1,B.kc", *starts, "--data", data, "-o", out, *extra])


@pytest.mark.slow  # about 11 runs with sensitivities: 15-25 s on the shared machine
def test_identify_ssp_model_exchange_recovers_the_truth_within_its_standard_errors(system, tmp_path):
    _, ssp, data = system
    out = tmp_path / "result.json"
    code, _, err = _identify(ssp, data, out)
    assert code == 0, err
    result = json.loads(out.read_text())
    for name, truth in TRUTH.items():
        value, se = result["parameters"][name], result["std_errors"][name]
        assert result["initial"][name] == START[name]
        assert abs(value - truth) <= WITHIN_STD_ERRORS * se, (name, value, se)
    assert result["success"] and not result["warnings"], result["warnings"]
    assert result["interface"] == "ModelExchange" and result["gradient_method"]["method"] == "sensitivity"
    assert result["integrator"]["scheme"] == "Radau IIA (order 5), adaptive" and result["integrator"]["rtol"] == 1e-8
    assert set(result["system_identity"]["components"]) == {"A", "B"}
    assert set(result["discretization_error"]["parameter_bias"]) == set(TRUTH)
    # Handed back into the system's parameter bindings, the system runs the identified values.
    from captured_cli import cli
    from fmi_adjoint.data import read_csv

    identified = tmp_path / "identified.ssp"
    code, _, err = cli(["apply", str(out), "--system", str(ssp), "-o", str(identified)])
    assert code == 0, err
    runs = []
    for system, settings in ((identified, []), (ssp, [f"--set=A.k1={result['parameters']['A.k1']!r}",
                                                      f"--set=B.kc={result['parameters']['B.kc']!r}"])):
        csv = tmp_path / f"{system.stem}.csv"
        code, _, err = cli(["simulate", "--ssp", str(system), "--interface", "me", "--t-end", "0.2", "--step", "0.01",
                            *settings, "-o", str(csv)])
        assert code == 0, err
        runs.append(read_csv(csv).values)
    np.testing.assert_array_equal(runs[0], runs[1])


@pytest.mark.parametrize("extra, message", [
    (["--master-order", "gauss-seidel"], "--master-order applies to a co-simulation (--interface cs)"),
    (["--gradient", "adjoint"], "--gradient adjoint: a Model Exchange system has exact forward sensitivities"),
    # co-simulated, the system is one Model Exchange part stepped by the master: a macro step is needed
    (["--interface", "cs"], "--ssp needs --step H, the macro step of the co-simulation"),
])
def test_identify_ssp_model_exchange_refusals_are_one_line(system, tmp_path, extra, message):
    from captured_cli import error_line

    _, ssp, data = system
    code, _, err = _identify(ssp, data, tmp_path / "r.json", *extra)
    assert code == 2 and message in error_line(err), err
    assert not (tmp_path / "r.json").exists()
