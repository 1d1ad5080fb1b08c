"""Which gradient path and which interface an FMU problem uses, and why (written to RESULT.json).

``auto`` takes the path with the fewest expected model evaluations per gradient:

* ``adjoint``: an FMU exported by fmi-adjoint (its embedded model, trusted after its binary
  matched): one forward run and one adjoint sweep, whatever the number of parameters;
* ``sensitivity``: a Model Exchange interface: one Radau run that also records the stage
  Jacobians, plus two *replays* per parameter (one right-hand side per stage point, no
  Newton iterations, no Jacobians).  Per step that is about ``(2n + 9) + 6n + 6p``
  right-hand sides against ``(1 + 2p)(2n + 9)`` for differences of whole runs (``n``
  states, ``p`` parameters; ``2n`` for a differenced Jacobian, about 9 for the Newton
  iterations of the three stages).  Events need an FMU that can get and set its state;
* ``fd``: anything else: central differences of whole simulations, in parallel.
"""

from __future__ import annotations

import dataclasses

from ..errors import FmuError
from .archive import FmuArchive

__all__ = ["GRADIENT_PATHS", "INTERFACE_CHOICES", "GradientChoice", "choose_gradient", "choose_interface",
           "fallback_note"]

GRADIENT_PATHS = ("auto", "adjoint", "sensitivity", "fd")
INTERFACE_CHOICES = ("auto", "me", "cs")
_INTERFACE = {"me": "ModelExchange", "cs": "CoSimulation"}


@dataclasses.dataclass(frozen=True)
class GradientChoice:
    """Which gradient path is used, and why; and the interface (written to RESULT.json).

    ``notes``: what the user should know about the choice, one line each without the
    ``fmi-adjoint: note:`` prefix (the command line prints them; not part of RESULT.json), e.g.
    that an FMU presenting itself as exported by fmi-adjoint is identified through its binary.
    ``fallback``: when ``--gradient auto`` ended in finite differences without being asked for
    them, the line that says so, why and at what cost (:func:`fallback_note`; the command line
    prints it with the result), else empty.
    """

    method: str
    reason: str
    interface: str | None = None
    interface_reason: str = ""
    notes: tuple[str, ...] = ()
    fallback: str = ""

    def to_json(self) -> dict:
        out = {"method": self.method, "reason": self.reason}
        if self.interface is not None:
            out["interface"] = self.interface
            out["interface_reason"] = self.interface_reason
        return out

    def with_interface(self, interface: str, reason: str) -> GradientChoice:
        return dataclasses.replace(self, interface=interface, interface_reason=reason)


def _events_need_state(archive: FmuArchive) -> str | None:
    """Why the sensitivity path cannot differentiate this FMU's events (None if it can)."""
    if archive.number_of_event_indicators and not archive.can_get_and_set_state:
        return (f"{archive.number_of_event_indicators} event indicators and no FMU-state support "
                "(canGetAndSetFMUstate), which differentiating the reinitialisation at events needs")
    return None


def _expected_evaluations(n: int, p: int) -> tuple[int, int]:
    """Right-hand sides per step: (sensitivity path, whole-run differences); see the module docstring."""
    run = 2 * n + 9
    return run + 6 * n + 6 * p, (1 + 2 * p) * run


