"""Whitelist grammar for the expressions of model files.

An expression such as ``"2*d"`` or ``"A*sin(omega0*C**t*t)"`` is parsed with
:func:`ast.parse` (which only builds a syntax tree, it executes nothing) and the tree
is then walked node by node.  Only numbers, names known to the model, the operators
``+ - * / **`` and the functions listed in :data:`FUNCTIONS` are accepted; every
other construct (attributes, subscripts, lambdas, comparisons, strings, keyword
arguments, ...) is rejected with an :class:`~fmi_adjoint.errors.ExpressionError`
that names the construct and its column.  The content of a model file therefore
never reaches :func:`eval`.
"""

from __future__ import annotations

import ast
import math
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

from .errors import ExpressionError
from .text import excerpt

if TYPE_CHECKING:
    import sympy as sp
else:
    from .deferred import sympy as sp

__all__ = ["FUNCTIONS", "CONSTANTS", "FUNCTION_NAMES", "CONSTANT_NAMES", "TABLE_RATE_SUFFIX", "parse_expression",
           "rename_symbols", "special"]

#: The sympy name of each function an expression may call, by the name used in model files.
_SYMPY_FUNCTIONS = {
    "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan", "atan2": "atan2",
    "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "exp": "exp", "log": "log", "sqrt": "sqrt", "abs": "Abs",
    "sign": "sign", "min": "Min", "max": "Max",
}
#: The sympy name of each named constant.
_SYMPY_CONSTANTS = {"pi": "pi"}
#: The names of :data:`FUNCTIONS` and :data:`CONSTANTS` (plain strings: no sympy needed).
FUNCTION_NAMES = frozenset(_SYMPY_FUNCTIONS)

#: A time table's function ``tbl_k(t)`` has the derivative ``tbl_k_rate(t)``, the slope of its
#: segment (:func:`fmi_adjoint.model.table_function`); the code generators print both by name.
TABLE_RATE_SUFFIX = "_rate"
CONSTANT_NAMES = frozenset(_SYMPY_CONSTANTS)
_ARITY = {"atan2": (2, 2), "min": (2, 8), "max": (2, 8)}
# The same functions on floats: calls of constants are evaluated bottom-up with these, so a
# constant such as exp(1000) or acos(2) is refused where it is written (sympy would keep it
# unevaluated, and evaluating deeply nested constants exactly can take unbounded time).
_FLOAT_FUNCTIONS: dict[str, Callable[..., float]] = {
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "asin": math.asin, "acos": math.acos, "atan": math.atan,
    "atan2": math.atan2, "sinh": math.sinh, "cosh": math.cosh, "tanh": math.tanh, "exp": math.exp, "log": math.log,
    "sqrt": math.sqrt, "abs": abs, "sign": lambda x: float((x > 0) - (x < 0)), "min": min, "max": max,
}


@functools.cache
def _tables() -> tuple[dict[str, Callable[..., sp.Expr]], dict[str, sp.Expr], frozenset[sp.Basic]]:
    """``FUNCTIONS``, ``CONSTANTS`` and the constants an expression must not contain (it must
    be real and finite): sympy objects, built on first use (importing this module does not
    import sympy; issue 24, part 6)."""
    functions = {name: getattr(sp, attr) for name, attr in _SYMPY_FUNCTIONS.items()}
    constants = {name: getattr(sp, attr) for name, attr in _SYMPY_CONSTANTS.items()}
    return functions, constants, frozenset((sp.I, sp.zoo, sp.oo, sp.nan, -sp.oo))


if TYPE_CHECKING:
    FUNCTIONS: dict[str, Callable[..., sp.Expr]]
    CONSTANTS: dict[str, sp.Expr]


def __getattr__(name: str) -> object:
    """:data:`FUNCTIONS` (functions an expression may call, by the name used in model files)
    and :data:`CONSTANTS` (named constants; these names cannot be used for parameters or
    coordinates), built on first use (PEP 562)."""
    if name == "FUNCTIONS":
        return _tables()[0]
    if name == "CONSTANTS":
        return _tables()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_MAX_LENGTH = 20_000
