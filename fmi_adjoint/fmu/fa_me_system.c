/* A Model Exchange FMU as the ODE system of the compiled Radau IIA loop (issue 30, part 6).
 *
 * The C side of fmi_adjoint/fmu/me_integration.py's FmuOdeSystem, for the calls of plain steps: the
 * right-hand side (fmiSetTime, fmiSetContinuousStates, the inputs interpolated as numpy.interp does,
 * fmiGetDerivatives), the state Jacobian (worker.state_jacobian: the FMU's directional derivatives
 * where trusted, else central differences), the event indicators, and the two hooks of an accepted
 * step: its stage Jacobians (and df/dt after a state event) when the run records partials
 * (FmuOdeSystem.accepted), then fmiCompletedIntegratorStep and the outputs at a sample time
 * (FmuOdeSystem.completed_step, record_outputs, _output_jacobian).  The FMU's functions are called
 * directly, through the pointers fmpy's loader resolved in this (the worker's) process; the worker's
 * call counter is advanced by one per FMI call, as worker.Progress.publish does.
 *
 * Every function returns 0, or nonzero when an FMI call failed (status above Warning) or the FMU
 * asked to terminate: the loop then hands the attempt to Python, which repeats the calls and raises
 * the worker's own error naming the call.  A refused directional derivative is not a failure: the
 * state's column is taken by differences from then on (`sources`), as in Python.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

typedef unsigned int fa_vr;
typedef int (*fmi2_set_time_fn)(void *, double);
typedef int (*fmi2_vector_fn)(void *, double *, size_t);          /* set states, get derivatives, indicators */
typedef int (*fmi2_values_fn)(void *, const fa_vr *, size_t, double *); /* get/set real */
typedef int (*fmi3_values_fn)(void *, const fa_vr *, size_t, double *, size_t); /* get/set float64 */
typedef int (*fmi2_completed_fn)(void *, int, int *, int *);
typedef int (*fmi3_completed_fn)(void *, unsigned char, unsigned char *, unsigned char *);
typedef int (*fmi2_directional_fn)(void *, const fa_vr *, size_t, const fa_vr *, size_t, const double *, double *);
typedef int (*fmi3_directional_fn)(void *, const fa_vr *, size_t, const fa_vr *, size_t, const double *, size_t,
                                   double *, size_t);

typedef struct {
    long fmi3;
    void *component;
    void *set_time, *set_states, *get_derivatives, *set_real, *get_real, *get_indicators, *completed, *directional;
    long n, n_indicators, n_inputs, n_outputs;
    const fa_vr *state_refs, *derivative_refs, *input_refs, *output_refs;
    long n_input_times;
    const double *input_times, *input_table; /* (n_input_times, n_inputs) */
    long *sources;                           /* per state: 1 the FMU's column, 0 differences (in and out) */
    long output_columns;                     /* dg/dx from the FMU's columns where trusted (in and out) */
    double probe_step;
    double c[3];         /* RADAU_C */
    long partials;       /* record the stage Jacobians */
    long event_start;    /* the next accepted step starts at a state event: its df/dt (in and out) */
    const double *stops; /* sorted sample times */
    long n_stops;
    double *left, *right, *gx_left, *gx_right; /* (n_stops, n_outputs[, n]) */
    double *rec_J;       /* (capacity, 3, n, n) */
    double *rec_ft;      /* (capacity, 3, n) */
    long *rec_has_ft;    /* (capacity,) */
    long state_columns, output_column_count; /* FMU columns used (ColumnCalls) */
    unsigned long long *counter;             /* the worker's call counter; may be NULL */
    double *work;        /* 6 n + n_inputs + 3 n_outputs doubles */
    long failed_call;    /* the first FMI call that failed (FA_CALL_...), 0 for none */
    long failed_status;  /* its status */
    double failed_t;     /* the time then */
} fa_fmu;

