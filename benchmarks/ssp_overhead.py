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


if __name__ == "__main__":
    main()