_MAX_DEPTH = 200
_MAX_EXPONENT = 1_000
# Work bounds: the engine differentiates every expression up to twice and CSE runs over
# the results, so the size of a product (whose derivative has one term per factor, each
# with all the others) and the number of syntax nodes bound the time to build a model.
# A product of 100 factors used to take 91 s to compile; with these limits the worst
# accepted expression compiles in seconds.  Split larger laws into several elements.
_MAX_NODES = 1_000
_MAX_FACTORS = 32
# Integers beyond 2**53 are not exact doubles; they are turned into floats (and refused
# when they leave the range of doubles), so that C and numpy see the same constant.
_MAX_EXACT_INTEGER = 2**53
#: The operators an expression may use (:func:`_tables`): ``+ - * / **``.
_BINARY_OPERATORS = frozenset((ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow))

SpecialHandler: TypeAlias = "Callable[[str], sp.Expr]"


def _number(value: int | float) -> sp.Expr:
    # 17 significant digits: the printed constant round-trips to the same double.
    if isinstance(value, int):
        if abs(value) <= _MAX_EXACT_INTEGER:
            return sp.Integer(value)
        value = float(value)  # OverflowError beyond the range of doubles: callers report it
    return sp.Float(value, 17)


def _finite_number(value: int | float, where: str) -> sp.Expr:
    try:
        number = _number(value)
    except OverflowError:
        raise ExpressionError(
            f"{where}: the integer {excerpt(value)} is too large for a double (about 1.8e308); give a smaller value."
        ) from None
    if not math.isfinite(float(number)):
        raise ExpressionError(f"{where}: the number {excerpt(value)} is not finite; give a finite value.")
    return number


def parse_expression(
    text: str | float | int | sp.Expr,
    names: Mapping[str, sp.Expr],
    *,
    where: str = "expression",
    specials: Mapping[str, SpecialHandler] | None = None,
    renamed: dict | None = None,
) -> sp.Expr:
    """Parse one model expression into a sympy expression.

    Parameters
    ----------
    text : str or float or int
        The expression, e.g. ``"c_E1*x1 + c_E2*x1**3"``.  Numbers are accepted as is.
    names : mapping of str to sympy.Expr
        The names the expression may use (parameters, coordinates, ``t``, ...).
    where : str
        Where the expression comes from (file and table path); used in messages.
    specials : mapping of str to callable, optional
        Functions that take a *name* as their single argument, e.g. ``der(x)``
        for the velocity of coordinate ``x``.  The handler receives the name and
        returns the sympy object or raises :class:`ExpressionError`.
    renamed : dict, optional
        For built sympy expressions: the subexpressions renamed so far by calls with the *same*
        ``names`` and ``specials`` (:class:`Renaming`), shared so that a subexpression common to
        many expressions (a body's rotation, a force law) is checked and rebuilt once.

    Returns
    -------
    sympy.Expr

    Raises
    ------
    ExpressionError
        If the text is not a valid expression of the grammar, or uses an unknown name.
    """
    if isinstance(text, bool):
        raise ExpressionError(f"{where}: expected a number or an expression string, got the boolean {text!r}.")
    if isinstance(text, (int, float)):
        return _finite_number(text, where)
    if isinstance(text, sp.Expr):
        return _from_sympy(text, names, where, specials or {}, renamed)
    if not isinstance(text, str):
        raise ExpressionError(
            f"{where}: expected a number or an expression string, got {type(text).__name__} {text!r}."
        )
    if len(text) > _MAX_LENGTH:
        raise ExpressionError(f"{where}: the expression is {len(text)} characters long; the limit is {_MAX_LENGTH}.")
    if not text.strip():
        raise ExpressionError(f"{where}: the expression is empty; give a number or a formula such as '2*d'.")
    if not text.isascii():
        column, bad = next((k, ch) for k, ch in enumerate(text, start=1) if not ch.isascii())
        # Python's parser would fold look-alikes by NFKC: a full-width 'c' would mean 'c'.
        raise ExpressionError(
            f"{where}: the character {bad!r} (U+{ord(bad):04X}) at column {column} is not ASCII; expressions use "
            "ASCII names, digits and operators only (look-alike letters are refused)."
        )
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        col = exc.offset or 0
        raise ExpressionError(f"{where}: {text!r} is not a valid expression (syntax error at column {col}).") from None
    except (RecursionError, MemoryError, ValueError):
        raise ExpressionError(f"{where}: the expression is nested too deeply or contains invalid characters.") from None
    walker = _Walker(text, names, where, specials or {})
    result = walker.visit(tree.body, 0)
    if _not_finite(result):
        raise ExpressionError(
            f"{where}: {excerpt(text)} has a complex or infinite constant (e.g. sqrt(-1), log(0)); "
            "expressions must be real and finite."
        )
    return result


