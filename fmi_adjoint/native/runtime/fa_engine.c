/* fmi-adjoint runtime, see fa_engine.h.  The step: schemes.py and hht.py (HHT: Lauss et al.
 * 2018, (15); generalized-alpha: Arnold & Brüls 2007). */
#include "fa_engine.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fa_linalg.h"
#include "model.h"
#if FA_USES_SPARSE
#include "fa_sparse.h"
#endif

#define NK (FA_N + FA_M)
#define ONE(x) ((x) > 0 ? (x) : 1)

struct fa_engine {
    fa_settings settings;
    fa_coefficients co;         /* the scheme's constants, from settings (initialize, set_state) */
    double t0;
    long step;                  /* i: t = t0 + i h */
    double p[ONE(FA_NP)];
    double q[FA_N], v[FA_N], z[NK]; /* z = (a, lambda) */
    double abar[FA_N];          /* pseudo-acceleration (HHT: equal to a) */
    double F_old[FA_N];
    double force_scale;    /* largest force-term magnitude seen (Newton test floor) */
    double position_scale; /* largest |q| seen */
    int initialized;
    int last_iterations; /* Newton iterations of the last step */
    int init_iterations; /* Newton iterations of the last initialization */
    long planned_steps; /* total steps of a batch run, 0 if unknown (FMU) */
    char message[512];
    /* work arrays: residual terms, non-zero values of the Jacobians (model.h patterns) */
    double Ma[FA_N], F[FA_N], C[ONE(FA_M)];
    fa_jacobian_values jac;
    fa_matrix kkt;       /* the Newton matrix in its planned storage (FA_KKT_*, allocated) */
    double rhs[NK], qn[FA_N], vn[FA_N];
    /* Modified Newton (settings.reuse_jacobian): the factored matrix kkt of jac stays valid
     * over steps while convergence is fast; part of the state (checkpoints, FMU state). */
    int factor_valid;    /* kkt holds a factorization, of the step size factor_h */
    int factor_stale;    /* convergence slowed: refactor at the next iteration */
    double factor_h;
    long factorizations; /* factorizations since initialization */
    fa_matrix Gz;        /* initialization Jacobian in its planned storage (FA_INIT_*, allocated) */
    double Gz_values[ONE(FA_NNZ_G_z)], Gp_values[ONE(FA_NNZ_G_p)], G[FA_NZ], zinit[FA_NZ];
};

/* ---- matrices in their planned storage (fa_engine.h, fa_matrix; the FA_KIND_* of fa_engine.h) ---- */

void fa_matrix_release(fa_matrix *a)
{
    if (!a) return;
    free(a->values);
    free(a->piv);
    free(a->work);
#if FA_USES_SPARSE
    fa_sparse_free(a->sparse);
#endif
    memset(a, 0, sizeof *a);
}

static int matrix_alloc(fa_matrix *a, int n, long storage, int kind, const int *colptr, const int *rowind,
                        const int *order, int nblocks, const int *starts)
{
    memset(a, 0, sizeof *a);
    a->values = (double *)calloc((size_t)(storage > 0 ? storage : 1), sizeof(double));
    a->piv = (int *)calloc((size_t)n, sizeof(int));
    a->work = (double *)calloc((size_t)n, sizeof(double));
    if (!a->values || !a->piv || !a->work) { fa_matrix_release(a); return -1; }
#if FA_USES_SPARSE
    if (kind == FA_KIND_SPARSE) {
        a->sparse = nblocks > 1 ? fa_sparse_new_blocked(n, colptr, rowind, nblocks, starts, order)
                                : fa_sparse_new(n, colptr, rowind, order);
        if (!a->sparse) { fa_matrix_release(a); return -1; }
    }
#else
    (void)kind; (void)colptr; (void)rowind; (void)order; (void)nblocks; (void)starts;
#endif
    return 0;
}

int fa_kkt_alloc(fa_matrix *kkt)
{
    return matrix_alloc(kkt, NK, FA_KKT_STORAGE, FA_KKT_KIND, fa_kkt_colptr, fa_kkt_rowind,
                        FA_KKT_ORDERED ? fa_kkt_order : NULL, FA_KKT_BLOCKS, fa_kkt_starts);
}

