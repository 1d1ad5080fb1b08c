/*
 * Forced Duffing oscillator, FMI 3.0 Co-Simulation with its own fixed-step
 * classical Runge-Kutta (RK4) solver.
 *
 * Hand-written for the test suite of fmi-adjoint (it is not produced by the
 * project's exporter).  See fmus/README.md.
 *
 *     x'' + delta x' + alpha x + beta x^3 = gamma cos(omega t) + F
 *
 * as the first-order system  x' = v,  v' = -delta v - alpha x - beta x^3 + gamma cos(omega t) + F,
 * with x(t0) = x_start, v(t0) = v_start.
 *
 * Value references:
 *
 *     vr  0  time        independent
 *     vr  1  x           output, continuous
 *     vr  2  v           output, continuous
 *     vr  3  F           input, continuous,  start 0
 *     vr  4  delta       parameter, tunable, start 0.2
 *     vr  5  alpha       parameter, fixed,   start 1.0
 *     vr  6  beta        parameter, fixed,   start 5.0
 *     vr  7  gamma       parameter, fixed,   start 0.5
 *     vr  8  omega       parameter, fixed,   start 1.2
 *     vr  9  x_start     parameter, fixed,   start 1.0
 *     vr 10  v_start     parameter, fixed,   start 0.0
 *     vr 11  h_internal  parameter, fixed,   start 1e-3  (internal RK4 step)
 *
 * fmi3DoStep integrates from currentCommunicationPoint to
 * currentCommunicationPoint + communicationStepSize with whole internal steps
 * of size h_internal, measured from currentCommunicationPoint, and one last
 * step that covers the rest, of length in (0, (1 + 1e-9) h_internal]: a
 * communication step of 2.5 h_internal is taken as h, h, h/2; a rest below
 * 1e-9 h_internal (round-off) is merged into the last whole step rather than
 * taken as a tiny extra step.  The input F is held constant over a communication step (no
 * input interpolation).  A change of the tunable parameter delta in Step Mode
 * takes effect from the next fmi3DoStep.
 *
 * No directional derivatives, no event mode, no early return.
 */

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmi3Functions.h"

#define INSTANTIATION_TOKEN "{d8191f67-4868-4680-b417-25a68735adf8}"

enum {
    VR_TIME = 0,
    VR_X = 1,
    VR_V = 2,
    VR_F = 3,
    VR_DELTA = 4,
    VR_ALPHA = 5,
    VR_BETA = 6,
    VR_GAMMA = 7,
    VR_OMEGA = 8,
    VR_X_START = 9,
    VR_V_START = 10,
    VR_H_INTERNAL = 11
};

typedef enum {
    MODE_INSTANTIATED = 1 << 0,
    MODE_INITIALIZATION = 1 << 1,
    MODE_STEP = 1 << 2,
    MODE_TERMINATED = 1 << 3
} Mode;

#define ANY_MODE (MODE_INSTANTIATED | MODE_INITIALIZATION | MODE_STEP | MODE_TERMINATED)

/* Everything that makes up the state of an instance (copied by get/set FMU state). */
typedef struct {
    Mode mode;
    double time;
    double x, v;
    double F;
    double delta, alpha, beta, gamma, omega;
    double x_start, v_start;
    double h_internal;
} ModelData;

#define N_DOUBLES 12 /* number of doubles in ModelData */

typedef struct {
    ModelData data;
    char *instanceName;
    fmi3InstanceEnvironment environment;
    fmi3LogMessageCallback logMessage;
    fmi3Boolean loggingOn;
} Instance;

#define SERIAL_MAGIC 0x44554631u /* "DUF1" */
#define SERIAL_SIZE (sizeof(unsigned) + sizeof(int) + N_DOUBLES * sizeof(double))

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
    return 1;
}

/* ---------------------------------------------------------------- model and solver */

static void setStartValues(ModelData *d) {
    d->time = 0.0;
    d->F = 0.0;
    d->delta = 0.2;
    d->alpha = 1.0;
    d->beta = 5.0;
    d->gamma = 0.5;
    d->omega = 1.2;
    d->x_start = 1.0;
    d->v_start = 0.0;
    d->h_internal = 1e-3;
    d->x = d->x_start;
    d->v = d->v_start;
}

