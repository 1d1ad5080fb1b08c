/*
 * A linear state-space model with array variables and Float32, Int32 and
 * UInt8 variables, FMI 3.0 Model Exchange.
 *
 * Hand-written for the test suite of fmi-adjoint (it is not produced by the
 * project's exporter).  See fmus/README.md.
 *
 *     der(x) = s * (A x + B gain u),   s = 2 if mode == 1 else 1
 *     x(t0) = x_start
 *     y64 = x[0] + x[1]   (Float64),   y = (float) y64   (Float32)
 *     steps = number of fmi3CompletedIntegratorStep calls since initialization
 *
 * Value references (arrays are stored row-major):
 *
 *     vr 0   time     Float64 independent
 *     vr 1   x        Float64[2] local, continuous state
 *     vr 2   der(x)   Float64[2] local, derivative of vr 1
 *     vr 3   A        Float64[2,2] parameter, tunable, start -1 0.5 -0.5 -2
 *     vr 4   B        Float64[2]   parameter, fixed,   start 1 0
 *     vr 5   u        Float32 input, continuous, start 0
 *     vr 6   y        Float32 output, continuous
 *     vr 7   y64      Float64 output, continuous
 *     vr 8   gain     Float32 parameter, tunable, start 1
 *     vr 9   steps    Int32 output, discrete
 *     vr 10  mode     UInt8 parameter, fixed, start 0
 *     vr 11  x_start  Float64[2] parameter, fixed, start 1 0
 *
 * Array access follows FMI 3.0: nValues is the total number of elements of
 * the variables requested (x and A count 2 and 4).  No event indicators, no
 * time events, no directional derivatives.  FMU states can be got, set and
 * serialized.
 *
 * steps is a diagnostic: it changes in fmi3CompletedIntegratorStep, outside
 * Event Mode, which FMI 3.0 does not foresee for a discrete variable; the
 * FMU therefore declares needsCompletedIntegratorStep="true".  Reset and
 * fmi3ExitInitializationMode set it to 0.
 *
 * Setting values: u in Instantiated, Initialization, Event and
 * Continuous-Time Mode; the tunable A and gain in Instantiated,
 * Initialization and Event Mode; the fixed B, mode and x_start before
 * fmi3ExitInitializationMode.  x, der(x), y, y64, steps and time cannot be
 * set.  An illegal call returns fmi3Error, logs a message and changes nothing.
 */

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmi3Functions.h"

#define INSTANTIATION_TOKEN "{6e5003f9-5438-42b8-8630-0c1ed0d8f5b3}"

#define N_STATES 2

enum {
    VR_TIME = 0,
    VR_X = 1,
    VR_DER_X = 2,
    VR_A = 3,
    VR_B = 4,
    VR_U = 5,
    VR_Y = 6,
    VR_Y64 = 7,
    VR_GAIN = 8,
    VR_STEPS = 9,
    VR_MODE = 10,
    VR_X_START = 11
};

typedef enum {
    MODE_INSTANTIATED = 1 << 0,
    MODE_INITIALIZATION = 1 << 1,
    MODE_EVENT = 1 << 2,
    MODE_CONTINUOUS_TIME = 1 << 3,
    MODE_TERMINATED = 1 << 4
} Mode;

#define ANY_MODE (MODE_INSTANTIATED | MODE_INITIALIZATION | MODE_EVENT | MODE_CONTINUOUS_TIME | MODE_TERMINATED)
#define BEFORE_INIT_DONE (MODE_INSTANTIATED | MODE_INITIALIZATION)

/* Everything that makes up the state of an instance (copied by get/set FMU state). */
typedef struct {
    Mode mode;
    double time;
    double x[N_STATES];
    double A[4]; /* row-major */
    double B[2];
    double x_start[2];
    float u;
    float gain;
    int steps;
    unsigned char equationMode; /* the parameter "mode" */
} ModelData;

typedef struct {
    ModelData data;
    char *instanceName;
    fmi3InstanceEnvironment environment;
    fmi3LogMessageCallback logMessage;
    fmi3Boolean loggingOn;
} Instance;

/* Serialized FMU state: a magic number, the size of ModelData, then ModelData
   byte for byte (a serialized state is only read back by the same binary). */
#define SERIAL_MAGIC 0x53535333u /* "SSS3" */
#define SERIAL_SIZE (2 * sizeof(unsigned) + sizeof(ModelData))

/* ---------------------------------------------------------------- logging */

static void logMessage(Instance *inst, fmi3Status status, const char *category, const char *format, ...) {
    char buffer[512];
    va_list args;
    if (inst == NULL || inst->logMessage == NULL) {
        return;
    }
    if (status < fmi3Error && !inst->loggingOn) {
        return; /* errors are always reported */
    }
    va_start(args, format);
    vsnprintf(buffer, sizeof buffer, format, args);
    va_end(args);
    inst->logMessage(inst->environment, status, category, buffer);
}

#define FAIL(inst, ...) (logMessage((inst), fmi3Error, "logStatusError", __VA_ARGS__), fmi3Error)

static int allowed(Instance *inst, const char *name, int modes) {
    if (inst == NULL) {
        return 0;
    }
    if (!(inst->data.mode & modes)) {
        logMessage(inst, fmi3Error, "logStatusError", "%s must not be called in the current mode.", name);
        return 0;
    }
    logMessage(inst, fmi3OK, "logCalls", "%s", name);
    return 1;
}


fmi3Status fmi3SetDebugLogging(fmi3Instance instance, fmi3Boolean loggingOn, size_t nCategories, const fmi3String categories[]) {
    Instance *inst = (Instance *)instance;
    size_t i;
    if (!allowed(inst, "fmi3SetDebugLogging", ANY_MODE)) {
        return fmi3Error;
    }
    if (nCategories > 0 && categories == NULL) {
        return FAIL(inst, "fmi3SetDebugLogging: NULL argument.");
    }
    for (i = 0; i < nCategories; i++) {
        if (categories[i] == NULL || (strcmp(categories[i], "logStatusError") != 0 && strcmp(categories[i], "logCalls") != 0)) {
            return FAIL(inst, "fmi3SetDebugLogging: unknown log category \"%s\".", categories[i] ? categories[i] : "(null)");
        }
    }
    inst->loggingOn = loggingOn;
    return fmi3OK;
}

