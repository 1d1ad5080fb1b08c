"""Common subexpressions of a generated function, eliminated once for every printer.

A row of the table of generated functions (:func:`fmi_adjoint.compiled.function_table`)
returns several matrices; :func:`reduce_outputs` lists their structurally non-zero entries
and runs ``sympy.cse`` on them once.  The numpy printer (vector and scalar variants) and
the C printer all print the same :class:`ReducedOutputs`, so the elimination, the most
expensive part of printing a large model, is not repeated per backend.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import sympy as sp

from .errors import ModelError

__all__ = ["ReducedOutputs", "reduce_outputs"]


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
    replacements, reduced = sp.cse(flat, symbols=sp.numbered_symbols("_c"), order="none")
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
