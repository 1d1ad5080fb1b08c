"""The bundled examples that the tests looping over every example run.

A test that runs every bundled example (both engines, both schemes, FMU export and round
trip, gradients) builds each of them.  The MacPherson suspension (five spatial bodies, 37
coordinates) takes about 95 s of CPU to build cold with the component assembly (about 250 s
with the former whole-system derivation), too much to repeat per loop, so those loops leave it out:
``tests/test_macpherson.py`` builds it once and checks its kinematics, statics, gradients
(adjoint = forward sensitivities = central differences) and identification.

The flexible pendulum (issue 25: one flexible body, 112 coordinates, 96 quadratic constraint
rows) builds in about 20 s cold, but the loops' runs of it take minutes: measured on this 2-core
machine shared with other jobs, its 28 looped tests (both engines, both schemes, FMU exports,
gradients) had not finished after 30 min; the run stopped at its timeout in
``tests/test_engines.py`` (the Python engine, 1 000 steps of 112 coordinates).
``tests/test_flexible_model_file.py`` runs it through ``fmi-adjoint simulate`` and as an FMU
(fmpy bit-identical to the in-process C engine, the import trusted), and ``tests/test_fncf.py``
checks the formulation (frequencies, the rigid limit, gradients: adjoint = forward sensitivities
= central differences) on the same beam.  Every other example stays in every loop.
"""

from __future__ import annotations

from fmi_adjoint.examples import example_names

#: Examples left out of the per-example loops, and the test file that covers each.
TESTED_ALONE = {"macpherson": "tests/test_macpherson.py (its FMU: tests/exported_fmus.py, one FMI version)",
                "flexible_pendulum": "tests/test_flexible_model_file.py, tests/test_fncf.py (its FMU: "
                                     "tests/exported_fmus.py)",
                "beam_ffrf": "tests/test_beam_ffrf.py (its FMU: tests/exported_fmus.py, one FMI version)",
                "macpherson_flexible": "tests/test_macpherson_flexible.py, tests/test_flexible_fmu.py"}


def looped_examples() -> list[str]:
    """The bundled examples the per-example loops run (all but :data:`TESTED_ALONE`)."""
    return [name for name in example_names() if name not in TESTED_ALONE]