/* ---------------------------------------------------------------- model equations */

/* The states: in Instantiated and Initialization Mode they follow x_start. */
static void currentStates(const ModelData *d, double x[N_STATES]) {
    const double *source = (d->mode & BEFORE_INIT_DONE) ? d->x_start : d->x;
    x[0] = source[0];
    x[1] = source[1];
}

static void derivatives(const ModelData *d, double dx[N_STATES]) {
    double x[N_STATES], s = d->equationMode == 1 ? 2.0 : 1.0, input = (double)d->gain * (double)d->u;
    currentStates(d, x);
    dx[0] = s * (d->A[0] * x[0] + d->A[1] * x[1] + d->B[0] * input);
    dx[1] = s * (d->A[2] * x[0] + d->A[3] * x[1] + d->B[1] * input);
}

static double outputY64(const ModelData *d) {
    double x[N_STATES];
    currentStates(d, x);
    return x[0] + x[1];
}

static void setStartValues(ModelData *d) {
    d->time = 0.0;
    d->A[0] = -1.0;
    d->A[1] = 0.5;
    d->A[2] = -0.5;
    d->A[3] = -2.0;
    d->B[0] = 1.0;
    d->B[1] = 0.0;
    d->x_start[0] = 1.0;
    d->x_start[1] = 0.0;
    d->x[0] = d->x_start[0];
    d->x[1] = d->x_start[1];
    d->u = 0.0f;
    d->gain = 1.0f;
    d->steps = 0;
    d->equationMode = 0;
}

/* Number of elements of a variable (0: no such variable). */
static size_t elements(fmi3ValueReference vr) {
    switch (vr) {
    case VR_X: case VR_DER_X: case VR_B: case VR_X_START: return 2;
    case VR_A: return 4;
    case VR_TIME: case VR_U: case VR_Y: case VR_Y64: case VR_GAIN: case VR_STEPS: case VR_MODE: return 1;
    default: return 0;
    }
}

/* ---------------------------------------------------------------- instantiation */

const char *fmi3GetVersion(void) { return fmi3Version; }

fmi3Instance fmi3InstantiateModelExchange(fmi3String instanceName, fmi3String instantiationToken, fmi3String resourcePath,
                                          fmi3Boolean visible, fmi3Boolean loggingOn,
                                          fmi3InstanceEnvironment instanceEnvironment, fmi3LogMessageCallback logMessage_) {
    Instance *inst;
    size_t n;
    (void)resourcePath; /* the FMU has no resources */
    (void)visible;
    if (instanceName == NULL || instanceName[0] == '\0') {
        if (logMessage_) {
            logMessage_(instanceEnvironment, fmi3Error, "logStatusError", "fmi3InstantiateModelExchange: missing instance name.");
        }
        return NULL;
    }
    if (instantiationToken == NULL || strcmp(instantiationToken, INSTANTIATION_TOKEN) != 0) {
        if (logMessage_) {
            logMessage_(instanceEnvironment, fmi3Error, "logStatusError",
                        "fmi3InstantiateModelExchange: wrong instantiation token.");
        }
        return NULL;
    }
    inst = (Instance *)calloc(1, sizeof(Instance));
    if (inst == NULL) {
        return NULL;
    }
    n = strlen(instanceName) + 1;
    inst->instanceName = (char *)malloc(n);
    if (inst->instanceName == NULL) {
        free(inst);
        return NULL;
    }
    memcpy(inst->instanceName, instanceName, n);
    inst->environment = instanceEnvironment;
    inst->logMessage = logMessage_;
    inst->loggingOn = loggingOn;
    setStartValues(&inst->data);
    inst->data.mode = MODE_INSTANTIATED;
    logMessage(inst, fmi3OK, "logCalls", "fmi3InstantiateModelExchange(%s)", instanceName);
    return inst;
}

fmi3Instance fmi3InstantiateCoSimulation(fmi3String instanceName, fmi3String instantiationToken, fmi3String resourcePath,
                                         fmi3Boolean visible, fmi3Boolean loggingOn, fmi3Boolean eventModeUsed,
                                         fmi3Boolean earlyReturnAllowed, const fmi3ValueReference requiredIntermediateVariables[],
                                         size_t nRequiredIntermediateVariables, fmi3InstanceEnvironment instanceEnvironment,
                                         fmi3LogMessageCallback logMessage_, fmi3IntermediateUpdateCallback intermediateUpdate) {
    (void)instanceName; (void)instantiationToken; (void)resourcePath; (void)visible; (void)loggingOn;
    (void)eventModeUsed; (void)earlyReturnAllowed; (void)requiredIntermediateVariables;
    (void)nRequiredIntermediateVariables; (void)intermediateUpdate;
    if (logMessage_) {
        logMessage_(instanceEnvironment, fmi3Error, "logStatusError", "state_space3 supports Model Exchange only.");
    }
    return NULL;
}

fmi3Instance fmi3InstantiateScheduledExecution(fmi3String instanceName, fmi3String instantiationToken, fmi3String resourcePath,
                                               fmi3Boolean visible, fmi3Boolean loggingOn,
                                               fmi3InstanceEnvironment instanceEnvironment, fmi3LogMessageCallback logMessage_,
                                               fmi3ClockUpdateCallback clockUpdate, fmi3LockPreemptionCallback lockPreemption,
                                               fmi3UnlockPreemptionCallback unlockPreemption) {
    (void)instanceName; (void)instantiationToken; (void)resourcePath; (void)visible; (void)loggingOn;
    (void)clockUpdate; (void)lockPreemption; (void)unlockPreemption;
    if (logMessage_) {
        logMessage_(instanceEnvironment, fmi3Error, "logStatusError", "state_space3 supports Model Exchange only.");
    }
    return NULL;
}

