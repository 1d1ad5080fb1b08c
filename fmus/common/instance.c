/*
 * What the FMI 2.0 and 3.0 layers of the hand-written test FMUs share (instance.h): the state
 * machine as mode bits (FMI 2.0 figures 6 and 9, FMI 3.0 sections 3.2 and 4.2), the checks of
 * every call, the values through the variable table of model.c and the FMU states.
 *
 * The rules (fmus/README.md): an illegal call (wrong mode, unknown or unsettable value reference,
 * wrong array length, a function of the other interface) returns Error, logs a message under
 * logStatusError and changes nothing.  FMU states are ModelData, serialized byte for byte behind
 * a magic number and the size, so only the same binary reads them back.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "instance.h"

#define SERIAL_MAGIC 0x464d5553u
#define SERIAL_SIZE (2 * sizeof(unsigned) + sizeof(ModelData))

int logged(const Instance *inst, int status, const char *category, const char *format, ...) {
    char buffer[512];
    va_list args;
    if (inst == NULL || (status < STATUS_ERROR && !inst->loggingOn)) return status;
    va_start(args, format);
    vsnprintf(buffer, sizeof buffer, format, args);
    va_end(args);
    inst->emit(inst, status, category, buffer);
    return status;
}

Instance *allowed(void *c, const char *function, int modes) {
    Instance *inst = (Instance *)c;
    if (inst == NULL) return NULL;
#ifdef FA_ERROR_STATE_AT
    /* FMI 2.0 sec. 2.1.3 / FMI 3.0 sec. 2.2.3: after Error only these may be called */
    if (inst->errorState && !strstr(function, "Reset") && !strstr(function, "SetFMU") &&
        !strstr(function, "FreeInstance")) {
        FAIL(inst, "%s: the instance is in the error state (an earlier call returned Error).", function);
        return NULL;
    }
#endif
    if (!(inst->d.mode & modes)) {
        FAIL(inst, "%s must not be called in the current mode.", function);
        return NULL;
    }
    logged(inst, STATUS_OK, "logCalls", "%s", function);
    return inst;
}

Instance *of(void *c, const char *function, int cs, int modes) {
    Instance *inst = (Instance *)c;
    if (inst != NULL && inst->d.isCS != cs) {
        FAIL(inst, "%s is a %s function, but this is a %s instance.", function, cs ? "Co-Simulation" : "Model Exchange",
             cs ? "Model Exchange" : "Co-Simulation");
        return NULL;
    }
    return allowed(c, function, modes);
}

static Instance *vector(void *c, const char *function, int modes, const void *v, size_t n, size_t expected) {
    Instance *inst = of(c, function, 0, modes);
    if (inst != NULL && (n != expected || (n > 0 && v == NULL))) {
        FAIL(inst, "%s: expected %lu elements, got %lu.", function, (unsigned long)expected, (unsigned long)n);
        return NULL;
    }
    return inst;
}

int vectorCall(void *c, const char *function, VectorOp op, double v[], size_t n) {
    static const int modes[] = {ANY_MODE & ~INSTANTIATED, CONTINUOUS_TIME, ANY_MODE & ~INSTANTIATED,
                                ANY_MODE & ~INSTANTIATED, ANY_MODE};
    Instance *inst = vector(c, function, modes[op], v, n, op == GET_INDICATORS ? N_EVENT_INDICATORS : N_STATES);
    size_t i;
    if (inst == NULL) return STATUS_ERROR;
    switch (op) {
    case GET_STATES: getStates(&inst->d, v); break;
    case SET_STATES: setStates(&inst->d, v); break;
    case GET_DERIVATIVES:
#ifdef FA_ERROR_STATE_AT
        if (inst->d.time > FA_ERROR_STATE_AT) {
            inst->errorState = 1;
            return FAIL(inst, "%s: the model failed at t = %g (FA_ERROR_STATE_AT).", function, inst->d.time);
        }
#endif
#ifdef FA_CRASH_AT
        if (inst->d.time >= FA_CRASH_AT) *(volatile int *)NULL = 1; /* a crash of a Model Exchange FMU */
#endif
        getDerivatives(&inst->d, v);
        break;
#ifdef HAS_EVENTS
    case GET_INDICATORS: getEventIndicators(&inst->d, v); break;
#endif
    default: for (i = 0; i < n; i++) v[i] = 1.0; /* the nominals */
    }
    return STATUS_OK;
}

