"""The HTML report of an identification (``identify --report``, the demo).

Every number on the page comes from the RESULT.json payload (the page embeds it as
``<script type="application/json" id="result-json">``, and the parameter table's cells carry
the payload's floats in ``data-value``), so the report and RESULT.json agree by construction;
the signals come from :func:`~fmi_adjoint.report.signals.compare_fit`.  Sections:

1. summary: what was identified from what, success, every warning;
2. parameters: start, identified, standard error, relative 95 % confidence interval, at a
   bound, unit;
3. identifiability: the correlation matrix as a heat map, the eigen-directions of the
   relative covariance ``diag(s) C diag(s)``, ``s = se/|x|`` (the Fisher
   information's eigen-directions, its smallest eigenvalues being the largest spreads), the
   poorly determined combinations and the unidentifiable parameters named;
4. signals: per experiment and channel the measured, initial and identified values with
   units, the residual, its amplitude spectrum and its autocorrelation with the white-noise
   band ``±1.96/√N``;
5. convergence: the cost per iteration with the stage boundaries, the stages, the
   multi-start clusters and every start;
6. computation: discretization error, engine, integrator, step, gradient, timings.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..identify.problem import AbstractIdentificationProblem
from ..identify.strategies import stage_starts
from .html import Cell, Page, format_number, plot_text
from .signals import ChannelComparison, compare_fit_or_identified

__all__ = ["identification_report", "write_identification_report", "whiteness", "residual_spectrum", "NOT_WHITE",
           "eigen_directions", "Z_95"]

#: Two-sided 95 % quantile of the normal distribution (confidence intervals, white-noise band).
Z_95 = 1.96

#: A direction whose standard deviation is this many times the best-determined direction's is
#: named poorly determined (a correlation of about 0.98 between two parameters makes 10).
POORLY_DETERMINED_RATIO = 10.0

#: A residual is called not white where more than this share of its autocorrelation lags lies
#: outside the band ``±1.96/√N`` (white noise leaves about 5 % outside).
NOT_WHITE = 0.10

#: Largest autocorrelation lag shown (samples).
MAX_LAG = 400

#: Points drawn per curve at most (a longer record is drawn every k-th sample): a figure of a
#: million samples would make the page hundreds of megabytes and the browser slow.
MAX_PLOT_POINTS = 20_000

_COLORS = {"measured": "#9e9e9e", "initial": "#d62728", "identified": "#1f77b4", "residual": "#2ca02c",
           "band": "#e69500"}


def write_identification_report(path: str | os.PathLike, problem: AbstractIdentificationProblem,
                                payload: Mapping[str, Any], *, title: str | None = None,
                                comparisons: Sequence[ChannelComparison] | None = None,
                                initial_shown: bool = True) -> Page:
    """Build :func:`identification_report` and write it atomically to ``path``; returns the page.

    ``comparisons`` (with ``initial_shown``) as :func:`~fmi_adjoint.report.signals.compare_fit_or_identified`
    returns them; None: computed here at the payload's initial and identified values (where the
    start values cannot be simulated over the whole record, a staged fit whose start diverges
    there, the page shows the identified curves without the initial ones)."""
    if comparisons is None:
        x0 = np.array([payload["initial"][name] for name in problem.names], dtype=float)
        x1 = np.array([payload["parameters"][name] for name in problem.names], dtype=float)
        comparisons, initial_shown = compare_fit_or_identified(problem, x0, x1)
    page = identification_report(payload, comparisons, title=title, units=problem.parameter_units(),
                                 details=problem.run_details(), initial_shown=initial_shown)
    page.write(path)
    return page


def identification_report(payload: Mapping[str, Any], comparisons: Sequence[ChannelComparison] = (), *,
                          title: str | None = None, units: Mapping[str, str] | None = None,
                          details: Mapping[str, str] | None = None, initial_shown: bool = True) -> Page:
    """The report page of the RESULT.json ``payload`` (see the module docstring).

    Parameters
    ----------
    payload : mapping
        What ``identify`` writes to RESULT.json.
    comparisons : sequence of ChannelComparison
        The signals (:func:`~fmi_adjoint.report.signals.compare_fit`); none: no signal section.
    title : str, optional
        Default: "Identification of P1, P2 (MODEL)".
    units : mapping of str to str, optional
        Unit text of the parameters by name
        (:meth:`~fmi_adjoint.identify.problem.AbstractIdentificationProblem.parameter_units`).
    details : mapping of str to str, optional
        The engine and the step
        (:meth:`~fmi_adjoint.identify.problem.AbstractIdentificationProblem.run_details`), which RESULT.json
        does not record.
    initial_shown : bool
        False where the comparisons' initial curves are not the start values' (not drawn).
    """
    names = list(payload["parameters"])
    page = Page(title or f"Identification of {', '.join(names)} ({_source(payload)})",
                "fmi-adjoint identification report: every number on this page is RESULT.json's, which is embedded "
                "at the end.")
    _summary(page, payload, comparisons)
    _parameters(page, payload, units or {})
    _identifiability(page, payload)
    if comparisons:
        _signals(page, comparisons, initial_shown)
    _convergence(page, payload)
    _computation(page, payload, details or {})
    page.section("RESULT.json")
    page.paragraph("The result file as written by fmi-adjoint is embedded in this page as a JSON block with id "
                   "\"result-json\" (non-finite numbers as null).", kind="note")
    page.data("result-json", _finite(payload))
    return page


# --- summary and parameters ---------------------------------------------------------------

def _source(payload: Mapping[str, Any]) -> str:
    if payload.get("fmu"):
        return Path(str(payload["fmu"])).name
    return str(payload.get("model") or "model")


def _summary(page: Page, payload: Mapping[str, Any], comparisons: Sequence[ChannelComparison]) -> None:
    page.section("Summary")
    names = list(payload["parameters"])
    data = list(payload.get("data") or [])
    cost = payload.get("cost_function") or {}
    channels = list(dict.fromkeys(c.channel for c in comparisons))
    what = (f"Identified {len(names)} parameter{'s' if len(names) != 1 else ''} ({', '.join(names)}) of "
            f"{_source(payload)} from {len(data)} experiment{'s' if len(data) != 1 else ''}"
            + (f" ({', '.join(data)})" if data else "")
            + (f", channels {', '.join(channels)}" if channels else "")
            + f"; cost: {_cost_text(cost)}; optimizer: {payload.get('method', '?')}.")
    page.paragraph(what)
    success = bool(payload.get("success"))
    message = str(payload.get("message") or "")
    page.paragraph(("The fit succeeded" if success else "The fit is not a success") + (f": {message}" if message
                                                                                      else "."),
                   kind="success" if success else "failure")
    start = payload.get("cost_initial")
    page.paragraph(f"Cost {format_number(start) if start is not None else '(not simulated at the start values)'} "
                   f"at the start values, {format_number(payload.get('cost'))} identified; "
                   f"{payload.get('iterations', '?')} iterations, {payload.get('simulations', '?')} simulations, "
                   f"{format_number(payload.get('seconds'), 3)} s.")
    warnings = [str(w) for w in payload.get("warnings") or []]
    if payload.get("failed_simulations"):
        warnings.append(f"{payload['failed_simulations']} simulation(s) failed during the fit (the optimizer "
                        "stepped back from parameter values that could not be simulated).")
    if warnings:
        page.paragraph(f"{len(warnings)} warning{'s' if len(warnings) != 1 else ''}:")
        page.bullets(warnings, kind="warning")
    else:
        page.paragraph("No warnings.", kind="note")


def _cost_text(cost: Mapping[str, Any]) -> str:
    kind = cost.get("cost", "time")
    if kind == "time":
        return "least squares of the time series"
    if kind == "fourier":
        return f"Fourier spectrum of {cost.get('channel')} ({cost.get('kind')} misfit)"
    if kind == "orders":
        return f"engine order {format_number(cost.get('order'))} of {cost.get('channel')} ({cost.get('kind')} misfit)"
    if kind == "pod":
        return "POD modal coordinates"
    return str(kind)


def _parameters(page: Page, payload: Mapping[str, Any], units: Mapping[str, str]) -> None:
    page.section("Parameters")
    names = list(payload["parameters"])
    std = payload.get("std_errors") or {}
    bounds = set(payload.get("active_bounds") or [])
    unidentifiable = set(payload.get("unidentifiable") or [])
    true = payload.get("true_values") or {}  # the demo knows them
    rows, flagged = [], []
    for name in names:
        value, se = payload["parameters"][name], std.get(name)
        relative = Z_95 * se / abs(value) * 100 if se is not None and value else None
        rows.append([name, payload["initial"][name], value, se,
                     Cell(f"±{format_number(relative, 3)} %", relative) if relative is not None else None,
                     Cell("yes", numeric=False) if name in bounds else Cell("no", numeric=False),
                     units.get(name, ""), *([true.get(name)] if true else [])])
        flagged.append(name in bounds or name in unidentifiable)
    page.table(["parameter", "start", "identified", "standard error", "95 % confidence (relative)", "at a bound",
                "unit", *(["true value"] if true else [])], rows, element_id="parameters",
               caption="95 % confidence interval: identified ± 1.96 standard errors, relative to the identified value. "
                       "Rows on a bound or not identifiable are highlighted.", flagged=flagged)
    if not std:
        page.paragraph("No standard errors: they come from the Gauss-Newton covariance of a least-squares (time "
                       "series) cost.", kind="note")
    elif any(v is None for v in std.values()):
        page.paragraph("A standard error shown as '-' could not be computed: the data do not determine that "
                       "parameter (see Identifiability).", kind="note")
    if bounds:
        page.paragraph(f"On a bound: {', '.join(sorted(bounds))}. The standard error is then only indicative: the "
                       "minimum may lie beyond the bound.", kind="warning")


# --- identifiability ----------------------------------------------------------------------

def eigen_directions(values: Sequence[float], std_errors: Sequence[float],
                     correlation: np.ndarray | Sequence[Sequence[float]]) -> list[tuple[float, np.ndarray]]:
    """The principal directions of the relative covariance ``diag(s) C diag(s)`` with
    ``s = std_error/|value|``, from the largest spread down: ``(relative standard deviation,
    unit direction)`` pairs.  They are the eigen-directions of the (relative) Fisher
    information, whose eigenvalues are the reciprocal variances."""
    s = np.asarray(std_errors, dtype=float) / np.abs(np.asarray(values, dtype=float))
    covariance = np.outer(s, s) * np.asarray(correlation, dtype=float)
    w, V = np.linalg.eigh((covariance + covariance.T) / 2)
    order = np.argsort(w)[::-1]
    out = []
    for k in order:
        v = V[:, k]
        v = v if v[np.argmax(np.abs(v))] > 0 else -v  # sign: the largest component positive
        out.append((float(math.sqrt(max(w[k], 0.0))), v))
    return out


def _combination(names: Sequence[str], direction: np.ndarray) -> str:
    """``0.71 Δc/c − 0.70 Δd/d`` (components below 0.05 left out)."""
    terms: list[str] = []
    for name, a in zip(names, direction):
        if abs(a) >= 0.05:
            sign = "−" if a < 0 else ("+" if terms else "")
            terms.append(f"{sign} {abs(a):.2f} Δ{name}/{name}".strip())
    return " ".join(terms)


def _identifiability(page: Page, payload: Mapping[str, Any]) -> None:
    page.section("Identifiability")
    names = list(payload["parameters"])
    unidentifiable = list(payload.get("unidentifiable") or [])
    if unidentifiable:
        page.paragraph(f"Not identifiable from these data: {', '.join(unidentifiable)} (zero or near-singular Fisher "
                       "information: the outputs do not change with it, or only together with others).",
                       kind="warning")
    else:
        page.paragraph("Every parameter is identifiable from these data (the Fisher information is regular).",
                       kind="note")
    corr = payload.get("correlation")
    std = payload.get("std_errors") or {}
    if corr is None or len(names) < 2:
        page.paragraph("No correlation matrix: " + ("one parameter." if len(names) < 2 else
                       "it needs standard errors of every parameter (a least-squares cost with a regular Fisher "
                       "information and a residual)."), kind="note")
        return
    C = np.asarray(corr, dtype=float)
    labels = [plot_text(n) for n in names]
    text = [[f"{v:.3f}" for v in row] for row in C]
    page.subsection("Correlation matrix")
    page.figure({"data": [{"type": "heatmap", "z": C, "x": labels, "y": labels, "zmin": -1, "zmax": 1,
                           "colorscale": "RdBu", "reversescale": True, "text": text, "texttemplate": "%{text}",
                           "hovertemplate": "%{y} / %{x}: %{z:.4f}<extra></extra>"}],
                 "layout": {"title": {"text": "parameter correlation"}, "yaxis": {"autorange": "reversed"},
                            "margin": {"l": 90, "r": 30, "t": 50, "b": 60}}},
                height=max(320, 60 + 45 * len(names)))
    strongest = max(((abs(C[i, j]), i, j) for i in range(len(names)) for j in range(i)), default=None)
    if strongest is not None:
        r, i, j = strongest
        page.paragraph(f"Strongest correlation: {names[i]} and {names[j]}, {C[i, j]:+.3f}"
                       + (" (the data determine mainly a combination of the two)." if r > 0.95 else "."))
    values = [payload["parameters"][n] for n in names]
    if any(std.get(n) is None for n in names) or any(v == 0 for v in values):
        return
    directions = eigen_directions(values, [std[n] for n in names], C)
    best = directions[-1][0]
    page.subsection("Fisher-information eigen-directions")
    rows, flagged, poor = [], [], []
    for k, (sigma, v) in enumerate(directions):
        verdict = _verdict(sigma, v, best)
        combination = _combination(names, v)
        rows.append([k + 1, combination, Cell(f"±{format_number(Z_95 * sigma * 100, 3)} %", Z_95 * sigma * 100),
                     Cell(format_number(sigma / best, 3) if best > 0 else "-", sigma / best if best > 0 else None),
                     Cell(verdict, numeric=False)])
        flagged.append(verdict != "well determined")
        if verdict != "well determined":
            poor.append(f"{combination} ({verdict})")
    page.table(["direction", "combination of relative changes", "95 % spread along it",
                "spread / best direction", "verdict"], rows, element_id="eigen-directions", flagged=flagged,
               caption="Principal directions of the relative covariance diag(s)·C·diag(s), s = standard error / "
                       "|identified value|, in relative parameter changes: "
                       "the eigenvectors of the Fisher information, the largest spread first. A combination of "
                       f"parameters is poorly determined where its spread is {POORLY_DETERMINED_RATIO:g} or more "
                       "times the best direction's (strong correlation); any direction is undetermined where its 95 % "
                       "spread exceeds 100 %.")
    if poor:
        page.paragraph("Poorly determined: " + "; ".join(poor) + ". The data fix the other directions much better; "
                       "an experiment that excites this combination, or fixing one of its parameters, would help.",
                       kind="warning")
    else:
        page.paragraph("No combination is poorly determined.", kind="note")


def _verdict(sigma: float, direction: np.ndarray, best: float) -> str:
    """"undetermined" (95 % spread above 100 %), "poorly determined combination" (two or more
    parameters with weight >= 0.3 and a spread >= POORLY_DETERMINED_RATIO times the best), else
    "well determined"."""
    if Z_95 * sigma > 1.0:
        return "undetermined"
    mixed = int(np.sum(np.abs(direction) >= 0.3)) >= 2
    if mixed and best > 0 and sigma >= POORLY_DETERMINED_RATIO * best:
        return "poorly determined combination"
    return "well determined"


# --- signals ------------------------------------------------------------------------------

def whiteness(residual: np.ndarray, max_lag: int = MAX_LAG) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Normalized autocorrelation of ``residual`` (mean removed) at lags ``0..L``, the band
    ``±1.96/√N`` of white noise, and the share of lags ``1..L`` outside it.  White residuals
    leave about 5 % outside; a model that misses part of the signal leaves many more."""
    r = np.asarray(residual, dtype=float)
    r = r - r.mean()
    n = r.size
    lags = np.arange(min(max_lag, n - 1) + 1)
    spectrum = np.fft.rfft(r, 2 * n)
    acf = np.fft.irfft(spectrum * np.conj(spectrum), 2 * n)[: lags.size]
    acf = acf / acf[0] if acf[0] > 0 else np.zeros_like(acf)
    band = Z_95 / math.sqrt(n)
    outside = float(np.mean(np.abs(acf[1:]) > band)) if lags.size > 1 else 0.0
    return lags, acf, band, outside


