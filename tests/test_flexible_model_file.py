"""Flexible bodies in model files (issue 25): ``[[bodies]] type = "flexible"`` with a built-in
``beam = {...}`` or an FE tool's matrices ``fe = {...}``, node markers ``[[markers]] node = N``,
and the bundled example ``flexible_pendulum``.

* the TOML beam body lowers to the same model (canonical text) as the Python-built
  :class:`~fmi_adjoint.mbs.FlexibleBody`;
* the ``fe`` form, with Matrix Market files written here from a beam model's matrices
  (:func:`scipy.io.mmwrite`), lowers to the same model as the ``beam`` form, with and without
  a DOF map;
* its files follow the data-file rules: listed by ``data_files``, carried in ``ModelSource``
  (the model loads with the files gone), keying the warm start, refused outside the folder;
* each bad input is one error naming the file, the entry and the fix;
* ``fmi-adjoint simulate flexible_pendulum``; the example's FMU runs in fmpy bit-identically to
  the in-process engine and its import is trusted (``archive.native``), as is the FMU of an
  ``fe`` model (its files carried in ``resources/``).
"""

from __future__ import annotations

import pickle
import re

import numpy as np
import pytest
import scipy.io
from captured_cli import cli
from tolerances import EXACT, FNCF_VS_FE

from fmi_adjoint import NativeEngine, mbs
from fmi_adjoint.equations import canonical_text
from fmi_adjoint.errors import ModelError
from fmi_adjoint.examples import example_names, example_path
from fmi_adjoint.flexible import BeamSection, LumpedMass, ModeCount, beam_model, line_mesh
from fmi_adjoint.model import Parameter, SimulationSettings
from fmi_adjoint.model_file import ModelSource, data_files, load_model, parse_model
from fmi_adjoint.warm import model_file_key

SECTION = dict(E=2.1e11, G=8.1e10, A=6e-4, Iy=2e-8, Iz=4.5e-8, J=4.7e-8, rho=7850.0)
ELEMENTS = 4
TIP = ELEMENTS + 1
BEAM = ("{ length = 1.0, elements = 4, E = 2.1e11, G = 8.1e10, A = 6e-4, Iy = 2e-8, Iz = 4.5e-8, J = 4.7e-8, "
        "rho = 7850.0, theory = \"euler_bernoulli\", mass = \"lumped\" }")
FE = "{ nodes = \"nodes.csv\", mass = \"m.mtx\", stiffness = \"k.mtx\" }"

TEMPLATE = """
[model]
name = "flex"
gravity = [0, "-g", 0]

[simulation]
t_end = 0.01
step = 1e-3
alpha = -0.05

[parameters]
EIs = 1.0
rhos = 1.0
g = 9.81

[[bodies]]
name = "beam"
type = "flexible"
{body}

[[markers]]
name = "pivot"
body = "ground"

[[markers]]
name = "root"
body = "beam"
node = 1

[[markers]]
name = "tip"
body = "beam"
{tip}

[[joints]]
name = "hinge"
type = "revolute"
markers = ["pivot", "root"]

[[sensors]]
type = "marker_position"
name = "tip"
marker = "tip"
components = ["x", "y"]
"""


def body_text(form: str = f"beam = {BEAM}", **extra: str) -> str:
    keys = {"reference_node": "1", "interface_nodes": f"[{TIP}]", "modes": "2", "stiffness_factor": '"EIs"',
            "mass_factor": '"rhos"', **extra}
    return "\n".join([form] + [f"{key} = {value}" for key, value in keys.items() if value is not None])


def model_text(body: str | None = None, tip: str = f"node = {TIP}") -> str:
    return TEMPLATE.replace("{body}", body_text() if body is None else body).replace("{tip}", tip)


def python_system() -> mbs.MultibodySystem:
    """The TEMPLATE's system built in Python."""
    fe = beam_model(line_mesh(1.0, ELEMENTS), BeamSection(**SECTION), mass=LumpedMass()).fe
    body = mbs.FlexibleBody("beam", fe=fe, reference_node=1, interface_nodes=(TIP,), modes=ModeCount(2),
                            stiffness_factor="EIs", mass_factor="rhos")
    return mbs.MultibodySystem(
        "flex", parameters=(Parameter("EIs", 1.0), Parameter("rhos", 1.0), Parameter("g", 9.81)),
        bodies=(body,), gravity=(0, "-g", 0),
        markers=(mbs.Marker("pivot", "ground"), mbs.NodeMarker("root", "beam", node=1),
                 mbs.NodeMarker("tip", "beam", node=TIP)),
        joints=(mbs.Revolute("hinge", "pivot", "root"),),
        sensors=(mbs.MarkerPosition("tip", "tip", components=("x", "y")),),
        simulation=SimulationSettings(t_end=0.01, step=1e-3, alpha=-0.05))


