"""Opening an FMU safely: zip checks, extraction into a private folder, XML checks.

An FMU is untrusted input.  Before anything is extracted, every zip entry name is
normalized (backslashes to slashes, ``./`` and ``//`` removed) and refused if it is
absolute, holds ``..``, is empty, or carries NUL or control characters; two entries that
name the same file (also after case folding and Unicode NFC, as on case-insensitive or
normalizing file systems), or a file that another entry uses as a folder, are refused too,
because one would silently replace the other on extraction.  Links and encrypted entries
are refused.  Every entry is then streamed out with running limits (per entry, in total,
and on the compression ratio): the sizes in the zip headers are never trusted, since a
zip bomb lies about them.

``modelDescription.xml`` is checked *after* extraction, from the extracted file, and
fmpy reads that same file: the bytes checked are the bytes used.  It is parsed without a
DTD (FMI model descriptions never need one, so a DOCTYPE or ENTITY declaration, the
vehicle of external-entity attacks, is refused) and validated against the FMI schema
shipped with fmpy; the binary for this platform must be present.  The extraction folder
is private (``tempfile``) and :meth:`FmuArchive.close` removes it; nothing is written
anywhere else.

An FMU exported by fmi-adjoint carries its model (``resources/model.toml``) and export
settings (``resources/export.json``).  The embedded model replaces the binary (for exact
adjoint gradients) only when the binary provably is that model: see
:attr:`FmuArchive.native`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import posixpath
import re
import stat
import tempfile
import unicodedata
import zipfile
import zlib
from pathlib import Path
from typing import TypeVar

from lxml import etree

from ..errors import FmiAdjointError, FmuError
from ..text import excerpt
from .variables import MAX_ARRAY_ELEMENTS, FmuVariable, array_shapes, count_error, kind_of, parse_start

__all__ = ["FmuError", "FmuVariable", "FmuArchive", "ArchiveEntry", "open_fmu", "PLATFORM_DIRS", "MAX_EVENT_INDICATORS",
           "MAX_CONTINUOUS_STATES", "MAX_VARIABLES", "MAX_ARRAY_ELEMENTS", "check_zip_entries", "count_error",
           "extract_zip_entry", "parse_description", "parse_xml", "schema_problems"]

#: Binary folder of this platform, per FMI major version.
PLATFORM_DIRS = {2: "linux64", 3: "x86_64-linux"}

_MAX_ENTRIES = 20_000
_MAX_ENTRY_BYTES = 1024**3
_MAX_TOTAL_BYTES = 2 * 1024**3
_MAX_XML_BYTES = 64 * 1024**2
#: Unpacked/packed size above which an entry is taken for a zip bomb.  Deflate reaches at
#: most ~1030:1 (runs of one byte); real FMU entries (XML, C, shared libraries) stay well
#: below 100:1.  Applied once an entry has unpacked more than _RATIO_FLOOR bytes, so small
#: highly regular files are never refused.
_MAX_RATIO = 100
_RATIO_FLOOR = 8 * 1024**2
_CHUNK = 1024**2
#: Largest counts accepted from a model description (issue 31, finding 4).  Buffers are
#: allocated from them (``fmi2GetEventIndicators`` of ``numberOfEventIndicators`` doubles,
#: fmpy's solver vectors, the names of array elements) before any FMI call could tell that
#: they are wrong, so they are bounded before fmpy or the worker reads them.  The limits are
#: far above the largest published FMUs (thousands of states, tens of thousands of event
#: indicators) and keep one buffer at a few MB: 100 000 doubles are 0.8 MB.
MAX_EVENT_INDICATORS = 100_000
MAX_CONTINUOUS_STATES = 100_000
#: Declared variables (a 64 MiB modelDescription.xml holds at most ~1 M anyway).
MAX_VARIABLES = 1_000_000
#: (MAX_ARRAY_ELEMENTS, the elements of FMI 3 arrays, is bounded where arrays are read: :mod:`.variables`.)
#: Unicode categories refused in entry names: control, format (bidi overrides, zero-width
#: characters), surrogates, private use, line and paragraph separators.
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})


@dataclasses.dataclass(frozen=True)
class ArchiveEntry:
    """One checked zip entry, as extracted.

    Attributes
    ----------
    name : str
        The normalized relative path (``/``-separated, no ``.``, ``..`` or empty parts): the
        file ``FmuArchive.directory / name``.
    raw : str
        The name as stored in the archive (for messages).
    is_dir : bool
    date_time : tuple of int
        The zip timestamp, kept so that a rewritten FMU keeps it.
    compress_type : int
        The zip compression method.
    external_attr : int
        The zip file attributes (permissions; links are refused).
    create_system, create_version, extract_version : int
        The system and zip versions that made the entry: ``external_attr`` means Unix
        permissions only with ``create_system`` 3, a Windows-made entry (0) carries DOS
        attributes, which an unzip that took them for a Unix mode would extract unreadable.
    extra, comment : bytes
        The entry's extra field (without the ZIP64 record, which the writer makes anew) and
        comment.
    """

    name: str
    raw: str
    is_dir: bool
    date_time: tuple
    compress_type: int
    external_attr: int
    create_system: int = 3
    create_version: int = 20
    extract_version: int = 20
    extra: bytes = b""
    comment: bytes = b""


_Default = TypeVar("_Default", float, None)


def _float(text, default: _Default) -> float | _Default:
    if text is None:
        return default
    try:
        return float(text)
    except (TypeError, ValueError):
        return default


def _finite_number(value: object) -> bool:
    """A JSON number that is a finite float (a 400-digit integer is none: float() overflows)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _normalized_name(path: Path, raw: str, what: str = "FMU") -> tuple[str, bool]:
    """The normalized path of the entry named ``raw`` and whether it is a folder (FmuError
    for names that are absolute, leave the folder, are empty or carry control characters)."""
    if "\x00" in raw:
        raise FmuError(f"{path}: the archive entry {raw.split(chr(0))[0]!r} has a NUL character in its name "
                       f"(a trick to hide the real name); the {what} is refused. Obtain a clean {what} from its "
                       "author.")
    if any(unicodedata.category(ch) in _BAD_CATEGORIES for ch in raw):
        raise FmuError(f"{path}: the archive entry {raw!r} has control or invisible characters in its name; the "
                       f"{what} is refused. Obtain a clean {what} from its author.")
    slashed = raw.replace("\\", "/")
    if slashed.startswith("/") or re.match(r"^[A-Za-z]:", slashed) or ".." in slashed.split("/"):
        raise FmuError(
            f"{path}: the archive entry {raw!r} points outside the {what} folder (path traversal); "
            f"the {what} is refused. Obtain a clean {what} from its author."
        )
    name = posixpath.normpath(slashed) if slashed else ""
    if name in ("", "."):
        raise FmuError(f"{path}: the archive has an entry with an empty name ({raw!r}); the {what} is refused. "
                       f"Obtain a clean {what} from its author.")
    return name, slashed.endswith("/")


