"""Guards of the outcome: a parameter not moved, not seen or on a bound; a cost far above the noise floor.

:mod:`fmi_adjoint.identify.guards` explains each rule and its threshold.
"""

from __future__ import annotations

import math

import numpy as np

from ...costs import LeastSquaresCost, SensorCost
from ...errors import FmiAdjointError
from ..optimize import IdentificationResult
from ..problem import AbstractIdentificationProblem, AbstractProblem
from .notice import Notice, plain, listed


#: A parameter whose identified value differs from its start by at most this much (relative)
#: did not move: the optimizers' steps are far larger, a zero gradient component leaves the
#: value exactly where it was (the scaling round trip may change an ulp).
MOVEMENT_TOLERANCE = 1e-12


#: A parameter's reach at most this share of the largest one's is not seen by the outputs.
SENSITIVITY_RTOL = 1e-6


#: A parameter this close to a bound (relative to the bound, or to the bounds' width at 0) is on it.
BOUND_RTOL = 1e-6


#: Final cost over noise floor above which the fit is warned, and above which it is untrusted.
COST_WARNING_RATIO = 10.0


COST_UNTRUSTED_RATIO = 100.0


def movement_notices(problem: AbstractProblem, result: IdentificationResult) -> tuple[Notice, ...]:
    """The warning on parameters that did not move from their start (see the module docstring).

    Skipped: parameters on a bound (reported as such), parameters already reported as not
    determined by the outputs (``result.unidentifiable``), parameters with a standard error
    (a non-singular Fisher information: a stationary start is then the minimum), and a start
    that fits the data exactly (zero cost).  For the rest the gradient at the start (one
    more evaluation, only then) says why: zero, or negligible against the cost.
    """
    if not result.cost_initial > 0:
        return ()
    std = result.std_errors or [None] * len(result.names)
    skip = set(result.active_bounds) | set(result.unidentifiable)
    stuck = [k for k, name in enumerate(result.names)
             if name not in skip and std[k] is None
             and abs(float(result.parameters[k]) - float(result.initial[k]))
             <= MOVEMENT_TOLERANCE * abs(float(result.initial[k]))]
    if not stuck:
        return ()
    start = problem.evaluate(np.asarray(result.initial, dtype=float), problem.gradient_method)
    reasons = []
    for k in stuck:
        g = float(start.gradient[k])
        # dJ/dp times the parameter's size, against the cost: the relative change of J when
        # the parameter changes by its own size (to first order).
        size = abs(float(result.initial[k])) or 1.0
        relative = abs(g) * size / max(abs(start.J), 1e-300)
        if g == 0.0:
            reasons.append(f"{result.names[k]} (zero gradient: the compared outputs do not depend on it)")
        else:
            reasons.append(f"{result.names[k]} (the cost is flat in it at the start: |dJ/dp| p / J = "
                           f"{relative:.1e})")
    several = len(stuck) > 1
    if len(stuck) == len(result.names):
        head = f"the fit did not move from its start: {', '.join(reasons)}"
    else:
        head = f"{', '.join(reasons)} did not move from {'their start values' if several else 'its start value'}"
    return (Notice(f"{head}; {'those values are' if several else 'that value is'} the start, not fitted. Drop such a "
                   "parameter from --params (fix it with --set), or give data that depend on it (another output, a "
                   "longer or differently excited record, times from t = 0).", warning=True, untrusted=True),)


def _other_start(starts_available: bool) -> str:
    """The remedy for a wrong basin: more ``--starts`` where the problem takes them (model
    files), else other start values (an FMU problem runs one start)."""
    return "try --starts" if starts_available else "try other start values with --set NAME=VALUE"


