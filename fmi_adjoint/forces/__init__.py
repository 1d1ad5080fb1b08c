"""Force elements: the contract, the registry and the built-in library."""

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
