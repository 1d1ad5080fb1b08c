"""Identification with scipy.optimize: L-BFGS-B on adjoint gradients, or trust-region
least squares on forward sensitivities, both in scaled variables."""

from __future__ import annotations

import abc
import dataclasses
import math
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, TextIO

import numpy as np

from ..choices import look_up
from ..errors import ConvergenceError, IdentificationError
from ..linesearch import probe_line, projected_descent
from .problem import AbstractProblem

if TYPE_CHECKING:
    from scipy import optimize
from .scaling import ParameterScaling

__all__ = ["AbstractOptimizer", "IdentificationResult", "LBFGSB", "LeastSquares", "OPTIMIZERS", "OPTIMIZER_CHOICES",
           "OptimizerRun", "default_optimizer", "identify", "lbfgsb_stop", "least_squares_stop", "optimizer"]


def default_optimizer(problem: AbstractProblem) -> str:
    """The name of the optimizer ``--method auto`` (the default) runs on ``problem`` (issue 32;
    :func:`optimizer` gives the object).

    Gauss-Newton (``least_squares``, trust-region reflective) where every experiment's cost is
    a time-domain least-squares cost: its steps use the residual Jacobian, so on many strongly
    coupled parameters it converges where L-BFGS-B spends its iteration limit building a
    curvature model, and where L-BFGS-B's end then depends on round-off (the strut's twelve
    parameters: 4.0 standard errors off with OpenBLAS's Haswell kernel, 2.43 with Gauss-Newton
    on every kernel; ``tests/test_strategies.py``).  L-BFGS-B with the adjoint gradient for the
    spectral, order and POD costs, which have no residuals.
    """
    if problem.has_residuals:
        return LeastSquares.name
    return LBFGSB.name


_FAILED_COST_FACTOR = 1e6
# scipy's L-BFGS-B stops when (f_k - f_k+1) / max(|f_k|, |f_k+1|, 1) <= ftol.  The cost is
# normalized to 1 at the start, so that test is absolute; it must sit near round-off of
# the normalized cost, otherwise the run stops while the parameters still move.
_LBFGSB_FTOL = 1e-16
_LBFGSB_GTOL = 1e-12
#: scipy's least-squares gtol, on the residuals normalized by their norm at the start (so it is
#: relative to the start's cost, see :func:`identify`).
_LSQ_GTOL = 1e-14
#: A stop of L-BFGS-B without decrease counts as converged when the (scaled) gradient has
#: fallen below this fraction of its start value.
_STATIONARY = 1e-5


@dataclasses.dataclass(frozen=True)
class IdentificationResult:
    """Outcome of an identification run.

    Attributes
    ----------
    names : tuple of str
    initial, parameters : numpy.ndarray
        Start and identified values (physical units).
    cost_initial, cost : float
    cost_history, gradient_norm_history : list of float
        Per iteration (the gradient norm is in scaled variables).
    iterations, simulations : int
    success : bool
    message : str
    method : str
    std_errors : list of float or None
    correlation : list of list of float or None
    seconds : float
    active_bounds : tuple of str
        Parameters that ended on a bound; their standard errors assume an interior
        optimum and are only indicative.
    failed_simulations : int
        Trial points the integrator could not simulate (Newton failure); the optimizer
        was steered away from them by a large cost.
    unidentifiable : tuple of str
    optimizer_message : str
        scipy's message as it stopped (``ABNORMAL: ``, ``STOP: TOTAL NO. OF ITERATIONS ...``,
        least squares' status text); :attr:`message` translates an unsuccessful stop into its
        cause and a fix (:func:`lbfgsb_stop`, :func:`least_squares_stop`).
    """

    names: tuple[str, ...]
    initial: np.ndarray
    parameters: np.ndarray
    cost_initial: float
    cost: float
    cost_history: list[float]
    gradient_norm_history: list[float]
    iterations: int
    simulations: int
    success: bool
    message: str
    method: str
    std_errors: list | None
    correlation: list | None
    seconds: float
    active_bounds: tuple[str, ...] = ()
    failed_simulations: int = 0
    unidentifiable: tuple[str, ...] = ()
    #: scipy's own words for the stop (``message`` says what it means and what to do).
    optimizer_message: str = ""

    def to_json(self) -> dict:
        """JSON-serializable summary (the format written by ``fmi-adjoint identify``)."""
        def named(values):
            return None if values is None else {n: (None if v is None else float(v))
                                                for n, v in zip(self.names, values)}

        return {
            "parameters": named(self.parameters),
            "initial": named(self.initial),
            "std_errors": named(self.std_errors) if self.std_errors is not None else None,
            "correlation": self.correlation,
            # NaN where the start values could not be simulated over the whole record (a staged fit).
            "cost_initial": self.cost_initial if math.isfinite(self.cost_initial) else None,
            "cost": self.cost,
            "cost_history": self.cost_history,
            "gradient_norm_history": self.gradient_norm_history,
            "iterations": self.iterations,
            "simulations": self.simulations,
            "success": self.success,
            "message": self.message,
            "optimizer_message": self.optimizer_message,
            "method": self.method,
            "seconds": self.seconds,
            "active_bounds": list(self.active_bounds),
            "failed_simulations": self.failed_simulations,
            "unidentifiable": list(self.unidentifiable),
        }


