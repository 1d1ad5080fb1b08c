"""The rigid body of a flexible body's masses, for the rigid-limit tests of the flexible
formulations (tests/test_fncf.py, tests/test_ffrf.py)."""

from __future__ import annotations

import numpy as np

from fmi_adjoint import mbs
from fmi_adjoint.model import Parameter, SimulationSettings


def rigid_pendulum(fe, length: float, parameters: tuple[Parameter, ...],
                   settings: SimulationSettings) -> mbs.MultibodySystem:
    """A straight FE beam along x from the origin, as the spatial rigid body of its lumped
    masses (total mass, centre of mass, inertia: the translational masses' second moment plus
    the nodes' rotary inertia), hinged at the origin about z under gravity ``-g y``; output the
    tip's x and y."""
    dofs = np.asarray(fe.dofs)
    m_diag = fe.mass.diagonal()
    x = np.asarray(fe.coordinates)[:, 0]
    node_x = {int(n): x[k] for k, n in enumerate(fe.node_ids)}
    masses = {int(n): m for (n, c), m in zip(dofs, m_diag) if c == 0}
    total = sum(masses.values())
    centre = sum(m * node_x[n] for n, m in masses.items()) / total
    rotary = np.zeros(3)
    for (_, c), m in zip(dofs, m_diag):
        if c >= 3:
            rotary[c - 3] += m
    arm = sum(m * (node_x[n] - centre) ** 2 for n, m in masses.items())
    return mbs.MultibodySystem(
        "rigid_pendulum", parameters=parameters,
        bodies=(mbs.SpatialRigidBody("rod", mass=total, inertia=(rotary[0], arm + rotary[1], arm + rotary[2]),
                                     position=(centre, 0, 0)),),
        gravity=(0, "-g", 0),
        markers=(mbs.Marker("pivot", "ground"), mbs.Marker("root_b", "rod", position=(-centre, 0, 0)),
                 mbs.Marker("tip", "rod", position=(length - centre, 0, 0))),
        joints=(mbs.Revolute("hinge", "pivot", "root_b"),),
        sensors=(mbs.MarkerPosition("tip_pos", "tip", components=("x", "y")),), simulation=settings)
