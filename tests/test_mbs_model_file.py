"""Multibody sections of model files (issue 23, item 7): every body, joint, force and sensor
type read from TOML gives the same Model as the same system built in Python (equal Model
values and build-cache keys), every refused input is one line naming the file, the entry and
its line through ``fmi-adjoint simulate`` (exit 2), the multibody force types are reserved in
the element registry, and a planar pendulum file simulates like an independent ODE solution."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import ClassVar

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from captured_cli import cli
from fmi_adjoint import mbs
from fmi_adjoint.compiled import model_key
from fmi_adjoint.errors import ModelError
from fmi_adjoint.forces import AbstractTwoPointElement, ElementParameter, LinearSpringDamper, PluginError, Registry
from fmi_adjoint.model import Coordinate, Output, Parameter
from fmi_adjoint.model_file import parse_model
from tolerances import CLOSED_FORM

# ----------------------------------------------------------------------------- bases --

HEAD = """
[model]
name = "sample"
gravity = [0, 0, "-g"]

[parameters]
m = 2.0
g = 9.81
k = { value = 100.0, unit = "N/m" }
d = 1.5

[[outputs]]
name = "clock"
expression = "t"
"""
CLOCK = Output("clock", "t")
PARAMETERS = (Parameter("m", 2.0), Parameter("g", 9.81), Parameter("k", 100.0, "N/m"), Parameter("d", 1.5))

SPATIAL = """
[[bodies]]
name = "a"
type = "spatial"
mass = "m"
inertia = [1.0, 2.0, 2.5]
position = [0, 0, 1]

[[markers]]
name = "g0"
body = "ground"
position = [0, 0, 1.5]

[[markers]]
name = "a0"
body = "a"
position = [0, 0, 0.5]

[[markers]]
name = "a1"
body = "a"
position = [0.3, 0, 0]
"""
SPATIAL_BODIES = (mbs.SpatialRigidBody("a", mass="m", inertia=(1.0, 2.0, 2.5), position=(0, 0, 1)),)
SPATIAL_MARKERS = (mbs.Marker("g0", "ground", position=(0, 0, 1.5)), mbs.Marker("a0", "a", position=(0, 0, 0.5)),
                   mbs.Marker("a1", "a", position=(0.3, 0, 0)))

PLANAR = """
[[bodies]]
name = "p"
type = "planar"
mass = "m"
inertia = "m/12"
position = [0, -0.5]

[[markers]]
name = "g0"
body = "ground"

[[markers]]
name = "p0"
body = "p"
position = [0, 0.5]
"""
PLANAR_BODIES = (mbs.PlanarRigidBody("p", mass="m", inertia="m/12", position=(0, -0.5)),)
PLANAR_MARKERS = (mbs.Marker("g0", "ground"), mbs.Marker("p0", "p", position=(0, 0.5)))

LAW = 'law = { type = "linear_spring_damper", stiffness = "k", damping = "d" }'
PY_LAW = {"type": "linear_spring_damper", "stiffness": "k", "damping": "d"}


def from_file(text: str):
    return parse_model(HEAD + text, source="case.toml")


def from_python(outputs=(), **components):
    return mbs.MultibodySystem(name="sample", parameters=PARAMETERS, gravity=(0, 0, "-g"), outputs=(CLOCK, *outputs),
                               **components).to_model()


def spatial(**extra):
    return from_python(bodies=SPATIAL_BODIES, markers=SPATIAL_MARKERS, **extra)


def planar(**extra):
    return from_python(bodies=PLANAR_BODIES, markers=PLANAR_MARKERS, **extra)


# ------------------------------------------------------------ one file per feature --

#: (id, TOML after HEAD, the same system in Python).
CASES = [
    # bodies
    ("point_mass", """
[[bodies]]
name = "b"
type = "point_mass"
mass = "m"
position = [1, 2, "3*m"]
velocity = [0, 0.5, 0]
fixed_position = ["x"]
""", lambda: from_python(bodies=(mbs.PointMass("b", mass="m", position=(1, 2, "3*m"), velocity=(0, 0.5, 0),
                                               fixed_position=("x",)),))),
    ("point_mass_planar", """
