"""How the engine's cost grows with model size (issue 11), every number measured here.

For sdof, engine_mount, strut, engine_tvd and the generated chains of 4, 16, 64 and 256
masses (:mod:`fmi_adjoint.examples.chains`, linear and cubic) it prints one row:

* ``n, m, n_p``: coordinates, constraints, parameters; ``id``: identified parameters;
  ``steps``: HHT steps of the measured run;
* ``cold s``: building the engine with an empty cache folder, in a fresh process;
  ``warm s``: building it again in another fresh process from the same cache folder;
* ``us/step``: one forward run (best of 3) divided by its steps;
* ``adj/fwd``, ``sens/fwd``: a whole gradient (its forward run plus the adjoint sweep, or plus
  the forward sensitivities of the identified parameters) over one forward run, so 2.0 means
  "one extra simulation"; ``FD/fwd``: the fourth-order central differences of the
  identified parameters (4 forward runs and costs per parameter, all run and timed) over
  one forward run;
* ``peak MB``: the peak resident memory of the measuring process (after the warm build,
  so it is the memory of the runs, the trajectory and the sweep); ``build MB``: that of
  the cold build;
* ``adj~FD``: the largest relative difference between the adjoint and the finite-difference
  gradient (a timing of a wrong gradient would be worthless).

The cost is the least-squares time-series cost of one or two outputs, sampled at every
step, against data simulated by the same engine with the identified parameters 5 % above
their nominal values; the gradient is taken at the nominal values.  Each model runs in
fresh processes (``python engine_scaling.py --child ...``) with ``FMI_ADJOINT_CACHE`` set to
a private temporary folder, so the cold build cannot reuse the user's cache, the measuring
process's peak memory is its own, and no run inherits a warm allocator from another.  The
ratios of one row come from one process, one after the other, on the same machine state.
For the chains it also prints the fitted exponent of ``us/step`` over ``n`` and compares
the figures with the targets of issue 11 (``<= 15 us/step`` at 64 masses linear, ``<= 20``
cubic, exponent ``<= 1.5``, adjoint gradient ``<= 2x`` a forward run).

The native engine (:mod:`fmi_adjoint.engines`) is measured when it is installed; without it
(or with ``--engine python``) the Python reference engine is measured through the same
calls, and the header says so.

Run: ``python benchmarks/engine_scaling.py [--quick] [--models NAME,...] [--engine native|python]``
(``--quick``: 2000 steps, chains up to 64 masses).  The full run takes tens of minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _timing import best_of  # benchmarks/_timing.py (the script folder is on sys.path)

CHAIN_SIZES = (4, 16, 64, 256)
QUICK_CHAIN_SIZES = (4, 16, 64)
EXAMPLES = ("sdof", "engine_mount", "strut", "engine_tvd")
#: Identified parameters and cost channels of each bundled example.
EXAMPLE_PROBLEMS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "sdof": (("c", "d"), ("x",)),
    "engine_mount": (("c_E1", "c_E2", "d_E", "d_H2"), ("a1",)),
    "strut": (("k", "L", "c_1", "c_2", "a_f1", "b_f1", "c_f1", "e_f1", "a_f2", "b_f2", "c_f2", "e_f2", "y0"),
              ("deflection",)),
    "engine_tvd": (("c1_star", "c2_star", "d1_star", "d2_star"), ("twist", "tvd_twist")),
}
CHAIN_PROBLEMS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {"linear": (("k", "d", "F0"), ("x_last", "a_mid")),
                  "cubic": (("k", "k3", "d"), ("x_last", "rod_force"))}
#: Most steps of a measured run: 10 000 are enough for the per-step time to dominate.
MAX_STEPS, QUICK_STEPS = 20_000, 2_000
#: Data are simulated with the identified parameters this much above nominal.
DATA_FACTOR = 1.05
#: Relative step of the finite differences.
FD_STEP = 1e-3
TARGET_US = {"linear": 15.0, "cubic": 20.0}
TARGET_EXPONENT = 1.5
TARGET_ADJOINT = 2.0
RESULT = "RESULT "


# -- the engine, in one place --------------------------------------------------------------

class _ReferenceEngine:
    """The calls of ``fmi_adjoint.engines`` mapped onto the Python reference engine.

    Used when ``fmi_adjoint.engines`` is not installed (or ``--engine python``), so the
    harness runs and can be checked; its numbers are those of the Python engine.
    """

    name = "Python reference engine"

    def __init__(self, compiled):
        self.compiled = compiled

    @classmethod
    def build(cls, model, cache=None):
        from fmi_adjoint.compiled import compile_model

        return cls(compile_model(model))

    def simulate(self, p, *, t_end, step, solver):
        from fmi_adjoint.integrate import simulate

        return simulate(self.compiled, p, t_end=t_end, step=step, solver=solver)

    def adjoint_gradient(self, traj, cost):
        from fmi_adjoint.adjoint import adjoint_gradient

        return adjoint_gradient(traj, cost)

    def sensitivity_gradient(self, traj, cost, params):
        from fmi_adjoint.adjoint import sensitivity_gradient

        return sensitivity_gradient(traj, cost, params)


def engine_class(choice: str):
    """``(engine class, BuildCache class or None)`` for ``--engine`` (the adapter if engines is missing)."""
    try:
        from fmi_adjoint.cache import BuildCache
        from fmi_adjoint.engines import NativeEngine, PythonEngine
    except ImportError:
        return _ReferenceEngine, None
    return (NativeEngine if choice == "native" else PythonEngine), BuildCache


def engine_label(choice: str) -> str:
    cls, _ = engine_class(choice)
    if cls is _ReferenceEngine:
        return f"{_ReferenceEngine.name} (fmi_adjoint.engines is not installed): us/step are Python, not C"
    return f"{cls.__module__}.{cls.__name__}" + ("" if choice == "native" else ": us/step are Python, not C")


def build_engine(choice: str, model, cache_root: str):
    cls, cache_cls = engine_class(choice)
    return cls.build(model, cache=None if cache_cls is None else cache_cls(Path(cache_root)))


def cost_value(traj, cost) -> float:
    """The cost of a trajectory (sampled outputs, then the cost), as the gradients compute it."""
    from fmi_adjoint.adjoint import sampled_outputs

    _, _, Y = sampled_outputs(traj, cost)
    return cost.evaluate(Y, traj.p).J


# -- the models ----------------------------------------------------------------------------

def model_names(quick: bool) -> list[str]:
    sizes = QUICK_CHAIN_SIZES if quick else CHAIN_SIZES
    return list(EXAMPLES) + [f"chain_{kind}_{n}" for kind in ("linear", "cubic") for n in sizes]


def load(name: str):
    """``(Model, identified names, cost channels)`` of a benchmark model."""
    if name.startswith("chain_"):
        from fmi_adjoint.examples.chains import chain_model

        _, kind, size = name.split("_")
        names, channels = CHAIN_PROBLEMS[kind]
        return chain_model(int(size), kind), names, channels  # type: ignore[arg-type]
    from fmi_adjoint.examples import example_path
    from fmi_adjoint.model_file import load_model

    names, channels = EXAMPLE_PROBLEMS[name]
    return load_model(example_path(name)), names, channels


def peak_mb() -> float:
    """Peak resident memory of this process (ru_maxrss: kB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


# -- the child processes -------------------------------------------------------------------

def child_build(spec: dict) -> dict:
    model, _, _ = load(spec["model"])
    start = time.perf_counter()
    build_engine(spec["engine"], model, spec["cache"])
    return {"seconds": time.perf_counter() - start, "peak_mb": peak_mb()}


def child_measure(spec: dict) -> dict:
    from fmi_adjoint.costs import LeastSquaresCost
    from fmi_adjoint.integrate import HHT

    model, names, channels = load(spec["model"])
    start = time.perf_counter()
    engine = build_engine(spec["engine"], model, spec["cache"])
    warm = time.perf_counter() - start
    compiled = engine.compiled
    settings = model.simulation
    steps = min(round(settings.t_end / settings.step), spec["max_steps"])
    run = {"t_end": steps * settings.step, "step": settings.step, "solver": HHT(alpha=settings.alpha)}
    params = np.array([compiled.parameter_names.index(name) for name in names])
    p = np.array(compiled.defaults, dtype=float)
    p_data = p.copy()
    p_data[params] *= DATA_FACTOR

    truth = engine.simulate(p_data, **run)
    outputs = [compiled.output_names.index(c) for c in channels]
    data = np.asarray(truth.outputs())[:, outputs]
    rms = np.sqrt(np.mean(data**2, axis=0))
    scales = np.where(rms > 0, rms, 1.0)  # channels of different units made comparable
    cost = LeastSquaresCost(np.asarray(truth.t), data, channels, scales=scales)

    t_fwd, traj = best_of(3, lambda: engine.simulate(p, **run))
    t_adj, adjoint = best_of(3, lambda: engine.adjoint_gradient(traj, cost))
    t_sens, sens = best_of(2, lambda: engine.sensitivity_gradient(traj, cost, params))

    def finite_differences() -> np.ndarray:
        gradient = np.zeros(len(params))
        for j, k in enumerate(params):
            delta = FD_STEP * abs(p[k])
            values = []
            for shift in (2, 1, -1, -2):
                shifted = p.copy()
                shifted[k] += shift * delta
                values.append(cost_value(engine.simulate(shifted, **run), cost))
            gradient[j] = (-values[0] + 8 * values[1] - 8 * values[2] + values[3]) / (12 * delta)
        return gradient

    t_fd, fd = best_of(1, finite_differences)
    g_adj = np.asarray(adjoint.gradient)[params]
    g_sens = np.asarray(sens.gradient)[params]
    scale = np.maximum(np.abs(g_adj), 1e-300)
    return {
        "n": compiled.n, "m": compiled.m, "n_p": compiled.n_p, "identified": len(params), "steps": traj.n_steps,
        "warm_in_measure": warm, "forward": t_fwd, "adjoint": t_adj, "sensitivities": t_sens, "fd": t_fd,
        "fd_runs": 4 * len(params), "newton": float(np.mean(traj.newton_iterations)),
        "adj_vs_fd": float(np.max(np.abs(g_adj - fd) / scale)),
        "adj_vs_sens": float(np.max(np.abs(g_adj - g_sens) / scale)),
        "peak_mb": peak_mb(),
    }


def run_child(spec: dict) -> dict:
    """Run one phase in a fresh interpreter; its JSON result, or ``{"error": ...}``."""
    env = dict(os.environ, FMI_ADJOINT_CACHE=spec["cache"])
    done = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True,
                          text=True, env=env, cwd=Path(__file__).resolve().parent)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(RESULT):
            return json.loads(line[len(RESULT):])
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return {"error": lines[-1] if lines else f"exit code {done.returncode}"}


