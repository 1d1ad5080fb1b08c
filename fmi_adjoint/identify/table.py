"""The parameter table printed at the end of an identification (``identify`` and the demo).

One function, so that both print the same columns with the same digits: the identified value
with seven significant digits (:data:`IDENTIFIED_DIGITS`), the start value with five, the
standard error with four; with true values (the demo's synthetic data) also the error in
standard errors.  The values printed equal RESULT.json's rounded to those digits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["IDENTIFIED_DIGITS", "parameter_table"]

#: Significant digits of the identified values in the table.
IDENTIFIED_DIGITS = 7


def _number(value: float | None, spec: str, width: int) -> str:
    if value is None:
        return f"{'-':>{width}s}"
    return f"{value:{width}{spec}}"


def parameter_table(names: Sequence[str], initial: Sequence[float] | np.ndarray,
                    identified: Sequence[float] | np.ndarray, std_errors: Sequence[float | None] | None, *,
                    true_values: Mapping[str, float] | None = None, active_bounds: Sequence[str] = (),
                    units: Mapping[str, str] | None = None) -> str:
    """The parameter table as text (lines joined by newlines, no trailing newline).

    Parameters
    ----------
    names, initial, identified : sequences of equal length
        The parameters, their start and identified values (physical units).
    std_errors : sequence of float or None, or None
        Standard errors (None: none computed; an entry None: that one not available).
    true_values : mapping, optional
        Known true values (synthetic data): adds the columns ``true`` and ``|err|/std``.
    active_bounds : sequence of str
        Parameters that ended on a bound: named on a line below the table (their standard
        errors assume an interior optimum).
    units : mapping, optional
        Unit text per parameter name: adds a column ``unit`` when any is not empty.
    """
    if not len(names) == len(initial) == len(identified):
        raise ValueError(f"parameter_table: {len(names)} names, {len(initial)} start values and "
                         f"{len(identified)} identified values; give one of each per parameter.")
    std: Sequence[float | None] = [None] * len(names) if std_errors is None else std_errors
    unit_of = {n: (units or {}).get(n, "") for n in names}
    show_units = any(unit_of.values())
    width = max([len("parameter"), *(len(n) for n in names)])
    digits = IDENTIFIED_DIGITS
    header = f"{'parameter':{width}s}"
    if true_values is not None:
        header += f" {'true':>12s}"
    header += f" {'initial':>12s} {'identified':>{digits + 7}s} {'std error':>11s}"
    if true_values is not None:
        header += f" {'|err|/std':>9s}"
    if show_units:
        header += "  unit"
    lines = [header]
    for name, x0, x, s in zip(names, initial, identified, std):
        s = None if s is None else float(s)
        line = f"{name:{width}s}"
        if true_values is not None:
            line += f" {_number(true_values.get(name), '.5g', 12)}"
        line += f" {float(x0):12.5g} {float(x):{digits + 7}.{digits}g} {_number(s, '.3e', 11)}"
        if true_values is not None:
            true = true_values.get(name)
            ratio = abs(float(x) - true) / s if true is not None and s and math.isfinite(s) else None
            line += f" {_number(ratio, '.2f', 9)}"
        if show_units:
            line += f"  {unit_of[name]}"
        lines.append(line.rstrip())
    if active_bounds:
        lines.append(f"on a bound (standard error only indicative): {', '.join(active_bounds)}")
    return "\n".join(lines)
