/* fmi-adjoint FMU runtime: shared part of the FMI 2 / FMI 3 Co-Simulation layers, see
 * fa_fmu_common.h. */
#include "fa_fmu_common.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmu_config.h"
#include "model.h"

#ifndef FA_INSTANTIATION_TOKEN
#error "fmu_config.h must define FA_INSTANTIATION_TOKEN"
#endif
#ifndef FA_STEP
#define FA_STEP FA_DEFAULT_STEP
#endif
#ifndef FA_SCHEME /* the integrator of the export (fa_engine.h) and its alpha or rho_inf */
#define FA_SCHEME FA_DEFAULT_SCHEME
#define FA_SCHEME_PARAMETER (FA_DEFAULT_SCHEME == FA_SCHEME_HHT ? FA_DEFAULT_ALPHA : FA_DEFAULT_RHO_INF)
#endif
#ifndef FA_REUSE_JACOBIAN /* 1: modified Newton (--newton modified), fa_settings.reuse_jacobian */
#define FA_REUSE_JACOBIAN 0
#endif
#ifndef FA_IS_INPUT /* 1 for the parameters with causality input, model order (fmu_config.h) */
#define FA_IS_INPUT {0}
#endif

static const unsigned char fa_is_input[FA_ONE(FA_NP)] = FA_IS_INPUT;

#define FA_FMU_MAGIC 0x46414d55u   /* "FAMU": live instance */
#define FA_STATE_MAGIC 0x46415354u /* "FAST": live FMU state */
#define FA_CAT_EVENTS 1u
#define FA_CAT_ERROR 2u
#define FA_CAT_ALL (FA_CAT_EVENTS | FA_CAT_ERROR)

/* ------------------------------------------------------------------------ logging -- */

static const char *const fa_mode_names[] = {"Instantiated mode", "Initialization Mode", "Step Mode",
                                            "Terminated mode", "the error state",
                                            "Intermediate Update Mode (only inputs may be set)"};

const char *fa_mode_name(fa_mode mode)
{
    return (unsigned)mode <= FA_MODE_INTERMEDIATE ? fa_mode_names[mode] : "an unknown mode";
}

static void fa_vlog(const fa_fmu *f, fa_status status, const char *category, const char *format, va_list args)
{
    if (!f || !f->emit) return;
    if (status == FA_OK) {
        unsigned bit = strcmp(category, FA_CATEGORY_EVENTS) == 0 ? FA_CAT_EVENTS : FA_CAT_ERROR;
        if (!f->logging_on || !(f->categories & bit)) return;
    }
    char message[1024];
    vsnprintf(message, sizeof message, format, args);
    f->emit(f, status, category, message);
}

void fa_log(const fa_fmu *f, fa_status status, const char *category, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    fa_vlog(f, status, category, format, args);
    va_end(args);
}

fa_status fa_fmu_error(const fa_fmu *f, const char *function, const char *format, ...)
{
    char text[896];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof text, format, args);
    va_end(args);
    fa_log(f, FA_ERROR, FA_CATEGORY_ERROR, "%s: %s", function, text);
    return FA_ERROR;
}

int fa_fmu_require(const fa_fmu *f, unsigned mask, const char *function)
{
    if (mask & FA_MASK(f->mode)) return 0;
    if (f->mode == FA_MODE_ERROR)
        fa_fmu_error(f, function, "not allowed in the error state (after a failed initialization or step); call "
                     "Reset, or restore an FMU state saved before the failure");
    else
        fa_fmu_error(f, function, "not allowed in %s", fa_mode_name(f->mode));
    return -1;
}

fa_status fa_fmu_unsupported(const fa_fmu *f, const char *function, const char *why)
{
    return fa_fmu_error(f, function, "not supported: %s", why);
}

fa_status fa_fmu_set_debug_logging(fa_fmu *f, int logging_on, size_t n, const char *const categories[],
                                   const char *function)
{
    unsigned selected = 0;
    if (n > 0 && !categories) return fa_fmu_error(f, function, "categories is NULL but nCategories = %lu",
                                                  (unsigned long)n);
    for (size_t i = 0; i < n; ++i) {
        const char *c = categories[i];
        if (c && strcmp(c, FA_CATEGORY_EVENTS) == 0) selected |= FA_CAT_EVENTS;
        else if (c && strcmp(c, FA_CATEGORY_ERROR) == 0) selected |= FA_CAT_ERROR;
        else return fa_fmu_error(f, function, "unknown log category '%s' (the FMU has '%s' and '%s')",
                                 c ? c : "(null)", FA_CATEGORY_EVENTS, FA_CATEGORY_ERROR);
    }
    f->logging_on = logging_on;
    f->categories = n > 0 ? selected : FA_CAT_ALL;
    return FA_OK;
}

/* ------------------------------------------------------------------ instance life -- */

static char *fa_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *copy = (char *)malloc(n);
    if (copy) memcpy(copy, s, n);
    return copy;
}

/* Every input held at its current value (no derivatives). */
static void fa_hold_inputs(fa_fmu *f)
{
    const double *p = f->engine ? fa_engine_parameters(f->engine) : fa_default_parameters;
    for (int k = 0; k < FA_NP; ++k) {
        f->input_value[k] = p[k];
        f->input_time[k] = 0.0;
        f->input_slope[k] = 0.0;
    }
}

