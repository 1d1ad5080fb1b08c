"""The co-simulation master of SSP systems of Co-Simulation FMUs (issue 28, part 2:
:mod:`fmi_adjoint.ssp.master`).

* A mechanical model split at a force/displacement interface into two FMUs exported by
  fmi-adjoint (A: mass m1 on a spring-damper to ground, driven by the coupling force F; B: a
  base b prescribed to follow the displacement xb, a spring to mass m2, which is damped to
  ground; B's output ``force`` is the force on m1, ``-reaction(b)``), coupled A.x1 -> B.xb and
  B.force -> A.F: Jacobi and Gauss-Seidel with zero-order hold converge to the monolithic model
  (the in-process engine at the FMUs' internal step) with first order in the macro step H, and
  Jacobi with linear extrapolation (``fmi2SetRealInputDerivatives``) with second order;
  the step-halving estimate sees the same order.
* System inputs from an input table and system outputs by their own names; a component that
  crashes is one error and leaves no worker behind; the master's replies are checked.
* The same system written as an ``.ssp`` runs in fmpy's ``simulate_ssp`` as in our master (the
  file read by :func:`fmi_adjoint.ssp.reading.open_system`) with Jacobi and zero-order hold.
  fmpy 0.3.32 (``fmpy/ssp/simulation.py``): every component steps from the connector values of
  the previous step (Jacobi), inputs held (zero-order hold), connector values 0.0 before the
  first step (here the initial outputs are 0 too:
  x1(0) = x2(0) = 0, the motion starts from v1(0)), no transformations, and its row at time
  t holds the outputs after the step from t, i.e. at t + H.  B's outputs depend on xb only
  through its state (the model description declares no dependencies, so the master treats
  them as direct feedthrough and re-reads them at every communication point; they do not
  change), so both masters see the same values.
* An algebraic loop of two direct-feedthrough gains (``fmus/feedthrough``: y = k u + c, no
  directional derivatives, so differences) is solved to its closed form through a linear
  transformation and the SSD's parameter bindings; a loop that does not converge and one
  without a solution are refused naming their ports.  (Model Exchange components in a
  co-simulation: ``test_ssp_monolithic``.)

Cost: two exports and one in-process build of the monolithic model (6 s cold), then runs of
about 0.3 s each (two worker processes per run); the module 19 s cold.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

from fmi_adjoint import NativeEngine, load_model
from fmi_adjoint.errors import FmuError
from fmi_adjoint.export import export_fmu
from fmi_adjoint.fmu.archive import open_fmu
from fmi_adjoint.ssp import master
from fmi_adjoint.ssp.master import (GaussSeidel, InputTable, Jacobi, LinearExtrapolation, MasterSettings,
                                    ZeroOrderHold,
                                    estimate_error, simulate_system)
from fmi_adjoint.ssp.reading import open_system
from fmi_adjoint.ssp.structure import (Component, Connection, Connector, Endpoint, ParameterValue, SystemStructure,
                                       Transformation)
from fmi_adjoint.toolchain import c_compiler
from handwritten_fmus import build_fmu
from tolerances import EXACT, NEWTON_LEVEL, ORDER

if c_compiler() is None:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: the FMUs cannot be built", allow_module_level=True)

_HEADER = """[model]
name = "{name}"

[simulation]
t_end = 1.0
step = 1e-4
"""
_GROUND = """
[[coordinates]]
name = "x1"
mass = 1.0
initial_velocity = 0.1

[[forces]]
type = "linear_spring_damper"
name = "ground"
coordinates = ["x1"]
stiffness = 1000.0
damping = 1.0
"""
_M2 = """
[[coordinates]]
name = "x2"
mass = 0.5

