"""C source of a model derived by components: per-type kernels and their assembly, in C.

The functions are those of a model derived as a whole (:mod:`.model_code`: ``fa_<name>`` for
every row of :data:`fmi_adjoint.assembly.plan.GLOBAL_FUNCTIONS`, ``fa_init_guess``, the same
sparsity patterns and Newton-matrix layout in ``model.h``), so the runtime, the engine, the
adjoint and exported FMUs cannot tell the two apart.  Each component type is one file
``model_type<k>.c``:

* its kernels (:class:`fmi_adjoint.assembly.kernels.TypeKernels`), named ``fa_t<k>_<row>``
  through the ``FA_KERNEL`` macro;
* its instances' index arrays (``fa_t<k>_<kind>[instance * size + j]``: the model coordinate,
  multiplier, output, parameter or initialization unknown of each local entry, ``-1`` for none
  and for the projection rows of fixed coordinates, whose weight is 0) and data slots (the
  numbers of each instance, ``fa_t<k>_data``);
* for every model function it feeds, ``fa_t<k>_add_<function>``: a loop over its instances
  that gathers the local arguments, calls the kernel, and adds the local values into the
  model's outputs (a matrix through ``fa_t<k>_map_<output>[instance * nnz + k]``, the position
  of local non-zero ``k`` among the model matrix's non-zeros) -- finite-element assembly.

``model_assembly.c`` defines the model functions: zero the outputs, call every type's
``add`` loop, and add the initial guesses' part of the initialization system
(:mod:`fmi_adjoint.assembly.plan`).  The files compile in parallel; their size grows with
the number of types and linearly with the number of instances (the index arrays).
"""

from __future__ import annotations

from ..assembly import AssemblyPayload, TypeKernels
from ..assembly.kernels import KERNEL_PREAMBLE, KernelRow
from ..assembly.plan import AXES, GLOBAL_FUNCTIONS, GROUP_KIND, GlobalFunction, PlanSizes, index_array, row_weights
from ..assembly.partition import Instance
from ..model import Model
from .model_header import MODEL_HEADER, int_array, layout_of_patterns, model_header_and_common

__all__ = ["assembled_c_sources"]

_KINDS = ("coord", "lam", "out", "param", "z", "zrow")
#: Model outputs that are matrices (values of their non-zeros, row-major order).
_MATRICES = tuple(name for name, axes in AXES.items() if len(axes) == 2)
_GUESS_PREFIX = "fa_g_"
#: Kernels run once per simulation (the initialization and its guesses), not per step: GCC
#: compiles them without optimization (``FA_RUN_ONCE``), several times faster for the large
#: initialization Jacobians (issue 24: the cold build of a 1 000-coordinate random tree spent
#: most of its C compiler time allocating registers in them).  Their results are the same bits:
#: the arithmetic is IEEE double in the order written at every optimization level (no
#: reassociation or contraction in ISO C mode), and the kernels print squares as products
#: (:class:`fmi_adjoint.assembly.kernels._KernelPrinter`), the one library call an optimizing
#: compiler would have replaced.  The attribute is in the source, so an exported FMU's binary
#: is compiled the same way; with other compilers (clang has no such attribute) the macro is empty.
RUN_ONCE_ROWS = ("init_residual", "init_jacobians", "init_guess", "guess_jacobians")
_RUN_ONCE = ("#ifndef FA_RUN_ONCE /* -DFA_RUN_ONCE= compiles them optimized */\n"
             "#if defined(__GNUC__) && !defined(__clang__)\n#define FA_RUN_ONCE __attribute__((optimize(\"O0\")))\n"
             "#else\n#define FA_RUN_ONCE\n#endif\n#endif")


def _definition(row: KernelRow, name: str | None = None) -> list[str]:
    """The C definition of a kernel row (``FA_RUN_ONCE`` for :data:`RUN_ONCE_ROWS`)."""
    head = row.c_signature(name)
    return [f"FA_RUN_ONCE {head}" if row.name in RUN_ONCE_ROWS else head, "{", row.c, "}", ""]


