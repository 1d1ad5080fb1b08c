"""Gradient cost on the engine mount (Lauss et al. 2018, Sec. 5), measured in one run.

Prints the time of one forward simulation, of the adjoint gradient, the forward-sensitivity
gradient and the fourth-order finite-difference gradient (each including its own forward run),
the ratios to one forward run, and the agreement of the three gradients.  Run: ./run bench
"""

from __future__ import annotations


import numpy as np

from fmi_adjoint import Experiment, IdentificationProblem, LeastSquaresCost, compile_model, load_model, simulate
from fmi_adjoint.examples import example_path
from fmi_adjoint.examples.engine_mount_data import clean_measurement
from _timing import best_of  # benchmarks/_timing.py (the script folder is on sys.path)


def main() -> None:
    model = compile_model(load_model(example_path("engine_mount")))
    times, a1 = clean_measurement()
    names = ["c_E1", "c_E2", "d_E", "d_H2"]
    problem = IdentificationProblem([Experiment(model, LeastSquaresCost(times, a1, ("a1",)))], names)
    x = problem.start
    p = problem.experiments[0].parameters(names, x)
    t_fwd, traj = best_of(3, lambda: simulate(model, p))
    t_adj, adj = best_of(3, lambda: problem.evaluate(x, "adjoint"))
    t_sens, sens = best_of(3, lambda: problem.evaluate(x, "forward"))
    t_fd, fd = best_of(1, lambda: problem.evaluate(x, "fd"))
    steps = traj.n_steps
    print(f"engine_mount: {model.n} coordinates, {model.m} constraint, {steps} HHT steps, "
          f"{np.mean(traj.newton_iterations):.2f} Newton iterations/step, {len(names)} parameters")
    print(f"  forward simulation          {t_fwd:8.3f} s   ({1e6 * t_fwd / steps:.1f} us/step)")
    print(f"  adjoint gradient            {t_adj:8.3f} s   ratio gradient/forward = {t_adj / t_fwd:.2f}")
    print(f"  forward-sensitivity grad.   {t_sens:8.3f} s   ratio = {t_sens / t_fwd:.2f}")
    print(f"  finite differences (4th o.) {t_fd:8.3f} s   ratio = {t_fd / t_fwd:.2f}"
          f"   ({fd.simulations} simulations)")
    rel_fwd = np.max(np.abs(adj.gradient - sens.gradient) / np.abs(adj.gradient))
    rel_fd = np.max(np.abs(adj.gradient - fd.gradient) / np.abs(adj.gradient))
    print(f"  max relative difference: adjoint vs forward {rel_fwd:.1e}, adjoint vs FD {rel_fd:.1e}")


if __name__ == "__main__":
    main()
