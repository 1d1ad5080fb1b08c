"""Measured inputs in model files (issue 26, part 7): an ``[inputs]`` entry with ``file`` and
``channel`` is driven by that channel of a bench data file (:mod:`fmi_adjoint.model_file`).

* a base-excited mass whose base follows a displacement recorded in mm (a semicolon CSV with
  decimal commas and a ``name [unit]`` header) runs as the same model with the displacement
  written as an expression, sampled at the step times;
* a force recorded in an MDF4 file gives the run of the same samples in a CSV file, and
  every bench format gives the same table;
* between its samples the channel is interpolated linearly, not held;
* the data file travels with the model (listed as an input, keying warm starts: a warm start
  equals the cold one, a changed data file gives a new key and a new result);
* every bad input is one error line with exit code 2 through the command line;
* an export leaves the measured data out: the FMU exposes the input as an input, records
  what it left out, and its import's trust check and the rebuild of ``apply -o`` hold.
"""

from __future__ import annotations

import json
import pickle
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from captured_cli import cli, error_line
from fmi_adjoint.cache import BuildCache
from fmi_adjoint.engines import NativeEngine
from fmi_adjoint.errors import ModelError
from fmi_adjoint.model_file import ModelSource, load_model, model_file_inputs
from fmi_adjoint.warm import DeferredModel, model_file_key, prepare_model
from fmi_adjoint.examples import example_path
from test_bench_data import write_bench_csv, write_hdf5, write_mat5, write_mat73, write_mdf
from test_measured_inputs import MODEL as BASE_MODEL
from tolerances import EXACT

#: The lead's base-excited mass (tests/test_measured_inputs.py: a mass on a spring and a damper
#: to a base ``b`` prescribed as ``b = z``), its input ``z`` declared by the line ``Z_LINE``.
Z_LINE = 'z = { value = 0.0, unit = "m", description = "base displacement (the shaker)" }'
MEASURED_Z = 'z = { value = 0.0, unit = "m", file = "shaker.csv", channel = "z_shaker" }'
#: The displacement written as an expression: it starts at rest, so its samples' first segment
#: has the expression's slope 0 at t = 0 and both drives give the base the same initial velocity
#: (a sine started at t = 0 would differ there by the secant's error, (w h)^2 / 6 of A w).
AT_REST = "0.01*sin(20*max(t - 0.05, 0))"
STEP = 1e-3
#: The recorded displacement in mm, at the step times, 0.2 s beyond the run.
SHAKER_TIMES = STEP * np.arange(1201)
SHAKER_MM = 10.0 * np.sin(20.0 * np.maximum(SHAKER_TIMES - 0.05, 0.0))


def replaced(text: str, old: str, new: str) -> str:
    """``text`` with its one ``old`` replaced (a changed model fails here, not later)."""
    assert text.count(old) == 1, old
    return text.replace(old, new)


def base_excited(inputs: str = MEASURED_Z, drive: str = "z") -> str:
    """The base-excited mass with the ``[inputs]`` text ``inputs`` and the base's ``drive``."""
    return replaced(replaced(BASE_MODEL, Z_LINE, inputs), 'expression = "z"', f'expression = "{drive}"')


def single_mass(inputs: str, load: str = "u") -> str:
    """The bundled ``single_mass`` (a mass on a spring, the load ``u``) over 0.5 s in steps of
    1 ms, with the ``[inputs]`` line ``inputs`` and the load ``load``."""
    text = re.sub(r"^u = \{.*\}$", inputs, example_path("single_mass").read_text(encoding="utf-8"), count=1,
                  flags=re.M)
    text = replaced(replaced(text, 't_end = "2*pi"', "t_end = 0.5"), 'step = "2*pi/2000"', f"step = {STEP}")
    return replaced(text, 'expression = "u"', f'expression = "{load}"')


#: The recorded force: every second step, past the run's end.
FORCE_TIMES = 2 * STEP * np.arange(300)
FORCE_N = 5.0 * np.sin(30.0 * FORCE_TIMES) + 2.0 * FORCE_TIMES


def measured_force(file: str, channel: str = "force") -> str:
    return single_mass(f'u = {{ value = 0.0, unit = "N", file = "{file}", channel = "{channel}" }}')


def write_shaker(folder: Path, values_mm=SHAKER_MM) -> Path:
    return write_bench_csv(folder / "shaker.csv", SHAKER_TIMES, {"z_shaker": (values_mm, "mm")}, delimiter=";",
                           unit_row=False)


@pytest.fixture
def base_file(tmp_path) -> Path:
    write_shaker(tmp_path)
    path = tmp_path / "base.toml"
    path.write_text(base_excited(), encoding="utf-8")
    return path


