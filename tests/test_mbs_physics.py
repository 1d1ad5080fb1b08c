"""Rigid-body physics of the multibody layer (issue 23, "What must be shown") against closed forms
and the independent minimal-coordinate references of ``tests/mbs_reference.py``:

(a) physical pendulum (planar and spatial rigid body on a revolute joint): the small-amplitude
    period and, at large amplitude, the exact period of the complete elliptic integral;
(b) free asymmetric spatial body: energy and angular momentum conserved to the integrator's
    order (the error falls by 4 when the step halves), and its angular velocity converging to
    Euler's equations integrated by scipy;
(c) free symmetric body: the torque-free precession rates, in the body frame
    ``(I3 - I1)/I1 w3`` and in space ``|L|/I1 = I3 w3/(I1 cos beta)``;
(d) heavy symmetric top on a spherical joint: the steady precession rates of the closed form
    (slow and fast root), and a nutating top against the Euler-angle reference: q, v, a and the
    multipliers converge with order 2 (generalized-alpha on a spatial model with M(q));
(e) spatial revolute chain (three bodies, non-parallel axes, torsion springs as joint forces)
    against the joint-angle reference; a spatial double pendulum on spherical joints against a
    reference with three revolutes per joint;
(f) the cart with three pendula rebuilt from planar bodies, joints and joint forces against the
    minimal-coordinate reference of examples/triple_pendulum.toml;
(g) a point-to-point spring-damper: the damped oscillator;
(h) torques in body and global axes about a principal axis: the closed-form spin-up.

Generalized-alpha throughout: spatial bodies have a configuration-dependent mass matrix, where
HHT with alpha != 0 converges at first order only (fmi_adjoint/integrate/hht.py).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import mbs_reference as ref
from fmi_adjoint import GeneralizedAlpha, mbs
from fmi_adjoint.engines import NativeEngine
from fmi_adjoint.model import Parameter, SimulationSettings
from tolerances import CLOSED_FORM, NEWTON_LEVEL, ORDER

SCHEME = GeneralizedAlpha()


def _build(system: mbs.MultibodySystem) -> NativeEngine:
    return NativeEngine.build(system.to_model())


def _orders(errors) -> np.ndarray:
    """Observed orders ``log2(e(h)/e(h/2))`` of a sequence of halved steps (rows: steps)."""
    errors = np.asarray(errors, dtype=float)
    return np.log2(errors[:-1] / errors[1:])


def _columns(engine: NativeEngine, names) -> list[int]:
    coordinates = engine.compiled.coordinate_names
    return [coordinates.index(n) for n in names]


def _rotation(e: np.ndarray) -> np.ndarray:
    """A(e) of the reference (dissertation eq. (2.20)); e normalized first (it satisfies the
    normalization to the Newton tolerance)."""
    return ref.quaternion_matrix(e / np.linalg.norm(e))


# -- (a) physical pendulum ------------------------------------------------------------------------

PENDULUM = ref.PhysicalPendulum(m=1.0, J_c=1.0 / 12.0, d=0.5, g=9.81)   # uniform rod, l = 1, about its end
PENDULUM_STEP = 1e-3
PENDULUM_PERIODS = 6


@functools.cache
def _pendulum(kind: str, theta0: float) -> NativeEngine:
    """A uniform rod (m, l) hanging from a revolute joint at its top, released at rest at theta0
    from the downward vertical."""
    params = (Parameter("m", 1.0, "kg"), Parameter("l", 1.0, "m"), Parameter("g", 9.81, "m/s^2"))
    c = (0.5 * np.sin(theta0), -0.5 * np.cos(theta0))
    if kind == "planar":
        body = mbs.PlanarRigidBody("rod", mass="m", inertia="m*l**2/12", position=c, angle=theta0)
    else:
        body = mbs.SpatialRigidBody("rod", mass="m", inertia=("m*l**2/12", "m*l**2/100", "m*l**2/12"),
                                    position=(*c, 0.0), rotation=mbs.AxisAngle((0.0, 0.0, 1.0), theta0))
    system = mbs.MultibodySystem(
        name=f"pendulum_{kind}", parameters=params, gravity=(0, "-g", 0), bodies=(body,),
        markers=(mbs.Marker("pivot", "ground"), mbs.Marker("top", "rod", position=(0, "l/2", 0))),
        joints=(mbs.Revolute("hinge", "pivot", "top"),),
        sensors=(mbs.JointCoordinate("angle", "hinge"),),
        simulation=SimulationSettings(t_end=1.0, step=PENDULUM_STEP))
    return _build(system)


@pytest.mark.parametrize("kind", ["planar", "spatial"])
@pytest.mark.parametrize("theta0", [0.01, 2.5], ids=["small", "large"])
def test_physical_pendulum_period(kind, theta0):
    """Small amplitude: ``2 pi sqrt(J_O/(m g d))`` (the elliptic correction theta0^2/16 = 6e-6 is
    below the tier); large amplitude: ``4 sqrt(J_O/(m g d)) K(sin(theta0/2))``.  Measured at
    h = 1 ms, relative: 7.5e-6 (small; planar and spatial alike), 4.0e-6 planar and 4.5e-6
    spatial (large, theta0 = 2.5 rad, period 2.691 s)."""
    engine = _pendulum(kind, theta0)
    expected = PENDULUM.small_amplitude_period() if theta0 < 0.1 else PENDULUM.exact_period(theta0)
    traj = engine.simulate(t_end=PENDULUM_PERIODS * expected, step=PENDULUM_STEP, solver=SCHEME)
    angle = traj.outputs()[:, engine.compiled.output_index("angle")]
    assert angle[0] == pytest.approx(theta0, rel=NEWTON_LEVEL)
    period = ref.period_from_samples(traj.t, angle)
    assert period == pytest.approx(expected, rel=CLOSED_FORM)
    # the amplitude is kept (generalized-alpha's damping is O(h^3) per period at this h omega)
    assert np.max(angle[traj.t > (PENDULUM_PERIODS - 1) * expected]) == pytest.approx(theta0, rel=CLOSED_FORM)


# -- (b), (c) free rigid body ---------------------------------------------------------------------------

FREE_T_END = 10.0
FREE_STEPS = (2e-3, 1e-3, 5e-4)


#: One build serves both free-body tests: inertia and initial angular velocity (body axes) are
#: parameters; the initial orientation is fixed.
FREE_CARDAN = (0.3, -0.2, 0.5)


@functools.cache
def _free_body() -> NativeEngine:
    params = tuple(Parameter(n, x) for n, x in (("I1", 1.0), ("I2", 2.0), ("I3", 3.0), ("w1", 0.0), ("w2", 0.0),
                                                ("w3", 1.0)))
    system = mbs.MultibodySystem(
        name="free_body", parameters=params,
        bodies=(mbs.SpatialRigidBody("b", mass=2.0, inertia=("I1", "I2", "I3"), position=(0.1, 0.2, 0.3),
                                     velocity=(0.5, 0, -0.2), rotation=mbs.Cardan(FREE_CARDAN),
                                     angular_velocity=("w1", "w2", "w3"), body_frame_angular_velocity=True),),
        markers=(mbs.Marker("c", "b"),),
        sensors=(mbs.AngularVelocity("w", marker="c", frame="body"),),
        simulation=SimulationSettings(t_end=1.0, step=1e-3))
    return _build(system)


def _free_run(inertia, w0, t_end: float, step: float):
    engine = _free_body()
    values = dict(zip(("I1", "I2", "I3", "w1", "w2", "w3"), (*inertia, *w0)))
    return engine, engine.simulate(engine.compiled.parameter_vector(values), t_end=t_end, step=step, solver=SCHEME)


def _body_rates(engine: NativeEngine, traj) -> tuple[np.ndarray, np.ndarray]:
    cols = _columns(engine, ("b_e0", "b_e1", "b_e2", "b_e3"))
    e, e_dot = traj.q[:, cols], traj.v[:, cols]
    return e, np.array([ref.body_angular_velocity(a, b) for a, b in zip(e, e_dot)])


ASYMMETRIC = ((1.0, 2.0, 3.0), (0.1, 3.0, 0.2))   # tumbling about the middle axis


def test_free_asymmetric_body_conserves_energy_and_momentum_to_second_order():
    inertia, w0 = ASYMMETRIC
    body = ref.FreeRigidBody(inertia)
    e0 = ref.quaternion_of(ref.rotation_matrix_xyz(*FREE_CARDAN))
    sol = body.simulate(e0, np.array(w0), FREE_T_END)
    E0, L0 = body.energy(np.array(w0)), body.angular_momentum(e0, np.array(w0))
    errors = []
    for h in FREE_STEPS:
        engine, traj = _free_run(inertia, w0, FREE_T_END, h)
        e, w = _body_rates(engine, traj)
        # the gyro sensor is the body-frame angular velocity 2 G(e) e'
        assert np.allclose(traj.outputs(), w, rtol=0, atol=NEWTON_LEVEL * np.max(np.abs(w)))
        energy = np.array([body.energy(x) for x in w])
        momentum = np.array([body.angular_momentum(a, x) for a, x in zip(e, w)])
        reference = sol.sol(traj.t)[4:].T
        errors.append([np.max(np.abs(energy - E0)) / E0,
                       np.max(np.linalg.norm(momentum - L0, axis=1)) / np.linalg.norm(L0),
                       np.max(np.abs(w - reference)) / np.max(np.abs(reference))])
        # it tumbles: the middle-axis rate changes sign
        assert np.min(w[:, 1]) < 0 < np.max(w[:, 1])
    errors = np.array(errors)
    assert np.all(np.abs(_orders(errors) - 2.0) <= ORDER), (errors, _orders(errors))


SYMMETRIC = ((2.0, 2.0, 3.0), (0.5, 0.0, 4.0))
PRECESSION_STEP = 1e-3
PRECESSION_T_END = 5.0


def test_free_symmetric_body_precession_rates():
    inertia, w0 = SYMMETRIC
    body = ref.FreeRigidBody(inertia)
    engine, traj = _free_run(inertia, w0, PRECESSION_T_END, PRECESSION_STEP)
    out = traj.outputs()
    w = np.column_stack([out[:, engine.compiled.output_index(f"w_{c}")] for c in "xyz"])
    # w3 stays constant; w_perp circles the symmetry axis at (I3 - I1)/I1 w3 in the body frame
    assert np.ptp(w[:, 2]) <= CLOSED_FORM * w0[2]
    phase = np.unwrap(np.angle(w[:, 0] + 1j * w[:, 1]))
    rate_body = np.polyfit(traj.t, phase, 1)[0]
    assert rate_body == pytest.approx(body.body_precession_rate(w0[2]), rel=CLOSED_FORM)
    # in space the symmetry axis circles the angular momentum at |L|/I1 = I3 w3/(I1 cos beta)
    e, _ = _body_rates(engine, traj)
    L = body.angular_momentum(e[0], np.array(w0))
    n = L / np.linalg.norm(L)
    u = np.cross(n, [0.0, 1.0, 0.0])
    u /= np.linalg.norm(u)
    v = np.cross(n, u)
    axis = np.array([_rotation(x)[:, 2] for x in e])
    rate_space = np.polyfit(traj.t, np.unwrap(np.arctan2(axis @ v, axis @ u)), 1)[0]
    assert rate_space == pytest.approx(body.space_precession_rate(np.array(w0)), rel=CLOSED_FORM)


# -- (d) heavy symmetric top --------------------------------------------------------------------

TOP = ref.HeavyTop(m=1.0, l=0.1, I1c=2.0e-3, I3=4.0e-3, g=9.81)


TOP_THETA = 0.5
TOP_MOTION = ("vx", "vy", "vz", "wx", "wy", "wz")


@functools.cache
def _top() -> NativeEngine:
    """The heavy top: a spatial body whose symmetry axis (body z) carries the centre of mass at
    distance l from a spherical joint to the ground at the origin, tilted by the nutation angle
    TOP_THETA (z-x-z Euler angles (0, TOP_THETA, 0)); its initial velocity and angular velocity
    (global) are parameters (:func:`_top_run`), so that one build serves every top test."""
    A = ref.zxz_matrix(0.0, TOP_THETA, 0.0)
    c = A @ np.array([0.0, 0.0, TOP.l])
    params = (Parameter("m", TOP.m, "kg"), Parameter("l", TOP.l, "m"), Parameter("g", TOP.g, "m/s^2"),
              *(Parameter(n, 0.0) for n in TOP_MOTION))
    system = mbs.MultibodySystem(
        name="heavy_top", parameters=params, gravity=(0, 0, "-g"),
        bodies=(mbs.SpatialRigidBody("top", mass="m", inertia=(TOP.I1c, TOP.I1c, TOP.I3), position=tuple(c),
                                     velocity=TOP_MOTION[:3], rotation=mbs.RotationMatrix(tuple(map(tuple, A))),
                                     angular_velocity=TOP_MOTION[3:]),),
        markers=(mbs.Marker("fixed_point", "ground"), mbs.Marker("tip", "top", position=(0, 0, "-l")),
                 mbs.Marker("centre", "top")),
        joints=(mbs.Spherical("pivot", "fixed_point", "tip"),),
        sensors=(mbs.JointReaction("load", "pivot", frame="global", components=("fx", "fy", "fz")),
                 mbs.MarkerAcceleration("accelerometer", marker="centre", frame="body", gravity=True),
                 mbs.AngularVelocity("gyro", marker="centre", frame="global"),
                 mbs.Orientation("cardan", marker="centre")),
        simulation=SimulationSettings(t_end=1.0, step=1e-3))
    return _build(system)


def _top_parameters(psid: float, phid: float) -> np.ndarray:
    """Initial Euler-angle rates (psi', 0, phi') at (0, TOP_THETA, 0) as the top's parameters."""
    c, c_dot, _, w = TOP.pose(np.array([0.0, TOP_THETA, 0.0, psid, 0.0, phid]))
    return _top().compiled.parameter_vector(dict(zip(TOP_MOTION, (*c_dot, *w))))


