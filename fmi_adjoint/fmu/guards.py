"""Checks of an FMU fit's result that can make it untrustworthy (issue 32, "Guards").

* :func:`smoothness_warning`: the cost is not smooth at the result.  An FMU with state events
  sampled at fixed times has a discontinuous cost: when a parameter moves an event across a
  sample time, the sampled output jumps (the bouncing ball's velocity reverses).  Central
  differences whose stencil straddles such a jump return the jump divided by the step, not a
  derivative, and an optimizer then stops next to the jump ("converged", cost far above the
  noise).  The gradient of the problem's own path at the result (exact sensitivities, or
  central differences of step ``d``) is compared with central differences of the cost with a
  wider step ``D`` (:data:`WIDE_FACTOR` ``d``, at least :data:`SE_SPAN` standard errors): for a
  smooth cost they differ by ``J''' D**2 / 6``, far below the change ``H D`` of the gradient
  over the step (``H`` the Gauss-Newton curvature), so a difference above
  :data:`SMOOTHNESS_TOLERANCE` ``H D`` is a jump within ``D`` of the result.
  A second test compares the curvature over ``D`` with ``H`` (see there).
* :func:`convergence_warning`: the optimizer stopped short of the minimum (the Gauss-Newton
  step from the result exceeds a standard error);
* :func:`discretization_warning`: the discretization error of Model Exchange runs exceeds the
  standard errors;
* :func:`held_input_warning`: a Co-Simulation FMU receives its inputs once per communication
  step and holds them over the step (FMI's ``fmi2SetReal`` before ``fmi2DoStep``): an input
  that varies within a step is seen as a staircase, which biases the fit (see there).

Each is run once on the identified values (:meth:`~.problem.FmuProblem.result_guards`, after
``identify``); they share one run of the gradient path (:func:`at_result`), and read and run
the problem only through :class:`FitProblem`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..costs import LeastSquaresCost
from ..errors import ConvergenceError
from .differences import FD_REL_STEP, stencil
from .gradients import AbstractGradientPath, Simulations

if TYPE_CHECKING:
    from .archive import FmuArchive
    from .experiment import FmuExperiment, Tolerances
    from .simulation import FmuSimulator, RunOutputs

__all__ = ["AtResult", "CURVATURE_FACTOR", "FitProblem", "HELD_INPUT_FRACTION", "HeldInputCheck", "SE_SPAN",
           "SMOOTHNESS_TOLERANCE", "UNCONVERGED_RELATIVE", "UNCONVERGED_SE", "WIDE_FACTOR", "at_result",
           "beyond_standard_errors",
           "convergence_warning", "discretization_warning", "held_input_check", "held_input_warning",
           "smoothness_warning"]

#: The wide step is this multiple of the problem's own difference step ...
WIDE_FACTOR = 10.0
#: ... and spans at least this many standard errors (a jump closer to the result than the
#: uncertainty of the result makes the result a property of the jump).
SE_SPAN = 3.0
#: ... but at most this fraction of the parameter's magnitude (or nominal value): beyond it the
#: third derivative of a smooth cost would count.
WIDE_CAP = 0.1
#: Gradients differing by more than this fraction of ``H D`` (see the module docstring).
SMOOTHNESS_TOLERANCE = 0.5
#: A curvature over the wide step outside ``[H / 4, 4 H]`` is not that of a smooth least-squares
#: minimum (the true Hessian differs from Gauss-Newton's ``H`` by ``sum r_i r_i''``, small
#: where the fit explains the data; measured at the bouncing ball's wrong minimum e = 0.691:
#: -0.3 against H = 615).
CURVATURE_FACTOR = 4.0


class FitProblem(Simulations, Protocol):
    """What the guards read and run of an FMU problem (:class:`~.problem.FmuProblem` is one),
    besides its :class:`~.gradients.Simulations`: the FMU, the gradient path and interface it
    runs, the Model Exchange tolerances, its count of simulations, and its least-squares
    residuals and discretization error."""

    archive: FmuArchive
    #: Settable: :func:`held_input_warning` runs a copy on other inputs.
    experiments: tuple[FmuExperiment, ...]
    gradient_method: str
    interface: str
    tolerances: Tolerances
    simulations: int
    path: AbstractGradientPath
    #: Builds the runs' requests (which inputs are held, which the FMU interpolates).
    simulator: FmuSimulator

    def path_outputs(self, x: np.ndarray) -> list[RunOutputs]:
        """The runs of the problem's own gradient path at ``x``, ``dY`` filled."""
        ...

    def residuals(self, x: np.ndarray, jacobian: bool = True):
        """Stacked least-squares residuals and (if asked) their Jacobian."""
        ...

    def discretization_error(self, x: np.ndarray) -> dict | None:
        """The estimated discretization error of a Model Exchange fit at ``x``."""
        ...


