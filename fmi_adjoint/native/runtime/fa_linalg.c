/* fmi-adjoint linear-algebra kernels, see fa_linalg.h.
 *
 * Right-looking Gaussian elimination with partial pivoting (Golub & Van Loan, Alg. 3.4.1).
 * Every inner loop runs along one row, i.e. over contiguous memory in the row-major storage;
 * the transposed solves are written as row-oriented scatters for the same reason.
 */
#include "fa_linalg.h"

#include <math.h>
#include <stddef.h>

/* Entry (i, j) of the row-major band storage of width w (see fa_linalg.h). */
#define BAND(A, w, kl, i, j) ((A)[(size_t)(i) * (size_t)(w) + (size_t)((j) - (i) + (kl))])

/* Offset (0 .. count-1) of the entry of largest magnitude among x[0], x[stride], ...;
 * a NaN or infinite entry is returned at once, so that the caller rejects the pivot. */
static int pivot_search(const double *x, int count, ptrdiff_t stride, double *magnitude)
{
    int best = 0;
    double big = -1.0;
    for (int r = 0; r < count; ++r) {
        const double m = fabs(x[r * stride]);
        if (!isfinite(m)) {
            *magnitude = m;
            return r;
        }
        if (m > big) {
            big = m;
            best = r;
        }
    }
    *magnitude = big;
    return best;
}

static int pivot_rejected(double magnitude) { return !(magnitude > 0.0) || !isfinite(magnitude); }

static void swap_values(double *x, double *y, int count)
{
    for (int j = 0; j < count; ++j) {
        const double t = x[j];
        x[j] = y[j];
        y[j] = t;
    }
}

/* Columns per block of the dense factorization.  The updates of the columns right of a block
 * are delayed and applied row by row (a row of 2000 doubles stays in L1 while it receives the
 * block's FA_DENSE_BLOCK pivot rows from L2, four at a time), instead of streaming the whole
 * trailing matrix through memory once per column: about 3x faster at n = 2000 (gcc -O2). */
#define FA_DENSE_BLOCK 32

int fa_dense_factor(double *A, int n, int *piv)
{
    for (int k0 = 0; k0 < n; k0 += FA_DENSE_BLOCK) {
        const int k1 = k0 + FA_DENSE_BLOCK < n ? k0 + FA_DENSE_BLOCK : n; /* block: columns k0 .. k1-1 */
        for (int k = k0; k < k1; ++k) { /* the panel: columns k0 .. k1-1, rows k0 .. n-1 */
            double *rk = A + (size_t)k * (size_t)n;
            double big;
            const int p = k + pivot_search(rk + k, n - k, n, &big);
            if (pivot_rejected(big)) return -1;
            piv[k] = p;
            /* Whole rows, multipliers included: the stored L is the one of P A = L U, so the
             * solves apply all exchanges first (forward) or last (transposed).  Both rows lack
             * the same delayed updates right of the block, so exchanging them is consistent. */
            if (p != k) swap_values(rk, A + (size_t)p * (size_t)n, n);
            for (int i = k + 1; i < n; ++i) {
                double *ri = A + (size_t)i * (size_t)n;
                const double f = ri[k] / rk[k];
                ri[k] = f;
                if (f != 0.0) /* structural zeros of sparse matrices on the dense path cost nothing */
                    for (int j = k + 1; j < k1; ++j) ri[j] -= f * rk[j];
            }
        }
        /* Delayed updates right of the block, rows in increasing order: the pivot rows k < i
         * that row i needs are final when it is reached (Crout order within the block). */
        for (int i = k0 + 1; i < n; ++i) {
            double *ri = A + (size_t)i * (size_t)n;
            const int kend = i < k1 ? i : k1;
            int k = k0;
            for (; k + 4 <= kend; k += 4) { /* four pivot rows per pass: row i is loaded once */
                const double f0 = ri[k], f1 = ri[k + 1], f2 = ri[k + 2], f3 = ri[k + 3];
                if (f0 == 0.0 && f1 == 0.0 && f2 == 0.0 && f3 == 0.0) continue;
                const double *r0 = A + (size_t)k * (size_t)n, *r1 = r0 + n, *r2 = r1 + n, *r3 = r2 + n;
                for (int j = k1; j < n; ++j) ri[j] -= f0 * r0[j] + f1 * r1[j] + f2 * r2[j] + f3 * r3[j];
            }
            for (; k < kend; ++k) {
                const double f = ri[k];
                const double *rk = A + (size_t)k * (size_t)n;
                if (f != 0.0)
                    for (int j = k1; j < n; ++j) ri[j] -= f * rk[j];
            }
        }
    }
    return 0;
}

void fa_dense_solve(const double *LU, int n, const int *piv, double *b)
{
    for (int k = 0; k < n; ++k)
        if (piv[k] != k) swap_values(b + k, b + piv[k], 1);
    for (int i = 1; i < n; ++i) { /* L y = P b, unit diagonal */
        const double *ri = LU + (size_t)i * (size_t)n;
        double s = b[i];
        for (int j = 0; j < i; ++j) s -= ri[j] * b[j];
        b[i] = s;
    }
    for (int i = n - 1; i >= 0; --i) { /* U x = y */
        const double *ri = LU + (size_t)i * (size_t)n;
        double s = b[i];
        for (int j = i + 1; j < n; ++j) s -= ri[j] * b[j];
        b[i] = s / ri[i];
    }
}

