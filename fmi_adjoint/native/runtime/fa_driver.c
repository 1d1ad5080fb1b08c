/* Batch driver of the runtime: the native engine of fmi_adjoint.native (ctypes).
 *
 * fa_run        forward run (HHT or generalized-alpha, schemes.py) on a time grid, keeping the trajectory (q, v, a, lambda at
 *               every step and the consistent initial z), as fmi_adjoint.integrate.simulate;
 * fa_adjoint_segment, fa_adjoint_initial
 *               the discrete adjoint sweep of fmi_adjoint.adjoint.discrete (Lauss et al.
 *               2018, eqs. (3)-(11), (16)-(20), extended by parameters in M, C, the outputs
 *               and the initial state): the caller hands dJ/dY on the step grid and gets the
 *               full gradient;
 * fa_sensitivities_segment  forward sensitivities dY/dp of fmi_adjoint.adjoint.sensitivities;
 * fa_run (every >= 1), fa_recompute
 *               a run that keeps only the outputs and checkpoints, and the recomputation of a
 *               segment from a checkpoint: the sweeps then run segment by segment, carrying
 *               their state across, so memory does not limit the run length.
 * Both sweeps only read the trajectory; every Jacobian is generated code (model.h), the
 * Newton matrix is the forward run's (fa_kkt_factor), solved transposed for the adjoint (after a
 * modified-Newton run, by iterative refinement with the factors of an earlier step: refined_solve).
 * Not part of FMUs.  Arrays are row-major; no globals.  The arguments are trusted: the engine's
 * front door (fmi_adjoint.engines, fmi_adjoint.integrate.inputs.RunInputs) checked them, and
 * fmi_adjoint.native.NativeLibrary sized the arrays; only what the FMUs share (fa_engine.c:
 * settings, restored states) checks its input here.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fa_engine.h"
#include "fa_linalg.h"
#include "model.h"

#define NK FA_NK
#define ONE FA_ONE

static void copy_message(char *message, int size, const char *text)
{
    if (message && size > 0) {
        strncpy(message, text, (size_t)size - 1);
        message[size - 1] = '\0';
    }
}

static int all_finite(const double *x, long n)
{
    for (long i = 0; i < n; ++i) if (!isfinite(x[i])) return 0;
    return 1;
}

/* The scheme (FA_SCHEME_*) and its parameter (alpha or rho_inf) into settings. */
static void set_scheme(fa_settings *s, int scheme, double parameter)
{
    s->scheme = scheme;
    if (scheme == FA_SCHEME_GENERALIZED_ALPHA) s->rho_inf = parameter;
    else s->alpha = parameter;
}

/* Simulate n_steps steps from t0 with parameters p (NULL: defaults); write the outputs at
 * the n_steps + 1 step times into y (row-major).  Returns 0, or -1 with the engine's
 * message copied into message (capacity message_size). */
int fa_simulate(double t0, double step, int scheme, double parameter, double rtol, long n_steps, const double *p,
                double *y, char *message, int message_size)
{
    fa_engine *e = fa_engine_new();
    if (!e) { copy_message(message, message_size, "out of memory"); return -1; }
    fa_settings s;
    fa_engine_settings_default(&s);
    s.step = step;
    set_scheme(&s, scheme, parameter);
    if (rtol > 0) s.rtol = rtol;
    if (p && FA_NP) memcpy(fa_engine_parameters(e), p, sizeof(double) * FA_NP);
    fa_engine_set_planned_steps(e, n_steps);
    int status = fa_engine_initialize(e, t0, &s);
    if (status == 0) fa_engine_outputs(e, y);
    for (long i = 1; status == 0 && i <= n_steps; ++i) {
        status = fa_engine_step(e);
        if (status == 0) fa_engine_outputs(e, y + i * FA_NY);
    }
    if (status != 0) copy_message(message, message_size, fa_engine_message(e));
    fa_engine_free(e);
    return status;
}

/* Forward run on grid[0..n_steps] (the last step may be uneven).  Always: the outputs at
 * every step (Y: (n_steps+1) x FA_NY, fa_outputs of the step's state, so that a cost needs no
 * other backend), the consistent initial z (FA_NZ), the Newton iterations of each step and of
 * the initialization, the factorizations.  With every = 0 it also stores q, v, a, lambda at
 * every step (Q, V, A: (n_steps+1) x FA_N; L: (n_steps+1) x FA_M); with every >= 1 instead the
 * engine's complete state every `every` steps (checkpoints: one fa_engine_state_size() block
 * per step 0, every, 2 every, ... <= n_steps), for sweeps that recompute segments instead of
 * reading a stored trajectory.  The arguments are trusted: the engine's front door
 * (fmi_adjoint.integrate.RunInputs) checked them.  0, or -1 with a message. */
