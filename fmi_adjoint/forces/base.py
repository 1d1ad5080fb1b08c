"""The force-element contract.

A force element is an immutable value (a frozen dataclass).  It states its law once,
symbolically; the model assembler scatters the element's local forces into the global
force vector (finite-element style), and every derivative the engine needs (dQ/dq,
dQ/dv, dQ/dp), the consistency checks and the C code for FMU export all come from that
one statement.  Numerical loops never see elements by name: only model building looks
names up (:mod:`fmi_adjoint.forces.registry`).

Writing an element (numbered recipe)
------------------------------------
1. Subclass :class:`AbstractTwoPointElement` (a law ``f(s, s_dot)`` between two
   coordinates or a coordinate and ground) or :class:`AbstractLocalElement` (any number
   of coordinates and internal massless nodes), as a ``@dataclass(frozen=True)``.
2. Set the class attributes ``type_name`` (the name in model files and the entry point)
   and ``parameters``: one :class:`ElementParameter` per property, each also a dataclass
   field with default ``None``.  A property the model does not bind becomes a model
   parameter ``<element name>_<property>`` with the declared default, unit and bounds,
   so it can be identified like any other parameter.
3. Implement ``law`` (two-point) or ``local_forces`` using sympy functions of the
   symbols you receive.  Non-smooth laws must be smoothed (see
   :mod:`fmi_adjoint.forces.smoothing`); gradients then belong to the smoothed model.
4. Register the class under the entry-point group ``fmi_adjoint.forces`` with the
   entry-point name equal to ``type_name`` and run ``fmi-adjoint plugins check NAME``.

Elements whose law cannot be written symbolically subclass
:class:`~fmi_adjoint.forces.numeric.AbstractNumericElement` instead and supply the
force, its Jacobians and C code by hand; the check verifies them.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeAlias

from ..errors import ModelError

if TYPE_CHECKING:
    import sympy as sp
else:  # sympy is imported on first use: a warm start never uses it (issue 24, part 6)
    from ..deferred import sympy as sp

__all__ = [
    "ElementParameter",
    "ElementContext",
    "AbstractForceElement",
    "AbstractLocalElement",
    "AbstractTwoPointElement",
]

Number: TypeAlias = "str | float | int | sp.Expr"
ParameterValue: TypeAlias = "sp.Expr | tuple[sp.Expr, ...]"


@dataclasses.dataclass(frozen=True)
class ElementParameter:
    """Declaration of one element property.

    Attributes
    ----------
    name : str
        Property name (a dataclass field of the element).
    unit : str
    default : float
        Value used when the model leaves the property unbound.
    bounds : tuple of float
        Physically admissible interval (used for identification bounds and by the
        element check, which samples parameters inside it).
    description : str
    vector : bool
        A list of values (e.g. the branch stiffnesses of a TVD); vectors must be bound
        in the model and cannot default.
    """

    name: str
    unit: str = ""
    default: float = 0.0
    bounds: tuple[float, float] = (-math.inf, math.inf)
    description: str = ""
    vector: bool = False


class ElementContext(Protocol):
    """What an element may ask of the model while it builds its law."""

    t: sp.Symbol

    def position(self, coordinate: str) -> sp.Symbol:
        """Symbol of the position of a coordinate (raises ModelError if unknown)."""

    def velocity(self, coordinate: str) -> sp.Symbol:
        """Symbol of the velocity of a coordinate (raises ModelError if unknown)."""

    def expression(self, value: Number, where: str) -> sp.Expr:
        """Parse a property expression (parameters, coordinates, ``der(x)``, ``t``)."""

    def parameter_expression(self, value: Number, where: str) -> sp.Expr:
        """Parse an expression of model parameters only."""

    def parameter(self, name: str) -> sp.Symbol:
        """Symbol of the model parameter ``name``."""

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
    parameters: ClassVar[tuple[ElementParameter, ...]] = ()
    name: str

    @abc.abstractmethod
    def generalized_forces(self, ctx: ElementContext) -> dict[str, sp.Expr]:
        """Generalized forces of this element, keyed by coordinate name.

        The expressions are *added* to ``Q`` in ``M a = Q - C_q^T lambda``; they may
        depend on positions, velocities, time and parameters, never on accelerations.
        """

    def internal_coordinates(self) -> tuple[tuple[str, str], ...]:
        """Massless coordinates this element adds: ``(model name, coordinate whose
        initial position is the guess)``.  None by default."""
        return ()

    def generalized_force_parts(self, ctx: ElementContext) -> list[dict[str, sp.Expr]]:
        """The generalized forces in parts that the component assembly
        (:mod:`fmi_adjoint.assembly`) derives and scatters separately; their sum per coordinate
        is :meth:`generalized_forces`.  One part by default; an element that carries the forces
        of several independent components (:class:`fmi_adjoint.mbs.elements.GeneralizedForces`)
        returns one part per component, so that each is a small component instance."""
        return [self.generalized_forces(ctx)]

    def automatic_parameters(self) -> tuple[tuple[str, ElementParameter], ...]:
        """Model parameters created for unbound properties: ``(model name, declaration)``."""
        result = []
        for decl in self.parameters:
            if getattr(self, decl.name, None) is None:
                if decl.vector:
                    raise ModelError(f"{self.where(decl.name)}: give the list of values (it has no default).")
                result.append((f"{self.name}_{decl.name}", decl))
        return tuple(result)

    def where(self, prop: str = "") -> str:
        """Location string used in error messages."""
        suffix = f".{prop}" if prop else ""
        return f"force element '{self.name}' ({self.type_name}){suffix}"


@dataclasses.dataclass(frozen=True)
class AbstractLocalElement(AbstractForceElement):
    """An element whose law depends only on its own coordinates and parameters.

    The law sees local positions and velocities: first the element's ``coordinates``,
    then its internal nodes, and local parameter symbols.  This is what makes the law
    checkable in isolation and exportable as one C function.

    Attributes
    ----------
    coordinates : tuple of str
        Model coordinates the element acts on.
    """

    #: Allowed numbers of end coordinates.
    ends: ClassVar[tuple[int, ...]] = (1, 2)
    #: Names of internal massless nodes (local, without the element prefix).
    internal: ClassVar[tuple[str, ...]] = ()
    #: ``True`` if the element only dissipates energy (checked by ``plugins check``).
    dissipative: ClassVar[bool] = False
    #: ``True`` if the force vanishes at zero relative position and velocity.
    zero_at_rest: ClassVar[bool] = True
    #: ``True`` if the element cannot generate energy (checked by ``plugins check``
    #: through :meth:`potential_energy`, or for two-point laws through the sign of the
    #: velocity-dependent part).
    passive: ClassVar[bool] = True

    coordinates: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        coords = tuple(self.coordinates) if not isinstance(self.coordinates, str) else (self.coordinates,)
        object.__setattr__(self, "coordinates", coords)
        if len(coords) not in self.ends or not all(isinstance(c, str) for c in coords):
            raise ModelError(
                f"{self.where('coordinates')}: expected {' or '.join(map(str, self.ends))} coordinate name(s), "
                f"got {self.coordinates!r}."
            )
        if len(set(coords)) != len(coords):
            raise ModelError(f"{self.where('coordinates')}: a coordinate appears twice in {coords}.")
        for decl in self.parameters:
            value = getattr(self, decl.name, None)
            if decl.vector and value is not None:
                if isinstance(value, (str, int, float)):
                    value = (value,)
                object.__setattr__(self, decl.name, tuple(value))

    @abc.abstractmethod
    def local_forces(
        self, q: Sequence[sp.Expr], v: Sequence[sp.Expr], p: Mapping[str, ParameterValue]
    ) -> tuple[sp.Expr, ...]:
        """Generalized forces on the local coordinates (ends, then internal nodes)."""

    def internal_coordinates(self) -> tuple[tuple[str, str], ...]:
        # An internal node starts at the position of the element's last end (its spring
        # relaxed), or at zero for an element to ground.
        guess = self.coordinates[-1] if len(self.coordinates) > 1 else ""
        return tuple((f"{self.name}_{node}", guess) for node in self.internal_nodes())

    def local_names(self) -> tuple[str, ...]:
        """Model names of the local coordinates (ends, then internal nodes)."""
        return self.coordinates + tuple(name for name, _ in self.internal_coordinates())

    def bound_parameters(self, ctx: ElementContext) -> dict[str, ParameterValue]:
        """The model's expressions for every declared property."""
        values: dict[str, ParameterValue] = {}
        for decl in self.parameters:
            value = getattr(self, decl.name, None)
            if value is None:
                values[decl.name] = ctx.parameter(f"{self.name}_{decl.name}")
            elif decl.vector:
                values[decl.name] = tuple(
                    ctx.parameter_expression(item, self.where(f"{decl.name}[{k}]")) for k, item in enumerate(value)
                )
            else:
                values[decl.name] = ctx.parameter_expression(value, self.where(decl.name))
        return values

    def generalized_forces(self, ctx: ElementContext) -> dict[str, sp.Expr]:
        names = self.local_names()
        q = [ctx.position(c) for c in names]
        v = [ctx.velocity(c) for c in names]
        forces = self.local_forces(q, v, self.bound_parameters(ctx))
        if len(forces) != len(names):
            raise ModelError(f"{self.where()}: local_forces returned {len(forces)} values for {len(names)} "
                             "coordinates.")
        result: dict[str, sp.Expr] = {}
        for coord, force in zip(names, forces):
            result[coord] = result.get(coord, sp.Integer(0)) + sp.sympify(force)
        return result

    def internal_nodes(self) -> tuple[str, ...]:
        """Local names of the internal massless nodes (default: the class's ``internal``)."""
        return self.internal

    @classmethod
    def example(cls) -> AbstractLocalElement:
        """A representative instance (all properties unbound) used by ``plugins check``."""
        return cls(name="probe", coordinates=("end_a", "end_b")[: max(cls.ends)])

    def potential_energy(self, q: Sequence[sp.Expr], p: Mapping[str, ParameterValue]) -> sp.Expr | None:
        """Energy stored by the element, if it is conservative plus dissipative.

        When given, ``plugins check`` verifies passivity: the power the element
        absorbs, ``-sum_k Q_k v_k``, minus ``dV/dt`` must be non-negative.
        """
        return None


