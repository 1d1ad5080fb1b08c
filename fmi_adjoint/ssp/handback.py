"""The hand-back of a system's identification (``fmi-adjoint apply RESULT.json --system
SYSTEM.ssp -o IDENTIFIED.ssp``, issue 28): a copy of the SSP archive whose parameter bindings
(SSP 1.0, 5.3.5, and its SSV files) bind every identified ``COMPONENT.NAME`` to its value.

Where the values go, for each ``COMPONENT.NAME`` of the RESULT.json (its identified parameters
and the ``--set`` values the identification ran with, as for an FMU's hand-back):

* **bound already** (by a component-level binding of COMPONENT, or a system-level one naming
  ``COMPONENT.NAME`` after its ``prefix``; inline ``ParameterValues`` or an ``.ssv`` file):
  the value is replaced in every binding that binds it, so nothing holds the old value.  An
  ``.ssv`` file that two bindings share (e.g. one parameter set bound to two components) is
  left as it is, because changing it would change the other component too: if it holds the
  binding the reader applies (the last system-level one, else the last component-level one,
  5.3.5), a binding that overrides it is added after it at the same level (system-level with
  ``prefix="COMPONENT."``);
* **not bound**: a new ``.ssv`` file per component (``resources/<set>_<COMPONENT>.ssv``,
  :func:`~fmi_adjoint.fmu.ssv.write_ssv`: names as the FMU's variables, no ``prefix``) and a
  ``ParameterBinding`` appended to the component's ``ParameterBindings``.

Everything else is copied unchanged: every other entry of the archive byte for byte (the FMUs
too), with its name, time stamp and compression; the SSD itself where no inline value or
binding was added to it.  Changed documents are validated against the SSP 1.0 schemas, and the
written archive is read back (:func:`~.reading.open_system`) and must bind every value before
it is moved into place: no half-written or wrong output.

An ``.ssd`` file (with its FMUs and ``.ssv`` files beside it) is handed back as a complete
``.ssp`` archive: its ``SystemStructure.ssd`` and the files its ``source`` attributes name, at
those relative paths.  Writing an ``.ssd`` instead would write two or more files (the SSD and
new ``.ssv`` files) into the folder of the input, not together or not at all, and a copy of the
SSD elsewhere would lose its FMUs.

The RESULT.json must be of the system: ``identify --ssp`` records the digest of the SSD without
its bindings (:func:`~.reading.structure_digest`) and each component FMU's ``guid`` /
``instantiationToken`` (:func:`~.structure.system_identity`), and :func:`check_result_system` refuses a
result of another system.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

from lxml import etree

from ..errors import FmuError
from ..files import read_regular
from ..fmu.apply import staged_outputs
from ..fmu.archive import check_zip_entries, parse_xml
from ..fmu.ssp import SSD_NAMESPACE, ssp_schema
from ..fmu.ssv import SSV_NAMESPACE, write_ssv
from ..fmu.start_values import check_parameters, start_text
from ..fmu.variables import declared_variable
from ..identify.result_file import read_result
from ..text import excerpt
from .reading import SSD_FILE, SystemArchive, open_system
from .structure import SystemStructure, system_identity

__all__ = ["SystemHandBack", "check_result_system", "hand_back_system", "result_subject"]

_SSD = f"{{{SSD_NAMESPACE}}}"
_NS = {"ssd": SSD_NAMESPACE, "ssv": SSV_NAMESPACE}
#: The largest SSD or SSV document read back here (as the reader's limit).
_MAX_XML_BYTES = 64 * 1024**2


def result_subject(path) -> tuple[str, str | None]:
    """What the RESULT.json at ``path`` identified: ("fmu", its FMU), ("system", its system) or
    ("model", its model file), as recorded by ``identify``."""
    payload = read_result(Path(path))
    record = payload if isinstance(payload, dict) else {}
    for key in ("fmu", "system"):
        if isinstance(record.get(key), str):
            return key, record[key]
    model = record.get("model")
    return "model", model if isinstance(model, str) else None


def check_result_system(path, system: SystemArchive) -> str | None:
    """Whether the RESULT.json at ``path`` was identified on ``system``: FmuError if it records
    another system (other components, another FMU in a component, another structure); a note
    if it records none (written before the identity was recorded); else None."""
    path = Path(path)
    payload = read_result(path)
    record = payload.get("system_identity") if isinstance(payload, dict) else None
    structure = system.structure
    if not isinstance(record, dict):
        return (f"{path} records no identity of its system (written by an older fmi-adjoint); make sure --system is "
                "the system the identification ran on.")
    fix = "give --system the system the identification ran on."
    ours = system_identity(structure, system.archives)
    theirs = record.get("components")
    if not isinstance(theirs, dict) or sorted(map(str, theirs)) != sorted(ours["components"]):
        listed = ", ".join(map(str, theirs)) if isinstance(theirs, dict) else "none recorded"
        raise FmuError(f"{path} was identified on a system of the components {excerpt(listed, 120)}, but "
                       f"{structure.source} has {', '.join(ours['components'])}; {fix}")
    for name, token in ours["components"].items():
        if theirs[name] != token:
            raise FmuError(f"{path} was identified with another FMU as component {excerpt(name, 60)} (token "
                           f"{excerpt(theirs[name], 60)}; {structure.source} has {excerpt(token, 60)}): the values "
                           f"belong to another model; {fix}")
    if record.get("structure_sha256") != ours["structure_sha256"]:
        raise FmuError(f"{path} was identified on another system structure than {structure.source} (its connectors, "
                       "connections, units or experiment differ; only parameter bindings may); the values belong to "
                       f"another system: {fix}")
    return None


@dataclasses.dataclass(frozen=True)
class SystemHandBack:
    """What :func:`hand_back_system` wrote.

    Attributes
    ----------
    path : Path
        The ``.ssp`` archive written.
    updated : tuple of (str, str)
        ``(COMPONENT.NAME, where)`` of each value replaced in an existing binding.
    added : tuple of (str, str)
        ``(COMPONENT.NAME, file)`` of each value bound by a new binding to a new ``.ssv`` file.
    notes : tuple of str
        One line each (without the ``fmi-adjoint: note:`` prefix).
    """

    path: Path
    updated: tuple[tuple[str, str], ...]
    added: tuple[tuple[str, str], ...]
    notes: tuple[str, ...] = ()


#: fmpy 0.3's ``simulate_ssp`` reads the bindings (``read_ssd``) but sets only the
#: ``parameter_set`` it is passed (checked in tests/test_ssp_apply.py).
FMPY_NOTE = ("fmpy's SSP simulation (fmpy.ssp.simulation.simulate_ssp, fmpy 0.3) does not apply an SSD's parameter "
             "bindings: it runs the FMUs' own start values unless given parameter_set; `fmi-adjoint simulate --ssp` "
             "and `validate --ssp` apply them.")


@dataclasses.dataclass
class _Document:
    """An SSV file of the system, parsed to be edited."""

    path: Path
    data: bytes
    root: etree._Element
    references: int = 0
    changed: bool = False


@dataclasses.dataclass
class _Binding:
    """One ParameterBinding: its level (a component's name, or None for the system's), its
    document (None: inline in the SSD) and its ``(component, variable) -> [ssv:Parameter]``."""

    level: str | None
    label: str
    document: _Document | None
    parameters: dict[tuple[str, str], list[etree._Element]]

    @property
    def shared(self) -> bool:
        return self.document is not None and self.document.references > 1


class _Editor:
    """The SSD and its SSV files of one system, as edited by :func:`hand_back_system`."""

    def __init__(self, system: SystemArchive, base: Path, ssd_file: Path):
        self.system, self.base = system, base.resolve()
        self.ssd_file = ssd_file
        self.ssd_bytes = _read(ssd_file, str(ssd_file))
        self.root = parse_xml(self.ssd_bytes, str(ssd_file), "SSP", "it", "fix the file")
        self.ssd_changed = False
        self.documents: dict[Path, _Document] = {}
        self.bindings: list[_Binding] = []
        system_element = self.root.find("ssd:System", _NS)
        self.system_element = system_element
        self._read_bindings(system_element, None)
        for element in system_element.iterfind("ssd:Elements/ssd:Component", _NS):
            self._read_bindings(element, element.get("name"))
        for binding in self.bindings:
            if binding.document is not None:
                binding.document.references += 1

    def _read_bindings(self, element, level: str | None) -> None:
        components = {c.name for c in self.system.structure.components}
        for item in element.iterfind("ssd:ParameterBindings/ssd:ParameterBinding", _NS):
            source, prefix = item.get("source"), item.get("prefix", "")
            document = None
            if source is not None:
                path = (self.base / _entry_name(source)).resolve()
                if path not in self.documents:
                    data = _read(path, source)
                    self.documents[path] = _Document(path, data, parse_xml(data, source, "SSP", "it", "fix the file"))
                document = self.documents[path]
                parameter_set, label = document.root, _entry_name(source)
            else:
                parameter_set = item.find("ssd:ParameterValues/ssv:ParameterSet", _NS)
                where = "the system" if level is None else f"component {level}"
                label = f"the inline ParameterValues of {where} in the SSD"
            found: dict[tuple[str, str], list[etree._Element]] = {}
            listed = [] if parameter_set is None else parameter_set.iterfind("ssv:Parameters/ssv:Parameter", _NS)
            for parameter in listed:
                name = prefix + parameter.get("name", "")
                owner, variable = level, name
                if owner is None:
                    owner, _, variable = name.partition(".")
                if owner in components:
                    found.setdefault((owner, variable), []).append(parameter)
            self.bindings.append(_Binding(level, label, document, found))

    def bind(self, component: str, variable: str, text: str) -> tuple[str, str | None]:
        """Replace the value of ``component.variable`` in the bindings that bind it: ("updated",
        where), or ("component"/"system", None) when a new binding at that level must carry it."""
        key = (component, variable)
        system_level = [b for b in self.bindings if b.level is None and key in b.parameters]
        own_level = [b for b in self.bindings if b.level == component and key in b.parameters]
        # The binding the reader applies (5.3.5): the last system-level one, else the component's last.
        applied = (system_level or own_level)[-1] if system_level or own_level else None
        places = []
        for binding in system_level + own_level:
            if binding.shared:
                continue
            for parameter in binding.parameters[key]:
                typed = next(child for child in parameter if isinstance(child.tag, str))
                typed.set("value", text)
            if binding.document is None:
                self.ssd_changed = True
            else:
                binding.document.changed = True
            places.append(binding.label)
        if applied is None:
            return "component", None
        if applied.shared:
            return ("system" if applied.level is None else "component"), None
        return "updated", ", ".join(dict.fromkeys(places))

    def add_binding(self, level: str | None, component: str, source: str) -> None:
        """Append a ParameterBinding of ``source`` to the component (``level``) or, with the
        prefix ``COMPONENT.``, to the system (``level`` None), creating ParameterBindings in its
        place in the schema's sequence (after Connectors and ElementGeometry)."""
        if level is None:
            element = self.system_element
        else:
            element = next(e for e in self.system_element.iterfind("ssd:Elements/ssd:Component", _NS)
                           if e.get("name") == level)
        bindings = element.find("ssd:ParameterBindings", _NS)
        if bindings is None:
            before = [k for k, child in enumerate(element) if child.tag in (f"{_SSD}Connectors",
                                                                              f"{_SSD}ElementGeometry")]
            bindings = etree.Element(f"{_SSD}ParameterBindings")
            element.insert(before[-1] + 1 if before else 0, bindings)
        attributes = {"source": source} if level is not None else {"source": source, "prefix": f"{component}."}
        etree.SubElement(bindings, f"{_SSD}ParameterBinding", attributes)
        self.ssd_changed = True


