"""The HTML reports in a real browser (issue 27): the demo's, a multi-experiment multi-start
identification's (``identify --report``), a design's (``design --report``) and an FMU
validation's (``validate --report``), each opened in headless Chromium (tests/browser.py): it
renders, logs no console error or warning, requests nothing but itself, and every plot has
data; the screenshot is kept in the test's tmp_path (its path is printed).  Also: the design
and validation reports show their JSON files' numbers, their output files are checked like
``--plot``'s before any work, and a failure leaves no report behind.

Each command runs once per module (the demo once per test run, shared through ``run_once``).
"""

from __future__ import annotations

import html.parser
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from browser import Browser, require_browser
from captured_cli import cli

from fmi_adjoint import compile_model, load_model, simulate
from fmi_adjoint.data import write_csv
from fmi_adjoint.errors import OutputFileError
from fmi_adjoint.examples import example_path

pytestmark = pytest.mark.slow

T_END = 0.4
STEP = 1e-3
TRUE = {"c2": 1200.0, "d2": 1.5}
FORCES = (5.0, 8.0)
NOISE = 1e-3  # relative to each channel's RMS, so that the residuals are noise, not round-off

DESIGN = ["design", "two_mass", "--input", "F", "--params", "c2,d2", "--knots", "6", "--bounds", "F=-10:10",
          "--end", "x2=0", "--noise", "x2=1e-4", "--t-end", "0.5", "--max-iterations", "4", "--starts", "2"]


@pytest.fixture(scope="module")
def browser():
    require_browser()
    with Browser() as opened:
        yield opened


