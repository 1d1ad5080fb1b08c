"""The beam_pod example (Nishi, Hara, Yamaura; GitHub issue 4): a flexible beam of 10 rigid
segments on spring-damper supports under an impulse, EI identified with POD costs.

Model checks (statics against the discrete closed form, constraints along the run), the
bundled measurement, adjoint gradients of PODCost on this model, and the pattern of
Nishi's Table 2: the POMs 1 and 2 (support motion) fail to give EI, the POMs 3 to 11
recover it although the model's supports are 10 % off the true ones.
"""

from __future__ import annotations

import numpy as np
import pytest

from fmi_adjoint import Experiment, IdentificationProblem, read_csv, simulate
from fmi_adjoint.costs import PODCost
from fmi_adjoint.examples import EXAMPLES_DIR
from fmi_adjoint.examples.beam_pod_data import (
    CHANNELS,
    CSV_NAME,
    MODEL_SUPPORTS,
    SAMPLE_EVERY,
    START_EI,
    SUPPORT_PERTURBATION,
    TRUE_VALUES,
    measurement,
)
from fmi_adjoint.identify import identify
from fmi_adjoint.integrate.initialization import initial_state

from tolerances import ADJOINT_VS_FORWARD, EXACT, GRADIENT_VS_FD, NEWTON_LEVEL, ORDER

#: Table 2 of Nishi et al.: the identified EI equals the true 500 to this relative accuracy
#: for the POMs 3..11.  What is left is the bias of the 10 % support error on the modal
#: coordinate (largest for POM 4, 1.4 %; Nishi's POM 3 is off by 0.4 %), not an optimizer
#: tolerance.
TABLE2_RECOVERY = 0.02
#: ... and the POMs 1 and 2 miss it by more than this (they end at 260 and at the bound 200).
TABLE2_FAILURE = 0.25
#: L-BFGS-B has the optimum of every POM cost to 3-4 digits within 4 iterations (5 to 16
#: runs); further iterations only probe the round-off of the cost, and a line search there
#: takes up to 20 runs (measured: 28 more runs for POM 8 in iteration 5).
MAX_ITERATIONS = 4

SEGMENTS = 10
LOAD_AT = 0.15  # x of the pulse (centre of segment 2), as a fraction of L


@pytest.fixture(scope="module")
def beam(compiled_example):
    return compiled_example("beam_pod")


@pytest.fixture(scope="module")
def bundled():
    data = read_csv(EXAMPLES_DIR / CSV_NAME)
    return data.times, np.column_stack([data.column(c) for c in CHANNELS])


def _problem(model, times, data, modes, names=("EI",)):
    return IdentificationProblem([Experiment(model, PODCost(times, data, CHANNELS, modes=modes))], list(names))


# -- the model ------------------------------------------------------------------------------


def test_the_model_holds_table_1_and_the_start_value(beam):
    assert (beam.n, beam.m) == (3 * SEGMENTS + 4, 2 * (SEGMENTS - 1) + 4)  # 12 degrees of freedom
    assert beam.output_names == CHANNELS
    values = {name: beam.defaults[beam.parameter_index(name)] for name in beam.parameter_names}
    assert {k: values[k] for k in MODEL_SUPPORTS} == MODEL_SUPPORTS
    assert values["EI"] == START_EI and values["F"] == 100.0
    assert TRUE_VALUES["EI"] == 500.0
    for name, rel in SUPPORT_PERTURBATION.items():
        assert TRUE_VALUES[name] == pytest.approx(MODEL_SUPPORTS[name] * (1 + rel), rel=EXACT)
        assert abs(rel) == 0.10


def _static_node_displacements(model, p):
    """Static equilibrium of the model under the pulse's peak value (t = t_p), by Newton
    on the compiled force and constraint functions with v = a = 0."""
    n, m = model.n, model.m
    q = np.array(initial_state(model, p, 0.0).state[0])
    lam, zero = np.zeros(m), np.zeros(n)
    t = p[model.parameter_index("t_p")]
    for _ in range(10):
        _, F, C = model.residual_terms(q, zero, zero, lam, t, p)
        _, _, K, _, Cq = model.jacobian_terms(q, zero, zero, lam, t, p)
        step = np.linalg.solve(np.block([[K, Cq.T], [Cq, np.zeros((m, m))]]), -np.concatenate([F, C]))
        q, lam = q + step[:n], lam + step[n:]
    _, F, C = model.residual_terms(q, zero, zero, lam, t, p)
    return model.outputs(q, zero, zero, lam, t, p)[0], F, C


def test_static_deflection_equals_the_closed_form_of_the_segment_chain(beam):
    """A load P at x_P = 0.15 L: the vertical springs carry P (1 - x_P/L) and P x_P/L, the
    joint j (x_j = j l) turns by -M_j l/EI with the bending moment M_j of a beam on two
    supports, and the node displacements are the sums of l phi_i (small angles; with
    P = 1e-4 N the angles are 1e-7 and the geometric nonlinearity is 1e-14 relative)."""
    P, EI, k_v, L = 1e-4, 500.0, 1000.0, 1.0
    p = beam.parameter_vector({"F": P, "EI": EI})
    w, F, C = _static_node_displacements(beam, p)
    assert np.abs(F).max() <= EXACT * P and np.abs(C).max() <= EXACT * L
    l = L / SEGMENTS
    R_a = P * (1 - LOAD_AT)
    x = l * np.arange(1, SEGMENTS)
    moment = R_a * x - P * np.clip(x - LOAD_AT * L, 0, None)
    relative = np.concatenate([[0.0], np.cumsum(-moment * l / EI)])  # phi_i - phi_1
    w_a, w_b = R_a / k_v, P * LOAD_AT / k_v
    phi_1 = (w_b - w_a - l * relative.sum()) / L
    closed = w_a + l * np.concatenate([[0.0], np.cumsum(phi_1 + relative)])
    assert np.max(np.abs(w - closed)) <= EXACT * np.max(np.abs(closed))
    # The check resolves the bending: it is 2 % of the displacement (soft supports), i.e.
    # 1e10 times the tolerance; EI/(2 l) for the joint springs would fail it.
    bending = closed - (w_a + (w_b - w_a) * np.arange(SEGMENTS + 1) / SEGMENTS)
    assert np.max(np.abs(bending)) > 0.01 * np.max(np.abs(closed))


