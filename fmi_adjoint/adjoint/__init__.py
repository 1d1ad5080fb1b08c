"""Gradients of sampled-output costs: discrete adjoint and forward sensitivities."""

from .discrete import GradientResult, adjoint_gradient, sampled_outputs
from .sensitivities import output_sensitivities, sensitivity_gradient

__all__ = ["GradientResult", "adjoint_gradient", "output_sensitivities", "sampled_outputs", "sensitivity_gradient"]
