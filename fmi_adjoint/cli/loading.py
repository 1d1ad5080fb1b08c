"""Resolving the command line's MODEL, --set, --bounds and --data arguments."""

from __future__ import annotations

import math
import re
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

from ..compiled import CompiledModel
from ..engines import AbstractEngine, NativeEngine, PythonEngine
from ..errors import CompilerError, ExpressionError, ModelError, NoCCodeError
from ..examples import example_names, example_path
from ..files import decode_text, read_regular
from ..identify import Experiment
from ..integrate.schemes import scheme_from_settings
from ..integrate.hht import MAX_STEPS
from ..model_file import load_model
from ..text import excerpt
from .cost_options import CostOptions, Target, build_cost

__all__ = ["model_path", "model_inputs", "resolve_engine", "resolve_model", "check_time_span", "parse_assignments",
           "parse_bounds", "experiment_settings", "load_experiments"]

#: Most integrator steps of one simulation (as in :func:`fmi_adjoint.integrate.time_grid`).
_MAX_MODEL_BYTES = 4 * 1024 * 1024


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


def resolve_model(spec: str, values: dict[str, float] | None = None, *,
                  allow_external_tables: bool = False) -> CompiledModel:
    """Compile MODEL (numpy functions only): a TOML file path or the name of a bundled example.

    ``allow_external_tables``: ``--allow-external-tables`` (see :func:`load_model`).
    """
    return resolve_engine(spec, values, engine="python", allow_external_tables=allow_external_tables).compiled


def resolve_engine(spec: str, values: dict[str, float] | None = None, *, engine: str = "auto",
                   allow_external_tables: bool = False) -> AbstractEngine:
    """Build MODEL's engine through the build cache (``--engine``).

    ``auto``: the native engine, or the Python reference with a one-line note when there
    is no C compiler or an element has no C code; ``native``: the same without fallback.
    """
    source = model_path(spec)
    model = load_model(source, allow_external_tables=allow_external_tables)
    try:
        model = model.with_values(values or {})
        if engine == "python":
            return PythonEngine.build(model)
        try:
            return NativeEngine.build(model)
        except (CompilerError, NoCCodeError) as exc:  # no compiler, a failing one, or an element without C
            reason = str(exc)
        if engine == "native":
            raise ModelError(f"--engine native: {reason.rstrip('.')}; use --engine python or fix the cause.")
        print(f"fmi-adjoint: note: using the Python engine ({reason.rstrip('.')}).", file=sys.stderr)
        return PythonEngine.build(model)
    except ExpressionError as exc:
        raise ExpressionError(f"{source}: {exc}") from None
    except ModelError as exc:
        text = str(exc)
        raise ModelError(text if str(source) in text else f"{source}: {text}") from None


def model_inputs(spec: str) -> list[tuple[str, Path]]:
    """The files MODEL reads: the model file and its ``table_load`` files, as
    ``(role, path)`` pairs for :func:`~fmi_adjoint.files.check_not_input`.

    Best effort on purpose: a file that cannot be read or parsed here is reported by
    :func:`load_model`, which runs next; this only keeps ``-o`` from naming an input.
    """
    try:
        source = model_path(spec)
    except ModelError:
        return []
    files = [("model file", source)]
    try:
        doc = tomllib.loads(decode_text(read_regular(source, _MAX_MODEL_BYTES, "a model file", ModelError)))
    except (ModelError, UnicodeDecodeError, ValueError):  # TOMLDecodeError is a ValueError
        return files
    forces = doc.get("forces", [])
    for force in forces if isinstance(forces, list) else []:
        if isinstance(force, dict) and force.get("type") == "table_load" and isinstance(force.get("file"), str) \
                and "\0" not in force["file"]:
            files.append(("table file", source.parent / force["file"]))
    return files


def check_time_span(t_end: float | None, step: float | None, *, t_end_option: str = "--t-end",
                    step_option: str = "--step") -> None:
    """The one check of an end time and a step, shared by every command.

    Each must be finite and positive, and together they must give at most
    :data:`MAX_STEPS` steps (the trajectory is stored at every step: a larger count
    exhausts the memory before any step is taken).  ``None`` means "not known yet".
    """
    for option, value, what in ((step_option, step, "step"), (t_end_option, t_end, "end time")):
        if value is None:
            continue
        if not math.isfinite(value) or not value > 0:
            raise ModelError(f"{option} {value!r}: the {what} must be a finite positive number of seconds.")
    if t_end is not None and step is not None and t_end / step > MAX_STEPS:
        raise ModelError(
            f"{t_end_option} {t_end:g} with {step_option} {step:g} gives {t_end / step:.3g} steps, more than the "
            f"limit of {MAX_STEPS:.0e}; choose a larger {step_option} or a smaller {t_end_option}."
        )


_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)


def _number(text: str, what: str) -> float:
    """A plain ASCII decimal, or ``inf``/``-inf`` (``float`` alone would also take ``1_0``
    and non-ASCII digits)."""
    if text.lower() in ("inf", "+inf", "-inf"):
        return float(text)
    if text.lower().lstrip("+-") in ("nan", "infinity"):
        raise ModelError(f"{what}: {excerpt(text)} is not allowed; give a finite number.")
    if not _DECIMAL.fullmatch(text):
        raise ModelError(f"{what}: {excerpt(text)} is not a number (plain decimal digits, e.g. 1.5e3).")
    return float(text)


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
    alpha: float | None = None,
    integrator: str | None = None,
    rho_inf: float | None = None,
    identified: Sequence[str] = (),
    cost: CostOptions | None = None,
    allow_external_tables: bool = False,
    engine: str = "auto",
) -> list[Experiment]:
    """One experiment per ``--data FILE[@NAME=VALUE,...]``, sharing the model.

    The settings after ``@`` apply to that experiment only (excitation, initial state).
    ``cost`` chooses what is compared (default: least squares of the time series).
    Without ``--t-end`` each experiment is simulated up to its last sample (spectra: the
    model's end time).  ``engine``: ``--engine`` (see :func:`resolve_engine`).
    """
    built = resolve_engine(model_spec, engine=engine, allow_external_tables=allow_external_tables)
    model = built.compiled
    options = cost or CostOptions()
    h = step if step is not None else model.model.simulation.step
    check_time_span(t_end, h)
    solver = None
    if integrator is not None or alpha is not None or rho_inf is not None:
        solver = scheme_from_settings(model.model.simulation, integrator=integrator, alpha=alpha, rho_inf=rho_inf)
    experiments = []
    for spec in data_specs:
        file, values = experiment_settings(spec, settings, identified)
        for name in values:
            model.parameter_index(name)
        experiment_cost, end = build_cost(options, Target.of_model(model), file, t_end=t_end, step=h)
        check_time_span(end, h, t_end_option="--t-end (or the last sample time)")
        experiments.append(
            Experiment(model, experiment_cost, values=values, t_end=end, step=step, solver=solver,
                       name=Path(file).stem, engine=built)
        )
    return experiments
