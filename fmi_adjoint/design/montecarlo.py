"""Monte-Carlo check of the predicted standard errors of a design.

The Cramér-Rao bounds ``sqrt(diag M^-1)`` of :meth:`DesignProblem.standard_errors` predict
how well the parameters can be identified from a measurement with the designed input.
:func:`monte_carlo` checks that prediction the direct way: it simulates the experiment at
the nominal parameters (the "truth"), adds Gaussian noise ``N(0, sigma_c^2)`` to every
sample of every measured channel (independent samples, the model of eq. (5.6)), identifies
the parameters again from each noisy copy by nonlinear least squares, and compares the
empirical spread of the estimates with the prediction.  For a well-posed problem with small
noise the least-squares estimate is unbiased to first order and its covariance is ``M^-1``
(Gauss-Markov for the linearized model; the Cramér-Rao bound is attained asymptotically),
so the empirical standard deviations should agree with the bounds, and their ratio between
two inputs with the predicted ratio (the dissertation's comparison of ``F_0``, ``F_comp``
and ``F_opt``).

Why these choices:

* **Start at the truth.**  Each fit starts at the nominal parameters.  The check is about
  the spread of the minimizer, not about finding it; starting at the truth (standard in
  Cramér-Rao checks) avoids local minima and needs few Gauss-Newton iterations.
* **Exact Jacobian.**  ``dY/dp`` from the engine's forward sensitivities
  (:meth:`~fmi_adjoint.engines.AbstractEngine.output_sensitivities`), the same derivatives
  that make ``M``; variables scaled by the parameters' nominal magnitudes
  (``problem.setup.scale``).  scipy's trust-region reflective method: a trial step whose
  simulation fails (Newton) is retreated from like one with a larger cost.
* **Common random numbers.**  The noise is the stream of standard-normal numbers of
  ``numpy.random.default_rng(seed)``, taken ``(n_samples, n_channels)`` per run (the same
  numbers as one ``(runs, n_samples, n_channels)`` draw), times ``sigma``.  The same seed on
  the same problem (same sample times and channels) therefore gives the same draws for every
  input, so the difference between two inputs is not blurred by different noise: the ratio
  of their spreads is much sharper
  than that of two independent experiments.
* **Failed fits** (a simulation error at the start, or the iteration limit reached) are
  counted in :attr:`MonteCarloResult.failed` and excluded from the statistics.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..costs.sampling import Sampler
from ..errors import ConvergenceError, FmiAdjointError, ModelError
from ..integrate import Trajectory
from .problem import DesignProblem

__all__ = ["MonteCarloResult", "monte_carlo", "monte_carlo_record"]

#: Termination tolerances of each fit (scipy's ``ftol``, ``xtol``, ``gtol``).  The cost near
#: its minimum is ``C* + |x - x*|_M^2 / 2`` with ``C* ~ n_samples/2``; stopping on a relative
#: cost change of 1e-10 leaves ``|x - x*|_M < sqrt(n_samples) 1e-5``, a negligible fraction of
#: one standard error for any realistic number of samples.
FIT_TOLERANCE = 1e-10

#: Residual evaluations per fit before it counts as failed.  From the truth a Gauss-Newton
#: step lands within a fraction of a standard error of the minimum; 3-6 evaluations suffice
#: when the noise is small enough for the Cramér-Rao bound to be meaningful.
MAX_EVALUATIONS = 30


@dataclasses.dataclass(frozen=True, eq=False)
class MonteCarloResult:
    """Estimates of ``runs`` noisy re-identifications and their statistics.

    Attributes
    ----------
    names : tuple of str
        The identified parameters (``problem.spec.params``).
    truth : numpy.ndarray, shape (P,)
        Their nominal values, with which the measurement was simulated.
    estimates : numpy.ndarray, shape (runs - failed, P)
        The estimates of the successful fits, in the parameters' units.
    mean, std : numpy.ndarray, shape (P,)
        Mean and empirical standard deviation (``ddof=1``) of ``estimates``.
    predicted : numpy.ndarray, shape (P,)
        Cramér-Rao bounds ``sqrt(diag M^-1)`` at the input (parameter units).
    runs : int
        Noisy measurements drawn.
    failed : int
        Fits that failed and are excluded from ``estimates``, ``mean`` and ``std``.
    seed : int
        Seed of the noise (the same seed gives the same draws for every input).
    simulations : int
        Forward runs of all fits (the cost of the check).
    """

    names: tuple[str, ...]
    truth: np.ndarray
    estimates: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    predicted: np.ndarray
    runs: int
    failed: int
    seed: int
    simulations: int

    @property
    def std_ratio(self) -> np.ndarray:
        """Empirical over predicted standard deviation (1 if the prediction holds)."""
        return self.std / self.predicted

    @property
    def standard_error_of_mean(self) -> np.ndarray:
        """``std / sqrt(n)`` of the successful fits: the scale on which ``mean - truth`` is judged."""
        return self.std / math.sqrt(len(self.estimates))

    @property
    def std_relative_error(self) -> float:
        """Relative standard error of an empirical standard deviation from ``n`` normal
        samples, ``1/sqrt(2 (n - 1))``: the statistical accuracy of ``std``."""
        return 1.0 / math.sqrt(2.0 * (len(self.estimates) - 1))

    def describe(self) -> str:
        """One line per parameter (truth, mean, empirical and predicted std), and the failed
        fits if there were any."""
        lines = [f"{name}: truth {self.truth[j]:.6g}, mean {self.mean[j]:.6g}, std {self.std[j]:.4g} "
                 f"(predicted {self.predicted[j]:.4g}, ratio {self.std_ratio[j]:.3f})"
                 for j, name in enumerate(self.names)]
        if self.failed:
            lines.append(f"{self.failed} of {self.runs} fits failed and are excluded from these statistics.")
        return "\n".join(lines)


def monte_carlo(problem: DesignProblem, z: np.ndarray, runs: int, *, seed: int = 0) -> MonteCarloResult:
    """Identify ``problem.spec.params`` from ``runs`` noisy simulated measurements with the
    input of the design variables ``z`` (knots fixed) and compare the spread of the estimates
    with the Cramér-Rao bounds (module docstring).

    Each fit is a nonlinear least-squares problem in the scaled parameters ``p / scale``,
    residuals ``(Y_s(p) - Y_s^noisy) / sigma_c``, solved by scipy's ``least_squares``
    (``trf``) with the exact Jacobian, starting at the truth.

    Parameters
    ----------
    problem : DesignProblem
        Built with ``integral=False`` (weights 1: ``M`` is the information of independent samples).
    z : numpy.ndarray
        Design variables of the input (``problem.start()``, a design result's ``z``, ...).
    runs : int
        Noisy measurements (the issue asks for at least 50 per input; at least 2).
    seed : int
        Seed of :func:`numpy.random.default_rng`; the same seed gives the same noise for
        every input of the same problem (common random numbers).

    Raises
    ------
    ModelError
        ``integral=True``, fewer than 2 runs, or ``z`` of the wrong length.
    ConvergenceError
        Fewer than 2 fits succeeded (no spread to compare).
    """
    if problem.spec.integral:
        raise ModelError("the Monte-Carlo check needs the information of independent samples, but the problem was "
                         "built with integral=True (trapezoidal weights); build it with integral=False.")
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 2:
        raise ModelError(f"runs = {runs!r}: give a whole number of at least 2 noisy re-identifications (50 or more "
                         "for a meaningful spread).")
    z = np.asarray(z, dtype=float)
    if z.shape != (problem.spec.knots,):
        raise ModelError(f"z has shape {z.shape}, but the input has {problem.spec.knots} knots; give one design "
                         "variable per knot.")
    M, truth_run, _ = problem.fisher(z)
    predicted = problem.standard_errors(M)
    refit = _Refit(problem, truth_run)
    y_true = refit.sampled(truth_run)
    rng = np.random.default_rng(seed)
    estimates = []
    simulations = 0
    for _ in range(runs):
        # Drawn run by run (memory), the same stream as one (runs, n_samples, n_channels) draw.
        noise = rng.standard_normal(y_true.shape) * refit.sigma[None, :]
        estimate, count = refit.identify(y_true + noise)
        simulations += count
        if estimate is not None:
            estimates.append(estimate)
    failed = runs - len(estimates)
    if len(estimates) < 2:
        raise ConvergenceError(f"only {len(estimates)} of {runs} Monte-Carlo fits succeeded; the noise is too large "
                               "for a local check (lower the noise levels) or the parameters are not identifiable.")
    E = np.array(estimates)
    return MonteCarloResult(names=tuple(problem.spec.params), truth=refit.truth.copy(), estimates=E,
                            mean=E.mean(axis=0), std=E.std(axis=0, ddof=1), predicted=predicted, runs=runs,
                            failed=failed, seed=seed, simulations=simulations)


class _Refit:
    """One problem's least-squares re-identification of ``problem.setup.params`` from a noisy
    copy of the sampled outputs, starting at the truth (the run ``truth_run``)."""

    def __init__(self, problem: DesignProblem, truth_run: Trajectory):
        setup = problem.setup
        self.problem = problem
        self.params = np.asarray(setup.params, dtype=int)
        self.channels = np.asarray(setup.channels, dtype=int)
        self.sigma = np.asarray(setup.sigma, dtype=float)
        self.scale = np.asarray(setup.scale, dtype=float)
        self.sample_times = np.asarray(setup.sample_times, dtype=float)
        self.p_true = truth_run.p.copy()
        self.truth = self.p_true[self.params]
        self.sampler = Sampler.from_grid(truth_run.t, self.sample_times)

    def sampled(self, traj: Trajectory) -> np.ndarray:
        """The measured channels at the sample times, shape ``(n_samples, n_channels)``."""
        return self.sampler.sample(traj.outputs()[:, self.channels])

    def identify(self, data: np.ndarray) -> tuple[np.ndarray | None, int]:
        """``(estimate in parameter units or None if the fit failed, simulations used)``."""
        last: dict[bytes, Trajectory] = {}  # the Jacobian is asked for at the last residual's point
        count = [0]
        sigma, scale = self.sigma, self.scale

        def run_at(x: np.ndarray) -> Trajectory:
            key = x.tobytes()
            if key not in last:
                last.clear()
                p = self.p_true.copy()
                p[self.params] = x * scale
                count[0] += 1
                last[key] = self.problem.simulate(p)
            return last[key]

        def residuals(x: np.ndarray) -> np.ndarray:
            try:
                traj = run_at(x)
            except ConvergenceError:
                # A trial step the scheme cannot run: trf shrinks its trust region.
                return np.full(data.size, np.inf)
            return ((self.sampled(traj) - data) / sigma[None, :]).ravel()

        def jacobian(x: np.ndarray) -> np.ndarray:
            dY = self.problem.engine.output_sensitivities(run_at(x), self.sample_times, self.channels, self.params)
            return (dY * scale[None, None, :] / sigma[None, :, None]).reshape(-1, len(self.params))

        try:
            from scipy.optimize import least_squares  # noqa: PLC0415 (0.25 s at import)

            fit = least_squares(residuals, self.truth / scale, jac=jacobian, method="trf", x_scale=1.0,
                                ftol=FIT_TOLERANCE, xtol=FIT_TOLERANCE, gtol=FIT_TOLERANCE, max_nfev=MAX_EVALUATIONS)
        except FmiAdjointError:
            return None, count[0]
        if fit.status <= 0 or not np.all(np.isfinite(fit.x)):
            return None, count[0]
        return fit.x * scale, count[0]


def monte_carlo_record(result: MonteCarloResult) -> dict:
    """The result as plain JSON values: per parameter its truth, mean, empirical and predicted
    standard deviation and their ratio; the counts; the estimates (one list per parameter)."""
    def number(value) -> float | None:
        """JSON has no inf or NaN (a singular Fisher matrix predicts an infinite spread): null."""
        value = float(value)
        return value if math.isfinite(value) else None

    parameters = {
        name: {"truth": number(result.truth[j]), "mean": number(result.mean[j]), "std": number(result.std[j]),
               "predicted_std": number(result.predicted[j]), "std_ratio": number(result.std_ratio[j]),
               "standard_error_of_mean": number(result.standard_error_of_mean[j]),
               "estimates": [number(v) for v in result.estimates[:, j]]}
        for j, name in enumerate(result.names)}
    return {"runs": result.runs, "failed": result.failed, "seed": result.seed, "simulations": result.simulations,
            "std_relative_error": result.std_relative_error, "parameters": parameters}
