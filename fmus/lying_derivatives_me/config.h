#define MODEL_NAME "lying_derivatives"
#define INSTANTIATION_TOKEN "{c4a7e2d1-5b3f-4e8a-9d60-2f1b7c8e3a95}"
#define HAS_ME 1
#define HAS_CS 0
#define N_STATES 2
#define N_EVENT_INDICATORS 0
#define N_VARIABLES 13
#define CAN_GET_AND_SET_STATE 1
#define CAN_SERIALIZE 1
#define HAS_DIRECTIONAL_DERIVATIVE

typedef struct {
    double x[2];
    double p[N_VARIABLES]; /* the parameters and the input by value reference (the others unused) */
} Model;
