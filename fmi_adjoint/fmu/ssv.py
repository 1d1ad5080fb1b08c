"""An SSP 1.0 System Structure Parameter Values file (``.ssv``) of identified values.

One ``ssv:Real`` per real parameter (``ssv:Integer`` / ``ssv:Boolean`` for the integer,
enumeration and Boolean ``--set`` values the identification ran with; FMI 3 array elements by
their name ``A[i,j]``), valid against the schema shipped with fmpy.  Units are written only
where the FMU defines them (``UnitDefinitions``), because an SSV unit must be defined in the
file with its SI base-unit exponents.  The SSP archive that binds it to the FMU: :mod:`.ssp`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from lxml import etree

from ..errors import FmuError
from ..files import atomic_output, check_writable
from .archive import FmuArchive
from .start_values import check_parameters, start_text
from .variables import FLOAT_KINDS, declared_variable

__all__ = ["SSC_NAMESPACE", "SSV_NAMESPACE", "write_ssv"]

SSV_NAMESPACE = "http://ssp-standard.org/SSP1/SystemStructureParameterValues"
SSC_NAMESPACE = "http://ssp-standard.org/SSP1/SystemStructureCommon"
_BASE_UNITS = ("kg", "m", "s", "A", "K", "mol", "cd", "rad", "factor", "offset")


def _unit_definitions(archive: FmuArchive) -> dict[str, dict[str, str]]:
    units = {}
    for unit in archive.root.iter("Unit"):
        base = unit.find("BaseUnit")
        if unit.get("name") and base is not None:
            units[unit.get("name")] = {k: v for k, v in base.attrib.items() if k in _BASE_UNITS}
    return units


def write_ssv(archive: FmuArchive, values: Mapping[str, float], path, *, name: str = "identified") -> Path:
    """Write the parameter values as an SSV 1.0 file (validated against fmpy's schema)."""
    check_parameters(archive, values)
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
            etree.SubElement(parameter, f"{{{ssv}}}{tag}", value=start_text(variable.kind, value))
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
