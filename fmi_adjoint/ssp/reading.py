"""Reading an SSP 1.0 system (Modelica Association, 2019) into a :class:`~.structure.SystemStructure`.

Two forms are read by :func:`open_system`:

* an ``.ssp`` archive: a zip with ``SystemStructure.ssd`` at its root and the FMUs and
  ``.ssv`` files it names (normally under ``resources/``).  The archive is untrusted input and
  gets the defences of the FMU importer (:mod:`fmi_adjoint.fmu.archive`, whose entry checks and
  bounded extraction are reused): entry names normalized and refused if absolute, leaving the
  folder, empty or with control characters; links, encrypted and duplicate (also case- or
  Unicode-folded) entries refused; sizes counted while unpacking, per entry, in total and in
  compression ratio.  It is extracted into a private temporary folder that
  :meth:`SystemArchive.close` removes.
* a bare ``.ssd`` file, whose component and parameter ``source`` URIs are paths relative to the
  ``.ssd``'s folder and must stay inside it (after symbolic links are resolved).

A ``source`` must be a relative URI without scheme, query or fragment (SSP 1.0, 5.3.2:
"implementations are only required to support relative URIs ... relative URIs that move beyond
the baseURI (e.g. go "up" a level via ..) are not required to be supported ... for security or
other reasons"): absolute paths, ``..`` and ``file:``/``http:`` URIs are refused by name.

Every XML document (the SSD, each SSV, each inline parameter set) is parsed without DTD,
entities or network access (a DOCTYPE or ENTITY declaration is refused, as for a model
description) and validated against the SSP 1.0 schemas shipped with fmpy.  Each component FMU
is opened with :func:`~fmi_adjoint.fmu.archive.open_fmu`, which extracts and checks it; its
connectors are checked against its model description (SSP 1.0, 5.3.4: the connector's kind is
the variable's causality, its type the variable's type; an untyped connector takes the
variable's).

What is read (SSP 1.0, Sec. 5): the System's name and connectors; its Components of type
``application/x-fmu-sharedlibrary`` with ``implementation`` (checked against the FMU's interfaces),
and this tool's own type :data:`MODEL_COMPONENT_TYPE` for an fmi-adjoint model file (``.toml``),
which is exported into the private folder as an FMU with both interfaces through the build cache
(:func:`~fmi_adjoint.export.export_fmu`: the model file is read and checked like any, so that it is
data, never code) and then taken as that FMU, running where the FMUs run (a sandboxed worker: one
code path, one set of derivatives, whichever way the system runs); their connectors (kind,
Real/Integer/Boolean, unit) and parameter bindings (inline ``ParameterValues`` and SSV files, with
``prefix``; system-level bindings address ``COMPONENT.VARIABLE``, take priority over component-
level ones, and a later binding over an earlier one, 5.3.5); the Connections with their
``LinearTransformation`` and the unit conversion between connectors of different units (``Units``:
``BaseUnit`` factor, offset and SI exponents; ``SI = factor * value + offset``), applied first and
then the linear transformation (SSC 1.0 schema, ``LinearTransformation``), unless
``suppressUnitConversion``; both are folded into one :class:`~.structure.Transformation`; and
``DefaultExperiment``.

What this version cannot run is refused by name, one :class:`~fmi_adjoint.errors.FmuError`
each: subsystems, signal dictionaries, other component types, parameter mappings, mapping
transformations, String/Enumeration/Binary connectors and parameter connections.  A
connection's data must flow from its start to its end (from a component output or system
input to a component input or system output): the schema leaves the direction to the connector
kinds, this reader requires it spelled out, so that a transformation has one meaning.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import tempfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

from lxml import etree

from ..errors import FmiAdjointError, FmuError
from ..fmu.archive import FmuArchive, check_zip_entries, extract_zip_entry, open_fmu, parse_xml
from ..fmu.ssp import FMU_COMPONENT_TYPE, SSD_NAMESPACE, ssp_schema
from ..fmu.ssv import SSC_NAMESPACE, SSV_NAMESPACE
from ..fmu.variables import FLOAT_KINDS, FmuVariable, declared_variable
from ..text import excerpt
from .structure import (CONNECTOR_TYPES, Component, Connection, Connector, Endpoint, ParameterValue,
                        SystemStructure, Transformation)

__all__ = ["MODEL_COMPONENT_TYPE", "SSD_FILE", "SystemArchive", "open_system", "structure_digest"]

#: The type of a component that is an fmi-adjoint model file (not an SSP 1.0 type: this tool's own).
MODEL_COMPONENT_TYPE = "application/x-fmi-adjoint-model"

#: The system structure at the root of an ``.ssp`` archive (SSP 1.0, 4.1).
SSD_FILE = "SystemStructure.ssd"
_NS = {"ssd": SSD_NAMESPACE, "ssc": SSC_NAMESPACE, "ssv": SSV_NAMESPACE}
_SSD, _SSC, _SSV = (f"{{{ns}}}" for ns in (SSD_NAMESPACE, SSC_NAMESPACE, SSV_NAMESPACE))
#: Largest SSD or SSV document read (far above real ones; lxml's own limits apply too).
_MAX_XML_BYTES = 64 * 1024**2
_PARAMETER_SET_TYPE = "application/x-ssp-parameter-set"
_BASE_EXPONENTS = ("kg", "m", "s", "A", "K", "mol", "cd", "rad")
#: SSC type element -> the kinds of FMU variable it may stand for (ssp.py writes enumerations
#: as Integer, as SSV 1.0 does).
_TYPE_KINDS = {"Real": FLOAT_KINDS, "Boolean": frozenset({"boolean"})}


class SystemArchive:
    """An SSP system opened by :func:`open_system`: its :attr:`structure` and one opened
    :class:`~fmi_adjoint.fmu.archive.FmuArchive` per component (:attr:`archives`, by component
    name).  :meth:`close` (or leaving the ``with`` block) closes the FMUs and removes the
    private folder (the ``.ssp`` extracted, the FMUs exported from model-file components)."""

    def __init__(self, structure: SystemStructure, archives: dict[str, FmuArchive],
                 tmp: tempfile.TemporaryDirectory | None, extracted: Path | None = None):
        self.structure = structure
        self.archives = archives
        self._tmp = tmp
        self._extracted = extracted

    @property
    def directory(self) -> Path | None:
        """The private extraction folder of an ``.ssp`` (None for an ``.ssd`` or once closed)."""
        return self._extracted if self._tmp is not None else None

    def close(self) -> None:
        for archive in self.archives.values():
            archive.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> SystemArchive:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_system(path) -> SystemArchive:
    """Read the SSP 1.0 system ``path`` (an ``.ssp`` archive or an ``.ssd`` file; module
    docstring) and open its FMUs.  Nothing is left behind when it fails.

    No FMU code runs here (the FMUs are only extracted and their descriptions read), so there
    is nothing to time out; the master's workers take ``--fmu-timeout``.

    Raises
    ------
    FmuError
        A missing or unsafe file, XML that is malformed, declares a DTD or violates the SSP 1.0
        schema, an unsupported SSP feature (named), or a system inconsistent with its FMUs.
    """
    path = Path(path)
    if not path.is_file():
        raise FmuError(f"{path}: file not found; give an .ssp archive or an .ssd file.")
    archives: dict[str, FmuArchive] = {}
    # The private folder: the extracted .ssp, and the FMUs exported from model-file components.
    tmp = tempfile.TemporaryDirectory(prefix="fmi_adjoint_ssp_")
    try:
        private, extracted = Path(tmp.name), None
        if zipfile.is_zipfile(path):
            base = extracted = private / "ssp"
            base.mkdir()
            _extract_ssp(path, base)
            ssd_file = base / SSD_FILE
        elif path.suffix.lower() == ".ssp":
            raise FmuError(f"{path}: not a zip archive, so not an SSP; give an .ssp archive or an .ssd file.")
        else:
            base, ssd_file = path.parent, path
        structure = _Reader(path, base, archives, private / "models").read(ssd_file)
        return SystemArchive(structure, archives, tmp, extracted)
    except BaseException:
        for archive in archives.values():
            archive.close()
        tmp.cleanup()
        raise


# ----------------------------------------------------------------------------- the archive --


def _extract_ssp(path: Path, directory: Path) -> None:
    """Check every entry of the ``.ssp`` (:func:`fmi_adjoint.fmu.archive.check_zip_entries`, the
    FMU importer's defences), then extract them into ``directory`` with bounded sizes."""
    try:
        with zipfile.ZipFile(path) as archive:
            checked = check_zip_entries(path, archive, "SSP archive")
            if not any(entry.name == SSD_FILE and not entry.is_dir for _, entry in checked):
                raise FmuError(f"{path}: no {SSD_FILE} at the root of the archive; this is not an SSP archive "
                               "(SSP 1.0, 4.1). Give an .ssp made by an SSP tool, or the .ssd file itself.")
            base, total = directory.resolve(), 0
            for info, entry in checked:
                target = base / entry.name
                if base not in target.resolve().parents:
                    raise FmuError(f"{path}: the entry {excerpt(entry.raw, 60)} leaves the extraction folder; refused.")
                if entry.is_dir:
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                total = extract_zip_entry(path, archive, info, entry, target, total, "SSP archive")
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, RuntimeError, NotImplementedError, EOFError,
            OSError) as exc:
        raise FmuError(f"{path}: the archive cannot be extracted ({excerpt(str(exc), 160)}); obtain an intact SSP "
                       "archive.") from None