class _Progress:
    def __init__(self, names, stream: TextIO | None, label: str = ""):
        self.names = names
        self.stream = stream
        self.label = label
        self.iteration = 0

    def line(self, J: float, gnorm: float, x: np.ndarray) -> None:
        if self.stream is None:
            return
        values = " ".join(f"{n}={v:.6g}" for n, v in zip(self.names, x))
        # One write per line: the starts of a multi-start print from several threads.
        self.stream.write(f"{self.label}iter {self.iteration:4d}  J={J:.6e}  |g|={gnorm:.3e}  {values}\n")
        self.stream.flush()


def identify(
    problem: AbstractProblem,
    method: str | AbstractOptimizer = "lbfgsb",
    *,
    scaling: str = "auto",
    max_iterations: int = 200,
    tolerance: float = 1e-12,
    progress: TextIO | str | None = "stderr",
    statistics: bool = True,
    label: str = "",
) -> IdentificationResult:
    """Identify the parameters of ``problem``.

    Parameters
    ----------
    problem : AbstractProblem
        An :class:`~fmi_adjoint.identify.IdentificationProblem`, a distributed or an FMU problem.
    method : {"lbfgsb", "least_squares"} or AbstractOptimizer
        ``lbfgsb`` (:class:`LBFGSB`): scipy's L-BFGS-B with discrete-adjoint gradients, on the
        cost normalized by its start value.  ``least_squares`` (:class:`LeastSquares`): scipy's
        trust-region reflective method with the residual Jacobian from forward sensitivities.
        A name is looked up once, here (:func:`optimizer`).
    scaling : {"auto", "bounds", "log", "none"}
        See :class:`~fmi_adjoint.identify.scaling.ParameterScaling`.
    max_iterations : int
    tolerance : float
        ``ftol`` and ``xtol`` of least squares (relative cost decrease and step).  L-BFGS-B
        runs until its projected gradient or cost decrease reaches round-off of the
        normalized cost, or ``max_iterations``.
    progress : text stream, "stderr" or None
        One line per iteration is written here; ``"stderr"`` (the default) means the
        ``sys.stderr`` current at the call.
    statistics : bool
        Compute standard errors and correlations (needs least-squares costs).
    label : str
        Prefix of the progress lines (``"start  3 "`` in a multi-start).

    Returns
    -------
    IdentificationResult
    """
    chosen = optimizer(method)
    if isinstance(progress, str) and progress != "stderr":
        raise IdentificationError(f"progress {progress!r} is not a text stream, 'stderr' or None; pass one of those.")
    started = time.perf_counter()
    sims0 = problem.simulations
    scale = ParameterScaling.create(problem.names, problem.start, problem.lower, problem.upper, scaling)
    fit = _Fit(problem, scale, scale.to_scaled(problem.start),
               _Progress(problem.names, sys.stderr if isinstance(progress, str) else progress, label))
    run = chosen.run(fit, max_iterations=max_iterations, tolerance=tolerance)
    x = fit.physical(run.u)
    stats: dict = {"std_errors": None, "correlation": None}
    if statistics:
        try:
            stats = problem.statistics(x)
        except IdentificationError:  # a cost that is not a sum of squares has no statistics
            pass
    return IdentificationResult(
        names=problem.names,
        initial=problem.start.copy(),
        parameters=x,
        cost_initial=fit.cost_history[0] if fit.cost_history else float("nan"),
        cost=run.cost,
        cost_history=fit.cost_history,
        gradient_norm_history=fit.gradient_norm_history,
        iterations=run.iterations,
        simulations=problem.simulations - sims0,
        success=run.success,
        message=run.message,
        optimizer_message=run.optimizer_message,
        method=chosen.name,
        std_errors=stats["std_errors"],
        correlation=stats["correlation"],
        seconds=time.perf_counter() - started,
        failed_simulations=fit.failed,
        unidentifiable=tuple(problem.names[i] for i in stats.get("unidentifiable", ())),
        active_bounds=tuple(
            name
            for name, value, lo, hi in zip(problem.names, x, problem.lower, problem.upper)
            if np.isclose(value, lo, rtol=1e-9, atol=0) or np.isclose(value, hi, rtol=1e-9, atol=0)
        ),
    )


