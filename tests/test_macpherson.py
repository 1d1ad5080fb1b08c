"""The ``macpherson`` example: Vanpaemel et al., Sec. 5.1 (the MacPherson suspension rig as
five rigid bodies with joints; strut force eq. (22), deflection eq. (23), Table 1).

(a) the 13 identified parameters carry the start values and bounds of their Table 1, the
    model has 37 coordinates (five spatial bodies and the two auxiliary lengths of the strut
    laws) and 36 constraints: one degree of freedom;
(b) kinematics: the relation of wheel travel, spring length and wheel-centre position of
    the lowered model agrees with an independent loop-closure solution of the same hard
    points (read from the model file, solved with scipy's ``fsolve``) at several heights;
(c) statics: the model starts at rest in the design position, which the static load F0 of
    the file holds at the true values; F0 agrees with the virtual work of the independent
    kinematics, and the model's initial acceleration vanishes;
(d) gradients at Table 1's start values, all 13 parameters (the signals see every one of
    them): adjoint = forward sensitivities (ADJOINT_VS_FORWARD; measured <= 5.7e-15) =
    fourth-order central differences (GRADIENT_VS_FD; measured <= 3.4e-7, for L; slow: 52 runs);
(e) identification of the 13 strut parameters from the noisy deflection and wheel-travel
    signals with the default options recovers them within WITHIN_STD_ERRORS standard errors
    (measured: at most 1.8, for e_f1; slow, about 2 minutes).
"""

from __future__ import annotations

import json
import math
import tomllib

import numpy as np
import pytest
from scipy.optimize import fsolve
from scipy.spatial.transform import Rotation

from captured_cli import cli
from fmi_adjoint import Experiment, IdentificationProblem, LeastSquaresCost, load_model
from fmi_adjoint.examples import example_path
from fmi_adjoint.examples.macpherson_data import CHANNELS, NAMES, TRUE_VALUES, clean_measurement, noisy_measurement
from test_strut import TABLE_1  # Vanpaemel et al., Table 1: parameter -> (start, lower, upper), SI
from tolerances import ADJOINT_VS_FORWARD, EXACT, GRADIENT_VS_FD, NEWTON_LEVEL, WITHIN_STD_ERRORS

#: Parameters of the model that are fixed (not identified, no bounds).
FIXED = {"g", "F0", "F_dyn", "v_eps"}

#: Design (static) height of the wheel centre [m] (header of macpherson.toml).
WHEEL_CENTRE_Z = 0.290


# -- the independent kinematics ----------------------------------------------------------------


