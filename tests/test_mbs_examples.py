"""The bundled multibody examples (issue 23, "Examples"): model files built from bodies, markers,
joints, forces and sensors, read by the model-file reader and lowered to ordinary models.

(a) ``triple_pendulum_bodies`` against the hand-written ``triple_pendulum``: the same
    coordinates (other names) and constraints (opposite sign, plus the cart's track row), so
    the same motion to round-off; identifying c_f, d_f from the bundled measurement gives the
    hand-written file's result;
(b) ``slider_crank_bodies`` against the hand-written ``slider_crank``: other coordinates (x, y,
    phi per body against phi, theta, xs), so the same motion to the integration error only: the
    difference of the crank angle, xs and the crank speed falls by 4 when the step halves
    (generalized-alpha: second order on both files);
(c) ``heavy_top``: steady precession at the slow root of the closed form (Goldstein Sec. 5.7,
    computed here from the parameter values, independently of the file's expression for the
    initial angular velocity), constant nutation and spin, and the pivot's force m (c'' - g);
(d) gradients of a least-squares fit on each example, with parameters in masses, inertias,
    marker positions and force laws: adjoint = forward sensitivities (ADJOINT_VS_FORWARD) =
    fourth-order central differences (GRADIENT_VS_FD).
"""

from __future__ import annotations

import numpy as np
import pytest

from fmi_adjoint import Experiment, IdentificationProblem, LeastSquaresCost, identify, read_csv
from fmi_adjoint.costs import Sampler
from fmi_adjoint.examples import EXAMPLES_DIR
from fmi_adjoint.examples.triple_pendulum_data import CSV_NAME, NAMES, OUTPUT, START_VALUES
from fmi_adjoint.integrate import GeneralizedAlpha
from tolerances import (
    ADJOINT_VS_FORWARD,
    CLOSED_FORM,
    EXACT,
    FEW_ULPS,
    GRADIENT_VS_FD,
    INDEX3_ROUNDOFF,
    NOISE_FREE_RECOVERY,
    ORDER,
)

#: The generalized-alpha scheme of the order studies (second order on both slider-crank files;
#: the files' own HHT with alpha != 0 is first order on slider_crank's configuration-dependent
#: mass matrix).
SCHEME = GeneralizedAlpha(rho_inf=0.8)


def _output(engine, traj, name: str) -> np.ndarray:
    return traj.outputs()[:, engine.compiled.output_index(name)]


def _coordinate(engine, traj, name: str, which: str = "q") -> np.ndarray:
    return getattr(traj, which)[:, engine.compiled.coordinate_names.index(name)]


def _parameter(engine, name: str) -> float:
    compiled = engine.compiled
    return float(compiled.defaults[compiled.parameter_index(name)])


# -- (a) triple pendulum from bodies -----------------------------------------------------------

#: The file's coordinates and their names in triple_pendulum_bodies.
TRIPLE_COORDINATES = {"x_c": "cart_x", **{f"x_{i}": f"rod{i}_x" for i in (1, 2, 3)},
                      **{f"y_{i}": f"rod{i}_y" for i in (1, 2, 3)}, **{f"phi{i}": f"rod{i}_phi" for i in (1, 2, 3)}}


def test_triple_pendulum_from_bodies_equals_the_hand_written_file(example_engine):
    """The file's 20 s with its HHT: outputs and positions to round-off (measured 1.6e-14 phi1,
    4.8e-15 x_c of their largest values); the multipliers of the joint rows are the file's with
    the opposite sign, to the index-3 round-off (measured 2.3e-10)."""
    hand, bodies = example_engine("triple_pendulum"), example_engine("triple_pendulum_bodies")
    a, b = hand.simulate(), bodies.simulate()
    assert np.array_equal(a.t, b.t)
    for name in ("phi1", "x_c"):
        ya, yb = _output(hand, a, name), _output(bodies, b, name)
        assert np.max(np.abs(ya - yb)) <= EXACT * np.max(np.abs(ya)), name
    # Positions to round-off (measured 4.5e-16 of the largest); velocities and accelerations
    # carry the round-off of the index-3 iteration, amplified by 1/(beta h^2) in the
    # accelerations (measured 2.6e-9) and h times that in the velocities (4.7e-12).
    for which, tolerance in (("q", EXACT), ("v", INDEX3_ROUNDOFF), ("a", INDEX3_ROUNDOFF)):
        scale = np.max(np.abs(getattr(a, which)))
        for theirs, ours in TRIPLE_COORDINATES.items():
            diff = _coordinate(hand, a, theirs, which) - _coordinate(bodies, b, ours, which)
            assert np.max(np.abs(diff)) <= tolerance * scale, (which, theirs)
    assert np.max(np.abs(_coordinate(bodies, b, "cart_y"))) <= EXACT
    hand_rows, body_rows = hand.compiled.constraint_names, bodies.compiled.constraint_names
    for k in (1, 2, 3):
        for axis in "xy":
            la = a.lam[:, hand_rows.index(f"joint_{k}_{axis}")]
            lb = b.lam[:, body_rows.index(f"hinge{k}_{axis}")]
            assert np.max(np.abs(la + lb)) <= INDEX3_ROUNDOFF * np.max(np.abs(la)), (k, axis)