def _indices(kind: str, instance: Instance, sizes: PlanSizes) -> list[int]:
    """Index array of ``kind`` with weight-0 entries (fixed coordinates' projection rows) as -1."""
    index = list(index_array(kind, instance, sizes))
    if kind == "zrow":
        return [i if w != 0.0 else -1 for i, w in zip(index, row_weights(kind, instance, sizes))]
    return index


def _global_patterns(payload: AssemblyPayload,
                     functions: tuple[GlobalFunction, ...]) -> dict[str, list[tuple[int, int]]]:
    """The non-zeros of every model matrix: the union of the instances' local non-zeros, plus the
    identity of the projection rows in ``G_z`` and the guesses' derivatives in ``G_p``."""
    sizes = payload.sizes
    entries: dict[str, set[tuple[int, int]]] = {}
    wanted = {name for fn in functions for name in fn.outputs if name in _MATRICES}
    for name in sorted(wanted):  # a set of strings: sorted, or the generated code follows PYTHONHASHSEED
        entries[name] = set()
    for instance in payload.instances:
        kernels = payload.types[instance.type]
        for row in kernels.rows:
            for name, _, pattern in row.outputs:
                if name not in wanted:
                    continue
                rows = _indices(AXES[name][0], instance, sizes)
                cols = _indices(AXES[name][1], instance, sizes)
                entries[name].update((rows[r], cols[c]) for r, c in pattern if rows[r] >= 0 and cols[c] >= 0)
    n, m = sizes.n, sizes.m
    if "G_z" in entries:
        entries["G_z"].update((i, i) for i in range(n))
        entries["G_z"].update((n + m + i, n + m + i) for i in range(n))
    if "G_p" in entries:
        guess = payload.guess.row("guess_jacobians")
        for name, _, pattern in guess.outputs:
            offset = 0 if name == "q0_p" else n + m
            entries["G_p"].update((offset + r, c) for r, c in pattern)
    return {name: sorted(entries[name]) for name in entries}


def _feeds(kernels: TypeKernels, fn: GlobalFunction) -> bool:
    """Whether the type's kernels have the row that model function ``fn`` calls for their kind."""
    row_name = dict(fn.sources).get(kernels.kind)
    return row_name is not None and any(row.name == row_name for row in kernels.rows)


def _signature(fn: GlobalFunction, name: str | None = None) -> str:
    args = ["double t" if g == "t" else f"const double *{g}" for g in fn.args]
    outputs = [f"double *{o}" for o in fn.outputs]
    return f"void {name or 'fa_' + fn.name}({', '.join(args + outputs)})"


def _output_size(name: str, sizes: PlanSizes) -> str:
    if name in _MATRICES:
        return f"FA_NNZ_{name}"
    return str(sizes.size(AXES[name][0]))


def _type_file(prefix: str, kernels: TypeKernels, instances: list[Instance], sizes: PlanSizes,
               positions: dict[str, dict[tuple[int, int], int]], functions: tuple[GlobalFunction, ...]) -> str:
    """``model_type<k>.c`` (module docstring); its names start with ``prefix`` (``fa_t<k>``, or
    ``fa_s<k>`` for the second-order file of the type).  ``positions``: the place of each
    structural non-zero among the model's, per matrix."""
    count = len(instances)
    lines = ["/* generated by fmi-adjoint: a component type (kernels, instances, assembly) */",
             KERNEL_PREAMBLE, f'#include "{MODEL_HEADER}"', f"#define FA_KERNEL(name) {prefix}_##name", _RUN_ONCE,
             "", f"#define {prefix.upper()}_COUNT {count}"]
    rows = {row.name: row for row in kernels.rows}
    used_kinds = sorted(({GROUP_KIND[g] for row in kernels.rows for g in row.args if g != "t"}
                         | {axis for row in kernels.rows for name, _, _ in row.outputs for axis in AXES.get(name, ())})
                        - {"data"})
    widths = {}
    for kind in _KINDS:
        if kind not in used_kinds:
            continue
        values = [i for instance in instances for i in _indices(kind, instance, sizes)]
        widths[kind] = len(values) // count if count else 0
        lines.append(int_array(f"{prefix}_{kind}", values).replace("const int", "static const int"))
    data = [x for instance in instances for x in instance.data]
    lines.append(f"static const double {prefix}_data[{max(len(data), 1)}] = "
                 f"{{{', '.join(repr(float(x)) for x in data) or '0.0'}}};")
    lines += [kernels.c_preamble, ""]
    for row in kernels.rows:
        lines += _definition(row)
    for fn in functions:
        row_name = dict(fn.sources).get(kernels.kind)
        if row_name is None or row_name not in rows:
            continue
        row = rows[row_name]
        lines += _add_loop(prefix, fn, row, kernels, instances, sizes, positions, widths)
    return "\n".join(lines) + "\n"