int fa_init_alloc(fa_matrix *Gz)
{
    return matrix_alloc(Gz, FA_NZ, FA_INIT_STORAGE, FA_INIT_KIND, fa_init_colptr, fa_init_rowind,
                        FA_INIT_ORDERED || FA_INIT_BLOCKS > 1 ? fa_init_order : NULL, FA_INIT_BLOCKS,
                        fa_init_starts);
}

static int matrix_factor(fa_matrix *a, int kind, int n, int kl, int ku)
{
    if (kind == FA_KIND_SPARSE) {
#if FA_USES_SPARSE
        return fa_sparse_factor(a->sparse, a->values);
#else
        return -1;
#endif
    }
    if (kind == FA_KIND_BAND) return fa_band_factor(a->values, n, kl, ku, a->piv);
    return fa_dense_factor(a->values, n, a->piv);
}

/* nrhs solves, x in model order (position: the planned ordering of dense and band storage;
 * sparse storage keeps the model's order, the solver orders internally).  A solve that cannot run
 * (sparse: no factorization or no memory) gives NaN, which the callers' finiteness tests catch. */
static void matrix_solve(fa_matrix *a, int kind, int n, int kl, int ku, const int *position, double *x, int nrhs,
                         int transposed)
{
    if (kind == FA_KIND_SPARSE) {
#if FA_USES_SPARSE
        if (fa_sparse_solve(a->sparse, x, nrhs, transposed) == 0) return;
#endif
        for (long i = 0; i < (long)n * nrhs; ++i) x[i] = NAN;
        return;
    }
    double *b = a->work;
    for (int c = 0; c < nrhs; ++c, x += n) {
        for (int i = 0; i < n; ++i) b[position[i]] = x[i];
        if (kind == FA_KIND_BAND) {
            if (transposed) fa_band_solve_transposed(a->values, n, kl, ku, a->piv, b);
            else fa_band_solve(a->values, n, kl, ku, a->piv, b);
        } else {
            if (transposed) fa_dense_solve_transposed(a->values, n, a->piv, b);
            else fa_dense_solve(a->values, n, a->piv, b);
        }
        for (int i = 0; i < n; ++i) x[i] = b[position[i]];
    }
}

static long matrix_factor_nnz(const fa_matrix *a, int kind, long storage)
{
#if FA_USES_SPARSE
    if (kind == FA_KIND_SPARSE) return fa_sparse_factor_nnz(a->sparse);
#else
    (void)a;
#endif
    return kind == FA_KIND_SPARSE ? 0 : storage;
}

static size_t matrix_bytes(const fa_matrix *a, int kind, int n, long storage)
{
    size_t bytes = (size_t)storage * sizeof(double) + (size_t)n * (sizeof(int) + sizeof(double));
#if FA_USES_SPARSE
    if (kind == FA_KIND_SPARSE) bytes += fa_sparse_bytes(a->sparse);
#else
    (void)a; (void)kind;
#endif
    return bytes;
}

int fa_scheme_coefficients(int scheme, double parameter, fa_coefficients *c)
{
    if (scheme == FA_SCHEME_HHT) {
        const double alpha = parameter;
        if (!(alpha >= -1.0 / 3.0 && alpha <= 0.0)) return -1;
        c->beta = (1.0 - alpha) * (1.0 - alpha) / 4.0;
        c->gamma = (1.0 - 2.0 * alpha) / 2.0;
        c->c_m = 1.0 / (1.0 + alpha);
        c->c_old = alpha / (1.0 + alpha);
        c->c_a = 1.0;
        c->c_ao = 0.0;
        c->c_bo = 0.0;
        return 0;
    }
    if (scheme == FA_SCHEME_GENERALIZED_ALPHA) {
        const double rho = parameter;
        if (!(rho >= 0.0 && rho <= 1.0)) return -1;
        const double am = (2.0 * rho - 1.0) / (rho + 1.0), af = rho / (rho + 1.0);
        const double gamma = 0.5 + af - am;
        c->beta = 0.25 * (gamma + 0.5) * (gamma + 0.5);
        c->gamma = gamma;
        c->c_m = 1.0;
        c->c_old = 0.0;
        c->c_a = (1.0 - af) / (1.0 - am);
        c->c_ao = af / (1.0 - am);
        c->c_bo = -am / (1.0 - am);
        return 0;
    }
    return -1;
}

double fa_settings_parameter(const fa_settings *s)
{
    return s->scheme == FA_SCHEME_GENERALIZED_ALPHA ? s->rho_inf : s->alpha;
}

