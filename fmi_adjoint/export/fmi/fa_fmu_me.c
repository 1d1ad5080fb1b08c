/* fmi-adjoint: the Model Exchange core of an exported FMU, see fa_fmu_me.h.
 *
 * The index-1 system is the last two blocks of the consistent-initialization residual
 * G(z), z = (q, mu, v, nu, a, lambda) (fmi_adjoint/compiled.py): rows 2n+2m .. 3n+2m-1 are
 * G5 = M a + C_q^T lambda - Q, rows 3n+2m .. 3n+3m-1 are G6 = C_q a + (C_q v)_q v + 2 C_qt v
 * + C_tt.  Neither depends on mu or nu, and both are linear in (a, lambda) with the matrix
 * K = [[M, C_q^T], [C_q, 0]] (the engine's Newton matrix at c_m = 1, bh2 = gh = 0).  Writing
 * H(q, v, t, p; a, lambda) for these rows, H = 0 gives
 *     (a, lambda) = -K^-1 H(q, v, t, p; 0, 0),
 *     d(a, lambda) = -K^-1 (H_q dq + H_v dv + H_p dp),
 * with H_q, H_v, H_p the rows of dG/dz and dG/dp (fa_init_jacobians) at the solution.  The
 * adjoint product solves with K^T.  Rows G2 = C(q) and G4 = C_q v + C_t of the same residual
 * measure the drift.
 */
#include "fa_fmu_me.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define NK (FA_N + FA_M)
#define ONE(x) ((x) > 0 ? (x) : 1)
/* First row of H (G5) in G, and the columns of q and v in z. */
#define H_ROW (2 * FA_N + 2 * FA_M)
#define V_COL (FA_N + FA_M)
/* The projection iterates until the violation is this fraction of the tolerance, so that
 * the integration restarts well inside the band that triggers the next projection. */
#define PROJECTION_FRACTION 1e-3

struct fa_me {
    double t, tolerance;
    double p[ONE(FA_NP)], q[FA_N], v[FA_N];
    double w[NK];       /* (a, lambda) at (t, q, v, p) when solved */
    int solved;         /* w and the factorization of kkt belong to the current (t, q, v, p) */
    int linearized;     /* Gz, Gp and the output Jacobians likewise */
    fa_jacobian_values jac;
    fa_matrix kkt;
    double z[FA_NZ], G[FA_NZ], rhs[NK];
    double Gz[ONE(FA_NNZ_G_z)], Gp[ONE(FA_NNZ_G_p)];
    double Yq[ONE(FA_NNZ_Y_q)], Yv[ONE(FA_NNZ_Y_v)], Ya[ONE(FA_NNZ_Y_a)], Ylam[ONE(FA_NNZ_Y_lam)];
    double Yp[ONE(FA_NNZ_Y_p)];
    char message[512];
};

int fa_me_supported(char *message, size_t size)
{
    size_t used = 0;
    int refused = 0;
    if (size) message[0] = '\0';
    for (int k = 0; k < FA_N; ++k) {
        int mass = 0, constrained = 0;
        for (int e = 0; e < FA_NNZ_M; ++e) mass |= fa_M_row[e] == k || fa_M_col[e] == k;
        for (int e = 0; e < FA_NNZ_Cq; ++e) constrained |= fa_Cq_col[e] == k;
        if (mass || constrained) continue;
        if (!refused && size) {
            int w = snprintf(message, size, "model '%s' cannot run as Model Exchange: the coordinates without "
                             "mass and without a constraint (", FA_MODEL_NAME);
            used = w > 0 ? (size_t)w : 0;
        } else if (used < size) {
            int w = snprintf(message + used, size - used, ", ");
            used += w > 0 ? (size_t)w : 0;
        }
        if (used < size) {
            int w = snprintf(message + used, size - used, "'%s'", fa_coordinate_names[k]);
            used += w > 0 ? (size_t)w : 0;
        }
        refused = 1;
    }
    if (refused && used < size)
        snprintf(message + used, size - used, ") have an algebraic force balance, which makes the index-1 "
                 "matrix [[M, C_q^T], [C_q, 0]] singular; give them a mass or export Co-Simulation only");
    return refused ? -1 : 0;
}

