"""The independent references of ``tests/mbs_reference.py`` checked on their own (so that the
physics tests of the multibody layer compare with something shown right):

(a) closed forms: the physical pendulum's exact (elliptic) period and its small-amplitude limit,
    the free symmetric body's precession rates, the heavy top's steady precession;
(b) invariants: energy of the conservative references, angular momentum of the free body;
(c) two derivations of one system agree (the spatial revolute chain with parallel axes against
    the planar chain, one link against the physical pendulum);
(d) the hand-written bundled models simulated by fmi-adjoint (triple_pendulum.toml,
    slider_crank.toml) converge to the minimal-coordinate references with the scheme's order 2.
"""

from __future__ import annotations

import numpy as np
import pytest

import mbs_reference as ref
from fmi_adjoint import GeneralizedAlpha
from tolerances import EXACT, FEW_ULPS, GLOBAL_ERROR_AT_1E_10, ORDER

#: Series of the exact period: ``T/T0 = 1 + theta0^2/16 + 11 theta0^4/3072 + O(theta0^6)``
#: (Landau & Lifshitz Sec. 11, problem 1 / the expansion of K); at theta0 = 0.1 the remainder is
#: ~ 173/737280 theta0^6 = 2.3e-10, against 3.6e-8 of the theta0^4 term.
SERIES_REMAINDER = 1e-9


def test_pendulum_exact_period_tends_to_the_small_amplitude_period():
    p = ref.PhysicalPendulum()
    theta0 = 0.1
    series = 1 + theta0**2 / 16 + 11 * theta0**4 / 3072
    assert abs(p.exact_period(theta0) / p.small_amplitude_period() - series) < SERIES_REMAINDER
    # Landau-Lifshitz's limit: a uniform rod about its end, 2 pi sqrt(2 l/(3 g)).
    assert p.small_amplitude_period() == pytest.approx(2 * np.pi * np.sqrt(2 * 1.0 / (3 * 9.81)),
                                                       rel=GLOBAL_ERROR_AT_1E_10)


@pytest.mark.parametrize("theta0", [0.05, 1.0, 2.5])
def test_pendulum_integrated_period_is_the_elliptic_integral(theta0):
    p = ref.PhysicalPendulum()
    assert p.period_by_integration(theta0) == pytest.approx(p.exact_period(theta0), rel=GLOBAL_ERROR_AT_1E_10)


def test_pendulum_energy_is_conserved():
    p = ref.PhysicalPendulum()
    sol = ref.integrate(p.rhs, np.array([2.5, 0.0]), 10.0)
    energies = np.array([p.energy(y) for y in sol.y.T])
    assert np.ptp(energies) <= GLOBAL_ERROR_AT_1E_10 * abs(energies[0])


def _energy_drift(ode: ref.LagrangianODE, y0: np.ndarray, t_end: float, extra=lambda y: 0.0) -> float:
    """Relative spread of T + V (+ ``extra(y)``: spring energy carried as a generalized force)."""
    sol = ref.integrate(ode.rhs, y0, t_end)
    energies = np.array([ode.energy(t, y) + extra(y) for t, y in zip(sol.t, sol.y.T)])
    return float(np.ptp(energies) / np.max(np.abs(energies)))


def test_triple_pendulum_without_dampers_and_forces_conserves_energy():
    conservative = dict(d_c=0.0, d_1=0.0, d_f=0.0, F0=0.0, F1=0.0)
    ode = ref.triple_pendulum_ode(conservative)
    y0 = np.array([0.0, 1.0, -0.5, 0.8, 0.3, 0.0, 0.0, 0.0])
    c_f = ref.TRIPLE_PENDULUM["c_f"]
    springs = lambda y: c_f / 2 * float(np.sum(np.diff(y[1:4]) ** 2))  # noqa: E731
    assert _energy_drift(ode, y0, 5.0, springs) <= GLOBAL_ERROR_AT_1E_10


