"""Flexible bodies in the floating frame of reference formulation (issue 25, part 3; seed 004):
:class:`fmi_adjoint.mbs.ffrf.FloatingFrameBody` and its node markers.

The steel beam of tests/test_fncf.py (10 lumped Euler-Bernoulli elements), reduced by
Craig-Bampton clamped at its root with two normal modes (the first bending mode in each plane;
the FFRF mass matrix is written entry by entry, so its build grows fast with the modes: about
a minute with two):

* clamped and released under gravity it gives the same tip history as the FNCF body (the
  frame held, both are the same linear modal equations), and vibrates at the full FE model's
  first bending frequency in the x-y plane;
* hinged at its root and swinging (a moving frame, small deformation) it agrees with the FNCF
  body to the second-order terms in which the two differ;
* made stiff (stiffness factor 10^6) it swings as the rigid body of its masses;
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
from fmi_adjoint.mbs.ffrf import FloatingFrameBody
from fmi_adjoint.model import Parameter, SimulationSettings
from gradient_checks import assert_adjoint_equals_forward_and_central_differences
from rigid_equivalent import rigid_pendulum
from tolerances import EXACT, FFRF_VS_FNCF_SWINGING, FNCF_VS_FE, STIFF_FLEXIBLE_VS_RIGID

pytestmark = pytest.mark.slow  # every test builds an FFRF engine (about a minute; module docstring)

SECTION = BeamSection(E=2.1e11, G=8.1e10, A=0.02 * 0.03, Iy=0.03 * 0.02**3 / 12, Iz=0.02 * 0.03**3 / 12, J=2e-8,
                      rho=7850.0)
LENGTH, ELEMENTS = 1.0, 10
TIP = ELEMENTS + 1
PARAMETERS = (Parameter("EIs", 1.0), Parameter("rhos", 1.0), Parameter("g", 9.81))


@functools.cache
def beam():
    return beam_model(line_mesh(LENGTH, ELEMENTS), SECTION, mass=LumpedMass())


def body(formulation: type) -> mbs.Body:
    return formulation("beam", fe=beam().fe, reference_node=1, modes=ModeCount(2), stiffness_factor="EIs",
                       mass_factor="rhos")


def system(formulation: type, joint: type, t_end: float) -> mbs.MultibodySystem:
    """The beam along x in gravity -y, its root node on ``joint`` to the ground."""
    marker = mbs.NodeMarker  # on either formulation
    return mbs.MultibodySystem(
        f"{formulation.__name__}_{joint.__name__}".lower(), parameters=PARAMETERS, bodies=(body(formulation),),
        gravity=(0, "-g", 0),
        markers=(mbs.Marker("root", "ground"), marker("root_b", "beam", node=1), marker("tip", "beam", node=TIP)),
        joints=(joint("support", "root", "root_b"),),
        sensors=(mbs.MarkerPosition("tip_pos", "tip", components=("x", "y")),),
        simulation=SimulationSettings(t_end=t_end, step=1e-4, alpha=0.0))


@functools.cache
def engine(formulation: type, joint: type, t_end: float) -> NativeEngine:
    return NativeEngine.build(system(formulation, joint, t_end).to_model())


@functools.cache
def run(formulation: type, joint: type, t_end: float, EIs: float = 1.0):
    built = engine(formulation, joint, t_end)
    return built.simulate(built.compiled.parameter_vector({"EIs": EIs}))


def _upward_crossings(t: np.ndarray, s: np.ndarray) -> np.ndarray:
    k = np.flatnonzero((s[:-1] < 0) & (s[1:] >= 0))
    return t[k] - s[k] * (t[k + 1] - t[k]) / (s[k + 1] - s[k])


def test_the_clamped_beam_agrees_with_fncf_and_the_fe_models_first_bending_frequency():
    ffrf = run(FloatingFrameBody, mbs.Fixed, 0.2)
    fncf = run(mbs.FlexibleBody, mbs.Fixed, 0.2)
    y, y_fncf = ffrf.outputs()[:, 1], fncf.outputs()[:, 1]
    # The frame held, both formulations are M_ee eta'' + K eta = weight over the same basis:
    # measured 5e-15 of the amplitude.
    assert np.abs(y - y_fncf).max() <= EXACT * np.abs(y_fncf).max(), np.abs(y - y_fncf).max()
    # The basis holds the clamped FE model's own modes (no interface nodes), so the frequency of
    # the x-y bending mode is the FE model's (the time discretization's period error aside).
    f_fe = natural_frequencies(beam().fe, 2, fixed_nodes=[1])[1]
    y0 = y - 0.5 * (y.max() + y.min())
    crossings = _upward_crossings(ffrf.t, y0)
    frequency = (crossings.size - 1) / (crossings[-1] - crossings[0])
    assert crossings.size >= 4
    assert abs(frequency / f_fe - 1.0) <= FNCF_VS_FE, (frequency, f_fe)


def test_the_swinging_beam_agrees_with_fncf_at_small_deformation():
    ffrf = run(FloatingFrameBody, mbs.Revolute, 0.3).outputs()
    fncf = run(mbs.FlexibleBody, mbs.Revolute, 0.3).outputs()
    assert np.ptp(fncf[:, 1]) > 0.3  # it swings
    assert np.abs(ffrf - fncf).max() <= FFRF_VS_FNCF_SWINGING * LENGTH, np.abs(ffrf - fncf).max()


def test_a_stiff_floating_frame_pendulum_swings_as_the_rigid_body_of_its_masses():
    rigid = rigid_pendulum(beam().fe, LENGTH, PARAMETERS, SimulationSettings(t_end=0.3, step=1e-4, alpha=0.0))
    a = run(FloatingFrameBody, mbs.Revolute, 0.3, EIs=1e6).outputs()
    b = NativeEngine.build(rigid.to_model()).simulate().outputs()
    assert np.ptp(b[:, 1]) > 0.3
    assert np.abs(a - b).max() <= STIFF_FLEXIBLE_VS_RIGID * LENGTH, np.abs(a - b).max()


@pytest.mark.parametrize(("joint", "t_end"), [(mbs.Fixed, 0.02), (mbs.Revolute, 0.1)], ids=["clamped", "swinging"])
def test_adjoint_gradient_of_the_stiffness_and_mass_factors_equals_central_differences(joint, t_end):
    """Clamped: the modal equations; swinging: also the configuration-dependent mass matrix, its
    quadratic velocity terms and the weight's moment (the elastic part of the swing only depends
    on the factors)."""
    built = engine(FloatingFrameBody, joint, {mbs.Fixed: 0.2, mbs.Revolute: 0.3}[joint])
    compiled = built.compiled
    truth = built.simulate(compiled.parameter_vector({"EIs": 1.1, "rhos": 0.95}), t_end=t_end)
    times = np.linspace(0.0, t_end, 97)
    data = Sampler.from_grid(truth.t, times).sample(truth.outputs())
    cost = LeastSquaresCost(times, data, compiled.output_names, scales=np.sqrt(np.mean(data**2, axis=0)))
    problem = IdentificationProblem([Experiment(compiled, cost, t_end=t_end, engine=built)], ("EIs", "rhos"))
    assert_adjoint_equals_forward_and_central_differences(problem)


def test_the_invariants_of_the_lumped_beam():
    """m, the first moment S0 = sum m_p x_p (C0 = -[S0]x) and the modal mass (Psi^T M Psi,
    Shabana Sec. 5.5) against sums over the lumped masses."""
    fe = beam().fe
    ffrf = body(FloatingFrameBody)
    inv = ffrf.invariants
    dofs = np.asarray(fe.dofs)
    m_diag = fe.mass.diagonal()
    total = m_diag[dofs[:, 1] == 0].sum()
    S0 = sum(m * np.asarray(fe.coordinates)[list(fe.node_ids).index(n)] for (n, c), m in zip(dofs, m_diag) if c == 0)
    assert abs(inv.mass - total) <= EXACT * total
    skew = np.array([[0, -S0[2], S0[1]], [S0[2], 0, -S0[0]], [-S0[1], S0[0], 0]])
    assert np.abs(inv.C0 + skew).max() <= EXACT * np.abs(S0).max()
    psi = np.array([np.concatenate([ffrf.basis.translations[k], ffrf.basis.rotations[k]]) for k in range(TIP)])
    reference = np.einsum("kim,ki,kil->ml", psi, m_diag.reshape(TIP, 6), psi)
    assert np.abs(inv.modal_mass - reference).max() <= EXACT * np.abs(reference).max()


def test_floating_node_markers_are_refused_off_floating_frame_bodies():
    rigid = mbs.MultibodySystem(
        "bad", bodies=(mbs.PointMass("p", mass=1.0),), markers=(mbs.NodeMarker("m", "p", node=1),))
    with pytest.raises(ModelError, match="is not a flexible body"):
        rigid.to_model()
