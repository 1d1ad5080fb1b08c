"""Flexible bodies in the floating frame of reference formulation (issue 25, part 3; seed 004):
:class:`fmi_adjoint.mbs.ffrf.FloatingFrameBody` and its node markers.

The steel beam of tests/test_fncf.py (10 lumped Euler-Bernoulli elements), reduced by
Craig-Bampton clamped at its root with two normal modes (the first bending mode in each plane;
a build of about 12 s):

* clamped and released under gravity it gives the same tip history as the FNCF body (the
  frame held, both are the same linear modal equations), and vibrates at the full FE model's
  first bending frequency in the x-y plane;
* hinged at its root and swinging (a moving frame, small deformation) it agrees with the FNCF
  body to the second-order terms in which the two differ;
* made stiff (stiffness factor 10^6) it swings as the rigid body of its masses;
* the adjoint gradient with respect to the stiffness and mass factors equals forward
  sensitivities and central differences;
* its mass matrix, as pieces of the kinetic energy (frame, mode, pair of modes), gives the FE
  model's kinetic energy node by node, and is four component types at any number of modes.

The planar floating-frame body (:class:`~fmi_adjoint.mbs.ffrf.PlanarFloatingFrameBody`, the
beam's in-plane part, one normal mode: the x-y bending mode) builds in about two seconds, so its
tests run in the fast suite: hinged and swinging it agrees with the FNCF body (two modes, the
first of each plane) and, slow, with the spatial FFRF body; made stiff it swings as the planar
rigid body of its masses; its gradients with respect to the stiffness and mass factors and a
support stiffness equal central differences; its invariants are the sums over the lumped
masses; an FE model off the plane or coupling the planes is refused, naming the node or DOF.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import sympy as sp

from fmi_adjoint import mbs
from fmi_adjoint.assembly import Partition, partition
from fmi_adjoint.costs import LeastSquaresCost, Sampler
from fmi_adjoint.engines import NativeEngine
from fmi_adjoint.errors import ModelError
from fmi_adjoint.flexible import BeamSection, LumpedMass, ModeCount, beam_model, line_mesh, natural_frequencies
from fmi_adjoint.identify import Experiment, IdentificationProblem
from fmi_adjoint.flexible.fe import planar_part
from fmi_adjoint.mbs.ffrf import FloatingFrameBody, PlanarFloatingFrameBody
from fmi_adjoint.model_file import load_model
from fmi_adjoint.model import Output, Parameter, SimulationSettings, assemble
from gradient_checks import assert_adjoint_equals_forward_and_central_differences
from rigid_equivalent import rigid_pendulum
from tolerances import EXACT, FFRF_VS_FNCF_SWINGING, FNCF_VS_FE, STIFF_FLEXIBLE_VS_RIGID

#: The spatial FFRF tests build an FFRF engine each (about 12 s; module docstring).
slow = pytest.mark.slow

SECTION = BeamSection(E=2.1e11, G=8.1e10, A=0.02 * 0.03, Iy=0.03 * 0.02**3 / 12, Iz=0.02 * 0.03**3 / 12, J=2e-8,
                      rho=7850.0)
LENGTH, ELEMENTS = 1.0, 10
TIP = ELEMENTS + 1
PARAMETERS = (Parameter("EIs", 1.0), Parameter("rhos", 1.0), Parameter("g", 9.81))


@functools.cache
def beam():
    return beam_model(line_mesh(LENGTH, ELEMENTS), SECTION, mass=LumpedMass())


def body(formulation: type) -> mbs.Body:
    # Planar: the in-plane part has the x-y bending mode first (the spatial basis' second mode).
    modes = ModeCount(1 if formulation is PlanarFloatingFrameBody else 2)
    return formulation("beam", fe=beam().fe, reference_node=1, modes=modes, stiffness_factor="EIs",
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


@slow
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


@slow
def test_the_swinging_beam_agrees_with_fncf_at_small_deformation():
    ffrf = run(FloatingFrameBody, mbs.Revolute, 0.3).outputs()
    fncf = run(mbs.FlexibleBody, mbs.Revolute, 0.3).outputs()
    assert np.ptp(fncf[:, 1]) > 0.3  # it swings
    assert np.abs(ffrf - fncf).max() <= FFRF_VS_FNCF_SWINGING * LENGTH, np.abs(ffrf - fncf).max()


@slow
def test_a_stiff_floating_frame_pendulum_swings_as_the_rigid_body_of_its_masses():
    rigid = rigid_pendulum(beam().fe, LENGTH, PARAMETERS, SimulationSettings(t_end=0.3, step=1e-4, alpha=0.0))
    a = run(FloatingFrameBody, mbs.Revolute, 0.3, EIs=1e6).outputs()
    b = NativeEngine.build(rigid.to_model()).simulate().outputs()
    assert np.ptp(b[:, 1]) > 0.3
    assert np.abs(a - b).max() <= STIFF_FLEXIBLE_VS_RIGID * LENGTH, np.abs(a - b).max()


@slow
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


@slow
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


def test_the_mass_pieces_sum_to_the_kinetic_energy_of_the_fe_model():
    """The kinetic energy ``1/2 q_dot^T M(q) q_dot`` of the body's mass pieces (the base, one per
    mode, one per pair of modes; :func:`fmi_adjoint.mbs.ffrf._mass_pieces`, added by
    :func:`fmi_adjoint.model.assemble` as grouped entries) equals ``1/2 V^T M^FE V`` computed
    from the FE model itself, ``V = B_R A^T R_dot + B_w(eta) w' + Psi eta_dot`` node by node
    (module docstring of :mod:`fmi_adjoint.mbs.ffrf`), at random states.  The consistent-mass
    beam (rotary inertia and coupled DOFs), three modes (pieces of every form: ``k < m`` and
    ``k = m``), a mass factor of 1.3."""
    fe = beam_model(line_mesh(LENGTH, ELEMENTS), SECTION).fe
    body = FloatingFrameBody("beam", fe=fe, reference_node=1, modes=ModeCount(3), mass_factor="rhos")
    # Parameters named like the pieces' data (J 00, D 0, ...) without the space: no clash.
    parameters = (Parameter("rhos", 1.3), *(Parameter(name, 1.0) for name in ("C00", "D0", "F0", "H0", "J00")))
    model = mbs.MultibodySystem("pieces", parameters=parameters, bodies=(body,),
                                outputs=(Output("x", "beam_x"),)).to_model()
    groups = {entry.group for entry in model.mass_matrix}
    assert groups == {"beam_frame", *(f"beam_mode{k}" for k in range(3)),
                      *(f"beam_modes{k}_{m}" for k in range(3) for m in range(k, 3))}, groups
    symbolic = assemble(model, velocity_terms=False)
    mass = sp.lambdify([symbolic.q, symbolic.p], symbolic.M, "numpy")
    basis = body.basis
    dofs = np.asarray(fe.dofs)
    rows = np.array([int(np.flatnonzero(basis.node_ids == node)[0]) for node in dofs[:, 0]])
    rng = np.random.default_rng(5)
    for _ in range(3):
        e = rng.normal(size=4)
        e /= np.linalg.norm(e)
        R, eta, qdot = rng.normal(size=3), 1e-2 * rng.normal(size=3), rng.normal(size=10)
        e0, e1, e2, e3 = e
        A = np.array([[e0**2 + e1**2 - e2**2 - e3**2, 2 * (e1 * e2 - e0 * e3), 2 * (e1 * e3 + e0 * e2)],
                      [2 * (e1 * e2 + e0 * e3), e0**2 - e1**2 + e2**2 - e3**2, 2 * (e2 * e3 - e0 * e1)],
                      [2 * (e1 * e3 - e0 * e2), 2 * (e2 * e3 + e0 * e1), e0**2 - e1**2 - e2**2 + e3**2]])
        G = np.array([[-e1, e0, e3, -e2], [-e2, -e3, e0, e1], [-e3, e2, -e1, e0]])
        R_dot, e_dot, eta_dot = qdot[:3], qdot[3:7], qdot[7:]
        w = 2 * G @ e_dot                                       # body-axis angular velocity
        u = basis.positions + basis.translations @ eta          # deformed node positions (frame)
        V = np.empty(fe.size)
        for i, (row, comp) in enumerate(zip(rows, dofs[:, 1])):
            if comp < 3:
                V[i] = (A.T @ R_dot)[comp] + np.cross(w, u[row])[comp] + basis.translations[row, comp] @ eta_dot
            else:
                V[i] = w[comp - 3] + basis.rotations[row, comp - 3] @ eta_dot
        want = 0.5 * 1.3 * V @ (fe.mass @ V)
        M = np.asarray(mass(np.concatenate([R, e, eta]), [1.3, 1.0, 1.0, 1.0, 1.0, 1.0]), dtype=float)
        got = 0.5 * qdot @ M @ qdot
        assert abs(got - want) <= EXACT * abs(want), (got, want)


def test_the_mass_pieces_are_four_component_types_at_any_number_of_modes():
    """Frame, mode, pair and square: each piece's numbers are named data (zeros included), so
    the body's mass is four types with 3 modes and with 8 (round-off zeros of a straight beam
    made a type of almost every piece when the numbers were written into the expressions: 134
    types with 40 modes); the instances grow as the pairs of modes."""
    def mass_types(modes: int) -> tuple[set[str], int]:
        body = FloatingFrameBody("beam", fe=beam().fe, reference_node=1, modes=ModeCount(modes), mass_factor="rhos")
        model = mbs.MultibodySystem("pieces", parameters=(Parameter("rhos", 1.0),), bodies=(body,),
                                    outputs=(Output("x", "beam_x"),)).to_model()
        part = partition(model)
        assert isinstance(part, Partition)
        pieces = [i for i in part.instances if i.what.startswith("mass of beam_")]
        return {part.types[i.type].key for i in pieces}, len(pieces)

    (few, count_few), (many, count_many) = mass_types(3), mass_types(8)
    assert len(few) == 4 and few == many, (len(few), len(many))
    assert count_many > 3 * count_few, (count_few, count_many)


def test_floating_node_markers_are_refused_off_floating_frame_bodies():
    rigid = mbs.MultibodySystem(
        "bad", bodies=(mbs.PointMass("p", mass=1.0),), markers=(mbs.NodeMarker("m", "p", node=1),))
    with pytest.raises(ModelError, match="is not a flexible body"):
        rigid.to_model()


# -- the planar floating frame ------------------------------------------------------------------


def test_the_planar_swinging_beam_agrees_with_fncf_at_small_deformation():
    """The same in-plane motion in two coordinate sets (theta against rotation-matrix entries):
    measured 1.5e-8 of the length; without the rotation-deformation coupling f(eta) the planar
    body errs by far more (FFRF_VS_FNCF_SWINGING)."""
    planar = run(PlanarFloatingFrameBody, mbs.Revolute, 0.3).outputs()
    fncf = run(mbs.FlexibleBody, mbs.Revolute, 0.3).outputs()
    assert np.ptp(fncf[:, 1]) > 0.3
    assert np.abs(planar - fncf).max() <= FFRF_VS_FNCF_SWINGING * LENGTH, np.abs(planar - fncf).max()


@slow
def test_the_planar_swinging_beam_agrees_with_the_spatial_floating_frame():
    planar = run(PlanarFloatingFrameBody, mbs.Revolute, 0.3).outputs()
    spatial = run(FloatingFrameBody, mbs.Revolute, 0.3).outputs()
    assert np.abs(planar - spatial).max() <= FFRF_VS_FNCF_SWINGING * LENGTH, np.abs(planar - spatial).max()


def _planar_rigid_pendulum() -> mbs.MultibodySystem:
    """The planar rigid body of the lumped beam's masses (mass, centre, polar moment: the
    translational masses' second moment plus the nodes' rotary inertia about z), hinged at the
    origin."""
    fe = beam().fe
    dofs, m_diag, x = np.asarray(fe.dofs), fe.mass.diagonal(), np.asarray(fe.coordinates)[:, 0]
    node_x = {int(n): x[k] for k, n in enumerate(fe.node_ids)}
    masses = {int(n): m for (n, c), m in zip(dofs, m_diag) if c == 0}
    total = sum(masses.values())
    centre = sum(m * node_x[n] for n, m in masses.items()) / total
    inertia = sum(m * (node_x[n] - centre) ** 2 for n, m in masses.items()) + m_diag[dofs[:, 1] == 5].sum()
    return mbs.MultibodySystem(
        "planar_rigid_pendulum", parameters=PARAMETERS, gravity=(0, "-g", 0),
        bodies=(mbs.PlanarRigidBody("rod", mass=total, inertia=inertia, position=(centre, 0)),),
        markers=(mbs.Marker("pivot", "ground"), mbs.Marker("root_b", "rod", position=(-centre, 0, 0)),
                 mbs.Marker("tip", "rod", position=(LENGTH - centre, 0, 0))),
        joints=(mbs.Revolute("hinge", "pivot", "root_b"),),
        sensors=(mbs.MarkerPosition("tip_pos", "tip", components=("x", "y")),),
        simulation=SimulationSettings(t_end=0.3, step=1e-4, alpha=0.0))


def test_a_stiff_planar_floating_frame_pendulum_swings_as_the_planar_rigid_body_of_its_masses():
    a = run(PlanarFloatingFrameBody, mbs.Revolute, 0.3, EIs=1e6).outputs()
    b = NativeEngine.build(_planar_rigid_pendulum().to_model()).simulate().outputs()
    assert np.ptp(b[:, 1]) > 0.3
    assert np.abs(a - b).max() <= STIFF_FLEXIBLE_VS_RIGID * LENGTH, np.abs(a - b).max()


def _supported_beam() -> mbs.MultibodySystem:
    """The planar beam on a vertical spring-damper at each end (bushings, ``k_v``), falling."""
    support = {"type": "linear_spring_damper", "stiffness": "k_v", "damping": 5.0, "free_length": 0}
    return mbs.MultibodySystem(
        "supported_planar_beam", parameters=(*PARAMETERS, Parameter("k_v", 2e4)), gravity=(0, "-g", 0),
        bodies=(body(PlanarFloatingFrameBody),),
        markers=(mbs.Marker("a", "ground"), mbs.Marker("b", "ground", position=(LENGTH, 0, 0)),
                 mbs.NodeMarker("end_a", "beam", node=1), mbs.NodeMarker("end_b", "beam", node=TIP),
                 mbs.NodeMarker("middle", "beam", node=6)),
        forces=(mbs.Bushing("support_a", "a", "end_a", {"x": support, "y": support}),
                mbs.Bushing("support_b", "b", "end_b", {"y": support})),
        sensors=(mbs.MarkerPosition("mid", "middle", components=("x", "y")),),
        simulation=SimulationSettings(t_end=0.05, step=1e-4, alpha=-0.05))


@pytest.mark.parametrize("system", ["swinging", "supported"])
def test_planar_adjoint_gradient_of_stiffness_mass_and_support_equals_central_differences(system):
    """Swinging: the factors through the configuration-dependent mass matrix, its quadratic
    velocity terms and the weight's moment; supported: also a support stiffness."""
    if system == "swinging":
        built, names, t_end = engine(PlanarFloatingFrameBody, mbs.Revolute, 0.3), ("EIs", "rhos"), 0.1
    else:
        built, names, t_end = NativeEngine.build(_supported_beam().to_model()), ("EIs", "rhos", "k_v"), 0.05
    compiled = built.compiled
    truth = built.simulate(compiled.parameter_vector({"EIs": 1.1, "rhos": 0.95}), t_end=t_end)
    times = np.linspace(0.0, t_end, 97)
    data = Sampler.from_grid(truth.t, times).sample(truth.outputs())
    cost = LeastSquaresCost(times, data, compiled.output_names, scales=np.sqrt(np.mean(data**2, axis=0)))
    problem = IdentificationProblem([Experiment(compiled, cost, t_end=t_end, engine=built)], names)
    assert_adjoint_equals_forward_and_central_differences(problem)


