"""A system of Model Exchange FMUs integrated as one ODE, with exact sensitivities through the
couplings (issue 28, part 2: Model Exchange components).

API
---
::

    from fmi_adjoint.ssp.monolithic import simulate_monolithic

    run = simulate_monolithic(structure, archives, t_end=1.0, times=np.linspace(0, 1, 101),
                              values={"A.k1": 900.0}, sensitivities=("A.k1", "B.kc"))
    run.result.column("A.x1")          # a SystemResult: one row per time of ``times``
    run.sensitivities                  # (times, columns, parameters): d column / d parameter

``structure`` and ``archives`` as for :func:`~.master.simulate_system`; ``values`` the user's
``COMPONENT.NAME`` settings after the SSD's bindings; ``inputs`` an :class:`~.master.InputTable`
of the system's input connectors (interpolated linearly).  Every error is one
:class:`~fmi_adjoint.errors.FmuError` naming the system, the component and the call.

Method
------
Where the co-simulation master (:mod:`.master`) steps each component alone over a macro step and
exchanges values between steps, here the components' right-hand sides are coupled at every point
(:mod:`fmi_adjoint.fmu.me_system`): the system is one ODE in the states of all components,
integrated by the adaptive Radau IIA scheme with events of :mod:`fmi_adjoint.fmu.me_run` (the
integrator of Model Exchange FMUs), so its only error is the integration's (``rtol``/``atol``),
not a coupling error, and its sensitivities are exact for the discrete scheme: the forward
sensitivities of :mod:`fmi_adjoint.fmu.me_sensitivities`, whose state Jacobian is that of the
coupled right-hand side (central differences of it) and whose parameter derivatives come from
replays of the whole system, so a parameter of one component acts on the others through the
couplings.

All components run in one sandboxed worker process (a Model Exchange right-hand side is a few
microseconds of FMI calls; one message between processes costs about a hundred): a crash, a hang
or a refused call of any component ends the run with one error naming it; the tool's process is
never touched.

Algebraic loops (a cycle through outputs that depend directly on inputs) are torn at some of their
inputs and solved by Newton's method at every point in the worker
(:class:`~fmi_adjoint.fmu.me_system.SystemInstance`).

Not yet (refused by name): Integer and Boolean connections and discrete inputs (set only in Event
Mode), components without Model Exchange (mixed systems), an FMU that can be instantiated only once
per process used twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TextIO

import numpy as np

from ..errors import FmuError
from ..fmu.archive import FmuArchive
from ..fmu.experiment import Tolerances
from ..fmu.gradients import PROBE_TOLERANCE, REPLAY_REL_STEP
from ..fmu.session import DEFAULT_TIMEOUT, FmuSession, start_values, state_references
from ..fmu.simulation import state_nominals
from ..fmu.problem import declared_parameter
from ..fmu.variables import resolve
from ..fmu.worker import unpack
from ..text import excerpt
from .coupling import CouplingPlan, InputTable, Port, SystemResult, check_input_span, component_values, runs_as
from .structure import SystemStructure

__all__ = ["MonolithicPlan", "MonolithicRun", "SystemSession", "simulate_monolithic", "system_interface"]

#: Sample intervals of a run given no sample times.
DEFAULT_INTERVALS = 500


def system_interface(structure: SystemStructure, archives: Mapping[str, FmuArchive], choice: str = "auto") -> str:
    """``"CoSimulation"`` (the master of :mod:`.master`; components without Co-Simulation run as its
    Model Exchange part) or ``"ModelExchange"`` (one ODE, here) for ``choice`` ``"cs"``, ``"me"`` or
    ``"auto"``: Co-Simulation when every component offers it (as before Model Exchange systems
    existed), else Model Exchange when every component offers that, else the master with its Model
    Exchange part (a mixed system).  A component that cannot run so is refused by name."""
    if choice not in ("auto", "cs", "me"):
        raise FmuError(f"interface {choice!r}: give auto, cs or me.")
    interface = "ModelExchange" if choice == "me" else "CoSimulation"
    if choice == "auto":
        components = [(c, archives[c.name]) for c in structure.components if c.name in archives]
        if not all(runs_as(c, a, "CoSimulation") for c, a in components) and \
                all(runs_as(c, a, "ModelExchange") for c, a in components):
            interface = "ModelExchange"
    CouplingPlan(structure, archives, interface)  # refuses a component that cannot run so, by name
    return interface


class MonolithicPlan:
    """The coupling of a Model Exchange system in the form the worker's
    :class:`~fmi_adjoint.fmu.me_system.SystemInstance` takes (:meth:`data`), and the references of
    the system's names (:meth:`ref`).

    ``table_columns``: the system inputs given over time (None: no table; the inputs they drive
    keep their FMUs' start values, as in the co-simulation master).
    """

    def __init__(self, structure: SystemStructure, archives: Mapping[str, FmuArchive],
                 table_columns: Sequence[str] | None = None):
        coupling = CouplingPlan(structure, archives, "ModelExchange")
        self.coupling, self.structure, self.archives = coupling, structure, archives
        self.names = [c.name for c in coupling.components]
        self._refuse(coupling)
        columns = set(table_columns or ())
        #: The coupled inputs: driven by a component output, or by a system input given over time.
        self.inputs: list[Port] = [port for port, c in coupling.driving.items()
                                   if c.start.element is not None or c.start.connector in columns]
        self.system_inputs = sorted({coupling.driving[p].start.connector for p in self.inputs
                                     if coupling.driving[p].start.element is None})
        #: The inputs at which the algebraic loops are torn (Newton's unknowns in the worker).
        self.torn = self._tear()
        levels = self._levels()
        self.sources: list[Port] = sorted({(str(c.start.element), c.start.connector)
                                           for p in self.inputs for c in [coupling.driving[p]]
                                           if c.start.element is not None},
                                          key=lambda port: (levels[("out", port)], port))
        top = max((levels[("in", p)] for p in self.inputs), default=0)
        #: Per level L: the sources of level L read, then the inputs of level L + 1 set.
        self.stages = [([s for s, port in enumerate(self.sources) if levels[("out", port)] == level],
                        [i for i, port in enumerate(self.inputs) if levels[("in", port)] == level + 1])
                       for level in range(top)]

    def _refuse(self, coupling: CouplingPlan) -> None:
        source = self.structure.source
        for name, connector in coupling.driving:
            kind = coupling.connector_type((name, connector))
            variable = self.archives[name].variables.get(connector)
            variability = getattr(variable, "variability", "continuous")
            if kind != "Real" or variability == "discrete":
                raise FmuError(f"{source}: the connection to {name}.{connector} ({kind}, {variability}): not yet: "
                               "discrete inputs in a Model Exchange system (they may be set only in Event Mode); "
                               f"co-simulate the system (--interface cs) if {excerpt(name)} offers Co-Simulation.")
        seen: dict[str, str] = {}
        for name in self.names:
            archive = self.archives[name]
            once = getattr(archive.description.modelExchange, "canBeInstantiatedOnlyOncePerProcess", False)
            key = str(archive.path)
            if once and key in seen:
                raise FmuError(f"{source}: components {excerpt(seen[key])} and {excerpt(name)} are both "
                               f"{archive.path.name}, which can be instantiated only once per process "
                               "(canBeInstantiatedOnlyOncePerProcess); co-simulate the system (--interface cs).")
            seen[key] = name

    def _tear(self) -> list[Port]:
        """Inputs that cut every cycle of direct dependencies (algebraic loop): each input on a loop,
        in plan order, that still lies on a cycle avoiding those taken before it.  Every cycle is
        cut: its first input in that order was taken, since the cycle avoided the earlier ones."""
        edges, torn = self.coupling.edges(), []
        for port in self.coupling.loop_ports:
            if port not in self.inputs:
                continue
            seen, stack, cycle = set(), list(edges.get(("in", port), ())), False
            while stack and not cycle:
                node = stack.pop()
                cycle = node == ("in", port)
                if cycle or node in seen or (node[0] == "in" and node[1] in torn):
                    continue
                seen.add(node)
                stack.extend(edges.get(node, ()))
            if cycle:
                torn.append(port)
        return torn

    def _levels(self) -> dict[tuple[str, Port], int]:
        """The level of every coupled input (0 for a torn one, else 1 + its source's) and of every
        output (the highest of the coupled inputs it depends on directly, 0 for none); acyclic once
        the torn inputs are cut (:meth:`_tear`)."""
        coupling, coupled = self.coupling, set(self.inputs)
        levels: dict[tuple[str, Port], int] = {}

        def output(port: Port) -> int:
            key = ("out", port)
            if key not in levels:
                inputs = coupling.feedthrough[port[0]].get(port[1], set())
                levels[key] = max((level((port[0], u)) for u in inputs if (port[0], u) in coupled), default=0)
            return levels[key]

        def level(port: Port) -> int:
            key = ("in", port)
            if key not in levels:
                start = coupling.driving[port].start
                levels[key] = (0 if port in self.torn else 1 if start.element is None
                               else output((start.element, start.connector)) + 1)
            return levels[key]

        for port in self.inputs:
            level(port)
            start = coupling.driving[port].start
            if start.element is not None:  # a torn input's source too
                output((start.element, start.connector))
        return levels

    def ref(self, name: str):
        """The worker's reference of a name of the system: ``COMPONENT.NAME`` (any variable of the
        component), a system output or a system input connector."""
        kinds = {c.name: c.kind for c in self.structure.connectors}
        if kinds.get(name) == "output" and name in self.coupling.system_outputs:
            return ("output", name)
        if kinds.get(name) == "input":
            return ("input", name)
        component, dot, variable = name.partition(".")
        if not dot or component not in self.names:
            raise FmuError(f"{self.structure.source}: {excerpt(name)} names no variable of the system; name one as "
                           f"COMPONENT.NAME (components: {', '.join(self.names)}) or a system connector.")
        return self._component_ref((component, variable))

    def _component_ref(self, port: Port) -> tuple:
        """The worker's reference of the variable ``port[1]`` of component ``port[0]``."""
        return (self.names.index(port[0]), resolve(self.archives[port[0]], port[1]).wire())

    def data(self) -> dict:
        """The plan as plain data for the worker (:class:`~fmi_adjoint.fmu.me_system.SystemInstance`)."""
        sources = [self._component_ref(port) for port in self.sources]
        inputs = []
        for port in self.inputs:
            connection = self.coupling.driving[port]
            start = connection.start
            source = None if start.element is None else self.sources.index((start.element, start.connector))
            k, ref = self._component_ref(port)
            inputs.append((k, ref, source, None if source is not None else start.connector,
                           connection.transformation.factor, connection.transformation.offset))
        outputs = {}
        for name, connection in self.coupling.system_outputs.items():
            k, ref = self._component_ref((str(connection.start.element), connection.start.connector))
            outputs[name] = (k, ref, connection.transformation.factor, connection.transformation.offset)
        return {"sources": sources, "inputs": inputs, "stages": self.stages, "system_outputs": outputs,
                "system_inputs": dict.fromkeys(self.system_inputs, 0.0),
                "torn": [self.inputs.index(port) for port in self.torn],
                "loop_names": [f"{c}.{p}" for c, p in self.coupling.loop_ports]}


class SystemSession(FmuSession):
    """The worker that runs every component of a Model Exchange system (:mod:`.me_system`), with
    the session's interface: :meth:`refs` of the system's names, :meth:`_start_values` of
    ``COMPONENT.NAME`` values over the SSD's bindings, and the Model Exchange run request; with
    ``macro`` (its tolerances over a macro step) also one component of a co-simulation, stepped by
    the master (:mod:`.master`: a mixed system's Model Exchange part)."""

    def __init__(self, plan: MonolithicPlan, *, timeout: float = DEFAULT_TIMEOUT, log: TextIO | None = None,
                 wait: bool = True, macro: Tolerances | None = None):
        self.plan = plan
        self.interface = "ModelExchange"
        archives = [plan.archives[name] for name in plan.names]
        self.state_refs = [(k, r) for k, a in enumerate(archives) for r in state_references(a, 0)]
        self.derivative_refs = [(k, r) for k, a in enumerate(archives) for r in state_references(a, 1)]
        self.n_states = sum(a.n_states for a in archives)
        label = f"{plan.structure.source} (system {plan.structure.name})"
        components = [(name, a.path.name, str(a.directory), a.n_states, state_references(a, 0), state_references(a, 1),
                       a.number_of_event_indicators) for name, a in zip(plan.names, archives)]
        data = plan.data()  # before the worker starts: what raises here leaves no process behind
        if macro is not None:  # one component of a co-simulation: its integration over a macro step
            data["macro"] = {"rtol": macro.rtol, "atol": list(macro.atol * _nominals(plan)),
                             "max_step": macro.max_step, "budget": macro.budget.to_wire()}
        self._launch(label, archives[0].directory, timeout, log)
        self._instantiate("instantiate_system", (label, components, data), wait)

    def refs(self, names: Sequence[str]) -> list:
        return [self.plan.ref(name) for name in names]

    def _start_values(self, values: Mapping[str, float], inputs: Mapping[str, float]) -> tuple[list, list]:
        """Every component's parameters (start values, the SSD's bindings, then ``values`` by
        ``COMPONENT.NAME``), then ``inputs`` by the system's names."""
        per = component_values(self.plan.structure, values)
        refs: list = []
        vals: list[float] = []
        for k, name in enumerate(self.plan.names):
            component_refs, component_vals = start_values(self.plan.archives[name], per[name], {})
            refs.extend((k, r) for r in component_refs)
            vals.extend(component_vals)
        for name, value in inputs.items():
            refs.append(self.plan.ref(name))
            vals.append(float(value))
        return refs, vals


@dataclasses.dataclass(frozen=True, eq=False)
class MonolithicRun:
    """A run of a Model Exchange system: ``result`` at the sample times (left limits where an event
    falls on one), ``right`` the right limits (equal to ``result.values`` elsewhere); with
    sensitivities ``sensitivities[k, j, i]`` = d ``result.values[k, j]`` / d ``parameters[i]`` and
    ``right_sensitivities``, or ``unavailable``, why there are none (a parameter moves a time event, a
    reinitialisation is not smooth); the run's ``nodes`` (step ends) and ``info`` (steps, rejected
    steps, events, right-hand sides)."""

    result: SystemResult
    right: np.ndarray
    parameters: tuple[str, ...] = ()
    sensitivities: np.ndarray | None = None
    right_sensitivities: np.ndarray | None = None
    unavailable: str | None = None
    nodes: np.ndarray | None = None
    info: Mapping = dataclasses.field(default_factory=dict)


def _nominals(plan: MonolithicPlan) -> np.ndarray:
    """Per state of the system the scale of its absolute tolerance, as for one FMU."""
    return np.concatenate([np.zeros(0)] + [state_nominals(plan.archives[name]) for name in plan.names])


def simulate_monolithic(structure: SystemStructure, archives: Mapping[str, FmuArchive], t_end: float, *,
                        tolerances: Tolerances | None = None, t_start: float | None = None,
                        times: Sequence[float] | np.ndarray | None = None,
                        event_times: Sequence[float] | np.ndarray = (),
                        values: Mapping[str, float] | None = None, inputs: InputTable | None = None,
                        sensitivities: Sequence[str] = (), steps: Sequence[float] | np.ndarray | None = None,
                        nodes: np.ndarray | None = None, timeout: float = DEFAULT_TIMEOUT,
                        log: TextIO | None = None) -> MonolithicRun:
    """Integrate the Model Exchange system ``structure`` from ``t_start`` (default: the SSD's start
    time, else 0) to ``t_end`` (module docstring); outputs at ``times`` (default: 500 intervals),
    and with ``sensitivities`` (``COMPONENT.NAME`` of real parameters) their exact derivatives, from
    replays moved by ``steps`` (default :data:`~fmi_adjoint.fmu.gradients.REPLAY_REL_STEP` of each
    value).  ``event_times``: sample times where the data hold an event (a repeated time stamp), met
    by the run's event nearest to them (:func:`fmi_adjoint.fmu.me_run.match_event_rows`).  ``nodes``
    (a run's :attr:`MonolithicRun.nodes`) makes the run take exactly those steps: central
    differences of runs on the same nodes differentiate the same discrete scheme."""
    plan = MonolithicPlan(structure, archives, None if inputs is None else inputs.columns)
    plan.coupling.check_table(inputs)
    t0 = float(t_start if t_start is not None else structure.start_time or 0.0)
    if not (np.isfinite(t_end) and t_end > t0):
        raise FmuError(f"end time {t_end!r}: give a time after the start time {t0:g} s.")
    stops = (np.linspace(t0, float(t_end), DEFAULT_INTERVALS + 1) if times is None
             else np.asarray(times, dtype=float))
    if stops.ndim != 1 or not stops.size or np.any(np.diff(stops) <= 0) or stops[0] < t0 or stops[-1] > t_end:
        raise FmuError(f"sample times: give increasing times between the start ({t0:g} s) and the end "
                       f"({t_end:g} s).")
    if inputs is not None:
        check_input_span(inputs.times, t0, float(t_end), "the input table")
    values = dict(values or {})
    tolerances = tolerances or Tolerances()
    names = plan.coupling.columns()
    session = SystemSession(plan, timeout=timeout, log=log)
    try:
        refs, vals = session._start_values(values, {})
        columns = [inputs.columns.index(n) for n in plan.system_inputs] if inputs is not None else []
        request = {
            "refs": refs, "values": vals, "t0": t0, "t_end": float(t_end), "stops": stops,
            "event_stops": np.asarray(event_times, dtype=float), "outputs": session.refs(names),
            "input_refs": [("input", name) for name in plan.system_inputs],
            "input_times": inputs.times if inputs is not None else np.array([t0]),
            "input_table": inputs.values[:, columns] if inputs is not None else np.zeros((1, 0)),
            "sources": ["fd"] * session.n_states, "rtol": tolerances.rtol,
            "atol": tolerances.atol * _nominals(plan), "max_step": tolerances.max_step, "nodes": nodes,
            "kernel": None, "budget": tolerances.budget.to_wire(),
        }
        if sensitivities:
            request["sensitivity"] = _sensitivity_request(session, values, tuple(sensitivities), steps)
        reply = session.run(("run_me_adaptive", (request,)))
    finally:
        session.close()
    info = {key: reply[key] for key in ("steps", "rejected", "events", "rhs_evaluations") if key in reply}
    return MonolithicRun(SystemResult(stops, tuple(names), unpack(reply["left"])), unpack(reply["right"]),
                         tuple(sensitivities), unpack(reply["dleft"]) if "dleft" in reply else None,
                         unpack(reply["dright"]) if "dright" in reply else None,
                         reply.get("sensitivities_unavailable"), unpack(reply["nodes"]), info)


def _replay_step(structure: SystemStructure, archives: Mapping[str, FmuArchive], values: Mapping[str, float],
                 name: str) -> tuple[float, float]:
    """(value, replay step) of the parameter ``COMPONENT.NAME`` in a run with ``values``: the value
    is ``values``', else the SSD's binding, else the FMU's start value; the step is
    :data:`~fmi_adjoint.fmu.gradients.REPLAY_REL_STEP` of the larger of it and the parameter's scale
    (its nominal value, else its start value, else 1: as the identification scales it)."""
    component, _, variable = name.partition(".")
    start, _, _, nominal = declared_parameter(archives[component], variable)
    bound = structure.parameter_values(component)
    value = float(values[name] if name in values else bound.get(variable, start if start is not None else 0.0))
    scale = abs(nominal) if nominal else (abs(start) if start else 1.0)
    return value, REPLAY_REL_STEP * max(abs(value), scale)


def _sensitivity_request(session: SystemSession, values: dict[str, float], names: tuple[str, ...],
                         steps: Sequence[float] | np.ndarray | None) -> dict:
    """The sensitivity part of the run request: per parameter the replays' start values with it
    moved by ± its step, no FMU columns (the coupled system's parameter derivatives come from the
    replays of the whole system)."""
    plan = session.plan
    session.refs(list(names))  # refuses unknown names
    chosen = {name: _replay_step(plan.structure, plan.archives, values, name) for name in names}
    current = {name: value for name, (value, _) in chosen.items()}
    if steps is None:
        steps = [chosen[name][1] for name in names]
    replays = []
    for name, step in zip(names, steps):
        for sign in (1.0, -1.0):
            replays.append(session._start_values({**values, name: current[name] + sign * float(step)}, {}))
    return {"replays": replays, "steps": [float(step) for step in steps], "param_refs": [-1] * len(names),
            "directional": [False] * len(names), "probe_tolerance": PROBE_TOLERANCE}
