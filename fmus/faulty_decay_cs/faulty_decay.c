/*
 * faulty_decay: first-order decay x' = -k x, FMI 2.0 Co-Simulation, exact steps
 * x(t + h) = x(t) exp(-k h).  Hand-written for the tests of the FMU worker process
 * (fmi_adjoint/fmu/worker.py, issue 10 finding 6): compile-time switches turn
 * fmi2DoStep into the third-party binaries the tool must survive.
 *
 *   -DFA_CRASH_AT=T   fmi2DoStep at t >= T writes through a NULL pointer (SIGSEGV)
 *   -DFA_HANG_AT=T    fmi2DoStep at t >= T never returns (sleeps forever)
 *   -DFA_PRINT        every fmi2DoStep prints a line to stdout and one to stderr
 *   -DFA_SLOW_US=N    every fmi2DoStep sleeps N microseconds first
 *
 * With FAULTY_DECAY_MARKS=DIR in the environment, the first fmi2DoStep of each process
 * creates DIR/step.PID and a hanging fmi2DoStep creates DIR/hang.PID before it hangs: the
 * signals a test waits for (instead of guessing a time) before it interrupts a run.
 *
 * Without switches it is a well-behaved FMU.  Only the calls a Co-Simulation importer
 * makes are implemented; every other FMI 2.0 function is exported and returns fmi2Error.
 */

#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fmi2Functions.h"

#define GUID "{6f1c2a4e-93d0-4b8e-a7c5-2e1f0d9b8a73}"

enum { VR_X = 0, VR_K = 1, VR_X_START = 2, N_VARS = 3 };

typedef struct {
    double values[N_VARS];
    double time;
    int initialized;
    fmi2CallbackFunctions callbacks;
    char *name;
} Instance;

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
    if (dir == NULL || snprintf(path, sizeof path, "%s/%s.%ld", dir, what, (long)getpid()) >= (int)sizeof path) {
        return;
    }
    file = fopen(path, "w");
    if (file != NULL) {
        fclose(file);
    }
}

static fmi2Status fail(Instance *inst, const char *message) {
    if (inst != NULL && inst->callbacks.logger != NULL) {
        inst->callbacks.logger(inst->callbacks.componentEnvironment, inst->name, fmi2Error, "logStatusError", message);
    }
    return fmi2Error;
}

const char *fmi2GetTypesPlatform(void) { return fmi2TypesPlatform; }
const char *fmi2GetVersion(void) { return fmi2Version; }

fmi2Component fmi2Instantiate(fmi2String instanceName, fmi2Type fmuType, fmi2String fmuGUID,
                              fmi2String fmuResourceLocation, const fmi2CallbackFunctions *functions,
                              fmi2Boolean visible, fmi2Boolean loggingOn) {
    Instance *inst;
    (void)fmuResourceLocation;
    (void)visible;
    (void)loggingOn;
    if (fmuType != fmi2CoSimulation || fmuGUID == NULL || strcmp(fmuGUID, GUID) != 0 || functions == NULL) {
        return NULL;
    }
    inst = (Instance *)calloc(1, sizeof(Instance));
    if (inst == NULL) {
        return NULL;
    }
    inst->callbacks = *functions;
    inst->name = (char *)malloc(strlen(instanceName ? instanceName : "") + 1);
    if (inst->name == NULL) {
        free(inst);
        return NULL;
    }
    strcpy(inst->name, instanceName ? instanceName : "");
    inst->values[VR_K] = 1.0;
    inst->values[VR_X_START] = 1.0;
    inst->values[VR_X] = 1.0;
    return inst;
}

void fmi2FreeInstance(fmi2Component c) {
    Instance *inst = (Instance *)c;
    if (inst != NULL) {
        free(inst->name);
        free(inst);
    }
}

fmi2Status fmi2SetDebugLogging(fmi2Component c, fmi2Boolean loggingOn, size_t n, const fmi2String categories[]) {
    (void)c;
    (void)loggingOn;
    (void)n;
    (void)categories;
    return fmi2OK;
}

