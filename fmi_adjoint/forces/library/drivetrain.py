"""Drivetrain characteristics: dual-mass-flywheel arc springs and elastic backlash."""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import sympy as sp

from ...errors import ModelError
from ..base import AbstractTwoPointElement, ElementParameter
from ..smoothing import smooth_ramp, smooth_sign, smooth_step

__all__ = ["DualMassFlywheelSpring", "ElastoBacklash"]

Number = str | float | int
INF = math.inf


def _odd_ramp(x, corner, eps):
    # Smooth, odd version of max(|x| - corner, 0) * sign(x); exactly zero at x = 0.
    return smooth_ramp(x - corner, eps) - smooth_ramp(-x - corner, eps)


@dataclasses.dataclass(frozen=True)
class DualMassFlywheelSpring(AbstractTwoPointElement):
    """Dual-mass-flywheel arc spring: multi-stage torsional stiffness with an end stop.

    Over the twist ``phi = s`` the stiffness is ``k_1`` up to ``angles[0]``, ``k_2`` up to
    ``angles[1]``, ... and ``stop_stiffness`` beyond ``stop_angle`` (symmetric in
    ``phi``).  The torque is the integral of that stiffness with every corner rounded over
    ``smoothing`` radians::

        T = k_1 phi + sum_j (k_{j+1} - k_j) R(phi, angles[j]) + (k_stop - k_N) R(phi, stop_angle)
            + friction * sign_eps(phi_dot) + damping * phi_dot

    with ``R(phi, a)`` a smooth odd ramp ``~ sign(phi) max(|phi| - a, 0)``.  The friction
    term (arc-spring friction in the guides, regularized over ``omega_eps``) gives the
    hysteresis of measured DMF characteristics.
    """

    type_name: ClassVar[str] = "dmf_spring"
    parameters: ClassVar[tuple[ElementParameter, ...]] = (
        ElementParameter("stiffness", "Nm/rad", 300.0, (0.0, INF), "stage stiffnesses k_1..k_N", vector=True),
        ElementParameter("angles", "rad", 0.2, (0.0, 2.0), "stage transition angles (N-1)", vector=True),
        ElementParameter("stop_angle", "rad", 1.0, (0.0, 2.0), "end-stop angle"),
        ElementParameter("stop_stiffness", "Nm/rad", 1.0e5, (0.0, INF), "end-stop stiffness"),
        ElementParameter("smoothing", "rad", 0.01, (1.0e-6, 0.5), "corner rounding width"),
        ElementParameter("friction", "Nm", 0.0, (0.0, INF), "friction torque (hysteresis)"),
        ElementParameter("omega_eps", "rad/s", 0.01, (1.0e-6, 10.0), "friction regularization speed"),
        ElementParameter("damping", "Nms/rad", 0.0, (0.0, INF), "viscous damping"),
    )
    stiffness: tuple[Number, ...] | None = None
    angles: tuple[Number, ...] | None = None
    stop_angle: Number | None = None
    stop_stiffness: Number | None = None
    smoothing: Number | None = None
    friction: Number | None = None
    omega_eps: Number | None = None
    damping: Number | None = None

    def __post_init__(self) -> None:
        if self.angles is None and self.stiffness is not None and len(tuple(self.stiffness)) == 1:
            object.__setattr__(self, "angles", ())
        super().__post_init__()
        if self.stiffness is None or self.angles is None or len(self.angles) != len(self.stiffness) - 1:
            raise ModelError(
                f"{self.where()}: give 'stiffness' (N stages) and 'angles' (the N-1 transition angles)."
            )

    @classmethod
    def example(cls):
        """Representative instance for ``plugins check``."""
        return cls(name="probe", coordinates=("end_a", "end_b"), stiffness=(200.0, 900.0), angles=(0.3,),
                   stop_angle=0.9, friction=5.0)

    def law(self, s, s_dot, p):
        k, corners, eps = p["stiffness"], p["angles"], p["smoothing"]
        torque = k[0] * s
        for j, corner in enumerate(corners):
            torque += (k[j + 1] - k[j]) * _odd_ramp(s, corner, eps)
        torque += (p["stop_stiffness"] - k[-1]) * _odd_ramp(s, p["stop_angle"], eps)
        return torque + p["friction"] * smooth_sign(s_dot, p["omega_eps"]) + p["damping"] * s_dot


@dataclasses.dataclass(frozen=True)
class ElastoBacklash(AbstractTwoPointElement):
    """Elastic contact with backlash (total gap ``b``), smoothed::

        f = k R(s, b/2) + d s_dot w(s),   w = smooth_step(|s| - b/2)

    ``R`` is the smooth odd ramp (zero inside the gap, ``s -/+ b/2`` in contact) and the
    contact damping acts only in contact; corners are rounded over ``eps``.
    """

    type_name: ClassVar[str] = "elasto_backlash"
    parameters: ClassVar[tuple[ElementParameter, ...]] = (
        ElementParameter("stiffness", "N/m", 1.0e5, (0.0, INF), "contact stiffness"),
        ElementParameter("damping", "Ns/m", 10.0, (0.0, INF), "contact damping"),
        ElementParameter("gap", "m", 1.0e-3, (0.0, INF), "total backlash b"),
        ElementParameter("eps", "m", 1.0e-5, (1.0e-12, INF), "corner rounding width"),
    )
    stiffness: Number | None = None
    damping: Number | None = None
    gap: Number | None = None
    eps: Number | None = None

    def law(self, s, s_dot, p):
        half = p["gap"] / 2
        contact = smooth_step(sp.sqrt(s**2 + p["eps"] ** 2) - half, p["eps"])
        return p["stiffness"] * _odd_ramp(s, half, p["eps"]) + p["damping"] * s_dot * contact
