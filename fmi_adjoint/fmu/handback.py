"""The way back into FMI toolchains: re-parameterized or rebuilt FMUs, SSV parameter sets,
SSP archives, and the validation of an identified FMU by re-simulation through fmpy.

* :func:`hand_back` (``fmi-adjoint apply``): the front door; writes any of the three
  outputs below together or not at all, and says what an importer will see.
* :func:`write_reparameterized_fmu`: a copy of the FMU whose ``modelDescription.xml``
  carries the identified values as ``start`` attributes (of every numeric type; an array
  element ``A[i,j]`` replaces its place in the array's start list); every other entry is copied
  byte for byte.  Importers that set the parameters to their start values (as
  :func:`simulate_with_fmpy` and the common simulation tools do) simulate the identified
  model; the binary's compiled-in defaults are not changed, so importers that do not
  (``fmpy.simulate_fmu`` without ``start_values``) run the old values.  For FMUs exported
  by fmi-adjoint :func:`hand_back` therefore rebuilds the binary instead
  (:mod:`fmi_adjoint.fmu.rebuild`).
* :func:`write_ssv`: an SSP 1.0 System Structure Parameter Values file (``.ssv``) with one
  ``ssv:Real`` per real parameter (``ssv:Integer`` / ``ssv:Boolean`` for the integer,
  enumeration and Boolean ``--set`` values the identification ran with; FMI 3 array
  elements by their name ``A[i,j]``), valid against the schema shipped with fmpy.
  Units are written only where the FMU defines them (``UnitDefinitions``), because an
  SSV unit must be defined in the file with its SI base-unit exponents.  The SSP archive
  that binds it to the FMU: :mod:`fmi_adjoint.fmu.ssp`.
* :func:`validate_fmu_against_data`: re-simulation and a report (per-output RMS and
  maximum error, PNG, JSON); in two steps, :func:`resimulate_against_data` (the
  :class:`FmuValidation`: the signals and the summary, nothing written) and
  :func:`write_validation`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shutil
import tempfile
import zipfile
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np
from lxml import etree

from ..data import Measurement
from ..errors import CompilerError, OutputFileError
from ..files import atomic_output, check_writable, read_regular
from ..text import excerpt
from .archive import FmuArchive, FmuError, _parse_description, _schema_problems
from .session import DEFAULT_TIMEOUT, FmuSession
from .variables import (FLOAT_KINDS, INTEGER_RANGES, NUMERIC_KINDS, declared_variable, kind_label, numeric_names,
                        resolve, resolve_as, whole_number)

if TYPE_CHECKING:
    from .rebuild import RebuiltFmu

__all__ = ["SSV_NAMESPACE", "HandBack", "hand_back", "write_ssv", "write_reparameterized_fmu", "write_fmu_entries",
           "simulate_with_fmpy", "validate_fmu_against_data", "FmuValidation", "resimulate_against_data",
           "write_validation", "read_result_interface", "read_result_parameters", "check_result_fmu",
           "differing_start_values"]

SSV_NAMESPACE = "http://ssp-standard.org/SSP1/SystemStructureParameterValues"
SSC_NAMESPACE = "http://ssp-standard.org/SSP1/SystemStructureCommon"
_BASE_UNITS = ("kg", "m", "s", "A", "K", "mol", "cd", "rad", "factor", "offset")
_MAX_RESULT_BYTES = 16 * 1024 * 1024


def _read_result(path: Path) -> object:
    """The parsed RESULT.json at ``path``: a regular file of at most 16 MiB, else one
    :class:`FmuError` (never more than a short excerpt of the file in the message)."""
    raw = read_regular(path, _MAX_RESULT_BYTES, "the RESULT.json written by `fmi-adjoint identify -o`", FmuError)
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise FmuError(f"{path}: the JSON is nested too deeply; give the RESULT.json written by "
                       "`fmi-adjoint identify -o`.") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise FmuError(f"{path}: not a readable JSON file ({str(exc)[:120]}); give the RESULT.json written by "
                       "`fmi-adjoint identify -o`.") from None


def read_result_interface(path) -> str | None:
    """The FMU interface a RESULT.json's identification ran ("ModelExchange" or
    "CoSimulation"), None if it records none (a model file, or the adjoint path).

    Any other recorded value is an :class:`FmuError` naming it: ignored, it would let
    ``validate`` and the SSP archive (whose ``implementation`` would become "any") run
    another interface than the identification did.
    """
    path = Path(path)
    payload = _read_result(path)
    interface = payload.get("interface") if isinstance(payload, dict) else None
    if interface is not None and interface not in ("ModelExchange", "CoSimulation"):
        raise FmuError(f"{path}: 'interface' is {excerpt(interface, 60)}, not \"ModelExchange\" or \"CoSimulation\"; "
                       "give the RESULT.json written by `fmi-adjoint identify -o` (or remove the field to use the "
                       "FMU's default interface).")
    return interface


def _token_label(archive: FmuArchive) -> str:
    return "guid" if archive.fmi_version == 2 else "instantiationToken"


def check_result_fmu(path, archive: FmuArchive) -> str | None:
    """Whether the RESULT.json at ``path`` was identified on ``archive``'s FMU.

    ``identify`` records the FMU's path (``fmu``) and its ``guid`` / ``instantiationToken``
    (``fmu_token``), which FMI ties to one model structure (FMI 2.0.4 sec. 2.2.1, FMI 3.0
    sec. 2.4.1).  A recorded token unlike the FMU's means that the parameters belong to
    another model: :class:`FmuError`.  A result that records only the path (written before
    the token was recorded) is compared by file name, which may differ legitimately (a
    renamed copy): the returned note says so; None if nothing differs.
    """
    path = Path(path)
    payload = _read_result(path)
    if not isinstance(payload, dict):
        return None
    recorded, token = payload.get("fmu"), payload.get("fmu_token")
    name = Path(recorded).name if isinstance(recorded, str) and recorded else None
    if isinstance(token, str) and token != archive.description.guid:
        label = _token_label(archive)
        where = excerpt(name, 80) if name else "another FMU"
        raise FmuError(f"{path} was identified on {where} ({label} {excerpt(token, 60)}), but {archive.path.name} has "
                       f"the {label} {excerpt(archive.description.guid, 60)}: the parameters belong to another model; "
                       "give --fmu the FMU the identification ran on.")
    if token is None and name is not None and name != archive.path.name:
        return (f"{path} was identified on {excerpt(name, 80)}, not {archive.path.name} (the result records no "
                f"{_token_label(archive)} to tell whether they are the same model); make sure --fmu is the FMU the "
                "identification ran on.")
    return None


def differing_start_values(archive: FmuArchive, values: Mapping[str, float]) -> list[str]:
    """The names of ``values`` (a RESULT.json's parameters) whose start value in the FMU is
    another number: the FMU is not the one ``apply`` wrote from that result.  Names the FMU
    lacks, or that address no numeric start value, are left to :func:`check_result_fmu`."""
    differing = []
    for name, value in values.items():
        try:
            ref, variable = resolve(archive, name), declared_variable(archive, name)
        except FmuError:
            continue
        if ref.element is None:
            start = variable.start
        else:
            start = None if variable.start_values is None else variable.start_values[ref.element]
        # apply writes repr(value), which parses back exactly: any difference is another value.
        if start is not None and not math.isclose(float(start), float(value), rel_tol=1e-12, abs_tol=0.0):
            differing.append(name)
    return differing


def read_result_parameters(path) -> dict[str, float]:
    """The parameter values of a RESULT.json written by ``fmi-adjoint identify``: the
    ``settings`` the identification was made with (``--set``), updated by the identified
    ``parameters``, so that the handed-back model is the identified one.

    Only a regular file of at most 16 MiB is read; nesting too deep for the JSON parser,
    numbers too large for a float and non-numeric values are one :class:`FmuError` each,
    whose message never echoes more than a short excerpt of the file.
    """
    path = Path(path)
    payload = _read_result(path)
    params = payload.get("parameters") if isinstance(payload, dict) else None
    if not isinstance(payload, dict) or not isinstance(params, dict) or not params:
        raise FmuError(f"{path}: no 'parameters' object; give the RESULT.json written by `fmi-adjoint identify -o`.")
    settings = payload.get("settings") or {}
    if not isinstance(settings, dict):
        raise FmuError(f"{path}: 'settings' must be an object of parameter values.")
    out = {}
    for name, value in {**settings, **params}.items():
        number = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                number = float(value)
            except OverflowError:  # an integer beyond the float range
                number = None
        if number is None or not math.isfinite(number):
            raise FmuError(f"{path}: parameter {excerpt(name)} has the value {excerpt(value)}; "
                           "expected a finite number.")
        out[str(name)] = number
    return out


def _check_parameters(archive: FmuArchive, values: Mapping[str, float]) -> None:
    """FmuError unless every name of ``values`` addresses a fixed or tunable numeric parameter
    (a scalar or an element ``A[i,j]``, :func:`~.variables.resolve`) and every value fits its
    kind: what ``identify`` accepts (identified reals, ``--set`` integers and Booleans) is what
    the hand-back carries, so the handed-back model is the identified one."""
    label = archive.path.name
    for name, value in values.items():
        found = resolve_as(archive, name, "parameter")
        if found is None:
            known = numeric_names(archive, "parameter")
            raise FmuError(f"{label}: no parameter named {excerpt(name, 80)}. Parameters: "
                           f"{', '.join(known) or 'none'}.")
        ref, variable = found
        if variable.variability not in ("fixed", "tunable"):
            raise FmuError(f"{label}: parameter {name!r} has variability {variable.variability!r}, neither fixed nor "
                           "tunable; only those can be handed back. Drop it from the RESULT.json.")
        if variable.kind in INTEGER_RANGES or variable.kind == "boolean":
            if whole_number(float(value), variable.kind) is None:
                low, high = (0, 1) if variable.kind == "boolean" else INTEGER_RANGES[variable.kind]
                raise FmuError(f"{label}: {name!r} is {kind_label(variable.kind)} parameter but its value is "
                               f"{value!r}; give a whole number in [{low}, {high}] in the RESULT.json.")
        if ref.element is not None and variable.start_values is None:
            raise FmuError(f"{label}: the array parameter {variable.name!r} declares no start values, so the element "
                           f"{name} cannot be handed back alone; obtain an FMU that declares them.")


def _start_text(kind: str, value: float) -> str:
    """A value as the XML start attribute of its kind: ``repr`` of a float (exact round
    trip), a whole number, ``true``/``false``."""
    if kind in FLOAT_KINDS:
        return repr(float(value))
    if kind == "boolean":
        return "true" if float(value) == 1.0 else "false"
    return str(int(value))


def _start_attributes(archive: FmuArchive, values: Mapping[str, float]) -> dict[str, str]:
    """The new ``start`` attribute per declared variable: a scalar's value, or an array's
    whole start list (row-major, FMI 3) with the handed-back elements replaced."""
    arrays: dict[str, list[float]] = {}
    out: dict[str, str] = {}
    for name, value in values.items():
        ref, variable = resolve(archive, name), declared_variable(archive, name)
        if ref.element is None:
            out[variable.name] = _start_text(variable.kind, value)
            continue
        elements = arrays.setdefault(variable.name, list(variable.start_values or ()))
        elements[ref.element] = float(value)
    for base, elements in arrays.items():
        kind = archive.variables[base].kind
        out[base] = " ".join(_start_text(kind, v) for v in elements)
    return out


def _unit_definitions(archive: FmuArchive) -> dict[str, dict[str, str]]:
    units = {}
    for unit in archive.root.iter("Unit"):
        base = unit.find("BaseUnit")
        if unit.get("name") and base is not None:
            units[unit.get("name")] = {k: v for k, v in base.attrib.items() if k in _BASE_UNITS}
    return units


def write_ssv(archive: FmuArchive, values: Mapping[str, float], path, *, name: str = "identified") -> Path:
    """Write the parameter values as an SSV 1.0 file (validated against fmpy's schema)."""
    _check_parameters(archive, values)
    path = Path(path)
    check_writable(path)
    ssv, ssc = SSV_NAMESPACE, SSC_NAMESPACE
    # The set's name comes from a file name, which may hold bytes XML cannot carry.
    name = name if name and name.isprintable() else "identified"
    root = etree.Element(f"{{{ssv}}}ParameterSet", nsmap={"ssv": ssv, "ssc": ssc}, version="1.0", name=name)
    parameters = etree.SubElement(root, f"{{{ssv}}}Parameters")
    defined = _unit_definitions(archive)
    used = []
    for key, value in values.items():
        parameter = etree.SubElement(parameters, f"{{{ssv}}}Parameter", name=key)
        variable = declared_variable(archive, key)
        if variable.kind not in FLOAT_KINDS:  # SSV 1.0 types its values: Integer (enumerations too), Boolean
            tag = "Boolean" if variable.kind == "boolean" else "Integer"
            etree.SubElement(parameter, f"{{{ssv}}}{tag}", value=_start_text(variable.kind, value))
            continue
        real = etree.SubElement(parameter, f"{{{ssv}}}Real", value=repr(float(value)))
        unit = variable.unit
        if unit and unit in defined:
            real.set("unit", unit)
            if unit not in used:
                used.append(unit)
    if used:
        units = etree.SubElement(root, f"{{{ssv}}}Units")
        for unit in used:
            element = etree.SubElement(units, f"{{{ssc}}}Unit", name=unit)
            etree.SubElement(element, f"{{{ssc}}}BaseUnit", **defined[unit])
    import fmpy

    schema = Path(fmpy.__file__).resolve().parent / "ssp" / "schema" / "SystemStructureParameterValues.xsd"
    validator = etree.XMLSchema(etree.parse(str(schema)))
    if not validator.validate(root):
        raise FmuError(f"internal error: the SSV file does not validate: {validator.error_log}")
    data = etree.tostring(root, pretty_print=True, xml_declaration=True, encoding="UTF-8")
    with atomic_output(path, "wb") as handle:
        handle.write(data)
    return path


def _description_with_start_values(archive: FmuArchive, values: Mapping[str, float], *,
                                   token: str | None = None) -> bytes:
    """``modelDescription.xml`` of ``archive`` with ``values`` as the ``start`` attributes of
    those parameters (and ``token`` as the GUID / instantiation token if given), re-validated
    against the FMI schema; everything else as in the FMU (attribute order, formatting)."""
    root = _parse_description(archive.path, (archive.directory / "modelDescription.xml").read_bytes())
    starts = _start_attributes(archive, values)
    found = set()
    for element in root.iterfind("ModelVariables/*"):
        name = element.get("name")
        if name not in starts:
            continue
        # FMI 2: the start sits on the type child (Real, Integer, Boolean, Enumeration).
        target = next(iter(element), None) if archive.fmi_version == 2 else element
        while target is not None and not isinstance(target.tag, str):  # comments
            target = target.getnext()
        if target is None:
            continue
        target.set("start", starts[name])
        found.add(name)
    missing = sorted(set(starts) - found)
    if missing:
        raise FmuError(f"{archive.path.name}: could not find the start attribute of {missing}.")
    if token is not None:
        root.set("guid" if archive.fmi_version == 2 else "instantiationToken", token)
    problems = _schema_problems(root, archive.fmi_version)
    if problems:
        raise FmuError(f"internal error: the changed model description does not validate: {problems}")
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8")


def write_fmu_entries(archive: FmuArchive, handle: BinaryIO, replacements: Mapping[str, bytes], *,
                      dropped: Collection[str] = (), added: Mapping[str, bytes] | None = None) -> None:
    """Write the entries of ``archive`` as a zip into ``handle``: the entries named in
    ``replacements`` with those bytes, the files named in ``dropped`` left out, every other
    one byte for byte; the same names, order, timestamps, compression and attributes.  The
    new files ``added`` come last (deflated, mode 0644, the model description's timestamp).

    The copy is made from the checked extraction (``archive.entries`` in
    ``archive.directory``), never by reading the ``.fmu`` again: :func:`open_fmu` already
    bounded every entry's size, the entries are streamed file to zip (memory stays one
    buffer, whatever an entry's header claims), and the bytes written are the bytes checked.
    """
    names = {entry.name for entry in archive.entries if not entry.is_dir}
    added = dict(added or {})
    unknown = sorted((set(replacements) | set(dropped)) - names)
    if unknown or set(added) & names:
        raise FmuError(f"internal error: {archive.path.name} has no entries {unknown} to replace or drop, or has "
                       f"{sorted(set(added) & names)} already.")
    stamp = next((e.date_time for e in archive.entries if e.name == "modelDescription.xml"), (1980, 1, 1, 0, 0, 0))
    with zipfile.ZipFile(handle, "w") as target_zip:
        for entry in archive.entries:
            if entry.name in dropped and not entry.is_dir:
                continue
            info = zipfile.ZipInfo(entry.name + "/" if entry.is_dir else entry.name, date_time=entry.date_time)
            info.compress_type = entry.compress_type
            # The attributes mean what they meant in the original only with its system and
            # versions (DOS attributes of a Windows-made entry are no Unix mode).
            info.external_attr = entry.external_attr
            info.create_system, info.create_version = entry.create_system, entry.create_version
            info.extract_version = entry.extract_version
            info.extra, info.comment = entry.extra, entry.comment
            if entry.is_dir or entry.name in replacements:
                target_zip.writestr(info, b"" if entry.is_dir else replacements[entry.name])
                continue
            with open(archive.directory / entry.name, "rb") as source, target_zip.open(info, "w") as sink:
                shutil.copyfileobj(source, sink)
        for name, data in added.items():
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.compress_type, info.external_attr = zipfile.ZIP_DEFLATED, 0o100644 << 16
            target_zip.writestr(info, data)


def check_not_the_input(archive: FmuArchive, output) -> None:
    """FmuError if ``output`` is the FMU being read."""
    if Path(output).resolve() == archive.path.resolve():
        raise FmuError(f"-o {output}: refusing to overwrite the input FMU; give another file name.")


def write_reparameterized_fmu(archive: FmuArchive, values: Mapping[str, float], output) -> Path:
    """Copy the FMU with new ``start`` values of parameters; nothing else changes (see
    :func:`write_fmu_entries`)."""
    _check_parameters(archive, values)
    output = Path(output)
    check_not_the_input(archive, output)
    check_writable(output)
    xml = _description_with_start_values(archive, values)
    with atomic_output(output, "wb") as handle:
        write_fmu_entries(archive, handle, {"modelDescription.xml": xml})
    return output


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
    steps = np.diff(times)
    interval = float(np.min(steps[steps > 0])) if np.any(steps > 0) else None  # a repeated time is an event
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
    return np.column_stack([np.interp(times, result["time"], column) for column in columns])


def _typed(kind: str, value: float) -> float | int | bool:
    """A number as fmpy sets a variable of ``kind``: float, int, or bool."""
    if kind in FLOAT_KINDS:
        return float(value)
    return bool(value) if kind == "boolean" else int(value)


@dataclasses.dataclass(frozen=True, eq=False)
class FmuValidation:
    """An FMU re-simulated against measured data (:func:`resimulate_against_data`).

    Attributes
    ----------
    data : Measurement
        The measurement (its ``columns`` are FMU outputs).
    simulated : numpy.ndarray
        The FMU's outputs at ``data.times``, one column per ``data.columns``.
    units : dict
        The unit of each output ("" where the FMU declares none).
    summary : dict
        What ``report.json`` holds: the FMU, the data, the samples, the interface, and per output
        the RMS and maximum absolute error and the RMS relative to the measurement's RMS.
    """

    data: Measurement
    simulated: np.ndarray
    units: dict[str, str]
    summary: dict


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
                            timeout: float = DEFAULT_TIMEOUT, log=None, interface: str | None = None) -> FmuValidation:
    """Check that ``data``'s columns are outputs (and ``inputs``' inputs) of the FMU,
    re-simulate (:func:`simulate_with_fmpy`) and compare; writes nothing."""
    outputs = list(data.columns)
    # The numeric names `identify` fits (Integer, Boolean, Enumeration, array elements A[i,j]).
    known = numeric_names(archive, "output")
    if not outputs:
        raise FmuError(f"{data.source}: no column besides 'time'; add columns named like the FMU's outputs "
                       f"({', '.join(known)}).")
    for name in outputs:
        if name not in known:
            raise FmuError(f"{data.source}: column {excerpt(name, 80)} matches no output of {archive.path.name}. "
                           f"Outputs: {', '.join(known) or 'none'}.")
    if inputs is not None:
        names = numeric_names(archive, "input")
        for name in inputs.columns:
            if name not in names:
                raise FmuError(f"{inputs.source}: column {excerpt(name, 80)} matches no input of "
                               f"{archive.path.name}. Inputs: {', '.join(names) or 'none'}.")
        if inputs.times[0] > data.times[0] + 1e-12 or inputs.times[-1] < data.times[-1] * (1 - 1e-12):
            raise FmuError(f"{inputs.source}: the inputs span [{inputs.times[0]:g}, {inputs.times[-1]:g}] s but the "
                           f"data need [{data.times[0]:g}, {data.times[-1]:g}] s; extend the input file.")
    simulated = simulate_with_fmpy(archive, data.times, outputs, inputs, timeout=timeout, log=log,
                                   interface=interface)
    if not np.all(np.isfinite(simulated)):
        raise FmuError(f"{archive.path.name}: the re-simulation gives non-finite outputs; check the start values.")
    per_output: dict[str, dict] = {}
    summary = {"fmu": str(archive.path), "data": data.source, "samples": int(data.times.size), "outputs": per_output,
               "interface": interface or ("CoSimulation" if archive.co_simulation else "ModelExchange")}
    for k, name in enumerate(outputs):
        error = simulated[:, k] - data.values[:, k]
        rms = float(np.sqrt(np.mean(error**2)))
        scale = float(np.sqrt(np.mean(data.values[:, k] ** 2)))
        per_output[name] = {"rms_error": rms, "max_abs_error": float(np.max(np.abs(error))),
                            "relative_rms_error": rms / scale if scale > 0 else None}
    # An array element A[i,j] is no variable of its own: no unit.
    units = {name: archive.variables[name].unit if name in archive.variables else "" for name in outputs}
    return FmuValidation(data=data, simulated=simulated, units=units, summary=summary)


def write_validation(validation: FmuValidation, folder) -> None:
    """Write ``report.png`` and ``report.json`` of ``validation`` into ``folder`` (made if
    missing), each atomically."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FmuError(f"cannot create the report folder {str(folder)!r}: {exc.strerror}.") from None
    _plot(folder / "report.png", validation.data, validation.simulated, validation.summary)
    with atomic_output(folder / "report.json") as handle:
        handle.write(json.dumps(validation.summary, indent=2) + "\n")


def _plot(path: Path, data: Measurement, simulated: np.ndarray, summary: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    n = len(data.columns)
    fig, axes = plt.subplots(n, 1, figsize=(9, 2.8 * n + 0.6), squeeze=False, constrained_layout=True)
    for k, name in enumerate(data.columns):
        ax = axes[k, 0]
        stats = summary["outputs"][name]
        ax.plot(data.times, data.values[:, k], color="0.45", lw=1.2, label="measured")
        ax.plot(data.times, simulated[:, k], color="tab:blue", lw=1.0, ls="--", label="re-simulated (fmpy)")
        ax.set_title(f"{name}: RMS error {stats['rms_error']:.3g}, max {stats['max_abs_error']:.3g}")
        ax.set_xlabel("time [s]")
        ax.legend(loc="best", fontsize=8)
        ax.grid(True, alpha=0.3)
    with atomic_output(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=110)
    plt.close(fig)


@dataclasses.dataclass(frozen=True)
class HandBack:
    """What :func:`hand_back` wrote, and what the user must know about it.

    Attributes
    ----------
    fmu, ssv, ssp : pathlib.Path or None
        The files written.
    rebuilt : RebuiltFmu or None
        The rebuild (:func:`~fmi_adjoint.fmu.rebuild.rebuild_fmu`) if the handed-back FMU
        carries the values compiled in; None if it carries them as start values only.
    notes, warnings : tuple of str
        One line each (without the ``fmi-adjoint: note:`` prefix).
    """

    fmu: Path | None
    ssv: Path | None
    ssp: Path | None
    rebuilt: RebuiltFmu | None
    notes: tuple[str, ...]
    warnings: tuple[str, ...]


@contextlib.contextmanager
def _staged(targets: Mapping[str, Path | None]) -> Iterator[dict[str, Path]]:
    """A temporary file next to each target (None: skipped); all are moved onto their targets
    (``os.replace``) only when the block succeeds, else removed: no half-written output."""
    given = {key: target for key, target in targets.items() if target is not None}
    staged: dict[str, Path] = {}
    try:
        for key, target in given.items():
            folder = target.parent if str(target.parent) else Path(".")
            try:
                fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=folder)
            except OSError as exc:
                raise OutputFileError(f"cannot write {str(target)!r}: {exc.strerror or exc}; choose a writable "
                                      "folder.") from None
            os.close(fd)
            staged[key] = Path(name)
        yield staged
        for key, path in staged.items():
            check_writable(given[key])  # still absent or a regular file
            os.replace(path, given[key])
    finally:
        for path in staged.values():
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)


def hand_back(archive: FmuArchive, values: Mapping[str, float], *, fmu=None, ssv=None, ssp=None,
              name: str = "identified", interface: str | None = None) -> HandBack:
    """Hand identified parameter values back (``fmi-adjoint apply``): an FMU, an SSV file
    and/or an SSP archive, written together or not at all.

    The FMU (``fmu``; also the one embedded in ``ssp``) is

    * for an FMU exported by fmi-adjoint whose binary provably is its embedded model and
      that ships its sources: rebuilt with the values compiled in
      (:func:`~fmi_adjoint.fmu.rebuild.rebuild_fmu`), so that importers that never apply
      start values run the identified model too; binaries for other platforms cannot be
      rebuilt here, are kept, and a warning says so;
    * otherwise: a copy with the values as start values (:func:`write_reparameterized_fmu`),
      with a note that importers ignoring start values keep the old values, and the SSP
      archive (``ssp``, whose parameter binding SSP masters apply) as the remedy.

    Each output is written to a temporary file in its target folder and moved into place
    only when every requested output succeeded.

    Raises
    ------
    FmuError
        No output requested, an output naming the FMU itself, a value that is no fixed or
        tunable numeric parameter of the FMU (or no whole number for an integer one), or an
        SSP ``implementation`` (the RESULT.json's interface) the FMU does not have.
    CompilerError
        An FMU exported by fmi-adjoint that cannot be rebuilt (or checked) without a C
        compiler, or regenerated code that does not compile.
    OutputFileError
        An output cannot be written.
    """
    from ..toolchain import c_compiler
    from .rebuild import rebuild_fmu, rebuild_obstacle
    from .ssp import check_implementation, write_ssp

    targets = {key: None if path is None else Path(path) for key, path in (("fmu", fmu), ("ssv", ssv), ("ssp", ssp))}
    if not any(targets.values()):
        raise FmuError("apply: give -o IDENTIFIED.fmu, --ssv OUT.ssv and/or --ssp OUT.ssp.")
    _check_parameters(archive, values)
    if ssp is not None:
        check_implementation(archive, interface)  # before anything is rebuilt or written
    for path in targets.values():
        if path is not None:
            check_not_the_input(archive, path)
            check_writable(path)
    label = archive.path.name
    notes: list[str] = []
    warnings: list[str] = []
    rebuilt = None
    with _staged(targets) as staged, tempfile.TemporaryDirectory(prefix="fmi_adjoint_apply_") as tmp:
        if fmu is not None or ssp is not None:
            handed = staged.get("fmu") or Path(tmp) / "handed_back.fmu"
            obstacle = rebuild_obstacle(archive)
            if obstacle is None:
                rebuilt = dataclasses.replace(rebuild_fmu(archive, values, handed), path=targets["fmu"] or handed)
                if rebuilt.dropped:
                    notes.append(f"{label}: {', '.join(rebuilt.dropped)} left out of the rebuilt FMU: its sources/ "
                                 "hold only what fmi-adjoint generates for the embedded model (the FMU is trusted "
                                 "again, and an importer may compile sources/).")
                if rebuilt.stale_binaries:
                    warnings.append(f"{label}: {', '.join(rebuilt.stale_binaries)} cannot be rebuilt on this platform "
                                    "and still carry the old parameter values; for importers using them the start "
                                    "values in modelDescription.xml are the only hand-back.")
            else:
                if archive.native_distrust is not None and c_compiler() is None:
                    raise CompilerError(f"{label} was exported by fmi-adjoint and is rebuilt with the identified "
                                        "values compiled in, which needs a C compiler: none found (tried $CC, cc, "
                                        "gcc, clang); install gcc or set CC.")
                write_reparameterized_fmu(archive, values, handed)
                remedy = "the parameter binding of the SSP archive carries them to SSP importers" if ssp else \
                    "hand back with --ssp OUT.ssp as well (an SSP parameter binding)"
                notes.append(f"{label} cannot be rebuilt with the identified values compiled in: {obstacle}. They "
                             "are handed back as start values only; importers that ignore start values (e.g. "
                             f"fmpy.simulate_fmu without start_values) still run the old values: {remedy}.")
        if ssv is not None:
            write_ssv(archive, values, staged["ssv"], name=name)
        if ssp is not None:
            write_ssp(archive, values, handed, staged["ssp"], fmu_name=(targets["fmu"] or archive.path).name,
                      name=name, interface=interface)
            if not archive.co_simulation:
                notes.append(f"{label} has no Co-Simulation interface: the SSP archive is complete, but fmpy's SSP "
                             "simulation (fmpy.ssp.simulation.simulate_ssp) needs Co-Simulation FMUs.")
            elif archive.fmi_version == 3:
                notes.append(f"{label} is an FMI 3 FMU: the SSP archive is complete, but fmpy's SSP simulation "
                             "(fmpy.ssp.simulation.simulate_ssp, fmpy 0.3) runs FMI 1 and 2 FMUs only.")
    return HandBack(fmu=targets["fmu"], ssv=targets["ssv"], ssp=targets["ssp"], rebuilt=rebuilt,
                    notes=tuple(notes), warnings=tuple(warnings))
