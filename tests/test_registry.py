"""The force-element registry with faked entry points: one test per registration rule,
each checking that the message names the entry point, the distribution and the rule."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import pytest

from fmi_adjoint import ModelError
from fmi_adjoint.forces import (
    AbstractTwoPointElement,
    ElementParameter,
    LinearSpringDamper,
    PluginError,
    Registry,
    element_type,
)


class FakeDistribution:
    def __init__(self, name: str, version: str = "1.0"):
        self.name = name
        self.version = version
        self.metadata = {"Name": name}


class FakeEntryPoint:
    """Quacks like importlib.metadata.EntryPoint."""

    def __init__(self, name, obj, value="fake_pkg.elements:Thing", dist="fake-dist"):
        self.name = name
        self.value = value
        self.group = "fmi_adjoint.forces"
        self.dist = FakeDistribution(dist)
        self._obj = obj
        self.loads = 0

    def load(self):
        self.loads += 1
        if isinstance(self._obj, Exception):
            raise self._obj
        return self._obj


@dataclasses.dataclass(frozen=True)
class GoodSpring(AbstractTwoPointElement):
    type_name: ClassVar[str] = "good_spring"
    parameters: ClassVar[tuple[ElementParameter, ...]] = (ElementParameter("k", "N/m", 10.0, (0.0, 100.0)),)
    k: float | str | None = None

    def law(self, s, s_dot, p):
        return p["k"] * s


def make(name="bad_spring", decls=None, decorate=True, abstract=False, field_default=None):
    namespace = {
        "__annotations__": {"k": float | str | None},
        "type_name": name,
        "parameters": decls if decls is not None else (ElementParameter("k", "N/m", 10.0, (0.0, 100.0)),),
        "k": field_default,
    }
    namespace["__annotations__"]["type_name"] = ClassVar[str]
    namespace["__annotations__"]["parameters"] = ClassVar[tuple]
    if not abstract:
        namespace["law"] = lambda self, s, s_dot, p: p["k"] * s
    cls = type("BadSpring", (AbstractTwoPointElement,), namespace)
    return dataclasses.dataclass(frozen=True)(cls) if decorate else cls


def rule_error(entry_points, name) -> str:
    with pytest.raises(PluginError) as info:
        Registry(entry_points).get(name)
    message = str(info.value)
    assert "fake-dist" in message and "fake_pkg.elements:Thing" in message and f"'{name}'" in message
    return message


def test_a_valid_plugin_loads_lazily_and_once():
    ep = FakeEntryPoint("good_spring", GoodSpring)
    registry = Registry([ep])
    assert registry.names() == ["good_spring"] and ep.loads == 0
    assert registry.get("good_spring") is GoodSpring
    assert registry.get("good_spring") is GoodSpring
    assert ep.loads == 1
    assert registry.distribution("good_spring") == "fake-dist 1.0"


def test_not_a_subclass_of_the_element_base():
    message = rule_error([FakeEntryPoint("thing", object)], "thing")
    assert "subclass of the element base" in message and "AbstractForceElement" in message


def test_an_abstract_class():
    message = rule_error([FakeEntryPoint("bad_spring", make(abstract=True))], "bad_spring")
    assert "not abstract" in message and "law" in message


def test_entry_point_name_differs_from_the_element_name():
    message = rule_error([FakeEntryPoint("other_name", GoodSpring)], "other_name")
    assert "entry-point name = element name" in message and "good_spring" in message


def test_a_name_claimed_twice():
    eps = [FakeEntryPoint("good_spring", GoodSpring), FakeEntryPoint("good_spring", GoodSpring, value="x:Y")]
    message = rule_error(eps, "good_spring")
    assert "one element per name" in message and "x:Y" in message


@pytest.mark.parametrize(
    "decls, field_default, words",
    [
        ((ElementParameter("k", "N/m", 500.0, (0.0, 100.0)),), None, "outside its bounds"),
        ((ElementParameter("k", "N/m", 1.0, (5.0, 1.0)),), None, "not an interval"),
        ((ElementParameter("k", "N/m", float("nan")),), None, "not a finite number"),
        ((ElementParameter("k"), ElementParameter("k")), None, "declared twice"),
        ((ElementParameter("stiff"),), None, "no dataclass field"),
        ((ElementParameter("k"),), 3.0, "must default to None"),
        (("k",), None, "not an ElementParameter"),
    ],
)
def test_an_invalid_parameter_declaration(decls, field_default, words):
    cls = make(decls=decls, field_default=field_default)
    message = rule_error([FakeEntryPoint("bad_spring", cls)], "bad_spring")
    assert "valid parameter declaration" in message and words in message


def test_an_element_class_without_the_frozen_dataclass_decorator():
    message = rule_error([FakeEntryPoint("bad_spring", make(decorate=False))], "bad_spring")
    assert "immutable value" in message and "frozen" in message


def test_a_plugin_that_fails_to_import():
    message = rule_error([FakeEntryPoint("broken", ImportError("No module named 'numpyy'"))], "broken")
    assert "importable" in message and "numpyy" in message


def test_unknown_names_are_model_errors_listing_the_known_ones():
    registry = Registry([FakeEntryPoint("good_spring", GoodSpring)])
    with pytest.raises(ModelError, match="unknown element type 'nope'.*good_spring"):
        element_type("nope", registry=registry)


def test_a_broken_plugin_does_not_hide_the_others():
    registry = Registry([FakeEntryPoint("good_spring", GoodSpring), FakeEntryPoint("thing", object)])
    assert registry.get("good_spring") is GoodSpring
    with pytest.raises(PluginError):
        registry.get("thing")


def test_built_ins_are_values():
    spring = LinearSpringDamper("s", coordinates=("x",), stiffness="k")
    assert hash(spring) == hash(LinearSpringDamper("s", coordinates=("x",), stiffness="k"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spring.stiffness = "c"  # type: ignore[misc]
