"""Model Exchange in exported FMUs (issue 30, parts 1-2): ``export --interface cs|me|both``.

What is shown, for FMI 2 and 3:

* fmpy's CVode (rtol 1e-10) on the Model Exchange FMU of every bundled example that Model
  Exchange supports equals the in-process engine (generalized-alpha 0.9) to the engine's
  O(h^2) (ME_CORE_VS_ENGINE, the tier of the core itself, tests/test_me_core.py) in q, v and
  the outputs, and the constraint drift stays within its tolerance (:data:`ME_RUNS`; the
  flexible MacPherson suspension, too large for fmpy's CVode, at its initial state only);
* fmpy's validation and the FMI XSD accept the description; for every example, the FMU with
  both interfaces has the binary of the Co-Simulation FMU and of the Model Exchange FMU, and
  gives their results bit for bit (:data:`EITHER_WAY`);
* fmi2/3GetDirectionalDerivative equals central differences of the derivatives and outputs
  (GRADIENT_VS_FD) for states and (FMI 3) parameters; fmi3GetAdjointDerivative satisfies
  v^T (J w) = (J^T v)^T w (EXACT);
* the dependencies declared in <ModelStructure> equal the numerically found non-zeros;
* engine_tvd (massless Maxwell nodes) is refused for ``--interface me`` by name.

Cost: the FMUs are those of the round trips (tests/exported_fmus.py: one export per process,
the binary from the build cache); the runs last :data:`STEPS` of the model's own step.
"""

from __future__ import annotations

import ctypes
import functools
import zipfile

import fmpy
import fmpy.validation
import numpy as np
import pytest
from fmpy.fmi2 import FMU2Model
from fmpy.fmi3 import FMU3Model
from lxml import etree
from tolerances import EXACT, GRADIENT_VS_FD, ME_CORE_VS_ENGINE

from bundled import TESTED_ALONE, looped_examples
from exported_fmus import ALONE_VERSIONS, exported_fmu

from fmi_adjoint import load_model
from fmi_adjoint.cli.main import main
from fmi_adjoint.examples import example_path
from fmi_adjoint.export import ExportError, export_fmu, validate_against_schema
from fmi_adjoint.integrate import HHT, GeneralizedAlpha

#: The examples whose derivative checks run in the fast suite (sdof and slider_crank).
FAST = ("sdof", "slider_crank")
#: Models whose accelerations depend on only some states (sdof and slider_crank: on all).
SPARSE = ("engine_mount", "triple_pendulum", "slider_crank")
#: The bundled example Model Exchange refuses (massless Maxwell nodes), checked by name below.
REFUSED = "engine_tvd"

#: Steps of the model's own step that a compared run lasts (a few hundred: the models move).
STEPS = 300
#: Other lengths: sdof moves little in 300 steps (0.3 s of its 2 pi period: its parameters 5 %
#: off change the run by 1.7e-4 only, by 1.2e-2 in 1.5 s); the flexible pendulum's 224 states
#: make a Model Exchange run of 300 steps (0.15 s) take about 30 s of CPU in fmpy's CVode (a
#: dense difference-quotient Jacobian), one of 20 steps about 3 s.
RUN_STEPS = {"sdof": 1500, "flexible_pendulum": 20}
#: The engine's step where h = 1e-4 does not resolve the model's fastest mode.  Measured with
#: the runs of this file, the difference to the FMU falls at the engine's order 2 (4.0x per
#: halved step down to these steps), so it is the engine's error:
#: engine_mount's hydro mass (m_H = 1.9 g on c_H = 3.75e5 N/m, 1.4e4 rad/s): v 1.2e-3 and the
#: lever force 3.1e-2 at 1e-4, 2.5e-5 and 6.9e-4 at 4e-6, 6.5e-6 and 1.7e-4 at 2e-6; the
#: flexible beams' bending modes, v at 1e-4 / 1e-5 / 5e-6: beam_pod 3.3e-2 / 3.2e-4 / 7.9e-5,
#: beam_ffrf 3.6e-2 / 3.7e-4 / 9.1e-5, flexible_pendulum 2.6e-2 / 4.1e-4 / 1.0e-4.
ENGINE_STEPS = {"engine_mount": 2e-6, "beam_pod": 5e-6, "beam_ffrf": 5e-6, "flexible_pendulum": 5e-6}
#: The examples tested alone run in one FMI version each (tests/exported_fmus.py).  The
#: flexible MacPherson suspension (654 states) is left out: fmpy's CVode at rtol 1e-10 stops
#: with "mxstep steps taken before reaching tout" at t = 1.5e-4 s, and at rtol 1e-6 takes 68 s
#: of CPU for 3 ms (a dense difference-quotient Jacobian of 654 columns, stiff flexible modes);
#: its Model Exchange FMU is checked at the initial state
#: (:func:`test_the_flexible_suspension_at_its_initial_state`).
assert set(ALONE_VERSIONS) | {"macpherson_flexible"} == set(TESTED_ALONE)