int fa_run(const double *grid, long n_steps, int scheme, double parameter, double rtol, int max_iterations, int reuse_jacobian,
           const double *p, long every, double *Q, double *V, double *A, double *L, double *Y, double *checkpoints,
           double *z0, int *iterations, int *init_iterations, long *factorizations, char *message, int message_size)
{
    fa_engine *e = fa_engine_new();
    double *x = (double *)malloc(sizeof(double) * (3 * FA_N + ONE(FA_M)));
    if (!e || !x) {
        fa_engine_free(e);
        free(x);
        copy_message(message, message_size, "out of memory for the C engine");
        return -1;
    }
    const size_t size = fa_engine_state_size();
    fa_settings s;
    fa_engine_settings_default(&s);
    s.step = n_steps > 0 ? grid[1] - grid[0] : 1.0;
    set_scheme(&s, scheme, parameter);
    s.rtol = rtol;
    s.max_iterations = max_iterations;
    s.reuse_jacobian = reuse_jacobian;
    if (FA_NP) memcpy(fa_engine_parameters(e), p, sizeof(double) * FA_NP);
    fa_engine_set_planned_steps(e, n_steps);
    int status = fa_engine_initialize(e, grid[0], &s);
    if (status == 0) {
        memcpy(z0, fa_engine_initial_z(e), sizeof(double) * FA_NZ);
        *init_iterations = fa_engine_init_iterations(e);
    }
    for (long i = 0; status == 0 && i <= n_steps; ++i) {
        if (i >= 1) {
            status = fa_engine_step_to(e, grid[i - 1], grid[i]);
            if (status != 0) break;
            iterations[i - 1] = fa_engine_last_iterations(e);
        }
        /* The state of step i: into the stored rows, or into x (checkpointed runs). */
        double *q = every == 0 ? Q + i * FA_N : x, *v = every == 0 ? V + i * FA_N : x + FA_N;
        double *a = every == 0 ? A + i * FA_N : x + 2 * FA_N, *lam = every == 0 ? L + i * FA_M : x + 3 * FA_N;
        if (every > 0 && i % every == 0) fa_engine_get_state(e, checkpoints + (size_t)(i / every) * size);
        fa_engine_current(e, q, v, a, lam);
        fa_outputs(q, v, a, lam, grid[i], p, Y + i * FA_NY);
    }
    *factorizations = fa_engine_factorizations(e);
    if (status != 0) copy_message(message, message_size, fa_engine_message(e));
    fa_engine_free(e);
    free(x);
    return status;
}

/* Work memory of one sweep (heap: sizes grow with the model). */
typedef struct {
    fa_jacobian_values *jac, *prev;
    fa_matrix kkt, Gz; /* the Newton and initialization matrices in their planned storage */
    double *Ma_p, *F_p, *C_p, *F_p_prev, *Y_q, *Y_v, *Y_a, *Y_lam, *Y_p, *Gz_values, *Gp_values;
} sweep_memory;

static void sweep_free(sweep_memory *w)
{
    free(w->jac); free(w->prev); fa_matrix_release(&w->kkt); fa_matrix_release(&w->Gz); free(w->Ma_p);
    free(w->F_p); free(w->C_p); free(w->F_p_prev); free(w->Y_q); free(w->Y_v); free(w->Y_a); free(w->Y_lam);
    free(w->Y_p); free(w->Gz_values); free(w->Gp_values);
}

/* init: also the initialization matrix (the segments that start at step 0 need it). */
static int sweep_alloc(sweep_memory *w, int init)
{
    memset(w, 0, sizeof *w);
    w->jac = (fa_jacobian_values *)malloc(sizeof(fa_jacobian_values));
    w->prev = (fa_jacobian_values *)malloc(sizeof(fa_jacobian_values));
    w->Ma_p = (double *)malloc(sizeof(double) * ONE(FA_NNZ_Ma_p));
    w->F_p = (double *)malloc(sizeof(double) * ONE(FA_NNZ_F_p));
    w->C_p = (double *)malloc(sizeof(double) * ONE(FA_NNZ_C_p));
    w->F_p_prev = (double *)malloc(sizeof(double) * ONE(FA_NNZ_F_p));
    w->Y_q = (double *)malloc(sizeof(double) * ONE(FA_NNZ_Y_q));
    w->Y_v = (double *)malloc(sizeof(double) * ONE(FA_NNZ_Y_v));
    w->Y_a = (double *)malloc(sizeof(double) * ONE(FA_NNZ_Y_a));
    w->Y_lam = (double *)malloc(sizeof(double) * ONE(FA_NNZ_Y_lam));
    w->Y_p = (double *)malloc(sizeof(double) * ONE(FA_NNZ_Y_p));
    w->Gz_values = (double *)malloc(sizeof(double) * ONE(FA_NNZ_G_z));
    w->Gp_values = (double *)malloc(sizeof(double) * ONE(FA_NNZ_G_p));
    int matrices = fa_kkt_alloc(&w->kkt) == 0 && (!init || fa_init_alloc(&w->Gz) == 0);
    if (!matrices || !w->jac || !w->prev || !w->Ma_p || !w->F_p || !w->C_p || !w->F_p_prev || !w->Y_q
        || !w->Y_v || !w->Y_a || !w->Y_lam || !w->Y_p || !w->Gz_values || !w->Gp_values) {
        sweep_free(w);
        return -1;
    }
    return 0;
}

/* The consistent initialization's dG/dz at z0, factored (planned storage), and dG/dp values. */
static int init_factor(sweep_memory *w, const double *z0, double t0, const double *p)
{
    const double *z = z0;
    fa_init_jacobians(z, z + FA_N, z + FA_N + FA_M, z + 2 * FA_N + FA_M, z + 2 * FA_N + 2 * FA_M,
                      z + 3 * FA_N + 2 * FA_M, t0, p, w->Gz_values, w->Gp_values);
    return fa_init_factor(&w->Gz, w->Gz_values);
}

/* Positions of (q, v, a, lambda) inside z = (q, mu, v, nu, a, lambda). */
static long selection(long k)
{
    if (k < FA_N) return k;
    if (k < 2 * FA_N) return k + FA_M;
    if (k < 3 * FA_N) return k + 2 * FA_M;
    return k + 2 * FA_M;
}


/* y = KKT^T x and, in y_abs, |KKT|^T |x| (the scale of the residual), with KKT the Newton matrix
 * [[c_m M + bh2 (c_m J_M + K) - gh J_V, C_q^T], [C_q, 0]] that fa_kkt_factor assembles from j. */
