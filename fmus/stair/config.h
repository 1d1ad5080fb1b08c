#define MODEL_NAME "stair"
#define INSTANTIATION_TOKEN "{739bb72d-8c75-4a81-8dfa-a70a4ffd29e2}"
#define HAS_ME 1
#define HAS_CS 1
#define N_STATES 1
#define N_EVENT_INDICATORS 0
#define N_VARIABLES 10
#define CAN_GET_AND_SET_STATE 1
#define HAS_EVENTS
#define CAN_SERIALIZE 1
#define HAS_DO_STEP

typedef struct {
    double x, counter, period, a, c, h_internal;
} Model;
