/*
 * The FMI 3.0 layer of the hand-written test FMUs: every function of fmi3Functions.h (FMI 3.0
 * standard, sections 2 to 4) over the shared instance (instance.c) and the model (model.h).
 * Co-Simulation without event mode (fmi3ExitInitializationMode enters Step Mode), early return or
 * intermediate update; Scheduled Execution, clocks, configuration mode, adjoint derivatives and
 * variable dependencies return fmi3Error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmi3Functions.h"
#include "config.h"
#include "instance.h"

#ifndef ZERO_STEP_ALLOWED
#define ZERO_STEP_ALLOWED 0 /* whether fmi3DoStep accepts communicationStepSize = 0 */
#endif

typedef struct {
    Instance base;
    fmi3InstanceEnvironment environment;
    fmi3LogMessageCallback logger;
} Instance3;

static void emit(const Instance *inst, int status, const char *category, const char *message) {
    const Instance3 *i3 = (const Instance3 *)inst;
    if (i3->logger != NULL) i3->logger(i3->environment, (fmi3Status)status, category, message);
}

const char *fmi3GetVersion(void) { return fmi3Version; }

fmi3Status fmi3SetDebugLogging(fmi3Instance c, fmi3Boolean loggingOn, size_t n, const fmi3String categories[]) {
    return (fmi3Status)setDebugLogging(c, "fmi3SetDebugLogging", loggingOn, n, categories);
}

static fmi3Instance instantiate(const char *name, const char *token, int cs, const char *refused, fmi3Boolean loggingOn,
                                fmi3InstanceEnvironment environment, fmi3LogMessageCallback logger) {
    Instance3 *inst = NULL;
    const char *problem = refused;
    if (problem == NULL && (name == NULL || name[0] == '\0')) problem = "missing instance name";
    if (problem == NULL && (token == NULL || strcmp(token, INSTANTIATION_TOKEN) != 0)) {
        problem = "wrong instantiation token (expected " INSTANTIATION_TOKEN ")";
    }
    if (problem == NULL && (inst = (Instance3 *)calloc(1, sizeof(Instance3))) != NULL) {
        snprintf(inst->base.name, sizeof inst->base.name, "%s", name);
        inst->environment = environment;
        inst->logger = logger;
        inst->base.emit = emit;
        inst->base.allocate = calloc;
        inst->base.release = free;
        inst->base.loggingOn = loggingOn;
        inst->base.d.isCS = cs;
        resetInstance(&inst->base);
        return inst;
    }
    if (logger != NULL) logger(environment, fmi3Error, "logStatusError", problem ? problem : "out of memory");
    return NULL;
}

fmi3Instance fmi3InstantiateModelExchange(fmi3String name, fmi3String token, fmi3String resourcePath, fmi3Boolean visible,
                                          fmi3Boolean loggingOn, fmi3InstanceEnvironment environment,
                                          fmi3LogMessageCallback logger) {
    (void)resourcePath, (void)visible; /* no resources, no user interface */
    return instantiate(name, token, 0, HAS_ME ? NULL : MODEL_NAME " has no Model Exchange interface", loggingOn,
                       environment, logger);
}

fmi3Instance fmi3InstantiateCoSimulation(fmi3String name, fmi3String token, fmi3String resourcePath, fmi3Boolean visible,
                                         fmi3Boolean loggingOn, fmi3Boolean eventModeUsed, fmi3Boolean earlyReturnAllowed,
                                         const fmi3ValueReference required[], size_t nRequired,
                                         fmi3InstanceEnvironment environment, fmi3LogMessageCallback logger,
                                         fmi3IntermediateUpdateCallback intermediateUpdate) {
    const char *refused = !HAS_CS ? MODEL_NAME " has no Co-Simulation interface"
                          : eventModeUsed ? "the FMU has no event mode (hasEventMode=\"false\")"
                          : nRequired > 0 ? "the FMU provides no intermediate variables" : NULL;
    (void)resourcePath, (void)visible, (void)earlyReturnAllowed, (void)required, (void)intermediateUpdate;
    return instantiate(name, token, 1, refused, loggingOn, environment, logger);
}

