"""Exact gradients of the optimal-input-design criteria (issue 12) on an index-3 model.

The criterion ``Psi(M)`` on the Fisher information of the discrete scheme is differentiated
by the adjoint of the scheme together with its sensitivity recursion
(:func:`fmi_adjoint.design.fisher.criterion_gradient`).  Checked here on slider_crank, which
has everything the dissertation's ODE derivation (Sec. 5.1) leaves out: constraints (index
3), a configuration-dependent mass matrix, parameters in the mass matrix, the constraints
and the initial conditions, and outputs on accelerations and constraint forces:

* the generated second derivatives against finite differences of the first-order functions;
* the engines' new sweeps (state sensitivities at every step, multi-column adjoints with
  state seeds) Python against C on one trajectory, and against the ordinary adjoint gradient;
* the gradient of every criterion with respect to every parameter against fourth-order
  central differences of the criterion.
"""

from __future__ import annotations

import numpy as np
import pytest
from tolerances import ENGINES_AGREE, EXACT, GRADIENT_VS_FD

from fmi_adjoint.adjoint.discrete import adjoint_gradient, adjoint_seed, initial_state_term
from fmi_adjoint.compiled import compile_second_order
from fmi_adjoint.costs import LeastSquaresCost
from fmi_adjoint.design import CRITERIA, FisherSetup, criterion_gradient, fisher_matrix, sensitivities
from fmi_adjoint.engines import PythonEngine
from fmi_adjoint.integrate import GeneralizedAlpha
from fmi_adjoint.native import build_native, native_second_order

MODEL = "slider_crank"
PARAMS = ("c_s", "d_s", "phi0", "l")
OUTPUTS = ("xs", "slider_acc", "rod_force_x")
T_END, STEP = 0.3, 0.005


@pytest.fixture(scope="module")
def setup(example_engine):
    native = example_engine(MODEL)
    compiled = native.compiled
    params = np.array([compiled.parameter_index(p) for p in PARAMS])
    channels = np.array([compiled.output_index(o) for o in OUTPUTS])
    times = np.linspace(0.0, T_END, 41)
    fisher = FisherSetup(params=params, channels=channels, sigma=np.array([1e-2, 1.0, 10.0]), sample_times=times,
                         weights=np.ones(len(times)), scale=np.abs(compiled.defaults[params]))
    return native, PythonEngine(compiled), compile_second_order(compiled.model), fisher


def _fd(f, p0: np.ndarray, k: int) -> float:
    h = 1e-3 * max(abs(p0[k]), 1e-2)  # the GRADIENT_VS_FD tier's relative step
    values = []
    for s in (-2, -1, 1, 2):
        p = p0.copy()
        p[k] += s * h
        values.append(f(p))
    return (values[0] - 8 * values[1] + 8 * values[2] - values[3]) / (12 * h)


def test_second_order_functions_equal_differences_of_the_first_order_ones(setup):
    native, _, second, _ = setup
    model = native.compiled
    n, m, n_p, n_y = model.n, model.m, model.n_p, model.n_y
    traj = native.simulate(t_end=T_END, step=STEP)
    i = 17
    rng = np.random.default_rng(3)
    w = [rng.standard_normal(k) for k in (n, n, m, n_y)]
    d = [rng.standard_normal(k) for k in (n, n, n, m, n_p)]

    def phi(x: np.ndarray, p: np.ndarray) -> float:
        q, v, a, lam = x[:n], x[n:2 * n], x[2 * n:3 * n], x[3 * n:]
        args = (q, v, a, lam, traj.t[i], p)
        M, JM, K, JV, Cq = model.jacobian_terms(*args)
        Ma_p, F_p, C_p = model.parameter_terms(*args)
        Y_q, Y_v, Y_a, Y_lam, Y_p = model.output_jacobians(*args)
        dq, dv, da, dlam, dp = d
        dMa = JM @ dq + M @ da + Ma_p @ dp
        dF = K @ dq - JV @ dv + Cq.T @ dlam + F_p @ dp
        dC = Cq @ dq + C_p @ dp
        dY = Y_q @ dq + Y_v @ dv + Y_a @ da + Y_lam @ dlam + Y_p @ dp
        return float(w[0] @ dMa + w[1] @ dF + w[2] @ dC + w[3] @ dY)

    x0 = np.concatenate((traj.q[i], traj.v[i], traj.a[i], traj.lam[i]))
    got = second.step_second(traj.q[i], traj.v[i], traj.a[i], traj.lam[i], traj.t[i], traj.p, *w, *d)
    exact = np.concatenate(got)
    fd = np.array([_fd(lambda x: phi(x, traj.p), x0, k) for k in range(len(x0))]
                  + [_fd(lambda p: phi(x0, p), traj.p, k) for k in range(n_p)])
    np.testing.assert_allclose(exact, fd, rtol=0, atol=GRADIENT_VS_FD * np.abs(fd).max())


