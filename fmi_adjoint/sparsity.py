"""Storage layout of the Newton matrix: dense, band (after a symmetric ordering) or sparse.

The HHT iteration matrix ``[[S, C_q^T], [C_q, 0]]`` and the initialization matrix ``G_z``
have sparsity patterns that are fixed when the model's code is generated.  :func:`plan_layout`
decides, once per matrix, how it is stored and factored (:class:`MatrixStorage`):

* ``DENSE``: row-major ``n x n``, LU of ``native/runtime/fa_linalg.c`` (small matrices);
* ``BAND``: rows and columns ordered by reverse Cuthill-McKee, band LU of ``fa_linalg.c``
  (chains: the band stays narrow);
* ``SPARSE``: compressed sparse columns of the pattern plus the diagonal, in the model's
  order, factored by Eigen's SparseLU (``native/runtime/fa_sparse.cpp``) after a
  fill-reducing ordering (trees, loops, lattices: neither small nor banded): COLAMD's column
  ordering inside the solver, or, where it is clearly less work, a nested dissection of the
  symmetrized pattern computed here by METIS (:func:`nested_dissection_order`) and applied
  to rows and columns alike (``SparsePattern.order``; lattices and meshes).

The generated code scatters each structurally non-zero entry to :meth:`MatrixLayout.index`
and factors the matrix numerically every time it is refreshed.  A band ordering is applied
symmetrically (``P A P^T``), so the solution of the permuted system is the permuted solution:
``x_new[new] = x_old[order[new]]``; dense and sparse layouts keep the model's order.

The environment variable ``FMI_ADJOINT_MATRIX_STORAGE`` (``dense``, ``band``, ``sparse``;
unset or ``auto``: the rule of :func:`plan_layout`) forces one storage for every matrix
of the models generated afterwards (tests and benchmarks); the native build cache keys
include it (:func:`storage_override`).
"""

from __future__ import annotations

import bisect
import contextlib
import contextvars
import dataclasses
import enum
import functools
import operator
import os
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from .errors import CompilerError, ModelError

__all__ = ["BAND_MIN_SIZE", "BAND_WORK_FRACTION", "DISSECTION_WORK_FRACTION", "SPARSE_DENSE_WORK_FACTOR",
           "SPARSE_MIN_SIZE", "SPARSE_WORK_FACTOR", "STORAGE_VARIABLE", "MatrixLayout", "MatrixStorage",
           "SparsePattern", "block_lower_pattern", "forced_storage", "nested_dissection_order", "plan_layout",
           "sparse_factor_flops", "storage_named", "storage_override"]

#: Below this size the band path is never chosen: the loops of a dense LU of a few rows are
#: shorter and branch-free, and the band bookkeeping (pivot reach, fill columns) would cost
#: more than the arithmetic it saves.
BAND_MIN_SIZE = 8

#: The band path is chosen when its factorization work is below this fraction of the dense
#: work.  The estimates count multiply-adds only; the dense loops run over full rows and
#: vectorize better, so the band must win clearly, not just on paper.
BAND_WORK_FRACTION = 0.5

#: Below this size the sparse path is never chosen automatically: a supernodal sparse LU
#: carries a fixed cost per factorization (memory set-up, column permutation, supernode
#: bookkeeping) that the dense and band loops of a small matrix do not have, and below it any
#: storage factors in about a millisecond (the MacPherson strut's initialization matrix, 219
#: rows: dense 0.67 ms, band 0.19 ms, sparse 0.19 ms), so dense and band keep such models
#: free of C++ (no C++ compiler needed, no Eigen in their FMUs).
SPARSE_MIN_SIZE = 300

#: The sparse path is chosen when its estimated work (:func:`sparse_factor_flops`) times this
#: factor is below the work estimate of the choice between dense and band.  The band estimate
#: is an upper bound (the band kernels skip zero multipliers, so a band that fills only its
#: profile costs far less) and an operation of the supernodal sparse LU costs more than one of
#: the contiguous band loops, so the ratio of the estimates must be large.  Measured (one
#: factorization each, fa_band_factor against Eigen SparseLU, 2-core machine): estimate ratio
#: 2.2-3.2 (3D grids of masses, 375-2187 rows): band 1.3-2.6x faster; 36 (Newton matrix of the
#: 4x4x4 spring lattice, 482 rows): equal (1.08 against 1.21 ms); 40 (7x7x7 lattice, 2795
#: rows): sparse 1.4x faster; 144 and 173 (their initialization matrices, 1446 and 8385
#: rows): sparse 2.9x and 4.2x faster; 1537 (a random tree of 400 masses): sparse 3x faster.
SPARSE_WORK_FACTOR = 30.0

