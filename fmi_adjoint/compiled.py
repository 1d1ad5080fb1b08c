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
import json
import marshal
import sys
import weakref
from collections.abc import Callable
from pathlib import Path

import numpy as np
import sympy as sp

from .cache import BuildCache, CacheError, fingerprint, source_fingerprint
from .codegen import compile_source, function_source, load_function, numeric_calls
from .cse import ReducedOutputs, reduce_outputs
from .errors import FmiAdjointError, ModelError
from .forces.numeric import AbstractNumericElement
from .model import Model, SymbolicModel, assemble

__all__ = ["CompiledModel", "Derivation", "GeneratedFunction", "ModelDerivatives", "ModelStructure", "SecondOrder",
           "compile_model", "compile_second_order", "differentiate", "function_table", "group_sizes", "model_key",
           "numpy_sources",
           "second_order_table"]

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
    """Jacobian, differentiating each entry only by the symbols it contains.

    ``Matrix.jacobian`` differentiates every entry by every symbol; for the sparse
    equations of a multibody model nearly all of those derivatives are zero, and on
    engine_tvd they took 12 s of 13 (issue 11).  Opaque functions (tables, numeric
    elements) may depend on a symbol through their arguments, which ``free_symbols`` sees.
    """
    symbols = list(symbols)
    result = sp.zeros(matrix.rows, len(symbols))
    if not symbols or matrix.rows == 0:
        return result
    if matrix.cols != 1:
        raise ValueError("_jac differentiates column vectors only")
    position = {s: k for k, s in enumerate(symbols)}
    for i in range(matrix.rows):
        for sym, derivative in _derivatives(matrix[i, 0], position).items():
            result[i, position[sym]] = derivative
    return result


#: An Add or Mul with more arguments than this is differentiated term by term (below).
_WIDE = 16


def _derivatives(expr: sp.Expr, targets) -> dict:
    """``{s: d expr/d s}`` for the symbols ``s`` of ``targets`` that ``expr`` contains.

    ``expr.diff(s)`` walks all of ``expr`` for every ``s``: on a designed input ``u(t) =
    sum_k xi_k phi_k(t)`` of K knots that is K walks of K terms, and the build of a 2001-knot
    design spent minutes there (issue 31).  A wide sum or product is therefore split here:
    each term is differentiated only by the symbols it contains (the product rule for a
    product), which gives sympy's own result term by term in time linear in the size.
    Narrow expressions keep ``expr.diff`` (the same expressions as before for every model).
    """
    if isinstance(expr, (sp.Add, sp.Mul)) and len(expr.args) > _WIDE or any(
            isinstance(arg, sp.Add) and len(arg.args) > _WIDE for arg in expr.args):
        if isinstance(expr, sp.Add):
            parts: dict = {}
            for arg in expr.args:
                for sym, derivative in _derivatives(arg, targets).items():
                    parts.setdefault(sym, []).append(derivative)
            return {sym: sp.Add(*terms) for sym, terms in parts.items()}
        if isinstance(expr, sp.Mul):
            args = expr.args
            parts = {}
            for j, arg in enumerate(args):
                for sym, derivative in _derivatives(arg, targets).items():
                    parts.setdefault(sym, []).append(sp.Mul(*args[:j], derivative, *args[j + 1:]))
            return {sym: sp.Add(*terms) for sym, terms in parts.items()}
    return {sym: expr.diff(sym) for sym in expr.free_symbols if sym in targets}


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


#: Argument groups of the generated functions (symbols from ModelDerivatives).
STATE_ARGS = ("q", "v", "a", "lam", "t", "p")
INIT_ARGS = ("q", "mu", "v", "nu", "a", "lam", "t", "p")
GUESS_ARGS = ("t", "p")


