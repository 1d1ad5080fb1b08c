"""Parameter identification over one or several experiments."""

from .optimize import OPTIMIZERS, IdentificationResult, identify
from .problem import GRADIENT_METHODS, Evaluation, Experiment, IdentificationProblem
from .scaling import ParameterScaling

__all__ = [
    "GRADIENT_METHODS",
    "OPTIMIZERS",
    "Evaluation",
    "Experiment",
    "IdentificationProblem",
    "IdentificationResult",
    "ParameterScaling",
    "identify",
]
