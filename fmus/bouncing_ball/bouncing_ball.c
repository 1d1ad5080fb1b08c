/*
 * Bouncing ball with a state event, FMI 2.0 Model Exchange.
 *
 * Hand-written for the test suite of fmi-adjoint (it is not produced by the
 * project's exporter).  See fmus/README.md.
 *
 *     der(h) = v
 *     der(v) = -g
 *     h(t0) = h_start,  v(t0) = v_start
 *
 * One event indicator, z = h - floor + k_curve v^2 (z = h at the defaults
 * floor = k_curve = 0).  When it crosses zero the importer enters Event Mode
 * and fmi2NewDiscreteStates bounces the ball:
 *
 *     if (z <= 0 && v < 0) { h = h - 2 z;  v = -e * v; }
 *
 * (h = -h at the defaults.)  floor puts a parameter in the indicator and
 * k_curve curves its surface; both are for the tests of the sensitivities at
 * events, whose trial points must stay on the event's side of the surface.
 *
 * Value references (and 1-based ModelVariables indices):
 *
 *     vr 0  h        output, continuous state       (index 1)
 *     vr 1  der(h)   local, state derivative        (index 2)
 *     vr 2  v        output, continuous state       (index 3)
 *     vr 3  der(v)   local, state derivative        (index 4)
 *     vr 4  g        parameter, fixed,   9.81       (index 5)
 *     vr 5  e        parameter, tunable, 0.8        (index 6)
 *     vr 6  h_start  parameter, fixed,   1.0        (index 7)
 *     vr 7  v_start  parameter, fixed,   0.0        (index 8)
 *     vr 8  floor    parameter, fixed,   0.0        (index 9)
 *     vr 9  k_curve  parameter, fixed,   0.0        (index 10)
 *
 * No time events, no directional derivatives.  fmi2CompletedIntegratorStep
 * never asks for an event.  FMU states can be got, set and serialized.
 *
 * Setting values (FMI 2.0 rules): g, h_start, v_start, floor and k_curve before
 * fmi2ExitInitializationMode; the tunable e before and during initialization
 * and in Event Mode.  An illegal call returns fmi2Error, logs a message and
 * changes nothing.
 */

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fmi2Functions.h"

#define MODEL_GUID "{d52a5b5c-dff1-4047-8081-65c3155ef556}"

#define N_STATES 2
#define N_EVENT_INDICATORS 1

enum { VR_H = 0, VR_DER_H = 1, VR_V = 2, VR_DER_V = 3, VR_G = 4, VR_E = 5, VR_H_START = 6, VR_V_START = 7, VR_FLOOR = 8,
       VR_K_CURVE = 9 };

typedef enum {
    MODE_INSTANTIATED = 1 << 0,
    MODE_INITIALIZATION = 1 << 1,
    MODE_EVENT = 1 << 2,
    MODE_CONTINUOUS_TIME = 1 << 3,
    MODE_TERMINATED = 1 << 4,
    MODE_ERROR = 1 << 5
} Mode;

#define ANY_MODE (MODE_INSTANTIATED | MODE_INITIALIZATION | MODE_EVENT | MODE_CONTINUOUS_TIME | MODE_TERMINATED | MODE_ERROR)
#define BEFORE_INIT_DONE (MODE_INSTANTIATED | MODE_INITIALIZATION)

/* Everything that makes up the state of an instance (copied by get/set FMU state). */
typedef struct {
    Mode mode;
    double time;
    double h, v;
    double g, e, h_start, v_start, floor_, k_curve;
} ModelData;

typedef struct {
    ModelData data;
    char *instanceName;
    fmi2CallbackFunctions functions;
    fmi2Boolean loggingOn;
} Instance;

/* Serialized FMU state: a magic number, the size of ModelData, then ModelData
   byte for byte (a serialized state is only read back by the same binary). */
#define SERIAL_MAGIC 0x42424c31u /* "BBL1" */
#define SERIAL_SIZE (2 * sizeof(unsigned) + sizeof(ModelData))

