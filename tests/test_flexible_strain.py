"""Strain outputs of flexible bodies (issue 25, part 5): strain gauges on beam elements,
recovered from the reduced basis (:mod:`fmi_adjoint.flexible.strain`,
:class:`fmi_adjoint.mbs.sensors.BeamStrain`, ``[[sensors]] type = "strain"``).

A steel cantilever of 10 Euler-Bernoulli elements, clamped at node 1, reduced by Craig-Bampton
with the tip as interface node (its static modes hold the static response to a tip load
exactly), in the planar floating frame (its build takes seconds) and, slow (about a minute to
build: 92 coordinates), in flexible natural coordinates:

* under a static tip load P the strain at the root fibre ``c`` equals ``-P L c / (E I)``
  (bending, ``M c / E I``) and under an axial tip load ``P / (E A)``: Hermite elements
  reproduce the cubic of end loads exactly, so only round-off is left;
* the strain row is exact for an element turned in space (a rotated mesh gives the same strain);
* the adjoint gradient of a least-squares cost on a strain output (with respect to the stiffness
  factor and the load) equals forward sensitivities and central differences;
* node accelerations (``MarkerAcceleration`` on a node marker) exist, and the model file reads a
  strain gauge.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from fmi_adjoint import mbs
from fmi_adjoint.costs import LeastSquaresCost, Sampler
from fmi_adjoint.engines import NativeEngine
from fmi_adjoint.errors import ModelError
from fmi_adjoint.flexible import BeamSection, LumpedMass, ModeCount, beam_model, line_mesh
from fmi_adjoint.flexible.strain import beam_strain_row
from fmi_adjoint.identify import Experiment, IdentificationProblem
from fmi_adjoint.integrate.initialization import initial_state
from fmi_adjoint.mbs.ffrf import PlanarFloatingFrameBody
from fmi_adjoint.mbs.sensors import BeamStrain
from fmi_adjoint.model import Parameter, SimulationSettings
from fmi_adjoint.model_file import load_model
from gradient_checks import assert_adjoint_equals_forward_and_central_differences
from tolerances import EXACT

WIDTH_Y, HEIGHT_Z = 0.03, 0.02
SECTION = BeamSection(E=2.1e11, G=8.1e10, A=WIDTH_Y * HEIGHT_Z, Iy=WIDTH_Y * HEIGHT_Z**3 / 12,
                      Iz=HEIGHT_Z * WIDTH_Y**3 / 12, J=2e-8, rho=7850.0)
LENGTH, ELEMENTS = 1.0, 10
TIP = ELEMENTS + 1


@functools.cache
def cantilever(formulation: type, load: tuple[str, str] = ("P_x", "P_y")) -> mbs.MultibodySystem:
    fe = beam_model(line_mesh(LENGTH, ELEMENTS), SECTION, mass=LumpedMass()).fe
    body = formulation("beam", fe=fe, reference_node=1, interface_nodes=(TIP,), modes=ModeCount(2),
                       stiffness_factor="EIs")
    c = WIDTH_Y / 2
    return mbs.MultibodySystem(
        f"cantilever_{formulation.__name__.lower()}",
        parameters=(Parameter("EIs", 1.0), Parameter("P_x", 0.0), Parameter("P_y", 0.0)), bodies=(body,),
        markers=(mbs.Marker("wall", "ground"), mbs.NodeMarker("root", "beam", node=1),
                 mbs.NodeMarker("tip", "beam", node=TIP)),
        joints=(mbs.Fixed("clamp", "wall", "root"),),
        forces=(mbs.Force("load", "tip", (load[0], load[1], 0)),),
        sensors=(BeamStrain("root_top", body="beam", nodes=(1, 2), position=0.0, fibre=(c, 0.0)),
                 BeamStrain("mid_bottom", body="beam", nodes=(6, 7), position=0.5, fibre=(-c, 0.0)),
                 mbs.MarkerAcceleration("tip_acc", "tip", components=("y",))),
        simulation=SimulationSettings(t_end=0.02, step=1e-4, alpha=-0.05))


@functools.cache
def engine(formulation: type) -> NativeEngine:
    return NativeEngine.build(cantilever(formulation).to_model())


def _static_outputs(model, p):
    """Static equilibrium (v = a = 0) by Newton on the compiled force and constraint functions."""
    n, m = model.n, model.m
    q = np.array(initial_state(model, p, 0.0).state[0])
    lam, zero = np.zeros(m), np.zeros(n)
    for _ in range(8):
        _, F, C = model.residual_terms(q, zero, zero, lam, 0.0, p)
        _, _, K, _, Cq = model.jacobian_terms(q, zero, zero, lam, 0.0, p)
        step = np.linalg.solve(np.block([[K, Cq.T], [Cq, np.zeros((m, m))]]), -np.concatenate([F, C]))
        q, lam = q + step[:n], lam + step[n:]
    return dict(zip(model.output_names, model.outputs(q, zero, zero, lam, 0.0, p)[0]))


@pytest.mark.parametrize("formulation", [pytest.param(mbs.FlexibleBody, marks=pytest.mark.slow),
                                         PlanarFloatingFrameBody])
def test_the_root_strain_of_a_cantilever_under_a_tip_load_is_M_c_over_EI(formulation):
    """Bending: eps = -y M / (E I_z) with M = P (L - x); axial: eps = P / (E A).  Small loads
    (tip deflection 1e-8 of L): the geometric nonlinearity of the moving frame is 1e-16."""
    model = engine(formulation).compiled
    P, c, EI = 1e-3, WIDTH_Y / 2, SECTION.E * SECTION.Iz
    bending = _static_outputs(model, model.parameter_vector({"P_y": P}))
    expected = {"root_top": -P * LENGTH * c / EI, "mid_bottom": P * (LENGTH - 0.55) * c / EI}
    for name, value in expected.items():
        assert abs(bending[name] - value) <= EXACT * abs(value), (name, bending[name], value)
    axial = _static_outputs(model, model.parameter_vector({"P_x": P}))
    for name in expected:
        assert abs(axial[name] - P / (SECTION.E * SECTION.A)) <= EXACT * P / (SECTION.E * SECTION.A)


def test_the_strain_row_is_the_same_for_a_rotated_element():
    """The row turns with the element: the strain of a displacement field is frame-independent."""
    rng = np.random.default_rng(1)
    u_local = rng.standard_normal(12)
    straight = beam_strain_row((0, 0, 0), (0.1, 0, 0), xi=0.3, fibre=(0.01, -0.02))
    axis = np.array([1.0, 2.0, 2.0]) / 3.0
    orientation = np.array([0.0, 1.0, -1.0])
    y = orientation - (orientation @ axis) * axis
    y /= np.linalg.norm(y)
    rotation = np.column_stack([axis, y, np.cross(axis, y)])  # local -> body
    u_body = np.concatenate([rotation @ u_local[3 * k:3 * k + 3] for k in range(4)])
    turned = beam_strain_row((1, 1, 1), np.array([1, 1, 1]) + 0.1 * axis, xi=0.3, fibre=(0.01, -0.02),
                             orientation=orientation)
    assert abs(turned @ u_body - straight @ u_local) <= EXACT * np.abs(straight).max() * np.abs(u_local).max()
    with pytest.raises(ModelError, match="is along the element"):
        beam_strain_row((0, 0, 0), (0.1, 0, 0), xi=0.0, fibre=(0, 0), orientation=(1, 0, 0))


def test_adjoint_gradient_of_a_strain_cost_equals_central_differences():
    """A step load at the tip sets the cantilever vibrating; the cost on two strain gauges."""
    built = engine(PlanarFloatingFrameBody)
    compiled = built.compiled
    truth = built.simulate(compiled.parameter_vector({"EIs": 1.1, "P_y": 100.0}))
    times = np.linspace(0.0, 0.02, 81)
    names = ("root_top", "mid_bottom")
    columns = [compiled.output_index(name) for name in names]
    data = Sampler.from_grid(truth.t, times).sample(truth.outputs()[:, columns])
    cost = LeastSquaresCost(times, data, names, scales=np.sqrt(np.mean(data**2, axis=0)))
    problem = IdentificationProblem([Experiment(compiled, cost, engine=built)], ("EIs", "P_y"),
                                    start={"EIs": 1.0, "P_y": 90.0})
    assert_adjoint_equals_forward_and_central_differences(problem)


def test_a_node_acceleration_is_the_second_derivative_of_its_position():
    """MarkerAcceleration on a node marker: on the clamped beam the tip's y acceleration equals
    the modal accelerations through the tip's mode rows (the frame held)."""
    built = engine(PlanarFloatingFrameBody)
    compiled = built.compiled
    traj = built.simulate(compiled.parameter_vector({"P_y": 100.0}))
    body = cantilever(PlanarFloatingFrameBody).bodies[0]
    rows = body.node_modes(TIP, "tip")[1]
    modal = [compiled.coordinate_names.index(name) for name in body.deformation_coordinates()]
    expected = traj.a[:, modal] @ rows
    measured = traj.outputs()[:, compiled.output_index("tip_acc_y")]
    assert np.abs(measured - expected).max() <= EXACT * np.abs(expected).max()
    assert np.abs(expected).max() > 1.0


def test_a_model_file_reads_a_strain_gauge(tmp_path):
    path = tmp_path / "gauge.toml"
    path.write_text("""[model]
name = "gauge"
[[bodies]]
name = "beam"
type = "flexible"
beam = { length = 1.0, elements = 4, E = 2e11, G = 8e10, A = 6e-4, Iy = 2e-8, Iz = 4e-8, J = 4e-8, rho = 7850.0 }
modes = 2
[[sensors]]
type = "strain"
name = "gauge"
body = "beam"
nodes = [1, 2]
position = 0.25
fibre = [0.015, 0.01]
""", encoding="utf-8")
    outputs = {o.name: o for o in load_model(path).outputs}
    assert outputs["gauge"].unit == "m/m"
    # Modes 1 (x-z bending) and 2 (x-y bending): the fibre off both neutral axes sees both.
    assert {s.name for s in outputs["gauge"].expression.free_symbols} == {"beam_d0", "beam_d1"}
    path.write_text(path.read_text(encoding="utf-8").replace("nodes = [1, 2]", "nodes = [1]"), encoding="utf-8")
    with pytest.raises(ModelError, match="two end nodes of a beam element"):
        load_model(path)
