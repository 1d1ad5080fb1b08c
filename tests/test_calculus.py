"""The derivatives of every build (fmi_adjoint.calculus) against sympy's own ``diff``.

The differentiator applies sympy's rules with a memo and hands every node it does not cover to
``expr.diff``; these tests compare both on expressions with each kind of node, symbolically
(the difference expands to zero) and at random points.
"""

from __future__ import annotations

import random

import pytest
import sympy as sp
from sympy.core.function import AppliedUndef

from fmi_adjoint.calculus import WIDE, Differentiator, derivative, derivatives
from fmi_adjoint.expressions import special
from fmi_adjoint.mbs import rotations as rot
from tolerances import EXACT

x, y, z = sp.symbols("x y z", real=True)
u = sp.Dummy("u", real=True)
f = sp.Function("tbl_0", real=True)

EXPRESSIONS = {
    "polynomial": 3 * x**2 * y - 2 * x * z**3 + 7,
    "product of sums": (x + y) * (x - z) * (y + 2 * z),
    "power of a sum": (x * y + z) ** 3 + (x + 1) ** sp.Rational(-1, 2),
    "symbolic exponent": x**y + y**(x * z),
    "float exponent": (x**2 + 1) ** 1.5,
    "quotient": (x * y) / (1 + z**2),
    "trigonometry": sp.sin(x * y) * sp.cos(z) + sp.tan(x + z),
    "exp and log": sp.exp(-x * z) * sp.log(1 + y**2),
    "two arguments": sp.atan2(y, x) + sp.atan2(x * z, 1 + y),
    "hyperbolic": sp.tanh(x * y) + sp.sinh(z) * sp.cosh(x),
    "inverse": sp.asin(x / 3) + sp.acos(y / 4) + sp.atan(x * z),
    "sqrt": sp.sqrt(x**2 + y**2 + z**2),
    "abs and sign": sp.Abs(x - y) * z + sp.sign(x) * y,
    "max and min": sp.Max(x, y * z) + sp.Min(x**2, z),
    "piecewise": sp.Piecewise((x**2 * y, x > 0), (z * x, True)),
    "opaque function": f(x * y) * z + f(t := sp.Symbol("t", real=True)) * x,
    "dummy": u**2 * x + sp.sin(u * y),
    "nested": sp.sin(sp.cos(x * y) ** 2 + sp.exp(z * sp.sin(x))),
}


def _same(a: sp.Expr, b: sp.Expr, symbols) -> None:
    """Equal at random points; with opaque functions (no values), symbolically."""
    if a.atoms(AppliedUndef) or b.atoms(AppliedUndef):
        assert str(sp.expand(a)) == str(sp.expand(b))  # as text: each Subs has its own dummy
        return
    rng = random.Random(4)
    for _ in range(5):
        point = {s: rng.uniform(0.3, 1.7) for s in symbols}
        va, vb = complex(a.xreplace(point).evalf()), complex(b.xreplace(point).evalf())
        assert abs(va - vb) <= EXACT * max(1.0, abs(vb)), (a, b, point)


@pytest.mark.parametrize("name", list(EXPRESSIONS))
def test_every_derivative_equals_sympys(name):
    expr = EXPRESSIONS[name]
    symbols = sorted(expr.free_symbols, key=str)
    calculus = Differentiator()
    for s in [x, y, z, u, t]:
        ours = calculus.derivative(expr, s)
        theirs = expr.diff(s)
        _same(ours, theirs, symbols)
        if s not in expr.free_symbols:
            assert ours == 0


def test_the_memo_is_per_variable():
    """One differentiator, one subexpression, two variables: two derivatives (a memo keyed by
    the node alone would hand back the first)."""
    shared = sp.sin(x * y)
    calculus = Differentiator()
    assert calculus.derivative(shared, x) == y * sp.cos(x * y)
    assert calculus.derivative(shared, y) == x * sp.cos(x * y)
    assert calculus.derivative(shared**2 + x, x) == 2 * y * sp.sin(x * y) * sp.cos(x * y) + 1


def test_derivatives_by_a_function_application_are_sympys():
    """``der(x)`` is not a symbol: differentiating by it is sympy's business (bodies' Jacobians
    of velocities)."""
    velocity = 3 * special("der", "x") * x + special("der", "y")
    assert derivative(velocity, special("der", "x")) == 3 * x
    assert derivative(velocity, special("der", "y")) == 1


def test_wide_sums_and_products_are_differentiated_term_by_term():
    knots = sp.symbols(f"xi0:{3 * WIDE}", real=True)
    signal = sp.Add(*(k * sp.sin((i + 1) * t) for i, k in enumerate(knots)))
    product = sp.Mul(*(1 + k * t for k in knots[:WIDE + 2]))
    for expr in (signal, x * signal, product):
        ours = derivatives(expr, {knots[0]: 0, knots[5]: 1, t: 2, x: 3})
        assert set(ours) == {s for s in (knots[0], knots[5], t, x) if s in expr.free_symbols}
        for s, d in ours.items():
            assert sp.expand(d - expr.diff(s)) == 0


def test_the_rotational_mass_table_equals_the_matrix_product():
    """``rot.rotational_mass`` (a table of the product) against ``expand(4 G^T J G)`` with a full
    symbolic inertia tensor (dissertation eq. (2.41), our ``G`` half of its ``G``)."""
    e = sp.symbols("e0:4", real=True)
    J = sp.Matrix(3, 3, lambda i, j: sp.Symbol(f"J{min(i, j)}{max(i, j)}", real=True))
    G = rot.G(e)
    product = 4 * G.T * J * G
    table = rot.rotational_mass(e, J)
    assert set(table) == {(i, j) for i in range(4) for j in range(i, 4)}
    for (i, j), entry in table.items():
        assert sp.expand(product[i, j] - entry) == 0
    diagonal = rot.rotational_mass(e, sp.diag(1, 2, 3))
    assert diagonal[(0, 0)] == 4 * (e[1] ** 2 + 2 * e[2] ** 2 + 3 * e[3] ** 2)