void fa_engine_settings_default(fa_settings *s)
{
    s->scheme = FA_DEFAULT_SCHEME;
    s->alpha = FA_DEFAULT_ALPHA;
    s->rho_inf = FA_DEFAULT_RHO_INF;
    s->step = FA_DEFAULT_STEP;
    s->rtol = FA_NEWTON_RTOL;
    s->max_iterations = FA_NEWTON_MAX_ITERATIONS;
    s->reuse_jacobian = 0;
}

fa_engine *fa_engine_new(void)
{
    fa_engine *e = (fa_engine *)calloc(1, sizeof(fa_engine));
    if (!e) return NULL;
    if (fa_kkt_alloc(&e->kkt) != 0 || fa_init_alloc(&e->Gz) != 0) { fa_engine_free(e); return NULL; }
    memcpy(e->p, fa_default_parameters, sizeof(double) * ONE(FA_NP));
    fa_engine_settings_default(&e->settings);
    return e;
}

void fa_engine_free(fa_engine *e)
{
    if (e) {
        fa_matrix_release(&e->kkt);
        fa_matrix_release(&e->Gz);
    }
    free(e);
}
double *fa_engine_parameters(fa_engine *e) { return e->p; }
double fa_engine_time(const fa_engine *e) { return e->t0 + e->settings.step * (double)e->step; }
long fa_engine_step_count(const fa_engine *e) { return e->step; }
const char *fa_engine_message(const fa_engine *e) { return e->message; }

/* Newton matrix [[c_m M + bh2 (c_m J_M + K) - gh J_V, C_q^T], [C_q, 0]] (hht.py) assembled
 * from the non-zero values into the planned storage (model.h), then factored. */
int fa_kkt_factor(fa_matrix *m, const fa_jacobian_values *j, double c_m, double bh2, double gh)
{
    double *kkt = m->values;
    memset(kkt, 0, sizeof(double) * FA_KKT_STORAGE);
    for (int k = 0; k < FA_NNZ_M; ++k) kkt[fa_kkt_M[k]] += c_m * j->M[k];
    for (int k = 0; k < FA_NNZ_JM; ++k) kkt[fa_kkt_JM[k]] += bh2 * c_m * j->JM[k];
    for (int k = 0; k < FA_NNZ_K; ++k) kkt[fa_kkt_K[k]] += bh2 * j->K[k];
    for (int k = 0; k < FA_NNZ_JV; ++k) kkt[fa_kkt_JV[k]] -= gh * j->JV[k];
    for (int k = 0; k < FA_NNZ_Cq; ++k) { kkt[fa_kkt_Cq[k]] = j->Cq[k]; kkt[fa_kkt_CqT[k]] = j->Cq[k]; }
    return matrix_factor(m, FA_KKT_KIND, NK, FA_KKT_KL, FA_KKT_KU);
}

int fa_kkt_refactor(fa_matrix *m)
{
    return FA_KKT_KIND == FA_KIND_SPARSE ? matrix_factor(m, FA_KKT_KIND, NK, FA_KKT_KL, FA_KKT_KU) : 0;
}

/* Solve with the factored Newton matrix (transposed: its transpose), x in model order. */
void fa_kkt_solve(fa_matrix *m, double *x, int transposed)
{
    matrix_solve(m, FA_KKT_KIND, NK, FA_KKT_KL, FA_KKT_KU, fa_kkt_position, x, 1, transposed);
}

void fa_kkt_solve_many(fa_matrix *m, double *x, int nrhs, int transposed)
{
    matrix_solve(m, FA_KKT_KIND, NK, FA_KKT_KL, FA_KKT_KU, fa_kkt_position, x, nrhs, transposed);
}

void fa_jacobians_at(const double *q, const double *v, const double *a, const double *lam, double t,
                     const double *p, fa_jacobian_values *j)
{
    fa_jacobian_terms(q, v, a, lam, t, p, j->M, j->JM, j->K, j->JV, j->Cq);
}

/* Initialization Jacobian dG/dz from its non-zero values into the planned storage (model.h:
 * dense, banded after a fill-reducing ordering, or sparse), then factored. */
int fa_init_factor(fa_matrix *m, const double *values)
{
    memset(m->values, 0, sizeof(double) * FA_INIT_STORAGE);
    for (int k = 0; k < FA_NNZ_G_z; ++k) m->values[fa_init_G_z[k]] = values[k];
    return matrix_factor(m, FA_INIT_KIND, FA_NZ, FA_INIT_KL, FA_INIT_KU);
}