def _local_source(base: Path, source: str | None, where: str) -> Path:
    """The file a ``source`` URI names relative to ``base`` (the SSD's folder), refusing
    schemes, absolute paths, ``..``, queries, fragments and paths that leave ``base``."""
    if not source:
        raise FmuError(f"{where} has no source; give the path of the file relative to the SSD.")
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", source):
        raise FmuError(f"{where} has source={excerpt(source, 80)}, a URI with a scheme "
                       f"({source.split(':', 1)[0]}:); only paths relative to the SSD are read (SSP 1.0, 5.3.2). "
                       "Put the file beside the SSD (in an .ssp: under resources/) and give its relative path.")
    if "?" in source or "#" in source:
        raise FmuError(f"{where} has source={excerpt(source, 80)}, with a query or fragment (a nested SSD or a "
                       "same-document reference), which is not supported; give the relative path of a file.")
    text = unquote(source).replace("\\", "/")
    parts = PurePosixPath(text).parts
    if text.startswith("/") or ".." in parts or "\x00" in text:
        raise FmuError(f"{where} has source={excerpt(source, 80)}, which is absolute or leaves the SSD's folder "
                       "(..); only paths inside the SSD's folder are read. Move the file there and give its "
                       "relative path.")
    root = base.resolve()
    target = (root / text).resolve()
    if root not in target.parents:
        raise FmuError(f"{where} has source={excerpt(source, 80)}, which resolves outside the SSD's folder (a "
                       "symbolic link); only files inside it are read.")
    if not target.is_file():
        raise FmuError(f"{where} has source={excerpt(source, 80)}, but there is no such file beside the SSD; add "
                       "it or fix the path.")
    return target


