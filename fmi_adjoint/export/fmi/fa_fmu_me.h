/* fmi-adjoint: the Model Exchange core of an exported FMU, independent of the FMI version.
 *
 * Continuous state x = (q, v) (2n values), derivatives xdot = (v, a), where the accelerations a
 * and the multipliers lambda solve the index-1 form of the equations of motion at (t, q, v, p):
 *
 *     [ M    C_q^T ] [ a      ]     [ Q - M a|_(a=0)                          ]
 *     [ C_q  0     ] [ lambda ]  = -[ (C_q v)_q v + 2 C_qt v + C_tt          ],
 *
 * i.e. the rows G5 (M a + C_q^T lambda - Q) and G6 (acceleration constraints) of the consistent-
 * initialization system G(z) of fmi_adjoint/compiled.py, solved with the engine's Newton matrix
 * (fa_kkt_factor with c_m = 1, bh2 = gh = 0, in its planned dense, band or sparse storage).
 * Outputs y(t, q, v, a, lambda, p); directional (J w) and adjoint (J^T w) products of
 * d(xdot, y)/d(x, p), exact from the generated Jacobians; their structural sparsity; the
 * constraint drift and its mass-orthogonal projection (event mode).
 *
 * Massless coordinates that no constraint holds (the algebraic rows of Maxwell nodes,
 * fmi_adjoint/equations.py _algebraic_rows) make the matrix above singular: such a model is
 * refused by name (fa_me_supported), not solved with an inner Newton iteration.
 *
 * No globals: every fa_me owns its memory.
 */
#ifndef FA_FMU_ME_H
#define FA_FMU_ME_H

#include <stddef.h>

#include "fa_engine.h"

#if defined(__GNUC__) && !defined(FA_EXPORT_ALL)
#pragma GCC visibility push(hidden)
#endif

#define FA_ME_NX (2 * FA_N)

/* Default drift tolerance (relative): the FMU asks for event mode when
 * max|C(q)| > tol (1 + max|q|) or max|C_q v + C_t| > tol (1 + max|v|).  The FMU exposes it
 * as the tunable parameter "me.drift_tolerance" (fa_fmu_common.h FA_VR_DRIFT_TOLERANCE; the
 * model description's start value is read from this line by fmi_adjoint/export/fmu_export.py). */
#define FA_ME_DRIFT_TOLERANCE 1e-8
/* Smallest tolerance accepted (the variable's min): about 50 units of double-precision
 * round-off of the scaled violation; a tighter band is round-off the projection cannot meet. */
#define FA_ME_DRIFT_TOLERANCE_MIN 1e-14
/* Newton iterations of the position projection before it gives up. */
#define FA_ME_PROJECTION_ITERATIONS 20

typedef struct fa_me fa_me;

/* 0 if the model can run as Model Exchange; -1 with the reason in message (the massless,
 * unconstrained coordinates by name) otherwise. */
int fa_me_supported(char *message, size_t size);

/* NULL if memory is exhausted.  Parameters start at the model's defaults, t = 0, x = 0. */
fa_me *fa_me_new(void);
void fa_me_free(fa_me *me);
const char *fa_me_message(const fa_me *me);

/* Setters invalidate the cached solution (a, lambda) and its factorization. */
void fa_me_set_time(fa_me *me, double t);
void fa_me_set_states(fa_me *me, const double *x);
void fa_me_set_parameters(fa_me *me, const double *p);
double fa_me_time(const fa_me *me);
void fa_me_get_states(const fa_me *me, double *x);
const double *fa_me_parameters(const fa_me *me);
void fa_me_set_drift_tolerance(fa_me *me, double tolerance);
double fa_me_drift_tolerance(const fa_me *me);

/* Consistent initial state at t0 through the engine's initialization (fa_engine_initialize,
 * the same least-squares projection as the in-process engine); sets t and x.  0 or -1. */
int fa_me_initialize(fa_me *me, double t0);

/* xdot = (v, a) (2n values); lambda (m values, may be NULL); outputs y (FA_NY values).
 * 0, or -1 if the matrix is singular or a value is not finite (see fa_me_message). */
int fa_me_derivatives(fa_me *me, double *xdot, double *lam);
int fa_me_outputs(fa_me *me, double *y);

/* Directional derivative: dxdot = d xdot/dx dx + d xdot/dp dp, dy likewise (dx, dp may be NULL
 * for zero seeds; dxdot, dy may be NULL when not wanted).  0 or -1. */
int fa_me_directional(fa_me *me, const double *dx, const double *dp, double *dxdot, double *dy);
/* Adjoint product: gx = (d xdot/dx)^T wxdot + (dy/dx)^T wy, gp likewise (wxdot, wy may be NULL
 * for zero weights; gx, gp may be NULL).  The transposed KKT solve.  0 or -1. */
int fa_me_adjoint(fa_me *me, const double *wxdot, const double *wy, double *gx, double *gp);

/* Structural dependencies (1 / 0, row-major): d xdot/dx (2n x 2n), d xdot/dp (2n x np),
 * dy/dx (ny x 2n), dy/dp (ny x np), from the generated patterns (the structural non-zeros
 * of K^-1 by a matching of K's pattern, see fa_fmu_me.c).  Any may be NULL.  0, or -1 if
 * memory is exhausted or K is structurally singular. */
int fa_me_dependencies(unsigned char *xdot_x, unsigned char *xdot_p, unsigned char *y_x, unsigned char *y_p);

/* 1 if tolerance is a drift tolerance the core accepts (finite, >= FA_ME_DRIFT_TOLERANCE_MIN). */
int fa_me_drift_tolerance_valid(double tolerance);

/* FMU state of the core (fmi2GetFMUstate / fmi3GetFMUState of a Model Exchange instance):
 * t, the drift tolerance (at FA_ME_STATE_TOLERANCE), q, v and p, fa_me_state_size() values.
 * fa_me_state_valid: 1 if b holds such a state (finite values, a valid tolerance), else 0;
 * fa_me_set_state restores a valid one (and invalidates the cached solution). */
#define FA_ME_STATE_TOLERANCE 1
size_t fa_me_state_size(void);
void fa_me_get_state(const fa_me *me, double *b);
int fa_me_state_valid(const double *b);
void fa_me_set_state(fa_me *me, const double *b);

/* Constraint violation at the current state, scaled by the tolerance's reference
 * (max|C| / (1 + max|q|), max|C_q v + C_t| / (1 + max|v|)).  Either may be NULL. */
void fa_me_drift(fa_me *me, double *position, double *velocity);
/* After a completed integrator step: *enter_event_mode = 1 when a drift exceeds the tolerance. */
void fa_me_completed_step(fa_me *me, int *enter_event_mode);
/* Event mode: mass-orthogonal projection of q onto C(q) = 0 (Newton, until the violation is
 * 1e-3 of the tolerance, or within the tolerance and no longer falling: round-off), then of v
 * onto C_q v + C_t = 0; *changed = 1 if the states moved.  0 or -1 (singular, no convergence). */
int fa_me_project(fa_me *me, int *changed);

#if defined(__GNUC__) && !defined(FA_EXPORT_ALL)
#pragma GCC visibility pop
#endif

#endif