def _collision_key(name: str) -> str:
    """The file a name denotes on the most forgiving file system: case-insensitive,
    Unicode-normalizing, ignoring trailing dots and spaces of each part (Windows)."""
    folded = unicodedata.normalize("NFC", unicodedata.normalize("NFC", name).casefold())
    return "/".join(part.rstrip(" .") for part in folded.split("/"))


def check_zip_entries(path: Path, archive: zipfile.ZipFile, what: str = "FMU"
                      ) -> list[tuple[zipfile.ZipInfo, ArchiveEntry]]:
    """Every entry with its normalized name, or FmuError for the first unsafe one.

    The header sizes are checked here as a first, cheap filter; extraction counts the
    bytes it really unpacks (:func:`extract_zip_entry`), because the headers may lie.  ``what``
    names the archive in messages (an FMU, an SSP archive).
    """
    infos = archive.infolist()
    if len(infos) > _MAX_ENTRIES:
        raise FmuError(f"{path}: the archive has {len(infos)} entries (limit {_MAX_ENTRIES}); this is not a normal "
                       f"{what}.")
    checked: list[tuple[zipfile.ZipInfo, ArchiveEntry]] = []
    seen: dict[str, str] = {}
    files: dict[str, str] = {}
    folders: set[str] = set()
    total = 0
    for info in infos:
        raw = info.orig_filename
        name, is_dir = _normalized_name(path, raw, what)
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise FmuError(f"{path}: the archive entry {raw!r} is a symbolic link; the {what} is refused.")
        if info.flag_bits & 0x1:
            raise FmuError(f"{path}: the archive entry {raw!r} is encrypted; an {what} must not be. Obtain an "
                           f"unencrypted {what}.")
        key = _collision_key(name)
        if key in seen:
            raise FmuError(
                f"{path}: the archive entries {seen[key]!r} and {raw!r} extract to the same file (one would "
                f"replace the other); the {what} is refused. Obtain a clean {what} from its author."
            )
        seen[key] = raw
        if is_dir:
            folders.add(key)
        else:
            files[key] = raw
            _check_size(path, raw, info.file_size, info.compress_size, what)
            if name == "modelDescription.xml" and info.file_size > _MAX_XML_BYTES:
                raise _xml_size_error(path)
            total += info.file_size
            if total > _MAX_TOTAL_BYTES:
                raise _total_error(path, what)
        parts = key.split("/")
        folders.update("/".join(parts[:k]) for k in range(1, len(parts)))
        checked.append((info, ArchiveEntry(name=name, raw=raw, is_dir=is_dir, date_time=tuple(info.date_time),
                                           compress_type=info.compress_type, external_attr=info.external_attr,
                                           create_system=info.create_system, create_version=info.create_version,
                                           extract_version=info.extract_version,
                                           extra=_without_zip64(info.extra), comment=info.comment)))
    clashes = sorted(folders.intersection(files))
    if clashes:
        raise FmuError(
            f"{path}: the archive entry {files[clashes[0]]!r} is a file, but other entries use it as a folder; the "
            f"{what} is refused. Obtain a clean {what} from its author."
        )
    return checked