@functools.lru_cache(maxsize=None)
def _schema(name: str) -> etree.XMLSchema:
    return ssp_schema(name)


def _read_limited(file: Path, label: str) -> bytes:
    """The bytes of an SSD or SSV file, refused unread above the size limit."""
    if file.stat().st_size > _MAX_XML_BYTES:
        raise FmuError(f"{label} is larger than {_MAX_XML_BYTES // 1024**2} MiB; it is refused.")
    return file.read_bytes()


def _parse_xml(label: str, data: bytes, schema: str, root_tag: str) -> etree._Element:
    """An SSP document parsed without DTD, entities or network and validated against
    ``schema`` (one of fmpy's SSP 1.0 schemas), or FmuError naming ``label``."""
    return _validated(label, parse_xml(data, label, "SSP", "it", "fix the file"), schema, root_tag)


def _validated(label: str, root: etree._Element, schema: str, root_tag: str) -> etree._Element:
    if root.tag != root_tag:
        raise FmuError(f"{label}: the root element is <{excerpt(root.tag, 80)[1:-1]}>, not <{root_tag}> (SSP 1.0).")
    validator = _schema(schema)
    if not validator.validate(root):
        problems = "; ".join(f"line {e.line}: {e.message}" for e in list(validator.error_log)[:3])
        raise FmuError(f"{label} violates the SSP 1.0 schema ({schema}): {problems}. Fix the file.")
    return root


#: What a digest of the system leaves out (:func:`structure_digest`): elements of layout and
#: tool data, and descriptive attributes (SSP 1.0: ``TopLevelMetaData``, ``BaseElement``).
_UNSIMULATED_ELEMENTS = frozenset(f"{_SSD}{name}" for name in (
    "ParameterBindings", "ElementGeometry", "ConnectorGeometry", "ConnectionGeometry", "SystemGeometry",
    "GraphicalElements", "Annotations"))
_UNSIMULATED_ATTRIBUTES = ("id", "description", "author", "fileversion", "copyright", "license", "generationTool",
                           "generationDateAndTime")


