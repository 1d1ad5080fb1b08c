"""Exact sensitivities of an FMU's Model Exchange run: the derivative of the Radau IIA scheme
as it ran, events included (issue 15, parts 1-2).  Runs in the FMU's worker process.

The recursion itself is :func:`~fmi_adjoint.integrate.radau.radau_sensitivities`; this module
supplies its partial derivatives from the FMU:

* state partials (``df/dx`` at the stages, ``dg/dx`` at the samples, ``dz/dx``, ``dz/dt`` and
  ``df/dt`` at events) were recorded during the run by :class:`.me_integration.FmuOdeSystem`;
* parameter partials come from **replays**: the instance is restarted with one parameter
  moved by ``±δ`` and driven through the *recorded* run (the same stage points, the same
  sample nodes, ``fmiCompletedIntegratorStep`` at the same steps, event mode at the same
  event points), so its discrete state evolves as in the run while only the parameter
  differs.  Central differences of what it returns are ``df/dp`` at every stage, ``dg/dp`` at
  every sample, ``dz/dp`` and ``dΔ/dp`` (the reinitialisation) at every event, and
  ``dx0/dp`` (the initialization).  Fixed and tunable parameters are treated alike: each
  replay sets them before initialization, as an importer does.
* Where the FMU offers directional derivatives with respect to a parameter, an unperturbed
  replay reads them at the same points; the first evaluation compares them with the
  replays' differences (:func:`probe_parameter_columns`) and keeps a column only if it agrees,
  naming a rejected one (:func:`parameter_columns`).  A column the worker has believed once
  then replaces its parameter's two replays in runs without events: ``df/dp`` and ``dg/dp``
  are the FMU's, ``dx0/dp`` a difference of the initialization alone
  (:func:`run_sensitivities`, issue 30, part 7).
* the reinitialisation's state derivative is taken along the tangent direction the recursion
  asks for (``jump_directional``): from the FMU state saved just before event mode, the
  event iteration is rerun at ``(t + ε dt, x⁻ + ε dx)`` on both sides.

**The event's side.**  The FMU decides by its own test (``h <= floor``) whether the event
iteration reinitialises, and the located point ``x⁻`` lies only a few ulp past the surface.
A trial point off the surface (a replay whose parameter moves the surface, ``z_p != 0``, or
a tangent step on a curved surface, ``O(ε²)``) can land on the other side, where the FMU
does not reinitialise at all, and the difference quotient is then of the order of the jump
divided by ``ε``.  So every trial point of a state event is first moved, along the
indicator's gradient at the event, onto the level ``z = z⁻ ± m`` just inside the event's
side (:func:`_onto_event_side`).  The reinitialisation seen through that projection is a
smooth map that equals the FMU's on the surface, so its derivatives along the tangent
directions the recursion needs are the true ones; the parameter partial and the state
directional are taken of the same map, so they add up.

**When the sensitivities do not exist.**  A replay whose FMU announces a time event at
another instant than the run's (a parameter moves a time event: FMI gives no derivative of
``nextEventTime``), or a reinitialisation whose two sides are not centred on the run's own
(a branch change the projection could not prevent), raises
:class:`SensitivitiesUnavailable`; the parent then takes whole-run differences and says why
(:class:`.gradients.SensitivityPath`).  Events need an FMU that can get and set its state
(``canGetAndSetFMUstate``), else the caller uses whole-simulation differences from the start.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from ..integrate.radau import RADAU_C, RadauRun, radau_sensitivities, sensitivities_at_stops
from .me_integration import EventPartials, FmuOdeSystem
from .worker import PROBE_STEP, pack

__all__ = ["ParameterPartials", "Replay", "SensitivitiesUnavailable", "output_sensitivities", "parameter_columns",
           "parameter_partials", "probe_parameter_columns", "replay", "run_sensitivities"]

#: The level a state event's trial points are moved to lies this far inside the event's side,
#: in units of the indicator's scale ``|z_x| (1 + |x|) + |z_t| (1 + |t|)``: far above the
#: round-off of one indicator evaluation, far below the differences' own error.
_LEVEL_MARGIN = 1e3 * float(np.finfo(float).eps)

#: Newton steps of the projection onto that level (linear in the indicator: one suffices for
#: a flat surface, a curved one needs two).
_PROJECTION_STEPS = 4

#: A reinitialisation's two difference sides must be centred on the run's own to this
#: relative accuracy (``O(ε²)`` for a smooth map; a branch change gives ``O(1)``).
_CENTRED = 1e-6

#: A replay's announced time event may differ from the run's by this much relative (round-off).
_SAME_INSTANT = 1e-12


class SensitivitiesUnavailable(Exception):
    """The exact sensitivities of this run cannot be formed; the message says why and where."""


def _onto_event_side(system: FmuOdeSystem, event: EventPartials, indicator: int, t: float,
                     x: np.ndarray) -> np.ndarray:
    """``x`` moved along ``z_x`` (of the located indicator, at the event) onto the level
    ``z = z⁻ ± m`` just inside the event's side (see the module docstring); the FMU is left at
    the returned point.  Unchanged where the indicator does not depend on the states."""
    gradient = event.z_x[indicator]
    norm2 = float(gradient @ gradient)
    if norm2 == 0.0 or event.z_minus is None:
        system.at(t, x)
        return x
    z_minus = float(event.z_minus[indicator])
    scale = (float(np.abs(gradient).max()) * (1.0 + float(np.abs(event.x_minus).max(initial=0.0)))
             + abs(float(event.z_t[indicator])) * (1.0 + abs(event.t)))
    margin = _LEVEL_MARGIN * scale
    inside = z_minus > 0.0  # the domains of radau._domains
    level = z_minus + margin if inside else z_minus - margin
    for _ in range(_PROJECTION_STEPS):
        z = float(system.indicators(t, x)[indicator])
        if abs(z - level) <= 0.5 * margin:
            return x
        x = x + ((level - z) / norm2) * gradient
    z = float(system.indicators(t, x)[indicator])
    if (z > 0.0) != inside:
        raise SensitivitiesUnavailable(f"the event at t = {event.t:.9g} s: a trial point of its reinitialisation "
                                       "cannot be kept on the event's side of the indicator's surface")
    return x


def _check_centred(sides: tuple[np.ndarray, np.ndarray], x_plus: np.ndarray, where: str) -> None:
    """Raise :class:`SensitivitiesUnavailable` unless the two sides are centred on ``x_plus``."""
    mean = 0.5 * (sides[0] + sides[1])
    if not np.all(np.abs(mean - x_plus) <= _CENTRED * (1.0 + np.abs(x_plus))):
        raise SensitivitiesUnavailable(f"{where}: the reinitialisation is not smooth there (its two difference "
                                       "sides take different branches)")

@dataclasses.dataclass(frozen=True)
class Replay:
    """What one replay of a recorded run returns."""

    x0: np.ndarray            # (n,) initial states
    F: np.ndarray             # (steps, 3, n) rhs at the stage points
    left: np.ndarray          # (stops, n_out) outputs, left limits
    right: np.ndarray         # (stops, n_out) right limits
    z: np.ndarray             # (events, n_indicators) at the event points
    x_plus: np.ndarray        # (events, n) states after each event
    event_left: np.ndarray        # (events, n_out) outputs just before each event (with event stops)
    event_right: np.ndarray       # (events, n_out) just after
    directional: np.ndarray | None = None   # (steps, 3, n, k) FMU parameter columns of f
    directional_out: np.ndarray | None = None  # (stops, n_out, k) of g (left limits)


#: Steps of a compiled replay between two checks of the run's wall-time budget.
_REPLAY_CHUNK = 256


def replay(instance, system: FmuOdeSystem, run: RadauRun, refs, values, t0: float, t_end: float,
           directional_refs=(), clock=None) -> Replay:
    """Drive a restarted instance through the recorded ``run`` (see the module docstring).

    ``clock(t)``, called before every step (before every chunk of :data:`_REPLAY_CHUNK` steps
    replayed in compiled code), ends the replay when the simulation's wall-time budget is spent
    (:func:`~fmi_adjoint.integrate.radau.check_deadline`).  With the run's compiled system
    (``system.kernel``, :mod:`.me_kernel`) the steps whose end has no event are replayed in C, the
    same calls in the same order.
    """
    instance.start(list(refs) + list(system.input_refs), list(values) + system.inputs(t0), t0, t_end)
    n, n_out = system.n_states, len(system.output_refs)
    x0 = instance.initial_states() if n else np.zeros(0)
    F = np.empty((len(run.steps), 3, n))
    left = np.full((system.stops.size, n_out), np.nan)
    right = np.full_like(left, np.nan)
    z = np.zeros((len(run.events), system.n_indicators))
    x_plus = np.zeros((len(run.events), n))
    event_left = np.zeros((len(run.events), n_out))
    event_right = np.zeros_like(event_left)
    around = system.event_stops.size > 0
    k = len(directional_refs)
    D = np.zeros((len(run.steps), 3, n, k)) if k else None
    Dout = np.zeros((system.stops.size, n_out, k)) if k else None
    unknowns = list(instance.derivative_refs)
    index = {float(t): i for i, t in enumerate(system.stops)}

    def sample(t: float, x: np.ndarray, side: str) -> None:
        i = index.get(float(t))
        if i is None:
            return
        y = system.outputs_at(t, x)
        if side != "right":
            left[i] = y
            if Dout is not None:
                for j, ref in enumerate(directional_refs):
                    Dout[i, :, j] = _column(instance, system.output_refs, ref)
        if side != "left":
            right[i] = y

    sample(float(run.t[0]), run.x[0] if n else np.zeros(0), "both")
    events_at: dict[int, list[int]] = {}
    for e, event in enumerate(run.events):
        events_at.setdefault(event.node, []).append(e)
    kernel = system.kernel
    event_steps = sorted(node - 1 for node in events_at)

    def python_step(s: int, step) -> None:
        """One step in Python: the stage points, the step's end, its events."""
        h = step.t1 - step.t0
        for i, (t, y) in enumerate(zip(step.t0 + RADAU_C * h, step.x0[None, :] + step.Z)):
            F[s, i] = system.rhs(float(t), y)
            if D is not None:
                for j, ref in enumerate(directional_refs):
                    D[s, i, :, j] = _column(instance, unknowns, ref)
        node = s + 1
        x_end = run.events[events_at[node][0]].x_minus if node in events_at else run.x[node]
        system.at(step.t1, x_end)
        instance.completed_integrator_step()
        sample(step.t1, x_end, "left" if node in events_at else "both")
        for e in events_at.get(node, ()):
            event = run.events[e]
            if event.kind == "time":
                announced = instance.next_event_time
                if announced is None or abs(announced - event.t) > _SAME_INSTANT * (1.0 + abs(event.t)):
                    raise SensitivitiesUnavailable(
                        f"the time event at t = {event.t:.9g} s moves (to {announced!r} s) when a parameter "
                        "changes, and FMI gives no derivative of a time event's instant")
            system.at(event.t, event.x_minus)
            z[e] = instance.event_indicators()
            if around:
                event_left[e] = system.outputs_at(event.t, event.x_minus)
            if event.indicator is not None:
                _onto_event_side(system, system.events[e], event.indicator, event.t, event.x_minus)
            x_plus[e] = instance.event_mode_update(event.t)
            if around:
                event_right[e] = system.outputs_at(event.t, event.x_plus)
        if node in events_at:
            sample(step.t1, run.x[node], "right")

    s = 0
    while s < len(run.steps):
        step = run.steps[s]
        if clock is not None:
            clock(step.t0)
        if kernel is not None:  # the steps up to the next event node in compiled code, a chunk at a time
            stop = min(s + _REPLAY_CHUNK, next((e for e in event_steps if e >= s), len(run.steps)))
            if stop > s:
                s += kernel.replay(run, s, stop, directional_refs, F, D, left, right, Dout)
                if s == stop:
                    continue
                step = run.steps[s]  # an FMI call failed there: repeated in Python, which raises its error
        python_step(s, step)
        s += 1
    return Replay(x0=x0, F=F, left=left, right=right, z=z, x_plus=x_plus, event_left=event_left,
                  event_right=event_right, directional=D, directional_out=Dout)