def _without_zip64(extra: bytes) -> bytes:
    """A zip extra field without its ZIP64 record (header id 1): sizes and offsets of the
    original archive, which a rewritten entry must not carry.  A malformed field is dropped."""
    out, k = [], 0
    while k + 4 <= len(extra):
        header, size = int.from_bytes(extra[k:k + 2], "little"), int.from_bytes(extra[k + 2:k + 4], "little")
        if k + 4 + size > len(extra):
            return b""
        if header != 1:
            out.append(extra[k:k + 4 + size])
        k += 4 + size
    return b"".join(out) if k == len(extra) else b""


def _check_size(path: Path, raw: str, size: int, packed: int, what: str = "FMU") -> None:
    """FmuError if an entry that unpacked (so far) to ``size`` bytes from ``packed`` is too
    large or too strongly compressed."""
    if size > _MAX_ENTRY_BYTES:
        raise FmuError(f"{path}: the archive entry {raw!r} unpacks to more than {_MAX_ENTRY_BYTES / 1024**2:g} MiB "
                       f"(limit per entry); the {what} is refused.")
    if size > _RATIO_FLOOR and size > _MAX_RATIO * max(packed, 1):
        raise FmuError(f"{path}: the archive entry {raw!r} unpacks to more than {_MAX_RATIO} times its packed size "
                       f"({packed} bytes), as a zip bomb does; the {what} is refused.")


def _xml_size_error(path: Path) -> FmuError:
    return FmuError(f"{path}: modelDescription.xml is larger than {_MAX_XML_BYTES // 1024**2} MiB; the FMU is refused.")


def _total_error(path: Path, what: str = "FMU") -> FmuError:
    return FmuError(f"{path}: the archive unpacks to more than {_MAX_TOTAL_BYTES / 1024**2:g} MiB in total; the {what} "
                    "is refused.")


def parse_xml(data: bytes, label: str, standard: str, refused: str, fix: str) -> etree._Element:
    """Parse an XML document of a standard that never uses DTDs (FMI, SSP) without DTDs,
    entities or network: a DOCTYPE or ENTITY is refused before parsing and again after it (the
    parser's own view), malformed XML named.  ``label`` names the document, ``refused`` what is
    refused (``the FMU``), ``fix`` how to get a good one, in the FmuError's text."""
    if re.search(rb"<!\s*(DOCTYPE|ENTITY)", data, re.IGNORECASE):
        raise FmuError(f"{label} declares a DOCTYPE or ENTITY (external entities are an attack vector and "
                       f"{standard} never uses them); {refused} is refused. Remove the declaration.")
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        raise FmuError(f"{label} is malformed XML ({exc}); {fix}.") from None
    docinfo = root.getroottree().docinfo
    if docinfo.doctype or docinfo.internalDTD is not None:
        raise FmuError(f"{label} declares a DOCTYPE (external entities are an attack vector and {standard} never "
                       f"uses them); {refused} is refused. Remove the declaration.")
    return root


def parse_description(path: Path, data: bytes) -> etree._Element:
    """Parse modelDescription.xml without DTDs or entities (FmuError naming the problem)."""
    if len(data) > _MAX_XML_BYTES:
        raise _xml_size_error(path)
    root = parse_xml(data, f"{path}: modelDescription.xml", "FMI", "the FMU", "fix or re-export the FMU")
    docinfo = root.getroottree().docinfo
    if (docinfo.encoding or "UTF-8").upper().replace("_", "-") not in ("UTF-8", "UTF8"):
        raise FmuError(f"{path}: modelDescription.xml is encoded as {docinfo.encoding}; FMI requires UTF-8.")
    if root.tag != "fmiModelDescription":
        raise FmuError(f"{path}: the root element of modelDescription.xml is <{root.tag}>, not <fmiModelDescription>.")
    return root


