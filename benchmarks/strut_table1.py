"""Table 1 of Vanpaemel et al. (Sec. 5.4) for the one-coordinate ``strut`` example.

1. Gradients of the least-squares cost at the start values of their Table 1, against the
   noise-free deflection simulated at the true values (fmi_adjoint/examples/strut_data.py):
   fourth-order central finite differences (IdentificationProblem.finite_differences,
   relative step 1e-3) and the discrete adjoint, and their ratio (their Table 1: 0.987 to
   1.007).
2. A bounded identification of all 13 parameters, bounds-scaled as in their Sec. 5.2
   (trust-region least squares on forward sensitivities), started from their start values:
   identified values, cost reduction and iterations.  Only L + y0 is identifiable in the
   one-coordinate model (see strut.toml), so L and y0 are compared through their sum.
   (Least squares converges to round-off; L-BFGS-B with adjoint gradients also runs, steered
   away from trial points in box corners where the steep friction makes Newton fail, but
   stops near a 99.9 % cost reduction: measured 60-80 iterations.)
3. The cost of a gradient, all measured in this run, as ratios to one forward simulation:
   adjoint for 13 parameters and for 1 parameter (nearly equal: one backward sweep either
   way; their Sec. 5.4 reports about 3 forward runs per iteration), forward sensitivities
   for 13 and 1, and finite differences for 13 parameters (4 runs per parameter).

Run: ./run bench  (or .venv/bin/python benchmarks/strut_table1.py)
"""

from __future__ import annotations


import numpy as np

from fmi_adjoint import (
    Experiment,
    IdentificationProblem,
    LeastSquaresCost,
    compile_model,
    identify,
    load_model,
)
from fmi_adjoint.examples import example_path
from fmi_adjoint.examples.strut_data import NAMES, OUTPUT, TRUE_VALUES, clean_measurement
from _timing import best_of  # benchmarks/_timing.py (the script folder is on sys.path)


def main() -> None:
    model = compile_model(load_model(example_path("strut")))
    times, deflection = clean_measurement()
    experiment = Experiment(model, LeastSquaresCost(times, deflection, (OUTPUT,)), name="strut")
    problem = IdentificationProblem([experiment], NAMES)
    x0 = problem.start

    # 1. Gradients at the start values.
    t_fd, fd = best_of(1, lambda: problem.evaluate(x0, "fd"))
    adj = problem.evaluate(x0, "adjoint")
    sens = problem.evaluate(x0, "forward")

    # 2. Identification.
    result = identify(problem, "least_squares", scaling="bounds", progress=None, statistics=False)

    print(f"strut: {model.n} coordinate, {len(times)} samples of '{OUTPUT}' on [0, {times[-1]:g}] s, "
          f"{len(NAMES)} parameters; gradients at the start values, identification from noise-free data")
    header = (f"{'parameter':9s} {'start':>10s} {'lower':>9s} {'upper':>9s} {'identified':>12s} {'true':>10s}"
              f" {'FD result':>12s} {'adjoint':>12s} {'ratio':>12s}")
    print(header)
    print("-" * len(header))
    for k, name in enumerate(NAMES):
        print(f"{name:9s} {x0[k]:10.7g} {problem.lower[k]:9.6g} {problem.upper[k]:9.6g} "
              f"{result.parameters[k]:12.7g} {TRUE_VALUES[name]:10.7g} "
              f"{fd.gradient[k]:12.4e} {adj.gradient[k]:12.4e} {adj.gradient[k] / fd.gradient[k]:12.9f}")
    ratios = adj.gradient / fd.gradient
    rel_fwd = np.max(np.abs(adj.gradient - sens.gradient) / np.abs(adj.gradient))
    print(f"ratio adjoint/FD: {ratios.min():.9f} ... {ratios.max():.9f} "
          f"(max |ratio - 1| = {np.max(np.abs(ratios - 1)):.1e}); adjoint vs forward sensitivities: "
          f"max relative difference {rel_fwd:.1e}")
    i_L, i_y0 = NAMES.index("L"), NAMES.index("y0")
    found = result.parameters[i_L] + result.parameters[i_y0]
    print(f"L + y0: identified {found:.9f} m, true {TRUE_VALUES['L'] + TRUE_VALUES['y0']:.9f} m, "
          f"start {x0[i_L] + x0[i_y0]:.9f} m")
    others = [k for k in range(len(NAMES)) if k not in (i_L, i_y0)]
    truth = np.array([TRUE_VALUES[n] for n in NAMES])
    worst = np.max(np.abs(result.parameters[others] / truth[others] - 1))
    print(f"cost {result.cost_initial:.6e} -> {result.cost:.6e}: reduction "
          f"{100 * (1 - result.cost / result.cost_initial):.6f} %, {result.iterations} iterations, "
          f"{result.simulations} simulations, {result.seconds:.1f} s ({result.method}, scaling 'bounds', "
          f"{result.message}); other 11 parameters within {worst:.1e} relative of the true values")

    # 3. Gradient cost, as ratios to one forward simulation (all measured here).
    one = IdentificationProblem([experiment], ["k"])
    p0 = experiment.parameters(NAMES, x0)
    t_fwd, traj = best_of(3, lambda: experiment.simulate(p0))  # the experiment's (native) engine
    t_adj13, _ = best_of(3, lambda: problem.evaluate(x0, "adjoint"))
    t_adj1, _ = best_of(3, lambda: one.evaluate(one.start, "adjoint"))
    t_sen13, _ = best_of(3, lambda: problem.evaluate(x0, "forward"))
    t_sen1, _ = best_of(3, lambda: one.evaluate(one.start, "forward"))
    print(f"gradient cost ({traj.n_steps} HHT steps, {np.mean(traj.newton_iterations):.2f} Newton iterations/step; "
          "each gradient includes its forward run):")
    print(f"  forward simulation             {t_fwd:8.3f} s   ({1e6 * t_fwd / traj.n_steps:.0f} us/step)")
    print(f"  adjoint, 13 parameters         {t_adj13:8.3f} s   ratio to forward = {t_adj13 / t_fwd:6.2f}")
    print(f"  adjoint,  1 parameter          {t_adj1:8.3f} s   ratio to forward = {t_adj1 / t_fwd:6.2f}"
          f"   (13 / 1 parameters: {t_adj13 / t_adj1:.2f})")
    print(f"  forward sensitivities, 13      {t_sen13:8.3f} s   ratio to forward = {t_sen13 / t_fwd:6.2f}")
    print(f"  forward sensitivities,  1      {t_sen1:8.3f} s   ratio to forward = {t_sen1 / t_fwd:6.2f}")
    print(f"  finite differences (4th o.) 13 {t_fd:8.3f} s   ratio to forward = {t_fd / t_fwd:6.2f}"
          f"   ({fd.simulations} simulations)")


if __name__ == "__main__":
    main()
