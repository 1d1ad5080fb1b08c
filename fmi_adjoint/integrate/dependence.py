"""Which constraints are dependent: a rank-revealing factorization of ``C_q`` for messages.

A singular initialization system or step iteration matrix of an index-3 DAE is most often a
constraint Jacobian ``C_q`` without full row rank: redundant constraints (the same condition
written twice, a closed loop constrained once too often), or constraints left acting on
coordinates that are all held by ``fixed_position``/``fixed_velocity`` (over-fixed).  The
position projection of the initialization (:mod:`fmi_adjoint.compiled`) solves
``[[I, F C_q^T], [C_q, 0]]`` with ``F`` selecting the free coordinates; eliminating the
positions leaves ``C_q F C_q^T``, singular exactly when the rows of ``C_q`` restricted to the
free columns are dependent.  The step matrix ``[[S, C_q^T], [C_q, 0]]`` needs the full
``C_q`` to have full row rank (Lauss et al. 2018, eq. (16)).

The rank comes from a QR factorization with column pivoting of ``C_q^T`` (Golub & Van Loan,
*Matrix Computations*, Sec. 5.4.1): ``C_q^T P = Q R`` with ``|R_00| >= |R_11| >= ...``; the
pivot order takes independent rows first, the rank is the number of diagonal entries above
:data:`DEPENDENCE_RTOL` times the largest, and each later row is expressed by the independent
ones through ``R_11^{-1} R_12``, which names the rows it depends on.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DEPENDENCE_RTOL", "dependent_rows", "describe_dependence"]

#: A diagonal entry of ``R`` below this fraction of the largest counts as zero (rank).  Well
#: above round-off (1e-16 relative: exactly dependent rows give ~1e-16), well below the
#: conditioning of a usable constraint set (a four-bar a few degrees from its dead point:
#: ~1e-2).
DEPENDENCE_RTOL = 1e-9
#: A coefficient of the combination below this fraction of the largest is left unnamed.
_COEFFICIENT_RTOL = 1e-8


def dependent_rows(A: np.ndarray, rtol: float = DEPENDENCE_RTOL) -> tuple[int, list[tuple[int, tuple[int, ...]]]]:
    """Rank of ``A`` and its dependent rows.

    Returns ``(rank, [(row, rows it combines), ...])``: each dependent row with the
    independent rows whose combination it is (empty for a row that is zero: a condition on
    no free coordinate).  Row indices are ``A``'s.
    """
    A = np.asarray(A, dtype=float)
    m = A.shape[0]
    if m == 0:
        return 0, []
    if A.shape[1] == 0 or not np.any(A):
        return 0, [(j, ()) for j in range(m)]
    import scipy.linalg  # noqa: PLC0415 (on use: scipy.linalg is 0.1 s of the command line's start)

    _, R, P = scipy.linalg.qr(A.T, mode="economic", pivoting=True)
    diagonal = np.abs(np.diag(R))
    rank = int(np.sum(diagonal > rtol * diagonal[0]))
    dependent: list[tuple[int, tuple[int, ...]]] = []
    for k in range(rank, m):
        x = scipy.linalg.solve_triangular(R[:rank, :rank], R[:rank, k]) if rank else np.zeros(0)
        biggest = float(np.abs(x).max()) if x.size else 0.0
        partners = tuple(sorted(int(P[i]) for i in np.flatnonzero(np.abs(x) > _COEFFICIENT_RTOL * biggest)))
        dependent.append((int(P[k]), partners if biggest > 0 else ()))
    return rank, sorted(dependent)


def _listed(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _quoted(names: list[str]) -> str:
    return _listed([f"'{name}'" for name in names])


def describe_dependence(Cq: np.ndarray, constraint_labels: tuple[str, ...], coordinate_names: tuple[str, ...],
                        fixed: tuple[bool, ...] | None = None, flag: str = "fixed_position",
                        rtol: float = DEPENDENCE_RTOL) -> str | None:
    """The dependent constraints of ``Cq`` named, with the fix; None if ``Cq`` has full row rank.

    ``constraint_labels`` name the rows (``constraint 'c1'``, ``the prescribed motion of
    'x'``).  With ``fixed`` (one flag per coordinate, the initialization's ``flag``), the rows
    restricted to the free coordinates are checked too: rows that are independent on all
    coordinates but dependent on the free ones are over-fixed, and the message names the
    held coordinates to release.
    """
    Cq = np.asarray(Cq, dtype=float)
    m, n = Cq.shape
    if m == 0:
        return None
    rank, dependent = dependent_rows(Cq, rtol)
    if dependent:
        parts = []
        for row, partners in dependent:
            if partners:
                parts.append(f"{constraint_labels[row]} is a combination of "
                             f"{_listed([constraint_labels[k] for k in partners])}")
            else:
                parts.append(f"{constraint_labels[row]} has a zero Jacobian row (it constrains no coordinate there)")
        first = dependent[0]
        involved = [constraint_labels[k] for k in (*first[1], first[0])]
        fix = (f"Remove or relax {involved[0]}" if len(involved) == 1 else
               f"Remove or relax one of {_listed(involved)} (e.g. {constraint_labels[first[0]]})")
        return (f"the constraints are dependent (C_q has rank {rank} for {m} rows; QR with column pivoting, "
                f"relative tolerance {rtol:g}): {'; '.join(parts)}. {fix}")
    if fixed is None or not any(fixed):
        return None
    free = [k for k in range(n) if not fixed[k]]
    rank, dependent = dependent_rows(Cq[:, free], rtol)
    if not dependent:
        return None
    parts = []
    release: list[str] = []
    for row, partners in dependent:
        rows = (*partners, row)
        held = [coordinate_names[k] for k in range(n) if fixed[k] and np.any(Cq[list(rows), k] != 0)]
        release += [name for name in held if name not in release]
        if partners:
            parts.append(f"{constraint_labels[row]} is a combination of "
                         f"{_listed([constraint_labels[k] for k in partners])} on the free coordinates")
        else:
            parts.append(f"{constraint_labels[row]} acts only on held coordinates")
    first = dependent[0]
    return (f"the coordinates marked {flag} ({_quoted(release)}) over-fix the constraints (with them held, "
            f"C_q has rank {rank} for {m} rows on the free coordinates; QR with column pivoting, relative "
            f"tolerance {rtol:g}): {'; '.join(parts)}. Remove {flag} from {'one of ' if len(release) > 1 else ''}"
            f"{_quoted(release)}, or remove or relax {constraint_labels[first[0]]}")
