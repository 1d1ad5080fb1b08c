"""Gradients of sampled-output costs: discrete adjoint, forward sensitivities, continuous adjoint."""

from .continuous import ContinuousAdjoint, continuous_adjoint, continuous_adjoint_gradient
from .discrete import GradientResult, adjoint_gradient, sampled_outputs
from .sensitivities import output_sensitivities, sensitivity_gradient

__all__ = [
    "ContinuousAdjoint",
    "GradientResult",
    "adjoint_gradient",
    "continuous_adjoint",
    "continuous_adjoint_gradient",
    "output_sensitivities",
    "sampled_outputs",
    "sensitivity_gradient",
]
