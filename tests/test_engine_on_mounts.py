"""The ``engine_on_mounts`` example (issue 23): a powertrain, one spatial rigid body with Euler
parameters, on four inclined rubber mounts (bushings), gravity on, three triaxial accelerometers
in body axes.

(a) statics and modes against an independent computation written here with numpy from the
    mount positions and orientations alone (small rigid-body motion ``(u, theta)``, mount
    displacement ``u + theta x s``, stiffness ``sum_k T_k^T K_k T_k``, mass ``diag(m I, J)``):
    the model's initial state is the static equilibrium (zero accelerations; the sag the
    numpy statics gives, with no rotation), also at other mount rates; the six rigid-body
    mode frequencies of the model's own linearization at that state (its Jacobians reduced
    to the null space of the normalization constraint) equal the numpy eigenfrequencies,
    including the geometric stiffness of the mounts' static load (without it they differ by
    0.35 %, so the comparison can fail);
(b) gradients of the least-squares cost of the bundled measurement: adjoint = forward
    sensitivities = fourth-order central differences, for the mount parameters and for a
    mass, a product of inertia and a marker position (the CM height h, which also moves the
    initial state);
(c) ``fmi-adjoint identify engine_on_mounts`` with default options recovers the six mount
    parameters from the bundled noisy accelerations within three standard errors;
(d) the bundled CSV is what the data module makes.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from fmi_adjoint import Experiment, IdentificationProblem, LeastSquaresCost, read_csv
from fmi_adjoint.cli.main import main
from fmi_adjoint.examples import EXAMPLES_DIR, engine_on_mounts_data
from fmi_adjoint.examples.engine_on_mounts_data import (
    CSV_NAME,
    NAME,
    NAMES,
    TRUE_VALUES,
    clean_measurement,
    noise_std,
    with_noise,
)
from fmi_adjoint.integrate import initial_state
from tolerances import (
    ADJOINT_VS_FORWARD,
    EXACT,
    GRADIENT_VS_FD,
    REGENERATED_MEASUREMENT,
    WITHIN_STD_ERRORS,
)

#: Inclination of the mounts in the x-z plane (model file: front pair -pi/9 about y, rear +pi/9).
TILT = math.pi / 9

#: Leaving out the geometric stiffness changes the frequencies by at least this much (measured
#: 3.5e-3): far above the tolerance of the comparison.
GEOMETRIC_EFFECT = 1e-3


@pytest.fixture(scope="module")
def engine(example_engine):
    return example_engine(NAME)


@pytest.fixture(scope="module")
def values(engine) -> dict[str, float]:
    """Every parameter at the model file's value, the mount parameters at the true values."""
    return {**{p.name: p.value for p in engine.compiled.model.all_parameters}, **TRUE_VALUES}


@pytest.fixture(scope="module")
def measured():
    return read_csv(EXAMPLES_DIR / CSV_NAME)


# -- the independent computation -----------------------------------------------------------------


def _skew(r: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -r[2], r[1]], [r[2], 0.0, -r[0]], [-r[1], r[0], 0.0]])