class HardPoints:
    """The hard points of ``macpherson.toml`` in the design position, read from the file
    itself (body centre of mass + marker offset: every body frame is parallel to the
    global axes there), and the loop closure of the mechanism solved with ``fsolve``.

    Unknowns: the arm's rotation ``theta`` about its bushing axis and the rotation vector
    ``phi`` of the knuckle (with the lower strut clamped to it).  Equations: the strut axis
    (fixed in the knuckle) passes through the top mount (2), the tie rod keeps its length
    (1), the wheel centre is at the given height (1).
    """

    def __init__(self) -> None:
        data = tomllib.loads(example_path("macpherson").read_text())
        bodies = {b["name"]: b for b in data["bodies"]}
        self.p = {}
        for m in data["markers"]:
            if m["name"] == "sensor_zero":
                continue
            origin = np.zeros(3) if m["body"] == "ground" else np.array(bodies[m["body"]]["position"], float)
            self.p[m["name"]] = origin + np.array(m["position"], float)
        self.mass = {name: float(b["mass"]) for name, b in bodies.items()}
        self.com = {name: np.array(b["position"], float) for name, b in bodies.items()}
        joints = {j["name"]: j for j in data["joints"]}
        self.arm_axis = np.array(joints["arm_bushings"]["axis"], float)
        self.top_axes = (np.array(joints["top_mount"]["axis"], float), np.array(joints["top_mount"]["axis_j"], float))
        self.parameters = {name: (v["value"] if isinstance(v, dict) else v) for name, v in data["parameters"].items()}
        p = self.p
        u = p["strut_top"] - p["lower_seat"]
        self.u = u / np.linalg.norm(u)  # strut axis, upwards
        self.b1 = np.cross(self.u, [1.0, 0.0, 0.0])
        self.b1 /= np.linalg.norm(self.b1)
        self.b2 = np.cross(self.u, self.b1)
        self.tie_rod = np.linalg.norm(p["tie_rod_outer"] - p["tie_rod_inner"])
        self.upper_seat = np.dot(p["strut_top"] - p["upper_seat"], self.u)  # seat below the top mount

    def _pose(self, x: np.ndarray):
        p = self.p
        arm = Rotation.from_rotvec(self.arm_axis / np.linalg.norm(self.arm_axis) * x[0]).as_matrix()
        knuckle = Rotation.from_rotvec(x[1:]).as_matrix()
        ball = p["arm_pivot"] + arm @ (p["arm_ball_joint"] - p["arm_pivot"])
        return arm, knuckle, ball

    def _knuckle_point(self, x: np.ndarray, point: np.ndarray) -> np.ndarray:
        _, R, ball = self._pose(x)
        return ball + R @ (point - self.p["knuckle_ball_joint"])

    def _residual(self, x: np.ndarray, height: float) -> list[float]:
        p = self.p
        _, R, _ = self._pose(x)
        to_top = p["chassis_top"] - self._knuckle_point(x, p["strut_clamp"])
        tie = self._knuckle_point(x, p["steering_arm"]) - p["rack_end"]
        return [float(to_top @ (R @ self.b1)), float(to_top @ (R @ self.b2)),
                float(tie @ tie - self.tie_rod**2), float(self._knuckle_point(x, p["wheel_centre"])[2] - height)]

    def solve(self, height: float) -> np.ndarray:
        x, *_ = fsolve(self._residual, np.zeros(4), args=(height,), xtol=1e-13, full_output=True)
        assert np.max(np.abs(self._residual(x, height))) <= NEWTON_LEVEL * 1e-3, height
        return x

    def spring_length(self, x: np.ndarray) -> float:
        _, R, _ = self._pose(x)
        axis = R @ self.u
        upper = self.p["chassis_top"] - self.upper_seat * axis
        return float((upper - self._knuckle_point(x, self.p["lower_seat"])) @ axis)

    def wheel_centre(self, x: np.ndarray) -> np.ndarray:
        return self._knuckle_point(x, self.p["wheel_centre"])

    def heights_of_centres_of_mass(self, x: np.ndarray) -> dict[str, float]:
        p = self.p
        arm, R, _ = self._pose(x)
        axis = R @ self.u
        top = p["chassis_top"]
        return {
            "control_arm": (p["arm_pivot"] + arm @ (self.com["control_arm"] - p["arm_pivot"]))[2],
            "knuckle": self._knuckle_point(x, self.com["knuckle"])[2],
            "lower_strut": self._knuckle_point(x, self.com["lower_strut"])[2],
            "upper_strut": (top + self._upper_strut(axis) @ (self.com["upper_strut"] - top))[2],
            "tie_rod": ((p["rack_end"] + self._knuckle_point(x, p["steering_arm"])) / 2)[2],
        }

    def _upper_strut(self, axis: np.ndarray) -> np.ndarray:
        """Rotation of the upper strut: its axis ``u`` turned into ``axis``, and the top
        mount's universal joint: chassis axis ``a`` perpendicular to the body axis ``c``."""
        a, c = self.top_axes
        b1 = np.cross(axis, [1.0, 0.0, 0.0])
        b2 = np.cross(axis, b1)

        def residual(psi):
            R = Rotation.from_rotvec(psi).as_matrix()
            return [float((R @ self.u) @ b1), float((R @ self.u) @ b2), float(a @ (R @ c))]

        psi, *_ = fsolve(residual, np.zeros(3), xtol=1e-13, full_output=True)
        assert np.max(np.abs(residual(psi))) <= NEWTON_LEVEL * 1e-3
        return Rotation.from_rotvec(psi).as_matrix()

    def static_load(self, k: float, L: float, g: float) -> float:
        """The vertical wheel-centre load that holds the design position (virtual work:
        ``F0 dz_wc = g sum m_i dz_i + f ds`` with the spring force ``f = k (s - L)``),
        derivatives by Richardson-extrapolated central differences along the motion."""

        def derivative(fun, h):
            def central(d):
                return (fun(WHEEL_CENTRE_Z + d) - fun(WHEEL_CENTRE_Z - d)) / (2 * d)
            return (4 * central(h / 2) - central(h)) / 3

        def potential(height):
            x = self.solve(height)
            z = self.heights_of_centres_of_mass(x)
            return g * sum(self.mass[b] * z[b] for b in self.mass) + k * (self.spring_length(x) - L) ** 2 / 2

        return derivative(potential, 1e-3)


@pytest.fixture(scope="module")
def hard_points():
    return HardPoints()


@pytest.fixture(scope="module")
def engine(example_engine):
    return example_engine("macpherson")


@pytest.fixture(scope="module")
def true_run(engine):
    model = engine.compiled
    return engine.simulate(model.parameter_vector(TRUE_VALUES))


# -- (a) the model -----------------------------------------------------------------------------


def test_identified_parameters_have_the_start_values_and_bounds_of_table_1():
    definition = load_model(example_path("macpherson"))
    params = definition.all_parameters
    bounded = [p for p in params if math.isfinite(p.bounds[0]) or math.isfinite(p.bounds[1])]
    assert [p.name for p in bounded] == list(TABLE_1)
    for p in bounded:
        assert (p.value, *p.bounds) == TABLE_1[p.name], p.name
    others = [p for p in params if p not in bounded]
    assert {p.name for p in others} == FIXED
    assert NAMES == tuple(TABLE_1)
    for name, (_, lo, hi) in TABLE_1.items():
        assert lo <= TRUE_VALUES[name] <= hi, name