static void rhs(const ModelData *d, double t, double x, double v, double *dx, double *dv) {
    *dx = v;
    *dv = -d->delta * v - d->alpha * x - d->beta * x * x * x + d->gamma * cos(d->omega * t) + d->F;
}

/* One classical Runge-Kutta step of size h from time t. */
static void rk4Step(ModelData *d, double t, double h) {
    double k1x, k1v, k2x, k2v, k3x, k3v, k4x, k4v;
    const double x = d->x, v = d->v;
    rhs(d, t, x, v, &k1x, &k1v);
    rhs(d, t + 0.5 * h, x + 0.5 * h * k1x, v + 0.5 * h * k1v, &k2x, &k2v);
    rhs(d, t + 0.5 * h, x + 0.5 * h * k2x, v + 0.5 * h * k2v, &k3x, &k3v);
    rhs(d, t + h, x + h * k3x, v + h * k3v, &k4x, &k4v);
    d->x = x + h / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x);
    d->v = v + h / 6.0 * (k1v + 2.0 * k2v + 2.0 * k3v + k4v);
}

/* Whole internal steps, then one last step up to t1 (see the comment at the top). */
static void integrate(ModelData *d, double t0, double t1) {
    const double h = d->h_internal;
    double t = t0;
    long k = 0;
    while (t1 - t > h * (1.0 + 1e-9)) {
        rk4Step(d, t, h);
        k++;
        t = t0 + (double)k * h;
    }
    if (t1 > t) {
        rk4Step(d, t, t1 - t);
    }
    d->time = t1;
}

/* ---------------------------------------------------------------- common functions */

const char *fmi3GetVersion(void) { return fmi3Version; }

fmi3Status fmi3SetDebugLogging(fmi3Instance instance, fmi3Boolean loggingOn, size_t nCategories, const fmi3String categories[]) {
    Instance *inst = (Instance *)instance;
    size_t i;
    if (!allowed(inst, "fmi3SetDebugLogging", ANY_MODE)) {
        return fmi3Error;
    }
    for (i = 0; i < nCategories; i++) {
        if (categories[i] == NULL || (strcmp(categories[i], "logStatusError") != 0 && strcmp(categories[i], "logCalls") != 0)) {
            return FAIL(inst, "fmi3SetDebugLogging: unknown log category \"%s\".", categories[i] ? categories[i] : "(null)");
        }
    }
    inst->loggingOn = loggingOn;
    return fmi3OK;
}

fmi3Instance fmi3InstantiateModelExchange(fmi3String instanceName, fmi3String instantiationToken, fmi3String resourcePath,
                                          fmi3Boolean visible, fmi3Boolean loggingOn,
                                          fmi3InstanceEnvironment instanceEnvironment, fmi3LogMessageCallback logMessage_) {
    (void)instanceName;
    (void)instantiationToken;
    (void)resourcePath;
    (void)visible;
    (void)loggingOn;
    if (logMessage_) {
        logMessage_(instanceEnvironment, fmi3Error, "logStatusError", "duffing supports Co-Simulation only.");
    }
    return NULL;
}

