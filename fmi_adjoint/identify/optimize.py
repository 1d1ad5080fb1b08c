"""Identification with scipy.optimize: L-BFGS-B on adjoint gradients, or trust-region
least squares on forward sensitivities, both in scaled variables."""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from typing import TextIO

import numpy as np
from scipy import optimize

from ..errors import ConvergenceError, IdentificationError
from ..linesearch import probe_line, projected_descent
from .problem import AbstractProblem
from .scaling import ParameterScaling

__all__ = ["IdentificationResult", "identify", "lbfgsb_stop", "least_squares_stop", "default_optimizer", "OPTIMIZERS"]

OPTIMIZERS = ("lbfgsb", "least_squares")


def default_optimizer(problem: AbstractProblem) -> str:
    """The optimizer ``--method auto`` (the default) runs on ``problem`` (issue 32).

    Gauss-Newton (``least_squares``, trust-region reflective) where every experiment's cost is
    a time-domain least-squares cost: its steps use the residual Jacobian, so on many strongly
    coupled parameters it converges where L-BFGS-B spends its iteration limit building a
    curvature model, and where L-BFGS-B's end then depends on round-off (the strut's twelve
    parameters: 4.0 standard errors off with OpenBLAS's Haswell kernel, 2.43 with Gauss-Newton
    on every kernel; ``tests/test_strategies.py``).  L-BFGS-B with the adjoint gradient for the
    spectral, order and POD costs, which have no residuals.
    """
    if problem.has_residuals:
        return "least_squares"
    return "lbfgsb"
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
    failed_before_search = [0]  # failed trial points before the current line search (L-BFGS-B)
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
            failed_before_search[0] = failed[0]
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
        u_best, iterations = res.x, int(res.nit)
        success, message = lbfgsb_stop(res, fun, scale.scaled_bounds(), gnorm_history, cost_history,
                                       fd=problem.gradient_method == "fd", max_iterations=max_iterations,
                                       failed=failed, failed_in_last_search=failed[0] > failed_before_search[0])
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

        recorded_start = [False]  # the start is in the history already (a start at a bound, below)

        def jac(u):
            r, Ju = evaluate(u)
            if recorded_start[0]:
                # scipy's first Jacobian, at the start moved inside its bound by 1e-10: the
                # start's line and history entry stand for it (no second "iter 0").
                recorded_start[0] = False
            else:
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
            recorded_start[0] = True
        # The residuals are normalized by the start's (the cost starts at 1/2, as L-BFGS-B's is
        # normalized): scipy's gtol is absolute, so on a cost that is already small at the start
        # (noise-free data, the later windows of a staged fit) it stopped the run at a gradient
        # that was small only in absolute terms, short of the minimum (measured: sdof through
        # its FMU's adjoint path, c 3.8e-6 off).  The trust-region steps do not depend on the
        # normalization; ftol and xtol are relative.
        r0 = evaluate(u0)[0]
        norm = float(np.sqrt(r0 @ r0))
        unit = 1.0 / norm if norm > 0 and np.isfinite(norm) else 1.0
        res = optimize.least_squares(
            lambda u: unit * evaluate(u)[0], u0, jac=lambda u: unit * jac(u), bounds=(lo, hi), method="trf",
            ftol=tolerance, xtol=tolerance, gtol=_LSQ_GTOL, max_nfev=max_iterations, x_scale=1.0,
        )
        u_best = res.x
        success, message = least_squares_stop(res, max_iterations)
        iterations = int(res.njev or len(cost_history))
        J_final = float(res.cost) / unit**2
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
        optimizer_message=str(res.message),
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
                fd: bool, max_iterations: int, failed: list[int], failed_in_last_search: bool = False
                ) -> tuple[bool, str]:
    """``(success, message)`` of an L-BFGS-B run: its cause and a fix for every unsuccessful stop.

    ``fun(u) -> (J, g)`` is the normalized cost in scaled variables.  A failed line search
    (scipy's ``ABNORMAL: ``) is convergence when the gradients are finite differences (their
    error exceeds the remaining decrease) or the gradient has collapsed to
    ``_STATIONARY`` of its start value (the cost changes only at round-off); otherwise the
    cost is probed at the stop (:func:`_line_search_failure`) to name the cause.
    ``failed`` counts the trial points that could not be simulated; ``failed_in_last_search``
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


def _line_search_failure(fun, u: np.ndarray, bounds, failed: list[int], failed_in_last_search: bool) -> str:
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
    before = failed[0]
    probe = probe_line(lambda v: fun(v)[0], u, e, g, J0, _PROBE_STEPS, lo, hi)
    if failed[0] > before or failed_in_last_search:
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
