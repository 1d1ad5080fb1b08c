"""Structured model terms in TOML model files (issue 24, part 2): ``[[matrix_terms]]`` and
``[[quadratic_constraints]]`` (:mod:`fmi_adjoint.model_file`, :mod:`fmi_adjoint.structured`).

* A file with every kind (triplets, one triangle of a symmetric matrix, Matrix Market files in
  coordinate and array format written by :func:`scipy.io.mmwrite`, a load, quadratic
  constraints) is the model of :func:`structured_models.structured_demo` built in Python: the
  same canonical text, and the same simulation as the Python-built model in its own order;
* a multibody file with a matrix term lowers to the system built in Python;
* the Matrix Market files travel with the model (:class:`ModelSource`), key warm starts,
  are listed as inputs and are carried into exported FMUs, whose import trusts them;
* every bad input is one error naming the file, the line, the entry and the fix, exit code 2
  through the command line.
"""

from __future__ import annotations

import dataclasses
import os
import pickle

import numpy as np
import pytest
import scipy.io
import scipy.sparse

from captured_cli import cli, error_line
from fmi_adjoint import mbs
from fmi_adjoint.data import read_csv
from fmi_adjoint.engines import NativeEngine
from fmi_adjoint.equations import canonical_text
from fmi_adjoint.errors import ModelError
from fmi_adjoint.model import Output, Parameter
from fmi_adjoint.model_file import ModelSource, load_model, model_file_inputs, parse_model
from fmi_adjoint.structured import STIFFNESS, MatrixTerm
from fmi_adjoint.warm import model_file_key
from structured_models import CHAIN_MASS, CHAIN_STIFFNESS, structured_demo
from tolerances import ENGINES_AGREE

#: :func:`structured_demo` as a model file: the pendulum's mass and the chain's stiffness as
#: triplets (the stiffness as one triangle), the chain's mass matrix from a symmetric
#: coordinate Matrix Market file (used twice), its stiffness for the damping from an array one.
DEMO = """\
[model]
name = "structured_demo"

[simulation]
t_end = 1.0
step = 0.01

[parameters]
m = 2.0
k = 50.0
rho = 1.5
alpha = 0.3
beta = 0.01
F0 = 2.0

[[coordinates]]
name = "x"
initial_position = 0.6
[[coordinates]]
name = "y"
initial_position = -0.8
[[coordinates]]
name = "u1"
[[coordinates]]
name = "u2"
[[coordinates]]
name = "u3"
initial_velocity = 0.3

[[matrix_terms]]
name = "pendulum_mass"
role = "mass"
coordinates = ["x", "y"]
factor = "m"
matrix = { rows = [0, 1], cols = [0, 1], values = [1, 1] }

[[matrix_terms]]
name = "pendulum_weight"
role = "load"
coordinates = ["x", "y"]
factor = "m"
matrix = { rows = [1], cols = [0], values = [-9.81] }

[[matrix_terms]]
name = "chain_mass"
role = "mass"
coordinates = ["u1", "u2", "u3"]
factor = "rho"
matrix = { file = "chain_mass.mtx" }

[[matrix_terms]]
name = "chain_stiffness"
role = "stiffness"
coordinates = ["u1", "u2", "u3"]
factor = "k"
matrix = { rows = [0, 1, 1, 2, 2], cols = [0, 0, 1, 1, 2], values = [2, -1, 2, -1, 1], symmetric = true }

[[matrix_terms]]
name = "chain_damping_m"
role = "damping"
coordinates = ["u1", "u2", "u3"]
factor = "alpha*rho"
matrix = { file = "chain_mass.mtx" }

[[matrix_terms]]
name = "chain_damping_k"
role = "damping"
coordinates = ["u1", "u2", "u3"]
factor = "beta*k"
matrix = { file = "matrices/chain_stiffness.mtx" }

[[matrix_terms]]
name = "chain_load"
role = "load"
coordinates = ["u1", "u2", "u3"]
factor = "F0**2/2"
matrix = { rows = [2], cols = [0], values = [1.0], shape = [3, 1] }

[[quadratic_constraints]]
name = "rod"
coordinates = ["x", "y"]
c0 = [-1.0]
hessians = { rows = [0, 0], i = [0, 1], j = [0, 1], values = [2.0, 2.0] }

[[quadratic_constraints]]
name = "link"
coordinates = ["u1", "x"]
c0 = [0.3]
jacobian = { rows = [0, 0], cols = [0, 1], values = [1.0, -0.5] }
hessians = { rows = [0], i = [0], j = [1], values = [-0.2] }

[[outputs]]
name = "y_out"
expression = "y"
[[outputs]]
name = "u3_out"
expression = "u3"
[[outputs]]
name = "u2_acc"
expression = "der2(u2)"
[[outputs]]
name = "rod_force"
expression = "lam(rod_0)"
[[outputs]]
name = "u1_reaction"
expression = "reaction(u1)"
"""


