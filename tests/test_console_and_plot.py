"""Issue 27, items 2 and 3: what ``identify`` prints (the parameter table, one line per stage,
no second "iter 0") and what ``--plot`` draws (every channel of every experiment with its
residual, plain tick labels, the convergence over all stages with the stages marked)."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from fmi_adjoint import (Experiment, IdentificationProblem, LeastSquaresCost, compile_model, identify, load_model,
                         simulate)
from fmi_adjoint.cli import plotting
from fmi_adjoint.cli.main import main
from fmi_adjoint.examples import example_path
from fmi_adjoint.identify.strategies import GrowingWindows, identify_staged, stage_starts
from fmi_adjoint.identify.table import IDENTIFIED_DIGITS, parameter_table
from fmi_adjoint.report.signals import ChannelComparison

from tolerances import EXACT


def run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out, captured.err


def table_rows(text: str, names) -> dict[str, list[str]]:
    """The table's rows by parameter name (the tokens after the name)."""
    rows = {}
    for line in text.splitlines():
        tokens = line.split()
        if tokens and tokens[0] in names:
            rows[tokens[0]] = tokens[1:]
    return rows


def iteration_numbers(lines) -> list[int]:
    return [int(line.partition("iter ")[2].split()[0]) for line in lines]


# -- the parameter table ------------------------------------------------------------------


def test_table_columns_digits_and_bounds():
    text = parameter_table(["c_E1", "d"], np.array([7.38e4, 0.5]), np.array([122985.71234, 4.9673372]),
                           [13.2, None], true_values={"c_E1": 1.23e5, "d": 5.0}, active_bounds=("d",),
                           units={"c_E1": "N/m"})
    lines = text.splitlines()
    assert lines[0].split() == ["parameter", "true", "initial", "identified", "std", "error", "|err|/std", "unit"]
    rows = table_rows(text, ["c_E1", "d"])
    assert rows["c_E1"] == ["1.23e+05", "73800", f"{122985.71234:.{IDENTIFIED_DIGITS}g}", "1.320e+01",
                            f"{abs(122985.71234 - 1.23e5) / 13.2:.2f}", "N/m"]
    assert rows["d"] == ["5", "0.5", "4.967337", "-", "-"]  # no standard error, no unit
    assert lines[-1] == "on a bound (standard error only indicative): d"
    # Without true values or units: only the columns that mean something.
    plain = parameter_table(["k"], [1.0], [2.0], None)
    assert plain.splitlines() == [plain.splitlines()[0], plain.splitlines()[1]]
    assert plain.splitlines()[0].split() == ["parameter", "initial", "identified", "std", "error"]
    with pytest.raises(ValueError, match="one of each"):
        parameter_table(["a", "b"], [1.0], [1.0, 2.0], None)


# -- identify: table, stage lines, no duplicate iter 0 --------------------------------------


@pytest.fixture(scope="module")
def sdof_data(tmp_path_factory):
    path = tmp_path_factory.mktemp("console") / "sdof.csv"
    assert main(["simulate", "sdof", "--step", "1e-2", "--set", "c=1.3", "--set", "d=0.4", "-o", str(path)]) == 0
    return path


def _assert_progress(err: str, stages: list[dict], history: list[float]) -> None:
    """One stage line before each stage's iteration lines, numbered from 0 without repeats."""
    lines = err.splitlines()
    stage_lines = [k for k, line in enumerate(lines) if line.startswith("stage ")]
    assert [lines[k] for k in stage_lines] == [f"stage {n}/{len(stages)}: {s['stage']}"
                                               for n, s in enumerate(stages, start=1)]
    bounds = [*stage_lines, len(lines)]
    count = 0
    for (a, b), stage in zip(zip(bounds, bounds[1:]), stages):
        its = [line for line in lines[a + 1:b] if " iter " in line]
        assert its and all(line.startswith(f"[{stage['stage']}] iter ") for line in its), its
        assert iteration_numbers(its) == list(range(len(its))), its  # no second "iter 0"
        count += len(its)
    assert count == len(history)


