#define MODEL_NAME "faulty_decay"
#define INSTANTIATION_TOKEN "{6f1c2a4e-93d0-4b8e-a7c5-2e1f0d9b8a73}"
#define HAS_ME 0
#define HAS_CS 1
#define N_STATES 1
#define N_EVENT_INDICATORS 0
#define N_VARIABLES 3
#define CAN_GET_AND_SET_STATE 0
#define CAN_SERIALIZE 0
#define HAS_DO_STEP

typedef struct {
    double x, k, x_start;
} Model;
