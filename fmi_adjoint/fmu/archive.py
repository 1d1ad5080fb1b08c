"""Opening an FMU safely: zip checks, XML checks, extraction into a temporary folder.

An FMU is untrusted input.  Before anything is extracted, every zip entry is checked
(no absolute paths, no ``..``, no links, bounded sizes); ``modelDescription.xml`` is
parsed without a DTD (FMI model descriptions never need one, so a DOCTYPE or ENTITY
declaration, the vehicle of external-entity attacks, is refused) and validated against
the FMI schema shipped with fmpy; the binary for this platform must be present.  The
archive is extracted into a private temporary folder that :meth:`FmuArchive.close`
removes; nothing is written anywhere else.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import shutil
import stat
import tempfile
import uuid
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from lxml import etree

from ..errors import FmiAdjointError

__all__ = ["FmuError", "FmuVariable", "FmuArchive", "open_fmu", "PLATFORM_DIRS"]

#: Binary folder of this platform, per FMI major version.
PLATFORM_DIRS = {2: "linux64", 3: "x86_64-linux"}

_MAX_ENTRIES = 20_000
_MAX_TOTAL_BYTES = 2 * 1024**3
_MAX_XML_BYTES = 64 * 1024**2
_REAL_TYPES = ("Real", "Float64")  # Float32 would need fmi3SetFloat32; not handled


class FmuError(FmiAdjointError, ValueError):
    """An FMU cannot be used; the message names the problem and the fix."""


@dataclasses.dataclass(frozen=True)
class FmuVariable:
    """One scalar variable of the model description (fields named as in the XML)."""

    name: str
    valueReference: int
    causality: str
    variability: str
    type: str
    start: float | None
    nominal: float | None
    unit: str
    min: float
    max: float
    initial: str | None = None

    @property
    def is_real(self) -> bool:
        return self.type in _REAL_TYPES


def _float(text, default: float | None) -> float | None:
    if text is None:
        return default
    try:
        return float(text)
    except (TypeError, ValueError):
        return default


def _check_entries(path: Path, archive: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    infos = archive.infolist()
    if len(infos) > _MAX_ENTRIES:
        raise FmuError(f"{path}: the archive has {len(infos)} entries (limit {_MAX_ENTRIES}); this is not a normal FMU.")
    total = 0
    for info in infos:
        name = info.filename.replace("\\", "/")
        parts = PurePosixPath(name).parts
        if name.startswith("/") or re.match(r"^[A-Za-z]:", name) or ".." in parts:
            raise FmuError(
                f"{path}: the archive entry {info.filename!r} points outside the FMU folder (path traversal); "
                "the FMU is refused. Obtain a clean FMU from its author."
            )
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise FmuError(f"{path}: the archive entry {info.filename!r} is a symbolic link; the FMU is refused.")
        total += info.file_size
        if total > _MAX_TOTAL_BYTES:
            raise FmuError(f"{path}: the archive unpacks to more than {_MAX_TOTAL_BYTES // 1024**3} GiB; refused.")
    return infos


def _parse_description(path: Path, data: bytes) -> etree._Element:
    """Parse modelDescription.xml without DTDs or entities (FmuError naming the problem)."""
    if len(data) > _MAX_XML_BYTES:
        raise FmuError(f"{path}: modelDescription.xml is larger than {_MAX_XML_BYTES // 1024**2} MiB; refused.")
    if re.search(rb"<!\s*(DOCTYPE|ENTITY)", data, re.IGNORECASE):
        raise FmuError(
            f"{path}: modelDescription.xml declares a DOCTYPE or ENTITY (external entities are an attack "
            "vector and FMI never uses them); the FMU is refused. Remove the declaration."
        )
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        raise FmuError(f"{path}: modelDescription.xml is malformed XML ({exc}); fix or re-export the FMU.") from None
    docinfo = root.getroottree().docinfo
    if docinfo.doctype or docinfo.internalDTD is not None:
        raise FmuError(f"{path}: modelDescription.xml declares a DOCTYPE (external entities are an attack vector "
                       "and FMI never uses them); the FMU is refused. Remove the declaration.")
    if (docinfo.encoding or "UTF-8").upper().replace("_", "-") not in ("UTF-8", "UTF8"):
        raise FmuError(f"{path}: modelDescription.xml is encoded as {docinfo.encoding}; FMI requires UTF-8.")
    if root.tag != "fmiModelDescription":
        raise FmuError(f"{path}: the root element of modelDescription.xml is <{root.tag}>, not <fmiModelDescription>.")
    return root


def _schema_problems(root: etree._Element, version: int) -> list[str]:
    import fmpy

    schema = Path(fmpy.__file__).resolve().parent / "schema" / f"fmi{version}" / f"fmi{version}ModelDescription.xsd"
    validator = etree.XMLSchema(etree.parse(str(schema)))
    return [] if validator.validate(root) else [f"line {e.line}: {e.message}" for e in validator.error_log][:5]


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
    provides_directional_derivatives : bool
        Of the Model Exchange interface.
    native : dict or None
        The export settings (``resources/export.json``) of an FMU exported by fmi-adjoint,
        whose embedded model file is ``resources/model.toml``.
    """

    def __init__(self, path: Path, directory: Path, root: etree._Element, description, tmp):
        self.path = path
        self.directory = directory
        self._tmp = tmp
        self.root = root
        self.description = description
        self.fmi_version = 3 if description.fmiVersion.startswith("3") else 2
        self.variables = {}
        for v in description.modelVariables:
            self.variables[v.name] = FmuVariable(
                name=v.name, valueReference=int(v.valueReference), causality=v.causality or "local",
                variability=v.variability or "continuous", type=v.type,
                start=_float(v.start, None), nominal=_float(getattr(v, "nominal", None), None),
                unit=getattr(v, "unit", None) or "", min=_float(getattr(v, "min", None), -math.inf),
                max=_float(getattr(v, "max", None), math.inf), initial=getattr(v, "initial", None),
            )
        platform = PLATFORM_DIRS[self.fmi_version]
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
        self.single_instance = any(
            e is not None and e.get("canBeInstantiatedOnlyOncePerProcess", "false") in ("true", "1")
            for e in (root.find("ModelExchange"), root.find("CoSimulation"))
        )
        self.number_of_event_indicators = int(description.numberOfEventIndicators or 0)
        self.native = self._native_settings()

    def _has_binary(self, interface, platform: str) -> bool:
        if interface is None:
            return False
        return (self.directory / "binaries" / platform / f"{interface.modelIdentifier}.so").is_file()

    def _native_settings(self) -> dict | None:
        resources = self.directory / "resources"
        settings, model = resources / "export.json", resources / "model.toml"
        if not (settings.is_file() and model.is_file()):
            return None
        try:
            data = json.loads(settings.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return None
        if not isinstance(data, dict) or not str(data.get("generator", "")).startswith("fmi-adjoint"):
            return None
        # The exporter derives the instantiation token from the model file and the export
        # settings; an FMU whose embedded model does not match its binary is not trusted.
        try:
            text = model.read_text(encoding="utf-8")
            settings = (data["values"] or None, float(data["step"]), float(data["alpha"]), int(data["fmi_version"]))
        except (OSError, UnicodeDecodeError, KeyError, TypeError, ValueError):
            return None
        token = self.description.guid or getattr(self.description, "instantiationToken", None)
        # export_fmu hashes the values it was given: None or a dict (stored as {} or the dict).
        for values in (settings[0], {} if settings[0] is None else settings[0]):
            step, alpha, version = settings[1:]
            digest = hashlib.sha256((text + repr((values, step, alpha, version))).encode()).digest()
            if token == "{" + str(uuid.UUID(bytes=digest[:16], version=4)) + "}":
                return data
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
        """Names of the real variables with this causality."""
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
        Not a zip file, unsafe entries, missing or malformed ``modelDescription.xml``,
        external entities, schema violations, or no binary for this platform.
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
            root, infos = _extract(path, directory)
        except FmuError:
            raise
        except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, RuntimeError, NotImplementedError, EOFError,
                OSError) as exc:
            raise FmuError(f"{path}: the archive cannot be extracted ({exc}); obtain an intact FMU.") from None
        from fmpy import read_model_description

        try:
            description = read_model_description(str(directory), validate=False)
        except Exception as exc:  # fmpy raises bare Exceptions for inconsistent descriptions
            raise FmuError(f"{path}: fmpy cannot read the model description: {exc}") from None
        return FmuArchive(path, directory, root, description, tmp)
    except BaseException:
        tmp.cleanup()
        raise


