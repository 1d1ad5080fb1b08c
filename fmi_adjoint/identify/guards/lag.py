"""The time-lag guard: a channel best matched by the model's response shifted in time.

:mod:`fmi_adjoint.identify.guards` explains each rule and its threshold.
"""

from __future__ import annotations


import numpy as np

from ...costs import LeastSquaresCost
from ...errors import FmiAdjointError
from ..optimize import IdentificationResult
from ..problem import AbstractIdentificationProblem
from .notice import Notice, plain
from .outcome import COST_WARNING_RATIO


#: A channel's time lag is large from this many sample intervals and this share of the record on.
LAG_SAMPLES = 3.0


LAG_SHARE = 0.002


#: Lags searched: up to this share of the record either way.
LAG_SEARCH_SHARE = 0.25


#: Normalized cross-correlation at the lag below which the lag says nothing (shapes differ).
LAG_MIN_CORRELATION = 0.5


#: The shift must leave at most this share of what the response at lag 0 leaves unexplained.
LAG_GAIN = 0.5


#: The lags of the record's two halves agree with the whole record's to this share of it.
LAG_AGREEMENT = 0.25


#: Most points of the even grid a channel's lag is computed on (memory and FFT time bounded).
_LAG_GRID = 1 << 21


def channel_lag(times: np.ndarray, model: np.ndarray, data: np.ndarray) -> tuple[float, float, float]:
    """The time lag ``tau`` by which ``data`` best follow ``model`` (``data(t) ~ model(t - tau)``:
    positive when the data lag behind), the normalized cross-correlation there and at lag 0
    (see the module docstring).  Non-finite samples are left out; (0, 0, 0) where there is
    nothing to correlate (fewer than 8 samples, or a constant signal)."""
    t, m, d = (np.asarray(a, dtype=float).ravel() for a in (times, model, data))
    keep = np.isfinite(t) & np.isfinite(m) & np.isfinite(d)
    t, m, d = t[keep], m[keep], d[keep]
    if t.size < 8 or not t[-1] > t[0]:
        return 0.0, 0.0, 0.0
    h = float(np.median(np.diff(t)))
    if not h > 0:
        return 0.0, 0.0, 0.0
    n = min(int(round((t[-1] - t[0]) / h)) + 1, _LAG_GRID)
    grid = np.linspace(t[0], t[-1], n)
    h = float(grid[1] - grid[0])
    mg, dg = np.interp(grid, t, m), np.interp(grid, t, d)
    mg, dg = mg - mg.mean(), dg - dg.mean()
    if not (np.any(mg != 0) and np.any(dg != 0)):
        return 0.0, 0.0, 0.0
    size = 1 << (2 * n - 1).bit_length()
    # products[k] = sum_i d[i + k] m[i] over the overlap (zero padding: linear, not circular).
    products = np.fft.irfft(np.fft.rfft(dg, size) * np.conj(np.fft.rfft(mg, size)), size)
    reach = max(int(LAG_SEARCH_SHARE * (n - 1)), 1)
    lags = np.arange(-reach, reach + 1)
    # Pearson's correlation over each lag's overlap, m[i] and d[i + k] for i in [max(0, -k), min(n, n - k)),
    # from running sums (the signals' means over the overlap are taken out).
    lo, hi = np.maximum(0, -lags), np.minimum(n, n - lags)
    count = (hi - lo).astype(float)

    def over(values: np.ndarray, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
        running = np.concatenate(([0.0], np.cumsum(values)))
        return running[stop] - running[start]

    sum_m, sum_d = over(mg, lo, hi), over(dg, lo + lags, hi + lags)
    var_m = over(mg**2, lo, hi) - sum_m**2 / count
    var_d = over(dg**2, lo + lags, hi + lags) - sum_d**2 / count
    covariance = products[lags % size] - sum_m * sum_d / count
    energy = var_m * var_d
    with np.errstate(invalid="ignore", divide="ignore"):
        values = np.where(energy > 0, covariance / np.sqrt(np.abs(energy)), -1.0)
    # Of the peaks nearly as good as the best (at most twice its unexplained share: a period of a
    # periodic signal, noise), the shortest lag.
    inner = values[1:-1]
    peaks = np.flatnonzero((inner >= values[:-2]) & (inner >= values[2:])) + 1
    best = float(values.max())
    near = [int(k) for k in peaks if 1.0 - values[k] ** 2 <= 2.0 * (1.0 - best**2)] or [int(np.argmax(values))]
    j = min(near, key=lambda k: abs(int(lags[k])))
    shift = float(lags[j])
    if 0 < j < values.size - 1:  # the vertex of the parabola through the peak and its neighbours
        y0, y1, y2 = values[j - 1:j + 2]
        curvature = y0 - 2.0 * y1 + y2
        if curvature < 0:
            shift += 0.5 * (y0 - y2) / curvature
    return shift * h, float(values[j]), float(values[reach])


def lag_notices(problem: AbstractIdentificationProblem, result: IdentificationResult) -> tuple[Notice, ...]:
    """A warning for each channel whose data are best matched by the model's response at the
    result shifted in time by a large lag (see the module docstring): one run per experiment
    of a least-squares cost.  Channels whose ``<channel>.delay`` is identified are skipped."""
    delayed = {name.rsplit(".", 1)[0] for name in result.names if name.endswith(".delay")}
    notices = []
    for index, exp in enumerate(problem.experiments):
        cost = exp.cost
        if not isinstance(cost, LeastSquaresCost) or set(cost.channels) <= delayed:
            continue
        try:
            outputs = np.asarray(problem.sampled_outputs(index, np.asarray(result.parameters, dtype=float)))
        except FmiAdjointError:
            return ()  # the result cannot be simulated again: said by the run itself
        if outputs.shape != cost.data.shape:
            continue
        times = cost.sample_times
        weights = (np.ones(cost.data.shape) if cost.sample_weights is None
                   else np.asarray(cost.sample_weights, dtype=float))
        span = float(times[-1] - times[0])
        interval = float(np.median(np.diff(times))) if times.size > 1 else 0.0
        if not interval > 0 or times.size < 3:
            continue
        noise = np.asarray(cost.noise_variances(), dtype=float)
        for c, channel in enumerate(cost.channels):
            if channel in delayed:
                continue
            compared = weights[:, c] > 0
            t, y, d = times[compared], outputs[compared, c], cost.data[compared, c]
            tau, correlation, at_zero = channel_lag(t, y, d)
            if not (abs(tau) >= LAG_SAMPLES * interval and abs(tau) >= LAG_SHARE * span
                    and correlation >= LAG_MIN_CORRELATION
                    and 1.0 - correlation**2 <= LAG_GAIN * (1.0 - at_zero**2)
                    and (1.0 - correlation**2) * float(np.var(d)) <= COST_WARNING_RATIO * noise[c]):
                continue
            half = t.size // 2
            first, second = channel_lag(t[:half], y[:half], d[:half])[0], channel_lag(t[half:], y[half:], d[half:])[0]
            if max(abs(first - tau), abs(second - tau)) <= LAG_AGREEMENT * abs(tau):
                shown = plain(channel)
                # Data that lag: the shifted samples before t = 0 are dropped by a window.
                keep = f" with --data FILE@window=0:{float(t[-1]) - tau:.4g}" if tau > 0 else ""
                notices.append(Notice(
                    f"channel {shown} of {plain(str(exp.name))} is best matched by the model's response shifted by "
                    f"{tau:+.4g} s ({abs(tau) / interval:.1f} sample intervals, correlation {correlation:.2f}): the "
                    f"data {'lag behind' if tau > 0 else 'lead'} the model, a time offset the parameters cannot "
                    f"absorb. Give --time-shift {tau:.4g}{keep} (model files; or shift the time column by {-tau:.4g} "
                    f"s), or identify the sensor's delay with --params {shown}.delay.", warning=True))
    return tuple(notices)
