"""The compiled model: exact derivatives of the assembled equations as numpy functions.

:func:`compile_model` differentiates the :class:`~fmi_adjoint.model.SymbolicModel` once
and generates vectorized functions for everything the integrator, the consistent
initialization, the discrete adjoint and the forward sensitivities need.  In the
notation of Lauss et al. 2018, eqs. (15)-(20), with ``F = C_q^T lambda - Q``:

=====================  ==========================================================
``residual_terms``     ``M a``, ``F``, ``C``
``jacobian_terms``     ``M``, ``J_M = d(M a)/dq``, ``K = J_C - J_Q``, ``J_V = dQ/dv``, ``C_q``
``parameter_terms``    ``d(M a)/dp``, ``dF/dp``, ``dC/dp``
``outputs``            ``y``
``output_jacobians``   ``dy/dq``, ``dy/dv``, ``dy/da``, ``dy/dlambda``, ``dy/dp``
``init_residual``      ``G(z)`` of the consistent initialization (see below)
``init_jacobians``     ``dG/dz``, ``dG/dp``
``init_guess``         the given initial positions and velocities (Newton's start)
``step_residual``      scalar variant of ``residual_terms`` (one state, Python floats)
``step_newton``        scalar ``residual_terms`` and ``jacobian_terms`` in one call
=====================  ==========================================================

The vectorized functions accept a leading batch axis (a whole trajectory); the scalar
ones serve the sequential Newton loop of the integrator, where per-call overhead counts.

Consistent initialization solves ``G(z, p) = 0`` for ``z = (q, mu, v, nu, a, lambda)``:
positions closest (least squares) to the given values subject to ``C = 0`` with fixed
coordinates held, velocities likewise subject to ``C_q v + C_t = 0``, then ``a`` and
``lambda`` from the equations of motion and the acceleration constraints
``C_q a + (C_q v)_q v + 2 C_qt v + C_tt = 0``.  Massless coordinates without a
constraint (internal nodes of Maxwell elements) satisfy their algebraic force balance
and its time derivatives instead of the projection (see ``_algebraic_rows``).  Writing it as one system lets the adjoint
carry parameter dependence of the initial state by one linear solve.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import sympy as sp

from .codegen import generate_function
from .errors import ModelError
from .model import Model, SymbolicModel, assemble

__all__ = ["CompiledModel", "ModelDerivatives", "compile_model", "differentiate"]

Function = Callable[..., tuple[np.ndarray, ...]]


@dataclasses.dataclass(frozen=True, eq=False)
class CompiledModel:
    """Numeric functions of one model; immutable and shareable between threads.

    Attributes
    ----------
    model : Model
        The definition it was compiled from.
    n, m, n_p, n_y : int
        Numbers of coordinates, constraints, parameters and outputs.
    coordinate_names, constraint_names, parameter_names, output_names : tuple of str
    defaults : numpy.ndarray
        Nominal parameter values, in the order of ``parameter_names``.
    mass_depends_on_q : bool
    """

    model: Model
    n: int
    m: int
    n_p: int
    n_y: int
    coordinate_names: tuple[str, ...]
    constraint_names: tuple[str, ...]
    parameter_names: tuple[str, ...]
    output_names: tuple[str, ...]
    defaults: np.ndarray
    mass_depends_on_q: bool
    residual_terms: Function
    jacobian_terms: Function
    parameter_terms: Function
    outputs: Function
    output_jacobians: Function
    init_residual: Function
    init_jacobians: Function
    step_residual: Function
    step_newton: Function
    init_guess: Function
    table_spans: tuple[tuple[str, float, float], ...] = ()

    def parameter_vector(self, values: dict[str, float] | None = None) -> np.ndarray:
        """Defaults with some values replaced (unknown names raise ModelError)."""
        p = self.defaults.copy()
        for name, value in (values or {}).items():
            p[self.parameter_index(name)] = float(value)
        return p

    def parameter_index(self, name: str) -> int:
        """Position of parameter ``name`` in the parameter vector."""
        return self._index(self.parameter_names, name, "parameter")

    def output_index(self, name: str) -> int:
        """Position of output ``name``."""
        return self._index(self.output_names, name, "output")

    def _index(self, names: tuple[str, ...], name: str, what: str) -> int:
        try:
            return names.index(name)
        except ValueError:
            raise ModelError(
                f"model '{self.model.name}' has no {what} '{name}'. {what.capitalize()}s: {', '.join(names)}."
            ) from None


def _jac(matrix: sp.Matrix, symbols) -> sp.Matrix:
    if len(symbols) == 0 or matrix.rows == 0:
        return sp.zeros(matrix.rows, len(symbols))
    return matrix.jacobian(sp.Matrix(symbols))


def _time_derivative(expr: sp.Expr, sym: SymbolicModel) -> sp.Expr:
    """Total time derivative along (q, v, a)."""
    return sum(
        (expr.diff(qk) * vk + expr.diff(vk) * ak for qk, vk, ak in zip(sym.q, sym.v, sym.a)),
        expr.diff(sym.t),
    )


def _algebraic_rows(sym: SymbolicModel, Cq: sp.Matrix, G1: sp.Matrix, G3: sp.Matrix, G5: sp.Matrix) -> None:
    """Initialization rows of massless coordinates that no constraint holds.

    Their equation of motion ``Q_k(q, v, t) = 0`` is algebraic (a Maxwell node's force
    balance).  If ``Q_k`` depends on velocities it fixes the node's velocity, and its
    time derivative the acceleration; if it depends on positions only, it fixes the
    position, its first derivative the velocity and its second the acceleration.  The
    projection rows of that coordinate are replaced accordingly (in place).
    """
    n = len(sym.q)
    for k in range(n):
        massless = all(sym.M[k, j] == 0 and sym.M[j, k] == 0 for j in range(n))
        constrained = Cq.rows and any(Cq[r, k] != 0 for r in range(Cq.rows))
        if not massless or constrained:
            continue
        Qk = sym.Q[k]
        name = sym.model.all_coordinates[k].name
        if Qk.has(*sym.v):
            G3[k] = Qk
            G5[k] = _time_derivative(Qk, sym)
        elif Qk.has(*sym.q):
            G1[k] = Qk
            G3[k] = _time_derivative(Qk, sym)
            G5[k] = _time_derivative(G3[k], sym)
        else:
            raise ModelError(
                f"model '{sym.model.name}': coordinate '{name}' has no mass, no constraint and no force "
                "depending on its motion, so the equations do not determine it. Give it a mass, a "
                "constraint or an element acting on it."
            )


@dataclasses.dataclass(frozen=True, eq=False)
class ModelDerivatives:
    """Every symbolic matrix the engine evaluates, derived once from the equations.

    The numpy functions of :class:`CompiledModel` and the C code of exported FMUs are
    both printed from these expressions, so the two engines compute the same thing.
    ``G`` is the consistent-initialization system in ``z = (q, mu, v, nu, a, lambda)``.
    """

    sym: SymbolicModel
    mu: tuple[sp.Symbol, ...]
    nu: tuple[sp.Symbol, ...]
    Ma: sp.Matrix
    F: sp.Matrix
    C: sp.Matrix
    M: sp.Matrix
    JM: sp.Matrix
    K: sp.Matrix
    JV: sp.Matrix
    Cq: sp.Matrix
    Ma_p: sp.Matrix
    F_p: sp.Matrix
    C_p: sp.Matrix
    Y: sp.Matrix
    Y_q: sp.Matrix
    Y_v: sp.Matrix
    Y_a: sp.Matrix
    Y_lam: sp.Matrix
    Y_p: sp.Matrix
    G: sp.Matrix
    G_z: sp.Matrix
    G_p: sp.Matrix
    q0: sp.Matrix
    v0: sp.Matrix


def differentiate(model: Model | SymbolicModel) -> ModelDerivatives:
    """Assemble (if needed) and differentiate a model symbolically."""
    sym = model if isinstance(model, SymbolicModel) else assemble(model)
    n, m = len(sym.q), len(sym.lam)
    q, v, a, lam, p, t = sym.q, sym.v, sym.a, sym.lam, sym.p, sym.t
    avec, lamvec = sp.Matrix(a), sp.Matrix(lam)
    Cq = _jac(sym.C, q)
    Ma = sym.M * avec
    F = (Cq.T * lamvec if m else sp.zeros(n, 1)) - sym.Q

    # Consistent initialization, one system G(z) = 0 (see module docstring).
    mu = tuple(sp.Symbol(f"mu_{k}", real=True) for k in range(m))
    nu = tuple(sp.Symbol(f"nu_{k}", real=True) for k in range(m))
    qvec, vvec = sp.Matrix(q), sp.Matrix(v)
    free_q = sp.diag(*[0 if f else 1 for f in sym.fixed_q]) if n else sp.zeros(0, 0)
    free_v = sp.diag(*[0 if f else 1 for f in sym.fixed_v]) if n else sp.zeros(0, 0)
    if m:
        Ct = sym.C.diff(t)
        G1 = (qvec - sym.q0) + free_q * Cq.T * sp.Matrix(mu)
        G2 = sym.C
        G3 = (vvec - sym.v0) + free_v * Cq.T * sp.Matrix(nu)
        G4 = Cq * vvec + Ct
        G6 = Cq * avec + _jac(Cq * vvec, q) * vvec + 2 * _jac(Ct, q) * vvec + Ct.diff(t)
    else:
        G1, G3 = qvec - sym.q0, vvec - sym.v0
    G5 = Ma + F
    _algebraic_rows(sym, Cq, G1, G3, G5)
    G = sp.Matrix.vstack(G1, G2, G3, G4, G5, G6) if m else sp.Matrix.vstack(G1, G3, G5)
    z = list(q) + list(mu) + list(v) + list(nu) + list(a) + list(lam)
    return ModelDerivatives(
        sym=sym, mu=mu, nu=nu, Ma=Ma, F=F, C=sym.C, M=sym.M,
        JM=_jac(Ma, q), K=_jac(F, q), JV=_jac(sym.Q, v), Cq=Cq,
        Ma_p=_jac(Ma, p), F_p=_jac(F, p), C_p=_jac(sym.C, p),
        Y=sym.Y, Y_q=_jac(sym.Y, q), Y_v=_jac(sym.Y, v), Y_a=_jac(sym.Y, a), Y_lam=_jac(sym.Y, lam),
        Y_p=_jac(sym.Y, p), G=G, G_z=_jac(G, z), G_p=_jac(G, p), q0=sym.q0, v0=sym.v0,
    )


def compile_model(model: Model | SymbolicModel) -> CompiledModel:
    """Differentiate and compile a model.

    Parameters
    ----------
    model : Model or SymbolicModel

    Returns
    -------
    CompiledModel
    """
    d = differentiate(model)
    sym = d.sym
    definition = sym.model
    q, v, a, lam, p, t = sym.q, sym.v, sym.a, sym.lam, sym.p, sym.t
    state = [("q", q), ("v", v), ("a", a), ("lam", lam), ("t", t), ("p", p)]
    init_args = [("q", q), ("mu", d.mu), ("v", v), ("nu", d.nu), ("a", a), ("lam", lam), ("t", t), ("p", p)]

    def gen(name, outputs, args=state, scalar=False):
        return generate_function(name, args, outputs, tables=sym.tables, scalar=scalar)

    residual = [list(d.Ma), list(d.F), list(d.C)]
    return CompiledModel(
        model=definition,
        n=len(q),
        m=len(lam),
        n_p=len(p),
        n_y=sym.Y.rows,
        coordinate_names=tuple(c.name for c in definition.all_coordinates),
        constraint_names=sym.constraint_names,
        parameter_names=tuple(par.name for par in definition.all_parameters),
        output_names=tuple(o.name for o in definition.outputs),
        defaults=np.array([par.value for par in definition.all_parameters], dtype=float),
        mass_depends_on_q=any(sym.M[i, j].has(*q) for i in range(len(q)) for j in range(len(q))),
        residual_terms=gen("residual_terms", residual),
        jacobian_terms=gen("jacobian_terms", [d.M, d.JM, d.K, d.JV, d.Cq]),
        parameter_terms=gen("parameter_terms", [d.Ma_p, d.F_p, d.C_p]),
        outputs=gen("outputs", [list(d.Y)]),
        output_jacobians=gen("output_jacobians", [d.Y_q, d.Y_v, d.Y_a, d.Y_lam, d.Y_p]),
        init_residual=gen("init_residual", [list(d.G)], init_args),
        init_jacobians=gen("init_jacobians", [d.G_z, d.G_p], init_args),
        init_guess=gen("init_guess", [list(d.q0), list(d.v0)], [("t", t), ("p", p)]),
        table_spans=tuple((where, times[0], times[-1]) for where, (_, times, _) in zip(sym.table_sources, sym.tables)),
        step_residual=gen("step_residual", residual, scalar=True),
        step_newton=gen("step_newton", residual + [d.M, d.JM, d.K, d.JV, d.Cq], scalar=True),
    )