int refuse(void *c, const char *function, const char *why) {
    return c == NULL ? STATUS_ERROR : FAIL((Instance *)c, "%s: %s", function, why);
}

/* ---------------------------------------------------------------- lifecycle */

void resetInstance(Instance *inst) {
    int isCS = inst->d.isCS;
    inst->errorState = 0;
    memset(&inst->d, 0, sizeof inst->d);
    setStartValues(&inst->d.m);
    inst->d.isCS = isCS;
    inst->d.mode = INSTANTIATED;
}

int setDebugLogging(void *c, const char *function, int loggingOn, size_t n, const char *const categories[]) {
    Instance *inst = allowed(c, function, ANY_MODE);
    size_t i;
    if (inst == NULL) return STATUS_ERROR;
    for (i = 0; i < n; i++) {
        if (categories == NULL || categories[i] == NULL ||
            (strcmp(categories[i], "logStatusError") != 0 && strcmp(categories[i], "logCalls") != 0)) {
            return FAIL(inst, "%s: unknown log category (known: logStatusError, logCalls).", function);
        }
    }
    inst->loggingOn = loggingOn;
    return STATUS_OK;
}

/* FMI 2.0 fmi2SetupExperiment (modes: Instantiated) and FMI 3.0 fmi3EnterInitializationMode. */
int enterInitialization(void *c, const char *function, int mode, double start, int stopDefined, double stop) {
    Instance *inst = allowed(c, function, INSTANTIATED);
    if (inst == NULL) return STATUS_ERROR;
    if (stopDefined && stop < start) return FAIL(inst, "%s: stopTime < startTime.", function);
    inst->d.time = inst->d.startTime = start;
    inst->d.mode = mode;
    return STATUS_OK;
}

/* Model Exchange continues in Event Mode, Co-Simulation in Step Mode. */
int exitInitialization_(void *c, const char *function) {
    Instance *inst = allowed(c, function, INITIALIZATION);
    const char *problem;
    if (inst == NULL) return STATUS_ERROR;
    if ((problem = exitInitialization(&inst->d)) != NULL) return FAIL(inst, "%s: %s", function, problem);
    inst->d.steps = 0;
    inst->d.mode = inst->d.isCS ? STEP_MODE : EVENT_MODE;
    return STATUS_OK;
}

/* A plain change of mode: Enter...Mode, Terminate, Reset (mode INSTANTIATED: the start values again). */
int setMode(void *c, const char *function, int cs, int modes, int mode) {
    Instance *inst = cs < 0 ? allowed(c, function, modes) : of(c, function, cs, modes);
    if (inst == NULL) return STATUS_ERROR;
    if (mode == INSTANTIATED) resetInstance(inst);
    inst->d.mode = mode;
    return STATUS_OK;
}

/* ---------------------------------------------------------------- values */

/* Array variables count their elements in nValues (FMI 3.0 section 2.2.6.2; FMI 2.0: n). */
static Instance *checked(void *c, const char *function, int modes, VarType type, const unsigned vr[], size_t n,
                         const void *values, size_t nValues) {
    Instance *inst = allowed(c, function, modes);
    size_t i, total = 0;
    if (inst == NULL) return NULL;
    if (n > 0 && (vr == NULL || values == NULL)) {
        FAIL(inst, "%s: NULL argument.", function);
        return NULL;
    }
    for (i = 0; i < n; i++) {
        if (vr[i] >= N_VARIABLES || variables[vr[i]].type != type) {
            FAIL(inst, "%s: %u is not the value reference of a variable of this type.", function, vr[i]);
            return NULL;
        }
        total += variables[vr[i]].size;
    }
    if (total != nValues) {
        FAIL(inst, "%s: nValues is %lu, but the variables have %lu elements.", function, (unsigned long)nValues,
             (unsigned long)total);
        return NULL;
    }
    return inst;
}

