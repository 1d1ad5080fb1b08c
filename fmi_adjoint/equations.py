"""The derivatives of a model's equations, as sympy matrices, and the table of generated functions.

:func:`differentiate` forms every matrix the engines evaluate from the assembled equations of a
:class:`~fmi_adjoint.model.SymbolicModel` (the whole system, or one component type of
:mod:`fmi_adjoint.assembly`); :func:`function_table` lists the generated functions and the
matrices each returns; :func:`second_order_table` the directional second derivatives of input
design.  In the notation of Lauss et al. 2018, eqs. (15)-(20), with ``F = C_q^T lambda - Q``
(the table in :mod:`fmi_adjoint.compiled`).  Every backend (numpy, C, the component kernels)
prints from these rows, so a derivative is added in one place.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .errors import ModelError
from .model import Model, SymbolicModel, assemble

if TYPE_CHECKING:
    import sympy as sp

    from .calculus import Differentiator
else:  # sympy is imported on first use: a warm start never uses it (issue 24, part 6)
    from .deferred import sympy as sp

__all__ = ["GUESS_ARGS", "INIT_ARGS", "SECOND_INIT_ARGS", "SECOND_STEP_ARGS", "STATE_ARGS", "GeneratedFunction",
           "ModelDerivatives", "argument_symbols", "canonical_text", "differentiate", "function_table", "group_sizes",
           "jacobian",
           "second_order_table"]


def _jac(matrix: sp.Matrix, symbols, calculus: Differentiator | None = None) -> sp.Matrix:
    """Jacobian, differentiating each entry only by the symbols it contains.

    ``Matrix.jacobian`` differentiates every entry by every symbol; for the sparse
    equations of a multibody model nearly all of those derivatives are zero, and on
    engine_tvd they took 12 s of 13 (issue 11).  Opaque functions (tables, numeric
    elements) may depend on a symbol through their arguments, which ``free_symbols`` sees.
    ``calculus``: a differentiator to share (its memo) with other Jacobians of the same
    equations (:func:`differentiate`); by default one for this matrix.
    """
    from .calculus import Differentiator

    symbols = list(symbols)
    result = sp.zeros(matrix.rows, len(symbols))
    if not symbols or matrix.rows == 0:
        return result
    if matrix.cols != 1:
        raise ValueError("_jac differentiates column vectors only")
    position = {s: k for k, s in enumerate(symbols)}
    if calculus is None:
        calculus = Differentiator()  # one memo for the matrix: its entries share subexpressions
    for i in range(matrix.rows):
        for sym, derivative in calculus.derivatives(matrix[i, 0], position).items():
            result[i, position[sym]] = derivative
    return result


def _product(matrix: sp.Matrix, vector, rows: Sequence[bool] | None = None) -> sp.Matrix:
    """``matrix * vector`` (a column), summing only the structurally non-zero products; with
    ``rows``, the rows where it is False are zero (``diag(rows) * matrix * vector``).

    sympy's matrix product goes through its domain matrices and their element-wise sums; on
    the component kernels of a 1 000-coordinate model it was 40 % of the derivation (issue 24).
    """
    vector = list(vector)
    result = sp.zeros(matrix.rows, 1)
    for i in range(matrix.rows):
        if rows is None or rows[i]:
            result[i, 0] = sp.Add(*(entry * x for entry, x in zip(matrix.row(i), vector) if entry != 0))
    return result


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
    #: The differentiator that formed the Jacobians above (:func:`second_order_table` shares its
    #: memo: the first derivatives it needs again are the Jacobians').
    calculus: Differentiator | None = dataclasses.field(default=None, repr=False, compare=False)


def differentiate(model: Model | SymbolicModel, *, algebraic_rows: bool = True) -> ModelDerivatives:
    """Assemble (if needed) and differentiate a model symbolically.

    ``algebraic_rows=False`` keeps the projection rows of massless coordinates without a
    constraint (:func:`_algebraic_rows`): for one component of a model
    (:mod:`fmi_adjoint.assembly`), whose coordinates may have their mass and constraints in
    other components."""
    from .calculus import Differentiator

    sym = model if isinstance(model, SymbolicModel) else assemble(model)
    n, m = len(sym.q), len(sym.lam)
    q, v, a, lam, p, t = sym.q, sym.v, sym.a, sym.lam, sym.p, sym.t
    # One differentiator for every Jacobian below: they share the equations' subexpressions
    # (``G_z`` holds the derivatives of ``M a + F`` that ``JM`` and ``K`` form).
    calculus = Differentiator()

    def jac(matrix: sp.Matrix, symbols) -> sp.Matrix:
        return _jac(matrix, symbols, calculus)

    Cq = jac(sym.C, q)
    CqT = Cq.T
    Ma = _product(sym.M, a)
    F = (_product(CqT, lam) if m else sp.zeros(n, 1)) - sym.Q

    # Consistent initialization, one system G(z) = 0 (see module docstring).
    mu = tuple(sp.Symbol(f"mu_{k}", real=True) for k in range(m))
    nu = tuple(sp.Symbol(f"nu_{k}", real=True) for k in range(m))
    qvec, vvec = sp.Matrix(q), sp.Matrix(v)
    if m:
        Ct = sym.C.diff(t)
        G1 = (qvec - sym.q0) + _product(CqT, mu, [not f for f in sym.fixed_q])
        G2 = sym.C
        G3 = (vvec - sym.v0) + _product(CqT, nu, [not f for f in sym.fixed_v])
        Cqv = _product(Cq, v)
        G4 = Cqv + Ct
        G6 = _product(Cq, a) + _product(jac(Cqv, q), v) + 2 * _product(jac(Ct, q), v) + Ct.diff(t)
    else:
        G1, G3 = qvec - sym.q0, vvec - sym.v0
    G5 = Ma + F
    if algebraic_rows:
        _algebraic_rows(sym, Cq, G1, G3, G5)
    G = sp.Matrix.vstack(G1, G2, G3, G4, G5, G6) if m else sp.Matrix.vstack(G1, G3, G5)
    z = list(q) + list(mu) + list(v) + list(nu) + list(a) + list(lam)
    return ModelDerivatives(
        sym=sym, mu=mu, nu=nu, Ma=Ma, F=F, C=sym.C, M=sym.M,
        JM=jac(Ma, q), K=jac(F, q), JV=jac(sym.Q, v), Cq=Cq,
        Ma_p=jac(Ma, p), F_p=jac(F, p), C_p=jac(sym.C, p),
        Y=sym.Y, Y_q=jac(sym.Y, q), Y_v=jac(sym.Y, v), Y_a=jac(sym.Y, a), Y_lam=jac(sym.Y, lam),
        Y_p=jac(sym.Y, p), G=G, G_z=jac(G, z), G_p=jac(G, p), q0=sym.q0, v0=sym.v0, calculus=calculus,
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


def _gradient(phi: sp.Expr, symbols, calculus: Differentiator | None = None) -> sp.Matrix:
    """Gradient of a scalar, differentiating only by the symbols it contains."""
    return _jac(sp.Matrix([phi]), symbols, calculus).T


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
    from .calculus import Differentiator

    g = argument_symbols(d)
    sym = d.sym
    state = [*sym.q, *sym.v, *sym.a, *sym.lam]
    direction = [*g["dq"], *g["dv"], *g["da"], *g["dlam"]]
    dp = list(g["dp"])  # empty without parameters (a component may read none)
    n, m = len(sym.q), len(sym.lam)
    calculus = d.calculus or Differentiator()

    def directional(matrix: sp.Matrix) -> sp.Matrix:
        if matrix.rows == 0:
            return sp.zeros(0, 1)
        return _product(_jac(matrix, state, calculus), direction) + _product(_jac(matrix, sym.p, calculus), dp)

    phi = sp.Integer(0)
    for weights, matrix in (("wM", d.Ma), ("wF", d.F), ("wC", d.C), ("wY", d.Y)):
        if matrix.rows:
            phi += _product(directional(matrix).T, g[weights])[0, 0]
    grads = _gradient(phi, state + list(sym.p), calculus)
    k = [0, n, 2 * n, 3 * n, 3 * n + m, 3 * n + m + len(sym.p)]
    names = ("Sq", "Sv", "Sa", "Slam", "Sp")
    step = tuple((names[i], grads[k[i]:k[i + 1], :], True) for i in range(5))

    z = _init_unknowns(d)
    G_dir = _product(d.G_z, g["dz"]) + _product(d.G_p, dp)
    psi = _product(G_dir.T, g["wG"])[0, 0]
    init_grads = _gradient(psi, z + list(sym.p), calculus)
    init = (("Iz", init_grads[:len(z), :], True), ("Ip", init_grads[len(z):, :], True))
    return (GeneratedFunction("step_second", SECOND_STEP_ARGS, step),
            GeneratedFunction("init_second", SECOND_INIT_ARGS, init))


#: Public name of :func:`_jac` (the component kernels of :mod:`fmi_adjoint.assembly` use it).
jacobian = _jac


def canonical_text(value: object) -> str:
    """A text that determines ``value`` (a model definition, a component type) exactly, for
    :func:`fmi_adjoint.compiled.model_key` and the component types of :mod:`fmi_adjoint.assembly`.

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
