"""The multibody component registry: entry points of the group ``fmi_adjoint.components``
(issue 23, item 1: third-party components register like force elements do).

A distribution registers a joint, a force between markers or a sensor as::

    [project.entry-points."fmi_adjoint.components"]
    torsion_bar = "my_package:TorsionBar"

and model files use it as ``type = "torsion_bar"`` in the section the class names
(``section = "forces"``); the entry's other keys become the dataclass fields.  Entry points are
listed once and loaded lazily, by name; every loaded class is validated against the rules
below, and a broken plugin raises one :class:`~fmi_adjoint.forces.PluginError` naming the entry
point, its distribution, the rule and the fix.

The rules (the component contract of :class:`~fmi_adjoint.mbs.system.Component`, plus what the
model file and ``fmi-adjoint plugins check`` need):

1. a class, decorated ``@dataclasses.dataclass(frozen=True)`` itself (a value);
2. a dataclass field ``name``;
3. methods ``lower(self, ctx)`` and ``where(self, prop="")``;
4. a class attribute ``section``: ``"joints"``, ``"forces"`` or ``"sensors"`` (joints also
   need the fields ``marker_i`` and ``marker_j``, which the redundancy check reads);
5. a class attribute ``type_name`` equal to the entry-point name, not a built-in type of the
   model file (:data:`BUILTIN_TYPES`) nor, for forces, a registered force element;
6. a classmethod ``example()`` returning a small
   :class:`~fmi_adjoint.mbs.MultibodySystem` that uses the component (run by the check).

Bodies cannot be plugins: a body is a :class:`~fmi_adjoint.mbs.bodies.Body` with its own
coordinates and kinematics, which the lowering asks of every body.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, cast

from ..errors import ModelError
from ..forces.registry import RESERVED_NAMES, EntryPointRegistry, PluginError
from ..forces.registry import default_registry as default_force_registry

__all__ = ["BUILTIN_TYPES", "GROUP", "SECTIONS", "ComponentRegistry", "component_type", "default_registry",
           "validate_component_class"]

GROUP = "fmi_adjoint.components"

#: The model-file sections a component plugin may belong to.
SECTIONS = ("joints", "forces", "sensors")

#: The built-in component types of each section of the model-file format
#: (:data:`fmi_adjoint.model_file.MODEL_FILE_KEYS`; a test keeps the two equal).  Built-in names
#: win, so a plugin may not take one of them (nor a reserved force-element name).
BUILTIN_TYPES: Mapping[str, frozenset[str]] = {
    "joints": frozenset({"revolute", "prismatic", "cylindrical", "spherical", "universal", "planar", "fixed"}),
    "forces": frozenset({"spring_damper", "bushing", "joint_force", "force", "torque"}),
    "sensors": frozenset({"marker_position", "marker_velocity", "marker_acceleration", "angular_velocity",
                          "angular_acceleration", "orientation", "relative_displacement", "distance",
                          "joint_coordinate", "joint_reaction", "strain"}),
}
_RESERVED = frozenset().union(*BUILTIN_TYPES.values()) | RESERVED_NAMES | {"point_mass", "planar", "spatial"}


def validate_component_class(cls: object, entry_name: str, where: str, force_names: Iterable[str] = ()) -> type:
    """Check a loaded class against the registration rules (module docstring); returns it.

    ``force_names``: the registered force elements (a plugin of section ``"forces"`` may not
    take one of their names: the force element would win in a model file).

    Raises
    ------
    PluginError
        Naming ``where`` (the entry point and its distribution), the broken rule and the fix.
    """
    def broken(rule: str, text: str) -> PluginError:
        return PluginError(f"{where}: rule '{rule}' broken: {text}")

    if not inspect.isclass(cls):
        raise broken("a class", f"{cls!r} is not a class. Point the entry point at the component's class.")
    own = cls.__dict__.get("__dataclass_params__")
    if own is None or not own.frozen:
        raise broken("immutable value", f"{cls.__name__} is not a frozen dataclass. Decorate it with "
                     "@dataclasses.dataclass(frozen=True).")
    fields = {f.name for f in dataclasses.fields(cast(Any, cls))}
    if "name" not in fields:
        raise broken("a name field", f"{cls.__name__} has no dataclass field 'name'. Add 'name: str' (components "
                     "are named in messages and generated items).")
    for method in ("lower", "where"):
        if not callable(getattr(cls, method, None)):
            signature = "lower(self, ctx: Lowering) -> None" if method == "lower" else "where(self, prop='') -> str"
            raise broken("the component contract", f"{cls.__name__} has no method {method}(). Add "
                         f"'def {signature}' (see fmi_adjoint.mbs.Component).")
    section = getattr(cls, "section", None)
    if section not in SECTIONS:
        raise broken("a model-file section", f"{cls.__name__}.section is {section!r}; set the class attribute "
                     f"section to one of {', '.join(repr(s) for s in SECTIONS)} (bodies cannot be plugins).")
    type_name = getattr(cls, "type_name", None)
    if type_name != entry_name:
        raise broken("entry-point name = type name", f"the entry point is named '{entry_name}' but "
                     f"{cls.__name__}.type_name is {type_name!r}. Make them equal.")
    if entry_name in _RESERVED:
        raise broken("not a built-in name", f"'{entry_name}' is a built-in type of the model file (built-in names "
                     "win). Rename the component and its entry point.")
    if section == "forces" and entry_name in set(force_names):
        raise broken("not a force element's name", f"'{entry_name}' is a registered force element, which a [[forces]] "
                     "entry of that type would mean. Rename the component and its entry point.")
    if section == "joints" and not {"marker_i", "marker_j"} <= fields:
        raise broken("joint markers", f"{cls.__name__} is a joint without the fields marker_i and marker_j (the "
                     "check of redundant joints reads them). Add them.")
    if not isinstance(inspect.getattr_static(cls, "example", None), classmethod):
        raise broken("an example", f"{cls.__name__} has no classmethod example(). Add one returning a small "
                     "MultibodySystem that uses the component (fmi-adjoint plugins check runs it).")
    return cls


class ComponentRegistry(EntryPointRegistry):
    """Component classes by type name (:class:`~fmi_adjoint.forces.registry.EntryPointRegistry`,
    group :data:`GROUP`)."""

    group: ClassVar[str] = GROUP
    kind: ClassVar[str] = "component"
    noun: ClassVar[str] = "component"

    def validate(self, cls: object, name: str, where: str) -> type:
        # A component of the forces section may not take a force element's name.
        force_names = default_force_registry().names() if getattr(cls, "section", None) == "forces" else ()
        return validate_component_class(cls, name, where, force_names)


_DEFAULT: ComponentRegistry | None = None


def default_registry() -> ComponentRegistry:
    """The registry of the installed entry points (created on first use)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = ComponentRegistry()
    return _DEFAULT


def component_type(name: str, section: str, where: str, registry: ComponentRegistry | None = None) -> type:
    """The component class registered as ``name`` for the model-file ``section``.

    Raises
    ------
    ModelError
        If no plugin has that name (the message lists the built-in types of the section and the
        plugins) or the plugin belongs to another section.
    PluginError
        If the plugin is broken.
    """
    reg = registry or default_registry()
    try:
        cls = reg.get(name)
    except KeyError:
        builtin = ", ".join(f'"{k}"' for k in sorted(BUILTIN_TYPES.get(section, ())))
        plugins = ", ".join(f'"{k}"' for k in reg.names()) or "(none installed)"
        raise ModelError(f"{where}: unknown type {name!r}. Built-in types of [[{section}]]: {builtin}; component "
                         f"plugins: {plugins}.") from None
    if cls.section != section:  # type: ignore[attr-defined]
        raise ModelError(f"{where}: '{name}' is a component of [[{cls.section}]] "  # type: ignore[attr-defined]
                         f"({reg.distribution(name)}), not of [[{section}]]; move the entry there.")
    return cls