/* ---------------------------------------------------------------- logging */

static void logMessage(Instance *inst, fmi2Status status, const char *category, const char *format, ...) {
    char buffer[512];
    va_list args;
    if (inst == NULL || inst->functions.logger == NULL) {
        return;
    }
    if (status < fmi2Error && !inst->loggingOn) {
        return; /* errors are always reported */
    }
    va_start(args, format);
    vsnprintf(buffer, sizeof buffer, format, args);
    va_end(args);
    /* the message is passed as an argument, never as a format string */
    inst->functions.logger(inst->functions.componentEnvironment, inst->instanceName, status, category, "%s", buffer);
}

#define FAIL(inst, ...) (logMessage((inst), fmi2Error, "logStatusError", __VA_ARGS__), fmi2Error)

static int allowed(Instance *inst, const char *name, int modes) {
    if (inst == NULL) {
        return 0;
    }
    if (!(inst->data.mode & modes)) {
        logMessage(inst, fmi2Error, "logStatusError", "%s must not be called in the current mode.", name);
        return 0;
    }
    logMessage(inst, fmi2OK, "logCalls", "%s", name);
    return 1;
}

/* ---------------------------------------------------------------- model equations */

/* The states: in Instantiated and Initialization Mode they follow the start parameters. */
static void currentStates(const ModelData *d, double x[N_STATES]) {
    if (d->mode & BEFORE_INIT_DONE) {
        x[0] = d->h_start;
        x[1] = d->v_start;
    } else {
        x[0] = d->h;
        x[1] = d->v;
    }
}

static void derivatives(const ModelData *d, double dx[N_STATES]) {
    double x[N_STATES];
    currentStates(d, x);
    dx[0] = x[1];
    dx[1] = -d->g;
}

/* The event indicator z = h - floor + k_curve v^2. */
static double indicator(const ModelData *d) {
    return d->h - d->floor_ + d->k_curve * d->v * d->v;
}

static void setStartValues(ModelData *d) {
    d->time = 0.0;
    d->g = 9.81;
    d->e = 0.8;
    d->h_start = 1.0;
    d->v_start = 0.0;
    d->floor_ = 0.0;
    d->k_curve = 0.0;
    d->h = d->h_start;
    d->v = d->v_start;
}

/* ---------------------------------------------------------------- common functions */

const char *fmi2GetTypesPlatform(void) { return fmi2TypesPlatform; }

const char *fmi2GetVersion(void) { return fmi2Version; }

fmi2Status fmi2SetDebugLogging(fmi2Component c, fmi2Boolean loggingOn, size_t nCategories, const fmi2String categories[]) {
    Instance *inst = (Instance *)c;
    size_t i;
    if (!allowed(inst, "fmi2SetDebugLogging", ANY_MODE)) {
        return fmi2Error;
    }
    if (nCategories > 0 && categories == NULL) {
        return FAIL(inst, "fmi2SetDebugLogging: NULL argument.");
    }
    for (i = 0; i < nCategories; i++) {
        if (categories[i] == NULL || (strcmp(categories[i], "logStatusError") != 0 && strcmp(categories[i], "logCalls") != 0)) {
            return FAIL(inst, "fmi2SetDebugLogging: unknown log category \"%s\".", categories[i] ? categories[i] : "(null)");
        }
    }
    inst->loggingOn = loggingOn;
    return fmi2OK;
}