# -- the optimizers -----------------------------------------------------------------------
class _Fit:
    """One :func:`identify` run's shared state: the problem in scaled variables, the progress
    lines, the histories and the count of trial points that could not be simulated (the
    optimizer appends to them as it runs; :func:`identify` reads them at the end)."""

    def __init__(self, problem: AbstractProblem, scale: ParameterScaling, u0: np.ndarray, progress: _Progress):
        self.problem, self.scale, self.u0, self.progress = problem, scale, u0, progress
        self.cost_history: list[float] = []
        self.gradient_norm_history: list[float] = []
        #: Trial points the integrator could not simulate (Newton failure).
        self.failed = 0

    def physical(self, u: np.ndarray) -> np.ndarray:
        # The start point is evaluated at exactly the given values (the scaling round trip
        # may move them by an ulp, which a sensitive cost notices).
        return self.problem.start.copy() if np.array_equal(u, self.u0) else self.scale.to_physical(u)

    def record(self, J: float, gnorm: float, x: np.ndarray) -> None:
        """One entry of the histories and its progress line."""
        self.cost_history.append(J)
        self.gradient_norm_history.append(gnorm)
        self.progress.line(J, gnorm, x)

    def lower_upper(self) -> tuple[np.ndarray, np.ndarray]:
        """The scaled bounds as arrays (infinite where open)."""
        bounds = self.scale.scaled_bounds()
        return (np.array([-np.inf if b[0] is None else b[0] for b in bounds]),
                np.array([np.inf if b[1] is None else b[1] for b in bounds]))


@dataclasses.dataclass(frozen=True)
class OptimizerRun:
    """Where an optimizer stopped (scaled variables), and why."""

    u: np.ndarray
    cost: float
    iterations: int
    success: bool
    message: str
    optimizer_message: str


class AbstractOptimizer(abc.ABC):
    """An optimizer :func:`identify` runs (``--method``): one object per optimizer, looked up
    from its name once by :func:`optimizer`.

    Adding one: subclass, set :attr:`name` and :attr:`start_entries`, implement :meth:`run`
    (record the histories through ``fit.record``), and add an instance to
    :data:`OPTIMIZER_CHOICES`.
    """

    #: The ``--method`` name, recorded as the result's ``method``.
    name: ClassVar[str]
    #: History entries a run records before its first iteration's (L-BFGS-B records its start
    #: and each iteration; least squares each Jacobian, its start's included):
    #: :func:`~fmi_adjoint.identify.strategies.stage_starts` finds the stages with it.
    start_entries: ClassVar[int]

    @abc.abstractmethod
    def run(self, fit: _Fit, *, max_iterations: int, tolerance: float) -> OptimizerRun:
        """Minimize ``fit.problem``'s cost from ``fit.u0``."""


