"""The bundled examples that the tests looping over every example run.

A test that runs every bundled example (both engines, both schemes, FMU export and round
trip, gradients) builds each of them.  The MacPherson suspension (five spatial bodies, 37
coordinates) takes about 95 s of CPU to build cold with the component assembly (about 250 s
with the former whole-system derivation), too much to repeat per loop, so those loops leave it out:
``tests/test_macpherson.py`` builds it once and checks its kinematics, statics, gradients
(adjoint = forward sensitivities = central differences) and identification.  Every other
example stays in every loop.
"""

from __future__ import annotations

from fmi_adjoint.examples import example_names

#: Examples left out of the per-example loops, and the test file that covers each.
TESTED_ALONE = {"macpherson": "tests/test_macpherson.py"}


def looped_examples() -> list[str]:
    """The bundled examples the per-example loops run (all but :data:`TESTED_ALONE`)."""
    return [name for name in example_names() if name not in TESTED_ALONE]
