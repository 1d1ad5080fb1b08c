"""Model Exchange structure of an exported FMU: the state dependencies of ``<ModelStructure>``.

The same rule as ``fa_me_dependencies`` in ``fmi/fa_fmu_me.c`` (the Model Exchange core), read
off the sparsity patterns the generated ``model.c`` prints (``model_header.int_array``), so that
the model description is written at export time without running the binary.  The state is
x = (q, v), its derivative xdot = (v, a), where (a, lambda) solve the index-1 system
``K (a, lambda) = -H`` with ``K = [[M, C_q^T], [C_q, 0]]`` (the header of ``fa_fmu_me.h``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

__all__ = ["MeStructure", "generated_patterns", "me_structure", "nnz_sizes", "unsupported_coordinates"]

_ARRAY = re.compile(r"^const int fa_(\w+)_(row|col)\[\d+\] = \{([^}]*)\};$", re.M)
_NNZ = re.compile(r"^#define FA_NNZ_(\w+) (\d+)$", re.M)

Patterns = dict[str, list[tuple[int, int]]]


@dataclass(frozen=True)
class MeStructure:
    """Boolean structural dependencies: d xdot/dx (2n x 2n), d xdot/dp (2n x n_p), dy/dx
    (n_y x 2n), dy/dp (n_y x n_p)."""

    xdot_x: np.ndarray
    xdot_p: np.ndarray
    y_x: np.ndarray
    y_p: np.ndarray


def nnz_sizes(model_h: str) -> dict[str, int]:
    """{matrix: number of structural non-zeros} from the ``FA_NNZ_<name>`` lines of model.h."""
    return {name: int(value) for name, value in _NNZ.findall(model_h)}


def generated_patterns(model_c: str, model_h: str) -> Patterns:
    """{matrix: [(row, col)]} from the text of the generated model.c and model.h."""
    arrays: dict[tuple[str, str], list[int]] = {}
    for name, axis, body in _ARRAY.findall(model_c):
        arrays[name, axis] = [int(v) for v in body.split(",")]
    return {name: list(zip(arrays[name, "row"][:nnz], arrays[name, "col"][:nnz]))
            for name, nnz in nnz_sizes(model_h).items() if (name, "row") in arrays}


def unsupported_coordinates(patterns: Patterns, names: list[str]) -> list[str]:
    """The coordinates with neither mass nor a constraint (``fa_me_supported``: they make K singular)."""
    held = {k for r, c in patterns["M"] for k in (r, c)} | {c for _, c in patterns["Cq"]}
    return [name for k, name in enumerate(names) if k not in held]


def me_structure(patterns: Patterns, n: int, m: int, n_p: int, n_y: int) -> MeStructure:
    """The dependencies of xdot and y on x and p: ``(K^-1)[i, r]`` is structurally non-zero iff
    the column matched to row r is reachable from column i through "column c -> the columns
    of the row matched to c", for a perfect matching of K's pattern (Duff, ACM TOMS 7, 1981)."""
    nk, nx, h_row = n + m, 2 * n, 2 * n + 2 * m
    rows: list[set[int]] = [set() for _ in range(nk)]
    for r, c in patterns["M"]:
        rows[r].add(c)
    for r, c in patterns["Cq"]:
        rows[n + r].add(c)
        rows[c].add(n + r)
    row_of = [-1] * nk

    def augment(r: int, seen: set[int]) -> bool:
        for c in sorted(rows[r]):
            if c not in seen:
                seen.add(c)
                if row_of[c] < 0 or augment(row_of[c], seen):
                    row_of[c] = r
                    return True
        return False

    for r in range(nk):
        if not augment(r, set()):
            raise ValueError("the matrix [[M, C_q^T], [C_q, 0]] is structurally singular")
    col_of = {r: c for c, r in enumerate(row_of)}

    def x_index(c: int) -> int:
        return c if c < n else c - m if n + m <= c < 2 * n + m else -1

    h_x, h_p = np.zeros((nk, nx), bool), np.zeros((nk, n_p), bool)
    for r, c in patterns["G_z"]:
        if r >= h_row and x_index(c) >= 0:
            h_x[col_of[r - h_row], x_index(c)] = True
    for r, c in patterns["G_p"]:
        if r >= h_row:
            h_p[col_of[r - h_row], c] = True
    w_x, w_p = np.zeros((nk, nx), bool), np.zeros((nk, n_p), bool)
    for i in range(nk):
        seen, queue = {i}, [i]
        while queue:
            c = queue.pop()
            w_x[i] |= h_x[c]
            w_p[i] |= h_p[c]
            for c2 in rows[row_of[c]]:
                if c2 not in seen:
                    seen.add(c2)
                    queue.append(c2)
    xdot_x, xdot_p = np.zeros((nx, nx), bool), np.zeros((nx, n_p), bool)
    xdot_x[np.arange(n), n + np.arange(n)] = True
    xdot_x[n:], xdot_p[n:] = w_x[:n], w_p[:n]
    y_x, y_p = np.zeros((n_y, nx), bool), np.zeros((n_y, n_p), bool)
    for r, c in patterns.get("Y_q", ()):
        y_x[r, c] = True
    for r, c in patterns.get("Y_v", ()):
        y_x[r, n + c] = True
    for r, c in patterns.get("Y_p", ()):
        y_p[r, c] = True
    for r, c in patterns.get("Y_a", ()):
        y_x[r] |= w_x[c]
        y_p[r] |= w_p[c]
    for r, c in patterns.get("Y_lam", ()):
        y_x[r] |= w_x[n + c]
        y_p[r] |= w_p[n + c]
    return MeStructure(xdot_x, xdot_p, y_x, y_p)
