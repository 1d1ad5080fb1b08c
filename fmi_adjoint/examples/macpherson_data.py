"""The synthetic measurement of the ``macpherson`` example and the values it is made from.

The example ``macpherson`` (Vanpaemel et al., Sec. 5.1: the MacPherson suspension rig as five
rigid bodies) is simulated once with :data:`TRUE_VALUES`, with the model's own step (1e-3 s),
end time (3 s) and alpha (-0.05).  The measured channels :data:`CHANNELS` are the spring
deflection of their eq. (23) (``deflection_z``, their Fig. 3) and the vertical wheel travel
(``wheel_travel_z``, the wheel centre's height above its design position), sampled at every
step (1 kHz, 3001 samples on [0, 3] s).

:func:`noisy_measurement` adds seeded Gaussian noise (numpy ``default_rng(SEED)``) with a
standard deviation of :data:`NOISE` (1 %) of each channel's standard deviation about its
mean (about 0.1 mm for both), the level of the strut's identification test in
``tests/test_strategies.py``.

The true values lie inside the bounds of their Table 1 and equal its "optimized values" (the
paper identified them from rig measurements; here they only serve as the reference the
identification must reproduce).  Unlike in the one-coordinate ``strut``, ``L`` and ``y0`` are
separately identifiable here (see ``macpherson.toml``).

Nothing is bundled: once the model is built (cold: about 4 minutes of CPU, cached after)
the signals are regenerated in a few seconds, most of them loading the model file.
``python -m fmi_adjoint.examples.macpherson_data [OUT.csv]`` writes the noisy measurement to a
CSV file (default ``macpherson_measured.csv``), e.g. for ``fmi-adjoint identify macpherson
--data macpherson_measured.csv --params k,L,c_1,...``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from ..data import write_csv
from ..engines import NativeEngine
from ..model_file import load_model
from . import example_path
from .strut_data import NAMES as STRUT_NAMES, TRUE_VALUES as STRUT_TRUE_VALUES

__all__ = ["NAMES", "TRUE_VALUES", "CHANNELS", "NOISE", "SEED", "clean_measurement", "noisy_measurement"]

#: The identified parameters and their "optimized value" column of Table 1 (SI units): the same
#: table as the one-coordinate strut's (:mod:`.strut_data`).
NAMES, TRUE_VALUES = STRUT_NAMES, STRUT_TRUE_VALUES

#: The measured channels (outputs of the model).
CHANNELS = ("deflection_z", "wheel_travel_z")

#: Noise standard deviation relative to each channel's standard deviation about its mean.
NOISE = 0.01

#: Seed of the noise generator.
SEED = 23


def clean_measurement() -> tuple[np.ndarray, np.ndarray]:
    """Sample times (N,) and the noise-free channels (N, 2) of the model at :data:`TRUE_VALUES`."""
    engine = NativeEngine.build(load_model(example_path("macpherson")))
    model = engine.compiled
    traj = engine.simulate(model.parameter_vector(TRUE_VALUES))
    outputs = traj.outputs()[:, [model.output_index(c) for c in CHANNELS]]
    return traj.t.copy(), outputs.copy()


def noisy_measurement() -> tuple[np.ndarray, np.ndarray]:
    """Sample times and the channels with seeded Gaussian noise (module docstring)."""
    times, clean = clean_measurement()
    sigma = NOISE * clean.std(axis=0)
    return times, clean + np.random.default_rng(SEED).normal(0.0, 1.0, clean.shape) * sigma


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0] if argv else "macpherson_measured.csv")
    times, values = noisy_measurement()
    write_csv(out, times, {c: values[:, k] for k, c in enumerate(CHANNELS)})
    print(f"wrote {out} ({len(times)} samples)")


if __name__ == "__main__":
    main()
