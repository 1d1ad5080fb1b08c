"""Open a local HTML file in headless Chromium (through Playwright) and check it as a reader
would see it: it renders, no console error or warning, no page error, no request for anything
but the file itself, and every Plotly plot drawn with data.  A full-page screenshot is kept.

Usage::

    from browser import Browser, require_browser

    require_browser()                           # pytest.skip with the reason and the fix
    with Browser() as browser:
        check = browser.open(path, screenshot_dir=tmp_path)
    check.assert_clean()                        # one AssertionError naming every problem

The browser is the system's Chromium (``/usr/bin/chromium``; ``./run test`` installs it as root
with apt-get), started with every background service off, so that a request the page makes is
the page's own.  Requests other than the file are aborted *and* recorded: a report that asks
for a CDN fails the check instead of slowing it down.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")

#: Flags of a quiet headless Chromium: nothing it does by itself (updates, sync, safe browsing,
#: QUIC probes) can show up as a request of the page.
CHROMIUM_ARGS = ("--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic")

#: Console message types that fail a check.
FAILING_CONSOLE = ("error", "warning")

#: Longest wait for the page's load event [ms]; a report loads in 1-3 s on a busy machine.
TIMEOUT_MS = 60_000

#: Longest wait after the load event for Plotly to finish drawing [ms]: the pages draw from an
#: inline script before the load event, so this only covers a page that draws later.
DRAW_TIMEOUT_MS = 5_000

#: The plot containers: Plotly's own (``plotly-graph-div``; ``js-plotly-plot`` once drawn) and
#: the report builder's (fmi_adjoint/report/html.py: ``div.plot`` with its figure's JSON block).
PLOT_CONTAINERS = ".plotly-graph-div, .js-plotly-plot, div.plot[data-spec]"

# In the page: every plot container, whether Plotly drew it, and the points of its traces: the
# finite numbers (or category names) of y, else of z (heat maps), values (pies) or x.  A trace
# of nulls or NaNs draws nothing and counts no point.
_PLOTS_JS = """(selector) => Array.from(document.querySelectorAll(selector)).map((el, k) => {
    const shown = (v) => (typeof v === 'number' && isFinite(v)) || (typeof v === 'string' && v !== '');
    const nested = (v) => Array.isArray(v) || ArrayBuffer.isView(v);
    const count = (a) => (a == null || typeof a.length !== 'number' || typeof a === 'string') ? 0
        : Array.from(a).reduce((n, v) => n + (nested(v) ? count(v) : (shown(v) ? 1 : 0)), 0);
    const points = (t) => {
        for (const key of ['y', 'z', 'values', 'x']) { if (t[key] != null) return count(t[key]); }
        return 0;
    };
    const data = Array.isArray(el.data) ? el.data : [];
    return {
        id: el.id || ('plot ' + k),
        rendered: el.classList.contains('js-plotly-plot') && !!el._fullLayout,
        traces: data.map((t) => ({name: String(t.name ?? ''), type: String(t.type ?? 'scatter'), points: points(t)})),
    };
})"""

# True when Plotly has drawn every container, or when there is no Plotly to draw them.
_ALL_DRAWN_JS = """(selector) => !window.Plotly || Array.from(document.querySelectorAll(selector))
    .every((el) => el.classList.contains('js-plotly-plot') && !!el._fullLayout)"""


def browser_missing() -> str | None:
    """Why the browser checks cannot run here (None: they can): the reason and the fix."""
    if importlib.util.find_spec("playwright") is None:
        return ("playwright is not installed: install the test dependencies "
                "(`.venv/bin/pip install -e '.[test]'`, which `./run test` does)")
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        return (f"Chromium not found at {CHROMIUM}: install it (`apt-get install chromium` as root; `./run test` "
                "does that where it runs as root with apt-get)")
    return None


def require_browser() -> None:
    """Skip the calling test with the reason and the fix when the browser checks cannot run."""
    reason = browser_missing()
    if reason is not None:
        pytest.skip(reason)


@dataclasses.dataclass(frozen=True)
class Plot:
    """One Plotly container of the page: whether Plotly drew it, and its traces as
    (name, type, number of points)."""

    id: str
    rendered: bool
    traces: tuple[tuple[str, str, int], ...]

    @property
    def problem(self) -> str | None:
        """What is wrong with the plot (None: drawn, with at least one trace, every trace with points)."""
        if not self.rendered:
            return f"plot {self.id!r} was not drawn by Plotly"
        if not self.traces:
            return f"plot {self.id!r} has no data"
        empty = [f"{name or '(unnamed)'} ({kind})" for name, kind, points in self.traces if points == 0]
        if empty:
            return f"plot {self.id!r} has traces without points: {', '.join(empty)}"
        return None


@dataclasses.dataclass(frozen=True)
class PageCheck:
    """What the browser saw of one page.

    Attributes
    ----------
    path : pathlib.Path
        The file opened.
    title : str
        The page's ``<title>``.
    console : tuple of str
        Console messages of the types in :data:`FAILING_CONSOLE`, as ``"type: text"``.
    page_errors : tuple of str
        Uncaught exceptions of the page's scripts.
    requests : tuple of str
        Every URL the page requested besides the file itself (each was aborted).
    plots : tuple of Plot
        Every Plotly container.
    screenshot : pathlib.Path
        The full-page screenshot (PNG).
    """

    path: Path
    title: str
    console: tuple[str, ...]
    page_errors: tuple[str, ...]
    requests: tuple[str, ...]
    plots: tuple[Plot, ...]
    screenshot: Path

    @property
    def problems(self) -> tuple[str, ...]:
        """Every problem, one line each (empty: the page is clean)."""
        return (tuple(f"console {line}" for line in self.console)
                + tuple(f"page error: {line}" for line in self.page_errors)
                + tuple(f"request for {url}" for url in self.requests)
                + tuple(plot.problem for plot in self.plots if plot.problem is not None))

    def assert_clean(self, *, min_plots: int = 1) -> None:
        """Raise one AssertionError naming every problem (and the screenshot to look at), or
        when the page has fewer than ``min_plots`` plots."""
        problems = list(self.problems)
        if len(self.plots) < min_plots:
            problems.append(f"{len(self.plots)} plots, expected at least {min_plots}")
        if problems:
            raise AssertionError(f"{self.path.name} (screenshot {self.screenshot}):\n  " + "\n  ".join(problems))


class Browser:
    """A headless Chromium for :meth:`open`; a context manager (one browser for several pages)."""

    def __init__(self) -> None:
        self._playwright = None
        self._browser = None

    def __enter__(self) -> Browser:
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        try:
            self._browser = self._playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                                             args=list(CHROMIUM_ARGS))
        except BaseException:
            self._playwright.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self._browser is not None:
                self._browser.close()
        finally:
            if self._playwright is not None:
                self._playwright.stop()

    def open(self, path: str | os.PathLike, screenshot_dir: str | os.PathLike) -> PageCheck:
        """Open ``path`` (a local file) in a fresh context, wait for its load event and for
        Plotly to draw every plot, record what :class:`PageCheck` lists, and save the
        screenshot ``<screenshot_dir>/<file stem>.png`` (its path is printed)."""
        assert self._browser is not None, "use Browser() as a context manager"
        path = Path(path).resolve()
        url = path.as_uri()
        console: list[str] = []
        page_errors: list[str] = []
        requests: list[str] = []
        context = self._browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
        try:
            page = context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            page.on("console", lambda message: console.append(f"{message.type}: {message.text}")
                    if message.type in FAILING_CONSOLE else None)
            page.on("pageerror", lambda error: page_errors.append(str(error)))

            def route(request_route) -> None:
                if request_route.request.url == url:
                    request_route.continue_()
                else:
                    requests.append(request_route.request.url)
                    request_route.abort()

            page.route("**/*", route)
            page.on("websocket", lambda socket: requests.append(socket.url))
            page.goto(url, wait_until="load")
            try:
                page.wait_for_function(_ALL_DRAWN_JS, arg=PLOT_CONTAINERS, timeout=DRAW_TIMEOUT_MS)
            except Exception:  # noqa: BLE001 - a plot Plotly never drew is reported by Plot.problem
                pass
            title = page.title()
            plots = tuple(Plot(id=str(entry["id"]), rendered=bool(entry["rendered"]),
                               traces=tuple((str(t["name"]), str(t["type"]), int(t["points"]))
                                            for t in entry["traces"]))
                          for entry in page.evaluate(_PLOTS_JS, PLOT_CONTAINERS))
            screenshot = Path(screenshot_dir) / f"{path.stem}.png"
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            context.close()
        print(f"screenshot of {path.name}: {screenshot}")
        return PageCheck(path=path, title=title, console=tuple(console), page_errors=tuple(page_errors),
                         requests=tuple(requests), plots=plots, screenshot=screenshot)


def check_page(path: str | os.PathLike, screenshot_dir: str | os.PathLike) -> PageCheck:
    """:meth:`Browser.open` with a browser of its own (for a single page)."""
    with Browser() as browser:
        return browser.open(path, screenshot_dir)
