"""Friction laws, regularized at zero velocity (see :mod:`fmi_adjoint.forces.smoothing`)."""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import sympy as sp

from ...errors import ModelError
from ..base import AbstractTwoPointElement, ElementParameter
from ..smoothing import blend, smooth_sign

__all__ = ["PacejkaFriction", "MagicFormula", "StribeckFriction"]

Number = str | float | int
INF = math.inf


def _pacejka(v, a, b, c, e):
    # Vanpaemel et al. eq. (22c): a sin(c atan[b (1 - e) v + e atan(b v)]).
    return a * sp.sin(c * sp.atan(b * (1 - e) * v + e * sp.atan(b * v)))


@dataclasses.dataclass(frozen=True)
class PacejkaFriction(AbstractTwoPointElement):
    """Asymmetric viscous plus Pacejka-formula friction of a strut (Vanpaemel et al.,
    eq. (22b)-(22c)), one parameter set for rebound (``v >= 0``, index 1) and one for
    compression (``v < 0``, index 2)::

        f = c_i v + a_fi sin(c_fi atan[b_fi (1 - e_fi) v + e_fi atan(b_fi v)])

    The two branches are blended over ``|v| < v_eps`` (both vanish at ``v = 0``, so the
    force is continuous; the blend makes its derivative continuous too).  Defaults and
    bounds are the start values and bounds of their Table 1.
    """

    type_name: ClassVar[str] = "pacejka_friction"
    parameters: ClassVar[tuple[ElementParameter, ...]] = (
        ElementParameter("c1", "Ns/m", 2000.0, (500.0, 5000.0), "viscous friction, rebound"),
        ElementParameter("c2", "Ns/m", 3000.0, (500.0, 5000.0), "viscous friction, compression"),
        ElementParameter("a_f1", "N", 100.0, (0.0, 500.0), "Pacejka peak a_f, rebound"),
        ElementParameter("b_f1", "s/m", 50.0, (10.0, 2000.0), "Pacejka stiffness b_f, rebound"),
        ElementParameter("c_f1", "1", 1.2, (1.0, 1.9), "Pacejka shape c_f, rebound"),
        ElementParameter("e_f1", "1", -10.0, (-50.0, 1.0), "Pacejka curvature e_f, rebound"),
        ElementParameter("a_f2", "N", 100.0, (0.0, 500.0), "Pacejka peak a_f, compression"),
        ElementParameter("b_f2", "s/m", 50.0, (10.0, 2000.0), "Pacejka stiffness b_f, compression"),
        ElementParameter("c_f2", "1", 1.2, (1.0, 1.9), "Pacejka shape c_f, compression"),
        ElementParameter("e_f2", "1", -10.0, (-50.0, 1.0), "Pacejka curvature e_f, compression"),
        ElementParameter("v_eps", "m/s", 1.0e-4, (1.0e-9, 1.0), "regularization velocity of the branch blend"),
    )
    dissipative: ClassVar[bool] = True
    c1: Number | None = None
    c2: Number | None = None
    a_f1: Number | None = None
    b_f1: Number | None = None
    c_f1: Number | None = None
    e_f1: Number | None = None
    a_f2: Number | None = None
    b_f2: Number | None = None
    c_f2: Number | None = None
    e_f2: Number | None = None
    v_eps: Number | None = None

    def law(self, s, s_dot, p):
        v = s_dot
        rebound = p["c1"] * v + _pacejka(v, p["a_f1"], p["b_f1"], p["c_f1"], p["e_f1"])
        compression = p["c2"] * v + _pacejka(v, p["a_f2"], p["b_f2"], p["c_f2"], p["e_f2"])
        return blend(v, rebound, compression, p["v_eps"])

    def potential_energy(self, q, p):
        return sp.Integer(0)


@dataclasses.dataclass(frozen=True)
class MagicFormula(AbstractTwoPointElement):
    """Pacejka's magic formula as a general characteristic of velocity or position::

        f = D sin(C atan(B x - E (B x - atan(B x)))) + S_v,   x = X + S_h

    with ``X`` the relative velocity (``variable = "velocity"``, a slip-like friction
    characteristic) or the relative position (``variable = "position"``).
    """

    type_name: ClassVar[str] = "magic_formula"
    parameters: ClassVar[tuple[ElementParameter, ...]] = (
        ElementParameter("B", "1/unit of x", 10.0, (0.0, 1.0e4), "stiffness factor"),
        ElementParameter("C", "1", 1.5, (0.5, 2.5), "shape factor"),
        ElementParameter("D", "N", 100.0, (0.0, 1.0e6), "peak value"),
        ElementParameter("E", "1", 0.0, (-10.0, 1.0), "curvature factor"),
        ElementParameter("S_h", "unit of x", 0.0, (-1.0, 1.0), "horizontal shift"),
        ElementParameter("S_v", "N", 0.0, (-1.0e3, 1.0e3), "vertical shift"),
    )
    zero_at_rest: ClassVar[bool] = False
    passive: ClassVar[bool] = False  # a general characteristic: its sign depends on C and E
    variable: str = "velocity"

    B: Number | None = None
    C: Number | None = None
    D: Number | None = None
    E: Number | None = None
    S_h: Number | None = None
    S_v: Number | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.variable not in ("velocity", "position"):
            raise ModelError(f"{self.where('variable')}: {self.variable!r} is not 'velocity' or 'position'.")

    def law(self, s, s_dot, p):
        x = (s_dot if self.variable == "velocity" else s) + p["S_h"]
        Bx = p["B"] * x
        return p["D"] * sp.sin(p["C"] * sp.atan(Bx - p["E"] * (Bx - sp.atan(Bx)))) + p["S_v"]


@dataclasses.dataclass(frozen=True)
class StribeckFriction(AbstractTwoPointElement):
    """Regularized Coulomb-Stribeck friction with viscous part::

        f = [F_c + (F_s - F_c) exp(-(v/v_s)^2)] * sign_eps(v) + d v

    ``sign_eps(v) = v / sqrt(v^2 + v_eps^2)`` replaces the sign function (the stick
    phase is approximated by a steep viscous law of slope about ``F_s / v_eps``).
    """

    type_name: ClassVar[str] = "stribeck_friction"
    parameters: ClassVar[tuple[ElementParameter, ...]] = (
        ElementParameter("coulomb", "N", 10.0, (0.0, INF), "Coulomb friction force F_c"),
        ElementParameter("static", "N", 15.0, (0.0, INF), "static (breakaway) friction force F_s"),
        ElementParameter("stribeck_velocity", "m/s", 0.01, (1.0e-6, INF), "Stribeck velocity v_s"),
        ElementParameter("damping", "Ns/m", 0.0, (0.0, INF), "viscous friction d"),
        ElementParameter("v_eps", "m/s", 1.0e-4, (1.0e-9, 1.0), "regularization velocity"),
    )
    dissipative: ClassVar[bool] = True
    coulomb: Number | None = None
    static: Number | None = None
    stribeck_velocity: Number | None = None
    damping: Number | None = None
    v_eps: Number | None = None

    def law(self, s, s_dot, p):
        v = s_dot
        level = p["coulomb"] + (p["static"] - p["coulomb"]) * sp.exp(-((v / p["stribeck_velocity"]) ** 2))
        return level * smooth_sign(v, p["v_eps"]) + p["damping"] * v

    def potential_energy(self, q, p):
        return sp.Integer(0)
