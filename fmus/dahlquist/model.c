/*
 * Dahlquist's test equation (fmus/README.md):  der(x) = -k x,  x(t0) = x_start.
 *
 * vr 0 time, 1 x, 2 der(x), 3 k (tunable), 4 x_start, 5 h_internal (fixed, > 0; the Co-Simulation
 * RK4 step of the layer).  No event indicators, no time events, no directional derivatives.
 */
#include "config.h"
#include "../common/model.h"

enum { TIME, X, DER_X, K, X_START, H_INTERNAL };

const Variable variables[N_VARIABLES] = {
    {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, CALCULATED, 1},
    {T_FLOAT64, TUNABLE, 1},    {T_FLOAT64, FIXED, 1},      {T_FLOAT64, FIXED, 1},
};

void setStartValues(Model *m) {
    m->x = m->k = m->x_start = 1.0;
    m->h_internal = 1e-4;
}

const char *exitInitialization(ModelData *d) {
    d->m.x = d->m.x_start;
    return NULL;
}

static double state(const ModelData *d) { return (d->mode & BEFORE_INIT) ? d->m.x_start : d->m.x; }

void getStates(const ModelData *d, double x[]) { x[0] = state(d); }
void setStates(ModelData *d, const double x[]) { d->m.x = x[0]; }
void getDerivatives(ModelData *d, double dx[]) { dx[0] = -d->m.k * state(d); }

double getVariable(ModelData *d, unsigned vr, size_t element) {
    (void)element;
    switch (vr) {
    case TIME: return d->time;
    case X: return state(d);
    case DER_X: return -d->m.k * state(d);
    case K: return d->m.k;
    case X_START: return d->m.x_start;
    default: return d->m.h_internal;
    }
}

const char *setVariable(ModelData *d, unsigned vr, size_t element, double value) {
    (void)element;
    if (vr == H_INTERNAL && !(value > 0.0)) return "h_internal must be > 0.";
    *(vr == K ? &d->m.k : vr == X_START ? &d->m.x_start : &d->m.h_internal) = value;
    return NULL;
}