static void kkt_transposed_product(const fa_jacobian_values *j, double c_m, double bh2, double gh, const double *x,
                                   double *y, double *y_abs)
{
    for (int i = 0; i < NK; ++i) y[i] = y_abs[i] = 0.0;
#define FA_ADD(count, rows, cols, value)                                                            \
    for (int k = 0; k < (count); ++k) {                                                              \
        const double entry = (value), xr = x[(rows)[k]];                                             \
        y[(cols)[k]] += entry * xr;                                                                  \
        y_abs[(cols)[k]] += fabs(entry) * fabs(xr);                                                  \
    }
    FA_ADD(FA_NNZ_M, fa_M_row, fa_M_col, c_m * j->M[k])
    FA_ADD(FA_NNZ_JM, fa_JM_row, fa_JM_col, bh2 * c_m * j->JM[k])
    FA_ADD(FA_NNZ_K, fa_K_row, fa_K_col, bh2 * j->K[k])
    FA_ADD(FA_NNZ_JV, fa_JV_row, fa_JV_col, -gh * j->JV[k])
#undef FA_ADD
    for (int k = 0; k < FA_NNZ_Cq; ++k) {
        const int row = FA_N + fa_Cq_row[k], col = fa_Cq_col[k];
        y[col] += j->Cq[k] * x[row];
        y_abs[col] += fabs(j->Cq[k]) * fabs(x[row]);
        y[row] += j->Cq[k] * x[col];
        y_abs[row] += fabs(j->Cq[k]) * fabs(x[col]);
    }
}

/* Componentwise backward error (Oettli-Prager) at which a refined adjoint solve stops (a few ulp),
 * or below which it may stagnate: round-off then keeps the residual from halving (rows of several
 * hundred entries carry a round-off of about their length times eps).  A direct LU solve of these
 * matrices leaves more: measured 1.5e-10 to 6.8e-9 on the flexible suspension's steps (20 modes per
 * body).  Counted on 200 of its steps with modified Newton: 85 solves reached 64 eps, 115 stagnated
 * below 1e-13 (accepted), 39 stagnated between 1e-13 and 1.9e-12 and factored their own matrix;
 * about ten iterations a step in all. */
#define FA_REFINE_BACKWARD_ERROR (64.0 * 2.220446049250313e-16)
#define FA_REFINE_STAGNATION 1e-13
#define FA_REFINE_MAX_ITERATIONS 30
/* Refined adjoint solves only where the Newton matrix is stored sparse (the plan chose the sparse
 * LU: a large model, whose factorization costs many solves and products).  A dense or banded
 * matrix factors in about the time of one or two refinement iterations: measured 1.8-4.2 times
 * slower sweeps on the bundled examples when refined, so those keep one factorization per step. */
#define FA_REFINE_ADJOINT (FA_KKT_KIND == FA_KIND_SPARSE)

/* Solve KKT(j)^T x = b by iterative refinement with the factored Newton matrix of an earlier step
 * (the matrix modified Newton kept; issue 25): each iteration one product with the exact matrix
 * and one solve with the kept factors, until the componentwise backward error is a few ulp, as a
 * direct solve's (FA_REFINE_BACKWARD_ERROR, or FA_REFINE_STAGNATION where round-off stops it).
 * The adjoint stays the exact discrete adjoint; only the factorizations are saved.  0, or -1 when
 * the kept factors do not contract the residual by half per iteration (the caller factors this
 * step's matrix). */
static int refined_solve(fa_matrix *kept, const fa_jacobian_values *j, double c_m, double bh2, double gh,
                         const double *b, double *x, double *work, int solved)
{
    double *y = work, *y_abs = work + NK, *r = work + 2 * NK;
    if (!solved) { /* else x is already the kept factors' solution of b */
        memcpy(x, b, sizeof(double) * NK);
        fa_kkt_solve(kept, x, 1);
    }
    double previous = INFINITY;
    for (int iteration = 0; iteration < FA_REFINE_MAX_ITERATIONS; ++iteration) {
        if (!fa_all_finite(x, NK)) return -1;
        kkt_transposed_product(j, c_m, bh2, gh, x, y, y_abs);
        double backward = 0.0, size = 0.0;
        for (int i = 0; i < NK; ++i) {
            r[i] = b[i] - y[i];
            const double scale = fabs(b[i]) + y_abs[i];
            const double ratio = scale > 0.0 ? fabs(r[i]) / scale : (r[i] != 0.0 ? INFINITY : 0.0);
            if (!(ratio <= backward)) backward = isnan(ratio) ? INFINITY : ratio; /* NaN: not converged */
            size = fmax(size, fabs(r[i]));
        }
        if (!isfinite(backward) || !isfinite(size)) return -1;
        if (backward <= FA_REFINE_BACKWARD_ERROR) return 0;
        if (!(size <= 0.5 * previous)) return backward <= FA_REFINE_STAGNATION ? 0 : -1;
        previous = size;
        fa_kkt_solve(kept, r, 1);
        for (int i = 0; i < NK; ++i) x[i] += r[i];
    }
    return -1;
}