/* Solve with the factored initialization matrix (transposed: its transpose), x in model order. */
void fa_init_solve(fa_matrix *m, double *x, int transposed)
{
    matrix_solve(m, FA_INIT_KIND, FA_NZ, FA_INIT_KL, FA_INIT_KU, fa_init_position, x, 1, transposed);
}

long fa_engine_factor_nnz(const fa_engine *e, int which)
{
    return which ? matrix_factor_nnz(&e->Gz, FA_INIT_KIND, FA_INIT_STORAGE)
                 : matrix_factor_nnz(&e->kkt, FA_KKT_KIND, FA_KKT_STORAGE);
}

size_t fa_engine_matrix_bytes(const fa_engine *e, int which)
{
    return which ? matrix_bytes(&e->Gz, FA_INIT_KIND, FA_NZ, FA_INIT_STORAGE)
                 : matrix_bytes(&e->kkt, FA_KKT_KIND, NK, FA_KKT_STORAGE);
}

#define Z_ARGS(z) (z), (z) + FA_N, (z) + FA_N + FA_M, (z) + 2 * FA_N + FA_M, (z) + 2 * FA_N + 2 * FA_M, \
    (z) + 3 * FA_N + 2 * FA_M

int fa_all_finite(const double *x, int n)
{
    for (int i = 0; i < n; ++i) if (!isfinite(x[i])) return 0;
    return 1;
}

int fa_engine_initialize(fa_engine *e, double t0, const fa_settings *settings)
{
    if (settings) e->settings = *settings;
    const fa_settings *s = &e->settings;
    if (fa_scheme_coefficients(s->scheme, fa_settings_parameter(s), &e->co) != 0 || !(s->step > 0.0)
        || !isfinite(s->step)) {
        snprintf(e->message, sizeof e->message, "invalid settings: scheme %d with alpha = %g in [-1/3, 0] (HHT) or "
                 "rho_inf = %g in [0, 1] (generalized-alpha), and step = %g positive", s->scheme, s->alpha,
                 s->rho_inf, s->step);
        return -1;
    }
    if (!fa_all_finite(e->p, FA_NP)) {
        snprintf(e->message, sizeof e->message, "a parameter is NaN or infinite; set finite values");
        return -1;
    }
    /* Newton on G(z) = 0 from the given positions and velocities (initialization.py). */
    double *z = e->zinit;
    memset(z, 0, sizeof(double) * FA_NZ);
    fa_init_guess(t0, e->p, z, z + FA_N + FA_M);
    /* Masses and inertias must be >= 0 at the initial guess (initialization.py refuses the
     * same): a negative diagonal entry makes the model non-physical, not just hard. */
    {
        double zeros[NK];
        memset(zeros, 0, sizeof zeros);
        fa_jacobians_at(z, z + FA_N + FA_M, zeros, zeros + FA_N, t0, e->p, &e->jac);
        for (int k = 0; k < FA_NNZ_M; ++k) {
            if (fa_M_row[k] == fa_M_col[k] && e->jac.M[k] < 0.0) {
                snprintf(e->message, sizeof e->message, "model '%s': the mass matrix has a negative diagonal "
                         "entry for '%s' at the initial state; masses and inertias must be >= 0 (check the "
                         "parameter values)", FA_MODEL_NAME, fa_coordinate_names[fa_M_row[k]]);
                return -1;
            }
        }
    }
    int converged = 0, settled_before = 0;
    for (int it = 1; it <= FA_INIT_MAX_ITERATIONS && !converged; ++it) {
        e->init_iterations = it;
        fa_init_residual(Z_ARGS(z), t0, e->p, e->G);
        fa_init_jacobians(Z_ARGS(z), t0, e->p, e->Gz_values, e->Gp_values);
        if (!fa_all_finite(e->G, FA_NZ) || !fa_all_finite(e->Gz_values, FA_NNZ_G_z)) {
            snprintf(e->message, sizeof e->message, "the initial state gives non-finite values; check the initial "
                     "positions and the parameter values");
            return -1;
        }
        for (int i = 0; i < FA_NZ; ++i) e->G[i] = -e->G[i];
        if (fa_init_factor(&e->Gz, e->Gz_values) != 0) {
            snprintf(e->message, sizeof e->message, "the initialization system is singular (too many coordinates "
                     "fixed, redundant constraints, or a massless coordinate without stiffness)");
            return -1;
        }
        fa_init_solve(&e->Gz, e->G, 0);
        /* Converged: every correction below tolerance, or those of q and v (the only unknowns
           entering nonlinearly) in two iterations in a row (initialization.py, initial_state). */
        int settled = 1, all = 1;
        for (int i = 0; i < FA_NZ; ++i) {
            z[i] += e->G[i];
            const int nonlinear = i < FA_N || (i >= FA_N + FA_M && i < 2 * FA_N + FA_M);
            if (!(fabs(e->G[i]) <= FA_INIT_TOLERANCE * (1.0 + fabs(z[i])))) {
                all = 0;
                if (nonlinear) settled = 0;
            }
        }
        converged = settled && (settled_before || all);
        settled_before = settled;
    }
    if (!converged) {
        snprintf(e->message, sizeof e->message, "the initial positions could not be made consistent with the "
                 "constraints in %d Newton iterations; give positions closer to an assembled configuration",
                 FA_INIT_MAX_ITERATIONS);
        return -1;
    }
    memcpy(e->q, z, sizeof(double) * FA_N);
    memcpy(e->v, z + FA_N + FA_M, sizeof(double) * FA_N);
    memcpy(e->z, z + 2 * FA_N + 2 * FA_M, sizeof(double) * FA_N);       /* a */
    memcpy(e->z + FA_N, z + 3 * FA_N + 2 * FA_M, sizeof(double) * FA_M); /* lambda */
    memcpy(e->abar, e->z, sizeof(double) * FA_N);                        /* abar_0 = a_0 */
    fa_residual_terms(e->q, e->v, e->z, e->z + FA_N, t0, e->p, e->Ma, e->F_old, e->C);
    e->force_scale = 0.0;
    e->position_scale = 0.0;
    for (int i = 0; i < FA_N; ++i) e->position_scale = fmax(e->position_scale, fabs(e->q[i]));
    e->t0 = t0;
    e->step = 0;
    e->initialized = 1;
    e->factor_valid = 0;
    e->factor_stale = 0;
    e->factor_h = 0.0;
    e->factorizations = 0;
    e->message[0] = '\0';
    return 0;
}

