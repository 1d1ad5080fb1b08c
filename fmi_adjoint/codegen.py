"""Turn sympy matrices into vectorized numpy functions.

The generated function takes the argument groups of the model (``q, v, a, lam, t, p``)
where every state argument may carry leading batch dimensions: ``q`` of shape
``(..., n)`` and ``t`` of shape ``(...)``; parameters ``p`` have shape ``(n_p,)`` and are
shared.  The same code therefore evaluates one time step inside the Newton loop and a
whole frozen trajectory at once in the adjoint sweep.  Common subexpressions of all
outputs are computed once (``sympy.cse``) and only non-zero entries are assigned.

The source is printed by sympy's :class:`~sympy.printing.numpy.NumPyPrinter` from
expression trees whose symbols have internal names (``q_0``, ``p_1``); no text from a
model file reaches the generated source.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from types import CodeType

import numpy as np
import sympy as sp
from sympy.printing.numpy import NumPyPrinter
from sympy.core.function import AppliedUndef
from sympy.printing.pycode import PythonCodePrinter

from .cprint import FastPrecedence
from .cse import ReducedOutputs, reduce_outputs
from .expressions import TABLE_RATE_SUFFIX

__all__ = ["ArgumentGroup", "compile_source", "function_source", "generate_function", "load_function", "numeric_calls",
           "opaque_name"]

ArgumentGroup = tuple[str, Sequence[sp.Symbol] | sp.Symbol]
_counter = itertools.count()


def opaque_name(expr: sp.Basic) -> str | None:
    """Name of a function the generated code calls by name: a time table (``tbl_k``,
    an undefined function) or a numeric element's function (it carries ``numeric_call``)."""
    if isinstance(expr, AppliedUndef) or hasattr(type(expr), "numeric_call"):
        return type(expr).__name__
    return None


class _OpaqueAndDelta:
    """Printer mix-in: tables and numeric-element functions by their generated name;
    DiracDelta as 0.

    DiracDelta appears in derivatives of ``sign``/``Heaviside``; the engine uses the
    derivative almost everywhere, which is 0.
    """

    def _print_Function(self, expr):  # noqa: N802 (sympy printer protocol)
        name = opaque_name(expr)
        if name is not None:
            return f"{name}({', '.join(self._print(arg) for arg in expr.args)})"
        return super()._print_Function(expr)

    def _print_DiracDelta(self, expr):  # noqa: N802
        return "0.0"


class _ArrayPrinter(_OpaqueAndDelta, FastPrecedence, NumPyPrinter):
    def __init__(self) -> None:
        super().__init__({"fully_qualified_modules": True, "allow_unknown_functions": True})


class _ScalarPrinter(_OpaqueAndDelta, FastPrecedence, PythonCodePrinter):
    def __init__(self) -> None:
        super().__init__({"fully_qualified_modules": True, "allow_unknown_functions": True})


def _interpolator(times: Sequence[float], values: Sequence[float]) -> Callable:
    xs = np.asarray(times, dtype=float)
    ys = np.asarray(values, dtype=float)

    def table(t):
        return np.interp(t, xs, ys)

    return table


def _rate(times: Sequence[float], values: Sequence[float]) -> Callable:
    """The slope of the segment holding ``t`` (right-sided at a table time, 0 outside the
    table): :func:`fmi_adjoint.model.table_function`'s rate, as the C code computes it."""
    xs = np.asarray(times, dtype=float)
    slopes = np.append(np.diff(np.asarray(values, dtype=float)) / np.diff(xs), 0.0)

    def rate(t):
        k = np.searchsorted(xs, t, side="right") - 1
        return np.where(k >= 0, slopes[np.clip(k, 0, len(xs) - 1)], 0.0)

    return rate


def numeric_calls(sym) -> dict[str, Callable]:
    """The Python callables behind the numeric-element functions of an assembled model
    (:class:`~fmi_adjoint.model.SymbolicModel`), including their derivative functions.

    They travel on the sympy function classes (``numeric_call``), not in a registry."""
    return _calls_in([sym.Q])


def _calls_in(expressions) -> dict[str, Callable]:
    calls: dict[str, Callable] = {}
    pending = [type(f) for e in expressions for f in e.atoms(sp.Function) if hasattr(type(f), "numeric_call")]
    while pending:
        cls = pending.pop()
        if cls.__name__ in calls:
            continue
        calls[cls.__name__] = cls.numeric_call
        pending.extend(getattr(cls, "numeric_derivatives", ()))
    return calls