def _me_runs() -> list:
    """(name, version): every looped example but :data:`REFUSED` in FMI 2 and 3 (FMI 2 of all
    but :data:`FAST` marked slow: the fast suite builds only their FMI 3 FMUs), and the
    examples tested alone in one version each (slow)."""
    slow = [pytest.mark.slow]
    runs = [pytest.param(name, version, id=f"{name}-{version}", marks=slow if version == 2 and name not in FAST else [])
            for name in looped_examples() if name != REFUSED for version in (2, 3)]
    return runs + [pytest.param(name, version, id=f"{name}-{version}", marks=slow)
                   for name, version in ALONE_VERSIONS.items()]


ME_RUNS = _me_runs()
#: The FMU with both interfaces against the single-interface ones: every looped example of
#: :data:`ME_RUNS` in one version, alternating 2 and 3 along the sorted names (to halve the
#: cost: the interface is no part of the build, tests/exported_fmus.py, and both versions'
#: layers run every example above).  The examples tested alone are left out: the same code
#: path, at 5-10 s each (the extra exports and runs of the large models).
EITHER_WAY = [pytest.param(*p.values, id=p.id, marks=p.marks) for p in ME_RUNS
              if p.values[0] not in ALONE_VERSIONS
              and p.values[1] == 2 + sorted(looped_examples()).index(p.values[0]) % 2]


def _engine_step(name: str) -> float:
    return ENGINE_STEPS.get(name, 1e-4)


def _horizon(name: str) -> tuple[float, float]:
    """(end, output interval) of a compared run: 50 output intervals of whole engine steps
    (the output points are engine steps) over about :data:`STEPS` of the model's step."""
    h = _engine_step(name)
    k = max(1, round(RUN_STEPS.get(name, STEPS) * load_model(example_path(name)).simulation.step / (50 * h)))
    return 50 * k * h, k * h


@pytest.fixture(scope="module")
def fmus():
    """fmus(name, version, interface) -> path (tests/exported_fmus.py)."""
    return exported_fmu


class Instance:
    """An ME instance of an exported FMU through fmpy, FMI 2 or 3, in Continuous-Time Mode."""

    def __init__(self, path, version: int):
        md = fmpy.read_model_description(str(path))
        self.md, self.version = md, version
        self.vr = {v.name: v.valueReference for v in md.modelVariables}
        cls = FMU2Model if version == 2 else FMU3Model
        kwargs = {"guid": md.guid, "unzipDirectory": fmpy.extract(str(path)),
                  "modelIdentifier": md.modelExchange.modelIdentifier, "instanceName": "me"}
        self.fmu = cls(**kwargs)
        self.fmu.instantiate()
        if version == 2:
            self.fmu.setupExperiment(startTime=0.0)
            self.fmu.enterInitializationMode()
            self.fmu.exitInitializationMode()
            self.fmu.newDiscreteStates()
        else:
            self.fmu.enterInitializationMode(startTime=0.0)
            self.fmu.exitInitializationMode()
            self.fmu.updateDiscreteStates()
        self.fmu.enterContinuousTimeMode()
        self.nx = len(md.derivatives)

    def states(self) -> np.ndarray:
        x = (ctypes.c_double * self.nx)()
        self.fmu.getContinuousStates(x, self.nx)
        return np.array(x)

    def set_states(self, x) -> None:
        self.fmu.setContinuousStates((ctypes.c_double * self.nx)(*x), self.nx)

    def derivatives(self) -> np.ndarray:
        dx = (ctypes.c_double * self.nx)()
        if self.version == 2:
            self.fmu.getDerivatives(dx, self.nx)
        else:
            self.fmu.getContinuousStateDerivatives(dx, self.nx)
        return np.array(dx)

    def get(self, vrs) -> np.ndarray:
        return np.array(self.fmu.getReal(vrs) if self.version == 2 else self.fmu.getFloat64(vrs))

    def set(self, vrs, values) -> None:
        if self.version == 2:
            self.fmu.setReal(vrs, list(values))
        else:
            self.fmu.setFloat64(vrs, list(values))

    def directional(self, unknowns, knowns, seed) -> np.ndarray:
        return np.array(self.fmu.getDirectionalDerivative(unknowns, knowns, list(seed)))

    def adjoint(self, unknowns, knowns, seed) -> np.ndarray:
        return np.array(self.fmu.getAdjointDerivative(unknowns, knowns, list(seed), nSensitivity=len(knowns)))