[[bodies]]
name = "b"
type = "point_mass"
planar = true
mass = 1.5
position = [1, 2]
""", lambda: from_python(bodies=(mbs.PointMass("b", mass=1.5, position=(1, 2), velocity=(0.0, 0.0), planar=True),))),
    ("planar", """
[[bodies]]
name = "b"
type = "planar"
mass = "m"
inertia = "m*0.25/12"
position = [0.1, 0.2]
angle = 0.3
velocity = [1, 0]
angular_velocity = "2*d"
fixed_velocity = true
""", lambda: from_python(bodies=(mbs.PlanarRigidBody("b", mass="m", inertia="m*0.25/12", position=(0.1, 0.2),
                                                     angle=0.3, velocity=(1, 0), angular_velocity="2*d",
                                                     fixed_velocity=True),))),
    ("spatial_axis_angle", """
[[bodies]]
name = "b"
type = "spatial"
mass = "m"
inertia = [1, 2, 2.5, 0.1, 0, 0]
position = [0, 0, "m"]
rotation = { axis = [1, 1, 0], angle = 0.5 }
angular_velocity = [0, 0, 3]
angular_velocity_frame = "body"
""", lambda: from_python(bodies=(mbs.SpatialRigidBody("b", mass="m", inertia=(1, 2, 2.5, 0.1, 0, 0),
                                                      position=(0, 0, "m"),
                                                      rotation=mbs.AxisAngle((1.0, 1.0, 0.0), 0.5),
                                                      angular_velocity=(0, 0, 3),
                                                      body_frame_angular_velocity=True),))),
    ("spatial_cardan", """
[[bodies]]
name = "b"
type = "spatial"
inertia = [1, 2, 2.5]
rotation = { cardan = [0.1, 0.2, 0.3] }
""", lambda: from_python(bodies=(mbs.SpatialRigidBody("b", inertia=(1, 2, 2.5),
                                                      rotation=mbs.Cardan((0.1, 0.2, 0.3))),))),
    ("spatial_matrix", """
[[bodies]]
name = "b"
type = "spatial"
inertia = [1, 2, 2.5]
rotation = { matrix = [[0, -1, 0], [1, 0, 0], [0, 0, 1]] }
""", lambda: from_python(bodies=(mbs.SpatialRigidBody("b", inertia=(1, 2, 2.5), rotation=mbs.RotationMatrix(
        ((0.0, -1.0, 0.0), (1.0, 0.0, 0.0), (0.0, 0.0, 1.0)))),))),
    # markers with orientations
    ("marker_orientation", SPATIAL + """
[[markers]]
name = "a2"
body = "a"
position = [0, "m/10", 0]
orientation = { axis = [0, 1, 0], angle = 1.5707963267948966 }
""", lambda: from_python(bodies=SPATIAL_BODIES, markers=SPATIAL_MARKERS + (
        mbs.Marker("a2", "a", position=(0, "m/10", 0), orientation=mbs.AxisAngle((0.0, 1.0, 0.0), math.pi / 2)),))),
    ("marker_planar_angle", PLANAR + """
[[markers]]
name = "p1"
body = "p"
position = [0.1, 0]
orientation = "pi/4"
""", lambda: from_python(bodies=PLANAR_BODIES,
                         markers=PLANAR_MARKERS + (mbs.Marker("p1", "p", position=(0.1, 0), orientation="pi/4"),))),
    # joints
    ("revolute_planar", PLANAR + """
[[joints]]
name = "j"
type = "revolute"
markers = ["g0", "p0"]
""", lambda: planar(joints=(mbs.Revolute("j", "g0", "p0"),))),
    ("revolute_spatial_drive", SPATIAL + """
[[joints]]
name = "j"
type = "revolute"
markers = ["g0", "a0"]
axis = [1, 0, 0]
drive = "0.5*sin(t)"
""", lambda: spatial(joints=(mbs.Revolute("j", "g0", "a0", axis=(1.0, 0.0, 0.0), drive="0.5*sin(t)"),))),
    ("prismatic", SPATIAL + """
