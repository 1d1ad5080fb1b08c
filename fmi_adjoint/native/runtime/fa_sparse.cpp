/* fmi-adjoint sparse direct solver, see fa_sparse.h: Eigen 3.4's SparseLU (supernodal LU with
 * threshold partial pivoting after a COLAMD column ordering, or after a symmetric ordering
 * chosen at generation; Demmel et al. 1999, SuperLU) behind a C interface.  Compiled once per compiler, flags and Eigen version into the build
 * cache (fmi_adjoint.native.solver) and linked into every model library that needs it. */
/* Only the MPL-2.0 parts of Eigen (SparseLU, COLAMD, SparseCore are); no assertion may abort
 * the host process (the inputs are checked here).  Also set when the sources/ of an FMU are
 * rebuilt without the flags of the build cache. */
#ifndef EIGEN_MPL2_ONLY
#define EIGEN_MPL2_ONLY 1
#endif
#ifndef NDEBUG
#define NDEBUG 1
#endif

#include "fa_sparse.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>
#include <exception>
#include <new>

#include <Eigen/OrderingMethods>
#include <Eigen/SparseCore>
#include <Eigen/SparseLU>

namespace {

typedef Eigen::SparseMatrix<double, Eigen::ColMajor, int> Matrix;

/* SparseLU with the sizes of its storage made readable (they are protected members).  Ordering:
 * COLAMD (no order given), or the natural order of a matrix already permuted symmetrically. */
template <class Ordering>
class Solver : public Eigen::SparseLU<Matrix, Ordering> {
    typedef Eigen::SparseLU<Matrix, Ordering> Base;
    using Base::m_glu;
    using Base::m_mat;
    using Base::m_etree;
    using Base::m_perm_c;
    using Base::m_perm_r;

public:
    size_t bytes() const
    {
        const typename Base::GlobalLU_t &g = m_glu;
        size_t doubles = (size_t)g.lusup.size() + (size_t)g.ucol.size() + (size_t)m_mat.nonZeros();
        size_t ints = (size_t)(g.xsup.size() + g.supno.size() + g.lsub.size() + g.xlusup.size() + g.xlsub.size()
                               + g.usub.size() + g.xusub.size() + m_etree.size() + m_perm_c.size() + m_perm_r.size())
                      + (size_t)m_mat.nonZeros() + (size_t)m_mat.outerSize() + 1;
        return doubles * sizeof(double) + ints * sizeof(int);
    }
};

}  // namespace

struct fa_sparse {
    Matrix A;                /* the pattern (permuted if ordered), values of the last factorization */
    Solver<Eigen::COLAMDOrdering<int> > colamd;  /* without an order */
    Solver<Eigen::NaturalOrdering<int> > natural; /* with an order: A holds P A P^T */
    std::vector<int> order;  /* order[new] = old (empty: COLAMD) */
    std::vector<int> source; /* value k of the permuted A is values[source[k]] (ordered only) */
    Eigen::MatrixXd work;    /* solution buffer of fa_sparse_solve */
    int values;              /* entries of the values array (colptr[n] of the given pattern) */
    int factored;
    const char *message;
    /* Block lower triangular (fa_sparse_new_blocked): each diagonal block is a handle of its own,
     * A holds the strictly lower blocks (value k = values[source[k]]), lower_t their transpose. */
    std::vector<fa_sparse *> blocks;
    std::vector<int> starts;
    std::vector<std::vector<int> > block_source; /* value k of block b = values[block_source[b][k]] */
    std::vector<double> block_values;
    Matrix lower_t;

    fa_sparse() : values(0), factored(0), message("") {}
    ~fa_sparse()
    {
        for (size_t b = 0; b < blocks.size(); ++b) delete blocks[b];
    }
};

