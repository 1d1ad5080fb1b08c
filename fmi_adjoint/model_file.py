"""Reading TOML model files into :class:`~fmi_adjoint.model.Model` values.

A model file is data: it is parsed with :mod:`tomllib`, its expressions with the
whitelist grammar of :mod:`fmi_adjoint.expressions`; nothing in it is executed.
The format (all sections but ``model``, ``coordinates`` and ``outputs`` optional)::

    [model]
    name = "sdof"
    description = "..."
    source = "where the model and its values come from"

    [simulation]                 # defaults for simulate / identify
    t_end = "6*pi"               # number, or expression of constants
    step = 1e-4
    alpha = -0.05                # HHT damping in [-1/3, 0]
    integrator = "hht"           # or "generalized_alpha" (Arnold & Bruels 2007)
    rho_inf = 0.8                # generalized-alpha spectral radius at infinity, [0, 1]
    newton = "full"              # or "modified": keep the iteration matrix (--newton)

    [parameters]
    m = 1.0                                                  # value only
    c = { value = 1.0, unit = "N/m", bounds = [0.1, 10.0], description = "stiffness" }

    [inputs]                     # excitations an FMU exposes as inputs; the value is
    F_ext = { value = 0.0, unit = "N" }   # used while unconnected; usable like parameters
    z = { value = 0.0, unit = "m", file = "shaker.csv", channel = "z_shaker" }
                                 # measured: a channel of a bench data file (CSV, MDF, MAT,
                                 # HDF5) next to the model file, in the input's unit,
                                 # interpolated linearly; an export leaves it out

    [[coordinates]]
    name = "x"
    kind = "translational"       # or "rotational"
    mass = "m"                   # diagonal mass entry; 0 for a massless node
    initial_position = 0.0       # expressions of parameters
    initial_velocity = 0.0
    fixed_position = false       # hold it while the initial state is made consistent

    [[mass_matrix]]              # extra or configuration-dependent entries
    row = "phi"
    col = "theta"
    value = "m_r*r*l/2*cos(phi - theta)"

    [[forces]]
    type = "linear_spring_damper"    # element type registered under fmi_adjoint.forces
    name = "spring"
    coordinates = ["x"]              # one (to ground) or two (relative)
    stiffness = "c"                  # properties left out become parameters
    damping = "2*d"                  # named <element>_<property>

    [[forces]]
    type = "table_load"              # a load F(t) from a CSV file
    name = "shaker"
    coordinate = "x"
    file = "force.csv"               # relative to the model file; 'time' column
    column = "F"
    scale = "gain"

    [[constraints]]
    name = "lever"
    expression = "x2*(a + b) - x3*b - x4*a"

    [[prescribed]]
    coordinate = "phi"
    expression = "omega*t"

    [[outputs]]
    name = "a1"
    expression = "der2(x1)"          # der(x): velocity, der2(x): acceleration,
    unit = "m/s^2"                   # lam(c): multiplier, reaction(x): constraint force

    [[matrix_terms]]                 # structured terms (fmi_adjoint.structured, issue 24):
    name = "beam_stiffness"          # factor(p) * A, kept as data, never entry by entry
    role = "stiffness"               # "mass" | "stiffness" | "damping" | "load"
    coordinates = ["u1", "u2", "u3"] # rows and columns of A, in order
    factor = "E/210e9"               # expression of parameters or number (default 1)
    matrix = { rows = [0, 1, 1, 2], cols = [0, 0, 1, 2], values = [2, -1, 2, 1], symmetric = true }
                                     # 0-based triplets (one triangle if symmetric; an inline
                                     # table is one line in TOML), or { file = "k.mtx" }:
                                     # Matrix Market, next to the model file

    [[quadratic_constraints]]        # C_r = c0_r + J0_r q + 1/2 q^T H_r q (seed 003, eq. (13))
    name = "rod"                     # rows rod_0, rod_1, ...: lam(rod_0)
    coordinates = ["x", "y"]
    c0 = [-1.0]
    jacobian = { rows = [], cols = [], values = [] }           # J0 (m x k), a matrix table
    hessians = { rows = [0, 0], i = [0, 1], j = [0, 1], values = [2.0, 2.0] }   # H_r[i, j]

Multibody models (issue 23, :mod:`fmi_adjoint.mbs`): a file with ``[model] gravity``, any of
the sections below or a multibody force type is read into a
:class:`~fmi_adjoint.mbs.MultibodySystem` and lowered with ``to_model()``; the sections above
may be mixed in (a body's coordinates are ``<body>_x``, ``_y``, ``_z``, ``_phi``, ``_e0`` ..
``_e3``).  Values are numbers or expressions of parameters unless said otherwise; rotations and
axes are numbers (or expressions of numbers such as ``"pi/2"``), in radians::

    [model]
    name = "heavy_top"
    gravity = [0, 0, "-g"]           # global axes

    [[bodies]]
    name = "top"
    type = "spatial"                 # "point_mass" | "planar" | "spatial"
    mass = "m"
    inertia = ["I1", "I1", "I3"]     # spatial: [Ixx, Iyy, Izz] or [Ixx, Iyy, Izz, Ixy, Ixz, Iyz] about
                                     # the centre of mass in body axes; planar: one value (Izz)
    position = [0, 0, "h"]           # initial centre of mass (planar: 2 values)
    rotation = { axis = [1, 0, 0], angle = 0.3 }   # or { cardan = [a, b, c] } (A = Rx(a) Ry(b) Rz(c))
                                     # or { matrix = [[..], [..], [..]] } (orthonormal, det +1)
    angle = 0.0                      # planar bodies instead of rotation
    velocity = [0, 0, 0]             # initial, global
    angular_velocity = [0, 0, "spin"]    # planar: one value
    angular_velocity_frame = "body"      # or "global" (default)
    fixed_position = true            # or some of the coordinate suffixes, e.g. ["x", "phi"]
    fixed_velocity = false
    planar = true                    # point_mass only: x, y only

    [[bodies]]                       # a flexible body (issue 25; fmi_adjoint.mbs.FlexibleBody): an FE
    name = "beam"                    # model reduced by Craig-Bampton, flexible natural coordinates
    type = "flexible"
    beam = { length = 1.0, elements = 10, E = 2.1e11, G = 8.1e10, A = 6e-4, Iy = 2e-8, Iz = 4.5e-8,
             J = 4.7e-8, rho = 7850.0, theory = "euler_bernoulli", mass = "lumped" }   # (one line)
                                     # built-in beam elements along body x (direction, orientation,
                                     # shear_factor: timoshenko), nodes 1 .. elements + 1; or
                                     # fe = { nodes = "nodes.csv", mass = "m.mtx",
                                     #        stiffness = "k.mtx", dofs = "dofs.csv" }
                                     # (Matrix Market; dofs optional: six per node in node order)
    reference_node = 1               # the frame's origin node (default 1)
    interface_nodes = [11]           # static constraint modes: exact where joints attach
    modes = 4                        # normal modes, or { frequency_limit = 500.0 } (Hz); default 10
    damping = { rayleigh = [0.0, 1e-5] }   # or { modal = [0.01, 0.02] }; default none
    position = [0, 0, 0]             # of the reference node; rotation as for spatial bodies
    stiffness_factor = "EIs"         # mass_factor, stiffness_factor, damping_factor: expressions
    formulation = "fncf"             # "fncf" (default: flexible natural coordinates), "ffrf" (floating
                                     # frame of reference, spatial) or "planar_ffrf" (floating frame in
                                     # the x-y plane: the FE model's in-plane part; position 2 or 3
                                     # values with z = 0, angle = .. instead of rotation)

    [[markers]]                      # body-fixed frames; "ground" is the ground
    name = "tip"
    body = "top"
    position = [0, 0, "-h"]          # body axes
    orientation = { axis = [0, 1, 0], angle = 1.5707963267948966 }   # or a planar angle: 0.2
    node = 11                        # flexible bodies only: the marker sits on (follows) that node

    [[joints]]
    name = "pivot"
    type = "spherical"   # revolute | prismatic | cylindrical | spherical | universal | planar | fixed
    markers = ["ground_point", "tip"]    # marker i, marker j (on two different bodies)
    axis = [0, 0, 1]                 # optional, marker i's axes
    axis_j = [1, 0, 0]               # universal only, marker j's axes
    drive = "omega*t"                # revolute, prismatic, cylindrical: prescribes the joint coordinate

    [[forces]]
    type = "spring_damper"           # along the line between two markers
    name = "strut"
    markers = ["top_mount", "knuckle_mount"]
    law = { type = "linear_spring_damper", stiffness = "c", damping = "d" }   # any registered
                                     # two-end element; unbound properties become <force>_<property>

    [[forces]]
    type = "bushing"                 # laws on the displacement of marker j in marker i's axes
    name = "mount"
    markers = ["frame_fl", "engine_fl"]
    laws.z = { type = "linear_spring_damper", stiffness = "c_z", damping = "d_z" }
                                     # any of x, y, z, rx, ry, rz; parameters <force>_<dir>_<property>
    [[forces]]
    type = "joint_force"             # a law on a joint coordinate (angle or displacement)
    name = "torsion"
    joint = "hinge"
    law = { type = "linear_spring_damper", stiffness = "c_t" }

    [[forces]]
    type = "force"                   # at a marker; "torque": body = "..." instead of marker
    name = "excitation"
    marker = "cart_centre"
    vector = ["F1*sin(2*pi*f1*t)", 0, 0]     # t, parameters, inputs, coordinates, der(x)
    frame = "global"                 # or "body" (force: also "marker")

    [[sensors]]                      # outputs <name>_x, _y, _z (joint_reaction: _fx .. _tz)
    type = "marker_acceleration"     # marker_position | marker_velocity | marker_acceleration |
                                     # angular_velocity | angular_acceleration | orientation |
                                     # relative_displacement | distance | joint_coordinate | joint_reaction
    name = "acc"
    marker = "sensor_point"          # relative_displacement, distance: markers = ["a", "b"];
                                     # joint_coordinate (derivative = 0, 1, 2), joint_reaction: joint = "..."
    frame = "body"                   # "global" | "body" | "marker"
    gravity = true                   # marker_acceleration: the specific force A^T (a - g)
    components = ["x", "z"]          # optional subset

    [[sensors]]                      # a strain gauge on a beam element of a flexible body (issue 25):
    type = "strain"                  # output <name>, the axial strain (m/m) of the fibre, linear in the
    name = "root_strain"             # deformation coordinates (fmi_adjoint.mbs.sensors.BeamStrain)
    body = "beam"
    nodes = [1, 2]                   # the element's end nodes (local x from the first to the second)
    position = 0.0                   # along the element, 0 (first node) .. 1
    fibre = [0.015, 0.0]             # (y, z) in the section [m]
    orientation = [0, 1, 0]          # the beam's orientation vector (its local y), default [0, 1, 0]

Matrix Market files (``{ file = "k.mtx" }``; coordinate or array format, real or integer,
general, symmetric or skew-symmetric) are read with :func:`scipy.io.mmread` under the rules of
``table_load`` files: inside the model file's folder unless external tables are allowed, a
regular file of at most 256 MiB (checked before reading), its declared size checked against
the term's coordinates and :data:`~fmi_adjoint.structured.MAX_ENTRIES` before its body is
read; they travel with the model (:class:`ModelSource`), key warm starts and are carried into
exported FMUs (``resources/``).  So are a flexible body's ``fe`` files (node list, matrices,
DOF map), read by :func:`fmi_adjoint.flexible.read_matrix_market` from a private copy of the
bytes read under these rules.  The matrix terms come first in ``Model.matrix_terms``, then
the quadratic constraints, each in file order.

Measured inputs (issue 26, part 7): an ``[inputs]`` entry with ``file`` and ``channel`` (both
or neither) is driven by that channel of a bench data file, read by the bench readers
(:func:`fmi_adjoint.bench.read_data`: CSV/TSV with any delimiter, decimal commas and ``name
[unit]`` headers, MDF 3/4, MAT v5/v7.3, HDF5, recognised by their first bytes) under the rules
of ``table_load`` files: inside the model file's folder unless external tables are allowed, a
regular file of at most 512 MiB; its bytes travel with the model (:class:`ModelSource`) and key
warm starts.  The binary formats' libraries read files, not bytes, so the reader runs on a
private temporary copy of the bytes read under these rules (as a flexible body's ``fe`` files
are read).  The channel is converted to the input's ``unit``
(:func:`fmi_adjoint.bench.inputs.input_channel`: incompatible units, gaps and times that do
not increase are refused), its times are the file's (t = 0 is the file's 0), and the model
gets a measured :class:`~fmi_adjoint.model.InputSignal` in ``Model.signals``: every expression
naming the input sees the channel interpolated linearly.  A run past the record's end is
refused when it starts.  An exported FMU leaves the measured data out and exposes the input
as an input, for the importer to drive (:func:`fmi_adjoint.export.export_fmu`).

The documentation site's reference (docs/reference/model-file.md) lists every key with its
meaning, generated from :data:`MODEL_FILE_KEYS`, the table the reader checks keys against.

The multibody force types are reserved in the element registry.  Beyond the checks of the
components (:mod:`fmi_adjoint.mbs`: among them inertia tensors that violate the triangle
inequality, and joints between the same two bodies whose constraints are dependent at the
initial positions, two hinges in one joint), the reader names the entries and their lines.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import io
import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast


from . import data, mbs
from .data import parse_csv
from .errors import DataError, ExpressionError, ModelError
from .expressions import parse_expression
from .files import decode_text, read_regular
from .forces.registry import RESERVED_NAMES, Registry, element_type
from .forces.registry import default_registry as default_force_registry
from .mbs.registry import ComponentRegistry, component_type
from .mbs.registry import default_registry as default_component_registry
from .model import (
    parse_items,
    collection_paused,
    Constraint,
    Coordinate,
    InputSignal,
    MassEntry,
    Model,
    Output,
    Parameter,
    PrescribedMotion,
    SimulationSettings,
)
from .structured import MAX_ENTRIES, ROLES, MatrixTerm, QuadraticConstraints, SparseMatrix, StructuredItem
from .text import excerpt

if TYPE_CHECKING:  # the components are imported where a file uses them (a warm start reads none; issue 24, part 6)
    from .forces.base import AbstractLocalElement
    from .mbs.flexible import NodalBody

__all__ = ["MODEL_FILE_KEYS", "ModelSource", "data_files", "load_model", "may_name_data_files", "model_file_inputs",
           "parse_model", "parse_system", "read_data_file"]

_T = TypeVar("_T")

_MAX_BYTES = 4 * 1024 * 1024
#: Most entries of a list-valued element property (dmf_spring stages, tvd branches, spline
#: knots): a dmf_spring of 100 stages takes 16 s to build, of 1000 stages over 11 minutes.
_MAX_LIST = 64
#: Most entries per section, checked before any entry is read: each coordinate, body, element,
#: constraint and mass entry adds equations that are derived, assembled and compiled.  The
#: builder grows linearly in the number of component instances (issue 24); measured on this
#: project's 2-core machine (benchmarks/large_models.py), the lattice of 10 x 10 x 9 point
#: masses of fmi_adjoint.examples.families (900 bodies, 2 521 forces: 5 220 coordinates) builds
#: cold in 53 s of CPU (33 s of it the C compilers), with a peak of 532 MB (the compiler; 422 MB
#: simulating), and its 10 x 10 x 10 sibling (1 000 bodies, 2 801 forces, 1 100 markers: 5 800
#: coordinates) is accepted.  A file at every limit at once is a few times larger, still
#: bounded; the 500 coordinates of the earlier whole-system derivation no longer bind.  A
#: matrix term or a set of quadratic constraints is one instance of a structured type, its size
#: bounded by :data:`~fmi_adjoint.structured.MAX_ENTRIES`: 1 000 of each (mass, stiffness and
#: damping of some 300 reduced flexible bodies).
_MAX_ENTRIES = {"coordinates": 5000, "forces": 6000, "constraints": 5000, "prescribed": 5000, "mass_matrix": 5000,
                "outputs": 1000, "parameters": 5000, "inputs": 1000, "bodies": 1000, "markers": 4000, "joints": 2000,
                "sensors": 1000, "matrix_terms": 1000, "quadratic_constraints": 1000}
#: Largest Matrix Market file a matrix term reads, checked before reading:
#: :data:`~fmi_adjoint.structured.MAX_ENTRIES` (4 million) entries of up to 64 characters a
#: line (``i j value`` at full precision takes about 45).
_MAX_MATRIX_BYTES = 256 * 1024 * 1024
#: The files of a flexible body's ``fe = {...}`` (issue 25) and their roles in :func:`data_files`;
#: each is read under the rules of Matrix Market files (at most :data:`_MAX_MATRIX_BYTES`).
_FE_FILES = {"nodes": "node file", "mass": "matrix file", "stiffness": "matrix file", "dofs": "DOF map"}
#: Most beam elements of a ``beam = {...}`` FE model: 6 DOFs a node, so 60 006 DOFs, reduced by
#: sparse shift-invert Lanczos (fmi_adjoint.flexible.fe.DENSE_LIMIT); the body's size in the
#: equations depends on its modes only.
_MAX_BEAM_ELEMENTS = 10_000
#: Most deformation modes of a flexible body (normal modes and six static modes per interface
#: node but the reference): its coordinates are 12 + 10 n (sigma, pi, gamma = delta (x) pi,
#: delta), so 200 modes give 2 012 coordinates and 1 806 quadratic constraint rows.
_MAX_FLEXIBLE_MODES = 200
#: The sections of a multibody model (issue 23); a file with any of them, ``[model] gravity``
#: or a multibody force type becomes an :class:`~fmi_adjoint.mbs.MultibodySystem`.
_MBS_SECTIONS = ("bodies", "markers", "joints", "sensors")
#: The ``formulation`` of a flexible body (:meth:`_Reader.flexible_body`).
_FLEXIBLE_FORMULATIONS = ("fncf", "ffrf", "planar_ffrf")
_PARAMETER_KEYS = frozenset({"value", "unit", "bounds", "description"})
#: The keys of an ``[inputs]`` entry driven by measured data (both or neither).
_MEASURED_KEYS = frozenset({"file", "channel"})
#: Largest bench data file a measured input reads (the limit of CSV and MAT v5 files,
#: :data:`fmi_adjoint.bench.matlab.MAX_MAT_BYTES`), checked before reading: its bytes key warm
#: starts and travel to parallel workers whatever its format.
_MAX_INPUT_DATA_BYTES = 512 * 1024 * 1024
_BODY_KEYS = frozenset({"name", "type", "mass", "position", "velocity", "fixed_position", "fixed_velocity"})
_JOINT_KEYS = frozenset({"name", "type", "markers", "axis", "drive"})
_VECTOR_SENSOR = frozenset({"name", "type", "marker", "frame", "components"})
_BEAM_KEYS = frozenset({"length", "elements", "direction", "orientation", "E", "G", "A", "Iy", "Iz", "J", "rho",
                        "theory", "mass"})
#: Every key the reader accepts: ``{section or inline table: {entry type: keys}}``, the type
#: ``""`` where entries have no type.  The reader refuses any other key through this table, and
#: docs/reference/model-file.md documents each key of it (checked by tests/test_docs_site.py).
#: ``parameters`` and ``inputs``: the keys of one entry's inline table.  ``[[forces]]`` entries
#: of a registered element type take ``type`` and the element's dataclass fields instead
#: (``table_load``: ``file`` and ``column`` in place of ``times`` and ``values``), a ``law`` the
#: fields but ``name`` and ``coordinates``; those keys come from the element classes.
#: The directions of a bushing's laws: :data:`fmi_adjoint.mbs.forces.BUSHING_DIRECTIONS` (spelled
#: out so that reading this table imports no multibody component; tests check they agree).
_BUSHING_DIRECTIONS = ("x", "y", "z", "rx", "ry", "rz")
MODEL_FILE_KEYS: Mapping[str, Mapping[str, frozenset[str]]] = {
    "model": {"": frozenset({"name", "description", "source", "gravity"})},
    "simulation": {"": frozenset({"t_end", "step", "alpha", "integrator", "rho_inf", "newton"})},
    "parameters": {"": _PARAMETER_KEYS},
    "inputs": {"": _PARAMETER_KEYS | _MEASURED_KEYS},
    "coordinates": {"": frozenset({"name", "kind", "mass", "initial_position", "initial_velocity", "fixed_position",
                                   "fixed_velocity"})},
    "mass_matrix": {"": frozenset({"row", "col", "value"})},
    "forces": {
        "spring_damper": frozenset({"name", "type", "markers", "law"}),
        "bushing": frozenset({"name", "type", "markers", "laws"}),
        "joint_force": frozenset({"name", "type", "joint", "law"}),
        "force": frozenset({"name", "type", "marker", "vector", "frame"}),
        "torque": frozenset({"name", "type", "body", "vector", "frame"}),
    },
    "constraints": {"": frozenset({"name", "expression"})},
    "prescribed": {"": frozenset({"coordinate", "expression"})},
    "outputs": {"": frozenset({"name", "expression", "unit", "description"})},
    "bodies": {
        "point_mass": _BODY_KEYS | {"planar"},
        "planar": _BODY_KEYS | {"inertia", "angle", "angular_velocity"},
        "spatial": _BODY_KEYS | {"inertia", "rotation", "angular_velocity", "angular_velocity_frame"},
        "flexible": frozenset({"name", "type", "reference_node", "interface_nodes", "modes", "damping", "position",
                               "rotation", "mass_factor", "stiffness_factor", "damping_factor", "beam", "fe",
                               "formulation", "angle"}),
    },
    "markers": {"": frozenset({"name", "body", "position", "orientation", "node"})},
    "joints": {kind: _JOINT_KEYS | ({"axis_j"} if kind == "universal" else set())
               for kind in ("revolute", "prismatic", "cylindrical", "spherical", "universal", "planar", "fixed")},
    "sensors": {
        "marker_position": _VECTOR_SENSOR,
        "marker_velocity": _VECTOR_SENSOR,
        "marker_acceleration": _VECTOR_SENSOR | {"gravity"},
        "angular_velocity": _VECTOR_SENSOR,
        "angular_acceleration": _VECTOR_SENSOR,
        "orientation": frozenset({"name", "type", "marker", "components"}),
        "relative_displacement": frozenset({"name", "type", "markers", "components"}),
        "distance": frozenset({"name", "type", "markers"}),
        "joint_coordinate": frozenset({"name", "type", "joint", "derivative"}),
        "joint_reaction": frozenset({"name", "type", "joint", "marker", "frame", "components"}),
        "strain": frozenset({"name", "type", "body", "nodes", "position", "fibre", "orientation"}),
    },
    "matrix_terms": {"": frozenset({"name", "role", "coordinates", "factor", "matrix"})},
    "quadratic_constraints": {"": frozenset({"name", "coordinates", "c0", "jacobian", "hessians"})},
    # inline tables: a body's rotation and a marker's orientation (one of three forms), a bushing's laws,
    # a structured term's matrix (triplets or a Matrix Market file), quadratic constraints' Hessians
    "rotation": {"axis_angle": frozenset({"axis", "angle"}), "cardan": frozenset({"cardan"}),
                 "matrix": frozenset({"matrix"})},
    "laws": {"": frozenset(_BUSHING_DIRECTIONS)},
    "matrix": {"triplets": frozenset({"rows", "cols", "values", "shape", "symmetric"}),
               "file": frozenset({"file"})},
    "hessians": {"": frozenset({"rows", "i", "j", "values"})},
    # a flexible body's FE model (built-in beams or imported matrices), modes and damping (issue 25)
    "beam": {"euler_bernoulli": _BEAM_KEYS, "timoshenko": _BEAM_KEYS | {"shear_factor"}},
    "fe": {"": frozenset({"nodes", "mass", "stiffness", "dofs"})},
    "modes": {"frequency_limit": frozenset({"frequency_limit"})},
    "damping": {"rayleigh": frozenset({"rayleigh"}), "modal": frozenset({"modal"})},
}
#: The multibody force types of ``[[forces]]`` (reserved in the element registry).
_MBS_FORCES = tuple(MODEL_FILE_KEYS["forces"])
#: The inline tables of :data:`MODEL_FILE_KEYS`; the other entries are the file's sections.
_INLINE_TABLES = frozenset({"rotation", "laws", "matrix", "hessians", "beam", "fe", "modes", "damping"})
_SECTIONS = frozenset(MODEL_FILE_KEYS) - _INLINE_TABLES

#: The ``[simulation]`` keys whose values are names, not numbers: what each names (for
#: messages) and its choices (SimulationSettings checks the value).
_SIMULATION_NAMES = {"integrator": ("an integrator", '"hht" or "generalized_alpha"'),
                     "newton": ("a Newton variant", '"full" or "modified"')}


def load_model(path: str | os.PathLike, registry: Registry | None = None, *,
               allow_external_tables: bool = False, components: ComponentRegistry | None = None) -> Model:
    """Read a TOML model file.

    ``registry`` resolves element types, ``components`` the types of component plugins
    (:mod:`fmi_adjoint.mbs.registry`; default for both: the installed entry points).
    ``table_load`` files must lie inside the model file's folder (after resolving symlinks
    and ``..``), because a model file is untrusted data and must not make the tool read,
    or report on, any other file of the machine; ``allow_external_tables=True``
    (``--allow-external-tables``) lifts this for models the user trusts.

    Raises
    ------
    ModelError
        For a missing, non-regular (FIFO, device) or malformed file or any invalid entry;
        the message names the file, the line where it can be located, and the fix.
    """
    path = Path(path)
    return parse_model(_model_text(path), source=str(path), directory=path.parent, registry=registry,
                       allow_external_tables=allow_external_tables, components=components)


def model_file_inputs(path: str | os.PathLike) -> list[tuple[str, Path]]:
    """The files a model file reads: itself, its ``table_load`` files (role ``"table file"``),
    its Matrix Market files (``"matrix file"``) and the rest of :func:`data_files` (the bench
    files of measured inputs among them), as ``(role, path)`` pairs (for
    :func:`~fmi_adjoint.files.check_not_input`: an output must not overwrite them).

    Best effort on purpose: a file that cannot be read or parsed here is reported by
    :func:`load_model`, which runs next; this only keeps an output from naming an input.
    """
    path = Path(path)
    files = [("model file", path)]
    try:
        text = _model_text(path)
        if not may_name_data_files(text):  # nothing to find: the parse is skipped (a warm start, issue 24)
            return files
        doc = tomllib.loads(text)
    except (ModelError, ValueError):  # TOMLDecodeError is a ValueError
        return files
    return files + [(role, path.parent / name) for role, name in data_files(doc)]


#: A ``file`` key written out (bare, quoted or dotted: ``matrix.file =``), as a matrix read
#: from a Matrix Market file is given; escapes are caught by the backslash test.
_FILE_KEY = re.compile(r"""(?:^|[\s{,.])["']?file["']?\s*=""", re.M)
#: A flexible body's ``fe`` table (issue 25), whose files are keys of their own: inline
#: (``fe = {``), dotted (``fe.mass =``) or a sub-table header (``[bodies.fe]``).
_FE_KEY = re.compile(r"""(?:^|[\s{,.\[])["']?fe["']?\s*[=.\]]""", re.M)


def may_name_data_files(text: str) -> bool:
    """Whether the model file ``text`` could name a data file (:func:`data_files`): it holds
    ``table_load``, a ``file`` key or a flexible body's ``fe`` key written out, or a backslash
    (an escape could spell any of them).  When False, the parsed file names none, so
    :func:`model_file_inputs` and the warm-start key (:mod:`fmi_adjoint.warm`) skip parsing it."""
    return "table_load" in text or "\\" in text or bool(_FILE_KEY.search(text) or _FE_KEY.search(text))


def data_files(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The data files the parsed TOML ``doc`` of a model file names, as ``(role, name as
    written)``: ``"table file"`` for a ``table_load``'s ``file``, ``"matrix file"`` for a
    ``[[matrix_terms]]`` ``matrix`` or ``[[quadratic_constraints]]`` ``jacobian`` given as
    ``{ file = ... }``, a flexible body's ``fe`` files: ``"node file"``, ``"matrix file"``
    (``mass``, ``stiffness``) and ``"DOF map"``, and ``"input data file"`` for the bench file of
    a measured input (an ``[inputs]`` entry's ``file``).  Best effort: entries that are not
    well formed (a name that is not a string or holds NUL) are left out; the reader reports
    them.  The one list of what a model file reads: :func:`model_file_inputs`, the warm-start
    key (:mod:`fmi_adjoint.warm`) and the FMU export (:func:`~fmi_adjoint.export.export_fmu`)
    take it from here.
    """
    found: list[tuple[str, object]] = []
    forces = doc.get("forces", [])
    for force in forces if isinstance(forces, list) else []:
        if isinstance(force, dict) and force.get("type") == "table_load":
            found.append(("table file", force.get("file")))
    for section, key in (("matrix_terms", "matrix"), ("quadratic_constraints", "jacobian")):
        entries = doc.get(section, [])
        for entry in entries if isinstance(entries, list) else []:
            value = entry.get(key) if isinstance(entry, dict) else None
            if isinstance(value, dict) and "file" in value:
                found.append(("matrix file", value["file"]))
    bodies = doc.get("bodies", [])
    for body in bodies if isinstance(bodies, list) else []:
        fe = body.get("fe") if isinstance(body, dict) else None
        if isinstance(fe, dict):
            found += [(role, fe[key]) for key, role in _FE_FILES.items() if key in fe]
    inputs = doc.get("inputs", {})
    for spec in inputs.values() if isinstance(inputs, dict) else []:
        if isinstance(spec, dict) and "file" in spec:
            found.append(("input data file", spec["file"]))
    return [(role, name) for role, name in found if isinstance(name, str) and "\0" not in name]


def read_data_file(role: str, path: Path) -> bytes:
    """The bytes of a data file of :func:`data_files`: a regular file within its limit (512 MiB
    for a table or a measured input's bench file, 256 MiB for a Matrix Market file, a node file
    or a DOF map), checked before reading.

    Raises
    ------
    DataError
        A table file or bench file that is missing, not a regular file or too large.
    ModelError
        Likewise a matrix file.
    """
    if role == "table file":
        return data.read_csv_bytes(path)
    if role == "input data file":
        return read_regular(path, _MAX_INPUT_DATA_BYTES, "a data file (CSV, MDF, MAT or HDF5)", DataError)
    what = {"node file": "a node list (id x y z per line)",
            "DOF map": "a DOF map (equation node DOF per line)"}.get(role, "a Matrix Market file (.mtx)")
    return read_regular(path, _MAX_MATRIX_BYTES, what, ModelError)


def _model_text(path: Path) -> str:
    raw = read_regular(path, _MAX_BYTES, "a TOML model file or the name of a bundled example", ModelError)
    try:
        return decode_text(raw)  # a byte-order mark is not a syntax error
    except UnicodeDecodeError:
        raise ModelError(f"{path}: not a UTF-8 text file; save the model file as UTF-8 TOML.") from None


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """A model file as it travels to parallel workers: its text and the bytes of the table
    files it reads, never a compiled object (issue 14).

    :meth:`from_path` reads and checks the file as :func:`load_model` does (table files
    inside the model's folder unless ``allow_external_tables``); :meth:`load` parses the text
    again anywhere, taking the tables from :attr:`tables` instead of the disk, so a worker on
    another machine builds the same model (through its build cache).

    Attributes
    ----------
    text : str
    source : str
        The file's path, named in messages.
    directory : str
        The file's folder (table file names are relative to it).
    tables : tuple of (str, bytes)
        Each data file's name as written in the model file (``table_load`` tables, Matrix
        Market files, the bench files of measured inputs: :func:`data_files`), and its bytes.
    """

    text: str
    source: str = "<model>"
    directory: str = "."
    tables: tuple[tuple[str, bytes], ...] = ()
    #: The model :meth:`from_path` parsed, returned by :meth:`load` in this process instead of
    #: parsing the text again; not pickled (a worker parses the text).
    _parsed: Model | None = dataclasses.field(default=None, compare=False, repr=False)

    @classmethod
    def from_path(cls, path: str | os.PathLike, registry: Registry | None = None, *,
                  allow_external_tables: bool = False) -> ModelSource:
        """Read and check the model file ``path`` (see :func:`load_model`)."""
        path = Path(path)
        text = _model_text(path)
        tables: dict[str, bytes] = {}
        model = _parse(text, str(path), path.parent, registry, allow_external_tables, None, tables)
        return cls(text, str(path), str(path.parent), tuple(sorted(tables.items())),
                   model if registry is None else None)

    def load(self, registry: Registry | None = None) -> Model:
        """The model (tables from :attr:`tables`)."""
        if self._parsed is not None and registry is None:
            return self._parsed
        return parse_model(self.text, self.source, Path(self.directory), registry, tables=dict(self.tables))

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_parsed"}

    def __setstate__(self, state: dict) -> None:
        for key, value in {**state, "_parsed": None}.items():
            object.__setattr__(self, key, value)

    def digest(self) -> str:
        """SHA-256 of the text and the tables (what a worker builds from)."""
        h = hashlib.sha256()
        for part in (self.text.encode(), self.source.encode(), self.directory.encode()):
            h.update(len(part).to_bytes(8, "little") + part)
        for name, raw in self.tables:
            h.update(len(name.encode()).to_bytes(8, "little") + name.encode() + hashlib.sha256(raw).digest())
        return h.hexdigest()


def parse_model(
    text: str, source: str = "<model>", directory: Path | None = None, registry: Registry | None = None, *,
    allow_external_tables: bool = False, tables: Mapping[str, bytes] | None = None,
    components: ComponentRegistry | None = None,
) -> Model:
    """Build a :class:`Model` from the text of a TOML model file.

    ``registry`` and ``components`` resolve the types of force elements and of component
    plugins (default: the installed entry points; see :func:`load_model`).

    ``table_load`` files are read relative to ``directory`` (default: the current folder)
    and, unless ``allow_external_tables``, only from inside it (see :func:`load_model`).
    ``tables`` (file name as written in the model file to its bytes) replaces the disk.
    """
    return _parse(text, source, directory, registry, allow_external_tables, tables, None, components)


def parse_system(text: str, source: str = "<model>", registry: Registry | None = None, *,
                 components: ComponentRegistry | None = None) -> mbs.MultibodySystem:
    """The :class:`~fmi_adjoint.mbs.MultibodySystem` of the text of a multibody model file,
    before lowering (:func:`parse_model` lowers it to a Model): the same reader, limits and
    messages.  Tables from files (``table_load``) are not read.

    Raises
    ------
    ModelError
        As :func:`parse_model`, and for a file that is not a multibody model.
    """
    reader = _Reader(_toml(text, source), text, source, Path("."), registry)
    reader.tables = {}
    reader.components = components
    return reader.system()


def _toml(text: str, source: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ModelError(f"{source}: malformed TOML: {exc}. Fix the syntax at that line.") from None
    except ValueError:  # an integer of more than 4300 digits (Python's conversion limit)
        raise ModelError(f"{source}: a number has too many digits to be read; write it as a float, "
                         "e.g. 1.5e300.") from None


def _parse(text: str, source: str, directory: Path | None, registry: Registry | None, allow_external_tables: bool,
           tables: Mapping[str, bytes] | None, read: dict[str, bytes] | None,
           components: ComponentRegistry | None = None) -> Model:
    """:func:`parse_model`; the table files read are added to ``read``.  The garbage collector
    pauses meanwhile (:func:`~fmi_adjoint.model.collection_paused`)."""
    with collection_paused():
        return _parse_text(text, source, directory, registry, allow_external_tables, tables, read, components)


def _parse_text(text: str, source: str, directory: Path | None, registry: Registry | None,
                allow_external_tables: bool, tables: Mapping[str, bytes] | None, read: dict[str, bytes] | None,
                components: ComponentRegistry | None) -> Model:
    reader = _Reader(_toml(text, source), text, source, directory or Path("."), registry, allow_external_tables)
    reader.tables, reader.read_tables = tables, read
    reader.components = components
    model = reader.model()
    # Expressions are parsed with the model's names when the equations are assembled;
    # doing it here reports them against the file instead of later from compile_model.
    try:
        parse_items(model)
    except ModelError as exc:
        text_of = str(exc)
        special = reader.output_of_special(text_of)
        named = f"output '{special[1]}': " if special is not None else ""
        raise type(exc)(f"{source} ({reader.line_for_message(text_of)}): {named}{text_of}") from None
    return model


class _Reader:
    #: Component plugins (None: the installed entry points).
    components: ComponentRegistry | None = None

    def __init__(self, doc: dict, text: str, source: str, directory: Path, registry: Registry | None,
                 allow_external_tables: bool = False):
        self.allow_external_tables = allow_external_tables
        self.registry = registry
        self.doc = doc
        # TOML ends lines at \n only (str.splitlines also splits at U+2028, U+0085, ..., which
        # a comment or string may hold, and would shift every later line number).
        self.lines = text.split("\n")
        self.source = source
        self.directory = directory
        #: Table files given as bytes (a :class:`ModelSource`), else None: read from disk.
        self.tables: Mapping[str, bytes] | None = None
        #: Where the table files read from disk are recorded, if anywhere.
        self.read_tables: dict[str, bytes] | None = None
        self._headers: list[tuple[int, bool, tuple[str, ...]]] | None = None
        self._array_headers: dict[str, list[int]] | None = None
        self._header_numbers: list[int] | None = None

    # -- locating entries in the text for messages ---------------------------------
    #: What an element's error says (``assemble``, ``Model``, the force elements), mapped to
    #: its section and the key whose value the quoted name is; the first match in the message
    #: (after the model's own name) wins.
    _MENTIONS = (
        (re.compile(r"^model (?:name|'[^']*': (?:description|source))\b"), "model", None),
        (re.compile(r"force element (?:name )?'([^']*)'"), "forces", "name"),
        (re.compile(r"prescribed motion of '([^']*)'"), "prescribed", "coordinate"),
        (re.compile(r"\bconstraint '([^']*)'"), "constraints", "name"),
        (re.compile(r"\boutput '([^']*)'"), "outputs", "name"),
        (re.compile(r"\bmass_matrix\[(\d+)\]"), "mass_matrix", None),
        (re.compile(r"\bcoordinate '([^']*)'"), "coordinates", "name"),
        (re.compile(r"\bmatrix term '([^']*)'"), "matrix_terms", "name"),
        (re.compile(r"\bquadratic constraints '([^']*)'"), "quadratic_constraints", "name"),
        (re.compile(r"\bparameter '([^']*)'"), "parameters", None),
        (re.compile(r"\binput '([^']*)'"), "inputs", None),
    )

    def line_for_message(self, message: str) -> str:
        """Line of the entry an error of the assembled model is about.

        The message names the entry (``constraint 'c3'``, ``force element 'spring'``,
        ``mass_matrix[2]``, ...); the line is that of its ``[[section]]`` header (of its key
        for ``[parameters]``/``[inputs]``), found through the parsed document, so that names
        used elsewhere (the model's own name, a coordinate named in a constraint's message)
        do not mislead.  Messages naming no entry fall back to the first ``name = ...`` line
        that defines a quoted name.
        """
        special = self.output_of_special(message)
        if special is not None:
            return self.line_of("outputs", special[0])
        body = message if re.match(r"^model '[^']*': (description|source)\b", message) else \
            re.sub(r"^model '[^']*':\s*", "", message)
        found = sorted((match.start(), k, match) for k, (pattern, _, _) in enumerate(self._MENTIONS)
                       if (match := pattern.search(body)))
        for _, k, match in found:
            _, section, field = self._MENTIONS[k]
            if section == "model":
                key = "name" if "name" in match.group(0) else match.group(0).rsplit(" ", 1)[-1]
                return self.line_of("model", key=key)
            value = match.group(1)
            if section in ("parameters", "inputs"):
                if isinstance(self.doc.get(section), dict) and value in self.doc[section]:
                    return self.line_of(section, key=value)
                continue
            entries = self.doc.get(section)
            if not isinstance(entries, list):
                continue
            if field is None:
                if int(value) < len(entries):
                    return self.line_of(section, int(value))
                continue
            for index, entry in enumerate(entries):
                if isinstance(entry, dict) and entry.get(field) == value:
                    return self.line_of(section, index)
        model_name = (self.doc.get("model") or {}).get("name") if isinstance(self.doc.get("model"), dict) else None
        for name in re.findall(r"'([A-Za-z_][A-Za-z0-9_]*)'", body):
            if name == model_name:
                continue
            pattern = re.compile(rf"^\s*(name|coordinate)\s*=\s*[\"']{re.escape(name)}[\"']")
            for number, line in enumerate(self.lines, start=1):
                if pattern.match(line):
                    return f"line {number}"
        # Multibody components name what they generate after themselves (the constraint
        # 'hinge_x' of joint 'hinge', the coordinate 'rod_phi' of body 'rod').
        for name in re.findall(r"'([A-Za-z_][A-Za-z0-9_]*)'", body):
            if name != model_name and (entry := self.mbs_entry(name, prefix=True)) is not None:
                return self.line_of(*entry)
        return "unknown line"

    def output_of_special(self, message: str) -> tuple[int, str] | None:
        """``(index, name)`` of the output whose ``der(x)``, ``der2(x)``, ``lam(c)`` or
        ``reaction(x)`` the message is about: their handlers raise without the output's name."""
        special = re.match(r"^(der2?|lam|reaction)\((\w+)\):", message)
        outputs = self.doc.get("outputs")
        if special is None or not isinstance(outputs, list):
            return None
        call = special.group(0)[:-1]
        for index, entry in enumerate(outputs):
            if isinstance(entry, dict) and call in re.sub(r"\s+", "", str(entry.get("expression", ""))):
                return index, str(entry.get("name", ""))
        return None

    def headers(self) -> list[tuple[int, bool, tuple[str, ...]]]:
        """The table headers of the text: ``(line number, is [[array]], dotted key)``.

        Lines inside multi-line strings are skipped (a line of an expression written in
        triple quotes is not a header); quoted keys are unquoted.
        """
        if self._headers is None:
            self._headers = []
            open_quote: str | None = None
            for number, line in enumerate(self.lines, start=1):
                stripped = line.strip()
                if open_quote is None and stripped.startswith("["):
                    array = stripped.startswith("[[")
                    close = stripped.find("]]" if array else "]")
                    inner = stripped[2 if array else 1:close] if close > 0 else ""
                    self._headers.append((number, array, tuple(part.strip().strip("\"'") for part in inner.split("."))))
                    continue
                for quote in ('"""', "'''"):
                    if open_quote in (None, quote) and line.count(quote) % 2 == 1:
                        open_quote = quote if open_quote is None else None
        return self._headers

    def array_header_lines(self, section: str) -> list[int]:
        """Line numbers of the ``[[section]]`` headers, in order (indexed once per file: every
        entry's location is looked up, and a scan per look-up grew as N^2, issue 24)."""
        if self._array_headers is None:
            self._array_headers = {}
            for number, array, name in self.headers():
                if array and len(name) == 1:
                    self._array_headers.setdefault(name[0], []).append(number)
        return self._array_headers.get(section, [])

    def line_of(self, section: str, index: int | None = None, key: str | None = None) -> str:
        """Line of the ``index``-th ``[[section]]`` header, or of ``[section]`` (of its ``key``)."""
        headers = self.headers()
        if index is not None:
            entries = self.array_header_lines(section)
            if index < len(entries):
                return f"line {entries[index]}"
            return self.key_line(section, 1, headers[0][0] - 1 if headers else len(self.lines)) or "unknown line"
        for position, (number, array, name) in enumerate(headers):
            if name[:1] != (section,) or array:
                continue
            if key is None:
                return f"line {number}"
            if name == (section, key):
                return f"line {number}"
            if name == (section,):
                end = headers[position + 1][0] - 1 if position + 1 < len(headers) else len(self.lines)
                return self.key_line(key, number + 1, end) or f"line {number}"
        # A section written as a key of the root table (``constraints = [...]``).
        return self.key_line(section, 1, headers[0][0] - 1 if headers else len(self.lines)) or "unknown line"

    def key_line(self, key: str, first: int, last: int) -> str | None:
        """Line of ``key = ...`` between lines ``first`` and ``last``, if any."""
        pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
        for number in range(first, last + 1):
            if pattern.match(self.lines[number - 1]):
                return f"line {number}"
        return None

    def where(self, section: str, index: int | None = None, key: str | None = None) -> str:
        label = section if index is None else f"{section}[{index}]"
        if key is not None:
            label += f".{key}"
        return f"{self.source} ({self.line_of(section, index, key if index is None else None)}), {label}"

    # -- generic checks --------------------------------------------------------------
    def table(self, value: Any, where: str, allowed: AbstractSet[str],
              required: AbstractSet[str] = frozenset()) -> dict:
        if not isinstance(value, dict):
            raise ModelError(f"{where}: expected a table, got {type(value).__name__}.")
        unknown = sorted(set(value) - allowed)
        if unknown:
            raise ModelError(f"{where}: unknown key(s) {unknown}. Allowed: {', '.join(sorted(allowed))}.")
        missing = sorted(required - set(value))
        if missing:
            raise ModelError(f"{where}: missing key(s) {missing}.")
        return value

    def array(self, section: str) -> list:
        value = self.doc.get(section, [])
        if not isinstance(value, list):
            raise ModelError(f"{self.where(section)}: write this section as [[{section}]] entries.")
        return value

    def text(self, value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise ModelError(f"{where}: expected a string, got {value!r}.")
        return value

    def expr(self, value: Any, where: str) -> str | float:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ModelError(f"{where}: expected a number or an expression string, got {value!r}.")
        return value

    def constant(self, value: Any, where: str) -> float:
        expr = parse_expression(self.expr(value, where), {}, where=where)
        if not expr.is_number:
            raise ModelError(f"{where}: {value!r} must be a constant.")
        result = float(expr)
        if not math.isfinite(result):
            raise ModelError(f"{where}: {value!r} is not finite.")
        return result

    def bound(self, value: Any, where: str) -> float:
        # Open bounds: TOML's inf/-inf literals or the strings "inf"/"-inf".
        if isinstance(value, float) and math.isinf(value):
            return value
        if value in ("inf", "-inf", "+inf"):
            return float(value)
        return self.constant(value, where)

    # -- sections --------------------------------------------------------------------
    def model(self) -> Model:
        head, items = self.located(self.entries)
        if self.multibody(head):
            model = self.located(lambda: self.multibody_model(head, items))
        else:
            model = self.located(lambda: Model(**items))
        self.check_structured_coordinates(model)
        return model

    def system(self) -> mbs.MultibodySystem:
        """The file's multibody system before lowering (:func:`parse_system`)."""
        head, items = self.located(self.entries)
        if not self.multibody(head):
            raise ModelError(f"{self.source}: not a multibody model (no bodies, markers, joints, sensors, gravity or "
                             "multibody forces); load it with parse_model.")
        return self.located(lambda: self.multibody_system(head, items))

    def entries(self) -> tuple[dict, dict]:
        """The ``[model]`` table and the plain items of the file, after the limits on the
        number of entries per section (checked first, before any entry is read)."""
        unknown = sorted(set(self.doc) - _SECTIONS)
        if unknown:
            raise ModelError(f"{self.source}: unknown section(s) {unknown}. Sections: {', '.join(sorted(_SECTIONS))}.")
        head = self.table(self.doc.get("model", {}), self.where("model"), MODEL_FILE_KEYS["model"][""], {"name"})
        for section, limit in _MAX_ENTRIES.items():
            entries = self.doc.get(section, ())
            if isinstance(entries, (list, dict)) and len(entries) > limit:
                raise ModelError(f"{self.where(section)}: {len(entries)} entries; the limit is {limit}, which bounds "
                                 "the time and memory to build the model. Split the model or reduce it.")
        name = self.text(head["name"], self.where("model", key="name"))
        parameters = self.parameters()
        items = dict(
            name=name,
            description=self.text(head.get("description", ""), self.where("model", key="description")),
            source=self.text(head.get("source", ""), self.where("model", key="source")),
            simulation=self.simulation(),
            parameters=parameters,
            coordinates=self.coordinates(),
            mass_matrix=self.mass_matrix(),
            forces=self.forces(),
            constraints=self.constraints(),
            prescribed=self.prescribed(),
            outputs=self.outputs(),
            matrix_terms=self.structured(),
            signals=self.measured_inputs(name, parameters),
        )
        return head, items

    def located(self, build: Callable[[], _T]) -> _T:
        """``build()``, its ModelErrors located in the file (source and line) unless they are."""
        try:
            return build()
        except ExpressionError:
            raise
        except ModelError as exc:
            if self.source in str(exc):
                raise
            raise ModelError(f"{self.source} ({self.line_for_message(str(exc))}): {exc}") from None

    def simulation(self) -> SimulationSettings:
        where = self.where("simulation")
        sim = self.table(self.doc.get("simulation", {}), where, MODEL_FILE_KEYS["simulation"][""])
        values: dict[str, object] = {}
        for key, val in sim.items():
            if key in _SIMULATION_NAMES:
                what, choices = _SIMULATION_NAMES[key]
                if not isinstance(val, str):
                    raise ModelError(f"{self.where('simulation', key=key)}: {excerpt(repr(val))} is not {what}; "
                                     f"write {choices}.")
                values[key] = val
            else:
                values[key] = self.constant(val, self.where("simulation", key=key))
        return SimulationSettings(**values)  # type: ignore[arg-type]

    def parameters(self) -> tuple[Parameter, ...]:
        return self.parameter_section("parameters", "parameter") + self.parameter_section("inputs", "input")

    def parameter_section(self, section: str, causality: str) -> tuple[Parameter, ...]:
        section_value = self.doc.get(section, {})
        if not isinstance(section_value, dict):
            raise ModelError(f"{self.where(section)}: write this section as a table [{section}] of name = value.")
        params = self.table(section_value, self.where(section), set(section_value))
        result = []
        for name, spec in params.items():
            where = self.where(section, key=name)
            if not isinstance(spec, dict):
                spec = {"value": spec}
            if section == "parameters" and _MEASURED_KEYS & set(spec):
                raise ModelError(f"{where}: 'file' and 'channel' drive an input by measured data, and {excerpt(name)} "
                                 "is a parameter; move the entry to [inputs] to drive it by a data channel, or remove "
                                 "them.")
            spec = self.table(spec, where, MODEL_FILE_KEYS[section][""], {"value"})
            bounds = spec.get("bounds", [-math.inf, math.inf])
            if not isinstance(bounds, list) or len(bounds) != 2:
                raise ModelError(f"{where}.bounds: expected [lower, upper], got {bounds!r}.")
            try:
                result.append(
                    Parameter(
                        name=name,
                        value=self.constant(spec["value"], f"{where}.value"),
                        unit=self.text(spec.get("unit", ""), f"{where}.unit"),
                        bounds=(self.bound(bounds[0], f"{where}.bounds"), self.bound(bounds[1], f"{where}.bounds")),
                        description=self.text(spec.get("description", ""), f"{where}.description"),
                        causality=causality,
                    )
                )
            except ExpressionError:
                raise
            except ModelError as exc:
                raise ModelError(f"{where}: {exc}") from None
        return tuple(result)

    def coordinates(self) -> tuple[Coordinate, ...]:
        allowed = MODEL_FILE_KEYS["coordinates"][""]
        result = []
        for k, spec in enumerate(self.array("coordinates")):
            where = self.where("coordinates", k)
            spec = self.table(spec, where, allowed, {"name"})
            for flag in ("fixed_position", "fixed_velocity"):
                if not isinstance(spec.get(flag, False), bool):
                    raise ModelError(f"{where}.{flag}: expected true or false.")
            for key in ("mass", "initial_position", "initial_velocity"):
                if key in spec:
                    self.expr(spec[key], f"{where}.{key}")
            try:
                result.append(Coordinate(**spec))
            except ModelError as exc:
                raise ModelError(f"{where}: {exc}") from None
        return tuple(result)

    def mass_matrix(self) -> tuple[MassEntry, ...]:
        result = []
        for k, spec in enumerate(self.array("mass_matrix")):
            where = self.where("mass_matrix", k)
            spec = self.table(spec, where, MODEL_FILE_KEYS["mass_matrix"][""], {"row", "col", "value"})
            result.append(MassEntry(self.text(spec["row"], where), self.text(spec["col"], where),
                                    self.expr(spec["value"], where)))
        return tuple(result)

    def forces(self) -> tuple:
        from .forces.library import TableLoad

        result = []
        for k, spec in enumerate(self.array("forces")):
            where = self.where("forces", k)
            if not isinstance(spec, dict) or "type" not in spec or "name" not in spec:
                raise ModelError(f"{where}: every force element needs 'type' and 'name'.")
            if spec["type"] in _MBS_FORCES:
                result.append(self.mbs_force(k, spec))
                continue
            if self.plugin_kind("forces", spec["type"]):
                result.append(self.plugin_component("forces", k, spec))
                continue
            kind = self.text(spec["type"], f"{where}.type")
            try:
                cls = element_type(kind, where, self.registry)
            except ModelError as exc:  # unknown: name the multibody types and the component plugins too
                raise ModelError(f"{exc} Multibody force types: {', '.join(_MBS_FORCES)}; component plugins: "
                                 f"{', '.join(self.component_registry().names()) or '(none installed)'}.") from None
            fields = {key: value for key, value in spec.items() if key != "type"}
            if cls is TableLoad:
                fields = self.table_fields(fields, where)
            allowed = {f.name for f in dataclasses.fields(cls)}
            unknown = sorted(set(fields) - allowed)
            if unknown:
                raise ModelError(
                    f"{where}: unknown key(s) {unknown} for element type '{cls.type_name}'. "
                    f"Allowed: {', '.join(sorted(allowed | {'type'}))}."
                )
            for key, value in fields.items():
                # Each entry of a list property (stages, branches, knots) adds terms to the law
                # and to its derivatives: bound the list so a model builds in bounded time.
                if isinstance(value, list) and len(value) > _MAX_LIST:
                    raise ModelError(f"{where}.{key}: {len(value)} entries; the limit is {_MAX_LIST}. Split the "
                                     "characteristic into several elements.")
            fields = {key: tuple(value) if isinstance(value, list) else value for key, value in fields.items()}
            try:
                result.append(cls(**fields))
            except ModelError as exc:
                raise ModelError(f"{where}: {exc}") from None
            except (TypeError, ValueError, OverflowError) as exc:
                raise ModelError(f"{where}: invalid values for element type '{cls.type_name}': {exc}.") from None
        return tuple(result)

    def table_fields(self, fields: dict, where: str) -> dict:
        """``file``/``column`` of a ``table_load`` to its ``times``/``values``.

        The file must resolve (symlinks and ``..`` followed) to a place inside the model
        file's folder unless external tables are allowed: a model file must not make the
        tool read other files.  Errors name the entry and never echo the file's content.
        """
        fields = dict(fields)
        if "file" not in fields or "column" not in fields:
            raise ModelError(f"{where}: a table_load needs 'file' (CSV with a 'time' column) and 'column'.")
        name = self.text(fields.pop("file"), f"{where}.file")
        column = self.text(fields.pop("column"), f"{where}.column")
        try:
            file, raw = self.data_file(name, f"{where}.file", "table file", "the table")
            table = parse_csv(raw, str(file))
            values = table.column(column)
        except DataError as exc:
            raise ModelError(f"{where}: {exc}") from None
        fields["times"] = tuple(table.times)
        fields["values"] = tuple(values)
        return fields

    def data_file(self, name: str, where: str, role: str, what: str) -> tuple[Path, bytes]:
        """The path and bytes of the data file ``name`` (:func:`data_files`; ``where`` locates
        its key, ``what`` names it in messages): from :attr:`tables` if given, else read from
        disk (:func:`read_data_file`), inside the model file's folder unless external tables
        are allowed.  Recorded in :attr:`read_tables`."""
        if "\0" in name:
            raise ModelError(f"{where}: {excerpt(name)} holds a NUL character; give a file name.")
        file = self.directory / name
        if self.tables is not None:
            if name not in self.tables:
                raise ModelError(f"{where}: {excerpt(name)} is not among the tables sent with the model; "
                                 "build the model source with ModelSource.from_path.")
            raw = self.tables[name]
        else:
            if not self.allow_external_tables:
                folder = self.directory.resolve()
                if not file.resolve().is_relative_to(folder):
                    raise ModelError(
                        f"{where}: {excerpt(name)} lies outside the model file's folder {str(folder)!r}; "
                        f"put {what} next to the model file, or pass --allow-external-tables if you trust "
                        "this model file."
                    )
            raw = read_data_file(role, file)
        if self.read_tables is not None:
            self.read_tables[name] = raw
        return file, raw

    # -- measured inputs (issue 26, part 7) --------------------------------------------
    def measured_inputs(self, model: str, parameters: tuple[Parameter, ...]) -> tuple[InputSignal, ...]:
        """The ``[inputs]`` entries with ``file`` and ``channel``, each as the measured
        :class:`~fmi_adjoint.model.InputSignal` of that channel (module docstring), in file order."""
        section = self.doc.get("inputs", {})
        units = {p.name: p.unit for p in parameters if p.causality == "input"}
        return tuple(self.measured_input(name, spec, units[name], model) for name, spec in section.items()
                     if isinstance(spec, dict) and _MEASURED_KEYS & set(spec))

    def measured_input(self, name: str, spec: dict, unit: str, model: str) -> InputSignal:
        """The input ``name`` (in ``unit``) of model ``model`` driven by ``spec``'s channel."""
        from .bench.contract import MissingChannel
        from .bench.inputs import input_channel, missing_input_channel

        where = self.where("inputs", key=name)
        if not _MEASURED_KEYS <= set(spec):
            given, missing = ("file", "channel") if "file" in spec else ("channel", "file")
            raise ModelError(f"{where}: '{given}' without '{missing}'; give both (a data file next to the model file "
                             "and its channel) to drive the input by measured data, or neither.")
        name_of_file = self.text(spec["file"], f"{where}.file")
        channel = self.text(spec["channel"], f"{where}.channel")
        try:
            _, raw = self.data_file(name_of_file, f"{where}.file", "input data file", "the data file")
            measurement = _read_channel(raw, name_of_file, channel)
            measured = input_channel(measurement, channel, input_name=name, input_unit=unit, model=f"model '{model}'")
        except MissingChannel as exc:
            raise ModelError(f"{where}: {missing_input_channel(exc, name)}") from None
        except DataError as exc:
            raise ModelError(f"{where}: {exc}") from None
        try:
            return InputSignal(name, ((tuple(measured.times), tuple(measured.values)),), source=measured.source)
        except ModelError as exc:
            raise ModelError(f"{where}: {exc}") from None

    # -- structured terms (issue 24, part 2; fmi_adjoint.structured) ---------------------------
    def structured(self) -> tuple[StructuredItem, ...]:
        """``[[matrix_terms]]`` then ``[[quadratic_constraints]]``, each in file order; a name
        used twice among them is refused naming both entries."""
        terms = [self.matrix_term(k, spec) for k, spec in enumerate(self.array("matrix_terms"))]
        quadratic = [self.quadratic(k, spec) for k, spec in enumerate(self.array("quadratic_constraints"))]
        seen: dict[str, tuple[str, int]] = {}
        named = [("matrix_terms", k, t.name) for k, t in enumerate(terms)] + \
            [("quadratic_constraints", k, q.name) for k, q in enumerate(quadratic)]
        for section, k, name in named:
            if name in seen:
                first = seen[name]
                raise ModelError(f"{self.entry_where(section, k, 'name')}: the name '{name}' is also that of "
                                 f"{self.entry_label(*first)} ({self.line_of(*first)}); give each structured term "
                                 "a name of its own.")
            seen[name] = (section, k)
        return (*terms, *quadratic)

    def matrix_term(self, index: int, spec: Any) -> MatrixTerm:
        """A ``[[matrix_terms]]`` entry: ``factor * A`` of a role (:class:`~fmi_adjoint.structured.MatrixTerm`)."""
        where = self.entry_where("matrix_terms", index)
        spec = self.table(spec, where, MODEL_FILE_KEYS["matrix_terms"][""], {"name", "role", "coordinates", "matrix"})

        def at(key: str) -> str:
            return self.entry_where("matrix_terms", index, key)

        role = spec["role"]
        if not isinstance(role, str) or role not in ROLES:
            raise ModelError(f"{at('role')}: {excerpt(role)} is not a role; write role = one of "
                             f"{', '.join(chr(34) + r + chr(34) for r in ROLES)}.")
        coordinates = self.coordinate_names(spec["coordinates"], at("coordinates"))
        k = len(coordinates)
        if ROLES[role].argument is None:
            shape, needed = (k, 1), f"{k} x 1 (a load: one row per coordinate, one column)"
        else:
            shape, needed = (k, k), f"{k} x {k} (one row and one column per coordinate)"
        fields: dict[str, Any] = {"name": self.text(spec["name"], at("name")), "role": ROLES[role],
                                  "coordinates": coordinates,
                                  "matrix": self.matrix(spec["matrix"], at("matrix"), shape, needed)}
        if "factor" in spec:
            fields["factor"] = self.expr(spec["factor"], at("factor"))
        return cast(MatrixTerm, self.component("matrix_terms", index, MatrixTerm, **fields))

    def quadratic(self, index: int, spec: Any) -> QuadraticConstraints:
        """A ``[[quadratic_constraints]]`` entry: rows ``c0_r + J0_r q + 1/2 q^T H_r q`` (seed 003,
        eq. (13); :class:`~fmi_adjoint.structured.QuadraticConstraints`).  ``jacobian`` defaults
        to zero, ``hessians`` to none (linear rows)."""
        where = self.entry_where("quadratic_constraints", index)
        spec = self.table(spec, where, MODEL_FILE_KEYS["quadratic_constraints"][""], {"name", "coordinates", "c0"})

        def at(key: str) -> str:
            return self.entry_where("quadratic_constraints", index, key)

        coordinates = self.coordinate_names(spec["coordinates"], at("coordinates"))
        c0_spec = spec["c0"]
        if not isinstance(c0_spec, list) or not c0_spec:
            raise ModelError(f"{at('c0')}: expected a list of numbers, one constant per constraint row, e.g. [-1.0]; "
                             f"got {excerpt(c0_spec, 60)}.")
        c0 = self.numbers(c0_spec, at("c0"))
        m, k = len(c0), len(coordinates)
        shape = (m, k)
        if "jacobian" in spec:
            jacobian = self.matrix(spec["jacobian"], at("jacobian"), shape,
                                   f"{m} x {k} (one row per entry of c0, one column per coordinate)")
        else:
            jacobian = SparseMatrix.of(([], [], []), f"{where}: J0", shape)
        hessians: list[tuple[int, int, int, float]] = []
        if "hessians" in spec:
            hessians = self.hessian_entries(spec["hessians"], at("hessians"), m, k)
        return cast(QuadraticConstraints, self.component(
            "quadratic_constraints", index, QuadraticConstraints, name=self.text(spec["name"], at("name")),
            coordinates=coordinates, c0=c0, jacobian=jacobian, hessians=hessians))

    def coordinate_names(self, value: Any, where: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not value or not all(isinstance(x, str) for x in value):
            raise ModelError(f"{where}: expected a list of coordinate names such as [\"u1\", \"u2\"], got "
                             f"{excerpt(value, 60)}.")
        return tuple(value)

    def numbers(self, value: Any, where: str) -> list[float]:
        """A list of finite numbers (TOML integers or floats)."""
        if not isinstance(value, list):
            raise ModelError(f"{where}: expected a list of numbers, got {excerpt(value, 60)}.")
        for n, x in enumerate(value):
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                raise ModelError(f"{where}[{n}]: {excerpt(x)} is not a number; give numbers.")
            if isinstance(x, float) and not math.isfinite(x):
                raise ModelError(f"{where}[{n}]: {x} is not finite; give finite numbers.")
        try:
            return [float(x) for x in value]
        except OverflowError:  # an integer beyond the floats
            raise ModelError(f"{where}: a number is too large for a float; give finite numbers.") from None

    def indices(self, value: Any, where: str, bound: int, what: str) -> list[int]:
        """A list of 0-based indices below ``bound`` (``what`` says what they count)."""
        if not isinstance(value, list):
            raise ModelError(f"{where}: expected a list of 0-based indices, got {excerpt(value, 60)}.")
        for n, x in enumerate(value):
            if isinstance(x, bool) or not isinstance(x, int):
                raise ModelError(f"{where}[{n}]: {excerpt(x)} is not an index; give 0-based integers.")
            if not 0 <= x < bound:
                raise ModelError(f"{where}[{n}] = {x} lies outside 0 .. {bound - 1} ({bound} {what}); indices are "
                                 "0-based.")
        return list(value)

    def matrix(self, value: Any, where: str, shape: tuple[int, int], needed: str) -> SparseMatrix:
        """A matrix inline table (``MODEL_FILE_KEYS["matrix"]``) of ``shape`` (``needed`` says
        why, for messages): 0-based triplets, ``symmetric = true`` giving one triangle, or
        ``{ file = ... }`` (:meth:`matrix_market`)."""
        forms = MODEL_FILE_KEYS["matrix"]
        if not isinstance(value, dict):
            raise ModelError(f"{where}: a matrix is an inline table {{ rows = [..], cols = [..], values = [..] }} "
                             f"(0-based triplets) or {{ file = \"k.mtx\" }} (Matrix Market); got {excerpt(value, 60)}.")
        if "file" in value:
            unknown = sorted(set(value) - forms["file"])
            if unknown:
                raise ModelError(f"{where}: unknown key(s) {unknown} next to 'file' (a Matrix Market file declares "
                                 "its shape and symmetry itself). Allowed: file.")
            name = self.text(value["file"], f"{where}.file")
            try:
                file, raw = self.data_file(name, f"{where}.file", "matrix file", "the matrix file")
            except ModelError as exc:
                raise ModelError(str(exc) if self.source in str(exc) else f"{where}.file: {exc}") from None
            return self.matrix_market(raw, file, f"{where}.file", shape, needed)
        value = self.table(value, where, forms["triplets"], {"rows", "cols", "values"})
        if "shape" in value:
            given = value["shape"]
            if not (isinstance(given, list) and len(given) == 2 and all(
                    isinstance(x, int) and not isinstance(x, bool) for x in given)) or tuple(given) != shape:
                raise ModelError(f"{where}.shape: {excerpt(given, 40)}, but the matrix here is {needed}; fix the "
                                 "shape or the coordinates.")
        rows = self.indices(value["rows"], f"{where}.rows", shape[0], "rows")
        cols = self.indices(value["cols"], f"{where}.cols", shape[1], "columns")
        values = self.numbers(value["values"], f"{where}.values")
        if not len(rows) == len(cols) == len(values):
            raise ModelError(f"{where}: rows, cols and values have {len(rows)}, {len(cols)} and {len(values)} entries; "
                             "give one row, one column and one value per entry.")
        if self.flag(value.get("symmetric", False), f"{where}.symmetric"):
            if shape[0] != shape[1]:
                raise ModelError(f"{where}.symmetric: the matrix here is {needed}, not square; remove symmetric.")
            lower = any(r > c for r, c in zip(rows, cols))
            upper = any(r < c for r, c in zip(rows, cols))
            if lower and upper:
                raise ModelError(f"{where}: symmetric = true takes the entries of one triangle (with the diagonal), "
                                 "which are mirrored; these lie in both. Give one triangle or remove symmetric.")
            mirror = [n for n, (r, c) in enumerate(zip(rows, cols)) if r != c]
            rows, cols = rows + [cols[n] for n in mirror], cols + [rows[n] for n in mirror]
            values = values + [values[n] for n in mirror]
        try:
            return SparseMatrix.of((rows, cols, values), where, shape)
        except ModelError as exc:
            raise ModelError(str(exc) if self.source in str(exc) else f"{where}: {exc}") from None

    def matrix_market(self, raw: bytes, file: Path, where: str, shape: tuple[int, int], needed: str) -> SparseMatrix:
        """A Matrix Market file's matrix, read with :func:`scipy.io.mmread` (coordinate or
        array format; real or integer; general, symmetric or skew-symmetric).  The header is
        read first: its field, symmetry, shape and the entries it declares (against
        :data:`~fmi_adjoint.structured.MAX_ENTRIES`) are checked before the body is read."""
        import scipy.io

        name = file.name
        fix = "write it with scipy.io.mmwrite (or a finite-element code's Matrix Market export)"
        try:
            rows, cols, entries, form, field, symmetry = scipy.io.mminfo(io.BytesIO(raw))
        except (ValueError, TypeError, IndexError, OverflowError, RuntimeError) as exc:
            raise ModelError(f"{where}: {excerpt(name)} is not a Matrix Market file ({excerpt(str(exc), 120)[1:-1]}); "
                             f"{fix}.") from None
        if field == "pattern":
            raise ModelError(f"{where}: {excerpt(name)} holds a pattern only (no values); a matrix term needs real "
                             "values: write the file with field 'real'.")
        if field not in ("real", "integer", "double"):
            raise ModelError(f"{where}: {excerpt(name)} holds {field} values; a matrix term takes real numbers: write "
                             "the file with field 'real'.")
        if symmetry not in ("general", "symmetric", "skew-symmetric"):
            raise ModelError(f"{where}: {excerpt(name)} declares symmetry '{symmetry}'; give a real matrix that is "
                             "general, symmetric or skew-symmetric.")
        if (rows, cols) != shape:
            raise ModelError(f"{where}: {excerpt(name)} declares a {rows} x {cols} matrix, but the matrix here is "
                             f"{needed}; fix the file or the coordinates.")
        stored = rows * cols if form == "array" else entries * (1 if symmetry == "general" else 2)
        if stored > MAX_ENTRIES:
            raise ModelError(f"{where}: {excerpt(name)} declares {stored} entries, more than the limit of "
                             f"{MAX_ENTRIES}; reduce the model (fewer modes or a coarser mesh).")
        try:
            matrix = scipy.io.mmread(io.BytesIO(raw))
        except (ValueError, TypeError, IndexError, OverflowError, RuntimeError) as exc:
            raise ModelError(f"{where}: {excerpt(name)} cannot be read as Matrix Market "
                             f"({excerpt(str(exc), 120)[1:-1]}); {fix}.") from None
        try:
            return SparseMatrix.of(matrix, f"{where}: {excerpt(name)}", shape)
        except ModelError as exc:
            raise ModelError(str(exc)) from None

    def hessian_entries(self, value: Any, where: str, m: int, k: int) -> list[tuple[int, int, int, float]]:
        """``hessians = { rows, i, j, values }``: entries ``H_r[i, j]`` (0-based)."""
        spec = self.table(value, where, MODEL_FILE_KEYS["hessians"][""], MODEL_FILE_KEYS["hessians"][""])
        r = self.indices(spec["rows"], f"{where}.rows", m, "constraint rows, one per entry of c0")
        i = self.indices(spec["i"], f"{where}.i", k, "coordinates")
        j = self.indices(spec["j"], f"{where}.j", k, "coordinates")
        x = self.numbers(spec["values"], f"{where}.values")
        if not len(r) == len(i) == len(j) == len(x):
            raise ModelError(f"{where}: rows, i, j and values have {len(r)}, {len(i)}, {len(j)} and {len(x)} entries; "
                             "give one of each per entry.")
        return list(zip(r, i, j, x))

    def check_structured_coordinates(self, model: Model) -> None:
        """Every coordinate a structured term names is one of the model (a multibody model's
        coordinates are known only after lowering)."""
        if not model.matrix_terms:
            return
        known = [c.name for c in model.all_coordinates]
        names = set(known)
        entries = {spec.get("name"): (section, k) for section in ("matrix_terms", "quadratic_constraints")
                   for k, spec in enumerate(self.array(section)) if isinstance(spec, dict)}
        for item in model.matrix_terms:
            unknown = [c for c in item.coordinates if c not in names]
            if unknown and item.name in entries:
                section, k = entries[item.name]
                raise ModelError(f"{self.entry_where(section, k, 'coordinates')}: '{unknown[0]}' is not a coordinate "
                                 f"of the model; name one of {excerpt(', '.join(known), 200)[1:-1]}.")

    def constraints(self) -> tuple[Constraint, ...]:
        result = []
        for k, spec in enumerate(self.array("constraints")):
            where = self.where("constraints", k)
            spec = self.table(spec, where, MODEL_FILE_KEYS["constraints"][""], {"name", "expression"})
            try:
                result.append(Constraint(self.text(spec["name"], where), self.expr(spec["expression"], where)))
            except ModelError as exc:
                raise ModelError(f"{where}: {exc}") from None
        return tuple(result)

    def prescribed(self) -> tuple[PrescribedMotion, ...]:
        result = []
        for k, spec in enumerate(self.array("prescribed")):
            where = self.where("prescribed", k)
            spec = self.table(spec, where, MODEL_FILE_KEYS["prescribed"][""], {"coordinate", "expression"})
            result.append(PrescribedMotion(self.text(spec["coordinate"], where), self.expr(spec["expression"], where)))
        return tuple(result)

    def outputs(self) -> tuple[Output, ...]:
        result = []
        for k, spec in enumerate(self.array("outputs")):
            where = self.where("outputs", k)
            spec = self.table(spec, where, MODEL_FILE_KEYS["outputs"][""], {"name", "expression"})
            try:
                result.append(
                    Output(
                        name=self.text(spec["name"], f"{where}.name"),
                        expression=self.expr(spec["expression"], f"{where}.expression"),
                        unit=self.text(spec.get("unit", ""), f"{where}.unit"),
                        description=self.text(spec.get("description", ""), f"{where}.description"),
                    )
                )
            except ModelError as exc:
                raise ModelError(f"{where}: {exc}") from None
        return tuple(result)

    # -- multibody sections (issue 23) ---------------------------------------------------
    def multibody(self, head: dict) -> bool:
        """True if the file describes a multibody system: ``[model] gravity``, a section of
        bodies, markers, joints or sensors, or a multibody force type."""
        if "gravity" in head or any(section in self.doc for section in _MBS_SECTIONS):
            return True
        forces = self.doc.get("forces")
        return isinstance(forces, list) and any(
            isinstance(f, dict) and isinstance(f.get("type"), str)
            and (f["type"] in _MBS_FORCES or self.plugin_kind("forces", f["type"])) for f in forces)

    def multibody_model(self, head: dict, items: dict) -> Model:
        """The file's :class:`~fmi_adjoint.mbs.MultibodySystem`, lowered to a Model."""
        system = self.multibody_system(head, items)
        try:
            return system.to_model()
        except mbs.RedundantJointsError as exc:
            raise self.redundant_joints_error(exc) from None
        except ModelError as exc:  # ExpressionError included: components name themselves, not the file
            raise self.component_error(exc) from None

    def multibody_system(self, head: dict, items: dict) -> mbs.MultibodySystem:
        """The file's :class:`~fmi_adjoint.mbs.MultibodySystem` (not lowered)."""
        gravity = None
        if "gravity" in head:
            gravity = self.values(head["gravity"], (3,), self.where("model", key="gravity"))
        bodies = tuple(self.mbs_body(k, spec) for k, spec in enumerate(self.array("bodies")))
        markers = tuple(self.mbs_marker(k, spec) for k, spec in enumerate(self.array("markers")))
        joints = tuple(self.mbs_joint(k, spec) for k, spec in enumerate(self.array("joints")))
        sensors = tuple(self.mbs_sensor(k, spec) for k, spec in enumerate(self.array("sensors")))
        try:
            return mbs.MultibodySystem(bodies=bodies, markers=markers, joints=joints, sensors=sensors,
                                       gravity=gravity, **items)
        except ModelError as exc:  # ExpressionError included: components name themselves, not the file
            raise self.component_error(exc) from None

    def redundant_joints_error(self, exc: mbs.RedundantJointsError) -> ModelError:
        """The library's refusal of dependent joints between the same two bodies
        (:func:`fmi_adjoint.mbs.joints.check_joint_pairs`), naming both entries with their lines."""
        index = {spec.get("name"): k for k, spec in enumerate(self.array("joints")) if isinstance(spec, dict)}
        if exc.joint not in index or any(name not in index for name in exc.earlier):
            return self.component_error(exc)
        before = ", ".join(f"{self.entry_label('joints', index[name])} ({self.line_of('joints', index[name])})"
                           for name in exc.earlier)
        bodies = " and ".join(f"'{b}'" for b in exc.bodies)
        return ModelError(
            f"{self.entry_where('joints', index[exc.joint])}: its constraints repeat or contradict those of {before} "
            f"between the same bodies {bodies} (the joints' {exc.rows} rows have rank {exc.rank} at the initial "
            "positions). Remove the joint, or replace the joints by one that allows the intended relative motion.")

    # Messages of the components start with their own name ("joint 'hinge' (revolute).axis: ...").
    _COMPONENT = re.compile(r"^(body|marker|joint force|joint|spring-damper|bushing|force|torque|sensor) "
                            r"'([^']*)'(?: \([^)]*\))?")
    _COMPONENT_SECTION = {"body": "bodies", "marker": "markers", "joint": "joints", "joint force": "forces",
                          "spring-damper": "forces", "bushing": "forces", "force": "forces", "torque": "forces",
                          "sensor": "sensors"}
    #: Field names of the components that the file spells differently.
    _FILE_KEYS = {"marker_i": "markers", "marker_j": "markers", "body_frame_angular_velocity": "angular_velocity_frame"}

    def entry_label(self, section: str, index: int) -> str:
        """``joints[2] 'hinge' (revolute)``: an entry of a section, by index, name and type."""
        entries = self.doc.get(section)
        spec = entries[index] if isinstance(entries, list) and index < len(entries) else None
        label = f"{section}[{index}]"
        if isinstance(spec, dict):
            kind = spec.get("type")
            if isinstance(spec.get("name"), str):
                label += f" {excerpt(spec['name'], 60)}"
            if isinstance(kind, str) and (section != "forces" or kind in _MBS_FORCES):
                label += f" ({excerpt(kind, 40)[1:-1]})"
        return label

    def entry_line(self, section: str, index: int, key: str | None = None) -> str:
        """Line of the ``index``-th ``[[section]]`` entry, of its ``key = ...`` if found."""
        line = self.line_of(section, index)
        if key is None or not line.startswith("line "):
            return line
        first = int(line.split()[1])
        numbers = self.header_numbers()
        after = bisect.bisect_right(numbers, first)
        return self.key_line(key, first + 1, numbers[after] - 1 if after < len(numbers) else len(self.lines)) or line

    def header_numbers(self) -> list[int]:
        """Line numbers of all table headers, ascending."""
        if self._header_numbers is None:
            self._header_numbers = [number for number, _, _ in self.headers()]
        return self._header_numbers

    def entry_where(self, section: str, index: int, key: str | None = None) -> str:
        """``FILE (line N), joints[2] 'hinge' (revolute).key``."""
        return (f"{self.source} ({self.entry_line(section, index, key)}), {self.entry_label(section, index)}"
                + (f".{key}" if key else ""))

    def mbs_entry(self, name: str, prefix: bool = False) -> tuple[str, int] | None:
        """The multibody entry named ``name``; with ``prefix``, also the entry whose name
        starts a generated name (``hinge`` of the constraint ``hinge_x``, ``mount`` of the
        law ``mount_z``): the longest such name."""
        best: tuple[int, str, int] | None = None
        for section in (*_MBS_SECTIONS, "forces"):
            entries = self.doc.get(section)
            for index, spec in enumerate(entries if isinstance(entries, list) else ()):
                own = spec.get("name") if isinstance(spec, dict) else None
                if not isinstance(own, str) or not own:
                    continue
                if own == name:
                    return section, index
                if prefix and name.startswith(own + "_") and (best is None or len(own) > best[0]):
                    best = (len(own), section, index)
        return None if best is None else (best[1], best[2])

    def component_error(self, exc: ModelError, entry: tuple[str, int] | None = None) -> ModelError:
        """``exc`` of a component or of the lowering, located in the file: the component's own
        prefix becomes the entry's label and line (``FILE (line N), joints[2] 'hinge'
        (revolute).axis: ...``); else the message is put at ``entry`` if given, else at the
        entry it names."""
        text = str(exc)
        match = self._COMPONENT.match(text)
        found = None
        if match:
            section = self._COMPONENT_SECTION[match.group(1)]
            found = self.mbs_entry(match.group(2))
            if found is not None and found[0] != section:
                found = None
        if found is not None:
            rest = text[match.end():]  # type: ignore[union-attr]
            key_match = re.match(r"^\.(\w+)", rest)
            key = self._FILE_KEYS.get(key_match.group(1), key_match.group(1)) if key_match else None
            if key_match and key_match.group(1) in self._FILE_KEYS:  # the file's spelling
                spelling = {"marker_i": "markers[0]", "marker_j": "markers[1]"}.get(key_match.group(1), key)
                rest = f".{spelling}{rest[key_match.end():]}"
            section, index = found
            location = f"{self.source} ({self.entry_line(section, index, key)}), {self.entry_label(section, index)}"
            return type(exc)(location + rest)
        body = re.sub(r"^system '[^']*':\s*", "", text)
        if body.startswith("gravity:"):
            return type(exc)(f"{self.where('model', key='gravity')}{body[len('gravity'):]}")
        if entry is not None:
            return type(exc)(f"{self.entry_where(*entry)}: {body}")
        clash = re.match(r"^constraint '([^']*)' of the system's constraints", body)
        if clash:  # a [[constraints]] entry named like a component's row: at the entry's line
            for k, spec in enumerate(self.array("constraints")):
                if isinstance(spec, dict) and spec.get("name") == clash.group(1):
                    return type(exc)(f"{self.source} ({self.line_of('constraints', k)}), constraints[{k}]: {body}")
        model_name = self.doc["model"].get("name") if isinstance(self.doc.get("model"), dict) else None
        for name in re.findall(r"'([^'\s]+)'", body):
            if name != model_name and (found := self.mbs_entry(name, prefix=True)) is not None:
                return type(exc)(f"{self.entry_where(*found)}: {body}")
        return type(exc)(f"{self.source} ({self.line_for_message(text)}): {body}")

    def values(self, value: Any, sizes: tuple[int, ...], where: str) -> tuple:
        """A list of ``sizes`` numbers or expression strings."""
        if not isinstance(value, list) or len(value) not in sizes:
            count = " or ".join(str(n) for n in sizes)
            raise ModelError(f"{where}: expected a list of {count} numbers or expressions, got "
                             f"{excerpt(value, 60)}; write e.g. [{', '.join(['0'] * sizes[0])}].")
        return tuple(self.expr(x, f"{where}[{k}]") for k, x in enumerate(value))

    def constants(self, value: Any, size: int, where: str) -> tuple[float, ...]:
        """A list of ``size`` constants (numbers or expressions of numbers such as ``"pi/2"``)."""
        if not isinstance(value, list) or len(value) != size:
            raise ModelError(f"{where}: expected a list of {size} numbers, got {excerpt(value, 60)}.")
        return tuple(self.constant(x, f"{where}[{k}]") for k, x in enumerate(value))

    def names(self, value: Any, size: int, where: str, what: str) -> tuple[str, ...]:
        if not isinstance(value, list) or len(value) != size or not all(isinstance(x, str) for x in value):
            raise ModelError(f"{where}: expected {size} {what} names, e.g. [\"a\", \"b\"]; got {excerpt(value, 60)}.")
        return tuple(value)

    def flag(self, value: Any, where: str) -> bool:
        if not isinstance(value, bool):
            raise ModelError(f"{where}: expected true or false, got {excerpt(value)}.")
        return value

    def choice(self, value: Any, where: str, choices: tuple[str, ...]) -> str:
        if not isinstance(value, str) or value not in choices:
            raise ModelError(f"{where}: {excerpt(value)} is not one of {', '.join(choices)}; write one of them.")
        return value

    def rotation(self, value: Any, where: str) -> object:
        """A rotation table: ``{axis = [..], angle = ..}``, ``{cardan = [a, b, c]}`` (``A = Rx(a)
        Ry(b) Rz(c)``) or ``{matrix = [[..], [..], [..]]}`` (rows; orthonormal, det +1), numbers or
        expressions of numbers in radians; checked here."""
        forms = "{axis = [x, y, z], angle = a}, {cardan = [a, b, c]} or {matrix = [[..], [..], [..]]} (radians)"
        if not isinstance(value, dict):
            raise ModelError(f"{where}: a rotation is {forms}; got {excerpt(value, 60)}.")
        keys = set(value)
        forms_keys = MODEL_FILE_KEYS["rotation"]
        rotation: mbs.AxisAngle | mbs.Cardan | mbs.RotationMatrix
        if keys == forms_keys["axis_angle"]:
            rotation = mbs.AxisAngle(self.constants(value["axis"], 3, f"{where}.axis"),  # type: ignore[arg-type]
                                     self.constant(value["angle"], f"{where}.angle"))
        elif keys == forms_keys["cardan"]:
            rotation = mbs.Cardan(self.constants(value["cardan"], 3, f"{where}.cardan"))  # type: ignore[arg-type]
        elif keys == forms_keys["matrix"]:
            rows = value["matrix"]
            if not isinstance(rows, list) or len(rows) != 3:
                raise ModelError(f"{where}.matrix: expected 3 rows of 3 numbers, got {excerpt(rows, 60)}.")
            rotation = mbs.RotationMatrix(tuple(self.constants(row, 3, f"{where}.matrix[{k}]")
                                                for k, row in enumerate(rows)))
        else:
            raise ModelError(f"{where}: keys {sorted(keys)} do not give a rotation; write {forms}.")
        rotation.euler(where)  # a matrix that is not orthonormal, a zero axis: named here
        return rotation

    def fixed(self, value: Any, where: str) -> bool | tuple[str, ...]:
        if isinstance(value, bool):
            return value
        if isinstance(value, list) and value and all(isinstance(x, str) for x in value):
            return tuple(value)
        raise ModelError(f"{where}: expected true, false or a list of coordinate suffixes such as [\"x\", \"phi\"]; "
                         f"got {excerpt(value, 60)}.")

    def typed_entry(self, section: str, index: int, spec: Any, kinds: Mapping[str, AbstractSet[str]],
                    required: AbstractSet[str]) -> str:
        """Check the entry's ``type`` against ``kinds`` and its keys against the type's; the type."""
        where = self.entry_where(section, index)
        if not isinstance(spec, dict):
            raise ModelError(f"{where}: expected a table, got {type(spec).__name__}.")
        kind = spec.get("type")
        if "type" not in spec or not isinstance(kind, str) or kind not in kinds:
            name = spec.get("name")
            label = f"{section}[{index}]" + (f" {excerpt(name, 60)}" if isinstance(name, str) else "")
            got = "no type is given" if "type" not in spec else f"{excerpt(kind)} is not a type of {section}"
            plugins = self.component_registry().names() if section in ("joints", "forces", "sensors") else []
            plugins_text = f" (or a component plugin: {', '.join(plugins)})" if plugins else ""
            raise ModelError(f"{self.source} ({self.entry_line(section, index, 'type')}), {label}.type: {got}; write "
                             f"type = one of {', '.join(chr(34) + k + chr(34) for k in kinds)}{plugins_text}.")
        unknown = sorted(set(spec) - set(kinds[kind]) - {"type"})
        if unknown:
            raise ModelError(f"{where}: unknown key(s) {unknown} for type '{kind}'. Allowed: "
                             f"{', '.join(sorted(set(kinds[kind]) | {'type'}))}.")
        missing = sorted(set(required) - set(spec))
        if missing:
            raise ModelError(f"{where}: missing key(s) {missing}.")
        self.text(spec["name"], f"{where}.name")
        return kind

    def component(self, section: str, index: int, make, **fields) -> Any:
        """``make(**fields)``, its errors located at the entry."""
        try:
            return make(**fields)
        except ModelError as exc:
            raise self.component_error(exc, (section, index)) from None
        except (TypeError, ValueError, OverflowError) as exc:
            raise ModelError(f"{self.entry_where(section, index)}: invalid values: {exc}.") from None

    # -- component plugins (entry-point group fmi_adjoint.components) ----------------------
    def component_registry(self) -> ComponentRegistry:
        return self.components or default_component_registry()

    def plugin_kind(self, section: str, kind: object) -> bool:
        """Whether ``type = kind`` in ``section`` names a component plugin: not a built-in type
        (built-in names win; in ``[[forces]]`` registered force elements too) but a registered
        component.  Nothing is imported."""
        if not isinstance(kind, str) or kind in MODEL_FILE_KEYS[section]:
            return False
        if section == "forces" and kind in (self.registry or default_force_registry()).names():
            return False
        return kind in self.component_registry().names()

    def plugin_component(self, section: str, index: int, spec: Any) -> object:
        """A component plugin's entry: its keys but ``type`` become the dataclass fields (lists
        become tuples; ``markers = [i, j]`` fills ``marker_i`` and ``marker_j`` as for the
        built-in components), checked as the built-in entries' keys are."""
        where = self.entry_where(section, index)
        if not isinstance(spec, dict):
            raise ModelError(f"{where}: expected a table, got {type(spec).__name__}.")
        cls = component_type(spec["type"], section, f"{where}.type", self.components)
        fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
        given = {key: value for key, value in spec.items() if key != "type"}
        if "markers" in given and "markers" not in fields and {"marker_i", "marker_j"} <= set(fields):
            given["marker_i"], given["marker_j"] = self.names(given.pop("markers"), 2,
                                                              self.entry_where(section, index, "markers"), "marker")
        allowed = set(fields) | {"type"} | ({"markers"} if {"marker_i", "marker_j"} <= set(fields) else set())
        unknown = sorted(set(given) - set(fields))
        if unknown:
            raise ModelError(f"{where}: unknown key(s) {unknown} for type '{spec['type']}' (component plugin of "
                             f"{self.component_registry().distribution(spec['type'])}). Allowed: "
                             f"{', '.join(sorted(allowed))}.")
        missing = sorted(name for name, f in fields.items() if name not in given
                         and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
        if missing:
            raise ModelError(f"{where}: missing key(s) {missing}.")
        self.text(given["name"], f"{where}.name")

        def frozen(value: Any) -> Any:
            return tuple(frozen(x) for x in value) if isinstance(value, list) else value

        return self.component(section, index, cls, **{key: frozen(value) for key, value in given.items()})

    def mbs_body(self, index: int, spec: Any) -> mbs.Body:
        kind = self.typed_entry("bodies", index, spec, MODEL_FILE_KEYS["bodies"], {"name", "type"})

        def at(key: str) -> str:
            return self.entry_where("bodies", index, key)

        if kind == "flexible":
            return self.flexible_body(index, spec)
        fields: dict[str, Any] = {"name": spec["name"]}
        planar = kind == "planar" or (kind == "point_mass" and self.flag(spec.get("planar", False), at("planar")))
        if "mass" in spec:
            fields["mass"] = self.expr(spec["mass"], at("mass"))
        for key in ("position", "velocity"):
            if key in spec:
                fields[key] = self.values(spec[key], (2,) if planar else (3,), at(key))
        for key in ("fixed_position", "fixed_velocity"):
            if key in spec:
                fields[key] = self.fixed(spec[key], at(key))
        if kind == "point_mass":
            fields["planar"] = planar
            if planar:
                fields.setdefault("position", (0.0, 0.0))
                fields.setdefault("velocity", (0.0, 0.0))
            return self.component("bodies", index, mbs.PointMass, **fields)
        if kind == "planar":
            for key in ("inertia", "angle", "angular_velocity"):
                if key in spec:
                    fields[key] = self.expr(spec[key], at(key))
            return self.component("bodies", index, mbs.PlanarRigidBody, **fields)
        if "inertia" in spec:
            fields["inertia"] = self.values(spec["inertia"], (3, 6), at("inertia"))
        if "angular_velocity" in spec:
            fields["angular_velocity"] = self.values(spec["angular_velocity"], (3,), at("angular_velocity"))
        if "rotation" in spec:
            fields["rotation"] = self.rotation(spec["rotation"], at("rotation"))
        if "angular_velocity_frame" in spec:
            frame = self.choice(spec["angular_velocity_frame"], at("angular_velocity_frame"), ("global", "body"))
            fields["body_frame_angular_velocity"] = frame == "body"
        return self.component("bodies", index, mbs.SpatialRigidBody, **fields)

    def mbs_marker(self, index: int, spec: Any) -> mbs.Marker:
        where = self.entry_where("markers", index)
        spec = self.table(spec, where, MODEL_FILE_KEYS["markers"][""], {"name", "body"})
        fields: dict[str, Any] = {"name": self.text(spec["name"], f"{where}.name"),
                                  "body": self.text(spec["body"], self.entry_where("markers", index, "body"))}
        if "position" in spec:
            fields["position"] = self.values(spec["position"], (2, 3), self.entry_where("markers", index, "position"))
        if "orientation" in spec:
            at = self.entry_where("markers", index, "orientation")
            value = spec["orientation"]
            fields["orientation"] = self.rotation(value, at) if isinstance(value, dict) else self.expr(value, at)
        if "node" not in spec:
            return self.component("markers", index, mbs.Marker, **fields)
        # A marker on a node of a flexible body (issue 25): it sits at the node and follows it.
        fields["node"] = self.node_id(spec["node"], self.entry_where("markers", index, "node"))
        if any(not (isinstance(x, (int, float)) and x == 0) for x in fields.get("position", ())):
            raise ModelError(f"{self.entry_where('markers', index, 'position')}: a marker with node = "
                             f"{fields['node']} sits at that node; remove position (or give zeros).")
        if "position" in fields and len(fields["position"]) != 3:
            fields["position"] = (0.0, 0.0, 0.0)
        if "orientation" in fields and not isinstance(fields["orientation"], (mbs.AxisAngle, mbs.Cardan,
                                                                              mbs.RotationMatrix)):
            raise ModelError(f"{self.entry_where('markers', index, 'orientation')}: a node marker's orientation is a "
                             "rotation table (flexible bodies are spatial); write { axis = [..], angle = .. }.")
        return self.component("markers", index, mbs.NodeMarker, **fields)

    # -- flexible bodies (issue 25; fmi_adjoint.mbs.flexible, fmi_adjoint.flexible) -------------
    def node_id(self, value: Any, where: str) -> int:
        """A node id of an FE model: a positive integer."""
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ModelError(f"{where}: {excerpt(value)} is not a node id; give the positive integer id of a node of "
                             "the FE model (beams: 1 at the start to elements + 1 at the end).")
        return value

    def flexible_body(self, index: int, spec: dict) -> NodalBody:
        """A ``type = "flexible"`` body: its FE model (``beam`` or ``fe``), reduced by
        Craig-Bampton, in the ``formulation`` :data:`_FLEXIBLE_FORMULATIONS` names: flexible
        natural coordinates (:class:`~fmi_adjoint.mbs.FlexibleBody`; Vanpaemel et al., seed 003,
        Sec. 3 and 5.1; the default) or the floating frame of reference, spatial or planar
        (:mod:`fmi_adjoint.mbs.ffrf`; Nishi et al., seed 004).  The reduction runs here, so that
        a bad node, mode count or FE model is reported at the entry."""

        def at(key: str) -> str:
            return self.entry_where("bodies", index, key)

        given = [key for key in ("beam", "fe") if key in spec]
        if len(given) != 1:
            got = "both beam and fe are given" if given else "no FE model is given"
            raise ModelError(f"{self.entry_where('bodies', index)}: {got}; give exactly one of beam = {{ length = .., "
                             "elements = .., E = .., ... }} (built-in beam elements) or fe = { nodes = \"nodes.csv\", "
                             "mass = \"m.mtx\", stiffness = \"k.mtx\" } (an FE tool's matrices).")
        fe = self.beam_fe(spec["beam"], at("beam")) if given == ["beam"] else self.imported_fe(spec["fe"], at("fe"))
        nodes = {int(n) for n in fe.node_ids}

        def known(value: Any, where: str) -> int:
            node = self.node_id(value, where)
            if node not in nodes:
                raise ModelError(f"{where}: node {node} is not a node of the FE model (its nodes: "
                                 f"{_id_ranges(sorted(nodes))}); give one of them.")
            return node

        fields: dict[str, Any] = {"name": spec["name"], "fe": fe}
        fields["reference_node"] = known(spec.get("reference_node", 1), at("reference_node"))
        if "interface_nodes" in spec:
            value = spec["interface_nodes"]
            if not isinstance(value, list) or len(value) > _MAX_FLEXIBLE_MODES // 6:
                raise ModelError(f"{at('interface_nodes')}: expected a list of at most {_MAX_FLEXIBLE_MODES // 6} node "
                                 f"ids, e.g. [11]; got {excerpt(value, 60)}.")
            fields["interface_nodes"] = tuple(known(x, f"{at('interface_nodes')}[{k}]") for k, x in enumerate(value))
        if "modes" in spec:
            fields["modes"] = self.mode_selection(spec["modes"], at("modes"))
        if "damping" in spec:
            fields["damping"] = self.flexible_damping(spec["damping"], at("damping"))
        formulation = self.choice(spec.get("formulation", "fncf"), at("formulation"), _FLEXIBLE_FORMULATIONS)
        planar = formulation == "planar_ffrf"
        for key, allowed in (("angle", planar), ("rotation", not planar)):
            if key in spec and not allowed:
                other = "angle = .. (radians about z)" if planar else "rotation = { axis = [..], angle = .. }"
                raise ModelError(f"{at(key)}: a {formulation} body takes no {key}; give {other}.")
        if "position" in spec:
            position = self.values(spec["position"], (2, 3) if planar else (3,), at("position"))
            fields["position"] = (*position, 0.0) if len(position) == 2 else position
        if "rotation" in spec:
            fields["rotation"] = self.rotation(spec["rotation"], at("rotation"))
        if "angle" in spec:
            fields["angle"] = self.expr(spec["angle"], at("angle"))
        for key in ("mass_factor", "stiffness_factor", "damping_factor"):
            if key in spec:
                fields[key] = self.expr(spec[key], at(key))
        cls = {"fncf": mbs.FlexibleBody, "ffrf": mbs.FloatingFrameBody, "planar_ffrf": mbs.PlanarFloatingFrameBody}
        body = cast("NodalBody", self.component("bodies", index, cls[formulation], **fields))
        try:
            modes = body.basis.modes
        except ModelError as exc:
            raise self.component_error(exc, ("bodies", index)) from None
        if modes > _MAX_FLEXIBLE_MODES:
            raise ModelError(f"{self.entry_where('bodies', index)}: {modes} deformation modes, more than the limit of "
                             f"{_MAX_FLEXIBLE_MODES} (each adds 10 coordinates); keep fewer modes or interface nodes.")
        return body

    def mode_selection(self, value: Any, where: str) -> object:
        """``modes``: a count of normal modes or ``{ frequency_limit = HZ }``."""
        from .flexible import FrequencyLimit, ModeCount

        if isinstance(value, int) and not isinstance(value, bool):
            if not 0 <= value <= _MAX_FLEXIBLE_MODES:
                raise ModelError(f"{where}: {value} normal modes; give a count in 0 .. {_MAX_FLEXIBLE_MODES}.")
            return ModeCount(value)
        if isinstance(value, dict) and set(value) == MODEL_FILE_KEYS["modes"]["frequency_limit"]:
            hz = self.constant(value["frequency_limit"], f"{where}.frequency_limit")
            if not hz > 0:
                raise ModelError(f"{where}.frequency_limit: {hz}; give a positive frequency in Hz.")
            return FrequencyLimit(hz)
        raise ModelError(f"{where}: expected a count of normal modes (e.g. 4) or {{ frequency_limit = 500.0 }} (every "
                         f"normal mode below 500 Hz); got {excerpt(value, 60)}.")

    def flexible_damping(self, value: Any, where: str) -> object:
        """``damping``: ``{ rayleigh = [alpha, beta] }`` or ``{ modal = [zeta, ...] }`` (or one ratio)."""
        from .flexible import ModalDamping, RayleighDamping

        forms = MODEL_FILE_KEYS["damping"]
        if isinstance(value, dict) and set(value) == forms["rayleigh"]:
            alpha, beta = self.constants(value["rayleigh"], 2, f"{where}.rayleigh")
            if alpha < 0 or beta < 0:
                raise ModelError(f"{where}.rayleigh: [{alpha}, {beta}]; give alpha [1/s] and beta [s] >= 0.")
            return RayleighDamping(alpha, beta)
        if isinstance(value, dict) and set(value) == forms["modal"]:
            ratios = value["modal"]
            if isinstance(ratios, list):
                if not ratios or len(ratios) > _MAX_FLEXIBLE_MODES:
                    raise ModelError(f"{where}.modal: give 1 to {_MAX_FLEXIBLE_MODES} damping ratios, e.g. [0.02].")
                zetas: float | tuple[float, ...] = tuple(self.constants(ratios, len(ratios), f"{where}.modal"))
            else:
                zetas = self.constant(ratios, f"{where}.modal")
            if any(z < 0 for z in (zetas if isinstance(zetas, tuple) else (zetas,))):
                raise ModelError(f"{where}.modal: damping ratios must be >= 0 (0.02 is 2 %).")
            return ModalDamping(zetas)
        raise ModelError(f"{where}: expected {{ rayleigh = [alpha, beta] }} or {{ modal = [zeta_1, zeta_2, ...] }} "
                         f"(or one ratio for every mode, e.g. {{ modal = 0.02 }}); got {excerpt(value, 60)}.")

    def beam_fe(self, value: Any, where: str) -> Any:
        """``beam = {...}``: the FE model of a straight beam of equal elements
        (:func:`fmi_adjoint.flexible.line_mesh`, :func:`~fmi_adjoint.flexible.beam_model`)."""
        from .flexible import (BeamSection, ConsistentMass, EulerBernoulli, LumpedMass, Timoshenko, beam_model,
                               line_mesh)

        if not isinstance(value, dict):
            raise ModelError(f"{where}: expected an inline table {{ length = .., elements = .., E = .., G = .., "
                             f"A = .., Iy = .., Iz = .., J = .., rho = .. }}; got {excerpt(value, 60)}.")
        theory = self.choice(value.get("theory", "euler_bernoulli"), f"{where}.theory",
                             tuple(MODEL_FILE_KEYS["beam"]))
        spec = self.table(value, where, MODEL_FILE_KEYS["beam"][theory],
                          {"length", "elements", "E", "G", "A", "Iy", "Iz", "J", "rho"})
        elements = spec["elements"]
        if isinstance(elements, bool) or not isinstance(elements, int) or not 1 <= elements <= _MAX_BEAM_ELEMENTS:
            raise ModelError(f"{where}.elements: {excerpt(elements)}; give a whole number of elements in 1 .. "
                             f"{_MAX_BEAM_ELEMENTS}.")
        positive: dict[str, float] = {}
        for key, unit in (("length", "m"), ("E", "Pa"), ("G", "Pa"), ("A", "m^2"), ("Iy", "m^4"), ("Iz", "m^4"),
                          ("J", "m^4"), ("rho", "kg/m^3")):
            number = self.constant(spec[key], f"{where}.{key}")
            if not number > 0:
                raise ModelError(f"{where}.{key}: {number}; give a positive number ({unit}).")
            positive[key] = number
        geometry: dict[str, tuple[float, ...]] = {}
        for key in ("direction", "orientation"):
            if key in spec:
                vector = self.constants(spec[key], 3, f"{where}.{key}")
                if not any(vector):
                    raise ModelError(f"{where}.{key}: [0, 0, 0]; give a non-zero vector.")
                geometry[key] = vector
        shear_factor = None
        if "shear_factor" in spec:
            shear_factor = self.constant(spec["shear_factor"], f"{where}.shear_factor")
        mass = self.choice(spec.get("mass", "consistent"), f"{where}.mass", ("consistent", "lumped"))
        length = positive.pop("length")
        try:
            mesh = line_mesh(length, elements, **geometry)
            bending = EulerBernoulli() if theory == "euler_bernoulli" else \
                Timoshenko() if shear_factor is None else Timoshenko(shear_factor)
            return beam_model(mesh, BeamSection(**positive), theory=bending,
                              mass=LumpedMass() if mass == "lumped" else ConsistentMass()).fe
        except ModelError as exc:  # an orientation along the beam, a shear factor out of range
            raise ModelError(f"{where}: {exc}") from None

    def imported_fe(self, value: Any, where: str) -> Any:
        """``fe = {...}``: an FE model from Matrix Market ``mass`` and ``stiffness`` files, a node
        list and an optional DOF map (:func:`fmi_adjoint.flexible.read_matrix_market`), read under
        the rules of the model's data files (:meth:`data_file`): the importer reads copies of their
        bytes, and its messages name the files as the model file writes them."""
        import tempfile

        import scipy.io

        from .flexible import read_matrix_market, read_nodes

        spec = self.table(value, where, MODEL_FILE_KEYS["fe"][""], {"nodes", "mass", "stiffness"})
        raw: dict[str, bytes] = {}
        names: dict[str, str] = {}
        for key, role in _FE_FILES.items():
            if key in spec:
                names[key] = self.text(spec[key], f"{where}.{key}")
                try:
                    raw[key] = self.data_file(names[key], f"{where}.{key}", role, f"the {role}")[1]
                except ModelError as exc:
                    raise ModelError(str(exc) if self.source in str(exc) else f"{where}.{key}: {exc}") from None
        with tempfile.TemporaryDirectory(prefix="fmi_adjoint_fe_") as tmp:
            paths = {key: Path(tmp) / key for key in raw}
            for key, data_ in raw.items():
                paths[key].write_bytes(data_)

            def located(exc: ModelError) -> ModelError:
                text = str(exc)
                for key, path in paths.items():
                    text = text.replace(str(path), names.get(key, key))
                return ModelError(f"{where}: {text}")

            try:
                if "dofs" not in paths:  # six DOFs per node, in the order of the node list
                    nodes = read_nodes(paths["nodes"], max_bytes=_MAX_MATRIX_BYTES)
                    try:
                        size = scipy.io.mminfo(io.BytesIO(raw["mass"]))[0]
                    except (ValueError, TypeError, IndexError, OverflowError, RuntimeError):
                        size = 6 * len(nodes)  # the importer names the broken file
                    if size != 6 * len(nodes):
                        raise ModelError(f"{names['mass']} has {size} rows, not 6 per node of {names['nodes']} "
                                         f"({len(nodes)} nodes: {6 * len(nodes)}); give dofs = \"dofs.csv\" (one "
                                         "'equation node DOF' line per row of the matrices).")
                    paths["dofs"] = Path(tmp) / "dofs"
                    paths["dofs"].write_text("".join(f"{6 * k + c + 1} {node} {c + 1}\n" for k, node in enumerate(nodes)
                                                     for c in range(6)))
                return read_matrix_market(paths["mass"], paths["stiffness"], paths["dofs"], paths["nodes"],
                                          max_bytes=_MAX_MATRIX_BYTES, max_entries=MAX_ENTRIES)
            except ModelError as exc:
                raise located(exc) from None

    @staticmethod
    def joint_types() -> Mapping[str, type]:
        """The built-in joint classes by ``type`` (imported on first use)."""
        return {"revolute": mbs.Revolute, "prismatic": mbs.Prismatic, "cylindrical": mbs.Cylindrical,
                "spherical": mbs.Spherical, "universal": mbs.Universal, "planar": mbs.Planar, "fixed": mbs.Fixed}

    def mbs_joint(self, index: int, spec: Any) -> object:
        if isinstance(spec, dict) and self.plugin_kind("joints", spec.get("type")):
            return self.plugin_component("joints", index, spec)
        kind = self.typed_entry("joints", index, spec, MODEL_FILE_KEYS["joints"], {"name", "type", "markers"})

        def at(key: str) -> str:
            return self.entry_where("joints", index, key)

        marker_i, marker_j = self.names(spec["markers"], 2, at("markers"), "marker")
        fields: dict[str, Any] = {"name": spec["name"], "marker_i": marker_i, "marker_j": marker_j}
        for key in ("axis", "axis_j"):
            if key in spec:
                fields[key] = self.constants(spec[key], 3, at(key))
        if "drive" in spec:
            fields["drive"] = self.expr(spec["drive"], at("drive"))
        return self.component("joints", index, self.joint_types()[kind], **fields)

    def mbs_force(self, index: int, spec: dict) -> object:
        """A multibody force entry of ``[[forces]]``; laws are inline tables resolved through
        the element registry as ordinary ``[[forces]]`` entries are."""
        kind = spec["type"]
        kinds = MODEL_FILE_KEYS["forces"]
        self.typed_entry("forces", index, spec, kinds, kinds[kind] - {"frame"})

        def at(key: str) -> str:
            return self.entry_where("forces", index, key)

        fields: dict[str, Any] = {"name": spec["name"]}
        if kind in ("spring_damper", "bushing"):
            fields["marker_i"], fields["marker_j"] = self.names(spec["markers"], 2, at("markers"), "marker")
        if kind in ("spring_damper", "joint_force"):
            fields["law"] = self.law(spec["law"], at("law"))
        if kind == "joint_force":
            fields["joint"] = self.text(spec["joint"], at("joint"))
        if kind == "bushing":
            laws = spec["laws"]
            directions = _BUSHING_DIRECTIONS
            if not isinstance(laws, dict) or not laws or set(laws) - MODEL_FILE_KEYS["laws"][""]:
                raise ModelError(f"{at('laws')}: expected laws.<direction> = {{type = ..., ...}} for some of "
                                 f"{', '.join(directions)} (marker i's axes); got keys "
                                 f"{excerpt(sorted(laws) if isinstance(laws, dict) else laws, 60)}.")
            fields["laws"] = {d: self.law(laws[d], f"{at('laws')}.{d}") for d in directions if d in laws}
        if kind in ("force", "torque"):
            target = "marker" if kind == "force" else "body"
            fields[target] = self.text(spec[target], at(target))
            fields["vector"] = self.values(spec["vector"], (3,), at("vector"))
            if "frame" in spec:
                frames = ("global", "body", "marker") if kind == "force" else ("global", "body")
                fields["frame"] = self.choice(spec["frame"], at("frame"), frames)
        make = {"spring_damper": mbs.SpringDamper, "bushing": mbs.Bushing, "joint_force": mbs.JointForce,
                "force": mbs.Force, "torque": mbs.Torque}[kind]
        return self.component("forces", index, make, **fields)

    def law(self, value: Any, where: str) -> AbstractLocalElement:
        """A scalar law ``{type = <registered element>, <property> = ...}`` (a local element:
        spring-dampers, Maxwell, friction, splines, ...); name and ends come from the force."""
        if not isinstance(value, dict) or not isinstance(value.get("type"), str):
            raise ModelError(f"{where}: a law is an inline table {{type = \"linear_spring_damper\", stiffness = "
                             f"\"c\", ...}} naming a registered force element; got {excerpt(value, 60)}.")
        if value["type"] in RESERVED_NAMES:
            raise ModelError(f"{where}.type: '{value['type']}' is a multibody force, not a scalar law; give a "
                             "registered element such as \"linear_spring_damper\".")
        from .forces.base import AbstractLocalElement

        cls = element_type(value["type"], f"{where}.type", self.registry)
        if not issubclass(cls, AbstractLocalElement):
            raise ModelError(f"{where}.type: '{cls.type_name}' acts on a coordinate, not between two ends, so it "
                             "is no scalar law; use a [[forces]] entry of type \"force\" or \"torque\" for loads.")
        allowed = {f.name for f in dataclasses.fields(cls)} - {"name", "coordinates"}
        props = {key: item for key, item in value.items() if key != "type"}
        unknown = sorted(set(props) - allowed)
        if unknown:
            raise ModelError(f"{where}: unknown key(s) {unknown} for element type '{cls.type_name}' (a law takes its "
                             f"name and ends from the force). Allowed: {', '.join(sorted(allowed | {'type'}))}.")
        for key, item in props.items():
            if isinstance(item, list) and len(item) > _MAX_LIST:
                raise ModelError(f"{where}.{key}: {len(item)} entries; the limit is {_MAX_LIST}. Split the "
                                 "characteristic into several elements.")
        props = {key: tuple(item) if isinstance(item, list) else item for key, item in props.items()}
        try:
            return cast(AbstractLocalElement, mbs.scalar_law(cls, **props))
        except ModelError as exc:
            raise ModelError(f"{where}: {exc}") from None
        except (TypeError, ValueError, OverflowError) as exc:
            raise ModelError(f"{where}: invalid values for element type '{cls.type_name}': {exc}.") from None

    @staticmethod
    def sensor_types() -> Mapping[str, type]:
        """The built-in sensor classes by ``type`` (imported on first use)."""
        return {"marker_position": mbs.MarkerPosition, "marker_velocity": mbs.MarkerVelocity,
                "marker_acceleration": mbs.MarkerAcceleration, "angular_velocity": mbs.AngularVelocity,
                "angular_acceleration": mbs.AngularAcceleration, "orientation": mbs.Orientation,
                "relative_displacement": mbs.RelativeDisplacement, "distance": mbs.Distance,
                "joint_coordinate": mbs.JointCoordinate, "joint_reaction": mbs.JointReaction,
                "strain": mbs.BeamStrain}

    def strain_sensor(self, index: int, spec: dict) -> object:
        """A ``type = "strain"`` sensor: a strain gauge on a beam element of a flexible body
        (:class:`~fmi_adjoint.mbs.sensors.BeamStrain`; issue 25, part 5)."""

        def at(key: str) -> str:
            return self.entry_where("sensors", index, key)

        missing = [key for key in ("body", "nodes") if key not in spec]
        if missing:
            raise ModelError(f"{self.entry_where('sensors', index)}: missing key(s) {missing}; a strain gauge names "
                             "its flexible body and the two end nodes of a beam element, e.g. nodes = [1, 2].")
        nodes = spec["nodes"]
        if not isinstance(nodes, list) or len(nodes) != 2:
            raise ModelError(f"{at('nodes')}: expected the two end nodes of a beam element, e.g. [1, 2]; got "
                             f"{excerpt(nodes, 60)}.")
        fields: dict[str, Any] = {"name": spec["name"], "body": self.text(spec["body"], at("body")),
                                  "nodes": tuple(self.node_id(x, f"{at('nodes')}[{k}]") for k, x in enumerate(nodes))}
        if "position" in spec:
            fields["position"] = self.constant(spec["position"], at("position"))
        if "fibre" in spec:
            fields["fibre"] = self.constants(spec["fibre"], 2, at("fibre"))
        if "orientation" in spec:
            fields["orientation"] = self.constants(spec["orientation"], 3, at("orientation"))
        return self.component("sensors", index, mbs.BeamStrain, **fields)

    def mbs_sensor(self, index: int, spec: Any) -> object:
        if isinstance(spec, dict) and self.plugin_kind("sensors", spec.get("type")):
            return self.plugin_component("sensors", index, spec)
        kinds = MODEL_FILE_KEYS["sensors"]
        target = {"marker", "markers", "joint"}
        kind = self.typed_entry("sensors", index, spec, kinds, {"name", "type"})
        make, keys = self.sensor_types()[kind], kinds[kind]

        def at(key: str) -> str:
            return self.entry_where("sensors", index, key)

        if kind == "strain":
            return self.strain_sensor(index, spec)

        needed = sorted(keys & target - ({"marker"} if kind == "joint_reaction" else set()))
        missing = [key for key in needed if key not in spec]
        if missing:
            raise ModelError(f"{self.entry_where('sensors', index)}: missing key(s) {missing}.")
        fields: dict[str, Any] = {"name": spec["name"]}
        for key in ("marker", "joint"):
            if key in spec:
                fields[key] = self.text(spec[key], at(key))
        if "markers" in spec:
            fields["marker_i"], fields["marker_j"] = self.names(spec["markers"], 2, at("markers"), "marker")
        if "frame" in spec:
            fields["frame"] = self.text(spec["frame"], at("frame"))
        if "components" in spec:
            value = spec["components"]
            if not isinstance(value, list) or not value or not all(isinstance(x, str) for x in value):
                raise ModelError(f"{at('components')}: expected a list of component names such as [\"x\", \"z\"], "
                                 f"got {excerpt(value, 60)}.")
            fields["components"] = tuple(value)
        if "gravity" in spec:
            fields["gravity"] = self.flag(spec["gravity"], at("gravity"))
        if "derivative" in spec:
            value = spec["derivative"]
            if isinstance(value, bool) or value not in (0, 1, 2):
                raise ModelError(f"{at('derivative')}: {excerpt(value)} is not 0 (coordinate), 1 (rate) or "
                                 "2 (acceleration).")
            fields["derivative"] = int(value)
        return self.component("sensors", index, make, **fields)


def _read_channel(raw: bytes, name: str, channel: str) -> data.Measurement:
    """Channel ``channel`` of the bench data file ``name`` (as the model file writes it) from its
    bytes ``raw``, by :func:`fmi_adjoint.bench.read_data` on a private temporary copy: the
    binary formats' libraries (asammdf, h5py) read files, and the bytes are those the warm-start
    key and the parallel workers have (:class:`ModelSource`).  Messages name ``name``."""
    import tempfile

    from .bench import read_data
    from .bench.contract import MissingChannel

    with tempfile.TemporaryDirectory(prefix="fmi_adjoint_input_") as tmp:
        path = Path(tmp) / (Path(name).name or "data")
        path.write_bytes(raw)
        try:
            measurement = read_data(path, [channel])
        except MissingChannel as exc:
            raise MissingChannel(name, exc.channel, exc.available) from None
        except DataError as exc:
            raise DataError(str(exc).replace(str(path), name)) from None
    return dataclasses.replace(measurement, source=name)


def _id_ranges(ids: list[int]) -> str:
    """``1..11, 20`` for ids 1 to 11 and 20 (at most 5 ranges shown)."""
    ranges: list[list[int]] = []
    for node in ids:
        if ranges and node == ranges[-1][1] + 1:
            ranges[-1][1] = node
        else:
            ranges.append([node, node])
    text = [f"{a}..{b}" if a != b else f"{a}" for a, b in ranges[:5]]
    return ", ".join(text) + (", ..." if len(ranges) > 5 else "")
