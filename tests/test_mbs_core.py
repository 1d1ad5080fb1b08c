"""Multibody core (issue 23): rotations, bodies, markers, joints, applied forces, lowering.

Independent references: closed forms (the small-amplitude period of a physical pendulum,
conservation of energy and angular momentum of a free rigid body, a drive's prescribed
angle), Rodrigues' formula (dissertation eq. (2.19)) for the Euler-parameter rotation
matrix, the hand-written triple pendulum model file (the same coordinates, so the same
motion to round-off), the planar model against the spatial one, and central finite
differences for the gradient.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import sympy as sp

from fmi_adjoint import mbs
from fmi_adjoint.costs import LeastSquaresCost, Sampler
from fmi_adjoint.engines import NativeEngine
from fmi_adjoint.errors import ModelError
from fmi_adjoint.examples import example_path
from fmi_adjoint.identify import Experiment, IdentificationProblem
from fmi_adjoint.mbs import rotations as rot
from fmi_adjoint.mbs.forces import JointForce, scalar_law
from fmi_adjoint.expressions import special
from fmi_adjoint.model import Constraint, Output, Parameter, SimulationSettings
from fmi_adjoint.model_file import load_model
from tolerances import (
    ADJOINT_VS_FORWARD,
    CLOSED_FORM,
    EXACT,
    FD_OF_CONSTRAINTS,
    FEW_ULPS,
    GRADIENT_VS_FD,
    INDEX3_ROUNDOFF,
    NEWTON_LEVEL,
    ORDER,
    SMALL_AMPLITUDE_PERIOD,
)

RNG_SEED = 20231


def _engine(system: mbs.MultibodySystem) -> NativeEngine:
    return NativeEngine.build(system.to_model())


# -- rotations ---------------------------------------------------------------------------------


def _random_euler(rng) -> np.ndarray:
    e = rng.standard_normal(4)
    return e / np.linalg.norm(e)


def test_euler_rotation_matrix_is_orthonormal_and_matches_rodrigues():
    rng = np.random.default_rng(RNG_SEED)
    for _ in range(5):
        axis = rng.standard_normal(3)
        angle = rng.uniform(-3.0, 3.0)
        e = rot.euler_from_axis_angle(axis, angle)
        A = rot.matrix_from_euler(e)
        a = axis / np.linalg.norm(axis)
        a_hat = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
        rodrigues = np.eye(3) + math.sin(angle) * a_hat + (1 - math.cos(angle)) * a_hat @ a_hat  # eq. (2.19)
        assert np.max(np.abs(A - rodrigues)) <= EXACT
        assert np.max(np.abs(A.T @ A - np.eye(3))) <= EXACT
        assert abs(np.linalg.det(A) - 1.0) <= EXACT
    # Symbolically: A^T A = (e.e)^2 I, so A is orthonormal on e.e = 1.
    e = sp.symbols("e0:4", real=True)
    Am = rot.A(e)
    norm = sum(x**2 for x in e)
    assert sp.expand(Am.T * Am - norm**2 * sp.eye(3)) == sp.zeros(3, 3)


def test_angular_velocity_matrices():
    """omega~ = A^T A_dot = 2 G e_dot (body, eq. (2.25)-(2.26)); omega = A omega' = 2 E e_dot."""
    rng = np.random.default_rng(RNG_SEED + 1)
    e = _random_euler(rng)
    e_dot = rng.standard_normal(4)
    e_dot -= (e @ e_dot) * e  # tangent to e.e = 1
    h = 1e-6
    A_dot = (rot.matrix_from_euler(e + h * e_dot) - rot.matrix_from_euler(e - h * e_dot)) / (2 * h)
    omega_tilde = rot.matrix_from_euler(e).T @ A_dot
    omega_body = np.array([omega_tilde[2, 1], omega_tilde[0, 2], omega_tilde[1, 0]])
    G = np.array(rot.G(list(e)).tolist(), dtype=float)
    E = np.array(rot.E(list(e)).tolist(), dtype=float)
    # A(e) is quadratic: the central difference is exact but for round-off (eps / h).
    assert np.max(np.abs(omega_body - 2 * G @ e_dot)) <= FD_OF_CONSTRAINTS
    assert np.max(np.abs(rot.matrix_from_euler(e) @ omega_body - 2 * E @ e_dot)) <= FD_OF_CONSTRAINTS
    assert np.max(np.abs(G @ e)) <= EXACT and np.max(np.abs(E @ e)) <= EXACT