/* The calls a failure is named by (me_kernel.py's _CALLS, in this order). */
enum { FA_CALL_NONE, FA_CALL_SET_TIME, FA_CALL_SET_STATES, FA_CALL_SET_INPUTS, FA_CALL_GET_DERIVATIVES,
       FA_CALL_GET_INDICATORS, FA_CALL_COMPLETED, FA_CALL_GET_OUTPUTS, FA_CALL_TERMINATE };

#define FA_FMI_OK(status) ((status) <= 1) /* OK or Warning */

/* Record the first failure (Python raises it naming the call, without calling the FMU again: after
 * Error an FMU may refuse everything but Reset, FMI 2.0 sec. 2.1.3); returns 1. */
static int failed(fa_fmu *m, long call, int status, double t) {
    if (!m->failed_call) {
        m->failed_call = call;
        m->failed_status = status;
        m->failed_t = t;
    }
    return 1;
}

/* 0 for OK or Warning, else the failure recorded. */
static int checked(fa_fmu *m, long call, int status, double t) {
    return FA_FMI_OK(status) ? 0 : failed(m, call, status, t);
}

static void count_call(fa_fmu *m) {
    if (m->counter) ++*m->counter;
}

/* numpy.interp(t, times, column) (numpy/_core/src/multiarray/compiled_base.c, arr_interp) */
static double interpolate(const double *times, long size, const double *table, long stride, double t) {
    if (size == 1 || t < times[0]) return table[0];
    if (t >= times[size - 1]) return table[(size - 1) * stride];
    long lo = 0, hi = size - 1; /* times[lo] <= t < times[hi] */
    while (hi - lo > 1) {
        long mid = lo + (hi - lo) / 2;
        if (times[mid] <= t) lo = mid;
        else hi = mid;
    }
    const double y0 = table[lo * stride], y1 = table[(lo + 1) * stride];
    if (times[lo] == t) return y0;
    const double slope = (y1 - y0) / (times[lo + 1] - times[lo]);
    double y = slope * (t - times[lo]) + y0;
    if (y != y) {
        y = slope * (t - times[lo + 1]) + y1;
        if (y != y && y0 == y1) y = y0;
    }
    return y;
}

static int set_values(fa_fmu *m, const fa_vr *refs, long count, double *values) {
    count_call(m);
    if (m->fmi3) return ((fmi3_values_fn)m->set_real)(m->component, refs, (size_t)count, values, (size_t)count);
    return ((fmi2_values_fn)m->set_real)(m->component, refs, (size_t)count, values);
}

static int get_values(fa_fmu *m, const fa_vr *refs, long count, double *values) {
    count_call(m);
    if (m->fmi3) return ((fmi3_values_fn)m->get_real)(m->component, refs, (size_t)count, values, (size_t)count);
    return ((fmi2_values_fn)m->get_real)(m->component, refs, (size_t)count, values);
}

/* FmuOdeSystem.at: time, states, inputs */
static int at(fa_fmu *m, double t, const double *x) {
    count_call(m);
    if (checked(m, FA_CALL_SET_TIME, ((fmi2_set_time_fn)m->set_time)(m->component, t), t)) return 1;
    double *states = m->work; /* the FMI 2 signature takes a non-const pointer */
    memcpy(states, x, sizeof(double) * (size_t)m->n);
    count_call(m);
    if (checked(m, FA_CALL_SET_STATES, ((fmi2_vector_fn)m->set_states)(m->component, states, (size_t)m->n), t))
        return 1;
    if (m->n_inputs) {
        double *u = m->work + 6 * m->n;
        for (long k = 0; k < m->n_inputs; k++)
            u[k] = interpolate(m->input_times, m->n_input_times, m->input_table + k, m->n_inputs, t);
        if (checked(m, FA_CALL_SET_INPUTS, set_values(m, m->input_refs, m->n_inputs, u), t)) return 1;
    }
    return 0;
}

static int derivatives(fa_fmu *m, double t, double *f) {
    count_call(m);
    return checked(m, FA_CALL_GET_DERIVATIVES, ((fmi2_vector_fn)m->get_derivatives)(m->component, f, (size_t)m->n), t);
}

