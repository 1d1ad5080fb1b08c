/* fmi-adjoint FMU runtime: FMI 2.0 Co-Simulation interface over the HHT engine, and Model
 * Exchange over the core of fa_fmu_me.h (an instance of either type; FMU states of both).
 *
 * Value references: 1 + k = parameter/input k, 1 + FA_NP + j = output j (fa_fmu_common.h).
 * Log categories: "logEvents", "logStatusError".  Every variable type other than Real is
 * not supported.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmi2Functions.h"

#include "fa_fmu_common.h"
#include "fmu_config.h"
#include "model.h"

#ifndef FA_INSTANTIATION_TOKEN
#error "fmu_config.h must define FA_INSTANTIATION_TOKEN"
#endif

typedef struct {
    fa_fmu base; /* first member: an fa_fmi2 * is an fa_fmu * */
    fmi2CallbackLogger logger;
    fmi2ComponentEnvironment environment;
    fa_me *me;   /* Model Exchange instance, NULL for Co-Simulation */
} fa_fmi2;
#define FA_ME_OF(f) (((fa_fmi2 *)(f))->me)

/* The FMI 2 logger formats its message like printf: '%' is sent as "%%". */
static void fa_fmi2_send(fmi2CallbackLogger logger, fmi2ComponentEnvironment environment, const char *name,
                         fa_status status, const char *category, const char *message)
{
    if (!logger) return;
    char escaped[2048];
    size_t j = 0;
    for (size_t i = 0; message[i] && j + 3 < sizeof escaped; ++i) {
        if (message[i] == '%') escaped[j++] = '%';
        escaped[j++] = message[i];
    }
    escaped[j] = '\0';
    logger(environment, name ? name : "", (fmi2Status)status, category, escaped);
}

static void fa_fmi2_emit(const fa_fmu *f, fa_status status, const char *category, const char *message)
{
    const fa_fmi2 *instance = (const fa_fmi2 *)f;
    fa_fmi2_send(instance->logger, instance->environment, f->name, status, category, message);
}

/* A status kind that this FMU does not provide: logged, fmi2Discard. */
static fmi2Status fa_fmi2_no_status(const fa_fmu *f, const char *function, fmi2StatusKind s, const char *why)
{
    fa_log(f, FA_DISCARD, FA_CATEGORY_ERROR, "%s: status kind %d is not available (%s)", function, (int)s, why);
    return fmi2Discard;
}

#define FA_GET(c) \
    fa_fmu *f = fa_fmu_check(c); \
    if (!f) return fmi2Error
#define FA_RET(expr) return (fmi2Status)(expr)

/* ---------------------------------------------------------------- common functions -- */

const char *fmi2GetTypesPlatform(void) { return fmi2TypesPlatform; }
const char *fmi2GetVersion(void) { return fmi2Version; }

fmi2Status fmi2SetDebugLogging(fmi2Component c, fmi2Boolean loggingOn, size_t nCategories,
                               const fmi2String categories[])
{
    FA_GET(c);
    FA_RET(fa_fmu_set_debug_logging(f, loggingOn != fmi2False, nCategories, categories, "fmi2SetDebugLogging"));
}

