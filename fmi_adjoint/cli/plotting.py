"""PNG figures (matplotlib, off-screen)."""

from __future__ import annotations

import os

import numpy as np

from ..files import atomic_output

__all__ = ["plot_identification"]


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
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 7), constrained_layout=True)
    ax1.plot(times, measured, color="0.6", lw=0.8, label="measured")
    ax1.plot(times, initial, color="tab:red", lw=0.8, alpha=0.7, label="initial parameters")
    ax1.plot(times, identified, color="tab:blue", lw=0.8, ls="--", label="identified parameters")
    ax1.set_xlabel("time [s]")
    ax1.set_ylabel(f"{channel} [{unit}]" if unit else channel)
    ax1.legend(loc="upper left")
    ax1.set_title(f"{channel}: measured and simulated")
    ax2.semilogy(np.arange(len(cost_history)), cost_history, marker="o", ms=3)
    ax2.set_xlabel("iteration")
    ax2.set_ylabel("cost J")
    ax2.set_title("convergence")
    ax2.grid(True, which="both", alpha=0.3)
    with atomic_output(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=110)
    plt.close(fig)