int getValues(void *c, const char *function, VarType type, CType ctype, const unsigned vr[], size_t n, void *values,
              size_t nValues) {
    Instance *inst = checked(c, function, ANY_MODE, type, vr, n, values, nValues);
    size_t i, e, k = 0;
    double v;
    if (inst == NULL) return STATUS_ERROR;
    for (i = 0; i < n; i++) {
        for (e = 0; e < variables[vr[i]].size; e++, k++) {
            v = getVariable(&inst->d, vr[i], e);
            switch (ctype) {
            case C_DOUBLE: ((double *)values)[k] = v; break;
            case C_FLOAT: ((float *)values)[k] = (float)v; break;
            case C_INT: ((int *)values)[k] = type == T_BOOLEAN ? v != 0.0 : (int)v; break;
            case C_UINT8: ((unsigned char *)values)[k] = (unsigned char)v; break;
            default: ((_Bool *)values)[k] = v != 0.0;
            }
        }
    }
    return STATUS_OK;
}

/* Checks the whole call on a copy first, so that an illegal call changes nothing. */
int setValues(void *c, const char *function, VarType type, CType ctype, const unsigned vr[], size_t n,
              const void *values, size_t nValues) {
    Instance *inst = checked(c, function, BEFORE_INIT | EVENT_MODE | CONTINUOUS_TIME | STEP_MODE, type, vr, n, values,
                             nValues);
    ModelData copy;
    const char *problem;
    size_t i, e, k = 0;
    double v;
    if (inst == NULL) return STATUS_ERROR;
    copy = inst->d;
    for (i = 0; i < n; i++) {
        Kind kind = variables[vr[i]].kind;
        if (kind == CALCULATED) {
            return FAIL(inst, "%s: value reference %u is calculated (or the independent variable) and cannot be set.",
                        function, vr[i]);
        }
        if ((kind == FIXED && !(copy.mode & BEFORE_INIT)) || (kind == TUNABLE && (copy.mode & CONTINUOUS_TIME))) {
            return FAIL(inst, "%s: value reference %u cannot be set now: a fixed parameter only before "
                        "ExitInitializationMode, a tunable one not in Continuous-Time Mode (enter Event Mode first).",
                        function, vr[i]);
        }
        for (e = 0; e < variables[vr[i]].size; e++, k++) {
            switch (ctype) {
            case C_DOUBLE: v = ((const double *)values)[k]; break;
            case C_FLOAT: v = ((const float *)values)[k]; break;
            case C_INT: v = ((const int *)values)[k]; break;
            case C_UINT8: v = ((const unsigned char *)values)[k]; break;
            default: v = ((const _Bool *)values)[k];
            }
            if ((problem = setVariable(&copy, vr[i], e, v)) != NULL) return FAIL(inst, "%s: %s", function, problem);
        }
    }
    inst->d = copy;
    return STATUS_OK;
}

/* A type none of the models has: only empty calls succeed. */
int noValues(void *c, const char *function, size_t n) {
    Instance *inst = allowed(c, function, ANY_MODE);
    if (inst == NULL) return STATUS_ERROR;
    return n > 0 ? FAIL(inst, "%s: the model has no variables of this type.", function) : STATUS_OK;
}

/* ---------------------------------------------------------------- FMU state */

static Instance *stateful(void *c, const char *function, int serialize) {
    Instance *inst = allowed(c, function, ANY_MODE);
    if (inst != NULL && !(serialize ? CAN_SERIALIZE : CAN_GET_AND_SET_STATE)) {
        FAIL(inst, "%s: " MODEL_NAME " cannot %s its FMU state.", function, serialize ? "serialize" : "get and set");
        return NULL;
    }
    return inst;
}

