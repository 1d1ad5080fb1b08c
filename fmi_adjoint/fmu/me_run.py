"""One Model Exchange run of an FMU as one worker request: integration, outputs at the sample
times and, when asked, their exact sensitivities (issue 15).  Runs in the worker process.

The parent (:mod:`.simulation`) sends a plain request; everything that touches the binary
happens here, next to it.  The reply is plain data (arrays packed by :func:`.worker.pack`).

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
from .me_integration import FmuOdeSystem, event_stop_events
from .me_sensitivities import (SensitivitiesUnavailable, output_sensitivities, parameter_partials,
                               probe_parameter_columns, replay)
from .worker import pack

__all__ = ["run_model_exchange"]


def run_model_exchange(instance, request: dict) -> dict:
    """Integrate the FMU of ``instance`` as ``request`` says (see :meth:`.simulation.FmuSimulator.job`).

    Errors of the run name the FMU: a budget exceeded or a defective time event raise
    ``instance.Failure`` (the parent's ``FmuError``), a run the error control could not
    complete a :class:`~fmi_adjoint.errors.ConvergenceError`.
    """
    budget = RunBudget.from_wire(request.get("budget"))
    deadline = budget.deadline()
    try:
        return _run(instance, request, budget, deadline)
    except (RunBudgetError, ModelError) as exc:  # the FMU or the budget: no trial point to step back from
        raise instance.Failure(f"{instance.fmu_name}: {exc}") from None
    except ConvergenceError as exc:
        raise ConvergenceError(f"{instance.fmu_name}: {exc}") from None


def _run(instance, request: dict, budget: RunBudget, deadline: float) -> dict:
    refs, values = list(request["refs"]), [float(v) for v in request["values"]]
    t0, t_end = float(request["t0"]), float(request["t_end"])
    stops = np.asarray(request["stops"], dtype=float)
    input_refs = list(request["input_refs"])
    input_times = np.asarray(request["input_times"], dtype=float)
    input_table = np.asarray(request["input_table"], dtype=float)
    sources = list(request["sources"])
    sensitivity = request.get("sensitivity")
    u0 = [float(np.interp(t0, input_times, col)) for col in input_table.T]
    instance.start(refs + input_refs, values + u0, t0, t_end)
    x0 = instance.initial_states() if instance.n_states else np.zeros(0)
    system = FmuOdeSystem(instance, input_refs, input_times, input_table, request["outputs"], stops, sources,
                          partials=sensitivity is not None,
                          event_stops=np.asarray(request.get("event_stops", ()), dtype=float))
    try:
        system.record_outputs(t0, x0)
        run = integrate_radau(system, x0, t0, t_end, stops=tuple(stops), rtol=request["rtol"], atol=request["atol"],
                              max_step=request["max_step"], nodes=request.get("nodes"), budget=budget,
                              deadline=deadline, step_bytes=record_bytes_per_step(
                                  system.n_states, len(sensitivity["steps"]) if sensitivity else 0,
                                  partials=sensitivity is not None))
        missing = np.argwhere(np.isnan(system.left) | np.isnan(system.right))
        if missing.size:
            raise RuntimeError(f"no output recorded at the sample time {stops[missing[0][0]]!r}")
        matched = event_stop_events(run, stops, system.event_stops)
        for i, e in matched.items():  # a repeated time stamp meets the run's own event
            system.left[i], system.right[i] = system.event_outputs[e].left, system.event_outputs[e].right
        reply = {"left": pack(system.left), "right": pack(system.right), "sources": list(sources),
                 "nodes": pack(run.replay_nodes), "steps": len(run.steps), "rejected": int(run.n_rejected),
                 "events": [(float(e.t), e.kind) for e in run.events], "rhs_evaluations": int(run.n_rhs)}
        if sensitivity is not None:
            def clock(t: float) -> None:
                check_deadline(deadline, budget, t, "the sensitivities of the run")

            try:
                reply.update(_sensitivities(instance, system, run, refs, values, t0, t_end, sensitivity, matched,
                                            clock))
            except SensitivitiesUnavailable as exc:
                reply["sensitivities_unavailable"] = str(exc)
        return reply
    finally:
        system.free()


def _sensitivities(instance, system, run, refs, values, t0, t_end, sensitivity: dict, matched: dict,
                   clock: Callable[[float], None]) -> dict:
    replays = sensitivity["replays"]
    steps = np.asarray(sensitivity["steps"], dtype=float)
    use = [bool(u) for u in sensitivity["directional"]]
    directional_refs = [r for r, u in zip(sensitivity["param_refs"], use) if u]
    plus = [replay(instance, system, run, r, v, t0, t_end, clock=clock) for r, v in replays[0::2]]
    minus = [replay(instance, system, run, r, v, t0, t_end, clock=clock) for r, v in replays[1::2]]
    partials = parameter_partials(plus, minus, steps, run)
    # One note per parameter (the reply's shape is checked by the parent).
    notes = ["finite differences of replays of the run"] * len(use)
    if directional_refs:
        nominal = replay(instance, system, run, refs, values, t0, t_end, directional_refs, clock=clock)
        notes = probe_parameter_columns(nominal, partials, use, float(sensitivity["probe_tolerance"]))
    left, right = output_sensitivities(system, run, partials, matched)
    return {"dleft": pack(left), "dright": pack(right), "columns": notes, "directional": use}