fa_me *fa_me_new(void)
{
    fa_me *me = (fa_me *)calloc(1, sizeof(fa_me));
    if (!me) return NULL;
    if (fa_kkt_alloc(&me->kkt) != 0) { free(me); return NULL; }
    memcpy(me->p, fa_default_parameters, sizeof(double) * ONE(FA_NP));
    me->tolerance = FA_ME_DRIFT_TOLERANCE;
    return me;
}

void fa_me_free(fa_me *me)
{
    if (me) fa_matrix_release(&me->kkt);
    free(me);
}

const char *fa_me_message(const fa_me *me) { return me->message; }
double fa_me_time(const fa_me *me) { return me->t; }
const double *fa_me_parameters(const fa_me *me) { return me->p; }
double fa_me_drift_tolerance(const fa_me *me) { return me->tolerance; }

static void invalidate(fa_me *me) { me->solved = me->linearized = 0; }

void fa_me_set_time(fa_me *me, double t) { me->t = t; invalidate(me); }
void fa_me_set_drift_tolerance(fa_me *me, double tolerance) { me->tolerance = tolerance; }

void fa_me_set_states(fa_me *me, const double *x)
{
    memcpy(me->q, x, sizeof(double) * FA_N);
    memcpy(me->v, x + FA_N, sizeof(double) * FA_N);
    invalidate(me);
}

void fa_me_get_states(const fa_me *me, double *x)
{
    memcpy(x, me->q, sizeof(double) * FA_N);
    memcpy(x + FA_N, me->v, sizeof(double) * FA_N);
}

void fa_me_set_parameters(fa_me *me, const double *p)
{
    memcpy(me->p, p, sizeof(double) * FA_NP);
    invalidate(me);
}

/* b = (t, tolerance, q, v, p). */
size_t fa_me_state_size(void) { return 2 + 2 * FA_N + ONE(FA_NP); }

void fa_me_get_state(const fa_me *me, double *b)
{
    b[0] = me->t;
    b[FA_ME_STATE_TOLERANCE] = me->tolerance;
    memcpy(b + 2, me->q, sizeof(double) * FA_N);
    memcpy(b + 2 + FA_N, me->v, sizeof(double) * FA_N);
    memcpy(b + 2 + 2 * FA_N, me->p, sizeof(double) * ONE(FA_NP));
}

int fa_me_drift_tolerance_valid(double tolerance)
{
    return isfinite(tolerance) && tolerance >= FA_ME_DRIFT_TOLERANCE_MIN;
}

int fa_me_state_valid(const double *b)
{
    for (size_t i = 0; i < fa_me_state_size(); ++i)
        if (!isfinite(b[i])) return 0;
    return fa_me_drift_tolerance_valid(b[FA_ME_STATE_TOLERANCE]);
}

void fa_me_set_state(fa_me *me, const double *b)
{
    me->t = b[0];
    me->tolerance = b[FA_ME_STATE_TOLERANCE];
    memcpy(me->q, b + 2, sizeof(double) * FA_N);
    memcpy(me->v, b + 2 + FA_N, sizeof(double) * FA_N);
    memcpy(me->p, b + 2 + 2 * FA_N, sizeof(double) * ONE(FA_NP));
    invalidate(me);
}

int fa_me_initialize(fa_me *me, double t0)
{
    fa_engine *engine = fa_engine_new();
    if (!engine) { snprintf(me->message, sizeof me->message, "out of memory"); return -1; }
    memcpy(fa_engine_parameters(engine), me->p, sizeof(double) * FA_NP);
    int status = fa_engine_initialize(engine, t0, NULL);
    if (status == 0) {
        double a[FA_N], lam[ONE(FA_M)];
        fa_engine_current(engine, me->q, me->v, a, lam);
        me->t = t0;
        invalidate(me);
    } else {
        snprintf(me->message, sizeof me->message, "%s", fa_engine_message(engine));
    }
    fa_engine_free(engine);
    return status;
}

static int all_finite(const double *x, int n)
{
    for (int i = 0; i < n; ++i) if (!isfinite(x[i])) return 0;
    return 1;
}

