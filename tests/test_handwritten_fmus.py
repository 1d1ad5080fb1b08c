"""The hand-written FMUs of ``fmus/`` (FMUs of another origin than the exporter).

* fmpy's validation accepts both and reads the expected variables;
* the Van der Pol FMI 2.0 Model Exchange FMU, run by fmpy (CVode), equals scipy's solution
  of the same ODE with a piecewise-constant input u;
* its directional derivatives (states, u, mu; x0_start and x1_start in Initialization
  Mode) equal central finite differences, and ``-DFA_WRONG_DERIVATIVE_MU`` makes the mu
  column 10 % wrong and nothing else;
* the Van der Pol FMI 3.0 Model Exchange FMU (the same model; fmus/van_der_pol_me3) exports
  every FMI 3.0 function, equals scipy like the FMI 2.0 one, and its directional derivatives
  (Continuous-Time and Initialization Mode) equal central finite differences;
* the Duffing FMI 3.0 Co-Simulation FMU shows the fourth order of its RK4 solver against
  scipy, its doStep takes whole internal steps and one partial step (equal to RK4 written
  again in Python), a tunable parameter set in Step Mode changes the trajectory from the
  next step on, a fixed one is refused;
* FMU state get/set (and serialization) reproduces the continuation for both.

Only fmpy's default logger is used (a custom FMI 2 logger callback has crashed fmpy when a
second FMI 2 FMU was loaded in the same process).
"""

from __future__ import annotations

import ctypes
import math
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
import zipfile

import fmpy
import fmpy.validation
import numpy as np
import pytest
from fmpy.fmi1 import FMICallException
from fmpy.fmi2 import FMU2Model
from fmpy.fmi3 import FMU3Model, FMU3Slave
from scipy.integrate import solve_ivp

from fmi_adjoint.toolchain import c_compiler
from handwritten_fmus import FMUS_DIR, build_fmu, fmi_headers_dir
from tolerances import CROSS_IMPLEMENTATION, EXACT, GRADIENT_VS_FD, ORDER

if c_compiler() is None:
    pytest.skip("no C compiler: the hand-written FMUs cannot be built", allow_module_level=True)


WRONG_MU = "FA_WRONG_DERIVATIVE_MU"

# value references (see fmus/README.md)
VDP = {"x0": 0, "der(x0)": 1, "x1": 2, "der(x1)": 3, "mu": 4, "x0_start": 5, "x1_start": 6, "u": 7}
VDP3 = {**VDP, "time": 8}  # the FMI 3.0 version: the same references plus the independent variable
DUFFING = {"time": 0, "x": 1, "v": 2, "F": 3, "delta": 4, "alpha": 5, "beta": 6, "gamma": 7, "omega": 8,
           "x_start": 9, "v_start": 10, "h_internal": 11}
DUFFING_DEFAULTS = {"delta": 0.2, "alpha": 1.0, "beta": 5.0, "gamma": 0.5, "omega": 1.2, "x_start": 1.0,
                    "v_start": 0.0, "h_internal": 1e-3}


@pytest.fixture(scope="module")
def fmu_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("handwritten_fmus")


@pytest.fixture(scope="module")
def vdp(fmu_dir):
    return build_fmu("van_der_pol_me", fmu_dir)


@pytest.fixture(scope="module")
def vdp_wrong(fmu_dir):
    return build_fmu("van_der_pol_me", fmu_dir, (WRONG_MU,))


@pytest.fixture(scope="module")
def vdp3(fmu_dir):
    return build_fmu("van_der_pol_me3", fmu_dir)


@pytest.fixture(scope="module")
def duffing(fmu_dir):
    return build_fmu("duffing_cs", fmu_dir)


# ------------------------------------------------------------------ helpers


class _Opened:
    """An fmpy low-level instance of an FMU (default logger) that is freed on exit."""

    def __init__(self, path, tmp):
        self.md = fmpy.read_model_description(str(path))
        self.unzip = fmpy.extract(str(path), unzipdir=str(tmp))
        if self.md.fmiVersion == "2.0":
            self.fmu = FMU2Model(guid=self.md.guid, unzipDirectory=self.unzip,
                                 modelIdentifier=self.md.modelExchange.modelIdentifier, instanceName="vdp")
        elif self.md.modelExchange is not None:
            self.fmu = FMU3Model(guid=self.md.guid, unzipDirectory=self.unzip,
                                 modelIdentifier=self.md.modelExchange.modelIdentifier, instanceName="vdp3")
        else:
            self.fmu = FMU3Slave(guid=self.md.guid, unzipDirectory=self.unzip,
                                 modelIdentifier=self.md.coSimulation.modelIdentifier, instanceName="duffing")
        self.fmu.instantiate()

    def __enter__(self):
        return self.fmu

    def __exit__(self, *exc):
        self.fmu.freeInstance()
        self.fmu.freeLibrary()
        shutil.rmtree(self.unzip, ignore_errors=True)


