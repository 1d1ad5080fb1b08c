"""Costs on Fourier coefficients of a sampled output (Oberpeilsteiner 2018, Sec. 4.2).

The coefficients of output ``y`` at the angular frequencies ``omega_k`` over a window
``[t_l, t_u]`` of length ``T_w`` are (eqs. (4.4), (4.5), with a window ``w``)::

    A_k = 2/T_w int y(t) w(t) cos(omega_k t) dt,   B_k = 2/T_w int y(t) w(t) sin(omega_k t) dt

evaluated by the trapezoidal rule on the sample times inside the window, so they are
linear in the sampled outputs and ``dJ/dY`` is exact for the discrete adjoint (this is the
discrete counterpart of the Mayer form (4.7), (4.8)).  Any frequencies may be used, not
only multiples of ``2 pi / T_w``.

Windows: ``"rectangular"`` (``w = 1``) and ``"hann"``,
``w(t) = g_c/2 (1 - cos(2 pi (t - t_l)/T_w))`` with the amplitude correction ``g_c = 2``
(Sec. 4.2.1, eq. (4.10): the Hann window halves a coefficient when the window holds at
least two periods).  Eq. (4.27) prints ``pi`` instead of ``2 pi`` in the cosine; that window
would not return to zero at ``t_u``, so the symmetric form of Sec. 4.2.1 is used.

Cost kinds (weights ``c_k`` per frequency):

* ``"power"``: ``J = 1/4 sum c_k [A_k^2 + B_k^2 - (Abar_k^2 + Bbar_k^2)]^2`` (eq. (4.6));
* ``"amplitude"``: ``J = 1/2 sum c_k (|C_k| - |Cbar_k|)^2`` with ``|C_k| = sqrt(A_k^2 + B_k^2)``;
* ``"complex"``: ``J = 1/2 sum c_k [(A_k - Abar_k)^2 + (B_k - Bbar_k)^2]`` (phase-aware).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import DataError
from .base import AbstractCost, CostValue
from .least_squares import trapezoidal_weights

__all__ = ["FourierCoefficients", "FourierCost", "WINDOWS", "KINDS", "MAX_MATRIX_ENTRIES", "amplitude_misfit",
           "check_matrix_size"]

WINDOWS = ("rectangular", "hann")
KINDS = ("power", "amplitude", "complex")
HANN_AMPLITUDE_CORRECTION = 2.0
#: Most entries of one coefficient matrix (frequencies x samples).
MAX_MATRIX_ENTRIES = 2**25


def check_matrix_size(n_rows: int, n_samples: int, rows: str) -> None:
    """Refuse coefficient matrices of more than :data:`MAX_MATRIX_ENTRIES` entries before
    allocating them (two such matrices are held: about 0.5 GB at the limit)."""
    if n_rows * n_samples > MAX_MATRIX_ENTRIES:
        raise DataError(
            f"{n_rows} {rows} x {n_samples} samples need {n_rows * n_samples:.3g} coefficients, more than the limit "
            f"of {MAX_MATRIX_ENTRIES:.3g}; analyse fewer {rows} (a narrower --band, fewer rows), or fewer samples "
            "(a larger --step, a shorter --t-end or window)."
        )


def amplitude_misfit(A, B, measured_amplitude, weights, kind: str) -> tuple[float, np.ndarray, np.ndarray]:
    """``(J, dJ/dA, dJ/dB)`` of the ``"power"`` (eq. (4.6)) or ``"amplitude"`` misfit."""
    amp = np.hypot(A, B)
    if kind == "power":
        diff = amp**2 - measured_amplitude**2
        return 0.25 * float(np.sum(weights * diff**2)), weights * diff * A, weights * diff * B
    diff = amp - measured_amplitude
    safe = np.where(amp > 0, amp, 1.0)  # d|C|/dA = A/|C|; taken as 0 where |C| = 0
    dA = np.where(amp > 0, weights * diff * A / safe, 0.0)
    dB = np.where(amp > 0, weights * diff * B / safe, 0.0)
    return 0.5 * float(np.sum(weights * diff**2)), dA, dB


@dataclasses.dataclass(frozen=True, eq=False)
class FourierCoefficients:
    """The linear map from samples of one output to ``(A_k, B_k)``.

    Attributes
    ----------
    sample_times : numpy.ndarray
        Strictly increasing sample times (the window is cut from them).
    omegas : numpy.ndarray
        Angular frequencies [rad/s].
    window : {"rectangular", "hann"}
    t_lower, t_upper : float, optional
        Window limits (default: the first and last sample time).
    """

    sample_times: np.ndarray
    omegas: np.ndarray
    window: str = "rectangular"
    t_lower: float | None = None
    t_upper: float | None = None

    def __post_init__(self) -> None:
        ts = np.asarray(self.sample_times, dtype=float)
        omegas = np.atleast_1d(np.asarray(self.omegas, dtype=float))
        if ts.ndim != 1 or ts.size < 3 or np.any(np.diff(ts) <= 0) or not np.all(np.isfinite(ts)):
            raise DataError("Fourier coefficients need at least three strictly increasing, finite sample times.")
        if omegas.size == 0 or not np.all(np.isfinite(omegas)) or np.any(omegas < 0):
            raise DataError(f"frequencies {omegas.tolist()} must be a non-empty list of finite values >= 0.")
        if self.window not in WINDOWS:
            raise DataError(f"window {self.window!r} is not one of {', '.join(WINDOWS)}.")
        lo = ts[0] if self.t_lower is None else float(self.t_lower)
        hi = ts[-1] if self.t_upper is None else float(self.t_upper)
        inside = (ts >= lo - 1e-12 * abs(hi)) & (ts <= hi + 1e-12 * abs(hi))
        if not hi > lo or inside.sum() < 3:
            raise DataError(f"the window [{lo:g}, {hi:g}] s holds fewer than three samples; widen it.")
        t = ts[inside]
        weights = np.zeros(ts.size)
        weights[inside] = trapezoidal_weights(t)
        if self.window == "hann":
            weights[inside] *= HANN_AMPLITUDE_CORRECTION / 2 * (1 - np.cos(2 * np.pi * (t - lo) / (hi - lo)))
        scale = 2.0 / (hi - lo)
        check_matrix_size(omegas.size, ts.size, "frequencies")
        object.__setattr__(self, "sample_times", ts)
        object.__setattr__(self, "omegas", omegas)
        # A = cos_matrix @ y, B = sin_matrix @ y  (shape: n_frequencies x n_samples),
        # each built in place: one allocation per matrix.
        weights *= scale
        try:
            for name, function in (("cos_matrix", np.cos), ("sin_matrix", np.sin)):
                matrix = np.outer(omegas, ts)
                function(matrix, out=matrix)
                matrix *= weights
                object.__setattr__(self, name, matrix)
        except MemoryError:
            raise DataError(
                f"{omegas.size} frequencies x {ts.size} samples do not fit in memory; analyse fewer frequencies "
                "or fewer samples."
            ) from None

    def __call__(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(A, B)`` of the samples ``y`` (shape ``(n_samples,)``)."""
        return self.cos_matrix @ y, self.sin_matrix @ y  # type: ignore[attr-defined]

    @staticmethod
    def harmonics(t_lower: float, t_upper: float, orders, periods: int = 1) -> np.ndarray:
        """``omega_k = 2 pi k / (T_w / periods)`` for integer orders ``k``."""
        return 2 * np.pi * np.asarray(orders, dtype=float) * periods / (t_upper - t_lower)


