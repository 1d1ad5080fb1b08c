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
from ..fmu.experiment import FmuExperiment
from ..fmu.variables import numeric_names
from ..identify.data_costs import CostOptions, DataFile, Target, build_cost
from .loading import experiment_settings

__all__ = ["load_fmu_experiments", "fmu_fixed_step", "fmu_target", "grid_end", "held_inputs_note"]


def fmu_target(archive: FmuArchive) -> Target:
    """The FMU's outputs and default end time (``DefaultExperiment``, else 1 s)."""
    experiment = archive.description.defaultExperiment
    stop = experiment.stopTime if experiment is not None and experiment.stopTime is not None else 1.0
    return Target(archive.path.name, tuple(numeric_names(archive, "output")), float(stop))


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
