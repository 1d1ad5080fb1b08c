"""Guards of the data: bench-clock data, data past the end time, channels of different units pooled.

:mod:`fmi_adjoint.identify.guards` explains each rule and its threshold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...costs import LeastSquaresCost
from ...errors import DataError
from .notice import GuardedTarget, GuardedOptions, Notice, plain


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


def check_data_end(file: str, times: np.ndarray, *, target: str, model_t_end: float | None,
                   t_end: float | None) -> None:
    """Refuse samples later than the model's end time without ``--t-end`` (see the module docstring).

    ``times`` are the sample times of ``file`` (after its preprocessing), ``target`` the model's
    (or FMU's) name, ``model_t_end`` its end time (None: not declared, nothing to exceed),
    ``t_end`` the ``--t-end`` option (given: :func:`~fmi_adjoint.identify.data_costs.build_cost`
    checks the data against it).

    Raises
    ------
    DataError
        Naming the last sample time, the end time and the fixes.
    """
    if t_end is not None or model_t_end is None or np.size(times) == 0:
        return
    last = float(times[-1])
    if last > model_t_end * (1 + 1e-9):
        raise DataError(f"{file}: the last sample at t = {last:g} s lies past the end time {model_t_end:g} s of "
                        f"{target}, and the run would be extended with whatever excitation the model defines after "
                        f"its end. Give --t-end {last:g} if the experiment ran that long, or keep the samples up to "
                        f"{model_t_end:g} s (--data {file}@window=0:{model_t_end:g} for a model file, or trim the "
                        "data).")


def data_notices(target: GuardedTarget, costs: Sequence[tuple[str, object]], *,
                 options: GuardedOptions) -> tuple[Notice, ...]:
    """Warnings on the data of a problem (see the module docstring): channels of different
    units pooled without weights.

    ``costs`` holds each experiment's data file name and its cost (a time-domain least-squares
    cost has ``channels``), ``options`` the cost options (``--scale``, ``--weight``).
    """
    pooled = _pooled_units(target, costs, options)
    return () if pooled is None else (pooled,)


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
    listed = ", ".join(f"{plain(name)} [{plain(units[name])}]" for name in channels)
    scales = " ".join(f"--scale {name}={_level(values):.3g}" for name, values in channels.items())
    return Notice(f"the channels {listed} have different units and are pooled into one residual variance "
                  "without weights: the fit weighs them by their numbers and the standard errors are wrong. Give "
                  f"each a scale in its unit, e.g. its noise level estimated from the data: {scales}.",
                  warning=True)


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
