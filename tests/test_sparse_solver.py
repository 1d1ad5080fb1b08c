"""The sparse direct solver of the C engine (issue 24, part 1): Eigen's SparseLU behind
``native/runtime/fa_sparse.h``, the storage plan of :mod:`fmi_adjoint.sparsity`, and FMUs that
carry the solver.

* forced sparse against forced dense storage on every looped bundled example: forward run,
  adjoint gradient and forward sensitivities agree to round-off;
* a 3D lattice of point masses and springs (not banded) chooses sparse storage by itself, and
  its adjoint gradient equals central differences;
* the C interface: transposed solves, many right-hand sides, a singular matrix refused, the
  factorization's memory;
* an exported FMU of a sparse model runs with fmpy, equals the in-process engine bit for bit
  and needs neither libstdc++ nor Eigen where it runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import os
import shutil
import subprocess
import zipfile

import numpy as np
import pytest
from bundled import looped_examples
from tolerances import ADJOINT_VS_FORWARD, EXACT, GRADIENT_VS_FD, INDEX3_ROUNDOFF

from fmi_adjoint import LeastSquaresCost, NativeEngine, load_model, mbs
from fmi_adjoint.adjoint.discrete import adjoint_seed
import fmi_adjoint.native.solver as solver_module
from fmi_adjoint.compiled import Derivation
from fmi_adjoint.errors import CompilerError, ModelError
from fmi_adjoint.examples import example_names, example_path
from fmi_adjoint.integrate.schemes import scheme_from_settings
from fmi_adjoint.model import Parameter
from fmi_adjoint.native.sources import model_c_sources
from fmi_adjoint.sparsity import (DISSECTION_WORK_FRACTION, SPARSE_MIN_SIZE, STORAGE_VARIABLE, MatrixLayout,
                                  MatrixStorage, SparsePattern, nested_dissection_order, plan_layout,
                                  sparse_factor_flops, storage_override)

_double_p = ctypes.POINTER(ctypes.c_double)
_int_p = ctypes.POINTER(ctypes.c_int)


@contextlib.contextmanager
def forced_storage(storage: MatrixStorage):
    """``$FMI_ADJOINT_MATRIX_STORAGE`` set to ``storage`` while building (part of the cache key)."""
    old = os.environ.get(STORAGE_VARIABLE)
    os.environ[STORAGE_VARIABLE] = storage.name.lower()
    try:
        yield
    finally:
        if old is None:
            del os.environ[STORAGE_VARIABLE]
        else:
            os.environ[STORAGE_VARIABLE] = old


@functools.cache
def engine(name: str, storage: MatrixStorage) -> NativeEngine:
    with forced_storage(storage):
        return NativeEngine.build(load_model(example_path(name)))


def is_sparse(engine: NativeEngine) -> bool:
    """The library links the sparse solver (only models with a sparse matrix do)."""
    return hasattr(engine.library.library, "fa_sparse_factor")


def lattice(nx: int, ny: int, nz: int) -> mbs.MultibodySystem:
    """A 3D grid of point masses joined by springs along the grid lines, one corner anchored to
    the ground: a pattern that no ordering folds into a narrow band (its bandwidth grows as
    ``nx * ny``)."""
    bodies, markers, forces = [], [], []
    law = {"type": "linear_spring_damper", "stiffness": "k", "damping": "d", "free_length": 1.0}
    cells = [(i, j, k) for i in range(nx) for j in range(ny) for k in range(nz)]
    for i, j, k in cells:
        bodies.append(mbs.PointMass(f"m_{i}_{j}_{k}", mass="m", position=(float(i), float(j), float(k))))
        markers.append(mbs.Marker(f"p_{i}_{j}_{k}", f"m_{i}_{j}_{k}"))
    for i, j, k in cells:
        for di, dj, dk in ((1, 0, 0), (0, 1, 0), (0, 0, 1)):
            a, b, c = i + di, j + dj, k + dk
            if a < nx and b < ny and c < nz:
                forces.append(mbs.SpringDamper(f"s{len(forces)}", f"p_{i}_{j}_{k}", f"p_{a}_{b}_{c}", law))
    markers.append(mbs.Marker("g0", "ground", position=(-1.0, 0.0, 0.0)))
    forces.append(mbs.SpringDamper("anchor", "g0", "p_0_0_0", law))
    return mbs.MultibodySystem(
        name=f"lattice_{nx}_{ny}_{nz}",
        parameters=(Parameter("m", 1.0, "kg"), Parameter("k", 100.0, "N/m"), Parameter("d", 0.5, "N*s/m"),
                    Parameter("g", 9.81, "m/s^2")),
        gravity=(0, "-g", 0), bodies=tuple(bodies), markers=tuple(markers), forces=tuple(forces),
        sensors=(mbs.MarkerPosition("y0", f"p_{nx - 1}_{ny - 1}_{nz - 1}"),))


def relative(a: np.ndarray, b: np.ndarray) -> float:
    """Largest difference relative to the largest magnitude of ``b`` (per array)."""
    scale = max(float(np.max(np.abs(b))), 1e-300) if b.size else 1.0
    return float(np.max(np.abs(a - b))) / scale if a.size else 0.0


def cost_of(traj) -> LeastSquaresCost:
    """Least squares of every output against zero at every tenth step."""
    times = traj.t[::10]
    names = tuple(traj.model.output_names)
    return LeastSquaresCost(times, np.zeros((times.size, len(names))), names)


# ---------------------------------------------------------------- sparse = dense on the examples


@pytest.mark.slow
@pytest.mark.parametrize("name", looped_examples())
def test_sparse_equals_dense_on_examples(name):
    """Forced sparse against forced dense storage (both matrices).

    Forward run: INDEX3_ROUNDOFF (two LU factorizations with different pivot orders of the same
    matrices; the round-off is amplified by the 1/(beta h^2) constraint rows in a and lambda).
    Adjoint gradient and sensitivities of the sparse engine on the DENSE engine's trajectory
    (same functions and sweeps, only the LU differs): ADJOINT_VS_FORWARD, the tier of exact
    derivatives that differ by round-off amplified by the 1/(beta h^2) scaling of the index-3
    iteration matrix (measured: 1.7e-10 on slider_crank, below 1e-13 without constraints)."""
    dense, sparse = engine(name, MatrixStorage.DENSE), engine(name, MatrixStorage.SPARSE)
    assert is_sparse(sparse) and not is_sparse(dense)
    steps = 200
    step = dense.compiled.model.simulation.step
    a = dense.simulate(step=step, t_end=steps * step)
    b = sparse.simulate(step=step, t_end=steps * step)
    for field in ("q", "v", "a", "lam"):
        assert relative(getattr(b, field), getattr(a, field)) <= INDEX3_ROUNDOFF, field
    cost = cost_of(a)
    g_dense = dense.adjoint_gradient(a, cost).gradient
    g_sparse = sparse.adjoint_gradient(a, cost).gradient
    assert relative(g_sparse, g_dense) <= ADJOINT_VS_FORWARD
    channels = np.arange(a.model.n_y)
    s_dense = dense.output_sensitivities(a, a.t[::20], channels)
    s_sparse = sparse.output_sensitivities(a, a.t[::20], channels)
    assert relative(s_sparse, s_dense) <= ADJOINT_VS_FORWARD


@pytest.mark.parametrize("name", ["slider_crank", "engine_tvd", "triple_pendulum_bodies"])
def test_a_modified_newton_adjoint_refines_with_kept_factors(name):
    """After modified Newton, the adjoint sweep of a model whose Newton matrix is sparse solves each
    step's transposed system by iterative refinement with the factors of an earlier step
    (fa_driver.c, refined_solve; issue 25: the flexible suspension's gradient 1.5 forward runs,
    2.9 when it factored every step): it factors far fewer matrices than steps, and its gradient
    is still the exact discrete adjoint: equal to the forward sensitivities and to the sweep
    that factors every step (full Newton's flag on the same trajectory; ADJOINT_VS_FORWARD, the
    tier of exact derivatives that differ by round-off; measured 7.2e-11 on slider_crank, whose
    constraint rows the 1/(beta h^2) scaling amplifies, 1.5e-15 on engine_tvd, 2e-16 on
    triple_pendulum_bodies; factorizations 8, 47 and 5 of 300 steps)."""
    sparse = engine(name, MatrixStorage.SPARSE)
    assert is_sparse(sparse)
    steps = 300
    full = dataclasses.replace(scheme_from_settings(sparse.compiled.model.simulation), reuse_jacobian=False)
    modified = dataclasses.replace(full, reuse_jacobian=True)
    step = sparse.compiled.model.simulation.step
    traj = sparse.simulate(step=step, t_end=steps * step, solver=modified)
    cost = cost_of(traj)
    before = sparse.adjoint_factorizations
    refined = sparse.adjoint_gradient(traj, cost).gradient
    factored = sparse.adjoint_factorizations - before
    assert 1 <= factored <= max(2, traj.n_steps // 4), factored
    direct = sparse.adjoint_gradient(dataclasses.replace(traj, scheme=full), cost).gradient
    assert sparse.adjoint_factorizations - before - factored == traj.n_steps
    assert relative(refined, direct) <= ADJOINT_VS_FORWARD
    assert relative(refined, sparse.sensitivity_gradient(traj, cost).gradient) <= ADJOINT_VS_FORWARD


# ---------------------------------------------------------------- the automatic choice


@pytest.mark.slow
def test_bundled_examples_keep_dense_or_band_storage():
    """Every bundled rigid example (the MacPherson strut included: its initialization matrix has
    219 rows, below SPARSE_MIN_SIZE) keeps dense or band storage: they build without C++.  The
    flexible pendulum's initialization matrix (3 (n + m) = 645 rows, the redundant coordinates of
    flexible natural coordinates) is large enough for the sparse LU, which it gets.  So is the
    flexible suspension's Newton matrix (625 rows; SPARSE_DENSE_WORK_FACTOR: measured 3.5x
    faster per step than dense)."""
    for name in example_names():
        storages = planned_storages(load_model(example_path(name)))
        if name == "macpherson_flexible":
            assert storages[0] is MatrixStorage.SPARSE
        if name in SPARSE_EXAMPLES:
            assert MatrixStorage.SPARSE in storages, name
        else:
            assert MatrixStorage.SPARSE not in storages, name



#: Bundled examples large enough for the sparse LU (test_bundled_examples_keep_dense_or_band_storage).
SPARSE_EXAMPLES = {"flexible_pendulum", "macpherson_flexible"}

#: A 4 x 4 x 4 lattice: 64 point masses, 337 coordinates and 145 constraints after lowering
#: (Newton matrix 482 x 482, initialization matrix 1446 x 1446), above SPARSE_MIN_SIZE.
LATTICE = (4, 4, 4)


@functools.cache
def lattice_engine() -> NativeEngine:
    assert storage_override() is None, f"unset {STORAGE_VARIABLE} to test the automatic choice"
    return NativeEngine.build(lattice(*LATTICE).to_model())


def planned_storages(model) -> tuple[MatrixStorage, MatrixStorage]:
    """The storages of the Newton and initialization matrices in the model's generated model.h."""
    header = model_c_sources(Derivation(model))["model.h"].splitlines()

    def kind(name: str) -> MatrixStorage:
        line = next(line for line in header if line.startswith(f"#define FA_{name}_KIND "))
        return MatrixStorage(int(line.split()[-1]))

    return kind("KKT"), kind("INIT")