#: The special functions of a built expression (``der(x)``, ``der2(x)``, ``lam(c)``, ...) are
#: sympy functions of these names applied to a symbol that carries the name.
def special(name: str, argument: str) -> sp.Expr:
    """``name(argument)`` in a built expression, e.g. ``special("der", "x")`` for ``der(x)``."""
    return sp.Function(name, real=True)(sp.Symbol(argument, real=True))


def _not_finite(expr: sp.Expr) -> bool:
    """Whether ``expr`` contains a complex or infinite constant (one walk over its atoms; ``has``
    with the five constants walks it five times)."""
    return not _tables()[2].isdisjoint(expr.atoms())


def _from_sympy(expr: sp.Expr, names: Mapping[str, sp.Expr], where: str,
                specials: Mapping[str, SpecialHandler], renamed: dict | None = None) -> sp.Expr:
    """A sympy expression built by fmi-adjoint's own code (the multibody components,
    :mod:`fmi_adjoint.mbs`), not parsed from text: its symbols carry model names, and
    ``der(x)``-like specials are sympy functions of those names (:func:`special`).  A model
    file can never produce one (TOML values are strings and numbers), so nothing from a
    file bypasses the grammar; the names are still checked against the model's.

    One walk (:class:`_Renamer`) checks the names and the specials, refuses complex and
    infinite constants and renames; anything it cannot decide (an unknown name, a bad special)
    goes through :func:`_from_sympy_checked`, which names the problem.
    """
    try:
        return _Renamer(names, specials, {} if renamed is None else renamed).whole(expr)
    except _Undecided:
        return _from_sympy_checked(expr, names, where, specials)


def rename_symbols(exprs: Sequence[sp.Expr], mapping: Mapping[sp.Symbol, sp.Symbol]) -> list[sp.Expr]:
    """``[e.xreplace(mapping) for e in exprs]``: the same trees, built as :class:`_Renamer` builds
    them (sums and products re-sorted, not flattened again) where ``mapping`` renames symbols
    one to one into symbols the expressions do not hold otherwise; by ``xreplace`` else."""
    symbols = {sym for e in exprs for sym in e.free_symbols}
    names: dict[str, sp.Expr] = {}
    for sym in symbols:
        target = mapping.get(sym, sym)
        if not isinstance(sym, sp.Symbol) or not isinstance(target, sp.Symbol) or sym.name in names:
            return [e.xreplace(dict(mapping)) for e in exprs]
        names[sym.name] = target
    renamer = _Renamer(names, {}, {})
    try:
        return [renamer.whole(e) for e in exprs]
    except _Undecided:  # e.g. functions of names: xreplace
        return [e.xreplace(dict(mapping)) for e in exprs]


class _Undecided(Exception):
    """The one-walk renaming met something to report (:func:`_from_sympy_checked` reports it)."""


@functools.cache
def _classes() -> tuple[type[sp.Symbol], type[sp.core.function.AppliedUndef], tuple[type[sp.Add], type[sp.Mul]]]:
    """``Symbol``, ``AppliedUndef`` and ``(Add, Mul)``, looked up once (sympy is imported on first
    use, :mod:`.deferred`)."""
    return sp.Symbol, sp.core.function.AppliedUndef, (sp.Add, sp.Mul)


@functools.cache
def _sort_key() -> Callable[[sp.Basic], Any]:
    """The key sympy sorts the arguments of sums and products by (``Add.flatten``,
    ``Mul.flatten``: ``cmp_to_key(Basic.compare)``)."""
    return functools.cmp_to_key(sp.Basic.compare)