void fmi3FreeInstance(fmi3Instance instance) {
    Instance *inst = (Instance *)instance;
    if (inst == NULL) {
        return;
    }
    logMessage(inst, fmi3OK, "logCalls", "fmi3FreeInstance");
    free(inst->instanceName);
    free(inst);
}

/* ---------------------------------------------------------------- initialization, termination */

fmi3Status fmi3EnterInitializationMode(fmi3Instance instance, fmi3Boolean toleranceDefined, fmi3Float64 tolerance,
                                       fmi3Float64 startTime, fmi3Boolean stopTimeDefined, fmi3Float64 stopTime) {
    Instance *inst = (Instance *)instance;
    (void)toleranceDefined; /* Model Exchange: the importer's solver controls the error */
    (void)tolerance;
    if (!allowed(inst, "fmi3EnterInitializationMode", MODE_INSTANTIATED)) {
        return fmi3Error;
    }
    if (stopTimeDefined && stopTime < startTime) {
        return FAIL(inst, "fmi3EnterInitializationMode: stopTime < startTime.");
    }
    inst->data.time = startTime;
    inst->data.mode = MODE_INITIALIZATION;
    return fmi3OK;
}

fmi3Status fmi3ExitInitializationMode(fmi3Instance instance) {
    Instance *inst = (Instance *)instance;
    if (!allowed(inst, "fmi3ExitInitializationMode", MODE_INITIALIZATION)) {
        return fmi3Error;
    }
    inst->data.x[0] = inst->data.x_start[0];
    inst->data.x[1] = inst->data.x_start[1];
    inst->data.steps = 0;
    inst->data.mode = MODE_EVENT; /* Model Exchange continues in Event Mode */
    return fmi3OK;
}

fmi3Status fmi3EnterEventMode(fmi3Instance instance) {
    Instance *inst = (Instance *)instance;
    if (!allowed(inst, "fmi3EnterEventMode", MODE_EVENT | MODE_CONTINUOUS_TIME)) {
        return fmi3Error;
    }
    inst->data.mode = MODE_EVENT;
    return fmi3OK;
}

fmi3Status fmi3Terminate(fmi3Instance instance) {
    Instance *inst = (Instance *)instance;
    if (!allowed(inst, "fmi3Terminate", MODE_EVENT | MODE_CONTINUOUS_TIME)) {
        return fmi3Error;
    }
    inst->data.mode = MODE_TERMINATED;
    return fmi3OK;
}

fmi3Status fmi3Reset(fmi3Instance instance) {
    Instance *inst = (Instance *)instance;
    if (!allowed(inst, "fmi3Reset", ANY_MODE)) {
        return fmi3Error;
    }
    setStartValues(&inst->data);
    inst->data.mode = MODE_INSTANTIATED;
    return fmi3OK;
}

/* ---------------------------------------------------------------- get and set values */

/* Checks the arguments of a getter or setter: every value reference must name a variable of the
   function's type (typeName, one of the listed references), and nValues must be the total number of
   their elements.  Returns 1 if they are fine; otherwise logs the problem and returns 0. */
static int checkReferences(Instance *inst, const char *function, const fmi3ValueReference *ofType, size_t nOfType,
                           const fmi3ValueReference vrs[], size_t nvr, const void *values, size_t nValues) {
    size_t i, j, total = 0;
    if (nvr > 0 && (vrs == NULL || values == NULL)) {
        logMessage(inst, fmi3Error, "logStatusError", "%s: NULL argument.", function);
        return 0;
    }
    for (i = 0; i < nvr; i++) {
        for (j = 0; j < nOfType && ofType[j] != vrs[i]; j++) {
        }
        if (j == nOfType) {
            logMessage(inst, fmi3Error, "logStatusError", "%s: value reference %u is not a variable of this type.",
                       function, (unsigned)vrs[i]);
            return 0;
        }
        total += elements(vrs[i]);
    }
    if (total != nValues) {
        logMessage(inst, fmi3Error, "logStatusError",
                   "%s: nValues is %lu, but the variables requested have %lu elements in all.", function,
                   (unsigned long)nValues, (unsigned long)total);
        return 0;
    }
    return 1;
}

static const fmi3ValueReference FLOAT64_VRS[] = {VR_TIME, VR_X, VR_DER_X, VR_A, VR_B, VR_Y64, VR_X_START};
static const fmi3ValueReference FLOAT32_VRS[] = {VR_U, VR_Y, VR_GAIN};
static const fmi3ValueReference INT32_VRS[] = {VR_STEPS};
static const fmi3ValueReference UINT8_VRS[] = {VR_MODE};

#define COUNT(array) (sizeof(array) / sizeof((array)[0]))

/* Checks that a parameter or input may be set in the current mode (and that it is settable at all). */
static int settable(Instance *inst, const char *function, fmi3ValueReference vr) {
    const int mode = (int)inst->data.mode;
    const char *reason = NULL;
    switch (vr) {
    case VR_U:
        if (!(mode & (BEFORE_INIT_DONE | MODE_EVENT | MODE_CONTINUOUS_TIME))) {
            reason = "the input u can be set in Instantiated, Initialization, Event and Continuous-Time Mode";
        }
        break;
    case VR_A:
    case VR_GAIN:
        if (!(mode & (BEFORE_INIT_DONE | MODE_EVENT))) {
            reason = "the tunable parameters A and gain can be set in Instantiated, Initialization and Event Mode only";
        }
        break;
    case VR_B:
    case VR_MODE:
    case VR_X_START:
        if (!(mode & BEFORE_INIT_DONE)) {
            reason = "B, mode and x_start are fixed parameters: they cannot be set after fmi3ExitInitializationMode";
        }
        break;
    case VR_TIME:
        reason = "the independent variable time cannot be set (use fmi3SetTime)";
        break;
    default:
        reason = "x, der(x), y, y64 and steps are calculated and cannot be set (use fmi3SetContinuousStates for x)";
        break;
    }
    if (reason != NULL) {
        logMessage(inst, fmi3Error, "logStatusError", "%s: %s.", function, reason);
        return 0;
    }
    return 1;
}

