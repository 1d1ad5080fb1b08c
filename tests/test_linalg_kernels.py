"""The LU kernels of native/runtime/fa_linalg.c and the layout planner fmi_adjoint.sparsity (issue 11,
part 5: linear algebra that scales).

The C kernels are compiled once into a shared library and called through ctypes; every solution
is compared with numpy.linalg.solve on the original (unpermuted, dense) matrix, so a wrong index,
a lost row exchange or a wrong transposition fails.  Matrices are assembled into the kernels'
storage only through MatrixLayout.index, and every slot the kernels must ignore is set to NaN
first, so reading one of them poisons the result.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from tolerances import EXACT

from fmi_adjoint.errors import ModelError
from fmi_adjoint.sparsity import BAND_MIN_SIZE, MatrixLayout, plan_layout
from fmi_adjoint.toolchain import c_compiler, compile_shared

RUNTIME = Path(__file__).resolve().parents[1] / "fmi_adjoint" / "native" / "runtime"

_DOUBLES = np.ctypeslib.ndpointer(dtype=np.float64, flags="C_CONTIGUOUS")
_INTS = np.ctypeslib.ndpointer(dtype=np.intc, flags="C_CONTIGUOUS")
_INT = ctypes.c_int


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    if c_compiler() is None:
        pytest.skip("no C compiler")
    library = tmp_path_factory.mktemp("linalg") / "libfa_linalg.so"
    compile_shared([RUNTIME / "fa_linalg.c"], library, flags=["-DFA_EXPORT_ALL"], what="fa_linalg.c")
    lib = ctypes.CDLL(str(library))
    lib.fa_dense_factor.argtypes = [_DOUBLES, _INT, _INTS]
    lib.fa_dense_factor.restype = _INT
    for name in ("fa_dense_solve", "fa_dense_solve_transposed"):
        getattr(lib, name).argtypes = [_DOUBLES, _INT, _INTS, _DOUBLES]
        getattr(lib, name).restype = None
    lib.fa_band_factor.argtypes = [_DOUBLES, _INT, _INT, _INT, _INTS]
    lib.fa_band_factor.restype = _INT
    for name in ("fa_band_solve", "fa_band_solve_transposed"):
        getattr(lib, name).argtypes = [_DOUBLES, _INT, _INT, _INT, _INTS, _DOUBLES]
        getattr(lib, name).restype = None
    return lib


class Factored:
    """A matrix assembled through ``layout.index`` and factored by the C kernels."""

    def __init__(self, lib, layout: MatrixLayout, A: np.ndarray):
        self.lib, self.layout = lib, layout
        # Band: the fill columns and the slots outside the matrix must be ignored by the kernels,
        # so they hold NaN; the band itself is zero where A is.  Dense storage has no such slot.
        self.storage = np.full(layout.storage_size, np.nan if layout.banded else 0.0)
        if layout.banded:
            n, order = layout.n, layout.order
            for i in range(n):
                for j in range(max(0, i - layout.kl), min(n, i + layout.ku + 1)):
                    self.storage[layout.index(order[i], order[j])] = 0.0
        for row, col in zip(*np.nonzero(A)):
            self.storage[layout.index(int(row), int(col))] = A[row, col]
        self.piv = np.zeros(layout.n, dtype=np.intc)
        if layout.banded:
            self.status = lib.fa_band_factor(self.storage, layout.n, layout.kl, layout.ku, self.piv)
        else:
            self.status = lib.fa_dense_factor(self.storage, layout.n, self.piv)

    def solve(self, b: np.ndarray, transposed: bool = False) -> np.ndarray:
        """x of A x = b (or A^T x = b), b in the ORIGINAL order; permutes in and out."""
        layout = self.layout
        order = np.asarray(layout.order)
        # P A P^T (P x) = P b: work in the permuted order, as the generated code will.
        work = np.ascontiguousarray(b[order], dtype=np.float64)
        if layout.banded:
            solve = self.lib.fa_band_solve_transposed if transposed else self.lib.fa_band_solve
            solve(self.storage, layout.n, layout.kl, layout.ku, self.piv, work)
        else:
            solve = self.lib.fa_dense_solve_transposed if transposed else self.lib.fa_dense_solve
            solve(self.storage, layout.n, self.piv, work)
        x = np.empty_like(work)
        x[order] = work
        return x


def pattern_of(A: np.ndarray) -> list[tuple[int, int]]:
    return [(int(r), int(c)) for r, c in zip(*np.nonzero(A))]


def assert_solves(lib, layout: MatrixLayout, A: np.ndarray, n_rhs: int = 3, seed: int = 0) -> None:
    """Forward and transposed solves with several right-hand sides against numpy, through one
    factorization (the adjoint sweep and the sensitivities reuse the Newton factorization)."""
    # The comparison is meaningful at EXACT only for a well-conditioned matrix.
    assert np.linalg.cond(A) < 1e3
    factored = Factored(lib, layout, A)
    assert factored.status == 0
    rhs = np.random.default_rng(seed).standard_normal((A.shape[0], n_rhs))
    for transposed in (False, True):
        reference = np.linalg.solve(A.T if transposed else A, rhs)
        for k in range(n_rhs):
            x = factored.solve(rhs[:, k], transposed=transposed)
            error = np.linalg.norm(x - reference[:, k]) / np.linalg.norm(reference[:, k])
            assert error < EXACT, f"transposed={transposed}, rhs {k}: relative error {error:.2e}"


def random_band(rng, n: int, kl: int, ku: int, exchanged: bool = False) -> np.ndarray:
    """A random band matrix, strictly diagonally dominant (well conditioned) - or, if
    ``exchanged``, such a matrix of bandwidths (kl-1, ku-1) with the rows of every pair
    (2k+1, 2k+2) exchanged: the same condition, bandwidths (kl, ku), and partial pivoting must
    exchange them back (bringing fill into the extra kl columns of the band storage)."""
    if exchanged:
        assert kl >= 1 and ku >= 1
        A = random_band(rng, n, kl - 1, ku - 1)
        for i in range(1, n - 1, 2):
            A[[i, i + 1]] = A[[i + 1, i]]
        return A
    A = np.zeros((n, n))
    for i in range(n):
        for j in range(max(0, i - kl), min(n, i + ku + 1)):
            A[i, j] = rng.uniform(-1.0, 1.0)
        A[i, i] = rng.choice([-1.0, 1.0]) * (1.5 + kl + ku)
    return A


def scrambled(rng, A: np.ndarray) -> np.ndarray:
    """P A P^T for a random permutation P: the band is hidden, the matrix is the same one."""
    perm = rng.permutation(A.shape[0])
    return A[np.ix_(perm, perm)]


def chain_kkt(n: int, couplings: list[tuple[int, int]]) -> np.ndarray:
    """[[S, C^T], [C, 0]] of a chain of n masses: S tridiagonal (mass + stiffness-like), one
    constraint row q_a - q_b per coupling of two far-apart coordinates (ring graph)."""
    S = 4.0 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    C = np.zeros((len(couplings), n))
    for row, (a, b) in enumerate(couplings):
        C[row, a], C[row, b] = 1.0, -1.0
    m = len(couplings)
    return np.block([[S, C.T], [C, np.zeros((m, m))]])


# ---------------------------------------------------------------- kernels on their own storage


@pytest.mark.parametrize("n", [1, 2, 5, 40, 101])  # 40, 101: one and several column blocks
def test_dense_kernels_match_numpy(kernels, n):
    rng = np.random.default_rng(n)
    # Rows of a diagonally dominant matrix shuffled: the same condition, but row exchanges needed.
    A = (rng.standard_normal((n, n)) + 3.0 * np.sqrt(n) * np.eye(n))[rng.permutation(n)]
    assert_solves(kernels, MatrixLayout.dense(n), A)


def test_dense_kernels_on_a_kkt_matrix(kernels):
    """The dense path on a sparse KKT matrix: zero multipliers are skipped, the zero diagonal of
    the constraint rows forces exchanges, across several column blocks."""
    A = chain_kkt(68, [(0, 67), (10, 50)])
    assert_solves(kernels, MatrixLayout.dense(70), A, n_rhs=4)
    small = chain_kkt(5, [(0, 4)])
    layout = plan_layout(6, pattern_of(small))
    assert layout == MatrixLayout.dense(6)
    assert_solves(kernels, layout, small)


@pytest.mark.parametrize("kl, ku", [(0, 0), (1, 1), (0, 3), (3, 0), (2, 5), (4, 1), (1, 4)])
def test_band_kernels_match_numpy(kernels, kl, ku):
    """The band kernels in the natural order, with zero diagonal entries (row exchanges that
    bring fill into the extra kl columns) and NaN in every slot they must ignore."""
    n = 30
    A = random_band(np.random.default_rng(10 * kl + ku), n, kl, ku, exchanged=kl >= 1 and ku >= 1)
    identity = tuple(range(n))
    layout = MatrixLayout(n=n, banded=True, kl=kl, ku=ku, order=identity, position=identity)
    assert_solves(kernels, layout, A)


def test_band_factor_uses_row_exchanges(kernels):
    """A zero pivot position must be resolved by an exchange, visible in piv."""
    n, kl, ku = 12, 2, 1
    A = random_band(np.random.default_rng(3), n, kl, ku, exchanged=True)
    identity = tuple(range(n))
    factored = Factored(kernels, MatrixLayout(n=n, banded=True, kl=kl, ku=ku, order=identity,
                                              position=identity), A)
    assert factored.status == 0
    assert any(p != k for k, p in enumerate(factored.piv))
    assert all(k <= p <= min(k + kl, n - 1) for k, p in enumerate(factored.piv))


def test_n_equal_one(kernels):
    for layout in (MatrixLayout.dense(1), MatrixLayout(n=1, banded=True, kl=0, ku=0, order=(0,), position=(0,))):
        factored = Factored(kernels, layout, np.array([[-4.0]]))
        assert factored.status == 0
        assert factored.solve(np.array([2.0]))[0] == -0.5
        assert factored.solve(np.array([2.0]), transposed=True)[0] == -0.5
    assert plan_layout(1, [(0, 0)]) == MatrixLayout.dense(1)


def test_singular_matrices_are_reported(kernels):
    """Exactly singular matrices reach an exactly zero pivot: identical rows stay identical
    under identical updates, and the second one is eliminated to zero."""
    n = 10
    dense = np.random.default_rng(1).standard_normal((n, n))
    dense[3] = dense[7]
    assert Factored(kernels, MatrixLayout.dense(n), dense).status == -1
    band = random_band(np.random.default_rng(2), n, 1, 1)
    band[:, 4] = 0.0  # a zero column: no pivot in the band
    identity = tuple(range(n))
    layout = MatrixLayout(n=n, banded=True, kl=1, ku=1, order=identity, position=identity)
    assert Factored(kernels, layout, band).status == -1
    band = random_band(np.random.default_rng(2), n, 1, 1)
    band[5, 4] = band[6, 7] = 0.0
    band[6, 5:7] = band[5, 5:7]  # rows 5 and 6 equal, both inside the band
    assert Factored(kernels, layout, band).status == -1
    assert Factored(kernels, MatrixLayout.dense(1), np.zeros((1, 1))).status == -1


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_pivots_are_reported(kernels, bad):
    n = 9
    A = random_band(np.random.default_rng(4), n, 1, 1)
    A[5, 4] = bad
    identity = tuple(range(n))
    layout = MatrixLayout(n=n, banded=True, kl=1, ku=1, order=identity, position=identity)
    assert Factored(kernels, layout, A).status == -1
    assert Factored(kernels, MatrixLayout.dense(n), A).status == -1


# ---------------------------------------------------------------- planner + kernels


def test_scrambled_tridiagonal_is_recovered(kernels):
    rng = np.random.default_rng(5)
    A = scrambled(rng, random_band(rng, 50, 1, 1))
    layout = plan_layout(50, pattern_of(A))
    assert layout.banded and (layout.kl, layout.ku) == (1, 1)
    assert_solves(kernels, layout, A)


def test_scrambled_band_with_exchanges(kernels):
    rng = np.random.default_rng(6)
    A = scrambled(rng, random_band(rng, 60, 2, 3, exchanged=True))
    layout = plan_layout(60, pattern_of(A))
    # RCM sees the symmetrized pattern (half-bandwidth 3); it cannot do better than that.
    assert layout.banded and max(layout.kl, layout.ku) <= 3
    assert_solves(kernels, layout, A)


@pytest.mark.parametrize("n, couplings", [
    (20, [(0, 19)]),
    (64, [(0, 63), (10, 40)]),
    (100, [(0, 99), (5, 80), (30, 60)]),
])
def test_kkt_chains_with_far_constraints(kernels, n, couplings):
    """The HHT matrix of a chain with constraint rows between far-apart masses: a ring in the
    graph, a zero (2,2) block.  The planner must fold it into a narrow band (about twice the
    chain's), and the band kernels must pivot around the zero diagonal of the constraint rows."""
    A = chain_kkt(n, couplings)
    rng = np.random.default_rng(n)
    A = scrambled(rng, A)  # the planner must not depend on the given order
    layout = plan_layout(A.shape[0], pattern_of(A))
    assert layout.banded and layout.kl <= 2 * len(couplings) and layout.ku <= 2 * len(couplings)
    assert_solves(kernels, layout, A, n_rhs=5)


def test_band_work_is_smaller(kernels):
    """Work counts, not timings: on a 64-mass chain with one constraint the band factorization
    is about 1 % of the dense one, and a solve about 10 %."""
    A = chain_kkt(64, [(0, 63)])
    layout = plan_layout(65, pattern_of(A))
    dense = MatrixLayout.dense(65)
    assert dense.factor_flops == pytest.approx(2.0 / 3.0 * 65**3)
    assert layout.factor_flops == 2.0 * 65 * layout.kl * (layout.kl + layout.ku + 1)
    assert layout.factor_flops < 0.01 * dense.factor_flops
    assert layout.solve_flops < 0.1 * dense.solve_flops
    assert layout.storage_size == 65 * (2 * layout.kl + layout.ku + 1) < dense.storage_size / 5


def test_dense_random_matrix_gets_dense_layout(kernels):
    n = 30
    A = np.random.default_rng(7).standard_normal((n, n)) + 10.0 * np.eye(n)
    layout = plan_layout(n, pattern_of(A))
    assert layout == MatrixLayout.dense(n)
    assert not layout.banded and layout.storage_size == n * n
    assert_solves(kernels, layout, A)


def test_small_matrices_stay_dense():
    n = BAND_MIN_SIZE - 1
    tridiagonal = [(i, j) for i in range(n) for j in range(n) if abs(i - j) <= 1]
    assert plan_layout(n, tridiagonal) == MatrixLayout.dense(n)
    assert plan_layout(BAND_MIN_SIZE, [(i, j) for i in range(BAND_MIN_SIZE) for j in range(BAND_MIN_SIZE)
                                       if abs(i - j) <= 1]).banded


def test_plan_is_deterministic_and_keeps_a_natural_band():
    A = chain_kkt(40, [(0, 39), (7, 30)])
    pattern = pattern_of(A)
    first = plan_layout(42, pattern)
    shuffled = [pattern[k] for k in np.random.default_rng(8).permutation(len(pattern))]
    assert plan_layout(42, shuffled + pattern[:10]) == first
    # kl = 1, ku = 2 is cheaper than the reversed order's kl = 2, ku = 1 (fill grows with kl).
    band = [(i, j) for i in range(20) for j in range(20) if -1 <= j - i <= 2]
    natural = plan_layout(20, band)
    assert natural.order == tuple(range(20)) and (natural.kl, natural.ku) == (1, 2)
    flipped = plan_layout(20, [(j, i) for i, j in band])
    assert flipped.order == tuple(range(19, -1, -1)) and (flipped.kl, flipped.ku) == (1, 2)


def test_layout_index_formulas():
    layout = plan_layout(12, [(i, j) for i in range(12) for j in range(12) if abs(i - j) <= 1] + [(0, 11)])
    order = np.asarray(layout.order)
    assert sorted(layout.position[o] for o in order) == list(range(12))
    w = 2 * layout.kl + layout.ku + 1
    for row, col in [(0, 0), (0, 11), (5, 6)]:
        i, j = layout.position[row], layout.position[col]
        assert layout.index(row, col) == i * w + j - i + layout.kl
    dense = MatrixLayout.dense(4)
    assert dense.index(2, 3) == 11


@pytest.mark.parametrize("call, words", [
    (lambda: plan_layout(0, []), "n = 0"),
    (lambda: plan_layout(4, [(0, 4)]), "(0, 4)"),
    (lambda: plan_layout(4, [(-1, 0)]), "(-1, 0)"),
    (lambda: plan_layout(4, [(0, 1, 2)]), "entry 0"),
    (lambda: plan_layout(4, [(0.5, 1)]), "entry 0"),
    (lambda: plan_layout(4, 3), "not iterable"),
    (lambda: MatrixLayout.dense(4).index(4, 0), "row = 4"),
    (lambda: plan_layout(10, [(i, i) for i in range(10)] + [(0, 1)]).index(3, 5), "outside the band"),
    (lambda: MatrixLayout(n=3, banded=True, kl=1, ku=1, order=(0, 1, 1), position=(0, 1, 2)), "permutation"),
    (lambda: MatrixLayout(n=3, banded=True, kl=1, ku=1, order=(0, 2, 1), position=(0, 1, 2)), "inverse"),
    (lambda: MatrixLayout(n=3, banded=True, kl=3, ku=1, order=(0, 1, 2), position=(0, 1, 2)), "kl = 3"),
])
def test_bad_input_is_a_model_error(call, words):
    with pytest.raises(ModelError) as info:
        call()
    assert isinstance(info.value, ValueError)
    assert words in str(info.value)
