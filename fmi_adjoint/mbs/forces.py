"""Forces between markers: point-to-point spring-dampers, bushings and joint-coordinate forces.

Each component carries a *scalar law*: an instance of any registered force element (see
:mod:`fmi_adjoint.forces.registry`) used as ``f(s, s_dot)`` on a scalar generalized
displacement ``s(q)`` of the multibody system -- the distance of two markers
(:class:`SpringDamper`), one of the six relative displacements of a bushing
(:class:`Bushing`) or a joint coordinate (:class:`JointForce`).  The law's own ``name`` and
``coordinates`` are ignored (use :func:`scalar_law` to build one without them); its unbound
properties become model parameters named after the component (below).

Two ways to apply a law (issue 23, design "Forces between markers"):

* **Chain rule** (a two-point law without internal nodes, written symbolically): with the
  element force ``f = law(s, s_dot)`` resisting the extension ``s``, the generalized force
  is the virtual work of ``-f`` along ``delta s``::

      Q_k = -f(s, s_dot) ds/dq_k,      s_dot = sum_k ds/dq_k der(q_k)

  (Oberpeilsteiner 2018, Sec. 2.3.2: generalized forces from virtual work).  Exact for any
  smooth ``s(q)``; a potential ``V(s)`` gives ``Q = -dV/dq``.
  Used where ``s`` is linear in the coordinates (a planar joint angle ``phi_j - phi_i``, a
  slide along a fixed axis): then ``ds/dq`` is constant and the law appears once per
  coordinate at no cost.
* **Auxiliary coordinate** (every other displacement, and laws with internal nodes --
  Maxwell, TVD -- and numeric elements): a massless coordinate ``<name>_s`` with the constraint
  ``<name>_s - s(q) = 0`` named ``<name>_s``; the law acts on ``<name>_s`` (to ground).  On
  the massless coordinate ``0 = -f - lambda``, so the multiplier ``lambda = -f`` carries the
  law's force into the bodies as ``-C_q^T lambda = -f ds/dq``: the same virtual work.  This is
  finite-element assembly in miniature: the law is stated once, on its own coordinate, and
  the kinematics ``s(q)`` once, in the constraint.  The chain rule would copy the whole law
  ``f(s(q), s_dot(q, v))`` into every coordinate's force: on the MacPherson strut (spatial
  bodies, eq. (22) of seed 003) that made the model 2 million expression nodes and its
  validation alone 95 s.  A law
  that needs two ends (``ends = (2,)``) acts between ``<name>_s`` and a second massless
  coordinate ``<name>_ref`` held at zero by the constraint ``<name>_ref``.
  The auxiliary coordinate starts at ``s(q0)`` with the velocity ``s_dot(q0, v0)``, so making
  the initial state consistent leaves the bodies' velocities alone.  On a spatial revolute
  joint (:class:`JointForce`) the constraint is the drive's form ``sin(theta - s) = 0``
  (:meth:`.joints.Revolute.coordinate_residual`) instead of ``s - atan2(...) = 0``: ``s`` is
  then continuous through any number of turns.

Parameter names: an unbound property ``prop`` of the law of component ``name`` becomes the
parameter ``<name>_<prop>`` (for a bushing direction ``d`` in x, y, z, rx, ry, rz:
``<name>_<d>_<prop>``), with the default, unit and bounds the element declares; a declared
parameter of that name takes precedence.

A law *over velocity* (a damper curve, force tabulated over ``s_dot``) is the registered
element ``velocity_characteristic``
(:class:`~fmi_adjoint.forces.library.springs.VelocityCharacteristic`).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

import sympy as sp

from ..calculus import Differentiator
from ..errors import ModelError
from ..expressions import special
from ..forces.base import AbstractForceElement, AbstractLocalElement, AbstractTwoPointElement, ElementContext
from ..forces.numeric import AbstractNumericElement
from ..forces.registry import element_type
from ..model import Coordinate, Parameter
from ..text import check_identifier
from .names import symbol
from .rotations import difference

if TYPE_CHECKING:
    from .context import Lowering

__all__ = [
    "SpringDamper",
    "Bushing",
    "JointForce",
    "BUSHING_DIRECTIONS",
    "scalar_law",
    "law_from_dict",
    "distance",
    "bushing_displacements",
    "rotation_measure",
    "apply_scalar_law",
    "initial_value",
    "initial_rate",
    "gradient",
]

#: The six directions of a bushing, in marker i's frame.
BUSHING_DIRECTIONS = ("x", "y", "z", "rx", "ry", "rz")



# --------------------------------------------------------------------------- laws


def _placeholder_ends(cls: type) -> tuple[str, ...]:
    ends = getattr(cls, "ends", (1, 2))
    return ("s",) if 1 in ends else ("s", "s_ref")[: min(ends)]


def scalar_law(kind: str | type[AbstractForceElement], **properties: Any) -> AbstractForceElement:
    """A law for a force between markers: the registered element ``kind`` (a type name such as
    ``"polynomial_spring_damper"`` or the class) with the given properties, e.g.
    ``scalar_law("linear_spring_damper", stiffness="k", damping="d")``.

    Name and coordinates are placeholders (the component replaces them).

    Raises
    ------
    ModelError
        Unknown type or property, or a type that is not a local (scalar) law.
    """
    where = f"scalar law {kind if isinstance(kind, str) else getattr(kind, 'type_name', kind)!r}"
    cls = element_type(kind, where) if isinstance(kind, str) else kind
    if not (inspect.isclass(cls) and issubclass(cls, AbstractLocalElement)):
        raise ModelError(f"{where}: {getattr(cls, 'type_name', cls)!r} is not a scalar law between two ends "
                         "(loads act on coordinates; use mbs.Force or mbs.Torque for them).")
    fields = {f.name for f in dataclasses.fields(cls)} - {"name", "coordinates"}
    unknown = sorted(set(properties) - fields)
    if unknown:
        raise ModelError(f"{where}: unknown propert{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}; "
                         f"'{cls.type_name}' has {', '.join(sorted(fields)) or '(none)'}.")
    return cls(name="law", coordinates=_placeholder_ends(cls), **properties)


def law_from_dict(spec: Mapping[str, Any], where: str = "law") -> AbstractForceElement:
    """A law from a mapping ``{"type": <registered name>, <property>: value, ...}`` (the form of
    a model file), e.g. ``{"type": "maxwell", "stiffness": "k", "damping": 40}``."""
    if not isinstance(spec, Mapping) or not isinstance(spec.get("type"), str):
        raise ModelError(f"{where}: a law is a table with 'type' (a registered force element such as "
                         f"\"linear_spring_damper\") and its properties; got {spec!r}.")
    props = {k: (tuple(v) if isinstance(v, list) else v) for k, v in spec.items() if k != "type"}
    try:
        return scalar_law(spec["type"], **props)
    except ModelError as exc:
        raise ModelError(f"{where}: {exc}") from None


def _as_law(value: object, where: str) -> AbstractLocalElement:
    if isinstance(value, Mapping):
        value = law_from_dict(value, where)
    if not isinstance(value, AbstractLocalElement):
        raise ModelError(f"{where}: {value!r} is not a scalar law; give a force-element instance (e.g. "
                         "mbs.scalar_law(\"linear_spring_damper\", stiffness=\"k\")) or {type = ..., ...}.")
    return value


def _linear(s: sp.Expr, coordinates: Sequence[str]) -> bool:
    """Whether ``s`` is linear in ``coordinates`` (constant ``ds/dq``): the chain rule's case.

    Decided on the tree, without differentiating (``sp.diff`` of a spring's length went through
    sympy's assumptions and logarithms: 20 ms per spring, most of a lattice's lowering): a
    sum is linear if its terms are, a product if at most one factor holds coordinates and it is
    linear, a symbol is; any other node holding a coordinate (a power, a function) is taken as
    nonlinear.  That can call an expression written unusually (``(2*x)**1``, which sympy
    folds anyway) nonlinear: it then takes the auxiliary route, which is exact too.
    """
    symbols = {symbol(name) for name in coordinates}

    def linear(node: sp.Basic) -> bool:
        if not (node.free_symbols & symbols):
            return True
        if isinstance(node, sp.Symbol):
            return True
        if isinstance(node, sp.Add):
            return all(linear(arg) for arg in node.args)
        if isinstance(node, sp.Mul):
            holding = [arg for arg in node.args if arg.free_symbols & symbols]
            return len(holding) == 1 and linear(holding[0])
        return False

    return linear(s)


def _uses_chain_rule(law: AbstractLocalElement) -> bool:
    return (isinstance(law, AbstractTwoPointElement) and not isinstance(law, AbstractNumericElement)
            and not law.internal_nodes())


class _LawContext:
    """What a law's ``bound_parameters`` asks of the model, answered in name symbols."""

    def __init__(self, ctx: Lowering):
        self.ctx = ctx
        self.t = symbol("t")

    def parameter(self, name: str) -> sp.Expr:
        return symbol(name)

    def parameter_expression(self, value, where: str) -> sp.Expr:
        return self.ctx.parameter_expression(value, where)


