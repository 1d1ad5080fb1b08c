"""Model definition: coordinates, parameters, mass matrix, forces, constraints, outputs.

A :class:`Model` is a frozen description, built from Python or read from a TOML model
file (:mod:`fmi_adjoint.model_file`).  :func:`assemble` turns it into a
:class:`SymbolicModel`: the equations of motion of the index-3 DAE

.. math::  M(q,p)\\,a + C_q^T \\lambda = Q(q, v, t, p), \\qquad C(q, t, p) = 0,

as sympy matrices (Oberpeilsteiner 2018, eq. (2.48)).  When the mass matrix depends on
``q``, ``Q`` automatically contains the quadratic velocity terms of Lagrange's equations
for the kinetic energy ``T = v^T M(q,p) v / 2``, so the user states the mass matrix and
the applied forces only.  Prescribed motions ``q_k = s(t, p)`` become rheonomic
constraints whose multiplier is the driving force.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import gc
import math
import threading
from collections import ChainMap
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Literal, TypeAlias

from .errors import ModelError
from .expressions import CONSTANT_NAMES, FUNCTION_NAMES, TABLE_RATE_SUFFIX, parse_expression
from .forces.base import AbstractForceElement
from .structured import MatrixTerm, ParsedQuadratic, ParsedTerm, QuadraticConstraints, StructuredItem
from .text import check_free_text, check_identifier, excerpt

if TYPE_CHECKING:
    import sympy as sp
else:  # sympy is imported on first use: a warm start never uses it (issue 24, part 6)
    from .deferred import sympy as sp

__all__ = [
    "Parameter",
    "Coordinate",
    "MassEntry",
    "Constraint",
    "PrescribedMotion",
    "Output",
    "SimulationSettings",
    "InputSignal",
    "table_function",
    "Model",
    "ParsedModel",
    "SymbolicModel",
    "assemble",
    "parse_items",
    "quadratic_velocity_terms",
    "collection_paused",
]

Number: TypeAlias = "str | float | int | sp.Expr"


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a model's expressions are built (lowering
    a multibody system, parsing a model's items), and restore it after.

    Building a model allocates millions of sympy objects that stay alive, and every full
    collection walks all of them: the collector took 2.5 s of the 14 s of lowering a random
    tree of 5000 coordinates, the part of the time that grew faster than the model (issue 24).
    Sympy's expressions hold no reference cycles, so nothing accumulates meanwhile; garbage in
    cycles (if any) is collected once the collector runs again.  Nested and overlapping uses
    (threads building models at once) pause once: the last one to leave re-enables the
    collector, and only if it was on when the first began.
    """
    with _PAUSE_LOCK:
        if _PAUSE[0] == 0:
            _PAUSE[1] = gc.isenabled()
            gc.disable()
        _PAUSE[0] += 1
    try:
        yield
    finally:
        with _PAUSE_LOCK:
            _PAUSE[0] -= 1
            if _PAUSE[0] == 0 and _PAUSE[1] and not gc.isenabled():
                gc.enable()


#: [pauses active, whether the collector was enabled when the first began] (:func:`collection_paused`).
_PAUSE: list = [0, False]
_PAUSE_LOCK = threading.Lock()
_RESERVED = {"t", "der", "der2", "lam", "reaction"} | FUNCTION_NAMES | CONSTANT_NAMES


def _check_name(name: object, what: str, reserved: frozenset[str] | set[str] = _RESERVED) -> None:
    check_identifier(name, what)
    if name in reserved:
        raise ModelError(f"{what} name {name!r} is reserved; choose another name.")


@dataclasses.dataclass(frozen=True)
class Parameter:
    """A named model parameter.

    Attributes
    ----------
    name : str
    value : float
        Nominal (start) value.
    unit : str
    bounds : tuple of float
        Lower and upper bound used by identification (``-inf``/``inf`` if open).
    description : str
    causality : {"parameter", "input"}
        ``input``: an excitation an FMU user may connect (its value is used while it is
        unconnected, and in-process).  Inputs are parameters to the engine and can be
        differentiated and identified like them.
    """

    name: str
    value: float
    unit: str = ""
    bounds: tuple[float, float] = (-math.inf, math.inf)
    description: str = ""
    causality: str = "parameter"

    def __post_init__(self) -> None:
        _check_name(self.name, "parameter")
        check_free_text(self.unit, f"parameter '{self.name}': unit")
        check_free_text(self.description, f"parameter '{self.name}': description")
        if self.causality not in ("parameter", "input"):
            raise ModelError(f"parameter '{self.name}': causality {self.causality!r} is not 'parameter' or 'input'.")
        try:
            value = float(self.value)
            lo, hi = (float(b) for b in self.bounds)
        except (TypeError, ValueError):
            raise ModelError(f"parameter '{self.name}': value and bounds must be numbers.") from None
        if not math.isfinite(value):
            raise ModelError(f"parameter '{self.name}': value {self.value!r} is not finite; give a finite number.")
        if math.isnan(lo) or math.isnan(hi) or lo > hi:
            raise ModelError(f"parameter '{self.name}': bounds {self.bounds!r} are not an interval [lo, hi].")
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "bounds", (lo, hi))


@dataclasses.dataclass(frozen=True)
class Coordinate:
    """A generalized coordinate.

    Attributes
    ----------
    name : str
    kind : {"translational", "rotational"}
    mass : str or float
        Diagonal mass-matrix entry (kg or kg m^2); ``0`` for a massless node.
    initial_position, initial_velocity : str or float
        Expressions of parameters giving the initial values (or guesses).
    fixed_position, fixed_velocity : bool
        Hold this value while the initial state is made consistent with the
        constraints; free values move as little as possible (least squares).
    """

    name: str
    kind: Literal["translational", "rotational"] = "translational"
    mass: Number = 0.0
    initial_position: Number = 0.0
    initial_velocity: Number = 0.0
    fixed_position: bool = False
    fixed_velocity: bool = False

    def __post_init__(self) -> None:
        _check_name(self.name, "coordinate")
        if self.kind not in ("translational", "rotational"):
            raise ModelError(f"coordinate '{self.name}': kind {self.kind!r} is not 'translational' or 'rotational'.")

    @property
    def unit(self) -> str:
        """SI unit of the position."""
        return "m" if self.kind == "translational" else "rad"