fmi2Component fmi2Instantiate(fmi2String instanceName, fmi2Type fmuType, fmi2String fmuGUID,
                              fmi2String fmuResourceLocation, const fmi2CallbackFunctions *functions,
                              fmi2Boolean visible, fmi2Boolean loggingOn)
{
    fmi2CallbackLogger logger = functions ? functions->logger : NULL;
    fmi2ComponentEnvironment environment = functions ? functions->componentEnvironment : NULL;
    (void)fmuResourceLocation;
    (void)visible;
    if (!instanceName) {
        fa_fmi2_send(logger, environment, "", FA_ERROR, FA_CATEGORY_ERROR, "fmi2Instantiate: instanceName is NULL");
        return NULL;
    }
    if (fmuType != fmi2CoSimulation && fmuType != fmi2ModelExchange) {
        fa_fmi2_send(logger, environment, instanceName, FA_ERROR, FA_CATEGORY_ERROR,
                     "fmi2Instantiate: this FMU supports Co-Simulation only (fmuType must be fmi2CoSimulation)");
        return NULL;
    }
    if (!fmuGUID || strcmp(fmuGUID, FA_INSTANTIATION_TOKEN) != 0) {
        char message[512];
        snprintf(message, sizeof message, "fmi2Instantiate: GUID mismatch: the FMU's binary has %s but fmuGUID is "
                 "%.200s (modelDescription.xml and binary differ)", FA_INSTANTIATION_TOKEN,
                 fmuGUID ? fmuGUID : "NULL");
        fa_fmi2_send(logger, environment, instanceName, FA_ERROR, FA_CATEGORY_ERROR, message);
        return NULL;
    }
    fa_fmi2 *instance = (fa_fmi2 *)calloc(1, sizeof(fa_fmi2));
    if (!instance || fa_fmu_setup(&instance->base, instanceName, 0, loggingOn != fmi2False, fa_fmi2_emit) != 0) {
        free(instance);
        fa_fmi2_send(logger, environment, instanceName, FA_ERROR, FA_CATEGORY_ERROR, "fmi2Instantiate: out of memory");
        return NULL;
    }
    instance->logger = logger;
    instance->environment = environment;
    if (fmuType == fmi2ModelExchange) {
        char why[1024];
        if (fa_me_supported(why, sizeof why) != 0 || !(instance->me = fa_me_new())) {
            fa_fmi2_send(logger, environment, instanceName, FA_ERROR, FA_CATEGORY_ERROR, why);
            fa_fmu_release(&instance->base);
            free(instance);
            return NULL;
        }
        instance->base.model_exchange = 1;
    }
    fa_log(&instance->base, FA_OK, FA_CATEGORY_EVENTS, "fmi2Instantiate: model '%s' (%d parameters/inputs, %d "
           "outputs)", FA_MODEL_NAME, FA_NP, FA_NY);
    return instance;
}

void fmi2FreeInstance(fmi2Component c)
{
    fa_fmu *f = fa_fmu_check(c);
    if (!f) return;
    fa_me_free(FA_ME_OF(f));
    fa_fmu_release(f);
    free(c);
}

fmi2Status fmi2SetupExperiment(fmi2Component c, fmi2Boolean toleranceDefined, fmi2Real tolerance,
                               fmi2Real startTime, fmi2Boolean stopTimeDefined, fmi2Real stopTime)
{
    FA_GET(c);
    (void)toleranceDefined;
    (void)tolerance; /* the engine runs with its own Newton tolerance */
    if (stopTimeDefined && !(stopTime >= startTime))
        FA_RET(fa_fmu_error(f, "fmi2SetupExperiment", "stopTime = %g is before startTime = %g", stopTime, startTime));
    FA_RET(fa_fmu_set_start_time(f, startTime, "fmi2SetupExperiment"));
}

fmi2Status fmi2EnterInitializationMode(fmi2Component c)
{
    FA_GET(c);
    FA_RET(fa_fmu_enter_initialization(f, "fmi2EnterInitializationMode"));
}

fmi2Status fmi2ExitInitializationMode(fmi2Component c)
{
    FA_GET(c);
    FA_RET(fa_fmu_exit_initialization_me(f, FA_ME_OF(f), "fmi2ExitInitializationMode"));
}

fmi2Status fmi2Terminate(fmi2Component c)
{
    FA_GET(c);
    FA_RET(fa_fmu_terminate(f, "fmi2Terminate"));
}

fmi2Status fmi2Reset(fmi2Component c)
{
    FA_GET(c);
    fa_status s = fa_fmu_reset(f, "fmi2Reset");
    fa_fmu_sync_me(f, FA_ME_OF(f));
    FA_RET(s);
}

/* ------------------------------------------------------------------------ variables -- */

fmi2Status fmi2GetReal(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2Real value[])
{
    FA_GET(c);
    fa_me *me = FA_ME_OF(f);
    if (!me || (f->mode != FA_MODE_STEP && f->mode != FA_MODE_TERMINATED))
        FA_RET(fa_fmu_get_reals(f, vr, nvr, value, "fmi2GetReal"));
    FA_RET(fa_fmu_me_get_reals(f, me, vr, nvr, value, "fmi2GetReal"));
}

fmi2Status fmi2SetReal(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2Real value[])
{
    FA_GET(c);
    fa_status s = fa_fmu_set_reals(f, vr, nvr, value, "fmi2SetReal");
    fa_fmu_sync_me(f, FA_ME_OF(f));
    FA_RET(s);
}