/* z = (q, 0, v, 0, a, lambda) with (a, lambda) = w, or zero without w. */
static void fill_z(fa_me *me, const double *w)
{
    memset(me->z, 0, sizeof me->z);
    memcpy(me->z, me->q, sizeof(double) * FA_N);
    memcpy(me->z + V_COL, me->v, sizeof(double) * FA_N);
    if (w) memcpy(me->z + H_ROW, w, sizeof(double) * NK);
}

static void residual(fa_me *me, const double *w)
{
    const double *z = me->z;
    fill_z(me, w);
    fa_init_residual(z, z + FA_N, z + V_COL, z + V_COL + FA_N, z + H_ROW, z + H_ROW + FA_N, me->t, me->p, me->G);
}

/* Factor K = [[M, C_q^T], [C_q, 0]] at the current q (M and C_q depend on q only; a and lambda
 * enter J_M and K, which bh2 = 0 leaves out). */
static int factor(fa_me *me)
{
    double zero[NK];
    memset(zero, 0, sizeof zero);
    fa_jacobians_at(me->q, me->v, zero, zero + FA_N, me->t, me->p, &me->jac);
    if (!all_finite(me->jac.M, FA_NNZ_M) || !all_finite(me->jac.Cq, FA_NNZ_Cq)
        || fa_kkt_factor(&me->kkt, &me->jac, 1.0, 0.0, 0.0) != 0) {
        snprintf(me->message, sizeof me->message, "model '%s' at t = %.9g s: the matrix [[M, C_q^T], [C_q, 0]] is "
                 "singular or not finite (redundant constraints, a singular configuration or a zero mass); "
                 "check the state and the parameter values", FA_MODEL_NAME, me->t);
        return -1;
    }
    return 0;
}

static double max_abs(const double *x, int n)
{
    double m = 0.0;
    for (int i = 0; i < n; ++i) m = fmax(m, fabs(x[i]));
    return m;
}

/* (a, lambda) = -K^-1 H(0, 0): one solve, since H is linear in (a, lambda). */
static int solve(fa_me *me)
{
    if (me->solved) return 0;
    if (!all_finite(me->q, FA_N) || !all_finite(me->v, FA_N) || !all_finite(me->p, FA_NP) || !isfinite(me->t)) {
        snprintf(me->message, sizeof me->message, "model '%s': the time, a state or a parameter is NaN or infinite",
                 FA_MODEL_NAME);
        return -1;
    }
    residual(me, NULL);
    for (int i = 0; i < NK; ++i) me->w[i] = -me->G[H_ROW + i];
    if (factor(me) != 0) return -1;
    fa_kkt_solve(&me->kkt, me->w, 0);
    if (!all_finite(me->w, NK)) {
        snprintf(me->message, sizeof me->message, "model '%s' at t = %.9g s: the accelerations are not finite; "
                 "check the state and the parameter values", FA_MODEL_NAME, me->t);
        return -1;
    }
    me->solved = 1;
    return 0;
}

static int linearize(fa_me *me)
{
    if (me->linearized) return 0;
    if (solve(me) != 0) return -1;
    const double *z = me->z, *a = me->w, *lam = me->w + FA_N;
    fill_z(me, me->w);
    fa_init_jacobians(z, z + FA_N, z + V_COL, z + V_COL + FA_N, z + H_ROW, z + H_ROW + FA_N, me->t, me->p, me->Gz,
                      me->Gp);
    fa_output_jacobians(me->q, me->v, a, lam, me->t, me->p, me->Yq, me->Yv, me->Ya, me->Ylam, me->Yp);
    me->linearized = 1;
    return 0;
}

int fa_me_derivatives(fa_me *me, double *xdot, double *lam)
{
    if (solve(me) != 0) return -1;
    memcpy(xdot, me->v, sizeof(double) * FA_N);
    memcpy(xdot + FA_N, me->w, sizeof(double) * FA_N);
    if (lam) memcpy(lam, me->w + FA_N, sizeof(double) * FA_M);
    return 0;
}

int fa_me_outputs(fa_me *me, double *y)
{
    if (solve(me) != 0) return -1;
    fa_outputs(me->q, me->v, me->w, me->w + FA_N, me->t, me->p, y);
    return 0;
}

