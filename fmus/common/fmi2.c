/*
 * The FMI 2.0 layer of the hand-written test FMUs: every function of fmi2Functions.h (FMI 2.0
 * standard, chapters 2 to 4) over the shared instance (instance.c) and the model (model.h).
 * Co-Simulation: canHandleVariableCommunicationStepSize, no input interpolation, no output
 * derivatives, no asynchronous steps (fmi2CancelStep and the status functions return Error).
 */
#include <stdio.h>
#include <string.h>

#include "fmi2Functions.h"
#include "config.h"
#include "instance.h"

typedef struct {
    Instance base;
    fmi2CallbackFunctions cb;
} Instance2;

static void emit(const Instance *inst, int status, const char *category, const char *message) {
    const Instance2 *i2 = (const Instance2 *)inst;
    if (i2->cb.logger != NULL) {
        i2->cb.logger(i2->cb.componentEnvironment, inst->name, (fmi2Status)status, category, "%s", message);
    }
}

const char *fmi2GetTypesPlatform(void) { return fmi2TypesPlatform; }
const char *fmi2GetVersion(void) { return fmi2Version; }

fmi2Status fmi2SetDebugLogging(fmi2Component c, fmi2Boolean loggingOn, size_t n, const fmi2String categories[]) {
    return (fmi2Status)setDebugLogging(c, "fmi2SetDebugLogging", loggingOn, n, categories);
}

fmi2Component fmi2Instantiate(fmi2String name, fmi2Type type, fmi2String guid, fmi2String resources,
                              const fmi2CallbackFunctions *cb, fmi2Boolean visible, fmi2Boolean loggingOn) {
    Instance2 *inst;
    const char *problem = NULL;
    (void)resources, (void)visible; /* no resources, no user interface */
    if (cb == NULL || cb->allocateMemory == NULL || cb->freeMemory == NULL) return NULL;
    if (name == NULL || name[0] == '\0') problem = "missing instance name";
    else if (!(type == fmi2ModelExchange ? HAS_ME : type == fmi2CoSimulation && HAS_CS))
        problem = MODEL_NAME " does not have this interface (fmuType)";
    else if (guid == NULL || strcmp(guid, INSTANTIATION_TOKEN) != 0) problem = "wrong GUID (expected " INSTANTIATION_TOKEN ")";
    if (problem != NULL) {
        if (cb->logger) cb->logger(cb->componentEnvironment, name ? name : MODEL_NAME, fmi2Error, "logStatusError",
                                   "fmi2Instantiate: %s.", problem);
        return NULL;
    }
    if ((inst = (Instance2 *)cb->allocateMemory(1, sizeof(Instance2))) == NULL) return NULL;
    snprintf(inst->base.name, sizeof inst->base.name, "%s", name);
    inst->cb = *cb;
    inst->base.emit = emit;
    inst->base.allocate = cb->allocateMemory;
    inst->base.release = cb->freeMemory;
    inst->base.loggingOn = loggingOn;
    inst->base.d.isCS = type == fmi2CoSimulation;
    resetInstance(&inst->base);
    return inst;
}

void fmi2FreeInstance(fmi2Component c) {
    if (c != NULL) ((Instance2 *)c)->cb.freeMemory(c);
}

fmi2Status fmi2SetupExperiment(fmi2Component c, fmi2Boolean toleranceDefined, fmi2Real tolerance, fmi2Real startTime,
                               fmi2Boolean stopTimeDefined, fmi2Real stopTime) {
    (void)toleranceDefined, (void)tolerance; /* ME: the importer's solver; CS: the fixed step */
    return (fmi2Status)enterInitialization(c, "fmi2SetupExperiment", INSTANTIATED, startTime, stopTimeDefined, stopTime);
}

fmi2Status fmi2EnterInitializationMode(fmi2Component c) {
    return (fmi2Status)setMode(c, "fmi2EnterInitializationMode", -1, INSTANTIATED, INITIALIZATION);
}
fmi2Status fmi2ExitInitializationMode(fmi2Component c) {
    return (fmi2Status)exitInitialization_(c, "fmi2ExitInitializationMode");
}
fmi2Status fmi2Terminate(fmi2Component c) {
    return (fmi2Status)setMode(c, "fmi2Terminate", -1, EVENT_MODE | CONTINUOUS_TIME | STEP_MODE, TERMINATED);
}
fmi2Status fmi2Reset(fmi2Component c) { return (fmi2Status)setMode(c, "fmi2Reset", -1, ANY_MODE, INSTANTIATED); }

