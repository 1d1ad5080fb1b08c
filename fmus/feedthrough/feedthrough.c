/*
 * Direct feedthrough without states, FMI 2.0 Model Exchange AND Co-Simulation
 * in one binary.
 *
 * Hand-written for the test suite of fmi-adjoint (it is not produced by the
 * project's exporter).  See fmus/README.md.
 *
 *     y = k * u + c
 *     m = 2 * n
 *
 * Value references (and 1-based ModelVariables indices):
 *
 *     vr 0  u  Real input, continuous, start 0.0   (index 1)
 *     vr 1  k  Real parameter, tunable, 2.0        (index 2)
 *     vr 2  c  Real parameter, tunable, 0.5        (index 3)
 *     vr 3  y  Real output, continuous             (index 4)
 *     vr 4  n  Integer input, discrete, start 0    (index 5)
 *     vr 5  m  Integer output, discrete            (index 6)
 *
 * Zero continuous states and zero event indicators: the Model Exchange
 * functions on states and indicators accept only n = 0.  Co-Simulation:
 * fmi2DoStep only advances the time (outputs are computed from the current
 * inputs whenever they are read).
 *
 * Setting values (FMI 2.0 rules): u in every mode before termination; the
 * discrete input n in Instantiated, Initialization, Event (ME) and Step (CS)
 * Mode, not in Continuous-Time Mode; the tunable k and c likewise.  y and m
 * cannot be set.  An illegal call returns fmi2Error, logs a message and
 * changes nothing.  A function of the other interface is an illegal call.
 */

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fmi2Functions.h"

#define MODEL_GUID "{92370763-976e-4c77-b39a-cbad01027d18}"

enum { VR_U = 0, VR_K = 1, VR_C = 2, VR_Y = 3, VR_N = 4, VR_M = 5 };

typedef enum {
    MODE_INSTANTIATED = 1 << 0,
    MODE_INITIALIZATION = 1 << 1,
    MODE_EVENT = 1 << 2,           /* Model Exchange */
    MODE_CONTINUOUS_TIME = 1 << 3, /* Model Exchange */
    MODE_STEP = 1 << 4,            /* Co-Simulation: initialized, between steps */
    MODE_TERMINATED = 1 << 5,
    MODE_ERROR = 1 << 6
} Mode;

#define ANY_MODE (MODE_INSTANTIATED | MODE_INITIALIZATION | MODE_EVENT | MODE_CONTINUOUS_TIME | MODE_STEP | MODE_TERMINATED | MODE_ERROR)
#define BEFORE_INIT_DONE (MODE_INSTANTIATED | MODE_INITIALIZATION)
/* where discrete inputs and tunable parameters may change */
#define DISCRETE_CHANGE (BEFORE_INIT_DONE | MODE_EVENT | MODE_STEP)

/* Everything that makes up the state of an instance (copied by get/set FMU state). */
typedef struct {
    fmi2Type fmuType;
    Mode mode;
    double time;
    double u, k, c;
    int n;
} ModelData;

typedef struct {
    ModelData data;
    char *instanceName;
    fmi2CallbackFunctions functions;
    fmi2Boolean loggingOn;
} Instance;

/* Serialized FMU state: a magic number, the size of ModelData, then ModelData
   byte for byte (a serialized state is only read back by the same binary). */
#define SERIAL_MAGIC 0x46445431u /* "FDT1" */
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

