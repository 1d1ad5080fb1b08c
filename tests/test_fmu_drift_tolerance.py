"""The drift tolerance of exported Model Exchange FMUs (issue 30, part 1): ``me.drift_tolerance``.

What is shown, for FMI 2 and 3, on slider_crank (two loop-closure constraints):

* the variable is declared as a tunable parameter (causality parameter, variability tunable,
  start the C core's default, min > 0, unit "1" defined, a description, no place in
  ``<ModelStructure>``); the FMU passes fmpy's validation and the XSD; a Co-Simulation-only
  export, and a model without constraints (sdof), do not list it;
* an instance reads the start value until one is set (and Reset restores it), an FMU state
  restores the value it saved, and directional derivatives with respect to it are zero;
* a value that is not finite or is below min is refused with status Error and a logged message
  naming the variable, and the value stays (Model Exchange instances, and the Co-Simulation
  instances of the FMU with both interfaces, which keep it without effect);
* fmpy's CVode with a tighter tolerance projects more often (more events) and carries on from
  states with a smaller constraint violation than with a looser one, each within its tolerance;
* ``apply -o`` (:func:`~fmi_adjoint.fmu.rebuild.rebuild_fmu`) rebuilds such an FMU: the
  tolerance is no model value to compile in, and a handed-back one becomes its start value.
"""

from __future__ import annotations

import math
import re
import zipfile

import fmpy
import fmpy.validation
import numpy as np
import pytest
from fmpy.fmi1 import FMICallException
from fmpy.fmi2 import (FMU2Model, FMU2Slave, calloc, fmi2CallbackAllocateMemoryTYPE, fmi2CallbackFreeMemoryTYPE,
                       fmi2CallbackFunctions, fmi2CallbackLoggerTYPE, free)
from fmpy.fmi3 import FMU3Model, FMU3Slave
from lxml import etree

from fmi_adjoint.examples import example_path
from fmi_adjoint.export import export_fmu, validate_against_schema
from fmi_adjoint.export.fmu_export import FMI_LAYER_DIR

NAME = "me.drift_tolerance"
#: The C core's default (fa_fmu_me.h), which the start value must equal.
DEFAULT = float(re.search(r"^#define FA_ME_DRIFT_TOLERANCE (\S+)$", (FMI_LAYER_DIR / "fa_fmu_me.h").read_text(),
                          re.M).group(1))
#: The two settings compared: both off the default, four orders of magnitude apart (a value
#: of the FMU parameter, not a test tolerance).
LOOSE, TIGHT = 1e-6, 1e-10


@pytest.fixture(scope="module")
def fmus(tmp_path_factory):
    """{(model, version, interface): path}, each exported once."""
    folder = tmp_path_factory.mktemp("drift")
    return {(name, version, interface): export_fmu(example_path(name), folder / f"{name}_{version}_{interface}.fmu",
                                                   fmi_version=version, interface=interface)
            for name, version, interface in (("slider_crank", 2, "both"), ("slider_crank", 3, "both"),
                                             ("slider_crank", 2, "cs"), ("sdof", 2, "both"))}


