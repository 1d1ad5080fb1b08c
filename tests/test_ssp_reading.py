"""Reading SSP 1.0 systems (issue 28, part 1): :func:`fmi_adjoint.ssp.reading.open_system`.

One system of two hand-written FMUs (``fmus/van_der_pol_mecs`` as ``osc``, ``fmus/feedthrough``
as ``gain``), written here with lxml, is read from an ``.ssp`` and from a bare ``.ssd`` to the
expected structure (units and a linear transformation folded, parameter bindings with their
priorities) and compared with fmpy's own reader.  Every unsupported feature and every
inconsistency is one FmuError naming it; hostile archives are refused and leave nothing behind.
"""

from __future__ import annotations

import os
import stat
import zipfile
from pathlib import Path

import numpy as np
import pytest
from lxml import etree

import fmi_adjoint.fmu.archive as archive_module
from fmi_adjoint.errors import FmuError
from fmi_adjoint.fmu.archive import open_fmu
from fmi_adjoint.fmu.ssp import write_ssp
from fmi_adjoint.ssp.reading import open_system
from fmi_adjoint.ssp.structure import Connection, Connector, Endpoint, ParameterValue, Transformation
from fmi_adjoint.toolchain import c_compiler
from handwritten_fmus import build_fmu
from tolerances import EXACT

if c_compiler() is None:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: the FMUs cannot be built", allow_module_level=True)

SSD = "http://ssp-standard.org/SSP1/SystemStructureDescription"
SSC = "http://ssp-standard.org/SSP1/SystemStructureCommon"
SSV = "http://ssp-standard.org/SSP1/SystemStructureParameterValues"
NSMAP = {"ssd": SSD, "ssc": SSC, "ssv": SSV}
FMU_FILES = {"osc": "resources/osc.fmu", "gain": "resources/gain.fmu", "duffing": "resources/duffing.fmu"}


# ------------------------------------------------------------------------------ builders --


def _e(parent, tag: str, **attrib) -> etree._Element:
    prefix, local = tag.split(":")
    return etree.SubElement(parent, f"{{{NSMAP[prefix]}}}{local}", {k: str(v) for k, v in attrib.items()})


def _connector(parent, name: str, kind: str, type_: str | None = "Real", /, **attrib) -> etree._Element:
    connectors = parent.find(f"{{{SSD}}}Connectors")
    if connectors is None:
        connectors = _e(parent, "ssd:Connectors")
        parent.insert(0, connectors)
    connector = _e(connectors, "ssd:Connector", name=name, kind=kind)
    if type_ is not None:
        _e(connector, f"ssc:{type_}", **attrib)
    return connector


def _parameter_set(parent, name: str, values: dict) -> etree._Element:
    root = _e(parent, "ssv:ParameterSet", version="1.0", name=name)
    parameters = _e(root, "ssv:Parameters")
    for key, (type_, value) in values.items():
        _e(_e(parameters, "ssv:Parameter", name=key), f"ssv:{type_}", value=value)
    return root


def _element(root, path: str) -> etree._Element:
    found = root.find(path, NSMAP)
    assert found is not None, path
    return found


