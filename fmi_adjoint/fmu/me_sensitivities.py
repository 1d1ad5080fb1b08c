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
  replays' differences (:func:`probe_parameter_columns`) and keeps a column only if it agrees.
* the reinitialisation's state derivative is taken along the tangent direction the recursion
  asks for (``jump_directional``): from the FMU state saved just before event mode, the
  event iteration is rerun at ``(t + ε dt, x⁻ + ε dx)`` on both sides.  Along that direction
  the point stays on the event surface to first order, so the FMU takes the same branch.

Limitations, said plainly: the derivative of a *time event's* instant with respect to the
parameters is taken as zero (FMI gives no way to differentiate ``nextEventTime``); events
need an FMU that can get and set its state (``canGetAndSetFMUstate``), else the caller uses
whole-simulation differences.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..integrate.radau import RADAU_C, RadauRun, radau_sensitivities, sensitivities_at_stops
from .me_integration import FmuOdeSystem
from .worker import PROBE_STEP

__all__ = ["ParameterPartials", "Replay", "output_sensitivities", "parameter_partials", "probe_parameter_columns",
           "replay"]

@dataclasses.dataclass(frozen=True)
class Replay:
    """What one replay of a recorded run returns."""

    x0: np.ndarray            # (n,) initial states
    F: np.ndarray             # (steps, 3, n) rhs at the stage points
    left: np.ndarray          # (stops, n_out) outputs, left limits
    right: np.ndarray         # (stops, n_out) right limits
    z: np.ndarray             # (events, n_indicators) at the event points
    x_plus: np.ndarray        # (events, n) states after each event
    directional: np.ndarray | None = None   # (steps, 3, n, k) FMU parameter columns of f
    directional_out: np.ndarray | None = None  # (stops, n_out, k) of g (left limits)


def replay(instance, system: FmuOdeSystem, run: RadauRun, refs, values, t0: float, t_end: float,
           directional_refs=()) -> Replay:
    """Drive a restarted instance through the recorded ``run`` (see the module docstring)."""
    instance.start(list(refs) + list(system.input_refs), list(values) + system.inputs(t0), t0, t_end)
    n, n_out = system.n_states, len(system.output_refs)
    x0 = instance.initial_states() if n else np.zeros(0)
    F = np.empty((len(run.steps), 3, n))
    left = np.full((system.stops.size, n_out), np.nan)
    right = np.full_like(left, np.nan)
    z = np.zeros((len(run.events), system.n_indicators))
    x_plus = np.zeros((len(run.events), n))
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
    for s, step in enumerate(run.steps):
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
            system.at(event.t, event.x_minus)
            z[e] = instance.event_indicators()
            x_plus[e] = instance.event_mode_update(event.t)
        if node in events_at:
            sample(step.t1, run.x[node], "right")
    return Replay(x0=x0, F=F, left=left, right=right, z=z, x_plus=x_plus, directional=D, directional_out=Dout)


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


def parameter_partials(plus: list[Replay], minus: list[Replay], steps: np.ndarray) -> ParameterPartials:
    """The partials from replays at ``x + steps`` (``plus``) and ``x - steps`` (``minus``)."""
    def diff(field: str) -> np.ndarray:
        return np.stack([(getattr(a, field) - getattr(b, field)) / (2 * d) for a, b, d in zip(plus, minus, steps)],
                        axis=-1)

    return ParameterPartials(S0=diff("x0"), Fp=diff("F"), Gp_left=diff("left"), Gp_right=diff("right"),
                             zp=diff("z"), jump_p=diff("x_plus"))


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
        if not worst <= tolerance:  # NaN: the FMU refused the column
            use[j] = False
            notes.append(f"finite differences of replays (the FMU's column differs from them by {worst:.2e} "
                         "relative)")
        else:
            partials.Fp[..., j] = nominal.directional[..., col]
            notes.append(f"directional derivative (agrees with finite differences to {worst:.1e})")
    return notes


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
            sides = []
            for sign in (1.0, -1.0):
                instance.set_fmu_state(ev.snapshot)
                t = ev.t + sign * eps * float(dt[k])
                self.system.at(t, ev.x_minus + sign * eps * dx[:, k])
                sides.append(instance.event_mode_update(t))
            out[:, k] += (sides[0] - sides[1]) / (2 * eps)
        return out


def output_sensitivities(system: FmuOdeSystem, run: RadauRun, partials: ParameterPartials,
                         ) -> tuple[np.ndarray, np.ndarray]:
    """``dY/dp`` at the sample times, left and right limits: shape (stops, n_out, p)."""
    sens = radau_sensitivities(run, FmuSensitivityInputs(system, run, partials), partials.S0)
    D_left, D_right = sensitivities_at_stops(run, sens)
    left = np.einsum("son,snp->sop", system.gx_left, D_left) + partials.Gp_left
    right = np.einsum("son,snp->sop", system.gx_right, D_right) + partials.Gp_right
    return left, right