class Instance:
    """An instance through fmpy whose log messages are kept (``messages``), in Instantiated mode."""

    def __init__(self, path, version: int, unzipped, model_exchange: bool = True):
        self.md = fmpy.read_model_description(str(path))
        self.version, self.messages = version, []
        self.vr = {v.name: v.valueReference for v in self.md.modelVariables}
        interface = self.md.modelExchange if model_exchange else self.md.coSimulation
        cls = {(2, True): FMU2Model, (2, False): FMU2Slave, (3, True): FMU3Model, (3, False): FMU3Slave}
        self.fmu = cls[version, model_exchange](guid=self.md.guid, unzipDirectory=fmpy.extract(str(path), unzipped),
                                                modelIdentifier=interface.modelIdentifier, instanceName="drift")
        if version == 2:
            def log(component, name, status, category, message):
                self.messages.append(message.decode())

            self.callbacks = fmi2CallbackFunctions()
            self.callbacks.logger = fmi2CallbackLoggerTYPE(log)
            self.callbacks.allocateMemory = fmi2CallbackAllocateMemoryTYPE(calloc)
            self.callbacks.freeMemory = fmi2CallbackFreeMemoryTYPE(free)
            # No fmpy.logging.addLoggerProxy: it keeps the logger in a process-wide global of fmpy's
            # C library, which every later instance with fmpy's default callbacks then calls after
            # this one is freed (a segmentation fault in a later test).  Our FMUs send formatted
            # messages ('%' as "%%"), so the logger needs no formatting.
            self.fmu.instantiate(callbacks=self.callbacks)
        else:
            self.fmu.instantiate(logMessage=lambda env, status, category, message:
                                 self.messages.append(message.decode()))

    def initialize(self) -> None:
        if self.version == 2:
            self.fmu.setupExperiment(startTime=0.0)
            self.fmu.enterInitializationMode()
            self.fmu.exitInitializationMode()
        else:
            self.fmu.enterInitializationMode(startTime=0.0)
            self.fmu.exitInitializationMode()

    def get(self, name: str) -> float:
        vr = [self.vr[name]]
        return (self.fmu.getReal(vr) if self.version == 2 else self.fmu.getFloat64(vr))[0]

    def set(self, name: str, value: float) -> None:
        vr = [self.vr[name]]
        if self.version == 2:
            self.fmu.setReal(vr, [value])
        else:
            self.fmu.setFloat64(vr, [value])


def _variable(path, version: int):
    root = etree.fromstring(zipfile.ZipFile(path).read("modelDescription.xml"))
    found = [v for v in root.find("ModelVariables") if v.get("name") == NAME]
    return root, found


@pytest.mark.parametrize("version", (2, 3))
def test_declared_as_a_tunable_parameter_of_model_exchange(fmus, version):
    path = fmus["slider_crank", version, "both"]
    assert fmpy.validation.validate_fmu(str(path)) == []
    root, found = _variable(path, version)
    assert validate_against_schema(etree.tostring(root), version) == []
    assert root.get("variableNamingConvention") == "flat"  # the dot is part of the name
    (variable,) = found
    typed = variable.find("Real") if version == 2 else variable
    assert (variable.get("causality"), variable.get("variability")) == ("parameter", "tunable")
    assert variable.get("initial") in (None, "exact")
    assert float(typed.get("start")) == DEFAULT
    assert 0.0 < float(typed.get("min")) <= DEFAULT
    assert typed.get("unit") in {u.get("name") for u in root.iter("Unit")}
    assert "Event Mode" in variable.get("description") and "Co-Simulation" in variable.get("description")
    # Nothing depends on it and it is no initial unknown (FMI 2 addresses it by its index,
    # which equals its value reference as for every variable of the export).
    key = variable.get("valueReference")
    if version == 2:
        assert str(list(root.find("ModelVariables")).index(variable) + 1) == key
    for element in root.find("ModelStructure").iter():
        assert key not in (element.get("dependencies") or "").split()
        assert key not in (element.get("index"), element.get("valueReference"))
    assert _variable(fmus["slider_crank", 2, "cs"], 2)[1] == []
    assert _variable(fmus["sdof", 2, "both"], 2)[1] == []


@pytest.mark.parametrize("version", (2, 3))
def test_the_default_is_the_start_value_and_states_keep_it(fmus, version, tmp_path):
    inst = Instance(fmus["slider_crank", version, "both"], version, tmp_path)
    start = float(next(v.start for v in inst.md.modelVariables if v.name == NAME))
    assert inst.get(NAME) == start == DEFAULT
    inst.initialize()
    assert inst.get(NAME) == start
    # A known of the derivatives (FMI 3 lists parameters among them) on which nothing depends.
    unknowns = [inst.vr["der(v.xs)"], inst.vr["slider_acc"]]
    assert list(inst.fmu.getDirectionalDerivative(unknowns, [inst.vr[NAME]], [1.0])) == [0.0, 0.0]
    inst.set(NAME, TIGHT)
    state = inst.fmu.getFMUState() if version == 3 else inst.fmu.getFMUstate()
    inst.set(NAME, LOOSE)
    if version == 2:
        inst.fmu.setFMUstate(state)
    else:
        inst.fmu.setFMUState(state)
    assert inst.get(NAME) == TIGHT
    inst.fmu.reset()
    assert inst.get(NAME) == start