def run(model):
    trajectory = NativeEngine.build(model).simulate()
    return np.asarray(trajectory.q), np.asarray(trajectory.v)


def assert_same_run(actual, expected, tolerance: float) -> None:
    for got, want in zip(actual, expected):
        scale = np.abs(want).max(axis=0)
        assert np.all(np.abs(got - want).max(axis=0) <= tolerance * scale), (np.abs(got - want).max(axis=0), scale)


# ------------------------------------------------------------------ the measured input acts --

def test_a_displacement_in_mm_drives_the_base_as_the_expression_does(base_file, tmp_path):
    """The CSV in mm is converted to the input's m and the base follows it: the run is the
    expression model's to round-off (positions and velocities of x and b, every step)."""
    model = load_model(base_file)
    (signal,) = model.signals
    assert signal.input == "z" and signal.measured
    assert signal.source == "shaker.csv: z_shaker [mm], converted to m"
    np.testing.assert_array_equal(signal.tables[0][0], SHAKER_TIMES)
    np.testing.assert_allclose(signal.tables[0][1], SHAKER_MM / 1000, rtol=EXACT, atol=0)
    reference = tmp_path / "expression.toml"
    reference.write_text(base_excited(Z_LINE, AT_REST), encoding="utf-8")
    measured, expected = run(model), run(load_model(reference))
    np.testing.assert_allclose(measured[0][:, 1], SHAKER_MM[:1001] / 1000, rtol=0, atol=EXACT)  # b follows z
    assert_same_run(measured, expected, EXACT)


def test_a_force_from_mdf4_runs_as_the_same_samples_from_csv(tmp_path):
    """asammdf writes the MDF4 file; the CSV (comma, unit row) holds the same doubles."""
    write_mdf(tmp_path / "force.mf4", FORCE_TIMES, {"force": (FORCE_N, "N")})
    write_bench_csv(tmp_path / "force.csv", FORCE_TIMES, {"force": (FORCE_N, "N")}, delimiter=",")
    runs = []
    for name in ("force.mf4", "force.csv"):
        path = tmp_path / f"{Path(name).suffix[1:]}.toml"
        path.write_text(measured_force(name), encoding="utf-8")
        model = load_model(path)
        assert model.signals[0].source == f"{name}: force [N]"
        runs.append(run(model))
    for mdf, csv in zip(*runs):
        np.testing.assert_array_equal(mdf, csv)


@pytest.mark.parametrize("fmt", ["csv-semicolon", "tsv", "mdf4", "mat-v5", "mat-v7.3", "hdf5"])
def test_every_bench_format_gives_the_same_table(tmp_path, fmt):
    channels = {"force": (FORCE_N * 1000, "mN")}
    name = {"csv-semicolon": "force.csv", "tsv": "force.tsv", "mdf4": "force.mf4", "mat-v5": "force.mat",
            "mat-v7.3": "force.mat", "hdf5": "force.h5"}[fmt]
    file = tmp_path / name
    channel = "force"
    if fmt == "csv-semicolon":
        write_bench_csv(file, FORCE_TIMES, channels)  # unit row, decimal commas
    elif fmt == "tsv":
        write_bench_csv(file, FORCE_TIMES, channels, delimiter="\t", unit_row=False)
    elif fmt == "mdf4":
        write_mdf(file, FORCE_TIMES, channels)
    elif fmt == "mat-v5":
        write_mat5(file, FORCE_TIMES, channels)
    elif fmt == "mat-v7.3":
        write_mat73(file, FORCE_TIMES, channels)
    else:
        write_hdf5(file, FORCE_TIMES, channels)
        channel = "run1/force"
    path = tmp_path / "forced.toml"
    path.write_text(measured_force(name, channel), encoding="utf-8")
    (signal,) = load_model(path).signals
    np.testing.assert_array_equal(signal.tables[0][0], FORCE_TIMES)
    np.testing.assert_allclose(signal.tables[0][1], FORCE_N, rtol=EXACT, atol=EXACT * np.abs(FORCE_N).max())
    assert signal.source.startswith(f"{name}: {channel} [mN]")


def test_between_samples_the_channel_is_interpolated_not_held(tmp_path):
    """A ramp sampled every fifth step drives the mass as the ramp written in t does (a held
    channel would be a staircase)."""
    times = 5 * STEP * np.arange(120)
    write_bench_csv(tmp_path / "ramp.csv", times, {"force": (40.0 * times, "N")}, delimiter=",")
    measured = tmp_path / "measured.toml"
    measured.write_text(measured_force("ramp.csv"), encoding="utf-8")
    reference = tmp_path / "reference.toml"
    reference.write_text(single_mass('u = { value = 0.0, unit = "N" }', "40*t"), encoding="utf-8")
    assert_same_run(run(load_model(measured)), run(load_model(reference)), EXACT)