def _identify_beam(engine) -> np.ndarray:
    data = read_csv(EXAMPLES_DIR / CSV_NAME)
    cost = LeastSquaresCost(data.times, data.column(OUTPUT), (OUTPUT,))
    problem = IdentificationProblem([Experiment(engine.compiled, cost, engine=engine)], NAMES, start=START_VALUES)
    result = identify(problem, "least_squares", progress=None)
    assert result.success, result.message
    return np.asarray(result.parameters)


def test_triple_pendulum_from_bodies_identifies_like_the_hand_written_file(example_engine):
    """c_f, d_f from the bundled measurement (the papers' start 8.5, 0.15; Gauss-Newton, 9
    iterations, under a second per model): the hand-written file's values (c_f = 9.9911, d_f = 0.02000),
    measured to 8e-15 (c_f) and 5.4e-13 (d_f) relative."""
    hand = _identify_beam(example_engine("triple_pendulum"))
    bodies = _identify_beam(example_engine("triple_pendulum_bodies"))
    assert np.all(np.abs(bodies - hand) <= NOISE_FREE_RECOVERY * np.abs(hand)), (hand, bodies)


# -- (b) slider-crank from bodies ----------------------------------------------------------------

#: Steps of the order study [s] (the files' own step and its half) over the files' 2 s.
CRANK_STEPS = (1e-3, 5e-4)


def _crank_differences(hand, bodies, step: float) -> np.ndarray:
    """Largest differences over the run: crank angle, slider position, crank speed."""
    a, b = hand.simulate(step=step, solver=SCHEME), bodies.simulate(step=step, solver=SCHEME)
    return np.array([
        np.max(np.abs(_coordinate(hand, a, "phi") - _coordinate(bodies, b, "crank_phi"))),
        np.max(np.abs(_output(hand, a, "xs") - _output(bodies, b, "xs"))),
        np.max(np.abs(_output(hand, a, "crank_speed") - _output(bodies, b, "crank_speed"))),
    ])


def test_slider_crank_from_bodies_agrees_to_second_order(example_engine):
    """Measured (largest difference over 2 s): crank angle 1.8e-5 / 4.5e-6 rad, xs 8.1e-7 /
    2.0e-7 m, crank speed 2.3e-4 / 5.7e-5 rad/s at h = 1e-3 / 5e-4: ratio 4.000.  (The
    accelerations and multipliers also converge at second order, but their largest difference
    sits in generalized-alpha's start-up layer, which is first order.)"""
    hand, bodies = example_engine("slider_crank"), example_engine("slider_crank_bodies")
    errors = np.array([_crank_differences(hand, bodies, h) for h in CRANK_STEPS])
    assert np.all(errors > 0)
    orders = np.log2(errors[0] / errors[1]) / np.log2(CRANK_STEPS[0] / CRANK_STEPS[1])
    assert np.all(np.abs(orders - 2.0) <= ORDER), (errors, orders)


def test_slider_crank_from_bodies_starts_in_the_hand_written_state(example_engine):
    """Both consistent initializations are square (the crank angle and speed held), so the
    initial states agree: the rod angle is theta, the slider's x is xs, the multipliers at t = 0
    give the same rod force; the load cell's fx is the file's rod_force_x by construction."""
    hand, bodies = example_engine("slider_crank"), example_engine("slider_crank_bodies")
    a, b = hand.simulate(t_end=0.01), bodies.simulate(t_end=0.01)
    pairs = (("phi", "crank_phi"), ("theta", "rod_phi"), ("xs", "slider_x"))
    for which in ("q", "v"):
        for theirs, ours in pairs:
            got, want = _coordinate(bodies, b, ours, which)[0], _coordinate(hand, a, theirs, which)[0]
            assert abs(got - want) <= FEW_ULPS, (which, theirs)
    force = _output(hand, a, "rod_force_x")[0]
    assert abs(_output(bodies, b, "rod_force_x")[0] - force) <= INDEX3_ROUNDOFF * abs(force)
    assert np.array_equal(_output(bodies, b, "rod_force_x"), _output(bodies, b, "wrist_pin_load_fx"))


# -- (c) heavy top ------------------------------------------------------------------------------

#: Steps of the precession study [s] over the file's 1 s.
TOP_STEPS = (5e-4, 2.5e-4)


def _slow_precession_rate(engine) -> float:
    """The slow root of ``I1 cos(theta) psi'^2 - I3 w3 psi' + m g l = 0`` (numpy's polynomial
    roots, not the file's expression)."""
    m, R, l, g, w3, theta = (_parameter(engine, n) for n in ("m", "R", "l", "g", "w3", "theta0"))
    I1c, I3 = m * R**2 / 4, m * R**2 / 2  # a thin disc
    roots = np.roots([(I1c + m * l**2) * np.cos(theta), -I3 * w3, m * g * l])
    assert np.all(np.isreal(roots))
    return float(np.min(roots.real))