class _LbfgsbObjective:
    """The normalized cost and its scaled gradient for L-BFGS-B, with the last evaluation
    cached (scipy asks for the same point twice).  A trial point the integrator cannot
    simulate gets a large cost and the last good gradient reversed, so that the line search
    steps back towards the last good point."""

    def __init__(self, fit: _Fit):
        self.fit = fit
        problem = fit.problem
        first = problem.evaluate(problem.start, problem.gradient_method)
        self.J_start = first.J
        self.J0 = first.J if first.J > 0 else 1.0
        self.cache: dict[bytes, tuple[float, np.ndarray]] = {fit.u0.tobytes(): (first.J, first.gradient)}
        self.last_good: tuple[float, np.ndarray] = (first.J, first.gradient)
        #: Failed trial points before the current line search.
        self.failed_before_search = 0

    def __call__(self, u: np.ndarray) -> tuple[float, np.ndarray]:
        key = u.tobytes()
        if key not in self.cache:
            problem = self.fit.problem
            try:
                ev = problem.evaluate(self.fit.physical(u), problem.gradient_method)
                value = (ev.J, ev.gradient)
                self.last_good = value
            except ConvergenceError:
                self.fit.failed += 1
                J_good, g_good = self.last_good
                value = (_FAILED_COST_FACTOR * max(J_good, self.J0), -np.asarray(g_good))
            self.cache.clear()
            self.cache[key] = value
        J, g = self.cache[key]
        return J / self.J0, g * self.fit.scale.derivative(u) / self.J0

    def callback(self, u: np.ndarray) -> None:
        """scipy's per-iteration callback: one history entry and progress line."""
        self.failed_before_search = self.fit.failed
        J, g = self(u)
        self.fit.progress.iteration += 1
        self.fit.record(J * self.J0, float(np.linalg.norm(g)), self.fit.physical(u))


@dataclasses.dataclass(frozen=True)
class LBFGSB(AbstractOptimizer):
    """scipy's L-BFGS-B on the problem's gradient (``gradient_method``), on the cost normalized
    by its start value, in scaled variables."""

    name: ClassVar[str] = "lbfgsb"
    start_entries: ClassVar[int] = 1

    def run(self, fit: _Fit, *, max_iterations: int, tolerance: float) -> OptimizerRun:
        fun = _LbfgsbObjective(fit)
        fit.record(fun.J_start, float(np.linalg.norm(fun(fit.u0)[1])), fit.problem.start)
        bounds = fit.scale.scaled_bounds()
        from scipy import optimize  # noqa: PLC0415 (0.25 s at import: not on the command line's start)

        res = optimize.minimize(
            fun, fit.u0, jac=True, method="L-BFGS-B", bounds=bounds, callback=fun.callback,
            options={"maxiter": max_iterations, "ftol": _LBFGSB_FTOL, "gtol": _LBFGSB_GTOL, "maxcor": 20},
        )
        success, message = lbfgsb_stop(res, fun, bounds, fit.gradient_norm_history, fit.cost_history,
                                       fd=fit.problem.gradient_method == "fd", max_iterations=max_iterations,
                                       failed=lambda: fit.failed,
                                       failed_in_last_search=fit.failed > fun.failed_before_search)
        cost = fun(res.x)[0] * fun.J0
        return OptimizerRun(res.x, cost, int(res.nit), success, message, str(res.message))