# ------------------------------------------------------------------ the data file travels --

def test_the_data_travel_to_parallel_workers_as_bytes(tmp_path):
    """A worker parses the MDF4 file from the bytes the ModelSource carries (the file is gone
    from the disk by then); other bytes are another digest."""
    write_mdf(tmp_path / "force.mf4", FORCE_TIMES, {"force": (FORCE_N, "N")})
    path = tmp_path / "forced.toml"
    path.write_text(measured_force("force.mf4"), encoding="utf-8")
    source = ModelSource.from_path(path)
    assert dict(source.tables) == {"force.mf4": (tmp_path / "force.mf4").read_bytes()}
    worker = pickle.loads(pickle.dumps(source))
    (tmp_path / "force.mf4").unlink()
    assert worker.load().signals == source.load().signals  # the worker's parse, the parent's
    write_mdf(tmp_path / "force.mf4", FORCE_TIMES, {"force": (2 * FORCE_N, "N")})
    assert ModelSource.from_path(path).digest() != source.digest()


def test_a_warm_start_equals_the_cold_one(base_file, tmp_path):
    cache = BuildCache(tmp_path / "cache")
    cold = prepare_model(base_file, cache=cache)
    warm = prepare_model(base_file, cache=cache)
    assert not isinstance(cold, DeferredModel)
    assert isinstance(warm, DeferredModel) and not warm.lowered
    assert warm.signals == cold.signals  # the stored signal, its source included
    for got, want in zip(run(warm), run(cold)):
        np.testing.assert_array_equal(got, want)


def test_a_changed_data_file_gives_a_new_key_and_a_new_run(base_file, tmp_path):
    assert ("input data file", tmp_path / "shaker.csv") in model_file_inputs(base_file)
    cache = BuildCache(tmp_path / "cache")
    key = model_file_key(base_file)
    before = run(prepare_model(base_file, cache=cache))
    write_shaker(tmp_path, 2 * SHAKER_MM)
    assert model_file_key(base_file) not in (None, key)
    after = prepare_model(base_file, cache=cache)
    assert not isinstance(after, DeferredModel)  # not the stale warm entry
    moved = run(after)
    np.testing.assert_allclose(moved[0][:, 1], 2 * before[0][:, 1], rtol=EXACT, atol=EXACT * 0.01)


# ------------------------------------------------------------------------------ bad input --

#: (case, the model file's [inputs] entry or a change of the file, what the error names).
ERRORS = [
    ("missing file", MEASURED_Z.replace("shaker.csv", "nope.csv"), "nope.csv: file not found"),
    ("missing channel", MEASURED_Z.replace('"z_shaker"', '"z_base"'),
     "no channel 'z_base' to drive the input 'z'. Channels: z_shaker; give one of them."),
    ("incompatible unit", MEASURED_Z.replace('unit = "m"', 'unit = "N"'), "incompatible units"),
    ("only file", MEASURED_Z.replace(', channel = "z_shaker"', ""), "'file' without 'channel'; give both"),
    ("only channel", MEASURED_Z.replace(', file = "shaker.csv"', ""), "'channel' without 'file'; give both"),
    ("file not a string", MEASURED_Z.replace('"shaker.csv"', "3"), "inputs.z.file: expected a string"),
    ("outside the folder", MEASURED_Z.replace("shaker.csv", "../shaker.csv"),
     "lies outside the model file's folder"),
    ("file on a parameter", 'z = 0.0\n[parameters.k2]\nvalue = 1.0\nfile = "shaker.csv"\nchannel = "z_shaker"',
     "'k2' is a parameter; move the entry to [inputs]"),
    ("file on an output", MEASURED_Z + '\n[[outputs]]\nname = "y"\nexpression = "x"\nfile = "shaker.csv"',
     "unknown key(s) ['file']"),
    ("gap", MEASURED_Z.replace("shaker.csv", "gap.mat"), "without a finite value (the first at t = 0.5 s)"),
    ("record too short", MEASURED_Z.replace("shaker.csv", "short.csv"),
     "the table covers [0, 0.5] s but the simulation runs over [0, 1] s"),
]