/* Discrete adjoint sweep over the steps i_hi down to i_lo (a segment: the whole run, or one
 * recomputed between checkpoints).  Q, V, A, L and ybar (dJ/dY, FA_NY per step) hold the rows
 * i_lo..i_hi.  carry (1 + 4 FA_N: h_{i+1}, mu1_{i+1}, mu2_{i+1}, mu3_{i+1}, mu5_{i+1}; zero
 * before the last segment) links the segments.  The step: schemes.py (adjoint: discrete.py).  gradient (FA_NP) is accumulated into.  The segment with
 * i_lo = 0 writes w0 (3 FA_N + FA_M), the adjoint of the initial state, for fa_adjoint_initial.
 * Optional (NULL: none): xbar, explicit dJ/d(q, v, a, lambda) per step (3 FA_N + FA_M per row,
 * added to the output terms), and mu_out, where (mu3, mu4) of every step are written
 * (FA_N + FA_M per row; row 0 gets zeros).  Optimal input design (fmi_adjoint.design.fisher)
 * uses both for the adjoint of the sensitivity recursion.  reuse (a modified-Newton run) and a
 * sparse Newton matrix: the transposed solves are refined with the factors of an earlier step
 * (refined_solve); the factorizations made are added to *factorizations (optional).  0, or -1
 * with a message. */