def function_source(
    name: str,
    args: Sequence[ArgumentGroup],
    outputs: ReducedOutputs,
    *,
    batch_arg: str = "t",
    scalar: bool = False,
) -> str:
    """Print the source of one numpy function returning a tuple of arrays.

    Parameters
    ----------
    name : str
        Function name (appears in tracebacks of generated code).
    args : sequence of (str, symbols)
        Argument groups in call order.  A group of a sequence of symbols receives an
        array whose last axis indexes the symbols; a single symbol receives an array
        of the batch shape (or a scalar).
    outputs : ReducedOutputs
        The outputs after common-subexpression elimination (:func:`fmi_adjoint.cse.reduce_outputs`).
        A matrix becomes an array of shape ``batch + (rows, cols)``, a vector ``batch + (len,)``.
    batch_arg : str
        Name of the scalar argument whose shape defines the batch shape.
    scalar : bool
        Generate code for one state without batch dimensions, using Python floats
        and the :mod:`math` module (several times faster per call than numpy scalars;
        domain errors raise ``ValueError``/``OverflowError``/``ZeroDivisionError``
        instead of producing NaN, and callers treat those as non-finite results).

    Returns
    -------
    str
        Load it with :func:`load_function`.
    """
    printer = _ScalarPrinter() if scalar else _ArrayPrinter()
    used = outputs.used_symbols()
    lines = [f"def {name}({', '.join(g for g, _ in args)}):"]
    for group, symbols in args:
        if isinstance(symbols, sp.Symbol):
            if symbols in used and (symbols.name != group or scalar):
                lines.append(f"    {symbols.name} = {'float(' + group + ')' if scalar else group}")
            continue
        if scalar:
            if any(sym in used for sym in symbols):
                targets = ", ".join(sym.name if sym in used else "_" for sym in symbols)
                lines.append(f"    {targets}{',' if len(symbols) == 1 else ''} = {group}.tolist()")
            continue
        for idx, sym in enumerate(symbols):
            if sym in used:
                lines.append(f"    {sym.name} = {group}[..., {idx}]")
    lines.append("    _batch = ()" if scalar else f"    _batch = numpy.shape({batch_arg})")
    for sym, expr in outputs.replacements:
        lines.append(f"    {sym.name} = {printer.doprint(expr)}")
    for k, shape in enumerate(outputs.shapes):
        lines.append(f"    _out{k} = numpy.zeros(_batch + {shape!r})")
    for (k, pos), expr in zip(outputs.slots, outputs.reduced):
        index = ", ".join(str(i) for i in pos)
        lines.append(f"    _out{k}[{'' if scalar else '..., '}{index}] = {printer.doprint(expr)}")
    lines.append(f"    return ({''.join(f'_out{k}, ' for k in range(len(outputs.shapes)))})")
    return "\n".join(lines) + "\n"


def compile_source(name: str, source: str) -> CodeType:
    """Byte code of a source printed by :func:`function_source` (cached by the build cache:
    compiling the sources of a large model costs more than the rest of a warm load)."""
    return compile(source, f"<fmi_adjoint generated {name} #{next(_counter)}>", "exec")


def load_function(name: str, source: str, tables: Mapping[str, tuple[Sequence[float], Sequence[float]]],
                  calls: Mapping[str, Callable], code: CodeType | None = None) -> Callable[..., tuple[np.ndarray, ...]]:
    """Execute a source printed by :func:`function_source` (or its byte code ``code``,
    possibly read back from the build cache, whose entries are checksummed) and return
    the function.

    ``tables`` gives ``(times, values)`` of each table function, ``calls`` the numeric
    elements' callables (:func:`numeric_calls`)."""
    # NumPyPrinter prints Min/Max as functools.reduce(numpy.minimum, ...).
    namespace: dict[str, object] = {"numpy": np, "math": math, "functools": functools}
    for table, (times, values) in tables.items():
        namespace[table] = _interpolator(times, values)
        namespace[table + TABLE_RATE_SUFFIX] = _rate(times, values)
    namespace.update(calls)
    code = code if code is not None else compile_source(name, source)
    exec(code, namespace)  # noqa: S102 -- source printed by sympy from validated trees, see module docstring
    function = namespace[name]
    function.source = source  # type: ignore[attr-defined]
    return function  # type: ignore[return-value]


def generate_function(name: str, args: Sequence[ArgumentGroup], outputs: Sequence[sp.MatrixBase | Sequence[sp.Expr]],
                      *, batch_arg: str = "t", scalar: bool = False) -> Callable[..., tuple[np.ndarray, ...]]:
    """Print and load in one go (no time tables; numeric-element callables are found in
    the expressions).  For element checks; models go through the build cache instead."""
    source = function_source(name, args, reduce_outputs(name, outputs), batch_arg=batch_arg, scalar=scalar)
    flat = [e for out in outputs for e in (out if not isinstance(out, sp.MatrixBase) else list(out))]
    return load_function(name, source, {}, _calls_in(flat))
