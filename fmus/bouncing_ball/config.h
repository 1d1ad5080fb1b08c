#define MODEL_NAME "bouncing_ball"
#define INSTANTIATION_TOKEN "{d52a5b5c-dff1-4047-8081-65c3155ef556}"
#define HAS_ME 1
#define HAS_CS 0
#define N_STATES 2
#define N_EVENT_INDICATORS 1
#define N_VARIABLES 10
#define CAN_GET_AND_SET_STATE 1
#define HAS_EVENTS
#define CAN_SERIALIZE 1

typedef struct {
    double h, v, g, e, h_start, v_start, floor_, k_curve;
} Model;
