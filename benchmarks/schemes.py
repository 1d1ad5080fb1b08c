"""Cost of generalized-alpha against HHT on the native engine, measured in one run.

For every bundled example, over at most 5000 steps of the model's step: the forward run in
microseconds per step, Newton iterations per step, and one adjoint gradient (sweep plus its
forward run) relative to one forward run, with the model's HHT and with
``GeneralizedAlpha(rho_inf=0.8)`` (Arnold & Brüls 2007; the same Newton matrix, one more
vector recursion per step and one more adjoint variable).  The cost is least squares of all
outputs against a run at 1 % larger outputs.  Each time is the best of 5.  Run:
    .venv/bin/python benchmarks/schemes.py [EXAMPLE ...]
"""

from __future__ import annotations

import functools
import sys

import numpy as np

from fmi_adjoint.costs import LeastSquaresCost
from fmi_adjoint.engines import NativeEngine
from fmi_adjoint.examples import example_names, example_path
from fmi_adjoint.integrate import HHT, GeneralizedAlpha
from fmi_adjoint.model_file import load_model
from _timing import best_of  # benchmarks/_timing.py (the script folder is on sys.path)

REPEATS = 5
MAX_STEPS = 5000


def _gradient(engine, run, cost):
    return engine.adjoint_gradient(run(), cost)


def bench(name: str) -> list[float]:
    engine = NativeEngine.build(load_model(example_path(name)))
    settings = engine.compiled.model.simulation
    t_end = min(MAX_STEPS, round(settings.t_end / settings.step)) * settings.step
    forward = []
    for solver in (HHT(alpha=settings.alpha), GeneralizedAlpha(rho_inf=0.8)):
        run = functools.partial(engine.simulate, t_end=t_end, solver=solver)
        t_fwd, traj = best_of(REPEATS, run)
        Y = traj.outputs()
        cost = LeastSquaresCost(traj.t[::5], 1.01 * Y[::5], engine.compiled.output_names,
                                scales=np.max(np.abs(Y), axis=0) + 1e-12)
        t_adj, _ = best_of(REPEATS, functools.partial(_gradient, engine, run, cost))
        forward.append(t_fwd)
        print(f"{name:16s} {solver.describe():32s} {traj.n_steps:6d} {1e6 * t_fwd / traj.n_steps:9.2f} "
              f"{traj.newton_iterations.mean():7.2f} {t_adj / t_fwd:8.2f}")
    return forward


def main(names: list[str]) -> None:
    print("native engine; forward us/step, Newton iterations/step, (adjoint gradient incl. its run) / forward")
    print(f"{'model':16s} {'scheme':32s} {'steps':>6s} {'us/step':>9s} {'newton':>7s} {'adj/fwd':>8s}")
    ratios = {}
    for name in names:
        hht, ga = bench(name)
        ratios[name] = ga / hht
    low, high = min(ratios, key=ratios.get), max(ratios, key=ratios.get)
    print(f"generalized-alpha / HHT forward time: {ratios[low]:.2f} ({low}) to {ratios[high]:.2f} ({high})")


if __name__ == "__main__":
    main(sys.argv[1:] or list(example_names()))
