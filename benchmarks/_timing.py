"""Shared helper of the benchmark scripts."""

from __future__ import annotations

import time

import numpy as np


def best_of(repeats, func):
    """``(shortest wall time of `repeats` calls, value of the last call)``."""
    times, value = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        value = func()
        times.append(time.perf_counter() - start)
    return min(times), value


def compare_gradient_methods(label: str, problem, x, simulate_once, repeats: int = 3) -> None:
    """Print forward time, adjoint / forward-sensitivity / finite-difference gradient times and
    their ratios to one forward run, and how far the gradients agree (all measured here).

    ``simulate_once()`` returns the trajectory of one forward run; ``label`` describes the model.
    """
    t_fwd, traj = best_of(repeats, simulate_once)
    t_adj, adj = best_of(repeats, lambda: problem.evaluate(x, "adjoint"))
    t_sens, sens = best_of(max(repeats - 1, 1), lambda: problem.evaluate(x, "forward"))
    t_fd, fd = best_of(1, lambda: problem.evaluate(x, "fd"))
    steps = traj.n_steps
    print(f"{label}, {steps} HHT steps, {np.mean(traj.newton_iterations):.2f} Newton iterations/step, "
          f"{len(problem.names)} parameters")
    print(f"  forward simulation          {t_fwd:8.3f} s   ({1e6 * t_fwd / steps:.1f} us/step)")
    print(f"  adjoint gradient            {t_adj:8.3f} s   ratio gradient/forward = {t_adj / t_fwd:.2f}")
    print(f"  forward-sensitivity grad.   {t_sens:8.3f} s   ratio = {t_sens / t_fwd:.2f}")
    print(f"  finite differences (4th o.) {t_fd:8.3f} s   ratio = {t_fd / t_fwd:.2f}"
          f"   ({fd.simulations} simulations)")
    rel_fwd = np.max(np.abs(adj.gradient - sens.gradient) / np.abs(adj.gradient))
    rel_fd = np.max(np.abs(adj.gradient - fd.gradient) / np.abs(adj.gradient))
    print(f"  max relative difference: adjoint vs forward {rel_fwd:.1e}, adjoint vs FD {rel_fd:.1e}")