def _column(instance, unknowns, ref: int) -> np.ndarray:
    """An FMU directional derivative column, NaN where the FMU refuses it (the probe drops it)."""
    try:
        return instance.directional(unknowns, ref)
    except instance.Failure:
        return np.full(len(unknowns), np.nan)


@dataclasses.dataclass(frozen=True)
class ParameterPartials:
    """Central differences of two replays per parameter (last axis: the parameters)."""

    S0: np.ndarray        # (n, p)
    Fp: np.ndarray        # (steps, 3, n, p)
    Gp_left: np.ndarray   # (stops, n_out, p)
    Gp_right: np.ndarray
    zp: np.ndarray        # (events, n_indicators, p)
    jump_p: np.ndarray    # (events, n, p)
    Gp_event_left: np.ndarray   # (events, n_out, p)
    Gp_event_right: np.ndarray


def parameter_partials(plus: list[Replay], minus: list[Replay], steps: np.ndarray, run: RadauRun,
                       ) -> ParameterPartials:
    """The partials from replays at ``x + steps`` (``plus``) and ``x - steps`` (``minus``);
    :class:`SensitivitiesUnavailable` if a reinitialisation is not centred on the run's."""
    for j, (a, b) in enumerate(zip(plus, minus)):
        for e, event in enumerate(run.events):
            _check_centred((a.x_plus[e], b.x_plus[e]), event.x_plus,
                           f"the {event.kind} event at t = {event.t:.9g} s, parameter {j + 1}")

    def diff(field: str) -> np.ndarray:
        return np.stack([(getattr(a, field) - getattr(b, field)) / (2 * d) for a, b, d in zip(plus, minus, steps)],
                        axis=-1)

    return ParameterPartials(S0=diff("x0"), Fp=diff("F"), Gp_left=diff("left"), Gp_right=diff("right"),
                             zp=diff("z"), jump_p=diff("x_plus"), Gp_event_left=diff("event_left"),
                             Gp_event_right=diff("event_right"))