@pytest.mark.slow
def test_lattice_chooses_sparse_and_gradient_matches_central_differences():
    eng = lattice_engine()
    n, m = eng.compiled.n, eng.compiled.m
    assert n + m >= SPARSE_MIN_SIZE and is_sparse(eng)
    assert planned_storages(lattice(*LATTICE).to_model()) == (MatrixStorage.SPARSE, MatrixStorage.SPARSE)
    # The initialization matrix is block lower triangular (positions, velocities,
    # accelerations) and factored by blocks.
    header = model_c_sources(Derivation(lattice(*LATTICE).to_model()))["model.h"].splitlines()
    assert "#define FA_INIT_BLOCKS 3" in header
    # The Newton matrix is sparse: its factors hold fewer entries than a dense matrix (measured:
    # 27 192 against 232 324), and the memory figure is reported.
    sizes = eng.library.matrix_sizes(step=1e-3, n_steps=2)
    dense_entries = (n + m) * (n + m)
    assert 0 < sizes.factor_entries < dense_entries and sizes.bytes > 0
    step, steps = 1e-3, 100
    traj = eng.simulate(step=step, t_end=steps * step)
    cost = cost_of(traj)
    result = eng.adjoint_gradient(traj, cost)
    p0 = np.array(traj.p, dtype=float)
    for k in range(len(p0)):
        d = 1e-3 * max(abs(p0[k]), 1.0)

        def J(x, k=k):
            p = p0.copy()
            p[k] = x
            return adjoint_seed(eng.simulate(p, step=step, t_end=steps * step), cost)[0]

        # Fourth-order central differences (the GRADIENT_VS_FD tier's rule).
        fd = (-J(p0[k] + 2 * d) + 8 * J(p0[k] + d) - 8 * J(p0[k] - d) + J(p0[k] - 2 * d)) / (12 * d)
        assert abs(result.gradient[k] - fd) <= GRADIENT_VS_FD * max(abs(fd), np.max(np.abs(result.gradient)))


