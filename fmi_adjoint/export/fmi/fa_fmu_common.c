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

#define FA_FMU_MAGIC 0x46414d55u   /* "FAMU": live instance */
#define FA_STATE_MAGIC 0x46415354u /* "FAST": live FMU state */
#define FA_CAT_EVENTS 1u
#define FA_CAT_ERROR 2u
#define FA_CAT_ALL (FA_CAT_EVENTS | FA_CAT_ERROR)

/* ------------------------------------------------------------------------ logging -- */

static const char *const fa_mode_names[] = {"Instantiated mode", "Initialization Mode", "Step Mode",
                                            "Terminated mode", "the error state"};

const char *fa_mode_name(fa_mode mode)
{
    return (unsigned)mode <= FA_MODE_ERROR ? fa_mode_names[mode] : "an unknown mode";
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
    f->preview_valid = 0;
    f->has_time_vr = has_time_vr;
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
    return FA_MASK(f->mode) & FA_MASK_SETUP ? f->start_time : fa_engine_time(f->engine);
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
    fa_log(f, FA_OK, FA_CATEGORY_EVENTS, "%s: consistent initial state of model '%s' at t = %.17g s (internal "
           "step %.17g s, %s %g)", function, FA_MODEL_NAME, f->start_time, (double)FA_STEP,
           FA_SCHEME == FA_SCHEME_GENERALIZED_ALPHA ? "generalized-alpha rho_inf" : "HHT alpha",
           (double)FA_SCHEME_PARAMETER);
    return FA_OK;
}

fa_status fa_fmu_terminate(fa_fmu *f, const char *function)
{
    if (fa_fmu_require(f, FA_MASK(FA_MODE_STEP), function)) return FA_ERROR;
    f->mode = FA_MODE_TERMINATED;
    fa_log(f, FA_OK, FA_CATEGORY_EVENTS, "%s: terminated at t = %.17g s", function, fa_engine_time(f->engine));
    return FA_OK;
}

fa_status fa_fmu_reset(fa_fmu *f, const char *function)
{
    fa_engine *fresh = fa_engine_new(); /* default parameters, uninitialized */
    if (!fresh) return fa_fmu_error(f, function, "out of memory");
    fa_engine_free(f->engine);
    f->engine = fresh;
    f->mode = FA_MODE_INSTANTIATED;
    f->start_time = 0.0;
    f->preview_valid = 0;
    fa_log(f, FA_OK, FA_CATEGORY_EVENTS, "%s: reset to the instantiated state (default parameters)", function);
    return FA_OK;
}

fa_status fa_fmu_do_step(fa_fmu *f, double t_c, double h, double *reached, const char *function)
{
    if (reached) *reached = fa_fmu_time(f);
    if (fa_fmu_require(f, FA_MASK(FA_MODE_STEP), function)) return FA_ERROR;
    const double step = FA_STEP, t = fa_engine_time(f->engine);
    const double ratio = h / step;
    if (!(h > 0.0) || !(ratio < 1e15))
        return fa_fmu_error(f, function, "communicationStepSize = %.17g s must be positive and a whole multiple of "
                            "the FMU's internal step %.17g s", h, step);
    if (!(fabs(t_c - t) <= 1e-9 * fmax(1.0, fabs(t))))
        return fa_fmu_error(f, function, "currentCommunicationPoint = %.17g s differs from the FMU's time %.17g s "
                            "(the FMU advances on the grid t0 + i * %.17g s)", t_c, t, step);
    /* The step count is taken from where the step ends, t_c + h, measured from the FMU's own
       time t, and the end point must lie on the FMU's grid with the tolerance the start point
       t_c has above (1e-9 s, relative beyond 1 s; at most 1e-3 of the step).  An importer
       whose communication points carry round-off (times parsed from text, or sums of a step
       off in its last digits) drifts from the grid by far more than the round-off of one h,
       and is served: exactly n internal steps are taken and the FMU's time stays on its grid.
       A genuinely non-multiple step keeps its error. */
    const double end = t_c + h, span = end - t;
    const long long n = llround(span / step);
    if (n < 1 || !(fabs(span - (double)n * step) <= fmin(1e-9 * fmax(1.0, fabs(end)), 1e-3 * step)))
        return fa_fmu_error(f, function, "communicationStepSize = %.17g s is not a whole multiple of the FMU's fixed "
                            "internal step %.17g s (nearest multiples: %.17g s, %.17g s); choose a communication "
                            "step of n * %.17g s", h, step, floor(ratio) > 0 ? floor(ratio) * step : step,
                            ceil(ratio) * step, step);
    for (long long i = 0; i < n; ++i) {
        if (fa_engine_step(f->engine) != 0) {
            f->mode = FA_MODE_ERROR;
            if (reached) *reached = fa_engine_time(f->engine);
            return fa_fmu_error(f, function, "step %lld of %lld from t = %.17g s failed: %s", i + 1, n, t,
                                fa_engine_message(f->engine));
        }
    }
    if (reached) *reached = fa_engine_time(f->engine);
    return FA_OK;
}

/* ------------------------------------------------------------------- variables ----- */

typedef enum { FA_VAR_TIME, FA_VAR_PARAMETER, FA_VAR_OUTPUT, FA_VAR_UNKNOWN } fa_var_kind;

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
    return FA_VAR_UNKNOWN;
}

