#ifndef INPUT_RAMP_CS_CONFIG_H
#define INPUT_RAMP_CS_CONFIG_H
/* input_ramp_cs (FMI 2.0 CS): an integrator of its input that interpolates the input within a step. */
#define MODEL_NAME "input_ramp_cs"
#define INSTANTIATION_TOKEN "{4c1e7a90-2b3d-4f58-a6e1-9d0c8b7f2e14}"
#define HAS_ME 0
#define HAS_CS 1
#define N_STATES 0
#define N_EVENT_INDICATORS 0
#define N_VARIABLES 5
#define CAN_GET_AND_SET_STATE 1
#define CAN_SERIALIZE 1
#define HAS_DO_STEP
#define HAS_INPUT_DERIVATIVES

typedef struct {
    double u, x, k, x_start, du;
} Model;
#endif
