"""Systems of Model Exchange FMUs integrated as one ODE, with exact sensitivities through the
couplings (issue 28, part 2: :mod:`fmi_adjoint.ssp.monolithic`, :mod:`fmi_adjoint.fmu.me_system`).

* The two-mass oscillator of ``test_ssp_master`` split into two Model Exchange FMUs exported by
  fmi-adjoint (A: m1 on its ground spring ``k1``, driven by the coupling force F; B: m2, pulled by
  the coupling spring ``kc`` towards the input ``xa``, its output ``force`` = kc (x2 - xa) acting on
  m1), coupled A.x1 -> B.xa and B.force -> A.F: the system equals the monolithic linear model,
  solved exactly by the matrix exponential, to the integration tolerance; its sensitivities to
  ``A.k1`` and ``B.kc`` (one component's parameter acting on the other through the couplings)
  equal central differences of the system run on the same nodes.
* An event of one component drives another: the stair's level (time events at 0.5 s and 1 s)
  and the bouncing ball's velocity (a state event at the bounce) are the Van der Pol oscillator's
  input through a linear transformation; the runs equal scipy's DOP853 integration of the coupled
  equations piece by piece between the events (closed forms for the ball), and the sensitivities
  to the driving component's parameters (which move the other's input jump: ``B.floor`` moves the
  bounce) and to the driven one's equal central differences on the same nodes.
* Refusals, one line each: an algebraic loop, a discrete (Integer) connection, a component without
  Model Exchange, an unknown name; a component that crashes is one error naming the system, the
  component and the call, and no worker file is left behind.

Cost: three exports (about 4 s cold), then runs of 0.3-1.5 s (one worker per run); the module
about 25 s.
"""

from __future__ import annotations

import dataclasses
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.linalg import expm

from fmi_adjoint.errors import FmuError
from fmi_adjoint.export import export_fmu
from fmi_adjoint.fmu.archive import open_fmu
from fmi_adjoint.fmu.experiment import Tolerances
from fmi_adjoint.ssp.master import (GaussSeidel, Jacobi, LinearExtrapolation, MasterSettings, ZeroOrderHold,
                                    simulate_system)
from fmi_adjoint.ssp.monolithic import simulate_monolithic, system_interface
from fmi_adjoint.ssp.structure import Component, Connection, Connector, Endpoint, SystemStructure, Transformation
from fmi_adjoint.toolchain import c_compiler
from handwritten_fmus import build_fmu
from tolerances import EXACT, FROZEN_FD, GLOBAL_ERROR_AT_1E_10, ORDER, RADAU_BALL_CLOSED_FORM

if c_compiler() is None:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: the FMUs cannot be built", allow_module_level=True)

from test_ssp_master import _HEADER, _M2, MODEL_A, _outputs, export_models  # noqa: E402 (after the skip)

#: A with its ground stiffness as the parameter k1.
ME_A = (MODEL_A.replace("stiffness = 1000.0", 'stiffness = "k1"') + '\n[parameters]\nk1 = 1000.0\n')
#: B: m2 pulled towards the input xa by the coupling spring kc (a load, so that B has no massless
#: node); ``force`` is the spring's force on m1.
ME_B = (_HEADER.format(name="split_load_b") + '\n[inputs]\nxa = 0.0\n' + _M2
        + '\n[[forces]]\ntype = "load"\nname = "coupling"\ncoordinate = "x2"\nexpression = "kc*(xa - x2)"\n'
        + _outputs(force="kc*(x2 - xa)", x2="x2") + '\n[parameters]\nkc = 500.0\n')
assert 'stiffness = "k1"' in ME_A
TOL = Tolerances(rtol=1e-10, atol=1e-12)
TIMES = np.linspace(0.0, 0.1, 21)


@pytest.fixture(scope="module")
def halves(tmp_path_factory):
    """{"A": archive, "B": archive} of the halves exported as Model Exchange FMUs."""
    archives = export_models(tmp_path_factory.mktemp("ssp_monolithic"), {"A": ME_A, "B": ME_B}, interface="me")
    yield archives
    for archive in archives.values():
        archive.close()


def _split(archives) -> SystemStructure:
    a = Component("A", archives["A"].path, "resources/A.fmu", "ModelExchange",
                  (Connector("F", "input"), Connector("x1", "output"), Connector("v1", "output")))
    b = Component("B", archives["B"].path, "resources/B.fmu", "any",
                  (Connector("xa", "input"), Connector("force", "output"), Connector("x2", "output")))
    return SystemStructure("split", "split.ssd", (Connector("gap", "output"),), (a, b),
                           (Connection(Endpoint("A", "x1"), Endpoint("B", "xa")),
                            Connection(Endpoint("B", "force"), Endpoint("A", "F")),
                            Connection(Endpoint("B", "x2"), Endpoint(None, "gap"), Transformation(-2.0, 0.25))))


def _exact(times: np.ndarray, k1: float, kc: float) -> np.ndarray:
    """(x1, x2) of the monolithic model M x'' + D x' + K x = 0 from x = 0, x1' = 0.1 (the matrix
    exponential of its first-order form)."""
    mass, damping = np.diag([1.0, 0.5]), np.diag([1.0, 0.5])
    stiffness = np.array([[k1 + kc, -kc], [-kc, kc]])
    inverse = np.linalg.inv(mass)
    system = np.block([[np.zeros((2, 2)), np.eye(2)], [-inverse @ stiffness, -inverse @ damping]])
    start = np.array([0.0, 0.0, 0.1, 0.0])
    return np.array([(expm(system * t) @ start)[:2] for t in times])


def _frozen_differences(run_at, run, names, values: dict[str, float], relative: float = 1e-5) -> np.ndarray:
    """Central differences of the outputs on the run's own nodes, (times, columns, parameters)."""
    columns = []
    for name in names:
        h = relative * abs(values[name])
        plus = run_at({**values, name: values[name] + h}, run.nodes)
        minus = run_at({**values, name: values[name] - h}, run.nodes)
        columns.append((plus - minus) / (2 * h))
    return np.stack(columns, axis=-1)


