"""The model-independent part of a model's generated C: ``model.h`` and ``model.c``.

Sizes, settings, names, default values, the sparsity patterns of the matrix outputs and the
storage plan of the Newton matrix (:func:`fmi_adjoint.sparsity.plan_layout`), shared by the
code of models derived as a whole (:mod:`.model_code`) and by components
(:mod:`.assembly_code`).  No user text reaches the C sources except names as escaped string
literals.
"""

from __future__ import annotations

from ..integrate.initialization import INIT_MAX_ITERATIONS, INIT_TOLERANCE
from ..integrate.schemes import (NEWTON_ITERATION_LIMIT, NEWTON_MAX_ITERATIONS, NEWTON_REUSE_CONTRACTION,
                                 NEWTON_ROUNDOFF, NEWTON_RTOL, scheme_from_settings)
from ..model import Model
from ..sparsity import MatrixLayout, MatrixStorage, plan_layout, storage_override
from ..text import c_string_literal

__all__ = ["MODEL_HEADER", "SPARSE_DEFINE", "int_array", "layout_of_patterns", "model_header_and_common",
           "uses_sparse_solver"]

MODEL_HEADER = "model.h"
#: The line of ``model.h`` that says the model's code needs the sparse solver (fa_sparse.cpp).
SPARSE_DEFINE = "#define FA_USES_SPARSE 1"


def uses_sparse_solver(files: dict[str, str]) -> bool:
    """True if the generated ``files`` (``model_c_sources``) factor a matrix with the sparse
    solver, which then has to be linked (a C++ object) into the library or FMU binary."""
    return SPARSE_DEFINE in files.get(MODEL_HEADER, "").splitlines()


def int_array(name: str, values: list[int]) -> str:
    body = ", ".join(map(str, values)) or "0"
    return f"const int {name}[{max(len(values), 1)}] = {{{body}}};"


def layout_of_patterns(n: int, m: int, patterns: dict[str, list[tuple[int, int]]]) -> MatrixLayout:
    """Storage plan of the Newton matrix from the patterns of ``M, JM, K, JV, Cq`` (the storage
    forced by :func:`fmi_adjoint.sparsity.storage_override`, else the automatic rule)."""
    entries = set()
    for name in ("M", "JM", "K", "JV"):
        entries.update(patterns[name])
    for r, c in patterns["Cq"]:
        entries.add((n + r, c))
        entries.add((c, n + r))
    return plan_layout(n + m, sorted(entries), storage_override())


def _storage_lines(prefix: str, layout: MatrixLayout) -> list[str]:
    """The ``#define``s of one matrix's storage plan (fa_engine.c reads them)."""
    return [f"#define FA_{prefix}_KIND {layout.storage.value}",
            f"#define FA_{prefix}_BANDED {1 if layout.storage is MatrixStorage.BAND else 0}",
            f"#define FA_{prefix}_SPARSE {1 if layout.storage is MatrixStorage.SPARSE else 0}",
            f"#define FA_{prefix}_ORDERED {1 if layout.sparse is not None and layout.sparse.order else 0}",
            f"#define FA_{prefix}_BLOCKS {len(layout.sparse.blocks) if layout.sparse is not None else 0}",
            f"#define FA_{prefix}_KL {layout.kl}",
            f"#define FA_{prefix}_KU {layout.ku}",
            f"#define FA_{prefix}_STORAGE {layout.storage_size}"]