int fa_fmu_setup(fa_fmu *f, const char *name, int has_time_vr, int logging_on, fa_emit_fn emit)
{
    f->name = fa_strdup(name ? name : "");
    f->engine = fa_engine_new();
    if (!f->name || !f->engine) {
        fa_fmu_release(f);
        return -1;
    }
    f->mode = FA_MODE_INSTANTIATED;
    f->start_time = 0.0;
    f->time = 0.0;
    f->preview_valid = 0;
    fa_hold_inputs(f);
    f->has_time_vr = has_time_vr;
    f->drift_tolerance = FA_ME_DRIFT_TOLERANCE;
    f->logging_on = logging_on;
    f->categories = FA_CAT_ALL;
    f->emit = emit;
    f->magic = FA_FMU_MAGIC;
    return 0;
}

void fa_fmu_release(fa_fmu *f)
{
    if (!f) return;
    f->magic = 0;
    fa_engine_free(f->engine);
    f->engine = NULL;
    free(f->name);
    f->name = NULL;
}

fa_fmu *fa_fmu_check(void *instance)
{
    fa_fmu *f = (fa_fmu *)instance;
    return f && f->magic == FA_FMU_MAGIC && f->engine ? f : NULL;
}

static void fa_settings_of_fmu(fa_settings *s)
{
    fa_engine_settings_default(s);
    s->step = FA_STEP;
    s->scheme = FA_SCHEME;
    if (FA_SCHEME == FA_SCHEME_GENERALIZED_ALPHA) s->rho_inf = FA_SCHEME_PARAMETER;
    else s->alpha = FA_SCHEME_PARAMETER;
    s->reuse_jacobian = FA_REUSE_JACOBIAN;
}

double fa_fmu_time(const fa_fmu *f)
{
    return FA_MASK(f->mode) & FA_MASK_SETUP ? f->start_time : f->time;
}

fa_status fa_fmu_set_start_time(fa_fmu *f, double start_time, const char *function)
{
    if (fa_fmu_require(f, FA_MASK(FA_MODE_INSTANTIATED), function)) return FA_ERROR;
    if (!isfinite(start_time)) return fa_fmu_error(f, function, "startTime = %g is not finite", start_time);
    if (start_time != f->start_time) f->preview_valid = 0;
    f->start_time = start_time;
    return FA_OK;
}

fa_status fa_fmu_enter_initialization(fa_fmu *f, const char *function)
{
    if (fa_fmu_require(f, FA_MASK(FA_MODE_INSTANTIATED), function)) return FA_ERROR;
    f->mode = FA_MODE_INITIALIZATION;
    return FA_OK;
}

fa_status fa_fmu_exit_initialization(fa_fmu *f, const char *function)
{
    if (fa_fmu_require(f, FA_MASK(FA_MODE_INITIALIZATION), function)) return FA_ERROR;
    fa_settings s;
    fa_settings_of_fmu(&s);
    f->preview_valid = 0;
    if (fa_engine_initialize(f->engine, f->start_time, &s) != 0) {
        f->mode = FA_MODE_ERROR;
        return fa_fmu_error(f, function, "the initialization at t = %.17g s failed: %s", f->start_time,
                            fa_engine_message(f->engine));
    }
    f->mode = FA_MODE_STEP;
    f->time = f->start_time;
    fa_log(f, FA_OK, FA_CATEGORY_EVENTS, "%s: consistent initial state of model '%s' at t = %.17g s (internal "
           "step %.17g s, %s %g)", function, FA_MODEL_NAME, f->start_time, (double)FA_STEP,
           FA_SCHEME == FA_SCHEME_GENERALIZED_ALPHA ? "generalized-alpha rho_inf" : "HHT alpha",
           (double)FA_SCHEME_PARAMETER);
    return FA_OK;
}

fa_status fa_fmu_exit_initialization_me(fa_fmu *f, fa_me *me, const char *function)
{
    fa_status s = fa_fmu_exit_initialization(f, function);
    if (s > FA_WARNING || !me) return s;
    fa_me_set_parameters(me, fa_engine_parameters(f->engine));
    if (fa_me_initialize(me, f->start_time) != 0) return fa_fmu_error(f, function, "%s", fa_me_message(me));
    return s;
}

static fa_status fa_unknown_vr(const fa_fmu *f, unsigned int vr, const char *function);

void fa_fmu_sync_me(const fa_fmu *f, fa_me *me)
{
    if (!me) return;
    fa_me_set_parameters(me, fa_engine_parameters(f->engine));
    fa_me_set_drift_tolerance(me, f->drift_tolerance);
}

fa_status fa_fmu_me_get_reals(fa_fmu *f, fa_me *me, const unsigned int vr[], size_t nvr, double value[],
                              const char *function)
{
    double x[FA_ME_NX], xdot[FA_ME_NX], lam[FA_ONE(FA_M)], y[FA_ONE(FA_NY)];
    fa_me_get_states(me, x);
    if (fa_me_derivatives(me, xdot, lam) != 0 || fa_me_outputs(me, y) != 0)
        return fa_fmu_error(f, function, "%s", fa_me_message(me));
    for (size_t i = 0; i < nvr; ++i) {
        const unsigned int r = vr[i];
        if (r == 0 && f->has_time_vr) value[i] = fa_me_time(me);
        else if (r >= 1 && r < 1 + FA_NP) value[i] = fa_me_parameters(me)[r - 1];
        else if (r >= 1 + FA_NP && r < FA_VR_Q) value[i] = y[r - 1 - FA_NP];
        else if (r >= FA_VR_Q && r < FA_VR_LAMBDA) value[i] = x[r - FA_VR_Q];
        else if (r >= FA_VR_LAMBDA && r < FA_VR_END) value[i] = lam[r - FA_VR_LAMBDA];
        else if (r >= FA_VR_A && r < FA_VR_A + FA_N) value[i] = xdot[FA_N + r - FA_VR_A];
        else if (FA_IS_DRIFT_TOLERANCE(r)) value[i] = f->drift_tolerance;
        else return fa_unknown_vr(f, r, function);
    }
    return FA_OK;
}