@pytest.fixture(scope="module")
def demo(run_once, tmp_path_factory) -> Path:
    """The demo's output folder: under xdist one demo run per test run, shared through
    ``run_once`` (key "demo", folder ``demo-output`` next to the workers' temporary folders);
    without xdist a run of its own (run_once's folder then outlives the test run)."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        folder = tmp_path_factory.mktemp("demo")
        code, _, err = cli(["demo", "-o", folder])
        assert code == 0, err
        return folder
    folder = tmp_path_factory.getbasetemp().parent / "demo-output"

    def run() -> dict:
        code, _, err = cli(["demo", "-o", folder])
        return {"code": code, "err": err}

    outcome = run_once("demo", run)
    assert outcome["code"] == 0, outcome["err"]
    return folder


@pytest.fixture(scope="module")
def two_sweeps(tmp_path_factory) -> list[Path]:
    """Two noisy experiments of two_mass (F = 5 N and 8 N; x2, v1, v2 measured)."""
    model = compile_model(load_model(example_path("two_mass")))
    rng = np.random.default_rng(27)
    folder = tmp_path_factory.mktemp("sweeps")
    files = []
    for force in FORCES:
        trajectory = simulate(model, model.parameter_vector({**TRUE, "F": force}), t_end=T_END, step=STEP)
        Y = trajectory.outputs()
        noisy = Y + NOISE * np.sqrt(np.mean(Y**2, axis=0)) * rng.standard_normal(Y.shape)
        path = folder / f"push_{force:g}N.csv"
        write_csv(path, trajectory.t, {name: noisy[:, k] for k, name in enumerate(model.output_names)})
        files.append(path)
    return files


@pytest.fixture(scope="module")
def fit(two_sweeps, tmp_path_factory) -> dict:
    """identify --report from both experiments with two starts (a few iterations each)."""
    folder = tmp_path_factory.mktemp("fit")
    files = {"report": folder / "fit_report.html", "result": folder / "RESULT.json"}
    data = [f"--data={path}@F={force!r}" for path, force in zip(two_sweeps, FORCES)]
    code, _, err = cli(["identify", "two_mass", *data,
                        "--params", "c2,d2", "--bounds", "c2=500:3000", "--bounds", "d2=0.5:5", "--t-end", T_END,
                        "--step", STEP, "--starts", "2", "--max-iter", "8", "--scale", "x2=1e-6", "--scale", "v1=1e-4",
                        "--scale", "v2=1e-4", "--report", files["report"], "-o", files["result"]])
    assert code in (0, 1), err
    return files


@pytest.fixture(scope="module")
def design(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("design")
    files = {"report": folder / "design_report.html", "json": folder / "DESIGN.json"}
    code, out, err = cli([*DESIGN, "--report", files["report"], "-o", files["json"]])
    assert code in (0, 1), err
    assert f"wrote {files['report']}" in out
    return files


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict:
    """sdof exported as an FMU, and 0.5 s of its outputs with 1 % noise as data."""
    folder = tmp_path_factory.mktemp("validate")
    fmu, clean = folder / "sdof.fmu", folder / "clean.csv"
    code, _, err = cli(["export", "sdof", "-o", fmu])
    assert code == 0, err
    code, _, err = cli(["simulate", "sdof", "--t-end", "0.5", "-o", clean])
    assert code == 0, err
    table = np.genfromtxt(clean, delimiter=",", names=True)
    x = table["x"] + 0.01 * np.sqrt(np.mean(table["x"] ** 2)) * np.random.default_rng(5).standard_normal(table.size)
    write_csv(folder / "data.csv", table["time"], {"x": x})
    return {"fmu": fmu, "data": folder / "data.csv", "folder": folder}


@pytest.fixture(scope="module")
def validation(exported) -> dict:
    files = {"report": exported["folder"] / "validation_report.html", "out": exported["folder"] / "check"}
    code, _, err = cli(["validate", exported["fmu"], "--data", exported["data"], "-o", files["out"],
                        "--report", files["report"]])
    assert code == 0, err
    assert f"wrote {files['report']}" in err
    return files


# -- in the browser -----------------------------------------------------------------------------


def test_demo_report_in_the_browser(browser, demo, tmp_path):
    check = browser.open(demo / "engine_mount_report.html", tmp_path)
    check.assert_clean(min_plots=4)


def test_multi_experiment_multi_start_report_in_the_browser(browser, fit, tmp_path):
    check = browser.open(fit["report"], tmp_path)
    check.assert_clean(min_plots=4)
    # Both experiments are in the report, named by their data files.
    result = json.loads(fit["result"].read_text(encoding="utf-8"))
    text = fit["report"].read_text(encoding="utf-8")
    for spec in result["data"]:
        assert Path(str(spec).partition("@")[0]).name in text


def test_design_report_in_the_browser(browser, design, tmp_path):
    check = browser.open(design["report"], tmp_path)
    # The input, the measured output x2 (--noise), the standard errors, the criterion.
    check.assert_clean(min_plots=4)


def test_validation_report_in_the_browser(browser, validation, tmp_path):
    check = browser.open(validation["report"], tmp_path)
    check.assert_clean(min_plots=1)
    (plot,) = check.plots
    samples = json.loads((validation["out"] / "report.json").read_text(encoding="utf-8"))["samples"]
    assert plot.traces == (("measured", "scatter", samples), ("re-simulated (fmpy)", "scatter", samples),
                           ("difference", "scatter", samples))


# -- the numbers are the JSON files' -------------------------------------------------------------


class _Tables(html.parser.HTMLParser):
    """The cells of every ``<table id=...>`` of a page: the ``data-value`` (a float) where a cell
    has one, else its text."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[object]]] = {}
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._value: float | None = None

    def handle_starttag(self, tag, attrs) -> None:
        attributes = dict(attrs)
        if tag == "table" and attributes.get("id"):
            self._table = str(attributes["id"])
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = []
            value = attributes.get("data-value")
            self._value = None if value is None else float(value)

    def handle_data(self, data) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag) -> None:
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            text = "".join(self._cell)
            self.tables[self._table][-1].append(self._value if self._value is not None else text)
            self._cell = None
        elif tag == "table":
            self._table = None


def _tables(path: Path) -> dict[str, list[list[object]]]:
    parser = _Tables()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser.tables


def _json_block(path: Path, element_id: str) -> object:
    match = re.search(rf'<script type="application/json" id="{element_id}">(.*?)</script>',
                      path.read_text(encoding="utf-8"), re.S)
    assert match is not None, f"no JSON block {element_id!r} in {path}"
    return json.loads(match.group(1))


def test_design_report_numbers_are_design_json(design):
    record = json.loads(design["json"].read_text(encoding="utf-8"))
    assert _json_block(design["report"], "design-json") == record
    header, *rows = _tables(design["report"])["standard-errors"]
    assert header == ["parameter", "unit", "start", "designed", "ratio"]
    errors = record["standard_errors"]
    assert rows == [[p["name"], p["unit"], errors["start"][p["name"]], errors["final"][p["name"]],
                     errors["ratio"][p["name"]]] for p in record["parameters"]]
    (_, *knots) = _tables(design["report"])["knots"]
    assert [row[2:] for row in knots] == [list(pair) for pair in zip(record["knots"]["start"],
                                                                       record["knots"]["final"])]
    (_, end) = _tables(design["report"])["constraints"][:2]
    assert end[0] == "end x2" and end[3] == record["end_misses"]["x2"]


