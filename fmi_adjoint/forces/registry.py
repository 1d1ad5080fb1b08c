"""The force-element registry: entry points of the group ``fmi_adjoint.forces``.

Built-in elements are registered in fmi-adjoint's own ``pyproject.toml`` exactly as a
third-party distribution registers its elements::

    [project.entry-points."fmi_adjoint.forces"]
    hydro_bushing = "my_package.elements:HydroBushing"

Entry points are listed once and loaded lazily, by name, on first use; every loaded
class is validated, and a broken plugin raises one :class:`PluginError` naming the entry
point, its distribution and the rule it breaks.  Only model building looks names up;
the numerical code receives element instances.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Iterable
from importlib import metadata
from typing import ClassVar, Protocol, cast

from ..errors import FmiAdjointError
from .base import AbstractForceElement, ElementParameter

__all__ = ["GROUP", "RESERVED_NAMES", "PluginError", "Registry", "default_registry", "element_type", "element_types"]

GROUP = "fmi_adjoint.forces"

#: Type names a plugin may not register: the multibody force types of the model-file format
#: (:mod:`fmi_adjoint.model_file`, issue 23), which the reader builds itself, and the internal
#: element that carries the generalized forces of multibody components.
RESERVED_NAMES = frozenset({"spring_damper", "bushing", "joint_force", "force", "torque", "mbs_generalized_forces"})


class PluginError(FmiAdjointError, TypeError):
    """A force-element plugin breaks a registration rule."""


class _EntryPoint(Protocol):
    """What the registry uses of an entry point: ``importlib.metadata.EntryPoint`` or a test's fake
    (``dist`` is read with getattr: fakes may lack it)."""

    @property
    def name(self) -> str: ...

    @property
    def value(self) -> str: ...

    def load(self) -> object: ...


def _distribution(entry_point) -> str:
    dist = getattr(entry_point, "dist", None)
    if dist is None:
        return "unknown distribution"
    name = getattr(dist, "name", None) or dist.metadata.get("Name", "unknown distribution")
    version = getattr(dist, "version", "")
    return f"{name} {version}".strip()


def validate_element_class(cls: object, entry_name: str, where: str) -> type[AbstractForceElement]:
    """Check a loaded class against the registration rules; raises PluginError."""
    if not (inspect.isclass(cls) and issubclass(cls, AbstractForceElement)):
        raise PluginError(
            f"{where}: rule 'subclass of the element base' broken: {cls!r} is not a subclass of "
            "fmi_adjoint.forces.AbstractForceElement. Derive the element from it (or from "
            "AbstractTwoPointElement / AbstractLocalElement)."
        )
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(getattr(cls, "__abstractmethods__", ())))
        raise PluginError(
            f"{where}: rule 'not abstract' broken: {cls.__name__} does not implement {missing}. Implement them."
        )
    # The class itself must be decorated: a subclass without the decorator inherits the
    # base's dataclass machinery but its own attributes are neither fields nor frozen.
    own = cls.__dict__.get("__dataclass_params__")
    if own is None or not own.frozen:
        raise PluginError(
            f"{where}: rule 'immutable value' broken: {cls.__name__} is not a frozen dataclass. "
            "Decorate it with @dataclasses.dataclass(frozen=True)."
        )
    if cls.type_name != entry_name:
        raise PluginError(
            f"{where}: rule 'entry-point name = element name' broken: the entry point is named "
            f"'{entry_name}' but {cls.__name__}.type_name is {cls.type_name!r}. Make them equal."
        )
    fields = {f.name: f for f in dataclasses.fields(cls)}
    seen: set[str] = set()
    for decl in cls.parameters:
        problem = _declaration_problem(decl, fields, seen)
        if problem:
            raise PluginError(f"{where}: rule 'valid parameter declaration' broken: {problem}")
        seen.add(decl.name)
    return cls


def _declaration_problem(decl: object, fields: dict, seen: set[str]) -> str | None:
    if not isinstance(decl, ElementParameter):
        return f"{decl!r} is not an ElementParameter."
    if not decl.name.isidentifier():
        return f"parameter name {decl.name!r} is not an identifier."
    if decl.name in seen:
        return f"parameter '{decl.name}' is declared twice."
    if decl.name not in fields:
        return f"parameter '{decl.name}' has no dataclass field of that name; add '{decl.name}: ... = None'."
    if fields[decl.name].default is not None:
        return f"the field '{decl.name}' must default to None (unbound: the declared default applies)."
    lo, hi = decl.bounds
    if (not (isinstance(lo, (int, float)) and isinstance(hi, (int, float)))
            or math.isnan(lo) or math.isnan(hi) or lo > hi):
        return f"parameter '{decl.name}': bounds {decl.bounds!r} are not an interval [lo, hi]."
    if not isinstance(decl.default, (int, float)) or not math.isfinite(decl.default):
        return f"parameter '{decl.name}': default {decl.default!r} is not a finite number."
    if not lo <= decl.default <= hi:
        return f"parameter '{decl.name}': default {decl.default} lies outside its bounds [{lo}, {hi}]."
    if not isinstance(decl.unit, str) or not isinstance(decl.description, str):
        return f"parameter '{decl.name}': unit and description must be strings."
    return None


class EntryPointRegistry:
    """Plugin classes by name, loaded lazily from the entry points of :attr:`group` and checked
    against the rules of their kind (:meth:`validate`) when first asked for.  The force
    elements (:class:`Registry`) and the multibody components
    (:class:`fmi_adjoint.mbs.registry.ComponentRegistry`) are its two kinds.

    Parameters
    ----------
    entry_points : iterable of importlib.metadata.EntryPoint, optional
        Defaults to the installed entry points of :attr:`group`.  Tests pass fakes
        (any objects with ``name``, ``value``, ``dist`` and ``load()``).
    """

    #: The entry-point group.
    group: ClassVar[str]
    #: What a plugin is called in messages (``force-element``) and what it registers (``element``).
    kind: ClassVar[str]
    noun: ClassVar[str]
    #: Names a plugin may not take.
    reserved: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, entry_points: Iterable[_EntryPoint] | None = None):
        if entry_points is None:
            entry_points = metadata.entry_points(group=self.group)
        self._entries: dict[str, _EntryPoint] = {}
        self._duplicates: dict[str, list] = {}
        for ep in entry_points:
            if ep.name in self._entries:
                self._duplicates.setdefault(ep.name, [self._entries[ep.name]]).append(ep)
            else:
                self._entries[ep.name] = ep
        self._loaded: dict[str, type] = {}

    def names(self) -> list[str]:
        """All registered names (nothing is imported)."""
        return sorted(self._entries)

    def entry_point(self, name: str):
        """The entry point registered under ``name``."""
        return self._entries[name]

    def distribution(self, name: str) -> str:
        """Name and version of the distribution that registers ``name``."""
        return _distribution(self._entries[name])

    def describe(self, entry_point) -> str:
        """The plugin, for messages: its name, entry point, group and distribution."""
        return (f"{self.kind} plugin '{entry_point.name}' (entry point '{entry_point.value}' in group "
                f"'{self.group}', distribution '{_distribution(entry_point)}')")

    def validate(self, cls: object, name: str, where: str) -> type:
        """``cls`` if it keeps the rules of this kind of plugin, else :class:`PluginError`."""
        raise NotImplementedError

    def get(self, name: str) -> type:
        """Load, validate and return the class registered as ``name``.

        Raises
        ------
        KeyError
            If no entry point has that name (callers turn it into a ModelError).
        PluginError
            If the plugin breaks a rule.
        """
        if name in self._loaded:
            return self._loaded[name]
        ep = self._entries[name]
        if name in self.reserved:
            raise PluginError(
                f"{self.describe(ep)}: rule 'reserved name' broken: '{name}' is a multibody force type of the "
                f"model-file format (reserved: {', '.join(sorted(self.reserved))}). Rename the {self.noun} and its "
                "entry point."
            )
        if name in self._duplicates:
            claimants = ", ".join(f"'{e.value}' ({_distribution(e)})" for e in self._duplicates[name])
            raise PluginError(
                f"{self.describe(ep)}: rule 'one {self.noun} per name' broken: the name is claimed by {claimants}. "
                f"Uninstall one of the distributions or rename its {self.noun}."
            )
        try:
            cls = ep.load()
        except Exception as exc:  # any import failure of third-party code
            raise PluginError(
                f"{self.describe(ep)}: rule 'importable' broken: loading it raised {type(exc).__name__}: {exc}. "
                "Fix the plugin or uninstall its distribution."
            ) from None
        self._loaded[name] = self.validate(cls, name, self.describe(ep))
        return self._loaded[name]

    def all(self) -> dict[str, type]:
        """Load and validate every registered class."""
        return {name: self.get(name) for name in self.names()}


class Registry(EntryPointRegistry):
    """Force-element classes by name (:class:`EntryPointRegistry`, group :data:`GROUP`)."""

    group: ClassVar[str] = GROUP
    kind: ClassVar[str] = "force-element"
    noun: ClassVar[str] = "element"
    reserved: ClassVar[frozenset[str]] = RESERVED_NAMES

    def validate(self, cls: object, name: str, where: str) -> type[AbstractForceElement]:
        return validate_element_class(cls, name, where)

    def get(self, name: str) -> type[AbstractForceElement]:
        return cast("type[AbstractForceElement]", super().get(name))

    def all(self) -> dict[str, type[AbstractForceElement]]:
        return {name: self.get(name) for name in self.names()}


_DEFAULT: Registry | None = None


def default_registry() -> Registry:
    """The registry of the installed entry points (created on first use)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Registry()
    return _DEFAULT


def element_types(registry: Registry | None = None) -> dict[str, type[AbstractForceElement]]:
    """All element classes by name (loads every plugin)."""
    return (registry or default_registry()).all()


def element_type(name: str, where: str = "force element", registry: Registry | None = None):
    """The element class registered as ``name``.

    Raises
    ------
    ModelError
        If no element has that name (the message lists the registered names).
    PluginError
        If the plugin is broken.
    """
    from ..errors import ModelError

    reg = registry or default_registry()
    try:
        return reg.get(name)
    except KeyError:
        known = ", ".join(reg.names()) or "(none: is fmi-adjoint installed? run ./run once)"
        raise ModelError(f"{where}: unknown element type {name!r}. Known types: {known}.") from None