fmi2Status fmi2SetupExperiment(fmi2Component c, fmi2Boolean toleranceDefined, fmi2Real tolerance,
                               fmi2Real startTime, fmi2Boolean stopTimeDefined, fmi2Real stopTime) {
    Instance *inst = (Instance *)c;
    (void)toleranceDefined;
    (void)tolerance;
    (void)stopTimeDefined;
    (void)stopTime;
    inst->time = startTime;
    return fmi2OK;
}

fmi2Status fmi2EnterInitializationMode(fmi2Component c) {
    (void)c;
    return fmi2OK;
}

fmi2Status fmi2ExitInitializationMode(fmi2Component c) {
    Instance *inst = (Instance *)c;
    inst->values[VR_X] = inst->values[VR_X_START];
    inst->initialized = 1;
    return fmi2OK;
}

fmi2Status fmi2Terminate(fmi2Component c) {
    (void)c;
    return fmi2OK;
}

fmi2Status fmi2Reset(fmi2Component c) {
    Instance *inst = (Instance *)c;
    inst->values[VR_K] = 1.0;
    inst->values[VR_X_START] = 1.0;
    inst->values[VR_X] = 1.0;
    inst->time = 0.0;
    inst->initialized = 0;
    return fmi2OK;
}

fmi2Status fmi2GetReal(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2Real value[]) {
    Instance *inst = (Instance *)c;
    size_t i;
    for (i = 0; i < nvr; i++) {
        if (vr[i] >= N_VARS) {
            return fail(inst, "fmi2GetReal: unknown value reference.");
        }
        value[i] = inst->values[vr[i]];
    }
    return fmi2OK;
}

fmi2Status fmi2SetReal(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2Real value[]) {
    Instance *inst = (Instance *)c;
    size_t i;
    for (i = 0; i < nvr; i++) {
        if (vr[i] == VR_X || vr[i] >= N_VARS || (vr[i] == VR_X_START && inst->initialized)) {
            return fail(inst, "fmi2SetReal: the variable cannot be set now.");
        }
        inst->values[vr[i]] = value[i];
    }
    return fmi2OK;
}

fmi2Status fmi2DoStep(fmi2Component c, fmi2Real currentCommunicationPoint, fmi2Real communicationStepSize,
                      fmi2Boolean noSetFMUStatePriorToCurrentCommunicationPoint) {
    Instance *inst = (Instance *)c;
    static int stepped = 0;
    (void)noSetFMUStatePriorToCurrentCommunicationPoint;
    if (!stepped) {
        stepped = 1;
        mark("step");
    }
#ifdef FA_SLOW_US
    sleep_us(FA_SLOW_US);
#endif
#ifdef FA_PRINT
    printf("faulty_decay says on stdout: doStep at t = %g\n", currentCommunicationPoint);
    fprintf(stderr, "faulty_decay says on stderr: doStep at t = %g\n", currentCommunicationPoint);
#endif
#ifdef FA_CRASH_AT
    if (currentCommunicationPoint >= FA_CRASH_AT) {
        *(volatile int *)NULL = 1; /* the crash under test */
    }
#endif
#ifdef FA_HANG_AT
    if (currentCommunicationPoint >= FA_HANG_AT) {
        mark("hang");
        for (;;) {
            sleep_us(100000L); /* the hang under test */
        }
    }
#endif
    if (!inst->initialized || !(communicationStepSize >= 0.0)) {
        return fail(inst, "fmi2DoStep: not initialized, or a negative step.");
    }
    inst->values[VR_X] *= exp(-inst->values[VR_K] * communicationStepSize);
    inst->time = currentCommunicationPoint + communicationStepSize;
    return fmi2OK;
}

/* ---- not applicable to this model: exported, refused ------------------------------- */
#define REFUSE(inst) return fail((Instance *)(inst), "function not supported by faulty_decay")