@dataclasses.dataclass(frozen=True, eq=False)
class GeneratedFunction:
    """One row of the table of generated functions.

    Every backend loops over :func:`function_table`: the numpy printer
    (:mod:`fmi_adjoint.codegen`) and the C printer (:mod:`fmi_adjoint.native.model_code`),
    so a derivative is added in one place and the engines cannot drift.

    Attributes
    ----------
    name : str
        Python attribute of :class:`CompiledModel`; the C function is ``fa_<name>``.
    args : tuple of str
        Argument groups (``STATE_ARGS``, ``INIT_ARGS`` or ``GUESS_ARGS``).
    outputs : tuple of (str, sympy.Matrix, bool)
        ``(name, matrix, is_vector)``.  Matrices are printed dense by numpy and as the
        values of their structurally non-zero entries (row-major order) by C.
    numpy : bool
        Generate the vectorized numpy function (batch axis first).
    scalar : str or None
        Name of the scalar numpy variant (one state, Python floats) used by the Newton loop.
    """

    name: str
    args: tuple[str, ...]
    outputs: tuple[tuple[str, sp.Matrix, bool], ...]
    numpy: bool = True
    scalar: str | None = None


def function_table(d: ModelDerivatives) -> tuple[GeneratedFunction, ...]:
    """The generated functions of a model and the matrices each returns."""

    def vec(name: str, matrix: sp.Matrix) -> tuple[str, sp.Matrix, bool]:
        return (name, matrix, True)

    def mat(name: str, matrix: sp.Matrix) -> tuple[str, sp.Matrix, bool]:
        return (name, matrix, False)

    residual = (vec("Ma", d.Ma), vec("F", d.F), vec("C", d.C))
    jacobians = (mat("M", d.M), mat("JM", d.JM), mat("K", d.K), mat("JV", d.JV), mat("Cq", d.Cq))
    return (
        GeneratedFunction("residual_terms", STATE_ARGS, residual, scalar="step_residual"),
        GeneratedFunction("newton", STATE_ARGS, residual + jacobians, numpy=False, scalar="step_newton"),
        GeneratedFunction("jacobian_terms", STATE_ARGS, jacobians),
        GeneratedFunction("parameter_terms", STATE_ARGS, (mat("Ma_p", d.Ma_p), mat("F_p", d.F_p), mat("C_p", d.C_p))),
        GeneratedFunction("outputs", STATE_ARGS, (vec("y", d.Y),)),
        GeneratedFunction("output_jacobians", STATE_ARGS, (mat("Y_q", d.Y_q), mat("Y_v", d.Y_v), mat("Y_a", d.Y_a),
                                                            mat("Y_lam", d.Y_lam), mat("Y_p", d.Y_p))),
        GeneratedFunction("init_guess", GUESS_ARGS, (vec("q0", d.q0), vec("v0", d.v0))),
        GeneratedFunction("init_residual", INIT_ARGS, (vec("G", d.G),)),
        GeneratedFunction("init_jacobians", INIT_ARGS, (mat("G_z", d.G_z), mat("G_p", d.G_p))),
    )


def argument_symbols(d: ModelDerivatives) -> dict[str, tuple[sp.Symbol, ...] | sp.Symbol]:
    """Symbols of each argument group (those of :func:`second_order_table` included)."""
    sym = d.sym
    groups: dict[str, tuple[sp.Symbol, ...] | sp.Symbol] = {
        "q": sym.q, "v": sym.v, "a": sym.a, "lam": sym.lam, "t": sym.t, "p": sym.p, "mu": d.mu, "nu": d.nu}
    sizes = group_sizes(len(sym.q), len(sym.lam), sym.Y.rows, len(sym.p))
    for group, size in sizes.items():
        if group not in groups:
            groups[group] = tuple(sp.Symbol(f"{group}_{k}", real=True) for k in range(size))
    return groups


def group_sizes(n: int, m: int, n_y: int, n_p: int) -> dict[str, int]:
    """Entries of each vector argument group (``t`` is a scalar, ``p`` shared by a batch):
    the one table the numpy symbols, the C batch drivers and their binding read."""
    return {"q": n, "v": n, "a": n, "lam": m, "p": n_p, "mu": m, "nu": m, "wM": n, "wF": n, "wC": m, "wY": n_y,
            "dq": n, "dv": n, "da": n, "dlam": m, "dp": n_p, "wG": 3 * n + 3 * m, "dz": 3 * n + 3 * m}


def _init_unknowns(d: ModelDerivatives) -> list[sp.Symbol]:
    """``z = (q, mu, v, nu, a, lambda)`` of the consistent initialization."""
    sym = d.sym
    return list(sym.q) + list(d.mu) + list(sym.v) + list(d.nu) + list(sym.a) + list(sym.lam)


