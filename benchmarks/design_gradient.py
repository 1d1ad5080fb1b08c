"""Cost of optimal input design (dissertation Ch. 5) on the design examples, measured in one run.

For each example of the table EXAMPLES below it prints

* the time of one forward run with the start input (the native engine), of one criterion
  gradient (``DesignProblem.evaluate``: forward run, forward sensitivities, the Fisher
  matrix and the exact gradient of the criterion by the adjoint of the extended system)
  and their ratio, with the part of the gradient that only builds ``M`` (forward run and
  sensitivities);
* the number of identified parameters p and of knots K;
* the design (``run_design``, L-BFGS from the spec's start input ``3/4`` of the way from
  the lower to the upper bound): accepted iterations, criterion evaluations, wall time,
  the A-criterion (``-trace M``) at the start and at the end, the Cramér-Rao bounds'
  ratio start/final per parameter (> 1: the designed input identifies better), and the
  end-condition misses ``y(T) - target`` where the example has end conditions.

With one measured output the noise level is a common factor of ``M``: it changes neither
the design (the criterion is scaled by its start value) nor the ratios of standard errors,
so the levels in the table are nominal.  An example whose model file does not exist is
skipped with a note.  Iteration limits per example keep the whole script at a few minutes;
``--iterations N`` overrides them.
Run: ./run bench, or
    .venv/bin/python benchmarks/design_gradient.py [--examples FOLDER] [--iterations N]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np

from fmi_adjoint.design import DesignProblem, DesignSpec, criterion_named, run_design
from fmi_adjoint.examples import EXAMPLES_DIR
from fmi_adjoint.model_file import load_model
from _timing import best_of  # benchmarks/_timing.py (the script folder is on sys.path)


@dataclasses.dataclass(frozen=True)
class Example:
    """One design problem: a bundled model, its input, parameters, measurement and bounds."""

    name: str
    input: str
    params: tuple[str, ...]
    noise: dict[str, float]
    bounds: tuple[float, float]
    knots: int
    end: dict[str, float]
    max_iterations: int
    criterion: str = "A"
    #: Start knot values (default: the spec's constant start).
    start: tuple[float, ...] | None = None
    #: Also print the standard errors of the thesis's sine comparison input.
    comparison_sine: bool = False


EXAMPLES = (
    # Lauss et al. (2018): an extra force on the load mass on top of the paper's sweep.
    Example("engine_mount", "F_ext", ("c_E1", "d_E", "d_H2"), {"a1": 0.005}, (-50.0, 50.0), 20, {}, 40, "D"),
    # Dissertation Sec. 5.3.2: the undamped oscillator (optimum: bang-bang, one switch).
    Example("single_mass", "u", ("c",), {"x": 0.01}, (-1.0, 1.0), 20, {}, 150,
            start=tuple(np.linspace(0.5, -0.5, 20))),  # from the constant start it stays at u = +1 (a local optimum)
    # Sec. 5.3.3: two masses, T = 1 s, at rest at the end.
    Example("two_mass", "F", ("c2",), {"x2": 1e-4}, (-10.0, 10.0), 20, {"v1": 0.0, "v2": 0.0}, 150),
    # Sec. 5.3.4: cart pendulum, hanging still at the end.
    Example("cart_pendulum", "F", ("d_p", "s_p"), {"phi": 0.01}, (-2.0, 2.0), 20,
            {"phi": 0.0, "v_c": 0.0, "omega": 0.0}, 150, "D", comparison_sine=True),
)


def measure(example: Example, path: Path, iterations: int | None) -> None:
    spec = DesignSpec(input=example.input, params=example.params, knots=example.knots, bounds=example.bounds,
                      noise=example.noise, end=example.end, criterion=criterion_named(example.criterion),
                      start=example.start)
    started = time.perf_counter()
    problem = DesignProblem.build(spec, load_model(path))
    built = time.perf_counter() - started
    z0 = problem.start()
    p0 = problem.parameters(z0)
    t_fwd, traj = best_of(3, lambda: problem.simulate(p0))
    t_fisher, _ = best_of(2, lambda: problem.fisher(z0))
    t_grad, _ = best_of(2, lambda: problem.evaluate(z0))
    lo, hi = example.bounds
    print(f"{example.name} ({problem.engine.name} engine): {traj.n_steps} steps, p = {len(example.params)} "
          f"({', '.join(example.params)}), K = {example.knots} knots, {example.input} in [{lo:g}, {hi:g}], measured "
          f"{', '.join(example.noise)}; build {built:.1f} s")
    print(f"  forward run                 {t_fwd:8.4f} s")
    print(f"  criterion gradient          {t_grad:8.4f} s   ratio gradient/forward = {t_grad / t_fwd:.0f}   "
          f"(M alone: forward + sensitivities {t_fisher:.4f} s)")
    limit = example.max_iterations if iterations is None else iterations
    started = time.perf_counter()
    result = run_design(problem, max_iterations=limit)
    seconds = time.perf_counter() - started
    ratio = result.standard_errors_start / result.standard_errors_final
    print(f"  design: {len(result.history) - 1} iterations (limit {limit}), {result.evaluations} evaluations, "
          f"{seconds:.1f} s; {'converged' if result.success else 'stopped'}: {result.message}")
    print(f"  {example.criterion}-criterion: start {result.start.criterion:.4e}, final {result.final.criterion:.4e}; "
          f"penalty {result.final.penalty:.2e}")
    print("  standard errors start/final: " + ", ".join(f"{name} {r:.2f}" for name, r in zip(example.params, ratio)))
    if example.end:
        print("  end misses y(T) - target: " + ", ".join(f"{name} {miss:+.2e}"
                                                        for name, miss in result.end_misses().items()))
    if example.comparison_sine:
        # The thesis's F_comp (Sec. 5.3.4): a sine of period T with the bound as amplitude.
        lo, hi = example.bounds
        sine = hi * np.sin(2.0 * np.pi * problem.knot_times / problem.knot_times[-1])
        se_comp = problem.standard_errors(problem.fisher(problem.spec.bound_map.inverse(sine, lo, hi))[0])
        print("  standard errors F_0 / F_comp / F_opt: " + ", ".join(
            f"{name} {a:.3g} / {b:.3g} / {c:.3g}" for name, a, b, c in
            zip(example.params, result.standard_errors_start, se_comp, result.standard_errors_final)))
    knots = np.round(result.final.knots, 2)
    print(f"  final knots: {' '.join(f'{k:g}' for k in knots)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=Path, default=EXAMPLES_DIR,
                        help="folder of the model files (default: the bundled examples)")
    parser.add_argument("--iterations", type=int, default=None, help="design iteration limit for every example")
    args = parser.parse_args()
    for example in EXAMPLES:
        path = args.examples / f"{example.name}.toml"
        if not path.is_file():
            print(f"{example.name}: skipped, {path} does not exist (yet).")
            continue
        measure(example, path, args.iterations)


if __name__ == "__main__":
    main()
