"""Why a line search failed: probes of an objective along its projected steepest descent (issue 32).

Shared by the identification (:func:`fmi_adjoint.identify.optimize.lbfgsb_stop`) and the input
design (:func:`fmi_adjoint.design.optimize.diagnose_stop`), which both stop on L-BFGS-B's
``ABNORMAL`` (line search failed) and must say why.

From a point ``x`` with objective ``f0`` and gradient ``g``, the projected steepest descent
``d`` (:func:`projected_descent`, unit length) is probed at two steps ``s1 > s2``.  With the
step actually taken ``delta = clip(x + s d) - x`` (bounds), the Taylor remainder

    r(s) = f(x + delta) - f0 - g . delta

falls like ``s^2`` where ``f`` is smooth (order 2; 3 where the curvature along ``d`` vanishes),
like ``s`` at a kink between ``x`` and ``x + s1 d`` or where the gradient is wrong, and does not
fall at all at a jump (order 0), or falls far faster than ``s^2`` when only the longer step
crosses a jump.  :meth:`LineProbe.kink` is the one test: an order outside
[:data:`KINK_ORDER`, :data:`JUMP_ORDER`].
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["JUMP_ORDER", "KINK_ORDER", "LineProbe", "probe_line", "projected_descent"]

#: A Taylor remainder order below this is a kink (order 1) or jump (order 0); smooth is 2.
KINK_ORDER = 1.5
#: An order above this is a jump crossed by the longer probe step only (smooth: 2, or 3 where
#: the curvature along the direction vanishes).
JUMP_ORDER = 3.5


def projected_descent(gradient: np.ndarray, x: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                      margin: float | np.ndarray = 0.0) -> np.ndarray:
    """``-gradient`` without the components that push a variable out of its box: those at a
    bound, or closer to it than ``margin`` (so that a probe step of up to ``margin`` along the
    unit direction stays inside and is not clipped)."""
    d = -np.asarray(gradient, dtype=float).copy()
    x = np.asarray(x, dtype=float)
    d[((x - lower <= margin) & (d < 0)) | ((upper - x <= margin) & (d > 0))] = 0.0
    return d


@dataclasses.dataclass(frozen=True)
class LineProbe:
    """The objective along a unit direction ``d`` at the probe steps (:func:`probe_line`)."""

    #: The probe steps ``s1 > s2`` along ``d``.
    steps: tuple[float, ...]
    #: ``f(x + delta) - f0`` at each step (``delta`` the step actually taken).
    changes: tuple[float, ...]
    #: ``g . delta`` at each step: the change the gradient predicts.
    predicted: tuple[float, ...]

    @property
    def remainders(self) -> tuple[float, ...]:
        """The Taylor remainders ``f(x + delta) - f0 - g . delta``."""
        return tuple(c - p for c, p in zip(self.changes, self.predicted))

    @property
    def rates(self) -> tuple[float, ...]:
        """The rates of decrease ``(f0 - f(x + delta)) / s`` (difference quotients)."""
        return tuple(-c / s for c, s in zip(self.changes, self.steps))

    def order(self, noise: float) -> float | None:
        """The Taylor remainder's order from the two steps; None where it is not measured (a
        remainder at or below ``noise``, or not finite)."""
        r1, r2 = (abs(r) for r in self.remainders[:2])
        if not (np.isfinite(r1) and np.isfinite(r2)) or r1 <= noise or r2 <= noise:
            return None
        return float(np.log(r1 / r2) / np.log(self.steps[0] / self.steps[1]))

    def flat(self, noise: float) -> bool:
        """The objective does not change beyond ``noise`` at any step."""
        return all(abs(c) <= noise for c in self.changes)

    def kink(self, noise: float) -> bool:
        """The one kink test: the objective is not smooth between ``x`` and the longer step
        (a kink or jump: Taylor order outside [:data:`KINK_ORDER`, :data:`JUMP_ORDER`])."""
        order = self.order(noise)
        return order is not None and not KINK_ORDER <= order <= JUMP_ORDER


def probe_line(f: Callable[[np.ndarray], float], x: np.ndarray, direction: np.ndarray, gradient: np.ndarray,
               f0: float, steps: Sequence[float], lower: np.ndarray | float, upper: np.ndarray | float) -> LineProbe:
    """Evaluate ``f`` at ``clip(x + s direction)`` for each of ``steps`` (``direction`` of unit
    length), with the change the gradient predicts for the step actually taken."""
    x = np.asarray(x, dtype=float)
    g = np.asarray(gradient, dtype=float)
    changes, predicted = [], []
    for s in steps:
        trial = np.clip(x + s * direction, lower, upper)
        changes.append(float(f(trial)) - f0)
        predicted.append(float(g @ (trial - x)))
    return LineProbe(tuple(float(s) for s in steps), tuple(changes), tuple(predicted))