TOP_SPIN = 100.0
TOP_STEP = 1e-4
TOP_T_END = 1.0


@pytest.mark.parametrize("root", [0, 1], ids=["slow", "fast"])
def test_heavy_top_steady_precession(root):
    """Started on a root of ``I1 cos(theta) psi'^2 - I3 w3 psi' + m g l = 0`` the top precesses
    steadily: the nutation stays and the azimuth of the centre of mass turns at that root."""
    rate = TOP.steady_precession_rates(TOP_THETA, TOP_SPIN)[root]
    engine = _top()
    p = _top_parameters(rate, TOP_SPIN - rate * np.cos(TOP_THETA))
    traj = engine.simulate(p, t_end=TOP_T_END, step=TOP_STEP, solver=SCHEME)
    c = traj.q[:, _columns(engine, ("top_x", "top_y", "top_z"))]
    nutation = np.arccos(c[:, 2] / TOP.l)
    assert np.max(np.abs(nutation - TOP_THETA)) <= CLOSED_FORM * TOP_THETA
    azimuth = np.unwrap(np.arctan2(c[:, 1], c[:, 0]))
    assert np.polyfit(traj.t, azimuth, 1)[0] == pytest.approx(rate, rel=CLOSED_FORM)


NUTATION_SPIN = 60.0
NUTATION_T_END = 0.5
NUTATION_STEPS = (2e-3, 1e-3, 5e-4)
NORMALIZATION_STEPS = (1e-3, 5e-4, 2.5e-4, 1.25e-4)


