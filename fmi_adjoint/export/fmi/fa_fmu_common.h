/* fmi-adjoint FMU runtime: the FMI-version independent part of the Co-Simulation layers
 * (fa_fmi2.c, fa_fmi3.c).
 *
 * One fa_fmu per instance (no globals): mode, engine, logging, value references and FMU
 * states.  Each layer embeds an fa_fmu as the FIRST member of its own instance struct,
 * which adds the version's logging callback, and passes an emit function that forwards a
 * finished message to that callback.
 *
 * Value references: 0 = time (only where has_time_vr is set, FMI 3), 1 + k = parameter or
 * input k (entry k of the engine's parameter array), 1 + FA_NP + j = output j, then the
 * exposed coordinates (causality local, read only): FA_VR_Q + i = position q_i,
 * FA_VR_V + i = velocity v_i (i < FA_N, model order) and FA_VR_LAMBDA + k = Lagrange
 * multiplier lambda_k (k < FA_M, the constraint rows in model order).  Then, read by Model
 * Exchange instances only, FA_VR_A + i = der(v_i), and (a model with constraints only)
 * FA_VR_DRIFT_TOLERANCE, the drift tolerance of the Model Exchange projection (fa_fmu_me.h), a
 * tunable parameter: a Co-Simulation instance (of an FMU with both interfaces, whose one model
 * description lists it) takes and returns it, range-checked, without effect (the index-3
 * integrator holds the position constraints at every step; nothing is projected).
 *
 * Communication steps (fa_fmu_do_step): any positive step.  A communication step between two
 * points of the grid t0 + i * FA_STEP takes the grid steps (the in-process run bit for bit);
 * any other is divided into max(1, round(h / FA_STEP)) equal internal steps that land exactly
 * on the communication point (a grid point followed by an uneven end: the in-process
 * engine's uneven last step).
 *
 * Inputs (model parameters with causality input) are held over a communication step, or
 * vary linearly inside it after fa_fmu_set_input_derivatives (FMI 2
 * fmi2SetRealInputDerivatives, order 1): u(t) = u(t_c) + du * (t - t_c), evaluated at the
 * end time of every internal step.  FMI 3 has no input derivatives for Co-Simulation; there an
 * importer that passes an intermediateUpdate callback is called back before every internal
 * step with that step's end time, with intermediateVariableSetRequested, and sets the inputs
 * at that time (FMI 3.0, sec. 4.2.3, Intermediate Update Mode; the FMU declares
 * providesIntermediateUpdate and its inputs intermediateUpdate).
 */
#ifndef FA_FMU_COMMON_H
#define FA_FMU_COMMON_H

#include <stddef.h>

#include "fa_engine.h"
#include "fa_fmu_me.h"

#if defined(__GNUC__) && !defined(FA_EXPORT_ALL)
#pragma GCC visibility push(hidden) /* internal: only FMI functions are exported */
#endif

/* Numerically equal to fmi2Status and fmi3Status (OK, Warning, Discard, Error, Fatal). */
typedef enum { FA_OK = 0, FA_WARNING = 1, FA_DISCARD = 2, FA_ERROR = 3, FA_FATAL = 4 } fa_status;

typedef enum {
    FA_MODE_INSTANTIATED = 0,
    FA_MODE_INITIALIZATION = 1,
    FA_MODE_STEP = 2,
    FA_MODE_TERMINATED = 3,
    FA_MODE_ERROR = 4,
    /* FMI 3 Intermediate Update Mode: inside the importer's intermediateUpdate callback during
     * fmi3DoStep; only inputs may be set (fa_fmu_set_reals), nothing else is allowed. */
    FA_MODE_INTERMEDIATE = 5
} fa_mode;

#define FA_VR_Q (1 + FA_NP + FA_NY)
#define FA_VR_V (FA_VR_Q + FA_N)
#define FA_VR_LAMBDA (FA_VR_V + FA_N)
#define FA_VR_END (FA_VR_LAMBDA + FA_M) /* one past the last value reference of Co-Simulation */
#define FA_VR_A FA_VR_END /* Model Exchange: der(v_i) = a_i, i < FA_N */
#define FA_VR_DRIFT_TOLERANCE (FA_VR_A + FA_N) /* "me.drift_tolerance" */
/* A model without constraints has no drift and no drift tolerance (its vr is unknown). */
#define FA_IS_DRIFT_TOLERANCE(vr) (FA_M > 0 && (vr) == (unsigned int)FA_VR_DRIFT_TOLERANCE)

