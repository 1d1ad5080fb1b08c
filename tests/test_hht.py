"""The HHT integrator (fmi_adjoint.integrate.hht): order, equivalence with an independent
Newmark / HHT implementation, constraint satisfaction, Newton failures, the time grid."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fmi_adjoint.compiled import compile_model
from fmi_adjoint.errors import ConvergenceError, ModelError
from fmi_adjoint.forces import ExpressionLoad, LinearSpringDamper
from fmi_adjoint.integrate import HHT, simulate, time_grid
from fmi_adjoint.model import Coordinate, Model, Output, Parameter
from tolerances import (
    EXACT, FIRST_DIFFERENCE_OF_CLOSED_FORM, NEWTON_LEVEL, ORDER, SECOND_DIFFERENCE_OF_CLOSED_FORM,
)

# -- (a) second-order convergence on the sdof oscillator --------------------------------------


def sdof_exact(t: np.ndarray) -> np.ndarray:
    """x'' + x' + x = sin t, x(0) = x'(0) = 0 (m = 1, c = 1, damper 2 d = 1)."""
    s3 = math.sqrt(3.0)
    return np.exp(-t / 2) * (np.sin(s3 * t / 2) / s3 + np.cos(s3 * t / 2)) - np.cos(t)


def test_closed_form_solves_the_oscillator():
    """The reference itself: residual of the ODE and the initial conditions."""
    t = np.linspace(0.0, 10.0, 2001)
    h = 1e-4
    x = sdof_exact(t)
    xd = (sdof_exact(t + h) - sdof_exact(t - h)) / (2 * h)
    xdd = (sdof_exact(t + h) - 2 * x + sdof_exact(t - h)) / h**2
    assert np.max(np.abs(xdd + xd + x - np.sin(t))) < SECOND_DIFFERENCE_OF_CLOSED_FORM
    assert abs(sdof_exact(np.array([0.0]))[0]) < EXACT
    slope_at_0 = (sdof_exact(np.array([h]))[0] - sdof_exact(np.array([-h]))[0]) / (2 * h)
    assert abs(slope_at_0) < FIRST_DIFFERENCE_OF_CLOSED_FORM


@pytest.mark.parametrize("alpha", [0.0, -0.1, -0.3])
def test_second_order_convergence_against_the_closed_form(alpha, compiled_example):
    model = compiled_example("sdof")
    steps = np.array([0.04, 0.02, 0.01])
    errors = []
    for h in steps:
        traj = simulate(model, t_end=10.0, step=h, solver=HHT(alpha=alpha))
        assert traj.t[-1] == 10.0
        errors.append(np.max(np.abs(traj.q[:, 0] - sdof_exact(traj.t))))
    errors = np.array(errors)
    order = np.polyfit(np.log(steps), np.log(errors), 1)[0]
    assert abs(order - 2.0) <= ORDER, f"alpha={alpha}: errors {errors}, measured order {order:.3f}"
    pairwise = np.log2(errors[:-1] / errors[1:])
    assert np.all(np.abs(pairwise - 2.0) <= ORDER), pairwise


# -- (b) equivalence with an independent implementation ----------------------------------------

M1, M2, K1, K2, D1, D2 = 2.0, 0.5, 100.0, 50.0, 0.3, 0.2
Q0 = np.array([0.01, -0.02])
V0 = np.array([0.1, 0.0])


def two_mass_model() -> Model:
    """ground -[k1, d1]- x1 -[k2, d2]- x2, loads 3 sin(2t) on x1 and cos(t) on x2."""
    values = dict(m1=M1, m2=M2, k1=K1, k2=K2, d1=D1, d2=D2)
    return Model(
        name="two_mass",
        coordinates=(
            Coordinate("x1", mass="m1", initial_position=float(Q0[0]), initial_velocity=float(V0[0])),
            Coordinate("x2", mass="m2", initial_position=float(Q0[1]), initial_velocity=float(V0[1])),
        ),
        parameters=tuple(Parameter(name, value) for name, value in values.items()),
        forces=(
            LinearSpringDamper("s1", coordinates=("x1",), stiffness="k1", damping="d1"),
            LinearSpringDamper("s2", coordinates=("x2", "x1"), stiffness="k2", damping="d2"),
            ExpressionLoad("f1", coordinate="x1", expression="3*sin(2*t)"),
            ExpressionLoad("f2", coordinate="x2", expression="cos(t)"),
        ),
        outputs=(Output("x1", "x1"),),
    )


MASS = np.diag([M1, M2])
STIFF = np.array([[K1 + K2, -K2], [-K2, K2]])
DAMP = np.array([[D1 + D2, -D2], [-D2, D2]])


def load(t: float) -> np.ndarray:
    return np.array([3 * math.sin(2 * t), math.cos(t)])


def trapezoidal_newmark(h: float, n_steps: int):
    """Average-acceleration Newmark (beta = 1/4, gamma = 1/2) for M a + D v + K q = f(t):
    one linear solve per step."""
    q, v = Q0.copy(), V0.copy()
    a = np.linalg.solve(MASS, load(0.0) - DAMP @ v - STIFF @ q)
    out = [(q, v, a)]
    lhs = MASS + h / 2 * DAMP + h * h / 4 * STIFF
    for i in range(1, n_steps + 1):
        q_star = q + h * v + h * h / 4 * a
        v_star = v + h / 2 * a
        a = np.linalg.solve(lhs, load(i * h) - DAMP @ v_star - STIFF @ q_star)
        q = q_star + h * h / 4 * a
        v = v_star + h / 2 * a
        out.append((q, v, a))
    return tuple(np.array(x) for x in zip(*out))


def hht_linear(h: float, n_steps: int, alpha: float):
    """HHT-alpha as documented (residual f3 = M a_i/(1+alpha) + F_i - alpha/(1+alpha) F_{i-1},
    F = D v + K q - f) for the linear system: one linear solve per step."""
    beta, gamma = (1 - alpha) ** 2 / 4, (1 - 2 * alpha) / 2
    q, v = Q0.copy(), V0.copy()
    a = np.linalg.solve(MASS, load(0.0) - DAMP @ v - STIFF @ q)
    out = [(q, v, a)]
    lhs = MASS / (1 + alpha) + beta * h * h * STIFF + gamma * h * DAMP
    for i in range(1, n_steps + 1):
        F_old = DAMP @ v + STIFF @ q - load((i - 1) * h)
        q_star = q + h * v + (0.5 - beta) * h * h * a
        v_star = v + (1 - gamma) * h * a
        a = np.linalg.solve(lhs, load(i * h) - DAMP @ v_star - STIFF @ q_star + alpha / (1 + alpha) * F_old)
        q = q_star + beta * h * h * a
        v = v_star + gamma * h * a
        out.append((q, v, a))
    return tuple(np.array(x) for x in zip(*out))


def assert_states_equal(traj, reference):
    for label, got, want in zip(("q", "v", "a"), (traj.q, traj.v, traj.a), reference):
        assert got.shape == want.shape
        err = np.max(np.abs(got - want)) / np.max(np.abs(want))
        assert err <= EXACT, f"{label}: relative difference {err:.3g}"


def test_alpha_zero_is_the_trapezoidal_newmark_scheme():
    h, n_steps = 0.01, 500
    traj = simulate(compile_model(two_mass_model()), t_end=n_steps * h, step=h, solver=HHT(alpha=0.0))
    assert traj.scheme.beta == 0.25 and traj.scheme.gamma == 0.5
    assert traj.n_steps == n_steps
    np.testing.assert_allclose(traj.t, h * np.arange(n_steps + 1), rtol=EXACT, atol=EXACT)
    assert_states_equal(traj, trapezoidal_newmark(h, n_steps))


@pytest.mark.parametrize("alpha", [-0.05, -0.1, -1.0 / 3.0])
def test_hht_matches_an_independent_implementation(alpha):
    h, n_steps = 0.01, 500
    traj = simulate(compile_model(two_mass_model()), t_end=n_steps * h, step=h, solver=HHT(alpha=alpha))
    assert_states_equal(traj, hht_linear(h, n_steps, alpha))


def test_independent_implementations_differ_for_nonzero_alpha():
    """Guards the two comparisons above: alpha really changes the solution."""
    a0 = trapezoidal_newmark(0.01, 500)[0]
    a1 = hht_linear(0.01, 500, -0.3)[0]
    assert np.max(np.abs(a0 - a1)) > 1e3 * EXACT * np.max(np.abs(a0))


# -- (c) position constraints hold along the trajectory ----------------------------------------


@pytest.mark.parametrize("name", ["engine_mount", "slider_crank"])
def test_position_constraints_hold_at_newton_tolerance(name, compiled_example):
    model = compiled_example(name)
    traj = simulate(model)
    C = traj.constraint_residual()
    assert C.shape == (traj.n_steps + 1, model.m)
    # Scale: how much C changes for a relative change of the coordinates.
    Cq = model.jacobian_terms(traj.q, traj.v, traj.a, traj.lam, traj.t, traj.p)[4]
    scale = np.max(np.abs(Cq)) * np.max(np.abs(traj.q))
    assert scale > 0
    worst = np.max(np.abs(C))
    assert worst <= NEWTON_LEVEL * scale, f"max |C| = {worst:.3g}, scale {scale:.3g}"
    # The solution moves, so this is not a trivially consistent configuration.
    assert np.ptp(traj.q, axis=0).max() > 1e3 * NEWTON_LEVEL * np.max(np.abs(traj.q))


# -- (d) Newton failure ------------------------------------------------------------------------


def hard_spring_model() -> Model:
    return Model(
        name="hard_spring",
        coordinates=(Coordinate("x", mass=1.0),),
        forces=(
            ExpressionLoad("cubic", coordinate="x", expression="-1e12*x**3"),
            ExpressionLoad("push", coordinate="x", expression="1e9*sin(t)"),
        ),
        outputs=(Output("x", "x"),),
    )


def test_newton_divergence_raises_convergence_error_with_time_and_step():
    model = compile_model(hard_spring_model())
    with pytest.raises(ConvergenceError) as info:
        simulate(model, t_end=1.0, step=0.1)
    message = str(info.value)
    assert "t = 0.1" in message
    assert "step 1 of 10" in message
    assert "hard_spring" in message
    assert isinstance(info.value, RuntimeError)


def test_the_same_model_runs_with_a_small_step():
    """The failure above is the step, not the model."""
    model = compile_model(hard_spring_model())
    traj = simulate(model, t_end=0.01, step=1e-5)
    assert np.all(np.isfinite(traj.q))


def test_too_few_iterations_raise_convergence_error(compiled_example):
    model = compiled_example("slider_crank")
    with pytest.raises(ConvergenceError, match=r"t = .* s \(step 1 of"):
        simulate(model, t_end=0.01, solver=HHT(alpha=-0.1, max_iterations=1))


# -- (e) time grid -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "t0, t_end, step",
    [
        (0.0, 1.0, 0.1),
        (0.0, 6 * math.pi, 1e-3),
        (0.0, 6 * math.pi, 1e-4),
        (0.3, 1.0, 0.07),
        (-2.0, 3.3, 0.25),
        (0.0, 1.0, 0.3),  # 3.33 steps: the last step absorbs the remainder
        (0.0, 1.0, 0.4),  # 2.5 steps
        (0.0, 1.0, 0.75),  # 1.33 steps -> one step
        (100.0, 100.001, 1e-6),
    ],
)
def test_time_grid_ends_exactly_at_t_end(t0, t_end, step):
    grid = time_grid(t0, t_end, step)
    assert grid[0] == t0
    assert grid[-1] == t_end
    assert np.all(np.diff(grid) > 0)
    steps = np.diff(grid)
    # Step lengths are exact up to the rounding of the step times themselves.
    ulp = 4 * np.spacing(max(abs(t0), abs(t_end)))
    if len(steps) > 1:
        np.testing.assert_allclose(steps[:-1], step, rtol=EXACT, atol=ulp)
        assert steps[0] == pytest.approx(step, rel=EXACT, abs=ulp)
    assert step / 2 - ulp <= steps[-1] <= 1.5 * step + ulp


def test_time_grid_random_spans():
    rng = np.random.default_rng(42)
    for _ in range(200):
        step = 10 ** rng.uniform(-4, -1)
        span = step * rng.uniform(1.0, 500.0)
        t0 = rng.uniform(-10, 10)
        grid = time_grid(t0, t0 + span, step)
        assert grid[-1] == t0 + span
        ulp = 4 * np.spacing(abs(t0) + span)
        assert len(grid) == 2 or grid[1] - grid[0] == pytest.approx(step, rel=EXACT, abs=ulp)
        assert step / 2 - ulp <= grid[-1] - grid[-2] <= 1.5 * step + ulp


@pytest.mark.parametrize(
    "t0, t_end, step, fragment",
    [
        (0.0, 1.0, 0.0, "step"),
        (0.0, 1.0, -0.1, "step"),
        (1.0, 1.0, 0.1, "t_end"),
        (1.0, 0.5, 0.1, "t_end"),
        (0.0, math.inf, 0.1, "t_end"),
        (math.nan, 1.0, 0.1, "t0"),
        (0.0, 1.0, math.nan, "step"),
        (0.0, 1.0, 1e-9, "steps"),
    ],
)
def test_time_grid_rejects_bad_arguments(t0, t_end, step, fragment):
    with pytest.raises(ModelError, match=fragment):
        time_grid(t0, t_end, step)


def test_simulate_follows_the_grid(compiled_example):
    model = compiled_example("sdof")
    traj = simulate(model, t_end=1.0, step=0.3)
    np.testing.assert_array_equal(traj.t, time_grid(0.0, 1.0, 0.3))
    assert traj.q.shape == (traj.n_steps + 1, 1)
    assert traj.newton_iterations.shape == (traj.n_steps,)


# -- (f) HHT constants ---------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [0.0, -0.05, -0.1, -0.2, -1.0 / 3.0])
def test_beta_and_gamma(alpha):
    solver = HHT(alpha=alpha)
    assert solver.beta == pytest.approx((1 - alpha) ** 2 / 4, rel=EXACT)
    assert solver.gamma == pytest.approx((1 - 2 * alpha) / 2, rel=EXACT)
    # Unconditional stability and second order of HHT: gamma = 1/2 - alpha, beta = (1 - alpha)^2 / 4.
    assert solver.gamma == pytest.approx(0.5 - alpha, rel=EXACT)


def test_alpha_zero_constants_are_exact():
    solver = HHT(alpha=0.0)
    assert solver.beta == 0.25
    assert solver.gamma == 0.5


@pytest.mark.parametrize("alpha", [0.1, -0.34, -1.0, math.nan])
def test_alpha_outside_the_stable_range_is_rejected(alpha):
    with pytest.raises(ModelError, match="alpha"):
        HHT(alpha=alpha)


@pytest.mark.parametrize("kwargs", [{"rtol": 0.0}, {"rtol": 1e-2}, {"max_iterations": 0}])
def test_bad_newton_settings_are_rejected(kwargs):
    with pytest.raises(ModelError):
        HHT(alpha=-0.1, **kwargs)


def test_simulate_rejects_bad_parameter_vectors(compiled_example):
    model = compiled_example("sdof")
    with pytest.raises(ModelError, match="shape"):
        simulate(model, np.ones(2), t_end=0.1)
    p = model.defaults.copy()
    p[model.parameter_index("c")] = math.nan
    with pytest.raises(ModelError, match="'c'"):
        simulate(model, p, t_end=0.1)


@pytest.mark.parametrize("kind", ["python", "native"])
def test_a_model_at_exact_static_equilibrium_converges(kind):
    """A lattice hanging at rest at its static deflection (issue 24): no inertia, a net force
    that is a cancelled sum, so the term-scaled force test alone asked for less than round-off
    and Newton never converged ("no convergence after 25 iterations" in both engines).  With
    the round-off floor of the elastic forces it converges at once and the lattice stays put."""
    from fmi_adjoint.engines import choose_engine
    from fmi_adjoint.examples.families import lattice_toml
    from fmi_adjoint.model_file import parse_model

    model = parse_model(lattice_toml(2, 2, 3, deflected=True)).with_values({"F0": 0.0})
    traj = choose_engine(model, kind).engine.simulate(t_end=0.02)
    assert np.all(traj.newton_iterations <= 2)
    drift = np.abs(traj.q - traj.q[0]).max()
    assert drift <= NEWTON_LEVEL * np.abs(traj.q).max(), drift
