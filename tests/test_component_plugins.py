"""Multibody component plugins (issue 23, item 1): the registry of the entry-point group
``fmi_adjoint.components`` with faked entry points (one test per registration rule), model files
that use a plugin component, ``fmi-adjoint plugins list|check`` on components, and the example
plugin ``plugins/fmi-adjoint-torsionbar`` (imported by path, not installed) against the closed
form of a torsional oscillator."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import sys
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from fmi_adjoint import ModelError, NativeEngine, parse_model
from fmi_adjoint.cli.main import main
from fmi_adjoint.componentcheck import check_component
from fmi_adjoint.forces import PluginError
from fmi_adjoint.mbs import MultibodySystem, registry
from fmi_adjoint.mbs.registry import BUILTIN_TYPES, SECTIONS, ComponentRegistry
from fmi_adjoint.model_file import MODEL_FILE_KEYS
from test_registry import FakeEntryPoint
from tolerances import SMALL_AMPLITUDE_PERIOD

PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "fmi-adjoint-torsionbar" / "src" / "fmi_adjoint_torsionbar"


def _plugin_module():
    """The example plugin's package, imported from its file (registered in sys.modules first:
    dataclasses resolve the ``ClassVar`` annotations through the module)."""
    name = "fmi_adjoint_torsionbar"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, PLUGIN / "__init__.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


TorsionBar = _plugin_module().TorsionBar


def torsion_registry(*extra) -> ComponentRegistry:
    return ComponentRegistry([FakeEntryPoint("torsion_bar", TorsionBar), *extra])


# --------------------------------------------------------------------------- the registry


def test_the_built_in_types_are_those_of_the_model_file():
    assert {section: set(BUILTIN_TYPES[section]) for section in SECTIONS} == \
        {section: set(MODEL_FILE_KEYS[section]) for section in SECTIONS}


def test_a_valid_component_loads_lazily_and_once():
    ep = FakeEntryPoint("torsion_bar", TorsionBar)
    reg = ComponentRegistry([ep])
    assert reg.names() == ["torsion_bar"] and ep.loads == 0
    assert reg.get("torsion_bar") is TorsionBar and reg.get("torsion_bar") is TorsionBar
    assert ep.loads == 1 and reg.distribution("torsion_bar") == "fake-dist 1.0"


def _component(name="my_part", section="forces", frozen=True, fields=("name",), methods=("lower", "where"),
               example=True, type_name=None):
    """A component class breaking (or keeping) each rule on demand."""
    namespace: dict = {"__annotations__": {f: str for f in fields}, "section": section,
                       "type_name": name if type_name is None else type_name}
    namespace["__annotations__"].update(section=ClassVar[str], type_name=ClassVar[str])
    for method in methods:
        namespace[method] = lambda self, *args: None
    if example:
        namespace["example"] = classmethod(lambda cls: TorsionBar.example())
    cls = type("MyPart", (), namespace)
    return dataclasses.dataclass(frozen=frozen)(cls)


def rule_error(obj, name="my_part") -> str:
    with pytest.raises(PluginError) as info:
        ComponentRegistry([FakeEntryPoint(name, obj)]).get(name)
    message = str(info.value)
    assert "\n" not in message
    assert "fake-dist" in message and "fake_pkg.elements:Thing" in message and f"'{name}'" in message
    assert "fmi_adjoint.components" in message
    return message


def test_the_rule_helper_accepts_a_good_component():
    cls = _component()
    assert ComponentRegistry([FakeEntryPoint("my_part", cls)]).get("my_part") is cls


@pytest.mark.parametrize("obj, name, words", [
    (object(), "my_part", "rule 'a class'"),
    (_component(frozen=False), "my_part", "rule 'immutable value'"),
    (_component(fields=("label",)), "my_part", "rule 'a name field'"),
    (_component(methods=("where",)), "my_part", "no method lower()"),
    (_component(methods=("lower",)), "my_part", "no method where()"),
    (_component(section="bodies"), "my_part", "rule 'a model-file section'"),
    (_component(type_name="other"), "my_part", "rule 'entry-point name = type name'"),
    (_component(name="revolute", section="joints", fields=("name", "marker_i", "marker_j")), "revolute",
     "rule 'not a built-in name'"),
    (_component(name="mbs_generalized_forces"), "mbs_generalized_forces", "rule 'not a built-in name'"),
    (_component(name="maxwell"), "maxwell", "rule 'not a force element's name'"),
    (_component(section="joints"), "my_part", "rule 'joint markers'"),
    (_component(example=False), "my_part", "rule 'an example'"),
    (ImportError("No module named 'sympyy'"), "my_part", "rule 'importable'"),
])
def test_each_broken_rule_is_one_plugin_error(obj, name, words):
    assert words in rule_error(obj, name)


def test_a_name_claimed_twice():
    reg = ComponentRegistry([FakeEntryPoint("torsion_bar", TorsionBar),
                             FakeEntryPoint("torsion_bar", TorsionBar, value="x:Y", dist="other-dist")])
    with pytest.raises(PluginError, match="one component per name.*x:Y.*other-dist"):
        reg.get("torsion_bar")


# --------------------------------------------------------------------------- model files

MODEL = """
[model]
name = "torsion_bar_oscillator"