#: Argument groups of the second-order functions: the state, the adjoint weights of
#: ``M a``, ``F``, ``C`` and ``y``, and a direction ``(dq, dv, da, dlam, dp)``.
SECOND_STEP_ARGS = STATE_ARGS + ("wM", "wF", "wC", "wY", "dq", "dv", "da", "dlam", "dp")
SECOND_INIT_ARGS = INIT_ARGS + ("wG", "dz", "dp")


def _gradient(phi: sp.Expr, symbols) -> sp.Matrix:
    """Gradient of a scalar, differentiating only by the symbols it contains."""
    return _jac(sp.Matrix([phi]), symbols).T


def second_order_table(d: ModelDerivatives) -> tuple[GeneratedFunction, ...]:
    """Second derivatives of the model, as directional derivatives of its Jacobians.

    For weights ``w`` and a direction ``delta = (dq, dv, da, dlam, dp)``,
    ``step_second`` returns the gradient with respect to ``(q, v, a, lambda, p)`` of ::

        phi = wM^T (Ma)' delta + wF^T F' delta + wC^T C' delta + wY^T y' delta

    (``g' delta`` the directional derivative ``g_z delta_z + g_p dp``), and
    ``init_second`` that of ``wG^T (G_z dz + G_p dp)`` with respect to ``(z, p)``.  They
    are what the adjoint of the extended system (state and forward sensitivities) needs
    (:mod:`fmi_adjoint.design.fisher`): every Hessian enters only contracted with one
    adjoint and one sensitivity column, so nothing of size ``n^3`` is formed.  A separate
    table from :func:`function_table`: ordinary builds (and FMUs) do not carry it.
    """
    g = argument_symbols(d)
    sym = d.sym
    state = [*sym.q, *sym.v, *sym.a, *sym.lam]
    direction = [*g["dq"], *g["dv"], *g["da"], *g["dlam"]]
    dp = sp.Matrix(g["dp"])
    n, m = len(sym.q), len(sym.lam)

    def directional(matrix: sp.Matrix) -> sp.Matrix:
        if matrix.rows == 0:
            return sp.zeros(0, 1)
        jz = _jac(matrix, state)
        return jz * sp.Matrix(direction) + _jac(matrix, sym.p) * dp

    phi = sp.Integer(0)
    for weights, matrix in (("wM", d.Ma), ("wF", d.F), ("wC", d.C), ("wY", d.Y)):
        if matrix.rows:
            phi += (sp.Matrix(g[weights]).T * directional(matrix))[0, 0]
    grads = _gradient(phi, state + list(sym.p))
    k = [0, n, 2 * n, 3 * n, 3 * n + m, 3 * n + m + len(sym.p)]
    names = ("Sq", "Sv", "Sa", "Slam", "Sp")
    step = tuple((names[i], grads[k[i]:k[i + 1], :], True) for i in range(5))

    z = _init_unknowns(d)
    G_dir = d.G_z * sp.Matrix(g["dz"]) + d.G_p * dp
    psi = (sp.Matrix(g["wG"]).T * G_dir)[0, 0]
    init_grads = _gradient(psi, z + list(sym.p))
    init = (("Iz", init_grads[:len(z), :], True), ("Ip", init_grads[len(z):, :], True))
    return (GeneratedFunction("step_second", SECOND_STEP_ARGS, step),
            GeneratedFunction("init_second", SECOND_INIT_ARGS, init))


def numpy_sources(derivation: Derivation, rows: tuple[GeneratedFunction, ...] | None = None) -> dict[str, str]:
    """Source of every numpy function of the table (or of ``rows``), by attribute name."""
    groups = argument_symbols(derivation.derivatives)
    sources: dict[str, str] = {}
    for row in derivation.table if rows is None else rows:
        args = [(g, groups[g]) for g in row.args]
        batch = "t" if "t" in row.args else "p"
        if row.numpy:
            sources[row.name] = function_source(row.name, args, derivation.reduced(row), batch_arg=batch)
        if row.scalar:
            sources[row.scalar] = function_source(row.scalar, args, derivation.reduced(row), batch_arg=batch,
                                                  scalar=True)
    return sources