/* Checks that a function of one interface is called on an instance of that interface. */
static int ofInterface(Instance *inst, const char *name, fmi2Type fmuType) {
    if (inst == NULL) {
        return 0;
    }
    if (inst->data.fmuType != fmuType) {
        logMessage(inst, fmi2Error, "logStatusError", "%s is a %s function, but this is a %s instance.", name,
                   fmuType == fmi2ModelExchange ? "Model Exchange" : "Co-Simulation",
                   fmuType == fmi2ModelExchange ? "Co-Simulation" : "Model Exchange");
        return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- model equations */

static double outputY(const ModelData *d) { return d->k * d->u + d->c; }

static int outputM(const ModelData *d) { return 2 * d->n; }

static void setStartValues(ModelData *d) {
    d->time = 0.0;
    d->u = 0.0;
    d->k = 2.0;
    d->c = 0.5;
    d->n = 0;
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
            functions->logger(functions->componentEnvironment, "feedthrough", fmi2Error, "logStatusError",
                              "fmi2Instantiate: missing instance name.");
        }
        return NULL;
    }
    if (fmuType != fmi2ModelExchange && fmuType != fmi2CoSimulation) {
        if (functions->logger) {
            functions->logger(functions->componentEnvironment, instanceName, fmi2Error, "logStatusError",
                              "fmi2Instantiate: unknown fmuType %d.", (int)fmuType);
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
    inst->data.fmuType = fmuType;
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
    (void)toleranceDefined; /* nothing is integrated */
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
    /* Model Exchange continues in Event Mode, Co-Simulation in Step Mode */
    inst->data.mode = inst->data.fmuType == fmi2ModelExchange ? MODE_EVENT : MODE_STEP;
    return fmi2OK;
}

fmi2Status fmi2Terminate(fmi2Component c) {
    Instance *inst = (Instance *)c;
    if (!allowed(inst, "fmi2Terminate", MODE_EVENT | MODE_CONTINUOUS_TIME | MODE_STEP)) {
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
    size_t i;
    if (!allowed(inst, "fmi2GetReal", ANY_MODE)) {
        return fmi2Error;
    }
    if (nvr > 0 && (vr == NULL || value == NULL)) {
        return FAIL(inst, "fmi2GetReal: NULL argument.");
    }
    for (i = 0; i < nvr; i++) {
        switch (vr[i]) {
        case VR_U: value[i] = inst->data.u; break;
        case VR_K: value[i] = inst->data.k; break;
        case VR_C: value[i] = inst->data.c; break;
        case VR_Y: value[i] = outputY(&inst->data); break;
        default: return FAIL(inst, "fmi2GetReal: %u is not the value reference of a Real variable.", (unsigned)vr[i]);
        }
    }
    return fmi2OK;
}

fmi2Status fmi2SetReal(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2Real value[]) {
    Instance *inst = (Instance *)c;
    ModelData *d;
    size_t i;
    if (!allowed(inst, "fmi2SetReal", BEFORE_INIT_DONE | MODE_EVENT | MODE_CONTINUOUS_TIME | MODE_STEP)) {
        return fmi2Error;
    }
    if (nvr > 0 && (vr == NULL || value == NULL)) {
        return FAIL(inst, "fmi2SetReal: NULL argument.");
    }
    d = &inst->data;
    /* check everything first so that an illegal call changes nothing */
    for (i = 0; i < nvr; i++) {
        switch (vr[i]) {
        case VR_U:
            break; /* a continuous input can be set in every mode listed above */
        case VR_K:
        case VR_C:
            if (!(d->mode & DISCRETE_CHANGE)) {
                return FAIL(inst, "fmi2SetReal: the tunable parameters k and c cannot be set in Continuous-Time Mode "
                            "(enter Event Mode first).");
            }
            break;
        case VR_Y:
            return FAIL(inst, "fmi2SetReal: the output y is calculated and cannot be set.");
        default:
            return FAIL(inst, "fmi2SetReal: %u is not the value reference of a Real variable.", (unsigned)vr[i]);
        }
    }
    for (i = 0; i < nvr; i++) {
        switch (vr[i]) {
        case VR_U: d->u = value[i]; break;
        case VR_K: d->k = value[i]; break;
        case VR_C: d->c = value[i]; break;
        default: break;
        }
    }
    return fmi2OK;
}

fmi2Status fmi2GetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2Integer value[]) {
    Instance *inst = (Instance *)c;
    size_t i;
    if (!allowed(inst, "fmi2GetInteger", ANY_MODE)) {
        return fmi2Error;
    }
    if (nvr > 0 && (vr == NULL || value == NULL)) {
        return FAIL(inst, "fmi2GetInteger: NULL argument.");
    }
    for (i = 0; i < nvr; i++) {
        switch (vr[i]) {
        case VR_N: value[i] = inst->data.n; break;
        case VR_M: value[i] = outputM(&inst->data); break;
        default:
            return FAIL(inst, "fmi2GetInteger: %u is not the value reference of an Integer variable.", (unsigned)vr[i]);
        }
    }
    return fmi2OK;
}

fmi2Status fmi2SetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2Integer value[]) {
    Instance *inst = (Instance *)c;
    size_t i;
    if (!allowed(inst, "fmi2SetInteger", DISCRETE_CHANGE)) {
        return fmi2Error;
    }
    if (nvr > 0 && (vr == NULL || value == NULL)) {
        return FAIL(inst, "fmi2SetInteger: NULL argument.");
    }
    for (i = 0; i < nvr; i++) {
        if (vr[i] == VR_M) {
            return FAIL(inst, "fmi2SetInteger: the output m is calculated and cannot be set.");
        }
        if (vr[i] != VR_N) {
            return FAIL(inst, "fmi2SetInteger: %u is not the value reference of an Integer variable.", (unsigned)vr[i]);
        }
    }
    for (i = 0; i < nvr; i++) {
        inst->data.n = value[i];
    }
    return fmi2OK;
}

/* The model has no Boolean or String variables. */
static fmi2Status noVariablesOfType(Instance *inst, const char *function, size_t nvr) {
    if (!allowed(inst, function, ANY_MODE)) {
        return fmi2Error;
    }
    if (nvr > 0) {
        return FAIL(inst, "%s: the model has no variables of this type.", function);
    }
    return fmi2OK;
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
    if (((const ModelData *)FMUstate)->fmuType != inst->data.fmuType) {
        return FAIL(inst, "fmi2SetFMUstate: the FMU state belongs to an instance of the other interface.");
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
        ((int)read.mode & ~ANY_MODE) != 0 || (read.fmuType != fmi2ModelExchange && read.fmuType != fmi2CoSimulation)) {
        return FAIL(inst, "fmi2DeSerializeFMUstate: not a serialized feedthrough state.");
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
    return FAIL(inst, "fmi2GetDirectionalDerivative is not supported by feedthrough "
                "(providesDirectionalDerivative=\"false\").");
}

/* ---------------------------------------------------------------- Model Exchange */

fmi2Status fmi2EnterEventMode(fmi2Component c) {
    Instance *inst = (Instance *)c;
    if (!ofInterface(inst, "fmi2EnterEventMode", fmi2ModelExchange) ||
        !allowed(inst, "fmi2EnterEventMode", MODE_EVENT | MODE_CONTINUOUS_TIME)) {
        return fmi2Error;
    }
    inst->data.mode = MODE_EVENT;
    return fmi2OK;
}

fmi2Status fmi2NewDiscreteStates(fmi2Component c, fmi2EventInfo *eventInfo) {
    Instance *inst = (Instance *)c;
    if (!ofInterface(inst, "fmi2NewDiscreteStates", fmi2ModelExchange) ||
        !allowed(inst, "fmi2NewDiscreteStates", MODE_EVENT)) {
        return fmi2Error;
    }
    if (eventInfo == NULL) {
        return FAIL(inst, "fmi2NewDiscreteStates: NULL argument.");
    }
    /* no discrete states: the event iteration ends at once */
    eventInfo->newDiscreteStatesNeeded = fmi2False;
    eventInfo->terminateSimulation = fmi2False;
    eventInfo->nominalsOfContinuousStatesChanged = fmi2False;
    eventInfo->valuesOfContinuousStatesChanged = fmi2False;
    eventInfo->nextEventTimeDefined = fmi2False;
    eventInfo->nextEventTime = 0.0;
    return fmi2OK;
}

fmi2Status fmi2EnterContinuousTimeMode(fmi2Component c) {
    Instance *inst = (Instance *)c;
    if (!ofInterface(inst, "fmi2EnterContinuousTimeMode", fmi2ModelExchange) ||
        !allowed(inst, "fmi2EnterContinuousTimeMode", MODE_EVENT)) {
        return fmi2Error;
    }
    inst->data.mode = MODE_CONTINUOUS_TIME;
    return fmi2OK;
}

fmi2Status fmi2CompletedIntegratorStep(fmi2Component c, fmi2Boolean noSetFMUStatePriorToCurrentPoint,
                                       fmi2Boolean *enterEventMode, fmi2Boolean *terminateSimulation) {
    Instance *inst = (Instance *)c;
    (void)noSetFMUStatePriorToCurrentPoint;
    if (!ofInterface(inst, "fmi2CompletedIntegratorStep", fmi2ModelExchange) ||
        !allowed(inst, "fmi2CompletedIntegratorStep", MODE_CONTINUOUS_TIME)) {
        return fmi2Error;
    }
    if (enterEventMode == NULL || terminateSimulation == NULL) {
        return FAIL(inst, "fmi2CompletedIntegratorStep: NULL argument.");
    }
    *enterEventMode = fmi2False;
    *terminateSimulation = fmi2False;
    return fmi2OK;
}

fmi2Status fmi2SetTime(fmi2Component c, fmi2Real time) {
    Instance *inst = (Instance *)c;
    if (!ofInterface(inst, "fmi2SetTime", fmi2ModelExchange) ||
        !allowed(inst, "fmi2SetTime", MODE_EVENT | MODE_CONTINUOUS_TIME)) {
        return fmi2Error;
    }
    inst->data.time = time;
    return fmi2OK;
}

/* The state vector and the event indicator vector are empty: only n = 0 is accepted. */
static fmi2Status emptyVector(fmi2Component c, const char *function, int modes, size_t n) {
    Instance *inst = (Instance *)c;
    if (!ofInterface(inst, function, fmi2ModelExchange) || !allowed(inst, function, modes)) {
        return fmi2Error;
    }
    if (n != 0) {
        return FAIL(inst, "%s: the model has no continuous states and no event indicators (got n = %lu, expected 0).",
                    function, (unsigned long)n);
    }
    return fmi2OK;
}

fmi2Status fmi2SetContinuousStates(fmi2Component c, const fmi2Real x[], size_t nx) {
    (void)x;
    return emptyVector(c, "fmi2SetContinuousStates", MODE_CONTINUOUS_TIME, nx);
}

fmi2Status fmi2GetDerivatives(fmi2Component c, fmi2Real derivatives_[], size_t nx) {
    (void)derivatives_;
    return emptyVector(c, "fmi2GetDerivatives", ANY_MODE & ~MODE_INSTANTIATED, nx);
}

fmi2Status fmi2GetEventIndicators(fmi2Component c, fmi2Real eventIndicators[], size_t ni) {
    (void)eventIndicators;
    return emptyVector(c, "fmi2GetEventIndicators", ANY_MODE & ~MODE_INSTANTIATED, ni);
}

fmi2Status fmi2GetContinuousStates(fmi2Component c, fmi2Real x[], size_t nx) {
    (void)x;
    return emptyVector(c, "fmi2GetContinuousStates", ANY_MODE & ~MODE_INSTANTIATED, nx);
}

fmi2Status fmi2GetNominalsOfContinuousStates(fmi2Component c, fmi2Real x_nominal[], size_t nx) {
    (void)x_nominal;
    return emptyVector(c, "fmi2GetNominalsOfContinuousStates", ANY_MODE, nx);
}

/* ---------------------------------------------------------------- Co-Simulation */

fmi2Status fmi2DoStep(fmi2Component c, fmi2Real currentCommunicationPoint, fmi2Real communicationStepSize,
                      fmi2Boolean noSetFMUStatePriorToCurrentCommunicationPoint) {
    Instance *inst = (Instance *)c;
    ModelData *d;
    (void)noSetFMUStatePriorToCurrentCommunicationPoint;
    if (!ofInterface(inst, "fmi2DoStep", fmi2CoSimulation) || !allowed(inst, "fmi2DoStep", MODE_STEP)) {
        return fmi2Error;
    }
    d = &inst->data;
    if (!(communicationStepSize > 0.0)) {
        return FAIL(inst, "fmi2DoStep: communicationStepSize must be > 0 (got %g).", communicationStepSize);
    }
    if (fabs(currentCommunicationPoint - d->time) > 1e-9 * fmax(1.0, fabs(d->time))) {
        return FAIL(inst, "fmi2DoStep: currentCommunicationPoint %.17g is not the FMU's time %.17g.",
                    currentCommunicationPoint, d->time);
    }
    d->time = currentCommunicationPoint + communicationStepSize; /* nothing to integrate */
    return fmi2OK;
}

fmi2Status fmi2CancelStep(fmi2Component c) {
    Instance *inst = (Instance *)c;
    if (!ofInterface(inst, "fmi2CancelStep", fmi2CoSimulation)) {
        return fmi2Error;
    }
    return FAIL(inst, "fmi2CancelStep: fmi2DoStep never returns fmi2Pending (canRunAsynchronuously=\"false\").");
}

fmi2Status fmi2SetRealInputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                       const fmi2Integer order[], const fmi2Real value[]) {
    Instance *inst = (Instance *)c;
    (void)vr;
    (void)nvr;
    (void)order;
    (void)value;
    if (!ofInterface(inst, "fmi2SetRealInputDerivatives", fmi2CoSimulation)) {
        return fmi2Error;
    }
    return FAIL(inst, "fmi2SetRealInputDerivatives: the FMU cannot interpolate inputs (canInterpolateInputs=\"false\").");
}

fmi2Status fmi2GetRealOutputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                        const fmi2Integer order[], fmi2Real value[]) {
    Instance *inst = (Instance *)c;
    (void)vr;
    (void)nvr;
    (void)order;
    (void)value;
    if (!ofInterface(inst, "fmi2GetRealOutputDerivatives", fmi2CoSimulation)) {
        return fmi2Error;
    }
    return FAIL(inst, "fmi2GetRealOutputDerivatives: maxOutputDerivativeOrder is 0.");
}

