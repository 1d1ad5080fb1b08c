"""A system of FMUs as its runs see it (issue 28): the wiring of its ports (:class:`CouplingPlan`:
per component its connected inputs and its outputs, the direct feedthrough declared in each FMU's
``ModelStructure``, the algebraic loops, the Gauss-Seidel order), which interface each component
runs (:func:`runs_as`), the values a run starts from (:func:`component_values`), its input table
and its result.  Shared by the co-simulation master (:mod:`.master`) and the Model Exchange system
(:mod:`.monolithic`), which both build on it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import numpy as np

from ..errors import FmuError
from ..fmu.archive import FmuArchive
from ..text import excerpt
from .structure import Component, Connection, Endpoint, SystemStructure

__all__ = ["CO_SIMULATION_REFUSAL", "CouplingPlan", "InputTable", "NO_INTERFACE_REFUSAL", "Port",
           "SystemResult", "all_model_exchange", "check_input_span", "component_values", "held_inputs_note",
           "model_exchange_part", "runs_as",
           "system_columns", "system_grid"]

#: A component that runs neither as Co-Simulation nor as Model Exchange (no binary for this platform).
NO_INTERFACE_REFUSAL = ("the FMU has neither a Co-Simulation nor a Model Exchange interface with a binary for this "
                          "platform that the SSD's implementation allows; export it for this platform")
#: A component without Model Exchange in a system integrated as one (:mod:`.monolithic`).
CO_SIMULATION_REFUSAL = ("it has no Model Exchange interface (or the SSD chooses CoSimulation), so the system cannot "
                         "be integrated as one ODE; co-simulate it (--interface cs): the master runs the components "
                         "that have only Model Exchange as one part of the co-simulation")


@dataclasses.dataclass(frozen=True)
class InputTable:
    """The system's inputs over time: ``values[k, j]`` is column ``columns[j]`` at ``times[k]``
    (interpolated linearly, held beyond the ends)."""

    times: np.ndarray
    columns: tuple[str, ...]
    values: np.ndarray

    def __post_init__(self):
        times, values = np.asarray(self.times, dtype=float), np.asarray(self.values, dtype=float)
        if times.ndim != 1 or times.size == 0 or np.any(np.diff(times) <= 0) or not np.all(np.isfinite(times)):
            raise FmuError("input table: the times must be finite and increasing; give one row per time.")
        if values.shape != (times.size, len(self.columns)) or not np.all(np.isfinite(values)):
            raise FmuError(f"input table: the values must be finite, {times.size} rows by {len(self.columns)} "
                           "columns (one per name).")
        object.__setattr__(self, "times", times)
        object.__setattr__(self, "values", values)

    def at(self, name: str, t: float) -> float:
        return float(np.interp(t, self.times, self.values[:, self.columns.index(name)]))

    def held(self, name: str, t: float) -> float:
        """The value of the last sample at or before ``t`` (the first before the table): an
        Integer or Boolean input changes at its samples only, never between them."""
        k = max(int(np.searchsorted(self.times, t, side="right")) - 1, 0)
        return float(self.values[k, self.columns.index(name)])


def held_inputs_note(structure: SystemStructure) -> str | None:
    """The note for a run without an input table: the system inputs that drive components
    leave those components at their inputs' start values over the whole run (None where no
    system input drives a component).  With a table every such input needs a column
    (:meth:`CouplingPlan.check_table`)."""
    held = sorted({c.start.connector for c in structure.connections
                   if c.start.element is None and c.end.element is not None})
    if not held:
        return None
    many = len(held) > 1
    return (f"the system input{'s' if many else ''} {', '.join(held)} of {structure.source} "
            f"{'have' if many else 'has'} no input signal: the components {'they drive' if many else 'it drives'} "
            "keep their inputs' start values over the whole run; give the signals with --inputs INPUTS.csv (a column "
            "per input).")


def check_input_span(times: np.ndarray, t0: float, t_end: float, source: str) -> None:
    """FmuError unless the input samples ``times`` (of the file ``source``) cover the run from
    ``t0`` to ``t_end``: beyond its ends a table would hold its last values, which no bench did."""
    tolerance = 1e-12 * max(1.0, abs(t0), abs(t_end))
    if times[0] > t0 + tolerance or times[-1] < t_end - tolerance:
        raise FmuError(f"{source}: the inputs span [{times[0]:g}, {times[-1]:g}] s but the simulation runs over "
                       f"[{t0:g}, {t_end:g}] s; extend the input file or shorten the run (--t-end).")


@dataclasses.dataclass(frozen=True)
class SystemResult:
    """``values[k, j]`` is column ``columns[j]`` at the communication point ``times[k]``."""

    times: np.ndarray
    columns: tuple[str, ...]
    values: np.ndarray

    def column(self, name: str) -> np.ndarray:
        if name not in self.columns:
            raise FmuError(f"the result has no column {excerpt(name)}; columns: {', '.join(self.columns)}.")
        return self.values[:, self.columns.index(name)]


# -- the system as the master sees it -------------------------------------------------------
Port = tuple[str, str]  # (component, connector)


class CouplingPlan:
    """The wiring of a system: per component its input and output ports and the feedthrough,
    the coupling of every connected input, the loops and the Gauss-Seidel order.

    ``interface``: ``"CoSimulation"``, the co-simulation master (every component runs as
    Co-Simulation, or as Model Exchange in the master's Model Exchange part), or
    ``"ModelExchange"``, one ODE (every component runs as Model Exchange); a component that cannot
    is refused by name."""

    def __init__(self, structure: SystemStructure, archives: Mapping[str, FmuArchive],
                 interface: str = "CoSimulation"):
        self.structure = structure
        self.components: list[Component] = list(structure.components)
        for component in self.components:
            if component.name not in archives:
                raise FmuError(f"{structure.source}: no FMU was opened for the component {excerpt(component.name)}.")
            archive = archives[component.name]
            runs = (runs_as(component, archive, "ModelExchange") if interface == "ModelExchange"
                    else runs_as(component, archive, "CoSimulation") or runs_as(component, archive, "ModelExchange"))
            if not runs:
                refusal = NO_INTERFACE_REFUSAL if interface == "CoSimulation" else CO_SIMULATION_REFUSAL
                raise FmuError(f"{structure.source}: component {excerpt(component.name)} "
                               f"({archives[component.name].path.name}): {refusal}.")
        self.archives = archives
        #: Every component connector's type, by port (read at every macro step).
        self.types: dict[Port, str] = {(c.name, k.name): k.type for c in self.components for k in c.connectors}
        #: Connected inputs per component, in SSD connector order, and their connections.
        self.inputs: dict[str, list[str]] = {}
        self.outputs: dict[str, list[str]] = {}
        self.driving: dict[Port, Connection] = {}
        for component in self.components:
            self.inputs[component.name] = []
            self.outputs[component.name] = [c.name for c in component.connectors if c.kind == "output"]
            for connector in component.connectors:
                if connector.kind == "input":
                    connection = structure.driving(Endpoint(component.name, connector.name))
                    if connection is not None:
                        self.inputs[component.name].append(connector.name)
                        self.driving[(component.name, connector.name)] = connection
        for (name, end), connection in self.driving.items():
            start = connection.start
            if start.element is not None and start.connector not in self.outputs.get(start.element, ()):
                raise FmuError(f"{structure.source}: the connection to {name}.{end} starts at "
                               f"{start.label()}, which is not an output of a component; connect an output.")
        #: System outputs: name -> connection from a component output.
        self.system_outputs: dict[str, Connection] = {}
        for connector in structure.connectors:
            if connector.kind == "output":
                connection = structure.driving(Endpoint(None, connector.name))
                if connection is not None and connection.start.element is not None:
                    self.system_outputs[connector.name] = connection
        self.feedthrough = {c.name: self._feedthrough(c.name) for c in self.components}
        self.loop_ports = self._loop_ports()
        self.order = self._gauss_seidel_order()

    def _feedthrough(self, name: str) -> dict[str, set[str]]:
        """Output connector -> the connected inputs it depends on directly (ModelStructure)."""
        archive, inputs = self.archives[name], set(self.inputs[name])
        out: dict[str, set[str]] = {}
        declared = {u.variable.name: u.dependencies for u in archive.description.outputs}
        for output in self.outputs[name]:
            dependencies = declared.get(output)
            names = inputs if dependencies is None else {v.name for v in dependencies} & inputs
            if names:
                out[output] = names
        return out

    def edges(self) -> dict[tuple[str, Port], list[tuple[str, Port]]]:
        """The graph of direct dependencies between ports: input -> output of the same component
        (feedthrough), output -> input it drives."""
        edges: dict[tuple[str, Port], list[tuple[str, Port]]] = {}
        for name, outputs in self.feedthrough.items():
            for output, inputs in outputs.items():
                for connector in inputs:
                    edges.setdefault(("in", (name, connector)), []).append(("out", (name, output)))
        for port, connection in self.driving.items():
            if connection.start.element is not None:
                edges.setdefault(("out", (connection.start.element, connection.start.connector)), []).append(
                    ("in", port))
        return edges

    def _loop_ports(self) -> list[Port]:
        """The inputs on a cycle of direct dependencies (an algebraic loop), in plan order."""
        edges = self.edges()
        looped = []
        for port in self.driving:
            seen, stack = set(), list(edges.get(("in", port), ()))
            while stack:
                node = stack.pop()
                if node == ("in", port):
                    looped.append(port)
                    break
                if node not in seen:
                    seen.add(node)
                    stack.extend(edges.get(node, ()))
        return looped

    def _gauss_seidel_order(self) -> list[str]:
        """Components after those whose outputs they read; ties and cycles by SSD order."""
        names = [c.name for c in self.components]
        before = {name: {c.start.element for (n, _), c in self.driving.items()
                         if n == name and c.start.element not in (None, name)} for name in names}
        order: list[str] = []
        while len(order) < len(names):
            ready = [n for n in names if n not in order and before[n] <= set(order)]
            order.append(ready[0] if ready else next(n for n in names if n not in order))
        return order

    def check_table(self, table: InputTable | None) -> None:
        """FmuError unless ``table`` has a column for every connected system input (no table:
        the driven inputs keep the FMUs' own values)."""
        for port, connection in self.driving.items():
            start = connection.start
            if table is not None and start.element is None and start.connector not in table.columns:
                raise FmuError(f"{self.structure.source}: the system input {connection.start.connector!r} drives "
                               f"{port[0]}.{port[1]} but the input table has no such column; columns: "
                               f"{', '.join(table.columns) or '(none)'}.")

    def connector_type(self, port: Port) -> str:
        """``Real``, ``Integer`` or ``Boolean`` (:data:`~.structure.CONNECTOR_TYPES`)."""
        return self.types[port]

    def feedthrough_inputs(self) -> list[Port]:
        """Connected Real inputs some output depends on directly, in plan order (an Integer or
        Boolean input takes its coupled value as it is: Newton's method does not apply to it)."""
        return [port for port in self.driving
                if self.connector_type(port) == "Real"
                and any(port[1] in inputs for inputs in self.feedthrough[port[0]].values())]

    def columns(self) -> list[str]:
        return ([f"{c.name}.{o}" for c in self.components for o in self.outputs[c.name]]
                + list(self.system_outputs))


def runs_as(component: Component, archive: FmuArchive, interface: str) -> bool:
    """Whether ``component`` can run through ``interface``: the FMU has that interface with a binary
    for this platform, and the SSD's ``implementation`` (SSP 1.0, 5.3.2) is that one or ``any``."""
    if interface == "ModelExchange":
        return component.implementation != "CoSimulation" and archive.model_exchange
    return component.implementation != "ModelExchange" and archive.co_simulation


def all_model_exchange(structure: SystemStructure, archives: Mapping[str, FmuArchive]) -> bool:
    """Whether every component can run as Model Exchange (the system as one ODE, :mod:`.monolithic`)."""
    return all(runs_as(c, archives[c.name], "ModelExchange") for c in structure.components if c.name in archives)


def model_exchange_part(structure: SystemStructure, archives: Mapping[str, FmuArchive]) -> list[str]:
    """The components a co-simulation runs through Model Exchange, as one part of it (a mixed
    system, :mod:`.master`): those that cannot run as Co-Simulation."""
    return [c.name for c in structure.components if c.name in archives
            and not runs_as(c, archives[c.name], "CoSimulation")]


def component_values(structure: SystemStructure, values: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """Per component: the SSD's parameter bindings, then the user's ``COMPONENT.NAME`` values."""
    out: dict[str, dict[str, float]] = {c.name: dict(structure.parameter_values(c.name)) for c in structure.components}
    for key, value in values.items():
        name, dot, variable = key.partition(".")
        if not dot or not variable:
            raise FmuError(f"--set {excerpt(key)}: name a component's variable as COMPONENT.NAME.")
        if name not in out:
            structure.component(name)  # raises, listing the components
        out[name][variable] = value
    return out


def system_columns(structure: SystemStructure, archives: Mapping[str, FmuArchive],
                   interface: str = "CoSimulation") -> tuple[str, ...]:
    """The columns of a run's result for ``structure`` (module docstring: every component output
    ``COMPONENT.CONNECTOR``, then the system's outputs), after the checks made before any run (a
    component without ``interface`` is refused, :data:`NO_INTERFACE_REFUSAL`)."""
    return tuple(CouplingPlan(structure, archives, interface).columns())


def system_grid(t_start: float, t_end: float, step: float) -> np.ndarray:
    """Communication points from ``t_start`` to ``t_end`` by ``step``, the last step shorter."""
    if not (math.isfinite(t_end) and t_end > t_start):
        raise FmuError(f"end time {t_end!r}: give a time after the start time {t_start:g} s.")
    count = math.floor((t_end - t_start) / step * (1 + 1e-12))
    grid = t_start + step * np.arange(count + 1)
    if t_end - grid[-1] > 1e-9 * step:
        grid = np.append(grid, t_end)
    else:
        grid[-1] = t_end if abs(grid[-1] - t_end) <= 1e-9 * step else grid[-1]
    return grid