class _Renamer:
    """Rename a built expression's name symbols and specials into the model's symbols in one
    walk, each distinct subexpression once (``memo``: shared by the calls of one model parse
    with the same names and specials; its ``None`` key holds the renaming's state).

    While every name and special met so far maps to a symbol, and no two to the same one, the
    renaming is one-to-one on symbols, and a sum or product of renamed canonical arguments is
    canonical once its arguments are re-sorted: sympy's flattening (collecting like terms,
    merging powers, distributing a number over a sum) can find nothing new, because equal
    terms and bases stay equal and different ones different.  Such a node is rebuilt from its
    sorted arguments (``_from_args``, as ``Add.flatten``/``Mul.flatten`` end: the number
    first, then the rest by ``Basic.compare``), which is the tree ``xreplace`` builds without
    flattening it again (most of the time of parsing a large multibody model, issue 24).
    Every other node, and every node once a name maps to an expression, is rebuilt by its
    class as ``xreplace`` does.
    """

    def __init__(self, names: Mapping[str, sp.Expr], specials: Mapping[str, SpecialHandler], memo: dict):
        self.names = names
        self.specials = specials
        self.memo = memo
        state = memo.get(None)
        if state is None:
            # [one-to-one so far, target symbol -> what maps to it]
            state = memo[None] = [True, {}]
        self.state = state

    def whole(self, expr: sp.Expr) -> sp.Expr:
        result = self.rename(expr)
        if not self.state[0] and _not_finite(result):  # names mapped to expressions: check the result
            raise _Undecided
        return result

    def target(self, node: sp.Basic, value: sp.Basic) -> sp.Basic:
        """Record that ``node`` maps to ``value``."""
        state = self.state
        if not isinstance(value, sp.Symbol):
            state[0] = False
        elif state[0]:
            source = state[1].setdefault(value, node)
            if source != node:
                state[0] = False
        return value

    def rename(self, node: sp.Basic) -> sp.Basic:
        memo = self.memo
        done = memo.get(node)
        if done is not None:
            return done
        args = node.args
        symbol_class, applied_class, sums = _classes()
        if isinstance(node, symbol_class):
            value = self.names.get(node.name)
            if value is None:
                raise _Undecided
            result = self.target(node, value)
        elif isinstance(node, applied_class):
            handler = self.specials.get(type(node).__name__)
            if handler is None or len(args) != 1 or not isinstance(args[0], symbol_class):
                raise _Undecided
            try:
                value = handler(args[0].name)
            except ExpressionError:
                raise _Undecided from None
            result = self.target(node, value)
        elif node.is_symbol or (not args and node in _tables()[2]):
            raise _Undecided  # a symbol of another kind; a complex or infinite constant
        elif not args:
            result = node
        else:
            new = [self.rename(arg) for arg in args]
            if all(a is b for a, b in zip(new, args)):
                result = node
            elif self.state[0] and isinstance(node, sums) and node.is_commutative \
                    and all(type(a) is type(b) for a, b in zip(new, args)) \
                    and not (len(new) == 2 and new[0].is_Number and isinstance(new[1], sums[0])):
                # Every argument kept its type: a renamed function that took a sign out of its
                # argument by the names' order (sin(b - a) -> -sin(a - b), a Mul now) must be
                # flattened into its parent by the class, as xreplace does.
                rest = new[1:] if new[0].is_Number else new
                rest.sort(key=_sort_key())
                result = node._from_args(new[:1] + rest if new[0].is_Number else rest, True)
            else:
                result = node.func(*new)
        memo[node] = result
        return result