def write_fe_files(folder, *, dofs: bool = False, precision: int = 17) -> None:
    """nodes.csv, m.mtx, k.mtx (and dofs.csv, Ansys labels) of the TEMPLATE's beam."""
    fe = beam_model(line_mesh(1.0, ELEMENTS), BeamSection(**SECTION), mass=LumpedMass()).fe
    lines = ["id,x,y,z"] + [f"{int(n)},{x!r},{y!r},{z!r}" for n, (x, y, z) in
                            zip(fe.node_ids, np.asarray(fe.coordinates).tolist())]
    (folder / "nodes.csv").write_text("\n".join(lines) + "\n")
    scipy.io.mmwrite(folder / "m.mtx", fe.mass, precision=precision)
    scipy.io.mmwrite(folder / "k.mtx", fe.stiffness, precision=precision)
    if dofs:
        labels = ("UX", "UY", "UZ", "ROTX", "ROTY", "ROTZ")
        rows = [f"{k + 1} {int(node)} {labels[int(c)]}" for k, (node, c) in enumerate(np.asarray(fe.dofs))]
        (folder / "dofs.csv").write_text("Matrix Eqn  Node  DOF\n" + "\n".join(rows) + "\n")


def write_fe_model(folder, **options) -> object:
    write_fe_files(folder, **options)
    form = FE.replace(" }", ', dofs = "dofs.csv" }') if options.get("dofs") else FE
    path = folder / "flex.toml"
    path.write_text(model_text(body_text(f"fe = {form}")))
    return path


# -- the forms equal the Python-built body ------------------------------------------------------
def test_the_beam_entry_lowers_to_the_model_of_the_python_built_body():
    from_file = parse_model(model_text())
    assert canonical_text(from_file) == canonical_text(python_system().to_model())


@pytest.mark.parametrize("dofs", [False, True], ids=["six_dofs_per_node", "dof_map"])
def test_the_fe_entry_with_the_beams_matrices_lowers_to_the_model_of_the_beam_entry(tmp_path, dofs):
    path = write_fe_model(tmp_path, dofs=dofs)
    assert canonical_text(load_model(path)) == canonical_text(parse_model(model_text()))


def test_the_options_reach_the_body():
    """modes as a frequency limit, Rayleigh and modal damping, position, rotation and factors."""
    from fmi_adjoint.flexible import FrequencyLimit, ModalDamping, RayleighDamping
    from fmi_adjoint.model_file import parse_system

    text = model_text(body_text(modes="{ frequency_limit = 400.0 }", damping="{ rayleigh = [0.5, 1e-5] }",
                                position="[0, 1, 0]", rotation="{ axis = [0, 0, 1], angle = 0.5 }",
                                damping_factor='"EIs"'))
    body = parse_system(text).bodies[0]
    assert isinstance(body, mbs.FlexibleBody)
    assert body.modes == FrequencyLimit(400.0) and body.damping == RayleighDamping(0.5, 1e-5)
    assert body.position == (0.0, 1.0, 0.0) and body.damping_factor == "EIs"
    assert body.basis.frequencies.max() < 400.0 and body.basis.modes == 6 + body.basis.frequencies.size
    modal = parse_system(model_text(body_text(damping="{ modal = [0.01, 0.02] }"))).bodies[0]
    assert modal.damping == ModalDamping((0.01, 0.02))
    timoshenko = parse_system(model_text(body_text(
        f"beam = {BEAM.replace('euler_bernoulli', 'timoshenko').replace(' }', ', shear_factor = 0.85 }')}")))
    assert "Timoshenko" in timoshenko.bodies[0].fe.source