def blocks(edges: list[tuple[int, int]], count: int) -> tuple[int, set[tuple[int, int]]]:
    """The pattern of ``count`` point masses (3 x 3 blocks) coupled along ``edges``."""
    entries = set()
    for a, b in [(k, k) for k in range(count)] + edges:
        for x in range(3):
            for y in range(3):
                entries |= {(3 * a + x, 3 * b + y), (3 * b + y, 3 * a + x)}
    return 3 * count, entries


def test_plan_chooses_sparse_for_a_tree_and_keeps_band_and_dense_where_faster():
    """The rule of plan_layout on patterns alone (calibration in sparsity.SPARSE_WORK_FACTOR):
    a random tree of 400 masses (no fill, but a wide band: kl = 161) is stored sparse; a
    chain and a 5 x 5 x 5 grid of masses, whose band LU was measured faster than the sparse
    LU (0.44 ms against 1.13 ms), stay banded; a small matrix stays dense."""
    rng = np.random.default_rng(0)
    tree = blocks([(k, int(rng.integers(0, k))) for k in range(1, 400)], 400)
    assert plan_layout(*tree).storage is MatrixStorage.SPARSE
    chain = blocks([(k, k + 1) for k in range(199)], 200)
    assert plan_layout(*chain).storage is MatrixStorage.BAND
    index = {(i, j, k): (i * 5 + j) * 5 + k for i in range(5) for j in range(5) for k in range(5)}
    grid = blocks([(a, index[(i + di, j + dj, k + dk)]) for (i, j, k), a in index.items()
                   for di, dj, dk in ((1, 0, 0), (0, 1, 0), (0, 0, 1)) if (i + di, j + dj, k + dk) in index], 125)
    assert plan_layout(*grid).storage is MatrixStorage.BAND
    small = blocks([(k, int(rng.integers(0, k))) for k in range(1, 60)], 60)
    assert small[0] < SPARSE_MIN_SIZE and plan_layout(*small).storage is not MatrixStorage.SPARSE


