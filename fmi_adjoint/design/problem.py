"""The optimal input design problem (dissertation Ch. 5) as a smooth function of the
unconstrained design variables, with its exact gradient.

``DesignSpec`` says what to design (input, knots, bounds, basis, bound map, criterion,
measured outputs and their noise, end conditions, amplitude limits, rate bound, time
span); :meth:`DesignProblem.build` builds the model with the input driven by knot values
(one build per knot layout, through the cache, for the default native engine and the
second-order functions) and :meth:`DesignProblem.evaluate` returns::

    objective(z) = Psi(M(psi(z)))/Psi_scale + end + limits + rate

with its gradient (:func:`fmi_adjoint.design.fisher.criterion_gradient`, then the chain
rule through the bound map ``psi``).  The penalties are the dissertation's scrap function
(Sec. 5.1.3) and smooth state constraints, in units of the start criterion (of 1 for the
D-criterion, whose differences are already unit-free):

* end conditions ``y_o(T) = target``: ``W ((y_o(T) - target)/scale_o)^2``;
* amplitude limits ``|y_o| <= L_o`` at every step: ``W sum_i ((|y_o| - L_o)_+ / L_o)^2 /
  n_samples``;
* a rate bound ``|xi_{k+1} - xi_k| / dt_k <= r``: ``W sum_k ((|.| - r)_+ / r)^2``;
* the input itself at the steps, ``lo <= u_i <= hi``: ``W sum_i (excess_i/(hi - lo))^2 /
  n_steps``, which only a cubic spline can violate (between its knots);

with ``W = 100`` at first (a 1 % violation costs 1 % of the start criterion) and ``scale_o``
the largest ``|y_o|`` of the start run.  Quadratic exterior penalties: once differentiable,
exact gradients.  Their violations shrink like ``1/W``, and as the criterion grows during
the design (by factors of 10 to 300 on the examples) a fixed ``W`` buys less: the design loop
therefore raises ``W`` tenfold and continues while a violation exceeds its tolerance
(:func:`fmi_adjoint.design.optimize.run_design`, the classical sequential penalty method);
the result reports the final violations.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import numpy as np
from scipy import sparse

from ..budget import MemoryEstimate, doubles
from ..cache import BuildCache
from ..compiled import CompiledModel, Derivation, SecondOrder, compile_model, compile_second_order
from ..engines import AbstractEngine, AbstractEngineChoice, NativeEngine, PythonEngine, choose_engine
from ..forces.numeric import AbstractNumericElement
from ..errors import ConvergenceError, ModelError
from ..integrate import Trajectory
from ..integrate.hht import time_grid
from ..model import Model
from ..native import native_second_order
from ..text import excerpt
from .criteria import AbstractCriterion, AOptimal
from .fisher import (SECOND_ORDER_CHUNK, FisherSetup, Sensitivities, criterion_gradient, fisher_matrix,
                     sensitivities)
from .signal import AbstractBasis, AbstractBoundMap, BoxBounds, CubicSpline, PiecewiseLinear, knot_names, signal_model

__all__ = ["DesignSpec", "DesignProblem", "DesignValue", "PENALTY_WEIGHT", "SPEC_RANGE", "design_memory"]

#: Weight of the penalties relative to the start criterion (module docstring).
PENALTY_WEIGHT = 100.0
#: Magnitudes allowed for --noise, --end, --limit and --rate: the penalties square ratios of
#: these values to the outputs' scales and multiply them by up to 1e6 (the raised weights),
#: which overflows past about 1e150; no measurement comes near these bounds.
SPEC_RANGE = (1e-100, 1e100)


@dataclasses.dataclass(frozen=True)
class DesignSpec:
    """What to design.

    Attributes
    ----------
    input : str
        An ``[inputs]`` entry of the model.
    params : tuple of str
        The parameters to be identified later.
    knots : int
        Number of knots, equally spaced on ``[t0, t_end]`` (at least 2).
    bounds : (float, float)
        ``lo < hi`` of the input.
    noise : mapping of output name to sigma
        Measured outputs and the standard deviation of their noise.
    criterion, basis, bound_map
        Strategy objects (defaults: A-optimal, piecewise linear, box bounds).  The box is the
        default rather than the thesis's arctangent map (eq. (5.17), offered as ``ArctanMap``):
        the map's slope vanishes at saturated knots, so an end condition cannot pull them back
        (cart_pendulum, 20 knots, 60 iterations: v_c(T) missed by 1.2 m/s with the map, by
        2e-4 m/s with the box, whose criterion is also 23 % better).
    end : mapping of output name to value
        End conditions ``y(T) = value``.
    limits : mapping of output name to L
        ``|y| <= L`` during the experiment.
    rate : float, optional
        ``|du/dt| <= rate`` between knots.
    t_end, step : float, optional
        Default: the model's simulation settings.
    sample : float, optional
        Sample interval of the measurement (default: the step).
    integral : bool
        Weight the samples by the trapezoidal rule (``M`` approximates the integral of
        eq. (5.8)) instead of 1 per sample (eq. (5.6)).
    start : float or sequence, optional
        Start knot values (default: the thesis's ``F_0 = F_max/2`` generalized, the point
        three quarters of the way from ``lo`` to ``hi``).
    """

    input: str
    params: tuple[str, ...]
    knots: int
    bounds: tuple[float, float]
    noise: Mapping[str, float]
    criterion: AbstractCriterion = AOptimal()
    basis: AbstractBasis = PiecewiseLinear()
    bound_map: AbstractBoundMap = BoxBounds()
    end: Mapping[str, float] = dataclasses.field(default_factory=dict)
    limits: Mapping[str, float] = dataclasses.field(default_factory=dict)
    rate: float | None = None
    t_end: float | None = None
    step: float | None = None
    sample: float | None = None
    integral: bool = False
    start: float | tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        lo, hi = (float(b) for b in self.bounds)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ModelError(f"input bounds {excerpt(self.input)}={lo:g}:{hi:g}: give finite LO < HI.")
        object.__setattr__(self, "bounds", (lo, hi))
        if isinstance(self.knots, bool) or not isinstance(self.knots, int) or self.knots < 2:
            raise ModelError(f"--knots {self.knots!r}: give a whole number of at least 2 knots.")
        if not self.params:
            raise ModelError("give the parameters to identify (--params P1,P2).")
        if len(set(self.params)) != len(self.params):
            raise ModelError(f"--params names a parameter twice: {', '.join(self.params)}.")
        if not self.noise:
            raise ModelError("give at least one measured output with its noise level (--noise OUT=SIGMA).")
        small, large = SPEC_RANGE
        for name, sigma in self.noise.items():
            if not (math.isfinite(sigma) and sigma > 0):
                raise ModelError(f"--noise {name}={sigma!r}: the noise level must be a positive number.")
            if not small <= sigma <= large:
                raise ModelError(f"--noise {name}={sigma:g}: a noise level must lie in [{small:g}, {large:g}]; give "
                                 f"the standard deviation of the measurement of '{name}' in the output's unit.")
        for name, limit in self.limits.items():
            if not (math.isfinite(limit) and limit > 0):
                raise ModelError(f"--limit {name}={limit!r}: the amplitude limit must be a positive number.")
            if not small <= limit <= large:
                raise ModelError(f"--limit {name}={limit:g}: an amplitude limit must lie in [{small:g}, {large:g}]; "
                                 f"give the largest |{name}| allowed, in the output's unit.")
        for name, value in self.end.items():
            if not math.isfinite(value):
                raise ModelError(f"--end {name}={value!r}: give a finite value.")
            if abs(value) > large:
                raise ModelError(f"--end {name}={value:g}: an end value must lie in [-{large:g}, {large:g}]; give "
                                 f"the value '{name}' should reach at the end, in the output's unit.")
        if self.rate is not None and not (math.isfinite(self.rate) and self.rate > 0):
            raise ModelError(f"--rate {self.rate!r}: give a positive bound on |du/dt|.")
        if self.rate is not None and not small <= self.rate <= large:
            raise ModelError(f"--rate {self.rate:g}: a rate bound must lie in [{small:g}, {large:g}]; give the "
                             "largest |du/dt| allowed, in the input's unit per second.")
        if self.sample is not None and not (math.isfinite(self.sample) and self.sample > 0):
            raise ModelError(f"--sample {self.sample!r}: give a positive sample interval.")

    def start_values(self) -> np.ndarray:
        """The start knot values, strictly inside the bounds."""
        lo, hi = self.bounds
        if self.start is None:
            values = np.full(self.knots, lo + 0.75 * (hi - lo))
        else:
            values = np.broadcast_to(np.asarray(self.start, dtype=float), (self.knots,)).copy()
        if not np.all((values > lo) & (values < hi)):
            raise ModelError(f"start values of '{self.input}' must lie strictly inside ({lo:g}, {hi:g}); the bound "
                             "map reaches the bounds only in the limit.")
        return values


@dataclasses.dataclass(frozen=True, eq=False)
class DesignValue:
    """One evaluation: ``objective`` and its gradient in ``z``; the criterion ``Psi``,
    the penalty, the information matrix ``M`` (scaled), the knot values and the run."""

    objective: float
    gradient: np.ndarray
    criterion: float
    penalty: float
    M: np.ndarray
    knots: np.ndarray
    trajectory: Trajectory


def _engine_choice(engine: type[AbstractEngine] | str | AbstractEngineChoice | None) -> str | AbstractEngineChoice:
    """``build``'s engine argument as an engine choice (the engine classes name their choice)."""
    if engine is None:
        return "auto"
    if isinstance(engine, type):
        if engine not in (NativeEngine, PythonEngine):
            raise ModelError(f"engine {engine.__name__}: give NativeEngine, PythonEngine or an --engine name.")
        return engine.name
    return engine


