"""RESULT.json as ``fmi-adjoint apply`` and ``validate`` read it: the identified parameter values,
the interface the identification ran, and whether the result belongs to a given FMU.

The file is untrusted input: only a regular file of at most 16 MiB is read
(:func:`~fmi_adjoint.files.read_regular`), and every problem (nesting too deep, numbers beyond
the float range, values that are no finite numbers, another FMU's token) is one
:class:`~fmi_adjoint.errors.FmuError` whose message never echoes more than a short excerpt.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

from ..errors import FmuError
from ..files import read_regular
from ..text import excerpt
from .archive import FmuArchive
from .variables import declared_variable, resolve

__all__ = ["check_result_fmu", "differing_start_values", "read_result_interface", "read_result_parameters"]

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