def test_conversions_round_trip():
    rng = np.random.default_rng(RNG_SEED + 2)
    angles = (0.3, -1.1, 2.5)
    A = rot.matrix_from_cardan(angles)
    # A = Rx(a) Ry(b) Rz(c), written out independently.
    a, b, c = angles
    rx = np.array([[1, 0, 0], [0, math.cos(a), -math.sin(a)], [0, math.sin(a), math.cos(a)]])
    ry = np.array([[math.cos(b), 0, math.sin(b)], [0, 1, 0], [-math.sin(b), 0, math.cos(b)]])
    rz = np.array([[math.cos(c), -math.sin(c), 0], [math.sin(c), math.cos(c), 0], [0, 0, 1]])
    assert np.max(np.abs(A - rx @ ry @ rz)) <= EXACT
    e = rot.euler_from_cardan(angles)
    assert np.max(np.abs(rot.matrix_from_euler(e) - A)) <= EXACT
    back = [float(x) for x in rot.cardan_from_matrix(sp.Matrix(A))]
    assert np.max(np.abs(np.array(back) - angles)) <= EXACT
    for _ in range(20):  # matrix -> e -> matrix, all four branches of Shepperd's method
        e = _random_euler(rng)
        e2 = rot.euler_from_matrix(rot.matrix_from_euler(e))
        assert min(np.max(np.abs(e2 - e)), np.max(np.abs(e2 + e))) <= EXACT
    for k in range(4):  # the branches at the 180-degree rotations
        e = np.zeros(4)
        e[k] = 1.0
        e2 = rot.euler_from_matrix(rot.matrix_from_euler(e))
        assert min(np.max(np.abs(e2 - e)), np.max(np.abs(e2 + e))) <= EXACT


@pytest.mark.parametrize("matrix, what", [
    ([[1, 0, 0], [0, 1, 0], [0, 0, 1.001]], "not orthonormal"),
    ([[1, 0, 0], [0, 1, 0], [0, 0, -1]], "determinant"),
    ([[1, 0], [0, 1]], "3x3"),
])
def test_bad_rotation_matrix_is_refused(matrix, what):
    with pytest.raises(ModelError) as info:
        mbs.SpatialRigidBody("block", rotation=mbs.RotationMatrix(matrix))
    message = str(info.value)
    assert "body 'block'" in message and what in message and "\n" not in message
    with pytest.raises(ModelError) as info:
        mbs.Marker("mount", "block", orientation={"matrix": matrix})
    assert "marker 'mount'" in str(info.value) and what in str(info.value)


# -- a planar physical pendulum ---------------------------------------------------------------

AMPLITUDE = 0.01


def _pendulum(spatial: bool, drive: str | None = None) -> mbs.MultibodySystem:
    params = (Parameter("m", 1.3, "kg"), Parameter("l", 0.8, "m"), Parameter("g", 9.81, "m/s^2"))
    x0, y0 = 0.4 * math.sin(AMPLITUDE), -0.4 * math.cos(AMPLITUDE)
    if spatial:
        body = mbs.SpatialRigidBody("rod", mass="m", inertia=("m*l**2/12", "m*l**2/1200", "m*l**2/12"),
                                    position=(x0, y0, 0.0), rotation=mbs.AxisAngle((0, 0, 1), AMPLITUDE))
        angle = "2*atan2(rod_e3, rod_e0)"
    else:
        body = mbs.PlanarRigidBody("rod", mass="m", inertia="m*l**2/12", position=(x0, y0), angle=AMPLITUDE,
                                   fixed_position=() if drive else ("phi",))
        angle = "rod_phi"
    return mbs.MultibodySystem(
        name="pendulum_" + ("spatial" if spatial else "planar") + ("_driven" if drive else ""),
        parameters=params,
        gravity=(0, "-g", 0),
        bodies=(body,),
        markers=(mbs.Marker("pivot", "ground"), mbs.Marker("top", "rod", position=(0, "l/2", 0))),
        joints=(mbs.Revolute("hinge", "pivot", "top", drive=drive),),
        outputs=(Output("angle", angle, "rad"),),
        simulation=SimulationSettings(t_end=3.4, step=1e-3, alpha=0.0),
    )


def _period(t: np.ndarray, y: np.ndarray) -> float:
    """Mean period from the upward zero crossings (linear interpolation)."""
    idx = np.nonzero((y[:-1] < 0) & (y[1:] >= 0))[0]
    crossings = t[idx] - y[idx] * (t[idx + 1] - t[idx]) / (y[idx + 1] - y[idx])
    assert len(crossings) >= 2
    return float(np.mean(np.diff(crossings)))


@pytest.fixture(scope="module")
def pendulum_runs():
    runs = {}
    for spatial in (False, True):
        engine = _engine(_pendulum(spatial))
        traj = engine.simulate(engine.compiled.parameter_vector())
        runs[spatial] = (traj.t, traj.outputs()[:, 0], traj)
    return runs


def test_physical_pendulum_period(pendulum_runs):
    m, l, g = 1.3, 0.8, 9.81
    closed = 2 * math.pi * math.sqrt((m * l**2 / 3) / (m * g * l / 2))
    t, y, _ = pendulum_runs[False]
    assert abs(y[0] - AMPLITUDE) <= FEW_ULPS
    assert abs(_period(t, y) - closed) <= SMALL_AMPLITUDE_PERIOD * closed


