"""The whitelist expression grammar (fmi_adjoint.expressions.parse_expression).

Accepted constructs must give the mathematically right sympy value (checked against
independent numeric evaluation with :mod:`math`); every rejected construct must raise
ExpressionError whose message names the construct, and hostile inputs (huge powers, deep
nesting) must be rejected without hanging or crashing the interpreter.
"""

from __future__ import annotations

import math
import signal
import subprocess
import sys
import textwrap
from contextlib import contextmanager

import pytest
import sympy as sp

from fmi_adjoint.errors import ExpressionError, ModelError
from fmi_adjoint.expressions import CONSTANTS, FUNCTIONS, parse_expression
from tolerances import EXACT

X, Y, Z = sp.symbols("x y z", real=True)
NAMES = {"x": X, "y": Y, "z": Z}
POINT = {"x": 0.7, "y": -1.3, "z": 2.2}


def parse(text, **kw):
    return parse_expression(text, NAMES, where="test.toml, forces[0].stiffness", **kw)


def numeric(expr: sp.Expr) -> float:
    return float(expr.subs({X: POINT["x"], Y: POINT["y"], Z: POINT["z"]}))


@contextmanager
def hang_guard(seconds: int = 60):
    """Turn a hang into a test failure (not a timing assertion: the limit is far above any
    reasonable run time and only stops an endless evaluation)."""
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def handler(signum, frame):
        raise AssertionError(f"parse_expression did not return within {seconds} s (it evaluates the power)")

    old = signal.signal(signal.SIGALRM, handler)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# -- accepted constructs ---------------------------------------------------------------------

x, y, z = POINT["x"], POINT["y"], POINT["z"]

ACCEPTED = [
    ("42", 42.0),
    ("1.5e-3", 1.5e-3),
    ("x", x),
    ("x + y", x + y),
    ("x - y - z", x - y - z),  # left associative
    ("x * y / z", x * y / z),
    ("x / y / z", x / y / z),
    ("x ** 3", x**3),
    ("2 ** 3 ** 2", 2.0 ** 9),  # right associative
    ("-x", -x),
    ("+x", x),
    ("-x ** 2", -(x**2)),  # unary minus binds weaker than **
    ("(x + y) * z", (x + y) * z),
    ("2*x + y**2 - 3/4", 2 * x + y**2 - 0.75),
    ("pi", math.pi),
    ("2*pi*x", 2 * math.pi * x),
    ("sin(x) + cos(y) * tan(z)", math.sin(x) + math.cos(y) * math.tan(z)),
    ("asin(x) + acos(x) + atan(y)", math.asin(x) + math.acos(x) + math.atan(y)),
    ("atan2(y, x)", math.atan2(y, x)),
    ("sinh(x) + cosh(y) + tanh(z)", math.sinh(x) + math.cosh(y) + math.tanh(z)),
    ("exp(x) * log(z) / sqrt(z)", math.exp(x) * math.log(z) / math.sqrt(z)),
    ("abs(y) + sign(y)", abs(y) - 1.0),
    ("min(x, y, z) + max(x, y)", min(x, y, z) + max(x, y)),
    ("100*sin(4*pi*25**x*x)", 100 * math.sin(4 * math.pi * 25**x * x)),
]


@pytest.mark.parametrize("text, expected", ACCEPTED, ids=[t for t, _ in ACCEPTED])
def test_accepted_expression_has_the_right_value(text, expected):
    expr = parse(text)
    assert isinstance(expr, sp.Expr)
    assert numeric(expr) == pytest.approx(expected, rel=EXACT, abs=EXACT)


def test_symbolic_structure_is_kept():
    assert sp.simplify(parse("2*x + y**2 - 3/4") - (2 * X + Y**2 - sp.Rational(3, 4))) == 0
    assert parse("pi") is CONSTANTS["pi"]
    assert parse("sin(x)") == sp.sin(X)
    assert parse("x ** 3") == X**3


@pytest.mark.parametrize("value", [0.1, 1.0 / 3.0, 6.02214076e23, 5e-324, 1e300, -2.5])
def test_numbers_round_trip_to_the_same_double(value):
    assert float(parse(repr(value))) == value
    assert float(parse(value)) == value


def test_integer_and_float_arguments_are_accepted_as_is():
    assert parse(3) == 3
    assert float(parse(2.5)) == 2.5


def test_specials_receive_the_name():
    seen = []

    def der(name):
        seen.append(name)
        return sp.Symbol(f"v_{name}")

    expr = parse("2*der(x)", specials={"der": der})
    assert seen == ["x"]
    assert expr == 2 * sp.Symbol("v_x")


# -- rejected constructs ---------------------------------------------------------------------

REJECTED = [
    # (text, fragments that the message must contain)
    ("x.__class__", ["Attribute"]),
    ("x[0]", ["Subscript"]),
    ("__import__('os')", ["__import__", "unknown function"]),
    ("__import__('os').system('ls')", ["only plain function names"]),
    ("lambda: 1", ["Lambda"]),
    ("x < y", ["Compare"]),
    ("x == y", ["Compare"]),
    ("'abc'", ["'abc'", "not a number"]),
    ("b'abc'", ["not a number"]),
    ("sin(x=1)", ["keyword arguments", "sin"]),
    ("x ^ 2", ["'^'", "**"]),
    ("x if y else z", ["IfExp"]),
    ("[x, y]", ["List"]),
    ("x // y", ["FloorDiv"]),
    ("x % y", ["Mod"]),
    ("not x", ["UnaryOp"]),
    ("x and y", ["BoolOp"]),
    ("min(*[x, y])", ["'*' arguments"]),
    ("foo(x)", ["unknown function 'foo'", "sin", "atan2"]),
    ("sin", ["'sin'", "without arguments"]),
    ("atan2(x)", ["atan2", "2 argument"]),
    ("sin(x, y)", ["sin", "1 argument"]),
    ("x = 1", ["syntax error"]),
    ("x; y", ["syntax error"]),
    ("x +", ["syntax error"]),
    ("x/0", ["division by zero"]),
    ("(-8)**(1/3)", ["not a finite real number"]),
]