[simulation]
t_end = 2.0
step = 1e-3
alpha = 0.0

[parameters]
J = { value = 0.02, unit = "kg m^2", bounds = [1e-6, 10.0] }
k_t = { value = 0.7895683520871486, unit = "N m/rad", bounds = [1e-3, 1e3] }

[[bodies]]
name = "disk"
type = "planar"
mass = 1.0
inertia = "J"
angle = 0.01

[[markers]]
name = "pivot"
body = "ground"

[[markers]]
name = "hub"
body = "disk"

[[joints]]
name = "hinge"
type = "revolute"
markers = ["pivot", "hub"]

[[forces]]
type = "torsion_bar"
name = "bar"
markers = ["pivot", "hub"]
stiffness = "k_t"

[[sensors]]
name = "angle"
type = "joint_coordinate"
joint = "hinge"
"""


def _period(t: np.ndarray, y: np.ndarray) -> float:
    """Mean period from the upward zero crossings (linear interpolation)."""
    idx = np.nonzero((y[:-1] < 0) & (y[1:] >= 0))[0]
    crossings = t[idx] - y[idx] * (t[idx + 1] - t[idx]) / (y[idx + 1] - y[idx])
    assert len(crossings) >= 2
    return float(np.mean(np.diff(crossings)))


@pytest.fixture(scope="module")
def oscillator():
    """The model file's torsional oscillator, built and run once."""
    model = parse_model(MODEL, components=torsion_registry())
    engine = NativeEngine.build(model)
    return model, engine, engine.simulate()


def test_a_model_file_uses_the_plugin_component(oscillator):
    model, _, _ = oscillator
    (element,) = model.forces
    assert element.type_name == "mbs_generalized_forces"
    assert [c for c, _ in element.forces] == ["disk_phi"]  # a torque on the disk's angle only


def test_torsion_bar_small_amplitude_period_is_the_closed_form(oscillator):
    model, engine, traj = oscillator
    J, k = (engine.compiled.parameter_vector()[engine.compiled.parameter_index(n)] for n in ("J", "k_t"))
    closed = 2 * math.pi * math.sqrt(J / k)
    assert abs(_period(traj.t, traj.outputs()[:, 0]) - closed) <= SMALL_AMPLITUDE_PERIOD * closed


def test_the_file_and_the_example_are_the_same_system():
    # The example is the file written in Python (its damping parameter aside).
    lowered = TorsionBar.example().to_model()
    from_file = parse_model(MODEL, components=torsion_registry())
    assert [c.name for c in lowered.coordinates] == [c.name for c in from_file.coordinates]
    assert str(lowered.forces[0].forces[0][1]) == "-d_t*der(disk_phi) - disk_phi*k_t"
    assert str(from_file.forces[0].forces[0][1]) == "-disk_phi*k_t"


def _variant(old: str, new: str) -> str:
    assert MODEL.count(old) == 1
    return MODEL.replace(old, new)