class _Fmi2Calls:
    """The FMI 2.0 calls of the Van der Pol helpers below, mapped onto an FMI 3.0 Model Exchange
    instance, so that both FMUs go through the same checks.  Calls named alike in FMI 2.0 and
    3.0 (exitInitializationMode, enterEventMode, enterContinuousTimeMode, setContinuousStates,
    getDirectionalDerivative, terminate) pass through."""

    def __init__(self, fmu: FMU3Model):
        self.fmu = fmu
        self._start_time = 0.0

    def setupExperiment(self, startTime=0.0):
        self._start_time = startTime  # FMI 3.0 passes it to fmi3EnterInitializationMode

    def enterInitializationMode(self):
        self.fmu.enterInitializationMode(startTime=self._start_time)

    def setReal(self, vr, values):
        self.fmu.setFloat64(vr, values)

    def getReal(self, vr):
        return self.fmu.getFloat64(vr)

    def getDerivatives(self, derivatives, n):
        self.fmu.getContinuousStateDerivatives(derivatives, n)

    def newDiscreteStates(self):
        return self.fmu.updateDiscreteStates()

    def __getattr__(self, name):
        return getattr(self.fmu, name)


def _vdp_rhs(x, mu, u):
    return np.array([x[1], mu * (1.0 - x[0] ** 2) * x[1] - x[0] + u])


def _set_states(fmu, x):
    fmu.setContinuousStates((ctypes.c_double * 2)(*x), 2)


def _derivatives(fmu):
    dx = (ctypes.c_double * 2)()
    fmu.getDerivatives(dx, 2)
    return np.array(dx[:])


def _vdp_in_continuous_time_mode(fmu, mu=1.0):
    fmu.setupExperiment(startTime=0.0)
    fmu.setReal([VDP["mu"]], [mu])
    fmu.enterInitializationMode()
    fmu.exitInitializationMode()
    fmu.newDiscreteStates()
    fmu.enterContinuousTimeMode()


def _set_mu(fmu, mu):
    """mu is tunable: FMI 2.0 allows changing it in Event Mode, not in Continuous-Time Mode."""
    fmu.enterEventMode()
    fmu.setReal([VDP["mu"]], [mu])
    fmu.newDiscreteStates()
    fmu.enterContinuousTimeMode()


def _vdp_columns_fd(fmu, x, mu, u, eps=1e-6):
    """Central differences of der(x0), der(x1) w.r.t. x0, x1, u and mu (exact up to round-off:
    the right-hand side is a polynomial of degree <= 2 in each of them)."""
    columns = {}
    for i, name in enumerate(("x0", "x1")):
        plus, minus = np.array(x, float), np.array(x, float)
        plus[i] += eps
        minus[i] -= eps
        _set_states(fmu, plus)
        f_plus = _derivatives(fmu)
        _set_states(fmu, minus)
        columns[name] = (f_plus - _derivatives(fmu)) / (2 * eps)
    _set_states(fmu, x)
    fmu.setReal([VDP["u"]], [u + eps])
    f_plus = _derivatives(fmu)
    fmu.setReal([VDP["u"]], [u - eps])
    columns["u"] = (f_plus - _derivatives(fmu)) / (2 * eps)
    fmu.setReal([VDP["u"]], [u])
    _set_mu(fmu, mu + eps)
    _set_states(fmu, x)
    f_plus = _derivatives(fmu)
    _set_mu(fmu, mu - eps)
    _set_states(fmu, x)
    columns["mu"] = (f_plus - _derivatives(fmu)) / (2 * eps)
    _set_mu(fmu, mu)
    _set_states(fmu, x)
    return columns


def _vdp_columns_ad(fmu):
    unknowns = [VDP["der(x0)"], VDP["der(x1)"]]
    return {name: np.array(fmu.getDirectionalDerivative(unknowns, [VDP[name]], [1.0]))
            for name in ("x0", "x1", "u", "mu")}


def _relative_error(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def _duffing_rhs(p, F):
    def rhs(t, y):
        x, v = y
        return [v, -p["delta"] * v - p["alpha"] * x - p["beta"] * x ** 3 + p["gamma"] * math.cos(p["omega"] * t) + F]
    return rhs


def _rk4_python(p, y, t0, H, F):
    """RK4 with the step rule documented in duffing.c: whole steps of h from t0, then the rest."""
    h, rhs = p["h_internal"], _duffing_rhs(p, F)
    t1, t, k = t0 + H, t0, 0
    y = list(y)

    def step(t, y, s):
        k1 = rhs(t, y)
        k2 = rhs(t + 0.5 * s, [y[i] + 0.5 * s * k1[i] for i in range(2)])
        k3 = rhs(t + 0.5 * s, [y[i] + 0.5 * s * k2[i] for i in range(2)])
        k4 = rhs(t + s, [y[i] + s * k3[i] for i in range(2)])
        return [y[i] + s / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]) for i in range(2)]

    while t1 - t > h * (1.0 + 1e-9):
        y = step(t, y, h)
        k += 1
        t = t0 + k * h
    if t1 > t:
        y = step(t, y, t1 - t)
    return y


# piecewise-constant input force (jumps at t = 2 and t = 5), as fmpy input signal
_F_SIGNAL = np.array([(0.0, 0.0), (2.0, 0.0), (2.0, 0.5), (5.0, 0.5), (5.0, -0.3), (8.0, -0.3)],
                     dtype=[("time", np.float64), ("F", np.float64)])
_F_PIECES = [(0.0, 2.0, 0.0), (2.0, 5.0, 0.5), (5.0, 8.0, -0.3)]


