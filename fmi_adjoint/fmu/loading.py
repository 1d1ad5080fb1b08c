"""FMU experiments from measurement files: the FMU's target, its fixed grid, and the rules
that choose the step and the end time of each experiment (issue 29: the library's rules,
the command line only parses options into them).

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
from collections.abc import Mapping

import numpy as np

from ..data import Measurement
from ..errors import FmuError, ModelError
from ..identify.data_costs import CostOptions, DataFile, Target, build_cost
from ..identify.spec import check_time_span
from .archive import FmuArchive
from .experiment import FmuExperiment
from .variables import declared_variable, numeric_names

__all__ = ["default_step", "fmu_experiment", "fmu_fixed_step", "fmu_target", "grid_end"]


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


def default_step(archive: FmuArchive | None, times: np.ndarray | None, t_end: float) -> float:
    """The step of an FMU experiment without ``--step`` nor a fixed FMU step: the smallest
    positive interval of the data ``times``, else the FMU's default step size, else
    ``t_end / 1000`` (``archive`` None: a system of FMUs integrated as one, which has no default
    step size of its own)."""
    intervals = np.diff(times) if times is not None and times.size > 1 else np.zeros(0)
    if np.any(intervals > 0):  # a time repeated at an event is no interval
        return float(np.min(intervals[intervals > 0]))
    experiment = archive.description.defaultExperiment if archive is not None else None
    if experiment is not None and experiment.stepSize:
        return float(experiment.stepSize)
    return t_end / 1000.0


def fmu_experiment(archive: FmuArchive, data: DataFile, values: Mapping[str, float], *, name: str,
                   inputs: Measurement | None, inputs_file: str | None, t_end: float | None, step: float | None,
                   cost: CostOptions, target: Target | None = None) -> FmuExperiment:
    """One experiment on the FMU from the measurement ``data`` and the settings ``values``.

    The step is ``step`` (``--step``), else the internal step of a fixed-step Co-Simulation FMU
    (:func:`fmu_fixed_step`), else the smallest sample interval of a time series, else the
    FMU's default step size, else ``t_end / 1000`` (:func:`default_step`).  On a fixed-step FMU
    the end time is :func:`grid_end` (see the module docstring).  ``inputs`` (read from
    ``inputs_file``, named in messages) must cover the simulated span.
    """
    target = target or fmu_target(archive)
    fixed = fmu_fixed_step(archive)
    end_guess = t_end if t_end is not None else target.t_end
    if step is not None:
        h = step
    elif fixed is not None:
        h = fixed
    elif "time" in data.header():
        h = default_step(archive, data.read().times, end_guess)
    else:
        h = default_step(archive, None, end_guess)
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
    return FmuExperiment(experiment_cost, t_end=end, step=h, inputs=inputs, values=dict(values), name=name)
