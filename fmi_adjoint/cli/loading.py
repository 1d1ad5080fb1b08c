"""Resolving the command line's MODEL, --set, --bounds and --data arguments."""

from __future__ import annotations

import dataclasses
import math
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from ..bench import detect_format
from ..bench.preprocess import Preprocessing
from ..compiled import CompiledModel
from ..engines import AbstractEngine
from ..errors import ModelError
from ..examples import example_names, example_path
from ..identify import IdentificationProblem
from ..identify.data_costs import CostOptions, DataFile
from ..identify.spec import ExperimentSpec, ProblemSpec, build_engine, check_time_span, model_error_in
from ..integrate.schemes import scheme_from_settings
from ..model_file import ModelSource, model_file_inputs
from ..text import excerpt
from ..warm import prepare_model

__all__ = ["model_path", "model_inputs", "resolve_engine", "resolve_model", "check_time_span", "parse_assignments",
           "parse_bounds", "data_window", "experiment_settings", "problem_spec", "load_problem"]


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


def resolve_model(spec: str, *, allow_external_tables: bool = False) -> CompiledModel:
    """Compile MODEL (numpy functions only): a TOML file path or the name of a bundled example.

    ``allow_external_tables``: ``--allow-external-tables`` (see :func:`load_model`).
    """
    return resolve_engine(spec, engine="python", allow_external_tables=allow_external_tables).compiled


def resolve_engine(spec: str, *, engine: str = "auto", allow_external_tables: bool = False) -> AbstractEngine:
    """Build MODEL's engine through the build cache (``--engine``; see
    :func:`~fmi_adjoint.identify.spec.build_engine`); the fallback note goes to stderr.  The
    parameter values travel to the engine's runs, not into the model
    (:class:`~fmi_adjoint.integrate.inputs.ParameterValues`)."""
    source = model_path(spec)
    model = prepare_model(source, allow_external_tables=allow_external_tables)
    try:
        built, note = build_engine(model, engine)
    except ModelError as exc:
        raise model_error_in(str(source), exc) from None
    if note:
        print(f"fmi-adjoint: note: {note}", file=sys.stderr)
    return built


def model_inputs(spec: str) -> list[tuple[str, Path]]:
    """The files MODEL reads (:func:`~fmi_adjoint.model_file.model_file_inputs`), none if MODEL
    names no file (the error comes from :func:`load_model`, which runs next)."""
    try:
        return model_file_inputs(model_path(spec))
    except ModelError:
        return []


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
    """``["c=1.5", "d=0.2"]`` to ``{"c": 1.5, "d": 0.2}``; a name given twice is refused
    (which of two values was meant cannot be guessed)."""
    values: dict[str, float] = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise ModelError(f"{option} {item!r}: expected NAME=VALUE, e.g. {option} c_E1=1.2e5.")
        value = _number(text.strip(), f"{option} {item}")
        if not math.isfinite(value):
            raise ModelError(f"{option} {item!r}: the value must be finite.")
        if name.strip() in values:
            raise ModelError(f"{option} {excerpt(name.strip())} is given twice ({values[name.strip()]:g} and "
                             f"{value:g}); give it once.")
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
    """``"c,d"`` to ``["c", "d"]``; a comma inside brackets belongs to an array element
    (``"A[1,2],k"`` is ``["A[1,2]", "k"]``)."""
    names = [n.strip() for n in re.split(r",(?![^\[]*\])", text or "") if n.strip()]
    if not names:
        raise ModelError("--params: give a comma-separated list of parameter names, e.g. --params c_E1,d_E.")
    return names


def data_window(spec: str) -> tuple[float, float] | None:
    """The time window ``window=T0:T1`` among the settings after ``@`` of ``--data`` (None if
    there is none): the experiment compares the samples with ``T0 <= t <= T1``, shifted to t = 0
    (:mod:`fmi_adjoint.bench.preprocess`)."""
    windows = [item for item in spec.partition("@")[2].split(",") if item.strip().startswith("window=")]
    if not windows:
        return None
    if len(windows) > 1:
        raise ModelError(f"--data {excerpt(spec)}: the window is given {len(windows)} times; give it once.")
    lo, colon, hi = windows[0].partition("=")[2].partition(":")
    what = f"--data {excerpt(spec)}: window"
    t0, t1 = (_number(lo.strip(), what), _number(hi.strip(), what)) if colon else (math.nan, math.nan)
    if not (colon and math.isfinite(t0) and math.isfinite(t1) and t0 < t1):
        raise ModelError(f"{what}: expected window=T0:T1 with finite T0 < T1 in seconds, e.g. "
                         "--data run.mf4@window=12.5:17.5.")
    return t0, t1


#: The settings after ``@`` of ``--data`` that are not parameter values.
_DATA_KEYS = ("window=", "with=")