static int store(Instance *inst, const char *function, const ModelData *from, void **state) {
    if (state == NULL) return FAIL(inst, "%s: NULL argument.", function);
    if (*state == NULL && (*state = inst->allocate(1, sizeof(ModelData))) == NULL) {
        return FAIL(inst, "%s: out of memory.", function);
    }
    memcpy(*state, from, sizeof(ModelData));
    return STATUS_OK;
}

int getState(void *c, const char *function, void **state) {
    Instance *inst = stateful(c, function, 0);
    return inst == NULL ? STATUS_ERROR : store(inst, function, &inst->d, state);
}

int setState(void *c, const char *function, const void *state) {
    Instance *inst = stateful(c, function, 0);
    if (inst == NULL) return STATUS_ERROR;
    if (state == NULL) return FAIL(inst, "%s: NULL FMU state.", function);
    if (((const ModelData *)state)->isCS != inst->d.isCS) {
        return FAIL(inst, "%s: the FMU state belongs to an instance of the other interface.", function);
    }
    memcpy(&inst->d, state, sizeof(ModelData));
    return STATUS_OK;
}

int freeState(void *c, const char *function, void **state) {
    Instance *inst = stateful(c, function, 0);
    if (inst == NULL) return STATUS_ERROR;
    if (state != NULL && *state != NULL) inst->release(*state);
    if (state != NULL) *state = NULL;
    return STATUS_OK;
}

int serializedStateSize(void *c, const char *function, const void *state, size_t *size) {
    Instance *inst = stateful(c, function, 1);
    if (inst == NULL) return STATUS_ERROR;
    if (state == NULL || size == NULL) return FAIL(inst, "%s: NULL argument.", function);
    *size = SERIAL_SIZE;
    return STATUS_OK;
}

int serializeState(void *c, const char *function, const void *state, unsigned char bytes[], size_t size) {
    Instance *inst = stateful(c, function, 1);
    unsigned header[2] = {SERIAL_MAGIC, (unsigned)sizeof(ModelData)};
    if (inst == NULL) return STATUS_ERROR;
    if (state == NULL || bytes == NULL || size != SERIAL_SIZE) {
        return FAIL(inst, "%s: NULL argument or wrong buffer size %lu.", function, (unsigned long)size);
    }
    memcpy(bytes, header, sizeof header);
    memcpy(bytes + sizeof header, state, sizeof(ModelData));
    return STATUS_OK;
}

int deserializeState(void *c, const char *function, const unsigned char bytes[], size_t size, void **state) {
    Instance *inst = stateful(c, function, 1);
    unsigned header[2];
    ModelData read;
    if (inst == NULL) return STATUS_ERROR;
    if (bytes == NULL || size != SERIAL_SIZE) {
        return FAIL(inst, "%s: NULL argument or wrong size %lu.", function, (unsigned long)size);
    }
    memcpy(header, bytes, sizeof header);
    memcpy(&read, bytes + sizeof header, sizeof read);
    if (header[0] != SERIAL_MAGIC || header[1] != sizeof(ModelData) || read.mode == 0 || (read.mode & ~ANY_MODE)) {
        return FAIL(inst, "%s: not a serialized " MODEL_NAME " state.", function);
    }
    return store(inst, function, &read, state);
}

/* ---------------------------------------------------------------- Model Exchange and Co-Simulation */

/* The Co-Simulation solver: n = ceil(H / h) equal classic RK4 substeps of the model's derivatives. */
void rk4Steps(ModelData *d, double H, double h) {
#if N_STATES > 0
    double x[N_STATES], k[4][N_STATES], stage[N_STATES], s, ratio = H / h;
    static const double along[4] = {0.0, 0.5, 0.5, 1.0};
    unsigned long n = (unsigned long)ceil(ratio - 1e-9 * fmax(1.0, ratio)), i;
    int j, r;
    s = H / (double)(n < 1 ? (n = 1) : n);
    getStates(d, x);
    for (i = 0; i < n; i++) {
        for (r = 0; r < 4; r++) { /* stage r at x + along[r] s k[r-1] (inputs held constant) */
            for (j = 0; j < N_STATES; j++) stage[j] = r == 0 ? x[j] : x[j] + along[r] * s * k[r - 1][j];
            setStates(d, stage);
            getDerivatives(d, k[r]);
        }
        for (j = 0; j < N_STATES; j++) x[j] += s / 6.0 * (k[0][j] + 2.0 * k[1][j] + 2.0 * k[2][j] + k[3][j]);
    }
    setStates(d, x);
#else
    (void)d, (void)H, (void)h;
#endif
}


