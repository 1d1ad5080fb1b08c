"""The ``macpherson_flexible`` example (issue 25): the MacPherson rig of Vanpaemel et al. (seed
003, Sec. 5.1) with the control arm and the knuckle flexible (flexible natural coordinates,
Craig-Bampton), the strut force of eq. (22) and the 13 parameters of Table 1.

(a) consistency with the rigid ``macpherson`` (no build): the frame builder numbers and places
    nodes as documented; the mesh files are what the committed generator writes; every flexible
    body has the mass, centre of mass and inertia tensor of the rigid body it replaces, and each
    node's rotary inertia is that of a rigid body; every node marker sits on the rigid model's
    hard point, the body frames on their reference nodes; all other entries (parameters, the
    other bodies, joints, forces, sensors) are the rigid file's;
(b) the stiff limit (slow: both builds): with the stiffness factors at 1e6 the outputs equal the
    rigid model's (STIFF_SUSPENSION_VS_RIGID) over 0.5 s, both started unloaded; at the steel
    value they differ (the bodies deform); ``fmi-adjoint simulate macpherson_flexible`` runs from
    the model file alone;
(c) Table 1 (slow): adjoint = forward sensitivities for the 13 parameters over the first 0.2 s
    of the bundled measurement, and = central differences for k and L, with the
    differences' own uncertainty estimated from several steps (see the test); the table scaled
    by the bounds as their Sec. 5.2 is printed by benchmarks/flexible_bodies.py.
"""

from __future__ import annotations

import tomllib

import numpy as np
import pytest
from captured_cli import cli
from test_strut import TABLE_1  # Vanpaemel et al., Table 1: parameter -> (start, lower, upper), SI
from tolerances import ADJOINT_VS_FORWARD, EXACT, GRADIENT_VS_FD, STIFF_SUSPENSION_VS_RIGID

from fmi_adjoint import Experiment, IdentificationProblem, LeastSquaresCost
from fmi_adjoint.errors import ModelError
from fmi_adjoint.examples import example_path
from fmi_adjoint.examples.macpherson_data import CHANNELS, noisy_measurement
from fmi_adjoint.examples.macpherson_flexible_mesh import ARM, KNUCKLE, body_fe, mass_properties, write_files
from fmi_adjoint.flexible import read_nodes
from fmi_adjoint.flexible.beams import frame_mesh

#: The flexible bodies: model-file name -> the generator's mesh.
FLEXIBLE = {"control_arm": ARM, "knuckle": KNUCKLE}

#: Stiffness factor of the stiff limit (b): the differences fall as 1 / factor (measured at
#: 1e2, 1e4, 1e6: 4.3e-3, 4.3e-5, 4.3e-7 for wheel_travel_x, the largest).
STIFF = 1e6

#: Simulated spans [s] of (b) and (c): a forward run of the suspension costs far more per step
#: than the rigid one's (benchmarks/flexible_bodies.py); (b) covers half a period of the
#: load's slowest sine, (c) 200 steps.
STIFF_SPAN = 0.5
GRADIENT_SPAN = 0.2

#: Relative steps of the central differences of (c): their best-agreeing neighbours give the
#: difference and its uncertainty (the test's docstring).
FD_STEPS = (3e-4, 1e-4, 3e-5)



def _files():
    return (tomllib.loads(example_path("macpherson").read_text()),
            tomllib.loads(example_path("macpherson_flexible").read_text()))


# -- (a) consistency with the rigid model ------------------------------------------------------


def test_frame_mesh_numbers_interior_nodes_after_the_points_and_shares_the_corners():
    mesh = frame_mesh({1: (0, 0, 0), 2: (3, 0, 0), 5: (0, 3, 0)}, [(1, 2), (2, 5)], 3)
    assert mesh.node_ids.tolist() == [1, 2, 5, 6, 7, 8, 9]
    np.testing.assert_allclose(mesh.coordinates[3:], [(1, 0, 0), (2, 0, 0), (2, 1, 0), (1, 2, 0)], rtol=0, atol=EXACT)
    assert mesh.elements.tolist() == [[1, 6], [6, 7], [7, 2], [2, 8], [8, 9], [9, 5]]
    with pytest.raises(ModelError, match="member 1 = \\(2, 4\\)"):
        frame_mesh({1: (0, 0, 0), 2: (1, 0, 0)}, [(1, 2), (2, 4)])


def test_the_mesh_files_are_what_the_generator_writes(tmp_path):
    for written in write_files(tmp_path):
        bundled = example_path("macpherson_flexible").parent / written.name
        assert bundled.read_bytes() == written.read_bytes(), written.name


