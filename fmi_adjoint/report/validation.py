"""The HTML report of a validation (``fmi-adjoint validate --report``, of an FMU or, with
``--ssp``, of a system of FMUs).

The numbers are the summary ``validate`` writes to ``report.json``
(:func:`~fmi_adjoint.fmu.validation.error_statistics`: per output the RMS and maximum error and
the RMS relative to the measurement's), the signals the measured and the re-simulated outputs
of the same :class:`~fmi_adjoint.fmu.validation.Validation`.  The page: a summary (which FMU or
system against which data, re-simulated how, the worst fit), the RMS table, and per
output the measured and re-simulated signals over their difference (measured − re-simulated,
as an identification's residual); the summary itself as a
JSON block (``<script type="application/json" id="validation-json">``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..fmu.validation import Validation
from .html import Page, plot_text

__all__ = ["LARGE_ERROR", "validation_report"]

#: A relative RMS error above this (10 % of the signal's RMS) is flagged in the table: the
#: re-simulation does not reproduce the measurement to plotting accuracy.
LARGE_ERROR = 0.1

_MEASURED, _SIMULATED, _DIFFERENCE = "#555555", "#1f77b4", "#d62728"


def validation_report(validation: Validation, *, title: str | None = None, notes: Sequence[str] = ()) -> Page:
    """The report page of ``validation``; ``notes`` (plain sentences, e.g. that the FMU does not
    carry RESULT.json's values) are shown as warnings in the summary."""
    summary = validation.summary
    model, data = Path(validation.path).name, Path(str(summary["data"])).name
    page = Page(title or f"Validation of {model} against {data}",
                subtitle=f"re-simulated through {validation.method}, {summary['samples']} samples")
    _summary(page, validation, notes)
    _table(page, validation)
    page.section("Signals")
    page.paragraph("Per output: the measured and the re-simulated signal (top) and their difference, "
                   "measured − re-simulated (bottom, the sign of an identification's residual). Drag to zoom; "
                   "click a legend entry to hide a trace.",
                   kind="note")
    for k, name in enumerate(validation.data.columns):
        _output_figure(page, validation, k, name)
    page.section("report.json")
    page.paragraph("The summary is embedded in this page as the JSON block with id 'validation-json'.", kind="note")
    page.data("validation-json", summary)
    return page


def _summary(page: Page, validation: Validation, notes: Sequence[str]) -> None:
    summary = validation.summary
    page.section("Summary")
    outputs = list(summary["outputs"])
    page.paragraph(f"The {validation.kind} {validation.path} was re-simulated through {validation.method} at "
                   f"the {summary['samples']} sample times of {summary['data']} and compared with its "
                   f"{len(outputs)} measured output{'s' if len(outputs) != 1 else ''} ({', '.join(outputs)}).")
    relative = {name: stats["relative_rms_error"] for name, stats in summary["outputs"].items()
                if stats["relative_rms_error"] is not None}
    warnings = list(notes)
    if relative:
        worst = max(relative, key=relative.__getitem__)
        text = (f"The largest RMS error relative to the signal's RMS is {100 * relative[worst]:.3g} % ({worst}).")
        large = [name for name, value in relative.items() if value > LARGE_ERROR]
        if large:
            warnings.append(f"{', '.join(large)}: RMS error above {100 * LARGE_ERROR:g} % of the signal's RMS; the "
                            "re-simulation does not reproduce the measurement there.")
        page.paragraph(text, kind="warning" if large else "success")
    zero = [name for name, stats in summary["outputs"].items() if stats["relative_rms_error"] is None]
    if zero:
        warnings.append(f"{', '.join(zero)}: the measurement is zero throughout, so no relative error is given.")
    if warnings:
        page.bullets(warnings, kind="warning")


def _table(page: Page, validation: Validation) -> None:
    page.section("RMS errors")
    rows, flagged = [], []
    for name, stats in validation.summary["outputs"].items():
        relative = stats["relative_rms_error"]
        rows.append([name, validation.units.get(name, ""), stats["rms_error"], stats["max_abs_error"],
                     None if relative is None else 100 * relative])
        flagged.append(relative is not None and relative > LARGE_ERROR)
    page.table(["output", "unit", "RMS error", "max |error|", "RMS error [% of the signal's RMS]"], rows,
               element_id="rms-errors", flagged=flagged,
               caption=f"flagged: RMS error above {100 * LARGE_ERROR:g} % of the signal's RMS")


def _output_figure(page: Page, validation: Validation, k: int, name: str) -> None:
    unit = validation.units.get(name, "")
    label = f"{name} [{unit}]" if unit else name
    t = validation.data.times
    measured, simulated = validation.data.values[:, k], validation.simulated[:, k]
    data = [
        {"type": "scatter", "mode": "lines", "name": "measured", "x": t, "y": measured,
         "line": {"color": _MEASURED, "width": 2.2}},
        {"type": "scatter", "mode": "lines", "name": validation.legend, "x": t, "y": simulated,
         "line": {"color": _SIMULATED, "width": 1.3, "dash": "dash"}},
        {"type": "scatter", "mode": "lines", "name": "difference", "x": t, "y": measured - simulated,
         "xaxis": "x2", "yaxis": "y2", "line": {"color": _DIFFERENCE, "width": 1.0}},
    ]
    stats = validation.summary["outputs"][name]
    layout = {
        "title": {"text": plot_text(f"{name}: RMS error {stats['rms_error']:.3g}, max {stats['max_abs_error']:.3g}")},
        "xaxis": {"anchor": "y", "matches": "x2", "showticklabels": False},
        "yaxis": {"domain": [0.36, 1.0], "title": {"text": plot_text(label)}},
        "xaxis2": {"anchor": "y2", "title": {"text": "time [s]"}},
        # "1e-13", not Plotly's SI prefixes ("100f"), for a difference that may be round-off.
        "yaxis2": {"domain": [0.0, 0.26], "exponentformat": "e",
                   "title": {"text": plot_text("measured − simulated" + (f" [{unit}]" if unit else ""))}},
    }
    page.figure({"data": data, "layout": layout}, height=460)
