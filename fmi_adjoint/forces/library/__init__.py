"""The built-in element library (registered through entry points like any plugin)."""

from .dampers import MaxwellElement, TorsionalVibrationDamper
from .drivetrain import DualMassFlywheelSpring, ElastoBacklash
from .friction import MagicFormula, PacejkaFriction, StribeckFriction
from .loads import ExpressionLoad, TableLoad
from .springs import LinearSpringDamper, PolynomialSpringDamper, SplineCharacteristic, VelocityCharacteristic

__all__ = [
    "DualMassFlywheelSpring",
    "ElastoBacklash",
    "ExpressionLoad",
    "LinearSpringDamper",
    "MagicFormula",
    "MaxwellElement",
    "PacejkaFriction",
    "PolynomialSpringDamper",
    "SplineCharacteristic",
    "StribeckFriction",
    "TableLoad",
    "TorsionalVibrationDamper",
    "VelocityCharacteristic",
]