class _ResidualObjective:
    """The residuals normalized by the start's, and their scaled Jacobian, for scipy's
    trust-region least squares (last evaluation cached).  An unsimulatable trial point gets
    much larger residuals, so that the trust region shrinks; the Jacobian is never requested
    at a rejected point."""

    def __init__(self, fit: _Fit):
        self.fit = fit
        self.cache: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        self.last_r: np.ndarray | None = None
        #: The start is in the history already (a start at a bound): scipy's first Jacobian,
        #: at the start moved inside its bound by 1e-10, stands for it (no second "iter 0").
        self.recorded_start = False
        self.unit = 1.0

    def evaluate(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        key = u.tobytes()
        if key not in self.cache:
            try:
                r, Jr = self.fit.problem.residuals(self.fit.physical(u))
                self.last_r = r
            except ConvergenceError:
                if self.last_r is None:
                    raise
                self.fit.failed += 1
                r, Jr = np.sqrt(_FAILED_COST_FACTOR) * self.last_r, np.zeros((self.last_r.size, len(u)))
            self.cache.clear()
            self.cache[key] = (r, Jr * self.fit.scale.derivative(u)[None, :])
        return self.cache[key]

    def jacobian(self, u: np.ndarray) -> np.ndarray:
        r, Ju = self.evaluate(u)
        if self.recorded_start:
            self.recorded_start = False
        else:
            self.fit.record(0.5 * float(r @ r), float(np.linalg.norm(Ju.T @ r)), self.fit.physical(u))
        self.fit.progress.iteration += 1
        return Ju


@dataclasses.dataclass(frozen=True)
class LeastSquares(AbstractOptimizer):
    """scipy's trust-region reflective least squares on the residual Jacobian (forward
    sensitivities), in scaled variables."""

    name: ClassVar[str] = "least_squares"
    start_entries: ClassVar[int] = 0

    def run(self, fit: _Fit, *, max_iterations: int, tolerance: float) -> OptimizerRun:
        problem, u0 = fit.problem, fit.u0
        objective = _ResidualObjective(fit)
        lo, hi = fit.lower_upper()
        # scipy's trust-region method moves a start within 1e-10 (relative) of a bound
        # slightly inside before its first evaluation; the history starts at the given values
        # all the same.
        near = (u0 - lo <= 1e-10 * np.maximum(1, np.abs(lo))) | (hi - u0 <= 1e-10 * np.maximum(1, np.abs(hi)))
        if np.any(near):
            r0, jac0 = problem.residuals(problem.start)
            assert jac0 is not None  # jacobian=True always returns the Jacobian
            fit.record(0.5 * float(r0 @ r0), float(np.linalg.norm((jac0 * fit.scale.derivative(u0)[None, :]).T @ r0)),
                       problem.start)
            objective.recorded_start = True
        # The residuals are normalized by the start's (the cost starts at 1/2, as L-BFGS-B's is
        # normalized): scipy's gtol is absolute, so on a cost that is already small at the start
        # (noise-free data, the later windows of a staged fit) it stopped the run at a gradient
        # that was small only in absolute terms, short of the minimum (measured: sdof through
        # its FMU's adjoint path, c 3.8e-6 off).  The trust-region steps do not depend on the
        # normalization; ftol and xtol are relative.
        r_start = objective.evaluate(u0)[0]
        norm = float(np.sqrt(r_start @ r_start))
        unit = 1.0 / norm if norm > 0 and np.isfinite(norm) else 1.0
        from scipy import optimize  # noqa: PLC0415 (0.25 s at import: not on the command line's start)

        res = optimize.least_squares(
            lambda u: unit * objective.evaluate(u)[0], u0, jac=lambda u: unit * objective.jacobian(u),
            bounds=(lo, hi), method="trf", ftol=tolerance, xtol=tolerance, gtol=_LSQ_GTOL, max_nfev=max_iterations,
            x_scale=1.0,
        )
        success, message = least_squares_stop(res, max_iterations)
        return OptimizerRun(res.x, float(res.cost) / unit**2, int(res.njev or len(fit.cost_history)), success,
                            message, str(res.message))


#: The optimizers by ``--method`` name.
OPTIMIZER_CHOICES: dict[str, AbstractOptimizer] = {o.name: o for o in (LBFGSB(), LeastSquares())}
#: ``--method`` names.
OPTIMIZERS = tuple(OPTIMIZER_CHOICES)


def optimizer(method: str | AbstractOptimizer) -> AbstractOptimizer:
    """The optimizer of a ``--method`` name (an optimizer object is returned as it is)."""
    return look_up(OPTIMIZER_CHOICES, method, "optimizer", AbstractOptimizer, IdentificationError)


# -- why the optimizer stopped, in words ------------------------------------------------
#: Steps (scaled variables, along the projected steepest descent) of the probes that say why a
#: line search failed: the cost's difference quotients there, compared with each other and
#: with the gradient, and the Taylor remainder's order (:mod:`fmi_adjoint.linesearch`).
_PROBE_STEPS = (1e-3, 1e-5)
#: Two slopes agree when they differ by less than this fraction of the larger.
_SLOPE_AGREEMENT = 0.1
#: A change of the normalized cost below this fraction of it is round-off.
_ROUND_OFF = 1e-12


def lbfgsb_stop(res: optimize.OptimizeResult, fun, bounds, gnorm_history: list[float], cost_history: list[float], *,
                fd: bool, max_iterations: int, failed: Callable[[], int], failed_in_last_search: bool = False
                ) -> tuple[bool, str]:
    """``(success, message)`` of an L-BFGS-B run: its cause and a fix for every unsuccessful stop.

    ``fun(u) -> (J, g)`` is the normalized cost in scaled variables.  A failed line search
    (scipy's ``ABNORMAL: ``) is convergence when the gradients are finite differences (their
    error exceeds the remaining decrease) or the gradient has collapsed to
    ``_STATIONARY`` of its start value (the cost changes only at round-off); otherwise the
    cost is probed at the stop (:func:`_line_search_failure`) to name the cause.
    ``failed()`` counts the trial points that could not be simulated so far (``fun``'s probes
    add to it); ``failed_in_last_search``
    says whether the failed line search met some.
    """
    raw = str(res.message).strip()
    if res.success:
        return True, raw
    if res.status == 1:
        return False, _limit_message(f"{int(res.nit)} iterations (--max-iter {max_iterations})", max_iterations,
                                     gnorm_history, cost_history, raw)
    if raw.startswith("ABNORMAL"):
        g_final = float(np.linalg.norm(fun(res.x)[1]))
        if fd and res.nit > 0:
            return True, ("converged to the accuracy of the finite-difference gradients (the line search found no "
                          "further decrease)")
        if res.nit > 0 and g_final <= _STATIONARY * gnorm_history[0]:
            return True, (f"converged: the gradient fell to {g_final / gnorm_history[0]:.1e} of its start value and "
                          "the line search found no further decrease (round-off level)")
        cause = _line_search_failure(fun, np.asarray(res.x, dtype=float), bounds, failed, failed_in_last_search)
        return False, f"{cause} (L-BFGS-B: {raw})"
    return False, (f"L-BFGS-B stopped without converging ({raw}). Try --method least_squares, or other starts "
                   "(--starts 8).")


def _limit_message(what: str, max_iterations: int, gnorm_history: list[float], cost_history: list[float],
                   raw: str) -> str:
    detail = []
    if len(cost_history) >= 2 and cost_history[-2] > 0:
        drop = (cost_history[-2] - cost_history[-1]) / cost_history[-2]
        detail.append(f"the last iteration lowered the cost by {drop:.1e} of its value")
    if gnorm_history and gnorm_history[0] > 0:
        detail.append(f"the gradient is at {gnorm_history[-1] / gnorm_history[0]:.1e} of its start value")
    return (f"stopped at the iteration limit, {what}, before converging{': ' if detail else ''}{'; '.join(detail)}. "
            f"Raise the limit (e.g. --max-iter {2 * max_iterations}) or start closer to the optimum (--set NAME=VALUE, "
            f"--starts 8) ({raw}).")


def _line_search_failure(fun, u: np.ndarray, bounds, failed: Callable[[], int], failed_in_last_search: bool) -> str:
    """Why L-BFGS-B's line search found no decrease at ``u``, and what to do.

    Along the projected steepest descent ``e`` the gradient predicts the rate of decrease
    ``|P g|``; the cost at two steps (:data:`_PROBE_STEPS`, :func:`fmi_adjoint.linesearch.probe_line`)
    says which of the causes it is: a trial point that cannot be simulated (in the failed line
    search or in the probes); a cost that does not change at all (flat: a plateau, or the
    gradient is noise); rates of decrease that agree with each other but not with the gradient
    (the gradient is not that of the computed cost); a Taylor remainder of the wrong order (a
    kink or jump: :meth:`~fmi_adjoint.linesearch.LineProbe.kink`, the test the design's stop
    uses as well); or none of these (a badly conditioned valley).
    """
    lo = np.array([-np.inf if b[0] is None else b[0] for b in bounds])
    hi = np.array([np.inf if b[1] is None else b[1] for b in bounds])
    J0, g = fun(u)
    d = projected_descent(g, u, lo, hi)
    slope = float(np.linalg.norm(d))
    if slope == 0.0 or not np.isfinite(slope):
        return ("the line search found no decrease: the gradient points out of the bounds for every parameter that "
                "moves the cost, so the fit ends on its bounds. Widen the bounds (--bounds NAME=LO:HI) if the values "
                "there are not physical limits.")
    e = d / slope
    before = failed()
    probe = probe_line(lambda v: fun(v)[0], u, e, g, J0, _PROBE_STEPS, lo, hi)
    if failed() > before or failed_in_last_search:
        return ("the line search found no decrease because the model cannot be simulated just past this "
                "point (Newton failed at trial points of the line search): the minimum of the simulatable region "
                "lies at its edge. Bound the parameters to values that simulate (--bounds NAME=LO:HI) or start "
                "elsewhere (--set NAME=VALUE, --starts 8).")
    q1, q2 = probe.rates
    noise = _ROUND_OFF * max(abs(J0), 1e-300)
    s1, s2 = _PROBE_STEPS
    if probe.flat(noise):
        if slope * s1 <= noise * 1e3:
            return ("the line search found no decrease because the cost is flat here: a step of "
                    f"{s1:g} (scaled) changes it only at round-off, and the gradient is as small. The data hardly "
                    "depend on the parameters at this point (a plateau). Try other starts (--starts 8, --strategy), "
                    "or identify fewer parameters (--params) if the result's standard errors are large.")
        return ("the line search found no decrease because the gradient is inaccurate: it predicts that the cost "
                f"falls at a rate of {slope:.3g} but the cost does not change beyond round-off over a step of "
                f"{s1:g} (scaled). Check "
                "the gradient against finite differences ('fmi-adjoint gradient ... --method fd'), and use "
                "--method least_squares (no line search) or --gradient fd for an FMU.")

    def differ(a: float, b: float, floor: float) -> bool:
        return abs(a - b) > _SLOPE_AGREEMENT * max(abs(a), abs(b)) + floor

    if not differ(q1, q2, noise / s2) and differ(q2, slope, noise / s2):
        return ("the line search found no decrease because the gradient is inaccurate: along the steepest descent "
                f"it predicts that the cost falls at a rate of {slope:.3g} but its difference quotients give "
                f"{q2:.3g} (steps "
                f"{s1:g} and {s2:g}, scaled). Check it with 'fmi-adjoint gradient ... --method fd', and use "
                "--method least_squares (no line search) or --gradient fd for an FMU.")
    if probe.kink(noise):
        return ("the line search found no decrease because the cost is not smooth here: along the steepest "
                f"descent it falls at a rate of {q1:.3g} over a step of {s1:g} but {q2:.3g} over {s2:g} (scaled; the "
                f"gradient predicts {slope:.3g}), a kink or jump (a switching law such as sign, abs, min or max, a "
                "table, an "
                "event). Use --method least_squares (trust region, no line search) or other starts (--starts 8, "
                "--strategy); smooth the switching law if the model has one.")
    return ("the line search found no decrease although the gradient matches the cost here (rate of decrease "
            f"{slope:.3g}): the cost is badly conditioned along the search directions (a narrow curved valley). "
            "Use --method least_squares (Gauss-Newton steps) or other starts (--starts 8, --strategy).")


def least_squares_stop(res: optimize.OptimizeResult, max_iterations: int) -> tuple[bool, str]:
    """``(success, message)`` of scipy's trust-region least squares: its own message for the
    converged stops (status 1-4: gtol, ftol, xtol), the cause and the fix otherwise."""
    raw = str(res.message).strip()
    if res.status > 0:
        return True, raw
    if res.status == 0:
        return False, (f"stopped at the evaluation limit: {int(res.nfev)} residual evaluations (--max-iter "
                       f"{max_iterations} bounds them for least_squares) before the cost or the step stopped "
                       f"changing. Raise the limit (e.g. --max-iter {2 * max_iterations}) or start closer to the "
                       f"optimum (--set NAME=VALUE, --starts 8) ({raw}).")
    return False, (f"the trust-region solver stopped on its input ({raw}): a residual or Jacobian entry that is not "
                   "finite. Check the data for NaN values and the parameters for values that do not simulate.")