def _piecewise_reference(rhs_for, pieces, y0, t, rtol=1e-12):
    """scipy DOP853 (rtol = atol) through pieces (a, b, input value), sampled at t."""
    y, out = np.asarray(y0, float), []
    for i, (a, b, value) in enumerate(pieces):
        last = i == len(pieces) - 1
        sel = t[(t >= a) & ((t < b) | last)]
        b = max(b, t[-1]) if last else b
        sol = solve_ivp(rhs_for(value), (a, b), y, method="DOP853", rtol=rtol, atol=rtol,
                        t_eval=np.union1d(sel, [b]))
        out.append(sol.y[:, np.isin(sol.t, sel)])
        y = sol.y[:, -1]
    return np.hstack(out).T


def _duffing_reference(t, p=DUFFING_DEFAULTS, rtol=1e-12):
    return _piecewise_reference(lambda F: _duffing_rhs(p, F), _F_PIECES, [p["x_start"], p["v_start"]], t, rtol)


def _simulate_duffing(path, h_internal, step):
    result = fmpy.simulate_fmu(str(path), stop_time=8.0, output_interval=step, input=_F_SIGNAL,
                               start_values={"h_internal": h_internal}, output=["x", "v"])
    return result["time"], np.column_stack([result["x"], result["v"]])


# ------------------------------------------------------------------ both FMUs


def test_sources_compile_without_warnings(tmp_path):
    for name, defines in (("van_der_pol_me", ()), ("van_der_pol_me", (WRONG_MU,)), ("van_der_pol_me3", ()),
                          ("duffing_cs", ())):
        for source in (FMUS_DIR / name).glob("*.c"):
            command = [c_compiler(), "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-fsyntax-only",
                       f"-I{fmi_headers_dir()}", *(f"-D{d}" for d in defines), str(source)]
            result = subprocess.run(command, capture_output=True, text=True)
            assert result.returncode == 0, result.stderr


def test_fmpy_validates_and_reads_both(vdp, vdp_wrong, duffing):
    for path in (vdp, vdp_wrong, duffing):
        assert fmpy.validation.validate_fmu(str(path)) == []

    md = fmpy.read_model_description(str(vdp))
    assert md.fmiVersion == "2.0" and md.modelExchange.modelIdentifier == "van_der_pol"
    assert md.coSimulation is None and md.modelExchange.providesDirectionalDerivative
    assert md.numberOfEventIndicators == 0
    found = {v.name: (v.valueReference, v.causality, v.variability, v.start) for v in md.modelVariables}
    assert found == {
        "x0": (0, "output", "continuous", None), "der(x0)": (1, "local", "continuous", None),
        "x1": (2, "output", "continuous", None), "der(x1)": (3, "local", "continuous", None),
        "mu": (4, "parameter", "tunable", "1.0"), "x0_start": (5, "parameter", "fixed", "2.0"),
        "x1_start": (6, "parameter", "fixed", "0.0"), "u": (7, "input", "continuous", "0.0"),
    }
    derivatives = [(d.variable.name, d.variable.derivative.name) for d in md.derivatives]
    assert derivatives == [("der(x0)", "x0"), ("der(x1)", "x1")]
    assert [o.variable.name for o in md.outputs] == ["x0", "x1"]

    md = fmpy.read_model_description(str(duffing))
    assert md.fmiVersion == "3.0" and md.coSimulation.modelIdentifier == "duffing" and md.modelExchange is None
    assert not md.coSimulation.providesDirectionalDerivative
    found = {v.name: (v.valueReference, v.causality, v.variability, v.type) for v in md.modelVariables}
    expected_parameters = {name: (DUFFING[name], "parameter", "tunable" if name == "delta" else "fixed", "Float64")
                           for name in DUFFING_DEFAULTS}
    assert found == {"time": (0, "independent", "continuous", "Float64"), "x": (1, "output", "continuous", "Float64"),
                     "v": (2, "output", "continuous", "Float64"), "F": (3, "input", "continuous", "Float64"),
                     **expected_parameters}
    assert {v.name: float(v.start) for v in md.modelVariables if v.name in DUFFING_DEFAULTS} == DUFFING_DEFAULTS


# ------------------------------------------------------------------ Van der Pol (FMI 2.0 ME)


def _van_der_pol_against_scipy(path, label):
    """fmpy/CVode (rtol 1e-10) against scipy DOP853 (rtol 1e-12) with a piecewise-constant u."""
    mu, x0, x1 = 1.3, 1.5, -0.5
    pieces = [(0.0, 3.0, 0.0), (3.0, 6.0, 0.5), (6.0, 10.0, -0.5)]
    signal = np.array([(0.0, 0.0), (3.0, 0.0), (3.0, 0.5), (6.0, 0.5), (6.0, -0.5), (10.0, -0.5)],
                      dtype=[("time", np.float64), ("u", np.float64)])
    result = fmpy.simulate_fmu(str(path), solver="CVode", stop_time=10.0, relative_tolerance=1e-10,
                               output_interval=0.05, input=signal, output=["x0", "x1"], record_events=False,
                               start_values={"mu": mu, "x0_start": x0, "x1_start": x1})
    t = result["time"]
    assert t[0] == 0.0 and math.isclose(t[-1], 10.0) and len(t) >= 200

    reference = _piecewise_reference(lambda u: (lambda _, y: _vdp_rhs(y, mu, u)), pieces, [x0, x1], t).T
    for i, name in enumerate(("x0", "x1")):
        error = _relative_error(result[name], reference[i])
        print(f"\n{label} {name}: fmpy/CVode vs scipy DOP853 relative error {error:.2e}")
        assert error < CROSS_IMPLEMENTATION, name
    # the input matters: without it the end point is elsewhere
    free = solve_ivp(lambda _, y: _vdp_rhs(y, mu, 0.0), (0, 10), [x0, x1], method="DOP853", rtol=1e-12, atol=1e-12)
    assert abs(free.y[0, -1] - result["x0"][-1]) > 1e3 * CROSS_IMPLEMENTATION
    return result