[[forces]]
type = "linear_spring_damper"
name = "ground2"
coordinates = ["x2"]
stiffness = 0.0
damping = 0.5
"""
#: The spring between m2 and the coordinate ``{base}``.
_COUPLING = """
[[forces]]
type = "linear_spring_damper"
name = "coupling"
coordinates = ["x2", "{base}"]
stiffness = 500.0
damping = 0.0
"""


def _outputs(**expressions: str) -> str:
    return "".join(f'\n[[outputs]]\nname = "{name}"\nexpression = "{text}"\n' for name, text in expressions.items())


#: A: m1 on a spring-damper to ground, the coupling force F as an input.
MODEL_A = (_HEADER.format(name="split_a") + '\n[inputs]\nF = 0.0\n' + _GROUND
           + '\n[[forces]]\ntype = "load"\nname = "coupling"\ncoordinate = "x1"\nexpression = "F"\n'
           + _outputs(x1="x1", v1="der(x1)"))
#: B: the base b follows the input xb, a spring to m2; ``force`` acts on m1.
MODEL_B = (_HEADER.format(name="split_b") + '\n[inputs]\nxb = 0.0\n'
           + '\n[[coordinates]]\nname = "b"\nmass = 0.0\n\n[[prescribed]]\ncoordinate = "b"\nexpression = "xb"\n'
           + _COUPLING.format(base="b") + _M2 + _outputs(force="-reaction(b)", x2="x2"))
#: The monolithic reference: m1 and m2 joined by the spring directly.
MODEL_MONOLITHIC = (_HEADER.format(name="split_mono") + _GROUND + _M2 + _COUPLING.format(base="x1")
                    + _outputs(x1="x1", x2="x2"))
T_END = 0.1
STEPS = (2e-3, 1e-3, 5e-4)


def _split_structure(source: str = "split.ssd") -> SystemStructure:
    a = Component("A", Path("A.fmu"), "resources/A.fmu", "CoSimulation",
                  (Connector("F", "input"), Connector("x1", "output"), Connector("v1", "output")))
    b = Component("B", Path("B.fmu"), "resources/B.fmu", "CoSimulation",
                  (Connector("xb", "input"), Connector("force", "output"), Connector("x2", "output")))
    return SystemStructure("split", source, (), (a, b),
                           (Connection(Endpoint("A", "x1"), Endpoint("B", "xb")),
                            Connection(Endpoint("B", "force"), Endpoint("A", "F"))))


def export_models(folder: Path, texts: dict[str, str], **options) -> dict:
    """{NAME: opened archive} of each model text exported as ``folder/NAME.fmu`` (the text kept as
    ``folder/NAME.toml``); ``options`` those of :func:`~fmi_adjoint.export.export_fmu`."""
    archives = {}
    for name, text in texts.items():
        (folder / f"{name}.toml").write_text(text)
        export_fmu(folder / f"{name}.toml", folder / f"{name}.fmu", **options)
        archives[name] = open_fmu(folder / f"{name}.fmu")
    return archives


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    """(folder, {"A": archive, "B": archive}) of the exported halves."""
    folder = tmp_path_factory.mktemp("ssp_master")
    archives = export_models(folder, {"A": MODEL_A, "B": MODEL_B}, interface="cs")
    yield folder, archives
    for archive in archives.values():
        archive.close()


@pytest.fixture(scope="module")
def split3(tmp_path_factory):
    """{"A": archive, "B": archive} of the halves exported as FMI 3 (no input derivatives:
    intermediate update)."""
    archives = export_models(tmp_path_factory.mktemp("ssp_master_fmi3"), {"A": MODEL_A, "B": MODEL_B},
                             interface="cs", fmi_version=3)
    yield archives
    for archive in archives.values():
        archive.close()


@pytest.fixture(scope="module")
def monolithic(tmp_path_factory) -> tuple[np.ndarray, np.ndarray]:
    """(times, [x1, x2]) of the monolithic model at the FMUs' internal step."""
    path = tmp_path_factory.mktemp("ssp_monolithic") / "mono.toml"
    path.write_text(MODEL_MONOLITHIC)
    trajectory = NativeEngine.build(load_model(path)).simulate(t_end=T_END, step=1e-4)
    return np.asarray(trajectory.t), np.asarray(trajectory.outputs())


@pytest.mark.parametrize("order, approximation", [(Jacobi(), ZeroOrderHold()), (GaussSeidel(), ZeroOrderHold()),
                                                  (Jacobi(), LinearExtrapolation())],
                         ids=["jacobi-hold", "gauss-seidel-hold", "jacobi-extrapolation"])
def test_split_model_converges_to_the_monolithic_one_with_the_claimed_order(split, monolithic, order,
                                                                            approximation):
    _, archives = split
    times, reference = monolithic
    settings = MasterSettings(STEPS[0], order, approximation)
    estimate = estimate_error(_split_structure(), archives, T_END, settings, runs=3)
    assert estimate.steps == STEPS
    errors = []
    for result in estimate.results:
        assert result.times[-1] == T_END
        errors.append(max(np.max(np.abs(result.column(name) - np.interp(result.times, times, reference[:, j])))
                          for j, name in enumerate(("A.x1", "B.x2"))))
    slope = np.polyfit(np.log(STEPS), np.log(errors), 1)[0]
    assert abs(slope - approximation.order) <= ORDER, errors
    for name in ("A.x1", "B.x2"):  # the step-halving estimate sees the same order
        assert abs(estimate.order[estimate.columns.index(name)] - approximation.order) <= ORDER


