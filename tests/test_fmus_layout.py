"""The layout of the hand-written FMUs of ``fmus/`` (issue 29): one shared FMI layer of our own in
``fmus/common/`` and, per fixture, ``config.h`` + ``model.c`` + ``modelDescription.xml``.

What each fixture computes is tested in ``test_handwritten_fmus*.py`` and the importer's tests;
here: every fixture builds and instantiates for exactly the FMI version and the interfaces its
XML declares (``config.h`` agrees with the XML), every function of the FMI headers is exported,
the layer is independent of the exporter's runtime, and ``fmus/`` stays small.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import fmpy
import pytest
from fmpy.fmi2 import FMU2Model, FMU2Slave
from fmpy.fmi3 import FMU3Model, FMU3Slave

from fmi_adjoint.toolchain import c_compiler
from handwritten_fmus import COMMON_DIR, FMUS_DIR, build_fmu, fmi_headers_dir

FIXTURES = sorted(p.name for p in FMUS_DIR.iterdir() if (p / "modelDescription.xml").is_file())
#: Issue 29: the eleven fixtures it rebuilt on the shared layer, README included, in under 3 000
#: lines (they were 10 098 lines as ten self-contained C files) ...
LINE_BUDGET = 3000
REBUILT_FIXTURES = 11
#: ... and each fixture added since (issue 30: input derivatives, exact start values, lying
#: derivatives) a config, a short model and its XML: at most this many lines with its README rows.
LINES_PER_NEW_FIXTURE = 250

needs_cc = pytest.mark.skipif(c_compiler() is None, reason="no C compiler: the FMUs cannot be built")


def _config(name: str) -> str:
    """The fixture's config.h with those of the fixtures it includes (the Van der Pol variants)."""
    text = (FMUS_DIR / name / "config.h").read_text(encoding="utf-8")
    for included in re.findall(r'#include "\.\./(\w+)/config\.h"', text):
        text += _config(included)
    return text


def _define(config: str, macro: str) -> str:
    """The first definition of ``macro`` (a variant defines it before including the base)."""
    found = re.search(rf"^#define {macro} (.+)$", config, flags=re.MULTILINE)
    assert found, macro
    return found.group(1).strip()


def test_every_fixture_is_a_config_a_model_and_an_xml():
    assert len(FIXTURES) >= REBUILT_FIXTURES, FIXTURES
    for name in FIXTURES:
        assert sorted(p.name for p in (FMUS_DIR / name).iterdir()) == ["config.h", "model.c", "modelDescription.xml"]
        root = ET.parse(FMUS_DIR / name / "modelDescription.xml").getroot()
        token = root.get("guid") or root.get("instantiationToken")
        config = _config(name)
        assert _define(config, "INSTANTIATION_TOKEN") == f'"{token}"', name
        interfaces = {e.tag for e in root if e.tag in ("ModelExchange", "CoSimulation")}
        assert _define(config, "HAS_ME") == str(int("ModelExchange" in interfaces)), name
        assert _define(config, "HAS_CS") == str(int("CoSimulation" in interfaces)), name
        assert int(_define(config, "N_VARIABLES")) == len(root.find("ModelVariables")), name


def test_the_layer_is_our_own_and_fmus_stays_small():
    sources = [p for p in FMUS_DIR.rglob("*") if p.is_file()]
    for path in (p for p in sources if p.suffix in (".c", ".h")):  # our own files and the FMI headers only
        for included in re.findall(r'^#include "([^"]+)"', path.read_text(encoding="utf-8"), flags=re.MULTILINE):
            inside = (path.parent / included).resolve()
            assert included in ("fmi2Functions.h", "fmi3Functions.h", "config.h", "model.h", "instance.h") or (
                inside.is_file() and FMUS_DIR in inside.parents), (path, included)
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in sources)
    print(f"\nfmus/: {lines} lines in {len(sources)} files")
    assert lines < LINE_BUDGET + LINES_PER_NEW_FIXTURE * (len(FIXTURES) - REBUILT_FIXTURES)


def _instantiates(path: Path, unzip: Path, cls, identifier: str) -> bool:
    """Whether ``cls`` (an fmpy interface class) instantiates the FMU, and if so that it initializes."""
    md = fmpy.read_model_description(str(path), validate=False)
    fmu = cls(guid=md.guid, unzipDirectory=str(unzip), modelIdentifier=identifier, instanceName="layout")
    try:
        fmu.instantiate()
    except Exception:
        fmu.freeLibrary()
        return False
    if md.fmiVersion == "2.0":
        fmu.setupExperiment(startTime=0.0)
        fmu.enterInitializationMode()
    else:
        fmu.enterInitializationMode(startTime=0.0)
    fmu.exitInitializationMode()
    fmu.terminate()
    fmu.freeInstance()
    fmu.freeLibrary()
    return True


@needs_cc
@pytest.mark.slow
def test_every_fixture_builds_for_the_version_and_interfaces_its_xml_declares(tmp_path):
    for name in FIXTURES:
        path = build_fmu(name, tmp_path)
        md = fmpy.read_model_description(str(path), validate=False)
        unzip = Path(fmpy.extract(str(path), unzipdir=str(tmp_path / name)))
        declared = {"modelExchange": md.modelExchange, "coSimulation": md.coSimulation}
        identifier = next(i.modelIdentifier for i in declared.values() if i is not None)
        classes = {"2.0": (FMU2Model, FMU2Slave), "3.0": (FMU3Model, FMU3Slave)}[md.fmiVersion]
        for (interface, present), cls in zip(declared.items(), classes):
            assert _instantiates(path, unzip, cls, identifier) == (present is not None), (name, interface)
        header = fmi_headers_dir() / f"fmi{md.fmiVersion[0]}Functions.h"
        text = header.read_text(encoding="utf-8")
        names = re.findall(r"^\s*FMI\d_Export\s+\w+TYPE\s+(fmi\d\w+);", text, flags=re.MULTILINE)
        assert len(names) > 40, names  # the whole API, not a parsing accident
        library = ctypes.CDLL(str(next(unzip.glob("binaries/*/*.so"))))
        assert [n for n in names if not hasattr(library, n)] == [], name
        shutil.rmtree(unzip)


def test_the_builder_compiles_the_layer_of_the_xmls_version():
    assert sorted(p.name for p in COMMON_DIR.iterdir()) == ["fmi2.c", "fmi3.c", "instance.c", "instance.h", "model.h"]