fmi2Component fmi2Instantiate(fmi2String instanceName, fmi2Type fmuType, fmi2String fmuGUID,
                              fmi2String fmuResourceLocation, const fmi2CallbackFunctions *functions,
                              fmi2Boolean visible, fmi2Boolean loggingOn) {
    Instance *inst;
    size_t n;
    (void)fmuResourceLocation; /* the FMU has no resources */
    (void)visible;
    if (functions == NULL || functions->allocateMemory == NULL || functions->freeMemory == NULL) {
        return NULL;
    }
    if (instanceName == NULL || instanceName[0] == '\0') {
        if (functions->logger) {
            functions->logger(functions->componentEnvironment, "bouncing_ball", fmi2Error, "logStatusError",
                              "fmi2Instantiate: missing instance name.");
        }
        return NULL;
    }
    if (fmuType != fmi2ModelExchange) {
        if (functions->logger) {
            functions->logger(functions->componentEnvironment, instanceName, fmi2Error, "logStatusError",
                              "fmi2Instantiate: bouncing_ball supports Model Exchange only.");
        }
        return NULL;
    }
    if (fmuGUID == NULL || strcmp(fmuGUID, MODEL_GUID) != 0) {
        if (functions->logger) {
            functions->logger(functions->componentEnvironment, instanceName, fmi2Error, "logStatusError",
                              "fmi2Instantiate: wrong GUID %s (expected %s).", fmuGUID ? fmuGUID : "(null)", MODEL_GUID);
        }
        return NULL;
    }
    inst = (Instance *)functions->allocateMemory(1, sizeof(Instance));
    if (inst == NULL) {
        return NULL;
    }
    n = strlen(instanceName) + 1;
    inst->instanceName = (char *)functions->allocateMemory(n, 1);
    if (inst->instanceName == NULL) {
        functions->freeMemory(inst);
        return NULL;
    }
    memcpy(inst->instanceName, instanceName, n);
    inst->functions = *functions;
    inst->loggingOn = loggingOn;
    setStartValues(&inst->data);
    inst->data.mode = MODE_INSTANTIATED;
    logMessage(inst, fmi2OK, "logCalls", "fmi2Instantiate: GUID %s", fmuGUID);
    return inst;
}

void fmi2FreeInstance(fmi2Component c) {
    Instance *inst = (Instance *)c;
    fmi2CallbackFreeMemory freeMemory;
    if (inst == NULL) {
        return;
    }
    logMessage(inst, fmi2OK, "logCalls", "fmi2FreeInstance");
    freeMemory = inst->functions.freeMemory;
    freeMemory(inst->instanceName);
    freeMemory(inst);
}

fmi2Status fmi2SetupExperiment(fmi2Component c, fmi2Boolean toleranceDefined, fmi2Real tolerance,
                               fmi2Real startTime, fmi2Boolean stopTimeDefined, fmi2Real stopTime) {
    Instance *inst = (Instance *)c;
    (void)toleranceDefined; /* Model Exchange: the importer's solver controls the error */
    (void)tolerance;
    if (!allowed(inst, "fmi2SetupExperiment", MODE_INSTANTIATED)) {
        return fmi2Error;
    }
    if (stopTimeDefined && stopTime < startTime) {
        return FAIL(inst, "fmi2SetupExperiment: stopTime < startTime.");
    }
    inst->data.time = startTime;
    return fmi2OK;
}

fmi2Status fmi2EnterInitializationMode(fmi2Component c) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2EnterInitializationMode", MODE_INSTANTIATED)) {
        return fmi2Error;
    }
    inst->data.mode = MODE_INITIALIZATION;
    return fmi2OK;
}

fmi2Status fmi2ExitInitializationMode(fmi2Component c) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2ExitInitializationMode", MODE_INITIALIZATION)) {
        return fmi2Error;
    }
    inst->data.h = inst->data.h_start;
    inst->data.v = inst->data.v_start;
    inst->data.mode = MODE_EVENT;
    return fmi2OK;
}

fmi2Status fmi2Terminate(fmi2Component c) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2Terminate", MODE_EVENT | MODE_CONTINUOUS_TIME)) {
        return fmi2Error;
    }
    inst->data.mode = MODE_TERMINATED;
    return fmi2OK;
}

fmi2Status fmi2Reset(fmi2Component c) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2Reset", ANY_MODE)) {
        return fmi2Error;
    }
    setStartValues(&inst->data);
    inst->data.mode = MODE_INSTANTIATED;
    return fmi2OK;
}

/* ---------------------------------------------------------------- get and set values */

