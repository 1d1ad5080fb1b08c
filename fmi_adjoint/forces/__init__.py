"""Force elements: the contract, the built-in elements and their catalogue."""

from .base import AbstractForceElement, AbstractTwoPointElement, ElementContext
from .catalog import element_type, element_types
from .library import ExpressionLoad, LinearSpringDamper, PolynomialSpringDamper, TableLoad

__all__ = [
    "AbstractForceElement",
    "AbstractTwoPointElement",
    "ElementContext",
    "ExpressionLoad",
    "LinearSpringDamper",
    "PolynomialSpringDamper",
    "TableLoad",
    "element_type",
    "element_types",
]
