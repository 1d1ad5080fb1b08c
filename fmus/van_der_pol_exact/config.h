#ifndef VAN_DER_POL_EXACT_CONFIG_H
#define VAN_DER_POL_EXACT_CONFIG_H
/* van_der_pol_exact (FMI 2.0 ME and CS): the states' start values are the states, initial="exact". */
#define MODEL_NAME "van_der_pol_exact"
#define INSTANTIATION_TOKEN "{a8f3c2d1-5e7b-4c90-8d16-2b4e9f0a7c35}"
#define HAS_ME 1
#define HAS_CS 1
#define N_STATES 2
#define N_EVENT_INDICATORS 0
#define N_VARIABLES 6
#define CAN_GET_AND_SET_STATE 1
#define CAN_SERIALIZE 1

typedef struct {
    double x[2], mu, h_internal;
} Model;
#endif
