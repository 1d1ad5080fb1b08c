"""Consistent initial state (fmi_adjoint.integrate.initialization) of the slider-crank,
checked against the loop-closure geometry and Lagrange's equations written out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fmi_adjoint.compiled import compile_model
from fmi_adjoint.errors import ConvergenceError
from fmi_adjoint.forces import LinearSpringDamper
from fmi_adjoint.integrate import initial_state, simulate
from fmi_adjoint.model import Constraint, Coordinate, Model, Output
from tolerances import EXACT, FD_OF_CONSTRAINTS

# A configuration away from the defaults, so that nothing is zero by symmetry.
VALUES = {"phi0": 0.7, "omega0": 2.5, "c_s": 800.0, "d_s": 3.0, "d_phi": 0.05}


@pytest.fixture(scope="module")
def crank(compiled_example):
    model = compiled_example("slider_crank")
    p = model.parameter_vector(VALUES)
    par = {name: float(p[model.parameter_index(name)]) for name in model.parameter_names}
    init = initial_state(model, p, 0.0)
    return model, p, par, init


def constraints(q, par):
    """Loop closure written out: r cos phi + l cos theta - xs = 0, r sin phi + l sin theta = 0."""
    phi, theta, xs = q
    r, l = par["r"], par["l"]
    return np.array([r * math.cos(phi) + l * math.cos(theta) - xs, r * math.sin(phi) + l * math.sin(theta)])


def constraint_jacobian(q, par):
    phi, theta, _ = q
    r, l = par["r"], par["l"]
    return np.array([[-r * math.sin(phi), -l * math.sin(theta), -1.0], [r * math.cos(phi), l * math.cos(theta), 0.0]])


def test_coordinate_order(crank):
    model, *_ = crank
    assert model.coordinate_names == ("phi", "theta", "xs")
    assert model.constraint_names == ("loop_x", "loop_y")


def test_positions_satisfy_the_constraints(crank):
    model, p, par, init = crank
    q = init.state[0]
    assert np.max(np.abs(constraints(q, par))) <= EXACT * (par["r"] + par["l"])
    # The package's own constraint function agrees with the hand-written one.
    q_, v_, a_, lam_ = init.state
    C = model.residual_terms(q_, v_, a_, lam_, 0.0, p)[2]
    assert np.max(np.abs(C)) <= EXACT * (par["r"] + par["l"])


def test_fixed_crank_angle_is_held_and_the_rest_follows_the_geometry(crank):
    _, _, par, init = crank
    phi, theta, xs = init.state[0]
    assert phi == par["phi0"]
    r, l = par["r"], par["l"]
    theta_exact = math.asin(-r * math.sin(phi) / l)  # the assembly branch next to the guess theta = 0
    assert theta == pytest.approx(theta_exact, rel=EXACT, abs=EXACT)
    assert xs == pytest.approx(r * math.cos(phi) + l * math.cos(theta_exact), rel=EXACT)


def test_velocities_satisfy_the_velocity_constraints(crank):
    model, p, par, init = crank
    q, v, a, lam = init.state
    assert v[0] == par["omega0"]  # fixed crank speed is held
    residual = constraint_jacobian(q, par) @ v
    assert np.max(np.abs(residual)) <= EXACT * np.max(np.abs(v)) * (par["r"] + par["l"])
    # C_q from central differences of the hand-written constraints, independent of C_q above.
    h = 1e-6
    Cq_fd = np.column_stack(
        [(constraints(q + h * e, par) - constraints(q - h * e, par)) / (2 * h) for e in np.eye(3)]
    )
    np.testing.assert_allclose(Cq_fd, constraint_jacobian(q, par), rtol=0, atol=FD_OF_CONSTRAINTS)
    # And the compiled C_q is the same matrix.
    Cq = model.jacobian_terms(q, v, a, lam, 0.0, p)[4]
    np.testing.assert_allclose(Cq, constraint_jacobian(q, par), rtol=EXACT, atol=EXACT)


def test_velocities_follow_from_the_crank_speed(crank):
    _, _, par, init = crank
    (phi, theta, _), v = init.state[0], init.state[1]
    r, l, w = par["r"], par["l"], par["omega0"]
    theta_dot = -r * math.cos(phi) * w / (l * math.cos(theta))
    xs_dot = -r * math.sin(phi) * w - l * math.sin(theta) * theta_dot
    np.testing.assert_allclose(v, [w, theta_dot, xs_dot], rtol=EXACT, atol=EXACT)


def test_accelerations_and_multipliers_solve_lagranges_equations(crank):
    """M(q) a + C_q^T lambda = Q(q, v, t) and C_q a = -(C_q v)_q v at t = 0, with M, the
    quadratic velocity terms and the applied forces written out by hand."""
    _, _, par, init = crank
    q, v, a, lam = init.state
    phi, theta, xs = q
    w, th_d, xs_d = v
    r, l = par["r"], par["l"]
    k = par["m_r"] * r * l / 2
    s, c = math.sin(phi - theta), math.cos(phi - theta)
    M = np.array(
        [
            [par["m_c"] * r**2 / 3 + par["m_r"] * r**2, k * c, 0.0],
            [k * c, par["m_r"] * l**2 / 3, 0.0],
            [0.0, 0.0, par["m_s"]],
        ]
    )
    # Lagrange: d/dt(dT/dv) - dT/dq  ->  quadratic velocity terms of T = v^T M(q) v / 2.
    Q_velocity = np.array([-k * s * th_d**2, k * s * w**2, 0.0])
    Q_applied = np.array(
        [
            par["T0"] * math.sin(par["omega_T"] * 0.0) - par["d_phi"] * w,
            0.0,
            -par["c_s"] * (xs - (r + l)) - par["d_s"] * xs_d,
        ]
    )
    Cq = constraint_jacobian(q, par)
    gamma = np.array(
        [
            r * math.cos(phi) * w**2 + l * math.cos(theta) * th_d**2,
            r * math.sin(phi) * w**2 + l * math.sin(theta) * th_d**2,
        ]
    )
    system = np.block([[M, Cq.T], [Cq, np.zeros((2, 2))]])
    solution = np.linalg.solve(system, np.concatenate((Q_applied + Q_velocity, gamma)))
    scale_a = np.max(np.abs(solution[:3]))
    scale_l = np.max(np.abs(solution[3:]))
    np.testing.assert_allclose(a, solution[:3], rtol=0, atol=EXACT * scale_a)
    np.testing.assert_allclose(lam, solution[3:], rtol=0, atol=EXACT * scale_l)


def test_equations_of_motion_residual_vanishes_at_t0(crank):
    model, p, par, init = crank
    q, v, a, lam = init.state
    Ma, F, C = model.residual_terms(q, v, a, lam, 0.0, p)
    # F = C_q^T lambda - Q, so the equations of motion read M a + F = 0.
    scale = max(np.max(np.abs(Ma)), np.max(np.abs(F)))
    assert np.max(np.abs(Ma + F)) <= EXACT * scale


def test_simulation_starts_from_the_consistent_state(crank):
    model, p, _, init = crank
    traj = simulate(model, p, t_end=0.01)
    for got, want in zip((traj.q[0], traj.v[0], traj.a[0], traj.lam[0]), init.state):
        np.testing.assert_array_equal(got, want)


def test_initial_state_depends_on_the_crank_parameters(compiled_example):
    model = compiled_example("slider_crank")
    a = initial_state(model, model.parameter_vector({"phi0": 0.2}), 0.0).state[0]
    b = initial_state(model, model.parameter_vector({"phi0": -0.4}), 0.0).state[0]
    assert a[0] == 0.2 and b[0] == -0.4
    assert np.sign(a[1]) == -np.sign(b[1])  # the rod tilts the other way


# -- failure -------------------------------------------------------------------------------


def all_fixed_model(x0: float, y0: float) -> Model:
    return Model(
        name="all_fixed",
        coordinates=(
            Coordinate("x", mass=1.0, initial_position=x0, fixed_position=True),
            Coordinate("y", mass=1.0, initial_position=y0, fixed_position=True),
        ),
        forces=(LinearSpringDamper("s", coordinates=("x", "y"), stiffness=10.0),),
        constraints=(Constraint("rod", "x - y"),),
        outputs=(Output("x", "x"),),
    )


def test_fixed_coordinates_violating_a_constraint_raise():
    model = compile_model(all_fixed_model(0.0, 1.0))
    with pytest.raises(ConvergenceError) as info:
        initial_state(model, model.defaults, 0.0)
    assert "fixed" in str(info.value)
    assert "all_fixed" in str(info.value)
    with pytest.raises(ConvergenceError, match="fixed"):
        simulate(model, t_end=0.1, step=0.01)