fmi3Instance fmi3InstantiateScheduledExecution(fmi3String name, fmi3String token, fmi3String resourcePath,
                                               fmi3Boolean visible, fmi3Boolean loggingOn,
                                               fmi3InstanceEnvironment environment, fmi3LogMessageCallback logger,
                                               fmi3ClockUpdateCallback clockUpdate, fmi3LockPreemptionCallback lock,
                                               fmi3UnlockPreemptionCallback unlock) {
    (void)token, (void)resourcePath, (void)visible, (void)clockUpdate, (void)lock, (void)unlock;
    return instantiate(name, NULL, 0, MODEL_NAME " has no Scheduled Execution interface", loggingOn, environment,
                       logger);
}

void fmi3FreeInstance(fmi3Instance c) { free(c); }

fmi3Status fmi3EnterInitializationMode(fmi3Instance c, fmi3Boolean toleranceDefined, fmi3Float64 tolerance,
                                       fmi3Float64 startTime, fmi3Boolean stopTimeDefined, fmi3Float64 stopTime) {
    (void)toleranceDefined, (void)tolerance; /* ME: the importer's solver; CS: the fixed step */
    return (fmi3Status)enterInitialization(c, "fmi3EnterInitializationMode", INITIALIZATION, startTime, stopTimeDefined,
                                           stopTime);
}

fmi3Status fmi3ExitInitializationMode(fmi3Instance c) {
    return (fmi3Status)exitInitialization_(c, "fmi3ExitInitializationMode");
}
fmi3Status fmi3EnterEventMode(fmi3Instance c) {
    return (fmi3Status)setMode(c, "fmi3EnterEventMode", 0, EVENT_MODE | CONTINUOUS_TIME, EVENT_MODE);
}
fmi3Status fmi3Terminate(fmi3Instance c) {
    return (fmi3Status)setMode(c, "fmi3Terminate", -1, EVENT_MODE | CONTINUOUS_TIME | STEP_MODE, TERMINATED);
}
fmi3Status fmi3Reset(fmi3Instance c) { return (fmi3Status)setMode(c, "fmi3Reset", -1, ANY_MODE, INSTANTIATED); }

/* ---------------------------------------------------------------- values */

