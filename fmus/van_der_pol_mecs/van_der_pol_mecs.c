/*
 * Van der Pol oscillator with an additive input force, FMI 2.0 Model Exchange
 * AND Co-Simulation in one binary (modelIdentifier van_der_pol_mecs).
 *
 * Hand-written for the test suite of fmi-adjoint (it is not produced by the
 * project's exporter).  The model, value references 0..7, start values and
 * setting rules are those of fmus/van_der_pol_me; see fmus/README.md.
 *
 *     der(x0) = x1
 *     der(x1) = mu * (1 - x0^2) * x1 - x0 + u
 *
 *     x0(t0) = x0_start,  x1(t0) = x1_start
 *
 * Value references (and 1-based ModelVariables indices):
 *
 *     vr 0  x0          output, continuous state        (index 1)
 *     vr 1  der(x0)     local, state derivative         (index 2)
 *     vr 2  x1          output, continuous state        (index 3)
 *     vr 3  der(x1)     local, state derivative         (index 4)
 *     vr 4  mu          parameter, tunable, start 1.0   (index 5)
 *     vr 5  x0_start    parameter, fixed,   start 2.0   (index 6)
 *     vr 6  x1_start    parameter, fixed,   start 0.0   (index 7)
 *     vr 7  u           input, continuous,  start 0.0   (index 8)
 *     vr 8  h_internal  parameter, fixed,   start 1e-4  (index 9)
 *
 * Model Exchange: as van_der_pol_me, including the exact directional
 * derivatives (states, u and, beyond FMI 2.0, the parameters).
 *
 * Co-Simulation: fmi2DoStep(t, H) integrates with the classical fourth-order
 * Runge-Kutta method in n = ceil(H / h_internal) equal substeps of H / n (a
 * ratio within 1e-9 above an integer counts as that integer), with u held
 * constant over the communication step.  currentCommunicationPoint must be the
 * FMU's time.  No directional derivatives in Co-Simulation (the CoSimulation
 * element says providesDirectionalDerivative="false"), no input
 * interpolation, no output derivatives, no asynchronous steps.
 *
 * Setting values (FMI 2.0 rules): u in every mode before termination;
 * x0_start, x1_start and h_internal (> 0) before fmi2ExitInitializationMode;
 * the tunable mu before and during initialization, in Event Mode (ME) and
 * between steps (CS), not in Continuous-Time Mode.  An illegal call returns
 * fmi2Error, logs a message and changes nothing.  A function of the other
 * interface (e.g. fmi2DoStep on a Model Exchange instance) is an illegal call.
 */

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fmi2Functions.h"

#define MODEL_GUID "{dee9e0d0-3d34-4e33-918e-4430eae4139e}"

#define N_STATES 2
#define N_EVENT_INDICATORS 0

enum {
    VR_X0 = 0,
    VR_DER_X0 = 1,
    VR_X1 = 2,
    VR_DER_X1 = 3,
    VR_MU = 4,
    VR_X0_START = 5,
    VR_X1_START = 6,
    VR_U = 7,
    VR_H_INTERNAL = 8
};

typedef enum {
    MODE_INSTANTIATED = 1 << 0,
    MODE_INITIALIZATION = 1 << 1,
    MODE_EVENT = 1 << 2,
    MODE_CONTINUOUS_TIME = 1 << 3,
    MODE_TERMINATED = 1 << 4,
    MODE_ERROR = 1 << 5,
    MODE_STEP = 1 << 6 /* Co-Simulation: slave initialized, between steps */
} Mode;

#define ANY_MODE (MODE_INSTANTIATED | MODE_INITIALIZATION | MODE_EVENT | MODE_CONTINUOUS_TIME | MODE_TERMINATED | MODE_ERROR | MODE_STEP)

/* Everything that makes up the state of an instance (copied by get/set FMU state). */
typedef struct {
    fmi2Type fmuType; /* fmi2ModelExchange or fmi2CoSimulation */
    Mode mode;
    double time;
    double x[N_STATES];
    double mu;
    double x0_start;
    double x1_start;
    double u;
    double h_internal;
} ModelData;

typedef struct {
    ModelData data;
    char *instanceName;
    fmi2CallbackFunctions functions;
    fmi2Boolean loggingOn;
} Instance;

/* Serialized FMU state: magic number, then the fields of ModelData. */
#define SERIAL_MAGIC 0x56444d43u /* "VDMC" */
#define N_DOUBLES 8
#define SERIAL_SIZE (sizeof(unsigned) + 2 * sizeof(int) + N_DOUBLES * sizeof(double))

