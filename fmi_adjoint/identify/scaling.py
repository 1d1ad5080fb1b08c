"""Maps between physical parameter values and the optimizer's scaled variables."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..errors import IdentificationError

__all__ = ["ParameterScaling"]

_KINDS = ("auto", "bounds", "log", "none")


@dataclasses.dataclass(frozen=True)
class ParameterScaling:
    """Per-parameter scaling ``u = s(p)``.

    ``bounds``: ``u = 2 (p - lo)/(hi - lo) - 1`` in ``[-1, 1]`` (Vanpaemel et al.,
    Sec. 5.2: scale by the span of the bounds).  ``log``: ``u = ln(p / p0)`` for
    positive parameters.  ``none``: ``u = p / |p0|`` (or ``p`` if ``p0 = 0``).
    ``auto`` picks ``bounds`` when both bounds are finite, else ``log`` when the start
    value and the lower bound are positive, else ``none``.

    Attributes
    ----------
    kinds : tuple of str
    lower, upper, start : tuple of float
    """

    kinds: tuple[str, ...]
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    start: tuple[float, ...]

    @classmethod
    def create(cls, names, start, lower, upper, kind: str = "auto") -> ParameterScaling:
        """Choose the scaling of each parameter (see class docstring)."""
        if kind not in _KINDS:
            raise IdentificationError(f"scaling {kind!r} is not one of {', '.join(_KINDS)}.")
        kinds = []
        for name, p0, lo, hi in zip(names, start, lower, upper):
            if not lo <= p0 <= hi:
                raise IdentificationError(
                    f"start value of '{name}' = {p0:g} lies outside its bounds [{lo:g}, {hi:g}]; "
                    "change the start value (--set) or the bounds (--bounds)."
                )
            chosen = kind
            if kind == "auto":
                if math.isfinite(lo) and math.isfinite(hi) and hi > lo:
                    chosen = "bounds"
                elif p0 > 0 and lo >= 0:
                    chosen = "log"
                else:
                    chosen = "none"
            if chosen == "bounds" and not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
                raise IdentificationError(f"'{name}': bounds scaling needs finite bounds lo < hi, got [{lo}, {hi}].")
            if chosen == "log" and not (p0 > 0 and lo >= 0):
                raise IdentificationError(f"'{name}': log scaling needs a positive start value and lower bound >= 0.")
            kinds.append(chosen)
        return cls(tuple(kinds), tuple(map(float, lower)), tuple(map(float, upper)), tuple(map(float, start)))

    def _arrays(self):
        return (np.array(self.kinds), np.array(self.lower), np.array(self.upper), np.array(self.start))

    def to_scaled(self, p: np.ndarray) -> np.ndarray:
        """``u`` of physical values ``p``."""
        kinds, lo, hi, p0 = self._arrays()
        p = np.asarray(p, dtype=float)
        u = np.where(np.abs(p0) > 0, p / np.where(p0 == 0, 1.0, np.abs(p0)), p)
        with np.errstate(divide="ignore", invalid="ignore"):
            u = np.where(kinds == "bounds", 2.0 * (p - lo) / (hi - lo) - 1.0, u)
            u = np.where(kinds == "log", np.log(np.where(kinds == "log", p / np.where(p0 > 0, p0, 1.0), 1.0)), u)
        return u

    def to_physical(self, u: np.ndarray) -> np.ndarray:
        """Physical values of scaled ``u``."""
        kinds, lo, hi, p0 = self._arrays()
        u = np.asarray(u, dtype=float)
        p = np.where(np.abs(p0) > 0, u * np.abs(p0), u)
        p = np.where(kinds == "bounds", lo + (u + 1.0) * (np.where(kinds == "bounds", hi - lo, 1.0)) / 2.0, p)
        p = np.where(kinds == "log", p0 * np.exp(np.where(kinds == "log", u, 0.0)), p)
        return p

    def derivative(self, u: np.ndarray) -> np.ndarray:
        """``dp/du`` (diagonal), for the chain rule of gradients and Jacobians."""
        kinds, lo, hi, p0 = self._arrays()
        d = np.where(np.abs(p0) > 0, np.abs(p0), 1.0)
        d = np.where(kinds == "bounds", (np.where(kinds == "bounds", hi - lo, 1.0)) / 2.0, d)
        d = np.where(kinds == "log", self.to_physical(u), d)
        return d

    def scaled_bounds(self) -> list[tuple[float | None, float | None]]:
        """Bounds of ``u`` for the optimizer (None where open)."""
        result: list[tuple[float | None, float | None]] = []
        for kind, lo, hi, p0 in zip(self.kinds, self.lower, self.upper, self.start):
            if kind == "bounds":
                result.append((-1.0, 1.0))
                continue
            ends: list[float | None] = []
            for b in (lo, hi):
                if not math.isfinite(b) or (kind == "log" and b <= 0):
                    ends.append(None)
                else:
                    ends.append(float(self.to_scaled_single(kind, b, p0)))
            result.append((ends[0], ends[1]))
        return result

    @staticmethod
    def to_scaled_single(kind: str, value: float, p0: float) -> float:
        if kind == "log":
            return math.log(value / p0)
        return value / abs(p0) if p0 != 0 else value
