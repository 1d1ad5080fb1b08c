"""A system of Model Exchange FMUs as one instance, in one worker (issue 28, part 2: ME systems).

Runs in the worker process (:mod:`.worker`, request ``instantiate_system``), next to the binaries.
:class:`SystemInstance` has the interface of the worker's instance of one FMU, so the adaptive
Radau IIA run of :mod:`.me_run`, its events (:class:`.me_integration.FmuOdeSystem`) and its exact
sensitivities (:mod:`.me_sensitivities`) integrate the coupled system unchanged, as one ODE.

The coupled system
------------------
Component ``k`` has the states ``x_k``, inputs ``u_k`` and outputs ``y_k = g_k(t, x_k, u_k)``; each
connected input is ``u = factor * y + offset`` of the output that drives it (SSP's linear and unit
transformations folded into one :class:`~fmi_adjoint.ssp.structure.Transformation`) or of a system
input.  The system's state is ``x = (x_1, ..., x_n)`` and its right-hand side

    f(t, x) = (f_1(t, x_1, u_1), ..., f_n(t, x_n, u_n)),   u = C(y(t, x, u)),

where ``u`` is found by one pass through the ports in the order of their dependencies when no cycle
runs through outputs that depend directly on inputs (:meth:`SystemInstance.couple`: read the outputs
of level ``L``, set the inputs of level ``L + 1``; the parent computes the levels,
:mod:`fmi_adjoint.ssp.monolithic`).  An algebraic loop (such a cycle) is torn at some of its inputs
``u_T`` (the parent chooses them so that every cycle is cut): the pass then runs from given ``u_T``,
and Newton's method solves ``u_T - C_T(y(u_T)) = 0`` around it at every point (its Jacobian by
forward differences; from the run's first solution and the Jacobian there, recomputed for a point
where the residual does not fall by half; to :data:`LOOP_TOLERANCE` and one step beyond, so that the
right-hand side is the loop's solution to round-off and a function of the point alone); a loop whose
Jacobian is singular (condition number independent of the ports' units, :func:`loop_condition`, above
:data:`MAX_LOOP_CONDITION`, e.g. a loop gain of 1) or that does not converge is a failure naming its
ports. The system is then an ODE in ``x`` (an index-1 DAE with its algebraic part solved inside the
right-hand side). So every total derivative the sensitivities need (``df/dx`` through the couplings,
``df/dp`` of one component's parameter acting on the others through its outputs, the events' jumps)
is that of the coupled right-hand side, taken by the existing code: differences of :meth:`rhs` for
the state columns, replays of the whole system for the parameters.

Events
------
A state or time event of any component is an event of the system: every component enters Event
Mode (FMI 2.0, sec. 3.2.2: the others' event iteration is then empty, unless their inputs change),
the pending ones iterate their discrete states until they settle, the coupling is passed again
(outputs read, inputs set: no state and no time is set in Event Mode), and a component whose inputs
changed is pending again, until no input changes (at most :data:`EVENT_ROUNDS` rounds): an event in
one FMU that makes another's discrete input jump is resolved at the same instant.  Then every
component enters continuous-time mode.  Step events are the union of the components'
(``fmiCompletedIntegratorStep``), the next time event the earliest announced.

FMU states (the snapshots the event sensitivities restore) are the tuples of the components'.
A component's failure names the system and the component (its instance's ``fmu_name``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import ConvergenceError, ModelError, RunBudgetError
from ..integrate.radau import RunBudget, integrate_radau
from .me_integration import FmuOdeSystem

__all__ = ["EVENT_ROUNDS", "LOOP_DIFFERENCE_STEP", "LOOP_ITERATIONS", "LOOP_TOLERANCE", "MAX_LOOP_CONDITION",
           "SystemInstance", "loop_condition", "loop_scale",
           "unsolvable_loop"]

#: Rounds of the event iteration across components (each round: the pending components settle,
#: then the coupling is passed); a system that needs more is taken as chattering.
EVENT_ROUNDS = 1000
#: Algebraic loops: Newton's method stops at ``|u_i - C_i(y(u))| <= LOOP_TOLERANCE * loop_scale_i``
#: for every torn input i (:func:`loop_scale`: each against its own terms, since the ports carry
#: different units; then takes one more step), within LOOP_ITERATIONS iterations; its Jacobian by forward
#: differences of relative step LOOP_DIFFERENCE_STEP (accurate to about 1e-8 relative: the
#: iteration converges linearly at that rate, and the last step leaves round-off); a Jacobian whose
#: unit-independent condition number (:func:`loop_condition`) exceeds MAX_LOOP_CONDITION has no
#: unique solution (e.g. a loop gain of 1); the co-simulation master uses the same bound
#: (:func:`unsolvable_loop`).
LOOP_TOLERANCE = 1e-12
LOOP_ITERATIONS = 30
LOOP_DIFFERENCE_STEP = 1e-7
MAX_LOOP_CONDITION = 1e6


def loop_condition(jacobian: np.ndarray) -> float:
    """The condition number of an algebraic loop's Jacobian ``J = I - G`` (``G = dC/du``, the loop
    gains) that does not depend on the ports' units: ``rho(|J^-1| (I + |G|))``; infinite for a
    singular ``J``.

    A port's unit change ``u_i -> s_i u_i`` scales the residual ``u - C(y(u))`` alike, so ``J``
    becomes ``S J S^-1`` and ``|J^-1| (I + |G|)`` a similar matrix, with the same spectral radius.
    The plain condition number does change: the hydro engine mount cut at its bulge spring,
    ``F_b = c_H (x2 - x1in)`` with ``c_H = 3.75e5 N/m``, has the well-posed ``J = [[1, c_H],
    [0, 1]]``, of plain condition ``c_H^2 = 1.4e11`` and 1 here.  The terms are measured before
    they cancel (``I + |G|``, not ``|J|``): an entry ``1 - g`` with ``g`` near 1 is computed from
    ``1`` and ``g`` (by differences accurate to about 1e-9 of ``g``), so a self-loop ``u = u + c``
    (no solution) counts as ``2 / |1 - g|``, not as 1.  Where ``G`` has a zero diagonal this is
    Bauer's optimally scaled condition number ``rho(|J^-1| |J|)`` (Numer. Math. 5 (1963) 73-87).
    It is what :data:`MAX_LOOP_CONDITION` bounds, here and in the co-simulation master.
    """
    if jacobian.size == 0:
        return 1.0
    if not np.all(np.isfinite(jacobian)):
        return math.inf
    try:
        inverse = np.linalg.inv(jacobian)
    except np.linalg.LinAlgError:
        return math.inf
    terms = np.eye(jacobian.shape[0]) + np.abs(np.eye(jacobian.shape[0]) - jacobian)
    product = np.abs(inverse) @ terms
    if not np.all(np.isfinite(product)):
        return math.inf
    return float(np.max(np.abs(np.linalg.eigvals(product))))


def unsolvable_loop(jacobian: np.ndarray) -> str | None:
    """Why a loop with this Jacobian is not solved, as the rest of a sentence that names the loop
    (the master's and the Model Exchange system's errors), or None: a Jacobian that is not finite,
    or a condition number (:func:`loop_condition`) above :data:`MAX_LOOP_CONDITION`."""
    if not np.all(np.isfinite(jacobian)):
        return ("has a Jacobian that is not finite (a component's output or derivative); check the parameters and "
                "the inputs")
    condition = loop_condition(jacobian)
    if condition <= MAX_LOOP_CONDITION:
        return None
    return (f"has no unique solution (the condition number of its Jacobian, independent of the ports' units, is "
            f"{condition:.3g})")


def loop_scale(u: np.ndarray, jacobian: np.ndarray | None) -> np.ndarray:
    """What each torn input's residual ``r_i = u_i - C_i(y(u))`` is measured against:
    ``1 + |u_i| + sum_j |G_ij| |u_j|`` (``G = I - J``, the loop gains; without a Jacobian yet, ``G``
    is taken as 0).  The terms ``C_i`` sums are in it, so that a port near 0 computed from large
    terms that cancel (round-off about eps of those terms) still converges, and a large port does
    not set the tolerance of a small one: a componentwise backward error (Oettli and Prager, Numer.
    Math. 6 (1964)).  The 1 is an absolute floor for ports at 0, in the port's own unit: the one
    place where units still count (a port whose values are about 1e-9 in its unit converges only
    to the tolerance in absolute terms)."""
    size = 1.0 + np.abs(u)
    if jacobian is not None:
        size = size + np.abs(np.eye(u.size) - jacobian) @ np.abs(u)
    return size


def _changed(before: float, after: float) -> bool:
    """Whether a coupled input changed in an event round: by more than the round-off a loop's
    solution carries (:data:`LOOP_TOLERANCE`), and NaN only from a number (a discrete change is
    far larger; a loop solved again must not make the iteration chatter)."""
    if before != before or after != after:  # NaN
        return (before != before) != (after != after)
    return abs(after - before) > LOOP_TOLERANCE * (1.0 + abs(before))


class SystemInstance:
    """The components' instances coupled as ``plan`` says, with the interface of one instance.

    References: ``(k, ref)`` is the reference ``ref`` of component ``k`` (a wire reference of the
    worker's instance); ``("input", NAME)`` a system input connector (its value is held here and
    enters the coupling); ``("output", NAME)`` a system output connector (``factor * y + offset``
    of the component output that drives it).

    ``plan`` (plain data, from the parent's :meth:`fmi_adjoint.ssp.monolithic.MonolithicPlan.data`):

    * ``"sources"``: ``[(k, ref)]``, the component outputs that drive inputs;
    * ``"inputs"``: ``[(k, ref, source, system input, factor, offset)]``, each coupled input: driven
      by ``sources[source]`` or, with ``source`` None, by the system input named;
    * ``"stages"``: ``[(sources read, inputs set)]``, index lists in dependency order;
    * ``"system_outputs"``: ``{NAME: (k, ref, factor, offset)}``;
    * ``"system_inputs"``: ``{NAME: value}``, the system inputs' start values;
    * ``"torn"``, ``"loop_names"``: the inputs at which the algebraic loops are torn (indices of
      ``inputs``), and the loops' ports by name (for messages);
    * ``"macro"`` (optional): the tolerances of an integration over a macro step (:meth:`step`).
    """

    def __init__(self, progress, label: str, names: Sequence[str], instances: Sequence, plan: dict,
                 runner: Callable[[object, dict], dict]):
        self.progress = progress
        self.fmu_name = label
        self.component_names = list(names)
        self.instances = list(instances)
        self.Failure = self.instances[0].Failure
        self._runner = runner
        self._sources = [(int(k), ref) for k, ref in plan["sources"]]
        self._inputs = [(int(k), ref, source, name, float(factor), float(offset))
                        for k, ref, source, name, factor, offset in plan["inputs"]]
        self._stages = [(list(reads), list(sets)) for reads, sets in plan["stages"]]
        self._system_outputs = dict(plan["system_outputs"])
        self._system_inputs = {str(name): float(value) for name, value in plan["system_inputs"].items()}
        self._start_inputs = dict(self._system_inputs)
        #: The value each coupled input was last set to (an event round compares with it).
        self._set = [np.nan] * len(self._inputs)
        #: Algebraic loops: the torn inputs (indices of ``inputs``), their sources, their names, and
        #: the run's first solution with Newton's Jacobian there (every point starts from them).
        self._torn = [int(i) for i in plan.get("torn", ())]
        self._torn_sources = sorted({self._inputs[i][2] for i in self._torn if self._inputs[i][2] is not None})
        self._loop_names = list(plan.get("loop_names", ()))
        self._loop_start: tuple[np.ndarray, np.ndarray] | None = None
        self._time = float("nan")
        #: As one component of a co-simulation: the tolerances of its integration over a macro step,
        #: and its state.
        self._macro: dict | None = plan.get("macro")
        self._x = np.zeros(0)
        sizes = [int(i.n_states) for i in self.instances]
        self._offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        self.n_states = int(self._offsets[-1])
        self.n_indicators = sum(int(i.n_indicators) for i in self.instances)
        self.state_refs = [(k, r) for k, i in enumerate(self.instances) for r in i.state_refs]
        self.derivative_refs = [(k, r) for k, i in enumerate(self.instances) for r in i.derivative_refs]
        #: Names by reference, ``COMPONENT.NAME`` (the notes of the run name variables).
        self.names = {(k, r): f"{self.component_names[k]}.{name}"
                      for k, i in enumerate(self.instances) for r, name in i.names.items()}
        #: Parameter columns are never taken from the FMUs here (the parent asks for none).
        self.trusted_columns: dict = {}

    # -- references --------------------------------------------------------------------------
    def _by_component(self, refs: Sequence) -> tuple[dict[int, list[int]], list[int], list[int]]:
        """Positions of ``refs`` per component, of system inputs and of system outputs."""
        per: dict[int, list[int]] = {}
        inputs, outputs = [], []
        for position, ref in enumerate(refs):
            head = ref[0]
            if head == "input":
                inputs.append(position)
            elif head == "output":
                outputs.append(position)
            else:
                per.setdefault(int(head), []).append(position)
        return per, inputs, outputs

    def _system_input(self, name: str) -> float:
        if name not in self._system_inputs:
            raise self.Failure(f"internal error: {self.fmu_name} has no system input {name!r}.")
        return self._system_inputs[name]

    def get_values(self, refs: Sequence) -> np.ndarray:
        per, inputs, outputs = self._by_component(refs)
        out = np.empty(len(refs))
        for k, positions in per.items():
            out[positions] = self.instances[k].get_values([refs[p][1] for p in positions])
        for p in inputs:
            out[p] = self._system_input(str(refs[p][1]))
        for p in outputs:
            k, ref, factor, offset = self._system_outputs[str(refs[p][1])]
            out[p] = factor * float(self.instances[int(k)].get_values([ref])[0]) + offset
        return out

    def get_real(self, refs: Sequence) -> np.ndarray:
        return self.get_values(refs)

    def set_values(self, refs: Sequence, values: Sequence[float]) -> None:
        """Set component variables and system inputs (a system output cannot be set)."""
        for k, positions in self._take_system_inputs(refs, values).items():
            self.instances[k].set_values([refs[p][1] for p in positions], [values[p] for p in positions])

    def _take_system_inputs(self, refs: Sequence, values: Sequence[float]) -> dict[int, list[int]]:
        """Hold the values of the system inputs among ``refs``; the positions of the rest per
        component (a system output among them is a Failure: it cannot be set)."""
        per, inputs, outputs = self._by_component(refs)
        if outputs:
            raise self.Failure(f"{self.fmu_name}: the system output {refs[outputs[0]][1]!r} cannot be set.")
        for p in inputs:
            self._system_input(str(refs[p][1]))
            self._system_inputs[str(refs[p][1])] = float(values[p])
        return per

    def set_real(self, refs: Sequence, values: Sequence[float]) -> None:
        self.set_values(refs, values)

    # -- the coupling ------------------------------------------------------------------------
    def couple(self, compare: bool = False) -> set[int]:
        """The coupled inputs made consistent with the outputs (module docstring): one pass through
        the ports in dependency order, or, with algebraic loops, Newton's method on the torn inputs
        around such passes.  With ``compare`` (Event Mode) an input whose value does not change is
        not set again.  The components whose inputs changed."""
        before = list(self._set)
        if self._torn:
            self._solve_loops(compare)
        else:
            self._pass(compare)
        return {self._inputs[i][0] for i in range(len(self._inputs)) if _changed(before[i], self._set[i])}

    def _pass(self, compare: bool) -> None:
        """Read the sources of level L, set the inputs of level L + 1, for L = 0, 1, ...: the torn
        inputs (level 0) keep the values set before."""
        values = [0.0] * len(self._sources)
        for reads, sets in self._stages:
            self._read(reads, values)
            setting: dict[int, tuple[list, list[float]]] = {}
            for i in sets:
                value = self._target(i, values)
                if compare and not _changed(self._set[i], value):
                    continue
                self._set[i] = value
                refs, vals = setting.setdefault(self._inputs[i][0], ([], []))
                refs.append(self._inputs[i][1])
                vals.append(value)
            for k, (refs, vals) in setting.items():
                self.instances[k].set_values(refs, vals)

    def _read(self, sources: Sequence[int], values: list[float]) -> None:
        """``values[s]`` = the output ``sources[s]`` now, one call per component."""
        per: dict[int, list[int]] = {}
        for s in sources:
            per.setdefault(self._sources[s][0], []).append(s)
        for k, indices in per.items():
            for s, value in zip(indices, self.instances[k].get_values([self._sources[s][1] for s in indices])):
                values[s] = float(value)

    def _target(self, i: int, values: list[float]) -> float:
        """The value the coupling gives input ``i`` from the source values read."""
        _, _, source, name, factor, offset = self._inputs[i]
        return factor * (values[source] if source is not None else self._system_input(name)) + offset

    # -- algebraic loops -------------------------------------------------------------------------
    def _loop_residual(self, u: np.ndarray, compare: bool) -> np.ndarray:
        """``u - C(y(u))`` of the torn inputs: ``u`` set, a pass, the torn inputs' sources read."""
        setting: dict[int, tuple[list, list[float]]] = {}
        for i, value in zip(self._torn, u):
            self._set[i] = float(value)
            refs, vals = setting.setdefault(self._inputs[i][0], ([], []))
            refs.append(self._inputs[i][1])
            vals.append(float(value))
        for k, (refs, vals) in setting.items():
            self.instances[k].set_values(refs, vals)
        self._pass(compare)
        values = [0.0] * len(self._sources)
        self._read(self._torn_sources, values)
        return u - np.array([self._target(i, values) for i in self._torn])

    def _loop_jacobian(self, u: np.ndarray, r: np.ndarray, compare: bool) -> np.ndarray:
        """``d(u - C(y(u)))/du`` by forward differences of relative step :data:`LOOP_DIFFERENCE_STEP`."""
        jacobian = np.empty((u.size, u.size))
        for j in range(u.size):
            step = LOOP_DIFFERENCE_STEP * (1.0 + abs(u[j]))
            moved = u.copy()
            moved[j] += step
            jacobian[:, j] = (self._loop_residual(moved, compare) - r) / step
        refusal = unsolvable_loop(jacobian)
        if refusal is not None:
            raise self.Failure(self._loop_text(refusal))
        return jacobian

    def _solve_loops(self, compare: bool) -> None:
        """Newton's method on the torn inputs, to :data:`LOOP_TOLERANCE` and one step beyond, so that
        the coupled right-hand side is the loop's solution to round-off (a smooth function of the
        states for the differences of the sensitivities).  Every point starts from the run's first
        solution with the Jacobian there (both fixed when the run starts), and a Jacobian recomputed
        for the point alone where the residual does not fall by half: the right-hand side at a
        point depends on that point only, so a replay on the same nodes repeats a run bit for bit."""
        first = self._loop_start is None
        u = self._values_of(self._torn) if self._loop_start is None else self._loop_start[0].copy()
        matrix = None if self._loop_start is None else self._loop_start[1]
        r = self._loop_residual(u, compare)
        converged, last = False, np.inf
        for _ in range(LOOP_ITERATIONS + 1):
            if not (np.all(np.isfinite(r)) and np.all(np.isfinite(u))):
                raise self.Failure(self._loop_text("gives a value that is not finite (a component's output or its "
                                                   "input); check the parameters and the inputs"))
            # Each port's residual against its own terms: the ports carry different units.
            size = float(np.max(np.abs(r) / loop_scale(u, matrix), initial=0.0))
            if converged:
                if first:
                    assert matrix is not None
                    self._loop_start = (u.copy(), matrix)
                return
            converged = size <= LOOP_TOLERANCE
            if matrix is None or size > 0.5 * last:
                matrix = self._loop_jacobian(u, r, compare)
            last = size
            u = u - np.linalg.solve(matrix, r)
            r = self._loop_residual(u, compare)
        raise self.Failure(self._loop_text(f"did not converge in {LOOP_ITERATIONS} iterations (residual "
                                           f"{float(np.max(np.abs(r), initial=0.0)):.3g})"))

    def _values_of(self, inputs: Sequence[int]) -> np.ndarray:
        """The current values of coupled inputs, read from their components."""
        out = np.empty(len(inputs))
        for position, i in enumerate(inputs):
            k, ref = self._inputs[i][0], self._inputs[i][1]
            out[position] = self.instances[k].get_values([ref])[0]
        return out

    def _loop_text(self, what: str) -> str:
        return (f"{self.fmu_name}: the algebraic loop through {', '.join(self._loop_names)} {what} at "
                f"t = {self._time:g} s; check the parameters and transformations of the loop, or break it (a "
                "component without direct feedthrough) if it has no solution.")

    # -- the interface of one instance (:class:`.worker._Instance`) ---------------------------------
    @property
    def next_event_time(self) -> float | None:
        times = [i.next_event_time for i in self.instances if i.next_event_time is not None]
        return min(times) if times else None

    def start(self, refs: Sequence, values: Sequence[float], t0: float, t_end: float) -> float | None:
        """Every component reset, its values set and initialized at ``t0`` with its coupled inputs:
        the coupling is passed in Initialization Mode (FMI 2.0, sec. 3.2.3: inputs may be set and
        outputs read there), then every component leaves it for Event Mode and the event iteration
        of the coupled system runs (as at an event), then continuous-time mode."""
        self._system_inputs = dict(self._start_inputs)
        self._time, self._loop_start = float(t0), None  # every run from its own start
        per = self._take_system_inputs(refs, values)
        for k, instance in enumerate(self.instances):
            positions = per.get(k, [])
            instance.enter_initialization([refs[p][1] for p in positions], [float(values[p]) for p in positions],
                                          t0, t_end)
        self._set = [np.nan] * len(self._inputs)
        self.couple()
        for instance in self.instances:
            instance.leave_initialization()
        self._settle_events(t0)
        self._x = self.initial_states()
        return self.next_event_time

    def initial_states(self) -> np.ndarray:
        return np.concatenate([i.initial_states() if i.n_states else np.zeros(0) for i in self.instances])

    def set_point(self, t: float, x, input_refs: Sequence = (), u: Sequence[float] = ()) -> None:
        """Time and states of every component, the system inputs ``u``, then the coupling."""
        x = np.asarray(x, dtype=float)
        self._time = float(t)
        for k, instance in enumerate(self.instances):
            instance.set_point(t, x[self._offsets[k]:self._offsets[k + 1]])
        if len(input_refs):
            self.set_values(input_refs, u)
        self.couple()

    def derivatives(self) -> np.ndarray:
        return np.concatenate([i.derivatives() for i in self.instances])

    def rhs(self, outputs: Sequence = ()) -> np.ndarray:
        return np.concatenate([self.derivatives(), self.get_values(outputs)])

    def directional(self, unknowns: Sequence, known, seed: float = 1.0) -> np.ndarray:
        raise self.Failure(f"{self.fmu_name}: the directional derivatives of a coupled system are taken by "
                           "differences.")

    def event_indicators(self) -> np.ndarray:
        return np.concatenate([i.event_indicators() for i in self.instances])

    def completed_integrator_step(self) -> tuple[bool, bool]:
        enter = terminate = False
        for instance in self.instances:
            e, t = instance.completed_integrator_step()
            enter, terminate = enter or e, terminate or t
        return enter, terminate

    def event_mode_update(self, t: float) -> np.ndarray:
        """The event iteration of the coupled system at the point set (module docstring); the
        continuous states afterwards."""
        self._time = float(t)
        for instance in self.instances:
            instance.enter_event_mode(t)
        self._settle_events(t)
        return self.initial_states()

    def _settle_events(self, t: float) -> None:
        """From Event Mode (after an event, or after initialization): the event iteration of the
        coupled system (module docstring), then every component into continuous-time mode."""
        pending = set(range(len(self.instances)))
        for _ in range(EVENT_ROUNDS):
            for k in sorted(pending):
                self.instances[k].settle_discrete_states(t)
            pending = self.couple(compare=True)
            if not pending:
                break
        else:
            names = ", ".join(self.component_names[k] for k in sorted(pending))
            raise self.Failure(f"{self.fmu_name}: the event iteration at t = {t:g} s did not settle in "
                               f"{EVENT_ROUNDS} rounds: the inputs of {names} keep changing; break the cycle of "
                               "discrete feedback between the components.")
        for instance in self.instances:
            instance.enter_continuous_time_mode()

    def get_fmu_state(self):
        return tuple(i.get_fmu_state() for i in self.instances), dict(self._system_inputs)

    def set_fmu_state(self, state) -> None:
        states, inputs = state
        for instance, s in zip(self.instances, states):
            instance.set_fmu_state(s)
        self._system_inputs = dict(inputs)

    def free_fmu_state(self, state) -> None:
        for instance, s in zip(self.instances, state[0]):
            instance.free_fmu_state(s)

    # -- one component of a co-simulation (a mixed system's Model Exchange part) ---------------------
    def step(self, t: float, h: float, input_refs: Sequence, inputs: Sequence[float], slopes: Sequence[float],
             output_refs: Sequence) -> np.ndarray:
        """One communication step of a co-simulation master (:mod:`fmi_adjoint.ssp.master`) of the
        whole system, as :meth:`.worker._Instance.step` is for one FMU: the inputs ``u + slope (t' - t)``
        (held without slopes) over ``[t, t + h]``, the system integrated there from its state by the
        adaptive Radau IIA scheme with its events (the tolerances of ``plan["macro"]``), and the values
        of ``output_refs`` at ``t + h``."""
        if self._macro is None:
            raise self.Failure(f"internal error: {self.fmu_name} was not made a component of a co-simulation.")
        t, h = float(t), float(h)
        u0 = np.asarray(inputs, dtype=float)
        u1 = u0 + h * np.asarray(slopes, dtype=float) if len(slopes) else u0
        system = FmuOdeSystem(self, list(input_refs), np.array([t, t + h]), np.vstack([u0, u1]), list(output_refs),
                              np.array([t + h]), ["fd"] * self.n_states)
        try:  # also without continuous states: the part's time events and step events are handled
            budget = RunBudget.from_wire(self._macro.get("budget"))
            run = integrate_radau(system, self._x, t, t + h, stops=(t + h,), rtol=self._macro["rtol"],
                                  atol=np.asarray(self._macro["atol"], dtype=float), max_step=self._macro["max_step"],
                                  budget=budget)
            self._x = np.array(run.x[-1], dtype=float)
        except (RunBudgetError, ModelError) as exc:
            raise self.Failure(f"{self.fmu_name}: {exc}") from None
        except ConvergenceError as exc:
            raise self.Failure(f"{self.fmu_name}: the Model Exchange part did not converge over the macro step from "
                               f"t = {t:g} s ({exc}); give a smaller macro step or looser tolerances.") from None
        finally:
            system.free()
        self.set_point(t + h, self._x, input_refs, [float(v) for v in u1])
        return self.get_values(output_refs)

    def exchange(self, input_refs: Sequence, inputs: Sequence[float], output_refs: Sequence) -> np.ndarray:
        """Set inputs and return outputs at the current communication point (one iteration of the
        master's algebraic loops), the system's own coupling made consistent in between."""
        self.set_point(self._time, self._x, input_refs, inputs)
        return self.get_values(output_refs)

    def run_me_adaptive(self, request: dict) -> dict:
        """The adaptive Model Exchange run of :mod:`.me_run` of the coupled system."""
        return self._runner(self, request)

    def close(self) -> None:
        for instance in self.instances:
            instance.close()
