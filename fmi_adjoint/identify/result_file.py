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

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..costs.least_squares import LeastSquaresCost
from ..costs.sensors import SensorCost
from ..errors import FmuError
from ..files import atomic_output, read_regular
from ..text import excerpt
from .problem import AbstractIdentificationProblem

__all__ = ["MAX_RESULT_BYTES", "RunContext", "channel_weights", "identification_record", "read_result",
           "read_result_interface", "read_result_parameters", "result_text", "write_result"]

#: The largest RESULT.json that is read back.
MAX_RESULT_BYTES = 16 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class RunContext:
    """What the caller of an identification knows and its record states, beside the outcome.

    Attributes
    ----------
    strategy : str
        The strategy asked for (``auto``, ``experiments``, ...); the record adds the one used.
    model : str or None
        The model file or example (None for an FMU).
    settings : mapping
        ``--set`` values.
    data : sequence of str
        The ``--data`` arguments.
    cost_function : object
        The cost's description (:meth:`~fmi_adjoint.identify.data_costs.CostOptions.describe`).
    gradient_method : str or mapping
        How gradients were computed (an FMU's gradient path is a mapping of its parts).
    executor : mapping
        Where the work ran (:meth:`describe` of the executor, or serial).
    fmu, fmu_token, inputs : str or None
        The FMU, its guid or instantiation token (``apply`` refuses the record for another
        FMU) and the ``--inputs`` file; None for a model file.
    interface : str or None
        The FMU interface the run used, if it chose one.
    checkpoint : str or None
        The checkpoint file of the run.
    data_preprocessing : sequence of mapping
        What was done to each data file before the cost compared it (format, channel mapping,
        window, time shift, unit conversions, masked samples, detrending, resampling:
        :func:`~fmi_adjoint.identify.data_costs.preprocessing_report`); empty: nothing.
    """

    strategy: str
    model: str | None
    settings: Mapping[str, float]
    data: Sequence[str]
    cost_function: Any
    gradient_method: str | Mapping[str, Any]
    executor: Mapping[str, Any]
    fmu: str | None = None
    fmu_token: str | None = None
    inputs: str | None = None
    interface: str | None = None
    checkpoint: str | None = None
    data_preprocessing: Sequence[Mapping[str, Any]] = ()


def channel_weights(problem: AbstractIdentificationProblem) -> list[dict]:
    """Each experiment's channel weighting of a least-squares cost (issue 26, part 5): per
    channel its weight, its scale (the noise standard deviation ``sigma`` where weighted by noise:
    ``1/sigma**2``) and where they came from
    (:meth:`~fmi_adjoint.costs.LeastSquaresCost.weighting_record`); empty for other costs."""
    out = []
    for experiment in problem.experiments:
        cost = experiment.cost
        if isinstance(cost, SensorCost):  # a sensor cost's data and weighting
            cost = cost.inner
        if isinstance(cost, LeastSquaresCost):
            out.append({"experiment": str(experiment.name), "channels": cost.weighting_record()})
    return out


def identification_record(outcome, problem, context: RunContext, *, warnings: Sequence[str],
                          untrusted: bool) -> dict:
    """The RESULT.json record of an identification.

    ``outcome`` is the :class:`~fmi_adjoint.identify.multistart.MultiStartOutcome` (its best
    start's result, its stages, the other starts when there were several), ``problem`` the
    identification problem (its solver settings and discretization-error estimate),
    ``warnings`` every note and warning of the run in the order shown, and ``untrusted``
    marks a fit that must report ``success: false`` (an unidentifiable or unmoved parameter
    not accepted by ``--allow-unidentifiable``, a cost not smooth at the optimum).
    """
    result = outcome.best
    best = outcome.starts[outcome.best_start]
    record = result.to_json()
    # The strategy asked for and the one the best start ran, with what each of its stages did.
    record["strategy"] = {"requested": context.strategy, "used": best.strategy.name,
                          "stages": [s.to_json() for s in best.stages]}
    if len(outcome.starts) > 1:
        record["multistart"] = outcome.to_json()
    record["warnings"] = list(warnings)
    record["model"] = context.model
    record["settings"] = dict(context.settings)
    if context.fmu is not None:
        record["fmu"] = context.fmu
        record["fmu_token"] = context.fmu_token
        record["inputs"] = context.inputs
    record["data"] = list(context.data)
    if context.data_preprocessing:
        record["data_preprocessing"] = [dict(entry) for entry in context.data_preprocessing]
    record["cost_function"] = context.cost_function
    weights = channel_weights(problem)
    if weights:
        record["channel_weights"] = weights
    record["gradient_method"] = context.gradient_method
    record.update({k: v for k, v in problem.solver_info().items() if k != "engine"})
    if context.interface is not None:
        record["interface"] = context.interface
    discretization = problem.discretization_error(result.parameters)
    if discretization is not None:
        record["discretization_error"] = discretization
    if untrusted:
        record["success"] = False
    record["executor"] = dict(context.executor)
    if context.checkpoint:
        record["checkpoint"] = context.checkpoint
    return record


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
