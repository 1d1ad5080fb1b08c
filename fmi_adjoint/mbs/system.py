"""The multibody system and its lowering to an ordinary :class:`~fmi_adjoint.model.Model`.

A :class:`MultibodySystem` holds components (bodies, markers, joints, forces between markers,
applied forces, sensors) and today's scalar items (coordinates, constraints, mass-matrix
entries, force elements, outputs).  :meth:`MultibodySystem.to_model` *lowers* every component
through one :class:`Lowering` context into coordinates, mass-matrix entries, constraints, force
elements, outputs and parameters of a Model, in the equations of motion of the dissertation,
Sec. 2.3.4, eq. (2.47): ``M(q) q'' = f(q, q', t) - C_q^T lambda, C(q, t) = 0``.  Everything
downstream (engines, adjoint, sensitivities, costs, identification, FMU export) sees an
ordinary Model.

Components have one contract: ``lower(ctx: Lowering) -> None``.  They build sympy
expressions in *name symbols* (``sp.Symbol(name, real=True)`` for parameters, coordinates and
``t``) with ``der(x)``, ``der2(x)``, ``lam(c)`` as :func:`fmi_adjoint.expressions.special`
functions; the Model's expression parser checks those names like those of a model file.

Lowering order (deterministic, so the same system gives the same Model and the same
build-cache key): parameters, scalar coordinates, bodies, joints, gravity, forces (plain
force elements pass through), sensors, then the scalar constraints, prescribed motions,
mass-matrix entries and outputs.  The generalized forces components add with
:meth:`Lowering.add_generalized_force` are collected into one internal element
(:class:`~.elements.GeneralizedForces`) appended after all other force elements.
"""

from __future__ import annotations

import dataclasses
import math
from collections import ChainMap
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

import sympy as sp

from ..calculus import Differentiator
from ..errors import ModelError
from ..expressions import parse_expression, special
from ..forces.base import AbstractForceElement
from ..model import (
    Constraint,
    Coordinate,
    InputSignal,
    MassEntry,
    Model,
    Output,
    Parameter,
    PrescribedMotion,
    SimulationSettings,
    collection_paused,
)
from ..structured import StructuredItem
from ..text import check_free_text, check_identifier, excerpt
from .bodies import Body, PlanarRigidBody, PointMass, SpatialRigidBody
from .context import Lowering
from .frames import GROUND, GROUND_KINEMATICS, BodyKinematics, MarkerFrame
from .elements import GeneralizedForces
from .joints import check_joint_pairs
from .markers import Marker
from .names import Number, symbol

__all__ = ["Component", "SystemLowering", "MultibodySystem", "GENERALIZED_FORCES"]


#: Name of the internal element collecting the generalized forces of the components.
GENERALIZED_FORCES = "mbs_generalized_forces"


@runtime_checkable
class Component(Protocol):
    """The one contract of every multibody component."""

    name: str

    def lower(self, ctx: Lowering) -> None:
        """Add this component's coordinates, mass entries, constraints, forces, outputs and
        parameters to ``ctx``."""



def _where(component: object, kind: str) -> str:
    """The component's own ``where()`` text (``joint 'hinge' (revolute)``), else ``<kind> '<name>'``."""
    where = getattr(component, "where", None)
    if callable(where):
        text = where()
        if isinstance(text, str):
            return text
    return f"{kind} '{getattr(component, 'name', '?')}'"


def _is_special(expr: sp.Basic, name: str) -> bool:
    return isinstance(expr, sp.core.function.AppliedUndef) and type(expr).__name__ == name


