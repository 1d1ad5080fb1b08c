/*
 * Dahlquist's test equation, FMI 3.0 Model Exchange AND Co-Simulation in one
 * binary.
 *
 * Hand-written for the test suite of fmi-adjoint (it is not produced by the
 * project's exporter).  See fmus/README.md.
 *
 *     der(x) = -k * x,   x(t0) = x_start
 *
 * Value references (all Float64 scalars):
 *
 *     vr 0  time        independent
 *     vr 1  x           output, continuous state
 *     vr 2  der(x)      local, state derivative (derivative="1")
 *     vr 3  k           parameter, tunable, start 1.0
 *     vr 4  x_start     parameter, fixed,   start 1.0
 *     vr 5  h_internal  parameter, fixed,   start 1e-4  (Co-Simulation solver)
 *
 * Model Exchange: no event indicators, no time events.  Co-Simulation:
 * fmi3DoStep(t, H) integrates with the classical fourth-order Runge-Kutta
 * method in n = ceil(H / h_internal) equal substeps of H / n (a ratio within
 * 1e-9 above an integer counts as that integer, so that round-off in H does
 * not add a step).  Any H > 0 is accepted.
 *
 * There are no directional or adjoint derivatives (an importer must difference
 * the right-hand side).  FMU states can be got, set and serialized; a state
 * taken from a Model Exchange instance cannot be set into a Co-Simulation
 * instance and vice versa.
 *
 * Setting values: k in Instantiated, Initialization, Event (ME) and Step (CS)
 * Mode; x_start and h_internal (> 0) before fmi3ExitInitializationMode.  x,
 * der(x) and time cannot be set.  An illegal call returns fmi3Error, logs a
 * message and changes nothing.
 */

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmi3Functions.h"

#define INSTANTIATION_TOKEN "{588c210b-916b-46f0-ad6c-eaff38e78725}"

#define N_STATES 1

enum { VR_TIME = 0, VR_X = 1, VR_DER_X = 2, VR_K = 3, VR_X_START = 4, VR_H_INTERNAL = 5 };

typedef enum {
    MODE_INSTANTIATED = 1 << 0,
    MODE_INITIALIZATION = 1 << 1,
    MODE_EVENT = 1 << 2,           /* Model Exchange */
    MODE_CONTINUOUS_TIME = 1 << 3, /* Model Exchange */
    MODE_STEP = 1 << 4,            /* Co-Simulation */
    MODE_TERMINATED = 1 << 5
} Mode;

#define ANY_MODE (MODE_INSTANTIATED | MODE_INITIALIZATION | MODE_EVENT | MODE_CONTINUOUS_TIME | MODE_STEP | MODE_TERMINATED)
#define BEFORE_INIT_DONE (MODE_INSTANTIATED | MODE_INITIALIZATION)

typedef enum { INTERFACE_ME = 1, INTERFACE_CS = 2 } Interface;

