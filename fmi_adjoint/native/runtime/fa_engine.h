/* fmi-adjoint runtime: the index-3 integrators of fmi_adjoint.integrate (HHT and
 * generalized-alpha, one step with the seven constants of fmi_adjoint.integrate.schemes) in C.
 *
 * The same residuals, the same Newton iteration (exact iteration matrix, the same
 * convergence and round-off-floor tests) and the same consistent initialization as the
 * Python engine, for one generated model (model.h).  No globals: every instance owns its
 * memory, so several instances can live at once.
 */
#ifndef FA_ENGINE_H
#define FA_ENGINE_H

#include <stddef.h>

#include "model.h"

/* Storage kinds of a planned matrix (model.h's FA_KKT_KIND, FA_INIT_KIND; fmi_adjoint.sparsity). */
#define FA_KIND_DENSE 0
#define FA_KIND_BAND 1
#define FA_KIND_SPARSE 2

#if defined(__GNUC__) && !defined(FA_EXPORT_ALL)
#pragma GCC visibility push(hidden) /* internal: an FMU exports only the FMI functions */
#endif

/* 1 if the n values are all finite, else 0. */
int fa_all_finite(const double *x, int n);

typedef struct fa_engine fa_engine;

#define FA_ONE(x) ((x) > 0 ? (x) : 1)

/* Non-zero values of M, J_M, K = J_C - J_Q, J_V = dQ/dv and C_q at one state, in the
 * order of the patterns fa_<X>_row/col of model.h. */
typedef struct {
    double M[FA_ONE(FA_NNZ_M)], JM[FA_ONE(FA_NNZ_JM)], K[FA_ONE(FA_NNZ_K)], JV[FA_ONE(FA_NNZ_JV)];
    double Cq[FA_ONE(FA_NNZ_Cq)];
} fa_jacobian_values;

/* Integration schemes (fa_settings.scheme), as AbstractScheme.code in schemes.py. */
#define FA_SCHEME_HHT 0
#define FA_SCHEME_GENERALIZED_ALPHA 1

/* The constants of the unified step (schemes.py, SchemeCoefficients). */
typedef struct {
    double beta, gamma, c_m, c_old, c_a, c_ao, c_bo;
} fa_coefficients;

/* Constants of scheme (FA_SCHEME_*) with its parameter (HHT alpha in [-1/3, 0],
 * generalized-alpha rho_inf in [0, 1]), by the formulas of schemes.py in the same order of
 * operations.  0, or -1 for an unknown scheme or a parameter out of range. */
int fa_scheme_coefficients(int scheme, double parameter, fa_coefficients *c);

/* Settings of a run; fa_engine_settings_default() fills the model's defaults. */
typedef struct {
    int scheme;          /* FA_SCHEME_HHT or FA_SCHEME_GENERALIZED_ALPHA */
    double alpha;        /* HHT alpha in [-1/3, 0] */
    double rho_inf;      /* generalized-alpha spectral radius at infinity in [0, 1] */
    double step;         /* fixed step h */
    double rtol;         /* Newton tolerance (default FA_NEWTON_RTOL, from Python) */
    int max_iterations;  /* Newton iterations per step (default FA_NEWTON_MAX_ITERATIONS) */
    int reuse_jacobian;  /* 1: modified Newton, the factored matrix kept over steps (hht.py) */
} fa_settings;

void fa_engine_settings_default(fa_settings *settings);

/* Returns NULL if memory is exhausted. */
fa_engine *fa_engine_new(void);
void fa_engine_free(fa_engine *engine);

/* Parameters (FA_NP values, model order); may be changed between steps. */
double *fa_engine_parameters(fa_engine *engine);

/* Consistent initial state at t0.  Returns 0 on success, -1 on failure (see message). */
int fa_engine_initialize(fa_engine *engine, double t0, const fa_settings *settings);

/* Advance by exactly one step t_i -> t_{i+1} = t0 + (i+1) h.  0 ok, -1 failure. */
int fa_engine_step(fa_engine *engine);

/* Advance from t_prev (the current time) to t: the batch runs' grid, whose last step may
 * be uneven (time_grid in hht.py).  0 ok, -1 failure. */
int fa_engine_step_to(fa_engine *engine, double t_prev, double t);

/* Current q, v, a, lambda; the consistent initial z = (q, mu, v, nu, a, lambda) of the
 * last initialization; Newton iterations of the last step and of the initialization. */