@dataclasses.dataclass(frozen=True, eq=False)
class AtResult:
    """The least-squares fit at the result, from one run of the problem's gradient path (shared
    by the guards): cost, gradient (``J^T r``), stacked residuals and their Jacobian."""

    x: np.ndarray
    cost: float
    gradient: np.ndarray
    method: str
    residuals: np.ndarray
    jacobian: np.ndarray


def at_result(problem: FitProblem, x: np.ndarray) -> AtResult | None:
    """:class:`AtResult` at ``x`` (None unless every cost is a least-squares cost)."""
    x = np.asarray(x, dtype=float)
    if not all(isinstance(exp.cost, LeastSquaresCost) for exp in problem.experiments):
        return None
    runs = problem.path_outputs(x)
    rs, jacobians = [], []
    for exp, run in zip(problem.experiments, runs):
        assert run.dY is not None  # a gradient path always fills it
        r, factors = exp.cost.residuals(run.Y)
        rs.append(r)
        jacobians.append((factors[:, :, None] * run.dY).reshape(-1, len(x)))
    r, jacobian = np.concatenate(rs), np.vstack(jacobians)
    return AtResult(x, 0.5 * float(r @ r), jacobian.T @ r, problem.path.method, r, jacobian)


def _standard_errors(std_errors, n: int) -> np.ndarray:
    return np.array([np.nan if s is None else float(s) for s in (std_errors or [None] * n)], dtype=float)


def beyond_standard_errors(shift: np.ndarray, x: np.ndarray, std_errors, nominal: np.ndarray,
                           names: Sequence[str]) -> str | None:
    """``NAME +shift (ratio standard errors)`` for each parameter whose ``shift`` (a step to the
    minimum, a bias) exceeds :data:`UNCONVERGED_SE` standard errors and :data:`UNCONVERGED_RELATIVE`
    of the parameter (NaN, no standard error, is not far; nor a shift below what the runs
    resolve); None if there is none."""
    se = _standard_errors(std_errors, len(x))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.abs(shift) / se
    relative = np.abs(shift) / np.maximum(np.abs(x), nominal)
    far = [k for k in range(len(x)) if ratios[k] > UNCONVERGED_SE and relative[k] > UNCONVERGED_RELATIVE]
    if not far:
        return None
    return ", ".join(f"{names[k]} {shift[k]:+.3g} ({ratios[k]:.3g} standard errors)" for k in far)


