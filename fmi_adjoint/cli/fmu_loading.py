"""Resolving ``--fmu``, ``--data``, ``--inputs`` of ``gradient`` and ``identify`` on an FMU."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..data import read_csv
from ..errors import ModelError
from ..fmu.archive import FmuArchive, FmuError
from ..fmu.experiment import FmuExperiment
from ..identify.data_costs import CostOptions, DataFile, Target, build_cost
from .loading import experiment_settings

__all__ = ["load_fmu_experiments", "fmu_target"]


def fmu_target(archive: FmuArchive) -> Target:
    """The FMU's outputs and default end time (``DefaultExperiment``, else 1 s)."""
    experiment = archive.description.defaultExperiment
    stop = experiment.stopTime if experiment is not None and experiment.stopTime is not None else 1.0
    return Target(archive.path.name, tuple(archive.names("output")), float(stop))


def _default_step(archive: FmuArchive, times: np.ndarray | None, t_end: float) -> float:
    if times is not None and times.size > 1:
        return float(np.min(np.diff(times)))
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

    The step is ``--step``, else the smallest sample interval of a time series, else the
    FMU's default step size, else ``t_end / 1000``.
    """
    target = fmu_target(archive)
    inputs = read_csv(inputs_file) if inputs_file else None
    if inputs is not None and not inputs.columns:
        raise FmuError(f"{inputs_file}: no input column besides 'time'; name the columns as the FMU's inputs "
                       f"({', '.join(archive.names('input')) or 'it has none'}).")
    experiments = []
    for spec in data_specs:
        file, values = experiment_settings(spec, settings, identified)
        end_guess = t_end if t_end is not None else target.t_end
        data = DataFile.from_path(file)
        if step is not None:
            h = step
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
        experiments.append(FmuExperiment(experiment_cost, t_end=end, step=h, inputs=inputs, values=values,
                                         name=Path(file).stem))
    return experiments

