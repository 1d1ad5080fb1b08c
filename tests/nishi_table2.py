"""Nishi et al.'s Table 2 (seed 004) on a beam model: EI identified from each POD mode's cost
alone, shared by the beam examples' tests (tests/test_beam_ffrf.py; tests/test_beam_pod.py can
use it too)."""

from __future__ import annotations

import numpy as np

from fmi_adjoint import Experiment, IdentificationProblem
from fmi_adjoint.costs import PODCost
from fmi_adjoint.identify import identify

#: The POD modes of Table 2.
POMS = tuple(range(1, 12))


def pod_problem(model, times, data, channels, modes, names=("EI",)) -> IdentificationProblem:
    """The identification of ``names`` from the POD cost of ``modes`` (Nishi eq. (5))."""
    return IdentificationProblem([Experiment(model, PODCost(times, data, channels, modes=modes))], list(names))


def identify_each_pom(model, times, data, channels, start: float, max_iterations: int) -> dict[int, float]:
    """EI identified from each POM alone, from ``start``; every fit lowers its cost."""
    identified = {}
    for mode in POMS:
        problem = pod_problem(model, times, data, channels, (mode,))
        assert problem.start[0] == start
        result = identify(problem, progress=None, statistics=False, max_iterations=max_iterations)
        assert result.cost < result.cost_initial
        identified[mode] = float(result.parameters[0])
    return identified


def assert_table_2_pattern(identified: dict[int, float], true: float, failure: float, recovery: float) -> None:
    """POMs 1 and 2 miss ``true`` by more than ``failure``, POMs 3..11 recover it to ``recovery``
    (relative)."""
    for mode, EI in identified.items():
        if mode <= 2:
            assert abs(EI - true) > failure * true, identified
        else:
            assert abs(EI - true) <= recovery * true, identified


def pod_costs(times, data, channels, outputs: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The cost of each POM for the sampled ``outputs`` of the channels."""
    costs = [PODCost(times, data, channels, modes=(i,)) for i in POMS]
    return np.array([c.evaluate(outputs, p).J for c in costs])