static fa_status fa_unknown_vr(const fa_fmu *f, unsigned int vr, const char *function)
{
    return fa_fmu_error(f, function, "unknown value reference %u (model '%s' has %s%d parameters/inputs with "
                        "vr 1..%d and %d outputs with vr %d..%d)", vr, FA_MODEL_NAME,
                        f->has_time_vr ? "time with vr 0, " : "", FA_NP, FA_NP, FA_NY, FA_NP + 1, FA_NP + FA_NY);
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

fa_status fa_fmu_get_reals(fa_fmu *f, const unsigned int vr[], size_t nvr, double value[], const char *function)
{
    if (fa_fmu_require(f, FA_MASK_ALIVE, function)) return FA_ERROR;
    if (nvr == 0) return FA_OK;
    if (!vr || !value) return fa_fmu_error(f, function, "NULL array with nvr = %lu", (unsigned long)nvr);
    int need_outputs = 0;
    size_t index;
    for (size_t i = 0; i < nvr; ++i) {
        fa_var_kind kind = fa_classify(f, vr[i], &index);
        if (kind == FA_VAR_UNKNOWN) return fa_unknown_vr(f, vr[i], function);
        if (kind == FA_VAR_OUTPUT) need_outputs = 1;
    }
    double y[FA_NY > 0 ? FA_NY : 1];
    if (need_outputs) {
        if ((FA_MASK(f->mode) & FA_MASK_SETUP) && fa_preview(f, function) != 0) return FA_ERROR;
        fa_engine_outputs(f->engine, y);
    }
    const double *p = fa_engine_parameters(f->engine);
    for (size_t i = 0; i < nvr; ++i) {
        switch (fa_classify(f, vr[i], &index)) {
        case FA_VAR_TIME: value[i] = fa_fmu_time(f); break;
        case FA_VAR_PARAMETER: value[i] = p[index]; break;
        case FA_VAR_OUTPUT: value[i] = y[index]; break;
        default: break;
        }
    }
    return FA_OK;
}

fa_status fa_fmu_set_reals(fa_fmu *f, const unsigned int vr[], size_t nvr, const double value[],
                           const char *function)
{
    if (fa_fmu_require(f, FA_MASK_SETUP | FA_MASK(FA_MODE_STEP), function)) return FA_ERROR;
    if (nvr == 0) return FA_OK;
    if (!vr || !value) return fa_fmu_error(f, function, "NULL array with nvr = %lu", (unsigned long)nvr);
    size_t index;
    for (size_t i = 0; i < nvr; ++i) { /* check all first: nothing is set on error */
        switch (fa_classify(f, vr[i], &index)) {
        case FA_VAR_TIME:
            return fa_fmu_error(f, function, "vr 0 is the independent variable time and cannot be set");
        case FA_VAR_OUTPUT:
            return fa_fmu_error(f, function, "vr %u is the output '%s' and cannot be set", vr[i],
                                fa_output_names[index]);
        case FA_VAR_UNKNOWN: return fa_unknown_vr(f, vr[i], function);
        case FA_VAR_PARAMETER:
            if (!isfinite(value[i]))
                return fa_fmu_error(f, function, "value %g for '%s' (vr %u) is not finite", value[i],
                                    fa_parameter_names[index], vr[i]);
            break;
        }
    }
    double *p = fa_engine_parameters(f->engine);
    for (size_t i = 0; i < nvr; ++i) {
        if (fa_classify(f, vr[i], &index) == FA_VAR_PARAMETER) p[index] = value[i];
    }
    f->preview_valid = 0;
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

/* data: [mode, start_time, preview_valid, engine state...] */
#define FA_STATE_EXTRA 3
typedef struct {
    unsigned magic;
    size_t n;
    double data[]; /* n values */
} fa_state;

/* Serialized: 8-byte magic, uint64 hash of the instantiation token, uint64 n, uint64
 * checksum of the payload, then n doubles (native byte order). */
static const char fa_serial_magic[8] = {'F', 'A', 'F', 'M', 'U', 'S', 'T', '1'};
#define FA_SERIAL_HEADER 32u

static size_t fa_state_n(void) { return FA_STATE_EXTRA + fa_engine_state_size(); }

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

fa_status fa_fmu_get_state(fa_fmu *f, void **state, const char *function)
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
    fa_engine_get_state(f->engine, s->data + FA_STATE_EXTRA);
    *state = s;
    return FA_OK;
}

fa_status fa_fmu_set_state(fa_fmu *f, void *state, const char *function)
{
    fa_state *s = fa_state_check(f, state, function);
    if (!s) return FA_ERROR;
    fa_settings own;
    fa_settings_of_fmu(&own);
    if (!fa_engine_state_matches(s->data + FA_STATE_EXTRA, &own))
        return fa_fmu_error(f, function, "the FMU state was saved under another integrator, its constant or its step "
                            "than this FMU's; use a state of this FMU");
    if (fa_engine_set_state(f->engine, s->data + FA_STATE_EXTRA) != 0)
        return fa_fmu_error(f, function, "the FMU state holds non-finite values");
    f->mode = (fa_mode)(int)s->data[0];
    f->start_time = s->data[1];
    f->preview_valid = s->data[2] != 0.0;
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
    double mode = s->data[0], preview = s->data[2];
    if (!valid || !(mode == FA_MODE_INSTANTIATED || mode == FA_MODE_INITIALIZATION || mode == FA_MODE_STEP
                    || mode == FA_MODE_TERMINATED) || !(preview == 0.0 || preview == 1.0)) {
        free(s);
        return fa_fmu_error(f, function, "the serialized state holds invalid values");
    }
    s->magic = FA_STATE_MAGIC;
    s->n = n;
    *state = s;
    return FA_OK;
}