[[joints]]
name = "j"
type = "prismatic"
markers = ["g0", "a0"]
""", lambda: spatial(joints=(mbs.Prismatic("j", "g0", "a0"),))),
    ("cylindrical", SPATIAL + """
[[joints]]
name = "j"
type = "cylindrical"
markers = ["g0", "a0"]
axis = [0, 0, 1]
""", lambda: spatial(joints=(mbs.Cylindrical("j", "g0", "a0", axis=(0.0, 0.0, 1.0)),))),
    ("spherical", SPATIAL + """
[[joints]]
name = "j"
type = "spherical"
markers = ["g0", "a0"]
""", lambda: spatial(joints=(mbs.Spherical("j", "g0", "a0"),))),
    ("universal", SPATIAL + """
[[joints]]
name = "j"
type = "universal"
markers = ["g0", "a0"]
axis = [1, 0, 0]
axis_j = [0, 1, 0]
""", lambda: spatial(joints=(mbs.Universal("j", "g0", "a0", axis=(1.0, 0.0, 0.0), axis_j=(0.0, 1.0, 0.0)),))),
    ("planar_joint", SPATIAL + """
[[joints]]
name = "j"
type = "planar"
markers = ["g0", "a0"]
""", lambda: spatial(joints=(mbs.Planar("j", "g0", "a0"),))),
    ("fixed", SPATIAL + """
[[joints]]
name = "j"
type = "fixed"
markers = ["g0", "a0"]
""", lambda: spatial(joints=(mbs.Fixed("j", "g0", "a0"),))),
    # forces
    ("spring_damper", SPATIAL + f"""
[[forces]]
type = "spring_damper"
name = "s"
markers = ["g0", "a1"]
{LAW}
""", lambda: spatial(forces=(mbs.SpringDamper("s", "g0", "a1", PY_LAW),))),
    ("spring_damper_maxwell", SPATIAL + """
[[forces]]
type = "spring_damper"
name = "s"
markers = ["g0", "a1"]
law = { type = "maxwell", damping = 40 }
""", lambda: spatial(forces=(mbs.SpringDamper("s", "g0", "a1", {"type": "maxwell", "damping": 40}),))),
    ("bushing", SPATIAL + """
[[forces]]
type = "bushing"
name = "mount"
markers = ["g0", "a0"]
laws.z = { type = "linear_spring_damper", stiffness = "k", damping = "d" }
laws.rx = { type = "linear_spring_damper", stiffness = "k/10" }
""", lambda: spatial(forces=(mbs.Bushing("mount", "g0", "a0", {
        "z": PY_LAW, "rx": {"type": "linear_spring_damper", "stiffness": "k/10"}}),))),
    ("joint_force", PLANAR + f"""
[[joints]]
name = "j"
type = "revolute"
markers = ["g0", "p0"]

[[forces]]
type = "joint_force"
name = "torsion"
joint = "j"
{LAW}
""", lambda: planar(joints=(mbs.Revolute("j", "g0", "p0"),), forces=(mbs.JointForce("torsion", "j", PY_LAW),))),
    ("force_and_torque", SPATIAL + """
[[forces]]
type = "force"
name = "push"
marker = "a1"
vector = ["k*sin(t)", 0, "der(a_x)"]
frame = "body"

[[forces]]
type = "torque"
name = "twist"
body = "a"
vector = [0, 0, "d*t"]
""", lambda: spatial(forces=(mbs.Force("push", "a1", ("k*sin(t)", 0, "der(a_x)"), frame="body"),
                             mbs.Torque("twist", "a", (0, 0, "d*t"))))),
    # sensors
    ("vector_sensors", SPATIAL + """
[[sensors]]
type = "marker_position"
name = "pos"
marker = "a1"

[[sensors]]
type = "marker_velocity"
name = "vel"
marker = "a1"
frame = "marker"
components = ["x"]