#define FA_MASK(mode) (1u << (mode))
#define FA_MASK_SETUP (FA_MASK(FA_MODE_INSTANTIATED) | FA_MASK(FA_MODE_INITIALIZATION))
#define FA_MASK_ALIVE (FA_MASK_SETUP | FA_MASK(FA_MODE_STEP) | FA_MASK(FA_MODE_TERMINATED))

/* Log categories (declare both in modelDescription.xml <LogCategories>). */
#define FA_CATEGORY_EVENTS "logEvents"      /* informational: initialized, reset, terminated, state restored */
#define FA_CATEGORY_ERROR "logStatusError"  /* every error and warning; always emitted */

typedef struct fa_fmu fa_fmu;
typedef void (*fa_emit_fn)(const fa_fmu *fmu, fa_status status, const char *category, const char *message);

struct fa_fmu {
    unsigned magic;
    char *name;            /* instance name (own copy) */
    fa_engine *engine;
    fa_mode mode;
    double start_time;
    double time;           /* the FMU's time in Step and Terminated mode (on or off the grid) */
    int preview_valid;     /* before ExitInitializationMode: engine holds the initial state */
    /* Input k varies as input_value[k] + input_slope[k] * (t - input_time[k]) (slope 0: held). */
    double input_value[FA_ONE(FA_NP)], input_time[FA_ONE(FA_NP)], input_slope[FA_ONE(FA_NP)];
    int has_time_vr;       /* FMI 3: vr 0 is time */
    int model_exchange;    /* a Model Exchange instance: der(v) (vr FA_VR_A + i) can be read */
    /* vr FA_VR_DRIFT_TOLERANCE; a Model Exchange instance keeps its core's copy equal
     * (fa_fmu_sync_me); saved in FMU states of both interfaces. */
    double drift_tolerance;
    int logging_on;
    unsigned categories;   /* bit 0: logEvents, bit 1: logStatusError */
    fa_emit_fn emit;
    /* FMI 3 Co-Simulation with the importer's intermediateUpdate callback (NULL otherwise):
     * called before every internal step with the step's end time, in Intermediate Update Mode,
     * so that the importer sets the inputs at that time (fa_fmu_do_step). */
    void (*intermediate)(fa_fmu *fmu, double t);
};

/* Instance set-up / tear-down (the layer owns the memory of the struct itself). */
int fa_fmu_setup(fa_fmu *fmu, const char *name, int has_time_vr, int logging_on, fa_emit_fn emit);
void fa_fmu_release(fa_fmu *fmu);

/* The fa_fmu of an instance handle, or NULL (the handle is NULL or not a live instance). */
fa_fmu *fa_fmu_check(void *instance);

/* Logging: errors/warnings always reach the callback; OK-status messages only with
 * logging on and their category enabled. */
