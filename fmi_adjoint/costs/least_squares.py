"""Weighted least squares in the time domain (Oberpeilsteiner 2018, eq. (4.2))."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from ..errors import DataError
from .base import AbstractCost, CostValue

__all__ = ["trapezoidal_weights", "LeastSquaresCost"]

#: The median of chi-squared with one degree of freedom: ``median(e**2) = 0.4549 sigma**2``
#: for normal ``e`` of variance ``sigma**2`` (the robust scale of :meth:`LeastSquaresCost.noise_variances`).
CHI2_1_MEDIAN = 0.454936423119572
#: A pseudo-residual term this many times the robust noise variance is a jump, not noise
#: (white noise: P(chi2_1 > 100) = 1.5e-23; see :meth:`LeastSquaresCost.noise_variances`).
JUMP_FACTOR = 100.0
#: ... and this many times the median of its 11 neighbouring terms (itself included): a jump
#: raises two neighbouring terms, a stretch of large curvature raises all of them.
JUMP_NEIGHBOURS = 11
#: A channel with fewer distinct values than this share of its samples is quantized (its values
#: repeat); its noise estimate keeps every term (see :meth:`LeastSquaresCost.noise_variances`).
QUANTIZED_SHARE = 0.5
#: Jumps are isolated: a jump between two samples raises the two terms next to it; a longer run
#: of outlying terms is a stretch of the signal, not a jump.
JUMP_RUN = 3


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

    sum_of_squares: ClassVar[bool] = True

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

        Jumps are excluded (issue 32): a jump of the signal between two samples (an event: a
        bouncing ball's velocity reversed) gives the two pseudo-residuals next to it terms of
        the jump's size, which the mean would spread over the whole record as "noise" (the
        bouncing ball's floor was then 0.56, above the cost of a wrong minimum).  Terms above
        ``JUMP_FACTOR`` times the robust, median-based estimate
        ``median_i(e_i**2 / (1 + a_i**2 + b_i**2)) / 0.4549`` (0.4549 is the median of
        chi-squared with one degree of freedom, so this estimates ``sigma**2`` for white
        noise however large the few outliers), and above ``JUMP_FACTOR`` times the same
        estimate over the ``JUMP_NEIGHBOURS`` terms around them, are left out of the mean.  White noise exceeds
        that threshold with probability 1.5e-23 per sample, so its estimate is unchanged; a smooth
        signal's terms vary with its curvature, slowly from sample to sample, and stay within
        ``JUMP_FACTOR`` of their neighbours' (noise-free data of the bundled examples: no term
        excluded).  Only isolated outliers are jumps (runs of at most ``JUMP_RUN`` terms); a
        quantized channel (fewer distinct values than ``QUANTIZED_SHARE`` of its samples, where
        the median term may be 0) keeps its plain mean.
        :meth:`jump_times` gives the times of the excluded samples.

        Returns
        -------
        numpy.ndarray, shape (n_channels,)

        Raises
        ------
        DataError
            If there are fewer than three samples.
        """
        terms, jumps = self._pseudo_residual_terms()
        kept = np.where(jumps, 0.0, terms).sum(axis=0)
        counts = np.maximum((~jumps).sum(axis=0), 1)
        return kept / counts

    def _pseudo_residual_terms(self) -> tuple[np.ndarray, np.ndarray]:
        """The terms ``e_i**2 / (1 + a_i**2 + b_i**2)`` of :meth:`noise_variances`, shape
        (n_samples - 2, n_channels), and which of them are jumps (see there)."""
        ts, y = self.sample_times, self.data
        if ts.size < 3:
            raise DataError(f"estimating the measurement noise needs at least three samples, got {ts.size}; "
                            "give more samples.")
        h = np.diff(ts)
        before, after = h[:-1], h[1:]
        with np.errstate(invalid="ignore", divide="ignore"):
            a = (before / (before + after))[:, None]
            b = (after / (before + after))[:, None]
        # A repeated time (an event's left and right limits) has no spacing: its terms are jumps.
        repeated = ~np.isfinite(a) | (before[:, None] == 0) | (after[:, None] == 0)
        a, b = np.where(repeated, 0.5, a), np.where(repeated, 0.5, b)
        e = y[1:-1] - (b * y[:-2] + a * y[2:])
        terms = e**2 / (1.0 + a**2 + b**2)
        robust = np.median(terms, axis=0) / CHI2_1_MEDIAN
        # The local level: the median of the JUMP_NEIGHBOURS terms around each (a jump raises two
        # of them), so that a stretch of large curvature is not taken for jumps.
        half = JUMP_NEIGHBOURS // 2
        padded = np.pad(terms, ((half, half), (0, 0)), mode="edge")
        windows = np.lib.stride_tricks.sliding_window_view(padded, JUMP_NEIGHBOURS, axis=0)
        local = np.median(windows, axis=-1) / CHI2_1_MEDIAN
        outliers = (terms > JUMP_FACTOR * np.maximum(robust[None, :], local)) & ~repeated
        # Jumps are isolated (a jump between two samples raises the two terms next to it): a longer
        # run of outlying terms is a stretch of the signal, kept.  Quantized data (a channel whose
        # values repeat: the quantizer's steps are the signal's sample-to-sample changes; more than
        # half the terms may be exactly 0, so the median is 0 and every step would pass for a jump)
        # have no jumps this estimate can tell from their noise: their plain mean is kept.
        for c in range(terms.shape[1]):
            if robust[c] == 0 or np.unique(y[:, c]).size < QUANTIZED_SHARE * y.shape[0]:
                outliers[:, c] = False
                continue
            flagged = np.flatnonzero(outliers[:, c])
            for run in np.split(flagged, np.flatnonzero(np.diff(flagged) > 1) + 1) if flagged.size else []:
                if run.size > JUMP_RUN:
                    outliers[run, c] = False
        return terms, repeated | outliers

    def jump_times(self) -> np.ndarray:
        """Times at which the data jump (events in the data): the midpoints between the two
        samples that enclose each run of excluded pseudo-residuals of :meth:`noise_variances`
        (any channel); empty for smooth data.  A jump between ``t_k`` and ``t_{k+1}`` raises
        the terms of both ``t_k`` and ``t_{k+1}``, so a run of neighbouring excluded samples is
        one jump."""
        if self.sample_times.size < 3:
            return np.zeros(0)
        _, jumps = self._pseudo_residual_terms()
        inner = np.flatnonzero(jumps.any(axis=1)) + 1  # indices into sample_times
        if inner.size == 0:
            return np.zeros(0)
        runs = np.split(inner, np.flatnonzero(np.diff(inner) > 1) + 1)
        ts = self.sample_times
        return np.array([0.5 * (ts[max(run[0], 1)] + ts[min(run[-1], ts.size - 2)]) if run.size > 1
                         else ts[run[0]] for run in runs])

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

    def window(self, t_end: float) -> LeastSquaresCost:
        """The same cost on the samples at ``t <= t_end`` only (a data window of the growing-window
        continuation, :class:`~fmi_adjoint.identify.strategies.GrowingWindows`): the trapezoidal
        weights are those of the kept sample times, channels, weights and scales are kept.

        Raises
        ------
        DataError
            If fewer than two samples lie in the window.
        """
        keep = self.sample_times <= t_end
        if np.count_nonzero(keep) < 2:
            raise DataError(f"a data window ending at t = {t_end:g} s holds {np.count_nonzero(keep)} sample(s); "
                            "give a window that holds at least two samples.")
        return dataclasses.replace(self, sample_times=self.sample_times[keep], data=self.data[keep])

    def residuals(self, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        factors = self._factors  # type: ignore[attr-defined]
        return (factors * (Y - self.data)).ravel(), factors

    def evaluate(self, Y: np.ndarray, p: np.ndarray) -> CostValue:
        r, factors = self.residuals(Y)
        return CostValue(J=0.5 * float(r @ r), dJ_dY=factors * r.reshape(Y.shape))
