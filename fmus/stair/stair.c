/*
 * A stair: time events and non-Real outputs, FMI 2.0 Model Exchange AND
 * Co-Simulation in one binary.
 *
 * Hand-written for the test suite of fmi-adjoint (it is not produced by the
 * project's exporter).  See fmus/README.md.
 *
 *     time events at t_j = t0 + j * period, j = 1, 2, ...:  counter := counter + 1
 *     odd   = counter is odd
 *     phase = high (2) if counter >= 3, else low (1)
 *     der(x) = -c * x,  x(t0) = 1
 *     level = a * counter + x
 *
 * Value references (and 1-based ModelVariables indices):
 *
 *     vr 0  counter     Integer output, discrete                 (index 1)
 *     vr 1  period      Real parameter, fixed,   0.5             (index 2)
 *     vr 2  odd         Boolean output, discrete                 (index 3)
 *     vr 3  level       Real output, continuous                  (index 4)
 *     vr 4  x           Real local, continuous state             (index 5)
 *     vr 5  der(x)      Real local, state derivative             (index 6)
 *     vr 6  a           Real parameter, tunable, 2.0             (index 7)
 *     vr 7  c           Real parameter, tunable, 1.0             (index 8)
 *     vr 8  phase       Enumeration Phase (low = 1, high = 2), output, discrete  (index 9)
 *     vr 9  h_internal  Real parameter, fixed,   1e-4 (Co-Simulation solver)     (index 10)
 *
 * Model Exchange: the time events are announced through nextEventTime in
 * fmi2NewDiscreteStates; at an event (time within 1e-10 max(1, |t_j|) of
 * t_j) the counter is incremented.  No state events (no event indicators).
 *
 * Co-Simulation: fmi2DoStep(t, H) integrates x with the classical fourth-order
 * Runge-Kutta method and handles the events inside the step: it integrates to
 * each event time t_j in (t, t + H] exactly (n = ceil(length / h_internal)
 * equal substeps per piece; a ratio within 1e-9 above an integer counts as
 * that integer), increments the counter there and goes on.  An event at the
 * end of the step is handled before fmi2DoStep returns, so the outputs at a
 * communication point t_j are those after the event.
 *
 * Setting values (FMI 2.0 rules): the fixed period (> 0) and h_internal (> 0)
 * before fmi2ExitInitializationMode; the tunable a and c before and during
 * initialization, in Event Mode (ME) and between steps (CS).  The outputs
 * and x cannot be set (x is set through fmi2SetContinuousStates).  An illegal
 * call returns fmi2Error, logs a message and changes nothing.  A function of
 * the other interface is an illegal call.
 */

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fmi2Functions.h"

#define MODEL_GUID "{739bb72d-8c75-4a81-8dfa-a70a4ffd29e2}"

#define N_STATES 1

enum {
    VR_COUNTER = 0,
    VR_PERIOD = 1,
    VR_ODD = 2,
    VR_LEVEL = 3,
    VR_X = 4,
    VR_DER_X = 5,
    VR_A = 6,
    VR_C = 7,
    VR_PHASE = 8,
    VR_H_INTERNAL = 9
};

enum { PHASE_LOW = 1, PHASE_HIGH = 2 };

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
/* where tunable parameters may change */
#define DISCRETE_CHANGE (BEFORE_INIT_DONE | MODE_EVENT | MODE_STEP)

/* Everything that makes up the state of an instance (copied by get/set FMU state). */
typedef struct {
    fmi2Type fmuType;
    Mode mode;
    double startTime;
    double time;
    double x;
    int counter;
    double period, a, c, h_internal;
} ModelData;

typedef struct {
    ModelData data;
    char *instanceName;
    fmi2CallbackFunctions functions;
    fmi2Boolean loggingOn;
} Instance;

/* Serialized FMU state: a magic number, the size of ModelData, then ModelData
   byte for byte (a serialized state is only read back by the same binary). */
#define SERIAL_MAGIC 0x53545231u /* "STR1" */
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

static double currentState(const ModelData *d) { return (d->mode & BEFORE_INIT_DONE) ? 1.0 : d->x; }

static double rhs(double c, double x) { return -c * x; }

static double level(const ModelData *d) { return d->a * d->counter + currentState(d); }

static int phase(const ModelData *d) { return d->counter >= 3 ? PHASE_HIGH : PHASE_LOW; }

/* the time of the next event, t_(counter+1) */
static double nextEventTime(const ModelData *d) { return d->startTime + (d->counter + 1) * d->period; }

static int eventDue(const ModelData *d, double t) {
    double te = nextEventTime(d);
    return t >= te - 1e-10 * fmax(1.0, fabs(te));
}