def smoothness_warning(problem: FitProblem, at: AtResult, std_errors) -> str | None:
    """The warning that the cost is not smooth at the result ``x`` (None: it is).

    Two tests per parameter, on central differences of the cost over the wide step ``D``
    (module docstring): the slope against the gradient of the problem's own path, and the
    curvature ``(J(x+D) - 2 J(x) + J(x-D)) / D**2`` against the Gauss-Newton curvature ``H``
    (within a factor :data:`CURVATURE_FACTOR`): at a minimum that a jump makes (the cost falls
    on both sides past a jump, or rises by a jump) the cost does not rise like ``H D**2 / 2``.
    Costs: the problem's own gradient and residual Jacobian at ``x`` and two (one-sided next to
    a bound: three) runs per parameter.  Only least-squares costs are checked (``H`` is their
    Gauss-Newton curvature); a run within ``D`` that fails skips the check.
    """
    x = at.x
    magnitude = np.maximum(np.abs(x), problem.nominal)
    small = FD_REL_STEP * magnitude
    se = _standard_errors(std_errors, len(x))
    wide = np.maximum(WIDE_FACTOR * small, np.where(np.isfinite(se), SE_SPAN * se, 0.0))
    wide = np.minimum(wide, WIDE_CAP * magnitude)
    own = at
    curvature = np.einsum("ij,ij->j", at.jacobian, at.jacobian)
    points = stencil(x, wide, problem.lower, problem.upper, problem.names)
    try:
        batches = problem.run_points(points.points)
    except ConvergenceError:
        return None
    costs = [sum(exp.cost.evaluate(run.Y, np.zeros(0)).J for exp, run in zip(problem.experiments, runs))
             for runs in batches]
    steps = np.array([_step(points, k, x) for k in range(len(x))])
    slopes = points.combine(costs)
    found = []
    for k, (first, weights) in enumerate(points.recipes):
        name = problem.names[k]
        if not abs(slopes[k] - own.gradient[k]) <= SMOOTHNESS_TOLERANCE * curvature[k] * steps[k] \
                + 0.1 * abs(own.gradient[k]):
            found.append((name, f"{name}: gradient {own.gradient[k]:.4g} ({own.method}), slope over +-{steps[k]:.3g} "
                                f"{slopes[k]:.4g}"))
            continue
        if len(weights) == 2:  # the curvature from a central stencil only
            second = (costs[first] + costs[first + 1] - 2.0 * own.cost) / steps[k] ** 2
            if not curvature[k] / CURVATURE_FACTOR <= second <= CURVATURE_FACTOR * curvature[k]:
                found.append((name, f"{name}: curvature over +-{steps[k]:.3g} {second:.4g} against {curvature[k]:.4g} "
                                    "(Gauss-Newton)"))
    if not found:
        return None
    names = ", ".join(n for n, _ in found)
    fix = ("--gradient sensitivity, whose exact sensitivities follow the events (this FMU has Model Exchange), "
           "and other start values (--set NAME=VALUE)" if problem.archive.model_exchange
           and problem.gradient_method == "fd" else "other start values (--set NAME=VALUE)")
    return (f"the cost is not smooth near the result in {names} ({'; '.join(t for _, t in found)}): a jump of the "
            "cost (an event of the FMU crossing a sample time) lies within that step, so the fit stopped next to a "
            f"jump, not at a minimum; try {fix}, or fit a shorter record first (--t-end) and continue from its "
            "result.")


def _step(points, k: int, x: np.ndarray) -> float:
    """The step of parameter ``k``'s stencil (its largest offset)."""
    first, weights = points.recipes[k]
    return max(abs(points.points[first + i][k] - x[k]) for i in range(len(weights)))


@dataclasses.dataclass(frozen=True)
class HeldInputCheck:
    """How much the inputs vary within one communication step (:func:`held_input_check`)."""

    #: Per input: the largest change within one step, as a fraction of the input's range.
    fractions: dict[str, float]
    #: The step and interface checked.
    step: float
    #: Per input: the RMS difference between the held input (its value at the start of each
    #: communication step) and the input interpolated linearly, over the input file's samples.
    rms: dict[str, float] = dataclasses.field(default_factory=dict)

    def worst(self) -> tuple[str, float]:
        name = max(self.fractions, key=lambda n: self.fractions[n])
        return name, self.fractions[name]


#: An input changing by more than this fraction of its range within one communication step is
#: seen by a Co-Simulation FMU as a visibly different staircase.
HELD_INPUT_FRACTION = 0.05


def held_input_check(experiments: list[FmuExperiment]) -> HeldInputCheck | None:
    """The largest change of each input within one communication step, relative to the
    input's range over the experiment (None: no inputs).

    A Co-Simulation FMU sees ``u(t_k)`` over ``[t_k, t_k + h)``; the input it should see
    differs from that by up to the change of ``u`` within the step.  Measured on the input
    file's own samples: the change between the value at each communication point and every
    input sample up to the next one (the file's samples between two points are what the
    staircase throws away)."""
    out: dict[str, float] = {}
    rms: dict[str, float] = {}
    step = 0.0
    for exp in experiments:
        if exp.inputs is None:
            continue
        step = exp.step
        times = np.asarray(exp.inputs.times, dtype=float)
        grid = np.arange(0.0, exp.t_end + 0.5 * exp.step, exp.step)
        for name in exp.inputs.columns:
            if name in exp.held:  # discrete: piecewise constant by definition, held in any interface
                continue
            u = np.asarray(exp.inputs.column(name), dtype=float)
            inside = times <= exp.t_end * (1 + 1e-12)
            span = float(np.ptp(u[inside])) if np.any(inside) else 0.0
            if span <= 0:
                out[name] = max(out.get(name, 0.0), 0.0)
                continue
            held = np.interp(grid, times, u)
            index = np.clip(np.searchsorted(grid, times[inside], side="right") - 1, 0, grid.size - 1)
            change = float(np.max(np.abs(u[inside] - held[index]), initial=0.0))
            rms[name] = max(rms.get(name, 0.0), float(np.sqrt(np.mean((u[inside] - held[index]) ** 2))))
            # Between file samples the input is linear; its change within a step is also
            # bounded by the change to the next communication point.
            ends = np.interp(np.minimum(grid + exp.step, exp.t_end), times, u)
            change = max(change, float(np.max(np.abs(ends - held), initial=0.0)))
            out[name] = max(out.get(name, 0.0), change / span)
    return HeldInputCheck(out, step, rms) if out else None