def test_triple_pendulum_at_rest_stays_at_rest_without_excitation():
    ode = ref.triple_pendulum_ode(dict(F0=0.0, F1=0.0))
    assert np.all(ode.rhs(0.3, np.zeros(8)) == 0.0)


def test_slider_crank_without_dampers_and_torque_conserves_energy():
    ode, _ = ref.slider_crank_ode(dict(d_s=0.0, d_phi=0.0, T0=0.0))
    # The spring's energy is a generalized force here, not V: add it to T + V by hand.
    r, l, c_s = ref.SLIDER_CRANK["r"], ref.SLIDER_CRANK["l"], ref.SLIDER_CRANK["c_s"]
    _, kin = ref.slider_crank_ode()
    sol = ref.integrate(ode.rhs, np.array([0.3, 20.0]), 1.0)
    energies = np.array([ode.energy(t, y) + c_s / 2 * (kin(y[0])[1] - r - l) ** 2 for t, y in zip(sol.t, sol.y.T)])
    assert np.ptp(energies) <= GLOBAL_ERROR_AT_1E_10 * energies[0]


def test_spatial_revolute_chain_conserves_energy():
    ode, _ = ref.revolute_chain_ode(ref.SPATIAL_CHAIN, gravity=ref.SPATIAL_CHAIN_GRAVITY)
    y0 = np.array([1.0, 0.5, -0.7, 0.0, 2.0, 1.0])
    assert _energy_drift(ode, y0, 3.0) <= GLOBAL_ERROR_AT_1E_10


def test_one_link_chain_is_the_physical_pendulum():
    p = ref.PhysicalPendulum()
    link = ref.ChainLink(axis=(0, 0, 1), joint=(0, 0, 0), com=(0, -p.d, 0), tip=(0, -2 * p.d, 0), mass=p.m,
                         inertia=(p.J_c, 0.0, p.J_c))
    ode, _ = ref.revolute_chain_ode([link], gravity=(0, -p.g, 0))
    theta0 = 2.0
    period = p.exact_period(theta0)
    sol = ref.integrate(ode.rhs, np.array([theta0, 0.0]), period)
    assert sol.y[0, -1] == pytest.approx(theta0, rel=GLOBAL_ERROR_AT_1E_10)
    assert sol.sol(period / 2)[0] == pytest.approx(-theta0, rel=GLOBAL_ERROR_AT_1E_10)


def test_spatial_chain_with_parallel_axes_is_the_planar_chain():
    """The chain of Rodrigues rotations with all axes along z against the hand-written planar
    cart-and-pendula equations with the cart held (two derivations of one system)."""
    l, m = ref.TRIPLE_PENDULUM["l"], ref.TRIPLE_PENDULUM["m"]
    rod = dict(axis=(0, 0, 1), joint=(0, 0, 0), com=(0, -l / 2, 0), tip=(0, -l, 0), mass=m,
               inertia=(m * l**2 / 12, 0.0, m * l**2 / 12))
    chain, _ = ref.revolute_chain_ode([ref.ChainLink(**rod)] * 3, gravity=(0, -9.81, 0))
    planar = ref.triple_pendulum_ode(dict(d_1=0.0, c_f=0.0, d_f=0.0, F0=0.0, F1=0.0), fixed_cart=True)
    # relative angles (chain) <-> absolute angles (planar)
    absolute0 = np.array([0.8, 1.5, -0.4, 0.0, 1.0, -2.0])
    relative0 = np.concatenate([np.diff(absolute0[:3], prepend=0.0), np.diff(absolute0[3:], prepend=0.0)])
    # the same accelerations (relative angles: their cumulative sums are the absolute ones) ...
    acc_planar, acc_chain = planar.rhs(0.0, absolute0)[3:], np.cumsum(chain.rhs(0.0, relative0)[3:])
    assert np.max(np.abs(acc_planar - acc_chain)) <= EXACT * np.max(np.abs(acc_planar))
    # ... and the same (chaotic) motion for 3 s (measured 3.1e-11 relative)
    t = np.linspace(0.0, 3.0, 31)
    a = ref.integrate(planar.rhs, absolute0, 3.0, t_eval=t).y
    b = ref.integrate(chain.rhs, relative0, 3.0, t_eval=t).y
    assert np.max(np.abs(np.cumsum(b[:3], axis=0) - a[:3])) <= GLOBAL_ERROR_AT_1E_10 * np.max(np.abs(a[:3]))


