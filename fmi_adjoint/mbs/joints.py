"""Joints between two markers (dissertation Sec. 2.2.2, eqs. (2.28)-(2.29)).

A joint connects marker ``i`` (on body i) and marker ``j`` (on body j); either body may be the
ground.  Its axis ``a`` is a unit vector in marker i's axes (default z; for a prismatic
joint between planar bodies x); ``b1, b2`` complete it to a right-handed frame
(``b1 x b2 = a``; for ``a = z``: ``b1 = x, b2 = y``; cyclic for x and y).  With
``d = r_j - r_i`` (marker positions) and ``A_i, A_j`` the marker orientations, the rows are

=============  ==========================================================================
position       ``r_i - r_j = 0`` (three rows ``_x, _y, _z``), eq. (2.28)
axis1, axis2   ``(A_i b1).(A_j a) = 0``, ``(A_i b2).(A_j a) = 0``: axes parallel, eq. (2.29)
twist          ``(A_i b1).(A_j b2) = 0``: no rotation about the axis
slide1, slide2 ``(A_i b1).d = 0``, ``(A_i b2).d = 0``: j moves along the axis only
normal         ``(A_i a).d = 0``: j stays in the plane normal to the axis
universal      ``(A_i a).(A_j c) = 0`` with ``c`` the second axis (in marker j's axes)
=============  ==========================================================================

==============  ====================================  spatial rows  planar rows
revolute        position, axis1, axis2                5             2
prismatic       slide1, slide2, axis1, axis2, twist   5             2
cylindrical     slide1, slide2, axis1, axis2          4             (refused)
spherical       position                              3             (refused)
universal       position, universal                   4             (refused)
planar          axis1, axis2, normal                  3             (refused: 0)
fixed           position, axis1, axis2, twist         6             3
==============  ====================================  ============  ===========

Rows that are identically zero after ``sp.expand`` are dropped: that is how planar bodies
(which stay in z = 0 and rotate about z) get their planar rows from the same code.
Constraints are named ``<joint>_<row>``.

Axes may be expressions of parameters (identifiable joint axes): then ``a = v / |v|`` and
``b1`` is built from the coordinate axis least aligned with ``v`` at the nominal values.

Between planar bodies a revolute axis must be +-z and a prismatic axis must lie in the x-y
plane (any other axis would lock the joint); both are refused naming the joint.

Joint coordinate (:meth:`Joint.coordinate`): revolute: between two planar frames the
relative angle ``+-(phi_j - phi_i)`` (marker angles included; continuous, no wrap); otherwise
``atan2((A_i b2).(A_j b1), (A_i b1).(A_j b1))``, which wraps at +-pi (a force on the joint
uses :meth:`Joint.coordinate_residual` instead, continuous).  Prismatic and cylindrical:
``(A_i a).d``.
Drives (``drive = s(t, p)``): prismatic/cylindrical ``(A_i a).d - s = 0``; planar revolute
``phi_j - phi_i - s = 0``; spatial revolute ``sin(theta - s) = 0`` written as
``(A_i b2).(A_j b1) cos s - (A_i b1).(A_j b1) sin s = 0`` (no wrap), named ``<joint>_drive``.
"""

from __future__ import annotations

import cmath
import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import sympy as sp

from ..errors import ModelError
from ..text import check_identifier
from .bodies import SpatialRigidBody
from .markers import MarkerFrame
from .names import Number
from .rotations import difference, matmul

if TYPE_CHECKING:
    from .context import Lowering

__all__ = ["Joint", "Revolute", "Prismatic", "Cylindrical", "Spherical", "Universal", "Planar", "Fixed",
           "RedundantJointsError", "check_joint_pairs"]