static int failure(fa_engine *e, double t, double h, const char *what, int iterations)
{
    char of[48] = "";
    if (e->planned_steps > 0) snprintf(of, sizeof of, " of %ld", e->planned_steps);
    snprintf(e->message, sizeof e->message, "model '%s': Newton did not converge at t = %.9g s (step %ld%s, "
             "h = %.3g s): %s after %d iterations. Remedies: a different step (--step; smaller where the motion "
             "is fast), parameter values that are physically meaningful (positive masses and stiffnesses), or "
             "more numerical damping (alpha towards -1/3).", FA_MODEL_NAME, t, e->step + 1, of, h, what, iterations);
    return -1;
}

void fa_engine_set_planned_steps(fa_engine *e, long n) { e->planned_steps = n; }

int fa_engine_step(fa_engine *e)
{
    /* Step times as in time_grid(): t_i = t0 + h i (products, not sums). */
    const double h0 = e->settings.step;
    return fa_engine_step_to(e, e->t0 + h0 * (double)e->step, e->t0 + h0 * (double)(e->step + 1));
}

int fa_engine_step_to(fa_engine *e, double t_prev, double t)
{
    if (!e->initialized) {
        snprintf(e->message, sizeof e->message, "the engine is not initialized");
        return -1;
    }
    const fa_coefficients co = e->co;
    const double beta = co.beta, gamma = co.gamma, c_m = co.c_m, c_old = co.c_old;
    const double h = t - t_prev, bh2 = beta * co.c_a * h * h, gh = gamma * co.c_a * h;
    const fa_jacobian_values *j = &e->jac;
    double q_pred[FA_N], v_pred[FA_N], rhs_old[FA_N], rest[FA_N], z[NK], terms[FA_N], c_terms[ONE(FA_M)];
    for (int i = 0; i < FA_N; ++i) {
        /* Known part of abar_i (f5): zero for HHT, where abar = a. */
        rest[i] = co.c_ao * e->z[i] + co.c_bo * e->abar[i];
        q_pred[i] = e->q[i] + h * e->v[i] + (0.5 - beta) * h * h * e->abar[i] + beta * h * h * rest[i];
        v_pred[i] = e->v[i] + (1.0 - gamma) * h * e->abar[i] + gamma * h * rest[i];
        rhs_old[i] = c_old * e->F_old[i];
    }
    memcpy(z, e->z, sizeof z);
    int iteration, done = 0;
    const int reuse = e->settings.reuse_jacobian;
    double delta_prev = 0.0;
    for (iteration = 1; iteration <= e->settings.max_iterations; ++iteration) {
        for (int i = 0; i < FA_N; ++i) { e->qn[i] = q_pred[i] + bh2 * z[i]; e->vn[i] = v_pred[i] + gh * z[i]; }
        /* Full Newton refactors every iteration; modified Newton only without a valid
         * factorization of this step size or when convergence slowed (hht.py). */
        /* (Step sizes t_i - t_{i-1} differ in their last bits; only a real change counts.) */
        const int refresh = !reuse || !e->factor_valid || e->factor_stale || fabs(h - e->factor_h) > 1e-9 * h;
        if (refresh)
            fa_newton(e->qn, e->vn, z, z + FA_N, t, e->p, e->Ma, e->F, e->C, e->jac.M, e->jac.JM, e->jac.K,
                      e->jac.JV, e->jac.Cq);
        else
            fa_residual_terms(e->qn, e->vn, z, z + FA_N, t, e->p, e->Ma, e->F, e->C);
        /* Residual test scaled by the magnitude of each equation's terms (hht.py). */
        /* Floors: magnitudes of the predictor and of accepted steps, never of later
         * iterates (hht.py). */
        for (int i = 0; i < FA_N; ++i) {
            double inertia = c_m * e->Ma[i];
            e->rhs[i] = rhs_old[i] - inertia - e->F[i];
            terms[i] = fabs(rhs_old[i]) + fabs(inertia) + fabs(e->F[i]);
            if (iteration == 1) {
                e->force_scale = fmax(e->force_scale, terms[i]);
                e->position_scale = fmax(e->position_scale, fabs(e->qn[i]));
            }
        }
        for (int k = 0; k < FA_M; ++k) { e->rhs[FA_N + k] = -e->C[k] / bh2; c_terms[k] = 0.0; }
        /* The round-off floor (FA_NEWTON_ROUNDOFF, hht.py): the forces that cancel in a row at
         * rest, the elastic ones |K| (|q| + position scale) and the constraint forces
         * |C_q|^T |lambda|, from the current or the last assembled K and C_q. */
        double stiff[FA_N];
        for (int i = 0; i < FA_N; ++i) stiff[i] = 0.0;
        for (int k = 0; k < FA_NNZ_K; ++k)
            stiff[fa_K_row[k]] += fabs(j->K[k]) * (fabs(e->qn[fa_K_col[k]]) + e->position_scale);
        for (int k = 0; k < FA_NNZ_Cq; ++k) stiff[fa_Cq_col[k]] += fabs(j->Cq[k]) * fabs(z[FA_N + fa_Cq_row[k]]);
        int converged = 1;
        for (int i = 0; i < FA_N; ++i)
            if (!(fabs(e->rhs[i]) <= e->settings.rtol * (terms[i] + e->force_scale) + FA_NEWTON_ROUNDOFF * stiff[i]))
                converged = 0;
        for (int k = 0; k < FA_NNZ_Cq; ++k)
            c_terms[fa_Cq_row[k]] += fabs(j->Cq[k]) * (fabs(e->qn[fa_Cq_col[k]]) + e->position_scale);
        for (int k = 0; k < FA_M; ++k)
            if (!(fabs(e->C[k]) <= e->settings.rtol * c_terms[k])) converged = 0;
        if (refresh) {
            e->factor_valid = 0;
            if (fa_kkt_factor(&e->kkt, j, c_m, bh2, gh) != 0)
                return failure(e, t, h, "the iteration matrix is singular", iteration);
            e->factor_valid = 1;
            e->factor_stale = 0;
            e->factor_h = h;
            e->factorizations += 1;
        }
        fa_kkt_solve(&e->kkt, e->rhs, 0);
        if (!fa_all_finite(e->rhs, NK)) return failure(e, t, h, "the solution became NaN or infinite", iteration);
        double delta = 0.0;
        for (int i = 0; i < NK; ++i) { z[i] += e->rhs[i]; delta = fmax(delta, fabs(e->rhs[i])); }
        /* Modified Newton: convergence slower than FA_NEWTON_REUSE_CONTRACTION per iteration
         * asks for a fresh matrix. */
        if (reuse && iteration > 1 && delta > FA_NEWTON_REUSE_CONTRACTION * delta_prev) e->factor_stale = 1;
        delta_prev = delta;
        /* The update after a converged residual polishes the iterate to round-off. */
        if (converged) {
            for (int i = 0; i < FA_N; ++i) {
                e->force_scale = fmax(e->force_scale, terms[i]);
                e->position_scale = fmax(e->position_scale, fabs(e->qn[i]));
            }
            done = 1;
            break;
        }
    }
    if (!done) return failure(e, t, h, "no convergence", e->settings.max_iterations);
    for (int i = 0; i < FA_N; ++i) {
        e->q[i] = q_pred[i] + bh2 * z[i];
        e->v[i] = v_pred[i] + gh * z[i];
        e->abar[i] = co.c_a * z[i] + rest[i];
    }
    memcpy(e->z, z, sizeof z);
    fa_residual_terms(e->q, e->v, e->z, e->z + FA_N, t, e->p, e->Ma, e->F_old, e->C);
    if (!fa_all_finite(e->q, FA_N) || !fa_all_finite(e->F_old, FA_N))
        return failure(e, t, h, "the solution became NaN or infinite", iteration);
    e->step += 1;
    e->last_iterations = iteration;
    return 0;
}