# -- free rigid body -------------------------------------------------------------------------------


def test_free_asymmetric_body_conserves_energy_and_angular_momentum():
    body = ref.FreeRigidBody((1.0, 2.0, 3.0))
    # Near the unstable middle axis: the body tumbles (a demanding trajectory).
    w0 = np.array([0.1, 3.0, 0.2])
    e0 = ref.quaternion_of(ref.rotation_matrix_xyz(0.3, -0.2, 0.5))
    sol = body.simulate(e0, w0, 10.0)
    E0, L0 = body.energy(w0), body.angular_momentum(e0, w0)
    for y in sol.y.T:
        assert abs(body.energy(y[4:]) - E0) <= GLOBAL_ERROR_AT_1E_10 * E0
        assert np.linalg.norm(body.angular_momentum(y[:4], y[4:]) - L0) <= GLOBAL_ERROR_AT_1E_10 * np.linalg.norm(L0)
    # it does tumble: w2 changes sign
    assert np.min(sol.y[5]) < 0 < np.max(sol.y[5])


def test_free_symmetric_body_precesses_at_the_closed_form_rates():
    body = ref.FreeRigidBody((2.0, 2.0, 3.0))
    w0 = np.array([0.5, 0.0, 4.0])
    e0 = np.array([1.0, 0.0, 0.0, 0.0])
    t = np.linspace(0.0, 5.0, 501)
    sol = body.simulate(e0, w0, 5.0, t_eval=t)
    # body frame: w1 + i w2 = |w_perp| exp(i Omega_b t)
    phase = np.unwrap(np.angle(sol.y[4] + 1j * sol.y[5]))
    rate_b = np.polyfit(t, phase, 1)[0]
    assert rate_b == pytest.approx(body.body_precession_rate(4.0), rel=GLOBAL_ERROR_AT_1E_10)
    # space: the symmetry axis circles the angular momentum at |L|/I1
    L = body.angular_momentum(e0, w0)
    n = L / np.linalg.norm(L)
    u, v = np.cross(n, [0.0, 1.0, 0.0]), None
    u /= np.linalg.norm(u)
    v = np.cross(n, u)
    axis = np.array([ref.quaternion_matrix(y[:4])[:, 2] for y in sol.y.T])
    phase = np.unwrap(np.arctan2(axis @ v, axis @ u))
    rate_s = np.polyfit(t, phase, 1)[0]
    assert rate_s == pytest.approx(body.space_precession_rate(w0), rel=GLOBAL_ERROR_AT_1E_10)
    assert rate_s == pytest.approx(np.linalg.norm(L) / 2.0, rel=GLOBAL_ERROR_AT_1E_10)


def test_quaternion_helpers_are_consistent():
    R = ref.rotation_matrix_xyz(0.4, -1.1, 2.0)
    e = ref.quaternion_of(R)
    assert np.allclose(ref.quaternion_matrix(e), R, atol=FEW_ULPS)
    w = np.array([0.3, -0.7, 1.1])
    assert np.allclose(ref.body_angular_velocity(e, ref.quaternion_rate(e, w)), w, atol=FEW_ULPS)