def _csc_arrays(prefix: str, layout: MatrixLayout) -> list[str]:
    """``fa_<prefix>_colptr`` / ``fa_<prefix>_rowind``: the compressed columns of a sparse
    layout (one zero for another storage); ``fa_<prefix>_order``: its symmetric fill-reducing
    order (``SparsePattern.order``; one zero where the solver's COLAMD orders instead);
    ``fa_<prefix>_starts``: the diagonal blocks of a block lower triangular layout."""
    pattern = layout.sparse
    colptr = list(pattern.colptr) if pattern is not None else [0]
    rowind = list(pattern.rowind) if pattern is not None else [0]
    order = list(pattern.order) if pattern is not None and pattern.order else [0]
    starts = [0]
    if pattern is not None and pattern.blocks:
        # Block lower triangular (fa_sparse_new_blocked): each block's local order, or -1 first
        # where COLAMD orders the block.
        starts = list(pattern.starts)
        order = []
        for block in pattern.blocks:
            size = len(block.colptr) - 1
            order += list(block.order) if block.order else [-1] * size
    return [int_array(f"fa_{prefix}_colptr", colptr), int_array(f"fa_{prefix}_rowind", rowind),
            int_array(f"fa_{prefix}_order", order), int_array(f"fa_{prefix}_starts", starts)]


