"""Adaptive 3-stage Radau IIA (order 5) for ``x' = f(t, x)`` with events, and its exact discrete sensitivities.

The scheme
----------
One step from ``(t0, y0)`` to ``t1 = t0 + h`` solves the stage equations for the stage increments
``Z_j = x_j - y0`` (``j = 1, 2, 3``)::

    Z_i = h sum_j a_ij f(t0 + c_j h, y0 + Z_j),        y1 = y0 + Z_3           (1)

(stiffly accurate: ``b`` is the last row of ``A``).  Hairer & Wanner, *Solving Ordinary
Differential Equations II*, Sec. IV.5 (Table 5.6: the coefficients) and Sec. IV.8 (the
implementation: simplified Newton, error estimate, step size control).

The stage equations are solved by simplified Newton with ``J0 = df/dx(t0, y0)``::

    (I - h A (x) J0) dZ = -(Z - h (A (x) I) F(Z))

to round-off (until the relative update is below 1e-14 or stops decreasing), not to a fraction
of the tolerance as in Hairer's code: the sensitivities below differentiate (1) as if it held
exactly, so the stages must satisfy it to round-off for them to be the derivative of what was
computed.  The start guess ``Z_j = c_j h f(t0, y0)`` depends on the step alone (not on the
previous step), so a step recomputed with the same ``(t0, t1, y0)`` is bit for bit the same: this
is what makes the frozen replay (``nodes=``) reproduce a run exactly.

Error estimate (Hairer & Wanner IV.8, eqs. (8.19)-(8.20)): the embedded formula
``yh1 = y0 + h (g0 f(t0, y0) + sum_j bh_j f_j)`` of order 3, with ``g0`` the real eigenvalue of
``A`` and ``bh`` fixed by the order conditions ``g0 [q = 1] + sum_j bh_j c_j^(q-1) = 1/q``
(``q = 1, 2, 3``).  With ``h F = (A^-1 (x) I) Z``::

    yh1 - y1 = g0 h f(t0, y0) + sum_j e_j Z_j,    e = (bh - b)^T A^-1
             = g0 h f(t0, y0) + g0 (d_1 Z_1 + d_2 Z_2 + d_3 Z_3),
    d = (-(13 + 7 sqrt 6)/3, (-13 + 7 sqrt 6)/3, -1/3)                                    (8.19)
    err = (I - h g0 J0)^-1 (yh1 - y1)                                                      (8.20)

The raw difference is ``O(h^4)``; the filter keeps the estimate bounded for stiff components
(``h J -> infinity``).  Hairer & Wanner state ``g0`` through the transformed (eigenvalue)
Newton variables of their code; what this module relies on is only that ``bh0 = g0`` is the real
eigenvalue of ``A`` (so that ``I - h g0 J`` is the real block of their transformed Newton
matrix) and that the embedded formula then has order 3: both are checked in the tests rather
than taken from the notation.  ``radau5``'s second filtered evaluation (on the first step and
after a rejection) is not used: it only spares rejections of stiff problems at loose tolerances.

Events (FMI 2 Model Exchange conventions)
-----------------------------------------
* State events: an indicator ``z_i`` is in the domain ``z_i > 0`` or ``z_i <= 0``; a change between
  the two ends of an accepted step is located by the Illinois variant of regula falsi on the
  step's end time ``te`` in ``(t0, t1]``, each trial being a full Radau step from ``(t0, y0)``
  to ``te`` (so the event state is a step of the scheme, differentiable in ``p``).  The event
  node is the right end of the final bracket (where the indicator already has its new domain),
  as in CVODE.
* Time events: a step is clipped to end exactly at ``system.next_time_event()``.
* Step events: ``system.completed_step(t1, x1)`` after every accepted step.

After a state event located in the accepted step ``(t0, b]`` the integration restarts from the
new states with the proposed step, capped by the distance to ``b``: ``b`` stays a node (held
like a stop), the step end the event search started from.

Frozen replay (``nodes=run.replay_nodes``) walks the recorded step ends in order without error
control, locating events again: an unchanged system gives the same run bit for bit (same
brackets, same Newton start guesses), a perturbed one finite differences of the same discrete
scheme, with its state-event times moving.

At most one ``system.event`` call happens per node; its kind is ``"state"`` if a state event was
located, else ``"time"`` if the step ended at a time event, else ``"step"``: the system's event
iteration handles everything pending at that time.

Sensitivities
-------------
See :func:`radau_sensitivities`: the forward sensitivities of the discrete scheme *with its node
times frozen* (fixed nodes) or defined by the indicator root (state-event nodes).
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt
import scipy.linalg

from ..errors import ConvergenceError, IdentificationError, ModelError, RunBudgetError

__all__ = [
    "RADAU_A",
    "RADAU_B",
    "RADAU_C",
    "OdeSystem",
    "RadauEvent",
    "RadauRun",
    "RadauSensitivities",
    "RadauStep",
    "RunBudget",
    "CompiledSteps",
    "SensitivityInputs",
    "check_deadline",
    "record_bytes_per_step",
    "integrate_radau",
    "radau_sensitivities",
    "radau_step",
    "scheme_constants",
    "sensitivities_at_stops",
    "values_at_stops",
]


def _frozen(values: npt.ArrayLike) -> np.ndarray:
    array = np.array(values, dtype=float)
    array.flags.writeable = False
    return array


_SQ6 = math.sqrt(6.0)

#: Nodes of 3-stage Radau IIA (Hairer & Wanner II, Table IV.5.6): the roots of the Radau
#: polynomial ``d^2/dx^2 (x^2 (x - 1)^3)``, so that the method is stiffly accurate (``c_3 = 1``).
RADAU_C = _frozen([(4.0 - _SQ6) / 10.0, (4.0 + _SQ6) / 10.0, 1.0])

#: Coefficients ``a_ij`` of 3-stage Radau IIA, closed form (Hairer & Wanner II, Table IV.5.6).
#: Satisfies the simplifying assumptions B(5), C(3), D(2): order 5, stage order 3, L-stable.
RADAU_A = _frozen([
    [(88.0 - 7.0 * _SQ6) / 360.0, (296.0 - 169.0 * _SQ6) / 1800.0, (-2.0 + 3.0 * _SQ6) / 225.0],
    [(296.0 + 169.0 * _SQ6) / 1800.0, (88.0 + 7.0 * _SQ6) / 360.0, (-2.0 - 3.0 * _SQ6) / 225.0],
    [(16.0 - _SQ6) / 36.0, (16.0 + _SQ6) / 36.0, 1.0 / 9.0],
])

#: Weights of 3-stage Radau IIA: the last row of ``A`` (stiffly accurate).
RADAU_B = _frozen(RADAU_A[2])

#: ``g0``: the real eigenvalue of ``RADAU_A`` (1 / the real eigenvalue of ``A^-1`` that
#: ``radau5`` calls ``U1``), the weight of ``f(t0, y0)`` in the embedded formula (8.19).
_GAMMA0 = (6.0 + 81.0 ** (1.0 / 3.0) - 9.0 ** (1.0 / 3.0)) / 30.0

#: ``e = (bh - b)^T A^-1`` of (8.19), closed form: ``g0 d`` with ``d`` the constants ``DD1..DD3``
#: of ``radau5``.  ``tests/test_radau.py`` checks that ``bh = b + A^T e`` has order 3.
_ERROR_WEIGHTS = _frozen(_GAMMA0 * np.array([-(13.0 + 7.0 * _SQ6) / 3.0, (-13.0 + 7.0 * _SQ6) / 3.0, -1.0 / 3.0]))

#: Newton stops when the update relative to ``|y0| + |Z| + atol/rtol`` is below this...
_NEWTON_TOL = 1e-14
#: ...or when the update stops decreasing while already below this (round-off reached; a
#: stagnating update above it is a diverging iteration: the step fails).
_NEWTON_STAGNATION = 1e-12
_NEWTON_MAX_ITERATIONS = 20
#: Step size controller (Hairer & Wanner IV.8, (8.21) without the predictive part).
_SAFETY, _FAC_MIN, _FAC_MAX = 0.9, 0.2, 5.0
#: A step proposal may be stretched by up to this fraction to reach a stop or time event
#: instead of leaving a remnant step.
_STRETCH = 0.1
#: State-event location: bracket width at which the search stops, in units of eps max(1, |t|).
_EVENT_WIDTH_ULPS = 8.0
_EVENT_MAX_ITERATIONS = 100
#: A proposed step below this many ulp of ``t`` underflows whatever ``RunBudget.min_step_relative``
#: says: ``t + h`` would round to a handful of distinct times.
_STEP_ULPS = 4.0

_FIX = "raise --rtol/--atol or check the parameter values."

#: Accumulating events (Zeno behaviour, a bouncing ball coming to rest; chattering): this many
#: consecutive events, each within ``_ZENO_GAP`` ulp of ``max(1, |t|)`` after the one before,
#: end the run with an error naming the time.  Geometrically shrinking bounce intervals reach
#: that gap after some 50 events; a run that went on would take tiny steps and spurious events
#: until the step budget.  The same count ends a run whose time events do not advance (each
#: announced within the gap of the current time).
_ZENO_EVENTS = 10
_ZENO_GAP = 1e3

#: Every this many attempted steps the run checks its progress: when at least half of them
#: were rejected and, at the rate of time they advanced, the rest of the run would need more
#: attempts than the step budget has left, it ends now instead of spending the budget (noisy
#: derivatives: the error control rejects most steps and shrinks them to ~1e-6 s for good).
_PROGRESS_WINDOW = 1000
_PROGRESS_REJECTED = 0.5


def scheme_constants() -> dict[str, object]:
    """The scheme's and the controller's constants, for compiled code that takes the same steps
    (:mod:`.radau_walk`): this module stays their one source."""
    return {"A": [float(v) for v in RADAU_A.ravel()], "c": [float(v) for v in RADAU_C], "gamma0": _GAMMA0,
            "error_weights": [float(v) for v in _ERROR_WEIGHTS], "newton_tol": _NEWTON_TOL,
            "newton_stagnation": _NEWTON_STAGNATION, "newton_max": _NEWTON_MAX_ITERATIONS, "safety": _SAFETY,
            "fac_min": _FAC_MIN, "fac_max": _FAC_MAX, "stretch": _STRETCH, "step_ulps": _STEP_ULPS,
            "progress_window": _PROGRESS_WINDOW}


@dataclasses.dataclass(frozen=True)
class RunBudget:
    """What one Model Exchange simulation may spend before it ends with :class:`RunBudgetError`.

    A run that exceeds a budget ends with one error naming the time reached, the budget and
    the option that raises it; nothing is measured by signals.  The defaults are far above
    every legitimate run of the test suite (the largest: 1.3e3 attempted steps, 6 events and
    2.2 s of integration) and keep the memory modest: the recorded run grows with its accepted
    steps, about 0.7 kB per step for one state and one parameter with the sensitivities
    (measured: 72 MB for 1e5 steps), more with ``n`` states and ``p`` parameters (see
    :func:`record_bytes_per_step`), and ``max_memory`` caps that record whatever the step
    budget allows.

    Attributes
    ----------
    max_steps : int
        Attempted steps (accepted and rejected) of one integration (``--max-steps``).
    max_events : int
        Events of one integration (``--max-events``); each may hold an FMU state.
    max_seconds : float
        Wall time of one simulation request: its integration, replays and sensitivities
        (``--run-timeout``).  Checked between steps (:func:`check_deadline`); a single FMI call
        that never returns is the business of the worker's per-call timeout (``--fmu-timeout``).
    min_step_relative : float
        The smallest step the error control may propose, relative to ``max(|t|, t_end - t0)``
        (and never below 4 ulp of ``t``); a smaller one ends the run as step-size underflow.
    max_memory : float
        Bytes the recorded run may hold (its accepted steps times the caller's estimate per
        step), 1 GiB by default.
    """

    max_steps: int = 200_000
    max_events: int = 20_000
    max_seconds: float = 600.0
    min_step_relative: float = 1e-14
    max_memory: float = float(1 << 30)

    def __post_init__(self) -> None:
        for option, value in (("--max-steps", self.max_steps), ("--max-events", self.max_events)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise IdentificationError(f"{option} {value!r}: give a whole number of at least 1.")
        seconds = self.max_seconds
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not (math.isfinite(seconds)
                                                                                      and seconds > 0):
            raise IdentificationError(f"--run-timeout {seconds!r}: give the longest time one simulation may take, a "
                                      f"positive number of seconds (default {RunBudget.max_seconds:g}).")
        if not (isinstance(self.min_step_relative, (int, float)) and 0.0 < self.min_step_relative < 1e-3):
            raise IdentificationError(f"min_step_relative = {self.min_step_relative!r}: give a fraction of the time "
                                      "span in (0, 1e-3), e.g. 1e-14.")
        if not (isinstance(self.max_memory, (int, float)) and self.max_memory > 0):
            raise IdentificationError(f"max_memory = {self.max_memory!r}: give a positive number of bytes.")

    def to_wire(self) -> dict:
        """As plain data (a worker request)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_wire(cls, data) -> RunBudget:
        """The budget of :meth:`to_wire` (the defaults when ``data`` is None)."""
        names = [field.name for field in dataclasses.fields(cls)]
        return cls() if data is None else cls(**{k: data[k] for k in names if k in data})

    def deadline(self) -> float:
        """The ``time.monotonic()`` by which a simulation started now must end."""
        return time.monotonic() + float(self.max_seconds)