@dataclasses.dataclass(frozen=True)
class ModelStructure:
    """What the generated code of a model needs besides its definition: sizes and facts
    read off the equations.  Stored in the build cache next to the sources.

    ``tables`` holds ``(function name, times, values)`` of the time tables the code calls.
    """

    n: int
    m: int
    n_y: int
    constraint_names: tuple[str, ...]
    mass_depends_on_q: bool
    table_spans: tuple[tuple[str, float, float], ...]
    tables: tuple[tuple[str, tuple[float, ...], tuple[float, ...]], ...]

    @classmethod
    def of(cls, d: ModelDerivatives) -> ModelStructure:
        sym = d.sym
        q = sym.q
        return cls(
            n=len(q), m=len(sym.lam), n_y=sym.Y.rows, constraint_names=tuple(sym.constraint_names),
            mass_depends_on_q=any(sym.M[i, j].has(*q) for i in range(len(q)) for j in range(len(q))),
            table_spans=tuple((where, float(times[0]), float(times[-1]))
                              for where, (_, times, _) in zip(sym.table_sources, sym.tables)),
            tables=tuple((str(f), tuple(map(float, times)), tuple(map(float, values)))
                         for f, times, values in sym.tables),
        )

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> ModelStructure:
        return cls(
            n=int(data["n"]), m=int(data["m"]), n_y=int(data["n_y"]),
            constraint_names=tuple(data["constraint_names"]), mass_depends_on_q=bool(data["mass_depends_on_q"]),
            table_spans=tuple((str(w), float(a), float(b)) for w, a, b in data["table_spans"]),
            tables=tuple((str(n), tuple(map(float, t)), tuple(map(float, v))) for n, t, v in data["tables"]),
        )


class Derivation:
    """The symbolic work of one build, done at most once and shared by the backends
    (numpy functions and C library) built in the same call: the derivatives, the table of
    generated functions and each function's common subexpressions (eliminated once,
    printed by every backend)."""

    def __init__(self, model: Model | SymbolicModel):
        self.model = model
        self._derivatives: ModelDerivatives | None = None
        self._table: tuple[GeneratedFunction, ...] | None = None
        self._reduced: dict[str, ReducedOutputs] = {}

    @property
    def derivatives(self) -> ModelDerivatives:
        if self._derivatives is None:
            self._derivatives = differentiate(self.model)
        return self._derivatives

    @property
    def table(self) -> tuple[GeneratedFunction, ...]:
        if self._table is None:
            self._table = function_table(self.derivatives)
        return self._table

    def reduced(self, row: GeneratedFunction) -> ReducedOutputs:
        """``row``'s outputs after common-subexpression elimination."""
        if row.name not in self._reduced:
            outputs = [list(matrix) if vector else matrix for _, matrix, vector in row.outputs]
            self._reduced[row.name] = reduce_outputs(row.name, outputs)
        return self._reduced[row.name]


def model_key(model: Model) -> str:
    """Build-cache key of everything that determines a model's generated code.

    The canonical text of the definition (:func:`_canonical_text`) with parameter *values*
    neutralized (the generated functions take ``p`` as an argument, so a ``--set`` must not
    rebuild), the classes and source files of its force elements (plugins change without a
    version bump during development), fmi-adjoint's own code, the versions of the
    interpreter (the entry holds byte code), sympy (derivatives, printers) and numpy.
    Computed once per model object (a build asks for it once per backend).
    """
    import inspect

    known = _KEYS.get(id(model))
    if known is not None and known[0]() is model:
        return known[1]
    neutral = dataclasses.replace(
        model, parameters=tuple(dataclasses.replace(par, value=0.0) for par in model.parameters),
        description="", source="",
    )
    parts: list[str | bytes] = ["model", source_fingerprint(), sys.version, f"sympy {sp.__version__}",
                                f"numpy {np.__version__}", _canonical_text(neutral)]
    for cls in sorted({type(e) for e in model.forces}, key=lambda c: (c.__module__, c.__qualname__)):
        parts.append(f"{cls.__module__}.{cls.__qualname__}")
        try:
            path = inspect.getsourcefile(cls)
            parts.append(Path(path).read_bytes() if path else b"")
        except (OSError, TypeError):
            parts.append(b"")
    key = fingerprint(*parts)
    ident = id(model)

    def forget(_: object) -> None:
        _KEYS.pop(ident, None)

    try:
        _KEYS[ident] = (weakref.ref(model, forget), key)
    except TypeError:  # not weakly referenceable: not remembered
        pass
    return key


