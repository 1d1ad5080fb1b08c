"""How the bundled triple-pendulum measurements were made.

The example ``triple_pendulum`` (dissertation Sec. 4.4.1; seed paper 002 Sec. 5.1) is
simulated with the true values of Fig. 4.11(b) (c_f = 10 Nm/rad, d_f = 0.02 Nms/rad,
d_c = 0.01 Ns/m, d_1 = 0.02 Nms/rad; the model file's defaults) with the model's own
step (10 ms), alpha (-0.05), end time (20 s) and excitation (a harmonic force at the
pendulum-mode frequency 0.4674 Hz plus a doublet that starts the first bending mode; the
model file says why this experiment and what it measures).  The output phi1 is taken at
every step (100 Hz, 2001 samples on [0, 20] s) and zero-mean Gaussian noise with a
standard deviation of 1 % of the RMS of that phi1 (2.0e-4 rad; the RMS is set by the
pendulum mode) is added (numpy ``default_rng(SEED)``); the papers add "zero-mean
gaussian noise" of unstated level.
This is ``triple_pendulum_measured.csv`` (columns ``time``, ``phi1``).

The measured amplitude spectrum ``triple_pendulum_spectrum.csv`` (columns ``frequency``
[Hz], ``amplitude`` [rad]) is ``|C_k| = sqrt(A_k^2 + B_k^2)`` of the noisy phi1 samples,
computed with :class:`~fmi_adjoint.costs.FourierCoefficients` exactly as the cost does:
Hann window with amplitude correction over the whole record [0, 20] s, at the
frequencies 0, 0.01, ..., 5 Hz (``FREQUENCIES``, 501 values; finer than the resolution
1/20 s = 0.05 Hz of the record, which the Fourier coefficients allow at any frequency).
The band of the first bending mode analysed in the dissertation is [1.4, 1.9] Hz
(``BAND_HZ``; 51 of those frequencies).

Regenerate with ``python -m fmi_adjoint.examples.triple_pendulum_data``.
"""

from __future__ import annotations

import csv

import numpy as np

from ..compiled import compile_model
from ..costs.fourier import FourierCoefficients
from ..data import write_csv
from ..files import atomic_output
from ..integrate import simulate
from ..model_file import load_model
from . import EXAMPLES_DIR, example_path

__all__ = [
    "TRUE_VALUES", "START_VALUES", "UNCERTAIN_D_C", "NAMES", "OUTPUT", "NOISE_FRACTION", "SEED",
    "SAMPLE_EVERY", "FREQUENCIES", "BAND_HZ", "WINDOW", "CSV_NAME", "SPECTRUM_CSV_NAME",
    "clean_measurement", "noisy_measurement", "fourier_coefficients", "amplitude_spectrum",
    "measured_spectrum", "write_spectrum_csv",
]

#: Values of Fig. 4.11(b) used to make the measurement (also the model file's defaults).
TRUE_VALUES = {"c_f": 10.0, "d_f": 0.02, "d_c": 0.01, "d_1": 0.02}
#: Start values of the identification in both papers.
START_VALUES = {"c_f": 8.5, "d_f": 0.15}
#: Cart damping of the model in the model-uncertainty case of seed paper 002.
UNCERTAIN_D_C = 0.1
NAMES = ("c_f", "d_f")
OUTPUT = "phi1"
NOISE_FRACTION = 0.01
SEED = 4411
SAMPLE_EVERY = 1
#: Analysed frequencies [Hz] of the bundled spectrum.
FREQUENCIES = np.arange(501) / 100.0
#: Band of the first bending mode [Hz] (dissertation Sec. 4.4.1.2).
BAND_HZ = (1.4, 1.9)
WINDOW = "hann"
CSV_NAME = "triple_pendulum_measured.csv"
SPECTRUM_CSV_NAME = "triple_pendulum_spectrum.csv"


def clean_measurement(values: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sample times and noise-free phi1 of the model at ``TRUE_VALUES`` (updated by ``values``)."""
    model = compile_model(load_model(example_path("triple_pendulum")))
    traj = simulate(model, model.parameter_vector({**TRUE_VALUES, **(values or {})}))
    phi1 = traj.outputs()[:, model.output_index(OUTPUT)]
    return traj.t[::SAMPLE_EVERY].copy(), phi1[::SAMPLE_EVERY].copy()


def noisy_measurement() -> tuple[np.ndarray, np.ndarray]:
    """Sample times and phi1 with 1 % Gaussian noise (relative to the RMS of phi1)."""
    times, phi1 = clean_measurement()
    sigma = NOISE_FRACTION * float(np.sqrt(np.mean(phi1**2)))
    return times, phi1 + np.random.default_rng(SEED).normal(0.0, sigma, phi1.shape)


def fourier_coefficients(times: np.ndarray, frequencies: np.ndarray = FREQUENCIES) -> FourierCoefficients:
    """The coefficient map of the bundled spectrum: Hann window over all ``times``."""
    return FourierCoefficients(times, 2 * np.pi * np.asarray(frequencies, dtype=float), window=WINDOW)


def amplitude_spectrum(times: np.ndarray, y: np.ndarray, frequencies: np.ndarray = FREQUENCIES) -> np.ndarray:
    """Amplitudes ``|C_k|`` of the samples ``y`` at ``frequencies`` [Hz]."""
    A, B = fourier_coefficients(times, frequencies)(np.asarray(y, dtype=float))
    return np.hypot(A, B)


def measured_spectrum() -> tuple[np.ndarray, np.ndarray]:
    """``(FREQUENCIES, amplitudes)`` of the noisy measurement (the bundled spectrum)."""
    times, phi1 = noisy_measurement()
    return FREQUENCIES.copy(), amplitude_spectrum(times, phi1)


def write_spectrum_csv(path, frequencies: np.ndarray, amplitude: np.ndarray) -> None:
    """Write the columns ``frequency`` [Hz] and ``amplitude`` (17 significant digits)."""
    with atomic_output(path) as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["frequency", "amplitude"])
        for f, a in zip(frequencies, amplitude):
            writer.writerow([repr(float(f)), repr(float(a))])


def main() -> None:
    times, phi1 = noisy_measurement()
    write_csv(EXAMPLES_DIR / CSV_NAME, times, {OUTPUT: phi1})
    print(f"wrote {EXAMPLES_DIR / CSV_NAME} ({len(times)} samples)")
    frequencies, amplitude = FREQUENCIES.copy(), amplitude_spectrum(times, phi1)
    write_spectrum_csv(EXAMPLES_DIR / SPECTRUM_CSV_NAME, frequencies, amplitude)
    print(f"wrote {EXAMPLES_DIR / SPECTRUM_CSV_NAME} ({len(frequencies)} frequencies)")


if __name__ == "__main__":
    main()
