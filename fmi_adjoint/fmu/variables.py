"""Checks of the names a problem uses against the FMU's variables (placeholder until the
variable-type module lands)."""

from __future__ import annotations

from collections.abc import Sequence

from .archive import FmuArchive, FmuError

__all__ = ["check_names"]


def check_names(archive: FmuArchive, names: Sequence[str], experiments: Sequence) -> None:
    params = {v.name for v in archive.variables.values() if v.causality == "parameter" and v.is_real}
    for name in names:
        if name not in params:
            raise FmuError(
                f"{archive.path.name}: no real parameter named {name!r}. Parameters: {', '.join(sorted(params))}."
            )
        if archive.variables[name].variability not in ("fixed", "tunable"):
            raise FmuError(f"{archive.path.name}: parameter {name!r} has variability "
                           f"{archive.variables[name].variability!r}; only fixed or tunable ones can be identified.")
    outputs = set(archive.names("output"))
    inputs = set(archive.names("input"))
    for exp in experiments:
        for channel in exp.cost.channels:
            if channel not in outputs:
                raise FmuError(
                    f"data column {channel!r} of '{exp.name}' matches no output of {archive.path.name}. "
                    f"Outputs: {', '.join(sorted(outputs)) or 'none'}. Rename or drop the column."
                )
        for name in exp.values:
            if name not in params:
                raise FmuError(f"'{exp.name}': {name!r} is not a parameter of {archive.path.name}.")
        if exp.inputs is not None:
            for column in exp.inputs.columns:
                if column not in inputs:
                    raise FmuError(
                        f"input column {column!r} of '{exp.name}' matches no input of {archive.path.name}. "
                        f"Inputs: {', '.join(sorted(inputs)) or 'none'}."
                    )