def base_ssd() -> etree._Element:
    """The system ``rig``: osc.x0 [mm] -> (2 x + 0.1) -> gain.u [m]; gain.y -> osc.u;
    system input n_in (Integer) -> gain.n; osc.x0 [mm] -> system output position [m];
    gain.m -> system output m_out.  mu bound inline on osc; k and c from resources/gain.ssv;
    c again at system level (prefix ``gain.``), which wins."""
    root = etree.Element(f"{{{SSD}}}SystemStructureDescription", nsmap=NSMAP, version="1.0", name="rig_ssd")
    system = _e(root, "ssd:System", name="rig")
    _connector(system, "n_in", "input", "Integer")
    _connector(system, "position", "output", unit="m")
    _connector(system, "m_out", "output", "Integer")
    bindings = _e(system, "ssd:ParameterBindings")
    _parameter_set(_e(_e(bindings, "ssd:ParameterBinding", prefix="gain."), "ssd:ParameterValues"), "top",
                   {"c": ("Real", "0.75")})
    elements = _e(system, "ssd:Elements")
    osc = _e(elements, "ssd:Component", name="osc", source=FMU_FILES["osc"], implementation="CoSimulation")
    _connector(osc, "u", "input")
    _connector(osc, "x0", "output", unit="mm")
    _connector(osc, "mu", "parameter")
    _parameter_set(_e(_e(_e(osc, "ssd:ParameterBindings"), "ssd:ParameterBinding"), "ssd:ParameterValues"), "osc",
                   {"mu": ("Real", "1.5")})
    gain = _e(elements, "ssd:Component", name="gain", source=FMU_FILES["gain"])
    _connector(gain, "u", "input", unit="m")
    _connector(gain, "y", "output", None)  # untyped: the FMU's type (Real)
    _connector(gain, "n", "input", "Integer")
    _connector(gain, "m", "output", "Integer")
    _e(_e(gain, "ssd:ParameterBindings"), "ssd:ParameterBinding", source="resources/gain.ssv")
    connections = _e(system, "ssd:Connections")
    linear = _e(connections, "ssd:Connection", startElement="osc", startConnector="x0", endElement="gain",
                endConnector="u")
    _e(linear, "ssc:LinearTransformation", factor="2", offset="0.1")
    _e(connections, "ssd:Connection", startElement="gain", startConnector="y", endElement="osc", endConnector="u")
    _e(connections, "ssd:Connection", startConnector="n_in", endElement="gain", endConnector="n")
    _e(connections, "ssd:Connection", startElement="osc", startConnector="x0", endConnector="position")
    _e(connections, "ssd:Connection", startElement="gain", startConnector="m", endConnector="m_out")
    units = _e(root, "ssd:Units")
    for name, attrib in (("mm", {"m": 1, "factor": 0.001}), ("m", {"m": 1}), ("s", {"s": 1})):
        _e(_e(units, "ssc:Unit", name=name), "ssc:BaseUnit", **attrib)
    _e(root, "ssd:DefaultExperiment", startTime="0.5", stopTime="3.0")
    return root


def gain_ssv() -> bytes:
    root = etree.Element(f"{{{SSV}}}ParameterSet", nsmap={"ssv": SSV}, version="1.0", name="gain")
    parameters = _e(root, "ssv:Parameters")
    for name, value in (("k", "3.0"), ("c", "0.25")):
        _e(_e(parameters, "ssv:Parameter", name=name), "ssv:Real", value=value)
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8")


def _bytes(root) -> bytes:
    return etree.tostring(root, pretty_print=True, xml_declaration=True, encoding="UTF-8")


