"""Component types of structured terms: a matrix term or quadratic constraints in local form.

:func:`.partition.partition` turns every structured item of a model
(:mod:`fmi_adjoint.structured`) into one instance of a :class:`StructuredType`, as it turns
an expression contribution into an instance of a :class:`~.partition.ComponentType`.  The
type holds what is the same for every instance of it: the kind of term, the local sparsity
pattern, and (for a matrix term) the factor in local parameter slots ``p_j``; an instance
holds the numbers (the matrix's values, the constants of quadratic rows) as its data slots.
Two flexible bodies meshed alike are one type.  The kernels are written from the pattern,
not derived (:mod:`.structured_kernels`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import sympy as sp

from ..cache import fingerprint
from ..equations import canonical_text
from ..structured import ROLES, TermRole

__all__ = ["LocalQuadratic", "LocalTerm", "StructuredType"]


@dataclasses.dataclass(frozen=True, eq=False)
class LocalTerm:
    """``sign f(p) A x`` over ``k`` local coordinates (:class:`fmi_adjoint.structured.MatrixTerm`).

    ``rows``, ``cols``: the pattern of ``A`` in row-major order (``cols`` all 0 for a load);
    the instance's data slots are its values in that order.  ``factor``: in the local
    parameter symbols ``p_0 ..``.
    """

    role: TermRole
    k: int
    rows: tuple[int, ...]
    cols: tuple[int, ...]
    factor: sp.Expr

    def to_json(self) -> dict:
        return {"form": "term", "role": self.role.name, "k": self.k, "rows": list(self.rows), "cols": list(self.cols)}


@dataclasses.dataclass(frozen=True, eq=False)
class LocalQuadratic:
    """``C_r = c0_r + J0_r q + 1/2 q^T H_r q`` (:class:`fmi_adjoint.structured.QuadraticConstraints`)
    over ``k`` local coordinates and ``m`` local rows.

    ``j_rows``, ``j_cols``: the pattern of ``J0``; ``h_rows`` (``r k + i``), ``h_cols``
    (``j``): the pattern of the stacked symmetric ``H_r``.  The data slots are ``c0`` (``m``),
    the values of ``J0``, then those of ``H``.
    """

    k: int
    m: int
    j_rows: tuple[int, ...]
    j_cols: tuple[int, ...]
    h_rows: tuple[int, ...]
    h_cols: tuple[int, ...]

    def to_json(self) -> dict:
        return {"form": "quadratic", "k": self.k, "m": self.m, "j_rows": list(self.j_rows),
                "j_cols": list(self.j_cols), "h_rows": list(self.h_rows), "h_cols": list(self.h_cols)}


def local_from_json(data: dict) -> LocalTerm | LocalQuadratic:
    """The local form of a type as stored with its kernels (the factor is not stored: the
    kernels carry it printed)."""
    ints = lambda name: tuple(int(x) for x in data[name])  # noqa: E731
    if data["form"] == "term":
        return LocalTerm(role=ROLES[str(data["role"])], k=int(data["k"]), rows=ints("rows"), cols=ints("cols"),
                         factor=sp.Integer(1))
    if data["form"] == "quadratic":
        return LocalQuadratic(k=int(data["k"]), m=int(data["m"]), j_rows=ints("j_rows"), j_cols=ints("j_cols"),
                              h_rows=ints("h_rows"), h_cols=ints("h_cols"))
    raise ValueError("unknown structured form")


@dataclasses.dataclass(frozen=True, eq=False)
class StructuredType:
    """A component type whose kernels are written from its pattern (module docstring).

    The attributes the assembly reads are those of :class:`~.partition.ComponentType`
    (``kind``, ``n``, ``m``, ``n_y``, ``n_p``, ``n_d``, ``key``); ``local`` is the term.
    """

    kind: str
    n: int
    m: int
    n_y: int
    n_p: int
    n_d: int
    local: LocalTerm | LocalQuadratic
    key: str

    @property
    def nodes(self) -> int:
        """What the type would be as expressions (its non-zeros), for ``Partition.size``."""
        local = self.local
        if isinstance(local, LocalTerm):
            return 3 * len(local.rows)
        return 3 * (len(local.j_rows) + len(local.h_rows)) + local.m

    @classmethod
    def term(cls, role: TermRole, k: int, rows: np.ndarray, cols: np.ndarray, factor: sp.Expr,
             n_p: int) -> StructuredType:
        local = LocalTerm(role, k, tuple(int(r) for r in rows), tuple(int(c) for c in cols), factor)
        key = fingerprint("structured", "term", repr((role.name, k, n_p)), np.asarray(rows, np.int64).tobytes(),
                          np.asarray(cols, np.int64).tobytes(), canonical_text(factor))
        return cls("equations", k, 0, 0, n_p, len(local.rows), local, key)

    @classmethod
    def quadratic(cls, k: int, m: int, j_rows: np.ndarray, j_cols: np.ndarray, h_rows: np.ndarray,
                  h_cols: np.ndarray) -> StructuredType:
        def ints(values: np.ndarray) -> tuple[int, ...]:
            return tuple(int(x) for x in values)

        local = LocalQuadratic(k, m, ints(j_rows), ints(j_cols), ints(h_rows), ints(h_cols))
        key = fingerprint("structured", "quadratic", repr((k, m)),
                          *(np.asarray(a, np.int64).tobytes() for a in (j_rows, j_cols, h_rows, h_cols)))
        return cls("equations", k, m, 0, 0, m + len(local.j_rows) + len(local.h_rows), local, key)
