"""Every registered force element is checked automatically (Jacobians vs central
differences, C code vs numpy, zero force at rest, passivity), and each built-in law is
compared with its published or closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
from scipy.integrate import solve_ivp

from fmi_adjoint import (
    Coordinate,
    Experiment,
    IdentificationProblem,
    LeastSquaresCost,
    Model,
    Output,
    Parameter,
    SimulationSettings,
    compile_model,
    simulate,
)
from fmi_adjoint.elementcheck import check_element, find_c_compiler
from fmi_adjoint.forces import (
    DualMassFlywheelSpring,
    ElastoBacklash,
    MagicFormula,
    MaxwellElement,
    PacejkaFriction,
    SplineCharacteristic,
    StribeckFriction,
    TorsionalVibrationDamper,
    default_registry,
)
from fmi_adjoint.forces.ccode import local_law
from tolerances import ADJOINT_VS_FORWARD, EXACT, GRADIENT_VS_FD

REGISTERED = default_registry().names()
BUILT_IN = {
    "dmf_spring", "elasto_backlash", "linear_spring_damper", "load", "magic_formula", "maxwell",
    "pacejka_friction", "polynomial_spring_damper", "spline_characteristic", "stribeck_friction",
    "table_load", "tvd", "velocity_characteristic",
}


def test_every_built_in_element_is_registered_through_entry_points():
    assert BUILT_IN <= set(REGISTERED)
    for name in BUILT_IN:
        assert default_registry().distribution(name).startswith("fmi-adjoint")


@pytest.mark.skipif(find_c_compiler() is None, reason="the element check compiles C code")
@pytest.mark.parametrize("name", REGISTERED)
def test_registered_element_passes_the_element_check(name):
    report = check_element(default_registry().get(name), seed=1, n_states=4)
    failures = [f"{r.name}: {r.detail}" for r in report.results if not r.passed]
    assert not failures, failures
    assert {r.name for r in report.results} >= {"jacobians", "c_code"}


def _law(element, **values):
    """Numeric two-point force f(s, s_dot) of an element at given property values."""
    law = local_law(element)
    subs = {}
    for sym, (decl, k) in zip(law.p, law.layout):
        value = values.get(decl.name, decl.default)
        subs[sym] = value[k] if k is not None else value
    force = law.forces[0]  # force on the first end is -f

    def f(s, s_dot):
        pairs = {**subs, law.q[0]: s, law.v[0]: s_dot}
        if len(law.q) > 1:
            pairs.update({law.q[1]: 0.0, law.v[1]: 0.0})
        return -float(force.subs(pairs))

    return f


def test_pacejka_friction_is_eq_22_away_from_zero_velocity():
    element = PacejkaFriction(name="strut", coordinates=("x", "y"))
    f = _law(element)
    for v in (0.05, 0.4, -0.05, -0.4):
        i = 1 if v >= 0 else 2
        c, a, b, cf, e = (2000.0, 3000.0)[i - 1], 100.0, 50.0, 1.2, -10.0
        expected = c * v + a * math.sin(cf * math.atan(b * (1 - e) * v + e * math.atan(b * v)))
        # Blend width v_eps = 1e-4: the other branch weighs ~(v_eps/2v)^2 here.
        assert f(0.0, v) == pytest.approx(expected, rel=1e-5)
    assert f(0.0, 0.0) == 0.0


def test_magic_formula_value():
    element = MagicFormula(name="mf", coordinates=("x",), variable="position")
    B, C, D, E, x = 10.0, 1.5, 100.0, 0.3, 0.07
    Bx = B * x
    expected = D * math.sin(C * math.atan(Bx - E * (Bx - math.atan(Bx))))
    assert _law(element, E=E)(x, 0.0) == pytest.approx(expected, rel=EXACT)


def test_stribeck_friction_levels():
    f = _law(StribeckFriction(name="st", coordinates=("x",)))
    assert f(0.0, 1.0) == pytest.approx(10.0, rel=1e-7)  # Coulomb level far above v_s
    assert f(0.0, 1e-2 * 1e-2) == pytest.approx(15.0 * 1e-4 / math.sqrt(2e-8), rel=1e-3)  # v = v_eps
    assert f(0.0, -1.0) == pytest.approx(-10.0, rel=1e-7)


def test_dmf_spring_is_piecewise_linear_away_from_corners():
    element = DualMassFlywheelSpring(name="dmf", coordinates=("p", "s"), stiffness=(200.0, 900.0), angles=(0.3,),
                                     stop_angle=0.9, smoothing=1e-4)
    eps = 1e-4
    f = _law(element, stiffness=(200.0, 900.0), angles=(0.3,), stop_angle=0.9, smoothing=eps)

    def smoothing_error(phi):
        # Each rounded corner a with stiffness jump dk deviates by dk eps^2 / (4 |phi -/+ a|).
        jumps = ((700.0, 0.3), (1e5 - 900.0, 0.9))
        return sum(dk * eps**2 / 4 * (1 / abs(phi - a) + 1 / abs(phi + a)) for dk, a in jumps)

    for phi, torque in ((0.1, 20.0), (0.5, 200 * 0.3 + 900 * 0.2), (-0.5, -(200 * 0.3 + 900 * 0.2)),
                        (1.0, 200 * 0.3 + 900 * 0.6 + 1e5 * 0.1)):
        assert abs(f(phi, 0.0) - torque) <= smoothing_error(phi) * (1 + 1e-6) + 1e-12 * abs(torque)


def test_elasto_backlash_has_no_force_in_the_gap():
    f = _law(ElastoBacklash(name="bl", coordinates=("x",)), eps=1e-7)
    assert abs(f(2e-4, 0.0)) < 1e-3  # inside the 1 mm gap
    assert f(1.5e-3, 0.0) == pytest.approx(1e5 * 1e-3, rel=1e-4)
    assert f(-1.5e-3, 0.0) == pytest.approx(-1e5 * 1e-3, rel=1e-4)


def test_spline_characteristic_passes_through_its_knots_and_is_linear_in_the_values():
    knots = (-0.1, -0.02, 0.0, 0.03, 0.1)
    values = (-200.0, -30.0, 0.0, 50.0, 400.0)
    element = SplineCharacteristic(name="sc", coordinates=("x",), knots=knots, values=values)
    f = _law(element, values=values)
    for s, value in zip(knots, values):
        assert f(s, 0.0) == pytest.approx(value, abs=EXACT * max(map(abs, values)))
    law = local_law(element)
    second = sp.diff(law.forces[0], law.p[0], 2)
    assert second == 0


def test_tvd_is_a_parallel_spring_plus_maxwell_branches():
    tvd = TorsionalVibrationDamper(name="tvd", coordinates=("hub", "ring"), stiffness=(2e4, 5e3), damping=(3.0, 0.8))
    law = local_law(tvd)
    q, v = law.q, law.v
    c_par, d_par, c1, c2, d1, d2 = law.p
    hub, ring, n1, n2 = law.forces
    assert sp.simplify(hub - (-c_par * (q[0] - q[1]) - d_par * (v[0] - v[1]) - d1 * (v[0] - v[2])
                              - d2 * (v[0] - v[3]))) == 0
    assert sp.simplify(n1 - (d1 * (v[0] - v[2]) - c1 * (q[2] - q[1]))) == 0
    assert sp.simplify(hub + ring + n1 + n2) == 0  # internal forces balance


def _maxwell_model():
    return Model(
        name="maxwell_mass",
        coordinates=(Coordinate("x", mass="m", initial_position=0.01, initial_velocity="v0"),),
        parameters=(Parameter("m", 2.0), Parameter("k", 800.0), Parameter("d", 15.0), Parameter("v0", 0.3)),
        forces=(MaxwellElement("mw", coordinates=("x",), stiffness="k", damping="d"),),
        outputs=(Output("x", "x"), Output("node", "mw_node")),
        simulation=SimulationSettings(t_end=2.0, step=1e-3, alpha=-0.05),
    )


def test_maxwell_node_is_initialized_consistently_and_matches_an_ode_solver():
    model = compile_model(_maxwell_model())
    traj = simulate(model)
    # Force balance of the massless node at t = 0: d (v - v_node) = k q_node.
    assert traj.v[0, 1] == pytest.approx(0.3, rel=EXACT)

    def rhs(t, y):
        x, v, node = y
        return [v, -800.0 * node / 2.0, v - 800.0 / 15.0 * node]

    ref = solve_ivp(rhs, (0, 2), [0.01, 0.3, 0.0], rtol=1e-12, atol=1e-14, dense_output=True).sol(traj.t)
    # HHT is second order: error ~ (omega h)^2 relative with omega = 20 rad/s, h = 1e-3.
    assert np.max(np.abs(ref[0] - traj.q[:, 0])) < 1e-5 * 0.01 * 20
    assert np.max(np.abs(ref[2] - traj.q[:, 1])) < 1e-5 * 0.01 * 20 * 10


def test_gradient_through_a_maxwell_node_matches_finite_differences():
    model = compile_model(_maxwell_model())
    truth = simulate(model, model.parameter_vector({"k": 900.0, "d": 12.0}))
    cost = LeastSquaresCost(truth.t[::7], truth.outputs()[::7, :1], ("x",))
    problem = IdentificationProblem([Experiment(model, cost)], ["k", "d", "v0", "m"])
    adjoint = problem.evaluate(problem.start, "adjoint").gradient
    forward = problem.evaluate(problem.start, "forward").gradient
    fd = problem.finite_differences(problem.start)
    assert np.allclose(adjoint, forward, rtol=ADJOINT_VS_FORWARD, atol=0)
    assert np.allclose(adjoint, fd, rtol=GRADIENT_VS_FD, atol=0)


def test_unbound_properties_become_identifiable_parameters():
    element = MaxwellElement("mw", coordinates=("x",))
    model = Model(name="automatic", coordinates=(Coordinate("x", mass=1.0),), forces=(element,),
                  outputs=(Output("x", "x"),))
    names = [p.name for p in model.all_parameters]
    assert names == ["mw_stiffness", "mw_damping"]
    assert model.parameter("mw_stiffness").value == MaxwellElement.parameters[0].default
    assert model.with_values({"mw_damping": 3.0}).parameter("mw_damping").value == 3.0
