/*
 * Van der Pol oscillator with an additive input force, FMI 3.0 Model Exchange.
 *
 * Hand-written for the test suite of fmi-adjoint (it is not produced by the
 * project's exporter).  The same model as fmus/van_der_pol_me (FMI 2.0), with
 * the same value references 0..7 plus the independent variable time (vr 8),
 * which FMI 3.0 requires.  See fmus/README.md.
 *
 *     der(x0) = x1
 *     der(x1) = mu * (1 - x0^2) * x1 - x0 + u
 *
 *     x0(t0) = x0_start,  x1(t0) = x1_start
 *
 * Value references:
 *
 *     vr 0  x0        output, continuous state
 *     vr 1  der(x0)   local, state derivative (derivative="0")
 *     vr 2  x1        output, continuous state
 *     vr 3  der(x1)   local, state derivative (derivative="2")
 *     vr 4  mu        parameter, tunable, start 1.0
 *     vr 5  x0_start  parameter, fixed,   start 2.0
 *     vr 6  x1_start  parameter, fixed,   start 0.0
 *     vr 7  u         input, continuous,  start 0.0
 *     vr 8  time      independent
 *
 * All variables are Float64 scalars.  No event indicators, no time events.
 *
 * fmi3GetDirectionalDerivative returns exact partial derivatives of the
 * unknowns x0, x1, der(x0), der(x1) with respect to the knowns x0, x1, u and
 * time (the model is autonomous: the time column is zero) and, beyond what
 * FMI 3.0 requires, also with respect to the parameters mu, x0_start and
 * x1_start:
 *
 *   - in Initialization Mode the states are functions of the parameters
 *     (x0 = x0_start, x1 = x1_start), so the knowns are u, mu, x0_start,
 *     x1_start (and time); the states are unknowns there and may not be used
 *     as knowns;
 *   - in Event, Continuous-Time and Terminated Mode the states are knowns;
 *     x0_start and x1_start do not enter the right-hand side any more, so their
 *     columns are zero.
 *
 * Setting values (FMI 3.0 rules): u in Instantiated, Initialization, Event and
 * Continuous-Time Mode; x0_start and x1_start before
 * fmi3ExitInitializationMode; the tunable mu in Instantiated, Initialization
 * and Event Mode (not in Continuous-Time Mode).  An illegal call returns
 * fmi3Error, logs a message and changes nothing.
 *
 * Every FMI 3.0 function is exported; those that do not apply to this model
 * (Co-Simulation, Scheduled Execution, clocks, configuration mode, adjoint
 * derivatives, variable dependencies, fmi3EvaluateDiscreteStates) return
 * fmi3Error with a logged message.
 */

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmi3Functions.h"

#define INSTANTIATION_TOKEN "{5b0e3c1e-6f4a-4d0b-9a57-3c1f2e8d7a64}"

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
    VR_TIME = 8
};

typedef enum {
    MODE_INSTANTIATED = 1 << 0,
    MODE_INITIALIZATION = 1 << 1,
    MODE_EVENT = 1 << 2,
    MODE_CONTINUOUS_TIME = 1 << 3,
    MODE_TERMINATED = 1 << 4
} Mode;

#define ANY_MODE (MODE_INSTANTIATED | MODE_INITIALIZATION | MODE_EVENT | MODE_CONTINUOUS_TIME | MODE_TERMINATED)

/* Everything that makes up the state of an instance (copied by get/set FMU state). */
typedef struct {
    Mode mode;
    double time;
    double x[N_STATES];
    double mu;
    double x0_start;
    double x1_start;
    double u;
} ModelData;

#define N_DOUBLES 7 /* number of doubles in ModelData */

typedef struct {
    ModelData data;
    char *instanceName;
    fmi3InstanceEnvironment environment;
    fmi3LogMessageCallback logMessage;
    fmi3Boolean loggingOn;
} Instance;

#define SERIAL_MAGIC 0x56445033u /* "VDP3" */
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

/* Checks that function `name` may be called in the current mode. */
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
    d->x[0] = d->x0_start;
    d->x[1] = d->x1_start;
}

/* ---------------------------------------------------------------- common functions */

const char *fmi3GetVersion(void) { return fmi3Version; }

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
    (void)instanceName;
    (void)instantiationToken;
    (void)resourcePath;
    (void)visible;
    (void)loggingOn;
    (void)eventModeUsed;
    (void)earlyReturnAllowed;
    (void)requiredIntermediateVariables;
    (void)nRequiredIntermediateVariables;
    (void)intermediateUpdate;
    if (logMessage_) {
        logMessage_(instanceEnvironment, fmi3Error, "logStatusError", "van_der_pol3 supports Model Exchange only.");
    }
    return NULL;
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
        logMessage_(instanceEnvironment, fmi3Error, "logStatusError", "van_der_pol3 supports Model Exchange only.");
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
    inst->data.x[0] = inst->data.x0_start;
    inst->data.x[1] = inst->data.x1_start;
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

