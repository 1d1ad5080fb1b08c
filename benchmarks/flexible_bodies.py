"""Flexible bodies (flexible natural coordinates) against the number of modes: reduction, build, step (issue 25).

The body: a steel beam of 1 m in 40 Euler-Bernoulli elements with lumped mass, reduced by
Craig-Bampton with the tip as interface node and ``n`` = 5, 10, 20 and 40 fixed-interface
modes (``--modes``), in flexible natural coordinates (:class:`fmi_adjoint.mbs.FlexibleBody`:
``12 + 10 (6 + n)`` coordinates), hinged at its root and swinging under gravity.  For each
``n`` one row: ``coords``; ``reduce cpu``: the Craig-Bampton reduction (an empty cache);
``cold cpu``: building the native engine from the system in a fresh process with an empty
build cache (the reduction, the lowering, the structured kernels, the C compiler; CPU seconds
including the compilers); ``warm cpu``: the same from the filled cache; ``C us/step``: CPU
time per step of a forward run (``--steps`` steps of 1e-4 s, best of 2); ``adj/fwd``: the
adjoint gradient of a least-squares cost of the tip's position over the forward run's time
(target: at most 2).

Then the rigid model of the same size: the random tree of spatial bodies of
:mod:`fmi_adjoint.examples.families` with about as many coordinates as the 20-mode body, its
step cost in the same run, and the ratio (issue 25's target: the flexible body's step at most
twice the rigid model's).  Each phase runs in its own process (``_children.py``).

Run: ``python benchmarks/flexible_bodies.py [--modes 5,10,20,40] [--steps 200] [--budget 600]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _children import best_of, build_cache, child_main, cpu_seconds, exponent, run_phases, snapshot_sources

MODES = (5, 10, 20, 40)
STEPS = 200
BUDGET = 600.0
ELEMENTS = 40
#: Issue 25's target: the flexible body's step at most this many times the rigid model's.
TARGET_STEP_RATIO = 2.0
TARGET_ADJOINT_RATIO = 2.0


def beam_system(modes: int):
    from fmi_adjoint import mbs
    from fmi_adjoint.flexible import BeamSection, LumpedMass, ModeCount, beam_model, line_mesh
    from fmi_adjoint.model import Parameter, SimulationSettings

    section = BeamSection(E=2.1e11, G=8.1e10, A=6e-4, Iy=2e-8, Iz=4.5e-8, J=2e-8, rho=7850.0)
    beam = beam_model(line_mesh(1.0, ELEMENTS), section, mass=LumpedMass())
    body = mbs.FlexibleBody("beam", fe=beam.fe, reference_node=1, interface_nodes=(ELEMENTS + 1,),
                            modes=ModeCount(modes), stiffness_factor="EIs", mass_factor="rhos")
    return mbs.MultibodySystem(
        f"flexible_beam_{modes}", parameters=(Parameter("EIs", 1.0), Parameter("rhos", 1.0), Parameter("g", 9.81)),
        bodies=(body,), gravity=(0, "-g", 0),
        markers=(mbs.Marker("pivot", "ground"), mbs.NodeMarker("root_b", "beam", node=1),
                 mbs.NodeMarker("tip", "beam", node=ELEMENTS + 1)),
        joints=(mbs.Revolute("hinge", "pivot", "root_b"),),
        sensors=(mbs.MarkerPosition("tip_pos", "tip", components=("x", "y")),),
        simulation=SimulationSettings(t_end=0.1, step=1e-4, alpha=-0.05))


def model_of(spec: dict):
    if spec["form"] == "rigid":
        from fmi_adjoint.examples.families import family_model

        return family_model("random_tree", spec["size"], 0)
    return beam_system(spec["size"]).to_model()


def child_build(spec: dict) -> dict:
    from fmi_adjoint.engines import NativeEngine

    start, cpu = time.perf_counter(), cpu_seconds()
    reduce_cpu = 0.0
    if spec["form"] == "flexible":
        system = beam_system(spec["size"])
        before = time.process_time()
        _ = system.bodies[0].basis  # the reduction (through the build cache)
        reduce_cpu = time.process_time() - before
        model = system.to_model()
    else:
        model = model_of(spec)
    engine = NativeEngine.build(model, cache=build_cache(spec))
    return {"seconds": time.perf_counter() - start, "cpu": cpu_seconds() - cpu, "reduce": reduce_cpu,
            "n": engine.compiled.n}


def child_measure(spec: dict) -> dict:
    from fmi_adjoint.costs import LeastSquaresCost
    from fmi_adjoint.engines import NativeEngine

    model = model_of(spec)
    engine = NativeEngine.build(model, cache=build_cache(spec))
    compiled = engine.compiled
    step = model.simulation.step
    p = compiled.parameter_vector()
    t_fwd, cpu_fwd, traj = best_of(2, lambda: engine.simulate(p, t_end=spec["steps"] * step, step=step))
    y = np.asarray(traj.outputs())
    cost = LeastSquaresCost(np.asarray(traj.t), np.zeros_like(y), tuple(compiled.output_names))
    t_adj, _, _ = best_of(1, lambda: engine.adjoint_gradient(traj, cost))
    return {"cpu_step": cpu_fwd / traj.n_steps, "adjoint_ratio": t_adj / t_fwd}


def measure(form: str, size: int, tmp: Path, sources: str, steps: int, budget: float) -> dict | str:
    spec = {"form": form, "size": size, "cache": str(tmp / f"{form}_{size}"), "steps": steps, "sources": sources}
    phases = run_phases(__file__, spec, budget)
    if isinstance(phases, str):
        return phases
    cold, warm, runs = phases
    return {"n": cold["n"], "reduce": cold["reduce"], "cold": cold["cpu"], "warm": warm["cpu"], **runs}


HEADER = (f"{'model':<18} {'coords':>6} {'reduce cpu':>10} {'cold cpu':>8} {'warm cpu':>8} {'C us/step':>9} "
          f"{'adj/fwd':>7}")


def row(name: str, r: dict) -> str:
    return (f"{name:<18} {r['n']:>6} {r['reduce']:>10.2f} {r['cold']:>8.2f} {r['warm']:>8.2f} "
            f"{1e6 * r['cpu_step']:>9.1f} {r['adjoint_ratio']:>7.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default=",".join(map(str, MODES)), help="modes per body, default %(default)s")
    parser.add_argument("--steps", type=int, default=STEPS, help="steps of a measured run (default %(default)d)")
    parser.add_argument("--budget", type=float, default=BUDGET, help="seconds per model (default %(default)g)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(args.child, {"build": child_build, "measure": child_measure})
    try:
        modes = [int(s) for s in args.modes.split(",") if s.strip()]
    except ValueError:
        parser.error("--modes: whole numbers separated by commas")
    print(f"engine: fmi_adjoint.engines.NativeEngine (C), HHT, {args.steps} steps per run; {os.cpu_count()} CPUs; "
          f"load average at start {', '.join(f'{x:.1f}' for x in os.getloadavg())}; Python {sys.version.split()[0]}")
    print(HEADER, flush=True)
    status = 0
    results: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="fmi_adjoint_flexible_bench_") as tmp:
        sources = snapshot_sources(Path(tmp) / "src")
        for n in modes:
            result = measure("flexible", n, Path(tmp), sources, args.steps, args.budget)
            if isinstance(result, str):
                print(f"{'fncf_' + str(n) + '_modes':<18} {result}", flush=True)
                status = 1
                continue
            results[n] = result
            print(row(f"fncf_{n}_modes", result), flush=True)
        reference = results.get(20)
        if reference is not None:
            rigid = measure("rigid", reference["n"], Path(tmp), sources, args.steps, args.budget)
            if isinstance(rigid, str):
                print(f"{'rigid tree':<18} {rigid}", flush=True)
                status = 1
            else:
                rigid["reduce"] = 0.0
                print(row(f"random_tree_{rigid['n']}", rigid), flush=True)
                ratio = reference["cpu_step"] / rigid["cpu_step"]
                verdict = "meets" if ratio <= TARGET_STEP_RATIO else "misses"
                print(f"20 modes: {ratio:.2f}x the step of a rigid tree of {rigid['n']} coordinates ({verdict} the "
                      f"target <= {TARGET_STEP_RATIO:g}x)")
    if len(results) >= 2:
        ns = sorted(results)
        coords = [results[n]["n"] for n in ns]
        print(f"growth over {coords[0]}..{coords[-1]} coordinates: cold build ~ n^"
              f"{exponent(coords, [results[n]['cold'] for n in ns]):.2f}, C us/step ~ n^"
              f"{exponent(coords, [results[n]['cpu_step'] for n in ns]):.2f}")
        worst = max(results[n]["adjoint_ratio"] for n in ns)
        verdict = "meets" if worst <= TARGET_ADJOINT_RATIO else "misses"
        print(f"adjoint gradient / forward run at most {worst:.2f} ({verdict} the target <= {TARGET_ADJOINT_RATIO:g})")
    print(f"load average at the end {', '.join(f'{x:.1f}' for x in os.getloadavg())} (a shared machine: the "
          "CPU times are upper bounds)")
    return status


if __name__ == "__main__":
    sys.exit(main())
