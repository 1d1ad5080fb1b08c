/*
 * A misbehaving Model Exchange FMU, FMI 2.0: one decay equation whose parameter `mode` selects
 * a defect that an importer must survive in bounded time and memory (issue 31, finding 4).
 *
 * Hand-written for the test suite of fmi-adjoint (it is not produced by the project's
 * exporter).  See fmus/README.md.
 *
 *     der(x) = -k x + dir + noise r      x(t0) = x_start,   y = x
 *
 * with r uniform in [-1, 1], drawn anew at every fmi2GetDerivatives (mode 5 only; else 0) and
 * dir a discrete state (0 except in mode 6).  Before t_bad every mode behaves: mode 1 to 4 and 7
 * announce one time event at t_bad; the defect starts at the event iteration at t >= t_bad.
 *
 *     mode 0  well behaved: no time events
 *     mode 1  next time event t + 1e-300 (equal to t once t > ~1e-284; advancing by 1e-300 from t = 0)
 *     mode 2  next time event nextafter(t, +inf): one ulp ahead, for ever
 *     mode 3  next time event t - 1 (in the past)
 *     mode 4  next time event NaN
 *     mode 5  noisy derivatives (amplitude `noise`): the error control can never be met
 *     mode 6  chattering state event: z = x - x_switch, dir = +1 below the surface, -1 above it
 *     mode 7  the event iteration never settles (newDiscreteStatesNeeded always true)
 *     mode 8  next time event +inf
 *
 * Value references: 0 x (output, state), 1 der(x), 2 k (tunable), 3 mode (fixed), 4 t_bad
 * (fixed), 5 noise (fixed), 6 x_start (fixed), 7 x_switch (fixed).  One event indicator
 * (z = x - x_switch in mode 6, else 1).  No directional derivatives; FMU states can be got and
 * set (not serialized).  An illegal call returns fmi2Error, logs a message and changes nothing.
 */

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fmi2Functions.h"

#define MODEL_GUID "{3f0c6a52-8d1e-4b7a-9c25-71e4d0b9a6f3}"
#define N_STATES 1
#define N_INDICATORS 1
#define N_REALS 8

enum { VR_X, VR_DER_X, VR_K, VR_MODE, VR_T_BAD, VR_NOISE, VR_X_START, VR_X_SWITCH };
enum { M_INSTANTIATED = 1, M_INIT = 2, M_EVENT = 4, M_CONTINUOUS = 8, M_TERMINATED = 16 };
#define ANY (M_INSTANTIATED | M_INIT | M_EVENT | M_CONTINUOUS | M_TERMINATED)
#define BEFORE_INIT_DONE (M_INSTANTIATED | M_INIT)

typedef struct {
    int mode;
    double time, x, dir;
    double p[N_REALS]; /* the parameters by value reference (x and der(x) unused) */
    uint64_t random;   /* xorshift64 state of the noise */
} ModelData;

typedef struct {
    ModelData d;
    char name[64];
    fmi2CallbackFunctions functions;
    fmi2Boolean loggingOn;
} Instance;

static const double START[N_REALS] = {0.0, 0.0, 1.0, 0.0, 0.25, 1e-6, 1.0, 0.5};

static fmi2Status fail(Instance *inst, const char *format, ...) {
    char buffer[256];
    va_list args;
    if (inst != NULL && inst->functions.logger != NULL) {
        va_start(args, format);
        vsnprintf(buffer, sizeof buffer, format, args);
        va_end(args);
        inst->functions.logger(inst->functions.componentEnvironment, inst->name, fmi2Error, "logStatusError", "%s",
                               buffer);
    }
    return fmi2Error;
}

static int allowed(Instance *inst, const char *function, int modes) {
    if (inst == NULL) {
        return 0;
    }
    if (!(inst->d.mode & modes)) {
        fail(inst, "%s must not be called in the current mode.", function);
        return 0;
    }
    return 1;
}

static int defect(const ModelData *d) { return (int)d->p[VR_MODE]; }

static double state(const ModelData *d) { return (d->mode & BEFORE_INIT_DONE) ? d->p[VR_X_START] : d->x; }

static double uniform(ModelData *d) { /* in [-1, 1] */
    d->random ^= d->random << 13;
    d->random ^= d->random >> 7;
    d->random ^= d->random << 17;
    return (double)(d->random >> 11) / 4503599627370496.0 - 1.0;
}

static double derivative(ModelData *d) {
    double dx = -d->p[VR_K] * state(d) + d->dir;
    return defect(d) == 5 ? dx + d->p[VR_NOISE] * uniform(d) : dx;
}

