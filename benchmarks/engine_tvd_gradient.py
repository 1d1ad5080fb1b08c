"""Gradient cost on the four-cylinder engine with TVD (Oberpeilsteiner 2018, Sec. 4.4.2), in one run.

The 6th-order cost of the bundled identification (run-up 2250 -> 3500 rpm over [0.1, 0.6] s,
h = 8e-5 s, 7500 steps, 41 speeds 2400-3400 rpm, c1*, c2*, d1*, d2*) at the manufacturer's values.  Prints the time of
one forward simulation, of the adjoint gradient, the forward-sensitivity gradient and the
fourth-order finite-difference gradient (each including its own forward run), the ratios
to one forward run, and the agreement of the three gradients.  Run: ./run bench
"""

from __future__ import annotations

import numpy as np

from fmi_adjoint import simulate
from fmi_adjoint.examples import engine_tvd_data as data
from _timing import best_of  # benchmarks/_timing.py (the script folder is on sys.path)


def main() -> None:
    model = data.engine_model()
    measured = data.measured_orders(orders=(data.ORDER,))[data.ORDER]
    problem = data.order_problem(measured)
    x = problem.start
    exp = problem.experiments[0]
    p = exp.parameters(problem.names, x)
    t_fwd, traj = best_of(2, lambda: simulate(model, p, t_end=exp.t_end, step=exp.step))
    t_adj, adj = best_of(2, lambda: problem.evaluate(x, "adjoint"))
    t_sens, sens = best_of(1, lambda: problem.evaluate(x, "forward"))
    t_fd, fd = best_of(1, lambda: problem.evaluate(x, "fd"))
    steps = traj.n_steps
    print(f"engine_tvd: {model.n} coordinates (26 of Sec. 4.4.2 incl. 2 TVD nodes + prescribed DMF secondary), "
          f"{model.m} constraints (16 + drive), {steps} HHT steps, "
          f"{np.mean(traj.newton_iterations):.2f} Newton iterations/step, {len(problem.names)} parameters")
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