fmi3Status fmi3GetFloat64(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                          fmi3Float64 values[], size_t nValues) {
    Instance *inst = (Instance *)instance;
    const ModelData *d;
    double x[N_STATES], dx[N_STATES];
    size_t i, k = 0;
    if (!allowed(inst, "fmi3GetFloat64", ANY_MODE)) {
        return fmi3Error;
    }
    if (!checkReferences(inst, "fmi3GetFloat64", FLOAT64_VRS, COUNT(FLOAT64_VRS), valueReferences, nValueReferences,
                         values, nValues)) {
        return fmi3Error;
    }
    d = &inst->data;
    currentStates(d, x);
    derivatives(d, dx);
    for (i = 0; i < nValueReferences; i++) {
        switch (valueReferences[i]) {
        case VR_TIME: values[k++] = d->time; break;
        case VR_X: values[k++] = x[0]; values[k++] = x[1]; break;
        case VR_DER_X: values[k++] = dx[0]; values[k++] = dx[1]; break;
        case VR_A: memcpy(values + k, d->A, sizeof d->A); k += 4; break;
        case VR_B: values[k++] = d->B[0]; values[k++] = d->B[1]; break;
        case VR_Y64: values[k++] = outputY64(d); break;
        case VR_X_START: values[k++] = d->x_start[0]; values[k++] = d->x_start[1]; break;
        default: break;
        }
    }
    return fmi3OK;
}

fmi3Status fmi3SetFloat64(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                          const fmi3Float64 values[], size_t nValues) {
    Instance *inst = (Instance *)instance;
    ModelData *d;
    size_t i, k = 0;
    if (!allowed(inst, "fmi3SetFloat64", BEFORE_INIT_DONE | MODE_EVENT | MODE_CONTINUOUS_TIME)) {
        return fmi3Error;
    }
    if (!checkReferences(inst, "fmi3SetFloat64", FLOAT64_VRS, COUNT(FLOAT64_VRS), valueReferences, nValueReferences,
                         values, nValues)) {
        return fmi3Error;
    }
    /* check everything first so that an illegal call changes nothing */
    for (i = 0; i < nValueReferences; i++) {
        if (!settable(inst, "fmi3SetFloat64", valueReferences[i])) {
            return fmi3Error;
        }
    }
    d = &inst->data;
    for (i = 0; i < nValueReferences; i++) {
        switch (valueReferences[i]) {
        case VR_A: memcpy(d->A, values + k, sizeof d->A); k += 4; break;
        case VR_B: d->B[0] = values[k++]; d->B[1] = values[k++]; break;
        case VR_X_START: d->x_start[0] = values[k++]; d->x_start[1] = values[k++]; break;
        default: k += elements(valueReferences[i]); break;
        }
    }
    return fmi3OK;
}

fmi3Status fmi3GetFloat32(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                          fmi3Float32 values[], size_t nValues) {
    Instance *inst = (Instance *)instance;
    size_t i;
    if (!allowed(inst, "fmi3GetFloat32", ANY_MODE)) {
        return fmi3Error;
    }
    if (!checkReferences(inst, "fmi3GetFloat32", FLOAT32_VRS, COUNT(FLOAT32_VRS), valueReferences, nValueReferences,
                         values, nValues)) {
        return fmi3Error;
    }
    for (i = 0; i < nValueReferences; i++) {
        switch (valueReferences[i]) {
        case VR_U: values[i] = inst->data.u; break;
        case VR_Y: values[i] = (float)outputY64(&inst->data); break; /* rounded to the nearest float */
        case VR_GAIN: values[i] = inst->data.gain; break;
        default: break;
        }
    }
    return fmi3OK;
}

fmi3Status fmi3SetFloat32(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                          const fmi3Float32 values[], size_t nValues) {
    Instance *inst = (Instance *)instance;
    size_t i;
    if (!allowed(inst, "fmi3SetFloat32", BEFORE_INIT_DONE | MODE_EVENT | MODE_CONTINUOUS_TIME)) {
        return fmi3Error;
    }
    if (!checkReferences(inst, "fmi3SetFloat32", FLOAT32_VRS, COUNT(FLOAT32_VRS), valueReferences, nValueReferences,
                         values, nValues)) {
        return fmi3Error;
    }
    for (i = 0; i < nValueReferences; i++) {
        if (!settable(inst, "fmi3SetFloat32", valueReferences[i])) {
            return fmi3Error;
        }
    }
    for (i = 0; i < nValueReferences; i++) {
        if (valueReferences[i] == VR_U) {
            inst->data.u = values[i];
        } else if (valueReferences[i] == VR_GAIN) {
            inst->data.gain = values[i];
        }
    }
    return fmi3OK;
}

fmi3Status fmi3GetInt32(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                        fmi3Int32 values[], size_t nValues) {
    Instance *inst = (Instance *)instance;
    size_t i;
    if (!allowed(inst, "fmi3GetInt32", ANY_MODE)) {
        return fmi3Error;
    }
    if (!checkReferences(inst, "fmi3GetInt32", INT32_VRS, COUNT(INT32_VRS), valueReferences, nValueReferences,
                         values, nValues)) {
        return fmi3Error;
    }
    for (i = 0; i < nValueReferences; i++) {
        values[i] = inst->data.steps;
    }
    return fmi3OK;
}

fmi3Status fmi3SetInt32(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                        const fmi3Int32 values[], size_t nValues) {
    Instance *inst = (Instance *)instance;
    size_t i;
    if (!allowed(inst, "fmi3SetInt32", BEFORE_INIT_DONE | MODE_EVENT | MODE_CONTINUOUS_TIME)) {
        return fmi3Error;
    }
    if (!checkReferences(inst, "fmi3SetInt32", INT32_VRS, COUNT(INT32_VRS), valueReferences, nValueReferences,
                         values, nValues)) {
        return fmi3Error;
    }
    for (i = 0; i < nValueReferences; i++) {
        if (!settable(inst, "fmi3SetInt32", valueReferences[i])) {
            return fmi3Error;
        }
    }
    return fmi3OK; /* not reached with a reference: steps is not settable */
}

