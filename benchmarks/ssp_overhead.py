"""The co-simulation master's overhead per macro step and per component (issue 28), measured in one run.

The components are the hand-written ``fmus/input_ramp_cs`` (FMI 2.0 CS, der(x) = k u integrated
exactly in one line of C per ``doStep``, no direct feedthrough): what is measured is the master
and its worker round trips, not the FMUs.  Rings of 2 and 4 of them (C1.x -> C2.u -> ... -> C1.u,
C1.x_start = 1) run through ``simulate_system`` (:mod:`fmi_adjoint.ssp.master`) with Jacobi (the
components step in parallel, one request each per macro step) and Gauss-Seidel (one after another),
zero-order hold, for N and 2N macro steps.  From the differences:

* per macro step: (T(2N) - T(N)) / N, the cost of one more step of the whole system;
* per component and macro step: (per step with 4 components - per step with 2) / 2;
* the fixed cost of a run (workers started, FMUs instantiated and initialized, the coupling
  made consistent at the start): T(N) - N x per step;
* the floor: one FMU's ``run_cs`` in one request (its worker steps it through the whole grid,
  no round trip per step), per step by the same difference (of runs 50 times longer: a step
  costs about a microsecond there).

Wall seconds are best of 5; CPU seconds are those of the master's process alone (the master's
own work per step: packing requests, reading replies, coupling) and of the master with its
workers (counted when they end).  The machine may be shared: compare figures of one run only.

Model Exchange systems (:mod:`fmi_adjoint.ssp.monolithic`): the two-mass oscillator of
``tests/test_ssp_monolithic.py`` split into two Model Exchange FMUs exported by fmi-adjoint and
coupled in one worker, against the same oscillator exported as one Model Exchange FMU (a
one-component system: the same integrator and Python loop, no coupling), over 1 s at rtol 1e-8,
without and with the sensitivities to its two stiffnesses; best of 3.  Per right-hand side: the
run's wall time over its right-hand sides (the coupled one: both FMUs' calls and the coupling pass).
And a mixed system (the same split, A as Co-Simulation, B as Model Exchange stepped by the master
as one part, integrated over each macro step) against both halves as Co-Simulation, per macro step.
Run:
    .venv/bin/python benchmarks/ssp_overhead.py
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _children import cpu_seconds  # benchmarks/_children.py (the script folder is on sys.path)
from fmi_adjoint.fmu.archive import open_fmu
from fmi_adjoint.fmu.session import FmuSession
from fmi_adjoint.ssp.master import GaussSeidel, Jacobi, MasterSettings, simulate_system
from fmi_adjoint.ssp.structure import Component, Connection, Connector, Endpoint, SystemStructure

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from handwritten_fmus import build_fmu  # noqa: E402  (the tests' FMU builder)

REPEATS = 5
STEP = 1e-3
N = 2000  # macro steps of the shorter run (the longer: 2N)
#: Steps of the floor's shorter run (its steps cost about a microsecond: many are needed to see them).
N_FLOOR = 100_000
SIZES = (2, 4)
CONNECTORS = (Connector("u", "input"), Connector("x", "output"))


def ring(fmu: Path, n: int) -> SystemStructure:
    """``n`` copies of ``fmu``, each one's x driving the next one's u, the last the first's."""
    names = [f"C{k + 1}" for k in range(n)]
    components = tuple(Component(name, fmu, fmu.name, "CoSimulation", CONNECTORS) for name in names)
    connections = tuple(Connection(Endpoint(a, "x"), Endpoint(b, "u")) for a, b in zip(names, names[1:] + names[:1]))
    return SystemStructure(f"ring{n}", f"ring{n}.ssd", (), components, connections)


