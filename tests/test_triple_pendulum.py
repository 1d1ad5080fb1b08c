"""The ``triple_pendulum`` example: cart with three pendula, flexible-beam stiffness c_f and
damping d_f (Oberpeilsteiner, dissertation Sec. 4.4.1; seed paper 002, Sec. 5.1).

(a) the model: the six joint constraints hold along the trajectory, and the first
    bending mode of a linearization derived here independently of the model file (minimal
    coordinates) lies in the dissertation's band [1.4, 1.9] Hz and where the simulated
    spectrum of phi1 peaks in that band;
(b) the bundled CSVs are what the data module makes;
(c) the adjoint gradient of the band-limited amplitude-spectrum cost equals forward
    sensitivities and fourth-order finite differences;
(d) from the papers' start c_f = 8.5, d_f = 0.15 the time-domain cost (bundled noisy
    phi1) and the band-limited spectral cost (bundled spectrum) recover the true values
    within three standard errors of the 1 % measurement noise;
(e) model uncertainty (seed 002): data with d_c = 0.01, model with d_c = 0.1.  In the
    experiment of the model file (a resonance test of the pendulum mode, which d_c damps,
    plus a doublet that starts the first bending mode) the wrong d_c makes the model's
    phi1 fall behind the measured one more and more towards the end of the record (seed
    002, Fig. 4).  The band-limited spectral cost recovers c_f within 2 % (measured:
    -0.09 %); the time-domain cost does not (measured: c_f +10.8 %, d_f -90 %), because
    the misfit of the dominant pendulum mode outweighs the weak bending vibration.
"""

from __future__ import annotations

import numpy as np
import pytest

from fmi_adjoint import Experiment, IdentificationProblem, LeastSquaresCost, identify, read_csv, simulate
from fmi_adjoint.adjoint import output_sensitivities
from fmi_adjoint.adjoint.discrete import channel_indices
from fmi_adjoint.costs import FourierCost
from fmi_adjoint.examples import EXAMPLES_DIR
from fmi_adjoint.examples.triple_pendulum_data import (
    BAND_HZ,
    CSV_NAME,
    FREQUENCIES,
    NAMES,
    NOISE_FRACTION,
    OUTPUT,
    SPECTRUM_CSV_NAME,
    START_VALUES,
    TRUE_VALUES,
    UNCERTAIN_D_C,
    amplitude_spectrum,
    clean_measurement,
    fourier_coefficients,
    noisy_measurement,
)
from tolerances import ADJOINT_VS_FORWARD, EXACT, GRADIENT_VS_FD, NEWTON_LEVEL, ZERO_FREQUENCY

#: Identified values from noisy data lie within this many standard errors of the truth.
STD_ERRORS = 3.0

#: The model-uncertainty claim of seed paper 002 (c_f within 2 %).
CLAIM = 0.02

#: The frequency grid of the bundled spectrum [Hz]: the peak of the simulated spectrum can
#: be located to one grid step.
GRID_STEP = FREQUENCIES[1] - FREQUENCIES[0]

#: Cost reduction (fraction of the start cost) a spectral identification must reach; the
#: remainder is the noise.
COST_REDUCTION = 0.99

#: With the wrong cart damping the time-domain fit cannot reach the noise level: its final
#: cost stays above this multiple of the cost of the true model on the same data (measured:
#: about 90).
MISFIT_FACTOR = 10.0

#: The wrong cart damping shows at the end of the record (seed 002, Fig. 4): the RMS
#: difference of phi1 between model and data in the last quarter exceeds this multiple of
#: that in the first quarter (measured: about 23).
GROWTH_FACTOR = 5.0

#: L-BFGS-B ends either by its tolerances or, once the cost changes only at round-off, by a
#: failed line search ("ABNORMAL"); the run has converged if the (scaled) gradient norm has
#: then dropped below this fraction of its start value (measured: 7e-7 to 9e-9).
STATIONARY = 1e-5

TRUE = np.array([TRUE_VALUES[n] for n in NAMES])
BAND = tuple(2 * np.pi * f for f in BAND_HZ)


@pytest.fixture(scope="module")
def model(compiled_example):
    return compiled_example("triple_pendulum")


@pytest.fixture(scope="module")
def measured():
    data = read_csv(EXAMPLES_DIR / CSV_NAME)
    return data.times, data.column(OUTPUT)


@pytest.fixture(scope="module")
def spectrum():
    data = read_csv(EXAMPLES_DIR / SPECTRUM_CSV_NAME, time_column="frequency", unit="Hz")
    return data.times, data.column("amplitude")


def _time_problem(model, measured, d_c=TRUE_VALUES["d_c"]):
    times, phi1 = measured
    exp = Experiment(model, LeastSquaresCost(times, phi1, (OUTPUT,)), values={"d_c": d_c}, name="time")
    return IdentificationProblem([exp], NAMES, start=START_VALUES)


def _spectral_cost(measured, spectrum):
    times, _ = measured
    frequencies, amplitude = spectrum
    return FourierCost.band(
        fourier_coefficients(times, frequencies), *BAND, channel=OUTPUT, measured_amplitude=amplitude, kind="amplitude"
    )


