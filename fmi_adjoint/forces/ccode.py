"""An element's law on local symbols, and its C code.

:func:`local_law` evaluates an element's ``local_forces`` on local symbols
``q[0..n-1], v[0..n-1]`` (ends, then internal nodes) and ``p[0..n_p-1]`` (the declared
properties in declaration order, vectors expanded), and differentiates it.
:func:`element_c_source` prints the force and its Jacobians as two C99 functions::

    void <prefix>_forces(const double *q, const double *v, const double *p, double *f);
    void <prefix>_jacobian(const double *q, const double *v, const double *p,
                           double *dfdq, double *dfdv, double *dfdp);

``f`` has ``n`` entries; the Jacobians are row-major ``n x n``, ``n x n`` and
``n x n_p``.  FMU export links these functions; ``plugins check`` compiles them and
compares them with the numpy evaluation.
"""

from __future__ import annotations

import dataclasses

import sympy as sp
from sympy.printing.c import C99CodePrinter

from ..errors import ModelError
from .base import AbstractLocalElement, ElementParameter

__all__ = ["LocalLaw", "local_law", "element_c_source"]


@dataclasses.dataclass(frozen=True, eq=False)
class LocalLaw:
    """Symbolic local law of an element.

    Attributes
    ----------
    q, v, p : tuple of sympy.Symbol
    forces : sympy.Matrix (n x 1)
    dfdq, dfdv, dfdp : sympy.Matrix
    layout : tuple of (ElementParameter, index or None)
        What each entry of ``p`` is: a scalar property or entry ``index`` of a vector.
    """

    q: tuple
    v: tuple
    p: tuple
    forces: sp.Matrix
    dfdq: sp.Matrix
    dfdv: sp.Matrix
    dfdp: sp.Matrix
    layout: tuple[tuple[ElementParameter, int | None], ...]


def local_law(element: AbstractLocalElement) -> LocalLaw:
    """Symbolic law of ``element`` on local symbols (vector lengths from its bindings)."""
    if not isinstance(element, AbstractLocalElement):
        raise ModelError(f"{element.where()}: only local elements have a local law and element C code.")
    n = len(element.coordinates) + len(element.internal_nodes())
    q = tuple(sp.Symbol(f"q_{i}", real=True) for i in range(n))
    v = tuple(sp.Symbol(f"v_{i}", real=True) for i in range(n))
    symbols: list[sp.Symbol] = []
    layout: list[tuple[ElementParameter, int | None]] = []
    values: dict[str, object] = {}
    for decl in element.parameters:
        if decl.vector:
            bound = getattr(element, decl.name, None) or ()
            entries = []
            for k in range(len(bound)):
                sym = sp.Symbol(f"p_{len(symbols)}", real=True)
                symbols.append(sym)
                layout.append((decl, k))
                entries.append(sym)
            values[decl.name] = tuple(entries)
        else:
            sym = sp.Symbol(f"p_{len(symbols)}", real=True)
            symbols.append(sym)
            layout.append((decl, None))
            values[decl.name] = sym
    forces = sp.Matrix([sp.sympify(f) for f in element.local_forces(q, v, values)])
    if forces.rows != n:
        raise ModelError(f"{element.where()}: local_forces returned {forces.rows} values for {n} coordinates.")
    jac = lambda syms: forces.jacobian(sp.Matrix(syms)) if syms else sp.zeros(n, 0)  # noqa: E731
    return LocalLaw(q, v, tuple(symbols), forces, jac(q), jac(v), jac(symbols), tuple(layout))


class _CPrinter(C99CodePrinter):
    def _print_DiracDelta(self, expr):  # noqa: N802 (sympy printer protocol)
        return "0.0"

    def _print_Symbol(self, expr):  # noqa: N802
        # q_3 -> q[3], v_0 -> v[0], p_2 -> p[2]; cse temporaries keep their names.
        name = expr.name
        head, _, tail = name.partition("_")
        if head in ("q", "v", "p") and tail.isdigit():
            return f"{head}[{tail}]"
        return super()._print_Symbol(expr)


def _c_body(outputs: list[tuple[str, sp.Matrix]]) -> list[str]:
    printer = _CPrinter()
    flat, slots = [], []
    for name, mat in outputs:
        for i in range(mat.rows):
            for j in range(mat.cols):
                slots.append((name, i * mat.cols + j))
                flat.append(mat[i, j])
    replacements, reduced = sp.cse(flat, symbols=sp.numbered_symbols("t"), optimizations="basic")
    lines = [f"    const double {sym} = {printer.doprint(expr)};" for sym, expr in replacements]
    lines += [f"    {name}[{index}] = {printer.doprint(expr)};" for (name, index), expr in zip(slots, reduced)]
    return lines


def element_c_source(element: AbstractLocalElement, prefix: str | None = None) -> str:
    """C99 source of the element's force and Jacobian functions (see module docstring)."""
    from .numeric import AbstractNumericElement

    prefix = prefix or f"fa_{element.type_name}_{element.name}"
    if isinstance(element, AbstractNumericElement):
        return element.c_source(prefix)
    law = local_law(element)
    signature = "const double *q, const double *v, const double *p"
    header = (
        f"/* force element '{element.name}' ({element.type_name}): {len(law.q)} local coordinates, "
        f"{len(law.p)} parameters; generated by fmi-adjoint from the element's symbolic law */\n"
        "#include <math.h>\n\n"
    )
    forces = [f"void {prefix}_forces({signature}, double *f)", "{", *_c_body([("f", law.forces)]), "}"]
    jacobian = [
        f"void {prefix}_jacobian({signature}, double *dfdq, double *dfdv, double *dfdp)",
        "{",
        *_c_body([("dfdq", law.dfdq), ("dfdv", law.dfdv), ("dfdp", law.dfdp)]),
        "}",
    ]
    return header + "\n".join(forces) + "\n\n" + "\n".join(jacobian) + "\n"