_UNIT = {0: (1, 0, 0), 1: (0, 1, 0), 2: (0, 0, 1)}


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _frame(axis: Sequence[float], where: str) -> tuple[sp.Matrix, sp.Matrix, sp.Matrix]:
    """Unit axis ``a`` and ``b1, b2`` with ``b1 x b2 = a`` from numbers (exact integers for
    coordinate axes, so that planar rows vanish exactly)."""
    try:
        vec = [float(x) for x in axis]
    except (TypeError, ValueError):
        raise ModelError(f"{where}: the axis must be 3 numbers or expressions of parameters, got {axis!r}.") from None
    if len(vec) != 3 or not all(math.isfinite(x) for x in vec):
        raise ModelError(f"{where}: the axis must be 3 finite numbers, got {axis!r}.")
    norm = math.sqrt(sum(x * x for x in vec))
    if norm < 1e-12:
        raise ModelError(f"{where}: the axis is zero; give a nonzero direction such as [0, 0, 1].")
    unit = [x / norm for x in vec]
    for k in range(3):
        if abs(abs(unit[k]) - 1.0) < 1e-15:
            sign = 1 if unit[k] > 0 else -1
            a = sp.Matrix(_UNIT[k]) * sign
            b1 = sp.Matrix(_UNIT[(k + 1) % 3]) * sign
            b2 = sp.Matrix(_UNIT[(k + 2) % 3])
            return a, b1, b2
    a_num = sp.Matrix([sp.Float(x, 17) for x in unit])
    helper = _helper(unit)
    a, b1, b2 = _complete(a_num, helper)
    # b2 = a x b1 is perpendicular to the helper axis, so its component there is 0 exactly; in
    # floating point it comes out as 0 or as round-off (2e-19), and a round-off term would make
    # joints of one kind two component types (derived and compiled twice; issue 24).
    b2[next(k for k in range(3) if helper[k] != 0)] = sp.Integer(0)
    return a, b1, b2


def _helper(nominal: Sequence[float]) -> sp.Matrix:
    """The coordinate axis least aligned with the (nominal) axis."""
    k = min(range(3), key=lambda i: abs(nominal[i]))
    return sp.Matrix(_UNIT[k])


def _complete(a: sp.Matrix, helper: sp.Matrix) -> tuple[sp.Matrix, sp.Matrix, sp.Matrix]:
    """``b1`` = the helper made perpendicular to the unit vector ``a`` and normalized,
    ``b2 = a x b1``."""
    b1 = helper - (helper.T * a)[0, 0] * a
    b1 = b1 / sp.sqrt((b1.T * b1)[0, 0])
    return a, b1, a.cross(b1)


def _axis_frame(ctx: Lowering, axis: Sequence[Number], where: str) -> tuple[sp.Matrix, sp.Matrix, sp.Matrix]:
    """The frame of an axis given by numbers or expressions of parameters (an identifiable
    joint axis): ``a = v / |v|``; the helper axis is chosen at the nominal values."""
    if all(_is_number(x) for x in axis):
        return _frame(axis, where)  # type: ignore[arg-type]
    vec = sp.Matrix([ctx.parameter_expression(x, where) for x in axis])
    nominal = [ctx.nominal(x, where) for x in vec]
    _frame(nominal, where)  # a zero or non-finite axis at the nominal values
    norm = math.sqrt(sum(x * x for x in nominal))
    a = vec / sp.sqrt((vec.T * vec)[0, 0])
    return _complete(a, _helper([x / norm for x in nominal]))


def _vanishes(expr: sp.Expr) -> bool:
    """Whether a constraint row is identically zero (the rows a planar pair does not need).

    Evaluated first at two generic points (cheap; a row that is not zero shows it there), and
    only a row that vanishes at both is expanded to decide exactly: expanding every row cost
    more than the rest of the lowering on the MacPherson model.
    """
    if expr == 0:
        return True
    symbols = sorted(expr.free_symbols, key=lambda s: s.name)
    for offset in (0.3183098861837907, 0.5772156649015329):  # 1/pi, Euler's gamma: generic values
        point = {s: offset + 0.1234567 * k for k, s in enumerate(symbols)}
        if abs(_numeric(expr, point)) > 1e-9:
            return False
    return sp.expand(expr).is_zero is True


_CMATH = {sp.sin: cmath.sin, sp.cos: cmath.cos, sp.tan: cmath.tan, sp.exp: cmath.exp, sp.log: cmath.log,
          sp.asin: cmath.asin, sp.acos: cmath.acos, sp.atan: cmath.atan}