fa_status fa_fmu_derivative_product(fa_fmu *f, fa_me *me, const unsigned int unknowns[], size_t nu,
                                    const unsigned int knowns[], size_t nk, const double seed[], double result[],
                                    int adjoint, const char *function)
{
    if (!me)
        return fa_fmu_unsupported(f, function, "derivative products on an instance for Co-Simulation (instantiate "
                                  "it for Model Exchange)");
    /* At the core's state: after fmi2/fmi3ExitInitializationMode (the core is initialized there). */
    if (fa_fmu_require(f, FA_MASK(FA_MODE_STEP) | FA_MASK(FA_MODE_TERMINATED), function)) return FA_ERROR;
    if ((nk && (!knowns || !(adjoint ? result : seed))) || (nu && (!unknowns || !(adjoint ? seed : result))))
        return fa_fmu_error(f, function, "NULL array with nUnknowns = %lu, nKnowns = %lu", (unsigned long)nu,
                            (unsigned long)nk);
    /* nothing: the seed or weight of the drift tolerance (no derivative or output depends on it) */
    double dx[FA_ME_NX] = {0}, dp[FA_ONE(FA_NP)] = {0}, dxdot[FA_ME_NX] = {0}, dy[FA_ONE(FA_NY)] = {0}, nothing = 0.0;
    double **known = malloc((nk + nu + 1) * sizeof *known), **unknown = known + nk;
    if (!known) return fa_fmu_error(f, function, "out of memory");
    fa_status status = FA_OK;
    for (size_t k = 0; k < nk && status == FA_OK; ++k) {
        const unsigned int r = knowns[k];
        if (r >= 1 && r < 1 + FA_NP) known[k] = dp + r - 1;
        else if (r >= FA_VR_Q && r < FA_VR_LAMBDA) known[k] = dx + r - FA_VR_Q;
        else if (FA_IS_DRIFT_TOLERANCE(r)) known[k] = &nothing;
        else status = fa_fmu_error(f, function, "vr %u is not a known (the knowns are the states q, v with vr %d..%d "
                                   "and the parameters and inputs with vr 1..%d%s)", r, FA_VR_Q, FA_VR_LAMBDA - 1,
                                   FA_NP, FA_M > 0 ? ", and the drift tolerance" : "");
    }
    for (size_t u = 0; u < nu && status == FA_OK; ++u) {
        const unsigned int r = unknowns[u];
        if (r >= 1 + FA_NP && r < FA_VR_Q) unknown[u] = dy + r - 1 - FA_NP;
        else if (r >= FA_VR_V && r < FA_VR_LAMBDA) unknown[u] = dxdot + r - FA_VR_V;
        else if (r >= FA_VR_A && r < FA_VR_A + FA_N) unknown[u] = dxdot + FA_N + r - FA_VR_A;
        else status = fa_fmu_error(f, function, "vr %u is not an unknown (the unknowns are the outputs, the "
                                   "derivatives der(q) = v and der(v) with vr %d..%d)", r, FA_VR_A, FA_VR_A + FA_N - 1);
    }
    if (status == FA_OK && !adjoint) { /* J seed: seed over knowns, result over unknowns */
        for (size_t k = 0; k < nk; ++k) *known[k] += seed[k];
        if (fa_me_directional(me, dx, dp, dxdot, dy) != 0) status = fa_fmu_error(f, function, "%s", fa_me_message(me));
        for (size_t u = 0; u < nu && status == FA_OK; ++u) result[u] = *unknown[u];
    } else if (status == FA_OK) { /* J^T seed: seed over unknowns (accumulated), result over knowns */
        for (size_t u = 0; u < nu; ++u) *unknown[u] += seed[u];
        if (fa_me_adjoint(me, dxdot, dy, dx, dp) != 0) status = fa_fmu_error(f, function, "%s", fa_me_message(me));
        for (size_t k = 0; k < nk && status == FA_OK; ++k) result[k] = *known[k];
    }
    free(known);
    return status;
}

fa_status fa_fmu_terminate(fa_fmu *f, const char *function)
{
    if (fa_fmu_require(f, FA_MASK(FA_MODE_STEP), function)) return FA_ERROR;
    f->mode = FA_MODE_TERMINATED;
    fa_log(f, FA_OK, FA_CATEGORY_EVENTS, "%s: terminated at t = %.17g s", function, f->time);
    return FA_OK;
}

fa_status fa_fmu_reset(fa_fmu *f, const char *function)
{
    if (fa_fmu_require(f, FA_MASK_ALIVE | FA_MASK(FA_MODE_ERROR), function)) return FA_ERROR;
    fa_engine *fresh = fa_engine_new(); /* default parameters, uninitialized */
    if (!fresh) return fa_fmu_error(f, function, "out of memory");
    fa_engine_free(f->engine);
    f->engine = fresh;
    f->mode = FA_MODE_INSTANTIATED;
    f->start_time = 0.0;
    f->time = 0.0;
    f->preview_valid = 0;
    f->drift_tolerance = FA_ME_DRIFT_TOLERANCE;
    fa_hold_inputs(f);
    fa_log(f, FA_OK, FA_CATEGORY_EVENTS, "%s: reset to the instantiated state (default parameters)", function);
    return FA_OK;
}

/* The inputs with a derivative at time t (held inputs keep their value bit for bit). */
static void fa_interpolate_inputs(fa_fmu *f, double t)
{
    double *p = fa_engine_parameters(f->engine);
    for (int k = 0; k < FA_NP; ++k)
        if (f->input_slope[k] != 0.0) p[k] = f->input_value[k] + f->input_slope[k] * (t - f->input_time[k]);
}

