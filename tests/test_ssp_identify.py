"""Identification across a co-simulated system (issue 28, part 3, Co-Simulation components:
:mod:`fmi_adjoint.ssp.problem`, ``identify --ssp``).

The two-mass oscillator of ``test_ssp_master`` split at the spring into two FMUs exported by
fmi-adjoint, with the stiffness of m1's ground spring (``A.k1``) and of the coupling spring
(``B.kc``) as parameters.  Synthetic data of the system outputs ``A.x1`` and ``B.x2`` are made
by the master at the true values (Jacobi, zero-order hold, macro step ``STEP``) with noise of 1 % of
the larger output (seed 0); ``identify --ssp`` from a wrong start recovers both within their standard errors.
The data were made at the same macro step as the fit, so the fit finds the values of the runs
at that step, and the coupling-error guard says that those runs are off the continuous system
by more than the standard errors (``success`` false, exit 1): what a fit to measurements of
the real system would have to be told.

Cost: two exports (6 s cold), then runs of the master of 0.5-1 s each, nearly all of it
starting the two component worker processes (the machine is shared): the identification about
35 runs (17-35 s, marked slow), the gradient test 9 runs (6 s).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fmi_adjoint.costs import Sampler
from fmi_adjoint.data import write_csv
from fmi_adjoint.export import export_fmu
from fmi_adjoint.fmu.differences import FD_REL_STEP
from fmi_adjoint.identify.data_costs import CostOptions, DataFile
from fmi_adjoint.scale import SerialExecutor
from fmi_adjoint.ssp.master import MasterSettings, simulate_system
from fmi_adjoint.ssp.problem import SystemProblem, system_experiment, system_target
from fmi_adjoint.ssp.reading import open_system
from fmi_adjoint.toolchain import c_compiler
from tolerances import FMU_GRADIENT_VS_FD, WITHIN_STD_ERRORS

if c_compiler() is None:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: the FMUs cannot be built", allow_module_level=True)

from test_ssp_master import MODEL_A, MODEL_B, _write_ssp  # noqa: E402 (after the skip: it builds too)

#: A and B of test_ssp_master with the two stiffnesses as parameters.
IDENTIFIED_A = (MODEL_A.replace("stiffness = 1000.0", 'stiffness = "k1"')
                + '\n[parameters]\nk1 = { value = 1000.0, unit = "N/m", bounds = [100.0, 10000.0] }\n')
IDENTIFIED_B = (MODEL_B.replace("stiffness = 500.0", 'stiffness = "kc"')
                + '\n[parameters]\nkc = { value = 500.0, unit = "N/m", bounds = [50.0, 5000.0] }\n')
TRUTH = {"A.k1": 1000.0, "B.kc": 500.0}
START = {"A.k1": 1200.0, "B.kc": 420.0}
STEP, T_END, NOISE = 4e-3, 0.12, 0.01


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    """(folder, SSP file, data file) of the split system and its synthetic measurement."""
    folder = tmp_path_factory.mktemp("ssp_identify")
    for name, text in (("A", IDENTIFIED_A), ("B", IDENTIFIED_B)):
        (folder / f"{name}.toml").write_text(text)
        export_fmu(folder / f"{name}.toml", folder / f"{name}.fmu")  # both interfaces (the ME refusal below)
    ssp = _write_ssp(folder)
    with open_system(ssp) as opened:
        result = simulate_system(opened.structure, opened.archives, T_END, MasterSettings(STEP), values=TRUTH)
    # One noise level for both channels (the Gauss-Newton standard errors pool their residuals).
    sigma = NOISE * max(np.max(np.abs(result.column(name))) for name in ("A.x1", "B.x2"))
    rng = np.random.default_rng(0)
    columns = {name: result.column(name) + sigma * rng.standard_normal(result.times.size) for name in ("A.x1", "B.x2")}
    data = folder / "data.csv"
    write_csv(data, result.times, columns)
    return folder, ssp, data


def _identify(ssp, data, out, *extra):
    from captured_cli import cli

    starts = [f"--set={name}={value}" for name, value in START.items()]
    return cli(["identify", "--ssp", ssp, "--step", STEP, "--params", "A.k1,B.kc", *starts, "--data", data,
                "-o", out, *extra])


@pytest.mark.slow  # about 35 runs of the master: 17-35 s on the shared machine
def test_identify_ssp_recovers_the_truth_within_its_standard_errors(system, tmp_path):
    _, ssp, data = system
    out = tmp_path / "result.json"
    code, _, err = _identify(ssp, data, out)
    result = json.loads(out.read_text())
    for name, truth in TRUTH.items():
        value, se = result["parameters"][name], result["std_errors"][name]
        assert result["initial"][name] == START[name]
        assert abs(value - truth) <= WITHIN_STD_ERRORS * se, (name, value, se)
    assert result["interface"] == "CoSimulation" and result["gradient_method"]["method"] == "fd"
    assert result["integrator"]["macro_step"] == STEP
    # The system's identity, which `apply --system` checks (tests/test_ssp_apply.py).
    assert set(result["system_identity"]["components"]) == {"A", "B"}
    assert set(result["discretization_error"]["parameter_bias"]) == set(TRUTH)
    # the data were made at STEP: the runs at STEP are off the continuous system (module docstring)
    assert code == 1 and not result["success"], err
    warning = next(text for text in result["warnings"] if "coupling error of the macro step" in text)
    assert "--interface me" in warning  # both components offer Model Exchange: the fix without coupling error


def test_the_gradient_is_a_central_difference_of_the_masters_cost(system):
    """The problem's gradient (its stencil run as executor tasks, the FMUs travelling as bytes)
    against central differences by hand of the cost of the master's runs."""
    _, ssp, data = system
    x = np.array([START["A.k1"], START["B.kc"]])
    with open_system(ssp) as opened:
        target = system_target(opened.structure, opened.archives)
        experiment = system_experiment(target, DataFile.from_path(str(data)), {}, name="data", t_end=None,
                                       step=STEP, cost=CostOptions())
        executor = SerialExecutor()
        problem = SystemProblem(opened.structure, opened.archives, [experiment], list(TRUTH), MasterSettings(STEP),
                                executor=executor)
        try:
            gradient = problem.evaluate(x).gradient
        finally:
            executor.close()  # the system the tasks opened from its bytes

        def cost(point) -> float:
            result = simulate_system(opened.structure, opened.archives, experiment.t_end, MasterSettings(STEP),
                                     values=dict(zip(TRUTH, map(float, point))))
            Y = np.column_stack([result.column(c) for c in experiment.cost.channels])
            Y = Sampler.from_grid(result.times, experiment.cost.sample_times).sample(Y)
            return experiment.cost.evaluate(Y, np.zeros(0)).J

        for k in range(2):
            step = np.zeros(2)
            step[k] = FD_REL_STEP * x[k]
            by_hand = (cost(x + step) - cost(x - step)) / (2 * step[k])
            assert abs(gradient[k] - by_hand) <= FMU_GRADIENT_VS_FD * abs(by_hand), (k, gradient[k], by_hand)


