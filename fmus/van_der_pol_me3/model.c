/* The Van der Pol model of van_der_pol_me/model.c, for FMI 3.0 by config.h (vr 8 is time). */
#include "config.h"
#include "../van_der_pol_me/model.c"