def test_van_der_pol_equals_scipy_with_an_input(vdp):
    _van_der_pol_against_scipy(vdp, "van der Pol")


def test_van_der_pol_directional_derivatives_equal_finite_differences(vdp, vdp_wrong, tmp_path):
    rng = np.random.default_rng(6)
    points = [(rng.uniform(-2.5, 2.5, 2), rng.uniform(0.3, 3.0), rng.uniform(-1.0, 1.0)) for _ in range(4)]
    for path, factor in ((vdp, 1.0), (vdp_wrong, 1.1)):
        with _Opened(path, tmp_path / path.stem) as fmu:
            _vdp_in_continuous_time_mode(fmu)
            for x, mu, u in points:
                _set_mu(fmu, mu)
                _set_states(fmu, x)
                fmu.setReal([VDP["u"]], [u])
                fd = _vdp_columns_fd(fmu, x, mu, u)
                ad = _vdp_columns_ad(fmu)
                # the exact derivative, written out, as a check of the finite differences
                exact = {"x0": [0.0, -2 * mu * x[0] * x[1] - 1.0], "x1": [1.0, mu * (1 - x[0] ** 2)],
                         "u": [0.0, 1.0], "mu": [0.0, (1 - x[0] ** 2) * x[1]]}
                for name in ("x0", "x1", "u"):
                    assert _relative_error(fd[name], exact[name]) < GRADIENT_VS_FD, name
                    assert _relative_error(ad[name], fd[name]) < GRADIENT_VS_FD, name
                assert _relative_error(fd["mu"], exact["mu"]) < GRADIENT_VS_FD
                assert _relative_error(ad["mu"], factor * fd["mu"]) < GRADIENT_VS_FD
                if factor != 1.0:
                    assert _relative_error(ad["mu"], fd["mu"]) > 0.09  # detectably wrong
                # outputs = states; x0_start and x1_start do not enter once the states are free
                states = [VDP["x0"], VDP["x1"]]
                assert fmu.getDirectionalDerivative(states, states, [0.3, -0.7]) == [0.3, -0.7]
                assert fmu.getDirectionalDerivative([VDP["der(x0)"], VDP["der(x1)"], VDP["x0"]],
                                                    [VDP["x0_start"], VDP["x1_start"]], [1.0, 1.0]) == [0.0, 0.0, 0.0]
                # linearity: a combined seed is the combination of the columns
                knowns = [VDP["x0"], VDP["x1"], VDP["u"], VDP["mu"]]
                combined = fmu.getDirectionalDerivative([VDP["der(x0)"], VDP["der(x1)"]], knowns,
                                                        [0.5, -2.0, 3.0, 0.25])
                expected = 0.5 * ad["x0"] - 2.0 * ad["x1"] + 3.0 * ad["u"] + 0.25 * ad["mu"]
                assert _relative_error(combined, expected) < EXACT
            # a known that is not one is refused (fmpy raises on fmi2Error)
            with pytest.raises(FMICallException):
                fmu.getDirectionalDerivative([VDP["der(x1)"]], [VDP["der(x0)"]], [1.0])
            with pytest.raises(FMICallException):
                fmu.getDirectionalDerivative([VDP["mu"]], [VDP["x0"]], [1.0])


def test_van_der_pol_initialization_derivatives_wrt_start_values(vdp, tmp_path):
    unknowns = [VDP["x0"], VDP["x1"], VDP["der(x0)"], VDP["der(x1)"]]
    with _Opened(vdp, tmp_path / "vdp") as fmu:
        fmu.setupExperiment(startTime=0.0)
        fmu.enterInitializationMode()
        start = {"mu": 0.8, "x0_start": 1.2, "x1_start": -0.4, "u": 0.3}
        fmu.setReal([VDP[k] for k in start], list(start.values()))
        eps = 1e-6
        for name in ("x0_start", "x1_start", "mu", "u"):
            ad = fmu.getDirectionalDerivative(unknowns, [VDP[name]], [1.0])
            fmu.setReal([VDP[name]], [start[name] + eps])
            plus = np.array(fmu.getReal(unknowns))
            fmu.setReal([VDP[name]], [start[name] - eps])
            minus = np.array(fmu.getReal(unknowns))
            fmu.setReal([VDP[name]], [start[name]])
            fd = (plus - minus) / (2 * eps)
            assert np.max(np.abs(np.array(ad) - fd)) < GRADIENT_VS_FD * max(1.0, np.max(np.abs(fd))), name
        # the states are unknowns during initialization: not accepted as knowns
        with pytest.raises(FMICallException):
            fmu.getDirectionalDerivative(unknowns, [VDP["x0"]], [1.0])
        fmu.exitInitializationMode()
        assert fmu.getReal([VDP["x0"], VDP["x1"]]) == [1.2, -0.4]