fmi2Status fmi2GetReal(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2Real value[]) {
    Instance *inst = (Instance *)c;
    double x[N_STATES], dx[N_STATES];
    size_t i;
    if (!allowed(inst, "fmi2GetReal", ANY_MODE)) {
        return fmi2Error;
    }
    if (nvr > 0 && (vr == NULL || value == NULL)) {
        return FAIL(inst, "fmi2GetReal: NULL argument.");
    }
    currentStates(&inst->data, x);
    derivatives(&inst->data, dx);
    for (i = 0; i < nvr; i++) {
        switch (vr[i]) {
        case VR_H: value[i] = x[0]; break;
        case VR_DER_H: value[i] = dx[0]; break;
        case VR_V: value[i] = x[1]; break;
        case VR_DER_V: value[i] = dx[1]; break;
        case VR_G: value[i] = inst->data.g; break;
        case VR_E: value[i] = inst->data.e; break;
        case VR_H_START: value[i] = inst->data.h_start; break;
        case VR_V_START: value[i] = inst->data.v_start; break;
        case VR_FLOOR: value[i] = inst->data.floor_; break;
        case VR_K_CURVE: value[i] = inst->data.k_curve; break;
        default: return FAIL(inst, "fmi2GetReal: unknown value reference %u.", (unsigned)vr[i]);
        }
    }
    return fmi2OK;
}

fmi2Status fmi2SetReal(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2Real value[]) {
    Instance *inst = (Instance *)c;
    ModelData *d;
    size_t i;
    if (!allowed(inst, "fmi2SetReal", BEFORE_INIT_DONE | MODE_EVENT | MODE_CONTINUOUS_TIME)) {
        return fmi2Error;
    }
    if (nvr > 0 && (vr == NULL || value == NULL)) {
        return FAIL(inst, "fmi2SetReal: NULL argument.");
    }
    d = &inst->data;
    /* check everything first so that an illegal call changes nothing */
    for (i = 0; i < nvr; i++) {
        switch (vr[i]) {
        case VR_E:
            if (!(d->mode & (BEFORE_INIT_DONE | MODE_EVENT))) {
                return FAIL(inst, "fmi2SetReal: the tunable parameter e can only be set before initialization, "
                            "during initialization or in Event Mode.");
            }
            break;
        case VR_G:
        case VR_H_START:
        case VR_V_START:
        case VR_FLOOR:
        case VR_K_CURVE:
            if (!(d->mode & BEFORE_INIT_DONE)) {
                return FAIL(inst, "fmi2SetReal: g, h_start, v_start, floor and k_curve are fixed parameters: they "
                            "cannot be set after fmi2ExitInitializationMode.");
            }
            break;
        case VR_H:
        case VR_V:
        case VR_DER_H:
        case VR_DER_V:
            return FAIL(inst, "fmi2SetReal: h, v, der(h) and der(v) are calculated variables and cannot be set "
                        "(use fmi2SetContinuousStates for the states).");
        default:
            return FAIL(inst, "fmi2SetReal: unknown value reference %u.", (unsigned)vr[i]);
        }
    }
    for (i = 0; i < nvr; i++) {
        switch (vr[i]) {
        case VR_G: d->g = value[i]; break;
        case VR_E: d->e = value[i]; break;
        case VR_H_START: d->h_start = value[i]; break;
        case VR_V_START: d->v_start = value[i]; break;
        case VR_FLOOR: d->floor_ = value[i]; break;
        case VR_K_CURVE: d->k_curve = value[i]; break;
        default: break;
        }
    }
    return fmi2OK;
}

/* The model has no Integer, Boolean or String variables. */
static fmi2Status noVariablesOfType(Instance *inst, const char *function, size_t nvr) {
    if (!allowed(inst, function, ANY_MODE)) {
        return fmi2Error;
    }
    if (nvr > 0) {
        return FAIL(inst, "%s: the model has no variables of this type.", function);
    }
    return fmi2OK;
}

fmi2Status fmi2GetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2Integer value[]) {
    (void)vr;
    (void)value;
    return noVariablesOfType((Instance *)c, "fmi2GetInteger", nvr);
}