# -- heavy top ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("root", [0, 1], ids=["slow", "fast"])
def test_heavy_top_steady_precession_is_steady(root):
    top = ref.HeavyTop()
    theta, w3 = 0.5, 100.0
    rate = top.steady_precession_rates(theta, w3)[root]
    ode = top.ode()
    y0 = np.array([0.0, theta, 0.0, rate, 0.0, w3 - rate * np.cos(theta)])
    sol = ref.integrate(ode.rhs, y0, 1.0)
    assert np.max(np.abs(sol.y[1] - theta)) <= GLOBAL_ERROR_AT_1E_10
    assert sol.y[0, -1] == pytest.approx(rate * 1.0, rel=GLOBAL_ERROR_AT_1E_10)
    # and a precession rate off the roots nutates
    y0[3] *= 1.2
    assert np.max(np.abs(ref.integrate(ode.rhs, y0, 1.0).y[1] - theta)) > 1e3 * GLOBAL_ERROR_AT_1E_10


def test_heavy_top_precession_rates_of_a_fast_top_follow_their_series():
    """With ``x = I1 cos(theta) m g l/(I3 w3)^2`` the roots are ``m g l/(I3 w3) (1 + x + 2 x^2 + O(x^3))``
    (slow, tending to the gyroscopic rate) and ``I3 w3/(I1 cos theta) (1 - x - x^2 + O(x^3))`` (fast);
    here x = 6.5e-6, so the remainder is ~5 x^3 ~ 1e-15."""
    top = ref.HeavyTop()
    theta, w3 = 0.5, 1e4
    x = top.I1 * np.cos(theta) * top.m * top.g * top.l / (top.I3 * w3) ** 2
    slow, fast = top.steady_precession_rates(theta, w3)
    assert slow == pytest.approx(top.m * top.g * top.l / (top.I3 * w3) * (1 + x + 2 * x**2), rel=FEW_ULPS)
    assert fast == pytest.approx(top.I3 * w3 / (top.I1 * np.cos(theta)) * (1 - x - x**2), rel=FEW_ULPS)


def test_heavy_top_nutation_conserves_energy_and_vertical_momentum():
    top = ref.HeavyTop()
    ode = top.ode()
    y0 = np.array([0.0, 0.5, 0.0, 0.0, 0.0, 60.0])       # released without precession: it nutates
    sol = ref.integrate(ode.rhs, y0, 1.0)
    energies = np.array([ode.energy(t, y) for t, y in zip(sol.t, sol.y.T)])
    assert np.ptp(energies) <= GLOBAL_ERROR_AT_1E_10 * abs(energies[0])
    # p_psi = I1 sin^2 theta psi' + I3 cos theta w3
    psi_, th, _, psid, _, phid = sol.y
    p_psi = top.I1 * np.sin(th) ** 2 * psid + top.I3 * np.cos(th) * (phid + psid * np.cos(th))
    assert np.ptp(p_psi) <= GLOBAL_ERROR_AT_1E_10 * abs(p_psi[0])
    assert np.ptp(th) > 1e-3


def test_heavy_top_centre_of_mass_acceleration_is_the_derivative_of_its_velocity():
    """``com_acceleration`` (chain rule by hand) against central differences of the velocity along
    the state's rate: the difference falls with the square of the step (a wrong term would leave
    a plateau)."""
    top = ref.HeavyTop()
    ode = top.ode()
    sol = ref.integrate(ode.rhs, np.array([0.0, 0.5, 0.0, 0.0, 0.0, 60.0]), 0.5)
    for t in (0.1, 0.37):
        y = sol.sol(t)
        y_dot = ode.rhs(t, y)
        exact = top.com_acceleration(y, y_dot)
        errors = [np.linalg.norm((top.pose(y + eps * y_dot)[1] - top.pose(y - eps * y_dot)[1]) / (2 * eps) - exact)
                  for eps in (1e-3, 1e-4)]
        assert abs(np.log10(errors[0] / errors[1]) - 2.0) <= ORDER, errors


# -- the bundled hand-written models against the references -------------------------------------


def _order(errors: list[float]) -> np.ndarray:
    return np.log2(np.asarray(errors[:-1]) / np.asarray(errors[1:]))


TRIPLE_STEPS = (4e-3, 2e-3, 1e-3)
TRIPLE_T_END = 2.0


