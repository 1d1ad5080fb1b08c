"""The scatter plan: where each instance's local values go in the model's vectors and matrices.

Classical finite-element assembly.  Every output of a kernel row has an axis *kind* per
dimension, and every instance an index array per kind (:func:`index_array`):

==========  =====================================================================
``coord``   the instance's coordinates (``q, v, a``; the rows of ``M a``, ``F``)
``lam``     its multipliers (its own constraint rows, or those an output reads)
``out``     its output rows
``param``   its parameter slots
``data``    its data slots (read from the instance, never scattered)
``z``       the unknowns ``z = (q, mu, v, nu, a, lambda)`` of the consistent initialization
``zrow``    the rows of ``G``: as ``z``, weighted by ``1 - fixed`` in the two projection
            blocks (``G1 = (q - q0) + free_q C_q^T mu``, ``G3`` alike, :mod:`fmi_adjoint.compiled`)
==========  =====================================================================

An output ``X`` of the model is then ``X[i, j] = sum over instances and local entries (r, c)
with index(r) = i, index(c) = j of weight(r) X_local[r, c]``; arguments are gathered through
the same arrays (the data slots ``d`` read the instance's numbers).
:data:`GLOBAL_FUNCTIONS` lists the model's functions (the rows of
:func:`fmi_adjoint.equations.function_table` and :func:`~fmi_adjoint.equations.second_order_table`)
with the kernel rows that feed them; the initial guesses ``q0(p), v0(p)`` and their
derivatives are one small function of the whole model (:func:`guess_kernels`), added to the
projection rows of ``G`` as ``q - q0``, ``v - v0``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import sympy as sp

from ..cache import BuildCache, fingerprint, source_fingerprint
from ..calculus import Differentiator
from ..equations import (GUESS_ARGS, INIT_ARGS, SECOND_INIT_ARGS, SECOND_STEP_ARGS, STATE_ARGS, GeneratedFunction,
                         canonical_text, jacobian)
from ..errors import ModelError
from .kernels import TypeKernels, print_rows
from .partition import Instance, Partition

__all__ = ["AXES", "GLOBAL_FUNCTIONS", "GROUP_KIND", "GlobalFunction", "PlanSizes", "guess_kernels", "index_array",
           "row_weights"]

#: Axis kinds of every kernel output (module docstring).
AXES: dict[str, tuple[str, ...]] = {
    "Ma": ("coord",), "F": ("coord",), "C": ("lam",),
    "M": ("coord", "coord"), "JM": ("coord", "coord"), "K": ("coord", "coord"), "JV": ("coord", "coord"),
    "Cq": ("lam", "coord"),
    "Ma_p": ("coord", "param"), "F_p": ("coord", "param"), "C_p": ("lam", "param"),
    "y": ("out",), "Y_q": ("out", "coord"), "Y_v": ("out", "coord"), "Y_a": ("out", "coord"),
    "Y_lam": ("out", "lam"), "Y_p": ("out", "param"),
    "G": ("zrow",), "G_z": ("zrow", "z"), "G_p": ("zrow", "param"),
    "Sq": ("coord",), "Sv": ("coord",), "Sa": ("coord",), "Slam": ("lam",), "Sp": ("param",),
    "Iz": ("z",), "Ip": ("param",),
}

#: Axis kind of every argument group (``t`` is a scalar; ``wG`` is weighted like ``G``'s rows).
GROUP_KIND: dict[str, str] = {
    "q": "coord", "v": "coord", "a": "coord", "lam": "lam", "mu": "lam", "nu": "lam", "p": "param",
    "wM": "coord", "wF": "coord", "wC": "lam", "wY": "out", "dq": "coord", "dv": "coord", "da": "coord",
    "dlam": "lam", "dp": "param", "wG": "zrow", "dz": "z", "d": "data",
}


@dataclasses.dataclass(frozen=True)
class GlobalFunction:
    """One function of the model: its arguments, outputs, and the kernel rows that feed it.

    ``sources`` maps a type kind (``equations``, ``outputs``) to the kernel row it calls; the
    outputs of a kernel row are matched to the model's by name.  ``numpy=False``: C only.
    """

    name: str
    args: tuple[str, ...]
    outputs: tuple[str, ...]
    sources: tuple[tuple[str, str], ...]
    numpy: bool = True
    second_order: bool = False


#: The model's functions (the names of :class:`fmi_adjoint.compiled.CompiledModel` and of the C
#: engine's ``fa_<name>``); ``init_guess`` is :func:`guess_kernels`' own.
GLOBAL_FUNCTIONS: tuple[GlobalFunction, ...] = (
    GlobalFunction("residual_terms", STATE_ARGS, ("Ma", "F", "C"), (("equations", "residual_terms"),)),
    GlobalFunction("newton", STATE_ARGS, ("Ma", "F", "C", "M", "JM", "K", "JV", "Cq"), (("equations", "newton"),),
                   numpy=False),
    GlobalFunction("jacobian_terms", STATE_ARGS, ("M", "JM", "K", "JV", "Cq"), (("equations", "jacobian_terms"),)),
    GlobalFunction("parameter_terms", STATE_ARGS, ("Ma_p", "F_p", "C_p"), (("equations", "parameter_terms"),)),
    GlobalFunction("outputs", STATE_ARGS, ("y",), (("outputs", "outputs"),)),
    GlobalFunction("output_jacobians", STATE_ARGS, ("Y_q", "Y_v", "Y_a", "Y_lam", "Y_p"),
                   (("outputs", "output_jacobians"),)),
    GlobalFunction("init_residual", INIT_ARGS, ("G",), (("equations", "init_residual"),)),
    GlobalFunction("init_jacobians", INIT_ARGS, ("G_z", "G_p"), (("equations", "init_jacobians"),)),
    GlobalFunction("step_second", SECOND_STEP_ARGS, ("Sq", "Sv", "Sa", "Slam", "Sp"),
                   (("equations", "step_second"), ("outputs", "step_second")), second_order=True),
    GlobalFunction("init_second", SECOND_INIT_ARGS, ("Iz", "Ip"), (("equations", "init_second"),), second_order=True),
)


@dataclasses.dataclass(frozen=True)
class PlanSizes:
    """The model's sizes and the projection weights (``1 - fixed``) of its coordinates."""

    n: int
    m: int
    n_y: int
    n_p: int
    free_q: tuple[float, ...]
    free_v: tuple[float, ...]

    def size(self, kind: str) -> int:
        return {"coord": self.n, "lam": self.m, "out": self.n_y, "param": self.n_p,
                "z": 3 * self.n + 3 * self.m, "zrow": 3 * self.n + 3 * self.m}[kind]

    @classmethod
    def of(cls, part: Partition) -> PlanSizes:
        coordinates = part.model.all_coordinates
        return cls(n=len(part.parsed.q), m=len(part.parsed.lam), n_y=len(part.parsed.outputs), n_p=len(part.parsed.p),
                   free_q=tuple(0.0 if c.fixed_position else 1.0 for c in coordinates),
                   free_v=tuple(0.0 if c.fixed_velocity else 1.0 for c in coordinates))


