"""Look-up of force-element types by the name used in model files.

Only model building calls :func:`element_type`; numerical code receives element
instances.  The entry-point registry of the force-plugin issue replaces the body of
:func:`element_types` without changing its callers.
"""

from __future__ import annotations

from ..errors import ModelError
from .base import AbstractForceElement
from .library import ExpressionLoad, LinearSpringDamper, PolynomialSpringDamper, TableLoad

__all__ = ["element_types", "element_type"]

_BUILTIN: tuple[type[AbstractForceElement], ...] = (
    LinearSpringDamper,
    PolynomialSpringDamper,
    ExpressionLoad,
    TableLoad,
)


def element_types() -> dict[str, type[AbstractForceElement]]:
    """All known element types by their ``type_name``."""
    return {cls.type_name: cls for cls in _BUILTIN}


def element_type(name: str, where: str = "force element") -> type[AbstractForceElement]:
    """The element class registered under ``name``.

    Raises
    ------
    ModelError
        If no element of that name is known; the message lists the known names.
    """
    types = element_types()
    if name not in types:
        raise ModelError(f"{where}: unknown element type {name!r}. Known types: {', '.join(sorted(types))}.")
    return types[name]