@dataclasses.dataclass(frozen=True, eq=False)
class DesignProblem:
    """A design problem, built: engine of the signal model, second-order functions, the
    Fisher setup and the fixed scales (start criterion, output scales).

    Frozen; ``evaluate`` has no state between calls.  Build it with :meth:`build`.
    """

    spec: DesignSpec
    model: Model
    engine: AbstractEngine
    second: SecondOrder
    setup: FisherSetup
    criterion: AbstractCriterion
    scale: float
    output_scale: dict[str, float]
    knot_times: np.ndarray
    knot_index: np.ndarray
    grid: np.ndarray
    penalty_weight: float = PENALTY_WEIGHT
    #: Why the automatic engine choice fell back to the Python engine (None: it did not).
    engine_note: str | None = None
    #: The signal at the steps is linear in the knots: ``u = signal_matrix @ xi`` (sparse:
    #: a knot acts on the steps of its table's support only, so the matrix has about as many
    #: entries as the tables, not steps x knots).
    signal_matrix: sparse.csc_matrix = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "signal_matrix", _signal_matrix(self.model.signals[-1].tables, self.grid))

    def with_penalty_weight(self, weight: float) -> DesignProblem:
        """The same problem with another penalty weight ``W`` (module docstring)."""
        return dataclasses.replace(self, penalty_weight=float(weight))

    @property
    def compiled(self) -> CompiledModel:
        return self.engine.compiled

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def build(cls, spec: DesignSpec, model: Model, *, cache: BuildCache | None = None,
              engine: type[AbstractEngine] | str | AbstractEngineChoice | None = None,
              memory_limit: int | str | None = None) -> DesignProblem:
        """Build the signal model and everything fixed during the design.

        ``engine``: an engine choice (:func:`~fmi_adjoint.engines.choose_engine`, the one
        chooser; default ``auto``, whose fallback note is kept in :attr:`engine_note`), or
        ``NativeEngine``/``PythonEngine`` for ``native``/``python``.

        ``memory_limit`` (bytes or a size such as ``8G``; default: :func:`fmi_adjoint.budget.memory_limit`)
        bounds :func:`design_memory`, checked before the knot tables or any run exist.

        Raises
        ------
        MemoryBudgetError
            The design's arrays would exceed the memory limit (the figure and the fix).
        ModelError
            Unknown input, parameter or output; a parameter the outputs cannot see (the
            start input's Fisher matrix is singular in its direction, named); an input
            that acts on nothing.
        """
        numeric = [e.name for e in model.forces if isinstance(e, AbstractNumericElement)]
        if numeric:
            raise ModelError(f"force element '{numeric[0]}' of model '{model.name}' is numeric (Python code with "
                             "first derivatives only); optimal input design needs second derivatives: write it as "
                             "an expression element.")
        settings = model.simulation
        t_end = settings.t_end if spec.t_end is None else float(spec.t_end)
        step = settings.step if spec.step is None else float(spec.step)
        # Before the step grid itself (4e7 steps are 320 MB): the sizes follow from t_end/step.
        rows = int(t_end / step) + 2
        samples = rows if spec.sample is None else int(t_end / spec.sample) + 2
        design_memory(spec, model, rows, samples).check(memory_limit)
        grid = time_grid(0.0, t_end, step)
        if spec.knots > len(grid):
            raise ModelError(f"--knots {spec.knots} is more than the {len(grid)} step times of the run; knots between "
                             "steps act on nothing: give at most that many, or a smaller --step.")
        if spec.sample is not None and spec.sample > grid[-1] - grid[0]:
            raise ModelError(f"--sample {spec.sample:g} is longer than the experiment ({grid[-1] - grid[0]:g} s); "
                             "give a shorter sample interval.")
        knot_times = np.linspace(grid[0], grid[-1], spec.knots)
        lo, hi = spec.bounds
        designed = signal_model(model, spec.input, knot_times, spec.start_values(), spec.basis, grid, (lo, hi))
        for name in spec.params:
            par = model.parameter(name)
            if par.causality == "input":
                raise ModelError(f"'{name}' is an input, not a parameter to identify; remove it from --params.")
        cache = cache or BuildCache.default()
        derivation = Derivation(designed)
        compiled = compile_model(designed, cache=cache, derivation=derivation)
        chosen = choose_engine(designed, _engine_choice(engine), cache=cache, compiled=compiled, derivation=derivation,
                               second_order=True)
        built: AbstractEngine = chosen.engine
        second: SecondOrder | None = None
        if isinstance(built, NativeEngine):
            second = native_second_order(built.library)
        if second is None:
            second = compile_second_order(designed, cache=cache, derivation=derivation)
        params = np.array([compiled.parameter_index(name) for name in spec.params], dtype=int)
        outputs = set(compiled.output_names)
        for option, names in (("--noise", spec.noise), ("--end", spec.end), ("--limit", spec.limits)):
            unknown = [name for name in names if name not in outputs]
            if unknown:
                raise ModelError(f"{option} {excerpt(unknown[0])}: model '{model.name}' has no such output; outputs: "
                                 f"{', '.join(compiled.output_names)}.")
        channels = np.array([compiled.output_index(name) for name in spec.noise], dtype=int)
        sample = step if spec.sample is None else float(spec.sample)
        sample_times = time_grid(grid[0], grid[-1], sample) if sample > 0 else grid
        weights = np.ones(len(sample_times))
        if spec.integral:
            weights = np.zeros(len(sample_times))
            dt = np.diff(sample_times)
            weights[:-1] += 0.5 * dt
            weights[1:] += 0.5 * dt
        nominal = np.abs(compiled.defaults[params])
        zero = [spec.params[k] for k in np.flatnonzero(nominal == 0)]
        if zero:
            raise ModelError(f"parameter '{zero[0]}' has the nominal value 0, which cannot scale it; give its expected "
                             "value with --set.")
        setup = FisherSetup(params=params, channels=channels, sigma=np.array([float(s) for s in spec.noise.values()]),
                            sample_times=sample_times, weights=weights, scale=nominal)
        knot_index = np.array([compiled.parameter_index(name) for name in knot_names(spec.input, spec.knots)])
        problem = cls(spec, designed, built, second, setup, spec.criterion, 1.0, {}, knot_times, knot_index, grid,
                      engine_note=chosen.note)
        return problem._calibrated()

    def _calibrated(self) -> DesignProblem:
        """Fix the scales at the start input and check the parameters are visible."""
        z0 = self.start()
        p = self.parameters(z0)
        traj = self.simulate(p)
        terms = self.compiled.parameter_terms(traj.q, traj.v, traj.a, traj.lam, traj.t, traj.p)
        outputs = self.compiled.output_jacobians(traj.q, traj.v, traj.a, traj.lam, traj.t, traj.p)[4]
        initial = self.compiled.init_jacobians(*traj.init.split(), traj.t[0], traj.p)[1]
        acts = any(np.any(term[..., self.knot_index] != 0) for term in (*terms, outputs, initial))
        if not acts:
            raise ModelError(f"input '{self.spec.input}' acts on nothing in model '{self.model.name}' with the start "
                             "input; use it in a load or output expression (or start from other values, --start).")
        sens = sensitivities(self.engine, traj, self.setup.params)
        M = fisher_matrix(traj, self.setup, sens)
        self._check_visible(M, sens)
        del sens, terms, outputs
        criterion = self.criterion.calibrated(M)
        value, _ = criterion.evaluate(M)
        scale = abs(value) if criterion.name != "D" and value != 0 else 1.0
        Y = traj.outputs()
        names = self.compiled.output_names
        output_scale = {}
        for name in {**self.spec.end, **self.spec.limits}:
            largest = float(np.abs(Y[:, names.index(name)]).max())
            output_scale[name] = largest if largest > 0 else 1.0
        return dataclasses.replace(self, criterion=criterion, scale=scale, output_scale=output_scale)

    def _check_visible(self, M: np.ndarray, sens: Sensitivities) -> None:
        """A parameter the measured outputs do not see makes ``M`` singular: name it.  If the
        outputs do see it but ``M`` underflows (noise levels far above the outputs), say so."""
        diag = np.diag(M)
        largest = float(diag.max()) if diag.size else 0.0
        for j, name in enumerate(self.spec.params):
            if not diag[j] > 1e-14 * largest or largest == 0:
                seen = np.abs(sens.y[:, self.setup.channels, j]).max(axis=0) * self.setup.scale[j]
                if np.any(seen > 0):
                    c = int(np.argmax(seen / self.setup.sigma))
                    channel, sigma = list(self.spec.noise)[c], float(self.setup.sigma[c])
                    raise ModelError(
                        f"--noise {channel}={sigma:g}: parameter '{name}' moves '{channel}' by at most {seen[c]:.3g} "
                        f"(per unit relative change), but the noise level is {sigma / seen[c]:.3g} times that, so "
                        "its Fisher information underflows to 0; give the noise standard deviation in the "
                        f"output's unit (of the order of the measurement's precision, below {seen[c]:.3g}).")
                raise ModelError(f"parameter '{name}' does not affect the measured outputs "
                                 f"({', '.join(self.spec.noise)}) with the start input: the Fisher matrix is "
                                 "singular. Measure an output it acts on (--noise OUT=SIGMA) or drop it from --params.")
        lam, V = np.linalg.eigh(M)
        if lam[0] <= 1e-12 * lam[-1]:
            involved = [self.spec.params[j] for j in np.argsort(-np.abs(V[:, 0]))[:2]]
            raise ModelError(f"parameters {' and '.join(repr(x) for x in involved)} act on the measured outputs in "
                             "the same way (singular Fisher matrix); fix one of them or measure another output.")

    # -- evaluation ----------------------------------------------------------------------------
    def start(self) -> np.ndarray:
        """Design variables of the start input."""
        lo, hi = self.spec.bounds
        return self.spec.bound_map.inverse(self.spec.start_values(), lo, hi)

    def knot_values(self, z: np.ndarray) -> np.ndarray:
        """``xi = psi(z)``."""
        lo, hi = self.spec.bounds
        return np.asarray(self.spec.bound_map.value(np.asarray(z, dtype=float), lo, hi))

    def parameters(self, z: np.ndarray) -> np.ndarray:
        """The model's parameter vector with the knots of ``z``."""
        p = self.compiled.defaults.copy()
        p[self.knot_index] = self.knot_values(z)
        return p

    def simulate(self, p: np.ndarray) -> Trajectory:
        """The run of the parameter vector ``p``."""
        return self.engine.simulate(p, t_end=float(self.grid[-1]), step=self.spec.step or self.model.simulation.step)

    def input_signal(self, z: np.ndarray) -> np.ndarray:
        """``u`` at the step times (:attr:`grid`), as the engines interpolate its tables."""
        return self.signal_matrix @ self.knot_values(z)

    def fisher(self, z: np.ndarray) -> tuple[np.ndarray, Trajectory, Sensitivities]:
        """Scaled ``M`` at ``z``, with the run and its sensitivities.

        Raises
        ------
        ConvergenceError
            The run failed, or its sensitivities (or ``M``) overflow.
        """
        traj = self.simulate(self.parameters(z))
        sens = sensitivities(self.engine, traj, self.setup.params)
        M = fisher_matrix(traj, self.setup, sens)
        if not np.all(np.isfinite(M)):
            raise ConvergenceError(
                f"model '{self.model.name}': the sensitivities of the outputs overflow with this input (the "
                "Fisher matrix is not finite); check that the model is stable with these parameter values, "
                "shorten the experiment (--t-end) or narrow the input's bounds.")
        return M, traj, sens

    def standard_errors(self, M: np.ndarray) -> np.ndarray:
        """Cramér-Rao bounds of the parameters in their units (``sqrt(diag M^-1)`` unscaled)."""
        try:
            covariance = np.linalg.inv(M)
        except np.linalg.LinAlgError:
            return np.full(len(M), np.inf)
        return np.sqrt(np.maximum(np.diag(covariance), 0.0)) * self.setup.scale

    def evaluate(self, z: np.ndarray, *, gradient: bool = True) -> DesignValue:
        """Objective and exact gradient at ``z`` (module docstring)."""
        z = np.asarray(z, dtype=float)
        weight = self.penalty_weight
        M, traj, sens = self.fisher(z)
        value, dpsi = self.criterion.evaluate(M)
        Y = traj.outputs()
        seed = np.zeros_like(Y)
        penalty = 0.0
        names = self.compiled.output_names
        for name, target in self.spec.end.items():
            o = names.index(name)
            scale = self.output_scale[name]
            miss = (Y[-1, o] - target) / scale
            penalty += weight * miss * miss
            seed[-1, o] += 2.0 * weight * miss / scale
        n_samples = len(self.setup.sample_times)
        for name, limit in self.spec.limits.items():
            o = names.index(name)
            # On the step grid (every step the engines computed), normalized per sample.
            excess = np.maximum(np.abs(Y[:, o]) - limit, 0.0) / limit
            penalty += weight * float(np.sum(excess * excess)) / n_samples
            seed[:, o] += 2.0 * weight * excess * np.sign(Y[:, o]) / limit / n_samples
        knots = self.knot_values(z)
        rate_gradient = np.zeros_like(knots)
        if self.spec.rate is not None:
            slope = np.diff(knots) / np.diff(self.knot_times)
            excess = np.maximum(np.abs(slope) - self.spec.rate, 0.0) / self.spec.rate
            penalty += weight * float(np.sum(excess * excess))
            d = 2.0 * weight * excess * np.sign(slope) / self.spec.rate / np.diff(self.knot_times)
            rate_gradient[1:] += d
            rate_gradient[:-1] -= d
        # Between knots a cubic spline can leave [lo, hi] although its knots are inside: the
        # signal at the steps (u = Phi xi, linear in the knots) is held in by a penalty too.
        lo, hi = self.spec.bounds
        u = self.signal_matrix @ knots
        outside = (np.maximum(u - hi, 0.0) - np.maximum(lo - u, 0.0)) / (hi - lo)
        penalty += weight * float(np.sum(outside * outside)) / len(u)
        rate_gradient += self.signal_matrix.T @ (2.0 * weight * outside / (hi - lo) / len(u))
        objective = value / self.scale + penalty
        grad = np.zeros_like(z)
        if gradient and math.isfinite(value):
            full = criterion_gradient(self.engine, traj, self.setup, dpsi / self.scale, self.second, sens,
                                      output_seed=seed)
            dknots = full[self.knot_index] + rate_gradient
            grad = dknots * self.spec.bound_map.derivative(z, lo, hi)
        return DesignValue(objective=float(objective), gradient=grad, criterion=float(value), penalty=float(penalty),
                           M=M, knots=knots, trajectory=traj)