/* ---------------------------------------------------------------- logging */

static void logMessage(Instance *inst, fmi2Status status, const char *category, const char *format, ...) {
    char buffer[512];
    va_list args;
    if (inst == NULL || inst->functions.logger == NULL) {
        return;
    }
    /* errors are always reported; everything else only with logging on */
    if (status < fmi2Error && !inst->loggingOn) {
        return;
    }
    va_start(args, format);
    vsnprintf(buffer, sizeof buffer, format, args);
    va_end(args);
    /* the message is passed as an argument, never as a format string */
    inst->functions.logger(inst->functions.componentEnvironment, inst->instanceName, status, category, "%s", buffer);
}

static fmi2Status fail(Instance *inst, const char *format, const char *detail) {
    if (inst != NULL && inst->functions.logger != NULL) {
        char buffer[384];
        snprintf(buffer, sizeof buffer, format, detail);
        inst->functions.logger(inst->functions.componentEnvironment, inst->instanceName, fmi2Error,
                               "logStatusError", "%s", buffer);
    }
    return fmi2Error;
}

/* Checks that function `name` may be called in the current mode. */
static int allowed(Instance *inst, const char *name, int modes) {
    if (inst == NULL) {
        return 0;
    }
    if (!(inst->data.mode & modes)) {
        fail(inst, "%s must not be called in the current mode.", name);
        return 0;
    }
    return 1;
}