fmi2Status fmi2GetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2Boolean value[]) {
    (void)vr;
    (void)value;
    return noVariablesOfType((Instance *)c, "fmi2GetBoolean", nvr);
}

fmi2Status fmi2GetString(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2String value[]) {
    (void)vr;
    (void)value;
    return noVariablesOfType((Instance *)c, "fmi2GetString", nvr);
}

fmi2Status fmi2SetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2Integer value[]) {
    (void)vr;
    (void)value;
    return noVariablesOfType((Instance *)c, "fmi2SetInteger", nvr);
}

fmi2Status fmi2SetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2Boolean value[]) {
    (void)vr;
    (void)value;
    return noVariablesOfType((Instance *)c, "fmi2SetBoolean", nvr);
}

fmi2Status fmi2SetString(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2String value[]) {
    (void)vr;
    (void)value;
    return noVariablesOfType((Instance *)c, "fmi2SetString", nvr);
}

/* ---------------------------------------------------------------- FMU state */

fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate *FMUstate) {
    Instance *inst = (Instance *)c;
    ModelData *copy;
    if (!allowed(inst, "fmi2GetFMUstate", ANY_MODE)) {
        return fmi2Error;
    }
    if (FMUstate == NULL) {
        return FAIL(inst, "fmi2GetFMUstate: NULL argument.");
    }
    copy = (ModelData *)*FMUstate;
    if (copy == NULL) {
        copy = (ModelData *)inst->functions.allocateMemory(1, sizeof(ModelData));
        if (copy == NULL) {
            return FAIL(inst, "fmi2GetFMUstate: out of memory.");
        }
    }
    *copy = inst->data;
    *FMUstate = copy;
    return fmi2OK;
}

fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate FMUstate) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2SetFMUstate", ANY_MODE)) {
        return fmi2Error;
    }
    if (FMUstate == NULL) {
        return FAIL(inst, "fmi2SetFMUstate: NULL FMU state.");
    }
    inst->data = *(const ModelData *)FMUstate;
    return fmi2OK;
}

fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate *FMUstate) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2FreeFMUstate", ANY_MODE)) {
        return fmi2Error;
    }
    if (FMUstate == NULL) {
        return FAIL(inst, "fmi2FreeFMUstate: NULL argument.");
    }
    if (*FMUstate != NULL) {
        inst->functions.freeMemory(*FMUstate);
        *FMUstate = NULL;
    }
    return fmi2OK;
}

fmi2Status fmi2SerializedFMUstateSize(fmi2Component c, fmi2FMUstate FMUstate, size_t *size) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2SerializedFMUstateSize", ANY_MODE)) {
        return fmi2Error;
    }
    if (FMUstate == NULL || size == NULL) {
        return FAIL(inst, "fmi2SerializedFMUstateSize: NULL argument.");
    }
    *size = SERIAL_SIZE;
    return fmi2OK;
}

fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate FMUstate, fmi2Byte serializedState[], size_t size) {
    Instance *inst = (Instance *)c;
    unsigned header[2];
    if (!allowed(inst, "fmi2SerializeFMUstate", ANY_MODE)) {
        return fmi2Error;
    }
    if (FMUstate == NULL || serializedState == NULL) {
        return FAIL(inst, "fmi2SerializeFMUstate: NULL argument.");
    }
    if (size != SERIAL_SIZE) {
        return FAIL(inst, "fmi2SerializeFMUstate: wrong buffer size %lu (expected %lu).", (unsigned long)size,
                    (unsigned long)SERIAL_SIZE);
    }
    header[0] = SERIAL_MAGIC;
    header[1] = (unsigned)sizeof(ModelData);
    memcpy(serializedState, header, sizeof header);
    memcpy(serializedState + sizeof header, FMUstate, sizeof(ModelData));
    return fmi2OK;
}

fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte serializedState[], size_t size, fmi2FMUstate *FMUstate) {
    Instance *inst = (Instance *)c;
    unsigned header[2];
    ModelData read, *d;
    if (!allowed(inst, "fmi2DeSerializeFMUstate", ANY_MODE)) {
        return fmi2Error;
    }
    if (serializedState == NULL || FMUstate == NULL) {
        return FAIL(inst, "fmi2DeSerializeFMUstate: NULL argument.");
    }
    if (size != SERIAL_SIZE) {
        return FAIL(inst, "fmi2DeSerializeFMUstate: wrong size %lu of the serialized state (expected %lu).",
                    (unsigned long)size, (unsigned long)SERIAL_SIZE);
    }
    memcpy(header, serializedState, sizeof header);
    memcpy(&read, serializedState + sizeof header, sizeof read);
    if (header[0] != SERIAL_MAGIC || header[1] != sizeof(ModelData) || (int)read.mode == 0 ||
        ((int)read.mode & ~ANY_MODE) != 0) {
        return FAIL(inst, "fmi2DeSerializeFMUstate: not a serialized bouncing_ball state.");
    }
    d = (ModelData *)*FMUstate;
    if (d == NULL) {
        d = (ModelData *)inst->functions.allocateMemory(1, sizeof(ModelData));
        if (d == NULL) {
            return FAIL(inst, "fmi2DeSerializeFMUstate: out of memory.");
        }
    }
    *d = read;
    *FMUstate = d;
    return fmi2OK;
}

fmi2Status fmi2GetDirectionalDerivative(fmi2Component c, const fmi2ValueReference vUnknown_ref[], size_t nUnknown,
                                        const fmi2ValueReference vKnown_ref[], size_t nKnown,
                                        const fmi2Real dvKnown[], fmi2Real dvUnknown[]) {
    Instance *inst = (Instance *)c;
    (void)vUnknown_ref;
    (void)nUnknown;
    (void)vKnown_ref;
    (void)nKnown;
    (void)dvKnown;
    (void)dvUnknown;
    if (inst == NULL) {
        return fmi2Error;
    }
    return FAIL(inst, "fmi2GetDirectionalDerivative is not supported by bouncing_ball "
                "(providesDirectionalDerivative=\"false\").");
}

/* ---------------------------------------------------------------- Model Exchange */

fmi2Status fmi2EnterEventMode(fmi2Component c) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2EnterEventMode", MODE_EVENT | MODE_CONTINUOUS_TIME)) {
        return fmi2Error;
    }
    inst->data.mode = MODE_EVENT;
    return fmi2OK;
}

fmi2Status fmi2NewDiscreteStates(fmi2Component c, fmi2EventInfo *eventInfo) {
    Instance *inst = (Instance *)c;
    ModelData *d;
    double z;
    if (!allowed(inst, "fmi2NewDiscreteStates", MODE_EVENT)) {
        return fmi2Error;
    }
    if (eventInfo == NULL) {
        return FAIL(inst, "fmi2NewDiscreteStates: NULL argument.");
    }
    d = &inst->data;
    eventInfo->newDiscreteStatesNeeded = fmi2False;
    eventInfo->terminateSimulation = fmi2False;
    eventInfo->nominalsOfContinuousStatesChanged = fmi2False;
    eventInfo->valuesOfContinuousStatesChanged = fmi2False;
    eventInfo->nextEventTimeDefined = fmi2False; /* no time events */
    eventInfo->nextEventTime = 0.0;
    /* The bounce.  The importer's root finder stops just after z changed sign,
       so z is zero or slightly negative here.  Moving h by -2 z (h = -h at the
       defaults) instead of putting it on the surface puts the indicator on the
       positive side after the bounce: the next integration starts with z >= 0
       and a rising ball, so no spurious crossing is detected right after the
       event.  This changes h by at most the root finder's tolerance times |v|. */
    z = indicator(d);
    if (z <= 0.0 && d->v < 0.0) {
        d->h = d->h - 2.0 * z;
        d->v = -d->e * d->v;
        eventInfo->valuesOfContinuousStatesChanged = fmi2True;
        logMessage(inst, fmi2OK, "logCalls", "bounce at t = %.17g: v = %.17g", d->time, d->v);
    }
    return fmi2OK;
}

