#define MODEL_NAME "feedthrough"
#define INSTANTIATION_TOKEN "{92370763-976e-4c77-b39a-cbad01027d18}"
#define HAS_ME 1
#define HAS_CS 1
#define N_STATES 0
#define N_EVENT_INDICATORS 0
#define N_VARIABLES 6
#define CAN_GET_AND_SET_STATE 1
#define CAN_SERIALIZE 1
#define HAS_DO_STEP

typedef struct {
    double u, k, c, n;
} Model;