fmi3Status fmi3GetUInt8(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                        fmi3UInt8 values[], size_t nValues) {
    Instance *inst = (Instance *)instance;
    size_t i;
    if (!allowed(inst, "fmi3GetUInt8", ANY_MODE)) {
        return fmi3Error;
    }
    if (!checkReferences(inst, "fmi3GetUInt8", UINT8_VRS, COUNT(UINT8_VRS), valueReferences, nValueReferences,
                         values, nValues)) {
        return fmi3Error;
    }
    for (i = 0; i < nValueReferences; i++) {
        values[i] = inst->data.equationMode;
    }
    return fmi3OK;
}

fmi3Status fmi3SetUInt8(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                        const fmi3UInt8 values[], size_t nValues) {
    Instance *inst = (Instance *)instance;
    size_t i;
    if (!allowed(inst, "fmi3SetUInt8", BEFORE_INIT_DONE | MODE_EVENT | MODE_CONTINUOUS_TIME)) {
        return fmi3Error;
    }
    if (!checkReferences(inst, "fmi3SetUInt8", UINT8_VRS, COUNT(UINT8_VRS), valueReferences, nValueReferences,
                         values, nValues)) {
        return fmi3Error;
    }
    for (i = 0; i < nValueReferences; i++) {
        if (!settable(inst, "fmi3SetUInt8", valueReferences[i])) {
            return fmi3Error;
        }
    }
    for (i = 0; i < nValueReferences; i++) {
        inst->data.equationMode = values[i];
    }
    return fmi3OK;
}

/* The model has no variables of the other types. */
static fmi3Status noVariablesOfType(fmi3Instance instance, const char *function, size_t nValueReferences) {
    Instance *inst = (Instance *)instance;
    if (!allowed(inst, function, ANY_MODE)) {
        return fmi3Error;
    }
    if (nValueReferences > 0) {
        return FAIL(inst, "%s: the model has no variables of this type.", function);
    }
    return fmi3OK;
}

