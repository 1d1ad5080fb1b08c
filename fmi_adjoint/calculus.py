"""Partial derivatives of the model's expressions, by the rules of calculus on the expression tree.

Every derivative of a build (the Jacobians of :mod:`fmi_adjoint.equations`, the quadratic
velocity terms of :func:`fmi_adjoint.model.quadratic_velocity_terms`) comes from here.
sympy's ``expr.diff(s)`` goes through ``Derivative.__new__`` at every node: it sympifies, asks
the assumptions system about the variable and the expression, and walks the whole expression
for ``s`` each time; on the kernels of a spatial revolute joint (two bodies' rotation matrices
in its constraint rows, issue 23) that machinery was 2.5 s of a 2.75 s derivation.  The
rules below are sympy's own (:meth:`sympy.Add._eval_derivative`,
:meth:`sympy.Mul._eval_derivative`, :meth:`sympy.Pow._eval_derivative` for an exponent free of
the variable, :meth:`sympy.Function._eval_derivative`: the chain rule through ``fdiff``), applied
with a memo of sub-results and of each node's symbols, so a subexpression shared by several
entries or several variables is differentiated once.  A node the rules do not cover (an
exponent that depends on the variable, functions with their own derivative rule such as
``Piecewise``, ``Abs`` or ``Max``, opaque functions of tables and numeric elements, derivatives)
is handed to ``expr.diff(s)``, so the result is always sympy's, up to the order in which
equal terms are written.

An ``Add`` or ``Mul`` with many arguments (a designed input ``u(t) = sum_k xi_k phi_k(t)``
of K knots, issue 31) is differentiated term by term by the symbols each term contains, so
the cost is linear in its size rather than K walks of K terms.
"""

from __future__ import annotations

from collections.abc import Iterable

import sympy as sp
from sympy.core.function import AppliedUndef, ArgumentIndexError

__all__ = ["Differentiator", "derivative", "derivatives"]


class Differentiator:
    """Derivatives of expressions sharing subexpressions, with a memo (module docstring).

    One object serves a set of related expressions (a row's entries, a type's equations): its
    memo keeps every node's symbols and every ``(node, symbol)`` derivative it formed.
    """

    def __init__(self) -> None:
        self._symbols: dict[sp.Basic, frozenset] = {}
        self._done: dict[tuple[sp.Basic, sp.Basic], sp.Expr] = {}

    def symbols(self, node: sp.Basic) -> frozenset:
        """The free symbols of ``node`` (memoized per node)."""
        known = self._symbols.get(node)
        if known is None:
            if isinstance(node, sp.Symbol):
                known = frozenset((node,))
            elif not node.args or isinstance(node, (sp.Derivative, sp.Subs, sp.Lambda)):
                known = frozenset(node.free_symbols)
            else:
                known = frozenset().union(*(self.symbols(arg) for arg in node.args))
            self._symbols[node] = known
        return known

    def derivative(self, expr: sp.Expr, s: sp.Symbol) -> sp.Expr:
        """``d expr / d s`` (``s`` a symbol; by anything else, such as ``der(x)``, sympy's)."""
        if not isinstance(s, sp.Symbol):
            return expr.diff(s)
        if s not in self.symbols(expr):
            return sp.S.Zero
        if isinstance(expr, sp.Symbol):
            return sp.S.One  # the symbol itself: any other would not contain s
        key = (expr, s)
        known = self._done.get(key)
        if known is None:
            known = self._rule(expr, s)
            self._done[key] = known
        return known

    def _rule(self, expr: sp.Expr, s: sp.Symbol) -> sp.Expr:
        if isinstance(expr, sp.Add):
            return sp.Add(*(self.derivative(arg, s) for arg in expr.args))
        if isinstance(expr, sp.Mul):
            args = expr.args
            terms = []
            for i, arg in enumerate(args):
                d = self.derivative(arg, s)
                if d is not sp.S.Zero:
                    terms.append(sp.Mul(*args[:i], d, *args[i + 1:]))
            return sp.Add(*terms)
        if isinstance(expr, sp.Pow) and s not in self.symbols(expr.exp):
            base, exponent = expr.args
            return sp.Mul(exponent, sp.Pow(base, exponent - 1), self.derivative(base, s))
        if (isinstance(expr, sp.Function) and not isinstance(expr, AppliedUndef)
                and type(expr)._eval_derivative is sp.Function._eval_derivative):
            terms = []
            for i, arg in enumerate(expr.args, start=1):
                d = self.derivative(arg, s)
                if d is sp.S.Zero:
                    continue
                try:
                    outer = expr.fdiff(i)
                except ArgumentIndexError:
                    return expr.diff(s)
                terms.append(outer * d)
            return sp.Add(*terms)
        return expr.diff(s)

    def derivatives(self, expr: sp.Expr, targets: Iterable[sp.Symbol] | dict) -> dict:
        """``{s: d expr/d s}`` for the symbols ``s`` of ``targets`` that ``expr`` contains
        (wide sums and products term by term, module docstring)."""
        wanted = targets if isinstance(targets, (dict, set, frozenset)) else set(targets)
        if isinstance(expr, (sp.Add, sp.Mul)) and (len(expr.args) > WIDE or any(
                isinstance(arg, sp.Add) and len(arg.args) > WIDE for arg in expr.args)):
            parts: dict = {}
            args = expr.args
            for j, arg in enumerate(args):
                for sym, d in self.derivatives(arg, wanted).items():
                    parts.setdefault(sym, []).append(
                        d if isinstance(expr, sp.Add) else sp.Mul(*args[:j], d, *args[j + 1:]))
            return {sym: sp.Add(*terms) for sym, terms in parts.items()}
        return {sym: self.derivative(expr, sym) for sym in self.symbols(expr) if sym in wanted}


#: An Add or Mul with more arguments than this is differentiated term by term.
WIDE = 16


def derivative(expr: sp.Expr, s: sp.Symbol) -> sp.Expr:
    """``d expr / d s`` (one expression; share a :class:`Differentiator` for several)."""
    return Differentiator().derivative(sp.sympify(expr), s)


def derivatives(expr: sp.Expr, targets: Iterable[sp.Symbol] | dict) -> dict:
    """``{s: d expr/d s}`` for the symbols of ``targets`` in ``expr``."""
    return Differentiator().derivatives(expr, targets)
