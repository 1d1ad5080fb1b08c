"""Resolving ``--fmu``, ``--data``, ``--inputs`` of ``gradient`` and ``identify`` on an FMU.

The time grid of a Co-Simulation FMU with a fixed internal step (one exported by
fmi-adjoint: ``resources/export.json`` ``step``; a Co-Simulation-only FMU declaring a
``DefaultExperiment`` ``stepSize``) is the FMU's own grid: the communication points are
multiples of that step and the outputs are interpolated to the data times
(:class:`~fmi_adjoint.costs.Sampler`), instead of stepping to the data times, whose
spacing parsed from text is a multiple of the FMU's step only up to round-off.  The end
time snaps to the grid when it is a multiple up to round-off, else the grid ends at the
first multiple past it, so no off-grid step is ever asked of such an FMU.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..data import read_csv
from ..errors import ModelError
from ..fmu.archive import FmuArchive, FmuError
from ..fmu.experiment import DEFAULT_ATOL, DEFAULT_RTOL, FmuExperiment, Tolerances
from ..fmu.problem import FmuProblem
from ..fmu.variables import declared_variable, numeric_names
from ..identify.data_costs import CostOptions, DataFile, Target, build_cost
from ..identify.spec import check_time_span
from ..integrate.radau import RunBudget
from .loading import experiment_settings

__all__ = ["check_model_exchange_options", "load_fmu_experiments", "fmu_fixed_step", "fmu_target", "grid_end",
           "held_inputs_note", "run_tolerances"]

#: ``--rtol`` range: below 1e-14 the error estimate is round-off (the Newton iteration itself
#: stops at 1e-14 relative; the discretization-error estimate runs at rtol / 100), at 1 and
#: above it controls nothing.
RTOL_RANGE = (1e-14, 1.0)
#: ``--atol`` range (times each state's nominal value): below 1e-30 it would turn into subnormal
#: numbers after the nominal scaling and the ×1/100 of the error estimate (``--atol 1e-320``
#: divided by zero), and it is below the round-off of any state above 1e-16 at the smallest
#: rtol anyway; at 1 and above the error of a state could be its whole nominal size.
ATOL_RANGE = (1e-30, 1.0)

#: The Model Exchange options: they act on the adaptive integration here only.
MODEL_EXCHANGE_OPTIONS = ("rtol", "atol", "max_steps", "max_events", "run_timeout")


def run_tolerances(rtol: float | None, atol: float | None, step: float | None, *, max_steps: int | None = None,
                   max_events: int | None = None, run_timeout: float | None = None) -> Tolerances:
    """The error control and budget of Model Exchange runs from ``--rtol``, ``--atol``, ``--step``,
    ``--max-steps``, ``--max-events`` and ``--run-timeout`` (None: the default), each checked
    against its allowed range with one error naming the option, the value and the range."""
    for option, value, (low, high), default in (("--rtol", rtol, RTOL_RANGE, DEFAULT_RTOL),
                                                 ("--atol", atol, ATOL_RANGE, DEFAULT_ATOL)):
        if value is not None and not (math.isfinite(value) and low <= value < high):
            raise FmuError(f"{option} {value!r}: give a tolerance in [{low:g}, {high:g}) (default {default:g}).")
    if step is not None and not (math.isfinite(step) and step > 0):
        raise ModelError(f"--step {step!r}: the step must be a finite positive number of seconds.")
    defaults = RunBudget()
    budget = RunBudget(max_steps=defaults.max_steps if max_steps is None else max_steps,
                       max_events=defaults.max_events if max_events is None else max_events,
                       max_seconds=defaults.max_seconds if run_timeout is None else run_timeout)
    return Tolerances(rtol=DEFAULT_RTOL if rtol is None else rtol, atol=DEFAULT_ATOL if atol is None else atol,
                      max_step=math.inf if step is None else step, budget=budget)


def check_model_exchange_options(problem, experiments, tolerances: Tolerances, given: list[str]) -> None:
    """After the interface is chosen: the Model Exchange options ``given`` (``--rtol``...) are
    refused unless the problem integrates Model Exchange runs here (an option that would do
    nothing must say so), and on Model Exchange ``--step`` (the largest step) must fit the step
    budget of every experiment."""
    interface = problem.interface if isinstance(problem, FmuProblem) else None  # None: the embedded model
    if interface != "ModelExchange" and given:
        options = " and ".join(given)
        if interface == "CoSimulation":
            where = ("this run uses the FMU's Co-Simulation interface, whose own solver ignores "
                     f"{'it' if len(given) == 1 else 'them'}: give --interface me to integrate here")
        else:
            where = ("this run uses the model embedded in the FMU (the adjoint path, with the FMU's fixed-step "
                     "scheme): give --gradient sensitivity --interface me to integrate the binary")
        raise FmuError(f"{options} {'applies' if len(given) == 1 else 'apply'} to Model Exchange runs only; {where}, "
                       f"or remove {options}.")
    if interface != "ModelExchange" or math.isinf(tolerances.max_step):
        return
    budget = tolerances.budget
    for exp in experiments:
        needed = exp.t_end / tolerances.max_step
        if needed > budget.max_steps:
            raise FmuError(f"--step {tolerances.max_step:g}: a Model Exchange run of {exp.t_end:g} s with steps of "
                           f"at most --step needs at least {needed:.3g} steps, more than --max-steps "
                           f"{budget.max_steps}; give --step {exp.t_end / budget.max_steps:.3g} or larger, or raise "
                           "--max-steps.")


def fmu_target(archive: FmuArchive) -> Target:
    """The FMU's outputs with their units and default end time (``DefaultExperiment``, else 1 s)."""
    experiment = archive.description.defaultExperiment
    declared = experiment is not None and experiment.stopTime is not None
    outputs = tuple(numeric_names(archive, "output"))
    return Target(archive.path.name, outputs, float(experiment.stopTime) if declared else 1.0,
                  tuple(declared_variable(archive, name).unit or "" for name in outputs), declared)