def test_nutating_top_converges_with_order_two_in_q_v_a_and_multipliers():
    """Released without precession the top nutates.  Against the Euler-angle reference: the centre
    of mass and the body axes (q), their rates (v), the accelerations of the centre of mass (a) and
    the spherical joint's multipliers (the reaction ``m (c'' - g)`` on the top: the rows are
    ``r_ground - r_top``, so ``-C_q^T lam = +lam`` acts on the top), the sensors (load cell,
    accelerometer in body axes with gravity, gyro, Cardan angles); the normalization's multiplier by
    successive differences.
    Errors at the end of the run (generalized-alpha's start-up error in a and lam decays like
    rho_inf^n)."""
    engine = _top()
    p = _top_parameters(0.0, NUTATION_SPIN)
    ode = TOP.ode()
    sol = ref.integrate(ode.rhs, np.array([0.0, TOP_THETA, 0.0, 0.0, 0.0, NUTATION_SPIN]), NUTATION_T_END)
    y = sol.y[:, -1]
    c, c_dot, A, w = TOP.pose(y)
    c_ddot = TOP.com_acceleration(y, ode.rhs(NUTATION_T_END, y))
    specific_force = c_ddot - np.array([0.0, 0.0, -TOP.g])
    reaction = TOP.m * specific_force
    # Cardan angles of A = Rx(a) Ry(b) Rz(c)
    cardan = np.array([np.arctan2(-A[1, 2], A[2, 2]), np.arcsin(A[0, 2]), np.arctan2(-A[0, 1], A[0, 0])])
    cx = _columns(engine, ("top_x", "top_y", "top_z"))
    ce = _columns(engine, ("top_e0", "top_e1", "top_e2", "top_e3"))
    rows = [engine.compiled.constraint_names.index(f"pivot_{k}") for k in "xyz"]
    out = engine.compiled.output_index
    sensor = [out(f"load_{k}") for k in ("fx", "fy", "fz")]
    accelerometer = [out(f"accelerometer_{k}") for k in "xyz"]
    gyro = [out(f"gyro_{k}") for k in "xyz"]
    angles = [out(f"cardan_{k}") for k in "xyz"]
    errors = []
    for h in NUTATION_STEPS:
        traj = engine.simulate(p, t_end=NUTATION_T_END, step=h, solver=SCHEME)
        q, v, a, lam = traj.q[-1], traj.v[-1], traj.a[-1], traj.lam[-1]
        A_h = _rotation(q[ce])
        errors.append([
            np.linalg.norm(q[cx] - c) / TOP.l,
            np.max(np.abs(A_h - A)),
            np.linalg.norm(v[cx] - c_dot) / np.linalg.norm(c_dot),
            np.linalg.norm(a[cx] - c_ddot) / np.linalg.norm(c_ddot),
            np.linalg.norm(lam[rows] - reaction) / np.linalg.norm(reaction),
            np.linalg.norm(traj.outputs()[-1, sensor] - reaction) / np.linalg.norm(reaction),
            # an accelerometer at the centre of mass measures A^T (c'' - g) in body axes
            np.linalg.norm(traj.outputs()[-1, accelerometer] - A.T @ specific_force) / np.linalg.norm(specific_force),
            np.linalg.norm(traj.outputs()[-1, gyro] - w) / np.linalg.norm(w),
            np.max(np.abs(traj.outputs()[-1, angles] - cardan)),
        ])
    errors = np.array(errors)
    assert np.all(np.abs(_orders(errors) - 2.0) <= ORDER), (errors, _orders(errors))
    # The normalization's multiplier has no closed form here: the differences of runs at halved
    # steps fall with the order (measured 2.36, 2.23, 2.13, 2.07 from h = 4e-3 down; below 1e-5 the
    # index-3 round-off eps/(beta h^2) takes over).
    norm = engine.compiled.constraint_names.index("top_normalization")
    values = [engine.simulate(p, t_end=NUTATION_T_END, step=h, solver=SCHEME).lam[-1, norm]
              for h in NORMALIZATION_STEPS]
    differences = np.abs(np.diff(values))
    assert np.all(np.abs(_orders(differences) - 2.0) <= ORDER), (values, _orders(differences))