[[sensors]]
type = "marker_acceleration"
name = "acc"
marker = "a1"
frame = "body"
gravity = true
components = ["x", "z"]

[[sensors]]
type = "angular_velocity"
name = "gyro"
marker = "a0"
frame = "body"

[[sensors]]
type = "angular_acceleration"
name = "alpha"
marker = "a0"

[[sensors]]
type = "orientation"
name = "ori"
marker = "a0"
components = ["y"]
""", lambda: spatial(sensors=(
        mbs.MarkerPosition("pos", marker="a1"),
        mbs.MarkerVelocity("vel", marker="a1", frame="marker", components=("x",)),
        mbs.MarkerAcceleration("acc", marker="a1", frame="body", gravity=True, components=("x", "z")),
        mbs.AngularVelocity("gyro", marker="a0", frame="body"), mbs.AngularAcceleration("alpha", marker="a0"),
        mbs.Orientation("ori", marker="a0", components=("y",))))),
    ("pair_and_joint_sensors", PLANAR + """
[[joints]]
name = "j"
type = "revolute"
markers = ["g0", "p0"]

[[sensors]]
type = "relative_displacement"
name = "rel"
markers = ["g0", "p0"]
components = ["y"]

[[sensors]]
type = "distance"
name = "dist"
markers = ["g0", "p0"]

[[sensors]]
type = "joint_coordinate"
name = "angle"
joint = "j"
derivative = 1

[[sensors]]
type = "joint_reaction"
name = "cell"
joint = "j"
frame = "global"
components = ["fx", "fy"]
""", lambda: planar(joints=(mbs.Revolute("j", "g0", "p0"),), sensors=(
        mbs.RelativeDisplacement("rel", marker_i="g0", marker_j="p0", components=("y",)),
        mbs.Distance("dist", marker_i="g0", marker_j="p0"), mbs.JointCoordinate("angle", joint="j", derivative=1),
        mbs.JointReaction("cell", joint="j", frame="global", components=("fx", "fy"))))),
    # today's sections mixed in
    ("mixed_with_scalar_items", PLANAR + """
[[coordinates]]
name = "x"
mass = "m"

[[forces]]
type = "linear_spring_damper"
name = "spring"
coordinates = ["x", "p_x"]
stiffness = "k"

[[outputs]]
name = "stretch"
expression = "p_x - x"
unit = "m"
""", lambda: from_python(bodies=PLANAR_BODIES, markers=PLANAR_MARKERS, coordinates=(Coordinate("x", mass="m"),),
                         forces=(LinearSpringDamper("spring", coordinates=("x", "p_x"), stiffness="k"),),
                         outputs=(Output("stretch", "p_x - x", "m"),))),
]


@pytest.mark.parametrize("text, build", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_a_file_gives_the_model_of_the_same_system_built_in_python(text, build):
    read, built = from_file(text), build()
    assert read == built
    assert model_key(read) == model_key(built)


def test_the_comparison_can_fail():
    """A changed value in the file gives another Model (the equality above is not vacuous)."""
    text = dict((case[0], case[1]) for case in CASES)["revolute_spatial_drive"]
    changed = from_file(text.replace("0.5*sin(t)", "0.4*sin(t)"))
    assert changed != spatial(joints=(mbs.Revolute("j", "g0", "a0", axis=(1.0, 0.0, 0.0), drive="0.5*sin(t)"),))


def test_a_file_without_multibody_sections_is_read_as_before():
    text = """
[model]
name = "plain"
[[coordinates]]
name = "x"
mass = 1.0
[[outputs]]
name = "x"
expression = "x"
"""
    model = parse_model(text)
    assert type(model).__name__ == "Model" and [c.name for c in model.coordinates] == ["x"]


# ------------------------------------------------------------------------ refusals --

PENDULUM = """
[model]
name = "pendulum"
gravity = [0, "-g", 0]

[simulation]
t_end = 0.5
step = 1e-4

[parameters]
m = { value = 1.0, unit = "kg" }
l = { value = 1.0, unit = "m" }
g = { value = 9.81, unit = "m/s^2" }

