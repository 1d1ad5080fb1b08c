/* The Van der Pol model of van_der_pol_me/model.c, switched to ME and CS with h_internal by config.h. */
#include "config.h"
#include "../van_der_pol_me/model.c"