def held_input_warning(problem: FitProblem, at: AtResult, std_errors) -> tuple[str, bool] | None:
    """The warning that a Co-Simulation FMU's held inputs bias the fit, and whether the bias is
    significant (None: no Co-Simulation inputs, or none changes by more than
    :data:`HELD_INPUT_FRACTION` of its range within a communication step).  Discrete inputs
    (held by definition) and the inputs of an FMU that interpolates them (``canInterpolateInputs``
    or FMI 3 intermediate update: :meth:`.simulation.FmuSimulator.interpolates_inputs`) are not
    checked; the warning names the input, the RMS difference between the held and the
    interpolated input over the run, and the parameters' bias.

    The staircase ``u(t_k)`` on ``[t_k, t_k + h)`` lags the input by ``h/2`` on average (its
    error is ``-u'(t) (t - t_k)`` to first order); holding ``u(t_k + h/2)`` instead removes that
    lag, so the change of the residuals between the two, ``dr``, is the first-order error of the
    staircase.  Its effect on the parameters is the Gauss-Newton step ``(J^T J)^-1 J^T dr`` (as
    for the discretization error of a Model Exchange fit).  Criterion: the bias is significant
    when it exceeds one standard error of some parameter (then the reported value and its
    confidence interval disagree about where the truth lies); ``success`` is then false.  Costs
    one run per experiment at the midpoint inputs and the residual Jacobian at ``x``.
    """
    if problem.interface != "CoSimulation":
        return None
    # An FMU that interpolates its inputs (FMI 2 derivatives, FMI 3 intermediate update): no staircase.
    held = [exp for exp in map(problem.simulator.with_held_inputs, problem.experiments)
            if not problem.simulator.interpolates_inputs(exp)]
    check = held_input_check(held)
    if check is None:
        return None
    name, fraction = check.worst()
    if fraction <= HELD_INPUT_FRACTION:
        return None
    x, r, jacobian = at.x, at.residuals, at.jacobian
    midpoint = copy.copy(problem)
    midpoint.experiments = tuple(map(_midpoint_inputs, map(problem.simulator.with_held_inputs, problem.experiments)))
    r_mid, _ = midpoint.residuals(x, jacobian=False)
    problem.simulations = midpoint.simulations
    bias = np.linalg.lstsq(jacobian, r_mid - r, rcond=None)[0]
    se = _standard_errors(std_errors, len(x))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.abs(bias) / se
    significant = bool(np.any(ratios > 1.0))  # NaN (no standard error) compares False
    shown = ", ".join(f"{n} {b:+.3g}" + (f" ({q:.2g} standard errors)" if np.isfinite(q) else "")
                      for n, b, q in zip(problem.names, bias, ratios))
    smaller = check.step * HELD_INPUT_FRACTION / fraction
    why_held = ("it does not declare canInterpolateInputs" if problem.archive.fmi_version == 2
                else "an FMI 3 FMU that does not provide intermediate update of this input")
    fix = f"give a smaller communication step (--step {smaller:.3g} or smaller)"
    if problem.archive.model_exchange:
        fix += " or --interface me (this FMU has Model Exchange, whose inputs are interpolated between samples)"
    return (f"the input {name} changes by up to {fraction:.0%} of its range within one communication step "
            f"({check.step:g} s); the Co-Simulation FMU holds each input over its step ({why_held}; RMS "
            f"difference between the held and the interpolated {name} over the run "
            f"{check.rms.get(name, 0.0):.3g}), which biases the fit by about "
            f"{shown}{' (more than a standard error: the result cannot be trusted)' if significant else ''}; "
            f"{fix}.", significant)


