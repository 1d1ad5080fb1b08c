/*
 * Van der Pol oscillator with an additive input force (fmus/README.md):
 *
 *     der(x0) = x1,   der(x1) = mu (1 - x0^2) x1 - x0 + u,   x(t0) = (x0_start, x1_start)
 *
 * vr 0 x0, 1 der(x0), 2 x1, 3 der(x1), 4 mu (tunable), 5 x0_start, 6 x1_start (fixed), 7 u (input);
 * vr 8 is h_internal (fixed, the Co-Simulation RK4 step) in van_der_pol_mecs and time in the FMI 3.0
 * van_der_pol_me3 (VR8_IS_TIME: a known whose column is zero, the model is autonomous).  Exact
 * directional derivatives, beyond FMI 2.0 also with respect to the parameters;
 * -DFA_WRONG_DERIVATIVE_MU scales the mu column by 1.1 (deliberately wrong, for tests that must
 * detect a wrong column).
 */
#include "config.h"
#include "../common/model.h"

enum { X0, DER_X0, X1, DER_X1, MU, X0_START, X1_START, U, VR8 };

#ifndef VR8_IS_TIME
#define VR8_IS_TIME 0
#endif

#ifdef FA_WRONG_DERIVATIVE_MU
#define MU_COLUMN_FACTOR 1.1
#else
#define MU_COLUMN_FACTOR 1.0
#endif

const Variable variables[N_VARIABLES] = {
    {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, CALCULATED, 1},
    {T_FLOAT64, TUNABLE, 1},    {T_FLOAT64, FIXED, 1},      {T_FLOAT64, FIXED, 1},      {T_FLOAT64, INPUT, 1},
#if N_VARIABLES > 8
    {T_FLOAT64, VR8_IS_TIME ? CALCULATED : FIXED, 1},
#endif
};

void setStartValues(Model *m) {
    m->mu = 1.0;
    m->x[0] = m->x_start[0] = 2.0;
    m->x[1] = m->x_start[1] = 0.0;
    m->u = 0.0;
    m->h_internal = 1e-4;
}

const char *exitInitialization(ModelData *d) {
    d->m.x[0] = d->m.x_start[0];
    d->m.x[1] = d->m.x_start[1];
    return NULL;
}

/* In Instantiated and Initialization Mode the states follow the start parameters. */
void getStates(const ModelData *d, double x[]) {
    const double *from = (d->mode & BEFORE_INIT) ? d->m.x_start : d->m.x;
    x[0] = from[0];
    x[1] = from[1];
}

void setStates(ModelData *d, const double x[]) {
    d->m.x[0] = x[0];
    d->m.x[1] = x[1];
}

void getDerivatives(ModelData *d, double dx[]) {
    double x[2];
    getStates(d, x);
    dx[0] = x[1];
    dx[1] = d->m.mu * (1.0 - x[0] * x[0]) * x[1] - x[0] + d->m.u;
}

double getVariable(ModelData *d, unsigned vr, size_t element) {
    double x[2], dx[2];
    (void)element;
    getStates(d, x);
    getDerivatives(d, dx);
    switch (vr) {
    case X0: return x[0];
    case DER_X0: return dx[0];
    case X1: return x[1];
    case DER_X1: return dx[1];
    case MU: return d->m.mu;
    case X0_START: return d->m.x_start[0];
    case X1_START: return d->m.x_start[1];
    case U: return d->m.u;
    default: return VR8_IS_TIME ? d->time : d->m.h_internal;
    }
}

const char *setVariable(ModelData *d, unsigned vr, size_t element, double value) {
    (void)element;
    switch (vr) {
    case MU: d->m.mu = value; break;
    case X0_START: d->m.x_start[0] = value; break;
    case X1_START: d->m.x_start[1] = value; break;
    case U: d->m.u = value; break;
    default:
        if (!(value > 0.0)) return "h_internal must be > 0.";
        d->m.h_internal = value;
    }
    return NULL;
}

/* The Jacobian columns of (x0, x1, der(x0), der(x1)) (README: "Directional derivatives").  In
   Initialization Mode the states are x_start, so the states are unknowns, not knowns; afterwards
   x_start no longer enters the right-hand side and its columns are zero. */
const char *directionalDerivative(const ModelData *d, const unsigned unknowns[], size_t nUnknown,
                                  const unsigned knowns[], size_t nKnown, const double seed[], double sensitivity[]) {
    static const char *notKnown = "a value reference is not a known of van_der_pol (knowns: x0, x1, u, mu, "
                                  "x0_start, x1_start and, in FMI 3.0, time).";
    int initializing = d->mode & INITIALIZATION;
    double x[2], dx0 = 0.0, dx1 = 0.0, du = 0.0, dmu = 0.0, ds0 = 0.0, ds1 = 0.0, ddx1;
    size_t i;
    for (i = 0; i < nKnown; i++) {
        switch (knowns[i]) {
        case X0: case X1:
            if (initializing) return "in Initialization Mode the states are unknowns (x0 = x0_start, x1 = x1_start); "
                                     "use x0_start and x1_start as knowns.";
            *(knowns[i] == X0 ? &dx0 : &dx1) += seed[i];
            break;
        case U: du += seed[i]; break;
        case MU: dmu += seed[i]; break;
        case X0_START: ds0 += seed[i]; break;
        case X1_START: ds1 += seed[i]; break;
        case VR8:
            if (VR8_IS_TIME) break; /* time: a zero column */
            return notKnown;
        default: return notKnown;
        }
    }
    for (i = 0; i < nUnknown; i++) {
        if (unknowns[i] > DER_X1) return "a value reference is not an unknown of van_der_pol (x0, x1, der(x0), der(x1)).";
    }
    if (initializing) {
        dx0 = ds0;
        dx1 = ds1;
    }
    getStates(d, x);
    ddx1 = (-2.0 * d->m.mu * x[0] * x[1] - 1.0) * dx0 + d->m.mu * (1.0 - x[0] * x[0]) * dx1 + du
         + MU_COLUMN_FACTOR * (1.0 - x[0] * x[0]) * x[1] * dmu;
    for (i = 0; i < nUnknown; i++) {
        sensitivity[i] = unknowns[i] == X0 ? dx0 : unknowns[i] == X1 ? dx1 : unknowns[i] == DER_X0 ? dx1 : ddx1;
    }
    return NULL;
}
