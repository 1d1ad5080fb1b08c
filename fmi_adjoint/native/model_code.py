"""C source of a model's functions, printed from the same table as the numpy code.

:func:`model_c_sources` loops over :func:`fmi_adjoint.compiled.function_table` (common
subexpressions eliminated once per function for every backend, :mod:`fmi_adjoint.cse`) and
writes one C file per generated function (``model_<name>.c``, compiled in parallel, so
build time grows with the size of the model rather than with the square of one huge
function) plus ``model.c`` (names, defaults, tables, numeric-element links, sparsity
patterns, the Newton-matrix layout) and ``model.h``, which declares for the runtime in
``fmi_adjoint/native/runtime``::

    FA_N, FA_M, FA_NP, FA_NY, FA_NZ (= 3 FA_N + 3 FA_M), FA_NK (= FA_N + FA_M)     sizes
    fa_default_parameters, fa_parameter_names, fa_output_names, fa_coordinate_names
    fa_<name>(<argument groups>, <outputs>)        one per row of the table

Vector outputs are dense.  A matrix output ``X`` is written as the values of its
structurally non-zero entries in row-major order: ``FA_NNZ_X`` values whose positions are
``fa_X_row[k], fa_X_col[k]``.  Only those entries are generated (a dense statement per
zero made large Jacobians slow to compile).  The Newton matrix ``[[S, C_q^T], [C_q, 0]]``
is assembled from the values through maps ``fa_kkt_<X>[k]`` into the storage planned by
:func:`fmi_adjoint.sparsity.plan_layout` (dense, banded after a fill-reducing ordering, or
compressed sparse columns for the sparse solver): ``FA_KKT_KIND``, ``FA_KKT_BANDED``,
``FA_KKT_SPARSE``, ``FA_KKT_KL``, ``FA_KKT_KU``, ``FA_KKT_STORAGE``, ``fa_kkt_position``,
``fa_kkt_colptr``, ``fa_kkt_rowind`` (and ``FA_INIT_*`` for the initialization matrix).

Tables of time become arrays with the linear interpolation of ``numpy.interp`` (end values
held).  No user text reaches the C sources except names as escaped string literals.
"""

from __future__ import annotations

import sympy as sp

from ..compiled import Derivation, GeneratedFunction, ModelDerivatives, group_sizes
from ..cprint import C_MATH_CONSTANTS, CPrinter, c_reduced_assignments, indexed
from ..errors import NoCCodeError
from ..expressions import TABLE_RATE_SUFFIX
from ..forces.numeric import numeric_elements
from ..sparsity import MatrixLayout
from .model_header import MODEL_HEADER, layout_of_patterns, model_header_and_common

__all__ = ["newton_layout", "whole_system_c_sources"]

#: Argument groups print as arrays of their own name (the second-order functions' too).
_GROUPS = {name: name for name in group_sizes(0, 0, 0, 0)}

def _table_code(tables) -> tuple[list[str], list[str]]:
    """Definitions and declarations of the table functions."""
    lines, declarations = [], []
    for func, times, values in tables:
        name = str(func)
        n = len(times)
        declarations.append(f"double {name}(double t);")
        lines.append(f"static const double {name}_t[{n}] = {{{', '.join(repr(float(x)) for x in times)}}};")
        lines.append(f"static const double {name}_y[{n}] = {{{', '.join(repr(float(x)) for x in values)}}};")
        lines += [
            f"double {name}(double t)",
            "{",
            f"    if (!(t > {name}_t[0])) return {name}_y[0];",
            f"    if (t >= {name}_t[{n - 1}]) return {name}_y[{n - 1}];",
            f"    int lo = 0, hi = {n - 1};",
            "    while (hi - lo > 1) { int mid = (lo + hi) / 2; if (" + name
            + "_t[mid] <= t) lo = mid; else hi = mid; }",
            f"    double w = (t - {name}_t[lo]) / ({name}_t[hi] - {name}_t[lo]);",
            f"    return {name}_y[lo] + w * ({name}_y[hi] - {name}_y[lo]);",
            "}",
            "",
        ]
        # The rate (fmi_adjoint.model.table_function): the slope of the segment holding t,
        # right-sided at a table time, 0 outside the table (codegen._rate computes the same).
        rate = name + TABLE_RATE_SUFFIX
        declarations.append(f"double {rate}(double t);")
        lines += [
            f"double {rate}(double t)",
            "{",
            f"    if (!(t >= {name}_t[0]) || t >= {name}_t[{n - 1}]) return 0.0;",
            f"    int lo = 0, hi = {n - 1};",
            "    while (hi - lo > 1) { int mid = (lo + hi) / 2; if (" + name
            + "_t[mid] <= t) lo = mid; else hi = mid; }",
            f"    return ({name}_y[hi] - {name}_y[lo]) / ({name}_t[hi] - {name}_t[lo]);",
            "}",
            "",
        ]
    return lines, declarations