class SystemLowering:
    """The lowering context (:class:`.context.Lowering`) of a :class:`MultibodySystem`: how
    components lower themselves into a Model.

    All expressions are sympy expressions in name symbols (module docstring).  Components
    ask for kinematics (:meth:`body`, :meth:`marker`, :meth:`joint`), derive velocities and
    accelerations (:meth:`velocity_of`, :meth:`acceleration_of`), and add model items
    (``add_*``).  The context is single-use: :meth:`MultibodySystem.to_model` creates one.
    """

    def __init__(self, system: MultibodySystem):
        self.system = system
        self.t: sp.Symbol = symbol("t")
        self._parameters: list[Parameter] = list(system.parameters)
        self._parameter_set: set[str] = {p.name for p in system.parameters}
        # Name symbols of every parameter expressions may use (declared, added, automatic ones of
        # the elements), kept up to date as items are added: looking names up must not walk all
        # elements per component (that made lowering grow as N^2, issue 24).
        self._parameter_symbols: dict[str, sp.Symbol] = {p.name: symbol(p.name) for p in system.parameters}
        #: Expression strings of parameters parsed so far (``(text, allow_time)``): the names only
        #: grow while lowering, so a text that parsed once parses to the same expression again.
        self._parsed: dict[tuple[str, bool], sp.Expr] = {}
        self._coordinate_symbols: dict[str, sp.Symbol] = {}
        self._fixed_constraint_names: set[str] = {c.name for c in system.constraints} \
            | {f"drive_{m.coordinate}" for m in system.prescribed}
        self._coordinates: list[Coordinate] = []
        self._mass_entries: list[MassEntry] = []
        self._matrix_terms: list[StructuredItem] = []
        self._constraints: list[Constraint] = []
        self._elements: list[AbstractForceElement] = []
        #: Generalized forces by the component that added them (its ``where()`` text), then coordinate.
        self._generalized: dict[str, dict[str, list[sp.Expr]]] = {}
        self._outputs: list[Output] = []
        self._bodies: dict[str, Body] = {}
        self._markers: dict[str, Marker] = {}
        self._frames: dict[str, MarkerFrame] = {}
        self._joints: dict[str, object] = {}
        self._joint_constraints: dict[str, tuple[str, ...]] = {}
        self._component_names: dict[tuple[str, str], str] = {}
        # Lookups by name (the lists above keep the order of the Model).
        self._coordinate_index: dict[str, Coordinate] = {}
        self._constraint_index: dict[str, sp.Expr] = {}
        self._constraint_owner: dict[str, str] = {}
        self._joint_aux: dict[str, str] = {}
        #: The component being lowered (``where()`` text), named when its items clash.
        self.owner = f"system '{system.name}'"

    # ----------------------------------------------------------------- names and values

    def symbol(self, name: str) -> sp.Symbol:
        """The name symbol of ``name`` (coordinate, parameter or ``t``)."""
        return symbol(name)

    def der(self, coordinate: str) -> sp.Expr:
        """``der(coordinate)``: its velocity."""
        return special("der", coordinate)

    def der2(self, coordinate: str) -> sp.Expr:
        """``der2(coordinate)``: its acceleration (outputs only)."""
        return special("der2", coordinate)

    def lam(self, constraint: str) -> sp.Expr:
        """``lam(constraint)``: its multiplier (outputs only)."""
        return special("lam", constraint)

    @property
    def coordinate_names(self) -> tuple[str, ...]:
        """Names of the coordinates added so far (scalar ones, then bodies' in order)."""
        return tuple(c.name for c in self._coordinates)

    def coordinate(self, name: str) -> Coordinate:
        """The coordinate ``name`` added so far (its kind, mass, initial values)."""
        if name in self._coordinate_index:
            return self._coordinate_index[name]
        raise ModelError(f"system '{self.system.name}': unknown coordinate '{name}'. Coordinates: "
                         f"{excerpt(', '.join(self.coordinate_names), 200) or '(none)'}.")

    def constraint(self, name: str) -> sp.Expr:
        """The expression (name symbols) of constraint ``name`` added so far by a component
        (the system's own scalar constraints are not among them)."""
        if name in self._constraint_index:
            return self._constraint_index[name]
        raise ModelError(f"system '{self.system.name}': unknown constraint '{name}'.")

    def constraint_owner(self, name: str) -> str | None:
        """The component (its ``where()`` text) that added constraint ``name``, or None."""
        return self._constraint_owner.get(name)

    def built(self, value: object, where: str) -> sp.Expr:
        """``value`` as a sympy expression without evaluating text: built expressions pass,
        numbers become sympy numbers, strings go through the expression grammar
        (:meth:`expression`); anything else is refused.  (Never ``sympify``: it evaluates.)"""
        if isinstance(value, sp.Expr):
            return value
        if isinstance(value, bool):
            raise ModelError(f"{where}: {value!r} is not an expression.")
        if isinstance(value, int):
            return sp.Integer(value)
        if isinstance(value, float):
            return sp.Float(value)
        if isinstance(value, str):
            return self.expression(value, where)
        raise ModelError(f"{where}: {excerpt(repr(value))} is not an expression (give a number, an expression "
                         "string or a built sympy expression).")

    @property
    def parameters(self) -> tuple[Parameter, ...]:
        """The declared and added parameters (nominal values, bounds), in order."""
        return tuple(self._parameters)

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """Declared and added parameters, and the automatic ``<element>_<property>`` ones."""
        names = [p.name for p in self._parameters]
        for element in self._elements:
            names += [name for name, _ in element.automatic_parameters()]
        return tuple(dict.fromkeys(names))

    def parameter_expression(self, value: Number, where: str, allow_time: bool = False) -> sp.Expr:
        """``value`` (number, expression string or built sympy expression) as an expression
        of parameters (and ``t`` if ``allow_time``) in name symbols; ModelError naming
        ``where`` for unknown names or bad syntax."""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return parse_expression(value, {}, where=where)  # a number reads no names
        if isinstance(value, str):  # parsed once: forces read their bodies' initial positions again and again
            key = (value, allow_time)
            known = self._parsed.get(key)
            if known is None:
                known = self._parsed[key] = self._parameter_expression(value, where, allow_time)
            return known
        return self._parameter_expression(value, where, allow_time)

    def _parameter_expression(self, value: Number, where: str, allow_time: bool) -> sp.Expr:
        names: Mapping[str, sp.Expr] = ChainMap({"t": self.t}, self._parameter_symbols) if allow_time \
            else self._parameter_symbols
        return parse_expression(value, names, where=where)

    def expression(self, value: Number, where: str, outputs: bool = False) -> sp.Expr:
        """``value`` as an expression of parameters, inputs, ``t``, coordinates and
        ``der(x)``; with ``outputs=True`` also ``der2(x)`` and ``lam(constraint)`` (allowed in
        outputs only).  Coordinates are those added so far."""
        # Views of the names added so far, not copies: one expression must not cost O(model).
        names = ChainMap({"t": self.t}, self._coordinate_symbols, self._parameter_symbols)
        coords = self._coordinate_symbols.keys()
        fixed = self._fixed_constraint_names

        def is_constraint(arg: str) -> bool:
            return arg in self._constraint_index or arg in fixed

        def handler(kind: str, known) -> object:
            def resolve(arg: str) -> sp.Expr:
                if not known(arg):
                    listing = coords if kind != "lam" else [*self._constraint_index, *fixed]
                    raise ModelError(f"{kind}({arg}): unknown name '{arg}'. Known: "
                                     f"{excerpt(', '.join(sorted(listing)), 200) or '(none)'}.")
                return special(kind, arg)
            return resolve

        specials = {"der": handler("der", coords.__contains__)}
        if outputs:
            specials["der2"] = handler("der2", coords.__contains__)
            specials["lam"] = handler("lam", is_constraint)
        return parse_expression(value, names, where=where, specials=specials)  # type: ignore[arg-type]

    def nominal(self, expr: Number, where: str) -> float:
        """The value of an expression of parameters at their nominal values (inputs at their
        start values); ModelError if it depends on anything else."""
        parsed = self.parameter_expression(expr, where)
        values = {symbol(p.name): p.value for p in self._parameters}
        result = parsed.xreplace(values)
        try:
            number = float(result)
        except TypeError:
            raise ModelError(f"{where}: {excerpt(str(parsed))} must be an expression of declared parameters "
                             "(it is evaluated at the nominal values).") from None
        if not math.isfinite(number):
            raise ModelError(f"{where}: {excerpt(str(parsed))} is not finite at the nominal parameter values.")
        return number

    @property
    def gravity(self) -> sp.Matrix:
        """The gravity vector (3x1, global axes; zero if the system has none)."""
        if self.system.gravity is None:
            return sp.zeros(3, 1)
        return sp.Matrix([self.parameter_expression(x, f"system '{self.system.name}': gravity")
                          for x in self.system.gravity])

    # ----------------------------------------------------------------- kinematics

    def body(self, name: str, where: str = "") -> BodyKinematics:
        """The kinematics of body ``name`` (``"ground"`` is always known)."""
        if name == GROUND:
            return GROUND_KINEMATICS
        if name not in self._bodies:
            prefix = f"{where}: " if where else ""
            known = ", ".join(sorted(self._bodies)) or "(none)"
            raise ModelError(f"{prefix}unknown body '{name}'. Bodies: ground, {known}.")
        return self._bodies[name].kinematics()

    def body_component(self, name: str, where: str = "") -> Body | None:
        """The body component (None for the ground)."""
        if name == GROUND:
            return None
        self.body(name, where)
        return self._bodies[name]

    def marker(self, name: str, where: str = "") -> MarkerFrame:
        """The kinematics of marker ``name``: global position (3x1), rotation (3x3), body."""
        if name not in self._markers:
            prefix = f"{where}: " if where else ""
            known = ", ".join(sorted(self._markers)) or "(none)"
            raise ModelError(f"{prefix}unknown marker '{name}'. Markers: {known}.")
        if name not in self._frames:
            marker = self._markers[name]
            self._frames[name] = marker.frame(self, self.body(marker.body, marker.where("body")))
        return self._frames[name]

    def joint(self, name: str, where: str = "") -> sp.Expr:
        """The joint coordinate of joint ``name`` (relative angle or displacement, see
        :mod:`.joints`); ModelError if the joint is unknown or has no single coordinate."""
        joint = self.joint_component(name, where)
        return joint.coordinate(self)  # type: ignore[attr-defined]

    def joint_component(self, name: str, where: str = "") -> object:
        """The joint component ``name``."""
        if name not in self._joints:
            prefix = f"{where}: " if where else ""
            known = ", ".join(sorted(self._joints)) or "(none)"
            raise ModelError(f"{prefix}unknown joint '{name}'. Joints: {known}.")
        return self._joints[name]

    def joint_constraints(self, name: str, where: str = "") -> tuple[str, ...]:
        """Names of the constraints joint ``name`` added (after dropping rows that vanish)."""
        self.joint_component(name, where)
        return self._joint_constraints.get(name, ())

    def velocity_of(self, expr: sp.Expr) -> sp.Expr:
        """Time derivative ``sum_k de/dq_k der(q_k) + sum_k de/d der(q_k) der2(q_k) + de/dt``
        (parameters and inputs are constant in time)."""
        expr = self.built(expr, f"system '{self.system.name}': velocity_of")
        coords = self._coordinate_index
        holders: dict[sp.Basic, sp.Dummy] = {}
        rates: dict[sp.Dummy, sp.Expr] = {}
        for applied in expr.atoms(sp.core.function.AppliedUndef):
            if _is_special(applied, "der"):
                holder = sp.Dummy(real=True)
                holders[applied] = holder
                rates[holder] = special("der2", applied.args[0].name)
            elif _is_special(applied, "der2"):
                raise ModelError(f"the time derivative of {excerpt(str(applied))} (a third derivative) is not "
                                 "available; use positions and velocities.")
        plain = expr.xreplace(holders)
        # One sum at the end: adding term by term re-flattens the growing sum each time.
        calculus = Differentiator()  # the terms share subexpressions (rotation matrices)
        terms = [calculus.derivative(plain, self.t)]
        for sym in sorted(plain.free_symbols, key=lambda s: s.name):
            if isinstance(sym, sp.Symbol) and sym.name in coords and not isinstance(sym, sp.Dummy):
                terms.append(calculus.derivative(plain, sym) * special("der", sym.name))
        for holder, rate in rates.items():
            terms.append(calculus.derivative(plain, holder) * rate)
        result = sp.Add(*terms)
        if not holders:
            return result
        return result.xreplace({holder: applied for applied, holder in holders.items()})

    def acceleration_of(self, expr: sp.Expr) -> sp.Expr:
        """Second time derivative (uses ``der2``; outputs only)."""
        return self.velocity_of(self.velocity_of(expr))

    # ----------------------------------------------------------------- adding items

    def add_parameter(self, parameter: Parameter) -> None:
        """Add a model parameter; a declared parameter of the same name takes precedence
        (as for force elements' automatic parameters)."""
        if parameter.name in self._parameter_set:
            return
        self._parameters.append(parameter)
        self._parameter_set.add(parameter.name)
        self._parameter_symbols.setdefault(parameter.name, symbol(parameter.name))

    def add_coordinate(self, coordinate: Coordinate) -> None:
        if coordinate.name in self._coordinate_index:
            raise ModelError(f"system '{self.system.name}': coordinate '{coordinate.name}' is defined twice "
                             "(a body's coordinates are named <body>_x, ...; rename the body or the coordinate).")
        self._coordinates.append(coordinate)
        self._coordinate_index[coordinate.name] = coordinate
        self._coordinate_symbols[coordinate.name] = symbol(coordinate.name)

    def has_coordinate(self, name: str) -> bool:
        """Whether coordinate ``name`` has been added (a dictionary look-up, unlike
        :attr:`coordinate_names`, which copies the names)."""
        return name in self._coordinate_index

    def add_mass_entry(self, entry: MassEntry) -> None:
        self._mass_entries.append(entry)

    def add_matrix_term(self, item: StructuredItem) -> None:
        """Add a structured term (:mod:`fmi_adjoint.structured`: a constant or parameter-scaled
        sparse matrix, or quadratic constraints) over coordinates already added: kept as data,
        assembled without symbolic work (issue 24, part 2)."""
        for coordinate in item.coordinates:
            if coordinate not in self._coordinate_index:
                raise ModelError(f"{self.owner}: matrix term '{item.name}' acts on unknown coordinate '{coordinate}'.")
        self._matrix_terms.append(item)

    def add_constraint(self, name: str, expr: Number) -> None:
        """Add the constraint ``expr = 0`` named ``name`` for the component being lowered
        (:attr:`owner`); a name another component already uses is refused, naming both."""
        if name in self._constraint_owner:
            raise ModelError(f"{self.owner}: its constraint '{name}' has the name of a constraint of "
                             f"{self._constraint_owner[name]}; rename one of the two components.")
        built = self.built(expr, f"{self.owner}: constraint '{name}'")
        self._constraints.append(Constraint(name, built, group=self.owner))
        self._constraint_index[name] = built
        self._constraint_owner[name] = self.owner

    def add_force_element(self, element: AbstractForceElement) -> None:
        if not isinstance(element, AbstractForceElement):
            raise ModelError(f"system '{self.system.name}': {element!r} is not a force element.")
        self._elements.append(element)
        for name, _ in element.automatic_parameters():
            self._parameter_symbols.setdefault(name, symbol(name))

    def add_generalized_force(self, coordinate: str, expr: sp.Expr) -> None:
        """Add ``expr`` (positions, velocities ``der(x)``, ``t``, parameters, inputs) to the
        generalized force on ``coordinate``."""
        if coordinate not in self._coordinate_index:
            raise ModelError(f"system '{self.system.name}': generalized force on unknown coordinate '{coordinate}'.")
        self._generalized.setdefault(self.owner, {}).setdefault(coordinate, []).append(
            self.built(expr, f"{self.owner}: generalized force on '{coordinate}'"))

    def set_joint_coordinate(self, joint: str, coordinate: str) -> None:
        """Record that the coordinate ``coordinate`` equals joint ``joint``'s coordinate (an
        auxiliary coordinate of a force on the joint, unwrapped): sensors of the joint
        coordinate output it (:class:`~.sensors.JointCoordinate`).  The first one counts."""
        self._joint_aux.setdefault(joint, coordinate)

    def joint_coordinate_name(self, joint: str) -> str | None:
        """The coordinate recorded by :meth:`set_joint_coordinate` for ``joint``, or None."""
        return self._joint_aux.get(joint)

    def add_output(self, output: Output) -> None:
        self._outputs.append(output)

    def register(self, component: object, kind: str) -> None:
        """Record a component name (unique among the components of its kind: bodies,
        markers, joints, forces, sensors)."""
        name = getattr(component, "name", None)
        if not isinstance(name, str):
            raise ModelError(f"system '{self.system.name}': {kind} {component!r} has no name.")
        if (kind, name) in self._component_names:
            raise ModelError(f"system '{self.system.name}': two {kind}s are named '{name}'; give each its own name.")
        self._component_names[(kind, name)] = kind

    # ----------------------------------------------------------------- result

    def model(self) -> Model:
        system = self.system
        for con in system.constraints:
            if con.name in self._constraint_owner:
                raise ModelError(f"system '{system.name}': constraint '{con.name}' of the system's constraints has "
                                 f"the name of a constraint of {self._constraint_owner[con.name]}; rename the "
                                 "constraint (component constraints are named <component>_<row>).")
        for motion in system.prescribed:
            name = f"drive_{motion.coordinate}"
            if name in self._constraint_owner:
                raise ModelError(f"system '{system.name}': the prescribed motion of '{motion.coordinate}' (constraint "
                                 f"'{name}') has the name of a constraint of {self._constraint_owner[name]}; rename "
                                 "that component.")
        elements = list(self._elements)
        if self._generalized:
            parts = tuple(tuple((coord, sp.Add(*terms)) for coord, terms in part.items())
                          for part in self._generalized.values())
            elements.append(GeneralizedForces(name=GENERALIZED_FORCES, parts=parts))
        return Model(
            name=system.name,
            coordinates=tuple(self._coordinates),
            parameters=tuple(self._parameters),
            forces=tuple(elements),
            constraints=tuple(self._constraints) + tuple(system.constraints),
            prescribed=tuple(system.prescribed),
            outputs=tuple(self._outputs) + tuple(system.outputs),
            mass_matrix=tuple(self._mass_entries) + tuple(system.mass_matrix),
            simulation=system.simulation,
            description=system.description,
            source=system.source,
            signals=tuple(system.signals),
            matrix_terms=tuple(self._matrix_terms) + tuple(system.matrix_terms),
        )


