"""The lowering context: the one contract through which components lower themselves.

Every multibody component (body, marker, joint, force, sensor; :class:`.system.Component`)
has ``lower(ctx)``, and ``ctx`` is a :class:`Lowering`.  This module states what a component
may ask of it; :class:`.system.SystemLowering` is the implementation that
:meth:`.system.MultibodySystem.to_model` creates.  The contract names only values
(:mod:`.frames`, :mod:`fmi_adjoint.model`), never the components, so that component modules
and the system module do not import each other (issue 29: layers point down).

All expressions are sympy expressions in name symbols (``sp.Symbol(name, real=True)``) and
``der``/``der2``/``lam`` specials (:func:`fmi_adjoint.expressions.special`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import sympy as sp

if TYPE_CHECKING:
    from ..forces.base import AbstractForceElement
    from ..model import Coordinate, MassEntry, Output, Parameter
    from ..structured import StructuredItem
    from .frames import BodyKinematics, MarkerFrame
    from .names import Number

__all__ = ["Lowering"]


class Lowering(Protocol):
    """What a component may ask of the lowering context (implemented by
    :class:`.system.SystemLowering`; see its docstrings for the details of each method)."""

    #: The time symbol ``t``.
    t: sp.Symbol
    #: The component being lowered (its ``where()`` text), named when its items clash.
    owner: str

    # ---------------------------------------------------------------- names and values
    def symbol(self, name: str) -> sp.Symbol:
        """The name symbol of ``name`` (coordinate, parameter or ``t``)."""

    def der(self, coordinate: str) -> sp.Expr:
        """``der(coordinate)``: its velocity."""

    def der2(self, coordinate: str) -> sp.Expr:
        """``der2(coordinate)``: its acceleration (outputs only)."""

    def lam(self, constraint: str) -> sp.Expr:
        """``lam(constraint)``: its multiplier (outputs only)."""

    @property
    def coordinate_names(self) -> tuple[str, ...]:
        """Names of the coordinates added so far."""

    def coordinate(self, name: str) -> Coordinate:
        """The coordinate ``name`` added so far."""

    def has_coordinate(self, name: str) -> bool:
        """Whether coordinate ``name`` has been added."""

    def constraint(self, name: str) -> sp.Expr:
        """The expression of constraint ``name`` added so far by a component."""

    def constraint_owner(self, name: str) -> str | None:
        """The component that added constraint ``name``, or None."""

    def built(self, value: object, where: str) -> sp.Expr:
        """``value`` as a sympy expression without evaluating text."""

    @property
    def parameters(self) -> tuple[Parameter, ...]:
        """The declared and added parameters (nominal values, bounds)."""

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """Declared and added parameters, and the elements' automatic ones."""

    def parameter_expression(self, value: Number, where: str, allow_time: bool = False) -> sp.Expr:
        """``value`` as an expression of parameters (and ``t`` if ``allow_time``)."""

    def expression(self, value: Number, where: str, outputs: bool = False) -> sp.Expr:
        """``value`` as an expression of parameters, inputs, ``t``, coordinates and ``der``."""

    def nominal(self, expr: Number, where: str) -> float:
        """The value of an expression of parameters at their nominal values."""

    @property
    def gravity(self) -> sp.Matrix:
        """The gravity vector (3x1, global axes)."""

    # ---------------------------------------------------------------- kinematics
    def body(self, name: str, where: str = "") -> BodyKinematics:
        """The kinematics of body ``name`` (``"ground"`` is always known)."""

    def body_component(self, name: str, where: str = "") -> object:
        """The body component ``name`` (None for the ground)."""

    def marker(self, name: str, where: str = "") -> MarkerFrame:
        """The kinematics of marker ``name``."""

    def joint(self, name: str, where: str = "") -> sp.Expr:
        """The joint coordinate of joint ``name``."""

    def joint_component(self, name: str, where: str = "") -> object:
        """The joint component ``name``."""

    def joint_constraints(self, name: str, where: str = "") -> tuple[str, ...]:
        """Names of the constraints joint ``name`` added."""

    def velocity_of(self, expr: sp.Expr) -> sp.Expr:
        """The time derivative of ``expr``."""

    def acceleration_of(self, expr: sp.Expr) -> sp.Expr:
        """The second time derivative of ``expr`` (outputs only)."""

    # ---------------------------------------------------------------- model items
    def add_parameter(self, parameter: Parameter) -> None:
        """Add a model parameter."""

    def add_coordinate(self, coordinate: Coordinate) -> None:
        """Add a coordinate."""

    def add_mass_entry(self, entry: MassEntry) -> None:
        """Add a mass-matrix entry."""

    def add_matrix_term(self, item: StructuredItem) -> None:
        """Add a structured term (:mod:`fmi_adjoint.structured`)."""

    def add_constraint(self, name: str, expr: Number) -> None:
        """Add the constraint ``expr = 0`` named ``name``."""

    def add_force_element(self, element: AbstractForceElement) -> None:
        """Add a force element."""

    def add_generalized_force(self, coordinate: str, expr: sp.Expr) -> None:
        """Add ``expr`` to the generalized force on ``coordinate``."""

    def set_joint_coordinate(self, joint: str, coordinate: str) -> None:
        """Record that ``coordinate`` equals joint ``joint``'s coordinate."""

    def joint_coordinate_name(self, joint: str) -> str | None:
        """The coordinate recorded for ``joint``, or None."""

    def add_output(self, output: Output) -> None:
        """Add an output."""

    def register(self, component: object, kind: str) -> None:
        """Record a component name (unique among the components of its kind)."""
