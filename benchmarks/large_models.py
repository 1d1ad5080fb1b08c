"""Build, step cost, Newton matrix and adjoint cost of non-banded models of 100 to 5 000 coordinates (issue 24).

The models are the two families of :mod:`fmi_adjoint.examples.families`, each at about 100,
1 000 and 5 000 coordinates (``--sizes``): the 3-D lattice of point masses and spring-dampers
hanging from its top layer (``lattice``; sides chosen by
:func:`~fmi_adjoint.examples.families.lattice_dimensions`) and random trees of spatial rigid
bodies on spherical and revolute joints with spring-dampers and a few closed loops
(``random_tree``, seed 0, eight coordinates per body).  Their Newton matrices stay wide after
any band ordering: the models of the issue's "What must be shown".

For every model one row:

* ``n, m``: coordinates, constraints;
* ``cold s``, ``cold cpu``: building the native engine (:class:`fmi_adjoint.engines.NativeEngine`)
  from the model file's text with an empty build cache in a fresh process: parsing and lowering
  the multibody system, the partition into component instances, the per-type derivation, the C
  code and the C compiler (whose CPU time is included); ``lower cpu``: of that, parsing the file
  and lowering it to a Model; ``cc cpu``: the C compiler; ``solver cpu``: before that, compiling
  the sparse solver into the empty cache (once per machine and compiler, whatever the model);
* ``warm s``, ``warm cpu``: the same again in another fresh process from the filled cache, through
  :func:`fmi_adjoint.warm.prepare_model` as the command line does (no symbolic work; the
  interpreter's start and imports not included);
* ``storage``: the storage of the Newton matrix chosen at generation (``dense``, ``band``,
  ``sparse``: ``FA_KKT_KIND`` of the generated ``model.h``; ``band`` / ``dense`` from
  ``FA_KKT_BANDED`` where the kind is not written), ``factor nnz``: stored entries of its
  factors after one step (``NativeLibrary.matrix_sizes``, where the library has it);
* ``C us/step``, ``C cpu us``: the C engine's forward runs (HHT, the model's step) of ``--steps``
  and twice as many steps (best of 2 each), wall and CPU time per step from their difference;
  ``init ms``: the CPU time of the rest of the shorter run, the consistent initialization;
  ``Newton``: mean iterations per step;
* ``adj/fwd``: the C engine's adjoint gradient of a least-squares cost of all outputs over
  that run against data simulated with other masses, stiffnesses and dampings (+5 %, -10 %,
  +20 %; all parameters) over the time of the forward run (target: at most 2);
  ``adj vs FD``: the largest relative difference between that gradient and fourth-order
  central differences for the mass, stiffness and damping (target: 1e-6), ``FD +-`` the
  differences' own uncertainty (the best-agreeing pair of the relative steps 3e-2 .. 1e-3;
  the check takes 48 runs, at every size);
* ``peak MB``: the peak resident memory of the measuring process (``ru_maxrss``; the cold
  build's, compiler included, in ``build MB``);
* ``dense cpu us``, ``vs dense``: where the Newton matrix is not dense and ``n + m`` is at most
  ``--dense-up-to``, the same run with the Newton and initialization matrices forced dense
  (``FMI_ADJOINT_MATRIX_STORAGE=dense``, a build of its own), CPU time per step (from the
  difference of the two lengths), and how many times slower that is.  For the largest size
  the speed-up is extrapolated from the largest size measured dense by the dense LU's
  ``(n + m)^3`` (target: at least 10x).

Then the growth exponents of each family (least-squares slope of ``log`` time over ``log n``,
and of the step's CPU time over the factors' non-zeros of the sizes factored sparse: a dense or
band factor stores its zeros) against the targets of
issue 24: a cold build of 1 000 coordinates in at most 15 s of CPU, linear in the number of
component instances, and a step cost growing at most as ``nnz^1.2``.

Each phase of each size runs in its own process with a private build cache and a time limit
(``--budget`` seconds per size, shared by its cold build, warm build and runs); a size that does
not finish in time is reported so and the larger sizes of that family are not tried.  The
children import a copy of the package taken at the start, so that an edit of the working tree
does not turn a warm build cold.  The machine's load is printed with the figures.

Run: ``python benchmarks/large_models.py [--sizes 100,1000,5000] [--families lattice,random_tree]
[--budget 900] [--steps 20]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _children import (best_of, build_cache, child_main, compile_solver, cpu_seconds, exponent, run_child,
                       snapshot_sources)

SIZES = (100, 1000, 5000)
FAMILIES = ("lattice", "random_tree")
BUDGET = 900.0
STEPS = 20
SEED = 0
#: Targets of issue 24.
TARGET_COLD_1000 = 15.0
TARGET_STEP_EXPONENT = 1.2
TARGET_ADJOINT_RATIO = 2.0
TARGET_DENSE_SPEEDUP = 10.0
#: Largest n + m whose run is measured again with dense matrices (``--dense-up-to``).
DENSE_UP_TO = 2500
STORAGE_NAMES = {0: "dense", 1: "band", 2: "sparse"}
#: The parameters of both families whose gradient is checked against central differences.
FD_PARAMETERS = ("m", "k", "d")
FD_STEPS = (3e-2, 1e-2, 3e-3, 1e-3)
#: The gradient is checked at every size on the measured run (48 runs of it).
TARGET_FD_ERROR = 1e-6


# -- the child processes -------------------------------------------------------------------

def peak_mb(who: int = resource.RUSAGE_SELF) -> float:
    """Peak resident memory (ru_maxrss: kB on Linux, bytes on macOS) in MB."""
    peak = resource.getrusage(who).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def model_path(spec: dict) -> Path:
    """The family's model file, written once next to the size's cache (the warm start keys
    on the file: its path and text)."""
    from fmi_adjoint.examples.families import family_toml

    path = Path(spec["cache"] + ".toml")
    if not path.exists():
        path.write_text(family_toml(spec["family"], spec["size"], SEED), encoding="utf-8")
    return path


def child_build(spec: dict) -> dict:
    from fmi_adjoint.engines import NativeEngine
    from fmi_adjoint.warm import prepare_model

    path = model_path(spec)
    # The sparse solver is compiled once per machine and compiler into the cache, not per model:
    # timed apart (a cache hit on the warm start).
    solver = compile_solver(spec)
    start, cpu = time.perf_counter(), cpu_seconds()
    compilers = cpu - time.process_time()
    # As the command line: a cold start parses and lowers, a warm one does no symbolic work.
    model = prepare_model(path, cache=build_cache(spec))
    lower = cpu_seconds() - cpu
    engine = NativeEngine.build(model, cache=build_cache(spec))
    return {"seconds": time.perf_counter() - start, "cpu": cpu_seconds() - cpu, "lower_cpu": lower,
            "solver_cpu": solver,
            "compiler_cpu": cpu_seconds() - time.process_time() - compilers,
            "n": engine.compiled.n, "m": engine.compiled.m,
            "peak_mb": max(peak_mb(), peak_mb(resource.RUSAGE_CHILDREN))}


def storage_of(model, cache) -> str:
    """The Newton matrix's storage from the generated ``model.h`` (module docstring), printed
    again from the filled cache (the build removes its sources)."""
    from fmi_adjoint.compiled import Derivation
    from fmi_adjoint.native.sources import model_c_sources

    header = model_c_sources(Derivation(model), defaults=False, cache=cache).get("model.h", "")
    defines: dict[str, str] = {}
    for line in header.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "#define":
            defines[parts[1]] = parts[2]
    if "FA_KKT_KIND" in defines:
        return STORAGE_NAMES.get(int(defines["FA_KKT_KIND"]), defines["FA_KKT_KIND"])
    if "FA_KKT_BANDED" in defines:
        return "band" if defines["FA_KKT_BANDED"] == "1" else "dense"
    return "?"


def fd_error(engine, run: dict, p: np.ndarray, cost, gradient: np.ndarray) -> tuple[float, float]:
    """The adjoint gradient against fourth-order central differences over the bounded
    parameters (mass, stiffness, damping): the issue's "adjoint = central differences (1e-6)
    on the large models".  Differences of a short run's cost carry the Newton tolerance's noise
    (divided by the step) and a truncation error (of order step^4): of the relative steps
    :data:`FD_STEPS`, the two neighbours that agree best give the difference, and their
    disagreement its own uncertainty.  Returns the largest relative difference from the adjoint
    and the largest uncertainty of the differences."""
    compiled = engine.compiled
    worst, uncertain = 0.0, 0.0
    for name in FD_PARAMETERS:
        k = compiled.parameter_index(name)
        estimates = []
        for rel in FD_STEPS:
            h = rel * abs(p[k])
            values = []
            for steps in (2.0, 1.0, -1.0, -2.0):
                shifted = p.copy()
                shifted[k] += steps * h
                values.append(cost.evaluate(np.asarray(engine.simulate(shifted, **run).outputs()), shifted).J)
            estimates.append((-values[0] + 8.0 * values[1] - 8.0 * values[2] + values[3]) / (12.0 * h))
        pairs = [(abs(a - b), a) for a, b in zip(estimates, estimates[1:])]
        spread, fd = min(pairs)
        worst = max(worst, abs(gradient[k] - fd) / abs(fd))
        uncertain = max(uncertain, spread / abs(fd))
    return worst, uncertain


def child_measure(spec: dict) -> dict:
    from fmi_adjoint.costs import LeastSquaresCost
    from fmi_adjoint.engines import NativeEngine
    from fmi_adjoint.integrate import HHT
    from fmi_adjoint.model_file import load_model
    from fmi_adjoint.sparsity import STORAGE_VARIABLE

    model = load_model(model_path(spec))
    engine = NativeEngine.build(model, cache=build_cache(spec))
    compiled = engine.compiled
    settings = model.simulation
    steps = spec["steps"]
    run = {"t_end": steps * settings.step, "step": settings.step, "solver": HHT(alpha=settings.alpha)}
    p = compiled.parameter_vector()
    t_fwd, cpu_fwd, traj = best_of(2, lambda: engine.simulate(p, **run))
    # The cost of a step: the difference of runs of 2 N and N steps (their common start, the
    # consistent initialization, reported apart).
    double = dict(run, t_end=2 * steps * settings.step)
    t_two, cpu_two, _ = best_of(2, lambda: engine.simulate(p, **double))
    true = p.copy()
    for name, change in zip(FD_PARAMETERS, (1.05, 0.9, 1.2)):
        true[compiled.parameter_index(name)] *= change

    def least_squares(reference) -> LeastSquaresCost:
        """The data: the outputs at other masses, stiffnesses and dampings (the residuals then
        depend on every checked parameter, and the gradient is not a small difference of large
        terms), each channel scaled by its size."""
        y = np.asarray(engine.simulate(true, t_end=reference.t[-1], step=settings.step,
                                       solver=run["solver"]).outputs())
        scales = np.sqrt(np.mean(y**2, axis=0)) + 1e-300
        return LeastSquaresCost(np.asarray(reference.t), y, tuple(compiled.output_names), scales=scales)

    cost = least_squares(traj)
    t_adj, _, adjoint = best_of(1, lambda: engine.adjoint_gradient(traj, cost))
    per_step, per_step_cpu = (t_two - t_fwd) / steps, (cpu_two - cpu_fwd) / steps
    result = {"steps": traj.n_steps, "native": per_step, "native_cpu": per_step_cpu,
              "init_cpu": max(cpu_fwd - steps * per_step_cpu, 0.0),
              "newton": float(np.mean(traj.newton_iterations)), "adjoint_ratio": t_adj / t_fwd,
              "peak_mb": peak_mb()}
    result["fd_error"], result["fd_uncertainty"] = fd_error(engine, run, p, cost, adjoint.gradient)
    result["factor_nnz"] = int(engine.library.matrix_sizes(step=settings.step, n_steps=1, p=p).factor_entries)
    result["storage"] = storage_of(model, build_cache(spec))  # after the peak memory of the runs
    if result["storage"] != "dense" and compiled.n + compiled.m <= spec["dense_up_to"]:
        # The same run with the Newton and initialization matrices forced dense (a build of its
        # own: the storage is part of the cache key), for the speed-up of the sparse path.
        os.environ[STORAGE_VARIABLE] = "dense"
        try:
            dense = NativeEngine.build(model, cache=build_cache(spec))
            _, cpu_dense, _ = best_of(1, lambda: dense.simulate(p, **run))
            _, cpu_dense_two, _ = best_of(1, lambda: dense.simulate(p, **double))
        finally:
            del os.environ[STORAGE_VARIABLE]
        result["dense_cpu"] = (cpu_dense_two - cpu_dense) / steps
    return result


# -- the table -----------------------------------------------------------------------------

HEADER = (f"{'model':<18} {'n':>5} {'m':>5} {'cold s':>7} {'cold cpu':>8} {'lower cpu':>9} {'cc cpu':>6} "
          f"{'solver cpu':>10} {'warm s':>7} "
          f"{'warm cpu':>8} {'storage':>7} {'factor nnz':>10} {'C us/step':>10} {'C cpu us':>9} {'init ms':>7} "
          f"{'Newton':>6} "
          f"{'adj/fwd':>7} {'adj vs FD':>9} {'FD +-':>7} {'peak MB':>7} {'build MB':>8} {'dense cpu us':>12} "
          f"{'vs dense':>8}")


def row(name: str, cold: dict, warm: dict, measured: dict) -> str:
    nnz = measured.get("factor_nnz")
    return (f"{name:<18} {cold['n']:>5} {cold['m']:>5} {cold['seconds']:>7.1f} {cold['cpu']:>8.1f} "
            f"{cold['lower_cpu']:>9.1f} {cold['compiler_cpu']:>6.1f} {cold['solver_cpu']:>10.1f} "
            f"{warm['seconds']:>7.2f} {warm['cpu']:>8.2f} "
            f"{measured['storage']:>7} "
            f"{nnz if nnz is not None else '-':>10} {_positive(1e6 * measured['native'], 10, '.0f')} "
            f"{_positive(1e6 * measured['native_cpu'], 9, '.0f')} {_positive(1e3 * measured['init_cpu'], 7, '.1f')} "
            f"{measured['newton']:>6.2f} "
            f"{measured['adjoint_ratio']:>7.2f} "
            f"{_fd(measured)} "
            f"{measured['peak_mb']:>7.0f} {cold['peak_mb']:>8.0f} {_dense(measured)}")


def _positive(value: float, width: int, form: str) -> str:
    """A time from a difference of two runs, or ``noise`` where the machine's load made the
    difference not positive (the longer run measured faster)."""
    return f"{value:>{width}{form}}" if value > 0 else f"{'noise':>{width}}"


def _fd(measured: dict) -> str:
    """The adjoint's difference from central differences and theirs, where checked."""
    if "fd_error" not in measured:
        return f"{'-':>9} {'-':>7}"
    return f"{measured['fd_error']:>9.1e} {measured['fd_uncertainty']:>7.0e}"


