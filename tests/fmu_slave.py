"""A started exported FMU driven by hand through fmpy's FMU2Slave / FMU3Slave, its variables
addressed by name (tests of the exported runtime: communication steps, inputs, FMU states)."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from fmpy import read_model_description
from fmpy.fmi1 import FMICallException
from fmpy.fmi2 import FMU2Slave
from fmpy.fmi3 import FMU3Slave

#: ``intermediate(slave, t)``: what an FMI 3 importer does when the FMU calls back inside
#: fmi3DoStep asking for inputs at ``t`` (its intermediateUpdate callback).
Intermediate = Callable[["Slave", float], None]


class Slave:
    """A started FMU (fmpy's FMU2Slave / FMU3Slave, default logger) addressed by variable name.

    ``intermediate`` (FMI 3): the instance's intermediateUpdate callback calls it with the
    FMU's time whenever the FMU requests inputs; the times are kept in :attr:`calls`, and the
    fmpy errors it raises (which must not cross the FMU's C frames) in :attr:`failures`.
    """

    def __init__(self, path: Path, work: Path, values: dict[str, float] | None = None,
                 intermediate: Intermediate | None = None):
        self.description = read_model_description(str(path))
        self.version = 2 if self.description.fmiVersion.startswith("2") else 3
        folder = work / f"{path.stem}_unzipped"
        if not folder.is_dir():
            with zipfile.ZipFile(path) as archive:
                archive.extractall(folder)
        self.vr = {v.name: v.valueReference for v in self.description.modelVariables}
        cls = FMU2Slave if self.version == 2 else FMU3Slave
        token = self.description.guid if self.version == 2 else self.description.instantiationToken
        identifier = self.description.coSimulation.modelIdentifier
        self.slave = cls(guid=token, unzipDirectory=str(folder), modelIdentifier=identifier, instanceName="h1")
        self.calls: list[float] = []
        self.failures: list[str] = []
        if intermediate is None:
            self.slave.instantiate()
        else:
            assert self.version == 3, "intermediate update is FMI 3"

            def update(environment, t, set_requested, get_allowed, finished, can_return_early, early, early_time):
                self.calls.append(float(t))
                assert set_requested and not get_allowed and not can_return_early
                try:
                    intermediate(self, float(t))
                except FMICallException as exc:
                    self.failures.append(str(exc))

            self.slave.instantiate(intermediateUpdate=update)
        if values:
            self.set(values)
        if self.version == 2:
            self.slave.setupExperiment(startTime=0.0)
            self.slave.enterInitializationMode()
        else:
            self.slave.enterInitializationMode(startTime=0.0)
        self.slave.exitInitializationMode()
        self.t = 0.0

    def set(self, values: dict[str, float]) -> None:
        vrs = [self.vr[k] for k in values]
        if self.version == 2:
            self.slave.setReal(vrs, list(values.values()))
        else:
            self.slave.setFloat64(vrs, list(values.values()))

    def get(self, names) -> np.ndarray:
        vrs = [self.vr[k] for k in names]
        return np.array(self.slave.getReal(vrs) if self.version == 2 else self.slave.getFloat64(vrs))

    def step_to(self, t: float) -> None:
        self.slave.doStep(currentCommunicationPoint=self.t, communicationStepSize=t - self.t)
        self.t = t

    def close(self) -> None:
        self.slave.terminate()
        self.slave.freeInstance()
