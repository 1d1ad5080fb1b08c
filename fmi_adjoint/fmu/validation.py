"""The validation of an identified FMU by re-simulation through fmpy.

:func:`simulate_with_fmpy` re-simulates through fmpy's own drivers (CVode for Model Exchange)
with the FMU's start values applied (a Co-Simulation FMU that takes inputs varying within a step
is re-simulated by our own worker, as ``identify`` runs it: fmpy's driver would hold them), and
:func:`validate_fmu_against_data` compares that with measured data and writes a report
(per-output RMS and maximum error, PNG, JSON); in two steps,
:func:`resimulate_against_data` (the :class:`Validation`: the signals and the summary, nothing
written) and :func:`write_validation`.

What is not FMU-specific serves every validation (``validate --ssp`` of a system of FMUs,
:mod:`fmi_adjoint.ssp.validation`, too): :class:`Validation` (the signals, the summary, and what
was re-simulated how, in words), :func:`check_output_columns` (the data's columns against the
outputs), :func:`error_statistics` (per output the RMS and maximum error) and
:func:`write_validation`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..costs import LeastSquaresCost
from ..data import Measurement
from ..errors import FmuError
from ..files import atomic_output, check_writable
from ..text import excerpt
from .archive import FmuArchive
from .choice import choose_interface
from .guards import HELD_INPUT_FRACTION, held_input_check
from .experiment import FmuExperiment, Tolerances, after_input_change, event_rows, held_changes
from .loading import default_step, fmu_fixed_step
from .me_run import between_matched_events, match_event_rows
from .session import DEFAULT_TIMEOUT, FmuSession
from .simulation import FmuSimulator, interpolates
from .variables import FLOAT_KINDS, NUMERIC_KINDS, declared_variable, held_inputs, numeric_names, resolve

__all__ = ["FmuValidation", "Validation", "check_output_columns", "error_statistics", "resimulate_against_data",
           "sample_recorded", "simulate_with_fmpy", "validate_fmu_against_data", "write_validation"]


def simulate_with_fmpy(archive: FmuArchive, times: np.ndarray, outputs, inputs: Measurement | None = None,
                       start_values: Mapping[str, float] | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                       log=None, interface: str | None = None) -> np.ndarray:
    """Re-simulate through fmpy's own drivers (CVode for Model Exchange) with the FMU's start
    values applied; outputs at ``times`` (linear interpolation of the recorded result).

    fmpy runs in a worker process (:class:`~fmi_adjoint.fmu.session.FmuSession`), like every
    FMU binary: ``timeout`` bounds one step [s] (``--fmu-timeout``), ``log`` receives the
    binary's output (``--verbose``).  ``interface`` ("ModelExchange" or "CoSimulation"; the one
    the identification used, from RESULT.json) defaults to Co-Simulation where the FMU has it.
    """
    if interface is None:
        interface = "CoSimulation" if archive.co_simulation else "ModelExchange"
    if not (archive.model_exchange if interface == "ModelExchange" else archive.co_simulation):
        raise FmuError(f"{archive.path.name}: the FMU has no {interface} interface with a binary for this platform; "
                       "choose the other one (--interface).")
    # The start values of the model description are applied explicitly, as an importer
    # should (the FMU's compiled-in defaults may differ after a re-parameterization).
    values: dict[str, Any] = {}
    for v in archive.variables.values():
        if v.causality == "parameter" and v.variability in ("fixed", "tunable") and v.kind in NUMERIC_KINDS:
            if v.shape and v.start_values is not None:
                values[v.name] = [_typed(v.kind, x) for x in v.start_values]
            elif not v.shape and v.start is not None:
                values[v.name] = _typed(v.kind, v.start)
    for name, value in (start_values or {}).items():
        variable, element = declared_variable(archive, name), resolve(archive, name).element
        if element is None:
            values[name] = _typed(variable.kind, value)
        elif element < len(values.get(variable.name) or []):  # an element A[i,j]: fmpy sets whole arrays
            values[variable.name] = [*values[variable.name]]
            values[variable.name][element] = _typed(variable.kind, value)
    interval = _output_interval(np.asarray(times, dtype=float))
    signal = None
    if inputs is not None:
        dtype = [("time", np.float64)] + [(c, np.float64) for c in inputs.columns]
        signal = np.array([tuple(row) for row in np.column_stack([inputs.times, inputs.values])], dtype=dtype)
    bases = [declared_variable(archive, name).name for name in outputs]
    elements = [resolve(archive, name).element for name in outputs]
    session = FmuSession(archive, None, timeout=timeout, log=log)
    try:
        result = session.simulate_fmu(start_time=0.0, stop_time=float(times[-1]), fmi_type=interface,
                                      output_interval=interval, relative_tolerance=1e-10, start_values=values,
                                      input=signal, output=list(dict.fromkeys(bases)))
    finally:
        session.close()
    # fmpy records an FMI 3 array as one column of shape (time, *dimensions): the element
    # A[i,j] is its row-major position.
    columns = [result[base] if element is None else result[base].reshape(len(result["time"]), -1)[:, element]
               for base, element in zip(bases, elements)]
    changes = (held_changes(inputs, held_inputs(archive, inputs.columns)) if inputs is not None else np.zeros(0))
    return sample_recorded(np.asarray(result["time"], dtype=float), np.column_stack(columns), times, changes)


def sample_recorded(recorded_times: np.ndarray, recorded: np.ndarray, times: np.ndarray,
                    changes: np.ndarray | None = None) -> np.ndarray:
    """The recorded result of a run (``recorded`` at ``recorded_times``, which repeat a time at
    each event: the row before and the row after it) at the data's sample ``times``, compared
    as the identification compares (:func:`.me_run.match_event_rows`):

    * a data time given twice (an event in the data: left and right limit) takes the values
      just before and just after the run's own event nearest to it between the neighbouring
      sample times (several events at one instant: before the first, after the last);
    * a time between such a data event and the run's event matched to it takes the run's value
      on the data's side of that event (:func:`.me_run.between_matched_events`);
    * any other time takes the run's left limit there, interpolated linearly between the
      recorded rows, except at a change of a held (discrete) input (``changes``), where it
      takes the right limit, the value under the new input (:func:`.experiment.after_input_change`).
    """
    stops, right = event_rows(times)
    right = right | after_input_change(times, np.zeros(0) if changes is None else changes)
    rt = np.asarray(recorded_times, dtype=float)
    Y = np.asarray(recorded, dtype=float).reshape(rt.size, -1)

    last = rt.size - 1

    def between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        span = rt[b] - rt[a]
        weight = np.clip((stops - rt[a]) / np.where(span > 0, span, 1.0), 0.0, 1.0) * (span > 0)
        return Y[a] + weight[:, None] * (Y[b] - Y[a])

    first = np.clip(np.searchsorted(rt, stops, side="left"), 0, last)  # at a repeated time: the row before
    final = np.clip(np.searchsorted(rt, stops, side="right") - 1, 0, last)  # ... and the row after
    left_values = np.where((rt[first] == stops)[:, None], Y[first], between(np.maximum(first - 1, 0), first))
    right_values = np.where((rt[final] == stops)[:, None], Y[final], between(final, np.minimum(final + 1, last)))
    repeated = np.flatnonzero(np.diff(rt) == 0)
    starts = repeated[np.r_[True, np.diff(repeated) > 1]] if repeated.size else repeated
    ends = repeated[np.r_[np.diff(repeated) > 1, True]] + 1 if repeated.size else repeated
    matched = match_event_rows(rt[starts], stops, np.asarray(times, dtype=float)[event_rows(times)[1]])
    for i, e in matched.items():
        left_values[i], right_values[i] = Y[starts[e]], Y[ends[e]]
    for j, i, side in between_matched_events(rt[starts], stops, matched):
        left_values[j] = right_values[j] = (left_values if side == "left" else right_values)[i]
    where = np.searchsorted(stops, np.asarray(times, dtype=float))
    return np.where(right[:, None], right_values[where], left_values[where])


def _typed(kind: str, value: float) -> float | int | bool:
    """A number as fmpy sets a variable of ``kind``: float, int, or bool."""
    if kind in FLOAT_KINDS:
        return float(value)
    return bool(value) if kind == "boolean" else int(value)


@dataclasses.dataclass(frozen=True, eq=False)
class Validation:
    """A model (an FMU, or a system of FMUs) re-simulated against measured data
    (:func:`resimulate_against_data`, :func:`fmi_adjoint.ssp.validation.resimulate_system`).

    Attributes
    ----------
    data : Measurement
        The measurement (its ``columns`` are outputs of the model).
    simulated : numpy.ndarray
        The model's outputs at ``data.times``, one column per ``data.columns``.
    units : dict
        The unit of each output ("" where the model declares none).
    summary : dict
        What ``report.json`` holds: the model, the data, the samples, how it was re-simulated,
        and per output the RMS and maximum absolute error and the RMS relative to the
        measurement's RMS (:func:`error_statistics`).
    kind, path : str
        What was validated, for reports: ``FMU`` or ``system``, and its file.
    method : str
        How it was re-simulated, completing "re-simulated through ...": e.g. ``fmpy
        (CoSimulation interface)``.
    legend : str
        The re-simulated signal's name in plots.
    notes : tuple of str
        What the user should know about the re-simulation (one line each; the command line
        prints them and the HTML report shows them).
    """

    data: Measurement
    simulated: np.ndarray
    units: dict[str, str]
    summary: dict
    kind: str = "FMU"
    path: str = ""
    method: str = ""
    legend: str = "re-simulated"
    notes: tuple[str, ...] = ()


#: The former name of :class:`Validation` (an FMU's validation).
FmuValidation = Validation


def validate_fmu_against_data(archive: FmuArchive, data: Measurement, folder, inputs: Measurement | None = None,
                              *, timeout: float = DEFAULT_TIMEOUT, log=None, interface: str | None = None) -> dict:
    """Re-simulate (:func:`simulate_with_fmpy`, with ``timeout`` and ``log``) and write
    ``report.json`` and ``report.png`` into ``folder``.

    Returns the summary: per output, RMS and maximum absolute error and the RMS relative
    to the RMS of the measurement.
    """
    folder = Path(folder)
    check_writable(folder / "report.json" if folder.is_dir() else folder)
    validation = resimulate_against_data(archive, data, inputs, timeout=timeout, log=log, interface=interface)
    write_validation(validation, folder)
    return validation.summary


def resimulate_against_data(archive: FmuArchive, data: Measurement, inputs: Measurement | None = None, *,
                            timeout: float = DEFAULT_TIMEOUT, log=None, interface: str | None = None) -> Validation:
    """Check that ``data``'s columns are outputs (and ``inputs``' inputs) of the FMU,
    re-simulate (:func:`simulate_with_fmpy`) and compare; writes nothing.

    The interface is chosen as ``identify`` chooses it (:func:`.choice.choose_interface`):
    ``interface``, else Co-Simulation where the FMU has it, except for data with an event's two
    rows (a repeated time stamp), which only Model Exchange meets; such rows are compared with
    the re-simulation's own event (:func:`sample_recorded`)."""
    outputs = list(data.columns)
    # The numeric names `identify` fits (Integer, Boolean, Enumeration, array elements A[i,j]).
    check_output_columns(data, numeric_names(archive, "output"), archive.path.name, "the FMU's outputs")
    if inputs is not None:
        names = numeric_names(archive, "input")
        for name in inputs.columns:
            if name not in names:
                raise FmuError(f"{inputs.source}: column {excerpt(name, 80)} matches no input of "
                               f"{archive.path.name}. Inputs: {', '.join(names) or 'none'}.")
        if inputs.times[0] > data.times[0] + 1e-12 or inputs.times[-1] < data.times[-1] * (1 - 1e-12):
            raise FmuError(f"{inputs.source}: the inputs span [{inputs.times[0]:g}, {inputs.times[-1]:g}] s but the "
                           f"data need [{data.times[0]:g}, {data.times[-1]:g}] s; extend the input file.")
    # The interface as identify chooses it for these data: data with an event's two rows need
    # Model Exchange (auto takes it; Co-Simulation is refused, naming the fix).
    repeated = np.asarray(data.times, dtype=float)[event_rows(data.times)[1]]
    interface, _ = choose_interface(archive, {"ModelExchange": "me", "CoSimulation": "cs"}.get(interface or "", "auto"),
                                    "fd", float(repeated[0]) if repeated.size else None)
    varying = _varying_inputs(archive, data, inputs) if interface == "CoSimulation" else []
    notes: tuple[str, ...] = ()
    if varying and interpolates(archive, varying):
        # fmpy's driver would hold them over each step; identify sets them as they vary.
        simulated = _interpolated_co_simulation(archive, data, inputs, timeout=timeout, log=log)
        method, legend = ("fmi-adjoint's FMU worker (CoSimulation interface, the inputs varying within each step as "
                          "identify sets them)"), "re-simulated"
    else:
        simulated = simulate_with_fmpy(archive, data.times, outputs, inputs, timeout=timeout, log=log,
                                       interface=interface)
        method, legend = f"fmpy ({interface} interface)", "re-simulated (fmpy)"
        visible = _visibly_held(archive, data, inputs, varying)
        if visible:
            fix = (" (--interface me)" if archive.model_exchange else "")
            notes = (f"{archive.path.name} cannot take inputs that vary within a Co-Simulation step, so "
                     f"{', '.join(visible)} {'is' if len(visible) == 1 else 'are'} held over each step of the "
                     f"re-simulation, as the FMU requires, and {'it changes' if len(visible) == 1 else 'they change'} "
                     f"by more than {HELD_INPUT_FRACTION:.0%} of {'its' if len(visible) == 1 else 'their'} range "
                     "within a step: the outputs show a staircase error of the step's order here (identify holds "
                     f"them too, and warns); validate through Model Exchange{fix} where the FMU has it, or with "
                     "data sampled more finely.",)
    if not np.all(np.isfinite(simulated)):
        raise FmuError(f"{archive.path.name}: the re-simulation gives non-finite outputs; check the start values.")
    summary = {"fmu": str(archive.path), "data": data.source, "samples": int(data.times.size),
               "outputs": error_statistics(data, simulated), "interface": interface}
    if notes:
        summary["notes"] = list(notes)
    # An array element A[i,j] is no variable of its own: no unit.
    units = {name: archive.variables[name].unit if name in archive.variables else "" for name in outputs}
    return Validation(data=data, simulated=simulated, units=units, summary=summary, path=str(archive.path),
                      method=method, legend=legend, notes=notes)


