"""An SSP 1.0 archive (System Structure and Parameterization, Modelica Association 2019) that
binds the identified parameter values to the FMU.

Layout of the ``.ssp`` (a zip)::

    SystemStructure.ssd         one System with one Component (the FMU), the system's
                                inputs and outputs connected to the FMU's, a
                                ParameterBinding to the SSV below, a DefaultExperiment
    resources/<fmu name>        the FMU
    resources/<set name>.ssv    the identified values (:func:`~fmi_adjoint.fmu.ssv.write_ssv`)

The Component's connectors are the FMU's real inputs, outputs and parameters (kinds
``input``, ``output``, ``parameter``; SSP 1.0, 5.3.4: the kind matches the variable's
causality), plus one per other bound value (an integer, enumeration or Boolean ``--set``
value, typed ``ssc:Integer`` / ``ssc:Boolean``, or an FMI 3 array element ``A[i,j]``).
Each input and output is exposed as a connector of the System and connected to the
Component, so a master that simulates the system (``fmpy.ssp.simulation.simulate_ssp``)
finds every component input driven and every output recorded.  Other non-real variables
get no connector.  ``DefaultExperiment`` copies the FMU's finite start and stop times
(INF or NaN are left out).  The SSV's parameter names are the FMU's variable names, as the
standard requires for a binding on an FMU component (no ``prefix``).  The Component's
``implementation`` is the interface the identification ran, refused if the FMU lacks it.

Both documents are validated against the SSP 1.0 schemas that ship with fmpy before
anything is written; an archive that does not validate is an internal error.

Importers differ in whether they apply parameter bindings: an SSP master that does applies
the identified values to any FMU; for one that does not (fmpy 0.3's ``simulate_ssp`` applies
only the ``parameter_set`` it is given) the embedded FMU itself must carry them, which is why
:func:`~fmi_adjoint.fmu.apply.hand_back` embeds the FMU it hands back (rebuilt with the
values compiled in where it can be).
"""

from __future__ import annotations

import math
import re
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

from lxml import etree

from ..errors import FmuError
from ..files import atomic_output, check_writable
from ..text import excerpt
from .archive import FmuArchive
from .ssv import SSC_NAMESPACE, write_ssv
from .variables import FLOAT_KINDS, declared_variable

__all__ = ["SSD_NAMESPACE", "FMU_COMPONENT_TYPE", "check_implementation", "importer_interface", "write_ssp",
           "ssp_schema"]

SSD_NAMESPACE = "http://ssp-standard.org/SSP1/SystemStructureDescription"
FMU_COMPONENT_TYPE = "application/x-fmu-sharedlibrary"
_SYSTEM_NAME = "system"


def ssp_schema(name: str) -> etree.XMLSchema:
    """The SSP 1.0 schema ``name`` (e.g. ``SystemStructureDescription.xsd``) shipped with fmpy."""
    import fmpy

    path = Path(fmpy.__file__).resolve().parent / "ssp" / "schema" / name
    return etree.XMLSchema(etree.parse(str(path)))