@dataclasses.dataclass(frozen=True)
class AbstractTwoPointElement(AbstractLocalElement):
    """An element acting along the relative coordinate of two coordinates.

    With ``coordinates = (i, j)`` the element sees ``s = q_i - q_j`` and
    ``s_dot = v_i - v_j``; with ``coordinates = (i,)`` the second end is ground
    (``s = q_i``).  :meth:`law` returns the element force ``f`` that *resists*
    extension::

        ground or q_j  |----/\\/\\/----[=]----|  q_i   ->  +s
                       f acts on q_i as -f and on q_j as +f

    so a spring ``f = k (s - L0)`` pulls ``q_i`` back when ``s > L0``.  The same
    convention holds for rotational coordinates with torques and angles.  A damper law
    with ``f * s_dot >= 0`` dissipates energy.
    """

    @abc.abstractmethod
    def law(self, s: sp.Expr, s_dot: sp.Expr, p: Mapping[str, ParameterValue]) -> sp.Expr:
        """Element force resisting the extension ``s`` (see class docstring)."""

    def local_forces(self, q, v, p):
        s, s_dot = q[0], v[0]
        if len(self.coordinates) == 2:
            s, s_dot = s - q[1], s_dot - v[1]
        f = self.law(s, s_dot, p)
        return (-f, f) if len(self.coordinates) == 2 else (-f,)
