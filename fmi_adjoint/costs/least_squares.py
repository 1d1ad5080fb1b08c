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
        steps = np.diff(ts)
        # A time may repeat once: the left and right limits at an event (FMU data).
        if np.any(steps < 0) or np.any((steps[1:] == 0) & (steps[:-1] == 0)):
            raise DataError("the sample times are not increasing (a time may repeat once, at an event); sort the "
                            "data and drop duplicates.")
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

    def noise_variances(self) -> np.ndarray:
        """Per-channel noise variance ``sigma_c**2`` estimated from the data themselves.

        Each inner sample is compared with the straight line through its two neighbours,
        ``e_i = y_i - (b_i y_{i-1} + a_i y_{i+1})`` with ``a_i = h_-/(h_- + h_+)``,
        ``b_i = h_+/(h_- + h_+)`` (``h_-, h_+`` the spacings before and after ``t_i``), and
        ``sigma_c**2 = mean_i(e_i**2 / (1 + a_i**2 + b_i**2))``.  For white noise of
        variance ``sigma**2`` every term has expectation ``sigma**2`` (the pseudo-residuals
        of Gasser, Sroka & Jennen-Steinmetz 1986, Biometrika 73, 625); on evenly spaced
        samples (``a = b = 1/2``) this is the second-difference estimator
        ``mean((y_{i+1} - 2 y_i + y_{i-1})**2) / 6``.  It is exact in expectation
        for white noise on a signal that is linear over any three neighbouring samples, and
        zero on noise-free data of degree at most one.  A deterministic signal adds its own
        (non-negative) term ``mean(e_signal**2 / (1 + a**2 + b**2))`` to the expectation, so
        the expected estimate is an upper bound of the noise variance, tight for smooth
        signals (curvature small over the sample interval); a signal that changes fast
        between samples raises it.  The noise is assumed stationary (one variance for all
        samples of a channel).

        Returns
        -------
        numpy.ndarray, shape (n_channels,)

        Raises
        ------
        DataError
            If there are fewer than three samples.
        """
        ts, y = self.sample_times, self.data
        if ts.size < 3:
            raise DataError(f"estimating the measurement noise needs at least three samples, got {ts.size}; "
                            "give more samples.")
        h = np.diff(ts)
        before, after = h[:-1], h[1:]
        a = (before / (before + after))[:, None]
        b = (after / (before + after))[:, None]
        e = y[1:-1] - (b * y[:-2] + a * y[2:])
        return np.mean(e**2 / (1.0 + a**2 + b**2), axis=0)

    def noise_floor(self) -> float | None:
        """The cost that measurement noise alone gives at a perfect fit, estimated from the data.

        With residuals equal to white noise of variance ``sigma_c**2`` per channel, the
        expectation of ``J`` (class docstring) is
        ``J_noise = 1/2 sum_i eta_i sum_c weight_c sigma_c**2 / scale_c**2`` with the same
        trapezoidal weights ``eta_i``, channel weights and scales as ``J``;
        ``sigma_c**2`` is estimated by :meth:`noise_variances` (an upper bound for smooth
        signals, see there).  A fit whose cost is near ``J_noise`` cannot be improved by
        the model; a cost far above it can.  None with fewer than three samples (no estimate).
        """
        if self.sample_times.size < 3:
            return None
        eta = trapezoidal_weights(self.sample_times)
        weights, scales = np.asarray(self.weights), np.asarray(self.scales)  # arrays after __post_init__
        return 0.5 * float(eta.sum()) * float(np.sum(weights * self.noise_variances() / scales**2))

    def residuals(self, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        factors = self._factors  # type: ignore[attr-defined]
        return (factors * (Y - self.data)).ravel(), factors

    def evaluate(self, Y: np.ndarray, p: np.ndarray) -> CostValue:
        r, factors = self.residuals(Y)
        return CostValue(J=0.5 * float(r @ r), dJ_dY=factors * r.reshape(Y.shape))