[[bodies]]
name = "rod"
type = "planar"
mass = "m"
inertia = "m*l**2/12"
position = ["l/2*sin(0.4)", "-l/2*cos(0.4)"]
angle = 0.4

[[markers]]
name = "pivot"
body = "ground"

[[markers]]
name = "top"
body = "rod"
position = [0, "l/2"]

[[joints]]
name = "hinge"
type = "revolute"
markers = ["pivot", "top"]

[[sensors]]
type = "joint_coordinate"
name = "angle"
joint = "hinge"
"""

SPATIAL_FILE = """
[model]
name = "top"
gravity = [0, 0, -9.81]

[[bodies]]
name = "top"
type = "spatial"
mass = 1.0
inertia = [1.0, 1.0, 0.5]

[[markers]]
name = "tip"
body = "top"
position = [0, 0, -0.5]

[[markers]]
name = "floor"
body = "ground"
position = [0, 0, -0.5]

[[joints]]
name = "pivot"
type = "spherical"
markers = ["floor", "tip"]
"""

TWO_HINGES = PENDULUM.replace("[[sensors]]", """[[joints]]
name = "hinge2"
type = "revolute"
markers = ["pivot", "top"]

[[sensors]]""")

#: (id, file text, words the one-line message must hold: the entry and the problem).
REFUSED = [
    ("joint_on_one_body", PENDULUM.replace('markers = ["pivot", "top"]', 'markers = ["top", "rod_centre"]')
     + '\n[[markers]]\nname = "rod_centre"\nbody = "rod"\n',
     ["joints[0] 'hinge' (revolute)", "both on body 'rod'"]),
    ("two_revolute_joints", TWO_HINGES, ["joints[1] 'hinge2' (revolute)", "joints[0] 'hinge'", "same bodies"]),
    ("zero_mass", PENDULUM.replace('mass = "m"', "mass = 0"), ["bodies[0] 'rod' (planar).mass", "positive mass"]),
    ("negative_planar_inertia", PENDULUM.replace('inertia = "m*l**2/12"', 'inertia = "-m"'),
     ["bodies[0] 'rod' (planar).inertia", "positive inertia"]),
    ("zero_spatial_inertia", SPATIAL_FILE.replace("[1.0, 1.0, 0.5]", "[1.0, 1.0, 0]"),
     ["bodies[0] 'top' (spatial).inertia", "positive"]),
    ("triangle_inequality", SPATIAL_FILE.replace("[1.0, 1.0, 0.5]", "[1.0, 1.0, 2.5]"),
     ["bodies[0] 'top' (spatial).inertia", "triangle inequality"]),
    ("rotation_not_orthonormal", SPATIAL_FILE.replace(
        "inertia = [1.0, 1.0, 0.5]",
        "inertia = [1.0, 1.0, 0.5]\nrotation = { matrix = [[1, 0, 0], [0, 1, 0.1], [0, 0, 1]] }"),
     ["bodies[0] 'top' (spatial).rotation", "not orthonormal"]),
    ("marker_rotation_not_orthonormal", SPATIAL_FILE.replace(
        "position = [0, 0, -0.5]\n\n[[markers]]",
        "position = [0, 0, -0.5]\norientation = { matrix = [[2, 0, 0], [0, 1, 0], [0, 0, 1]] }\n\n[[markers]]"),
     ["markers[0] 'tip'.orientation", "not orthonormal"]),
    ("unknown_marker", PENDULUM.replace('markers = ["pivot", "top"]', 'markers = ["pivot", "tpo"]'),
     ["joints[0] 'hinge' (revolute)", "unknown marker 'tpo'"]),
    ("unknown_body", PENDULUM.replace('body = "rod"', 'body = "rood"'), ["markers[1] 'top'", "unknown body 'rood'"]),
    ("unknown_joint", PENDULUM.replace('joint = "hinge"', 'joint = "hinje"'),
     ["sensors[0] 'angle' (joint_coordinate)", "unknown joint 'hinje'"]),
    ("unknown_key", PENDULUM.replace("angle = 0.4", "angle = 0.4\nrotation = { cardan = [0, 0, 0.4] }"),
     ["bodies[0] 'rod'", "unknown key(s) ['rotation'] for type 'planar'", "Allowed: angle, angular_velocity"]),
    ("unknown_body_type", PENDULUM.replace('type = "planar"', 'type = "rigid"'),
     ["bodies[0] 'rod'.type", "'rigid' is not a type of bodies", '"spatial"']),
    ("unknown_law_type", PENDULUM + '\n[[forces]]\ntype = "joint_force"\nname = "t"\njoint = "hinge"\n'
     'law = { type = "linear_spring", stiffness = 1 }\n', ["forces[0] 't' (joint_force).law.type", "linear_spring"]),
    ("law_with_a_name", PENDULUM + '\n[[forces]]\ntype = "joint_force"\nname = "t"\njoint = "hinge"\n'
     'law = { type = "linear_spring_damper", name = "x" }\n', ["forces[0] 't' (joint_force).law", "['name']"]),
    ("expression_outside_the_grammar", PENDULUM.replace('position = [0, "l/2"]',
                                                       'position = [0, "__import__(\'os\').getcwd()"]'),
     ["markers[1] 'top'", "position"]),
    ("spherical_between_planar_bodies", PENDULUM.replace('type = "revolute"', 'type = "spherical"'),
     ["joints[0] 'hinge' (spherical)", "revolute"]),
]


@pytest.mark.parametrize("text, words", [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED])
def test_bad_multibody_input_is_one_line_naming_file_entry_and_line(tmp_path, text, words):
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    code, out, err = cli(["simulate", path, "--engine", "python"])
    assert code == 2 and out == ""
    lines = err.strip().split("\n")
    assert len(lines) == 1 and lines[0].startswith("fmi-adjoint: error: ")
    message = lines[0]
    assert str(path) in message and re.search(r"\(line \d+\)", message), message
    for word in words:
        assert word in message, message


def test_the_line_is_that_of_the_entry(tmp_path):
    """The two-hinge file's message points at the second joint's header and names the first's."""
    path = tmp_path / "two.toml"
    path.write_text(TWO_HINGES, encoding="utf-8")
    code, _, err = cli(["simulate", path])
    headers = [n for n, line in enumerate(TWO_HINGES.split("\n"), start=1) if line == "[[joints]]"]
    assert code == 2 and f"(line {headers[1]}), joints[1] 'hinge2'" in err and f"(line {headers[0]})" in err