def _numeric(expr: sp.Expr, point: dict[sp.Symbol, float]) -> complex:
    """``expr`` at ``point`` in complex floating point, by a walk of the tree (sympy's own
    substitution runs the assumptions system at every node: most of a joint's lowering)."""
    memo: dict[sp.Basic, complex] = {}

    def value(node: sp.Basic) -> complex:
        known = memo.get(node)
        if known is not None:
            return known
        if node.is_Number:
            result = complex(float(node))  # a real number (complex(node) would evaluate it with evalf)
        elif node.is_Symbol:
            result = complex(point[node])
        elif isinstance(node, sp.Add):
            result = sum((value(arg) for arg in node.args), 0j)
        elif isinstance(node, sp.Mul):
            result = 1 + 0j
            for arg in node.args:
                result *= value(arg)
        elif isinstance(node, sp.Pow):
            base, exponent = value(node.base), value(node.exp)
            result = base ** exponent if base != 0 or exponent.real > 0 else complex(sp.nan)
        elif type(node) in _CMATH and len(node.args) == 1:
            result = _CMATH[type(node)](value(node.args[0]))
        else:  # anything else: sympy's own evaluation
            result = complex(node.xreplace({s: sp.Float(v) for s, v in point.items()}).evalf())
        memo[node] = result
        return result

    try:
        return value(expr)
    except (ZeroDivisionError, OverflowError, ValueError):
        return complex(expr.xreplace({s: sp.Float(v) for s, v in point.items()}).evalf())


def _dot(u: sp.Matrix, v: sp.Matrix) -> sp.Expr:
    return sp.Add(*(x * y for x, y in zip(u, v)))