void fa_engine_current(const fa_engine *e, double *q, double *v, double *a, double *lam)
{
    memcpy(q, e->q, sizeof e->q);
    memcpy(v, e->v, sizeof e->v);
    memcpy(a, e->z, sizeof(double) * FA_N);
    if (FA_M) memcpy(lam, e->z + FA_N, sizeof(double) * FA_M);
}

const double *fa_engine_initial_z(const fa_engine *e) { return e->zinit; }
int fa_engine_last_iterations(const fa_engine *e) { return e->last_iterations; }
int fa_engine_init_iterations(const fa_engine *e) { return e->init_iterations; }
long fa_engine_factorizations(const fa_engine *e) { return e->factorizations; }

void fa_engine_outputs(const fa_engine *e, double *y)
{
    fa_outputs(e->q, e->v, e->z, e->z + FA_N, fa_engine_time(e), e->p, y);
}

/* State layout: t0, step, alpha, step size, rtol, max_iterations, initialized, force_scale,
 * position_scale, reuse_jacobian, factor_valid, factor_stale, factor_h, factorizations, scheme,
 * rho_inf, q, v, z, abar, F_old, p, then the iteration matrix (FA_KKT_STORAGE doubles), its
 * pivots (FA_NK) and the Jacobian values it was built from: the whole state of modified
 * Newton, so that a run continued from a state (FMU state, checkpoint) is the same run bit for
 * bit.  Dense and band storage: the factored matrix and its pivots.  Sparse storage: the
 * assembled (unfactored) values in the compressed columns of model.h and zero pivots; setting
 * the state refactors them (the same values and pattern give the same factors bit for bit). */