def _write_matrices(folder) -> None:
    (folder / "matrices").mkdir(exist_ok=True)
    scipy.io.mmwrite(folder / "chain_mass.mtx", scipy.sparse.coo_matrix(CHAIN_MASS), symmetry="symmetric")
    scipy.io.mmwrite(folder / "matrices" / "chain_stiffness.mtx", CHAIN_STIFFNESS)  # dense: array format


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo")
    _write_matrices(folder)
    (folder / "demo.toml").write_text(DEMO, encoding="utf-8")
    return folder / "demo.toml"


def _file_order(model):
    """The model with its matrix terms first, then its quadratic constraints (the order a file gives)."""
    terms = [t for t in model.matrix_terms if isinstance(t, MatrixTerm)]
    return dataclasses.replace(model, matrix_terms=(*terms, *(t for t in model.matrix_terms if t not in terms)))


def test_a_file_with_every_kind_is_the_model_built_in_python(demo_file):
    got = load_model(demo_file)
    assert canonical_text(got) == canonical_text(_file_order(structured_demo()))
    assert [t.name for t in got.matrix_terms][-2:] == ["rod", "link"]


def test_the_file_model_simulates_as_the_python_model(demo_file):
    """The Python model in its own order (matrix terms and constraint rows interleaved, so a
    build of its own): the same outputs."""
    y_file = NativeEngine.build(load_model(demo_file)).simulate(t_end=0.5, step=0.01).outputs()
    y_python = NativeEngine.build(structured_demo()).simulate(t_end=0.5, step=0.01).outputs()
    assert np.abs(y_file).max() > 0
    np.testing.assert_allclose(y_file, y_python, rtol=ENGINES_AGREE, atol=ENGINES_AGREE)


def test_the_matrix_files_travel_with_the_model_source(demo_file, tmp_path):
    """A worker parses the text with the bytes carried along: the files may be gone."""
    source = ModelSource.from_path(demo_file)
    assert sorted(name for name, _ in source.tables) == ["chain_mass.mtx", "matrices/chain_stiffness.mtx"]
    moved = dataclasses.replace(pickle.loads(pickle.dumps(source)), directory=str(tmp_path))
    assert canonical_text(moved.load()) == canonical_text(load_model(demo_file))
    changed = dict(source.tables)
    changed["chain_mass.mtx"] = changed["chain_mass.mtx"].replace(b"\n1 1 ", b"\n1 1 1")
    assert dataclasses.replace(source, tables=tuple(sorted(changed.items()))).digest() != source.digest()


def test_the_matrix_files_are_inputs_and_key_warm_starts(tmp_path):
    _write_matrices(tmp_path)
    model = tmp_path / "demo.toml"
    model.write_text(DEMO, encoding="utf-8")
    inputs = model_file_inputs(model)
    assert ("matrix file", tmp_path / "chain_mass.mtx") in inputs
    assert ("matrix file", tmp_path / "matrices" / "chain_stiffness.mtx") in inputs
    key = model_file_key(model)
    assert key is not None and model_file_key(model) == key
    scipy.io.mmwrite(tmp_path / "matrices" / "chain_stiffness.mtx", 2 * CHAIN_STIFFNESS)
    assert model_file_key(model) not in (None, key)
    # A matrix file outside the folder is not read for a key (the cold path refuses it).
    model.write_text(DEMO.replace('"matrices/chain_stiffness.mtx"', '"../outside.mtx"'), encoding="utf-8")
    scipy.io.mmwrite(tmp_path.parent / "outside.mtx", CHAIN_STIFFNESS)
    assert model_file_key(model) is None
    assert model_file_key(model, allow_external_tables=True) is not None