int directionalDerivative_(void *c, const char *function, const unsigned unknowns[], size_t nUnknown,
                           const unsigned knowns[], size_t nKnown, const double seed[], double sensitivity[]) {
#ifdef HAS_DIRECTIONAL_DERIVATIVE
    Instance *inst = of(c, function, 0, ANY_MODE & ~INSTANTIATED);
    const char *problem;
    if (inst == NULL) return STATUS_ERROR;
    if ((nKnown > 0 && (knowns == NULL || seed == NULL)) || (nUnknown > 0 && (unknowns == NULL || sensitivity == NULL))) {
        return FAIL(inst, "%s: NULL argument.", function);
    }
    problem = directionalDerivative(&inst->d, unknowns, nUnknown, knowns, nKnown, seed, sensitivity);
    return problem == NULL ? STATUS_OK : FAIL(inst, "%s: %s", function, problem);
#else
    (void)unknowns, (void)nUnknown, (void)knowns, (void)nKnown, (void)seed, (void)sensitivity;
    return refuse(c, function, MODEL_NAME " has no directional derivatives.");
#endif
}

int updateDiscreteStates(void *c, const char *function, EventInfo *event) {
    Instance *inst = of(c, function, 0, EVENT_MODE);
    if (inst == NULL) return STATUS_ERROR;
#ifdef HAS_EVENTS
    eventUpdate(&inst->d, event);
#else
    (void)event; /* nothing to do */
#endif
    return STATUS_OK;
}

/* Counts the steps (state_space3's diagnostic output); asks for an event at every
 * FA_STEP_EVENT_EVERY-th step if that is defined, else never. */
int completedIntegratorStep(void *c, const char *function, int *enterEventMode) {
    Instance *inst = of(c, function, 0, CONTINUOUS_TIME);
    if (inst == NULL) return STATUS_ERROR;
    *enterEventMode = 0;
    inst->d.steps += 1;
#ifdef FA_STEP_EVENT_EVERY
    if (inst->d.steps % FA_STEP_EVENT_EVERY == 0) *enterEventMode = 1;
#endif
    return STATUS_OK;
}

int setTime(void *c, const char *function, double time) {
    Instance *inst = of(c, function, 0, EVENT_MODE | CONTINUOUS_TIME);
    if (inst == NULL) return STATUS_ERROR;
    inst->d.time = time;
    return STATUS_OK;
}

/* The communication point must be the FMU's time to within 1e-9 max(1, |t|); inputs are held. */
int doStep_(void *c, const char *function, double t, double h, int zeroAllowed) {
    Instance *inst = of(c, function, 1, STEP_MODE);
    const char *problem = NULL;
    if (inst == NULL) return STATUS_ERROR;
    if (!(h > 0.0) && !(zeroAllowed && h == 0.0)) {
        return FAIL(inst, "%s: communicationStepSize must be > 0 (got %g).", function, h);
    }
    if (fabs(t - inst->d.time) > 1e-9 * fmax(1.0, fabs(inst->d.time))) {
        return FAIL(inst, "%s: currentCommunicationPoint %.17g is not the FMU's time %.17g.", function, t, inst->d.time);
    }
#if defined(HAS_DO_STEP)
    problem = doStep(&inst->d, t, h);
#elif HAS_CS
    rk4Steps(&inst->d, h, inst->d.m.h_internal);
#endif
    if (problem != NULL) return FAIL(inst, "%s: %s", function, problem);
    inst->d.time = t + h;
    return STATUS_OK;
}