def record_bytes_per_step(n: int, parameters: int = 0, partials: bool = False) -> int:
    """Estimated bytes a run holds per accepted step: the step itself (start state, stages and
    their derivatives, the node: ``8 n`` floats) and Python's object overhead (~0.6 kB), and
    with ``partials`` the stage Jacobians (``3 n²``), the replays' right-hand sides (``6 n p``)
    and the sensitivities (``2 n p``).  Within 20 % of the measured 0.7 kB for ``n = p = 1``."""
    floats = 8 * n + ((3 * n * n + 3 * n + 8 * n * parameters + parameters) if partials else 0)
    return 600 + 8 * floats


def check_deadline(deadline: float, budget: RunBudget, t: float, what: str = "the run") -> None:
    """:class:`RunBudgetError` when ``time.monotonic()`` has passed ``deadline`` (``t``: the time reached)."""
    if time.monotonic() > deadline:
        raise RunBudgetError(f"{what} exceeded its wall-time budget of {budget.max_seconds:g} s at t = {t:.9g} s; "
                             "raise --run-timeout if the model is only slow, or loosen --rtol/--atol.")


class OdeSystem(Protocol):
    """What :func:`integrate_radau` needs from the system ``x' = f(t, x)`` (an FMU, a test problem).

    The parameters are part of the system's own state; the integrator never sees them.  Each
    call may set the system's time and states (FMI ``fmi2SetTime``/``fmi2SetContinuousStates``).
    """

    n_states: int
    n_indicators: int

    def rhs(self, t: float, x: np.ndarray) -> np.ndarray:
        """``f(t, x)``, shape ``(n_states,)``."""
        ...

    def jacobian(self, t: float, x: np.ndarray) -> np.ndarray:
        """``df/dx(t, x)``, shape ``(n_states, n_states)`` (Newton matrix and error filter)."""
        ...

    def indicators(self, t: float, x: np.ndarray) -> np.ndarray:
        """Event indicators ``z(t, x)``, shape ``(n_indicators,)``; domains ``z > 0`` and ``z <= 0``."""
        ...

    def next_time_event(self) -> float | None:
        """The next time event, or None; valid after the start and after each event."""
        ...

    def event(self, t: float, x: np.ndarray, kind: str) -> np.ndarray:
        """Enter event mode at ``(t, x)``, iterate, return the new continuous states.

        ``kind`` is ``"state"``, ``"time"`` or ``"step"``.
        """
        ...

    def accepted(self, step: RadauStep) -> None:
        """Called with every accepted step, before :meth:`completed_step` and any event at its end
        (an FMU records its stage Jacobians there, while its discrete state is the step's)."""
        ...

    def completed_step(self, t: float, x: np.ndarray) -> bool:
        """Called after each accepted step; True asks for a step event at ``t``."""
        ...