namespace {

/* A compressed-column pattern of an n x n matrix: colptr from 0, non-decreasing; rows in range and
 * strictly increasing in each column. */
bool valid_pattern(int n, const int *colptr, const int *rowind)
{
    if (n < 1 || !colptr || !rowind || colptr[0] != 0) return false;
    for (int j = 0; j < n; ++j) {
        if (colptr[j + 1] < colptr[j]) return false;
        for (int k = colptr[j]; k < colptr[j + 1]; ++k)
            if (rowind[k] < 0 || rowind[k] >= n || (k > colptr[j] && rowind[k] <= rowind[k - 1])) return false;
    }
    return true;
}

/* P A P^T of the CSC pattern (colptr, rowind) for order[new] = old: the permuted pattern in s->A
 * (rows increasing in each column) and the place of each of its values among the given ones. */
void permute_pattern(fa_sparse *s, int n, const int *colptr, const int *rowind)
{
    std::vector<int> position((size_t)n);
    for (int k = 0; k < n; ++k) position[(size_t)s->order[(size_t)k]] = k;
    const int nnz = colptr[n];
    std::vector<int> pcolptr((size_t)n + 1, 0), prowind((size_t)nnz);
    s->source.assign((size_t)nnz, 0);
    std::vector<std::pair<int, int> > column; /* (new row, index of the value) */
    for (int jn = 0; jn < n; ++jn) {
        const int j = s->order[(size_t)jn];
        column.clear();
        for (int k = colptr[j]; k < colptr[j + 1]; ++k) column.push_back(std::make_pair(position[(size_t)rowind[k]], k));
        std::sort(column.begin(), column.end());
        int at = pcolptr[(size_t)jn];
        for (size_t c = 0; c < column.size(); ++c, ++at) {
            prowind[(size_t)at] = column[c].first;
            s->source[(size_t)at] = column[c].second;
        }
        pcolptr[(size_t)jn + 1] = at;
    }
    s->A.resize(n, n);
    s->A.resizeNonZeros(nnz);
    std::memcpy(s->A.outerIndexPtr(), pcolptr.data(), sizeof(int) * (size_t)(n + 1));
    if (nnz > 0) std::memcpy(s->A.innerIndexPtr(), prowind.data(), sizeof(int) * (size_t)nnz);
    if (nnz > 0) std::memset(s->A.valuePtr(), 0, sizeof(double) * (size_t)nnz);
}

template <class LU>
int factor_with(fa_sparse *s, LU &lu)
{
    lu.factorize(s->A);
    if (lu.info() != Eigen::Success) {
        s->message = "the matrix is singular (a zero pivot in the sparse LU)";
        return -1;
    }
    return 0;
}

template <class LU>
void solve_with(fa_sparse *s, LU &lu, Eigen::Map<Eigen::MatrixXd> &B, int transposed)
{
    if (s->order.empty()) {
        if (transposed) s->work = lu.transpose().solve(B);
        else s->work = lu.solve(B);
        B = s->work;
        return;
    }
    /* (P A P^T)(P x) = P b, and (P A P^T)^T (P x) = P b for the transposed system. */
    const Eigen::Index n = B.rows();
    Eigen::MatrixXd permuted(n, B.cols());
    for (Eigen::Index i = 0; i < n; ++i) permuted.row(i) = B.row(s->order[(size_t)i]);
    if (transposed) s->work = lu.transpose().solve(permuted);
    else s->work = lu.solve(permuted);
    for (Eigen::Index i = 0; i < n; ++i) B.row(s->order[(size_t)i]) = s->work.row(i);
}

/* The factorization of a block lower triangular handle (fa_sparse_factor, which catches and
 * reports what throws): each diagonal block, and the strictly lower blocks' values (kept with
 * their transpose for the transposed solves).  0, or -1 with the failing block's message. */
int factor_blocks(fa_sparse *s, const double *values)
{
    for (size_t b = 0; b < s->blocks.size(); ++b) {
        const std::vector<int> &source = s->block_source[b];
        s->block_values.resize(source.size() > 0 ? source.size() : 1);
        for (size_t k = 0; k < source.size(); ++k) s->block_values[k] = values[source[k]];
        if (fa_sparse_factor(s->blocks[b], s->block_values.data()) != 0) {
            s->message = fa_sparse_message(s->blocks[b]);
            return -1;
        }
    }
    double *lower = s->A.valuePtr();
    for (size_t k = 0; k < s->source.size(); ++k) lower[k] = values[s->source[k]];
    s->lower_t = s->A.transpose();
    return 0;
}

/* Block substitution: A X = B forward over the blocks (X_b = A_bb^-1 (B_b - sum_c<b A_bc X_c)),
 * A^T X = B backward (X_b = A_bb^-T (B_b - sum_c>b A_cb^T X_c)). */
int solve_blocked(fa_sparse *s, Eigen::Map<Eigen::MatrixXd> &B, int transposed)
{
    const int nblocks = (int)s->blocks.size();
    for (int step = 0; step < nblocks; ++step) {
        const int b = transposed ? nblocks - 1 - step : step;
        const int start = s->starts[(size_t)b], size = s->starts[(size_t)b + 1] - start;
        Eigen::MatrixXd X = B.middleRows(start, size);
        if (fa_sparse_solve(s->blocks[(size_t)b], X.data(), (int)X.cols(), transposed) != 0) {
            s->message = fa_sparse_message(s->blocks[(size_t)b]);
            return -1;
        }
        B.middleRows(start, size) = X;
        /* The columns of block b of A (rows below it) or of A^T (rows above it). */
        const Matrix &coupling = transposed ? s->lower_t : s->A;
        Eigen::MatrixXd update = coupling.middleCols(start, size) * X;
        B -= update; /* zero in the rows of block b itself: the coupling is strictly off the diagonal */
    }
    return 0;
}

}  // namespace