def _layout(path, name: str):
    """(state vrs, derivative vrs, output vrs, parameter vrs) of an exported FMU (model order)."""
    model = load_model(example_path(name))
    md = fmpy.read_model_description(str(path))
    vr = {v.name: v.valueReference for v in md.modelVariables}
    coords = [c.name for c in model.all_coordinates]
    states = [vr[f"q.{c}"] for c in coords] + [vr[f"v.{c}"] for c in coords]
    derivatives = [vr[f"v.{c}"] for c in coords] + [vr[f"der(v.{c})"] for c in coords]
    return states, derivatives, [vr[o.name] for o in model.outputs], [vr[p.name] for p in model.all_parameters]


def _relative(a, b) -> float:
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / max(np.abs(b).max(), 1.0))


def _perturbed(inst: Instance, seed: int) -> np.ndarray:
    """A generic consistent state: parameters off their round values and the start with small
    random changes, projected onto the constraints in Event Mode (no term vanishes by symmetry
    or by a round value, as tests/test_me_core.py's _state_away_from_equilibrium)."""
    rng = np.random.default_rng(seed)
    parameters = [v.valueReference for v in inst.md.modelVariables if v.causality == "parameter"]
    inst.set(parameters, inst.get(parameters) * (1.0 + 0.1 * rng.random(len(parameters))))
    inst.fmu.setTime(0.1)
    inst.set_states(inst.states() + 0.01 * rng.normal(size=inst.nx))
    inst.fmu.enterEventMode()
    if inst.version == 2:
        inst.fmu.newDiscreteStates()
    else:
        inst.fmu.updateDiscreteStates()
    inst.fmu.enterContinuousTimeMode()
    return inst.states()


@functools.cache
def _me_run(path, name: str) -> np.ndarray:
    """fmpy's CVode (rtol 1e-10) on the Model Exchange interface of ``path`` over
    :func:`_horizon`: the outputs, q and v by name (one run per process; read only)."""
    model = load_model(example_path(name))
    coords = [c.name for c in model.all_coordinates]
    t_end, interval = _horizon(name)
    return fmpy.simulate_fmu(str(path), fmi_type="ModelExchange", solver="CVode", relative_tolerance=1e-10,
                             stop_time=t_end, output_interval=interval,
                             output=[o.name for o in model.outputs] + [f"q.{c}" for c in coords]
                             + [f"v.{c}" for c in coords])


