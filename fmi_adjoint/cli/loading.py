"""Resolving the command line's MODEL, --set, --bounds and --data arguments."""

from __future__ import annotations

import math
from pathlib import Path

from ..compiled import CompiledModel, compile_model
from ..errors import ExpressionError, ModelError
from ..examples import example_names, example_path
from ..identify import Experiment
from ..integrate import HHT
from ..model_file import load_model
from .cost_options import CostOptions, Target, build_cost

__all__ = ["model_path", "resolve_model", "parse_assignments", "parse_bounds", "experiment_settings",
           "load_experiments"]


def model_path(spec: str) -> Path:
    """The TOML file of MODEL: a path, or the name of a bundled example."""
    path = Path(spec)
    if path.suffix == ".toml" or path.exists():
        return path
    if spec in example_names():
        return example_path(spec)
    raise ModelError(
        f"MODEL {spec!r} is neither a TOML file nor a bundled example. Examples: {', '.join(example_names())}."
    )


def resolve_model(spec: str, values: dict[str, float] | None = None) -> CompiledModel:
    """Compile MODEL: a TOML file path or the name of a bundled example."""
    source = model_path(spec)
    model = load_model(source)
    try:
        model = model.with_values(values or {})
        return compile_model(model)
    except ExpressionError as exc:
        raise ExpressionError(f"{source}: {exc}") from None
    except ModelError as exc:
        text = str(exc)
        raise ModelError(text if str(source) in text else f"{source}: {text}") from None


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ModelError(f"{what}: {text!r} is not a number.") from None
    if math.isnan(value):
        raise ModelError(f"{what}: NaN is not allowed.")
    return value


def parse_assignments(items: list[str] | None, option: str = "--set") -> dict[str, float]:
    """``["c=1.5", "d=0.2"]`` to ``{"c": 1.5, "d": 0.2}``."""
    values: dict[str, float] = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise ModelError(f"{option} {item!r}: expected NAME=VALUE, e.g. {option} c_E1=1.2e5.")
        value = _number(text.strip(), f"{option} {item}")
        if not math.isfinite(value):
            raise ModelError(f"{option} {item!r}: the value must be finite.")
        values[name.strip()] = value
    return values


def parse_bounds(items: list[str] | None) -> dict[str, tuple[float, float]]:
    """``["c=0.1:10"]`` to ``{"c": (0.1, 10.0)}`` (``inf``/``-inf`` allowed)."""
    bounds: dict[str, tuple[float, float]] = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        lo, colon, hi = text.partition(":")
        if not sep or not colon or not name.strip():
            raise ModelError(f"--bounds {item!r}: expected NAME=LO:HI, e.g. --bounds d_E=0.1:50.")
        low, high = _number(lo.strip(), f"--bounds {item}"), _number(hi.strip(), f"--bounds {item}")
        if low >= high:
            raise ModelError(f"--bounds {item!r}: the lower bound must be below the upper bound.")
        bounds[name.strip()] = (low, high)
    return bounds


def parse_names(text: str | None) -> list[str]:
    """``"c,d"`` to ``["c", "d"]``."""
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    if not names:
        raise ModelError("--params: give a comma-separated list of parameter names, e.g. --params c_E1,d_E.")
    return names


def experiment_settings(spec: str, settings: dict[str, float], identified) -> tuple[str, dict[str, float]]:
    """``--data FILE[@NAME=VALUE,...]`` to the file and its parameter values (``--set`` values
    updated by the settings after ``@``, which must not be identified parameters)."""
    file, _, local = spec.partition("@")
    values = dict(settings)
    local_values = parse_assignments([s for s in local.split(",") if s], option=f"--data {spec}")
    clash = sorted(set(local_values) & set(identified))
    if clash:
        raise ModelError(
            f"--data {spec}: {clash} are identified (shared by all experiments) and also set for this "
            "experiment only; remove them from --params or from the '@' settings."
        )
    values.update(local_values)
    return file, values


def load_experiments(
    model_spec: str,
    data_specs: list[str],
    settings: dict[str, float],
    *,
    t_end: float | None,
    step: float | None,
    alpha: float | None,
    identified: list[str] = (),
    cost: CostOptions | None = None,
) -> list[Experiment]:
    """One experiment per ``--data FILE[@NAME=VALUE,...]``, sharing the model.

    The settings after ``@`` apply to that experiment only (excitation, initial state).
    ``cost`` chooses what is compared (default: least squares of the time series).
    Without ``--t-end`` each experiment is simulated up to its last sample (spectra: the
    model's end time).
    """
    model = resolve_model(model_spec)
    options = cost or CostOptions()
    h = step if step is not None else model.model.simulation.step
    experiments = []
    for spec in data_specs:
        file, values = experiment_settings(spec, settings, identified)
        for name in values:
            model.parameter_index(name)
        experiment_cost, end = build_cost(options, Target.of_model(model), file, t_end=t_end, step=h)
        solver = HHT(alpha=alpha) if alpha is not None else None
        experiments.append(
            Experiment(model, experiment_cost, values=values, t_end=end, step=step, solver=solver,
                       name=Path(file).stem)
        )
    return experiments
