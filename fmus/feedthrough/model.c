/*
 * No continuous states (fmus/README.md):  y = k u + c,  m = 2 n.
 *
 * vr 0 u (Real input), 1 k, 2 c (tunable), 3 y (Real output), 4 n (Integer discrete input: set like
 * a tunable parameter, not in Continuous-Time Mode), 5 m (Integer output).  fmi2DoStep only advances
 * the time; the outputs are computed from the inputs whenever they are read.
 */
#include "config.h"
#include "../common/model.h"

enum { U, K, C, Y, N, M };

const Variable variables[N_VARIABLES] = {
    {T_FLOAT64, INPUT, 1}, {T_FLOAT64, TUNABLE, 1}, {T_FLOAT64, TUNABLE, 1},
    {T_FLOAT64, CALCULATED, 1}, {T_INT32, TUNABLE, 1}, {T_INT32, CALCULATED, 1},
};

void setStartValues(Model *m) {
    m->u = 0.0;
    m->k = 2.0;
    m->c = 0.5;
    m->n = 0.0;
}

const char *exitInitialization(ModelData *d) {
    (void)d;
    return NULL;
}

double getVariable(ModelData *d, unsigned vr, size_t element) {
    (void)element;
    switch (vr) {
    case Y: return d->m.k * d->m.u + d->m.c;
    case M: return 2.0 * d->m.n;
    default: return (&d->m.u)[vr == N ? 3 : vr];
    }
}

const char *setVariable(ModelData *d, unsigned vr, size_t element, double value) {
    (void)element;
    (&d->m.u)[vr == N ? 3 : vr] = value;
    return NULL;
}

void getStates(const ModelData *d, double x[]) { (void)d, (void)x; }
void setStates(ModelData *d, const double x[]) { (void)d, (void)x; }
void getDerivatives(ModelData *d, double dx[]) { (void)d, (void)dx; }

const char *doStep(ModelData *d, double t, double h) {
    (void)d, (void)t, (void)h;
    return NULL;
}