def test_identify_prints_the_table_and_marks_the_stages(sdof_data, tmp_path, capsys):
    """-o RESULT.json: the table on stdout, its values RESULT.json's to the printed digits.  The
    start d = 0.5 is on its bound: scipy's trust-region method moves it inside, which printed
    "iter 0" twice in every stage starting there."""
    result_json = tmp_path / "RESULT.json"
    code, out, err = run(["identify", "sdof", "--data", sdof_data, "--params", "c,d", "--step", "1e-2",
                          "--method", "least_squares", "--bounds", "d=0.5:2", "-o", result_json], capsys)
    assert code in (0, 1), err
    payload = json.loads(result_json.read_text(encoding="utf-8"))
    rows = table_rows(out, ["c", "d"])
    assert set(rows) == {"c", "d"}
    for name, tokens in rows.items():
        assert tokens[0] == f"{payload['initial'][name]:.5g}"
        assert tokens[1] == f"{payload['parameters'][name]:.{IDENTIFIED_DIGITS}g}"
        std = payload["std_errors"][name]
        assert tokens[2] == ("-" if std is None else f"{std:.3e}")
        assert tokens[3] == "Ns/m" if name == "d" else tokens[3] == "N/m"
    assert "on a bound (standard error only indicative): d" in out
    assert payload["active_bounds"] == ["d"]
    stages = payload["strategy"]["stages"]
    assert len(stages) > 1
    _assert_progress(err, stages, payload["cost_history"])
    assert sum(s["iterations"] for s in stages) == len(payload["cost_history"])  # least squares


def test_result_on_stdout_stays_json(sdof_data, capsys):
    """Without -o RESULT.json goes to stdout (``identify > RESULT.json``): the table to stderr."""
    code, out, err = run(["identify", "sdof", "--data", sdof_data, "--params", "c,d", "--step", "1e-2",
                          "--strategy", "single", "--method", "lbfgsb"], capsys)
    assert code == 0, err
    payload = json.loads(out)
    rows = table_rows(err, ["c", "d"])
    assert rows["c"][1] == f"{payload['parameters']['c']:.{IDENTIFIED_DIGITS}g}"
    assert not [line for line in err.splitlines() if line.startswith("stage ")]  # one stage: no stage line


def _sdof_problem(lower_d: float) -> IdentificationProblem:
    model = compile_model(load_model(example_path("sdof")))
    traj = simulate(model, model.parameter_vector({"c": 1.3, "d": 0.4}), step=1e-2)
    y = traj.outputs()[:, model.output_index("x")]
    exp = Experiment(model, LeastSquaresCost(traj.t, y, ("x",)), t_end=float(traj.t[-1]), step=1e-2)
    return IdentificationProblem([exp], ["c", "d"], bounds={"d": (lower_d, 2.0)})


def test_least_squares_from_a_bound_prints_iter_0_once():
    stream = io.StringIO()
    result = identify(_sdof_problem(0.5), "least_squares", progress=stream, max_iterations=5)
    lines = stream.getvalue().splitlines()
    assert iteration_numbers(lines) == list(range(len(lines)))
    assert len(lines) == len(result.cost_history) == result.iterations
    assert result.cost_history[0] == pytest.approx(result.cost_initial, rel=EXACT)


@pytest.mark.parametrize("method", ["lbfgsb", "least_squares"])
def test_stage_starts_locate_the_stages_in_the_history(method):
    """stage_starts from the stages' iteration counts: each stage's first history entry is its
    cost at its start (the cost the stage summary reports)."""
    stream = io.StringIO()
    staged = identify_staged(_sdof_problem(0.01), GrowingWindows((0.25,)), method, progress=stream,
                             max_iterations=20)
    history = staged.result.cost_history
    starts = stage_starts([s.iterations for s in staged.stages], method)
    ends = [*starts[1:], len(history)]
    assert ends[-1] == len(history) and all(b > a for a, b in zip(starts, ends))
    for start, summary in zip(starts, staged.stages):
        assert history[start] == pytest.approx(summary.cost_initial, rel=EXACT)
    assert stream.getvalue().splitlines()[0] == "stage 1/2: " + staged.stages[0].stage