static int outputs_at(fa_fmu *m, double t, double *y) {
    return checked(m, FA_CALL_GET_OUTPUTS, get_values(m, m->output_refs, m->n_outputs, y), t);
}

/* fmiCompletedIntegratorStep at the point set; a request to terminate is a failure if
 * `terminate_fails` (a run; a replay ignores it, as me_sensitivities.replay does). */
static int completed_step(fa_fmu *m, double t, int *enter_event, int terminate_fails) {
    count_call(m);
    int status, terminate;
    if (m->fmi3) {
        unsigned char enter3 = 0, terminate3 = 0;
        status = ((fmi3_completed_fn)m->completed)(m->component, 0, &enter3, &terminate3);
        *enter_event = enter3 != 0;
        terminate = terminate3 != 0;
    } else {
        int enter2 = 0, terminate2 = 0;
        status = ((fmi2_completed_fn)m->completed)(m->component, 0, &enter2, &terminate2);
        *enter_event = enter2 != 0;
        terminate = terminate2 != 0;
    }
    if (checked(m, FA_CALL_COMPLETED, status, t)) return 1;
    return terminate && terminate_fails ? failed(m, FA_CALL_TERMINATE, 0, t) : 0;
}

int fa_fmu_rhs(void *self, double t, const double *x, double *f) {
    fa_fmu *m = self;
    return at(m, t, x) || derivatives(m, t, f);
}

int fa_fmu_indicators(void *self, double t, const double *x, double *z) {
    fa_fmu *m = self;
    if (at(m, t, x)) return 1;
    count_call(m);
    return checked(m, FA_CALL_GET_INDICATORS,
                   ((fmi2_vector_fn)m->get_indicators)(m->component, z, (size_t)m->n_indicators), t);
}

/* The FMU's column of `unknowns` by state j at the point set (0 ok, 1 refused). */
static int fmu_column(fa_fmu *m, const fa_vr *unknowns, long count, long j, double *column) {
    const double seed = 1.0;
    if (!m->directional) return 1;
    count_call(m);
    int status;
    if (m->fmi3)
        status = ((fmi3_directional_fn)m->directional)(m->component, unknowns, (size_t)count, m->state_refs + j, 1,
                                                       &seed, 1, column, (size_t)count);
    else
        status = ((fmi2_directional_fn)m->directional)(m->component, unknowns, (size_t)count, m->state_refs + j, 1,
                                                       &seed, column);
    return !FA_FMI_OK(status);
}

/* Values at the point set: the state derivatives or the outputs (0 ok, else the failure recorded). */
typedef int (*values_fn)(fa_fmu *m, double t, double *values);

/* Column j of d values/dx at (t, x) by central differences with the step of worker.PROBE_STEP,
 * `count` values into column[r * stride]; the FMU is left at a perturbed point. */
static int difference_column(fa_fmu *m, values_fn values, long count, double t, const double *x, long j,
                             double *plus, double *minus, double *column, long stride) {
    double *xp = m->work + m->n;
    const double d = m->probe_step * (fabs(x[j]) + 1.0);
    memcpy(xp, x, sizeof(double) * (size_t)m->n);
    xp[j] = x[j] + d;
    if (at(m, t, xp) || values(m, t, plus)) return 1;
    xp[j] = x[j] - d;
    if (at(m, t, xp) || values(m, t, minus)) return 1;
    for (long r = 0; r < count; r++) column[r * stride] = (plus[r] - minus[r]) / (2 * d);
    return 0;
}