#define FA_JAC_DOUBLES (sizeof(fa_jacobian_values) / sizeof(double))
#define FA_STATE_HEAD 16
#define FA_STATE_SIZE (FA_STATE_HEAD + 3 * FA_N + NK + FA_N + ONE(FA_NP) + FA_KKT_STORAGE + NK + FA_JAC_DOUBLES)

size_t fa_engine_state_size(void) { return FA_STATE_SIZE; }

void fa_engine_get_state(const fa_engine *e, double *b)
{
    b[0] = e->t0; b[1] = (double)e->step; b[2] = e->settings.alpha; b[3] = e->settings.step;
    b[4] = e->settings.rtol; b[5] = (double)e->settings.max_iterations; b[6] = (double)e->initialized;
    b[7] = e->force_scale; b[8] = e->position_scale; b[9] = (double)e->settings.reuse_jacobian;
    b[10] = (double)e->factor_valid; b[11] = (double)e->factor_stale; b[12] = e->factor_h;
    b[13] = (double)e->factorizations; b[14] = (double)e->settings.scheme; b[15] = e->settings.rho_inf;
    double *w = b + FA_STATE_HEAD;
    memcpy(w, e->q, sizeof e->q); w += FA_N;
    memcpy(w, e->v, sizeof e->v); w += FA_N;
    memcpy(w, e->z, sizeof e->z); w += NK;
    memcpy(w, e->abar, sizeof e->abar); w += FA_N;
    memcpy(w, e->F_old, sizeof e->F_old); w += FA_N;
    memcpy(w, e->p, sizeof e->p); w += ONE(FA_NP);
    memcpy(w, e->kkt.values, sizeof(double) * FA_KKT_STORAGE); w += FA_KKT_STORAGE;
    for (int i = 0; i < NK; ++i) w[i] = (double)e->kkt.piv[i];
    w += NK;
    memcpy(w, &e->jac, sizeof e->jac);
}