@dataclasses.dataclass(frozen=True)
class Joint:
    """Base of joints: ``name``, ``marker_i``, ``marker_j``, ``axis`` (marker i axes; None:
    the type's default), ``drive`` (expression of ``t`` and parameters prescribing the joint
    coordinate, revolute/prismatic/cylindrical only)."""

    #: The rows of the type (module docstring), in order.
    rows: ClassVar[tuple[str, ...]] = ()
    #: Joint types that need a spatial body: refused between planar frames.
    spatial_only: ClassVar[bool] = False
    #: Kind of the joint coordinate ("rotational", "translational") or "" if none.
    coordinate_kind: ClassVar[str] = ""
    #: What the axis must be between planar bodies: "normal" (+-z: a revolute joint),
    #: "in_plane" (z component 0: a prismatic joint) or "" (no rule).
    planar_axis: ClassVar[str] = ""

    name: str
    marker_i: str
    marker_j: str
    axis: tuple[Number, Number, Number] | None = None
    drive: Number | None = None

    def __post_init__(self) -> None:
        check_identifier(self.name, "joint")
        for field in ("marker_i", "marker_j"):
            if not isinstance(getattr(self, field), str):
                raise ModelError(f"{self.where(field)}: give a marker name, got {getattr(self, field)!r}.")
        if self.marker_i == self.marker_j:
            raise ModelError(f"{self.where()}: marker_i and marker_j are both '{self.marker_i}'; a joint connects "
                             "markers on two different bodies.")
        if self.axis is not None:
            if isinstance(self.axis, (str, int, float, sp.Expr)) or len(tuple(self.axis)) != 3:
                raise ModelError(f"{self.where('axis')}: the axis must be 3 numbers or expressions, got {self.axis!r}.")
            object.__setattr__(self, "axis", tuple(self.axis))
            if all(_is_number(x) for x in self.axis):
                _frame(self.axis, self.where("axis"))  # type: ignore[arg-type]
        if self.drive is not None and not self.coordinate_kind:
            raise ModelError(f"{self.where('drive')}: a {type(self).__name__.lower()} joint has no single joint "
                             "coordinate to drive; drive a revolute, prismatic or cylindrical joint.")

    def where(self, prop: str = "") -> str:
        suffix = f".{prop}" if prop else ""
        return f"joint '{self.name}' ({type(self).__name__.lower()}){suffix}"

    def default_axis(self, planar: bool) -> tuple[float, float, float]:
        return (0.0, 0.0, 1.0)

    def frames(self, ctx: Lowering) -> tuple[MarkerFrame, MarkerFrame]:
        """The two marker frames, checked: different bodies, and 3-D types need a spatial body."""
        mi = ctx.marker(self.marker_i, self.where("marker_i"))
        mj = ctx.marker(self.marker_j, self.where("marker_j"))
        if mi.body.name == mj.body.name:
            raise ModelError(f"{self.where()}: markers '{self.marker_i}' and '{self.marker_j}' are both on body "
                             f"'{mi.body.name}'; a joint connects two different bodies (put one marker on the other "
                             "body or on ground).")
        if self.spatial_only and self.planar(mi, mj):
            raise ModelError(f"{self.where()}: a {type(self).__name__.lower()} joint needs a spatial body; between "
                             "planar bodies use a revolute joint (or make a body spatial).")
        return mi, mj

    @staticmethod
    def planar(mi: MarkerFrame, mj: MarkerFrame) -> bool:
        """True if both markers move in the x-y plane and rotate about z only."""
        return mi.planar_angle is not None and mj.planar_angle is not None and mi.body.planar and mj.body.planar

    def axes(self, ctx: Lowering, mi: MarkerFrame, mj: MarkerFrame) -> tuple[sp.Matrix, sp.Matrix, sp.Matrix]:
        """Unit axis and its complements in marker axes (module docstring)."""
        axis = self.axis if self.axis is not None else self.default_axis(self.planar(mi, mj))
        return _axis_frame(ctx, axis, self.where("axis"))

    def row_expressions(self, ctx: Lowering, mi: MarkerFrame, mj: MarkerFrame) -> dict[str, sp.Expr]:
        """All rows of the module docstring (before dropping those that vanish)."""
        a, b1, b2 = self.axes(ctx, mi, mj)
        Ai, Aj = mi.rotation, mj.rotation
        if {"slide1", "slide2", "normal"} & set(self.rows):
            d = sp.Matrix([difference(mj.position[k], mi.position[k]) for k in range(3)])
        rows: dict[str, sp.Expr] = {}
        for row in self.rows:
            if row == "position":
                for k, c in enumerate("xyz"):
                    rows[c] = difference(mi.position[k], mj.position[k])
            elif row == "axis1":
                rows[row] = _dot(matmul(Ai, b1), matmul(Aj, a))
            elif row == "axis2":
                rows[row] = _dot(matmul(Ai, b2), matmul(Aj, a))
            elif row == "twist":
                rows[row] = _dot(matmul(Ai, b1), matmul(Aj, b2))
            elif row == "slide1":
                rows[row] = _dot(matmul(Ai, b1), d)
            elif row == "slide2":
                rows[row] = _dot(matmul(Ai, b2), d)
            elif row == "normal":
                rows[row] = _dot(matmul(Ai, a), d)
            else:  # pragma: no cover - the types above list their rows
                raise AssertionError(row)
        return rows

    def check_planar_axis(self, ctx: Lowering, mi: MarkerFrame, mj: MarkerFrame) -> None:
        """Between planar bodies (which move in the x-y plane and rotate about z) a revolute
        axis must be +-z and a prismatic axis must lie in the plane: any other axis would make
        the general rows lock the joint (a revolute about x becomes a fixed joint) or
        everything.  One-line ModelError naming the joint and the fix."""
        if not self.planar_axis or self.axis is None or not self.planar(mi, mj):
            return
        entries = [ctx.parameter_expression(x, self.where("axis")) for x in self.axis]
        if self.planar_axis == "normal" and not (entries[0].is_zero and entries[1].is_zero):
            raise ModelError(f"{self.where('axis')}: between planar bodies a {type(self).__name__.lower()} joint's "
                             f"axis must be +-z (the bodies rotate about z only), got {list(self.axis)}; give axis = "
                             "[0, 0, 1], or make a body spatial for another axis.")
        if self.planar_axis == "in_plane" and not entries[2].is_zero:
            raise ModelError(f"{self.where('axis')}: between planar bodies a {type(self).__name__.lower()} joint's "
                             f"axis must lie in the x-y plane (z component 0), got {list(self.axis)}; give e.g. "
                             "axis = [1, 0, 0], or make a body spatial for another axis.")

    def lower(self, ctx: Lowering) -> None:
        mi, mj = self.frames(ctx)
        self.check_planar_axis(ctx, mi, mj)
        rows = {row: expr for row, expr in self.row_expressions(ctx, mi, mj).items() if not _vanishes(expr)}
        if not rows:
            raise ModelError(f"{self.where()}: the joint constrains nothing between bodies '{mi.body.name}' and "
                             f"'{mj.body.name}' (they already move that way); remove it or choose another type.")
        for row, expr in rows.items():
            ctx.add_constraint(f"{self.name}_{row}", expr)
        if self.drive is not None:
            s = ctx.parameter_expression(self.drive, self.where("drive"), allow_time=True)
            ctx.add_constraint(f"{self.name}_drive", self.drive_expression(ctx, mi, mj, s))

    def coordinate(self, ctx: Lowering) -> sp.Expr:
        """The joint coordinate (module docstring)."""
        raise ModelError(f"{self.where()}: a {type(self).__name__.lower()} joint has no single joint coordinate; "
                         "use a revolute, prismatic or cylindrical joint.")

    def drive_expression(self, ctx: Lowering, mi: MarkerFrame, mj: MarkerFrame, s: sp.Expr) -> sp.Expr:
        return self.coordinate(ctx) - s

    def coordinate_residual(self, ctx: Lowering, s: sp.Expr) -> sp.Expr | None:
        """A residual ``R(q, s)`` with ``R = 0`` iff ``s`` is the joint coordinate, continuous
        where :meth:`coordinate` is not (it wraps), or None where the coordinate itself serves
        (``s - coordinate``).  Auxiliary coordinates of forces on the joint use it."""
        return None