/* Checks that a function of one interface is called on an instance of that interface. */
static int ofInterface(Instance *inst, const char *name, fmi2Type fmuType) {
    if (inst == NULL) {
        return 0;
    }
    if (inst->data.fmuType != fmuType) {
        fail(inst, fmuType == fmi2ModelExchange ? "%s is a Model Exchange function, but this is a Co-Simulation instance."
                                                : "%s is a Co-Simulation function, but this is a Model Exchange instance.",
             name);
        return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- model equations */

/* The states: in Instantiated and Initialization Mode they follow the start parameters. */
static void currentStates(const ModelData *d, double x[N_STATES]) {
    if (d->mode & (MODE_INSTANTIATED | MODE_INITIALIZATION)) {
        x[0] = d->x0_start;
        x[1] = d->x1_start;
    } else {
        x[0] = d->x[0];
        x[1] = d->x[1];
    }
}

static void derivatives(const ModelData *d, double dx[N_STATES]) {
    double x[N_STATES];
    currentStates(d, x);
    dx[0] = x[1];
    dx[1] = d->mu * (1.0 - x[0] * x[0]) * x[1] - x[0] + d->u;
}

static void setStartValues(ModelData *d) {
    d->time = 0.0;
    d->mu = 1.0;
    d->x0_start = 2.0;
    d->x1_start = 0.0;
    d->u = 0.0;
    d->h_internal = 1e-4;
    d->x[0] = d->x0_start;
    d->x[1] = d->x1_start;
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
    for (i = 0; i < nCategories; i++) {
        if (categories[i] == NULL || (strcmp(categories[i], "logStatusError") != 0 && strcmp(categories[i], "logCalls") != 0)) {
            return fail(inst, "fmi2SetDebugLogging: unknown log category \"%s\".", categories[i] ? categories[i] : "(null)");
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
    (void)fmuResourceLocation;
    (void)visible;
    if (functions == NULL || functions->allocateMemory == NULL || functions->freeMemory == NULL) {
        return NULL;
    }
    if (instanceName == NULL || instanceName[0] == '\0') {
        if (functions->logger) {
            functions->logger(functions->componentEnvironment, "van_der_pol_mecs", fmi2Error, "logStatusError",
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
    (void)toleranceDefined;
    (void)tolerance;
    if (!allowed(inst, "fmi2SetupExperiment", MODE_INSTANTIATED)) {
        return fmi2Error;
    }
    if (stopTimeDefined && stopTime < startTime) {
        return fail(inst, "fmi2SetupExperiment: %s", "stopTime < startTime.");
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
    inst->data.x[0] = inst->data.x0_start;
    inst->data.x[1] = inst->data.x1_start;
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
    double x[N_STATES], dx[N_STATES];
    size_t i;
    if (!allowed(inst, "fmi2GetReal", ANY_MODE)) {
        return fmi2Error;
    }
    if (nvr > 0 && (vr == NULL || value == NULL)) {
        return fail(inst, "fmi2GetReal: %s", "NULL argument.");
    }
    currentStates(&inst->data, x);
    derivatives(&inst->data, dx);
    for (i = 0; i < nvr; i++) {
        switch (vr[i]) {
        case VR_X0: value[i] = x[0]; break;
        case VR_DER_X0: value[i] = dx[0]; break;
        case VR_X1: value[i] = x[1]; break;
        case VR_DER_X1: value[i] = dx[1]; break;
        case VR_MU: value[i] = inst->data.mu; break;
        case VR_X0_START: value[i] = inst->data.x0_start; break;
        case VR_X1_START: value[i] = inst->data.x1_start; break;
        case VR_U: value[i] = inst->data.u; break;
        case VR_H_INTERNAL: value[i] = inst->data.h_internal; break;
        default: {
            char detail[32];
            snprintf(detail, sizeof detail, "%u", (unsigned)vr[i]);
            return fail(inst, "fmi2GetReal: unknown value reference %s.", detail);
        }
        }
    }
    return fmi2OK;
}

fmi2Status fmi2SetReal(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2Real value[]) {
    Instance *inst = (Instance *)c;
    const int beforeInit = MODE_INSTANTIATED | MODE_INITIALIZATION;
    size_t i;
    if (!allowed(inst, "fmi2SetReal", MODE_INSTANTIATED | MODE_INITIALIZATION | MODE_EVENT | MODE_CONTINUOUS_TIME | MODE_STEP)) {
        return fmi2Error;
    }
    if (nvr > 0 && (vr == NULL || value == NULL)) {
        return fail(inst, "fmi2SetReal: %s", "NULL argument.");
    }
    /* check everything first so that an illegal call changes nothing */
    for (i = 0; i < nvr; i++) {
        switch (vr[i]) {
        case VR_U:
            break; /* a continuous input can be set in every mode listed above */
        case VR_MU:
            if (!(inst->data.mode & (beforeInit | MODE_EVENT | MODE_STEP))) {
                return fail(inst, "fmi2SetReal: %s", "the tunable parameter mu can only be set before "
                            "initialization, during initialization, in Event Mode (ME) or between steps (CS).");
            }
            break;
        case VR_H_INTERNAL:
            if (!(inst->data.mode & beforeInit)) {
                return fail(inst, "fmi2SetReal: %s", "h_internal is a fixed parameter: it cannot be set after "
                            "fmi2ExitInitializationMode.");
            }
            if (!(value[i] > 0.0)) {
                return fail(inst, "fmi2SetReal: %s", "h_internal must be > 0.");
            }
            break;
        case VR_X0_START:
        case VR_X1_START:
            if (!(inst->data.mode & beforeInit)) {
                return fail(inst, "fmi2SetReal: %s", "x0_start and x1_start are fixed parameters: they cannot be "
                            "set after fmi2ExitInitializationMode.");
            }
            break;
        case VR_X0:
        case VR_X1:
        case VR_DER_X0:
        case VR_DER_X1:
            return fail(inst, "fmi2SetReal: %s", "x0, x1, der(x0) and der(x1) are calculated variables and "
                        "cannot be set (use fmi2SetContinuousStates for the states).");
        default: {
            char detail[32];
            snprintf(detail, sizeof detail, "%u", (unsigned)vr[i]);
            return fail(inst, "fmi2SetReal: unknown value reference %s.", detail);
        }
        }
    }
    for (i = 0; i < nvr; i++) {
        switch (vr[i]) {
        case VR_U: inst->data.u = value[i]; break;
        case VR_MU: inst->data.mu = value[i]; break;
        case VR_X0_START: inst->data.x0_start = value[i]; break;
        case VR_X1_START: inst->data.x1_start = value[i]; break;
        case VR_H_INTERNAL: inst->data.h_internal = value[i]; break;
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
        return fail(inst, "%s: the model has no variables of this type.", function);
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
        return fail(inst, "fmi2GetFMUstate: %s", "NULL argument.");
    }
    copy = (ModelData *)*FMUstate;
    if (copy == NULL) {
        copy = (ModelData *)inst->functions.allocateMemory(1, sizeof(ModelData));
        if (copy == NULL) {
            return fail(inst, "fmi2GetFMUstate: %s", "out of memory.");
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
        return fail(inst, "fmi2SetFMUstate: %s", "NULL FMU state.");
    }
    if (((const ModelData *)FMUstate)->fmuType != inst->data.fmuType) {
        return fail(inst, "fmi2SetFMUstate: %s", "the FMU state belongs to an instance of the other interface.");
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
        return fail(inst, "fmi2FreeFMUstate: %s", "NULL argument.");
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
        return fail(inst, "fmi2SerializedFMUstateSize: %s", "NULL argument.");
    }
    *size = SERIAL_SIZE;
    return fmi2OK;
}

fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate FMUstate, fmi2Byte serializedState[], size_t size) {
    Instance *inst = (Instance *)c;
    const ModelData *d = (const ModelData *)FMUstate;
    unsigned magic = SERIAL_MAGIC;
    int mode, fmuType;
    double values[N_DOUBLES];
    char *p = (char *)serializedState;
    if (!allowed(inst, "fmi2SerializeFMUstate", ANY_MODE)) {
        return fmi2Error;
    }
    if (d == NULL || serializedState == NULL) {
        return fail(inst, "fmi2SerializeFMUstate: %s", "NULL argument.");
    }
    if (size != SERIAL_SIZE) {
        return fail(inst, "fmi2SerializeFMUstate: %s", "wrong buffer size.");
    }
    mode = (int)d->mode;
    values[0] = d->time;
    values[1] = d->x[0];
    values[2] = d->x[1];
    values[3] = d->mu;
    values[4] = d->x0_start;
    values[5] = d->x1_start;
    values[6] = d->u;
    values[7] = d->h_internal;
    fmuType = (int)d->fmuType;
    memcpy(p, &magic, sizeof magic);
    memcpy(p + sizeof magic, &mode, sizeof mode);
    memcpy(p + sizeof magic + sizeof mode, &fmuType, sizeof fmuType);
    memcpy(p + sizeof magic + 2 * sizeof mode, values, sizeof values);
    return fmi2OK;
}

fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte serializedState[], size_t size, fmi2FMUstate *FMUstate) {
    Instance *inst = (Instance *)c;
    const char *p = (const char *)serializedState;
    unsigned magic;
    int mode, fmuType;
    double values[N_DOUBLES];
    ModelData *d;
    if (!allowed(inst, "fmi2DeSerializeFMUstate", ANY_MODE)) {
        return fmi2Error;
    }
    if (serializedState == NULL || FMUstate == NULL) {
        return fail(inst, "fmi2DeSerializeFMUstate: %s", "NULL argument.");
    }
    if (size != SERIAL_SIZE) {
        return fail(inst, "fmi2DeSerializeFMUstate: %s", "wrong size of the serialized state.");
    }
    memcpy(&magic, p, sizeof magic);
    memcpy(&mode, p + sizeof magic, sizeof mode);
    memcpy(&fmuType, p + sizeof magic + sizeof mode, sizeof fmuType);
    memcpy(values, p + sizeof magic + 2 * sizeof mode, sizeof values);
    if (magic != SERIAL_MAGIC || (mode & ~ANY_MODE) != 0 || mode == 0 ||
        (fmuType != (int)fmi2ModelExchange && fmuType != (int)fmi2CoSimulation)) {
        return fail(inst, "fmi2DeSerializeFMUstate: %s", "not a serialized van_der_pol_mecs state.");
    }
    d = (ModelData *)*FMUstate;
    if (d == NULL) {
        d = (ModelData *)inst->functions.allocateMemory(1, sizeof(ModelData));
        if (d == NULL) {
            return fail(inst, "fmi2DeSerializeFMUstate: %s", "out of memory.");
        }
    }
    d->mode = (Mode)mode;
    d->time = values[0];
    d->x[0] = values[1];
    d->x[1] = values[2];
    d->mu = values[3];
    d->x0_start = values[4];
    d->x1_start = values[5];
    d->u = values[6];
    d->h_internal = values[7];
    d->fmuType = (fmi2Type)fmuType;
    *FMUstate = d;
    return fmi2OK;
}

/* ---------------------------------------------------------------- directional derivatives */

fmi2Status fmi2GetDirectionalDerivative(fmi2Component c, const fmi2ValueReference vUnknown_ref[], size_t nUnknown,
                                        const fmi2ValueReference vKnown_ref[], size_t nKnown,
                                        const fmi2Real dvKnown[], fmi2Real dvUnknown[]) {
    Instance *inst = (Instance *)c;
    const ModelData *d;
    const int initializing = MODE_INITIALIZATION;
    double x[N_STATES];
    double dx0 = 0.0, dx1 = 0.0, du = 0.0, dmu = 0.0, dx0s = 0.0, dx1s = 0.0;
    double ddx0, ddx1;
    size_t i;
    if (!ofInterface(inst, "fmi2GetDirectionalDerivative", fmi2ModelExchange) ||
        !allowed(inst, "fmi2GetDirectionalDerivative",
                 MODE_INITIALIZATION | MODE_EVENT | MODE_CONTINUOUS_TIME | MODE_TERMINATED | MODE_ERROR)) {
        return fmi2Error;
    }
    if ((nKnown > 0 && (vKnown_ref == NULL || dvKnown == NULL)) || (nUnknown > 0 && (vUnknown_ref == NULL || dvUnknown == NULL))) {
        return fail(inst, "fmi2GetDirectionalDerivative: %s", "NULL argument.");
    }
    d = &inst->data;
    for (i = 0; i < nKnown; i++) {
        switch (vKnown_ref[i]) {
        case VR_X0:
        case VR_X1:
            if (d->mode & initializing) {
                return fail(inst, "fmi2GetDirectionalDerivative: %s", "in Initialization Mode the states are "
                            "unknowns (x0 = x0_start, x1 = x1_start); use x0_start and x1_start as knowns.");
            }
            if (vKnown_ref[i] == VR_X0) {
                dx0 += dvKnown[i];
            } else {
                dx1 += dvKnown[i];
            }
            break;
        case VR_U: du += dvKnown[i]; break;
        case VR_MU: dmu += dvKnown[i]; break;
        case VR_X0_START: dx0s += dvKnown[i]; break;
        case VR_X1_START: dx1s += dvKnown[i]; break;
        default: {
            char detail[32];
            snprintf(detail, sizeof detail, "%u", (unsigned)vKnown_ref[i]);
            return fail(inst, "fmi2GetDirectionalDerivative: value reference %s is not a known of van_der_pol_mecs "
                        "(knowns: x0, x1, u, mu, x0_start, x1_start).", detail);
        }
        }
    }
    for (i = 0; i < nUnknown; i++) {
        switch (vUnknown_ref[i]) {
        case VR_X0: case VR_X1: case VR_DER_X0: case VR_DER_X1: break;
        default: {
            char detail[32];
            snprintf(detail, sizeof detail, "%u", (unsigned)vUnknown_ref[i]);
            return fail(inst, "fmi2GetDirectionalDerivative: value reference %s is not an unknown of van_der_pol_mecs "
                        "(unknowns: x0, x1, der(x0), der(x1)).", detail);
        }
        }
    }
    if (d->mode & initializing) {
        /* the states are x0_start and x1_start */
        dx0 = dx0s;
        dx1 = dx1s;
    }
    /* else: x0_start and x1_start do not enter the equations once the states are free */
    currentStates(d, x);
    ddx0 = dx1;
    ddx1 = (-2.0 * d->mu * x[0] * x[1] - 1.0) * dx0
         + d->mu * (1.0 - x[0] * x[0]) * dx1
         + du
         + (1.0 - x[0] * x[0]) * x[1] * dmu;
    for (i = 0; i < nUnknown; i++) {
        switch (vUnknown_ref[i]) {
        case VR_X0: dvUnknown[i] = dx0; break;
        case VR_X1: dvUnknown[i] = dx1; break;
        case VR_DER_X0: dvUnknown[i] = ddx0; break;
        case VR_DER_X1: dvUnknown[i] = ddx1; break;
        default: break;
        }
    }
    return fmi2OK;
}

/* ---------------------------------------------------------------- Model Exchange */

fmi2Status fmi2EnterEventMode(fmi2Component c) {
    Instance *inst = (Instance *)c;
    if (!ofInterface(inst, "fmi2EnterEventMode", fmi2ModelExchange) || !allowed(inst, "fmi2EnterEventMode", MODE_EVENT | MODE_CONTINUOUS_TIME)) {
        return fmi2Error;
    }
    inst->data.mode = MODE_EVENT;
    return fmi2OK;
}

fmi2Status fmi2NewDiscreteStates(fmi2Component c, fmi2EventInfo *eventInfo) {
    Instance *inst = (Instance *)c;
    if (!ofInterface(inst, "fmi2NewDiscreteStates", fmi2ModelExchange) || !allowed(inst, "fmi2NewDiscreteStates", MODE_EVENT)) {
        return fmi2Error;
    }
    if (eventInfo == NULL) {
        return fail(inst, "fmi2NewDiscreteStates: %s", "NULL argument.");
    }
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
    if (!ofInterface(inst, "fmi2EnterContinuousTimeMode", fmi2ModelExchange) || !allowed(inst, "fmi2EnterContinuousTimeMode", MODE_EVENT)) {
        return fmi2Error;
    }
    inst->data.mode = MODE_CONTINUOUS_TIME;
    return fmi2OK;
}

fmi2Status fmi2CompletedIntegratorStep(fmi2Component c, fmi2Boolean noSetFMUStatePriorToCurrentPoint,
                                       fmi2Boolean *enterEventMode, fmi2Boolean *terminateSimulation) {
    Instance *inst = (Instance *)c;
    (void)noSetFMUStatePriorToCurrentPoint;
    if (!ofInterface(inst, "fmi2CompletedIntegratorStep", fmi2ModelExchange) || !allowed(inst, "fmi2CompletedIntegratorStep", MODE_CONTINUOUS_TIME)) {
        return fmi2Error;
    }
    if (enterEventMode == NULL || terminateSimulation == NULL) {
        return fail(inst, "fmi2CompletedIntegratorStep: %s", "NULL argument.");
    }
    *enterEventMode = fmi2False;
    *terminateSimulation = fmi2False;
    return fmi2OK;
}

fmi2Status fmi2SetTime(fmi2Component c, fmi2Real time) {
    Instance *inst = (Instance *)c;
    if (!ofInterface(inst, "fmi2SetTime", fmi2ModelExchange) || !allowed(inst, "fmi2SetTime", MODE_EVENT | MODE_CONTINUOUS_TIME)) {
        return fmi2Error;
    }
    inst->data.time = time;
    return fmi2OK;
}

fmi2Status fmi2SetContinuousStates(fmi2Component c, const fmi2Real x[], size_t nx) {
    Instance *inst = (Instance *)c;
    if (!ofInterface(inst, "fmi2SetContinuousStates", fmi2ModelExchange) || !allowed(inst, "fmi2SetContinuousStates", MODE_CONTINUOUS_TIME)) {
        return fmi2Error;
    }
    if (nx != N_STATES || x == NULL) {
        return fail(inst, "fmi2SetContinuousStates: %s", "expected 2 states.");
    }
    inst->data.x[0] = x[0];
    inst->data.x[1] = x[1];
    return fmi2OK;
}

fmi2Status fmi2GetDerivatives(fmi2Component c, fmi2Real derivatives_[], size_t nx) {
    Instance *inst = (Instance *)c;
    if (!ofInterface(inst, "fmi2GetDerivatives", fmi2ModelExchange) || !allowed(inst, "fmi2GetDerivatives", ANY_MODE & ~MODE_INSTANTIATED)) {
        return fmi2Error;
    }
    if (nx != N_STATES || derivatives_ == NULL) {
        return fail(inst, "fmi2GetDerivatives: %s", "expected 2 states.");
    }
    derivatives(&inst->data, derivatives_);
    return fmi2OK;
}

fmi2Status fmi2GetEventIndicators(fmi2Component c, fmi2Real eventIndicators[], size_t ni) {
    Instance *inst = (Instance *)c;
    (void)eventIndicators;
    if (!ofInterface(inst, "fmi2GetEventIndicators", fmi2ModelExchange) || !allowed(inst, "fmi2GetEventIndicators", ANY_MODE & ~MODE_INSTANTIATED)) {
        return fmi2Error;
    }
    if (ni != N_EVENT_INDICATORS) {
        return fail(inst, "fmi2GetEventIndicators: %s", "the model has no event indicators.");
    }
    return fmi2OK;
}

fmi2Status fmi2GetContinuousStates(fmi2Component c, fmi2Real x[], size_t nx) {
    Instance *inst = (Instance *)c;
    if (!ofInterface(inst, "fmi2GetContinuousStates", fmi2ModelExchange) || !allowed(inst, "fmi2GetContinuousStates", ANY_MODE & ~MODE_INSTANTIATED)) {
        return fmi2Error;
    }
    if (nx != N_STATES || x == NULL) {
        return fail(inst, "fmi2GetContinuousStates: %s", "expected 2 states.");
    }
    currentStates(&inst->data, x);
    return fmi2OK;
}

fmi2Status fmi2GetNominalsOfContinuousStates(fmi2Component c, fmi2Real x_nominal[], size_t nx) {
    Instance *inst = (Instance *)c;
    if (!ofInterface(inst, "fmi2GetNominalsOfContinuousStates", fmi2ModelExchange) || !allowed(inst, "fmi2GetNominalsOfContinuousStates", ANY_MODE)) {
        return fmi2Error;
    }
    if (nx != N_STATES || x_nominal == NULL) {
        return fail(inst, "fmi2GetNominalsOfContinuousStates: %s", "expected 2 states.");
    }
    x_nominal[0] = 1.0;
    x_nominal[1] = 1.0;
    return fmi2OK;
}

/* ---------------------------------------------------------------- Co-Simulation */

static void rk4Step(const ModelData *d, double x[N_STATES], double s) {
    ModelData stage = *d; /* derivatives() of a copy whose states are the stage values */
    double k1[N_STATES], k2[N_STATES], k3[N_STATES], k4[N_STATES];
    int i;
    stage.mode = MODE_STEP;
    for (i = 0; i < N_STATES; i++) stage.x[i] = x[i];
    derivatives(&stage, k1);
    for (i = 0; i < N_STATES; i++) stage.x[i] = x[i] + 0.5 * s * k1[i];
    derivatives(&stage, k2);
    for (i = 0; i < N_STATES; i++) stage.x[i] = x[i] + 0.5 * s * k2[i];
    derivatives(&stage, k3);
    for (i = 0; i < N_STATES; i++) stage.x[i] = x[i] + s * k3[i];
    derivatives(&stage, k4);
    for (i = 0; i < N_STATES; i++) x[i] += s / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
}

fmi2Status fmi2DoStep(fmi2Component c, fmi2Real currentCommunicationPoint, fmi2Real communicationStepSize,
                      fmi2Boolean noSetFMUStatePriorToCurrentCommunicationPoint) {
    Instance *inst = (Instance *)c;
    ModelData *d;
    double H = communicationStepSize, ratio, s;
    unsigned long n, i;
    (void)noSetFMUStatePriorToCurrentCommunicationPoint;
    if (!ofInterface(inst, "fmi2DoStep", fmi2CoSimulation) || !allowed(inst, "fmi2DoStep", MODE_STEP)) {
        return fmi2Error;
    }
    d = &inst->data;
    if (!(H > 0.0)) {
        return fail(inst, "fmi2DoStep: %s", "communicationStepSize must be > 0.");
    }
    if (fabs(currentCommunicationPoint - d->time) > 1e-9 * fmax(1.0, fabs(d->time))) {
        return fail(inst, "fmi2DoStep: %s", "currentCommunicationPoint is not the FMU's time.");
    }
    /* n = ceil(H / h) equal substeps; a ratio at most 1e-9 above an integer is that integer */
    ratio = H / d->h_internal;
    n = (unsigned long)ceil(ratio - 1e-9 * fmax(1.0, ratio));
    if (n < 1) {
        n = 1;
    }
    s = H / (double)n;
    for (i = 0; i < n; i++) {
        rk4Step(d, d->x, s); /* u is held constant over the communication step */
    }
    d->time = currentCommunicationPoint + H;
    return fmi2OK;
}

fmi2Status fmi2CancelStep(fmi2Component c) {
    Instance *inst = (Instance *)c;
    if (!ofInterface(inst, "fmi2CancelStep", fmi2CoSimulation)) {
        return fmi2Error;
    }
    return fail(inst, "fmi2CancelStep: %s", "fmi2DoStep never returns fmi2Pending (canRunAsynchronuously=\"false\").");
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
    return fail(inst, "fmi2SetRealInputDerivatives: %s", "the FMU cannot interpolate inputs (canInterpolateInputs=\"false\").");
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
    return fail(inst, "fmi2GetRealOutputDerivatives: %s", "maxOutputDerivativeOrder is 0.");
}

/* Asynchronous steps are not supported: fmi2DoStep always completes, so there is no status to ask for. */
static fmi2Status noStatus(fmi2Component c, const char *function) {
    Instance *inst = (Instance *)c;
    if (!ofInterface(inst, function, fmi2CoSimulation)) {
        return fmi2Error;
    }
    return fail(inst, "%s: fmi2DoStep never returns fmi2Pending or fmi2Discard, so there is no status to query.",
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
