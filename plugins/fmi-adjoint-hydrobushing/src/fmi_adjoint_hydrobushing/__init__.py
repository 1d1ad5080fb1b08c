"""A hydro bushing as an fmi-adjoint force element (example plugin).

Rubber spring and damper in parallel with a fluid branch: the bulge stiffness ``k_b``
pushes fluid through an orifice whose loss is quadratic in the flow velocity.  The
fluid column is an internal massless node ``<element>_fluid``::

    q_i --+-- k_r, d_r (rubber) ------------------------------+-- q_j (or ground)
          +-- /\\/\\ k_b /\\/\\ -- fluid -- [= orifice d_o w|w| =] --+

Orifice force ``f_o = d_o w sqrt(w^2 + w_eps^2)`` with ``w = v_fluid - v_j``: the
regularization ``w_eps`` makes the law smooth at zero flow (gradients belong to this
smoothed model) and keeps the fluid node's force balance solvable at rest.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import sympy as sp

from fmi_adjoint.forces import AbstractLocalElement, ElementParameter

__all__ = ["HydroBushing"]

INF = math.inf


@dataclasses.dataclass(frozen=True)
class HydroBushing(AbstractLocalElement):
    """Hydro bushing between two coordinates or a coordinate and ground."""

    type_name: ClassVar[str] = "hydro_bushing"
    parameters: ClassVar[tuple[ElementParameter, ...]] = (
        ElementParameter("k_r", "N/m", 2.0e5, (0.0, INF), "rubber stiffness"),
        ElementParameter("d_r", "Ns/m", 50.0, (0.0, INF), "rubber damping"),
        ElementParameter("k_b", "N/m", 1.0e5, (0.0, INF), "bulge stiffness"),
        ElementParameter("d_o", "Ns^2/m^2", 2.0e4, (0.0, INF), "orifice loss coefficient"),
        ElementParameter("w_eps", "m/s", 1.0e-3, (1.0e-9, 1.0), "orifice regularization velocity"),
    )
    internal: ClassVar[tuple[str, ...]] = ("fluid",)
    typical_state: ClassVar[tuple[float, float]] = (1.0e-3, 0.1)

    k_r: float | str | None = None
    d_r: float | str | None = None
    k_b: float | str | None = None
    d_o: float | str | None = None
    w_eps: float | str | None = None

    def local_forces(self, q, v, p):
        node = len(self.coordinates)
        q_j = q[1] if node == 2 else 0
        v_j = v[1] if node == 2 else 0
        f_r = p["k_r"] * (q[0] - q_j) + p["d_r"] * (v[0] - v_j)
        f_b = p["k_b"] * (q[0] - q[node])
        w = v[node] - v_j
        f_o = p["d_o"] * w * sp.sqrt(w**2 + p["w_eps"] ** 2)
        if node == 2:
            return (-f_r - f_b, f_r + f_o, f_b - f_o)
        return (-f_r - f_b, f_b - f_o)

    def potential_energy(self, q, p):
        node = len(self.coordinates)
        q_j = q[1] if node == 2 else 0
        return p["k_r"] * (q[0] - q_j) ** 2 / 2 + p["k_b"] * (q[0] - q[node]) ** 2 / 2