def test_sparse_layout_indexes_the_compressed_columns():
    layout = plan_layout(4, [(0, 1), (2, 0), (3, 3)], MatrixStorage.SPARSE)
    assert layout.storage is MatrixStorage.SPARSE and not layout.banded
    assert layout.sparse == SparsePattern((0, 2, 4, 5, 6), (0, 2, 0, 1, 2, 3))
    assert layout.storage_size == 6
    assert [layout.index(r, c) for r, c in [(0, 0), (2, 0), (0, 1), (1, 1), (2, 2), (3, 3)]] == list(range(6))
    with pytest.raises(ModelError, match="not in the sparse pattern"):
        layout.index(1, 0)
    assert plan_layout(4, [(0, 1)], MatrixStorage.DENSE) == MatrixLayout.dense(4)


def test_storage_override_reads_the_environment(monkeypatch):
    monkeypatch.setenv(STORAGE_VARIABLE, "Sparse")
    assert storage_override() is MatrixStorage.SPARSE
    monkeypatch.setenv(STORAGE_VARIABLE, "auto")
    assert storage_override() is None
    monkeypatch.setenv(STORAGE_VARIABLE, "cholesky")
    with pytest.raises(ModelError, match="dense, band or sparse"):
        storage_override()


def test_without_a_cxx_compiler_small_models_build_and_sparse_ones_name_the_fix(monkeypatch):
    """Only a sparse model needs C++: with no C++ compiler a dense model still builds, a
    sparse one fails with one CompilerError that names the fix."""
    monkeypatch.setattr(solver_module, "cxx_compiler", lambda: None)
    monkeypatch.delenv(STORAGE_VARIABLE, raising=False)
    assert not is_sparse(NativeEngine.build(load_model(example_path("sdof"))))
    monkeypatch.setenv(STORAGE_VARIABLE, "sparse")
    with pytest.raises(CompilerError, match=r"needs a C\+\+ compiler.*install g\+\+ or set CXX"):
        NativeEngine.build(load_model(example_path("sdof")))


# ---------------------------------------------------------------- the C interface


class Sparse:
    """fa_sparse.h through ctypes (the functions are visible in a library that links them)."""

    def __init__(self, dll: ctypes.CDLL, A: np.ndarray, order: tuple[int, ...] = ()):
        self.dll = dll
        dll.fa_sparse_new.restype = ctypes.c_void_p
        dll.fa_sparse_bytes.restype = ctypes.c_size_t
        dll.fa_sparse_factor_nnz.restype = ctypes.c_long
        dll.fa_sparse_message.restype = ctypes.c_char_p
        for name in ("fa_sparse_free", "fa_sparse_factor", "fa_sparse_solve", "fa_sparse_bytes",
                     "fa_sparse_factor_nnz", "fa_sparse_message"):
            getattr(dll, name).argtypes = [ctypes.c_void_p] + {
                "fa_sparse_factor": [_double_p], "fa_sparse_solve": [_double_p, ctypes.c_int, ctypes.c_int]
            }.get(name, [])
        n = A.shape[0]
        self.pattern = SparsePattern.of(n, [(int(r), int(c)) for r, c in zip(*np.nonzero(A))])
        colptr = np.array(self.pattern.colptr, dtype=np.int32)
        rowind = np.array(self.pattern.rowind, dtype=np.int32)
        self.order = np.array(order, dtype=np.int32)
        self.handle = dll.fa_sparse_new(ctypes.c_int(n), colptr.ctypes.data_as(_int_p), rowind.ctypes.data_as(_int_p),
                                        self.order.ctypes.data_as(_int_p) if order else None)
        assert self.handle
        columns = np.repeat(np.arange(n), np.diff(colptr))
        self.values = np.ascontiguousarray(A[rowind, columns])

    def factor(self) -> int:
        return self.dll.fa_sparse_factor(self.handle, self.values.ctypes.data_as(_double_p))

    def solve(self, B: np.ndarray, transposed: bool) -> np.ndarray:
        X = np.asfortranarray(B, dtype=float).copy(order="F")
        nrhs = 1 if X.ndim == 1 else X.shape[1]
        assert self.dll.fa_sparse_solve(self.handle, X.ctypes.data_as(_double_p), nrhs, int(transposed)) == 0
        return X

    def close(self) -> None:
        self.dll.fa_sparse_free(self.handle)


