/*
 * A stair: time events and non-Real outputs (fmus/README.md).
 *
 *     time events at t_j = t0 + j period (j = 1, 2, ...): counter := counter + 1
 *     odd = counter is odd,  phase = high (2) if counter >= 3 else low (1)
 *     der(x) = -c x,  x(t0) = 1,  level = a counter + x
 *
 * vr 0 counter (Integer), 1 period (fixed, > 0), 2 odd (Boolean), 3 level, 4 x, 5 der(x), 6 a, 7 c
 * (tunable), 8 phase (Enumeration, read as Integer), 9 h_internal (fixed, > 0).
 *
 * ME: fmi2NewDiscreteStates announces the next event time and, within 1e-10 max(1, |t_j|) of t_j,
 * increments the counter: one event per call, asking for another iteration if one more is due.
 * CS: fmi2DoStep integrates x with RK4 exactly to every event time inside the step and increments
 * the counter there; an event at the end of a step is handled before the call returns.
 */
#include <math.h>

#include "config.h"
#include "../common/model.h"

enum { COUNTER, PERIOD, ODD, LEVEL, X, DER_X, A, C, PHASE, H_INTERNAL };

const Variable variables[N_VARIABLES] = {
    {T_INT32, CALCULATED, 1},   {T_FLOAT64, FIXED, 1},   {T_BOOLEAN, CALCULATED, 1}, {T_FLOAT64, CALCULATED, 1},
    {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, TUNABLE, 1}, {T_FLOAT64, TUNABLE, 1},
    {T_INT32, CALCULATED, 1},   {T_FLOAT64, FIXED, 1},
};

void setStartValues(Model *m) {
    m->x = 1.0;
    m->counter = 0.0;
    m->period = 0.5;
    m->a = 2.0;
    m->c = 1.0;
    m->h_internal = 1e-4;
}

static double state(const ModelData *d) { return (d->mode & BEFORE_INIT) ? 1.0 : d->m.x; }

/* the time of the next event, t_(counter+1) */
static double nextEventTime(const ModelData *d) { return d->startTime + (d->m.counter + 1.0) * d->m.period; }

static int eventDue(const ModelData *d, double t) {
    double te = nextEventTime(d);
    return t >= te - 1e-10 * fmax(1.0, fabs(te));
}

const char *exitInitialization(ModelData *d) {
    d->m.x = 1.0;
    d->m.counter = 0.0;
    return NULL;
}

void getStates(const ModelData *d, double x[]) { x[0] = state(d); }
void setStates(ModelData *d, const double x[]) { d->m.x = x[0]; }
void getDerivatives(ModelData *d, double dx[]) { dx[0] = -d->m.c * state(d); }
void getEventIndicators(ModelData *d, double z[]) { (void)d, (void)z; } /* time events only */

void eventUpdate(ModelData *d, EventInfo *eventInfo) {
    if (eventDue(d, d->time)) d->m.counter += 1.0;
    eventInfo->newDiscreteStatesNeeded = eventDue(d, d->time);
    eventInfo->nextEventTimeDefined = 1;
    eventInfo->nextEventTime = nextEventTime(d);
}

const char *doStep(ModelData *d, double t, double h) {
    double tEnd = t + h, te;
    for (;;) { /* integrate exactly to the next event time if it lies within the step, else to the end */
        te = nextEventTime(d);
        if (!eventDue(d, tEnd)) break;
        if (te > t) {
            rk4Steps(d, te - t, d->m.h_internal);
            t = te;
        }
        d->m.counter += 1.0;
    }
    if (tEnd > t) rk4Steps(d, tEnd - t, d->m.h_internal);
    return NULL;
}

double getVariable(ModelData *d, unsigned vr, size_t element) {
    (void)element;
    switch (vr) {
    case COUNTER: return d->m.counter;
    case ODD: return fmod(d->m.counter, 2.0) != 0.0;
    case LEVEL: return d->m.a * d->m.counter + state(d);
    case X: return state(d);
    case DER_X: return -d->m.c * state(d);
    case PHASE: return d->m.counter >= 3.0 ? 2.0 : 1.0;
    case PERIOD: return d->m.period;
    case A: return d->m.a;
    case C: return d->m.c;
    default: return d->m.h_internal;
    }
}

const char *setVariable(ModelData *d, unsigned vr, size_t element, double value) {
    (void)element;
    if ((vr == PERIOD || vr == H_INTERNAL) && !(value > 0.0)) return "period and h_internal must be > 0.";
    *(vr == PERIOD ? &d->m.period : vr == A ? &d->m.a : vr == C ? &d->m.c : &d->m.h_internal) = value;
    return NULL;
}