def test_spatial_revolute_pendulum_equals_planar(pendulum_runs):
    t, planar, _ = pendulum_runs[False]
    _, spatial, traj = pendulum_runs[True]
    # The same motion, and the same scheme on it: measured 4.9e-11 of the amplitude.
    assert np.max(np.abs(spatial - planar)) <= INDEX3_ROUNDOFF * AMPLITUDE
    # The spatial body stays in the plane and on its unit quaternion.
    q = traj.q
    e = q[:, 3:7]
    assert np.max(np.abs(np.sum(e**2, axis=1) - 1)) <= NEWTON_LEVEL
    assert np.max(np.abs(q[:, 2])) <= NEWTON_LEVEL and np.max(np.abs(e[:, 1:3])) <= NEWTON_LEVEL


@pytest.mark.parametrize("spatial", [False, True], ids=["planar", "spatial"])
def test_driven_revolute_follows_its_drive(spatial):
    system = _pendulum(spatial, drive="0.3*sin(2*t)")
    system = mbs.MultibodySystem(**{**system.__dict__, "simulation": SimulationSettings(t_end=0.5, step=1e-3)})
    engine = _engine(system)
    traj = engine.simulate(engine.compiled.parameter_vector())
    want = 0.3 * np.sin(2 * traj.t)
    assert np.max(np.abs(traj.outputs()[:, 0] - want)) <= FEW_ULPS  # measured 8e-17


# -- the triple pendulum from bodies --------------------------------------------------------------


def _triple_pendulum_from_bodies() -> mbs.MultibodySystem:
    """The bundled triple_pendulum.toml rebuilt: cart = planar point mass on a prismatic joint
    to ground, three planar rods on revolute joints, the excitation a Force on the cart, the
    friction and the rotational spring-dampers joint forces (laws on the joint coordinates,
    which are the file's x_c and phi_(i+1) - phi_i)."""
    hand = load_model(example_path("triple_pendulum"))
    rods = tuple(
        mbs.PlanarRigidBody(f"rod{i}", mass="m", inertia="m*l**2/12", position=(0, f"-{2 * i - 1}*l/2"),
                            fixed_position=("phi",))
        for i in (1, 2, 3)
    )
    cart = mbs.PointMass("cart", mass="m_c", position=(0, 0), planar=True, fixed_position=("x",))
    markers = [mbs.Marker("rail", "ground"), mbs.Marker("cart_pin", "cart")]
    for i in (1, 2, 3):
        markers += [mbs.Marker(f"rod{i}_top", f"rod{i}", position=(0, "l/2")),
                    mbs.Marker(f"rod{i}_bottom", f"rod{i}", position=(0, "-l/2"))]
    joints = (
        mbs.Prismatic("track", "rail", "cart_pin"),
        mbs.Revolute("hinge1", "cart_pin", "rod1_top"),
        mbs.Revolute("hinge2", "rod1_bottom", "rod2_top"),
        mbs.Revolute("hinge3", "rod2_bottom", "rod3_top"),
    )
    excitation = next(f.expression for f in hand.forces if f.name == "excitation")  # type: ignore[attr-defined]
    forces = (
        mbs.Force("excitation", "cart_pin", (excitation, 0, 0)),
        JointForce("cart_friction", "track", scalar_law("linear_spring_damper", stiffness=0.0, damping="d_c",
                                                        free_length=0.0)),
        JointForce("joint_1", "hinge1", scalar_law("linear_spring_damper", stiffness=0.0, damping="d_1",
                                                   free_length=0.0)),
        JointForce("beam_12", "hinge2", scalar_law("linear_spring_damper", stiffness="c_f", damping="d_f",
                                                   free_length=0.0)),
        JointForce("beam_23", "hinge3", scalar_law("linear_spring_damper", stiffness="c_f", damping="d_f",
                                                   free_length=0.0)),
    )
    return mbs.MultibodySystem(
        name="triple_pendulum_bodies",
        parameters=hand.parameters,
        gravity=(0, "-g", 0),
        bodies=(cart, *rods),
        markers=tuple(markers),
        joints=joints,
        forces=forces,
        outputs=(Output("phi1", "rod1_phi", "rad"), Output("x_c", "cart_x", "m")),
        simulation=hand.simulation,
    )


def test_triple_pendulum_from_bodies_moves_like_the_hand_written_file(example_engine):
    system = _triple_pendulum_from_bodies()
    model = system.to_model()
    assert len(model.constraints) == 1 + 3 * 2  # cart on its track, three planar revolutes
    hand = example_engine("triple_pendulum")
    ours = NativeEngine.build(model)
    a = hand.simulate(hand.compiled.parameter_vector())  # the file's 20 s
    b = ours.simulate(ours.compiled.parameter_vector())
    # The same coordinates and constraint manifold (the joint rows are the file's with the
    # opposite sign, plus y_cart = 0 for the cart's extra coordinate): the same motion to
    # round-off, measured 1.6e-14 (phi1) and 4.8e-15 (x_c) of the largest value over 20 s.
    for name in ("phi1", "x_c"):
        ya = a.outputs()[:, hand.compiled.output_index(name)]
        yb = b.outputs()[:, ours.compiled.output_index(name)]
        assert np.max(np.abs(ya - yb)) <= EXACT * np.max(np.abs(ya)), name