def _resimulation_step(archive: FmuArchive, data: Measurement) -> float:
    """The communication step of a Co-Simulation re-simulation: the FMU's fixed step, else the
    data's smallest sample interval (``identify``'s default)."""
    times = np.asarray(data.times, dtype=float)
    return fmu_fixed_step(archive) or default_step(archive, times, float(times[-1]))


def _varying_inputs(archive: FmuArchive, data: Measurement, inputs: Measurement | None) -> list[str]:
    """The continuous (not held) inputs that change within a communication step."""
    fractions = _change_within_step(archive, data, inputs, _resimulation_step(archive, data))
    return [name for name, fraction in fractions.items() if fraction > 0.0]


def _visibly_held(archive: FmuArchive, data: Measurement, inputs: Measurement | None, names: list[str]) -> list[str]:
    """Of ``names``, the inputs that change by more than :data:`.guards.HELD_INPUT_FRACTION` of
    their range within one of fmpy's output intervals (the steps it holds them over)."""
    interval = _output_interval(np.asarray(data.times, dtype=float))
    if not names or interval is None:
        return []
    fractions = _change_within_step(archive, data, inputs, interval)
    return [name for name in names if fractions.get(name, 0.0) > HELD_INPUT_FRACTION]


def _change_within_step(archive: FmuArchive, data: Measurement, inputs: Measurement | None,
                        step: float) -> dict[str, float]:
    """Per continuous input, its largest change within a step of ``step`` over the data's span,
    relative to its range (identify's held-input check, :func:`.guards.held_input_check`)."""
    if inputs is None:
        return {}
    experiment = FmuExperiment(_cost(data), t_end=float(np.asarray(data.times, dtype=float)[-1]), step=step,
                               inputs=inputs, held=frozenset(held_inputs(archive, inputs.columns)))
    check = held_input_check([experiment])
    return {} if check is None else dict(check.fractions)