MULTIBODY = """\
[model]
name = "mass_on_a_matrix_spring"
gravity = [0, 0, "-g"]

[parameters]
g = 9.81
m = 2.0
k = 100.0

[[bodies]]
name = "b"
type = "point_mass"
mass = "m"

[[matrix_terms]]
name = "support"
role = "stiffness"
coordinates = ["b_x", "b_y", "b_z"]
factor = "k"
matrix = { file = "support.mtx" }

[[outputs]]
name = "z"
expression = "b_z"
"""

SUPPORT = np.array([[1.0, 0.0, 0.2], [0.0, 1.0, 0.0], [0.2, 0.0, 2.0]])


def test_a_multibody_file_with_a_matrix_term_is_the_system_built_in_python(tmp_path):
    scipy.io.mmwrite(tmp_path / "support.mtx", scipy.sparse.coo_matrix(SUPPORT), symmetry="symmetric")
    (tmp_path / "mbs.toml").write_text(MULTIBODY, encoding="utf-8")
    system = mbs.MultibodySystem(
        name="mass_on_a_matrix_spring", gravity=(0, 0, "-g"),
        parameters=(Parameter("g", 9.81), Parameter("m", 2.0), Parameter("k", 100.0)),
        bodies=(mbs.PointMass(name="b", mass="m"),), outputs=(Output("z", "b_z"),),
        matrix_terms=(MatrixTerm("support", STIFFNESS, ("b_x", "b_y", "b_z"), SUPPORT, "k"),))
    got = load_model(tmp_path / "mbs.toml")
    assert [t.name for t in got.matrix_terms] == ["support"]
    assert canonical_text(got) == canonical_text(system.to_model())


def test_simulate_runs_a_file_with_matrix_terms(demo_file, tmp_path):
    out = tmp_path / "out.csv"
    code, _, err = cli(["simulate", demo_file, "--t-end", "0.2", "-o", out])
    assert code == 0, err
    data = read_csv(out)
    assert set(data.columns) >= {"y_out", "u3_out", "rod_force"}
    assert np.all(np.isfinite(data.column("rod_force")))


def test_a_bad_matrix_term_is_refused_through_the_command_line(tmp_path):
    _write_matrices(tmp_path)
    (tmp_path / "bad.toml").write_text(DEMO.replace('role = "damping"', 'role = "dampening"', 1), encoding="utf-8")
    code, _, err = cli(["simulate", tmp_path / "bad.toml"])
    assert code == 2
    line = error_line(err)
    role_line = _line('role = "damping"')
    assert f"bad.toml (line {role_line}), matrix_terms[4] 'chain_damping_m'.role" in line
    assert 'write role = one of "mass", "stiffness", "damping", "load"' in line


# ----------------------------------------------------------------- one error per bad input --

def _header(section: str, index: int) -> int:
    """The line of the ``index``-th ``[[section]]`` header of :data:`DEMO`."""
    headers = [n for n, line in enumerate(DEMO.split("\n"), start=1) if line == f"[[{section}]]"]
    return headers[index]


def _line(text: str) -> int:
    """The line of :data:`DEMO` that holds ``text`` first."""
    return next(n for n, line in enumerate(DEMO.split("\n"), start=1) if text in line)