/* Asynchronous steps are not supported: fmi2DoStep always completes, so there is no status to ask for. */
static fmi2Status noStatus(fmi2Component c, const char *function) {
    Instance *inst = (Instance *)c;
    if (!ofInterface(inst, function, fmi2CoSimulation)) {
        return fmi2Error;
    }
    return FAIL(inst, "%s: fmi2DoStep never returns fmi2Pending or fmi2Discard, so there is no status to query.",
                function);
}

fmi2Status fmi2GetStatus(fmi2Component c, const fmi2StatusKind s, fmi2Status *value) {
    (void)s;
    (void)value;
    return noStatus(c, "fmi2GetStatus");
}

fmi2Status fmi2GetRealStatus(fmi2Component c, const fmi2StatusKind s, fmi2Real *value) {
    (void)s;
    (void)value;
    return noStatus(c, "fmi2GetRealStatus");
}

fmi2Status fmi2GetIntegerStatus(fmi2Component c, const fmi2StatusKind s, fmi2Integer *value) {
    (void)s;
    (void)value;
    return noStatus(c, "fmi2GetIntegerStatus");
}

fmi2Status fmi2GetBooleanStatus(fmi2Component c, const fmi2StatusKind s, fmi2Boolean *value) {
    (void)s;
    (void)value;
    return noStatus(c, "fmi2GetBooleanStatus");
}

fmi2Status fmi2GetStringStatus(fmi2Component c, const fmi2StatusKind s, fmi2String *value) {
    (void)s;
    (void)value;
    return noStatus(c, "fmi2GetStringStatus");
}