def probe_parameter_columns(nominal: Replay, partials: ParameterPartials, use: list[bool], tolerance: float,
                            ) -> list[str]:
    """Per parameter with an FMU column (``use[j]``): keep it where it agrees with the replays'
    differences (relative ``tolerance``), and then put it in place of those differences in
    ``partials.Fp``.

    Returns the description of each parameter's column (written to RESULT.json) and updates
    ``use`` in place.  Only ``df/dp`` takes the FMU's column; ``dg/dp`` stays differenced.
    """
    columns = [j for j, wanted in enumerate(use) if wanted]
    notes = []
    for j in range(len(use)):
        if j not in columns or nominal.directional is None or nominal.directional_out is None:
            notes.append("finite differences of replays of the run (the FMU provides no directional derivative)")
            continue
        col = columns.index(j)
        got = np.concatenate([nominal.directional[..., col].ravel(), nominal.directional_out[..., col].ravel()])
        ref = np.concatenate([partials.Fp[..., j].ravel(), partials.Gp_left[..., j].ravel()])
        scale = max(float(np.abs(ref).max(initial=0.0)), float(np.abs(got).max(initial=0.0)))
        worst = float(np.abs(got - ref).max(initial=0.0)) / scale if scale > 0 else 0.0
        if not np.all(np.isfinite(got)):  # the FMU refused the column (NaN would slip past a zero scale)
            use[j] = False
            notes.append("finite differences of replays (the FMU refused its directional derivative)")
        elif not worst <= tolerance:
            use[j] = False
            notes.append(f"finite differences of replays (the FMU's column differs from them by {worst:.2e} "
                         "relative)")
        else:
            partials.Fp[..., j] = nominal.directional[..., col]
            notes.append(f"directional derivative (agrees with finite differences to {worst:.1e})")
    return notes