#: The same factor against dense storage.  The dense estimate ``2/3 n^3`` is the work the dense
#: LU does (the band estimate is an upper bound), so the sparse path need not win by as much.
#: Measured (CPU per step of the C engine, 2-core machine): the flexible MacPherson suspension
#: (625 rows, dense estimate 24x the sparse one after nested dissection): dense 60 ms, sparse
#: 17 ms (3.5x faster).
SPARSE_DENSE_WORK_FACTOR = 5.0

#: A sparse matrix is factored after the nested dissection of :func:`nested_dissection_order`
#: instead of COLAMD's column ordering when the estimated work (:func:`sparse_factor_flops`)
#: of the first is below this fraction of the second's.  The estimates assume diagonal pivots;
#: the solver pivots on the values (threshold partial pivoting), and a symmetric order, which
#: may put a constraint row before the coordinates that fill its zero diagonal, loses more to
#: row exchanges than COLAMD, which orders the columns for any row exchange.  Measured with
#: Eigen's SparseLU in the C engine on the issue-24 families (estimate ratio: entries of the
#: factors with the dissection against COLAMD): the Newton matrix of the lattice of 1 020
#: coordinates, 0.19: 51 660 against 190 898 (the step 7.8x faster); its initialization
#: matrix, 0.59: 1 614 549 against 993 894; the Newton matrix of a random tree of 1 000
#: coordinates, 0.97: 88 656 against 52 846 (Eigen alone, values of the Python engine).  So
#: the dissection must win clearly on paper.
DISSECTION_WORK_FRACTION = 0.3

#: Environment variable that forces a storage (:func:`storage_override`).
STORAGE_VARIABLE = "FMI_ADJOINT_MATRIX_STORAGE"


class MatrixStorage(enum.Enum):
    """How a matrix is stored and factored (module docstring); the ``value`` is the code of
    ``FA_KKT_KIND`` / ``FA_INIT_KIND`` in the generated ``model.h``."""

    DENSE = 0
    BAND = 1
    SPARSE = 2


#: The storage :func:`forced_storage` sets for the code generated inside it: ``(storage,)``,
#: ``(None,)`` for the automatic choice whatever the environment says; None outside.
_FORCED: contextvars.ContextVar[tuple[MatrixStorage | None] | None] = contextvars.ContextVar(
    "fmi_adjoint_matrix_storage", default=None)


@contextlib.contextmanager
def forced_storage(storage: MatrixStorage | None) -> Iterator[None]:
    """Generate code with ``storage`` (None: the automatic choice) whatever
    ``$FMI_ADJOINT_MATRIX_STORAGE`` says: an FMU's trust rebuild uses the storage its export
    recorded, not the importer's environment."""
    token = _FORCED.set((storage,))
    try:
        yield
    finally:
        _FORCED.reset(token)


def storage_named(value: str, where: str = STORAGE_VARIABLE) -> MatrixStorage | None:
    """The storage named ``value`` (``dense``, ``band``, ``sparse``; None for ``auto`` or empty).

    Raises
    ------
    ModelError
        Any other value, naming ``where`` and the allowed ones.
    """
    value = value.strip().lower()
    if value in ("", "auto"):
        return None
    for storage in MatrixStorage:
        if storage.name.lower() == value:
            return storage
    raise ModelError(f"{where} = {value!r} is not a matrix storage; set it to auto, dense, band or sparse, or "
                     "unset it.")


