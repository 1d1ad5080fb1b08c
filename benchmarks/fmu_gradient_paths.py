"""Gradient cost of each FMU import path relative to one simulation of the same FMU,
measured in one run (issue 6).

  adjoint      engine_mount exported as an FMI 2 FMU (4 parameters): the native discrete
               adjoint on the embedded model, against one simulation of that FMU through
               fmpy (doStep) and against one in-process simulation of the embedded model;
  sensitivity  the hand-written Van der Pol Model Exchange FMU (3 parameters): exact
               sensitivities of the adaptive Radau IIA run (stage Jacobians from the FMU's
               columns, parameter partials from replays), against one Radau run of the FMU
               (first evaluation, with the column probes, and a later one), and against
               central differences of whole runs (what --gradient auto weighs);
  fd           the hand-written Duffing Co-Simulation FMU (3 parameters): central finite
               differences in a process pool, against one simulation (doStep).

Each time is the best of 3.  Run:  .venv/bin/python benchmarks/fmu_gradient_paths.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from fmi_adjoint.costs import LeastSquaresCost
from fmi_adjoint.examples import EXAMPLES_DIR, example_path
from fmi_adjoint.fmu.archive import open_fmu
from fmi_adjoint.export import export_fmu
from fmi_adjoint.fmu.experiment import FmuExperiment
from fmi_adjoint.fmu.problem import fmu_problem
from _timing import best_of  # benchmarks/_timing.py (the script folder is on sys.path)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from handwritten_fmus import build_fmu  # noqa: E402  (the tests' FMU builder)

REPEATS = 3


def _line(label: str, seconds: float, reference: float) -> None:
    print(f"  {label:52s} {seconds:8.3f} s   {seconds / reference:7.2f} x")


def adjoint_path(folder: Path) -> None:
    from fmi_adjoint.data import read_csv

    fmu = export_fmu(example_path("engine_mount"), folder / "engine_mount.fmu", fmi_version=2)
    data = read_csv(EXAMPLES_DIR / "engine_mount_measured.csv")
    names = ["c_E1", "c_E2", "d_E", "d_H2"]
    with open_fmu(fmu) as archive:
        exp = FmuExperiment(LeastSquaresCost(data.times, data.values, data.columns), t_end=float(data.times[-1]),
                            step=1e-4)
        problem, choice = fmu_problem(archive, [exp], names)
        fmu_sim, _ = best_of(REPEATS, lambda: _fmpy_run(archive, data.times[-1], 1e-4, ["a1"]))
        python_sim, _ = best_of(REPEATS, lambda: problem.cost(problem.start))
        grad, _ = best_of(REPEATS, lambda: problem.evaluate(problem.start, "adjoint"))
    print(f"adjoint path: {fmu.name}, {len(names)} parameters, {data.times.size} samples ({choice.method})")
    _line("one FMU simulation through fmpy (doStep every 1e-4 s)", fmu_sim, fmu_sim)
    _line("one in-process simulation of the embedded model", python_sim, fmu_sim)
    _line("adjoint gradient (simulation + backward sweep)", grad, fmu_sim)
    print(f"  gradient / in-process simulation: {grad / python_sim:.2f}")


def _fmpy_run(archive, t_end, step, outputs):
    from fmpy import simulate_fmu

    return simulate_fmu(str(archive.directory), validate=False, stop_time=float(t_end), output_interval=step,
                        output=outputs, model_description=archive.description)


def sensitivity_path(folder: Path) -> None:
    fmu = build_fmu("van_der_pol_me", folder)
    t = np.linspace(0.0, 10.0, 1001)
    with open_fmu(fmu) as archive:
        truth = FmuExperiment(LeastSquaresCost(t, np.zeros((t.size, 1)), ("x0",)), t_end=10.0, step=1e-2,
                              values={"mu": 1.5})
        problem, _ = fmu_problem(archive, [truth], ["mu"], gradient="sensitivity")
        data = problem.sampled_outputs(0, np.array([1.5]))
        problem.close()
        exp = FmuExperiment(LeastSquaresCost(t, data, ("x0",)), t_end=10.0, step=1e-2)
        names = ["mu", "x0_start", "x1_start"]
        problem, choice = fmu_problem(archive, [exp], names)
        first, _ = best_of(1, lambda: problem.evaluate(problem.start))
        sim, _ = best_of(REPEATS, lambda: problem.cost(problem.start))
        grad, _ = best_of(REPEATS, lambda: problem.evaluate(problem.start))
        fd, _ = best_of(1, lambda: problem.evaluate(problem.start, "fd"))
        problem.close()
    print(f"sensitivity path: {fmu.name}, {len(names)} parameters, 1001 steps ({choice.method})")
    _line("one simulation (Radau IIA on the FMU, default tolerances)", sim, sim)
    _line("sensitivity gradient, first call (with column probes)", first, sim)
    _line("sensitivity gradient", grad, sim)
    _line(f"finite differences in a pool of {os.cpu_count()} processes", fd, sim)


def fd_path(folder: Path) -> None:
    fmu = build_fmu("duffing_cs", folder)
    t = np.linspace(0.0, 10.0, 1001)
    with open_fmu(fmu) as archive:
        names = ["delta", "alpha", "beta"]
        exp = FmuExperiment(LeastSquaresCost(t, np.zeros((t.size, 2)), ("x", "v")), t_end=10.0, step=1e-2)
        problem, choice = fmu_problem(archive, [exp], names)
        sim, _ = best_of(REPEATS, lambda: problem.cost(problem.start))
        problem.evaluate(problem.start)  # start the worker pool
        grad, _ = best_of(REPEATS, lambda: problem.evaluate(problem.start))
        serial, _ = best_of(1, lambda: _serial(archive, exp, names))
        problem.close()
    print(f"fd path: {fmu.name}, {len(names)} parameters, 1001 communication points ({choice.method})")
    _line("one simulation (doStep)", sim, sim)
    _line(f"central differences, pool of {os.cpu_count()} processes (warm)", grad, sim)
    _line("central differences, serial", serial, sim)


def _serial(archive, exp, names):
    problem, _ = fmu_problem(archive, [exp], names, workers=1)
    try:
        return problem.evaluate(problem.start)
    finally:
        problem.close()


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="fmi_adjoint_bench_") as tmp:
        folder = Path(tmp)
        adjoint_path(folder)
        sensitivity_path(folder)
        fd_path(folder)


if __name__ == "__main__":
    main()