def parameter_columns(instance, system: FmuOdeSystem, run: RadauRun, refs, values, t0: float, t_end: float,
                      sensitivity: Mapping, partials: ParameterPartials, use: list[bool], clock=None,
                      nominal_columns: list[bool] | None = None) -> tuple[list[str], Replay]:
    """The FMU's parameter columns read by a replay at the nominal values (of the parameters
    ``nominal_columns``, default ``use``) and those of ``use`` probed against the replays'
    differences (:func:`probe_parameter_columns`, which updates ``use`` and ``partials``): the
    note per parameter, and the replay.  A rejected column is named in ``system.column_check``;
    the replay's calls are charged to ``system.calls``."""
    param_refs = list(sensitivity["param_refs"])
    read = list(use) if nominal_columns is None else list(nominal_columns)
    asked = list(use)
    before = instance.progress.count
    nominal = replay(instance, system, run, refs, values, t0, t_end,
                     [r for r, wanted in zip(param_refs, read) if wanted], clock=clock)
    system.calls.parameter_replay += int(instance.progress.count - before)
    probed = [j for j, wanted in enumerate(read) if wanted and use[j]]
    positions = [k for k, j in enumerate(j for j, wanted in enumerate(read) if wanted) if j in probed]
    view = dataclasses.replace(nominal, directional=_columns_of(nominal.directional, positions),
                               directional_out=_columns_of(nominal.directional_out, positions))
    notes = probe_parameter_columns(view, partials, use, float(sensitivity["probe_tolerance"]))
    derivatives = ", ".join(instance.names.get(r, f"value reference {r}") for r in instance.derivative_refs)
    for j, (wanted, kept) in enumerate(zip(asked, use)):
        if wanted and not kept:
            name = instance.names.get(param_refs[j], f"value reference {param_refs[j]}")
            system.column_check.append(f"{derivatives} by the parameter {name} ({notes[j]})")
    return notes, nominal