def test_fmi3_halves_take_the_extrapolated_inputs_at_their_intermediate_updates(split3, monolithic):
    """FMI 3 has no input derivatives: the worker sets the extrapolated ramps when the FMUs call
    back inside fmi3DoStep (providesIntermediateUpdate), and the Jacobi master with linear
    extrapolation keeps its second order (before: FMI 3 FMUs held their inputs, first order)."""
    times, reference = monolithic
    settings = MasterSettings(STEPS[0], Jacobi(), LinearExtrapolation())
    estimate = estimate_error(_split_structure(), split3, T_END, settings, runs=3)
    errors = [max(np.max(np.abs(result.column(name) - np.interp(result.times, times, reference[:, j])))
                  for j, name in enumerate(("A.x1", "B.x2"))) for result in estimate.results]
    slope = np.polyfit(np.log(STEPS), np.log(errors), 1)[0]
    assert abs(slope - LinearExtrapolation.order) <= ORDER, (slope, errors)


def _write_ssp(folder: Path, structure: SystemStructure | None = None) -> Path:
    """The system of :func:`_split_structure` (or ``structure``, whose components' ``source`` are
    ``resources/NAME.fmu``, or ``resources/NAME.toml`` for a model file) as an ``.ssp`` (SSD written
    here, the files ``folder/NAME.fmu`` or ``.toml`` under resources/)."""
    structure = structure or _split_structure()

    def connectors(items) -> str:
        return ("<ssd:Connectors>" + "".join(f'<ssd:Connector name="{k.name}" kind="{k.kind}"><ssc:Real/>'
                                             "</ssd:Connector>" for k in items) + "</ssd:Connectors>")

    def kind(component: Component) -> str:  # a model file: fmi-adjoint's own component type
        return "application/x-fmi-adjoint-model" if component.source.endswith(".toml") else \
            "application/x-fmu-sharedlibrary"

    elements = "".join(
        f'<ssd:Component name="{c.name}" source="{c.source}" type="{kind(c)}">'
        + connectors(c.connectors) + "</ssd:Component>" for c in structure.components)
    def endpoint(end: Endpoint, which: str) -> str:
        element = f'{which}Element="{end.element}" ' if end.element else ""
        return f'{element}{which}Connector="{end.connector}"'

    def transformation(t: Transformation) -> str:
        return ("" if t == Transformation() else
                f'<ssc:LinearTransformation factor="{t.factor!r}" offset="{t.offset!r}"/>')

    connections = "".join(f"<ssd:Connection {endpoint(c.start, 'start')} {endpoint(c.end, 'end')}>"
                          f"{transformation(c.transformation)}</ssd:Connection>" for c in structure.connections)
    ssd = ('<?xml version="1.0" encoding="UTF-8"?>\n<ssd:SystemStructureDescription '
           'xmlns:ssc="http://ssp-standard.org/SSP1/SystemStructureCommon" '
           f'xmlns:ssd="http://ssp-standard.org/SSP1/SystemStructureDescription" version="1.0" name="{structure.name}">'
           f'<ssd:System name="{structure.name}">{connectors(structure.connectors) if structure.connectors else ""}'
           f'<ssd:Elements>{elements}</ssd:Elements>'
           f'{f"<ssd:Connections>{connections}</ssd:Connections>" if connections else ""}'
           '</ssd:System></ssd:SystemStructureDescription>\n')
    path = folder / f"{structure.name}.ssp"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("SystemStructure.ssd", ssd)
        for component in structure.components:
            suffix = Path(component.source).suffix
            archive.write(folder / f"{component.name}{suffix}", f"resources/{component.name}{suffix}")
    return path


def test_master_gives_fmpys_simulate_ssp_results(split):
    from fmpy.ssp.simulation import simulate_ssp

    folder, _ = split
    step, ssp = STEPS[1], _write_ssp(folder)
    theirs = simulate_ssp(str(ssp), stop_time=T_END, step_size=step)
    with open_system(ssp) as system:  # the same file, through our reader
        assert system.structure.connections == _split_structure().connections
        ours = simulate_system(system.structure, system.archives, T_END, MasterSettings(step, Jacobi()))
    rows = round(T_END / step)
    assert theirs.size >= rows
    np.testing.assert_allclose(theirs["time"][:rows] + step, ours.times[1:rows + 1], rtol=EXACT)
    for name in ours.columns:
        scale = np.max(np.abs(ours.column(name)))
        assert np.max(np.abs(theirs[name][:rows] - ours.column(name)[1:rows + 1])) <= EXACT * scale, name