def test_validation_report_numbers_are_report_json(validation):
    summary = json.loads((validation["out"] / "report.json").read_text(encoding="utf-8"))
    assert _json_block(validation["report"], "validation-json") == summary
    header, *rows = _tables(validation["report"])["rms-errors"]
    assert rows == [[name, "m", stats["rms_error"], stats["max_abs_error"], 100 * stats["relative_rms_error"]]
                    for name, stats in summary["outputs"].items()]


# -- output files: checked before any work, never half-written ------------------------------------


@pytest.mark.parametrize("case", ["the model file", "the -o file", "a folder"])
def test_design_report_file_is_checked_first(case, tmp_path):
    model = tmp_path / "two_mass.toml"
    model.write_text(example_path("two_mass").read_text(encoding="utf-8"), encoding="utf-8")
    report = {"the model file": model, "the -o file": tmp_path / "D.json", "a folder": tmp_path}[case]
    argv = [*DESIGN, "--report", report, "-o", tmp_path / "D.json"]
    argv[1] = str(model)
    code, _, err = cli(argv)
    assert code == 2 and repr(str(report)) in err and ("--report" in err or "is a folder" in err), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["two_mass.toml"]


def test_design_report_failure_leaves_no_file(monkeypatch, tmp_path):
    from fmi_adjoint.report.html import Page

    def fail(self, path) -> None:
        raise OutputFileError(f"cannot write {str(path)!r}: disk full (test).")

    monkeypatch.setattr(Page, "write", fail)
    files = [tmp_path / "DESIGN.json", tmp_path / "INPUT.csv"]
    code, _, err = cli([*DESIGN[:-4], "--max-iterations", "1", "--starts", "1", "--report", tmp_path / "r.html",
                        "-o", files[0], "--csv", files[1]])
    assert code == 2 and "disk full (test)" in err
    assert list(tmp_path.iterdir()) == []


def test_validate_report_file_is_checked_first(exported, tmp_path):
    base = ["validate", exported["fmu"], "--data", exported["data"], "-o", tmp_path / "out"]
    for report, words in ((exported["data"], "is the data file"), (exported["fmu"], "is the FMU"),
                          (tmp_path / "out" / "report.json", "report.json that -o"),
                          (tmp_path / "missing" / "r.html", "does not exist")):
        if "report.json" in str(report):
            (tmp_path / "out").mkdir(exist_ok=True)
        code, _, err = cli([*base, "--report", report])
        assert code == 2 and words in err, err
        assert not (tmp_path / "out" / "report.json").exists()


def test_validate_report_is_removed_when_the_folder_cannot_be_written(exported, monkeypatch, tmp_path):
    import fmi_adjoint.fmu.validation as handback

    def fail(validation, folder) -> None:
        raise OutputFileError(f"cannot write into {str(folder)!r}: disk full (test).")

    monkeypatch.setattr(handback, "write_validation", fail)
    report = tmp_path / "r.html"
    code, _, err = cli(["validate", exported["fmu"], "--data", exported["data"], "-o", tmp_path / "out",
                        "--report", report])
    assert code == 2 and "disk full (test)" in err
    assert not report.exists() and not (tmp_path / "out").exists()


def test_validate_report_carries_the_notes_printed_on_the_console(exported, tmp_path):
    """``validate --result`` with a RESULT.json of other values, recorded for another FMU file: both
    notes printed on stderr are in the report's summary too; the difference drawn is measured −
    re-simulated, the sign of an identification's residual."""
    import html as html_module

    result = tmp_path / "RESULT.json"
    result.write_text(json.dumps({"parameters": {"c": 2.5}, "fmu": "elsewhere/other.fmu"}), encoding="utf-8")
    report = tmp_path / "r.html"
    code, _, err = cli(["validate", exported["fmu"], "--data", exported["data"], "--result", result,
                        "-o", tmp_path / "out", "--report", report])
    assert code == 0, err
    notes = [line.removeprefix("fmi-adjoint: note: ") for line in err.splitlines()
             if line.startswith("fmi-adjoint: note:")]
    assert len(notes) == 2 and "other.fmu" in notes[0] and "c differ" in notes[1], err
    text = html_module.unescape(report.read_text(encoding="utf-8"))
    for note in notes:
        assert note in text
    (spec,) = [json.loads(body) for body in re.findall(r'<script type="application/json" id="figure-1-spec">(.*?)'
                                                       r'</script>', report.read_text(encoding="utf-8"), re.S)]
    traces = {trace["name"]: np.array(trace["y"], dtype=float) for trace in spec["data"]}
    difference = traces["measured"] - traces["re-simulated (fmpy)"]
    largest = int(np.argmax(np.abs(difference)))
    assert np.sign(traces["difference"][largest]) == np.sign(difference[largest]) != 0