def storage_override() -> MatrixStorage | None:
    """The storage forced by :func:`forced_storage`, else by ``$FMI_ADJOINT_MATRIX_STORAGE``
    (a knob for tests and benchmarks; None: unset, empty or ``auto``).

    Raises
    ------
    ModelError
        Any other value; the message lists the allowed ones.
    """
    forced = _FORCED.get()
    if forced is not None:
        return forced[0]
    return storage_named(os.environ.get(STORAGE_VARIABLE, ""))


@dataclasses.dataclass(frozen=True)
class SparsePattern:
    """Compressed sparse columns of a pattern: column ``j`` holds the rows
    ``rowind[colptr[j]:colptr[j+1]]``, strictly increasing (the order of ``fa_sparse.h``).

    ``order``: empty (the solver orders the columns by COLAMD), or a permutation
    ``order[new] = old`` of rows and columns alike, in which the solver factors ``P A P^T``
    (:func:`nested_dissection_order`); the values stay in the order of ``colptr, rowind``.

    ``starts`` and ``blocks``: a block lower triangular matrix (``fa_sparse_new_blocked``): the
    diagonal blocks ``starts[b] .. starts[b+1]-1`` are factored apart, ``blocks[b]`` their
    patterns (local indices, each with its own ``order``); no entry lies above the block
    diagonal.  Empty: one block."""

    colptr: tuple[int, ...]
    rowind: tuple[int, ...]
    order: tuple[int, ...] = ()
    starts: tuple[int, ...] = ()
    blocks: tuple[SparsePattern, ...] = ()

    def __post_init__(self) -> None:
        n = len(self.colptr) - 1
        ok = n >= 1 and self.colptr[0] == 0 and self.colptr[-1] == len(self.rowind)
        ok = ok and all(self.colptr[j] <= self.colptr[j + 1] for j in range(n))
        ok = ok and all(0 <= r < n for r in self.rowind)
        ok = ok and all(self.rowind[k] < self.rowind[k + 1] for j in range(n)
                        for k in range(self.colptr[j], self.colptr[j + 1] - 1))
        if not ok:
            raise ModelError("SparsePattern: colptr/rowind are not a compressed-column pattern (colptr from 0 "
                             "to len(rowind), non-decreasing; rows in range and increasing in each column); "
                             "build it with SparsePattern.of.")
        if self.order and sorted(self.order) != list(range(n)):
            raise ModelError(f"SparsePattern: order is not a permutation of 0..{n - 1}; give () for COLAMD or "
                             "the order of nested_dissection_order.")
        if (self.starts or self.blocks) and not (
                len(self.starts) == len(self.blocks) + 1 >= 2 and self.starts[0] == 0 and self.starts[-1] == n
                and all(len(block.colptr) - 1 == b - a for block, a, b in zip(self.blocks, self.starts,
                                                                                self.starts[1:]))):
            raise ModelError("SparsePattern: starts and blocks do not describe diagonal blocks covering the "
                             "matrix; build a blocked pattern with block_lower_pattern.")
        if self.blocks and self.order:
            raise ModelError("SparsePattern: a blocked pattern orders each block (blocks[b].order), not the whole "
                             "matrix; give order = () with blocks.")

    @classmethod
    def of(cls, n: int, entries: Iterable[tuple[int, int]]) -> SparsePattern:
        """The pattern of ``entries`` plus the diagonal of an ``n x n`` matrix."""
        by_column: list[set[int]] = [{j} for j in range(n)]
        for row, col in entries:
            by_column[col].add(row)
        colptr, rowind = [0], []
        for rows in by_column:
            rowind.extend(sorted(rows))
            colptr.append(len(rowind))
        return cls(tuple(colptr), tuple(rowind))

    @property
    def nnz(self) -> int:
        return len(self.rowind)


    def position(self, row: int, col: int) -> int | None:
        """Index of ``(row, col)`` in ``rowind`` (and in the values), None if not in the pattern."""
        lo, hi = self.colptr[col], self.colptr[col + 1]
        k = bisect.bisect_left(self.rowind, row, lo, hi)
        return k if k < hi and self.rowind[k] == row else None


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
        ``fa_dense_factor``, or the compressed columns of ``sparse``.
    kl, ku : int
        Sub- and super-diagonals of the permuted matrix.  A dense layout records ``n - 1``
        for both: it can hold any entry.
    order : tuple of int
        ``order[new] = old``: the permuted matrix is ``A_new[i, j] = A[order[i], order[j]]``.
    position : tuple of int
        ``position[old] = new``, the inverse of ``order``.
    sparse : SparsePattern or None
        Given: sparse storage, the values in the order of this pattern (``banded`` False,
        the model's order, ``kl = ku = n - 1``), factored by ``fa_sparse.cpp``.
    """

    n: int
    banded: bool
    kl: int
    ku: int
    order: tuple[int, ...]
    position: tuple[int, ...]
    sparse: SparsePattern | None = None

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
        if self.sparse is not None and (self.banded or len(self.sparse.colptr) != self.n + 1
                                        or self.order != tuple(range(self.n))):
            raise ModelError(f"MatrixLayout: a sparse layout must have banded = False, the model's order and a "
                             f"pattern of {self.n} columns; use MatrixLayout.sparse_of or plan_layout.")

    @classmethod
    def sparse_of(cls, n: int, entries: Iterable[tuple[int, int]], starts: tuple[int, ...] = ()) -> MatrixLayout:
        """The sparse layout of the pattern ``entries`` plus the diagonal, in the model's order,
        with the solver's ordering (:func:`_solver_pattern`)."""
        identity = tuple(range(n))
        return cls(n=n, banded=False, kl=n - 1, ku=n - 1, order=identity, position=identity,
                   sparse=_solver_pattern(n, entries, starts))

    @property
    def storage(self) -> MatrixStorage:
        """How the matrix is stored and factored."""
        if self.sparse is not None:
            return MatrixStorage.SPARSE
        return MatrixStorage.BAND if self.banded else MatrixStorage.DENSE

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
        """Doubles of storage: ``n*n`` dense, ``n*(2*kl + ku + 1)`` band, the pattern's
        non-zeros sparse (the factors are held by the solver, :func:`sparse_factor_flops`)."""
        if self.sparse is not None:
            return self.sparse.nnz
        return self.n * self.width

    @property
    def factor_flops(self) -> float:
        """Estimated floating-point operations of one numeric factorization.

        Dense LU: ``2/3 n^3``.  Band LU with partial pivoting: each of the ``n`` steps updates
        up to ``kl`` rows over up to ``kl + ku + 1`` columns (the pivot row may carry ``kl``
        columns of fill), one multiply and one add each: ``2 n kl (kl + ku + 1)``.  Both are
        upper bounds of the work of ``fa_linalg.c``, which skips zero multipliers.
        """
        if self.sparse is not None:
            return sparse_factor_flops(self.sparse)[0]
        return _band_flops(self.n, self.kl, self.ku) if self.banded else _dense_flops(self.n)

    @property
    def solve_flops(self) -> float:
        """Estimated floating-point operations of one solve (one right-hand side, either
        transposition): ``2 n^2`` dense, ``2 n (2 kl + ku)`` band, twice the factors'
        non-zeros sparse.  Solves dominate when one factorization is reused over many Newton
        iterations or sensitivity columns."""
        if self.sparse is not None:
            return 2.0 * sparse_factor_flops(self.sparse)[1]
        if self.banded:
            return 2.0 * self.n * (2 * self.kl + self.ku)
        return 2.0 * self.n**2

    def index(self, row: int, col: int) -> int:
        """Position in the storage of the entry ``(row, col)`` of the ORIGINAL matrix.

        The code that assembles the matrix zeroes the whole storage (the band's structural
        zeros are read by the kernels; only its fill columns are not) and then writes each
        structurally non-zero entry here.  Sparse: the entry's index in the compressed
        columns (``SparsePattern.rowind`` and the values).

        Raises
        ------
        ModelError
            ``row`` or ``col`` outside ``0 .. n-1``, or a band or sparse layout that does not
            hold the entry (it was not in the pattern the layout was planned from).
        """
        for name, value in (("row", row), ("col", col)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not 0 <= value < self.n:
                raise ModelError(f"MatrixLayout.index: {name} = {value!r} must be an integer in "
                                 f"[0, {self.n - 1}]; index entries of the {self.n} x {self.n} matrix.")
        if self.sparse is not None:
            k = self.sparse.position(int(row), int(col))
            if k is None:
                raise ModelError(f"MatrixLayout.index: entry ({row}, {col}) is not in the sparse pattern of this "
                                 "layout; plan the layout from a pattern that contains it.")
            return k
        i, j = self.position[row], self.position[col]
        if not self.banded:
            return i * self.n + j
        if not -self.kl <= j - i <= self.ku:
            raise ModelError(f"MatrixLayout.index: entry ({row}, {col}) lies outside the band (kl = {self.kl}, "
                             f"ku = {self.ku}) of this layout; plan the layout from a pattern that contains it.")
        return i * self.width + (j - i + self.kl)


def plan_layout(n: int, pattern: Iterable[tuple[int, int]], storage: MatrixStorage | None = None, *,
                starts: tuple[int, ...] = ()) -> MatrixLayout:
    """Choose the storage and the ordering of an ``n x n`` matrix from its sparsity pattern.

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
    5. Sparse storage instead if ``n >= SPARSE_MIN_SIZE`` and ``SPARSE_WORK_FACTOR`` (against
       a band; ``SPARSE_DENSE_WORK_FACTOR`` against dense storage) times the estimated sparse
       work (:func:`sparse_factor_flops`: the fill of an LU of the pattern in the solver's
       ordering, :func:`_ordered_pattern`) is below the work of the choice of step 4: trees
       with loops, lattices and flexible bodies, whose best band is still wide.

    The result depends only on ``n``, the set of entries (not their order or repetition) and
    ``storage``.

    Parameters
    ----------
    n : int
        Matrix size, at least 1.
    pattern : iterable of (int, int)
        ``(row, col)`` of every structurally non-zero entry; repetitions are allowed.
    storage : MatrixStorage, optional
        Force this storage (tests, benchmarks; :func:`storage_override`) instead of the rule.
        A forced band takes the narrower of the two orderings whatever its work.
    starts : tuple of int, optional
        Diagonal blocks (first rows, then ``n``) of a matrix that may be block lower
        triangular (the initialization matrix): a sparse layout then factors them apart.

    Raises
    ------
    ModelError
        ``n`` is not a positive integer, an entry is not a pair of integers in ``0 .. n-1``,
        or ``storage`` is not a :class:`MatrixStorage`.
    """
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise ModelError(f"plan_layout: n = {n!r} must be a positive integer; give the matrix size.")
    if storage is not None and not isinstance(storage, MatrixStorage):
        raise ModelError(f"plan_layout: storage = {storage!r} must be a MatrixStorage (DENSE, BAND or SPARSE) or "
                         "None for the automatic choice.")
    n = int(n)
    entries = _validated_entries(n, pattern)
    if storage is MatrixStorage.DENSE:
        return MatrixLayout.dense(n)
    if storage is MatrixStorage.SPARSE:
        return MatrixLayout.sparse_of(n, entries, starts)
    if n < BAND_MIN_SIZE and storage is None:
        return MatrixLayout.dense(n)
    # scipy.sparse on use: planning runs at generation, never on a warm start.
    import scipy.sparse  # noqa: PLC0415
    from scipy.sparse.csgraph import reverse_cuthill_mckee  # noqa: PLC0415

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
    position = [0] * n
    for new, old in enumerate(best):
        position[old] = new
    band = MatrixLayout(n=n, banded=True, kl=kl, ku=ku, order=best, position=tuple(position))
    if storage is MatrixStorage.BAND:
        return band
    dense = MatrixLayout.dense(n)
    chosen = band if _band_flops(n, kl, ku) < BAND_WORK_FRACTION * _dense_flops(n) else dense
    if n >= SPARSE_MIN_SIZE:
        csc = _solver_pattern(n, entries, starts)
        factor = SPARSE_WORK_FACTOR if chosen.banded else SPARSE_DENSE_WORK_FACTOR
        if factor * sparse_factor_flops(csc)[0] < chosen.factor_flops:
            identity = tuple(range(n))
            return MatrixLayout(n=n, banded=False, kl=n - 1, ku=n - 1, order=identity, position=identity,
                                sparse=csc)
    return chosen


@functools.lru_cache(maxsize=16)  # a plan asks for the same pattern's estimate several times
def sparse_factor_flops(pattern: SparsePattern) -> tuple[float, int]:
    """Estimated ``(floating-point operations, non-zeros of L + U)`` of a sparse LU of ``pattern``.

    The symbolic work of a left-looking LU in the solver's ordering: without
    ``pattern.order`` after a COLAMD column ordering, as Eigen's SparseLU orders (SuperLU,
    ``scipy.sparse.linalg.splu``, ``permc_spec="COLAMD"``), with it on ``P A P^T`` in that
    order (``permc_spec="NATURAL"``).  The pattern is factored with diagonally dominant values
    (no row exchanges), and eliminating column ``k`` costs ``|L_k| (2 |U^k| + 1)`` operations,
    ``|L_k|`` the sub-diagonal entries of column ``k`` of L, ``|U^k|`` the off-diagonal entries
    of row ``k`` of U.  Pivoting on the real values may add fill; the estimate only ranks
    storages and orderings, the solver reports the real figures (``fa_sparse_factor_nnz``).
    """
    if pattern.blocks:
        # Each diagonal block factored apart; the strictly lower blocks are stored as they are.
        parts = [sparse_factor_flops(block) for block in pattern.blocks]
        inside = sum(block.nnz for block in pattern.blocks)
        return float(sum(f for f, _ in parts)), int(sum(k for _, k in parts)) + pattern.nnz - inside
    import scipy.sparse  # noqa: PLC0415 (on use, as in plan_layout)
    import scipy.sparse.linalg  # noqa: PLC0415

    n = len(pattern.colptr) - 1
    colptr = np.asarray(pattern.colptr, dtype=np.int64)
    rowind = np.asarray(pattern.rowind, dtype=np.int64)
    counts = np.diff(colptr)
    values = np.ones(rowind.size)
    # Diagonal n + 1 > any row or column sum of the off-diagonal ones: no row exchange.
    columns = np.repeat(np.arange(n), counts)
    values[rowind == columns] = n + 1.0
    matrix = scipy.sparse.csc_matrix((values, rowind, colptr), shape=(n, n))
    if pattern.order:
        order = np.asarray(pattern.order, dtype=np.int64)
        matrix = matrix[order][:, order].tocsc()
    lu = scipy.sparse.linalg.splu(matrix, permc_spec="NATURAL" if pattern.order else "COLAMD", diag_pivot_thresh=0.0,
                                  options={"SymmetricMode": bool(pattern.order)})
    lower = np.diff(lu.L.tocsc().indptr) - 1
    upper = np.diff(lu.U.tocsr().indptr) - 1
    flops = float(np.sum(lower * (2.0 * upper + 1.0)))
    return flops, int(lu.L.nnz + lu.U.nnz - n)


def nested_dissection_order(pattern: SparsePattern) -> tuple[int, ...]:
    """A fill-reducing symmetric order (``order[new] = old``) of ``pattern``: METIS's multilevel
    nested dissection (Karypis and Kumar 1998; ``METIS_NodeND`` through pymetis) of the graph of
    ``A + A^T`` without its diagonal.

    Nested dissection orders the two halves of a graph before the separator between them, and
    so recursively: for a 3-D lattice of ``N`` nodes the factors hold ``O(N^(4/3))`` entries
    and cost ``O(N^2)`` operations (George 1973; Lipton, Rose and Tarjan 1979), which no
    ordering beats by more than a constant; minimum-degree orderings such as COLAMD fill more
    on such graphs.  METIS seeds its own generator, so the order depends only on the pattern
    (and METIS's version): the generated code, and with it every result, is reproducible.
    """
    import scipy.sparse  # noqa: PLC0415 (as in plan_layout)

    try:
        import pymetis  # noqa: PLC0415 (at generation only, never on a warm start)
    except ImportError:
        raise CompilerError("ordering a sparse matrix needs the package 'pymetis' (METIS), a dependency of "
                            "fmi-adjoint that is not installed; run 'pip install pymetis', or force dense or band "
                            f"storage with {STORAGE_VARIABLE}=band.") from None

    n = len(pattern.colptr) - 1
    colptr = np.asarray(pattern.colptr, dtype=np.int64)
    counts = np.diff(colptr)
    columns = np.repeat(np.arange(n), counts)
    rows = np.asarray(pattern.rowind, dtype=np.int64)
    off = rows != columns
    if not off.any():
        return tuple(range(n))
    graph = scipy.sparse.coo_matrix((np.ones(2 * int(off.sum())),
                                     (np.concatenate([rows[off], columns[off]]),
                                      np.concatenate([columns[off], rows[off]]))), shape=(n, n)).tocsr()
    graph.sum_duplicates()
    graph.sort_indices()
    adjacency = pymetis.CSRAdjacency(graph.indptr.astype(np.int64).tolist(), graph.indices.astype(np.int64).tolist())
    # pymetis annotates a sequence but returns the pair (order, inverse order).
    result: Any = pymetis.nested_dissection(adjacency)
    order = tuple(int(k) for k in (result[0] if isinstance(result, tuple) else result))
    if sorted(order) != list(range(n)):
        raise CompilerError("pymetis returned no permutation of the matrix's rows; reinstall pymetis, or force "
                            f"dense or band storage with {STORAGE_VARIABLE}=band.")
    return order


def block_lower_pattern(pattern: SparsePattern, starts: tuple[int, ...]) -> SparsePattern | None:
    """``pattern`` as a block lower triangular matrix with diagonal blocks starting at ``starts``
    (the last entry ``n``), each block with the solver's ordering of :func:`_ordered_pattern`;
    None if an entry lies above the block diagonal.

    The initialization matrix ``G_z`` of ``z = (q, mu, v, nu, a, lambda)`` has this form: the
    position equations do not depend on v or a, the velocity equations not on a.  Factored
    whole, an LU fills the strictly lower blocks' columns (on the lattice of 1 020 coordinates
    993 894 entries in the factors); by blocks the lower blocks are only multiplied.
    """
    if len(starts) <= 2:
        return None  # one block: the matrix itself
    n = len(pattern.colptr) - 1
    colptr = np.asarray(pattern.colptr, dtype=np.int64)
    rows = np.asarray(pattern.rowind, dtype=np.int64)
    counts = np.diff(colptr)
    columns = np.repeat(np.arange(n), counts)
    bounds = np.asarray(starts, dtype=np.int64)
    row_block = np.searchsorted(bounds, rows, side="right") - 1
    column_block = np.searchsorted(bounds, columns, side="right") - 1
    if np.any(row_block < column_block):
        return None
    blocks = []
    for b in range(len(starts) - 1):
        inside = (row_block == b) & (column_block == b)
        local = list(zip((rows[inside] - starts[b]).tolist(), (columns[inside] - starts[b]).tolist()))
        blocks.append(_ordered_pattern(SparsePattern.of(starts[b + 1] - starts[b], local)))
    return SparsePattern(pattern.colptr, pattern.rowind, starts=tuple(int(s) for s in starts), blocks=tuple(blocks))


def _solver_pattern(n: int, entries: Iterable[tuple[int, int]], starts: tuple[int, ...]) -> SparsePattern:
    """The sparse pattern of ``entries`` plus the diagonal as the solver gets it: by blocks
    (:func:`block_lower_pattern`) where ``starts`` are given and the matrix is block lower
    triangular, else whole, with the ordering of :func:`_ordered_pattern`."""
    csc = SparsePattern.of(n, entries)
    if starts:
        blocked = block_lower_pattern(csc, starts)
        if blocked is not None:
            return blocked
    return _ordered_pattern(csc)


def _ordered_pattern(pattern: SparsePattern) -> SparsePattern:
    """``pattern`` with the solver's ordering: the nested dissection of
    :func:`nested_dissection_order` where its estimated work is below
    ``DISSECTION_WORK_FRACTION`` of COLAMD's, else none (COLAMD in the solver)."""
    colamd = SparsePattern(pattern.colptr, pattern.rowind)
    dissected = SparsePattern(pattern.colptr, pattern.rowind, nested_dissection_order(pattern))
    if sparse_factor_flops(dissected)[0] < DISSECTION_WORK_FRACTION * sparse_factor_flops(colamd)[0]:
        return dissected
    return colamd


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
