/*
 * A linear state-space model with arrays and Float32, Int32 and UInt8 variables (fmus/README.md):
 *
 *     der(x) = s (A x + B gain u),  s = 2 if mode = 1 else 1,  x(t0) = x_start,  y64 = x[0] + x[1],  y = (float) y64
 *
 * vr 0 time, 1 x[2], 2 der(x)[2], 3 A[2,2] (tunable, row-major), 4 B[2] (fixed), 5 u (Float32 input),
 * 6 y (Float32), 7 y64, 8 gain (Float32, tunable), 9 steps (Int32: the fmi3CompletedIntegratorStep
 * calls since initialization, a diagnostic), 10 mode (UInt8, fixed), 11 x_start[2] (fixed).
 */
#include "config.h"
#include "../common/model.h"

enum { TIME, X, DER_X, A, B, U, Y, Y64, GAIN, STEPS, MODE, X_START };

const Variable variables[N_VARIABLES] = {
    {T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, CALCULATED, 2}, {T_FLOAT64, CALCULATED, 2}, {T_FLOAT64, TUNABLE, 4},
    {T_FLOAT64, FIXED, 2},      {T_FLOAT32, INPUT, 1},      {T_FLOAT32, CALCULATED, 1}, {T_FLOAT64, CALCULATED, 1},
    {T_FLOAT32, TUNABLE, 1},    {T_INT32, CALCULATED, 1},   {T_UINT8, FIXED, 1},        {T_FLOAT64, FIXED, 2},
};

void setStartValues(Model *m) {
    static const double A0[4] = {-1.0, 0.5, -0.5, -2.0};
    int i;
    for (i = 0; i < 4; i++) m->A[i] = A0[i];
    m->B[0] = m->x_start[0] = m->x[0] = 1.0;
    m->B[1] = m->x_start[1] = m->x[1] = 0.0;
    m->u = 0.0f;
    m->gain = 1.0f;
    m->mode = 0;
}

const char *exitInitialization(ModelData *d) {
    setStates(d, d->m.x_start);
    return NULL;
}

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
    const Model *m = &d->m;
    double x[2], s = m->mode == 1 ? 2.0 : 1.0, input = (double)m->gain * (double)m->u;
    getStates(d, x);
    dx[0] = s * (m->A[0] * x[0] + m->A[1] * x[1] + m->B[0] * input);
    dx[1] = s * (m->A[2] * x[0] + m->A[3] * x[1] + m->B[1] * input);
}

double getVariable(ModelData *d, unsigned vr, size_t element) {
    double x[2], dx[2];
    getStates(d, x);
    getDerivatives(d, dx);
    switch (vr) {
    case TIME: return d->time;
    case X: return x[element];
    case DER_X: return dx[element];
    case A: return d->m.A[element];
    case B: return d->m.B[element];
    case U: return d->m.u;
    case Y: return (float)(x[0] + x[1]);
    case Y64: return x[0] + x[1];
    case GAIN: return d->m.gain;
    case STEPS: return d->steps;
    case MODE: return d->m.mode;
    default: return d->m.x_start[element];
    }
}

const char *setVariable(ModelData *d, unsigned vr, size_t element, double value) {
    switch (vr) {
    case A: d->m.A[element] = value; break;
    case B: d->m.B[element] = value; break;
    case U: d->m.u = (float)value; break;
    case GAIN: d->m.gain = (float)value; break;
    case MODE: d->m.mode = (unsigned char)value; break;
    default: d->m.x_start[element] = value;
    }
    return NULL;
}