def _cost(data: Measurement) -> LeastSquaresCost:
    """The validation's data as the cost an experiment carries (its channels and sample times)."""
    return LeastSquaresCost(np.asarray(data.times, dtype=float), np.asarray(data.values, dtype=float),
                            tuple(data.columns))


def _interpolated_co_simulation(archive: FmuArchive, data: Measurement, inputs: Measurement | None, *,
                                timeout: float, log) -> np.ndarray:
    """The Co-Simulation run ``identify`` makes of an FMU that takes inputs varying within a step
    (:func:`.simulation.interpolates`: FMI 2 input derivatives, FMI 3 intermediate updates), at the
    step ``identify`` takes by default (the FMU's fixed step, else the data's smallest interval),
    with the FMU's own start values; the outputs at the data's times."""
    times = np.asarray(data.times, dtype=float)
    experiment = FmuExperiment(_cost(data), t_end=float(times[-1]), step=_resimulation_step(archive, data),
                               inputs=inputs)
    session = FmuSession(archive, "CoSimulation", timeout=timeout, log=log)
    try:
        simulator = FmuSimulator(archive, "CoSimulation", Tolerances(), [])
        return np.asarray(simulator.finish(experiment, session.run(simulator.job(session, experiment, {}))).Y)
    finally:
        session.close()


