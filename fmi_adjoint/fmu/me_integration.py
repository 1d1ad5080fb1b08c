"""Model Exchange integration of an FMU by the adaptive Radau IIA scheme (issue 15, part 1-2).

Runs in the FMU's worker process (:mod:`.worker`), next to the binary, so every right-hand
side, Jacobian column and event indicator is a direct FMI call, not a message.

:class:`FmuOdeSystem` is the FMU seen as the :class:`~fmi_adjoint.integrate.radau.OdeSystem`
of :func:`~fmi_adjoint.integrate.radau.integrate_radau`:

* ``rhs``/``jacobian``: ``fmiSetTime``, ``fmiSetContinuousStates``, the inputs interpolated
  linearly in time, then the derivatives; the Jacobian from the FMU's directional derivatives
  where trusted, else central differences of the right-hand side (:func:`.worker.state_jacobian`);
* ``indicators``: ``fmiGetEventIndicators`` at the point;
* ``event``: the FMI event iteration (``EnterEventMode``, ``NewDiscreteStates`` /
  ``UpdateDiscreteStates`` until no further update, ``EnterContinuousTimeMode``) and the new
  continuous states; it also records the next time event;
* ``completed_step``: ``fmiCompletedIntegratorStep`` (step events).

The outputs are read *during* the run, when the FMU's discrete state is that of the node:
at each sample time (a node of the run: the integrator hits every stop) and, at an event
on a sample time, before (left limit) and after it (right limit).

**Data with a repeated time stamp** (an event in the data: left and right limit) is compared
with the run's own event, not with the run at the data's time: the data's solver put the
event a little elsewhere (CVode 3.5e-11 s off the exact bounce), and a parameter on its way
to the fit moves it further, so at the data's time the run is on one side of its event and
one of the two rows would meet the wrong limit.  Such a stop (``event_stops``) takes the
outputs just before and just after the run's event nearest to it between the neighbouring
sample times (:func:`.me_run.match_event_rows`), recorded at every event (:class:`EventOutputs`);
without an event there it keeps the run's value at its own time.

With ``partials`` the system also records, at each accepted step and while the discrete
state is the step's own, what the exact sensitivities need (:mod:`.me_sensitivities`):
``df/dx`` at the three stage points, ``dg/dx`` at the sample nodes, ``df/dt`` at the stages
of steps that end or start at a state event, and at each event ``dz/dx``, ``dz/dt`` and an
FMU-state snapshot taken just before event mode, from which the reinitialisation is
differentiated afterwards.

**The FMU's directional derivatives** (issue 30, part 7).  Where the FMU declares
``providesDirectionalDerivative(s)``, ``df/dx`` (Radau's Newton matrix and the stage Jacobians of
the sensitivities) and ``dg/dx`` at the samples are its columns ``fmiGetDirectionalDerivative``
(unknowns: the derivatives and the outputs, known: one state), one call per column instead of
the two evaluations (and three ``set`` calls each) of a central difference.  They are believed
only after :meth:`FmuOdeSystem.check_columns` compared them with central differences at the
run's first Jacobian (its first point): a state whose column disagrees (relative
:data:`COLUMN_TOLERANCE`) is differenced for the whole run, and the check names the derivatives
that disagree (:attr:`FmuOdeSystem.column_check`, one note in the end).  The calls are counted
(:class:`ColumnCalls`), so that the reply can say how many FMU calls the columns saved
(:meth:`FmuOdeSystem.column_report`).  ``df/du`` is not needed: the inputs do not depend on the
parameters, and ``df/dt`` next to events is a difference in time (FMI 2 has no derivative by
time; the interpolated inputs' slope enters it there).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..integrate.radau import RADAU_C, RadauStep
from .worker import PROBE_STEP, state_jacobian

__all__ = ["COLUMN_TOLERANCE", "ColumnCalls", "ColumnUse", "EventOutputs", "EventPartials", "FmuOdeSystem",
           "StepPartials"]

#: An FMU column agrees with central differences below this, relative to the column's scale
#: (the differences' own error is ~1e-9 of it; a wrong column is off by far more).
COLUMN_TOLERANCE = 1e-6

#: Floor of a column's scale, as a fraction of ``|f| / (1 + |x_j|)``: the round-off of a central
#: difference with step ``PROBE_STEP (1 + |x_j|)`` is ~``eps |f| / PROBE_STEP``, about 2e-10 of
#: that; a floor 1e3 times larger keeps a zero column's round-off far below the tolerance.
_SCALE_FLOOR = 1e3 * float(np.finfo(float).eps) / PROBE_STEP


@dataclasses.dataclass
class ColumnCalls:
    """FMU calls of the Jacobian columns: how many columns came from the FMU, and what one
    column costs each way (counted at :meth:`FmuOdeSystem.check_columns`)."""

    state_columns: int = 0       # df/dx columns taken from the FMU during the run
    output_columns: int = 0      # dg/dx columns taken from the FMU
    fd_state: float = 0.0        # calls of one differenced df/dx column
    fd_output: float = 0.0       # calls of one differenced dg/dx column
    fmu: float = 1.0             # calls of one FMU column
    parameter_replay: int = 0    # calls of the replay that reads the FMU's parameter columns
    skipped_replays: int = 0     # calls of the replays that checked parameter columns made unnecessary

    def saved(self) -> int:
        """The FMU calls the columns taken from the FMU saved against differencing them: the
        state and output columns', the parameter replays' that trusted columns replaced, less
        the replay that reads the parameter columns (negative: they cost more than they saved)."""
        return (int(round(self.state_columns * (self.fd_state - self.fmu)
                          + self.output_columns * (self.fd_output - self.fmu)))
                + self.skipped_replays - self.parameter_replay)


class ColumnUse:
    """The FMU's directional derivatives over the Model Exchange runs of a problem, in the parent
    (a running tally, like the shared Jacobian sources; not a value passed along).

    :meth:`add` takes each run's reply: it adds up the worker's ``fmu_calls`` and
    ``fmu_calls_saved`` (:meth:`FmuOdeSystem.column_report`) and collects the columns the check
    found wrong (``column_check``, each phrase once), so that a lying FMU gives one note naming
    the derivatives (:meth:`note`), not one per run, column or step.
    """

    def __init__(self) -> None:
        self.runs = 0
        self.fmu_calls = 0
        self.saved = 0
        self.wrong: dict[str, None] = {}

    def add(self, reply: Mapping) -> None:
        """Count one run's reply (a reply without ``fmu_calls``, e.g. Co-Simulation, is skipped)."""
        if "fmu_calls" not in reply:
            return
        self.runs += 1
        self.fmu_calls += int(reply["fmu_calls"])
        self.saved += int(reply.get("fmu_calls_saved", 0))
        self.wrong.update(dict.fromkeys(reply.get("column_check") or ()))

    def note(self) -> str | None:
        """One line naming the FMU's columns that disagreed or were refused, or None."""
        if not self.wrong:
            return None
        return (f"the FMU's directional derivatives of {'; '.join(self.wrong)} disagree with central differences "
                "(checked at the first point of a run; parameter columns over the whole run) or are refused, so "
                "those columns were taken by central differences.")

    def to_json(self) -> dict:
        """The FMU calls of the runs, with and without the FMU's directional derivatives (RESULT.json)."""
        if not self.runs:
            return {}
        return {"runs": self.runs, "fmu_calls": self.fmu_calls, "fmu_calls_saved_by_directional_derivatives":
                self.saved, "fmu_calls_without_directional_derivatives": self.fmu_calls + self.saved}


