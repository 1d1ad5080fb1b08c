"""Kernels of structured terms, written from their patterns: evaluated and differentiated as data.

A :class:`~.structured_types.StructuredType` has the rows of any equations type
(:data:`.kernels.EQUATION_ROWS`, :data:`.kernels.SECOND_ROWS`), with the same arguments and
outputs, so the assembly, the engines, the adjoint and exported FMUs treat it like a derived
type.  Its derivatives need no symbolic work: they are its matrices (issue 24, part 2).

**Matrix term** ``T += s f(p) A x`` (``T`` is ``M a`` or ``F = C_q^T lambda - Q``, ``x`` one of
``a, q, v`` or a constant column; :class:`fmi_adjoint.structured.TermRole`).  With
``f_p = df/dp`` and ``f_pp`` its Hessian (printed from the factor's expression, the only
symbolic work):

* ``T = s f A x``; the Jacobian of ``T`` by ``x`` is ``s f A`` (``M`` for a mass term,
  ``K = dF/dq`` for stiffness, ``JV = dQ/dv = -s f A`` for damping); ``T_p = s (A x) f_p^T``;
* the initialization rows ``G5 = M a + F`` get ``s f A x``, their Jacobian ``s f A`` in the
  columns of ``x`` and ``s (A x) f_p^T`` (:func:`fmi_adjoint.equations.differentiate`);
* the second derivatives of input design (:func:`fmi_adjoint.equations.second_order_table`)
  for ``phi = w^T (s f A dx + s (f_p . dp) A x)``: ``S_x = s (f_p . dp) A^T w`` and
  ``S_p = s f_p (w^T A dx) + s (f_pp dp) (w^T A x)`` (``w`` is ``wM`` or ``wF``, in
  ``init_second`` the weights of ``G5`` and ``dx`` the direction's ``x`` block).

**Quadratic constraints** ``C_r = c0_r + J0_r q + 1/2 q^T H_r q`` (seed 003, eq. (13)):
``C_q = J0 + [q^T H_r]_r`` (linear in ``q``, eq. (19)), ``F = C_q^T lambda``, ``K = sum_r
lambda_r H_r`` (constant second derivative, eq. (20)); the initialization rows ``C_q^T mu``,
``C``, ``C_q^T nu``, ``C_q v``, ``C_q^T lambda``, ``C_q a + [v^T H_r v]_r`` and their Jacobians;
the second derivatives ``S_q = sum_r H_r (dlam_r wF + wC_r dq)``, ``S_lam,r = wF^T H_r dq`` and
their initialization counterparts (written out in :func:`_quadratic_second`).

Two implementations, checked against each other and against the same terms written out as
expressions (``tests/test_structured_terms.py``):

* C (:func:`structured_kernels`): loops over the pattern, the values read from the
  instance's data slots, each matrix output written as the values of its local non-zeros
  through precomputed positions (the per-type file's static arrays, :attr:`TypeKernels.c_preamble`);
* numpy (:func:`numpy_functions`): the reference of the Python engine, dense local
  matrices and ``einsum``, batched over the instances like the printed kernels.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import sympy as sp

from ..codegen import load_function
from ..equations import INIT_ARGS, SECOND_INIT_ARGS, SECOND_STEP_ARGS, STATE_ARGS, GeneratedFunction
from .kernels import EQUATION_ROWS, SECOND_ROWS, KernelRow, TypeKernels, print_rows
from .partition import local_symbols
from .structured_types import LocalQuadratic, LocalTerm, StructuredType, local_from_json

__all__ = ["kernel_functions", "numpy_functions", "structured_kernels"]

Function = Callable[..., tuple[np.ndarray, ...]]

#: The argument groups of each row (those of the derived types, with the data slots last).
_ARGS = {"residual_terms": STATE_ARGS, "newton": STATE_ARGS, "jacobian_terms": STATE_ARGS,
         "parameter_terms": STATE_ARGS, "init_residual": INIT_ARGS, "init_jacobians": INIT_ARGS,
         "step_second": SECOND_STEP_ARGS, "init_second": SECOND_INIT_ARGS}
#: The outputs of each row, in order.
_OUTPUTS = {"residual_terms": ("Ma", "F", "C"), "newton": ("Ma", "F", "C", "M", "JM", "K", "JV", "Cq"),
            "jacobian_terms": ("M", "JM", "K", "JV", "Cq"), "parameter_terms": ("Ma_p", "F_p", "C_p"),
            "init_residual": ("G",), "init_jacobians": ("G_z", "G_p"),
            "step_second": ("Sq", "Sv", "Sa", "Slam", "Sp"), "init_second": ("Iz", "Ip")}
_MATRICES = {"M", "JM", "K", "JV", "Cq", "Ma_p", "F_p", "C_p", "G_z", "G_p"}
#: The Jacobian output of each matrix term's argument, and the sign its entries carry there.
_JACOBIAN = {"a": ("M", 1.0), "q": ("K", 1.0), "v": ("JV", -1.0)}


def _shape(name: str, n: int, m: int, n_p: int) -> tuple[int, ...]:
    z = 3 * n + 3 * m
    return {"Ma": (n,), "F": (n,), "C": (m,), "M": (n, n), "JM": (n, n), "K": (n, n), "JV": (n, n), "Cq": (m, n),
            "Ma_p": (n, n_p), "F_p": (n, n_p), "C_p": (m, n_p), "G": (z,), "G_z": (z, z), "G_p": (z, n_p),
            "Sq": (n,), "Sv": (n,), "Sa": (n,), "Slam": (m,), "Sp": (n_p,), "Iz": (z,), "Ip": (n_p,)}[name]


def _offsets(n: int, m: int) -> dict[str, int]:
    """Where each block of ``z = (q, mu, v, nu, a, lambda)`` (and of ``G``'s rows) starts."""
    return {"q": 0, "mu": n, "v": n + m, "nu": 2 * n + m, "a": 2 * n + 2 * m, "lam": 3 * n + 2 * m}


class _CFile:
    """Static arrays of one type's file (:attr:`TypeKernels.c_preamble`), named ``s_<name>``."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def ints(self, name: str, values) -> str:
        values = [int(v) for v in values]
        self.lines.append(f"static const int s_{name}[{max(len(values), 1)}] = "
                          f"{{{', '.join(map(str, values)) or '0'}}};")
        return f"s_{name}"


class _Pattern:
    """The local non-zeros of one matrix output, in the order the kernel writes them."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, int]] = []
        self.at: dict[tuple[int, int], int] = {}

    def positions(self, rows, cols) -> list[int]:
        out = []
        for entry in zip((int(r) for r in rows), (int(c) for c in cols)):
            if entry not in self.at:
                self.at[entry] = len(self.entries)
                self.entries.append(entry)
            out.append(self.at[entry])
        return out


#: Entries per row, on average over the term's non-empty rows, from which a matrix term's product
#: ``A x`` is summed row by row in a register (:func:`_term_rows`): on the dense mass blocks of
#: flexible bodies (the suspension's knuckle with 20 modes: 613 per row) the modified-Newton step
#: fell from 7.9 to 4.2 ms (``./run bench flexible_bodies``); on a chain's band (7 per row) the loop
#: over rows cost more than the stores it saves (``structured_terms``' matrices_5000: 838 against
#: 643 us a step with this threshold).
ROW_LOOP_LENGTH = 16


def _zero(name: str, size: int) -> str:
    return f"    for (int i = 0; i < {size}; ++i) {name}[i] = 0.0;" if size else ""


def _factor_row(local: LocalTerm, n_p: int) -> KernelRow:
    """``factor(t, p) -> (f, f_p, f_pp)``: the term's factor, gradient and Hessian (row-major)."""
    p = local_symbols(0, 0, n_p, 0)["p"]
    f = local.factor
    gradient = [sp.diff(f, s) for s in p]
    hessian = [sp.diff(g, s) for g in gradient for s in p]
    row = GeneratedFunction("factor", ("t", "p"), (("f", sp.Matrix([f]), True),
                                                   ("f_p", sp.Matrix(n_p, 1, gradient), True),
                                                   ("f_pp", sp.Matrix(n_p * n_p, 1, hessian), True)))
    return print_rows((row,), {"t": sp.Symbol("t", real=True), "p": p})[0]


def _term_rows(ct: StructuredType, local: LocalTerm, wanted: tuple[str, ...]) -> tuple[str, list[KernelRow]]:
    """The C rows of a matrix term (module docstring) and their file's static arrays."""
    k, n_p, nnz = ct.n, ct.n_p, len(local.rows)
    role = local.role
    s = repr(role.sign)
    file = _CFile()
    R, Cc = file.ints("r", local.rows), file.ints("c", local.cols)
    nonzero_rows = sorted(set(local.rows))
    PR = file.ints("pr", nonzero_rows)
    x = role.argument
    z = _offsets(k, 0)
    jacobian, jsign = _JACOBIAN.get(x or "", ("", 0.0))
    target, weight = (("Ma", "wM") if role.target == "Ma" else ("F", "wF"))
    head = [f"    double f[1], f_p[{max(n_p, 1)}], f_pp[{max(n_p * n_p, 1)}], Ax[{max(k, 1)}];",
            "    FA_KERNEL(factor)(t, p, f, f_p, f_pp);", f"    const double sf = {s} * f[0];",
            _zero("Ax", k)]
    product = f"d[e] * {x}[{Cc}[e]]" if x else "d[e]"
    if nnz >= ROW_LOOP_LENGTH * max(len(nonzero_rows), 1):
        # The pattern is row-major (LocalTerm): each row's entries are one run, summed in a
        # register in the order of the entries, the same sums as accumulating into Ax[row] entry
        # by entry (the same bits), without a store and a load per entry.
        starts = np.searchsorted(np.asarray(local.rows, dtype=np.int64), nonzero_rows + [k])
        P = file.ints("ptr", starts)
        head += [f"    for (int i = 0; i < {len(nonzero_rows)}; ++i) {{", "        double sum = 0.0;",
                 f"        for (int e = {P}[i]; e < {P}[i + 1]; ++e) sum += {product};",
                 f"        Ax[{PR}[i]] = sum;", "    }"]
    else:
        head.append(f"    for (int e = 0; e < {nnz}; ++e) Ax[{R}[e]] += {product};")

    def parameter_pattern(row_offset: int) -> list[tuple[int, int]]:
        return [(row_offset + i, j) for i in nonzero_rows for j in range(n_p)]

    def parameter_values(name: str) -> list[str]:
        return [f"    for (int i = 0; i < {len(nonzero_rows)}; ++i) for (int j = 0; j < {n_p}; ++j) "
                f"{name}[i * {n_p} + j] = {s} * f_p[j] * Ax[{PR}[i]];"]

    def second(w: str, dx: str, outputs: dict[str, str]) -> list[str]:
        """``S_x`` (into ``outputs['x']``) and ``S_p`` (into ``outputs['p']``)."""
        lines = ["    double fdp = 0.0, wAx = 0.0, wAdx = 0.0;",
                 f"    for (int j = 0; j < {n_p}; ++j) fdp += f_p[j] * dp[j];",
                 f"    for (int i = 0; i < {k}; ++i) wAx += {w}[i] * Ax[i];"]
        if x:
            lines += [f"    for (int e = 0; e < {nnz}; ++e) {{",
                      f"        wAdx += {w}[{R}[e]] * d[e] * {dx}[{Cc}[e]];",
                      f"        {outputs['x']}[{Cc}[e]] += {s} * fdp * d[e] * {w}[{R}[e]];", "    }"]
        lines += [f"    for (int j = 0; j < {n_p}; ++j) {{", "        double hdp = 0.0;",
                  f"        for (int l = 0; l < {n_p}; ++l) hdp += f_pp[j * {n_p} + l] * dp[l];",
                  f"        {outputs['p']}[j] = {s} * (f_p[j] * wAdx + hdp * wAx);", "    }"]
        return lines

    rows = []
    for name in wanted:
        outputs = _OUTPUTS[name]
        patterns: dict[str, list[tuple[int, int]]] = {o: [] for o in outputs if o in _MATRICES}
        body: list[str] = []
        if name in ("residual_terms", "newton", "jacobian_terms", "parameter_terms"):
            body += head
            for o in outputs:
                if o in ("Ma", "F"):
                    body.append(f"    for (int i = 0; i < {k}; ++i) {o}[i] = {'sf * Ax[i]' if o == target else '0.0'};")
                elif o == jacobian:
                    patterns[o] = list(zip(local.rows, local.cols))
                    body.append(f"    for (int e = 0; e < {nnz}; ++e) {o}[e] = {repr(jsign)} * sf * d[e];")
                elif o == f"{target}_p":
                    patterns[o] = parameter_pattern(0)
                    body += parameter_values(o)
        elif name == "init_residual":
            body += head + [_zero("G", 3 * k),
                                 f"    for (int i = 0; i < {k}; ++i) G[{z['a']} + i] = sf * Ax[i];"]
        elif name == "init_jacobians":
            body += head
            if x:
                patterns["G_z"] = [(z["a"] + r, z[x] + c) for r, c in zip(local.rows, local.cols)]
                body.append(f"    for (int e = 0; e < {nnz}; ++e) G_z[e] = sf * d[e];")
            patterns["G_p"] = parameter_pattern(z["a"])
            body += parameter_values("G_p")
        elif name == "step_second":
            body += head + [_zero(o, k) for o in ("Sq", "Sv", "Sa")]
            body += second(weight, f"d{x}" if x else "", {"x": f"S{x}" if x else "", "p": "Sp"})
        elif name == "init_second":
            body += head + [_zero("Iz", 3 * k),
                                 f"    const double *w = wG + {z['a']};"]
            body += second("w", f"(dz + {z[x]})" if x else "", {"x": f"(Iz + {z[x]})" if x else "", "p": "Ip"})
        rows.append(_row(name, ct, patterns, body))
    return "\n".join(file.lines), rows


def _row(name: str, ct: StructuredType, patterns: dict[str, list[tuple[int, int]]], body: list[str]) -> KernelRow:
    outputs = tuple((o, _shape(o, ct.n, ct.m, ct.n_p), tuple(patterns.get(o, ())) if o in _MATRICES else ())
                    for o in _OUTPUTS[name])
    return KernelRow(name=name, args=_ARGS[name] + ("d",), outputs=outputs, numpy="",
                     c="\n".join(line for line in body if line))


def _quadratic_rows(ct: StructuredType, local: LocalQuadratic,
                    wanted: tuple[str, ...]) -> tuple[str, list[KernelRow]]:
    """The C rows of quadratic constraints (module docstring) and their file's static arrays."""
    k, m = local.k, local.m
    nj, nh = len(local.j_rows), len(local.h_rows)
    h_r = [r // k for r in local.h_rows]
    h_i = [r % k for r in local.h_rows]
    h_j = list(local.h_cols)
    file = _CFile()
    cq = _Pattern()
    CQJ = file.ints("cqj", cq.positions(local.j_rows, local.j_cols))
    CQH = file.ints("cqh", cq.positions(h_r, h_j))
    CQR, CQC = file.ints("cqr", [e[0] for e in cq.entries]), file.ints("cqc", [e[1] for e in cq.entries])
    JR, JC = file.ints("jr", local.j_rows), file.ints("jc", local.j_cols)
    HR, HI, HJ = file.ints("hr", h_r), file.ints("hi", h_i), file.ints("hj", h_j)
    ncq = len(cq.entries)
    kpat = _Pattern()
    KH = file.ints("kh", kpat.positions(h_i, h_j))
    z = _offsets(k, m)
    # G_z: twelve blocks (module docstring of the initialization rows), each (pattern
    # positions, C expression of entry e / t).
    gz = _Pattern()
    cq_rows, cq_cols = [e[0] for e in cq.entries], [e[1] for e in cq.entries]

    def block(rows, cols) -> str:
        return file.ints(f"gz{len(file.lines)}", gz.positions(rows, cols))

    def shift(values, offset):
        return [offset + v for v in values]

    blocks = [  # (positions, count, value of entry e)
        (block(h_i, h_j), nh, f"Hv[e] * mu[{HR}[e]]"),
        (block(cq_cols, shift(cq_rows, z["mu"])), ncq, "cq[e]"),
        (block(shift(cq_rows, z["mu"]), cq_cols), ncq, "cq[e]"),
        (block(shift(h_i, z["v"]), h_j), nh, f"Hv[e] * nu[{HR}[e]]"),
        (block(shift(cq_cols, z["v"]), shift(cq_rows, z["nu"])), ncq, "cq[e]"),
        (block(shift(h_r, z["nu"]), h_j), nh, f"Hv[e] * v[{HI}[e]]"),
        (block(shift(cq_rows, z["nu"]), shift(cq_cols, z["v"])), ncq, "cq[e]"),
        (block(shift(h_i, z["a"]), h_j), nh, f"Hv[e] * lam[{HR}[e]]"),
        (block(shift(cq_cols, z["a"]), shift(cq_rows, z["lam"])), ncq, "cq[e]"),
        (block(shift(h_r, z["lam"]), h_j), nh, f"Hv[e] * a[{HI}[e]]"),
        (block(shift(h_r, z["lam"]), shift(h_j, z["v"])), nh, f"2.0 * Hv[e] * v[{HI}[e]]"),
        (block(shift(cq_rows, z["lam"]), shift(cq_cols, z["a"])), ncq, "cq[e]"),
    ]
    head = [f"    const double *c0 = d, *Jv = d + {m}, *Hv = d + {m + nj};", "    (void)c0; (void)Jv; (void)Hv;",
            f"    double cq[{max(ncq, 1)}];", _zero("cq", ncq),
            f"    for (int e = 0; e < {nj}; ++e) cq[{CQJ}[e]] += Jv[e];",
            f"    for (int e = 0; e < {nh}; ++e) cq[{CQH}[e]] += Hv[e] * q[{HI}[e]];"]

    def constraint(into: str) -> list[str]:
        return [f"    for (int r = 0; r < {m}; ++r) {into}[r] = c0[r];",
                f"    for (int e = 0; e < {nj}; ++e) {into}[{JR}[e]] += Jv[e] * q[{JC}[e]];",
                f"    for (int e = 0; e < {nh}; ++e) {into}[{HR}[e]] += 0.5 * Hv[e] * q[{HI}[e]] * q[{HJ}[e]];"]

    def transposed(into: str, multipliers: str) -> list[str]:
        """``into[c] = sum_r C_q[r, c] multipliers[r]`` (``into`` zeroed by the caller)."""
        return [f"    for (int e = 0; e < {ncq}; ++e) {into}[{CQC}[e]] += cq[e] * {multipliers}[{CQR}[e]];"]

    def product(into: str, vector: str) -> list[str]:
        """``into[r] += sum_c C_q[r, c] vector[c]``."""
        return [f"    for (int e = 0; e < {ncq}; ++e) {into}[{CQR}[e]] += cq[e] * {vector}[{CQC}[e]];"]

    rows = []
    for name in wanted:
        patterns: dict[str, list[tuple[int, int]]] = {}
        body = list(head)
        outputs = _OUTPUTS[name]
        if "Ma" in outputs:
            body.append(_zero("Ma", k))
        if "F" in outputs:
            body += [_zero("F", k)] + transposed("F", "lam")
        if "C" in outputs:
            body += constraint("C")
        if "Cq" in outputs:
            patterns["Cq"] = list(cq.entries)
            body.append(f"    for (int e = 0; e < {ncq}; ++e) Cq[e] = cq[e];")
        if "K" in outputs:
            patterns["K"] = list(kpat.entries)
            body += [_zero("K", len(kpat.entries)),
                     f"    for (int e = 0; e < {nh}; ++e) K[{KH}[e]] += lam[{HR}[e]] * Hv[e];"]
        if name == "init_residual":
            body += [_zero("G", 3 * k + 3 * m)]
            body += transposed(f"(G + {z['q']})", "mu") + constraint(f"(G + {z['mu']})")
            body += transposed(f"(G + {z['v']})", "nu") + product(f"(G + {z['nu']})", "v")
            body += transposed(f"(G + {z['a']})", "lam") + product(f"(G + {z['lam']})", "a")
            body.append(f"    for (int e = 0; e < {nh}; ++e) "
                        f"G[{z['lam']} + {HR}[e]] += Hv[e] * v[{HI}[e]] * v[{HJ}[e]];")
        elif name == "init_jacobians":
            patterns["G_z"] = list(gz.entries)
            body.append(_zero("G_z", len(gz.entries)))
            for positions, count, value in blocks:
                body.append(f"    for (int e = 0; e < {count}; ++e) G_z[{positions}[e]] += {value};")
        elif name == "step_second":
            body += [_zero(o, k) for o in ("Sq", "Sv", "Sa")] + [_zero("Slam", m)]
            body += [f"    for (int e = 0; e < {nh}; ++e) {{",
                     f"        Sq[{HI}[e]] += Hv[e] * (dlam[{HR}[e]] * wF[{HJ}[e]] + wC[{HR}[e]] * dq[{HJ}[e]]);",
                     f"        Slam[{HR}[e]] += Hv[e] * wF[{HI}[e]] * dq[{HJ}[e]];", "    }"]
        elif name == "init_second":
            body += [_zero("Iz", 3 * k + 3 * m)] + _quadratic_second(z, nh, HR, HI, HJ)
        rows.append(_row(name, ct, patterns, body))
    return "\n".join(file.lines), rows


def _quadratic_second(z: dict[str, int], nh: int, HR: str, HI: str, HJ: str) -> list[str]:
    """``init_second`` of quadratic constraints: the gradient by ``z`` of ``psi = wG^T G_z dz``.

    With ``w1..w6`` the weights of ``G1..G6`` and ``dz = (dq, dmu, dv, dnu, da, dlam)``::

        I_q   = sum_r H_r (dmu_r w1 + w2_r dq + dnu_r w3 + w4_r dv + dlam_r w5 + w6_r da)
        I_mu_r = w1^T H_r dq,   I_nu_r = w3^T H_r dq,   I_lam_r = w5^T H_r dq
        I_v   = sum_r H_r (w4_r dq + 2 w6_r dv),        I_a = sum_r w6_r H_r dq
    """
    w = {b: f"wG[{z[b]} + " for b in z}
    dz = {b: f"dz[{z[b]} + " for b in z}
    r, i, j = f"{HR}[e]]", f"{HI}[e]]", f"{HJ}[e]]"
    return [f"    for (int e = 0; e < {nh}; ++e) {{",
            f"        Iz[{z['q']} + {i} += Hv[e] * ({dz['mu']}{r} * {w['q']}{j} + {w['mu']}{r} * {dz['q']}{j}"
            f" + {dz['nu']}{r} * {w['v']}{j} + {w['nu']}{r} * {dz['v']}{j} + {dz['lam']}{r} * {w['a']}{j}"
            f" + {w['lam']}{r} * {dz['a']}{j});",
            f"        Iz[{z['mu']} + {r} += Hv[e] * {w['q']}{i} * {dz['q']}{j};",
            f"        Iz[{z['nu']} + {r} += Hv[e] * {w['v']}{i} * {dz['q']}{j};",
            f"        Iz[{z['lam']} + {r} += Hv[e] * {w['a']}{i} * {dz['q']}{j};",
            f"        Iz[{z['v']} + {i} += Hv[e] * ({w['nu']}{r} * {dz['q']}{j} + 2.0 * {w['lam']}{r} * {dz['v']}{j});",
            f"        Iz[{z['a']} + {i} += Hv[e] * {w['lam']}{r} * {dz['q']}{j};", "    }"]


def structured_kernels(ct: StructuredType, second_order: bool = False) -> TypeKernels:
    """The kernels of ``ct`` (its second-order rows with ``second_order``), written from its
    pattern (module docstring): no derivation, no cache needed (a matrix term's factor is the
    only expression, a few nodes)."""
    wanted = SECOND_ROWS if second_order else EQUATION_ROWS
    local = ct.local
    factor: list[KernelRow] = []
    if isinstance(local, LocalTerm):
        preamble, rows = _term_rows(ct, local, wanted)
        factor = [_factor_row(local, ct.n_p)]
    else:
        preamble, rows = _quadratic_rows(ct, local, wanted)
    return TypeKernels(key=ct.key, kind=ct.kind, n=ct.n, m=ct.m, n_y=ct.n_y, n_p=ct.n_p, n_d=ct.n_d,
                       rows=tuple(factor + rows), structure=local.to_json(), c_preamble=preamble)


# -- numpy: dense local matrices, the reference ------------------------------------------------


def _dense(data: np.ndarray, rows, cols, shape: tuple[int, ...]) -> np.ndarray:
    """``(count,) + shape`` matrices with ``data[:, e]`` at ``(rows[e], cols[e])`` (summed)."""
    out = np.zeros((data.shape[0],) + shape)
    if len(rows):
        np.add.at(out, (slice(None), np.asarray(rows), np.asarray(cols)), data)  # type: ignore[arg-type]
    return out


def _term_functions(kernels: TypeKernels, local: LocalTerm, factor: Function) -> dict[str, Function]:
    k, n_p = kernels.n, kernels.n_p
    role = local.role
    s, x_name = role.sign, role.argument
    z = _offsets(k, 0)
    jacobian, jsign = _JACOBIAN.get(x_name or "", ("", 0.0))
    target = role.target

    def common(named: dict) -> tuple:
        A = _dense(named["d"], local.rows, local.cols, (k, k if x_name else 1))
        f, f_p, f_pp = factor(named["t"], named["p"])
        f = f[..., 0]
        if x_name:
            Ax = np.einsum("cij,...cj->...ci", A, named[x_name])
        else:
            Ax = np.broadcast_to(A[..., 0], np.shape(named["t"]) + (k,))
        return A, f, f_p, f_pp.reshape(f_pp.shape[:-1] + (n_p, n_p)), Ax

    def state_row(name: str) -> Function:
        def run(*args: np.ndarray) -> tuple[np.ndarray, ...]:
            named = dict(zip(_ARGS[name] + ("d",), args))
            A, f, f_p, _, Ax = common(named)
            batch = np.shape(named["t"])  # the instance axis included
            out = []
            for o in _OUTPUTS[name]:
                value = np.zeros(batch + _shape(o, k, 0, n_p))
                if o == target:
                    value = s * f[..., None] * Ax
                elif o == jacobian:
                    value = value + jsign * s * f[..., None, None] * A
                elif o == f"{target}_p":
                    value = s * Ax[..., :, None] * f_p[..., None, :]
                elif o == "G":
                    value[..., z["a"]:z["a"] + k] = s * f[..., None] * Ax
                elif o == "G_z" and x_name:
                    value[..., z["a"]:z["a"] + k, z[x_name]:z[x_name] + k] = s * f[..., None, None] * A
                elif o == "G_p":
                    value[..., z["a"]:z["a"] + k, :] = s * Ax[..., :, None] * f_p[..., None, :]
                out.append(np.broadcast_to(value, batch + _shape(o, k, 0, n_p)))
            return tuple(out)
        return run

    def second_row(name: str) -> Function:
        def run(*args: np.ndarray) -> tuple[np.ndarray, ...]:
            named = dict(zip(_ARGS[name] + ("d",), args))
            if name == "init_second":
                zv = named["dz"]
                w = named["wG"][..., z["a"]:z["a"] + k]
                dx = zv[..., z[x_name]:z[x_name] + k] if x_name else zv[..., :0]
            else:
                w = named["wM" if target == "Ma" else "wF"]
                dx = named[f"d{x_name}"] if x_name else w[..., :0]
            A, f, f_p, f_pp, Ax = common(named)
            dp = named["dp"]
            fdp = np.sum(f_p * dp, axis=-1)
            wAx = np.sum(w * Ax, axis=-1)
            batch = np.shape(named["t"])  # the instance axis included
            Sx = np.zeros(batch + (k,))
            wAdx = np.zeros(batch)
            if x_name:
                wAdx = np.einsum("...ci,cij,...cj->...c", w, A, dx)
                Sx = s * fdp[..., None] * np.einsum("cij,...ci->...cj", A, w)
            hdp = np.einsum("...jl,...l->...j", f_pp, dp) if n_p else np.zeros(batch + (0,))
            Sp = s * (f_p * wAdx[..., None] + hdp * wAx[..., None])
            if name == "step_second":
                zero = np.zeros(batch + (k,))
                S = {"q": zero, "v": zero, "a": zero}
                if x_name:
                    S[x_name] = Sx
                return S["q"], S["v"], S["a"], np.zeros(batch + (0,)), np.broadcast_to(Sp, batch + (n_p,))
            Iz = np.zeros(batch + (3 * k,))
            if x_name:
                Iz[..., z[x_name]:z[x_name] + k] = Sx
            return Iz, np.broadcast_to(Sp, batch + (n_p,))
        return run

    return {name: (second_row(name) if name in SECOND_ROWS else state_row(name)) for name in _OUTPUTS}


def _quadratic_functions(kernels: TypeKernels, local: LocalQuadratic) -> dict[str, Function]:
    k, m = local.k, local.m
    nj = len(local.j_rows)
    z = _offsets(k, m)
    h_r = np.asarray(local.h_rows, dtype=np.intp) // max(k, 1)
    h_i = np.asarray(local.h_rows, dtype=np.intp) % max(k, 1)

    def matrices(d: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        c0 = d[:, :m]
        J = _dense(d[:, m:m + nj], local.j_rows, local.j_cols, (m, k))
        H = np.zeros((d.shape[0], m, k, k))
        if len(h_r):
            np.add.at(H, (slice(None), h_r, h_i, np.asarray(local.h_cols)), d[:, m + nj:])  # type: ignore[arg-type]
        return c0, J, H

    def run(name: str) -> Function:
        def call(*args: np.ndarray) -> tuple[np.ndarray, ...]:
            named = dict(zip(_ARGS[name] + ("d",), args))
            c0, J, H = matrices(named["d"])
            batch = np.shape(named["t"])  # the instance axis included
            q = named["q"]
            Cq = J + np.einsum("crij,...ci->...crj", H, q)
            out: dict[str, np.ndarray] = {o: np.zeros(batch + _shape(o, k, m, 0)) for o in _OUTPUTS[name]}

            def C() -> np.ndarray:
                return (c0 + np.einsum("crj,...cj->...cr", J, q)
                        + 0.5 * np.einsum("...ci,crij,...cj->...cr", q, H, q))

            def T(y: np.ndarray) -> np.ndarray:  # C_q^T y
                return np.einsum("...crj,...cr->...cj", Cq, y)

            def P(y: np.ndarray) -> np.ndarray:  # C_q y
                return np.einsum("...crj,...cj->...cr", Cq, y)

            def Hsum(y: np.ndarray) -> np.ndarray:  # sum_r y_r H_r
                return np.einsum("...cr,crij->...cij", y, H)

            def Hrow(y: np.ndarray) -> np.ndarray:  # [y^T H_r]_r (m x k)
                return np.einsum("...ci,crij->...crj", y, H)

            def Hvec(y: np.ndarray, x: np.ndarray) -> np.ndarray:  # sum_r y_r H_r x
                return np.einsum("...cr,crij,...cj->...ci", y, H, x)

            def Hform(y: np.ndarray, x: np.ndarray) -> np.ndarray:  # [y^T H_r x]_r
                return np.einsum("...ci,crij,...cj->...cr", y, H, x)

            lam = named["lam"]
            if "F" in out:
                out["F"] = T(lam)
            if "C" in out:
                out["C"] = C()
            if "Cq" in out:
                out["Cq"] = Cq
            if "K" in out:
                out["K"] = Hsum(lam)
            if name in ("init_residual", "init_jacobians", "init_second"):
                sl = {b: slice(z[b], z[b] + (k if b in ("q", "v", "a") else m)) for b in z}
                v, a, mu, nu = named["v"], named["a"], named["mu"], named["nu"]
            if name == "init_residual":
                G = out["G"]
                G[..., sl["q"]], G[..., sl["mu"]], G[..., sl["v"]] = T(mu), C(), T(nu)
                G[..., sl["nu"]], G[..., sl["a"]] = P(v), T(lam)
                G[..., sl["lam"]] = P(a) + Hform(v, v)
            elif name == "init_jacobians":
                Gz = out["G_z"]
                CqT = np.swapaxes(Cq, -1, -2)
                for rows, cols, value in (("q", "q", Hsum(mu)), ("q", "mu", CqT), ("mu", "q", Cq),
                                          ("v", "q", Hsum(nu)), ("v", "nu", CqT), ("nu", "q", Hrow(v)),
                                          ("nu", "v", Cq), ("a", "q", Hsum(lam)), ("a", "lam", CqT),
                                          ("lam", "q", Hrow(a)), ("lam", "v", 2.0 * Hrow(v)), ("lam", "a", Cq)):
                    Gz[..., sl[rows], sl[cols]] += value
            elif name == "step_second":
                wF, wC, dq, dlam = named["wF"], named["wC"], named["dq"], named["dlam"]
                out["Sq"] = np.einsum("...cr,crij,...cj->...ci", dlam, H, wF) + Hvec(wC, dq)
                out["Slam"] = Hform(wF, dq)
            elif name == "init_second":
                wG, dz = named["wG"], named["dz"]
                w = {b: wG[..., sl[b]] for b in z}
                dd = {b: dz[..., sl[b]] for b in z}
                Iz = out["Iz"]
                Iz[..., sl["q"]] = (Hvec(dd["mu"], w["q"]) + Hvec(w["mu"], dd["q"]) + Hvec(dd["nu"], w["v"])
                                    + Hvec(w["nu"], dd["v"]) + Hvec(dd["lam"], w["a"]) + Hvec(w["lam"], dd["a"]))
                Iz[..., sl["mu"]] = Hform(w["q"], dd["q"])
                Iz[..., sl["nu"]] = Hform(w["v"], dd["q"])
                Iz[..., sl["lam"]] = Hform(w["a"], dd["q"])
                Iz[..., sl["v"]] = Hvec(w["nu"], dd["q"]) + 2.0 * Hvec(w["lam"], dd["v"])
                Iz[..., sl["a"]] = Hvec(w["lam"], dd["q"])
            return tuple(np.broadcast_to(out[o], batch + _shape(o, k, m, 0)) for o in _OUTPUTS[name])
        return call

    return {name: run(name) for name in _OUTPUTS}


def numpy_functions(kernels: TypeKernels) -> dict[str, Function]:
    """The numpy functions of a structured type's rows (module docstring)."""
    assert kernels.structure is not None
    local = local_from_json(kernels.structure)
    if isinstance(local, LocalTerm):
        factor_row = kernels.row("factor")
        factor = load_function(factor_row.name, factor_row.numpy, {}, {})
        return _term_functions(kernels, local, factor)
    return _quadratic_functions(kernels, local)


def kernel_functions(kernels: TypeKernels) -> dict[str, Function]:
    """The numpy function of every row of a type: printed (a derived type) or written from
    its pattern (a structured one)."""
    if kernels.structure is not None:
        return numpy_functions(kernels)
    return {row.name: load_function(row.name, row.numpy, {}, {}) for row in kernels.rows if row.numpy}