def test_the_two_hinge_file_is_read_with_one_hinge():
    """The refusal above is about the second joint: without it the file is read."""
    parse_model(PENDULUM)
    with pytest.raises(ModelError, match="joints\\[1\\] 'hinge2'"):
        parse_model(TWO_HINGES)


# ------------------------------------------------------------------ the registry --


@dataclasses.dataclass(frozen=True)
class Impostor(AbstractTwoPointElement):
    """A well-formed plugin that takes a multibody force type's name."""

    type_name: ClassVar[str] = "spring_damper"
    parameters: ClassVar[tuple[ElementParameter, ...]] = (ElementParameter("k", "N/m", 10.0, (0.0, 100.0)),)
    k: float | str | None = None

    def law(self, s, s_dot, p):
        return p["k"] * s


class _EntryPoint:
    def __init__(self, name, obj):
        self.name, self.value, self.group, self.dist = name, "fake_pkg:Thing", "fmi_adjoint.forces", None
        self._obj = obj

    def load(self):
        return self._obj


@pytest.mark.parametrize("name", ["spring_damper", "bushing", "joint_force", "force", "torque"])
def test_a_plugin_may_not_register_a_multibody_force_type(name):
    Impostor.type_name = name
    try:
        with pytest.raises(PluginError, match=f"rule 'reserved name' broken: '{name}'"):
            Registry([_EntryPoint(name, Impostor)]).get(name)
    finally:
        Impostor.type_name = "spring_damper"


