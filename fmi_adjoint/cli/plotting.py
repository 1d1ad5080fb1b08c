"""PNG figures (matplotlib, off-screen)."""

from __future__ import annotations

import os

import numpy as np

from ..costs import EngineOrderCost, FourierCost, LeastSquaresCost, PODCost
from ..files import atomic_output

__all__ = ["plot_identification", "plot_fit"]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    return plt


def _save(fig, path) -> None:
    plt = _pyplot()
    with atomic_output(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=110)
    plt.close(fig)


def _convergence(ax, cost_history) -> None:
    ax.semilogy(np.arange(len(cost_history)), cost_history, marker="o", ms=3)
    ax.set_xlabel("iteration")
    ax.set_ylabel("cost J")
    ax.set_title("convergence")
    ax.grid(True, which="both", alpha=0.3)


def plot_fit(path, cost, Y0: np.ndarray, Y1: np.ndarray, cost_history) -> None:
    """Measured, initial and identified quantities compared by a cost.

    ``Y0`` and ``Y1`` are the sampled outputs at the initial and identified values.  Time
    series for least squares, amplitude spectra (compared band shaded) for Fourier costs,
    order amplitudes over speed for engine-order costs, modal coordinates for POD costs;
    below, the cost per iteration.
    """
    plt = _pyplot()
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 7), constrained_layout=True)
    style = {"measured": dict(color="0.45", lw=1.2), "initial": dict(color="tab:red", lw=0.9, alpha=0.8),
             "identified": dict(color="tab:blue", lw=1.0, ls="--")}
    if isinstance(cost, FourierCost):
        hz = cost.coefficients.omegas / (2 * np.pi)
        curves = {"measured": cost.measured_amplitude, "initial": np.hypot(*cost.spectrum(Y0)),
                  "identified": np.hypot(*cost.spectrum(Y1))}
        marker = "o" if hz.size < 60 else None
        for label, values in curves.items():
            ax1.plot(hz, values, marker=marker, ms=3, label=label, **style[label])
        compared = hz[np.asarray(cost.weights) > 0]  # __post_init__ made the weights an array
        if compared.size < hz.size:
            ax1.axvspan(compared.min(), compared.max(), color="gold", alpha=0.25, label="compared band")
        ax1.set_xlabel("frequency [Hz]")
        ax1.set_ylabel(f"amplitude of {cost.channel}")
        ax1.set_title(f"{cost.channel}: amplitude spectrum ({cost.kind} misfit)")
    elif isinstance(cost, EngineOrderCost):
        curves = {"measured": cost.measured_amplitude, "initial": cost.amplitudes(Y0),
                  "identified": cost.amplitudes(Y1)}
        for label, values in curves.items():
            ax1.plot(cost.speeds, values, marker="o", ms=3, label=label, **style[label])
        ax1.set_xlabel("speed [rpm]")
        ax1.set_ylabel(f"order {cost.order:g} amplitude of {cost.channel}")
        ax1.set_title(f"{cost.channel}: engine order {cost.order:g} over the run-up")
    elif isinstance(cost, PODCost):
        t = cost.sample_times
        for j, mode in enumerate(cost.modes[:3]):
            suffix = f" (mode {mode})"
            ax1.plot(t, cost.measured_coordinates[:, j], label="measured" + suffix, **style["measured"])
            ax1.plot(t, cost.modal_coordinates(Y0)[:, j], label="initial" + suffix, **style["initial"])
            ax1.plot(t, cost.modal_coordinates(Y1)[:, j], label="identified" + suffix, **style["identified"])
        ax1.set_xlabel("time [s]")
        ax1.set_ylabel("modal coordinate")
        ax1.set_title(f"POD modal coordinates, modes {', '.join(map(str, cost.modes))}")
    else:
        t = cost.sample_times
        data = cost.data if isinstance(cost, LeastSquaresCost) else np.full_like(Y0, np.nan)
        ax1.plot(t, data[:, 0], label="measured", **style["measured"])
        ax1.plot(t, Y0[:, 0], label="initial", **style["initial"])
        ax1.plot(t, Y1[:, 0], label="identified", **style["identified"])
        ax1.set_xlabel("time [s]")
        ax1.set_ylabel(cost.channels[0])
        ax1.set_title(f"{cost.channels[0]}: measured and simulated")
    ax1.legend(loc="best", fontsize=8)
    ax1.grid(True, alpha=0.3)
    _convergence(ax2, cost_history)
    _save(fig, path)


def plot_identification(
    path: str | os.PathLike,
    times: np.ndarray,
    measured: np.ndarray,
    initial: np.ndarray,
    identified: np.ndarray,
    cost_history: list[float],
    channel: str,
    unit: str = "",
) -> None:
    """Measured vs simulated output (initial and identified) and the cost per iteration."""
    plt = _pyplot()
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 7), constrained_layout=True)
    ax1.plot(times, measured, color="0.6", lw=0.8, label="measured")
    ax1.plot(times, initial, color="tab:red", lw=0.8, alpha=0.7, label="initial parameters")
    ax1.plot(times, identified, color="tab:blue", lw=0.8, ls="--", label="identified parameters")
    ax1.set_xlabel("time [s]")
    ax1.set_ylabel(f"{channel} [{unit}]" if unit else channel)
    ax1.legend(loc="upper left")
    ax1.set_title(f"{channel}: measured and simulated")
    _convergence(ax2, cost_history)
    _save(fig, path)