# -- algebraic loops ---------------------------------------------------------------------------
K_A, C_A, C_B = 2.0, 0.5, 1.0  # A: the FMU's own k and c; B: bound below
FACTOR, OFFSET = 0.5, 0.25  # the transformation B.y -> A.u
GAIN_CONNECTORS = (Connector("u", "input"), Connector("y", "output"))


def _loop(gain_b: float, fmu: Path) -> SystemStructure:
    """A.u = FACTOR B.y + OFFSET, B.u = A.y; y = k u + c in both."""
    connectors = GAIN_CONNECTORS
    return SystemStructure(
        "loop", "loop.ssd", (),
        (Component("A", fmu, "feedthrough.fmu", "CoSimulation", connectors),
         Component("B", fmu, "feedthrough.fmu", "any", connectors)),
        (Connection(Endpoint("A", "y"), Endpoint("B", "u")),
         Connection(Endpoint("B", "y"), Endpoint("A", "u"), Transformation(FACTOR, OFFSET))),
        parameters=(ParameterValue("B", "k", gain_b),))


@pytest.fixture(scope="module")
def gains(tmp_path_factory):
    path = build_fmu("feedthrough", tmp_path_factory.mktemp("ssp_loop"))
    archives = {"A": open_fmu(path), "B": open_fmu(path)}
    yield path, archives
    for archive in archives.values():
        archive.close()


@pytest.mark.parametrize("order, declared", [(Jacobi(), False), (GaussSeidel(), False), (Jacobi(), True)],
                         ids=["jacobi", "gauss-seidel", "directional-declared-but-refused"])
def test_algebraic_loop_is_solved_to_its_closed_form(gains, order, declared, monkeypatch):
    """``declared``: the FMUs claim directional derivatives, refuse them, and the master falls back
    to differences."""
    path, archives = gains
    if declared:
        monkeypatch.setattr(master, "_cs_flag", lambda archive, name: name == "providesDirectionalDerivative")
    k_b = 0.8
    settings = MasterSettings(0.05, order, loop_tolerance=NEWTON_LEVEL)
    result = simulate_system(_loop(k_b, path), archives, 0.1, settings, values={"B.c": C_B})
    # u_A = FACTOR (k_B (K_A u_A + C_A) + C_B) + OFFSET
    u_a = (FACTOR * (k_b * C_A + C_B) + OFFSET) / (1 - FACTOR * k_b * K_A)
    y_a = K_A * u_a + C_A
    y_b = k_b * y_a + C_B
    # Newton stops at a residual of NEWTON_LEVEL (1 + |u|); the loop's gain 0.8 amplifies it by 1/(1 - 0.8).
    bound = NEWTON_LEVEL * (1 + abs(y_a)) / (1 - FACTOR * k_b * K_A)
    assert result.columns == ("A.y", "B.y")
    assert np.all(np.abs(result.column("A.y") - y_a) <= bound * K_A)
    assert np.all(np.abs(result.column("B.y") - y_b) <= bound * K_A * k_b)


def _input_error_bound(size: float, terms: float, gain: float) -> float:
    """The largest error of a loop input that Newton's stopping test lets through:
    ``NEWTON_LEVEL (1 + |u_i| + sum_j |G_ij| |u_j|)`` (:func:`~fmi_adjoint.fmu.me_system.loop_scale`)
    amplified by ``1 / (1 - the loop gain)``."""
    return NEWTON_LEVEL * (1 + abs(size) + abs(terms)) / (1 - gain)


def test_a_loop_whose_ports_differ_in_scale_is_solved_not_refused(gains):
    """The loop's Jacobian ``[[1, -FACTOR k_B], [-k_A, 1]]`` with k_A = 1e-7 and k_B = 1e6 (a loop
    gain of 0.05, well posed) has a plain condition number of 2.5e11, which the master took for a
    singular loop: the ports' units count no more (:func:`loop_condition` is 1.6), and each
    input converges against its own terms (A.u is 2.6e5, B.u 0.53)."""
    path, archives = gains
    k_a, k_b = 1e-7, 1e6
    result = simulate_system(_loop(k_b, path), archives, 0.1, MasterSettings(0.05, loop_tolerance=NEWTON_LEVEL),
                             values={"A.k": k_a, "B.c": C_B})
    gain = FACTOR * k_b * k_a
    u_a = (FACTOR * (k_b * C_A + C_B) + OFFSET) / (1 - gain)
    u_b = k_a * u_a + C_A  # = A.y
    y_b = k_b * u_b + C_B
    assert np.all(np.abs(result.column("A.y") - u_b) <= k_a * _input_error_bound(u_a, FACTOR * k_b * u_b, gain))
    assert np.all(np.abs(result.column("B.y") - y_b) <= k_b * _input_error_bound(u_b, k_a * u_a, gain))