def _add_law_parameters(ctx: Lowering, law: AbstractLocalElement) -> None:
    for pname, decl in law.automatic_parameters():
        ctx.add_parameter(Parameter(pname, decl.default, decl.unit, decl.bounds, decl.description))


Kind = Literal["translational", "rotational"]


def apply_scalar_law(ctx: Lowering, name: str, law: AbstractLocalElement, s: sp.Expr, kind: Kind,
                     where: str, residual: sp.Expr | None = None) -> sp.Expr:
    """Apply ``law`` (renamed ``name``) on the generalized displacement ``s(q, t)`` (module
    docstring); returns the element force ``f`` as an expression (with ``der`` specials on the
    chain-rule route, the law's force on its coordinate on the auxiliary route) for sensors.

    ``kind`` (``"translational"``/``"rotational"``) is the kind of the auxiliary coordinate.
    ``residual``, if given, is a residual ``R(q, a)`` in the symbol ``a`` of the auxiliary
    coordinate ``<name>_s`` that vanishes iff ``a = s(q)`` and is continuous where ``s`` wraps
    (a spatial revolute joint's angle, :meth:`.joints.Joint.coordinate_residual`); the constraint is then
    ``R = 0`` instead of ``a - s(q) = 0`` (always the auxiliary route), and ``a`` is started
    from ``s`` at the initial positions.  On the massless coordinate ``0 = -f - R_a lambda``,
    so ``f = -R_a lambda`` and the bodies receive ``-R_q^T lambda = (f / R_a) R_q``, which is
    ``-f ds/dq`` where ``R = 0`` (the same virtual work).

    The auxiliary coordinate starts at ``s`` and with the velocity ``s_dot`` at the initial
    positions and velocities (:func:`initial_value`, :func:`initial_rate`), so that making the
    initial state consistent does not change the bodies' velocities.
    """
    coords = _coordinates_of(ctx, s)
    if not coords:
        raise ModelError(f"{where}: the displacement does not depend on any coordinate (both ends on ground?); "
                         "connect at least one moving body.")
    if residual is None and _uses_chain_rule(law) and _linear(s, coords):
        law = dataclasses.replace(law, name=name, coordinates=("s",))
        _add_law_parameters(ctx, law)
        s_dot = ctx.velocity_of(s)
        values = law.bound_parameters(cast(ElementContext, _LawContext(ctx)))
        force = cast(AbstractTwoPointElement, law).law(s, s_dot, values)
        for coord, ds in gradient(s, coords).items():
            ctx.add_generalized_force(coord, -force * ds)
        return force
    aux = f"{name}_s"
    ends = getattr(type(law), "ends", (1, 2))
    two = 1 not in ends
    guess = initial_value(ctx, s, where)
    rate = initial_rate(ctx, s, where)
    ctx.add_coordinate(Coordinate(aux, kind, 0.0, guess, rate))
    aux_symbol = symbol(aux)
    constraint = aux_symbol - s if residual is None else residual
    ctx.add_constraint(aux, constraint)
    law_coords: tuple[str, ...] = (aux,)
    if two:
        ref = f"{name}_ref"
        ctx.add_coordinate(Coordinate(ref, kind, 0.0, 0.0))
        ctx.add_constraint(ref, symbol(ref))
        law_coords = (aux, ref)
    element = dataclasses.replace(law, name=name, coordinates=law_coords)
    ctx.add_force_element(element)
    return -Differentiator().derivative(constraint, aux_symbol) * special("lam", aux)