/* Index of z column c in x = (q, v), or -1 (mu, nu, a, lambda). */
static int x_index(int c)
{
    if (c < FA_N) return c;
    if (c >= V_COL && c < V_COL + FA_N) return c - FA_M;
    return -1;
}

/* y += A x (transposed: x += A^T y) for a matrix given by its pattern and values. */
static void pattern_product(int nnz, const int *row, const int *col, const double *values, const double *x,
                            double *y, int transposed)
{
    for (int k = 0; k < nnz; ++k) {
        if (transposed) y[col[k]] += values[k] * x[row[k]];
        else y[row[k]] += values[k] * x[col[k]];
    }
}

int fa_me_directional(fa_me *me, const double *dx, const double *dp, double *dxdot, double *dy)
{
    if (linearize(me) != 0) return -1;
    double dw[NK];
    memset(dw, 0, sizeof dw);
    for (int k = 0; k < FA_NNZ_G_z; ++k) {
        const int r = fa_G_z_row[k] - H_ROW, j = x_index(fa_G_z_col[k]);
        if (r >= 0 && j >= 0 && dx) dw[r] -= me->Gz[k] * dx[j];
    }
    for (int k = 0; k < FA_NNZ_G_p; ++k) {
        const int r = fa_G_p_row[k] - H_ROW;
        if (r >= 0 && dp) dw[r] -= me->Gp[k] * dp[fa_G_p_col[k]];
    }
    fa_kkt_solve(&me->kkt, dw, 0);
    if (dxdot) {
        for (int i = 0; i < FA_N; ++i) dxdot[i] = dx ? dx[FA_N + i] : 0.0;
        memcpy(dxdot + FA_N, dw, sizeof(double) * FA_N);
    }
    if (dy) {
        memset(dy, 0, sizeof(double) * FA_NY);
        if (dx) {
            pattern_product(FA_NNZ_Y_q, fa_Y_q_row, fa_Y_q_col, me->Yq, dx, dy, 0);
            pattern_product(FA_NNZ_Y_v, fa_Y_v_row, fa_Y_v_col, me->Yv, dx + FA_N, dy, 0);
        }
        if (dp) pattern_product(FA_NNZ_Y_p, fa_Y_p_row, fa_Y_p_col, me->Yp, dp, dy, 0);
        pattern_product(FA_NNZ_Y_a, fa_Y_a_row, fa_Y_a_col, me->Ya, dw, dy, 0);
        pattern_product(FA_NNZ_Y_lam, fa_Y_lam_row, fa_Y_lam_col, me->Ylam, dw + FA_N, dy, 0);
    }
    return all_finite(dw, NK) ? 0 : -1;
}

int fa_me_adjoint(fa_me *me, const double *wxdot, const double *wy, double *gx, double *gp)
{
    if (linearize(me) != 0) return -1;
    double s[NK], x[FA_ME_NX], p[ONE(FA_NP)];
    memset(s, 0, sizeof s);
    memset(x, 0, sizeof x);
    memset(p, 0, sizeof p);
    if (wxdot) {
        memcpy(x + FA_N, wxdot, sizeof(double) * FA_N); /* xdot_1 = v */
        memcpy(s, wxdot + FA_N, sizeof(double) * FA_N);  /* xdot_2 = a */
    }
    if (wy) {
        pattern_product(FA_NNZ_Y_q, fa_Y_q_row, fa_Y_q_col, me->Yq, wy, x, 1);
        pattern_product(FA_NNZ_Y_v, fa_Y_v_row, fa_Y_v_col, me->Yv, wy, x + FA_N, 1);
        pattern_product(FA_NNZ_Y_p, fa_Y_p_row, fa_Y_p_col, me->Yp, wy, p, 1);
        pattern_product(FA_NNZ_Y_a, fa_Y_a_row, fa_Y_a_col, me->Ya, wy, s, 1);
        pattern_product(FA_NNZ_Y_lam, fa_Y_lam_row, fa_Y_lam_col, me->Ylam, wy, s + FA_N, 1);
    }
    /* d(a, lambda) = -K^-1 H_(x,p) d(x, p): the weights of (a, lambda) go back through K^T. */
    fa_kkt_solve(&me->kkt, s, 1);
    for (int k = 0; k < FA_NNZ_G_z; ++k) {
        const int r = fa_G_z_row[k] - H_ROW, j = x_index(fa_G_z_col[k]);
        if (r >= 0 && j >= 0) x[j] -= me->Gz[k] * s[r];
    }
    for (int k = 0; k < FA_NNZ_G_p; ++k) {
        const int r = fa_G_p_row[k] - H_ROW;
        if (r >= 0) p[fa_G_p_col[k]] -= me->Gp[k] * s[r];
    }
    if (gx) memcpy(gx, x, sizeof x);
    if (gp) memcpy(gp, p, sizeof(double) * FA_NP);
    return all_finite(s, NK) ? 0 : -1;
}