@dataclasses.dataclass(frozen=True)
class MultibodySystem:
    """A multibody model from components (issue 23; dissertation Ch. 2).

    Attributes
    ----------
    name : str
    parameters : tuple of Parameter (``causality="input"`` for inputs)
    bodies : tuple of Body (the ground ``"ground"`` need not be declared)
    markers : tuple of Marker
    joints : tuple of joints (:mod:`.joints`)
    forces : tuple of force components (``lower(ctx)``) and plain force elements
        (:class:`~fmi_adjoint.forces.base.AbstractForceElement`, passed through)
    sensors : tuple of components with ``lower(ctx)`` (outputs)
    gravity : 3 numbers or parameter expressions (global axes), or None
    coordinates, constraints, mass_matrix, prescribed, outputs, signals, simulation,
    description, source, matrix_terms : today's scalar Model items, passed through
    """

    name: str
    parameters: tuple[Parameter, ...] = ()
    bodies: tuple[Body, ...] = ()
    markers: tuple[Marker, ...] = ()
    joints: tuple[object, ...] = ()
    forces: tuple[object, ...] = ()
    sensors: tuple[object, ...] = ()
    gravity: tuple[Number, ...] | None = None
    coordinates: tuple[Coordinate, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    mass_matrix: tuple[MassEntry, ...] = ()
    prescribed: tuple[PrescribedMotion, ...] = ()
    outputs: tuple[Output, ...] = ()
    signals: tuple[InputSignal, ...] = ()
    simulation: SimulationSettings = SimulationSettings()
    description: str = ""
    source: str = ""
    matrix_terms: tuple[StructuredItem, ...] = ()

    def __post_init__(self) -> None:
        check_identifier(self.name, "model")
        check_free_text(self.description, f"system '{self.name}': description")
        check_free_text(self.source, f"system '{self.name}': source")
        for field in ("parameters", "bodies", "markers", "joints", "forces", "sensors", "coordinates", "constraints",
                      "mass_matrix", "prescribed", "outputs", "signals", "matrix_terms"):
            value = getattr(self, field)
            if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
                value = (value,)
            object.__setattr__(self, field, tuple(value))
        for body in self.bodies:
            if not isinstance(body, Body):
                raise ModelError(f"system '{self.name}': {body!r} in bodies is not a body (Ground, PointMass, "
                                 "PlanarRigidBody, SpatialRigidBody).")
        for marker in self.markers:
            if not isinstance(marker, Marker):
                raise ModelError(f"system '{self.name}': {marker!r} in markers is not a Marker.")
        for kind, items in (("joint", self.joints), ("force", self.forces), ("sensor", self.sensors)):
            for item in items:
                if not isinstance(item, AbstractForceElement) and not callable(getattr(item, "lower", None)):
                    raise ModelError(f"system '{self.name}': {item!r} in {kind}s is not a component (it has no "
                                     "lower(ctx)).")
        if self.gravity is not None:
            gravity = self.gravity
            if isinstance(gravity, (str, int, float, sp.Expr)) or not isinstance(gravity, Sequence) \
                    or len(gravity) != 3:
                raise ModelError(f"system '{self.name}': gravity must be 3 values (global x, y, z), got {gravity!r}.")
            object.__setattr__(self, "gravity", tuple(gravity))

    def to_model(self) -> Model:
        """Lower all components into an ordinary :class:`~fmi_adjoint.model.Model` (with the
        garbage collector paused: :func:`~fmi_adjoint.model.collection_paused`)."""
        with collection_paused():
            return self._lower()

    def _lower(self) -> Model:
        ctx = SystemLowering(self)
        for coordinate in self.coordinates:
            ctx.add_coordinate(coordinate)
        for body in self.bodies:
            if body.name == GROUND:
                continue
            ctx.register(body, "body")
            ctx._bodies[body.name] = body
        for marker in self.markers:
            ctx.register(marker, "marker")
            ctx._markers[marker.name] = marker
        for joint in self.joints:
            ctx.register(joint, "joint")
            ctx._joints[joint.name] = joint  # type: ignore[attr-defined]
        for body in self.bodies:
            ctx.owner = body.where()
            body.lower(ctx)
        for marker in self.markers:
            ctx.marker(marker.name)  # unknown bodies, planar rules: reported here, naming the marker
        for joint in self.joints:
            ctx.owner = _where(joint, "joint")
            before = len(ctx._constraints)
            joint.lower(ctx)  # type: ignore[attr-defined]
            ctx._joint_constraints[joint.name] = tuple(c.name for c in ctx._constraints[before:])  # type: ignore
        check_joint_pairs(ctx, self.joints)
        ctx.owner = f"system '{self.name}': gravity"
        self._lower_gravity(ctx)
        for force in self.forces:
            if isinstance(force, AbstractForceElement):
                ctx.add_force_element(force)
            else:
                ctx.register(force, "force")
                ctx.owner = _where(force, "force")
                force.lower(ctx)  # type: ignore[attr-defined]
        for sensor in self.sensors:
            ctx.register(sensor, "sensor")
            ctx.owner = _where(sensor, "sensor")
            sensor.lower(ctx)  # type: ignore[attr-defined]
        ctx.owner = f"system '{self.name}'"
        return ctx.model()

    def _lower_gravity(self, ctx: Lowering) -> None:
        """Gravity ``m g`` on the translational coordinates of every body (the body frame
        is at the centre of mass, so gravity has no moment about it; eq. (2.33))."""
        if self.gravity is None:
            return
        g = ctx.gravity
        for body in self.bodies:
            if not isinstance(body, (PointMass, PlanarRigidBody, SpatialRigidBody)):
                continue
            ctx.owner = f"{body.where()}: gravity"  # a part per body (component assembly)
            mass = ctx.parameter_expression(body.mass, body.where("mass"))
            names = body.kinematics().coordinates
            translational = names[:2] if body.kinematics().planar else names[:3]
            for k, coord in enumerate(translational):
                if g[k].is_zero is not True:
                    ctx.add_generalized_force(coord, mass * g[k])