def _extract(path: Path, directory: Path):
    """Check the archive and the model description, then extract into ``directory``."""
    with zipfile.ZipFile(path) as archive:
        infos = _check_entries(path, archive)
        by_name = {i.filename.replace("\\", "/"): i for i in infos}
        if "modelDescription.xml" not in by_name:
            raise FmuError(f"{path}: no modelDescription.xml at the root of the archive; this is not an FMU.")
        if by_name["modelDescription.xml"].file_size > _MAX_XML_BYTES:
            raise FmuError(f"{path}: modelDescription.xml is larger than {_MAX_XML_BYTES // 1024**2} MiB; refused.")
        root = _parse_description(path, archive.read("modelDescription.xml"))
        version_text = root.get("fmiVersion", "")
        if not re.match(r"^(2\.0|3\.\d)", version_text):
            raise FmuError(f"{path}: fmiVersion {version_text!r} is not supported; FMI 2.0 and 3.x FMUs are.")
        version = 3 if version_text.startswith("3") else 2
        problems = _schema_problems(root, version)
        if problems:
            raise FmuError(f"{path}: modelDescription.xml violates the FMI {version} schema: {'; '.join(problems)}.")
        base = directory.resolve()
        for info in infos:
            target = (base / info.filename.replace("\\", "/")).resolve()
            if base not in target.parents and target != base:
                raise FmuError(f"{path}: the entry {info.filename!r} leaves the extraction folder; refused.")
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as source, open(target, "wb") as sink:
                shutil.copyfileobj(source, sink)
    return root, infos
