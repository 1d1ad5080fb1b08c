"""Common subexpressions of a generated function, eliminated once for every printer.

A row of the table of generated functions (:func:`fmi_adjoint.compiled.function_table`)
returns several matrices; :func:`reduce_outputs` lists their structurally non-zero entries
and runs ``sympy.cse`` on them once.  The numpy printer (vector and scalar variants) and
the C printer all print the same :class:`ReducedOutputs`, so the elimination, the most
expensive part of printing a large model, is not repeated per backend.

The elimination is sympy's ``cse`` (``order="none"``, no pre- or post-processing):
:func:`_optimizations` is its ``opt_cse`` (``sympy/simplify/cse_main.py``, sympy 1.14: negated
terms, negative powers, common argument subsets of sums and products, after Allen and Cocke's
value numbering) written again with plain ordered dicts for its sets of integers and cheap
sign tests; the substitutions it finds, hence the reduced expressions, are the same.  Its
sets were sympy's ``OrderedSet`` (a ``MutableSet`` whose operations run through
``collections.abc`` in Python) and its sign test negated every product it saw: on the kernels
of a 1 000-coordinate model (issue 24) that was two thirds of the elimination.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import sympy as sp
from sympy.simplify.cse_main import Unevaluated, tree_cse
from sympy.utilities.iterables import topological_sort

from .errors import ModelError

__all__ = ["ReducedOutputs", "extracts_minus", "reduce_outputs"]


@dataclasses.dataclass(frozen=True, eq=False)
class ReducedOutputs:
    """Outputs of one function after common-subexpression elimination.

    Attributes
    ----------
    shapes : tuple of tuple of int
        ``(rows,)`` for a vector output, ``(rows, cols)`` for a matrix.
    slots : tuple of (int, tuple of int)
        For each non-zero entry, in row-major order per output: the output's index and the
        entry's position.
    replacements : tuple of (sympy.Symbol, sympy.Expr)
        Common subexpressions, in evaluation order (symbols ``_c0, _c1, ...``).
    reduced : tuple of sympy.Expr
        The non-zero entries in terms of the replacements, one per slot.
    """

    shapes: tuple[tuple[int, ...], ...]
    slots: tuple[tuple[int, tuple[int, ...]], ...]
    replacements: tuple[tuple[sp.Symbol, sp.Expr], ...]
    reduced: tuple[sp.Expr, ...]

    def used_symbols(self) -> set:
        """Free symbols of the reduced entries and the replacements."""
        return set().union(*(e.free_symbols for e in self.reduced), *(e.free_symbols for _, e in self.replacements))


def reduce_outputs(name: str, outputs: Sequence[sp.MatrixBase | Sequence[sp.Expr]]) -> ReducedOutputs:
    """Eliminate the common subexpressions of the non-zero entries of ``outputs``.

    ``outputs``: matrices, or plain sequences of expressions (vectors).

    Raises
    ------
    ModelError
        An entry still holds an unevaluated derivative: a numeric element supplies first
        derivatives only (``name`` is the function that needed more).
    """
    flat: list[sp.Expr] = []
    slots: list[tuple[int, tuple[int, ...]]] = []
    shapes: list[tuple[int, ...]] = []
    for k, out in enumerate(outputs):
        vector = not isinstance(out, sp.MatrixBase)
        mat: sp.MatrixBase = sp.Matrix(list(out)) if vector else out
        if vector and len(out) == 0:
            mat = sp.zeros(0, 1)
        shapes.append((mat.rows,) if vector else (mat.rows, mat.cols))
        for i in range(mat.rows):
            for j in range(mat.cols):
                expr = mat[i, j]
                if expr != 0:
                    flat.append(expr)
                    slots.append((k, (i,) if vector else (i, j)))
    derivative = _first_derivative(flat)
    if derivative is not None:
        raise ModelError(
            f"{name}: an expression needs a derivative that no element supplies "
            f"({derivative}); numeric elements give first derivatives "
            "only, so they cannot act on a massless coordinate without a constraint."
        )
    # No "basic" pre-optimizations: their factor_terms pass is superlinear (a 1 KB product of
    # 100 factors took 91 s); plain CSE finds the same shared terms in our derivatives.
    # order="none": the subexpressions are taken in the expressions' own argument order (sympy's
    # canonical order, the same in every process), without sorting the arguments of every sum
    # and product it rebuilds (sympy's default "canonical"): on the MacPherson strut's largest
    # component type that sorting was half of the 17.9 s the elimination took (issue 23).
    # sympy's cse is opt_cse (the substitutions below) and tree_cse; _optimizations is its
    # opt_cse, faster, with the same result.
    replacements, reduced = tree_cse(flat, sp.numbered_symbols("_c"), _optimizations(flat), "none")
    return ReducedOutputs(tuple(shapes), tuple(slots), tuple(replacements), tuple(reduced))


def _first_derivative(expressions: Sequence[sp.Expr]) -> sp.Derivative | None:
    """An unevaluated derivative in ``expressions``, or None: one walk over their graph, each
    shared subexpression once (``expr.has`` walks every entry's tree: a tenth of a component
    type's printing, the entries of a Jacobian sharing most of their subtrees)."""
    seen: set[sp.Basic] = set()
    stack = list(expressions)
    while stack:
        node = stack.pop()
        if isinstance(node, sp.Derivative):
            return node
        for arg in node.args:
            if arg not in seen:
                seen.add(arg)
                stack.append(arg)
    return None


def extracts_minus(expr: sp.Basic) -> bool:
    """``expr.could_extract_minus_sign()`` (the same answer) without forming ``-expr`` for a product (sympy's
    ``Mul`` test compares the product with its negation only to exclude ``zoo``, whose
    coefficient is not negative) and with that test for the terms of a sum; a tie between a
    sum's negative and positive terms is sympy's own rule (its sort keys)."""
    if isinstance(expr, sp.Mul):
        c = expr.args[0]
        return c.is_Number and _negative_number(c)
    if isinstance(expr, sp.Number):
        return _negative_number(expr)
    if isinstance(expr, sp.Add):
        negative = sum(1 for arg in expr.args if extracts_minus(arg))
        positive = len(expr.args) - negative
        if positive != negative:
            return positive < negative
    return bool(expr.could_extract_minus_sign())


def _negative_number(c: sp.Number) -> bool:
    """``c.is_extended_negative`` of a number, read off its value where that is plain (sympy's
    assumptions system first deduces every fact of a new Float: half of the sign tests)."""
    if isinstance(c, sp.Rational):
        return c.p < 0
    if isinstance(c, sp.Float) and c._mpf_[1]:  # a finite non-zero float: its sign bit
        return c._mpf_[0] == 1
    return bool(c.is_extended_negative)


def _optimizations(exprs: Sequence[sp.Expr]) -> dict:
    """sympy's ``opt_cse(exprs, order="none")`` (module docstring): the substitutions
    ``tree_cse`` applies before it counts repeated subexpressions."""
    opt_subs: dict = {}
    adds: dict = {}
    muls: dict = {}
    seen: set = set()
    collapsible: dict = {}

    def find(expr) -> None:
        stack = [(expr, False)]
        while stack:
            node, expanded = stack.pop()
            if not expanded:
                if not isinstance(node, sp.Basic) or node.is_Atom or node.is_Order:
                    continue
                if node in seen:
                    continue
                seen.add(node)
                stack.append((node, True))
                stack.extend((arg, False) for arg in reversed(node.args))
                continue
            if extracts_minus(node):
                negated = sp.Add(*(-arg for arg in node.args)) if isinstance(node, sp.Add) else -node
                if not negated.is_Atom:
                    opt_subs[node] = Unevaluated(sp.Mul, (sp.S.NegativeOne, negated))
                    seen.add(negated)
                    node = negated
            if isinstance(node, sp.Mul):
                (collapsible if len(node.args) == 1 else muls)[node] = None
            elif isinstance(node, sp.Add):
                (collapsible if len(node.args) == 1 else adds)[node] = None
            elif isinstance(node, sp.Pow) and node.exp.could_extract_minus_sign():
                opt_subs[node] = Unevaluated(sp.Pow, (sp.Pow(node.base, -node.exp), -1))

    for expr in exprs:
        find(expr)
    edges = [(e, e.args[0]) for e in collapsible if e.args[0] in collapsible]
    for e in reversed(topological_sort((list(collapsible), edges))):
        opt_subs[e] = opt_subs.get(e.args[0], e.args[0])
    commutative: dict = {}
    for m in muls:
        if all(arg.is_commutative for arg in m.args):
            commutative[m] = None  # sympy's m.func(*c) is m itself
            continue
        c, nc = m.args_cnc(cset=False)
        if c:
            c_mul = m.func(*c)
            if nc:
                opt_subs[m] = m.func(*nc) if c_mul == 1 else m.func(c_mul, m.func(*nc), evaluate=False)
            if len(c) > 1:
                commutative[c_mul] = None
    _match_common_args(sp.Add, list(adds), opt_subs)
    _match_common_args(sp.Mul, list(commutative), opt_subs)
    return opt_subs


def _match_common_args(func_class: type, funcs: list, opt_subs: dict) -> None:
    """sympy's ``match_common_args`` with its ``FuncArgTracker`` (module docstring): every
    common subset of arguments of two sums (products) becomes one unevaluated sum (product)."""
    funcs = sorted(funcs, key=lambda f: len(f.args))
    numbers: dict = {}
    values: list = []
    arg_funcs: list[dict[int, None]] = []  # argument number -> functions holding it (ordered)

    def number(value) -> int:
        k = numbers.setdefault(value, len(numbers))
        if k == len(values):
            values.append(value)
            arg_funcs.append({})
        return k

    func_args: list[dict[int, None]] = []
    for i, func in enumerate(funcs):
        argset: dict[int, None] = {}
        for arg in func.args:
            k = number(arg)
            argset[k] = None
            arg_funcs[k][i] = None
        func_args.append(argset)

    def in_order(argset) -> list:
        return [values[k] for k in sorted(argset)]

    def update(i: int, new: dict[int, None]) -> None:
        old = func_args[i]
        for k in old:
            if k not in new:
                del arg_funcs[k][i]
        for k in new:
            if k not in old:
                arg_funcs[k][i] = None
        func_args[i] = new

    changed: set[int] = set()
    for i in range(len(funcs)):
        counts: dict[int, int] = {}
        for k in func_args[i]:
            for j in arg_funcs[k]:
                if j > i:
                    counts[j] = counts.get(j, 0) + 1
        candidates = dict.fromkeys(sorted((j for j, c in counts.items() if c >= 2), key=lambda j: (counts[j], j)))
        while candidates:
            j = next(iter(candidates))
            del candidates[j]
            common = {k: None for k in func_args[i] if k in func_args[j]}
            if len(common) <= 1:
                continue
            rest_i = {k: None for k in func_args[i] if k not in common}
            if rest_i:
                shared = number(Unevaluated(func_class, in_order(common)))
                update(i, {**rest_i, shared: None})
                changed.add(i)
            else:
                shared = number(funcs[i])
            update(j, {**{k: None for k in func_args[j] if k not in common}, shared: None})
            changed.add(j)
            first, *others = common
            subset = [f for f in arg_funcs[first] if f in candidates and all(f in arg_funcs[k] for k in others)]
            for f in subset:
                update(f, {**{k: None for k in func_args[f] if k not in common}, shared: None})
                changed.add(f)
        if i in changed:
            opt_subs[funcs[i]] = Unevaluated(func_class, in_order(func_args[i]))
        for k in func_args[i]:
            del arg_funcs[k][i]
