"""The designed input: knot values, a basis in time, and the map into the input's bounds.

The input ``u(t) = sum_k xi_k phi_k(t)`` is linear in the knot values ``xi`` (a
:class:`~fmi_adjoint.model.InputSignal` of the model, so both engines run it and
differentiate it like any parameter).  The optimizer works on unconstrained variables
``z``; ``xi_k = psi(z_k)`` maps them smoothly into ``[lo, hi]`` (dissertation Sec. 5.1.4):

* :class:`ArctanMap`, eq. (5.17), the one the thesis prefers:
  ``psi(z) = (hi + lo)/2 + s arctan(z/s)``, ``s = (hi - lo)/pi``;
* :class:`SigmoidMap`, eq. (5.16): ``psi(z) = hi - (hi - lo)/(1 + exp(s z))``, ``s = 4/(hi - lo)``.

Both have slope 1 at the middle of the interval.  Eq. (5.16) as printed has that slope
(``psi'(0) = (hi - lo) s/4 = 1``); its value at ``z = 0`` is the middle, as for (5.17).

Bases (:class:`PiecewiseLinear`, :class:`CubicSpline`) say what ``phi_k`` are and how they
become time tables.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
import math
from typing import ClassVar

import numpy as np

from ..errors import ModelError
from ..model import InputSignal, Model, Parameter
from ..text import excerpt

__all__ = ["AbstractBasis", "AbstractBoundMap", "ArctanMap", "BASES", "BOUND_MAPS", "BoxBounds", "CubicSpline",
           "PiecewiseLinear", "SigmoidMap", "knot_names", "signal_model"]


class AbstractBasis(abc.ABC):
    """How the knot values make the input signal."""

    name: ClassVar[str]

    @abc.abstractmethod
    def tables(self, knots: np.ndarray, grid: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """One ``(times, phi_k(times))`` per knot, spanning ``[grid[0], grid[-1]]``; linear
        interpolation in them must give the signal at every step time."""


@dataclasses.dataclass(frozen=True)
class PiecewiseLinear(AbstractBasis):
    """Hat functions on the knots: the signal is the polygon through the knot values.

    Each hat is a table of at most five points (the span's ends, the knot and its
    neighbours), so evaluating the signal costs the same whatever the number of knots."""

    name: ClassVar[str] = "linear"

    def tables(self, knots: np.ndarray, grid: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        knots = np.asarray(knots, dtype=float)
        out = []
        for k in range(len(knots)):
            points = {float(grid[0]): 0.0, float(grid[-1]): 0.0}
            if k > 0:
                points[float(knots[k - 1])] = 0.0
            if k < len(knots) - 1:
                points[float(knots[k + 1])] = 0.0
            points[float(knots[k])] = 1.0
            times = np.array(sorted(points))
            out.append((times, np.array([points[t] for t in times])))
        return out


@dataclasses.dataclass(frozen=True)
class CubicSpline(AbstractBasis):
    """The natural cubic spline through the knot values (zero curvature at both ends).

    Its cardinal functions are tabulated at the step times, so the engines see the spline
    exactly at every step (between steps nothing is evaluated).  Between knots the spline can
    overshoot the bounds its knots respect; the design holds it in by a penalty on the signal
    at the steps (:mod:`fmi_adjoint.design.problem`).

    A cardinal function of equally spaced knots decays by ``2 - sqrt(3) = 0.268`` per knot
    away from its own (de Boor, *A Practical Guide to Splines*, Ch. IV): beyond
    :attr:`REACH` knots it is below ``1e-17``, under the round-off of the signal.  Each
    table therefore holds the step times within ``REACH`` knots (and zeros outside), and is
    computed from the spline of the ``2 REACH`` neighbouring knots, whose far ends change it
    by less again.  So K tables hold about ``2 REACH`` knot spacings of steps each instead
    of every step: K tables of all steps made the 2001-knot build quadratic in time and
    memory (issue 31)."""

    name: ClassVar[str] = "cubic"
    #: Knots on either side of its own within which a cardinal function is tabulated.
    REACH: ClassVar[int] = 30

    def tables(self, knots: np.ndarray, grid: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        from scipy.interpolate import CubicSpline as Spline

        if len(knots) < 3:
            raise ModelError("a cubic spline input needs at least 3 knots; give --knots 3 or more, or --basis linear.")
        knots = np.asarray(knots, dtype=float)
        times = np.asarray(grid, dtype=float)
        K, reach = len(knots), self.REACH
        out = []
        for k in range(K):
            # The spline of the 2 REACH knots around k (all of them near the ends, where the
            # natural end conditions are the true ones), tabulated within REACH knots of k.
            lo, hi = max(0, k - 2 * reach), min(K - 1, k + 2 * reach)
            unit = np.zeros(hi - lo + 1)
            unit[k - lo] = 1.0
            spline = Spline(knots[lo:hi + 1], unit, bc_type="natural")
            first = np.searchsorted(times, knots[max(0, k - reach)], side="left")
            last = np.searchsorted(times, knots[min(K - 1, k + reach)], side="right")
            # Zeros at the steps next to the window and at the ends: interpolation gives 0 at
            # every step outside the window, the spline's value at every step inside.
            before = sorted({i for i in (0, first - 1) if 0 <= i < first})
            after = sorted({i for i in (last, len(times) - 1) if last <= i < len(times)})
            index = np.concatenate((before, np.arange(first, last), after)).astype(int)
            values = np.zeros(len(index))
            values[len(before):len(before) + last - first] = spline(times[first:last])
            inside = times[index]
            out.append((inside, values))
        return out


#: Bases by command-line name.
BASES: Mapping[str, type[AbstractBasis]] = MappingProxyType({b.name: b for b in (PiecewiseLinear, CubicSpline)})


class AbstractBoundMap(abc.ABC):
    """A smooth, increasing map of the real line onto ``(lo, hi)`` with slope 1 in the middle
    (or, for :class:`BoxBounds`, the identity with the bounds left to the optimizer)."""

    name: ClassVar[str]
    #: The optimizer must keep the variables in ``[lo, hi]`` itself.
    box: ClassVar[bool] = False

    @abc.abstractmethod
    def value(self, z: np.ndarray, lo: float, hi: float) -> np.ndarray:
        """``psi(z)``."""

    @abc.abstractmethod
    def derivative(self, z: np.ndarray, lo: float, hi: float) -> np.ndarray:
        """``psi'(z)``."""

    @abc.abstractmethod
    def inverse(self, u: np.ndarray, lo: float, hi: float) -> np.ndarray:
        """``z`` with ``psi(z) = u``, for ``u`` strictly inside ``(lo, hi)``."""


