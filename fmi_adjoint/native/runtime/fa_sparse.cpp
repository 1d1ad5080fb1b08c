/* fmi-adjoint sparse direct solver, see fa_sparse.h: Eigen 3.4's SparseLU (supernodal LU with
 * threshold partial pivoting after a COLAMD column ordering; Demmel et al. 1999, SuperLU)
 * behind a C interface.  Compiled once per compiler, flags and Eigen version into the build
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

#include <cmath>
#include <cstring>
#include <exception>
#include <new>

#include <Eigen/OrderingMethods>
#include <Eigen/SparseCore>
#include <Eigen/SparseLU>

namespace {

typedef Eigen::SparseMatrix<double, Eigen::ColMajor, int> Matrix;
typedef Eigen::SparseLU<Matrix, Eigen::COLAMDOrdering<int> > Base;

/* SparseLU with the sizes of its storage made readable (they are protected members). */
class Solver : public Base {
public:
    size_t bytes() const
    {
        const Base::GlobalLU_t &g = m_glu;
        size_t doubles = (size_t)g.lusup.size() + (size_t)g.ucol.size() + (size_t)m_mat.nonZeros();
        size_t ints = (size_t)(g.xsup.size() + g.supno.size() + g.lsub.size() + g.xlusup.size() + g.xlsub.size()
                               + g.usub.size() + g.xusub.size() + m_etree.size() + m_perm_c.size() + m_perm_r.size())
                      + (size_t)m_mat.nonZeros() + (size_t)m_mat.outerSize() + 1;
        return doubles * sizeof(double) + ints * sizeof(int);
    }
};

}  // namespace

struct fa_sparse {
    Matrix A;                /* the pattern, and the values of the last factorization */
    Solver lu;
    Eigen::MatrixXd work;    /* solution buffer of fa_sparse_solve */
    int factored;
    const char *message;
};

extern "C" {

fa_sparse *fa_sparse_new(int n, const int *colptr, const int *rowind)
{
    if (n < 1 || !colptr || !rowind || colptr[0] != 0) return NULL;
    for (int j = 0; j < n; ++j) {
        if (colptr[j + 1] < colptr[j]) return NULL;
        for (int k = colptr[j]; k < colptr[j + 1]; ++k)
            if (rowind[k] < 0 || rowind[k] >= n || (k > colptr[j] && rowind[k] <= rowind[k - 1])) return NULL;
    }
    fa_sparse *s = NULL;
    try {
        s = new fa_sparse();
        s->factored = 0;
        s->message = "";
        const int nnz = colptr[n];
        s->A.resize(n, n);
        s->A.resizeNonZeros(nnz);
        std::memcpy(s->A.outerIndexPtr(), colptr, sizeof(int) * (size_t)(n + 1));
        std::memcpy(s->A.innerIndexPtr(), rowind, sizeof(int) * (size_t)(nnz > 0 ? nnz : 0));
        std::memset(s->A.valuePtr(), 0, sizeof(double) * (size_t)(nnz > 0 ? nnz : 0));
        s->lu.analyzePattern(s->A);
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
        std::memcpy(s->A.valuePtr(), values, sizeof(double) * (size_t)nnz);
        s->lu.factorize(s->A);
        if (s->lu.info() != Eigen::Success) {
            s->message = "the matrix is singular (a zero pivot in the sparse LU)";
            return -1;
        }
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
        if (transposed) s->work = s->lu.transpose().solve(B);
        else s->work = s->lu.solve(B);
        B = s->work;
    } catch (...) {
        s->message = "out of memory in the sparse solve";
        return -1;
    }
    return 0;
}

long fa_sparse_factor_nnz(const fa_sparse *s)
{
    return s && s->factored ? (long)(s->lu.nnzL() + s->lu.nnzU()) : 0L;
}

size_t fa_sparse_bytes(const fa_sparse *s)
{
    if (!s) return 0;
    const size_t matrix = (size_t)s->A.nonZeros() * (sizeof(double) + sizeof(int))
                          + (size_t)(s->A.outerSize() + 1) * sizeof(int);
    return sizeof(fa_sparse) + matrix + s->lu.bytes() + (size_t)s->work.size() * sizeof(double);
}

const char *fa_sparse_message(const fa_sparse *s) { return s ? s->message : "no solver (memory exhausted)"; }

}  // extern "C"
