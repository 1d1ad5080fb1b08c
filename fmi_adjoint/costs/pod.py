"""Costs on proper-orthogonal-decomposition modal coordinates (Nishi, Hara, Yamaura, eq. (5)).

The proper orthogonal modes ``w_i`` are the right singular vectors of the *measured*
snapshot matrix (samples x channels).  Measured and simulated outputs are projected on
the chosen modes, ``a_i(t) = y(t) . w_i`` and ``abar_i(t) = ybar(t) . w_i``, and

    J = 1/2 sum_{i in modes} int (a_i - abar_i)^2 dt

is evaluated with trapezoidal weights on the sample times.  Because the modes come from
the data, ``J`` is quadratic in the sampled outputs and ``dJ/dY`` is exact.  With all modes
the cost equals the plain time-domain least-squares cost (the modes are orthonormal).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import DataError
from ..text import excerpt
from .base import AbstractCost, CostValue
from .least_squares import trapezoidal_weights

__all__ = ["PODCost", "proper_orthogonal_modes"]


def proper_orthogonal_modes(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Modes (columns, unit length) and contribution ratios ``sigma_i^2 / sum sigma^2``."""
    _, sigma, vt = np.linalg.svd(np.asarray(data, dtype=float), full_matrices=False)
    energy = sigma**2
    total = energy.sum()
    return vt.T, (energy / total if total > 0 else energy)


@dataclasses.dataclass(frozen=True, eq=False)
class PODCost(AbstractCost):
    """Least squares on chosen POD modal coordinates of several output channels.

    Attributes
    ----------
    sample_times : numpy.ndarray
    data : numpy.ndarray, shape (n_samples, n_channels)
        Measured outputs; their POD defines the modes.
    channels : tuple of str
    modes : tuple of int
        1-based mode numbers (1 = largest contribution), one mode or a set.
    """

    sample_times: np.ndarray
    data: np.ndarray
    channels: tuple[str, ...]
    modes: tuple[int, ...] = (1,)
    # Derived by __post_init__ from the data: the chosen mode shapes (columns), the contribution
    # ratios of all modes, the measured modal coordinates and the trapezoidal weights.
    mode_shapes: np.ndarray = dataclasses.field(init=False, repr=False)
    contribution_ratios: np.ndarray = dataclasses.field(init=False, repr=False)
    measured_coordinates: np.ndarray = dataclasses.field(init=False, repr=False)
    _eta: np.ndarray = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        ts = np.asarray(self.sample_times, dtype=float)
        data = np.asarray(self.data, dtype=float)
        channels = tuple(self.channels)
        if data.ndim != 2 or data.shape != (ts.size, len(channels)) or len(channels) < 1:
            raise DataError(f"data has shape {data.shape}; expected ({ts.size} samples, {len(channels)} channels).")
        if not np.all(np.isfinite(ts)) or not np.all(np.isfinite(data)) or np.any(np.diff(ts) <= 0):
            raise DataError("POD data must be finite with strictly increasing sample times.")
        modes = tuple(int(m) for m in np.atleast_1d(self.modes))
        n_modes = min(data.shape)
        if not modes or any(m < 1 or m > n_modes for m in modes) or len(set(modes)) != len(modes):
            raise DataError(f"modes {excerpt(list(modes))}: choose distinct mode numbers from 1 to {n_modes}.")
        basis, ratios = proper_orthogonal_modes(data)
        W = basis[:, [m - 1 for m in modes]]
        object.__setattr__(self, "sample_times", ts)
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "channels", channels)
        object.__setattr__(self, "modes", modes)
        object.__setattr__(self, "mode_shapes", W)
        object.__setattr__(self, "contribution_ratios", ratios)
        object.__setattr__(self, "measured_coordinates", data @ W)
        object.__setattr__(self, "_eta", trapezoidal_weights(ts))

    def modal_coordinates(self, Y: np.ndarray) -> np.ndarray:
        """``a_i(t_s)`` of sampled outputs ``Y``, shape ``(n_samples, n_modes)``."""
        return Y @ self.mode_shapes

    def evaluate(self, Y: np.ndarray, p: np.ndarray) -> CostValue:
        diff = self.modal_coordinates(Y) - self.measured_coordinates
        eta = self._eta[:, None]
        J = 0.5 * float(np.sum(eta * diff**2))
        return CostValue(J=J, dJ_dY=(eta * diff) @ self.mode_shapes.T)