def fmu_fixed_step(archive: FmuArchive) -> float | None:
    """The internal step of a Co-Simulation FMU that advances on a fixed grid, else None.

    An FMU exported by fmi-adjoint records it in ``resources/export.json`` (read as a claim
    only: a wrong value ends in the FMU's own "not a whole multiple" error, nothing is
    trusted on it); a Co-Simulation-only FMU from elsewhere is taken at its
    ``DefaultExperiment`` ``stepSize``.  FMUs with Model Exchange keep the data's step.
    """
    if not archive.co_simulation:
        return None
    settings_file = archive.directory / "resources" / "export.json"
    try:
        settings = json.loads(settings_file.read_text(encoding="utf-8")) if settings_file.is_file() else None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        settings = None
    if isinstance(settings, dict) and str(settings.get("generator", "")).startswith("fmi-adjoint"):
        step = settings.get("step")
        if isinstance(step, (int, float)) and not isinstance(step, bool) and math.isfinite(step) and step > 0:
            return float(step)
    experiment = archive.description.defaultExperiment
    if archive.model_exchange or experiment is None or not experiment.stepSize:
        return None
    step = float(experiment.stepSize)
    return step if math.isfinite(step) and step > 0 else None


def grid_end(t_end: float, step: float) -> float:
    """The end of a grid of whole steps covering ``[0, t_end]``: ``t_end`` itself up to
    round-off when it is a multiple of ``step`` (relative 1e-9 of the step count), else the
    first multiple past it."""
    count = t_end / step
    nearest = round(count)
    if nearest >= 1 and abs(count - nearest) <= 1e-9 * nearest:
        return nearest * step
    return max(1, math.ceil(count)) * step


def _default_step(archive: FmuArchive, times: np.ndarray | None, t_end: float) -> float:
    intervals = np.diff(times) if times is not None and times.size > 1 else np.zeros(0)
    if np.any(intervals > 0):  # a time repeated at an event is no interval
        return float(np.min(intervals[intervals > 0]))
    experiment = archive.description.defaultExperiment
    if experiment is not None and experiment.stepSize:
        return float(experiment.stepSize)
    return t_end / 1000.0


