"""Parameter identification over one or several experiments.

The names below are imported on first use (PEP 562), so that importing this package is
cheap: :mod:`fmi_adjoint` imports it when it is itself imported (see there, ``identify``).
"""

import importlib
from typing import TYPE_CHECKING

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


def __getattr__(name: str):
    module = _LOCATIONS.get(name)
    if module is None:
        raise AttributeError(f"module 'fmi_adjoint.identify' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