def test_split_system_equals_the_monolithic_model_and_its_sensitivities_are_exact(halves):
    structure = _split(halves)
    values = {"A.k1": 1100.0, "B.kc": 450.0}
    run = simulate_monolithic(structure, halves, 0.1, times=TIMES, tolerances=TOL, values=values,
                              sensitivities=tuple(values))
    assert run.result.columns == ("A.x1", "A.v1", "B.force", "B.x2", "gap")
    exact = _exact(TIMES, 1100.0, 450.0)
    scale = np.max(np.abs(exact))
    assert np.max(np.abs(run.result.column("A.x1") - exact[:, 0])) <= GLOBAL_ERROR_AT_1E_10 * scale
    assert np.max(np.abs(run.result.column("B.x2") - exact[:, 1])) <= GLOBAL_ERROR_AT_1E_10 * scale
    gap = 0.25 - 2.0 * run.result.column("B.x2")
    np.testing.assert_allclose(run.result.column("gap"), gap, rtol=EXACT, atol=EXACT * np.max(np.abs(gap)))
    force = 450.0 * (run.result.column("B.x2") - run.result.column("A.x1"))
    np.testing.assert_allclose(run.result.column("B.force"), force, rtol=EXACT, atol=EXACT * np.max(np.abs(force)))
    assert run.info["events"] == []

    def run_at(vals, nodes):
        return simulate_monolithic(structure, halves, 0.1, times=TIMES, tolerances=TOL, values=vals,
                                   nodes=nodes).result.values

    fd = _frozen_differences(run_at, run, tuple(values), values)
    assert run.sensitivities is not None and run.sensitivities.shape == fd.shape == (TIMES.size, 5, 2)
    for i in range(2):  # each parameter moves both masses: through its own component and the coupling
        assert np.max(np.abs(fd[:, :, i])) > 0 and np.max(np.abs(fd[:, 3, i])) > 0
        assert np.max(np.abs(run.sensitivities[:, :, i] - fd[:, :, i])) <= FROZEN_FD * np.max(np.abs(fd[:, :, i]))


@pytest.fixture(scope="module")
def handwritten(tmp_path_factory):
    """Opened hand-written FMUs: the stair, the Van der Pol oscillator (also one that crashes at
    t = 0.3 s), the bouncing ball and the feedthrough gain."""
    folder = tmp_path_factory.mktemp("ssp_monolithic_fmus")
    archives = {"stair": open_fmu(build_fmu("stair", folder)), "vdp": open_fmu(build_fmu("van_der_pol_me", folder)),
                "ball": open_fmu(build_fmu("bouncing_ball", folder)),
                "crash": open_fmu(build_fmu("van_der_pol_me", folder, ("FA_CRASH_AT=0.3",))),
                "gain": open_fmu(build_fmu("feedthrough", folder))}
    yield archives
    for archive in archives.values():
        archive.close()


VDP = (Connector("u", "input"), Connector("x0", "output"), Connector("x1", "output"))


def _driven(driver: Component, output: str, transformation: Transformation, vdp_path: Path) -> SystemStructure:
    vdp = Component("V", vdp_path, "vdp.fmu", "ModelExchange", VDP)
    return SystemStructure("driven", "driven.ssd", (), (driver, vdp),
                           (Connection(Endpoint(driver.name, output), Endpoint("V", "u"), transformation),))


def _vdp_pieces(times: np.ndarray, edges, start, rhs) -> np.ndarray:
    """scipy's DOP853 (rtol 1e-13) of ``rhs(t, y, piece)`` over the pieces between ``edges``; the
    state at ``times``, left limits at the edges; ``start(piece, y)`` the state a piece starts from."""
    rows, y = [], None
    for k in range(len(edges) - 1):
        y = start(k, y)
        solution = solve_ivp(rhs, (edges[k], edges[k + 1]), y, args=(k,), method="DOP853", rtol=1e-13, atol=1e-14,
                             dense_output=True)
        inside = times[(times > edges[k]) & (times <= edges[k + 1])] if k else times[times <= edges[1]]
        rows.append(solution.sol(inside).T)
        y = solution.y[:, -1]
    return np.vstack(rows)


def test_time_events_of_one_component_drive_another(handwritten):
    stair = Component("S", handwritten["stair"].path, "stair.fmu", "any", (Connector("level", "output"),))
    structure = _driven(stair, "level", Transformation(0.5, 0.1), handwritten["vdp"].path)
    archives = {"S": handwritten["stair"], "V": handwritten["vdp"]}
    times = np.linspace(0.0, 1.2, 25)  # 0.5 s and 1 s among them: left limits there
    values = {"S.a": 2.0, "S.c": 1.0, "V.mu": 1.0}
    run = simulate_monolithic(structure, archives, 1.2, times=times, tolerances=TOL, values=values,
                              sensitivities=tuple(values))
    assert [kind for _, kind in run.info["events"]] == ["time", "time"]
    np.testing.assert_allclose([t for t, _ in run.info["events"]], [0.5, 1.0], rtol=EXACT)

    # der(x0) = x1, der(x1) = mu (1 - x0^2) x1 - x0 + u, u = 0.5 (a counter + xs) + 0.1, der(xs) = -c xs
    def rhs(t, y, counter):
        u = 0.5 * (2.0 * counter + y[2]) + 0.1
        return [y[1], (1 - y[0] ** 2) * y[1] - y[0] + u, -y[2]]

    reference = _vdp_pieces(times, (0.0, 0.5, 1.0, 1.2), lambda k, y: [2.0, 0.0, 1.0] if y is None else y, rhs)
    scale = np.max(np.abs(reference[:, :2]))
    for j, column in enumerate(("V.x0", "V.x1")):
        assert np.max(np.abs(run.result.column(column) - reference[:, j])) <= GLOBAL_ERROR_AT_1E_10 * scale
    counter = np.maximum(np.ceil(times / 0.5 - 1e-12) - 1, 0)  # the left limit at an event
    np.testing.assert_allclose(run.result.column("S.level"), 2.0 * counter + reference[:, 2],
                               rtol=GLOBAL_ERROR_AT_1E_10)

    def run_at(vals, nodes):
        return simulate_monolithic(structure, archives, 1.2, times=times, tolerances=TOL, values=vals,
                                   nodes=nodes).result.values

    fd = _frozen_differences(run_at, run, tuple(values), values)
    for i in range(3):
        assert np.max(np.abs(fd[:, 1:, i])) > 1e-3  # every parameter moves the oscillator
        assert np.max(np.abs(run.sensitivities[:, :, i] - fd[:, :, i])) <= FROZEN_FD * np.max(np.abs(fd[:, :, i]))