/* worker.state_jacobian without outputs: J (n x n, row-major) at (t, x), the FMU left at (t, x). */
int fa_fmu_jacobian(void *self, double t, const double *x, double *J) {
    fa_fmu *m = self;
    const long n = m->n;
    double *plus = m->work + 2 * n, *minus = m->work + 3 * n, *column = m->work + 4 * n;
    for (long j = 0; j < n; j++) m->state_columns += m->sources[j] != 0;
    if (at(m, t, x)) return 1;
    for (long j = 0; j < n; j++) {
        if (m->sources[j]) {
            if (!fmu_column(m, m->derivative_refs, n, j, column)) {
                for (long a = 0; a < n; a++) J[a * n + j] = column[a];
                continue;
            }
            m->sources[j] = 0; /* refused: differences from now on */
        }
        if (difference_column(m, derivatives, n, t, x, j, plus, minus, J + j, n) || at(m, t, x)) return 1;
    }
    return 0;
}

/* FmuOdeSystem.accepted: the stage Jacobians (and df/dt after a state event) of record `index`. */
int fa_fmu_accepted(void *self, long index, double t0, double t1, const double *x0, const double *Z) {
    fa_fmu *m = self;
    if (!m->partials) return 0;
    const long n = m->n;
    const double h = t1 - t0;
    double *y = m->work + 5 * n;
    m->rec_has_ft[index] = m->event_start;
    for (long i = 0; i < 3; i++) {
        const double t = t0 + m->c[i] * h;
        for (long a = 0; a < n; a++) y[a] = x0[a] + Z[i * n + a];
        if (fa_fmu_jacobian(m, t, y, m->rec_J + (index * 3 + i) * n * n)) return 1;
    }
    if (m->event_start) { /* FmuOdeSystem._time_derivatives */
        double *plus = m->work + 2 * n, *minus = m->work + 3 * n;
        for (long i = 0; i < 3; i++) {
            const double t = t0 + m->c[i] * h;
            for (long a = 0; a < n; a++) y[a] = x0[a] + Z[i * n + a];
            const double d = m->probe_step * (fabs(t) + 1.0);
            if (fa_fmu_rhs(m, t + d, y, plus) || fa_fmu_rhs(m, t - d, y, minus)) return 1;
            for (long a = 0; a < n; a++) m->rec_ft[(index * 3 + i) * n + a] = (plus[a] - minus[a]) / (2 * d);
        }
    }
    m->event_start = 0;
    return 0;
}

/* FmuOdeSystem._output_jacobian: dg/dx (n_outputs x n, row-major) at (t, x), the FMU left there. */
static int output_jacobian(fa_fmu *m, double t, const double *x, double *G) {
    const long n = m->n, k = m->n_outputs;
    double *plus = m->work + 6 * n + m->n_inputs, *minus = plus + k, *column = minus + k;
    int differenced = 0;
    for (long pass = 0; pass < 2; pass++) {
        const int fmu = m->output_columns != 0;
        for (long j = 0; j < n; j++) {
            if (fmu && m->sources[j]) continue;
            if (difference_column(m, outputs_at, k, t, x, j, plus, minus, G + j, n)) return 1;
            differenced = 1;
        }
        if (differenced && at(m, t, x)) return 1;
        if (!fmu) return 0;
        long used = 0, refused = 0;
        for (long j = 0; j < n && !refused; j++) {
            if (!m->sources[j]) continue;
            refused = fmu_column(m, m->output_refs, k, j, column);
            for (long r = 0; r < k && !refused; r++) refused = !(column[r] - column[r] == 0.0); /* not finite */
            if (!refused) {
                for (long r = 0; r < k; r++) G[r * n + j] = column[r];
                used++;
            }
        }
        if (!refused) {
            m->output_column_count += used;
            return 0;
        }
        m->output_columns = 0; /* refused after the check: every column by differences */
        differenced = 0;
    }
    return 0;
}

static long stop_index(fa_fmu *m, double t) {
    long lo = 0, hi = m->n_stops;
    while (lo < hi) {
        long mid = lo + (hi - lo) / 2;
        if (m->stops[mid] < t) lo = mid + 1;
        else hi = mid;
    }
    return lo < m->n_stops && m->stops[lo] == t ? lo : -1;
}