def write_ssp_archive(path: Path, fmus: dict, ssd, *, extra=()) -> Path:
    """An .ssp with the SSD (an element or bytes), the three FMUs, gain.ssv and ``extra``
    (name, bytes or ZipInfo-and-bytes) entries."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("SystemStructure.ssd", ssd if isinstance(ssd, bytes) else _bytes(ssd))
        for key, entry in FMU_FILES.items():
            archive.write(fmus[key], entry, compress_type=zipfile.ZIP_STORED)
        archive.writestr("resources/gain.ssv", gain_ssv())
        for name, data in extra:
            archive.writestr(name, data)
    return path


def write_ssd_folder(folder: Path, fmus: dict, ssd) -> Path:
    """The same system as a bare .ssd with its files beside it."""
    (folder / "resources").mkdir(parents=True, exist_ok=True)
    for key, entry in FMU_FILES.items():
        (folder / entry).write_bytes(Path(fmus[key]).read_bytes())
    (folder / "resources" / "gain.ssv").write_bytes(gain_ssv())
    path = folder / "rig.ssd"
    path.write_bytes(_bytes(ssd))
    return path


def _one_error(caught, *words: str) -> str:
    text = str(caught.value)
    assert "\n" not in text, text
    for word in words:
        assert word in text, (word, text)
    return text


# ------------------------------------------------------------------------------ fixtures --


@pytest.fixture(scope="module")
def fmus(tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("ssp_reading_fmus")
    return {"osc": build_fmu("van_der_pol_mecs", work), "gain": build_fmu("feedthrough", work),
            "duffing": build_fmu("duffing_cs", work)}


# ---------------------------------------------------------------------------------- tests --


EXPECTED_CONNECTIONS = (
    Connection(Endpoint("osc", "x0"), Endpoint("gain", "u"), Transformation(0.002, 0.1)),
    Connection(Endpoint("gain", "y"), Endpoint("osc", "u")),
    Connection(Endpoint(None, "n_in"), Endpoint("gain", "n")),
    Connection(Endpoint("osc", "x0"), Endpoint(None, "position"), Transformation(0.001, 0.0)),
    Connection(Endpoint("gain", "m"), Endpoint(None, "m_out")),
)


def _check_structure(structure, transformations_exact=True) -> None:
    assert structure.name == "rig"
    assert structure.connectors == (Connector("n_in", "input", "Integer"), Connector("position", "output", "Real", "m"),
                                    Connector("m_out", "output", "Integer"))
    assert [c.name for c in structure.components] == ["osc", "gain"]
    osc, gain = structure.components
    assert (osc.source, osc.implementation, gain.implementation) == (FMU_FILES["osc"], "CoSimulation", "any")
    assert osc.connectors == (Connector("u", "input"), Connector("x0", "output", "Real", "mm"),
                              Connector("mu", "parameter"))
    assert gain.connectors == (Connector("u", "input", "Real", "m"), Connector("y", "output", "Real"),
                               Connector("n", "input", "Integer"), Connector("m", "output", "Integer"))
    assert [(c.start, c.end) for c in structure.connections] == [(c.start, c.end) for c in EXPECTED_CONNECTIONS]
    for got, expected in zip(structure.connections, EXPECTED_CONNECTIONS):
        assert got.transformation.factor == pytest.approx(expected.transformation.factor, rel=EXACT)
        assert got.transformation.offset == pytest.approx(expected.transformation.offset, rel=EXACT, abs=EXACT)
    # The system-level c (0.75) wins over the SSV's (0.25).
    assert sorted(structure.parameters, key=lambda p: (p.component, p.name)) == [
        ParameterValue("gain", "c", 0.75), ParameterValue("gain", "k", 3.0), ParameterValue("osc", "mu", 1.5)]
    assert (structure.start_time, structure.stop_time) == (0.5, 3.0)


def test_two_fmu_system_is_read_to_its_structure(fmus, tmp_path, private_tmp):
    """The .ssp gives the whole structure: connectors with kinds, types (an untyped one from the
    FMU) and units; the mm -> m conversion (x 0.001) before the linear transformation 2 x + 0.1,
    folded into 0.002 x + 0.1; the bindings' priorities; the default experiment.  The FMUs are
    opened, and closing removes every extracted file."""
    ssp = write_ssp_archive(tmp_path / "rig.ssp", fmus, base_ssd())
    with open_system(ssp) as system:
        _check_structure(system.structure)
        assert set(system.archives) == {"osc", "gain"}
        assert system.archives["gain"].variables["k"].causality == "parameter"
        assert system.structure.component("osc").path.is_file()
        assert system.directory is not None and system.directory.parent.parent == private_tmp
    assert list(private_tmp.iterdir()) == []


def test_bare_ssd_reads_to_the_same_structure(fmus, tmp_path, private_tmp):
    ssd = write_ssd_folder(tmp_path / "folder", fmus, base_ssd())
    with open_system(ssd) as system:
        _check_structure(system.structure)
        assert system.directory is None
        assert system.structure.component("gain").path == (tmp_path / "folder" / FMU_FILES["gain"]).resolve()
    assert list(private_tmp.iterdir()) == []
    assert (tmp_path / "folder" / FMU_FILES["gain"]).is_file()  # the user's files stay


def test_suppress_unit_conversion_keeps_only_the_linear_transformation(fmus, tmp_path):
    root = base_ssd()
    _element(root, "ssd:System/ssd:Connections/ssd:Connection").set("suppressUnitConversion", "true")
    with open_system(write_ssp_archive(tmp_path / "suppressed.ssp", fmus, root)) as system:
        assert system.structure.connections[0].transformation == Transformation(2.0, 0.1)


def test_unit_with_an_offset_is_converted(fmus, tmp_path):
    """degC -> K style: SI = factor * v + offset on both sides."""
    root = base_ssd()
    units = _element(root, "ssd:Units")
    _e(_e(units, "ssc:Unit", name="mm_shifted"), "ssc:BaseUnit", m=1, factor=0.001, offset=0.5)
    _element(root, "ssd:System/ssd:Elements/ssd:Component[@name='osc']/ssd:Connectors/ssd:Connector[@name='x0']/"
                   "ssc:Real").set("unit", "mm_shifted")
    with open_system(write_ssp_archive(tmp_path / "offset.ssp", fmus, root)) as system:
        position = system.structure.driving(Endpoint(None, "position")).transformation
    assert position.factor == pytest.approx(0.001, rel=EXACT)
    assert position.offset == pytest.approx(0.5, rel=EXACT)


def test_fmpy_reads_the_same_system(fmus, tmp_path):
    """fmpy's read_ssd agrees on components, connectors, connections and bound values
    (fmpy 0.3 reads no transformations or units)."""
    from fmpy.ssp.ssd import read_ssd

    ssp = write_ssp_archive(tmp_path / "rig.ssp", fmus, base_ssd())
    theirs = read_ssd(str(ssp)).system
    with open_system(ssp) as system:
        ours = system.structure
    assert theirs.name == ours.name
    assert [(c.name, c.kind) for c in theirs.connectors] == [(c.name, c.kind) for c in ours.connectors]
    assert [(e.name, e.source) for e in theirs.elements] == [(c.name, c.source) for c in ours.components]
    for element, component in zip(theirs.elements, ours.components):
        assert [(c.name, c.kind) for c in element.connectors] == [(c.name, c.kind) for c in component.connectors]
    assert [(c.startElement, c.startConnector, c.endElement, c.endConnector) for c in theirs.connections] == [
        (c.start.element, c.start.connector, c.end.element, c.end.connector) for c in ours.connections]
    bound = {}
    for owner in [*theirs.elements, theirs]:  # system bindings last: they take priority
        for binding in owner.parameterBindings:
            for parameter_set in binding.parameterValues:
                for p in parameter_set.parameters:
                    name = (binding.prefix or "") + p.name
                    key = (owner.name, name) if owner is not theirs else tuple(name.split(".", 1))
                    bound[key] = float(p.value)
    assert bound == {(p.component, p.name): p.value for p in ours.parameters}


def test_our_hand_back_ssp_reads_back(fmus, tmp_path):
    """write_ssp's one-FMU system (fmi_adjoint.fmu.ssp) reads back with the values bound, every
    FMU input and output exposed and connected; fmpy agrees."""
    from fmpy.ssp.ssd import read_ssd

    with open_fmu(fmus["gain"]) as archive:
        ssp = write_ssp(archive, {"k": 3.5, "c": -0.25}, fmus["gain"], tmp_path / "handback.ssp",
                        interface="CoSimulation")
    with open_system(ssp) as system:
        structure = system.structure
        assert [c.name for c in structure.components] == ["feedthrough"]
        component = structure.components[0]
        assert component.implementation == "CoSimulation"
        assert {(c.name, c.kind) for c in component.connectors} == {("u", "input"), ("y", "output"),
                                                                    ("k", "parameter"), ("c", "parameter")}
        assert structure.parameter_values("feedthrough") == {"k": 3.5, "c": -0.25}
        assert {(c.start.label(), c.end.label()) for c in structure.connections} == {
            (".u", "feedthrough.u"), ("feedthrough.y", ".y")}
        assert set(system.archives) == {"feedthrough"}
    theirs = read_ssd(str(ssp)).system
    assert [e.name for e in theirs.elements] == ["feedthrough"]
    assert len(theirs.connections) == len(structure.connections)


# -------------------------------------------------------------------------------- refusals --


def _component(root, name: str) -> etree._Element:
    return _element(root, f"ssd:System/ssd:Elements/ssd:Component[@name='{name}']")


def _connector_of(root, component: str, name: str) -> etree._Element:
    return _element(_component(root, component), f"ssd:Connectors/ssd:Connector[@name='{name}']")


def _connections(root) -> etree._Element:
    return _element(root, "ssd:System/ssd:Connections")


def _retype(root, component: str, name: str, type_: str, **attrib) -> None:
    connector = _connector_of(root, component, name)
    for child in list(connector):
        connector.remove(child)
    _e(connector, f"ssc:{type_}", **attrib)


def _nested_system(root):
    _e(_element(root, "ssd:System/ssd:Elements"), "ssd:System", name="inner")


def _signal_dictionary_reference(root):
    _e(_element(root, "ssd:System/ssd:Elements"), "ssd:SignalDictionaryReference", name="bus", dictionary="signals")


def _signal_dictionaries(root):
    system = _element(root, "ssd:System")
    dictionaries = _e(system, "ssd:SignalDictionaries")
    system.remove(dictionaries)
    system.insert(list(system).index(_connections(root)) + 1, dictionaries)
    _e(dictionaries, "ssd:SignalDictionary", name="signals", source="resources/signals.ssb")


def _package_component(root):
    _component(root, "gain").set("type", "application/x-ssp-package")


def _parameter_mapping(root):
    binding = _element(_component(root, "gain"), "ssd:ParameterBindings/ssd:ParameterBinding")
    _e(binding, "ssd:ParameterMapping", source="resources/map.ssm")


def _mapping_transformation(kind: str):
    def mutate(root):
        connection = _connections(root)[2]  # n_in -> gain.n, Integer
        source, target = {"Boolean": ("true", "false"), "Integer": ("1", "2"), "Enumeration": ("a", "b")}[
            kind.replace("MappingTransformation", "")]
        _e(_e(connection, f"ssc:{kind}"), "ssc:MapEntry", source=source, target=target)
    return mutate


def _typed_connector(type_: str, **attrib):
    return lambda root: _connector(_component(root, "gain"), "s", "output", type_, **attrib)


def _connect(start_element, start, end_element, end):
    def mutate(root):
        attrib = {"startConnector": start, "endConnector": end}
        if start_element:
            attrib["startElement"] = start_element
        if end_element:
            attrib["endElement"] = end_element
        _e(_connections(root), "ssd:Connection", **attrib)
    return mutate


def _implementation_missing(root):
    duffing = _e(_element(root, "ssd:System/ssd:Elements"), "ssd:Component", name="duffing",
                 source=FMU_FILES["duffing"], implementation="ModelExchange")
    del duffing  # no connectors needed


REFUSALS = {
    "subsystem": (_nested_system, ("<System name='inner'>", "subsystem", "flatten")),
    "signal dictionary reference": (_signal_dictionary_reference, ("<SignalDictionaryReference name='bus'>",)),
    "signal dictionaries": (_signal_dictionaries, ("<SignalDictionaries>", "signal dictionaries")),
    "ssp package component": (_package_component, ("'gain'", "application/x-ssp-package", "FMU components")),
    "parameter mapping": (_parameter_mapping, ("<ParameterMapping>", "parameter mappings are not supported")),
    "boolean mapping": (_mapping_transformation("BooleanMappingTransformation"),
                        ("<BooleanMappingTransformation>", "only LinearTransformation")),
    "integer mapping": (_mapping_transformation("IntegerMappingTransformation"),
                        ("<IntegerMappingTransformation>", ".n_in -> gain.n")),
    "enumeration mapping": (_mapping_transformation("EnumerationMappingTransformation"),
                            ("<EnumerationMappingTransformation>",)),
    "string connector": (_typed_connector("String"), ("connector 's'", "a String connector")),
    "enumeration connector": (_typed_connector("Enumeration", name="E"), ("connector 's'", "an Enumeration"
                                                                                           " connector")),
    "binary connector": (_typed_connector("Binary"), ("connector 's'", "a Binary connector")),
    "unknown element": (_connect("nosuch", "y", "osc", "mu"), ("no element 'nosuch'", "osc, gain")),
    "unknown connector": (_connect("gain", "nosuch", None, "position"), ("component 'gain' has no connector "
                                                                         "'nosuch'",)),
    "input driven twice": (_connect("osc", "x0", "osc", "u"), ("osc.u is already driven by the connection "
                                                                "gain.y -> osc.u",)),
    "system output driven twice": (_connect("gain", "y", None, "position"), (".position is already driven",)),
    "start is a component input": (_connect("gain", "u", None, "position"), ("wrong direction", "start is a "
                                                                             "component input (gain.u)")),
    "end is a component output": (_connect(None, "n_in", "gain", "m"), ("wrong direction", "end a component "
                                                                        "output (gain.m)")),
    "parameter connection": (_connect("osc", "mu", "gain", "u"), ("parameter connector", "ParameterBinding")),
    "kind against causality": (lambda root: _connector_of(root, "osc", "mu").set("kind", "input"),
                               ("connector 'mu'", "kind 'input'", "causality 'parameter'")),
    "type against the fmu": (lambda root: _retype(root, "gain", "y", "Integer"),
                             ("connector 'y'", "declared Integer", "<ssc:Real/>")),
    "connector the fmu lacks": (lambda root: _connector(_component(root, "gain"), "nosuch", "input"),
                                ("connector 'nosuch'", "has no variable 'nosuch'")),
    "unit dimensions": (lambda root: _retype(root, "gain", "u", "Real", unit="s"),
                        ("osc.x0 -> gain.u", "'mm' (m^1)", "'s' (s^1)", "different dimensions")),
    "undefined unit": (lambda root: _retype(root, "gain", "u", "Real", unit="furlong"),
                       ("'furlong' is not defined",)),
    "implementation the fmu lacks": (_implementation_missing, ("component 'duffing'",
                                                               'implementation="ModelExchange"', "CoSimulation")),
    "unknown bound parameter": (lambda root: _parameter_set(
        _e(_e(_element(_component(root, "osc"), "ssd:ParameterBindings"), "ssd:ParameterBinding"),
           "ssd:ParameterValues"), "more", {"nosuch": ("Real", "1")}), ("has no variable 'nosuch'",)),
    "unit with factor zero": (lambda root: _e(_e(_element(root, "ssd:Units"), "ssc:Unit", name="zero"),
                                              "ssc:BaseUnit", m=1, factor=0), ("unit 'zero' has BaseUnit factor 0",)),
    "infinite linear factor": (lambda root: _element(
        root, "ssd:System/ssd:Connections/ssd:Connection/ssc:LinearTransformation").set("factor", "INF"),
        ("osc.x0 -> gain.u: LinearTransformation: factor='INF'", "not finite")),
    "stop time not a number": (lambda root: _element(root, "ssd:DefaultExperiment").set("stopTime", "NaN"),
                               ("DefaultExperiment stopTime='NaN' is not a finite time",)),
    "dotted component name": (lambda root: _e(_element(root, "ssd:System/ssd:Elements"), "ssd:Component", name="a.b",
                                              source=FMU_FILES["duffing"]),
                              ("component 'a.b'", "must not contain dots", "COMPONENT.CONNECTOR")),
    "formula component name": (lambda root: _e(_element(root, "ssd:System/ssd:Elements"), "ssd:Component",
                                               name="=cmd", source=FMU_FILES["duffing"]),
                               ("component '=cmd'", "nor start with = + - @")),
    "system binding without component": (lambda root: _element(
        root, "ssd:System/ssd:ParameterBindings/ssd:ParameterBinding").set("prefix", "nobody."),
        ("'nobody.c' names no component",)),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_each_unsupported_or_inconsistent_system_is_one_error(case, fmus, tmp_path, private_tmp):
    """Every refusal is one FmuError (one line) naming the element and the fix, and nothing
    extracted is left behind."""
    mutate, words = REFUSALS[case]
    root = base_ssd()
    mutate(root)
    ssp = write_ssp_archive(tmp_path / "bad.ssp", fmus, root)
    with pytest.raises(FmuError) as caught:
        open_system(ssp)
    _one_error(caught, *words)
    assert list(private_tmp.iterdir()) == []


def test_base_system_validates_so_that_refusals_are_the_readers(fmus, tmp_path):
    """The refusals above are the reader's own, not schema errors: each mutated SSD is valid."""
    from fmi_adjoint.fmu.ssp import ssp_schema

    schema = ssp_schema("SystemStructureDescription.xsd")
    for case, (mutate, _) in REFUSALS.items():
        root = base_ssd()
        mutate(root)
        assert schema.validate(root), (case, schema.error_log)


