/*
 * Forced Duffing oscillator with its own RK4 solver (fmus/README.md):
 *
 *     x'' + delta x' + alpha x + beta x^3 = gamma cos(omega t) + F,   x(t0) = x_start,  x'(t0) = v_start
 *
 * vr 0 time, 1 x, 2 v (outputs), 3 F (input), 4 delta (tunable), 5 alpha, 6 beta, 7 gamma, 8 omega,
 * 9 x_start, 10 v_start, 11 h_internal (fixed, > 0).  fmi3DoStep(t, H) takes whole RK4 steps of
 * h_internal counted from t, then one last step to t + H of length in (0, (1 + 1e-9) h_internal]
 * (H = 2.5 h: h, h, h/2); the forcing is evaluated at the stage times, F held over the step.
 */
#include <math.h>

#include "config.h"
#include "../common/model.h"

enum { TIME, X, V, F, DELTA, ALPHA, BETA, GAMMA, OMEGA, X_START, V_START, H_INTERNAL };

const Variable variables[N_VARIABLES] = {
    {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, INPUT, 1},
    {T_FLOAT64, TUNABLE, 1},    {T_FLOAT64, FIXED, 1},      {T_FLOAT64, FIXED, 1},      {T_FLOAT64, FIXED, 1},
    {T_FLOAT64, FIXED, 1},      {T_FLOAT64, FIXED, 1},      {T_FLOAT64, FIXED, 1},      {T_FLOAT64, FIXED, 1},
};

void setStartValues(Model *m) {
    static const double start[N_VARIABLES] = {0.0, 0.0, 0.0, 0.0, 0.2, 1.0, 5.0, 0.5, 1.2, 1.0, 0.0, 1e-3};
    int i;
    for (i = 0; i < N_VARIABLES; i++) m->p[i] = start[i];
    m->x = start[X_START];
    m->v = start[V_START];
}

const char *exitInitialization(ModelData *d) {
    d->m.x = d->m.p[X_START];
    d->m.v = d->m.p[V_START];
    return NULL;
}

static void rhs(const Model *m, double t, double x, double v, double *dx, double *dv) {
    *dx = v;
    *dv = -m->p[DELTA] * v - m->p[ALPHA] * x - m->p[BETA] * x * x * x + m->p[GAMMA] * cos(m->p[OMEGA] * t) + m->p[F];
}

static void rk4Step(Model *m, double t, double h) {
    double k1x, k1v, k2x, k2v, k3x, k3v, k4x, k4v;
    const double x = m->x, v = m->v;
    rhs(m, t, x, v, &k1x, &k1v);
    rhs(m, t + 0.5 * h, x + 0.5 * h * k1x, v + 0.5 * h * k1v, &k2x, &k2v);
    rhs(m, t + 0.5 * h, x + 0.5 * h * k2x, v + 0.5 * h * k2v, &k3x, &k3v);
    rhs(m, t + h, x + h * k3x, v + h * k3v, &k4x, &k4v);
    m->x = x + h / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x);
    m->v = v + h / 6.0 * (k1v + 2.0 * k2v + 2.0 * k3v + k4v);
}

const char *doStep(ModelData *d, double t0, double H) {
    const double h = d->m.p[H_INTERNAL], t1 = t0 + H;
    double t = t0;
    long k = 0;
    while (t1 - t > h * (1.0 + 1e-9)) { /* a rest below 1e-9 h joins the last whole step */
        rk4Step(&d->m, t, h);
        t = t0 + (double)++k * h;
    }
    if (t1 > t) rk4Step(&d->m, t, t1 - t);
    return NULL;
}

void getStates(const ModelData *d, double x[]) {
    x[0] = (d->mode & BEFORE_INIT) ? d->m.p[X_START] : d->m.x;
    x[1] = (d->mode & BEFORE_INIT) ? d->m.p[V_START] : d->m.v;
}
void setStates(ModelData *d, const double x[]) { d->m.x = x[0], d->m.v = x[1]; }
void getDerivatives(ModelData *d, double dx[]) { (void)d, (void)dx; }

double getVariable(ModelData *d, unsigned vr, size_t element) {
    double x[2];
    (void)element;
    getStates(d, x);
    return vr == TIME ? d->time : vr == X ? x[0] : vr == V ? x[1] : d->m.p[vr];
}

const char *setVariable(ModelData *d, unsigned vr, size_t element, double value) {
    (void)element;
    if (vr == H_INTERNAL && !(value > 0.0)) return "h_internal must be positive.";
    d->m.p[vr] = value;
    return NULL;
}
