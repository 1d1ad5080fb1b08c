"""Guards of an identification: inputs and outcomes that give silently wrong results (issue 32, part 3).

Each guard either refuses the input (a :class:`~fmi_adjoint.errors.DataError` naming the
cause and the fix, at the front door: :func:`check_data_start` runs where the data meet the
end time, in :func:`~fmi_adjoint.identify.data_costs.build_cost`) or returns a
:class:`Notice`, a frozen value the command line prints and records in the result's
``warnings``; a notice with ``untrusted`` set makes the result's ``success`` false.  This
module never prints.

The guards, and why each decides as it does:

* **Data far from t = 0** (:func:`check_data_start`): every run starts at t = 0.  Data on a
  test bench's clock (first sample at 1234.5 s) are compared with the model's response
  1234.5 s after its start, long after the transient that carries the information: the fit
  then "converges" where the response no longer depends on the parameters.  Refused when
  the first sample lies later than both the record's own length and the model's end time
  (an offset a trimmed transient cannot explain); an explicit ``--t-end`` says the run is
  meant to cover it.  Samples before t = 0 are refused as well (the model has no response
  there).
* **Data beyond the end time** (:func:`data_notices`): past an explicit ``--t-end`` they are
  refused by ``build_cost``; without it the run is extended to the last sample, past the
  model's (or the FMU's ``DefaultExperiment``) end time: a note says so.
* **Channels of different units pooled** (:func:`data_notices`): the time-domain least
  squares of Oberpeilsteiner (2018), eq. (4.2), sums the residuals of all channels with
  the weights ``W = diag(weight_c / scale_c**2)``, and the standard errors use one residual
  variance ``s^2 = r.r / (N - n_p)`` (Bard 1974, Sec. 7-5).  Channels in different units
  (m/s^2 and m) without a scale are weighted by their numbers, and ``s^2`` mixes their
  noise: a warning names the channels, their units, and the scales (each channel's noise
  level estimated from the data) that make the residuals comparable.
* **No movement** (:func:`movement_notices`): a parameter that ends exactly at its start,
  not on a bound, and whose standard error is not available from a non-singular Fisher
  information, was not fitted: the cost does not depend on it (zero gradient: it is not in
  the dependence of the compared outputs) or is flat in it at the start.  The result is
  marked untrusted.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from ..costs import LeastSquaresCost
from ..errors import DataError
from ..text import excerpt
from .optimize import IdentificationResult
from .problem import AbstractProblem

#: Longest name or unit shown as it is in a warning.
_SHOWN = 40

__all__ = ["GuardedOptions", "GuardedTarget", "MOVEMENT_TOLERANCE", "Notice", "check_data_start", "data_notices",
           "movement_notices"]

#: A parameter whose identified value differs from its start by at most this much (relative)
#: did not move: the optimizers' steps are far larger, a zero gradient component leaves the
#: value exactly where it was (the scaling round trip may change an ulp).
MOVEMENT_TOLERANCE = 1e-12


class GuardedTarget(Protocol):
    """What the data guards read of a model or FMU (:class:`~fmi_adjoint.identify.data_costs.Target`,
    which imports this module for :func:`check_data_start`)."""

    @property
    def name(self) -> str: ...
    @property
    def output_names(self) -> tuple[str, ...]: ...
    @property
    def units(self) -> tuple[str, ...]: ...
    @property
    def t_end(self) -> float: ...
    @property
    def t_end_declared(self) -> bool: ...


class GuardedOptions(Protocol):
    """What the data guards read of the cost options (:class:`~fmi_adjoint.identify.data_costs.CostOptions`)."""

    @property
    def cost(self) -> str: ...
    @property
    def weights(self) -> dict[str, float]: ...
    @property
    def scales(self) -> dict[str, float]: ...


@dataclasses.dataclass(frozen=True)
class Notice:
    """What a guard found.

    Attributes
    ----------
    text : str
        One sentence naming the cause and the fix (printed after ``fmi-adjoint: note:`` or
        ``fmi-adjoint: warning:``).
    warning : bool
        A warning (the result may be wrong) rather than a note (a fact the user should know).
    untrusted : bool
        The result cannot be trusted: the command reports ``success: false``.
    """

    text: str
    warning: bool = False
    untrusted: bool = False

    def __post_init__(self) -> None:
        if self.untrusted and not self.warning:
            raise ValueError("an untrusted result is a warning: give warning=True with untrusted=True.")


def check_data_start(file: str, times: np.ndarray, *, model_t_end: float | None, t_end: float | None) -> None:
    """Refuse time series that start before t = 0, or far after it (see the module docstring).

    ``times`` are the sample times of ``file``, ``model_t_end`` the model's end time (None:
    not declared, e.g. an FMU without ``DefaultExperiment``), ``t_end`` the ``--t-end`` option
    (given: the run is meant to cover the offset, which is then not refused).

    Raises
    ------
    DataError
        Naming the first sample time, the record's span and the fix.
    """
    first, last = float(times[0]), float(times[-1])
    span = last - first
    if first < -1e-9 * max(span, 1e-300):
        raise DataError(f"{file}: the samples start at t = {first:g} s, before the start of every run at t = 0; "
                        f"shift the time column (add {-first:g} s) or drop the samples before t = 0.")
    if t_end is not None:
        return
    reach = max(span, model_t_end or 0.0)
    if first > reach:
        end_text = "" if model_t_end is None else f", the model's end time {model_t_end:g} s"
        raise DataError(f"{file}: the samples start at t = {first:g} s, far from the start of the run at t = 0 "
                        f"(the record spans {span:g} s{end_text}): a clock offset (times on the bench's clock?) "
                        f"compares the data with the response long after its transient. Give --time-shift start "
                        f"(subtract {first:g} s; model files) or shift the time column to start at 0; or, if the run "
                        f"must cover the {first:g} s before the first sample, state it with --t-end {last:g}.")


def data_notices(target: GuardedTarget, costs: Sequence[tuple[str, object]], *, t_end: float | None,
                 options: GuardedOptions) -> tuple[Notice, ...]:
    """Notes and warnings on the data of a problem (see the module docstring).

    ``costs`` holds each experiment's data file name and its cost (sample times in
    ``sample_times``; a time-domain least-squares cost also ``channels``), ``t_end`` the
    ``--t-end`` option, ``options`` the cost options (``--scale``, ``--weight``).
    """
    notices: list[Notice] = []
    if t_end is None and target.t_end_declared:
        for file, cost in costs:
            times = getattr(cost, "sample_times", None)
            if times is None or np.size(times) == 0:
                continue
            last = float(np.asarray(times)[-1])
            if last > target.t_end * (1 + 1e-9):
                notices.append(Notice(
                    f"{file} runs to {last:g} s, past the end time {target.t_end:g} s of {target.name}: the run is "
                    f"extended to {last:g} s, with whatever excitation the model defines after its end time; if "
                    f"the experiment ended at {target.t_end:g} s, drop the later samples (an explicit --t-end "
                    "states the end and silences this note)."))
    pooled = _pooled_units(target, costs, options)
    if pooled is not None:
        notices.append(pooled)
    return tuple(notices)


def _pooled_units(target: GuardedTarget, costs: Sequence[tuple[str, object]], options: GuardedOptions) -> Notice | None:
    """The warning on least-squares channels of different declared units without ``--scale``
    or ``--weight`` (None if there are none)."""
    if options.cost != "time":
        return None
    units = dict(zip(target.output_names, target.units))
    chosen = set(options.scales) | set(options.weights)
    channels: dict[str, list[float]] = {}
    for _, cost in costs:
        names = getattr(cost, "channels", None)
        if names is None:
            continue
        levels = _noise_levels(cost)
        # Channels weighted by their noise level (issue 26, part 5) are not pooled.
        weighting = cost.weighting if isinstance(cost, LeastSquaresCost) else None
        for k, name in enumerate(names):
            if weighting is not None and weighting[k].startswith("noise"):
                continue
            if name not in chosen and units.get(name):
                channels.setdefault(name, []).append(levels[k])
    if len({units[name] for name in channels}) < 2:
        return None
    listed = ", ".join(f"{_plain(name)} [{_plain(units[name])}]" for name in channels)
    scales = " ".join(f"--scale {name}={_level(values):.3g}" for name, values in channels.items())
    return Notice(f"the channels {listed} have different units and are pooled into one residual variance "
                  "without weights: the fit weighs them by their numbers and the standard errors are wrong. Give "
                  f"each a scale in its unit, e.g. its noise level estimated from the data: {scales}.",
                  warning=True)


def _plain(text: str) -> str:
    """A name or unit read from a model file or an FMU as shown in a warning: as it is when short
    and printable, else quoted and cut (an FMU's unit is not checked on reading)."""
    return text if len(text) <= _SHOWN and text.isprintable() else excerpt(text, _SHOWN)


def _noise_levels(cost) -> list[float]:
    """Each channel's noise standard deviation estimated from the data, else its RMS value
    (noise-free data); NaN where neither is known."""
    data = np.asarray(getattr(cost, "data", np.zeros((0, 0))), dtype=float)
    try:
        variances = np.asarray(cost.noise_variances(), dtype=float)
    except (AttributeError, DataError):
        variances = np.zeros(data.shape[1] if data.ndim == 2 else 0)
    levels = []
    for k in range(len(cost.channels)):
        sigma = math.sqrt(variances[k]) if k < variances.size and variances[k] > 0 else 0.0
        if sigma == 0.0 and data.ndim == 2 and data.shape[0]:
            sigma = float(np.sqrt(np.mean(data[:, k] ** 2)))
        levels.append(sigma if sigma > 0 else math.nan)
    return levels


def _level(values: list[float]) -> float:
    known = [v for v in values if math.isfinite(v)]
    return float(np.median(known)) if known else 1.0


def movement_notices(problem: AbstractProblem, result: IdentificationResult) -> tuple[Notice, ...]:
    """The warning on parameters that did not move from their start (see the module docstring).

    Skipped: parameters on a bound (reported as such), parameters already reported as not
    determined by the outputs (``result.unidentifiable``), parameters with a standard error
    (a non-singular Fisher information: a stationary start is then the minimum), and a start
    that fits the data exactly (zero cost).  For the rest the gradient at the start (one
    more evaluation, only then) says why: zero, or negligible against the cost.
    """
    if not result.cost_initial > 0:
        return ()
    std = result.std_errors or [None] * len(result.names)
    skip = set(result.active_bounds) | set(result.unidentifiable)
    stuck = [k for k, name in enumerate(result.names)
             if name not in skip and std[k] is None
             and abs(float(result.parameters[k]) - float(result.initial[k]))
             <= MOVEMENT_TOLERANCE * abs(float(result.initial[k]))]
    if not stuck:
        return ()
    start = problem.evaluate(np.asarray(result.initial, dtype=float), problem.gradient_method)
    reasons = []
    for k in stuck:
        g = float(start.gradient[k])
        # dJ/dp times the parameter's size, against the cost: the relative change of J when
        # the parameter changes by its own size (to first order).
        size = abs(float(result.initial[k])) or 1.0
        relative = abs(g) * size / max(abs(start.J), 1e-300)
        if g == 0.0:
            reasons.append(f"{result.names[k]} (zero gradient: the compared outputs do not depend on it)")
        else:
            reasons.append(f"{result.names[k]} (the cost is flat in it at the start: |dJ/dp| p / J = "
                           f"{relative:.1e})")
    several = len(stuck) > 1
    if len(stuck) == len(result.names):
        head = f"the fit did not move from its start: {', '.join(reasons)}"
    else:
        head = f"{', '.join(reasons)} did not move from {'their start values' if several else 'its start value'}"
    return (Notice(f"{head}; {'those values are' if several else 'that value is'} the start, not fitted. Drop such a "
                   "parameter from --params (fix it with --set), or give data that depend on it (another output, a "
                   "longer or differently excited record, times from t = 0).", warning=True, untrusted=True),)