def run_sensitivities(instance, system: FmuOdeSystem, run: RadauRun, refs, values, t0: float, t_end: float,
                      sensitivity: Mapping, matched: Mapping[int, int], clock=None) -> dict:
    """The output sensitivities of a recorded run and the notes on the parameter columns: the
    part of a Model Exchange reply that a ``sensitivity`` request asks for (issue 15; issue 30,
    part 7).

    Every parameter is differenced by two replays (:func:`parameter_partials`), except one whose
    FMU column this worker has already checked and believed (``instance.trusted_columns``, set
    by the probe of an earlier request) in a run without events: its ``df/dp`` and ``dg/dp`` are
    the FMU's columns read by the nominal replay, and ``dx0/dp`` a central difference of the
    initialization alone, so its two replays are saved (counted in ``system.calls``).  The
    other FMU columns are probed against their replays (:func:`parameter_columns`).
    """
    replays = sensitivity["replays"]
    steps = np.asarray(sensitivity["steps"], dtype=float)
    param_refs = list(sensitivity["param_refs"])
    use = [bool(u) for u in sensitivity["directional"]]
    trusted = instance.trusted_columns
    smooth = not run.events and not system.event_stops.size and system.output_columns
    skip = [u and smooth and trusted.get(r) is True for u, r in zip(use, param_refs)]
    differenced = [j for j, skipped in enumerate(skip) if not skipped]
    plus = [replay(instance, system, run, replays[2 * j][0], replays[2 * j][1], t0, t_end, clock=clock)
            for j in differenced]
    minus = [replay(instance, system, run, replays[2 * j + 1][0], replays[2 * j + 1][1], t0, t_end, clock=clock)
             for j in differenced]
    initial: dict[int, np.ndarray] = {}
    before = instance.progress.count
    for j in (j for j, skipped in enumerate(skip) if skipped):
        sides = []
        for r, v in replays[2 * j: 2 * j + 2]:
            instance.start(list(r) + list(system.input_refs), list(v) + system.inputs(t0), t0, t_end)
            sides.append(instance.initial_states() if system.n_states else np.zeros(0))
        initial[j] = (sides[0] - sides[1]) / (2 * steps[j])
    init_calls = instance.progress.count - before
    partials = _embedded(parameter_partials(plus, minus, steps[differenced], run) if differenced else None,
                         differenced, len(use), system, run)
    notes = ["finite differences of replays of the run"] * len(use)
    if any(use):
        probed = [u and not k for u, k in zip(use, skip)]
        notes, nominal = parameter_columns(instance, system, run, refs, values, t0, t_end, sensitivity, partials,
                                           probed, clock, nominal_columns=use)
        for j, r in enumerate(param_refs):
            if use[j] and not skip[j]:
                trusted[r] = probed[j]
                use[j] = probed[j]
        columns = [j for j, u in enumerate(sensitivity["directional"]) if u]
        assert nominal.directional is not None and nominal.directional_out is not None  # any(use): read
        for j in initial:
            col = columns.index(j)
            partials.Fp[..., j] = nominal.directional[..., col]
            partials.Gp_left[..., j] = partials.Gp_right[..., j] = nominal.directional_out[..., col]
            partials.S0[:, j] = initial[j]
            notes[j] = "directional derivative (checked in an earlier run; its replays saved)"
        if initial:
            directional_calls = len(columns) * (3 * len(run.steps) + system.stops.size)
            plain_replay = system.calls.parameter_replay - directional_calls
            system.calls.skipped_replays += 2 * len(initial) * plain_replay - init_calls
    left, right = output_sensitivities(system, run, partials, matched)
    return {"dleft": pack(left), "dright": pack(right), "columns": notes, "directional": use}


def _embedded(partials: ParameterPartials | None, differenced: list[int], p: int, system: FmuOdeSystem,
              run: RadauRun) -> ParameterPartials:
    """``partials`` of the parameters ``differenced`` as the columns of all ``p`` parameters (the
    others zero until they are filled in)."""
    n, n_out, n_z, events = system.n_states, len(system.output_refs), system.n_indicators, len(run.events)
    shapes = {"S0": (n,), "Fp": (len(run.steps), 3, n), "Gp_left": (system.stops.size, n_out),
              "Gp_right": (system.stops.size, n_out), "zp": (events, n_z), "jump_p": (events, n),
              "Gp_event_left": (events, n_out), "Gp_event_right": (events, n_out)}
    fields = {}
    for name, shape in shapes.items():
        full = np.zeros((*shape, p))
        if partials is not None:
            full[..., differenced] = getattr(partials, name)
        fields[name] = full
    return ParameterPartials(**fields)


