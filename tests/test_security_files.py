"""Issue 10, the file, data and command-line findings (5, 7, 8, 9, 10): what a model file,
a data file or an argument may make the tool read, write, allocate or print.

Every bad input ends with exit code 2 and one ``fmi-adjoint: error: ...`` line, without a
traceback, without touching the inputs, and without echoing a file's content.  Cases that
hung the old code run in a subprocess with a generous timeout (a hang guard, not a timing
assertion).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fmi_adjoint.cli.main import main
from fmi_adjoint.costs import FourierCoefficients
from fmi_adjoint.costs.fourier import MAX_MATRIX_ENTRIES
from fmi_adjoint.data import MAX_COLUMNS, read_csv, write_csv
from fmi_adjoint.errors import DataError, ModelError, OutputFileError
from fmi_adjoint.files import read_regular
from fmi_adjoint.fmu.archive import FmuError
from fmi_adjoint.fmu.handback import read_result_parameters
from fmi_adjoint.model_file import load_model

PREFIX = "fmi-adjoint: error: "
CONSOLE_SCRIPT = Path(sys.executable).parent / "fmi-adjoint"
#: Longest a subprocess may run before the test counts it as hung.
HANG_GUARD = 120

MODEL = """\
[model]
name = "osc"

[simulation]
t_end = 1.0
step = 0.05

[parameters]
m = 1.0
c = {{ value = 4.0, bounds = [1.0, 10.0] }}

[[coordinates]]
name = "x"
mass = "m"

[[forces]]
type = "linear_spring_damper"
name = "spring"
coordinates = ["x"]
stiffness = "c"

[[forces]]
type = "load"
name = "push"
coordinate = "x"
expression = "sin(t)"

[[outputs]]
name = "{output}"
expression = "x"
"""

TABLE_MODEL = """\
[model]
name = "shaken"

[simulation]
t_end = 1.0
step = 0.05

[parameters]
m = 1.0

[[coordinates]]
name = "x"
mass = "m"

[[forces]]
type = "table_load"
name = "shaker"
coordinate = "x"
file = "{file}"
column = "F"