int fa_adjoint_segment(const double *grid, long i_lo, long i_hi, int scheme, double parameter, int reuse,
                       const double *p, const double *Q, const double *V, const double *A, const double *L,
                       const double *ybar, const double *xbar, double *carry, double *w0, double *gradient,
                       double *mu_out, long *factorizations, char *message, int message_size)
{
    fa_coefficients co;
    if (fa_scheme_coefficients(scheme, parameter, &co) != 0) {
        copy_message(message, message_size, "adjoint sweep: invalid scheme settings");
        return -1;
    }
    const double beta = co.beta, gamma = co.gamma, c_m = co.c_m, c_old = co.c_old;
    sweep_memory w;
    if (sweep_alloc(&w, 0) != 0) {
        copy_message(message, message_size, "out of memory for the adjoint sweep");
        return -1;
    }
    double *vec = (double *)calloc((size_t)(9 * FA_N + 4 * FA_M + 6 * NK + 8), sizeof(double));
    if (!vec) { sweep_free(&w); copy_message(message, message_size, "out of memory for the adjoint sweep"); return -1; }
    double *gq = vec, *gv = gq + FA_N, *ga = gv + FA_N, *rq = ga + FA_N, *rv = rq + FA_N, *ra = rv + FA_N;
    double *mu3 = ra + FA_N, *rb = mu3 + FA_N;
    double *gl = rb + FA_N, *rl = gl + FA_M, *mu4 = rl + FA_M, *x = mu4 + FA_M;
    double *b = x + NK, *refine = b + NK; /* the right-hand side kept; refined_solve's 3 NK and one more */
    int kept = 0; /* reuse: w.kkt holds the factors of an earlier step's matrix */
    double h_next = carry[0];
    double *mu1n = carry + 1, *mu2n = mu1n + FA_N, *mu3n = mu2n + FA_N, *mu5n = mu3n + FA_N;
    const fa_jacobian_values *j = w.jac;
    int status = 0;
    for (long i = i_hi; i >= i_lo; --i) {
        const long r = i - i_lo; /* row in the segment arrays */
        const double *q = Q + r * FA_N, *v = V + r * FA_N, *a = A + r * FA_N, *lam = L + r * FA_M, t = grid[i];
        const double *yb = ybar + r * FA_NY;
        /* Explicit output terms: g = (dY/dx)^T ybar_i, gradient += (dY/dp)^T ybar_i (none at
         * steps the cost does not read: no sample next to them). */
        memset(gq, 0, sizeof(double) * 3 * FA_N);
        if (FA_M) memset(gl, 0, sizeof(double) * FA_M);
        int sampled = 0;
        for (int k = 0; k < FA_NY; ++k) sampled |= yb[k] != 0.0;
        if (sampled) {
            fa_output_jacobians(q, v, a, lam, t, p, w.Y_q, w.Y_v, w.Y_a, w.Y_lam, w.Y_p);
            for (int k = 0; k < FA_NNZ_Y_q; ++k) gq[fa_Y_q_col[k]] += w.Y_q[k] * yb[fa_Y_q_row[k]];
            for (int k = 0; k < FA_NNZ_Y_v; ++k) gv[fa_Y_v_col[k]] += w.Y_v[k] * yb[fa_Y_v_row[k]];
            for (int k = 0; k < FA_NNZ_Y_a; ++k) ga[fa_Y_a_col[k]] += w.Y_a[k] * yb[fa_Y_a_row[k]];
            for (int k = 0; k < FA_NNZ_Y_lam; ++k) gl[fa_Y_lam_col[k]] += w.Y_lam[k] * yb[fa_Y_lam_row[k]];
            for (int k = 0; k < FA_NNZ_Y_p; ++k) gradient[fa_Y_p_col[k]] += w.Y_p[k] * yb[fa_Y_p_row[k]];
        }
        if (xbar) {
            const double *xb = xbar + r * (3 * FA_N + FA_M);
            for (int n = 0; n < FA_N; ++n) {
                gq[n] += xb[n];
                gv[n] += xb[FA_N + n];
                ga[n] += xb[2 * FA_N + n];
            }
            for (int k = 0; k < FA_M; ++k) gl[k] += xb[3 * FA_N + k];
        }
        fa_jacobians_at(q, v, a, lam, t, p, w.jac);
        /* r = -g - (df_{i+1}/dx_i)^T mu_{i+1}: Newmark couplings, the pseudo-acceleration
         * recursion and the alpha-weighted old forces. */
        const double hn = h_next;
        for (int n = 0; n < FA_N; ++n) {
            rq[n] = -gq[n] + mu1n[n];
            rv[n] = -gv[n] + hn * mu1n[n] + mu2n[n];
            ra[n] = -ga[n] + co.c_ao * mu5n[n];
            rb[n] = 0.5 * hn * hn * (1.0 - 2.0 * beta) * mu1n[n] + hn * (1.0 - gamma) * mu2n[n] + co.c_bo * mu5n[n];
        }
        for (int k = 0; k < FA_M; ++k) rl[k] = -gl[k];
        for (int k = 0; k < FA_NNZ_K; ++k) rq[fa_K_col[k]] += c_old * j->K[k] * mu3n[fa_K_row[k]];
        for (int k = 0; k < FA_NNZ_JV; ++k) rv[fa_JV_col[k]] -= c_old * j->JV[k] * mu3n[fa_JV_row[k]];
        for (int k = 0; k < FA_NNZ_Cq; ++k) rl[fa_Cq_row[k]] += c_old * j->Cq[k] * mu3n[fa_Cq_col[k]];
        /* Parameter terms of step i+1 that depend on x_i: -c_old mu3_{i+1}^T F_p(x_i). */
        fa_parameter_terms(q, v, a, lam, t, p, w.Ma_p, w.F_p, w.C_p);
        for (int k = 0; k < FA_NNZ_F_p; ++k) gradient[fa_F_p_col[k]] -= c_old * w.F_p[k] * mu3n[fa_F_p_row[k]];
        if (mu_out) memset(mu_out + r * (FA_N + FA_M), 0, sizeof(double) * (FA_N + FA_M));
        if (i == 0) {
            /* abar_0 = a_0: the pseudo-acceleration's adjoint joins that of a_0. */
            for (int n = 0; n < FA_N; ++n) {
                w0[n] = -rq[n];
                w0[FA_N + n] = -rv[n];
                w0[2 * FA_N + n] = -(ra[n] + rb[n]);
            }
            for (int k = 0; k < FA_M; ++k) w0[3 * FA_N + k] = -rl[k];
            break;
        }
        const double h = grid[i] - grid[i - 1], bh2 = beta * co.c_a * h * h, gh = gamma * co.c_a * h;
        /* Eliminating mu1, mu2, mu5 leaves the transposed Newton matrix for (mu3, mu4). */
        for (int n = 0; n < FA_N; ++n) x[n] = ra[n] + co.c_a * rb[n] + bh2 * rq[n] + gh * rv[n];
        for (int k = 0; k < FA_M; ++k) x[FA_N + k] = rl[k];
        /* Modified Newton (reuse): refined with the kept factors, this step's own only when they
         * do not contract (refined_solve); else each step's matrix factored. */
        memcpy(b, x, sizeof(double) * NK);
        const int refine_solves = reuse && FA_REFINE_ADJOINT;
        if (!(refine_solves && kept && refined_solve(&w.kkt, j, c_m, bh2, gh, b, x, refine, 0) == 0)) {
            kept = 0;
            if (fa_kkt_factor(&w.kkt, j, c_m, bh2, gh) != 0) {
                copy_message(message, message_size, "adjoint sweep: a step's Newton matrix is singular");
                status = -1;
                break;
            }
            kept = 1;
            if (factorizations) *factorizations += 1;
            memcpy(x, b, sizeof(double) * NK);
            fa_kkt_solve(&w.kkt, x, 1);
            /* Refined with its own factors too, so that a step solves to about the same backward
             * error whether its factors are its own or kept (a checkpointed sweep, whose segments
             * start with their own factors, then gives the stored sweep's gradient to round-off);
             * where even that does not converge, the direct solution stands. */
            if (refine_solves) {
                double *direct = refine + 3 * NK;
                memcpy(direct, x, sizeof(double) * NK);
                if (refined_solve(&w.kkt, j, c_m, bh2, gh, b, x, refine, 1) != 0)
                    memcpy(x, direct, sizeof(double) * NK);
            }
        }
        memcpy(mu3, x, sizeof(double) * FA_N);
        if (FA_M) memcpy(mu4, x + FA_N, sizeof(double) * FA_M);
        if (mu_out) memcpy(mu_out + r * (FA_N + FA_M), x, sizeof(double) * (FA_N + FA_M));
        /* mu1 = r_q - (c_m J_M + K)^T mu3 - C_q^T mu4 / (beta h^2); mu2 = r_v + J_V^T mu3. */
        memcpy(mu1n, rq, sizeof(double) * FA_N);
        memcpy(mu2n, rv, sizeof(double) * FA_N);
        for (int k = 0; k < FA_NNZ_JM; ++k) mu1n[fa_JM_col[k]] -= c_m * j->JM[k] * mu3[fa_JM_row[k]];
        for (int k = 0; k < FA_NNZ_K; ++k) mu1n[fa_K_col[k]] -= j->K[k] * mu3[fa_K_row[k]];
        for (int k = 0; k < FA_NNZ_Cq; ++k) mu1n[fa_Cq_col[k]] -= j->Cq[k] * mu4[fa_Cq_row[k]] / bh2;
        for (int k = 0; k < FA_NNZ_JV; ++k) mu2n[fa_JV_col[k]] += j->JV[k] * mu3[fa_JV_row[k]];
        /* mu5 = r_abar + beta h^2 mu1 + gamma h mu2 (the abar row). */
        for (int n = 0; n < FA_N; ++n) mu5n[n] = rb[n] + beta * h * h * mu1n[n] + gamma * h * mu2n[n];
        /* mu_i^T df_i/dp (eq. (20) extended by d(M a)/dp and dC/dp). */
        for (int k = 0; k < FA_NNZ_Ma_p; ++k) gradient[fa_Ma_p_col[k]] += c_m * w.Ma_p[k] * mu3[fa_Ma_p_row[k]];
        for (int k = 0; k < FA_NNZ_F_p; ++k) gradient[fa_F_p_col[k]] += w.F_p[k] * mu3[fa_F_p_row[k]];
        for (int k = 0; k < FA_NNZ_C_p; ++k) gradient[fa_C_p_col[k]] += w.C_p[k] * mu4[fa_C_p_row[k]] / bh2;
        memcpy(mu3n, mu3, sizeof(double) * FA_N);
        h_next = h;
    }
    carry[0] = h_next;
    free(vec);
    sweep_free(&w);
    return status;
}