def _initial_values(ctx: Lowering, names: Sequence[str], where: str, velocities: bool) -> dict[sp.Basic, sp.Expr]:
    values: dict[sp.Basic, sp.Expr] = {symbol("t"): sp.Integer(0)}
    for name in names:
        coord = ctx.coordinate(name)
        values[symbol(name)] = ctx.parameter_expression(coord.initial_position,
                                                         f"{where}: initial position of '{name}'")
        if velocities:
            values[special("der", name)] = ctx.parameter_expression(coord.initial_velocity,
                                                                   f"{where}: initial velocity of '{name}'")
    return values


def initial_value(ctx: Lowering, expr: sp.Expr, where: str) -> sp.Expr:
    """``expr`` at the initial positions of the coordinates (an expression of parameters): the
    initial guess of an auxiliary coordinate, consistent with its constraint."""
    return expr.xreplace(_initial_values(ctx, _coordinates_of(ctx, expr), where, velocities=False))


def initial_rate(ctx: Lowering, expr: sp.Expr, where: str) -> sp.Expr:
    """The time derivative of ``expr`` (:meth:`Lowering.velocity_of`) at the initial positions
    and velocities of the coordinates (an expression of parameters): the initial velocity of
    an auxiliary coordinate, consistent with the time derivative of its constraint."""
    names = _coordinates_of(ctx, expr)
    if expr.atoms(sp.core.function.AppliedUndef):  # velocities in expr: their rates are not known here
        rate = ctx.velocity_of(expr).xreplace(_initial_values(ctx, names, where, velocities=True))
    else:
        # d/dtau expr(q0 + tau v0, t = tau) at tau = 0: the initial values enter first, so the
        # derivative is taken once, of an expression of parameters, instead of once per
        # coordinate of the full kinematics (the same value).
        tau = sp.Dummy("tau", real=True)
        values = _initial_values(ctx, names, where, velocities=True)
        moving: dict[sp.Basic, sp.Expr] = {symbol("t"): tau}
        for name in names:
            moving[symbol(name)] = values[symbol(name)] + tau * values[special("der", name)]
        rate = Differentiator().derivative(expr.xreplace(moving), tau).xreplace({tau: sp.Integer(0)})
    if rate.has(sp.nan, sp.zoo, sp.oo, -sp.oo):
        return sp.Integer(0)  # singular where it starts (a spring of zero length): a guess like before
    return rate


