"""Tests of the browser harness (tests/browser.py) itself: a clean page passes, and each
kind of problem the report tests rely on it to catch (a request for another URL, a console
error, an uncaught exception, a plot without data) fails the check."""

from __future__ import annotations

import json

import pytest
from browser import Browser, browser_missing, require_browser

pytestmark = pytest.mark.slow

_PLOT = """<div id="{id}" class="plotly-graph-div" style="height:300px;width:600px"></div>
<script>Plotly.newPlot("{id}", {data}, {{}}, {{"displaylogo": false}});</script>"""


@pytest.fixture(scope="module")
def plotly_js(tmp_path_factory):
    """plotly.js, inlined in each test page as the reports inline it."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


@pytest.fixture(scope="module")
def browser():
    require_browser()
    with Browser() as opened:
        yield opened


def _page(tmp_path, plotly_js: str, body: str, name: str = "page.html"):
    path = tmp_path / name
    script = f"<script>{plotly_js}</script>" if plotly_js else ""
    path.write_text(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>t</title>{script}</head>"
                    f"<body>{body}</body></html>", encoding="utf-8")
    return path


def _plot(id_: str, traces: list) -> str:
    return _PLOT.format(id=id_, data=json.dumps(traces))


def test_a_clean_page_passes(browser, plotly_js, tmp_path):
    body = (_plot("line", [{"x": [0, 1, 2], "y": [1, 3, 2], "name": "signal"}])
            + _plot("map", [{"type": "heatmap", "z": [[1, 0.5], [0.5, 1]]}]))
    check = browser.open(_page(tmp_path, plotly_js, body), tmp_path)
    check.assert_clean(min_plots=2)
    assert [plot.traces for plot in check.plots] == [(("signal", "scatter", 3),), (("", "heatmap", 4),)]
    assert check.screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_report_page_passes(browser, tmp_path):
    """The report builder's figures (div.plot with a JSON block, drawn by one script at the end)
    are found and checked like Plotly's own (an undrawn one: the next test)."""
    from fmi_adjoint.report.html import Page

    page = Page("harness")
    page.figure({"data": [{"x": [0, 1, 2], "y": [0.5, float("nan"), 2.0], "name": "gap"}], "layout": {}})
    page.write(tmp_path / "report.html")
    check = browser.open(tmp_path / "report.html", tmp_path)
    check.assert_clean()
    assert check.plots[0].traces == (("gap", "scatter", 2),)


# The request, console and exception checks need no plot: their pages load without plotly.js.

def test_a_request_for_another_url_fails(browser, tmp_path):
    body = '<p>logo</p><img src="https://cdn.example.invalid/logo.png">'
    check = browser.open(_page(tmp_path, "", body), tmp_path)
    assert check.requests == ("https://cdn.example.invalid/logo.png",)
    with pytest.raises(AssertionError, match="request for https://cdn.example.invalid/logo.png"):
        check.assert_clean(min_plots=0)


def test_a_console_error_fails(browser, tmp_path):
    check = browser.open(_page(tmp_path, "", "<script>console.error('the report broke');</script>"), tmp_path)
    with pytest.raises(AssertionError, match="console error: the report broke"):
        check.assert_clean(min_plots=0)


def test_an_uncaught_exception_fails(browser, tmp_path):
    check = browser.open(_page(tmp_path, "", "<script>null.missing;</script>"), tmp_path)
    with pytest.raises(AssertionError, match="page error: .*null"):
        check.assert_clean(min_plots=0)


def test_a_plot_without_data_fails(browser, plotly_js, tmp_path):
    body = (_plot("full", [{"x": [0, 1], "y": [1, 2]}]) + _plot("empty", [])
            + _plot("lost", [{"x": [], "y": [], "name": "lost trace"}]) + _plot("map", [{"type": "heatmap", "z": []}])
            + _plot("nulls", [{"x": [0, 1], "y": [None, None], "name": "NaN residual"}]))
    check = browser.open(_page(tmp_path, plotly_js, body), tmp_path)
    assert [plot.problem for plot in check.plots] == [
        None, "plot 'empty' has no data", "plot 'lost' has traces without points: lost trace (scatter)",
        "plot 'map' has traces without points: (unnamed) (heatmap)",
        "plot 'nulls' has traces without points: NaN residual (scatter)"]
    with pytest.raises(AssertionError, match="plot 'empty' has no data"):
        check.assert_clean()


def test_a_plot_plotly_never_drew_fails(browser, tmp_path):
    # Plotly's container and the report builder's (its drawing script never ran).
    body = '<div id="orphan" class="plotly-graph-div"></div><div class="plot" id="figure-1" data-spec="spec"></div>'
    check = browser.open(_page(tmp_path, "", body), tmp_path)
    assert check.problems == ("plot 'orphan' was not drawn by Plotly", "plot 'figure-1' was not drawn by Plotly")
    with pytest.raises(AssertionError, match="plot 'orphan' was not drawn by Plotly"):
        check.assert_clean()


def test_too_few_plots_fail(browser, tmp_path):
    check = browser.open(_page(tmp_path, "", "<p>nothing drawn</p>"), tmp_path)
    check.assert_clean(min_plots=0)
    with pytest.raises(AssertionError, match="0 plots, expected at least 1"):
        check.assert_clean()


def test_the_skip_reason_names_the_fix(monkeypatch, tmp_path):
    import browser as harness

    monkeypatch.setattr(harness, "CHROMIUM", tmp_path / "no-chromium")
    reason = browser_missing()
    assert reason is not None and "apt-get install chromium" in reason and str(tmp_path) in reason