#define GET_SET(T, TYPE, CTYPE)                                                                                       \
    fmi2Status fmi2Get##T(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2##T values[]) {               \
        return (fmi2Status)getValues(c, "fmi2Get" #T, TYPE, CTYPE, vr, n, values, n);                                 \
    }                                                                                                                 \
    fmi2Status fmi2Set##T(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2##T values[]) {         \
        return (fmi2Status)setValues(c, "fmi2Set" #T, TYPE, CTYPE, vr, n, values, n);                                 \
    }
GET_SET(Real, T_FLOAT64, C_DOUBLE)
GET_SET(Integer, T_INT32, C_INT)
GET_SET(Boolean, T_BOOLEAN, C_INT)

fmi2Status fmi2GetString(fmi2Component c, const fmi2ValueReference vr[], size_t n, fmi2String values[]) {
    (void)vr, (void)values;
    return (fmi2Status)noValues(c, "fmi2GetString", n);
}
fmi2Status fmi2SetString(fmi2Component c, const fmi2ValueReference vr[], size_t n, const fmi2String values[]) {
    (void)vr, (void)values;
    return (fmi2Status)noValues(c, "fmi2SetString", n);
}

fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate *state) {
    return (fmi2Status)getState(c, "fmi2GetFMUstate", state);
}
fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate state) {
    return (fmi2Status)setState(c, "fmi2SetFMUstate", state);
}
fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate *state) {
    return (fmi2Status)freeState(c, "fmi2FreeFMUstate", state);
}
fmi2Status fmi2SerializedFMUstateSize(fmi2Component c, fmi2FMUstate state, size_t *size) {
    return (fmi2Status)serializedStateSize(c, "fmi2SerializedFMUstateSize", state, size);
}
fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate state, fmi2Byte bytes[], size_t size) {
    return (fmi2Status)serializeState(c, "fmi2SerializeFMUstate", state, (unsigned char *)bytes, size);
}
fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte bytes[], size_t size, fmi2FMUstate *state) {
    return (fmi2Status)deserializeState(c, "fmi2DeSerializeFMUstate", (const unsigned char *)bytes, size, state);
}

fmi2Status fmi2GetDirectionalDerivative(fmi2Component c, const fmi2ValueReference unknowns[], size_t nUnknown,
                                        const fmi2ValueReference knowns[], size_t nKnown, const fmi2Real seed[],
                                        fmi2Real sensitivity[]) {
    return (fmi2Status)directionalDerivative_(c, "fmi2GetDirectionalDerivative", unknowns, nUnknown, knowns, nKnown,
                                              seed, sensitivity);
}

/* ---------------------------------------------------------------- Model Exchange */

fmi2Status fmi2EnterEventMode(fmi2Component c) {
    return (fmi2Status)setMode(c, "fmi2EnterEventMode", 0, EVENT_MODE | CONTINUOUS_TIME, EVENT_MODE);
}
fmi2Status fmi2EnterContinuousTimeMode(fmi2Component c) {
    return (fmi2Status)setMode(c, "fmi2EnterContinuousTimeMode", 0, EVENT_MODE, CONTINUOUS_TIME);
}

fmi2Status fmi2NewDiscreteStates(fmi2Component c, fmi2EventInfo *info) {
    EventInfo event = {0, 0, 0, 0.0};
    if (info == NULL) return (fmi2Status)refuse(c, "fmi2NewDiscreteStates", "NULL argument.");
    if (updateDiscreteStates(c, "fmi2NewDiscreteStates", &event) != STATUS_OK) return fmi2Error;
    info->newDiscreteStatesNeeded = event.newDiscreteStatesNeeded ? fmi2True : fmi2False;
    info->terminateSimulation = info->nominalsOfContinuousStatesChanged = fmi2False;
    info->valuesOfContinuousStatesChanged = event.valuesOfContinuousStatesChanged ? fmi2True : fmi2False;
    info->nextEventTimeDefined = event.nextEventTimeDefined ? fmi2True : fmi2False;
    info->nextEventTime = event.nextEventTime;
    return fmi2OK;
}

fmi2Status fmi2CompletedIntegratorStep(fmi2Component c, fmi2Boolean noSetPrior, fmi2Boolean *enterEventMode,
                                       fmi2Boolean *terminate) {
    (void)noSetPrior;
    if (enterEventMode == NULL || terminate == NULL) return (fmi2Status)refuse(c, "fmi2CompletedIntegratorStep", "NULL argument.");
    *terminate = fmi2False;
    return (fmi2Status)completedIntegratorStep(c, "fmi2CompletedIntegratorStep", enterEventMode);
}

