"""The shortcuts of lowering and parsing a large multibody model (issue 24) build sympy's own trees.

Lowering forms marker positions and joint rows without sympy's flattening
(:func:`fmi_adjoint.mbs.rotations.combination`), parsing renames built expressions without
rebuilding them through sympy's constructors (``parse_expression(..., renamed=...)``), and both
pause the garbage collector (:func:`fmi_adjoint.model.collection_paused`).  The trees must be
exactly those of the plain sympy operations (``srepr``: the same nodes in the same order), so
that the partition, the cache keys and the kernels see no difference.
"""

from __future__ import annotations

import gc
import random

import pytest
import sympy as sp

from fmi_adjoint import mbs
from fmi_adjoint.errors import ExpressionError
from fmi_adjoint.expressions import parse_expression, rename_symbols, special
from fmi_adjoint.mbs import rotations as rot
from fmi_adjoint.mbs.frames import BodyKinematics
from fmi_adjoint.model import Coordinate, Output, collection_paused

E = sp.symbols("b_e0 b_e1 b_e2 b_e3", real=True)
X, Y, Z = sp.symbols("b_x b_y b_z", real=True)
K = sp.Symbol("k", real=True)


def _same(a: sp.Basic, b: sp.Basic) -> None:
    assert sp.srepr(a) == sp.srepr(b)


def _weights(rng: random.Random) -> list[object]:
    pool = [sp.Float(rng.uniform(-1, 1), 17), sp.Float(rng.uniform(-1, 1)), sp.Integer(rng.randint(-3, 3)),
            sp.Rational(rng.randint(-5, 5), rng.randint(1, 4)), 0, 1, -1, sp.Float(0.0), 2]
    return [rng.choice(pool) for _ in range(3)]


def test_combination_is_the_tree_of_sympys_sum_of_products():
    rng = random.Random(24)
    rows = [list(rot.A(E).row(k)) for k in range(3)]
    others = [X, 3 * Y, K * X, sp.sin(X) - 2 * Z, sp.Float(0.25), sp.Integer(0), X + Y - 1, K * (X + Y), sp.sqrt(2) * X]
    decided = 0
    for trial in range(300):
        exprs = rows[trial % 3] if trial < 150 else [rng.choice(others) for _ in range(3)]
        weights = _weights(rng)
        reference = sp.Add(*(x * w for x, w in zip(exprs, weights)))
        result = rot.combination(exprs, weights)
        if result is not None:
            decided += 1
            _same(result, reference)
    assert decided > 200  # the shortcut is taken, not only the fallback
    assert rot.combination([X, Y], [K, 1]) is None  # a weight that is not a number: sympy decides


def test_difference_and_matmul_are_sympys_trees():
    rng = random.Random(5)
    A = rot.A(E)
    for _ in range(20):
        s = sp.Matrix([sp.Float(rng.uniform(-1, 1), 17) for _ in range(3)])
        product = rot.matmul(A, s)
        for k in range(3):
            _same(product[k], sp.Add(*(A[k, j] * s[j] for j in range(3))))
        u, v = product[0] + X, product[1] - 2 * Y
        _same(rot.difference(u, v), u - v)
    _same(rot.difference(X + 2 * Y, X + 2 * Y), sp.Integer(0))


def test_a_marker_position_is_the_tree_of_u_plus_A_s():
    body = BodyKinematics("b", "spatial", False, ("b_x", "b_y", "b_z", "b_e0", "b_e1", "b_e2", "b_e3"))
    for local in ([sp.Float(0.3, 17), sp.Float(-0.1, 17), sp.Float(0.0, 17)], [K / 2, 0, 1]):
        position = body.position(local)
        reference = sp.Matrix([X, Y, Z]) + rot.A(E) * sp.Matrix(local)
        for k in range(3):
            _same(position[k], reference[k])
    rotation = body.rotation()
    rotation[0, 0] = 0  # a fresh matrix each time: changing one does not change the body's
    _same(body.rotation()[0, 0], rot.A(E)[0, 0])


QS = sp.symbols("q_0 q_1 q_2", real=True)
VS = sp.symbols("v_0 v_1 v_2", real=True)
P0 = sp.Symbol("p_0", real=True)
NAMES = {"x": QS[0], "y": QS[1], "z": QS[2], "k": P0, "t": sp.Symbol("t", real=True)}
SPECIALS = {"der": dict(zip(("x", "y", "z"), VS)).__getitem__}
N = {name: sp.Symbol(name, real=True) for name in NAMES}


def _reference(expr: sp.Expr, names: dict) -> sp.Expr:
    mapping: dict[sp.Basic, sp.Basic] = {N[n]: value for n, value in names.items() if n in N}
    mapping.update({special("der", n): VS[i] for i, n in enumerate(("x", "y", "z"))})
    return expr.xreplace(mapping)


def test_renaming_a_built_expression_is_xreplace():
    x, y, z, k, t = (N[n] for n in ("x", "y", "z", "k", "t"))
    shared = (x - y) ** 2 + sp.Float(0.3, 17) * z * x
    exprs = [shared, sp.sqrt(shared) * k, sp.sin(z - x) + k * special("der", "x"),
             sp.atan2(y - z, x + sp.Rational(1, 3)), -k * (special("der", "y") - special("der", "z")) * shared,
             x * y * z + t * 2, sp.Integer(7)]
    renamed: dict = {}
    for expr in exprs * 2:  # the second round reads the shared memo
        _same(parse_expression(expr, NAMES, specials=SPECIALS, renamed=renamed), _reference(expr, NAMES))


