"""The model's numpy functions, assembled from the kernels of its component types.

:class:`AssembledModel` holds what a build leaves (:class:`AssemblyPayload`: the sizes, the
instances, the printed kernels of each type and of the initial guesses; JSON, no sympy) and
returns the functions of :class:`fmi_adjoint.compiled.CompiledModel` and
:class:`~fmi_adjoint.compiled.SecondOrder` with the same calling convention as the
whole-system ones (every state argument may carry leading batch axes, ``t`` gives the batch
shape, ``p`` is shared).  Each call gathers every type's instances' local arguments through
their index arrays (the instance axis becomes one more batch axis of the type's vectorized
kernel), evaluates the kernel once per type, and scatters the local values with one sparse
product per output (:mod:`.plan`).  This is the Python engine's reference implementation of
the assembly the C engine does in C (:mod:`fmi_adjoint.native.model_code`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import scipy.sparse as sps

from ..codegen import load_function
from .kernels import TypeKernels
from .partition import Instance
from .structured_kernels import kernel_functions
from .plan import AXES, GLOBAL_FUNCTIONS, GROUP_KIND, GlobalFunction, PlanSizes, index_array, row_weights

__all__ = ["AssembledModel", "AssemblyPayload"]

Function = Callable[..., tuple[np.ndarray, ...]]


@dataclasses.dataclass(frozen=True)
class AssemblyPayload:
    """What an assembled build stores: sizes, instances, kernels (JSON-serializable)."""

    sizes: PlanSizes
    instances: tuple[Instance, ...]
    types: tuple[TypeKernels, ...]
    guess: TypeKernels

    def to_json(self) -> dict:
        return {"sizes": dataclasses.asdict(self.sizes),
                "instances": [[i.type, list(i.coordinates), list(i.multipliers), list(i.outputs), list(i.parameters),
                               list(i.data)] for i in self.instances],
                "types": [t.to_json() for t in self.types], "guess": self.guess.to_json()}

    @classmethod
    def from_json(cls, data: dict) -> AssemblyPayload:
        s = data["sizes"]
        sizes = PlanSizes(n=int(s["n"]), m=int(s["m"]), n_y=int(s["n_y"]), n_p=int(s["n_p"]),
                          free_q=tuple(float(x) for x in s["free_q"]), free_v=tuple(float(x) for x in s["free_v"]))
        instances = tuple(Instance(type=int(t), coordinates=tuple(map(int, c)), multipliers=tuple(map(int, k)),
                                   outputs=tuple(map(int, o)), parameters=tuple(map(int, p)),
                                   data=tuple(map(float, d)))
                          for t, c, k, o, p, d in data["instances"])
        types = tuple(TypeKernels.from_json(t) for t in data["types"])
        for instance in instances:
            ct = types[instance.type] if 0 <= instance.type < len(types) else None
            if ct is None or (len(instance.coordinates), len(instance.multipliers), len(instance.parameters),
                              len(instance.data)) != (ct.n, ct.m, ct.n_p, ct.n_d):
                raise ValueError("an instance does not match its type")
        return cls(sizes=sizes, instances=instances, types=types, guess=TypeKernels.from_json(data["guess"]))


class _Group:
    """The instances of one type: index arrays, data, kernels, scatter matrices."""

    def __init__(self, kernels: TypeKernels, instances: list[Instance], sizes: PlanSizes):
        self.kernels = kernels
        self.count = len(instances)
        self.sizes = sizes
        kinds = ("coord", "lam", "out", "param", "z", "zrow")
        self.index = {kind: np.array([index_array(kind, i, sizes) for i in instances], dtype=np.intp
                                     ).reshape(self.count, -1) for kind in kinds}
        self.zweight = np.array([row_weights("zrow", i, sizes) for i in instances], dtype=float
                                ).reshape(self.count, -1)
        self.data = np.array([i.data for i in instances], dtype=float).reshape(self.count, kernels.n_d)
        self.functions = kernel_functions(kernels)
        self.rows = {row.name: row for row in kernels.rows}
        self._scatter: dict[str, sps.csr_array] = {}
        #: Their transposes, kept: ``S.T`` is a new array object at every call (half the time of a
        #: Python-engine run of engine_on_mounts went into making them, 509 000 calls).
        self._scatter_t: dict[str, sps.sparray] = {}

    def gather(self, group: str, value: np.ndarray | None) -> np.ndarray:
        kind = GROUP_KIND[group]
        if kind == "data":
            return self.data
        index = self.index[kind]
        value = np.asarray(value, dtype=float)
        if index.shape[1] == 0:
            return np.zeros(value.shape[:-1] + index.shape)
        valid = index >= 0
        taken = value[..., np.where(valid, index, 0)]
        if kind == "zrow":
            return taken * self.zweight
        return taken

    def scatter_matrix(self, name: str, shape: tuple[int, ...]) -> sps.csr_array:
        """``S`` with ``global_flat = local_flat @ S`` for output ``name`` (local ``shape``)."""
        known = self._scatter.get(name)
        if known is not None:
            return known
        axes = AXES[name]
        rows = self.index[axes[0]]
        weight = self.zweight if axes[0] == "zrow" else np.ones(rows.shape)
        size = self.sizes.size(axes[0])
        if len(axes) == 1:
            target = rows
            weights = weight
        else:
            cols = self.index[axes[1]]
            width = self.sizes.size(axes[1])
            target = np.where((rows[:, :, None] >= 0) & (cols[:, None, :] >= 0),
                              rows[:, :, None] * width + cols[:, None, :], -1)
            weights = np.broadcast_to(weight[:, :, None], target.shape)
            size *= width
        flat_target = target.reshape(-1)
        flat_weight = np.asarray(weights, dtype=float).reshape(-1)
        keep = (flat_target >= 0) & (flat_weight != 0.0)
        local = np.arange(flat_target.size)[keep]
        matrix = sps.csr_array((flat_weight[keep], (local, flat_target[keep])), shape=(flat_target.size, size))
        self._scatter[name] = matrix
        return matrix

    def add_into(self, out: np.ndarray, name: str, value: np.ndarray, batch: tuple[int, ...]) -> None:
        local_shape = value.shape[len(batch) + 1:]
        matrix = self.scatter_matrix(name, local_shape)
        if matrix.shape[0] == 0 or matrix.shape[1] == 0:
            return
        flat = np.broadcast_to(value, batch + (self.count,) + local_shape).reshape(-1, matrix.shape[0])
        transposed = self._scatter_t.get(name)
        if transposed is None:
            transposed = self._scatter_t[name] = matrix.T
        out.reshape(-1, matrix.shape[1])[...] += (transposed @ flat.T).T


class AssembledModel:
    """The numpy functions of an assembled model (module docstring)."""

    def __init__(self, payload: AssemblyPayload):
        self.payload = payload
        self.sizes = payload.sizes
        by_type: dict[int, list[Instance]] = {}
        for instance in payload.instances:
            by_type.setdefault(instance.type, []).append(instance)
        self.groups = [_Group(payload.types[k], members, self.sizes) for k, members in sorted(by_type.items())]
        self.guess = {row.name: load_function(row.name, row.numpy, {}, {}) for row in payload.guess.rows}
        self._functions = {fn.name: fn for fn in GLOBAL_FUNCTIONS}

    def _shape(self, name: str) -> tuple[int, ...]:
        return tuple(self.sizes.size(kind) for kind in AXES[name])

    def _evaluate(self, fn: GlobalFunction, args: tuple) -> dict[str, np.ndarray]:
        named = dict(zip(fn.args, args))
        t = np.asarray(named["t"], dtype=float)
        batch = t.shape
        outs = {name: np.zeros(batch + self._shape(name)) for name in fn.outputs}
        sources = dict(fn.sources)
        for group in self.groups:
            row_name = sources.get(group.kernels.kind)
            if row_name is None or group.count == 0:
                continue
            row = group.rows[row_name]
            t_local = np.broadcast_to(t[..., None], batch + (group.count,))
            local = [t_local if g == "t" else group.gather(g, named.get(g)) for g in row.args]
            values = group.functions[row_name](*local)
            for (name, _, _), value in zip(row.outputs, values):
                if name in outs:
                    group.add_into(outs[name], name, value, batch)
        return outs

    def function(self, name: str) -> Function:
        """The model's function ``name`` (a row of :data:`~.plan.GLOBAL_FUNCTIONS`, ``init_guess``,
        or the scalar variants ``step_residual`` and ``step_newton``)."""
        n, m = self.sizes.n, self.sizes.m
        if name == "init_guess":
            return self.guess["init_guess"]
        if name == "step_residual":
            return self.function("residual_terms")
        if name == "step_newton":
            residual, jacobians = self.function("residual_terms"), self.function("jacobian_terms")
            return lambda *args: residual(*args) + jacobians(*args)
        fn = self._functions[name]

        def call(*args: np.ndarray) -> tuple[np.ndarray, ...]:
            outs = self._evaluate(fn, args)
            named = dict(zip(fn.args, args))
            if name == "init_residual":
                q0, v0 = self.guess["init_guess"](named["t"], named["p"])
                outs["G"][..., :n] += np.asarray(named["q"]) - q0
                outs["G"][..., n + m:2 * n + m] += np.asarray(named["v"]) - v0
            elif name == "init_jacobians":
                q0_p, v0_p = self.guess["guess_jacobians"](named["t"], named["p"])
                diagonal = np.arange(n)
                outs["G_z"][..., diagonal, diagonal] += 1.0
                outs["G_z"][..., n + m + diagonal, n + m + diagonal] += 1.0
                outs["G_p"][..., :n, :] -= q0_p
                outs["G_p"][..., n + m:2 * n + m, :] -= v0_p
            elif name == "init_second":
                (gp,) = self.guess["guess_second"](named["t"], named["p"], named["wG"], named["dp"])
                outs["Ip"] += gp
            return tuple(outs[k] for k in fn.outputs)

        return call