static double indicator(const ModelData *d) { return defect(d) == 6 ? state(d) - d->p[VR_X_SWITCH] : 1.0; }

static void reset(ModelData *d) {
    memcpy(d->p, START, sizeof START);
    d->time = 0.0;
    d->x = START[VR_X_START];
    d->dir = 0.0;
    d->random = 88172645463325252u;
    d->mode = M_INSTANTIATED;
}

/* The event iteration: the time event at t_bad switches the defect on; returns the next time event. */
static void newDiscreteStates(ModelData *d, fmi2EventInfo *info) {
    double t = d->time;
    int m = defect(d);
    memset(info, 0, sizeof *info);
    if (m == 6) {
        double dir = indicator(d) <= 0.0 ? 1.0 : -1.0;
        info->valuesOfContinuousStatesChanged = dir != d->dir;
        d->dir = dir;
    }
    if (m == 0 || m == 5 || m == 6) {
        return;
    }
    info->nextEventTimeDefined = fmi2True;
    if (t < d->p[VR_T_BAD]) {
        info->nextEventTime = d->p[VR_T_BAD];
        return;
    }
    switch (m) {
    case 1: info->nextEventTime = t + 1e-300; break;
    case 2: info->nextEventTime = nextafter(t, INFINITY); break;
    case 3: info->nextEventTime = t - 1.0; break;
    case 4: info->nextEventTime = NAN; break;
    case 8: info->nextEventTime = INFINITY; break;
    default: /* 7: one more iteration, for ever */
        info->nextEventTimeDefined = fmi2False;
        info->newDiscreteStatesNeeded = fmi2True;
    }
}

/* ---------------------------------------------------------------- lifecycle */

const char *fmi2GetTypesPlatform(void) { return fmi2TypesPlatform; }
const char *fmi2GetVersion(void) { return fmi2Version; }

fmi2Status fmi2SetDebugLogging(fmi2Component c, fmi2Boolean loggingOn, size_t n, const fmi2String categories[]) {
    Instance *inst = (Instance *)c;
    (void)categories;
    if (!allowed(inst, "fmi2SetDebugLogging", ANY)) {
        return fmi2Error;
    }
    if (n > 0) {
        return fail(inst, "fmi2SetDebugLogging: the FMU has only the category logStatusError.");
    }
    inst->loggingOn = loggingOn;
    return fmi2OK;
}

fmi2Component fmi2Instantiate(fmi2String name, fmi2Type type, fmi2String guid, fmi2String resources,
                              const fmi2CallbackFunctions *functions, fmi2Boolean visible, fmi2Boolean loggingOn) {
    Instance *inst;
    (void)resources;
    (void)visible;
    if (functions == NULL || functions->allocateMemory == NULL || functions->freeMemory == NULL || name == NULL ||
        type != fmi2ModelExchange || guid == NULL || strcmp(guid, MODEL_GUID) != 0) {
        return NULL;
    }
    inst = (Instance *)functions->allocateMemory(1, sizeof(Instance));
    if (inst == NULL) {
        return NULL;
    }
    snprintf(inst->name, sizeof inst->name, "%s", name);
    inst->functions = *functions;
    inst->loggingOn = loggingOn;
    reset(&inst->d);
    return inst;
}

void fmi2FreeInstance(fmi2Component c) {
    Instance *inst = (Instance *)c;
    if (inst != NULL) {
        inst->functions.freeMemory(inst);
    }
}

fmi2Status fmi2SetupExperiment(fmi2Component c, fmi2Boolean tolDefined, fmi2Real tol, fmi2Real start,
                               fmi2Boolean stopDefined, fmi2Real stop) {
    Instance *inst = (Instance *)c;
    (void)tolDefined;
    (void)tol;
    (void)stopDefined;
    (void)stop;
    if (!allowed(inst, "fmi2SetupExperiment", M_INSTANTIATED)) {
        return fmi2Error;
    }
    inst->d.time = start;
    return fmi2OK;
}

fmi2Status fmi2EnterInitializationMode(fmi2Component c) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2EnterInitializationMode", M_INSTANTIATED)) {
        return fmi2Error;
    }
    inst->d.mode = M_INIT;
    return fmi2OK;
}

fmi2Status fmi2ExitInitializationMode(fmi2Component c) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2ExitInitializationMode", M_INIT)) {
        return fmi2Error;
    }
    inst->d.x = inst->d.p[VR_X_START];
    inst->d.mode = M_EVENT;
    return fmi2OK;
}

fmi2Status fmi2Terminate(fmi2Component c) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2Terminate", M_EVENT | M_CONTINUOUS)) {
        return fmi2Error;
    }
    inst->d.mode = M_TERMINATED;
    return fmi2OK;
}

