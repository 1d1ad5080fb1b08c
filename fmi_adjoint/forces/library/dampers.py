"""Maxwell elements and the torsional vibration damper built from them."""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

from ...errors import ModelError
from ..base import AbstractLocalElement, ElementParameter

__all__ = ["MaxwellElement", "TorsionalVibrationDamper"]

Number = str | float | int
INF = math.inf


@dataclasses.dataclass(frozen=True)
class MaxwellElement(AbstractLocalElement):
    """A damper in series with a spring through an internal massless node::

        q_i  |---[= d =]---o---/\\/\\ k /\\/\\---|  q_j (or ground)
                          node

    The damper force ``f_d = d (v_i - v_node)`` acts between the first coordinate and
    the node, the spring force ``f_k = k (q_node - q_j)`` between the node and the
    second coordinate (ground if there is none).  The node is a massless coordinate
    named ``<element>_node``; its force balance ``f_d = f_k`` is part of the DAE and is
    also enforced at the initial state.
    """

    type_name: ClassVar[str] = "maxwell"
    parameters: ClassVar[tuple[ElementParameter, ...]] = (
        ElementParameter("stiffness", "N/m", 1.0e4, (0.0, INF), "series spring k"),
        ElementParameter("damping", "Ns/m", 10.0, (0.0, INF), "series damper d"),
    )
    internal: ClassVar[tuple[str, ...]] = ("node",)
    stiffness: Number | None = None
    damping: Number | None = None

    def local_forces(self, q, v, p):
        node = len(self.coordinates)
        f_d = p["damping"] * (v[0] - v[node])
        q_j = q[1] if node == 2 else 0
        f_k = p["stiffness"] * (q[node] - q_j)
        if node == 2:
            return (-f_d, f_k, f_d - f_k)
        return (-f_d, f_d - f_k)

    def potential_energy(self, q, p):
        node = len(self.coordinates)
        q_j = q[1] if node == 2 else 0
        return p["stiffness"] * (q[node] - q_j) ** 2 / 2


@dataclasses.dataclass(frozen=True)
class TorsionalVibrationDamper(AbstractLocalElement):
    """Torsional vibration damper: a parallel spring (and damper) plus N Maxwell branches
    between the hub and the ring (Oberpeilsteiner 2018, Sec. 4.4.2, Fig. 4.23)::

        hub --+-- c_par, d_par -----------------------+-- ring
              +--[= d_1 =]-- node1 --/\\/\\ c_1 /\\/\\--+
              +--[= d_2 =]-- node2 --/\\/\\ c_2 /\\/\\--+

    ``coordinates = (hub, ring)``; ``stiffness`` and ``damping`` list the branch values
    ``c_b*``, ``d_b*``; the nodes are massless coordinates ``<element>_node1`` ... .  (The
    printed entry ``F_6`` of the dissertation has ``+d_1*(v_6 - v_24)``; the physical sign,
    used here, is ``-d_1*(v_hub - v_node)`` on the hub.)
    """

    type_name: ClassVar[str] = "tvd"
    parameters: ClassVar[tuple[ElementParameter, ...]] = (
        ElementParameter("parallel_stiffness", "Nm/rad", 1.0e3, (0.0, INF), "parallel spring c_par*"),
        ElementParameter("parallel_damping", "Nms/rad", 0.0, (0.0, INF), "parallel damper"),
        ElementParameter("stiffness", "Nm/rad", 1.0e4, (0.0, INF), "branch springs c_b*", vector=True),
        ElementParameter("damping", "Nms/rad", 1.0, (0.0, INF), "branch dampers d_b*", vector=True),
    )
    ends: ClassVar[tuple[int, ...]] = (2,)
    parallel_stiffness: Number | None = None
    parallel_damping: Number | None = None
    stiffness: tuple[Number, ...] | None = None
    damping: tuple[Number, ...] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.stiffness is None or self.damping is None or len(self.stiffness) != len(self.damping):
            raise ModelError(
                f"{self.where()}: give 'stiffness' and 'damping' as lists of equal length (one entry per Maxwell "
                "branch)."
            )
        if not self.stiffness:
            raise ModelError(f"{self.where()}: a TVD needs at least one Maxwell branch.")

    @classmethod
    def example(cls):
        """Representative instance for ``plugins check``."""
        return cls(name="probe", coordinates=("end_a", "end_b"), stiffness=(2.0e4, 5.0e3), damping=(3.0, 0.8))

    def internal_nodes(self) -> tuple[str, ...]:
        return tuple(f"node{b + 1}" for b in range(len(self.stiffness or ())))

    def local_forces(self, q, v, p):
        n_branch = len(self.internal_nodes())
        f_par = p["parallel_stiffness"] * (q[0] - q[1]) + p["parallel_damping"] * (v[0] - v[1])
        hub, ring = -f_par, f_par
        nodes = []
        for b in range(n_branch):
            f_d = p["damping"][b] * (v[0] - v[2 + b])
            f_k = p["stiffness"][b] * (q[2 + b] - q[1])
            hub -= f_d
            ring += f_k
            nodes.append(f_d - f_k)
        return (hub, ring, *nodes)

    def potential_energy(self, q, p):
        energy = p["parallel_stiffness"] * (q[0] - q[1]) ** 2 / 2
        for b in range(len(self.internal_nodes())):
            energy += p["stiffness"][b] * (q[2 + b] - q[1]) ** 2 / 2
        return energy