def _add_loop(prefix: str, fn: GlobalFunction, row: KernelRow, kernels: TypeKernels, instances: list[Instance],
              sizes: PlanSizes, positions: dict[str, dict[tuple[int, int], int]],
              widths: dict[str, int]) -> list[str]:
    """``<prefix>_add_<function>``: gather, kernel, scatter over the type's instances."""
    lines: list[str] = []
    count = len(instances)
    for name, _, pattern in row.outputs:
        if name not in fn.outputs or name not in _MATRICES:
            continue
        values = []
        for instance in instances:
            rows = _indices(AXES[name][0], instance, sizes)
            cols = _indices(AXES[name][1], instance, sizes)
            for r, c in pattern:
                values.append(positions[name][(rows[r], cols[c])] if rows[r] >= 0 and cols[c] >= 0 else -1)
        lines.append(int_array(f"{prefix}_{fn.name}_map_{name}", values).replace("const int", "static const int"))
    lines += [_signature(fn, f"{prefix}_add_{fn.name}"), "{"]
    local_sizes = {"coord": kernels.n, "lam": kernels.m, "out": kernels.n_y, "param": kernels.n_p,
                   "data": kernels.n_d, "z": 3 * kernels.n + 3 * kernels.m, "zrow": 3 * kernels.n + 3 * kernels.m}
    for g in row.args:
        if g != "t" and GROUP_KIND[g] != "data":
            lines.append(f"    double l_{g}[{max(local_sizes[GROUP_KIND[g]], 1)}];")
    for name, shape, pattern in row.outputs:
        size = len(pattern) if len(shape) == 2 else shape[0]
        lines.append(f"    double o_{name}[{max(size, 1)}];")
    lines += [f"    for (int i = 0; i < {count}; ++i) {{"]
    for g in row.args:
        if g == "t":
            continue
        kind = GROUP_KIND[g]
        width = local_sizes[kind]
        if kind == "data":  # read in place: a structured type's data are its matrices
            lines.append(f"        const double *l_{g} = {prefix}_data + i * {kernels.n_d};")
            continue
        if width == 0:
            continue
        index = f"{prefix}_{kind}[i * {widths[kind]} + j]"
        value = f"{index} >= 0 ? {g}[{index}] : 0.0"
        lines.append(f"        for (int j = 0; j < {width}; ++j) l_{g}[j] = {value};")
    call_args = ["t" if g == "t" else f"l_{g}" for g in row.args] + [f"o_{name}" for name, _, _ in row.outputs]
    lines.append(f"        FA_KERNEL({row.name})({', '.join(call_args)});")
    for name, shape, pattern in row.outputs:
        if name not in fn.outputs:
            continue
        if name in _MATRICES:
            lines += [f"        for (int k = 0; k < {len(pattern)}; ++k) {{",
                      f"            int at = {prefix}_{fn.name}_map_{name}[i * {len(pattern)} + k];",
                      f"            if (at >= 0) {name}[at] += o_{name}[k];", "        }"]
        else:
            kind = AXES[name][0]
            if shape[0] == 0:
                continue
            lines += [f"        for (int j = 0; j < {shape[0]}; ++j) {{",
                      f"            int at = {prefix}_{kind}[i * {widths[kind]} + j];",
                      f"            if (at >= 0) {name}[at] += o_{name}[j];", "        }"]
    lines += ["    }", "}", ""]
    return lines