/* One internal step of a communication step, from t_prev to t (the inputs evaluated at t).
 * With an intermediateUpdate callback (FMI 3) the importer first sets the inputs at t, in
 * Intermediate Update Mode: the implicit step evaluates the equations at its end time t. */
static fa_status fa_internal_step(fa_fmu *f, double t_prev, double t, const char *function)
{
    if (f->intermediate) {
        f->mode = FA_MODE_INTERMEDIATE;
        f->intermediate(f, t);
        if (f->mode != FA_MODE_INTERMEDIATE) { /* refused calls leave the mode; anything else is a defect */
            f->mode = FA_MODE_ERROR;
            return fa_fmu_error(f, function, "the mode changed inside the importer's intermediateUpdate callback");
        }
        f->mode = FA_MODE_STEP;
    }
    fa_interpolate_inputs(f, t);
    if (fa_engine_step_to(f->engine, t_prev, t) != 0) {
        f->mode = FA_MODE_ERROR;
        return fa_fmu_error(f, function, "the internal step from t = %.17g s to %.17g s failed: %s", t_prev, t,
                            fa_engine_message(f->engine));
    }
    f->time = t;
    return FA_OK;
}

/* The internal steps of a communication step t -> end (H = FA_STEP, the grid g_i = t0 + i H,
 * products as fa_engine_step and time_grid() in hht.py).
 *
 * Both ends on the grid: the grid steps, so that communication points on the grid give the
 * in-process run bit for bit.  Otherwise the communication step is divided into
 * n = max(1, round((end - t) / H)) equal steps, between H/2 and 3H/2 unless the
 * communication step itself is shorter: a grid point followed by an end off the grid is the
 * in-process engine's uneven last step (time_grid() lets the last step absorb the remainder,
 * so the data of `simulate` on its own time grid, 6 pi included, is reproduced bit for bit),
 * and a constant communication step gives a constant internal step.  After a shortened step
 * the FMU continues from the reached time; it is back on its grid when a communication
 * point lands on it.  (Stepping back onto the grid inside a communication step would change
 * the step size within every communication step, which costs HHT and generalized-alpha their
 * second order: measured on sdof at communication steps of 1.37 H and 2.6 H, first-order
 * convergence and errors 3-20 times those of equal steps.)  The internal steps shrink with the
 * communication step: the results converge with the integrator's order as the importer's
 * step shrinks.
 *
 * An end within round-off of a grid point (1e-9 s, relative beyond 1 s; at most 1e-3 H)
 * is moved onto it: an importer whose communication points carry round-off (times parsed
 * from text, sums of a step off in its last digits) stays on the grid, and no step of
 * round-off length is taken.  A communication step of round-off length leaves the state as
 * it is. */
fa_status fa_fmu_do_step(fa_fmu *f, double t_c, double h, double *reached, const char *function)
{
    if (reached) *reached = fa_fmu_time(f);
    if (fa_fmu_require(f, FA_MASK(FA_MODE_STEP), function)) return FA_ERROR;
    const double H = FA_STEP, t0 = f->start_time, t = f->time;
    if (!(h > 0.0) || !(h / H < 1e15))
        return fa_fmu_error(f, function, "communicationStepSize = %.17g s must be positive and finite (at most "
                            "1e15 internal steps of %.17g s)", h, H);
    if (!(fabs(t_c - t) <= 1e-9 * fmax(1.0, fabs(t))))
        return fa_fmu_error(f, function, "currentCommunicationPoint = %.17g s differs from the FMU's time %.17g s "
                            "(the end of the last communication step)", t_c, t);
    double end = t_c + h;
    const double m = nearbyint((end - t0) / H);
    const int end_on_grid = fabs(end - (t0 + H * m)) <= fmin(1e-9 * fmax(1.0, fabs(end)), 1e-3 * H);
    if (end_on_grid) end = t0 + H * m;
    if (!(end - t > 1e-9 * fmax(1.0, fabs(end)))) return FA_OK; /* a step of round-off length */
    const double j = nearbyint((t - t0) / H);
    double t_prev = t;
    fa_status status = FA_OK;
    if (t == t0 + H * j && end_on_grid) { /* on the grid */
        for (double i = j + 1.0; i < m && status == FA_OK; i += 1.0) {
            const double g = t0 + H * i;
            status = fa_internal_step(f, t_prev, g, function);
            t_prev = g;
        }
    } else { /* n equal steps */
        const double n = fmax(1.0, nearbyint((end - t) / H));
        for (double i = 1.0; i < n && status == FA_OK; i += 1.0) {
            const double next = t + (end - t) * (i / n);
            status = fa_internal_step(f, t_prev, next, function);
            t_prev = next;
        }
    }
    if (status == FA_OK) status = fa_internal_step(f, t_prev, end, function);
    if (reached) *reached = f->time;
    return status;
}

/* ------------------------------------------------------------------- variables ----- */

typedef enum {
    FA_VAR_TIME, FA_VAR_PARAMETER, FA_VAR_OUTPUT, FA_VAR_STATE, FA_VAR_ACCELERATION, FA_VAR_DRIFT_TOLERANCE,
    FA_VAR_UNKNOWN
} fa_var_kind;