def kkt_like(n: int, m: int, seed: int) -> np.ndarray:
    """A random sparse saddle-point matrix [[S, C^T], [C, 0]] (zero diagonal block: pivoting
    is needed), non-symmetric S."""
    rng = np.random.default_rng(seed)
    S = np.diag(rng.uniform(2.0, 3.0, n))
    for _ in range(3 * n):
        i, j = rng.integers(0, n, 2)
        S[i, j] += rng.standard_normal()
    C = np.zeros((m, n))
    for r in range(m):
        C[r, rng.choice(n, 2, replace=False)] = rng.standard_normal(2)
    return np.block([[S, C.T], [C, np.zeros((m, m))]])


def test_sparse_solves_transposed_and_many_right_hand_sides():
    eng = engine("sdof", MatrixStorage.SPARSE)
    A = kkt_like(60, 12, seed=1)
    solver = Sparse(eng.library.library, A)
    try:
        assert solver.dll.fa_sparse_factor_nnz(solver.handle) == 0
        assert solver.factor() == 0
        B = np.random.default_rng(2).standard_normal((A.shape[0], 5))
        X = solver.solve(B, transposed=False)
        Y = solver.solve(B, transposed=True)
        assert relative(A @ X, B) <= EXACT and relative(A.T @ Y, B) <= EXACT
        # Many right-hand sides at once = one at a time (the supernodal solve blocks the
        # columns, so the sums may be ordered differently: round-off, EXACT).
        assert relative(solver.solve(B[:, 3], transposed=True), Y[:, 3]) <= EXACT
        # The factorization's memory: non-zeros of L and U at least those of A; bytes held.
        assert solver.dll.fa_sparse_factor_nnz(solver.handle) >= solver.pattern.nnz
        assert solver.dll.fa_sparse_bytes(solver.handle) > 8 * solver.pattern.nnz
    finally:
        solver.close()


def grid_matrix(side: int, seed: int) -> np.ndarray:
    """A 3-D grid of ``side^3`` nodes with three coordinates each, coupled to their six
    neighbours (the lattice family's Newton matrix without constraints): diagonally dominant,
    non-symmetric values."""
    rng = np.random.default_rng(seed)
    index = {(i, j, k): (i * side + j) * side + k for i in range(side) for j in range(side) for k in range(side)}
    n = 3 * len(index)
    A = np.diag(rng.uniform(8.0, 9.0, n))
    for (i, j, k), a in index.items():
        for di, dj, dk in ((1, 0, 0), (0, 1, 0), (0, 0, 1)):
            b = index.get((i + di, j + dj, k + dk))
            if b is not None:
                A[3 * a:3 * a + 3, 3 * b:3 * b + 3] = rng.uniform(-0.3, 0.3, (3, 3))
                A[3 * b:3 * b + 3, 3 * a:3 * a + 3] = rng.uniform(-0.3, 0.3, (3, 3))
    return A