@pytest.mark.parametrize("name", FLEXIBLE)
def test_each_flexible_body_has_the_mass_properties_of_the_rigid_body(name):
    rigid, _ = _files()
    body = {b["name"]: b for b in rigid["bodies"]}[name]
    mass, centre, inertia = mass_properties(body_fe(FLEXIBLE[name]))
    assert mass == pytest.approx(body["mass"], rel=EXACT)
    np.testing.assert_allclose(centre, body["position"], rtol=0, atol=EXACT)
    np.testing.assert_allclose(inertia, np.diag(body["inertia"]), rtol=0, atol=EXACT * max(body["inertia"]))


@pytest.mark.parametrize("name", FLEXIBLE)
def test_every_nodes_rotary_inertia_is_a_rigid_bodys(name):
    """The FNCF's nodal rotary inertia needs the Euler tensor tr(J)/2 - J >= 0 of each node's
    rotation block (fmi_adjoint.mbs.flexible); HRZ-lumped Euler-Bernoulli beams break it."""
    fe = body_fe(FLEXIBLE[name])
    for node in fe.node_ids:
        rows = [fe.dof_index(int(node), 3 + c) for c in range(3)]
        J = fe.mass[rows][:, rows].toarray()
        assert np.linalg.eigvalsh(np.trace(J) / 2 * np.eye(3) - J).min() > 0, (name, int(node))


def test_node_markers_and_body_frames_sit_on_the_rigid_models_hard_points():
    rigid, flexible = _files()
    folder = example_path("macpherson_flexible").parent
    rigid_bodies = {b["name"]: b for b in rigid["bodies"]}
    flexible_bodies = {b["name"]: b for b in flexible["bodies"]}
    nodes = {name: read_nodes(folder / flexible_bodies[name]["fe"]["nodes"]) for name in FLEXIBLE}
    for name in FLEXIBLE:
        frame = nodes[name][flexible_bodies[name]["reference_node"]]
        np.testing.assert_array_equal(frame, flexible_bodies[name]["position"])
    rigid_markers = {m["name"]: m for m in rigid["markers"]}
    on_nodes = [m for m in flexible["markers"] if "node" in m]
    assert {m["body"] for m in on_nodes} == set(FLEXIBLE) and len(on_nodes) == 6
    for marker in on_nodes:
        twin = rigid_markers[marker["name"]]
        hard_point = np.add(rigid_bodies[twin["body"]]["position"], twin["position"])
        np.testing.assert_allclose(nodes[marker["body"]][marker["node"]], hard_point, rtol=0, atol=EXACT)
        assert set(marker) == {"name", "body", "node"}
    for marker in flexible["markers"]:
        if "node" not in marker:
            assert marker == rigid_markers[marker["name"]]


def test_everything_but_the_two_bodies_is_the_rigid_models():
    rigid, flexible = _files()
    extra = {"Es_arm", "Es_knuckle"}
    assert set(flexible["parameters"]) == set(rigid["parameters"]) | extra
    for name, value in rigid["parameters"].items():
        assert flexible["parameters"][name] == value, name
    for name in TABLE_1:
        spec = flexible["parameters"][name]
        assert (spec["value"], *spec["bounds"]) == TABLE_1[name], name
    assert all("bounds" not in flexible["parameters"][name] for name in extra)
    for key in ("simulation", "joints", "forces", "sensors"):
        assert flexible[key] == rigid[key], key
    assert flexible["model"]["gravity"] == rigid["model"]["gravity"]
    assert [b for b in flexible["bodies"] if b["name"] not in FLEXIBLE] == \
        [b for b in rigid["bodies"] if b["name"] not in FLEXIBLE]
    assert all(b["type"] == "flexible" for b in flexible["bodies"] if b["name"] in FLEXIBLE)


# -- (b) the stiff limit ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine(example_engine):
    return example_engine("macpherson_flexible")


@pytest.mark.slow  # two builds of some 100 s of CPU each
def test_stiff_bodies_give_the_rigid_models_outputs(engine, example_engine):
    """Both models start unloaded (no gravity, no static load, the spring at its free length)
    and the dynamic load rises from zero: the flexible bodies start undeformed, and a load at
    t = 0 would give them an initial acceleration that no stiffness changes (K delta = 0 there),
    which HHT carries into the velocities ((1 - gamma) h a_0) while the rigid model starts in
    equilibrium."""
    rigid = example_engine("macpherson")
    spring = rigid.simulate(t_end=rigid.compiled.model.simulation.step).outputs()[0]
    unloaded = {"g": 0.0, "F0": 0.0, "L": float(spring[rigid.compiled.output_index("strut_length")])}
    expected = rigid.simulate(rigid.compiled.parameter_vector(unloaded), t_end=STIFF_SPAN).outputs()
    model = engine.compiled
    columns = [model.output_index(name) for name in rigid.compiled.output_names]
    scale = np.abs(expected).max(axis=0)

    def difference(factor: float) -> np.ndarray:
        p = model.parameter_vector(unloaded | {"Es_arm": factor, "Es_knuckle": factor})
        return np.abs(engine.simulate(p, t_end=STIFF_SPAN).outputs()[:, columns] - expected).max(axis=0) / scale

    assert np.all(difference(STIFF) <= STIFF_SUSPENSION_VS_RIGID), difference(STIFF)
    assert np.max(difference(1.0)) > 100 * STIFF_SUSPENSION_VS_RIGID  # steel deforms visibly