static void setStartValues(ModelData *d) {
    d->startTime = 0.0;
    d->time = 0.0;
    d->x = 1.0;
    d->counter = 0;
    d->period = 0.5;
    d->a = 2.0;
    d->c = 1.0;
    d->h_internal = 1e-4;
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
            functions->logger(functions->componentEnvironment, "stair", fmi2Error, "logStatusError",
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
    (void)toleranceDefined; /* ME: the importer's solver; CS: the fixed step h_internal */
    (void)tolerance;
    if (!allowed(inst, "fmi2SetupExperiment", MODE_INSTANTIATED)) {
        return fmi2Error;
    }
    if (stopTimeDefined && stopTime < startTime) {
        return FAIL(inst, "fmi2SetupExperiment: stopTime < startTime.");
    }
    inst->data.time = startTime;
    inst->data.startTime = startTime;
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
    if (!(inst->data.period > 0.0) || !(inst->data.h_internal > 0.0)) {
        return FAIL(inst, "fmi2ExitInitializationMode: period and h_internal must be > 0.");
    }
    inst->data.x = 1.0;
    inst->data.counter = 0;
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
    const ModelData *d;
    size_t i;
    if (!allowed(inst, "fmi2GetReal", ANY_MODE)) {
        return fmi2Error;
    }
    if (nvr > 0 && (vr == NULL || value == NULL)) {
        return FAIL(inst, "fmi2GetReal: NULL argument.");
    }
    d = &inst->data;
    for (i = 0; i < nvr; i++) {
        switch (vr[i]) {
        case VR_PERIOD: value[i] = d->period; break;
        case VR_LEVEL: value[i] = level(d); break;
        case VR_X: value[i] = currentState(d); break;
        case VR_DER_X: value[i] = rhs(d->c, currentState(d)); break;
        case VR_A: value[i] = d->a; break;
        case VR_C: value[i] = d->c; break;
        case VR_H_INTERNAL: value[i] = d->h_internal; break;
        default: return FAIL(inst, "fmi2GetReal: %u is not the value reference of a Real variable.", (unsigned)vr[i]);
        }
    }
    return fmi2OK;
}

fmi2Status fmi2SetReal(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2Real value[]) {
    Instance *inst = (Instance *)c;
    ModelData *d;
    size_t i;
    if (!allowed(inst, "fmi2SetReal", DISCRETE_CHANGE | MODE_CONTINUOUS_TIME)) {
        return fmi2Error;
    }
    if (nvr > 0 && (vr == NULL || value == NULL)) {
        return FAIL(inst, "fmi2SetReal: NULL argument.");
    }
    d = &inst->data;
    /* check everything first so that an illegal call changes nothing */
    for (i = 0; i < nvr; i++) {
        switch (vr[i]) {
        case VR_A:
        case VR_C:
            if (!(d->mode & DISCRETE_CHANGE)) {
                return FAIL(inst, "fmi2SetReal: the tunable parameters a and c cannot be set in Continuous-Time Mode "
                            "(enter Event Mode first).");
            }
            break;
        case VR_PERIOD:
        case VR_H_INTERNAL:
            if (!(d->mode & BEFORE_INIT_DONE)) {
                return FAIL(inst, "fmi2SetReal: period and h_internal are fixed parameters: they cannot be set after "
                            "fmi2ExitInitializationMode.");
            }
            if (!(value[i] > 0.0)) {
                return FAIL(inst, "fmi2SetReal: period and h_internal must be > 0 (got %g).", value[i]);
            }
            break;
        case VR_LEVEL:
        case VR_X:
        case VR_DER_X:
            return FAIL(inst, "fmi2SetReal: level, x and der(x) are calculated and cannot be set "
                        "(use fmi2SetContinuousStates for the state x).");
        default:
            return FAIL(inst, "fmi2SetReal: %u is not the value reference of a Real variable.", (unsigned)vr[i]);
        }
    }
    for (i = 0; i < nvr; i++) {
        switch (vr[i]) {
        case VR_A: d->a = value[i]; break;
        case VR_C: d->c = value[i]; break;
        case VR_PERIOD: d->period = value[i]; break;
        case VR_H_INTERNAL: d->h_internal = value[i]; break;
        default: break;
        }
    }
    return fmi2OK;
}

/* Integer variables: counter and the enumeration phase (FMI 2.0 passes enumerations as Integers). */
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
        case VR_COUNTER: value[i] = inst->data.counter; break;
        case VR_PHASE: value[i] = phase(&inst->data); break;
        default:
            return FAIL(inst, "fmi2GetInteger: %u is not the value reference of an Integer or Enumeration variable.",
                        (unsigned)vr[i]);
        }
    }
    return fmi2OK;
}

