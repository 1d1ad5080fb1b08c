"""Bad input on the command line: exit code 2, one ``fmi-adjoint: error: ...`` line naming
the problem and the fix, no traceback, and no output file left behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fmi_adjoint.cli.main import main

PREFIX = "fmi-adjoint: error: "
CONSOLE_SCRIPT = Path(sys.executable).parent / "fmi-adjoint"

# A small, fast model (100 steps) that the bad variants below are made from.
BASE_TOML = """\
[model]
name = "osc"

[simulation]
t_end = 1.0
step = 1e-2

[parameters]
m = 1.0
c = { value = 4.0, bounds = [1.0, 10.0] }

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
name = "x"
expression = "x"
"""

# A force growing like exp(1000 x) at a coarse step: the step equation
# m a = exp(1000 (x_pred + beta h^2 a)) has no solution (the exponential lies above the line),
# so Newton cannot converge in step 1.  (A stiff cubic spring is no counterexample: its step
# equation always has a root, which the Newton iteration finds.)
DIVERGING_TOML = """\
[model]
name = "stiff_cubic"

[simulation]
t_end = 1.0
step = 0.1

[parameters]
m = 1.0
k3 = 1e3
F = 1.0

[[coordinates]]
name = "x"
mass = "m"

[[forces]]
type = "load"
name = "hard_spring_and_push"
coordinate = "x"
expression = "F*exp(k3*x)"

