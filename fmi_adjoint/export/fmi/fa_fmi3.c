/* fmi-adjoint FMU runtime: FMI 3.0 Co-Simulation interface over the HHT engine, and Model
 * Exchange over the core of fa_fmu_me.h (an instance of either type; FMU states of both).
 *
 * Value references: 0 = time (independent), 1 + k = parameter/input k, 1 + FA_NP + j =
 * output j (fa_fmu_common.h).  Log categories: "logEvents", "logStatusError".  No clocks,
 * Scheduled Execution or variable types other than Float64.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmi3Functions.h"

#include "fa_fmu_common.h"
#include "fmu_config.h"
#include "model.h"

#ifndef FA_INSTANTIATION_TOKEN
#error "fmu_config.h must define FA_INSTANTIATION_TOKEN"
#endif

/* fmu_config.h defines FA_IS_INPUT only for a model with inputs. */
#ifdef FA_IS_INPUT
#define FA_HAS_INPUTS 1
#else
#define FA_HAS_INPUTS 0
#endif

/* The common code takes value references as unsigned int. */
typedef char fa_fmi3_vr_is_unsigned_int[sizeof(fmi3ValueReference) == sizeof(unsigned int) ? 1 : -1];
#define FA_VRS(v) ((const unsigned int *)(v))

typedef struct {
    fa_fmu base; /* first member: an fa_fmi3 * is an fa_fmu * */
    fmi3LogMessageCallback log_message;
    fmi3InstanceEnvironment environment;
    fa_me *me;   /* Model Exchange instance, NULL for Co-Simulation */
    fmi3IntermediateUpdateCallback intermediate_update; /* Co-Simulation, or NULL */
} fa_fmi3;
#define FA_ME_OF(f) (((fa_fmi3 *)(f))->me)

static void fa_fmi3_send(fmi3LogMessageCallback log_message, fmi3InstanceEnvironment environment, fa_status status,
                         const char *category, const char *message)
{
    if (log_message) log_message(environment, (fmi3Status)status, category, message);
}

static void fa_fmi3_emit(const fa_fmu *f, fa_status status, const char *category, const char *message)
{
    const fa_fmi3 *instance = (const fa_fmi3 *)f;
    fa_fmi3_send(instance->log_message, instance->environment, status, category, message);
}

/* Before every internal step of fmi3DoStep (fa_fmu_do_step): the importer's intermediateUpdate
 * at the step's end time t, with intermediateVariableSetRequested (it sets the inputs at t);
 * no intermediate outputs, no early return. */
static void fa_fmi3_intermediate(fa_fmu *f, double t)
{
    const fa_fmi3 *instance = (const fa_fmi3 *)f;
    fmi3Boolean early_return = fmi3False;
    fmi3Float64 early_time = t;
    instance->intermediate_update(instance->environment, t, fmi3True, fmi3False, fmi3False, fmi3False,
                                  &early_return, &early_time);
}

#define FA_GET(instance) \
    fa_fmu *f = fa_fmu_check(instance); \
    if (!f) return fmi3Error
#define FA_RET(expr) return (fmi3Status)(expr)
#define FA_UNSUPPORTED(name, why) FA_RET(fa_fmu_unsupported(f, name, why))
#define FA_NONE(type, name) FA_RET(fa_fmu_no_variables(f, FA_VRS(valueReferences), nValueReferences, type, name))

static const char fa_no_me[] = "this FMU implements Co-Simulation only";
static const char fa_no_events[] = "the FMU has no Event Mode (hasEventMode = false)";
static const char fa_no_clocks[] = "the FMU has no clocks";

/* ---------------------------------------------------------------- common functions -- */

const char *fmi3GetVersion(void) { return fmi3Version; }

fmi3Status fmi3SetDebugLogging(fmi3Instance instance, fmi3Boolean loggingOn, size_t nCategories,
                               const fmi3String categories[])
{
    FA_GET(instance);
    FA_RET(fa_fmu_set_debug_logging(f, loggingOn, nCategories, categories, "fmi3SetDebugLogging"));
}