def test_heavy_top_precesses_steadily_at_the_closed_form_rate(example_engine):
    """Measured: the fitted precession rate is 3.58e-4 / 9.57e-5 below the closed form at h = 5e-4
    / 2.5e-4 (order 1.90); at 2.5e-4 the nutation stays within 3.5e-6 rad of theta0, the spin
    within 3.4e-3 rad/s of w3 and, after the scheme's start-up layer, the pivot force within
    3.3e-5 m g of m (c'' - g)."""
    engine = example_engine("heavy_top")
    theta0, m, l, g = (_parameter(engine, n) for n in ("theta0", "m", "l", "g"))
    rate = _slow_precession_rate(engine)
    errors = []
    for h in TOP_STEPS:
        traj = engine.simulate(step=h)
        psi = np.unwrap(_output(engine, traj, "precession"))
        errors.append(np.polyfit(traj.t, psi, 1)[0] / rate - 1.0)
    assert np.log2(errors[0] / errors[1]) == pytest.approx(2.0, abs=ORDER), errors
    assert abs(errors[-1]) <= CLOSED_FORM
    # On the finest run: the nutation starts at theta0 (the file's rotation and its parameter
    # theta0 agree) and stays; the spin stays; the pivot pushes m g up and m l sin(theta) psi'^2
    # towards the vertical axis.
    nutation = _output(engine, traj, "nutation")
    assert abs(nutation[0] - theta0) <= FEW_ULPS
    assert np.max(np.abs(nutation - theta0)) <= CLOSED_FORM * theta0
    spin = _output(engine, traj, "gyro_z")
    assert np.max(np.abs(spin - _parameter(engine, "w3"))) <= CLOSED_FORM * spin[0]
    later = traj.t >= 0.5
    force = np.stack([_output(engine, traj, f"pivot_load_f{k}") for k in "xyz"], axis=1)[later]
    horizontal = m * l * np.sin(theta0) * rate**2
    want = np.stack([-horizontal * np.sin(psi[later]), horizontal * np.cos(psi[later]),
                     np.full(psi[later].shape, m * g)], axis=1)
    assert np.max(np.linalg.norm(force - want, axis=1)) <= CLOSED_FORM * m * g


# -- (d) gradients -------------------------------------------------------------------------------

#: Example -> (parameters, end time [s]): masses, inertias (the rods' through m and l, the
#: crank's through m_c and r, the top's through m and R), marker positions (l, r) and force laws
#: (c_f, d_f, c_s); 300 steps each.
GRADIENT_CASES = {
    "triple_pendulum_bodies": (("m_c", "m", "l", "c_f", "d_f"), 3.0),
    "slider_crank_bodies": (("m_c", "m_r", "r", "l", "c_s"), 0.3),
    "heavy_top": (("m", "R", "l"), 0.3),
}


@pytest.fixture(scope="module", params=sorted(GRADIENT_CASES))
def gradient_case(request, example_engine):
    """Least squares of every output against a run at parameters 3 % off the defaults (every
    third step, each channel scaled by its RMS), evaluated at the defaults."""
    name = request.param
    names, t_end = GRADIENT_CASES[name]
    engine = example_engine(name)
    compiled = engine.compiled
    p = compiled.defaults.copy()
    for n in names:
        p[compiled.parameter_index(n)] *= 1.03
    truth = engine.simulate(p, t_end=t_end)
    times = truth.t[::3]
    data = Sampler.from_grid(truth.t, times).sample(truth.outputs())
    cost = LeastSquaresCost(times, data, compiled.output_names, scales=np.sqrt(np.mean(data**2, axis=0)))
    problem = IdentificationProblem([Experiment(compiled, cost, t_end=t_end, engine=engine)], names)
    x = problem.start.copy()
    return name, problem, x, problem.evaluate(x, "adjoint"), problem.evaluate(x, "forward")


def test_adjoint_equals_forward_sensitivities(gradient_case):
    """Measured, largest relative difference per component: heavy_top 4.2e-12,
    slider_crank_bodies 1.2e-10, triple_pendulum_bodies 7.2e-15."""
    name, _, _, adjoint, forward = gradient_case
    assert np.all(adjoint.gradient != 0), name
    assert adjoint.J == pytest.approx(forward.J, rel=EXACT)
    assert np.all(np.abs(adjoint.gradient - forward.gradient) <= ADJOINT_VS_FORWARD * np.abs(forward.gradient)), \
        (name, adjoint.gradient, forward.gradient)


def test_adjoint_equals_central_differences(gradient_case):
    """Fourth-order differences at the relative step 1e-3.  Measured: heavy_top 2.0e-8,
    slider_crank_bodies 5.1e-8, triple_pendulum_bodies 3.3e-9."""
    name, problem, x, adjoint, _ = gradient_case
    fd = problem.finite_differences(x, rel=1e-3, order=4)
    assert np.all(np.abs(adjoint.gradient - fd) <= GRADIENT_VS_FD * np.abs(fd)), (name, adjoint.gradient, fd)