void fa_dense_solve_transposed(const double *LU, int n, const int *piv, double *b)
{
    /* A^T = U^T L^T P: solve U^T y = b, then L^T w = y, then x = P^T w. */
    for (int i = 0; i < n; ++i) { /* U^T is lower: row i of U scatters y_i forward */
        const double *ri = LU + (size_t)i * (size_t)n;
        const double y = b[i] / ri[i];
        b[i] = y;
        if (y != 0.0)
            for (int j = i + 1; j < n; ++j) b[j] -= ri[j] * y;
    }
    for (int i = n - 1; i > 0; --i) { /* L^T is unit upper: row i of L scatters w_i backward */
        const double *ri = LU + (size_t)i * (size_t)n;
        const double w = b[i];
        if (w != 0.0)
            for (int j = 0; j < i; ++j) b[j] -= ri[j] * w;
    }
    for (int k = n - 1; k >= 0; --k)
        if (piv[k] != k) swap_values(b + k, b + piv[k], 1);
}

int fa_band_factor(double *A, int n, int kl, int ku, int *piv)
{
    const int w = 2 * kl + ku + 1;
    /* The fill columns (offsets kl+ku+1 .. w-1) may hold anything on input. */
    for (int i = 0; i < n; ++i)
        for (int d = kl + ku + 1; d < w && i + d - kl < n; ++d) A[(size_t)i * (size_t)w + (size_t)d] = 0.0;
    /* ju: last column that can be nonzero in the pivot row, grown as exchanges bring fill
     * (dgbtf2); without exchanges the updates stay within the ku super-diagonals. */
    int ju = 0;
    for (int k = 0; k < n; ++k) {
        const int last = k + kl < n - 1 ? k + kl : n - 1; /* last row with an entry in column k */
        double big;
        const int p = k + pivot_search(&BAND(A, w, kl, k, k), last - k + 1, w - 1, &big);
        if (pivot_rejected(big)) return -1;
        piv[k] = p;
        const int reach = p + ku < n - 1 ? p + ku : n - 1;
        if (reach > ju) ju = reach;
        double *rk = &BAND(A, w, kl, k, k); /* rk[j - k] = (k, j) */
        /* Only the active columns k .. ju move; the multipliers of earlier steps stay put. */
        if (p != k) swap_values(rk, &BAND(A, w, kl, p, k), ju - k + 1);
        for (int i = k + 1; i <= last; ++i) {
            double *ri = &BAND(A, w, kl, i, k); /* ri[j - k] = (i, j); row i reaches i+kl+ku >= ju */
            const double f = ri[0] / rk[0];
            ri[0] = f;
            if (f != 0.0)
                for (int j = 1; j <= ju - k; ++j) ri[j] -= f * rk[j];
        }
    }
    return 0;
}

void fa_band_solve(const double *LU, int n, int kl, int ku, const int *piv, double *b)
{
    const int w = 2 * kl + ku + 1;
    for (int k = 0; k < n; ++k) { /* L: exchange, then eliminate, step by step as factored */
        if (piv[k] != k) swap_values(b + k, b + piv[k], 1);
        const double bk = b[k];
        const int last = k + kl < n - 1 ? k + kl : n - 1;
        if (bk != 0.0)
            for (int i = k + 1; i <= last; ++i) b[i] -= BAND(LU, w, kl, i, k) * bk;
    }
    for (int i = n - 1; i >= 0; --i) { /* U x = y; U has kl + ku super-diagonals */
        const double *ri = &BAND(LU, w, kl, i, i);
        const int m = kl + ku < n - 1 - i ? kl + ku : n - 1 - i;
        double s = b[i];
        for (int d = 1; d <= m; ++d) s -= ri[d] * b[i + d];
        b[i] = s / ri[0];
    }
}

void fa_band_solve_transposed(const double *LU, int n, int kl, int ku, const int *piv, double *b)
{
    /* M A = U with M = L_{n-1}^{-1} P_{n-1} ... L_0^{-1} P_0, so A^T x = b is U^T y = b and
     * x = M^T y = P_0 L_0^{-T} ... P_{n-1} L_{n-1}^{-T} y (P_k symmetric exchanges). */
    const int w = 2 * kl + ku + 1;
    for (int i = 0; i < n; ++i) { /* U^T y = b: row i of U scatters y_i forward */
        const double *ri = &BAND(LU, w, kl, i, i);
        const int m = kl + ku < n - 1 - i ? kl + ku : n - 1 - i;
        const double y = b[i] / ri[0];
        b[i] = y;
        if (y != 0.0)
            for (int d = 1; d <= m; ++d) b[i + d] -= ri[d] * y;
    }
    for (int k = n - 1; k >= 0; --k) { /* L_k^{-T} = I - e_k l_k^T, then the exchange P_k */
        const int last = k + kl < n - 1 ? k + kl : n - 1;
        double s = b[k];
        for (int i = k + 1; i <= last; ++i) s -= BAND(LU, w, kl, i, k) * b[i];
        b[k] = s;
        if (piv[k] != k) swap_values(b + k, b + piv[k], 1);
    }
}