# -- a free spatial rigid body ---------------------------------------------------------------------

INERTIA = {"I1": 1.0, "I2": 2.0, "I3": 3.0}
OMEGA = {"w1": 0.3, "w2": 2.0, "w3": 0.4}
MASS = 2.0


def _free_body() -> mbs.MultibodySystem:
    """A free rigid body, no gravity; inertia and initial angular velocity (global axes) are
    parameters, so one build serves the asymmetric and the symmetric body."""
    return mbs.MultibodySystem(
        name="free_body",
        parameters=(Parameter("m", MASS, "kg"), *(Parameter(k, v) for k, v in {**INERTIA, **OMEGA}.items())),
        bodies=(mbs.SpatialRigidBody("b", mass="m", inertia=tuple(INERTIA), rotation=mbs.AxisAngle((1, 1, 0), 0.4),
                                     angular_velocity=tuple(OMEGA), velocity=(0.1, 0.0, -0.2),
                                     fixed_position=True, fixed_velocity=True),),
        outputs=(Output("e0", "b_e0"),),
        simulation=SimulationSettings(t_end=2.0, step=1e-2, integrator="generalized_alpha", rho_inf=0.8),
    )


@pytest.fixture(scope="module")
def free_body():
    return _engine(_free_body())


def _omega_body(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """omega' = 2 G(e) e_dot (eq. (2.26))."""
    return 2 * np.array(rot.G(list(q[3:7])).tolist(), dtype=float) @ v[3:7]


def _invariants(q: np.ndarray, v: np.ndarray) -> tuple[float, np.ndarray]:
    """Kinetic energy and angular momentum about the centre of mass (global axes)."""
    omega_body = _omega_body(q, v)
    J = np.diag(list(INERTIA.values()))
    T = 0.5 * omega_body @ J @ omega_body + 0.5 * MASS * v[:3] @ v[:3]
    return T, rot.matrix_from_euler(q[3:7]) @ (J @ omega_body)


def test_free_body_conserves_energy_and_angular_momentum_to_second_order(free_body):
    engine = free_body
    errors = []
    for h in (2e-2, 1e-2, 5e-3):
        traj = engine.simulate(engine.compiled.parameter_vector(), t_end=2.0, step=h)
        # the given (fixed) initial state is the one asked for: omega = A omega' in global axes
        omega0 = rot.matrix_from_euler(traj.q[0][3:7]) @ _omega_body(traj.q[0], traj.v[0])
        assert np.max(np.abs(omega0 - list(OMEGA.values()))) <= FEW_ULPS
        T0, L0 = _invariants(traj.q[0], traj.v[0])
        T, L = zip(*(_invariants(q, v) for q, v in zip(traj.q, traj.v)))
        errors.append((max(abs(x - T0) for x in T), max(np.linalg.norm(x - L0) for x in L)))
        e = traj.q[:, 3:7]
        assert np.max(np.abs(np.sum(e**2, axis=1) - 1)) <= FEW_ULPS  # measured 2.2e-16
        # the centre of mass moves uniformly
        assert np.max(np.abs(traj.q[:, 0] - 0.1 * traj.t)) <= FEW_ULPS
    errors = np.array(errors)
    orders = np.log2(errors[:-1] / errors[1:])
    assert np.all(np.abs(orders - 2.0) <= ORDER), f"errors {errors}, orders {orders}"


def test_quadratic_velocity_terms_give_eulers_equations():
    """The assembler's Lagrange terms for M = 4 G^T J G: projected with G they are Euler's
    -2 omega' x J omega' (4 J G e_ddot = 2 J omega'_dot), and they differ from the
    dissertation's gyroscopic term +2 G_d_dot^T J G_d_dot e (G_d = 2 G, eqs. (2.38)-(2.39))
    only along e (taken up by the normalization multiplier)."""
    from fmi_adjoint.model import assemble

    model = _free_body().to_model()
    sym = assemble(model)
    names = [c.name for c in model.all_coordinates]
    rows = [names.index(f"b_e{k}") for k in range(4)]
    rng = np.random.default_rng(RNG_SEED + 4)
    e = _random_euler(rng)
    e_dot = rng.standard_normal(4)
    e_dot -= (e @ e_dot) * e
    values = {p: par.value for p, par in zip(sym.p, model.all_parameters)}
    values.update({sym.q[i]: x for i, x in zip(rows, e)})
    values.update({sym.v[i]: x for i, x in zip(rows, e_dot)})
    Q = np.array([float(sym.Q[i].xreplace(values)) for i in rows])
    G = np.array(rot.G(list(e)).tolist(), dtype=float)
    G_dot = np.array(rot.G(list(e_dot)).tolist(), dtype=float)
    J = np.diag(list(INERTIA.values()))
    omega = 2 * G @ e_dot
    assert np.max(np.abs(G @ Q + 2 * np.cross(omega, J @ omega))) <= EXACT * np.max(np.abs(Q))
    difference = Q - 2 * (2 * G_dot).T @ J @ (2 * G_dot) @ e
    assert np.max(np.abs(difference - (difference @ e) * e)) <= EXACT * np.max(np.abs(Q))


def test_torque_free_precession_of_a_symmetric_body(free_body):
    """I1 = I2 = I, I3: in body axes omega' rotates about z at Omega = (I3 - I)/I omega3'
    (Euler's equations), omega'_x + i omega'_y = a exp(i Omega t); the error of the scheme
    falls as h^2."""
    engine = free_body
    inertia, w3 = {"I1": 1.0, "I2": 1.0, "I3": 2.5}, 3.0
    omega_body0 = np.array([0.5, 0.0, w3])
    A0 = rot.matrix_from_euler(rot.euler_from_axis_angle((1, 1, 0), 0.4))
    omega0 = dict(zip(OMEGA, A0 @ omega_body0))
    rate = (inertia["I3"] - inertia["I1"]) / inertia["I1"] * w3
    errors = []
    for h in (4e-3, 2e-3, 1e-3):
        traj = engine.simulate(engine.compiled.parameter_vector({**inertia, **omega0}), t_end=1.0, step=h)
        omega = np.array([_omega_body(q, v) for q, v in zip(traj.q, traj.v)])
        want = np.column_stack([0.5 * np.cos(rate * traj.t), 0.5 * np.sin(rate * traj.t), np.full_like(traj.t, w3)])
        errors.append(np.max(np.abs(omega - want)))
    errors = np.array(errors)
    orders = np.log2(errors[:-1] / errors[1:])
    assert np.all(np.abs(orders - 2.0) <= ORDER), f"errors {errors}, orders {orders}"


# -- joints ------------------------------------------------------------------------------------------


def _two_body_system(joint_type, *, planar: bool, **joint_args) -> mbs.MultibodySystem:
    if planar:
        bodies = (mbs.PlanarRigidBody("a", position=(0, 0)), mbs.PlanarRigidBody("b", position=(1, 0)))
        positions = ((0.5, 0), (-0.5, 0))
    else:
        bodies = (mbs.SpatialRigidBody("a"), mbs.SpatialRigidBody("b", position=(1, 0, 0)))
        positions = ((0.5, 0, 0), (-0.5, 0, 0))
    return mbs.MultibodySystem(
        name="joint_rows",
        bodies=bodies,
        markers=(mbs.Marker("ma", "a", position=positions[0]), mbs.Marker("mb", "b", position=positions[1])),
        joints=(joint_type("j", "ma", "mb", **joint_args),),
        outputs=(Output("x", "a_x"),),
    )


@pytest.mark.parametrize("joint_type, planar, rows", [
    (mbs.Revolute, True, 2),
    (mbs.Revolute, False, 5),
    (mbs.Prismatic, False, 5),
    (mbs.Prismatic, True, 2),
    (mbs.Cylindrical, False, 4),
    (mbs.Spherical, False, 3),
    (mbs.Universal, False, 4),
    (mbs.Planar, False, 3),
    (mbs.Fixed, False, 6),
    (mbs.Fixed, True, 3),
])
def test_joint_row_counts(joint_type, planar, rows):
    model = _two_body_system(joint_type, planar=planar).to_model()
    names = [c.name for c in model.constraints if c.name.startswith("j_")]
    assert len(names) == rows, names
    # The rows hold at the assembled initial state (markers placed coincident and aligned).
    from fmi_adjoint.model import assemble

    sym = assemble(model)
    values = {p: par.value for p, par in zip(sym.p, model.all_parameters)}
    q0 = [float(x.xreplace(values)) for x in sym.q0]
    residual = [float(c.xreplace(dict(zip(sym.q, q0))).xreplace(values)) for c in sym.C]
    assert max(abs(r) for r in residual) <= FEW_ULPS


def _error(system: mbs.MultibodySystem) -> str:
    with pytest.raises(ModelError) as info:
        system.to_model()
    message = str(info.value)
    assert "\n" not in message
    return message


def test_joint_errors_name_the_component():
    planar = dict(bodies=(mbs.PlanarRigidBody("a"), mbs.PlanarRigidBody("b", position=(1, 0))),
                  outputs=(Output("x", "a_x"),))
    same = mbs.MultibodySystem(name="bad", markers=(mbs.Marker("m1", "a"), mbs.Marker("m2", "a")),
                               joints=(mbs.Revolute("hinge", "m1", "m2"),), **planar)
    message = _error(same)
    assert "joint 'hinge'" in message and "both on body 'a'" in message
    unknown = mbs.MultibodySystem(name="bad", markers=(mbs.Marker("m1", "a"),),
                                  joints=(mbs.Revolute("hinge", "m1", "nowhere"),), **planar)
    message = _error(unknown)
    assert "joint 'hinge'" in message and "unknown marker 'nowhere'" in message
    with pytest.raises(ModelError) as info:
        mbs.Revolute("hinge", "m1", "m2", axis=(0, 0, 0))
    assert "joint 'hinge'" in str(info.value) and "axis is zero" in str(info.value)
    spherical = mbs.MultibodySystem(name="bad", markers=(mbs.Marker("m1", "a"), mbs.Marker("m2", "b")),
                                    joints=(mbs.Spherical("ball", "m1", "m2"),), **planar)
    message = _error(spherical)
    assert "joint 'ball'" in message and "needs a spatial body" in message
    nothing = mbs.MultibodySystem(name="bad", markers=(mbs.Marker("m1", "a"), mbs.Marker("m2", "b")),
                                  joints=(mbs.Planar("slide", "m1", "m2"),), **planar)
    message = _error(nothing)
    assert "joint 'slide'" in message and "constrains nothing" in message
    bad_body = mbs.MultibodySystem(name="bad", markers=(mbs.Marker("m1", "nobody"),), **planar)
    message = _error(bad_body)
    assert "marker 'm1'" in message and "unknown body 'nobody'" in message
    with pytest.raises(ModelError) as info:
        mbs.SpatialRigidBody("block", rotation={"matrix": [[1, 0, 0], [0, 0.9, 0], [0, 0, 1]]})
    assert "body 'block'" in str(info.value) and "not orthonormal" in str(info.value)
    zero_inertia = mbs.MultibodySystem(name="bad", bodies=(mbs.SpatialRigidBody("block", inertia=(1, 0, 1)),),
                                       outputs=(Output("x", "block_x"),))
    message = _error(zero_inertia)
    assert "body 'block'" in message and "positive definite" in message


def test_redundant_joints_are_named():
    """Two hinges at the same pivot: the lowering names both joints (one line), in Python as
    in a file; the first joint alone is accepted."""
    def system(*joints):
        return mbs.MultibodySystem(
            name="redundant",
            parameters=(Parameter("g", 9.81),),
            gravity=(0, "-g", 0),
            bodies=(mbs.PlanarRigidBody("rod", position=(0, -0.5)),),
            markers=(mbs.Marker("p1", "ground"), mbs.Marker("p2", "ground"),
                     mbs.Marker("top", "rod", position=(0, 0.5))),
            joints=joints,
            outputs=(Output("phi", "rod_phi"),),
        )
    hinge_a, hinge_b = mbs.Revolute("hinge_a", "p1", "top"), mbs.Revolute("hinge_b", "p2", "top")
    system(hinge_a).to_model()
    with pytest.raises(mbs.RedundantJointsError) as info:
        system(hinge_a, hinge_b).to_model()
    message = str(info.value)
    assert message.startswith("joint 'hinge_b' (revolute): its constraints repeat or contradict those of joint "
                              "'hinge_a' (revolute) between the same bodies 'ground' and 'rod'"), message
    assert "\n" not in message
    assert (info.value.joint, info.value.earlier, info.value.rows, info.value.rank) == ("hinge_b", ("hinge_a",), 4, 2)


def test_velocity_and_acceleration_of_an_expression():
    system = mbs.MultibodySystem(name="kin", bodies=(mbs.PlanarRigidBody("b"),), outputs=(Output("x", "b_x"),))
    ctx = mbs.SystemLowering(system)
    for body in system.bodies:
        body.lower(ctx)
    x, phi, t = sp.Symbol("b_x", real=True), sp.Symbol("b_phi", real=True), sp.Symbol("t", real=True)
    der, der2 = ctx.der, ctx.der2
    expr = x * sp.sin(phi) + t**2
    velocity = ctx.velocity_of(expr)
    want = der("b_x") * sp.sin(phi) + x * sp.cos(phi) * der("b_phi") + 2 * t
    assert sp.expand(velocity - want) == 0
    acceleration = ctx.acceleration_of(expr)
    want2 = (der2("b_x") * sp.sin(phi) + 2 * der("b_x") * sp.cos(phi) * der("b_phi")
             - x * sp.sin(phi) * der("b_phi") ** 2 + x * sp.cos(phi) * der2("b_phi") + 2)
    assert sp.expand(acceleration - want2) == 0


# -- applied forces and torques ----------------------------------------------------------------------


def test_force_and_torque_generalized_forces():
    """Q = (dr_P/dq)^T F and Q_e = 2 E^T T (eq. (2.33)), against the virtual work written out."""
    system = mbs.MultibodySystem(
        name="applied",
        parameters=(Parameter("F", 2.0, "N"),),
        bodies=(mbs.SpatialRigidBody("b"),),
        markers=(mbs.Marker("tip", "b", position=(0.3, -0.2, 0.5)),),
        forces=(mbs.Force("push", "tip", ("F", 0, "-F*t"), frame="body"), mbs.Torque("twist", "b", (0, 0, "F"))),
        outputs=(Output("x", "b_x"),),
    )
    model = system.to_model()
    (element,) = model.forces
    got = dict(element.forces)  # type: ignore[attr-defined]
    e = sp.symbols("b_e0:4", real=True)
    F, t = sp.Symbol("F", real=True), sp.Symbol("t", real=True)
    A = rot.A(e)
    f_global = A * sp.Matrix([F, 0, -F * t])
    r_local = sp.Matrix([sp.Rational(3, 10), -sp.Rational(1, 5), sp.Rational(1, 2)])
    torque = sp.Matrix([0, 0, F])
    rng = np.random.default_rng(RNG_SEED + 3)
    values = dict(zip(e, _random_euler(rng)))
    values.update({F: 2.0, t: 0.7})
    for k, name in enumerate(("b_x", "b_y", "b_z")):
        assert abs(float((got[name] - f_global[k]).xreplace(values))) <= EXACT
    for k, name in enumerate(f"b_e{j}" for j in range(4)):
        want = (f_global.T * (A * r_local).diff(e[k]))[0, 0] + (2 * rot.E(e).T * torque)[k]
        assert abs(float((got[name] - want).xreplace(values))) <= EXACT


def test_a_damping_force_in_der_is_not_doubled():
    """Review of issue 23: Q = J_v^T F with J_v = dv_P/d der(q); differentiating the power
    F . v_P by der(q) doubled a force -c der(x).  The mass then decays as exp(-c t / m)."""
    c, m, v0 = 3.0, 2.0, 1.0
    system = mbs.MultibodySystem(
        name="damped_mass", parameters=(Parameter("c", c),),
        bodies=(mbs.PointMass("b", mass=m, velocity=(v0, 0, 0)),),
        markers=(mbs.Marker("p", "b", position=(0.1, 0.2, 0.0)),),
        forces=(mbs.Force("damp", "p", ("-c*der(b_x)", 0, 0)),
                mbs.Torque("spin", "b", (0, 0, "-c*der(b_y)"))),  # no rotation: no work, no force
        outputs=(Output("v", "der(b_x)"),),
        simulation=SimulationSettings(t_end=0.5, step=1e-3, alpha=0.0),
    )
    model = system.to_model()
    (element,) = model.forces
    got = dict(element.forces)  # type: ignore[attr-defined]
    assert set(got) == {"b_x"}
    assert sp.expand(got["b_x"] + sp.Symbol("c", real=True) * special("der", "b_x")) == 0
    engine = NativeEngine.build(model)
    traj = engine.simulate()
    v = traj.outputs()[:, 0]
    assert np.max(np.abs(v - v0 * np.exp(-c * traj.t / m))) <= CLOSED_FORM * v0


def test_a_user_constraint_named_like_a_joint_row_is_refused_naming_both():
    """A scalar constraint named ``hinge_x`` is not mistaken for the joint's row ``x``."""
    system = mbs.MultibodySystem(
        name="clash",
        bodies=(mbs.PlanarRigidBody("rod", position=(0, -0.5)),),
        markers=(mbs.Marker("pivot", "ground"), mbs.Marker("top", "rod", position=(0, 0.5))),
        joints=(mbs.Revolute("hinge", "pivot", "top"),),
        constraints=(Constraint("hinge_x", "rod_x"),),
    )
    with pytest.raises(ModelError, match=r"constraint 'hinge_x' of the system's constraints has the name of a "
                                         r"constraint of joint 'hinge' \(revolute\); rename"):
        system.to_model()
    spring = mbs.SpringDamper("b_x", "pivot", "top", mbs.scalar_law("linear_spring_damper", stiffness=1))
    bushing = mbs.Bushing("b", "pivot", "top", laws={"x": mbs.scalar_law("maxwell", stiffness=1, damping=1)})
    with pytest.raises(ModelError, match="'b_x_s'"):
        dataclasses.replace(system, constraints=(), forces=(spring, bushing)).to_model()


def test_inertia_violating_the_triangle_inequality_is_refused_by_the_body():
    """Moved from the file reader into SpatialRigidBody: Python users get it too."""
    system = mbs.MultibodySystem(name="tri", bodies=(mbs.SpatialRigidBody("block", inertia=(1.0, 1.0, 2.5)),),
                                 outputs=(Output("x", "block_x"),))
    with pytest.raises(ModelError, match=r"body 'block' \(SpatialRigidBody\).inertia: the principal moments 1, 1, "
                                         r"2.5 violate the triangle inequality"):
        system.to_model()
    dataclasses.replace(system, bodies=(mbs.SpatialRigidBody("block", inertia=(1.0, 1.0, 2.0)),)).to_model()


@pytest.mark.parametrize("joint, words", [
    (mbs.Revolute("hinge", "pivot", "top", axis=(1, 0, 0)), "axis must be +-z"),
    (mbs.Revolute("hinge", "pivot", "top", axis=(0, "s", 1)), "axis must be +-z"),
    (mbs.Prismatic("hinge", "pivot", "top", axis=(1, 0, 1)), "axis must lie in the x-y plane"),
])
def test_a_planar_joint_axis_that_would_lock_the_joint_is_refused(joint, words):
    """Review of issue 23: a revolute joint about x between planar bodies silently became a
    fixed joint, a prismatic axis with a z component locked everything."""
    system = mbs.MultibodySystem(
        name="axis", parameters=(Parameter("s", 0.1),),
        bodies=(mbs.PlanarRigidBody("rod", position=(0, -0.5)),),
        markers=(mbs.Marker("pivot", "ground"), mbs.Marker("top", "rod", position=(0, 0.5))),
        joints=(joint,), sensors=(mbs.JointCoordinate("q", "hinge"),),
    )
    with pytest.raises(ModelError) as info:
        system.to_model()
    message = str(info.value)
    assert message.startswith(f"joint 'hinge' ({type(joint).__name__.lower()}).axis: between planar bodies")
    assert words in message and "give" in message and "\n" not in message


def test_a_planar_revolute_about_minus_z_measures_the_negative_angle():
    system = mbs.MultibodySystem(
        name="minus_z", bodies=(mbs.PlanarRigidBody("rod", position=(0, -0.5)),),
        markers=(mbs.Marker("pivot", "ground"), mbs.Marker("top", "rod", position=(0, 0.5))),
        joints=(mbs.Revolute("hinge", "pivot", "top", axis=(0, 0, -1)),), sensors=(mbs.JointCoordinate("q", "hinge"),),
    )
    (output,) = system.to_model().outputs
    assert sp.expand(output.expression + sp.Symbol("rod_phi", real=True)) == 0


# -- gradient on a spatial model -------------------------------------------------------------------


def _spatial_gradient_system() -> mbs.MultibodySystem:
    """A spinning spatial body hanging on a universal joint: parameters in the mass (m), the
    inertia (I1), a marker position (a) and the joint axis (tilt); a torque swings it."""
    return mbs.MultibodySystem(
        name="spatial_gradient",
        parameters=(Parameter("m", 1.5, "kg"), Parameter("I1", 0.02, "kg*m^2"), Parameter("a", 0.3, "m"),
                    Parameter("tilt", 0.2), Parameter("g", 9.81, "m/s^2")),
        gravity=(0, 0, "-g"),
        bodies=(mbs.SpatialRigidBody("top", mass="m", inertia=("I1", "1.3*I1", 0.01), position=(0, 0, "-a"),
                                     angular_velocity=(0.0, 0.0, 3.0)),),
        markers=(mbs.Marker("fix", "ground"), mbs.Marker("tip", "top", position=(0.0, 0.0, "a"))),
        joints=(mbs.Universal("cardan", "fix", "tip", axis=(1, "tilt", 0), axis_j=(0, 0, 1)),),
        forces=(mbs.Torque("drive", "top", ("0.2*sin(5*t)", 0, 0)),),
        outputs=(Output("x", "top_x", "m"), Output("y", "top_y", "m"), Output("e3", "top_e3")),
        simulation=SimulationSettings(t_end=0.5, step=5e-3, integrator="generalized_alpha", rho_inf=0.8),
    )


@pytest.fixture(scope="module")
def spatial_gradient():  # the build takes about 10 s (a spatial body with M(q, p))
    engine = _engine(_spatial_gradient_system())
    compiled = engine.compiled
    channels = ("x", "y", "e3")
    truth = engine.simulate(compiled.parameter_vector({"m": 1.6, "I1": 0.025, "a": 0.28, "tilt": 0.25}))
    times = np.linspace(0.0, 0.5, 97)
    data = Sampler.from_grid(truth.t, times).sample(truth.outputs()[:, [compiled.output_index(c) for c in channels]])
    cost = LeastSquaresCost(times, data, channels, scales=np.sqrt(np.mean(data**2, axis=0)))
    problem = IdentificationProblem([Experiment(compiled, cost, engine=engine)], ("m", "I1", "a", "tilt"))
    x = problem.start.copy()
    return problem, x, problem.evaluate(x, "adjoint"), problem.evaluate(x, "forward")


@pytest.mark.slow
def test_spatial_gradient_adjoint_equals_forward_and_central_differences(spatial_gradient):
    problem, x, adjoint, forward = spatial_gradient
    assert np.all(adjoint.gradient != 0)
    assert np.all(np.abs(adjoint.gradient - forward.gradient) <= ADJOINT_VS_FORWARD * np.abs(forward.gradient))
    fd = problem.finite_differences(x, rel=1e-3, order=4)
    assert np.all(np.abs(adjoint.gradient - fd) <= GRADIENT_VS_FD * np.abs(fd)), (adjoint.gradient, fd)


# -- lowering ------------------------------------------------------------------------------------


def test_lowering_is_deterministic():
    from fmi_adjoint.compiled import model_key

    assert model_key(_spatial_gradient_system().to_model()) == model_key(_spatial_gradient_system().to_model())
