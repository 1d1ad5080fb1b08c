"""What a finished design leaves behind: the record (``DESIGN.json``), the input as a table
(``INPUT.csv``) and a figure.

The record says everything needed to judge and to reuse the design: the setting (model,
input, basis, bound map, criterion, measured outputs with their noise, time span and
sampling), the knots before and after, the criterion per iteration, the Fisher matrices of
the start and final input, and the predicted standard errors of the parameters (Cramér-Rao
bounds, ``sqrt(diag M^-1)``; dissertation Sec. 5.1.1) with their ratio, the figure of merit
of the design.  The Fisher matrices are those of the scaled parameters ``p / scale``
(:mod:`fmi_adjoint.design.fisher`); the record says so and gives the scale.

The input table holds the input on the step grid of the design, the values the engines
used (between steps nothing is evaluated), so a ``table_load`` of that file in a copy of the
model drives it exactly as the design did.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any

import numpy as np

from ..data import write_csv
from ..errors import FmiAdjointError
from ..files import atomic_output
from .optimize import DesignResult

__all__ = ["design_record", "write_design_record", "write_input_csv", "plot_design", "PlottingUnavailable"]


class PlottingUnavailable(FmiAdjointError, RuntimeError):
    """matplotlib cannot be imported, so no figure can be drawn."""


def _number(x: float) -> float | None:
    """A JSON number; ``None`` for inf/NaN (strict JSON has neither)."""
    value = float(x)
    return value if math.isfinite(value) else None


def _numbers(values) -> list:
    return [_number(x) for x in np.asarray(values, dtype=float).ravel()]


def _matrix(M: np.ndarray) -> list[list[float | None]]:
    return [_numbers(row) for row in np.asarray(M, dtype=float)]


def _time_settings(result: DesignResult) -> dict[str, Any]:
    problem = result.problem
    spec = problem.spec
    step = float(spec.step) if spec.step is not None else float(problem.model.simulation.step)
    return {
        "t_end": float(problem.grid[-1]),
        "step": step,
        "sample": float(spec.sample) if spec.sample is not None else step,
        "samples": int(len(problem.setup.sample_times)),
        "integral": bool(spec.integral),
    }


def design_record(result: DesignResult) -> dict[str, Any]:
    """The content of ``DESIGN.json`` (plain JSON types; inf/NaN become ``null``)."""
    problem = result.problem
    spec = problem.spec
    names = list(spec.params)
    se_start = np.asarray(result.standard_errors_start, dtype=float)
    se_final = np.asarray(result.standard_errors_final, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = se_final / se_start
    criterion = problem.criterion
    rate_excess = result.rate_excess()
    return {
        "model": problem.model.name,
        "input": {
            "name": spec.input,
            "unit": problem.model.parameter(spec.input).unit,
            "bounds": [spec.bounds[0], spec.bounds[1]],
        },
        "basis": spec.basis.name,
        "bound_map": spec.bound_map.name,
        "criterion": {
            "name": criterion.name,
            "settings": {k: _number(v) for k, v in dataclasses.asdict(criterion).items()}
            if dataclasses.is_dataclass(criterion) else {},
            "start": _number(result.start.criterion),
            "final": _number(result.final.criterion),
            "scale": _number(problem.scale),
        },
        "knots": {
            "times": _numbers(problem.knot_times),
            "start": _numbers(result.start.knots),
            "final": _numbers(result.final.knots),
        },
        "parameters": [{"name": name, "unit": problem.model.parameter(name).unit, "scale": _number(scale)}
                       for name, scale in zip(names, problem.setup.scale)],
        "noise": {name: float(sigma) for name, sigma in spec.noise.items()},
        **_time_settings(result),
        "fisher": {
            "scaled": True,
            "note": "Fisher information of the scaled parameters p/scale (parameters[].scale): "
                    "M[i][j] = scale_i * scale_j * (unscaled M)[i][j]; rows and columns in the order of parameters.",
            "start": _matrix(result.start.M),
            "final": _matrix(result.final.M),
        },
        "standard_errors": {
            "note": "predicted standard errors (Cramér-Rao bounds sqrt(diag M^-1)) in the parameters' units; "
                    "ratio = final/start",
            "start": dict(zip(names, _numbers(se_start))),
            "final": dict(zip(names, _numbers(se_final))),
            "ratio": dict(zip(names, _numbers(ratio))),
        },
        "history": [{"iteration": h.iteration, "criterion": _number(h.criterion), "penalty": _number(h.penalty),
                     "objective": _number(h.objective), "gradient_norm": _number(h.gradient_norm),
                     "penalty_weight": h.penalty_weight}
                    for h in result.history],
        "constraints": {
            "end": {name: float(v) for name, v in spec.end.items()},
            "limits": {name: float(v) for name, v in spec.limits.items()},
            "rate": None if spec.rate is None else float(spec.rate),
        },
        "end_misses": {name: _number(v) for name, v in result.end_misses().items()},
        "limit_excess": {name: _number(v) for name, v in result.limit_excess().items()},
        "rate_excess": None if rate_excess is None else _number(rate_excess),
        "evaluations": int(result.evaluations),
        "success": bool(result.success),
        "message": result.message,
        "stop": None if result.stop is None else result.stop.record(),
        "starts": _starts_record(result),
    }


def write_design_record(path: str | os.PathLike, payload: dict[str, Any]) -> None:
    """Write ``DESIGN.json`` (``payload``: :func:`design_record` and what the caller adds, plain
    JSON: NaN and inf are refused) whole or not at all."""
    text = json.dumps(payload, indent=2, allow_nan=False)
    with atomic_output(path) as handle:
        handle.write(text + "\n")


def _starts_record(result: DesignResult) -> dict[str, Any]:
    """Every start of a multi-start design (label, criterion at its start and end, iterations,
    evaluations, message, the stop's cause), the winner and how many reached its criterion."""
    entries = [{"label": o.label, "criterion_start": _number(o.criterion_start), "criterion": _number(o.criterion),
                "iterations": int(o.iterations), "evaluations": int(o.evaluations), "success": bool(o.success),
                "feasible": bool(o.feasible), "message": o.message,
                "stop": None if o.stop is None else o.stop.cause,
                "knots_start": _numbers(result.problem.knot_values(o.z_start))}
               for o in result.starts]
    return {"count": len(entries), "best": int(result.best_start) if entries else None,
            "reached_best": int(result.reached_best) if entries else None,
            "note": "the design continues the start 'best' (0-based); 'reached_best' starts ended within 1e-6 "
                    "(relative) of its criterion; criterion.start and knots.start are those of the given start",
            "runs": entries}


def input_table(result: DesignResult) -> tuple[np.ndarray, np.ndarray]:
    """``(times, u)``: the designed input on the step grid of the design."""
    grid = np.asarray(result.problem.grid, dtype=float)
    return grid, np.asarray(result.problem.input_signal(result.z), dtype=float)


def write_input_csv(result: DesignResult, path: str | os.PathLike) -> None:
    """Write ``time`` and the input's column on the step grid, atomically: a CSV that a
    ``table_load`` (``file = ...``, ``column = <input>``) reads as it is."""
    times, values = input_table(result)
    write_csv(path, times, {result.problem.spec.input: values})


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise PlottingUnavailable("drawing the design needs matplotlib, which is not installed; pip install "
                                  "matplotlib, or leave out --plot.") from None
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    return plt


def check_plotting() -> None:
    """Raise :class:`PlottingUnavailable` now (before a long run) if no figure can be drawn."""
    _pyplot()


def plot_design(result: DesignResult, path: str | os.PathLike) -> None:
    """PNG of the start and final input (knots marked, bounds dashed), the measured outputs
    of both runs, and the criterion per iteration; written atomically."""
    plt = _pyplot()
    problem = result.problem
    spec = problem.spec
    grid = np.asarray(problem.grid, dtype=float)
    fig, (ax_u, ax_y, ax_c) = plt.subplots(3, 1, figsize=(9, 9.5), constrained_layout=True)
    try:
        for label, z, value, style in (("start", result.z_start, result.start, dict(color="tab:red", lw=0.9)),
                                       ("final", result.z, result.final, dict(color="tab:blue", lw=1.2))):
            ax_u.plot(grid, problem.input_signal(z), label=label, **style)
            ax_u.plot(problem.knot_times, value.knots, "o", ms=4, color=style["color"])
        for bound in spec.bounds:
            ax_u.axhline(bound, color="0.4", ls="--", lw=0.8)
        unit = problem.model.parameter(spec.input).unit
        ax_u.set_ylabel(f"{spec.input} [{unit}]" if unit else spec.input)
        ax_u.set_title(f"input '{spec.input}': {spec.basis.name} basis, {spec.knots} knots, "
                       f"{spec.bound_map.name} bound map")
        ax_u.legend(loc="best", fontsize=8)

        names = problem.compiled.output_names
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for k, name in enumerate(spec.noise):
            color = colors[k % len(colors)]
            o = names.index(name)
            ax_y.plot(result.start.trajectory.t, result.start.trajectory.outputs()[:, o], color=color, lw=0.8,
                      ls=":", label=f"{name} (start)")
            ax_y.plot(result.final.trajectory.t, result.final.trajectory.outputs()[:, o], color=color, lw=1.1,
                      label=f"{name} (final)")
        ax_y.set_ylabel("measured outputs")
        ax_y.set_title("measured outputs with the start and the final input")
        ax_y.legend(loc="best", fontsize=8)
        for ax in (ax_u, ax_y):
            ax.set_xlabel("time [s]")
            ax.grid(True, alpha=0.3)

        iterations = [h.iteration for h in result.history]
        ax_c.plot(iterations, [h.criterion for h in result.history], marker="o", ms=3, label="criterion")
        if any(h.penalty > 0 for h in result.history):
            ax_c.plot(iterations, [h.penalty * problem.scale for h in result.history], marker="s", ms=3,
                      label="penalty (criterion units)")
            ax_c.legend(loc="best", fontsize=8)
        ax_c.set_xlabel("iteration")
        ax_c.set_ylabel(f"{problem.criterion.name}-criterion")
        ax_c.set_title("convergence")
        ax_c.grid(True, alpha=0.3)
        with atomic_output(path, "wb") as handle:
            fig.savefig(handle, format="png", dpi=110)
    finally:
        plt.close(fig)