def _rotation_y(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def _mounts(v: dict[str, float]) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(s_k, K_k)``: mount point from the CM and 3x3 stiffness in global axes
    ``R_k diag(c_x, c_y, c_z) R_k^T`` (columns of ``R_k``: the mount's local axes)."""
    local = np.diag([v["c_x"], v["c_y"], v["c_z"]])
    mounts = []
    for sx in (1.0, -1.0):
        for sy in (1.0, -1.0):
            R = _rotation_y(-sx * TILT)
            mounts.append((np.array([sx * v["a"], sy * v["b"], -v["h"]]), R @ local @ R.T))
    return mounts


def _stiffness(v: dict[str, float]) -> np.ndarray:
    """6x6 stiffness of small motions ``(u, theta)`` about the CM: ``sum T_k^T K_k T_k`` with
    ``T_k = [I, -s_k~]`` (mount displacement ``u + theta x s_k``)."""
    K = np.zeros((6, 6))
    for s, Kk in _mounts(v):
        T = np.hstack([np.eye(3), -_skew(s)])
        K += T.T @ Kk @ T
    return K


def _static_deflection(v: dict[str, float]) -> np.ndarray:
    """``(u, theta)`` of the CM under gravity: ``K x = (0, 0, -m g, 0, 0, 0)``."""
    return np.linalg.solve(_stiffness(v), np.array([0.0, 0.0, -v["m"] * v["g"], 0.0, 0.0, 0.0]))


def _frequencies(v: dict[str, float], geometric: bool = True) -> np.ndarray:
    """Undamped rigid-body mode frequencies [Hz] about the static equilibrium.

    The mounts carry the weight there: the force ``w_k = K_k u_s`` (on the ground side) acts on
    a lever ``s_k`` that a rotation turns, ``delta = ... + theta x (theta x s_k) / 2``, which
    adds the geometric stiffness ``(w s^T + s w^T)/2 - (w . s) I`` to the rotational block
    (gravity acts at the CM and adds none); the Hessian of the potential at an equilibrium does
    not depend on how the rotation is parametrized."""
    K = _stiffness(v)
    if geometric:
        u = _static_deflection(v)[:3]
        for s, Kk in _mounts(v):
            w = Kk @ u
            K[3:, 3:] += 0.5 * (np.outer(w, s) + np.outer(s, w)) - (w @ s) * np.eye(3)
    M = np.zeros((6, 6))
    M[:3, :3] = v["m"] * np.eye(3)
    M[3:, 3:] = [[v["Ixx"], v["Ixy"], v["Ixz"]], [v["Ixy"], v["Iyy"], v["Iyz"]], [v["Ixz"], v["Iyz"], v["Izz"]]]
    return np.sort(np.sqrt(np.linalg.eigvals(np.linalg.solve(M, K)).real)) / (2 * np.pi)


# -- (a) statics and modes -------------------------------------------------------------------------

#: A plausibility range, not a tolerance: real passenger-car mounts sag about 2 mm under the
#: powertrain's weight [m].
REALISTIC_SAG = (1e-3, 3e-3)


@pytest.mark.parametrize("changes", [{}, {"c_x": 1.7e5, "c_z": 1.2e5, "c_y": 2.0e5}], ids=["true", "other_rates"])
def test_initial_state_is_the_static_equilibrium(engine, values, changes):
    v = {**values, **changes}
    model = engine.compiled
    q, vel, a, _ = initial_state(model, model.parameter_vector(v)).state
    deflection = _static_deflection(v)
    assert np.allclose(deflection[3:], 0.0, rtol=0, atol=EXACT * abs(deflection[2]))  # no rotation
    names = model.coordinate_names
    z = q[names.index("powertrain_z")]
    assert z - v["h"] == pytest.approx(deflection[2], rel=EXACT)
    if not changes:
        assert REALISTIC_SAG[0] < -deflection[2] < REALISTIC_SAG[1]
    e = q[[names.index(f"powertrain_e{k}") for k in range(4)]]
    assert np.allclose(e, [1.0, 0.0, 0.0, 0.0], rtol=0, atol=EXACT)
    assert np.all(vel == 0.0)
    # At rest: the mounts carry the weight (the model's own forces), no acceleration.
    assert np.max(np.abs(a)) <= EXACT * v["g"]


def test_mode_frequencies_of_the_linearization_match_the_independent_computation(engine, values):
    model = engine.compiled
    p = model.parameter_vector(values)
    q, v, a, lam = initial_state(model, p).state
    M, _, K, _, Cq = (np.asarray(x) for x in model.jacobian_terms(q, v, a, lam, 0.0, p)[:5])
    # Small motions that keep e . e = 1: the null space of the normalization's Jacobian.
    _, _, Vt = np.linalg.svd(Cq)
    N = Vt[Cq.shape[0]:].T
    eigenvalues = np.linalg.eigvals(np.linalg.solve(N.T @ M @ N, N.T @ K @ N))
    assert np.all(np.abs(eigenvalues.imag) <= EXACT * np.abs(eigenvalues.real))
    linearized = np.sort(np.sqrt(eigenvalues.real)) / (2 * np.pi)
    independent = _frequencies(values)
    assert np.allclose(linearized, independent, rtol=EXACT, atol=0), (linearized, independent)
    # The comparison sees the geometric stiffness of the static load ...
    assert np.max(np.abs(_frequencies(values, geometric=False) / independent - 1)) > GEOMETRIC_EFFECT
    # ... and the modes lie in the design band of the model file's header (6.6-19.9 Hz).
    assert 6.0 < linearized[0] and linearized[-1] < 20.0


# -- (b) gradients ----------------------------------------------------------------------------------


def test_adjoint_gradient_matches_forward_sensitivities_and_finite_differences(engine, measured):
    cost = LeastSquaresCost(measured.times, measured.values, measured.columns)
    names = (*NAMES, "m", "Ixz", "h")
    problem = IdentificationProblem([Experiment(engine.compiled, cost, engine=engine)], names)
    x0 = problem.start  # the model file's values: the identification's start
    adjoint = problem.evaluate(x0, "adjoint")
    forward = problem.evaluate(x0, "forward")
    fd = problem.finite_differences(x0, 1e-3, order=4)
    assert adjoint.J > 0
    assert adjoint.J == pytest.approx(forward.J, rel=EXACT)
    assert np.allclose(adjoint.gradient, forward.gradient, rtol=ADJOINT_VS_FORWARD, atol=0)
    assert np.allclose(adjoint.gradient, fd, rtol=GRADIENT_VS_FD, atol=0), (adjoint.gradient, fd)


# -- (c) identification ------------------------------------------------------------------------------


@pytest.mark.slow  # ~20 s: the command loads the model file (~6 s) and identifies in four windows (~6 s)
def test_identify_with_default_options_recovers_the_mount_parameters(tmp_path, capsys):
    output = tmp_path / "result.json"
    code = main(["identify", NAME, "--data", str(EXAMPLES_DIR / CSV_NAME), "--params", ",".join(NAMES),
                 "-o", str(output)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Traceback" not in captured.err
    result = json.loads(output.read_text(encoding="utf-8"))
    assert result["success"] and result["warnings"] == [], result["warnings"]
    for name, true in TRUE_VALUES.items():
        value, std = result["parameters"][name], result["std_errors"][name]
        assert abs(result["initial"][name] - true) > 10 * WITHIN_STD_ERRORS * std  # a real start
        assert abs(value - true) <= WITHIN_STD_ERRORS * std, (name, value, true, std)


# -- (d) the bundled data ------------------------------------------------------------------------------


def test_bundled_csv_is_the_data_module_output(engine, measured, monkeypatch):
    """The data module's recipe (true values, run, sampling, noise) run again, its integration
    by the native engine: the Python reference engine's 2000 steps took 30 s of CPU, and the
    two engines' runs of this example agree to ENGINES_AGREE (tests/test_engines.py,
    ``test_forward_runs_agree``), far below the tolerance here."""
    def native_run(model, p, **options):
        assert model is engine.compiled
        return engine.simulate(p, **options)

    monkeypatch.setattr(engine_on_mounts_data, "simulate", native_run)
    times, clean, names = clean_measurement(model=engine.compiled)
    assert measured.columns == names
    assert np.array_equal(measured.times, times)
    # Not bit for bit: accelerations carry the Newton tolerance (REGENERATED_MEASUREMENT); a
    # wrong seed, noise level or true value differs by about the noise itself.
    sigma = noise_std(clean)
    assert np.allclose(measured.values, with_noise(clean), rtol=0, atol=REGENERATED_MEASUREMENT * sigma)