@dataclasses.dataclass
class StepPartials:
    """Partials recorded at one accepted step (``ft`` only next to a state event)."""

    J: np.ndarray                  # (3, n, n) df/dx at the stage points
    ft: np.ndarray | None = None   # (3, n) df/dt at the stage points


@dataclasses.dataclass
class EventPartials:
    """What an event leaves for the sensitivities: indicator partials and the FMU state."""

    t: float
    x_minus: np.ndarray
    x_plus: np.ndarray
    kind: str
    z_x: np.ndarray                # (n_indicators, n)
    z_t: np.ndarray                # (n_indicators,)
    snapshot: object | None        # the FMU state just before event mode (freed by the owner)
    z_minus: np.ndarray | None = None  # (n_indicators,) the indicators at (t, x_minus)


@dataclasses.dataclass
class EventOutputs:
    """The outputs just before (``left``) and after (``right``) an event, with (``partials``)
    their state and time derivatives at those points."""

    left: np.ndarray
    right: np.ndarray
    gx_left: np.ndarray | None = None   # (n_out, n)
    gx_right: np.ndarray | None = None
    gt_left: np.ndarray | None = None   # (n_out,)
    gt_right: np.ndarray | None = None


class FmuOdeSystem:
    """An instantiated, initialized Model Exchange FMU as an ODE system with events.

    Parameters
    ----------
    instance : worker._Instance
        In continuous-time mode after :meth:`~.worker._Instance.start`.
    input_refs, input_times, input_table
        Inputs by value reference, interpolated linearly in time.
    output_refs : sequence of int
        The outputs read at the sample times.
    stops : numpy.ndarray
        Distinct sample times (sorted).
    event_stops : numpy.ndarray
        The stops with a repeated time stamp in the data (see the module docstring).
    sources : list of str
        Per state: its Jacobian column from the FMU ("fmu") or from differences ("fd");
        updated in place when the FMU refuses a column.
    partials : bool
        Record what the exact sensitivities need (see the module docstring).
    """

    def __init__(self, instance, input_refs: Sequence[int], input_times: np.ndarray, input_table: np.ndarray,
                 output_refs: Sequence[int], stops: np.ndarray, sources: list, partials: bool = False,
                 event_stops: np.ndarray | None = None):
        self.instance = instance
        self.n_states = int(instance.n_states)
        self.n_indicators = int(instance.n_indicators)
        self.input_refs = list(input_refs)
        self.input_times = np.asarray(input_times, dtype=float)
        self.input_table = np.asarray(input_table, dtype=float)
        self.output_refs = list(output_refs)
        self.stops = np.asarray(stops, dtype=float)
        self._stop_index = {float(t): i for i, t in enumerate(self.stops)}
        self.event_stops = np.zeros(0) if event_stops is None else np.asarray(event_stops, dtype=float)
        #: Per event, with event stops: the outputs around it.
        self.event_outputs: list[EventOutputs] = []
        self.sources = sources
        #: dg/dx from the FMU's columns where the state's are trusted (real scalar outputs only;
        #: cleared by :meth:`check_columns` or a refusal).
        self.output_columns = bool(self.output_refs) and all(isinstance(r, int) for r in self.output_refs)
        self.calls = ColumnCalls()
        #: What :meth:`check_columns` found wrong, one phrase per column (empty: all agree).
        self.column_check: list[str] = []
        self._checked = False
        self.partials = partials
        n_stops, n_out = self.stops.size, len(self.output_refs)
        #: Outputs at the sample times: left limits and right limits (equal without an event).
        self.left = np.full((n_stops, n_out), np.nan)
        self.right = np.full((n_stops, n_out), np.nan)
        #: dg/dx at the sample times, left and right (with ``partials``).
        self.gx_left = np.zeros((n_stops, n_out, self.n_states))
        self.gx_right = np.zeros((n_stops, n_out, self.n_states))
        self.steps: list[StepPartials] = []
        self.events: list[EventPartials] = []
        #: The next accepted step starts at a state event (its stages' df/dt are recorded).
        self.event_start = False
        #: The last accepted step.
        self.last_step: RadauStep | None = None
        #: The compiled side of this system (:class:`.me_kernel.FmuKernel`), when the run's plain
        #: steps and its replays are compiled (set by :func:`.me_kernel.compiled_walk`).
        self.kernel: Any = None

    # -- the FMU at a point -------------------------------------------------------------------
    def inputs(self, t: float) -> list[float]:
        if not self.input_refs:
            return []
        return [float(np.interp(t, self.input_times, col)) for col in self.input_table.T]

    def at(self, t: float, x: np.ndarray) -> None:
        self.instance.set_point(t, x, self.input_refs, self.inputs(t))

    def rhs(self, t: float, x: np.ndarray) -> np.ndarray:
        self.at(t, x)
        return self.instance.derivatives()

    def jacobian(self, t: float, x: np.ndarray) -> np.ndarray:
        if not self._checked:
            self.check_columns(t, x)
        self.calls.state_columns += self.sources.count("fmu")
        return state_jacobian(self.instance, self.at, t, x, (), self.sources)[: self.n_states]

    def check_columns(self, t: float, x: np.ndarray) -> None:
        """Compare the FMU's columns of ``df/dx`` and ``dg/dx`` with central differences at
        (t, x) and take the disagreeing (or refused) ones by differences for the rest of the run:
        their state turns to "fd" in :attr:`sources`, a disagreeing output row clears
        :attr:`output_columns`.  Records what one column costs each way (:attr:`calls`) and,
        in :attr:`column_check`, one phrase per disagreeing column naming the derivatives
        ("der(v) by x (1.0e-01 off)").  Runs once, at the run's first Jacobian (its first point).
        """
        self._checked = True
        trusted = [j for j, source in enumerate(self.sources) if source == "fmu"]
        if not trusted:
            return
        instance, counter, n = self.instance, self.instance.progress, self.n_states
        outputs = self.output_refs if self.output_columns else []
        before = counter.count
        self.at(t, x)
        at_calls = counter.count - before
        before = counter.count
        fd_f = state_jacobian(instance, self.at, t, x, (), ["fd"] * n)[:n]
        self.calls.fd_state = (counter.count - before - at_calls) / n
        before = counter.count
        fd_g = self._state_differences(self.outputs_at, t, x, len(outputs)) if outputs else np.zeros((0, n))
        self.calls.fd_output = (counter.count - before - at_calls) / n if outputs else 0.0
        f, g = self.rhs(t, x), (self.outputs_at(t, x) if outputs else np.zeros(0))
        names = instance.names
        unknowns = [names.get(r, f"value reference {r}") for r in [*instance.derivative_refs, *outputs]]
        expected = np.vstack([fd_f, fd_g])
        for j in trusted:
            state = names.get(instance.state_refs[j], f"value reference {instance.state_refs[j]}")
            column = self._fmu_column(list(instance.derivative_refs) + list(outputs), j)
            if column is None and outputs:
                column = self._fmu_column(list(instance.derivative_refs), j)
                if column is not None:  # the outputs refused as unknowns: df/dx only
                    outputs, expected, unknowns, g = [], expected[:n], unknowns[:n], np.zeros(0)
                    self.output_columns = False
            if column is None:
                self.sources[j] = "fd"
                self.column_check.append(f"every derivative by {state} (refused)")
                continue
            floor = _SCALE_FLOOR / (1.0 + abs(float(x[j])))
            for rows, value in ((slice(0, n), f), (slice(n, None), g)):
                error = np.abs(column[rows] - expected[rows, j])
                scale = max(float(np.abs(expected[rows, j]).max(initial=0.0)),
                            float(np.abs(column[rows]).max(initial=0.0)),
                            floor * float(np.abs(value).max(initial=0.0)))
                wrong = np.flatnonzero(~(error <= COLUMN_TOLERANCE * scale))
                if not wrong.size:
                    continue
                off = float(error[wrong].max()) / scale if scale > 0 else float("inf")
                self.column_check.append(f"{', '.join(unknowns[rows][i] for i in wrong)} by {state} ({off:.1e} off)")
                if rows.start == 0:
                    self.sources[j] = "fd"  # its output rows are differenced with it
                elif self.sources[j] == "fmu":
                    self.output_columns = False
        self.at(t, x)

    def column_report(self, calls_before: int) -> dict:
        """What the reply of a run says about the FMU's columns: the FMU calls since the
        counter stood at ``calls_before`` (``fmu_calls``), those the FMU's columns saved
        (``fmu_calls_saved``, :meth:`ColumnCalls.saved`) and, if the check found any, the
        columns that disagree (``column_check``)."""
        report: dict = {"fmu_calls": int(self.instance.progress.count - calls_before),
                        "fmu_calls_saved": self.calls.saved()}
        if self.column_check:
            report["column_check"] = list(self.column_check)
        return report

    def _fmu_column(self, unknowns: list, j: int) -> np.ndarray | None:
        """The FMU's column of ``unknowns`` by state ``j`` at the point set, None if refused or not finite."""
        try:
            column = self.instance.directional(unknowns, self.instance.state_refs[j])
        except self.instance.Failure:
            return None
        return column if column.shape == (len(unknowns),) and np.all(np.isfinite(column)) else None

    def indicators(self, t: float, x: np.ndarray) -> np.ndarray:
        self.at(t, x)
        return self.instance.event_indicators()

    def next_time_event(self) -> float | None:
        return self.instance.next_event_time

    def outputs_at(self, t: float, x: np.ndarray) -> np.ndarray:
        self.at(t, x)
        return self.instance.get_real(self.output_refs)

    def _state_differences(self, function, t: float, x: np.ndarray, rows: int,
                           skip: Sequence[int] = ()) -> np.ndarray:
        """``d function(t, x)/dx`` (``rows`` values) by central differences, the FMU left at (t, x);
        the columns ``skip`` are left unset (with every column skipped the FMU is not moved)."""
        columns = np.empty((rows, self.n_states))
        differenced = [j for j in range(self.n_states) if j not in skip]
        for j in differenced:
            d = PROBE_STEP * (abs(x[j]) + 1.0)
            xp, xm = x.copy(), x.copy()
            xp[j] += d
            xm[j] -= d
            columns[:, j] = (function(t, xp) - function(t, xm)) / (2 * d)
        if differenced:
            self.at(t, x)
        return columns

    def _output_jacobian(self, t: float, x: np.ndarray) -> np.ndarray:
        """``dg/dx``: the FMU's columns where trusted, else central differences of the outputs
        (the FMU at the point, and left there)."""
        if not self._checked:
            self.check_columns(t, x)
        fmu = [j for j, source in enumerate(self.sources) if source == "fmu"] if self.output_columns else []
        columns = self._state_differences(self.outputs_at, t, x, len(self.output_refs), skip=fmu)
        for j in fmu:
            column = self._fmu_column(self.output_refs, j)
            if column is None:  # refused after the check: differences from now on
                self.output_columns = False
                return self._state_differences(self.outputs_at, t, x, len(self.output_refs))
            columns[:, j] = column
        self.calls.output_columns += len(fmu)
        return columns

    def _event_outputs(self, t: float, x: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """Outputs at an event point and (``partials``) ``dg/dx``, ``dg/dt``; the FMU left there."""
        y = self.outputs_at(t, x)
        if not self.partials or not self.output_refs:
            return y, None, None
        gx = self._output_jacobian(t, x)
        d = PROBE_STEP * (abs(t) + 1.0)
        gt = (self.outputs_at(t + d, x) - self.outputs_at(t - d, x)) / (2 * d)
        self.at(t, x)
        return y, gx, gt

    def record_outputs(self, t: float, x: np.ndarray, side: str = "both") -> None:
        """The outputs at a sample time ``t`` (a no-op elsewhere)."""
        i = self._stop_index.get(float(t))
        if i is None:
            return
        y = self.outputs_at(t, x)
        gx = self._output_jacobian(t, x) if self.partials and self.output_refs else None
        if side in ("left", "both"):
            self.left[i] = y
            if gx is not None:
                self.gx_left[i] = gx
        if side in ("right", "both"):
            self.right[i] = y
            if gx is not None:
                self.gx_right[i] = gx

    # -- the integrator's hooks -----------------------------------------------------------------
    def accepted(self, step: RadauStep) -> None:
        """An accepted step: its stage Jacobians while the discrete state is the step's own."""
        self.last_step = step
        if not self.partials:
            return
        h = step.t1 - step.t0
        times = step.t0 + RADAU_C * h
        stages = step.x0[None, :] + step.Z
        J = np.array([self.jacobian(float(t), y) for t, y in zip(times, stages)])
        ft = self._time_derivatives(times, stages) if self.event_start else None
        self.event_start = False
        self.steps.append(StepPartials(J=J, ft=ft))

    def _time_derivatives(self, times: np.ndarray, stages: np.ndarray) -> np.ndarray:
        """``df/dt`` at the stage points by central differences in time."""
        out = np.empty_like(stages)
        for i, (t, y) in enumerate(zip(times, stages)):
            d = PROBE_STEP * (abs(float(t)) + 1.0)
            out[i] = (self.rhs(float(t) + d, y) - self.rhs(float(t) - d, y)) / (2 * d)
        return out

    def completed_step(self, t: float, x: np.ndarray) -> bool:
        self.at(t, x)
        enter_event, terminate = self.instance.completed_integrator_step()
        if terminate:
            raise self.instance.Failure(f"{self.instance.fmu_name}: the FMU asked to terminate at t = {t:g} s.")
        self.record_outputs(t, x)
        return bool(enter_event)

    def event(self, t: float, x: np.ndarray, kind: str) -> np.ndarray:
        """The FMI event iteration at (t, x); the new continuous states."""
        instance = self.instance
        self.at(t, x)
        self.record_outputs(t, x, "left")
        around = self._event_outputs(t, x) if self.event_stops.size else None
        z_x = np.zeros((self.n_indicators, self.n_states))
        z_t = np.zeros(self.n_indicators)
        snapshot = None
        z_minus: np.ndarray | None = None
        if self.partials:
            if kind == "state" and self.steps:
                last = self.steps[-1]
                step = self.last_step
                if last.ft is None and step is not None:  # the step that ends at the event: its stages' df/dt
                    h = step.t1 - step.t0
                    last.ft = self._time_derivatives(step.t0 + RADAU_C * h, step.x0[None, :] + step.Z)
            z_x, z_t = self._indicator_partials(t, x)
            self.at(t, x)
            z_minus = instance.event_indicators() if self.n_indicators else np.zeros(0)
            snapshot = instance.get_fmu_state()
        x_plus = instance.event_mode_update(t)
        self.events.append(EventPartials(t=float(t), x_minus=np.array(x, dtype=float), x_plus=x_plus, kind=kind,
                                         z_x=z_x, z_t=z_t, snapshot=snapshot, z_minus=z_minus))
        self.event_start = self.event_start or kind == "state"
        self.record_outputs(t, x_plus, "right")
        if around is not None:
            after = self._event_outputs(t, x_plus)
            self.event_outputs.append(EventOutputs(left=around[0], right=after[0], gx_left=around[1],
                                                   gx_right=after[1], gt_left=around[2], gt_right=after[2]))
        return x_plus

    def _indicator_partials(self, t: float, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``dz/dx`` and ``dz/dt`` by central differences (continuous-time mode: reading only)."""
        z_x = self._state_differences(self.indicators, t, x, self.n_indicators)
        d = PROBE_STEP * (abs(t) + 1.0)
        z_t = (self.indicators(t + d, x) - self.indicators(t - d, x)) / (2 * d)
        return z_x, z_t

    def free(self) -> None:
        """Free the FMU-state snapshots."""
        for event in self.events:
            if event.snapshot is not None:
                self.instance.free_fmu_state(event.snapshot)
                event.snapshot = None

