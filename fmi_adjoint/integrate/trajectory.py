"""The frozen result of a forward simulation."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..compiled import CompiledModel
from ..errors import ModelError
from .initialization import InitialState
from .schemes import AbstractScheme

__all__ = ["Checkpoints", "Trajectory"]


def _freeze(array: np.ndarray) -> np.ndarray:
    array = np.asarray(array)
    array.flags.writeable = False
    return array


@dataclasses.dataclass(frozen=True, eq=False)
class Checkpoints:
    """What a run keeps when its states would not fit the memory budget (native engine).

    Attributes
    ----------
    every : int
        Steps between checkpoints.
    states : numpy.ndarray, shape (n_checkpoints, state_size)
        The engine's complete state at steps ``0, every, 2 every, ...``: enough to recompute
        any segment bit for bit.
    outputs : numpy.ndarray, shape (N+1, n_y)
        The model outputs at every step (what the costs read).
    """

    every: int
    states: np.ndarray
    outputs: np.ndarray

    def __post_init__(self) -> None:
        for name in ("states", "outputs"):
            object.__setattr__(self, name, _freeze(getattr(self, name)))


@dataclasses.dataclass(frozen=True, eq=False)
class Trajectory:
    """States of a run at the step times, with Newton statistics.

    Attributes
    ----------
    model : CompiledModel
    p : numpy.ndarray
        Parameter vector used.
    scheme : AbstractScheme
        The integration scheme of the run (its constants: ``scheme.coefficients()``).
    t : numpy.ndarray, shape (N+1,)
    q, v, a : numpy.ndarray, shape (N+1, n)
        ``a``: the scheme's acceleration variable (generalized-alpha: the accelerations
        ``qddot``; HHT: its ``a``, which belongs to ``t_i + alpha h``).
    lam : numpy.ndarray, shape (N+1, m)
    init : InitialState
        The consistent initial state (needed to differentiate it).
    newton_iterations : numpy.ndarray, shape (N,)
        Iterations used by each step.
    factorizations : int
        Iteration-matrix factorizations of the run (one per iteration with full Newton;
        far fewer with ``HHT(reuse_jacobian=True)``).
    checkpoints : Checkpoints or None
        Set when the run kept checkpoints instead of its states (a run longer than the
        engine's memory budget): ``q, v, a, lam`` are then empty and the engine that made
        it recomputes segments during its sweeps.
    stored_outputs : numpy.ndarray or None, shape (N+1, n_y)
        The outputs at every step as the engine that made the run computed them (the native
        engine: its C code, so that a cost needs no numpy functions); ``None``: computed from
        the states on demand (:meth:`outputs`).

    The shapes are checked on construction (``q, v, a`` of ``N+1`` rows, or none with
    checkpoints, ``lam`` likewise, ``init.z`` of ``3n+3m`` values): the engines' sweeps and the
    C code they call trust a trajectory of their model (:meth:`fmi_adjoint.engines.AbstractEngine.adjoint_gradient`).
    """

    model: CompiledModel
    p: np.ndarray
    scheme: AbstractScheme
    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    lam: np.ndarray
    init: InitialState
    newton_iterations: np.ndarray
    factorizations: int = 0
    checkpoints: Checkpoints | None = None
    stored_outputs: np.ndarray | None = None

    def __post_init__(self) -> None:
        for name in ("p", "t", "q", "v", "a", "lam", "newton_iterations"):
            object.__setattr__(self, name, _freeze(getattr(self, name)))
        if self.stored_outputs is not None:
            object.__setattr__(self, "stored_outputs", _freeze(self.stored_outputs))
        model = self.model
        points = len(self.t) if self.t.ndim == 1 else -1
        rows = 0 if self.checkpoints is not None else points
        expected = {"t": (points,), "p": (model.n_p,), "q": (rows, model.n), "v": (rows, model.n),
                    "a": (rows, model.n), "lam": (rows, model.m), "newton_iterations": (points - 1,)}
        shapes = {name: getattr(self, name).shape for name in expected}
        shapes["init.z"], expected["init.z"] = np.shape(self.init.z), (3 * model.n + 3 * model.m,)
        if self.stored_outputs is not None:
            shapes["stored_outputs"], expected["stored_outputs"] = self.stored_outputs.shape, (points, model.n_y)
        wrong = [f"{name} {shapes[name]} (needs {shape})" for name, shape in expected.items() if shapes[name] != shape]
        if points < 2 or wrong:
            raise ModelError(f"a trajectory of model '{model.model.name}' has inconsistent shapes: "
                             f"{', '.join(wrong) or f'{points} step times'}; make trajectories with an engine's "
                             "simulate.")

    @property
    def n_steps(self) -> int:
        """Number of steps N."""
        return len(self.t) - 1

    def outputs(self) -> np.ndarray:
        """Model outputs at every step time, shape ``(N+1, n_y)``.

        An output expression may overflow where the states are finite (``exp(1000 x)``);
        the values are then inf or NaN, without a warning: callers check (the command line
        refuses to write them)."""
        if self.stored_outputs is not None:
            return self.stored_outputs
        if self.checkpoints is not None:
            return self.checkpoints.outputs
        with np.errstate(all="ignore"):
            return self.model.outputs(self.q, self.v, self.a, self.lam, self.t, self.p)[0]

    def constraint_residual(self) -> np.ndarray:
        """``C(q_i, t_i)`` at every step, shape ``(N+1, m)`` (stored runs only)."""
        self.require_states("the constraint residual")
        return self.model.residual_terms(self.q, self.v, self.a, self.lam, self.t, self.p)[2]

    def require_states(self, what: str) -> None:
        """ModelError unless the states are stored (not only checkpoints)."""
        if self.checkpoints is not None:
            raise ModelError(
                f"{what} needs the stored states, but this run of {self.n_steps} steps kept only checkpoints (it "
                "exceeds the native engine's memory budget); use the native engine's sweeps, or a larger "
                "memory_budget."
            )
