"""Generated model families that are not banded: lattices and random trees (issue 24).

The chains of :mod:`.chains` have a tridiagonal (banded) Newton matrix; real multibody models
are grids, trees and closed loops, whose matrices stay wide after any band ordering.  Two
families of any size are generated here, each as the TOML text of a model file
(:func:`lattice_toml`, :func:`random_tree_toml`); the multibody system and the Model are that
text parsed back (:func:`lattice_system`, :func:`lattice_model`, ...), so a file written to
disk and the objects cannot differ.  :func:`family_toml` picks the size of a family from a
number of coordinates (:data:`FAMILY_SIZES`: the 100, 1 000 and 5 000 of the issue).

Lattice (:func:`lattice_toml`)
    ``nx x ny x nz`` point masses ``m`` on a cubic grid of spacing ``L`` (mass ``(i, j, k)`` at
    ``(0.1 + i L, 0.2 + j L, 0.3 + k L)`` m), joined by linear spring-dampers
    (``linear_spring_damper``: ``k``, ``d``, free length ``L``) along the three grid
    directions; each mass of the top layer ``k = nz - 1`` hangs from the ground by a vertical
    spring of the same law, anchored at ``(0.1 + i, 0.2 + j, 0.3 + nz)`` m (numbers: the grid
    at the nominal ``L = 1 m``; the offsets keep them different, so that every anchor is one
    component type).  Gravity ``g`` acts along ``-z``; a harmonic force ``F0 sin(omega t)``
    along ``x`` on the bottom corner mass ``(nx-1, ny-1, 0)`` breaks the symmetry so that
    every spring works.  Outputs: the position of that corner (``corner_x, corner_y,
    corner_z``).  A spring between markers goes through an auxiliary coordinate
    (:mod:`fmi_adjoint.mbs.forces`), so the model has
    ``3 N + E + A`` coordinates and ``E + A`` constraints, with ``N = nx ny nz`` masses,
    ``E = (nx-1) ny nz + nx (ny-1) nz + nx ny (nz-1)`` springs and ``A = nx ny`` anchors
    (:func:`lattice_size`).  The grid couples every mass to six neighbours: after any
    ordering the band of the Newton matrix is about ``nx ny`` wide.

    Analytic: while the corner force is zero, every column hangs alike and the horizontal
    springs keep their free length, so each column is a fixed-free chain of ``nz`` masses.
    Its static deflection is exact (the springs stay vertical): the spring above layer ``k``
    carries the ``nz - k`` masses below it, so layer ``k`` is lowered by
    ``delta_k = (m g / k) (nz + nz (nz - 1) / 2 - k (k + 1) / 2)`` (:func:`lattice_deflection`;
    the bottom layer by ``m g nz (nz + 1) / (2 k)``); ``deflected=True`` starts there, in
    equilibrium.  The vertical modes of the columns have the chain's frequencies
    ``omega_j = 2 sqrt(k/m) sin((2j - 1) pi / (2 (2 nz + 1)))``.

Random tree (:func:`random_tree_toml`)
    ``n`` spatial rigid bodies ``b0 .. b(n-1)`` (mass ``m``, principal inertias
    ``m l^2 (1/12, 1/14, 1/16)``, seven coordinates ``x, y, z, e0 .. e3`` and the
    normalization constraint each), a random recursive tree: body ``i`` hangs from a parent
    drawn uniformly from ``b0 .. b(i-1)``, ``b0`` from the ground at the origin.  Each body is
    a rod of length ``l`` in a random direction ``u_i``: its joint end ``b<i>_a`` at
    ``-l/2 u_i`` from its centre, its tip ``b<i>_tip`` at ``+l/2 u_i``, the joint at the
    parent's tip.  A joint is spherical (3 rows) with probability 2/3, else revolute (5 rows)
    about a random axis (its smallest component along z: one joint frame structure, so one
    component type).  A spring-damper (``k``, ``d``, free length: the initial distance)
    from the parent's centre to the child's tip gives each joint stiffness.  A few loops are
    closed by spherical joints ``loop<j>`` between two bodies ``a, c`` of the tree at the point
    ``0.4 r_a + 0.6 r_c`` of their centres; a loop through ``b`` bodies and tree joints of
    ``r_1 .. r_(b-1)`` rows is closed only if it keeps a mobility ``6 (b - 1) - sum r - 3 >= 1``,
    its tree joints move the meeting point in all three directions (two spherical joints at one
    point, siblings of one parent, move it in a plane only) and it shares no tree joint with
    another loop: the closing rows are then independent and :func:`fmi_adjoint.mbs.joints.check_joint_pairs` has nothing
    to refuse.  Gravity ``-z``; outputs: the positions of the root's and the last body's tips.  ``8 n`` coordinates
    (``7 n`` of the bodies, one per spring) and ``n + sum r + 3 L + n`` constraints
    (:func:`random_tree_size`).  A numpy ``Generator`` seeded with ``seed`` draws everything,
    so a size and a seed give one model.  Analytic: the sizes only; the motion is chaotic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from ..errors import ModelError
from ..mbs import MultibodySystem
from ..model import Model
from ..model_file import _MAX_ENTRIES, parse_model, parse_system

__all__ = ["FAMILIES", "FAMILY_SIZES", "MAX_LATTICE_SIDE", "MAX_TREE_BODIES", "family_model", "family_toml",
           "lattice_deflection", "lattice_dimensions", "lattice_model", "lattice_size", "lattice_system",
           "lattice_toml", "random_tree_model", "random_tree_size", "random_tree_system", "random_tree_toml",
           "tree_bodies"]

#: The two families (module docstring).
FAMILIES: tuple[str, ...] = ("lattice", "random_tree")
#: The sizes of the issue, in coordinates of the model.
FAMILY_SIZES: tuple[int, ...] = (100, 1000, 5000)
#: Largest lattice side generated; the model file's limits accept up to 1 000 masses (a
#: 10 x 10 x 10 lattice) and refuse a larger file before reading it.
MAX_LATTICE_SIDE = 12
#: Most bodies of a random tree: the model file's limit on bodies.
MAX_TREE_BODIES = _MAX_ENTRIES["bodies"]

Family = Literal["lattice", "random_tree"]

#: Origin of the lattice (m): different fractions, so that no two anchor coordinates are equal.
_X0, _Y0, _Z0 = 0.1, 0.2, 0.3

_LAW = '{ type = "linear_spring_damper", stiffness = "k", damping = "d", free_length = %s }'


def _number(x: float) -> str:
    """A float as TOML writes it back exactly (``repr``), ``-0.0`` as ``0.0``."""
    return repr(float(x) + 0.0)


def _vector(values: Sequence[object] | np.ndarray) -> str:
    return "[" + ", ".join(f'"{v}"' if isinstance(v, str) else _number(float(v)) for v in values) + "]"  # type: ignore


def _entry(section: str, **fields: object) -> list[str]:
    lines = ["", f"[[{section}]]"]
    for key, value in fields.items():
        if isinstance(value, str) and not value.startswith(("[", "{")):
            lines.append(f'{key} = "{value}"')
        else:
            lines.append(f"{key} = {value}")
    return lines


# --------------------------------------------------------------------------- lattice


def _check_side(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LATTICE_SIDE:
        raise ModelError(f"{name} = {value!r} is not a whole number in [1, {MAX_LATTICE_SIDE}]; give the number of "
                         "masses along that axis, e.g. 6.")
    return value


def lattice_size(nx: int, ny: int, nz: int) -> tuple[int, int]:
    """``(coordinates, constraints)`` of the lattice model (module docstring: ``3 N + E + A``
    and ``E + A``)."""
    n = nx * ny * nz
    springs = (nx - 1) * ny * nz + nx * (ny - 1) * nz + nx * ny * (nz - 1)
    anchors = nx * ny
    return 3 * n + springs + anchors, springs + anchors


def lattice_dimensions(n_coordinates: int) -> tuple[int, int, int]:
    """The near-cubic lattice (sides differing by at most one, ``nx >= ny >= nz``) whose
    number of coordinates is closest to ``n_coordinates`` (the smaller on a tie)."""
    if isinstance(n_coordinates, bool) or not isinstance(n_coordinates, int) or n_coordinates < 1:
        raise ModelError(f"n_coordinates = {n_coordinates!r} is not a positive whole number; give the size, "
                         "e.g. 1000.")
    best: tuple[int, int, int] | None = None
    for side in range(1, MAX_LATTICE_SIDE + 1):
        for dims in ((side + 1, side, side), (side + 1, side + 1, side), (side, side, side)):
            if max(dims) > MAX_LATTICE_SIDE or dims[0] < 2:
                continue
            if best is None or (abs(lattice_size(*dims)[0] - n_coordinates), lattice_size(*dims)[0]) \
                    < (abs(lattice_size(*best)[0] - n_coordinates), lattice_size(*best)[0]):
                best = dims
    assert best is not None
    return best


def lattice_deflection(nz: int, k: int) -> int:
    """``delta_k / (m g / k)``: the static lowering of layer ``k`` of a lattice of ``nz``
    layers in units of ``m g / k`` (module docstring), an integer."""
    return nz + nz * (nz - 1) // 2 - k * (k + 1) // 2


def lattice_toml(nx: int, ny: int, nz: int, *, deflected: bool = False) -> str:
    """TOML text of the ``nx x ny x nz`` lattice (module docstring).

    Parameters
    ----------
    nx, ny, nz : int
        Masses along x, y and z, 1 to :data:`MAX_LATTICE_SIDE` each (at least 2 masses).
    deflected : bool
        Start at the static deflection under gravity (in equilibrium) instead of at the
        springs' free lengths.

    Raises
    ------
    ModelError
        A side out of range.
    """
    nx, ny, nz = _check_side(nx, "nx"), _check_side(ny, "ny"), _check_side(nz, "nz")
    if nx * ny * nz < 2:
        raise ModelError("a lattice of one mass is not a lattice; give at least two masses (e.g. nx = 2).")
    coordinates, constraints = lattice_size(nx, ny, nz)
    state = "at its static deflection" if deflected else "at the springs' free lengths"
    lines = [
        f"# Lattice of {nx} x {ny} x {nz} point masses on spring-dampers, hanging from its top layer",
        f"# ({coordinates} coordinates, {constraints} constraints); generated by fmi_adjoint.examples.families.",
        "",
        "[model]",
        f'name = "lattice_{nx}_{ny}_{nz}"',
        f'description = "{nx} x {ny} x {nz} lattice of point masses and spring-dampers, started {state}"',
        'source = "generated for the large-model benchmark of issue 24 (fmi_adjoint/examples/families.py)"',
        'gravity = [0, 0, "-g"]',
        "",
        "[simulation]",
        "t_end = 1.0",
        "step = 1e-3",
        "alpha = -0.05",
        "",
        "[parameters]",
        'm = { value = 1.0, unit = "kg", bounds = [0.1, 10.0], description = "mass of every node" }',
        'k = { value = 2.0e3, unit = "N/m", bounds = [1.0e2, 1.0e5], description = "stiffness of every spring" }',
        'd = { value = 2.0, unit = "Ns/m", bounds = [0.01, 100.0], description = "damping of every spring" }',
        'L = { value = 1.0, unit = "m", description = "grid spacing and free length of every spring" }',
        'g = { value = 9.81, unit = "m/s^2", description = "gravity" }',
        'F0 = { value = 5.0, unit = "N", bounds = [0.0, 100.0], description = "amplitude of the corner force" }',
        'omega = { value = "4*pi", unit = "rad/s", description = "frequency of the corner force" }',
    ]

    def node(i: int, j: int, k: int) -> str:
        return f"{i}_{j}_{k}"

    for i in range(nx):
        for j in range(ny):
            for k in range(nz):
                z = f"{_Z0} + {k}*L - {lattice_deflection(nz, k)}*m*g/k" if deflected else f"{_Z0} + {k}*L"
                lines += _entry("bodies", name=f"m_{node(i, j, k)}", type="point_mass", mass="m",
                                position=_vector((f"{_X0} + {i}*L", f"{_Y0} + {j}*L", z)))
    for i in range(nx):
        for j in range(ny):
            for k in range(nz):
                lines += _entry("markers", name=f"p_{node(i, j, k)}", body=f"m_{node(i, j, k)}")
    for i in range(nx):
        for j in range(ny):
            # Numbers, not multiples of L, all different: the anchors are then one component
            # type (numbers are data of an instance, equal numbers one slot; assembly.partition).
            lines += _entry("markers", name=f"top_{i}_{j}", body="ground",
                            position=_vector((_X0 + i, _Y0 + j, _Z0 + nz)))
    law = _LAW % '"L"'
    for i in range(nx):
        for j in range(ny):
            for k in range(nz):
                for axis, (a, b, c) in zip("xyz", ((i + 1, j, k), (i, j + 1, k), (i, j, k + 1))):
                    if a < nx and b < ny and c < nz:
                        lines += _entry("forces", type="spring_damper", name=f"s{axis}_{node(i, j, k)}",
                                        markers=f'["p_{node(i, j, k)}", "p_{node(a, b, c)}"]', law=law)
    for i in range(nx):
        for j in range(ny):
            lines += _entry("forces", type="spring_damper", name=f"anchor_{i}_{j}",
                            markers=f'["top_{i}_{j}", "p_{node(i, j, nz - 1)}"]', law=law)
    corner = f"p_{node(nx - 1, ny - 1, 0)}"
    lines += _entry("forces", type="force", name="shake", marker=corner, vector='["F0*sin(omega*t)", 0, 0]',
                    frame="global")
    lines += _entry("sensors", type="marker_position", name="corner", marker=corner)
    return "\n".join(lines) + "\n"


def lattice_system(nx: int, ny: int, nz: int, *, deflected: bool = False) -> MultibodySystem:
    """The :class:`~fmi_adjoint.mbs.MultibodySystem` of :func:`lattice_toml` (parsed from it)."""
    return parse_system(lattice_toml(nx, ny, nz, deflected=deflected), source=f"<lattice_{nx}_{ny}_{nz}>")


def lattice_model(nx: int, ny: int, nz: int, *, deflected: bool = False) -> Model:
    """The :class:`~fmi_adjoint.model.Model` of :func:`lattice_toml` (parsed from it)."""
    return parse_model(lattice_toml(nx, ny, nz, deflected=deflected), source=f"<lattice_{nx}_{ny}_{nz}>")


# --------------------------------------------------------------------------- random tree


def _check_bodies(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= MAX_TREE_BODIES:
        raise ModelError(f"n_bodies = {value!r} is not a whole number in [2, {MAX_TREE_BODIES}]; give the number of "
                         "bodies of the tree, e.g. 125.")
    return value


def _check_seed(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ModelError(f"seed = {value!r} is not a whole number >= 0; give the seed of the generator, e.g. 0.")
    return value


def _unit(rng: np.random.Generator) -> np.ndarray:
    while True:
        u = rng.normal(size=3)
        norm = float(np.linalg.norm(u))
        if norm > 1e-3:
            return u / norm


def _z_smallest(u: np.ndarray) -> np.ndarray:
    """``u`` with its smallest component moved to z: a revolute joint completes its axis with
    the coordinate axis least aligned to it (:mod:`fmi_adjoint.mbs.joints`), so all the tree's
    revolute joints then have one frame structure and are one component type."""
    k = int(np.argmin(np.abs(u)))
    v = u.copy()
    v[k], v[2] = u[2], u[k]
    return v


class _Tree:
    """The random draws of one tree (module docstring), in a fixed order."""

    def __init__(self, n: int, seed: int, loops: int | None):
        rng = np.random.default_rng(seed)
        self.n = n
        self.l = 0.5
        self.parent = [-1] + [int(rng.integers(0, i)) for i in range(1, n)]
        self.direction = [_unit(rng) for _ in range(n)]
        self.spherical = [bool(rng.random() < 2.0 / 3.0) for _ in range(n)]
        self.axis = [_z_smallest(_unit(rng)) for _ in range(n)]
        half = self.l / 2
        self.centre: list[np.ndarray] = []
        for i in range(n):
            self.centre.append(self.pin(i) + half * self.direction[i])
        self.loops = self._loops(rng, max(1, n // 20) if loops is None else loops)

    def pin(self, i: int) -> np.ndarray:
        """The point of tree joint ``i`` (the parent's tip; the origin for ``b0``)."""
        if i == 0:
            return np.zeros(3)
        p = self.parent[i]
        return self.centre[p] + self.l / 2 * self.direction[p]

    def meeting_point(self, a: int, c: int) -> np.ndarray:
        return 0.4 * self.centre[a] + 0.6 * self.centre[c]

    def _moves(self, a: int, c: int, joints: list[int]) -> bool:
        """Whether the tree joints between ``a`` and ``c`` move the meeting point of a loop in
        all three directions (the closing rows are then independent of the tree's).  A
        spherical joint at ``J`` moves the point ``P`` by ``w x (P - J)`` for any ``w``, a
        revolute one by ``w a x (P - J)``: two spherical joints at one point (siblings) move it
        in a plane only, although the count of the mobility allows the loop."""
        point = self.meeting_point(a, c)
        columns = []
        for i in joints:
            arm = point - self.pin(i)
            axes = np.eye(3) if self.spherical[i] else [self.axis[i]]
            columns += [np.cross(w, arm) for w in axes]
        singular = np.linalg.svd(np.array(columns).T, compute_uv=False)
        return len(singular) == 3 and singular[-1] > 1e-6 * singular[0]

    def rows(self, i: int) -> int:
        return 3 if self.spherical[i] else 5

    def path(self, a: int, c: int) -> tuple[list[int], list[int]]:
        """Bodies on the tree path from ``a`` to ``c`` and the tree joints (by child) on it."""
        up_a, node = [a], a
        while node:
            node = self.parent[node]
            up_a.append(node)
        on_a = {body: k for k, body in enumerate(up_a)}
        up_c, node = [c], c
        while node not in on_a:
            node = self.parent[node]
            up_c.append(node)
        top = on_a[node]
        bodies = up_a[:top + 1] + up_c[-2::-1]
        joints = up_a[:top] + up_c[:-1]
        return bodies, joints

    def _loops(self, rng: np.random.Generator, wanted: int) -> list[tuple[int, int]]:
        used: set[int] = set()
        loops: list[tuple[int, int]] = []
        for _ in range(50 * max(wanted, 1)):
            if len(loops) >= wanted or self.n < 3:
                break
            a, c = (int(x) for x in rng.choice(self.n, size=2, replace=False))
            bodies, joints = self.path(a, c)
            mobility = 6 * (len(bodies) - 1) - sum(self.rows(j) for j in joints) - 3
            if len(bodies) < 3 or mobility < 1 or used & set(joints) or not self._moves(a, c, joints):
                continue
            used.update(joints)
            loops.append((min(a, c), max(a, c)))
        return loops


def random_tree_size(n_bodies: int, seed: int = 0, loops: int | None = None) -> tuple[int, int]:
    """``(coordinates, constraints)`` of the random tree model (module docstring)."""
    tree = _Tree(_check_bodies(n_bodies), _check_seed(seed), loops)
    rows = sum(tree.rows(i) for i in range(tree.n))
    return 8 * tree.n, 2 * tree.n + rows + 3 * len(tree.loops)


def tree_bodies(n_coordinates: int) -> int:
    """The number of bodies of a random tree of about ``n_coordinates`` coordinates (8 each)."""
    if isinstance(n_coordinates, bool) or not isinstance(n_coordinates, int) or n_coordinates < 16:
        raise ModelError(f"n_coordinates = {n_coordinates!r} is not a whole number >= 16; give the size, e.g. 1000.")
    return min(max(round(n_coordinates / 8), 2), MAX_TREE_BODIES)


def random_tree_toml(n_bodies: int, seed: int = 0, loops: int | None = None) -> str:
    """TOML text of a random tree of ``n_bodies`` spatial bodies (module docstring).

    Parameters
    ----------
    n_bodies : int
        2 to :data:`MAX_TREE_BODIES`.
    seed : int
        Seed of the numpy generator: a size and a seed give one model.
    loops : int, optional
        Loops to close (default ``max(1, n_bodies // 20)``); fewer if the tree has too few
        paths that keep a mobility and share no joint.

    Raises
    ------
    ModelError
        ``n_bodies`` or ``seed`` out of range.
    """
    tree = _Tree(_check_bodies(n_bodies), _check_seed(seed), loops)
    n, half = tree.n, tree.l / 2
    coordinates, constraints = random_tree_size(n, seed, loops)
    lines = [
        f"# Random tree of {n} spatial bodies (seed {seed}) with {len(tree.loops)} closed loops",
        f"# ({coordinates} coordinates, {constraints} constraints); generated by fmi_adjoint.examples.families.",
        "",
        "[model]",
        f'name = "random_tree_{n}_{seed}"',
        f'description = "random tree of {n} spatial rods on spherical and revolute joints with spring-dampers and '
        f'{len(tree.loops)} closed loops, falling under gravity"',
        'source = "generated for the large-model benchmark of issue 24 (fmi_adjoint/examples/families.py)"',
        'gravity = [0, 0, "-g"]',
        "",
        "[simulation]",
        "t_end = 0.5",
        "step = 1e-3",
        "alpha = -0.05",
        "",
        "[parameters]",
        'm = { value = 1.0, unit = "kg", bounds = [0.1, 10.0], description = "mass of every body" }',
        'l = { value = 0.5, unit = "m", description = "length of every rod (inertias only; the geometry is drawn)" }',
        'k = { value = 200.0, unit = "N/m", bounds = [1.0, 1.0e4], description = "stiffness of every spring" }',
        'd = { value = 1.0, unit = "Ns/m", bounds = [0.01, 100.0], description = "damping of every spring" }',
        'g = { value = 9.81, unit = "m/s^2", description = "gravity" }',
    ]
    for i in range(n):
        lines += _entry("bodies", name=f"b{i}", type="spatial", mass="m",
                        inertia='["m*l**2/12", "m*l**2/14", "m*l**2/16"]', position=_vector(tree.centre[i]))
    lines += _entry("markers", name="pivot", body="ground")
    spring_ground = np.array([0.0, 0.0, half])
    lines += _entry("markers", name="spring_seat", body="ground", position=_vector(spring_ground))
    for i in range(n):
        u = tree.direction[i]
        lines += _entry("markers", name=f"b{i}_a", body=f"b{i}", position=_vector(-half * u))
        lines += _entry("markers", name=f"b{i}_tip", body=f"b{i}", position=_vector(half * u))
        lines += _entry("markers", name=f"b{i}_c", body=f"b{i}")
    for j, (a, c) in enumerate(tree.loops):
        meet = tree.meeting_point(a, c)  # not the midpoint: equal offsets would be one data slot
        lines += _entry("markers", name=f"loop{j}_i", body=f"b{a}", position=_vector(meet - tree.centre[a]))
        lines += _entry("markers", name=f"loop{j}_j", body=f"b{c}", position=_vector(meet - tree.centre[c]))
    for i in range(n):
        pin = "pivot" if i == 0 else f"b{tree.parent[i]}_tip"
        if tree.spherical[i]:
            lines += _entry("joints", name=f"j{i}", type="spherical", markers=f'["{pin}", "b{i}_a"]')
        else:
            lines += _entry("joints", name=f"j{i}", type="revolute", markers=f'["{pin}", "b{i}_a"]',
                            axis=_vector(tree.axis[i]))
    for j in range(len(tree.loops)):
        lines += _entry("joints", name=f"loop{j}", type="spherical", markers=f'["loop{j}_i", "loop{j}_j"]')
    for i in range(n):
        seat, seat_at = ("spring_seat", spring_ground) if i == 0 else (f"b{tree.parent[i]}_c",
                                                                       tree.centre[tree.parent[i]])
        length = float(np.linalg.norm(tree.centre[i] + half * tree.direction[i] - seat_at))
        lines += _entry("forces", type="spring_damper", name=f"s{i}", markers=f'["{seat}", "b{i}_tip"]',
                        law=_LAW % _number(length))
    lines += _entry("sensors", type="marker_position", name="root_tip", marker="b0_tip")
    lines += _entry("sensors", type="marker_position", name="last_tip", marker=f"b{n - 1}_tip")
    return "\n".join(lines) + "\n"


def random_tree_system(n_bodies: int, seed: int = 0, loops: int | None = None) -> MultibodySystem:
    """The :class:`~fmi_adjoint.mbs.MultibodySystem` of :func:`random_tree_toml` (parsed from it)."""
    return parse_system(random_tree_toml(n_bodies, seed, loops), source=f"<random_tree_{n_bodies}_{seed}>")


def random_tree_model(n_bodies: int, seed: int = 0, loops: int | None = None) -> Model:
    """The :class:`~fmi_adjoint.model.Model` of :func:`random_tree_toml` (parsed from it)."""
    return parse_model(random_tree_toml(n_bodies, seed, loops), source=f"<random_tree_{n_bodies}_{seed}>")


# --------------------------------------------------------------------------- by size


def family_toml(family: Family, n_coordinates: int, seed: int = 0) -> str:
    """TOML text of ``family`` (``"lattice"`` or ``"random_tree"``) with about
    ``n_coordinates`` coordinates (:func:`lattice_dimensions`, :func:`tree_bodies`); the
    lattice ignores ``seed``."""
    if family == "lattice":
        return lattice_toml(*lattice_dimensions(n_coordinates))
    if family == "random_tree":
        return random_tree_toml(tree_bodies(n_coordinates), seed)
    raise ModelError(f"family = {family!r} is not a model family; use one of {', '.join(FAMILIES)}.")


def family_model(family: Family, n_coordinates: int, seed: int = 0) -> Model:
    """The Model of :func:`family_toml`."""
    return parse_model(family_toml(family, n_coordinates, seed), source=f"<{family}_{n_coordinates}>")