fmi3Instance fmi3InstantiateCoSimulation(fmi3String instanceName, fmi3String instantiationToken,
                                         fmi3String resourcePath, fmi3Boolean visible, fmi3Boolean loggingOn,
                                         fmi3Boolean eventModeUsed, fmi3Boolean earlyReturnAllowed,
                                         const fmi3ValueReference requiredIntermediateVariables[],
                                         size_t nRequiredIntermediateVariables,
                                         fmi3InstanceEnvironment instanceEnvironment,
                                         fmi3LogMessageCallback logMessage,
                                         fmi3IntermediateUpdateCallback intermediateUpdate)
{
    (void)resourcePath; (void)visible; (void)earlyReturnAllowed; (void)requiredIntermediateVariables;
    (void)nRequiredIntermediateVariables;
    if (!instanceName) {
        fa_fmi3_send(logMessage, instanceEnvironment, FA_ERROR, FA_CATEGORY_ERROR,
                     "fmi3InstantiateCoSimulation: instanceName is NULL");
        return NULL;
    }
    if (!instantiationToken || strcmp(instantiationToken, FA_INSTANTIATION_TOKEN) != 0) {
        char message[512];
        snprintf(message, sizeof message, "fmi3InstantiateCoSimulation: instantiation token mismatch: the FMU's "
                 "binary has %s but instantiationToken is %.200s (modelDescription.xml and binary differ)",
                 FA_INSTANTIATION_TOKEN, instantiationToken ? instantiationToken : "NULL");
        fa_fmi3_send(logMessage, instanceEnvironment, FA_ERROR, FA_CATEGORY_ERROR, message);
        return NULL;
    }
    fa_fmi3 *instance = (fa_fmi3 *)calloc(1, sizeof(fa_fmi3));
    if (!instance || fa_fmu_setup(&instance->base, instanceName, 1, loggingOn, fa_fmi3_emit) != 0) {
        free(instance);
        fa_fmi3_send(logMessage, instanceEnvironment, FA_ERROR, FA_CATEGORY_ERROR,
                     "fmi3InstantiateCoSimulation: out of memory");
        return NULL;
    }
    instance->log_message = logMessage;
    instance->environment = instanceEnvironment;
    /* Only an FMU with inputs provides intermediate update (of its inputs). */
    if (intermediateUpdate && FA_HAS_INPUTS) {
        instance->intermediate_update = intermediateUpdate;
        instance->base.intermediate = fa_fmi3_intermediate;
    }
    if (eventModeUsed)
        fa_log(&instance->base, FA_WARNING, FA_CATEGORY_ERROR, "fmi3InstantiateCoSimulation: eventModeUsed is "
               "ignored: the FMU has no events and stays in Step Mode");
    fa_log(&instance->base, FA_OK, FA_CATEGORY_EVENTS, "fmi3InstantiateCoSimulation: model '%s' (%d "
           "parameters/inputs, %d outputs)", FA_MODEL_NAME, FA_NP, FA_NY);
    return instance;
}

/* Model Exchange: the Co-Simulation instance (the engine runs the consistent initialization)
 * with the Model Exchange core (fa_fmu_me.h); refused by name for massless, unconstrained
 * coordinates (fa_me_supported). */
fmi3Instance fmi3InstantiateModelExchange(fmi3String instanceName, fmi3String instantiationToken,
                                          fmi3String resourcePath, fmi3Boolean visible, fmi3Boolean loggingOn,
                                          fmi3InstanceEnvironment instanceEnvironment,
                                          fmi3LogMessageCallback logMessage)
{
    char why[1024];
    if (fa_me_supported(why, sizeof why) != 0) {
        fa_fmi3_send(logMessage, instanceEnvironment, FA_ERROR, FA_CATEGORY_ERROR, why);
        return NULL;
    }
    fa_fmi3 *instance = (fa_fmi3 *)fmi3InstantiateCoSimulation(instanceName, instantiationToken, resourcePath, visible,
                                                               loggingOn, fmi3False, fmi3False, NULL, 0,
                                                               instanceEnvironment, logMessage, NULL);
    if (!instance) return NULL;
    if (!(instance->me = fa_me_new())) { fmi3FreeInstance(instance); return NULL; }
    instance->base.model_exchange = 1;
    return instance;
}

