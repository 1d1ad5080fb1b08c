"""Springs and spring-dampers between two coordinates or to ground."""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import numpy as np
import sympy as sp

from ...errors import ModelError
from ..base import AbstractTwoPointElement, ElementParameter

__all__ = ["LinearSpringDamper", "PolynomialSpringDamper", "SplineCharacteristic", "VelocityCharacteristic",
           "natural_spline"]

Number = str | float | int
INF = math.inf


@dataclasses.dataclass(frozen=True)
class LinearSpringDamper(AbstractTwoPointElement):
    """Linear spring and viscous damper in parallel: ``f = k (s - L0) + d s_dot``.

    SI units: N/m and Ns/m for translational coordinates, Nm/rad and Nms/rad for
    rotational ones.
    """

    type_name: ClassVar[str] = "linear_spring_damper"
    parameters: ClassVar[tuple[ElementParameter, ...]] = (
        ElementParameter("stiffness", "N/m", 1.0e3, (0.0, INF), "spring stiffness k"),
        ElementParameter("damping", "Ns/m", 0.0, (0.0, INF), "viscous damping d"),
        ElementParameter("free_length", "m", 0.0, (-INF, INF), "free length L0"),
    )
    stiffness: Number | None = None
    damping: Number | None = None
    free_length: Number | None = None

    def law(self, s, s_dot, p):
        return p["stiffness"] * (s - p["free_length"]) + p["damping"] * s_dot

    def potential_energy(self, q, p):
        s = q[0] - q[1] if len(self.coordinates) == 2 else q[0]
        return p["stiffness"] * (s - p["free_length"]) ** 2 / 2


@dataclasses.dataclass(frozen=True)
class PolynomialSpringDamper(AbstractTwoPointElement):
    """Polynomial spring and damper (Lauss et al. 2018, Sec. 5: elastomer and hydro damper)::

        f = k1 e + k2 e^2 + k3 e^3 + d1 s_dot + d2 s_dot |s_dot| + d3 s_dot^3,   e = s - L0

    The quadratic damping term uses ``s_dot |s_dot|`` so that every damping term
    dissipates; it is continuously differentiable, so it needs no smoothing.
    """

    type_name: ClassVar[str] = "polynomial_spring_damper"
    parameters: ClassVar[tuple[ElementParameter, ...]] = (
        ElementParameter("k1", "N/m", 1.0e3, (0.0, INF), "linear stiffness"),
        ElementParameter("k2", "N/m^2", 0.0, (-INF, INF), "quadratic stiffness"),
        ElementParameter("k3", "N/m^3", 0.0, (0.0, INF), "cubic stiffness"),
        ElementParameter("d1", "Ns/m", 0.0, (0.0, INF), "linear damping"),
        ElementParameter("d2", "Ns^2/m^2", 0.0, (0.0, INF), "quadratic damping"),
        ElementParameter("d3", "Ns^3/m^3", 0.0, (0.0, INF), "cubic damping"),
        ElementParameter("free_length", "m", 0.0, (-INF, INF), "free length L0"),
    )
    k1: Number | None = None
    k2: Number | None = None
    k3: Number | None = None
    d1: Number | None = None
    d2: Number | None = None
    d3: Number | None = None
    free_length: Number | None = None

    def law(self, s, s_dot, p):
        e = s - p["free_length"]
        spring = p["k1"] * e + p["k2"] * e**2 + p["k3"] * e**3
        return spring + p["d1"] * s_dot + p["d2"] * s_dot * sp.Abs(s_dot) + p["d3"] * s_dot**3

    def potential_energy(self, q, p):
        s = q[0] - q[1] if len(self.coordinates) == 2 else q[0]
        e = s - p["free_length"]
        return p["k1"] * e**2 / 2 + p["k2"] * e**3 / 3 + p["k3"] * e**4 / 4