def _coordinates_of(ctx: Lowering, expr: sp.Expr) -> tuple[str, ...]:
    return tuple(sorted(s.name for s in expr.free_symbols if isinstance(s, sp.Symbol) and ctx.has_coordinate(s.name)))


def gradient(expr: sp.Expr, coordinates: Sequence[str]) -> dict[str, sp.Expr]:
    """``d expr / d q_k`` for the coordinates it depends on (name symbols), zeros dropped."""
    result = {}
    calculus = Differentiator()
    for name in coordinates:
        d = calculus.derivative(expr, symbol(name))
        if d != 0:
            result[name] = d
    return result


# --------------------------------------------------------------------------- kinematics (pure)


def distance(r_i: sp.Matrix, r_j: sp.Matrix) -> sp.Expr:
    """``|r_j - r_i|``: the length of a point-to-point element (singular at zero length)."""
    d = [difference(r_j[k], r_i[k]) for k in range(3)]  # entry by entry: sympy's matrices are slow for 3 numbers
    return sp.sqrt(sp.Add(*(x * x for x in d)))


def rotation_measure(R: sp.Matrix) -> sp.Matrix:
    """Rotational displacement of the relative rotation ``R = A_i^T A_j`` (marker i axes):
    twice the vector part of its Euler parameters,

        theta = 2 sin(phi/2) n = (R32 - R23, R13 - R31, R21 - R12) / sqrt(1 + tr R)

    (dissertation eq. (2.21) with ``e0 = sqrt(1 + tr R) / 2``), for a rotation by ``phi``
    about the unit axis ``n``: equal to the rotation vector ``phi n`` to second order
    (``2 sin(phi/2) = phi - phi^3/24``), smooth for ``|phi| < pi``, singular at ``phi = pi``.
    For a rotation about one axis (planar bodies) the component is ``2 sin(phi/2)``."""
    w = sp.Matrix([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    trace = R[0, 0] + R[1, 1] + R[2, 2]
    return w / sp.sqrt(1 + trace)


def bushing_displacements(r_i: sp.Matrix, A_i: sp.Matrix, r_j: sp.Matrix, A_j: sp.Matrix) -> dict[str, sp.Expr]:
    """The six generalized displacements of a bushing (marker i axes): ``(x, y, z) =
    A_i^T (r_j - r_i)`` and ``(rx, ry, rz)`` = :func:`rotation_measure` of ``A_i^T A_j``."""
    d = A_i.T * (r_j - r_i)
    theta = rotation_measure(A_i.T * A_j)
    values = [sp.expand(d[0]), sp.expand(d[1]), sp.expand(d[2]), theta[0], theta[1], theta[2]]
    return dict(zip(BUSHING_DIRECTIONS, values))


# --------------------------------------------------------------------------- components


def _check_name(name: object, what: str) -> None:
    check_identifier(name, what)


@dataclasses.dataclass(frozen=True)
class SpringDamper:
    """A point-to-point force element between the origins of two markers.

    The law acts along the line of action with ``s = |r_j - r_i|`` (the current length) and
    ``s_dot`` its rate; ``f = law(s, s_dot) > 0`` pulls the markers together (a spring with
    free length ``L0`` is ``linear_spring_damper`` with ``free_length = L0``).  Singular at
    zero length: keep the markers apart (use a :class:`Bushing` for coincident points).

    Attributes
    ----------
    name : str
    marker_i, marker_j : str
    law : force-element instance (:func:`scalar_law`) or mapping ``{type = ..., ...}``
    """

    name: str
    marker_i: str
    marker_j: str
    law: Any

    def __post_init__(self) -> None:
        _check_name(self.name, "spring-damper")
        object.__setattr__(self, "law", _as_law(self.law, self.where("law")))

    def where(self, prop: str = "") -> str:
        return f"spring-damper '{self.name}'" + (f".{prop}" if prop else "")

    def length(self, ctx: Lowering) -> sp.Expr:
        """The distance of the two marker origins (name symbols)."""
        where = self.where("markers")
        return distance(ctx.marker(self.marker_i, where).position, ctx.marker(self.marker_j, where).position)

    def lower(self, ctx: Lowering) -> None:
        apply_scalar_law(ctx, self.name, self.law, self.length(ctx), "translational", self.where())


@dataclasses.dataclass(frozen=True)
class Bushing:
    """A bushing (rubber mount): six scalar laws on the relative displacement of marker j
    with respect to marker i, in marker i's axes.

    Directions ``x, y, z``: ``A_i^T (r_j - r_i)``; ``rx, ry, rz``: twice the vector part of
    the relative Euler parameters of ``A_i^T A_j`` (:func:`rotation_measure`: ``2 sin(phi/2) n``
    for a rotation by ``phi`` about the unit axis ``n``, ``= phi n`` for small rotations).  Each
    direction's law resists its displacement (the force acts on marker j, its reaction on
    marker i); a missing direction carries no force.  The generalized forces are the virtual
    work of the laws along these displacements (exact for them).  A direction whose
    displacement is linear in the coordinates (a translation between bodies that do not
    rotate) applies its law by the chain rule; every other direction -- in general all six,
    since ``A_i`` depends on the rotation -- and every law with internal nodes goes through an
    auxiliary coordinate ``<name>_<direction>_s`` (module docstring).  Unbound law properties
    become ``<name>_<direction>_<prop>``.

    Conventions against Adams: an Adams BUSHING measures the I marker relative to the J
    marker in J's axes, with small-angle rotations; here marker j is measured relative to
    marker i in i's axes, with the rotational measure ``2 sin(phi/2) n``.  To port an Adams
    bushing give its J marker as ``marker_i`` and its I marker as ``marker_j``; for large
    rotations the rotational measures differ (they agree to second order).

    Attributes
    ----------
    name : str
    marker_i, marker_j : str
    laws : tuple of (direction, law) pairs in the order x, y, z, rx, ry, rz; a mapping
        direction -> law (instance or ``{type = ..., ...}``) is accepted at construction.
    """

    name: str
    marker_i: str
    marker_j: str
    laws: tuple[tuple[str, AbstractLocalElement], ...] = ()

    def __post_init__(self) -> None:
        _check_name(self.name, "bushing")
        laws: object = self.laws
        given: dict[object, object]
        if isinstance(laws, Mapping):
            given = dict(laws)
        elif isinstance(laws, Sequence) and not isinstance(laws, str) \
                and all(isinstance(p, Sequence) and not isinstance(p, str) and len(p) == 2 for p in laws):
            given = {}
            for direction, law in laws:
                if direction in given:
                    raise ModelError(f"{self.where('laws')}: direction {direction!r} is given twice.")
                given[direction] = law
        else:
            raise ModelError(f"{self.where('laws')}: give a mapping direction -> law or (direction, law) pairs; "
                             f"got {laws!r}.")
        if not given:
            raise ModelError(f"{self.where('laws')}: give a law for at least one of {', '.join(BUSHING_DIRECTIONS)}.")
        unknown = sorted(map(str, set(given) - set(BUSHING_DIRECTIONS)))
        if unknown:
            raise ModelError(f"{self.where('laws')}: unknown direction(s) {', '.join(unknown)}; the "
                             f"directions are {', '.join(BUSHING_DIRECTIONS)} (in marker i's frame).")
        object.__setattr__(self, "laws", tuple((d, _as_law(given[d], self.where(f"laws.{d}")))
                                               for d in BUSHING_DIRECTIONS if d in given))

    def law(self, direction: str) -> AbstractLocalElement | None:
        """The law of ``direction`` (None if the direction carries no force)."""
        return dict(self.laws).get(direction)

    def where(self, prop: str = "") -> str:
        return f"bushing '{self.name}'" + (f".{prop}" if prop else "")

    def displacements(self, ctx: Lowering) -> dict[str, sp.Expr]:
        """The six generalized displacements (name symbols), :func:`bushing_displacements`."""
        mi, mj = ctx.marker(self.marker_i, self.where("marker_i")), ctx.marker(self.marker_j, self.where("marker_j"))
        return bushing_displacements(mi.position, mi.rotation, mj.position, mj.rotation)

    def lower(self, ctx: Lowering) -> None:
        values = self.displacements(ctx)
        for direction, law in self.laws:
            s = values[direction]
            kind: Kind = "rotational" if direction.startswith("r") else "translational"
            where = self.where(f"laws.{direction}")
            if s == 0:
                raise ModelError(f"{where}: the displacement in direction {direction} is identically zero for these "
                                 "bodies (e.g. out of plane for planar bodies); remove the law.")
            apply_scalar_law(ctx, f"{self.name}_{direction}", law, s, kind, where)


@dataclasses.dataclass(frozen=True)
class JointForce:
    """A scalar law on a joint coordinate (relative angle of a revolute, displacement of a
    prismatic joint, ...; :mod:`.joints`): a torsion spring in a hinge, a damper in a slider.

    ``f = law(s, s_dot) > 0`` resists a positive joint coordinate ``s``.  On a spatial
    revolute joint ``s`` is an auxiliary coordinate tied to the angle by ``sin(theta - s) = 0``
    (it counts turns; a :class:`~.sensors.JointCoordinate` of the joint then outputs it).

    Attributes
    ----------
    name : str
    joint : str
    law : force-element instance or mapping ``{type = ..., ...}``
    """

    name: str
    joint: str
    law: Any

    def __post_init__(self) -> None:
        _check_name(self.name, "joint force")
        object.__setattr__(self, "law", _as_law(self.law, self.where("law")))

    def where(self, prop: str = "") -> str:
        return f"joint force '{self.name}'" + (f".{prop}" if prop else "")

    def lower(self, ctx: Lowering) -> None:
        s, kind = joint_coordinate(ctx, self.joint, self.where("joint"))
        joint = ctx.joint_component(self.joint, self.where("joint"))
        residual_of = getattr(joint, "coordinate_residual", None)
        residual = residual_of(ctx, symbol(f"{self.name}_s")) if callable(residual_of) else None
        apply_scalar_law(ctx, self.name, self.law, s, kind, self.where(), residual=residual)
        if residual is not None:
            ctx.set_joint_coordinate(self.joint, f"{self.name}_s")


def joint_coordinate(ctx: Lowering, joint: str, where: str) -> tuple[sp.Expr, Kind]:
    """The coordinate expression of a joint and its kind (``"translational"`` for a prismatic
    joint, else ``"rotational"``)."""
    expr = ctx.joint(joint, where)
    component = ctx.joint_component(joint, where)
    kind: Kind = "translational" if getattr(component, "coordinate_kind", "") == "translational" else "rotational"
    return expr, kind
