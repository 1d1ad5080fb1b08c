/*
 * Defects an importer must survive in bounded time and memory (issue 31; fmus/README.md): one decay
 * equation whose fixed parameter `mode` selects a defect,
 *
 *     der(x) = -k x + dir + noise r,   x(t0) = x_start,   y = x
 *
 * r uniform in [-1, 1], drawn anew at every fmi2GetDerivatives (mode 5 only); dir a discrete state
 * (0 except in mode 6).  Before t_bad every mode behaves; modes 1-4, 7 and 8 announce one time event
 * at t_bad, and the defect starts with the event iteration there:
 *
 *     1 next time event t + 1e-300      2 nextafter(t, +inf), for ever     3 t - 1 (in the past)
 *     4 NaN                             5 noisy derivatives                6 chattering state event
 *     7 an event iteration that never settles                              8 +inf
 *     9 slow: every fmi2GetDerivatives sleeps 1 ms (nanosleep), from the start, so that a run of
 *       many steps outlasts a wall-time budget on any CPU (no event)
 *
 * vr 0 x, 1 der(x), 2 k (tunable), 3 mode, 4 t_bad, 5 noise, 6 x_start, 7 x_switch (fixed).
 */
#define _POSIX_C_SOURCE 199309L /* nanosleep */
#include <math.h>
#include <time.h>

#include "config.h"
#include "../common/model.h"

enum { X, DER_X, K, MODE, T_BAD, NOISE, X_START, X_SWITCH };

const Variable variables[N_VARIABLES] = {
    {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, TUNABLE, 1}, {T_FLOAT64, FIXED, 1},
    {T_FLOAT64, FIXED, 1},      {T_FLOAT64, FIXED, 1},      {T_FLOAT64, FIXED, 1},   {T_FLOAT64, FIXED, 1},
};

void setStartValues(Model *m) {
    static const double start[N_VARIABLES] = {0.0, 0.0, 1.0, 0.0, 0.25, 1e-6, 1.0, 0.5};
    int i;
    for (i = 0; i < N_VARIABLES; i++) m->p[i] = start[i];
    m->x = start[X_START];
    m->dir = 0.0;
    m->random = 88172645463325252ull;
}

static int defect(const ModelData *d) { return (int)d->m.p[MODE]; }

static double state(const ModelData *d) { return (d->mode & BEFORE_INIT) ? d->m.p[X_START] : d->m.x; }

static double uniform(Model *m) { /* in [-1, 1] */
    m->random ^= m->random << 13;
    m->random ^= m->random >> 7;
    m->random ^= m->random << 17;
    return (double)(m->random >> 11) / 4503599627370496.0 - 1.0;
}

const char *exitInitialization(ModelData *d) {
    d->m.x = d->m.p[X_START];
    return NULL;
}

void getStates(const ModelData *d, double x[]) { x[0] = state(d); }

void setStates(ModelData *d, const double x[]) { d->m.x = x[0]; }

void getDerivatives(ModelData *d, double dx[]) {
    if (defect(d) == 9) {
        struct timespec ms = {0, 1000000L};
        nanosleep(&ms, NULL);
    }
    dx[0] = -d->m.p[K] * state(d) + d->m.dir;
    if (defect(d) == 5) dx[0] += d->m.p[NOISE] * uniform(&d->m);
}

void getEventIndicators(ModelData *d, double z[]) { z[0] = defect(d) == 6 ? state(d) - d->m.p[X_SWITCH] : 1.0; }

/* The event iteration: the time event at t_bad switches the defect on. */
void eventUpdate(ModelData *d, EventInfo *info) {
    double t = d->time, z;
    int m = defect(d);
    if (m == 6) {
        getEventIndicators(d, &z);
        info->valuesOfContinuousStatesChanged = (z <= 0.0 ? 1.0 : -1.0) != d->m.dir;
        d->m.dir = z <= 0.0 ? 1.0 : -1.0;
    }
    if (m == 0 || m == 5 || m == 6 || m == 9) return;
    info->nextEventTimeDefined = 1;
    if (t < d->m.p[T_BAD]) {
        info->nextEventTime = d->m.p[T_BAD];
        return;
    }
    switch (m) {
    case 1: info->nextEventTime = t + 1e-300; break;
    case 2: info->nextEventTime = nextafter(t, INFINITY); break;
    case 3: info->nextEventTime = t - 1.0; break;
    case 4: info->nextEventTime = NAN; break;
    case 8: info->nextEventTime = INFINITY; break;
    default: /* 7: one more iteration, for ever */
        info->nextEventTimeDefined = 0;
        info->newDiscreteStatesNeeded = 1;
    }
}

double getVariable(ModelData *d, unsigned vr, size_t element) {
    (void)element;
    return vr == X ? state(d) : vr == DER_X ? -d->m.p[K] * state(d) + d->m.dir : d->m.p[vr];
}

const char *setVariable(ModelData *d, unsigned vr, size_t element, double value) {
    (void)element;
    d->m.p[vr] = value;
    return NULL;
}