def test_van_der_pol_parameter_rules_and_fmu_state(vdp, tmp_path):
    with _Opened(vdp, tmp_path / "vdp") as fmu:
        _vdp_in_continuous_time_mode(fmu)
        # fixed parameters after initialization, tunable mu outside Event Mode, calculated variables
        for vr in (VDP["x0_start"], VDP["x1_start"], VDP["mu"], VDP["x0"], VDP["der(x1)"], 99):
            with pytest.raises(FMICallException):
                fmu.setReal([vr], [0.5])
        assert fmu.getReal([VDP["mu"], VDP["x0_start"]]) == [1.0, 2.0]
        _set_mu(fmu, 0.5)
        assert fmu.getReal([VDP["mu"]]) == [0.5]

        _set_states(fmu, [0.7, -0.2])
        fmu.setReal([VDP["u"]], [0.1])
        state = fmu.getFMUstate()
        before = _derivatives(fmu)
        serialized = fmu.serializeFMUstate(state)
        _set_mu(fmu, 2.0)
        _set_states(fmu, [-1.0, 1.0])
        fmu.setReal([VDP["u"]], [-3.0])
        assert not np.array_equal(_derivatives(fmu), before)
        fmu.setFMUstate(state)
        assert np.array_equal(_derivatives(fmu), before)
        _set_states(fmu, [-1.0, 1.0])
        restored = fmu.deSerializeFMUstate(serialized)
        fmu.setFMUstate(restored)
        assert np.array_equal(_derivatives(fmu), before)
        assert fmu.getReal([VDP["x0"], VDP["x1"], VDP["mu"], VDP["u"]]) == [0.7, -0.2, 0.5, 0.1]
        fmu.freeFMUstate(restored)
        fmu.freeFMUstate(state)
        fmu.terminate()
        with pytest.raises(FMICallException):
            _set_states(fmu, [0.0, 0.0])


# ------------------------------------------------------------------ Van der Pol (FMI 3.0 ME)


def _fmi3_exported_functions() -> list[str]:
    """The names of all functions that fmi3Functions.h declares for export."""
    header = (fmi_headers_dir() / "fmi3Functions.h").read_text(encoding="utf-8")
    names = re.findall(r"^FMI3_Export\s+\w+TYPE\s+(fmi3\w+);", header, flags=re.MULTILINE)
    assert len(names) > 70, names  # the whole API, not a parsing accident
    return names


def test_van_der_pol_fmi3_validates_reads_and_exports_every_function(vdp3, tmp_path):
    assert fmpy.validation.validate_fmu(str(vdp3)) == []
    md = fmpy.read_model_description(str(vdp3))
    assert md.fmiVersion == "3.0" and md.modelExchange.modelIdentifier == "van_der_pol3" and md.coSimulation is None
    assert md.numberOfEventIndicators == 0 and md.eventIndicators == []
    found = {v.name: (v.valueReference, v.causality, v.variability, v.type, v.start) for v in md.modelVariables}
    assert found == {
        "time": (8, "independent", "continuous", "Float64", None),
        "x0": (0, "output", "continuous", "Float64", None), "der(x0)": (1, "local", "continuous", "Float64", None),
        "x1": (2, "output", "continuous", "Float64", None), "der(x1)": (3, "local", "continuous", "Float64", None),
        "mu": (4, "parameter", "tunable", "Float64", "1.0"), "x0_start": (5, "parameter", "fixed", "Float64", "2.0"),
        "x1_start": (6, "parameter", "fixed", "Float64", "0.0"), "u": (7, "input", "continuous", "Float64", "0.0"),
    }
    assert {name: VDP3[name] for name in found} == {name: value[0] for name, value in found.items()}
    derivatives = [(d.variable.name, d.variable.derivative.name) for d in md.derivatives]
    assert derivatives == [("der(x0)", "x0"), ("der(x1)", "x1")]
    assert [o.variable.name for o in md.outputs] == ["x0", "x1"]

    with zipfile.ZipFile(vdp3) as archive:
        assert "binaries/x86_64-linux/van_der_pol3.so" in archive.namelist()
        me = ET.fromstring(archive.read("modelDescription.xml")).find("ModelExchange")
        archive.extract("binaries/x86_64-linux/van_der_pol3.so", tmp_path)
    # fmpy 0.3.32 keeps only the FMI 2.0 spelling providesDirectionalDerivative on its interface
    # objects and drops the FMI 3.0 attribute, so the flag is read from the XML here.
    assert me.get("providesDirectionalDerivatives") == "true"
    assert me.get("providesAdjointDerivatives") == "false"
    assert me.get("canGetAndSetFMUState") == me.get("canSerializeFMUState") == "true"

    library = ctypes.CDLL(str(tmp_path / "binaries" / "x86_64-linux" / "van_der_pol3.so"))
    missing = [name for name in _fmi3_exported_functions() if not hasattr(library, name)]
    assert missing == []


