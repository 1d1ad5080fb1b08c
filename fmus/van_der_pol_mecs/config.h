/* The Van der Pol model of van_der_pol_me/ for ME and CS, with h_internal (vr 8). */
#define VAN_DER_POL_VARIANT
#define MODEL_NAME "van_der_pol_mecs"
#define INSTANTIATION_TOKEN "{dee9e0d0-3d34-4e33-918e-4430eae4139e}"
#define HAS_CS 1
#define N_VARIABLES 9
#include "../van_der_pol_me/config.h"