def check_output_columns(data: Measurement, known, model: str, outputs: str) -> None:
    """FmuError unless ``data`` has columns and each is one of the ``known`` output names of
    ``model`` (its name in messages; ``outputs``: how its outputs are called, e.g. "the FMU's
    outputs").  Every unknown column is named, and the outputs listed."""
    known = list(known)
    if not data.columns:
        raise FmuError(f"{data.source}: no column besides 'time'; add columns named like {outputs} "
                       f"({', '.join(known)}).")
    unknown = [name for name in data.columns if name not in known]
    if len(unknown) == 1:
        raise FmuError(f"{data.source}: column {excerpt(unknown[0], 80)} matches no output of {model}. "
                       f"Outputs: {', '.join(known) or 'none'}.")
    if unknown:
        raise FmuError(f"{data.source}: columns {', '.join(excerpt(n, 80) for n in unknown[:10])}"
                       f"{f' and {len(unknown) - 10} more' if len(unknown) > 10 else ''} match no output of {model}. "
                       f"Outputs: {', '.join(known) or 'none'}.")


def error_statistics(data: Measurement, simulated: np.ndarray) -> dict[str, dict]:
    """Per column of ``data``: the RMS and maximum absolute error of ``simulated`` (a column
    each) and the RMS relative to the measurement's RMS (None where that is zero), as
    ``report.json`` holds them."""
    per_output: dict[str, dict] = {}
    for k, name in enumerate(data.columns):
        error = simulated[:, k] - data.values[:, k]
        rms = float(np.sqrt(np.mean(error**2)))
        scale = float(np.sqrt(np.mean(data.values[:, k] ** 2)))
        per_output[name] = {"rms_error": rms, "max_abs_error": float(np.max(np.abs(error))),
                            "relative_rms_error": rms / scale if scale > 0 else None}
    return per_output