@dataclasses.dataclass(frozen=True)
class Revolute(Joint):
    """Rotation about the axis ``a`` (marker i axes, default z): 5 rows, 2 between planar
    bodies (about z)."""

    rows: ClassVar[tuple[str, ...]] = ("position", "axis1", "axis2")
    coordinate_kind: ClassVar[str] = "rotational"
    planar_axis: ClassVar[str] = "normal"

    def _angle_terms(self, ctx: Lowering) -> tuple[sp.Expr, sp.Expr]:
        mi, mj = self.frames(ctx)
        a, b1, b2 = self.axes(ctx, mi, mj)
        Ai, Aj = mi.rotation, mj.rotation
        return _dot(matmul(Ai, b2), matmul(Aj, b1)), _dot(matmul(Ai, b1), matmul(Aj, b1))

    def _planar_sign(self, ctx: Lowering, mi: MarkerFrame, mj: MarkerFrame) -> int:
        """+1 or -1 for a planar pair with the axis +z or -z, else 0."""
        if not self.planar(mi, mj):
            return 0
        a, _, _ = self.axes(ctx, mi, mj)
        for sign in (1, -1):
            if a == sp.Matrix([0, 0, sign]):
                return sign
        return 0

    def coordinate(self, ctx: Lowering) -> sp.Expr:
        mi, mj = self.frames(ctx)
        sign = self._planar_sign(ctx, mi, mj)
        if sign:
            return sign * (mj.planar_angle - mi.planar_angle)  # type: ignore[operator]
        sin_part, cos_part = self._angle_terms(ctx)
        return sp.atan2(sin_part, cos_part)

    def drive_expression(self, ctx: Lowering, mi: MarkerFrame, mj: MarkerFrame, s: sp.Expr) -> sp.Expr:
        sign = self._planar_sign(ctx, mi, mj)
        if sign:
            return sign * (mj.planar_angle - mi.planar_angle) - s  # type: ignore[operator]
        sin_part, cos_part = self._angle_terms(ctx)
        return sin_part * sp.cos(s) - cos_part * sp.sin(s)

    def coordinate_residual(self, ctx: Lowering, s: sp.Expr) -> sp.Expr | None:
        """Spatial: the drive's form ``(A_i b2).(A_j b1) cos s - (A_i b1).(A_j b1) sin s``
        (``= sin(theta - s)``: continuous in ``s``, which then counts turns without wrapping;
        ``dR/ds = -1`` where the joint's rows hold).  Planar (+-z axis): None (the angle
        difference is continuous)."""
        mi, mj = self.frames(ctx)
        if self._planar_sign(ctx, mi, mj):
            return None
        return self.drive_expression(ctx, mi, mj, s)


