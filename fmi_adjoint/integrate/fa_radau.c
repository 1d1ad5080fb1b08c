/* The step loop of adaptive Radau IIA in C: fmi_adjoint/integrate/radau.py, compiled (issue 30, part 6).
 *
 * radau.py is the specification and the reference: this file takes the same decisions in the same
 * order (the trial end, the attempt of _attempt, the controller of _Walk.reject and _Walk.accept, the
 * bookkeeping of stops, held stops, time events and frozen nodes) for the *plain* steps of a run, the
 * ones with no event inside them.  Everything else stays in Python, which takes the next attempt
 * itself whenever this loop returns FA_PYTHON:
 *
 *   - an indicator that changes its domain over a trial step (the event search, radau._locate);
 *   - a step size that falls below the smallest step, or a frozen step that fails (the errors);
 *   - any failure of the system's functions (Python repeats the call and raises its own error).
 *
 * It returns FA_PENDING after committing a step that ends at a time event or at a step event
 * (completedIntegratorStep asked for event mode): Python runs the event iteration.  FA_CHECK asks
 * Python to run _Walk.check_progress (the step budget, the wall-time deadline, the progress window);
 * FA_FULL says the record buffers are full; FA_START says the derivatives at the start of the next step
 * could not be formed (Python forms them, and raises what radau._start_derivatives raises).
 *
 * The scheme's constants come from radau.py through fa_walk (one source).  The LU factorizations are
 * LAPACK's dgetrf/dgetrs, the very routines scipy.linalg.lu_factor/lu_solve call, passed in as
 * pointers (scipy.linalg.cython_lapack), so that no second LU lives here.  Matrices handed to LAPACK are
 * column-major; the Jacobian J0 is row-major (numpy's order), n x n.
 *
 * Nothing here prints, allocates outside the call, or keeps state between calls.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*fa_rhs_fn)(void *self, double t, const double *x, double *f);
typedef int (*fa_jacobian_fn)(void *self, double t, const double *x, double *J);
typedef int (*fa_indicators_fn)(void *self, double t, const double *x, double *z);
/* An accepted step (record index `index`): the system records what it needs (partials). */
typedef int (*fa_accepted_fn)(void *self, long index, double t0, double t1, const double *x0, const double *Z);
/* After an accepted step: the system's step hook (completedIntegratorStep, outputs at stops). */
typedef int (*fa_completed_fn)(void *self, double t1, const double *x1, int *enter_event);

typedef struct {
    void *self;
    fa_rhs_fn rhs;
    fa_jacobian_fn jacobian;
    fa_indicators_fn indicators;
    fa_accepted_fn accepted;
    fa_completed_fn completed;
} fa_ode;

typedef void (*fa_dgetrf_fn)(int *m, int *n, double *a, int *lda, int *ipiv, int *info);
typedef void (*fa_dgetrs_fn)(char *trans, int *n, int *nrhs, double *a, int *lda, int *ipiv, double *b, int *ldb,
                             int *info);

typedef struct {
    /* the scheme (radau.py's constants) */
    double A[9], c[3], gamma0, error_weights[3];
    double newton_tol, newton_stagnation;
    long newton_max;
    double safety, fac_min, fac_max, stretch, step_ulps, min_step_relative;
    long progress_window;
    fa_dgetrf_fn dgetrf;
    fa_dgetrs_fn dgetrs;
    /* the run */
    long n, n_indicators, frozen;
    double t0, t_end, rtol, max_step, deadline;
    const double *atol;
    const double *targets;
    long n_targets, target_index;
    double hold, time_event, h_proposed; /* hold, time_event: NaN for none */
    long max_attempts;
    /* the point (in and out): x, f0 = f(t, x), J0 = df/dx(t, x), z = indicators(t, x) */
    double t;
    double *x, *f0, *J0, *z;
    /* counters (in and out) */
    long attempts, rhs, jacobians, newton, rejected, unsolved;
    /* the record of accepted steps (out) */
    long capacity, count;
    double *rec_t;   /* (capacity, 2): t0, t1 */
    double *rec_x0;  /* (capacity, n) */
    double *rec_Z;   /* (capacity, 3, n) */
    double *rec_F;   /* (capacity, 3, n) */
    double *rec_err; /* (capacity,) */
    long *rec_iterations;
    long pending; /* FA_PENDING: 1 the last step ends at the time event, 2 at a step event */
} fa_walk;