def test_connection_type_mismatch_is_refused(fmus, tmp_path):
    """An Integer output to a Real input (the input free: its connection removed)."""
    root = base_ssd()
    connections = _connections(root)
    connections.remove(connections[1])  # gain.y -> osc.u
    _connect("gain", "m", "osc", "u")(root)
    with pytest.raises(FmuError) as caught:
        open_system(write_ssp_archive(tmp_path / "types.ssp", fmus, root))
    _one_error(caught, "gain.m -> osc.u", "connects an Integer to a Real")


@pytest.mark.parametrize("source, words", [
    ("/etc/passwd", ("absolute or leaves",)),
    ("../osc.fmu", ("absolute or leaves",)),
    ("resources/%2E%2E/%2E%2E/osc.fmu", ("absolute or leaves",)),
    ("file:///tmp/osc.fmu", ("(file:)",)),
    ("http://example.org/osc.fmu", ("(http:)",)),
    ("resources/other.ssp#inner.ssd", ("query or fragment",)),
    ("resources/missing.fmu", ("no such file",)),
])
def test_component_sources_outside_the_ssd_folder_are_refused(source, words, fmus, tmp_path):
    root = base_ssd()
    _component(root, "osc").set("source", source)
    ssd = write_ssd_folder(tmp_path / "folder", fmus, root)
    with pytest.raises(FmuError) as caught:
        open_system(ssd)
    _one_error(caught, "component 'osc'", *words)