def test_five_spatial_bodies_with_one_degree_of_freedom(engine):
    model = engine.compiled.model
    bodies = [c.name for c in model.coordinates if c.name not in ("spring_s", "friction_s")]
    assert len(bodies) == 5 * 7 and len(model.coordinates) == 37
    assert len(model.constraints) == len(model.coordinates) - 1


# -- (b) kinematics against the independent loop closure -----------------------------------------


def test_wheel_travel_and_spring_length_agree_with_an_independent_loop_closure(true_run, engine, hard_points):
    model = engine.compiled
    Y = true_run.outputs()
    travel = Y[:, [model.output_index(f"wheel_travel_{c}") for c in "xyz"]]
    length = Y[:, model.output_index("strut_length")]
    deflection = Y[:, model.output_index("deflection_z")]
    # The stroke covers several centimetres of wheel travel in bump and rebound.
    assert travel[:, 2].max() > 0.015 and -travel[:, 2].min() > 0.015
    # Five heights: the extremes, the quartiles and the median of the run.
    order = np.argsort(travel[:, 2])
    picks = order[np.round(np.linspace(0, len(order) - 1, 5)).astype(int)]
    for i in picks:
        x = hard_points.solve(WHEEL_CENTRE_Z + travel[i, 2])
        s = hard_points.spring_length(x)
        wc = hard_points.wheel_centre(x)
        assert length[i] == pytest.approx(s, abs=NEWTON_LEVEL), (i, travel[i, 2])
        np.testing.assert_allclose(travel[i, :2], (wc - hard_points.p["wheel_centre_design"])[:2], rtol=0,
                                   atol=NEWTON_LEVEL)
        # eq. (23): the deflection is minus the spring length minus the offset y0
        assert deflection[i] == pytest.approx(-s - TRUE_VALUES["y0"], abs=NEWTON_LEVEL)


# -- (c) statics ----------------------------------------------------------------------------------


def test_the_static_load_holds_the_design_position_at_the_true_values(true_run, engine, hard_points):
    par = hard_points.parameters
    F0 = hard_points.static_load(TRUE_VALUES["k"], TRUE_VALUES["L"], par["g"])
    assert par["F0"] == pytest.approx(F0, rel=NEWTON_LEVEL)
    # The lowered model starts at rest there with no acceleration (F0 times the largest
    # inverse mass bounds the scale of the accelerations).
    scale = par["F0"] / min(hard_points.mass.values())
    assert np.max(np.abs(true_run.v[0])) == 0.0
    assert np.max(np.abs(true_run.a[0])) <= NEWTON_LEVEL * scale
    model = engine.compiled
    travel = true_run.outputs()[0, [model.output_index(f"wheel_travel_{c}") for c in "xyz"]]
    np.testing.assert_allclose(travel, 0.0, rtol=0, atol=EXACT)


# -- (d) gradients --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def problem(engine):
    times, data = noisy_measurement()
    model = engine.compiled
    experiment = Experiment(model, LeastSquaresCost(times, data, CHANNELS), name="macpherson", engine=engine)
    return IdentificationProblem([experiment], NAMES)


def test_clean_measurement_is_the_model_output_at_the_true_values(true_run, engine):
    model = engine.compiled
    times, data = clean_measurement()
    np.testing.assert_array_equal(times, true_run.t)
    np.testing.assert_array_equal(data, true_run.outputs()[:, [model.output_index(c) for c in CHANNELS]])


@pytest.fixture(scope="module")
def adjoint_gradient(problem):
    return problem.evaluate(problem.start, "adjoint").gradient


def test_adjoint_equals_forward_sensitivities_for_all_13_parameters(problem, adjoint_gradient):
    forward = problem.evaluate(problem.start, "forward").gradient
    assert np.all(adjoint_gradient != 0.0)  # the signals see every parameter of Table 1
    err = np.abs(adjoint_gradient - forward) / np.abs(adjoint_gradient)
    assert np.all(err <= ADJOINT_VS_FORWARD), dict(zip(NAMES, err))


@pytest.mark.slow  # 52 simulations
def test_adjoint_equals_central_differences_for_all_13_parameters(problem, adjoint_gradient):
    fd = problem.finite_differences(problem.start, 1e-3, order=4)
    err = np.abs(adjoint_gradient - fd) / np.abs(adjoint_gradient)
    assert np.all(err <= GRADIENT_VS_FD), dict(zip(NAMES, err))


# -- (e) identification -----------------------------------------------------------------------------


@pytest.mark.slow
def test_default_options_identify_the_strut_from_deflection_and_wheel_travel(tmp_path):
    times, data = noisy_measurement()
    path = tmp_path / "macpherson.csv"
    path.write_text(f"time,{','.join(CHANNELS)}\n"
                    + "".join(",".join(repr(float(v)) for v in (t, *row)) + "\n" for t, row in zip(times, data)))
    code, out, err = cli(["identify", "macpherson", "--data", path, "--params", ",".join(NAMES), "--json"])
    assert code == 0, err
    result = json.loads(out)
    for name in NAMES:
        z = (result["parameters"][name] - TRUE_VALUES[name]) / result["std_errors"][name]
        assert abs(z) <= WITHIN_STD_ERRORS, (name, z)