def _midpoint_inputs(exp: FmuExperiment) -> FmuExperiment:
    """``exp`` with each continuous input advanced by half a communication step, ``u(t + h/2)``
    (what a Co-Simulation FMU holding ``u(t_k + h/2)`` over ``[t_k, t_k + h)`` sees); discrete
    inputs, held by definition, unchanged."""
    if exp.inputs is None:
        return exp
    times = np.asarray(exp.inputs.times, dtype=float)
    values = np.array(exp.inputs.values, dtype=float)
    for c, name in enumerate(exp.inputs.columns):
        if name not in exp.held:
            values[:, c] = np.interp(times + exp.step / 2, times, values[:, c])
    return dataclasses.replace(exp, inputs=dataclasses.replace(exp.inputs, values=values))


#: A Gauss-Newton step from the result longer than this many standard errors: the optimizer
#: stopped before the minimum (see :func:`convergence_warning`).
UNCONVERGED_SE = 1.0
#: ... and longer than this fraction of the parameter: on noise-free data the standard errors
#: shrink with the residuals (a fit stopped at distance ``d`` from the minimum is ``sqrt(n)``
#: standard errors off whatever ``d``), so a step below the accuracy to which the runs
#: determine the parameters (issue 15: 1e-7 at the default Model Exchange tolerances) is not
#: a convergence failure.
UNCONVERGED_RELATIVE = 1e-7


def convergence_warning(problem: FitProblem, at: AtResult, std_errors) -> str | None:
    """The warning that the optimizer stopped before the minimum (None: the result is within
    :data:`UNCONVERGED_SE` standard errors of the least-squares minimum nearby).

    The Gauss-Newton step ``dx = -(J^T J)^-1 J^T r`` from the result estimates the distance to
    the nearest least-squares minimum; at a converged fit it is far below the standard errors.
    L-BFGS-B stops on a decrease of the cost relative to its start value, so a start whose
    cost is large (a state-space model started unstable, its cost 25091 against 6e-14 at the
    end) stops early in standard errors of a nearly noise-free fit (measured: state_space3 from
    the identity start, A[1,1] and A[2,2] 13 standard errors from the truth).
    """
    if std_errors is None:
        return None
    step = np.linalg.lstsq(at.jacobian, -at.residuals, rcond=None)[0]
    shown = beyond_standard_errors(step, at.x, std_errors, problem.nominal, problem.names)
    if shown is None:
        return None
    return (f"the optimizer stopped before the minimum: a Gauss-Newton step from the result moves {shown}; the "
            "stopping test is relative to the start cost, so a start with a large cost stops early; use "
            "--method least_squares, or start again from the result (--set NAME=VALUE).")


def discretization_warning(problem: FitProblem, at: AtResult, std_errors) -> str | None:
    """The warning that the discretization error of the Model Exchange runs biases the result by
    more than its standard errors (None: it does not, or Co-Simulation).

    The bias is :meth:`~.problem.FmuProblem.discretization_error`'s ``parameter_bias`` (the runs
    repeated 100 times tighter).  Where the data are nearly noise-free the standard errors
    shrink with the residuals and the bias dominates (state_space3 from the identity start: 14
    standard errors, all of it this bias); as in :func:`convergence_warning`, a bias below
    :data:`UNCONVERGED_RELATIVE` of the parameter is not flagged.
    """
    if std_errors is None or problem.interface != "ModelExchange":
        return None
    estimate = problem.discretization_error(at.x)
    if estimate is None or "parameter_bias" not in estimate:
        return None
    bias = np.array([estimate["parameter_bias"][n] for n in problem.names], dtype=float)
    shown = beyond_standard_errors(bias, at.x, std_errors, problem.nominal, problem.names)
    if shown is None:
        return None
    rtol = problem.tolerances.rtol
    return (f"the discretization error of the Model Exchange runs (--rtol {rtol:g}) biases the result by about "
            f"{shown}: the standard errors do not cover it; give a tighter tolerance (--rtol {rtol / 100:g}).")