def _from_sympy_checked(expr: sp.Expr, names: Mapping[str, sp.Expr], where: str,
                        specials: Mapping[str, SpecialHandler]) -> sp.Expr:
    """:func:`_from_sympy` step by step (the specials, then the names, then the constants),
    raising the :class:`ExpressionError` that names the first problem."""
    replace: dict[sp.Basic, sp.Expr] = {}
    for applied in expr.atoms(sp.core.function.AppliedUndef):
        handler = specials.get(type(applied).__name__)
        args = applied.args
        if handler is None or len(args) != 1 or not isinstance(args[0], sp.Symbol):
            raise ExpressionError(f"{where}: {excerpt(str(applied))} is not one of "
                                  f"{', '.join(sorted(specials)) or '(no special functions here)'} of a name.")
        try:
            replace[applied] = handler(args[0].name)
        except ExpressionError as exc:
            raise ExpressionError(f"{where}: {exc}") from None
    # The arguments of specials are names of another kind: only the symbols outside them must
    # be model names.  One simultaneous xreplace then maps both (it replaces a special whole,
    # without looking inside, and never rereads a result as a name).
    symbols = expr.free_symbols
    unknown = [sym for sym in symbols if not isinstance(sym, sp.Symbol) or sym.name not in names]
    if unknown and replace:  # perhaps only special arguments: look outside the specials
        holders = {applied: sp.Dummy(real=True) for applied in replace}
        symbols = expr.xreplace(holders).free_symbols - set(holders.values())
        unknown = [sym for sym in symbols if not isinstance(sym, sp.Symbol) or sym.name not in names]
    if unknown:
        known = ", ".join(sorted(names))
        raise ExpressionError(f"{where}: unknown name '{min(unknown, key=str)}'. Known names: {excerpt(known, 200)}.")
    mapping: dict[sp.Basic, sp.Expr] = {sym: names[sym.name] for sym in symbols}
    mapping.update(replace)
    result = expr.xreplace(mapping)
    if _not_finite(result):
        raise ExpressionError(f"{where}: {excerpt(str(expr))} has a complex or infinite constant; "
                              "expressions must be real and finite.")
    return result