fmi2Status fmi2Reset(fmi2Component c) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2Reset", ANY)) {
        return fmi2Error;
    }
    reset(&inst->d);
    return fmi2OK;
}

/* ---------------------------------------------------------------- values */

fmi2Status fmi2GetReal(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2Real value[]) {
    Instance *inst = (Instance *)c;
    size_t i;
    if (!allowed(inst, "fmi2GetReal", ANY)) {
        return fmi2Error;
    }
    for (i = 0; i < nvr; i++) {
        if (vr[i] >= N_REALS) {
            return fail(inst, "fmi2GetReal: unknown value reference %u.", (unsigned)vr[i]);
        }
    }
    for (i = 0; i < nvr; i++) {
        switch (vr[i]) {
        case VR_X: value[i] = state(&inst->d); break;
        case VR_DER_X: value[i] = -inst->d.p[VR_K] * state(&inst->d) + inst->d.dir; break;
        default: value[i] = inst->d.p[vr[i]];
        }
    }
    return fmi2OK;
}

fmi2Status fmi2SetReal(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2Real value[]) {
    Instance *inst = (Instance *)c;
    size_t i;
    if (!allowed(inst, "fmi2SetReal", BEFORE_INIT_DONE | M_EVENT | M_CONTINUOUS)) {
        return fmi2Error;
    }
    for (i = 0; i < nvr; i++) { /* check everything first: an illegal call changes nothing */
        if (vr[i] == VR_X || vr[i] == VR_DER_X || vr[i] >= N_REALS) {
            return fail(inst, "fmi2SetReal: value reference %u cannot be set.", (unsigned)vr[i]);
        }
        if (vr[i] == VR_K ? !(inst->d.mode & (BEFORE_INIT_DONE | M_EVENT)) : !(inst->d.mode & BEFORE_INIT_DONE)) {
            return fail(inst, "fmi2SetReal: value reference %u cannot be set in the current mode.", (unsigned)vr[i]);
        }
    }
    for (i = 0; i < nvr; i++) {
        inst->d.p[vr[i]] = value[i];
    }
    return fmi2OK;
}

static fmi2Status none(fmi2Component c, const char *function, size_t nvr) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, function, ANY)) {
        return fmi2Error;
    }
    return nvr > 0 ? fail(inst, "%s: the model has no variables of this type.", function) : fmi2OK;
}

fmi2Status fmi2GetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2Integer value[]) {
    (void)vr;
    (void)value;
    return none(c, "fmi2GetInteger", nvr);
}

fmi2Status fmi2GetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2Boolean value[]) {
    (void)vr;
    (void)value;
    return none(c, "fmi2GetBoolean", nvr);
}

fmi2Status fmi2GetString(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2String value[]) {
    (void)vr;
    (void)value;
    return none(c, "fmi2GetString", nvr);
}

fmi2Status fmi2SetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2Integer value[]) {
    (void)vr;
    (void)value;
    return none(c, "fmi2SetInteger", nvr);
}

fmi2Status fmi2SetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2Boolean value[]) {
    (void)vr;
    (void)value;
    return none(c, "fmi2SetBoolean", nvr);
}

fmi2Status fmi2SetString(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2String value[]) {
    (void)vr;
    (void)value;
    return none(c, "fmi2SetString", nvr);
}

/* ---------------------------------------------------------------- FMU state (not serializable) */

fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate *s) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2GetFMUstate", ANY)) {
        return fmi2Error;
    }
    if (*s == NULL) {
        *s = inst->functions.allocateMemory(1, sizeof(ModelData));
        if (*s == NULL) {
            return fail(inst, "fmi2GetFMUstate: out of memory.");
        }
    }
    memcpy(*s, &inst->d, sizeof(ModelData));
    return fmi2OK;
}

fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate s) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2SetFMUstate", ANY)) {
        return fmi2Error;
    }
    if (s == NULL) {
        return fail(inst, "fmi2SetFMUstate: NULL FMU state.");
    }
    memcpy(&inst->d, s, sizeof(ModelData));
    return fmi2OK;
}

fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate *s) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2FreeFMUstate", ANY)) {
        return fmi2Error;
    }
    if (s != NULL && *s != NULL) {
        inst->functions.freeMemory(*s);
        *s = NULL;
    }
    return fmi2OK;
}

fmi2Status fmi2SerializedFMUstateSize(fmi2Component c, fmi2FMUstate s, size_t *size) {
    (void)s;
    (void)size;
    return fail((Instance *)c, "misbehaving_me cannot serialize its FMU state.");
}

fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate s, fmi2Byte bytes[], size_t size) {
    (void)s;
    (void)bytes;
    (void)size;
    return fail((Instance *)c, "misbehaving_me cannot serialize its FMU state.");
}

fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte bytes[], size_t size, fmi2FMUstate *s) {
    (void)bytes;
    (void)size;
    (void)s;
    return fail((Instance *)c, "misbehaving_me cannot serialize its FMU state.");
}

fmi2Status fmi2GetDirectionalDerivative(fmi2Component c, const fmi2ValueReference u[], size_t nu,
                                        const fmi2ValueReference k[], size_t nk, const fmi2Real dk[], fmi2Real du[]) {
    (void)u;
    (void)nu;
    (void)k;
    (void)nk;
    (void)dk;
    (void)du;
    return fail((Instance *)c, "misbehaving_me has no directional derivatives.");
}

/* ---------------------------------------------------------------- Model Exchange */

fmi2Status fmi2EnterEventMode(fmi2Component c) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2EnterEventMode", M_EVENT | M_CONTINUOUS)) {
        return fmi2Error;
    }
    inst->d.mode = M_EVENT;
    return fmi2OK;
}

fmi2Status fmi2NewDiscreteStates(fmi2Component c, fmi2EventInfo *info) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2NewDiscreteStates", M_EVENT)) {
        return fmi2Error;
    }
    if (info == NULL) {
        return fail(inst, "fmi2NewDiscreteStates: NULL argument.");
    }
    newDiscreteStates(&inst->d, info);
    return fmi2OK;
}

fmi2Status fmi2EnterContinuousTimeMode(fmi2Component c) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2EnterContinuousTimeMode", M_EVENT)) {
        return fmi2Error;
    }
    inst->d.mode = M_CONTINUOUS;
    return fmi2OK;
}

fmi2Status fmi2CompletedIntegratorStep(fmi2Component c, fmi2Boolean noSetPrior, fmi2Boolean *enterEventMode,
                                       fmi2Boolean *terminate) {
    Instance *inst = (Instance *)c;
    (void)noSetPrior;
    if (!allowed(inst, "fmi2CompletedIntegratorStep", M_CONTINUOUS)) {
        return fmi2Error;
    }
    *enterEventMode = fmi2False;
    *terminate = fmi2False;
    return fmi2OK;
}

fmi2Status fmi2SetTime(fmi2Component c, fmi2Real time) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2SetTime", M_EVENT | M_CONTINUOUS)) {
        return fmi2Error;
    }
    inst->d.time = time;
    return fmi2OK;
}

fmi2Status fmi2SetContinuousStates(fmi2Component c, const fmi2Real x[], size_t nx) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2SetContinuousStates", M_CONTINUOUS)) {
        return fmi2Error;
    }
    if (nx != N_STATES || x == NULL) {
        return fail(inst, "fmi2SetContinuousStates: expected %d state.", N_STATES);
    }
    inst->d.x = x[0];
    return fmi2OK;
}

fmi2Status fmi2GetDerivatives(fmi2Component c, fmi2Real dx[], size_t nx) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2GetDerivatives", ANY & ~M_INSTANTIATED)) {
        return fmi2Error;
    }
    if (nx != N_STATES || dx == NULL) {
        return fail(inst, "fmi2GetDerivatives: expected %d state.", N_STATES);
    }
    dx[0] = derivative(&inst->d);
    return fmi2OK;
}

fmi2Status fmi2GetEventIndicators(fmi2Component c, fmi2Real z[], size_t nz) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2GetEventIndicators", ANY & ~M_INSTANTIATED)) {
        return fmi2Error;
    }
    if (nz != N_INDICATORS || z == NULL) {
        return fail(inst, "fmi2GetEventIndicators: expected %d event indicator.", N_INDICATORS);
    }
    z[0] = indicator(&inst->d);
    return fmi2OK;
}

fmi2Status fmi2GetContinuousStates(fmi2Component c, fmi2Real x[], size_t nx) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2GetContinuousStates", ANY & ~M_INSTANTIATED)) {
        return fmi2Error;
    }
    if (nx != N_STATES || x == NULL) {
        return fail(inst, "fmi2GetContinuousStates: expected %d state.", N_STATES);
    }
    x[0] = state(&inst->d);
    return fmi2OK;
}

fmi2Status fmi2GetNominalsOfContinuousStates(fmi2Component c, fmi2Real nominal[], size_t nx) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2GetNominalsOfContinuousStates", ANY)) {
        return fmi2Error;
    }
    if (nx != N_STATES || nominal == NULL) {
        return fail(inst, "fmi2GetNominalsOfContinuousStates: expected %d state.", N_STATES);
    }
    nominal[0] = 1.0;
    return fmi2OK;
}
