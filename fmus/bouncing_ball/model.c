/*
 * Bouncing ball with a state event (fmus/README.md):
 *
 *     der(h) = v,  der(v) = -g,  z = h - floor + k_curve v^2;  at an event: if (z <= 0 and v < 0) { h -= 2 z; v = -e v }
 *
 * vr 0 h, 1 der(h), 2 v, 3 der(v), 4 g (fixed), 5 e (tunable), 6 h_start, 7 v_start, 8 floor, 9 k_curve (fixed).
 */
#include "config.h"
#include "../common/model.h"

enum { H, DER_H, V, DER_V, G, E, H_START, V_START, FLOOR, K_CURVE };

const Variable variables[N_VARIABLES] = {
    {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, CALCULATED, 1},
    {T_FLOAT64, FIXED, 1}, {T_FLOAT64, TUNABLE, 1}, {T_FLOAT64, FIXED, 1}, {T_FLOAT64, FIXED, 1},
    {T_FLOAT64, FIXED, 1}, {T_FLOAT64, FIXED, 1},
};

void setStartValues(Model *m) {
    m->g = 9.81;
    m->e = 0.8;
    m->h = m->h_start = 1.0;
    m->v = m->v_start = 0.0;
    m->floor_ = m->k_curve = 0.0;
}

const char *exitInitialization(ModelData *d) {
    d->m.h = d->m.h_start;
    d->m.v = d->m.v_start;
    return NULL;
}

void getStates(const ModelData *d, double x[]) {
    x[0] = (d->mode & BEFORE_INIT) ? d->m.h_start : d->m.h;
    x[1] = (d->mode & BEFORE_INIT) ? d->m.v_start : d->m.v;
}

void setStates(ModelData *d, const double x[]) {
    d->m.h = x[0];
    d->m.v = x[1];
}

void getDerivatives(ModelData *d, double dx[]) {
    double x[2];
    getStates(d, x);
    dx[0] = x[1];
    dx[1] = -d->m.g;
}

/* Of the stored states, also before initialization (as the original fixture). */
void getEventIndicators(ModelData *d, double z[]) { z[0] = d->m.h - d->m.floor_ + d->m.k_curve * d->m.v * d->m.v; }

/* The bounce.  The importer's root finder stops just after z changed sign, so z <= 0 here; moving h by
   -2 z (instead of onto the surface) leaves the indicator positive after the bounce, so no spurious
   crossing follows.  It changes h by at most the root finder's tolerance times |v|. */
void eventUpdate(ModelData *d, EventInfo *info) {
    double z;
    getEventIndicators(d, &z);
    if (z <= 0.0 && d->m.v < 0.0) {
        d->m.h -= 2.0 * z;
        d->m.v = -d->m.e * d->m.v;
        info->valuesOfContinuousStatesChanged = 1;
    }
}

double getVariable(ModelData *d, unsigned vr, size_t element) {
    double x[2], dx[2];
    const double *p = &d->m.g;
    (void)element;
    getStates(d, x);
    getDerivatives(d, dx);
    return vr == H ? x[0] : vr == DER_H ? dx[0] : vr == V ? x[1] : vr == DER_V ? dx[1] : p[vr - G];
}

const char *setVariable(ModelData *d, unsigned vr, size_t element, double value) {
    double *p = &d->m.g;
    (void)element;
    p[vr - G] = value;
    return NULL;
}