@pytest.mark.parametrize("text, words", [
    (_variant('stiffness = "k_t"', 'stiffness = "k_t"\nstifness = 3'),
     ["forces[0]", "unknown key(s) ['stifness'] for type 'torsion_bar'", "fake-dist", "stiffness"]),
    (_variant('stiffness = "k_t"\n', ""), ["forces[0]", "missing key(s) ['stiffness']"]),
    (_variant('type = "torsion_bar"', 'type = "torsion_barr"'),
     ["unknown element type 'torsion_barr'", "spring_damper", "component plugins: torsion_bar"]),
    (_variant('type = "revolute"', 'type = "hinge"'),
     ["is not a type of joints", "or a component plugin: torsion_bar"]),
    (_variant('type = "revolute"', 'type = "torsion_bar"'), ["'torsion_bar' is a component of [[forces]]",
                                                            "not of [[joints]]"]),
    (_variant('markers = ["pivot", "hub"]\nstiffness', 'markers = ["pivot", "nowhere"]\nstiffness'),
     ["line", "forces[0]", "nowhere"]),
])
def test_model_file_errors_name_the_entry(text, words):
    with pytest.raises(ModelError) as info:
        parse_model(text, components=torsion_registry())
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message, message


def test_a_broken_plugin_in_a_model_file_is_its_plugin_error():
    reg = torsion_registry(FakeEntryPoint("bad_bar", ImportError("No module named 'sympyy'")))
    with pytest.raises(PluginError, match="'bad_bar'.*importable.*sympyy"):
        parse_model(_variant('type = "torsion_bar"', 'type = "bad_bar"'), components=reg)


# --------------------------------------------------------------------------- fmi-adjoint plugins


@dataclasses.dataclass(frozen=True)
class FailingBar:
    """A component whose lowering fails: the check reports it instead of raising."""

    type_name: ClassVar[str] = "failing_bar"
    section: ClassVar[str] = "forces"
    name: str

    def where(self, prop: str = "") -> str:
        return f"failing bar '{self.name}'"

    def lower(self, ctx) -> None:
        raise KeyError("no such marker frame")

    @classmethod
    def example(cls) -> MultibodySystem:
        return dataclasses.replace(TorsionBar.example(), forces=(cls("bar"),))


@pytest.fixture
def installed(monkeypatch):
    """The default component registry: the torsion bar, a failing and a broken plugin."""
    reg = torsion_registry(FakeEntryPoint("failing_bar", FailingBar),
                           FakeEntryPoint("bad_bar", ImportError("No module named 'sympyy'")))
    monkeypatch.setattr(registry, "_DEFAULT", reg)
    return reg


def run(argv, capsys) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out, captured.err


def test_plugins_check_passes_on_the_torsion_bar(installed, capsys):
    code, out, err = run(["plugins", "check", "torsion_bar"], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "torsion_bar: ok"
    assert [line.split()[1] for line in lines[1:]] == ["example", "lowering", "build", "simulate", "assembly"]
    # 5 types: the translational masses (a number, a data slot), the rotational inertia (a
    # parameter slot), the torsion bar's torque, the hinge's rows, the angle output.
    assert "derived by components: 5 component types" in out


def test_check_component_reports_the_number_of_component_types():
    report = check_component(TorsionBar)
    assert report.passed and report.component_types == 5


def test_plugins_check_fails_on_a_failing_component(installed, capsys):
    code, out, err = run(["plugins", "check", "failing_bar"], capsys)
    assert code == 1
    assert "FAIL lowering" in out and "no such marker frame" in out
    assert err.count("\n") == 1 and "failing_bar" in err


def test_plugins_check_of_a_broken_plugin_is_one_line_exit_2(installed, capsys):
    code, out, err = run(["plugins", "check", "bad_bar"], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "'bad_bar'" in err and "fake-dist" in err and "importable" in err


def test_plugins_check_of_an_unknown_name_lists_both_kinds(installed, capsys):
    code, _, err = run(["plugins", "check", "torsion"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "linear_spring_damper" in err and "torsion_bar" in err


def test_plugins_list_shows_the_components(monkeypatch, capsys):
    monkeypatch.setattr(registry, "_DEFAULT", torsion_registry())
    code, out, _ = run(["plugins", "list"], capsys)
    assert code == 0
    assert "torsion_bar  (fake-dist 1.0; fmi_adjoint_torsionbar.TorsionBar; component of [[forces]])" in out
    assert "keys: name, marker_i, marker_j, stiffness, damping, free_angle" in out