@pytest.mark.parametrize("case, message", [
    ("unknown parameter", "component 'A': A.fmu: no real parameter named 'k9'"),
    ("unknown component", "the system has no component 'C'; components: A, B"),
    ("unknown column", "column 'A.x9' matches no output of 'split'. Outputs: A.x1, A.v1, B.force, B.x2"),
    ("with --fmu", "give MODEL, --fmu or --ssp, one of them (--fmu"),
    ("with MODEL", "give MODEL, --fmu or --ssp, one of them (MODEL 'sdof'"),
])
def test_identify_ssp_refusals_are_one_line(system, tmp_path, case, message):
    from captured_cli import cli, error_line

    folder, ssp, data = system
    args = ["identify", "--ssp", ssp, "--step", STEP, "--params", "A.k1,B.kc", "--data", data,
            "-o", tmp_path / "r.json"]
    if case == "unknown parameter":
        args[6] = "A.k9,B.kc"
    elif case == "unknown component":
        args[6] = "C.k1"
    elif case == "unknown column":
        bad = tmp_path / "bad.csv"
        bad.write_text("time,A.x9\n0,0\n0.1,0\n")
        args[8] = bad
    elif case == "with --fmu":
        args += ["--fmu", folder / "A.fmu"]
    elif case == "with MODEL":
        args.insert(1, "sdof")
    code, _, err = cli(args)
    assert code == 2 and message in error_line(err), err
    assert not (tmp_path / "r.json").exists()