fmi3Status fmi3GetFloat64(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                          fmi3Float64 values[], size_t nValues) {
    Instance *inst = (Instance *)instance;
    const ModelData *d;
    double x[N_STATES], dx[N_STATES];
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
    currentStates(d, x);
    derivatives(d, dx);
    for (i = 0; i < nValueReferences; i++) {
        switch (valueReferences[i]) {
        case VR_X0: values[i] = x[0]; break;
        case VR_DER_X0: values[i] = dx[0]; break;
        case VR_X1: values[i] = x[1]; break;
        case VR_DER_X1: values[i] = dx[1]; break;
        case VR_MU: values[i] = d->mu; break;
        case VR_X0_START: values[i] = d->x0_start; break;
        case VR_X1_START: values[i] = d->x1_start; break;
        case VR_U: values[i] = d->u; break;
        case VR_TIME: values[i] = d->time; break;
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
    const int beforeInit = MODE_INSTANTIATED | MODE_INITIALIZATION;
    size_t i;
    if (!allowed(inst, "fmi3SetFloat64", MODE_INSTANTIATED | MODE_INITIALIZATION | MODE_EVENT | MODE_CONTINUOUS_TIME)) {
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
        case VR_U:
            break; /* a continuous input can be set in every mode listed above */
        case VR_MU:
            if (!(d->mode & (beforeInit | MODE_EVENT))) {
                return FAIL(inst, "fmi3SetFloat64: the tunable parameter mu can only be set before initialization, "
                            "during initialization or in Event Mode.");
            }
            break;
        case VR_X0_START:
        case VR_X1_START:
            if (!(d->mode & beforeInit)) {
                return FAIL(inst, "fmi3SetFloat64: x0_start and x1_start are fixed parameters: they cannot be set "
                            "after fmi3ExitInitializationMode.");
            }
            break;
        case VR_X0:
        case VR_X1:
        case VR_DER_X0:
        case VR_DER_X1:
            return FAIL(inst, "fmi3SetFloat64: x0, x1, der(x0) and der(x1) are calculated variables and cannot be set "
                        "(use fmi3SetContinuousStates for the states).");
        case VR_TIME:
            return FAIL(inst, "fmi3SetFloat64: the independent variable time cannot be set (use fmi3SetTime).");
        default:
            return FAIL(inst, "fmi3SetFloat64: unknown value reference %u.", (unsigned)valueReferences[i]);
        }
    }
    for (i = 0; i < nValueReferences; i++) {
        switch (valueReferences[i]) {
        case VR_U: d->u = values[i]; break;
        case VR_MU: d->mu = values[i]; break;
        case VR_X0_START: d->x0_start = values[i]; break;
        case VR_X1_START: d->x1_start = values[i]; break;
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
    return FAIL(inst, "%s is not supported by van_der_pol3: %s", function, reason);
}

fmi3Status fmi3GetNumberOfVariableDependencies(fmi3Instance instance, fmi3ValueReference valueReference, size_t *nDependencies) {
    (void)valueReference;
    (void)nDependencies;
    return unsupported(instance, "fmi3GetNumberOfVariableDependencies", "providesPerElementDependencies=\"false\".");
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
    return unsupported(instance, "fmi3GetVariableDependencies", "providesPerElementDependencies=\"false\".");
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

fmi3Status fmi3DoStep(fmi3Instance instance, fmi3Float64 currentCommunicationPoint, fmi3Float64 communicationStepSize,
                      fmi3Boolean noSetFMUStatePriorToCurrentPoint, fmi3Boolean *eventHandlingNeeded,
                      fmi3Boolean *terminateSimulation, fmi3Boolean *earlyReturn, fmi3Float64 *lastSuccessfulTime) {
    (void)currentCommunicationPoint; (void)communicationStepSize; (void)noSetFMUStatePriorToCurrentPoint;
    (void)eventHandlingNeeded; (void)terminateSimulation; (void)earlyReturn; (void)lastSuccessfulTime;
    return unsupported(instance, "fmi3DoStep", "not a Co-Simulation FMU.");
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
    values[0] = d->time; values[1] = d->x[0]; values[2] = d->x[1]; values[3] = d->mu;
    values[4] = d->x0_start; values[5] = d->x1_start; values[6] = d->u;
}

static void unpackDoubles(ModelData *d, const double values[N_DOUBLES]) {
    d->time = values[0]; d->x[0] = values[1]; d->x[1] = values[2]; d->mu = values[3];
    d->x0_start = values[4]; d->x1_start = values[5]; d->u = values[6];
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
        return FAIL(inst, "fmi3DeserializeFMUState: not a serialized van_der_pol3 state.");
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

/* ---------------------------------------------------------------- directional derivatives */

fmi3Status fmi3GetDirectionalDerivative(fmi3Instance instance, const fmi3ValueReference unknowns[], size_t nUnknowns,
                                        const fmi3ValueReference knowns[], size_t nKnowns, const fmi3Float64 seed[],
                                        size_t nSeed, fmi3Float64 sensitivity[], size_t nSensitivity) {
    Instance *inst = (Instance *)instance;
    const ModelData *d;
    const int initializing = MODE_INITIALIZATION;
    double x[N_STATES];
    double dx0 = 0.0, dx1 = 0.0, du = 0.0, dmu = 0.0, dx0s = 0.0, dx1s = 0.0;
    double ddx0, ddx1;
    size_t i;
    if (!allowed(inst, "fmi3GetDirectionalDerivative",
                 MODE_INITIALIZATION | MODE_EVENT | MODE_CONTINUOUS_TIME | MODE_TERMINATED)) {
        return fmi3Error;
    }
    if (nSeed != nKnowns || nSensitivity != nUnknowns) {
        return FAIL(inst, "fmi3GetDirectionalDerivative: nSeed (%lu) must equal nKnowns (%lu) and nSensitivity (%lu) "
                    "nUnknowns (%lu): all variables are scalars.", (unsigned long)nSeed, (unsigned long)nKnowns,
                    (unsigned long)nSensitivity, (unsigned long)nUnknowns);
    }
    if ((nKnowns > 0 && (knowns == NULL || seed == NULL)) || (nUnknowns > 0 && (unknowns == NULL || sensitivity == NULL))) {
        return FAIL(inst, "fmi3GetDirectionalDerivative: NULL argument.");
    }
    d = &inst->data;
    for (i = 0; i < nKnowns; i++) {
        switch (knowns[i]) {
        case VR_X0:
        case VR_X1:
            if (d->mode & initializing) {
                return FAIL(inst, "fmi3GetDirectionalDerivative: in Initialization Mode the states are unknowns "
                            "(x0 = x0_start, x1 = x1_start); use x0_start and x1_start as knowns.");
            }
            if (knowns[i] == VR_X0) {
                dx0 += seed[i];
            } else {
                dx1 += seed[i];
            }
            break;
        case VR_U: du += seed[i]; break;
        case VR_MU: dmu += seed[i]; break;
        case VR_X0_START: dx0s += seed[i]; break;
        case VR_X1_START: dx1s += seed[i]; break;
        case VR_TIME: break; /* autonomous model: the time column is zero */
        default:
            return FAIL(inst, "fmi3GetDirectionalDerivative: value reference %u is not a known of van_der_pol3 "
                        "(knowns: x0, x1, u, time, mu, x0_start, x1_start).", (unsigned)knowns[i]);
        }
    }
    for (i = 0; i < nUnknowns; i++) {
        switch (unknowns[i]) {
        case VR_X0: case VR_X1: case VR_DER_X0: case VR_DER_X1: break;
        default:
            return FAIL(inst, "fmi3GetDirectionalDerivative: value reference %u is not an unknown of van_der_pol3 "
                        "(unknowns: x0, x1, der(x0), der(x1)).", (unsigned)unknowns[i]);
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
    for (i = 0; i < nUnknowns; i++) {
        switch (unknowns[i]) {
        case VR_X0: sensitivity[i] = dx0; break;
        case VR_X1: sensitivity[i] = dx1; break;
        case VR_DER_X0: sensitivity[i] = ddx0; break;
        case VR_DER_X1: sensitivity[i] = ddx1; break;
        default: break;
        }
    }
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
    /* no discrete states, no events: the event iteration ends at once */
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
        return FAIL(inst, "fmi3SetContinuousStates: expected %d states.", N_STATES);
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
        return FAIL(inst, "fmi3GetContinuousStateDerivatives: expected %d states.", N_STATES);
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
    if (nEventIndicators != N_EVENT_INDICATORS) {
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
        return FAIL(inst, "fmi3GetContinuousStates: expected %d states.", N_STATES);
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
        return FAIL(inst, "fmi3GetNominalsOfContinuousStates: expected %d states.", N_STATES);
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
    *nEventIndicators = N_EVENT_INDICATORS;
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