@pytest.mark.parametrize(("name", "version"), ME_RUNS)
def test_me_fmu_matches_engine(fmus, example_engine, name, version):
    """q, v and the outputs of the Model Exchange run equal the engine's (generalized-alpha,
    rho_inf = 0.9, at 1e-4 or the example's :data:`ENGINE_STEPS`) at the output points, to
    ME_CORE_VS_ENGINE relative to the largest value (or 1); the drift at the last point is within
    the FMU's tolerance.  Measured (FMI 3): 1.4e-9 (sdof) to 1.7e-4 (engine_mount).  A wrong
    term of the index-1 system errs by O(1); the round trips' parameters, 2-10 % off
    (tests/test_fmu_round_trip.py), change these runs by 1.8e-3 (strut, the triple pendula)
    to 0.14 (beam_pod)."""
    path = fmus(name, version)
    model = load_model(example_path(name))
    coords = [c.name for c in model.all_coordinates]
    res = _me_run(path, name)
    t_end = _horizon(name)[0]
    assert res["time"][-1] == pytest.approx(t_end, rel=EXACT)
    trajectory = example_engine(name).simulate(t_end=t_end, step=_engine_step(name),
                                               solver=GeneralizedAlpha(rho_inf=0.9))
    rows = np.searchsorted(trajectory.t, res["time"] - 1e-12)
    assert np.max(np.abs(trajectory.t[rows] - res["time"])) <= EXACT * t_end
    q = np.column_stack([res[f"q.{c}"] for c in coords])
    v = np.column_stack([res[f"v.{c}"] for c in coords])
    y = np.column_stack([res[o.name] for o in model.outputs])
    assert _relative(q, trajectory.q[rows]) <= ME_CORE_VS_ENGINE
    assert _relative(v, trajectory.v[rows]) <= ME_CORE_VS_ENGINE
    assert _relative(y, trajectory.outputs()[rows]) <= ME_CORE_VS_ENGINE
    # The drift at the last row within the FMU's tolerance: fmi*CompletedIntegratorStep would
    # otherwise ask for Event Mode (fa_me_completed_step).
    inst = Instance(path, version)
    inst.fmu.setTime(float(res["time"][-1]))
    inst.set_states(np.concatenate([q[-1], v[-1]]))
    enter_event_mode, terminate = inst.fmu.completedIntegratorStep()
    assert not enter_event_mode and not terminate


@pytest.mark.slow  # its FMU export generates the sources again (about 8 s of CPU; the binary is cached)
def test_the_flexible_suspension_at_its_initial_state(fmus, example_engine):
    """macpherson_flexible, which fmpy's CVode cannot run here (:data:`ALONE_VERSIONS`'s note),
    through its FMI 3 Model Exchange interface (the FMU of tests/test_flexible_fmu.py): after
    initialization the states, the accelerations der(v) and the outputs equal the engine's q0,
    v0, a0 and outputs at t0 (EXACT: both solve the same index-1 equations there,
    tests/test_me_core.py), and the drift is within the FMU's tolerance."""
    name = "macpherson_flexible"
    path = fmus(name, 3)
    states, derivatives, outputs, _ = _layout(path, name)
    engine = example_engine(name)
    step = engine.compiled.model.simulation.step
    trajectory = engine.simulate(t_end=step, step=step, solver=HHT(alpha=0.0))
    n = len(states) // 2
    inst = Instance(path, 3)
    assert _relative(inst.get(states), np.concatenate([trajectory.q[0], trajectory.v[0]])) <= EXACT
    assert _relative(inst.get(derivatives[n:]), trajectory.a[0]) <= EXACT
    assert _relative(inst.get(outputs), trajectory.outputs()[0]) <= EXACT
    enter_event_mode, terminate = inst.fmu.completedIntegratorStep()
    assert not enter_event_mode and not terminate


@pytest.mark.parametrize("version", (2, 3))
def test_description_validates(fmus, version):
    path = fmus("slider_crank", version)
    assert fmpy.validation.validate_fmu(str(path)) == []
    with zipfile.ZipFile(path) as archive:
        xml = archive.read("modelDescription.xml")
    assert validate_against_schema(xml, version) == []
    root = etree.fromstring(xml)
    assert root.find("ModelExchange") is not None and root.find("CoSimulation") is not None
    me_only = etree.fromstring(zipfile.ZipFile(fmus("slider_crank", version, "me")).read("modelDescription.xml"))
    assert me_only.find("CoSimulation") is None
    assert validate_against_schema(etree.tostring(me_only), version) == []


@pytest.mark.parametrize(("name", "version"), EITHER_WAY)
def test_both_interfaces_give_the_same_results(fmus, name, version):
    """The FMU with both interfaces carries the binary of the ``cs`` and of the ``me`` export,
    and gives their results bit for bit: Co-Simulation at the model's step, Model Exchange as
    :func:`test_me_fmu_matches_engine` runs it."""
    model = load_model(example_path(name))
    outputs = [o.name for o in model.outputs]
    paths = {interface: fmus(name, version, interface) for interface in ("both", "cs", "me")}

    def binary(path) -> bytes:
        with zipfile.ZipFile(path) as archive:
            return archive.read(next(n for n in archive.namelist() if n.startswith("binaries/")))

    assert binary(paths["both"]) == binary(paths["cs"]) == binary(paths["me"])

    def run(interface, kind):
        if kind == "ModelExchange":
            res = _me_run(paths[interface], name)
        else:
            res = fmpy.simulate_fmu(str(paths[interface]), fmi_type=kind, stop_time=_horizon(name)[0],
                                    output_interval=model.simulation.step, output=outputs)
        return np.column_stack([res["time"], *(res[o] for o in outputs)])

    assert np.array_equal(run("both", "CoSimulation"), run("cs", "CoSimulation"))
    assert np.array_equal(run("both", "ModelExchange"), run("me", "ModelExchange"))