fmi3Instance fmi3InstantiateScheduledExecution(fmi3String instanceName, fmi3String instantiationToken,
                                               fmi3String resourcePath, fmi3Boolean visible, fmi3Boolean loggingOn,
                                               fmi3InstanceEnvironment instanceEnvironment,
                                               fmi3LogMessageCallback logMessage, fmi3ClockUpdateCallback clockUpdate,
                                               fmi3LockPreemptionCallback lockPreemption,
                                               fmi3UnlockPreemptionCallback unlockPreemption)
{
    (void)instanceName; (void)instantiationToken; (void)resourcePath; (void)visible; (void)loggingOn;
    (void)clockUpdate; (void)lockPreemption; (void)unlockPreemption;
    fa_fmi3_send(logMessage, instanceEnvironment, FA_ERROR, FA_CATEGORY_ERROR,
                 "fmi3InstantiateScheduledExecution: not supported: this FMU implements Co-Simulation only");
    return NULL;
}

void fmi3FreeInstance(fmi3Instance instance)
{
    fa_fmu *f = fa_fmu_check(instance);
    if (!f) return;
    if (f->mode == FA_MODE_INTERMEDIATE) { /* inside fmi3DoStep: freeing now would pull the instance from under it */
        fa_fmu_error(f, "fmi3FreeInstance", "not allowed in %s; free the instance after fmi3DoStep returns",
                     fa_mode_name(f->mode));
        return;
    }
    fa_me_free(FA_ME_OF(f));
    fa_fmu_release(f);
    free(instance);
}

fmi3Status fmi3EnterInitializationMode(fmi3Instance instance, fmi3Boolean toleranceDefined, fmi3Float64 tolerance,
                                       fmi3Float64 startTime, fmi3Boolean stopTimeDefined, fmi3Float64 stopTime)
{
    FA_GET(instance);
    (void)toleranceDefined;
    (void)tolerance; /* the engine runs with its own Newton tolerance */
    if (fa_fmu_require(f, FA_MASK(FA_MODE_INSTANTIATED), "fmi3EnterInitializationMode")) return fmi3Error;
    if (stopTimeDefined && !(stopTime >= startTime))
        FA_RET(fa_fmu_error(f, "fmi3EnterInitializationMode", "stopTime = %g is before startTime = %g", stopTime,
                            startTime));
    fa_status status = fa_fmu_set_start_time(f, startTime, "fmi3EnterInitializationMode");
    if (status != FA_OK) FA_RET(status);
    FA_RET(fa_fmu_enter_initialization(f, "fmi3EnterInitializationMode"));
}

fmi3Status fmi3ExitInitializationMode(fmi3Instance instance)
{
    FA_GET(instance);
    FA_RET(fa_fmu_exit_initialization_me(f, FA_ME_OF(f), "fmi3ExitInitializationMode"));
}

fmi3Status fmi3EnterEventMode(fmi3Instance instance)
{
    FA_GET(instance);
    if (!FA_ME_OF(f)) FA_UNSUPPORTED("fmi3EnterEventMode", fa_no_events);
    FA_RET(FA_OK);
}

fmi3Status fmi3Terminate(fmi3Instance instance)
{
    FA_GET(instance);
    FA_RET(fa_fmu_terminate(f, "fmi3Terminate"));
}

fmi3Status fmi3Reset(fmi3Instance instance)
{
    FA_GET(instance);
    fa_status s = fa_fmu_reset(f, "fmi3Reset");
    fa_fmu_sync_me(f, FA_ME_OF(f));
    FA_RET(s);
}

/* ------------------------------------------------------------------------ variables -- */

fmi3Status fmi3GetFloat64(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                          fmi3Float64 values[], size_t nValues)
{
    FA_GET(instance);
    if (nValues != nValueReferences)
        FA_RET(fa_fmu_error(f, "fmi3GetFloat64", "nValues = %lu differs from nValueReferences = %lu (all variables "
                            "are scalars)", (unsigned long)nValues, (unsigned long)nValueReferences));
    fa_me *me = FA_ME_OF(f);
    if (!me || (f->mode != FA_MODE_STEP && f->mode != FA_MODE_TERMINATED))
        FA_RET(fa_fmu_get_reals(f, FA_VRS(valueReferences), nValueReferences, values, "fmi3GetFloat64"));
    FA_RET(fa_fmu_me_get_reals(f, me, FA_VRS(valueReferences), nValueReferences, values, "fmi3GetFloat64"));
}