@dataclasses.dataclass(frozen=True)
class Prismatic(Joint):
    """Translation along the axis ``a`` (default z; x between planar bodies): 5 rows, 2
    between planar bodies."""

    rows: ClassVar[tuple[str, ...]] = ("slide1", "slide2", "axis1", "axis2", "twist")
    coordinate_kind: ClassVar[str] = "translational"
    planar_axis: ClassVar[str] = "in_plane"

    def default_axis(self, planar: bool) -> tuple[float, float, float]:
        return (1.0, 0.0, 0.0) if planar else (0.0, 0.0, 1.0)

    def coordinate(self, ctx: Lowering) -> sp.Expr:
        mi, mj = self.frames(ctx)
        a, _, _ = self.axes(ctx, mi, mj)
        return _dot(matmul(mi.rotation, a), mj.position - mi.position)


@dataclasses.dataclass(frozen=True)
class Cylindrical(Prismatic):
    """Translation along and rotation about the axis ``a`` (default z): 4 rows; spatial only.
    Its joint coordinate is the displacement."""

    rows: ClassVar[tuple[str, ...]] = ("slide1", "slide2", "axis1", "axis2")
    spatial_only: ClassVar[bool] = True

    def default_axis(self, planar: bool) -> tuple[float, float, float]:
        return (0.0, 0.0, 1.0)


@dataclasses.dataclass(frozen=True)
class Spherical(Joint):
    """Coincident points, free rotation: 3 rows; spatial only."""

    rows: ClassVar[tuple[str, ...]] = ("position",)
    spatial_only: ClassVar[bool] = True


@dataclasses.dataclass(frozen=True)
class Universal(Joint):
    """Coincident points and ``axis`` (marker i axes, default z) perpendicular to
    ``axis_j`` (marker j axes, default x): 4 rows; spatial only."""

    rows: ClassVar[tuple[str, ...]] = ("position",)
    spatial_only: ClassVar[bool] = True

    axis_j: tuple[Number, Number, Number] = (1.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.axis_j, (str, int, float, sp.Expr)) or len(tuple(self.axis_j)) != 3:
            raise ModelError(f"{self.where('axis_j')}: the axis must be 3 numbers or expressions, got {self.axis_j!r}.")
        object.__setattr__(self, "axis_j", tuple(self.axis_j))
        if all(_is_number(x) for x in self.axis_j):
            _frame(self.axis_j, self.where("axis_j"))  # type: ignore[arg-type]

    def row_expressions(self, ctx: Lowering, mi: MarkerFrame, mj: MarkerFrame) -> dict[str, sp.Expr]:
        rows = super().row_expressions(ctx, mi, mj)
        a, _, _ = self.axes(ctx, mi, mj)
        c, _, _ = _axis_frame(ctx, self.axis_j, self.where("axis_j"))
        rows["cross"] = _dot(matmul(mi.rotation, a), matmul(mj.rotation, c))
        return rows


@dataclasses.dataclass(frozen=True)
class Planar(Joint):
    """Marker j moves in the plane through marker i normal to ``axis`` (default z) and
    rotates about that normal only: 3 rows (between planar bodies with the z normal all
    vanish, and the joint is refused as constraining nothing)."""

    rows: ClassVar[tuple[str, ...]] = ("axis1", "axis2", "normal")


@dataclasses.dataclass(frozen=True)
class Fixed(Joint):
    """Rigid connection: 6 rows, 3 between planar bodies."""

    rows: ClassVar[tuple[str, ...]] = ("position", "axis1", "axis2", "twist")

    def row_expressions(self, ctx: Lowering, mi: MarkerFrame, mj: MarkerFrame) -> dict[str, sp.Expr]:
        rows = super().row_expressions(ctx, mi, mj)
        if self.planar(mi, mj):
            # The twist row (b1 . A_j b2) is -sin(phi_j - phi_i); written as the angle
            # difference it has no second root at pi.
            a, _, _ = self.axes(ctx, mi, mj)
            if a == sp.Matrix([0, 0, 1]):
                rows["twist"] = mj.planar_angle - mi.planar_angle  # type: ignore[operator]
        return rows


# --------------------------------------------------------------------------- redundant joints