#define NO_VARIABLES_GET(TypeName, CType)                                                                          \
    fmi3Status fmi3Get##TypeName(fmi3Instance instance, const fmi3ValueReference valueReferences[],              \
                                 size_t nValueReferences, CType values[], size_t nValues) {                     \
        (void)valueReferences;                                                                                  \
        (void)values;                                                                                           \
        (void)nValues;                                                                                          \
        return noVariablesOfType(instance, "fmi3Get" #TypeName, nValueReferences);                              \
    }

#define NO_VARIABLES_SET(TypeName, CType)                                                                          \
    fmi3Status fmi3Set##TypeName(fmi3Instance instance, const fmi3ValueReference valueReferences[],              \
                                 size_t nValueReferences, const CType values[], size_t nValues) {               \
        (void)valueReferences;                                                                                  \
        (void)values;                                                                                           \
        (void)nValues;                                                                                          \
        return noVariablesOfType(instance, "fmi3Set" #TypeName, nValueReferences);                              \
    }

NO_VARIABLES_GET(Int8, fmi3Int8)
NO_VARIABLES_GET(Int16, fmi3Int16)
NO_VARIABLES_GET(UInt16, fmi3UInt16)
NO_VARIABLES_GET(UInt32, fmi3UInt32)
NO_VARIABLES_GET(Int64, fmi3Int64)
NO_VARIABLES_GET(UInt64, fmi3UInt64)
NO_VARIABLES_GET(Boolean, fmi3Boolean)
NO_VARIABLES_GET(String, fmi3String)

NO_VARIABLES_SET(Int8, fmi3Int8)
NO_VARIABLES_SET(Int16, fmi3Int16)
NO_VARIABLES_SET(UInt16, fmi3UInt16)
NO_VARIABLES_SET(UInt32, fmi3UInt32)
NO_VARIABLES_SET(Int64, fmi3Int64)
NO_VARIABLES_SET(UInt64, fmi3UInt64)
NO_VARIABLES_SET(Boolean, fmi3Boolean)
NO_VARIABLES_SET(String, fmi3String)

fmi3Status fmi3GetBinary(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                         size_t valueSizes[], fmi3Binary values[], size_t nValues) {
    (void)valueReferences; (void)valueSizes; (void)values; (void)nValues;
    return noVariablesOfType(instance, "fmi3GetBinary", nValueReferences);
}

fmi3Status fmi3SetBinary(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                         const size_t valueSizes[], const fmi3Binary values[], size_t nValues) {
    (void)valueReferences; (void)valueSizes; (void)values; (void)nValues;
    return noVariablesOfType(instance, "fmi3SetBinary", nValueReferences);
}

fmi3Status fmi3GetClock(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                        fmi3Clock values[]) {
    (void)valueReferences; (void)values;
    return noVariablesOfType(instance, "fmi3GetClock", nValueReferences);
}

fmi3Status fmi3SetClock(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                        const fmi3Clock values[]) {
    (void)valueReferences; (void)values;
    return noVariablesOfType(instance, "fmi3SetClock", nValueReferences);
}

/* ---------------------------------------------------------------- unsupported functions */

static fmi3Status unsupported(fmi3Instance instance, const char *function, const char *reason) {
    Instance *inst = (Instance *)instance;
    if (inst == NULL) {
        return fmi3Error;
    }
    return FAIL(inst, "%s is not supported by state_space3: %s", function, reason);
}

fmi3Status fmi3GetNumberOfVariableDependencies(fmi3Instance instance, fmi3ValueReference valueReference, size_t *nDependencies) {
    (void)valueReference; (void)nDependencies;
    return unsupported(instance, "fmi3GetNumberOfVariableDependencies", "providesPerElementDependencies=\"false\".");
}

fmi3Status fmi3GetVariableDependencies(fmi3Instance instance, fmi3ValueReference dependent, size_t elementIndicesOfDependent[],
                                       fmi3ValueReference independents[], size_t elementIndicesOfIndependents[],
                                       fmi3DependencyKind dependencyKinds[], size_t nDependencies) {
    (void)dependent; (void)elementIndicesOfDependent; (void)independents; (void)elementIndicesOfIndependents;
    (void)dependencyKinds; (void)nDependencies;
    return unsupported(instance, "fmi3GetVariableDependencies", "providesPerElementDependencies=\"false\".");
}

fmi3Status fmi3GetDirectionalDerivative(fmi3Instance instance, const fmi3ValueReference unknowns[], size_t nUnknowns,
                                        const fmi3ValueReference knowns[], size_t nKnowns, const fmi3Float64 seed[],
                                        size_t nSeed, fmi3Float64 sensitivity[], size_t nSensitivity) {
    (void)unknowns; (void)nUnknowns; (void)knowns; (void)nKnowns;
    (void)seed; (void)nSeed; (void)sensitivity; (void)nSensitivity;
    return unsupported(instance, "fmi3GetDirectionalDerivative", "providesDirectionalDerivatives=\"false\".");
}

fmi3Status fmi3GetAdjointDerivative(fmi3Instance instance, const fmi3ValueReference unknowns[], size_t nUnknowns,
                                    const fmi3ValueReference knowns[], size_t nKnowns, const fmi3Float64 seed[],
                                    size_t nSeed, fmi3Float64 sensitivity[], size_t nSensitivity) {
    (void)unknowns; (void)nUnknowns; (void)knowns; (void)nKnowns;
    (void)seed; (void)nSeed; (void)sensitivity; (void)nSensitivity;
    return unsupported(instance, "fmi3GetAdjointDerivative", "providesAdjointDerivatives=\"false\".");
}

fmi3Status fmi3EnterConfigurationMode(fmi3Instance instance) {
    return unsupported(instance, "fmi3EnterConfigurationMode", "the model has no structural parameters.");
}

fmi3Status fmi3ExitConfigurationMode(fmi3Instance instance) {
    return unsupported(instance, "fmi3ExitConfigurationMode", "the model has no structural parameters.");
}

fmi3Status fmi3GetIntervalDecimal(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                                  fmi3Float64 intervals[], fmi3IntervalQualifier qualifiers[]) {
    (void)valueReferences; (void)nValueReferences; (void)intervals; (void)qualifiers;
    return unsupported(instance, "fmi3GetIntervalDecimal", "the model has no clocks.");
}

fmi3Status fmi3GetIntervalFraction(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                                   fmi3UInt64 counters[], fmi3UInt64 resolutions[], fmi3IntervalQualifier qualifiers[]) {
    (void)valueReferences; (void)nValueReferences; (void)counters; (void)resolutions; (void)qualifiers;
    return unsupported(instance, "fmi3GetIntervalFraction", "the model has no clocks.");
}

fmi3Status fmi3GetShiftDecimal(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                               fmi3Float64 shifts[]) {
    (void)valueReferences; (void)nValueReferences; (void)shifts;
    return unsupported(instance, "fmi3GetShiftDecimal", "the model has no clocks.");
}

fmi3Status fmi3GetShiftFraction(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                                fmi3UInt64 counters[], fmi3UInt64 resolutions[]) {
    (void)valueReferences; (void)nValueReferences; (void)counters; (void)resolutions;
    return unsupported(instance, "fmi3GetShiftFraction", "the model has no clocks.");
}

fmi3Status fmi3SetIntervalDecimal(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                                  const fmi3Float64 intervals[]) {
    (void)valueReferences; (void)nValueReferences; (void)intervals;
    return unsupported(instance, "fmi3SetIntervalDecimal", "the model has no clocks.");
}

fmi3Status fmi3SetIntervalFraction(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                                   const fmi3UInt64 counters[], const fmi3UInt64 resolutions[]) {
    (void)valueReferences; (void)nValueReferences; (void)counters; (void)resolutions;
    return unsupported(instance, "fmi3SetIntervalFraction", "the model has no clocks.");
}

fmi3Status fmi3SetShiftDecimal(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                               const fmi3Float64 shifts[]) {
    (void)valueReferences; (void)nValueReferences; (void)shifts;
    return unsupported(instance, "fmi3SetShiftDecimal", "the model has no clocks.");
}

fmi3Status fmi3SetShiftFraction(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                                const fmi3UInt64 counters[], const fmi3UInt64 resolutions[]) {
    (void)valueReferences; (void)nValueReferences; (void)counters; (void)resolutions;
    return unsupported(instance, "fmi3SetShiftFraction", "the model has no clocks.");
}

fmi3Status fmi3EvaluateDiscreteStates(fmi3Instance instance) {
    return unsupported(instance, "fmi3EvaluateDiscreteStates", "providesEvaluateDiscreteStates=\"false\".");
}

fmi3Status fmi3EnterStepMode(fmi3Instance instance) {
    return unsupported(instance, "fmi3EnterStepMode", "not a Co-Simulation FMU.");
}

fmi3Status fmi3GetOutputDerivatives(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                                    const fmi3Int32 orders[], fmi3Float64 values[], size_t nValues) {
    (void)valueReferences; (void)nValueReferences; (void)orders; (void)values; (void)nValues;
    return unsupported(instance, "fmi3GetOutputDerivatives", "not a Co-Simulation FMU.");
}

fmi3Status fmi3ActivateModelPartition(fmi3Instance instance, fmi3ValueReference clockReference, fmi3Float64 activationTime) {
    (void)clockReference; (void)activationTime;
    return unsupported(instance, "fmi3ActivateModelPartition", "not a Scheduled Execution FMU.");
}

fmi3Status fmi3DoStep(fmi3Instance instance, fmi3Float64 currentCommunicationPoint, fmi3Float64 communicationStepSize,
                      fmi3Boolean noSetFMUStatePriorToCurrentPoint, fmi3Boolean *eventHandlingNeeded,
                      fmi3Boolean *terminateSimulation, fmi3Boolean *earlyReturn, fmi3Float64 *lastSuccessfulTime) {
    (void)currentCommunicationPoint; (void)communicationStepSize; (void)noSetFMUStatePriorToCurrentPoint;
    (void)eventHandlingNeeded; (void)terminateSimulation; (void)earlyReturn; (void)lastSuccessfulTime;
    return unsupported(instance, "fmi3DoStep", "not a Co-Simulation FMU.");
}

/* ---------------------------------------------------------------- FMU state */

fmi3Status fmi3GetFMUState(fmi3Instance instance, fmi3FMUState *FMUState) {
    Instance *inst = (Instance *)instance;
    ModelData *copy;
    if (!allowed(inst, "fmi3GetFMUState", ANY_MODE)) {
        return fmi3Error;
    }
    if (FMUState == NULL) {
        return FAIL(inst, "fmi3GetFMUState: NULL argument.");
    }
    copy = (ModelData *)*FMUState;
    if (copy == NULL) {
        copy = (ModelData *)malloc(sizeof(ModelData));
        if (copy == NULL) {
            return FAIL(inst, "fmi3GetFMUState: out of memory.");
        }
    }
    *copy = inst->data;
    *FMUState = copy;
    return fmi3OK;
}

fmi3Status fmi3SetFMUState(fmi3Instance instance, fmi3FMUState FMUState) {
    Instance *inst = (Instance *)instance;
    const ModelData *d = (const ModelData *)FMUState;
    if (!allowed(inst, "fmi3SetFMUState", ANY_MODE)) {
        return fmi3Error;
    }
    if (d == NULL) {
        return FAIL(inst, "fmi3SetFMUState: NULL FMU state.");
    }
    inst->data = *d;
    return fmi3OK;
}

fmi3Status fmi3FreeFMUState(fmi3Instance instance, fmi3FMUState *FMUState) {
    Instance *inst = (Instance *)instance;
    if (!allowed(inst, "fmi3FreeFMUState", ANY_MODE)) {
        return fmi3Error;
    }
    if (FMUState == NULL) {
        return FAIL(inst, "fmi3FreeFMUState: NULL argument.");
    }
    free(*FMUState);
    *FMUState = NULL;
    return fmi3OK;
}

fmi3Status fmi3SerializedFMUStateSize(fmi3Instance instance, fmi3FMUState FMUState, size_t *size) {
    Instance *inst = (Instance *)instance;
    if (!allowed(inst, "fmi3SerializedFMUStateSize", ANY_MODE)) {
        return fmi3Error;
    }
    if (FMUState == NULL || size == NULL) {
        return FAIL(inst, "fmi3SerializedFMUStateSize: NULL argument.");
    }
    *size = SERIAL_SIZE;
    return fmi3OK;
}

fmi3Status fmi3SerializeFMUState(fmi3Instance instance, fmi3FMUState FMUState, fmi3Byte serializedState[], size_t size) {
    Instance *inst = (Instance *)instance;
    unsigned header[2];
    if (!allowed(inst, "fmi3SerializeFMUState", ANY_MODE)) {
        return fmi3Error;
    }
    if (FMUState == NULL || serializedState == NULL) {
        return FAIL(inst, "fmi3SerializeFMUState: NULL argument.");
    }
    if (size != SERIAL_SIZE) {
        return FAIL(inst, "fmi3SerializeFMUState: wrong buffer size %lu (expected %lu).", (unsigned long)size,
                    (unsigned long)SERIAL_SIZE);
    }
    header[0] = SERIAL_MAGIC;
    header[1] = (unsigned)sizeof(ModelData);
    memcpy(serializedState, header, sizeof header);
    memcpy(serializedState + sizeof header, FMUState, sizeof(ModelData));
    return fmi3OK;
}

fmi3Status fmi3DeserializeFMUState(fmi3Instance instance, const fmi3Byte serializedState[], size_t size, fmi3FMUState *FMUState) {
    Instance *inst = (Instance *)instance;
    unsigned header[2];
    ModelData read, *d;
    if (!allowed(inst, "fmi3DeserializeFMUState", ANY_MODE)) {
        return fmi3Error;
    }
    if (serializedState == NULL || FMUState == NULL) {
        return FAIL(inst, "fmi3DeserializeFMUState: NULL argument.");
    }
    if (size != SERIAL_SIZE) {
        return FAIL(inst, "fmi3DeserializeFMUState: wrong size %lu of the serialized state (expected %lu).",
                    (unsigned long)size, (unsigned long)SERIAL_SIZE);
    }
    memcpy(header, serializedState, sizeof header);
    memcpy(&read, serializedState + sizeof header, sizeof read);
    if (header[0] != SERIAL_MAGIC || header[1] != sizeof(ModelData) || (int)read.mode == 0 ||
        ((int)read.mode & ~ANY_MODE) != 0) {
        return FAIL(inst, "fmi3DeserializeFMUState: not a serialized state_space3 state.");
    }
    d = (ModelData *)*FMUState;
    if (d == NULL) {
        d = (ModelData *)malloc(sizeof(ModelData));
        if (d == NULL) {
            return FAIL(inst, "fmi3DeserializeFMUState: out of memory.");
        }
    }
    *d = read;
    *FMUState = d;
    return fmi3OK;
}

/* ---------------------------------------------------------------- Model Exchange */

fmi3Status fmi3UpdateDiscreteStates(fmi3Instance instance, fmi3Boolean *discreteStatesNeedUpdate, fmi3Boolean *terminateSimulation,
                                    fmi3Boolean *nominalsOfContinuousStatesChanged, fmi3Boolean *valuesOfContinuousStatesChanged,
                                    fmi3Boolean *nextEventTimeDefined, fmi3Float64 *nextEventTime) {
    Instance *inst = (Instance *)instance;
    if (!allowed(inst, "fmi3UpdateDiscreteStates", MODE_EVENT)) {
        return fmi3Error;
    }
    if (discreteStatesNeedUpdate == NULL || terminateSimulation == NULL || nominalsOfContinuousStatesChanged == NULL ||
        valuesOfContinuousStatesChanged == NULL || nextEventTimeDefined == NULL || nextEventTime == NULL) {
        return FAIL(inst, "fmi3UpdateDiscreteStates: NULL argument.");
    }
    /* no events: the event iteration ends at once */
    *discreteStatesNeedUpdate = fmi3False;
    *terminateSimulation = fmi3False;
    *nominalsOfContinuousStatesChanged = fmi3False;
    *valuesOfContinuousStatesChanged = fmi3False;
    *nextEventTimeDefined = fmi3False;
    *nextEventTime = 0.0;
    return fmi3OK;
}

fmi3Status fmi3EnterContinuousTimeMode(fmi3Instance instance) {
    Instance *inst = (Instance *)instance;
    if (!allowed(inst, "fmi3EnterContinuousTimeMode", MODE_EVENT)) {
        return fmi3Error;
    }
    inst->data.mode = MODE_CONTINUOUS_TIME;
    return fmi3OK;
}

fmi3Status fmi3CompletedIntegratorStep(fmi3Instance instance, fmi3Boolean noSetFMUStatePriorToCurrentPoint,
                                       fmi3Boolean *enterEventMode, fmi3Boolean *terminateSimulation) {
    Instance *inst = (Instance *)instance;
    (void)noSetFMUStatePriorToCurrentPoint;
    if (!allowed(inst, "fmi3CompletedIntegratorStep", MODE_CONTINUOUS_TIME)) {
        return fmi3Error;
    }
    if (enterEventMode == NULL || terminateSimulation == NULL) {
        return FAIL(inst, "fmi3CompletedIntegratorStep: NULL argument.");
    }
    inst->data.steps += 1; /* the diagnostic output steps */
    *enterEventMode = fmi3False;
    *terminateSimulation = fmi3False;
    return fmi3OK;
}

fmi3Status fmi3SetTime(fmi3Instance instance, fmi3Float64 time) {
    Instance *inst = (Instance *)instance;
    if (!allowed(inst, "fmi3SetTime", MODE_EVENT | MODE_CONTINUOUS_TIME)) {
        return fmi3Error;
    }
    inst->data.time = time;
    return fmi3OK;
}

fmi3Status fmi3SetContinuousStates(fmi3Instance instance, const fmi3Float64 continuousStates[], size_t nContinuousStates) {
    Instance *inst = (Instance *)instance;
    if (!allowed(inst, "fmi3SetContinuousStates", MODE_CONTINUOUS_TIME)) {
        return fmi3Error;
    }
    if (nContinuousStates != N_STATES || continuousStates == NULL) {
        return FAIL(inst, "fmi3SetContinuousStates: expected %d states, got %lu.", N_STATES,
                    (unsigned long)nContinuousStates);
    }
    inst->data.x[0] = continuousStates[0];
    inst->data.x[1] = continuousStates[1];
    return fmi3OK;
}

fmi3Status fmi3GetContinuousStateDerivatives(fmi3Instance instance, fmi3Float64 derivatives_[], size_t nContinuousStates) {
    Instance *inst = (Instance *)instance;
    if (!allowed(inst, "fmi3GetContinuousStateDerivatives", ANY_MODE & ~MODE_INSTANTIATED)) {
        return fmi3Error;
    }
    if (nContinuousStates != N_STATES || derivatives_ == NULL) {
        return FAIL(inst, "fmi3GetContinuousStateDerivatives: expected %d states, got %lu.", N_STATES,
                    (unsigned long)nContinuousStates);
    }
    derivatives(&inst->data, derivatives_);
    return fmi3OK;
}

fmi3Status fmi3GetEventIndicators(fmi3Instance instance, fmi3Float64 eventIndicators[], size_t nEventIndicators) {
    Instance *inst = (Instance *)instance;
    (void)eventIndicators;
    if (!allowed(inst, "fmi3GetEventIndicators", ANY_MODE & ~MODE_INSTANTIATED)) {
        return fmi3Error;
    }
    if (nEventIndicators != 0) {
        return FAIL(inst, "fmi3GetEventIndicators: the model has no event indicators (nEventIndicators = %lu).",
                    (unsigned long)nEventIndicators);
    }
    return fmi3OK;
}

fmi3Status fmi3GetContinuousStates(fmi3Instance instance, fmi3Float64 continuousStates[], size_t nContinuousStates) {
    Instance *inst = (Instance *)instance;
    if (!allowed(inst, "fmi3GetContinuousStates", ANY_MODE & ~MODE_INSTANTIATED)) {
        return fmi3Error;
    }
    if (nContinuousStates != N_STATES || continuousStates == NULL) {
        return FAIL(inst, "fmi3GetContinuousStates: expected %d states, got %lu.", N_STATES,
                    (unsigned long)nContinuousStates);
    }
    currentStates(&inst->data, continuousStates);
    return fmi3OK;
}

fmi3Status fmi3GetNominalsOfContinuousStates(fmi3Instance instance, fmi3Float64 nominals[], size_t nContinuousStates) {
    Instance *inst = (Instance *)instance;
    if (!allowed(inst, "fmi3GetNominalsOfContinuousStates", ANY_MODE)) {
        return fmi3Error;
    }
    if (nContinuousStates != N_STATES || nominals == NULL) {
        return FAIL(inst, "fmi3GetNominalsOfContinuousStates: expected %d states, got %lu.", N_STATES,
                    (unsigned long)nContinuousStates);
    }
    nominals[0] = 1.0;
    nominals[1] = 1.0;
    return fmi3OK;
}

fmi3Status fmi3GetNumberOfEventIndicators(fmi3Instance instance, size_t *nEventIndicators) {
    Instance *inst = (Instance *)instance;
    if (!allowed(inst, "fmi3GetNumberOfEventIndicators", ANY_MODE)) {
        return fmi3Error;
    }
    if (nEventIndicators == NULL) {
        return FAIL(inst, "fmi3GetNumberOfEventIndicators: NULL argument.");
    }
    *nEventIndicators = 0;
    return fmi3OK;
}

fmi3Status fmi3GetNumberOfContinuousStates(fmi3Instance instance, size_t *nContinuousStates) {
    Instance *inst = (Instance *)instance;
    if (!allowed(inst, "fmi3GetNumberOfContinuousStates", ANY_MODE)) {
        return fmi3Error;
    }
    if (nContinuousStates == NULL) {
        return FAIL(inst, "fmi3GetNumberOfContinuousStates: NULL argument.");
    }
    *nContinuousStates = N_STATES;
    return fmi3OK;
}