def test_symlinked_source_leaving_the_folder_is_refused(fmus, tmp_path):
    outside = tmp_path / "outside.fmu"
    outside.write_bytes(Path(fmus["osc"]).read_bytes())
    root = base_ssd()
    _component(root, "osc").set("source", "resources/link.fmu")
    ssd = write_ssd_folder(tmp_path / "folder", fmus, root)
    os.symlink(outside, tmp_path / "folder" / "resources" / "link.fmu")
    with pytest.raises(FmuError) as caught:
        open_system(ssd)
    _one_error(caught, "resolves outside")


# ------------------------------------------------------------------------- hostile archives --


def _symlink_entry() -> zipfile.ZipInfo:
    info = zipfile.ZipInfo("resources/link.ssv")
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


HOSTILE = {
    "zip slip": ([("../../evil.ssv", b"x")], ("'../../evil.ssv'", "path traversal", "SSP archive is refused")),
    "symlink": ([(_symlink_entry(), b"/etc/passwd")], ("'resources/link.ssv'", "symbolic link")),
    "duplicate": ([("resources/GAIN.ssv", b"x")], ("extract to the same file",)),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_archive_entries_are_refused(case, fmus, tmp_path, private_tmp):
    extra, words = HOSTILE[case]
    ssp = write_ssp_archive(tmp_path / "hostile.ssp", fmus, base_ssd(), extra=extra)
    with pytest.raises(FmuError) as caught:
        open_system(ssp)
    text = _one_error(caught, str(ssp), *words)
    assert "FMU" not in text.replace(str(ssp), "")
    assert list(private_tmp.iterdir()) == []
    assert not (tmp_path / "evil.ssv").exists()


def test_huge_entry_is_refused(fmus, tmp_path, private_tmp, monkeypatch):
    """The per-entry limit of the FMU importer, counted on the bytes unpacked (scaled down)."""
    monkeypatch.setattr(archive_module, "_MAX_ENTRY_BYTES", 2 * 1024**2)
    ssp = write_ssp_archive(tmp_path / "huge.ssp", fmus, base_ssd(),
                            extra=[("resources/noise.bin", os.urandom(3 * 1024**2))])
    with pytest.raises(FmuError) as caught:
        open_system(ssp)
    _one_error(caught, "'resources/noise.bin'", "limit per entry")
    assert list(private_tmp.iterdir()) == []


@pytest.mark.parametrize("declaration", [
    b'<!DOCTYPE ssd:SystemStructureDescription [<!ENTITY x SYSTEM "file:///etc/passwd">]>',
    b'<!DOCTYPE ssd:SystemStructureDescription SYSTEM "http://example.org/ssd.dtd">',
])
def test_dtd_or_entity_in_the_ssd_is_refused(declaration, fmus, tmp_path, private_tmp):
    data = _bytes(base_ssd()).replace(b"?>\n", b"?>\n" + declaration + b"\n", 1)
    assert declaration in data
    ssp = write_ssp_archive(tmp_path / "dtd.ssp", fmus, data)
    with pytest.raises(FmuError) as caught:
        open_system(ssp)
    _one_error(caught, "SystemStructure.ssd", "DOCTYPE or ENTITY")
    assert list(private_tmp.iterdir()) == []


def test_entity_in_an_ssv_is_refused(fmus, tmp_path):
    ssv = gain_ssv().replace(b"?>\n", b'?>\n<!DOCTYPE x [<!ENTITY e "3.0">]>\n', 1)
    ssp = tmp_path / "ssv.ssp"
    write_ssp_archive(ssp, fmus, base_ssd())
    with zipfile.ZipFile(ssp) as archive:
        entries = [(i.filename, archive.read(i)) for i in archive.infolist() if i.filename != "resources/gain.ssv"]
    with zipfile.ZipFile(ssp, "w") as archive:
        for name, data in entries:
            archive.writestr(name, data)
        archive.writestr("resources/gain.ssv", ssv)
    with pytest.raises(FmuError) as caught:
        open_system(ssp)
    _one_error(caught, "'resources/gain.ssv'", "DOCTYPE or ENTITY")


def test_schema_violation_and_missing_ssd_are_refused(fmus, tmp_path):
    root = base_ssd()
    _component(root, "gain").set("implementation", "Both")
    with pytest.raises(FmuError) as caught:
        open_system(write_ssp_archive(tmp_path / "schema.ssp", fmus, root))
    _one_error(caught, "violates the SSP 1.0 schema", "implementation")
    empty = tmp_path / "empty.ssp"
    with zipfile.ZipFile(empty, "w") as archive:
        archive.writestr("resources/gain.ssv", gain_ssv())
    with pytest.raises(FmuError) as caught:
        open_system(empty)
    _one_error(caught, "no SystemStructure.ssd")


def test_oversized_ssd_is_refused_unread(fmus, tmp_path, monkeypatch):
    import fmi_adjoint.ssp.reading as reading

    ssd = write_ssd_folder(tmp_path / "folder", fmus, base_ssd())
    monkeypatch.setattr(reading, "_MAX_XML_BYTES", ssd.stat().st_size - 1)
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail(f"{self} was read"))
    with pytest.raises(FmuError) as caught:
        open_system(ssd)
    _one_error(caught, str(ssd), "larger than")


