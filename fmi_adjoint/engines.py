"""The engine contract: forward run, discrete adjoint, forward sensitivities.

Two engines implement it and must agree to round-off:

* :class:`PythonEngine`, the readable reference (:mod:`fmi_adjoint.integrate`,
  :mod:`fmi_adjoint.adjoint`, numpy functions generated from the model);
* :class:`NativeEngine`, the default: the same algorithms in C (the runtime the FMUs
  carry, plus the adjoint and sensitivity sweeps), on C functions printed from the same
  table of generated functions (:func:`fmi_adjoint.compiled.function_table`).

Both are built through the build cache (:mod:`fmi_adjoint.cache`), so a model is derived
and compiled once per machine; a model from :func:`fmi_adjoint.warm.prepare_model` then starts
without symbolic work (no lowering, parsing or sympy: issue 24, part 6).  The front door of
each operation (argument checks, the time grid, the cost's ``dJ/dY``) is shared here and is the
only place that checks inputs (issue 29): it hands the kernels a frozen
:class:`~fmi_adjoint.integrate.inputs.RunInputs` (parameters, scheme, grid) and a trajectory of
the engine's model, which they trust; an engine supplies only the kernels.

Adding an engine: subclass :class:`AbstractEngine`, implement (1) :meth:`~AbstractEngine.build`,
(2) ``_integrate`` (the forward run of checked ``RunInputs``), (3)
``_adjoint_sweep`` (gradient from ``dJ/dY`` on the step grid) and (4)
``_sensitivities`` (``dY/dp`` at the needed steps); then parametrize
``tests/test_engines.py`` over it.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from .adjoint import GradientResult, output_sensitivities, sampled_outputs
from .adjoint.discrete import AdjointTrajectory, adjoint_seed, adjoint_sweep, adjoint_trajectory
from .adjoint.sensitivities import state_sensitivity_steps
from .cache import BuildCache
from .compiled import CompiledModel, Derivation, compile_model
from .costs.base import AbstractCost
from .costs.sampling import Sampler
from .choices import look_up
from .errors import CompilerError, ConvergenceError, ModelError, NoCCodeError
from .integrate import InitialState, Trajectory
from .integrate.inputs import RunInputs
from .integrate.schemes import AbstractScheme
from .integrate.trajectory import Checkpoints
from .integrate.hht import _integrate, prepare_run
from .integrate.initialization import initial_state
from .model import Model
from .native import NativeLibrary, build_native

__all__ = ["AbstractEngine", "AbstractEngineChoice", "AutomaticEngine", "BuiltEngine", "DEFAULT_MEMORY_BUDGET",
           "ENGINE_CHOICES", "NativeEngine", "NativeOnly", "PythonEngine", "PythonOnly", "choose_engine",
           "default_engine", "engine_choice"]


class AbstractEngine(abc.ABC):
    """One model's engine.  Immutable after construction; safe to share between threads
    only if the kernels are (both engines' are: no state between calls).

    Attributes
    ----------
    compiled : CompiledModel
        Names, sizes, default values and the numpy functions (outputs of a trajectory).
    """

    name: ClassVar[str]
    #: Bytes of states a run stores at most (longer runs keep checkpoints); None: no limit.
    memory_budget: int | None = None

    def __init__(self, compiled: CompiledModel):
        self.compiled = compiled

    @classmethod
    @abc.abstractmethod
    def build(cls, model: Model, *, cache: BuildCache | None = None) -> AbstractEngine:
        """Build (or load from the cache) the engine of ``model``."""

    # -- forward run --------------------------------------------------------------------
    def simulate(self, p: np.ndarray | None = None, *, t_end: float | None = None, step: float | None = None,
                 solver: AbstractScheme | None = None, t0: float = 0.0) -> Trajectory:
        """Forward run (HHT or generalized-alpha) from a consistent initial state (see
        :func:`fmi_adjoint.integrate.simulate`).

        Raises
        ------
        ModelError
            Bad parameter vector, time span or a table used past its end.
        ConvergenceError
            Newton failed in the initialization or a step (time and remedy named).
        """
        return self._integrate(prepare_run(self.compiled, p, t_end=t_end, step=step, solver=solver, t0=t0))

    @abc.abstractmethod
    def _integrate(self, run: RunInputs) -> Trajectory: ...

    # -- gradients --------------------------------------------------------------------------
    def adjoint_gradient(self, traj: Trajectory, cost: AbstractCost) -> GradientResult:
        """Exact gradient of the discrete cost by the discrete adjoint (one backward sweep)."""
        run = self._check_trajectory(traj)
        J, ybar, gradient = adjoint_seed(traj, cost)
        return GradientResult(J=J, gradient=self._adjoint_sweep(traj, run, ybar, gradient), method="adjoint")

    @abc.abstractmethod
    def _adjoint_sweep(self, traj: Trajectory, run: RunInputs, ybar: np.ndarray,
                       gradient: np.ndarray) -> np.ndarray: ...

    def output_sensitivities(self, traj: Trajectory, sample_times: np.ndarray, channels: np.ndarray,
                             params: np.ndarray | None = None) -> np.ndarray:
        """``dY/dp`` of the outputs ``channels`` at ``sample_times``, shape
        ``(n_samples, n_channels, n_params)`` (forward sensitivities of the scheme)."""
        params = self._parameter_indices(params)
        run = self._check_trajectory(traj)
        sample_times = np.asarray(sample_times, dtype=float)
        channels = np.asarray(channels, dtype=int)
        if channels.ndim != 1 or (channels.size and not 0 <= channels.min() <= channels.max() < self.compiled.n_y):
            raise ModelError(f"output channels {channels.tolist()} must be indices in [0, {self.compiled.n_y}); use "
                             "CompiledModel.output_index(name).")
        return self._sensitivities(traj, run, sample_times, channels, params)

    def _parameter_indices(self, params: np.ndarray | None) -> np.ndarray:
        """Distinct indices into the parameter vector (ModelError otherwise)."""
        n_p = self.compiled.n_p
        if params is None:
            return np.arange(n_p)
        params = np.asarray(params)
        if params.ndim != 1 or not np.issubdtype(params.dtype, np.integer) or len(set(params.tolist())) != len(params) \
                or (len(params) and not 0 <= params.min() <= params.max() < n_p):
            raise ModelError(f"parameter indices {params.tolist()} must be distinct integers in [0, {n_p}); use "
                             "CompiledModel.parameter_index(name).")
        return params.astype(int)

    def _check_trajectory(self, traj: Trajectory) -> RunInputs:
        """The front door of the sweeps: a trajectory of this engine's model only (the sweeps
        index its arrays by the model's sizes; the trajectory checked its own shapes), and its
        run's checked inputs, which the kernels trust."""
        model = self.compiled
        if (traj.model.n, traj.model.m, traj.model.n_p, traj.model.n_y) != (model.n, model.m, model.n_p, model.n_y) \
                or traj.model.parameter_names != model.parameter_names:
            raise ModelError(f"the trajectory is of model '{traj.model.model.name}', not of this engine's model "
                             f"'{model.model.name}'; simulate with this engine first.")
        return RunInputs.checked(traj.p, traj.scheme, traj.t, parameter_names=model.parameter_names,
                                 model_name=model.model.name)

    @abc.abstractmethod
    def _sensitivities(self, traj: Trajectory, run: RunInputs, sample_times: np.ndarray, channels: np.ndarray,
                       params: np.ndarray) -> np.ndarray: ...

    def state_sensitivities(self, traj: Trajectory, params: np.ndarray | None = None) -> np.ndarray:
        """``d(q, v, a, lambda)/dp`` at every step, shape ``(N+1, 3n+m, len(params))`` (the
        forward sensitivities of the scheme; optimal input design needs all of them)."""
        params = self._parameter_indices(params)
        return self._state_sensitivities(traj, self._check_trajectory(traj), params)

    @abc.abstractmethod
    def _state_sensitivities(self, traj: Trajectory, run: RunInputs, params: np.ndarray) -> np.ndarray: ...

    def adjoint_trajectory(self, traj: Trajectory, ybar: np.ndarray,
                           xbar: np.ndarray | None = None) -> AdjointTrajectory:
        """Adjoint sweeps of ``C`` linear functionals at once: explicit derivatives ``dJ/dY``
        (``ybar``, shape ``(N+1, n_y, C)``) and ``dJ/d(q, v, a, lambda)`` (``xbar``, shape
        ``(N+1, 3n+m, C)``, optional) on the step grid.  Returns the adjoint variables of
        every step (:class:`~fmi_adjoint.adjoint.discrete.AdjointTrajectory`)."""
        run = self._check_trajectory(traj)
        model = self.compiled
        rows = traj.n_steps + 1
        ybar = np.asarray(ybar, dtype=float)
        if ybar.ndim != 3 or ybar.shape[:2] != (rows, model.n_y):
            raise ModelError(f"dJ/dY has shape {ybar.shape}; the run needs ({rows}, {model.n_y}, columns).")
        if xbar is not None:
            xbar = np.asarray(xbar, dtype=float)
            if xbar.shape != (rows, 3 * model.n + model.m, ybar.shape[2]):
                raise ModelError(f"dJ/dx has shape {xbar.shape}; the run needs "
                                 f"({rows}, {3 * model.n + model.m}, {ybar.shape[2]}).")
        return self._adjoint_trajectory(traj, run, ybar, xbar)

    @abc.abstractmethod
    def _adjoint_trajectory(self, traj: Trajectory, run: RunInputs, ybar: np.ndarray,
                            xbar: np.ndarray | None) -> AdjointTrajectory: ...

    def sensitivity_gradient(self, traj: Trajectory, cost: AbstractCost,
                             params: np.ndarray | None = None) -> GradientResult:
        """Gradient from forward sensitivities; entries of parameters not in ``params`` are zero."""
        model = self.compiled
        params = self._parameter_indices(params)
        _, channels, Y = sampled_outputs(traj, cost)
        value = cost.evaluate(Y, traj.p)
        dY = self.output_sensitivities(traj, cost.sample_times, channels, params)
        gradient = np.zeros(model.n_p)
        gradient[params] = np.einsum("sc,scp->p", value.dJ_dY, dY)
        if value.dJ_dp is not None:
            gradient[params] += np.asarray(value.dJ_dp)[params]
        return GradientResult(J=value.J, gradient=gradient, method="forward")


class PythonEngine(AbstractEngine):
    """The readable reference: numpy functions, :mod:`fmi_adjoint.integrate` and
    :mod:`fmi_adjoint.adjoint`."""

    name = "python"

    @classmethod
    def build(cls, model: Model, *, cache: BuildCache | None = None) -> PythonEngine:
        return cls(compile_model(model, cache=cache))

    def _integrate(self, run: RunInputs) -> Trajectory:
        # Overflow in a diverging step is detected from the values, not reported as warnings.
        with np.errstate(all="ignore"):
            init = initial_state(self.compiled, run.p, run.grid[0])
            return _integrate(self.compiled, run.p, run.scheme, run.grid, init)

    def _adjoint_sweep(self, traj: Trajectory, run: RunInputs, ybar: np.ndarray, gradient: np.ndarray) -> np.ndarray:
        traj.require_states("the Python engine's adjoint sweep")
        return adjoint_sweep(traj, ybar, gradient)

    def _sensitivities(self, traj, run, sample_times, channels, params) -> np.ndarray:
        traj.require_states("the Python engine's sensitivities")
        return output_sensitivities(traj, sample_times, channels, params)

    def _state_sensitivities(self, traj: Trajectory, run: RunInputs, params: np.ndarray) -> np.ndarray:
        traj.require_states("the Python engine's sensitivities")
        model = self.compiled
        out = np.zeros((traj.n_steps + 1, 3 * model.n + model.m, len(params)))
        for _, _, i, S in state_sensitivity_steps(traj, params):
            out[i] = np.concatenate((S.q, S.v, S.a, S.lam))
        return out

    def _adjoint_trajectory(self, traj: Trajectory, run: RunInputs, ybar: np.ndarray,
                            xbar: np.ndarray | None) -> AdjointTrajectory:
        traj.require_states("the Python engine's adjoint sweep")
        return adjoint_trajectory(traj, ybar, xbar)


#: Most steps of a native run that failed on a singular step matrix which the Python engine
#: replays to name the dependent constraints (an error path; ~1e5 steps take seconds there).
REPLAY_STEPS = 200_000

#: Largest model (coordinates plus constraints) whose native failure the Python engine
#: replays: the replay factors dense matrices of up to 3(n+m) rows (72 MB each at 1 000); a
#: 5 000-coordinate lattice crashed inside OpenBLAS on it (issue 24).  Larger models get the C
#: engine's message as it is, which names the step and the cause but not the constraints.
REPLAY_MAX_SIZE = 1000

#: Memory the native engine may use to store a trajectory for its sweeps (bytes); longer
#: runs keep checkpoints and recompute segments (:class:`NativeEngine`).
DEFAULT_MEMORY_BUDGET = 1 << 30


class _DeferredMessage(ConvergenceError):
    """A :class:`~fmi_adjoint.errors.ConvergenceError` whose message is worked out on the first
    ``str()`` (by ``explain``; ``text`` until then in ``args``); pickled (to cross a process
    boundary) as a plain ConvergenceError with the worked-out message."""

    def __init__(self, text: str, explain: Callable[[], str]):
        super().__init__(text)
        self._explain: Callable[[], str] | None = explain
        self._message = text

    def __str__(self) -> str:
        if self._explain is not None:
            explain, self._explain = self._explain, None
            self._message = explain()
        return self._message

    def __reduce__(self) -> tuple:
        return (ConvergenceError, (str(self),))


class NativeEngine(AbstractEngine):
    """The C engine: forward run, adjoint sweep and sensitivities in the generated C code.

    A run whose states (``(N+1)(3n+m)`` doubles) exceed ``memory_budget`` keeps only its
    outputs and a checkpoint of the engine state every ``K`` steps (``K`` states fit in half
    the budget).  The sweeps then recompute one segment at a time from its checkpoint (one
    extra forward run in total) and carry their adjoint or sensitivity state across the
    segments, so the result equals the stored run's to round-off (the recomputed states
    are bit for bit the same) and memory does not limit the run length.

    Attributes
    ----------
    library : NativeLibrary
    memory_budget : int
        Bytes for a stored trajectory (default 1 GiB).
    """

    name = "native"
    memory_budget: int

    def __init__(self, compiled: CompiledModel, library: NativeLibrary, memory_budget: int = DEFAULT_MEMORY_BUDGET):
        super().__init__(compiled)
        if not memory_budget > 0:
            raise ModelError(f"memory_budget = {memory_budget!r} must be a positive number of bytes.")
        self.library = library
        self.memory_budget = int(memory_budget)
        #: Newton matrices the adjoint sweeps have factored so far (a diagnostic, as a
        #: trajectory's ``factorizations``): one per step, except after modified Newton on a
        #: model whose Newton matrix is sparse, whose sweeps refine with an earlier step's factors.
        self.adjoint_factorizations = 0

    @classmethod
    def build(cls, model: Model, *, cache: BuildCache | None = None,
              memory_budget: int = DEFAULT_MEMORY_BUDGET) -> NativeEngine:
        cache = cache or BuildCache.default()
        derivation = Derivation(model)  # the symbolic work, once for both backends on a cold build
        # Lazy numpy functions: the C engine calls them only for a trajectory's outputs.
        compiled = compile_model(model, cache=cache, derivation=derivation, lazy=True)
        return cls(compiled, build_native(model, cache=cache, derivation=derivation), memory_budget)

    def _row_bytes(self) -> int:
        return 8 * (3 * self.compiled.n + self.compiled.m)

    def _integrate(self, run: RunInputs) -> Trajectory:
        try:
            return self._native_integrate(run)
        except ConvergenceError as exc:
            raise self._explained(exc, run) from None

    def _explained(self, exc: ConvergenceError, run: RunInputs) -> ConvergenceError:
        """The C engine's failure in the Python engine's words.

        The C runtime (which exported FMUs carry as well) reports a singular matrix without
        the constraint names and ends a Newton failure with HHT's remedies.  A singular
        initialization is replayed by the Python initialization (cheap, the same iterates),
        a singular step matrix by the Python engine when the run has at most
        :data:`REPLAY_STEPS` steps (either only for models of at most :data:`REPLAY_MAX_SIZE`
        coordinates and constraints), both of which name dependent constraints
        (:mod:`fmi_adjoint.integrate.dependence`); other Newton failures get the scheme's
        own advice (:meth:`~fmi_adjoint.integrate.schemes.AbstractScheme.divergence_advice`).

        The replays are deferred (:class:`_DeferredMessage`): they run when the message is
        read, not when the error is raised, so an optimizer that catches a failed trial point
        (:func:`~fmi_adjoint.identify.identify`) pays nothing for them.
        """
        text = str(exc)
        if " Remedies: " in text:
            text = f"{text.split(' Remedies: ')[0]} {run.scheme.divergence_advice()}"
        replayed = (self.compiled.n + self.compiled.m <= REPLAY_MAX_SIZE
                    and ("the initialization system is singular" in text
                         or ("the iteration matrix is singular" in text and run.n_steps <= REPLAY_STEPS)))
        if not replayed:
            return exc if text == str(exc) else ConvergenceError(text)

        def explain() -> str:
            try:
                if "the initialization system is singular" in text:
                    with np.errstate(all="ignore"):
                        initial_state(self.compiled, run.p, run.grid[0])
                else:
                    PythonEngine(self.compiled)._integrate(run)
            except ConvergenceError as named:
                return str(named)
            return text

        return _DeferredMessage(text, explain)

    def _native_integrate(self, run: RunInputs) -> Trajectory:
        """The C engine's run: states (or checkpoints above the memory budget) and the
        outputs of every step from the C code, so that a cost needs no numpy functions."""
        model = self.compiled
        N = run.n_steps
        every = 0
        if (N + 1) * self._row_bytes() > self.memory_budget:
            # Half the budget for one recomputed segment, half for the checkpoints.
            every = max(1, min(N, self.memory_budget // (2 * self._row_bytes())))
            if (N // every + 1) * 8 * self.library.state_size > self.memory_budget // 2:
                raise ModelError(
                    f"{N} steps of model '{model.model.name}' do not fit the native engine's memory budget of "
                    f"{self.memory_budget} bytes even with checkpoints; give a larger memory_budget or a "
                    "larger step.")
        result = self.library.forward(run, every=every)
        checkpoints = None
        if result.checkpoints is not None:
            checkpoints = Checkpoints(every=every, states=result.checkpoints, outputs=result.y)
        return Trajectory(
            model=model, p=run.p, scheme=run.scheme, t=run.grid,
            q=result.q, v=result.v, a=result.a, lam=result.lam,
            init=InitialState(z=result.z0, n=model.n, m=model.m, iterations=result.init_iterations),
            newton_iterations=result.iterations, factorizations=result.factorizations, checkpoints=checkpoints,
            stored_outputs=result.y,
        )

    def _segments(self, traj: Trajectory) -> list[tuple[int, int]]:
        """Step ranges ``(i_lo, i_hi)`` the sweeps work on, in forward order."""
        N = traj.n_steps
        if traj.checkpoints is None:
            return [(0, N)]
        every = traj.checkpoints.every
        return [(lo, min(lo + every - 1, N)) for lo in range(0, N + 1, every)]

    def _states(self, traj: Trajectory, lo: int, hi: int) -> tuple[np.ndarray, ...]:
        """``(q, v, a, lam)`` of the steps ``lo..hi``: stored, or recomputed from a checkpoint."""
        if traj.checkpoints is None:
            return traj.q[lo:hi + 1], traj.v[lo:hi + 1], traj.a[lo:hi + 1], traj.lam[lo:hi + 1]
        state = traj.checkpoints.states[lo // traj.checkpoints.every]
        return self.library.recompute(traj.t, lo, hi, state)

    # The arrays below are sized here from the model and handed to the library, which trusts them.
    def _adjoint_sweep(self, traj: Trajectory, run: RunInputs, ybar: np.ndarray, gradient: np.ndarray) -> np.ndarray:
        model = self.compiled
        gradient = np.array(gradient, dtype=float)
        carry = np.zeros(1 + 4 * model.n)  # h_{i+1}, mu1, mu2, mu3, mu5 of the step after the segment
        w0 = np.zeros(3 * model.n + model.m)
        for lo, hi in reversed(self._segments(traj)):
            self.adjoint_factorizations += self.library.adjoint_segment(run, lo, hi, self._states(traj, lo, hi),
                                                                        ybar[lo:hi + 1], carry, w0, gradient)
        self.library.adjoint_initial(run, traj.init.z, w0, gradient)
        return gradient

    def _state_sensitivities(self, traj: Trajectory, run: RunInputs, params: np.ndarray) -> np.ndarray:
        model = self.compiled
        out = np.zeros((traj.n_steps + 1, 3 * model.n + model.m, len(params)))
        needed = np.zeros(traj.n_steps + 1, dtype=np.uint8)
        carry = self.library.sensitivity_carry(len(params))
        for lo, hi in self._segments(traj):
            self.library.sensitivities_segment(run, lo, hi, self._states(traj, lo, hi), traj.init.z, params, needed,
                                               carry, states_out=out[lo:hi + 1])
        return out

    def _adjoint_trajectory(self, traj: Trajectory, run: RunInputs, ybar: np.ndarray,
                            xbar: np.ndarray | None) -> AdjointTrajectory:
        model = self.compiled
        n, m, columns = model.n, model.m, ybar.shape[2]
        rows = traj.n_steps + 1
        mu = np.zeros((columns, rows, n + m))
        w0 = np.zeros((columns, 3 * n + m))
        gradient = np.zeros((columns, model.n_p))
        segments = self._segments(traj)
        for c in range(columns):
            carry = np.zeros(1 + 4 * n)
            yb = np.ascontiguousarray(ybar[:, :, c])
            xb = None if xbar is None else np.ascontiguousarray(xbar[:, :, c])
            for lo, hi in reversed(segments):
                self.adjoint_factorizations += self.library.adjoint_segment(
                    run, lo, hi, self._states(traj, lo, hi), yb[lo:hi + 1], carry, w0[c], gradient[c],
                    xbar=None if xb is None else xb[lo:hi + 1], mu_out=mu[c, lo:hi + 1])
        return AdjointTrajectory(mu3=np.moveaxis(mu[:, :, :n], 0, 2), mu4=np.moveaxis(mu[:, :, n:], 0, 2),
                                 w0=w0.T.copy(), gradient=gradient.T.copy())

    def _sensitivities(self, traj, run, sample_times, channels, params) -> np.ndarray:
        sampler = Sampler.from_grid(traj.t, sample_times)
        needed = np.zeros(traj.n_steps + 1, dtype=np.uint8)
        needed[sampler.k] = 1
        needed[sampler.k + 1] = 1
        carry = self.library.sensitivity_carry(len(params))
        parts = [self.library.sensitivities_segment(run, lo, hi, self._states(traj, lo, hi), traj.init.z, params,
                                                    needed, carry)
                 for lo, hi in self._segments(traj)]
        dY = np.concatenate(parts)
        # Rows of dY are the needed steps in order: re-index the interpolation to them.
        row = np.cumsum(needed) - 1
        w = sampler.theta[:, None, None]
        picked = dY[:, channels, :]
        return (1.0 - w) * picked[row[sampler.k]] + w * picked[row[sampler.k + 1]]


# -- choosing the engine: one chooser, the choices as objects -------------------------------
@dataclasses.dataclass(frozen=True)
class BuiltEngine:
    """An engine and, when the automatic choice fell back to the Python engine, why (a note
    for the user, carried as a value: the command line prints it, an
    :class:`~fmi_adjoint.identify.Experiment` keeps it in ``engine_note``)."""

    engine: AbstractEngine
    note: str | None = None


class AbstractEngineChoice(abc.ABC):
    """Which engine runs a model (``--engine``): one object per choice, looked up from its
    name once by :func:`engine_choice`.

    Adding a choice: subclass, set :attr:`name`, implement :meth:`build`, and add an
    instance to :data:`ENGINE_CHOICES`.
    """

    #: The ``--engine`` name.
    name: ClassVar[str]

    @abc.abstractmethod
    def build(self, model: Model, *, cache: BuildCache | None = None, compiled: CompiledModel | None = None,
              derivation: Derivation | None = None, second_order: bool = False) -> BuiltEngine:
        """The engine of ``model`` through the build cache (``compiled``: its numpy backend,
        if it is built already; ``derivation``: its symbolic work, if done already;
        ``second_order``: a native library with the second-order functions of optimal input
        design, :func:`~fmi_adjoint.native.build_native`)."""


@dataclasses.dataclass(frozen=True)
class PythonOnly(AbstractEngineChoice):
    """The Python reference engine (``--engine python``)."""

    name: ClassVar[str] = "python"

    def build(self, model: Model, *, cache: BuildCache | None = None, compiled: CompiledModel | None = None,
              derivation: Derivation | None = None, second_order: bool = False) -> BuiltEngine:
        if compiled is None:
            compiled = compile_model(model, cache=cache, derivation=derivation)
        return BuiltEngine(PythonEngine(compiled))


@dataclasses.dataclass(frozen=True)
class NativeOnly(AbstractEngineChoice):
    """The C engine, or an error naming the cause and the fix (``--engine native``)."""

    name: ClassVar[str] = "native"

    def build(self, model: Model, *, cache: BuildCache | None = None, compiled: CompiledModel | None = None,
              derivation: Derivation | None = None, second_order: bool = False) -> BuiltEngine:
        try:
            return BuiltEngine(_native(model, cache, compiled, derivation, second_order))
        except (CompilerError, NoCCodeError) as exc:
            reason = str(exc).rstrip(".")
        raise ModelError(f"--engine native: {reason}; use --engine python or fix the cause.")


@dataclasses.dataclass(frozen=True)
class AutomaticEngine(AbstractEngineChoice):
    """The default (``--engine auto``): the C engine; the Python reference engine, with a note
    naming the cause, when there is no C compiler, the compiler fails, or an element has no
    C code.  Both engines give the same results (to round-off, ``tests/test_engines.py``), so
    the fallback costs only speed, and the note says so."""

    name: ClassVar[str] = "auto"

    def build(self, model: Model, *, cache: BuildCache | None = None, compiled: CompiledModel | None = None,
              derivation: Derivation | None = None, second_order: bool = False) -> BuiltEngine:
        try:
            return BuiltEngine(_native(model, cache, compiled, derivation, second_order))
        except (CompilerError, NoCCodeError) as exc:  # no compiler, a failing one, or an element without C
            reason = str(exc).rstrip(".")
        python = PythonOnly().build(model, cache=cache, compiled=compiled, derivation=derivation).engine
        return BuiltEngine(python, f"using the Python engine ({reason}).")


def _native(model: Model, cache: BuildCache | None, compiled: CompiledModel | None, derivation: Derivation | None,
            second_order: bool) -> NativeEngine:
    if compiled is None and derivation is None and not second_order:
        return NativeEngine.build(model, cache=cache)
    cache = cache or BuildCache.default()
    if derivation is None and compiled is None:
        derivation = Derivation(model)  # the symbolic work, once for both backends on a cold build
    if compiled is None:
        compiled = compile_model(model, cache=cache, derivation=derivation, lazy=True)
    return NativeEngine(compiled, build_native(model, cache=cache, derivation=derivation, second_order=second_order))


#: The engine choices by ``--engine`` name.
ENGINE_CHOICES: dict[str, AbstractEngineChoice] = {c.name: c for c in (AutomaticEngine(), NativeOnly(), PythonOnly())}


def engine_choice(choice: str | AbstractEngineChoice) -> AbstractEngineChoice:
    """The engine choice of an ``--engine`` name (a choice object is returned as it is).

    Raises
    ------
    ModelError
        An unknown name (the message lists the choices).
    """
    return look_up(ENGINE_CHOICES, choice, "engine", AbstractEngineChoice, ModelError)


def choose_engine(model: Model, choice: str | AbstractEngineChoice = "auto", *, cache: BuildCache | None = None,
                  compiled: CompiledModel | None = None, derivation: Derivation | None = None,
                  second_order: bool = False) -> BuiltEngine:
    """The one engine chooser: the engine of ``model`` for ``choice`` (a name or an
    :class:`AbstractEngineChoice`; default ``auto``), with the fallback note of ``auto``
    (the other arguments: :meth:`AbstractEngineChoice.build`)."""
    return engine_choice(choice).build(model, cache=cache, compiled=compiled, derivation=derivation,
                                       second_order=second_order)


def default_engine(compiled: CompiledModel, *, cache: BuildCache | None = None) -> AbstractEngine:
    """``choose_engine(compiled.model, "auto", compiled=compiled).engine``: the engine alone,
    for callers that report no notes (use :func:`choose_engine` to keep the note)."""
    return choose_engine(compiled.model, AutomaticEngine(), cache=cache, compiled=compiled).engine