def test_van_der_pol_fmi3_equals_scipy_with_an_input(vdp3, vdp):
    fmi3 = _van_der_pol_against_scipy(vdp3, "van der Pol FMI 3.0")
    # fmpy drives the FMI 2.0 and the FMI 3.0 FMU with the same CVode settings on the same equations
    fmi2 = _van_der_pol_against_scipy(vdp, "van der Pol FMI 2.0")
    for name in ("x0", "x1"):
        assert _relative_error(fmi3[name], fmi2[name]) < CROSS_IMPLEMENTATION, name


def test_van_der_pol_fmi3_directional_derivatives_equal_finite_differences(vdp3, tmp_path):
    rng = np.random.default_rng(7)
    points = [(rng.uniform(-2.5, 2.5, 2), rng.uniform(0.3, 3.0), rng.uniform(-1.0, 1.0)) for _ in range(4)]
    with _Opened(vdp3, tmp_path / "vdp3") as raw:
        fmu = _Fmi2Calls(raw)
        _vdp_in_continuous_time_mode(fmu)
        for x, mu, u in points:
            _set_mu(fmu, mu)
            raw.setTime(3.0)
            _set_states(fmu, x)
            raw.setFloat64([VDP3["u"]], [u])
            fd = _vdp_columns_fd(fmu, x, mu, u)
            ad = _vdp_columns_ad(fmu)
            exact = {"x0": [0.0, -2 * mu * x[0] * x[1] - 1.0], "x1": [1.0, mu * (1 - x[0] ** 2)],
                     "u": [0.0, 1.0], "mu": [0.0, (1 - x[0] ** 2) * x[1]]}
            for name in ("x0", "x1", "u", "mu"):
                assert _relative_error(fd[name], exact[name]) < GRADIENT_VS_FD, name
                assert _relative_error(ad[name], fd[name]) < GRADIENT_VS_FD, name
            states = [VDP3["x0"], VDP3["x1"]]
            assert raw.getDirectionalDerivative(states, states, [0.3, -0.7]) == [0.3, -0.7]
            # x0_start and x1_start do not enter once the states are free; the model is autonomous
            unknowns = [VDP3["der(x0)"], VDP3["der(x1)"], VDP3["x0"]]
            for known in ("x0_start", "x1_start", "time"):
                assert raw.getDirectionalDerivative(unknowns, [VDP3[known]], [1.0]) == [0.0, 0.0, 0.0], known
            knowns = [VDP3["x0"], VDP3["x1"], VDP3["u"], VDP3["mu"]]
            combined = raw.getDirectionalDerivative([VDP3["der(x0)"], VDP3["der(x1)"]], knowns, [0.5, -2.0, 3.0, 0.25])
            expected = 0.5 * ad["x0"] - 2.0 * ad["x1"] + 3.0 * ad["u"] + 0.25 * ad["mu"]
            assert _relative_error(combined, expected) < EXACT
        for unknowns, knowns in (([VDP3["der(x1)"]], [VDP3["der(x0)"]]), ([VDP3["mu"]], [VDP3["x0"]]),
                                 ([VDP3["time"]], [VDP3["x0"]])):
            with pytest.raises(FMICallException):
                raw.getDirectionalDerivative(unknowns, knowns, [1.0])
        # fmi3GetDirectionalDerivative checks nSeed = nKnowns (fmpy always passes them equal)
        vr = (ctypes.c_uint32 * 1)(VDP3["der(x1)"])
        seed, sensitivity = (ctypes.c_double * 2)(1.0, 1.0), (ctypes.c_double * 1)()
        with pytest.raises(FMICallException):
            raw.fmi3GetDirectionalDerivative(raw.component, vr, 1, vr, 1, seed, 2, sensitivity, 1)
        # fmpy reports it as not provided (see above), but the FMU has no adjoint derivatives indeed
        with pytest.raises(FMICallException):
            raw.getAdjointDerivative([VDP3["der(x1)"]], [VDP3["x0"]], [1.0])


def test_van_der_pol_fmi3_initialization_derivatives_wrt_start_values(vdp3, tmp_path):
    unknowns = [VDP3["x0"], VDP3["x1"], VDP3["der(x0)"], VDP3["der(x1)"]]
    with _Opened(vdp3, tmp_path / "vdp3") as fmu:
        fmu.enterInitializationMode(startTime=0.5)
        start = {"mu": 0.8, "x0_start": 1.2, "x1_start": -0.4, "u": 0.3}
        fmu.setFloat64([VDP3[k] for k in start], list(start.values()))
        eps = 1e-6
        for name in ("x0_start", "x1_start", "mu", "u"):
            ad = fmu.getDirectionalDerivative(unknowns, [VDP3[name]], [1.0])
            fmu.setFloat64([VDP3[name]], [start[name] + eps])
            plus = np.array(fmu.getFloat64(unknowns))
            fmu.setFloat64([VDP3[name]], [start[name] - eps])
            minus = np.array(fmu.getFloat64(unknowns))
            fmu.setFloat64([VDP3[name]], [start[name]])
            fd = (plus - minus) / (2 * eps)
            assert np.max(np.abs(np.array(ad) - fd)) < GRADIENT_VS_FD * max(1.0, np.max(np.abs(fd))), name
        with pytest.raises(FMICallException):  # the states are unknowns during initialization
            fmu.getDirectionalDerivative(unknowns, [VDP3["x0"]], [1.0])
        fmu.exitInitializationMode()
        assert fmu.getFloat64([VDP3["x0"], VDP3["x1"], VDP3["time"]]) == [1.2, -0.4, 0.5]


