"""C source of a model's functions, printed from the same derivatives as the numpy code.

The generated ``model.h`` declares, for the runtime in ``fmi_adjoint/fmu/runtime``::

    FA_N, FA_M, FA_NP, FA_NY, FA_NZ (= 3 FA_N + 3 FA_M)    sizes
    fa_default_parameters[FA_NP], fa_parameter_names[FA_NP], fa_output_names[FA_NY], fa_coordinate_names[FA_N]
    fa_residual(q, v, a, lam, t, p, Ma, F, C)
    fa_newton(q, v, a, lam, t, p, Ma, F, C, M, JM, K, JV, Cq)      (matrices row-major)
    fa_outputs(q, v, a, lam, t, p, y)
    fa_init_guess(t, p, q0, v0)
    fa_init_residual(z, t, p, G)         z = (q, mu, v, nu, a, lambda)
    fa_init_jacobian(z, t, p, Gz)        FA_NZ x FA_NZ, row-major

with the meanings of :class:`fmi_adjoint.compiled.CompiledModel` (``F = C_q^T lambda - Q``).
Tables of time become static arrays with the linear interpolation of ``numpy.interp``
(end values held).
"""

from __future__ import annotations

import re

import sympy as sp

from ..compiled import ModelDerivatives
from ..cprint import C_MATH_CONSTANTS, CPrinter, c_assignments, indexed
from ..errors import ModelError
from ..forces.numeric import NUMERIC_ELEMENTS
from ..text import c_string_literal

__all__ = ["model_c_sources"]

_STATE = "const double *q, const double *v, const double *a, const double *lam, double t, const double *p"