/* FmuOdeSystem.completed_step: fmiCompletedIntegratorStep, then the outputs at a sample time. */
int fa_fmu_completed(void *self, double t1, const double *x1, int *enter_event) {
    fa_fmu *m = self;
    if (at(m, t1, x1) || completed_step(m, t1, enter_event, 1)) return 1;
    const long i = stop_index(m, t1);
    if (i < 0) return 0;
    const long k = m->n_outputs, n = m->n;
    if (at(m, t1, x1) || (k && outputs_at(m, t1, m->left + i * k))) return 1;
    memcpy(m->right + i * k, m->left + i * k, sizeof(double) * (size_t)k);
    if (m->partials && k) {
        if (output_jacobian(m, t1, x1, m->gx_left + i * k * n)) return 1;
        memcpy(m->gx_right + i * k * n, m->gx_left + i * k * n, sizeof(double) * (size_t)(k * n));
    }
    return 0;
}

/* The FMU's column of `unknowns` by the parameter `known`, NaN where refused (me_sensitivities._column). */
static void parameter_column(fa_fmu *m, const fa_vr *unknowns, long count, fa_vr known, double *column,
                             long stride) {
    const double seed = 1.0;
    double *values = m->work + 4 * m->n; /* n >= count for the derivatives; outputs use their own room */
    double *room = count > m->n ? m->work + 6 * m->n + m->n_inputs + 2 * m->n_outputs : values;
    int status = 2;
    if (m->directional) {
        count_call(m);
        if (m->fmi3)
            status = ((fmi3_directional_fn)m->directional)(m->component, unknowns, (size_t)count, &known, 1, &seed, 1,
                                                           room, (size_t)count);
        else
            status = ((fmi2_directional_fn)m->directional)(m->component, unknowns, (size_t)count, &known, 1, &seed,
                                                           room);
    }
    for (long r = 0; r < count; r++) column[r * stride] = FA_FMI_OK(status) ? room[r] : NAN;
}

/* me_sensitivities.replay over `count` recorded steps whose end nodes have no event: per step the
 * right-hand side at its stage points (F: (count, 3, n)) and the FMU's columns by the `k` parameters
 * `params` there (D: (count, 3, n, k)), then fmiCompletedIntegratorStep at the step's end and, at a
 * sample time, the outputs (left = right) and their parameter columns (Dout: (n_stops, n_outputs, k)).
 * t: (count, 2) the steps' (t0, t1); x0: (count, n); Z: (count, 3, n); x_end: (count, n).
 * Returns the steps replayed: `count`, or fewer when an FMI call failed (Python repeats that step). */
long fa_fmu_replay(void *self, long count, const double *t, const double *x0, const double *Z, const double *x_end,
                   const fa_vr *params, long k, double *F, double *D, double *left, double *right, double *Dout) {
    fa_fmu *m = self;
    const long n = m->n, outputs = m->n_outputs;
    double *y = m->work + 5 * n;
    for (long s = 0; s < count; s++) {
        const double t0 = t[2 * s], t1 = t[2 * s + 1], h = t1 - t0;
        for (long i = 0; i < 3; i++) {
            for (long a = 0; a < n; a++) y[a] = x0[s * n + a] + Z[(s * 3 + i) * n + a];
            if (fa_fmu_rhs(m, t0 + m->c[i] * h, y, F + (s * 3 + i) * n)) return s;
            for (long j = 0; j < k; j++)
                parameter_column(m, m->derivative_refs, n, params[j], D + (s * 3 + i) * n * k + j, k);
        }
        const double *end = x_end + s * n;
        int enter_event; /* the replay follows the recorded run: its events are Python's */
        if (at(m, t1, end) || completed_step(m, t1, &enter_event, 0)) return s;
        const long i = stop_index(m, t1);
        if (i < 0) continue;
        if (at(m, t1, end) || (outputs && outputs_at(m, t1, left + i * outputs))) return s;
        memcpy(right + i * outputs, left + i * outputs, sizeof(double) * (size_t)outputs);
        for (long j = 0; j < k; j++)
            parameter_column(m, m->output_refs, outputs, params[j], Dout + i * outputs * k + j, k);
    }
    return count;
}