void fa_engine_current(const fa_engine *engine, double *q, double *v, double *a, double *lam);
const double *fa_engine_initial_z(const fa_engine *engine);
int fa_engine_last_iterations(const fa_engine *engine);
int fa_engine_init_iterations(const fa_engine *engine);
long fa_engine_factorizations(const fa_engine *engine);

/* A matrix in its planned storage (model.h: FA_KKT_* for the Newton matrix, FA_INIT_* for
 * the initialization matrix; fmi_adjoint.sparsity.MatrixStorage):
 *   dense, band  values holds FA_*_STORAGE doubles, factored in place, with the pivots piv;
 *   sparse       values holds the assembled (unfactored) non-zeros in the compressed columns
 *                of fa_*_colptr/rowind, and sparse the solver with their factorization
 *                (fa_sparse.h), so that the values can be stored and refactored bit for bit. */
typedef struct {
    double *values;
    int *piv;
    double *work;             /* n doubles: the permuted right-hand side of a dense or band solve */
    struct fa_sparse *sparse;
} fa_matrix;

/* Allocate the storage (and analyze the sparse pattern) of the Newton / initialization
 * matrix; 0, or -1 if memory is exhausted (the matrix is then released).  Release frees
 * what it holds (a zeroed fa_matrix is released safely). */
int fa_kkt_alloc(fa_matrix *kkt);
int fa_init_alloc(fa_matrix *Gz);
void fa_matrix_release(fa_matrix *a);

/* Shared with the adjoint and sensitivity sweeps (fa_driver.c): the Jacobian values at a
 * state, the Newton matrix of a step assembled and factored in the planned storage, solves
 * with it or its transpose (x in model order; _many: nrhs vectors of FA_NK values one after
 * the other), and the initialization Jacobian from its values.  Factor: 0, or -1 if the
 * matrix is singular (or not finite, or memory is exhausted for the sparse solver). */
void fa_jacobians_at(const double *q, const double *v, const double *a, const double *lam, double t,
                     const double *p, fa_jacobian_values *values);
int fa_kkt_factor(fa_matrix *kkt, const fa_jacobian_values *values, double c_m, double bh2, double gh);
/* Factor the values already assembled in kkt (a state restored with a sparse matrix). */
int fa_kkt_refactor(fa_matrix *kkt);
/* The scheme's parameter in settings: alpha (HHT) or rho_inf (generalized-alpha). */
double fa_settings_parameter(const fa_settings *settings);
void fa_kkt_solve(fa_matrix *kkt, double *x, int transposed);
void fa_kkt_solve_many(fa_matrix *kkt, double *x, int nrhs, int transposed);
int fa_init_factor(fa_matrix *Gz, const double *values);
void fa_init_solve(fa_matrix *Gz, double *x, int transposed);

/* The factorization's size (issue 24 part 4) of the engine's Newton matrix (which = 0) or
 * initialization matrix (which = 1), as last factored: the stored entries of the factors
 * (dense n^2, band its storage, sparse the non-zeros of L and U) and the bytes held
 * (storage, pivots, work vector and the sparse solver's pattern and factors). */
long fa_engine_factor_nnz(const fa_engine *engine, int which);
size_t fa_engine_matrix_bytes(const fa_engine *engine, int which);

/* Number of steps of a batch run, used in messages ("step i of N"); 0 if unknown. */
void fa_engine_set_planned_steps(fa_engine *engine, long n_steps);

/* Current time, step counter, outputs (FA_NY values) and the last error message. */
double fa_engine_time(const fa_engine *engine);
long fa_engine_step_count(const fa_engine *engine);
void fa_engine_outputs(const fa_engine *engine, double *y);
const char *fa_engine_message(const fa_engine *engine);

/* Complete state (time, step counter, scheme, q, v, a, lambda, abar, F_old, scales, parameters,
 * the Newton matrix of modified Newton; layout in fa_engine.c) as doubles, for FMU state
 * get/set and serialization.  set_state refactors a sparse matrix (0, or -1 if the buffer is
 * invalid or its matrix singular). */
size_t fa_engine_state_size(void);
void fa_engine_get_state(const fa_engine *engine, double *buffer);
int fa_engine_set_state(fa_engine *engine, const double *buffer);
/* 1 if the state buffer was written under settings' scheme, its alpha or rho_inf and step
 * (an FMU refuses a state of another integrator setting than it was exported with), else 0. */
int fa_engine_state_matches(const double *buffer, const fa_settings *settings);

#if defined(__GNUC__) && !defined(FA_EXPORT_ALL)
#pragma GCC visibility pop
#endif

#endif
