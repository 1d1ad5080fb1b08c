"""Structured model terms: constant or parameter-scaled sparse matrices and quadratic constraints.

A flexible body reduced by component mode synthesis enters the equations of motion as
constant mass, stiffness and damping matrices with thousands of non-zeros, and its
constraints are at most quadratic in ``q`` (Vanpaemel et al., seed 003, eqs. (11)-(15)).
Written entry by entry as expressions, such a body would be differentiated, reduced and
printed entry by entry: the wrong tool (issue 24, part 2).  These items keep the matrices as
data; the component assembly evaluates and differentiates them numerically, their derivatives
being the matrices themselves (:mod:`fmi_adjoint.assembly.structured`).

:class:`MatrixTerm`
    ``factor(p) * A x`` added to one side of the equations of motion
    ``M a + C_q^T lambda = Q`` (:class:`TermRole`):

    ========== ======================== ==========================================
    role       contribution             typical ``A``
    ========== ======================== ==========================================
    MASS       ``M a += f A a``         reduced mass matrix, eq. (11)
    STIFFNESS  ``Q -= f A q``           reduced stiffness matrix, eq. (12)
    DAMPING    ``Q -= f A v``           Rayleigh or modal damping, eq. (15)
    LOAD       ``Q += f b``             constant load vector (gravity of a body), eq. (15)
    ========== ======================== ==========================================

    ``factor`` is an expression of parameters (``"E / 210e9"``, ``"alpha_R"``): the
    parameter-scaled matrices of identification (a stiffness scale, a density, a modal
    damping ratio).  A matrix that depends on parameters otherwise is a sum of terms.

:class:`QuadraticConstraints`
    Rows ``C(q) = C0 + J0 q + 1/2 (sum_i H_0,i q_i) q`` of seed 003, eq. (13), stored
    row-wise as ``C_r = c0_r + J0_r q + 1/2 q^T H_r q`` with ``H_r[i, j] = H_0,i[r, j]``.
    Only the symmetric part of ``H_r`` enters ``C`` (eq. (13) does not say whether
    ``H_0,i[r, j]`` is symmetric in ``i`` and ``j``; its second derivative, which eq. (19)
    calls constant, is the symmetric part): the rows are symmetrized when built.

Both name their coordinates; every coordinate they touch is a coordinate of the model. They
are values (frozen; their arrays are read-only), checked when built: shapes, indices, finite
numbers.  The whole-system derivation (models with time tables, numeric elements) writes
them out as expressions (:meth:`MatrixTerm.expressions`, :meth:`QuadraticConstraints.rows`):
the reference the structured kernels are tested against.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from .errors import ModelError
from .text import check_free_text, check_identifier

if TYPE_CHECKING:
    import sympy as sp
else:  # sympy is imported on first use: a warm start never uses it (issue 24, part 6)
    from .deferred import sympy as sp

__all__ = ["DAMPING", "LOAD", "MASS", "ROLES", "STIFFNESS", "MatrixTerm", "ParsedQuadratic", "ParsedTerm",
           "QuadraticConstraints", "SparseMatrix",
           "StructuredItem", "TermRole"]

#: Non-zeros one structured item may hold (the model-file limits of the security work bound
#: the rest of a model; a reduced flexible body of 5 000 coordinates has a few hundred
#: thousand).
MAX_ENTRIES = 4_000_000


@dataclasses.dataclass(frozen=True)
class TermRole:
    """Where a :class:`MatrixTerm` enters the equations (module docstring's table).

    Attributes
    ----------
    name : str
    target : str
        ``"Ma"`` (the inertia side) or ``"F"`` (``F = C_q^T lambda - Q``).
    argument : str or None
        The state vector the matrix multiplies (``"a"``, ``"q"``, ``"v"``), or None for a
        constant vector (the matrix has one column).
    sign : float
        The contribution to ``target`` is ``sign * factor * A x``.
    """

    name: str
    target: str
    argument: str | None
    sign: float


MASS = TermRole("mass", "Ma", "a", 1.0)
STIFFNESS = TermRole("stiffness", "F", "q", 1.0)
DAMPING = TermRole("damping", "F", "v", 1.0)
LOAD = TermRole("load", "F", None, -1.0)
#: The roles by name.
ROLES: dict[str, TermRole] = {role.name: role for role in (MASS, STIFFNESS, DAMPING, LOAD)}


def _frozen(values: object, dtype: type, what: str) -> np.ndarray:
    try:
        array: np.ndarray = np.array(values, dtype=dtype).reshape(-1)
    except (TypeError, ValueError):
        raise ModelError(f"{what}: give a sequence of numbers.") from None
    array.setflags(write=False)
    return array


@dataclasses.dataclass(frozen=True, eq=False)
class SparseMatrix:
    """A sparse matrix as coordinate triplets: ``A[rows[k], cols[k]] = values[k]``.

    Built by :meth:`of` from a dense array, a scipy sparse matrix or triplets: duplicates
    summed, zeros dropped, entries in row-major order (the order the kernels write).
    """

    shape: tuple[int, int]
    rows: np.ndarray
    cols: np.ndarray
    values: np.ndarray

    @classmethod
    def of(cls, matrix: object, what: str, shape: tuple[int, int] | None = None) -> SparseMatrix:
        """``matrix`` (a dense array, a scipy sparse matrix, a :class:`SparseMatrix`, or
        ``(rows, cols, values)`` triplets with ``shape``) as a checked :class:`SparseMatrix`."""
        if isinstance(matrix, SparseMatrix):
            rows, cols, values, size = matrix.rows, matrix.cols, matrix.values, matrix.shape
        elif hasattr(matrix, "tocoo"):
            coo = matrix.tocoo()
            rows, cols, values, size = coo.row, coo.col, coo.data, coo.shape
        elif isinstance(matrix, tuple) and len(matrix) == 3 and shape is not None:
            rows, cols, values, size = *matrix, shape
        else:
            try:
                dense = np.array(matrix, dtype=float)
            except (TypeError, ValueError):
                raise ModelError(f"{what}: give a matrix of numbers (an array, a scipy sparse matrix or "
                                 "(rows, cols, values) triplets with a shape).") from None
            if dense.ndim == 1:
                dense = dense.reshape(-1, 1)
            if dense.ndim != 2:
                raise ModelError(f"{what}: give a matrix (2 dimensions), not {dense.ndim}.")
            rows, cols = np.nonzero(dense)
            values, size = dense[rows, cols], dense.shape
        size = (int(size[0]), int(size[1]))
        if shape is not None and size != tuple(shape):
            raise ModelError(f"{what}: it is {size[0]} x {size[1]}, but {shape[0]} x {shape[1]} is needed.")
        r, c, x = _frozen(rows, np.int64, what), _frozen(cols, np.int64, what), _frozen(values, float, what)
        if not (len(r) == len(c) == len(x)):
            raise ModelError(f"{what}: rows, cols and values have different lengths.")
        if len(x) > MAX_ENTRIES:
            raise ModelError(f"{what}: {len(x)} entries exceed the limit of {MAX_ENTRIES}; reduce the model "
                             "(fewer modes or a coarser mesh).")
        if len(x) and (r.min() < 0 or c.min() < 0 or r.max() >= size[0] or c.max() >= size[1]):
            raise ModelError(f"{what}: an entry lies outside the {size[0]} x {size[1]} matrix.")
        if not np.all(np.isfinite(x)):
            raise ModelError(f"{what}: it holds a value that is not finite; give finite numbers.")
        # Row-major order, duplicates summed, zeros dropped.
        order = np.lexsort((c, r))
        r, c, x = r[order], c[order], x[order]
        if len(x):
            first = np.ones(len(x), dtype=bool)
            first[1:] = (r[1:] != r[:-1]) | (c[1:] != c[:-1])
            starts = np.flatnonzero(first)
            x = np.add.reduceat(x, starts)
            r, c = r[starts], c[starts]
            keep = x != 0.0
            r, c, x = r[keep], c[keep], x[keep]
        return cls(size, _frozen(r, np.int64, what), _frozen(c, np.int64, what), _frozen(x, float, what))

    @property
    def nnz(self) -> int:
        return len(self.values)

    def dense(self) -> np.ndarray:
        out = np.zeros(self.shape)
        np.add.at(out, (self.rows, self.cols), self.values)
        return out


@dataclasses.dataclass(frozen=True, eq=False)
class MatrixTerm:
    """``factor(p) * A x`` on one side of the equations (module docstring).

    Attributes
    ----------
    name : str
        For messages.
    role : TermRole
        :data:`MASS`, :data:`STIFFNESS`, :data:`DAMPING` or :data:`LOAD` (or its name).
    coordinates : tuple of str
        The coordinates of the matrix's rows and columns, in order.
    matrix : SparseMatrix
        ``k x k`` for ``k`` coordinates (``k x 1`` for a load); anything :meth:`SparseMatrix.of`
        takes.
    factor : str, float or sympy.Expr
        An expression of parameters (no coordinates, no ``t``; a sympy expression in name
        symbols when a component builds it); ``1`` by default.
    """

    name: str
    role: TermRole
    coordinates: tuple[str, ...]
    matrix: SparseMatrix
    factor: str | float | int | sp.Expr = 1.0

    def __post_init__(self) -> None:
        check_identifier(self.name, "matrix term")
        role = ROLES.get(self.role) if isinstance(self.role, str) else self.role
        if not isinstance(role, TermRole):
            raise ModelError(f"matrix term '{self.name}': role {self.role!r} is not one of {', '.join(ROLES)}.")
        object.__setattr__(self, "role", role)
        names = _coordinate_names(self.coordinates, f"matrix term '{self.name}'")
        object.__setattr__(self, "coordinates", names)
        k = len(names)
        shape = (k, 1) if role.argument is None else (k, k)
        object.__setattr__(self, "matrix", SparseMatrix.of(self.matrix, f"matrix term '{self.name}'", shape))
        if isinstance(self.factor, str):
            check_free_text(self.factor, f"matrix term '{self.name}': factor")
        elif isinstance(self.factor, sp.Expr):  # built by a component in name symbols; checked when parsed
            pass
        elif not isinstance(self.factor, (int, float)) or isinstance(self.factor, bool) or not math.isfinite(
                self.factor):
            raise ModelError(f"matrix term '{self.name}': factor {self.factor!r} is not a finite number or an "
                             "expression of parameters.")

    def expressions(self, x: Sequence[sp.Expr], factor: sp.Expr) -> list[tuple[int, int, sp.Expr]]:
        """The term written out for the whole-system derivation: ``(row, col, value)`` with
        ``value`` the entry's share of ``sign f A x`` (``col`` the coordinate ``x`` multiplies,
        ``-1`` for a load), positions local to :attr:`coordinates`."""
        m = self.matrix
        scale = self.role.sign * factor
        if self.role.argument is None:
            return [(int(r), -1, scale * sp.Float(float(value))) for r, value in zip(m.rows, m.values)]
        return [(int(r), int(c), scale * sp.Float(float(value)) * x[int(c)])
                for r, c, value in zip(m.rows, m.cols, m.values)]


@dataclasses.dataclass(frozen=True, eq=False)
class QuadraticConstraints:
    """Constraint rows at most quadratic in ``q`` (seed 003, eq. (13); module docstring).

    Attributes
    ----------
    name : str
        Row ``r`` is the constraint ``<name>_<r>`` (its multiplier's name, ``lam(<name>_<r>)``).
    coordinates : tuple of str
        The ``k`` coordinates of ``q`` in the rows.
    c0 : sequence of float
        ``m`` constant terms.
    jacobian : SparseMatrix
        ``J0``, ``m x k``.
    hessians : SparseMatrix
        The ``(m k) x k`` matrix whose row ``r k + i`` is row ``i`` of ``H_r`` (symmetrized
        when built); given as such a matrix or as entries ``(r, i, j, H_r[i, j])``
        (equivalently ``H_0,i[r, j]`` of eq. (13)).
    """

    name: str
    coordinates: tuple[str, ...]
    c0: np.ndarray
    jacobian: SparseMatrix
    hessians: SparseMatrix | Sequence[tuple[int, int, int, float]] = ()

    def __post_init__(self) -> None:
        check_identifier(self.name, "quadratic constraints")
        where = f"quadratic constraints '{self.name}'"
        names = _coordinate_names(self.coordinates, where)
        object.__setattr__(self, "coordinates", names)
        c0 = _frozen(self.c0, float, f"{where}: c0")
        if not np.all(np.isfinite(c0)):
            raise ModelError(f"{where}: c0 holds a value that is not finite.")
        object.__setattr__(self, "c0", c0)
        m, k = len(c0), len(names)
        if m == 0:
            raise ModelError(f"{where}: c0 is empty; give one constant per constraint row.")
        object.__setattr__(self, "jacobian", SparseMatrix.of(self.jacobian, f"{where}: J0", (m, k)))
        H = self.hessians
        if isinstance(H, SparseMatrix):
            flat = SparseMatrix.of(H, f"{where}: Hessians", (m * k, k))
            r, i, j, x = flat.rows // k, flat.rows % k, flat.cols, flat.values
        else:
            entries = list(H)
            if len(entries) > MAX_ENTRIES:
                raise ModelError(f"{where}: {len(entries)} Hessian entries exceed the limit of {MAX_ENTRIES}.")
            try:
                r, i, j = (np.array([e[n] for e in entries], dtype=np.int64).reshape(-1) for n in range(3))
                x = np.array([e[3] for e in entries], dtype=float).reshape(-1)
            except (TypeError, ValueError, IndexError, OverflowError):
                raise ModelError(f"{where}: give the Hessian entries as (row, i, j, value).") from None
            if len(x) and (r.min() < 0 or r.max() >= m or min(i.min(), j.min()) < 0 or max(i.max(), j.max()) >= k):
                raise ModelError(f"{where}: a Hessian entry lies outside {m} rows and {k} coordinates.")
            if not np.all(np.isfinite(x)):
                raise ModelError(f"{where}: a Hessian entry is not finite.")
        # The symmetric part, both triangles stored: H_r <- (H_r + H_r^T) / 2, as one
        # (m k) x k matrix whose row r k + i is row i of H_r.
        symmetric = SparseMatrix.of((np.concatenate([r * k + i, r * k + j]), np.concatenate([j, i]),
                                     np.concatenate([x, x]) / 2.0), f"{where}: Hessians", (m * k, k))
        object.__setattr__(self, "hessians", symmetric)

    @property
    def m(self) -> int:
        return len(self.c0)

    @property
    def hessian_matrix(self) -> SparseMatrix:
        """:attr:`hessians` as built (a :class:`SparseMatrix`)."""
        assert isinstance(self.hessians, SparseMatrix)
        return self.hessians

    def row_names(self) -> tuple[str, ...]:
        return tuple(f"{self.name}_{r}" for r in range(self.m))

    def rows(self, q: Sequence[sp.Expr]) -> list[sp.Expr]:
        """The rows written out for the whole-system derivation (``q`` local to
        :attr:`coordinates`)."""
        terms: list[list[sp.Expr]] = [[sp.Float(float(c))] for c in self.c0]
        J = self.jacobian
        for r, c, value in zip(J.rows, J.cols, J.values):
            terms[int(r)].append(sp.Float(float(value)) * q[int(c)])
        H, k = self.hessian_matrix, len(self.coordinates)
        for ri, j, value in zip(H.rows, H.cols, H.values):
            terms[int(ri) // k].append(sp.Float(float(value) / 2.0) * q[int(ri) % k] * q[int(j)])
        return [sp.Add(*row) for row in terms]


#: An item of :attr:`fmi_adjoint.model.Model.matrix_terms`.
StructuredItem: TypeAlias = "MatrixTerm | QuadraticConstraints"


def _coordinate_names(names: object, where: str) -> tuple[str, ...]:
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise ModelError(f"{where}: coordinates must be a sequence of coordinate names.")
    result = tuple(names)
    for name in result:
        check_identifier(name, f"{where}: coordinate")
    if not result:
        raise ModelError(f"{where}: it has no coordinates.")
    if len(set(result)) != len(result):
        raise ModelError(f"{where}: a coordinate is named twice.")
    return result


@dataclasses.dataclass(frozen=True, eq=False)
class ParsedTerm:
    """A :class:`MatrixTerm` of a parsed model: its coordinates' model indices and its factor
    in the model's parameter symbols (:func:`fmi_adjoint.model.parse_items`)."""

    item: MatrixTerm
    coordinates: tuple[int, ...]
    factor: sp.Expr


@dataclasses.dataclass(frozen=True, eq=False)
class ParsedQuadratic:
    """:class:`QuadraticConstraints` of a parsed model: its coordinates' model indices and the
    model constraint row of each of its rows."""

    item: QuadraticConstraints
    coordinates: tuple[int, ...]
    multipliers: tuple[int, ...]
