"""Forward integration: consistent initialization, HHT, the frozen trajectory."""

from .hht import HHT, simulate, time_grid
from .initialization import InitialState, initial_state
from .trajectory import Trajectory

__all__ = ["HHT", "InitialState", "Trajectory", "initial_state", "simulate", "time_grid"]