def _resource_name(text: str, suffix: str) -> str:
    """A zip entry and URI safe file name (letters, digits, ``._-``) ending in ``suffix``."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", Path(text).stem).strip("._") or "model"
    return stem + suffix


def _connector_type(archive: FmuArchive, name: str) -> str:
    """The SSC type element of a connector: Real, Integer (enumerations too) or Boolean."""
    kind = declared_variable(archive, name).kind
    return "Real" if kind in FLOAT_KINDS else "Boolean" if kind == "boolean" else "Integer"


def _system_structure(archive: FmuArchive, component: str, fmu_source: str, ssv_source: str,
                      name: str, implementation: str = "any", bound: tuple[str, ...] = ()) -> etree._Element:
    ssd, ssc = SSD_NAMESPACE, SSC_NAMESPACE
    root = etree.Element(f"{{{ssd}}}SystemStructureDescription", nsmap={"ssd": ssd, "ssc": ssc}, version="1.0",
                         name=name)
    system = etree.SubElement(root, f"{{{ssd}}}System", name=_SYSTEM_NAME)
    inputs, outputs = archive.names("input"), archive.names("output")

    def connectors(parent, kinds) -> None:
        element = etree.SubElement(parent, f"{{{ssd}}}Connectors")
        for kind, names in kinds:
            for variable in names:
                connector = etree.SubElement(element, f"{{{ssd}}}Connector", name=variable, kind=kind)
                etree.SubElement(connector, f"{{{ssc}}}{_connector_type(archive, variable)}")

    if inputs or outputs:
        connectors(system, (("input", inputs), ("output", outputs)))
    elements = etree.SubElement(system, f"{{{ssd}}}Elements")
    fmu = etree.SubElement(elements, f"{{{ssd}}}Component", name=component, type=FMU_COMPONENT_TYPE,
                           source=fmu_source, implementation=implementation)
    # Every bound value has its connector: the real scalar parameters, and the integer,
    # Boolean and array-element ones the hand-back carries.
    parameters = archive.names("parameter")
    parameters += [key for key in bound if key not in parameters]
    connectors(fmu, (("input", inputs), ("output", outputs), ("parameter", parameters)))
    bindings = etree.SubElement(fmu, f"{{{ssd}}}ParameterBindings")
    etree.SubElement(bindings, f"{{{ssd}}}ParameterBinding", source=ssv_source)
    if inputs or outputs:
        connections = etree.SubElement(system, f"{{{ssd}}}Connections")
        for variable in inputs:
            etree.SubElement(connections, f"{{{ssd}}}Connection", startConnector=variable, endElement=component,
                             endConnector=variable)
        for variable in outputs:
            etree.SubElement(connections, f"{{{ssd}}}Connection", startElement=component, startConnector=variable,
                             endConnector=variable)
    experiment = archive.description.defaultExperiment
    times = {key: getattr(experiment, key, None) for key in ("startTime", "stopTime")} if experiment else {}
    # The FMU's own default experiment, re-printed as numbers (xs:double in the schema); a
    # time that is no finite number (INF, NaN, unreadable) is left out: it is no experiment.
    finite = {}
    for key, value in times.items():
        try:
            number = float(value) if value is not None else math.nan
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            finite[key] = repr(number)
    etree.SubElement(root, f"{{{ssd}}}DefaultExperiment", finite)
    return root


_LABELS = {"ModelExchange": "Model Exchange", "CoSimulation": "Co-Simulation"}


def importer_interface(archive: FmuArchive, interface: str | None) -> tuple[list[str], list[str]]:
    """(notes, warnings) saying which interface of the FMU an SSP importer will run, and a
    warning when that is not the one the identification ran (``interface``, from RESULT.json).

    SSP 1.0 (sec. 5.3.2, ``Component``) lets ``implementation`` choose the interface, but an
    importer may ignore it: fmpy 0.3's ``simulate_ssp`` instantiates every FMU as Co-Simulation
    whatever the attribute says, and runs nothing without a Co-Simulation interface.  A Model
    Exchange identification run through the FMU's Co-Simulation binary is another solver (its
    own step, inputs held over each communication step), so its outputs differ from the fit.
    """
    label = archive.path.name
    declared = f'implementation="{interface or "any"}"'
    if not archive.co_simulation:
        return ([f"{label} has no Co-Simulation interface: the SSP archive ({declared}) is complete, but fmpy's SSP "
                 "simulation (fmpy.ssp.simulation.simulate_ssp) needs Co-Simulation FMUs; an importer that honours "
                 "implementation runs its Model Exchange interface."], [])
    if interface == "ModelExchange":
        return ([], [f"the identification ran {label}'s Model Exchange interface and the SSP archive says so "
                     f"({declared}), but fmpy's SSP simulation ignores implementation and runs the FMU's "
                     "Co-Simulation binary, a different solver whose outputs differ from the fit; check them with "
                     f"`fmi-adjoint validate --interface cs` on the handed-back FMU, or run the SSP with an importer "
                     "that honours implementation."])
    ran = _LABELS.get(interface or "", "")
    return ([f"an SSP importer runs {label}'s Co-Simulation interface ({declared}; fmpy's SSP simulation always "
             f"does){', as the identification did' if ran == 'Co-Simulation' else ''}."], [])


def check_implementation(archive: FmuArchive, interface: str | None) -> None:
    """FmuError unless ``interface`` (the Component's ``implementation``, from RESULT.json) is
    None or an interface the FMU has a binary for: an SSP master would otherwise fail to run
    the component (SSP 1.0, 5.3.2: ``ModelExchange``, ``CoSimulation`` or ``any``)."""
    if interface is None:
        return
    available = [name for name, present in (("ModelExchange", archive.model_exchange),
                                             ("CoSimulation", archive.co_simulation)) if present]
    if interface not in available:
        raise FmuError(f"{archive.path.name}: the RESULT.json records the interface {excerpt(interface, 40)}, but "
                       f"the FMU has {' and '.join(available) or 'no interface'} with a binary for this platform; "
                       "give the RESULT.json of an identification of this FMU.")


def write_ssp(archive: FmuArchive, values: Mapping[str, float], fmu_file, output, *, fmu_name: str | None = None,
              name: str = "identified", interface: str | None = None) -> Path:
    """Write the SSP 1.0 archive ``output`` binding ``values`` to the FMU ``fmu_file``.

    Parameters
    ----------
    archive : FmuArchive
        The FMU the values belong to (its variables make the connectors).
    values : mapping of str to float
        Fixed or tunable numeric parameters of the FMU (checked by
        :func:`~fmi_adjoint.fmu.ssv.write_ssv`).
    fmu_file : path
        The FMU to embed: ``archive``'s own file or its hand-back (same variables).
    output : path
        The ``.ssp`` to write; it appears only when everything succeeded.
    fmu_name : str, optional
        File name of the FMU inside ``resources/`` (default: that of ``fmu_file``); reduced
        to letters, digits and ``._-``.
    name : str
        Name of the system structure and of the parameter set (``resources/<name>.ssv``).
    interface : {"ModelExchange", "CoSimulation"}, optional
        The interface the identification ran: the Component's ``implementation``, so a master
        runs the FMU the way it was identified (default "any").

    Raises
    ------
    FmuError
        A value that is no parameter of the FMU, an ``interface`` the FMU has no binary for
        (:func:`check_implementation`), or (an internal error) a document that does not
        validate against the SSP 1.0 schema.
    OutputFileError
        ``output`` cannot be written.
    """
    output = Path(output)
    check_writable(output)
    name = name if name and name.isprintable() else "identified"
    fmu_source = "resources/" + _resource_name(fmu_name or Path(fmu_file).name, ".fmu")
    ssv_source = "resources/" + _resource_name(name, ".ssv")
    described = archive.description.coSimulation or archive.description.modelExchange
    check_implementation(archive, interface)
    with tempfile.TemporaryDirectory(prefix="fmi_adjoint_ssp_") as tmp:
        ssv = write_ssv(archive, values, Path(tmp) / "parameters.ssv", name=name)
        root = _system_structure(archive, described.modelIdentifier, fmu_source, ssv_source, name,
                                 implementation=interface or "any", bound=tuple(values))
        schema = ssp_schema("SystemStructureDescription.xsd")
        if not schema.validate(root):
            problems = "; ".join(f"line {e.line}: {e.message}" for e in list(schema.error_log)[:3])
            raise FmuError(f"internal error: the SSP system structure does not validate: {problems}")
        ssd = etree.tostring(root, pretty_print=True, xml_declaration=True, encoding="UTF-8")
        with atomic_output(output, "wb") as handle, zipfile.ZipFile(handle, "w") as target:
            target.writestr("SystemStructure.ssd", ssd, compress_type=zipfile.ZIP_DEFLATED)
            # An FMU is a zip already: stored, not compressed twice.
            target.write(fmu_file, fmu_source, compress_type=zipfile.ZIP_STORED)
            target.write(ssv, ssv_source, compress_type=zipfile.ZIP_DEFLATED)
    return output