def _spectral_problem(model, measured, spectrum, d_c=TRUE_VALUES["d_c"]):
    exp = Experiment(model, _spectral_cost(measured, spectrum), values={"d_c": d_c}, name="spectrum")
    return IdentificationProblem([exp], NAMES, start=START_VALUES)


def _converged(result) -> bool:
    """L-BFGS-B converged: by its own tolerances or to round-off (see ``STATIONARY``)."""
    if result.success:
        return True
    return result.optimizer_message.startswith("ABNORMAL") and (
        result.gradient_norm_history[-1] <= STATIONARY * result.gradient_norm_history[0]
    )


def _noise_std(model):
    _, phi1 = clean_measurement()
    return NOISE_FRACTION * float(np.sqrt(np.mean(phi1**2)))


# -- (a) the model ---------------------------------------------------------------------------


def test_joint_constraints_hold_along_the_trajectory(model):
    traj = simulate(model)
    C = traj.constraint_residual()
    assert C.shape == (traj.n_steps + 1, 6)
    Cq = model.jacobian_terms(traj.q, traj.v, traj.a, traj.lam, traj.t, traj.p)[4]
    scale = np.max(np.abs(Cq)) * np.max(np.abs(traj.q))
    assert np.max(np.abs(C)) <= NEWTON_LEVEL * scale
    # The chain swings: phi1 reaches about 0.05 rad (a small-amplitude test).
    assert np.max(np.abs(traj.outputs()[:, model.output_index(OUTPUT)])) > 0.02


def _linearized_frequencies() -> np.ndarray:
    """Undamped eigenfrequencies [Hz] of the chain in minimal coordinates (x_c, phi_1..3),
    linearized about the hanging equilibrium, from the values of Fig. 4.11(b)."""
    m_c, m, l, g, c_f = 1.0, 0.5, 1.0, 9.81, TRUE_VALUES["c_f"]
    M = np.zeros((4, 4))
    M[0, 0] = m_c
    K = np.zeros((4, 4))
    for i in range(3):
        # horizontal velocity of the centre of rod i: x_c' + sum_{j<i} l phi_j' + l/2 phi_i'
        a = np.zeros(4)
        a[0] = 1.0
        a[1 : i + 1] = l
        a[i + 1] = l / 2
        M += m * np.outer(a, a)
        M[i + 1, i + 1] += m * l**2 / 12
        # potential m g y_i with y_i = -sum_{j<i} l cos phi_j - l/2 cos phi_i
        K[1 : i + 1, 1 : i + 1] += np.diag(np.full(i, m * g * l))
        K[i + 1, i + 1] += m * g * l / 2
    for i in (1, 2):  # springs on phi_{i+1} - phi_i
        e = np.zeros(4)
        e[i], e[i + 1] = -1.0, 1.0
        K += c_f * np.outer(e, e)
    eigenvalues = np.sort(np.linalg.eigvals(np.linalg.solve(M, K)).real)
    return np.sqrt(np.clip(eigenvalues, 0.0, None)) / (2 * np.pi)


def test_first_bending_mode_lies_in_the_band_and_at_the_spectral_peak(model):
    frequencies = _linearized_frequencies()
    assert frequencies[0] == pytest.approx(0.0, abs=ZERO_FREQUENCY)  # the free cart
    pendulum_mode, bending_mode = frequencies[1], frequencies[2]
    assert pendulum_mode < BAND_HZ[0]
    assert BAND_HZ[0] <= bending_mode <= BAND_HZ[1]
    assert frequencies[3] > BAND_HZ[1]
    times, phi1 = clean_measurement()
    amplitude = amplitude_spectrum(times, phi1)
    in_band = (FREQUENCIES >= BAND_HZ[0]) & (FREQUENCIES <= BAND_HZ[1])
    peak = FREQUENCIES[in_band][np.argmax(amplitude[in_band])]
    assert abs(peak - bending_mode) <= GRID_STEP
    # ... and the largest peak of the whole spectrum is the pendulum mode.
    assert abs(FREQUENCIES[np.argmax(amplitude)] - pendulum_mode) <= GRID_STEP


# -- (b) the bundled data ---------------------------------------------------------------------


def test_bundled_csvs_are_the_data_module_output(measured, spectrum):
    times, phi1 = noisy_measurement()
    assert np.array_equal(measured[0], times)
    # Regenerated on another CPU the last bits of BLAS and libm results differ: compare on the
    # channel's scale (the noise is 1 % of it, so a wrong seed or noise level fails by far).
    assert np.allclose(measured[1], phi1, rtol=0, atol=EXACT * float(np.max(np.abs(phi1))))
    assert np.array_equal(spectrum[0], FREQUENCIES)
    assert np.allclose(spectrum[1], amplitude_spectrum(*measured), rtol=EXACT, atol=0)


# -- (c) gradients ----------------------------------------------------------------------------