void fa_log(const fa_fmu *fmu, fa_status status, const char *category, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
fa_status fa_fmu_error(const fa_fmu *fmu, const char *function, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
const char *fa_mode_name(fa_mode mode);
/* 0 if fmu->mode is in the mask, else logs "<function> is not allowed in ..." and -1. */
int fa_fmu_require(const fa_fmu *fmu, unsigned mask, const char *function);

fa_status fa_fmu_set_debug_logging(fa_fmu *fmu, int logging_on, size_t n, const char *const categories[],
                                   const char *function);

/* Life cycle. */
fa_status fa_fmu_set_start_time(fa_fmu *fmu, double start_time, const char *function);
fa_status fa_fmu_enter_initialization(fa_fmu *fmu, const char *function);
fa_status fa_fmu_exit_initialization(fa_fmu *fmu, const char *function);
/* The same, then (me not NULL: a Model Exchange instance) the core's consistent initialization
 * at the start time with the parameters set (fa_me_initialize). */
fa_status fa_fmu_exit_initialization_me(fa_fmu *fmu, fa_me *me, const char *function);
/* Model Exchange: the core takes the parameters and the drift tolerance of the instance (after
 * SetReal/SetFloat64 and Reset). */
void fa_fmu_sync_me(const fa_fmu *fmu, fa_me *me);
/* Model Exchange: the variables at the core's (t, x, p): parameters, outputs, q, v, lambda,
 * der(v) = a (vr FA_VR_A + i, i < FA_N; time vr 0 where fmu->has_time_vr) and the drift
 * tolerance. */
fa_status fa_fmu_me_get_reals(fa_fmu *fmu, fa_me *me, const unsigned int vr[], size_t nvr, double value[],
                              const char *function);
/* Model Exchange: J seed (adjoint = 0; seed over knowns, result over unknowns) or J^T seed
 * (adjoint = 1; seed over unknowns, result over knowns) of J = d(xdot, y)/d(x, p) (fa_me_directional,
 * fa_me_adjoint).  Knowns: parameters and inputs 1 + k, q and v (and the drift tolerance, on
 * which nothing depends: zero); unknowns: outputs, der(q) = v
 * (the vr of v), der(v) = a (FA_VR_A + i).  me NULL: not supported (Co-Simulation instance). */
fa_status fa_fmu_derivative_product(fa_fmu *fmu, fa_me *me, const unsigned int unknowns[], size_t nu,
                                    const unsigned int knowns[], size_t nk, const double seed[], double result[],
                                    int adjoint, const char *function);
fa_status fa_fmu_terminate(fa_fmu *fmu, const char *function);
fa_status fa_fmu_reset(fa_fmu *fmu, const char *function);
/* Advance from t_c (the FMU's time) by any h > 0; *reached (may be NULL) gets the time
 * reached, also on failure.  Internal steps: fa_fmu_common.c, fa_fmu_do_step. */
fa_status fa_fmu_do_step(fa_fmu *fmu, double t_c, double h, double *reached, const char *function);
double fa_fmu_time(const fa_fmu *fmu);

/* Real / Float64 variables. */
fa_status fa_fmu_get_reals(fa_fmu *fmu, const unsigned int vr[], size_t nvr, double value[], const char *function);
fa_status fa_fmu_set_reals(fa_fmu *fmu, const unsigned int vr[], size_t nvr, const double value[],
                           const char *function);
/* Time derivatives of inputs at the current time (order[i] must be 1: linear inputs). */
fa_status fa_fmu_set_input_derivatives(fa_fmu *fmu, const unsigned int vr[], size_t nvr, const int order[],
                                       const double value[], const char *function);
/* A variable type the FMU has none of: OK for nvr == 0, else an error naming vr[0]. */
fa_status fa_fmu_no_variables(const fa_fmu *fmu, const unsigned int vr[], size_t nvr, const char *type,
                              const char *function);
fa_status fa_fmu_unsupported(const fa_fmu *fmu, const char *function, const char *why);

/* FMU states: heap copies of the engine state plus the FMI-level mode, and (me not NULL: a Model
 * Exchange instance) the Model Exchange core's time, states and parameters (fa_me_get_state).
 * A state restores only into an instance of the interface that saved it. */
fa_status fa_fmu_get_state(fa_fmu *fmu, const fa_me *me, void **state, const char *function);
fa_status fa_fmu_set_state(fa_fmu *fmu, fa_me *me, void *state, const char *function);
fa_status fa_fmu_free_state(fa_fmu *fmu, void **state, const char *function);
fa_status fa_fmu_serialized_size(fa_fmu *fmu, void *state, size_t *size, const char *function);
fa_status fa_fmu_serialize(fa_fmu *fmu, void *state, unsigned char *buffer, size_t size, const char *function);
fa_status fa_fmu_deserialize(fa_fmu *fmu, const unsigned char *buffer, size_t size, void **state,
                             const char *function);

#if defined(__GNUC__) && !defined(FA_EXPORT_ALL)
#pragma GCC visibility pop
#endif

#endif
