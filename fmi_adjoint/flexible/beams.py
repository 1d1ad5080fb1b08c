"""Built-in 3D beam elements on a line mesh: a flexible body without an FE tool.

Two-node elements with 6 DOFs per node (``ux uy uz rx ry rz``), their 12x12 matrices derived in
the element's local axes (``x`` along the element from its first to its second node, ``y`` in
the plane of ``x`` and the mesh's orientation vector, ``z = x x y``), rotated into the mesh
frame (``K = T^T K_local T``, ``T`` = four copies of the rotation) and assembled through the
DOF map into sparse matrices (classical direct stiffness assembly).

Local element matrices (Przemieniecki, *Theory of Matrix Structural Analysis*, 1968, Sec. 5.6
and 11.3; Friedman and Kosmatka, *Comput. Struct.* 47 (1993) 473-481 for the Timoshenko
interpolation):

* axial: ``EA/L [[1, -1], [-1, 1]]``, consistent mass ``rho A L/6 [[2, 1], [1, 2]]``;
* torsion: ``GJ/L [[1, -1], [-1, 1]]``, mass ``rho Ip L/6 [[2, 1], [1, 2]]`` with the polar
  moment ``Ip = Iy + Iz``;
* bending in the ``x-y`` plane (``uy``, ``rz = d uy/dx``, ``Iz``) and in the ``x-z`` plane
  (``uz``, ``ry = -d uz/dx``, ``Iy``): with ``Phi = 12 E I / (kappa G A L^2)``
  (``Phi = 0``: Euler-Bernoulli, cubic Hermite interpolation)::

      K = E I / ((1 + Phi) L^3) [[ 12,   6L,         -12,   6L        ],
                                 [ 6L,  (4 + Phi)L^2, -6L, (2 - Phi)L^2],
                                 [-12,  -6L,          12,  -6L        ],
                                 [ 6L,  (2 - Phi)L^2, -6L, (4 + Phi)L^2]]

  The Timoshenko element is exact for end loads: the tip deflection of a cantilever is
  ``P L^3 / (3 E I) + P L / (kappa G A)`` with any number of elements.  Its consistent mass
  is ``int rho A N_w^T N_w + rho I N_theta^T N_theta dx`` over the interpolation of Friedman
  and Kosmatka, integrated by Gauss quadrature (exact: polynomials of degree 6); the
  Euler-Bernoulli mass has no rotary inertia, as the closed-form frequencies it is compared
  with (``beta_n L`` = 1.8751, 4.6941, ... for a cantilever).

Lumped mass (:class:`LumpedMass`) is the diagonal scaling of Hinton, Rock and Zienkiewicz
(*Earthq. Eng. Struct. Dyn.* 4 (1976) 245): the diagonal of the consistent matrix scaled so
that each direction carries the element's mass, so rotations keep a positive inertia and ``M``
stays positive definite.

Linearity in the section properties (what a parameter may scale; :class:`BeamModel`):

* ``M`` is linear in ``rho``: ``M = rho M_rho``.
* Euler-Bernoulli: ``K = E K_E + G K_G`` exactly, ``K_E`` holding axial and bending
  (``A, Iy, Iz``) and ``K_G`` torsion (``J``).
* Timoshenko: axial stiffness is linear in ``E`` and torsion in ``G``, but bending is *not*
  linear in ``E`` or ``G`` separately: ``Phi`` holds ``E/G``.  It is homogeneous of degree one in
  ``(E, G)`` together, so a common stiffness scale factor ``s`` (``E -> s E``, ``G -> s G``)
  scales the whole ``K`` exactly; the bending term is returned with ``parameter=None``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from ..errors import ModelError
from .fe import FEModel, ScaledMatrix

__all__ = ["AbstractBeamTheory", "AbstractMass", "BeamMesh", "BeamModel", "BeamSection", "ConsistentMass",
           "EulerBernoulli", "LumpedMass", "Timoshenko", "beam_model", "frame_mesh", "line_mesh"]


@dataclasses.dataclass(frozen=True)
class BeamSection:
    """Section and material of a beam (SI units).

    Attributes
    ----------
    E, G : float
        Young's and shear modulus [Pa].
    A : float
        Area [m^2].
    Iy, Iz : float
        Second moments of area about the local ``y`` and ``z`` axes [m^4] (``Iz`` resists
        bending in the ``x-y`` plane).
    J : float
        Torsion constant [m^4] (``Iy + Iz`` for a circle, less for other sections).
    rho : float
        Density [kg/m^3].
    """

    E: float
    G: float
    A: float
    Iy: float
    Iz: float
    J: float
    rho: float

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ModelError(f"BeamSection: {field.name} = {value!r}; give a positive finite number (SI units).")

    @classmethod
    def circle(cls, radius: float, *, E: float, G: float, rho: float) -> BeamSection:
        """A solid circular section of ``radius``."""
        area = math.pi * radius**2
        second = math.pi * radius**4 / 4
        return cls(E=E, G=G, A=area, Iy=second, Iz=second, J=2 * second, rho=rho)

    @classmethod
    def rectangle(cls, width_y: float, height_z: float, *, E: float, G: float, rho: float) -> BeamSection:
        """A solid rectangle ``width_y`` (along local ``y``) by ``height_z``; torsion constant of
        Roark (``a b^3 (1/3 - 0.21 b/a (1 - b^4 / (12 a^4))``, ``a >= b``)."""
        a, b = max(width_y, height_z), min(width_y, height_z)
        torsion = a * b**3 * (1 / 3 - 0.21 * b / a * (1 - b**4 / (12 * a**4)))
        return cls(E=E, G=G, A=width_y * height_z, Iy=width_y * height_z**3 / 12, Iz=height_z * width_y**3 / 12,
                   J=torsion, rho=rho)


class AbstractBeamTheory:
    """How bending is modelled: :class:`EulerBernoulli` or :class:`Timoshenko`."""

    def phi(self, section: BeamSection, second_moment: float, length: float) -> float:
        """The shear parameter ``Phi = 12 E I / (kappa G A L^2)`` (0 without shear)."""
        raise NotImplementedError

    rotary_inertia: bool = False


@dataclasses.dataclass(frozen=True)
class EulerBernoulli(AbstractBeamTheory):
    """Bernoulli-Euler bending: plane sections stay normal, no shear deformation, no rotary inertia."""

    def phi(self, section: BeamSection, second_moment: float, length: float) -> float:
        return 0.0


@dataclasses.dataclass(frozen=True)
class Timoshenko(AbstractBeamTheory):
    """Timoshenko bending: shear deformation with the shear correction factor ``shear_factor``
    (``kappa``: 5/6 for a rectangle, 6/7 or 0.9 for a circle) and rotary inertia."""

    shear_factor: float = 5.0 / 6.0
    rotary_inertia: bool = True

    def __post_init__(self) -> None:
        if not 0 < self.shear_factor <= 1.5 or not math.isfinite(self.shear_factor):
            raise ModelError(f"Timoshenko: shear_factor = {self.shear_factor!r}; give the shear correction factor "
                             "kappa of the section (5/6 rectangle, about 0.9 circle).")

    def phi(self, section: BeamSection, second_moment: float, length: float) -> float:
        return 12 * section.E * second_moment / (self.shear_factor * section.G * section.A * length**2)


class AbstractMass:
    """How the element mass is distributed: :class:`ConsistentMass` or :class:`LumpedMass`."""

    def lump(self, matrix: np.ndarray) -> np.ndarray:
        """The element mass matrix to assemble from the consistent one."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class ConsistentMass(AbstractMass):
    """The consistent mass: the element's own interpolation (module docstring)."""

    def lump(self, matrix: np.ndarray) -> np.ndarray:
        return matrix


@dataclasses.dataclass(frozen=True)
class LumpedMass(AbstractMass):
    """Diagonal (HRZ) lumping: the consistent diagonal, each translation and each rotation
    direction scaled to keep its total (module docstring)."""

    def lump(self, matrix: np.ndarray) -> np.ndarray:
        diagonal = np.diag(matrix).copy()
        # (rows whose total fixes the factor, rows scaled): axial, torsion, and the two bending
        # planes, whose rotations take the factor of their translations (HRZ).
        for total_rows, scaled in (([0, 6], [0, 6]), ([3, 9], [3, 9]), ([1, 7], [1, 7, 5, 11]),
                                   ([2, 8], [2, 8, 4, 10])):
            # The consistent matrix integrates a unit rigid motion of both nodes exactly.
            total = matrix[np.ix_(total_rows, total_rows)].sum()
            share = diagonal[total_rows].sum()
            diagonal[scaled] *= total / share
        return np.diag(diagonal)


@dataclasses.dataclass(frozen=True, eq=False)
class BeamMesh:
    """A line mesh: nodes, two-node elements and the orientation of the sections.

    Attributes
    ----------
    node_ids : array of int
    coordinates : array (nodes, 3)
    elements : array (elements, 2)
        Node ids of each element's first and second node.
    orientation : array (3,)
        A vector in the local ``x-y`` plane of every element (not along any element): the
        local ``y`` axis is its part normal to the element.
    """

    node_ids: np.ndarray
    coordinates: np.ndarray
    elements: np.ndarray
    orientation: np.ndarray

    def __post_init__(self) -> None:
        ids = np.asarray(self.node_ids, dtype=np.int64).reshape(-1)
        xyz = np.asarray(self.coordinates, dtype=float)
        elements = np.asarray(self.elements)
        orientation = np.asarray(self.orientation, dtype=float).reshape(-1)
        if xyz.shape != (ids.size, 3) or not np.all(np.isfinite(xyz)):
            raise ModelError(f"BeamMesh: coordinates of shape {xyz.shape}; give one finite (x, y, z) row per node "
                             f"({ids.size}).")
        if elements.ndim != 2 or elements.shape[1] != 2 or elements.shape[0] == 0 \
                or not np.issubdtype(elements.dtype, np.integer):
            raise ModelError(f"BeamMesh: elements of shape {elements.shape}; give rows of two node ids.")
        if orientation.shape != (3,) or not np.all(np.isfinite(orientation)) or not np.any(orientation):
            raise ModelError(f"BeamMesh: orientation {orientation.tolist()}; give a non-zero vector (3 numbers) in "
                             "the local x-y plane of the elements.")
        known = set(ids.tolist())
        for number, (first, second) in enumerate(elements.tolist()):
            for node in (first, second):
                if node not in known:
                    raise ModelError(f"BeamMesh: element {number} uses node {node}, which has no coordinates; add it "
                                     "to node_ids.")
        for name, value in (("node_ids", ids), ("coordinates", xyz), ("elements", elements.astype(np.int64)),
                            ("orientation", orientation)):
            value.setflags(write=False)
            object.__setattr__(self, name, value)


def line_mesh(length: float, elements: int, *, direction: Sequence[float] = (1.0, 0.0, 0.0),
              orientation: Sequence[float] = (0.0, 1.0, 0.0), origin: Sequence[float] = (0.0, 0.0, 0.0)) -> BeamMesh:
    """A straight beam of ``length`` along ``direction`` from ``origin``, in ``elements`` equal
    elements; nodes numbered 1 (at ``origin``) to ``elements + 1`` (at the tip)."""
    if not isinstance(elements, int) or elements < 1:
        raise ModelError(f"line_mesh: elements = {elements!r}; give a positive integer.")
    if not length > 0:
        raise ModelError(f"line_mesh: length = {length!r}; give a positive length [m].")
    axis = np.asarray(direction, dtype=float)
    axis = axis / np.linalg.norm(axis)
    xyz = np.asarray(origin, dtype=float) + np.outer(np.linspace(0.0, length, elements + 1), axis)
    ids = np.arange(1, elements + 2)
    return BeamMesh(ids, xyz, np.column_stack([ids[:-1], ids[1:]]), np.asarray(orientation, dtype=float))


def frame_mesh(points: Mapping[int, Sequence[float]], members: Sequence[tuple[int, int]], elements: int = 1, *,
               orientation: Sequence[float] = (0.0, 0.0, 1.0)) -> BeamMesh:
    """A frame of straight members between given points (a control arm, a knuckle, a truss).

    ``points`` maps node ids to their coordinates; each member ``(a, b)`` joins two of them in
    ``elements`` equal elements, whose interior nodes are numbered after the largest point id,
    member by member, from ``a`` to ``b``.  Members meet at the points (rigid frame joints: the
    six DOFs of a point are shared by every member at it).  ``orientation`` is the one vector of
    :class:`BeamMesh`: it must not be parallel to any member (for circular or tubular sections
    it only names the local axes)."""
    if not isinstance(elements, int) or elements < 1:
        raise ModelError(f"frame_mesh: elements = {elements!r}; give a positive whole number of elements per member.")
    ids = [int(node) for node in points]
    xyz = [np.asarray(points[node], dtype=float).reshape(-1) for node in points]
    if not members:
        raise ModelError("frame_mesh: no members; give at least one (a, b) pair of point ids.")
    where = {node: k for k, node in enumerate(ids)}
    rows: list[tuple[int, int]] = []
    following = max(ids) + 1
    for number, (first, second) in enumerate(members):
        if first not in where or second not in where or first == second:
            raise ModelError(f"frame_mesh: member {number} = ({first}, {second}); give two different point ids of "
                             f"points ({sorted(where)}).")
        chain = [first]
        for step in range(1, elements):
            ids.append(following)
            xyz.append(xyz[where[first]] + step / elements * (xyz[where[second]] - xyz[where[first]]))
            chain.append(following)
            following += 1
        chain.append(second)
        rows.extend(zip(chain[:-1], chain[1:]))
    return BeamMesh(np.asarray(ids), np.asarray(xyz), np.asarray(rows, dtype=np.int64),
                    np.asarray(orientation, dtype=float))


@dataclasses.dataclass(frozen=True, eq=False)
class BeamModel:
    """A beam mesh's FE model and the parts its matrices are linear in (module docstring).

    Attributes
    ----------
    fe : FEModel
        The assembled model (free: no DOF is fixed; clamp by choosing interface nodes).
    mass_terms : tuple of ScaledMatrix
        ``M = sum(term.value * term.matrix)``: one term, linear in ``rho``.
    stiffness_terms : tuple of ScaledMatrix
        ``K = sum(...)``: Euler-Bernoulli ``E`` and ``G``; Timoshenko ``E`` (axial), ``G``
        (torsion) and a bending term with ``parameter=None``.
    """

    fe: FEModel
    mass_terms: tuple[ScaledMatrix, ...]
    stiffness_terms: tuple[ScaledMatrix, ...]


# Gauss-Legendre points on [0, 1]: 5 points integrate the degree-6 products of the cubic
# interpolation exactly.
_GAUSS_X, _GAUSS_W = np.polynomial.legendre.leggauss(5)
_GAUSS_X = 0.5 * (_GAUSS_X + 1.0)
_GAUSS_W = 0.5 * _GAUSS_W


def _bending_stiffness(EI: float, L: float, phi: float) -> np.ndarray:
    """Plane bending stiffness on ``(w1, theta1, w2, theta2)``, ``theta = dw/dx`` (module docstring)."""
    return EI / ((1 + phi) * L**3) * np.array([
        [12, 6 * L, -12, 6 * L],
        [6 * L, (4 + phi) * L**2, -6 * L, (2 - phi) * L**2],
        [-12, -6 * L, 12, -6 * L],
        [6 * L, (2 - phi) * L**2, -6 * L, (4 + phi) * L**2]])


def _bending_mass(rho_A: float, rho_I: float, L: float, phi: float) -> np.ndarray:
    """Plane bending mass on ``(w1, theta1, w2, theta2)``: Friedman-Kosmatka interpolation
    (Hermite for ``phi = 0``), translational plus rotary inertia ``rho_I``."""
    result = np.zeros((4, 4))
    c = 1.0 / (1.0 + phi)
    for xi, weight in zip(_GAUSS_X, _GAUSS_W):
        n_w = c * np.array([2 * xi**3 - 3 * xi**2 - phi * xi + 1 + phi,
                            L * (xi**3 - (2 + phi / 2) * xi**2 + (1 + phi / 2) * xi),
                            -(2 * xi**3 - 3 * xi**2 - phi * xi),
                            L * (xi**3 - (1 - phi / 2) * xi**2 - phi / 2 * xi)])
        n_t = c * np.array([6 / L * (xi**2 - xi), 3 * xi**2 - (4 + phi) * xi + 1 + phi,
                            -6 / L * (xi**2 - xi), 3 * xi**2 - (2 - phi) * xi])
        result += weight * L * (rho_A * np.outer(n_w, n_w) + rho_I * np.outer(n_t, n_t))
    return result


# Local DOFs of the two bending planes: (w1, theta1, w2, theta2) with theta = dw/dx.  In the
# x-z plane ry = -duz/dx, hence the signs.
_PLANE_XY = ([1, 5, 7, 11], np.array([1.0, 1.0, 1.0, 1.0]))
_PLANE_XZ = ([2, 4, 8, 10], np.array([1.0, -1.0, 1.0, -1.0]))


def _local_matrices(section: BeamSection, theory: AbstractBeamTheory, L: float, E: float, G: float,
                    rho: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Local 12x12 ``(K_axial, K_torsion, K_bending, M)`` of one element with the moduli and
    density given (so that unit values give the per-parameter parts)."""
    s = section
    axial = np.zeros((12, 12))
    torsion = np.zeros((12, 12))
    bending = np.zeros((12, 12))
    mass = np.zeros((12, 12))
    bar = np.array([[1.0, -1.0], [-1.0, 1.0]])
    bar_mass = np.array([[2.0, 1.0], [1.0, 2.0]]) * L / 6
    axial[np.ix_([0, 6], [0, 6])] = E * s.A / L * bar
    torsion[np.ix_([3, 9], [3, 9])] = G * s.J / L * bar
    mass[np.ix_([0, 6], [0, 6])] = rho * s.A * bar_mass
    mass[np.ix_([3, 9], [3, 9])] = rho * (s.Iy + s.Iz) * bar_mass
    for (rows, signs), second in ((_PLANE_XY, s.Iz), (_PLANE_XZ, s.Iy)):
        phi = theory.phi(s, second, L)
        flip = np.outer(signs, signs)
        bending[np.ix_(rows, rows)] = flip * _bending_stiffness(E * second, L, phi)
        rotary = rho * second if theory.rotary_inertia else 0.0
        mass[np.ix_(rows, rows)] = flip * _bending_mass(rho * s.A, rotary, L, phi)
    return axial, torsion, bending, mass


def _rotation(first: np.ndarray, second: np.ndarray, orientation: np.ndarray, number: int) -> tuple[float, np.ndarray]:
    axis = second - first
    length = float(np.linalg.norm(axis))
    if length <= 0:
        raise ModelError(f"beam element {number}: its two nodes coincide; give nodes at distinct positions.")
    x = axis / length
    z = np.cross(x, orientation)
    if np.linalg.norm(z) <= 1e-8 * np.linalg.norm(orientation):
        raise ModelError(f"beam element {number}: the orientation vector {orientation.tolist()} is along the "
                         "element; give one that is not parallel to any element (it sets the local y axis).")
    z /= np.linalg.norm(z)
    y = np.cross(z, x)
    return length, np.vstack([x, y, z])


def beam_model(mesh: BeamMesh, section: BeamSection, *, theory: AbstractBeamTheory | None = None,
               mass: AbstractMass | None = None) -> BeamModel:
    """Assemble the beam elements of ``mesh`` (module docstring) into a :class:`BeamModel`.

    Parameters
    ----------
    mesh : BeamMesh
    section : BeamSection
        The same section for every element.
    theory : EulerBernoulli (default) or Timoshenko
    mass : ConsistentMass (default) or LumpedMass
    """
    theory = EulerBernoulli() if theory is None else theory
    mass = ConsistentMass() if mass is None else mass
    if not isinstance(theory, AbstractBeamTheory):
        raise ModelError(f"beam_model: theory {theory!r}; give EulerBernoulli() or Timoshenko(shear_factor).")
    if not isinstance(mass, AbstractMass):
        raise ModelError(f"beam_model: mass {mass!r}; give ConsistentMass() or LumpedMass().")
    position = {int(node): k for k, node in enumerate(mesh.node_ids)}
    used = sorted({int(node) for node in mesh.elements.reshape(-1)})
    column = {node: k for k, node in enumerate(used)}
    n = 6 * len(used)
    shear = isinstance(theory, Timoshenko)
    parts: dict[str, list] = {name: [[], [], []] for name in ("E", "G", "bending", "rho")}
    for number, (first, second) in enumerate(mesh.elements.tolist()):
        length, rotation = _rotation(mesh.coordinates[position[first]], mesh.coordinates[position[second]],
                                     mesh.orientation, number)
        transform = np.kron(np.eye(4), rotation)
        dofs = np.concatenate([6 * column[first] + np.arange(6), 6 * column[second] + np.arange(6)])
        if shear:
            axial, torsion, bending, element_mass = _local_matrices(section, theory, length, 1.0, 1.0, 1.0)
            _, _, bending, _ = _local_matrices(section, theory, length, section.E, section.G, 1.0)
            axial_part = axial
        else:
            axial, torsion, bending, element_mass = _local_matrices(section, theory, length, 1.0, 1.0, 1.0)
            axial_part = axial + bending  # linear in E: axial and bending
        local = {"E": axial_part, "G": torsion, "bending": bending if shear else None,
                 "rho": mass.lump(element_mass)}
        for name, matrix in local.items():
            if matrix is None:
                continue
            rows, cols, values = parts[name]
            rows.append(np.repeat(dofs, 12))
            cols.append(np.tile(dofs, 12))
            values.append((transform.T @ matrix @ transform).reshape(-1))

    def assembled(name: str) -> sp.csr_matrix:
        rows, cols, values = parts[name]
        return sp.coo_matrix((np.concatenate(values), (np.concatenate(rows), np.concatenate(cols))),
                             shape=(n, n)).tocsr()

    stiffness_terms = [ScaledMatrix("E", section.E, assembled("E")), ScaledMatrix("G", section.G, assembled("G"))]
    if shear:
        stiffness_terms.append(ScaledMatrix(None, 1.0, assembled("bending")))
    mass_terms = (ScaledMatrix("rho", section.rho, assembled("rho")),)
    stiffness = sum((term.term() for term in stiffness_terms), sp.csr_matrix((n, n)))
    dof_table = np.array([(node, component) for node in used for component in range(6)], dtype=np.int64)
    label = (f"beams: {mesh.elements.shape[0]} {type(theory).__name__} elements, "
             f"{type(mass).__name__.replace('Mass', '').lower()} mass")
    fe = FEModel(np.array(used, dtype=np.int64), mesh.coordinates[[position[node] for node in used]], dof_table,
                 mass_terms[0].term(), stiffness, source=label)
    return BeamModel(fe, mass_terms, tuple(stiffness_terms))