fmi2Status fmi2GetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2Integer v[]) {
    (void)vr; (void)n; (void)v; REFUSE(c);
}
fmi2Status fmi2GetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2Boolean v[]) {
    (void)vr; (void)n; (void)v; REFUSE(c);
}
fmi2Status fmi2GetString(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2String v[]) {
    (void)vr; (void)n; (void)v; REFUSE(c);
}
fmi2Status fmi2SetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2Integer v[]) {
    (void)vr; (void)n; (void)v; REFUSE(c);
}
fmi2Status fmi2SetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2Boolean v[]) {
    (void)vr; (void)n; (void)v; REFUSE(c);
}
fmi2Status fmi2SetString(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2String v[]) {
    (void)vr; (void)n; (void)v; REFUSE(c);
}
fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate *s) { (void)s; REFUSE(c); }
fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate s) { (void)s; REFUSE(c); }
fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate *s) { (void)s; REFUSE(c); }
fmi2Status fmi2SerializedFMUstateSize(fmi2Component c, fmi2FMUstate s, size_t *n) { (void)s; (void)n; REFUSE(c); }
fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate s, fmi2Byte b[], size_t n) {
    (void)s; (void)b; (void)n; REFUSE(c);
}
fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte b[], size_t n, fmi2FMUstate *s) {
    (void)b; (void)n; (void)s; REFUSE(c);
}
fmi2Status fmi2GetDirectionalDerivative(fmi2Component c, const fmi2ValueReference u[], size_t nu,
                                        const fmi2ValueReference z[], size_t nz, const fmi2Real dz[], fmi2Real du[]) {
    (void)u; (void)nu; (void)z; (void)nz; (void)dz; (void)du; REFUSE(c);
}
fmi2Status fmi2EnterEventMode(fmi2Component c) { REFUSE(c); }
fmi2Status fmi2NewDiscreteStates(fmi2Component c, fmi2EventInfo *info) { (void)info; REFUSE(c); }
fmi2Status fmi2EnterContinuousTimeMode(fmi2Component c) { REFUSE(c); }
fmi2Status fmi2CompletedIntegratorStep(fmi2Component c, fmi2Boolean noSet, fmi2Boolean *event, fmi2Boolean *term) {
    (void)noSet; (void)event; (void)term; REFUSE(c);
}
fmi2Status fmi2SetTime(fmi2Component c, fmi2Real t) { (void)t; REFUSE(c); }
fmi2Status fmi2SetContinuousStates(fmi2Component c, const fmi2Real x[], size_t n) { (void)x; (void)n; REFUSE(c); }
fmi2Status fmi2GetDerivatives(fmi2Component c, fmi2Real dx[], size_t n) { (void)dx; (void)n; REFUSE(c); }
fmi2Status fmi2GetEventIndicators(fmi2Component c, fmi2Real e[], size_t n) { (void)e; (void)n; REFUSE(c); }
fmi2Status fmi2GetContinuousStates(fmi2Component c, fmi2Real x[], size_t n) { (void)x; (void)n; REFUSE(c); }
fmi2Status fmi2GetNominalsOfContinuousStates(fmi2Component c, fmi2Real x[], size_t n) { (void)x; (void)n; REFUSE(c); }
fmi2Status fmi2SetRealInputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t n,
                                       const fmi2Integer order[], const fmi2Real v[]) {
    (void)vr; (void)n; (void)order; (void)v; REFUSE(c);
}
fmi2Status fmi2GetRealOutputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t n,
                                        const fmi2Integer order[], fmi2Real v[]) {
    (void)vr; (void)n; (void)order; (void)v; REFUSE(c);
}
fmi2Status fmi2CancelStep(fmi2Component c) { REFUSE(c); }
fmi2Status fmi2GetStatus(fmi2Component c, const fmi2StatusKind s, fmi2Status *v) { (void)s; (void)v; REFUSE(c); }
fmi2Status fmi2GetRealStatus(fmi2Component c, const fmi2StatusKind s, fmi2Real *v) { (void)s; (void)v; REFUSE(c); }
fmi2Status fmi2GetIntegerStatus(fmi2Component c, const fmi2StatusKind s, fmi2Integer *v) { (void)s; (void)v; REFUSE(c); }
fmi2Status fmi2GetBooleanStatus(fmi2Component c, const fmi2StatusKind s, fmi2Boolean *v) { (void)s; (void)v; REFUSE(c); }
fmi2Status fmi2GetStringStatus(fmi2Component c, const fmi2StatusKind s, fmi2String *v) { (void)s; (void)v; REFUSE(c); }