# -- (e) spatial revolute chain (torsion springs as joint forces on the atan2 joint angles) ---------

CHAIN_PHI0 = (1.0, 0.5, -0.7)
CHAIN_T_END = 1.0
CHAIN_STEPS = (4e-3, 2e-3, 1e-3)


@functools.cache
def _chain() -> tuple[NativeEngine, ref.LagrangianODE, object]:
    links = ref.SPATIAL_CHAIN
    ode, pose = ref.revolute_chain_ode(links, gravity=ref.SPATIAL_CHAIN_GRAVITY)
    poses = pose(np.array(CHAIN_PHI0))
    bodies, markers, joints, sensors = [], [mbs.Marker("origin", "ground", position=links[0].joint)], [], []
    forces: list = []
    for i, (link, (c, R)) in enumerate(zip(links, poses), start=1):
        bodies.append(mbs.SpatialRigidBody(f"link{i}", mass=link.mass, inertia=link.inertia, position=tuple(c),
                                           rotation=mbs.RotationMatrix(tuple(map(tuple, R)))))
        markers.append(mbs.Marker(f"in{i}", f"link{i}", position=tuple(-np.asarray(link.com, dtype=float))))
        markers.append(mbs.Marker(f"out{i}", f"link{i}",
                                  position=tuple(np.asarray(link.tip, dtype=float) - np.asarray(link.com))))
        parent = "origin" if i == 1 else f"out{i - 1}"
        joints.append(mbs.Revolute(f"j{i}", parent, f"in{i}", axis=link.axis))
        sensors.append(mbs.JointCoordinate(f"angle{i}", f"j{i}"))
        if link.stiffness:
            forces.append(mbs.JointForce(f"spring{i}", f"j{i}",
                                         mbs.scalar_law("linear_spring_damper", stiffness=link.stiffness, damping=0.0,
                                                        free_length=0.0)))
    system = mbs.MultibodySystem(name="spatial_chain", gravity=ref.SPATIAL_CHAIN_GRAVITY, bodies=tuple(bodies),
                                 markers=tuple(markers), joints=tuple(joints), sensors=tuple(sensors),
                                 forces=tuple(forces),
                                 simulation=SimulationSettings(t_end=1.0, step=1e-3))
    return _build(system), ode, pose