@pytest.mark.parametrize("case, inputs, named", ERRORS, ids=[case for case, _, _ in ERRORS])
def test_each_bad_measured_input_is_one_error_line(tmp_path, case, inputs, named):
    folder = tmp_path / "model"
    folder.mkdir()
    write_shaker(folder)
    write_shaker(tmp_path)
    gap = SHAKER_MM.copy()
    gap[500] = np.nan
    write_mat5(folder / "gap.mat", SHAKER_TIMES, {"z_shaker": (gap, "mm")})
    half = SHAKER_TIMES <= 0.5
    write_bench_csv(folder / "short.csv", SHAKER_TIMES[half], {"z_shaker": (SHAKER_MM[half], "mm")})
    path = folder / "base.toml"
    path.write_text(base_excited(inputs), encoding="utf-8")
    code, _, err = cli(["simulate", path, "-o", tmp_path / "out.csv"])
    assert code == 2
    line = error_line(err)
    assert named in line and "--map" not in line, line


def test_the_command_line_refuses_a_missing_data_file_with_exit_code_2(tmp_path):
    """The installed command itself (a process of its own): one line on stderr, exit code 2."""
    path = tmp_path / "base.toml"
    text = base_excited()
    path.write_text(text, encoding="utf-8")
    line = text.split("\n").index(MEASURED_Z) + 1
    done = subprocess.run([sys.executable, "-m", "fmi_adjoint", "simulate", str(path), "-o", str(tmp_path / "o.csv")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr
    missing = tmp_path / "shaker.csv"
    assert done.stderr.splitlines() == [f"fmi-adjoint: error: {path} (line {line}), inputs.z: {missing}: file not "
                                        "found; give the path of a data file (CSV, MDF, MAT or HDF5)."]


def test_parse_model_without_the_data_names_the_fix(base_file):
    """A model file's text parsed with tables that lack the data file (not a ModelSource)."""
    from fmi_adjoint.model_file import parse_model

    with pytest.raises(ModelError, match="not among the tables sent with the model"):
        parse_model(base_file.read_text(encoding="utf-8"), str(base_file), base_file.parent, tables={})


# ------------------------------------------------------------------------------ FMU export --

def test_an_export_leaves_the_data_out_and_exposes_the_input(base_file, tmp_path):
    """The FMU's ``z`` is an input the importer drives; resources/ holds the model file without
    ``file`` and ``channel`` (and not the data), export.json says what was left out, and the
    trust check and the rebuild of ``apply -o`` rebuild the very binary from it."""
    from fmi_adjoint.export import export_fmu
    from fmi_adjoint.fmu.archive import open_fmu
    from fmi_adjoint.fmu.rebuild import rebuild_fmu

    fmu = export_fmu(base_file, tmp_path / "base.fmu")
    with zipfile.ZipFile(fmu) as archive:
        names = set(archive.namelist())
        embedded = archive.read("resources/model.toml").decode()
        record = json.loads(archive.read("resources/export.json"))
    assert not any(name.endswith("shaker.csv") for name in names)
    assert 'z = { value = 0.0, unit = "m" }' in embedded.splitlines()
    assert embedded.replace('z = { value = 0.0, unit = "m" }', MEASURED_Z) == base_file.read_text(encoding="utf-8")
    assert record["measured_inputs_left_out"] == [{"input": "z", "file": "shaker.csv", "channel": "z_shaker"}]
    with open_fmu(fmu) as archive:
        assert archive.variable("z", "input").causality == "input"
        assert archive.native is not None, archive.native_distrust
        rebuilt = rebuild_fmu(archive, {"k": 500.0}, tmp_path / "identified.fmu")
    with open_fmu(rebuilt.path) as archive:
        assert archive.native is not None, archive.native_distrust
        assert archive.native["measured_inputs_left_out"] == record["measured_inputs_left_out"]


@pytest.mark.parametrize("layout", ["inline, keys first", "sub-table", "dotted keys"])
def test_the_export_removes_the_keys_however_the_entry_is_written(layout):
    from fmi_adjoint.export.fmu_export import without_measured_inputs

    entry = {
        "inline, keys first": ['[inputs]', 'z = { file = "a.csv", channel = "c", value = 0.0 }  # measured'],
        "sub-table": ['[inputs.z]', 'value = 0.0', 'file = "a.csv"   # measured', "channel = 'c'"],
        "dotted keys": ['[inputs]', 'z.value = 0.0', 'z.file = "a.csv"', 'z."channel" = "c"'],
    }[layout]
    text = "\n".join(['[model]', 'name = "m"', 'file_note = "file = \\"x.csv\\""', *entry, '[[forces]]',
                      'type = "table_load"', 'file = "f.csv"', 'column = "F"', ""])
    stripped, left_out = without_measured_inputs(text)
    assert left_out == [{"input": "z", "file": "a.csv", "channel": "c"}]
    import tomllib

    doc = tomllib.loads(stripped)
    assert doc["inputs"] == {"z": {"value": 0.0}}
    assert doc["forces"][0]["file"] == "f.csv" and doc["model"]["file_note"] == 'file = "x.csv"'