def test_van_der_pol_fmi3_modes_parameters_fmu_state_and_unsupported_functions(vdp3, tmp_path):
    with _Opened(vdp3, tmp_path / "vdp3") as fmu:
        assert fmu.getNumberOfContinuousStates() == 2 and fmu.getNumberOfEventIndicators() == 0
        fmu.enterInitializationMode(startTime=0.0)
        fmu.exitInitializationMode()  # Model Exchange: now in Event Mode
        assert fmu.updateDiscreteStates() == (False, False, False, False, False, 0.0)
        fmu.enterContinuousTimeMode()
        assert fmu.completedIntegratorStep() == (False, False)
        fmu.getEventIndicators((ctypes.c_double * 1)(), 0)
        nominals = (ctypes.c_double * 2)()
        fmu.getNominalsOfContinuousStates(nominals, 2)
        assert nominals[:] == [1.0, 1.0]
        # fixed parameters after initialization, tunable mu outside Event Mode, calculated and independent
        for vr in (VDP3["x0_start"], VDP3["x1_start"], VDP3["mu"], VDP3["x0"], VDP3["der(x1)"], VDP3["time"], 99):
            with pytest.raises(FMICallException):
                fmu.setFloat64([vr], [0.5])
        assert fmu.getFloat64([VDP3["mu"], VDP3["x0_start"]]) == [1.0, 2.0]
        fmu.enterEventMode()
        fmu.setFloat64([VDP3["mu"]], [0.5])
        fmu.updateDiscreteStates()
        fmu.enterContinuousTimeMode()

        fmu.setTime(1.25)
        _set_states(fmu, [0.7, -0.2])
        fmu.setFloat64([VDP3["u"]], [0.1])
        before = fmu.getFloat64([VDP3["der(x0)"], VDP3["der(x1)"], VDP3["time"]])
        assert before == [-0.2, 0.5 * (1 - 0.49) * -0.2 - 0.7 + 0.1, 1.25]
        state = fmu.getFMUState()
        serialized = fmu.serializeFMUState(state)
        fmu.setTime(2.0)
        _set_states(fmu, [-1.0, 1.0])
        fmu.setFloat64([VDP3["u"]], [-3.0])
        assert fmu.getFloat64([VDP3["der(x0)"], VDP3["der(x1)"], VDP3["time"]]) != before
        fmu.setFMUState(state)
        assert fmu.getFloat64([VDP3["der(x0)"], VDP3["der(x1)"], VDP3["time"]]) == before
        _set_states(fmu, [-1.0, 1.0])
        restored = fmu.deserializeFMUState(serialized)
        fmu.setFMUState(restored)
        assert fmu.getFloat64([VDP3["der(x0)"], VDP3["der(x1)"], VDP3["time"]]) == before
        fmu.freeFMUState(restored)
        fmu.freeFMUState(state)

        # functions that do not apply to this FMU return fmi3Error
        c = fmu.component
        for call in (lambda: fmu.fmi3EnterStepMode(c), lambda: fmu.fmi3EvaluateDiscreteStates(c),
                     lambda: fmu.fmi3EnterConfigurationMode(c), lambda: fmu.getInt32([0]),
                     # (fmpy's getNumberOfVariableDependencies wrapper is broken: call the function)
                     lambda: fmu.fmi3GetNumberOfVariableDependencies(c, VDP3["der(x1)"],
                                                                     ctypes.byref(ctypes.c_size_t()))):
            with pytest.raises(FMICallException):
                call()
        fmu.terminate()
        with pytest.raises(FMICallException):
            _set_states(fmu, [0.0, 0.0])
        fmu.reset()  # back to Instantiated: start values again
        assert fmu.getFloat64([VDP3["mu"], VDP3["x0"], VDP3["x1"]]) == [1.0, 2.0, 0.0]
    # Co-Simulation is refused at instantiation
    md = fmpy.read_model_description(str(vdp3))
    unzip = fmpy.extract(str(vdp3), unzipdir=str(tmp_path / "cs"))
    slave = FMU3Slave(guid=md.guid, unzipDirectory=unzip, modelIdentifier="van_der_pol3", instanceName="cs")
    with pytest.raises(Exception, match="instantiate"):
        slave.instantiate()
    slave.freeLibrary()


# ------------------------------------------------------------------ Duffing (FMI 3.0 CS)


