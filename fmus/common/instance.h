/*
 * The part of the FMI layer that FMI 2.0 (fmi2.c) and FMI 3.0 (fmi3.c) share (instance.c): an
 * instance, its checks and its values and FMU states, with the status of both versions (OK = 0,
 * Error = 3 in fmi2Status and fmi3Status alike).
 */
#ifndef FMUS_INSTANCE_H
#define FMUS_INSTANCE_H

#include "model.h"

enum { STATUS_OK = 0, STATUS_ERROR = 3 };

/* The C type of the caller's array in a get or set call. */
typedef enum { C_DOUBLE, C_FLOAT, C_INT, C_UINT8, C_BOOL } CType;

typedef struct Instance {
    ModelData d;
    char name[128];
    int loggingOn;
    /* FA_ERROR_STATE_AT: an Error was returned; only Reset, SetFMUState and FreeInstance work */
    int errorState;
    /* the layer's logger call, and the memory functions (FMI 2.0: the importer's callbacks) */
    void (*emit)(const struct Instance *inst, int status, const char *category, const char *message);
    void *(*allocate)(size_t n, size_t size);
    void (*release)(void *memory);
} Instance;

/* Logs a message (errors always, others only with logging on) and returns its status. */
int logged(const Instance *inst, int status, const char *category, const char *format, ...);
#define FAIL(inst, ...) logged((inst), STATUS_ERROR, "logStatusError", __VA_ARGS__)
/* The instance, if `function` may be called in its mode (else NULL, with the error logged). */
Instance *allowed(void *c, const char *function, int modes);
/* Likewise, and the instance is of interface `cs` (0: Model Exchange). */
Instance *of(void *c, const char *function, int cs, int modes);
/* The Model Exchange functions of a vector of the continuous states or event indicators. */
typedef enum { GET_STATES, SET_STATES, GET_DERIVATIVES, GET_INDICATORS, GET_NOMINALS } VectorOp;
int vectorCall(void *c, const char *function, VectorOp op, double v[], size_t n);

void resetInstance(Instance *inst);
int setDebugLogging(void *c, const char *function, int loggingOn, size_t n, const char *const categories[]);
int enterInitialization(void *c, const char *function, int modes, double start, int stopDefined, double stop);
int exitInitialization_(void *c, const char *function);
int setMode(void *c, const char *function, int cs, int modes, int mode);
int getValues(void *c, const char *function, VarType type, CType ctype, const unsigned vr[], size_t n, void *values,
              size_t nValues);
int setValues(void *c, const char *function, VarType type, CType ctype, const unsigned vr[], size_t n,
              const void *values, size_t nValues);
int noValues(void *c, const char *function, size_t n);
int refuse(void *c, const char *function, const char *why);

int getState(void *c, const char *function, void **state);
int setState(void *c, const char *function, const void *state);
int freeState(void *c, const char *function, void **state);
int serializedStateSize(void *c, const char *function, const void *state, size_t *size);
int serializeState(void *c, const char *function, const void *state, unsigned char bytes[], size_t size);
int deserializeState(void *c, const char *function, const unsigned char bytes[], size_t size, void **state);

int directionalDerivative_(void *c, const char *function, const unsigned unknowns[], size_t nUnknown,
                           const unsigned knowns[], size_t nKnown, const double seed[], double sensitivity[]);
int updateDiscreteStates(void *c, const char *function, EventInfo *event);
int completedIntegratorStep(void *c, const char *function, int *enterEventMode);
int setTime(void *c, const char *function, double time);
/* The checks of a Co-Simulation step, the step (the model's or RK4) and the new time. */
int doStep_(void *c, const char *function, double t, double h, int zeroAllowed);

#endif