ROLE_LOAD, LINK_COORDINATES, LINK_NAME = 'role = "load"', 'coordinates = ["u1", "x"]', 'name = "link"'
#: (what is wrong, replacement in DEMO (old, new) or a matrix file's text, expected message).
BAD = [
    ("unknown role", ('role = "load"', 'role = "weight"'),
     rf"\(line {_line(ROLE_LOAD)}\), matrix_terms\[1\] 'pendulum_weight'\.role: 'weight' is not a role; write "
     r"role = one of \"mass\", \"stiffness\", \"damping\", \"load\""),
    ("coordinate not in the model", ('coordinates = ["u1", "x"]', 'coordinates = ["u1", "z"]'),
     rf"\(line {_line(LINK_COORDINATES)}\), quadratic_constraints\[1\] 'link'\.coordinates: 'z' is not a "
     r"coordinate of the model; name one of x, y, u1, u2, u3"),
    ("wrong shape", ("shape = [3, 1]", "shape = [3, 3]"),
     r"matrix_terms\[6\] 'chain_load'\.matrix\.shape: \[3, 3\], but the matrix here is 3 x 1 \(a load"),
    ("index outside", ('rows = [2], cols = [0]', 'rows = [3], cols = [0]'),
     r"'chain_load'\.matrix\.rows\[0\] = 3 lies outside 0 \.\. 2 \(3 rows\); indices are 0-based"),
    ("lengths differ", ("rows = [0, 1], cols = [0, 1], values = [1, 1]", "rows = [0, 1], cols = [0], values = [1, 1]"),
     r"'pendulum_mass'\.matrix: rows, cols and values have 2, 1 and 2 entries"),
    ("non-finite", ("values = [-9.81]", "values = [nan]"),
     r"'pendulum_weight'\.matrix\.values\[0\]: nan is not finite; give finite numbers"),
    ("non-finite c0", ("c0 = [-1.0]", "c0 = [inf]"), r"'rod'\.c0\[0\]: inf is not finite"),
    ("both triangles", ("cols = [0, 0, 1, 1, 2]", "cols = [0, 2, 1, 1, 2]"),
     r"'chain_stiffness'\.matrix: symmetric = true takes the entries of one triangle.*these lie in both"),
    ("symmetric not square", ("values = [1.0], shape = [3, 1]", "values = [1.0], shape = [3, 1], symmetric = true"),
     r"'chain_load'\.matrix\.symmetric: the matrix here is 3 x 1 .*not square"),
    ("Hessian index", ("i = [0, 1], j = [0, 1]", "i = [0, 2], j = [0, 1]"),
     r"'rod'\.hessians\.i\[1\] = 2 lies outside 0 \.\. 1 \(2 coordinates\)"),
    ("duplicate names", ('name = "link"', 'name = "chain_load"'),
     rf"\(line {_line(LINK_NAME)}\), quadratic_constraints\[1\] 'chain_load'\.name: the name 'chain_load' is "
     rf"also that of matrix_terms\[6\] 'chain_load' \(line {_header('matrix_terms', 6)}\)"),
    ("unknown key", ("factor = \"rho\"", "factor = \"rho\"\ncolour = \"red\""),
     r"matrix_terms\[2\] 'chain_mass': unknown key\(s\) \['colour'\]"),
    ("unknown matrix key", ('{ file = "chain_mass.mtx" }', '{ file = "chain_mass.mtx", symmetric = true }'),
     r"'chain_mass'\.matrix: unknown key\(s\) \['symmetric'\] next to 'file'"),
    ("unknown factor name", ('factor = "beta*k"', 'factor = "beta*kk"'),
     rf"\(line {_header('matrix_terms', 5)}\).*'chain_damping_k'.*kk"),
    ("file missing", ('"chain_mass.mtx"', '"missing.mtx"'),
     r"'chain_mass'\.matrix\.file: .*missing\.mtx: file not found; give the path of a Matrix Market file"),
    ("file outside the folder", ('"chain_mass.mtx"', '"../chain_mass.mtx"'),
     r"'chain_mass'\.matrix\.file: '\.\./chain_mass\.mtx' lies outside the model file's folder .*put the matrix "
     r"file next to the model file, or pass --allow-external-tables"),
    ("not Matrix Market", "time,F\n0,1\n", r"'chain_mass'\.matrix\.file: 'chain_mass\.mtx' is not a Matrix Market "
     r"file \(.*banner.*\); write it with scipy\.io\.mmwrite"),
    ("complex", "%%MatrixMarket matrix coordinate complex general\n3 3 1\n1 1 1.0 2.0\n",
     r"'chain_mass\.mtx' holds complex values; a matrix term takes real numbers"),
    ("pattern only", "%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 1\n",
     r"'chain_mass\.mtx' holds a pattern only \(no values\)"),
    ("wrong shape in the file", "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1.0\n",
     r"'chain_mass\.mtx' declares a 2 x 2 matrix, but the matrix here is 3 x 3"),
    ("non-finite in the file", "%%MatrixMarket matrix coordinate real general\n3 3 1\n2 2 nan\n",
     r"'chain_mass'\.matrix\.file: 'chain_mass\.mtx'.*not finite"),
    ("broken body", "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 one\n",
     r"'chain_mass\.mtx' cannot be read as Matrix Market \(Line 3: Invalid floating-point value\.\)"),
    # The header declares more entries than a term may hold, and no body follows: refused on the
    # header (the body would say the file is truncated).
    ("too many entries declared", "%%MatrixMarket matrix coordinate real symmetric\n3 3 2000001\n",
     r"'chain_mass\.mtx' declares 4000002 entries, more than the limit of 4000000"),
]