class CompiledSteps(Protocol):
    """Takes the plain steps of a run in compiled code (:class:`.radau_walk.CompiledWalk`)."""

    def advance(self, walk: _Walk) -> bool:
        """Plain steps from ``walk``'s point, recorded into it (:meth:`_Walk.commit`,
        :meth:`_Walk.event_at_end`); True when the next attempt must be Python's."""


class SensitivityInputs(Protocol):
    """The derivatives of the system that :func:`radau_sensitivities` needs, at points of a run.

    ``step_index`` is an index into ``run.steps``; the stage points of step ``s`` are
    ``(s.t0 + c_j (s.t1 - s.t0), s.x0 + s.Z[j])`` (the last one at ``s.t1`` exactly).
    ``event_index`` is an index into ``run.events``; the event point is ``(e.t, e.x_minus)``.
    """

    def stage_jacobians(self, step_index: int) -> tuple[np.ndarray, np.ndarray]:
        """``(df/dx, df/dp)`` at the three stage points: shapes ``(3, n, n)`` and ``(3, n, n_p)``."""
        ...

    def stage_time_derivatives(self, step_index: int) -> np.ndarray:
        """``df/dt`` at the three stage points, shape ``(3, n)``; asked only for steps whose
        start or end is a state-event node."""
        ...

    def indicator_directional(self, event_index: int, dt: np.ndarray, dx: np.ndarray, dp: np.ndarray) -> np.ndarray:
        """``z_t dt + z_x dx + z_p dp`` of the event's indicator along ``k`` directions.

        ``dt (k,)``, ``dx (n, k)``, ``dp (n_p, k)`` -> ``(k,)``.
        """
        ...

    def jump_directional(self, event_index: int, dt: np.ndarray, dx: np.ndarray, dp: np.ndarray) -> np.ndarray:
        """``D_t dt + D_x dx + D_p dp`` of the reinitialisation ``x_plus = D(t, x_minus, p)``.

        ``dt (k,)``, ``dx (n, k)``, ``dp (n_p, k)`` -> ``(n, k)``.
        """
        ...


@dataclasses.dataclass(frozen=True, eq=False)
class RadauStep:
    """One accepted Radau step from ``(t0, x0)`` to ``t1``.

    Attributes
    ----------
    t0, t1 : float
    x0 : numpy.ndarray, shape (n,)
        Start state (post-event if the step starts at an event node).
    Z : numpy.ndarray, shape (3, n)
        Stage increments; the end state is ``x0 + Z[2]``.
    F : numpy.ndarray, shape (3, n)
        ``f`` at the stage points (from the last Newton iteration).
    err : float
        Scaled RMS norm of the filtered error estimate (``<= 1`` for accepted adaptive steps).
    newton_iterations : int
    trial_end : float
        The end time the step was first taken to: ``t1``, except for a step cut at a state
        event, where it is the end of the accepted step in which the event was located (the
        event search starts from the bracket ``(t0, trial_end]``; a replay needs it).
    """

    t0: float
    t1: float
    x0: np.ndarray
    Z: np.ndarray
    F: np.ndarray
    err: float
    newton_iterations: int
    trial_end: float = math.nan

    def __post_init__(self) -> None:
        for name in ("x0", "Z", "F"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        if math.isnan(self.trial_end):
            object.__setattr__(self, "trial_end", self.t1)


@dataclasses.dataclass(frozen=True, eq=False)
class RadauEvent:
    """An event handled at node ``node`` (time ``t``): ``x_minus`` before, ``x_plus`` after it.

    ``indicator`` is the index of the indicator whose root was located (state events), else None.
    """

    node: int
    t: float
    x_minus: np.ndarray
    x_plus: np.ndarray
    kind: str
    indicator: int | None

    def __post_init__(self) -> None:
        for name in ("x_minus", "x_plus"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))


@dataclasses.dataclass(frozen=True, eq=False)
class RadauRun:
    """The frozen result of :func:`integrate_radau`.

    Attributes
    ----------
    t : numpy.ndarray, shape (N+1,)
        Node times, strictly increasing; step ``k`` goes from node ``k`` to node ``k + 1``.
    x : numpy.ndarray, shape (N+1, n)
        Node states; at an event node the post-event state (pre-event: the event record).
    steps : tuple of RadauStep, length N
    events : tuple of RadauEvent
    stops : numpy.ndarray, shape (n_stops,)
        The ``stops`` argument.
    stop_nodes : numpy.ndarray of int, shape (n_stops,)
        Node index of each stop (see :func:`values_at_stops` for event nodes on stops).
    moving : numpy.ndarray of bool, shape (N+1,)
        True at state-event nodes, whose times depend on the parameters; every other node time
        (a stop, an error-controlled step end, a time event) is fixed.
    n_rhs, n_jacobians, n_rejected, n_newton : int
        Right-hand side and Jacobian evaluations, rejected steps, Newton iterations (all
        attempts, including event location).
    """

    t: np.ndarray
    x: np.ndarray
    steps: tuple[RadauStep, ...]
    events: tuple[RadauEvent, ...]
    stops: np.ndarray
    stop_nodes: np.ndarray
    moving: np.ndarray
    n_rhs: int
    n_jacobians: int
    n_rejected: int
    n_newton: int

    def __post_init__(self) -> None:
        for name in ("t", "x", "stops"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        for name, dtype in (("stop_nodes", int), ("moving", bool)):
            array = np.array(getattr(self, name), dtype=dtype)
            array.flags.writeable = False
            object.__setattr__(self, name, array)

    @property
    def replay_nodes(self) -> np.ndarray:
        """What to pass as ``nodes=`` for a frozen replay: ``t0`` and each step's ``trial_end``.

        Usually these are the fixed nodes ``t[~moving]`` in order.  They differ only after a
        state event whose following steps did not reach the end of the step it was located in
        (a rejected step, a stop in between): the sequence then returns to that earlier time,
        so that the replay searches the same bracket and reproduces the run bit for bit.
        """
        return np.concatenate([self.t[:1], [step.trial_end for step in self.steps]])

    def event_at(self, node: int) -> RadauEvent | None:
        """The event handled at ``node``, or None."""
        for event in self.events:
            if event.node == node:
                return event
        return None


@dataclasses.dataclass(frozen=True, eq=False)
class RadauSensitivities:
    """Total derivatives of a run's nodes with respect to the parameters.

    Attributes
    ----------
    D : numpy.ndarray, shape (N+1, n, n_p)
        ``dx_k/dp`` of the node states (post-event at event nodes).
    T : numpy.ndarray, shape (N+1, n_p)
        ``dt_k/dp`` of the node times (zero except at state-event nodes).
    D_minus : numpy.ndarray, shape (N+1, n, n_p)
        Equal to ``D`` except at event nodes, where it holds the derivative of the pre-event
        state ``x_minus`` (along the moving event time: the tangent total derivative).
    """

    D: np.ndarray
    T: np.ndarray
    D_minus: np.ndarray

    def __post_init__(self) -> None:
        for name in ("D", "T", "D_minus"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))


def values_at_stops(run: RadauRun) -> tuple[np.ndarray, np.ndarray]:
    """States at the stops: ``(x_left, x_right)``, each ``(n_stops, n)``.

    They differ only where an event node falls on a stop: ``x_left`` is then the pre-event and
    ``x_right`` the post-event state.
    """
    right = run.x[run.stop_nodes]
    left = right.copy()
    for i, node in enumerate(run.stop_nodes):
        event = run.event_at(int(node))
        if event is not None:
            left[i] = event.x_minus
    return left, right


def sensitivities_at_stops(run: RadauRun, sens: RadauSensitivities) -> tuple[np.ndarray, np.ndarray]:
    """``(D_left, D_right)`` at the stops, each ``(n_stops, n, n_p)``: the counterpart of
    :func:`values_at_stops` (left: pre-event at an event node on a stop)."""
    return sens.D_minus[run.stop_nodes], sens.D[run.stop_nodes]


class _Counts:
    """Work counters of one call (local to the call, never shared)."""

    def __init__(self) -> None:
        self.rhs = 0
        self.jacobians = 0
        self.rejected = 0
        self.unsolved = 0  # rejections because the stage equations were not solved (Newton failed)
        self.newton = 0
        self.attempts = 0