def model_header_and_common(model: Model, n: int, m: int, n_y: int, patterns: dict[str, list[tuple[int, int]]],
                            layout: MatrixLayout, *, defaults: bool, declarations: list[str],
                            prototypes: list[str]) -> tuple[list[str], list[str]]:
    """The lines of ``model.h`` (sizes, settings, patterns, the layouts of the Newton and the
    initialization matrices, the declarations and prototypes given) and of ``model.c`` (names,
    defaults, patterns, maps):
    the part of the generated code that does not depend on how the functions are derived."""
    from ..cprint import C_MATH_CONSTANTS  # sympy's C printer: only a build needs it (issue 24, part 6)

    params = model.all_parameters
    settings = model.simulation
    # The initialization matrix dG/dz, stored like the Newton matrix (banded after a
    # fill-reducing ordering where that is less work): dense, it was (3n + 3m)^2 doubles.
    init = plan_layout(3 * n + 3 * m, sorted(patterns["G_z"]), storage_override(),
                       starts=(0, n + m, 2 * (n + m), 3 * (n + m)))
    sparse = MatrixStorage.SPARSE in (layout.storage, init.storage)
    header = [
        # No user text in comments; names reach C only as escaped string literals.
        "/* model generated by fmi-adjoint: sizes, defaults, patterns and function prototypes */",
        "#ifndef FA_MODEL_H",
        "#define FA_MODEL_H",
        "#if defined(__GNUC__) && !defined(FA_EXPORT_ALL)",
        "#pragma GCC visibility push(hidden) /* internal: only FMI functions are exported */",
        "#endif",
        f"#define FA_MODEL_NAME {c_string_literal(model.name)}",
        f"#define FA_N {n}",
        f"#define FA_M {m}",
        f"#define FA_NP {len(params)}",
        f"#define FA_NY {n_y}",
        f"#define FA_NZ {3 * n + 3 * m}",
        f"#define FA_NK {n + m}",
        f"#define FA_DEFAULT_STEP {settings.step!r}",
        f"#define FA_DEFAULT_ALPHA {settings.alpha!r}",
        f"#define FA_DEFAULT_SCHEME {scheme_from_settings(settings).code}",
        f"#define FA_DEFAULT_RHO_INF {settings.rho_inf!r}",
        # Newton and initialization constants: defined once, in fmi_adjoint.integrate.
        f"#define FA_NEWTON_RTOL {NEWTON_RTOL!r}",
        f"#define FA_NEWTON_MAX_ITERATIONS {NEWTON_MAX_ITERATIONS}",
        f"#define FA_NEWTON_ITERATION_LIMIT {NEWTON_ITERATION_LIMIT}",
        f"#define FA_NEWTON_REUSE_CONTRACTION {NEWTON_REUSE_CONTRACTION!r}",
        f"#define FA_NEWTON_ROUNDOFF {NEWTON_ROUNDOFF!r}",
        f"#define FA_INIT_TOLERANCE {INIT_TOLERANCE!r}",
        f"#define FA_INIT_MAX_ITERATIONS {INIT_MAX_ITERATIONS}",
        # Storage of the Newton and initialization matrices: FA_*_KIND is
        # fmi_adjoint.sparsity.MatrixStorage (0 dense, 1 band, 2 sparse).
        *_storage_lines("KKT", layout),
        *_storage_lines("INIT", init),
        SPARSE_DEFINE if sparse else "#define FA_USES_SPARSE 0",
        "extern const int fa_kkt_colptr[];",
        "extern const int fa_kkt_rowind[];",
        "extern const int fa_init_colptr[];",
        "extern const int fa_init_rowind[];",
        "extern const int fa_kkt_order[];",
        "extern const int fa_init_order[];",
        "extern const int fa_kkt_starts[];",
        "extern const int fa_init_starts[];",
        "extern const int fa_init_position[FA_NZ > 0 ? FA_NZ : 1];",
        "extern const double fa_default_parameters[FA_NP > 0 ? FA_NP : 1];",
        "extern const char *const fa_parameter_names[FA_NP > 0 ? FA_NP : 1];",
        "extern const char *const fa_output_names[FA_NY];",
        "extern const char *const fa_coordinate_names[FA_N];",
        "extern const int fa_kkt_position[FA_NK];",
    ]
    for name, pattern in patterns.items():
        size = max(len(pattern), 1)
        header += [f"#define FA_NNZ_{name} {len(pattern)}",
                   f"extern const int fa_{name}_row[{size}];", f"extern const int fa_{name}_col[{size}];"]
    for name in ("M", "JM", "K", "JV", "Cq"):
        header.append(f"extern const int fa_kkt_{name}[{max(len(patterns[name]), 1)}];")
    header.append(f"extern const int fa_kkt_CqT[{max(len(patterns['Cq']), 1)}];")
    header.append(f"extern const int fa_init_G_z[{max(len(patterns['G_z']), 1)}];")
    header += declarations
    header += prototypes
    header += ["#if defined(__GNUC__) && !defined(FA_EXPORT_ALL)", "#pragma GCC visibility pop", "#endif",
               "#endif", ""]

    values = ", ".join(repr(float(par.value) if defaults else 0.0) for par in params) or "0.0"
    names = ", ".join(c_string_literal(par.name) for par in params) or '""'
    common = [
        "/* model generated by fmi-adjoint: names, defaults, tables and sparsity */",
        "#include <math.h>",
        f'#include "{MODEL_HEADER}"',
        C_MATH_CONSTANTS,
        f"const double fa_default_parameters[FA_NP > 0 ? FA_NP : 1] = {{{values}}};",
        f"const char *const fa_parameter_names[FA_NP > 0 ? FA_NP : 1] = {{{names}}};",
        f"const char *const fa_output_names[FA_NY] = {{{', '.join(c_string_literal(o.name) for o in model.outputs)}}};",
        f"const char *const fa_coordinate_names[FA_N] = "
        f"{{{', '.join(c_string_literal(c.name) for c in model.all_coordinates)}}};",
        int_array("fa_kkt_position", list(layout.position)),
    ]
    for name, pattern in patterns.items():
        common.append(int_array(f"fa_{name}_row", [r for r, _ in pattern]))
        common.append(int_array(f"fa_{name}_col", [c for _, c in pattern]))
    for name in ("M", "JM", "K", "JV", "Cq"):
        offset = n if name == "Cq" else 0
        common.append(int_array(f"fa_kkt_{name}", [layout.index(offset + r, c) for r, c in patterns[name]]))
    common.append(int_array("fa_kkt_CqT", [layout.index(c, n + r) for r, c in patterns["Cq"]]))
    common.append(int_array("fa_init_position", list(init.position)))
    common.append(int_array("fa_init_G_z", [init.index(r, c) for r, c in patterns["G_z"]]))
    common += _csc_arrays("kkt", layout) + _csc_arrays("init", init)
    return header, common
