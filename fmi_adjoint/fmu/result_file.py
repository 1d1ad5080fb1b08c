"""RESULT.json against an FMU: whether a record (read by :mod:`fmi_adjoint.identify.result_file`,
which owns the format) belongs to a given FMU, and which start values of the FMU differ from its
values.

The file is untrusted input: only a regular file of at most 16 MiB is read
(:func:`~fmi_adjoint.files.read_regular`), and every problem (nesting too deep, numbers beyond
the float range, values that are no finite numbers, another FMU's token) is one
:class:`~fmi_adjoint.errors.FmuError` whose message never echoes more than a short excerpt.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from ..errors import FmuError
from ..identify.result_file import read_result, read_result_interface, read_result_parameters
from ..text import excerpt
from .archive import FmuArchive
from .variables import declared_variable, resolve

__all__ = ["check_result_fmu", "differing_start_values", "read_result_interface", "read_result_parameters"]


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
    payload = read_result(path)
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
