"""Linear interpolation of step outputs to measurement times, and its transpose."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import DataError

__all__ = ["Sampler"]


@dataclasses.dataclass(frozen=True, eq=False)
class Sampler:
    """Maps values at the step times ``t_0..t_N`` to the sample times.

    ``Y_s = (1 - theta_s) y_{k_s} + theta_s y_{k_s + 1}``.  :meth:`scatter` applies the
    transpose, which is how the adjoint sweep receives ``dJ/dY`` step by step.
    """

    k: np.ndarray
    theta: np.ndarray
    n_grid: int

    @classmethod
    def from_grid(cls, grid: np.ndarray, sample_times: np.ndarray) -> Sampler:
        """Build the interpolation for sample times inside ``[grid[0], grid[-1]]``."""
        grid = np.asarray(grid, dtype=float)
        ts = np.asarray(sample_times, dtype=float)
        span = grid[-1] - grid[0]
        slack = 1e-9 * max(span, 1e-300)
        if ts.ndim != 1 or not np.all(np.isfinite(ts)):
            raise DataError("sample times must be a one-dimensional array of finite numbers.")
        if ts.size and (ts.min() < grid[0] - slack or ts.max() > grid[-1] + slack):
            raise DataError(
                f"sample times span [{ts.min():.6g}, {ts.max():.6g}] s but the simulation covers "
                f"[{grid[0]:.6g}, {grid[-1]:.6g}] s; simulate longer (--t-end) or trim the data."
            )
        ts = np.clip(ts, grid[0], grid[-1])
        k = np.clip(np.searchsorted(grid, ts, side="right") - 1, 0, len(grid) - 2)
        theta = (ts - grid[k]) / (grid[k + 1] - grid[k])
        return cls(k=k, theta=theta, n_grid=len(grid))

    def sample(self, values: np.ndarray) -> np.ndarray:
        """Interpolate ``values`` of shape ``(N+1, ...)`` to shape ``(n_samples, ...)``."""
        w = self.theta.reshape((-1,) + (1,) * (values.ndim - 1))
        return (1.0 - w) * values[self.k] + w * values[self.k + 1]

    def scatter(self, cotangent: np.ndarray) -> np.ndarray:
        """Transpose of :meth:`sample`: ``(n_samples, ...)`` to ``(N+1, ...)``."""
        # bincount per column: the same sums as np.add.at, an order of magnitude faster
        # (this runs once per gradient on every step of the run).
        flat = np.asarray(cotangent, dtype=float).reshape(len(self.k), -1)
        w = self.theta[:, None]
        lower, upper = (1.0 - w) * flat, w * flat
        out = np.empty((self.n_grid, flat.shape[1]))
        for c in range(flat.shape[1]):
            out[:, c] = (np.bincount(self.k, lower[:, c], minlength=self.n_grid)
                         + np.bincount(self.k + 1, upper[:, c], minlength=self.n_grid))
        return out.reshape((self.n_grid,) + cotangent.shape[1:])