def test_fmi2_and_fmi3_components_are_coupled_alike(handwritten, tmp_path):
    """The stair (FMI 2.0) driving the Van der Pol oscillator as FMI 3.0 (``van_der_pol_me3``, the
    same equations through the FMI 3 layer) gives the run with the FMI 2.0 oscillator, and its
    sensitivities."""
    with open_fmu(build_fmu("van_der_pol_me3", tmp_path)) as vdp3:
        stair = Component("S", handwritten["stair"].path, "stair.fmu", "any", (Connector("level", "output"),))
        times = np.linspace(0.0, 0.8, 9)
        runs = [simulate_monolithic(_driven(stair, "level", Transformation(0.5, 0.1), archive.path),
                                    {"S": handwritten["stair"], "V": archive}, 0.8, times=times, tolerances=TOL,
                                    sensitivities=("S.a", "V.mu"))
                for archive in (handwritten["vdp"], vdp3)]
    assert vdp3.fmi_version == 3
    np.testing.assert_array_equal(runs[1].result.values, runs[0].result.values)  # the same arithmetic
    np.testing.assert_array_equal(runs[1].sensitivities, runs[0].sensitivities)


def test_state_events_of_one_component_drive_another(handwritten):
    ball = Component("B", handwritten["ball"].path, "ball.fmu", "any", (Connector("v", "output"),))
    structure = _driven(ball, "v", Transformation(1.0, 0.0), handwritten["vdp"].path)
    archives = {"B": handwritten["ball"], "V": handwritten["vdp"]}
    times = np.linspace(0.0, 0.8, 17)
    values = {"B.e": 0.8, "B.floor": -0.1, "V.mu": 1.0}
    run = simulate_monolithic(structure, archives, 0.8, times=times, tolerances=TOL, values=values,
                              sensitivities=tuple(values))
    g, e = 9.81, 0.8
    bounce = np.sqrt(2 * 1.1 / g)  # from h = 1 to the floor at -0.1
    assert [kind for _, kind in run.info["events"]] == ["state"]
    assert abs(run.info["events"][0][0] - bounce) <= RADAU_BALL_CLOSED_FORM

    def rhs(t, y, piece):
        v = -g * t if piece == 0 else e * g * bounce - g * (t - bounce)
        return [y[1], (1 - y[0] ** 2) * y[1] - y[0] + v]

    reference = _vdp_pieces(times, (0.0, bounce, 0.8), lambda k, y: [2.0, 0.0] if y is None else y, rhs)
    scale = np.max(np.abs(reference))
    for j, column in enumerate(("V.x0", "V.x1")):
        assert np.max(np.abs(run.result.column(column) - reference[:, j])) <= GLOBAL_ERROR_AT_1E_10 * scale

    def run_at(vals, nodes):
        return simulate_monolithic(structure, archives, 0.8, times=times, tolerances=TOL, values=vals,
                                   nodes=nodes).result.values

    fd = _frozen_differences(run_at, run, tuple(values), values)
    for i in range(3):
        assert np.max(np.abs(fd[:, 1:, i])) > 1e-3  # the bounce's parameters move the oscillator
        assert np.max(np.abs(run.sensitivities[:, :, i] - fd[:, :, i])) <= FROZEN_FD * np.max(np.abs(fd[:, :, i]))


GAIN = (Connector("u", "input"), Connector("y", "output"))


def _gain_loop(path: Path, vdp: Path | None = None) -> SystemStructure:
    """Two gains y = k u + c in a loop, A.u = 0.5 B.y + 0.25 and B.u = A.y, and with ``vdp`` the
    Van der Pol oscillator driven by A.y."""
    components = [Component("A", path, "gain.fmu", "any", GAIN), Component("B", path, "gain.fmu", "any", GAIN)]
    connections = [Connection(Endpoint("A", "y"), Endpoint("B", "u")),
                   Connection(Endpoint("B", "y"), Endpoint("A", "u"), Transformation(0.5, 0.25))]
    if vdp is not None:
        components.append(Component("V", vdp, "vdp.fmu", "any", VDP))
        connections.append(Connection(Endpoint("A", "y"), Endpoint("V", "u")))
    return SystemStructure("loop", "loop.ssd", (), tuple(components), tuple(connections))


#: A with its acceleration as an output: it depends directly on the coupling force F (an
#: algebraic loop with B, whose force depends directly on its input).
ME_A_ACCELERATION = ME_A.replace("\n[parameters]", _outputs(a1="der2(x1)") + "\n[parameters]")


