"""HTML reports (issue 27): the signals compared (:func:`fmi_adjoint.report.compare_fit`), the
page builder (:mod:`fmi_adjoint.report.html`) and the identification report, whose numbers
must be RESULT.json's."""

from __future__ import annotations

import contextlib
import errno
import html
import json
import math
from html.parser import HTMLParser

import numpy as np
import pytest
from plotly.offline import get_plotlyjs

from fmi_adjoint import Experiment, IdentificationProblem, compile_model, load_model, simulate, write_csv
from fmi_adjoint.cli.main import main
from fmi_adjoint.costs import FourierCoefficients, FourierCost, LeastSquaresCost
from fmi_adjoint.examples import example_path
from fmi_adjoint.errors import FmiAdjointError
from fmi_adjoint.files import OutputFileError
from fmi_adjoint.report import ChannelComparison, compare_fit
from fmi_adjoint.report import html as report_html
from fmi_adjoint.report.html import PLOT_DIGITS, Cell, Page, format_number, plot_text
from fmi_adjoint.report.identification import (MAX_LAG, MAX_PLOT_POINTS, NOT_WHITE, Z_95, eigen_directions,
                                               identification_report, residual_spectrum, whiteness)
from fmi_adjoint.report.signals import compare_fit_or_identified

from tolerances import BINOMIAL_SIGMAS, EXACT


T_END = 0.4
STEP = 1e-3
TRUE = {"c2": 1200.0}


@pytest.fixture(scope="module")
def two_mass():
    return compile_model(load_model(example_path("two_mass")))


def _measured(model, values):
    traj = simulate(model, model.parameter_vector(values), t_end=T_END, step=STEP)
    return traj.t, traj.outputs()


@pytest.fixture(scope="module")
def two_experiments(two_mass):
    """Two experiments of two_mass (F = 5 N and 8 N), each measuring x2, v1 and v2."""
    experiments = []
    for name, force in (("push", 5.0), ("push", 8.0)):
        t, Y = _measured(two_mass, {**TRUE, "F": force})
        cost = LeastSquaresCost(t, Y, tuple(two_mass.output_names))
        experiments.append(Experiment(two_mass, cost, values={"F": force}, t_end=T_END, step=STEP, name=name))
    return IdentificationProblem(experiments, ["c2"])


