"""The common-subexpression elimination and printing of the generated code, against sympy's own.

:func:`fmi_adjoint.cse.reduce_outputs` runs sympy's ``tree_cse`` after its own version of
``opt_cse`` (:func:`fmi_adjoint.cse._optimizations`, issue 24): the replacements and reduced
expressions must be exactly sympy's ``cse(..., order="none")``; :func:`fmi_adjoint.cse.extracts_minus`
must answer as ``could_extract_minus_sign``.  The printers' faster methods
(:class:`fmi_adjoint.cprint.FastPrecedence`) must write sympy's text; the Jacobians of
:func:`fmi_adjoint.equations.differentiate` (one shared differentiator, sparse products) must
equal those of sympy's matrix algebra.
"""

from __future__ import annotations

import pytest
import sympy as sp

from fmi_adjoint.cprint import CPrinter, indexed
from fmi_adjoint.cse import extracts_minus, reduce_outputs
from fmi_adjoint.equations import argument_symbols, differentiate, jacobian, second_order_table
from fmi_adjoint.examples import example_path
from fmi_adjoint.model import assemble
from fmi_adjoint.model_file import load_model

x, y, z, w = sp.symbols("x y z w", real=True)

#: Expressions with what opt_cse looks for: negated sums and products, negative powers,
#: arguments shared by several sums and products, and functions around them.
EXPRESSIONS = [
    -x * y * z + 2 * w, x * y * z - sp.sin(x * y), -(x + y) * z, (x - y) ** -2 + 1 / (x - y),
    sp.cos(x + y + z) * (x + y), x + y + w, x * y * w - z, -x - y - z, (y - x) * (x - y) ** 3,
    sp.sqrt(x**2 + y**2) / (x**2 + y**2), sp.exp(-x * z) * x * z + 3 * x * z * y, x * y * z * w + x * y,
    sp.atan2(y - x, x - y) + 2 * (y - x), sp.Rational(1, 3) * x * y - 0.5 * x * y * z,
]


def _derivatives(name: str) -> list[sp.Expr]:
    """The non-zero entries of the initialization Jacobian of a bundled example (sums of
    products of rotation entries: what the kernels eliminate)."""
    d = differentiate(load_model(example_path(name)))
    return [e for e in d.G_z if e != 0]


@pytest.mark.parametrize("exprs", [EXPRESSIONS, EXPRESSIONS[::-1]], ids=["forward", "reversed"])
def test_reduced_outputs_equal_sympys_cse(exprs):
    reduced = reduce_outputs("test", [exprs])
    replacements, expected = sp.cse(exprs, symbols=sp.numbered_symbols("_c"), order="none")
    assert list(reduced.replacements) == replacements
    assert list(reduced.reduced) == expected
    assert reduced.replacements, "the expressions share subexpressions"


@pytest.mark.parametrize("name", ["triple_pendulum_bodies", "slider_crank_bodies"])
def test_reduced_derivatives_equal_sympys_cse(name):
    exprs = _derivatives(name)
    reduced = reduce_outputs(name, [exprs])
    replacements, expected = sp.cse(exprs, symbols=sp.numbered_symbols("_c"), order="none")
    assert list(reduced.replacements) == replacements
    assert list(reduced.reduced) == expected


def test_extracts_minus_answers_as_sympy():
    nodes = {node for e in EXPRESSIONS + _derivatives("triple_pendulum_bodies") for node in sp.preorder_traversal(e)}
    nodes |= {-node for node in list(nodes)}
    for node in nodes:
        assert extracts_minus(node) == bool(node.could_extract_minus_sign()), node


def test_jacobians_equal_sympys_matrix_algebra():
    """``differentiate`` with sparse products equals the dense formulas of its docstring, with
    fixed coordinates masking their projection rows."""
    model = load_model(example_path("slider_crank_bodies"))
    sym = assemble(model)
    d = differentiate(sym)
    Cq = sym.C.jacobian(sp.Matrix(sym.q))
    lam, a = sp.Matrix(sym.lam), sp.Matrix(sym.a)
    assert (d.Ma - sym.M * a).expand() == sp.zeros(len(sym.q), 1)
    assert (d.F - (Cq.T * lam - sym.Q)).expand() == sp.zeros(len(sym.q), 1)
    free = sp.diag(*[0 if f else 1 for f in sym.fixed_q])
    G1 = sp.Matrix(sym.q) - sym.q0 + free * Cq.T * sp.Matrix(d.mu)
    assert (d.G[:len(sym.q), :] - G1).expand() == sp.zeros(len(sym.q), 1)


@pytest.mark.parametrize("printer", ["C", "numpy", "python"])
def test_printers_write_sympys_text(printer):
    """The printers' faster ``parenthesize``, ``_print_Add`` and ``_print_Mul``
    (:class:`fmi_adjoint.cprint.FastPrecedence`) write exactly sympy's text."""
    from sympy.printing.c import C99CodePrinter
    from sympy.printing.numpy import NumPyPrinter
    from sympy.printing.pycode import PythonCodePrinter

    from fmi_adjoint.codegen import _ArrayPrinter, _ScalarPrinter

    settings = {"fully_qualified_modules": True, "allow_unknown_functions": True}
    ours, theirs = {"C": (CPrinter(indexed({})), C99CodePrinter()),
                    "numpy": (_ArrayPrinter(), NumPyPrinter(settings)),
                    "python": (_ScalarPrinter(), PythonCodePrinter(settings))}[printer]
    extra = [2 / sp.pi * x, x / sp.pi, -x / (y * z), -(x + y) / (z * w) ** 2, x**-3 * y, -2 * x, -x,
             sp.sqrt(2) / 2 * x, x * y / (1 + x * y), -sp.sin(x) * (y - z) ** -1]
    for expr in EXPRESSIONS + extra + _derivatives("triple_pendulum_bodies")[:200]:
        assert ours.doprint(expr) == theirs.doprint(expr), expr


def test_second_order_rows_equal_sympys_matrix_algebra():
    """``second_order_table`` (sparse products, the Jacobians' differentiator shared) gives the
    expressions of its docstring's formulas formed with sympy's matrix products."""
    d = differentiate(load_model(example_path("slider_crank_bodies")))
    step, init = second_order_table(d)
    g, sym = argument_symbols(d), d.sym
    state = [*sym.q, *sym.v, *sym.a, *sym.lam]
    direction = sp.Matrix([*g["dq"], *g["dv"], *g["da"], *g["dlam"]])
    dp = sp.Matrix(len(g["dp"]), 1, list(g["dp"]))
    phi = sp.Integer(0)
    for weights, matrix in (("wM", d.Ma), ("wF", d.F), ("wC", d.C), ("wY", d.Y)):
        if matrix.rows:
            change = jacobian(matrix, state) * direction + jacobian(matrix, sym.p) * dp
            phi += (sp.Matrix(g[weights]).T * change)[0, 0]
    expected = list(jacobian(sp.Matrix([phi]), state + list(sym.p)))
    assert [e for _, column, _ in step.outputs for e in column] == expected
    z = [*sym.q, *d.mu, *sym.v, *d.nu, *sym.a, *sym.lam]
    psi = (sp.Matrix(g["wG"]).T * (d.G_z * sp.Matrix(g["dz"]) + d.G_p * dp))[0, 0]
    expected = list(jacobian(sp.Matrix([psi]), z + list(sym.p)))
    assert [e for _, column, _ in init.outputs for e in column] == expected