def test_algebraic_loops_are_solved_in_the_right_hand_side(halves, handwritten, tmp_path):
    """A loop through the states: A's acceleration a1 = F - k1 x1 - d1 v1 moves B's anchor,
    xa = c a1, and B's force kc (x2 - xa) is A's F; the coupled system is linear, solved exactly
    by the matrix exponential, and its sensitivities equal central differences on the same nodes.
    A loop of two gains driving the oscillator takes its closed form."""
    (tmp_path / "A.toml").write_text(ME_A_ACCELERATION)
    export_fmu(tmp_path / "A.toml", tmp_path / "A.fmu", interface="me")
    with open_fmu(tmp_path / "A.fmu") as accelerating:
        archives = {"A": accelerating, "B": halves["B"]}
        assert {u.variable.name: [d.name for d in u.dependencies] for u in accelerating.description.outputs}["a1"] \
            == ["F", "q.x1", "v.x1"]
        c, k1, kc, d1 = 1e-3, 1000.0, 500.0, 1.0
        structure = SystemStructure("loop", "loop.ssd", (), (
            Component("A", accelerating.path, "A.fmu", "any", (Connector("F", "input"), Connector("x1", "output"),
                                                               Connector("a1", "output"))),
            Component("B", halves["B"].path, "B.fmu", "any", (Connector("xa", "input"), Connector("force", "output"),
                                                              Connector("x2", "output")))),
            (Connection(Endpoint("A", "a1"), Endpoint("B", "xa"), Transformation(c, 0.0)),
             Connection(Endpoint("B", "force"), Endpoint("A", "F"))))
        run = simulate_monolithic(structure, archives, 0.1, times=TIMES, tolerances=TOL, sensitivities=("A.k1", "B.kc"))
        # F = kc (x2 - c a1), a1 = F - k1 x1 - d1 v1: F = (kc x2 + kc c (k1 x1 + d1 v1)) / (1 + kc c)
        alpha, beta, gamma = kc / (1 + kc * c), kc * c * k1 / (1 + kc * c), kc * c * d1 / (1 + kc * c)
        a1 = np.array([beta - k1, alpha, gamma - d1, 0.0])  # a1 over (x1, x2, v1, v2)
        system = np.zeros((4, 4))
        system[0, 2] = system[1, 3] = 1.0
        system[2] = a1
        system[3] = 2.0 * (kc * c * a1 + np.array([0.0, -kc, 0.0, -0.5]))  # m2 = 0.5, damping 0.5
        exact = np.array([expm(system * t) @ [0.0, 0.0, 0.1, 0.0] for t in TIMES])
        scale = np.max(np.abs(exact[:, :2]))
        for j, column in enumerate(("A.x1", "B.x2")):
            assert np.max(np.abs(run.result.column(column) - exact[:, j])) <= GLOBAL_ERROR_AT_1E_10 * scale

        def run_at(vals, nodes):
            return simulate_monolithic(structure, archives, 0.1, times=TIMES, tolerances=TOL, values=vals,
                                       nodes=nodes).result.values

        values = {"A.k1": k1, "B.kc": kc}
        # The right-hand side at a point depends on the point alone (every Newton solve from the run's
        # first solution): a replay on the nodes, without sensitivities, repeats the run bit for bit.
        np.testing.assert_array_equal(run_at(values, run.nodes), run.result.values)
        fd = _frozen_differences(run_at, run, tuple(values), values)
        for i in range(2):
            assert np.max(np.abs(run.sensitivities[:, :, i] - fd[:, :, i])) <= FROZEN_FD * np.max(np.abs(fd[:, :, i]))

    gains = {"A": handwritten["gain"], "B": handwritten["gain"], "V": handwritten["vdp"]}
    loop = simulate_monolithic(_gain_loop(handwritten["gain"].path, handwritten["vdp"].path), gains, 0.2,
                               times=np.array([0.0, 0.1, 0.2]), tolerances=TOL, values={"B.k": 0.8})
    # y_A = k_A (0.5 (k_B y_A + c_B) + 0.25) + c_A with k_A = 2, c_A = c_B = 0.5, k_B = 0.8
    np.testing.assert_allclose(loop.result.column("A.y"), 1.5 / (1.0 - 0.8), rtol=EXACT)
    np.testing.assert_allclose(loop.result.column("B.y"), 0.8 * 7.5 + 0.5, rtol=EXACT)


def test_the_loop_condition_does_not_count_the_ports_units():
    """:func:`~fmi_adjoint.fmu.me_system.loop_condition`, rho(|J^-1| (I + |G|)) with G = I - J: the
    engine mount cut at its bulge spring (F_b = c_H (x2 - x1in) into the load, x1 into the hydro
    part; c_H = 3.75e5 N/m) has J = [[1, c_H], [0, 1]], plain condition c_H^2 = 1.4e11, and 1 here;
    a change of the ports' units (J -> S J S^-1) leaves it unchanged; a loop gain of 1 is singular,
    one 1e-9 away is beyond MAX_LOOP_CONDITION, and so is a self-loop whose gain cancels to 6e-11
    (u = u + c: no solution; Bauer's rho(|J^-1| |J|) counts any 1 x 1 block as 1, a review found)."""
    from fmi_adjoint.fmu.me_system import MAX_LOOP_CONDITION, loop_condition

    mount = np.array([[1.0, 3.75e5], [0.0, 1.0]])
    assert np.linalg.cond(mount) > 1e11
    assert loop_condition(mount) == pytest.approx(1.0, rel=EXACT)
    rng = np.random.default_rng(1)
    for n in (2, 3, 5):
        jacobian = np.eye(n) - 0.5 * rng.standard_normal((n, n))
        for _ in range(5):
            units = np.exp(rng.uniform(-12, 12, n))
            assert loop_condition(units[:, None] * jacobian / units) == pytest.approx(loop_condition(jacobian),
                                                                                     rel=EXACT)
    assert loop_condition(np.array([[1.0, -2.0], [-0.5, 1.0]])) == np.inf  # loop gain 1
    assert not loop_condition(np.array([[1.0, -2.0], [-0.5, 1.0 + 1e-9]])) <= MAX_LOOP_CONDITION
    assert not loop_condition(np.array([[6e-11, 0.0], [-2.0, 1.0]])) <= MAX_LOOP_CONDITION
    assert loop_condition(np.array([[np.nan]])) == np.inf


def test_a_loop_whose_ports_differ_in_scale_is_solved(handwritten):
    """The gain loop with k_A = 1e-7 and k_B = 1e6 (loop gain 0.05, raw condition 2.5e11, which was
    refused as singular) takes its closed form, each input to its own relative tolerance."""
    gain = handwritten["gain"]
    k_a, k_b = 1e-7, 1e6
    loop = simulate_monolithic(_gain_loop(gain.path), {"A": gain, "B": gain}, 0.1, times=np.array([0.0, 0.1]),
                               tolerances=TOL, values={"A.k": k_a, "B.k": k_b})
    # u_A = 0.5 (k_B (k_A u_A + c_A) + c_B) + 0.25 with c_A = c_B = 0.5
    u_a = (0.5 * (k_b * 0.5 + 0.5) + 0.25) / (1.0 - 0.5 * k_b * k_a)
    np.testing.assert_allclose(loop.result.column("A.y"), k_a * u_a + 0.5, rtol=EXACT)
    np.testing.assert_allclose(loop.result.column("B.y"), k_b * (k_a * u_a + 0.5) + 0.5, rtol=EXACT)