def _guess_file(guess: TypeKernels) -> str:
    lines = ["/* generated by fmi-adjoint: the initial guesses q0(p), v0(p) and their derivatives */",
             KERNEL_PREAMBLE, f'#include "{MODEL_HEADER}"', f"#define FA_KERNEL(name) {_GUESS_PREFIX}##name", _RUN_ONCE,
             ""]
    for row in guess.rows:
        lines += _definition(row, _GUESS_PREFIX + row.name)
    return "\n".join(lines) + "\n"


def _model_function(fn: GlobalFunction, types: list[tuple[str, TypeKernels]], sizes: PlanSizes,
                    patterns: dict[str, list[tuple[int, int]]], guess: TypeKernels) -> list[str]:
    """``fa_<function>``: zero, every type's add loop, the guesses' part."""
    n, m = sizes.n, sizes.m
    lines = [_signature(fn), "{"]
    for name in fn.outputs:
        lines.append(f"    for (int k = 0; k < {_output_size(name, sizes)}; ++k) {name}[k] = 0.0;")
    args = list(fn.args) + list(fn.outputs)
    for prefix, kernels in types:
        if _feeds(kernels, fn):
            lines.append(f"    {prefix}_add_{fn.name}({', '.join(args)});")
    if fn.name == "init_residual":
        lines += [f"    double q0[{max(n, 1)}], v0[{max(n, 1)}];", f"    {_GUESS_PREFIX}init_guess(t, p, q0, v0);",
                  f"    for (int i = 0; i < {n}; ++i) {{ G[i] += q[i] - q0[i]; G[{n + m} + i] += v[i] - v0[i]; }}"]
    elif fn.name == "init_jacobians":
        diagonal = {entry: k for k, entry in enumerate(patterns["G_z"])}
        q_diag = [diagonal[(i, i)] for i in range(n)]
        v_diag = [diagonal[(n + m + i, n + m + i)] for i in range(n)]
        lines += [f"    static const int q_diag[{max(n, 1)}] = {{{', '.join(map(str, q_diag)) or '0'}}};",
                  f"    static const int v_diag[{max(n, 1)}] = {{{', '.join(map(str, v_diag)) or '0'}}};",
                  f"    for (int i = 0; i < {n}; ++i) {{ G_z[q_diag[i]] += 1.0; G_z[v_diag[i]] += 1.0; }}"]
        at = {entry: k for k, entry in enumerate(patterns["G_p"])}
        row = guess.row("guess_jacobians")
        for name, _, pattern in row.outputs:
            offset = 0 if name == "q0_p" else n + m
            positions = [at[(offset + r, c)] for r, c in pattern]
            lines.append(f"    static const int at_{name}[{max(len(positions), 1)}] = "
                         f"{{{', '.join(map(str, positions)) or '0'}}};")
            lines.append(f"    double {name}[{max(len(pattern), 1)}];")
        lines += [f"    {_GUESS_PREFIX}guess_jacobians(t, p, q0_p, v0_p);"]
        for name, _, pattern in row.outputs:
            lines.append(f"    for (int k = 0; k < {len(pattern)}; ++k) G_p[at_{name}[k]] -= {name}[k];")
    elif fn.name == "init_second":
        lines += [f"    double gp[{max(sizes.n_p, 1)}];", f"    {_GUESS_PREFIX}guess_second(t, p, wG, dp, gp);",
                  f"    for (int k = 0; k < {sizes.n_p}; ++k) Ip[k] += gp[k];"]
    lines += ["}", ""]
    return lines