def _read(path: Path, label: str) -> bytes:
    return read_regular(path, _MAX_XML_BYTES, f"the SSP document {label}", FmuError)


def _entry_name(source: str) -> str:
    """The relative path a ``source`` URI names (the reader checked it stays inside the folder)."""
    return "/".join(p for p in PurePosixPath(unquote(source).replace("\\", "/")).parts if p != ".")


def _serialized(root: etree._Element, original: bytes) -> bytes:
    """The edited document, with the original's XML declaration and final newline (an ASCII-
    compatible encoding; else lxml's own declaration)."""
    encoding = root.getroottree().docinfo.encoding or "UTF-8"
    head = re.match(rb"(\xef\xbb\xbf)?\s*<\?xml[^>]*\?>\s*", original)
    body = etree.tostring(root.getroottree(), encoding=encoding, xml_declaration=head is None and
                          original.lstrip().startswith(b"<?xml"))
    return (head.group(0) if head else b"") + body + (b"\n" if original.endswith(b"\n") else b"")


def _validate(root: etree._Element, schema: str, label: str) -> None:
    validator = ssp_schema(schema)
    if not validator.validate(root):
        problems = "; ".join(f"line {e.line}: {e.message}" for e in list(validator.error_log)[:3])
        raise FmuError(f"internal error: the edited {label} does not validate: {problems}")


