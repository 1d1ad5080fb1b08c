"""Force elements: the contract, the registry and the built-in library."""

from typing import TYPE_CHECKING

from ..lazy import lazy_names

if TYPE_CHECKING:  # the names for type checkers and the API reference (griffe); loaded by __getattr__
    from .base import (
        AbstractForceElement,
        AbstractLocalElement,
        AbstractTwoPointElement,
        ElementContext,
        ElementParameter,
    )
    from .library import (
        DualMassFlywheelSpring,
        ElastoBacklash,
        ExpressionLoad,
        LinearSpringDamper,
        MagicFormula,
        MaxwellElement,
        PacejkaFriction,
        PolynomialSpringDamper,
        SplineCharacteristic,
        StribeckFriction,
        TableLoad,
        TorsionalVibrationDamper,
        VelocityCharacteristic,
    )
    from .registry import GROUP, PluginError, Registry, default_registry, element_type, element_types

_LOCATIONS = {
    "AbstractForceElement": "base",
    "AbstractLocalElement": "base",
    "AbstractTwoPointElement": "base",
    "DualMassFlywheelSpring": "library",
    "ElastoBacklash": "library",
    "ElementContext": "base",
    "ElementParameter": "base",
    "ExpressionLoad": "library",
    "GROUP": "registry",
    "LinearSpringDamper": "library",
    "MagicFormula": "library",
    "MaxwellElement": "library",
    "PacejkaFriction": "library",
    "PluginError": "registry",
    "PolynomialSpringDamper": "library",
    "Registry": "registry",
    "SplineCharacteristic": "library",
    "StribeckFriction": "library",
    "TableLoad": "library",
    "TorsionalVibrationDamper": "library",
    "VelocityCharacteristic": "library",
    "default_registry": "registry",
    "element_type": "registry",
    "element_types": "registry",
}

__all__ = [
    "GROUP",
    "AbstractForceElement",
    "AbstractLocalElement",
    "AbstractTwoPointElement",
    "DualMassFlywheelSpring",
    "ElastoBacklash",
    "ElementContext",
    "ElementParameter",
    "ExpressionLoad",
    "LinearSpringDamper",
    "MagicFormula",
    "MaxwellElement",
    "PacejkaFriction",
    "PluginError",
    "PolynomialSpringDamper",
    "Registry",
    "SplineCharacteristic",
    "StribeckFriction",
    "TableLoad",
    "TorsionalVibrationDamper",
    "VelocityCharacteristic",
    "default_registry",
    "element_type",
    "element_types",
]


#: The submodules, also reachable as attributes (``fmi_adjoint.forces.base``).
_SUBMODULES = (
    "base", "ccode", "library", "numeric", "registry", "smoothing",
)

__getattr__, __dir__ = lazy_names(__name__, _LOCATIONS, __all__, _SUBMODULES)
