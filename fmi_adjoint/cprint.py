"""Printing sympy expressions as C99 code (shared by element and model code generation)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet

import sympy as sp
from sympy.core.mul import _keep_coeff
from sympy.printing.c import C99CodePrinter
from sympy.printing.precedence import PRECEDENCE, precedence

from .cse import ReducedOutputs, extracts_minus

__all__ = ["CPrinter", "C_MATH_CONSTANTS", "FastPrecedence", "c_assignments", "c_reduced_assignments", "indexed"]

# sympy's C printer writes known constants (pi, 1/pi, sqrt(2), ...) as the M_* macros of
# math.h, which strict C99 does not define; every file of generated code starts with these.
_CONSTANTS = {
    "M_E": "E", "M_LOG2E": "1/log(2)", "M_LOG10E": "1/log(10)", "M_LN2": "log(2)", "M_LN10": "log(10)",
    "M_PI": "pi", "M_PI_2": "pi/2", "M_PI_4": "pi/4", "M_1_PI": "1/pi", "M_2_PI": "2/pi",
    "M_2_SQRTPI": "2/sqrt(pi)", "M_SQRT2": "sqrt(2)", "M_SQRT1_2": "1/sqrt(2)",
}
#: ``#define`` lines (guarded) for the math constants sympy's C printer may use.
C_MATH_CONSTANTS = "".join(
    f"#ifndef {macro}\n#define {macro} {sp.N(sp.sympify(value), 21)}\n#endif\n" for macro, value in _CONSTANTS.items()
)


def _precedence(item) -> int:
    """sympy's ``precedence(item)``, a product's without forming its negation (sympy's
    ``precedence_Mul`` asks ``could_extract_minus_sign``, which does: a third of printing the
    component kernels of a 1 000-coordinate model, issue 24)."""
    if isinstance(item, sp.Mul):
        if any(isinstance(arg, sp.Function) and getattr(arg, "precedence", _MUL) < _MUL for arg in item.args):
            return _MUL
        return PRECEDENCE["Add"] if extracts_minus(item) else _MUL
    return precedence(item)


_MUL = PRECEDENCE["Mul"]


@functools.lru_cache(maxsize=1 << 15)
def _ordered_terms(expr: sp.Add) -> tuple[sp.Expr, ...]:
    """``expr.as_ordered_terms()``, kept for the next printer: the C and numpy printers print
    the same reduced expressions (:class:`~fmi_adjoint.cse.ReducedOutputs`), and sorting the
    terms was the dearest part of printing them (issue 24)."""
    return tuple(expr.as_ordered_terms())


@functools.lru_cache(maxsize=1 << 15)
def _ordered_factors(expr: sp.Mul) -> tuple[sp.Expr, ...]:
    """``expr.as_ordered_factors()``, kept like :func:`_ordered_terms`."""
    return tuple(expr.as_ordered_factors())


class FastPrecedence:
    """Printer mix-in: sympy's ``parenthesize``, ``_print_Add`` (``StrPrinter``) and
    ``_print_Mul`` (``CodePrinter``, sympy 1.14) with :func:`_precedence`,
    :func:`_ordered_terms` and :func:`_ordered_factors`; the same text."""

    def parenthesize(self, item, level, strict=False):
        p = _precedence(item)
        if p < level or (not strict and p <= level):
            return f"({self._print(item)})"
        return self._print(item)

    def _print_Add(self, expr, order=None):  # noqa: N802 (sympy printer protocol)
        prec = _precedence(expr)
        parts = []
        plain = (order or self.order) not in ("old", "none")
        for term in _ordered_terms(expr) if plain else self._as_ordered_terms(expr, order=order):
            t = self._print(term)
            if t.startswith("-") and not term.is_Add:
                sign, t = "-", t[1:]
            else:
                sign = "+"
            parts += [sign, f"({t})" if _precedence(term) < prec or term.is_Add else t]
        sign = parts.pop(0)
        return ("" if sign == "+" else sign) + " ".join(parts)

    def _print_Mul(self, expr, **kwargs):  # noqa: N802 (sympy printer protocol)
        macros = getattr(self, "math_macros", None)
        if macros and expr in macros:  # the C printers' constants (1/pi, ...): sympy's own
            return super()._print_Mul(expr, **kwargs)
        prec = _precedence(expr)
        c, e = expr.as_coeff_Mul()
        if c < 0:
            expr = _keep_coeff(-c, e)
            sign = "-"
        else:
            sign = ""
        numerator: list = []
        denominator: list = []
        pow_paren = []  # powers of a product with exponent -1
        args = _ordered_factors(expr) if self.order not in ("old", "none") else sp.Mul.make_args(expr)
        for item in args:
            if item.is_commutative and item.is_Pow and item.exp.is_Rational and item.exp.is_negative:
                if item.exp != -1:
                    denominator.append(sp.Pow(item.base, -item.exp, evaluate=False))
                else:
                    if len(item.args[0].args) != 1 and isinstance(item.base, sp.Mul):  # sympy issue 14160
                        pow_paren.append(item)
                    denominator.append(sp.Pow(item.base, -item.exp))
            else:
                numerator.append(item)
        numerator = numerator or [sp.S.One]
        if len(numerator) == 1 and sign == "-":
            a_str = [self.parenthesize(numerator[0], 0.5 * (PRECEDENCE["Pow"] + PRECEDENCE["Mul"]))]
        else:
            a_str = [self.parenthesize(x, prec) for x in numerator]
        b_str = [self.parenthesize(x, prec) for x in denominator]
        for item in pow_paren:
            if item.base in denominator:
                b_str[denominator.index(item.base)] = f"({b_str[denominator.index(item.base)]})"
        if not denominator:
            return sign + "*".join(a_str)
        if len(denominator) == 1:
            return sign + "*".join(a_str) + "/" + b_str[0]
        return sign + "*".join(a_str) + f"/({'*'.join(b_str)})"


class CPrinter(FastPrecedence, C99CodePrinter):
    """C99 printer with a symbol map, table functions, and DiracDelta as 0.

    Sums and products are printed in sympy's sorted order, as the numpy printers of
    :mod:`fmi_adjoint.codegen` print them: both engines then round alike.  (Printing them in
    their arguments' own order, ``order="none"``, was 40 % faster on a large model's kernels,
    issue 24, but the C engine's results then left the numpy engine's by 1e-8 on
    engine_on_mounts, where they agree to 1e-12.)

    Parameters
    ----------
    symbol_map : callable
        ``symbol name -> C text`` (e.g. ``"q_3" -> "q[3]"``), or None to keep the name.
    table_names : set of str
        Functions of time printed as calls of a C function of the same name.
    function_names : mapping of str to str
        Other opaque functions printed as calls of the given C function.
    """

    def __init__(self, symbol_map: Callable[[str], str | None], table_names: AbstractSet[str] = frozenset(),
                 function_names: Mapping[str, str] | None = None):
        super().__init__()
        self._symbol_map = symbol_map
        self._table_names = set(table_names)
        self._function_names = dict(function_names or {})

    def _print_Symbol(self, expr):  # noqa: N802 (sympy printer protocol)
        mapped = self._symbol_map(expr.name)
        return mapped if mapped is not None else super()._print_Symbol(expr)

    def _print_DiracDelta(self, expr):  # noqa: N802
        # Appears in derivatives of sign/Heaviside; the derivative almost everywhere is 0.
        return "0.0"

    def _print_Function(self, expr):  # noqa: N802
        name = type(expr).__name__
        if name in self._table_names or name in self._function_names:
            c_name = self._function_names.get(name, name)
            return f"{c_name}({', '.join(self._print(arg) for arg in expr.args)})"
        return super()._print_Function(expr)


def _cse_lines(slots: list[tuple[str, int]], flat: list[sp.Expr], printer: CPrinter) -> list[str]:
    # No "basic" pre-optimizations: their factor_terms pass is superlinear (a 1 KB product of
    # 100 factors took 91 s); plain CSE finds the same shared terms in our derivatives.
    replacements, reduced = sp.cse(flat, symbols=sp.numbered_symbols("t_"))
    lines = [f"    const double {sym} = {printer.doprint(expr)};" for sym, expr in replacements]
    lines += [f"    {name}[{index}] = {printer.doprint(expr)};" for (name, index), expr in zip(slots, reduced)]
    return lines


def c_assignments(outputs: Sequence[tuple[str, sp.Matrix]], printer: CPrinter) -> list[str]:
    """Statements assigning every entry of each matrix to ``name[row*cols + col]``,
    sharing common subexpressions.  Outputs are not assumed to be cleared: each array is
    zeroed by a loop, then only its non-zero entries are assigned."""
    flat, slots, lines = [], [], []
    for name, mat in outputs:
        size = mat.rows * mat.cols
        if size:
            lines.append(f"    for (int k_ = 0; k_ < {size}; ++k_) {name}[k_] = 0.0;")
        for i in range(mat.rows):
            for j in range(mat.cols):
                if mat[i, j] != 0:
                    slots.append((name, i * mat.cols + j))
                    flat.append(mat[i, j])
    return lines + _cse_lines(slots, flat, printer)


def c_reduced_assignments(names: Sequence[str], outputs: ReducedOutputs, printer: CPrinter) -> list[str]:
    """Statements of a function whose common subexpressions were eliminated once
    (:func:`fmi_adjoint.cse.reduce_outputs`), output ``k`` written to the array ``names[k]``:
    a vector gets every entry (zeros too); a matrix gets the values of its structurally
    non-zero entries in row-major order (``name[k]`` is the k-th non-zero)."""
    nonzero = set(outputs.slots)
    lines = [f"    {name}[{i}] = 0.0;" for k, (name, shape) in enumerate(zip(names, outputs.shapes))
             if len(shape) == 1 for i in range(shape[0]) if (k, (i,)) not in nonzero]
    lines += [f"    const double {sym} = {printer.doprint(expr)};" for sym, expr in outputs.replacements]
    counters = [0] * len(names)
    for (k, pos), expr in zip(outputs.slots, outputs.reduced):
        if len(outputs.shapes[k]) == 1:
            index = pos[0]
        else:
            index, counters[k] = counters[k], counters[k] + 1
        lines.append(f"    {names[k]}[{index}] = {printer.doprint(expr)};")
    return lines


def indexed(groups: Mapping[str, str]) -> Callable[[str], str | None]:
    """Symbol map for names ``<prefix>_<k>``: ``groups = {"q": "q"}`` maps ``q_3 -> q[3]``."""

    def mapping(name: str) -> str | None:
        head, _, tail = name.rpartition("_")
        if head in groups and tail.isdigit():
            return f"{groups[head]}[{tail}]"
        return None

    return mapping