def test_a_nested_dissection_order_solves_alike_and_fills_less_than_colamd():
    """fa_sparse_new with the generator's symmetric order (P A P^T factored in that order):
    the same solutions, plain and transposed, as COLAMD's handle to round-off, and on a 3-D
    grid fewer entries in the factors; plan_layout gives a grid that order and a tree none."""
    eng = engine("sdof", MatrixStorage.SPARSE)
    A = grid_matrix(7, seed=4)
    order = nested_dissection_order(SparsePattern.of(A.shape[0], list(zip(*np.nonzero(A)))))
    assert sorted(order) == list(range(A.shape[0])) and order != tuple(range(A.shape[0]))
    ordered, colamd = Sparse(eng.library.library, A, order), Sparse(eng.library.library, A)
    try:
        assert ordered.factor() == 0 and colamd.factor() == 0
        B = np.random.default_rng(5).standard_normal((A.shape[0], 3))
        for transposed in (False, True):
            X = ordered.solve(B, transposed)
            assert relative((A.T if transposed else A) @ X, B) <= EXACT
            assert relative(X, colamd.solve(B, transposed)) <= EXACT
        assert ordered.dll.fa_sparse_factor_nnz(ordered.handle) < colamd.dll.fa_sparse_factor_nnz(colamd.handle)
    finally:
        ordered.close()
        colamd.close()
    # A repeated entry in the order (not a permutation) is refused.
    pattern = SparsePattern.of(3, [(0, 1), (1, 2)])
    colptr, rowind = (np.array(x, dtype=np.int32) for x in (pattern.colptr, pattern.rowind))
    twice = np.array([0, 1, 1], dtype=np.int32)
    assert not eng.library.library.fa_sparse_new(3, colptr.ctypes.data_as(_int_p), rowind.ctypes.data_as(_int_p),
                                                 twice.ctypes.data_as(_int_p))
    # The plan follows DISSECTION_WORK_FRACTION on the estimates (this grid's ratio is 0.30, at
    # the threshold: which side it falls on is not asserted, only that the rule decides), and the
    # order depends on the pattern only.  A tree (ratio 0.97) is left to COLAMD.
    pattern = SparsePattern.of(A.shape[0], list(zip(*np.nonzero(A))))
    ratio = sparse_factor_flops(SparsePattern(pattern.colptr, pattern.rowind, order))[0] / \
        sparse_factor_flops(pattern)[0]
    grid = plan_layout(A.shape[0], list(zip(*np.nonzero(A))), MatrixStorage.SPARSE)
    assert grid.sparse is not None
    assert grid.sparse.order == (order if ratio < DISSECTION_WORK_FRACTION else ())
    rng = np.random.default_rng(0)
    tree = plan_layout(*blocks([(k, int(rng.integers(0, k))) for k in range(1, 400)], 400))
    assert tree.sparse is not None and tree.sparse.order == ()


def test_a_block_lower_triangular_matrix_is_factored_by_blocks():
    """fa_sparse_new_blocked (the initialization matrix: positions, velocities, accelerations):
    solves plain and transposed to round-off, the factors hold the diagonal blocks' fill only
    (fewer entries than the whole matrix's LU), a singular block is named, an entry above the
    block diagonal is refused; plan_layout finds the blocks of such a pattern."""
    eng = engine("sdof", MatrixStorage.SPARSE)
    dll = eng.library.library
    rng = np.random.default_rng(6)
    sizes = (72, 72, 72)
    starts = np.cumsum((0,) + sizes).astype(np.int32)
    n = int(starts[-1])
    A = np.zeros((n, n))
    for b, size in enumerate(sizes):
        block = slice(starts[b], starts[b + 1])
        A[block, block] = kkt_like(size - 12, 12, seed=10 + b)
        for c in range(b):
            # Lower couplings: a few dense rows, as the velocity and acceleration equations
            # depend on all positions; small enough that the solution stays of order one (the
            # EXACT tier bounds a residual relative to |B|, which grows with |X|).
            A[block, starts[c]:starts[c + 1]][rng.integers(0, size, 20)] = 0.1 * rng.standard_normal((20, sizes[c]))
    pattern = SparsePattern.of(n, [(int(r), int(c)) for r, c in zip(*np.nonzero(A))])
    colptr, rowind = (np.array(x, dtype=np.int32) for x in (pattern.colptr, pattern.rowind))
    dll.fa_sparse_new_blocked.restype = ctypes.c_void_p
    handle = dll.fa_sparse_new_blocked(n, colptr.ctypes.data_as(_int_p), rowind.ctypes.data_as(_int_p), len(sizes),
                                       starts.ctypes.data_as(_int_p), None)
    assert handle
    whole = Sparse(dll, A)
    try:
        blocked = Sparse.__new__(Sparse)
        blocked.dll, blocked.pattern, blocked.handle, blocked.values = dll, pattern, handle, whole.values
        assert blocked.factor() == 0 and whole.factor() == 0
        B = rng.standard_normal((n, 4))
        for transposed in (False, True):
            X = blocked.solve(B, transposed)
            assert relative((A.T if transposed else A) @ X, B) <= EXACT
        assert dll.fa_sparse_factor_nnz(blocked.handle) < dll.fa_sparse_factor_nnz(whole.handle)
        singular = whole.values.copy()
        column = starts[2] + 5  # a zero column in the last block: that block is singular
        singular[pattern.colptr[column]:pattern.colptr[column + 1]] = 0.0
        assert dll.fa_sparse_factor(blocked.handle, singular.ctypes.data_as(_double_p)) == -1
        assert b"singular" in dll.fa_sparse_message(blocked.handle)
    finally:
        dll.fa_sparse_free(handle)
        whole.close()
    above = SparsePattern.of(n, [(0, n - 1)])  # an entry above the block diagonal
    cp, ri = (np.array(x, dtype=np.int32) for x in (above.colptr, above.rowind))
    assert not dll.fa_sparse_new_blocked(n, cp.ctypes.data_as(_int_p), ri.ctypes.data_as(_int_p), len(sizes),
                                         starts.ctypes.data_as(_int_p), None)
    layout = plan_layout(n, list(zip(*np.nonzero(A))), MatrixStorage.SPARSE, starts=tuple(int(s) for s in starts))
    assert layout.sparse is not None and layout.sparse.starts == tuple(int(s) for s in starts)
    assert plan_layout(n, [(0, n - 1)], MatrixStorage.SPARSE, starts=tuple(int(s) for s in starts)).sparse.blocks == ()


