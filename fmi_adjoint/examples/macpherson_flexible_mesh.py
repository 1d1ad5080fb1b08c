"""The FE meshes of ``macpherson_flexible.toml``: the control arm and the knuckle of the
MacPherson rig of Vanpaemel et al. (seed 003, Sec. 5.1) as frames of 3D Euler-Bernoulli beams
(:func:`fmi_adjoint.flexible.beams.frame_mesh`), written as Matrix Market files next to the
model (``fe = {...}`` of the model file)::

    python -m fmi_adjoint.examples.macpherson_flexible_mesh     # rewrites the six files

The paper gives neither meshes nor hard points; the hard points are those of ``macpherson.toml``
(global axes, design position), the sections are chosen for this project (steel, E = 210 GPa,
G = 81 GPa, rho = 7850 kg/m^3):

* control arm (1.24 kg of beams): a triangle of the two legs of the A (front bushing to ball
  joint, rear bushing to ball joint) and the cross member between the bushings, and a web from
  a centre node (near the centroid of the three hard points) to each corner; a steel tube of
  22 mm outer diameter and 1.5 mm wall (A = 9.66e-5 m^2, I = 5.10e-9 m^4);
* knuckle (3.17 kg of beams): a hub node near its centre of mass with five arms to the strut
  clamp, the ball joint, the wheel centre (the spindle), the tie-rod arm and a brake-caliper
  lug (0.090, 0.700, 0.330); a solid steel bar of 30 mm diameter (A = 7.07e-4 m^2,
  I = 3.98e-8 m^4).

Every member has :data:`ELEMENTS` elements, HRZ-lumped mass (:class:`LumpedMass`: the
diagonal mass that eq. (11) of the paper assumes).  The beams carry only part of the rigid
body's mass; the rest (bushings, ball-joint housing, hub and bearing, the knuckle half of the
load cell) is *ballast* at the centre node: a point mass, placed where it puts the centre of
mass of beams and ballast at the rigid body's (:func:`_centred`: the arm's centre node ends
6 mm, the knuckle's hub 12 mm from the nominal point), and a rotary inertia block, the rigid
body's inertia tensor less that of the beams and the point mass (that of a rigid body, checked).
The beams' own nodal rotary inertia is that of rigid rod pieces (:func:`_segment_rotary_inertia`).
So the flexible bodies have the mass, centre of mass and inertia of the rigid bodies of
``macpherson.toml`` exactly, and the two models agree when the stiffness factors are large
(``tests/test_macpherson_flexible.py``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

from ..errors import ModelError
from ..flexible import BeamMesh, BeamSection, FEModel, LumpedMass, beam_model
from ..flexible.beams import frame_mesh

__all__ = ["ARM", "ELEMENTS", "KNUCKLE", "BodyMesh", "body_fe", "mass_properties", "write_files"]

#: Elements per member.
ELEMENTS = 3

_STEEL = {"E": 2.1e11, "G": 8.1e10, "rho": 7850.0}


def _tube(outer: float, wall: float) -> BeamSection:
    """A circular steel tube of ``outer`` diameter and ``wall`` thickness [m]."""
    ro, ri = outer / 2, outer / 2 - wall
    second = np.pi * (ro**4 - ri**4) / 4
    return BeamSection(A=float(np.pi * (ro**2 - ri**2)), Iy=float(second), Iz=float(second), J=float(2 * second),
                       **_STEEL)


@dataclasses.dataclass(frozen=True)
class BodyMesh:
    """One flexible body: its hard points (node id -> global position in the design
    position), members, section and the rigid body whose mass properties it carries.

    ``centre`` is the node near the centre of mass that takes the ballast."""

    name: str
    points: dict[int, tuple[float, float, float]]
    members: tuple[tuple[int, int], ...]
    section: BeamSection
    mass: float
    centre_of_mass: tuple[float, float, float]
    inertia: tuple[float, float, float]
    centre: int


#: Control arm: 1 front bushing (revolute joint, reference node), 2 rear bushing, 3 ball
#: joint, 4 centre (start position: moved by the ballast fit, :func:`_centred`).  Rigid:
#: 3.0 kg, inertia (0.025, 0.02, 0.04) kg m^2 (macpherson.toml).
ARM = BodyMesh("arm", {1: (0.020, 0.370, 0.160), 2: (-0.280, 0.390, 0.165), 3: (0.005, 0.690, 0.140),
                       4: (-0.085, 0.483, 0.155)},
               ((1, 3), (2, 3), (1, 2), (4, 1), (4, 2), (4, 3)), _tube(0.022, 0.0015), 3.0, (-0.085, 0.483, 0.155),
               (0.025, 0.02, 0.04), 4)

#: Knuckle: 1 strut clamp (fixed joint, reference node), 2 lower ball joint, 3 wheel centre,
#: 4 tie-rod arm, 5 hub (start position the centre of mass, moved by :func:`_centred`), 6
#: brake-caliper lug.  Rigid: 7.0 kg, inertia
#: (0.045, 0.035, 0.03).
KNUCKLE = BodyMesh("knuckle", {1: (0.0, 0.665, 0.420), 2: (0.005, 0.690, 0.140), 3: (0.0, 0.740, 0.290),
                               4: (-0.135, 0.690, 0.290), 5: (0.0, 0.705, 0.270), 6: (0.090, 0.700, 0.330)},
                   ((5, 1), (5, 2), (5, 3), (5, 4), (5, 6)),
                   BeamSection.circle(0.015, **_STEEL), 7.0, (0.0, 0.705, 0.270), (0.045, 0.035, 0.03), 5)


def mass_properties(fe: FEModel) -> tuple[float, np.ndarray, np.ndarray]:
    """Mass, centre of mass and inertia tensor (about the centre of mass) of an FE model with a
    diagonal translational mass and nodal rotary blocks: what the rigid motion of the flexible
    natural coordinates sees (eq. (11) and the nodes' rotary inertia, fmi_adjoint.mbs.flexible)."""
    M = sp.csr_matrix(fe.mass)
    masses = np.array([M[fe.dof_index(int(n), 0), fe.dof_index(int(n), 0)] for n in fe.node_ids])
    xyz = np.asarray(fe.coordinates, dtype=float)
    total = float(masses.sum())
    centre = masses @ xyz / total
    inertia = np.zeros((3, 3))
    for node, m, x in zip(fe.node_ids, masses, xyz - centre):
        rows = [fe.dof_index(int(node), 3 + c) for c in range(3)]
        inertia += m * (x @ x * np.eye(3) - np.outer(x, x)) + M[rows][:, rows].toarray()
    return total, centre, inertia


def _segment_rotary_inertia(fe: FEModel, mesh: BeamMesh, section: BeamSection) -> FEModel:
    """``fe`` with each node's rotational mass block replaced by the inertia, about the node, of
    the half elements next to it taken as rigid rods: ``rho Ip l`` about the element axis ``e``
    and ``rho I l + rho A l^3 / 3`` across it (``l`` half the element length, ``Ip = Iy + Iz``;
    circular sections: ``Iy = Iz = I``).

    The HRZ lumping of the beams (:class:`LumpedMass`) gives a node of a short, thick
    Euler-Bernoulli element a polar inertia larger than the sum of the two bending ones, which
    no rigid body has: the Euler tensor ``tr(J)/2 - J`` of the node's rotation
    (fmi_adjoint.mbs.flexible, the nodes' rotary inertia) is then indefinite, and so is the
    mass matrix of the natural coordinates.  Rigid rod pieces are physical by construction."""
    M = sp.lil_matrix(fe.mass)
    blocks = {int(node): np.zeros((3, 3)) for node in fe.node_ids}
    where = {int(node): k for k, node in enumerate(mesh.node_ids)}
    s = section
    for first, second in mesh.elements.tolist():
        axis = mesh.coordinates[where[second]] - mesh.coordinates[where[first]]
        half = float(np.linalg.norm(axis)) / 2
        e = axis / (2 * half)
        across = s.rho * (s.Iy + s.Iz) / 2 * half + s.rho * s.A * half**3 / 3
        J = s.rho * (s.Iy + s.Iz) * half * np.outer(e, e) + across * (np.eye(3) - np.outer(e, e))
        blocks[first] += J
        blocks[second] += J
    for node, J in blocks.items():
        rows = [fe.dof_index(node, 3 + c) for c in range(3)]
        for r in range(3):
            for c in range(3):
                M[rows[r], rows[c]] = J[r, c]
    return dataclasses.replace(fe, mass=sp.csr_matrix(M))


def _centred(body: BodyMesh) -> tuple[FEModel, float]:
    """The beams of ``body`` with its centre node where the ballast must sit for the centre of
    mass to be the rigid body's, and the ballast mass (fixed point: the web members move with
    the centre node; converges in a few steps, the web being light)."""
    c = np.asarray(body.centre_of_mass, dtype=float)
    points = dict(body.points)
    for _ in range(50):
        mesh = frame_mesh(points, body.members, ELEMENTS, orientation=(0.3, 0.4, 0.9))
        fe = _segment_rotary_inertia(beam_model(mesh, body.section, mass=LumpedMass()).fe, mesh, body.section)
        beam_mass, beam_centre, _ = mass_properties(fe)
        extra = body.mass - beam_mass
        if extra <= 0:
            raise ModelError(f"{body.name}: the beams weigh {beam_mass:.3f} kg, more than the rigid body's "
                             f"{body.mass} kg; choose a lighter section.")
        moved = c + beam_mass / extra * (c - beam_centre)
        if np.allclose(moved, points[body.centre], rtol=0, atol=1e-15):
            return fe, extra
        points[body.centre] = tuple(moved)
    raise ModelError(f"{body.name}: the centre node did not settle; give a lighter web.")


def body_fe(body: BodyMesh) -> FEModel:
    """The beams of ``body`` with their ballast (module docstring)."""
    fe, extra = _centred(body)
    c = np.asarray(body.centre_of_mass, dtype=float)
    beam_mass, beam_centre, beam_inertia = mass_properties(fe)
    offset = np.asarray(fe.coordinates)[list(fe.node_ids).index(body.centre)] - c
    rotary = np.diag(body.inertia) - beam_inertia - extra * (offset @ offset * np.eye(3) - np.outer(offset, offset))
    # the beams' inertia about their own centre, moved to the rigid body's
    d = beam_centre - c
    rotary -= beam_mass * (d @ d * np.eye(3) - np.outer(d, d))
    rows = [fe.dof_index(body.centre, c) for c in range(6)]
    J = rotary + sp.csr_matrix(fe.mass)[rows[3:]][:, rows[3:]].toarray()
    # a rigid body's inertia: its Euler tensor tr(J)/2 - J positive definite (principal moments
    # obey the triangle inequality), as the nodes' rotary inertia of the FNCF needs
    if np.linalg.eigvalsh(np.trace(J) / 2 * np.eye(3) - J).min() <= 0:
        raise ModelError(f"{body.name}: the beams leave the centre node a rotary inertia with principal moments "
                         f"{np.linalg.eigvalsh(J)}, which no rigid body has; choose lighter or more compact members.")
    added = sp.lil_matrix(fe.mass.shape)
    for r in range(3):
        added[rows[r], rows[r]] = extra
        for s in range(3):
            added[rows[3 + r], rows[3 + s]] = rotary[r, s]
    return dataclasses.replace(fe, mass=sp.csr_matrix(fe.mass + added.tocsr()),
                               source=f"{fe.source} with ballast ({body.name})")


def write_files(folder: Path) -> list[Path]:
    """Write ``macpherson_flexible_<body>_{nodes.csv,mass.mtx,stiffness.mtx}`` (six DOFs per
    node in the order of the node list, full precision) into ``folder``."""
    written = []
    for body in (ARM, KNUCKLE):
        fe = body_fe(body)
        order = np.argsort(fe.node_ids)
        ids = np.asarray(fe.node_ids)[order]
        perm = np.array([fe.dof_index(int(n), c) for n in ids for c in range(6)])
        stem = folder / f"macpherson_flexible_{body.name}"
        nodes = Path(f"{stem}_nodes.csv")
        nodes.write_text("id,x,y,z\n" + "".join(f"{n},{x!r},{y!r},{z!r}\n" for n, (x, y, z)
                                                 in zip(ids.tolist(), np.asarray(fe.coordinates)[order].tolist())))
        written.append(nodes)
        for role, matrix in (("mass", fe.mass), ("stiffness", fe.stiffness)):
            path = Path(f"{stem}_{role}.mtx")
            full = sp.csr_matrix(matrix)[perm][:, perm]
            scipy.io.mmwrite(path, sp.coo_matrix(full), symmetry="general", precision=17,
                             comment=f"{body.name} of macpherson_flexible.toml: written by macpherson_flexible_mesh.py")
            written.append(path)
    return written


if __name__ == "__main__":
    for path in write_files(Path(__file__).resolve().parent):
        print(path.name)
