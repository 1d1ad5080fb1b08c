#define MODEL_NAME "duffing"
#define INSTANTIATION_TOKEN "{d8191f67-4868-4680-b417-25a68735adf8}"
#define HAS_ME 0
#define HAS_CS 1
#define N_STATES 2
#define N_EVENT_INDICATORS 0
#define N_VARIABLES 12
#define CAN_GET_AND_SET_STATE 1
#define CAN_SERIALIZE 1
#define HAS_DO_STEP
#define ZERO_STEP_ALLOWED 1

typedef struct {
    double x, v;
    double p[N_VARIABLES]; /* F and the parameters by value reference (3 to 11) */
} Model;