def test_the_run_keeps_the_joints_closed_and_is_excited(beam):
    traj = simulate(beam, beam.parameter_vector(TRUE_VALUES))
    q_scale = np.abs(traj.q).max()
    assert np.abs(traj.constraint_residual()).max() <= NEWTON_LEVEL * q_scale
    w = traj.outputs()
    assert 1e-4 < np.abs(w).max() < 1e-2  # mm-scale displacements: small angles, no buckling
    assert np.abs(w[-1]).max() < 0.1 * np.abs(w).max()  # the response has decayed by t_end


# -- the bundled measurement ------------------------------------------------------------------


def test_bundled_measurement_is_the_true_system_sampled_at_every_second_step(beam, bundled):
    times, data = bundled
    clean_times, clean = measurement(beam)
    assert SAMPLE_EVERY == 2 and times.size == 501 and times[-1] == pytest.approx(0.2, rel=EXACT)
    assert np.array_equal(times, clean_times)
    # Noise-free, written with 17 digits; regenerated on another CPU the last bits of BLAS and libm
    # results differ (values near 1e-40 differ wholly), so compare on the scale of each channel.
    assert np.allclose(data, clean, rtol=0, atol=EXACT * float(np.max(np.abs(clean))))


# -- gradients of POD costs on this model ----------------------------------------------------


@pytest.mark.parametrize(("modes", "names"), [((2,), ("EI", "k_v")), ((3, 5), ("EI", "c_v"))])
def test_adjoint_gradient_of_pod_costs_matches_forward_and_finite_differences(beam, bundled, modes, names):
    problem = _problem(beam, *bundled, modes, names=names)
    adjoint = problem.evaluate(problem.start, "adjoint")
    forward = problem.evaluate(problem.start, "forward")
    fd = problem.finite_differences(problem.start)
    assert adjoint.J > 0
    assert np.allclose(adjoint.gradient, forward.gradient, rtol=ADJOINT_VS_FORWARD, atol=0)
    assert np.allclose(adjoint.gradient, fd, rtol=GRADIENT_VS_FD, atol=0)


def test_taylor_remainder_of_a_pod_cost_is_second_order(beam, bundled):
    """J(x + e d) - J(x) - e g.d = O(e^2) with the adjoint gradient g."""
    problem = _problem(beam, *bundled, (4,), names=("EI", "k_v"))
    x = problem.start
    g = problem.evaluate(x, "adjoint").gradient
    direction = np.array([0.01, 0.01]) * x
    J0 = problem.cost(x)
    eps = np.array([1.0, 0.5, 0.25])
    remainder = np.array([abs(problem.cost(x + e * direction) - J0 - e * g @ direction) for e in eps])
    slopes = np.diff(np.log(remainder)) / np.diff(np.log(eps))
    assert np.all(np.abs(slopes - 2.0) <= ORDER), slopes
    # Without the gradient term the remainder is first order: the test can fail.
    first = np.array([abs(problem.cost(x + e * direction) - J0) for e in eps[:2]])
    assert abs(np.log(first[1] / first[0]) / np.log(0.5) - 1.0) <= ORDER


# -- Nishi et al., Table 2 --------------------------------------------------------------------


def test_costs_near_the_truth_show_the_table_2_pattern(beam, bundled):
    """Cheap version of Table 2: of EI = 480, 500, 520 the costs of the POMs 3..11 are lowest
    at 500 (a minimum within 4 %), those of the POMs 1 and 2 fall towards smaller EI."""
    times, data = bundled
    costs = [PODCost(times, data, CHANNELS, modes=(i,)) for i in range(1, 12)]
    J = {}
    for EI in (480.0, 500.0, 520.0):
        traj = simulate(beam, beam.parameter_vector({"EI": EI}))
        Y = traj.outputs()[::SAMPLE_EVERY]
        J[EI] = np.array([c.evaluate(Y, traj.p).J for c in costs])
    assert np.all(J[480.0][:2] < J[500.0][:2]) and np.all(J[500.0][:2] < J[520.0][:2])
    assert np.all(J[500.0][2:] < J[480.0][2:]) and np.all(J[500.0][2:] < J[520.0][2:])
    ratios = costs[0].contribution_ratios
    assert ratios[0] + ratios[1] > 0.99 and np.all(np.diff(ratios) < 0)  # support motion; distinct


@pytest.mark.slow
def test_table_2_pom_1_and_2_fail_pom_3_to_11_recover_EI(beam, bundled):
    times, data = bundled
    identified = {}
    for mode in range(1, 12):
        problem = _problem(beam, times, data, (mode,))
        assert problem.start[0] == START_EI
        result = identify(problem, progress=None, statistics=False, max_iterations=MAX_ITERATIONS)
        assert result.cost < result.cost_initial
        identified[mode] = float(result.parameters[0])
    true = TRUE_VALUES["EI"]
    for mode, EI in identified.items():
        if mode <= 2:
            assert abs(EI - true) > TABLE2_FAILURE * true, identified
        else:
            assert abs(EI - true) <= TABLE2_RECOVERY * true, identified