def write_validation(validation: Validation, folder) -> None:
    """Write ``report.png`` and ``report.json`` of ``validation`` into ``folder`` (made if
    missing), each atomically."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FmuError(f"cannot create the report folder {str(folder)!r}: {exc.strerror}.") from None
    _plot(folder / "report.png", validation)
    with atomic_output(folder / "report.json") as handle:
        handle.write(json.dumps(validation.summary, indent=2) + "\n")


def _plot(path: Path, validation: Validation) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    data, simulated, summary = validation.data, validation.simulated, validation.summary
    n = len(data.columns)
    fig, axes = plt.subplots(n, 1, figsize=(9, 2.8 * n + 0.6), squeeze=False, constrained_layout=True)
    for k, name in enumerate(data.columns):
        ax = axes[k, 0]
        stats = summary["outputs"][name]
        ax.plot(data.times, data.values[:, k], color="0.45", lw=1.2, label="measured")
        ax.plot(data.times, simulated[:, k], color="tab:blue", lw=1.0, ls="--", label=validation.legend)
        ax.set_title(f"{name}: RMS error {stats['rms_error']:.3g}, max {stats['max_abs_error']:.3g}")
        ax.set_xlabel("time [s]")
        ax.legend(loc="best", fontsize=8)
        ax.grid(True, alpha=0.3)
    with atomic_output(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=110)
    plt.close(fig)


def _output_interval(times: np.ndarray) -> float | None:
    """fmpy's output interval for data at ``times``: the data's typical step (the median) when
    every sample time before the last lies on its grid, so that the recorded rows meet the
    samples; else the smallest step before the last interval.  A short last interval (a run that
    ends off the grid) must not drive the whole re-simulation; a repeated time is an event row."""
    steps = np.diff(times)
    positive = steps[steps > 0]
    if not positive.size:
        return None
    median = float(np.median(positive))
    inner = np.unique(times[:-1])
    offsets = (inner - inner[0]) / median
    if np.all(np.abs(offsets - np.round(offsets)) <= 1e-9 * np.maximum(1.0, np.abs(offsets))):
        return median
    before_last = np.diff(np.unique(times[:-1]))
    return float(before_last.min()) if before_last.size else median
