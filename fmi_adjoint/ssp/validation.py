"""The validation of a system of FMUs against measured data (issue 28, part 4: ``validate --ssp``).

API
---
::

    from fmi_adjoint.ssp.validation import resimulate_system
    from fmi_adjoint.fmu.validation import write_validation

    with open_system("bench.ssp") as system:
        validation, notes = resimulate_system(system.structure, system.archives, data,
                                              MasterSettings(step=1e-3), values={"A.c1": 900.0})
    write_validation(validation, "report/")       # report.json and report.png, as `validate` writes

``data`` is a :class:`~fmi_adjoint.data.Measurement` whose columns are named like the columns of
``simulate --ssp``: ``COMPONENT.CONNECTOR`` of a component's output connector, or a system output
connector by its own name (:func:`system_outputs`).  The result is the
:class:`~fmi_adjoint.fmu.validation.Validation` an FMU's validation makes, so that
``report.json``, ``report.png`` and the HTML report are written by the same code
(:func:`~fmi_adjoint.fmu.validation.write_validation`,
:func:`~fmi_adjoint.report.validation.validation_report`).

Method
------
* The data's time is converted to seconds (its unit, :func:`~fmi_adjoint.bench.units.time_factor`)
  and each column to its output's unit (the connector's unit in the SSD, else the FMU variable's;
  :func:`~fmi_adjoint.bench.units.convert_unit`: a unit of another dimension is refused, one pint
  does not know is a note).  The same for the input table (``inputs``: a column per system input
  connector), which must span the data.
* The system is co-simulated by :func:`~fmi_adjoint.ssp.master.simulate_system` from its start
  time (``DefaultExperiment``, else 0) to the last sample, and its outputs are read at the
  sample times between the communication points by linear interpolation
  (:func:`~fmi_adjoint.fmu.validation.sample_recorded`); or, a system of Model Exchange
  components, integrated as one ODE by :func:`~fmi_adjoint.ssp.monolithic.simulate_monolithic`,
  whose steps hit every sample time.  The data's times must increase strictly (the reader
  refuses a repeated time).
* Per column: the RMS and maximum error and the RMS relative to the measurement's
  (:func:`~fmi_adjoint.fmu.validation.error_statistics`).  ``report.json`` holds them with the
  system, the data, the samples, the master's settings and the unit conversions made.

Every refusal is one :class:`~fmi_adjoint.errors.FmiAdjointError` (an unknown column, all of
them named with the system's outputs; incompatible units; data before the start time; inputs
that do not span the data), raised before any FMU runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TextIO

import numpy as np

from ..bench.units import DRIVING, ChannelRole, convert_unit, time_factor
from ..data import Measurement
from ..errors import FmuError
from ..fmu.archive import FmuArchive
from ..fmu.experiment import Tolerances
from ..fmu.session import DEFAULT_TIMEOUT
from ..fmu.validation import Validation, check_output_columns, error_statistics, sample_recorded
from ..text import excerpt
from .coupling import InputTable, check_input_span, held_inputs_note
from .master import MasterSettings, simulate_system
from .monolithic import simulate_monolithic
from .structure import Endpoint, SystemStructure

__all__ = ["resimulate_system", "system_inputs", "system_outputs"]

#: A data column compared with the system output of its name (no --map here: the name is the mapping).
_COMPARED = ChannelRole("output", "compared with", "rename the column after the output it measures, or correct the "
                        "unit")


def system_outputs(structure: SystemStructure, archives: Mapping[str, FmuArchive]) -> dict[str, str]:
    """The columns ``simulate --ssp`` writes, each with its unit ("" if none is known):
    ``COMPONENT.CONNECTOR`` of every component output connector (the connector's SSD unit, else
    the FMU variable's) and every system output connector driven by a component (its own unit,
    else, through a connection without a transformation, the unit of the output driving it)."""
    units: dict[str, str] = {}
    for component in structure.components:
        variables = archives[component.name].variables if component.name in archives else {}
        for connector in component.connectors:
            if connector.kind == "output":
                variable = variables.get(connector.name)
                units[f"{component.name}.{connector.name}"] = connector.unit or (variable.unit if variable else "")
    for connector in structure.connectors:
        connection = structure.driving(Endpoint(None, connector.name)) if connector.kind == "output" else None
        if connection is None or connection.start.element is None:
            continue
        transformation = connection.transformation
        identity = transformation.factor == 1.0 and transformation.offset == 0.0
        source = units.get(f"{connection.start.element}.{connection.start.connector}", "")
        units[connector.name] = connector.unit or (source if identity else "")
    return units


def system_inputs(structure: SystemStructure) -> dict[str, str]:
    """The system's input connectors (the columns of an input table), each with its unit."""
    return {c.name: c.unit for c in structure.connectors if c.kind == "input"}