@pytest.mark.parametrize("version", (2, 3))
@pytest.mark.parametrize("name", FAST)
def test_directional_derivatives_equal_central_differences(fmus, name, version):
    path = fmus(name, version)
    states, derivatives, outputs, parameters = _layout(path, name)
    inst = Instance(path, version)
    x = _perturbed(inst, 1)
    unknowns = derivatives + outputs
    jacobian = np.column_stack([inst.directional(unknowns, states, np.eye(len(states))[k])
                                for k in range(len(states))])

    def f(xk):
        inst.set_states(xk)
        return np.concatenate([inst.derivatives(), inst.get(outputs)])

    h = 1e-6
    fd = np.column_stack([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(len(x))])
    inst.set_states(x)
    assert _relative(jacobian, fd) <= GRADIENT_VS_FD
    if version == 3:  # parameters are knowns in FMI 3 (Sec. 2.2.11)
        p = inst.get(parameters)
        jp = np.column_stack([inst.directional(unknowns, [r], [1.0]) for r in parameters])
        fdp = []
        for k, r in enumerate(parameters):
            step = 1e-6 * max(1.0, abs(p[k]))
            columns = []
            for sign in (1, -1):
                inst.set([r], [p[k] + sign * step])
                inst.set_states(x)
                columns.append(f(x))
            inst.set([r], [p[k]])
            fdp.append((columns[0] - columns[1]) / (2 * step))
        assert _relative(jp, np.column_stack(fdp)) <= GRADIENT_VS_FD


@pytest.mark.parametrize("name", FAST)
def test_adjoint_derivatives_are_the_transpose(fmus, name):
    path = fmus(name, 3)
    states, derivatives, outputs, parameters = _layout(path, name)
    inst = Instance(path, 3)
    _perturbed(inst, 2)
    knowns, unknowns = states + parameters, derivatives + outputs
    rng = np.random.default_rng(3)
    w, v = rng.normal(size=len(knowns)), rng.normal(size=len(unknowns))
    jw = inst.directional(unknowns, knowns, w)
    jtv = inst.adjoint(unknowns, knowns, v)
    assert abs(v @ jw - jtv @ w) <= EXACT * (np.abs(v) @ np.abs(jw) + 1.0)


@pytest.mark.parametrize("version", (2, 3))
@pytest.mark.parametrize("name", SPARSE)
def test_declared_dependencies_are_the_numerical_pattern(fmus, name, version):
    path = fmus(name, version)
    states, derivatives, outputs, _ = _layout(path, name)
    with zipfile.ZipFile(path) as archive:
        root = etree.fromstring(archive.read("modelDescription.xml"))
    structure = root.find("ModelStructure")
    if version == 2:
        rows = [(int(u.get("index")), u.get("dependencies")) for tag in ("Outputs", "Derivatives")
                for u in structure.find(tag)]
    else:
        rows = [(int(u.get("valueReference")), u.get("dependencies")) for u in structure
                if u.tag in ("Output", "ContinuousStateDerivative")]
    declared = {}
    for vr, text in rows:
        declared.setdefault(vr, set()).update(int(d) for d in text.split())
    inst = Instance(path, version)
    _perturbed(inst, 4)
    unknowns = derivatives + outputs
    knowns = states + [v.valueReference for v in inst.md.modelVariables if v.causality == "input"]
    jacobian = np.column_stack([inst.directional(unknowns, [r], [1.0]) for r in knowns])
    found: dict[int, set[int]] = {}
    for i, vr in enumerate(unknowns):
        found.setdefault(vr, set()).update(knowns[k] for k in np.flatnonzero(jacobian[i]))
    assert found == declared