/* ---- structural dependencies ---- */

/* The pattern of K = [[M, C_q^T], [C_q, 0]] as row adjacency lists (CSR). */
typedef struct {
    int start[NK + 1];
    int *cols;
} kkt_pattern;

static int kkt_pattern_build(kkt_pattern *k)
{
    const int nnz = FA_NNZ_M + 2 * FA_NNZ_Cq;
    int fill[NK];
    memset(k->start, 0, sizeof k->start);
    for (int e = 0; e < FA_NNZ_M; ++e) ++k->start[fa_M_row[e] + 1];
    for (int e = 0; e < FA_NNZ_Cq; ++e) { ++k->start[FA_N + fa_Cq_row[e] + 1]; ++k->start[fa_Cq_col[e] + 1]; }
    for (int i = 0; i < NK; ++i) k->start[i + 1] += k->start[i];
    k->cols = (int *)malloc(sizeof(int) * (size_t)ONE(nnz));
    if (!k->cols) return -1;
    memcpy(fill, k->start, sizeof fill);
    for (int e = 0; e < FA_NNZ_M; ++e) k->cols[fill[fa_M_row[e]]++] = fa_M_col[e];
    for (int e = 0; e < FA_NNZ_Cq; ++e) {
        k->cols[fill[FA_N + fa_Cq_row[e]]++] = fa_Cq_col[e];
        k->cols[fill[fa_Cq_col[e]]++] = FA_N + fa_Cq_row[e];
    }
    return 0;
}

/* Kuhn's augmenting path from row r (row_of[c]: the row matched to column c, or -1). */
static int augment(const kkt_pattern *k, int r, int *row_of, unsigned char *seen)
{
    for (int e = k->start[r]; e < k->start[r + 1]; ++e) {
        const int c = k->cols[e];
        if (seen[c]) continue;
        seen[c] = 1;
        if (row_of[c] < 0 || augment(k, row_of[c], row_of, seen)) { row_of[c] = r; return 1; }
    }
    return 0;
}

/* Row i of target |= row j of source (cols columns). */
static void or_row(unsigned char *target, const unsigned char *source, int cols)
{
    for (int c = 0; c < cols; ++c) target[c] |= source[c];
}

/* Knowns (x and p) each entry of w = (a, lambda) = -K^-1 H depends on, structurally.
 * (K^-1)_(i,r) = +-det(K without row r and column i) / det K is structurally non-zero iff
 * that minor keeps a perfect matching: given a perfect matching of K, iff the column
 * matched to row r is reachable from column i along "column c -> every column of the row
 * matched to c" (the alternating path that re-matches the minor).  Unlike "same connected
 * block", this knows that a coordinate fixed by a constraint (C = q_k - s(t)) has an
 * acceleration independent of the forces. */
