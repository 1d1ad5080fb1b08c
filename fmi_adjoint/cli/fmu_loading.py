"""Resolving ``--fmu``, ``--data``, ``--inputs`` and the Model Exchange options of ``gradient``
and ``identify`` on an FMU: the options parsed and checked here, the experiments made by
:mod:`fmi_adjoint.fmu.loading` (the step and end-time rules, the FMU's fixed grid).

"""

from __future__ import annotations

import math
from pathlib import Path

from ..data import read_csv
from ..errors import ModelError
from ..fmu.archive import FmuArchive, FmuError
from ..fmu.experiment import DEFAULT_ATOL, DEFAULT_RTOL, FmuExperiment, Tolerances
from ..fmu.loading import fmu_experiment, fmu_target
from ..fmu.problem import FmuProblem
from ..fmu.variables import numeric_names
from ..identify.data_costs import CostOptions, DataFile
from ..integrate.radau import RunBudget
from .loading import experiment_settings

__all__ = ["check_model_exchange_options", "held_inputs_note", "load_fmu_experiments", "run_tolerances"]

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
    """One experiment per ``--data FILE[@NAME=VALUE,...]`` on the FMU
    (:func:`fmi_adjoint.fmu.loading.fmu_experiment`: the step and end-time rules)."""
    target = fmu_target(archive)
    inputs = read_csv(inputs_file) if inputs_file else None
    if inputs is not None and not inputs.columns:
        raise FmuError(f"{inputs_file}: no input column besides 'time'; name the columns as the FMU's inputs "
                       f"({', '.join(archive.names('input')) or 'it has none'}).")
    experiments = []
    for spec in data_specs:
        file, values = experiment_settings(spec, settings, identified)
        data = DataFile.from_path(file, events=True, outputs=target.output_names)
        experiments.append(fmu_experiment(archive, data, values, name=Path(file).stem, inputs=inputs,
                                          inputs_file=inputs_file, t_end=t_end, step=step, cost=cost, target=target))
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