@pytest.mark.parametrize("case, message", [
    ("loop", r"the algebraic loop through A\.u, B\.u has no unique solution \(the condition number of its "
             r"Jacobian, independent of the ports' units, is (inf|[0-9.]+e\+\d+)\) at t = 0 s; check the parameters"),
    ("integer", r"the connection to V\.u \(Integer, continuous\): not yet: discrete inputs in a Model Exchange "
                r"system"),
    ("co-simulation", r"component 'C' \(.*\): it has no Model Exchange interface \(or the SSD chooses "
                      r"CoSimulation\), so the system cannot be integrated as one ODE"),
    ("unknown", r"'V\.nu' names no variable|no variable named 'nu'"),
])
def test_refusals_are_one_line(handwritten, case, message):
    gain, vdp = handwritten["gain"], handwritten["vdp"]
    archives = {"A": gain, "B": gain, "S": handwritten["stair"], "V": vdp, "C": gain}
    sensitivities: tuple[str, ...] = ()
    values: dict[str, float] = {}
    if case == "loop":  # a loop gain of 1: u_A = 0.5 (k_B u_B + c_B) + 0.25, u_B = k_A u_A + c_A with k_A k_B = 2
        structure = _gain_loop(gain.path)
        values = {"B.k": 1.0}
    elif case == "integer":
        stair = Component("S", handwritten["stair"].path, "stair.fmu", "any",
                          (Connector("counter", "output", "Integer"),))
        structure = SystemStructure("d", "d.ssd", (), (stair, Component("V", vdp.path, "vdp.fmu", "any",
                                                                        (Connector("u", "input", "Integer"),))),
                                    (Connection(Endpoint("S", "counter"), Endpoint("V", "u")),))
    elif case == "co-simulation":
        structure = SystemStructure("cs", "cs.ssd", (), (
            Component("C", gain.path, "gain.fmu", "CoSimulation", GAIN),
            Component("V", vdp.path, "vdp.fmu", "any", VDP)), (Connection(Endpoint("C", "y"), Endpoint("V", "u")),))
    else:
        structure = _driven(Component("C", gain.path, "gain.fmu", "any", GAIN), "y", Transformation(), vdp.path)
        sensitivities = ("V.nu",)
    with pytest.raises(FmuError, match=message) as caught:
        simulate_monolithic(structure, archives, 0.1, times=np.array([0.0, 0.1]), values=values,
                            sensitivities=sensitivities)
    assert "\n" not in str(caught.value)


def test_a_crashing_component_is_one_error_naming_it_and_nothing_is_left_behind(handwritten):
    stair = Component("S", handwritten["stair"].path, "stair.fmu", "any", (Connector("level", "output"),))
    structure = _driven(stair, "level", Transformation(), handwritten["crash"].path)
    archives = {"S": handwritten["stair"], "V": handwritten["crash"]}
    with pytest.raises(FmuError, match=r"^driven\.ssd \(system driven\): the FMU binary crashed with SIGSEGV during "
                                       r"component 'V': getting the state derivatives"):
        simulate_monolithic(structure, archives, 0.5, tolerances=TOL)
    for archive in archives.values():
        assert not list(archive.directory.glob("worker-*")), archive.directory


def test_simulate_ssp_integrates_a_model_exchange_system_and_estimates_its_error(halves, tmp_path):
    """``simulate --ssp`` of a system whose components offer only Model Exchange: auto chooses
    the monolithic integration; the CSV holds the API's run bit for bit and ``--error-estimate``
    prints each column's difference to a run at tolerances 100 times tighter."""
    from captured_cli import cli
    from fmi_adjoint.data import read_csv
    from fmi_adjoint.ssp.reading import open_system
    from test_ssp_master import _write_ssp

    ssp = _write_ssp(halves["A"].path.parent, _split(halves))
    out = tmp_path / "system.csv"
    code, _, err = cli(["simulate", "--ssp", str(ssp), "--t-end", "0.1", "--step", "0.005", "--set", "A.k1=1100",
                        "--rtol", "1e-10", "--atol", "1e-12", "--error-estimate", "-o", str(out)])
    assert code == 0, err
    written = read_csv(out)
    with open_system(ssp) as system:
        ours = simulate_monolithic(system.structure, system.archives, 0.1, times=TIMES, tolerances=TOL,
                                   values={"A.k1": 1100.0}).result
        tight = simulate_monolithic(system.structure, system.archives, 0.1, times=TIMES, tolerances=TOL.tighter(),
                                    values={"A.k1": 1100.0}).result
    assert written.columns == ours.columns == ("A.x1", "A.v1", "B.force", "B.x2", "gap")
    np.testing.assert_array_equal(written.times, TIMES)
    np.testing.assert_array_equal(written.values, ours.values)
    line = next(row for row in err.splitlines() if row.strip().startswith("B.x2"))
    assert line.split()[1] == f"{np.max(np.abs(ours.column('B.x2') - tight.column('B.x2'))):.3g}"
    assert "estimated integration error at rtol = 1e-10" in err


@pytest.mark.parametrize("args, message", [
    (["--order", "gauss-seidel"], "--order applies to a co-simulation (--interface cs)"),
    (["--rtol", "2"], "--rtol 2.0: give a tolerance in"),
])
def test_simulate_ssp_model_exchange_refusals_are_one_line(halves, args, message):
    from captured_cli import cli, error_line
    from test_ssp_master import _write_ssp

    ssp = _write_ssp(halves["A"].path.parent, _split(halves))
    code, _, err = cli(["simulate", "--ssp", str(ssp), "--t-end", "0.1", *args])
    assert code == 2 and message in error_line(err), err


@pytest.fixture(scope="module")
def mixed(halves, tmp_path_factory):
    """{"A": archive, "B": archive}: A exported as Co-Simulation only, B the Model Exchange half."""
    folder = tmp_path_factory.mktemp("ssp_mixed")
    (folder / "A.toml").write_text(ME_A)
    export_fmu(folder / "A.toml", folder / "A.fmu", interface="cs")
    with open_fmu(folder / "A.fmu") as co_simulated:
        yield {"A": co_simulated, "B": halves["B"]}


def _any(structure: SystemStructure) -> SystemStructure:
    """``structure`` with every component's implementation ``any``."""
    return dataclasses.replace(structure, components=tuple(dataclasses.replace(c, implementation="any")
                                                           for c in structure.components))


@pytest.mark.parametrize("order, approximation, slope", [(Jacobi(), ZeroOrderHold(), 1),
                                                         (GaussSeidel(), ZeroOrderHold(), 1),
                                                         (Jacobi(), LinearExtrapolation(), 2)])
def test_a_mixed_system_runs_its_model_exchange_part_as_one_component_of_the_master(mixed, order, approximation,
                                                                                    slope):
    """A (Co-Simulation only) and B (Model Exchange only): the master steps B's part by Radau IIA
    over each macro step (its inputs held or ramped), and the co-simulation converges to the exact
    solution of the monolithic model with the order of the input approximation."""
    structure = _any(_split(mixed))
    assert system_interface(structure, mixed) == "CoSimulation"
    errors = []
    for step in (2e-3, 1e-3, 5e-4):
        result = simulate_system(structure, mixed, 0.1, MasterSettings(step, order, approximation, model_exchange=TOL))
        exact = _exact(result.times, 1000.0, 500.0)
        errors.append(max(np.max(np.abs(result.column("A.x1") - exact[:, 0])),
                          np.max(np.abs(result.column("B.x2") - exact[:, 1]))))
    slopes = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(np.abs(slopes - slope) <= ORDER), (errors, slopes)


