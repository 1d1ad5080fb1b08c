#define MODEL_NAME "state_space3"
#define INSTANTIATION_TOKEN "{6e5003f9-5438-42b8-8630-0c1ed0d8f5b3}"
#define HAS_ME 1
#define HAS_CS 0
#define N_STATES 2
#define N_EVENT_INDICATORS 0
#define N_VARIABLES 12
#define CAN_GET_AND_SET_STATE 1
#define CAN_SERIALIZE 1

typedef struct {
    double x[2], A[4], B[2], x_start[2]; /* A row-major */
    float u, gain;
    unsigned char mode;
} Model;