def resimulate_system(structure: SystemStructure, archives: Mapping[str, FmuArchive], data: Measurement,
                      settings: MasterSettings | Tolerances, *, values: Mapping[str, float] | None = None,
                      inputs: Measurement | None = None, timeout: float = DEFAULT_TIMEOUT,
                      log: TextIO | None = None) -> tuple[Validation, list[str]]:
    """Check ``data`` (and ``inputs``) against the system, run it and compare (module docstring):
    co-simulated by the master with :class:`~.master.MasterSettings`, integrated as one Model
    Exchange ODE with :class:`~fmi_adjoint.fmu.experiment.Tolerances`; writes nothing.  Returns the
    validation and the notes (units that could not be checked), one sentence each."""
    outputs = system_outputs(structure, archives)
    check_output_columns(data, outputs, structure.source, "the system's outputs (COMPONENT.CONNECTOR)")
    notes: list[str] = []
    measured, conversions = _in_model_units(data, outputs, structure, notes, _COMPARED)
    t0 = float(structure.start_time or 0.0)
    times = measured.times
    if times[0] < t0 - 1e-12 * max(1.0, abs(t0)):
        given = "DefaultExperiment startTime" if structure.start_time is not None else "none given: 0"
        raise FmuError(f"{data.source}: the data start at t = {times[0]:g} s, before the start time {t0:g} s of "
                       f"{structure.source} ({given}); drop the earlier rows or shift the time.")
    table = None
    held = held_inputs_note(structure) if inputs is None else None
    if held is not None:
        notes.append(held)
    if inputs is not None:
        known = system_inputs(structure)
        unknown = [name for name in inputs.columns if name not in known]
        if unknown:
            raise FmuError(f"{inputs.source}: column{'s' if len(unknown) > 1 else ''} "
                           f"{', '.join(excerpt(n, 80) for n in unknown[:10])} match{'' if len(unknown) > 1 else 'es'} "
                           f"no input of {structure.source}. Inputs: {', '.join(known) or 'none'}.")
        driving, _ = _in_model_units(inputs, known, structure, notes, DRIVING)
        check_input_span(driving.times, t0, float(times[-1]), inputs.source)
        table = InputTable(driving.times, driving.columns, driving.values)
    if isinstance(settings, Tolerances):  # one ODE, integrated to every sample time
        result = simulate_monolithic(structure, archives, float(times[-1]), tolerances=settings, t_start=t0,
                                     times=times, values=values, inputs=table, timeout=timeout, log=log).result
        columns = [result.columns.index(name) for name in measured.columns]
        simulated = result.values[:, columns]
        how: dict = {"integrator": {"scheme": "Radau IIA (order 5), adaptive", **settings.to_json()}}
        method = f"the Model Exchange system as one ODE (Radau IIA, rtol {settings.rtol:g}, atol {settings.atol:g})"
        legend = "simulated"
    else:
        result = simulate_system(structure, archives, float(times[-1]), settings, t_start=t0, values=values,
                                 inputs=table, timeout=timeout, log=log)
        columns = [result.columns.index(name) for name in measured.columns]
        simulated = sample_recorded(result.times, result.values[:, columns], times)
        how = {"master": {"step": settings.step, "order": settings.order.name,
                          "input_approximation": settings.approximation.name}}
        method = (f"the co-simulation master ({settings.order.name}, {settings.approximation.name}, macro step "
                  f"{settings.step:g} s)")
        legend = "co-simulated"
    if not np.all(np.isfinite(simulated)):
        raise FmuError(f"{structure.source}: the system gives non-finite outputs; check the parameter values "
                       f"({'the tolerances' if isinstance(settings, Tolerances) else 'and the macro step'}).")
    summary = {"system": structure.source, "data": data.source, "samples": int(times.size),
               "outputs": error_statistics(measured, simulated), **how}
    if conversions:
        summary["units"] = conversions
    validation = Validation(data=measured, simulated=simulated,
                            units={name: outputs[name] for name in measured.columns}, summary=summary,
                            kind="system", path=structure.source, method=method, legend=legend)
    return validation, notes


def _in_model_units(data: Measurement, units: Mapping[str, str], structure: SystemStructure, notes: list[str],
                    role: ChannelRole) -> tuple[Measurement, dict[str, dict]]:
    """``data`` with its time in seconds and each column in the unit of the system's connector
    of that name (``units``; ``role``: compared with an output or driving an input, in
    messages); the conversions made (by column, as RESULT.json records them).
    Notes for units that cannot be checked go to ``notes``."""
    factor = time_factor(data.time_unit, data.source)
    values = np.array(data.values, dtype=float)
    conversions: dict[str, dict] = {}
    for k, name in enumerate(data.columns):
        conversion = convert_unit(data.unit(name), units[name], channel=name, output=name, source=data.source,
                                  model=structure.source, role=role)
        if conversion.notice:
            notes.append(conversion.notice)
        if conversion.status in ("converted", "unknown"):
            conversions[name] = conversion.record()
        values[:, k] = conversion.factor * values[:, k] + conversion.offset
    units_out = tuple(units[name] for name in data.columns)
    converted = dataclasses.replace(data, times=np.asarray(data.times, dtype=float) * factor, values=values,
                                    units=units_out, time_unit="s" if data.time_unit else "")
    return converted, conversions