extern "C" {

fa_sparse *fa_sparse_new(int n, const int *colptr, const int *rowind, const int *order)
{
    if (!valid_pattern(n, colptr, rowind)) return NULL;
    fa_sparse *s = NULL;
    try {
        if (order) { /* a permutation of 0 .. n-1 */
            std::vector<char> seen((size_t)n, 0);
            for (int k = 0; k < n; ++k) {
                if (order[k] < 0 || order[k] >= n || seen[(size_t)order[k]]) return NULL;
                seen[(size_t)order[k]] = 1;
            }
        }
        s = new fa_sparse();
        const int nnz = colptr[n];
        s->values = nnz;
        if (order) {
            s->order.assign(order, order + n);
            permute_pattern(s, n, colptr, rowind);
            s->natural.analyzePattern(s->A);
            return s;
        }
        s->A.resize(n, n);
        s->A.resizeNonZeros(nnz);
        std::memcpy(s->A.outerIndexPtr(), colptr, sizeof(int) * (size_t)(n + 1));
        if (nnz > 0) std::memcpy(s->A.innerIndexPtr(), rowind, sizeof(int) * (size_t)nnz);
        if (nnz > 0) std::memset(s->A.valuePtr(), 0, sizeof(double) * (size_t)nnz);
        s->colamd.analyzePattern(s->A);
        return s;
    } catch (...) {
        delete s;
        return NULL;
    }
}

fa_sparse *fa_sparse_new_blocked(int n, const int *colptr, const int *rowind, int nblocks, const int *starts,
                                 const int *orders)
{
    if (!valid_pattern(n, colptr, rowind) || nblocks < 1 || !starts || starts[0] != 0 || starts[nblocks] != n)
        return NULL;
    for (int b = 0; b < nblocks; ++b)
        if (starts[b + 1] <= starts[b]) return NULL;
    fa_sparse *s = NULL;
    try {
        s = new fa_sparse();
        s->values = colptr[n];
        s->starts.assign(starts, starts + nblocks + 1);
        std::vector<int> block_of((size_t)n);
        for (int b = 0; b < nblocks; ++b)
            for (int i = starts[b]; i < starts[b + 1]; ++i) block_of[(size_t)i] = b;
        /* Split the entries: diagonal blocks (local compressed columns), strictly lower blocks. */
        std::vector<std::vector<int> > bcolptr((size_t)nblocks), browind((size_t)nblocks);
        s->block_source.assign((size_t)nblocks, std::vector<int>());
        std::vector<int> lcolptr((size_t)n + 1, 0), lrowind;
        for (int j = 0; j < n; ++j) {
            const int bj = block_of[(size_t)j];
            std::vector<int> &cp = bcolptr[(size_t)bj];
            if (cp.empty()) cp.push_back(0);
            for (int k = colptr[j]; k < colptr[j + 1]; ++k) {
                const int bi = block_of[(size_t)rowind[k]];
                if (bi < bj) { /* above the block diagonal: not block lower triangular */
                    delete s;
                    return NULL;
                }
                if (bi == bj) {
                    browind[(size_t)bj].push_back(rowind[k] - starts[bj]);
                    s->block_source[(size_t)bj].push_back(k);
                } else {
                    lrowind.push_back(rowind[k]);
                    s->source.push_back(k);
                }
            }
            cp.push_back((int)browind[(size_t)bj].size());
            lcolptr[(size_t)j + 1] = (int)lrowind.size();
        }
        s->blocks.reserve((size_t)nblocks); /* push_back below cannot throw and leak a block */
        for (int b = 0; b < nblocks; ++b) {
            const int size = starts[b + 1] - starts[b];
            const int *order = orders && orders[starts[b]] >= 0 ? orders + starts[b] : NULL;
            fa_sparse *block = fa_sparse_new(size, bcolptr[(size_t)b].data(), browind[(size_t)b].data(), order);
            if (!block) {
                delete s;
                return NULL;
            }
            s->blocks.push_back(block);
        }
        const int lnnz = (int)lrowind.size();
        s->A.resize(n, n);
        s->A.resizeNonZeros(lnnz);
        std::memcpy(s->A.outerIndexPtr(), lcolptr.data(), sizeof(int) * (size_t)(n + 1));
        if (lnnz > 0) std::memcpy(s->A.innerIndexPtr(), lrowind.data(), sizeof(int) * (size_t)lnnz);
        if (lnnz > 0) std::memset(s->A.valuePtr(), 0, sizeof(double) * (size_t)lnnz);
        return s;
    } catch (...) {
        delete s;
        return NULL;
    }
}

void fa_sparse_free(fa_sparse *s) { delete s; }

int fa_sparse_factor(fa_sparse *s, const double *values)
{
    if (!s) return -1;
    s->factored = 0;
    for (int k = 0; k < s->values; ++k) {
        if (!std::isfinite(values[k])) {
            s->message = "a matrix entry is NaN or infinite";
            return -1;
        }
    }
    const int nnz = (int)s->A.nonZeros();
    try {
        double *target = s->A.valuePtr();
        int status;
        if (!s->blocks.empty()) {
            status = factor_blocks(s, values);
        } else if (s->order.empty()) {
            if (nnz > 0) std::memcpy(target, values, sizeof(double) * (size_t)nnz);
            status = factor_with(s, s->colamd);
        } else {
            for (int k = 0; k < nnz; ++k) target[k] = values[s->source[(size_t)k]];
            status = factor_with(s, s->natural);
        }
        if (status != 0) return -1;
    } catch (const std::bad_alloc &) {
        s->message = "out of memory in the sparse LU factorization";
        return -1;
    } catch (...) {
        s->message = "the sparse LU factorization failed";
        return -1;
    }
    s->factored = 1;
    s->message = "";
    return 0;
}

int fa_sparse_solve(fa_sparse *s, double *b, int nrhs, int transposed)
{
    if (!s || !s->factored || nrhs < 0) return -1;
    if (nrhs == 0) return 0;
    try {
        const Eigen::Index n = s->A.rows();
        Eigen::Map<Eigen::MatrixXd> B(b, n, nrhs);
        if (!s->blocks.empty()) return solve_blocked(s, B, transposed);
        if (s->order.empty()) solve_with(s, s->colamd, B, transposed);
        else solve_with(s, s->natural, B, transposed);
    } catch (...) {
        s->message = "out of memory in the sparse solve";
        return -1;
    }
    return 0;
}

long fa_sparse_factor_nnz(const fa_sparse *s)
{
    if (!s || !s->factored) return 0L;
    if (!s->blocks.empty()) {
        long total = (long)s->A.nonZeros(); /* the strictly lower blocks, used as they are */
        for (size_t b = 0; b < s->blocks.size(); ++b) total += fa_sparse_factor_nnz(s->blocks[b]);
        return total;
    }
    return s->order.empty() ? (long)(s->colamd.nnzL() + s->colamd.nnzU())
                            : (long)(s->natural.nnzL() + s->natural.nnzU());
}

size_t fa_sparse_bytes(const fa_sparse *s)
{
    if (!s) return 0;
    const size_t matrix = (size_t)s->A.nonZeros() * (sizeof(double) + sizeof(int))
                          + (size_t)(s->A.outerSize() + 1) * sizeof(int);
    const size_t ordering = (s->order.size() + s->source.size()) * sizeof(int);
    size_t blocked = (size_t)s->lower_t.nonZeros() * (sizeof(double) + sizeof(int)) + s->block_values.size() * sizeof(double);
    for (size_t b = 0; b < s->blocks.size(); ++b)
        blocked += fa_sparse_bytes(s->blocks[b]) + s->block_source[b].size() * sizeof(int);
    return sizeof(fa_sparse) + matrix + ordering + blocked + s->colamd.bytes() + s->natural.bytes()
           + (size_t)s->work.size() * sizeof(double);
}

const char *fa_sparse_message(const fa_sparse *s) { return s ? s->message : "no solver (memory exhausted)"; }

}  // extern "C"