def _sizes(x: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Each parameter's size: ``|x_k|``, else the width of its bounds, else 1."""
    size = np.abs(np.asarray(x, dtype=float))
    width = np.asarray(upper, dtype=float) - np.asarray(lower, dtype=float)
    fallback = np.where(np.isfinite(width) & (width > 0), width, 1.0)
    return np.where(size > 0, size, fallback)


def _residual_blocks(problem: AbstractIdentificationProblem, rows: int) -> list[tuple[int, LeastSquaresCost]] | None:
    """Where each experiment's residuals start in the stacked residuals of ``problem``, with
    its least-squares cost (samples x channels, row-major: :meth:`LeastSquaresCost.residuals`);
    None if the layout is not that (another cost)."""
    blocks, offset = [], 0
    for exp in problem.experiments:
        cost = exp.cost.inner if isinstance(exp.cost, SensorCost) else exp.cost
        if not isinstance(cost, LeastSquaresCost):
            return None
        blocks.append((offset, cost))
        offset += cost.data.size
    return blocks if offset == rows else None


def sensitivity_notices(problem: AbstractIdentificationProblem, x: np.ndarray | None = None) -> tuple[Notice, ...]:
    """The warning on parameters the compared outputs do not see at ``x`` (default: the
    problem's start; see the module docstring).  One evaluation of the residual Jacobian;
    none for problems without residuals, or whose start cannot be simulated (the fit says so)."""
    if not problem.has_residuals or not problem.names:
        return ()
    x = np.asarray(problem.start if x is None else x, dtype=float)
    try:
        _, jacobian = problem.residuals(x, jacobian=True)
    except FmiAdjointError:
        return ()
    if jacobian is None:
        return ()
    jacobian = np.asarray(jacobian, dtype=float)
    blocks = _residual_blocks(problem, jacobian.shape[0])
    if blocks is None or not np.all(np.isfinite(jacobian)):
        return ()
    channels: list[str] = []
    squares = np.zeros(len(problem.names))
    for offset, cost in blocks:
        n, nc = cost.data.shape
        block = jacobian[offset:offset + n * nc].reshape(n, nc, -1)
        squares += (block**2).sum(axis=(0, 1))
        channels += [name for name in cost.channels if name not in channels]
    reach = np.sqrt(squares) * _sizes(x, problem.lower, problem.upper)
    largest = float(reach.max())
    reasons = []
    for k, name in enumerate(problem.names):
        if reach[k] == 0.0:
            reasons.append(f"{plain(name)} (zero sensitivity: they do not depend on it)")
        elif reach[k] <= SENSITIVITY_RTOL * largest:
            reasons.append(f"{plain(name)} (its reach |dr/dp| |p| is {reach[k] / largest:.1e} of the largest "
                           "parameter's: negligible)")
    if not reasons:
        return ()
    several = len(reasons) > 1
    return (Notice(f"the compared outputs {listed(channels)} cannot see {', '.join(reasons)} at the start values: "
                   f"the data cannot determine {'them' if several else 'it'}. Drop such a parameter from --params "
                   "(fix it with --set NAME=VALUE), or compare an output that depends on it (another channel, --map, "
                   "a record that excites it).", warning=True),)


def bound_notices(problem: AbstractProblem, result: IdentificationResult, *,
                  starts_available: bool = True) -> tuple[Notice, ...]:
    """A warning for each parameter that ended on (within ``BOUND_RTOL`` of) a bound (see the
    module docstring)."""
    notices = []
    lower, upper = np.asarray(problem.lower, dtype=float), np.asarray(problem.upper, dtype=float)
    for k, name in enumerate(result.names):
        p, lo, hi = float(result.parameters[k]), float(lower[k]), float(upper[k])
        width = hi - lo if math.isfinite(hi - lo) and hi > lo else 1.0
        hit = None
        for side, bound in (("lower", lo), ("upper", hi)):
            if math.isfinite(bound) and abs(p - bound) <= BOUND_RTOL * (abs(bound) or width):
                hit = (side, bound)
        if hit is None and name in result.active_bounds:
            hit = ("lower", lo) if abs(p - lo) <= abs(p - hi) else ("upper", hi)
        if hit is None:
            continue
        side, bound = hit
        shown = plain(name)
        notices.append(Notice(
            f"{shown} ended on a bound: {shown} = {p:.6g}, its {side} bound {bound:g} "
            f"(--bounds {shown}={lo:g}:{hi:g}). "
            f"The minimum may lie beyond it: widen the bound; if the fit then leaves the physical range, the model "
            f"cannot explain the data with {shown} inside it (its structure, units or channel mapping); or the fit is "
            f"in a wrong basin ({_other_start(starts_available)}). Its standard error assumes an interior minimum and "
            "is only indicative.", warning=True))
    return tuple(notices)


def cost_notices(result: IdentificationResult, noise_floor: float | None, *, noise_resolved: bool = True,
                 starts_available: bool = True) -> tuple[Notice, ...]:
    """The warning on a final cost far above the noise floor ``noise_floor`` (None or 0: not
    estimated, no warning; see the module docstring).  ``noise_resolved``: the floor measures
    the noise of every channel (:func:`noise_resolved`); else it is the signal's curvature of
    noise-free data, and no ratio makes the result untrusted."""
    if noise_floor is None or not noise_floor > 0 or not math.isfinite(result.cost):
        return ()
    ratio = result.cost / noise_floor
    if ratio <= COST_WARNING_RATIO:
        return ()
    untrusted = noise_resolved and ratio > COST_UNTRUSTED_RATIO
    verdict = (f" Above {COST_UNTRUSTED_RATIO:g} times the noise floor the result is not trusted (success false)."
               if untrusted else "" if noise_resolved else
               " (The data look noise-free: the floor is the signal's curvature, the ratio only a hint.)")
    return (Notice(f"the final cost {result.cost:.4g} is {ratio:.3g} times the noise floor {noise_floor:.4g} estimated "
                   "from the data (what the noise alone would leave): the fit does not explain the data. Likely "
                   f"causes: a wrong local minimum ({_other_start(starts_available)}); a model that lacks the "
                   "behaviour (its structure); wrong units or channel mapping (--map, the channels' units); a time "
                   f"offset between the data and the model (--time-shift).{verdict}", warning=True,
                   untrusted=untrusted),)


def noise_resolved(problem: AbstractIdentificationProblem) -> bool:
    """Whether the noise floor of ``problem`` measures noise: every channel of every
    least-squares cost has its noise resolved
    (:meth:`~fmi_adjoint.costs.LeastSquaresCost.noise_resolved`); False for other costs."""
    for exp in problem.experiments:
        cost = exp.cost.inner if isinstance(exp.cost, SensorCost) else exp.cost
        if not isinstance(cost, LeastSquaresCost) or not bool(np.all(cost.noise_resolved())):
            return False
    return True