# -- the table -----------------------------------------------------------------------------

HEADER = (f"{'model':<18} {'n':>4} {'m':>3} {'n_p':>4} {'id':>3} {'steps':>6} {'cold s':>7} {'warm s':>7} "
          f"{'us/step':>9} {'adj/fwd':>8} {'sens/fwd':>8} {'FD/fwd':>7} {'peak MB':>8} {'build MB':>8} {'adj~FD':>8}")


def row(name: str, cold: dict, warm: dict, r: dict) -> str:
    fwd = r["forward"]
    return (f"{name:<18} {r['n']:>4} {r['m']:>3} {r['n_p']:>4} {r['identified']:>3} {r['steps']:>6} "
            f"{cold['seconds']:>7.2f} {warm['seconds']:>7.2f} {1e6 * fwd / r['steps']:>9.2f} "
            f"{(fwd + r['adjoint']) / fwd:>8.2f} {(fwd + r['sensitivities']) / fwd:>8.2f} {r['fd'] / fwd:>7.1f} "
            f"{r['peak_mb']:>8.0f} {cold['peak_mb']:>8.0f} {r['adj_vs_fd']:>8.1e}")


def exponent(sizes: list[int], us: list[float]) -> float:
    """Slope of log(us/step) over log(n), least squares."""
    return float(np.polyfit(np.log(sizes), np.log(us), 1)[0])