/* Everything that makes up the state of an instance (copied by get/set FMU state). */
typedef struct {
    Interface interface;
    Mode mode;
    double time;
    double x;
    double k;
    double x_start;
    double h_internal;
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
#define SERIAL_MAGIC 0x44414831u /* "DAH1" */
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

/* Checks that a function of one interface is called on an instance of that interface. */
static int ofInterface(Instance *inst, const char *name, Interface interface) {
    if (inst == NULL) {
        return 0;
    }
    if (inst->data.interface != interface) {
        logMessage(inst, fmi3Error, "logStatusError", "%s is a %s function, but this is a %s instance.", name,
                   interface == INTERFACE_ME ? "Model Exchange" : "Co-Simulation",
                   inst->data.interface == INTERFACE_ME ? "Model Exchange" : "Co-Simulation");
        return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- model equations */

/* The state: in Instantiated and Initialization Mode it follows x_start. */
static double currentState(const ModelData *d) {
    return (d->mode & BEFORE_INIT_DONE) ? d->x_start : d->x;
}

static double rhs(double k, double x) { return -k * x; }

static void setStartValues(ModelData *d) {
    d->time = 0.0;
    d->k = 1.0;
    d->x_start = 1.0;
    d->h_internal = 1e-4;
    d->x = d->x_start;
}

/* ---------------------------------------------------------------- instantiation */

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

static Instance *instantiate(const char *function, Interface interface, fmi3String instanceName,
                             fmi3String instantiationToken, fmi3Boolean loggingOn,
                             fmi3InstanceEnvironment instanceEnvironment, fmi3LogMessageCallback logMessage_) {
    Instance *inst;
    size_t n;
    if (instanceName == NULL || instanceName[0] == '\0') {
        if (logMessage_) {
            logMessage_(instanceEnvironment, fmi3Error, "logStatusError", "dahlquist: missing instance name.");
        }
        return NULL;
    }
    if (instantiationToken == NULL || strcmp(instantiationToken, INSTANTIATION_TOKEN) != 0) {
        if (logMessage_) {
            logMessage_(instanceEnvironment, fmi3Error, "logStatusError", "dahlquist: wrong instantiation token.");
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
    inst->data.interface = interface;
    inst->data.mode = MODE_INSTANTIATED;
    logMessage(inst, fmi3OK, "logCalls", "%s(%s)", function, instanceName);
    return inst;
}

fmi3Instance fmi3InstantiateModelExchange(fmi3String instanceName, fmi3String instantiationToken, fmi3String resourcePath,
                                          fmi3Boolean visible, fmi3Boolean loggingOn,
                                          fmi3InstanceEnvironment instanceEnvironment, fmi3LogMessageCallback logMessage_) {
    (void)resourcePath; /* the FMU has no resources */
    (void)visible;
    return instantiate("fmi3InstantiateModelExchange", INTERFACE_ME, instanceName, instantiationToken, loggingOn,
                       instanceEnvironment, logMessage_);
}

fmi3Instance fmi3InstantiateCoSimulation(fmi3String instanceName, fmi3String instantiationToken, fmi3String resourcePath,
                                         fmi3Boolean visible, fmi3Boolean loggingOn, fmi3Boolean eventModeUsed,
                                         fmi3Boolean earlyReturnAllowed, const fmi3ValueReference requiredIntermediateVariables[],
                                         size_t nRequiredIntermediateVariables, fmi3InstanceEnvironment instanceEnvironment,
                                         fmi3LogMessageCallback logMessage_, fmi3IntermediateUpdateCallback intermediateUpdate) {
    (void)resourcePath;
    (void)visible;
    (void)earlyReturnAllowed; /* the FMU never returns early */
    (void)requiredIntermediateVariables;
    (void)intermediateUpdate;
    if (eventModeUsed || nRequiredIntermediateVariables > 0) {
        if (logMessage_) {
            logMessage_(instanceEnvironment, fmi3Error, "logStatusError",
                        "fmi3InstantiateCoSimulation: dahlquist has no event mode (hasEventMode=\"false\") and no "
                        "intermediate variables.");
        }
        return NULL;
    }
    return instantiate("fmi3InstantiateCoSimulation", INTERFACE_CS, instanceName, instantiationToken, loggingOn,
                       instanceEnvironment, logMessage_);
}

fmi3Instance fmi3InstantiateScheduledExecution(fmi3String instanceName, fmi3String instantiationToken, fmi3String resourcePath,
                                               fmi3Boolean visible, fmi3Boolean loggingOn,
                                               fmi3InstanceEnvironment instanceEnvironment, fmi3LogMessageCallback logMessage_,
                                               fmi3ClockUpdateCallback clockUpdate, fmi3LockPreemptionCallback lockPreemption,
                                               fmi3UnlockPreemptionCallback unlockPreemption) {
    (void)instanceName; (void)instantiationToken; (void)resourcePath; (void)visible; (void)loggingOn;
    (void)clockUpdate; (void)lockPreemption; (void)unlockPreemption;
    if (logMessage_) {
        logMessage_(instanceEnvironment, fmi3Error, "logStatusError",
                    "dahlquist supports Model Exchange and Co-Simulation, not Scheduled Execution.");
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
    (void)toleranceDefined; /* ME: the importer's solver; CS: the fixed step h_internal */
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
    /* Model Exchange continues in Event Mode, Co-Simulation (without event mode) in Step Mode */
    inst->data.mode = inst->data.interface == INTERFACE_ME ? MODE_EVENT : MODE_STEP;
    return fmi3OK;
}

fmi3Status fmi3EnterEventMode(fmi3Instance instance) {
    Instance *inst = (Instance *)instance;
    if (!ofInterface(inst, "fmi3EnterEventMode", INTERFACE_ME) ||
        !allowed(inst, "fmi3EnterEventMode", MODE_EVENT | MODE_CONTINUOUS_TIME)) {
        return fmi3Error;
    }
    inst->data.mode = MODE_EVENT;
    return fmi3OK;
}

fmi3Status fmi3Terminate(fmi3Instance instance) {
    Instance *inst = (Instance *)instance;
    if (!allowed(inst, "fmi3Terminate", MODE_EVENT | MODE_CONTINUOUS_TIME | MODE_STEP)) {
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
        case VR_X: values[i] = currentState(d); break;
        case VR_DER_X: values[i] = rhs(d->k, currentState(d)); break;
        case VR_K: values[i] = d->k; break;
        case VR_X_START: values[i] = d->x_start; break;
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
    size_t i;
    if (!allowed(inst, "fmi3SetFloat64", BEFORE_INIT_DONE | MODE_EVENT | MODE_CONTINUOUS_TIME | MODE_STEP)) {
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
        case VR_K:
            if (!(d->mode & (BEFORE_INIT_DONE | MODE_EVENT | MODE_STEP))) {
                return FAIL(inst, "fmi3SetFloat64: the tunable parameter k can only be set in Instantiated, "
                            "Initialization, Event (Model Exchange) or Step (Co-Simulation) Mode.");
            }
            break;
        case VR_X_START:
        case VR_H_INTERNAL:
            if (!(d->mode & BEFORE_INIT_DONE)) {
                return FAIL(inst, "fmi3SetFloat64: x_start and h_internal are fixed parameters: they cannot be set "
                            "after fmi3ExitInitializationMode.");
            }
            if (valueReferences[i] == VR_H_INTERNAL && !(values[i] > 0.0)) {
                return FAIL(inst, "fmi3SetFloat64: h_internal must be > 0 (got %g).", values[i]);
            }
            break;
        case VR_X:
        case VR_DER_X:
            return FAIL(inst, "fmi3SetFloat64: x and der(x) are calculated variables and cannot be set "
                        "(use fmi3SetContinuousStates for the state).");
        case VR_TIME:
            return FAIL(inst, "fmi3SetFloat64: the independent variable time cannot be set.");
        default:
            return FAIL(inst, "fmi3SetFloat64: unknown value reference %u.", (unsigned)valueReferences[i]);
        }
    }
    for (i = 0; i < nValueReferences; i++) {
        switch (valueReferences[i]) {
        case VR_K: d->k = values[i]; break;
        case VR_X_START: d->x_start = values[i]; break;
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
    return FAIL(inst, "%s is not supported by dahlquist: %s", function, reason);
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
    return unsupported(instance, "fmi3EnterStepMode", "the Co-Simulation interface has no event mode "
                       "(fmi3ExitInitializationMode enters Step Mode directly).");
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
    const ModelData *d = (const ModelData *)FMUState;
    if (!allowed(inst, "fmi3SetFMUState", ANY_MODE)) {
        return fmi3Error;
    }
    if (d == NULL) {
        return FAIL(inst, "fmi3SetFMUState: NULL FMU state.");
    }
    if (d->interface != inst->data.interface) {
        return FAIL(inst, "fmi3SetFMUState: the FMU state belongs to an instance of the other interface.");
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
        ((int)read.mode & ~ANY_MODE) != 0 || (read.interface != INTERFACE_ME && read.interface != INTERFACE_CS)) {
        return FAIL(inst, "fmi3DeserializeFMUState: not a serialized dahlquist state.");
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
    if (!ofInterface(inst, "fmi3UpdateDiscreteStates", INTERFACE_ME) ||
        !allowed(inst, "fmi3UpdateDiscreteStates", MODE_EVENT)) {
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
    if (!ofInterface(inst, "fmi3EnterContinuousTimeMode", INTERFACE_ME) ||
        !allowed(inst, "fmi3EnterContinuousTimeMode", MODE_EVENT)) {
        return fmi3Error;
    }
    inst->data.mode = MODE_CONTINUOUS_TIME;
    return fmi3OK;
}

fmi3Status fmi3CompletedIntegratorStep(fmi3Instance instance, fmi3Boolean noSetFMUStatePriorToCurrentPoint,
                                       fmi3Boolean *enterEventMode, fmi3Boolean *terminateSimulation) {
    Instance *inst = (Instance *)instance;
    (void)noSetFMUStatePriorToCurrentPoint;
    if (!ofInterface(inst, "fmi3CompletedIntegratorStep", INTERFACE_ME) ||
        !allowed(inst, "fmi3CompletedIntegratorStep", MODE_CONTINUOUS_TIME)) {
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
    if (!ofInterface(inst, "fmi3SetTime", INTERFACE_ME) ||
        !allowed(inst, "fmi3SetTime", MODE_EVENT | MODE_CONTINUOUS_TIME)) {
        return fmi3Error;
    }
    inst->data.time = time;
    return fmi3OK;
}

fmi3Status fmi3SetContinuousStates(fmi3Instance instance, const fmi3Float64 continuousStates[], size_t nContinuousStates) {
    Instance *inst = (Instance *)instance;
    if (!ofInterface(inst, "fmi3SetContinuousStates", INTERFACE_ME) ||
        !allowed(inst, "fmi3SetContinuousStates", MODE_CONTINUOUS_TIME)) {
        return fmi3Error;
    }
    if (nContinuousStates != N_STATES || continuousStates == NULL) {
        return FAIL(inst, "fmi3SetContinuousStates: expected %d state, got %lu.", N_STATES,
                    (unsigned long)nContinuousStates);
    }
    inst->data.x = continuousStates[0];
    return fmi3OK;
}

fmi3Status fmi3GetContinuousStateDerivatives(fmi3Instance instance, fmi3Float64 derivatives_[], size_t nContinuousStates) {
    Instance *inst = (Instance *)instance;
    if (!ofInterface(inst, "fmi3GetContinuousStateDerivatives", INTERFACE_ME) ||
        !allowed(inst, "fmi3GetContinuousStateDerivatives", ANY_MODE & ~MODE_INSTANTIATED)) {
        return fmi3Error;
    }
    if (nContinuousStates != N_STATES || derivatives_ == NULL) {
        return FAIL(inst, "fmi3GetContinuousStateDerivatives: expected %d state, got %lu.", N_STATES,
                    (unsigned long)nContinuousStates);
    }
    derivatives_[0] = rhs(inst->data.k, currentState(&inst->data));
    return fmi3OK;
}

fmi3Status fmi3GetEventIndicators(fmi3Instance instance, fmi3Float64 eventIndicators[], size_t nEventIndicators) {
    Instance *inst = (Instance *)instance;
    (void)eventIndicators;
    if (!ofInterface(inst, "fmi3GetEventIndicators", INTERFACE_ME) ||
        !allowed(inst, "fmi3GetEventIndicators", ANY_MODE & ~MODE_INSTANTIATED)) {
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
    if (!ofInterface(inst, "fmi3GetContinuousStates", INTERFACE_ME) ||
        !allowed(inst, "fmi3GetContinuousStates", ANY_MODE & ~MODE_INSTANTIATED)) {
        return fmi3Error;
    }
    if (nContinuousStates != N_STATES || continuousStates == NULL) {
        return FAIL(inst, "fmi3GetContinuousStates: expected %d state, got %lu.", N_STATES,
                    (unsigned long)nContinuousStates);
    }
    continuousStates[0] = currentState(&inst->data);
    return fmi3OK;
}

fmi3Status fmi3GetNominalsOfContinuousStates(fmi3Instance instance, fmi3Float64 nominals[], size_t nContinuousStates) {
    Instance *inst = (Instance *)instance;
    if (!ofInterface(inst, "fmi3GetNominalsOfContinuousStates", INTERFACE_ME) ||
        !allowed(inst, "fmi3GetNominalsOfContinuousStates", ANY_MODE)) {
        return fmi3Error;
    }
    if (nContinuousStates != N_STATES || nominals == NULL) {
        return FAIL(inst, "fmi3GetNominalsOfContinuousStates: expected %d state, got %lu.", N_STATES,
                    (unsigned long)nContinuousStates);
    }
    nominals[0] = 1.0;
    return fmi3OK;
}

fmi3Status fmi3GetNumberOfEventIndicators(fmi3Instance instance, size_t *nEventIndicators) {
    Instance *inst = (Instance *)instance;
    if (!ofInterface(inst, "fmi3GetNumberOfEventIndicators", INTERFACE_ME) ||
        !allowed(inst, "fmi3GetNumberOfEventIndicators", ANY_MODE)) {
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
    if (!ofInterface(inst, "fmi3GetNumberOfContinuousStates", INTERFACE_ME) ||
        !allowed(inst, "fmi3GetNumberOfContinuousStates", ANY_MODE)) {
        return fmi3Error;
    }
    if (nContinuousStates == NULL) {
        return FAIL(inst, "fmi3GetNumberOfContinuousStates: NULL argument.");
    }
    *nContinuousStates = N_STATES;
    return fmi3OK;
}

/* ---------------------------------------------------------------- Co-Simulation */

fmi3Status fmi3DoStep(fmi3Instance instance, fmi3Float64 currentCommunicationPoint, fmi3Float64 communicationStepSize,
                      fmi3Boolean noSetFMUStatePriorToCurrentPoint, fmi3Boolean *eventHandlingNeeded,
                      fmi3Boolean *terminateSimulation, fmi3Boolean *earlyReturn, fmi3Float64 *lastSuccessfulTime) {
    Instance *inst = (Instance *)instance;
    ModelData *d;
    double H = communicationStepSize, s, x, k, k1, k2, k3, k4, ratio;
    unsigned long n, i;
    (void)noSetFMUStatePriorToCurrentPoint;
    if (!ofInterface(inst, "fmi3DoStep", INTERFACE_CS) || !allowed(inst, "fmi3DoStep", MODE_STEP)) {
        return fmi3Error;
    }
    if (eventHandlingNeeded == NULL || terminateSimulation == NULL || earlyReturn == NULL || lastSuccessfulTime == NULL) {
        return FAIL(inst, "fmi3DoStep: NULL argument.");
    }
    d = &inst->data;
    if (!(H > 0.0)) {
        return FAIL(inst, "fmi3DoStep: communicationStepSize must be > 0 (got %g).", H);
    }
    if (fabs(currentCommunicationPoint - d->time) > 1e-9 * fmax(1.0, fabs(d->time))) {
        return FAIL(inst, "fmi3DoStep: currentCommunicationPoint %.17g is not the FMU's time %.17g.",
                    currentCommunicationPoint, d->time);
    }
    /* n = ceil(H / h) equal substeps; a ratio at most 1e-9 above an integer is that integer */
    ratio = H / d->h_internal;
    n = (unsigned long)ceil(ratio - 1e-9 * fmax(1.0, ratio));
    if (n < 1) {
        n = 1;
    }
    s = H / (double)n;
    x = d->x;
    k = d->k;
    for (i = 0; i < n; i++) {
        /* classical RK4 (autonomous right-hand side) */
        k1 = rhs(k, x);
        k2 = rhs(k, x + 0.5 * s * k1);
        k3 = rhs(k, x + 0.5 * s * k2);
        k4 = rhs(k, x + s * k3);
        x += s / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4);
    }
    d->x = x;
    d->time = currentCommunicationPoint + H;
    *eventHandlingNeeded = fmi3False;
    *terminateSimulation = fmi3False;
    *earlyReturn = fmi3False;
    *lastSuccessfulTime = d->time;
    return fmi3OK;
}