/* The initial state's part of the gradient: dJ/dp -= G_p^T G_z^{-T} E^T w0 (one transposed
 * solve with the consistent initialization's Jacobian at z0). */
int fa_adjoint_initial(const double *z0, double t0, const double *p, const double *w0, double *gradient,
                       char *message, int message_size)
{
    sweep_memory w;
    if (sweep_alloc(&w, 1) != 0) {
        copy_message(message, message_size, "out of memory for the adjoint sweep");
        return -1;
    }
    double *y = (double *)calloc((size_t)FA_NZ, sizeof(double));
    int status = 0;
    if (!y) {
        copy_message(message, message_size, "out of memory for the adjoint sweep");
        status = -1;
    } else if (init_factor(&w, z0, t0, p) != 0) {
        copy_message(message, message_size, "adjoint sweep: the initialization Jacobian is singular");
        status = -1;
    } else {
        for (long k = 0; k < 3 * FA_N + FA_M; ++k) y[selection(k)] = w0[k];
        fa_init_solve(&w.Gz, y, 1);
        for (int k = 0; k < FA_NNZ_G_p; ++k) gradient[fa_G_p_col[k]] -= w.Gp_values[k] * y[fa_G_p_row[k]];
        if (!all_finite(gradient, FA_NP)) {
            copy_message(message, message_size, "adjoint sweep: the gradient is not finite");
            status = -1;
        }
    }
    free(y);
    sweep_free(&w);
    return status;
}

/* Doubles of the carry of fa_sensitivities_segment for P parameters: the sensitivities
 * S = (Sq, Sv, Sa, Sl, Sb) of the last step (P columns each; Sb: the pseudo-acceleration), and that step's K, J_V, C_q and
 * F_p values (the next step's right-hand side needs them). */
long fa_sensitivity_carry_size(int P)
{
    return (long)(P > 0 ? P : 1) * (4 * FA_N + FA_M) + (long)(sizeof(fa_jacobian_values) / sizeof(double))
           + ONE(FA_NNZ_F_p);
}

/* Forward sensitivities of all outputs with respect to params[0..P-1] over the steps
 * i_lo..i_hi (Q, V, A, L hold those rows), carried between segments in carry (see
 * fa_sensitivity_carry_size; the segment with i_lo = 0 starts from dx_0/dp of the consistent
 * initialization at z0).  Writes dY/dp at the steps with needed[i] != 0 (absolute index) in
 * step order into dY (rows x FA_NY x P).  S_out (NULL: none) receives the state sensitivities
 * (Sq, Sv, Sa, Sl) of every step of the segment, (i_hi - i_lo + 1) x (3 FA_N + FA_M) x P
 * (optimal input design needs them at every step).  0, or -1 with a message. */