fmi2Status fmi2SetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2Integer value[]) {
    Instance *inst = (Instance *)c;
    size_t i;
    (void)value;
    if (!allowed(inst, "fmi2SetInteger", DISCRETE_CHANGE | MODE_CONTINUOUS_TIME)) {
        return fmi2Error;
    }
    for (i = 0; i < nvr; i++) {
        if (vr == NULL || vr[i] == VR_COUNTER || vr[i] == VR_PHASE) {
            return FAIL(inst, "fmi2SetInteger: counter and phase are calculated outputs and cannot be set.");
        }
        return FAIL(inst, "fmi2SetInteger: %u is not the value reference of an Integer or Enumeration variable.",
                    (unsigned)vr[i]);
    }
    return fmi2OK;
}

fmi2Status fmi2GetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2Boolean value[]) {
    Instance *inst = (Instance *)c;
    size_t i;
    if (!allowed(inst, "fmi2GetBoolean", ANY_MODE)) {
        return fmi2Error;
    }
    if (nvr > 0 && (vr == NULL || value == NULL)) {
        return FAIL(inst, "fmi2GetBoolean: NULL argument.");
    }
    for (i = 0; i < nvr; i++) {
        if (vr[i] != VR_ODD) {
            return FAIL(inst, "fmi2GetBoolean: %u is not the value reference of a Boolean variable.", (unsigned)vr[i]);
        }
        value[i] = (inst->data.counter % 2 != 0) ? fmi2True : fmi2False;
    }
    return fmi2OK;
}

fmi2Status fmi2SetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2Boolean value[]) {
    Instance *inst = (Instance *)c;
    size_t i;
    (void)value;
    if (!allowed(inst, "fmi2SetBoolean", DISCRETE_CHANGE | MODE_CONTINUOUS_TIME)) {
        return fmi2Error;
    }
    for (i = 0; i < nvr; i++) {
        if (vr == NULL || vr[i] == VR_ODD) {
            return FAIL(inst, "fmi2SetBoolean: odd is a calculated output and cannot be set.");
        }
        return FAIL(inst, "fmi2SetBoolean: %u is not the value reference of a Boolean variable.", (unsigned)vr[i]);
    }
    return fmi2OK;
}

/* The model has no String variables. */
static fmi2Status noStringVariables(Instance *inst, const char *function, size_t nvr) {
    if (!allowed(inst, function, ANY_MODE)) {
        return fmi2Error;
    }
    if (nvr > 0) {
        return FAIL(inst, "%s: the model has no String variables.", function);
    }
    return fmi2OK;
}

fmi2Status fmi2GetString(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2String value[]) {
    (void)vr;
    (void)value;
    return noStringVariables((Instance *)c, "fmi2GetString", nvr);
}