@dataclasses.dataclass(frozen=True)
class MassEntry:
    """An entry ``M[row, col]`` of a full mass matrix (mirrored to ``M[col, row]``).

    Without a ``group`` the entry *sets* ``M[row, col]`` (overriding the diagonal
    ``Coordinate.mass``; a later ungrouped entry at the same place overrides an earlier one).
    With a ``group`` it *adds* to whatever the rest of the model puts there (the diagonal, the
    ungrouped entries, the other groups, structured MASS terms): a body whose kinetic energy is
    a sum of pieces (the floating frame's base, per mode and per pair of modes,
    :mod:`fmi_adjoint.mbs.ffrf`) writes each piece as one group, and the component assembly
    (:mod:`fmi_adjoint.assembly.partition`) makes each group one mass instance, so that pieces of
    the same form are one type derived once.  Lagrange's operator is linear in the mass matrix,
    so the sum is exact (its quadratic velocity terms are the sums of the pieces').

    ``data`` (grouped entries only): named numbers that ``value`` reads, ``((name, number),
    ...)``.  The component assembly makes each a data slot of the group's instance *even where
    it is zero* (a number written into the expression would vanish with it and change the
    expression's form), so that pieces of one form are one component type whatever their
    numbers.  An entry reads its own data; the names are the group's: one name has one number
    in a group, and may not be a name of the model (built expressions may use names with a
    space, which no model name has).
    """

    row: str
    col: str
    value: Number
    group: str = ""
    data: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        try:
            data = tuple((str(name), float(number)) for name, number in self.data)
        except (TypeError, ValueError):
            raise ModelError(f"mass entry ({self.row}, {self.col}): data are (name, number) pairs, got "
                             f"{excerpt(repr(self.data))}.") from None
        object.__setattr__(self, "data", data)


@dataclasses.dataclass(frozen=True)
class Constraint:
    """A holonomic constraint ``C(q, t, p) = 0`` given by an expression."""

    name: str
    expression: Number
    #: The component the row belongs to (a joint's rows share it): the component assembly
    #: (:mod:`fmi_adjoint.assembly`) derives a group's rows together.  Empty: the row alone.
    group: str = ""

    def __post_init__(self) -> None:
        _check_name(self.name, "constraint")


@dataclasses.dataclass(frozen=True)
class PrescribedMotion:
    """A coordinate driven by a function of time: ``q_k = s(t, p)``.

    It is enforced as the constraint ``q_k - s(t, p) = 0`` named ``drive_<coordinate>``;
    its multiplier is the force or torque needed to drive the coordinate.
    """

    coordinate: str
    expression: Number


@dataclasses.dataclass(frozen=True)
class Output:
    """A model output: an expression of positions ``x``, velocities ``der(x)``,
    accelerations ``der2(x)``, multipliers ``lam(constraint)``, generalized constraint
    forces ``reaction(x)`` (``= -(C_q^T lambda)_x``), ``t`` and parameters."""

    name: str
    expression: Number
    unit: str = ""
    description: str = ""

    def __post_init__(self) -> None:
        # 'time' is the abscissa column of every CSV the tool reads and writes.
        _check_name(self.name, "output", _RESERVED | {"time"})
        check_free_text(self.unit, f"output '{self.name}': unit")
        check_free_text(self.description, f"output '{self.name}': description")


@dataclasses.dataclass(frozen=True)
class InputSignal:
    """An input driven by knot values, ``u(t) = sum_k xi_k phi_k(t)``, or by measured data,
    ``u(t) = phi(t)`` (no knots, one table: a channel of a bench file, issue 26 part 7).

    Each basis function ``phi_k`` is a time table (interpolated linearly, so both engines
    evaluate it the same way); the knot values ``xi_k`` are ordinary parameters (``knots``),
    so the forward run, the sensitivities and the adjoint treat them like any other
    parameter.  Optimal input design (:mod:`fmi_adjoint.design`) builds the tables: a hat
    function on its knot and the two neighbours (exact, and a few points per table whatever
    the number of knots), or a cubic spline's cardinal function at the step times (exact at
    every step).

    Attributes
    ----------
    input : str
        Name of an ``[inputs]`` entry of the model; every expression using it sees ``u(t)``.
    tables : tuple of (times, values)
        One table per knot; its times strictly increasing and spanning the simulated time.
    knots : tuple of Parameter
        The knot-value parameters, one per table; none for measured data (one table, the
        input's value itself: interpolated linearly, not held).
    source : str
        Where measured data come from (file, channel, unit conversion), for reports.

    A measured input acts wherever the input's name is used: in a force, in a prescribed
    motion (a displacement: its rate enters the initial velocity, see
    :func:`table_function`) or in any expression.
    """

    input: str
    tables: tuple[tuple[tuple[float, ...], tuple[float, ...]], ...]
    knots: tuple[Parameter, ...] = ()
    source: str = ""

    def __post_init__(self) -> None:
        tables = tuple((tuple(float(x) for x in times), tuple(float(x) for x in values))
                       for times, values in self.tables)
        object.__setattr__(self, "tables", tables)
        object.__setattr__(self, "knots", tuple(self.knots))
        where = f"signal of input '{self.input}'"
        check_free_text(self.source, f"{where}: source")
        if self.measured:
            if len(tables) != 1:
                raise ModelError(f"{where}: measured data are one table (times, values); give one.")
        elif len(tables) != len(self.knots) or len(tables) < 2:
            raise ModelError(f"{where}: give one table per knot, and at least 2 knots.")
        for times, values in tables:
            if len(times) < 2 or len(values) != len(times) or any(b <= a for a, b in zip(times, times[1:])):
                raise ModelError(f"{where}: each table needs at least two increasing times and a value per time.")
            if not all(math.isfinite(x) for x in times + values):
                raise ModelError(f"{where}: a table contains NaN or infinite values.")

    @property
    def measured(self) -> bool:
        """Driven by measured data (one table, no knots) rather than by knot values."""
        return not self.knots

    def value(self, table: Callable[[tuple[float, ...], tuple[float, ...]], sp.Expr],
              knot: Callable[[str], sp.Expr]) -> sp.Expr:
        """``u(t)`` as an expression: ``table(times, values)`` is a table's function of ``t``,
        ``knot(name)`` a knot parameter's symbol."""
        if self.measured:
            return table(*self.tables[0])
        return sp.Add(*(knot(k.name) * table(times, values) for k, (times, values) in zip(self.knots, self.tables)))


