"""PNG figures of a fit (matplotlib, off-screen): ``identify --plot`` and the demo.

Every compared quantity of every experiment (:func:`fmi_adjoint.report.signals.compare_fit`:
the numbers the HTML report shows too) gets a panel in a grid, the measured, initial and
identified curves with the channel's unit, and its residual (measured - identified) in a
panel below; under the grid the cost over the whole history, each stage of a staged fit
marked where it begins.  Tick labels never carry an offset ("+1.283e1" on the axis, or
"1.28326x10^1" on every log tick): plain numbers, a linear cost axis where the history spans
less than two decades.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..files import atomic_output
from ..report.signals import ChannelComparison

__all__ = ["FitFigure", "fit_figure", "plot_comparisons"]

#: The cost axis is logarithmic where the history spans at least this ratio (a narrower span
#: on a log axis gets minor tick labels such as "1.28326x10^1").
LOG_SPAN = 100.0
#: Experiments drawn as columns (each a column of its channels) up to this many; more are
#: laid out row by row, :data:`COLUMNS` panels wide.
EXPERIMENT_COLUMNS = 4
COLUMNS = 3
#: A series with fewer points is drawn with markers.
MARKERS_BELOW = 60

_STYLE = {
    "initial": dict(color="tab:red", lw=0.9, alpha=0.75, zorder=1),
    # The measured curve wide and under the identified one, so both stay visible where they agree.
    "measured": dict(color="0.35", lw=2.2, alpha=0.6, zorder=2),
    "identified": dict(color="tab:blue", lw=1.0, ls="--", zorder=3),
}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    return plt


@dataclasses.dataclass(frozen=True, eq=False)
class FitFigure:
    """A fit figure and its axes: one signal and one residual axis per compared quantity (in
    the order of the comparisons), and the convergence axis."""

    figure: Any
    signal_axes: tuple[Any, ...]
    residual_axes: tuple[Any, ...]
    convergence_axes: Any
    #: (grid rows, grid columns) of the signal panels.
    grid: tuple[int, int]


def _plain_ticks(axis) -> None:
    """Plain tick labels on a linear ``axis``: no offset, scientific only for extreme magnitudes
    (then one multiplier at the axis end, not on every tick)."""
    from matplotlib.ticker import ScalarFormatter

    formatter = ScalarFormatter(useOffset=False, useMathText=True)
    formatter.set_powerlimits((-4, 6))
    axis.set_major_formatter(formatter)


def _cells(comparisons: Sequence[ChannelComparison]) -> tuple[list[tuple[int, int]], int, int]:
    """Grid position of each comparison, and the grid's rows and columns: an experiment per
    column (its channels below each other) for 2 to :data:`EXPERIMENT_COLUMNS` experiments,
    else row by row."""
    experiments = list(dict.fromkeys(c.experiment for c in comparisons))
    if 2 <= len(experiments) <= EXPERIMENT_COLUMNS:
        seen: dict[str, int] = {}
        cells = []
        for c in comparisons:
            row = seen[c.experiment] = seen.get(c.experiment, -1) + 1
            cells.append((row, experiments.index(c.experiment)))
        return cells, max(seen.values()) + 1, len(experiments)
    columns = max(1, min(COLUMNS, len(comparisons)))
    rows = max(1, math.ceil(len(comparisons) / columns))
    return [(k // columns, k % columns) for k in range(len(comparisons))], rows, columns


def _literal(text: object) -> str:
    """``text`` for a matplotlib title, label or legend entry, every ``$`` literal (names and
    units come from model files: "$" would start mathtext, and an unbalanced formula fails)."""
    return str(text).replace("$", r"\$")


def _signal(ax, res_ax, c: ChannelComparison, legend: bool, initial_shown: bool = True) -> None:
    marker = "o" if c.x.size < MARKERS_BELOW else None
    if initial_shown:
        ax.plot(c.x, c.initial, marker=marker, ms=3, label="initial", **_STYLE["initial"])
    if c.measured is not None:
        ax.plot(c.x, c.measured, marker=marker, ms=4, label="measured", **_STYLE["measured"])
    ax.plot(c.x, c.identified, marker=marker, ms=3, label="identified", **_STYLE["identified"])
    if c.weights is not None and np.any(c.weights > 0):
        compared = c.x[c.weights > 0]
        for a in (ax, res_ax):
            a.axvspan(compared.min(), compared.max(), color="gold", alpha=0.2,
                      label="compared band" if a is ax else None)
    ax.set_title(_literal(c.title), fontsize=9)
    ax.set_ylabel(_literal(c.y_label), fontsize=8)
    ax.tick_params(labelbottom=False, labelsize=7)
    ax.grid(True, alpha=0.3)
    if legend:
        ax.legend(loc="best", fontsize=7)
    residual = c.residual
    if residual is None:
        res_ax.text(0.5, 0.5, "no measured values", ha="center", va="center", fontsize=8, color="0.4",
                    transform=res_ax.transAxes)
    else:
        res_ax.plot(c.x, residual, color="0.25", lw=0.8, marker=marker, ms=2)
    res_ax.axhline(0.0, color="0.6", lw=0.6)
    res_ax.set_ylabel(_literal(f"residual [{c.unit}]" if c.unit else "residual"), fontsize=8)
    res_ax.set_xlabel(_literal(c.x_label), fontsize=8)
    res_ax.tick_params(labelsize=7)
    res_ax.grid(True, alpha=0.3)
    for a in (ax, res_ax):
        _plain_ticks(a.xaxis)
        _plain_ticks(a.yaxis)


def _convergence(ax, cost_history: Sequence[float], stages: Sequence[tuple[int, str]]) -> None:
    J = np.asarray(cost_history, dtype=float)
    k = np.arange(J.size)
    good = np.isfinite(J)
    positive = good & (J > 0)
    log = bool(np.any(positive)) and np.all(positive[good]) and J[good].max() >= LOG_SPAN * J[good].min()
    ax.plot(k[good], J[good], marker="o", ms=3, lw=1.0)
    ax.set_xlabel("iteration (all stages)" if len(stages) > 1 else "iteration", fontsize=8)
    ax.set_ylabel("cost J", fontsize=8)
    ax.set_title("convergence", fontsize=9)
    ax.tick_params(labelsize=7)
    if log:
        from matplotlib.ticker import LogLocator, NullFormatter

        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10))
        ax.yaxis.set_minor_formatter(NullFormatter())
    else:
        _plain_ticks(ax.yaxis)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    _plain_ticks(ax.xaxis)
    ax.grid(True, which="both", alpha=0.3)
    if len(stages) > 1:
        # Each stage shaded in turn, a dotted line where it begins, its number at the bottom; the
        # names in the title (long names inside the panel would cover the curve).
        transform = ax.get_xaxis_transform()
        ends = [start for start, _ in stages[1:]] + [max(J.size, stages[-1][0] + 1)]
        for number, ((start, _), end) in enumerate(zip(stages, ends), start=1):
            if number % 2 == 0:
                ax.axvspan(start - 0.5, end - 0.5, color="0.92", zorder=0)
            if start > 0:
                ax.axvline(start - 0.5, color="0.3", ls=":", lw=1.0)
            ax.text(start - 0.35, 0.03, str(number), va="bottom", ha="left", fontsize=8, fontweight="bold",
                    color="0.25", transform=transform)
        names = "; ".join(f"{number} {name}" for number, (_, name) in enumerate(stages, start=1))
        ax.set_title(_literal(f"convergence over all stages ({names})"), fontsize=9, wrap=True)


def fit_figure(comparisons: Sequence[ChannelComparison], cost_history: Sequence[float], *,
               stages: Sequence[tuple[int, str]] = (), initial_shown: bool = True) -> FitFigure:
    """The figure of a fit (open: the caller saves and closes it, see :func:`plot_comparisons`).

    ``comparisons`` from :func:`~fmi_adjoint.report.signals.compare_fit`; ``stages``: where
    each stage begins in ``cost_history`` and its name
    (:func:`~fmi_adjoint.identify.strategies.stage_starts`), marked when there are two or more;
    ``initial_shown`` False: the initial curves are left out (not the start values', see
    :func:`~fmi_adjoint.report.signals.compare_fit_or_identified`).  Names and units are drawn
    as they are (a ``$`` starts no formula).
    """
    if not comparisons:
        raise ValueError("fit_figure: no compared quantity to draw; give compare_fit's comparisons.")
    plt = _pyplot()
    cells, rows, columns = _cells(comparisons)
    fig = plt.figure(figsize=(max(9.0, 5.0 * columns), 3.4 * rows + 2.8), layout="constrained")
    grid = fig.add_gridspec(rows + 1, columns, height_ratios=[1.0] * rows + [0.75])
    signal_axes, residual_axes = [], []
    for index, (c, cell) in enumerate(zip(comparisons, cells)):
        inner = grid[cell].subgridspec(2, 1, height_ratios=[3.0, 1.2], hspace=0.05)
        ax = fig.add_subplot(inner[0])
        res_ax = fig.add_subplot(inner[1], sharex=ax)
        _signal(ax, res_ax, c, legend=index == 0, initial_shown=initial_shown)
        signal_axes.append(ax)
        residual_axes.append(res_ax)
    conv = fig.add_subplot(grid[rows, :])
    _convergence(conv, cost_history, stages)
    return FitFigure(fig, tuple(signal_axes), tuple(residual_axes), conv, (rows, columns))


def plot_comparisons(path: str | os.PathLike, comparisons: Sequence[ChannelComparison], cost_history: Sequence[float],
                     *, stages: Sequence[tuple[int, str]] = (), initial_shown: bool = True) -> FitFigure:
    """Write the figure of :func:`fit_figure` to ``path`` (PNG, all or nothing) and close it;
    returns its layout (the axes stay readable)."""
    plt = _pyplot()
    drawn = fit_figure(comparisons, cost_history, stages=stages, initial_shown=initial_shown)
    try:
        with atomic_output(path, "wb") as handle:
            drawn.figure.savefig(handle, format="png", dpi=110)
    finally:
        plt.close(drawn.figure)
    return drawn