@pytest.mark.parametrize("text, fragments", REJECTED, ids=[t for t, _ in REJECTED])
def test_rejected_construct_is_named(text, fragments):
    with pytest.raises(ExpressionError) as info:
        parse(text)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} missing from: {message}"
    # The message says where the expression comes from.
    assert "test.toml, forces[0].stiffness" in message


def test_expression_error_is_a_model_error_and_a_value_error():
    with pytest.raises(ModelError):
        parse("x.y")
    with pytest.raises(ValueError):
        parse("x.y")


def test_unknown_name_lists_the_known_names():
    with pytest.raises(ExpressionError) as info:
        parse("x + k_typo")
    message = str(info.value)
    assert "unknown name 'k_typo'" in message
    assert "Known names here: x, y, z" in message


def test_unknown_name_without_known_names_says_none():
    with pytest.raises(ExpressionError, match=r"unknown name 'q'.*\(none\)"):
        parse_expression("q", {})


def test_unknown_function_lists_the_allowed_functions():
    with pytest.raises(ExpressionError) as info:
        parse("erf(x)")
    message = str(info.value)
    assert "unknown function 'erf'" in message
    for name in FUNCTIONS:
        assert name in message


def test_message_gives_the_column():
    with pytest.raises(ExpressionError, match="column 5"):
        parse("x + y.real")


@pytest.mark.parametrize("text", ["10**10**10", "9**9**9**9", "(10**10)**10**10", "10**-10**10", "x**(10**10)"])
def test_huge_exponent_is_rejected_without_evaluating_it(text):
    with hang_guard(), pytest.raises(ExpressionError, match="exponent .* too large"):
        parse(text)


def test_moderate_powers_are_still_folded():
    assert float(parse("2**10")) == 1024.0
    expr = parse("x**(10**3)")
    assert float(expr.subs(X, 1.001)) == pytest.approx(1.001**1000, rel=EXACT)


def test_deep_nesting_is_rejected_without_crashing():
    """Run in a subprocess: a C-stack overflow would kill the interpreter, not raise."""
    script = textwrap.dedent(
        """
        from fmi_adjoint.errors import ExpressionError
        from fmi_adjoint.expressions import parse_expression
        cases = {
            "parentheses": "(" * 10000 + "x" + ")" * 10000,
            "parentheses_5000": "(" * 5000 + "x" + ")" * 5000,
            "unary_minus": "-" * 10000 + "x",
            "calls": "sin(" * 3000 + "x" + ")" * 3000,
            "power_chain": "**".join(["x"] * 5000),
            "sum_chain": "+".join(["x"] * 9000),
        }
        for name, text in cases.items():
            try:
                parse_expression(text, {"x": 1.0})
            except ExpressionError as exc:
                print(name, "rejected:", str(exc)[:60].replace(chr(10), " "))
            else:
                print(name, "ACCEPTED")
        print("done")
        """
    )
    with hang_guard(120):
        run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"interpreter crashed or raised: rc={run.returncode}\n{run.stderr[-2000:]}"
    lines = run.stdout.splitlines()
    assert lines[-1] == "done", run.stdout
    for line in lines[:-1]:
        assert "rejected:" in line, line


def test_nesting_within_the_limit_is_accepted():
    assert numeric(parse("(" * 100 + "x" + ")" * 100)) == x
    assert numeric(parse("-(" * 50 + "x" + ")" * 50)) == x  # 50 minus signs


@pytest.mark.parametrize("text", ["", "   ", "\t\n"])
def test_empty_expression_is_rejected(text):
    with pytest.raises(ExpressionError, match="empty"):
        parse(text)


def test_too_long_expression_is_rejected():
    with pytest.raises(ExpressionError, match="characters long"):
        parse("x+" * 10_000 + "x")


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_non_finite_number_arguments_are_rejected(value):
    with pytest.raises(ExpressionError, match="not finite"):
        parse(value)


@pytest.mark.parametrize("text", ["1e999", "-1e999", "2*1e400"])
def test_non_finite_literals_are_rejected(text):
    with pytest.raises(ExpressionError, match="not finite"):
        parse(text)


@pytest.mark.parametrize("text", ["nan", "inf"])
def test_nan_and_inf_are_not_names(text):
    with pytest.raises(ExpressionError, match=f"unknown name '{text}'"):
        parse(text)


@pytest.mark.parametrize("value", [True, False])
def test_boolean_arguments_are_rejected(value):
    with pytest.raises(ExpressionError, match="boolean"):
        parse(value)


@pytest.mark.parametrize("text", ["True", "False", "None", "x + True"])
def test_boolean_and_none_literals_are_rejected(text):
    with pytest.raises(ExpressionError, match="is not a number"):
        parse(text)


@pytest.mark.parametrize("value", [None, [1.0], {"a": 1}, b"1", 1 + 2j])
def test_other_argument_types_are_rejected(value):
    with pytest.raises(ExpressionError, match="expected a number or an expression string"):
        parse(value)


def test_complex_literal_is_rejected():
    with pytest.raises(ExpressionError, match="not a number"):
        parse("1j")
