"""How the bundled beam_pod measurement was made (Nishi, Hara, Yamaura: Table 2).

The example ``beam_pod`` holds the support values of Nishi et al., Table 1 (k_h = 5000 N/m,
k_v = 1000 N/m, c_h = c_v = 50 Ns/m), which the paper marks as uncertain, and the start
value EI = 300 N m^2.  The "measurement" is a run of the same model with the true
EI = 500 N m^2 (Table 2) and true supports that differ from Table 1 by 10 % each, in
alternating directions:

    k_h = 4500 N/m (-10 %),  k_v = 1100 N/m (+10 %),  c_h = 55 Ns/m (+10 %),  c_v = 45 Ns/m (-10 %).

So the identification of EI alone (supports kept at the Table 1 values) works with a model
whose supports are wrong by 10 %, which is what makes the POMs 1 and 2 (support motion)
fail and the higher, bending-dominated POMs recover EI.

The outputs w0..w10 (vertical node displacements) are sampled at every second step of the
model's own grid (h = 2e-4 s, so 2.5 kHz, 501 samples on [0, 0.2] s).  No noise is added:
Nishi's Table 2 is a noise-free numerical experiment, and the POMs 9 to 11 carry only
1e-9 to 1e-13 of the signal energy, below any realistic noise level.

Regenerate with ``python -m fmi_adjoint.examples.beam_pod_data``.
"""

from __future__ import annotations

import numpy as np

from ..compiled import CompiledModel, compile_model
from ..data import write_csv
from ..integrate import simulate
from ..model_file import load_model
from . import EXAMPLES_DIR, example_path

__all__ = [
    "TRUE_VALUES", "MODEL_SUPPORTS", "SUPPORT_PERTURBATION", "START_EI", "SAMPLE_EVERY", "CHANNELS",
    "CSV_NAME", "measurement", "main",
]

#: Supports of the identification model: Nishi et al., Table 1 (the values in beam_pod.toml).
MODEL_SUPPORTS = {"k_h": 5000.0, "k_v": 1000.0, "c_h": 50.0, "c_v": 50.0}
#: True values of the measured system: EI of Table 2 and the perturbed supports.
TRUE_VALUES = {"EI": 500.0, "k_h": 4500.0, "k_v": 1100.0, "c_h": 55.0, "c_v": 45.0}
#: Relative deviation of the true supports from Table 1.
SUPPORT_PERTURBATION = {"k_h": -0.10, "k_v": +0.10, "c_h": +0.10, "c_v": -0.10}
#: Start value of EI in the identification (the value in beam_pod.toml).
START_EI = 300.0
SAMPLE_EVERY = 2
CHANNELS = tuple(f"w{j}" for j in range(11))
CSV_NAME = "beam_pod_measured.csv"


def measurement(model: CompiledModel | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sample times and the noise-free outputs ``w0..w10`` (columns) of the true system.

    ``model``: the compiled example, if at hand (default: compile it).
    """
    model = model or compile_model(load_model(example_path("beam_pod")))
    traj = simulate(model, model.parameter_vector(TRUE_VALUES))
    outputs = traj.outputs()[:, [model.output_index(name) for name in CHANNELS]]
    return traj.t[::SAMPLE_EVERY].copy(), outputs[::SAMPLE_EVERY].copy()


def main() -> None:
    times, outputs = measurement()
    write_csv(EXAMPLES_DIR / CSV_NAME, times, {name: outputs[:, j] for j, name in enumerate(CHANNELS)})
    print(f"wrote {EXAMPLES_DIR / CSV_NAME} ({len(times)} samples, {len(CHANNELS)} channels)")


if __name__ == "__main__":
    main()