static fa_var_kind fa_classify(const fa_fmu *f, unsigned int vr, size_t *index)
{
    if (vr == 0u) return f->has_time_vr ? FA_VAR_TIME : FA_VAR_UNKNOWN;
    if ((size_t)vr - 1u < (size_t)FA_NP) {
        *index = (size_t)vr - 1u;
        return FA_VAR_PARAMETER;
    }
    if ((size_t)vr - 1u - (size_t)FA_NP < (size_t)FA_NY) {
        *index = (size_t)vr - 1u - (size_t)FA_NP;
        return FA_VAR_OUTPUT;
    }
    if ((size_t)vr - (size_t)FA_VR_Q < (size_t)(FA_VR_END - FA_VR_Q)) { /* q, v, lambda: index into them */
        *index = (size_t)vr - (size_t)FA_VR_Q;
        return FA_VAR_STATE;
    }
    if (f->model_exchange && (size_t)vr - (size_t)FA_VR_A < (size_t)FA_N) { /* der(v): Model Exchange only */
        *index = (size_t)vr - (size_t)FA_VR_A;
        return FA_VAR_ACCELERATION;
    }
    /* Both interfaces: one model description serves both in an FMU with both (fa_fmu_common.h). */
    if (FA_IS_DRIFT_TOLERANCE(vr)) return FA_VAR_DRIFT_TOLERANCE;
    return FA_VAR_UNKNOWN;
}

static fa_status fa_unknown_vr(const fa_fmu *f, unsigned int vr, const char *function)
{
    char me[128] = "", tolerance[64] = "";
    if (f->model_exchange)
        snprintf(me, sizeof me, ", %d accelerations der(v) with vr %d..%d", FA_N, FA_VR_A, FA_VR_A + FA_N - 1);
    if (FA_M > 0) snprintf(tolerance, sizeof tolerance, ", the drift tolerance with vr %d", FA_VR_DRIFT_TOLERANCE);
    return fa_fmu_error(f, function, "unknown value reference %u (model '%s' has %s%d parameters/inputs with "
                        "vr 1..%d, %d outputs with vr %d..%d, %d coordinates, velocities and multipliers with "
                        "vr %d..%d%s%s)", vr, FA_MODEL_NAME, f->has_time_vr ? "time with vr 0, " : "", FA_NP, FA_NP,
                        FA_NY, FA_NP + 1, FA_NP + FA_NY, FA_VR_END - FA_VR_Q, FA_VR_Q, FA_VR_END - 1, me, tolerance);
}

/* Before ExitInitializationMode the engine is initialized on the fly ("preview") so that
 * outputs are the initial values; the preview is redone after a parameter change. */
static int fa_preview(fa_fmu *f, const char *function)
{
    if (f->preview_valid) return 0;
    fa_settings s;
    fa_settings_of_fmu(&s);
    if (fa_engine_initialize(f->engine, f->start_time, &s) != 0) {
        fa_fmu_error(f, function, "cannot compute the initial outputs at t = %.17g s: %s", f->start_time,
                     fa_engine_message(f->engine));
        return -1;
    }
    f->preview_valid = 1;
    return 0;
}

static fa_status fa_state_not_settable(const fa_fmu *f, unsigned int vr, size_t index, const char *function)
{
    const char *what = index < FA_N ? "position" : index < 2 * FA_N ? "velocity" : NULL;
    if (what)
        return fa_fmu_error(f, function, "vr %u is the %s of the coordinate '%s', a local variable of the FMU that "
                            "cannot be set (set the parameters of its initial state instead)", vr, what,
                            fa_coordinate_names[index % FA_N]);
    return fa_fmu_error(f, function, "vr %u is the Lagrange multiplier of constraint row %d, a local variable of "
                        "the FMU that cannot be set", vr, (int)(index - 2 * FA_N));
}

fa_status fa_fmu_get_reals(fa_fmu *f, const unsigned int vr[], size_t nvr, double value[], const char *function)
{
    if (fa_fmu_require(f, FA_MASK_ALIVE, function)) return FA_ERROR;
    if (nvr == 0) return FA_OK;
    if (!vr || !value) return fa_fmu_error(f, function, "NULL array with nvr = %lu", (unsigned long)nvr);
    int need_state = 0;
    size_t index;
    for (size_t i = 0; i < nvr; ++i) {
        fa_var_kind kind = fa_classify(f, vr[i], &index);
        if (kind == FA_VAR_UNKNOWN) return fa_unknown_vr(f, vr[i], function);
        if (kind == FA_VAR_OUTPUT || kind == FA_VAR_STATE || kind == FA_VAR_ACCELERATION) need_state = 1;
    }
    /* qvl: q, v, lambda (the layout of the value references from FA_VR_Q); a: accelerations. */
    double y[FA_ONE(FA_NY)], qvl[2 * FA_N + FA_ONE(FA_M)], a[FA_N];
    const double *p = fa_engine_parameters(f->engine);
    if (need_state) {
        if ((FA_MASK(f->mode) & FA_MASK_SETUP) && fa_preview(f, function) != 0) return FA_ERROR;
        fa_engine_current(f->engine, qvl, qvl + FA_N, a, qvl + 2 * FA_N);
        /* At the FMU's own time (fa_engine_outputs would take the engine's grid time). */
        fa_outputs(qvl, qvl + FA_N, a, qvl + 2 * FA_N, fa_fmu_time(f), p, y);
    }
    for (size_t i = 0; i < nvr; ++i) {
        switch (fa_classify(f, vr[i], &index)) {
        case FA_VAR_TIME: value[i] = fa_fmu_time(f); break;
        case FA_VAR_PARAMETER: value[i] = p[index]; break;
        case FA_VAR_OUTPUT: value[i] = y[index]; break;
        case FA_VAR_STATE: value[i] = qvl[index]; break;
        case FA_VAR_ACCELERATION: value[i] = a[index]; break; /* the initial unknowns der(v) (setup modes) */
        case FA_VAR_DRIFT_TOLERANCE: value[i] = f->drift_tolerance; break;
        default: break;
        }
    }
    return FA_OK;
}

