"""The noise-free "measurement" of the ``strut`` example and the values it is made from.

The example ``strut`` (Vanpaemel et al., Sec. 5, reduced to one coordinate) is simulated
once with :data:`TRUE_VALUES`, with the model's own step (1e-3 s), end time (3 s) and
alpha (-0.05).  The output ``deflection`` is sampled at every step (1 kHz, 3001 samples on
[0, 3] s); no noise is added, so the cost at the true values is exactly zero.

The true values lie inside the bounds of their Table 1 and equal the "optimized values" of
that table (the paper identified them from rig measurements; here they only serve as a
reference that the identification must reproduce).  Only ``L + y0`` is identifiable in
the one-coordinate model (see ``strut.toml``), so the true ``L`` and ``y0`` are
recovered through their sum.

Nothing is bundled: the signal is regenerated in a fraction of a second.  For the command
line, ``python -m fmi_adjoint.examples.strut_data [OUT.csv]`` writes it to a CSV file
(default ``strut_deflection.csv`` in the current directory), e.g. for
``fmi-adjoint identify strut --data strut_deflection.csv --params k,L,c_1,... --scaling bounds``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from ..data import write_csv
from ..engines import NativeEngine
from ..model_file import load_model
from . import example_path

__all__ = ["NAMES", "TRUE_VALUES", "OUTPUT", "clean_measurement"]

#: The identified parameters, in the order of their Table 1.
NAMES = ("k", "L", "c_1", "c_2", "a_f1", "b_f1", "c_f1", "e_f1", "a_f2", "b_f2", "c_f2", "e_f2", "y0")

#: "Optimized value" column of their Table 1 (SI units).
TRUE_VALUES = {
    "k": 23999.75,
    "L": 0.3424,
    "c_1": 2344.78,
    "c_2": 3116.36,
    "a_f1": 67.99,
    "b_f1": 71.33,
    "c_f1": 1.888,
    "e_f1": -12.35,
    "a_f2": 214.17,
    "b_f2": 68.17,
    "c_f2": 1.395,
    "e_f2": -11.89,
    "y0": -0.21650,
}

#: The measured channel (an output of the model).
OUTPUT = "deflection"


def clean_measurement() -> tuple[np.ndarray, np.ndarray]:
    """Sample times and noise-free ``deflection`` of the model at :data:`TRUE_VALUES`, computed by
    the default (native) engine, the one an identification on them uses."""
    engine = NativeEngine.build(load_model(example_path("strut")))
    model = engine.compiled
    traj = engine.simulate(model.parameter_vector(TRUE_VALUES))
    deflection = traj.outputs()[:, model.output_index(OUTPUT)]
    return traj.t.copy(), deflection.copy()


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0] if argv else "strut_deflection.csv")
    times, deflection = clean_measurement()
    write_csv(out, times, {OUTPUT: deflection})
    print(f"wrote {out} ({len(times)} samples)")


if __name__ == "__main__":
    main()