fmi2Status fmi2GetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2Integer value[])
{
    FA_GET(c);
    (void)value;
    FA_RET(fa_fmu_no_variables(f, vr, nvr, "Integer", "fmi2GetInteger"));
}

fmi2Status fmi2GetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2Boolean value[])
{
    FA_GET(c);
    (void)value;
    FA_RET(fa_fmu_no_variables(f, vr, nvr, "Boolean", "fmi2GetBoolean"));
}

fmi2Status fmi2GetString(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, fmi2String value[])
{
    FA_GET(c);
    (void)value;
    FA_RET(fa_fmu_no_variables(f, vr, nvr, "String", "fmi2GetString"));
}

fmi2Status fmi2SetInteger(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2Integer value[])
{
    FA_GET(c);
    (void)value;
    FA_RET(fa_fmu_no_variables(f, vr, nvr, "Integer", "fmi2SetInteger"));
}

fmi2Status fmi2SetBoolean(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2Boolean value[])
{
    FA_GET(c);
    (void)value;
    FA_RET(fa_fmu_no_variables(f, vr, nvr, "Boolean", "fmi2SetBoolean"));
}

fmi2Status fmi2SetString(fmi2Component c, const fmi2ValueReference vr[], size_t nvr, const fmi2String value[])
{
    FA_GET(c);
    (void)value;
    FA_RET(fa_fmu_no_variables(f, vr, nvr, "String", "fmi2SetString"));
}

/* ----------------------------------------------------------------------- FMU state -- */

fmi2Status fmi2GetFMUstate(fmi2Component c, fmi2FMUstate *FMUstate)
{
    FA_GET(c);
    FA_RET(fa_fmu_get_state(f, FA_ME_OF(f), FMUstate, "fmi2GetFMUstate"));
}

fmi2Status fmi2SetFMUstate(fmi2Component c, fmi2FMUstate FMUstate)
{
    FA_GET(c);
    FA_RET(fa_fmu_set_state(f, FA_ME_OF(f), FMUstate, "fmi2SetFMUstate"));
}

fmi2Status fmi2FreeFMUstate(fmi2Component c, fmi2FMUstate *FMUstate)
{
    FA_GET(c);
    FA_RET(fa_fmu_free_state(f, FMUstate, "fmi2FreeFMUstate"));
}

fmi2Status fmi2SerializedFMUstateSize(fmi2Component c, fmi2FMUstate FMUstate, size_t *size)
{
    FA_GET(c);
    FA_RET(fa_fmu_serialized_size(f, FMUstate, size, "fmi2SerializedFMUstateSize"));
}

fmi2Status fmi2SerializeFMUstate(fmi2Component c, fmi2FMUstate FMUstate, fmi2Byte serializedState[], size_t size)
{
    FA_GET(c);
    FA_RET(fa_fmu_serialize(f, FMUstate, (unsigned char *)serializedState, size, "fmi2SerializeFMUstate"));
}

fmi2Status fmi2DeSerializeFMUstate(fmi2Component c, const fmi2Byte serializedState[], size_t size,
                                   fmi2FMUstate *FMUstate)
{
    FA_GET(c);
    FA_RET(fa_fmu_deserialize(f, (const unsigned char *)serializedState, size, FMUstate, "fmi2DeSerializeFMUstate"));
}

fmi2Status fmi2GetDirectionalDerivative(fmi2Component c, const fmi2ValueReference vUnknown_ref[], size_t nUnknown,
                                        const fmi2ValueReference vKnown_ref[], size_t nKnown,
                                        const fmi2Real dvKnown[], fmi2Real dvUnknown[])
{
    FA_GET(c);
    FA_RET(fa_fmu_derivative_product(f, FA_ME_OF(f), vUnknown_ref, nUnknown, vKnown_ref, nKnown, dvKnown, dvUnknown, 0,
                                     "fmi2GetDirectionalDerivative"));
}

/* ------------------------------------------------------- Model Exchange: unsupported -- */

#define FA_NO_ME(name) FA_RET(fa_fmu_unsupported(f, name, "this FMU implements Co-Simulation only"))

#define FA_ME_GET(c, name) \
    FA_GET(c); \
    fa_me *me = FA_ME_OF(f); \
    if (!me) FA_NO_ME(name)