@dataclasses.dataclass(frozen=True, eq=False)
class FourierCost(AbstractCost):
    """A cost on Fourier coefficients of one output channel (see module docstring).

    Attributes
    ----------
    coefficients : FourierCoefficients
    channel : str
        Output name.
    measured_A, measured_B : numpy.ndarray, optional
        Measured coefficients (``complex`` kind needs both; the other kinds use
        ``measured_amplitude`` if given, else ``sqrt(A^2 + B^2)`` of these).
    measured_amplitude : numpy.ndarray, optional
        Measured amplitudes ``|Cbar_k|`` (a measured amplitude spectrum).
    kind : {"power", "amplitude", "complex"}
    weights : numpy.ndarray, optional
        Per-frequency weights ``c_k`` (default 1; 0 excludes a frequency: band selection).
    """

    coefficients: FourierCoefficients
    channel: str
    measured_A: np.ndarray | None = None
    measured_B: np.ndarray | None = None
    measured_amplitude: np.ndarray | None = None
    kind: str = "power"
    weights: np.ndarray | None = None

    def __post_init__(self) -> None:
        nk = self.coefficients.omegas.size
        if self.kind not in KINDS:
            raise DataError(f"Fourier cost kind {self.kind!r} is not one of {', '.join(KINDS)}.")

        def vector(value, name):
            if value is None:
                return None
            array = np.atleast_1d(np.asarray(value, dtype=float))
            if array.shape != (nk,) or not np.all(np.isfinite(array)):
                raise DataError(f"{name}: expected {nk} finite values (one per frequency), got {array.shape}.")
            return array

        A, B = vector(self.measured_A, "measured_A"), vector(self.measured_B, "measured_B")
        amplitude = vector(self.measured_amplitude, "measured_amplitude")
        if self.kind == "complex" and (A is None or B is None):
            raise DataError("the complex Fourier cost needs measured_A and measured_B.")
        if amplitude is None:
            if A is None or B is None:
                raise DataError("give measured_amplitude, or measured_A and measured_B.")
            amplitude = np.hypot(A, B)
        weights = np.ones(nk) if self.weights is None else vector(self.weights, "weights")
        if np.any(weights < 0):
            raise DataError("Fourier cost weights must be >= 0.")
        object.__setattr__(self, "measured_A", A)
        object.__setattr__(self, "measured_B", B)
        object.__setattr__(self, "measured_amplitude", amplitude)
        object.__setattr__(self, "weights", weights)
        object.__setattr__(self, "sample_times", self.coefficients.sample_times)
        object.__setattr__(self, "channels", (self.channel,))

    @classmethod
    def band(cls, coefficients: FourierCoefficients, low: float, high: float, **kwargs) -> FourierCost:
        """A cost whose weights select the frequencies with ``low <= omega_k <= high``."""
        omegas = coefficients.omegas
        weights = ((omegas >= low) & (omegas <= high)).astype(float)
        if not weights.any():
            raise DataError(f"no frequency lies in the band [{low:g}, {high:g}] rad/s.")
        return cls(coefficients, weights=weights * np.asarray(kwargs.pop("weights", 1.0)), **kwargs)

    def evaluate(self, Y: np.ndarray, p: np.ndarray) -> CostValue:
        y = Y[:, 0]
        A, B = self.coefficients(y)
        c = self.weights
        if self.kind == "complex":
            dA, dB = c * (A - self.measured_A), c * (B - self.measured_B)
            J = 0.5 * float(np.sum(dA * (A - self.measured_A) + dB * (B - self.measured_B)))
        else:
            J, dA, dB = amplitude_misfit(A, B, self.measured_amplitude, c, self.kind)
        dJ_dy = self.coefficients.cos_matrix.T @ dA + self.coefficients.sin_matrix.T @ dB  # type: ignore[attr-defined]
        return CostValue(J=J, dJ_dY=dJ_dy[:, None])

    def spectrum(self, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Simulated ``(A_k, B_k)`` of sampled outputs ``Y``."""
        return self.coefficients(Y[:, 0])
