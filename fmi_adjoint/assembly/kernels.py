"""The kernels of one component type: its local derivatives, derived once, printed to numpy and C.

A :class:`~.partition.ComponentType` is a small model in local symbols.  Its derivatives are
those of the whole-system derivation (:func:`fmi_adjoint.equations.differentiate`, the rows of
:func:`~fmi_adjoint.equations.function_table` and
:func:`~fmi_adjoint.equations.second_order_table`), formed on the local equations:

* an ``equations`` type: ``M a``, ``F = C_q^T lambda - Q`` (``Q`` with the quadratic velocity
  terms of the local mass block, :func:`fmi_adjoint.model.quadratic_velocity_terms`: the blocks
  of a model's mass matrix do not couple, so the model's terms are the sum of the blocks'),
  ``C`` and their Jacobians, the
  parameter terms, and the *component's share* of the consistent-initialization system ``G``
  (:mod:`fmi_adjoint.compiled`): ``C_q^T mu`` and ``C_q^T nu`` in the projection rows (the
  model adds ``q - q0`` and ``v - v0`` once), ``C``, ``C_q v + C_t``, ``M a + F`` and
  ``C_q a + (C_q v)_q v + 2 C_qt v + C_tt``.  The local model's guesses are its own
  coordinates (``q0 = q``, ``v0 = v``), so those rows carry exactly that share; the
  algebraic rows of massless coordinates are not formed (:func:`.partition.partition` sends
  such models to the whole-system derivation);
* an ``outputs`` type: ``y`` and its Jacobians;
* both: the directional second derivatives of input design.

:func:`type_kernels` prints every row to a vectorized numpy function (the component axis is a
batch axis: instances of a type are evaluated in one call) and to a C function
``FA_KERNEL(<row>)`` (the model's C file defines the macro per type), with the local patterns
of the matrix outputs, and caches the result under the type's key: a type the cache has seen,
in this model or another, costs no symbolic work.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import sympy as sp

from ..cache import BuildCache, fingerprint, source_fingerprint
from ..codegen import function_source
from ..cprint import C_MATH_CONSTANTS, CPrinter, c_reduced_assignments, indexed
from ..cse import ReducedOutputs, reduce_outputs
from ..equations import (SECOND_STEP_ARGS, STATE_ARGS, GeneratedFunction, differentiate, function_table, group_sizes,
                         jacobian, second_order_table)
from ..errors import ModelError
from ..model import SymbolicModel, quadratic_velocity_terms
from .partition import ComponentType, local_symbols

__all__ = ["EQUATION_ROWS", "KERNEL_PREAMBLE", "OUTPUT_ROWS", "SECOND_ROWS", "KernelRow", "TypeKernels", "derive_type",
           "print_rows", "type_kernels"]

#: The rows an ``equations`` type has (``newton`` for C only: residual and Jacobians in one call).
EQUATION_ROWS = ("residual_terms", "newton", "jacobian_terms", "parameter_terms", "init_residual", "init_jacobians")
#: The rows an ``outputs`` type has.
OUTPUT_ROWS = ("outputs", "output_jacobians")
#: The second-order rows (input design only; derived and cached on demand).
SECOND_ROWS = ("step_second", "init_second")

#: Every argument group prints as the C array of its own name (the data slots ``d`` too).
_GROUPS = {name: name for name in [*group_sizes(0, 0, 0, 0), "d"]}


@dataclasses.dataclass(frozen=True)
class KernelRow:
    """One printed row of a type.

    Attributes
    ----------
    name : str
        The row (``residual_terms``, ...).
    args : tuple of str
        Argument groups.
    outputs : tuple of (str, tuple of int, tuple of (int, int))
        ``(name, shape, pattern)``: a vector's shape is ``(rows,)`` and its pattern empty; a
        matrix's pattern lists its structurally non-zero entries in the order the C kernel
        writes their values.
    numpy : str
        Source of the vectorized numpy function (named like the row).
    c : str
        Body of the C function ``void FA_KERNEL(<name>)(<groups>, <outputs>)``.
    """

    name: str
    args: tuple[str, ...]
    outputs: tuple[tuple[str, tuple[int, ...], tuple[tuple[int, int], ...]], ...]
    numpy: str
    c: str

    def to_json(self) -> dict:
        return {"name": self.name, "args": list(self.args), "numpy": self.numpy, "c": self.c,
                "outputs": [[name, list(shape), [list(e) for e in pattern]] for name, shape, pattern in self.outputs]}

    @classmethod
    def from_json(cls, data: dict) -> KernelRow:
        return cls(name=str(data["name"]), args=tuple(str(a) for a in data["args"]), numpy=str(data["numpy"]),
                   c=str(data["c"]),
                   outputs=tuple((str(name), tuple(int(x) for x in shape), tuple((int(i), int(j)) for i, j in pattern))
                                 for name, shape, pattern in data["outputs"]))

    def c_signature(self, name: str | None = None) -> str:
        """The C prototype: a ``static`` function named ``FA_KERNEL(<row>)`` (the file defines the
        macro), or an external one called ``name``."""
        args = ["double t" if g == "t" else f"const double *{g}" for g in self.args]
        outputs = [f"double *{output}" for output, _, _ in self.outputs]
        head = f"void {name}" if name else f"static void FA_KERNEL({self.name})"
        return f"{head}({', '.join(args + outputs)})"


@dataclasses.dataclass(frozen=True)
class TypeKernels:
    """The printed rows of one component type (what the build cache keeps per type).

    A structured type (:mod:`.structured_kernels`) also has ``structure``, its local pattern
    (the numpy functions are written from it, its rows' ``numpy`` are empty), and
    ``c_preamble``, the static arrays its C rows read.
    """

    key: str
    kind: str
    n: int
    m: int
    n_y: int
    n_p: int
    n_d: int
    rows: tuple[KernelRow, ...]
    structure: dict | None = None
    c_preamble: str = ""

    def row(self, name: str) -> KernelRow:
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(name)

    def to_json(self) -> dict:
        return {"format": 2, "key": self.key, "kind": self.kind, "n": self.n, "m": self.m, "n_y": self.n_y,
                "n_p": self.n_p, "n_d": self.n_d, "rows": [row.to_json() for row in self.rows],
                "structure": self.structure, "c_preamble": self.c_preamble}

    @classmethod
    def from_json(cls, data: dict) -> TypeKernels:
        if data.get("format") != 2:
            raise ValueError("unknown format")
        return cls(key=str(data["key"]), kind=str(data["kind"]), n=int(data["n"]), m=int(data["m"]),
                   n_y=int(data["n_y"]), n_p=int(data["n_p"]), n_d=int(data["n_d"]),
                   rows=tuple(KernelRow.from_json(r) for r in data["rows"]),
                   structure=dict(data["structure"]) if data.get("structure") is not None else None,
                   c_preamble=str(data.get("c_preamble", "")))


@dataclasses.dataclass(frozen=True, eq=False)
class _Derived:
    """The generated rows of one type in local symbols, and its argument symbols."""

    rows: tuple[GeneratedFunction, ...]
    groups: dict[str, tuple[sp.Symbol, ...] | sp.Symbol]


def _argument_groups(ct: ComponentType) -> dict[str, tuple[sp.Symbol, ...] | sp.Symbol]:
    groups = dict(local_symbols(ct.n, ct.m, ct.n_p, ct.n_d))
    for group, size in group_sizes(ct.n, ct.m, ct.n_y, ct.n_p).items():
        if group not in groups:
            groups[group] = tuple(sp.Symbol(f"{group}_{k}", real=True) for k in range(size))
    return groups


def derive_type(ct: ComponentType, second_order: bool = False) -> _Derived:
    """The rows of :data:`EQUATION_ROWS` or :data:`OUTPUT_ROWS` of ``ct`` (module docstring), or
    with ``second_order`` its rows of :data:`SECOND_ROWS` (an ``outputs`` type has ``step_second``)."""
    groups = _argument_groups(ct)
    q, v, a, lam, p = (groups[g] for g in ("q", "v", "a", "lam", "p"))
    if ct.kind == "equations":
        sym = SymbolicModel(
            model=None,  # type: ignore[arg-type]  # a component, not a model: nothing reads it
            t=groups["t"], q=q, v=v, a=a, lam=lam, p=p, M=ct.M, C=ct.C,
            Q=ct.Q + quadratic_velocity_terms(ct.M, q, v),
            Y=sp.zeros(0, 1), q0=sp.Matrix(q), v0=sp.Matrix(v), fixed_q=(False,) * ct.n, fixed_v=(False,) * ct.n,
            constraint_names=("",) * ct.m, tables=())
        d = differentiate(sym, algebraic_rows=False)
        rows = function_table(d) + (second_order_table(d) if second_order else ())
        wanted = SECOND_ROWS if second_order else EQUATION_ROWS
        return _Derived(_with_data(tuple(r for r in rows if r.name in wanted)), groups)
    Y = ct.Y
    Y_q, Y_v, Y_a, Y_lam, Y_p = (jacobian(Y, groups[g]) for g in ("q", "v", "a", "lam", "p"))
    if second_order:
        state = [*q, *v, *a, *lam]
        direction = [*groups["dq"], *groups["dv"], *groups["da"], *groups["dlam"]]
        change = sp.zeros(Y.rows, 1)
        for matrix, vector in ((jacobian(Y, state), direction), (Y_p, groups["dp"])):
            if matrix.cols:
                change += matrix * sp.Matrix(vector)
        phi = (sp.Matrix(groups["wY"]).T * change)[0, 0]
        grads = jacobian(sp.Matrix([phi]), [*state, *p]).T
        k = [0, ct.n, 2 * ct.n, 3 * ct.n, 3 * ct.n + ct.m, 3 * ct.n + ct.m + ct.n_p]
        names = ("Sq", "Sv", "Sa", "Slam", "Sp")
        return _Derived(_with_data((GeneratedFunction("step_second", SECOND_STEP_ARGS,
                                                      tuple((names[i], grads[k[i]:k[i + 1], :], True)
                                                            for i in range(5))),)), groups)
    return _Derived(_with_data((
        GeneratedFunction("outputs", STATE_ARGS, (("y", Y, True),)),
        GeneratedFunction("output_jacobians", STATE_ARGS, (("Y_q", Y_q, False), ("Y_v", Y_v, False),
                                                          ("Y_a", Y_a, False), ("Y_lam", Y_lam, False),
                                                          ("Y_p", Y_p, False))),
    )), groups)


def _with_data(rows: tuple[GeneratedFunction, ...]) -> tuple[GeneratedFunction, ...]:
    """``rows`` with the data slots ``d`` as a last argument group (read, never differentiated)."""
    return tuple(dataclasses.replace(row, args=row.args + ("d",)) for row in rows)


def _print(row: GeneratedFunction, groups: dict, printer: CPrinter) -> KernelRow:
    outputs = [list(matrix) if vector else matrix for _, matrix, vector in row.outputs]
    reduced: ReducedOutputs = reduce_outputs(f"component {row.name}", outputs)
    patterns: list[list[tuple[int, int]]] = [[] for _ in row.outputs]
    for k, pos in reduced.slots:
        if len(pos) == 2:
            patterns[k].append((pos[0], pos[1]))
    args = [(g, groups[g]) for g in row.args]
    batch = "t" if "t" in row.args else "p"
    numpy_text = function_source(row.name, args, reduced, batch_arg=batch) if row.numpy else ""
    c_text = "\n".join(c_reduced_assignments([name for name, _, _ in row.outputs], reduced, printer))
    shapes = tuple((matrix.rows,) if vector else (matrix.rows, matrix.cols) for _, matrix, vector in row.outputs)
    return KernelRow(name=row.name, args=row.args, numpy=numpy_text, c=c_text,
                     outputs=tuple((name, shape, tuple(pattern))
                                   for (name, _, _), shape, pattern in zip(row.outputs, shapes, patterns)))


class _KernelPrinter(CPrinter):
    """The kernels' C printer: a square ``x**2`` is the product ``(x*x)``, not ``pow(x, 2)``.

    An optimizing C compiler turns ``pow(x, 2)`` into ``x*x`` itself (the product is the
    correctly rounded square); the kernels run once per simulation are compiled without
    optimization (:data:`fmi_adjoint.native.assembly_code.RUN_ONCE_ROWS`), where ``pow`` would
    be the C library's, which need not round the square the same way.  Written as a product, a
    kernel gives the same bits at every optimization level.
    """

    def _print_Pow(self, expr):  # noqa: N802 (sympy printer protocol)
        if expr.exp == 2:
            base = self.parenthesize(expr.base, 60)  # tighter than any binary operator: x, f(x) or (...)
            return f"({base}*{base})"
        return super()._print_Pow(expr)


def print_rows(rows: tuple[GeneratedFunction, ...], groups: dict) -> tuple[KernelRow, ...]:
    """Every row printed to numpy and C (common subexpressions eliminated once per row)."""
    printer = _KernelPrinter(indexed(_GROUPS), set(), {})
    return tuple(_print(row, groups, printer) for row in rows)


def type_kernels(ct: ComponentType, cache: BuildCache, second_order: bool = False) -> TypeKernels:
    """The printed kernels of ``ct`` (its second-order rows with ``second_order``), from the build
    cache (derived and printed when missing).  The key adds fmi-adjoint's sources and the
    versions of sympy and the interpreter to the type's own, as :func:`fmi_adjoint.compiled.model_key` does."""

    def build(folder: Path) -> None:
        derived = derive_type(ct, second_order)
        rows = print_rows(derived.rows, derived.groups)
        kernels = TypeKernels(key=ct.key, kind=ct.kind, n=ct.n, m=ct.m, n_y=ct.n_y, n_p=ct.n_p, n_d=ct.n_d, rows=rows)
        (folder / "kernels.json").write_text(json.dumps(kernels.to_json()))

    key = fingerprint("kernels", ct.key, "second" if second_order else "first", source_fingerprint(), sys.version,
                      f"sympy {sp.__version__}")
    entry, files = cache.read("component", key, build, ("kernels.json",))
    try:
        kernels = TypeKernels.from_json(json.loads(files["kernels.json"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise ModelError(f"the build cache entry {entry} of a component type is unreadable ({exc}); run "
                         "'fmi-adjoint cache clear'.") from None
    if (kernels.key, kernels.kind, kernels.n, kernels.m, kernels.n_y, kernels.n_p, kernels.n_d) != (
            ct.key, ct.kind, ct.n, ct.m, ct.n_y, ct.n_p, ct.n_d):
        raise ModelError(f"the build cache entry {entry} of a component type does not match it; run "
                         "'fmi-adjoint cache clear'.")
    return kernels


#: C text every file of kernels starts with.
KERNEL_PREAMBLE = "#include <math.h>\n" + C_MATH_CONSTANTS