def test_a_model_exchange_system_stepped_by_the_master_has_no_coupling_error(halves):
    """Every component in the Model Exchange part: the master steps the whole system as one unit,
    whose couplings are made at every point, so its result at any macro step is the monolithic
    run's, to the integration tolerance."""
    structure = _split(halves)
    result = simulate_system(structure, halves, 0.1, MasterSettings(5e-3, model_exchange=TOL))
    exact = _exact(result.times, 1000.0, 500.0)
    assert np.max(np.abs(result.column("B.x2") - exact[:, 1])) <= GLOBAL_ERROR_AT_1E_10 * np.max(np.abs(exact))


def test_interfaces_a_component_lacks_are_refused_by_name(handwritten, tmp_path):
    with open_fmu(build_fmu("faulty_decay_cs", tmp_path)) as decay:
        structure = SystemStructure("mixed", "mixed.ssd", (), (
            Component("D", decay.path, "decay.fmu", "any", (Connector("x", "output"),)),
            Component("V", handwritten["vdp"].path, "vdp.fmu", "any", VDP)),
            (Connection(Endpoint("D", "x"), Endpoint("V", "u")),))
        archives = {"D": decay, "V": handwritten["vdp"]}
        assert system_interface(structure, archives) == "CoSimulation"  # V as the master's Model Exchange part
        with pytest.raises(FmuError, match=r"component 'D' \(faulty_decay_cs\.fmu\): it has no Model Exchange "
                                           r"interface .*co-simulate it \(--interface cs\)"):
            system_interface(structure, archives, "me")
        only_me = dataclasses.replace(structure, components=(
            structure.components[0], dataclasses.replace(structure.components[1], implementation="CoSimulation")))
        with pytest.raises(FmuError, match=r"component 'V' \(van_der_pol_me\.fmu\): the FMU has neither a "
                                           r"Co-Simulation nor a Model Exchange interface"):
            system_interface(only_me, archives)


def test_validate_ssp_compares_a_model_exchange_system_with_data(halves, tmp_path):
    """``validate --ssp`` of the Model Exchange system: data made by the system at one stiffness
    give zero error (the same runs) at it, and at another stiffness the errors of that run."""
    from captured_cli import cli
    from fmi_adjoint.data import write_csv
    from test_ssp_master import _write_ssp

    structure = _split(halves)
    ssp = _write_ssp(halves["A"].path.parent, structure)
    truth = simulate_monolithic(structure, halves, 0.1, times=TIMES, values={"A.k1": 1100.0}).result
    other = simulate_monolithic(structure, halves, 0.1, times=TIMES, values={"A.k1": 900.0}).result
    data = tmp_path / "data.csv"
    write_csv(data, TIMES, {"A.x1": truth.column("A.x1"), "gap": truth.column("gap")})
    for k1, expected in ((1100.0, truth), (900.0, other)):
        folder = tmp_path / f"report{k1:g}"
        code, _, err = cli(["validate", "--ssp", str(ssp), "--data", str(data), "--set", f"A.k1={k1}", "-o",
                            str(folder)])
        assert code == 0, err
        summary = json.loads((folder / "report.json").read_text())
        assert summary["integrator"]["scheme"] == "Radau IIA (order 5), adaptive" and "master" not in summary
        for name in ("A.x1", "gap"):
            error = expected.column(name) - truth.column(name)
            scale = np.max(np.abs(truth.column(name)))
            assert summary["outputs"][name]["max_abs_error"] == pytest.approx(np.max(np.abs(error)), rel=EXACT,
                                                                              abs=EXACT * scale)
        assert (summary["outputs"]["A.x1"]["max_abs_error"] > 1e-4) == (k1 == 900.0)


def test_simulate_ssp_of_a_mixed_system_takes_the_tolerances_of_its_model_exchange_part(mixed, tmp_path):
    """``simulate --ssp`` of A (Co-Simulation) and B (Model Exchange): the master with B's part
    integrated at ``--rtol``/``--atol``, the API's run bit for bit; on a system without a Model
    Exchange part the tolerances are refused (they would do nothing)."""
    from captured_cli import cli, error_line
    from fmi_adjoint.data import read_csv
    from test_ssp_master import _write_ssp

    folder = tmp_path / "mixed"
    folder.mkdir()
    for name in ("A", "B"):
        (folder / f"{name}.fmu").write_bytes(mixed[name].path.read_bytes())
    structure = _any(_split(mixed))
    ssp = _write_ssp(folder, structure)
    out = tmp_path / "mixed.csv"
    code, _, err = cli(["simulate", "--ssp", str(ssp), "--step", "1e-3", "--t-end", "0.05", "--rtol", "1e-10",
                        "--atol", "1e-12", "-o", str(out)])
    assert code == 0, err
    ours = simulate_system(structure, mixed, 0.05, MasterSettings(1e-3, model_exchange=TOL))
    np.testing.assert_array_equal(read_csv(out).values, ours.values)
    only_cs = _write_ssp(folder, dataclasses.replace(structure, name="cs", components=(structure.components[0],),
                                                     connections=()))
    code, _, err = cli(["simulate", "--ssp", str(only_cs), "--step", "1e-3", "--t-end", "0.05", "--rtol", "1e-10"])
    assert code == 2 and "--rtol apply to Model Exchange components; every component of this co-simulation runs its " \
        "own Co-Simulation solver" in error_line(err), err