def residual_spectrum(x: np.ndarray, residual: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Single-sided amplitude spectrum (frequency in Hz) of a residual sampled at times ``x``
    (resampled to a uniform grid first where the samples are not evenly spaced): a sine of
    amplitude ``A`` at a frequency of the grid shows as a peak of height ``A``."""
    t = np.asarray(x, dtype=float)
    r = np.asarray(residual, dtype=float)
    dt = np.diff(t)
    h = float(np.median(dt))
    if np.any(np.abs(dt - h) > 1e-6 * h):
        grid = np.linspace(t[0], t[-1], t.size)
        r, h = np.interp(grid, t, r), float(grid[1] - grid[0])
    amplitude = 2.0 * np.abs(np.fft.rfft(r - r.mean())) / r.size
    amplitude[0] /= 2.0  # the mean and (even N) the Nyquist frequency have no mirror bin to fold in
    if r.size % 2 == 0:
        amplitude[-1] /= 2.0
    return np.fft.rfftfreq(r.size, h), amplitude


def _rms(values: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(values))))


def _signals(page: Page, comparisons: Sequence[ChannelComparison], initial_shown: bool) -> None:
    page.section("Signals")
    page.paragraph("For each experiment and channel: measured (grey, wide), initial (red) and identified (blue, "
                   "dashed) values, the residual measured − identified, and for time series the residual's "
                   "amplitude spectrum and autocorrelation. White residuals (noise only) have a flat spectrum and "
                   "about 5 % of the autocorrelation lags outside the band ±1.96/√N; a peak or a slow wave there is "
                   "signal the model does not reproduce. Zoom by dragging, toggle a trace by its legend entry.")
    if not initial_shown:
        page.paragraph("The start values could not be simulated over the whole record: the initial curves are "
                       "left out.", kind="note")
    rows: list[list[object]] = []
    for c in comparisons:
        residual = c.residual
        timed = c.kind in ("time series", "modal coordinate")
        if residual is None or c.measured is None or residual.size < 3:
            rows.append([c.experiment, c.channel, c.unit, None, None, None, Cell("-", numeric=False)])
            continue
        white = whiteness(residual)[3] if timed else None
        rows.append([c.experiment, c.channel, c.unit, _rms(c.measured), _rms(residual),
                     _rms(residual) / _rms(c.measured) * 100 if _rms(c.measured) > 0 else None,
                     Cell(f"{white * 100:.1f} % ({'white' if white <= NOT_WHITE else 'not white'})", white * 100)
                     if white is not None else Cell("-", numeric=False)])
    page.table(["experiment", "channel", "unit", "RMS measured", "RMS residual", "residual / measured [%]",
                "autocorrelation lags outside ±1.96/√N"], rows, element_id="residuals",
               caption="Residual measured − identified per channel (RMS over the samples). White noise leaves about "
                       f"5 % of the lags outside the band; above {100 * NOT_WHITE:g} % the residual is called not "
                       "white.")
    experiment = None
    for c in comparisons:
        if c.experiment != experiment:
            experiment = c.experiment
            page.subsection(f"Experiment {experiment}")
        page.figure(_channel_figure(c, initial_shown), height=760 if c.kind in ("time series", "modal coordinate")
                    and c.residual is not None and c.residual.size >= 3 else 520)


def _channel_figure(c: ChannelComparison, initial_shown: bool) -> dict:
    full_residual = c.residual
    timed = c.kind in ("time series", "modal coordinate") and full_residual is not None and full_residual.size >= 3
    unit = f" [{c.unit}]" if c.unit else ""
    # Long records: every k-th sample drawn (the statistics use them all).
    stride = max(1, math.ceil(c.x.size / MAX_PLOT_POINTS))
    x = c.x[::stride]
    residual = None if full_residual is None else full_residual[::stride]
    mode = "lines" if x.size > 60 else "lines+markers"
    traces: list[dict] = []
    if c.measured is not None:
        traces.append({"type": "scatter", "mode": mode, "x": x, "y": c.measured[::stride], "name": "measured",
                       "line": {"color": _COLORS["measured"], "width": 3.5}})
    if initial_shown:
        traces.append({"type": "scatter", "mode": mode, "x": x, "y": c.initial[::stride], "name": "initial",
                       "line": {"color": _COLORS["initial"], "width": 1}})
    traces.append({"type": "scatter", "mode": mode, "x": x, "y": c.identified[::stride], "name": "identified",
                   "line": {"color": _COLORS["identified"], "width": 1.5, "dash": "dash"}})
    top = [0.62, 1.0] if timed else [0.36, 1.0]
    layout: dict = {
        "title": {"text": plot_text(c.title + (f", 1 of every {stride} samples drawn" if stride > 1 else ""))},
        "margin": {"l": 80, "r": 30, "t": 60, "b": 50},
        "legend": {"orientation": "h", "y": 1.02, "x": 1, "xanchor": "right", "yanchor": "bottom"},
        # The residual panel below shares the abscissa and names it.
        "xaxis": {"anchor": "y", "domain": [0, 1],
                  **({} if residual is not None else {"title": {"text": plot_text(c.x_label)}})},
        "yaxis": {"domain": top, "title": {"text": plot_text(f"{c.channel}{unit}")}, "exponentformat": "power"},
    }
    if c.weights is not None:
        compared = c.x[c.weights > 0]
        layout["shapes"] = [{"type": "rect", "xref": "x", "yref": "y domain", "x0": float(compared.min()),
                             "x1": float(compared.max()), "y0": 0, "y1": 1, "fillcolor": "gold", "opacity": 0.2,
                             "line": {"width": 0}}]
    if residual is not None:
        res_domain = [0.36, 0.54] if timed else [0.0, 0.24]
        traces.append({"type": "scatter", "mode": mode, "x": x, "y": residual, "name": "residual",
                       "xaxis": "x2", "yaxis": "y2", "line": {"color": _COLORS["residual"], "width": 1}})
        layout["xaxis2"] = {"anchor": "y2", "matches": "x", "title": {"text": plot_text(c.x_label)}, "domain": [0, 1]}
        layout["yaxis2"] = {"anchor": "x2", "domain": res_domain, "title": {"text": plot_text(f"residual{unit}")},
                            "exponentformat": "power"}
    if timed:
        assert full_residual is not None
        freq, amplitude = residual_spectrum(c.x, full_residual)
        block = math.ceil(freq.size / MAX_PLOT_POINTS)
        if block > 1:  # the largest amplitude of each block of frequencies: no peak is lost
            cut = freq.size // block * block
            freq, amplitude = freq[:cut:block], amplitude[:cut].reshape(-1, block).max(axis=1)
        lags, acf, band, _ = whiteness(full_residual)
        traces.append({"type": "scatter", "mode": "lines", "x": freq, "y": amplitude, "name": "residual spectrum",
                       "xaxis": "x3", "yaxis": "y3", "line": {"color": _COLORS["residual"], "width": 1},
                       "showlegend": False})
        traces.append({"type": "bar", "x": lags, "y": acf, "name": "autocorrelation", "xaxis": "x4", "yaxis": "y4",
                       "marker": {"color": _COLORS["identified"]}, "showlegend": False})
        for sign in (1, -1):
            traces.append({"type": "scatter", "mode": "lines", "x": [0, int(lags[-1])], "y": [sign * band] * 2,
                           "name": "±1.96/√N", "xaxis": "x4", "yaxis": "y4", "showlegend": False,
                           "line": {"color": _COLORS["band"], "dash": "dot", "width": 1.5}})
        layout.update({
            "xaxis3": {"anchor": "y3", "domain": [0, 0.46], "title": {"text": "frequency [Hz]"}},
            "yaxis3": {"anchor": "x3", "domain": [0, 0.22], "title": {"text": plot_text(f"|residual|{unit}")},
                       "exponentformat": "power"},
            "xaxis4": {"anchor": "y4", "domain": [0.54, 1], "title": {"text": "lag [samples]"}},
            "yaxis4": {"anchor": "x4", "domain": [0, 0.22], "title": {"text": "autocorrelation"}},
        })
    return {"data": traces, "layout": layout}


# --- convergence --------------------------------------------------------------------------

def _convergence(page: Page, payload: Mapping[str, Any]) -> None:
    page.section("Convergence")
    history = [v if v is not None and math.isfinite(v) and v > 0 else None for v in payload.get("cost_history") or []]
    stages = list((payload.get("strategy") or {}).get("stages") or [])
    traces: list[dict] = [{"type": "scatter", "mode": "lines+markers", "x": list(range(len(history))), "y": history,
                           "name": "cost J", "line": {"color": _COLORS["identified"]}}]
    gradient = payload.get("gradient_norm_history") or []
    if gradient:
        traces.append({"type": "scatter", "mode": "lines", "x": list(range(len(gradient))), "name": "|gradient|",
                       "y": [v if v is not None and math.isfinite(v) and v > 0 else None for v in gradient],
                       "yaxis": "y2", "line": {"color": _COLORS["measured"], "dash": "dot"}})
    shapes, annotations = [], []
    starts = stage_starts([int(s.get("iterations") or 0) for s in stages], str(payload.get("method")))
    for k, (stage, start) in enumerate(zip(stages, starts)):
        if len(stages) < 2:
            break
        if k > 0:
            shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": start - 0.5, "x1": start - 0.5,
                           "y0": 0, "y1": 1, "line": {"color": _COLORS["band"], "dash": "dash", "width": 1.5}})
        # Names alternate in height so that short stages do not print over each other.
        annotations.append({"x": start - 0.5, "xref": "x", "y": 1.0 + 0.07 * (k % 2), "yref": "paper",
                            "xanchor": "left", "yanchor": "bottom", "showarrow": False,
                            "text": plot_text(stage.get("stage", f"stage {k + 1}")), "font": {"size": 10}})
    end = (starts[-1] + int(stages[-1].get("iterations") or 0) + (payload.get("method") == "lbfgsb")) if stages else 0
    page.figure({"data": traces, "layout": {
        "title": {"text": "cost per iteration" + (" (stages marked)" if len(stages) > 1 else "")},
        "xaxis": {"title": {"text": "iteration"}},
        "yaxis": {"type": "log", "title": {"text": "cost J"}, "exponentformat": "power",
                  "dtick": _decades(traces[0]["y"])},
        "yaxis2": {"type": "log", "overlaying": "y", "side": "right", "title": {"text": "|gradient|"},
                   "exponentformat": "power", "showgrid": False,
                   "dtick": _decades(traces[1]["y"] if gradient else [])},
        "shapes": shapes, "annotations": annotations, "margin": {"l": 80, "r": 80, "t": 100, "b": 50},
        "legend": {"orientation": "h", "y": -0.2}}})
    if stages and end != len(history):
        page.paragraph(f"The stages account for {end} values and the history has {len(history)}: the stage "
                       "boundaries are approximate.", kind="note")
    if stages:
        strategy = payload.get("strategy") or {}
        page.paragraph(f"Strategy: {strategy.get('used', '?')} (asked for: {strategy.get('requested', '?')}).")
        page.table(["stage", "iterations", "simulations", "cost at its start", "cost at its end", "success",
                    "seconds", "note"],
                   [[s.get("stage"), s.get("iterations"), s.get("simulations"), s.get("cost_initial"), s.get("cost"),
                     bool(s.get("success")), s.get("seconds"), s.get("note") or ""] for s in stages],
                   element_id="stages")
    multistart = payload.get("multistart")
    if multistart:
        _multistart(page, payload, multistart)


def _decades(values: Sequence[float | None]) -> int:
    """Decades between the ticks of a log axis over ``values``: about six labels, each a power of ten."""
    positive = [v for v in values if v is not None and v > 0]
    if not positive:
        return 1
    return max(1, math.ceil(math.log10(max(positive) / min(positive)) / 6))


def _multistart(page: Page, payload: Mapping[str, Any], multistart: Mapping[str, Any]) -> None:
    names = list(payload["parameters"])
    page.subsection("Multi-start")
    clusters = list(multistart.get("clusters") or [])
    page.paragraph(f"{multistart.get('starts')} starts (Sobol sequence, seed {multistart.get('seed')}); the best is "
                   f"start {multistart.get('best_start')} ({multistart.get('best_strategy')}); "
                   f"{multistart.get('reached_best_cluster')} reached the best cost; {len(clusters)} distinct "
                   f"end point{'s' if len(clusters) != 1 else ''}; {format_number(multistart.get('seconds'), 3)} s.")
    if multistart.get("failed_starts"):
        page.paragraph(f"Failed starts: {', '.join(map(str, multistart['failed_starts']))}.", kind="warning")
    page.table(["cluster", "cost", "starts", *names],
               [[k + 1, c.get("cost"), ", ".join(map(str, c.get("starts") or [])), *(c.get("parameters") or
                                                                                     [None] * len(names))]
                for k, c in enumerate(clusters)], element_id="clusters",
               caption="Starts that ended at the same cost form a cluster; the first is the best.")
    cluster_of = {s: k for k, c in enumerate(clusters) for s in c.get("starts") or []}
    results = list(multistart.get("results") or [])
    traces = []
    for k in range(len(clusters)):
        members = [r for r in results if cluster_of.get(r.get("start")) == k and r.get("cost") is not None]
        traces.append({"type": "scatter", "mode": "markers", "x": [r["start"] for r in members],
                       "y": [r["cost"] if r["cost"] > 0 else None for r in members], "name": f"cluster {k + 1}",
                       "marker": {"size": 10}})
    page.figure({"data": traces, "layout": {"title": {"text": "final cost of each start"},
                                            "xaxis": {"title": {"text": "start"}, "dtick": 1},
                                            "yaxis": {"type": "log", "title": {"text": "cost J"},
                                                      "exponentformat": "power"}}}, height=360)
    page.table(["start", "strategy", *(f"{n} start" for n in names), *(f"{n} end" for n in names), "cost", "success",
                "iterations", "seconds"],
               [[r.get("start"), r.get("strategy"), *(r.get("initial") or [None] * len(names)),
                 *(r.get("parameters") or [None] * len(names)), r.get("cost"),
                 bool(r.get("success")) if not r.get("failed") else Cell("failed", numeric=False),
                 r.get("iterations"), r.get("seconds")] for r in results], element_id="starts")


# --- computation --------------------------------------------------------------------------

def _computation(page: Page, payload: Mapping[str, Any], details: Mapping[str, str]) -> None:
    page.section("Computation")
    rows: list[list[object]] = []
    if details.get("engine"):
        rows.append(["engine", details["engine"]])
    if payload.get("interface"):
        rows.append(["FMU interface", str(payload["interface"])])
    integrator = payload.get("integrator")
    if integrator is not None:
        rows.append(["integrator", integrator if isinstance(integrator, str) else ", ".join(
            f"{k} {v}" for k, v in integrator.items())])
    if details.get("step"):
        rows.append(["step", details["step"]])
    gradient = payload.get("gradient_method")
    if gradient is not None:
        rows.append(["gradient", gradient if isinstance(gradient, str) else ", ".join(
            f"{k}: {v}" for k, v in gradient.items() if not isinstance(v, dict))])
    rows.append(["optimizer", f"{payload.get('method')} ({payload.get('optimizer_message') or ''})"])
    executor = payload.get("executor") or {}
    if executor:
        rows.append(["executor", ", ".join(f"{k} {v}" for k, v in executor.items())])
    rows.append(["simulations", str(payload.get("simulations"))])
    rows.append(["time of the fit", f"{format_number(payload.get('seconds'), 4)} s"])
    if payload.get("multistart"):
        rows.append(["time of all starts", f"{format_number(payload['multistart'].get('seconds'), 4)} s"])
    if payload.get("checkpoint"):
        rows.append(["checkpoint", str(payload["checkpoint"])])
    page.table(["what", "how"], rows, element_id="computation")
    page.subsection("Discretization error")
    error = payload.get("discretization_error")
    if not error:
        page.paragraph("Not estimated: with a model file the integration scheme and its step are part of the model "
                       "(the fit is to the HHT or generalized-α solution, differentiated exactly), and an FMU's "
                       "Co-Simulation solver is the FMU's own. To see the step's effect, identify again with a smaller "
                       "--step and compare.", kind="note")
        return
    rows = [["change of the cost", error.get("cost")],
            ["largest change of an output", error.get("largest_output_change")]]
    for name, bias in (error.get("parameter_bias") or {}).items():
        se = (payload.get("std_errors") or {}).get(name)
        rows.append([f"bias of {name}" + (f" ({abs(bias) / se:.2g} standard errors)" if se else ""), bias])
    page.table(["estimated with 100 times tighter tolerances", "value"], rows, element_id="discretization")
    page.paragraph("The runs repeated with 100 times tighter tolerances: the differences estimate the error of the "
                   "runs at the chosen tolerances, and the bias is how far that error moves the identified values.",
                   kind="note")


def _finite(value: Any) -> Any:
    """``value`` with non-finite floats as None (JSON.parse reads no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