# -- the figure ----------------------------------------------------------------------------


def _comparison(experiment, channel, unit, *, measured=True, offset=0.0, weights=None):
    x = np.linspace(0.0, 1.0, 200)
    identified = offset + 1e-4 * np.sin(7 * x)
    return ChannelComparison(experiment, channel, unit, "time series", "time [s]", x,
                             identified + 1e-6 * np.cos(40 * x) if measured else None,
                             identified * 1.01, identified, weights)


def _labels(axis) -> list[str]:
    return [t.get_text() for t in axis.get_ticklabels() if t.get_text()]


def test_figure_has_a_signal_and_a_residual_axis_per_channel():
    """Two experiments of three channels: a column each, a residual under every signal; values
    like 12.8326 +- 1e-4 get plain tick labels (matplotlib's default put "+1.283e1" on the axis)."""
    weights = np.r_[np.zeros(50), np.ones(150)]
    comparisons = [_comparison(e, ch, unit, measured=not (e == "b.csv" and ch == "v"), offset=12.8326,
                               weights=weights if ch == "F" else None)
                   for e in ("a.csv", "b.csv") for ch, unit in (("x", "m"), ("v", "m/s"), ("F", ""))]
    history = [5e3, 2.0, 1e-2, 3e3, 4.0, 0.6]
    drawn = plotting.fit_figure(comparisons, history, stages=[(0, "window t <= 0.5 s"), (3, "all data")])
    try:
        drawn.figure.canvas.draw()
        assert len(drawn.signal_axes) == len(drawn.residual_axes) == len(comparisons)
        assert drawn.grid == (3, 2)
        assert len(drawn.figure.axes) == 2 * len(comparisons) + 1
        assert [ax.get_ylabel() for ax in drawn.signal_axes[:3]] == ["x [m]", "v [m/s]", "F"]
        assert [ax.get_ylabel() for ax in drawn.residual_axes[:3]] == ["residual [m]", "residual [m/s]", "residual"]
        assert all(ax.get_xlabel() == "time [s]" for ax in drawn.residual_axes)
        missing = drawn.residual_axes[4]
        assert [t.get_text() for t in missing.texts] == ["no measured values"]
        for ax in drawn.signal_axes:
            for axis in (ax.xaxis, ax.yaxis):
                assert axis.get_offset_text().get_text() == "", ax.get_title()
        for ax in (*drawn.signal_axes, *drawn.residual_axes):
            # Never an offset; a multiplier only for extreme magnitudes (the residuals here are
            # 1e-6: "x10^-6" once at the axis end, not on every tick).
            assert ax.yaxis.get_major_formatter().offset == 0
            labels = _labels(ax.yaxis)
            assert len(labels) == len(set(labels)) >= 2, labels
        conv = drawn.convergence_axes
        assert conv.get_yscale() == "log"
        assert _labels(conv.yaxis) and not [t for t in conv.yaxis.get_minorticklabels() if t.get_text()]
        assert "window t <= 0.5 s" in conv.get_title() and "all data" in conv.get_title()
        assert len(conv.lines) == 2  # the history and one stage boundary
    finally:
        plotting._pyplot().close(drawn.figure)