fmi3Instance fmi3InstantiateCoSimulation(fmi3String instanceName, fmi3String instantiationToken, fmi3String resourcePath,
                                         fmi3Boolean visible, fmi3Boolean loggingOn, fmi3Boolean eventModeUsed,
                                         fmi3Boolean earlyReturnAllowed, const fmi3ValueReference requiredIntermediateVariables[],
                                         size_t nRequiredIntermediateVariables, fmi3InstanceEnvironment instanceEnvironment,
                                         fmi3LogMessageCallback logMessage_, fmi3IntermediateUpdateCallback intermediateUpdate) {
    Instance *inst;
    size_t n;
    (void)resourcePath;
    (void)visible;
    (void)earlyReturnAllowed; /* the FMU never returns early */
    (void)requiredIntermediateVariables;
    (void)intermediateUpdate; /* no intermediate updates are made */
    if (instanceName == NULL || instanceName[0] == '\0') {
        if (logMessage_) {
            logMessage_(instanceEnvironment, fmi3Error, "logStatusError", "fmi3InstantiateCoSimulation: missing instance name.");
        }
        return NULL;
    }
    if (instantiationToken == NULL || strcmp(instantiationToken, INSTANTIATION_TOKEN) != 0) {
        if (logMessage_) {
            logMessage_(instanceEnvironment, fmi3Error, "logStatusError",
                        "fmi3InstantiateCoSimulation: wrong instantiation token.");
        }
        return NULL;
    }
    if (eventModeUsed) {
        if (logMessage_) {
            logMessage_(instanceEnvironment, fmi3Error, "logStatusError",
                        "fmi3InstantiateCoSimulation: duffing has no Event Mode (hasEventMode=\"false\").");
        }
        return NULL;
    }
    if (nRequiredIntermediateVariables > 0) {
        if (logMessage_) {
            logMessage_(instanceEnvironment, fmi3Error, "logStatusError",
                        "fmi3InstantiateCoSimulation: duffing provides no intermediate variables.");
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
    logMessage(inst, fmi3OK, "logCalls", "fmi3InstantiateCoSimulation(%s)", instanceName);
    return inst;
}

fmi3Instance fmi3InstantiateScheduledExecution(fmi3String instanceName, fmi3String instantiationToken, fmi3String resourcePath,
                                               fmi3Boolean visible, fmi3Boolean loggingOn,
                                               fmi3InstanceEnvironment instanceEnvironment, fmi3LogMessageCallback logMessage_,
                                               fmi3ClockUpdateCallback clockUpdate, fmi3LockPreemptionCallback lockPreemption,
                                               fmi3UnlockPreemptionCallback unlockPreemption) {
    (void)instanceName;
    (void)instantiationToken;
    (void)resourcePath;
    (void)visible;
    (void)loggingOn;
    (void)clockUpdate;
    (void)lockPreemption;
    (void)unlockPreemption;
    if (logMessage_) {
        logMessage_(instanceEnvironment, fmi3Error, "logStatusError", "duffing supports Co-Simulation only.");
    }
    return NULL;
}

void fmi3FreeInstance(fmi3Instance instance) {
    Instance *inst = (Instance *)instance;
    if (inst == NULL) {
        return;
    }
    free(inst->instanceName);
    free(inst);
}

fmi3Status fmi3EnterInitializationMode(fmi3Instance instance, fmi3Boolean toleranceDefined, fmi3Float64 tolerance,
                                       fmi3Float64 startTime, fmi3Boolean stopTimeDefined, fmi3Float64 stopTime) {
    Instance *inst = (Instance *)instance;
    (void)toleranceDefined; /* a fixed-step solver: the tolerance is not used */
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
    inst->data.x = inst->data.x_start;
    inst->data.v = inst->data.v_start;
    inst->data.mode = MODE_STEP;
    return fmi3OK;
}

fmi3Status fmi3EnterEventMode(fmi3Instance instance) {
    Instance *inst = (Instance *)instance;
    if (inst == NULL) {
        return fmi3Error;
    }
    return FAIL(inst, "fmi3EnterEventMode: duffing has no Event Mode.");
}

fmi3Status fmi3Terminate(fmi3Instance instance) {
    Instance *inst = (Instance *)instance;
    if (!allowed(inst, "fmi3Terminate", MODE_STEP)) {
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

fmi3Status fmi3GetFloat64(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                          fmi3Float64 values[], size_t nValues) {
    Instance *inst = (Instance *)instance;
    const ModelData *d;
    const int beforeStep = MODE_INSTANTIATED | MODE_INITIALIZATION;
    size_t i;
    if (!allowed(inst, "fmi3GetFloat64", ANY_MODE)) {
        return fmi3Error;
    }
    if (nValues != nValueReferences) {
        return FAIL(inst, "fmi3GetFloat64: nValues (%lu) must equal nValueReferences (%lu): all variables are scalars.",
                    (unsigned long)nValues, (unsigned long)nValueReferences);
    }
    if (nValueReferences > 0 && (valueReferences == NULL || values == NULL)) {
        return FAIL(inst, "fmi3GetFloat64: NULL argument.");
    }
    d = &inst->data;
    for (i = 0; i < nValueReferences; i++) {
        switch (valueReferences[i]) {
        case VR_TIME: values[i] = d->time; break;
        /* before the end of initialization the outputs follow the start parameters */
        case VR_X: values[i] = (d->mode & beforeStep) ? d->x_start : d->x; break;
        case VR_V: values[i] = (d->mode & beforeStep) ? d->v_start : d->v; break;
        case VR_F: values[i] = d->F; break;
        case VR_DELTA: values[i] = d->delta; break;
        case VR_ALPHA: values[i] = d->alpha; break;
        case VR_BETA: values[i] = d->beta; break;
        case VR_GAMMA: values[i] = d->gamma; break;
        case VR_OMEGA: values[i] = d->omega; break;
        case VR_X_START: values[i] = d->x_start; break;
        case VR_V_START: values[i] = d->v_start; break;
        case VR_H_INTERNAL: values[i] = d->h_internal; break;
        default:
            return FAIL(inst, "fmi3GetFloat64: unknown value reference %u.", (unsigned)valueReferences[i]);
        }
    }
    return fmi3OK;
}

fmi3Status fmi3SetFloat64(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                          const fmi3Float64 values[], size_t nValues) {
    Instance *inst = (Instance *)instance;
    ModelData *d;
    const int beforeStep = MODE_INSTANTIATED | MODE_INITIALIZATION;
    size_t i;
    if (!allowed(inst, "fmi3SetFloat64", MODE_INSTANTIATED | MODE_INITIALIZATION | MODE_STEP)) {
        return fmi3Error;
    }
    if (nValues != nValueReferences) {
        return FAIL(inst, "fmi3SetFloat64: nValues (%lu) must equal nValueReferences (%lu): all variables are scalars.",
                    (unsigned long)nValues, (unsigned long)nValueReferences);
    }
    if (nValueReferences > 0 && (valueReferences == NULL || values == NULL)) {
        return FAIL(inst, "fmi3SetFloat64: NULL argument.");
    }
    d = &inst->data;
    /* check everything first so that an illegal call changes nothing */
    for (i = 0; i < nValueReferences; i++) {
        switch (valueReferences[i]) {
        case VR_F:
        case VR_DELTA:
            break; /* input and tunable parameter: settable in every mode listed above */
        case VR_ALPHA:
        case VR_BETA:
        case VR_GAMMA:
        case VR_OMEGA:
        case VR_X_START:
        case VR_V_START:
        case VR_H_INTERNAL:
            if (!(d->mode & beforeStep)) {
                return FAIL(inst, "fmi3SetFloat64: value reference %u is a fixed parameter and cannot be set after "
                            "fmi3ExitInitializationMode.", (unsigned)valueReferences[i]);
            }
            if (valueReferences[i] == VR_H_INTERNAL && !(values[i] > 0.0)) {
                return FAIL(inst, "fmi3SetFloat64: h_internal must be positive.");
            }
            break;
        case VR_TIME:
            return FAIL(inst, "fmi3SetFloat64: the independent variable time cannot be set.");
        case VR_X:
        case VR_V:
            return FAIL(inst, "fmi3SetFloat64: the outputs x and v cannot be set (use x_start and v_start).");
        default:
            return FAIL(inst, "fmi3SetFloat64: unknown value reference %u.", (unsigned)valueReferences[i]);
        }
    }
    for (i = 0; i < nValueReferences; i++) {
        switch (valueReferences[i]) {
        case VR_F: d->F = values[i]; break;
        case VR_DELTA: d->delta = values[i]; break;
        case VR_ALPHA: d->alpha = values[i]; break;
        case VR_BETA: d->beta = values[i]; break;
        case VR_GAMMA: d->gamma = values[i]; break;
        case VR_OMEGA: d->omega = values[i]; break;
        case VR_X_START: d->x_start = values[i]; break;
        case VR_V_START: d->v_start = values[i]; break;
        case VR_H_INTERNAL: d->h_internal = values[i]; break;
        default: break;
        }
    }
    return fmi3OK;
}

/* The model has variables of type Float64 only. */
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

NO_VARIABLES_GET(Float32, fmi3Float32)
NO_VARIABLES_GET(Int8, fmi3Int8)
NO_VARIABLES_GET(UInt8, fmi3UInt8)
NO_VARIABLES_GET(Int16, fmi3Int16)
NO_VARIABLES_GET(UInt16, fmi3UInt16)
NO_VARIABLES_GET(Int32, fmi3Int32)
NO_VARIABLES_GET(UInt32, fmi3UInt32)
NO_VARIABLES_GET(Int64, fmi3Int64)
NO_VARIABLES_GET(UInt64, fmi3UInt64)
NO_VARIABLES_GET(Boolean, fmi3Boolean)
NO_VARIABLES_GET(String, fmi3String)

NO_VARIABLES_SET(Float32, fmi3Float32)
NO_VARIABLES_SET(Int8, fmi3Int8)
NO_VARIABLES_SET(UInt8, fmi3UInt8)
NO_VARIABLES_SET(Int16, fmi3Int16)
NO_VARIABLES_SET(UInt16, fmi3UInt16)
NO_VARIABLES_SET(Int32, fmi3Int32)
NO_VARIABLES_SET(UInt32, fmi3UInt32)
NO_VARIABLES_SET(Int64, fmi3Int64)
NO_VARIABLES_SET(UInt64, fmi3UInt64)
NO_VARIABLES_SET(Boolean, fmi3Boolean)
NO_VARIABLES_SET(String, fmi3String)

fmi3Status fmi3GetBinary(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                         size_t valueSizes[], fmi3Binary values[], size_t nValues) {
    (void)valueReferences;
    (void)valueSizes;
    (void)values;
    (void)nValues;
    return noVariablesOfType(instance, "fmi3GetBinary", nValueReferences);
}

fmi3Status fmi3SetBinary(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                         const size_t valueSizes[], const fmi3Binary values[], size_t nValues) {
    (void)valueReferences;
    (void)valueSizes;
    (void)values;
    (void)nValues;
    return noVariablesOfType(instance, "fmi3SetBinary", nValueReferences);
}

fmi3Status fmi3GetClock(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                        fmi3Clock values[]) {
    (void)valueReferences;
    (void)values;
    return noVariablesOfType(instance, "fmi3GetClock", nValueReferences);
}

fmi3Status fmi3SetClock(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                        const fmi3Clock values[]) {
    (void)valueReferences;
    (void)values;
    return noVariablesOfType(instance, "fmi3SetClock", nValueReferences);
}

/* ---------------------------------------------------------------- unsupported functions */

static fmi3Status unsupported(fmi3Instance instance, const char *function, const char *reason) {
    Instance *inst = (Instance *)instance;
    if (inst == NULL) {
        return fmi3Error;
    }
    return FAIL(inst, "%s is not supported by duffing: %s", function, reason);
}

fmi3Status fmi3GetNumberOfVariableDependencies(fmi3Instance instance, fmi3ValueReference valueReference, size_t *nDependencies) {
    (void)valueReference;
    (void)nDependencies;
    return unsupported(instance, "fmi3GetNumberOfVariableDependencies", "no dependency information is provided.");
}

fmi3Status fmi3GetVariableDependencies(fmi3Instance instance, fmi3ValueReference dependent, size_t elementIndicesOfDependent[],
                                       fmi3ValueReference independents[], size_t elementIndicesOfIndependents[],
                                       fmi3DependencyKind dependencyKinds[], size_t nDependencies) {
    (void)dependent;
    (void)elementIndicesOfDependent;
    (void)independents;
    (void)elementIndicesOfIndependents;
    (void)dependencyKinds;
    (void)nDependencies;
    return unsupported(instance, "fmi3GetVariableDependencies", "no dependency information is provided.");
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
    return unsupported(instance, "fmi3EvaluateDiscreteStates", "the model has no Event Mode.");
}

fmi3Status fmi3UpdateDiscreteStates(fmi3Instance instance, fmi3Boolean *discreteStatesNeedUpdate, fmi3Boolean *terminateSimulation,
                                    fmi3Boolean *nominalsOfContinuousStatesChanged, fmi3Boolean *valuesOfContinuousStatesChanged,
                                    fmi3Boolean *nextEventTimeDefined, fmi3Float64 *nextEventTime) {
    (void)discreteStatesNeedUpdate; (void)terminateSimulation; (void)nominalsOfContinuousStatesChanged;
    (void)valuesOfContinuousStatesChanged; (void)nextEventTimeDefined; (void)nextEventTime;
    return unsupported(instance, "fmi3UpdateDiscreteStates", "the model has no Event Mode.");
}

fmi3Status fmi3EnterContinuousTimeMode(fmi3Instance instance) {
    return unsupported(instance, "fmi3EnterContinuousTimeMode", "not a Model Exchange FMU.");
}

fmi3Status fmi3CompletedIntegratorStep(fmi3Instance instance, fmi3Boolean noSetFMUStatePriorToCurrentPoint,
                                       fmi3Boolean *enterEventMode, fmi3Boolean *terminateSimulation) {
    (void)noSetFMUStatePriorToCurrentPoint; (void)enterEventMode; (void)terminateSimulation;
    return unsupported(instance, "fmi3CompletedIntegratorStep", "not a Model Exchange FMU.");
}

fmi3Status fmi3SetTime(fmi3Instance instance, fmi3Float64 time) {
    (void)time;
    return unsupported(instance, "fmi3SetTime", "not a Model Exchange FMU.");
}

fmi3Status fmi3SetContinuousStates(fmi3Instance instance, const fmi3Float64 continuousStates[], size_t nContinuousStates) {
    (void)continuousStates; (void)nContinuousStates;
    return unsupported(instance, "fmi3SetContinuousStates", "not a Model Exchange FMU.");
}

fmi3Status fmi3GetContinuousStateDerivatives(fmi3Instance instance, fmi3Float64 derivatives[], size_t nContinuousStates) {
    (void)derivatives; (void)nContinuousStates;
    return unsupported(instance, "fmi3GetContinuousStateDerivatives", "not a Model Exchange FMU.");
}

fmi3Status fmi3GetEventIndicators(fmi3Instance instance, fmi3Float64 eventIndicators[], size_t nEventIndicators) {
    (void)eventIndicators; (void)nEventIndicators;
    return unsupported(instance, "fmi3GetEventIndicators", "not a Model Exchange FMU.");
}

fmi3Status fmi3GetContinuousStates(fmi3Instance instance, fmi3Float64 continuousStates[], size_t nContinuousStates) {
    (void)continuousStates; (void)nContinuousStates;
    return unsupported(instance, "fmi3GetContinuousStates", "not a Model Exchange FMU.");
}

fmi3Status fmi3GetNominalsOfContinuousStates(fmi3Instance instance, fmi3Float64 nominals[], size_t nContinuousStates) {
    (void)nominals; (void)nContinuousStates;
    return unsupported(instance, "fmi3GetNominalsOfContinuousStates", "not a Model Exchange FMU.");
}

fmi3Status fmi3GetNumberOfEventIndicators(fmi3Instance instance, size_t *nEventIndicators) {
    (void)nEventIndicators;
    return unsupported(instance, "fmi3GetNumberOfEventIndicators", "not a Model Exchange FMU.");
}

fmi3Status fmi3GetNumberOfContinuousStates(fmi3Instance instance, size_t *nContinuousStates) {
    (void)nContinuousStates;
    return unsupported(instance, "fmi3GetNumberOfContinuousStates", "not a Model Exchange FMU.");
}

fmi3Status fmi3EnterStepMode(fmi3Instance instance) {
    return unsupported(instance, "fmi3EnterStepMode", "the model has no Event Mode (Step Mode follows initialization).");
}

fmi3Status fmi3GetOutputDerivatives(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                                    const fmi3Int32 orders[], fmi3Float64 values[], size_t nValues) {
    (void)valueReferences; (void)nValueReferences; (void)orders; (void)values; (void)nValues;
    return unsupported(instance, "fmi3GetOutputDerivatives", "maxOutputDerivativeOrder is 0.");
}

fmi3Status fmi3ActivateModelPartition(fmi3Instance instance, fmi3ValueReference clockReference, fmi3Float64 activationTime) {
    (void)clockReference; (void)activationTime;
    return unsupported(instance, "fmi3ActivateModelPartition", "not a Scheduled Execution FMU.");
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
    if (!allowed(inst, "fmi3SetFMUState", ANY_MODE)) {
        return fmi3Error;
    }
    if (FMUState == NULL) {
        return FAIL(inst, "fmi3SetFMUState: NULL FMU state.");
    }
    inst->data = *(const ModelData *)FMUState;
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

static void packDoubles(const ModelData *d, double values[N_DOUBLES]) {
    values[0] = d->time; values[1] = d->x; values[2] = d->v; values[3] = d->F;
    values[4] = d->delta; values[5] = d->alpha; values[6] = d->beta; values[7] = d->gamma;
    values[8] = d->omega; values[9] = d->x_start; values[10] = d->v_start; values[11] = d->h_internal;
}

static void unpackDoubles(ModelData *d, const double values[N_DOUBLES]) {
    d->time = values[0]; d->x = values[1]; d->v = values[2]; d->F = values[3];
    d->delta = values[4]; d->alpha = values[5]; d->beta = values[6]; d->gamma = values[7];
    d->omega = values[8]; d->x_start = values[9]; d->v_start = values[10]; d->h_internal = values[11];
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
    const ModelData *d = (const ModelData *)FMUState;
    unsigned magic = SERIAL_MAGIC;
    int mode;
    double values[N_DOUBLES];
    if (!allowed(inst, "fmi3SerializeFMUState", ANY_MODE)) {
        return fmi3Error;
    }
    if (d == NULL || serializedState == NULL) {
        return FAIL(inst, "fmi3SerializeFMUState: NULL argument.");
    }
    if (size != SERIAL_SIZE) {
        return FAIL(inst, "fmi3SerializeFMUState: wrong buffer size %lu (expected %lu).", (unsigned long)size,
                    (unsigned long)SERIAL_SIZE);
    }
    mode = (int)d->mode;
    packDoubles(d, values);
    memcpy(serializedState, &magic, sizeof magic);
    memcpy(serializedState + sizeof magic, &mode, sizeof mode);
    memcpy(serializedState + sizeof magic + sizeof mode, values, sizeof values);
    return fmi3OK;
}

fmi3Status fmi3DeserializeFMUState(fmi3Instance instance, const fmi3Byte serializedState[], size_t size, fmi3FMUState *FMUState) {
    Instance *inst = (Instance *)instance;
    unsigned magic;
    int mode;
    double values[N_DOUBLES];
    ModelData *d;
    if (!allowed(inst, "fmi3DeserializeFMUState", ANY_MODE)) {
        return fmi3Error;
    }
    if (serializedState == NULL || FMUState == NULL) {
        return FAIL(inst, "fmi3DeserializeFMUState: NULL argument.");
    }
    if (size != SERIAL_SIZE) {
        return FAIL(inst, "fmi3DeserializeFMUState: wrong size of the serialized state.");
    }
    memcpy(&magic, serializedState, sizeof magic);
    memcpy(&mode, serializedState + sizeof magic, sizeof mode);
    memcpy(values, serializedState + sizeof magic + sizeof mode, sizeof values);
    if (magic != SERIAL_MAGIC || mode == 0 || (mode & ~ANY_MODE) != 0) {
        return FAIL(inst, "fmi3DeserializeFMUState: not a serialized duffing state.");
    }
    d = (ModelData *)*FMUState;
    if (d == NULL) {
        d = (ModelData *)malloc(sizeof(ModelData));
        if (d == NULL) {
            return FAIL(inst, "fmi3DeserializeFMUState: out of memory.");
        }
    }
    d->mode = (Mode)mode;
    unpackDoubles(d, values);
    *FMUState = d;
    return fmi3OK;
}

/* ---------------------------------------------------------------- Co-Simulation */

fmi3Status fmi3DoStep(fmi3Instance instance, fmi3Float64 currentCommunicationPoint, fmi3Float64 communicationStepSize,
                      fmi3Boolean noSetFMUStatePriorToCurrentPoint, fmi3Boolean *eventHandlingNeeded,
                      fmi3Boolean *terminateSimulation, fmi3Boolean *earlyReturn, fmi3Float64 *lastSuccessfulTime) {
    Instance *inst = (Instance *)instance;
    ModelData *d;
    double tolerance;
    (void)noSetFMUStatePriorToCurrentPoint;
    if (!allowed(inst, "fmi3DoStep", MODE_STEP)) {
        return fmi3Error;
    }
    if (eventHandlingNeeded == NULL || terminateSimulation == NULL || earlyReturn == NULL || lastSuccessfulTime == NULL) {
        return FAIL(inst, "fmi3DoStep: NULL argument.");
    }
    d = &inst->data;
    if (!(communicationStepSize >= 0.0)) {
        return FAIL(inst, "fmi3DoStep: negative communication step size %g.", communicationStepSize);
    }
    tolerance = 1e-9 * (fabs(d->time) > 1.0 ? fabs(d->time) : 1.0);
    if (fabs(currentCommunicationPoint - d->time) > tolerance) {
        return FAIL(inst, "fmi3DoStep: currentCommunicationPoint %.17g differs from the time of the FMU %.17g.",
                    currentCommunicationPoint, d->time);
    }
    integrate(d, currentCommunicationPoint, currentCommunicationPoint + communicationStepSize);
    *eventHandlingNeeded = fmi3False;
    *terminateSimulation = fmi3False;
    *earlyReturn = fmi3False;
    *lastSuccessfulTime = d->time;
    return fmi3OK;
}