class RedundantJointsError(ModelError):
    """Joints between the same two bodies whose rows are dependent (:func:`check_joint_pairs`).

    Attributes
    ----------
    joint : str
        The joint whose rows add less rank than rows.
    earlier : tuple of str
        The joints between the same bodies lowered before it.
    bodies : tuple of str
        The two bodies.
    rows, rank : int
        Number of rows (with the bodies' normalization rows) and their rank.
    """

    def __init__(self, message: str, joint: str = "", earlier: tuple[str, ...] = (),
                 bodies: tuple[str, ...] = (), rows: int = 0, rank: int = 0):
        super().__init__(message)
        self.joint, self.earlier, self.bodies, self.rows, self.rank = joint, earlier, bodies, rows, rank


def check_joint_pairs(ctx: Lowering, joints: Sequence[object]) -> None:
    """Refuse joints between the same two bodies whose constraint rows are dependent at the
    initial positions (two revolute joints in one hinge; a revolute and a prismatic joint on
    one pair), naming both joints: the engine's singular-matrix message would name only rows.

    Joints are taken in order; the first joint whose rows (with those before it and the
    bodies' normalization rows) have a rank below their number -- singular values below
    1e-9 of the largest, as :mod:`fmi_adjoint.integrate.dependence` -- raises
    :class:`RedundantJointsError` naming it and those before it.  The rows are the built
    expressions of the lowering (never text).  Redundancy through closed loops is left to the
    engine, whose message names the rows ``<joint>_<row>``.  Initial positions that are not
    numbers at the nominal parameter values leave the check to the engine too.
    """
    pairs: dict[frozenset[str], list[object]] = {}
    for joint in joints:
        mi = ctx.marker(joint.marker_i)  # type: ignore[attr-defined]
        mj = ctx.marker(joint.marker_j)  # type: ignore[attr-defined]
        pairs.setdefault(frozenset((mi.body.name, mj.body.name)), []).append(joint)
    groups = [(key, group) for key, group in pairs.items() if len(group) > 1]
    if not groups:
        return
    values: dict[sp.Symbol, sp.Expr] = {sp.Symbol("t", real=True): sp.Float(0.0)}
    values.update({sp.Symbol(p.name, real=True): sp.Float(p.value) for p in ctx.parameters})
    coordinates: set[sp.Symbol] = set()
    for key, _ in groups:
        for body in key:
            for name in ctx.body(body).coordinates:
                sym = sp.Symbol(name, real=True)
                coordinates.add(sym)
                try:
                    values[sym] = sp.Float(ctx.nominal(ctx.coordinate(name).initial_position,
                                                       f"initial position of '{name}'"))
                except ModelError:
                    return  # left to the engine
    for key, group in groups:
        bodies = tuple(sorted(key))
        rows: list[sp.Expr] = []
        for body in bodies:
            if isinstance(ctx.body_component(body), SpatialRigidBody):
                rows.append(ctx.constraint(f"{body}_normalization"))
        done: list[object] = []
        for joint in group:
            own = [ctx.constraint(c) for c in ctx.joint_constraints(joint.name)]  # type: ignore[attr-defined]
            symbols = sorted(set().union(*(r.free_symbols for r in rows + own)) & coordinates, key=str)
            try:
                jac = np.array([[float(sp.diff(r, q).xreplace(values)) for q in symbols] for r in rows + own],
                               dtype=float)
            except (TypeError, ValueError):
                return
            if done and jac.size and np.all(np.isfinite(jac)):
                singular = np.linalg.svd(jac, compute_uv=False)
                rank = int(np.sum(singular > 1e-9 * singular[0])) if singular[0] > 0 else 0
                if rank < len(rows) + len(own):
                    names = " and ".join(f"'{b}'" for b in bodies)
                    before = ", ".join(d.where() for d in done)  # type: ignore[attr-defined]
                    raise RedundantJointsError(
                        f"{joint.where()}: its constraints repeat or contradict those of {before} "  # type: ignore
                        f"between the same bodies {names} (the joints' {len(rows) + len(own)} rows have rank {rank} "
                        "at the initial positions). Remove the joint, or replace the joints by one that allows the "
                        "intended relative motion.",
                        joint=joint.name, earlier=tuple(d.name for d in done),  # type: ignore[attr-defined]
                        bodies=bodies, rows=len(rows) + len(own), rank=rank)
            rows += own
            done.append(joint)
