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
    int factored;
    const char *message;
};

namespace {

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

}  // namespace

extern "C" {

fa_sparse *fa_sparse_new(int n, const int *colptr, const int *rowind, const int *order)
{
    if (n < 1 || !colptr || !rowind || colptr[0] != 0) return NULL;
    for (int j = 0; j < n; ++j) {
        if (colptr[j + 1] < colptr[j]) return NULL;
        for (int k = colptr[j]; k < colptr[j + 1]; ++k)
            if (rowind[k] < 0 || rowind[k] >= n || (k > colptr[j] && rowind[k] <= rowind[k - 1])) return NULL;
    }
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
        s->factored = 0;
        s->message = "";
        const int nnz = colptr[n];
        if (order) {
            s->order.assign(order, order + n);
            permute_pattern(s, n, colptr, rowind);
            s->natural.analyzePattern(s->A);
            return s;
        }
        s->A.resize(n, n);
        s->A.resizeNonZeros(nnz);
        std::memcpy(s->A.outerIndexPtr(), colptr, sizeof(int) * (size_t)(n + 1));
        std::memcpy(s->A.innerIndexPtr(), rowind, sizeof(int) * (size_t)(nnz > 0 ? nnz : 0));
        std::memset(s->A.valuePtr(), 0, sizeof(double) * (size_t)(nnz > 0 ? nnz : 0));
        s->colamd.analyzePattern(s->A);
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
    const int nnz = (int)s->A.nonZeros();
    for (int k = 0; k < nnz; ++k) {
        if (!std::isfinite(values[k])) {
            s->message = "a matrix entry is NaN or infinite";
            return -1;
        }
    }
    try {
        double *target = s->A.valuePtr();
        if (s->order.empty()) std::memcpy(target, values, sizeof(double) * (size_t)nnz);
        else for (int k = 0; k < nnz; ++k) target[k] = values[s->source[(size_t)k]];
        if ((s->order.empty() ? factor_with(s, s->colamd) : factor_with(s, s->natural)) != 0) return -1;
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
    return s->order.empty() ? (long)(s->colamd.nnzL() + s->colamd.nnzU())
                            : (long)(s->natural.nnzL() + s->natural.nnzU());
}

size_t fa_sparse_bytes(const fa_sparse *s)
{
    if (!s) return 0;
    const size_t matrix = (size_t)s->A.nonZeros() * (sizeof(double) + sizeof(int))
                          + (size_t)(s->A.outerSize() + 1) * sizeof(int);
    const size_t ordering = (s->order.size() + s->source.size()) * sizeof(int);
    return sizeof(fa_sparse) + matrix + ordering + s->colamd.bytes() + s->natural.bytes()
           + (size_t)s->work.size() * sizeof(double);
}

const char *fa_sparse_message(const fa_sparse *s) { return s ? s->message : "no solver (memory exhausted)"; }

}  // extern "C"