def test_singular_and_non_finite_matrices_are_refused():
    eng = engine("sdof", MatrixStorage.SPARSE)
    A = kkt_like(30, 5, seed=3)
    A[:, 7] = 0.0  # the pattern keeps the diagonal (a zero value): a zero column, singular
    solver = Sparse(eng.library.library, A)
    try:
        assert solver.factor() == -1
        assert b"singular" in solver.dll.fa_sparse_message(solver.handle)
        x = np.ones(A.shape[0])
        assert solver.dll.fa_sparse_solve(solver.handle, x.ctypes.data_as(_double_p), 1, 0) == -1
        solver.values[0] = np.nan
        assert solver.factor() == -1
        assert b"NaN" in solver.dll.fa_sparse_message(solver.handle)
    finally:
        solver.close()
    bad = np.array([0, 2, 1], dtype=np.int32)  # colptr decreasing
    rows = np.array([0, 1], dtype=np.int32)
    assert not eng.library.library.fa_sparse_new(2, bad.ctypes.data_as(_int_p), rows.ctypes.data_as(_int_p), None)


def test_state_restore_refactors_the_sparse_matrix_bit_for_bit():
    """Modified Newton keeps the Newton matrix over steps; a checkpointed run (states with the
    assembled sparse matrix, refactored on restore) recomputes every segment bit for bit."""
    eng = engine("slider_crank", MatrixStorage.SPARSE)
    lib = eng.library
    scheme = dataclasses.replace(_default_scheme(eng), reuse_jacobian=True)
    grid = np.arange(0, 61) * eng.compiled.model.simulation.step
    p = np.array([par.value for par in eng.compiled.model.all_parameters])
    full = lib.run(grid, p, scheme)
    _, states, _ = lib.run_checkpointed(grid, p, scheme, every=20)
    for k, i0 in enumerate(range(0, 60, 20)):
        q, v, a, lam = lib.recompute(grid, i0, i0 + 20, states[k])
        assert np.array_equal(q, full.q[i0:i0 + 21]) and np.array_equal(a, full.a[i0:i0 + 21])
        assert np.array_equal(lam, full.lam[i0:i0 + 21])


# ---------------------------------------------------------------- FMU of a sparse model


@pytest.mark.slow
def test_fmu_of_a_sparse_model_runs_standalone(tmp_path):
    from fmi_adjoint.export.fmu_export import export_fmu

    with forced_storage(MatrixStorage.SPARSE):
        fmu = export_fmu(example_path("triple_pendulum"), tmp_path / "sparse.fmu", fmi_version=2)
    with zipfile.ZipFile(fmu) as archive:
        names = archive.namelist()
    assert "sources/fa_sparse.cpp" in names and "sources/Eigen/SparseLU" in names
    assert "sources/LICENSE-MPL-2.0.txt" in names
    # The export records the forced storage, and the trust rebuild on import uses it whatever
    # the importer's environment says (here: unset, where the automatic choice is dense).
    from fmi_adjoint.fmu.archive import open_fmu

    with open_fmu(fmu) as opened:
        settings = opened.native
        assert settings is not None and settings["matrix_storage"] == "sparse"
    _assert_fmu_equals_engine(fmu, engine("triple_pendulum", MatrixStorage.SPARSE), 100)
    binary = _extracted_binary(fmu, tmp_path / "x")
    _assert_standalone(binary)
    symbols = subprocess.run(["readelf", "--dyn-syms", "-W", str(binary)], capture_output=True, text=True).stdout
    assert "fa_sparse" not in symbols and "Eigen" not in symbols