[[outputs]]
name = "x"
expression = "x"
"""

TABLE = "time,F\n0.0,0.0\n0.5,1.0\n1.0,0.0\n"
SECRET = "SECRET-TOKEN-do-not-print-0123456789abcdef"


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A folder with the model, a data file and an outside folder with a 'secret' table."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.toml").write_text(MODEL.format(output="x"), encoding="utf-8")
    rows = "\n".join(f"{float(t)!r},{np.sin(t) / 4:.6f}" for t in np.arange(21) * 0.05)
    (tmp_path / "data.csv").write_text(f"time,x\n{rows}\n", encoding="utf-8")
    (tmp_path / "models").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "force.csv").write_text(TABLE, encoding="utf-8")
    (tmp_path / "outside" / "secret.txt").write_text(SECRET + "\n" + SECRET + "\n", encoding="utf-8")
    return tmp_path


def run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_error(code, err, *words):
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(PREFIX), err
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def run_process(argv, cwd):
    """The console script in a real process (for inputs that hung the old code)."""
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.run([str(CONSOLE_SCRIPT), *map(str, argv)], cwd=cwd, capture_output=True, text=True,
                          timeout=HANG_GUARD, env=env)
    return proc.returncode, proc.stdout, proc.stderr


def table_model(folder: Path, file: str) -> Path:
    path = folder / "models" / "shaken.toml"
    path.write_text(TABLE_MODEL.format(file=file), encoding="utf-8")
    return path


# -- finding 5: table_load reads only files next to the model; messages echo no content --------------------


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlink"])
def test_table_outside_the_model_folder_is_refused(workdir, kind):
    """Finding 5: `table_load` read any file (``../``, absolute paths, symlinks out of the folder)."""
    target = workdir / "outside" / "force.csv"
    if kind == "dotdot":
        file = "../outside/force.csv"
    elif kind == "absolute":
        file = str(target)
    else:
        (workdir / "models" / "link.csv").symlink_to(target)
        file = "link.csv"
    with pytest.raises(ModelError) as info:
        load_model(table_model(workdir, file))
    message = str(info.value)
    assert "outside the model file's folder" in message and "--allow-external-tables" in message
    assert "forces[0].file" in message


def test_table_outside_the_folder_is_refused_on_the_command_line(workdir, capsys):
    """Finding 5: `simulate` of a model whose table is the first line of another file names
    no content of that file, and refuses before reading it."""
    model = table_model(workdir, "../outside/secret.txt")
    code, out, err = run(["simulate", model, "-o", "out.csv"], capsys)
    line = assert_one_error(code, err, "outside the model file's folder", "--allow-external-tables")
    assert SECRET not in line and "SECRET" not in out
    assert not (workdir / "out.csv").exists()


def test_allow_external_tables_reads_them(workdir, capsys):
    """Finding 5: the opt-in ``--allow-external-tables`` (and ``allow_external_tables=True``)."""
    model = table_model(workdir, "../outside/force.csv")
    loaded = load_model(model, allow_external_tables=True)
    assert loaded.forces[0].values == (0.0, 1.0, 0.0)
    code, _, err = run(["simulate", model, "--engine", "python", "--allow-external-tables", "-o", "out.csv"], capsys)
    assert code == 0, err
    assert read_csv(workdir / "out.csv").columns == ("x",)


def test_table_inside_the_folder_still_works(workdir, capsys):
    (workdir / "models" / "force.csv").write_text(TABLE, encoding="utf-8")
    (workdir / "models" / "sub").mkdir()
    (workdir / "models" / "sub" / "force.csv").write_text(TABLE, encoding="utf-8")
    for file in ("force.csv", "sub/force.csv", "sub/../force.csv"):
        assert load_model(table_model(workdir, file)).forces[0].times == (0.0, 0.5, 1.0)


def test_errors_do_not_echo_the_content_of_a_table_file(workdir):
    """Finding 5: the first line of the table file was echoed ("the header [...] has no
    'time' column"); a bad cell is shown only as a capped excerpt."""
    (workdir / "models" / "secret.csv").write_text(SECRET + "\n" + SECRET + "\n", encoding="utf-8")
    with pytest.raises(ModelError) as info:
        load_model(table_model(workdir, "secret.csv"))
    assert "no 'time' column" in str(info.value)
    assert "SECRET" not in str(info.value)
    long_cell = "A" * 30 + SECRET
    (workdir / "models" / "cell.csv").write_text(f"time,F\n0,1\n1,{long_cell}\n", encoding="utf-8")
    with pytest.raises(ModelError) as info:
        load_model(table_model(workdir, "cell.csv"))
    message = str(info.value)
    assert "line 3" in message and "'F'" in message and "not a number" in message
    assert SECRET[:12] not in message, message


# -- finding 7: -o never names an input, and only replaces regular files -----------------------------------


def test_simulate_output_onto_the_model_file_is_refused(workdir, capsys):
    """Finding 7: `simulate -o MODEL` destroyed the model file."""
    before = (workdir / "model.toml").read_bytes()
    code, _, err = run(["simulate", "model.toml", "--engine", "python", "-o", "./model.toml"], capsys)
    assert_one_error(code, err, "model file", "overwrite the input")
    assert (workdir / "model.toml").read_bytes() == before


def test_simulate_output_onto_a_table_file_is_refused(workdir, capsys):
    """Finding 7: the table files of the model are inputs too."""
    (workdir / "models" / "force.csv").write_text(TABLE, encoding="utf-8")
    model = table_model(workdir, "force.csv")
    code, _, err = run(["simulate", model, "--engine", "python", "-o", workdir / "models" / "force.csv"], capsys)
    assert_one_error(code, err, "table file")
    assert (workdir / "models" / "force.csv").read_text(encoding="utf-8") == TABLE


@pytest.mark.parametrize("link", ["same", "hard link"])
def test_identify_output_onto_the_data_file_is_refused(workdir, capsys, link):
    """Finding 7: `identify -o DATA` destroyed the data (also through a hard link)."""
    before = (workdir / "data.csv").read_bytes()
    output = "data.csv"
    if link == "hard link":
        os.link(workdir / "data.csv", workdir / "alias.csv")
        output = "alias.csv"
    code, _, err = run(["identify", "model.toml", "--data", "data.csv", "--params", "c", "-o", output], capsys)
    assert_one_error(code, err, "data file", "overwrite the input")
    assert (workdir / "data.csv").read_bytes() == before


def test_identify_plot_onto_the_result_is_refused(workdir, capsys):
    """Finding 7: two outputs of one command on the same path overwrite each other."""
    code, _, err = run(["identify", "model.toml", "--data", "data.csv", "--params", "c", "-o", "r.json",
                        "--plot", "r.json"], capsys)
    assert_one_error(code, err, "-o and --plot both name 'r.json'")


def test_export_output_onto_the_model_file_is_refused(workdir, capsys):
    """Finding 7: `export -o MODEL` destroyed the model file."""
    before = (workdir / "model.toml").read_bytes()
    code, _, err = run(["export", "model.toml", "-o", "model.toml"], capsys)
    assert_one_error(code, err, "model file")
    assert (workdir / "model.toml").read_bytes() == before


def test_apply_output_onto_an_input_is_refused(workdir, capsys):
    """Finding 7: `apply` refused only -o = FMU by its literal path, not the RESULT.json."""
    result = workdir / "result.json"
    result.write_text(json.dumps({"parameters": {"c": 2.0}}), encoding="utf-8")
    code, _, err = run(["apply", result, "--fmu", "missing.fmu", "-o", "./result.json"], capsys)
    assert_one_error(code, err, "RESULT.json", "overwrite the input")
    code, _, err = run(["apply", result, "--fmu", "missing.fmu", "--ssv", result], capsys)
    assert_one_error(code, err, "--ssv", "RESULT.json")
    assert json.loads(result.read_text(encoding="utf-8")) == {"parameters": {"c": 2.0}}


def test_validate_report_folder_must_not_be_or_hold_an_input(workdir, capsys):
    """Finding 7: `validate -o` is a folder; a data file as -o, or a report file that is an
    input, is refused before the FMU is opened."""
    code, _, err = run(["validate", "missing.fmu", "--data", "data.csv", "-o", "data.csv"], capsys)
    assert_one_error(code, err, "not a folder")
    (workdir / "report").mkdir()
    (workdir / "report" / "report.json").write_text("time,x\n0,0\n1,1\n", encoding="utf-8")
    code, _, err = run(["validate", "missing.fmu", "--data", "report/report.json", "-o", "report"], capsys)
    assert_one_error(code, err, "report file", "data file")


@pytest.mark.parametrize("kind", ["fifo", "symlink", "dangling symlink"])
def test_output_that_is_not_a_regular_file_is_refused(workdir, capsys, kind):
    """Finding 7: -o onto a symlink, FIFO or device node replaced it with a regular file."""
    target = workdir / "out.csv"
    keep = workdir / "keep.csv"
    keep.write_text("kept\n", encoding="utf-8")
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink":
        target.symlink_to(keep)
    else:
        target.symlink_to(workdir / "nowhere.csv")
    with pytest.raises(OutputFileError, match="regular file"):
        write_csv(target, np.array([0.0, 1.0]), {"x": np.array([1.0, 2.0])})
    code, _, err = run(["simulate", "model.toml", "--engine", "python", "-o", target], capsys)
    assert_one_error(code, err, "regular file")
    mode = os.lstat(target).st_mode
    assert stat.S_ISFIFO(mode) if kind == "fifo" else stat.S_ISLNK(mode)
    assert keep.read_text(encoding="utf-8") == "kept\n"
    assert not (workdir / "nowhere.csv").exists()


# -- finding 8: no hang, no unbounded memory before the checks ---------------------------------------------


def test_csv_with_too_many_columns_is_refused_at_the_header(tmp_path):
    """Finding 8: a CSV of 100 000 columns ran for minutes (quadratic duplicate check); now a
    column limit is checked first, and the header check is linear."""
    columns = MAX_COLUMNS * 2
    header = "time," + ",".join(f"c{k}" for k in range(columns))
    path = tmp_path / "wide.csv"
    path.write_text(header + "\n" + ",".join(["0"] * (columns + 1)) + "\n" + ",".join(["1"] * (columns + 1)) + "\n")
    with pytest.raises(DataError, match=rf"{columns + 1} columns, more than the limit of {MAX_COLUMNS}"):
        read_csv(path)


def test_repeated_header_names_are_named(tmp_path):
    path = tmp_path / "dupes.csv"
    path.write_text("time,a,b,a\n0,1,2,3\n1,1,2,3\n")
    with pytest.raises(DataError, match=r"line 1: header names must be unique.*'a'"):
        read_csv(path)


def test_fifo_as_data_is_refused_without_hanging(workdir):
    """Finding 8: a FIFO given as --data hung (the header sniffing opened it)."""
    os.mkfifo(workdir / "pipe.csv")
    code, out, err = run_process(["gradient", "model.toml", "--data", "pipe.csv", "--params", "c"], workdir)
    assert_one_error(code, err, "pipe.csv", "FIFO", "not a regular file")


def test_fifo_as_result_json_is_refused_without_hanging(workdir):
    """Finding 8: `apply` on a FIFO as RESULT.json hung in read_text."""
    os.mkfifo(workdir / "result.json")
    code, out, err = run_process(["apply", "result.json", "--fmu", "missing.fmu", "--ssv", "out.ssv"], workdir)
    assert_one_error(code, err, "result.json", "FIFO")
    assert not (workdir / "out.ssv").exists()


def test_fifo_as_model_or_table_file_is_refused(workdir):
    """Finding 8: FIFOs and devices are refused by type, before opening."""
    os.mkfifo(workdir / "models" / "pipe.csv")
    with pytest.raises(ModelError, match="FIFO, not a regular file"):
        load_model(table_model(workdir, "pipe.csv"))
    os.mkfifo(workdir / "pipe.toml")
    with pytest.raises(ModelError, match="FIFO, not a regular file"):
        load_model(workdir / "pipe.toml")


def test_reading_stops_at_the_limit(tmp_path):
    """Finding 8: files were read whole before the size limit was applied; the bounded
    reader never returns (or reads) more than the limit."""
    path = tmp_path / "big.csv"
    path.write_bytes(b"x" * 1000)
    with pytest.raises(DataError, match="larger than 999 bytes"):
        read_regular(path, 999, "a CSV file", DataError)
    assert read_regular(path, 1000, "a CSV file", DataError) == b"x" * 1000


def series_args(workdir):
    return ["gradient", "model.toml", "--data", "data.csv", "--params", "c", "--cost", "fourier", "--channel", "x"]


@pytest.mark.parametrize("band", ["0:1e9", "0:1e300", "20:30"])
def test_band_above_the_nyquist_frequency_is_refused(workdir, capsys, band):
    """Findings 8 and 9: `--band 0:1e9` allocated 16 GB, `--band 0:1e300` gave a traceback;
    the band is bounded by the Nyquist frequency of the samples (here 10 Hz) first."""
    code, _, err = run([*series_args(workdir), "--band", band], capsys)
    assert_one_error(code, err, f"--band {band.split(':')[0]}", "Nyquist frequency 10 Hz", "HI <= 10")


def test_frequencies_above_the_nyquist_frequency_are_refused(workdir, capsys):
    code, _, err = run([*series_args(workdir), "--frequencies", "1,50"], capsys)
    assert_one_error(code, err, "--frequencies", "50 Hz", "Nyquist")


def test_coefficient_matrices_are_bounded_before_allocating():
    """Finding 8: frequencies x samples is checked against a limit before the two matrices
    are allocated, with a message naming what is too large (not "use a larger step")."""
    samples = 2**12
    frequencies = MAX_MATRIX_ENTRIES // samples + 1
    with pytest.raises(DataError, match=rf"{frequencies} frequencies x {samples} samples.*fewer frequencies"):
        FourierCoefficients(np.linspace(0.0, 1.0, samples), np.linspace(0.0, 100.0, frequencies))


# -- finding 9: tracebacks of extreme numbers ----------------------------------------------------------------


@pytest.mark.parametrize("option, words", [
    (["--t-end", "inf"], ["--t-end inf", "finite positive"]),
    (["--t-end", "1e300"], ["--t-end 1e+300", "steps, more than the limit", "larger --step"]),
    (["--step", "1e-300"], ["--step 1e-300", "steps, more than the limit"]),
    (["--step", "nan"], ["--step nan", "finite positive"]),
])
def test_simulate_refuses_extreme_time_spans(workdir, capsys, option, words):
    """Finding 9: `simulate --t-end inf|1e300`, `--step 1e-300` gave tracebacks (identify
    refused them); one shared check with a maximum number of steps."""
    code, _, err = run(["simulate", "model.toml", *option, "-o", "out.csv"], capsys)
    assert_one_error(code, err, *words)
    assert not (workdir / "out.csv").exists()


def test_simulate_refuses_an_extreme_time_span_from_the_model_file(workdir, capsys):
    (workdir / "long.toml").write_text(MODEL.format(output="x").replace("t_end = 1.0", "t_end = 1e300"))
    code, _, err = run(["simulate", "long.toml", "-o", "out.csv"], capsys)
    assert_one_error(code, err, "steps, more than the limit")


@pytest.mark.parametrize("text, words", [
    ('{"parameters": {"c": 1' + "0" * 400 + "}}", ["parameter 'c'", "expected a finite number"]),
    ("[" * 200_000 + "]" * 200_000, ["nested too deeply"]),
    ('{"parameters": ' + '{"c": ' * 200_000 + "1" + "}" * 200_001, ["nested too deeply"]),
])
def test_result_json_extremes_give_one_error(tmp_path, text, words):
    """Finding 9: an integer too large for a float and deeply nested JSON in RESULT.json
    gave tracebacks (OverflowError, RecursionError)."""
    path = tmp_path / "result.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FmuError) as info:
        read_result_parameters(path)
    for word in words:
        assert word in str(info.value)
    assert len(str(info.value)) < 300


def test_apply_with_a_huge_integer_gives_one_error_line(workdir, capsys):
    (workdir / "result.json").write_text('{"parameters": {"c": 1' + "0" * 400 + "}}", encoding="utf-8")
    code, _, err = run(["apply", "result.json", "--fmu", "missing.fmu", "--ssv", "out.ssv"], capsys)
    assert_one_error(code, err, "expected a finite number")


# -- finding 10: bad input accepted ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["-1", "0"])
def test_max_iter_below_one_is_refused(workdir, capsys, value):
    """Finding 10: `--max-iter -1` was accepted."""
    code, _, err = run(["identify", "model.toml", "--data", "data.csv", "--params", "c", "--max-iter", value,
                        "-o", "r.json"], capsys)
    assert_one_error(code, err, f"--max-iter {value}", "at least 1")
    assert not (workdir / "r.json").exists()


@pytest.mark.parametrize("cell", ["1_0.0", "\u0661\u0662", "\uff11.\uff15", "\u00a01.5", "1.5\u2003", "٣.٥"])
def test_csv_cells_are_plain_ascii_decimals(tmp_path, cell):
    """Finding 10: `1_0.0`, Arabic-Indic and other non-ASCII digits and Unicode blanks were
    accepted as numbers by float()."""
    path = tmp_path / "cells.csv"
    path.write_text(f"time,x\n0,1\n1,{cell}\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"line 3, column 'x': .* is not a number"):
        read_csv(path)


def test_plain_decimals_are_still_read(tmp_path):
    path = tmp_path / "ok.csv"
    path.write_text("time, x\n0, 1\n 1 ,-2.5e-3\n2,.5\n3,+7.\n", encoding="utf-8")
    assert read_csv(path).values[:, 0].tolist() == [1.0, -2.5e-3, 0.5, 7.0]


def test_set_values_are_plain_ascii_decimals(workdir, capsys):
    """Finding 10: `--set c=1_0` was read as 10."""
    code, _, err = run(["simulate", "model.toml", "--set", "c=1_0", "-o", "out.csv"], capsys)
    assert_one_error(code, err, "'1_0' is not a number")


def test_an_output_named_time_writes_no_csv(workdir, capsys):
    """Finding 10: an output named `time` wrote a CSV that read_csv then rejected."""
    with pytest.raises(DataError, match="'time'"):
        write_csv(workdir / "t.csv", np.array([0.0, 1.0]), {"time": np.array([1.0, 2.0])})
    assert not (workdir / "t.csv").exists()
    (workdir / "timed.toml").write_text(MODEL.format(output="time"), encoding="utf-8")
    code, out, err = run(["simulate", "timed.toml", "--engine", "python", "-o", "out.csv"], capsys)
    assert_one_error(code, err, "'time'")
    assert not (workdir / "out.csv").exists()
    code, out, err = run(["simulate", "timed.toml", "--engine", "python"], capsys)
    assert_one_error(code, err, "'time'")
    assert out == ""


def test_output_name_ending_in_a_slash_is_refused(tmp_path, capsys):
    """Red-team follow-up: `-o out.csv/` wrote the file out.csv (Path drops the slash)."""
    model = tmp_path / "m.toml"
    model.write_text(MODEL.format(output="x"))
    code = main(["simulate", str(model), "--engine", "python", "-o", f"{tmp_path / 'out.csv'}/"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "names a folder" in err, err
    assert not (tmp_path / "out.csv").exists()


def test_model_sections_are_bounded(tmp_path, capsys):
    """Red-team follow-up: a 60 KB model of 300+ coordinates ran for minutes; sections have limits."""
    model = tmp_path / "big.toml"
    text = MODEL.format(output="x") + "".join(f'\n[[coordinates]]\nname = "y{k}"\nmass = 1.0\n' for k in range(5001))
    model.write_text(text)
    code = main(["simulate", str(model), "--engine", "python"])
    err = capsys.readouterr().err
    assert code == 2 and "coordinates: 5002 entries; the limit is 5000" in err, err