def test_a_port_near_zero_made_of_large_terms_converges(gains):
    """A.y = 14 u_A - 14 * 1.895e6 is near 0 at the solution, from terms of 2.7e7 that cancel: its
    residual's round-off (about eps of those terms) is measured against them
    (:func:`~fmi_adjoint.fmu.me_system.loop_scale`); measured against 1 + |u| alone it never
    converged (a review found)."""
    path, archives = gains
    k_a, c_a, k_b, c_b = 14.0, -14.0 * 1.895e6, 0.1, 2 * (1.895e6 - 0.25)
    result = simulate_system(_loop(k_b, path), archives, 0.1, MasterSettings(0.05, loop_tolerance=NEWTON_LEVEL),
                             values={"A.k": k_a, "A.c": c_a, "B.c": c_b})
    gain = FACTOR * k_b * k_a
    u_a = (FACTOR * (k_b * c_a + c_b) + OFFSET) / (1 - gain)
    u_b = k_a * u_a + c_a  # = A.y, near 0
    bound = _input_error_bound(u_b, k_a * u_a, gain)  # B.u's terms: 14 |u_A| = 2.7e7
    assert np.all(np.abs(result.column("A.y") - u_b) <= bound)
    assert np.all(np.abs(result.column("B.y") - (k_b * u_b + c_b)) <= k_b * bound)


def test_a_self_loop_without_a_solution_is_refused(gains):
    """A.u = 0.5 A.y + 0.25 with A.y = 2 A.u + 0.5 is u = u + 0.5: no solution.  Its 1 x 1 Jacobian
    is a difference that cancels to round-off; a condition of |J^-1| |J| counted it as 1 and the
    master returned A.y = 1.3e10 (a review found)."""
    path, archives = gains
    structure = SystemStructure(
        "self", "self.ssd", (),
        (Component("A", path, "feedthrough.fmu", "CoSimulation", GAIN_CONNECTORS),
         Component("B", path, "feedthrough.fmu", "any", GAIN_CONNECTORS)),
        (Connection(Endpoint("A", "y"), Endpoint("A", "u"), Transformation(FACTOR, OFFSET)),
         Connection(Endpoint("A", "y"), Endpoint("B", "u"))))
    with pytest.raises(FmuError, match=r"algebraic loop through A\.u has no unique solution"):
        simulate_system(structure, archives, 0.1, MasterSettings(0.05))


def test_loops_that_do_not_converge_are_refused_by_name(gains):
    path, archives = gains
    with pytest.raises(FmuError, match=r"algebraic loop through A\.u, B\.u did not converge in 1 iterations"):
        simulate_system(_loop(0.8, path), archives, 0.1, MasterSettings(0.05, max_loop_iterations=1))
    # FACTOR k_B K_A = 1: u_A = u_A + 1.25 has no solution
    with pytest.raises(FmuError, match=r"algebraic loop through A\.u, B\.u has no unique solution"):
        simulate_system(_loop(1.0, path), archives, 0.1, MasterSettings(0.05))


def test_system_inputs_come_from_the_table_and_system_outputs_are_recorded_by_name(gains):
    path, archives = gains
    structure = SystemStructure(
        "driven", "driven.ssd", (Connector("u0", "input"), Connector("out", "output")),
        (Component("A", path, "feedthrough.fmu", "CoSimulation", GAIN_CONNECTORS),),
        (Connection(Endpoint(None, "u0"), Endpoint("A", "u")),
         Connection(Endpoint("A", "y"), Endpoint(None, "out"), Transformation(-1.0, 3.0))))
    table = InputTable(np.array([0.0, 1.0]), ("u0",), np.array([[1.0], [2.0]]))
    result = simulate_system(structure, {"A": archives["A"]}, 0.2, MasterSettings(0.05), inputs=table)
    assert result.columns == ("A.y", "out")
    expected = K_A * (1.0 + result.times) + C_A
    np.testing.assert_allclose(result.column("A.y"), expected, rtol=EXACT)
    np.testing.assert_allclose(result.column("out"), 3.0 - expected, rtol=EXACT)
    with pytest.raises(FmuError, match="system input 'u0' drives A.u but the input table has no such column"):
        simulate_system(structure, {"A": archives["A"]}, 0.2, MasterSettings(0.05),
                        inputs=InputTable(np.array([0.0, 1.0]), ("v",), np.zeros((2, 1))))