# -- the data-file rules --------------------------------------------------------------------------
def test_the_fe_files_are_listed_carried_and_key_the_warm_start(tmp_path):
    import tomllib

    path = write_fe_model(tmp_path, dofs=True)
    doc = tomllib.loads(path.read_text())
    assert sorted(data_files(doc)) == [("DOF map", "dofs.csv"), ("matrix file", "k.mtx"), ("matrix file", "m.mtx"),
                                       ("node file", "nodes.csv")]
    source = ModelSource.from_path(path)
    assert [name for name, _ in source.tables] == ["dofs.csv", "k.mtx", "m.mtx", "nodes.csv"]
    key = model_file_key(path)
    assert key is not None
    (tmp_path / "k.mtx").write_text((tmp_path / "k.mtx").read_text() + "% an edit\n")
    assert model_file_key(path) not in (None, key)
    for name in ("dofs.csv", "k.mtx", "m.mtx", "nodes.csv"):
        (tmp_path / name).unlink()
    worker = pickle.loads(pickle.dumps(source))  # a worker has the text and the files' bytes only
    assert canonical_text(worker.load()) == canonical_text(parse_model(model_text()))


# -- one clear error per bad input ----------------------------------------------------------------
ENTRY = re.escape("bodies[0] 'beam' (flexible)")
BAD = {
    "both_forms": (body_text(f"beam = {BEAM}\nfe = {FE}"), None,
                   f"{ENTRY}: both beam and fe are given; give exactly one"),
    "no_form": (body_text("position = [0, 0, 0]"), None, f"{ENTRY}: no FE model is given"),
    "unknown_interface_node": (body_text(interface_nodes="[99]"), None,
                               rf"{ENTRY}.interface_nodes\[0\]: node 99 is not a node of the FE model "
                               r"\(its nodes: 1..5\)"),
    "unknown_reference_node": (body_text(reference_node="0"), None, rf"{ENTRY}.reference_node: 0 is not a node id"),
    "unknown_marker_node": (None, "node = 99", r"markers\[2\] 'tip'.*node 99 is not a node of the FE model"),
    "marker_off_its_node": (None, f"node = {TIP}\nposition = [0.1, 0, 0]",
                            r"markers\[2\] 'tip'.position: a marker with node = 5 sits at that node"),
    "bad_theory": (body_text(f"beam = {BEAM.replace('euler_bernoulli', 'bernoulli')}"), None,
                   rf"{ENTRY}.beam.theory: 'bernoulli' is not one of euler_bernoulli, timoshenko"),
    "negative_section": (body_text(f"beam = {BEAM.replace('A = 6e-4', 'A = -6e-4')}"), None,
                         rf"{ENTRY}.beam.A: -0.0006; give a positive number \(m\^2\)"),
    "no_elements": (body_text(f"beam = {BEAM.replace('elements = 4', 'elements = 0')}"), None,
                    rf"{ENTRY}.beam.elements: 0; give a whole number of elements in 1 .. 10000"),
    "shear_factor_of_euler_bernoulli": (body_text(f"beam = {BEAM.replace(' }', ', shear_factor = 0.8 }')}"), None,
                                        rf"{ENTRY}.beam: unknown key\(s\) \['shear_factor'\]"),
    "negative_modes": (body_text(modes="-1"), None, rf"{ENTRY}.modes: -1 normal modes; give a count in 0 .. 200"),
    "bad_frequency_limit": (body_text(modes="{ frequency_limit = -5.0 }"), None,
                            rf"{ENTRY}.modes.frequency_limit: -5.0; give a positive frequency in Hz"),
    "bad_damping": (body_text(damping="{ viscous = 0.1 }"), None,
                    rf"{ENTRY}.damping: expected \{{ rayleigh = \[alpha, beta\] \}} or \{{ modal"),
    "negative_rayleigh": (body_text(damping="{ rayleigh = [-1.0, 0.0] }"), None,
                          rf"{ENTRY}.damping.rayleigh: \[-1.0, 0.0\]; give alpha"),
    "unknown_key": (body_text(inertia="[1, 1, 1]"), None,
                    rf"{ENTRY}: unknown key\(s\) \['inertia'\] for type 'flexible'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_flexible_entry_is_one_error_naming_the_file_entry_and_fix(case):
    body, tip, message = BAD[case]
    text = model_text(body, tip) if tip is not None else model_text(body)
    with pytest.raises(ModelError, match=message) as info:
        parse_model(text, source="flex.toml")
    assert str(info.value).startswith("flex.toml (line "), str(info.value)


def test_a_missing_fe_file_is_named(tmp_path):
    path = write_fe_model(tmp_path)
    (tmp_path / "k.mtx").unlink()
    with pytest.raises(ModelError, match=rf"{ENTRY}.fe.stiffness: .*k.mtx: file not found"):
        load_model(path)


def test_an_fe_file_outside_the_model_folder_is_refused(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    write_fe_files(folder)
    (folder / "k.mtx").rename(tmp_path / "k.mtx")
    path = folder / "flex.toml"
    path.write_text(model_text(body_text(f"fe = {FE.replace('k.mtx', '../k.mtx')}")))
    with pytest.raises(ModelError, match=rf"{ENTRY}.fe.stiffness: '../k.mtx' lies outside the model file's folder"):
        load_model(path)


def test_matrices_without_six_dofs_a_node_ask_for_a_dof_map(tmp_path):
    path = write_fe_model(tmp_path)
    (tmp_path / "nodes.csv").write_text((tmp_path / "nodes.csv").read_text() + "6,2.0,0.0,0.0\n")
    with pytest.raises(ModelError, match=rf"{ENTRY}.fe: m.mtx has 30 rows, not 6 per node of nodes.csv .*give dofs ="):
        load_model(path)


def test_an_importer_error_names_the_file_as_written(tmp_path):
    path = write_fe_model(tmp_path, dofs=True)
    (tmp_path / "dofs.csv").write_text("1 1 UX\n1 1 UY\n")
    with pytest.raises(ModelError, match=rf"{ENTRY}.fe: dofs.csv, line 2: equation 1 is mapped twice") as info:
        load_model(path)
    assert "fmi_adjoint_fe_" not in str(info.value)  # not the private copy's path


# -- the bundled example ------------------------------------------------------------------------
def test_the_example_is_listed_and_simulates_from_the_command_line(tmp_path):
    assert "flexible_pendulum" in example_names()
    out = tmp_path / "fp.csv"
    code, _, err = cli(["simulate", "flexible_pendulum", "--t-end", "0.05", "-o", out])
    assert code == 0, err
    data = np.genfromtxt(out, delimiter=",", names=True)
    assert {"tip_x", "tip_y"} <= set(data.dtype.names)
    radius = np.hypot(data["tip_x"], data["tip_y"])
    assert abs(radius[0] - 1.0) <= EXACT and data["tip_y"][-1] < 0.0  # released level, falling
    # The tip stays on the unit circle to the formulation's accuracy (measured 1.4e-8: the
    # elastic deflection changes the radius only at second order).
    assert np.abs(radius - 1.0).max() <= FNCF_VS_FE


def _assert_fmu_equals_engine(fmu, engine: NativeEngine, steps: int) -> None:
    """``steps`` steps of the FMU in fmpy equal the in-process C engine's, bit for bit
    (as tests/test_sparse_solver.py)."""
    import fmpy

    from fmi_adjoint.integrate.schemes import scheme_from_settings

    step = engine.compiled.model.simulation.step
    result = fmpy.simulate_fmu(str(fmu), stop_time=steps * step, output_interval=step)
    _, y = engine.library.simulate(t_end=steps * step, step=step,
                                   solver=scheme_from_settings(engine.compiled.model.simulation))
    for k, name in enumerate(engine.compiled.output_names):
        assert np.array_equal(result[name], y[:, k]), name


@pytest.mark.slow
def test_the_examples_fmu_runs_bit_identically_in_fmpy_and_is_trusted(tmp_path):
    from fmi_adjoint.export import export_fmu
    from fmi_adjoint.fmu.archive import open_fmu

    fmu = export_fmu(example_path("flexible_pendulum"), tmp_path / "fp.fmu")
    _assert_fmu_equals_engine(fmu, NativeEngine.build(load_model(example_path("flexible_pendulum"))), 100)
    with open_fmu(fmu) as archive:
        assert archive.native is not None, archive.native_distrust


@pytest.mark.slow
def test_the_fmu_of_an_fe_model_carries_its_files_and_is_trusted(tmp_path):
    import zipfile

    from fmi_adjoint.export import export_fmu
    from fmi_adjoint.fmu.archive import open_fmu

    path = write_fe_model(tmp_path, dofs=True)
    fmu = export_fmu(path, tmp_path / "flex.fmu")
    with zipfile.ZipFile(fmu) as archive:
        names = set(archive.namelist())
    assert {f"resources/{n}" for n in ("nodes.csv", "m.mtx", "k.mtx", "dofs.csv")} <= names
    _assert_fmu_equals_engine(fmu, NativeEngine.build(load_model(path)), 10)
    with open_fmu(fmu) as archive:
        assert archive.native is not None, archive.native_distrust
