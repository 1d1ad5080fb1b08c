"""The generated chain models (fmi_adjoint.examples.chains) of the engine-scaling benchmark.

Each chain is checked against an independent formulation written here with numpy: the
stiffness matrix of the generated model has the natural frequencies of a fixed-free spring
chain, ``omega_j = 2 sqrt(k/m) sin((2j - 1) pi / (2 (2n + 1)))``; the HHT runs of the
Python engine follow scipy's solution of the same equations (the constrained cubic chain
in the minimal coordinates ``x1 .. x(n-1)``, ``xn = x1``), including the rod force.  HHT
weights the forces of two steps in its equation of motion, so its acceleration ``a_i`` is
``(1 + alpha) a(t_i) - alpha a(t_(i-1))`` of the exact solution to second order (not
``a(t_i)``, from which it differs by ``O(alpha h)``); the multiplier is ``lam(t_i)``.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from fmi_adjoint.compiled import compile_model
from fmi_adjoint.errors import FmiAdjointError, ModelError
from fmi_adjoint.examples.chains import MAX_MASSES, chain_model, chain_toml
from fmi_adjoint.integrate import simulate
from fmi_adjoint.model_file import load_model
from tolerances import CLOSED_FORM, EXACT, NEWTON_LEVEL, ORDER

#: 1000 steps of the default h = 1e-4: the wave from the excited end (about 100 masses/s)
#: has passed the middle mass of the 16-mass chain.
T_END = 0.1


@functools.cache
def _compiled(n: int, kind: str):
    return compile_model(chain_model(n, kind))  # type: ignore[arg-type]


def _forces(x: np.ndarray, v: np.ndarray, t: float, p: dict[str, float]) -> np.ndarray:
    """Generalized forces Q of the chain, element by element (independent of the generator)."""
    n = x.size
    s = np.diff(np.concatenate(([0.0], x)))  # elongations of spring_{i-1}_{i}, ground first
    s_dot = np.diff(np.concatenate(([0.0], v)))
    f = p["k"] * s + p.get("k3", 0.0) * s**3 + p["d"] * s_dot
    Q = -f.copy()
    Q[:-1] += f[1:]
    Q[n - 1] += p["F0"] * np.sin(p["omega"] * t)
    return Q


def _reference(n: int, kind: str, times: np.ndarray, p: dict[str, float]) -> tuple[np.ndarray, ...]:
    """``(x, v, a, rod force)`` at ``times`` from scipy (minimal coordinates for the rod)."""
    k = n - 1 if kind == "cubic" else n
    T = np.eye(n, k)  # x = T z
    if kind == "cubic":
        T[n - 1, 0] = 1.0  # the rod: xn = x1
    Mr = p["m"] * T.T @ T

    def rhs(t, y):
        z, w = y[:k], y[k:]
        return np.concatenate((w, np.linalg.solve(Mr, T.T @ _forces(T @ z, T @ w, t, p))))

    sol = solve_ivp(rhs, (0.0, times[-1]), np.zeros(2 * k), method="DOP853", t_eval=times, rtol=1e-12, atol=1e-14)
    assert sol.success
    z, w = sol.y[:k].T, sol.y[k:].T
    accel = np.array([rhs(t, y)[k:] for t, y in zip(times, sol.y.T)])
    x, v, a = z @ T.T, w @ T.T, accel @ T.T
    # Equation of motion of xn, m a_n = Q_n - lam (C_q = (-1, 0, .., 0, 1)), gives the rod force.
    lam = np.array([_forces(xi, vi, t, p)[-1] for xi, vi, t in zip(x, v, times)]) - p["m"] * a[:, -1]
    return x, v, a, lam


def test_the_toml_text_and_the_model_agree(tmp_path):
    for kind in ("linear", "cubic"):
        path = tmp_path / f"chain_{kind}.toml"
        path.write_text(chain_toml(7, kind))
        assert load_model(path) == chain_model(7, kind)


@pytest.mark.parametrize("kind", ["linear", "cubic"])
def test_sizes_and_shared_parameters(kind):
    model = _compiled(16, kind)
    assert (model.n, model.m) == (16, 1 if kind == "cubic" else 0)
    expected = ("m", "k", "d", "F0", "omega") + (("k3",) if kind == "cubic" else ())
    assert model.parameter_names == expected  # no per-element parameters: the p-Jacobians stay narrow
    assert model.output_names[:3] == ("x_last", "v_last", "a_mid")


@pytest.mark.parametrize("bad", [{"n_masses": 1}, {"n_masses": MAX_MASSES + 1}, {"n_masses": 4.0}, {"n_masses": True},
                                 {"kind": "quadratic"}])
def test_bad_arguments_name_the_argument(bad):
    args = {"n_masses": 4, "kind": "linear"} | bad
    name = next(iter(bad))
    for function in (chain_toml, chain_model):
        with pytest.raises(ModelError, match=name) as info:
            function(**args)
        assert isinstance(info.value, FmiAdjointError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("n", [4, 16])
def test_natural_frequencies_of_the_linear_chain(n):
    model = _compiled(n, "linear")
    p = model.defaults
    z = np.zeros((1, n))
    M, _, K, _, _ = (np.asarray(term).reshape(n, -1) for term in
                     model.jacobian_terms(z, z, z, np.zeros((1, 0)), np.zeros(1), p[None, :]))
    k, m = p[model.parameter_index("k")], p[model.parameter_index("m")]
    omega = np.sqrt(np.linalg.eigvals(np.linalg.solve(M, K)).real)
    j = np.arange(1, n + 1)
    analytic = 2 * np.sqrt(k / m) * np.sin((2 * j - 1) * np.pi / (2 * (2 * n + 1)))
    assert np.max(np.abs(np.sort(omega) - analytic)) <= EXACT * analytic[-1] * n
    # Static deflection of the last mass under a unit force on it: n / k.
    assert np.linalg.solve(K, np.eye(n)[-1])[-1] == pytest.approx(n / k, rel=EXACT * n)


@pytest.mark.parametrize("kind", ["linear", "cubic"])
@pytest.mark.parametrize("n", [4, 16])
def test_hht_run_follows_scipy(n, kind):
    model = _compiled(n, kind)
    traj = simulate(model, t_end=T_END)
    assert traj.n_steps == round(T_END / 1e-4)
    p = dict(zip(model.parameter_names, model.defaults))
    x, v, a, lam = _reference(n, kind, traj.t, p)
    mid = n // 2 - 1
    a_hht = a.copy()
    a_hht[1:] = (1 + traj.scheme.alpha) * a[1:] - traj.scheme.alpha * a[:-1]
    y = traj.outputs()
    for column, reference in (("x_last", x[:, -1]), ("v_last", v[:, -1]), ("a_mid", a_hht[:, mid])):
        got = y[:, model.output_index(column)]
        assert np.max(np.abs(got - reference)) <= CLOSED_FORM * np.max(np.abs(reference)), column
    if kind == "cubic":
        got = y[:, model.output_index("rod_force")]
        assert np.max(np.abs(got - lam)) <= CLOSED_FORM * np.max(np.abs(lam))
        scale = np.max(np.abs(traj.q))
        assert np.max(np.abs(traj.q[:, -1] - traj.q[:, 0])) <= NEWTON_LEVEL * scale
        # The cubic term matters at these values: the ground spring is stretched into it.
        s = np.max(np.abs(traj.q[:, 0]))
        assert p["k3"] * s**3 > 0.1 * p["k"] * s


def test_hht_converges_at_second_order_on_the_chain():
    """Halving h divides the error of every output by 4, acceleration and multiplier included."""
    model = _compiled(4, "cubic")
    p = dict(zip(model.parameter_names, model.defaults))
    errors = []
    for h in (2e-4, 1e-4):
        traj = simulate(model, t_end=T_END, step=h)
        x, _, a, lam = _reference(4, "cubic", traj.t, p)
        a_hht = a.copy()
        a_hht[1:] = (1 + traj.scheme.alpha) * a[1:] - traj.scheme.alpha * a[:-1]
        y = traj.outputs()
        errors.append([np.max(np.abs(y[:, model.output_index(name)] - ref))
                       for name, ref in (("x_last", x[:, -1]), ("a_mid", a_hht[:, 1]), ("rod_force", lam))])
    order = np.log2(np.array(errors[0]) / np.array(errors[1]))
    assert np.all(np.abs(order - 2.0) <= ORDER), order
