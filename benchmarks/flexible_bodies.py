"""Flexible bodies (natural coordinates, floating frame) against the modes: reduction, build, step (issue 25).

The body: a steel beam of 1 m in 40 Euler-Bernoulli elements with lumped mass, reduced by
Craig-Bampton with the tip as interface node and ``n`` = 5, 10, 20 and 40 fixed-interface
modes (``--modes``), in flexible natural coordinates (:class:`fmi_adjoint.mbs.FlexibleBody`:
``12 + 10 (6 + n)`` coordinates), hinged at its root and swinging under gravity.  For each
``n`` one row: ``coords``; ``reduce cpu``: the Craig-Bampton reduction (an empty cache);
``cold cpu``: building the native engine from the system in a fresh process with an empty
build cache (the reduction, the lowering, the structured kernels, the C compiler; CPU seconds
including the compilers); ``warm cpu``: the same in another fresh process from the filled
cache, through :func:`fmi_adjoint.warm.prepare_model` as the command line does (the
interpreter's start and imports not included; the beam's system, FE matrices included, is keyed
by its canonical description, :func:`fmi_adjoint.warm.description_text`, so a warm start does not
lower it again); ``C us/step``: CPU
time per step of a forward run (``--steps`` steps of 1e-4 s, best of 2); ``adj/fwd``: the
adjoint gradient of a least-squares cost of the tip's position over the forward run's time
(target: at most 2).

Then the rigid model of the same size: the random tree of spatial bodies of
:mod:`fmi_adjoint.examples.families` with about as many coordinates as the 20-mode body, its
step cost in the same run, and the ratio (issue 25's target: the flexible body's step at most
twice the rigid model's).  Each phase runs in its own process (``_children.py``) with a
private build cache; the model files of a phase are written next to that cache, not into it (a
cache folder holding other files is refused, and every build would then be cold).

The suspension (``--suspension``, default 5,10,20,40): the bundled ``macpherson_flexible``
(Vanpaemel et al., seed 003, Sec. 5.1: flexible control arm and knuckle) with ``n`` normal
modes per body (the toml's ``modes``; the static modes of its interface nodes come on top:
6 + n for the arm, 18 + n for the knuckle), the same columns (``reduce cpu``: reading the
model file, reducing both bodies and lowering, the cold :func:`~fmi_adjoint.warm.prepare_model`;
``warm cpu``: :func:`~fmi_adjoint.warm.prepare_model` on the filled cache, which neither reads
the meshes again nor lowers, and the engine from the cache; a 3 s run has 3000 steps,
``--steps`` of them are timed), then the
rigid ``macpherson`` (37 coordinates) and a rigid random tree with as many coordinates as the
suspension of 20 modes, and its ratio; then the 20-mode suspension and that tree again with
modified Newton (``[simulation] newton = "modified"``: the suspension's constant mass and
stiffness keep its iteration matrix nearly constant), and the ratios of the suspension's step to
the tree's full- and modified-Newton steps.  Last, at the smallest mode count, their Table 1: the
gradient of the least-squares cost of the bundled measurement (``macpherson_data``) at the
start values over the first ``--table-span`` seconds (default 0.5; theirs 3), scaled by the
bounds as their Sec. 5.2 (``dJ/dx_i (max_i - min_i) / 2``), by central differences (second
order, relative step 1e-3) and by the adjoint, and the cost of
the adjoint gradient in forward runs for 1, 5 and 13 parameters (their statement: about three
forward runs, independent of the number of parameters).

The same beam in the floating frame of reference (``--ffrf``, default 5,10,20,40:
:class:`fmi_adjoint.mbs.FloatingFrameBody`, ``7 + n`` coordinates with ``n`` the modes plus the
tip's six static modes), the same columns: its mass matrix is one piece of the kinetic energy per
mode and per pair of modes, four component types at any ``n``, so the cold build grows with the
instances only; then the 20-mode beam with modified Newton.

Run: ``python benchmarks/flexible_bodies.py [--modes 5,10,20,40] [--ffrf 5,10,20,40]
[--suspension 5,10,20,40] [--table-span 0.5] [--steps 200] [--budget 600]`` (``--modes ''``
skips the beam, ``--ffrf ''`` its floating frame).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _children import (best_of, build_cache, child_main, cpu_seconds, exponent, run_phases, snapshot_sources,
                       step_and_adjoint)

MODES = (5, 10, 20, 40)
STEPS = 200
BUDGET = 600.0
ELEMENTS = 40
#: Issue 25's target: the flexible body's step at most this many times the rigid model's.
TARGET_STEP_RATIO = 2.0
TARGET_ADJOINT_RATIO = 2.0
#: Seconds of the bundled measurement in the suspension's Table 1 (theirs: 3 s; 26 + 8 runs).
TABLE_SPAN = 0.5


def beam_system(modes: int, floating_frame: bool = False):
    """The beam of the module docstring, in flexible natural coordinates or (``floating_frame``)
    in the floating frame of reference."""
    from fmi_adjoint import mbs
    from fmi_adjoint.flexible import BeamSection, LumpedMass, ModeCount, beam_model, line_mesh
    from fmi_adjoint.model import Parameter, SimulationSettings

    section = BeamSection(E=2.1e11, G=8.1e10, A=6e-4, Iy=2e-8, Iz=4.5e-8, J=2e-8, rho=7850.0)
    beam = beam_model(line_mesh(1.0, ELEMENTS), section, mass=LumpedMass())
    form = mbs.FloatingFrameBody if floating_frame else mbs.FlexibleBody
    body = form("beam", fe=beam.fe, reference_node=1, interface_nodes=(ELEMENTS + 1,),
                modes=ModeCount(modes), stiffness_factor="EIs", mass_factor="rhos")
    return mbs.MultibodySystem(
        f"{'ffrf' if floating_frame else 'flexible'}_beam_{modes}",
        parameters=(Parameter("EIs", 1.0), Parameter("rhos", 1.0), Parameter("g", 9.81)),
        bodies=(body,), gravity=(0, "-g", 0),
        markers=(mbs.Marker("pivot", "ground"), mbs.NodeMarker("root_b", "beam", node=1),
                 mbs.NodeMarker("tip", "beam", node=ELEMENTS + 1)),
        joints=(mbs.Revolute("hinge", "pivot", "root_b"),),
        sensors=(mbs.MarkerPosition("tip_pos", "tip", components=("x", "y")),),
        simulation=SimulationSettings(t_end=0.1, step=1e-4, alpha=-0.05))


def suspension_file(modes: int, folder: Path) -> Path:
    """``macpherson_flexible.toml`` with ``modes`` normal modes per body, and its mesh files,
    copied into ``folder``."""
    from fmi_adjoint.examples import example_path

    source = example_path("macpherson_flexible")
    folder.mkdir(parents=True, exist_ok=True)
    for mesh in source.parent.glob("macpherson_flexible_*.*"):
        if mesh.suffix in (".csv", ".mtx"):
            (folder / mesh.name).write_bytes(mesh.read_bytes())
    text = source.read_text()
    assert text.count("\nmodes = 2\n") == 2, "the suspension's mode counts moved"
    target = folder / f"macpherson_flexible_{modes}.toml"
    target.write_text(text.replace("\nmodes = 2\n", f"\nmodes = {modes}\n"))
    return target


def model_source(spec: dict):
    """What :func:`~fmi_adjoint.warm.prepare_model` is given for ``spec``, as the command line
    gives it a model file: the suspension's and the rigid models' files (written next to the
    size's cache, not into it), the beam's multibody system."""
    from fmi_adjoint.examples import example_path

    if spec["form"] == "rigid":
        from fmi_adjoint.examples.families import family_toml

        path = Path(spec["cache"] + ".toml")
        if not path.exists():
            path.write_text(family_toml("random_tree", spec["size"], 0), encoding="utf-8")
        return path
    if spec["form"] == "macpherson":
        return example_path("macpherson")
    if spec["form"] == "suspension":
        return suspension_file(spec["size"], Path(spec["cache"] + "_model"))
    return beam_system(spec["size"], floating_frame=spec["form"] == "ffrf")


def child_build(spec: dict) -> dict:
    """A cold (phase ``build``) or warm (phase ``warm``) build in a fresh process, through
    :func:`~fmi_adjoint.warm.prepare_model` as the command line (module docstring)."""
    from fmi_adjoint.engines import NativeEngine
    from fmi_adjoint.warm import prepare_model

    source = model_source(spec)
    start, cpu = time.perf_counter(), cpu_seconds()
    reduce_cpu = 0.0
    if spec["phase"] == "build" and spec["form"] in ("flexible", "ffrf"):
        before = time.process_time()
        _ = source.bodies[0].basis  # the reduction (through the build cache)
        reduce_cpu = time.process_time() - before
    before = time.process_time()
    model = prepare_model(source, cache=build_cache(spec))
    if spec["phase"] == "build" and spec["form"] == "suspension":
        reduce_cpu = time.process_time() - before  # a cold start reads the file and reduces its flexible bodies
    engine = NativeEngine.build(model, cache=build_cache(spec))
    return {"seconds": time.perf_counter() - start, "cpu": cpu_seconds() - cpu, "reduce": reduce_cpu,
            "n": engine.compiled.n}


def engine_of(spec: dict):
    """The native engine of ``spec`` from the filled cache (the measuring phases)."""
    from fmi_adjoint.engines import NativeEngine
    from fmi_adjoint.warm import prepare_model

    return NativeEngine.build(prepare_model(model_source(spec), cache=build_cache(spec)), cache=build_cache(spec))


def child_measure(spec: dict) -> dict:
    return step_and_adjoint(engine_of(spec), spec["steps"], spec.get("newton"))


def child_table_1(spec: dict) -> dict:
    """Their Table 1 at the start values, and the adjoint's cost against the number of parameters."""
    from fmi_adjoint import Experiment, IdentificationProblem, LeastSquaresCost
    from fmi_adjoint.examples.macpherson_data import CHANNELS, NAMES, noisy_measurement

    engine = engine_of(spec)
    times, data = noisy_measurement()
    kept = times <= spec["span"]
    span = float(times[kept][-1])
    experiment = Experiment(engine.compiled, LeastSquaresCost(times[kept], data[kept], CHANNELS), name="suspension",
                            engine=engine, t_end=span)
    t_fwd, _, _ = best_of(1, lambda: engine.simulate(t_end=span))
    ratios = {}
    for count in (1, 5, len(NAMES)):
        problem = IdentificationProblem([experiment], NAMES[:count])
        t_adj, _, _ = best_of(1, lambda: problem.evaluate(problem.start, "adjoint"))  # noqa: B023
        ratios[count] = t_adj / t_fwd
    problem = IdentificationProblem([experiment], NAMES)
    adjoint = problem.evaluate(problem.start, "adjoint").gradient
    fd = problem.finite_differences(problem.start, 1e-3, order=2)
    half = (np.asarray(problem.upper) - np.asarray(problem.lower)) / 2
    return {"names": list(NAMES), "start": problem.start.tolist(), "lower": list(map(float, problem.lower)),
            "upper": list(map(float, problem.upper)), "fd": (fd * half).tolist(), "adjoint": (adjoint * half).tolist(),
            "ratios": ratios, "forward": t_fwd, "span": span}


def print_table_1(r: dict) -> None:
    print(f"Table 1 (Vanpaemel et al.): gradient at the start values over the first {r['span']:g} s of the "
          "measurement, scaled by the bounds (dJ/dx (max - min) / 2)")
    print(f"{'parameter':<9} {'start':>9} {'min':>9} {'max':>9} {'central diff.':>14} {'adjoint':>14} {'adj/FD':>12}")
    for name, x, lo, hi, fd, adj in zip(r["names"], r["start"], r["lower"], r["upper"], r["fd"], r["adjoint"]):
        print(f"{name:<9} {x:>9.4g} {lo:>9.4g} {hi:>9.4g} {fd:>14.6e} {adj:>14.6e} {adj / fd:>12.9f}")
    counts = ", ".join(f"{count} parameters {ratio:.2f}" for count, ratio in r["ratios"].items())
    print(f"adjoint gradient (forward run + adjoint) / forward run ({r['forward']:.2f} s): {counts} (theirs: about 3, "
          "independent of the number of parameters)")


def measure(form: str, size: int, tmp: Path, sources: str, steps: int, budget: float,
            phases: tuple[str, ...] = ("build", "warm", "measure"), span: float = 0.0,
            newton: str | None = None) -> dict | str:
    spec = {"form": form, "size": size, "cache": str(tmp / f"{form}_{size}"), "steps": steps, "sources": sources,
            "span": span, "newton": newton}
    phases = run_phases(__file__, spec, budget, phases)
    if isinstance(phases, str):
        return phases
    if len(phases) == 1:
        return phases[0]
    cold, warm, runs = phases
    return {"n": cold["n"], "reduce": cold["reduce"], "cold": cold["cpu"], "warm": warm["cpu"], **runs}


HEADER = (f"{'model':<18} {'coords':>6} {'reduce cpu':>10} {'cold cpu':>8} {'warm cpu':>8} {'C us/step':>9} "
          f"{'adj/fwd':>7}")


def row(name: str, r: dict) -> str:
    return (f"{name:<18} {r['n']:>6} {r['reduce']:>10.2f} {r['cold']:>8.2f} {r['warm']:>8.2f} "
            f"{1e6 * r['cpu_step']:>9.1f} {r['adjoint_ratio']:>7.2f}")


def measured_rows(form: str, label: str, modes: list[int], tmp: Path, sources: str, steps: int,
                  budget: float) -> tuple[dict[int, dict], int]:
    """One printed row per mode count of ``form`` (``label`` formatted with it): the results
    that finished, and 1 if any did not."""
    results: dict[int, dict] = {}
    status = 0
    for n in modes:
        result = measure(form, n, tmp, sources, steps, budget)
        if isinstance(result, str):
            print(f"{label.format(n):<18} {result}", flush=True)
            status = 1
            continue
        results[n] = result
        print(row(label.format(n), result), flush=True)
    return results, status


def growth(results: dict[int, dict]) -> str:
    """How the cold build and the step grow with the coordinates of ``results`` (two or more rows)."""
    ns = sorted(results)
    coords = [results[n]["n"] for n in ns]
    return (f"growth over {coords[0]}..{coords[-1]} coordinates: cold build ~ n^"
            f"{exponent(coords, [results[n]['cold'] for n in ns]):.2f}, C us/step ~ n^"
            f"{exponent(coords, [results[n]['cpu_step'] for n in ns]):.2f}")


def floating_frame_rows(modes: list[int], steps: int, budget: float) -> int:
    """The beam in the floating frame of reference (:class:`fmi_adjoint.mbs.FloatingFrameBody`,
    ``7 + n`` coordinates): the same columns; its mass matrix is one piece of the kinetic energy
    per mode and per pair of modes, four component types at any ``n``."""
    print(f"{'floating frame':<18}{HEADER[18:]}", flush=True)
    with tempfile.TemporaryDirectory(prefix="fmi_adjoint_ffrf_bench_") as tmp:
        sources = snapshot_sources(Path(tmp) / "src")
        results, status = measured_rows("ffrf", "ffrf_{}_modes", modes, Path(tmp), sources, steps, budget)
        if 20 in results:  # M(q) changes slowly: its iteration matrix may be kept (choose-an-integrator)
            modified = measure("ffrf", 20, Path(tmp), sources, steps, budget, ("measure",), newton="modified")
            if isinstance(modified, str):
                print(f"floating frame, modified Newton: {modified}", flush=True)
                status = 1
            else:
                print(f"floating frame, 20 modes, modified Newton: {1e6 * modified['cpu_step']:.1f} us a step "
                      f"({modified['cpu_step'] / results[20]['cpu_step']:.2f}x its full-Newton step), adj/fwd "
                      f"{modified['adjoint_ratio']:.2f}", flush=True)
    if len(results) >= 2:
        print(f"floating frame, {growth(results)}", flush=True)
    return status


def suspension_rows(modes: list[int], steps: int, budget: float, span: float) -> int:
    """The suspension's rows, its rigid references and Table 1 (module docstring)."""
    print(f"{'suspension':<18}{HEADER[18:]}", flush=True)
    with tempfile.TemporaryDirectory(prefix="fmi_adjoint_suspension_bench_") as tmp:
        sources = snapshot_sources(Path(tmp) / "src")
        results, status = measured_rows("suspension", "macpherson_fx_{}", modes, Path(tmp), sources, steps, budget)
        references = [("macpherson", 37)] + ([("rigid", results[20]["n"])] if 20 in results else [])
        for form, size in references:
            rigid = measure(form, size, Path(tmp), sources, steps, budget)
            if isinstance(rigid, str):
                print(f"{form:<18} {rigid}", flush=True)
                status = 1
                continue
            rigid["reduce"] = 0.0
            print(row("macpherson (rigid)" if form == "macpherson" else f"random_tree_{rigid['n']}", rigid), flush=True)
            if form == "rigid":
                ratio = results[20]["cpu_step"] / rigid["cpu_step"]
                verdict = "meets" if ratio <= TARGET_STEP_RATIO else "misses"
                print(f"suspension, 20 modes per body: {ratio:.2f}x the step of a rigid tree of {rigid['n']} "
                      f"coordinates ({verdict} the target <= {TARGET_STEP_RATIO:g}x)", flush=True)
                status = max(status, modified_newton(rigid, size, Path(tmp), sources, steps, budget))
        if results:
            table = measure("suspension", min(results), Path(tmp), sources, steps, 4 * budget, ("table_1",), span)
            if isinstance(table, str):
                print(f"Table 1: {table}", flush=True)
                status = 1
            else:
                print_table_1(table)
    return status


def modified_newton(rigid: dict, size: int, tmp: Path, sources: str, steps: int, budget: float) -> int:
    """The 20-mode suspension and its rigid tree again with modified Newton (``newton =
    "modified"``, from the filled caches): the suspension's mass and stiffness are constant and
    its constraints quadratic (Vanpaemel et al., eqs. (11)-(13)), so its iteration matrix barely
    changes and is factored rarely; ``size``: the one the rigid tree was measured with (its
    cache's name); 1 if a run did not finish."""
    runs = {form: measure(form, n, tmp, sources, steps, budget, ("measure",), newton="modified")
            for form, n in (("suspension", 20), ("rigid", size))}
    flexible, tree = runs["suspension"], runs["rigid"]
    if isinstance(flexible, str) or isinstance(tree, str):
        print(f"modified Newton: {flexible if isinstance(flexible, str) else tree}", flush=True)
        return 1
    full = flexible["cpu_step"] / rigid["cpu_step"]
    verdict = "meets" if full <= TARGET_STEP_RATIO else "misses"
    adjoint = "meets" if flexible["adjoint_ratio"] <= TARGET_ADJOINT_RATIO else "misses"
    print(f"suspension, 20 modes per body, modified Newton: {1e3 * flexible['cpu_step']:.1f} ms a step "
          f"(adj/fwd {flexible['adjoint_ratio']:.2f}: {adjoint} the target <= {TARGET_ADJOINT_RATIO:g}; the sweep "
          "refines with kept factors), "
          f"{full:.2f}x the rigid tree's full-Newton step ({verdict} the "
          f"target <= {TARGET_STEP_RATIO:g}x), {flexible['cpu_step'] / tree['cpu_step']:.2f}x its modified-Newton "
          f"step ({1e3 * tree['cpu_step']:.2f} ms)", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default=",".join(map(str, MODES)), help="modes per body, default %(default)s")
    parser.add_argument("--suspension", default=",".join(map(str, MODES)),
                        help="normal modes per body of the flexible suspension, default %(default)s ('' skips it)")
    parser.add_argument("--ffrf", default=",".join(map(str, MODES)),
                        help="modes of the beam in the floating frame of reference, default %(default)s ('' skips it)")
    parser.add_argument("--table-span", type=float, default=TABLE_SPAN,
                        help="seconds of the measurement in Table 1 (default %(default)g; theirs: 3)")
    parser.add_argument("--steps", type=int, default=STEPS, help="steps of a measured run (default %(default)d)")
    parser.add_argument("--budget", type=float, default=BUDGET, help="seconds per model (default %(default)g)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(args.child, {"build": child_build, "warm": child_build, "measure": child_measure,
                                       "table_1": child_table_1})
    try:
        modes = [int(s) for s in args.modes.split(",") if s.strip()]
        suspension = [int(s) for s in args.suspension.split(",") if s.strip()]
        floating = [int(s) for s in args.ffrf.split(",") if s.strip()]
    except ValueError:
        parser.error("--modes, --suspension, --ffrf: whole numbers separated by commas")
    print(f"engine: fmi_adjoint.engines.NativeEngine (C), HHT, {args.steps} steps per run; {os.cpu_count()} CPUs; "
          f"load average at start {', '.join(f'{x:.1f}' for x in os.getloadavg())}; Python {sys.version.split()[0]}")
    if modes:
        print(HEADER, flush=True)
    with tempfile.TemporaryDirectory(prefix="fmi_adjoint_flexible_bench_") as tmp:
        sources = snapshot_sources(Path(tmp) / "src")
        results, status = measured_rows("flexible", "fncf_{}_modes", modes, Path(tmp), sources, args.steps,
                                        args.budget)
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
        print(growth(results))
        worst = max(results[n]["adjoint_ratio"] for n in ns)
        verdict = "meets" if worst <= TARGET_ADJOINT_RATIO else "misses"
        print(f"adjoint gradient / forward run at most {worst:.2f} ({verdict} the target <= {TARGET_ADJOINT_RATIO:g})")
    if floating:
        status = max(status, floating_frame_rows(floating, args.steps, args.budget))
    if suspension:
        status = max(status, suspension_rows(suspension, args.steps, args.budget, args.table_span))
    print(f"load average at the end {', '.join(f'{x:.1f}' for x in os.getloadavg())} (a shared machine: the "
          "CPU times are upper bounds)")
    return status


if __name__ == "__main__":
    sys.exit(main())