def test_model_files_are_components_of_a_system(halves, tmp_path):
    """A component that is an fmi-adjoint model file (type application/x-fmi-adjoint-model): the
    reader exports it through the build cache into the system's private folder and runs it as that
    FMU, so the system equals the one with the FMU exported by hand, bit for bit; a source that is
    not a model file, and a model file that does not load, are refused naming the component."""
    from fmi_adjoint.ssp.reading import open_system
    from test_ssp_master import _write_ssp

    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "A.toml").write_text(ME_A)
    (folder / "B.fmu").write_bytes(halves["B"].path.read_bytes())
    split = _split(halves)
    structure = dataclasses.replace(split, components=(
        dataclasses.replace(split.components[0], source="resources/A.toml"), split.components[1]))
    ssp = _write_ssp(folder, structure)
    with open_system(ssp) as system:
        run = simulate_monolithic(system.structure, system.archives, 0.1, times=TIMES, tolerances=TOL,
                                  values={"A.k1": 1100.0}, sensitivities=("A.k1",))
        private = system.archives["A"].path.parent
        assert private.is_dir() and not private.is_relative_to(folder)
    assert not private.exists()  # the exported FMU goes with the system
    by_hand = simulate_monolithic(split, halves, 0.1, times=TIMES, tolerances=TOL, values={"A.k1": 1100.0},
                                  sensitivities=("A.k1",))
    np.testing.assert_array_equal(run.result.values, by_hand.result.values)
    np.testing.assert_array_equal(run.sensitivities, by_hand.sensitivities)
    (folder / "A.toml").write_text(ME_A.replace("[model]", "[modell]"))
    with pytest.raises(FmuError, match=r"component 'A': the model file A\.toml: .*modell"):
        open_system(_write_ssp(folder, structure))
    (folder / "A.fmu").write_bytes(halves["A"].path.read_bytes())
    wrong = dataclasses.replace(structure, components=(
        dataclasses.replace(split.components[0], source="resources/A.fmu"), split.components[1]))
    ssd = _write_ssp(folder, wrong)
    text = zipfile.ZipFile(ssd).read("SystemStructure.ssd").decode().replace(
        'source="resources/A.fmu" type="application/x-fmu-sharedlibrary"',
        'source="resources/A.fmu" type="application/x-fmi-adjoint-model"')
    with zipfile.ZipFile(ssd, "w") as archive:
        archive.writestr("SystemStructure.ssd", text)
        archive.write(folder / "A.fmu", "resources/A.fmu")
        archive.write(folder / "B.fmu", "resources/B.fmu")
    with pytest.raises(FmuError, match=r"component 'A': type application/x-fmi-adjoint-model names an fmi-adjoint "
                                       r"model file, but its source A\.fmu is not a \.toml file"):
        open_system(ssd)


def test_the_model_exchange_part_reports_outputs_its_own_connections_move(handwritten, tmp_path):
    """R (``input_ramp_cs``, Co-Simulation: x' = k u integrated exactly over a held input) drives
    two gains of the Model Exchange part in a chain, R.x -> G1.u, G1.y -> G2.u (the part's own
    connection), G2.y -> R.u: after each macro step the master sets G1.u and must see G2.y move
    with it, so the run is the exact recursion x_{n+1} = x_n + H k (k2 (k1 x_n + c1) + c2)."""
    with open_fmu(build_fmu("input_ramp_cs", tmp_path)) as ramp:
        gain = handwritten["gain"]
        structure = SystemStructure("chain", "chain.ssd", (), (
            Component("R", ramp.path, "ramp.fmu", "any", (Connector("u", "input"), Connector("x", "output"))),
            Component("G1", gain.path, "gain.fmu", "ModelExchange", GAIN),
            Component("G2", gain.path, "gain.fmu", "ModelExchange", GAIN)),
            (Connection(Endpoint("R", "x"), Endpoint("G1", "u")), Connection(Endpoint("G1", "y"), Endpoint("G2", "u")),
             Connection(Endpoint("G2", "y"), Endpoint("R", "u"))))
        values = {"R.k": -0.5, "R.x_start": 1.0, "G1.k": 0.8, "G1.c": 0.1, "G2.k": 1.5, "G2.c": -0.2}
        step = 0.05
        result = simulate_system(structure, {"R": ramp, "G1": gain, "G2": gain}, 0.5, MasterSettings(step),
                                 values=values)
    x = [1.0]
    for _ in range(result.times.size - 1):
        x.append(x[-1] + step * -0.5 * (1.5 * (0.8 * x[-1] + 0.1) - 0.2))
    np.testing.assert_allclose(result.column("R.x"), x, rtol=EXACT)
    np.testing.assert_allclose(result.column("G2.y"), 1.5 * (0.8 * np.array(x) + 0.1) - 0.2, rtol=EXACT)


# -- the engine mount split at its bulge spring ------------------------------------------------------
ENGINE_MOUNT = Path(__file__).resolve().parents[1] / "fmi_adjoint" / "examples" / "engine_mount.toml"


def _mount_halves() -> tuple[str, str]:
    """The bundled hydro engine mount (Lauss et al. 2018, Sec. 5) as two model files cut at the
    bulge spring c_H (x1 - x2): ``load`` (the load mass x1 with the excitation, gravity and the
    elastomer, and the bulge force ``F_b`` as an input; outputs a1 and x1) and ``hydro`` (the
    massless node x2, membrane x3 and hydro mass x4 with the lever constraint, the bulge force
    c_H (x1in - x2) on x2 from the input ``x1in``; output the force on the load, c_H (x2 - x1in))."""
    text = ENGINE_MOUNT.read_text()
    parameters = text[text.index("[parameters]"):text.index("[inputs]")]
    header = '[simulation]\nt_end = 1.0\nstep = 1e-4\nalpha = -0.05\n\n' + parameters
    forces = text[text.index("[[forces]]"):text.index("[[constraints]]")]
    blocks = ["[[forces]]" + block for block in forces.split("[[forces]]")[1:]]
    by_name = {block.split('name = "')[1].split('"')[0]: block for block in blocks}
    load = ('[model]\nname = "mount_load"\n\n' + header
            + '\n[inputs]\nF_b = { value = 0.0, unit = "N" }\nF_ext = { value = 0.0, unit = "N" }\n\n'
            + '[[coordinates]]\nname = "x1"\nmass = "m_L"\n\n' + by_name["excitation"] + by_name["gravity"]
            + by_name["elastomer"]
            + '[[forces]]\ntype = "load"\nname = "bulge"\ncoordinate = "x1"\nexpression = "F_b"\n'
            + _outputs(a1="der2(x1)", x1="x1"))
    hydro = ('[model]\nname = "mount_hydro"\n\n' + header + '\n[inputs]\nx1in = { value = 0.0, unit = "m" }\n\n'
             + text[text.index('[[coordinates]]\nname = "x2"'):text.index("[[forces]]")]
             + '[[forces]]\ntype = "load"\nname = "bulge"\ncoordinate = "x2"\nexpression = "c_H*(x1in - x2)"\n\n'
             + by_name["membrane"] + by_name["hydro_damper"]
             + text[text.index("[[constraints]]"):text.index("[[outputs]]")] + _outputs(F_b="c_H*(x2 - x1in)"))
    return load, hydro


