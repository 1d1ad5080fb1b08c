"""The beam_ffrf example (issue 25; Nishi, Hara, Yamaura, seed 004): Nishi's flexible beam on
spring-damper supports in the floating frame of reference -- one planar floating-frame body of
10 Euler-Bernoulli elements (:class:`fmi_adjoint.mbs.ffrf.PlanarFloatingFrameBody`, written in
the model file with ``formulation = "planar_ffrf"``) -- with EI identified from POD costs.

The model (Table 1 supports, start value, the planar body's coordinates), the bundled
measurement, adjoint gradients of POD costs with respect to EI and a support stiffness, and the
pattern of Nishi's Table 2: the POMs 1 and 2 (support motion) fail to give EI, the POMs 3 to 11
recover it although the model's supports are 10 % off the true ones.  The engine is built once
per session (tests/conftest.py, about 15 s cold, then from the build cache).
"""

from __future__ import annotations

import numpy as np
import pytest

from fmi_adjoint import read_csv
from fmi_adjoint.costs import PODCost
from fmi_adjoint.examples import EXAMPLES_DIR
from fmi_adjoint.examples.beam_ffrf_data import (
    CHANNELS,
    CSV_NAME,
    MODEL_SUPPORTS,
    SAMPLE_EVERY,
    START_EI,
    TRUE_VALUES,
    measurement,
)

from gradient_checks import assert_adjoint_equals_forward_and_central_differences
from nishi_table2 import assert_table_2_pattern, identify_each_pom, pod_costs, pod_problem
from tolerances import EXACT, NEWTON_LEVEL, POD_IDENTIFICATION_BIAS

#: The POMs 1 and 2 miss the true EI by more than this (measured: 293 and the bound 200).
TABLE2_FAILURE = 0.25
#: L-BFGS-B iterations per POM cost (as tests/test_beam_pod.py: the optimum to 3-4 digits).
MAX_ITERATIONS = 4
#: Bounds of the run's largest displacement [m]: excited, and small against the beam's length.
MM_SCALE = (1e-4, 1e-2)
#: The response at t_end below this fraction of its largest value: it has decayed.
DECAYED = 0.1
#: Node 2's distance from the line through the ends, at least this fraction of its displacement.
BENT = 0.03
#: Deformation coordinates of the body: the three static modes of node 11 and 8 normal modes.
DEFORMATION_MODES = 11


@pytest.fixture(scope="module")
def engine(example_engine):
    return example_engine("beam_ffrf")


@pytest.fixture(scope="module")
def beam(engine):
    return engine.compiled


@pytest.fixture(scope="module")
def bundled():
    data = read_csv(EXAMPLES_DIR / CSV_NAME)
    return data.times, np.column_stack([data.column(c) for c in CHANNELS])


def _channels(model, traj):
    return traj.outputs()[:, [model.output_index(name) for name in CHANNELS]]


def test_the_model_is_one_planar_floating_frame_body_with_table_1_supports(beam):
    frame = ("beam_x", "beam_y", "beam_phi")
    assert beam.coordinate_names[:3] == frame
    modal = [name for name in beam.coordinate_names if name.startswith("beam_eta")]
    assert len(modal) == DEFORMATION_MODES
    assert set(CHANNELS) <= set(beam.output_names)
    values = {name: beam.defaults[beam.parameter_index(name)] for name in beam.parameter_names}
    assert {k: values[k] for k in MODEL_SUPPORTS} == MODEL_SUPPORTS
    assert values["EI"] == START_EI and values["F"] == 100.0 and TRUE_VALUES["EI"] == 500.0


def test_the_run_is_excited_small_and_decays(engine, beam):
    traj = engine.simulate(beam.parameter_vector(TRUE_VALUES))
    assert np.abs(traj.constraint_residual()).max() <= NEWTON_LEVEL * max(np.abs(traj.q).max(), 1.0)
    w = _channels(beam, traj)
    assert MM_SCALE[0] < np.abs(w).max() < MM_SCALE[1]  # small deformation (measured 2.2 mm)
    assert np.abs(w[-1]).max() < DECAYED * np.abs(w).max()  # measured 3 %
    # The load at node 2 bends the beam: node 2 leaves the line through the ends by 7 % of its
    # largest displacement (measured; a rigid beam keeps it on the line).
    line = w[:, 0] + (w[:, 10] - w[:, 0]) / 10
    assert np.abs(w[:, 1] - line).max() > BENT * np.abs(w[:, 1]).max()


def test_bundled_measurement_is_the_true_system_sampled_at_every_second_step(engine, bundled):
    times, data = bundled
    clean_times, clean = measurement(engine)
    assert SAMPLE_EVERY == 2 and times.size == 501
    assert np.array_equal(times, clean_times)
    assert np.allclose(data, clean, rtol=0, atol=EXACT * float(np.max(np.abs(clean))))


@pytest.mark.parametrize(("modes", "names"), [((1,), ("EI", "k_v")), ((4,), ("EI", "c_v"))])
def test_adjoint_gradient_of_pod_costs_matches_forward_and_finite_differences(beam, bundled, modes, names):
    """Through the planar floating frame's configuration-dependent mass matrix, its quadratic
    velocity terms, the bushings and the modal stiffness."""
    assert_adjoint_equals_forward_and_central_differences(pod_problem(beam, *bundled, CHANNELS, modes, names))


def test_costs_near_the_truth_show_the_table_2_pattern(engine, beam, bundled):
    """Of EI = 480, 500, 520 the costs of the POMs 3..11 are lowest at 500, those of the POMs 1
    and 2 fall towards smaller EI (the support error pulls them off)."""
    J = {}
    for EI in (480.0, 500.0, 520.0):
        traj = engine.simulate(beam.parameter_vector({"EI": EI}))
        J[EI] = pod_costs(*bundled, CHANNELS, _channels(beam, traj)[::SAMPLE_EVERY], traj.p)
    assert np.all(J[480.0][:2] < J[500.0][:2]) and np.all(J[500.0][:2] < J[520.0][:2])
    assert np.all(J[500.0][2:] < J[480.0][2:]) and np.all(J[500.0][2:] < J[520.0][2:])
    ratios = PODCost(*bundled, CHANNELS, modes=(1,)).contribution_ratios
    assert ratios[0] + ratios[1] > 0.99 and np.all(np.diff(ratios) < 0)


def test_table_2_pom_1_and_2_fail_pom_3_to_11_recover_EI(beam, bundled):
    """About 5 s: L-BFGS-B from EI = 300, 5 to 16 runs of 0.03 s per POM."""
    identified = identify_each_pom(beam, *bundled, CHANNELS, START_EI, MAX_ITERATIONS)
    assert_table_2_pattern(identified, TRUE_VALUES["EI"], TABLE2_FAILURE, POD_IDENTIFICATION_BIAS)