@pytest.mark.parametrize(("change", "message"), [(b[1], b[2]) for b in BAD], ids=[b[0] for b in BAD])
def test_each_bad_input_is_one_error_naming_the_entry_and_the_fix(tmp_path, change, message):
    _write_matrices(tmp_path)
    text = DEMO
    if isinstance(change, tuple):
        assert change[0] in text
        text = text.replace(change[0], change[1], 1)
    else:
        (tmp_path / "chain_mass.mtx").write_text(change, encoding="utf-8")
    (tmp_path / "demo.toml").write_text(text, encoding="utf-8")
    with pytest.raises(ModelError, match=message) as info:
        load_model(tmp_path / "demo.toml")
    assert str(info.value).startswith(str(tmp_path / "demo.toml"))


def test_a_matrix_file_too_large_is_refused_before_it_is_read(tmp_path, monkeypatch):
    from fmi_adjoint import model_file

    _write_matrices(tmp_path)
    (tmp_path / "demo.toml").write_text(DEMO, encoding="utf-8")
    size = (tmp_path / "chain_mass.mtx").stat().st_size
    monkeypatch.setattr(model_file, "_MAX_MATRIX_BYTES", size - 1)
    with pytest.raises(ModelError, match=r"'chain_mass'\.matrix\.file: .*chain_mass\.mtx: the file is larger than"):
        load_model(tmp_path / "demo.toml")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_matrix_file_that_is_a_fifo_is_refused(tmp_path):
    _write_matrices(tmp_path)
    (tmp_path / "chain_mass.mtx").unlink()
    os.mkfifo(tmp_path / "chain_mass.mtx")
    (tmp_path / "demo.toml").write_text(DEMO, encoding="utf-8")
    with pytest.raises(ModelError, match=r"'chain_mass'\.matrix\.file: .*a FIFO.*not a regular file"):
        load_model(tmp_path / "demo.toml")


def test_the_triplets_read_as_mirrored_and_summed():
    """One triangle of a symmetric matrix is mirrored (the diagonal once); duplicates add up."""
    model = parse_model(DEMO.replace('{ file = "chain_mass.mtx" }', "{ rows = [0, 0, 2], cols = [2, 2, 1], "
                                     "values = [1.5, 0.5, 3.0] }", 1)
                        .replace('{ file = "chain_mass.mtx" }', '{ rows = [0], cols = [0], values = [1] }')
                        .replace('{ file = "matrices/chain_stiffness.mtx" }', "{ rows = [0], cols = [0], "
                                 "values = [1] }"))
    terms = {t.name: t for t in model.matrix_terms}
    assert np.array_equal(terms["chain_stiffness"].matrix.dense(), CHAIN_STIFFNESS)
    assert np.array_equal(terms["chain_mass"].matrix.dense(), [[0, 0, 2.0], [0, 0, 0], [0, 3.0, 0]])


# ------------------------------------------------------------------------------ FMU export --

def test_an_exported_fmu_carries_its_matrix_files_and_equals_the_engine(demo_file, tmp_path):
    """The FMU runs in fmpy as the in-process C engine does, bit for bit; its resources/ hold
    the Matrix Market files at the names the model file gives, so the import's trust check
    rebuilds the embedded model to the very binary."""
    import zipfile

    import fmpy

    from fmi_adjoint.export import export_fmu
    from fmi_adjoint.fmu.archive import open_fmu
    from fmi_adjoint.integrate.schemes import scheme_from_settings

    fmu = export_fmu(demo_file, tmp_path / "demo.fmu")
    with zipfile.ZipFile(fmu) as archive:
        names = set(archive.namelist())
        assert archive.read("resources/matrices/chain_stiffness.mtx") == \
            (demo_file.parent / "matrices" / "chain_stiffness.mtx").read_bytes()
    assert {"resources/model.toml", "resources/chain_mass.mtx"} <= names
    engine = NativeEngine.build(load_model(demo_file))
    step, steps = 0.01, 50
    result = fmpy.simulate_fmu(str(fmu), stop_time=steps * step, output_interval=step)
    _, y = engine.library.simulate(t_end=steps * step, step=step,
                                   solver=scheme_from_settings(engine.compiled.model.simulation))
    for k, name in enumerate(engine.compiled.output_names):
        assert np.array_equal(result[name], y[:, k]), name
    with open_fmu(fmu) as archive:
        assert archive.native is not None, archive.native_distrust
