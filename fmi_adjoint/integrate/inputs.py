"""The checked inputs of a run (the one value the engines' kernels trust), and the
parameter values a user gives by name.

The engine front door (:meth:`fmi_adjoint.engines.AbstractEngine.simulate` through
:func:`~fmi_adjoint.integrate.hht.prepare_run`, and the engines' trajectory check before a
sweep) is the only place that validates what a caller gives: it makes a :class:`RunInputs`
with :meth:`RunInputs.checked`, and everything below it (the Python loops, the C engine's
:class:`~fmi_adjoint.native.NativeLibrary` and its driver) takes that value as it is.  The C
runtime keeps only the checks an FMU needs (FMUs are called by third parties: settings and
states set through the FMI functions).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np

from ..compiled import CompiledModel
from ..errors import ModelError
from .schemes import AbstractScheme

__all__ = ["ParameterValues", "RunInputs", "checked_parameters", "checked_scheme"]


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def checked_parameters(p: object, names: tuple[str, ...], model_name: str, *, finite: bool = True) -> np.ndarray:
    """``p`` as a read-only, contiguous float64 copy of shape ``(len(names),)`` with finite
    values (ModelError naming the shape or the non-finite parameters otherwise).

    ``finite=False`` leaves non-finite values to the C engine, for a run made as an FMU
    makes it (:meth:`fmi_adjoint.native.NativeLibrary.simulate`: the engine reports them)."""
    try:
        value = np.array(p, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"parameter vector {p!r} is not an array of numbers; model '{model_name}' needs "
                         f"{len(names)} values ({', '.join(names)}).") from None
    if value.shape != (len(names),):
        raise ModelError(f"parameter vector has shape {value.shape}; model '{model_name}' needs ({len(names)},).")
    if finite and not np.all(np.isfinite(value)):
        bad = [names[k] for k in np.flatnonzero(~np.isfinite(value))]
        raise ModelError(f"parameter(s) {bad} are not finite; give finite values.")
    return _frozen(np.ascontiguousarray(value))


def checked_scheme(solver: object) -> AbstractScheme:
    """``solver`` if it is an integration scheme (ModelError naming the fix otherwise)."""
    if not isinstance(solver, AbstractScheme):
        raise ModelError(f"solver = {solver!r} is not an integration scheme; give HHT(...) or GeneralizedAlpha(...).")
    return solver


@dataclasses.dataclass(frozen=True, eq=False)
class RunInputs:
    """Parameter vector, integration scheme and time grid of one run, checked against one
    model (a frozen value: made by :meth:`checked` at the engine front door, trusted below).

    Attributes
    ----------
    p : numpy.ndarray, shape (n_p,)
        Finite values; read-only, contiguous float64 (a copy of what the caller gave).
    scheme : AbstractScheme
        HHT or generalized-alpha (:mod:`fmi_adjoint.integrate.schemes`).
    grid : numpy.ndarray, shape (N+1,)
        Strictly increasing finite step times, ``N >= 1``; read-only, contiguous float64.
    """

    p: np.ndarray
    scheme: AbstractScheme
    grid: np.ndarray

    @property
    def n_steps(self) -> int:
        """Number of steps N."""
        return len(self.grid) - 1

    @classmethod
    def checked(cls, p: object, scheme: object, grid: object, *, parameter_names: tuple[str, ...],
                model_name: str) -> RunInputs:
        """The front door's check: ``p`` (:func:`checked_parameters`), ``scheme`` an
        :class:`~fmi_adjoint.integrate.schemes.AbstractScheme`, ``grid`` at least two strictly
        increasing finite times.

        Raises
        ------
        ModelError
            Naming the argument, what was given and what is allowed.
        """
        values = checked_parameters(p, parameter_names, model_name)
        solver = checked_scheme(scheme)
        try:
            times = np.array(grid, dtype=float)
        except (TypeError, ValueError):
            raise ModelError(f"time grid {grid!r} is not an array of numbers.") from None
        if times.ndim != 1 or len(times) < 2 or not np.all(np.isfinite(times)) or not np.all(np.diff(times) > 0):
            first = float(times.flat[0]) if times.size else math.nan
            raise ModelError(f"the time grid (shape {times.shape}, starting at {first!r}) must hold at least two "
                             "strictly increasing finite times; make it with fmi_adjoint.integrate.time_grid.")
        return cls(p=values, scheme=solver, grid=_frozen(np.ascontiguousarray(times)))


@dataclasses.dataclass(frozen=True)
class ParameterValues:
    """Parameter values by name (``--set NAME=VALUE``): the one route of values a user gives
    from the command line to an engine (issue 29).

    A value, not a model change: the model keeps its declared values (its build-cache key
    leaves values out anyway), and the front door resolves this into the parameter vector
    ``p`` of a run (:meth:`vector`).  An identification starts from it (:meth:`start`).
    Plain data (a tuple of pairs): hashable, picklable, and its ``repr`` is stable, so it
    travels to workers and into digests.

    Attributes
    ----------
    items : tuple of (str, float)
        Name and value, each name once, in the order given.
    """

    items: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        try:
            items = tuple((str(name), float(value)) for name, value in self.items)
        except (TypeError, ValueError):
            raise ModelError(f"parameter values {self.items!r}: give (name, number) pairs.") from None
        names = [name for name, _ in items]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ModelError(f"parameter value(s) {repeated} are given twice; give each name once.")
        object.__setattr__(self, "items", items)

    @classmethod
    def of(cls, values: ParameterValues | Mapping[str, float] | None) -> ParameterValues:
        """``values`` as a ParameterValues (a mapping in its order; None: no values)."""
        if isinstance(values, ParameterValues):
            return values
        return cls(tuple((values or {}).items()))

    def as_dict(self) -> dict[str, float]:
        return dict(self.items)

    def updated(self, other: ParameterValues | Mapping[str, float] | None) -> ParameterValues:
        """These values with ``other``'s replacing or adding to them (an experiment's own
        settings over the problem's)."""
        return ParameterValues.of({**self.as_dict(), **ParameterValues.of(other).as_dict()})

    def vector(self, model: CompiledModel) -> np.ndarray:
        """The parameter vector of a run of ``model``: its declared values with these
        replaced (ModelError naming an unknown name and the model's parameters)."""
        return model.parameter_vector(self.as_dict())

    def start(self, model: CompiledModel, names: Sequence[str]) -> dict[str, float]:
        """The start of an identification of ``names``: these values, else the declared ones."""
        p = self.vector(model)
        return {name: float(p[model.parameter_index(name)]) for name in names}
