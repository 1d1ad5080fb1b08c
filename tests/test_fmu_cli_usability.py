"""Usability of the FMU commands (a new-user review): every message names a remedy that works.

* an FMU problem runs one start, so its warnings advise other start values (``--set``),
  never ``--starts`` (refused with ``--fmu``); one failing start gives its own message;
* an FMU input no ``--inputs`` column drives is held at its start value: a note says so, on
  stderr and in RESULT.json's ``warnings``;
* ``apply`` refuses a RESULT.json identified on another FMU (another guid), and notes a
  recorded FMU of another file name when the result records no guid;
* ``validate --result`` notes that the FMU validated does not carry the result's values.

The FMU is the hand-written feedthrough (y = k u + c, m = 2 n; no states) through
Co-Simulation: each run takes well under a second.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fmi_adjoint import write_csv
from fmi_adjoint.errors import IdentificationError
from fmi_adjoint.identify.guards import bound_notices, cost_notices
from fmi_adjoint.identify.multistart import result_warnings, run_starts
from fmi_adjoint.toolchain import c_compiler
from captured_cli import cli
from handwritten_fmus import build_fmu
from test_multistart import STARTS, TwoMinima

if c_compiler() is None:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: the FMUs cannot be built", allow_module_level=True)

TIMES = np.linspace(0.0, 1.0, 21)
U = np.sin(3.0 * TIMES)


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fmu_cli_usability")


@pytest.fixture(scope="module")
def fmus(work) -> dict[str, Path]:
    return {name: Path(build_fmu(name, work)) for name in ("feedthrough", "stair")}


@pytest.fixture(scope="module")
def files(work) -> dict[str, Path]:
    """u(t) alone (no column for the input n), and data y = 1.7 u + 3."""
    paths = {"inputs": work / "u.csv", "data": work / "y.csv"}
    write_csv(paths["inputs"], TIMES, {"u": U})
    write_csv(paths["data"], TIMES, {"y": 1.7 * U + 3.0})
    return paths


@pytest.fixture(scope="module")
def identified(work, fmus, files) -> tuple[Path, str]:
    """k identified within [0, 1] (the data need 1.7, with c = 3) and c fixed at 0.3: k ends on
    its bound, the fit far above the noise floor; the FMU's start values (k = 2, c = 0.5) are
    not the result's.  (RESULT.json, stderr)"""
    result = work / "result.json"
    code, _, err = cli(["identify", "--fmu", fmus["feedthrough"], "--interface", "cs", "--data", files["data"],
                        "--inputs", files["inputs"], "--params", "k", "--set", "k=0.5", "--set", "c=0.3",
                        "--bounds", "k=0:1", "--method", "least_squares", "-o", result])
    assert code in (0, 1), err
    return result, err