def _natural_spline_basis(knots: np.ndarray) -> np.ndarray:
    """Coefficients ``B[i, k, j]``: on interval ``i`` the spline through values ``F`` is
    ``sum_k F_k sum_j B[i, k, j] (s - s_i)**j`` (natural end conditions)."""
    n = len(knots)
    h = np.diff(knots)
    # Second derivatives m solve A m = R F with m_0 = m_{n-1} = 0.
    A = np.zeros((n, n))
    R = np.zeros((n, n))
    A[0, 0] = A[-1, -1] = 1.0
    for i in range(1, n - 1):
        A[i, i - 1], A[i, i], A[i, i + 1] = h[i - 1], 2 * (h[i - 1] + h[i]), h[i]
        R[i, i - 1], R[i, i], R[i, i + 1] = 6 / h[i - 1], -6 / h[i - 1] - 6 / h[i], 6 / h[i]
    Mmat = np.linalg.solve(A, R)  # m = Mmat @ F
    basis = np.zeros((n - 1, n, 4))
    eye = np.eye(n)
    for i in range(n - 1):
        y0, y1 = eye[i], eye[i + 1]
        m0, m1 = Mmat[i], Mmat[i + 1]
        basis[i, :, 0] = y0
        basis[i, :, 1] = (y1 - y0) / h[i] - h[i] * (2 * m0 + m1) / 6
        basis[i, :, 2] = m0 / 2
        basis[i, :, 3] = (m1 - m0) / (6 * h[i])
    return basis


@dataclasses.dataclass(frozen=True)
class SplineCharacteristic(AbstractTwoPointElement):
    """A force (torque) characteristic through knots whose values are parameters.

    ``f = spline(s) + d s_dot`` with a natural cubic spline through ``(knots[k],
    values[k])``, extended linearly with the end slopes outside the knots.  Each value
    is an expression (usually one parameter per knot), so a measured characteristic can
    be identified point by point.  The spline is linear in the values, which keeps the
    identification well conditioned.
    """

    type_name: ClassVar[str] = "spline_characteristic"
    parameters: ClassVar[tuple[ElementParameter, ...]] = (
        ElementParameter("values", "N", 0.0, (-INF, INF), "force at the knots", vector=True),
        ElementParameter("damping", "Ns/m", 0.0, (0.0, INF), "viscous damping"),
    )
    zero_at_rest: ClassVar[bool] = False
    knots: tuple[float, ...] = ()
    values: tuple[Number, ...] | None = None
    damping: Number | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "knots", _check_knots(self, self.knots, self.values))

    @classmethod
    def example(cls):
        """Representative instance for ``plugins check``."""
        return cls(name="probe", coordinates=("end_a", "end_b"), knots=(-0.1, -0.02, 0.0, 0.03, 0.1),
                   values=(-200.0, -30.0, 0.0, 50.0, 400.0), damping=None)

    def law(self, s, s_dot, p):
        return natural_spline(s, self.knots, p["values"]) + p["damping"] * s_dot


def natural_spline(x: sp.Expr, knots: tuple[float, ...], values) -> sp.Expr:
    """The natural cubic spline through ``(knots[k], values[k])`` at ``x``, extended linearly
    with the end slopes outside the knots; linear in the values (which may be expressions)."""
    knot_array = np.array(knots)
    basis = _natural_spline_basis(knot_array)
    n = len(knots)
    pieces = []
    for i in range(n - 1):
        coeffs = [sum(sp.Float(basis[i, k, j], 17) * values[k] for k in range(n)) for j in range(4)]
        dx = x - sp.Float(knots[i], 17)
        pieces.append(coeffs[0] + dx * (coeffs[1] + dx * (coeffs[2] + dx * coeffs[3])))
    # Linear extension with the end slopes.
    c_first = [sum(sp.Float(basis[0, k, 1], 17) * values[k] for k in range(n))]
    hl = knots[-1] - knots[-2]
    slope_last = sum(
        sp.Float(basis[-1, k, 1] + 2 * basis[-1, k, 2] * hl + 3 * basis[-1, k, 3] * hl**2, 17) * values[k]
        for k in range(n)
    )
    below = values[0] + c_first[0] * (x - sp.Float(knots[0], 17))
    above = values[-1] + slope_last * (x - sp.Float(knots[-1], 17))
    branches = [(below, x < sp.Float(knots[0], 17))]
    for i, piece in enumerate(pieces):
        branches.append((piece, x < sp.Float(knots[i + 1], 17)))
    branches.append((above, True))
    return sp.Piecewise(*branches)