fa_status fa_fmu_set_reals(fa_fmu *f, const unsigned int vr[], size_t nvr, const double value[],
                           const char *function)
{
    if (fa_fmu_require(f, FA_MASK_SETUP | FA_MASK(FA_MODE_STEP) | FA_MASK(FA_MODE_INTERMEDIATE), function))
        return FA_ERROR;
    if (nvr == 0) return FA_OK;
    if (!vr || !value) return fa_fmu_error(f, function, "NULL array with nvr = %lu", (unsigned long)nvr);
    size_t index;
    for (size_t i = 0; i < nvr; ++i) { /* check all first: nothing is set on error */
        const fa_var_kind kind = fa_classify(f, vr[i], &index);
        if (f->mode == FA_MODE_INTERMEDIATE && !(kind == FA_VAR_PARAMETER && fa_is_input[index]))
            return fa_fmu_error(f, function, "vr %u is not an input: in Intermediate Update Mode only the inputs "
                                "(intermediateUpdate=\"true\") may be set", vr[i]);
        switch (kind) {
        case FA_VAR_TIME:
            return fa_fmu_error(f, function, "vr 0 is the independent variable time and cannot be set");
        case FA_VAR_OUTPUT:
            return fa_fmu_error(f, function, "vr %u is the output '%s' and cannot be set", vr[i],
                                fa_output_names[index]);
        case FA_VAR_STATE:
            return fa_state_not_settable(f, vr[i], index, function);
        case FA_VAR_ACCELERATION:
            return fa_fmu_error(f, function, "vr %u is der(v) of the coordinate '%s', a derivative the FMU "
                                "computes; it cannot be set", vr[i], fa_coordinate_names[index]);
        case FA_VAR_UNKNOWN: return fa_unknown_vr(f, vr[i], function);
        case FA_VAR_PARAMETER:
            if (!isfinite(value[i]))
                return fa_fmu_error(f, function, "value %g for '%s' (vr %u) is not finite", value[i],
                                    fa_parameter_names[index], vr[i]);
            break;
        case FA_VAR_DRIFT_TOLERANCE:
            /* Accepted in every mode that takes parameters, Continuous-Time Mode included: no
               derivative or output depends on it, so a change makes nothing discontinuous; it
               decides only whether the next CompletedIntegratorStep asks for Event Mode. */
            if (!fa_me_drift_tolerance_valid(value[i]))
                return fa_fmu_error(f, function, "value %g for 'me.drift_tolerance' (vr %u) is not allowed: the drift "
                                    "tolerance must be a finite number >= %g (its min; the default is %g)", value[i],
                                    vr[i], FA_ME_DRIFT_TOLERANCE_MIN, FA_ME_DRIFT_TOLERANCE);
            break;
        }
    }
    double *p = fa_engine_parameters(f->engine);
    for (size_t i = 0; i < nvr; ++i) {
        const fa_var_kind kind = fa_classify(f, vr[i], &index);
        if (kind == FA_VAR_DRIFT_TOLERANCE) f->drift_tolerance = value[i];
        if (kind == FA_VAR_PARAMETER) {
            p[index] = value[i];
            /* A new value: held from now on until derivatives are given again; a derivative given
               at this same communication point (before the value: FMI 2 fixes no order) is kept. */
            const double now = fa_fmu_time(f);
            if (f->input_time[index] != now) f->input_slope[index] = 0.0;
            f->input_value[index] = value[i];
            f->input_time[index] = now;
        }
    }
    f->preview_valid = 0;
    return FA_OK;
}

fa_status fa_fmu_set_input_derivatives(fa_fmu *f, const unsigned int vr[], size_t nvr, const int order[],
                                       const double value[], const char *function)
{
    if (fa_fmu_require(f, FA_MASK_SETUP | FA_MASK(FA_MODE_STEP), function)) return FA_ERROR;
    if (nvr == 0) return FA_OK;
    if (!vr || !order || !value) return fa_fmu_error(f, function, "NULL array with nvr = %lu", (unsigned long)nvr);
    size_t index;
    for (size_t i = 0; i < nvr; ++i) { /* check all first: nothing is set on error */
        fa_var_kind kind = fa_classify(f, vr[i], &index);
        if (kind == FA_VAR_UNKNOWN) return fa_unknown_vr(f, vr[i], function);
        if (kind != FA_VAR_PARAMETER || !fa_is_input[index])
            return fa_fmu_error(f, function, "vr %u is not an input: only variables with causality input take "
                                "derivatives", vr[i]);
        if (order[i] != 1)
            return fa_fmu_error(f, function, "order %d for the input '%s' (vr %u): the FMU interpolates inputs "
                                "linearly and takes only the first derivative (order 1)", order[i],
                                fa_parameter_names[index], vr[i]);
        if (!isfinite(value[i]))
            return fa_fmu_error(f, function, "derivative %g for the input '%s' (vr %u) is not finite", value[i],
                                fa_parameter_names[index], vr[i]);
    }
    const double *p = fa_engine_parameters(f->engine);
    for (size_t i = 0; i < nvr; ++i) {
        fa_classify(f, vr[i], &index);
        f->input_value[index] = p[index]; /* u(t_c): the value set (or interpolated) at the current time */
        f->input_time[index] = fa_fmu_time(f);
        f->input_slope[index] = value[i];
    }
    return FA_OK;
}