#: ``id(model) -> (weak reference, key)`` of :func:`model_key`.
_KEYS: dict[int, tuple[weakref.ref, str]] = {}


def _canonical_text(value: object) -> str:
    """A text that determines ``value`` (a model definition) exactly, for :func:`model_key`.

    Dataclasses give their class and the fields their ``repr`` shows, containers their
    items (sets sorted), numpy arrays their dtype, shape and bytes, other values their
    ``repr``.  Sympy expressions are written as their trees (class, atoms' exact contents:
    names and assumptions, the bits of floats), every distinct subtree once and then
    referred to by number: linear in the size of the expression graph, where printing it as
    text (the former ``repr``) re-sorted every sum and product and took most of a warm
    build.  The arguments of sums and products are in sympy's canonical order, so the text
    is the same in every process.
    """
    lines: list[str] = []
    nodes: dict[sp.Basic, int] = {}

    def expression(node: sp.Basic) -> int:
        number = nodes.get(node)
        if number is not None:
            return number
        args = node.args
        if args:
            text = f"{type(node).__name__}({','.join(str(expression(a)) for a in args)})"
        else:
            text = f"{type(node).__name__}{node._hashable_content()!r}"
        lines.append(text)
        number = nodes[node] = len(lines) - 1
        return number

    def walk(item: object) -> str:
        if isinstance(item, sp.Basic):
            return f"${expression(item)}"
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            fields = ",".join(f"{f.name}={walk(getattr(item, f.name))}" for f in dataclasses.fields(item) if f.repr)
            return f"{type(item).__module__}.{type(item).__qualname__}({fields})"
        if isinstance(item, (tuple, list)):
            return f"{type(item).__name__}[{','.join(walk(x) for x in item)}]"
        if isinstance(item, dict):
            return f"dict{{{','.join(f'{walk(k)}:{walk(v)}' for k, v in item.items())}}}"
        if isinstance(item, (set, frozenset)):  # in a canonical order (iteration order follows hashes)
            return f"{type(item).__name__}{{{','.join(sorted(walk(x) for x in item))}}}"
        if isinstance(item, np.ndarray):
            return f"ndarray({item.dtype.str},{item.shape},{item.tobytes().hex()})"
        return repr(item)

    top = walk(value)
    return "\n".join([*lines, top])


def compile_model(model: Model | SymbolicModel, *, cache: BuildCache | None = None,
                  derivation: Derivation | None = None) -> CompiledModel:
    """Differentiate a model and generate its numpy functions, through the build cache.

    Parameters
    ----------
    model : Model or SymbolicModel
        A ``SymbolicModel`` is compiled directly, without the cache.
    cache : BuildCache, optional
        Default: :meth:`BuildCache.default` (``FMI_ADJOINT_CACHE`` or the user's cache folder).
    derivation : Derivation, optional
        Shares the symbolic work with a C build of the same model.

    Returns
    -------
    CompiledModel
    """
    if isinstance(model, SymbolicModel):
        symbolic = Derivation(model)
        d = symbolic.derivatives
        return _assemble_compiled(model.model, ModelStructure.of(d), numpy_sources(symbolic), d.sym)
    derivation = derivation or Derivation(model)
    cache = cache or BuildCache.default()

    def build(folder: Path) -> None:
        d = derivation.derivatives
        sources = numpy_sources(derivation)
        payload = {"format": 1, "structure": ModelStructure.of(d).to_json(), "sources": sources}
        (folder / "numpy.json").write_text(json.dumps(payload))
        # Byte code too (the key includes the interpreter's version): a warm load then skips
        # compiling the sources, the bulk of its time on large models.
        codes = {name: compile_source(name, source) for name, source in sources.items()}
        (folder / "numpy.marshal").write_bytes(marshal.dumps(codes))

    def extra(files: dict[str, bytes], sources: dict[str, str]) -> dict:
        codes = marshal.loads(files["numpy.marshal"])
        if not isinstance(codes, dict) or set(codes) != set(sources):
            raise ValueError("the byte code does not match the sources")
        return codes

    structure, sources, codes = _cached_sources(model, cache, "model", ("numpy.json", "numpy.marshal"), build,
                                                extra)
    numeric = None
    if any(isinstance(e, AbstractNumericElement) for e in model.forces):
        # Numeric elements are Python code: their callables come from the assembled model.
        numeric = derivation.derivatives.sym if derivation._derivatives is not None else assemble(model)
    return _assemble_compiled(model, structure, sources, numeric, codes)  # type: ignore[arg-type]