def test_the_planar_invariants_of_the_lumped_beam():
    """m, the rotation coupling s0 = (-sum m_p y_p, sum m_p x_p), the polar moment j0 (the
    masses' second moment plus the nodes' rotary inertia about z) and the modal mass against
    sums over the lumped masses (Shabana Sec. 5.5 in the plane)."""
    fe = beam().fe
    planar = body(PlanarFloatingFrameBody)
    inv = planar.invariants
    dofs, m_diag = np.asarray(fe.dofs), fe.mass.diagonal()
    x = {int(n): xyz[0] for n, xyz in zip(fe.node_ids, np.asarray(fe.coordinates))}
    masses = [(x[int(n)], m) for (n, c), m in zip(dofs, m_diag) if c == 0]
    total = sum(m for _, m in masses)
    assert abs(inv.mass - total) <= EXACT * total
    first = sum(m * xp for xp, m in masses)
    assert np.abs(inv.s0 - [0.0, first]).max() <= EXACT * first
    assert np.abs(inv.first_moment - [first, 0.0]).max() <= EXACT * first
    polar = sum(m * xp**2 for xp, m in masses) + m_diag[dofs[:, 1] == 5].sum()
    assert abs(inv.j0 - polar) <= EXACT * polar
    basis = planar.basis
    psi = np.array([[basis.translations[k, 0], basis.translations[k, 1], basis.rotations[k, 2]]
                    for k in range(TIP)])  # (node, ux uy rz, mode)
    lumped = m_diag.reshape(TIP, 6)[:, [0, 1, 5]]
    reference = np.einsum("kim,ki,kil->ml", psi, lumped, psi)
    assert np.abs(inv.modal_mass - reference).max() <= EXACT * np.abs(reference).max()


