"""The optimal-input-design examples of Oberpeilsteiner (2018), Ch. 5, and the independent
Pontryagin reference of Sec. 5.3.2 (``tests/pontryagin.py``).

* The bang-bang solution of the undamped single-mass oscillator (eqs. (5.23)-(5.27)):
  ``pontryagin.criterion`` against a closed form and against :func:`scipy.integrate.solve_ivp`,
  its exact derivative against finite differences, and the optimality conditions at the
  switch ``t1*`` (one sign change of ``p_2``, ``u* = -sign(p_2)``, global minimum of ``J``).
* The bundled models ``single_mass``, ``two_mass`` and ``cart_pendulum``: each loads, runs
  with the Python engine at a constant input, and meets a physical check that a wrong model
  file would fail (closed-form response and energy, exact linear response and static
  deflection, small-angle frequency and a nonlinear run against hand-written equations).

Measured for ``omega = 1``, ``T = 2 pi`` (printed to 8 decimals in :data:`T1_STAR` and
:data:`J_STAR`): ``t1* = 1.2424220416992207``, ``J(t1*) = -16.93775383610914`` (against
``J = -12.03994671`` of the constant input ``u = 1``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.linalg import expm

import pontryagin
from fmi_adjoint.engines import PythonEngine
from fmi_adjoint.examples import example_path
from fmi_adjoint.model_file import load_model
from tolerances import CLOSED_FORM, CROSS_IMPLEMENTATION, EXACT, GRADIENT_VS_FD, PRINTED_8_DECIMALS

TWO_PI = 2 * math.pi

#: The optimal switch of Sec. 5.3.2 (omega = 1, T = 2 pi, |u| <= 1), printed to 8 decimals
#: from ``pontryagin.switching_time()`` (1.2424220416992207).
T1_STAR = 1.24242204
#: ``pontryagin.criterion(t1*)`` (-16.93775383610914), printed to 8 decimals.
J_STAR = -16.93775384


@pytest.fixture(scope="module")
def t1_star() -> float:
    return pontryagin.switching_time()


# -- the Pontryagin reference ---------------------------------------------------------------


def test_constant_input_criterion_is_the_closed_form():
    """``u = 1``: ``x = 1 - cos t``, ``x_c = -1 + cos t + t sin t / 2`` (eq. (5.23) with
    ``omega = 1``), whose square integrates over ``[0, 2 pi]`` to ``pi^3/3 + 35 pi/8``; the
    mirrored input ``u = -1`` (``t1 = 0``) gives the same ``J``."""
    closed = -(math.pi ** 3 / 6 + 35 * math.pi / 16)
    assert pontryagin.criterion(TWO_PI) == pytest.approx(closed, rel=EXACT, abs=0)
    assert pontryagin.criterion(0.0) == pytest.approx(closed, rel=EXACT, abs=0)


def _criterion_by_solve_ivp(t1: float, T: float = TWO_PI) -> float:
    """``J(t1)`` from ``z' = A z + b u`` with the accumulator ``j' = -x_c^2 / 2``, each arc of
    constant input integrated by DOP853 at rtol 1e-11, atol 1e-13."""
    A = pontryagin.system_matrix(1.0)

    def rhs(_t, y, u):
        z = y[:4]
        return np.concatenate([A @ z + np.array([0.0, u, 0.0, 0.0]), [-0.5 * z[2] ** 2]])

    y = np.zeros(5)
    for t0, t_end, u in ((0.0, t1, 1.0), (t1, T, -1.0)):
        sol = solve_ivp(rhs, (t0, t_end), y, args=(u,), method="DOP853", rtol=1e-11, atol=1e-13)
        assert sol.success, sol.message
        y = sol.y[:, -1]
    return float(y[4])


@pytest.mark.parametrize("t1", [0.7, 4.0])
def test_criterion_agrees_with_solve_ivp(t1):
    exact = pontryagin.criterion(t1)
    numeric = _criterion_by_solve_ivp(t1)
    assert abs(exact - numeric) <= CROSS_IMPLEMENTATION * abs(numeric), (t1, exact, numeric)


@pytest.mark.parametrize("t1", [0.5, 1.0, 2.0, 3.3, 5.0])
def test_exact_derivative_agrees_with_central_differences(t1):
    """``dJ/dt1 = (u^+ - u^-) p_2(t1)`` (adjoint, eq. (5.25)) against fourth-order central
    differences of :func:`pontryagin.criterion` with step 1e-3 (the GRADIENT_VS_FD setting)."""
    h = 1e-3
    J = pontryagin.criterion
    fd = (8 * (J(t1 + h) - J(t1 - h)) - (J(t1 + 2 * h) - J(t1 - 2 * h))) / (12 * h)
    exact = pontryagin.criterion_derivative(t1)
    assert abs(exact - fd) <= GRADIENT_VS_FD * abs(fd), (t1, exact, fd)


def test_switching_time_and_criterion_values(t1_star):
    J = pontryagin.criterion(t1_star)
    message = f"t1* = {t1_star!r}, J(t1*) = {J!r}"
    assert abs(t1_star - T1_STAR) <= PRINTED_8_DECIMALS, message
    assert abs(J - J_STAR) <= PRINTED_8_DECIMALS, message
    # The root is a root of the exact derivative (the switching function of eq. (5.27)).
    assert abs(pontryagin.criterion_derivative(t1_star)) <= EXACT * abs(J), message


def test_adjoint_changes_sign_only_at_the_switch(t1_star):
    """Eq. (5.26): ``u* = u^-`` where ``p_2 > 0`` and ``u^+`` where ``p_2 < 0``, so ``p_2`` must
    change sign at ``t1*`` and nowhere else.  The end condition ``p(T) = 0`` makes ``p_2``
    vanish at ``T`` like ``(T - t)^4`` (measured: 2.5e-13 at ``T - 1e-3``, i.e. round-off), so
    the sign is sampled on ``[0, 0.99 T]``, where ``|p_2| >= 4e-6``."""
    times = np.linspace(0.0, 0.99 * TWO_PI, 1001)
    p2 = pontryagin.adjoint_p2(times, t1_star)
    assert np.min(np.abs(p2[np.abs(times - t1_star) > 0.01])) > 1e-6
    signs = np.sign(p2)
    changes = np.nonzero(signs[:-1] != signs[1:])[0]
    assert len(changes) == 1, times[changes]
    assert times[changes[0]] <= t1_star <= times[changes[0] + 1]
    u_star = np.where(times < t1_star, pontryagin.U_PLUS, pontryagin.U_MINUS)
    assert np.all(u_star == -signs)


def test_criterion_grid_is_criterion():
    """The powers of one block exponential (:func:`pontryagin.criterion_grid`) against one
    exponential per arc (:func:`pontryagin.criterion`): the same exact formula."""
    times, values = pontryagin.criterion_grid(2000)
    for k in (0, 1, 395, 1000, 1999, 2000):
        assert values[k] == pytest.approx(pontryagin.criterion(float(times[k])), rel=EXACT, abs=0), k


def test_switch_is_the_global_minimum(t1_star):
    """``J(t1*) <= J(t1)`` on a grid of 4001 switch times (Fig. 5.4 of the dissertation)."""
    J_star = pontryagin.criterion(t1_star)
    grid, values = pontryagin.criterion_grid(4000)
    assert J_star <= values.min(), (J_star, values.min(), grid[np.argmin(values)])
    # Better than the constant input (no switch) by a margin no round-off explains.
    assert J_star < pontryagin.criterion(TWO_PI) - 1.0


# -- the bundled models -------------------------------------------------------------------


def _engine(name: str) -> PythonEngine:
    return PythonEngine.build(load_model(example_path(name)))


@pytest.mark.parametrize(("name", "section", "inputs", "design", "outputs"), [
    ("single_mass", "5.3.2", {"u"}, {"c"}, ("x", "v")),
    ("two_mass", "5.3.3", {"F"}, {"c2"}, ("x2", "v1", "v2")),
    ("cart_pendulum", "5.3.4", {"F"}, {"s_p", "d_p"}, ("phi", "v_c", "omega")),
])
def test_design_example_loads(name, section, inputs, design, outputs):
    model = load_model(example_path(name))
    assert model.name == name
    assert section in model.source
    assert {p.name for p in model.parameters if p.causality == "input"} == inputs
    bounded = {p.name for p in model.parameters if p.causality == "parameter" and math.isfinite(p.bounds[0])}
    assert bounded == design
    assert tuple(o.name for o in model.outputs) == outputs
    for par in model.parameters:
        assert par.bounds[0] <= par.value <= par.bounds[1], par.name


def test_single_mass_response_energy_and_sensitivity():
    """Constant input ``u = 1`` from rest (m = c = 1): ``x = 1 - cos t``, ``v = sin t``; the
    trapezoidal rule (``alpha = 0``) conserves ``m v^2/2 + c (x - u/c)^2/2 = u^2/(2c)`` of this
    linear undamped system exactly.  The engine's forward sensitivity ``dx/dc`` is ``x_c =
    -1 + cos t + t sin t / 2`` (eq. (5.23)), and its square integrates to the criterion of the
    constant input of Sec. 5.3.2 (a stiffness entered as anything but ``c x`` would change the
    sign or the shape of ``x_c``)."""
    engine = _engine("single_mass")
    model = engine.compiled
    traj = engine.simulate(model.parameter_vector({"u": 1.0}))
    assert traj.n_steps == 2000 and traj.t[-1] == pytest.approx(TWO_PI, rel=EXACT)
    t = traj.t
    x, v = traj.outputs().T
    assert np.max(np.abs(x - (1 - np.cos(t)))) <= CLOSED_FORM * 2
    assert np.max(np.abs(v - np.sin(t))) <= CLOSED_FORM
    energy = v ** 2 / 2 + (x - 1) ** 2 / 2
    assert np.max(np.abs(energy - 0.5)) <= EXACT * 0.5

    sens = engine.output_sensitivities(traj, t, np.array([model.output_index("x")]),
                                       np.array([model.parameter_index("c")]))[:, 0, 0]
    assert np.max(np.abs(sens - (-1 + np.cos(t) + t * np.sin(t) / 2))) <= CLOSED_FORM * np.max(np.abs(sens))
    J = -0.5 * float(np.sum((sens[1:] ** 2 + sens[:-1] ** 2) / 2 * np.diff(t)))
    assert J == pytest.approx(pontryagin.criterion(TWO_PI), rel=CLOSED_FORM)


def _two_mass_exact(times, F, m1, m2, c1, c2, d1, d2):
    """``(x1, x2, v1, v2)`` at ``times`` (from 0) of the linear two-mass oscillator from rest
    under the constant force ``F`` on ``m1``: the state ``(x, v, F)`` advanced interval by
    interval with the matrix exponential of each interval length (a fixed-step grid has few
    distinct lengths, which differ in the last bits only)."""
    K = np.array([[c1 + c2, -c2], [-c2, c2]])
    D = np.array([[d1 + d2, -d2], [-d2, d2]])
    Minv = np.diag([1 / m1, 1 / m2])
    A = np.zeros((5, 5))
    A[:2, 2:4] = np.eye(2)
    A[2:4, :2] = -Minv @ K
    A[2:4, 2:4] = -Minv @ D
    A[2:4, 4] = Minv @ np.array([1.0, 0.0])
    assert times[0] == 0.0
    steps = np.diff(times)
    advance = {h: expm(A * h) for h in set(steps.tolist())}
    states = np.empty((len(times), 5))
    states[0] = [0.0, 0.0, 0.0, 0.0, F]
    for i, h in enumerate(steps.tolist()):
        states[i + 1] = advance[h] @ states[i]
    return states[:, :4]


def test_two_mass_matches_the_exact_linear_response():
    """Default parameters and input (F = 5 N), step 1e-4 (the CLOSED_FORM setting) for 0.25 s:
    x2, v1 and v2 against the matrix-exponential solution (masses, both springs and dampers,
    and where the force acts all enter)."""
    engine = _engine("two_mass")
    model = engine.compiled
    values = dict(zip(model.parameter_names, model.defaults))
    traj = engine.simulate(t_end=0.25, step=1e-4)
    exact = _two_mass_exact(traj.t, values["F"], 1.0, 1.0, *(values[k] for k in ("c1", "c2", "d1", "d2")))
    Y = traj.outputs()
    for k, name in enumerate(model.output_names):
        ref = exact[:, {"x2": 1, "v1": 2, "v2": 3}[name]]
        assert np.max(np.abs(Y[:, k] - ref)) <= CLOSED_FORM * np.max(np.abs(ref)), name


def test_two_mass_static_deflection():
    """Under a constant force, after the motion has died out (strong damping, 4 s), both
    masses stand at ``F/c1``: the coupling spring c2 carries no static load.  c1 and c2 are
    set apart so that swapping them (or grounding m2) would fail."""
    engine = _engine("two_mass")
    model = engine.compiled
    F, c1 = 7.0, 500.0
    p = model.parameter_vector({"c1": c1, "c2": 3000.0, "d1": 40.0, "d2": 40.0, "F": F})
    traj = engine.simulate(p, t_end=4.0, step=5e-3)
    x1, x2 = traj.q[-1, model.coordinate_names.index("x1")], traj.q[-1, model.coordinate_names.index("x2")]
    assert abs(x1 - F / c1) <= EXACT * F / c1, x1
    assert abs(x2 - F / c1) <= EXACT * F / c1, x2
    assert np.max(np.abs(traj.v[-1])) <= EXACT * F / c1


def _cart_values(model) -> dict[str, float]:
    return dict(zip(model.parameter_names, model.defaults))


def test_cart_pendulum_small_angle_frequency():
    """No friction, no force, a free swing from ``phi0 = 1e-3``: the cart moves against the
    pendulum, whose frequency is ``omega^2 = m_p g s_p / (J_p + m_p s_p^2 - (m_p s_p)^2/(m_c +
    m_p))`` (reduced inertia of the free cart; 5.72 rad/s, against 4.95 rad/s with the cart
    held).  Measured from the zero crossings of phi over 3.5 s (6 crossings) at step 2e-3."""
    engine = _engine("cart_pendulum")
    model = engine.compiled
    v = _cart_values(model)
    free = model.parameter_vector({"d_c": 0.0, "d_p": 0.0, "F": 0.0, "phi0": 1e-3})
    traj = engine.simulate(free, t_end=3.5, step=2e-3)
    phi = traj.outputs()[:, model.output_index("phi")]
    t = traj.t
    k = np.nonzero(np.sign(phi[:-1]) * np.sign(phi[1:]) < 0)[0]
    crossings = t[k] - phi[k] * (t[k + 1] - t[k]) / (phi[k + 1] - phi[k])
    assert len(crossings) >= 6
    measured = math.pi / np.polyfit(np.arange(len(crossings)), crossings, 1)[0]
    mp, sp = v["m_p"], v["s_p"]
    expected = math.sqrt(mp * v["g"] * sp / (v["J_p"] + mp * sp ** 2 - (mp * sp) ** 2 / (v["m_c"] + mp)))
    assert abs(measured - expected) <= CLOSED_FORM * expected, (measured, expected)


def test_cart_pendulum_matches_hand_written_equations():
    """A large swing (``phi0 = 0.8`` rad, F = 2 N, the model's friction) against Lagrange's
    equations written out here and integrated by DOP853 at rtol 1e-11: the configuration-
    dependent mass matrix, the quadratic velocity term the framework adds, gravity's sign,
    both frictions and the force on the cart all enter.  3 s at the default step 1e-3
    (generalized-alpha; measured over 5 s: 1.1e-5 of the signal, 2.8e-6 at 5e-4, second order)."""
    engine = _engine("cart_pendulum")
    model = engine.compiled
    v = _cart_values(model)
    mc, mp, Jp, g, dc, sp, dp = (v[k] for k in ("m_c", "m_p", "J_p", "g", "d_c", "s_p", "d_p"))
    F, phi0 = 2.0, 0.8

    def rhs(_t, y):
        _, phi, vc, w = y
        M = np.array([[mc + mp, mp * sp * math.cos(phi)], [mp * sp * math.cos(phi), Jp + mp * sp ** 2]])
        Q = np.array([F - dc * vc + mp * sp * math.sin(phi) * w ** 2, -mp * g * sp * math.sin(phi) - dp * w])
        acc = np.linalg.solve(M, Q)
        return [vc, w, acc[0], acc[1]]

    traj = engine.simulate(model.parameter_vector({"F": F, "phi0": phi0}), t_end=3.0)
    sol = solve_ivp(rhs, (0.0, traj.t[-1]), [0.0, phi0, 0.0, 0.0], t_eval=traj.t, method="DOP853",
                    rtol=1e-11, atol=1e-13)
    assert sol.success, sol.message
    Y = traj.outputs()
    for name, row in (("phi", 1), ("v_c", 2), ("omega", 3)):
        ref = sol.y[row]
        got = Y[:, model.output_index(name)]
        assert np.max(np.abs(got - ref)) <= CLOSED_FORM * np.max(np.abs(ref)), name