fmi2Status fmi2SetTime(fmi2Component c, fmi2Real time) { return (fmi2Status)setTime(c, "fmi2SetTime", time); }

fmi2Status fmi2SetContinuousStates(fmi2Component c, const fmi2Real x[], size_t n) {
    return (fmi2Status)vectorCall(c, "fmi2SetContinuousStates", SET_STATES, (double *)x, n);
}
fmi2Status fmi2GetDerivatives(fmi2Component c, fmi2Real dx[], size_t n) {
    return (fmi2Status)vectorCall(c, "fmi2GetDerivatives", GET_DERIVATIVES, dx, n);
}
fmi2Status fmi2GetEventIndicators(fmi2Component c, fmi2Real z[], size_t n) {
    return (fmi2Status)vectorCall(c, "fmi2GetEventIndicators", GET_INDICATORS, z, n);
}
fmi2Status fmi2GetContinuousStates(fmi2Component c, fmi2Real x[], size_t n) {
    return (fmi2Status)vectorCall(c, "fmi2GetContinuousStates", GET_STATES, x, n);
}
fmi2Status fmi2GetNominalsOfContinuousStates(fmi2Component c, fmi2Real nominal[], size_t n) {
    return (fmi2Status)vectorCall(c, "fmi2GetNominalsOfContinuousStates", GET_NOMINALS, nominal, n);
}

/* ---------------------------------------------------------------- Co-Simulation */

fmi2Status fmi2DoStep(fmi2Component c, fmi2Real t, fmi2Real h, fmi2Boolean noSetPrior) {
    (void)noSetPrior;
    return (fmi2Status)doStep_(c, "fmi2DoStep", t, h, 0);
}

static fmi2Status notAsync(fmi2Component c, const char *function) {
    return of(c, function, 1, ANY_MODE) == NULL ? fmi2Error : (fmi2Status)refuse(c, function,
        "fmi2DoStep never returns fmi2Pending or fmi2Discard (canRunAsynchronuously=\"false\").");
}
fmi2Status fmi2CancelStep(fmi2Component c) { return notAsync(c, "fmi2CancelStep"); }
#define STATUS(T, V)                                                                                                  \
    fmi2Status fmi2Get##T##Status(fmi2Component c, const fmi2StatusKind s, V *value) {                               \
        (void)s, (void)value;                                                                                         \
        return notAsync(c, "fmi2Get" #T "Status");                                                                    \
    }
STATUS(, fmi2Status)
STATUS(Real, fmi2Real)
STATUS(Integer, fmi2Integer)
STATUS(Boolean, fmi2Boolean)
STATUS(String, fmi2String)

fmi2Status fmi2SetRealInputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t n,
                                       const fmi2Integer order[], const fmi2Real value[]) {
#ifdef HAS_INPUT_DERIVATIVES /* canInterpolateInputs="true": model.c takes them (input_ramp_cs) */
    Instance *inst = of(c, "fmi2SetRealInputDerivatives", 1, INSTANTIATED | INITIALIZATION | STEP_MODE);
    size_t i;
    if (inst == NULL) return fmi2Error;
    for (i = 0; i < n; i++) {
        const char *problem = vr[i] < N_VARIABLES && variables[vr[i]].kind == INPUT
            ? setInputDerivative(&inst->d, vr[i], order[i], value[i]) : "not a Real input";
        if (problem != NULL) return (fmi2Status)FAIL(inst, "fmi2SetRealInputDerivatives: vr %u: %s", vr[i], problem);
    }
    return fmi2OK;
#else
    (void)vr, (void)n, (void)order, (void)value;
    return of(c, "fmi2SetRealInputDerivatives", 1, ANY_MODE) == NULL ? fmi2Error : (fmi2Status)refuse(c,
        "fmi2SetRealInputDerivatives", "the FMU cannot interpolate inputs (canInterpolateInputs=\"false\").");
#endif
}
fmi2Status fmi2GetRealOutputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t n,
                                        const fmi2Integer order[], fmi2Real value[]) {
    (void)vr, (void)n, (void)order, (void)value;
    return of(c, "fmi2GetRealOutputDerivatives", 1, ANY_MODE) == NULL ? fmi2Error : (fmi2Status)refuse(c,
        "fmi2GetRealOutputDerivatives", "maxOutputDerivativeOrder is 0.");
}
