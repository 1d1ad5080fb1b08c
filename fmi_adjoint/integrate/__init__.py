"""Forward integration: consistent initialization, HHT, the frozen trajectory."""

from .hht import simulate, time_grid
from .schemes import HHT, AbstractScheme, GeneralizedAlpha
from .initialization import InitialState, initial_state
from .trajectory import Trajectory

__all__ = ["AbstractScheme", "GeneralizedAlpha", "HHT", "InitialState", "Trajectory", "initial_state", "simulate",
           "time_grid"]