def choose_gradient(archive: FmuArchive, requested: str, interface: str, has_inputs: bool,
                    n_params: int) -> GradientChoice:
    """The gradient path for ``requested`` (one of :data:`GRADIENT_PATHS`)."""
    if requested not in GRADIENT_PATHS:
        raise FmuError(f"--gradient {requested!r} is not one of {', '.join(GRADIENT_PATHS)}.")
    if requested == "adjoint":
        if archive.native is None and archive.native_distrust:
            raise FmuError(f"{archive.path.name}: --gradient adjoint: {archive.native_distrust}, so the embedded "
                           "model is not trusted; use --gradient fd (through the binary), or re-export it.")
        if archive.native is None:
            raise FmuError(f"{archive.path.name}: --gradient adjoint needs an FMU exported by fmi-adjoint "
                           f"(with resources/model.toml); use {_usable(archive)}.")
        if has_inputs:
            raise FmuError("--gradient adjoint: the embedded model treats inputs as constants and cannot follow "
                           "time-varying --inputs; use --gradient fd.")
        return GradientChoice("adjoint", "requested: native discrete adjoint of the model embedded in the FMU")
    can_sense = archive.model_exchange and interface != "cs"
    why_not = _events_need_state(archive)
    if requested == "sensitivity":
        if not can_sense:
            raise FmuError(f"{archive.path.name}: --gradient sensitivity needs the Model Exchange interface"
                           f"{', which this FMU lacks' if not archive.model_exchange else ' (not --interface cs)'}; "
                           "use --gradient fd.")
        if why_not:
            raise FmuError(f"{archive.path.name}: --gradient sensitivity: the FMU has {why_not}; use --gradient fd.")
        return GradientChoice("sensitivity", "requested: exact sensitivities of the adaptive Radau IIA run")
    if requested == "fd":
        return GradientChoice("fd", "requested: central finite differences of whole simulations")
    # auto: archive.native builds the embedded model to check the binary: only asked when it matters.
    if not has_inputs and interface == "auto" and archive.native is not None:
        return GradientChoice("adjoint", f"exported by {archive.native.get('generator')} (resources/model.toml): "
                              "native discrete adjoint of the embedded model, exact, one forward and one adjoint "
                              "run whatever the number of parameters")
    if can_sense and not why_not:
        n = archive.n_states
        sens, fd = _expected_evaluations(n, n_params)
        return GradientChoice("sensitivity", f"Model Exchange interface: exact sensitivities of the Radau IIA run "
                              f"need about {sens} right-hand sides per step against {fd} for differences of whole "
                              f"runs ({n} states, {n_params} parameters)")
    why = ("inputs vary in time, which the embedded model cannot follow" if archive.native is not None and has_inputs
           else f"the Model Exchange interface has {why_not}" if why_not
           else "--interface cs" if interface == "cs" and archive.model_exchange
           else "no Model Exchange interface")
    reason = f"{why}: central finite differences of whole simulations, in parallel"
    # Not asked for (--interface cs is), and a better path exists (the embedded model's adjoint,
    # the Model Exchange sensitivities): said with the result, with its cost (issue 30, part 4).
    # An FMU with Co-Simulation only has no other path: RESULT.json's reason says so.
    better = archive.native is not None or archive.model_exchange
    fallback = fallback_note(archive, why, n_params) if interface == "auto" and better else ""
    return GradientChoice("fd", reason, fallback=fallback)


def fallback_note(archive: FmuArchive, why: str, n_params: int) -> str:
    """The note that ``--gradient auto`` fell back to finite differences: why, and what it costs
    (central differences: two whole runs per parameter for each gradient, besides the nominal run),
    and what would avoid it."""
    runs = 2 * n_params
    instead = ("the native adjoint of the embedded model (one forward and one adjoint run) needs inputs that are "
               "constant in time" if archive.native is not None
               else "the exact sensitivities of the Model Exchange interface cost about one run" if
               archive.model_exchange else "")
    plural = "s" if n_params != 1 else ""
    return (f"{archive.path.name}: gradients by central finite differences ({why}): {runs} extra whole "
            f"simulations per gradient ({n_params} parameter{plural} x 2)" + (f"; {instead}" if instead else "") + ".")


def _usable(archive: FmuArchive) -> str:
    return "--gradient auto, sensitivity or fd" if archive.model_exchange else "--gradient auto or fd"


def choose_interface(archive: FmuArchive, requested: str, method: str,
                     event_row: float | None = None) -> tuple[str, str]:
    """The interface (FMI name) and why, for ``--interface`` ``requested`` and the gradient path.

    ``event_row``: a time the data repeats (the left and right limit at an event), if any.
    Co-Simulation gives one value per communication point, so it cannot meet both rows: auto
    then takes Model Exchange, and Co-Simulation is refused, naming what works.
    """
    if requested not in INTERFACE_CHOICES:
        raise FmuError(f"--interface {requested!r} is not one of {', '.join(INTERFACE_CHOICES)}.")
    if requested != "auto":
        name = _INTERFACE[requested]
        if not (archive.model_exchange if requested == "me" else archive.co_simulation):
            other = "cs" if requested == "me" else "me"
            raise FmuError(f"{archive.path.name}: --interface {requested}: the FMU has no {name} interface with a "
                           f"binary for this platform; use --interface {other} or auto.")
        chosen, why = name, f"requested (--interface {requested})"
    elif method == "sensitivity":
        chosen, why = "ModelExchange", "the sensitivity path integrates the Model Exchange interface"
    elif event_row is not None and archive.model_exchange:
        chosen, why = "ModelExchange", (f"the data repeats the time {event_row:.9g} s (the limits at an event), which "
                                        "only Model Exchange gives")
    elif archive.co_simulation:
        chosen, why = "CoSimulation", "Co-Simulation: the FMU's own solver"
    else:
        chosen, why = "ModelExchange", "the FMU has only a Model Exchange interface"
    if chosen == "CoSimulation" and event_row is not None:
        fix = ("use --interface me" if archive.model_exchange
               else "keep only the second row (the value after the event) of each repeated time")
        raise FmuError(f"{archive.path.name}: the data repeats the time {event_row:.9g} s (the left and right limit "
                       f"at an event); Co-Simulation gives one value per communication point, so it cannot meet "
                       f"both rows: {fix}.")
    return chosen, why