@dataclasses.dataclass(frozen=True)
class ArctanMap(AbstractBoundMap):
    """Eq. (5.17): ``psi(z) = (hi + lo)/2 + s arctan(z/s)``, ``s = (hi - lo)/pi``."""

    name: ClassVar[str] = "arctan"

    def value(self, z, lo, hi):
        s = (hi - lo) / math.pi
        return 0.5 * (hi + lo) + s * np.arctan(np.asarray(z) / s)

    def derivative(self, z, lo, hi):
        s = (hi - lo) / math.pi
        return 1.0 / (1.0 + (np.asarray(z) / s) ** 2)

    def inverse(self, u, lo, hi):
        s = (hi - lo) / math.pi
        return s * np.tan((np.asarray(u) - 0.5 * (hi + lo)) / s)


@dataclasses.dataclass(frozen=True)
class SigmoidMap(AbstractBoundMap):
    """Eq. (5.16): ``psi(z) = hi - (hi - lo)/(1 + exp(s z))``, ``s = 4/(hi - lo)``."""

    name: ClassVar[str] = "sigmoid"

    def value(self, z, lo, hi):
        s = 4.0 / (hi - lo)
        # hi - (hi - lo)/(1 + e^{sz}) = lo + (hi - lo) expit(sz), written without overflow
        from scipy.special import expit

        return lo + (hi - lo) * expit(s * np.asarray(z))

    def derivative(self, z, lo, hi):
        from scipy.special import expit

        s = 4.0 / (hi - lo)
        e = expit(s * np.asarray(z))
        return (hi - lo) * s * e * (1.0 - e)

    def inverse(self, u, lo, hi):
        from scipy.special import logit

        s = 4.0 / (hi - lo)
        return logit((np.asarray(u) - lo) / (hi - lo)) / s


@dataclasses.dataclass(frozen=True)
class BoxBounds(AbstractBoundMap):
    """No transformation: the knot values are the variables and the optimizer keeps them in
    ``[lo, hi]`` (L-BFGS-B's box constraints).

    Beyond the thesis.  A smooth map flattens as the input approaches a bound, so its
    gradient vanishes there before the optimum is reached: on the bang-bang optimum of
    Sec. 5.3.2 the knots next to the switch saturate at +-1 and the switch stays in the middle
    between two knots.  With box bounds a knot between the two arcs takes an interior value
    and the switch moves to where the criterion wants it.
    """

    name: ClassVar[str] = "box"
    box: ClassVar[bool] = True

    def value(self, z, lo, hi):
        return np.asarray(z, dtype=float)

    def derivative(self, z, lo, hi):
        return np.ones_like(np.asarray(z, dtype=float))

    def inverse(self, u, lo, hi):
        return np.asarray(u, dtype=float)


#: Bound maps by command-line name.
BOUND_MAPS: Mapping[str, type[AbstractBoundMap]] = MappingProxyType(
    {m.name: m for m in (ArctanMap, SigmoidMap, BoxBounds)})


def knot_names(input_name: str, count: int) -> tuple[str, ...]:
    """Parameter names of the knot values: ``<input>_knot<k>``."""
    return tuple(f"{input_name}_knot{k}" for k in range(count))


def signal_model(model: Model, input_name: str, knots: np.ndarray, values: np.ndarray, basis: AbstractBasis,
                 grid: np.ndarray, bounds: tuple[float, float]) -> Model:
    """``model`` with the input ``input_name`` driven by knot values (an
    :class:`~fmi_adjoint.model.InputSignal`); the knot parameters start at ``values``.

    Raises
    ------
    ModelError
        ``input_name`` is not an ``[inputs]`` entry, or a knot parameter name is taken.
    """
    inputs = [p.name for p in model.parameters if p.causality == "input"]
    if input_name not in inputs:
        raise ModelError(f"model '{model.name}' has no input {excerpt(input_name)}; inputs: "
                         f"{', '.join(inputs) or '(none)'}. Declare it in the model's [inputs] section and use it "
                         "in a load expression.")
    names = knot_names(input_name, len(knots))
    taken = {p.name for p in model.all_parameters} | {c.name for c in model.all_coordinates}
    clash = [name for name in names if name in taken]
    if clash:
        raise ModelError(f"model '{model.name}' already has a parameter or coordinate named '{clash[0]}'; rename it "
                         "(the knot values of a designed input are called <input>_knot<k>).")
    unit = model.parameter(input_name).unit
    tables = tuple((tuple(times), tuple(rows)) for times, rows in basis.tables(knots, grid))
    knot_params = tuple(Parameter(name, float(v), unit, bounds, f"knot {k} of input '{input_name}'")
                        for k, (name, v) in enumerate(zip(names, values)))
    signal = InputSignal(input=input_name, tables=tables, knots=knot_params)
    return dataclasses.replace(model, signals=model.signals + (signal,))