def index_array(kind: str, instance: Instance, sizes: PlanSizes) -> tuple[int, ...]:
    """The model index of each local entry of axis ``kind`` of ``instance`` (``-1``: none)."""
    if kind == "coord":
        return instance.coordinates
    if kind == "lam":
        return instance.multipliers
    if kind == "out":
        return instance.outputs
    if kind == "param":
        return instance.parameters
    if kind in ("z", "zrow"):
        n, m = sizes.n, sizes.m
        c, k = instance.coordinates, instance.multipliers
        return (*c, *(n + j for j in k), *(n + m + i for i in c), *(2 * n + m + j for j in k),
                *(2 * n + 2 * m + i for i in c), *(3 * n + 2 * m + j for j in k))
    raise ValueError(kind)


def row_weights(kind: str, instance: Instance, sizes: PlanSizes) -> tuple[float, ...]:
    """The weight of each local entry of axis ``kind`` (module docstring: only ``zrow`` has any)."""
    length = len(index_array(kind, instance, sizes))
    if kind != "zrow":
        return (1.0,) * length
    c, k = instance.coordinates, instance.multipliers
    ones = (1.0,) * len(k)
    return (*(sizes.free_q[i] for i in c), *ones, *(sizes.free_v[i] for i in c), *ones, *(1.0,) * len(c), *ones)