def _table_code(tables) -> list[str]:
    lines = []
    for func, times, values in tables:
        name = str(func)
        n = len(times)
        lines.append(f"static const double {name}_t[{n}] = {{{', '.join(repr(float(x)) for x in times)}}};")
        lines.append(f"static const double {name}_y[{n}] = {{{', '.join(repr(float(x)) for x in values)}}};")
        lines += [
            f"static double {name}(double t)",
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
    return lines


def _numeric_links(d: ModelDerivatives) -> tuple[dict[str, str], list[str]]:
    """C names of the opaque functions of numeric elements, and the C code linking them.

    Each opaque function (a force component ``_numericN_f<j>`` or a Jacobian entry
    ``_numericN_d<j>_<k>``) becomes a small C function calling the element's own
    ``<prefix>_forces`` / ``<prefix>_jacobian`` from its ``c_source``.
    """
    used: set[str] = set()
    for matrix in (d.Ma, d.F, d.C, d.M, d.JM, d.K, d.JV, d.Cq, d.Y, d.G, d.G_z, d.q0, d.v0):
        used |= {type(call).__name__ for call in matrix.atoms(sp.Function)}
    names: dict[str, str] = {}
    lines: list[str] = []
    for tag in sorted({m.group(0) for u in used if (m := re.match(r"_numeric\d+", u))}):
        element, n, n_p = NUMERIC_ELEMENTS[tag]
        prefix = f"fa_{tag.lstrip('_')}_element"
        try:
            source = element.c_source(prefix)
        except NotImplementedError:
            raise ModelError(
                f"{element.where()}: the element has no C code (its c_source raises NotImplementedError), so "
                "the model cannot be exported; give the element C code or state its law symbolically."
            ) from None
        lines += [f"/* C code of numeric element {tag} */", source, ""]
        n_args = 2 * n + n_p
        params = ", ".join(f"double x{k}" for k in range(n_args))
        values = ", ".join(f"x{k}" for k in range(n_args))
        for j in range(n):
            c_name = f"fa{tag}_f{j}"
            names[f"{tag}_f{j}"] = c_name
            lines += [
                f"static double {c_name}({params})",
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
                block, entry = (("dq", j * n + k) if k < n else ("dv", j * n + k - n) if k < 2 * n
                                else ("dp", j * n_p + k - 2 * n))
                lines += [
                    f"static double {c_name}({params})",
                    "{",
                    f"    const double x[{n_args}] = {{{values}}};",
                    f"    double dq[{n * n}], dv[{n * n}], dp[{max(n * n_p, 1)}];",
                    f"    {prefix}_jacobian(x, x + {n}, x + {2 * n}, dq, dv, dp);",
                    f"    return {block}[{entry}];",
                    "}",
                ]
        lines.append("")
    return names, lines


def model_c_sources(d: ModelDerivatives) -> tuple[str, str]:
    """``(model.h, model.c)`` for the derivatives ``d`` of one model."""
    function_names, links = _numeric_links(d)
    sym = d.sym
    model = sym.model
    n, m = len(sym.q), len(sym.lam)
    params = model.all_parameters
    tables = {str(f) for f, _, _ in sym.tables}
    state = CPrinter(indexed({"q": "q", "v": "v", "a": "a", "lam": "lam", "p": "p"}), tables, function_names)
    offsets = {"q": 0, "mu": n, "v": n + m, "nu": 2 * n + m, "a": 2 * n + 2 * m, "lam": 3 * n + 2 * m}

    def z_map(name: str) -> str | None:
        head, _, tail = name.rpartition("_")
        if head in offsets and tail.isdigit():
            return f"z[{offsets[head] + int(tail)}]"
        if head == "p" and tail.isdigit():
            return f"p[{tail}]"
        return None

    init = CPrinter(z_map, tables, function_names)
    guess = CPrinter(indexed({"p": "p"}), tables, function_names)
    settings = model.simulation
    header = [
        # No user text in comments; names reach C only as escaped string literals.
        "/* model generated by fmi-adjoint: sizes, defaults and function prototypes */",
        "#ifndef FA_MODEL_H",
        "#define FA_MODEL_H",
        "#if defined(__GNUC__) && !defined(FA_EXPORT_ALL)",
        "#pragma GCC visibility push(hidden) /* internal: only FMI functions are exported */",
        "#endif",
        f"#define FA_MODEL_NAME {c_string_literal(model.name)}",
        f"#define FA_N {n}",
        f"#define FA_M {m}",
        f"#define FA_NP {len(params)}",
        f"#define FA_NY {sym.Y.rows}",
        f"#define FA_NZ {3 * n + 3 * m}",
        f"#define FA_DEFAULT_STEP {settings.step!r}",
        f"#define FA_DEFAULT_ALPHA {settings.alpha!r}",
        "extern const double fa_default_parameters[FA_NP > 0 ? FA_NP : 1];",
        "extern const char *const fa_parameter_names[FA_NP > 0 ? FA_NP : 1];",
        "extern const char *const fa_output_names[FA_NY];",
        "extern const char *const fa_coordinate_names[FA_N];",
        f"void fa_residual({_STATE}, double *Ma, double *F, double *C);",
        f"void fa_newton({_STATE}, double *Ma, double *F, double *C, double *M, double *JM, double *K, "
        "double *JV, double *Cq);",
        f"void fa_outputs({_STATE}, double *y);",
        "void fa_init_guess(double t, const double *p, double *q0, double *v0);",
        "void fa_init_residual(const double *z, double t, const double *p, double *G);",
        "void fa_init_jacobian(const double *z, double t, const double *p, double *Gz);",
        "#if defined(__GNUC__) && !defined(FA_EXPORT_ALL)",
        "#pragma GCC visibility pop",
        "#endif",
        "#endif",
        "",
    ]
    defaults = ", ".join(repr(float(par.value)) for par in params) or "0.0"
    names = ", ".join(c_string_literal(par.name) for par in params) or '""'
    source = [
        "/* model generated by fmi-adjoint from its symbolic equations */",
        "#include <math.h>",
        '#include "model.h"',
        C_MATH_CONSTANTS,
        "",
        f"const double fa_default_parameters[FA_NP > 0 ? FA_NP : 1] = {{{defaults}}};",
        f"const char *const fa_parameter_names[FA_NP > 0 ? FA_NP : 1] = {{{names}}};",
        f"const char *const fa_output_names[FA_NY] = {{{', '.join(c_string_literal(o.name) for o in model.outputs)}}};",
        f"const char *const fa_coordinate_names[FA_N] = "
        f"{{{', '.join(c_string_literal(c.name) for c in model.all_coordinates)}}};",
        "",
        *_table_code(sym.tables),
        *links,
        f"void fa_residual({_STATE}, double *Ma, double *F, double *C)",
        "{",
        *c_assignments([("Ma", d.Ma), ("F", d.F), ("C", d.C)], state),
        "}",
        "",
        f"void fa_newton({_STATE}, double *Ma, double *F, double *C, double *M, double *JM, double *K, "
        "double *JV, double *Cq)",
        "{",
        *c_assignments([("Ma", d.Ma), ("F", d.F), ("C", d.C), ("M", d.M), ("JM", d.JM), ("K", d.K),
                        ("JV", d.JV), ("Cq", d.Cq)], state),
        "}",
        "",
        f"void fa_outputs({_STATE}, double *y)",
        "{",
        *c_assignments([("y", d.Y)], state),
        "}",
        "",
        "void fa_init_guess(double t, const double *p, double *q0, double *v0)",
        "{",
        *c_assignments([("q0", d.q0), ("v0", d.v0)], guess),
        "}",
        "",
        "void fa_init_residual(const double *z, double t, const double *p, double *G)",
        "{",
        *c_assignments([("G", d.G)], init),
        "}",
        "",
        "void fa_init_jacobian(const double *z, double t, const double *p, double *Gz)",
        "{",
        *c_assignments([("Gz", d.G_z)], init),
        "}",
        "",
    ]
    return "\n".join(header), "\n".join(source)