enum { FA_DONE = 0, FA_CHECK = 1, FA_PYTHON = 2, FA_PENDING = 3, FA_FULL = 4, FA_START = 5, FA_NO_MEMORY = 6 };

static double monotonic(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

static int all_finite(const double *v, long k) {
    for (long i = 0; i < k; i++)
        if (!isfinite(v[i])) return 0;
    return 1;
}

/* LU factors of the column-major N x N matrix `a` in place; 0 for a singular or non-finite matrix
 * (radau._lu). */
static int factor(fa_walk *w, double *a, int N, int *ipiv) {
    if (!all_finite(a, (long)N * N)) return 0;
    int info = 0, lda = N;
    w->dgetrf(&N, &N, a, &lda, ipiv, &info);
    if (info < 0) return 0;
    for (int i = 0; i < N; i++)
        if (a[(long)i * N + i] == 0.0) return 0;
    return 1;
}

static void solve(fa_walk *w, double *lu, int N, int *ipiv, double *b) {
    char trans = 'N';
    int nrhs = 1, info = 0, lda = N, ldb = N;
    w->dgetrs(&trans, &N, &nrhs, lu, &lda, ipiv, b, &ldb, &info);
}

/* Workspace of one call. */
typedef struct {
    double *M, *E, *Z, *F, *dZ, *y, *raw, *x1, *z1, *floor;
    int *ipiv, *ipiv_e;
    double err;
    long iterations;
} attempt_space;

/* One trial step from (w->t, w->x) to t1 (radau._attempt): 1 converged with a finite error estimate
 * (s->Z, s->F, s->err, s->iterations), 0 failed (Newton), -1 the system failed. */
static int attempt(fa_walk *w, fa_ode *ode, double t1, attempt_space *s) {
    const long n = w->n;
    const int N = (int)(3 * n);
    const double t0 = w->t, h = t1 - t0;
    w->attempts++;
    /* I - h kron(A, J0), column-major: entry (i n + a, j n + b) at [(j n + b) N + i n + a] */
    for (long j = 0; j < 3; j++)
        for (long b = 0; b < n; b++) {
            double *column = s->M + (j * n + b) * N;
            for (long i = 0; i < 3; i++)
                for (long a = 0; a < n; a++)
                    column[i * n + a] = ((i == j && a == b) ? 1.0 : 0.0) - h * w->A[i * 3 + j] * w->J0[a * n + b];
        }
    if (!factor(w, s->M, N, s->ipiv)) return 0;
    const double times[3] = {t0 + w->c[0] * h, t0 + w->c[1] * h, t1};
    for (long j = 0; j < 3; j++)
        for (long a = 0; a < n; a++) s->Z[j * n + a] = (w->c[j] * h) * w->f0[a];
    for (long a = 0; a < n; a++) s->floor[a] = fabs(w->x[a]) + w->atol[a] / w->rtol;
    double previous = INFINITY;
    int converged = 0;
    long iterations = 0;
    for (long k = 0; k < w->newton_max; k++) {
        iterations++;
        w->newton++;
        int finite = 1;
        for (long j = 0; j < 3; j++) {
            for (long a = 0; a < n; a++) s->y[a] = w->x[a] + s->Z[j * n + a];
            w->rhs++;
            if (ode->rhs(ode->self, times[j], s->y, s->F + j * n)) return -1;
            finite = finite && all_finite(s->F + j * n, n);
        }
        if (!finite) break;
        for (long i = 0; i < 3; i++)
            for (long a = 0; a < n; a++) {
                double sum = 0.0;
                for (long j = 0; j < 3; j++) sum += w->A[i * 3 + j] * s->F[j * n + a];
                s->dZ[i * n + a] = -(s->Z[i * n + a] - h * sum);
            }
        solve(w, s->M, N, s->ipiv, s->dZ);
        for (long i = 0; i < 3 * n; i++) s->Z[i] += s->dZ[i];
        if (!all_finite(s->Z, 3 * n)) break;
        double update = 0.0;
        for (long a = 0; a < n; a++) {
            double big = 0.0;
            for (long i = 0; i < 3; i++) big = fmax(big, fabs(s->Z[i * n + a]));
            for (long i = 0; i < 3; i++) {
                double u = fabs(s->dZ[i * n + a]) / (s->floor[a] + big);
                if (u > update || isnan(u)) update = u;
            }
        }
        if (update <= w->newton_tol) {
            converged = 1;
            break;
        }
        if (!(update < previous)) {
            converged = previous <= w->newton_stagnation;
            break;
        }
        previous = update;
    }
    s->iterations = iterations;
    if (!converged) return 0;
    /* (8.19)-(8.20) */
    for (long a = 0; a < n; a++) {
        double sum = 0.0;
        for (long j = 0; j < 3; j++) sum += w->error_weights[j] * s->Z[j * n + a];
        s->raw[a] = w->gamma0 * h * w->f0[a] + sum;
    }
    for (long b = 0; b < n; b++)
        for (long a = 0; a < n; a++)
            s->E[b * n + a] = (a == b ? 1.0 : 0.0) - (h * w->gamma0) * w->J0[a * n + b];
    if (!factor(w, s->E, (int)n, s->ipiv_e)) return 0;
    solve(w, s->E, (int)n, s->ipiv_e, s->raw);
    double sum = 0.0;
    for (long a = 0; a < n; a++) {
        s->x1[a] = w->x[a] + s->Z[2 * n + a];
        double scale = w->atol[a] + w->rtol * fmax(fabs(w->x[a]), fabs(s->x1[a]));
        double r = s->raw[a] / scale;
        sum += r * r;
    }
    s->err = sqrt(sum / (double)n);
    return isfinite(s->err) ? 1 : 0;
}

/* _Walk.trial_end */
static double trial_end(fa_walk *w) {
    const double t = w->t;
    while (w->targets[w->target_index] <= t) w->target_index++;
    double limit = w->targets[w->target_index];
    if (!isnan(w->hold)) limit = fmin(limit, w->hold);
    if (!isnan(w->time_event)) limit = fmin(limit, w->time_event);
    if (w->frozen) return limit;
    const double h = fmin(w->h_proposed, w->max_step), reach = limit - t;
    return (reach <= h || (reach <= (1.0 + w->stretch) * h && reach <= w->max_step)) ? limit : t + h;
}

/* radau._next_entry for a step that was not cut */
static long next_entry(fa_walk *w, double t1) {
    const long i = w->target_index;
    return (t1 >= w->targets[i] && i + 1 < w->n_targets) ? i + 1 : i;
}

static int differs(const double *z0, const double *z1, long k) {
    for (long i = 0; i < k; i++)
        if ((z0[i] > 0.0) != (z1[i] > 0.0)) return 1;
    return 0;
}

/* The counters and target of the walk before an attempt that Python repeats. */
typedef struct {
    long attempts, rhs, newton, target_index;
} undo_point;

static void undo(fa_walk *w, const undo_point *u) {
    w->attempts = u->attempts;
    w->rhs = u->rhs;
    w->newton = u->newton;
    w->target_index = u->target_index;
}

/* Plain steps from (w->t, w->x) until one of the FA_ codes above.  Python has run check_progress
 * before the call, so the first attempt is not checked again. */
int fa_radau_walk(fa_walk *w, fa_ode *ode) {
    const long n = w->n;
    attempt_space s;
    const long N = 3 * n;
    double *block = malloc(sizeof(double) * (size_t)(N * N + n * n + 3 * N + 4 * n + w->n_indicators + n));
    int *pivots = malloc(sizeof(int) * (size_t)(N + n));
    if (!block || !pivots) {
        free(block);
        free(pivots);
        return FA_NO_MEMORY;
    }
    s.M = block;
    s.E = s.M + N * N;
    s.Z = s.E + n * n;
    s.F = s.Z + N;
    s.dZ = s.F + N;
    s.y = s.dZ + N;
    s.raw = s.y + n;
    s.x1 = s.raw + n;
    s.floor = s.x1 + n;
    s.z1 = s.floor + n;
    s.ipiv = pivots;
    s.ipiv_e = pivots + N;
    int code = FA_DONE, first = 1;
    w->pending = 0;
    while (w->t < w->t_end) {
        if (!first && (w->attempts >= w->max_attempts || monotonic() > w->deadline ||
                       (w->attempts && w->attempts % w->progress_window == 0 && !w->frozen))) {
            code = FA_CHECK;
            break;
        }
        if (w->count >= w->capacity) {
            code = FA_FULL;
            break;
        }
        first = 0;
        const undo_point before = {w->attempts, w->rhs, w->newton, w->target_index};
        const double t1 = trial_end(w), h = t1 - w->t;
        const int outcome = attempt(w, ode, t1, &s);
        if (outcome < 0 || (outcome == 0 && w->frozen)) { /* Python repeats the attempt */
            undo(w, &before);
            code = FA_PYTHON;
            break;
        }
        if (outcome == 0 || (!w->frozen && s.err > 1.0)) { /* _Walk.reject */
            const double proposal = outcome == 0 ? 0.5 * h : h * fmax(w->fac_min, w->safety * pow(s.err, -0.25));
            const double t = w->t;
            const double ulp = nextafter(fabs(t), INFINITY) - fabs(t);
            const double floor_step = fmax(w->min_step_relative * fmax(fabs(t), w->t_end - w->t0), w->step_ulps * ulp);
            if (proposal < floor_step) { /* Python repeats it and raises */
                undo(w, &before);
                code = FA_PYTHON;
                break;
            }
            w->rejected++;
            w->unsolved += outcome == 0;
            w->h_proposed = proposal;
            continue;
        }
        /* _Walk.accept of a step with no state event */
        if (w->n_indicators) {
            if (ode->indicators(ode->self, t1, s.x1, s.z1) || !all_finite(s.z1, w->n_indicators) ||
                differs(w->z, s.z1, w->n_indicators)) {
                undo(w, &before);
                code = FA_PYTHON;
                break;
            }
        }
        const long index = w->count;
        int enter_event = 0;
        if (ode->accepted(ode->self, index, w->t, t1, w->x, s.Z) || ode->completed(ode->self, t1, s.x1, &enter_event)) {
            undo(w, &before);
            code = FA_PYTHON;
            break;
        }
        /* committed */
        if (!w->frozen) {
            const double factor_h = s.err == 0.0 ? w->fac_max
                                                 : fmin(w->fac_max, fmax(w->fac_min, w->safety * pow(s.err, -0.25)));
            w->h_proposed = h * factor_h;
        }
        if (w->frozen)
            w->target_index = next_entry(w, t1);
        else if (!isnan(w->hold) && t1 >= w->hold)
            w->hold = NAN;
        w->rec_t[2 * index] = w->t;
        w->rec_t[2 * index + 1] = t1;
        memcpy(w->rec_x0 + index * n, w->x, sizeof(double) * (size_t)n);
        memcpy(w->rec_Z + index * N, s.Z, sizeof(double) * (size_t)N);
        memcpy(w->rec_F + index * N, s.F, sizeof(double) * (size_t)N);
        w->rec_err[index] = s.err;
        w->rec_iterations[index] = s.iterations;
        w->count++;
        if (w->n_indicators) memcpy(w->z, s.z1, sizeof(double) * (size_t)w->n_indicators);
        w->t = t1;
        memcpy(w->x, s.x1, sizeof(double) * (size_t)n);
        if (!isnan(w->time_event) && t1 == w->time_event) {
            w->pending = 1;
        } else if (enter_event) {
            w->pending = 2;
        }
        if (w->pending) {
            code = FA_PENDING;
            break;
        }
        if (t1 < w->t_end) { /* radau._start_derivatives */
            w->rhs++;
            if (ode->rhs(ode->self, t1, w->x, w->f0) || !all_finite(w->f0, n)) {
                w->rhs--;
                code = FA_START;
                break;
            }
            w->jacobians++;
            if (ode->jacobian(ode->self, t1, w->x, w->J0)) {
                w->rhs--;
                w->jacobians--;
                code = FA_START;
                break;
            }
        }
    }
    free(block);
    free(pivots);
    return code;
}
