"""A co-simulation master for a system of FMUs (issue 28, part 2): Co-Simulation components, and
those that have only Model Exchange as one part of it (a mixed system).

API
---
::

    from fmi_adjoint.ssp.master import (GaussSeidel, InputTable, Jacobi, LinearExtrapolation,
                                        MasterSettings, ZeroOrderHold, estimate_error, simulate_system)

    settings = MasterSettings(step=1e-3, order=Jacobi(), approximation=ZeroOrderHold())
    result = simulate_system(structure, archives, t_end=1.0, settings=settings,
                             values={"A.c1": 900.0}, inputs=InputTable(times, ("u",), table))
    result.column("A.x1")          # SystemResult(times, columns, values): one row per communication point
    estimate = estimate_error(structure, archives, t_end=1.0, settings=settings, runs=3)

``structure`` is a :class:`~.structure.SystemStructure`, ``archives`` maps every component's name
to its opened :class:`~fmi_adjoint.fmu.archive.FmuArchive` (what :func:`.reading.open_system`
returns as ``.structure`` and ``.archives``).  ``values`` are the user's ``--set
COMPONENT.NAME=VALUE``, applied after the SSD's parameter bindings.  Every error is one
:class:`~fmi_adjoint.errors.FmuError` naming the component, connector or loop and the fix; the
component processes are ended whatever happens.

Method
------
Every component instance lives in its own sandboxed worker process
(:class:`~fmi_adjoint.fmu.session.FmuSession`); one macro step is one request per component
(set inputs, ``doStep``, get outputs: the worker's ``step``), sent to all components at once
where the order allows (:func:`~fmi_adjoint.fmu.session.run_each`).

* **Initialization**: every component is instantiated, its parameters set (start values of the
  model description, then the SSD's bindings ``SystemStructure.parameters``, then ``values``),
  initialized at ``t_start`` (enter/exit initialization mode), and the coupling is then made
  consistent at ``t_start`` (below) before the first row is recorded.  The consistency is
  reached after ``fmi2ExitInitializationMode`` (FMI 2.0.x, 4.2.1: inputs may be set and outputs
  read at a communication point), so an FMU whose *initial state* depends on its inputs starts
  from its inputs' start values.
* **Orders** (strategies are objects): :class:`Jacobi` steps all components from the coupling
  values at ``t_n``, in parallel; :class:`GaussSeidel` steps them one after another in the order
  of the connections (a component follows those whose outputs it reads; a cycle is broken at
  the component that comes first in the SSD), each reading the outputs its predecessors have
  just computed at ``t_{n+1}``.
* **Input approximation**: :class:`ZeroOrderHold` holds each input over the macro step (the
  coupling error is of first order in H: Arnold, Clauß & Schierz, "Error analysis and error
  estimates for co-simulation in FMI for model exchange and co-simulation V2.0", Archive of
  Mechanical Engineering 60 (2013) 75-94);
  :class:`LinearExtrapolation` also sends the input's slope through
  ``fmi2SetRealInputDerivatives`` (order 1) to the FMUs that declare ``canInterpolateInputs``
  (FMI 2), and sets the ramp at the intermediate updates of FMI 3 FMUs that provide them for
  these inputs (``providesIntermediateUpdate``; the others hold): the slope of the last macro
  step extrapolated (Jacobi) or,
  for an input read from a predecessor that has already stepped (Gauss–Seidel), the slope to
  its new value, and for a system input the table's own slope; second order in H.
* **Consistent coupling at every communication point**: an input is ``factor * output +
  offset`` of the output that drives it (the connection's :class:`~.structure.Transformation`)
  or, for a system input, the input table interpolated linearly.  Where an output depends
  directly on an input (the FMU's ``ModelStructure``: an output without ``dependencies`` depends
  on every input, FMI 2.0.x, 2.2.8), the outputs are re-read after the inputs are set
  (the worker's ``exchange``), and the equations ``u = C(y(u))`` are solved by Newton's method
  to ``loop_tolerance`` (``|u_i - C_i(y(u))| <= loop_tolerance * (1 + |u_i| + sum_j |G_ij| |u_j|)``
  for every input i, ``G = dC/du`` the loop gains: each against its own terms, since the ports
  carry different units; :func:`~fmi_adjoint.fmu.me_system.loop_scale`), the Jacobian
  ``I - dC/dy dy/du`` from the FMU's directional derivatives where its CoSimulation element
  declares ``providesDirectionalDerivative`` (else, or once it refuses one, forward
  differences of relative step 1e-7),
  reused while the residual falls by half per iteration and recomputed otherwise.  A system
  without such outputs needs no iteration; an acyclic chain of them converges in one Newton
  step when the components are linear.  A loop that does not converge in
  ``max_loop_iterations`` iterations, or whose Jacobian's condition number, independent of the
  ports' units, exceeds :data:`~fmi_adjoint.fmu.me_system.MAX_LOOP_CONDITION` (no unique solution,
  e.g. a loop gain of 1: :func:`~fmi_adjoint.fmu.me_system.unsolvable_loop`; the differences are
  accurate to about 1e-9 relative, so beyond 1e6 the Newton step is mostly noise), is refused
  naming its ports.
* **Macro steps** of size H from ``t_start`` to ``t_end``, the last one shorter when H does not
  divide the span (a remainder below 1e-9 H is dropped).

Recorded at every communication point: every component output connector as
``COMPONENT.CONNECTOR`` and every system output connector by its own name, in SSD order.

**Model Exchange components** (a mixed system): the components that cannot run as Co-Simulation
(:func:`~.coupling.model_exchange_part`) form one part of the co-simulation, all of them in one
sandboxed worker (:class:`~.monolithic.SystemSession`, :class:`~fmi_adjoint.fmu.me_system.SystemInstance`):
their connections among themselves are made at every point of their integration, as in a Model
Exchange system (:mod:`.monolithic`); over a macro step the part is integrated by the adaptive
Radau IIA scheme with its events (tolerances ``MasterSettings.model_exchange``), its inputs from
the other components held or ramped like any component's (the part takes slopes: it integrates
``u + slope (t - t_n)`` exactly), and one request steps it, as one FMU's ``doStep``.  Its inputs
from outside must be continuous Reals.  A system whose components all run as Model Exchange can
instead be integrated as one ODE, with no coupling error (:mod:`.monolithic`).

Error estimate (:func:`estimate_error`): the system run at H, H/2 (and H/4 with ``runs=3``); per
column the largest difference d(H, H/2) at the communication points of H between the runs at H
and H/2, and with three runs the observed order ``p = log2(d(H, H/2) / d(H/2, H/4))``.  For a
method of order p, d(H, H/2) = (1 - 2^-p) e(H) to leading order, so the error of the run at H
is about ``d / (1 - 2^-p)`` (Richardson): twice the difference for zero-order hold.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import TextIO

import numpy as np

from ..errors import FmuError
from ..fmu.archive import FmuArchive
from ..fmu.experiment import Tolerances
from ..fmu.me_system import loop_scale, unsolvable_loop
from ..fmu.session import DEFAULT_TIMEOUT, FmuSession, run_each, start_values
from ..fmu.simulation import interpolates
from .coupling import (
    CouplingPlan,
    InputTable,
    Port,
    SystemResult,
    check_input_span,
    component_values,
    held_inputs_note,
    model_exchange_part,
    system_grid,
)
from .monolithic import MonolithicPlan, SystemSession
from .structure import SystemStructure

__all__ = ["APPROXIMATIONS", "ErrorEstimate", "GaussSeidel", "InputTable", "Jacobi", "LinearExtrapolation",
           "MasterSettings", "ORDERS", "SystemResult", "ZeroOrderHold", "check_input_span", "estimate_error",
           "held_inputs_note", "simulate_system"]

#: Relative step of the forward differences of an algebraic loop's Jacobian.
DIFFERENCE_STEP = 1e-7


# -- strategies -------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Jacobi:
    """All components step from the coupling values at the start of the macro step, in parallel."""

    name = "Jacobi"


@dataclasses.dataclass(frozen=True)
class GaussSeidel:
    """The components step one after another, in the order of the connections (module docstring)."""

    name = "Gauss-Seidel"


@dataclasses.dataclass(frozen=True)
class ZeroOrderHold:
    """Inputs held over the macro step; the coupling error is of first order in H."""

    name = "zero-order hold"
    order = 1


@dataclasses.dataclass(frozen=True)
class LinearExtrapolation:
    """Inputs with slopes (``fmi2SetRealInputDerivatives``; FMI 3 intermediate update) where the FMU
    can interpolate inputs; second order in H where every driven FMU can."""

    name = "linear extrapolation"
    order = 2


#: The orders and input approximations by their command-line names (``simulate --ssp``).
ORDERS: dict[str, Jacobi | GaussSeidel] = {"jacobi": Jacobi(), "gauss-seidel": GaussSeidel()}
APPROXIMATIONS: dict[str, ZeroOrderHold | LinearExtrapolation] = {"hold": ZeroOrderHold(),
                                                                    "linear": LinearExtrapolation()}


@dataclasses.dataclass(frozen=True)
class MasterSettings:
    """How the master runs a system (module docstring).

    Attributes
    ----------
    step : float
        The macro step H [s].
    order : Jacobi or GaussSeidel
    approximation : ZeroOrderHold or LinearExtrapolation
    loop_tolerance : float
        Of the algebraic loops (each input's residual relative to 1 + the size of that input and
        of the terms its coupling sums).
    max_loop_iterations : int
        Newton iterations allowed per communication point.
    model_exchange : Tolerances
        Of the integration of the Model Exchange part over a macro step (a mixed system).
    """

    step: float
    order: Jacobi | GaussSeidel = Jacobi()
    approximation: ZeroOrderHold | LinearExtrapolation = ZeroOrderHold()
    loop_tolerance: float = 1e-10
    max_loop_iterations: int = 20
    model_exchange: Tolerances = Tolerances()

    def __post_init__(self):
        if not (isinstance(self.step, (int, float)) and math.isfinite(self.step) and self.step > 0):
            raise FmuError(f"macro step {self.step!r}: give a positive number of seconds.")
        if not isinstance(self.order, (Jacobi, GaussSeidel)):
            raise FmuError(f"order {self.order!r}: give Jacobi() or GaussSeidel().")
        if not isinstance(self.approximation, (ZeroOrderHold, LinearExtrapolation)):
            raise FmuError(f"input approximation {self.approximation!r}: give ZeroOrderHold() or "
                           "LinearExtrapolation().")
        if not (isinstance(self.loop_tolerance, (int, float)) and math.isfinite(self.loop_tolerance)
                and self.loop_tolerance > 0):
            raise FmuError(f"loop tolerance {self.loop_tolerance!r}: give a positive number.")
        if not (isinstance(self.max_loop_iterations, int) and self.max_loop_iterations >= 1):
            raise FmuError(f"max_loop_iterations {self.max_loop_iterations!r}: give a whole number of at least 1.")


@dataclasses.dataclass(frozen=True)
class ErrorEstimate:
    """Per column of the result at H: ``difference[j]`` = max |y_H - y_{H/2}| over the points of
    H, and with three runs ``order[j]`` = log2(d(H, H/2) / d(H/2, H/4)) (NaN where both are 0);
    ``results`` are the runs, at ``steps``."""

    steps: tuple[float, ...]
    columns: tuple[str, ...]
    difference: np.ndarray
    order: np.ndarray | None
    results: tuple[SystemResult, ...]


@dataclasses.dataclass
class _Unit:
    """What one request steps: one Co-Simulation FMU, or a mixed system's Model Exchange part (its
    components ``names`` in one worker, :class:`~.monolithic.SystemSession`, which couples them
    itself and is addressed by ``COMPONENT.NAME``)."""

    session: FmuSession
    names: list[str]
    model_exchange: bool = False


class _Run:
    """One run of the master (sessions, coupling values, the loop's Jacobian)."""

    def __init__(self, plan: CouplingPlan, settings: MasterSettings, inputs: InputTable | None, units: list[_Unit]):
        self.plan, self.settings, self.table = plan, settings, inputs
        self.units = units
        self.unit_of = {name: unit for unit in units for name in unit.names}
        self.sessions: dict[str, FmuSession] = {name: unit.session for unit in units for name in unit.names}
        #: Inputs the Model Exchange part couples itself (driven by another of its components).
        self.internal = {port for port, c in plan.driving.items()
                         if self.unit_of[port[0]].model_exchange and c.start.element is not None
                         and self.unit_of[c.start.element] is self.unit_of[port[0]]}
        #: Per component, the inputs the master sets.
        self.inputs = {n: [c for c in plan.inputs[n] if (n, c) not in self.internal] for n in self.sessions}
        self.in_refs = {n: self._refs(n, self.inputs[n]) for n in self.sessions}
        self.out_refs = {n: self._refs(n, plan.outputs[n]) for n in self.sessions}
        #: Current outputs and the inputs each FMU holds now, by port.
        self.y: dict[Port, float] = {}
        self.u: dict[Port, float] = {}
        self.previous_u: dict[Port, float] = {}
        # Inputs fed by an unconnected system input without a table column keep the FMU's value.
        self.fed = [port for port in plan.driving if port not in self.internal and self._feeds_through(port)
                    and (plan.driving[port].start.element is not None or inputs is not None)]
        self.jacobian: np.ndarray | None = None
        #: Components that declare directional derivatives but refused one (differences instead).
        self.refused: set[str] = set()
        self.last_h = 0.0
        order2 = settings.approximation.order == 2
        self.interpolating = {n: order2 and (self.unit_of[n].model_exchange
                                             or (interpolates(s.archive, plan.inputs[n])
                                                 and all(isinstance(r, int) for r in self.in_refs[n])))
                              for n, s in self.sessions.items()}

    def _refs(self, name: str, connectors) -> list:
        if self.unit_of[name].model_exchange:
            return self.sessions[name].refs([f"{name}.{c}" for c in connectors])
        return self.sessions[name].refs(list(connectors))

    def _feeds_through(self, port: Port) -> bool:
        """Whether an output of the unit depends directly on the (Real) input ``port``: declared
        by its FMU, or, in the Model Exchange part, through its own connections."""
        if self.plan.connector_type(port) != "Real":
            return False
        unit = self.unit_of[port[0]]
        if not unit.model_exchange:
            return any(port[1] in inputs for inputs in self.plan.feedthrough[port[0]].values())
        edges, seen, stack = self.plan.edges(), set(), list(self.plan.edges().get(("in", port), ()))
        while stack:
            node = stack.pop()
            if node in seen or self.unit_of.get(node[1][0]) is not unit:
                continue
            if node[0] == "out":
                return True
            seen.add(node)
            stack.extend(edges.get(node, ()))
        return False

    # -- coupling -------------------------------------------------------------------------
    def coupled(self, port: Port, t: float) -> float | None:
        """The value the coupling gives the input ``port`` at ``t`` (None: an unconnected
        system input without a table column keeps the FMU's own value)."""
        connection = self.plan.driving[port]
        start = connection.start
        if start.element is None:
            if self.table is None:
                return None
            value = (self.table.at(start.connector, t) if self.plan.connector_type(port) == "Real"
                     else self.table.held(start.connector, t))
        else:
            value = self.y[(start.element, start.connector)]
        return connection.transformation.apply(value)

    def _set_outputs(self, name: str, values: np.ndarray) -> None:
        for connector, value in zip(self.plan.outputs[name], values):
            self.y[(name, connector)] = float(value)

    def run_units(self, kind: str, per_name: Mapping[str, tuple], t: float = 0.0, h: float = 0.0) -> None:
        """Send ``kind`` ("exchange" or "step") for the components ``per_name`` (each: refs, values,
        slopes), one request per unit (a Model Exchange part's components merged), all at once, and
        take the outputs of every component concerned."""
        units = [u for u in self.units if any(n in per_name for n in u.names)]
        requests, read = [], []
        for unit in units:
            # A Model Exchange part reports every component's outputs: an input of one acts on the
            # others' through the part's own connections.
            names = list(unit.names) if unit.model_exchange else [n for n in unit.names if n in per_name]
            given = [per_name.get(n, ([], [], ())) for n in names]
            refs = [r for inputs in given for r in inputs[0]]
            values = [v for inputs in given for v in inputs[1]]
            slopes = [v for inputs in given for v in inputs[2]]
            out_refs = [r for n in names for r in self.out_refs[n]]
            requests.append(unit.session.exchange_request(refs, values, out_refs) if kind == "exchange"
                            else unit.session.step_request(t, h, refs, values, out_refs, slopes))
            read.append(names)
        for names, outputs in zip(read, run_each([u.session for u in units], requests)):
            at = 0
            for name in names:
                size = len(self.out_refs[name])
                self._set_outputs(name, outputs[at:at + size])
                at += size

    # -- the consistent coupling at a communication point -----------------------------------
    def settle(self, t: float) -> None:
        """Make the inputs consistent with the outputs at ``t`` (module docstring)."""
        ports = [port for port in self.plan.driving if port not in self.internal]
        if not self.fed:  # no output depends on an input directly: the outputs stand
            for port in ports:
                value = self.coupled(port, t)
                if value is not None:
                    self.u[port] = value
            return
        settings, fed, last = self.settings, self.fed, math.inf
        for iteration in range(settings.max_loop_iterations + 1):
            target = {port: self.coupled(port, t) for port in ports}
            current = np.array([self.u.get(p, np.nan) for p in fed])
            wanted = np.array([np.nan if target[p] is None else target[p] for p in fed])
            known = ~np.isnan(wanted)
            if np.any(np.isinf(wanted)):
                raise FmuError(self._loop_text(t, "gives an input that is not finite (a component's output is "
                                                  "infinite); check the parameters and the inputs"))
            residual = np.where(known, current - wanted, 0.0)
            residual[np.isnan(residual)] = np.inf  # never set yet
            # Each port's residual against its own terms: the ports carry different units.
            size = float(np.max(np.abs(residual) / loop_scale(np.where(known, wanted, 0.0), self.jacobian),
                                initial=0.0))
            if size <= settings.loop_tolerance:
                for port, value in target.items():
                    if value is not None:
                        self.u[port] = value
                return
            if iteration == settings.max_loop_iterations:
                break
            if not np.all(np.isfinite(current[known])):
                new = wanted  # the first pass: take the coupling's values
            else:
                if self.jacobian is None or (iteration > 0 and size > 0.5 * last):
                    self.jacobian = self._jacobian(t)
                refusal = unsolvable_loop(self.jacobian)
                if refusal is not None:
                    raise FmuError(self._loop_text(t, refusal))
                step = np.linalg.solve(self.jacobian, residual)
                new = current - step
            last = size
            new = np.where(known, new, current)
            self._exchange({port: float(v) for port, v in zip(fed, new) if not math.isnan(v)}, t)
        raise FmuError(self._loop_text(t, f"did not converge in {settings.max_loop_iterations} iterations "
                                          f"(residual {size:.3g})"))

    def _loop_text(self, t: float, what: str) -> str:
        ports = self.plan.loop_ports or self.fed
        return (f"{self.plan.structure.source}: the algebraic loop through "
                f"{', '.join(f'{c}.{p}' for c, p in ports)} {what} at t = {t:g} s; raise max_loop_iterations, "
                "or break the loop (a component without direct feedthrough, or a delay) if it has no solution.")

    def _exchange(self, values: Mapping[Port, float], t: float) -> None:
        """Set the fed inputs (and every other connected input) to ``values`` and re-read the
        outputs of the components concerned, in parallel."""
        per_name = {}
        for name in (n for n in self.sessions if any(p[0] == n for p in values)):
            refs, inputs, ports = [], [], []
            for ref, connector in zip(self.in_refs[name], self.inputs[name]):
                port = (name, connector)
                value = values.get(port, self.u.get(port))
                if value is None:
                    value = self.coupled(port, t)
                if value is not None:
                    refs.append(ref)
                    inputs.append(value)
                    ports.append(port)
            self.u.update(zip(ports, inputs))
            per_name[name] = (refs, inputs, ())
        self.run_units("exchange", per_name)

    def _jacobian(self, t: float) -> np.ndarray:
        """``I - dC/dy dy/du`` over the fed inputs (module docstring)."""
        fed = self.fed
        n = len(fed)
        dy: dict[tuple[Port, Port], float] = {}  # (output port, input port) -> dy/du
        for unit in self.units:
            session = unit.session
            for name in unit.names:
                mine = [p for p in fed if p[0] == name]
                if not mine:
                    continue
                # The outputs the inputs act on directly: the component's own (its FMU's declaration),
                # or every output of the Model Exchange part (through its own connections).
                outputs = ([(o_name, o) for o_name in unit.names for o in self.plan.outputs[o_name]]
                           if unit.model_exchange else [(name, o) for o in self.plan.feedthrough[name]])
                out_refs = [r for o_name, o in outputs for r in self._refs(o_name, [o])]
                directional = (not unit.model_exchange and name not in self.refused
                               and _cs_flag(session.archive, "providesDirectionalDerivative"))
                for port in mine:
                    ref = self._refs(name, [port[1]])[0]
                    column = None
                    if directional and isinstance(ref, int):
                        try:
                            column = session.directional(out_refs, ref)
                        except FmuError:  # declared but refused: differences from now on
                            self.refused.add(name)
                            directional = False
                    if column is None:
                        # The base point is read again after the perturbation (which it also undoes): an
                        # FMU that interpolated its inputs over the step holds another value now.
                        u0 = self.u[port]
                        delta = DIFFERENCE_STEP * (1.0 + abs(u0))
                        plus = session.exchange([ref], [u0 + delta], out_refs)
                        column = (plus - session.exchange([ref], [u0], out_refs)) / delta
                    for output, value in zip(outputs, column):
                        dy[(output, port)] = float(value)
        jacobian = np.eye(n)
        for row, port in enumerate(fed):
            connection = self.plan.driving[port]
            start = connection.start
            if start.element is None:
                continue
            for k, source in enumerate(fed):
                derivative = dy.get(((start.element, start.connector), source))
                if derivative:
                    jacobian[row, k] -= connection.transformation.factor * derivative
        return jacobian

    # -- macro steps ----------------------------------------------------------------------
    def step(self, t: float, h: float) -> None:
        """One macro step from ``t`` to ``t + h``; the coupling consistent at ``t + h`` after it."""
        if isinstance(self.settings.order, Jacobi):
            self.run_units("step", {name: self._step_inputs(name, t, h, set()) for name in self.sessions}, t, h)
        else:
            stepped: set[str] = set()
            for unit in sorted(self.units, key=lambda u: min(self.plan.order.index(n) for n in u.names)):
                self.run_units("step", {name: self._step_inputs(name, t, h, stepped) for name in unit.names}, t, h)
                stepped.update(unit.names)
        self.previous_u, self.last_h = dict(self.u), h
        self.settle(t + h)

    def _step_inputs(self, name: str, t: float, h: float, stepped: set[str]) -> tuple[list, list, list]:
        """The step of one component: its inputs at ``t`` (Gauss-Seidel: zero-order hold takes the
        new values at ``t + h`` of the components ``stepped`` before it) and their slopes."""
        refs, values, slopes = [], [], []
        for ref, connector in zip(self.in_refs[name], self.inputs[name]):
            port = (name, connector)
            start = self.plan.driving[port].start
            now = self.u.get(port)
            if now is None:
                continue
            new = self.coupled(port, t + h) if start.element in stepped or start.element is None else None
            if not self.interpolating[name]:
                refs.append(ref)
                values.append(new if new is not None and start.element is not None else now)
                continue
            if new is not None:
                slope = (new - now) / h
            elif port in self.previous_u and self.last_h:
                slope = (now - self.previous_u[port]) / self.last_h
            else:
                slope = 0.0
            refs.append(ref)
            values.append(now)
            slopes.append(slope)
        return refs, values, slopes

    def record(self) -> list[float]:
        row = [self.y[(c.name, o)] for c in self.plan.components for o in self.plan.outputs[c.name]]
        for connection in self.plan.system_outputs.values():
            start = connection.start
            row.append(connection.transformation.apply(self.y[(str(start.element), start.connector)]))
        return row


def _model_exchange_part(plan: CouplingPlan, archives: Mapping[str, FmuArchive]) -> MonolithicPlan:
    """The plan of the components that run through Model Exchange (none: an empty part): their
    connections among themselves are theirs to couple (:mod:`.monolithic`); an input the master
    sets must be a continuous Real (a discrete one may change only in Event Mode)."""
    structure = plan.structure
    names = model_exchange_part(structure, archives)
    inside = [c for c in structure.connections if c.end.element in names and c.start.element in names]
    for port, connection in plan.driving.items():
        if port[0] in names and connection not in inside:
            variable = archives[port[0]].variables.get(port[1])
            variability = getattr(variable, "variability", "continuous")
            if plan.connector_type(port) != "Real" or variability == "discrete":
                raise FmuError(f"{structure.source}: the connection to {port[0]}.{port[1]} "
                               f"({plan.connector_type(port)}, {variability}) of a Model Exchange component: not "
                               "yet: discrete inputs of the Model Exchange part of a co-simulation (they may be set "
                               "only in Event Mode).")
    part = dataclasses.replace(structure, connectors=(), components=tuple(c for c in structure.components
                                                                         if c.name in names),
                               connections=tuple(inside),
                               parameters=tuple(p for p in structure.parameters if p.component in names))
    return MonolithicPlan(part, archives)


def _cs_flag(archive: FmuArchive, name: str) -> bool:
    """A capability flag of the FMU's ``<CoSimulation>`` element, read from the XML (fmpy 0.3
    keeps only FMI 2 spellings; FMI 3 writes ``providesDirectionalDerivatives``)."""
    element = archive.root.find("CoSimulation")
    if element is None:
        return False
    spellings = (name, name + "s") if archive.fmi_version == 3 else (name,)
    return any(element.get(spelling, "false") in ("true", "1") for spelling in spellings)


def simulate_system(structure: SystemStructure, archives: Mapping[str, FmuArchive], t_end: float,
                    settings: MasterSettings, *, t_start: float | None = None,
                    values: Mapping[str, float] | None = None, inputs: InputTable | None = None,
                    timeout: float = DEFAULT_TIMEOUT, log: TextIO | None = None) -> SystemResult:
    """Co-simulate ``structure`` from ``t_start`` (default: the SSD's start time, else 0) to
    ``t_end`` (module docstring); one row per communication point."""
    plan = CouplingPlan(structure, archives)
    plan.check_table(inputs)
    t0 = float(t_start if t_start is not None else structure.start_time or 0.0)
    grid = system_grid(t0, float(t_end), float(settings.step))
    per_component = component_values(structure, values or {})
    part = _model_exchange_part(plan, archives)
    units: list[_Unit] = []
    try:
        for component in plan.components:
            if component.name not in part.names:
                session = FmuSession(archives[component.name], "CoSimulation", timeout=timeout, log=log, wait=False)
                units.append(_Unit(session, [component.name]))
            elif not any(unit.model_exchange for unit in units):
                session = SystemSession(part, timeout=timeout, log=log, wait=False, macro=settings.model_exchange)
                units.append(_Unit(session, list(part.names), model_exchange=True))
        requests = []
        for unit in units:
            if unit.model_exchange:
                assert isinstance(unit.session, SystemSession)
                refs, vals = unit.session._start_values({key: value for key, value in (values or {}).items()
                                                         if key.partition(".")[0] in part.names}, {})
            else:
                name = unit.names[0]
                refs, vals = start_values(archives[name], per_component[name], {})
            requests.append(("call", (None, "start", (refs, vals, float(grid[0]), float(grid[-1])))))
        run_each([unit.session for unit in units], requests)
        run = _Run(plan, settings, inputs, units)
        run.run_units("exchange", {name: ([], [], ()) for unit in units for name in unit.names})
        run.settle(float(grid[0]))
        rows = [run.record()]
        for k in range(grid.size - 1):
            run.step(float(grid[k]), float(grid[k + 1] - grid[k]))
            rows.append(run.record())
    finally:
        for unit in units:
            unit.session.close()
    return SystemResult(grid, tuple(plan.columns()), np.array(rows, dtype=float))


def estimate_error(structure: SystemStructure, archives: Mapping[str, FmuArchive], t_end: float,
                   settings: MasterSettings, *, runs: int = 2, **options) -> ErrorEstimate:
    """Step-halving estimate of the coupling error of the run at ``settings.step`` (module
    docstring): runs at H, H/2 and, with ``runs=3``, H/4 (``options`` as for
    :func:`simulate_system`)."""
    if runs not in (2, 3):
        raise FmuError(f"runs={runs!r}: the estimate compares 2 runs (H, H/2) or 3 (H, H/2, H/4).")
    results = [simulate_system(structure, archives, t_end,
                               dataclasses.replace(settings, step=settings.step / 2 ** k), **options)
               for k in range(runs)]
    coarse = results[0]

    def at_coarse(result: SystemResult) -> np.ndarray:
        return np.column_stack([np.interp(coarse.times, result.times, result.values[:, j])
                                for j in range(result.values.shape[1])])

    sampled = [coarse.values] + [at_coarse(r) for r in results[1:]]
    differences = [np.max(np.abs(a - b), axis=0) for a, b in zip(sampled, sampled[1:])]
    order = None
    if runs == 3:
        with np.errstate(divide="ignore", invalid="ignore"):
            order = np.log2(differences[0] / differences[1])
    return ErrorEstimate(tuple(settings.step / 2 ** k for k in range(runs)), coarse.columns, differences[0], order,
                         tuple(results))