def _mount_split(tmp_path: Path, interface: str) -> tuple[Path, SystemStructure]:
    """(folder, system): the two halves as model-file components ``L`` and ``H`` in ``folder``,
    coupled x1 -> x1in and F_b -> F_b, and the monolithic mount exported there as ``M.fmu`` with
    ``interface``."""
    folder = tmp_path / "mount"
    folder.mkdir()
    load, hydro = _mount_halves()
    (folder / "L.toml").write_text(load)
    (folder / "H.toml").write_text(hydro)
    export_fmu(ENGINE_MOUNT, folder / "M.fmu", interface=interface)
    split = SystemStructure("mount", "mount.ssd", (), (
        Component("L", folder / "L.toml", "resources/L.toml", "any",
                  (Connector("F_b", "input"), Connector("a1", "output"), Connector("x1", "output"))),
        Component("H", folder / "H.toml", "resources/H.toml", "any",
                  (Connector("x1in", "input"), Connector("F_b", "output")))),
        (Connection(Endpoint("L", "x1"), Endpoint("H", "x1in")),
         Connection(Endpoint("H", "F_b"), Endpoint("L", "F_b"))))
    return folder, split


def test_the_engine_mount_split_at_its_bulge_spring_is_the_monolithic_mount(tmp_path):
    """The hydro engine mount split into two model-file components of an SSP (``load`` and
    ``hydro``, coupled x1 -> x1in and F_b -> F_b): integrated as one ODE it gives the monolithic
    mount's run (the bundled model exported as one Model Exchange FMU, integrated the same way) to
    round-off, and the sensitivities through the coupling to a parameter of each half (the elastomer
    stiffness c_E1 of the load, the cubic hydro damping d_H2 of the hydro part) equal the monolithic
    FMU's exact sensitivities: both are derivatives of the same discrete scheme (the same steps),
    whose parameter partials come from replays, so they agree as a frozen difference does with an
    exact derivative (``FROZEN_FD``)."""
    from fmi_adjoint.ssp.reading import open_system
    from test_ssp_master import _write_ssp

    folder, split = _mount_split(tmp_path, "me")
    times = np.linspace(0.0, 0.01, 11)
    tolerances = Tolerances(rtol=1e-8, atol=1e-10)
    with open_system(_write_ssp(folder, split)) as system, open_fmu(folder / "M.fmu") as mount:
        assert system_interface(system.structure, system.archives) == "CoSimulation"  # both interfaces: the master
        run = simulate_monolithic(system.structure, system.archives, 0.01, times=times, tolerances=tolerances,
                                  sensitivities=("L.c_E1", "H.d_H2"))
        monolithic = simulate_monolithic(
            SystemStructure("mono", "mono.ssd", (), (Component("M", mount.path, "M.fmu", "any", (
                Connector("a1", "output"), Connector("x1", "output"))),), ()),
            {"M": mount}, 0.01, times=times, tolerances=tolerances, sensitivities=("M.c_E1", "M.d_H2"))
    assert run.info["steps"] == monolithic.info["steps"]
    a1, reference = run.result.column("L.a1"), monolithic.result.column("M.a1")
    np.testing.assert_allclose(a1, reference, rtol=0, atol=EXACT * np.max(np.abs(reference)))
    for i in range(2):
        exact = monolithic.sensitivities[:, 0, i]
        assert np.max(np.abs(exact)) > 0
        assert np.max(np.abs(run.sensitivities[:, 0, i] - exact)) <= FROZEN_FD * np.max(np.abs(exact))


def test_the_engine_mount_split_at_its_bulge_spring_co_simulates_toward_the_monolithic_mount(tmp_path):
    """The same split through the co-simulation master (both halves as Co-Simulation, each with its
    index-3 HHT steps of 1e-4 s): its coupling chain (the hydro part's force F_b = c_H (x2 - x1in)
    depends directly on x1in, c_H = 3.75e5 N/m) was refused as a singular loop for its units (plain
    condition 1.4e11, :func:`~fmi_adjoint.fmu.me_system.loop_condition`).  Against the monolithic
    mount's Co-Simulation FMU on the same internal grid, the coupling error falls as the macro step
    H falls from 4e-4 to 1e-4 s with every order and approximation.  The bulge spring is stiff
    against the hydro side's small masses (sqrt(c_H / m_H) / 2 pi = 2.2 kHz), so these steps are not yet in the
    asymptotic range: the slopes are not the orders (measured over 0.05 s, a1: Jacobi with hold
    7.7e-2, 6.4e-2, 4.4e-2 of the signal; Gauss-Seidel 1.0e-1, 2.3e-2, 6.2e-5; linear extrapolation
    1.9e-3, 9.8e-4, 3.6e-4); the orders are shown on the oscillator (``test_ssp_master``)."""
    from fmi_adjoint.ssp.reading import open_system
    from test_ssp_master import _write_ssp

    folder, split = _mount_split(tmp_path, "cs")
    t_end, internal = 0.05, 1e-4
    ssp = _write_ssp(folder, split)
    with open_system(ssp) as system, open_fmu(folder / "M.fmu") as mount:
        monolithic = simulate_system(
            SystemStructure("mono", "mono.ssd", (), (Component("M", mount.path, "M.fmu", "any", (
                Connector("a1", "output"), Connector("x1", "output"))),), ()),
            {"M": mount}, t_end, MasterSettings(internal))
        reference = monolithic.column("M.a1")
        for order, approximation in ((Jacobi(), ZeroOrderHold()), (GaussSeidel(), ZeroOrderHold()),
                                     (Jacobi(), LinearExtrapolation())):
            errors = []
            for stride in (4, 2, 1):
                run = simulate_system(system.structure, system.archives, t_end,
                                      MasterSettings(stride * internal, order, approximation))
                errors.append(np.max(np.abs(run.column("L.a1") - reference[::stride])) / np.max(np.abs(reference)))
            assert errors[0] > errors[1] > errors[2], (order, approximation, errors)
    # The command line co-simulates it by default (both halves offer Co-Simulation) and says what
    # that costs and which option avoids it; not when the user chose the interface.
    from captured_cli import cli

    for interface, noted in (("auto", True), ("cs", False)):
        code, _, err = cli(["simulate", "--ssp", str(ssp), "--step", "1e-4", "--t-end", "0.002", "--interface",
                            interface, "-o", str(tmp_path / f"{interface}.csv")])
        assert code == 0, err
        assert ("coupling error is not estimated" in err and "--interface me integrates the system as one ODE"
                in err) == noted, err
