"""One Model Exchange run of an FMU as one worker request: integration, outputs at the sample
times and, when asked, their exact sensitivities (issue 15).  Runs in the worker process.

The parent (:mod:`.simulation`) sends a plain request; everything that touches the binary
happens here, next to it.  The reply is plain data (arrays packed by :func:`.worker.pack`).

Also here, because they run next to the binary: discrete inputs set only in Event Mode
(:class:`HeldInputs`), the one rule by which data rows at events meet a run's events
(:func:`match_event_rows`, :func:`between_matched_events`; :mod:`.validation` uses it too),
and the Co-Simulation run of an FMU that interpolates its inputs
(:func:`run_interpolated_co_simulation`, carried by the same worker request).

**Budget.**  The request's ``budget`` (:class:`~fmi_adjoint.integrate.radau.RunBudget`, the
defaults when absent) bounds the whole request: the integration's steps and events, and one
wall-time deadline for the integration, the replays and the sensitivities, checked between
steps (the parent's ``--fmu-timeout`` bounds each FMI call).  A run that exceeds it, and an
FMU whose time events lie in the past, are not finite or do not advance, ends with one error
naming the FMU (``instance.Failure``, the parent's ``FmuError``): these are not trial points
an optimizer could step back from.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import ConvergenceError, ModelError, RunBudgetError
from ..integrate.radau import RunBudget, check_deadline, integrate_radau, record_bytes_per_step
from .me_integration import FmuOdeSystem
from .me_kernel import compiled_walk
from .me_sensitivities import SensitivitiesUnavailable, run_sensitivities
from .worker import pack, unpack

__all__ = ["SAME_TIME", "HeldInputs", "held_value", "between_matched_events", "match_event_rows",
           "run_interpolated_co_simulation",
           "run_model_exchange"]

#: A sample time counts as reached at ``t`` within this fraction of ``max(1, |t|)``: the
#: communication points ``k h`` and the data's time stamps parsed from text agree only up to
#: round-off, and an Integer input must not take its previous value on such a point.
SAME_TIME = 1e-9


def held_value(times: np.ndarray, values: np.ndarray, t: float) -> float:
    """The value of the last sample at or before ``t`` (a zero-order hold; at a repeated time
    stamp the second row, the right limit), the first sample before the first time."""
    index = int(np.searchsorted(np.asarray(times, dtype=float), t + SAME_TIME * max(1.0, abs(t)), side="right")) - 1
    return float(np.asarray(values, dtype=float)[max(index, 0)])


def match_event_rows(event_times, stops: np.ndarray, event_stops: np.ndarray) -> dict[int, int]:
    """Which event of a run each event row of the data is compared with.

    ``stops`` are the data's distinct sample times, ``event_stops`` those given twice (an event
    in the data: the left and the right limit), ``event_times`` the instants of the run's
    events.  Each event stop is matched to the run's event nearest to it within its window,
    which reaches halfway to the neighbouring event stops (the whole run for the first and the
    last): ``{stop index: event index}`` (a stop with no event in its window is not listed and
    keeps the run's values at its own time).  The data's left row is then compared with the run
    just before that event and the right row with the run just after it, not with the run at
    the data's time stamp: the data's solver put the event a little elsewhere, and a parameter
    on its way to the fit moves it further.  The windows do not overlap, so no run event is
    matched twice; of events a few ulp apart the first is taken.  Ordinary samples between a
    data event and its run event are compared as :func:`between_matched_events` says.

    The one rule for event rows: the identification's Model Exchange runs (:func:`_run`) and
    the validation's re-simulation (:func:`.validation.sample_recorded`) both use it.
    """
    times = np.asarray(list(event_times), dtype=float)
    marks = np.unique(np.asarray(event_stops, dtype=float))
    edges = np.concatenate([[-np.inf], (marks[1:] + marks[:-1]) / 2, [np.inf]])
    matched: dict[int, int] = {}
    for k, t in enumerate(marks):
        inside = np.flatnonzero((times > edges[k]) & (times < edges[k + 1]))
        if inside.size:
            e = int(inside[np.argmin(np.abs(times[inside] - t))])
            # Events a few ulp apart are one event (a reinitialisation, then an iteration that
            # changed nothing): the first, whose left limit is the one before them all.
            while e > 0 and times[e] - times[e - 1] <= SAME_TIME * max(1.0, abs(times[e])):
                e -= 1
            matched[int(np.searchsorted(stops, t))] = e
    return matched


def between_matched_events(event_times, stops: np.ndarray, matched: dict[int, int]) -> list[tuple[int, int, str]]:
    """The ordinary samples that lie between a data event and the run's event matched to it,
    as ``(sample index, event stop index, side)``: such a sample is on one side of the event in
    the data and on the other in the run, so it is compared with the run's value on the data's
    side, held from the run's event: ``"left"``, the run just before its event (the run's event
    came first), or ``"right"``, just after it (the data's came first).

    Why: compared with the run at its own time, the sample would jump from one branch to the
    other as a parameter moves the run's event across it (a bounce crossing a sample time), and
    so would the cost.  Held from the event, its value is continuous in the parameters: when the
    run's event reaches the sample, the run's value there is the held one.  Its derivative is
    that of the event row's (``g_x D + g_t T' + g_p`` at the moving event, exact), which differs
    from the branch's own by ``dy/dt`` times the distance to the event: the cost is continuous
    but has a kink where an event crosses a sample, and such samples carry only the event's
    value, not the branch's slope.  At the fit, where the run's events meet the data's, no
    sample lies between them.
    """
    times = np.asarray(list(event_times), dtype=float)
    out: list[tuple[int, int, str]] = []
    stops = np.asarray(stops, dtype=float)
    for i, e in matched.items():
        t_data, t_run = float(stops[i]), float(times[e])
        between = np.flatnonzero((stops > min(t_data, t_run)) & (stops < max(t_data, t_run)))
        side = "left" if t_run < t_data else "right"
        out.extend((int(j), i, side) for j in between if int(j) not in matched)
    return out


class HeldInputs:
    """An FMU instance whose discrete inputs follow a held table, set only where FMI allows.

    A discrete input of a Model Exchange FMU (Integer, Boolean, Enumeration, a discrete Real)
    may be set only in Initialization and Event Mode (FMI 2.0, sec. 3.2.3, table of the
    functions callable per state; FMI 3.0, sec. 3.2.1), and it is piecewise constant: a change
    is an event.  So this wrapper, which stands in for the worker's instance wherever the run,
    its replays and the event sensitivities use it:

    * sets the inputs' values at ``t0`` with the start values (:meth:`start`);
    * announces the next time at which the table changes as a time event, the earlier of it
      and the FMU's own ``nextEventTime`` (:attr:`next_event_time`);
    * in :meth:`event_mode_update`, enters Event Mode, sets the held values at ``t`` (the right
      limit at a change: :func:`.experiment.held_value`), then runs the event iteration.

    Every other attribute is the instance's.  The continuous-time points never touch these
    inputs, so their values between events are the data's, held.
    """

    def __init__(self, instance, refs, times: np.ndarray, table: np.ndarray, changes: np.ndarray):
        self._instance = instance
        self.held_refs = list(refs)
        self.held_times = np.asarray(times, dtype=float)
        self.held_table = np.asarray(table, dtype=float).reshape(self.held_times.size, len(self.held_refs))
        self.held_changes = np.asarray(changes, dtype=float)
        self._t = -np.inf

    def __getattr__(self, name: str):
        return getattr(self._instance, name)

    def held_values(self, t: float) -> list[float]:
        return [held_value(self.held_times, column, t) for column in self.held_table.T]

    def start(self, refs, values, t0: float, t_end: float) -> float | None:
        self._t = float(t0)
        return self._instance.start(list(refs) + self.held_refs, list(values) + self.held_values(t0), t0, t_end)

    @property
    def next_event_time(self) -> float | None:
        announced = self._instance.next_event_time
        later = self.held_changes[self.held_changes > self._t + SAME_TIME * max(1.0, abs(self._t))]
        if not later.size:
            return announced
        return float(later[0]) if announced is None else min(float(announced), float(later[0]))

    def event_mode_update(self, t: float) -> np.ndarray:
        """Event Mode at the point set, the held inputs at ``t``, the event iteration, back to
        continuous-time mode; the continuous states afterwards."""
        instance = self._instance
        self._t = float(t)
        instance.enter_event_mode(t)
        instance.set_values(self.held_refs, self.held_values(t))
        instance.settle_discrete_states(t)
        instance.enter_continuous_time_mode()
        return instance.initial_states() if instance.n_states else np.zeros(0)


def run_model_exchange(instance, request: dict) -> dict:
    """Integrate the FMU of ``instance`` as ``request`` says (see :meth:`.simulation.FmuSimulator.job`).

    Errors of the run name the FMU: a budget exceeded or a defective time event raise
    ``instance.Failure`` (the parent's ``FmuError``), a run the error control could not
    complete a :class:`~fmi_adjoint.errors.ConvergenceError`.
    """
    if request.get("interface") == "CoSimulation":
        return run_interpolated_co_simulation(instance, request)
    budget = RunBudget.from_wire(request.get("budget"))
    deadline = budget.deadline()
    try:
        return _run(instance, request, budget, deadline)
    except (RunBudgetError, ModelError) as exc:  # the FMU or the budget: no trial point to step back from
        raise instance.Failure(f"{instance.fmu_name}: {exc}") from None
    except ConvergenceError as exc:
        raise ConvergenceError(f"{instance.fmu_name}: {exc}") from None


def run_interpolated_co_simulation(instance, request: dict) -> dict:
    """A Co-Simulation run whose continuous inputs vary within each step: FMI 2.0 (sec. 4.2.2,
    ``canInterpolateInputs``) through ``fmi2SetRealInputDerivatives``, FMI 3.0 (sec. 4.2.3,
    ``providesIntermediateUpdate``) through the FMU's intermediate updates.

    Before each ``doStep`` from ``t_k`` over ``h_k`` the inputs are set to the data's value at
    ``t_k`` (linear interpolation of ``input_table`` at ``input_times``).  FMI 2: with first
    derivatives ``(u(t_k + h_k) - u(t_k)) / h_k``, the slope of the data's linear interpolation
    over the coming step (the secant: the FMU's ramp then ends on the data's value at
    ``t_{k+1}``).  FMI 3: at every time the FMU calls back inside the step, the data's linear
    interpolation at that time (the data's own kinks inside a step are kept).  Held
    (discrete) inputs are set to their held values at the communication points only.  The reply has the
    shape of a Model Exchange run's (``left`` = ``right`` = the outputs at the communication
    points ``stops``, no events), so the worker's request :meth:`~.worker._Instance.run_me_adaptive`
    carries it; a request of its own in the worker would be the cleaner home.
    """
    grid = np.asarray(request["stops"], dtype=float)
    refs, values = list(request["refs"]), [float(v) for v in request["values"]]
    input_refs, held_refs = list(request["input_refs"]), list(request.get("held_refs", ()))
    times = np.asarray(request["input_times"], dtype=float)
    table = np.asarray(request["input_table"], dtype=float).reshape(times.size, len(input_refs))
    held_table = np.asarray(request.get("held_table", np.zeros((times.size, 0))), dtype=float)

    def inputs(t: float) -> list[float]:
        return [float(np.interp(t, times, column)) for column in table.T]

    def held(t: float) -> list[float]:
        return [held_value(times, column, t) for column in held_table.T]

    outputs = request["outputs"]
    instance.start(refs + input_refs + held_refs, values + inputs(float(grid[0])) + held(float(grid[0])),
                   float(grid[0]), float(grid[-1]))
    fmu = instance.fmu
    out = np.empty((grid.size, len(outputs)))
    out[0] = instance.get_real(outputs)
    for k in range(grid.size - 1):
        t, h = float(grid[k]), float(grid[k + 1] - grid[k])
        u0 = inputs(t)
        if k > 0:
            instance.set_values(input_refs + held_refs, u0 + held(t))
        if instance.fmi3:  # the data's own interpolation at every time the FMU calls back
            with instance.intermediate_inputs(lambda time: (input_refs, inputs(time))):
                instance._do_step(t, h)
        else:
            slopes = [(u1 - u) / h for u, u1 in zip(u0, inputs(t + h))]
            instance._call("fmi2SetRealInputDerivatives", fmu.setRealInputDerivatives, input_refs,
                           [1] * len(input_refs), slopes)
            instance._call(f"fmi2DoStep at t = {t:g} s", fmu.doStep, t, h)
        out[k + 1] = instance.get_real(outputs)
    instance._call("terminating", fmu.terminate)
    instance._terminated = True
    packed = pack(out)
    return {"left": packed, "right": packed, "sources": [], "nodes": pack(grid), "steps": grid.size - 1,
            "rejected": 0, "events": [], "rhs_evaluations": 0}


def _run(instance, request: dict, budget: RunBudget, deadline: float) -> dict:
    refs, values = list(request["refs"]), [float(v) for v in request["values"]]
    t0, t_end = float(request["t0"]), float(request["t_end"])
    stops = np.asarray(request["stops"], dtype=float)
    input_refs = list(request["input_refs"])
    input_times = np.asarray(request["input_times"], dtype=float)
    input_table = np.asarray(request["input_table"], dtype=float)
    sources = list(request["sources"])
    sensitivity = request.get("sensitivity")
    calls_before = instance.progress.count
    if len(request.get("held_refs", ())):
        instance = HeldInputs(instance, request["held_refs"], input_times, request["held_table"],
                              request["held_changes"])
    u0 = [float(np.interp(t0, input_times, col)) for col in input_table.T]
    instance.start(refs + input_refs, values + u0, t0, t_end)
    x0 = instance.initial_states() if instance.n_states else np.zeros(0)
    system = FmuOdeSystem(instance, input_refs, input_times, input_table, request["outputs"], stops, sources,
                          partials=sensitivity is not None,
                          event_stops=np.asarray(request.get("event_stops", ()), dtype=float))
    try:
        system.record_outputs(t0, x0)
        compiled = compiled_walk(request.get("kernel"), instance, system)
        run = integrate_radau(system, x0, t0, t_end, stops=tuple(stops), rtol=request["rtol"], atol=request["atol"],
                              max_step=request["max_step"], nodes=request.get("nodes"), budget=budget,
                              deadline=deadline, step_bytes=record_bytes_per_step(
                                  system.n_states, len(sensitivity["steps"]) if sensitivity else 0,
                                  partials=sensitivity is not None), compiled=compiled)
        missing = np.argwhere(np.isnan(system.left) | np.isnan(system.right))
        if missing.size:
            raise RuntimeError(f"no output recorded at the sample time {stops[missing[0][0]]!r}")
        matched = match_event_rows([e.t for e in run.events], stops, system.event_stops)
        for i, e in matched.items():  # a repeated time stamp meets the run's own event
            system.left[i], system.right[i] = system.event_outputs[e].left, system.event_outputs[e].right
        between = between_matched_events([e.t for e in run.events], stops, matched)
        for j, i, side in between:  # ... and the samples between the two events its value on the data's side
            system.left[j] = system.right[j] = (system.left if side == "left" else system.right)[i]
        reply = {"left": pack(system.left), "right": pack(system.right), "sources": list(sources),
                 "nodes": pack(run.replay_nodes), "steps": len(run.steps), "rejected": int(run.n_rejected),
                 "events": [(float(e.t), e.kind) for e in run.events], "rhs_evaluations": int(run.n_rhs),
                 "loop": "python" if compiled is None else "compiled",
                 "compiled_steps": 0 if system.kernel is None else system.kernel.committed}
        if sensitivity is not None:
            def clock(t: float) -> None:
                check_deadline(deadline, budget, t, "the sensitivities of the run")

            try:
                reply.update(_sensitivities(instance, system, run, refs, values, t0, t_end, sensitivity, matched,
                                            clock, between))
            except SensitivitiesUnavailable as exc:
                reply["sensitivities_unavailable"] = str(exc)
        reply.update(system.column_report(calls_before))
        if system.kernel is not None:
            reply["compiled_replayed"] = system.kernel.replayed
        return reply
    finally:
        system.free()


def _sensitivities(instance, system, run, refs, values, t0, t_end, sensitivity: dict, matched: dict,
                   clock: Callable[[float], None], between: list[tuple[int, int, str]]) -> dict:
    """:func:`.me_sensitivities.run_sensitivities`, with the samples between a data event and
    the run's (``between``, :func:`between_matched_events`) given their event row's derivative."""
    reply = run_sensitivities(instance, system, run, refs, values, t0, t_end, sensitivity, matched, clock)
    if between:
        left, right = unpack(reply["dleft"]), unpack(reply["dright"])
        for j, i, side in between:
            left[j] = right[j] = (left if side == "left" else right)[i]
        reply.update(dleft=pack(left), dright=pack(right))
    return reply