def test_renaming_that_flips_a_functions_sign_is_xreplace():
    """sympy takes the sign out of sin, tan, atan, ... by the order of the argument's names:
    renaming a, b to q_1, q_0 turns sin(a - b) into -sin(q_0 - q_1), a product, which must be
    flattened into the product or power around it (the reviewer's case: k*sin(phi2 - phi1)
    gave -p_0*(-sin(q_0 - q_1)), whose terms no longer merge)."""
    a, b, k, c = (sp.Symbol(n, real=True) for n in ("a", "b", "k", "c"))
    names = {"a": QS[1], "b": QS[0], "k": P0, "c": QS[2]}
    exprs = [k * sp.sin(a - b) + c, k * sp.sin(a - b) ** 3, k * c * sp.tan(a - b), sp.atan(a - b) * k + k * c,
             sp.sin(k * c - a) * sp.sinh(b - a)]
    mapping = {sp.Symbol(n, real=True): value for n, value in names.items()}
    for expr in exprs:
        _same(parse_expression(expr, names, renamed={}), expr.xreplace(mapping))


def test_renaming_that_merges_names_or_maps_to_expressions_is_xreplace():
    x, y, k = N["x"], N["y"], N["k"]
    renamed: dict = {}
    first = (x - y) ** 2 + k * x
    _same(parse_expression(first, NAMES, renamed=renamed), _reference(first, NAMES))
    merged = {**NAMES, "y": QS[0]}  # two names, one symbol: x - y is 0
    expr = sp.sin(x - y) + k * (x + y) + 1 / (1 + x - y)
    _same(parse_expression(expr, merged, renamed={}), _reference(expr, merged))
    signal = {**NAMES, "k": sp.cos(NAMES["t"])}
    _same(parse_expression(k * x - k, signal, renamed={}), _reference(k * x - k, signal))


def test_renaming_still_names_unknown_names_and_specials():
    x, w = N["x"], sp.Symbol("w", real=True)
    renamed: dict = {}
    parse_expression(x + 1, NAMES, renamed=renamed)
    with pytest.raises(ExpressionError, match="unknown name 'w'"):
        parse_expression(x + w, NAMES, renamed=renamed)
    with pytest.raises(ExpressionError, match=r"'der\(x\)' is not one of"):
        parse_expression(x * special("der", "x"), NAMES, renamed={})  # no specials here
    with pytest.raises(ExpressionError, match="complex or infinite"):
        parse_expression(x + sp.zoo, NAMES, renamed=renamed)


class _Probe:
    """A component that records whether the garbage collector runs while it is lowered."""

    name = "probe"

    def __init__(self) -> None:
        self.seen: list[bool] = []

    def lower(self, ctx) -> None:
        self.seen.append(gc.isenabled())
        ctx.add_coordinate(Coordinate("s", "translational", 1.0, 0.0, 0.0))
        ctx.add_output(Output("s_out", "s"))


@pytest.mark.parametrize("enabled", [True, False])
def test_lowering_pauses_the_garbage_collector_and_restores_it(enabled):
    probe = _Probe()
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        mbs.MultibodySystem("probe_system", forces=(probe,)).to_model()
        assert probe.seen == [False]
        assert gc.isenabled() is enabled
        with pytest.raises(RuntimeError):
            with collection_paused():
                raise RuntimeError("an error while building")
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_overlapping_pauses_restore_the_collector_once_and_respect_the_callers_choice():
    """Two overlapping pauses (two threads building models) re-enable the collector when the
    last one ends, not the first (before: the first pause to end re-enabled it while the other
    was still building); a collector off before the pauses stays off."""
    was = gc.isenabled()
    gc.enable()
    try:
        first, second = collection_paused(), collection_paused()
        first.__enter__()
        second.__enter__()
        first.__exit__(None, None, None)
        assert not gc.isenabled()  # the second is still building
        second.__exit__(None, None, None)
        assert gc.isenabled()
        gc.disable()
        with collection_paused():
            pass
        assert not gc.isenabled()  # off before: off after
    finally:
        (gc.enable if was else gc.disable)()


def test_rotational_mass_from_a_template_is_the_tree_formed_for_the_body():
    m, l = sp.symbols("m l", real=True)
    tensors = [sp.diag(m * l**2 / 12, m * l**2 / 14, m * l**2 / 16), sp.diag(1, 2, 3),
               sp.Matrix([[m, l, 0], [l, 2 * m, l * m], [0, l * m, 3]]),
               sp.Matrix(3, 3, [sp.Float(0.1 * (k + 1), 17) for k in range(9)])]
    for J in tensors:
        for body in ("a", "b"):
            e = sp.symbols(f"{body}_e0 {body}_e1 {body}_e2 {body}_e3", real=True)
            block = rot.rotational_mass(e, J)
            for key, entry in rot._rotational_mass(e, J).items():
                _same(block[key], entry)
    e = sp.symbols("c_e0 c_e1 c_e2 c_e3", real=True)
    J = sp.diag(e[0], 1, 1)  # a tensor holding the parameters themselves: formed directly
    assert rot.rotational_mass(e, J) == rot._rotational_mass(e, J)


def test_rename_symbols_is_xreplace():
    x, y, z, k = (N[n] for n in ("x", "y", "z", "k"))
    exprs = [(x - y) ** 2 * k + sp.Float(0.5, 17) * z, sp.sin(x) * y - k, sp.Integer(3)]
    for mapping in ({x: QS[0], y: QS[1]}, {x: y, y: x}, {x: QS[0], y: QS[0]}, {x: QS[0], z: k}):
        for got, expr in zip(rename_symbols(exprs, mapping), exprs):
            _same(got, expr.xreplace(mapping))