def summary(results: dict[str, tuple[dict, dict, dict]]) -> list[str]:
    lines = []
    for kind in ("linear", "cubic"):
        chains = sorted((r["n"], 1e6 * r["forward"] / r["steps"]) for name, (_, _, r) in results.items()
                        if name.startswith(f"chain_{kind}_"))
        if len(chains) >= 2:
            sizes, us = [c[0] for c in chains], [c[1] for c in chains]
            slope = exponent(sizes, us)
            verdict = "meets" if slope <= TARGET_EXPONENT else "misses"
            lines.append(f"{kind} chains: us/step ~ n^{slope:.2f} over n = {sizes[0]}..{sizes[-1]} "
                         f"({verdict} the target n^{TARGET_EXPONENT})")
        at64 = dict(chains).get(64)
        if at64 is not None:
            verdict = "meets" if at64 <= TARGET_US[kind] else "misses"
            lines.append(f"{kind} chain of 64: {at64:.2f} us/step ({verdict} the target <= {TARGET_US[kind]:g} us)")
    missed = [name for name, (cold, warm, _) in results.items() if warm["seconds"] >= 0.5 * cold["seconds"]]
    if missed:
        lines.append(f"note: the warm build took at least half the cold one for {', '.join(missed)}: the cache "
                     "did not hit (fmi-adjoint's sources changed during the run?) or building is cheap anyway")
    ratios = {name: (r["forward"] + r["adjoint"]) / r["forward"] for name, (_, _, r) in results.items()}
    if ratios:
        worst = max(ratios, key=lambda k: ratios[k])
        verdict = "meets" if ratios[worst] <= TARGET_ADJOINT else "misses"
        lines.append(f"adjoint gradient / forward: at most {ratios[worst]:.2f} ({worst}; {verdict} the target "
                     f"<= {TARGET_ADJOINT:g})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_STEPS} steps per run, chains up to 64 masses")
    parser.add_argument("--models", help="comma-separated subset, e.g. sdof,chain_linear_16")
    parser.add_argument("--engine", choices=("native", "python"), default="native",
                        help="native (default; the Python engine if fmi_adjoint.engines is missing) or python")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        spec = json.loads(args.child)
        result = child_build(spec) if spec["phase"] == "build" else child_measure(spec)
        print(RESULT + json.dumps(result), flush=True)
        return 0

    known = model_names(quick=False)
    names = model_names(args.quick)
    if args.models:
        names = [name.strip() for name in args.models.split(",") if name.strip()]
        unknown = [name for name in names if name not in known]
        if unknown or not names:
            parser.error(f"--models: unknown model(s) {unknown}; choose from {', '.join(known)}")
    max_steps = QUICK_STEPS if args.quick else MAX_STEPS
    print(f"engine: {engine_label(args.engine)}; at most {max_steps} steps per run; {os.cpu_count()} CPUs; "
          f"Python {sys.version.split()[0]}")
    print(HEADER, flush=True)
    results: dict[str, tuple[dict, dict, dict]] = {}
    with tempfile.TemporaryDirectory(prefix="fmi_adjoint_bench_") as tmp:
        for name in names:
            cache = str(Path(tmp) / name)
            spec = {"model": name, "engine": args.engine, "cache": cache, "max_steps": max_steps}
            cold = run_child(spec | {"phase": "build"})
            warm = run_child(spec | {"phase": "build"}) if "error" not in cold else cold
            measured = run_child(spec | {"phase": "measure"}) if "error" not in warm else warm
            failed = next((r["error"] for r in (cold, warm, measured) if "error" in r), None)
            if failed is not None:
                print(f"{name:<18} failed: {failed}", flush=True)
                continue
            results[name] = (cold, warm, measured)
            print(row(name, cold, warm, measured), flush=True)
    for line in summary(results):
        print(line)
    return 0 if len(results) == len(names) else 1


if __name__ == "__main__":
    sys.exit(main())