@pytest.mark.slow
def test_spatial_revolute_chain_against_the_joint_angle_reference():
    """Slow: the cold build (today's whole-system symbolic pipeline) takes 20-30 s for the three
    bodies with five-row revolute joints and atan2 joint-angle sensors, and about 140 s with the
    torsion springs on those angles (measured on the shared 2-core machine: differentiate 32 s
    without, 77 s with the springs); the runs take 0.02 s.  Measured errors (joint angles, rad):
    1.8e-3, 4.4e-4, 1.1e-4 at h = 4, 2, 1 ms: orders 2.00, 2.00."""
    engine, ode, pose = _chain()
    n = len(ref.SPATIAL_CHAIN)
    sol = ref.integrate(ode.rhs, np.concatenate([CHAIN_PHI0, np.zeros(n)]), CHAIN_T_END)
    angles = [engine.compiled.output_index(f"angle{i}") for i in range(1, n + 1)]
    coms = [_columns(engine, (f"link{i}_x", f"link{i}_y", f"link{i}_z")) for i in range(1, n + 1)]
    errors = []
    for h in CHAIN_STEPS:
        traj = engine.simulate(t_end=CHAIN_T_END, step=h, solver=SCHEME)
        phi = sol.sol(traj.t)[:n].T
        assert traj.outputs()[0, angles] == pytest.approx(CHAIN_PHI0, abs=NEWTON_LEVEL)
        com = np.array([[c for c, _ in pose(x)] for x in phi])        # (N+1, n, 3)
        got = np.stack([traj.q[:, cols] for cols in coms], axis=1)
        errors.append([np.max(np.abs(traj.outputs()[:, angles] - phi)), np.max(np.abs(got - com))])
    errors = np.array(errors)
    assert np.all(np.abs(_orders(errors) - 2.0) <= ORDER), (errors, _orders(errors))


