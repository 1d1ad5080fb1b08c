"""Identification with scipy.optimize: L-BFGS-B on adjoint gradients, or trust-region
least squares on forward sensitivities, both in scaled variables."""

from __future__ import annotations

import dataclasses
import sys
import time
from typing import TextIO

import numpy as np
from scipy import optimize

from ..errors import ConvergenceError, IdentificationError
from .problem import AbstractProblem
from .scaling import ParameterScaling

__all__ = ["IdentificationResult", "identify", "OPTIMIZERS"]

OPTIMIZERS = ("lbfgsb", "least_squares")
_FAILED_COST_FACTOR = 1e6
# scipy's L-BFGS-B stops when (f_k - f_k+1) / max(|f_k|, |f_k+1|, 1) <= ftol.  The cost is
# normalized to 1 at the start, so that test is absolute; it must sit near round-off of
# the normalized cost, otherwise the run stops while the parameters still move.
_LBFGSB_FTOL = 1e-16
_LBFGSB_GTOL = 1e-12
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
            "cost_initial": self.cost_initial,
            "cost": self.cost,
            "cost_history": self.cost_history,
            "gradient_norm_history": self.gradient_norm_history,
            "iterations": self.iterations,
            "simulations": self.simulations,
            "success": self.success,
            "message": self.message,
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
    method: str = "lbfgsb",
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
    method : {"lbfgsb", "least_squares"}
        ``lbfgsb``: scipy's L-BFGS-B with discrete-adjoint gradients, on the cost
        normalized by its start value.  ``least_squares``: scipy's trust-region
        reflective method with the residual Jacobian from forward sensitivities.
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
    if method not in OPTIMIZERS:
        raise IdentificationError(f"optimizer {method!r} is not one of {', '.join(OPTIMIZERS)}.")
    started = time.perf_counter()
    sims0 = problem.simulations
    scale = ParameterScaling.create(problem.names, problem.start, problem.lower, problem.upper, scaling)
    u0 = scale.to_scaled(problem.start)

    def physical(u: np.ndarray) -> np.ndarray:
        # The start point is evaluated at exactly the given values (the scaling round trip
        # may move them by an ulp, which a sensitive cost notices).
        return problem.start.copy() if np.array_equal(u, u0) else scale.to_physical(u)

    if isinstance(progress, str) and progress != "stderr":
        raise IdentificationError(f"progress {progress!r} is not a text stream, 'stderr' or None; pass one of those.")
    progress_log = _Progress(problem.names, sys.stderr if isinstance(progress, str) else progress, label)
    cost_history: list[float] = []
    gnorm_history: list[float] = []
    failed = [0]
    if method == "lbfgsb":
        first = problem.evaluate(problem.start, problem.gradient_method)
        J0 = first.J if first.J > 0 else 1.0
        cache: dict[bytes, tuple[float, np.ndarray]] = {u0.tobytes(): (first.J, first.gradient)}
        last_good = [first.J, first.gradient]

        def fun(u):
            key = u.tobytes()
            if key not in cache:
                try:
                    ev = problem.evaluate(physical(u), problem.gradient_method)
                    value = (ev.J, ev.gradient)
                    last_good[:] = value
                except ConvergenceError:
                    # A trial point the integrator cannot simulate: a large cost makes the
                    # line search step back towards the last good point.
                    failed[0] += 1
                    value = (_FAILED_COST_FACTOR * max(last_good[0], J0), -np.asarray(last_good[1]))
                cache.clear()
                cache[key] = value
            J, g = cache[key]
            return J / J0, g * scale.derivative(u) / J0

        def callback(u):
            J, g = fun(u)
            progress_log.iteration += 1
            cost_history.append(J * J0)
            gnorm_history.append(float(np.linalg.norm(g)))
            progress_log.line(J * J0, gnorm_history[-1], physical(u))

        g0 = fun(u0)[1]
        cost_history.append(first.J)
        gnorm_history.append(float(np.linalg.norm(g0)))
        progress_log.line(first.J, gnorm_history[-1], problem.start)
        res = optimize.minimize(
            fun, u0, jac=True, method="L-BFGS-B", bounds=scale.scaled_bounds(), callback=callback,
            options={"maxiter": max_iterations, "ftol": _LBFGSB_FTOL, "gtol": _LBFGSB_GTOL, "maxcor": 20},
        )
        u_best, iterations, success, message = res.x, int(res.nit), bool(res.success), str(res.message)
        if not success and message.startswith("ABNORMAL") and iterations > 0:
            # The line search found no decrease.  With finite-difference gradients that is
            # where their error exceeds the remaining decrease; with exact gradients, where the
            # cost changes only at round-off once the gradient has collapsed.  Both are
            # convergence to the attainable accuracy, not a failure.
            g_final = float(np.linalg.norm(fun(res.x)[1]))
            if problem.gradient_method == "fd":
                success = True
                message = ("converged to the accuracy of the finite-difference gradients (the line search "
                           "found no further decrease)")
            elif g_final <= _STATIONARY * gnorm_history[0]:
                success = True
                message = (f"converged: the gradient fell to {g_final / gnorm_history[0]:.1e} of its start "
                           "value and the line search found no further decrease (round-off level)")
        J_final = fun(u_best)[0] * J0
    else:
        cache_r: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

        last_r: list[np.ndarray] = []

        def evaluate(u):
            key = u.tobytes()
            if key not in cache_r:
                try:
                    r, Jr = problem.residuals(physical(u))
                    last_r[:] = [r]
                except ConvergenceError:
                    if not last_r:
                        raise
                    # Unsimulatable trial point: much larger residuals make the trust
                    # region shrink; the Jacobian is never requested at a rejected point.
                    failed[0] += 1
                    r, Jr = np.sqrt(_FAILED_COST_FACTOR) * last_r[0], np.zeros((last_r[0].size, len(u)))
                cache_r.clear()
                cache_r[key] = (r, Jr * scale.derivative(u)[None, :])
            return cache_r[key]

        def jac(u):
            r, Ju = evaluate(u)
            J = 0.5 * float(r @ r)
            gnorm = float(np.linalg.norm(Ju.T @ r))
            cost_history.append(J)
            gnorm_history.append(gnorm)
            progress_log.line(J, gnorm, physical(u))
            progress_log.iteration += 1
            return Ju

        bounds = scale.scaled_bounds()
        lo = np.array([-np.inf if b[0] is None else b[0] for b in bounds])
        hi = np.array([np.inf if b[1] is None else b[1] for b in bounds])
        # scipy's trust-region method moves a start within 1e-10 (relative) of a bound
        # slightly inside before its first evaluation; the history starts at the given values
        # all the same.
        near = (u0 - lo <= 1e-10 * np.maximum(1, np.abs(lo))) | (hi - u0 <= 1e-10 * np.maximum(1, np.abs(hi)))
        if np.any(near):
            r0, jac0 = problem.residuals(problem.start)
            cost_history.append(0.5 * float(r0 @ r0))
            gnorm_history.append(float(np.linalg.norm((jac0 * scale.derivative(u0)[None, :]).T @ r0)))
            progress_log.line(cost_history[-1], gnorm_history[-1], problem.start)
        res = optimize.least_squares(
            lambda u: evaluate(u)[0], u0, jac=jac, bounds=(lo, hi), method="trf",
            ftol=tolerance, xtol=tolerance, gtol=1e-14, max_nfev=max_iterations, x_scale=1.0,
        )
        u_best, success, message = res.x, bool(res.success), str(res.message)
        iterations = int(res.njev or len(cost_history))
        J_final = float(res.cost)
    x = physical(u_best)
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
        cost_initial=cost_history[0] if cost_history else float("nan"),
        cost=J_final,
        cost_history=cost_history,
        gradient_norm_history=gnorm_history,
        iterations=iterations,
        simulations=problem.simulations - sims0,
        success=success,
        message=message,
        method=method,
        std_errors=stats["std_errors"],
        correlation=stats["correlation"],
        seconds=time.perf_counter() - started,
        failed_simulations=failed[0],
        unidentifiable=tuple(problem.names[i] for i in stats.get("unidentifiable", ())),
        active_bounds=tuple(
            name
            for name, value, lo, hi in zip(problem.names, x, problem.lower, problem.upper)
            if np.isclose(value, lo, rtol=1e-9, atol=0) or np.isclose(value, hi, rtol=1e-9, atol=0)
        ),
    )
