"""The force-element contract.

A force element is an immutable value (a frozen dataclass).  It states its law once,
symbolically; the model assembler sums the generalized forces of all elements, and
every derivative the engine needs (dQ/dq, dQ/dv, dQ/dp) as well as generated code
comes from that one statement.  Numerical loops never see element objects by name:
only model building looks names up (see :mod:`fmi_adjoint.forces.catalog`).

Adding an element
-----------------
1. Subclass :class:`AbstractForceElement` (or :class:`AbstractTwoPointElement` for a
   law between two coordinates or a coordinate and ground) as a frozen dataclass.
2. Give it a class attribute ``type_name``: the name used in model files.
3. Implement :meth:`AbstractForceElement.generalized_forces` (or
   :meth:`AbstractTwoPointElement.law`), building sympy expressions through the
   :class:`ElementContext` it receives.  Properties that users may set in a model file
   are dataclass fields holding expression strings or numbers.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import ClassVar, Protocol

import sympy as sp

from ..errors import ModelError

__all__ = ["ElementContext", "AbstractForceElement", "AbstractTwoPointElement"]


class ElementContext(Protocol):
    """What an element may ask of the model while it builds its law."""

    #: The time symbol.
    t: sp.Symbol

    def position(self, coordinate: str) -> sp.Symbol:
        """Symbol of the position of a coordinate (raises ModelError if unknown)."""

    def velocity(self, coordinate: str) -> sp.Symbol:
        """Symbol of the velocity of a coordinate (raises ModelError if unknown)."""

    def expression(self, value: str | float, where: str) -> sp.Expr:
        """Parse a property expression (parameters, coordinates, ``der(x)``, ``t``)."""

    def table(self, times: tuple[float, ...], values: tuple[float, ...], where: str) -> sp.Expr:
        """A function of time interpolating a table linearly, applied to ``t``."""


@dataclasses.dataclass(frozen=True)
class AbstractForceElement(abc.ABC):
    """Base of all force elements.

    Attributes
    ----------
    name : str
        Name of this element in the model (unique).
    """

    type_name: ClassVar[str] = ""
    name: str

    @abc.abstractmethod
    def generalized_forces(self, ctx: ElementContext) -> dict[str, sp.Expr]:
        """Generalized forces of this element, keyed by coordinate name.

        The returned expressions are *added* to the right-hand side Q of
        ``M a = Q - C_q^T lambda``; they may depend on positions, velocities, time
        and parameters, never on accelerations.
        """

    def where(self, prop: str = "") -> str:
        """Location string used in error messages."""
        suffix = f".{prop}" if prop else ""
        return f"force element '{self.name}' ({self.type_name}){suffix}"


@dataclasses.dataclass(frozen=True)
class AbstractTwoPointElement(AbstractForceElement):
    """An element acting along the relative coordinate of two coordinates.

    With ``coordinates = (i, j)`` the element sees ``s = q_i - q_j`` and
    ``s_dot = v_i - v_j``; with ``coordinates = (i,)`` the second end is ground
    (``s = q_i``).  :meth:`law` returns the element force ``f`` that *resists*
    extension::

        ground or q_j  |----/\\/\\/----[=]----|  q_i   ->  +s
                       f acts on q_i as -f and on q_j as +f

    so a spring ``f = k (s - L0)`` pulls ``q_i`` back when ``s > L0``.  The
    same convention holds for rotational coordinates with torques and angles.
    """

    coordinates: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        coords = tuple(self.coordinates)
        object.__setattr__(self, "coordinates", coords)
        if len(coords) not in (1, 2) or not all(isinstance(c, str) for c in coords):
            raise ModelError(
                f"{self.where('coordinates')}: expected one coordinate name (to ground) or two "
                f"(relative), got {self.coordinates!r}."
            )
        if len(coords) == 2 and coords[0] == coords[1]:
            raise ModelError(f"{self.where('coordinates')}: both ends are '{coords[0]}'; give two different coordinates.")

    @abc.abstractmethod
    def law(self, s: sp.Expr, s_dot: sp.Expr, ctx: ElementContext) -> sp.Expr:
        """Element force resisting the extension ``s`` (see class docstring)."""

    def generalized_forces(self, ctx: ElementContext) -> dict[str, sp.Expr]:
        first = self.coordinates[0]
        s = ctx.position(first)
        s_dot = ctx.velocity(first)
        if len(self.coordinates) == 2:
            s = s - ctx.position(self.coordinates[1])
            s_dot = s_dot - ctx.velocity(self.coordinates[1])
        f = self.law(s, s_dot, ctx)
        forces = {first: -f}
        if len(self.coordinates) == 2:
            forces[self.coordinates[1]] = f
        return forces