/* ... and the core initialized (after fmi2ExitInitializationMode, until fmi2Terminate/Reset). */
#define FA_ME_RUNNING(c, name) \
    FA_ME_GET(c, name); \
    if (fa_fmu_require(f, FA_MASK(FA_MODE_STEP), name)) FA_RET(FA_ERROR)

fmi2Status fmi2EnterEventMode(fmi2Component c)
{
    FA_ME_GET(c, "fmi2EnterEventMode");
    FA_RET(FA_OK);
}

fmi2Status fmi2NewDiscreteStates(fmi2Component c, fmi2EventInfo *eventInfo)
{
    FA_ME_RUNNING(c, "fmi2NewDiscreteStates");
    int changed = 0;
    if (fa_me_project(me, &changed) != 0) FA_RET(fa_fmu_error(f, "fmi2NewDiscreteStates", "%s", fa_me_message(me)));
    eventInfo->newDiscreteStatesNeeded = fmi2False;
    eventInfo->terminateSimulation = fmi2False;
    eventInfo->nominalsOfContinuousStatesChanged = fmi2False;
    eventInfo->valuesOfContinuousStatesChanged = changed ? fmi2True : fmi2False;
    eventInfo->nextEventTimeDefined = fmi2False;
    eventInfo->nextEventTime = 0.0;
    FA_RET(FA_OK);
}

fmi2Status fmi2EnterContinuousTimeMode(fmi2Component c)
{
    FA_ME_GET(c, "fmi2EnterContinuousTimeMode");
    FA_RET(FA_OK);
}

fmi2Status fmi2CompletedIntegratorStep(fmi2Component c, fmi2Boolean noSetFMUStatePriorToCurrentPoint,
                                       fmi2Boolean *enterEventMode, fmi2Boolean *terminateSimulation)
{
    FA_ME_RUNNING(c, "fmi2CompletedIntegratorStep");
    (void)noSetFMUStatePriorToCurrentPoint;
    int enter = 0;
    fa_me_completed_step(me, &enter);
    *enterEventMode = enter ? fmi2True : fmi2False;
    *terminateSimulation = fmi2False;
    FA_RET(FA_OK);
}

fmi2Status fmi2SetTime(fmi2Component c, fmi2Real time)
{
    FA_ME_GET(c, "fmi2SetTime");
    fa_me_set_time(me, time);
    FA_RET(FA_OK);
}

fmi2Status fmi2SetContinuousStates(fmi2Component c, const fmi2Real x[], size_t nx)
{
    FA_ME_GET(c, "fmi2SetContinuousStates");
    if (nx != FA_ME_NX) FA_RET(fa_fmu_error(f, "fmi2SetContinuousStates", "nx = %lu", (unsigned long)nx));
    fa_me_set_states(me, x);
    FA_RET(FA_OK);
}

fmi2Status fmi2GetDerivatives(fmi2Component c, fmi2Real derivatives[], size_t nx)
{
    FA_ME_RUNNING(c, "fmi2GetDerivatives");
    if (nx != FA_ME_NX) FA_RET(fa_fmu_error(f, "fmi2GetDerivatives", "nx = %lu", (unsigned long)nx));
    if (fa_me_derivatives(me, derivatives, NULL) != 0) FA_RET(fa_fmu_error(f, "fmi2GetDerivatives", "%s", fa_me_message(me)));
    FA_RET(FA_OK);
}

fmi2Status fmi2GetEventIndicators(fmi2Component c, fmi2Real eventIndicators[], size_t ni)
{
    FA_ME_GET(c, "fmi2GetEventIndicators");
    (void)eventIndicators;
    FA_RET(ni == 0 ? FA_OK : fa_fmu_error(f, "fmi2GetEventIndicators", "ni = %lu, the FMU has none", (unsigned long)ni));
}

fmi2Status fmi2GetContinuousStates(fmi2Component c, fmi2Real x[], size_t nx)
{
    FA_ME_GET(c, "fmi2GetContinuousStates");
    if (nx != FA_ME_NX) FA_RET(fa_fmu_error(f, "fmi2GetContinuousStates", "nx = %lu", (unsigned long)nx));
    fa_me_get_states(me, x);
    FA_RET(FA_OK);
}