def test_the_rig_runs_with_its_integer_system_input_unset_or_held(fmus, tmp_path):
    """The master on the rig (an Integer input fed through to an output): without an input table
    the input keeps the FMU's value (no Newton on it: it is no Real port), and from a table it
    is held between samples (m = 2 n stays a whole number) instead of interpolated."""
    from fmi_adjoint.ssp.master import InputTable, MasterSettings, held_inputs_note, simulate_system

    ssp = write_ssp_archive(tmp_path / "rig.ssp", fmus, base_ssd())
    with open_system(ssp) as system:
        # Said, not silent: the note the commands print without --inputs.
        assert "system input n_in of" in held_inputs_note(system.structure)
        t0 = system.structure.start_time or 0.0
        unset = simulate_system(system.structure, system.archives, t0 + 0.5, MasterSettings(0.1))
        assert np.all(np.isfinite(unset.values))
        table = InputTable(np.array([t0, t0 + 0.25, t0 + 0.5]), ("n_in",), np.array([[1.0], [2.0], [3.0]]))
        held = simulate_system(system.structure, system.archives, t0 + 0.5, MasterSettings(0.1), inputs=table)
    m = held.column("m_out")
    assert np.array_equal(m, np.round(m)) and set(m.tolist()) <= {2.0, 4.0, 6.0}, m
