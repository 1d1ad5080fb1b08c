"""Storage layout of the Newton matrix: a symmetric ordering and dense or band storage.

The HHT iteration matrix ``[[S, C_q^T], [C_q, 0]]`` has a sparsity pattern that is fixed
when the model's code is generated.  :func:`plan_layout` decides, once per model, in which
order its rows and columns are stored and whether the C kernels of
``native/runtime/fa_linalg.c`` factor it as a band or as a dense matrix; the generated code
then scatters each structurally non-zero entry to :meth:`MatrixLayout.index` and factors it
numerically every time the iteration matrix is refreshed.

The ordering is applied symmetrically (``P A P^T``), so the solution of the permuted system
is the permuted solution: ``x_new[new] = x_old[order[new]]``.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Iterable

import numpy as np
import scipy.sparse
from scipy.sparse.csgraph import reverse_cuthill_mckee

from .errors import ModelError

__all__ = ["BAND_MIN_SIZE", "BAND_WORK_FRACTION", "MatrixLayout", "plan_layout"]

#: Below this size the band path is never chosen: the loops of a dense LU of a few rows are
#: shorter and branch-free, and the band bookkeeping (pivot reach, fill columns) would cost
#: more than the arithmetic it saves.
BAND_MIN_SIZE = 8

#: The band path is chosen when its factorization work is below this fraction of the dense
#: work.  The estimates count multiply-adds only; the dense loops run over full rows and
#: vectorize better, so the band must win clearly, not just on paper.
BAND_WORK_FRACTION = 0.5


@dataclasses.dataclass(frozen=True)
class MatrixLayout:
    """Where each entry of an ``n x n`` matrix is stored for the C kernels.

    Parameters
    ----------
    n : int
        Matrix size (``n + m`` for the HHT iteration matrix).
    banded : bool
        True: band storage for ``fa_band_factor``, row-major of width ``2*kl + ku + 1``, row
        ``i`` holding columns ``i-kl .. i+kl+ku`` of the permuted matrix (the last ``kl``
        columns take the fill of partial pivoting).  False: dense row-major ``n x n`` for
        ``fa_dense_factor``.
    kl, ku : int
        Sub- and super-diagonals of the permuted matrix.  A dense layout records ``n - 1``
        for both: it can hold any entry.
    order : tuple of int
        ``order[new] = old``: the permuted matrix is ``A_new[i, j] = A[order[i], order[j]]``.
    position : tuple of int
        ``position[old] = new``, the inverse of ``order``.
    """

    n: int
    banded: bool
    kl: int
    ku: int
    order: tuple[int, ...]
    position: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.n, int) or isinstance(self.n, bool) or self.n < 1:
            raise ModelError(f"MatrixLayout: n = {self.n!r} must be a positive integer; give the matrix size.")
        for name in ("kl", "ku"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= self.n - 1:
                raise ModelError(f"MatrixLayout: {name} = {value!r} must be an integer in [0, {self.n - 1}]; "
                                 "use plan_layout to derive the bandwidths from the pattern.")
        if sorted(self.order) != list(range(self.n)):
            raise ModelError(f"MatrixLayout: order = {self.order!r} is not a permutation of 0..{self.n - 1}; "
                             "use plan_layout to derive it.")
        if len(self.position) != self.n or any(self.position[old] != new for new, old in enumerate(self.order)):
            raise ModelError(f"MatrixLayout: position = {self.position!r} is not the inverse of order = "
                             f"{self.order!r}; set position[order[k]] = k.")

    @classmethod
    def dense(cls, n: int) -> MatrixLayout:
        """The dense row-major layout of an ``n x n`` matrix in its own order."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ModelError(f"MatrixLayout.dense: n = {n!r} must be a positive integer; give the matrix size.")
        identity = tuple(range(n))
        return cls(n=n, banded=False, kl=n - 1, ku=n - 1, order=identity, position=identity)

    @property
    def width(self) -> int:
        """Doubles per stored row: ``2*kl + ku + 1`` for a band, ``n`` for a dense layout."""
        return 2 * self.kl + self.ku + 1 if self.banded else self.n

    @property
    def storage_size(self) -> int:
        """Doubles of storage: ``n*n`` dense, ``n*(2*kl + ku + 1)`` band."""
        return self.n * self.width

    @property
    def factor_flops(self) -> float:
        """Estimated floating-point operations of one numeric factorization.

        Dense LU: ``2/3 n^3``.  Band LU with partial pivoting: each of the ``n`` steps updates
        up to ``kl`` rows over up to ``kl + ku + 1`` columns (the pivot row may carry ``kl``
        columns of fill), one multiply and one add each: ``2 n kl (kl + ku + 1)``.  Both are
        upper bounds of the work of ``fa_linalg.c``, which skips zero multipliers.
        """
        return _band_flops(self.n, self.kl, self.ku) if self.banded else _dense_flops(self.n)

    @property
    def solve_flops(self) -> float:
        """Estimated floating-point operations of one solve (one right-hand side, either
        transposition): ``2 n^2`` dense, ``2 n (2 kl + ku)`` band.  Solves dominate when one
        factorization is reused over many Newton iterations or sensitivity columns."""
        if self.banded:
            return 2.0 * self.n * (2 * self.kl + self.ku)
        return 2.0 * self.n**2

    def index(self, row: int, col: int) -> int:
        """Position in the storage of the entry ``(row, col)`` of the ORIGINAL matrix.

        The code that assembles the matrix zeroes the whole storage (the band's structural
        zeros are read by the kernels; only its fill columns are not) and then writes each
        structurally non-zero entry here.

        Raises
        ------
        ModelError
            ``row`` or ``col`` outside ``0 .. n-1``, or a band layout whose band does not
            contain the entry (it was not in the pattern the layout was planned from).
        """
        for name, value in (("row", row), ("col", col)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not 0 <= value < self.n:
                raise ModelError(f"MatrixLayout.index: {name} = {value!r} must be an integer in "
                                 f"[0, {self.n - 1}]; index entries of the {self.n} x {self.n} matrix.")
        i, j = self.position[row], self.position[col]
        if not self.banded:
            return i * self.n + j
        if not -self.kl <= j - i <= self.ku:
            raise ModelError(f"MatrixLayout.index: entry ({row}, {col}) lies outside the band (kl = {self.kl}, "
                             f"ku = {self.ku}) of this layout; plan the layout from a pattern that contains it.")
        return i * self.width + (j - i + self.kl)


def plan_layout(n: int, pattern: Iterable[tuple[int, int]]) -> MatrixLayout:
    """Choose the ordering and the storage of an ``n x n`` matrix from its sparsity pattern.

    Rule
    ----
    1. Symmetrize the pattern and add the diagonal (the ordering must permute rows and
       columns alike, and the KKT diagonal of the constraint rows is structurally zero but
       pivoting may fill it).
    2. Order by reverse Cuthill-McKee (``scipy.sparse.csgraph.reverse_cuthill_mckee``,
       ``symmetric_mode=True``), which gathers a chain with a few far-reaching constraint
       rows (a ring or arrow graph) into a narrow band.  The given order is kept instead when
       its band is no wider, so an already banded matrix keeps its natural order.
    3. ``kl`` / ``ku`` are the widest sub- / super-diagonal of the permuted (unsymmetrized)
       pattern.
    4. Band storage if ``n >= BAND_MIN_SIZE`` and the band factorization work
       ``2 n kl (kl + ku + 1)`` is below ``BAND_WORK_FRACTION`` of the dense work
       ``2/3 n^3``; otherwise dense storage in the given order.  Dense LU wins for small
       matrices (loop overhead) and for matrices whose best band is wide (dense loops run
       over whole contiguous rows and need no fill bookkeeping).

    The result depends only on ``n`` and the set of entries (not their order or repetition).

    Parameters
    ----------
    n : int
        Matrix size, at least 1.
    pattern : iterable of (int, int)
        ``(row, col)`` of every structurally non-zero entry; repetitions are allowed.

    Raises
    ------
    ModelError
        ``n`` is not a positive integer, or an entry is not a pair of integers in ``0 .. n-1``.
    """
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise ModelError(f"plan_layout: n = {n!r} must be a positive integer; give the matrix size.")
    n = int(n)
    entries = _validated_entries(n, pattern)
    if n < BAND_MIN_SIZE:
        return MatrixLayout.dense(n)
    rows = np.array([r for r, _ in entries] + list(range(n)), dtype=np.int64)
    cols = np.array([c for _, c in entries] + list(range(n)), dtype=np.int64)
    # Symmetric structure: A + A^T plus the diagonal, deduplicated by the CSR conversion.
    structure = scipy.sparse.coo_matrix((np.ones(2 * rows.size), (np.concatenate([rows, cols]),
                                                                   np.concatenate([cols, rows]))),
                                        shape=(n, n)).tocsr()
    structure.sum_duplicates()
    structure.sort_indices()
    rcm = reverse_cuthill_mckee(structure, symmetric_mode=True)
    candidates = [tuple(range(n)), tuple(int(k) for k in rcm)]
    best = min(candidates, key=lambda order: _band_flops(n, *_bandwidths(order, rows, cols)))
    kl, ku = _bandwidths(best, rows, cols)
    if _band_flops(n, kl, ku) >= BAND_WORK_FRACTION * _dense_flops(n):
        return MatrixLayout.dense(n)
    position = [0] * n
    for new, old in enumerate(best):
        position[old] = new
    return MatrixLayout(n=n, banded=True, kl=kl, ku=ku, order=best, position=tuple(position))


def _validated_entries(n: int, pattern: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The distinct entries of ``pattern``, sorted; ModelError names the first bad one."""
    entries = set()
    try:
        items = list(pattern)
    except TypeError:
        raise ModelError(f"plan_layout: pattern = {pattern!r} is not iterable; give (row, col) pairs.") from None
    for k, item in enumerate(items):
        try:
            row, col = item
            row, col = operator.index(row), operator.index(col)
        except (TypeError, ValueError):
            raise ModelError(f"plan_layout: pattern entry {k} = {item!r} is not a (row, col) pair of integers; "
                             "give each structurally non-zero entry as (row, col).") from None
        if not (0 <= row < n and 0 <= col < n):
            raise ModelError(f"plan_layout: pattern entry {k} = ({row}, {col}) lies outside the {n} x {n} "
                             f"matrix; indices must be in [0, {n - 1}].")
        entries.add((row, col))
    return sorted(entries)


def _bandwidths(order: tuple[int, ...], rows: np.ndarray, cols: np.ndarray) -> tuple[int, int]:
    """(kl, ku) of the pattern ``rows, cols`` permuted by ``order`` (``order[new] = old``)."""
    position = np.empty(len(order), dtype=np.int64)
    position[np.asarray(order, dtype=np.int64)] = np.arange(len(order))
    offset = position[cols] - position[rows]
    return int(max(-offset.min(), 0)), int(max(offset.max(), 0))


def _band_flops(n: int, kl: int, ku: int) -> float:
    return 2.0 * n * kl * (kl + ku + 1)


def _dense_flops(n: int) -> float:
    return 2.0 / 3.0 * n**3
