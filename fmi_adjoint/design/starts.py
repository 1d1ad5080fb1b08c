"""Start inputs of a multi-start design (issue 32): where the optimizer begins.

Why several starts.  A criterion that is concave in the input (every criterion of a model
linear in the input, e.g. the A-criterion of the oscillators of Sec. 5.3) has its minima at
vertices of the knots' box, and every vertex whose gradient points outwards is a local
minimum.  From the constant start of the dissertation (``F_0 = F_max/2``, Sec. 5.3.3) the
gradient method of eq. (5.15) runs straight out to the vertex ``u = +1`` of the undamped
oscillator of Sec. 5.3.2 (``J = -12.04``), while the Pontryagin optimum has one switch
(``t1* = 1.2424 s``, ``J = -16.94``, eqs. (5.26), (5.27)).  Which vertex a start reaches
depends on the sign pattern it begins with, so the starts below differ in their sign
changes: the user's start first, then a falling ramp, a chirp, square waves with one and two
sign changes, a rising ramp and random switching patterns (seeded).

Each start is a strategy object with ``knots(times, lo, hi, rng) -> values``, values strictly
inside ``(lo, hi)`` (the smooth bound maps reach the bounds only in the limit); a
:class:`StartPlan` (how many, which seed) lists them in a fixed order, so a plan and its seed
give the same starts on every machine.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import ClassVar

import numpy as np

from ..errors import ModelError

__all__ = ["AbstractStart", "Chirp", "DEFAULT_STARTS", "DEFAULT_SEED", "RandomSwitching", "Ramp", "SquareWave",
           "StartPlan", "UserStart"]

#: Amplitude of the generated starts as a fraction of the half range (strictly inside).
AMPLITUDE = 0.9


class AbstractStart(abc.ABC):
    """A start input of the design, as knot values."""

    name: ClassVar[str]

    @abc.abstractmethod
    def knots(self, times: np.ndarray, lo: float, hi: float, rng: np.random.Generator) -> np.ndarray | None:
        """Knot values at ``times`` strictly inside ``(lo, hi)``; None: the spec's own start."""

    def label(self, knots: int | None = None) -> str:
        """Short description for reports (``ramp down``, ``square wave, 2 sign changes``) of the
        start on ``knots`` knots (None: not known)."""
        return self.name


