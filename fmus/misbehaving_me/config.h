#define MODEL_NAME "misbehaving_me"
#define INSTANTIATION_TOKEN "{3f0c6a52-8d1e-4b7a-9c25-71e4d0b9a6f3}"
#define HAS_ME 1
#define HAS_CS 0
#define N_STATES 1
#define N_EVENT_INDICATORS 1
#define N_VARIABLES 8
#define CAN_GET_AND_SET_STATE 1
#define HAS_EVENTS
#define CAN_SERIALIZE 0

typedef struct {
    double x, dir;
    double p[N_VARIABLES];  /* the parameters by value reference (x and der(x) unused) */
    unsigned long long random; /* xorshift64 state of the noise */
} Model;