def test_massless_coordinates_are_refused_by_name(tmp_path):
    with pytest.raises(ExportError, match="tvd_node1"):
        export_fmu(example_path("engine_tvd"), tmp_path / "me.fmu", interface="me")
    notes: list[str] = []
    out = export_fmu(example_path("engine_tvd"), tmp_path / "both.fmu", interface="both", notes=notes)
    assert len(notes) == 1 and "tvd_node1" in notes[0]
    root = etree.fromstring(zipfile.ZipFile(out).read("modelDescription.xml"))
    assert root.find("ModelExchange") is None and root.find("CoSimulation") is not None


def test_cli_interface_option(tmp_path, capsys):
    assert main(["export", "sdof", "--interface", "cs", "-o", str(tmp_path / "cs.fmu")]) == 0
    root = etree.fromstring(zipfile.ZipFile(tmp_path / "cs.fmu").read("modelDescription.xml"))
    assert root.find("ModelExchange") is None
    assert "Co-Simulation)" in capsys.readouterr().err
    assert main(["export", "engine_tvd", "--interface", "both", "-o", str(tmp_path / "tvd.fmu")]) == 0
    assert "note: " in capsys.readouterr().err
    assert main(["export", "sdof", "--interface", "me", "-o", str(tmp_path / "me.fmu")]) == 0
    root = etree.fromstring(zipfile.ZipFile(tmp_path / "me.fmu").read("modelDescription.xml"))
    assert root.find("ModelExchange") is not None and root.find("CoSimulation") is None


def test_the_mode_rules_of_a_model_exchange_instance(fmus):
    """der(v) (initial unknowns) read in Initialization Mode equal the derivatives after it;
    derivative products and GetDerivatives before ExitInitializationMode, and DoStep on a
    Model Exchange instance, are refused (the core is not initialized there); after Terminate
    the outputs are those of the last state, not of the start."""
    path = fmus("slider_crank", 2)
    md = fmpy.read_model_description(str(path))
    vr = {v.name: v.valueReference for v in md.modelVariables}
    der_v = [vr[v.name] for v in md.modelVariables if v.name.startswith("der(v.")]
    fmu = FMU2Model(guid=md.guid, unzipDirectory=fmpy.extract(str(path)),
                    modelIdentifier=md.modelExchange.modelIdentifier, instanceName="modes")
    fmu.instantiate()
    nx = 2 * len(der_v)

    def derivatives() -> np.ndarray:
        dx = (ctypes.c_double * nx)()
        fmu.getDerivatives(dx, nx)
        return np.array(dx)

    def states() -> np.ndarray:
        x = (ctypes.c_double * nx)()
        fmu.getContinuousStates(x, nx)
        return np.array(x)

    try:
        fmu.setupExperiment(startTime=0.0)
        fmu.enterInitializationMode()
        initial = np.array(fmu.getReal(der_v))
        with pytest.raises(Exception, match="fmi2GetDirectionalDerivative"):
            fmu.getDirectionalDerivative([der_v[0]], [der_v[0]], [1.0])
        with pytest.raises(Exception, match="fmi2GetDerivatives"):
            derivatives()
        fmu.exitInitializationMode()
        fmu.newDiscreteStates()
        fmu.enterContinuousTimeMode()
        n = len(der_v)
        after = derivatives()[n:]  # the index-1 solve at the consistent initial state
        assert np.max(np.abs(initial - after)) <= EXACT * max(1.0, float(np.max(np.abs(after))))
        do_step = fmu.dll.fmi2DoStep  # not part of fmpy's Model Exchange class
        do_step.argtypes = [ctypes.c_void_p, ctypes.c_double, ctypes.c_double, ctypes.c_int]
        assert do_step(fmu.component, 0.0, 1e-3, 1) == 3  # fmi2Error
        outputs = [v.valueReference for v in md.modelVariables if v.causality == "output"]
        x = states()
        start = np.array(fmu.getReal(outputs))
        fmu.setTime(0.01)
        fmu.setContinuousStates((ctypes.c_double * nx)(*(x + 0.01 * derivatives())), nx)
        moved = np.array(fmu.getReal(outputs))
        fmu.terminate()
        assert np.array_equal(np.array(fmu.getReal(outputs)), moved) and not np.array_equal(moved, start)
    finally:
        fmu.freeInstance()
