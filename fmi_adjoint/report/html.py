"""A small builder of one self-contained HTML page: headings, paragraphs, lists, tables,
interactive Plotly figures and JSON data blocks.

The page needs nothing but itself: the style sheet is inline, plotly.js is inlined once
(:func:`plotly.offline.get_plotlyjs`, only when the page has a figure), figures and data are
JSON blocks in the page, and no element refers to a URL (no CDN, web font or MathJax).  Every
text given to the builder is escaped: names and units come from model files and FMUs, so they
are data, never markup.

Usage::

    page = Page("Identification of sdof")
    page.section("Summary")                 # <h2>, listed in the contents at the top
    page.paragraph("Converged.", kind="success")   # kind: "", "note", "warning", "success"
    page.bullets(["first", "second"])
    page.table(["parameter", "value"], [["c", 1.25], ["d", None]])   # floats keep every digit
    page.figure({"data": [{"x": [0, 1], "y": [1, 2]}], "layout": {"title": {"text": plot_text("a<b")}}})
    page.data("result-json", payload)       # <script type="application/json" id="result-json">
    page.write("report.html")               # atomic: a failure leaves no half-written file

Numbers in tables are shown with :data:`SHOWN_DIGITS` significant digits and carry their full
value in the cell's ``data-value`` attribute (``repr`` of the float), so a reader (or a test)
gets the exact number.  Text that goes into a figure (titles, axis labels, trace names) must
pass through :func:`plot_text`: Plotly reads such text as a small subset of HTML.
"""

from __future__ import annotations

import dataclasses
import html
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..files import atomic_output

__all__ = ["Page", "Cell", "SHOWN_DIGITS", "format_number", "plot_text", "json_for_script"]

#: Significant digits of the numbers shown in tables (the full value is in ``data-value``).
SHOWN_DIGITS = 6

#: Significant digits of the numbers in figures (what a plot can show, and a third of the size).
PLOT_DIGITS = 7

_STYLE = """
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; margin: 0;
       color: #1d1f23; background: #fafafa; line-height: 1.45; }
main { max-width: 1180px; margin: 0 auto; padding: 1.2em 1.6em 3em; }
h1 { font-size: 1.6em; margin: 0.4em 0 0.2em; }
h2 { font-size: 1.3em; margin: 1.8em 0 0.5em; padding-bottom: 0.2em; border-bottom: 1px solid #d5d8dc; }
h3 { font-size: 1.08em; margin: 1.3em 0 0.4em; }
p { margin: 0.45em 0; }
nav.contents { font-size: 0.92em; background: #f0f2f4; padding: 0.5em 1em; border-radius: 4px; }
nav.contents a { margin-right: 1.1em; white-space: nowrap; }
.note { color: #37474f; }
.warning { background: #fff4e0; border-left: 4px solid #e69500; padding: 0.35em 0.7em; }
.success { background: #e8f5e9; border-left: 4px solid #2e7d32; padding: 0.35em 0.7em; }
.failure { background: #fdecea; border-left: 4px solid #c62828; padding: 0.35em 0.7em; }
table { border-collapse: collapse; margin: 0.6em 0 1em; font-size: 0.93em; background: #fff; }
caption { text-align: left; font-size: 0.95em; padding: 0.2em 0; color: #37474f; }
th, td { border: 1px solid #d5d8dc; padding: 0.25em 0.6em; vertical-align: top; }
th { background: #eef0f3; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; font-family: ui-monospace, Menlo, Consolas,
         monospace; }
tr.flagged td { background: #fff4e0; }
.plot { width: 100%; min-height: 200px; background: #fff; margin: 0.4em 0 1em; }
pre { background: #f0f2f4; padding: 0.6em; overflow-x: auto; font-size: 0.88em; }
footer { margin-top: 3em; font-size: 0.85em; color: #5f6368; }
"""

# Draws every figure from its JSON block once plotly.js is loaded (no inline JavaScript per figure).
_DRAW = """
document.querySelectorAll("div.plot[data-spec]").forEach(function (div) {
  var spec = JSON.parse(document.getElementById(div.getAttribute("data-spec")).textContent);
  Plotly.newPlot(div, spec.data, spec.layout, spec.config);
});
"""

_PLOT_CONFIG = {"displaylogo": False, "responsive": True, "showLink": False, "showSendToCloud": False,
                "showEditInChartStudio": False, "toImageButtonOptions": {"format": "png"}}


def format_number(value: float | int | np.number | None, digits: int = SHOWN_DIGITS) -> str:
    """``value`` with ``digits`` significant digits ("-" for None, "nan"/"inf" as such)."""
    if value is None:
        return "-"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    value = float(value)
    if not math.isfinite(value):
        return str(value)
    return f"{value:.{digits}g}"