fmi3Status fmi3SetFloat64(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                          const fmi3Float64 values[], size_t nValues)
{
    FA_GET(instance);
    if (nValues != nValueReferences)
        FA_RET(fa_fmu_error(f, "fmi3SetFloat64", "nValues = %lu differs from nValueReferences = %lu (all variables "
                            "are scalars)", (unsigned long)nValues, (unsigned long)nValueReferences));
    fa_status s = fa_fmu_set_reals(f, FA_VRS(valueReferences), nValueReferences, values, "fmi3SetFloat64");
    fa_fmu_sync_me(f, FA_ME_OF(f));
    FA_RET(s);
}

/* Types the FMU has no variables of: OK for nValueReferences == 0, else an error. */
#define FA_NO_GET(Type, CType) \
    fmi3Status fmi3Get##Type(fmi3Instance instance, const fmi3ValueReference valueReferences[], \
                             size_t nValueReferences, CType values[], size_t nValues) \
    { \
        FA_GET(instance); \
        (void)values; (void)nValues; \
        FA_NONE(#Type, "fmi3Get" #Type); \
    }
#define FA_NO_SET(Type, CType) \
    fmi3Status fmi3Set##Type(fmi3Instance instance, const fmi3ValueReference valueReferences[], \
                             size_t nValueReferences, const CType values[], size_t nValues) \
    { \
        FA_GET(instance); \
        (void)values; (void)nValues; \
        FA_NONE(#Type, "fmi3Set" #Type); \
    }

FA_NO_GET(Float32, fmi3Float32)
FA_NO_GET(Int8, fmi3Int8)
FA_NO_GET(UInt8, fmi3UInt8)
FA_NO_GET(Int16, fmi3Int16)
FA_NO_GET(UInt16, fmi3UInt16)
FA_NO_GET(Int32, fmi3Int32)
FA_NO_GET(UInt32, fmi3UInt32)
FA_NO_GET(Int64, fmi3Int64)
FA_NO_GET(UInt64, fmi3UInt64)
FA_NO_GET(Boolean, fmi3Boolean)
FA_NO_GET(String, fmi3String)
FA_NO_SET(Float32, fmi3Float32)
FA_NO_SET(Int8, fmi3Int8)
FA_NO_SET(UInt8, fmi3UInt8)
FA_NO_SET(Int16, fmi3Int16)
FA_NO_SET(UInt16, fmi3UInt16)
FA_NO_SET(Int32, fmi3Int32)
FA_NO_SET(UInt32, fmi3UInt32)
FA_NO_SET(Int64, fmi3Int64)
FA_NO_SET(UInt64, fmi3UInt64)
FA_NO_SET(Boolean, fmi3Boolean)
FA_NO_SET(String, fmi3String)

fmi3Status fmi3GetBinary(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                         size_t valueSizes[], fmi3Binary values[], size_t nValues)
{
    FA_GET(instance);
    (void)valueSizes; (void)values; (void)nValues;
    FA_NONE("Binary", "fmi3GetBinary");
}

fmi3Status fmi3SetBinary(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                         const size_t valueSizes[], const fmi3Binary values[], size_t nValues)
{
    FA_GET(instance);
    (void)valueSizes; (void)values; (void)nValues;
    FA_NONE("Binary", "fmi3SetBinary");
}

fmi3Status fmi3GetClock(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                        fmi3Clock values[])
{
    FA_GET(instance);
    (void)values;
    FA_NONE("Clock", "fmi3GetClock");
}

fmi3Status fmi3SetClock(fmi3Instance instance, const fmi3ValueReference valueReferences[], size_t nValueReferences,
                        const fmi3Clock values[])
{
    FA_GET(instance);
    (void)values;
    FA_NONE("Clock", "fmi3SetClock");
}

fmi3Status fmi3GetNumberOfVariableDependencies(fmi3Instance instance, fmi3ValueReference valueReference,
                                               size_t *nDependencies)
{
    FA_GET(instance);
    (void)valueReference; (void)nDependencies;
    FA_UNSUPPORTED("fmi3GetNumberOfVariableDependencies", "the dependencies are in modelDescription.xml");
}

fmi3Status fmi3GetVariableDependencies(fmi3Instance instance, fmi3ValueReference dependent,
                                       size_t elementIndicesOfDependent[], fmi3ValueReference independents[],
                                       size_t elementIndicesOfIndependents[], fmi3DependencyKind dependencyKinds[],
                                       size_t nDependencies)
{
    FA_GET(instance);
    (void)dependent; (void)elementIndicesOfDependent; (void)independents; (void)elementIndicesOfIndependents;
    (void)dependencyKinds; (void)nDependencies;
    FA_UNSUPPORTED("fmi3GetVariableDependencies", "the dependencies are in modelDescription.xml");
}

/* ----------------------------------------------------------------------- FMU state -- */

fmi3Status fmi3GetFMUState(fmi3Instance instance, fmi3FMUState *FMUState)
{
    FA_GET(instance);
    FA_RET(fa_fmu_get_state(f, FA_ME_OF(f), FMUState, "fmi3GetFMUState"));
}

fmi3Status fmi3SetFMUState(fmi3Instance instance, fmi3FMUState FMUState)
{
    FA_GET(instance);
    FA_RET(fa_fmu_set_state(f, FA_ME_OF(f), FMUState, "fmi3SetFMUState"));
}

fmi3Status fmi3FreeFMUState(fmi3Instance instance, fmi3FMUState *FMUState)
{
    FA_GET(instance);
    FA_RET(fa_fmu_free_state(f, FMUState, "fmi3FreeFMUState"));
}

fmi3Status fmi3SerializedFMUStateSize(fmi3Instance instance, fmi3FMUState FMUState, size_t *size)
{
    FA_GET(instance);
    FA_RET(fa_fmu_serialized_size(f, FMUState, size, "fmi3SerializedFMUStateSize"));
}

fmi3Status fmi3SerializeFMUState(fmi3Instance instance, fmi3FMUState FMUState, fmi3Byte serializedState[],
                                 size_t size)
{
    FA_GET(instance);
    FA_RET(fa_fmu_serialize(f, FMUState, serializedState, size, "fmi3SerializeFMUState"));
}

fmi3Status fmi3DeserializeFMUState(fmi3Instance instance, const fmi3Byte serializedState[], size_t size,
                                   fmi3FMUState *FMUState)
{
    FA_GET(instance);
    FA_RET(fa_fmu_deserialize(f, serializedState, size, FMUState, "fmi3DeserializeFMUState"));
}

/* ------------------------------------------------------------------ derivatives ----- */

fmi3Status fmi3GetDirectionalDerivative(fmi3Instance instance, const fmi3ValueReference unknowns[], size_t nUnknowns,
                                        const fmi3ValueReference knowns[], size_t nKnowns, const fmi3Float64 seed[],
                                        size_t nSeed, fmi3Float64 sensitivity[], size_t nSensitivity)
{
    FA_GET(instance);
    if (nSeed != nKnowns || nSensitivity != nUnknowns)
        FA_RET(fa_fmu_error(f, "fmi3GetDirectionalDerivative", "nSeed must equal nKnowns, nSensitivity nUnknowns"));
    FA_RET(fa_fmu_derivative_product(f, FA_ME_OF(f), FA_VRS(unknowns), nUnknowns, FA_VRS(knowns), nKnowns, seed,
                                     sensitivity, 0, "fmi3GetDirectionalDerivative"));
}

fmi3Status fmi3GetAdjointDerivative(fmi3Instance instance, const fmi3ValueReference unknowns[], size_t nUnknowns,
                                    const fmi3ValueReference knowns[], size_t nKnowns, const fmi3Float64 seed[],
                                    size_t nSeed, fmi3Float64 sensitivity[], size_t nSensitivity)
{
    FA_GET(instance);
    if (nSeed != nUnknowns || nSensitivity != nKnowns)
        FA_RET(fa_fmu_error(f, "fmi3GetAdjointDerivative", "nSeed must equal nUnknowns, nSensitivity nKnowns"));
    FA_RET(fa_fmu_derivative_product(f, FA_ME_OF(f), FA_VRS(unknowns), nUnknowns, FA_VRS(knowns), nKnowns, seed,
                                     sensitivity, 1, "fmi3GetAdjointDerivative"));
}

/* ------------------------------------------------- configuration, clocks, events ----- */

fmi3Status fmi3EnterConfigurationMode(fmi3Instance instance)
{
    FA_GET(instance);
    FA_UNSUPPORTED("fmi3EnterConfigurationMode", "the FMU has no structural parameters");
}

fmi3Status fmi3ExitConfigurationMode(fmi3Instance instance)
{
    FA_GET(instance);
    FA_UNSUPPORTED("fmi3ExitConfigurationMode", "the FMU has no structural parameters");
}

fmi3Status fmi3GetIntervalDecimal(fmi3Instance instance, const fmi3ValueReference valueReferences[],
                                  size_t nValueReferences, fmi3Float64 intervals[], fmi3IntervalQualifier qualifiers[])
{
    FA_GET(instance);
    (void)intervals; (void)qualifiers;
    FA_NONE("Clock", "fmi3GetIntervalDecimal");
}

fmi3Status fmi3GetIntervalFraction(fmi3Instance instance, const fmi3ValueReference valueReferences[],
                                   size_t nValueReferences, fmi3UInt64 counters[], fmi3UInt64 resolutions[],
                                   fmi3IntervalQualifier qualifiers[])
{
    FA_GET(instance);
    (void)counters; (void)resolutions; (void)qualifiers;
    FA_NONE("Clock", "fmi3GetIntervalFraction");
}

fmi3Status fmi3GetShiftDecimal(fmi3Instance instance, const fmi3ValueReference valueReferences[],
                               size_t nValueReferences, fmi3Float64 shifts[])
{
    FA_GET(instance);
    (void)shifts;
    FA_NONE("Clock", "fmi3GetShiftDecimal");
}

fmi3Status fmi3GetShiftFraction(fmi3Instance instance, const fmi3ValueReference valueReferences[],
                                size_t nValueReferences, fmi3UInt64 counters[], fmi3UInt64 resolutions[])
{
    FA_GET(instance);
    (void)counters; (void)resolutions;
    FA_NONE("Clock", "fmi3GetShiftFraction");
}

fmi3Status fmi3SetIntervalDecimal(fmi3Instance instance, const fmi3ValueReference valueReferences[],
                                  size_t nValueReferences, const fmi3Float64 intervals[])
{
    FA_GET(instance);
    (void)intervals;
    FA_NONE("Clock", "fmi3SetIntervalDecimal");
}

fmi3Status fmi3SetIntervalFraction(fmi3Instance instance, const fmi3ValueReference valueReferences[],
                                   size_t nValueReferences, const fmi3UInt64 counters[],
                                   const fmi3UInt64 resolutions[])
{
    FA_GET(instance);
    (void)counters; (void)resolutions;
    FA_NONE("Clock", "fmi3SetIntervalFraction");
}

fmi3Status fmi3SetShiftDecimal(fmi3Instance instance, const fmi3ValueReference valueReferences[],
                               size_t nValueReferences, const fmi3Float64 shifts[])
{
    FA_GET(instance);
    (void)shifts;
    FA_NONE("Clock", "fmi3SetShiftDecimal");
}

fmi3Status fmi3SetShiftFraction(fmi3Instance instance, const fmi3ValueReference valueReferences[],
                                size_t nValueReferences, const fmi3UInt64 counters[], const fmi3UInt64 resolutions[])
{
    FA_GET(instance);
    (void)counters; (void)resolutions;
    FA_NONE("Clock", "fmi3SetShiftFraction");
}

fmi3Status fmi3EvaluateDiscreteStates(fmi3Instance instance)
{
    FA_GET(instance);
    FA_UNSUPPORTED("fmi3EvaluateDiscreteStates", fa_no_events);
}

fmi3Status fmi3UpdateDiscreteStates(fmi3Instance instance, fmi3Boolean *discreteStatesNeedUpdate,
                                    fmi3Boolean *terminateSimulation, fmi3Boolean *nominalsOfContinuousStatesChanged,
                                    fmi3Boolean *valuesOfContinuousStatesChanged, fmi3Boolean *nextEventTimeDefined,
                                    fmi3Float64 *nextEventTime)
{
    FA_GET(instance);
    fa_me *me = FA_ME_OF(f);
    if (!me) FA_UNSUPPORTED("fmi3UpdateDiscreteStates", fa_no_events);
    if (fa_fmu_require(f, FA_MASK(FA_MODE_STEP), "fmi3UpdateDiscreteStates")) FA_RET(FA_ERROR);
    int changed = 0;
    if (fa_me_project(me, &changed) != 0) FA_RET(fa_fmu_error(f, "fmi3UpdateDiscreteStates", "%s", fa_me_message(me)));
    *discreteStatesNeedUpdate = fmi3False;
    *terminateSimulation = fmi3False;
    *nominalsOfContinuousStatesChanged = fmi3False;
    *valuesOfContinuousStatesChanged = changed ? fmi3True : fmi3False;
    *nextEventTimeDefined = fmi3False;
    *nextEventTime = 0.0;
    FA_RET(FA_OK);
}

#define FA_ME_GET(instance, name) \
    FA_GET(instance); \
    fa_me *me = FA_ME_OF(f); \
    if (!me) FA_UNSUPPORTED(name, fa_no_me)
#define FA_ME_COUNT(name, n) \
    if ((n) != FA_ME_NX) FA_RET(fa_fmu_error(f, name, "%lu states given, the FMU has %d", (unsigned long)(n), FA_ME_NX))

fmi3Status fmi3EnterContinuousTimeMode(fmi3Instance instance)
{
    FA_ME_GET(instance, "fmi3EnterContinuousTimeMode");
    FA_RET(FA_OK);
}

fmi3Status fmi3CompletedIntegratorStep(fmi3Instance instance, fmi3Boolean noSetFMUStatePriorToCurrentPoint,
                                       fmi3Boolean *enterEventMode, fmi3Boolean *terminateSimulation)
{
    FA_ME_GET(instance, "fmi3CompletedIntegratorStep");
    if (fa_fmu_require(f, FA_MASK(FA_MODE_STEP), "fmi3CompletedIntegratorStep")) FA_RET(FA_ERROR);
    (void)noSetFMUStatePriorToCurrentPoint;
    int enter = 0;
    fa_me_completed_step(me, &enter);
    *enterEventMode = enter ? fmi3True : fmi3False;
    *terminateSimulation = fmi3False;
    FA_RET(FA_OK);
}

fmi3Status fmi3SetTime(fmi3Instance instance, fmi3Float64 time)
{
    FA_ME_GET(instance, "fmi3SetTime");
    fa_me_set_time(me, time);
    FA_RET(FA_OK);
}

fmi3Status fmi3SetContinuousStates(fmi3Instance instance, const fmi3Float64 continuousStates[],
                                   size_t nContinuousStates)
{
    FA_ME_GET(instance, "fmi3SetContinuousStates");
    FA_ME_COUNT("fmi3SetContinuousStates", nContinuousStates);
    fa_me_set_states(me, continuousStates);
    FA_RET(FA_OK);
}

fmi3Status fmi3GetContinuousStateDerivatives(fmi3Instance instance, fmi3Float64 derivatives[],
                                             size_t nContinuousStates)
{
    FA_ME_GET(instance, "fmi3GetContinuousStateDerivatives");
    if (fa_fmu_require(f, FA_MASK(FA_MODE_STEP), "fmi3GetContinuousStateDerivatives")) FA_RET(FA_ERROR);
    FA_ME_COUNT("fmi3GetContinuousStateDerivatives", nContinuousStates);
    if (fa_me_derivatives(me, derivatives, NULL) != 0)
        FA_RET(fa_fmu_error(f, "fmi3GetContinuousStateDerivatives", "%s", fa_me_message(me)));
    FA_RET(FA_OK);
}

fmi3Status fmi3GetEventIndicators(fmi3Instance instance, fmi3Float64 eventIndicators[], size_t nEventIndicators)
{
    FA_ME_GET(instance, "fmi3GetEventIndicators");
    (void)eventIndicators;
    FA_RET(nEventIndicators == 0 ? FA_OK : fa_fmu_error(f, "fmi3GetEventIndicators", "the FMU has no event indicators"));
}

fmi3Status fmi3GetContinuousStates(fmi3Instance instance, fmi3Float64 continuousStates[], size_t nContinuousStates)
{
    FA_ME_GET(instance, "fmi3GetContinuousStates");
    FA_ME_COUNT("fmi3GetContinuousStates", nContinuousStates);
    fa_me_get_states(me, continuousStates);
    FA_RET(FA_OK);
}

fmi3Status fmi3GetNominalsOfContinuousStates(fmi3Instance instance, fmi3Float64 nominals[], size_t nContinuousStates)
{
    FA_ME_GET(instance, "fmi3GetNominalsOfContinuousStates");
    FA_ME_COUNT("fmi3GetNominalsOfContinuousStates", nContinuousStates);
    for (size_t i = 0; i < nContinuousStates; ++i) nominals[i] = 1.0;
    FA_RET(FA_OK);
}

fmi3Status fmi3GetNumberOfEventIndicators(fmi3Instance instance, size_t *nEventIndicators)
{
    FA_ME_GET(instance, "fmi3GetNumberOfEventIndicators");
    *nEventIndicators = 0;
    FA_RET(FA_OK);
}

fmi3Status fmi3GetNumberOfContinuousStates(fmi3Instance instance, size_t *nContinuousStates)
{
    FA_ME_GET(instance, "fmi3GetNumberOfContinuousStates");
    *nContinuousStates = FA_ME_NX;
    FA_RET(FA_OK);
}

/* -------------------------------------------------------------------- Co-Simulation -- */

fmi3Status fmi3EnterStepMode(fmi3Instance instance)
{
    FA_GET(instance);
    FA_UNSUPPORTED("fmi3EnterStepMode", "the FMU has no Event Mode; it is in Step Mode after "
                   "fmi3ExitInitializationMode");
}

fmi3Status fmi3GetOutputDerivatives(fmi3Instance instance, const fmi3ValueReference valueReferences[],
                                    size_t nValueReferences, const fmi3Int32 orders[], fmi3Float64 values[],
                                    size_t nValues)
{
    FA_GET(instance);
    (void)valueReferences; (void)orders; (void)values; (void)nValues;
    if (nValueReferences == 0) return fmi3OK;
    FA_UNSUPPORTED("fmi3GetOutputDerivatives", "output derivatives (maxOutputDerivativeOrder = 0)");
}

fmi3Status fmi3DoStep(fmi3Instance instance, fmi3Float64 currentCommunicationPoint, fmi3Float64 communicationStepSize,
                      fmi3Boolean noSetFMUStatePriorToCurrentPoint, fmi3Boolean *eventHandlingNeeded,
                      fmi3Boolean *terminateSimulation, fmi3Boolean *earlyReturn, fmi3Float64 *lastSuccessfulTime)
{
    (void)noSetFMUStatePriorToCurrentPoint;
    if (eventHandlingNeeded) *eventHandlingNeeded = fmi3False;
    if (terminateSimulation) *terminateSimulation = fmi3False;
    if (earlyReturn) *earlyReturn = fmi3False;
    FA_GET(instance);
    if (FA_ME_OF(f)) FA_RET(fa_fmu_error(f, "fmi3DoStep", "the instance was instantiated for Model Exchange; "
                                         "instantiate it for Co-Simulation to step it"));
    FA_RET(fa_fmu_do_step(f, currentCommunicationPoint, communicationStepSize, lastSuccessfulTime, "fmi3DoStep"));
}

fmi3Status fmi3ActivateModelPartition(fmi3Instance instance, fmi3ValueReference clockReference,
                                      fmi3Float64 activationTime)
{
    FA_GET(instance);
    (void)clockReference; (void)activationTime;
    FA_UNSUPPORTED("fmi3ActivateModelPartition", fa_no_clocks);
}