static int w_dependencies(unsigned char *w_x, unsigned char *w_p)
{
    const int nx = FA_ME_NX, np = ONE(FA_NP);
    kkt_pattern k;
    int row_of[NK], col_of[NK], queue[NK];
    unsigned char seen[NK], *h_x = NULL, *h_p = NULL;
    int status = -1;
    if (kkt_pattern_build(&k) != 0) return -1;
    h_x = (unsigned char *)calloc((size_t)NK * (size_t)nx + 1, 1);
    h_p = (unsigned char *)calloc((size_t)NK * (size_t)np + 1, 1);
    if (!h_x || !h_p) goto done;
    for (int c = 0; c < NK; ++c) row_of[c] = -1;
    for (int r = 0; r < NK; ++r) {
        memset(seen, 0, sizeof seen);
        if (!augment(&k, r, row_of, seen)) goto done; /* structurally singular: refused elsewhere */
    }
    /* h_*[c]: the knowns of the H row matched to column c. */
    for (int c = 0; c < NK; ++c) col_of[row_of[c]] = c;
    for (int e = 0; e < FA_NNZ_G_z; ++e) {
        const int r = fa_G_z_row[e] - H_ROW, j = x_index(fa_G_z_col[e]);
        if (r >= 0 && j >= 0) h_x[(size_t)col_of[r] * nx + j] = 1;
    }
    for (int e = 0; e < FA_NNZ_G_p; ++e) {
        const int r = fa_G_p_row[e] - H_ROW;
        if (r >= 0) h_p[(size_t)col_of[r] * np + fa_G_p_col[e]] = 1;
    }
    for (int i = 0; i < NK; ++i) {
        int head = 0, tail = 0;
        memset(seen, 0, sizeof seen);
        seen[i] = 1;
        queue[tail++] = i;
        while (head < tail) {
            const int c = queue[head++], r = row_of[c];
            or_row(w_x + (size_t)i * nx, h_x + (size_t)c * nx, nx);
            or_row(w_p + (size_t)i * np, h_p + (size_t)c * np, np);
            for (int e = k.start[r]; e < k.start[r + 1]; ++e) {
                if (!seen[k.cols[e]]) { seen[k.cols[e]] = 1; queue[tail++] = k.cols[e]; }
            }
        }
    }
    status = 0;
done:
    free(k.cols);
    free(h_x);
    free(h_p);
    return status;
}

int fa_me_dependencies(unsigned char *xdot_x, unsigned char *xdot_p, unsigned char *y_x, unsigned char *y_p)
{
    const int nx = FA_ME_NX, np = ONE(FA_NP);
    unsigned char *w_x = (unsigned char *)calloc((size_t)NK * (size_t)nx + 1, 1);
    unsigned char *w_p = (unsigned char *)calloc((size_t)NK * (size_t)np + 1, 1);
    int status = w_x && w_p ? w_dependencies(w_x, w_p) : -1;
    if (status != 0) goto done;
    if (xdot_x) {
        memset(xdot_x, 0, (size_t)nx * nx);
        for (int i = 0; i < FA_N; ++i) {
            xdot_x[(size_t)i * nx + FA_N + i] = 1;
            memcpy(xdot_x + (size_t)(FA_N + i) * nx, w_x + (size_t)i * nx, (size_t)nx);
        }
    }
    if (xdot_p) {
        memset(xdot_p, 0, (size_t)nx * FA_NP);
        for (int i = 0; i < FA_N; ++i)
            memcpy(xdot_p + (size_t)(FA_N + i) * FA_NP, w_p + (size_t)i * np, (size_t)FA_NP);
    }
    if (y_x) {
        memset(y_x, 0, (size_t)FA_NY * nx);
        for (int e = 0; e < FA_NNZ_Y_q; ++e) y_x[(size_t)fa_Y_q_row[e] * nx + fa_Y_q_col[e]] = 1;
        for (int e = 0; e < FA_NNZ_Y_v; ++e) y_x[(size_t)fa_Y_v_row[e] * nx + FA_N + fa_Y_v_col[e]] = 1;
        for (int e = 0; e < FA_NNZ_Y_a; ++e)
            or_row(y_x + (size_t)fa_Y_a_row[e] * nx, w_x + (size_t)fa_Y_a_col[e] * nx, nx);
        for (int e = 0; e < FA_NNZ_Y_lam; ++e)
            or_row(y_x + (size_t)fa_Y_lam_row[e] * nx, w_x + (size_t)(FA_N + fa_Y_lam_col[e]) * nx, nx);
    }
    if (y_p) {
        memset(y_p, 0, (size_t)FA_NY * FA_NP);
        for (int e = 0; e < FA_NNZ_Y_p; ++e) y_p[(size_t)fa_Y_p_row[e] * FA_NP + fa_Y_p_col[e]] = 1;
        for (int e = 0; e < FA_NNZ_Y_a; ++e)
            for (int c = 0; c < FA_NP; ++c) y_p[(size_t)fa_Y_a_row[e] * FA_NP + c] |= w_p[(size_t)fa_Y_a_col[e] * np + c];
        for (int e = 0; e < FA_NNZ_Y_lam; ++e)
            for (int c = 0; c < FA_NP; ++c)
                y_p[(size_t)fa_Y_lam_row[e] * FA_NP + c] |= w_p[(size_t)(FA_N + fa_Y_lam_col[e]) * np + c];
    }
done:
    free(w_x);
    free(w_p);
    return status;
}