def _scaled(shape: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``shape`` in [-1, 1] mapped to ``AMPLITUDE`` of the half range about the middle."""
    return 0.5 * (lo + hi) + AMPLITUDE * 0.5 * (hi - lo) * np.clip(shape, -1.0, 1.0)


def _phase(times: np.ndarray) -> np.ndarray:
    """Time as a fraction of the experiment, 0 to 1."""
    span = float(times[-1] - times[0])
    return (times - times[0]) / span if span > 0 else np.zeros_like(times)


@dataclasses.dataclass(frozen=True)
class UserStart(AbstractStart):
    """The spec's start (``--start``, default three quarters up the range): the single start
    of a one-start design."""

    name: ClassVar[str] = "given"

    def knots(self, times, lo, hi, rng):
        return None

    def label(self, knots: int | None = None) -> str:
        return "given start (--start)"


@dataclasses.dataclass(frozen=True)
class Ramp(AbstractStart):
    """A straight line from one side of the range to the other: one sign change in the middle,
    the shape of the ramp start with which the dissertation's oscillator reaches its switch."""

    falling: bool = True
    name: ClassVar[str] = "ramp"

    def knots(self, times, lo, hi, rng):
        s = 1.0 - 2.0 * _phase(times)
        return _scaled(s if self.falling else -s, lo, hi)

    def label(self, knots: int | None = None) -> str:
        return f"ramp {'down' if self.falling else 'up'}"


@dataclasses.dataclass(frozen=True)
class Chirp(AbstractStart):
    """A sine whose frequency rises linearly from ``first`` to ``last`` periods per experiment
    (a linear sweep, the usual broadband test input); ``last`` is capped at a quarter of the
    knot count, so every period keeps four knots."""

    first: float = 0.5
    last: float = 4.0
    name: ClassVar[str] = "chirp"

    def knots(self, times, lo, hi, rng):
        s = _phase(times)
        last = self.last_periods(len(times))
        cycles = self.first * s + 0.5 * (last - self.first) * s * s
        return _scaled(np.cos(2.0 * math.pi * cycles), lo, hi)

    def last_periods(self, knots: int) -> float:
        """``last`` capped at a quarter of ``knots`` (not below ``first``)."""
        return min(self.last, max(self.first, knots / 4.0))

    def label(self, knots: int | None = None) -> str:
        last = self.last if knots is None else self.last_periods(knots)
        return f"chirp {self.first:g} to {last:g} periods"


@dataclasses.dataclass(frozen=True)
class SquareWave(AbstractStart):
    """Bang-bang at ``AMPLITUDE`` with ``changes`` equally spaced sign changes, starting high."""

    changes: int = 1
    name: ClassVar[str] = "square"

    def knots(self, times, lo, hi, rng):
        segment = np.minimum((_phase(times) * (self.changes + 1)).astype(int), self.changes)
        return _scaled(np.where(segment % 2 == 0, 1.0, -1.0), lo, hi)

    def label(self, knots: int | None = None) -> str:
        return f"square wave, {self.changes} sign change{'s' if self.changes != 1 else ''}"


@dataclasses.dataclass(frozen=True)
class RandomSwitching(AbstractStart):
    """A random telegraph signal: at each knot the sign flips with probability
    ``1/mean_run`` (runs of ``mean_run`` knots on average), the first sign random too; the
    magnitudes are drawn uniformly between 80 % and 100 % of the amplitude (``AMPLITUDE`` of the
    half range about the middle), so no two starts coincide on a vertex.  Drawn from the plan's
    seeded generator."""

    mean_run: float = 8.0
    name: ClassVar[str] = "random switching"

    def knots(self, times, lo, hi, rng):
        K = len(times)
        flips = rng.random(K) < 1.0 / max(self.mean_run, 1.0)
        flips[0] = rng.random() < 0.5
        sign = np.where(np.cumsum(flips) % 2 == 0, 1.0, -1.0)
        return _scaled(sign * (1.0 - 0.2 * rng.random(K)), lo, hi)

    def label(self, knots: int | None = None) -> str:
        return f"random switching, runs of {self.mean_run:g} knots"


#: Starts of a default design (``--starts``): measured on the undamped oscillator of
#: Sec. 5.3.2 (docs/tutorials/input-design.md).
DEFAULT_STARTS = 8
DEFAULT_SEED = 0


@dataclasses.dataclass(frozen=True)
class StartPlan:
    """``count`` starts in a fixed order: the user's start, ramp down, chirp, square waves
    with one and two sign changes, ramp up, then random switching patterns of alternating
    mean run length (seeded by ``seed``).  ``count = 1`` is the user's start alone."""

    count: int = DEFAULT_STARTS
    seed: int = DEFAULT_SEED

    def __post_init__(self) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise ModelError(f"--starts {self.count!r}: give a whole number of at least 1 start (1: the given start "
                             f"only; default {DEFAULT_STARTS}).")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ModelError(f"--seed {self.seed!r}: give a whole number of at least 0.")

    def strategies(self) -> tuple[AbstractStart, ...]:
        fixed: tuple[AbstractStart, ...] = (UserStart(), Ramp(), Chirp(), SquareWave(1), SquareWave(2),
                                            Ramp(falling=False))
        random = tuple(RandomSwitching(mean_run=8.0 if k % 2 == 0 else 4.0)
                       for k in range(max(0, self.count - len(fixed))))
        return (fixed + random)[:self.count]

    def knot_values(self, times: np.ndarray, lo: float, hi: float,
                    given: np.ndarray) -> list[tuple[str, np.ndarray]]:
        """``(label, knot values)`` of every start; ``given`` are the spec's start values."""
        rng = np.random.default_rng(self.seed)
        out = []
        for strategy in self.strategies():
            values = strategy.knots(np.asarray(times, dtype=float), lo, hi, rng)
            values = np.asarray(given, dtype=float).copy() if values is None else values
            out.append((strategy.label(len(times)), values))
        return out