def _guess_rows(part: Partition) -> tuple[tuple[GeneratedFunction, ...], dict]:
    """``init_guess (q0, v0)``, ``guess_jacobians (q0_p, v0_p)`` and ``guess_second (Gp)``, the
    gradient over ``p`` of ``-wG_q^T q0_p dp - wG_v^T v0_p dp`` (the part of ``init_second``
    the guesses give)."""
    parsed = part.parsed
    n, m, n_p = len(parsed.q), len(parsed.lam), len(parsed.p)
    wG = tuple(sp.Symbol(f"wG_{k}", real=True) for k in range(3 * n + 3 * m))
    dp = tuple(sp.Symbol(f"dp_{k}", real=True) for k in range(n_p))
    q0, v0 = sp.Matrix(parsed.q0), sp.Matrix(parsed.v0)
    q0_p, v0_p = jacobian(q0, parsed.p), jacobian(v0, parsed.p)
    # Gp_j = d psi / d p_j = -sum_(i,k) wG_i dp_k d(x0_p[i, k]) / d p_j over the non-zero
    # entries of q0_p and v0_p: formed entry by entry, without the products of the 1 x n and
    # n x n_p matrices (dense intermediates that made this the slowest part of a lattice's
    # build, issue 24).
    terms: list[list[sp.Expr]] = [[] for _ in range(n_p)]
    position = {s: j for j, s in enumerate(parsed.p)}
    calculus = Differentiator()
    for block, offset in ((q0_p, 0), (v0_p, n + m)):
        for (i, k), entry in block.todok().items():
            for symbol_j, derivative in calculus.derivatives(entry, position).items():
                terms[position[symbol_j]].append(-wG[offset + i] * derivative * dp[k])
    Gp = sp.Matrix([sp.Add(*t) for t in terms]) if n_p else sp.zeros(0, 1)
    groups = {"t": parsed.t, "p": parsed.p, "wG": wG, "dp": dp}
    rows = (GeneratedFunction("init_guess", GUESS_ARGS, (("q0", q0, True), ("v0", v0, True))),
            GeneratedFunction("guess_jacobians", GUESS_ARGS, (("q0_p", q0_p, False), ("v0_p", v0_p, False))),
            GeneratedFunction("guess_second", ("t", "p", "wG", "dp"), (("Gp", Gp, True),)))
    return rows, groups


def guess_kernels(part: Partition, cache: BuildCache) -> TypeKernels:
    """The printed guess functions of the model (:func:`_guess_rows`), through the build cache."""
    parsed = part.parsed
    n, m, n_p = len(parsed.q), len(parsed.lam), len(parsed.p)
    key = fingerprint("guess", canonical_text((parsed.q0, parsed.v0)), repr((n, m, n_p)), source_fingerprint(),
                      f"sympy {sp.__version__}")

    def build(folder: Path) -> None:
        rows, groups = _guess_rows(part)
        kernels = TypeKernels(key=key, kind="guess", n=n, m=m, n_y=0, n_p=n_p, n_d=0, rows=print_rows(rows, groups))
        (folder / "kernels.json").write_text(json.dumps(kernels.to_json()))

    entry, files = cache.read("component", key, build, ("kernels.json",))
    try:
        return TypeKernels.from_json(json.loads(files["kernels.json"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise ModelError(f"the build cache entry {entry} of the initial guesses is unreadable ({exc}); run "
                         "'fmi-adjoint cache clear'.") from None

