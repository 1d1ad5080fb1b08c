"""Finite-difference stencils inside the bounds (the ``fd`` gradient path of an FMU problem)."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import IdentificationError

__all__ = ["FD_REL_STEP", "Stencil", "stencil"]

#: Relative step of the central differences of whole simulations.
FD_REL_STEP = 1e-4


@dataclasses.dataclass(frozen=True)
class Stencil:
    """Trial points and, per parameter, the first point's index and the weights."""

    points: tuple[np.ndarray, ...]
    recipes: tuple[tuple[int, tuple[float, ...]], ...]

    def combine(self, values: list) -> np.ndarray:
        """The difference quotients of ``values`` (one per point), stacked on the last axis."""
        return np.stack([sum(w * values[first + i] for i, w in enumerate(weights)) for first, weights in self.recipes],
                        axis=-1)


def stencil(x: np.ndarray, steps: np.ndarray, lower: np.ndarray, upper: np.ndarray, names) -> Stencil:
    """Central differences, one-sided (second order) next to a bound; every point inside.

    An interval narrower than the stencil shrinks the step so that every point stays inside
    the bounds (an FMU may reject values outside them).
    """
    points: list[np.ndarray] = []
    recipes: list[tuple[int, tuple[float, ...]]] = []
    for k in range(len(x)):
        d = min(steps[k], (upper[k] - lower[k]) / 2)
        if not d > 0:
            raise IdentificationError(f"parameter {names[k]!r}: its bounds leave no room for finite differences; "
                                      "widen them.")
        offsets: tuple[float, ...]
        weights: tuple[float, ...]
        if x[k] - d >= lower[k] and x[k] + d <= upper[k]:
            offsets, weights = (d, -d), (1 / (2 * d), -1 / (2 * d))
        elif x[k] + 2 * d <= upper[k] or x[k] - lower[k] < upper[k] - x[k]:
            d = min(d, (upper[k] - x[k]) / 2)
            offsets, weights = (0.0, d, 2 * d), (-3 / (2 * d), 4 / (2 * d), -1 / (2 * d))
        else:
            d = min(d, (x[k] - lower[k]) / 2)
            offsets, weights = (0.0, -d, -2 * d), (3 / (2 * d), -4 / (2 * d), 1 / (2 * d))
        first = len(points)
        for off in offsets:
            xk = x.copy()
            xk[k] += off
            points.append(xk)
        recipes.append((first, weights))
    return Stencil(tuple(points), tuple(recipes))