def test_triple_pendulum_file_converges_to_the_minimal_coordinate_reference(example_engine):
    """phi1 and x_c of examples/triple_pendulum.toml (HHT, redundant coordinates) against the
    minimal-coordinate reference: the error falls with the scheme's order 2."""
    engine = example_engine("triple_pendulum")
    ode = ref.triple_pendulum_ode()
    sol = ref.integrate(ode.rhs, np.zeros(8), TRIPLE_T_END)
    names = engine.compiled.coordinate_names
    columns = [names.index("x_c"), names.index("phi1")]
    errors = []
    for h in TRIPLE_STEPS:
        traj = engine.simulate(t_end=TRIPLE_T_END, step=h)
        exact = sol.sol(traj.t)[[0, 1]].T
        errors.append(np.max(np.abs(traj.q[:, columns] - exact), axis=0) / np.max(np.abs(exact), axis=0))
    errors = np.array(errors)
    order = np.log2(errors[:-1] / errors[1:])
    assert np.all(np.abs(order - 2.0) <= ORDER), (errors, order)


SLIDER_STEPS = (2e-3, 1e-3, 5e-4)
SLIDER_T_END = 1.0


def test_slider_crank_file_converges_to_the_minimal_coordinate_reference(example_engine):
    """phi, theta, xs and the crank speed of examples/slider_crank.toml against the reference in
    phi alone: order 2 with generalized-alpha.  (Not with the file's HHT(-0.1): its mass matrix
    depends on q, where HHT converges at first order only, see fmi_adjoint/integrate/hht.py;
    measured here 2.3e-4 -> 1.2e-5 rad in phi over h = 4e-3 ... 2.5e-4, ratios 3.7, 2.4, 2.1, 2.1.)"""
    engine = example_engine("slider_crank")
    ode, kin = ref.slider_crank_ode()
    sol = ref.integrate(ode.rhs, np.array([ref.SLIDER_CRANK["phi0"], ref.SLIDER_CRANK["omega0"]]), SLIDER_T_END)
    names = engine.compiled.coordinate_names
    columns = [names.index(n) for n in ("phi", "theta", "xs")]
    errors = []
    for h in SLIDER_STEPS:
        traj = engine.simulate(t_end=SLIDER_T_END, step=h, solver=GeneralizedAlpha())
        y = sol.sol(traj.t)
        theta, xs = kin(y[0])
        exact = np.column_stack([y[0], theta, xs, y[1]])
        got = np.column_stack([traj.q[:, columns], traj.v[:, columns[0]]])
        errors.append(np.max(np.abs(got - exact), axis=0) / np.max(np.abs(exact - exact[0]), axis=0))
    errors = np.array(errors)
    order = np.log2(errors[:-1] / errors[1:])
    assert np.all(np.abs(order - 2.0) <= ORDER), (errors, order)


SPHERICAL_START = np.array([0.5, 0.3, 0.0, -0.4, 0.6, 0.2, 0.5, -1.0, 2.0, 1.0, 0.5, -1.5])


@pytest.mark.slow
def test_spherical_double_pendulum_conserves_energy_away_from_gimbal_lock():
    """Slow: sympy derives the 6-coordinate Lagrangian in 25 s (loaded machine).  Energy is
    conserved (measured 1.7e-13 relative over 1 s) and the middle angles stay far from +-pi/2."""
    ode, _ = ref.revolute_chain_ode(ref.SPHERICAL_DOUBLE_PENDULUM, gravity=ref.SPATIAL_CHAIN_GRAVITY)
    sol = ref.integrate(ode.rhs, SPHERICAL_START, 1.0)
    energies = np.array([ode.energy(t, y) for t, y in zip(sol.t, sol.y.T)])
    assert np.ptp(energies) <= GLOBAL_ERROR_AT_1E_10 * np.max(np.abs(energies))
    assert np.max(np.abs(sol.y[[1, 4]])) < 1.0     # cos(b) > 0.5: far from the singular b = +-pi/2
