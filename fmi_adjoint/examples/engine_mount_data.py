"""How the bundled engine-mount measurements were made.

The example ``engine_mount`` is simulated with the true parameters of Lauss et al. (2018),
Table 1 (in SI units: c_E1 = 1.23e5 N/m, c_E2 = 2.5e9 N/m^3, d_E = 5 Ns/m,
d_H2 = 2 Ns^3/m^3), with the model's own step (1e-4 s) and alpha (-0.05), once with the
paper's sweep amplitude A = 100 N (``engine_mount_measured.csv``) and once with A = 300 N
(``engine_mount_measured_A300.csv``).  The output a1 is sampled every second step (5 kHz,
5001 samples on [0, 1] s) and Gaussian noise with a standard deviation of 1 % of the RMS of
that a1 is added (numpy ``default_rng(SEED + k)`` for the k-th amplitude).

Why two: with 1 % noise, a1 of the 100 N sweep alone determines the cubic hydro damping
d_H2 only to about 90 % (Fisher information at the true values), because the fluid velocity
stays small; the 300 N sweep excites it (0.7 % together).  Both experiments share the
parameters in the demo's identification.

Regenerate with ``python -m fmi_adjoint.examples.engine_mount_data``.
"""

from __future__ import annotations

import numpy as np

from ..compiled import compile_model
from ..data import write_csv
from ..integrate import simulate
from ..model_file import load_model
from . import EXAMPLES_DIR, example_path

__all__ = [
    "TRUE_VALUES", "NOISE_FRACTION", "SEED", "SAMPLE_EVERY", "AMPLITUDES", "CSV_NAMES", "CSV_NAME",
    "clean_measurement", "noisy_measurement",
]

TRUE_VALUES = {"c_E1": 1.23e5, "c_E2": 2.5e9, "d_E": 5.0, "d_H2": 2.0}
NOISE_FRACTION = 0.01
SEED = 2018
SAMPLE_EVERY = 2
AMPLITUDES = (100.0, 300.0)
CSV_NAMES = {100.0: "engine_mount_measured.csv", 300.0: "engine_mount_measured_A300.csv"}
CSV_NAME = CSV_NAMES[100.0]


def clean_measurement(amplitude: float = 100.0) -> tuple[np.ndarray, np.ndarray]:
    """Sample times and noise-free a1 of the true model for a sweep amplitude ``A``."""
    model = compile_model(load_model(example_path("engine_mount")))
    traj = simulate(model, model.parameter_vector({**TRUE_VALUES, "A": amplitude}))
    a1 = traj.outputs()[:, model.output_index("a1")]
    return traj.t[::SAMPLE_EVERY].copy(), a1[::SAMPLE_EVERY].copy()


def noisy_measurement(amplitude: float = 100.0) -> tuple[np.ndarray, np.ndarray]:
    """Sample times and a1 with 1 % Gaussian noise (relative to the RMS of a1)."""
    times, a1 = clean_measurement(amplitude)
    sigma = NOISE_FRACTION * float(np.sqrt(np.mean(a1**2)))
    seed = SEED + AMPLITUDES.index(amplitude)
    return times, a1 + np.random.default_rng(seed).normal(0.0, sigma, a1.shape)


def main() -> None:
    for amplitude in AMPLITUDES:
        times, a1 = noisy_measurement(amplitude)
        write_csv(EXAMPLES_DIR / CSV_NAMES[amplitude], times, {"a1": a1})
        print(f"wrote {EXAMPLES_DIR / CSV_NAMES[amplitude]} ({len(times)} samples, A = {amplitude:g} N)")


if __name__ == "__main__":
    main()