@dataclasses.dataclass(frozen=True)
class SimulationSettings:
    """Defaults for a simulation of the model (overridable on the command line).

    ``integrator`` is ``"hht"`` (constant ``alpha``) or ``"generalized_alpha"`` (constant
    ``rho_inf``), see :mod:`fmi_adjoint.integrate.schemes`.  ``newton`` is ``"full"`` (refactor
    the iteration matrix at every Newton iteration) or ``"modified"`` (keep it while the
    iterations contract: :data:`fmi_adjoint.integrate.schemes.NEWTON_METHODS`), the model's
    default for ``--newton``; modified suits models whose iteration matrix barely changes, such as
    flexible bodies with their constant mass and stiffness matrices (Vanpaemel et al., eqs.
    (11)-(12)).
    """

    t_end: float = 1.0
    step: float = 1e-3
    alpha: float = -0.05
    integrator: str = "hht"
    rho_inf: float = 0.8
    newton: str = "full"

    def __post_init__(self) -> None:
        for name in ("t_end", "step", "alpha", "rho_inf"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ModelError(f"simulation.{name} = {value!r} is not a finite number.")
            object.__setattr__(self, name, float(value))
        if self.t_end <= 0:
            raise ModelError(f"simulation.t_end = {self.t_end} must be positive.")
        if self.step <= 0:
            raise ModelError(f"simulation.step = {self.step} must be positive.")
        if not -1.0 / 3.0 <= self.alpha <= 0.0:
            raise ModelError(f"simulation.alpha = {self.alpha} is outside [-1/3, 0], where HHT is stable.")
        if self.integrator not in ("hht", "generalized_alpha"):
            raise ModelError(f"simulation.integrator = {excerpt(str(self.integrator))} is unknown; write \"hht\" or "
                             "\"generalized_alpha\".")
        if not 0.0 <= self.rho_inf <= 1.0:
            raise ModelError(f"simulation.rho_inf = {self.rho_inf} is outside [0, 1] (1: undamped, 0: the highest "
                             "frequencies damped in one step).")
        if self.newton not in ("full", "modified"):
            raise ModelError(f"simulation.newton = {excerpt(str(self.newton))} is unknown; write \"full\" or "
                             "\"modified\".")


@dataclasses.dataclass(frozen=True)
class Model:
    """A multibody model in redundant coordinates.

    Attributes
    ----------
    name : str
    coordinates : tuple of Coordinate
    parameters : tuple of Parameter
    forces : tuple of AbstractForceElement
    constraints : tuple of Constraint
    prescribed : tuple of PrescribedMotion
    outputs : tuple of Output
    mass_matrix : tuple of MassEntry
        Off-diagonal or configuration-dependent entries; the diagonal comes from
        ``Coordinate.mass`` unless an entry overrides it.
    simulation : SimulationSettings
    description, source : str
        Free text; ``source`` says where the model and its values come from.
    signals : tuple of InputSignal
        Inputs driven by knot values (optimal input design); their knot parameters follow
        all other parameters in :attr:`all_parameters`.
    matrix_terms : tuple of MatrixTerm or QuadraticConstraints
        Structured terms (:mod:`fmi_adjoint.structured`): constant or parameter-scaled sparse
        mass, stiffness, damping and load matrices, and quadratic constraints, kept as data.
        Their constraint rows follow the constraints and drives.
    """

    name: str
    coordinates: tuple[Coordinate, ...]
    parameters: tuple[Parameter, ...] = ()
    forces: tuple[AbstractForceElement, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    prescribed: tuple[PrescribedMotion, ...] = ()
    outputs: tuple[Output, ...] = ()
    mass_matrix: tuple[MassEntry, ...] = ()
    simulation: SimulationSettings = SimulationSettings()
    description: str = ""
    source: str = ""
    signals: tuple[InputSignal, ...] = ()
    matrix_terms: tuple[StructuredItem, ...] = ()

    def __post_init__(self) -> None:
        # The name becomes the FMU's modelIdentifier (a C identifier and a file name).
        check_identifier(self.name, "model")
        check_free_text(self.description, f"model '{self.name}': description")
        check_free_text(self.source, f"model '{self.name}': source")
        for field in ("coordinates", "parameters", "forces", "constraints", "prescribed", "outputs", "mass_matrix",
                      "signals", "matrix_terms"):
            object.__setattr__(self, field, tuple(getattr(self, field)))
        if not self.coordinates:
            raise ModelError(f"model '{self.name}': it has no coordinates; define at least one.")
        if not self.outputs:
            raise ModelError(f"model '{self.name}': it has no outputs; define at least one.")
        for item in self.matrix_terms:
            if not isinstance(item, (MatrixTerm, QuadraticConstraints)):
                raise ModelError(f"model '{self.name}': {item!r} is not a MatrixTerm or QuadraticConstraints.")
        for element in self.forces:
            if not isinstance(element, AbstractForceElement):
                raise ModelError(f"model '{self.name}': {element!r} is not a force element.")
            check_identifier(element.name, f"model '{self.name}': force element")
        groups = {
            "coordinate": [c.name for c in self.all_coordinates],
            "parameter": [p.name for p in self.all_parameters],
        }
        seen: dict[str, str] = {}
        for what, names in groups.items():
            for name in names:
                if name in seen:
                    raise ModelError(f"model '{self.name}': the name '{name}' is used twice ({seen[name]} and {what}).")
                seen[name] = what
        for what, names in (
            ("force element", [f.name for f in self.forces]),
            ("constraint", [c.name for c in self.constraints] + [f"drive_{m.coordinate}" for m in self.prescribed]
             + [r for item in self.matrix_terms if isinstance(item, QuadraticConstraints) for r in item.row_names()]),
            ("matrix term", [item.name for item in self.matrix_terms]),
            ("output", [o.name for o in self.outputs]),
        ):
            duplicates = sorted(n for n, count in collections.Counter(names).items() if count > 1)
            if duplicates:
                raise ModelError(f"model '{self.name}': {what} name(s) {duplicates} used more than once.")
        inputs = {p.name for p in self.parameters if p.causality == "input"}
        driven = [signal.input for signal in self.signals]
        for name in driven:
            if name not in inputs:
                raise ModelError(f"model '{self.name}': a signal drives '{name}', which is not an [inputs] entry; "
                                 f"inputs: {', '.join(sorted(inputs)) or '(none)'}.")
            if driven.count(name) > 1:
                raise ModelError(f"model '{self.name}': input '{name}' is driven by two signals; give one.")

    @property
    def all_parameters(self) -> tuple[Parameter, ...]:
        """Declared parameters followed by those created for unbound element properties
        (named ``<element>_<property>``; a declared parameter of that name takes precedence)."""
        declared = {p.name for p in self.parameters}
        extra = []
        for element in self.forces:
            for name, decl in element.automatic_parameters():
                if name in declared:
                    continue
                extra.append(Parameter(name, decl.default, decl.unit, decl.bounds, decl.description))
                declared.add(name)
        knots = tuple(knot for signal in self.signals for knot in signal.knots)
        return self.parameters + tuple(extra) + knots

    @property
    def all_coordinates(self) -> tuple[Coordinate, ...]:
        """Declared coordinates followed by the internal massless nodes of elements."""
        by_name = {c.name: c for c in self.coordinates}
        extra = []
        for element in self.forces:
            for name, guess in element.internal_coordinates():
                if name in by_name:
                    raise ModelError(f"{element.where()}: its internal node '{name}' clashes with a coordinate name.")
                ends = getattr(element, "coordinates", ())
                if not ends or ends[0] not in by_name:
                    raise ModelError(f"{element.where('coordinates')}: unknown coordinate in {ends!r}.")
                start = by_name[guess].initial_position if guess in by_name else 0.0
                node = Coordinate(name, kind=by_name[ends[0]].kind, mass=0.0, initial_position=start)
                extra.append(node)
                by_name[name] = node
        return self.coordinates + tuple(extra)

    def parameter(self, name: str) -> Parameter:
        """The parameter called ``name`` (ModelError if there is none)."""
        for par in self.all_parameters:
            if par.name == name:
                return par
        known = ", ".join(p.name for p in self.all_parameters)
        raise ModelError(f"model '{self.name}' has no parameter '{name}'. Parameters: {known}.")

    def with_values(self, values: Mapping[str, float]) -> Model:
        """A copy with new nominal parameter values (unknown names raise ModelError)."""
        for name in values:
            self.parameter(name)
        declared = {p.name for p in self.parameters}
        params = tuple(
            dataclasses.replace(p, value=float(values[p.name])) if p.name in values else p for p in self.parameters
        )
        automatic = tuple(
            dataclasses.replace(p, value=float(values[p.name]))
            for p in self.all_parameters
            if p.name in values and p.name not in declared
        )
        return dataclasses.replace(self, parameters=params + automatic)


@dataclasses.dataclass(frozen=True, eq=False)
class SymbolicModel:
    """The assembled equations of a :class:`Model` as sympy objects.

    Symbols carry internal names (``q_0``, ``p_3``, ...) so that generated code never
    contains a user-chosen name.
    """

    model: Model
    t: sp.Symbol
    q: tuple[sp.Symbol, ...]
    v: tuple[sp.Symbol, ...]
    a: tuple[sp.Symbol, ...]
    lam: tuple[sp.Symbol, ...]
    p: tuple[sp.Symbol, ...]
    M: sp.Matrix
    Q: sp.Matrix
    C: sp.Matrix
    Y: sp.Matrix
    q0: sp.Matrix
    v0: sp.Matrix
    fixed_q: tuple[bool, ...]
    fixed_v: tuple[bool, ...]
    constraint_names: tuple[str, ...]
    tables: tuple[tuple[sp.Function, tuple[float, ...], tuple[float, ...]], ...]
    table_sources: tuple[str, ...] = ()


class _Context:
    """The :class:`~fmi_adjoint.forces.base.ElementContext` handed to force elements."""

    def __init__(self, model: Model, coordinates, parameters, t, q, v, p):
        self.model = model
        self.t = t
        self.q = {c.name: s for c, s in zip(coordinates, q)}
        self.v = {c.name: s for c, s in zip(coordinates, v)}
        self.params = {par.name: s for par, s in zip(parameters, p)}
        self.tables: list = []
        self.table_sources: list[str] = []
        self._names: dict[bool, dict[str, sp.Expr]] = {}
        self._renamed: dict[str, dict] = {}

    def renamed(self, kind: str) -> dict:
        """The subexpressions renamed so far by the parses of one ``kind`` (same names and
        specials; :func:`fmi_adjoint.expressions.parse_expression`), forgotten when the names
        change: a subexpression shared by many built expressions is renamed once."""
        return self._renamed.setdefault(kind, {})

    def parameter(self, name: str) -> sp.Symbol:
        if name not in self.params:
            raise ModelError(f"model '{self.model.name}': unknown parameter '{name}'.")
        return self.params[name]

    def _coord(self, table: dict, name: str) -> sp.Symbol:
        if name not in table:
            raise ModelError(
                f"model '{self.model.name}': unknown coordinate '{name}'. Coordinates: {', '.join(self.q)}."
            )
        return table[name]

    def position(self, coordinate: str) -> sp.Symbol:
        return self._coord(self.q, coordinate)

    def velocity(self, coordinate: str) -> sp.Symbol:
        return self._coord(self.v, coordinate)

    def names(self, positions: bool = True) -> dict[str, sp.Expr]:
        """The names an expression may use (one dict per kind, remade when the parameters
        change: a model of thousands of coordinates parses thousands of expressions)."""
        known = self._names.get(positions)
        if known is None:
            known = {"t": self.t, **self.params}
            if positions:
                known.update(self.q)
            self._names[positions] = known
        return known

    def define(self, name: str, value: sp.Expr) -> None:
        """Let expressions read ``name`` as ``value`` (an input's signal)."""
        self.params[name] = value
        self._names.clear()
        self._renamed.clear()

    def der(self, name: str) -> sp.Symbol:
        if name not in self.v:
            raise ModelError(f"der({name}): '{name}' is not a coordinate. Coordinates: {', '.join(self.v)}.")
        return self.v[name]

    def expression(self, value: Number, where: str) -> sp.Expr:
        return parse_expression(value, self.names(), where=where, specials={"der": self.der},
                                renamed=self.renamed("expression"))

    def parameter_expression(self, value: Number, where: str, allow_time: bool = False) -> sp.Expr:
        # A view, not a copy: a model with a parameter per element parses one per element.
        names = ChainMap({"t": self.t}, self.params) if allow_time else self.params
        return parse_expression(value, names, where=where)

    def table(self, times: tuple[float, ...], values: tuple[float, ...], where: str) -> sp.Expr:
        func = table_function(f"tbl_{len(self.tables)}")
        self.tables.append((func, times, values))
        self.table_sources.append(where)
        return func(self.t)


def _zero_rate(self, argindex: int = 1) -> sp.Expr:
    return sp.S.Zero


def table_function(name: str) -> sp.FunctionClass:
    """The opaque function ``name(t)`` of a time table interpolated linearly, and its rate.

    Its derivative is ``<name>_rate(t)``, the slope of the table's segment that holds ``t``
    (right-sided at a table time, 0 outside the table, where the end values are held); the
    rate's derivative is 0 (a piecewise linear function's second derivative almost everywhere).
    So a drive ``q - u(t)`` of a measured input has its velocity and acceleration rows
    (``C_t``, ``C_tt`` of the initialization, :func:`fmi_adjoint.equations.differentiate`) of the
    interpolation the step itself sees.  Both engines print the two functions by name
    (:data:`fmi_adjoint.expressions.TABLE_RATE_SUFFIX`)."""
    rate = sp.Function(f"{name}{TABLE_RATE_SUFFIX}", real=True, fdiff=_zero_rate)

    def fdiff(self, argindex: int = 1) -> sp.Expr:
        return rate(self.args[0])

    return sp.Function(name, real=True, fdiff=fdiff)



class _Lazy(Mapping):
    """A mapping whose values are computed when asked for (``reaction(x)`` of outputs)."""

    def __init__(self, keys, compute):
        self._keys, self._compute = keys, compute

    def __getitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        return self._compute(key)

    def __contains__(self, key):
        return key in self._keys

    def __iter__(self):
        return iter(self._keys)

    def __len__(self):
        return len(self._keys)


def quadratic_velocity_terms(M: sp.Matrix, q: tuple[sp.Symbol, ...], v: tuple[sp.Symbol, ...]) -> sp.Matrix:
    """The quadratic velocity terms of Lagrange's equations for ``T = v^T M(q) v / 2``:

    .. math::  Q_v = \\partial T/\\partial q - \\dot M v, \\qquad
               Q_{v,k} = \\tfrac12 \\sum_{ij} M_{ij,k} v_i v_j - \\sum_{ij} M_{kj,i} v_j v_i

    (dissertation Sec. 2.3.4).  Formed entry by entry, differentiating each entry of ``M`` only
    by the coordinates it contains: a multibody model's ``M`` is block diagonal (one block per
    body, ``4 G^T J G`` of the Euler parameters, eq. (2.36)), so this costs a few derivatives per
    body instead of the ``n^2`` of ``(M v)_q`` and ``n`` derivatives of the whole kinetic energy.
    """
    from .calculus import Differentiator

    n = len(q)
    index = {s: k for k, s in enumerate(q)}
    terms: list[list[sp.Expr]] = [[] for _ in range(n)]
    calculus = Differentiator()
    for i in range(n):
        for j in range(n):
            entry = M[i, j]
            if entry == 0:
                continue
            for symbol in sorted(entry.free_symbols & index.keys(), key=index.__getitem__):
                k = index[symbol]
                derivative = calculus.derivative(entry, symbol)
                terms[k].append(derivative * v[i] * v[j] / 2)  # dT/dq_k
                terms[i].append(-derivative * v[j] * v[k])     # -(M_ij)' v_j
    return sp.Matrix([sp.Add(*row) for row in terms])


@dataclasses.dataclass(frozen=True, eq=False)
class ParsedModel:
    """Every expression of a :class:`Model`, parsed once, item by item: what :func:`assemble`
    sums into matrices and what the component assembly (:mod:`fmi_adjoint.assembly`) keeps
    apart as component instances.  Symbols as in :class:`SymbolicModel`.

    Attributes
    ----------
    masses : tuple of sympy.Expr
        ``Coordinate.mass`` of every coordinate (the diagonal, unless an entry overrides it).
    mass_entries : tuple of (int, int, sympy.Expr, str)
        The ``mass_matrix`` entries ``(i, j, value, group)`` in the model's order: an ungrouped
        entry (``group`` empty) sets ``M[i, j] = M[j, i]``, a grouped one adds to it
        (:class:`MassEntry`).
    mass_data : tuple of (sympy.Symbol, float)
        The named numbers of the grouped entries (``MassEntry.data``): a symbol per group and
        name (named ``data <group!r> <name!r>``, which no model name can be) and its number.
    forces : tuple of (AbstractForceElement, tuple of dict)
        Every element with its parts (:meth:`~fmi_adjoint.forces.base.AbstractForceElement.generalized_force_parts`),
        each ``{coordinate index: generalized force}``.
    constraints : tuple of sympy.Expr
        The constraint rows: the model's constraints, then the drives ``q_k - s(t)``.
    constraint_groups : tuple of str
        The component each row belongs to (``Constraint.group``; a drive is its own), for the
        component assembly.
    structured : tuple of ParsedTerm or ParsedQuadratic
        The structured terms (:mod:`fmi_adjoint.structured`), kept as data; the rows of the
        quadratic constraints follow ``constraints`` (``lam`` and ``constraint_names`` cover
        both).
    outputs : tuple of sympy.Expr
    q0, v0 : tuple of sympy.Expr
        Initial positions and velocities (expressions of parameters).
    """

    model: Model
    t: sp.Symbol
    q: tuple[sp.Symbol, ...]
    v: tuple[sp.Symbol, ...]
    a: tuple[sp.Symbol, ...]
    lam: tuple[sp.Symbol, ...]
    p: tuple[sp.Symbol, ...]
    masses: tuple[sp.Expr, ...]
    mass_entries: tuple[tuple[int, int, sp.Expr, str], ...]
    forces: tuple[tuple[AbstractForceElement, tuple[dict[int, sp.Expr], ...]], ...]
    constraints: tuple[sp.Expr, ...]
    constraint_names: tuple[str, ...]
    constraint_groups: tuple[str, ...]
    outputs: tuple[sp.Expr, ...]
    q0: tuple[sp.Expr, ...]
    v0: tuple[sp.Expr, ...]
    tables: tuple[tuple[sp.Function, tuple[float, ...], tuple[float, ...]], ...]
    table_sources: tuple[str, ...]
    structured: tuple[ParsedTerm | ParsedQuadratic, ...] = ()
    mass_data: tuple[tuple[sp.Symbol, float], ...] = ()


#: The model parsed last and its items: a model file is parsed once when it is read (its
#: errors reported there) and again by the build (:func:`fmi_adjoint.assembly.partition`); the
#: items are frozen, so the second parse of the same model object is the first one's.
_LAST_PARSED: list[tuple[Model, ParsedModel]] = []


def parse_items(model: Model) -> ParsedModel:
    """Parse every expression of ``model`` (linear in its size; :func:`assemble` adds the sums).
    The model parsed last is remembered (:data:`_LAST_PARSED`).

    Raises
    ------
    ModelError
        For unknown names, invalid expressions, a prescribed coordinate that does not
        exist, or an expression of the wrong kind (e.g. a mass depending on time).
    """
    last = _LAST_PARSED[0] if _LAST_PARSED else None
    if last is not None and last[0] is model:
        return last[1]
    with collection_paused():
        parsed = _parse_items(model)
    _LAST_PARSED[:] = [(model, parsed)]
    return parsed


def _parse_items(model: Model) -> ParsedModel:
    coordinates = model.all_coordinates
    parameters = model.all_parameters
    n = len(coordinates)
    t = sp.Symbol("t", real=True)
    q = tuple(sp.Symbol(f"q_{i}", real=True) for i in range(n))
    v = tuple(sp.Symbol(f"v_{i}", real=True) for i in range(n))
    a = tuple(sp.Symbol(f"a_{i}", real=True) for i in range(n))
    p = tuple(sp.Symbol(f"p_{i}", real=True) for i in range(len(parameters)))
    ctx = _Context(model, coordinates, parameters, t, q, v, p)
    index = {c.name: i for i, c in enumerate(coordinates)}
    for signal in model.signals:
        # Every expression naming the input sees u(t) (InputSignal).
        where = (f"model '{model.name}': measured data of input '{signal.input}' ({signal.source or 'no source'})"
                 if signal.measured else f"model '{model.name}': signal of input '{signal.input}'")
        ctx.define(signal.input, signal.value(functools.partial(ctx.table, where=where), ctx.params.__getitem__))
    masses, entries, mass_data = _parse_masses(model, ctx, index)
    forces = _parse_forces(model, ctx, index)
    rows, names, groups = _parse_constraints(model, ctx, index, q)
    structured, names = _parse_structured(model, ctx, index, names)
    lam = tuple(sp.Symbol(f"lam_{k}", real=True) for k in range(len(names)))
    outputs = _parse_outputs(model, ctx, index, rows, structured, names, lam, (q, v, a))
    q0, v0 = _parse_initial(model, ctx, index)
    return ParsedModel(
        model=model, t=t, q=q, v=v, a=a, lam=lam, p=p, masses=masses, mass_entries=entries,
        forces=forces, constraints=tuple(rows), constraint_names=tuple(names), constraint_groups=tuple(groups),
        outputs=outputs, q0=q0, v0=v0, tables=tuple(ctx.tables), table_sources=tuple(ctx.table_sources),
        structured=tuple(structured), mass_data=mass_data,
    )


def _unknown(where: str, coordinate: str, index: Mapping[str, int]) -> ModelError:
    return ModelError(f"{where}: unknown coordinate '{coordinate}'. Coordinates: {', '.join(index)}.")


def _parse_masses(model: Model, ctx: _Context, index: Mapping[str, int]
                  ) -> tuple[tuple[sp.Expr, ...], tuple[tuple[int, int, sp.Expr, str], ...],
                             tuple[tuple[sp.Symbol, float], ...]]:
    """The mass matrix: the diagonal from the coordinates' masses, the entries that override
    (ungrouped) or add (grouped, :class:`MassEntry`) terms (expressions of parameters and
    positions; not of time or inputs), and the grouped entries' named numbers."""
    name, t = model.name, ctx.t
    masses = tuple(ctx.parameter_expression(coord.mass, f"model '{name}': coordinate '{coord.name}'.mass")
                   for coord in model.all_coordinates)
    entries: list[tuple[int, int, sp.Expr, str]] = []
    data: dict[sp.Symbol, float] = {}
    group_names: dict[tuple, tuple[Mapping[str, sp.Expr], dict]] = {}  # (group, data names) -> (names, renamed)
    for k, entry in enumerate(model.mass_matrix):
        where = f"model '{name}': mass_matrix[{k}]"
        for end in (entry.row, entry.col):
            if end not in index:
                raise _unknown(where, end, index)
        model_names = ctx.names()
        names: Mapping[str, sp.Expr] = model_names
        renamed = ctx.renamed("plain")
        if entry.data:
            names, renamed = _group_data(entry, where, model_names, group_names, data)
        value = parse_expression(entry.value, names, where=where, renamed=renamed)
        if value.has(*(func(t) for func, _, _ in ctx.tables)):
            raise ModelError(f"{where}: a mass depends on a driven input; inputs may act in forces, constraints "
                             "and outputs only.")
        if value.has(t):
            raise ModelError(f"{where}: a mass-matrix entry may not depend on t; use parameters and positions.")
        entries.append((index[entry.row], index[entry.col], value, entry.group))
    if any(mass.has(t) for mass in masses):
        raise ModelError(f"model '{name}': a mass depends on a driven input; inputs may act in forces, constraints "
                         "and outputs only.")
    return masses, tuple(entries), tuple(data.items())


def _group_data(entry: MassEntry, where: str, names: dict[str, sp.Expr],
                known: dict[tuple, tuple[Mapping[str, sp.Expr], dict]], data: dict[sp.Symbol, float]
                ) -> tuple[Mapping[str, sp.Expr], dict]:
    """The names ``entry``'s value may use (the model's and its own data) and a renaming memo
    shared by the entries of its group with the same data names; its numbers checked and
    recorded in ``data`` (:class:`MassEntry`)."""
    if not entry.group:
        raise ModelError(f"{where}: named data belong to a group of entries; give the entry a group.")
    key = (entry.group, tuple(name for name, _ in entry.data))
    if key not in known:
        data_names: dict[str, sp.Expr] = {}
        for name, _ in entry.data:
            if name in names:
                raise ModelError(f"{where}: the data name '{name}' is a name of the model; rename the datum.")
            # The group and the name quoted: no two (group, name) pairs give one symbol.
            data_names[name] = sp.Symbol(f"data {entry.group!r} {name!r}", real=True)
        known[key] = (collections.ChainMap(data_names, names), {})  # not a copy of the model's names per group
    own, renamed = known[key]
    for name, number in entry.data:
        if not math.isfinite(number):
            raise ModelError(f"{where}: the datum '{name}' = {number!r} is not finite; give a finite number.")
        symbol = own[name]
        if data.setdefault(symbol, number) != number:
            raise ModelError(f"{where}: the datum '{name}' of group '{entry.group}' is {number!r} here and "
                             f"{data[symbol]!r} in another entry; one name has one number in a group.")
    return own, renamed


def _parse_forces(model: Model, ctx: _Context, index: Mapping[str, int]
                  ) -> tuple[tuple[AbstractForceElement, tuple[dict[int, sp.Expr], ...]], ...]:
    """The applied forces of the elements, part by part, by coordinate index."""
    forces = []
    for element in model.forces:
        parts = []
        for part in element.generalized_force_parts(ctx):
            indexed: dict[int, sp.Expr] = {}
            for target, force in part.items():
                if target not in index:
                    raise ModelError(f"{element.where()}: unknown coordinate '{target}'.")
                k = index[target]
                indexed[k] = indexed[k] + force if k in indexed else force
            parts.append(indexed)
        forces.append((element, tuple(parts)))
    return tuple(forces)


def _parse_constraints(model: Model, ctx: _Context, index: Mapping[str, int], q: tuple[sp.Symbol, ...]
                       ) -> tuple[list[sp.Expr], list[str], list[str]]:
    """The constraint rows, their names and groups: the user's constraints first, then the
    drives of prescribed coordinates."""
    name = model.name
    rows: list[sp.Expr] = []
    names: list[str] = []
    groups: list[str] = []
    q_set = set(q)
    for con in model.constraints:
        expr = parse_expression(con.expression, ctx.names(), where=f"model '{name}': constraint '{con.name}'",
                                renamed=ctx.renamed("plain"))
        if not expr.free_symbols & q_set:  # not expr.has(*q): that walks the expression once per coordinate
            raise ModelError(f"model '{name}': constraint '{con.name}' does not depend on any coordinate.")
        rows.append(expr)
        names.append(con.name)
        groups.append(con.group or con.name)
    for motion in model.prescribed:
        where = f"model '{name}': prescribed motion of '{motion.coordinate}'"
        if motion.coordinate not in index:
            raise ModelError(f"{where}: unknown coordinate. Coordinates: {', '.join(index)}.")
        s = ctx.parameter_expression(motion.expression, where, allow_time=True)
        rows.append(q[index[motion.coordinate]] - s)
        names.append(f"drive_{motion.coordinate}")
        groups.append(f"drive_{motion.coordinate}")
    return rows, names, groups


def _parse_structured(model: Model, ctx: _Context, index: Mapping[str, int], names: list[str]
                      ) -> tuple[list[ParsedTerm | ParsedQuadratic], list[str]]:
    """The structured terms as data, with their coordinates' indices and parsed factors; and the
    constraint names extended by the quadratic constraints' rows (after the expression rows)."""
    structured: list[ParsedTerm | ParsedQuadratic] = []
    row_names = list(names)
    for item in model.matrix_terms:
        kind = "matrix term" if isinstance(item, MatrixTerm) else "quadratic constraints"
        where = f"model '{model.name}': {kind} '{item.name}'"
        for coordinate in item.coordinates:
            if coordinate not in index:
                raise _unknown(where, coordinate, index)
        local = tuple(index[c] for c in item.coordinates)
        if isinstance(item, MatrixTerm):
            structured.append(ParsedTerm(item, local, ctx.parameter_expression(item.factor, f"{where}: factor")))
        else:
            first = len(row_names)
            row_names += item.row_names()
            structured.append(ParsedQuadratic(item, local, tuple(range(first, len(row_names)))))
    return structured, row_names


def _parse_outputs(model: Model, ctx: _Context, index: Mapping[str, int], rows: Sequence[sp.Expr],
                   structured: Sequence[ParsedTerm | ParsedQuadratic], names: Sequence[str],
                   lam: tuple[sp.Symbol, ...], qva: tuple[tuple[sp.Symbol, ...], ...]) -> tuple[sp.Expr, ...]:
    """The outputs, with ``der``, ``der2``, ``lam`` and ``reaction`` resolved (``qva``: the
    symbols of positions, velocities and accelerations)."""
    q, v, a = qva
    lam_by_name = dict(zip(names, lam))

    def reaction(name: str) -> sp.Expr:
        # -(C_q^T lambda)_x, formed only for the coordinates an output asks about.
        symbol = q[index[name]]
        terms = [row.diff(symbol) * mu for row, mu in zip(rows, lam) if row.has(symbol)]
        for parsed in structured:  # the quadratic rows' derivatives, from their matrices
            if isinstance(parsed, ParsedQuadratic) and index[name] in parsed.coordinates:
                qs = [q[i] for i in parsed.coordinates]
                terms += [row.diff(symbol) * lam[r] for row, r in zip(parsed.item.rows(qs), parsed.multipliers)]
        return -sp.Add(*terms)

    def special(table: Mapping[str, sp.Expr], what: str):
        def handler(arg: str) -> sp.Expr:
            if arg not in table:
                raise ModelError(f"{what}({arg}): unknown name '{arg}'. Known: {', '.join(table) or '(none)'}.")
            return table[arg]

        return handler

    specials = {
        "der": special(dict(zip(index, v)), "der"),
        "der2": special(dict(zip(index, a)), "der2"),
        "lam": special(lam_by_name, "lam"),
        "reaction": special(_Lazy(index, reaction), "reaction"),
    }
    renamed = ctx.renamed("outputs")
    return tuple(parse_expression(out.expression, ctx.names(), where=f"model '{model.name}': output '{out.name}'",
                                  specials=specials, renamed=renamed)
                 for out in model.outputs)


def _parse_initial(model: Model, ctx: _Context, index: Mapping[str, int]
                   ) -> tuple[tuple[sp.Expr, ...], tuple[sp.Expr, ...]]:
    """Initial positions and velocities (guesses for free coordinates), expressions of
    parameters; a prescribed coordinate may not also be fixed for the initial state."""
    name, coordinates = model.name, model.all_coordinates
    q0 = tuple(ctx.parameter_expression(c.initial_position, f"model '{name}': coordinate '{c.name}'.initial_position")
               for c in coordinates)
    v0 = tuple(ctx.parameter_expression(c.initial_velocity, f"model '{name}': coordinate '{c.name}'.initial_velocity")
               for c in coordinates)
    for motion in model.prescribed:
        k = index[motion.coordinate]
        if coordinates[k].fixed_position or coordinates[k].fixed_velocity:
            raise ModelError(
                f"model '{name}': coordinate '{motion.coordinate}' is prescribed and also marked fixed for the "
                "initial state; remove 'fixed' (the drive already sets it)."
            )
    return q0, v0


def assemble(model: Model, *, velocity_terms: bool = True) -> SymbolicModel:
    """Build the symbolic equations of motion, constraints and outputs of ``model``.

    ``velocity_terms=False`` leaves out the quadratic velocity terms of a mass matrix that
    depends on ``q`` (they cannot fail): for checking a model's expressions only, never for
    its equations.

    Raises
    ------
    ModelError
        As :func:`parse_items`.
    """
    parsed = parse_items(model)
    n = len(parsed.q)
    M = sp.zeros(n, n)
    for i, mass in enumerate(parsed.masses):
        M[i, i] = mass
    for i, j, value, group in parsed.mass_entries:  # ungrouped entries set, then grouped ones add
        if not group:
            M[i, j] = value
            M[j, i] = value
    data = {symbol: sp.Float(number) for symbol, number in parsed.mass_data}
    for i, j, value, group in parsed.mass_entries:
        if group:
            value = value.xreplace(data) if data else value
            M[i, j] += value
            if i != j:
                M[j, i] += value
    Q = sp.zeros(n, 1)
    for _, parts in parsed.forces:
        for part in parts:
            for k, force in part.items():
                Q[k] += force
    C = list(parsed.constraints)
    for term in parsed.structured:  # written out entry by entry: the reference of the structured kernels
        coords = term.coordinates
        if isinstance(term, ParsedQuadratic):
            C += term.item.rows([parsed.q[i] for i in coords])
            continue
        matrix = term.item.matrix
        if term.item.role.target == "Ma":
            scale = term.item.role.sign * term.factor
            for r, c, value in zip(matrix.rows, matrix.cols, matrix.values):
                M[coords[int(r)], coords[int(c)]] += scale * sp.Float(float(value))
            continue
        x = {"q": parsed.q, "v": parsed.v}.get(term.item.role.argument or "", ())
        for r, _, value in term.item.expressions([x[i] for i in coords] if x else [], term.factor):
            Q[coords[r]] -= value
    if velocity_terms:
        Q += quadratic_velocity_terms(M, parsed.q, parsed.v)
    coordinates = model.all_coordinates
    return SymbolicModel(
        model=model,
        t=parsed.t,
        q=parsed.q,
        v=parsed.v,
        a=parsed.a,
        lam=parsed.lam,
        p=parsed.p,
        M=M,
        Q=Q,
        C=sp.Matrix(C) if C else sp.zeros(0, 1),
        Y=sp.Matrix(parsed.outputs),
        q0=sp.Matrix(parsed.q0),
        v0=sp.Matrix(parsed.v0),
        fixed_q=tuple(c.fixed_position for c in coordinates),
        fixed_v=tuple(c.fixed_velocity for c in coordinates),
        constraint_names=parsed.constraint_names,
        tables=parsed.tables,
        table_sources=parsed.table_sources,
    )
