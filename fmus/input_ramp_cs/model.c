/*
 * An integrator of its input with canInterpolateInputs="true" (fmus/README.md):
 *
 *     der(x) = k u(t),   x(t0) = x_start,   u(t) = u_k + du_k (t - t_k) within the step from t_k
 *
 * vr 0 u (Real input, 0), 1 x (output), 2 k (tunable, 1), 3 x_start (fixed, 0), 4 du (the first
 * derivative of u set by fmi2SetRealInputDerivatives, a local for inspection).  fmi2DoStep integrates
 * exactly: x += k (u H + du H^2 / 2), then forgets du (an importer that does not set it again sees
 * its input held, as the FMI 2.0 default).  Derivatives of order 1 only.
 */
#include "config.h"
#include "../common/model.h"

enum { U, X, K, X_START, DU };

const Variable variables[N_VARIABLES] = {
    {T_FLOAT64, INPUT, 1}, {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, TUNABLE, 1}, {T_FLOAT64, FIXED, 1},
    {T_FLOAT64, CALCULATED, 1},
};

void setStartValues(Model *m) {
    m->u = m->x = m->x_start = m->du = 0.0;
    m->k = 1.0;
}

const char *exitInitialization(ModelData *d) {
    d->m.x = d->m.x_start;
    return NULL;
}

double getVariable(ModelData *d, unsigned vr, size_t element) {
    (void)element;
    switch (vr) {
    case U: return d->m.u;
    case X: return (d->mode & BEFORE_INIT) ? d->m.x_start : d->m.x;
    case K: return d->m.k;
    case X_START: return d->m.x_start;
    default: return d->m.du;
    }
}

const char *setVariable(ModelData *d, unsigned vr, size_t element, double value) {
    (void)element;
    *(vr == U ? &d->m.u : vr == K ? &d->m.k : &d->m.x_start) = value;
    return NULL;
}

const char *setInputDerivative(ModelData *d, unsigned vr, int order, double value) {
    (void)vr;
    if (order != 1) return "only first derivatives (order 1) are taken.";
    d->m.du = value;
    return NULL;
}

void getStates(const ModelData *d, double x[]) { (void)d, (void)x; }
void setStates(ModelData *d, const double x[]) { (void)d, (void)x; }
void getDerivatives(ModelData *d, double dx[]) { (void)d, (void)dx; }

const char *doStep(ModelData *d, double t, double h) {
    (void)t;
    d->m.x += d->m.k * (d->m.u * h + 0.5 * d->m.du * h * h);
    d->m.du = 0.0;
    return NULL;
}
