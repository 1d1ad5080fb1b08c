"""Costs of sampled model outputs."""

from .base import AbstractCost, CostValue
from .fourier import FourierCoefficients, FourierCost
from .least_squares import LeastSquaresCost, trapezoidal_weights
from .pod import PODCost, proper_orthogonal_modes
from .sampling import Sampler

__all__ = [
    "AbstractCost",
    "CostValue",
    "FourierCoefficients",
    "FourierCost",
    "LeastSquaresCost",
    "PODCost",
    "Sampler",
    "proper_orthogonal_modes",
    "trapezoidal_weights",
]