def _cached_sources(model: Model, cache: BuildCache, kind: str, names: tuple[str, ...], build: Callable[[Path], None],
                    extra: Callable[[dict[str, bytes], dict[str, str]], object],
                    ) -> tuple[ModelStructure, dict[str, str], object]:
    """``(structure, sources, extra(files, sources))`` of the cache entry ``kind`` of ``model``
    (built by ``build`` when missing), from the files ``names`` (the first holds the structure
    and sources) exactly as the cache checked them (owner, mode, checksum: the code that runs
    is the code checked); an unwritable cache or an unreadable entry is one error naming the fix."""
    try:
        entry, files = cache.read(kind, model_key(model), build, names)
    except FmiAdjointError:
        raise
    except OSError as exc:
        raise CacheError(f"writing the build cache {cache.root} failed ({exc.strerror or exc}); free space there "
                         "or set FMI_ADJOINT_CACHE to a writable folder.") from None
    try:
        payload = json.loads(files[names[0]])
        structure = ModelStructure.from_json(payload["structure"])
        sources = {str(k): str(v) for k, v in payload["sources"].items()}
        return structure, sources, extra(files, sources)
    except (OSError, ValueError, KeyError, TypeError, EOFError) as exc:
        raise ModelError(f"the build cache entry {entry} of model '{model.name}' is unreadable ({exc}); "
                         "run 'fmi-adjoint cache clear'.") from None


def _assemble_compiled(definition: Model, structure: ModelStructure, sources: dict[str, str],
                       sym: SymbolicModel | None, codes: dict | None = None) -> CompiledModel:
    tables = {name: (times, values) for name, times, values in structure.tables}
    calls = numeric_calls(sym) if sym is not None else {}
    functions = {name: load_function(name, source, tables, calls, (codes or {}).get(name))
                 for name, source in sources.items()}
    return CompiledModel(
        model=definition,
        n=structure.n,
        m=structure.m,
        n_p=len(definition.all_parameters),
        n_y=structure.n_y,
        coordinate_names=tuple(c.name for c in definition.all_coordinates),
        constraint_names=structure.constraint_names,
        parameter_names=tuple(par.name for par in definition.all_parameters),
        output_names=tuple(o.name for o in definition.outputs),
        defaults=np.array([par.value for par in definition.all_parameters], dtype=float),
        mass_depends_on_q=structure.mass_depends_on_q,
        table_spans=structure.table_spans,
        **functions,
    )


@dataclasses.dataclass(frozen=True, eq=False)
class SecondOrder:
    """The numpy functions of :func:`second_order_table` of one model (vectorized: every
    argument may carry leading batch axes; ``t`` gives the batch shape)."""

    step_second: Function
    init_second: Function


def compile_second_order(model: Model, *, cache: BuildCache | None = None,
                         derivation: Derivation | None = None) -> SecondOrder:
    """Generate (or load from the build cache) the second-order functions of ``model``."""
    derivation = derivation or Derivation(model)
    cache = cache or BuildCache.default()

    def build(folder: Path) -> None:
        d = derivation.derivatives
        sources = numpy_sources(derivation, second_order_table(d))
        payload = {"format": 1, "structure": ModelStructure.of(d).to_json(), "sources": sources}
        (folder / "second.json").write_text(json.dumps(payload))

    def check(files: dict[str, bytes], sources: dict[str, str]) -> None:
        if set(sources) != {"step_second", "init_second"}:
            raise ValueError("unexpected functions")

    structure, sources, _ = _cached_sources(model, cache, "second", ("second.json",), build, check)
    tables = {name: (times, values) for name, times, values in structure.tables}
    numeric = None
    if any(isinstance(e, AbstractNumericElement) for e in model.forces):
        numeric = derivation.derivatives.sym if derivation._derivatives is not None else assemble(model)
    calls = numeric_calls(numeric) if numeric is not None else {}
    functions = {name: load_function(name, source, tables, calls) for name, source in sources.items()}
    return SecondOrder(**functions)