fa_status fa_fmu_no_variables(const fa_fmu *f, const unsigned int vr[], size_t nvr, const char *type,
                              const char *function)
{
    if (nvr == 0) return FA_OK;
    if (vr) return fa_fmu_error(f, function, "unknown value reference %u: the FMU has no %s variables", vr[0], type);
    return fa_fmu_error(f, function, "the FMU has no %s variables", type);
}

/* ------------------------------------------------------------------ FMU states ----- */

/* data: [mode, start_time, preview_valid, time, input_value, input_time, input_slope (FA_NP
 * each), engine state..., model_exchange (1: saved by a Model Exchange instance, else 0), Model
 * Exchange core state... (for a Co-Simulation instance zeros but the drift tolerance, at
 * FA_ME_STATE_TOLERANCE)] */
#define FA_STATE_INPUTS 4
#define FA_STATE_EXTRA (FA_STATE_INPUTS + 3 * FA_NP)
#define FA_STATE_ME_FLAG (FA_STATE_EXTRA + fa_engine_state_size())
#define FA_STATE_ME (FA_STATE_ME_FLAG + 1)
typedef struct {
    unsigned magic;
    size_t n;
    double data[]; /* n values */
} fa_state;

/* Serialized: 8-byte magic, uint64 hash of the instantiation token, uint64 n, uint64
 * checksum of the payload, then n doubles (native byte order). */
static const char fa_serial_magic[8] = {'F', 'A', 'F', 'M', 'U', 'S', 'T', '1'};
#define FA_SERIAL_HEADER 32u

static size_t fa_state_n(void) { return FA_STATE_ME + fa_me_state_size(); }

static uint64_t fa_fnv1a(const void *data, size_t size)
{
    const unsigned char *b = (const unsigned char *)data;
    uint64_t hash = 14695981039346656037ull;
    for (size_t i = 0; i < size; ++i) {
        hash ^= b[i];
        hash *= 1099511628211ull;
    }
    return hash;
}

static fa_state *fa_state_check(const fa_fmu *f, void *state, const char *function)
{
    fa_state *s = (fa_state *)state;
    if (!s) {
        fa_fmu_error(f, function, "the FMU state is NULL");
        return NULL;
    }
    if (s->magic != FA_STATE_MAGIC || s->n != fa_state_n()) {
        fa_fmu_error(f, function, "the FMU state is not a live state of this FMU (freed, or of another FMU)");
        return NULL;
    }
    return s;
}

fa_status fa_fmu_get_state(fa_fmu *f, const fa_me *me, void **state, const char *function)
{
    if (fa_fmu_require(f, FA_MASK_ALIVE, function)) return FA_ERROR;
    if (!state) return fa_fmu_error(f, function, "the FMU state pointer is NULL");
    fa_state *s;
    if (*state) { /* a previously returned state: reuse its memory */
        if (!(s = fa_state_check(f, *state, function))) return FA_ERROR;
    } else {
        s = (fa_state *)malloc(sizeof(fa_state) + sizeof(double) * fa_state_n());
        if (!s) return fa_fmu_error(f, function, "out of memory");
        s->magic = FA_STATE_MAGIC;
        s->n = fa_state_n();
    }
    s->data[0] = (double)f->mode;
    s->data[1] = f->start_time;
    s->data[2] = (double)f->preview_valid;
    s->data[3] = f->time;
    for (int k = 0; k < FA_NP; ++k) {
        s->data[FA_STATE_INPUTS + k] = f->input_value[k];
        s->data[FA_STATE_INPUTS + FA_NP + k] = f->input_time[k];
        s->data[FA_STATE_INPUTS + 2 * FA_NP + k] = f->input_slope[k];
    }
    s->data[FA_STATE_ME_FLAG] = me ? 1.0 : 0.0;
    fa_engine_get_state(f->engine, s->data + FA_STATE_EXTRA);
    if (me) fa_me_get_state(me, s->data + FA_STATE_ME);
    else memset(s->data + FA_STATE_ME, 0, sizeof(double) * fa_me_state_size());
    s->data[FA_STATE_ME + FA_ME_STATE_TOLERANCE] = f->drift_tolerance;
    *state = s;
    return FA_OK;
}

static const char *fa_interface_name(int model_exchange)
{
    return model_exchange ? "Model Exchange" : "Co-Simulation";
}

fa_status fa_fmu_set_state(fa_fmu *f, fa_me *me, void *state, const char *function)
{
    if (fa_fmu_require(f, FA_MASK_ALIVE | FA_MASK(FA_MODE_ERROR), function)) return FA_ERROR;
    fa_state *s = fa_state_check(f, state, function);
    if (!s) return FA_ERROR;
    if ((s->data[FA_STATE_ME_FLAG] != 0.0) != (me != NULL))
        return fa_fmu_error(f, function, "the FMU state was saved by a %s instance, this is a %s instance; use a "
                            "state of this instance's interface", fa_interface_name(s->data[FA_STATE_ME_FLAG] != 0.0),
                            fa_interface_name(me != NULL));
    if (me && !fa_me_state_valid(s->data + FA_STATE_ME))
        return fa_fmu_error(f, function, "the FMU state holds an invalid Model Exchange state");
    if (!fa_me_drift_tolerance_valid(s->data[FA_STATE_ME + FA_ME_STATE_TOLERANCE]))
        return fa_fmu_error(f, function, "the FMU state holds an invalid drift tolerance");
    fa_settings own;
    fa_settings_of_fmu(&own);
    if (!fa_engine_state_matches(s->data + FA_STATE_EXTRA, &own))
        return fa_fmu_error(f, function, "the FMU state was saved under another integrator, its constant or its step "
                            "than this FMU's; use a state of this FMU");
    if (fa_engine_set_state(f->engine, s->data + FA_STATE_EXTRA) != 0)
        return fa_fmu_error(f, function, "the FMU state holds non-finite values");
    if (me) fa_me_set_state(me, s->data + FA_STATE_ME);
    f->drift_tolerance = s->data[FA_STATE_ME + FA_ME_STATE_TOLERANCE];
    f->mode = (fa_mode)(int)s->data[0];
    f->start_time = s->data[1];
    f->preview_valid = s->data[2] != 0.0;
    f->time = s->data[3];
    for (int k = 0; k < FA_NP; ++k) {
        f->input_value[k] = s->data[FA_STATE_INPUTS + k];
        f->input_time[k] = s->data[FA_STATE_INPUTS + FA_NP + k];
        f->input_slope[k] = s->data[FA_STATE_INPUTS + 2 * FA_NP + k];
    }
    fa_log(f, FA_OK, FA_CATEGORY_EVENTS, "%s: state restored (%s, t = %.17g s)", function, fa_mode_name(f->mode),
           fa_fmu_time(f));
    return FA_OK;
}