def _assert_fmu_equals_engine(fmu, eng: NativeEngine, steps: int) -> None:
    """``steps`` steps of the FMU in fmpy equal the in-process C engine's, bit for bit."""
    import fmpy

    step = eng.compiled.model.simulation.step
    result = fmpy.simulate_fmu(str(fmu), stop_time=steps * step, output_interval=step)
    _, y = eng.library.simulate(t_end=steps * step, step=step, solver=_default_scheme(eng))
    for k, name in enumerate(eng.compiled.output_names):
        assert np.array_equal(result[name], y[:, k]), name


def _extracted_binary(fmu, folder):
    """The FMU's binary, extracted into ``folder`` (skips the test without readelf)."""
    if shutil.which("readelf") is None:
        pytest.skip("readelf is not installed")
    with zipfile.ZipFile(fmu) as archive:
        name = next(n for n in archive.namelist() if n.startswith("binaries/"))
        archive.extract(name, folder)
    return folder / name


def _assert_standalone(binary) -> None:
    """The binary's dynamic section needs neither libstdc++ nor Eigen (it lists some library:
    an empty listing would pass vacuously)."""
    dynamic = subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True).stdout
    needed = [line for line in dynamic.splitlines() if "(NEEDED)" in line]
    assert needed and not any("stdc++" in line or "eigen" in line.lower() for line in needed), needed


def _default_scheme(eng):
    from fmi_adjoint.integrate.schemes import scheme_from_settings

    return scheme_from_settings(eng.compiled.model.simulation)


@pytest.mark.slow
@pytest.mark.parametrize("version", [2, 3])
def test_fmu_of_a_sparse_model_rebuilds_from_its_sources(tmp_path, version):
    """sources/ carries everything to rebuild (the solver, the Eigen headers it includes, the
    C++ source listed in the model or build description): fmpy's CMake build gives the same
    results bit for bit (no reassociation without fast-math, whatever the optimization level)."""
    if shutil.which("cmake") is None:
        pytest.skip("cmake is missing (fmpy.build.build_platform_binary needs it)")
    import fmpy
    from fmpy.build import build_platform_binary
    from fmpy.util import create_zip_archive

    from fmi_adjoint.export.fmu_export import export_fmu

    with forced_storage(MatrixStorage.SPARSE):
        fmu = export_fmu(example_path("slider_crank"), tmp_path / "sparse.fmu", fmi_version=version)
    folder = tmp_path / "unzipped"
    with zipfile.ZipFile(fmu) as archive:
        archive.extractall(folder)
    binary = next((folder / "binaries").rglob("*.so"))
    shutil.rmtree(folder / "binaries")
    (tmp_path / "build").mkdir()
    build_platform_binary(folder, tmp_path / "build")
    assert binary.exists()  # really rebuilt: the exported binary was deleted
    rebuilt = tmp_path / "rebuilt.fmu"
    create_zip_archive(rebuilt, folder)
    step = load_model(example_path("slider_crank")).simulation.step
    a = fmpy.simulate_fmu(str(fmu), stop_time=100 * step, output_interval=step)
    b = fmpy.simulate_fmu(str(rebuilt), stop_time=100 * step, output_interval=step)
    for name in a.dtype.names:
        assert np.array_equal(a[name], b[name]), name


@pytest.mark.slow
def test_fmu_of_a_1000_coordinate_lattice_is_standalone_and_bit_identical(tmp_path):
    """Issue 24: an exported FMU of a model of about 1 000 coordinates (the lattice family,
    sparse by the automatic choice) needs neither Eigen nor libstdc++ where it runs (its
    dynamic section names neither) and equals the in-process engine bit for bit."""

    from fmi_adjoint.examples.families import family_toml
    from fmi_adjoint.export.fmu_export import export_fmu

    assert storage_override() is None, f"unset {STORAGE_VARIABLE} to test the automatic choice"
    source = tmp_path / "lattice.toml"
    source.write_text(family_toml("lattice", 1000, 0), encoding="utf-8")
    fmu = export_fmu(source, tmp_path / "lattice.fmu", fmi_version=2)
    eng = NativeEngine.build(load_model(source))
    assert 900 <= eng.compiled.n <= 1100 and is_sparse(eng)
    _assert_fmu_equals_engine(fmu, eng, 5)
    _assert_standalone(_extracted_binary(fmu, tmp_path / "x"))


def test_a_missing_pymetis_is_named_with_the_fix(monkeypatch):
    """Ordering a sparse matrix without pymetis: one CompilerError naming the package and the
    fix (not an internal error)."""
    import sys

    monkeypatch.setitem(sys.modules, "pymetis", None)  # import pymetis raises ImportError
    with pytest.raises(CompilerError, match=r"pip install pymetis.*FMI_ADJOINT_MATRIX_STORAGE=band"):
        nested_dissection_order(SparsePattern.of(4, [(0, 1), (1, 2), (2, 3)]))