def measure(run, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """(per step, fixed) of ``run(count)``, from runs of ``steps`` and ``2 * steps``: each an array
    (wall, the master's CPU, the CPU of the master and its workers).  The two lengths alternate,
    ``REPEATS`` times each, so that a change of the machine's load hits both; per length the
    fastest (by wall time) counts.  Per step: (long - short) / steps; fixed: short - steps x that."""
    best = {steps: (np.inf, 0.0, 0.0), 2 * steps: (np.inf, 0.0, 0.0)}
    for _ in range(REPEATS):
        for count in best:
            wall, own, total = time.perf_counter(), time.process_time(), cpu_seconds()
            run(count)
            best[count] = min(best[count], (time.perf_counter() - wall, time.process_time() - own,
                                            cpu_seconds() - total))
    short, long = np.array(best[steps]), np.array(best[2 * steps])
    step = (long - short) / steps
    return step, short - steps * step


def _run_system(structure: SystemStructure, archives: dict, settings: MasterSettings, steps: int) -> None:
    simulate_system(structure, archives, steps * STEP, settings, values={"C1.x_start": 1.0})


def master_runs(fmu: Path, archive) -> dict:
    """{(order name, components): (per step, fixed)} of the master, each (wall, own CPU, total CPU)."""
    out = {}
    for order in (Jacobi(), GaussSeidel()):
        for n in SIZES:
            structure, archives = ring(fmu, n), {f"C{k + 1}": archive for k in range(n)}
            settings = MasterSettings(STEP, order)

            out[(order.name, n)] = measure(functools.partial(_run_system, structure, archives, settings), N)
    return out


def floor_runs(archive) -> tuple[np.ndarray, np.ndarray]:
    """(per step, fixed) of one FMU's ``run_cs`` in one request, each (wall, own CPU, total CPU)."""
    def run(steps: int) -> None:
        session = FmuSession(archive, "CoSimulation")
        try:
            session.run_cs({"x_start": 1.0}, STEP * np.arange(steps + 1), ["x"])
        finally:
            session.close()

    return measure(run, N_FLOOR)


def _best(run, repeats: int = 3) -> tuple[float, object]:
    """(fastest wall seconds, its result) of ``repeats`` calls of ``run()``."""
    best: tuple[float, object] = (np.inf, None)
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        best = min(best, (time.perf_counter() - start, result), key=lambda pair: pair[0])
    return best


def model_exchange_runs(folder: Path) -> None:
    """The Model Exchange system and the mixed system (module docstring), printed."""
    from fmi_adjoint.export import export_fmu
    from fmi_adjoint.fmu.experiment import Tolerances
    from fmi_adjoint.ssp.monolithic import simulate_monolithic
    from test_ssp_master import MODEL_MONOLITHIC
    from test_ssp_monolithic import ME_A, ME_B, _split

    exported = {}
    for name, text, interface in (("A", ME_A, "me"), ("B", ME_B, "me"), ("M", MODEL_MONOLITHIC, "me"),
                                  ("Acs", ME_A, "cs"), ("Bcs", ME_B, "cs")):
        (folder / f"{name}.toml").write_text(text)
        export_fmu(folder / f"{name}.toml", folder / f"{name}.fmu", interface=interface)
        exported[name] = open_fmu(folder / f"{name}.fmu")
    try:
        split = _split({"A": exported["A"], "B": exported["B"]})
        one = SystemStructure("one", "one.ssd", (), (Component("M", exported["M"].path, "M.fmu", "any", (
            Connector("x1", "output"), Connector("x2", "output"))),), ())
        tol, times, t_end = Tolerances(rtol=1e-8, atol=1e-10), np.linspace(0.0, 1.0, 101), 1.0
        rows = []
        for label, structure, archives, names in (
                ("split: 2 FMUs coupled", split, {"A": exported["A"], "B": exported["B"]}, ("A.k1", "B.kc")),
                ("one FMU (no coupling)", one, {"M": exported["M"]}, ())):
            for sensitivities in ((), names):
                if not sensitivities and rows and rows[-1][0] == label:
                    continue
                wall, run = _best(functools.partial(simulate_monolithic, structure, archives, t_end, tolerances=tol,
                                                    times=times, sensitivities=sensitivities))
                rows.append((label, len(sensitivities), wall, run.info["steps"], run.info["rhs_evaluations"]))
        print(f"Model Exchange systems: the two-mass oscillator over {t_end:g} s, rtol {tol.rtol:g}, one worker; wall: "
              "best of 3")
        print("  system                     sensitivities   wall [s]   steps   right-hand sides   wall per rhs [us]")
        for label, count, wall, steps, rhs in rows:
            print(f"  {label:26s} {count:13d}   {wall:8.3f}   {steps:5d}   {rhs:16d}   {1e6 * wall / rhs:17.1f}")
        split_rhs = rows[0][2] / rows[0][4]
        one_rhs = next(r[2] / r[4] for r in rows if r[0].startswith("one"))
        print(f"  a coupled right-hand side costs {split_rhs / one_rhs:.2f} x the one FMU's; the sensitivities of 2 "
              f"parameters cost {rows[1][2] / rows[0][2]:.2f} x the run without them (the split system)")
        mixed = {"A": exported["Acs"], "B": exported["B"]}
        both_cs = {"A": exported["Acs"], "B": exported["Bcs"]}
        for label, archives in (("mixed: A CS, B ME part", mixed), ("both Co-Simulation", both_cs)):
            structure = SystemStructure(split.name, split.source, split.connectors, tuple(
                Component(c.name, archives[c.name].path, c.source, "any", c.connectors) for c in split.components),
                split.connections)
            settings = MasterSettings(1e-3, model_exchange=tol)
            short, _ = _best(functools.partial(simulate_system, structure, archives, 0.2, settings))
            long, _ = _best(functools.partial(simulate_system, structure, archives, 0.4, settings))
            print(f"  {label:26s} per macro step (1 ms, Jacobi, hold) {1e6 * (long - short) / 200:8.1f} us wall "
                  f"(runs of 200 and 400 steps)")
    finally:
        for archive in exported.values():
            archive.close()


def main() -> None:
    us = 1e6
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="fmi_adjoint_bench_") as tmp:
        fmu = build_fmu("input_ramp_cs", Path(tmp))
        with open_fmu(fmu) as archive:
            floor, floor_fixed = floor_runs(archive)
            runs = master_runs(fmu, archive)
    print(f"rings of input_ramp_cs FMUs (FMI 2.0 CS), macro step {STEP:g} s, runs of {N} and {2 * N} macro steps; "
          "wall: best of 5; CPU: the master's process / with its workers")
    print(f"load average (1 min) {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, on {os.cpu_count()} "
          "CPUs: on a shared machine the wall times vary (a fixed cost can come out negative), the CPU times less")
    print("                         per macro step                          fixed per run")
    print("  order         comps    wall [us]   CPU master [us]   CPU all [us]    wall [ms]   CPU all [ms]")
    for (order, n), (step, fixed) in runs.items():
        print(f"  {order:13s} {n:5d}   {us * step[0]:10.1f}   {us * step[1]:15.1f}   {us * step[2]:12.1f}   "
              f"{1e3 * fixed[0]:10.1f}   {1e3 * fixed[2]:12.1f}")
    print(f"  floor: run_cs    1   {us * floor[0]:10.1f}   {us * floor[1]:15.1f}   {us * floor[2]:12.1f}   "
          f"{1e3 * floor_fixed[0]:10.1f}   {1e3 * floor_fixed[2]:12.1f}   (one FMU, one request for all steps; "
          f"runs of {N_FLOOR} and {2 * N_FLOOR} steps)")
    print("per component and macro step ((4 components - 2) / 2), and over the floor (minus run_cs per step):")
    small, large = SIZES
    for order in ("Jacobi", "Gauss-Seidel"):
        component = (runs[(order, large)][0] - runs[(order, small)][0]) / (large - small)
        print(f"  {order:13s}  wall {us * component[0]:8.1f} us (over the floor {us * (component[0] - floor[0]):8.1f})"
              f"   CPU master {us * component[1]:8.1f} us   CPU all {us * component[2]:8.1f} us "
              f"(over the floor {us * (component[2] - floor[2]):8.1f})")
    jacobi, seidel = runs[("Jacobi", large)][0][0], runs[("Gauss-Seidel", large)][0][0]
    print(f"master per macro step over {large} x the floor ({large} components): Jacobi "
          f"{jacobi / (large * floor[0]):.0f} x, Gauss-Seidel {seidel / (large * floor[0]):.0f} x (wall)")
    with tempfile.TemporaryDirectory(prefix="fmi_adjoint_bench_") as tmp:
        model_exchange_runs(Path(tmp))


if __name__ == "__main__":
    main()