fmi2Status fmi2GetNominalsOfContinuousStates(fmi2Component c, fmi2Real x_nominal[], size_t nx)
{
    FA_ME_GET(c, "fmi2GetNominalsOfContinuousStates");
    for (size_t i = 0; i < nx; ++i) x_nominal[i] = 1.0;
    FA_RET(FA_OK);
}

/* -------------------------------------------------------------------- Co-Simulation -- */

fmi2Status fmi2SetRealInputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                       const fmi2Integer order[], const fmi2Real value[])
{
    FA_GET(c);
    FA_RET(fa_fmu_set_input_derivatives(f, vr, nvr, order, value, "fmi2SetRealInputDerivatives"));
}

fmi2Status fmi2GetRealOutputDerivatives(fmi2Component c, const fmi2ValueReference vr[], size_t nvr,
                                        const fmi2Integer order[], fmi2Real value[])
{
    FA_GET(c);
    (void)vr; (void)order; (void)value;
    if (nvr == 0) return fmi2OK;
    FA_RET(fa_fmu_unsupported(f, "fmi2GetRealOutputDerivatives",
                              "output derivatives (maxOutputDerivativeOrder = 0)"));
}

fmi2Status fmi2DoStep(fmi2Component c, fmi2Real currentCommunicationPoint, fmi2Real communicationStepSize,
                      fmi2Boolean noSetFMUStatePriorToCurrentPoint)
{
    FA_GET(c);
    (void)noSetFMUStatePriorToCurrentPoint;
    if (FA_ME_OF(f)) FA_RET(fa_fmu_error(f, "fmi2DoStep", "the instance was instantiated for Model Exchange; "
                                         "instantiate it as fmi2CoSimulation to step it"));
    FA_RET(fa_fmu_do_step(f, currentCommunicationPoint, communicationStepSize, NULL, "fmi2DoStep"));
}

fmi2Status fmi2CancelStep(fmi2Component c)
{
    FA_GET(c);
    FA_RET(fa_fmu_unsupported(f, "fmi2CancelStep", "fmi2DoStep is synchronous (never returns fmi2Pending)"));
}

/* Status queries: doStep is synchronous and never asks to terminate. */
fmi2Status fmi2GetStatus(fmi2Component c, const fmi2StatusKind s, fmi2Status *value)
{
    FA_GET(c);
    if (!value) FA_RET(fa_fmu_error(f, "fmi2GetStatus", "value is NULL"));
    if (s == fmi2DoStepStatus) {
        *value = f->mode == FA_MODE_ERROR ? fmi2Error : fmi2OK;
        return fmi2OK;
    }
    return fa_fmi2_no_status(f, "fmi2GetStatus", s, "no asynchronous doStep");
}

fmi2Status fmi2GetRealStatus(fmi2Component c, const fmi2StatusKind s, fmi2Real *value)
{
    FA_GET(c);
    if (!value) FA_RET(fa_fmu_error(f, "fmi2GetRealStatus", "value is NULL"));
    if (s == fmi2LastSuccessfulTime) {
        *value = fa_fmu_time(f);
        return fmi2OK;
    }
    return fa_fmi2_no_status(f, "fmi2GetRealStatus", s, "only fmi2LastSuccessfulTime");
}

fmi2Status fmi2GetIntegerStatus(fmi2Component c, const fmi2StatusKind s, fmi2Integer *value)
{
    FA_GET(c);
    (void)value;
    return fa_fmi2_no_status(f, "fmi2GetIntegerStatus", s, "the FMU has no integer status");
}

fmi2Status fmi2GetBooleanStatus(fmi2Component c, const fmi2StatusKind s, fmi2Boolean *value)
{
    FA_GET(c);
    if (!value) FA_RET(fa_fmu_error(f, "fmi2GetBooleanStatus", "value is NULL"));
    if (s == fmi2Terminated) {
        *value = fmi2False; /* the FMU never requests the end of the simulation */
        return fmi2OK;
    }
    return fa_fmi2_no_status(f, "fmi2GetBooleanStatus", s, "only fmi2Terminated");
}

fmi2Status fmi2GetStringStatus(fmi2Component c, const fmi2StatusKind s, fmi2String *value)
{
    FA_GET(c);
    (void)value;
    return fa_fmi2_no_status(f, "fmi2GetStringStatus", s, "no asynchronous doStep");
}