def test_compare_fit_gives_every_channel_of_every_experiment(two_experiments, two_mass):
    problem = two_experiments
    initial, identified = problem.start, np.array([TRUE["c2"]])
    comparisons = compare_fit(problem, initial, identified)
    assert [(c.experiment, c.channel) for c in comparisons] == [
        (label, name) for label in ("1: push", "2: push") for name in ("x2", "v1", "v2")]
    assert [c.unit for c in comparisons[:3]] == ["m", "m/s", "m/s"]
    for c in comparisons:
        assert c.kind == "time series" and c.x_label == "time [s]"
        assert c.x.shape == c.measured.shape == c.initial.shape == c.identified.shape
    # At the true values the identified curve is the measurement; the start is not.
    for k, c in enumerate(comparisons):
        exp = problem.experiments[k // 3]
        np.testing.assert_allclose(c.measured, exp.cost.data[:, k % 3], rtol=EXACT, atol=0)
        scale = np.max(np.abs(c.measured))
        assert np.max(np.abs(c.residual)) <= EXACT * scale
        assert np.max(np.abs(c.measured - c.initial)) > 1e3 * EXACT * scale
    assert comparisons[0].y_label == "x2 [m]"
    # The 8 N experiment moves more than the 5 N one.
    assert np.max(np.abs(comparisons[3].measured)) > np.max(np.abs(comparisons[0].measured))


def test_compare_fit_of_a_fourier_cost_gives_its_amplitude_spectrum(two_mass):
    t, Y = _measured(two_mass, {**TRUE, "F": 5.0})
    coefficients = FourierCoefficients(t, 2 * np.pi * np.arange(1, 31) / T_END)
    measured_A, measured_B = coefficients(Y[:, 0])
    weights = (np.arange(1, 31) <= 20).astype(float)
    cost = FourierCost(coefficients, "x2", measured_A=measured_A, measured_B=measured_B, weights=weights)
    problem = IdentificationProblem([Experiment(two_mass, cost, values={"F": 5.0}, t_end=T_END, step=STEP,
                                                name="sweep")], ["c2"])
    (c,) = compare_fit(problem, problem.start, np.array([TRUE["c2"]]))
    assert (c.experiment, c.channel, c.unit, c.kind, c.x_label) == ("sweep", "x2", "m", "amplitude spectrum",
                                                                   "frequency [Hz]")
    np.testing.assert_allclose(c.x, np.arange(1, 31) / T_END, rtol=EXACT)
    np.testing.assert_allclose(c.measured, np.hypot(measured_A, measured_B), rtol=EXACT)
    np.testing.assert_allclose(c.identified, c.measured, rtol=0, atol=EXACT * np.max(c.measured))
    assert np.max(np.abs(c.initial - c.measured)) > 1e3 * EXACT * np.max(c.measured)
    np.testing.assert_array_equal(c.weights, weights)


# --- the page builder ----------------------------------------------------------------------

class _Reader(HTMLParser):
    """What the tests read of a page: every tag's attributes, the tables by id (cells as
    (text, data-value)), the section headings, the script blocks."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.tables: dict[str, list[list[tuple[str, str | None]]]] = {}
        self.sections: list[str] = []
        self.scripts: list[tuple[dict, str]] = []
        self._table: str | None = None
        self._cell: list | None = None
        self._script: dict | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag == "table":
            self._table = attributes.get("id") or f"table-{len(self.tables)}"
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = [attributes.get("data-value")]
            self._text = []
        elif tag == "h2":
            self.sections.append(attributes.get("id"))
        elif tag == "script":
            self._script = attributes
            self._text = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[self._table][-1].append(("".join(self._text), self._cell[0]))
            self._cell = None
        elif tag == "table":
            self._table = None
        elif tag == "script" and self._script is not None:
            self.scripts.append((self._script, "".join(self._text)))
            self._script = None

    def handle_data(self, data):
        self._text.append(data)


def read_page(text: str) -> _Reader:
    reader = _Reader()
    reader.feed(text)
    reader.close()
    return reader


def assert_self_contained(text: str) -> None:
    """No element loads anything: no src or href to a URL (only #anchors), no external
    script, style sheet, frame or image; plotly.js inlined at most once."""
    page = read_page(text)
    for tag, attributes in page.tags:
        assert tag not in ("link", "iframe", "img", "object", "embed", "base"), tag
        assert "src" not in attributes, (tag, attributes)
        if "href" in attributes:
            assert attributes["href"].startswith("#"), attributes
    library = get_plotlyjs()
    assert text.count(library[:2000]) <= 1
    # Outside plotly.js (whose code holds URL strings it never loads for these plots) no URL at all.
    assert "http://" not in text.replace(library, "") and "https://" not in text.replace(library, "")


def test_page_escapes_every_text_and_inlines_plotly_once(tmp_path):
    name = "a<b & \"c\" </script><script>alert(1)</script>"
    page = Page(f"title {name}", subtitle=name)
    page.section(name)
    page.subsection(name)
    page.paragraph(name, kind="warning")
    page.bullets([name])
    page.table([name, "value"], [[name, 1.0 / 3.0], [Cell(name, 2.5), None]], caption=name, element_id="t")
    for _ in range(2):
        page.figure({"data": [{"type": "scatter", "x": np.arange(3.0), "y": np.array([0.0, np.nan, 1.0]),
                               "name": plot_text(name)}], "layout": {"title": {"text": plot_text(name)}}})
    page.data("payload", {"name": name, "value": 0.1})
    path = tmp_path / "page.html"
    page.write(path)
    text = path.read_text(encoding="utf-8")
    assert "<script>alert(1)" not in text and "<b &" not in text
    assert_self_contained(text)
    assert text.count(get_plotlyjs()) == 1  # two figures, one copy of the library
    reader = read_page(text)
    table = reader.tables["t"]
    assert [cell[0] for cell in table[0]] == [name, "value"]
    assert table[1] == [(name, None), ("0.333333", repr(1.0 / 3.0))]
    assert table[2] == [(name, "2.5"), ("-", None)]
    blocks = {attributes.get("id"): body for attributes, body in reader.scripts if attributes.get("type")}
    assert json.loads(blocks["payload"]) == {"name": name, "value": 0.1}
    figure = json.loads(blocks["figure-1-spec"])
    assert figure["data"][0]["name"] == html.escape(name, quote=False)  # Plotly shows it as typed
    assert figure["data"][0]["y"] == [0.0, None, 1.0]  # NaN: a gap
    assert figure["config"]["displaylogo"] is False


def test_a_page_without_figures_carries_no_plotly(tmp_path):
    page = Page("plain")
    page.paragraph("text")
    assert "Plotly" not in page.html()
    with pytest.raises(ValueError, match="paragraph kind"):
        page.paragraph("text", kind="shout")


def test_a_failed_write_leaves_no_file_and_keeps_the_old_one(tmp_path, monkeypatch):
    page = Page("report")
    page.paragraph("x" * 10_000)
    real = report_html.atomic_output

    @contextlib.contextmanager
    def disk_full(path, mode="w"):
        with real(path, mode) as handle:
            class Half:
                def write(self, text):
                    handle.write(text[: len(text) // 2])
                    raise OSError(errno.ENOSPC, "No space left on device")

            yield Half()

    monkeypatch.setattr(report_html, "atomic_output", disk_full)
    with pytest.raises(OutputFileError, match="No space left"):
        page.write(tmp_path / "new.html")
    assert list(tmp_path.iterdir()) == []
    old = tmp_path / "old.html"
    old.write_text("the previous report", encoding="utf-8")
    with pytest.raises(OutputFileError):
        page.write(old)
    assert list(tmp_path.iterdir()) == [old] and old.read_text(encoding="utf-8") == "the previous report"


# --- the identification report, from the command line --------------------------------------

NOISE = 1e-3  # relative to each channel's RMS: standard errors and correlations are then meaningful


def _noisy_csv(model, values, path, seed):
    t, Y = _measured(model, values)
    rng = np.random.default_rng(seed)
    columns = {}
    for k, name in enumerate(model.output_names):
        rms = float(np.sqrt(np.mean(Y[:, k] ** 2)))
        columns[name] = Y[:, k] + NOISE * rms * rng.standard_normal(t.size)
    write_csv(path, t, columns)
    return path


@pytest.fixture(scope="module")
def multistart_run(two_mass, tmp_path_factory):
    """``identify -o R.json --report R.html``: two experiments (three channels each), two
    starts, staged (windows); short (--max-iter 5)."""
    folder = tmp_path_factory.mktemp("report")
    a = _noisy_csv(two_mass, {"c2": 1200.0, "d2": 1.3, "F": 5.0}, folder / "a.csv", 1)
    b = _noisy_csv(two_mass, {"c2": 1200.0, "d2": 1.3, "F": 8.0}, folder / "b.csv", 2)
    result, report = folder / "R.json", folder / "R.html"
    code = main(["identify", "two_mass", "--params", "c2,d2", "--bounds", "d2=0.1:10", "--t-end", str(T_END),
                 "--data", f"{a}@F=5", "--data", f"{b}@F=8", "--starts", "2", "--max-iter", "5", "--workers", "1",
                 "--scale", "x2=1e-5", "--scale", "v1=1e-4", "--scale", "v2=1e-4",
                 "-o", str(result), "--report", str(report)])
    assert code in (0, 1)
    return json.loads(result.read_text(encoding="utf-8")), report.read_text(encoding="utf-8")


def assert_report_is_result(text: str, payload: dict) -> None:
    """The report ``text`` embeds ``payload`` (RESULT.json) and its parameter table shows the
    payload's numbers: the exact floats in ``data-value``, shown with SHOWN_DIGITS digits.  Also
    used on the demo's report (tests/test_cli.py)."""
    page = read_page(text)
    (embedded,) = [body for attributes, body in page.scripts if attributes.get("id") == "result-json"]
    assert json.loads(embedded) == payload
    header, *rows = page.tables["parameters"]
    assert [cell[0] for cell in header[:7]] == ["parameter", "start", "identified", "standard error",
                                                "95 % confidence (relative)", "at a bound", "unit"]
    assert [row[0][0] for row in rows] == list(payload["parameters"])
    for name, (_, start, identified, se, ci, bound, *_) in zip(payload["parameters"], rows):
        value, std = payload["parameters"][name], payload["std_errors"][name]
        assert float(start[1]) == payload["initial"][name] and start[0] == format_number(payload["initial"][name])
        assert float(identified[1]) == value and identified[0] == format_number(value)
        assert float(se[1]) == std and se[0] == format_number(std)
        assert float(ci[1]) == pytest.approx(Z_95 * std / abs(value) * 100, rel=EXACT)
        assert bound[0] == ("yes" if name in payload["active_bounds"] else "no")
    if "true_values" in payload:
        assert [float(row[7][1]) for row in rows] == [payload["true_values"][n] for n in payload["parameters"]]


def test_the_reports_numbers_are_result_json(multistart_run):
    payload, text = multistart_run
    assert_report_is_result(text, payload)
    page = read_page(text)
    assert [row[6][0] for row in page.tables["parameters"][1:]] == ["N/m", "Ns/m"]  # the model's units
    # The clusters and the starts, cell by cell.
    _, *clusters = page.tables["clusters"]
    assert [float(row[1][1]) for row in clusters] == [c["cost"] for c in payload["multistart"]["clusters"]]
    _, *stages = page.tables["stages"]
    assert [row[0][0] for row in stages] == [s["stage"] for s in payload["strategy"]["stages"]]
    assert [int(row[1][0]) for row in stages] == [s["iterations"] for s in payload["strategy"]["stages"]]


def test_the_report_of_a_multi_experiment_multi_start_run_has_every_section(multistart_run):
    payload, text = multistart_run
    assert_self_contained(text)
    page = read_page(text)
    assert page.sections == ["summary", "parameters", "identifiability", "signals", "convergence", "computation",
                             "result-json"]
    assert {"parameters", "eigen-directions", "residuals", "stages", "clusters", "starts", "computation"} <= set(
        page.tables)
    assert len(payload["multistart"]["results"]) == 2 and len(payload["strategy"]["stages"]) > 1
    for warning in payload["warnings"]:
        assert html.escape(warning) in text
    # Every channel of every experiment: a row of the residual table and a figure.
    _, *residuals = page.tables["residuals"]
    assert [(row[0][0], row[1][0]) for row in residuals] == [(e, c) for e in ("a", "b") for c in ("x2", "v1", "v2")]
    figures = [json.loads(body) for attributes, body in page.scripts if attributes.get("id", "").startswith("figure-")]
    titles = [f["layout"]["title"]["text"] for f in figures]
    for e in ("a", "b"):
        for c in ("x2", "v1", "v2"):
            assert f"{e}: {c} (time series)" in titles
    signal = figures[titles.index("a: v1 (time series)")]
    names = [trace.get("name") for trace in signal["data"]]
    assert names[:4] == ["measured", "initial", "identified", "residual"]
    band = [trace for trace in signal["data"] if trace.get("name") == "±1.96/√N"]
    n = len(signal["data"][0]["x"])
    assert band and band[0]["y"][0] == float(f"{Z_95 / np.sqrt(n):.{PLOT_DIGITS}g}")  # figures keep 7 digits
    # The convergence history with the stage boundaries, the multi-start costs.
    convergence = figures[titles.index("cost per iteration (stages marked)")]
    assert len(convergence["data"][0]["y"]) == len(payload["cost_history"])
    assert len(convergence["layout"]["shapes"]) == len(payload["strategy"]["stages"]) - 1
    assert "final cost of each start" in titles
    assert "parameter correlation" in titles


def test_unit_text_with_html_characters_is_escaped(tmp_path):
    """Names come from model files: unit text may hold any printable character (output and
    parameter names are identifiers, so they cannot)."""
    unit = "m<script>alert(1)</script>&amp;"
    source = example_path("sdof").read_text(encoding="utf-8")
    source = source.replace('unit = "m"', f'unit = "{unit}"').replace('unit = "N/m"', 'unit = "N/m<b>"')
    model_path = tmp_path / "sdof_units.toml"
    model_path.write_text(source, encoding="utf-8")
    model = compile_model(load_model(model_path))
    traj = simulate(model, model.parameter_vector({"c": 1.3}), t_end=2.0, step=0.01)
    data = tmp_path / "x.csv"
    write_csv(data, traj.t, {"x": traj.outputs()[:, 0]})
    report = tmp_path / "R.html"
    code = main(["identify", str(model_path), "--params", "c", "--data", str(data), "--step", "0.01",
                 "--max-iter", "3", "--engine", "python", "-o", str(tmp_path / "R.json"), "--report", str(report)])
    assert code in (0, 1)
    text = report.read_text(encoding="utf-8")
    outside = text.replace(get_plotlyjs(), "")
    assert "<script>alert" not in outside and "<b>" not in outside
    page = read_page(text)
    assert page.tables["parameters"][1][6][0] == "N/m<b>"  # shown as typed
    _, (row,) = page.tables["residuals"][0], page.tables["residuals"][1:]
    assert row[2][0] == unit
    assert_self_contained(text)


def test_report_outputs_are_checked_before_the_run(tmp_path, capsys):
    data = tmp_path / "x.csv"
    data.write_text("time,x2\n0,0\n1,0\n", encoding="utf-8")
    common = ["identify", "two_mass", "--params", "c2", "--data", str(data)]
    assert main([*common, "--report", str(data)]) == 2
    assert "--report" in capsys.readouterr().err
    assert main([*common, "-o", str(tmp_path / "R.json"), "--report", str(tmp_path / "R.json")]) == 2
    assert "give two different file names" in capsys.readouterr().err
    assert main([*common, "--report", str(tmp_path / "missing" / "R.html")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.csv"]


@pytest.mark.slow
def test_the_report_of_an_fmu_identification(tmp_path):
    """``identify --fmu --report`` on a third-party Model Exchange FMU (hand-written Van der Pol):
    the FMU's outputs, the engine and the discretization error of its adaptive runs."""
    import fmpy

    from handwritten_fmus import build_fmu

    fmu = build_fmu("van_der_pol_me", tmp_path)
    run = fmpy.simulate_fmu(str(fmu), stop_time=1.0, output_interval=0.02, start_values={"mu": 1.3},
                            output=["x0", "x1"])
    data = tmp_path / "vdp.csv"
    write_csv(data, run["time"], {"x0": run["x0"], "x1": run["x1"]})
    result, report = tmp_path / "R.json", tmp_path / "R.html"
    code = main(["identify", "--fmu", str(fmu), "--data", str(data), "--params", "mu", "--max-iter", "1",
                 "-o", str(result), "--report", str(report)])
    assert code in (0, 1)
    payload = json.loads(result.read_text(encoding="utf-8"))
    text = report.read_text(encoding="utf-8")
    assert_self_contained(text)
    page = read_page(text)
    assert float(page.tables["parameters"][1][2][1]) == payload["parameters"]["mu"]
    _, *residuals = page.tables["residuals"]
    assert [(row[0][0], row[1][0]) for row in residuals] == [("vdp", "x0"), ("vdp", "x1")]
    computation = {row[0][0]: row[1][0] for row in page.tables["computation"][1:]}
    assert computation["engine"].startswith("the FMU's binary (ModelExchange")
    error = payload["discretization_error"]
    _, *rows = page.tables["discretization"]
    assert [float(row[1][1]) for row in rows] == [error["cost"], error["largest_output_change"],
                                                  error["parameter_bias"]["mu"]]


def test_a_long_record_is_drawn_thinned_and_keeps_its_spectral_peak():
    """50 001 samples: the curves are drawn with every 3rd sample, the residual spectrum keeps
    its largest amplitude (the block maximum), the statistics use every sample."""
    t = np.linspace(0.0, 5.0, 50_001)
    measured = np.sin(2 * np.pi * t)
    identified = measured - 0.01 * np.sin(2 * np.pi * 1234.5 * t)
    comparison = ChannelComparison("bench", "a<b", "m", "time series", "time [s]", t, measured, 0.9 * measured,
                                   identified)
    payload = {"parameters": {"k": 2.0}, "initial": {"k": 1.0}, "std_errors": None, "correlation": None,
               "cost_history": [1.0, 0.5, 0.25], "gradient_norm_history": [1.0, 0.1, 0.01], "method": "lbfgsb",
               "success": True, "message": "converged", "active_bounds": [], "unidentifiable": [], "warnings": []}
    text = identification_report(payload, [comparison]).html()
    assert_self_contained(text)
    page = read_page(text)
    figures = {attributes["id"]: json.loads(body) for attributes, body in page.scripts
               if attributes.get("id", "").startswith("figure-")}
    (signal,) = [f for f in figures.values() if f["layout"]["title"]["text"].startswith("bench")]
    assert signal["layout"]["title"]["text"] == "bench: a&lt;b (time series), 1 of every 3 samples drawn"
    drawn = {trace["name"]: trace for trace in signal["data"]}
    assert len(drawn["measured"]["x"]) == len(drawn["residual"]["y"]) == 16_667 <= MAX_PLOT_POINTS
    assert len(drawn["residual spectrum"]["x"]) <= MAX_PLOT_POINTS
    freq, amplitude = residual_spectrum(t, measured - identified)
    assert max(drawn["residual spectrum"]["y"]) == float(f"{amplitude.max():.{PLOT_DIGITS}g}")
    assert freq[np.argmax(amplitude)] == pytest.approx(1234.5, abs=float(freq[1]))
    # No standard errors (not a least-squares cost): said, and no correlation section figure.
    assert "No standard errors" in text and "parameter correlation" not in text


# --- the statistics of the report ------------------------------------------------------------

def test_white_noise_leaves_about_five_percent_of_the_lags_outside_the_band():
    """Seeded white noise: the share of lags 1..MAX_LAG outside ±1.96/√N within a binomial bound
    of its expectation (the band's two-sided 5 %)."""
    n = 4000
    lags, acf, band, outside = whiteness(np.random.default_rng(27).standard_normal(n))
    assert lags.size == MAX_LAG + 1 and acf[0] == 1.0
    assert band == Z_95 / math.sqrt(n)
    expected = math.erfc(Z_95 / math.sqrt(2))  # P(|z| > 1.96) = 0.05
    assert abs(outside - expected) <= BINOMIAL_SIGMAS * math.sqrt(expected * (1 - expected) / MAX_LAG)
    assert outside <= NOT_WHITE


def test_correlated_residuals_leave_many_lags_outside_the_band():
    """AR(1) with phi = 0.9 (a slow wave the model misses): far more than NOT_WHITE outside."""
    rng = np.random.default_rng(3)
    e = rng.standard_normal(4000)
    r = np.empty_like(e)
    r[0] = e[0]
    for k in range(1, r.size):
        r[k] = 0.9 * r[k - 1] + e[k]
    _, acf, band, outside = whiteness(r)
    assert outside > 2 * NOT_WHITE
    assert np.all(np.abs(acf[1:11]) > band)  # 0.9^k over the first lags


def test_eigen_directions_of_two_strongly_correlated_parameters():
    """s = (0.1, 0.1) relative, correlation -0.99: the covariance 0.01 [[1, -0.99], [-0.99, 1]]
    has the directions (1, -1)/√2 with relative standard deviation 0.1 √1.99 (the spread) and
    (1, 1)/√2 with 0.1 √0.01; the report's 95 % spread is Z_95 times these."""
    values, se = [2.0, 50.0], [0.2, 5.0]  # 10 % each
    (sigma1, v1), (sigma2, v2) = eigen_directions(values, se, [[1.0, -0.99], [-0.99, 1.0]])
    np.testing.assert_allclose(sigma1, 0.1 * math.sqrt(1.99), rtol=EXACT)
    np.testing.assert_allclose(sigma2, 0.1 * math.sqrt(0.01), rtol=EXACT)
    np.testing.assert_allclose(v1, np.array([1.0, -1.0]) / math.sqrt(2), rtol=0, atol=EXACT)
    np.testing.assert_allclose(v2, np.array([1.0, 1.0]) / math.sqrt(2), rtol=0, atol=EXACT)


@pytest.mark.parametrize("n", [1000, 1001])
def test_residual_spectrum_of_a_sine_peaks_at_its_amplitude(n):
    """A sine of amplitude A at a frequency of the grid: one peak of height A at its frequency;
    with an even N the Nyquist bin (a cosine alternating ±A) is A too, not 2 A."""
    h, amplitude_of_sine = 1e-3, 0.37
    t = np.arange(n) * h
    f = 50 / (n * h)  # 50 periods in the record
    freq, amplitude = residual_spectrum(t, amplitude_of_sine * np.sin(2 * np.pi * f * t))
    k = int(np.argmax(amplitude))
    np.testing.assert_allclose(freq[k], f, rtol=EXACT)
    np.testing.assert_allclose(amplitude[k], amplitude_of_sine, rtol=EXACT)
    if n % 2 == 0:
        nyquist = amplitude_of_sine * np.cos(np.pi * np.arange(n))
        freq, amplitude = residual_spectrum(t, nyquist)
        np.testing.assert_allclose([freq[-1], amplitude[-1]], [0.5 / h, amplitude_of_sine], rtol=EXACT)


class _StartDiverges:
    """A problem whose start values cannot be simulated (a staged fit's start that diverges on
    the whole record): what compare_fit asks of a problem, and no more."""

    def __init__(self, problem, start):
        self._problem, self._start = problem, start
        self.experiments = problem.experiments

    def output_units(self):
        return self._problem.output_units()

    def sampled_outputs(self, index, x):
        if np.array_equal(x, self._start):
            raise FmiAdjointError("the run diverged at t = 0.1 s; give other start values.")
        return self._problem.sampled_outputs(index, x)


def test_comparisons_fall_back_to_the_identified_values_without_a_start_run(two_experiments):
    problem = two_experiments
    identified = np.array([TRUE["c2"]])
    comparisons, shown = compare_fit_or_identified(problem, problem.start, identified)
    assert shown and np.max(np.abs(comparisons[0].initial - comparisons[0].identified)) > 0
    comparisons, shown = compare_fit_or_identified(_StartDiverges(problem, problem.start), problem.start, identified)
    assert not shown and len(comparisons) == 6
    for c in comparisons:
        np.testing.assert_array_equal(c.initial, c.identified)


def test_a_parameter_and_an_output_of_one_name_keep_their_own_units(tmp_path, capsys):
    """sdof with its output named "c" (in m) like its stiffness c (in N/m): the parameter table
    (console and report) shows N/m, the signals m."""
    source = example_path("sdof").read_text(encoding="utf-8")
    source = source.replace('[[outputs]]\nname = "x"', '[[outputs]]\nname = "c"')
    model_path = tmp_path / "sdof_c.toml"
    model_path.write_text(source, encoding="utf-8")
    model = compile_model(load_model(model_path))
    assert model.output_names == ("c",)
    traj = simulate(model, model.parameter_vector({"c": 1.3}), t_end=2.0, step=0.01)
    data = tmp_path / "c.csv"
    write_csv(data, traj.t, {"c": traj.outputs()[:, 0]})
    report = tmp_path / "R.html"
    capsys.readouterr()
    code = main(["identify", str(model_path), "--params", "c", "--data", str(data), "--step", "0.01",
                 "--max-iter", "3", "--engine", "python", "-o", str(tmp_path / "R.json"), "--report", str(report)])
    assert code in (0, 1)
    out = capsys.readouterr().out
    (row,) = [line.split() for line in out.splitlines() if line.split()[:1] == ["c"]]
    assert row[-1] == "N/m"
    page = read_page(report.read_text(encoding="utf-8"))
    assert page.tables["parameters"][1][6][0] == "N/m"
    assert page.tables["residuals"][1][2][0] == "m"


def _fit_with_outputs(two_mass, tmp_path, extra):
    data = _noisy_csv(two_mass, {"c2": 1200.0, "F": 5.0}, tmp_path / "a.csv", 3)
    return main(["identify", "two_mass", "--params", "c2", "--t-end", str(T_END), "--data", f"{data}@F=5",
                 "--max-iter", "2", *extra])


def test_a_failed_output_removes_every_output_of_the_run(two_mass, tmp_path, monkeypatch, capsys):
    """-o fails after --plot and --report were written: neither stays; --report fails after
    --plot was written: the figure goes too (as design's outputs)."""
    from fmi_adjoint.identify import result_file  # RESULT.json is written there (issue 29)

    real = result_file.atomic_output

    @contextlib.contextmanager
    def disk_full(path, mode="w"):
        if str(path).endswith(".json"):
            raise OutputFileError(f"cannot write {str(path)!r}: No space left on device; free disk space.")
        with real(path, mode) as handle:
            yield handle

    outputs = ["--plot", str(tmp_path / "F.png"), "--report", str(tmp_path / "R.html"), "-o", str(tmp_path / "R.json")]
    with monkeypatch.context() as patch:
        patch.setattr(result_file, "atomic_output", disk_full)
        code = _fit_with_outputs(two_mass, tmp_path, outputs)
    err = capsys.readouterr().err
    assert code == 2 and "No space left" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv"]

    def fail(self, path) -> None:
        raise OutputFileError(f"cannot write {str(path)!r}: disk full (test).")

    monkeypatch.setattr(Page, "write", fail)
    code = _fit_with_outputs(two_mass, tmp_path, outputs)
    err = capsys.readouterr().err
    assert code == 2 and "disk full (test)" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv"]


def test_a_page_figure_is_a_dict():
    page = Page("t")
    with pytest.raises(TypeError, match="give a dict"):
        page.figure([{"x": [0, 1], "y": [1, 2]}])