# -- (e') spatial double pendulum on spherical joints ------------------------------------------------------

SPHERICAL_START = np.array([0.5, 0.3, 0.0, -0.4, 0.6, 0.2, 0.5, -1.0, 2.0, 1.0, 0.5, -1.5])
SPHERICAL_T_END = 1.0
SPHERICAL_STEPS = (4e-3, 2e-3, 1e-3)
SPHERICAL_BODIES = (2, 5)     # the links of ref.SPHERICAL_DOUBLE_PENDULUM that carry the rods


@functools.cache
def _spherical_double_pendulum() -> tuple[NativeEngine, ref.LagrangianODE, object]:
    ode, pose = ref.revolute_chain_ode(ref.SPHERICAL_DOUBLE_PENDULUM, gravity=ref.SPATIAL_CHAIN_GRAVITY)
    motion = pose(SPHERICAL_START[:6], SPHERICAL_START[6:])
    bodies, markers = [], [mbs.Marker("origin", "ground")]
    for k, (rod, index) in enumerate(zip(ref.SPHERICAL_RODS, SPHERICAL_BODIES), start=1):
        c, R, c_dot, w = motion[index]
        bodies.append(mbs.SpatialRigidBody(f"rod{k}", mass=rod.mass, inertia=rod.inertia, position=tuple(c),
                                           rotation=mbs.RotationMatrix(tuple(map(tuple, R))), velocity=tuple(c_dot),
                                           angular_velocity=tuple(w)))
        markers.append(mbs.Marker(f"top{k}", f"rod{k}", position=tuple(-np.asarray(rod.com, dtype=float))))
        markers.append(mbs.Marker(f"bottom{k}", f"rod{k}",
                                  position=tuple(np.asarray(rod.tip, dtype=float) - np.asarray(rod.com))))
    system = mbs.MultibodySystem(
        name="spherical_double_pendulum", gravity=ref.SPATIAL_CHAIN_GRAVITY, bodies=tuple(bodies),
        markers=tuple(markers),
        joints=(mbs.Spherical("shoulder", "origin", "top1"), mbs.Spherical("elbow", "bottom1", "top2")),
        sensors=(mbs.MarkerPosition("hand", marker="bottom2"),),
        simulation=SimulationSettings(t_end=1.0, step=1e-3))
    return _build(system), ode, pose


@pytest.mark.slow
def test_spatial_double_pendulum_on_spherical_joints_against_the_reference():
    """Two rods on spherical joints with spin (3-D motion) against the reference built from three
    revolutes per joint: centres of mass and orientations converge with order 2.  Slow: the
    reference's sympy derivation takes 25 s on a loaded machine."""
    engine, ode, pose = _spherical_double_pendulum()
    sol = ref.integrate(ode.rhs, SPHERICAL_START, SPHERICAL_T_END)
    errors = []
    for h in SPHERICAL_STEPS:
        traj = engine.simulate(t_end=SPHERICAL_T_END, step=h, solver=SCHEME)
        exact = [pose(y[:6]) for y in sol.sol(traj.t).T]
        row = []
        for k, index in enumerate(SPHERICAL_BODIES, start=1):
            c = np.array([p[index][0] for p in exact])
            R = np.array([p[index][1] for p in exact])
            e = traj.q[:, _columns(engine, tuple(f"rod{k}_e{j}" for j in range(4)))]
            row.append(np.max(np.abs(traj.q[:, _columns(engine, (f"rod{k}_x", f"rod{k}_y", f"rod{k}_z"))] - c)))
            row.append(max(np.max(np.abs(_rotation(x) - Rm)) for x, Rm in zip(e, R)))
        errors.append(row)
    errors = np.array(errors)
    assert np.all(np.abs(_orders(errors) - 2.0) <= ORDER), (errors, _orders(errors))


# -- (f) the cart with three pendula from planar bodies ---------------------------------------------

TRIPLE_T_END = 2.0
TRIPLE_STEPS = (4e-3, 2e-3, 1e-3)