def _check_knots(element, knots: tuple[float, ...], values) -> tuple[float, ...]:
    knots = tuple(float(k) for k in knots)
    if not all(math.isfinite(k) for k in knots):
        raise ModelError(f"{element.where('knots')}: the knot positions must be finite numbers.")
    if len(knots) < 3 or any(b <= a for a, b in zip(knots, knots[1:])):
        raise ModelError(f"{element.where('knots')}: give at least three strictly increasing knot positions.")
    if values is not None and len(values) != len(knots):
        raise ModelError(f"{element.where('values')}: {len(values)} values for {len(knots)} knots.")
    return knots


@dataclasses.dataclass(frozen=True)
class VelocityCharacteristic(AbstractTwoPointElement):
    """A force characteristic over the relative *velocity*: a damper curve.

    ``f = spline(s_dot) + k (s - L0)``: the natural cubic spline through ``(knots[k],
    values[k])`` (knots are velocities, m/s or rad/s; values forces or torques), extended
    linearly with the end slopes, plus an optional parallel linear spring (``stiffness``,
    default 0).  Like :class:`SplineCharacteristic` the values are expressions (usually one
    parameter per knot, so a measured damper curve is identified point by point), the law
    is linear in them and twice continuously differentiable in ``s_dot``.

    The element is passive if the curve opposes the motion, ``(spline(v) - spline(0)) v >= 0``
    (a rising curve); with numeric values this is checked on a fine grid when the element is
    created (between the knots a cubic may overshoot: add knots where it does).
    """

    type_name: ClassVar[str] = "velocity_characteristic"
    parameters: ClassVar[tuple[ElementParameter, ...]] = (
        ElementParameter("values", "N", 0.0, (-INF, INF), "force at the velocity knots", vector=True),
        ElementParameter("stiffness", "N/m", 0.0, (0.0, INF), "parallel linear stiffness k"),
        ElementParameter("free_length", "m", 0.0, (-INF, INF), "free length L0 of the parallel spring"),
    )
    zero_at_rest: ClassVar[bool] = False
    knots: tuple[float, ...] = ()
    values: tuple[Number, ...] | None = None
    stiffness: Number | None = None
    free_length: Number | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        knots = _check_knots(self, self.knots, self.values)
        object.__setattr__(self, "knots", knots)
        numbers = self.values if self.values is not None else ()
        if numbers and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in numbers):
            self._check_passive(np.array(knots), np.array(numbers, dtype=float))

    def _check_passive(self, knots: np.ndarray, values: np.ndarray) -> None:
        if not np.all(np.isfinite(values)):
            raise ModelError(f"{self.where('values')}: the values must be finite numbers.")
        basis = _natural_spline_basis(knots)
        grid = np.union1d(np.linspace(knots[0], knots[-1], 40 * len(knots)), [0.0])

        def curve(x: np.ndarray) -> np.ndarray:
            i = np.clip(np.searchsorted(knots, x, side="right") - 1, 0, len(knots) - 2)
            dx = x - knots[i]
            coeffs = np.einsum("ikj,k->ij", basis, values)[i]
            return coeffs[:, 0] + dx * (coeffs[:, 1] + dx * (coeffs[:, 2] + dx * coeffs[:, 3]))

        f0 = curve(np.array([0.0]))[0] if knots[0] <= 0.0 <= knots[-1] else None
        if f0 is None:
            return
        power = (curve(grid) - f0) * grid
        scale = np.max(np.abs(values)) * np.max(np.abs(knots)) + 1e-300
        if np.min(power) < -1e-12 * scale:
            worst = grid[int(np.argmin(power))]
            raise ModelError(
                f"{self.where('values')}: the damper curve generates energy near velocity {worst:.4g} (the force "
                "does not oppose the motion there); give values that rise with the velocity, or add knots where "
                "the cubic spline overshoots."
            )

    @classmethod
    def example(cls):
        """Representative instance for ``plugins check`` (a degressive damper curve)."""
        return cls(name="probe", coordinates=("end_a", "end_b"), knots=(-1.0, -0.2, 0.0, 0.2, 1.0),
                   values=(-900.0, -400.0, 0.0, 600.0, 1500.0))

    def law(self, s, s_dot, p):
        return natural_spline(s_dot, self.knots, p["values"]) + p["stiffness"] * (s - p["free_length"])

    def potential_energy(self, q, p):
        s = q[0] - q[1] if len(self.coordinates) == 2 else q[0]
        return p["stiffness"] * (s - p["free_length"]) ** 2 / 2
