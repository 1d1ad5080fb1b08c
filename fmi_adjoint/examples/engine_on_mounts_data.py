"""How the bundled engine-on-mounts measurement was made.

The example ``engine_on_mounts`` (a powertrain on four rubber mounts; the model file's header
gives every value and its source) is simulated with the true mount properties
``TRUE_VALUES`` (c_x = 1.0e5, c_y = 0.8e5, c_z = 2.5e5 N/m, d_x = 150, d_y = 120,
d_z = 350 N s/m; our choice, see the model file) and the model file's other values, step
(1 ms), integrator (generalized-alpha, rho_inf = 0.8) and end time (2 s), by the Python
reference engine.  The nine accelerometer channels (``acc_pulley_x`` ... ``acc_head_z``:
specific force in body axes, m/s^2) are taken at every step (1 kHz, 2001 samples on
[0, 2] s), and zero-mean Gaussian noise with one standard deviation for all channels is
added: 1 % of the RMS of the *dynamic* part of the clean signals (all channels together, each
less its static value at t = 0, i.e. less gravity: one sensor type, one noise floor; about
0.047 m/s^2), from numpy ``default_rng(SEED)``, drawn as one array of shape (samples,
channels).  One standard deviation for all channels makes the unweighted least-squares cost
of ``fmi-adjoint identify`` the maximum-likelihood estimator.
This is ``engine_on_mounts_measured.csv`` (columns ``time`` and the nine outputs).

Regenerate with ``python -m fmi_adjoint.examples.engine_on_mounts_data``.
"""

from __future__ import annotations

import numpy as np

from ..compiled import CompiledModel, compile_model
from ..data import write_csv
from ..integrate import simulate
from ..model_file import load_model
from . import EXAMPLES_DIR, example_path

__all__ = [
    "NAME", "TRUE_VALUES", "NAMES", "NOISE_FRACTION", "SEED", "SAMPLE_EVERY", "CSV_NAME",
    "clean_measurement", "noise_std", "with_noise", "noisy_measurement",
]

NAME = "engine_on_mounts"
#: Mount properties the measurement was made with (the model file holds the start values).
TRUE_VALUES = {"c_x": 1.0e5, "c_y": 0.8e5, "c_z": 2.5e5, "d_x": 150.0, "d_y": 120.0, "d_z": 350.0}
#: The identified parameters, in this order.
NAMES = tuple(TRUE_VALUES)
NOISE_FRACTION = 0.01
SEED = 2323
SAMPLE_EVERY = 1
CSV_NAME = "engine_on_mounts_measured.csv"


def clean_measurement(values: dict | None = None,
                      model: CompiledModel | None = None) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Sample times, noise-free outputs (samples x channels) and the channel names of the model
    at ``TRUE_VALUES`` (updated by ``values``), simulated with the Python reference engine.
    ``model``: the compiled example, if the caller has it (else it is loaded and compiled)."""
    if model is None:
        model = compile_model(load_model(example_path(NAME)))
    traj = simulate(model, model.parameter_vector({**TRUE_VALUES, **(values or {})}))
    y = traj.outputs()
    return traj.t[::SAMPLE_EVERY].copy(), y[::SAMPLE_EVERY].copy(), tuple(model.output_names)


def noise_std(y: np.ndarray) -> float:
    """The noise's standard deviation: ``NOISE_FRACTION`` times the RMS of the clean channels
    less their values at t = 0 (the static reading, gravity)."""
    dynamic = y - y[0]
    return NOISE_FRACTION * float(np.sqrt(np.mean(dynamic**2)))


def with_noise(y: np.ndarray) -> np.ndarray:
    """The clean outputs ``y`` with the measurement noise (``noise_std(y)``, ``default_rng(SEED)``)."""
    return y + np.random.default_rng(SEED).normal(0.0, noise_std(y), y.shape)


def noisy_measurement(model: CompiledModel | None = None) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Sample times, outputs with the measurement noise, channel names (``model`` as in
    :func:`clean_measurement`)."""
    times, y, names = clean_measurement(model=model)
    return times, with_noise(y), names


def main() -> None:
    times, y, names = noisy_measurement()
    write_csv(EXAMPLES_DIR / CSV_NAME, times, {name: y[:, k] for k, name in enumerate(names)})
    print(f"wrote {EXAMPLES_DIR / CSV_NAME} ({len(times)} samples, {len(names)} channels)")


if __name__ == "__main__":
    main()