def _stage_times(t0: float, t1: float) -> tuple[float, float, float]:
    # The last stage sits exactly on t1 (t0 + 1.0 * (t1 - t0) need not round to t1).
    h = t1 - t0
    return t0 + float(RADAU_C[0]) * h, t0 + float(RADAU_C[1]) * h, t1


def _rhs(system: OdeSystem, t: float, x: np.ndarray, counts: _Counts) -> np.ndarray:
    counts.rhs += 1
    f = np.asarray(system.rhs(t, x), dtype=float)
    if f.shape != x.shape:
        raise ModelError(f"OdeSystem.rhs returned shape {f.shape} at t = {t:.6g} s, expected {x.shape}; "
                         "fix the system's rhs.")
    return f


def _jacobian(system: OdeSystem, t: float, x: np.ndarray, counts: _Counts) -> np.ndarray:
    counts.jacobians += 1
    J = np.asarray(system.jacobian(t, x), dtype=float)
    if J.shape != (x.size, x.size):
        raise ModelError(f"OdeSystem.jacobian returned shape {J.shape} at t = {t:.6g} s, expected "
                         f"{(x.size, x.size)}; fix the system's jacobian.")
    return J


def _indicators(system: OdeSystem, t: float, x: np.ndarray) -> np.ndarray:
    z = np.asarray(system.indicators(t, x), dtype=float).reshape(-1)
    if z.shape != (system.n_indicators,):
        raise ModelError(f"OdeSystem.indicators returned shape {z.shape} at t = {t:.6g} s, expected "
                         f"({system.n_indicators},); fix the system's indicators or n_indicators.")
    if not np.all(np.isfinite(z)):
        raise ConvergenceError(f"the event indicators at t = {t:.6g} s are not finite; {_FIX}")
    return z


