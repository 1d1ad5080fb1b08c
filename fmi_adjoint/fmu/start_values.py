"""Identified values as the ``start`` attributes of an FMU's ``modelDescription.xml``.

:func:`check_parameters` is what every hand-back checks first (the FMU, the SSV file, the SSP
archive, the rebuild): each name addresses a fixed or tunable numeric parameter (or a start
value that acts as one: :func:`~.variables.resolve_parameter`) and each value
fits its kind.  :func:`description_with_start_values` writes them into the model description
(an array element ``A[i,j]`` replaces its place in the array's start list; FMI 2 keeps the
start on the type child), re-validated against the FMI schema.
:func:`write_reparameterized_fmu` is the FMU whose only change is that model description.
Importers that set the parameters to their start values simulate the identified model; the
binary's compiled-in defaults are not changed (:mod:`.rebuild` changes them).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from lxml import etree

from ..errors import FmuError
from ..files import atomic_output, check_writable
from ..text import excerpt
from .archive import FmuArchive, parse_description, schema_problems
from .repack import check_not_the_input, write_fmu_entries
from .variables import (FLOAT_KINDS, INTEGER_RANGES, declared_variable, kind_label, numeric_names, resolve,
                        resolve_parameter, whole_number)

__all__ = ["check_parameters", "description_with_start_values", "start_text", "write_reparameterized_fmu"]


def check_parameters(archive: FmuArchive, values: Mapping[str, float]) -> None:
    """FmuError unless every name of ``values`` addresses a fixed or tunable numeric parameter
    (a scalar or an element ``A[i,j]``, :func:`~.variables.resolve`) and every value fits its
    kind: what ``identify`` accepts (identified reals, ``--set`` integers and Booleans) is what
    the hand-back carries, so the handed-back model is the identified one."""
    label = archive.path.name
    for name, value in values.items():
        found = resolve_parameter(archive, name)
        if found is None:
            known = numeric_names(archive, "parameter")
            raise FmuError(f"{label}: no parameter named {excerpt(name, 80)}. Parameters: "
                           f"{', '.join(known) or 'none'}.")
        ref, variable = found
        if variable.causality == "parameter" and variable.variability not in ("fixed", "tunable"):
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


def start_text(kind: str, value: float) -> str:
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
            out[variable.name] = start_text(variable.kind, value)
            continue
        elements = arrays.setdefault(variable.name, list(variable.start_values or ()))
        elements[ref.element] = float(value)
    for base, elements in arrays.items():
        kind = archive.variables[base].kind
        out[base] = " ".join(start_text(kind, v) for v in elements)
    return out


def description_with_start_values(archive: FmuArchive, values: Mapping[str, float], *,
                                   token: str | None = None) -> bytes:
    """``modelDescription.xml`` of ``archive`` with ``values`` as the ``start`` attributes of
    those parameters (and ``token`` as the GUID / instantiation token if given), re-validated
    against the FMI schema; everything else as in the FMU (attribute order, formatting)."""
    root = parse_description(archive.path, (archive.directory / "modelDescription.xml").read_bytes())
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
    problems = schema_problems(root, archive.fmi_version)
    if problems:
        raise FmuError(f"internal error: the changed model description does not validate: {problems}")
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8")


def write_reparameterized_fmu(archive: FmuArchive, values: Mapping[str, float], output) -> Path:
    """Copy the FMU with new ``start`` values of parameters; nothing else changes (see
    :func:`write_fmu_entries`)."""
    check_parameters(archive, values)
    output = Path(output)
    check_not_the_input(archive, output)
    check_writable(output)
    xml = description_with_start_values(archive, values)
    with atomic_output(output, "wb") as handle:
        write_fmu_entries(archive, handle, {"modelDescription.xml": xml})
    return output