def schema_problems(root: etree._Element, version: int) -> list[str]:
    import fmpy

    schema = Path(fmpy.__file__).resolve().parent / "schema" / f"fmi{version}" / f"fmi{version}ModelDescription.xsd"
    validator = etree.XMLSchema(etree.parse(str(schema)))
    return [] if validator.validate(root) else [f"line {e.line}: {e.message}" for e in validator.error_log][:5]



def _canonical_description(root: etree._Element) -> bytes:
    """Canonical XML of a model description without start values, generation date and
    formatting whitespace (what must agree between an exported FMU and its embedded model)."""
    copy = etree.fromstring(etree.tostring(root))
    copy.attrib.pop("generationDateAndTime", None)
    for element in copy.iter():
        element.attrib.pop("start", None)
        if element.text is not None and not element.text.strip():
            element.text = None
        if element.tail is not None and not element.tail.strip():
            element.tail = None
    return etree.tostring(copy, method="c14n")

class FmuArchive:
    """An FMU extracted into a private temporary folder, with its model description.

    Use :func:`open_fmu`; close it (or use it as a context manager) to remove the folder.

    Attributes
    ----------
    path : pathlib.Path
        The ``.fmu`` file.
    directory : pathlib.Path
        The extraction folder (temporary).
    fmi_version : {2, 3}
    description : fmpy.model_description.ModelDescription
    variables : dict of str to FmuVariable
    model_exchange, co_simulation : bool
        Interfaces with a binary for this platform.
    provides_directional_derivatives, can_get_and_set_state : bool
        Of the Model Exchange interface (read from the XML).
    entries : tuple of ArchiveEntry
        The checked entries, in archive order, as extracted into ``directory``.
    native : dict or None
        The export settings of an FMU exported by fmi-adjoint whose binary is its embedded
        model (checked on first use; see the property).
    native_distrust : str or None
        Why an FMU that presents itself as exported by fmi-adjoint is not trusted.
    """

    def __init__(self, path: Path, directory: Path, root: etree._Element, description, tmp,
                 entries: tuple[ArchiveEntry, ...]):
        self.path = path
        self.directory = directory
        self._tmp = tmp
        self.entries = tuple(entries)
        self.root = root
        self.description = description
        self.fmi_version = 3 if description.fmiVersion.startswith("3") else 2
        shapes = array_shapes(root, path) if self.fmi_version == 3 else {}
        self.variables = {}
        for v in description.modelVariables:
            kind, shape = kind_of(v.type, self.fmi_version), shapes.get(v.name, ())
            start, start_values = parse_start(v.start, kind, math.prod(shape) if shape else None)
            self.variables[v.name] = FmuVariable(
                name=v.name, valueReference=int(v.valueReference), causality=v.causality or "local",
                variability=v.variability or "continuous", type=v.type,
                start=start, nominal=_float(getattr(v, "nominal", None), None),
                unit=getattr(v, "unit", None) or "", min=_float(getattr(v, "min", None), -math.inf),
                max=_float(getattr(v, "max", None), math.inf), initial=getattr(v, "initial", None),
                kind=kind, shape=shape, start_values=start_values,
            )
        platform = PLATFORM_DIRS[self.fmi_version]
        for interface in (description.modelExchange, description.coSimulation):
            # It names the binary fmpy loads: "../x" would load a library outside the FMU.
            if interface is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", interface.modelIdentifier or ""):
                raise FmuError(f"{path}: modelIdentifier {interface.modelIdentifier!r} is not a C identifier (FMI "
                               "requires one; it names the binary); the FMU is refused. Obtain a clean FMU.")
        self.model_exchange = self._has_binary(description.modelExchange, platform)
        self.co_simulation = self._has_binary(description.coSimulation, platform)
        if not (self.model_exchange or self.co_simulation):
            found = sorted(p.name for p in (directory / "binaries").glob("*") if p.is_dir())
            raise FmuError(
                f"{path}: the FMU has no binary for this platform (binaries/{platform}/"
                f"<modelIdentifier>.so); it holds {', '.join(found) or 'no binaries at all'}. Export or "
                "compile the FMU for Linux x86-64 (e.g. `fmpy compile` if it ships sources)."
            )
        # Read from the XML: fmpy 0.3 keeps only the FMI 2 spelling of the flag.
        flag = "providesDirectionalDerivative" if self.fmi_version == 2 else "providesDirectionalDerivatives"
        element = root.find("ModelExchange")
        self.provides_directional_derivatives = bool(
            self.model_exchange and element is not None and element.get(flag, "false") in ("true", "1")
        )
        self.number_of_event_indicators = int(description.numberOfEventIndicators or 0)
        state_flag = "canGetAndSetFMUstate" if self.fmi_version == 2 else "canGetAndSetFMUState"
        #: The Model Exchange interface can save and restore its state (events on the sensitivity path).
        self.can_get_and_set_state = bool(
            self.model_exchange and element is not None and element.get(state_flag, "false") in ("true", "1")
        )

    @functools.cached_property
    def continuous_states(self) -> tuple[tuple[FmuVariable, FmuVariable, int], ...]:
        """Per declared derivative: (state, derivative, number of elements) — an FMI 3 array
        state counts its elements, as ``fmi3GetContinuousStates`` does."""
        out = []
        for derivative in self.description.derivatives:
            der = self.variables[derivative.variable.name]
            state = self.variables[derivative.variable.derivative.name]
            out.append((state, der, math.prod(state.shape) if state.shape else 1))
        return tuple(out)

    @property
    def n_states(self) -> int:
        """Number of continuous states (array elements counted)."""
        return sum(size for _, _, size in self.continuous_states)

    @property
    def scalar_states(self) -> bool:
        """Every state is a scalar, so each has a value reference of its own (directional
        derivatives address states one by one only then)."""
        return all(size == 1 and not state.shape for state, _, size in self.continuous_states)

    def _has_binary(self, interface, platform: str) -> bool:
        if interface is None:
            return False
        return (self.directory / "binaries" / platform / f"{interface.modelIdentifier}.so").is_file()

    @property
    def native(self) -> dict | None:
        """The export settings (``resources/export.json``) of an FMU exported by fmi-adjoint
        whose binary is provably its embedded model ``resources/model.toml``, else None.

        Identifying on the embedded model instead of the binary is only sound when the two
        are the same program.  Trusted only if (1) the model file and settings reproduce the
        instantiation token, (2) the binary's sha256 is the one recorded at export, and
        (3) building the embedded model with the recorded settings, as
        :func:`~fmi_adjoint.export.build_fmu_binary` does at export, gives that very
        binary (the build is deterministic).  (3) is needed because whoever replaces the
        binary can also edit ``export.json``.  Checked on first use (it costs one C build),
        so opening an FMU for ``apply`` or ``validate`` stays cheap.
        """
        return self._trust[0]

    @property
    def native_distrust(self) -> str | None:
        """Why an FMU presenting itself as exported by fmi-adjoint is not trusted (one
        line, for a note or an error), or None (trusted, or not such an FMU at all)."""
        return self._trust[1]

    @functools.cached_property
    def _trust(self) -> tuple[dict | None, str | None]:
        settings, reason = self._claimed_settings()
        if settings is None:
            return None, reason
        reason = self._binary_mismatch(settings)
        return (None, reason) if reason else (settings, None)

    def _claimed_settings(self) -> tuple[dict | None, str | None]:
        """The export settings if ``resources/`` claims an fmi-adjoint export and reproduces
        the instantiation token; else None and the reason (None if there is no such claim)."""
        from ..export import export_scheme, instantiation_token

        resources = self.directory / "resources"
        settings_file, model = resources / "export.json", resources / "model.toml"
        if not (settings_file.is_file() and model.is_file()):
            return None, None
        try:
            data = json.loads(settings_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError):
            return None, None
        if not isinstance(data, dict) or not str(data.get("generator", "")).startswith("fmi-adjoint"):
            return None, None
        broken = (None, "resources/model.toml and export.json do not reproduce the FMU's instantiation token, so "
                        "the embedded model is not the exported one")
        # The exporter derives the instantiation token from the model file and the export
        # settings; an FMU whose embedded model does not match its binary is not trusted.
        try:
            text = model.read_text(encoding="utf-8")
            values = data["values"] or None
            step, version = float(data["step"]), int(data["fmi_version"])
            solver = export_scheme(data)
        except (OSError, UnicodeDecodeError, KeyError, TypeError, ValueError, OverflowError, FmiAdjointError):
            return broken
        # Everything here may be forged consistently (the token too): the rebuild decides, and
        # it must get well-formed settings.
        if values is not None and not (isinstance(values, dict) and all(
                isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
                for k, v in values.items())):
            return broken
        if values is not None and not all(_finite_number(v) for v in values.values()):
            return None, ("resources/export.json records a parameter value that is not a finite number (a tampered "
                          "file), so the embedded model is not the exported one")
        token = self.description.guid or getattr(self.description, "instantiationToken", None)
        # export_fmu hashes the values it was given: None or a dict (stored as {} or the dict).
        for given in (values, {} if values is None else values):
            if token == instantiation_token(text, given, step, solver, version):
                return data, None
        return broken

    def _binary_mismatch(self, settings: dict) -> str | None:
        """None if the binary is the one the embedded model builds to, else why not.

        An export has one binary, named by the one ``modelIdentifier`` of every interface it
        declares (:func:`~fmi_adjoint.export.export_fmu`: Co-Simulation, Model Exchange or
        both, as ``export.json`` records in ``interface``; no record: Co-Simulation); the
        interfaces declared are checked with the rest of the model description.
        """
        from ..export import INTERFACES

        recorded_interface = settings.get("interface", "cs")
        if recorded_interface not in INTERFACES:
            return (f"resources/export.json records the interface {excerpt(str(recorded_interface), 40)}, which is "
                    f"none of {', '.join(INTERFACES)} (a tampered file)")
        declared = [i for i in (self.description.coSimulation, self.description.modelExchange) if i is not None]
        if len({i.modelIdentifier for i in declared}) > 1:
            return ("its Model Exchange and Co-Simulation interfaces name different binaries, while fmi-adjoint "
                    "exports one for both")
        if not declared or not (self.co_simulation or self.model_exchange):
            return "it has no binary for this platform"
        interface = declared[0]
        relative = f"binaries/{PLATFORM_DIRS[self.fmi_version]}/{interface.modelIdentifier}.so"
        recorded = settings.get("binary_sha256")
        if not isinstance(recorded, str):
            return "resources/export.json records no binary_sha256 (exported before binaries were checked)"
        with open(self.directory / relative, "rb") as handle:
            actual = hashlib.file_digest(handle, "sha256").hexdigest()
        if actual != recorded.lower():
            return f"the binary does not match the embedded model ({relative!r} is not the binary recorded at export)"
        from ..export import build_fmu_binary, export_scheme, export_storage, expected_description
        from ..errors import CompilerError
        from ..native import find_c_compiler

        try:
            find_c_compiler()
        except CompilerError:
            return ("the binary cannot be checked against the embedded model without a C compiler (install gcc "
                    "or set CC)")
        try:
            from ..model_file import load_model

            model = load_model(self.model_file).with_values(settings["values"] or {})
            with tempfile.TemporaryDirectory(prefix="fmi_adjoint_check_") as tmp:
                version, step = int(settings["fmi_version"]), float(settings["step"])
                binary, sources = build_fmu_binary(model, Path(tmp), fmi_version=version,
                                                   token=self.description.guid, step=step,
                                                   solver=export_scheme(settings), storage=export_storage(settings))
                with open(binary, "rb") as handle:
                    rebuilt = hashlib.file_digest(handle, "sha256").hexdigest()
                expected = expected_description(model, version, self.description.guid, step, sources,
                                                recorded_interface, Path(tmp) / "sources")
        except (FmiAdjointError, ImportError, OSError, KeyError, TypeError, ValueError, OverflowError) as exc:
            return f"the embedded model cannot be rebuilt to check the binary ({type(exc).__name__})"
        if rebuilt != actual:
            return (f"the binary does not match the embedded model (building resources/model.toml gives another "
                    f"{relative!r}: an edited binary or export.json, or another C compiler, fmi-adjoint, scipy or "
                    "pymetis version)")
        # The variables (names, value references, causalities, ...) are what the identification
        # addresses: the XML must be the one export writes, up to start values (which `apply`
        # changes on purpose) and the generation date.
        if _canonical_description(expected) != _canonical_description(self.root):
            return ("modelDescription.xml differs from the one exported for the embedded model in more than start "
                    "values (variables, value references, FMI version or interface)")
        return None

    @property
    def model_file(self) -> Path:
        """The embedded model file of an fmi-adjoint FMU."""
        return self.directory / "resources" / "model.toml"

    def variable(self, name: str, what: str = "variable") -> FmuVariable:
        """The variable ``name`` (FmuError listing the candidates if unknown)."""
        if name not in self.variables:
            kinds = {"parameter": ("parameter",), "input": ("input",), "output": ("output",)}.get(what)
            names = [v.name for v in self.variables.values() if kinds is None or v.causality in kinds]
            raise FmuError(
                f"{self.path.name}: no {what} named {name!r}. {what.capitalize()}s: {', '.join(names) or 'none'}."
            )
        return self.variables[name]

    def names(self, causality: str) -> list[str]:
        """Names of the real scalar variables with this causality (every numeric one, array
        elements included: :func:`.variables.numeric_names`)."""
        return [v.name for v in self.variables.values() if v.causality == causality and v.is_real]

    def close(self) -> None:
        """Remove the extraction folder."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> FmuArchive:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_fmu(path) -> FmuArchive:
    """Check and extract the FMU at ``path`` (see the module docstring).

    Raises
    ------
    FmuError
        Not a zip file, unsafe or colliding entries, entries too large or too strongly
        compressed, missing or malformed ``modelDescription.xml``, external entities, schema
        violations, or no binary for this platform.
    """
    path = Path(path)
    if not path.is_file():
        raise FmuError(f"{path}: file not found; give the path of an .fmu file.")
    if not zipfile.is_zipfile(path):
        raise FmuError(f"{path}: not a zip archive, so not an FMU; give an .fmu file.")
    tmp = tempfile.TemporaryDirectory(prefix="fmi_adjoint_fmu_")
    try:
        directory = Path(tmp.name)
        try:
            entries = _extract(path, directory)
        except FmuError:
            raise
        except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, RuntimeError, NotImplementedError, EOFError,
                OSError) as exc:
            raise FmuError(f"{path}: the archive cannot be extracted ({excerpt(str(exc), 160)}); obtain an intact "
                           "FMU.") from None
        # The checked bytes are the extracted file, and fmpy reads that same file.
        xml_file = directory / "modelDescription.xml"
        root = _check_description(path, xml_file.read_bytes())
        from fmpy import read_model_description

        try:
            description = read_model_description(str(xml_file), validate=False)
        except Exception as exc:  # fmpy raises bare Exceptions for inconsistent descriptions
            raise FmuError(f"{path}: fmpy cannot read the model description: {exc}") from None
        return FmuArchive(path, directory, root, description, tmp, entries)
    except BaseException:
        tmp.cleanup()
        raise


def _check_description(path: Path, data: bytes) -> etree._Element:
    """The parsed model description, checked for DTDs, FMI version and schema (FmuError)."""
    root = parse_description(path, data)
    version_text = root.get("fmiVersion", "")
    if not re.match(r"^(2\.0|3\.\d)", version_text):
        raise FmuError(f"{path}: fmiVersion {version_text!r} is not supported; FMI 2.0 and 3.x FMUs are.")
    version = 3 if version_text.startswith("3") else 2
    problems = schema_problems(root, version)
    if problems:
        raise FmuError(f"{path}: modelDescription.xml violates the FMI {version} schema: {'; '.join(problems)}.")
    # Before fmpy, which fails on unresolved dimensions without naming the variable; bounded there.
    shapes = array_shapes(root, path) if version == 3 else {}
    _check_counts(path, root, version, shapes)
    # FMI 2.0 and 3.0 require unique variable names; the XML schema cannot express that.
    seen: set[str] = set()
    for variable in root.iterfind("ModelVariables/*"):
        name = variable.get("name")
        if name in seen:
            raise FmuError(f"{path}: modelDescription.xml declares the variable {excerpt(name)} twice; variable "
                           "names must be unique (FMI). Obtain a corrected FMU from its author.")
        seen.add(name)
    return root


def _unsigned(text: str | None) -> int | None:
    """A whole number of at most 20 digits (the schema's unsignedInt/Long), else None."""
    if text is None or not re.fullmatch(r"\s*[0-9]{1,20}\s*", text):
        return None
    return int(text)


def _check_counts(path: Path, root: etree._Element, version: int, shapes: dict[str, tuple[int, ...]]) -> None:
    """FmuError for a count of the model description above its limit (:data:`MAX_EVENT_INDICATORS`,
    ...) or a state derivative of ``ModelStructure`` that is none, before fmpy or the worker
    allocates anything from them (issue 31, finding 4).

    FMI 2 declares ``numberOfEventIndicators`` as an attribute and lists the state
    derivatives in ``ModelStructure/Derivatives``; FMI 3 lists both in ``ModelStructure``
    (``EventIndicator``, ``ContinuousStateDerivative``), an array counting its elements.
    Every listed derivative must name a variable with a ``derivative`` attribute (FMI 2.0
    sec. 3.2.2, FMI 3.0 sec. 2.4.8): the states are found through it.
    """
    variables = root.findall("ModelVariables/*")
    if len(variables) > MAX_VARIABLES:
        raise count_error(path, "the number of model variables", len(variables), MAX_VARIABLES)
    name_of = Path(path).name
    if version == 2:
        text = root.get("numberOfEventIndicators")
        indicators = _unsigned(text) if text is not None else 0
        if indicators is None:
            raise FmuError(f"{name_of}: numberOfEventIndicators={excerpt(text)} is not a whole number; the FMU is "
                           "refused. Obtain a correct FMU from its author.")
        if indicators > MAX_EVENT_INDICATORS:
            raise count_error(path, "numberOfEventIndicators", indicators, MAX_EVENT_INDICATORS)
        unknowns = root.findall("ModelStructure/Derivatives/Unknown")
        if len(unknowns) > MAX_CONTINUOUS_STATES:
            raise count_error(path, "the number of continuous states (ModelStructure/Derivatives)", len(unknowns),
                              MAX_CONTINUOUS_STATES)
        for unknown in unknowns:
            index = _unsigned(unknown.get("index"))
            if index is None or not 1 <= index <= len(variables):
                raise FmuError(f"{name_of}: ModelStructure/Derivatives lists index={excerpt(unknown.get('index'))}, "
                               f"but there are {len(variables)} model variables; the FMU is refused. Obtain a correct "
                               "FMU from its author.")
            real = variables[index - 1].find("Real")
            derivative = _unsigned(real.get("derivative")) if real is not None else None
            if derivative is None or not 1 <= derivative <= len(variables):
                raise _not_a_derivative(name_of, "ModelStructure/Derivatives", variables[index - 1])
        return
    by_reference = {element.get("valueReference"): element for element in variables}
    for tag, limit, what in (("EventIndicator", MAX_EVENT_INDICATORS, "event indicators"),
                             ("ContinuousStateDerivative", MAX_CONTINUOUS_STATES, "continuous states")):
        total = 0
        for unknown in root.iterfind(f"ModelStructure/{tag}"):
            variable = by_reference.get(unknown.get("valueReference"))
            if variable is None:
                raise FmuError(f"{name_of}: ModelStructure/{tag} refers to valueReference "
                               f"{excerpt(unknown.get('valueReference'))}, which no variable has; the FMU is refused. "
                               "Obtain a correct FMU from its author.")
            if tag == "ContinuousStateDerivative" and variable.get("derivative") not in by_reference:
                raise _not_a_derivative(name_of, f"ModelStructure/{tag}", variable)
            total += math.prod(shapes.get(variable.get("name", ""), ()))
            if total > limit:
                raise count_error(path, f"the number of {what} (ModelStructure/{tag}, array elements counted)",
                                  total, limit)


def _not_a_derivative(name_of: str, where: str, variable: etree._Element) -> FmuError:
    return FmuError(f"{name_of}: {where} lists the variable {excerpt(variable.get('name'), 80)}, which has no valid "
                    "derivative attribute naming its state, so it is no state derivative; the FMU is refused. Obtain "
                    "a correct FMU from its author.")


def _extract(path: Path, directory: Path) -> tuple[ArchiveEntry, ...]:
    """Check every entry, then extract them into ``directory`` with bounded sizes."""
    with zipfile.ZipFile(path) as archive:
        checked = check_zip_entries(path, archive)
        description = next((e for _, e in checked if e.name == "modelDescription.xml"), None)
        if description is None or description.is_dir:
            raise FmuError(f"{path}: no modelDescription.xml at the root of the archive; this is not an FMU.")
        base = directory.resolve()
        total = 0
        for info, entry in checked:
            target = base / entry.name
            if base not in target.resolve().parents:
                raise FmuError(f"{path}: the entry {entry.raw!r} leaves the extraction folder; refused.")
            if entry.is_dir:
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            total = extract_zip_entry(path, archive, info, entry, target, total)
    return tuple(entry for _, entry in checked)


def extract_zip_entry(path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo, entry: ArchiveEntry, target: Path,
                      total: int, what: str = "FMU") -> int:
    """Stream one entry into ``target`` (created, never overwritten), counting the bytes
    really unpacked against the limits; returns the new running total."""
    written = 0
    with archive.open(info) as source, open(target, "xb") as sink:
        while chunk := source.read(_CHUNK):
            written += len(chunk)
            _check_size(path, entry.raw, written, info.compress_size, what)
            if entry.name == "modelDescription.xml" and written > _MAX_XML_BYTES:
                raise _xml_size_error(path)
            if total + written > _MAX_TOTAL_BYTES:
                raise _total_error(path, what)
            sink.write(chunk)
    return total + written