def test_the_planar_part_refuses_a_model_off_the_plane_or_coupling_the_planes():
    tilted = beam_model(line_mesh(LENGTH, 2, direction=(1.0, 0.0, 1.0)), SECTION, mass=LumpedMass()).fe
    with pytest.raises(ModelError, match="off the x-y plane"):
        planar_part(tilted, "body 'beam'")
    # A section turned about the beam axis couples the in-plane and out-of-plane bending.
    turned = beam_model(line_mesh(LENGTH, 2, orientation=(0.0, 1.0, 1.0)), SECTION, mass=LumpedMass()).fe
    with pytest.raises(ModelError, match="couples the in-plane DOF"):
        planar_part(turned, "body 'beam'")
    flat = planar_part(beam().fe, "body 'beam'")
    assert set(np.asarray(flat.dofs)[:, 1]) == {0, 1, 5} and flat.size == 3 * TIP


def test_a_model_file_writes_the_formulation_of_a_flexible_body(tmp_path):
    text = """[model]
name = "m"
[parameters]
EIs = {{ value = 1.0 }}
[[bodies]]
name = "beam"
type = "flexible"
formulation = "{formulation}"
beam = {{ length = 1.0, elements = 4, E = 2e11, G = 8e10, A = 6e-4, Iy = 2e-8, Iz = 4e-8, J = 4e-8, rho = 7850.0 }}
modes = 1
stiffness_factor = "EIs"
{extra}
[[markers]]
name = "tip"
body = "beam"
node = 5
[[sensors]]
type = "marker_position"
name = "tip"
marker = "tip"
components = ["y"]
"""
    path = tmp_path / "m.toml"
    coordinates = {}
    for formulation in ("fncf", "ffrf", "planar_ffrf"):
        path.write_text(text.format(formulation=formulation, extra=""), encoding="utf-8")
        coordinates[formulation] = tuple(c.name for c in load_model(path).coordinates)
    assert coordinates["planar_ffrf"] == ("beam_x", "beam_y", "beam_phi", "beam_eta0")
    path.write_text(text.format(formulation="planar_ffrf", extra="position = [0.5, 0.2]\nangle = 0.1"), "utf-8")
    start = {c.name: c.initial_position for c in load_model(path).coordinates}
    assert (float(start["beam_x"]), float(start["beam_y"]), float(start["beam_phi"])) == (0.5, 0.2, 0.1)
    assert coordinates["ffrf"][3:7] == ("beam_e0", "beam_e1", "beam_e2", "beam_e3")
    assert "beam_p0" in coordinates["fncf"]
    for formulation, extra, message in (
            ("planar", "", "is not one of fncf, ffrf, planar_ffrf"),
            ("planar_ffrf", "rotation = { axis = [0, 0, 1], angle = 0.1 }", "takes no rotation"),
            ("fncf", "angle = 0.1", "takes no angle")):
        path.write_text(text.format(formulation=formulation, extra=extra), encoding="utf-8")
        with pytest.raises(ModelError, match=message):
            load_model(path)
