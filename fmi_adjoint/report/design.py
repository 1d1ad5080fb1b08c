"""The HTML report of an optimal input design (``fmi-adjoint design --report``).

The numbers come from the DESIGN.json payload (:func:`~fmi_adjoint.design.report.design_record`
and what the command adds: the model file, the settings, a Monte-Carlo check), so the report
shows what DESIGN.json holds; the time signals, which DESIGN.json does not hold, come from the
:class:`~fmi_adjoint.design.DesignResult` through :func:`design_signals`.  The page:

- a summary: what was designed for which parameters, the criterion before and after, whether
  the optimizer converged, and every warning in plain words (an unmet constraint, a stop
  that is not a verified minimum, a standard error that grew);
- the input before and after (knots marked, bounds drawn), and the measured outputs with both;
- the predicted standard errors (Cramér-Rao bounds) before and after, as a table and a chart;
- the end conditions, amplitude limits and rate bound, each met or not;
- the criterion per iteration, the starts of a multi-start design, a Monte-Carlo check;
- DESIGN.json itself as a JSON block (``<script type="application/json" id="design-json">``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..design import DesignResult
from ..design.optimize import VIOLATION_TOLERANCE, violations
from .html import Page, plot_text

__all__ = ["DesignSignals", "design_signals", "design_report"]

_START, _FINAL = "#d62728", "#1f77b4"


@dataclasses.dataclass(frozen=True, eq=False)
class DesignSignals:
    """The time signals of a design, with the start input and with the designed input.

    Attributes
    ----------
    grid : numpy.ndarray
        The step grid [s] of the input.
    input_start, input_final : numpy.ndarray
        The input on ``grid``.
    time_start, time_final : numpy.ndarray
        The time points of the two runs' outputs [s].
    outputs_start, outputs_final : dict of str to numpy.ndarray
        The measured outputs (those with a noise level) of the two runs.
    output_units : dict of str to str
        Unit text of each measured output ("" when unknown).
    violations : dict of str to float
        What is left of each constraint of the final run, relative to its scale
        (:func:`~fmi_adjoint.design.optimize.violations`; at most ``tolerance``: met).
    tolerance : float
        :data:`~fmi_adjoint.design.optimize.VIOLATION_TOLERANCE`.
    """

    grid: np.ndarray
    input_start: np.ndarray
    input_final: np.ndarray
    time_start: np.ndarray
    time_final: np.ndarray
    outputs_start: Mapping[str, np.ndarray]
    outputs_final: Mapping[str, np.ndarray]
    output_units: Mapping[str, str]
    violations: Mapping[str, float]
    tolerance: float = VIOLATION_TOLERANCE


def design_signals(result: DesignResult) -> DesignSignals:
    """The signals :func:`design_report` draws, from a design result."""
    problem = result.problem
    names = list(problem.compiled.output_names)
    measured = list(problem.spec.noise)
    units = {output.name: output.unit for output in problem.model.outputs}
    Y0, Y1 = result.start.trajectory.outputs(), result.final.trajectory.outputs()
    return DesignSignals(
        grid=np.asarray(problem.grid, dtype=float),
        input_start=np.asarray(problem.input_signal(result.z_start), dtype=float),
        input_final=np.asarray(problem.input_signal(result.z), dtype=float),
        time_start=np.asarray(result.start.trajectory.t, dtype=float),
        time_final=np.asarray(result.final.trajectory.t, dtype=float),
        outputs_start={name: np.asarray(Y0[:, names.index(name)], dtype=float) for name in measured},
        outputs_final={name: np.asarray(Y1[:, names.index(name)], dtype=float) for name in measured},
        output_units={name: units.get(name, "") for name in measured},
        violations=dict(violations(problem, result.final)),
    )


def design_report(payload: Mapping[str, Any], signals: DesignSignals, *, title: str | None = None) -> Page:
    """The report page of a design: ``payload`` is DESIGN.json's content (``design_record``
    plus the command's additions), ``signals`` the runs' time signals."""
    model, spec_input = str(payload["model"]), payload["input"]
    page = Page(title or f"Input design of '{spec_input['name']}' for model '{model}'",
                subtitle=_subtitle(payload))
    _summary(page, payload, signals)
    _input_section(page, payload, signals)
    _outputs_section(page, signals)
    _standard_errors_section(page, payload)
    _constraints_section(page, payload, signals)
    _convergence_section(page, payload)
    if payload.get("starts", {}).get("count", 0) > 1:
        _starts_section(page, payload)
    if payload.get("monte_carlo"):
        _monte_carlo_section(page, payload["monte_carlo"])
    _settings_section(page, payload)
    page.section("DESIGN.json")
    page.paragraph("The whole record is embedded in this page as the JSON block with id 'design-json'.", kind="note")
    page.data("design-json", payload)
    return page


def _subtitle(payload: Mapping[str, Any]) -> str:
    criterion = payload["criterion"]
    return (f"{criterion['name']}-criterion, {payload['basis']} basis, {len(payload['knots']['times'])} knots, "
            f"{payload['bound_map']} bound map; parameters {', '.join(p['name'] for p in payload['parameters'])}")


def _unit(name: str, unit: str) -> str:
    return f"{name} [{unit}]" if unit else name


def _number(value: Any) -> float:
    """A JSON number (null: NaN, which the tables show as '-')."""
    return math.nan if value is None else float(value)


def _grown(payload: Mapping[str, Any]) -> list[str]:
    ratios = payload["standard_errors"]["ratio"]
    return [name for name, ratio in ratios.items() if ratio is not None and ratio > 1.0]


def _summary(page: Page, payload: Mapping[str, Any], signals: DesignSignals) -> None:
    page.section("Summary")
    criterion = payload["criterion"]
    names = [p["name"] for p in payload["parameters"]]
    noise = ", ".join(f"{name} (sigma {sigma:g})" for name, sigma in payload["noise"].items())
    spec_input = payload["input"]
    lo, hi = spec_input["bounds"]
    page.paragraph(f"The input '{spec_input['name']}' of model '{payload['model']}' was designed within "
                   f"[{lo:g}, {hi:g}] {spec_input['unit']} so that the parameters {', '.join(names)} can be "
                   f"identified as precisely as possible from the measured outputs {noise}, over "
                   f"{payload['t_end']:g} s with step {payload['step']:g} s.")
    iterations = max(len(payload["history"]) - 1, 0)
    page.paragraph(f"{criterion['name']}-criterion {_text(criterion['start'])} -> {_text(criterion['final'])} "
                   f"({iterations} iterations, {payload['evaluations']} evaluations; {payload['message']}).")
    if payload["success"]:
        page.paragraph("The optimizer converged, and every constraint is met.", kind="success")
    else:
        page.paragraph(f"The optimizer stopped before convergence ({payload['message']}): the input shown is the best "
                       "design found, not a verified optimum.", kind="failure")
    warnings = []
    stop = payload.get("stop")
    if stop and stop.get("cause") != "converged":
        verdict = "a minimum to working precision" if stop.get("trusted") else "not a verified minimum"
        warnings.append(f"The optimizer stopped: {stop['cause']} ({verdict}). {stop.get('advice') or ''}".strip())
    for name, left in signals.violations.items():
        if left > signals.tolerance:
            warnings.append(f"The constraint '{name}' is not met: violated by {left:.3g} of its scale "
                            f"(met: at most {signals.tolerance:g}).")
    grown = _grown(payload)
    if grown:
        warnings.append(f"The predicted standard error grew for {', '.join(grown)}: the design traded their "
                        "precision for that of the other parameters.")
    for name, value in payload["standard_errors"]["final"].items():
        if value is None:
            warnings.append(f"'{name}' cannot be identified from the designed experiment (singular Fisher "
                            "information: no finite standard error).")
    if warnings:
        page.bullets(warnings, kind="warning")


def _text(value: Any) -> str:
    return "-" if value is None else f"{float(value):.6g}"


def _input_section(page: Page, payload: Mapping[str, Any], signals: DesignSignals) -> None:
    page.section("Input before and after")
    spec_input = payload["input"]
    knots = payload["knots"]
    label = _unit(spec_input["name"], spec_input["unit"])
    lo, hi = spec_input["bounds"]
    t0, t1 = float(signals.grid[0]), float(signals.grid[-1])
    data = [
        {"type": "scatter", "mode": "lines", "name": "start input", "x": signals.grid, "y": signals.input_start,
         "line": {"color": _START, "width": 1.2}},
        {"type": "scatter", "mode": "lines", "name": "designed input", "x": signals.grid, "y": signals.input_final,
         "line": {"color": _FINAL, "width": 1.8}},
        {"type": "scatter", "mode": "markers", "name": "start knots", "x": knots["times"], "y": knots["start"],
         "marker": {"color": _START, "size": 6}},
        {"type": "scatter", "mode": "markers", "name": "designed knots", "x": knots["times"], "y": knots["final"],
         "marker": {"color": _FINAL, "size": 7}},
        {"type": "scatter", "mode": "lines", "name": "bounds", "x": [t0, t1, None, t0, t1], "y": [lo, lo, None, hi, hi],
         "line": {"color": "#666", "dash": "dash", "width": 1}},
    ]
    page.figure({"data": data, "layout": {
        "title": {"text": plot_text(f"input '{spec_input['name']}': {payload['basis']} basis, "
                                    f"{len(knots['times'])} knots")},
        "xaxis": {"title": {"text": "time [s]"}}, "yaxis": {"title": {"text": plot_text(label)}}}})
    rows = [[k + 1, t, a, b] for k, (t, a, b) in enumerate(zip(knots["times"], knots["start"], knots["final"]))]
    page.table(["knot", "time [s]", f"start {label}", f"designed {label}"], rows, caption="The knots",
               element_id="knots")


def _outputs_section(page: Page, signals: DesignSignals) -> None:
    page.section("Measured outputs")
    page.paragraph("The outputs the experiment measures, simulated with the start input (dotted) and with the "
                   "designed input (solid).", kind="note")
    for name in signals.outputs_final:
        label = _unit(name, signals.output_units.get(name, ""))
        data = [{"type": "scatter", "mode": "lines", "name": plot_text(f"{name} (start input)"),
                 "x": signals.time_start, "y": signals.outputs_start[name],
                 "line": {"color": _START, "dash": "dot", "width": 1.2}},
                {"type": "scatter", "mode": "lines", "name": plot_text(f"{name} (designed input)"),
                 "x": signals.time_final, "y": signals.outputs_final[name], "line": {"color": _FINAL, "width": 1.6}}]
        page.figure({"data": data, "layout": {"title": {"text": plot_text(label)},
                                              "xaxis": {"title": {"text": "time [s]"}},
                                              "yaxis": {"title": {"text": plot_text(label)}}}}, height=320)


def _standard_errors_section(page: Page, payload: Mapping[str, Any]) -> None:
    page.section("Predicted standard errors")
    page.paragraph("Cramér-Rao bounds sqrt(diag M^-1) of the Fisher information M, in the parameters' units: the "
                   "smallest standard deviation an unbiased estimate from one such experiment can have. "
                   "ratio = designed / start (below 1: more precise).", kind="note")
    errors = payload["standard_errors"]
    rows, flagged = [], []
    for parameter in payload["parameters"]:
        name = parameter["name"]
        ratio = errors["ratio"].get(name)
        rows.append([name, parameter["unit"], errors["start"].get(name), errors["final"].get(name), ratio])
        flagged.append(ratio is None or ratio > 1.0)
    page.table(["parameter", "unit", "start", "designed", "ratio"], rows, element_id="standard-errors",
               flagged=flagged)
    names = [p["name"] for p in payload["parameters"]]
    # Relative to each parameter's nominal scale where known, so that parameters of different units share an axis.
    scales = [p.get("scale") or 1.0 for p in payload["parameters"]]
    data = [{"type": "bar", "name": label, "x": [plot_text(n) for n in names],
             "y": [_number(errors[key].get(n)) / abs(s) if s else math.nan for n, s in zip(names, scales)],
             "marker": {"color": color}}
            for key, label, color in (("start", "start input", _START), ("final", "designed input", _FINAL))]
    page.figure({"data": data, "layout": {
        "title": {"text": "predicted standard error relative to the parameter's scale"}, "barmode": "group",
        "yaxis": {"type": "log", "title": {"text": "standard error / scale"}}}}, height=340)


def _constraints_section(page: Page, payload: Mapping[str, Any], signals: DesignSignals) -> None:
    page.section("Constraints")
    constraints = payload["constraints"]
    rows: list[list[object]] = []
    flagged: list[bool] = []

    def add(kind: str, name: str, target: float | str, what: str, value: Any) -> None:
        left = signals.violations.get(f"{kind} {name}" if name else kind)
        met = left is None or left <= signals.tolerance
        rows.append([f"{kind} {name}".strip(), target, what, value, left, met])
        flagged.append(not met)

    for name, target in constraints["end"].items():
        add("end", name, target, "y(T) - target", payload["end_misses"].get(name))
    for name, limit in constraints["limits"].items():
        add("limit", name, limit, "max |y| - limit", payload["limit_excess"].get(name))
    if constraints["rate"] is not None:
        add("rate", "", constraints["rate"], "max |du/dt| - rate", payload["rate_excess"])
    if "bounds" in signals.violations:
        lo, hi = payload["input"]["bounds"]
        add("bounds", "", f"[{lo:g}, {hi:g}]", "input outside the bounds", None)
    if not constraints["end"] and not constraints["limits"] and constraints["rate"] is None:
        page.paragraph("No end condition, amplitude limit or rate bound was given (--end, --limit, --rate); the input "
                       "is kept within its bounds only.", kind="note")
    if rows:
        page.table(["constraint", "target", "measure", "value", "violation (of its scale)", "met"], rows,
                   element_id="constraints", flagged=flagged,
                   caption=f"met: violation at most {signals.tolerance:g} of the constraint's scale")


def _convergence_section(page: Page, payload: Mapping[str, Any]) -> None:
    page.section("Convergence")
    history = payload["history"]
    iterations = [h["iteration"] for h in history]
    criterion = payload["criterion"]["name"]
    data = [{"type": "scatter", "mode": "lines+markers", "name": plot_text(f"{criterion}-criterion"),
             "x": iterations, "y": [_number(h["criterion"]) for h in history]}]
    scale = payload["criterion"].get("scale") or 1.0
    if any((h["penalty"] or 0) > 0 for h in history):
        data.append({"type": "scatter", "mode": "lines+markers", "name": "penalty (criterion units)",
                     "x": iterations, "y": [_number(h["penalty"]) * scale for h in history], "yaxis": "y2"})
    page.figure({"data": data, "layout": {
        "title": {"text": "criterion per iteration"}, "xaxis": {"title": {"text": "iteration"}},
        "yaxis": {"title": {"text": plot_text(f"{criterion}-criterion")}},
        "yaxis2": {"overlaying": "y", "side": "right", "title": {"text": "penalty"}}}}, height=340)


def _starts_section(page: Page, payload: Mapping[str, Any]) -> None:
    page.section("Starts")
    starts = payload["starts"]
    best = starts["best"]
    page.paragraph(f"{starts['count']} starts; the design continues start {best + 1} "
                   f"('{starts['runs'][best]['label']}'); {starts['reached_best']} of {starts['count']} reached "
                   "its criterion.")
    rows = [[k + 1, run["label"], run["criterion_start"], run["criterion"], run["iterations"], run["feasible"],
             run["stop"] or ("converged" if run["success"] else "stopped")]
            for k, run in enumerate(starts["runs"])]
    page.table(["start", "label", "criterion at start", "criterion", "iterations", "feasible", "stop"], rows,
               element_id="starts", flagged=[k == best for k in range(len(rows))])


def _monte_carlo_section(page: Page, checks: Mapping[str, Any]) -> None:
    page.section("Monte-Carlo check")
    page.paragraph("The parameters identified from noisy simulated experiments: the empirical standard deviation "
                   "of the estimates against the predicted standard error.", kind="note")
    rows = []
    for label, check in checks.items():
        for name, entry in check["parameters"].items():
            rows.append([label, name, entry["truth"], entry["mean"], entry["std"], entry["predicted_std"],
                         entry["std_ratio"]])
    page.table(["input", "parameter", "truth", "mean", "std", "predicted std", "ratio"], rows,
               element_id="monte-carlo")


def _settings_section(page: Page, payload: Mapping[str, Any]) -> None:
    page.section("Settings")
    rows: list[list[object]] = [
        ["model", payload["model"]], ["model file", payload.get("model_file", "-")],
        ["criterion", payload["criterion"]["name"]], ["basis", payload["basis"]],
        ["bound map", payload["bound_map"]], ["t_end [s]", payload["t_end"]], ["step [s]", payload["step"]],
        ["sample interval [s]", payload["sample"]], ["samples", payload["samples"]],
        ["trapezoidal weights", payload["integral"]]]
    rows.extend([f"--set {name}", value] for name, value in (payload.get("settings") or {}).items())
    page.table(["setting", "value"], rows, element_id="settings")
