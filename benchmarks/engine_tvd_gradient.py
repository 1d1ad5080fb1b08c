"""Gradient cost on the four-cylinder engine with TVD (Oberpeilsteiner 2018, Sec. 4.4.2), in one run.

The 6th-order cost of the bundled identification (run-up 2250 -> 3500 rpm over [0.1, 0.6] s,
h = 8e-5 s, 7500 steps, 41 speeds 2400-3400 rpm, c1*, c2*, d1*, d2*) at the manufacturer's values.  Prints the time of
one forward simulation, of the adjoint gradient, the forward-sensitivity gradient and the
fourth-order finite-difference gradient (each including its own forward run), the ratios
to one forward run, and the agreement of the three gradients.  Run: ./run bench
"""

from __future__ import annotations


from fmi_adjoint.examples import engine_tvd_data as data
from _timing import compare_gradient_methods  # benchmarks/_timing.py (the script folder is on sys.path)


def main() -> None:
    model = data.engine_model()
    measured = data.measured_orders(orders=(data.ORDER,))[data.ORDER]
    problem = data.order_problem(measured)
    x = problem.start
    exp = problem.experiments[0]
    p = exp.parameters(problem.names, x)
    compare_gradient_methods(
        f"engine_tvd ({exp.engine.name} engine): {model.n} coordinates (26 of Sec. 4.4.2 incl. 2 TVD nodes + "
        f"prescribed DMF secondary), {model.m} constraints (16 + drive)",
        problem, x, lambda: exp.simulate(p), repeats=2,
    )


if __name__ == "__main__":
    main()
