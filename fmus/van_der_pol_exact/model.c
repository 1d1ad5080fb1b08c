/*
 * Van der Pol as the Modelica Reference FMU VanDerPol declares it (fmus/README.md): the states x0, x1
 * are outputs with initial="exact", so their start values are set like fixed parameters (before
 * ExitInitializationMode) and are the simulation's start; there is no x0_start parameter.
 *
 *     der(x0) = x1,   der(x1) = mu (1 - x0^2) x1 - x0
 *
 * vr 0 x0, 1 der(x0), 2 x1, 3 der(x1), 4 mu (tunable), 5 h_internal (fixed, the CS RK4 step).
 */
#include "config.h"
#include "../common/model.h"

enum { X0, DER_X0, X1, DER_X1, MU, H_INTERNAL };

const Variable variables[N_VARIABLES] = {
    {T_FLOAT64, FIXED, 1}, {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, FIXED, 1}, {T_FLOAT64, CALCULATED, 1},
    {T_FLOAT64, TUNABLE, 1}, {T_FLOAT64, FIXED, 1},
};

void setStartValues(Model *m) {
    m->x[0] = 2.0;
    m->x[1] = 0.0;
    m->mu = 1.0;
    m->h_internal = 1e-4;
}

const char *exitInitialization(ModelData *d) {
    (void)d;
    return NULL;
}

void getStates(const ModelData *d, double x[]) {
    x[0] = d->m.x[0];
    x[1] = d->m.x[1];
}

void setStates(ModelData *d, const double x[]) {
    d->m.x[0] = x[0];
    d->m.x[1] = x[1];
}

void getDerivatives(ModelData *d, double dx[]) {
    dx[0] = d->m.x[1];
    dx[1] = d->m.mu * (1.0 - d->m.x[0] * d->m.x[0]) * d->m.x[1] - d->m.x[0];
}

double getVariable(ModelData *d, unsigned vr, size_t element) {
    double dx[2];
    (void)element;
    getDerivatives(d, dx);
    switch (vr) {
    case X0: return d->m.x[0];
    case DER_X0: return dx[0];
    case X1: return d->m.x[1];
    case DER_X1: return dx[1];
    case MU: return d->m.mu;
    default: return d->m.h_internal;
    }
}

const char *setVariable(ModelData *d, unsigned vr, size_t element, double value) {
    (void)element;
    switch (vr) {
    case X0: d->m.x[0] = value; break;
    case X1: d->m.x[1] = value; break;
    case MU: d->m.mu = value; break;
    default:
        if (!(value > 0.0)) return "h_internal must be > 0.";
        d->m.h_internal = value;
    }
    return NULL;
}
