"""How the bundled beam_ffrf measurement was made (Nishi, Hara, Yamaura: Table 2).

Exactly as beam_pod's (:mod:`.beam_pod_data`, whose values it imports): the true EI = 500 N m^2
and true supports 10 % off the Table 1 values of the model file (``TRUE_VALUES``); the outputs
``w0_y .. w10_y`` (vertical node displacements) sampled at every second step of the model's
grid (501 samples on [0, 0.2] s); no noise.  The model is the floating-frame beam
(beam_ffrf.toml) instead of the chain of rigid segments.

Regenerate with ``python -m fmi_adjoint.examples.beam_ffrf_data``.
"""

from __future__ import annotations

import numpy as np

from ..data import write_csv
from ..engines import NativeEngine
from ..model_file import load_model
from . import EXAMPLES_DIR, example_path
from .beam_pod_data import MODEL_SUPPORTS, SAMPLE_EVERY, START_EI, SUPPORT_PERTURBATION, TRUE_VALUES

__all__ = [
    "TRUE_VALUES", "MODEL_SUPPORTS", "SUPPORT_PERTURBATION", "START_EI", "SAMPLE_EVERY", "CHANNELS",
    "CSV_NAME", "measurement", "main",
]

CHANNELS = tuple(f"w{j}_y" for j in range(11))
CSV_NAME = "beam_ffrf_measured.csv"


def measurement(engine: NativeEngine | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sample times and the noise-free outputs ``w0_y..w10_y`` (columns) of the true system.

    ``engine``: the example's native engine, if at hand (default: build it; the generated C
    runs the 1000 steps in 0.03 s where the Python integrator takes half a minute).
    """
    engine = engine or NativeEngine.build(load_model(example_path("beam_ffrf")))
    traj = engine.simulate(engine.compiled.parameter_vector(TRUE_VALUES))
    columns = [engine.compiled.output_index(name) for name in CHANNELS]
    return traj.t[::SAMPLE_EVERY].copy(), traj.outputs()[::SAMPLE_EVERY, columns]


def main() -> None:
    path = EXAMPLES_DIR / CSV_NAME
    times, outputs = measurement()
    write_csv(path, times, dict(zip(CHANNELS, outputs.T)))
    print(f"wrote {path} ({times.size} samples of {len(CHANNELS)} channels)")


if __name__ == "__main__":
    main()
