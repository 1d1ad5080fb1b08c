"""Costs of sampled model outputs."""

from .base import AbstractCost, CostValue
from .fourier import FourierCoefficients, FourierCost
from .least_squares import LeastSquaresCost, trapezoidal_weights
from .orders import EngineOrderCost, RunUp
from .pod import PODCost, proper_orthogonal_modes
from .sampling import Sampler
from .sensors import SensorCost, SensorModel

__all__ = [
    "AbstractCost",
    "CostValue",
    "EngineOrderCost",
    "FourierCoefficients",
    "FourierCost",
    "LeastSquaresCost",
    "PODCost",
    "RunUp",
    "Sampler",
    "SensorCost",
    "SensorModel",
    "proper_orthogonal_modes",
    "trapezoidal_weights",
]
