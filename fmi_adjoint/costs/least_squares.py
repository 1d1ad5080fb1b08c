"""Weighted least squares in the time domain (Oberpeilsteiner 2018, eq. (4.2))."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import DataError
from .base import AbstractCost, CostValue

__all__ = ["trapezoidal_weights", "LeastSquaresCost"]


def trapezoidal_weights(times: np.ndarray) -> np.ndarray:
    """Weights ``eta_i`` of the trapezoidal rule on the (possibly uneven) sample times."""
    times = np.asarray(times, dtype=float)
    if times.size < 2:
        raise DataError("a least-squares cost needs at least two sample times.")
    dt = np.diff(times)
    eta = np.zeros_like(times)
    eta[:-1] += dt / 2
    eta[1:] += dt / 2
    return eta


@dataclasses.dataclass(frozen=True, eq=False)
class LeastSquaresCost(AbstractCost):
    """``J = 1/2 sum_i eta_i (y_i - ybar_i)^T W (y_i - ybar_i)``.

    ``eta_i`` are trapezoidal weights of the sample times, so ``J`` approximates
    ``1/2 int (y - ybar)^T W (y - ybar) dt``; ``W = diag(weight_c / scale_c**2)``.

    Attributes
    ----------
    sample_times : numpy.ndarray, shape (n_samples,)
        Strictly increasing.
    data : numpy.ndarray, shape (n_samples, n_channels)
        Measured outputs.
    channels : tuple of str
        Output names, one per column of ``data``.
    weights, scales : numpy.ndarray, shape (n_channels,)
        Per-channel weights and scales (a scale makes channels of different units
        comparable: the residual is divided by it).
    """

    sample_times: np.ndarray
    data: np.ndarray
    channels: tuple[str, ...]
    weights: np.ndarray | None = None
    scales: np.ndarray | None = None

    def __post_init__(self) -> None:
        ts = np.asarray(self.sample_times, dtype=float)
        data = np.asarray(self.data, dtype=float)
        if ts.ndim != 1:
            raise DataError(f"sample_times must be one-dimensional, got shape {ts.shape}.")
        if data.ndim == 1:
            data = data[:, None]
        channels = tuple(self.channels)
        if not channels:
            raise DataError("the data have no measured channel (only a time column); add at least one column "
                            "named like a model output.")
        if data.shape != (ts.size, len(channels)):
            raise DataError(
                f"data has shape {data.shape}; expected ({ts.size} samples, {len(channels)} channels)."
            )
        if not np.all(np.isfinite(ts)) or not np.all(np.isfinite(data)):
            raise DataError("the data contain NaN or infinite values; remove or fill those rows.")
        if np.any(np.diff(ts) <= 0):
            raise DataError("the sample times are not strictly increasing; sort the data and drop duplicates.")
        nc = len(channels)
        weights = np.ones(nc) if self.weights is None else np.asarray(self.weights, dtype=float).ravel()
        scales = np.ones(nc) if self.scales is None else np.asarray(self.scales, dtype=float).ravel()
        for what, values in (("weights", weights), ("scales", scales)):
            if values.size != nc:
                raise DataError(f"{what}: {values.size} value(s) given for {nc} channel(s) {list(channels)}; "
                                "give one per channel.")
        if np.any(weights < 0) or not np.all(np.isfinite(weights)):
            raise DataError(f"channel weights {weights.tolist()} must be finite and non-negative.")
        if np.any(scales <= 0) or not np.all(np.isfinite(scales)):
            raise DataError(f"channel scales {scales.tolist()} must be finite and positive.")
        with np.errstate(over="ignore", divide="ignore"):
            factors_squared = trapezoidal_weights(ts)[:, None] * (weights / scales**2)[None, :]
        if not np.all(np.isfinite(factors_squared)):
            # A subnormal scale (1e-320) squares to 0: the weight w/s^2 overflows.
            raise DataError(f"channel scales {scales.tolist()} are too small (w/s^2 overflows); give scales of the "
                            "order of the signals.")
        object.__setattr__(self, "sample_times", ts)
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "channels", channels)
        object.__setattr__(self, "weights", weights)
        object.__setattr__(self, "scales", scales)
        object.__setattr__(self, "_factors", np.sqrt(factors_squared))

    def residuals(self, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        factors = self._factors  # type: ignore[attr-defined]
        return (factors * (Y - self.data)).ravel(), factors

    def evaluate(self, Y: np.ndarray, p: np.ndarray) -> CostValue:
        r, factors = self.residuals(Y)
        return CostValue(J=0.5 * float(r @ r), dJ_dY=factors * r.reshape(Y.shape))