def _numeric_links(d: ModelDerivatives) -> tuple[dict[str, str], list[str], list[str]]:
    """C names of the opaque functions of numeric elements, their C code and declarations.

    Each opaque function (a force component ``<tag>_f<j>`` or a Jacobian entry
    ``<tag>_d<j>_<k>``) becomes a small C function calling the element's own
    ``<prefix>_forces`` / ``<prefix>_jacobian`` from its ``c_source``.
    """
    found = numeric_elements([d.sym.Q])
    names: dict[str, str] = {}
    lines: list[str] = []
    declarations: list[str] = []
    for tag in sorted(found):
        element, n, n_p = found[tag]
        prefix = f"fa{tag}_element"
        try:
            source = element.c_source(prefix)
        except NotImplementedError:
            raise NoCCodeError(
                f"{element.where()}: the element has no C code (its c_source raises NotImplementedError), so "
                "the model cannot be compiled to C; give the element C code, state its law symbolically, or use "
                "--engine python."
            ) from None
        lines += [f"/* C code of numeric element {tag} */", source, ""]
        n_args = 2 * n + n_p
        params = ", ".join(f"double x{k}" for k in range(n_args))
        values = ", ".join(f"x{k}" for k in range(n_args))
        for j in range(n):
            c_name = f"fa{tag}_f{j}"
            names[f"{tag}_f{j}"] = c_name
            declarations.append(f"double {c_name}({params});")
            lines += [
                f"double {c_name}({params})",
                "{",
                f"    const double x[{n_args}] = {{{values}}};",
                f"    double f[{n}];",
                f"    {prefix}_forces(x, x + {n}, x + {2 * n}, f);",
                f"    return f[{j}];",
                "}",
            ]
            for k in range(n_args):
                c_name = f"fa{tag}_d{j}_{k}"
                names[f"{tag}_d{j}_{k}"] = c_name
                declarations.append(f"double {c_name}({params});")
                block, entry = (("dq", j * n + k) if k < n else ("dv", j * n + k - n) if k < 2 * n
                                else ("dp", j * n_p + k - 2 * n))
                lines += [
                    f"double {c_name}({params})",
                    "{",
                    f"    const double x[{n_args}] = {{{values}}};",
                    f"    double dq[{n * n}], dv[{n * n}], dp[{max(n * n_p, 1)}];",
                    f"    {prefix}_jacobian(x, x + {n}, x + {2 * n}, dq, dv, dp);",
                    f"    return {block}[{entry}];",
                    "}",
                ]
        lines.append("")
    return names, lines, declarations


def _pattern(matrix: sp.Matrix) -> list[tuple[int, int]]:
    return [(i, j) for i in range(matrix.rows) for j in range(matrix.cols) if matrix[i, j] != 0]


def newton_layout(d: ModelDerivatives) -> MatrixLayout:
    """Storage plan of the Newton matrix ``[[S, C_q^T], [C_q, 0]]`` from its structure."""
    return layout_of_patterns(len(d.sym.q), len(d.sym.lam),
                              {name: _pattern(matrix) for name, matrix in
                               (("M", d.M), ("JM", d.JM), ("K", d.K), ("JV", d.JV), ("Cq", d.Cq))})