def data_companions(spec: str) -> tuple[str, ...]:
    """The further files of the experiment, ``with=FILE`` among the settings after ``@`` of
    ``--data`` (repeatable): channels recorded by other loggers on the same clock, merged with
    the main file's (multi-rate, :mod:`fmi_adjoint.bench.merge`)."""
    files = tuple(item.strip().partition("=")[2].strip() for item in spec.partition("@")[2].split(",")
                  if item.strip().startswith("with="))
    if any(not file for file in files):
        raise ModelError(f"--data {excerpt(spec)}: with= needs a file, e.g. --data fast.mf4@with=slow.csv.")
    return files


def experiment_settings(spec: str, settings: dict[str, float], identified) -> tuple[str, dict[str, float]]:
    """``--data FILE[@NAME=VALUE,...]`` to the file and its parameter values (``--set`` values
    updated by the settings after ``@``, which must not be identified parameters; ``window=``
    is the time window, :func:`data_window`)."""
    file, _, local = spec.partition("@")
    values = dict(settings)
    items = [s for s in local.split(",") if s and not s.strip().startswith(_DATA_KEYS)]
    local_values = parse_assignments(items, option=f"--data {spec}")
    clash = sorted(set(local_values) & set(identified))
    if clash:
        raise ModelError(
            f"--data {spec}: {clash} are identified (shared by all experiments) and also set for this "
            "experiment only; remove them from --params or from the '@' settings."
        )
    values.update(local_values)
    return file, values


def problem_spec(
    model_spec: str,
    data_specs: list[str],
    settings: dict[str, float],
    names: Sequence[str],
    *,
    t_end: float | None,
    step: float | None,
    integrator: str | None = None,
    alpha: float | None = None,
    rho_inf: float | None = None,
    newton: str | None = None,
    cost: CostOptions | None = None,
    bounds: dict[str, tuple[float, float]] | None = None,
    allow_external_tables: bool = False,
    engine: str = "auto",
    preprocessing: Preprocessing | None = None,
) -> ProblemSpec:
    """The :class:`~fmi_adjoint.identify.spec.ProblemSpec` of MODEL and one experiment per
    ``--data FILE[@NAME=VALUE,...]``: the files read once, here.

    The settings after ``@`` apply to that experiment only (excitation, initial state).
    ``integrator``, ``alpha``, ``rho_inf``, ``newton`` override the model's integration settings.
    ``preprocessing`` (``--map``, ``--time-shift``, ``--detrend``, ``--resample``) applies to
    every file, each with its own ``window=`` (:mod:`fmi_adjoint.bench.preprocess`); a binary
    file (MDF, MAT, HDF5) is read here, only the channels mapped or named like an output.
    """
    path = model_path(model_spec)
    source = ModelSource.from_path(path, allow_external_tables=allow_external_tables)
    solver = None
    if integrator is not None or alpha is not None or rho_inf is not None or newton is not None:
        solver = scheme_from_settings(source.load().simulation, integrator=integrator, alpha=alpha, rho_inf=rho_inf,
                                      newton=newton)
    experiments = []
    common = preprocessing or Preprocessing()
    outputs: tuple[str, ...] | None = None
    for spec in data_specs:
        file, values = experiment_settings(spec, {}, names)  # the experiment's own settings; --set is the spec's
        window = data_window(spec)
        files = (file, *data_companions(spec))
        if len(files) > 1 and (common.detrend is not None or common.resample):
            raise ModelError(f"--data {excerpt(spec)}: with= compares each logger's channels at their own times; "
                             "--detrend and --resample need every channel at every time. Remove them, or give the "
                             "files as separate experiments.")
        if outputs is None and (len(files) > 1 or detect_format(file).name != "csv"):  # the channels to read
            outputs = tuple(output.name for output in source.load().outputs)
        data = DataFile.from_paths(files, preprocessing=dataclasses.replace(common, window=window), outputs=outputs)
        stem = "+".join(Path(f).stem for f in files)
        name = stem if window is None else f"{stem}@{window[0]:g}:{window[1]:g}"
        experiments.append(ExperimentSpec(data, tuple(values.items()), name))
    return ProblemSpec.create(source, experiments, names, cost=cost, bounds=bounds, t_end=t_end, step=step,
                              solver=solver, engine=engine, values=settings)


def load_problem(spec: ProblemSpec) -> tuple[ProblemSpec, IdentificationProblem]:
    """Build ``spec`` here (engine fallback noted on stderr); the spec with its engine resolved."""
    try:
        resolved, problem, note = spec.resolved()
    except ModelError as exc:
        raise model_error_in(spec.model.source, exc) from None
    if note:
        print(f"fmi-adjoint: note: {note}", file=sys.stderr)
    return resolved, problem