def _split(structure: SystemStructure, name: str) -> tuple[str, str]:
    component, dot, variable = name.partition(".")
    if not dot or not variable:
        raise FmuError(f"the RESULT.json names the parameter {excerpt(name)}, not COMPONENT.NAME; give the RESULT.json "
                       "of `fmi-adjoint identify --ssp`.")
    structure.component(component)  # FmuError listing the components
    return component, variable


def _resource(name: str, taken: set[str]) -> str:
    """``resources/<name>.ssv`` (letters, digits, ``._-``), not colliding with ``taken``
    (compared without case)."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", name).strip("._") or "identified"
    entry, k = f"resources/{stem}.ssv", 1
    while entry.lower() in taken:
        k += 1
        entry = f"resources/{stem}_{k}.ssv"
    taken.add(entry.lower())
    return entry


def hand_back_system(system: SystemArchive, source, values: Mapping[str, float], output, *,
                     name: str = "identified") -> SystemHandBack:
    """Write the ``.ssp`` archive ``output``: the system ``system`` (opened from ``source``, an
    ``.ssp`` or ``.ssd`` file) with ``values`` (``COMPONENT.NAME``) bound (module docstring).

    ``name`` names the new ``.ssv`` files and their parameter sets (``<name>_<COMPONENT>``).

    Raises
    ------
    FmuError
        A name that is no ``COMPONENT.NAME`` of a fixed or tunable numeric parameter of that
        component's FMU (or a value that does not fit its type), or an internal error (an edited
        document that does not validate, an archive that does not read back with the values).
    OutputFileError
        ``output`` cannot be written.
    """
    source, output = Path(source), Path(output)
    structure = system.structure
    by_component: dict[str, dict[str, float]] = {}
    for key, value in values.items():
        component, variable = _split(structure, key)
        by_component.setdefault(component, {})[variable] = value
    for component, own in by_component.items():
        try:
            check_parameters(system.archives[component], own)
        except FmuError as exc:
            raise FmuError(f"component {excerpt(component, 60)}: {exc}") from None
    packed = system.directory is None  # an .ssd: its files packed into a new archive
    base = source.parent if packed else system.directory
    assert base is not None
    editor = _Editor(system, base, source if packed else base / SSD_FILE)
    files = _archive_files(system, source, editor)
    taken = {entry.lower() for entry in files}
    updated: list[tuple[str, str]] = []
    new_sets: dict[tuple[str | None, str], dict[str, float]] = {}
    for key, value in values.items():  # in the RESULT.json's order
        component, variable = _split(structure, key)
        text = start_text(declared_variable(system.archives[component], variable).kind, value)
        how, where = editor.bind(component, variable, text)
        if how == "updated":
            updated.append((key, str(where)))
        else:
            new_sets.setdefault((None if how == "system" else component, component), {})[variable] = value
    added: list[tuple[str, str]] = []
    stem = name if name and name.isprintable() else "identified"
    with tempfile.TemporaryDirectory(prefix="fmi_adjoint_handback_") as tmp:
        new_files: dict[str, Path] = {}
        for (level, component), own in new_sets.items():
            entry = _resource(f"{stem}_{component}", taken)
            new_files[entry] = write_ssv(system.archives[component], own, Path(tmp) / f"{len(new_files)}.ssv",
                                         name=f"{stem}_{component}")
            editor.add_binding(level, component, entry)
            added += [(f"{component}.{variable}", entry) for variable in own]
        changed: dict[Path, bytes] = {}
        for document in editor.documents.values():
            if document.changed:
                _validate(document.root, "SystemStructureParameterValues.xsd", str(document.path.name))
                changed[document.path] = _serialized(document.root, document.data)
        if editor.ssd_changed or packed:
            if editor.ssd_changed:
                _validate(editor.root, "SystemStructureDescription.xsd", SSD_FILE)
            changed[editor.ssd_file.resolve()] = (_serialized(editor.root, editor.ssd_bytes) if editor.ssd_changed
                                                  else editor.ssd_bytes)
        with staged_outputs({"ssp": output}) as staged:
            _write_archive(staged["ssp"], files, changed, new_files)
            _check_written(staged["ssp"], structure, values, source)
    return SystemHandBack(output, tuple(updated), tuple(added), (FMPY_NOTE,))


def _archive_files(system: SystemArchive, source: Path, editor: _Editor) -> dict[str, tuple[zipfile.ZipInfo, Path]]:
    """Entry name -> (its zip header, the file holding its bytes): the entries of an ``.ssp``
    (checked again as the reader does; their bytes from the reader's extraction), or for an
    ``.ssd`` the SSD and the files its sources name."""
    if system.directory is not None:
        base = system.directory.resolve()
        with zipfile.ZipFile(source) as archive:
            return {entry.name: (info, base / entry.name) for info, entry in check_zip_entries(source, archive,
                                                                                               "SSP archive")}
    header = zipfile.ZipInfo.from_file(source, SSD_FILE)
    header.compress_type = zipfile.ZIP_DEFLATED
    files = {SSD_FILE: (header, source)}
    sources = [c.source for c in system.structure.components]
    sources += [e.get("source") for e in editor.root.iter(f"{_SSD}ParameterBinding") if e.get("source")]
    for text in sources:
        entry = _entry_name(text)
        path = (editor.base / entry).resolve()
        info = zipfile.ZipInfo.from_file(path, entry)
        info.compress_type = zipfile.ZIP_STORED if entry.lower().endswith(".fmu") else zipfile.ZIP_DEFLATED
        files.setdefault(entry, (info, path))
    return files


def _write_archive(target: Path, files: Mapping[str, tuple[zipfile.ZipInfo, Path]], changed: Mapping[Path, bytes],
                   new_files: Mapping[str, Path]) -> None:
    """The archive: every entry with its header (name, time, compression, attributes) and its
    bytes, or the new bytes of a changed document; then the new ``.ssv`` files."""
    with zipfile.ZipFile(target, "w") as archive:
        for info, path in files.values():
            header = zipfile.ZipInfo(info.filename, info.date_time)
            header.compress_type, header.external_attr = info.compress_type, info.external_attr
            header.comment, header.create_system = info.comment, info.create_system
            if info.is_dir():
                archive.writestr(header, b"")
                continue
            data = changed.get(path.resolve())
            if data is None:
                large = path.stat().st_size >= zipfile.ZIP64_LIMIT
                with open(path, "rb") as handle, archive.open(header, "w", force_zip64=large) as stream:
                    while chunk := handle.read(1 << 20):
                        stream.write(chunk)
            else:
                archive.writestr(header, data)
        for entry, path in new_files.items():
            archive.write(path, entry, compress_type=zipfile.ZIP_DEFLATED)


def _check_written(path: Path, structure: SystemStructure, values: Mapping[str, float], source: Path) -> None:
    """The written archive read back: same structure digest, every value bound (exactly as
    the value the FMU would be set to)."""
    with open_system(path) as written:
        if written.structure.digest != structure.digest:
            raise FmuError(f"internal error: the archive written from {source} is another system structure.")
        bound = {f"{p.component}.{p.name}": p.value for p in written.structure.parameters}
        wrong = [key for key, value in values.items() if key not in bound or float(bound[key]) != float(value)]
        if wrong:
            raise FmuError(f"internal error: the archive written from {source} does not bind {', '.join(wrong)} to "
                           "the identified values.")