@functools.cache
def _triple_pendulum() -> NativeEngine:
    """examples/triple_pendulum.toml rebuilt from components: a cart on a prismatic joint along x
    (its friction d_c a joint force, the excitation a force on it), three rods on revolute joints
    (the cart joint's damper d_1 and the beam springs c_f, d_f joint forces on the relative angles),
    gravity."""
    v = ref.TRIPLE_PENDULUM
    params = tuple(Parameter(k, x) for k, x in v.items())
    bodies = [mbs.PlanarRigidBody("cart", mass="m_c", inertia=1.0)]
    markers = [mbs.Marker("track", "ground"), mbs.Marker("cart_slider", "cart"), mbs.Marker("cart_pin", "cart")]
    joints = [mbs.Prismatic("rail", "track", "cart_slider")]
    for i in range(1, 4):
        bodies.append(mbs.PlanarRigidBody(f"rod{i}", mass="m", inertia="m*l**2/12", position=(0, f"-(2*{i}-1)*l/2")))
        markers += [mbs.Marker(f"top{i}", f"rod{i}", position=(0, "l/2")),
                    mbs.Marker(f"bottom{i}", f"rod{i}", position=(0, "-l/2"))]
        joints.append(mbs.Revolute(f"hinge{i}", "cart_pin" if i == 1 else f"bottom{i - 1}", f"top{i}"))
    damper = mbs.scalar_law("linear_spring_damper", stiffness=0.0, damping="d_c", free_length=0.0)
    forces = [
        mbs.JointForce("cart_friction", "rail", damper),
        mbs.JointForce("joint_1", "hinge1", mbs.scalar_law("linear_spring_damper", stiffness=0.0, damping="d_1",
                                                           free_length=0.0)),
        mbs.Force("excitation", "cart_slider",
                  ("F1*sin(2*pi*f1*t) + F0*(t - t0)/tau*exp(0.5 - (t - t0)**2/(2*tau**2))", 0, 0)),
    ]
    for i in (2, 3):
        forces.append(mbs.JointForce(f"beam_{i - 1}{i}", f"hinge{i}",
                                     mbs.scalar_law("linear_spring_damper", stiffness="c_f", damping="d_f",
                                                    free_length=0.0)))
    system = mbs.MultibodySystem(
        name="triple_pendulum_components", parameters=params, gravity=(0, "-g", 0), bodies=tuple(bodies),
        markers=tuple(markers), joints=tuple(joints), forces=tuple(forces),
        sensors=(mbs.JointCoordinate("x_c", "rail"), mbs.JointCoordinate("phi1", "hinge1")),
        simulation=SimulationSettings(t_end=1.0, step=1e-2, alpha=-0.05))
    return _build(system)


def test_triple_pendulum_from_components_against_the_minimal_coordinate_reference():
    engine = _triple_pendulum()
    ode = ref.triple_pendulum_ode()
    sol = ref.integrate(ode.rhs, np.zeros(8), TRIPLE_T_END)
    channels = [engine.compiled.output_index(n) for n in ("x_c", "phi1")]
    errors = []
    for h in TRIPLE_STEPS:
        traj = engine.simulate(t_end=TRIPLE_T_END, step=h, solver=SCHEME)
        exact = sol.sol(traj.t)[[0, 1]].T
        errors.append(np.max(np.abs(traj.outputs()[:, channels] - exact), axis=0) / np.max(np.abs(exact), axis=0))
    errors = np.array(errors)
    assert np.all(np.abs(_orders(errors) - 2.0) <= ORDER), (errors, _orders(errors))


# -- (g) a point-to-point spring-damper: the damped oscillator ------------------------------------------

OSCILLATOR = dict(m=1.0, k=100.0, d=0.4, L0=0.5, g=9.81, A=0.05)
OSCILLATOR_T_END = 2.0
OSCILLATOR_STEPS = (2e-3, 1e-3, 5e-4)


@functools.cache
def _oscillator() -> NativeEngine:
    """A point mass hanging below a ground marker on a linear spring-damper (free length L0),
    released at rest A below its equilibrium z_eq = -(L0 + m g/k)."""
    v = OSCILLATOR
    z0 = -(v["L0"] + v["m"] * v["g"] / v["k"]) - v["A"]
    system = mbs.MultibodySystem(
        name="hanging_mass", parameters=tuple(Parameter(n, x) for n, x in v.items()), gravity=(0, 0, "-g"),
        bodies=(mbs.PointMass("bob", mass="m", position=(0.0, 0.0, z0)),),
        markers=(mbs.Marker("hook", "ground"), mbs.Marker("eye", "bob")),
        forces=(mbs.SpringDamper("spring", "hook", "eye", mbs.scalar_law("linear_spring_damper", stiffness="k",
                                                                          damping="d", free_length="L0")),),
        sensors=(mbs.Distance("length", "hook", "eye"),),
        simulation=SimulationSettings(t_end=1.0, step=1e-3))
    return _build(system)


