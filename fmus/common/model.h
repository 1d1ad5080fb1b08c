/*
 * The interface between a hand-written test FMU's model.c and the shared FMI layer
 * (fmi2.c, fmi3.c over instance.c), after the layout of the Modelica Association's Reference FMUs
 * (include/model.h there): the layer owns the FMI state machine, the checks of every
 * call, logging, FMU states and the Co-Simulation solver; a model only computes.
 *
 * Our own code, independent of the exporter's runtime (fa_fmu_common.c): the point of
 * these FMUs is to test the importer against binaries of another origin.  See fmus/README.md.
 *
 * A fixture's config.h defines, before this header is included:
 *   MODEL_NAME, INSTANTIATION_TOKEN, N_STATES, N_EVENT_INDICATORS, N_VARIABLES (value
 *   references 0 .. N_VARIABLES-1), HAS_ME / HAS_CS (0 or 1), CAN_GET_AND_SET_STATE,
 *   CAN_SERIALIZE, and `typedef struct {...} Model;` (the model's variables);
 *   optionally HAS_EVENTS (model.c has event indicators or time events), HAS_DO_STEP (model.c
 *   integrates a CS step itself; ZERO_STEP_ALLOWED: also H = 0), HAS_DIRECTIONAL_DERIVATIVE,
 *   HAS_INPUT_DERIVATIVES (FMI 2.0 CS: model.c takes fmi2SetRealInputDerivatives).
 */
#ifndef FMUS_MODEL_H
#define FMUS_MODEL_H

#include <stddef.h>

/* The FMI modes as bits, so that a call names the set of modes it is allowed in. */
enum {
    INSTANTIATED = 1, INITIALIZATION = 2, EVENT_MODE = 4, CONTINUOUS_TIME = 8, STEP_MODE = 16, TERMINATED = 32
};
#define ANY_MODE 63
#define BEFORE_INIT (INSTANTIATED | INITIALIZATION)

/* Variable types; every value travels as a double (exact for all of them). */
typedef enum { T_FLOAT64, T_INT32, T_BOOLEAN, T_FLOAT32, T_UINT8 } VarType;

/* Who may set a variable, and when (FMI 2.0 section 4.2.4, FMI 3.0 section 2.2.6.3):
   CALCULATED never; INPUT in any mode before termination; TUNABLE before and during
   initialization, in Event Mode and between steps; FIXED only before ExitInitializationMode. */
typedef enum { CALCULATED, INPUT, TUNABLE, FIXED } Kind;

typedef struct {
    VarType type;
    Kind kind;
    size_t size; /* number of elements (FMI 3.0 arrays); 1 for a scalar */
} Variable;

/* Everything that makes up the state of an instance: copied by the FMU state functions. */
typedef struct {
    int mode;
    int isCS; /* the interface of the instance: a state of the other one is refused */
    double startTime, time;
    unsigned steps; /* completed integrator steps since initialization (FMI 3.0 diagnostics) */
    Model m;
} ModelData;

/* What an event iteration reports (fmi2EventInfo, fmi3UpdateDiscreteStates). */
typedef struct {
    int newDiscreteStatesNeeded, valuesOfContinuousStatesChanged, nextEventTimeDefined;
    double nextEventTime;
} EventInfo;

/* ---- implemented by each fixture's model.c ---- */
extern const Variable variables[N_VARIABLES];
void setStartValues(Model *m);
/* ExitInitializationMode: start the states from their start values; a message refuses it. */
const char *exitInitialization(ModelData *d);
double getVariable(ModelData *d, unsigned vr, size_t element);
/* Only called for a variable whose kind allows it now; a message refuses the value. */
const char *setVariable(ModelData *d, unsigned vr, size_t element, double value);
void getStates(const ModelData *d, double x[]); /* before initialization: the start values */
void setStates(ModelData *d, const double x[]);
void getDerivatives(ModelData *d, double dx[]);
#ifdef HAS_EVENTS
void getEventIndicators(ModelData *d, double z[]);
void eventUpdate(ModelData *d, EventInfo *info);
#endif
#ifdef HAS_DO_STEP
const char *doStep(ModelData *d, double t, double h);
#endif
#ifdef HAS_INPUT_DERIVATIVES
/* fmi2SetRealInputDerivatives of a Real input (Step Mode or before): a message refuses it. */
const char *setInputDerivative(ModelData *d, unsigned vr, int order, double value);
#endif
#ifdef HAS_DIRECTIONAL_DERIVATIVE
const char *directionalDerivative(const ModelData *d, const unsigned unknowns[], size_t nUnknown,
                                  const unsigned knowns[], size_t nKnown, const double seed[], double sensitivity[]);
#endif

/* ---- provided by the layer (instance.c) ---- */
/* n = ceil(H / h) equal classic RK4 substeps of the model's derivatives; a ratio at most 1e-9
   above an integer counts as that integer.  States before and after are d's. */
void rk4Steps(ModelData *d, double H, double h);

#endif