def plot_text(text: object) -> str:
    """``text`` for a Plotly title, axis label or trace name: Plotly reads ``<b>``, ``<br>``
    and entities there, so ``&``, ``<`` and ``>`` are escaped (it shows them as typed)."""
    return html.escape(str(text), quote=False)


def json_for_script(value: object) -> str:
    """``value`` as JSON that can stand inside a ``<script>`` element: ``<``, ``>`` and ``&``
    (so no ``</script>`` or ``<!--``) and the JavaScript line separators are written as
    ``\\uXXXX`` escapes, which JSON readers decode back.  NaN and infinities are refused
    (JSON has none; RESULT.json holds None there)."""
    text = json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    for ch in "<>&\u2028\u2029":
        text = text.replace(ch, f"\\u{ord(ch):04x}")
    return text


@dataclasses.dataclass(frozen=True)
class Cell:
    """A table cell with a shown text different from its value (e.g. a number with a unit
    or a flag): ``text`` is shown, ``value`` (if not None) goes to ``data-value``."""

    text: str
    value: float | None = None
    numeric: bool = True


def _cell(value: object) -> str:
    if isinstance(value, Cell):
        data = "" if value.value is None else f' data-value="{_attribute(repr(float(value.value)))}"'
        css = ' class="num"' if value.numeric else ""
        return f"<td{css}{data}>{html.escape(value.text)}</td>"
    if value is None:
        return '<td class="num">-</td>'
    if isinstance(value, (bool, np.bool_)):
        return f"<td>{'yes' if value else 'no'}</td>"
    if isinstance(value, (int, float, np.integer, np.floating)):
        number = float(value)
        data = f' data-value="{_attribute(repr(number))}"' if math.isfinite(number) else ""
        return f'<td class="num"{data}>{html.escape(format_number(value))}</td>'
    return f"<td>{html.escape(str(value))}</td>"


def _attribute(text: str) -> str:
    return html.escape(text, quote=True)