def test_the_c_second_order_functions_equal_the_numpy_ones(setup):
    """Printed to C from the same table (``build_native(..., second_order=True)``)."""
    native, _, second, fisher = setup
    model = native.compiled
    c_second = native_second_order(build_native(model.model, second_order=True))
    traj = native.simulate(t_end=T_END, step=STEP)
    rng = np.random.default_rng(9)
    rows, n, m, n_y, n_p = traj.n_steps + 1, model.n, model.m, model.n_y, model.n_p
    extra = [rng.standard_normal((rows, 2, k)) for k in (n, n, m, n_y, n, n, n, m, n_p)]
    state = (traj.q[:, None], traj.v[:, None], traj.a[:, None], traj.lam[:, None],
             np.broadcast_to(traj.t[:, None], (rows, 2)), traj.p)
    for got, ref in zip(c_second.step_second(*state, *extra), second.step_second(*state, *extra)):
        np.testing.assert_allclose(got, ref, rtol=0, atol=ENGINES_AGREE * np.abs(ref).max())
    z = traj.init.split()
    n_z = sum(len(x) for x in z)
    weights, direction, dp = rng.standard_normal((3, n_z)), rng.standard_normal((3, n_z)), rng.standard_normal((3, n_p))
    init = (*(np.broadcast_to(x, (3, len(x))) for x in z), np.zeros(3), traj.p, weights, direction, dp)
    for got, ref in zip(c_second.init_second(*init), second.init_second(*init)):
        np.testing.assert_allclose(got, ref, rtol=0, atol=ENGINES_AGREE * np.abs(ref).max())


def test_the_engines_sweeps_agree_and_reproduce_the_adjoint_gradient(setup):
    native, python, _, fisher = setup
    traj = native.simulate(t_end=T_END, step=STEP)
    S_c = native.state_sensitivities(traj, fisher.params)
    S_py = python.state_sensitivities(traj, fisher.params)
    for k in range(S_c.shape[1]):
        scale = np.abs(S_py[:, k]).max() or 1.0
        np.testing.assert_allclose(S_c[:, k], S_py[:, k], rtol=0, atol=ENGINES_AGREE * scale)
    rng = np.random.default_rng(5)
    model = native.compiled
    ybar = rng.standard_normal((traj.n_steps + 1, model.n_y, 2))
    xbar = rng.standard_normal((traj.n_steps + 1, 3 * model.n + model.m, 2))
    a_c, a_py = native.adjoint_trajectory(traj, ybar, xbar), python.adjoint_trajectory(traj, ybar, xbar)
    for name in ("mu3", "mu4", "w0", "gradient"):
        got, ref = getattr(a_c, name), getattr(a_py, name)
        np.testing.assert_allclose(got, ref, rtol=0, atol=ENGINES_AGREE * np.abs(ref).max(), err_msg=name)
    # With output seeds only, the sweep plus the initial state's term is the adjoint gradient.
    xs = traj.outputs()[:, [model.output_index("xs")]]
    cost = LeastSquaresCost(sample_times=traj.t[::3], data=1.01 * xs[::3], channels=("xs",))
    reference = adjoint_gradient(traj, cost).gradient
    _, ybar_cost, explicit = adjoint_seed(traj, cost)
    for engine in (native, python):
        sweep = engine.adjoint_trajectory(traj, ybar_cost[:, :, None])
        got = explicit + sweep.gradient[:, 0] + initial_state_term(traj, sweep.w0)[:, 0]
        np.testing.assert_allclose(got, reference, rtol=0, atol=ENGINES_AGREE * np.abs(reference).max())


@pytest.mark.parametrize(("name", "solver"), [(name, None) for name in sorted(CRITERIA)]
                         + [("D", GeneralizedAlpha(rho_inf=0.7))],
                         ids=[*sorted(CRITERIA), "D-generalized-alpha"])
def test_criterion_gradient_equals_finite_differences(setup, name, solver):
    """Every criterion with the model's HHT, and one with generalized-alpha (the sweeps follow
    the trajectory's scheme, its pseudo-acceleration recursion included)."""
    native, _, second, fisher = setup
    criterion = CRITERIA[name]()

    def run(p: np.ndarray):
        traj = native.simulate(p, t_end=T_END, step=STEP, solver=solver)
        sens = sensitivities(native, traj, fisher.params)
        return traj, sens, fisher_matrix(traj, fisher, sens)

    p0 = native.compiled.defaults.copy()
    traj, sens, M = run(p0)
    criterion = criterion.calibrated(M)
    value, dpsi = criterion.evaluate(M)
    exact = criterion_gradient(native, traj, fisher, dpsi, second, sens)
    fd = np.array([_fd(lambda p: criterion.evaluate(run(p)[2])[0], p0, k) for k in range(len(p0))])
    np.testing.assert_allclose(exact, fd, rtol=0, atol=GRADIENT_VS_FD * np.abs(fd).max())
    assert np.abs(fd).max() > 0


def test_second_order_terms_in_chunks_of_steps_give_the_same_gradient(setup, monkeypatch):
    """The steps are evaluated in chunks bounded by SECOND_ORDER_CHUNK; small chunks (a few
    steps each, the last one shorter) give the same gradient up to the order of the sums."""
    from fmi_adjoint.design import fisher as fisher_module

    native, _, second, fisher = setup
    traj = native.simulate(t_end=T_END, step=STEP)
    sens = sensitivities(native, traj, fisher.params)
    M = fisher_matrix(traj, fisher, sens)
    _, dpsi = CRITERIA["D"]().evaluate(M)
    whole = criterion_gradient(native, traj, fisher, dpsi, second, sens)
    monkeypatch.setattr(fisher_module, "SECOND_ORDER_CHUNK", 7 * len(fisher.params) * (native.compiled.n_p + 20))
    chunked = criterion_gradient(native, traj, fisher, dpsi, second, sens)
    np.testing.assert_allclose(chunked, whole, rtol=0, atol=EXACT * np.abs(whole).max())
