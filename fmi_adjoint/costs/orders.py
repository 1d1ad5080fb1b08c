"""Engine-order amplitudes over a run-up (Oberpeilsteiner 2018, Sec. 4.4.2.3).

For a four-stroke engine running up linearly from ``n0`` at ``t0`` to ``n1`` at ``t1``
(speeds in rpm, ``n`` in rev/s below), the speed ``n`` is reached at

    t_k(n) = (n0 t1 - n1 t0 + n (t0 - t1)) / (n0 - n1)

and the order ``o`` (``o`` cycles per crankshaft revolution, frequency ``o n``) is analysed
with a Hann window of two base periods (the base period is ``2/n``) centred there:
``[t_k - 2/n, t_k + 2/n]``, with the amplitude correction of :mod:`fmi_adjoint.costs.fourier`.
The window holds ``4 o`` periods of the order, so a steady order of amplitude ``C`` gives
exactly ``C``.  The cost compares the amplitudes with a measured order spectrum::

    J = 1/2 sum_n c_n (|C(n)| - |Cbar(n)|)^2          ("amplitude")
    J = 1/4 sum_n c_n (|C(n)|^2 - |Cbar(n)|^2)^2      ("power", eq. (4.6))
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import DataError
from .base import AbstractCost, CostValue
from .fourier import FourierCoefficients, amplitude_misfit, check_matrix_size

__all__ = ["RunUp", "EngineOrderCost"]


@dataclasses.dataclass(frozen=True)
class RunUp:
    """A linear run-up from ``n0`` rpm at ``t0`` to ``n1`` rpm at ``t1``."""

    n0: float
    n1: float
    t0: float
    t1: float

    def __post_init__(self) -> None:
        if not (self.n0 > 0 and self.n1 > 0 and self.n0 != self.n1 and self.t1 > self.t0):
            raise DataError(f"run-up {self}: needs positive, different speeds and t1 > t0.")

    def time_at(self, rpm: np.ndarray) -> np.ndarray:
        """``t_k(n)`` (the dissertation's formula; speeds in rpm)."""
        n = np.asarray(rpm, dtype=float)
        return (self.n0 * self.t1 - self.n1 * self.t0 + n * (self.t0 - self.t1)) / (self.n0 - self.n1)


@dataclasses.dataclass(frozen=True, eq=False)
class EngineOrderCost(AbstractCost):
    """Amplitudes of one engine order at several speeds of a run-up (see module docstring).

    Attributes
    ----------
    sample_times : numpy.ndarray
    channel : str
    order : float
        Engine order ``o`` (e.g. 6 for the TVD example).
    speeds : numpy.ndarray
        Speeds [rpm] at which the order is analysed.
    measured_amplitude : numpy.ndarray
        Measured order amplitudes at those speeds.
    runup : RunUp
    kind : {"amplitude", "power"}
    weights : numpy.ndarray, optional
    """

    sample_times: np.ndarray
    channel: str
    order: float
    speeds: np.ndarray
    measured_amplitude: np.ndarray
    runup: RunUp
    kind: str = "amplitude"
    weights: np.ndarray | None = None
    # Hann-window rows of the order at each speed (A = _cos @ y, B = _sin @ y), built by __post_init__.
    _cos: np.ndarray = dataclasses.field(init=False, repr=False)
    _sin: np.ndarray = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        ts = np.asarray(self.sample_times, dtype=float)
        speeds = np.atleast_1d(np.asarray(self.speeds, dtype=float))
        measured = np.atleast_1d(np.asarray(self.measured_amplitude, dtype=float))
        if self.kind not in ("amplitude", "power"):
            raise DataError(f"engine-order cost kind {self.kind!r} is not 'amplitude' or 'power'.")
        if speeds.size == 0 or measured.shape != speeds.shape or not np.all(np.isfinite(measured)):
            raise DataError("give one finite measured amplitude per speed.")
        if not self.order > 0:
            raise DataError(f"engine order {self.order!r} must be positive.")
        weights = np.ones(speeds.size) if self.weights is None else np.asarray(self.weights, dtype=float)
        check_matrix_size(speeds.size, ts.size, "speeds")
        rows_a, rows_b = [], []
        for rpm, centre in zip(speeds, self.runup.time_at(speeds)):
            n = rpm / 60.0
            lo, hi = centre - 2.0 / n, centre + 2.0 / n
            if lo < ts[0] or hi > ts[-1]:
                raise DataError(
                    f"speed {rpm:g} rpm: its window [{lo:.4g}, {hi:.4g}] s leaves the samples "
                    f"[{ts[0]:g}, {ts[-1]:g}] s; choose speeds inside the run-up."
                )
            coef = FourierCoefficients(ts, np.array([2 * np.pi * self.order * n]), window="hann", t_lower=lo,
                                       t_upper=hi)
            rows_a.append(coef.cos_matrix[0])  # type: ignore[attr-defined]
            rows_b.append(coef.sin_matrix[0])  # type: ignore[attr-defined]
        object.__setattr__(self, "sample_times", ts)
        object.__setattr__(self, "speeds", speeds)
        object.__setattr__(self, "measured_amplitude", measured)
        object.__setattr__(self, "weights", weights)
        object.__setattr__(self, "channels", (self.channel,))
        object.__setattr__(self, "_cos", np.array(rows_a))
        object.__setattr__(self, "_sin", np.array(rows_b))

    def amplitudes(self, Y: np.ndarray) -> np.ndarray:
        """Order amplitudes ``|C(n)|`` of sampled outputs ``Y``."""
        y = Y[:, 0]
        return np.hypot(self._cos @ y, self._sin @ y)

    def evaluate(self, Y: np.ndarray, p: np.ndarray) -> CostValue:
        y = Y[:, 0]
        A, B = self._cos @ y, self._sin @ y
        J, dA, dB = amplitude_misfit(A, B, self.measured_amplitude, self.weights, self.kind)
        dJ_dy = self._cos.T @ dA + self._sin.T @ dB
        return CostValue(J=J, dJ_dY=dJ_dy[:, None])