[[outputs]]
name = "x"
expression = "x"
"""


def _replace(old: str, new: str) -> str:
    assert BASE_TOML.count(old) == 1, old
    return BASE_TOML.replace(old, new)


MODEL_FILES = {
    "base.toml": BASE_TOML,
    # line 18 gets trailing garbage after a value
    "malformed.toml": _replace('name = "spring"\n', 'name = "spring" oops\n'),
    # the [[forces]] table of the misspelt type starts on line 16
    "unknown_type.toml": _replace('type = "linear_spring_damper"', 'type = "linear_sprnig"'),
    "unknown_param.toml": _replace('stiffness = "c"', 'stiffness = "c + k_missing"'),
    "forbidden.toml": _replace(
        'expression = "sin(t)"', "expression = '__import__(\"os\").system(\"echo hi > pwned.txt\")'"
    ),
    "attribute.toml": _replace('expression = "sin(t)"', "expression = '().__class__.__bases__'"),
    "lambda.toml": _replace('expression = "sin(t)"', "expression = 'lambda: t'"),
    "diverge.toml": DIVERGING_TOML,
    # [simulation] integrator and rho_inf (line 7 is the inserted key)
    "generalized_alpha.toml": _replace("step = 1e-2\n", 'step = 1e-2\nintegrator = "generalized_alpha"\n'),
    "integrator_rk4.toml": _replace("step = 1e-2\n", 'step = 1e-2\nintegrator = "rk4"\n'),
    "integrator_number.toml": _replace("step = 1e-2\n", "step = 1e-2\nintegrator = 3\n"),
    "rho_inf_two.toml": _replace("step = 1e-2\n", 'step = 1e-2\nintegrator = "generalized_alpha"\nrho_inf = 2\n'),
}


def _samples(times_values):
    return "time,x\n" + "".join(f"{t!r},{v!r}\n" for t, v in times_values)


GOOD_ROWS = [(round(0.01 * k, 2), 1e-3 * k * k) for k in range(11)]  # lines 2..12


def _rows_with(index: int, row: str) -> str:
    lines = _samples(GOOD_ROWS).splitlines()
    lines[index] = row
    return "\n".join(lines) + "\n"


DATA_FILES = {
    "good.csv": _samples(GOOD_ROWS),
    "nan.csv": _rows_with(5, "0.04,nan"),  # line 6
    "unsorted.csv": _rows_with(5, "0.025,0.0"),  # line 6: 0.025 after 0.03
    "duplicate.csv": _rows_with(5, "0.03,0.0"),  # line 6 repeats the time of line 5
    "nonnumeric.csv": _rows_with(7, "0.06,abc"),  # line 8
    "notime.csv": _samples(GOOD_ROWS).replace("time,x", "t,x"),
    "extra.csv": _samples(GOOD_ROWS).replace("time,x", "time,y"),
}


@pytest.fixture(scope="module")
def base_fmu(tmp_path_factory) -> bytes:
    """base.toml exported as an FMU (for the options that an FMU refuses)."""
    folder = tmp_path_factory.mktemp("fmu")
    (folder / "base.toml").write_text(BASE_TOML, encoding="utf-8")
    assert main(["export", str(folder / "base.toml"), "-o", str(folder / "model.fmu")]) == 0
    return (folder / "model.fmu").read_bytes()


@pytest.fixture
def workdir(tmp_path, monkeypatch, base_fmu):
    for name, text in {**MODEL_FILES, **DATA_FILES}.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "model.fmu").write_bytes(base_fmu)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _identify(data="good.csv", *extra, model="base.toml"):
    return ["identify", model, "--data", data, "--params", "c", "-o", "result.json", *extra]


# (id, argv, output path that must not exist, words the message must contain)
CASES = [
    ("malformed_toml", ["simulate", "malformed.toml", "-o", "out.csv"], "out.csv",
     ["malformed.toml", "line 18", "malformed TOML", "Fix the syntax"]),
    ("unknown_element_type", ["simulate", "unknown_type.toml", "-o", "out.csv"], "out.csv",
     ["unknown_type.toml", "line 16", "'linear_sprnig'", "Known types", "linear_spring_damper"]),
    ("unknown_parameter_in_expression", ["simulate", "unknown_param.toml", "-o", "out.csv"], "out.csv",
     ["unknown_param.toml", "spring", "'k_missing'", "Known names"]),
    ("forbidden_call", ["simulate", "forbidden.toml", "-o", "out.csv"], "out.csv",
     ["forbidden.toml", "push", "__import__", "only plain function names"]),
    ("forbidden_attribute", ["simulate", "attribute.toml", "-o", "out.csv"], "out.csv",
     ["attribute.toml", "push", "'Attribute' is not allowed", "Only numbers"]),
    ("forbidden_lambda", ["simulate", "lambda.toml", "-o", "out.csv"], "out.csv",
     ["lambda.toml", "push", "'Lambda' is not allowed", "Only numbers"]),
    ("missing_model_file", ["simulate", "nosuch.toml", "-o", "out.csv"], "out.csv",
     ["nosuch.toml", "not found"]),
    ("unknown_model_name", ["simulate", "no_such_example", "-o", "out.csv"], "out.csv",
     ["'no_such_example'", "Examples", "sdof"]),
    ("set_unknown_parameter", ["simulate", "base.toml", "--set", "k_typo=3", "-o", "out.csv"], "out.csv",
     ["'k_typo'", "Parameters: m, c"]),
    ("set_not_a_number", ["simulate", "base.toml", "--set", "c=stiff", "-o", "out.csv"], "out.csv",
     ["--set", "'stiff'", "not a number"]),
    ("set_without_value", ["simulate", "base.toml", "--set", "c", "-o", "out.csv"], "out.csv",
     ["--set", "NAME=VALUE"]),
    ("params_unknown", _identify("good.csv", model="base.toml")[:4] + ["--params", "c,zeta", "-o", "result.json"],
     "result.json", ["'zeta'", "Parameters: m, c"]),
    ("data_nan", _identify("nan.csv"), "result.json", ["nan.csv", "line 6", "'x'", "not finite", "remove the row"]),
    ("data_unsorted", _identify("unsorted.csv"), "result.json", ["unsorted.csv", "line 6", "0.025", "sort the rows"]),
    ("data_duplicate_time", _identify("duplicate.csv"), "result.json",
     ["duplicate.csv", "line 6", "0.03", "drop duplicate times"]),
    ("data_non_numeric", _identify("nonnumeric.csv"), "result.json",
     ["nonnumeric.csv", "line 8", "'abc'", "not a number", "fix or remove"]),
    ("data_no_time_column", _identify("notime.csv"), "result.json", ["notime.csv", "'time'", "add one"]),
    ("data_unknown_column", _identify("extra.csv"), "result.json",
     ["extra.csv", "'y'", "matches no output", "Outputs: x", "Rename or drop"]),
    ("data_missing_file", _identify("missing.csv"), "result.json", ["missing.csv", "not found"]),
    ("data_unknown_setting", _identify("good.csv@F0=2"), "result.json", ["'F0'", "Parameters: m, c"]),
    ("weight_unknown_channel", _identify("good.csv", "--weight", "zz=2"), "result.json",
     ["--weight/--scale", "'zz'", "good.csv"]),
    ("newton_divergence", ["simulate", "diverge.toml", "-o", "out.csv"], "out.csv",
     ["stiff_cubic", "Newton did not converge", "t = 0.1 s", "step 1 of 10", "a different step (--step"]),
    ("bounds_syntax", _identify("good.csv", "--bounds", "c=1-5"), "result.json", ["'c=1-5'", "NAME=LO:HI"]),
    ("bounds_reversed", _identify("good.csv", "--bounds", "c=5:1"), "result.json",
     ["'c=5:1'", "lower bound must be below"]),
    ("bounds_not_identified", _identify("good.csv", "--bounds", "m=0.5:2"), "result.json",
     ["'m'", "not identified", "--params"]),
    ("start_outside_bounds", _identify("good.csv", "--bounds", "c=5:6"), "result.json",
     ["'c' = 4", "outside its bounds [5, 6]", "--set", "--bounds"]),
    ("alpha_positive", ["simulate", "base.toml", "--alpha", "0.2", "-o", "out.csv"], "out.csv",
     ["alpha = 0.2", "[-1/3, 0]"]),
    ("alpha_too_negative", ["simulate", "base.toml", "--alpha", "-0.5", "-o", "out.csv"], "out.csv",
     ["alpha = -0.5", "[-1/3, 0]"]),
    ("alpha_in_identify", _identify("good.csv", "--alpha", "-0.4"), "result.json", ["alpha = -0.4", "[-1/3, 0]"]),
    ("negative_step", ["simulate", "base.toml", "--step", "-0.01", "-o", "out.csv"], "out.csv",
     ["--step", "positive"]),
    # generalized-alpha (Arnold & Brüls 2007): rho_inf in [0, 1], each scheme with its own constant
    ("rho_inf_above_one", ["simulate", "base.toml", "--integrator", "generalized_alpha", "--rho-inf", "1.5", "-o",
                           "out.csv"], "out.csv", ["rho_inf = 1.5", "outside [0, 1]"]),
    ("rho_inf_negative", ["simulate", "base.toml", "--integrator", "generalized_alpha", "--rho-inf", "-0.1", "-o",
                          "out.csv"], "out.csv", ["rho_inf = -0.1", "outside [0, 1]"]),
    ("rho_inf_in_identify", _identify("good.csv", "--integrator", "generalized_alpha", "--rho-inf", "1.5"),
     "result.json", ["rho_inf = 1.5", "outside [0, 1]"]),
    ("alpha_with_generalized_alpha", ["simulate", "base.toml", "--alpha", "-0.1", "--integrator", "generalized_alpha",
                                      "-o", "out.csv"], "out.csv", ["--alpha", "HHT", "--rho-inf in [0, 1]"]),
    ("alpha_on_a_generalized_alpha_model", ["simulate", "generalized_alpha.toml", "--alpha", "-0.1", "-o", "out.csv"],
     "out.csv", ["--alpha", "HHT", "--rho-inf in [0, 1]"]),
    ("rho_inf_on_an_hht_model", ["simulate", "base.toml", "--rho-inf", "0.5", "-o", "out.csv"], "out.csv",
     ["--rho-inf", "generalized-alpha", "add --integrator generalized_alpha", "--alpha in [-1/3, 0]"]),
    ("rho_inf_on_an_hht_model_in_gradient", ["gradient", "base.toml", "--data", "good.csv", "--params", "c",
                                             "--rho-inf", "0.5"], "out.csv",
     ["--rho-inf", "add --integrator generalized_alpha"]),
    ("rho_inf_on_an_hht_model_in_export", ["export", "base.toml", "--rho-inf", "0.5", "-o", "out.fmu"], "out.fmu",
     ["--rho-inf", "add --integrator generalized_alpha"]),
    ("integrator_unknown", ["simulate", "base.toml", "--integrator", "rk4", "-o", "out.csv"], "out.csv",
     ["--integrator", "'rk4'", "'hht'", "'generalized_alpha'"]),
    ("model_integrator_unknown", ["simulate", "integrator_rk4.toml", "-o", "out.csv"], "out.csv",
     ["integrator_rk4.toml", "simulation.integrator = 'rk4'", '"hht"', '"generalized_alpha"']),
    ("model_integrator_not_a_string", ["simulate", "integrator_number.toml", "-o", "out.csv"], "out.csv",
     ["integrator_number.toml", "line 7", "simulation.integrator", '"hht"', '"generalized_alpha"']),
    ("model_rho_inf_out_of_range", ["simulate", "rho_inf_two.toml", "-o", "out.csv"], "out.csv",
     ["rho_inf_two.toml", "simulation.rho_inf = 2", "outside [0, 1]"]),
    ("integrator_with_fmu", ["identify", "--fmu", "model.fmu", "--data", "good.csv", "--params", "c", "--integrator",
                             "generalized_alpha", "-o", "result.json"], "result.json",
     ["--integrator", "model files", "FMU brings its own solver settings"]),
    ("rho_inf_with_fmu", ["gradient", "--fmu", "model.fmu", "--data", "good.csv", "--params", "c", "--rho-inf", "0.5"],
     "out.csv", ["--rho-inf", "model files", "FMU brings its own solver settings"]),
    ("output_folder_missing", ["simulate", "base.toml", "-o", "nodir/out.csv"], "nodir/out.csv",
     ["nodir/out.csv", "'nodir' does not exist", "create it"]),
]
CASE_IDS = [case[0] for case in CASES]


def _check_error(code, stdout, stderr, words, output, folder):
    assert code == 2, (code, stdout, stderr)
    assert "Traceback" not in stderr and "Traceback" not in stdout
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    line = lines[0]
    assert line.startswith(PREFIX), line
    for word in words:
        assert word in line, (word, line)
    assert not (folder / output).exists()
    leftovers = [p for p in folder.rglob("*") if p.name.endswith(".part") or p.name in ("out.csv", "result.json")]
    assert leftovers == []
    assert not (folder / "pwned.txt").exists()
    assert "hi" not in stdout.split()


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_bad_input_in_process(case, workdir, capsys):
    _, argv, output, words = case
    before = sorted(p.name for p in workdir.iterdir())
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's usage errors (--integrator rk4) exit from parse_args
        code = exc.code
    captured = capsys.readouterr()
    _check_error(code, captured.out, captured.err, words, output, workdir)
    assert sorted(p.name for p in workdir.iterdir()) == before


@pytest.mark.slow  # whole-process runs
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_bad_input_subprocess(case, workdir):
    """The same through ``python -m fmi_adjoint``: real exit code, no traceback."""
    _, argv, output, words = case
    proc = subprocess.run(
        [sys.executable, "-m", "fmi_adjoint", *argv], cwd=workdir, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    )
    _check_error(proc.returncode, proc.stdout, proc.stderr, words, output, workdir)


@pytest.mark.parametrize("case_id", ["malformed_toml", "data_nan", "newton_divergence"])
def test_bad_input_console_script(case_id, workdir):
    """The installed ``fmi-adjoint`` console script exits with 2 too."""
    assert CONSOLE_SCRIPT.exists(), CONSOLE_SCRIPT
    _, argv, output, words = CASES[CASE_IDS.index(case_id)]
    proc = subprocess.run([str(CONSOLE_SCRIPT), *argv], cwd=workdir, capture_output=True, text=True, timeout=120)
    _check_error(proc.returncode, proc.stdout, proc.stderr, words, output, workdir)


def test_malformed_toml_line_is_the_broken_line():
    lines = MODEL_FILES["malformed.toml"].splitlines()
    assert lines[17] == 'name = "spring" oops'
    assert lines[15] == "[[forces]]" and "linear_sprnig" in MODEL_FILES["unknown_type.toml"].splitlines()[16]
    assert DATA_FILES["nan.csv"].splitlines()[5] == "0.04,nan"
    assert DATA_FILES["nonnumeric.csv"].splitlines()[7] == "0.06,abc"


def test_existing_output_survives_a_failed_run(workdir, capsys):
    """A failure after the output was named keeps an older file of that name unchanged."""
    (workdir / "keep.csv").write_text("old\n")
    code = main(["simulate", "diverge.toml", "-o", "keep.csv"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(PREFIX)
    assert (workdir / "keep.csv").read_text() == "old\n"
    assert not [p for p in workdir.iterdir() if p.name.endswith(".part")]


def test_identify_output_folder_missing(workdir, capsys):
    """identify reports the unwritable result file with one error line after its progress lines."""
    noisy = "time,x\n" + "".join(f"{0.01 * k!r},{1e-3 * k * k + (-1) ** k * 1e-4!r}\n" for k in range(101))
    (workdir / "noisy.csv").write_text(noisy)
    code = main(["identify", "base.toml", "--data", "noisy.csv", "--params", "c", "-o", "nodir/result.json"])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("fmi-adjoint:")]
    assert len(errors) == 1 and errors[0].startswith(PREFIX)
    assert "nodir/result.json" in errors[0] and "does not exist" in errors[0]
    assert all(re.match(r"iter\s+\d+", line) for line in err.splitlines() if line not in errors)
    assert not (workdir / "nodir").exists()
    assert not [p for p in workdir.iterdir() if p.name.endswith(".part")]


def test_usage_errors_exit_2_without_traceback(workdir):
    """argparse errors (unknown command, missing --data) also exit with 2."""
    for argv in (["frobnicate"], ["gradient", "base.toml", "--params", "c"],
                 ["identify", "base.toml", "--method", "x"]):
        proc = subprocess.run([sys.executable, "-m", "fmi_adjoint", *argv], cwd=workdir, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 2, argv
        assert "Traceback" not in proc.stderr
        assert "fmi-adjoint" in proc.stderr and "error:" in proc.stderr