def _signal_matrix(tables, grid: np.ndarray) -> sparse.csc_matrix:
    """``Phi`` with ``u(grid) = Phi xi``: column k is knot k's table interpolated at the steps,
    computed on the steps its non-zero values reach only."""
    rows, cols, values = [], [], []
    for k, (times, table) in enumerate(tables):
        times, table = np.asarray(times, dtype=float), np.asarray(table, dtype=float)
        nonzero = np.flatnonzero(table)
        if not nonzero.size:
            continue
        # Between the zeros around the non-zero values (interpolation is zero outside them).
        lo = times[max(nonzero[0] - 1, 0)]
        hi = times[min(nonzero[-1] + 1, len(times) - 1)]
        steps = np.arange(np.searchsorted(grid, lo, side="left"), np.searchsorted(grid, hi, side="right"))
        rows.append(steps)
        cols.append(np.full(len(steps), k))
        values.append(np.interp(grid[steps], times, table))
    if not rows:
        return sparse.csc_matrix((len(grid), len(tables)))
    return sparse.csc_matrix((np.concatenate(values), (np.concatenate(rows), np.concatenate(cols))),
                             shape=(len(grid), len(tables)))


def design_memory(spec: DesignSpec, model: Model, rows: int, samples: int) -> MemoryEstimate:
    """An upper bound of the dominant arrays of a design of ``rows`` step times and
    ``samples`` samples, from the sizes of ``model`` and ``spec`` alone (nothing is built).

    Counted together although they live one after the other, in doubles per step: the
    trajectories (states, outputs, the penalty seeds; the start, the last and the final
    design keep one each); the forward sensitivities (states x parameters, with the output
    sensitivities and their einsum terms); the output Jacobians (outputs x every argument,
    the knots among the parameters); the parameter Jacobians of the start check; the adjoint
    sweeps of the criterion gradient (one column per parameter) and a chunk of its
    second-order terms; and the knot tables with the code generated from them.
    """
    n = len(model.all_coordinates)
    m = len(model.constraints) + len(model.prescribed)
    ny, P, K = len(model.outputs), len(spec.params), spec.knots
    n_p = len(model.all_parameters) + K
    S = 3 * n + m
    if isinstance(spec.basis, CubicSpline):
        # Each table: the steps within REACH knot spacings on either side, and four zeros;
        # the signal matrix has an entry for each.
        points = K * (min(rows, (2 * CubicSpline.REACH + 2) * rows / max(K - 1, 1)) + 4)
        entries = points
    else:
        points, entries = 5 * K, 2 * rows  # the hats; two knots act on a step
    steps = f"{rows:.3g} steps"
    parts = (
        (f"trajectories of {steps} x {S} states and {ny} outputs", 3 * doubles(rows, S + 1 + 2 * ny)),
        (f"forward sensitivities of {steps} x {S} states x {P} parameters",
         doubles(rows, S + 4 * ny, P)),
        (f"output Jacobians of {steps} x {ny} outputs x {S + n_p} arguments ({K} knots)",
         doubles(rows, ny, S + n_p)),
        (f"parameter Jacobians of {steps} x {2 * n + m} equations x {n_p} parameters ({K} knots)",
         doubles(rows, 2 * n + m, n_p)),
        (f"adjoint sweeps of {steps} x {n + m} adjoint states x {P} parameters",
         doubles(rows, 3 * (n + m) + ny, P) + 2 * doubles(rows, S)),
        (f"{samples:.3g} samples of {len(spec.noise)} outputs x {P} parameters",
         doubles(samples, 6 + 3 * len(spec.noise) * P)),
        ("second-order terms of the gradient", 2 * min(doubles(rows, P, n_p + 4 * n + 2 * m), 8 * SECOND_ORDER_CHUNK)),
        # As Python floats in the model, as text in the generated code and in the compiler:
        # about 300 bytes a table point (a 2001-knot cubic design of two_mass took 34 MB more
        # than the linear one for 119 000 more points); 16 bytes a signal-matrix entry.
        (f"{K} knot tables of {points:.3g} points in all and the signal matrix", int(300 * points + 16 * entries)),
    )
    return MemoryEstimate(
        "this design", parts,
        "Lower --t-end, raise --step or --sample, or use fewer --knots")
