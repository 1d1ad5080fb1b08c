"""RESULT.json, the record of an identification: written by ``fmi-adjoint identify -o``, read
back by ``apply`` and ``validate``.  This module owns the format, both ways; the command line
composes the record (:func:`result_text`) and :mod:`fmi_adjoint.fmu.result_file` checks a read
record against an FMU.

Read back, the file is untrusted input: only a regular file of at most 16 MiB is read
(:func:`~fmi_adjoint.files.read_regular`), and every problem (nesting too deep, numbers beyond
the float range, values that are no finite numbers) is one :class:`~fmi_adjoint.errors.FmuError`
whose message never echoes more than a short excerpt.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

from ..errors import FmuError
from ..files import atomic_output, read_regular
from ..text import excerpt

__all__ = ["MAX_RESULT_BYTES", "read_result", "read_result_interface", "read_result_parameters", "result_text",
           "write_result"]

#: The largest RESULT.json that is read back.
MAX_RESULT_BYTES = 16 * 1024 * 1024


def result_text(payload: Mapping) -> str:
    """The text of a RESULT.json record (indented JSON; what ``identify`` prints on stdout)."""
    return json.dumps(payload, indent=2)


def write_result(path, text: str) -> None:
    """Write the record ``text`` (:func:`result_text`) to ``path`` whole or not at all
    (:func:`~fmi_adjoint.files.atomic_output`)."""
    with atomic_output(path) as handle:
        handle.write(text + "\n")


def read_result(path: Path) -> object:
    """The parsed RESULT.json at ``path``: a regular file of at most 16 MiB, else one
    :class:`FmuError` (never more than a short excerpt of the file in the message)."""
    raw = read_regular(path, MAX_RESULT_BYTES, "the RESULT.json written by `fmi-adjoint identify -o`", FmuError)
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
    payload = read_result(path)
    interface = payload.get("interface") if isinstance(payload, dict) else None
    if interface is not None and interface not in ("ModelExchange", "CoSimulation"):
        raise FmuError(f"{path}: 'interface' is {excerpt(interface, 60)}, not \"ModelExchange\" or \"CoSimulation\"; "
                       "give the RESULT.json written by `fmi-adjoint identify -o` (or remove the field to use the "
                       "FMU's default interface).")
    return interface


def read_result_parameters(path) -> dict[str, float]:
    """The parameter values of a RESULT.json written by ``fmi-adjoint identify``: the
    ``settings`` the identification was made with (``--set``), updated by the identified
    ``parameters``, so that the handed-back model is the identified one.

    Only a regular file of at most 16 MiB is read; nesting too deep for the JSON parser,
    numbers too large for a float and non-numeric values are one :class:`FmuError` each,
    whose message never echoes more than a short excerpt of the file.
    """
    path = Path(path)
    payload = read_result(path)
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
