/* fmi-adjoint linear-algebra kernels: LU with partial pivoting, dense and banded.
 *
 * The HHT Newton matrix [[S, C_q^T], [C_q, 0]] has a sparsity pattern fixed when the code is
 * generated; fmi_adjoint.sparsity.plan_layout orders it (reverse Cuthill-McKee) and chooses dense
 * or band storage.  One factorization serves the Newton solve (A x = b), the forward
 * sensitivities (many right-hand sides, one call each) and the adjoint sweep (A^T x = b).
 *
 * C99, no globals, no allocation, nothing beyond math.h: the caller owns every array.
 * piv[k] is the (0-based, absolute) row exchanged with row k at elimination step k.
 * Partial pivoting makes every nonsingular matrix work, including KKT matrices whose
 * (2,2) block is zero.
 */
#ifndef FA_LINALG_H
#define FA_LINALG_H

#if defined(__GNUC__) && !defined(FA_EXPORT_ALL)
#pragma GCC visibility push(hidden) /* internal: an FMU exports only the FMI functions */
#endif

/* Dense, row-major n x n, factored in place as P A = L U (L unit lower, stored below the
 * diagonal; U on and above it).  Returns 0, or -1 if a pivot is exactly 0 or not finite (a
 * NaN or infinity among the pivot candidates counts as the pivot), leaving A partly
 * overwritten.  Non-finite entries elsewhere propagate into the solution. */
int fa_dense_factor(double *A, int n, int *piv);
/* A x = b with the factors of fa_dense_factor; b (n values) is overwritten by x. */
void fa_dense_solve(const double *LU, int n, const int *piv, double *b);
/* A^T x = b with the same factors; b is overwritten by x. */
void fa_dense_solve_transposed(const double *LU, int n, const int *piv, double *b);

/* Band: n x n with kl sub- and ku super-diagonals, row-major with width w = 2*kl + ku + 1.
 * Row i holds columns i-kl .. i+kl+ku; entry (i, j) is A[i*w + (j - i + kl)].  The extra kl
 * columns on the right receive the fill of partial pivoting (as in LAPACK dgbtrf); they and
 * every slot outside the matrix (j < 0 or j >= n) are ignored on input and may hold anything;
 * the band itself (offsets 0 .. kl+ku inside the matrix) must hold the matrix, zeros included.
 * Factored in place as in dgbtrf: the multipliers of step k stay where column k was, and the
 * solves apply the row exchanges interleaved with them.  Returns 0, or -1 as fa_dense_factor. */
int fa_band_factor(double *A, int n, int kl, int ku, int *piv);
void fa_band_solve(const double *LU, int n, int kl, int ku, const int *piv, double *b);
void fa_band_solve_transposed(const double *LU, int n, int kl, int ku, const int *piv, double *b);

#if defined(__GNUC__) && !defined(FA_EXPORT_ALL)
#pragma GCC visibility pop
#endif

#endif