def load_fmu_experiments(
    archive: FmuArchive,
    data_specs: list[str],
    settings: dict[str, float],
    *,
    inputs_file: str | None,
    t_end: float | None,
    step: float | None,
    identified: list[str],
    cost: CostOptions,
) -> list[FmuExperiment]:
    """One experiment per ``--data FILE[@NAME=VALUE,...]`` on the FMU.

    The step is ``--step``, else the internal step of a fixed-step Co-Simulation FMU
    (:func:`fmu_fixed_step`), else the smallest sample interval of a time series, else the
    FMU's default step size, else ``t_end / 1000``.  On a fixed-step FMU the end time is
    :func:`grid_end` (see the module docstring).
    """
    target = fmu_target(archive)
    fixed = fmu_fixed_step(archive)
    inputs = read_csv(inputs_file) if inputs_file else None
    if inputs is not None and not inputs.columns:
        raise FmuError(f"{inputs_file}: no input column besides 'time'; name the columns as the FMU's inputs "
                       f"({', '.join(archive.names('input')) or 'it has none'}).")
    experiments = []
    for spec in data_specs:
        file, values = experiment_settings(spec, settings, identified)
        end_guess = t_end if t_end is not None else target.t_end
        data = DataFile.from_path(file, events=True)
        if step is not None:
            h = step
        elif fixed is not None:
            h = fixed
        elif "time" in data.header():
            h = _default_step(archive, data.read().times, end_guess)
        else:
            h = _default_step(archive, None, end_guess)
        experiment_cost, end = build_cost(cost, target, data, t_end=t_end, step=h)
        if not (h > 0 and math.isfinite(h)):
            raise ModelError(f"--step {h!r}: the step must be positive.")
        # The limit model files have (the communication grid is stored), before any FMU call.
        check_time_span(end, h, t_end_option="--t-end (or the last sample time)")
        if inputs is not None and (inputs.times[0] > 1e-12 or inputs.times[-1] < end * (1 - 1e-12)):
            raise FmuError(f"{inputs_file}: the inputs span [{inputs.times[0]:g}, {inputs.times[-1]:g}] s but the "
                           f"simulation needs [0, {end:g}] s; extend the input file.")
        if fixed is not None:
            end = grid_end(end, h)
        experiments.append(FmuExperiment(experiment_cost, t_end=end, step=h, inputs=inputs, values=values,
                                         name=Path(file).stem))
    return experiments



def held_inputs_note(archive: FmuArchive, inputs_file: str | None, given: tuple[str, ...]) -> str | None:
    """The note that inputs of the FMU no ``--inputs`` column drives are held at their start
    values (None: every input is given, or the FMU has none).

    Running with an input at its start value is legitimate (an input not excited in the
    experiment), so it is not refused, but it is what a forgotten ``--inputs`` looks like:
    the fit then explains the data without the signal that made them.
    """
    held = [name for name in numeric_names(archive, "input") if name not in set(given)]
    if not held:
        return None
    names = ", ".join(held[:8]) + (f" and {len(held) - 8} more" if len(held) > 8 else "")
    if inputs_file is None:
        return (f"{archive.path.name}'s input{'s' if len(held) > 1 else ''} {names} "
                f"{'are' if len(held) > 1 else 'is'} held at {'their' if len(held) > 1 else 'its'} start "
                f"value{'s' if len(held) > 1 else ''} (no --inputs given); give the signals with --inputs INPUTS.csv "
                "('time' and one column per input).")
    return (f"{inputs_file} has no column for the input{'s' if len(held) > 1 else ''} {names} of "
            f"{archive.path.name}, held at {'their' if len(held) > 1 else 'its'} start "
            f"value{'s' if len(held) > 1 else ''}; add {'those columns' if len(held) > 1 else 'that column'} "
            f"to drive {'them' if len(held) > 1 else 'it'}.")