int fa_engine_state_matches(const double *b, const fa_settings *s)
{
    return b[14] == (double)s->scheme && b[3] == s->step
           && (s->scheme == FA_SCHEME_GENERALIZED_ALPHA ? b[15] == s->rho_inf : b[2] == s->alpha);
}

static int is_flag(double x) { return x == 0.0 || x == 1.0; }

int fa_engine_set_state(fa_engine *e, const double *b)
{
    /* Integers stored as doubles: convert only values in range (crafted data must not
     * reach an undefined conversion).  The factored matrix may hold any finite values; the
     * pivots must be rows of the matrix. */
    const double *tail = b + FA_STATE_HEAD + 3 * FA_N + NK + FA_N + ONE(FA_NP);
    fa_coefficients co;
    if (!fa_all_finite(b, (int)FA_STATE_SIZE)) return -1;
    if (!(b[1] >= 0.0 && b[1] <= 9.0e15 && b[1] <= (double)LONG_MAX && b[1] == floor(b[1]))) return -1;
    if (!(b[5] >= 1.0 && b[5] <= FA_NEWTON_ITERATION_LIMIT && b[5] == floor(b[5]))) return -1;
    if (!is_flag(b[6]) || !is_flag(b[9]) || !is_flag(b[10]) || !is_flag(b[11])) return -1;
    if (!(b[3] > 0.0) || !(b[2] >= -1.0 / 3.0 && b[2] <= 0.0) || !(b[4] > 0.0)) return -1;
    if (!(b[14] == FA_SCHEME_HHT || b[14] == FA_SCHEME_GENERALIZED_ALPHA)) return -1;
    if (fa_scheme_coefficients((int)b[14], b[14] == FA_SCHEME_HHT ? b[2] : b[15], &co) != 0) return -1;
    if (!(b[7] >= 0.0) || !(b[8] >= 0.0) || !(b[12] >= 0.0)) return -1;
    if (!(b[13] >= 0.0 && b[13] <= 9.0e15 && b[13] <= (double)LONG_MAX && b[13] == floor(b[13]))) return -1;
    for (int i = 0; i < NK; ++i) {
        double piv = tail[FA_KKT_STORAGE + i];
        if (!(piv >= 0.0 && piv < (double)NK && piv == floor(piv))) return -1;
    }
    e->co = co;
    e->t0 = b[0]; e->step = (long)b[1]; e->settings.alpha = b[2]; e->settings.step = b[3];
    e->settings.rtol = b[4]; e->settings.max_iterations = (int)b[5]; e->initialized = (int)b[6];
    e->force_scale = b[7]; e->position_scale = b[8]; e->settings.reuse_jacobian = (int)b[9];
    e->factor_valid = (int)b[10]; e->factor_stale = (int)b[11]; e->factor_h = b[12];
    e->factorizations = (long)b[13]; e->settings.scheme = (int)b[14]; e->settings.rho_inf = b[15];
    const double *w = b + FA_STATE_HEAD;
    memcpy(e->q, w, sizeof e->q); w += FA_N;
    memcpy(e->v, w, sizeof e->v); w += FA_N;
    memcpy(e->z, w, sizeof e->z); w += NK;
    memcpy(e->abar, w, sizeof e->abar); w += FA_N;
    memcpy(e->F_old, w, sizeof e->F_old); w += FA_N;
    memcpy(e->p, w, sizeof e->p); w += ONE(FA_NP);
    memcpy(e->kkt.values, w, sizeof(double) * FA_KKT_STORAGE); w += FA_KKT_STORAGE;
    for (int i = 0; i < NK; ++i) e->kkt.piv[i] = (int)w[i];
    w += NK;
    memcpy(&e->jac, w, sizeof e->jac);
    /* Sparse storage keeps the assembled matrix: factor it again (dense/band: a no-op). */
    if (e->factor_valid && fa_kkt_refactor(&e->kkt) != 0) {
        e->factor_valid = 0;
        return -1;
    }
    return 0;
}
