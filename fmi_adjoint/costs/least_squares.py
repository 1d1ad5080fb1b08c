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
#: A channel's noise is resolved by :meth:`LeastSquaresCost.noise_variances` when the lag-one
#: correlation of its pseudo-residuals is at most this: white noise gives -2/3 (evenly spaced),
#: a smooth signal's curvature +1; with noise variance ``sigma**2`` and a curvature term ``s**2``
#: the correlation is ``(s**2 - sigma**2) / (1.5 sigma**2 + s**2)``, at most -1/3 exactly when
#: ``s**2 <= 0.375 sigma**2``, i.e. when the estimate exceeds ``sigma`` by at most 12 %.
RESOLVED_CORRELATION = -1.0 / 3.0


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
    """``J = 1/2 sum_i sum_c eta_ic w_ic (weight_c / scale_c**2) (y_ic - ybar_ic)^2``.

    ``eta_ic`` are the trapezoidal weights of channel ``c``'s compared sample times (those of
    non-zero sample weight ``w_ic``), so ``J`` approximates
    ``1/2 int (y - ybar)^T W (y - ybar) dt`` with ``W = diag(weight_c / scale_c**2)``.
    Without ``sample_weights`` every ``w_ic = 1`` and ``eta_ic = eta_i`` (Oberpeilsteiner
    2018, eq. (4.2)).  A zero sample weight removes the sample from its channel exactly: the
    trapezoidal rule of that channel bridges it, as if the sample had not been measured (a NaN
    gap of a bench file, :func:`~fmi_adjoint.identify.data_costs.build_cost`); ``data`` may
    hold NaN exactly there.  Non-zero sample weights multiply the trapezoidal factors.

    Channel weighting (issue 26, part 5): giving ``scale_c = sigma_c``, the channel's noise
    standard deviation, weighs its residuals by ``1/sigma_c**2``; the residuals of every
    channel are then of unit variance, so the pooled residual variance of
    :func:`~fmi_adjoint.identify.problem.gauss_newton_statistics` is right for channels of
    mixed units and noise levels.  ``weighting`` says for each channel where its weight and
    scale came from (RESULT.json's ``channel_weights``).

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
    sample_weights : numpy.ndarray, shape (n_samples, n_channels) or (n_samples,), optional
        Non-negative weight of each sample of each channel (default 1); 0 removes it.
    weighting : tuple of str, optional
        Where each channel's weight and scale came from, e.g. ``"noise estimated"``,
        ``"noise given"``, ``"--weight/--scale"``, ``"unit"`` (default ``"unit"`` where both
        are 1, else ``"given"``).
    """

    sum_of_squares: ClassVar[bool] = True

    sample_times: np.ndarray
    data: np.ndarray
    channels: tuple[str, ...]
    weights: np.ndarray | None = None
    scales: np.ndarray | None = None
    sample_weights: np.ndarray | None = None
    weighting: tuple[str, ...] | None = None

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
        mask = self._sample_weights(ts.size, len(channels))
        compared = mask > 0
        if not np.all(np.isfinite(ts)) or not np.all(np.isfinite(data[compared])):
            raise DataError("the data contain NaN or infinite values; remove or fill those rows (or give them "
                            "sample weight 0).")
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
        for c in range(nc):
            if np.count_nonzero(compared[:, c]) < 2:
                raise DataError(f"channel {channels[c]!r} has {np.count_nonzero(compared[:, c])} sample(s) of non-zero "
                                "weight; a least-squares channel needs at least two (leave the channel out).")
        with np.errstate(over="ignore", divide="ignore"):
            factors_squared = (_channel_trapezoid(ts, compared) * mask) * (weights / scales**2)[None, :]
        if not np.all(np.isfinite(factors_squared)):
            # A subnormal scale (1e-320) squares to 0: the weight w/s^2 overflows.
            raise DataError(f"channel scales {scales.tolist()} are too small (w/s^2 overflows); give scales of the "
                            "order of the signals.")
        object.__setattr__(self, "sample_times", ts)
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "channels", channels)
        object.__setattr__(self, "weights", weights)
        object.__setattr__(self, "scales", scales)
        object.__setattr__(self, "sample_weights", None if self.sample_weights is None else mask)
        weighting = self.weighting
        if weighting is None:
            weighting = tuple("unit" if w == 1.0 and s == 1.0 else "given" for w, s in zip(weights, scales))
        if len(weighting) != nc:
            raise DataError(f"weighting: {len(weighting)} entries for {nc} channel(s); give one per channel.")
        object.__setattr__(self, "weighting", tuple(weighting))
        object.__setattr__(self, "_compared", compared)
        object.__setattr__(self, "_filled", np.where(compared, data, 0.0))
        object.__setattr__(self, "_factors", np.sqrt(factors_squared))

    def _sample_weights(self, n_samples: int, n_channels: int) -> np.ndarray:
        """``sample_weights`` as an ``(n_samples, n_channels)`` array of finite non-negative
        numbers (ones if none are given)."""
        if self.sample_weights is None:
            return np.ones((n_samples, n_channels))
        w = np.asarray(self.sample_weights, dtype=float)
        if w.ndim == 1:
            w = np.repeat(w[:, None], n_channels, axis=1)
        if w.shape != (n_samples, n_channels):
            raise DataError(f"sample_weights has shape {w.shape}; expected ({n_samples} samples, {n_channels} "
                            "channels) or one weight per sample.")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise DataError("sample_weights must be finite and non-negative (0 removes a sample).")
        return w

    def weighting_record(self) -> dict[str, dict]:
        """Each channel's weight, scale (its noise standard deviation where the weighting is by
        noise) and their source, for RESULT.json's ``channel_weights``."""
        compared = self._compared  # type: ignore[attr-defined]
        out: dict[str, dict] = {}
        for c, name in enumerate(self.channels):
            entry = {"weight": float(np.asarray(self.weights)[c]), "scale": float(np.asarray(self.scales)[c]),
                     "source": str(np.asarray(self.weighting)[c])}
            masked = int(np.count_nonzero(~compared[:, c]))
            if masked:
                entry["masked_samples"] = masked
            out[name] = entry
        return out

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
        compared = self._compared  # type: ignore[attr-defined]
        if compared.all():
            terms, jumps = _pseudo_residual_terms(self.sample_times, self.data)
            kept = np.where(jumps, 0.0, terms).sum(axis=0)
            counts = np.maximum((~jumps).sum(axis=0), 1)
            return kept / counts
        # Masked samples: each channel's estimate from its own compared samples (a removed
        # sample is bridged, as in the cost).
        out = np.zeros(len(self.channels))
        for c in range(len(self.channels)):
            keep = compared[:, c]
            terms, jumps = _pseudo_residual_terms(self.sample_times[keep], self.data[keep, c:c + 1])
            out[c] = float(np.where(jumps, 0.0, terms).sum()) / max(int((~jumps).sum()), 1)
        return out

    def noise_resolved(self) -> np.ndarray:
        """Per channel, whether :meth:`noise_variances` measures noise rather than the signal's
        curvature: the lag-one correlation of the pseudo-residuals ``e_i`` is at most
        :data:`RESOLVED_CORRELATION` (white noise: -2/3 on even samples; noise-free smooth data:
        near +1, where the "noise" estimate is the signal's curvature and weighting by it would
        be arbitrary).  Computed on each channel's compared samples."""
        compared = self._compared  # type: ignore[attr-defined]
        out = np.zeros(len(self.channels), dtype=bool)
        for c in range(len(self.channels)):
            keep = compared[:, c]
            ts, y = self.sample_times[keep], self.data[keep, c]
            if ts.size < 4:
                continue
            h = np.diff(ts)
            before, after = h[:-1], h[1:]
            with np.errstate(invalid="ignore", divide="ignore"):
                a, b = before / (before + after), after / (before + after)
            e = (y[1:-1] - (b * y[:-2] + a * y[2:])) / np.sqrt(1.0 + a**2 + b**2)
            e = e[np.isfinite(e)]
            if e.size < 3 or not np.any(e != 0):
                continue
            e0, e1 = e[:-1], e[1:]
            norm = float(np.sqrt(np.sum(e0**2) * np.sum(e1**2)))
            if norm == 0.0:  # one isolated non-zero pseudo-residual: no correlation to judge
                continue
            out[c] = float(np.sum(e0 * e1)) / norm <= RESOLVED_CORRELATION
        return out

    def _pseudo_residual_terms(self) -> tuple[np.ndarray, np.ndarray]:
        """:func:`_pseudo_residual_terms` of the samples compared in every channel."""
        rows = self._compared.all(axis=1)  # type: ignore[attr-defined]
        return _pseudo_residual_terms(self.sample_times[rows], self.data[rows])

    def jump_times(self) -> np.ndarray:
        """Times at which the data jump (events in the data): the midpoints between the two
        samples that enclose each run of excluded pseudo-residuals of :meth:`noise_variances`
        (any channel); empty for smooth data.  A jump between ``t_k`` and ``t_{k+1}`` raises
        the terms of both ``t_k`` and ``t_{k+1}``, so a run of neighbouring excluded samples is
        one jump."""
        if self.sample_times.size < 3:
            return np.zeros(0)
        _, jumps = self._pseudo_residual_terms()
        inner = np.flatnonzero(jumps.any(axis=1)) + 1  # indices into the rows compared in every channel
        if inner.size == 0:
            return np.zeros(0)
        runs = np.split(inner, np.flatnonzero(np.diff(inner) > 1) + 1)
        ts = self.sample_times[self._compared.all(axis=1)]  # type: ignore[attr-defined]
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
        weights, scales = np.asarray(self.weights), np.asarray(self.scales)  # arrays after __post_init__
        if self.sample_weights is None:
            eta = trapezoidal_weights(self.sample_times)
            return 0.5 * float(eta.sum()) * float(np.sum(weights * self.noise_variances() / scales**2))
        compared = self._compared  # type: ignore[attr-defined]
        span = (_channel_trapezoid(self.sample_times, compared) * np.asarray(self.sample_weights)).sum(axis=0)
        return 0.5 * float(np.sum(span * weights * self.noise_variances() / scales**2))

    def window(self, t_end: float) -> LeastSquaresCost:
        """The same cost on the samples at ``t <= t_end`` only (a data window of the growing-window
        continuation, :class:`~fmi_adjoint.identify.strategies.GrowingWindows`): the trapezoidal
        weights are those of the kept sample times, channels, weights, scales and the kept
        samples' weights are kept.

        Raises
        ------
        DataError
            If fewer than two samples lie in the window.
        """
        keep = self.sample_times <= t_end
        if np.count_nonzero(keep) < 2:
            raise DataError(f"a data window ending at t = {t_end:g} s holds {np.count_nonzero(keep)} sample(s); "
                            "give a window that holds at least two samples.")
        sample_weights = None if self.sample_weights is None else np.asarray(self.sample_weights)[keep]
        return dataclasses.replace(self, sample_times=self.sample_times[keep], data=self.data[keep],
                                   sample_weights=sample_weights)

    def residuals(self, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        factors = self._factors  # type: ignore[attr-defined]
        return (factors * (Y - self._filled)).ravel(), factors  # type: ignore[attr-defined]

    def evaluate(self, Y: np.ndarray, p: np.ndarray) -> CostValue:
        r, factors = self.residuals(Y)
        return CostValue(J=0.5 * float(r @ r), dJ_dY=factors * r.reshape(Y.shape))


def _pseudo_residual_terms(ts: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The terms ``e_i**2 / (1 + a_i**2 + b_i**2)`` of
    :meth:`LeastSquaresCost.noise_variances` of samples ``y`` (n_samples, n_channels) at
    ``ts``, shape (n_samples - 2, n_channels), and which of them are jumps (see there)."""
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


def _channel_trapezoid(ts: np.ndarray, compared: np.ndarray) -> np.ndarray:
    """Trapezoidal weights ``eta_ic`` of each channel's compared samples (``compared[:, c]``),
    zero elsewhere: a removed sample is bridged by its channel's rule, so a zero sample weight
    is exactly the sample left out (:class:`LeastSquaresCost`)."""
    if compared.all():
        return np.repeat(trapezoidal_weights(ts)[:, None], compared.shape[1], axis=1)
    eta = np.zeros(compared.shape)
    for c in range(compared.shape[1]):
        keep = compared[:, c]
        eta[keep, c] = trapezoidal_weights(ts[keep])
    return eta