class _Walker:
    def __init__(self, text: str, names: Mapping[str, sp.Expr], where: str, specials: Mapping[str, SpecialHandler]):
        self.text = text
        self.names = names
        self.where = where
        self.specials = specials
        self.nodes = 0

    def fail(self, node: ast.AST, problem: str, fix: str) -> ExpressionError:
        col = getattr(node, "col_offset", 0) + 1
        return ExpressionError(f"{self.where}: {problem} at column {col} of {excerpt(self.text, 80)}. {fix}")

    def visit(self, node: ast.AST, depth: int) -> sp.Expr:
        if depth > _MAX_DEPTH:
            raise self.fail(node, "the expression is nested too deeply", f"Keep nesting below {_MAX_DEPTH} levels.")
        self.nodes += 1
        if self.nodes > _MAX_NODES:
            raise self.fail(node, f"the expression has more than {_MAX_NODES} terms and operators",
                            "Split the law into several force elements or outputs.")
        if isinstance(node, ast.Constant):
            return self.constant(node)
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            operand = self.visit(node.operand, depth + 1)
            return -operand if isinstance(node.op, ast.USub) else operand
        if isinstance(node, ast.BinOp):
            return self.binary(node, depth)
        if isinstance(node, ast.Call):
            return self.call(node, depth)
        raise self.fail(
            node,
            f"'{type(node).__name__}' is not allowed",
            "Only numbers, model names, + - * / ** and the functions "
            f"{', '.join(sorted(FUNCTION_NAMES))} may appear.",
        )

    def constant(self, node: ast.Constant) -> sp.Expr:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(node, f"the literal {value!r} is not a number", "Only real numbers may appear.")
        try:
            return _finite_number(value, self.where)
        except ExpressionError:
            raise self.fail(node, f"the number {excerpt(value)} is not finite as a double",
                            "Give a finite value of magnitude below 1.8e308.") from None

    def name(self, node: ast.Name) -> sp.Expr:
        if node.id in self.names:
            return self.names[node.id]
        if node.id in CONSTANT_NAMES:
            return _tables()[1][node.id]
        if node.id in FUNCTION_NAMES or node.id in self.specials:
            raise self.fail(node, f"the function '{node.id}' is used without arguments", f"Call it, e.g. {node.id}(x).")
        known = ", ".join(sorted(self.names)) or "(none)"
        raise self.fail(node, f"unknown name '{node.id}'", f"Known names here: {known}.")

    def binary(self, node: ast.BinOp, depth: int) -> sp.Expr:
        if isinstance(node.op, ast.BitXor):
            raise self.fail(node, "'^' is not a power operator", "Write powers as x**3.")
        if type(node.op) not in _BINARY_OPERATORS:
            raise self.fail(
                node, f"the operator '{type(node.op).__name__}' is not allowed", "Use only + - * / and **."
            )
        left = self.visit(node.left, depth + 1)
        right = self.visit(node.right, depth + 1)
        if isinstance(node.op, ast.Add):
            result = left + right
        elif isinstance(node.op, ast.Sub):
            result = left - right
        elif isinstance(node.op, ast.Mult):
            result = left * right
            if isinstance(result, sp.Mul) and len(result.args) > _MAX_FACTORS:
                raise self.fail(node, f"a product of more than {_MAX_FACTORS} factors",
                                "Split the law into several force elements or outputs.")
        elif isinstance(node.op, ast.Div):
            if right.is_zero:
                raise self.fail(node, "division by zero", "Check the divisor.")
            result = left / right
        else:
            result = self.power(node, left, right)
        # Constant folding may leave the range of doubles (1e308*10) or of exact integers
        # (rationals with huge numerators would print as integer literals C cannot hold).
        if result.is_Rational and max(abs(result.p), abs(result.q)) > _MAX_EXACT_INTEGER:
            result = sp.Float(float(result), 17) if math.isfinite(float(result)) else sp.oo
        if result.is_number:
            try:
                finite = math.isfinite(float(result))
            except TypeError:  # complex
                finite = False
            if not finite:
                raise self.fail(node, "the constant is not a finite double", "Check the constants.")
        return result

    def power(self, node: ast.BinOp, base: sp.Expr, exponent: sp.Expr) -> sp.Expr:
        # sympy evaluates number**number exactly; a hostile 10**10**10 would never return.
        if exponent.is_number and not exponent.is_real:
            raise self.fail(node, "the exponent is not a real number", "Check the constants.")
        if exponent.is_number and abs(float(exponent)) > _MAX_EXPONENT:
            raise self.fail(node, f"the exponent {exponent} is too large", f"Keep |exponent| <= {_MAX_EXPONENT}.")
        if base.is_number and exponent.is_number:
            try:
                value = float(base) ** float(exponent)
            except (OverflowError, ZeroDivisionError):
                raise self.fail(node, "the power overflows or divides by zero", "Check the constants.") from None
            if isinstance(value, complex) or not math.isfinite(value):
                raise self.fail(node, "the power is not a finite real number", "Check the constants.")
            return _number(value)
        return base**exponent

    def call(self, node: ast.Call, depth: int) -> sp.Expr:
        if not isinstance(node.func, ast.Name):
            raise self.fail(node, "only plain function names may be called", "Write e.g. sin(x).")
        fname = node.func.id
        if node.keywords:
            raise self.fail(node, f"keyword arguments in the call of '{fname}'", "Pass arguments by position.")
        if any(isinstance(arg, ast.Starred) for arg in node.args):
            raise self.fail(node, f"'*' arguments in the call of '{fname}'", "Pass arguments one by one.")
        if fname in self.specials:
            if len(node.args) != 1 or not isinstance(node.args[0], ast.Name):
                raise self.fail(node, f"'{fname}' takes exactly one name", f"Write e.g. {fname}(x1).")
            return self.specials[fname](node.args[0].id)
        if fname not in FUNCTION_NAMES:
            allowed = ", ".join(sorted(list(FUNCTION_NAMES) + list(self.specials)))
            raise self.fail(node, f"unknown function '{fname}'", f"Allowed functions: {allowed}.")
        low, high = _ARITY.get(fname, (1, 1))
        if not low <= len(node.args) <= high:
            count = f"{low}" if low == high else f"{low} to {high}"
            raise self.fail(node, f"'{fname}' takes {count} argument(s), got {len(node.args)}", "Fix the call.")
        args = [self.visit(arg, depth + 1) for arg in node.args]
        if all(arg.is_number for arg in args):
            try:
                value = _FLOAT_FUNCTIONS[fname](*(float(arg) for arg in args))
            except (ValueError, OverflowError, ZeroDivisionError, TypeError):
                value = math.nan
            if not math.isfinite(value):
                raise self.fail(node, f"'{fname}' of these constants is not a finite real number",
                                "Check the constants (e.g. exp(1000), acos(2) and log(0) are not).")
        return _tables()[0][fname](*args)
