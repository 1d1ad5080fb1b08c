/* fmi-adjoint HHT runtime: the index-3 HHT integrator of fmi_adjoint.integrate.hht in C.
 *
 * The same residuals, the same Newton iteration (exact iteration matrix, the same
 * convergence and round-off-floor tests) and the same consistent initialization as the
 * Python engine, for one generated model (model.h).  No globals: every instance owns its
 * memory, so several instances can live at once.
 */
#ifndef FA_ENGINE_H
#define FA_ENGINE_H

#include <stddef.h>

#if defined(__GNUC__) && !defined(FA_EXPORT_ALL)
#pragma GCC visibility push(hidden) /* internal: an FMU exports only the FMI functions */
#endif

typedef struct fa_engine fa_engine;

/* Settings of a run; fa_engine_settings_default() fills the model's defaults. */
typedef struct {
    double alpha;        /* HHT alpha in [-1/3, 0] */
    double step;         /* fixed step h */
    double rtol;         /* Newton tolerance (1e-10 as in Python) */
    int max_iterations;  /* Newton iterations per step (25) */
} fa_settings;

void fa_engine_settings_default(fa_settings *settings);

/* Returns NULL if memory is exhausted. */
fa_engine *fa_engine_new(void);
void fa_engine_free(fa_engine *engine);

/* Parameters (FA_NP values, model order); may be changed between steps. */
double *fa_engine_parameters(fa_engine *engine);

/* Consistent initial state at t0.  Returns 0 on success, -1 on failure (see message). */
int fa_engine_initialize(fa_engine *engine, double t0, const fa_settings *settings);

/* Advance by exactly one step t_i -> t_{i+1} = t0 + (i+1) h.  0 ok, -1 failure. */
int fa_engine_step(fa_engine *engine);

/* Number of steps of a batch run, used in messages ("step i of N"); 0 if unknown. */
void fa_engine_set_planned_steps(fa_engine *engine, long n_steps);

/* Current time, step counter, outputs (FA_NY values) and the last error message. */
double fa_engine_time(const fa_engine *engine);
long fa_engine_step_count(const fa_engine *engine);
void fa_engine_outputs(const fa_engine *engine, double *y);
const char *fa_engine_message(const fa_engine *engine);

/* Complete state (time, step counter, q, v, a, lambda, F_old, scales, parameters) as
 * doubles, for FMU state get/set and serialization. */
size_t fa_engine_state_size(void);
void fa_engine_get_state(const fa_engine *engine, double *buffer);
int fa_engine_set_state(fa_engine *engine, const double *buffer);

#if defined(__GNUC__) && !defined(FA_EXPORT_ALL)
#pragma GCC visibility pop
#endif

#endif