def test_adjoint_gradient_of_the_band_cost_matches_forward_and_finite_differences(model, measured, spectrum):
    problem = _spectral_problem(model, measured, spectrum)
    x0 = problem.start
    adjoint = problem.evaluate(x0, "adjoint")
    forward = problem.evaluate(x0, "forward")
    fd = problem.finite_differences(x0, 1e-3, order=4)
    assert adjoint.J > 0
    assert adjoint.J == pytest.approx(forward.J, rel=EXACT)
    assert np.allclose(adjoint.gradient, forward.gradient, rtol=ADJOINT_VS_FORWARD, atol=0)
    assert np.allclose(adjoint.gradient, fd, rtol=GRADIENT_VS_FD, atol=0)


# -- (d) identification -----------------------------------------------------------------------


def _spectral_std_errors(model, measured, spectrum) -> np.ndarray:
    """Standard errors of the band-limited amplitude estimator, linearized at the truth:
    the noise sigma (white, on phi1) enters the measured amplitudes through
    D = d|C_k|/dy, the estimate moves by (R^T W R)^-1 R^T W D dy with R = d|C_k|/dx."""
    cost = _spectral_cost(measured, spectrum)
    exp = Experiment(model, cost)
    traj = exp.simulate(exp.parameters(NAMES, TRUE))
    idx = np.array([model.parameter_index(n) for n in NAMES])
    channels = channel_indices(model, cost)
    dY = output_sensitivities(traj, cost.sample_times, channels, idx)[:, 0, :]
    y = traj.outputs()[:, model.output_index(OUTPUT)]  # sample times = step times
    coefficients = cost.coefficients
    A, B = coefficients(y)
    amplitude = np.hypot(A, B)
    D = (A[:, None] * coefficients.cos_matrix + B[:, None] * coefficients.sin_matrix) / amplitude[:, None]
    R = D @ dY
    W = np.diag(cost.weights)
    gain = np.linalg.solve(R.T @ W @ R, R.T @ W @ D)
    return _noise_std(model) * np.sqrt(np.diag(gain @ gain.T))


@pytest.mark.slow
def test_time_domain_identification_from_the_bundled_measurement(model, measured):
    problem = _time_problem(model, measured)
    result = identify(problem, "least_squares", progress=None)
    assert result.success, result.message
    # The fit reaches the noise level: at least as good as the true values.  (The start
    # values misfit mainly the weak bending vibration, so the start cost is only about 23
    # times this level.)
    assert result.cost <= problem.cost(TRUE)
    errors = np.abs(result.parameters - TRUE)
    assert np.all(errors <= STD_ERRORS * np.array(result.std_errors)), (result.parameters, result.std_errors)


@pytest.mark.slow
def test_band_limited_spectral_identification_from_the_bundled_spectrum(model, measured, spectrum):
    result = identify(_spectral_problem(model, measured, spectrum), "lbfgsb", progress=None)
    assert _converged(result), result.message
    assert result.cost <= (1 - COST_REDUCTION) * result.cost_initial
    std_errors = _spectral_std_errors(model, measured, spectrum)
    errors = np.abs(result.parameters - TRUE)
    assert np.all(errors <= STD_ERRORS * std_errors), (result.parameters, std_errors)


# -- (e) model uncertainty: d_c = 0.1 in the model, 0.01 in the data --------------------------


@pytest.mark.slow
def test_band_limited_spectral_cost_recovers_c_f_despite_the_wrong_cart_damping(model, measured, spectrum):
    result = identify(_spectral_problem(model, measured, spectrum, d_c=UNCERTAIN_D_C), "lbfgsb", progress=None)
    assert _converged(result), result.message
    assert result.cost <= (1 - COST_REDUCTION) * result.cost_initial
    c_f = result.parameters[NAMES.index("c_f")]
    assert abs(c_f - TRUE_VALUES["c_f"]) <= CLAIM * TRUE_VALUES["c_f"]


def test_the_wrong_cart_damping_shows_most_at_the_end_of_the_record():
    times, phi1 = clean_measurement()
    _, wrong = clean_measurement({"d_c": UNCERTAIN_D_C})
    difference = wrong - phi1
    quarter = times[-1] / 4
    first = np.sqrt(np.mean(difference[times <= quarter] ** 2))
    last = np.sqrt(np.mean(difference[times >= 3 * quarter] ** 2))
    assert last >= GROWTH_FACTOR * first


@pytest.mark.slow
@pytest.mark.parametrize("method", ["least_squares", "lbfgsb"])
def test_time_domain_cost_with_the_wrong_cart_damping_misses_c_f(model, measured, method):
    problem = _time_problem(model, measured, d_c=UNCERTAIN_D_C)
    result = identify(problem, method, progress=None, statistics=False)
    assert _converged(result), result.message
    # The model cannot reproduce the data: the fit stays far above the noise ...
    noise_floor = _time_problem(model, measured).cost(TRUE)
    assert result.cost >= MISFIT_FACTOR * noise_floor
    # ... and c_f is off by more than the paper's 2 % (seed 002: "this approach would lead
    # to incorrect parameters c_f and d_f").
    c_f = result.parameters[NAMES.index("c_f")]
    assert abs(c_f - TRUE_VALUES["c_f"]) > CLAIM * TRUE_VALUES["c_f"]