int fa_sensitivities_segment(const double *grid, long i_lo, long i_hi, int scheme, double parameter,
                             const double *p, const double *Q, const double *V, const double *A, const double *L,
                             const double *z0, int P, const int *params, const unsigned char *needed, double *carry,
                             double *dY, double *S_out, char *message, int message_size)
{
    fa_coefficients co;
    if (fa_scheme_coefficients(scheme, parameter, &co) != 0) {
        copy_message(message, message_size, "sensitivities: invalid scheme settings");
        return -1;
    }
    const double beta = co.beta, gamma = co.gamma, c_m = co.c_m, c_old = co.c_old;
    const long n = FA_N, m = FA_M;
    sweep_memory w;
    if (sweep_alloc(&w, i_lo == 0) != 0) {
        copy_message(message, message_size, "out of memory for the sensitivities");
        return -1;
    }
    size_t cols = (size_t)(P > 0 ? P : 1);
    double *mem = (double *)calloc(cols * (size_t)(5 * n + m + NK) + (size_t)FA_NZ + 1, sizeof(double));
    int *column = (int *)malloc(sizeof(int) * ONE(FA_NP));
    if (!mem || !column) {
        free(mem); free(column); sweep_free(&w);
        copy_message(message, message_size, "out of memory for the sensitivities");
        return -1;
    }
    /* Carried: S of the last step, and its Jacobian and F_p values. */
    double *Sq = carry, *Sv = Sq + cols * n, *Sa = Sv + cols * n, *Sl = Sa + cols * n, *Sb = Sl + cols * m;
    fa_jacobian_values *j0 = (fa_jacobian_values *)(void *)(Sb + cols * n);
    double *F_p_prev = (double *)(void *)(j0 + 1);
    double *b1 = mem, *b2 = b1 + cols * n, *b3 = b2 + cols * n, *rest = b3 + cols * n, *b4 = rest + cols * n;
    double *x = b4 + cols * m, *rhs = x + cols * NK;
    int status = 0;
    long row = 0;
    /* params: distinct indices in [0, FA_NP), checked by the engine's front door. */
    for (int k = 0; k < FA_NP; ++k) column[k] = -1;
    for (int c = 0; c < P; ++c) column[params[c]] = c;

    if (i_lo == 0) {
        /* S_0 = dx_0/dp = -(G_z^{-1} G_p)[selection]. */
        if (init_factor(&w, z0, grid[0], p) != 0) {
            copy_message(message, message_size, "sensitivities: the initialization Jacobian is singular");
            status = -1;
        }
        for (int c = 0; status == 0 && c < P; ++c) {
            memset(rhs, 0, sizeof(double) * FA_NZ);
            for (int k = 0; k < FA_NNZ_G_p; ++k)
                if (fa_G_p_col[k] == params[c]) rhs[fa_G_p_row[k]] -= w.Gp_values[k];
            fa_init_solve(&w.Gz, rhs, 0);
            for (long i = 0; i < n; ++i) {
                Sq[c * n + i] = rhs[selection(i)];
                Sv[c * n + i] = rhs[selection(n + i)];
                Sa[c * n + i] = rhs[selection(2 * n + i)];
            }
            for (long k = 0; k < m; ++k) Sl[c * m + k] = rhs[selection(3 * n + k)];
            memcpy(Sb + c * n, Sa + c * n, sizeof(double) * n); /* abar_0 = a_0 */
        }
    }
    for (long i = i_lo; status == 0 && i <= i_hi; ++i) {
        const long r = i - i_lo;
        const double *q = Q + r * FA_N, *v = V + r * FA_N, *a = A + r * FA_N, *lam = L + r * FA_M, t = grid[i];
        fa_jacobians_at(q, v, a, lam, t, p, w.jac);
        fa_parameter_terms(q, v, a, lam, t, p, w.Ma_p, w.F_p, w.C_p);
        const fa_jacobian_values *j = w.jac;
        if (i >= 1) {
            const double h = grid[i] - grid[i - 1], bh2 = beta * co.c_a * h * h, gh = gamma * co.c_a * h;
            memset(b3, 0, sizeof(double) * cols * n);
            memset(b4, 0, sizeof(double) * cols * m);
            for (int c = 0; c < P; ++c) {
                const double *sq = Sq + c * n, *sv = Sv + c * n, *sa = Sa + c * n, *sb = Sb + c * n;
                double *B1 = b1 + c * n, *B2 = b2 + c * n, *R = rest + c * n;
                for (long k = 0; k < n; ++k) {
                    R[k] = co.c_ao * sa[k] + co.c_bo * sb[k]; /* known part of dabar_i/dp (f5) */
                    B1[k] = sq[k] + h * sv[k] + 0.5 * h * h * (1.0 - 2.0 * beta) * sb[k] + beta * h * h * R[k];
                    B2[k] = sv[k] + h * (1.0 - gamma) * sb[k] + gamma * h * R[k];
                }
            }
            /* b3 = c_old (K0 Sq - JV0 Sv + Cq0^T Sl) - (c_m Ma_p + F_p - c_old F_p0)[:, params]. */
            for (int k = 0; k < FA_NNZ_K; ++k)
                for (int c = 0; c < P; ++c) b3[c * n + fa_K_row[k]] += c_old * j0->K[k] * Sq[c * n + fa_K_col[k]];
            for (int k = 0; k < FA_NNZ_JV; ++k)
                for (int c = 0; c < P; ++c) b3[c * n + fa_JV_row[k]] -= c_old * j0->JV[k] * Sv[c * n + fa_JV_col[k]];
            for (int k = 0; k < FA_NNZ_Cq; ++k)
                for (int c = 0; c < P; ++c) b3[c * n + fa_Cq_col[k]] += c_old * j0->Cq[k] * Sl[c * m + fa_Cq_row[k]];
            for (int k = 0; k < FA_NNZ_Ma_p; ++k) {
                int c = column[fa_Ma_p_col[k]];
                if (c >= 0) b3[c * n + fa_Ma_p_row[k]] -= c_m * w.Ma_p[k];
            }
            for (int k = 0; k < FA_NNZ_F_p; ++k) {
                int c = column[fa_F_p_col[k]];
                if (c >= 0) b3[c * n + fa_F_p_row[k]] += c_old * F_p_prev[k] - w.F_p[k];
            }
            for (int k = 0; k < FA_NNZ_C_p; ++k) {
                int c = column[fa_C_p_col[k]];
                if (c >= 0) b4[c * m + fa_C_p_row[k]] -= w.C_p[k] / bh2;
            }
            /* top = b3 - (c_m J_M + K) b1 + J_V b2; bottom = b4 - C_q b1 / (beta h^2). */
            for (int c = 0; c < P; ++c) {
                double *X = x + c * NK;
                memcpy(X, b3 + c * n, sizeof(double) * n);
                if (m) memcpy(X + n, b4 + c * m, sizeof(double) * m);
            }
            for (int k = 0; k < FA_NNZ_JM; ++k)
                for (int c = 0; c < P; ++c) x[c * NK + fa_JM_row[k]] -= c_m * j->JM[k] * b1[c * n + fa_JM_col[k]];
            for (int k = 0; k < FA_NNZ_K; ++k)
                for (int c = 0; c < P; ++c) x[c * NK + fa_K_row[k]] -= j->K[k] * b1[c * n + fa_K_col[k]];
            for (int k = 0; k < FA_NNZ_JV; ++k)
                for (int c = 0; c < P; ++c) x[c * NK + fa_JV_row[k]] += j->JV[k] * b2[c * n + fa_JV_col[k]];
            for (int k = 0; k < FA_NNZ_Cq; ++k)
                for (int c = 0; c < P; ++c) x[c * NK + n + fa_Cq_row[k]] -= j->Cq[k] * b1[c * n + fa_Cq_col[k]] / bh2;
            if (fa_kkt_factor(&w.kkt, j, c_m, bh2, gh) != 0) {
                copy_message(message, message_size, "sensitivities: a step's Newton matrix is singular");
                status = -1;
                break;
            }
            fa_kkt_solve_many(&w.kkt, x, P, 0); /* all parameters' columns with one call */
            for (int c = 0; c < P; ++c) {
                double *X = x + c * NK;
                for (long k = 0; k < n; ++k) {
                    Sa[c * n + k] = X[k];
                    Sq[c * n + k] = b1[c * n + k] + bh2 * X[k];
                    Sv[c * n + k] = b2[c * n + k] + gh * X[k];
                    Sb[c * n + k] = co.c_a * X[k] + rest[c * n + k];
                }
                for (long k = 0; k < m; ++k) Sl[c * m + k] = X[n + k];
            }
        }
        if (S_out) {
            double *out = S_out + r * (3 * n + m) * (long)P;
            for (int c = 0; c < P; ++c)
                for (long k = 0; k < n; ++k) {
                    out[k * P + c] = Sq[c * n + k];
                    out[(n + k) * P + c] = Sv[c * n + k];
                    out[(2 * n + k) * P + c] = Sa[c * n + k];
                }
            for (int c = 0; c < P; ++c)
                for (long k = 0; k < m; ++k) out[(3 * n + k) * P + c] = Sl[c * m + k];
        }
        if (needed[i]) {
            fa_output_jacobians(q, v, a, lam, t, p, w.Y_q, w.Y_v, w.Y_a, w.Y_lam, w.Y_p);
            double *out = dY + row * FA_NY * (long)P;
            memset(out, 0, sizeof(double) * FA_NY * (size_t)P);
            for (int k = 0; k < FA_NNZ_Y_q; ++k)
                for (int c = 0; c < P; ++c) out[fa_Y_q_row[k] * P + c] += w.Y_q[k] * Sq[c * n + fa_Y_q_col[k]];
            for (int k = 0; k < FA_NNZ_Y_v; ++k)
                for (int c = 0; c < P; ++c) out[fa_Y_v_row[k] * P + c] += w.Y_v[k] * Sv[c * n + fa_Y_v_col[k]];
            for (int k = 0; k < FA_NNZ_Y_a; ++k)
                for (int c = 0; c < P; ++c) out[fa_Y_a_row[k] * P + c] += w.Y_a[k] * Sa[c * n + fa_Y_a_col[k]];
            for (int k = 0; k < FA_NNZ_Y_lam; ++k)
                for (int c = 0; c < P; ++c) out[fa_Y_lam_row[k] * P + c] += w.Y_lam[k] * Sl[c * m + fa_Y_lam_col[k]];
            for (int k = 0; k < FA_NNZ_Y_p; ++k) {
                int c = column[fa_Y_p_col[k]];
                if (c >= 0) out[fa_Y_p_row[k] * P + c] += w.Y_p[k];
            }
            row += 1;
        }
        /* The next step needs K, J_V, C_q and F_p at this state. */
        memcpy(j0, w.jac, sizeof(fa_jacobian_values));
        memcpy(F_p_prev, w.F_p, sizeof(double) * ONE(FA_NNZ_F_p));
    }
    if (status == 0 && !all_finite(dY, row * FA_NY * (long)P)) {
        copy_message(message, message_size, "sensitivities: a value is not finite");
        status = -1;
    }
    free(mem);
    free(column);
    sweep_free(&w);
    return status;
}

