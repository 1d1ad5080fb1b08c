"""Data windows of an FMU problem that grow event by event (issue 32: the bouncing ball from
e = 0.55 with default options).

Why the FMU needs its own windows
---------------------------------
A state event sampled at fixed times makes the cost discontinuous in the parameters: when a
parameter moves an event across a sample time, the sampled output jumps (the bouncing
ball's velocity reverses), and every such crossing adds a step to the cost.  Between the
steps the cost is smooth but its slope can point away from the truth: on the ball's first
second of data (one bounce in the data at 0.45 s) a start at e = 0.55 puts a second bounce at
0.95 s that the data do not have, and L-BFGS-B stops at e = 0.534 (cost 0.57; the truth
gives 1e-20); on two seconds of data starts at 0.7 and 0.75 stop at 0.691 and 0.737.  The
basin of the truth narrows with every event in the record (three seconds: e within 0.0005 of
the truth).  The windows of :class:`~fmi_adjoint.identify.strategies.GrowingWindows`
(an eighth, a quarter, a half of the record) do not follow the events: the ball's half window from
0.55 ends at the same 0.534.

:class:`EventWindows` ends its windows halfway between the jumps found in the data
(:meth:`~fmi_adjoint.costs.LeastSquaresCost.jump_times`) and halfway from the last jump to the
end of the record: each window adds one event of the data, and a model event must move by
half the time between two data events before it enters or leaves a window the wrong way.
The ball from 0.55: the window to 0.81 s (one bounce) reaches e = 0.8 in 2 iterations, the
further windows and the whole record stay there.  Data without jumps give no windows (the
whole record at once, as before).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

import numpy as np

from ..costs import LeastSquaresCost
from ..identify.problem import AbstractProblem
from ..identify.strategies import AbstractStrategy, Stage

if TYPE_CHECKING:
    from .experiment import FmuExperiment

__all__ = ["EventWindows", "WindowedProblem", "event_window_ends"]


@runtime_checkable
class WindowedProblem(Protocol):
    """What the event windows read of a problem (:class:`~.problem.FmuProblem` is one): its
    experiments, and the view of it cut to data windows.  Checked with ``isinstance`` (a
    Protocol, because :mod:`.problem` imports this module)."""

    @property
    def experiments(self) -> Sequence[FmuExperiment]: ...

    def windowed(self, ends: Mapping[int, float]) -> WindowedProblem:
        """The problem with the experiments at positions ``ends`` cut to ``t <= ends[k]``."""
        ...


def event_window_ends(problem: WindowedProblem) -> tuple[dict[int, float], ...]:
    """The data windows of :class:`EventWindows`: per window, the end of each experiment's part
    (the last sample at or before the window's end), the whole record excluded; ``()`` without
    jumps in the data.  Experiments without jumps, or with fewer jumps than another, keep their
    whole record in the windows past their own."""
    ends_per_experiment = []
    for exp in problem.experiments:
        cost = exp.cost
        if not isinstance(cost, LeastSquaresCost):
            return ()
        jumps = cost.jump_times()
        record = float(cost.sample_times[-1])
        marks = np.r_[jumps, record]
        limits = 0.5 * (marks[:-1] + marks[1:])
        ends: list[float] = []
        for limit in limits:
            inside = cost.sample_times[cost.sample_times <= limit]
            # A window holds at least three samples and ends before the record does.
            if inside.size >= 3 and inside[-1] < record and (not ends or inside[-1] > ends[-1]):
                ends.append(float(inside[-1]))
        ends_per_experiment.append(ends)
    count = max((len(e) for e in ends_per_experiment), default=0)
    return tuple({k: ends[i] for k, ends in enumerate(ends_per_experiment) if i < len(ends)}
                 for i in range(count))


@dataclasses.dataclass(frozen=True)
class EventWindows(AbstractStrategy):
    """Continuation over data windows that each add one event of the data (module docstring);
    the last stage is the whole record.  Applies to FMU problems with least-squares costs."""

    name: ClassVar[str] = "windows"

    def unavailable(self, problem: AbstractProblem) -> str | None:
        if not (isinstance(problem, WindowedProblem)
                and all(isinstance(e.cost, LeastSquaresCost) for e in problem.experiments)):
            return "event windows need an FMU problem with time-domain least-squares costs (--cost time)"
        if not event_window_ends(problem):
            return "the data have no jumps (events) to grow windows over"
        return None

    def stages(self, problem) -> tuple[Stage, ...]:
        out = []
        for ends in event_window_ends(problem):
            shown = ", ".join(sorted({f"{t:g}" for t in ends.values()}))
            out.append(Stage(problem.windowed(ends), f"window t <= {shown} s",
                             {"window_end": [ends.get(k) for k in range(len(problem.experiments))]}))
        return (*out, Stage(problem, "all data", {"window_fraction": 1.0}))