def test_duffing_rk4_order_against_scipy(duffing):
    """Errors of the internal RK4 at h, h/2, h/4 (communication step a multiple of h) fall
    with order 4; the default h = 1e-3 with a communication step of 2.5 h (two whole and one
    half internal step) stays within the error this order predicts."""
    step = 0.1
    errors = {}
    for h in (0.05, 0.025, 0.0125):
        t, y = _simulate_duffing(duffing, h, step)
        errors[h] = _relative_error(y, _duffing_reference(t))
    orders = [math.log2(errors[0.05] / errors[0.025]), math.log2(errors[0.025] / errors[0.0125])]
    assert all(abs(p - 4.0) < ORDER for p in orders), (errors, orders)
    constant = errors[0.0125] / 0.0125 ** 4

    # partial last internal steps: communication step 0.025 = 2.5 h with h = 0.01
    t, y = _simulate_duffing(duffing, 0.01, 0.025)
    assert math.isclose(t[-1], 8.0) and len(t) == 321
    partial = _relative_error(y, _duffing_reference(t))
    assert partial < 2.0 * constant * 0.01 ** 4, (partial, constant)

    # the default: h = 1e-3, communication step 0.0025.  The error RK4 allows there (~1e-12) is
    # as small as the reference's own, so the reference is tightened (rtol 1e-13) and its
    # error, estimated as its distance to the rtol 1e-12 solution, is added to the bound
    t, y = _simulate_duffing(duffing, 1e-3, 0.0025)
    reference = _duffing_reference(t, rtol=1e-13)
    reference_error = _relative_error(_duffing_reference(t), reference)
    default = _relative_error(y, reference)
    assert default < 2.0 * constant * 1e-3 ** 4 + reference_error, (default, constant, reference_error)
    print(f"\nduffing RK4 errors {errors}, orders {orders}, partial {partial:.3e}, "
          f"default {default:.3e} (reference error {reference_error:.1e})")


def test_duffing_do_step_equals_rk4_written_in_python(duffing, tmp_path):
    """doStep with steps of 2.5 h (h, h, h/2), 1.0 h, 0.3 h and 3 h equals RK4 with the documented
    step rule; a tunable delta set between steps acts from the next step on."""
    p = dict(DUFFING_DEFAULTS, x_start=0.8, v_start=0.3, h_internal=0.01)
    with _Opened(duffing, tmp_path / "duffing") as fmu:
        fmu.setFloat64([DUFFING["x_start"], DUFFING["v_start"], DUFFING["h_internal"]],
                       [p["x_start"], p["v_start"], p["h_internal"]])
        fmu.enterInitializationMode(startTime=0.0)
        fmu.exitInitializationMode()
        t, y = 0.0, [p["x_start"], p["v_start"]]
        for n, H in enumerate([0.025, 0.01, 0.003, 0.03] * 5):
            F = 0.1 * n - 0.5
            fmu.setFloat64([DUFFING["F"]], [F])
            if n == 10:
                fmu.setFloat64([DUFFING["delta"]], [0.6])
                p["delta"] = 0.6
            fmu.doStep(t, H)
            y = _rk4_python(p, y, t, H, F)
            t += H
            got = fmu.getFloat64([DUFFING["x"], DUFFING["v"], DUFFING["time"]])
            assert _relative_error(got[:2], y) < EXACT, n
            assert math.isclose(got[2], t, rel_tol=EXACT)


def test_duffing_tunable_and_fixed_parameters(duffing, tmp_path):
    def run(change_delta):
        with _Opened(duffing, tmp_path / f"duffing_{change_delta}") as fmu:
            fmu.enterInitializationMode(startTime=0.0)
            fmu.exitInitializationMode()
            xs = []
            for k in range(400):
                if change_delta and k == 200:
                    fmu.setFloat64([DUFFING["delta"]], [1.0])
                fmu.doStep(k * 0.01, 0.01)
                xs.append(fmu.getFloat64([DUFFING["x"]])[0])
            for name in ("alpha", "beta", "gamma", "omega", "x_start", "v_start", "h_internal"):
                with pytest.raises(FMICallException):
                    fmu.setFloat64([DUFFING[name]], [2.0])
            for vr in (DUFFING["x"], DUFFING["time"], 99):
                with pytest.raises(FMICallException):
                    fmu.setFloat64([vr], [0.0])
            assert fmu.getFloat64([DUFFING["alpha"]]) == [1.0]
            # a communication point that is not the FMU's time is refused
            with pytest.raises(FMICallException):
                fmu.doStep(0.5, 0.01)
            fmu.terminate()
            with pytest.raises(FMICallException):
                fmu.doStep(4.0, 0.01)
            return np.array(xs)

    unchanged, changed = run(False), run(True)
    assert np.array_equal(unchanged[:200], changed[:200])
    assert np.max(np.abs(unchanged[200:] - changed[200:])) > 1e-2
    # a heavier damping takes energy out: the late amplitude is smaller
    assert np.max(np.abs(changed[300:])) < np.max(np.abs(unchanged[300:]))


def test_duffing_fmu_state_round_trip(duffing, tmp_path):
    with _Opened(duffing, tmp_path / "duffing") as fmu:
        fmu.enterInitializationMode(startTime=0.0)
        fmu.exitInitializationMode()
        for k in range(50):
            fmu.doStep(k * 0.02, 0.02)
        state = fmu.getFMUState()
        serialized = fmu.serializeFMUState(state)

        def continuation():
            out = []
            for k in range(50, 100):
                fmu.setFloat64([DUFFING["F"]], [0.01 * k])
                fmu.doStep(k * 0.02, 0.02)
                out.append(fmu.getFloat64([DUFFING["time"], DUFFING["x"], DUFFING["v"]]))
            return out

        first = continuation()
        fmu.setFMUState(state)
        assert continuation() == first
        restored = fmu.deserializeFMUState(serialized)
        fmu.setFMUState(restored)
        assert continuation() == first
        fmu.freeFMUState(restored)
        fmu.freeFMUState(state)
        fmu.terminate()