/* Recompute the steps i0..i1 from the checkpoint state of step i0 (a block written by
 * fa_run with every >= 1), storing q, v, a, lambda of those steps (rows 0..i1-i0).  The same
 * engine code on the same state: the same trajectory bit for bit. */
int fa_recompute(const double *grid, long i0, long i1, const double *state, double *Q, double *V, double *A,
                 double *L, char *message, int message_size)
{
    fa_engine *e = fa_engine_new();
    if (!e) { copy_message(message, message_size, "out of memory for the C engine"); return -1; }
    int status = fa_engine_set_state(e, state);
    if (status != 0) copy_message(message, message_size, "recompute: the checkpoint state is invalid");
    if (status == 0) fa_engine_current(e, Q, V, A, L);
    for (long i = i0 + 1; status == 0 && i <= i1; ++i) {
        status = fa_engine_step_to(e, grid[i - 1], grid[i]);
        if (status == 0) {
            long r = i - i0;
            fa_engine_current(e, Q + r * FA_N, V + r * FA_N, A + r * FA_N, L + r * FA_M);
        } else {
            copy_message(message, message_size, fa_engine_message(e));
        }
    }
    fa_engine_free(e);
    return status;
}

/* The factorization's size of the Newton (which = 0) or initialization (which = 1) matrix of a
 * forward run of n_steps steps from t0 with parameters p (NULL: defaults): sizes[0] the stored
 * entries of the factors, sizes[1] the bytes held (fa_engine_factor_nnz / _matrix_bytes).
 * 0, or -1 with a message. */
int fa_matrix_sizes(double t0, double step, long n_steps, const double *p, int which, long *sizes, char *message,
                    int message_size)
{
    fa_engine *e = fa_engine_new();
    if (!e) { copy_message(message, message_size, "out of memory for the C engine"); return -1; }
    fa_settings s;
    fa_engine_settings_default(&s);
    s.step = step;
    if (p && FA_NP) memcpy(fa_engine_parameters(e), p, sizeof(double) * FA_NP);
    int status = fa_engine_initialize(e, t0, &s);
    for (long i = 1; status == 0 && i <= n_steps; ++i) status = fa_engine_step(e);
    if (status != 0) copy_message(message, message_size, fa_engine_message(e));
    sizes[0] = fa_engine_factor_nnz(e, which);
    sizes[1] = (long)fa_engine_matrix_bytes(e, which);
    fa_engine_free(e);
    return status;
}

int fa_sizes(int *sizes)
{
    sizes[0] = FA_N; sizes[1] = FA_M; sizes[2] = FA_NP; sizes[3] = FA_NY;
    return 0;
}