def structure_digest(root: etree._Element) -> str:
    """SHA-256 (hex) of what an SSD says about the system it simulates, beside the parameter
    values: the document without its ``ssd:ParameterBindings`` (the bindings, SSP 1.0 5.3.5,
    which a hand-back changes), layout (geometry, graphical elements), annotations, comments,
    processing instructions, descriptive attributes (ids, descriptions, authorship, generation
    tool and time) and whitespace-only text, in a canonical form of our own: each element its
    namespace-qualified name (``{uri}local``), its attributes sorted, its text and its children,
    so that prefixes and namespace declarations (``ssd:`` or a default namespace, an unused
    declaration) do not count, as C14N 1.0 would count them.  A component's
    ``source`` (where its FMU lies) is left out too, so that an ``.ssd`` and the ``.ssp`` that
    packs it agree; what the FMU is, is its token (:func:`~.structure.system_identity`).  Two SSDs
    of one system (components, connectors, connections, units, experiment) bound to other values,
    or re-saved by another tool, have the same digest; any change of the system gives another."""
    copy = etree.fromstring(etree.tostring(root))
    for element in list(copy.iter()):
        if not isinstance(element.tag, str) or element.tag in _UNSIMULATED_ELEMENTS:
            element.getparent().remove(element)
            continue
        for key in _UNSIMULATED_ATTRIBUTES + (("source",) if element.tag == f"{_SSD}Component" else ()):
            element.attrib.pop(key, None)
    digest = hashlib.sha256()

    def feed(element: etree._Element) -> None:
        text = element.text if element.text is not None and element.text.strip() else ""
        attributes = sorted((str(key), str(value)) for key, value in element.attrib.items())
        digest.update(json.dumps([element.tag, attributes, text, len(element)]).encode("utf-8"))
        for child in element:
            feed(child)
            tail = child.tail if child.tail is not None and child.tail.strip() else ""
            digest.update(json.dumps(["tail", tail]).encode("utf-8"))

    feed(copy)
    return digest.hexdigest()


# ------------------------------------------------------------------------------ the reader --


def _local(element: etree._Element) -> str:
    return etree.QName(element).localname


def _refuse_element(where: str, element: etree._Element) -> FmuError:
    """The one error for an SSP element this version does not support."""
    name = element.get("name")
    what = f"<{_local(element)}{f' name={excerpt(name, 60)}' if name else ''}>"
    fixes = {
        "System": "a nested system (subsystem) is not supported; flatten it: move its components and connections "
                  "into the top-level system",
        "SignalDictionaryReference": "signal dictionaries are not supported; connect the connectors directly",
        "SignalDictionaries": "signal dictionaries are not supported; connect the connectors directly",
        "ParameterMapping": "parameter mappings are not supported; name the FMU variables in the parameter set "
                            "itself (with a prefix if needed)",
        "BooleanMappingTransformation": "mapping transformations are not supported; only LinearTransformation is",
        "IntegerMappingTransformation": "mapping transformations are not supported; only LinearTransformation is",
        "EnumerationMappingTransformation": "mapping transformations are not supported; only LinearTransformation "
                                            "is",
    }
    return FmuError(f"{where}: {what}: {fixes.get(_local(element), 'not supported')}.")