fmi2Status fmi2SetString(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2String value[]) {
    (void)vr;
    (void)value;
    return noStringVariables((Instance *)c, "fmi2SetString", nvr);
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
        return FAIL(inst, "fmi2DeSerializeFMUstate: not a serialized stair state.");
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
    return FAIL(inst, "fmi2GetDirectionalDerivative is not supported by stair "
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
    ModelData *d;
    if (!ofInterface(inst, "fmi2NewDiscreteStates", fmi2ModelExchange) ||
        !allowed(inst, "fmi2NewDiscreteStates", MODE_EVENT)) {
        return fmi2Error;
    }
    if (eventInfo == NULL) {
        return FAIL(inst, "fmi2NewDiscreteStates: NULL argument.");
    }
    d = &inst->data;
    /* one event per call: if two were due (a step over two event times), the
       iteration asks to be called again */
    if (eventDue(d, d->time)) {
        d->counter += 1;
        logMessage(inst, fmi2OK, "logCalls", "time event at t = %.17g: counter = %d", d->time, d->counter);
    }
    eventInfo->newDiscreteStatesNeeded = eventDue(d, d->time) ? fmi2True : fmi2False;
    eventInfo->terminateSimulation = fmi2False;
    eventInfo->nominalsOfContinuousStatesChanged = fmi2False;
    eventInfo->valuesOfContinuousStatesChanged = fmi2False; /* x is continuous across the events */
    eventInfo->nextEventTimeDefined = fmi2True;
    eventInfo->nextEventTime = nextEventTime(d);
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

fmi2Status fmi2SetContinuousStates(fmi2Component c, const fmi2Real x[], size_t nx) {
    Instance *inst = (Instance *)c;
    if (!ofInterface(inst, "fmi2SetContinuousStates", fmi2ModelExchange) ||
        !allowed(inst, "fmi2SetContinuousStates", MODE_CONTINUOUS_TIME)) {
        return fmi2Error;
    }
    if (nx != N_STATES || x == NULL) {
        return FAIL(inst, "fmi2SetContinuousStates: expected %d state, got %lu.", N_STATES, (unsigned long)nx);
    }
    inst->data.x = x[0];
    return fmi2OK;
}

fmi2Status fmi2GetDerivatives(fmi2Component c, fmi2Real derivatives_[], size_t nx) {
    Instance *inst = (Instance *)c;
    if (!ofInterface(inst, "fmi2GetDerivatives", fmi2ModelExchange) ||
        !allowed(inst, "fmi2GetDerivatives", ANY_MODE & ~MODE_INSTANTIATED)) {
        return fmi2Error;
    }
    if (nx != N_STATES || derivatives_ == NULL) {
        return FAIL(inst, "fmi2GetDerivatives: expected %d state, got %lu.", N_STATES, (unsigned long)nx);
    }
    derivatives_[0] = rhs(inst->data.c, currentState(&inst->data));
    return fmi2OK;
}

fmi2Status fmi2GetEventIndicators(fmi2Component c, fmi2Real eventIndicators[], size_t ni) {
    Instance *inst = (Instance *)c;
    (void)eventIndicators;
    if (!ofInterface(inst, "fmi2GetEventIndicators", fmi2ModelExchange) ||
        !allowed(inst, "fmi2GetEventIndicators", ANY_MODE & ~MODE_INSTANTIATED)) {
        return fmi2Error;
    }
    if (ni != 0) {
        return FAIL(inst, "fmi2GetEventIndicators: the model has no event indicators (only time events), got %lu.",
                    (unsigned long)ni);
    }
    return fmi2OK;
}

fmi2Status fmi2GetContinuousStates(fmi2Component c, fmi2Real x[], size_t nx) {
    Instance *inst = (Instance *)c;
    if (!ofInterface(inst, "fmi2GetContinuousStates", fmi2ModelExchange) ||
        !allowed(inst, "fmi2GetContinuousStates", ANY_MODE & ~MODE_INSTANTIATED)) {
        return fmi2Error;
    }
    if (nx != N_STATES || x == NULL) {
        return FAIL(inst, "fmi2GetContinuousStates: expected %d state, got %lu.", N_STATES, (unsigned long)nx);
    }
    x[0] = currentState(&inst->data);
    return fmi2OK;
}

fmi2Status fmi2GetNominalsOfContinuousStates(fmi2Component c, fmi2Real x_nominal[], size_t nx) {
    Instance *inst = (Instance *)c;
    if (!ofInterface(inst, "fmi2GetNominalsOfContinuousStates", fmi2ModelExchange) ||
        !allowed(inst, "fmi2GetNominalsOfContinuousStates", ANY_MODE)) {
        return fmi2Error;
    }
    if (nx != N_STATES || x_nominal == NULL) {
        return FAIL(inst, "fmi2GetNominalsOfContinuousStates: expected %d state, got %lu.", N_STATES,
                    (unsigned long)nx);
    }
    x_nominal[0] = 1.0;
    return fmi2OK;
}

/* ---------------------------------------------------------------- Co-Simulation */

/* Classical RK4 for der(x) = -c x from t to t + length in ceil(length / h) equal substeps. */
static double integrate(double x, double c, double length, double h) {
    double ratio = length / h, s, k1, k2, k3, k4;
    unsigned long n = (unsigned long)ceil(ratio - 1e-9 * fmax(1.0, ratio)), i;
    if (n < 1) {
        n = 1;
    }
    s = length / (double)n;
    for (i = 0; i < n; i++) {
        k1 = rhs(c, x);
        k2 = rhs(c, x + 0.5 * s * k1);
        k3 = rhs(c, x + 0.5 * s * k2);
        k4 = rhs(c, x + s * k3);
        x += s / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4);
    }
    return x;
}

fmi2Status fmi2DoStep(fmi2Component c, fmi2Real currentCommunicationPoint, fmi2Real communicationStepSize,
                      fmi2Boolean noSetFMUStatePriorToCurrentCommunicationPoint) {
    Instance *inst = (Instance *)c;
    ModelData *d;
    double t, tEnd, te;
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
    t = currentCommunicationPoint;
    tEnd = currentCommunicationPoint + communicationStepSize;
    for (;;) {
        /* integrate exactly to the next event time if it lies within the step, else to the end */
        te = nextEventTime(d);
        if (eventDue(d, tEnd)) {
            if (te > t) {
                d->x = integrate(d->x, d->c, te - t, d->h_internal);
                t = te;
            }
            d->counter += 1;
            logMessage(inst, fmi2OK, "logCalls", "time event at t = %.17g: counter = %d", t, d->counter);
        } else {
            if (tEnd > t) {
                d->x = integrate(d->x, d->c, tEnd - t, d->h_internal);
            }
            break;
        }
    }
    d->time = tEnd;
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