def _lu(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """LU factors, or None for a singular or non-finite matrix (a failed step)."""
    if not np.all(np.isfinite(matrix)):
        return None
    with warnings.catch_warnings():
        # A singular matrix is reported by the zero pivot checked below (the step fails).
        warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
        lu, piv = scipy.linalg.lu_factor(matrix, check_finite=False)
    if np.any(np.diag(lu) == 0.0):
        return None
    return lu, piv


def _attempt(system: OdeSystem, t0: float, t1: float, x0: np.ndarray, f0: np.ndarray, J0: np.ndarray,
             atol: np.ndarray, rtol: float, counts: _Counts) -> tuple[RadauStep | None, np.ndarray]:
    """One Radau step (stage equations by simplified Newton to round-off, error estimate).

    Returns ``(None, raw)`` when Newton fails (divergence, non-finite values, no convergence in
    ``_NEWTON_MAX_ITERATIONS``); ``raw`` is the unfiltered estimate ``yh1 - y1`` of (8.19).
    """
    counts.attempts += 1
    n = x0.size
    h = t1 - t0
    if n == 0:
        empty = np.zeros((3, 0))
        return RadauStep(t0, t1, x0, empty, empty, 0.0, 0), np.zeros(0)
    factors = _lu(np.eye(3 * n) - h * np.kron(RADAU_A, J0))
    if factors is None:
        return None, np.full(n, np.nan)
    times = _stage_times(t0, t1)
    Z = np.outer(RADAU_C * h, f0)  # explicit start guess: depends on this step alone
    F = np.empty((3, n))
    floor = np.abs(x0) + atol / rtol
    previous = math.inf
    converged = False
    iterations = 0
    for _ in range(_NEWTON_MAX_ITERATIONS):
        iterations += 1
        counts.newton += 1
        for j in range(3):
            F[j] = _rhs(system, times[j], x0 + Z[j], counts)
        if not np.all(np.isfinite(F)):
            break
        residual = Z - h * (RADAU_A @ F)
        dZ = scipy.linalg.lu_solve(factors, -residual.reshape(-1), check_finite=False).reshape(3, n)
        Z = Z + dZ
        if not np.all(np.isfinite(Z)):
            break
        update = float(np.max(np.abs(dZ) / (floor + np.max(np.abs(Z), axis=0))))
        if update <= _NEWTON_TOL:
            converged = True
            break
        if update >= previous:
            # The update stopped decreasing: round-off reached, or divergence.
            converged = previous <= _NEWTON_STAGNATION
            break
        previous = update
    raw = _GAMMA0 * h * f0 + _ERROR_WEIGHTS @ Z
    if not converged:
        return None, raw
    filtered = np.linalg.solve(np.eye(n) - (h * _GAMMA0) * J0, raw)  # (8.20)
    x1 = x0 + Z[2]
    scale = atol + rtol * np.maximum(np.abs(x0), np.abs(x1))
    err = float(np.sqrt(np.mean((filtered / scale) ** 2)))
    if not math.isfinite(err):
        return None, raw
    return RadauStep(t0, t1, x0, Z, F.copy(), err, iterations), raw


def radau_step(system: OdeSystem, t0: float, t1: float, x0: np.ndarray, *, rtol: float = 1e-10,
               atol: float | np.ndarray = 1e-12) -> tuple[RadauStep, np.ndarray]:
    """One Radau IIA step from ``(t0, x0)`` to ``t1`` without error control or events.

    Returns the step and the *unfiltered* error estimate ``yh1 - y1`` of (8.19) (``O(h^4)``;
    ``step.err`` holds the filtered, scaled norm).

    Raises
    ------
    ConvergenceError
        When the stage equations cannot be solved to round-off.
    """
    x0 = np.array(x0, dtype=float).reshape(-1)
    atol_vector = np.broadcast_to(np.asarray(atol, dtype=float), x0.shape).copy()
    counts = _Counts()
    f0 = _rhs(system, t0, x0, counts) if x0.size else np.zeros(0)
    J0 = _jacobian(system, t0, x0, counts) if x0.size else np.zeros((0, 0))
    step, raw = _attempt(system, float(t0), float(t1), x0, f0, J0, atol_vector, float(rtol), counts)
    if step is None:
        raise ConvergenceError(f"the Radau step from t = {t0:.6g} s to {t1:.6g} s did not converge; "
                               "use a smaller step or check the parameter values.")
    return step, raw


def _domains(z: np.ndarray) -> np.ndarray:
    return z > 0.0


def _locate(system: OdeSystem, first: RadauStep, z0: np.ndarray, z1: np.ndarray, f0: np.ndarray,
            J0: np.ndarray, atol: np.ndarray, rtol: float, counts: _Counts) -> tuple[RadauStep, np.ndarray, int]:
    """Locate the first indicator domain change in ``first`` (Illinois regula falsi on the end time).

    Returns the step to the event time (right bracket end), the indicators there and the index of
    the indicator located.  Each trial is a Radau step from ``first.t0``; with several indicators
    changing, each iteration follows the one whose interpolated root is earliest, and a trial
    point moves the right end as soon as *any* indicator changed its domain there (CVODE's rule).
    """
    t0 = first.t0
    left_t, left_z = t0, z0
    right_t, right_z, right_step = first.t1, z1, first
    weight_left = weight_right = 1.0
    last_side = 0
    start_domains = _domains(z0)
    for _ in range(_EVENT_MAX_ITERATIONS):
        if right_t - left_t <= _EVENT_WIDTH_ULPS * np.finfo(float).eps * max(1.0, abs(right_t)):
            break
        changed = np.flatnonzero(_domains(right_z) != start_domains)
        zl = weight_left * left_z[changed]
        zr = weight_right * right_z[changed]
        # zl and zr have opposite domains, so zl - zr != 0 and the fraction lies in [0, 1].
        fraction = float(np.min(zl / (zl - zr)))
        trial = left_t + fraction * (right_t - left_t)
        if not left_t < trial < right_t:
            trial = left_t + 0.5 * (right_t - left_t)
            if not left_t < trial < right_t:
                break
        step, _ = _attempt(system, t0, trial, first.x0, f0, J0, atol, rtol, counts)
        if step is None:
            raise ConvergenceError(f"the Radau step from t = {t0:.6g} s to the event search point {trial:.17g} s "
                                   f"did not converge; {_FIX}")
        z = _indicators(system, trial, first.x0 + step.Z[2])
        if np.any(_domains(z) != start_domains):
            right_t, right_z, right_step = trial, z, step
            weight_right = 1.0
            if last_side == 1:
                weight_left *= 0.5  # Illinois: the left end was retained twice
            last_side = 1
        else:
            left_t, left_z = trial, z
            weight_left = 1.0
            if last_side == -1:
                weight_right *= 0.5
            last_side = -1
    else:  # the bracket did not close: the node would not be the root that T differentiates
        raise ConvergenceError(f"the state event between t = {left_t:.17g} s and {right_t:.17g} s was not located "
                               f"in {_EVENT_MAX_ITERATIONS} iterations (an indicator that is not continuous in "
                               f"time?); {_FIX}")
    changed = np.flatnonzero(_domains(right_z) != start_domains)
    zl, zr = left_z[changed], right_z[changed]
    indicator = int(changed[int(np.argmin(zl / (zl - zr)))])
    return dataclasses.replace(right_step, trial_end=first.t1), right_z, indicator


def _initial_step(system: OdeSystem, t0: float, x0: np.ndarray, f0: np.ndarray, atol: np.ndarray, rtol: float,
                  counts: _Counts) -> float:
    """Starting step (Hairer, Norsett & Wanner I, Sec. II.4, "starting step size", order 5)."""
    scale = atol + rtol * np.abs(x0)
    d0 = float(np.sqrt(np.mean((x0 / scale) ** 2)))
    d1 = float(np.sqrt(np.mean((f0 / scale) ** 2)))
    h0 = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
    f1 = _rhs(system, t0 + h0, x0 + h0 * f0, counts)
    d2 = float(np.sqrt(np.mean(((f1 - f0) / scale) ** 2))) / h0
    if not math.isfinite(d2):
        return h0
    h1 = max(1e-6, h0 * 1e-3) if max(d1, d2) <= 1e-15 else (0.01 / max(d1, d2)) ** (1.0 / 6.0)
    return min(100.0 * h0, h1)


def _check_arguments(system: OdeSystem, x0: np.ndarray, t0: float, t_end: float, stops: np.ndarray, rtol: float,
                     atol: np.ndarray, max_step: float, first_step: float | None,
                     nodes: np.ndarray | None) -> None:
    n = system.n_states
    if x0.shape != (n,):
        raise IdentificationError(f"x0 has shape {x0.shape}, the system has {n} states; pass one value per state.")
    if not np.all(np.isfinite(x0)):
        raise ConvergenceError(f"the initial state at t = {t0:.6g} s is not finite; {_FIX}")
    if not (math.isfinite(t0) and math.isfinite(t_end) and t_end > t0):
        raise IdentificationError(f"integrate_radau needs finite t0 < t_end, got t0 = {t0!r}, t_end = {t_end!r}; "
                                  "fix the time interval.")
    if not (math.isfinite(rtol) and rtol > 0.0) or not np.all(np.isfinite(atol) & (atol > 0.0)):
        raise IdentificationError(f"rtol = {rtol!r} and atol = {atol!r} must be positive and finite; "
                                  "pass tolerances such as rtol=1e-10, atol=1e-12.")
    if stops.size and (np.any(np.diff(stops) < 0.0) or stops[0] < t0 or stops[-1] > t_end
                       or not np.all(np.isfinite(stops))):
        raise IdentificationError(f"stops must be sorted times in [t0, t_end] = [{t0!r}, {t_end!r}], got "
                                  f"{stops[:5]!r}...; sort them and drop the ones outside the interval.")
    if not max_step > 0.0:
        raise IdentificationError(f"max_step = {max_step!r} must be positive; pass max_step > 0 or inf.")
    if first_step is not None and not (math.isfinite(first_step) and first_step > 0.0):
        raise IdentificationError(f"first_step = {first_step!r} must be positive and finite; pass None to "
                                  "let the integrator choose.")
    if nodes is not None and (nodes.size < 1 or nodes[0] != t0 or not np.all(np.isfinite(nodes))
                              or np.any(nodes[1:] <= t0) or np.any(nodes > t_end)):
        raise IdentificationError("nodes must start at t0 and lie in (t0, t_end] (pass run.replay_nodes of the "
                                  "run to replay, with its t0 and t_end).")


def integrate_radau(system: OdeSystem, x0: np.ndarray, t0: float, t_end: float, *, stops: Sequence[float] = (),
                    rtol: float = 1e-10, atol: float | np.ndarray = 1e-12, max_step: float = math.inf,
                    first_step: float | None = None, nodes: Sequence[float] | np.ndarray | None = None,
                    max_steps: int | None = None, budget: RunBudget | None = None,
                    deadline: float | None = None, step_bytes: int | None = None,
                    compiled: CompiledSteps | None = None) -> RadauRun:
    """Integrate ``x' = f(t, x)`` from ``(t0, x0)`` to ``t_end`` with adaptive Radau IIA and events.

    Parameters
    ----------
    system : OdeSystem
    x0 : numpy.ndarray, shape (n,)
        Initial state (after the system's initialization).
    t0, t_end : float
    stops : sequence of float
        Sorted times in ``[t0, t_end]`` (the sample times) hit exactly as nodes.
    rtol : float
    atol : float or numpy.ndarray, shape (n,)
        Error scale ``atol + rtol max(|x0|, |x1|)`` per component; steps with a scaled RMS error
        estimate above 1 are rejected; the next step is ``h clip(0.9 err^(-1/4), 0.2, 5)``.
    max_step : float
    first_step : float, optional
        Default: Hairer's starting step estimate.
    nodes : array_like, optional
        Frozen mode: ``run.replay_nodes`` of an earlier run (or its fixed node times
        ``run.t[~run.moving]``).  Each entry in turn is the end of the next step, taken with no
        error control (the estimate is still recorded); entries not after the current time are
        skipped; a state event located inside a step cuts it, and the walk continues from the
        event time to the next entry; time events clip steps as in adaptive mode; ``t_end``
        ends the walk.  An unchanged system reproduces the earlier run bit for bit; a perturbed
        one gives finite differences of the same discrete scheme.  ``stops`` must be nodes of
        the replay (pass those of the earlier run).
    max_steps : int, optional
        Attempted steps; overrides ``budget.max_steps``.
    budget : RunBudget, optional
        Steps, events, wall time and the smallest step of the run (default :class:`RunBudget`).
    deadline : float, optional
        The ``time.monotonic()`` by which the run must end (default: ``budget.max_seconds``
        from now); a caller that does more work for the same simulation passes its own.
    step_bytes : int, optional
        What the caller holds per accepted step (default :func:`record_bytes_per_step` of the
        run alone): the run ends when the accepted steps times this exceed ``budget.max_memory``.
    compiled : CompiledSteps, optional
        Takes the steps with no event inside them in compiled code (:mod:`.radau_walk`); every
        other attempt, and each one it hands back, is this module's.

    Raises
    ------
    ConvergenceError
        When the step size falls below the budget's smallest step, a state or right-hand side
        is not finite, a frozen step's Newton iteration fails, or state events accumulate; the
        message names the time.
    RunBudgetError
        When the run exceeds its budget of steps, events or wall time, or its time events stop
        advancing (announced within a few ulp of the current time, ten times in a row).
    IdentificationError
        For invalid arguments.
    ModelError
        When the system returns arrays of the wrong shape, or a next time event that is not a
        finite time after the current one.
    """
    x = np.array(x0, dtype=float).reshape(-1)
    t0, t_end = float(t0), float(t_end)
    rtol = float(rtol)
    n = x.size
    atol_vector = np.broadcast_to(np.asarray(atol, dtype=float), (n,)).copy() if n else np.zeros(0)
    stop_times = np.asarray(stops, dtype=float).reshape(-1)
    node_times = None if nodes is None else np.asarray(nodes, dtype=float).reshape(-1)
    _check_arguments(system, x, t0, t_end, stop_times, rtol, atol_vector, float(max_step), first_step, node_times)
    budget = budget or RunBudget()
    if max_steps is not None:
        budget = dataclasses.replace(budget, max_steps=max_steps)
    if node_times is None and (t_end - t0) / float(max_step) > budget.max_steps:
        raise RunBudgetError(f"the largest step {max_step:g} s needs {(t_end - t0) / max_step:.3g} steps to cover "
                             f"[{t0:g}, {t_end:g}] s, more than the step budget max_steps = {budget.max_steps}; "
                             "give a larger --step or raise --max-steps.")
    walk = _Walk(system, x, t0, t_end, stop_times, node_times, rtol, atol_vector, float(max_step), budget,
                 budget.deadline() if deadline is None else float(deadline),
                 record_bytes_per_step(n) if step_bytes is None else int(step_bytes), first_step)
    while walk.t < t_end:
        walk.check_progress()
        if compiled is not None and not compiled.advance(walk):
            continue
        t1 = walk.trial_end()
        step, _ = _attempt(system, walk.t, t1, walk.x, walk.f0, walk.J0, atol_vector, rtol, walk.counts)
        if step is None or (not walk.frozen and step.err > 1.0):
            walk.reject(step, t1 - walk.t)
        else:
            walk.accept(step, t1)
    return walk.result()


class _Walk:
    """The state of one :func:`integrate_radau` run between its steps: the current point, the
    record, the step-size proposal and the bookkeeping of targets, held stops and events.  Its
    methods are the jobs of one pass of the loop: choose where the next trial step ends
    (:meth:`trial_end`), reject it (:meth:`reject`, the error control's smaller step), or accept
    it (:meth:`accept`: state events located inside it, the record, time/step/state events and
    their reinitialisation)."""

    def __init__(self, system: OdeSystem, x: np.ndarray, t0: float, t_end: float, stop_times: np.ndarray,
                 node_times: np.ndarray | None, rtol: float, atol: np.ndarray, max_step: float, budget: RunBudget,
                 deadline: float, step_bytes: int, first_step: float | None) -> None:
        self.system, self.t0, self.t_end, self.stop_times = system, t0, t_end, stop_times
        self.rtol, self.atol, self.max_step, self.budget, self.deadline = rtol, atol, max_step, budget, deadline
        self.step_bytes = step_bytes
        self.max_accepted = max(1, int(budget.max_memory // max(step_bytes, 1)))
        self.frozen = node_times is not None
        if node_times is None:
            targets = np.union1d(stop_times, [t_end])
            self.targets = targets[targets > t0]
        else:  # in the recorded order (see RadauRun.replay_nodes), then t_end
            self.targets = np.concatenate([node_times[1:], [t_end]])
        self.counts = _Counts()
        self.t, self.x = t0, x
        self.z = _indicators(system, t0, x) if system.n_indicators else np.zeros(0)
        self.time_event = _next_time_event(system, t0)
        self.times, self.states, self.moving = [t0], [x.copy()], [False]
        self.steps: list[RadauStep] = []
        self.events: list[RadauEvent] = []
        self.f0, self.J0 = _start_derivatives(system, t0, x, self.counts)
        if self.frozen or x.size == 0:
            self.h_proposed = math.inf
        elif first_step is not None:
            self.h_proposed = float(first_step)
        else:
            self.h_proposed = _initial_step(system, t0, x, self.f0, atol, rtol, self.counts)
        self.target_index = 0
        self.close_events = 0  # consecutive events within the Zeno gap of the one before
        self.stalled = 0  # consecutive time events announced within the Zeno gap of the current time
        self.window = (t0, 0, 0)  # (t, rejected, unsolved) at the last progress check
        # Adaptive mode: after a state event cut the step (t0, b], the steps continue to b before
        # going further (b is held as a temporary stop), so that a replay that walks the fixed
        # nodes in order searches the same bracket (t0, b] and meets b next.
        self.hold: float | None = None

    def check_progress(self) -> None:
        """The step, wall-time and progress budgets before an attempt."""
        counts, budget = self.counts, self.budget
        if counts.attempts >= budget.max_steps:
            raise _steps_exhausted(budget, counts, self.t, self.t0, self.t_end, len(self.steps))
        check_deadline(self.deadline, budget, self.t)  # a clock read per attempt: ~0.1 us against ~100 us of FMI calls
        if counts.attempts and counts.attempts % _PROGRESS_WINDOW == 0 and not self.frozen:
            _progress_check(budget, counts, self.window, self.t, self.t_end)
            self.window = (self.t, counts.rejected, counts.unsolved)

    def trial_end(self) -> float:
        """Where the next trial step ends: the next target (stop, node or ``t_end``), a held stop
        or a time event if nearer, else ``t + h`` (stretched onto the limit when it is near)."""
        t, targets = self.t, self.targets
        while targets[self.target_index] <= t:  # targets[-1] = t_end > t
            self.target_index += 1
        limit = float(targets[self.target_index])
        if self.hold is not None:
            limit = min(limit, self.hold)
        if self.time_event is not None:
            limit = min(limit, self.time_event)
        if self.frozen:
            return limit
        h = min(self.h_proposed, self.max_step)
        reach = limit - t
        return limit if reach <= h or (reach <= (1.0 + _STRETCH) * h and reach <= self.max_step) else t + h

    def reject(self, step: RadauStep | None, h: float) -> None:
        """A trial step of length ``h`` whose stage equations failed (``step`` None) or whose error
        estimate exceeds 1: the next proposal, or an error when it falls below the smallest step
        (and always in frozen mode, where the step cannot shrink)."""
        t, counts, budget = self.t, self.counts, self.budget
        if self.frozen:
            raise ConvergenceError(f"the frozen Radau step from t = {t:.6g} s to {t + h:.6g} s did not converge; "
                                   f"{_FIX}")
        counts.rejected += 1
        counts.unsolved += step is None
        self.h_proposed = 0.5 * h if step is None else h * max(_FAC_MIN, _SAFETY * step.err ** -0.25)
        floor = max(budget.min_step_relative * max(abs(t), self.t_end - self.t0), _STEP_ULPS * math.ulp(t))
        if self.h_proposed < floor:
            raise ConvergenceError(
                f"the step size at t = {t:.9g} s fell to {self.h_proposed:.3g} s, below the smallest step "
                f"{floor:.3g} s ({budget.min_step_relative:g} of the time span): the error control cannot meet "
                f"rtol = {self.rtol:g} there "
                f"({'Newton did not converge' if step is None else f'error estimate {step.err:.3g}'}); the "
                "derivatives are stiff, not smooth (noise?) or not finite: raise --rtol/--atol (looser "
                "tolerances), or check the parameter values and the model.")

    def accept(self, step: RadauStep, t1: float) -> None:
        """The trial step to ``t1`` passed: cut it at a state event inside it, record it, handle
        the events at its end and move on."""
        system, t = self.system, self.t
        h = t1 - t
        if not self.frozen:
            factor = _FAC_MAX if step.err == 0.0 else min(_FAC_MAX, max(_FAC_MIN, _SAFETY * step.err ** -0.25))
            self.h_proposed = h * factor
        x1 = self.x + step.Z[2]
        kind: str | None = None
        indicator: int | None = None
        if system.n_indicators:
            z1 = _indicators(system, t1, x1)
            if np.any(_domains(z1) != _domains(self.z)):
                step, z1, indicator = _locate(system, step, self.z, z1, self.f0, self.J0, self.atol, self.rtol,
                                              self.counts)
                t1, x1, kind = step.t1, self.x + step.Z[2], "state"
            self.z = z1
        if self.frozen:
            self.target_index = _next_entry(self.targets, self.target_index, t1, kind == "state")
        elif kind == "state" and t1 < step.trial_end:
            self.hold = step.trial_end
        elif self.hold is not None and t1 >= self.hold:
            self.hold = None
        if len(self.steps) >= self.max_accepted:
            raise RunBudgetError(f"the run's record reached {len(self.steps)} steps of about "
                                 f"{self.step_bytes / 1e3:.3g} kB at t = {t1:.9g} s of [{self.t0:g}, "
                                 f"{self.t_end:g}] s, the memory budget of {self.budget.max_memory / 2**20:.0f} MiB; "
                                 "shorten the run (--t-end), loosen --rtol/--atol or identify fewer parameters at "
                                 "once.")
        self.steps.append(step)
        system.accepted(step)
        step_event = bool(system.completed_step(t1, x1))
        if kind is None and self.time_event is not None and t1 == self.time_event:
            kind = "time"
        if kind is None and step_event:
            kind = "step"
        node = len(self.times)
        self.times.append(t1)
        self.moving.append(kind == "state")
        if kind is not None:
            x1 = self._event(node, t1, x1, kind, indicator)
        self.states.append(x1.copy())
        self.t, self.x = t1, x1
        if t1 < self.t_end:
            self.f0, self.J0 = _start_derivatives(system, t1, x1, self.counts)

    def commit(self, step: RadauStep, x1: np.ndarray) -> None:
        """Record a plain step taken in compiled code (what :meth:`accept` records of a step with
        no event; the point, the step proposal and the targets were moved by the caller)."""
        self.steps.append(step)
        self.times.append(step.t1)
        self.moving.append(False)
        self.states.append(np.array(x1, dtype=float))

    def event_at_end(self, kind: str) -> None:
        """The time or step event at the end of the last step committed (:meth:`commit`), as
        :meth:`accept` handles it, and the derivatives at the new start."""
        x_plus = self._event(len(self.times) - 1, self.t, self.x, kind, None)
        self.states[-1] = x_plus.copy()
        self.x = x_plus
        if self.t < self.t_end:
            self.start_derivatives()

    def start_derivatives(self) -> None:
        """``f0`` and ``J0`` at the current point (:func:`_start_derivatives`)."""
        self.f0, self.J0 = _start_derivatives(self.system, self.t, self.x, self.counts)

    def _event(self, node: int, t1: float, x1: np.ndarray, kind: str, indicator: int | None) -> np.ndarray:
        """The event of ``kind`` at node ``node``: the budget and Zeno checks, the system's
        reinitialisation (checked), the record, and the next indicators and time event."""
        system, budget = self.system, self.budget
        if len(self.events) >= budget.max_events:
            raise RunBudgetError(f"the run reached max_events = {budget.max_events} events at t = {t1:.9g} s of "
                                 f"[{self.t0:g}, {self.t_end:g}] s (the event budget); raise --max-events if so "
                                 "many events are expected, else check the model's events.")
        self.close_events = _zeno_check(self.events, t1, kind, self.close_events)
        x_plus = np.array(system.event(t1, x1, kind), dtype=float).reshape(-1)
        if x_plus.shape != x1.shape:
            raise ModelError(f"OdeSystem.event returned shape {x_plus.shape} at t = {t1:.6g} s, expected "
                             f"{x1.shape}; fix the system's event.")
        if not np.all(np.isfinite(x_plus)):
            raise ConvergenceError(f"the states after the {kind} event at t = {t1:.6g} s are not finite; {_FIX}")
        self.events.append(RadauEvent(node, t1, x1, x_plus, kind, indicator))
        if system.n_indicators:
            self.z = _indicators(system, t1, x_plus)
        self.time_event = _next_time_event(system, t1)
        self.stalled = _stall_check(self.time_event, t1, self.stalled)
        return x_plus

    def result(self) -> RadauRun:
        """The run's record (every stop must be a node: in frozen mode, of the replayed run)."""
        time_array = np.array(self.times)
        stop_times = self.stop_times
        stop_nodes = np.minimum(np.searchsorted(time_array, stop_times), time_array.size - 1)
        missed = stop_times[time_array[stop_nodes] != stop_times]
        if missed.size:
            raise IdentificationError(f"the stops {missed[:3]!r} are not nodes of the frozen run; pass the stops of "
                                      "the run whose replay_nodes are given.")
        counts = self.counts
        return RadauRun(t=time_array, x=np.array(self.states).reshape(len(self.times), self.x.size),
                        steps=tuple(self.steps), events=tuple(self.events), stops=stop_times, stop_nodes=stop_nodes,
                        moving=np.array(self.moving), n_rhs=counts.rhs, n_jacobians=counts.jacobians,
                        n_rejected=counts.rejected, n_newton=counts.newton)


def _zeno_gap(t: float) -> float:
    return _ZENO_GAP * np.finfo(float).eps * max(1.0, abs(t))


def _zeno_check(events: list[RadauEvent], t1: float, kind: str, close: int) -> int:
    """The count of consecutive close events after one of ``kind`` at ``t1``; an error when they
    accumulate (see ``_ZENO_EVENTS``): state events only (Zeno behaviour, which the parameters
    may cause) are a :class:`ConvergenceError`, any other mix a :class:`RunBudgetError`."""
    gap = _zeno_gap(t1)
    close = close + 1 if events and t1 - events[-1].t <= gap else 0
    if close < _ZENO_EVENTS:
        return close
    kinds = {event.kind for event in events[-close:]} | {kind}
    if kinds == {"state"}:
        raise ConvergenceError(f"state events accumulate at t = {t1:.12g} s ({close + 1} events, each within "
                               f"{gap:.2g} s of the one before: Zeno behaviour, e.g. a bouncing ball coming to "
                               "rest); end the data before that time, or check the parameter values.")
    raise RunBudgetError(f"{' and '.join(sorted(kinds))} events chatter at t = {t1:.12g} s ({close + 1} events, each "
                         f"within {gap:.2g} s of the one before): the model's events do not let time advance; this "
                         "is a defect of the model (FMU): have it fixed, or end the data before that time.")


def _next_time_event(system: OdeSystem, t: float) -> float | None:
    """The system's next time event after an event iteration at ``t``: None, or a finite time
    after ``t`` (else a :class:`ModelError` naming the value: the iteration at ``t`` handled
    everything due at ``t``, so an event at or before ``t`` can never be reached)."""
    announced = system.next_time_event()
    if announced is None:
        return None
    value = float(announced)
    if math.isfinite(value) and value > t:
        return value
    why = ("is not a finite time" if not math.isfinite(value)
           else "is the current time again" if value == t else f"lies {t - value:.3g} s in the past")
    raise ModelError(f"the next time event announced at t = {t!r} s is {value!r}, which {why}; a time event must lie "
                     "after the time it is announced at: this is a defect of the model (FMU), have it fixed.")


def _stall_check(time_event: float | None, t: float, stalled: int) -> int:
    """The count of consecutive time events announced within the Zeno gap of the event time
    ``t``; a :class:`RunBudgetError` when they do not advance (``_ZENO_EVENTS`` in a row)."""
    if time_event is None or time_event - t > _zeno_gap(t):
        return 0
    stalled += 1
    if stalled >= _ZENO_EVENTS:
        raise RunBudgetError(f"the time events do not advance: the next time event is {time_event - t:.3g} s after "
                             f"t = {t!r} s, the {stalled}th in a row within {_zeno_gap(t):.2g} s of the one before "
                             "(a few ulp); this is a defect of the model (FMU): have it fixed.")
    return stalled


def _progress_check(budget: RunBudget, counts: _Counts, window: tuple[float, int, int], t: float,
                    t_end: float) -> None:
    """End a run that rejects most of its steps and, at its present rate, cannot reach ``t_end``
    within the step budget (see ``_PROGRESS_WINDOW``)."""
    rejected = counts.rejected - window[1]
    if rejected < _PROGRESS_REJECTED * _PROGRESS_WINDOW:
        return
    rate = (t - window[0]) / _PROGRESS_WINDOW  # time per attempt
    needed = (t_end - t) / rate if rate > 0.0 else math.inf
    if needed <= budget.max_steps - counts.attempts:
        return
    unsolved = counts.unsolved - window[2]
    if unsolved >= rejected / 2:
        why = (f"{unsolved} of them because the stage equations could not be solved to round-off, which no tolerance "
               "changes: the derivatives are not smooth in the states or time (noise?); fix the model (FMU)")
    else:
        why = "the error estimate exceeded the tolerance: loosen --rtol/--atol, or check the model's smoothness"
    raise RunBudgetError(f"the integration rejected {rejected} of the last {_PROGRESS_WINDOW} steps before "
                         f"t = {t:.9g} s, advancing {rate:.3g} s per step: at that rate the run needs {needed:.3g} "
                         f"more steps, beyond the step budget max_steps = {budget.max_steps} ({why}).")


def _steps_exhausted(budget: RunBudget, counts: _Counts, t: float, t0: float, t_end: float,
                     accepted: int) -> RunBudgetError:
    """The error of a run that used its step budget, with the mean step it was taking."""
    mean = (t - t0) / accepted if accepted else 0.0
    return RunBudgetError(f"the run attempted max_steps = {budget.max_steps} steps ({counts.rejected} rejected) and "
                          f"reached t = {t:.9g} s of [{t0:g}, {t_end:g}] s with a mean step of {mean:.3g} s (the step "
                          "budget); raise --max-steps if the model needs so many steps, or, if the steps are tiny, "
                          "loosen --rtol/--atol: stiff or noisy (not smooth) derivatives keep the steps small.")


def _next_entry(entries: np.ndarray, index: int, t1: float, cut: bool) -> int:
    """Frozen mode: the entry the next step aims at, after a step to ``t1`` aimed at ``entries[index]``.

    A step that reached its entry moves on; one clipped at a time event before it keeps it.  A step
    cut at a state event keeps it too (the remainder of the cut step goes there: the fixed-node
    list ``run.t[~run.moving]``), unless the next entry is not after it: ``run.replay_nodes`` then
    lists where the steps after the event went (the run's own ends, in order).
    """
    if cut:
        if index + 1 < entries.size and entries[index + 1] <= entries[index]:
            return index + 1
        return index
    return index + 1 if t1 >= entries[index] and index + 1 < entries.size else index


def _start_derivatives(system: OdeSystem, t: float, x: np.ndarray, counts: _Counts) -> tuple[np.ndarray, np.ndarray]:
    """``f`` and ``df/dx`` at a step start (shared by the attempts and event trials from there)."""
    if x.size == 0:
        return np.zeros(0), np.zeros((0, 0))
    f0 = _rhs(system, t, x, counts)
    if not np.all(np.isfinite(f0)):
        raise ConvergenceError(f"the right-hand side at t = {t:.6g} s is not finite; {_FIX}")
    J0 = _jacobian(system, t, x, counts)
    return f0, J0


def radau_sensitivities(run: RadauRun, derivatives: SensitivityInputs, S0: np.ndarray) -> RadauSensitivities:
    """Forward sensitivities of a run: the exact derivatives of the discrete scheme as it ran.

    The stage equations (1) are assumed to hold exactly (they hold to round-off, see the module
    docstring).  A step is ``y1 = Phi(t0, t1, y0, p)``; differentiating
    ``G(Z) = Z - h (A (x) I) col(f(t0 + c_j h, y0 + Z_j, p)) = 0`` with ``h = t1 - t0`` gives, with
    ``J_j, Fp_j, ft_j`` the derivatives of ``f`` at the stage points::

        M = I - h (A (x) I) blockdiag(J_j)                       (3n x 3n, one LU per step)
        M dZ/dy0 = h (A (x) I) col(J_j)                          Phi_y  = I + dZ_3/dy0
        M dZ/dp  = h (A (x) I) col(Fp_j)                         Phi_p  = dZ_3/dp
        M dZ/dt1 = (A (x) I) col(f_j + h c_j ft_j)               Phi_t1 = dZ_3/dt1   (t0 fixed)
        M dZ/dt0 = (A (x) I) col(-f_j + h (1 - c_j) ft_j)        Phi_t0 = dZ_3/dt0   (t1 fixed)

    (``dh/dt1 = 1``, ``dh/dt0 = -1``; the stage time ``(1 - c_j) t0 + c_j t1``.)  With ``D_k``,
    ``T_k`` the derivatives of node state and node time::

        W      = Phi_y D0 + Phi_p + Phi_t0 T0          (one solve with n_p right-hand sides)
        D1     = W + Phi_t1 T1

    ``T1 = 0`` at fixed nodes.  At a state event of indicator ``z`` the node time is the root of
    ``z(t1, Phi(t0, t1, y0, p), p) = 0``, so (implicit function theorem)::

        T1      = -(z_x W + z_p) / (z_x Phi_t1 + z_t)
        D_minus = W + Phi_t1 T1
        D_plus  = Delta_t T1 + Delta_x D_minus + Delta_p     (x_plus = Delta(t, x_minus, p))

    (one ``indicator_directional`` call along the ``n_p + 1`` directions ``(1, Phi_t1, 0)`` and
    ``(0, W e_k, e_k)``, one ``jump_directional`` call along ``(T1_k, D_minus e_k, e_k)``).  Time
    and step events have ``T1 = 0`` and ``D_plus = Delta_x D_minus + Delta_p``.

    The located event node is the right end of a bracket of width ``~8 ulp`` around the discrete
    root, so ``T1`` is the derivative of that root; finite differences of the frozen replay agree
    with it up to that bracket width divided by the difference step.

    Parameters
    ----------
    run : RadauRun
    derivatives : SensitivityInputs
        The system's derivatives at the run's stage and event points, for the parameter vector of
        the run.
    S0 : numpy.ndarray, shape (n, n_p)
        ``dx0/dp`` (from the initialization).
    """
    S0 = np.asarray(S0, dtype=float)
    n = run.x.shape[1]
    if S0.ndim != 2 or S0.shape[0] != n:
        raise IdentificationError(f"S0 has shape {S0.shape}, expected (n_states, n_p) = ({n}, n_p); pass dx0/dp.")
    n_p = S0.shape[1]
    N = run.t.size - 1
    D = np.empty((N + 1, n, n_p))
    D_minus = np.empty_like(D)
    T = np.zeros((N + 1, n_p))
    D[0] = D_minus[0] = S0
    event_index = {event.node: k for k, event in enumerate(run.events)}
    eye_p = np.eye(n_p)
    A = RADAU_A
    c = RADAU_C
    for k, step in enumerate(run.steps):
        start_moves, end_moves = bool(run.moving[k]), bool(run.moving[k + 1])
        h = step.t1 - step.t0
        phi_t1 = np.zeros(n)
        if n == 0:
            W = D[k].copy()
        else:
            J, Fp = derivatives.stage_jacobians(k)
            J = np.asarray(J, dtype=float)
            Fp = np.asarray(Fp, dtype=float).reshape(3, n, n_p)
            blocks = (A[:, :, None, None] * J[None, :, :, :]).transpose(0, 2, 1, 3).reshape(3 * n, 3 * n)
            factors = _lu(np.eye(3 * n) - h * blocks)
            if factors is None:
                raise ConvergenceError(f"the sensitivity matrix of the Radau step at t = {step.t0:.6g} s is singular "
                                       f"or not finite; {_FIX}")
            G = np.einsum("jab,bq->jaq", J, D[k]) + Fp
            rhs = h * np.einsum("jk,kaq->jaq", A, G)
            columns = [rhs.reshape(3 * n, n_p)]
            ft = None
            if start_moves or end_moves:
                ft = np.asarray(derivatives.stage_time_derivatives(k), dtype=float).reshape(3, n)
            if start_moves and ft is not None:
                g0 = A @ (-step.F + h * (1.0 - c)[:, None] * ft)
                columns[0] = columns[0] + np.outer(g0.reshape(-1), T[k])
            if end_moves and ft is not None:
                columns.append((A @ (step.F + h * c[:, None] * ft)).reshape(3 * n, 1))
            solution = scipy.linalg.lu_solve(factors, np.hstack(columns), check_finite=False)
            dZ3 = solution.reshape(3, n, -1)[2]
            W = D[k] + dZ3[:, :n_p]
            if end_moves:
                phi_t1 = dZ3[:, n_p]
        node = k + 1
        event = event_index.get(node)
        if event is None:
            D[node] = D_minus[node] = W
            continue
        record = run.events[event]
        if record.kind == "state":
            directions_t = np.concatenate([[1.0], np.zeros(n_p)])
            directions_x = np.hstack([phi_t1[:, None], W])
            directions_p = np.hstack([np.zeros((n_p, 1)), eye_p])
            dz = np.asarray(derivatives.indicator_directional(event, directions_t, directions_x, directions_p),
                            dtype=float).reshape(n_p + 1)
            if dz[0] == 0.0 or not math.isfinite(float(dz[0])):
                raise ConvergenceError(f"the indicator of the state event at t = {record.t:.6g} s has zero time "
                                       f"derivative along the solution (a grazing event); its time has no "
                                       f"derivative: {_FIX}")
            T[node] = -dz[1:] / dz[0]
        Dm = W + np.outer(phi_t1, T[node])
        D_minus[node] = Dm
        jumped = derivatives.jump_directional(event, T[node].copy(), Dm, eye_p)
        D[node] = np.asarray(jumped, dtype=float).reshape(n, n_p)
    return RadauSensitivities(D=D, T=T, D_minus=D_minus)