class _Reader:
    """One reading of an SSD (state shared by the steps of :meth:`read`)."""

    def __init__(self, path: Path, base: Path, archives: dict[str, FmuArchive], models: Path):
        self.path, self.base, self.archives = path, base, archives
        #: Where the FMUs of model-file components are exported (the system's private folder).
        self.models = models
        self.label = str(path)
        self.units: dict[str, tuple[float, float, tuple[int, ...]]] = {}

    def read(self, ssd_file: Path) -> SystemStructure:
        ssd_label = self.label if ssd_file == self.path else f"{self.label}: {SSD_FILE}"
        data = _read_limited(ssd_file, ssd_label)
        root = _parse_xml(ssd_label, data, "SystemStructureDescription.xsd", f"{_SSD}SystemStructureDescription")
        self.units = self._units(root.find("ssd:Units", _NS), ssd_label)
        system = root.find("ssd:System", _NS)
        where = f"{self.label}: system {excerpt(system.get('name'), 60)}"
        for tag in ("ssd:Elements/ssd:System", "ssd:Elements/ssd:SignalDictionaryReference", "ssd:SignalDictionaries"):
            found = system.find(tag, _NS)
            if found is not None:
                raise _refuse_element(where, found)
        connectors = self._connectors(system, None, where)
        components: list[Component] = []
        for element in system.iterfind("ssd:Elements/ssd:Component", _NS):
            if any(c.name == element.get("name") for c in components):
                raise FmuError(f"{where}: two components are named {excerpt(element.get('name'))}; element names "
                               "must be unique in a system (SSP 1.0, 5.3.1). Rename one.")
            components.append(self._component(element, where))
        connections = self._connections(system, connectors, components, where)
        parameters: dict[tuple[str, str], ParameterValue] = {}
        for component, element in zip(components, system.iterfind("ssd:Elements/ssd:Component", _NS)):
            for value in self._bindings(element, component.name, f"{where}, component {excerpt(component.name, 60)}"):
                parameters[(value.component, value.name)] = value
        # System-level bindings take precedence over component-level ones (5.3.5).
        for value in self._bindings(system, None, where):
            parameters[(value.component, value.name)] = value
        experiment = root.find("ssd:DefaultExperiment", _NS)
        times: list[float | None] = [None, None]
        for k, key in enumerate(("startTime", "stopTime")):
            if experiment is not None and experiment.get(key) is not None:
                times[k] = time = float(experiment.get(key))
                if not math.isfinite(time):
                    raise FmuError(f"{ssd_label}: DefaultExperiment {key}={excerpt(experiment.get(key))} is not a "
                                   "finite time; give a number or leave it out.")
        return SystemStructure(name=system.get("name"), source=self.label, connectors=connectors,
                               components=tuple(components), connections=connections,
                               parameters=tuple(parameters.values()), start_time=times[0], stop_time=times[1],
                               digest=structure_digest(root))

    # -- units ---------------------------------------------------------------------------

    @staticmethod
    def _units(element, label: str) -> dict[str, tuple[float, float, tuple[int, ...]]]:
        """Unit name -> (factor, offset, SI exponents) of ``ssd:Units`` (``SI = factor * v + offset``)."""
        units = {}
        for unit in element.iterfind("ssc:Unit", _NS) if element is not None else ():
            base = unit.find("ssc:BaseUnit", _NS)
            factor, offset = _finite(base, "factor", 1.0, f"{label}: unit {excerpt(unit.get('name'), 60)}")
            if factor == 0.0:
                raise FmuError(f"{label}: unit {excerpt(unit.get('name'), 60)} has BaseUnit factor 0, which converts "
                               "nothing; give its factor to SI.")
            units[unit.get("name")] = (factor, offset, tuple(int(base.get(key, "0")) for key in _BASE_EXPONENTS))
        return units

    def _conversion(self, start: Connector, end: Connector, where: str) -> Transformation:
        """The unit conversion from ``start``'s unit to ``end``'s (identity if either has none
        or they are the same)."""
        if not start.unit or not end.unit or start.unit == end.unit:
            return Transformation()
        for unit in (start.unit, end.unit):
            if unit not in self.units:
                raise FmuError(f"{where}: the unit {excerpt(unit, 60)} is not defined in the SSD's <Units>; define "
                               "it (with its BaseUnit) or set suppressUnitConversion=\"true\" on the connection.")
        (f_start, o_start, d_start), (f_end, o_end, d_end) = self.units[start.unit], self.units[end.unit]
        if d_start != d_end:
            a, b = excerpt(start.unit, 60), excerpt(end.unit, 60)
            def dims(exponents):
                return " ".join(f"{k}^{e}" for k, e in zip(_BASE_EXPONENTS, exponents) if e) or "1"
            raise FmuError(f"{where}: the units {a} ({dims(d_start)}) and {b} ({dims(d_end)}) "
                           "have different dimensions, so no conversion exists; connect connectors of compatible "
                           "units, or set suppressUnitConversion=\"true\" if the values need no conversion.")
        return Transformation(f_start / f_end, (o_start - o_end) / f_end)

    # -- connectors ----------------------------------------------------------------------

    def _connectors(self, element, archive: FmuArchive | None, where: str) -> tuple[Connector, ...]:
        connectors: list[Connector] = []
        for item in element.iterfind("ssd:Connectors/ssd:Connector", _NS):
            name, kind = item.get("name"), item.get("kind")
            here = f"{where}, connector {excerpt(name, 60)}"
            if any(c.name == name for c in connectors):
                raise FmuError(f"{here}: declared twice; connector names must be unique (SSP 1.0, 5.3.4).")
            typed = next((child for child in item if child.tag.startswith(_SSC)), None)
            type_name = _local(typed) if typed is not None else None
            if type_name is not None and type_name not in CONNECTOR_TYPES:
                raise FmuError(f"{here}: {_a(type_name)} connector; only {', '.join(CONNECTOR_TYPES)} connectors are "
                               "supported. Remove the connector (and its connections).")
            unit = typed.get("unit", "") if typed is not None else ""
            if archive is not None:
                type_name = self._check_against_fmu(archive, name, kind, type_name, here)
            connectors.append(Connector(name=name, kind=kind, type=type_name or "Real", unit=unit))
        return tuple(connectors)

    @staticmethod
    def _check_against_fmu(archive: FmuArchive, name: str, kind: str, type_name: str | None, here: str) -> str:
        """The connector's type, checked against the FMU variable it names (SSP 1.0, 5.3.4)."""
        shown = excerpt(name, 60)
        variable: FmuVariable | None = archive.variables.get(name)
        if variable is None:
            try:
                variable = declared_variable(archive, name)
            except FmuError:
                variable = None
        if variable is None:
            raise FmuError(f"{here}: the FMU {archive.path.name} has no variable {shown}; a component's connector "
                           "must name one of its FMU's variables. Fix the name or remove the connector.")
        if variable.causality != kind:
            raise FmuError(f"{here}: kind {excerpt(kind, 60)}, but the FMU {archive.path.name} declares {shown} with "
                           f"causality {variable.causality!r}; the kind must be the causality (SSP 1.0, 5.3.4). Set "
                           f"kind=\"{variable.causality}\" or connect another variable.")
        fits = next((t for t in CONNECTOR_TYPES if variable.kind in _TYPE_KINDS.get(t, ())), None)
        if fits is None and variable.kind not in ("string", "binary", "clock"):
            fits = "Integer"
        if fits is None:
            raise FmuError(f"{here}: the FMU variable {shown} is of type {variable.type}; only Real, Integer and "
                           "Boolean variables can be connected. Remove the connector.")
        if type_name is not None and type_name != fits:
            raise FmuError(f"{here}: declared {type_name}, but the FMU {archive.path.name} declares {shown} as "
                           f"{variable.type}; write <ssc:{fits}/> (SSP 1.0, 5.3.4).")
        return fits

    # -- components ----------------------------------------------------------------------

    def _component(self, element, where: str) -> Component:
        name = element.get("name")
        here = f"{where}, component {excerpt(name, 60)}"
        # The name prefixes its ports (COMPONENT.CONNECTOR, COMPONENT.PARAM) and heads CSV columns:
        # no dot (ambiguous), no control characters, nothing a spreadsheet reads as a formula.
        if not re.fullmatch(r"[^\x00-\x1f\x7f.=+@\-][^\x00-\x1f\x7f.]*", name or ""):
            raise FmuError(f"{here}: the name must not contain dots or control characters, nor start with = + - @ "
                           "(its ports are named COMPONENT.CONNECTOR, and CSV columns after them); rename it.")
        kind = element.get("type", FMU_COMPONENT_TYPE)
        if kind not in (FMU_COMPONENT_TYPE, MODEL_COMPONENT_TYPE):
            raise FmuError(f"{here}: type {excerpt(kind, 60)}; only FMU components ({FMU_COMPONENT_TYPE}) and "
                           f"fmi-adjoint model files ({MODEL_COMPONENT_TYPE}) are supported (no nested SSPs or SSDs). "
                           "Replace it by its FMUs.")
        source = element.get("source")
        path = _local_source(self.base, source, here)
        try:
            archive = open_fmu(path if kind == FMU_COMPONENT_TYPE else self._exported(path, here))
        except FmuError as error:
            raise FmuError(f"{here}: {error}") from None
        self.archives[name] = archive
        implementation = element.get("implementation", "any")
        present = {"ModelExchange": archive.model_exchange, "CoSimulation": archive.co_simulation}
        if implementation != "any" and not present[implementation]:
            has = " and ".join(k for k, v in present.items() if v) or "no interface"
            raise FmuError(f"{here}: implementation=\"{implementation}\", but the FMU {path.name} has {has} with a "
                           "binary for this platform; set implementation to one it has (or \"any\").")
        connectors = self._connectors(element, archive, here)
        return Component(name=name, path=path, source=source, implementation=implementation, connectors=connectors)

    def _exported(self, path: Path, here: str) -> Path:
        """The FMU (Model Exchange and Co-Simulation) of the model file ``path`` of a model-file
        component, exported into the system's private folder through the build cache (a model file
        is data: it is read and checked like any model file, nothing of it is executed)."""
        from ..export import export_fmu  # noqa: PLC0415 (the model toolchain, sympy: only for model-file components)

        if path.suffix.lower() != ".toml":
            raise FmuError(f"{here}: type {MODEL_COMPONENT_TYPE} names an fmi-adjoint model file, but its source "
                           f"{path.name} is not a .toml file; give the model file, or type {FMU_COMPONENT_TYPE} "
                           "for an FMU.")
        self.models.mkdir(exist_ok=True)
        # Named by its position and the model file's own name: never by the component's name, which
        # comes from the SSD and could name a path.
        target = self.models / f"{len(self.archives)}_{path.stem}.fmu"
        try:
            return export_fmu(path, target)
        except FmiAdjointError as error:
            raise FmuError(f"{here}: the model file {path.name}: {error}") from None

    # -- connections ---------------------------------------------------------------------

    def _connections(self, system, own: tuple[Connector, ...], components: list[Component],
                     where: str) -> tuple[Connection, ...]:
        by_name = {c.name: c for c in components}
        connections: list[Connection] = []
        driven: dict[Endpoint, str] = {}
        for item in system.iterfind("ssd:Connections/ssd:Connection", _NS):
            start = Endpoint(item.get("startElement"), item.get("startConnector"))
            end = Endpoint(item.get("endElement"), item.get("endConnector"))
            here = f"{where}, connection {_short(start.label())} -> {_short(end.label())}"
            start_connector = self._endpoint(start, own, by_name, here)
            end_connector = self._endpoint(end, own, by_name, here)
            for endpoint, connector, role in ((start, start_connector, "start"), (end, end_connector, "end")):
                if connector.kind not in ("input", "output"):
                    raise FmuError(f"{here}: its {role} {_short(endpoint.label())} is a {connector.kind} connector; "
                                   "only inputs and outputs can be connected here (parameter connections are not "
                                   "supported). Bind the value with a ParameterBinding instead.")
            # Data flows from a component output or system input to a component input or system output.
            source_kind = "output" if start.element is not None else "input"
            sink_kind = "input" if end.element is not None else "output"
            if start_connector.kind != source_kind or end_connector.kind != sink_kind:
                raise FmuError(f"{here}: wrong direction: its start is {_role(start, start_connector)} and its end "
                               f"{_role(end, end_connector)}; a connection runs from a component output (or system "
                               "input) to a component input (or system output). Swap start and end.")
            if start_connector.type != end_connector.type:
                raise FmuError(f"{here}: connects {_a(start_connector.type)} to {_a(end_connector.type)} connector; "
                               "both ends must have the same type.")
            if end in driven:
                raise FmuError(f"{here}: {_short(end.label())} is already driven by the connection {driven[end]}; an "
                               "input (or system output) takes one connection. Remove one of them.")
            driven[end] = f"{_short(start.label())} -> {_short(end.label())}"
            transformation = self._transformation(item, start_connector, end_connector, here)
            connections.append(Connection(start=start, end=end, transformation=transformation))
        return tuple(connections)

    @staticmethod
    def _endpoint(endpoint: Endpoint, own: tuple[Connector, ...], by_name: dict[str, Component],
                  here: str) -> Connector:
        if endpoint.element is None:
            connectors, owner = own, "the system"
        elif endpoint.element in by_name:
            connectors, owner = by_name[endpoint.element].connectors, f"component {excerpt(endpoint.element, 60)}"
        else:
            raise FmuError(f"{here}: there is no element {excerpt(endpoint.element, 60)}; elements: "
                           f"{_short(', '.join(by_name), 200) or '(none)'}. Fix the connection.")
        for connector in connectors:
            if connector.name == endpoint.connector:
                return connector
        raise FmuError(f"{here}: {owner} has no connector {excerpt(endpoint.connector, 60)}; its connectors: "
                       f"{_short(', '.join(c.name for c in connectors), 200) or '(none)'}. Declare it or fix the "
                       "connection.")

    def _transformation(self, item, start: Connector, end: Connector, here: str) -> Transformation:
        linear = Transformation()
        for child in item:
            if child.tag == f"{_SSC}LinearTransformation":
                if start.type != "Real":
                    raise FmuError(f"{here}: a LinearTransformation on {_a(start.type)} connection; it applies to "
                                   "Real connections only (SSC 1.0). Remove it.")
                linear = Transformation(*_finite(child, "factor", 1.0, f"{here}: LinearTransformation"))
            elif child.tag.startswith(_SSC) and child.tag.endswith("MappingTransformation"):
                raise _refuse_element(here, child)
        if item.get("suppressUnitConversion", "false") in ("true", "1") or start.type != "Real":
            return linear
        # Units first, then the linear transformation (SSC 1.0, LinearTransformation).
        return self._conversion(start, end, here).then(linear)

    # -- parameter bindings --------------------------------------------------------------

    def _bindings(self, element, component: str | None, where: str) -> list[ParameterValue]:
        """The values of ``element``'s bindings, later ones after earlier ones."""
        values: list[ParameterValue] = []
        for binding in element.iterfind("ssd:ParameterBindings/ssd:ParameterBinding", _NS):
            source, prefix = binding.get("source"), binding.get("prefix", "")
            here = f"{where}, parameter binding{f' {excerpt(source, 60)}' if source else ''}"
            mapping = binding.find("ssd:ParameterMapping", _NS)
            if mapping is not None:
                raise _refuse_element(here, mapping)
            if binding.get("type", _PARAMETER_SET_TYPE) != _PARAMETER_SET_TYPE:
                raise FmuError(f"{here}: type {excerpt(binding.get('type'), 60)}; only SSV parameter sets "
                               f"({_PARAMETER_SET_TYPE}) are supported.")
            inline = binding.find("ssd:ParameterValues", _NS)
            if source is not None:
                if inline is not None:
                    raise FmuError(f"{here}: has both a source and inline ParameterValues; give one of them (SSP "
                                   "1.0, 5.3.5).")
                if binding.get("sourceBase", "SSD") != "SSD":
                    raise FmuError(f"{here}: sourceBase=\"component\" (a parameter file inside the FMU) is not "
                                   "supported; put the SSV file beside the SSD.")
                file = _local_source(self.base, source, here)
                parameter_set = _parse_xml(here, _read_limited(file, here), "SystemStructureParameterValues.xsd",
                                           f"{_SSV}ParameterSet")
            elif inline is not None:
                sets = list(inline)
                if len(sets) != 1 or sets[0].tag != f"{_SSV}ParameterSet":
                    raise FmuError(f"{here}: inline ParameterValues must hold one ssv:ParameterSet (SSP 1.0, 5.3.5).")
                parameter_set = _validated(here, etree.fromstring(etree.tostring(sets[0])),
                                           "SystemStructureParameterValues.xsd", f"{_SSV}ParameterSet")
            else:
                continue
            values += self._parameter_values(parameter_set, prefix, component, here)
        return values

    def _parameter_values(self, parameter_set, prefix: str, component: str | None,
                          here: str) -> list[ParameterValue]:
        values = []
        for parameter in parameter_set.iterfind("ssv:Parameters/ssv:Parameter", _NS):
            name = prefix + parameter.get("name")
            shown = excerpt(name, 60)
            owner, variable_name = component, name
            if owner is None:  # a system binding: hierarchical names COMPONENT.VARIABLE (5.3.5)
                owner, dot, variable_name = name.partition(".")
                if not dot or owner not in self.archives:
                    raise FmuError(f"{here}: the parameter {shown} names no component's variable; at system level "
                                   "a name is COMPONENT.VARIABLE (components: "
                                   f"{_short(', '.join(self.archives), 200)}). Fix the name or its prefix.")
            typed = parameter[0]
            values.append(ParameterValue(owner, variable_name,
                                         self._value(self.archives[owner], variable_name, typed,
                                                     f"{here}, parameter {shown}")))
        return values

    @staticmethod
    def _value(archive: FmuArchive, name: str, typed, here: str) -> float | int | bool:
        """The value of an ``ssv:Real``/``Integer``/``Boolean``, checked against the FMU variable."""
        type_name, shown = _local(typed), excerpt(name, 60)
        if type_name not in CONNECTOR_TYPES:
            raise FmuError(f"{here}: {_a(type_name)} value; only Real, Integer and Boolean parameter values are "
                           "supported. Remove it.")
        variable = archive.variables.get(name)
        if variable is None:
            try:
                variable = declared_variable(archive, name)
            except FmuError:
                raise FmuError(f"{here}: the FMU {archive.path.name} has no variable {shown}; fix the name (or the "
                               "binding's prefix).") from None
        if variable.causality in ("independent", "calculatedParameter") or variable.variability == "constant":
            raise FmuError(f"{here}: the FMU variable {shown} ({variable.causality}, {variable.variability}) "
                           "cannot be set; remove the value.")
        kinds = _TYPE_KINDS.get(type_name)
        fits = variable.kind in kinds if kinds is not None else (
            variable.kind not in FLOAT_KINDS and variable.kind not in ("boolean", "string", "binary", "clock"))
        if not fits:
            raise FmuError(f"{here}: {_a(type_name)} value for the FMU variable {shown} of type {variable.type}; "
                           "give a value of the variable's type.")
        text = typed.get("value")
        if type_name == "Real":
            unit = typed.get("unit")
            if unit and variable.unit and unit != variable.unit:
                given, wanted = excerpt(unit, 60), excerpt(variable.unit, 60)
                raise FmuError(f"{here}: the value is in {given}, the FMU variable {shown} in {wanted}; "
                               f"give the value in {wanted} (parameter unit conversion is not supported).")
            value = float(text)
            if not math.isfinite(value):
                raise FmuError(f"{here}: the value {excerpt(text, 60)} is not a finite number; give one.")
            return value
        if type_name == "Boolean":
            return text in ("true", "1")
        return int(text)


def _role(endpoint: Endpoint, connector: Connector) -> str:
    owner = "a component" if endpoint.element is not None else "a system"
    return f"{owner} {connector.kind} ({_short(endpoint.label())})"


def _a(word: str) -> str:
    """``word`` with its indefinite article ("an Integer", "a Real")."""
    return f"{'an' if word[:1] in 'AEIOU' else 'a'} {word}"


def _short(text: str, limit: int = 80) -> str:
    """``text`` (a name from the SSD) capped for a message, without quotes."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _finite(element, first: str, default: float, where: str) -> tuple[float, float]:
    """(``first``, ``offset``) attributes of a BaseUnit or LinearTransformation as finite floats
    (schema-validated doubles, which may still be INF or NaN)."""
    values = (float(element.get(first, str(default))), float(element.get("offset", "0")))
    if not all(math.isfinite(v) for v in values):
        raise FmuError(f"{where}: {first}={excerpt(element.get(first))}, offset={excerpt(element.get('offset'))}: "
                       "not finite numbers; give finite ones.")
    return values
