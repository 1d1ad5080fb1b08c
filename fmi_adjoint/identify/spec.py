"""What an identification is built from: model text, data bytes and settings (issue 14).

A :class:`ProblemSpec` is the picklable description of an identification problem.  The
parent process builds it from the files once; every worker (a local process or a Dask
worker on another machine) builds the same :class:`~fmi_adjoint.identify.IdentificationProblem`
from it through the build cache, so a model is compiled once per machine and never
travels as a compiled object.  The command line only parses options into a spec.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Mapping, Sequence

import numpy as np

from ..budget import MEMORY_LIMIT_ENV, MemoryEstimate, doubles
from ..compiled import CompiledModel
from ..engines import ENGINE_CHOICES, AbstractEngine, AbstractEngineChoice, choose_engine, engine_choice
from ..bench.inputs import check_coverage
from ..errors import DataError, ExpressionError, ModelError
from ..integrate import AbstractScheme
from ..integrate.hht import MAX_STEPS
from ..integrate.inputs import ParameterValues
from ..model import InputSignal, Model
from ..model_file import ModelSource
from ..text import excerpt
from ..warm import prepare_model
from .data_costs import CostOptions, DataFile, Target, build_cost, input_courses
from .problem import Experiment, IdentificationProblem

__all__ = ["ENGINES", "ExperimentSpec", "ProblemSpec", "build_engine", "check_time_span", "driven_engine"]

#: ``--engine`` names (:data:`~fmi_adjoint.engines.ENGINE_CHOICES`).
ENGINES = tuple(ENGINE_CHOICES)


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


def build_engine(model: Model, engine: str | AbstractEngineChoice = "auto") -> tuple[AbstractEngine, str | None]:
    """The engine of ``model`` through the build cache, and a note if ``auto`` fell back
    (:func:`~fmi_adjoint.engines.choose_engine`, the one chooser; ``engine``: an ``--engine``
    name or choice)."""
    built = choose_engine(model, engine)
    return built.engine, built.note


@dataclasses.dataclass(frozen=True)
class ExperimentSpec:
    """One experiment: its data file and its own parameter values (the settings after ``@``
    of ``--data FILE@NAME=VALUE``; the problem's ``--set`` values are
    :attr:`ProblemSpec.values`, under these)."""

    data: DataFile
    values: tuple[tuple[str, float], ...] = ()
    name: str = "experiment"


@dataclasses.dataclass(frozen=True)
class ProblemSpec:
    """An identification problem as model text, data bytes and settings.

    Attributes
    ----------
    model : ModelSource
    experiments : tuple of ExperimentSpec
    names : tuple of str
        Identified parameters.
    cost : CostOptions
    bounds : tuple of (str, float, float)
        Bounds overriding the model's.
    t_end, step : float, optional
        ``--t-end`` (default: each experiment's last sample) and ``--step``.
    solver : AbstractScheme, optional
        The integration scheme (default: the model's settings).
    engine : AbstractEngineChoice
        An ``--engine`` name is looked up once, here (:func:`~fmi_adjoint.engines.engine_choice`).
        Resolved to ``native`` or ``python`` by :meth:`resolved` in the parent, so that
        every worker runs the engine the parent chose.
    values : ParameterValues
        The problem's parameter values (``--set``): every experiment's (its own settings
        replace them) and the start of the identified parameters (where not given: their
        declared values, as an identified name is not an experiment's own setting).  One value
        from the command line to the engines (docs/explanation/parameter-journey.md).
    """

    model: ModelSource
    experiments: tuple[ExperimentSpec, ...]
    names: tuple[str, ...]
    cost: CostOptions = CostOptions()
    bounds: tuple[tuple[str, float, float], ...] = ()
    t_end: float | None = None
    step: float | None = None
    solver: AbstractScheme | None = None
    engine: AbstractEngineChoice = ENGINE_CHOICES["auto"]
    values: ParameterValues = ParameterValues()

    def __post_init__(self) -> None:
        object.__setattr__(self, "engine", engine_choice(self.engine))
        object.__setattr__(self, "values", ParameterValues.of(self.values))

    @classmethod
    def create(cls, model: ModelSource, experiments: Sequence[ExperimentSpec], names: Sequence[str], *,
               cost: CostOptions | None = None, bounds: Mapping[str, tuple[float, float]] | None = None,
               t_end: float | None = None, step: float | None = None, solver: AbstractScheme | None = None,
               engine: str | AbstractEngineChoice = "auto",
               values: ParameterValues | Mapping[str, float] | None = None) -> ProblemSpec:
        """A spec from plain Python values."""
        return cls(model, tuple(experiments), tuple(names), cost or CostOptions(),
                   tuple((n, float(lo), float(hi)) for n, (lo, hi) in (bounds or {}).items()),
                   t_end, step, solver, engine_choice(engine), ParameterValues.of(values))

    def digest(self) -> str:
        """SHA-256 naming the problem: workers keep built problems under it, and a
        checkpoint records it to refuse resuming another problem."""
        h = hashlib.sha256()
        h.update(self.model.digest().encode())
        for exp in self.experiments:
            h.update(exp.data.digest().encode() + repr((exp.values, exp.name)).encode())
        solver = None if self.solver is None else sorted(self.solver.record().items())
        rest = (self.names, self.cost, self.bounds, self.t_end, self.step, solver, self.engine.name)
        h.update(repr(rest).encode() + self._values_part())
        return h.hexdigest()

    def _values_part(self) -> bytes:
        """The problem's values in a digest (nothing without values: the digests of specs
        whose values travel inside the experiments stay as they were)."""
        return repr(self.values.items).encode() if self.values.items else b""

    def content_digest(self) -> str:
        """SHA-256 of what the result depends on, without file paths: model text, table and
        data bytes, per-experiment values and the settings (a checkpoint's identity)."""
        h = hashlib.sha256()
        h.update(self.model.text.encode())
        for name, raw in self.model.tables:
            h.update(name.encode() + b"\0" + hashlib.sha256(raw).digest())
        for exp in self.experiments:
            h.update(exp.data.content_digest() + repr(exp.values).encode())
        solver = None if self.solver is None else sorted(self.solver.record().items())
        h.update(repr((self.names, self.cost, self.bounds, self.t_end, self.step, solver, self.engine.name)).encode()
                 + self._values_part())
        return h.hexdigest()

    def resolved(self) -> tuple[ProblemSpec, IdentificationProblem, str | None]:
        """Build the problem here; the spec with the engine that ran (``auto`` resolved),
        the problem, and the fallback note of ``auto`` (None if the native engine ran)."""
        built = choose_engine(prepare_model(self.model), self.engine)
        spec = dataclasses.replace(self, engine=engine_choice(built.engine.name))
        return spec, spec._problem(built.engine), built.note

    def build(self) -> IdentificationProblem:
        """The identification problem (in a worker: through its build cache)."""
        # The parent resolved ``auto`` (:meth:`resolved`): a worker builds that engine or fails.
        return self._problem(choose_engine(prepare_model(self.model), self.engine).engine)

    def _problem(self, engine: AbstractEngine) -> IdentificationProblem:
        bounds = {name: (lo, hi) for name, lo, hi in self.bounds}
        return IdentificationProblem(experiment_list(engine, self.experiments, cost=self.cost, t_end=self.t_end,
                                                     step=self.step, solver=self.solver,
                                                     parameters=len(self.names), values=self.values),
                                     self.names, bounds=bounds, start=self.values)


def experiment_list(engine: AbstractEngine, specs: Sequence[ExperimentSpec], *, cost: CostOptions,
                    t_end: float | None, step: float | None, solver: AbstractScheme | None,
                    parameters: int = 1, values: ParameterValues | None = None) -> list[Experiment]:
    """One :class:`Experiment` per spec, sharing ``engine``; its parameter values are
    ``values`` (the problem's) with the spec's own replacing them.

    Without ``t_end`` each experiment is simulated up to its last sample (spectra: the
    model's end time).  Their memory (:func:`identification_memory` with ``parameters``
    identified) is checked against :func:`fmi_adjoint.budget.memory_limit` before any run.

    Raises
    ------
    MemoryBudgetError
        The runs would exceed the memory limit (the figure and the fix).
    """
    model: CompiledModel = engine.compiled
    h = step if step is not None else model.model.simulation.step
    check_time_span(t_end, h)
    experiments = []
    for spec in specs:
        own = ParameterValues.of(values).updated(dict(spec.values)).as_dict()
        for name in own:
            model.parameter_index(name)
        experiment_cost, end = build_cost(cost, Target.of_model(model), spec.data, t_end=t_end, step=h)
        check_time_span(end, h, t_end_option="--t-end (or the last sample time)")
        own_engine = driven_engine(engine, spec.data, t_end=end)
        experiments.append(Experiment(own_engine.compiled, experiment_cost, values=own, t_end=end, step=step,
                                      solver=solver, name=spec.name, engine=own_engine))
    identification_memory(engine, experiments, parameters).check()
    return experiments


def driven_engine(engine: AbstractEngine, data: DataFile, *, t_end: float) -> AbstractEngine:
    """``engine``, or with channels of ``data`` driving model inputs (``--input INPUT=CHANNEL``)
    the engine of its model with those inputs as measured data
    (:class:`~fmi_adjoint.model.InputSignal`; built through the cache, as every build).

    The data are compiled into the experiment's model, as a ``table_load``'s table: one build
    per distinct excitation (a cache entry each), shared by every run of the experiment.

    The experiment's channel replaces measured data a model file names for the same input
    (``[inputs] z = { file, channel }``: the model's default excitation).

    Raises
    ------
    DataError
        An input the model does not have or one driven by a designed signal, a channel the file
        does not have, incompatible units, gaps, a record that does not cover ``[0, t_end]``.
    """
    if not data.preprocessing.inputs:
        return engine
    model = engine.compiled.model
    declared = {p.name: p for p in model.all_parameters if p.causality == "input"}
    designed = {s.input for s in model.signals if not s.measured}
    for name, channel in data.preprocessing.inputs:
        if name not in declared:
            raise DataError(f"--input {excerpt(name)}={excerpt(channel)}: {excerpt(name)} is not an input of model "
                            f"'{model.name}'; inputs: {', '.join(declared) or '(none: declare one in [inputs])'}.")
        if name in designed:
            raise DataError(f"--input {excerpt(name)}={excerpt(channel)}: the model drives {excerpt(name)} with a "
                            "designed signal (knot values); give one source for it.")
    courses = input_courses(data, units={n: p.unit for n, p in declared.items()}, model=f"'{model.name}'")
    for course in courses:
        check_coverage(course, t_end)
    # The experiment's record replaces measured data the model file names for the same input.
    replaced = {c.input for c in courses}
    signals = tuple(s for s in model.signals if s.input not in replaced) + tuple(
        InputSignal(c.input, ((tuple(c.times.tolist()), tuple(c.values.tolist())),), source=c.source) for c in courses)
    return choose_engine(dataclasses.replace(model, signals=signals), engine_choice(engine.name)).engine


def identification_memory(engine: AbstractEngine, experiments: Sequence[Experiment], parameters: int
                          ) -> MemoryEstimate:
    """An upper bound of the dominant arrays of an identification, from the sizes alone
    (before any run): the stored runs of every experiment (states, outputs; the native
    engine keeps at most its ``memory_budget`` of states and checkpoints beyond), and for
    the largest experiment its adjoint sweep (states and seeds at every step) and the
    sampled output Jacobians of the forward, residual and statistics paths (samples x
    channels x ``parameters``)."""
    model = engine.compiled
    S = 3 * model.n + model.m
    cap = engine.memory_budget
    runs, sweeps, jacobians = 0, 0, 0
    longest = ""
    for exp in experiments:
        end = exp.t_end if exp.t_end is not None else model.model.simulation.t_end
        rows = int(end / (exp.step or model.model.simulation.step)) + 2
        states = doubles(rows, S) if cap is None else min(doubles(rows, S), cap)
        runs += states + doubles(rows, model.n_y + 1)
        if doubles(rows, 2 * S) > sweeps:
            sweeps, longest = doubles(rows, 2 * S), f"{rows:.3g} steps x {S} states"
        samples = np.size(exp.cost.sample_times)
        jacobians = max(jacobians, 3 * doubles(samples, model.n_y, parameters))
    parts = ((f"runs of {len(experiments)} experiment(s) ({S} states, {model.n_y} outputs at every step)", runs),
             (f"adjoint sweep of {longest}", sweeps),
             (f"output Jacobians of the samples x {model.n_y} outputs x {parameters} parameters", jacobians))
    # identify and gradient take no --memory-limit: the limit travels to the workers in the
    # environment, like the rest of the machine's settings.
    return MemoryEstimate("this identification", parts, "Lower --t-end, raise --step, or decimate the data",
                          raise_with=f"{MEMORY_LIMIT_ENV}=SIZE")


def model_error_in(source: str, exc: ModelError) -> ModelError:
    """``exc`` with the model file named once (expression errors keep their class)."""
    text = str(exc)
    if isinstance(exc, ExpressionError):
        return ExpressionError(f"{source}: {text}")
    return ModelError(text if source in text else f"{source}: {text}")
