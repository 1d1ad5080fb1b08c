"""Prescribed motions: a mass on a spring whose base follows x_b = A sin(w t).

Closed form for x(0) = x'(0) = 0 (the drive sets x_b(0) = 0, x_b'(0) = A w through the
consistent initialization): x(t) = A w0^2/(w0^2 - w^2) (sin(w t) - (w/w0) sin(w0 t)),
w0^2 = k/m.  The drive's multiplier is the force that moves the massless base,
lambda = k (x - x_b).
"""

from __future__ import annotations

import numpy as np
import pytest

from fmi_adjoint import (
    HHT,
    Coordinate,
    Experiment,
    IdentificationProblem,
    LeastSquaresCost,
    LinearSpringDamper,
    Model,
    Output,
    Parameter,
    PrescribedMotion,
    SimulationSettings,
    compile_model,
    simulate,
)
from tolerances import ADJOINT_VS_FORWARD, EXACT, FEW_ULPS, GRADIENT_VS_FD

K, M, A, W = 40.0, 2.0, 0.01, 3.0


def base_excited() -> Model:
    return Model(
        name="base_excited",
        coordinates=(Coordinate("x", mass="m"), Coordinate("xb", mass=0.0)),
        parameters=(Parameter("k", K), Parameter("m", M), Parameter("A", A), Parameter("w", W)),
        forces=(LinearSpringDamper("spring", coordinates=("x", "xb"), stiffness="k"),),
        prescribed=(PrescribedMotion("xb", "A*sin(w*t)"),),
        outputs=(Output("x", "x"), Output("drive", "lam(drive_xb)"), Output("acc", "der2(x)")),
        simulation=SimulationSettings(t_end=4.0, step=1e-3, alpha=0.0),
    )


def closed_form(t: np.ndarray) -> np.ndarray:
    w0 = np.sqrt(K / M)
    return A * w0**2 / (w0**2 - W**2) * (np.sin(W * t) - W / w0 * np.sin(w0 * t))


def test_initial_state_follows_the_drive():
    model = compile_model(base_excited())
    traj = simulate(model, step=1e-3)
    assert traj.q[0, 1] == pytest.approx(0.0, abs=FEW_ULPS * A)
    assert traj.v[0, 1] == pytest.approx(A * W, rel=FEW_ULPS)
    assert traj.v[0, 0] == pytest.approx(0.0, abs=FEW_ULPS * A * W)


def test_response_converges_to_closed_form_at_second_order():
    model = compile_model(base_excited())
    errors = []
    steps = (4e-3, 2e-3, 1e-3)
    for h in steps:
        traj = simulate(model, step=h, solver=HHT(alpha=-0.1))
        errors.append(np.max(np.abs(traj.q[:, 0] - closed_form(traj.t))))
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(np.abs(orders - 2.0) < 0.2), orders
    # Error constant: the trapezoidal-family phase error (w0 h)^2/12 per radian, accumulated
    # over w0 T radians, times the response amplitude; allow a factor 2 for alpha = -0.1.
    w0, h, T = np.sqrt(K / M), steps[-1], 4.0
    amplitude = A * w0**2 / (w0**2 - W**2) * (1 + W / w0)
    assert errors[-1] < 2 * (w0 * h) ** 2 / 12 * w0 * T * amplitude


def test_drive_multiplier_is_the_spring_force():
    model = compile_model(base_excited())
    traj = simulate(model, step=1e-3)
    drive = traj.outputs()[:, model.output_index("drive")]
    assert np.allclose(drive, K * (traj.q[:, 0] - traj.q[:, 1]), rtol=EXACT, atol=EXACT * K * A)


def test_gradient_through_the_drive_matches_finite_differences():
    model = compile_model(base_excited())
    truth = simulate(model, model.parameter_vector({"A": 0.012, "w": 3.1}), t_end=2.0)
    times = truth.t[::5]
    data = truth.outputs()[::5][:, [model.output_index("x"), model.output_index("drive")]]
    cost = LeastSquaresCost(times, data, ("x", "drive"), scales=np.std(data, axis=0))
    problem = IdentificationProblem([Experiment(model, cost, t_end=2.0)], ["A", "w", "k", "m"])
    adjoint = problem.evaluate(problem.start, "adjoint").gradient
    forward = problem.evaluate(problem.start, "forward").gradient
    fd = problem.finite_differences(problem.start)
    assert np.allclose(adjoint, forward, rtol=ADJOINT_VS_FORWARD, atol=0)
    assert np.allclose(adjoint, fd, rtol=GRADIENT_VS_FD, atol=0)


def test_fisher_information_matches_the_gauss_newton_hessian():
    model = compile_model(base_excited())
    truth = simulate(model, t_end=1.0)
    times = truth.t[::4]
    data = truth.outputs()[::4][:, [model.output_index("x")]]
    sigma = 1e-4
    cost = LeastSquaresCost(times, data, ("x",))
    problem = IdentificationProblem([Experiment(model, cost, t_end=1.0)], ["k", "A"])
    fisher = problem.fisher_information(problem.start, {"x": sigma})
    # Independent route: dY/dp by central differences of the sampled output.
    def sampled(values):
        p = model.parameter_vector(dict(zip(["k", "A"], values)))
        traj = simulate(model, p, t_end=1.0)
        return np.interp(times, traj.t, traj.outputs()[:, model.output_index("x")])

    x0 = problem.start
    columns = []
    for j in range(2):
        d = 1e-5 * x0[j]
        plus, minus = x0.copy(), x0.copy()
        plus[j] += d
        minus[j] -= d
        columns.append((sampled(plus) - sampled(minus)) / (2 * d))
    S = np.column_stack(columns)
    assert np.allclose(fisher, S.T @ S / sigma**2, rtol=GRADIENT_VS_FD, atol=0)