fmi2Status fmi2EnterContinuousTimeMode(fmi2Component c) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2EnterContinuousTimeMode", MODE_EVENT)) {
        return fmi2Error;
    }
    inst->data.mode = MODE_CONTINUOUS_TIME;
    return fmi2OK;
}

fmi2Status fmi2CompletedIntegratorStep(fmi2Component c, fmi2Boolean noSetFMUStatePriorToCurrentPoint,
                                       fmi2Boolean *enterEventMode, fmi2Boolean *terminateSimulation) {
    Instance *inst = (Instance *)c;
    (void)noSetFMUStatePriorToCurrentPoint;
    if (!allowed(inst, "fmi2CompletedIntegratorStep", MODE_CONTINUOUS_TIME)) {
        return fmi2Error;
    }
    if (enterEventMode == NULL || terminateSimulation == NULL) {
        return FAIL(inst, "fmi2CompletedIntegratorStep: NULL argument.");
    }
    *enterEventMode = fmi2False; /* events come from the indicator only */
    *terminateSimulation = fmi2False;
    return fmi2OK;
}

fmi2Status fmi2SetTime(fmi2Component c, fmi2Real time) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2SetTime", MODE_EVENT | MODE_CONTINUOUS_TIME)) {
        return fmi2Error;
    }
    inst->data.time = time;
    return fmi2OK;
}

fmi2Status fmi2SetContinuousStates(fmi2Component c, const fmi2Real x[], size_t nx) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2SetContinuousStates", MODE_CONTINUOUS_TIME)) {
        return fmi2Error;
    }
    if (nx != N_STATES || x == NULL) {
        return FAIL(inst, "fmi2SetContinuousStates: expected %d states, got %lu.", N_STATES, (unsigned long)nx);
    }
    inst->data.h = x[0];
    inst->data.v = x[1];
    return fmi2OK;
}

fmi2Status fmi2GetDerivatives(fmi2Component c, fmi2Real derivatives_[], size_t nx) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2GetDerivatives", ANY_MODE & ~MODE_INSTANTIATED)) {
        return fmi2Error;
    }
    if (nx != N_STATES || derivatives_ == NULL) {
        return FAIL(inst, "fmi2GetDerivatives: expected %d states, got %lu.", N_STATES, (unsigned long)nx);
    }
    derivatives(&inst->data, derivatives_);
    return fmi2OK;
}

fmi2Status fmi2GetEventIndicators(fmi2Component c, fmi2Real eventIndicators[], size_t ni) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2GetEventIndicators", ANY_MODE & ~MODE_INSTANTIATED)) {
        return fmi2Error;
    }
    if (ni != N_EVENT_INDICATORS || eventIndicators == NULL) {
        return FAIL(inst, "fmi2GetEventIndicators: expected %d event indicator, got %lu.", N_EVENT_INDICATORS,
                    (unsigned long)ni);
    }
    eventIndicators[0] = indicator(&inst->data);
    return fmi2OK;
}

fmi2Status fmi2GetContinuousStates(fmi2Component c, fmi2Real x[], size_t nx) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2GetContinuousStates", ANY_MODE & ~MODE_INSTANTIATED)) {
        return fmi2Error;
    }
    if (nx != N_STATES || x == NULL) {
        return FAIL(inst, "fmi2GetContinuousStates: expected %d states, got %lu.", N_STATES, (unsigned long)nx);
    }
    currentStates(&inst->data, x);
    return fmi2OK;
}

fmi2Status fmi2GetNominalsOfContinuousStates(fmi2Component c, fmi2Real x_nominal[], size_t nx) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2GetNominalsOfContinuousStates", ANY_MODE)) {
        return fmi2Error;
    }
    if (nx != N_STATES || x_nominal == NULL) {
        return FAIL(inst, "fmi2GetNominalsOfContinuousStates: expected %d states, got %lu.", N_STATES,
                    (unsigned long)nx);
    }
    x_nominal[0] = 1.0;
    x_nominal[1] = 1.0;
    return fmi2OK;
}
