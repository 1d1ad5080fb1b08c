#ifndef VAN_DER_POL_CONFIG_H
#define VAN_DER_POL_CONFIG_H
/* van_der_pol_me (FMI 2.0 ME); van_der_pol_mecs and van_der_pol_me3 define the variant, then include this. */
#ifndef VAN_DER_POL_VARIANT
#define MODEL_NAME "van_der_pol"
#define INSTANTIATION_TOKEN "{0242f389-50fc-43fb-a3f6-04d1ea1351f5}"
#define HAS_CS 0
#define N_VARIABLES 8
#endif
#define HAS_ME 1
#define N_STATES 2
#define N_EVENT_INDICATORS 0
#define CAN_GET_AND_SET_STATE 1
#define CAN_SERIALIZE 1
#define HAS_DIRECTIONAL_DERIVATIVE

typedef struct {
    double x[2], mu, x_start[2], u, h_internal;
} Model;
#endif
