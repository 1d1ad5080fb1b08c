"""Parameter identification over one or several experiments."""

from .optimize import OPTIMIZERS, IdentificationResult, identify
from .problem import GRADIENT_METHODS, Evaluation, Experiment, IdentificationProblem
from .scaling import ParameterScaling
from .strategies import (
    AbstractStrategy,
    AutomaticStrategy,
    ExperimentContinuation,
    GrowingWindows,
    SingleShooting,
    StagedResult,
    identify_staged,
)

__all__ = [
    "GRADIENT_METHODS",
    "OPTIMIZERS",
    "AbstractStrategy",
    "AutomaticStrategy",
    "Evaluation",
    "Experiment",
    "ExperimentContinuation",
    "GrowingWindows",
    "IdentificationProblem",
    "IdentificationResult",
    "ParameterScaling",
    "SingleShooting",
    "StagedResult",
    "identify",
    "identify_staged",
]