/* ---- drift and projection ---- */

/* Violations scaled by their references: rows G2 = C and G4 = C_q v + C_t of G. */
static void violations(fa_me *me, double *position, double *velocity)
{
    residual(me, NULL);
    *position = max_abs(me->G + FA_N, FA_M) / (1.0 + max_abs(me->q, FA_N));
    *velocity = max_abs(me->G + V_COL + FA_N, FA_M) / (1.0 + max_abs(me->v, FA_N));
}

void fa_me_drift(fa_me *me, double *position, double *velocity)
{
    double c, cv;
    violations(me, &c, &cv);
    if (position) *position = c;
    if (velocity) *velocity = cv;
}

void fa_me_completed_step(fa_me *me, int *enter_event_mode)
{
    double c, cv;
    violations(me, &c, &cv);
    *enter_event_mode = FA_M > 0 && (!(c <= me->tolerance) || !(cv <= me->tolerance));
}

/* One mass-orthogonal correction: [[M, C_q^T], [C_q, 0]] [d; mu] = [0; -g] gives the
 * smallest correction d in the M-norm with C_q d = -g (Bayo & Ledesma 1996, "Augmented
 * Lagrangian and mass-orthogonal projection methods for constrained multibody dynamics",
 * Nonlinear Dynamics 9, 113-130).  g: m values; target: q or v, corrected in place. */
static int correct(fa_me *me, const double *g, double *target)
{
    if (factor(me) != 0) return -1;
    memset(me->rhs, 0, sizeof me->rhs);
    for (int i = 0; i < FA_M; ++i) me->rhs[FA_N + i] = -g[i];
    fa_kkt_solve(&me->kkt, me->rhs, 0);
    if (!all_finite(me->rhs, FA_N)) return -1;
    for (int i = 0; i < FA_N; ++i) target[i] += me->rhs[i];
    return 0;
}

int fa_me_project(fa_me *me, int *changed)
{
    double c, cv, previous = INFINITY;
    *changed = 0;
    const double goal = PROJECTION_FRACTION * me->tolerance;
    invalidate(me);
    /* Positions: Newton on C(q) = 0 along mass-orthogonal corrections.  Newton converges
     * quadratically; a violation within the tolerance that no longer halves is the round-off
     * of C (a tight tolerance, large coordinates): as good as it gets. */
    for (int it = 0;; ++it) {
        violations(me, &c, &cv);
        if (c <= goal || (c <= me->tolerance && c > 0.5 * previous)) break;
        previous = c;
        if (it == FA_ME_PROJECTION_ITERATIONS || correct(me, me->G + FA_N, me->q) != 0) {
            snprintf(me->message, sizeof me->message, "model '%s' at t = %.9g s: the projection of the positions "
                     "onto the constraints did not converge in %d iterations (violation %.3g, drift tolerance "
                     "%.3g); the integrator drifted too far: tighten its tolerance, or raise me.drift_tolerance "
                     "if the violation is round-off", FA_MODEL_NAME, me->t, it, c, me->tolerance);
            invalidate(me);
            return -1;
        }
        *changed = 1;
    }
    /* Velocities: C_q v + C_t = 0 is linear in v, one correction at the projected q. */
    if (cv > goal) {
        if (correct(me, me->G + V_COL + FA_N, me->v) != 0) {
            snprintf(me->message, sizeof me->message, "model '%s' at t = %.9g s: the velocity projection failed "
                     "(singular constraint Jacobian)", FA_MODEL_NAME, me->t);
            invalidate(me);
            return -1;
        }
        *changed = 1;
    }
    invalidate(me);
    return 0;
}
