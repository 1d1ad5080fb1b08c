"""Costs of sampled model outputs."""

from .base import AbstractCost, CostValue
from .fourier import FourierCoefficients, FourierCost
from .least_squares import LeastSquaresCost, trapezoidal_weights
from .sampling import Sampler

__all__ = [
    "AbstractCost",
    "CostValue",
    "FourierCoefficients",
    "FourierCost",
    "LeastSquaresCost",
    "Sampler",
    "trapezoidal_weights",
]