def _plot_values(value: Any) -> Any:
    """Figure data as JSON values: arrays as lists of floats with :data:`PLOT_DIGITS` digits,
    NaN and infinities as null (a gap in a line)."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "fc" or value.dtype.kind in "iu":
            flat = np.asarray(value, dtype=float)
            return [_plot_values(v) for v in flat.tolist()] if flat.ndim > 1 else [
                float(f"{v:.{PLOT_DIGITS}g}") if math.isfinite(v) else None for v in flat.tolist()]
        return [_plot_values(v) for v in value.tolist()]
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return float(f"{v:.{PLOT_DIGITS}g}") if math.isfinite(v) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, Mapping):
        return {str(k): _plot_values(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plot_values(v) for v in value]
    return value


_ANCHOR = re.compile(r"[^a-z0-9]+")


class Page:
    """One self-contained HTML page, built block by block (see the module docstring).

    Parameters
    ----------
    title : str
        The page's ``<title>`` and ``<h1>``.
    subtitle : str, optional
        A line under the title.
    """

    def __init__(self, title: str, subtitle: str = ""):
        self.title = title
        self.subtitle = subtitle
        self._blocks: list[str] = []
        self._sections: list[tuple[str, str]] = []
        self._anchors: set[str] = set()
        self._figures = 0

    def _anchor(self, title: str) -> str:
        base = _ANCHOR.sub("-", title.lower()).strip("-") or "section"
        anchor, k = base, 1
        while anchor in self._anchors:
            k += 1
            anchor = f"{base}-{k}"
        self._anchors.add(anchor)
        return anchor

    def section(self, title: str) -> str:
        """A section heading (``<h2>``), listed in the contents; returns its anchor (``id``)."""
        anchor = self._anchor(title)
        self._sections.append((anchor, title))
        self._blocks.append(f'<h2 id="{anchor}">{html.escape(title)}</h2>')
        return anchor

    def subsection(self, title: str) -> str:
        """A heading inside a section (``<h3>``); returns its anchor."""
        anchor = self._anchor(title)
        self._blocks.append(f'<h3 id="{anchor}">{html.escape(title)}</h3>')
        return anchor

    def paragraph(self, text: str, kind: str = "") -> None:
        """A paragraph; ``kind`` "note", "warning", "success" or "failure" styles it."""
        if kind not in ("", "note", "warning", "success", "failure"):
            raise ValueError(f"paragraph kind {kind!r}: give '', 'note', 'warning', 'success' or 'failure'.")
        css = f' class="{kind}"' if kind else ""
        self._blocks.append(f"<p{css}>{html.escape(text)}</p>")

    def bullets(self, items: Sequence[str], kind: str = "") -> None:
        """A bulleted list; ``kind`` as for :meth:`paragraph` styles each item."""
        css = f' class="{kind}"' if kind else ""
        self._blocks.append("<ul>" + "".join(f"<li{css}>{html.escape(item)}</li>" for item in items) + "</ul>")

    def table(self, header: Sequence[str], rows: Sequence[Sequence[object]], *, caption: str = "",
              element_id: str = "", flagged: Sequence[bool] | None = None) -> None:
        """A table.  Cells: str (text), int or float (a number: :func:`format_number` shown, the
        full value in ``data-value``), None ("-"), bool ("yes"/"no") or :class:`Cell`.
        ``flagged`` rows are highlighted (a parameter at a bound, say); ``element_id`` names the
        table for readers."""
        ident = f' id="{_attribute(element_id)}"' if element_id else ""
        parts = [f"<table{ident}>"]
        if caption:
            parts.append(f"<caption>{html.escape(caption)}</caption>")
        parts.append("<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr></thead><tbody>")
        for k, row in enumerate(rows):
            if len(row) != len(header):
                raise ValueError(f"table row {k}: {len(row)} cells for {len(header)} columns.")
            css = ' class="flagged"' if flagged is not None and flagged[k] else ""
            parts.append(f"<tr{css}>" + "".join(_cell(value) for value in row) + "</tr>")
        parts.append("</tbody></table>")
        self._blocks.append("".join(parts))

    def figure(self, figure: Mapping[str, Any], height: int = 420) -> None:
        """An interactive Plotly figure: a mapping with ``data`` (traces) and ``layout``, as
        Plotly.js reads it.  Pass its texts through :func:`plot_text`."""
        if not isinstance(figure, Mapping):
            raise TypeError(f"Page.figure: give a dict with 'data' and 'layout', not {type(figure).__name__}.")
        spec = dict(figure)
        layout = dict(spec.get("layout", {}))
        layout.setdefault("height", height)
        body = {"data": _plot_values(list(spec.get("data", []))), "layout": _plot_values(layout),
                "config": _PLOT_CONFIG}
        self._figures += 1
        name = f"figure-{self._figures}"
        self._blocks.append(
            f'<div class="plot" id="{name}" data-spec="{name}-spec" style="height:{int(layout["height"])}px"></div>'
            f'<script type="application/json" id="{name}-spec">{json_for_script(body)}</script>')

    def data(self, element_id: str, value: object) -> None:
        """``value`` as a JSON block ``<script type="application/json" id=element_id>`` (read
        with ``JSON.parse(document.getElementById(element_id).textContent)``)."""
        self._blocks.append(f'<script type="application/json" id="{_attribute(element_id)}">'
                            f"{json_for_script(value)}</script>")

    def preformatted(self, text: str) -> None:
        """Preformatted text (``<pre>``, escaped)."""
        self._blocks.append(f"<pre>{html.escape(text)}</pre>")

    @property
    def figures(self) -> int:
        """How many figures the page has."""
        return self._figures

    def html(self) -> str:
        """The whole page."""
        head = [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            # Nothing may be loaded from anywhere: the page is the whole report.
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data: blob:; "
            "font-src data:; connect-src 'none'\">",
            f"<title>{html.escape(self.title)}</title>",
            f"<style>{_STYLE}</style>",
        ]
        if self._figures:
            head.append(f"<script>{_plotly_js()}</script>")
        head.append("</head><body><main>")
        body = [f"<h1>{html.escape(self.title)}</h1>"]
        if self.subtitle:
            body.append(f'<p class="note">{html.escape(self.subtitle)}</p>')
        if self._sections:
            body.append('<nav class="contents">' + "".join(
                f'<a href="#{anchor}">{html.escape(title)}</a>' for anchor, title in self._sections) + "</nav>")
        body.extend(self._blocks)
        body.append("<footer>Written by fmi-adjoint. This file is self-contained: it loads nothing.</footer>")
        tail = [f"<script>{_DRAW}</script>"] if self._figures else []
        return "\n".join([*head, *body, "</main>", *tail, "</body></html>", ""])

    def write(self, path: str | os.PathLike) -> None:
        """Write the page to ``path`` atomically (:func:`~fmi_adjoint.files.atomic_output`):
        the page is rendered first, and a failure leaves no half-written file."""
        text = self.html()
        with atomic_output(path) as handle:
            handle.write(text)


def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    js = get_plotlyjs()
    # An HTML parser ends a script at "</script"; plotly.js has none, but say so if it ever does.
    if "</script" in js.lower():
        raise RuntimeError("this plotly.js contains '</script' and cannot be inlined; use another plotly version.")
    return js
