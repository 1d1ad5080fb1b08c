"""A system of FMUs as read from an SSP 1.0 System Structure Description (issue 28): the
frozen values the reader (:mod:`fmi_adjoint.ssp.reading`) makes and the master
(:mod:`fmi_adjoint.ssp.master`) runs.

Names follow SSP 1.0 (Modelica Association, 2019), Sec. 5: a *system* has *connectors* (its
own inputs and outputs), *elements* (here: components, each an FMU) with connectors of their
own, and *connections* from a start connector to an end connector, each optionally with a
linear transformation ``end = factor * start + offset`` (Sec. 5.3.7.1) or a unit conversion
(Sec. 5.3.7.2, through the units' ``BaseUnit`` factors and offsets: folded into the same
``factor``/``offset`` here).  A connector is named ``COMPONENT.CONNECTOR`` at the system level
(``.CONNECTOR`` alone for the system's own).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import FmuError
from ..text import excerpt

if TYPE_CHECKING:
    from ..fmu.archive import FmuArchive

__all__ = ["Component", "Connection", "Connector", "Endpoint", "ParameterValue", "SystemStructure",
           "Transformation", "system_identity"]

#: Connector kinds (SSP 1.0, 5.3.4).
CONNECTOR_KINDS = ("input", "output", "inout", "parameter", "calculatedParameter")
#: Connector types this version couples (the rest are refused by name by the reader).
CONNECTOR_TYPES = ("Real", "Integer", "Boolean")


@dataclasses.dataclass(frozen=True)
class Connector:
    """A connector of a component or of the system: ``kind`` one of :data:`CONNECTOR_KINDS`,
    ``type`` one of :data:`CONNECTOR_TYPES`, ``unit`` the SSD unit's name ("" if none)."""

    name: str
    kind: str
    type: str = "Real"
    unit: str = ""


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """One end of a connection: ``element`` a component's name, or None for the system's own
    connector."""

    element: str | None
    connector: str

    def label(self) -> str:
        """``COMPONENT.CONNECTOR``, or ``.CONNECTOR`` for the system's own."""
        return f"{self.element or ''}.{self.connector}"


@dataclasses.dataclass(frozen=True)
class Transformation:
    """``end = factor * start + offset`` (a linear transformation or a unit conversion, or
    both composed; the identity by default)."""

    factor: float = 1.0
    offset: float = 0.0

    def apply(self, value: float) -> float:
        return self.factor * value + self.offset

    def then(self, other: Transformation) -> Transformation:
        """``other`` applied after this one."""
        return Transformation(other.factor * self.factor, other.factor * self.offset + other.offset)


@dataclasses.dataclass(frozen=True)
class Connection:
    """A connection from ``start`` to ``end`` (SSP 1.0, 5.3.7)."""

    start: Endpoint
    end: Endpoint
    transformation: Transformation = Transformation()


@dataclasses.dataclass(frozen=True)
class Component:
    """An FMU in the system.

    Attributes
    ----------
    name : str
    path : Path
        The FMU file (extracted from the ``.ssp`` archive into the reader's private folder, or
        beside a ``.ssd`` file).
    source : str
        The ``source`` attribute as written in the SSD (for messages).
    implementation : str
        ``any``, ``ModelExchange`` or ``CoSimulation`` (SSP 1.0, 5.3.2).
    connectors : tuple of Connector
    """

    name: str
    path: Path
    source: str
    implementation: str = "any"
    connectors: tuple[Connector, ...] = ()

    def connector(self, name: str) -> Connector:
        for connector in self.connectors:
            if connector.name == name:
                return connector
        raise FmuError(f"component {excerpt(self.name)} has no connector {excerpt(name)}; connectors: "
                       f"{', '.join(c.name for c in self.connectors) or '(none)'}.")


@dataclasses.dataclass(frozen=True)
class ParameterValue:
    """A start value bound to a component's variable (inline ``ParameterValues`` or an SSV file,
    SSP 1.0, 5.3.5; a binding's ``prefix`` already removed)."""

    component: str
    name: str
    value: float | int | bool


@dataclasses.dataclass(frozen=True)
class SystemStructure:
    """A system of FMUs (module docstring).

    Attributes
    ----------
    name : str
        The system's name.
    source : str
        The file read (for messages).
    connectors : tuple of Connector
        The system's own inputs and outputs.
    components : tuple of Component
    connections : tuple of Connection
    parameters : tuple of ParameterValue
    start_time, stop_time : float or None
        ``DefaultExperiment`` (None where not given).
    digest : str
        SHA-256 of the SSD without its parameter bindings (:func:`~.reading.structure_digest`):
        what RESULT.json records of the system, so that ``apply`` refuses a result of another
        system and accepts the system with other parameter values.
    """

    name: str
    source: str
    connectors: tuple[Connector, ...]
    components: tuple[Component, ...]
    connections: tuple[Connection, ...]
    parameters: tuple[ParameterValue, ...] = ()
    start_time: float | None = None
    stop_time: float | None = None
    digest: str = ""

    def component(self, name: str) -> Component:
        for component in self.components:
            if component.name == name:
                return component
        raise FmuError(f"{self.source}: the system has no component {excerpt(name)}; components: "
                       f"{', '.join(c.name for c in self.components)}.")

    def parameter_values(self, component: str) -> Mapping[str, float | int | bool]:
        """The bound values of one component's variables, by variable name."""
        return {p.name: p.value for p in self.parameters if p.component == component}

    def driving(self, end: Endpoint) -> Connection | None:
        """The connection that ends at ``end`` (at most one: the reader refuses two)."""
        for connection in self.connections:
            if connection.end == end:
                return connection
        return None


def system_identity(structure: SystemStructure, archives: Mapping[str, FmuArchive]) -> dict:
    """What RESULT.json records of an identified system (``system_identity``): the digest of its
    SSD without the parameter bindings (:attr:`SystemStructure.digest`) and each component's FMU
    ``guid`` / ``instantiationToken`` (FMI 2.0.4 sec. 2.2.1, FMI 3.0 sec. 2.4.1: one model
    structure), by component name; ``apply --system`` compares them
    (:func:`~.handback.check_result_system`)."""
    return {"structure_sha256": structure.digest,
            "components": {c.name: archives[c.name].description.guid for c in structure.components}}