def _batch_driver(fn: GlobalFunction, sizes: PlanSizes) -> tuple[str, str]:
    """``fa_<name>_batch(count, ...)`` as :func:`.model_code._batch_driver` (vector outputs)."""
    group_size = {g: sizes.size(GROUP_KIND[g]) for g in fn.args if g != "t"}
    args = ["const double *t" if g == "t" else f"const double *{g}" for g in fn.args]
    outputs = [f"double *{o}" for o in fn.outputs]
    signature = f"void fa_{fn.name}_batch(long count, {', '.join(args + outputs)})"
    call = ["t[r]" if g == "t" else g if g == "p" else f"{g} + r * {group_size[g]}" for g in fn.args]
    call += [f"{o} + r * {sizes.size(AXES[o][0])}" for o in fn.outputs]
    loop = f"    for (long r = 0; r < count; ++r) fa_{fn.name}({', '.join(call)});"
    body = "\n".join([signature, "{", loop, "}", ""])
    return signature + ";", body


def assembled_c_sources(model: Model, payload: AssemblyPayload, second: AssemblyPayload | None = None, *,
                        defaults: bool = True) -> dict[str, str]:
    """``{file name: text}`` of the C code of a model derived by components (module docstring);
    ``second`` (the payload with the second-order kernels) adds ``fa_step_second``,
    ``fa_init_second`` and their batch drivers."""
    sizes = payload.sizes
    first = tuple(fn for fn in GLOBAL_FUNCTIONS if not fn.second_order)
    patterns = _global_patterns(payload, first)
    layout = layout_of_patterns(sizes.n, sizes.m, patterns)
    # Position of each structural non-zero among the model's, per matrix (the scatter maps).
    positions = {name: {entry: k for k, entry in enumerate(pattern)} for name, pattern in patterns.items()}
    by_type: dict[int, list[Instance]] = {}
    for instance in payload.instances:
        by_type.setdefault(instance.type, []).append(instance)
    files: dict[str, str] = {}
    prototypes = [_signature(fn) + ";" for fn in first]
    prototypes.append("void fa_init_guess(double t, const double *p, double *q0, double *v0);")
    prototypes += [row.c_signature(_GUESS_PREFIX + row.name) + ";" for row in payload.guess.rows]
    assembly = ["/* generated by fmi-adjoint: the model's functions, assembled from its component types */",
                "#include <math.h>", f'#include "{MODEL_HEADER}"', ""]
    for group, payload_of, functions in (("t", payload, first),
                                         ("s", second, tuple(fn for fn in GLOBAL_FUNCTIONS if fn.second_order))):
        if payload_of is None:
            continue
        types = [(f"fa_{group}{k}", payload_of.types[k]) for k in sorted(by_type)]
        for (prefix, kernels), k in zip(types, sorted(by_type)):
            name = f"model_type{k}.c" if group == "t" else f"model_second{k}.c"
            files[name] = _type_file(prefix, kernels, by_type[k], sizes, positions, functions)
            prototypes += [_signature(fn, f"{prefix}_add_{fn.name}") + ";" for fn in functions if _feeds(kernels, fn)]
        for fn in functions:
            assembly += _model_function(fn, types, sizes, patterns, payload.guess)
            if fn.second_order:
                prototypes.append(_signature(fn) + ";")
                prototype, driver = _batch_driver(fn, sizes)
                prototypes.append(prototype)
                assembly.append(driver)
    assembly += ["void fa_init_guess(double t, const double *p, double *q0, double *v0)", "{",
                 f"    {_GUESS_PREFIX}init_guess(t, p, q0, v0);", "}", ""]
    header, common = model_header_and_common(model, sizes.n, sizes.m, sizes.n_y, patterns, layout, defaults=defaults,
                                             declarations=[], prototypes=prototypes)
    files[MODEL_HEADER] = "\n".join(header)
    files["model.c"] = "\n".join(common) + "\n"
    files["model_assembly.c"] = "\n".join(assembly) + "\n"
    files["model_guess.c"] = _guess_file(payload.guess)
    return files
