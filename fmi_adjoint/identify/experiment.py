"""One test run of an identification: a model, a cost with its data, and its settings."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from ..compiled import CompiledModel
from ..costs.base import AbstractCost
from ..engines import AbstractEngine, AutomaticEngine, choose_engine
from ..errors import IdentificationError
from ..integrate import AbstractScheme, Trajectory
from ..integrate.inputs import ParameterValues
from ..integrate.schemes import scheme_from_settings

__all__ = ["Experiment"]


@dataclasses.dataclass(frozen=True, eq=False)
class Experiment:
    """One test run: a model, a cost with its data, and the experiment's settings.

    Attributes
    ----------
    model : CompiledModel
    cost : AbstractCost
    values : mapping of str to float
        Parameter values of this experiment (the problem's ``--set`` values with its own
        settings, excitation amplitude, initial state, ...; a
        :class:`~fmi_adjoint.integrate.inputs.ParameterValues` is accepted); identified
        parameters override them.
    t_end, step : float, optional
        Defaults: the model's simulation settings.
    solver : AbstractScheme, optional
        HHT or generalized-alpha (default: the model's simulation settings).
    name : str
    engine : AbstractEngine, optional
        Runs the forward simulation, the adjoint and the sensitivities (default: the
        automatic choice of :func:`~fmi_adjoint.engines.choose_engine`, the native engine of
        ``model``, or the Python reference engine when the C engine cannot be built).
    engine_note : str or None
        Set when the default engine fell back to the Python engine: why (the note of
        :func:`~fmi_adjoint.engines.choose_engine`); None otherwise.
    """

    model: CompiledModel
    cost: AbstractCost
    values: Mapping[str, float] = dataclasses.field(default_factory=dict)
    t_end: float | None = None
    step: float | None = None
    solver: AbstractScheme | None = None
    name: str = "experiment"
    engine: AbstractEngine = None  # type: ignore[assignment]  # set in __post_init__
    engine_note: str | None = dataclasses.field(default=None, init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", ParameterValues.of(self.values).as_dict())
        if self.engine is None:
            built = choose_engine(self.model.model, AutomaticEngine(), compiled=self.model)
            object.__setattr__(self, "engine", built.engine)
            object.__setattr__(self, "engine_note", built.note)
        elif self.engine.compiled is not self.model:
            raise IdentificationError(f"experiment '{self.name}': its engine belongs to another compiled model.")

    def parameters(self, identified: Sequence[str], x: np.ndarray) -> np.ndarray:
        """Full parameter vector of this experiment with the identified values ``x``."""
        p = ParameterValues.of(self.values).vector(self.model)
        for name, value in zip(identified, x):
            p[self.model.parameter_index(name)] = value
        return p

    @property
    def scheme(self) -> AbstractScheme:
        """The integration scheme of this experiment's runs (``solver``, else the model's)."""
        return self.solver or scheme_from_settings(self.model.model.simulation)

    def simulate(self, p: np.ndarray) -> Trajectory:
        """Forward run of this experiment."""
        return self.engine.simulate(p, t_end=self.t_end, step=self.step, solver=self.scheme)

    def indices(self, names: Sequence[str]) -> np.ndarray:
        """Positions of the parameters ``names`` in this experiment's parameter vector."""
        return np.array([self.model.parameter_index(n) for n in names])
