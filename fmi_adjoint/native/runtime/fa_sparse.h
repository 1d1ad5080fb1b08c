/* fmi-adjoint sparse direct solver: a C interface to Eigen's SparseLU (fa_sparse.cpp).
 *
 * For the Newton and initialization matrices whose pattern, fixed when the model's code is
 * generated, is neither small nor banded (fmi_adjoint.sparsity.plan_layout, storage SPARSE):
 * the fill-reducing ordering and the symbolic analysis run once per pattern (fa_sparse_new:
 * COLAMD's column ordering, or a symmetric ordering P A P^T given by the generator, a nested
 * dissection for lattice- and mesh-like patterns; fmi_adjoint.sparsity.plan_layout), the numeric factorization with threshold partial pivoting (supernodal
 * LU, Eigen 3.4 SparseLU) once per refresh of the values (fa_sparse_factor), and one
 * factorization serves A x = b and A^T x = b with any number of right-hand sides.
 *
 * The matrix is given in compressed sparse columns (CSC) in the model's order: column j
 * holds the rows rowind[colptr[j] .. colptr[j+1]-1] (strictly increasing), and the values
 * array passed to fa_sparse_factor lists the entries in that same order.
 *
 * C linkage, no globals; no C++ exception crosses this interface: every failure (a bad
 * pattern, memory exhausted, a singular or non-finite matrix) is a return value.
 */
#ifndef FA_SPARSE_H
#define FA_SPARSE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The object is compiled once and linked into every model library (its functions visible,
 * so that tests can call them); an FMU links it from an archive whose symbols the linker
 * hides (-Wl,--exclude-libs,ALL), so that an FMU still exports only the FMI functions. */
#if defined(__GNUC__)
#define FA_SPARSE_API __attribute__((visibility("default")))
#else
#define FA_SPARSE_API
#endif

typedef struct fa_sparse fa_sparse;

/* Analyze the n x n pattern (colptr: n + 1 offsets, rowind: colptr[n] rows).  order: NULL
 * (COLAMD orders the columns), or a permutation (order[new] = old) applied to rows and columns
 * alike before a factorization in that order; values, right-hand sides and solutions stay in the
 * model's order either way.  NULL if the pattern or the order is malformed or memory is
 * exhausted. */
FA_SPARSE_API fa_sparse *fa_sparse_new(int n, const int *colptr, const int *rowind, const int *order);
/* A block lower triangular matrix (the initialization matrix: positions, then velocities, then
 * accelerations): nblocks diagonal blocks starting at starts[0] = 0 < starts[1] < ... <
 * starts[nblocks] = n, no entry above the block diagonal.  Each diagonal block is factored on
 * its own (orders: NULL, or n entries holding each block's order, local to the block, or -1 in
 * its first entry for COLAMD), the solves run by block substitution, and the strictly lower
 * blocks are used as they are: no fill between blocks.  NULL if the pattern, the blocks or an
 * order is malformed, an entry lies above the block diagonal, or memory is exhausted. */
FA_SPARSE_API fa_sparse *fa_sparse_new_blocked(int n, const int *colptr, const int *rowind, int nblocks,
                                               const int *starts, const int *orders);
FA_SPARSE_API void fa_sparse_free(fa_sparse *s);

/* Numeric factorization of the matrix with these values (colptr[n] doubles, CSC order).
 * 0, or -1 if a value is not finite, the matrix is singular (a zero pivot) or memory is
 * exhausted; the handle then holds no factorization (solves refuse until a factor succeeds). */
FA_SPARSE_API int fa_sparse_factor(fa_sparse *s, const double *values);

/* Solve A X = B (transposed != 0: A^T X = B) in place: b holds nrhs columns of n values
 * each (column-major).  0, or -1 without a valid factorization or memory. */
FA_SPARSE_API int fa_sparse_solve(fa_sparse *s, double *b, int nrhs, int transposed);

/* Structural non-zeros of the factors L and U of the last factorization (0 before one; a blocked
 * handle: those of its diagonal blocks plus the strictly lower blocks, used as they are), and
 * the bytes the handle holds: the pattern, the matrix copy, the factors and the permutations. */
FA_SPARSE_API long fa_sparse_factor_nnz(const fa_sparse *s);
FA_SPARSE_API size_t fa_sparse_bytes(const fa_sparse *s);

/* Last failure in words ("" if none). */
FA_SPARSE_API const char *fa_sparse_message(const fa_sparse *s);

#ifdef __cplusplus
}
#endif

#endif
