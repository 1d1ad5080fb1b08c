"""One measurement of an FMU, and the integration tolerances of Model Exchange runs."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import numpy as np

from ..costs.base import AbstractCost
from ..data import Measurement
from ..errors import FmuError
from ..integrate import time_grid
from ..integrate.radau import RunBudget
from .me_run import SAME_TIME, held_value

__all__ = ["DEFAULT_ATOL", "DEFAULT_RTOL", "FmuExperiment", "SAME_TIME", "Tolerances", "after_input_change",
           "event_rows", "held_changes", "held_value"]

#: Default relative tolerance of the Radau IIA runs.  Measured on Van der Pol (fmus/, 5 s,
#: 251 samples of CVode data at rtol 1e-10): the discretization bias of the identified mu is
#: 1.7e-11 relative at rtol 1e-8 (estimate; 1.1e-11 against a run at 1e-10), far below the
#: 1e-7 the identification must reach, at 2.4x less time than rtol 1e-10.
DEFAULT_RTOL = 1e-8
#: Default absolute tolerance, times each state's nominal value.
DEFAULT_ATOL = 1e-10


@dataclasses.dataclass(frozen=True)
class Tolerances:
    """Error control of the adaptive Model Exchange integration (``--rtol``, ``--atol``;
    ``max_step`` from ``--step``) and the budget of each run (``--max-steps``,
    ``--max-events``, ``--run-timeout``), which bounds a run without changing its result."""

    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL
    max_step: float = math.inf
    budget: RunBudget = RunBudget()

    def __post_init__(self):
        for name in ("rtol", "atol"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and 0 < value < 1):
                raise FmuError(f"--{name} {value!r}: give a number between 0 and 1 (default "
                               f"{DEFAULT_RTOL if name == 'rtol' else DEFAULT_ATOL:g}).")
        if not self.max_step > 0:
            raise FmuError(f"--step {self.max_step!r}: the largest Model Exchange step must be positive.")

    def tighter(self, factor: float = 100.0) -> Tolerances:
        """These tolerances divided by ``factor`` (the reference run of the error estimate)."""
        return Tolerances(self.rtol / factor, self.atol / factor, self.max_step, self.budget)

    def to_json(self) -> dict:
        return {"rtol": self.rtol, "atol": self.atol,
                "max_step": None if math.isinf(self.max_step) else self.max_step}


@dataclasses.dataclass(frozen=True, eq=False)
class FmuExperiment:
    """One measurement of an FMU: the cost with its data, inputs and settings.

    Attributes
    ----------
    cost : AbstractCost
        Its channels are FMU output names; its sample times may repeat a time stamp once at an
        event (the first row is the left limit, the second the right limit).
    t_end : float
    step : float
        Communication step (Co-Simulation); for Model Exchange the largest step (the steps are
        chosen by error control and hit every sample time).
    inputs : Measurement, optional
        Input signals by FMU input name, interpolated linearly in time (Co-Simulation: the
        value at the start of each communication step, held over the step).
    values : mapping of str to float
        Parameter values of this experiment (identified parameters override them).
    name : str
    held : frozenset of str
        The input columns that are discrete (:func:`.variables.is_discrete_input`: Integer,
        Boolean, Enumeration, and Real inputs of discrete variability).  They are never
        interpolated: each is held at the value of its last sample at or before ``t``
        (:func:`held_value`), and an FMU sees it change only where FMI allows a discrete
        input to be set (FMI 2.0, sec. 3.2.3: in Model Exchange only in Initialization and
        Event Mode, so each change of such a column is a time event; in Co-Simulation between
        steps).
    """

    cost: AbstractCost
    t_end: float
    step: float
    inputs: Measurement | None = None
    values: Mapping[str, float] = dataclasses.field(default_factory=dict)
    name: str = "experiment"
    held: frozenset[str] = frozenset()

    def grid(self) -> np.ndarray:
        """Communication points on ``[0, t_end]`` (the last step may be uneven)."""
        return time_grid(0.0, self.t_end, self.step)

    def input_values(self, t: float) -> dict[str, float]:
        """The inputs at ``t``: continuous ones interpolated linearly, :attr:`held` ones held."""
        if self.inputs is None:
            return {}
        return {c: (held_value(self.inputs.times, self.inputs.column(c), t) if c in self.held
                    else float(np.interp(t, self.inputs.times, self.inputs.column(c)))) for c in self.inputs.columns}

    def held_changes(self) -> np.ndarray:
        """The times at which some :attr:`held` input changes its value (sorted, distinct)."""
        return held_changes(self.inputs, self.held)

    def stops(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct sample times, and per sample whether it is a right limit (the second
        of two equal time stamps; :func:`event_rows`)."""
        return event_rows(self.cost.sample_times)

    def event_stops(self) -> np.ndarray:
        """The sample times given twice (an event in the data: the left and the right limit)."""
        return np.asarray(self.cost.sample_times, dtype=float)[self.stops()[1]]


def event_rows(times) -> tuple[np.ndarray, np.ndarray]:
    """The distinct times of ``times`` (sorted sample times that may repeat a time stamp once at
    an event: the first row the left limit, the second the right limit), and per row whether
    it is a right limit."""
    times = np.asarray(times, dtype=float)
    right = np.zeros(times.size, dtype=bool)
    right[1:] = times[1:] == times[:-1]
    return np.unique(times), right


def held_changes(inputs: Measurement | None, held: frozenset[str]) -> np.ndarray:
    """The times at which some ``held`` column of ``inputs`` changes its value (sorted, distinct)."""
    if inputs is None or not held:
        return np.zeros(0)
    times = np.asarray(inputs.times, dtype=float)
    changed = np.zeros(times.size, dtype=bool)
    for c in held:
        u = np.asarray(inputs.column(c), dtype=float)
        changed[1:] |= u[1:] != u[:-1]
    return np.unique(times[changed])


def after_input_change(times, changes: np.ndarray) -> np.ndarray:
    """Per sample time: a single time stamp at which a held input changes.  The held input's
    value there is the new one (:func:`held_value`), so such a sample is the right limit of
    the event the change causes (a repeated time stamp keeps its own left and right rows)."""
    times = np.asarray(times, dtype=float)
    if not np.asarray(changes).size:
        return np.zeros(times.size, dtype=bool)
    single = np.ones(times.size, dtype=bool)
    single[1:] &= times[1:] != times[:-1]
    single[:-1] &= times[:-1] != times[1:]
    return single & np.isin(times, changes)
