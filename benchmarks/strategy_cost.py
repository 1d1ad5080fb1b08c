"""Cost of the default identification strategy (growing data windows) against single shooting
on the engine mount's joint fit (issue 32), measured in one run.

The fit: both bundled engine-mount sweeps (A = 100 N and 300 N, 5001 samples each), the four
parameters c_E1, c_E2, d_E, d_H2 from the paper's start values, in this process (native
engine).  For each optimizer (L-BFGS-B with adjoint gradients, the default; trust-region least
squares with forward sensitivities) it runs single shooting and the automatic strategy
(:class:`~fmi_adjoint.identify.strategies.AutomaticStrategy`: windows of 1/8, 1/4, 1/2 of each
sweep, then all of it), and prints per stage and in total: iterations, simulations, wall time,
seconds and simulations per iteration (a window's simulations are shorter, so its iterations
are cheaper); then the total time to the result and how far the result lies from the true
values in standard errors.
Run:
    .venv/bin/python benchmarks/strategy_cost.py
"""

from __future__ import annotations

import time

import numpy as np

from fmi_adjoint.cli.loading import load_problem, problem_spec
from fmi_adjoint.examples import EXAMPLES_DIR, example_path
from fmi_adjoint.examples.engine_mount_data import AMPLITUDES, CSV_NAMES, TRUE_VALUES
from fmi_adjoint.identify.strategies import AutomaticStrategy, SingleShooting, run_stages

NAMES = list(TRUE_VALUES)


def joint_problem():
    specs = [f"{EXAMPLES_DIR / CSV_NAMES[a]}@A={a!r}" for a in AMPLITUDES]
    _, problem = load_problem(problem_spec(str(example_path("engine_mount")), specs, {}, NAMES, t_end=None,
                                           step=None))
    return problem


def main() -> None:
    problem = joint_problem()
    record = sum(e.t_end for e in problem.experiments)
    truth = np.array([TRUE_VALUES[n] for n in NAMES])
    problem.cost(problem.start)  # build and warm the engine once, outside the timings
    print("engine mount, joint fit of both sweeps from the paper's start values "
          f"({len(problem.experiments)} experiments, {record:g} s of record in all)")
    per_iteration: dict[tuple[str, str], float] = {}
    for method in ("lbfgsb", "least_squares"):
        for strategy in (SingleShooting(), AutomaticStrategy()):
            started = time.perf_counter()
            staged = run_stages(strategy, problem, problem.start, method, progress=None)
            total = time.perf_counter() - started
            r = staged.result
            se = np.array([np.nan if s is None else s for s in (r.std_errors or [None] * len(NAMES))])
            z = np.nanmax(np.abs((r.parameters - truth) / se))
            print(f"\n{method}, strategy {strategy.name} -> {staged.strategy.name}: cost {r.cost_initial:.4g} -> "
                  f"{r.cost:.6g}, worst parameter {z:.1f} standard errors from the truth")
            print(f"  {'stage':24s} {'iter':>5s} {'sims':>5s} {'s/iter':>8s} {'sims/iter':>9s}")
            for s in staged.stages:
                print(f"  {s.stage:24s} {s.iterations:5d} {s.simulations:5d} {s.seconds / max(s.iterations, 1):8.4f} "
                      f"{s.simulations / max(s.iterations, 1):9.2f}")
            print(f"  {'total':24s} {r.iterations:5d} {r.simulations:5d} {total / max(r.iterations, 1):8.4f} "
                  f"{r.simulations / max(r.iterations, 1):9.2f}   time to the result {total:.2f} s")
            per_iteration[method, strategy.name] = total / max(r.iterations, 1)
    print("\nratio of the seconds per iteration, chosen strategy (windows) / single shooting, measured in this run:")
    for method in ("lbfgsb", "least_squares"):
        print(f"  {method:14s} {per_iteration[method, 'auto'] / per_iteration[method, 'single']:.2f}")


if __name__ == "__main__":
    main()