def _dense(measured: dict) -> str:
    """The forced-dense run's CPU time per step and the speed-up over it, where measured."""
    dense = measured.get("dense_cpu")
    if dense is None:
        return f"{'-':>12} {'-':>8}"
    return f"{1e6 * dense:>12.0f} {dense / measured['native_cpu']:>7.1f}x"


def summary(family: str, results: dict[int, tuple[dict, dict, dict]]) -> list[str]:
    lines = []
    sizes = sorted(results)
    if len(sizes) >= 2:
        ns = [results[s][0]["n"] for s in sizes]
        cold = exponent(ns, [results[s][0]["cpu"] for s in sizes])
        warm = exponent(ns, [results[s][1]["cpu"] for s in sizes])
        step = exponent(ns, [results[s][2]["native_cpu"] for s in sizes])
        lines.append(f"{family}: growth over n = {ns[0]}..{ns[-1]} (CPU): cold build ~ n^{cold:.2f} (target: "
                     f"linear), warm build ~ n^{warm:.2f}, C us/step ~ n^{step:.2f}")
        # Over the sizes factored sparse: a dense or band factor stores its zeros too, so its
        # "non-zeros" are not the sparse factors' (a dense smallest size would bend the slope).
        with_nnz = [s for s in sizes if results[s][2].get("factor_nnz") and results[s][2].get("storage") == "sparse"]
        if len(with_nnz) >= 2:
            slope = exponent([results[s][2]["factor_nnz"] for s in with_nnz],
                             [results[s][2]["native_cpu"] for s in with_nnz])
            verdict = "meets" if slope <= TARGET_STEP_EXPONENT else "misses"
            span = ", ".join(str(results[s][0]["n"]) for s in with_nnz)
            lines.append(f"{family}: C us/step ~ nnz^{slope:.2f} of the sparse factors over n = {span} ({verdict} "
                         f"the target nnz^{TARGET_STEP_EXPONENT})")
    near = [s for s in sizes if 500 <= results[s][0]["n"] <= 2000]
    for s in near:
        cpu = results[s][0]["cpu"]
        verdict = "meets" if cpu <= TARGET_COLD_1000 else "misses"
        lines.append(f"{family}: cold build of {results[s][0]['n']} coordinates {cpu:.1f} s CPU ({verdict} the "
                     f"target <= {TARGET_COLD_1000:g} s for 1 000)")
    # The issue's target: the largest model at least 10x faster per step than the dense path,
    # extrapolated from the largest size where dense was measured by the dense LU's (n+m)^3.
    measured_dense = [s for s in sizes if "dense_cpu" in results[s][2]]
    if measured_dense and sizes[-1] not in measured_dense:
        ref, big = measured_dense[-1], sizes[-1]
        rows_ref = results[ref][0]["n"] + results[ref][0]["m"]
        rows_big = results[big][0]["n"] + results[big][0]["m"]
        dense_big = results[ref][2]["dense_cpu"] * (rows_big / rows_ref) ** 3
        speedup = dense_big / results[big][2]["native_cpu"]
        verdict = "meets" if speedup >= TARGET_DENSE_SPEEDUP else "misses"
        lines.append(f"{family}: {results[big][0]['n']} coordinates {speedup:.0f}x faster per step than the dense "
                     f"path would be (dense {1e6 * results[ref][2]['dense_cpu']:.0f} us/step measured at "
                     f"{results[ref][0]['n']} coordinates, scaled by ((n+m) ratio)^3; {verdict} the target >= "
                     f"{TARGET_DENSE_SPEEDUP:g}x)")
    checked = [s for s in sizes if "fd_error" in results[s][2]]
    if checked:
        errors = [results[s][2]["fd_error"] for s in checked]
        spread = max(results[s][2]["fd_uncertainty"] for s in checked)
        verdict = "meets" if max(errors) <= TARGET_FD_ERROR else "misses"
        lines.append(f"{family}: adjoint gradient against central differences (m, k, d) at every size: largest "
                     f"relative difference {max(errors):.1e}, the differences' own uncertainty up to "
                     f"{spread:.0e} ({verdict} the target <= {TARGET_FD_ERROR:g})")
    worst = [s for s in sizes if results[s][2]["adjoint_ratio"] > TARGET_ADJOINT_RATIO]
    if sizes:
        verdict = "misses" if worst else "meets"
        ratios = ", ".join(f"{results[s][2]['adjoint_ratio']:.2f}" for s in sizes)
        lines.append(f"{family}: adjoint gradient / forward run {ratios} ({verdict} the target <= "
                     f"{TARGET_ADJOINT_RATIO:g} at every size)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)),
                        help="comma-separated sizes in coordinates, default %(default)s")
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated, default %(default)s")
    parser.add_argument("--budget", type=float, default=BUDGET,
                        help="seconds per size for its cold build, warm build and runs (default %(default)g)")
    parser.add_argument("--steps", type=int, default=STEPS, help="steps of a measured run (default %(default)d)")
    parser.add_argument("--dense-up-to", type=int, default=DENSE_UP_TO,
                        help="measure the run with dense matrices too up to this n + m (default %(default)d)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(args.child, {"build": child_build, "measure": child_measure})
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error("--sizes: give whole numbers separated by commas, e.g. 100,1000")
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    if not sizes or min(sizes) < 16 or args.budget <= 0 or args.steps < 1:
        parser.error("--sizes needs sizes >= 16; --budget and --steps must be positive")
    if any(f not in FAMILIES for f in families):
        parser.error(f"--families: choose from {', '.join(FAMILIES)}")
    print(f"engine: fmi_adjoint.engines.NativeEngine (C), HHT at each model's step, {args.steps} steps per run; "
          f"budget {args.budget:g} s per size; {os.cpu_count()} CPUs; load average at start "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}; Python {sys.version.split()[0]}")
    print(HEADER, flush=True)
    status = 0
    all_results: dict[str, dict[int, tuple[dict, dict, dict]]] = {}
    with tempfile.TemporaryDirectory(prefix="fmi_adjoint_large_bench_") as tmp:
        sources = snapshot_sources(Path(tmp) / "src")
        for family in families:
            results: dict[int, tuple[dict, dict, dict]] = {}
            too_big = False
            for size in sizes:
                name = f"{family}_{size}"
                if too_big:
                    print(f"{name:<18} not tried (a smaller {family} did not finish within the budget)", flush=True)
                    status = 1
                    continue
                spec = {"family": family, "size": size, "cache": str(Path(tmp) / name), "steps": args.steps,
                        "sources": sources, "dense_up_to": args.dense_up_to}
                deadline = time.monotonic() + args.budget
                phases: list[dict] = []
                for phase in ("build", "build", "measure"):
                    left = deadline - time.monotonic()
                    result = (run_child(__file__, spec | {"phase": phase}, left) if left > 0
                              else {"timeout": args.budget})
                    phases.append(result)
                    if "timeout" in result or "error" in result:
                        break
                last = phases[-1]
                if "timeout" in last or "error" in last:
                    undone = {1: "not built", 2: "warm build not done", 3: "runs not done"}[len(phases)]
                    what = last.get("error") or f"{undone} within the budget ({args.budget:g} s)"
                    print(f"{name:<18} {what}", flush=True)
                    too_big = "timeout" in last
                    status = 1
                    continue
                results[size] = (phases[0], phases[1], phases[2])
                print(row(name, *results[size]), flush=True)
            all_results[family] = results
    for family, results in all_results.items():
        for line in summary(family, results):
            print(line)
    print(f"load average at the end {', '.join(f'{x:.1f}' for x in os.getloadavg())} (wall-clock times on a "
          "shared machine are upper bounds)")
    return status


if __name__ == "__main__":
    sys.exit(main())
