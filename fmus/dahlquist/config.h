#define MODEL_NAME "dahlquist"
#define INSTANTIATION_TOKEN "{588c210b-916b-46f0-ad6c-eaff38e78725}"
#define HAS_ME 1
#define HAS_CS 1
#define N_STATES 1
#define N_EVENT_INDICATORS 0
#define N_VARIABLES 6
#define CAN_GET_AND_SET_STATE 1
#define CAN_SERIALIZE 1

typedef struct {
    double x, k, x_start, h_internal;
} Model;