@pytest.mark.parametrize("model_exchange", (True, False))
@pytest.mark.parametrize("version", (2, 3))
def test_a_value_that_is_not_positive_and_finite_is_refused(fmus, version, model_exchange, tmp_path):
    inst = Instance(fmus["slider_crank", version, "both"], version, tmp_path, model_exchange)
    inst.set(NAME, LOOSE)  # the Co-Simulation instance of the FMU with both interfaces keeps it too
    low = float(next(v.min for v in inst.md.modelVariables if v.name == NAME))
    for bad in (0.0, -DEFAULT, math.nan, math.inf, low / 2):
        inst.messages.clear()
        with pytest.raises(FMICallException) as raised:
            inst.set(NAME, bad)
        assert raised.value.status == 3  # fmi2Error / fmi3Error
        assert any(NAME in message and "must be a finite number" in message for message in inst.messages)
        assert inst.get(NAME) == LOOSE


def _violations(path, tolerance: float) -> tuple[int, float]:
    """(events, largest scaled violation of the states the integration carries on from) of a
    CVode run with ``tolerance``: fmpy records the states before and after each event at one
    time; the violation is the FMU's, max|C(q)| / (1 + max|q|), computed from the exposed q."""
    md = fmpy.read_model_description(str(path))
    p = {v.name: float(v.start) for v in md.modelVariables if v.causality == "parameter"}
    res = fmpy.simulate_fmu(str(path), fmi_type="ModelExchange", solver="CVode", relative_tolerance=1e-6,
                            stop_time=1.0, output_interval=0.01, start_values={NAME: tolerance},
                            output=["q.phi", "q.theta", "q.xs"])
    t, phi, theta, xs = res["time"], res["q.phi"], res["q.theta"], res["q.xs"]
    c = np.maximum(np.abs(p["r"] * np.cos(phi) + p["l"] * np.cos(theta) - xs),
                   np.abs(p["r"] * np.sin(phi) + p["l"] * np.sin(theta)))
    scaled = c / (1.0 + np.abs(np.column_stack([phi, theta, xs])).max(axis=1))
    carried = np.append(np.diff(t) > 0, True)  # the last row of each time: after its event
    return int(np.sum(~carried)), float(scaled[carried].max())


@pytest.mark.parametrize("version", (2, 3))
def test_a_tighter_tolerance_projects_more_and_drifts_less(fmus, version):
    path = fmus["slider_crank", version, "both"]
    loose_events, loose = _violations(path, LOOSE)
    tight_events, tight = _violations(path, TIGHT)
    assert tight_events > loose_events
    assert tight < loose
    assert loose <= LOOSE and tight <= TIGHT


def test_apply_rebuilds_the_fmu_with_its_drift_tolerance(fmus, tmp_path):
    from fmi_adjoint.fmu.archive import open_fmu
    from fmi_adjoint.fmu.rebuild import rebuild_fmu

    with open_fmu(fmus["slider_crank", 2, "both"]) as archive:
        rebuilt = rebuild_fmu(archive, {"c_s": 600.0, NAME: TIGHT}, tmp_path / "rebuilt.fmu")
    assert rebuilt.values["c_s"] == 600.0 and NAME not in rebuilt.values
    (variable,) = _variable(rebuilt.path, 2)[1]
    assert float(variable.find("Real").get("start")) == TIGHT
    with open_fmu(rebuilt.path) as archive:
        assert archive.native is not None, archive.native_distrust