def test_narrow_cost_history_is_drawn_on_a_linear_axis_without_offset():
    """A history within a decade (the last stage of a continuation: 12.8326 -> 12.8325) on a
    log axis labelled every tick "1.28326x10^1"."""
    drawn = plotting.fit_figure([_comparison("a.csv", "x", "m")], [12.8326, 12.83255, 12.8325])
    try:
        drawn.figure.canvas.draw()
        conv = drawn.convergence_axes
        assert conv.get_yscale() == "linear"
        assert conv.yaxis.get_offset_text().get_text() == ""
        labels = _labels(conv.yaxis)
        assert len(labels) == len(set(labels)) >= 2 and not any("\u00d7" in s or "^" in s for s in labels), labels
        assert drawn.grid == (1, 1) and conv.get_title() == "convergence"
    finally:
        plotting._pyplot().close(drawn.figure)


@pytest.mark.slow
def test_identify_plot_draws_every_channel_of_every_experiment(tmp_path, capsys, monkeypatch):
    """--plot on two experiments of a three-output model: six signal and six residual panels with
    units, the convergence over all stages with each stage marked."""
    data = []
    for name, force in (("one.csv", "5"), ("two.csv", "8")):
        path = tmp_path / name
        assert main(["simulate", "two_mass", "--t-end", "0.5", "--set", "c2=1500", "--set", f"F={force}",
                     "-o", str(path)]) == 0
        data.append(f"{path}@F={force}")
    drawn = []
    original = plotting.plot_comparisons
    monkeypatch.setattr(plotting, "plot_comparisons", lambda *a, **k: drawn.append(original(*a, **k)))
    png, result = tmp_path / "fit.png", tmp_path / "r.json"
    argv = ["identify", "two_mass", "--params", "c2", "--plot", png, "-o", result]
    for spec in data:
        argv += ["--data", spec]
    capsys.readouterr()
    code, out, err = run(argv, capsys)
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (figure,) = drawn
    assert len(figure.signal_axes) == len(figure.residual_axes) == 6 and figure.grid == (3, 2)
    assert [ax.get_ylabel() for ax in figure.signal_axes[:3]] == ["x2 [m]", "v1 [m/s]", "v2 [m/s]"]
    assert [ax.get_title() for ax in figure.signal_axes[::3]] == ["one: x2 (time series)",
                                                                  "two: x2 (time series)"]
    payload = json.loads(result.read_text(encoding="utf-8"))
    stages = payload["strategy"]["stages"]
    assert len(stages) > 1
    assert len(figure.convergence_axes.lines) == len(stages)  # the history and a line per later stage
    assert list(figure.convergence_axes.lines[0].get_ydata()) == payload["cost_history"]


def test_dollar_signs_in_names_and_units_are_drawn_as_they_are(tmp_path):
    """Names and units come from model files: a "$" pair started a mathtext formula, and an
    unbalanced one ("$^$") made savefig fail."""
    comparison = _comparison("bench $1^$", "cost", "$^$")
    png = tmp_path / "fit.png"
    drawn = plotting.plot_comparisons(png, [comparison], [3.0, 2.0, 1.0, 0.5],
                                      stages=[(0, "window $t^$"), (2, "all data")])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (ax,), (res_ax,) = drawn.signal_axes, drawn.residual_axes
    literal = r"\$"  # matplotlib draws an escaped dollar as "$"
    assert ax.get_ylabel() == f"cost [{literal}^{literal}]"
    assert res_ax.get_ylabel() == f"residual [{literal}^{literal}]"
    assert ax.get_title() == f"bench {literal}1^{literal}: cost (time series)"
    assert f"window {literal}t^{literal}" in drawn.convergence_axes.get_title()


def test_initial_curves_are_left_out_when_the_start_could_not_be_simulated():
    comparisons = [_comparison("a.csv", "x", "m"), _comparison("a.csv", "v", "m/s")]
    for shown in (True, False):
        drawn = plotting.fit_figure(comparisons, [2.0, 1.0], initial_shown=shown)
        try:
            for ax in drawn.signal_axes:
                labels = [line.get_label() for line in ax.lines]
                assert labels == (["initial"] if shown else []) + ["measured", "identified"]
        finally:
            plotting._pyplot().close(drawn.figure)
