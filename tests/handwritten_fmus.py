"""Builds the hand-written FMUs of ``fmus/`` for the tests (not a test module itself).

``build_fmu("van_der_pol_me", tmp_dir)`` compiles ``fmus/van_der_pol_me/*.c`` together with the
shared FMI layer of ``fmus/common/`` (``fmi2.c`` or ``fmi3.c`` by the ``fmiVersion`` of the
fixture's XML, and ``instance.c``; the fixture's ``config.h`` and the layer's headers are found
through ``-I``) with the system C compiler against the FMI headers shipped with fmpy and
zips an FMU::

    modelDescription.xml
    binaries/linux64/<modelIdentifier>.so        (FMI 2.0)
    binaries/x86_64-linux/<modelIdentifier>.so   (FMI 3.0)
    sources/*.c

Builds are cached per process, keyed by (name, defines, directory), so a session-scoped
fixture can call :func:`build_fmu` freely.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

from fmi_adjoint.toolchain import c_compiler

__all__ = ["COMMON_DIR", "FMUS_DIR", "build_fmu", "fmi_headers_dir"]

FMUS_DIR = Path(__file__).resolve().parent.parent / "fmus"
# Fixed at import: a test that points FMUS_DIR at edited copies of a fixture still builds them
# with this layer (test_fmu_worker_protocol.py).
COMMON_DIR = FMUS_DIR / "common"

_CACHE: dict[tuple[str, tuple[str, ...], Path], Path] = {}


def fmi_headers_dir() -> Path:
    """The directory of the FMI 2.0 and 3.0 C headers that ship with fmpy."""
    import fmpy

    return Path(fmpy.__file__).resolve().parent / "c-code"


def _layer_sources(model_description: Path) -> list[Path]:
    """The shared FMI layer a fixture is compiled with, by the fmiVersion of its XML."""
    version = ET.parse(model_description).getroot().get("fmiVersion", "")
    layer = "fmi2.c" if version == "2.0" else "fmi3.c"
    return [COMMON_DIR / layer, COMMON_DIR / "instance.c"]


def _model_identifier_and_platform(model_description: Path) -> tuple[str, str]:
    root = ET.parse(model_description).getroot()
    version = root.get("fmiVersion", "")
    interfaces = [e for e in root if e.tag in ("ModelExchange", "CoSimulation")]
    if not interfaces:
        raise ValueError(f"{model_description}: no ModelExchange or CoSimulation element")
    identifiers = {e.get("modelIdentifier") for e in interfaces}
    if len(identifiers) != 1:
        raise ValueError(f"{model_description}: expected one modelIdentifier, found {sorted(identifiers)}")
    if version == "2.0":
        platform = "linux64"
    elif version.startswith("3."):
        platform = "x86_64-linux"
    else:
        raise ValueError(f"{model_description}: unsupported fmiVersion {version!r}")
    return identifiers.pop(), platform


def build_fmu(name: str, directory: Path, defines: tuple[str, ...] = ()) -> Path:
    """Compile ``fmus/<name>`` (with ``-D<define>`` for each of ``defines``) into an FMU.

    The FMU is written to ``<directory>/<name>.fmu``, or, with defines, to
    ``<directory>/<name>__<defines>.fmu`` so that variants do not overwrite each other.
    Raises RuntimeError if there is no C compiler or the compilation fails.
    """
    directory = Path(directory).resolve()
    defines = tuple(defines)
    key = (name, defines, directory)
    cached = _CACHE.get(key)
    if cached is not None and cached.is_file():
        return cached

    source_dir = FMUS_DIR / name
    model_description = source_dir / "modelDescription.xml"
    sources = sorted(source_dir.glob("*.c"))
    if not model_description.is_file() or not sources:
        raise FileNotFoundError(f"{source_dir} has no modelDescription.xml or no C sources")
    identifier, platform = _model_identifier_and_platform(model_description)
    if (source_dir / "config.h").is_file():
        sources += _layer_sources(model_description)

    compiler = c_compiler()
    if compiler is None:
        raise RuntimeError("no C compiler found ($CC, cc, gcc or clang)")

    tag = "__" + re.sub(r"[^A-Za-z0-9]+", "_", "_".join(defines)).strip("_") if defines else ""
    directory.mkdir(parents=True, exist_ok=True)
    fmu_path = directory / f"{name}{tag}.fmu"

    with tempfile.TemporaryDirectory(prefix=f"{name}_build_", dir=directory) as build:
        library = Path(build) / f"{identifier}.so"
        command = [
            compiler, "-std=c99", "-O2", "-Wall", "-Wextra", "-shared", "-fPIC",
            f"-I{fmi_headers_dir()}", f"-I{source_dir}", f"-I{COMMON_DIR}",
            *(f"-D{d}" for d in defines),
            *(str(s) for s in sources),
            "-o", str(library), "-lm",
        ]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"compiling {name} failed:\n{' '.join(command)}\n{result.stderr}")
        partial = fmu_path.with_suffix(".fmu.partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.write(model_description, "modelDescription.xml")
            zf.write(library, f"binaries/{platform}/{identifier}.so")
            for source in sources:
                zf.write(source, f"sources/{source.name}")
        shutil.move(partial, fmu_path)

    _CACHE[key] = fmu_path
    return fmu_path
