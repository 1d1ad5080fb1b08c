"""Parameter identification over one or several experiments.

The names below are imported on first use (PEP 562), so that importing this package is
cheap: :mod:`fmi_adjoint` imports it when it is itself imported (see there, ``identify``).
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_names

if TYPE_CHECKING:  # the names for type checkers and the API reference (griffe); loaded by __getattr__
    from .experiment import Experiment
    from .optimize import OPTIMIZERS, IdentificationResult, identify
    from .problem import GRADIENT_METHODS, Evaluation, IdentificationProblem
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

_LOCATIONS = {
    "GRADIENT_METHODS": "problem",
    "OPTIMIZERS": "optimize",
    "AbstractStrategy": "strategies",
    "AutomaticStrategy": "strategies",
    "Evaluation": "problem",
    "Experiment": "experiment",
    "ExperimentContinuation": "strategies",
    "GrowingWindows": "strategies",
    "IdentificationProblem": "problem",
    "IdentificationResult": "optimize",
    "ParameterScaling": "scaling",
    "SingleShooting": "strategies",
    "StagedResult": "strategies",
    "identify": "optimize",
    "identify_staged": "strategies",
}

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


__getattr__, __dir__ = lazy_names(__name__, _LOCATIONS, __all__)