@pytest.mark.slow  # the build (shared with the engine fixture through the build cache)
def test_the_example_simulates_from_the_command_line(engine, tmp_path):
    out = tmp_path / "fx.csv"
    code, _, err = cli(["simulate", "macpherson_flexible", "--t-end", "0.01", "-o", out])
    assert code == 0, err
    data = np.genfromtxt(out, delimiter=",", names=True)
    assert set(data.dtype.names) == {"time", *engine.compiled.output_names} and data.size == 11


# -- (c) Table 1: gradients --------------------------------------------------------------------------


@pytest.mark.slow  # one build and 2 + 4 * 3 * 2 simulations of 200 steps
def test_adjoint_equals_forward_sensitivities_and_central_differences_for_table_1(engine):
    """All 13: adjoint = forward sensitivities (ADJOINT_VS_FORWARD); k and L: adjoint = central
    differences (GRADIENT_VS_FD), the differences' own uncertainty estimated and below that tier
    too.

    k and L set the spring's preload on the flexible bodies, which start undeformed: the load
    at t = 0 excites their stiff static modes, whose oscillation the strut's friction law, sharp
    at v = 0, sees, and the cost's higher derivatives in k and L are large.  At the usual
    relative step 1e-3 the fourth-order differences' truncation error is then 8.6e-6 (k) and
    3.7e-5 (L) of the gradient, not the adjoint's: it falls with the step (measured for L:
    3.7e-5, 1.4e-6, 1.0e-10, 3.4e-11 at 1e-3, 3e-4, 1e-4, 3e-5; k: 8.6e-6, 4e-13, 8.5e-11 at
    1e-3, 3e-4, 1e-4; c_1 at most 4.8e-9 from 1e-2 to 1e-4, round-off growing below).  So, as
    benchmarks/large_models.py: of the relative steps :data:`FD_STEPS`, the two neighbours that
    agree best give the difference, and their disagreement its uncertainty."""
    times, data = noisy_measurement()
    kept = times <= GRADIENT_SPAN
    experiment = Experiment(engine.compiled, LeastSquaresCost(times[kept], data[kept], CHANNELS),
                            name="macpherson_flexible", engine=engine, t_end=float(times[kept][-1]))
    problem = IdentificationProblem([experiment], tuple(TABLE_1))
    adjoint = problem.evaluate(problem.start, "adjoint").gradient
    forward = problem.evaluate(problem.start, "forward").gradient
    assert np.all(adjoint != 0.0), adjoint  # the 0.2 s see every parameter of Table 1
    assert np.all(np.abs(adjoint - forward) <= ADJOINT_VS_FORWARD * np.abs(forward)), (adjoint, forward)
    # Central differences (4 runs a parameter and step) for the two that set the preload, whose
    # differences are the hardest (ten of the other 11 agree to 2.7e-8 at the step 1e-3; each
    # step and parameter costs 4 runs of the suspension).  benchmarks/flexible_bodies.py prints
    # all 13 as their Table 1.  b_f2, a component 3e-9 of the largest, cannot be checked to the
    # tier: the best pair of its differences (steps 3e-3 .. 1e-4) disagrees by 3.9e-6 (round-off).
    names = ("k", "L")
    keep = [list(TABLE_1).index(name) for name in names]
    subset = IdentificationProblem([experiment], names)  # the same point: both start at the model's values
    assert np.array_equal(subset.start, problem.start[keep])
    estimates = np.array([subset.finite_differences(subset.start, rel=rel, order=4) for rel in FD_STEPS])
    for j, name in enumerate(names):
        spread, fd = min((abs(a - b), a) for a, b in zip(estimates[:-1, j], estimates[1:, j]))
        assert spread <= GRADIENT_VS_FD * abs(fd), (name, estimates[:, j])  # the differences resolve it
        assert abs(adjoint[keep[j]] - fd) <= GRADIENT_VS_FD * abs(fd), (name, adjoint[keep[j]], fd, spread)
