"""Flexible bodies in flexible natural coordinates (issue 25, part 3; Vanpaemel et al., seed 003,
Sec. 3): :class:`fmi_adjoint.mbs.FlexibleBody` and :class:`~fmi_adjoint.mbs.NodeMarker`.

A steel beam (20 x 30 mm, 1 m, ten Euler-Bernoulli elements with HRZ-lumped mass) reduced by
Craig-Bampton (the tip as interface node, four normal modes):

* clamped at its reference node and released under gravity, it vibrates about its static
  deflection at the first bending frequency of the *full* FE model clamped there, and the
  average deflection is the FE model's static one;
* made stiff (stiffness factor 10^6) and hinged at the root, it swings as the rigid body of the
  same mass, centre of mass and inertia (translational lumped masses and nodal rotary inertia):
  the rigid part of the formulation (sigma, pi, the orthonormality constraints, the constant
  mass matrix of eq. (11), gravity) against the Euler-parameter body;
* the frame stays orthonormal and gamma = delta (x) pi (eq. (8)) along the run;
* the adjoint gradient with respect to the stiffness and mass factors equals forward
  sensitivities and central differences.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from fmi_adjoint import mbs
from fmi_adjoint.costs import LeastSquaresCost, Sampler
from fmi_adjoint.engines import NativeEngine
from fmi_adjoint.errors import ModelError
from fmi_adjoint.flexible import BeamSection, LumpedMass, ModeCount, beam_model, line_mesh, natural_frequencies
from fmi_adjoint.identify import Experiment, IdentificationProblem
from fmi_adjoint.model import Parameter, SimulationSettings
from gradient_checks import assert_adjoint_equals_forward_and_central_differences
from rigid_equivalent import rigid_pendulum
from tolerances import EXACT, FNCF_VS_FE, NEWTON_LEVEL, STIFF_FLEXIBLE_VS_RIGID

SECTION = BeamSection(E=2.1e11, G=8.1e10, A=0.02 * 0.03, Iy=0.03 * 0.02**3 / 12, Iz=0.02 * 0.03**3 / 12, J=2e-8,
                      rho=7850.0)
LENGTH, ELEMENTS = 1.0, 10
TIP = ELEMENTS + 1


@functools.cache
def beam():
    return beam_model(line_mesh(LENGTH, ELEMENTS), SECTION, mass=LumpedMass())


def flexible(**options) -> mbs.FlexibleBody:
    return mbs.FlexibleBody("beam", fe=beam().fe, reference_node=1, interface_nodes=(TIP,), modes=ModeCount(4),
                            stiffness_factor="EIs", mass_factor="rhos", **options)


def cantilever(t_end: float = 0.2) -> mbs.MultibodySystem:
    return mbs.MultibodySystem(
        "fncf_cantilever", parameters=(Parameter("EIs", 1.0), Parameter("rhos", 1.0), Parameter("g", 9.81)),
        bodies=(flexible(),), gravity=(0, "-g", 0),
        markers=(mbs.Marker("root", "ground"), mbs.NodeMarker("root_b", "beam", node=1),
                 mbs.NodeMarker("tip", "beam", node=TIP)),
        joints=(mbs.Fixed("clamp", "root", "root_b"),),
        sensors=(mbs.MarkerPosition("tip_pos", "tip", components=("y",)),),
        simulation=SimulationSettings(t_end=t_end, step=1e-4, alpha=0.0))


@functools.cache
def cantilever_run():
    engine = NativeEngine.build(cantilever().to_model())
    return engine, engine.simulate()


def _upward_crossings(t: np.ndarray, s: np.ndarray) -> np.ndarray:
    k = np.flatnonzero((s[:-1] < 0) & (s[1:] >= 0))
    return t[k] - s[k] * (t[k + 1] - t[k]) / (s[k + 1] - s[k])


def test_the_clamped_beam_vibrates_at_the_fe_models_first_bending_frequency():
    engine, traj = cantilever_run()
    y = traj.outputs()[:, 0]
    fe = beam().fe
    # The FE model clamped at node 1: its second mode bends in the x-y plane (gravity's), the
    # first in x-z (the weaker axis, not excited).
    f_fe = natural_frequencies(fe, 2, fixed_nodes=[1])[1]
    # Static deflection of the FE model under the same lumped weights.
    free = np.setdiff1d(np.arange(fe.size), fe.dof_indices([1]))
    load = np.zeros(fe.size)
    uy = np.flatnonzero(np.asarray(fe.dofs)[:, 1] == 1)
    load[uy] = -9.81 * fe.mass.diagonal()[uy]
    u = np.zeros(fe.size)
    u[free] = np.linalg.solve(fe.stiffness.toarray()[np.ix_(free, free)], load[free])
    static = u[fe.dof_index(TIP, 1)]
    crossings = _upward_crossings(traj.t, y - static)
    frequency = (crossings.size - 1) / (crossings[-1] - crossings[0])
    assert crossings.size >= 4
    assert abs(frequency / f_fe - 1.0) <= FNCF_VS_FE, (frequency, f_fe)
    window = (traj.t >= crossings[0]) & (traj.t <= crossings[-1])
    assert abs(np.mean(y[window]) / static - 1.0) <= FNCF_VS_FE, (np.mean(y[window]), static)
    # (The continuum's closed form, 1.8751^2 / (2 pi L^2) sqrt(EI / rho A) = 25.07 Hz, is 0.5 %
    # above: the discretization error of ten lumped elements, tests/test_flexible_fe.py's subject.)


def test_the_frame_stays_orthonormal_and_gamma_is_delta_kron_pi():
    engine, traj = cantilever_run()
    names = engine.compiled.coordinate_names
    q = traj.q
    pi = q[:, [names.index(f"beam_p{i}") for i in range(9)]]
    A = pi.reshape(-1, 3, 3).transpose(0, 2, 1)  # A[r, c] = pi[3 c + r]
    assert np.abs(A @ A.transpose(0, 2, 1) - np.eye(3)).max() <= NEWTON_LEVEL
    n = sum(1 for name in names if name.startswith("beam_d"))
    delta = q[:, [names.index(f"beam_d{k}") for k in range(n)]]
    gamma = q[:, [names.index(f"beam_g{j}") for j in range(9 * n)]]
    assert np.abs(gamma - np.einsum("tk,ti->tki", delta, pi).reshape(len(q), -1)).max() <= NEWTON_LEVEL
    assert np.abs(delta).max() > 1e-6  # it did deform


def test_a_stiff_flexible_pendulum_swings_as_the_rigid_body_of_its_masses():
    parameters = (Parameter("EIs", 1e6), Parameter("rhos", 1.0), Parameter("g", 9.81))
    settings = SimulationSettings(t_end=0.3, step=1e-4, alpha=0.0)
    flex = mbs.MultibodySystem(
        "fncf_pendulum", parameters=parameters, bodies=(flexible(),), gravity=(0, "-g", 0),
        markers=(mbs.Marker("pivot", "ground"), mbs.NodeMarker("root_b", "beam", node=1),
                 mbs.NodeMarker("tip", "beam", node=TIP)),
        joints=(mbs.Revolute("hinge", "pivot", "root_b"),),
        sensors=(mbs.MarkerPosition("tip_pos", "tip", components=("x", "y")),), simulation=settings)
    rigid = rigid_pendulum(beam().fe, LENGTH, parameters, settings)
    a = NativeEngine.build(flex.to_model()).simulate().outputs()
    b = NativeEngine.build(rigid.to_model()).simulate().outputs()
    assert np.ptp(b[:, 1]) > 0.3  # it swings
    # The stiff beam deflects by about 1e-7 of its length under its own swing.
    assert np.abs(a - b).max() <= STIFF_FLEXIBLE_VS_RIGID * LENGTH, np.abs(a - b).max()


def _gradient_problem():
    engine = NativeEngine.build(cantilever(t_end=0.02).to_model())
    compiled = engine.compiled
    truth = engine.simulate(compiled.parameter_vector({"EIs": 1.1, "rhos": 0.95}))
    times = np.linspace(0.0, 0.02, 97)
    data = Sampler.from_grid(truth.t, times).sample(truth.outputs())
    cost = LeastSquaresCost(times, data, compiled.output_names, scales=np.sqrt(np.mean(data**2, axis=0)))
    return IdentificationProblem([Experiment(compiled, cost, engine=engine)], ("EIs", "rhos"))


def test_adjoint_gradient_of_the_stiffness_and_mass_factors_equals_central_differences():
    assert_adjoint_equals_forward_and_central_differences(_gradient_problem())


def test_the_mass_matrix_is_the_projection_of_the_fe_mass_and_constant():
    """eq. (11): the rigid block of M_qq (sigma) is the total translational mass; the
    structured terms of the lowered model are data, the frame constraints quadratic."""
    body = flexible()
    basis = body.basis
    fe = beam().fe
    dofs = np.asarray(fe.dofs)
    total = fe.mass.diagonal()[dofs[:, 1] == 0].sum()
    assert np.allclose(basis.mass_qq[:3, :3], total * np.eye(3), rtol=EXACT, atol=0.0)
    model = cantilever().to_model()
    kinds = sorted(type(t).__name__ for t in model.matrix_terms)
    assert kinds.count("MatrixTerm") >= 3 and kinds.count("QuadraticConstraints") == 2
    assert basis.modes == 6 + 4  # the tip's six constraint modes and four normal modes


def test_node_markers_are_refused_off_flexible_bodies_and_off_the_mesh():
    system = cantilever()
    bad_node = mbs.MultibodySystem(
        "bad", parameters=system.parameters, bodies=system.bodies,
        markers=(mbs.NodeMarker("nowhere", "beam", node=99),), simulation=system.simulation)
    with pytest.raises(ModelError, match="node 99 is not a node of the FE model"):
        bad_node.to_model()
    rigid = mbs.MultibodySystem(
        "bad2", bodies=(mbs.PointMass("p", mass=1.0),), markers=(mbs.NodeMarker("m", "p", node=1),))
    with pytest.raises(ModelError, match="is not a flexible body"):
        rigid.to_model()