def test_spring_damper_between_markers_is_the_damped_oscillator():
    """``u'' + (d/m) u' + (k/m) u = 0`` for ``u = z - z_eq``: ``u = e^{-zeta w t} u0 (cos w_d t +
    zeta w/w_d sin w_d t)``; the simulated length converges to it with order 2."""
    v = OSCILLATOR
    engine = _oscillator()
    w = np.sqrt(v["k"] / v["m"])
    zeta = v["d"] / (2 * np.sqrt(v["k"] * v["m"]))
    w_d = w * np.sqrt(1 - zeta**2)
    u0 = -v["A"]
    z_eq = -(v["L0"] + v["m"] * v["g"] / v["k"])
    errors = []
    for h in OSCILLATOR_STEPS:
        traj = engine.simulate(t_end=OSCILLATOR_T_END, step=h, solver=SCHEME)
        t = traj.t
        u = np.exp(-zeta * w * t) * u0 * (np.cos(w_d * t) + zeta * w / w_d * np.sin(w_d * t))
        length = traj.outputs()[:, engine.compiled.output_index("length")]
        errors.append(np.max(np.abs(length - (-(z_eq + u)))) / v["A"])
        # it stays on the vertical
        assert np.max(np.abs(traj.q[:, _columns(engine, ("bob_x", "bob_y"))])) <= NEWTON_LEVEL
    assert np.all(np.abs(_orders(errors) - 2.0) <= ORDER), (errors, _orders(errors))


# -- (h) applied torques in body and global axes -----------------------------------------------------------

TORQUE = 0.6
TORQUE_INERTIA = (1.0, 2.0, 3.0)
TORQUE_CARDAN = (0.4, -0.3, 1.2)
TORQUE_T_END = 1.0
TORQUE_STEP = 1e-3


@functools.cache
def _torqued_body() -> NativeEngine:
    """A free body at rest, tilted, with two torques: ``Tb`` about its body z axis given in body
    axes, and ``Tg`` along that (fixed) axis given in global axes; the test switches one on."""
    axis = ref.rotation_matrix_xyz(*TORQUE_CARDAN)[:, 2]
    system = mbs.MultibodySystem(
        name="torqued_body", parameters=(Parameter("Tb", 0.0), Parameter("Tg", 0.0)),
        bodies=(mbs.SpatialRigidBody("b", mass=1.0, inertia=TORQUE_INERTIA, rotation=mbs.Cardan(TORQUE_CARDAN)),),
        markers=(mbs.Marker("c", "b"),),
        forces=(mbs.Torque("body_torque", "b", (0, 0, "Tb"), frame="body"),
                mbs.Torque("global_torque", "b", tuple(f"Tg*{float(x)!r}" for x in axis), frame="global")),
        sensors=(mbs.AngularVelocity("w", marker="c", frame="body"),),
        simulation=SimulationSettings(t_end=1.0, step=1e-3))
    return _build(system)


@pytest.mark.parametrize("frame", ["body", "global"])
def test_torque_about_a_principal_axis_spins_the_body_up(frame):
    """About a principal axis there is no gyroscopic coupling: ``w3 = T t/I3`` and the body turns
    by ``T t^2/(2 I3)`` about that axis, ``A(t) = A0 Rz(T t^2/(2 I3))``; the torque given in body
    or in global axes."""
    engine = _torqued_body()
    p = engine.compiled.parameter_vector({"Tb" if frame == "body" else "Tg": TORQUE})
    traj = engine.simulate(p, t_end=TORQUE_T_END, step=TORQUE_STEP, solver=SCHEME)
    t = traj.t
    A0 = ref.rotation_matrix_xyz(*TORQUE_CARDAN)
    w = traj.outputs()[:, [engine.compiled.output_index(f"w_{k}") for k in "xyz"]]
    assert np.max(np.abs(w[:, :2])) <= NEWTON_LEVEL
    assert np.allclose(w[:, 2], TORQUE * t / TORQUE_INERTIA[2], rtol=CLOSED_FORM, atol=0)
    e = traj.q[-1, _columns(engine, tuple(f"b_e{k}" for k in range(4)))]
    angle = TORQUE * t[-1] ** 2 / (2 * TORQUE_INERTIA[2])
    expected = A0 @ ref.zxz_matrix(angle, 0.0, 0.0)   # Rz(angle)
    assert np.max(np.abs(_rotation(e) - expected)) <= CLOSED_FORM * angle
