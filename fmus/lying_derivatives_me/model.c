/*
 * A Duffing oscillator whose directional derivatives lie on request (fmus/README.md):
 *
 *     der(x) = v,   der(v) = -k x - d v - b x^3 + u,   a = der(v),   x(t0) = x_start,  v(t0) = v_start
 *
 * vr 0 time, 1 x, 2 der(x), 3 v, 4 der(v), 5 a (output), 6 k, 7 d, 8 b (tunable), 9 u (input),
 * 10 x_start, 11 v_start, 12 lie (fixed).  GetDirectionalDerivative gives the partial derivatives
 * of x, der(x), v, der(v) and a with respect to x, v, u, k, d, b (and the start values, time and
 * lie, whose columns are zero outside Initialization Mode); the fixed parameter lie makes one of
 * them wrong while the simulation stays right: 1 the column by x (of der(v) and a) 10 % off,
 * 2 the column by the parameter d 10 % off, 3 the row of the output a by v 10 % off (der(v)
 * right), 4 refuses x as a known.  0 tells the truth.
 */
#include "config.h"
#include "../common/model.h"

enum { TIME, X, DER_X, V, DER_V, A, K, D, B, U, X_START, V_START, LIE };

const Variable variables[N_VARIABLES] = {
    {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, CALCULATED, 1},
    {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, TUNABLE, 1},    {T_FLOAT64, TUNABLE, 1},
    {T_FLOAT64, TUNABLE, 1},    {T_FLOAT64, INPUT, 1},      {T_FLOAT64, FIXED, 1},      {T_FLOAT64, FIXED, 1},
    {T_FLOAT64, FIXED, 1},
};

void setStartValues(Model *m) {
    static const double start[N_VARIABLES] = {0, 0, 0, 0, 0, 0, 4.0, 0.3, 0.5, 0.0, 1.0, 0.0, 0.0};
    int i;
    for (i = 0; i < N_VARIABLES; i++) m->p[i] = start[i];
    m->x[0] = start[X_START];
    m->x[1] = start[V_START];
}

const char *exitInitialization(ModelData *d) {
    d->m.x[0] = d->m.p[X_START];
    d->m.x[1] = d->m.p[V_START];
    return NULL;
}

/* Before the end of initialization the states are the start values. */
void getStates(const ModelData *d, double x[]) {
    int before = d->mode & BEFORE_INIT;
    x[0] = before ? d->m.p[X_START] : d->m.x[0];
    x[1] = before ? d->m.p[V_START] : d->m.x[1];
}

void setStates(ModelData *d, const double x[]) {
    d->m.x[0] = x[0];
    d->m.x[1] = x[1];
}

void getDerivatives(ModelData *d, double dx[]) {
    const double *p = d->m.p;
    double x[2];
    getStates(d, x);
    dx[0] = x[1];
    dx[1] = -p[K] * x[0] - p[D] * x[1] - p[B] * x[0] * x[0] * x[0] + p[U];
}

double getVariable(ModelData *d, unsigned vr, size_t element) {
    double x[2], dx[2];
    (void)element;
    getStates(d, x);
    getDerivatives(d, dx);
    switch (vr) {
    case TIME: return d->time;
    case X: return x[0];
    case DER_X: return dx[0];
    case V: return x[1];
    case DER_V: case A: return dx[1];
    default: return d->m.p[vr];
    }
}

const char *setVariable(ModelData *d, unsigned vr, size_t element, double value) {
    (void)element;
    d->m.p[vr] = value;
    return NULL;
}

/* The seed's combination of the columns (README: "lying_derivatives_me"); in Initialization Mode
   the states are unknowns (x = x_start, v = v_start), so the start values take their place. */
const char *directionalDerivative(const ModelData *d, const unsigned unknowns[], size_t nUnknown,
                                  const unsigned knowns[], size_t nKnown, const double seed[], double sensitivity[]) {
    const double *p = d->m.p;
    int lie = (int)p[LIE], initializing = d->mode & INITIALIZATION;
    double s[N_VARIABLES] = {0}, x[2], dx, dv, ddv, da;
    size_t i;
    for (i = 0; i < nKnown; i++) {
        unsigned k = knowns[i];
        if (k == DER_X || k == DER_V || k == A || k >= N_VARIABLES) return "a value reference is not a known.";
        if ((k == X || k == V) && initializing) return "in Initialization Mode the states are unknowns; use x_start "
                                                       "and v_start as knowns.";
        if (k == X && lie == 4) return "lie = 4: x is refused as a known.";
        s[k] += seed[i];
    }
    if (initializing) {
        s[X] = s[X_START];
        s[V] = s[V_START];
    }
    getStates(d, x);
    dx = s[X];
    dv = s[V];
    ddv = (-p[K] - 3.0 * p[B] * x[0] * x[0]) * (lie == 1 ? 1.1 : 1.0) * dx - p[D] * dv
        - x[0] * s[K] - x[1] * s[D] * (lie == 2 ? 1.1 : 1.0) - x[0] * x[0] * x[0] * s[B] + s[U];
    da = ddv - (lie == 3 ? 0.1 * p[D] * dv : 0.0);
    for (i = 0; i < nUnknown; i++) {
        switch (unknowns[i]) {
        case X: sensitivity[i] = dx; break;
        case DER_X: case V: sensitivity[i] = dv; break;
        case DER_V: sensitivity[i] = ddv; break;
        case A: sensitivity[i] = da; break;
        default: return "a value reference is not an unknown (x, der(x), v, der(v), a).";
        }
    }
    return NULL;
}
