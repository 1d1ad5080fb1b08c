/* Batch driver of the runtime, for in-process comparisons and benchmarks (ctypes). */
#include <string.h>

#include "fa_engine.h"
#include "model.h"

/* Simulate n_steps steps from t0 with parameters p (NULL: defaults); write the outputs at
 * the n_steps + 1 step times into y (row-major).  Returns 0, or -1 with the engine's
 * message copied into message (capacity message_size). */
int fa_simulate(double t0, double step, double alpha, double rtol, long n_steps, const double *p, double *y,
                char *message, int message_size)
{
    fa_engine *e = fa_engine_new();
    if (!e) return -1;
    fa_settings s;
    fa_engine_settings_default(&s);
    s.step = step;
    s.alpha = alpha;
    if (rtol > 0) s.rtol = rtol;
    if (p) memcpy(fa_engine_parameters(e), p, sizeof(double) * (FA_NP > 0 ? FA_NP : 1));
    fa_engine_set_planned_steps(e, n_steps);
    int status = fa_engine_initialize(e, t0, &s);
    if (status == 0) fa_engine_outputs(e, y);
    for (long i = 1; status == 0 && i <= n_steps; ++i) {
        status = fa_engine_step(e);
        if (status == 0) fa_engine_outputs(e, y + i * FA_NY);
    }
    if (status != 0 && message && message_size > 0) {
        strncpy(message, fa_engine_message(e), (size_t)message_size - 1);
        message[message_size - 1] = '\0';
    }
    fa_engine_free(e);
    return status;
}

int fa_sizes(int *sizes)
{
    sizes[0] = FA_N; sizes[1] = FA_M; sizes[2] = FA_NP; sizes[3] = FA_NY;
    return 0;
}