def _columns_of(array: np.ndarray | None, positions: list[int]) -> np.ndarray | None:
    return None if array is None else array[..., positions]


class FmuSensitivityInputs:
    """The partials :func:`~fmi_adjoint.integrate.radau.radau_sensitivities` asks for."""

    def __init__(self, system: FmuOdeSystem, run: RadauRun, partials: ParameterPartials):
        self.system, self.run, self.partials = system, run, partials

    def stage_jacobians(self, step_index: int) -> tuple[np.ndarray, np.ndarray]:
        return self.system.steps[step_index].J, self.partials.Fp[step_index]

    def stage_time_derivatives(self, step_index: int) -> np.ndarray:
        ft = self.system.steps[step_index].ft
        if ft is None:  # a step next to a time or step event: the FMU at its stages, now
            step = self.run.steps[step_index]
            h = step.t1 - step.t0
            ft = self.system._time_derivatives(step.t0 + RADAU_C * h, step.x0[None, :] + step.Z)
        return ft

    def indicator_directional(self, event_index: int, dt, dx, dp) -> np.ndarray:
        ev = self.system.events[event_index]
        i = self.run.events[event_index].indicator
        return ev.z_x[i] @ dx + ev.z_t[i] * np.asarray(dt) + self.partials.zp[event_index, i] @ dp

    def jump_directional(self, event_index: int, dt, dx, dp) -> np.ndarray:
        """``dΔ`` along each direction: the state part by rerunning the event iteration from the
        saved FMU state, the parameter part from the replays."""
        ev = self.system.events[event_index]
        instance = self.system.instance
        dt, dx = np.asarray(dt, dtype=float), np.asarray(dx, dtype=float)
        out = self.partials.jump_p[event_index] @ np.asarray(dp, dtype=float)
        for k in range(dx.shape[1]):
            size = max(float(np.abs(dx[:, k]).max(initial=0.0)), abs(float(dt[k])))
            if size == 0.0:
                continue
            eps = PROBE_STEP * (1.0 + float(np.abs(ev.x_minus).max(initial=0.0))) / size
            indicator = self.run.events[event_index].indicator
            sides = []
            for sign in (1.0, -1.0):
                instance.set_fmu_state(ev.snapshot)
                t = ev.t + sign * eps * float(dt[k])
                x = ev.x_minus + sign * eps * dx[:, k]
                if indicator is not None:
                    _onto_event_side(self.system, ev, indicator, t, x)
                else:
                    self.system.at(t, x)
                sides.append(instance.event_mode_update(t))
            _check_centred((sides[0], sides[1]), ev.x_plus, f"the {ev.kind} event at t = {ev.t:.9g} s")
            out[:, k] += (sides[0] - sides[1]) / (2 * eps)
        return out


def output_sensitivities(system: FmuOdeSystem, run: RadauRun, partials: ParameterPartials,
                         matched: Mapping[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """``dY/dp`` at the sample times, left and right limits: shape (stops, n_out, p).

    A stop ``i`` matched to event ``e`` (``matched``, see :func:`.me_run.match_event_rows`)
    takes the derivative of the outputs just before and after that event, whose time moves
    with the parameters: ``g_x D + g_t T + g_p`` with ``D`` the total derivative of the state
    before (``D_minus``) or after the event and ``T`` that of its time.
    """
    sens = radau_sensitivities(run, FmuSensitivityInputs(system, run, partials), partials.S0)
    D_left, D_right = sensitivities_at_stops(run, sens)
    left = np.einsum("son,snp->sop", system.gx_left, D_left) + partials.Gp_left
    right = np.einsum("son,snp->sop", system.gx_right, D_right) + partials.Gp_right
    for i, e in matched.items():
        node, around = run.events[e].node, system.event_outputs[e]
        if around.gx_left is None or around.gx_right is None or around.gt_left is None or around.gt_right is None:
            continue  # no outputs
        T = sens.T[node]
        left[i] = around.gx_left @ sens.D_minus[node] + np.outer(around.gt_left, T) + partials.Gp_event_left[e]
        right[i] = around.gx_right @ sens.D[node] + np.outer(around.gt_right, T) + partials.Gp_event_right[e]
    return left, right