def test_a_crashing_component_is_one_error_and_every_worker_ends(gains, tmp_path):
    path, archives = gains
    with open_fmu(build_fmu("faulty_decay_cs", tmp_path, ("FA_CRASH_AT=0.1",))) as crashing:
        structure = SystemStructure(
            "crash", "crash.ssd", (),
            (Component("A", path, "feedthrough.fmu", "CoSimulation", GAIN_CONNECTORS),
             Component("C", crashing.path, "crash.fmu", "CoSimulation", (Connector("x", "output"),))),
            (Connection(Endpoint("C", "x"), Endpoint("A", "u")),))
        with pytest.raises(FmuError, match=r"crashed with SIGSEGV during fmi2DoStep at t = 0\.1 s"):
            simulate_system(structure, {"A": archives["A"], "C": crashing}, 0.2, MasterSettings(0.05))
        # every session released its log and call buffer: its worker was ended (killed or closed)
        for folder in (archives["A"].directory, crashing.directory):
            assert not list(folder.glob("worker-*")), folder


def test_master_replies_are_checked_against_the_request():
    """A step's reply must hold one value per output asked for (the worker runs the binary)."""
    from fmi_adjoint.fmu.replies import MalformedReply, expectation, reply_limit
    from fmi_adjoint.fmu.worker import pack

    request = ("call", (None, "step", (0.0, 0.1, [], [], [], [1, 2])))
    (label, check), limit = expectation(*request, 0), reply_limit(*request, 0)
    assert "step" in label and limit > 16
    np.testing.assert_array_equal(check(("array", pack(np.array([1.0, 2.0])))), [1.0, 2.0])
    for forged in (("array", pack(np.zeros(3))), ("value", None), ("array", ((2,), b"1234"))):
        with pytest.raises(MalformedReply):
            check(forged)


# -- the command line ---------------------------------------------------------------------------
def test_simulate_ssp_writes_the_masters_result_and_its_error_estimate(split, tmp_path):
    """``simulate --ssp``: the CSV holds the master's result bit for bit (the same runs), and
    ``--error-estimate`` prints each column's estimated coupling error (twice the difference to
    H/2 for zero-order hold)."""
    from captured_cli import cli
    from fmi_adjoint.data import read_csv

    folder, _ = split
    ssp, step = _write_ssp(folder), STEPS[1]
    out = tmp_path / "system.csv"
    code, _, err = cli(["simulate", "--ssp", str(ssp), "--step", str(step), "--t-end", str(T_END),
                        "--order", "gauss-seidel", "--error-estimate", "-o", str(out)])
    assert code == 0, err
    written = read_csv(out)
    with open_system(ssp) as system:
        settings = MasterSettings(step, GaussSeidel())
        estimate = estimate_error(system.structure, system.archives, T_END, settings)
    ours = estimate.results[0]
    assert written.columns == ours.columns
    np.testing.assert_array_equal(written.values, ours.values)
    line = next(row for row in err.splitlines() if row.strip().startswith("A.x1"))
    assert line.split()[1] == f"{2.0 * estimate.difference[ours.columns.index('A.x1')]:.3g}"  # as printed


@pytest.mark.parametrize("args, message", [
    (["simulate"], "give MODEL (a TOML file or example name) or --ssp SYSTEM.ssp"),
    (["simulate", "--ssp", "{ssp}", "--t-end", "0.1"], "--ssp needs --step H"),
    (["simulate", "--ssp", "{ssp}", "--step", "1e-3", "--integrator", "hht"], "--integrator applies to a model file"),
    (["simulate", "sdof", "--order", "gauss-seidel"], "--order applies to --ssp"),
    (["simulate", "--ssp", "{ssp}", "--step", "1e-3"], "has no DefaultExperiment stopTime; give --t-end"),
])
def test_simulate_ssp_refusals_are_one_line(split, args, message):
    from captured_cli import cli, error_line

    ssp = _write_ssp(split[0])
    code, _, err = cli([a.replace("{ssp}", str(ssp)) for a in args])
    assert code == 2 and message in error_line(err)
