"""Rotations with Euler parameters (Oberpeilsteiner, dissertation 2018, Sec. 2.2.1.2-2.2.1.3).

Conventions (used everywhere in :mod:`fmi_adjoint.mbs`):

* ``A`` rotates body coordinates into global ones: ``r = u + A R`` (the dissertation's
  ``B``, eq. (2.15)); its columns are the body axes in global coordinates.
* Euler parameters ``e = (e0, e1, e2, e3)`` of a rotation by ``theta`` about the unit axis
  ``a``: ``e0 = cos(theta/2)``, ``(e1, e2, e3) = a sin(theta/2)`` (eq. (2.21)), with the
  normalization ``e . e = 1``; ``A(e)`` is eq. (2.20) written with the normalization used
  (the matrix below eq. (2.21)), a quadratic polynomial without trigonometric functions.
* ``G(e)`` (3x4, body frame) and ``E(e)`` (3x4, global frame): the angular velocity is
  ``omega' = 2 G(e) e_dot`` in body axes and ``omega = 2 E(e) e_dot`` in global axes.  The
  dissertation's matrix ``G`` of eq. (2.26) is our ``2 G`` (we keep the factor 2 outside,
  as Nikravesh does); ``G e = E e = 0``.
* Cardan angles ``(a, b, c)``: ``A = Rx(a) Ry(b) Rz(c)``, i.e. the body-fixed sequence
  x, then y', then z'' (Tait-Bryan angles).  Singular at ``b = +-pi/2`` (gimbal lock).

Numeric conversions (to Euler parameters from axis-angle, Cardan angles or a matrix) serve
initial conditions; symbolic ones (:func:`A`, :func:`G`, :func:`E`, :func:`cardan_from_matrix`)
serve the kinematics of bodies and sensors.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
import sympy as sp

from ..errors import ModelError
from ..expressions import rename_symbols

__all__ = [
    "A",
    "G",
    "E",
    "Rz",
    "combination",
    "difference",
    "rotational_mass",
    "skew",
    "euler_from_axis_angle",
    "euler_from_cardan",
    "euler_from_matrix",
    "matrix_from_euler",
    "matrix_from_cardan",
    "cardan_from_matrix",
    "check_rotation_matrix",
    "ORTHONORMAL_TOLERANCE",
]

#: A rotation matrix given by the user must satisfy ``|A^T A - I| <= tol`` (max entry) and
#: ``|det A - 1| <= tol``.
ORTHONORMAL_TOLERANCE = 1e-9


def matmul(a: sp.Matrix, b: sp.Matrix) -> sp.Matrix:
    """The product ``a b``, each entry one ``sp.Add`` of the products: sympy's own product
    converts both to a domain matrix first, about 25 times slower for the 3 x 3 products of
    markers and joints, which lowering forms a few times per component (issue 24).  An entry
    whose factors on the right are numbers (a marker's position, a joint's axis) is formed by
    :func:`combination`."""
    if a.cols != b.rows:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not match")
    left, right = a.tolist(), b.tolist()
    inner = range(a.cols)
    entries = []
    for row in left:
        for j in range(b.cols):
            column = [right[k][j] for k in inner]
            entry = combination(row, column)
            entries.append(sp.Add(*(row[k] * column[k] for k in inner)) if entry is None else entry)
    return sp.Matrix(a.rows, b.cols, entries)


def combination(exprs: Sequence[sp.Expr], weights: Sequence[object]) -> sp.Expr | None:
    """``sp.Add(*(x * w for x, w in zip(exprs, weights)))`` for sympy numbers ``weights`` (ints
    allowed), the same tree, formed without sympy's flattening; None where this does not
    decide it (a weight that is not a number, or a case it does not cover: the caller forms
    the sum itself).

    Sympy multiplies a number into a sum term by term and then collects like terms, running its
    assumptions on every intermediate product: 4.8 ms for a marker's position ``u + A(e) s``
    (10 terms), most of lowering a model of spatial bodies (issue 24).  Here each term
    ``c m`` (coefficient and monomial, ``as_coeff_Mul``) of ``x`` contributes ``c w`` to ``m``,
    the terms are put in sympy's canonical order (``Basic.compare``, the number first) and the
    sum is built from them as ``Add.flatten`` ends.  Floating-point coefficients are exact
    copies of sympy's: a product is one rounding either way, and a monomial with more than two
    contributions (whose sum would depend on the order of additions) is left to sympy.
    """
    parts: dict[sp.Expr, list[sp.Number]] = {}
    constant: list[sp.Number] = []
    for expr, weight in zip(exprs, weights):
        w = sp.Integer(weight) if isinstance(weight, int) else weight
        if not _finite(w):
            return None
        if not w:  # zero
            continue
        for term in expr.args if isinstance(expr, sp.Add) else (expr,):
            c, m = term.as_coeff_Mul()
            if not _finite(c):
                return None
            if m is sp.S.One:
                value = c * w
                if value is not sp.S.Zero:  # adding an exact zero changes nothing
                    constant.append(value)
                continue
            # A monomial of symbols and functions only (numbers such as sqrt(2) among its factors
            # could merge with the coefficient: sympy decides those).
            if isinstance(m, sp.Add) or not m.is_commutative \
                    or any(f.is_number for f in (m.args if isinstance(m, sp.Mul) else (m,))):
                return None
            parts.setdefault(m, []).append(c * w)
    if len(constant) > 2 or any(len(cs) > 2 for cs in parts.values()):
        return None
    terms = []
    for m, cs in parts.items():
        c = cs[0] if len(cs) == 1 else cs[0] + cs[1]
        if not c:
            continue
        if c is sp.S.One:
            terms.append(m)
        else:
            terms.append(sp.Mul._from_args((c, *m.args) if isinstance(m, sp.Mul) else (c, m), True))
    terms.sort(key=_SORT_KEY)
    if constant:
        coefficient = constant[0] if len(constant) == 1 else constant[0] + constant[1]
        if not coefficient and coefficient is not sp.S.Zero:
            return None  # a float zero: sympy's own rule
        if coefficient is not sp.S.Zero:
            terms.insert(0, coefficient)
    if not terms:
        return sp.S.Zero
    return terms[0] if len(terms) == 1 else sp.Add._from_args(terms, True)


def difference(u: sp.Expr, v: sp.Expr) -> sp.Expr:
    """``u - v``, the tree sympy builds, by :func:`combination` where it decides it."""
    result = combination((u, v), (1, -1))
    return u - v if result is None else result


#: The order of the arguments of sympy's sums and products (``Add.flatten``, ``Mul.flatten``).
_SORT_KEY = functools.cmp_to_key(sp.Basic.compare)


def _finite(x: object) -> bool:
    """Whether ``x`` is a finite sympy number (without asking the assumptions system, which
    deduces all facts of every new number)."""
    if isinstance(x, sp.Rational):
        return True
    return isinstance(x, sp.Float) and math.isfinite(float(x))


def skew(v: Sequence[sp.Expr]) -> sp.Matrix:
    """The skew-symmetric matrix ``v~`` with ``v~ w = v x w`` (the dissertation's hat)."""
    return sp.Matrix([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])


def A(e: Sequence[sp.Expr]) -> sp.Matrix:
    """Rotation matrix (body -> global) of Euler parameters ``e``: dissertation eq. (2.20),
    the form using ``e . e = 1`` (below eq. (2.21))."""
    e0, e1, e2, e3 = e
    return sp.Matrix(
        [
            [e0**2 + e1**2 - e2**2 - e3**2, 2 * (e1 * e2 - e0 * e3), 2 * (e1 * e3 + e0 * e2)],
            [2 * (e1 * e2 + e0 * e3), e0**2 - e1**2 + e2**2 - e3**2, 2 * (e2 * e3 - e0 * e1)],
            [2 * (e1 * e3 - e0 * e2), 2 * (e2 * e3 + e0 * e1), e0**2 - e1**2 - e2**2 + e3**2],
        ]
    )


def G(e: Sequence[sp.Expr]) -> sp.Matrix:
    """3x4 matrix with ``omega' = 2 G e_dot`` (body axes); the dissertation's eq. (2.26)
    matrix divided by 2."""
    e0, e1, e2, e3 = e
    return sp.Matrix([[-e1, e0, e3, -e2], [-e2, -e3, e0, e1], [-e3, e2, -e1, e0]])


def E(e: Sequence[sp.Expr]) -> sp.Matrix:
    """3x4 matrix with ``omega = 2 E e_dot`` (global axes); ``A = E G^T``."""
    e0, e1, e2, e3 = e
    return sp.Matrix([[-e1, e0, -e3, e2], [-e2, e3, e0, -e1], [-e3, -e2, e1, e0]])


def _rotational_mass_table() -> dict[tuple[int, int], dict[tuple[int, int], list[tuple[int, int, int]]]]:
    """``(i, j) -> {(a, b): [(sign, r, s), ...]}``: entry ``(i, j)`` of ``4 G^T J G`` is
    ``sum 4 sign J[r, s] e_a e_b`` over the list of each monomial ``e_a e_b`` (``a <= b``)."""
    # G[r][i] = sign * e_index (the pattern of :func:`G`).
    pattern = [[(-1, 1), (1, 0), (1, 3), (-1, 2)], [(-1, 2), (-1, 3), (1, 0), (1, 1)],
               [(-1, 3), (1, 2), (-1, 1), (1, 0)]]
    table: dict[tuple[int, int], dict[tuple[int, int], list[tuple[int, int, int]]]] = {}
    for i in range(4):
        for j in range(i, 4):
            monomials: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
            for r in range(3):
                for s in range(3):
                    sign_a, a = pattern[r][i]
                    sign_b, b = pattern[s][j]
                    monomials.setdefault((min(a, b), max(a, b)), []).append((4 * sign_a * sign_b, r, s))
            table[(i, j)] = monomials
    return table


_ROTATIONAL_MASS = _rotational_mass_table()


def rotational_mass(e: Sequence[sp.Expr], J: sp.Matrix) -> dict[tuple[int, int], sp.Expr]:
    """The upper triangle ``(i, j), i <= j`` of ``4 G(e)^T J G(e)``, the mass block of the Euler
    parameters (dissertation eq. (2.41) with its ``G`` our ``2 G``), expanded in the monomials
    ``e_a e_b``.  Formed from a table of the product instead of multiplying and expanding the
    matrices (a quarter of the time: 0.29 s against 1.16 s for 100 bodies with a numeric
    tensor, issue 23; the same polynomial: the tests compare with ``expand(4 G^T J G)``).

    For symbols ``e`` that ``J`` does not hold, the block is formed once per tensor in
    placeholder symbols and renamed (:func:`~fmi_adjoint.expressions.rename_symbols`): bodies of
    one inertia share the work, a third of the time (issue 24).
    """
    entries = tuple(J)
    if all(isinstance(x, sp.Symbol) for x in e) and len(set(e)) == 4 \
            and not set(e) & {s for x in entries for s in x.free_symbols}:
        keys, template = _rotational_mass_template(entries)
        return dict(zip(keys, rename_symbols(template, dict(zip(_PLACEHOLDERS, e)))))
    return _rotational_mass(e, J)


#: The placeholder Euler parameters of :func:`_rotational_mass_template` (no model name has a space).
_PLACEHOLDERS = tuple(sp.Symbol(f"e {k}", real=True) for k in range(4))


@functools.lru_cache(maxsize=256)
def _rotational_mass_template(entries: tuple[sp.Expr, ...]) -> tuple[tuple[tuple[int, int], ...], tuple[sp.Expr, ...]]:
    """:func:`rotational_mass` of the tensor ``entries`` in the placeholders: keys and entries."""
    block = _rotational_mass(_PLACEHOLDERS, sp.Matrix(3, 3, entries))
    return tuple(block), tuple(block.values())


def _rotational_mass(e: Sequence[sp.Expr], J: sp.Matrix) -> dict[tuple[int, int], sp.Expr]:
    """:func:`rotational_mass` formed for ``e`` itself."""
    result = {}
    for (i, j), monomials in _ROTATIONAL_MASS.items():
        terms = []
        for (a, b), parts in monomials.items():
            coefficient = sp.Add(*(sign * J[r, s] for sign, r, s in parts))
            if coefficient != 0:
                terms.append(coefficient * (e[a] ** 2 if a == b else e[a] * e[b]))
        result[(i, j)] = sp.Add(*terms)
    return result


def Rz(phi: sp.Expr) -> sp.Matrix:
    """Rotation by ``phi`` about the global z axis (planar bodies)."""
    c, s = sp.cos(phi), sp.sin(phi)
    return sp.Matrix([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def _finite_vector(values: Sequence[float], n: int, where: str, what: str) -> np.ndarray:
    try:
        vec = np.array([float(x) for x in values], dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: {what} must be {n} numbers, got {values!r}.") from None
    if vec.shape != (n,) or not np.all(np.isfinite(vec)):
        raise ModelError(f"{where}: {what} must be {n} finite numbers, got {values!r}.")
    return vec


def euler_from_axis_angle(axis: Sequence[float], angle: float, where: str = "rotation") -> tuple[float, ...]:
    """Euler parameters of a rotation by ``angle`` [rad] about ``axis`` (eq. (2.21)); the axis
    is normalized and must not be zero."""
    a = _finite_vector(axis, 3, where, "the rotation axis")
    norm = float(np.linalg.norm(a))
    if norm < 1e-12:
        raise ModelError(f"{where}: the rotation axis is zero; give a nonzero axis such as [0, 0, 1].")
    try:
        theta = float(angle)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: the rotation angle must be a number (radians), got {angle!r}.") from None
    if not math.isfinite(theta):
        raise ModelError(f"{where}: the rotation angle {angle!r} is not finite.")
    s = math.sin(theta / 2) / norm
    return (math.cos(theta / 2), a[0] * s, a[1] * s, a[2] * s)


def matrix_from_cardan(angles: Sequence[float], where: str = "rotation") -> np.ndarray:
    """``Rx(a) Ry(b) Rz(c)`` for Cardan angles ``(a, b, c)`` [rad] (module docstring)."""
    a, b, c = _finite_vector(angles, 3, where, "the Cardan angles")
    ca, sa, cb, sb, cc, sc = math.cos(a), math.sin(a), math.cos(b), math.sin(b), math.cos(c), math.sin(c)
    rx = np.array([[1, 0, 0], [0, ca, -sa], [0, sa, ca]])
    ry = np.array([[cb, 0, sb], [0, 1, 0], [-sb, 0, cb]])
    rz = np.array([[cc, -sc, 0], [sc, cc, 0], [0, 0, 1]])
    return rx @ ry @ rz


def euler_from_cardan(angles: Sequence[float], where: str = "rotation") -> tuple[float, ...]:
    """Euler parameters of the Cardan angles ``(a, b, c)``, ``A = Rx(a) Ry(b) Rz(c)``."""
    return euler_from_matrix(matrix_from_cardan(angles, where), where)


def check_rotation_matrix(matrix: object, where: str = "rotation") -> np.ndarray:
    """The matrix as a 3x3 array if it is orthonormal with determinant +1 (within
    :data:`ORTHONORMAL_TOLERANCE`), else ModelError naming ``where`` and the fix."""
    try:
        mat = np.array(matrix, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: the rotation matrix must be 3x3 numbers, got {matrix!r}.") from None
    if mat.shape != (3, 3) or not np.all(np.isfinite(mat)):
        raise ModelError(f"{where}: the rotation matrix must be 3x3 finite numbers (rows), got {matrix!r}.")
    error = float(np.max(np.abs(mat.T @ mat - np.eye(3))))
    det = float(np.linalg.det(mat))
    if error > ORTHONORMAL_TOLERANCE or abs(det - 1.0) > ORTHONORMAL_TOLERANCE:
        raise ModelError(
            f"{where}: the rotation matrix is not orthonormal with determinant +1 (|A^T A - I| = {error:.2g}, "
            f"det = {det:.6g}); give the body axes as orthonormal columns to at least 1e-9, or use an "
            "axis-angle or Cardan rotation."
        )
    return mat


def euler_from_matrix(matrix: object, where: str = "rotation") -> tuple[float, ...]:
    """Euler parameters of a rotation matrix (checked by :func:`check_rotation_matrix`);
    ``e0 >= 0`` (Shepperd's method: the largest of the four squares is taken first)."""
    m = check_rotation_matrix(matrix, where)
    trace = float(np.trace(m))
    squares = [(1 + trace) / 4, (1 + 2 * m[0, 0] - trace) / 4, (1 + 2 * m[1, 1] - trace) / 4,
               (1 + 2 * m[2, 2] - trace) / 4]
    k = int(np.argmax(squares))
    ek = math.sqrt(max(squares[k], 0.0))
    if k == 0:
        e = [ek, (m[2, 1] - m[1, 2]) / (4 * ek), (m[0, 2] - m[2, 0]) / (4 * ek), (m[1, 0] - m[0, 1]) / (4 * ek)]
    elif k == 1:
        e = [(m[2, 1] - m[1, 2]) / (4 * ek), ek, (m[0, 1] + m[1, 0]) / (4 * ek), (m[0, 2] + m[2, 0]) / (4 * ek)]
    elif k == 2:
        e = [(m[0, 2] - m[2, 0]) / (4 * ek), (m[0, 1] + m[1, 0]) / (4 * ek), ek, (m[1, 2] + m[2, 1]) / (4 * ek)]
    else:
        e = [(m[1, 0] - m[0, 1]) / (4 * ek), (m[0, 2] + m[2, 0]) / (4 * ek), (m[1, 2] + m[2, 1]) / (4 * ek), ek]
    if e[0] < 0:
        e = [-x for x in e]
    norm = math.sqrt(sum(x * x for x in e))
    return tuple(float(x) / norm for x in e)


def matrix_from_euler(e: Sequence[float]) -> np.ndarray:
    """Numeric ``A(e)`` (eq. (2.20))."""
    return np.array(A([float(x) for x in e]).tolist(), dtype=float)


def cardan_from_matrix(m: sp.Matrix) -> tuple[sp.Expr, sp.Expr, sp.Expr]:
    """Cardan angles ``(a, b, c)`` with ``m = Rx(a) Ry(b) Rz(c)`` (symbolic, for sensors):
    ``b = asin(m13)``, ``a = atan2(-m23, m33)``, ``c = atan2(-m12, m11)``; ``a, c`` wrap at
    +-pi, singular at ``b = +-pi/2``."""
    return (sp.atan2(-m[1, 2], m[2, 2]), sp.asin(m[0, 2]), sp.atan2(-m[0, 1], m[0, 0]))
