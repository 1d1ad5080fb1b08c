"""Build time and cost per step of spatial revolute chains (issue 23), every number measured here.

A chain of ``n`` spatial rigid bodies (``link1 .. linkn``, :class:`fmi_adjoint.mbs.SpatialRigidBody`:
seven coordinates ``x, y, z, e0 .. e3`` and the Euler-parameter normalization constraint each,
dissertation Sec. 2.2) hangs from the ground by revolute joints (:class:`fmi_adjoint.mbs.Revolute`,
five constraints each): ``link1`` on the ground at the origin, ``link(i+1)`` on the end of
``linki``.  Every link is a slender rod of length ``l = 0.5 m`` and mass ``m = 1 kg`` along its
body ``x`` axis; all joint axes are the global ``z`` axis (the default axis of the joint's first
marker); the chain starts horizontal along ``x`` at rest and falls under gravity ``-g e_y``.
So a chain of ``n`` bodies has ``7 n`` coordinates and ``6 n`` constraints: the model of the
"revolute chain" benchmark of multibody codes.  The bundled ``engine_on_mounts`` example (a
spatial body on rubber bushings) is measured as well when it exists.

For every model the script prints one row:

* ``n, m``: coordinates, constraints;
* ``lower s``: :func:`fmi_adjoint.warm.prepare_model` in the cold build (lowering the components
  to an ordinary Model, :meth:`~fmi_adjoint.mbs.MultibodySystem.to_model`, and keying the warm
  entry);
* ``cold s``: building the native engine (:class:`fmi_adjoint.engines.NativeEngine`, the default)
  with an empty build cache, in a fresh process (``FMI_ADJOINT_CACHE`` set to a private temporary
  folder): lowering, the partition into component instances, the derivation of each component
  type (once: every link is the same type, :mod:`fmi_adjoint.assembly`), the assembly plan, the C
  code and the C compiler; the sparse solver, which chains of 16 bodies and more link, is
  compiled into the empty cache before and not counted (once per machine and compiler, whatever
  the model: ``large_models.py`` prints its time)
  (once a chain does not build within the budget, the longer ones are not tried);
  ``cold cpu``: the CPU seconds of that build, the C compiler processes included (on a loaded
  machine the wall time overstates the work; the compilers run in parallel, so on an idle
  machine with several cores the wall time can be below the CPU time);
* ``warm s``, ``warm cpu``: building it again in another fresh process from the same cache
  (``prepare_model`` and ``NativeEngine.build``: no lowering, the interpreter's start and imports
  not included).  The cache keys hash
  fmi-adjoint's own sources, so the children import a copy of the package taken at the start
  (an edit of the working tree during the run would otherwise make the warm build cold);
* ``C us/step``, ``C cpu us``: one forward run of the C engine (HHT, ``h = 1 ms``, best of 2)
  over its steps, wall and CPU time (one thread);
* ``Py us/step``, ``Py cpu us``: the same run of the Python engine
  (:class:`fmi_adjoint.engines.PythonEngine`, from the same cache), for chains up to
  ``--python-up-to`` bodies;
* ``Newton``: mean Newton iterations per step of the C run.

Then the growth exponents (least-squares slope of ``log`` time over ``log n``, over the chains
that built within the budget; wall and CPU) and the targets of issue 23: a cold build of 100
spatial bodies with 100 joints in at most 10 s growing linearly, a warm build in at most 0.5 s,
the cost per step growing at most as ``n^1.1``, and for scale 5.3 ms per step reported by a C++
code for a 400-body revolute chain on 4 threads.  The targets are judged on CPU time.

Each phase of each size runs in its own process with a time limit (``--budget`` seconds per
size, shared by its cold build, warm build and runs): a size whose cold build does not finish
in time is reported as "not built within the budget" and its process group is ended by this
script (the library itself is never interrupted).  The machine's load is printed with the
figures: they are wall-clock times.

``--profile N,...`` profiles the cold build of those chains instead (``cProfile``) and prints
the cumulative time of the build's phases (lowering, parsing, the partition into component
instances, the per-type derivation, CSE, the C printing, the C compiler: the wall time of waiting
for it) and the functions with
the most own time.  A build that does not finish within the budget is stopped (SIGTERM to the
profiling child, whose handler reports the profile so far) and marked as not finished.

Run: ``python benchmarks/mbs_chains.py [--sizes 4,16,64,100,256,400] [--budget 120]
[--python-up-to 16] [--steps 200] [--profile 16,64]``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _children import (RESULT, best_of, build_cache, compile_solver, cpu_seconds, exponent, run_child,
                       snapshot_sources)


SIZES = (4, 16, 64, 100, 256, 400)  # 100: the size of the cold-build target, measured, not fitted
BUDGET = 120.0
PYTHON_UP_TO = 16
STEPS = 200
STEP = 1e-3
ENGINE_ON_MOUNTS = "engine_on_mounts"
#: Targets of issue 23.
TARGET_COLD_100 = 10.0
TARGET_WARM = 0.5
TARGET_STEP_EXPONENT = 1.1
CPP_400_US = 5300.0
#: Build phases reported by --profile: label -> (module path suffix, function name).
PHASES: tuple[tuple[str, str, str], ...] = (
    ("lowering (MultibodySystem.to_model)", "mbs/system.py", "to_model"),
    ("parsing (model.parse_items)", "fmi_adjoint/model.py", "parse_items"),
    ("partition into component instances (assembly.partition)", "assembly/partition.py", "partition"),
    ("per-type derivation (assembly.kernels.derive_type)", "assembly/kernels.py", "derive_type"),
    ("CSE (cse.reduce_outputs)", "fmi_adjoint/cse.py", "reduce_outputs"),
    ("C sources (native model_c_sources)", "fmi_adjoint/native/", "model_c_sources"),
    ("C compiler (toolchain.compile_shared)", "fmi_adjoint/toolchain.py", "compile_shared"),
)


# -- the models ----------------------------------------------------------------------------

def chain_system(n: int):
    """The spatial revolute chain of ``n`` bodies (module docstring)."""
    from fmi_adjoint.examples.chains import spatial_chain

    return spatial_chain(n, STEP)


def engine_on_mounts_path() -> Path | None:
    from fmi_adjoint.examples import EXAMPLES_DIR

    path = Path(EXAMPLES_DIR) / f"{ENGINE_ON_MOUNTS}.toml"
    return path if path.exists() else None


def load(name: str, spec: dict):
    """``(Model, seconds to prepare it)`` of a benchmark model (``chain_N`` or the example),
    through :func:`fmi_adjoint.warm.prepare_model` as the command line does: a cold start lowers
    the components (or parses the file), a warm one finds the lowered model's facts in the
    cache without any symbolic work (issue 24, part 6)."""
    from fmi_adjoint.warm import prepare_model

    start = time.perf_counter()
    if name == ENGINE_ON_MOUNTS:
        path = engine_on_mounts_path()
        if path is None:
            raise FileNotFoundError(f"{ENGINE_ON_MOUNTS}.toml is not bundled")
        model = prepare_model(path, cache=build_cache(spec))
    else:
        model = prepare_model(chain_system(int(name.split("_")[1])), cache=build_cache(spec))
    return model, time.perf_counter() - start


# -- the child processes -------------------------------------------------------------------

def child_build(spec: dict) -> dict:
    from fmi_adjoint.engines import NativeEngine

    from fmi_adjoint.cache import source_fingerprint

    compile_solver(spec)  # once per machine and compiler, not per model: not counted
    chain_system(2)  # the Python API's imports (sympy, 0.4 s) not counted, as the module docstring says
    start, cpu = time.perf_counter(), cpu_seconds()
    model, lower = load(spec["model"], spec)
    engine = NativeEngine.build(model, cache=build_cache(spec))
    return {"seconds": time.perf_counter() - start, "cpu": cpu_seconds() - cpu, "lower": lower,
            "n": engine.compiled.n, "m": engine.compiled.m, "fingerprint": source_fingerprint()}


def child_measure(spec: dict) -> dict:
    from fmi_adjoint.engines import NativeEngine, PythonEngine
    from fmi_adjoint.integrate import HHT

    model, _ = load(spec["model"], spec)
    settings = model.simulation
    steps = spec["steps"]
    run = {"t_end": steps * settings.step, "step": settings.step, "solver": HHT(alpha=settings.alpha)}
    native = NativeEngine.build(model, cache=build_cache(spec))
    p = native.compiled.parameter_vector()
    t_native, cpu_native, traj = best_of(2, lambda: native.simulate(p, **run))
    result = {"steps": traj.n_steps, "native": t_native / traj.n_steps, "native_cpu": cpu_native / traj.n_steps,
              "newton": float(np.mean(traj.newton_iterations))}
    if spec["python"]:
        python = PythonEngine.build(model, cache=build_cache(spec))
        # Best of 2: the first run also loads the numpy functions (compile_model(lazy=True)).
        t_python, cpu_python, traj_py = best_of(2, lambda: python.simulate(p, **run))
        result["python"] = t_python / traj_py.n_steps
        result["python_cpu"] = cpu_python / traj_py.n_steps
        result["py_vs_c"] = float(np.max(np.abs(traj_py.outputs() - traj.outputs())))
    return result


def child_profile(spec: dict) -> dict:
    """Cold build under cProfile: cumulative seconds of the phases, top own-time functions."""
    import cProfile
    import pstats

    class Stopped(BaseException):  # not an Exception: library code that catches those passes it on
        pass

    def stop(signum, frame):  # the parent's time limit: report the profile so far
        raise Stopped

    signal.signal(signal.SIGTERM, stop)
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    try:
        child_build(spec)
        finished = True
    except Stopped:
        finished = False
    profiler.disable()
    total = time.perf_counter() - start
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    phases = {}
    for label, path, function in PHASES:
        # The outermost call of the function: its largest cumulative time (recursion counted once).
        times = [ct for (file, _, func), (_, _, _, ct, _) in stats.items()
                 if func == function and file.replace(os.sep, "/").find(path) >= 0]
        phases[label] = max(times) if times else 0.0
    own = sorted(((tt, f"{Path(file).parent.name}/{Path(file).name}:{line} {func}")
                  for (file, line, func), (_, _, tt, _, _) in stats.items()), reverse=True)[:12]
    return {"total": total, "phases": phases, "own": own, "finished": finished}


# -- the table -----------------------------------------------------------------------------

HEADER = (f"{'model':<18} {'n':>5} {'m':>5} {'lower s':>8} {'cold s':>8} {'cold cpu':>9} {'warm s':>7} "
          f"{'warm cpu':>9} {'C us/step':>10} {'C cpu us':>9} {'Py us/step':>11} {'Py cpu us':>10} {'Newton':>7} "
          f"{'steps':>6}")


def row(name: str, cold: dict, warm: dict, measured: dict) -> str:
    if "python" in measured:
        python = f"{1e6 * measured['python']:>11.0f} {1e6 * measured['python_cpu']:>10.0f}"
    else:
        python = f"{'-':>11} {'-':>10}"
    return (f"{name:<18} {cold['n']:>5} {cold['m']:>5} {cold['lower']:>8.2f} {cold['seconds']:>8.2f} "
            f"{cold['cpu']:>9.2f} {warm['seconds']:>7.2f} {warm['cpu']:>9.2f} {1e6 * measured['native']:>10.1f} "
            f"{1e6 * measured['native_cpu']:>9.1f} {python} {measured['newton']:>7.2f} {measured['steps']:>6}")


def summary(chains: dict[int, tuple[dict, dict, dict]]) -> list[str]:
    lines = []
    sizes = sorted(chains)

    def slope(pick) -> str:
        return f"n^{exponent(sizes, [pick(*chains[n]) for n in sizes]):.2f}"

    if len(sizes) >= 2:
        span = f"n = {sizes[0]}..{sizes[-1]} bodies"
        step = exponent(sizes, [chains[n][2]["native_cpu"] for n in sizes])
        verdict = "meets" if step <= TARGET_STEP_EXPONENT else "misses"
        lines.append(f"growth over {span} (wall / CPU): cold build ~ {slope(lambda c, w, r: c['seconds'])} / "
                     f"{slope(lambda c, w, r: c['cpu'])} (target: linear), warm build ~ "
                     f"{slope(lambda c, w, r: w['seconds'])} / {slope(lambda c, w, r: w['cpu'])}, C us/step ~ "
                     f"{slope(lambda c, w, r: r['native'])} / n^{step:.2f} ({verdict} the target "
                     f"n^{TARGET_STEP_EXPONENT} on CPU time)")
        with_python = [n for n in sizes if "python" in chains[n][2]]
        if len(with_python) >= 2:
            py = exponent(with_python, [chains[n][2]["python_cpu"] for n in with_python])
            lines.append(f"Python engine: CPU us/step ~ n^{py:.2f} over n = {with_python[0]}..{with_python[-1]}")
    if sizes:
        # The cold build at 100 bodies: measured if 100 was run, else the fit of the CPU times.
        if 100 in chains:
            cold100, how = chains[100][0]["cpu"], "measured CPU time"
        elif len(sizes) >= 2:
            fit, icept = np.polyfit(np.log(sizes), np.log([chains[n][0]["cpu"] for n in sizes]), 1)
            cold100 = float(np.exp(icept) * 100**fit)
            how = "CPU time extrapolated from the fit" if sizes[-1] < 100 else "CPU time interpolated by the fit"
        else:
            cold100, how = None, ""
        if cold100 is not None:
            verdict = "meets" if cold100 <= TARGET_COLD_100 else "misses"
            lines.append(f"cold build of 100 bodies: {cold100:.1f} s ({how}; {verdict} the target "
                         f"<= {TARGET_COLD_100:g} s)")
        if 100 in chains:
            warm100 = chains[100][1]["cpu"]
            verdict = "meets" if warm100 <= TARGET_WARM else "misses"
            lines.append(f"warm build of 100 bodies: {warm100:.2f} s CPU (prepare_model and the engine; {verdict} the "
                         f"target <= {TARGET_WARM:g} s)")
        worst = max(sizes, key=lambda n: chains[n][1]["seconds"])
        verdict = "meets" if chains[worst][1]["seconds"] <= TARGET_WARM else "misses"
        lines.append(f"warm build: at most {chains[worst][1]['seconds']:.2f} s wall, {chains[worst][1]['cpu']:.2f} s "
                     f"CPU (chain of {worst}, prepare_model and the engine; {verdict} the "
                     f"target <= {TARGET_WARM:g} s)")
    missed = [str(n) for n in sizes if chains[n][1]["cpu"] >= 0.5 * chains[n][0]["cpu"]]
    if missed:
        lines.append(f"note: the warm build took at least half the cold one's CPU time for the chain(s) of "
                     f"{', '.join(missed)}: the build cache did not hit")
    if 400 in chains:
        us = 1e6 * chains[400][2]["native_cpu"]
        lines.append(f"400-body chain: {us:.0f} us/step CPU on one thread, {us / CPP_400_US:.2f} x the 5.3 ms/step "
                     "of the C++ code on 4 threads")
    return lines


def profile(sizes: list[int], budget: float) -> int:
    print(f"profile of the cold build (cProfile, one fresh process each; load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs)", flush=True)
    status = 0
    with tempfile.TemporaryDirectory(prefix="fmi_adjoint_mbs_profile_") as tmp:
        sources = snapshot_sources(Path(tmp) / "src")
        for n in sizes:
            name = f"chain_{n}"
            spec = {"model": name, "cache": str(Path(tmp) / name), "phase": "profile", "sources": sources}
            result = run_child(__file__, spec, budget, report_on_sigterm=True)
            if "timeout" in result or "error" in result:
                print(f"{name}: " + ("not built within the budget" if "timeout" in result else result["error"]))
                status = 1
                continue
            state = "" if result["finished"] else " (NOT finished: stopped at the budget; the profile so far)"
            print(f"{name}: cold build {result['total']:.1f} s under the profiler{state}; cumulative time of the "
                  "phases (nested: CSE is inside the C and numpy sources)")
            for label, seconds in result["phases"].items():
                print(f"  {label:<46} {seconds:8.2f} s  {100 * seconds / result['total']:5.1f} %")
            print("  most own time:")
            for seconds, where in result["own"]:
                print(f"  {seconds:8.2f} s  {where}")
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)),
                        help="comma-separated chain lengths (bodies), default %(default)s")
    parser.add_argument("--budget", type=float, default=BUDGET,
                        help="seconds per size for its cold build, warm build and runs (default %(default)g)")
    parser.add_argument("--python-up-to", type=int, default=PYTHON_UP_TO,
                        help="measure the Python engine on chains up to this many bodies (default %(default)d)")
    parser.add_argument("--steps", type=int, default=STEPS, help="steps of a measured run (default %(default)d)")
    parser.add_argument("--no-example", action="store_true", help=f"skip {ENGINE_ON_MOUNTS}")
    parser.add_argument("--profile", help="comma-separated chain lengths: profile their cold build instead")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        spec = json.loads(args.child)
        phase = {"build": child_build, "measure": child_measure, "profile": child_profile}[spec["phase"]]
        print(RESULT + json.dumps(phase(spec)), flush=True)
        return 0
    try:
        sizes = [int(s) for s in (args.profile or args.sizes).split(",") if s.strip()]
    except ValueError:
        parser.error("--sizes/--profile: give whole numbers separated by commas, e.g. 4,16,64")
    if not sizes or min(sizes) < 1 or args.budget <= 0 or args.steps < 1:
        parser.error("--sizes needs at least one size >= 1; --budget and --steps must be positive")
    if args.profile:
        return profile(sizes, args.budget)

    names = [f"chain_{n}" for n in sizes]
    if not args.no_example and engine_on_mounts_path() is not None:
        names.append(ENGINE_ON_MOUNTS)
    print(f"engine: fmi_adjoint.engines.NativeEngine (C), HHT h = {STEP:g} s, {args.steps} steps per run; "
          f"budget {args.budget:g} s per size; {os.cpu_count()} CPUs; load average at start "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}; Python {sys.version.split()[0]}")
    print(HEADER, flush=True)
    chains: dict[int, tuple[dict, dict, dict]] = {}
    with tempfile.TemporaryDirectory(prefix="fmi_adjoint_mbs_bench_") as tmp:
        sources = snapshot_sources(Path(tmp) / "src")
        too_big: int | None = None  # the smallest chain that did not build within the budget
        for name in names:
            n = int(name.split("_")[1]) if name.startswith("chain_") else None
            if n is not None and too_big is not None and n > too_big:
                print(f"{name:<18} not built within the budget (not tried: the chain of {too_big} did not build "
                      "within it)", flush=True)
                continue
            spec = {"model": name, "cache": str(Path(tmp) / name), "steps": args.steps, "sources": sources,
                    "python": n is None or n <= args.python_up_to}
            deadline = time.monotonic() + args.budget
            results: list[dict] = []
            for phase in ("build", "build", "measure"):
                left = deadline - time.monotonic()
                result = run_child(__file__, spec | {"phase": phase}, left) if left > 0 else {"timeout": args.budget}
                results.append(result)
                if "timeout" in result or "error" in result:
                    break
            last = results[-1]
            if "timeout" in last:
                what = {1: "not built within the budget", 2: "warm build not within the budget",
                        3: "runs not within the budget"}[len(results)]
                print(f"{name:<18} {what} ({args.budget:g} s)", flush=True)
                if n is not None and len(results) == 1:
                    too_big = n if too_big is None else min(too_big, n)
                continue
            if "error" in last:
                print(f"{name:<18} failed: {last['error']}", flush=True)
                continue
            cold, warm, measured = results
            if n is not None:
                chains[n] = (cold, warm, measured)
            print(row(name, cold, warm, measured), flush=True)
    for line in summary(chains):
        print(line)
    print(f"load average at the end {', '.join(f'{x:.1f}' for x in os.getloadavg())} (wall-clock times on a "
          "shared machine are upper bounds)")
    return 0 if len(chains) == len(sizes) else 1


if __name__ == "__main__":
    sys.exit(main())
