/* The Van der Pol model of van_der_pol_me/ for FMI 3.0 Model Exchange, with time (vr 8). */
#define VAN_DER_POL_VARIANT
#define MODEL_NAME "van_der_pol3"
#define INSTANTIATION_TOKEN "{5b0e3c1e-6f4a-4d0b-9a57-3c1f2e8d7a64}"
#define HAS_CS 0
#define N_VARIABLES 9
#define VR8_IS_TIME 1
#include "../van_der_pol_me/config.h"