def _signature(row: GeneratedFunction) -> str:
    args = ["double t" if g == "t" else f"const double *{g}" for g in row.args]
    outputs = [f"double *{name}" for name, _, _ in row.outputs]
    return f"void fa_{row.name}({', '.join(args + outputs)})"


def _batch_driver(row: GeneratedFunction, sizes: dict[str, int]) -> tuple[str, str]:
    """``(prototype, definition)`` of ``fa_<name>_batch(count, ...)``: ``fa_<name>`` on
    ``count`` rows of contiguous arguments (``t`` one per row, ``p`` shared)."""
    args = ["double t" if g == "t" else f"const double *{g}" for g in row.args]
    outputs = [f"double *{name}" for name, _, _ in row.outputs]
    signature = (f"void fa_{row.name}_batch(long count, "
                 f"{', '.join(a.replace('double t', 'const double *t') for a in args + outputs)})")
    call = []
    for g in row.args:
        call.append("t[r]" if g == "t" else g if g == "p" else f"{g} + r * {sizes[g]}")
    call += [f"{name} + r * {matrix.rows}" for name, matrix, _ in row.outputs]
    body = "\n".join([signature, "{", f"    for (long r = 0; r < count; ++r) fa_{row.name}({', '.join(call)});", "}",
                      ""])
    return signature + ";", body


def whole_system_c_sources(derivation: Derivation, *, defaults: bool = True,
                           extra_rows: tuple[GeneratedFunction, ...] = ()) -> dict[str, str]:
    """``{file name: text}`` of the generated C code of one model: ``model.h``,
    ``model.c`` and one ``model_<function>.c`` per row of the function table.

    ``defaults=False`` prints zeros as the default parameter values: the in-process library
    is cached under a key without the values (the engine always passes ``p``), so values
    compiled into it would be those of whichever model built it first.  ``extra_rows``
    (vector outputs only, e.g. :func:`fmi_adjoint.compiled.second_order_table`) are printed
    as well, each with a batch driver ``fa_<name>_batch`` in ``model_batch.c``.

    (The code of a model derived as a whole; :func:`fmi_adjoint.native.sources.model_c_sources`
    chooses.)"""
    d = derivation.derivatives
    function_names, links, link_declarations = _numeric_links(d)
    sym = d.sym
    model = sym.model
    n, m = len(sym.q), len(sym.lam)
    tables = {str(f) + suffix for f, _, _ in sym.tables for suffix in ("", TABLE_RATE_SUFFIX)}
    printer = CPrinter(indexed(_GROUPS), tables, function_names)
    table_lines, table_declarations = _table_code(sym.tables)
    rows = derivation.table + tuple(extra_rows)
    matrices: dict[str, sp.Matrix] = {}
    for row in rows:
        for name, matrix, vector in row.outputs:
            if not vector:
                matrices[name] = matrix
    patterns = {name: _pattern(matrix) for name, matrix in matrices.items()}
    layout = newton_layout(d)
    sizes = group_sizes(n, m, sym.Y.rows, len(model.all_parameters))
    batches = [_batch_driver(row, sizes) for row in extra_rows]
    prototypes = [_signature(row) + ";" for row in rows] + [prototype for prototype, _ in batches]
    header, common = model_header_and_common(model, n, m, sym.Y.rows, patterns, layout, defaults=defaults,
                                             declarations=[*table_declarations, *link_declarations],
                                             prototypes=prototypes)
    common += ["", *table_lines, *links]
    files = {MODEL_HEADER: "\n".join(header), "model.c": "\n".join(common) + "\n"}
    if batches:
        files["model_batch.c"] = "\n".join(["/* generated by fmi-adjoint: batch drivers */",
                                              f'#include "{MODEL_HEADER}"', "", *(body for _, body in batches)])
    for row in rows:
        arrays = [name for name, _, _ in row.outputs]
        files[f"model_{row.name}.c"] = "\n".join([
            "/* generated by fmi-adjoint from the model's symbolic equations */",
            "#include <math.h>",
            f'#include "{MODEL_HEADER}"',
            C_MATH_CONSTANTS,
            _signature(row),
            "{",
            *c_reduced_assignments(arrays, derivation.reduced(row), printer),
            "}",
            "",
        ])
    return files
