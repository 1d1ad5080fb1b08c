"""Gradient cost on the engine mount (Lauss et al. 2018, Sec. 5), measured in one run.

Prints the time of one forward simulation, of the adjoint gradient, the forward-sensitivity
gradient and the fourth-order finite-difference gradient (each including its own forward run),
the ratios to one forward run, and the agreement of the three gradients.  Run: ./run bench
"""

from __future__ import annotations



from fmi_adjoint import Experiment, IdentificationProblem, LeastSquaresCost, compile_model, load_model
from fmi_adjoint.examples import example_path
from fmi_adjoint.examples.engine_mount_data import clean_measurement
from _timing import compare_gradient_methods  # benchmarks/_timing.py (the script folder is on sys.path)


def main() -> None:
    model = compile_model(load_model(example_path("engine_mount")))
    times, a1 = clean_measurement()
    names = ["c_E1", "c_E2", "d_E", "d_H2"]
    problem = IdentificationProblem([Experiment(model, LeastSquaresCost(times, a1, ("a1",)))], names)
    x = problem.start
    p = problem.experiments[0].parameters(names, x)
    exp = problem.experiments[0]  # its engine (the native one) runs the forward run and the gradients
    compare_gradient_methods(f"engine_mount ({exp.engine.name} engine): {model.n} coordinates, {model.m} constraint",
                             problem, x, lambda: exp.simulate(p))


if __name__ == "__main__":
    main()