def _one_error(code: int, err: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fmi-adjoint: error:"), err
    return lines[0]


# ------------------------------------------------------------------ 1. advice that works --


def test_fmu_warnings_advise_start_values_not_starts(identified):
    result, err = identified
    warnings = json.loads(result.read_text())["warnings"]
    bound = [w for w in warnings if "ended on a bound" in w]
    floor = [w for w in warnings if "times the noise floor" in w]
    assert bound and floor, warnings
    for text in bound + floor:
        assert "--starts" not in text and "other start values with --set NAME=VALUE" in text, text
    assert "--starts" not in err


def test_model_file_warnings_still_advise_starts():
    problem = TwoMinima(shift=5.0)
    outcome = run_starts(problem, STARTS[:1], "least_squares", progress=None)
    texts = [n.text for n in (*bound_notices(problem, outcome.best), *cost_notices(outcome.best, 0.01))]
    assert len(texts) == 2 and all("try --starts" in t for t in texts)
    fmu_texts = [n.text for n in (*bound_notices(problem, outcome.best, starts_available=False),
                                  *cost_notices(outcome.best, 0.01, starts_available=False))]
    assert len(fmu_texts) == 2 and not any("--starts" in t for t in fmu_texts)
    assert result_warnings(outcome.best) == outcome.warnings() == []


def test_one_failing_start_gives_its_own_message():
    with pytest.raises(IdentificationError) as caught:
        run_starts(TwoMinima(fail_above=-10.0), STARTS[:1], "lbfgsb", progress=None)
    text = str(caught.value)
    assert "every start failed" not in text and "start 0" not in text
    assert not text.startswith("ConvergenceError"), text
    with pytest.raises(IdentificationError, match="every start failed: start 0: ConvergenceError"):
        run_starts(TwoMinima(fail_above=-10.0), STARTS[:2], "lbfgsb", progress=None)


# ------------------------------------------------------------------ 2. inputs held -------


def test_inputs_without_a_column_are_named_in_a_note(identified, files):
    result, err = identified
    notes = [line for line in err.splitlines() if line.startswith("fmi-adjoint: note:")]
    assert len(notes) == 1 and "no column for the input n of feedthrough.fmu" in notes[0], err
    assert files["inputs"].name in notes[0] and "held at its start value" in notes[0]
    assert notes[0].removeprefix("fmi-adjoint: note: ") in json.loads(result.read_text())["warnings"]


def test_no_inputs_file_is_named_in_a_note(work, fmus, files):
    result = work / "no_inputs.json"
    code, _, err = cli(["identify", "--fmu", fmus["feedthrough"], "--interface", "cs", "--data", files["data"],
                        "--params", "c", "--method", "least_squares", "-o", result])
    assert code in (0, 1), err
    notes = [line for line in err.splitlines() if line.startswith("fmi-adjoint: note:")]
    assert len(notes) == 1, err
    assert "inputs u, n are held at their start values" in notes[0] and "--inputs INPUTS.csv" in notes[0]
    assert any("--inputs INPUTS.csv" in w for w in json.loads(result.read_text())["warnings"])


def test_every_input_given_gives_no_note(work, fmus, files):
    both = work / "u_n.csv"
    write_csv(both, TIMES, {"u": U, "n": np.zeros_like(TIMES)})
    code, _, err = cli(["gradient", "--fmu", fmus["feedthrough"], "--interface", "cs", "--data", files["data"],
                        "--inputs", both, "--params", "c", "--json"])
    assert code == 0, err
    assert "note" not in err


# ------------------------------------------------------------------ 3. apply, another FMU --


def test_result_records_the_fmu_token(identified):
    payload = json.loads(identified[0].read_text())
    assert payload["fmu_token"] == "{92370763-976e-4c77-b39a-cbad01027d18}"  # fmus/feedthrough's guid


def test_apply_refuses_a_result_of_another_fmu(work, fmus, identified):
    output = work / "wrong.fmu"
    code, _, err = cli(["apply", identified[0], "--fmu", fmus["stair"], "-o", output])
    line = _one_error(code, err)
    assert "feedthrough.fmu" in line and "stair.fmu" in line and "guid" in line
    assert "{92370763-976e-4c77-b39a-cbad01027d18}" in line and "give --fmu the FMU the identification ran on" in line
    assert not output.exists()


def test_apply_notes_another_file_name_when_no_token_is_recorded(work, fmus, identified):
    payload = json.loads(identified[0].read_text())
    del payload["fmu_token"]
    payload["fmu"] = "elsewhere/other.fmu"
    old = work / "old_result.json"
    old.write_text(json.dumps(payload))
    code, _, err = cli(["apply", old, "--fmu", fmus["feedthrough"], "-o", work / "renamed.fmu"])
    assert code == 0, err
    notes = [line for line in err.splitlines() if "identified on 'other.fmu', not feedthrough.fmu" in line]
    assert len(notes) == 1 and notes[0].startswith("fmi-adjoint: note:"), err


# ------------------------------------------------------------------ 4. validate's values --


def test_validate_notes_an_fmu_without_the_result_values(work, fmus, files, identified):
    result = identified[0]
    code, _, err = cli(["validate", fmus["feedthrough"], "--data", files["data"], "--inputs", files["inputs"],
                        "--result", result, "-o", work / "report_original"])
    assert code == 0, err
    notes = [line for line in err.splitlines() if line.startswith("fmi-adjoint: note:")]
    # The second note: feedthrough's Co-Simulation holds u over each step (validation's held-input note).
    assert len(notes) == 2 and "k, c differ" in notes[0] and "u is held over each step" in notes[1], err
    assert f"fmi-adjoint apply {result} --fmu {fmus['feedthrough']} -o IDENTIFIED.fmu" in notes[0]
    applied = work / "identified.fmu"
    code, _, err = cli(["apply", result, "--fmu", fmus["feedthrough"], "-o", applied])
    assert code == 0, err
    code, _, err = cli(["validate", applied, "--data", files["data"], "--inputs", files["inputs"],
                        "--result", result, "-o", work / "report_applied"])
    assert code == 0, err
    # Only the held-input note (fmpy's Co-Simulation lags feedthrough's y by one step of u).
    assert "does not carry" not in err and err.count("note:") == 1 and "u is held over each step" in err
