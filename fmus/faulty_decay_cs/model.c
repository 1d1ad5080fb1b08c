/*
 * faulty_decay: x' = -k x, stepped exactly, x(t + h) = x(t) exp(-k h) (fmus/README.md).  For the tests
 * of the FMU worker process (fmi_adjoint/fmu/worker.py, issue 10): compile-time switches turn
 * fmi2DoStep into the third-party binaries the tool must survive.
 *
 *   -DFA_CRASH_AT=T   fmi2DoStep at t >= T writes through a NULL pointer (SIGSEGV)
 *   -DFA_HANG_AT=T    fmi2DoStep at t >= T never returns (sleeps forever)
 *   -DFA_PRINT        every fmi2DoStep prints a line to stdout and one to stderr
 *   -DFA_SLOW_US=N    every fmi2DoStep sleeps N microseconds first
 *
 * With FAULTY_DECAY_MARKS=DIR in the environment, the first fmi2DoStep of each process creates
 * DIR/step.PID and a hanging fmi2DoStep creates DIR/hang.PID before it hangs: the signals a test
 * waits for (instead of guessing a time) before it interrupts a run.
 *
 * vr 0 x (output), 1 k (tunable), 2 x_start (fixed).
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "../common/model.h"

enum { X, K, X_START };

const Variable variables[N_VARIABLES] = {{T_FLOAT64, CALCULATED, 1}, {T_FLOAT64, TUNABLE, 1}, {T_FLOAT64, FIXED, 1}};

void setStartValues(Model *m) { m->x = m->k = m->x_start = 1.0; }

const char *exitInitialization(ModelData *d) {
    d->m.x = d->m.x_start;
    return NULL;
}

double getVariable(ModelData *d, unsigned vr, size_t element) {
    (void)element;
    return vr == X ? d->m.x : vr == K ? d->m.k : d->m.x_start;
}

const char *setVariable(ModelData *d, unsigned vr, size_t element, double value) {
    (void)element;
    *(vr == K ? &d->m.k : &d->m.x_start) = value;
    return NULL;
}

#if defined(FA_SLOW_US) || defined(FA_HANG_AT)
static void sleep_us(long us) {
    struct timespec ts;
    ts.tv_sec = us / 1000000L;
    ts.tv_nsec = (us % 1000000L) * 1000L;
    nanosleep(&ts, NULL);
}
#endif

/* DIR/<what>.<pid> in the folder named by FAULTY_DECAY_MARKS (if set): see the header. */
static void mark(const char *what) {
    const char *dir = getenv("FAULTY_DECAY_MARKS");
    char path[4096];
    FILE *file;
    if (dir == NULL || snprintf(path, sizeof path, "%s/%s.%ld", dir, what, (long)getpid()) >= (int)sizeof path) return;
    if ((file = fopen(path, "w")) != NULL) fclose(file);
}

const char *doStep(ModelData *d, double t, double h) {
    static int stepped = 0;
    (void)t; /* used by the switches only */
    if (!stepped) {
        stepped = 1;
        mark("step");
    }
#ifdef FA_SLOW_US
    sleep_us(FA_SLOW_US);
#endif
#ifdef FA_PRINT
    printf("faulty_decay says on stdout: doStep at t = %g\n", t);
    fprintf(stderr, "faulty_decay says on stderr: doStep at t = %g\n", t);
#endif
#ifdef FA_CRASH_AT
    if (t >= FA_CRASH_AT) *(volatile int *)NULL = 1; /* the crash under test */
#endif
#ifdef FA_HANG_AT
    if (t >= FA_HANG_AT) {
        mark("hang");
        for (;;) sleep_us(100000L); /* the hang under test */
    }
#endif
    d->m.x *= exp(-d->m.k * h);
    return NULL;
}

void getStates(const ModelData *d, double x[]) { x[0] = d->m.x; }
void setStates(ModelData *d, const double x[]) { d->m.x = x[0]; }
void getDerivatives(ModelData *d, double dx[]) { dx[0] = -d->m.k * d->m.x; }
