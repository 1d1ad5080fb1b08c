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

    def __post_init__(self) -> None:
        for name in ("p", "t", "q", "v", "a", "lam", "newton_iterations"):
            object.__setattr__(self, name, _freeze(getattr(self, name)))

    @property
    def n_steps(self) -> int:
        """Number of steps N."""
        return len(self.t) - 1

    def outputs(self) -> np.ndarray:
        """Model outputs at every step time, shape ``(N+1, n_y)``.

        An output expression may overflow where the states are finite (``exp(1000 x)``);
        the values are then inf or NaN, without a warning: callers check (the command line
        refuses to write them)."""
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