fa_status fa_fmu_free_state(fa_fmu *f, void **state, const char *function)
{
    if (!state || !*state) return FA_OK;
    fa_state *s = fa_state_check(f, *state, function);
    if (!s) return FA_ERROR;
    s->magic = 0;
    free(s);
    *state = NULL;
    return FA_OK;
}

fa_status fa_fmu_serialized_size(fa_fmu *f, void *state, size_t *size, const char *function)
{
    fa_state *s = fa_state_check(f, state, function);
    if (!s) return FA_ERROR;
    if (!size) return fa_fmu_error(f, function, "size is NULL");
    *size = FA_SERIAL_HEADER + sizeof(double) * s->n;
    return FA_OK;
}

static void fa_put_u64(unsigned char *b, uint64_t v) { memcpy(b, &v, 8); }
static uint64_t fa_get_u64(const unsigned char *b)
{
    uint64_t v;
    memcpy(&v, b, 8);
    return v;
}

fa_status fa_fmu_serialize(fa_fmu *f, void *state, unsigned char *buffer, size_t size, const char *function)
{
    fa_state *s = fa_state_check(f, state, function);
    if (!s) return FA_ERROR;
    const size_t needed = FA_SERIAL_HEADER + sizeof(double) * s->n;
    if (!buffer) return fa_fmu_error(f, function, "the buffer is NULL");
    if (size < needed)
        return fa_fmu_error(f, function, "the buffer has %lu bytes but the serialized state needs %lu",
                            (unsigned long)size, (unsigned long)needed);
    memcpy(buffer, fa_serial_magic, 8);
    fa_put_u64(buffer + 8, fa_fnv1a(FA_INSTANTIATION_TOKEN, strlen(FA_INSTANTIATION_TOKEN)));
    fa_put_u64(buffer + 16, (uint64_t)s->n);
    memcpy(buffer + FA_SERIAL_HEADER, s->data, sizeof(double) * s->n);
    fa_put_u64(buffer + 24, fa_fnv1a(buffer + FA_SERIAL_HEADER, sizeof(double) * s->n));
    return FA_OK;
}

fa_status fa_fmu_deserialize(fa_fmu *f, const unsigned char *buffer, size_t size, void **state,
                             const char *function)
{
    if (!state) return fa_fmu_error(f, function, "the FMU state pointer is NULL");
    if (!buffer) return fa_fmu_error(f, function, "the serialized state is NULL");
    const size_t n = fa_state_n(), needed = FA_SERIAL_HEADER + sizeof(double) * n;
    if (size < FA_SERIAL_HEADER || memcmp(buffer, fa_serial_magic, 8) != 0)
        return fa_fmu_error(f, function, "the data is not a serialized state of an fmi-adjoint FMU");
    if (fa_get_u64(buffer + 8) != fa_fnv1a(FA_INSTANTIATION_TOKEN, strlen(FA_INSTANTIATION_TOKEN)))
        return fa_fmu_error(f, function, "the serialized state belongs to another FMU (instantiation token differs)");
    if (fa_get_u64(buffer + 16) != (uint64_t)n || size != needed)
        return fa_fmu_error(f, function, "the serialized state has %lu bytes, expected %lu", (unsigned long)size,
                            (unsigned long)needed);
    if (fa_get_u64(buffer + 24) != fa_fnv1a(buffer + FA_SERIAL_HEADER, sizeof(double) * n))
        return fa_fmu_error(f, function, "the serialized state is corrupted (checksum mismatch)");
    fa_state *s = (fa_state *)malloc(sizeof(fa_state) + sizeof(double) * n);
    if (!s) return fa_fmu_error(f, function, "out of memory");
    memcpy(s->data, buffer + FA_SERIAL_HEADER, sizeof(double) * n);
    int valid = 1;
    for (size_t i = 0; i < n; ++i) valid = valid && isfinite(s->data[i]);
    double mode = s->data[0], preview = s->data[2], model_exchange = s->data[FA_STATE_ME_FLAG];
    if (!valid || !(mode == FA_MODE_INSTANTIATED || mode == FA_MODE_INITIALIZATION || mode == FA_MODE_STEP
                    || mode == FA_MODE_TERMINATED) || !(preview == 0.0 || preview == 1.0)
        || !(model_exchange == 0.0 || model_exchange == 1.0)) {
        free(s);
        return fa_fmu_error(f, function, "the serialized state holds invalid values");
    }
    s->magic = FA_STATE_MAGIC;
    s->n = n;
    *state = s;
    return FA_OK;
}