#define GET_SET(T, TYPE, CTYPE)                                                                                       \
    fmi3Status fmi3Get##T(fmi3Instance c, const fmi3ValueReference vr[], size_t n, fmi3##T values[], size_t nValues) { \
        return (fmi3Status)getValues(c, "fmi3Get" #T, TYPE, CTYPE, vr, n, values, nValues);                           \
    }                                                                                                                 \
    fmi3Status fmi3Set##T(fmi3Instance c, const fmi3ValueReference vr[], size_t n, const fmi3##T values[],            \
                          size_t nValues) {                                                                           \
        return (fmi3Status)setValues(c, "fmi3Set" #T, TYPE, CTYPE, vr, n, values, nValues);                           \
    }
GET_SET(Float64, T_FLOAT64, C_DOUBLE)
GET_SET(Float32, T_FLOAT32, C_FLOAT)
GET_SET(Int32, T_INT32, C_INT)
GET_SET(UInt8, T_UINT8, C_UINT8)
GET_SET(Boolean, T_BOOLEAN, C_BOOL)

/* Types none of the models has: only empty calls succeed. */
#define NONE(T)                                                                                                       \
    fmi3Status fmi3Get##T(fmi3Instance c, const fmi3ValueReference vr[], size_t n, fmi3##T values[], size_t nValues) { \
        (void)vr, (void)values, (void)nValues;                                                                        \
        return (fmi3Status)noValues(c, "fmi3Get" #T, n);                                                              \
    }                                                                                                                 \
    fmi3Status fmi3Set##T(fmi3Instance c, const fmi3ValueReference vr[], size_t n, const fmi3##T values[],            \
                          size_t nValues) {                                                                           \
        (void)vr, (void)values, (void)nValues;                                                                        \
        return (fmi3Status)noValues(c, "fmi3Set" #T, n);                                                              \
    }
NONE(Int8)
NONE(UInt16)
NONE(Int16)
NONE(UInt32)
NONE(Int64)
NONE(UInt64)
NONE(String)

fmi3Status fmi3GetBinary(fmi3Instance c, const fmi3ValueReference vr[], size_t n, size_t sizes[], fmi3Binary values[],
                         size_t nValues) {
    (void)vr, (void)sizes, (void)values, (void)nValues;
    return (fmi3Status)noValues(c, "fmi3GetBinary", n);
}
fmi3Status fmi3SetBinary(fmi3Instance c, const fmi3ValueReference vr[], size_t n, const size_t sizes[],
                         const fmi3Binary values[], size_t nValues) {
    (void)vr, (void)sizes, (void)values, (void)nValues;
    return (fmi3Status)noValues(c, "fmi3SetBinary", n);
}
fmi3Status fmi3GetClock(fmi3Instance c, const fmi3ValueReference vr[], size_t n, fmi3Clock values[]) {
    (void)vr, (void)values;
    return (fmi3Status)noValues(c, "fmi3GetClock", n);
}
fmi3Status fmi3SetClock(fmi3Instance c, const fmi3ValueReference vr[], size_t n, const fmi3Clock values[]) {
    (void)vr, (void)values;
    return (fmi3Status)noValues(c, "fmi3SetClock", n);
}

/* ---------------------------------------------------------------- FMU state */

fmi3Status fmi3GetFMUState(fmi3Instance c, fmi3FMUState *state) {
    return (fmi3Status)getState(c, "fmi3GetFMUState", state);
}
fmi3Status fmi3SetFMUState(fmi3Instance c, fmi3FMUState state) {
    return (fmi3Status)setState(c, "fmi3SetFMUState", state);
}
fmi3Status fmi3FreeFMUState(fmi3Instance c, fmi3FMUState *state) {
    return (fmi3Status)freeState(c, "fmi3FreeFMUState", state);
}
fmi3Status fmi3SerializedFMUStateSize(fmi3Instance c, fmi3FMUState state, size_t *size) {
    return (fmi3Status)serializedStateSize(c, "fmi3SerializedFMUStateSize", state, size);
}
fmi3Status fmi3SerializeFMUState(fmi3Instance c, fmi3FMUState state, fmi3Byte bytes[], size_t size) {
    return (fmi3Status)serializeState(c, "fmi3SerializeFMUState", state, bytes, size);
}
fmi3Status fmi3DeserializeFMUState(fmi3Instance c, const fmi3Byte bytes[], size_t size, fmi3FMUState *state) {
    return (fmi3Status)deserializeState(c, "fmi3DeserializeFMUState", bytes, size, state);
}

/* ---------------------------------------------------------------- derivatives and what does not apply */

fmi3Status fmi3GetDirectionalDerivative(fmi3Instance c, const fmi3ValueReference unknowns[], size_t nUnknowns,
                                        const fmi3ValueReference knowns[], size_t nKnowns, const fmi3Float64 seed[],
                                        size_t nSeed, fmi3Float64 sensitivity[], size_t nSensitivity) {
    if (nSeed != nKnowns || nSensitivity != nUnknowns) {
        return (fmi3Status)refuse(c, "fmi3GetDirectionalDerivative", "nSeed != nKnowns or nSensitivity != nUnknowns.");
    }
    return (fmi3Status)directionalDerivative_(c, "fmi3GetDirectionalDerivative", unknowns, nUnknowns, knowns, nKnowns,
                                              seed, sensitivity);
}

#define REFUSED(function, why, ...)                                                                                   \
    fmi3Status function(fmi3Instance c, __VA_ARGS__) {                                                                \
        return (fmi3Status)refuse(c, #function, why);                                                                 \
    }
#define REFUSED0(function, why)                                                                                       \
    fmi3Status function(fmi3Instance c) { return (fmi3Status)refuse(c, #function, why); }
#define UNUSED __attribute__((unused))
#define NO_CLOCKS "the model has no clocks."
REFUSED(fmi3GetAdjointDerivative, "no adjoint derivatives (providesAdjointDerivatives=\"false\").",
        const fmi3ValueReference u[] UNUSED, size_t nu UNUSED, const fmi3ValueReference k[] UNUSED, size_t nk UNUSED,
        const fmi3Float64 seed[] UNUSED, size_t ns UNUSED, fmi3Float64 sensitivity[] UNUSED, size_t n UNUSED)
REFUSED(fmi3GetNumberOfVariableDependencies, "no variable dependencies (see the ModelStructure).",
        fmi3ValueReference vr UNUSED, size_t *n UNUSED)
REFUSED(fmi3GetVariableDependencies, "no variable dependencies (see the ModelStructure).", fmi3ValueReference vr UNUSED,
        size_t e[] UNUSED, fmi3ValueReference i[] UNUSED, size_t ei[] UNUSED, fmi3DependencyKind k[] UNUSED,
        size_t n UNUSED)
REFUSED0(fmi3EnterConfigurationMode, "no structural parameters.")
REFUSED0(fmi3ExitConfigurationMode, "no structural parameters.")
REFUSED(fmi3GetIntervalDecimal, NO_CLOCKS, const fmi3ValueReference vr[] UNUSED, size_t n UNUSED,
        fmi3Float64 intervals[] UNUSED, fmi3IntervalQualifier q[] UNUSED)
REFUSED(fmi3GetIntervalFraction, NO_CLOCKS, const fmi3ValueReference vr[] UNUSED, size_t n UNUSED,
        fmi3UInt64 counters[] UNUSED, fmi3UInt64 resolutions[] UNUSED, fmi3IntervalQualifier q[] UNUSED)
REFUSED(fmi3GetShiftDecimal, NO_CLOCKS, const fmi3ValueReference vr[] UNUSED, size_t n UNUSED,
        fmi3Float64 shifts[] UNUSED)
REFUSED(fmi3GetShiftFraction, NO_CLOCKS, const fmi3ValueReference vr[] UNUSED, size_t n UNUSED,
        fmi3UInt64 counters[] UNUSED, fmi3UInt64 resolutions[] UNUSED)
REFUSED(fmi3SetIntervalDecimal, NO_CLOCKS, const fmi3ValueReference vr[] UNUSED, size_t n UNUSED,
        const fmi3Float64 intervals[] UNUSED)
REFUSED(fmi3SetIntervalFraction, NO_CLOCKS, const fmi3ValueReference vr[] UNUSED, size_t n UNUSED,
        const fmi3UInt64 counters[] UNUSED, const fmi3UInt64 resolutions[] UNUSED)
REFUSED(fmi3SetShiftDecimal, NO_CLOCKS, const fmi3ValueReference vr[] UNUSED, size_t n UNUSED,
        const fmi3Float64 shifts[] UNUSED)
REFUSED(fmi3SetShiftFraction, NO_CLOCKS, const fmi3ValueReference vr[] UNUSED, size_t n UNUSED,
        const fmi3UInt64 counters[] UNUSED, const fmi3UInt64 resolutions[] UNUSED)
REFUSED0(fmi3EvaluateDiscreteStates, "providesEvaluateDiscreteStates=\"false\".")
REFUSED(fmi3ActivateModelPartition, "no Scheduled Execution interface.", fmi3ValueReference clock UNUSED,
        fmi3Float64 activationTime UNUSED)
REFUSED0(fmi3EnterStepMode, "the FMU has no event mode: fmi3ExitInitializationMode enters Step Mode.")
REFUSED(fmi3GetOutputDerivatives, "maxOutputDerivativeOrder is 0.", const fmi3ValueReference vr[] UNUSED,
        size_t n UNUSED, const fmi3Int32 orders[] UNUSED, fmi3Float64 values[] UNUSED, size_t nValues UNUSED)

/* ---------------------------------------------------------------- Model Exchange */

fmi3Status fmi3UpdateDiscreteStates(fmi3Instance c, fmi3Boolean *needUpdate, fmi3Boolean *terminate,
                                    fmi3Boolean *nominalsChanged, fmi3Boolean *valuesChanged,
                                    fmi3Boolean *nextEventTimeDefined, fmi3Float64 *nextEventTime) {
    EventInfo event = {0, 0, 0, 0.0};
    if (!needUpdate || !terminate || !nominalsChanged || !valuesChanged || !nextEventTimeDefined || !nextEventTime) {
        return (fmi3Status)refuse(c, "fmi3UpdateDiscreteStates", "NULL argument.");
    }
    if (updateDiscreteStates(c, "fmi3UpdateDiscreteStates", &event) != STATUS_OK) return fmi3Error;
    *needUpdate = event.newDiscreteStatesNeeded != 0;
    *terminate = *nominalsChanged = fmi3False;
    *valuesChanged = event.valuesOfContinuousStatesChanged != 0;
    *nextEventTimeDefined = event.nextEventTimeDefined != 0;
    *nextEventTime = event.nextEventTime;
    return fmi3OK;
}

fmi3Status fmi3EnterContinuousTimeMode(fmi3Instance c) {
    return (fmi3Status)setMode(c, "fmi3EnterContinuousTimeMode", 0, EVENT_MODE, CONTINUOUS_TIME);
}

fmi3Status fmi3CompletedIntegratorStep(fmi3Instance c, fmi3Boolean noSetPrior, fmi3Boolean *enterEventMode,
                                       fmi3Boolean *terminate) {
    int event = 0;
    (void)noSetPrior;
    if (enterEventMode == NULL || terminate == NULL) return (fmi3Status)refuse(c, "fmi3CompletedIntegratorStep", "NULL argument.");
    if (completedIntegratorStep(c, "fmi3CompletedIntegratorStep", &event) != STATUS_OK) return fmi3Error;
    *enterEventMode = event != 0;
    *terminate = fmi3False;
    return fmi3OK;
}

fmi3Status fmi3SetTime(fmi3Instance c, fmi3Float64 time) { return (fmi3Status)setTime(c, "fmi3SetTime", time); }

fmi3Status fmi3SetContinuousStates(fmi3Instance c, const fmi3Float64 x[], size_t n) {
    return (fmi3Status)vectorCall(c, "fmi3SetContinuousStates", SET_STATES, (double *)x, n);
}
fmi3Status fmi3GetContinuousStateDerivatives(fmi3Instance c, fmi3Float64 dx[], size_t n) {
    return (fmi3Status)vectorCall(c, "fmi3GetContinuousStateDerivatives", GET_DERIVATIVES, dx, n);
}
fmi3Status fmi3GetEventIndicators(fmi3Instance c, fmi3Float64 z[], size_t n) {
    return (fmi3Status)vectorCall(c, "fmi3GetEventIndicators", GET_INDICATORS, z, n);
}
fmi3Status fmi3GetContinuousStates(fmi3Instance c, fmi3Float64 x[], size_t n) {
    return (fmi3Status)vectorCall(c, "fmi3GetContinuousStates", GET_STATES, x, n);
}
fmi3Status fmi3GetNominalsOfContinuousStates(fmi3Instance c, fmi3Float64 nominal[], size_t n) {
    return (fmi3Status)vectorCall(c, "fmi3GetNominalsOfContinuousStates", GET_NOMINALS, nominal, n);
}

fmi3Status fmi3GetNumberOfEventIndicators(fmi3Instance c, size_t *n) {
    if (allowed(c, "fmi3GetNumberOfEventIndicators", ANY_MODE) == NULL || n == NULL) return fmi3Error;
    *n = N_EVENT_INDICATORS;
    return fmi3OK;
}

fmi3Status fmi3GetNumberOfContinuousStates(fmi3Instance c, size_t *n) {
    if (allowed(c, "fmi3GetNumberOfContinuousStates", ANY_MODE) == NULL || n == NULL) return fmi3Error;
    *n = N_STATES;
    return fmi3OK;
}

/* ---------------------------------------------------------------- Co-Simulation */

fmi3Status fmi3DoStep(fmi3Instance c, fmi3Float64 t, fmi3Float64 h, fmi3Boolean noSetPrior, fmi3Boolean *eventNeeded,
                      fmi3Boolean *terminate, fmi3Boolean *earlyReturn, fmi3Float64 *lastSuccessfulTime) {
    (void)noSetPrior;
    if (!eventNeeded || !terminate || !earlyReturn || !lastSuccessfulTime) {
        return (fmi3Status)refuse(c, "fmi3DoStep", "NULL argument.");
    }
    if (doStep_(c, "fmi3DoStep", t, h, ZERO_STEP_ALLOWED) != STATUS_OK) return fmi3Error;
    *eventNeeded = *terminate = *earlyReturn = fmi3False;
    *lastSuccessfulTime = ((Instance *)c)->d.time;
    return fmi3OK;
}