def test_a_registry_with_such_a_plugin_still_reads_multibody_files():
    """The reader builds the multibody types itself; the impostor is never loaded."""
    entry = _EntryPoint("spring_damper", Impostor)
    linear = _EntryPoint("linear_spring_damper", LinearSpringDamper)
    registry = Registry([entry, linear])
    text = HEAD + SPATIAL + f'\n[[forces]]\ntype = "spring_damper"\nname = "s"\nmarkers = ["g0", "a1"]\n{LAW}\n'
    assert parse_model(text, registry=registry) == spatial(forces=(mbs.SpringDamper("s", "g0", "a1", PY_LAW),))


# ----------------------------------------------------------------- end to end --


def test_a_planar_pendulum_file_simulates_like_the_pendulum_ode(tmp_path):
    """``fmi-adjoint simulate`` of a rod on a hinge against ``theta'' = -(m g l/2) sin(theta) /
    (m l^2/3)`` (the physical pendulum about its pivot) from scipy at tight tolerances."""
    path = tmp_path / "pendulum.toml"
    path.write_text(PENDULUM, encoding="utf-8")
    code, _, err = cli(["simulate", path, "-o", tmp_path / "out.csv"])
    assert code == 0, err
    data = np.genfromtxt(tmp_path / "out.csv", delimiter=",", names=True)
    g, length = 9.81, 1.0
    omega2 = 1.5 * g / length
    ode = solve_ivp(lambda t, y: [y[1], -omega2 * math.sin(y[0])], (0.0, data["time"][-1]), [0.4, 0.0],
                    t_eval=data["time"], rtol=1e-12, atol=1e-12)
    assert np.max(np.abs(data["angle"] - ode.y[0])) <= CLOSED_FORM * 0.4
    assert np.sign(data["angle"][-1]) == -np.sign(data["angle"][0])  # it has swung through the bottom


# ------------------------------------------------------------------ model data is never evaluated --


def _evil(marker) -> str:
    """A user constraint named like a joint row, whose text would run code if evaluated."""
    return PENDULUM.replace("[[sensors]]", f"""[[constraints]]
name = "hinge_drive"
expression = "__import__('os').system('touch {marker}')"

[[sensors]]""")


def test_a_constraint_named_like_a_joint_row_is_never_evaluated(tmp_path):
    """Review of issue 23: the reader's joint check used to sympify the constraint looked up as
    ``<joint>_drive``, so this file ran code.  Now the grammar refuses the text, with or without
    a second (redundant) joint between the same bodies, and nothing runs."""
    marker = tmp_path / "pwned"
    with pytest.raises(ModelError, match=r"constraint 'hinge_drive'.*only plain function names"):
        parse_model(_evil(marker))
    redundant = _evil(marker).replace("[[constraints]]", '[[joints]]\nname = "hinge2"\ntype = "revolute"\n'
                                      'markers = ["pivot", "top"]\n\n[[constraints]]')
    with pytest.raises(ModelError, match=r"joints\[1\] 'hinge2' \(revolute\): its constraints repeat"):
        parse_model(redundant)
    path = tmp_path / "evil.toml"
    path.write_text(redundant, encoding="utf-8")
    code, out, err = cli(["simulate", path, "--engine", "python"])
    assert code == 2 and out == "" and len(err.strip().split("\n")) == 1, err
    assert not marker.exists()


def test_a_constraint_with_the_name_of_a_joint_row_is_refused_naming_both():
    """A [[constraints]] entry named ``hinge_x`` (a row of joint 'hinge') is not taken for the
    joint's row: one error at the constraint's line naming the joint."""
    text = PENDULUM.replace("[[sensors]]", '[[constraints]]\nname = "hinge_x"\nexpression = "rod_x"\n\n[[sensors]]')
    line = text.split("\n").index("[[constraints]]") + 1
    with pytest.raises(ModelError) as info:
        parse_model(text)
    message = str(info.value)
    assert f"(line {line}), constraints[0]: constraint 'hinge_x'" in message, message
    assert "joint 'hinge' (revolute)" in message and "rename" in message, message
