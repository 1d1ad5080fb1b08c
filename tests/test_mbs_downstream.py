"""Everything downstream works unchanged on a multibody model (issue 23, item 8).

One small spatial model written with the multibody sections of a model file (a slender rod,
a :class:`~fmi_adjoint.mbs.SpatialRigidBody` with Euler parameters, on a revolute joint whose
axis is tilted in the horizontal plane; a torsional spring-damper on the joint angle, gravity,
a torque input ``u`` about the hinge axis; sensors: the joint angle, an accelerometer's specific
force in body axes and a load cell from the joint's multipliers) goes through:

* FMU export, FMI 2 and FMI 3 Co-Simulation: fmpy's validation accepts the FMU and its run
  (with a parameter and the input set through start values) equals the in-process C engine
  and the Python engine at the communication points (the tiers of tests/test_fmu_export.py);
* the trusted adjoint path of the exported FMU: ``gradient --fmu`` takes the native discrete
  adjoint of the embedded model and gives the model file's cost and gradient;
* gradients: discrete adjoint = forward sensitivities = central differences, with
  parameters in a force law (c_t, d_t), the mass (m) and a marker position (l), with HHT
  and with generalized-alpha;
* both integrators converge to the same motion, generalized-alpha with order 2;
* identification from the command line with the default options recovers the damping
  from noise-free data;
* optimal input design (``design``) on the input ``u``: its gradient equals central
  differences and a few iterations lower the criterion.

Builds are shared through the suite's build cache (the model text is fixed, so its key is).
"""

from __future__ import annotations

import json
from pathlib import Path

import fmpy
import fmpy.validation
import numpy as np
import pytest
from test_cli import gradient_json, run
from test_native_engine import SAME_ALGORITHM
from gradient_checks import assert_adjoint_equals_forward_and_central_differences
from tolerances import (
    EXACT,
    GRADIENT_VS_FD,
    INDEX3_ROUNDOFF,
    NOISE_FREE_RECOVERY,
    ORDER,
)

from fmi_adjoint import compile_model, load_model, simulate, write_csv
from fmi_adjoint.costs import LeastSquaresCost, Sampler
from fmi_adjoint.design import DesignProblem, DesignSpec, run_design
from fmi_adjoint.engines import NativeEngine
from fmi_adjoint.errors import CompilerError
from fmi_adjoint.export import export_fmu
from fmi_adjoint.identify import Experiment, IdentificationProblem
from fmi_adjoint.integrate import HHT, GeneralizedAlpha
from fmi_adjoint.native import find_c_compiler

try:
    find_c_compiler()
except CompilerError:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: the native engine and FMUs cannot be built", allow_module_level=True)

MODEL = """\
# A slender rod (spatial rigid body, Euler parameters) on a revolute joint whose axis is tilted
# by 30 degrees in the horizontal plane, a torsional spring-damper on the joint angle, gravity,
# and a torque input about the hinge axis (tests/test_mbs_downstream.py).

[model]
name = "spatial_hinge"
description = "Spatial rod on a tilted revolute joint, torsion spring-damper, torque input"
source = "tests/test_mbs_downstream.py (issue 23, item 8)"
gravity = [0, 0, "-g"]

[simulation]
t_end = 1.0
step = 2e-3
alpha = -0.05

[parameters]
m = { value = 2.0, unit = "kg", bounds = [0.5, 8.0], description = "rod mass" }
l = { value = 0.6, unit = "m", bounds = [0.2, 2.0], description = "rod length" }
g = { value = 9.81, unit = "m/s^2", description = "gravity" }
c_t = { value = 20.0, unit = "N*m/rad", bounds = [1.0, 200.0], description = "torsion stiffness" }
d_t = { value = 0.4, unit = "N*m*s/rad", bounds = [0.01, 10.0], description = "torsion damping" }

[inputs]
u = { value = 0.0, unit = "N*m", description = "torque about the hinge axis" }

# The rod hangs from its top end, turned by 0.4 rad about the hinge axis a = (cos 30, sin 30, 0):
# its centre is at -A(a, 0.4) (0, 0, l/2).
[[bodies]]
name = "rod"
type = "spatial"
mass = "m"
inertia = ["m*l**2/12", "m*l**2/12", "m*l**2/1200"]
position = ["-l/2*sin(0.4)*sin(pi/6)", "l/2*sin(0.4)*cos(pi/6)", "-l/2*cos(0.4)"]
rotation = { axis = ["cos(pi/6)", "sin(pi/6)", 0], angle = 0.4 }

[[markers]]
name = "pivot"
body = "ground"

[[markers]]
name = "top"
body = "rod"
position = [0, 0, "l/2"]

[[markers]]
name = "tip"
body = "rod"
position = [0, 0, "-l/2"]

[[joints]]
name = "hinge"
type = "revolute"
markers = ["pivot", "top"]
axis = ["cos(pi/6)", "sin(pi/6)", 0]

[[forces]]
type = "joint_force"
name = "torsion"
joint = "hinge"
law = { type = "linear_spring_damper", stiffness = "c_t", damping = "d_t" }

[[forces]]
type = "torque"
name = "drive"
body = "rod"
vector = ["u*cos(pi/6)", "u*sin(pi/6)", 0]

[[sensors]]
type = "joint_coordinate"
name = "angle"
joint = "hinge"

[[sensors]]
type = "marker_acceleration"
name = "acc"
marker = "tip"
frame = "body"
gravity = true
components = ["y", "z"]

[[sensors]]
type = "joint_reaction"
name = "load"
joint = "hinge"
components = ["fz"]
"""

#: Outputs from accelerations or multipliers (index-3 round-off floor, tests/test_fmu_export.py).
SECOND_ORDER_OUTPUTS = ("acc_y", "acc_z", "load_fz")
#: Values set through the FMU's start values and in process: a parameter and the input.
CHANGED = {"c_t": 25.0, "u": 0.3}
STEPS = 250
GRADIENT_PARAMS = ("c_t", "d_t", "m", "l")
TRUE_DAMPING = 0.55


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("spatial_hinge") / "spatial_hinge.toml"
    path.write_text(MODEL, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def model(model_file):
    return load_model(model_file)


@pytest.fixture(scope="module")
def engine(model) -> NativeEngine:
    return NativeEngine.build(model)


@pytest.fixture(scope="module")
def fmus(model_file, tmp_path_factory) -> dict[int, Path]:
    folder = tmp_path_factory.mktemp("spatial_hinge_fmus")
    return {version: export_fmu(model_file, folder / f"spatial_hinge_fmi{version}.fmu", fmi_version=version)
            for version in (2, 3)}


def test_the_model_is_a_spatial_body_on_a_revolute_joint(model):
    """The rod's seven coordinates and its six constraints (the joint force may add an
    auxiliary coordinate and constraint of its own, see :mod:`fmi_adjoint.mbs.forces`)."""
    names = [c.name for c in model.coordinates]
    assert names[:7] == ["rod_x", "rod_y", "rod_z", "rod_e0", "rod_e1", "rod_e2", "rod_e3"]
    assert all(name.startswith("torsion") for name in names[7:]), names
    assert {"rod_normalization", "hinge_x", "hinge_y", "hinge_z", "hinge_axis1", "hinge_axis2"} <= {
        c.name for c in model.constraints}
    assert [o.name for o in model.outputs] == ["angle", "acc_y", "acc_z", "load_fz"]


# -- FMU export ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", (2, 3))
def test_exported_fmu_validates_and_equals_the_engines(fmus, model, engine, version):
    """The FMU's run with ``c_t`` and the input ``u`` set through start values equals the
    in-process C engine (same C code: EXACT relative to each output's largest value) and the
    Python engine (the tiers of tests/test_fmu_export.py) at every step."""
    path = fmus[version]
    assert fmpy.validation.validate_fmu(str(path)) == []
    h = model.simulation.step
    compiled = engine.compiled
    p = compiled.parameter_vector(CHANGED)
    solver = HHT(alpha=model.simulation.alpha)
    native = engine.simulate(p, t_end=STEPS * h, step=h, solver=solver)
    python = simulate(compile_model(model), p, t_end=STEPS * h, step=h, solver=solver)
    result = fmpy.simulate_fmu(str(path), stop_time=STEPS * h, output_interval=h, start_values=CHANGED)
    assert len(result) == STEPS + 1
    assert np.max(np.abs(result["time"] - native.t)) <= EXACT * native.t[-1]
    for name in compiled.output_names:
        k = compiled.output_index(name)
        scale = np.max(np.abs(python.outputs()[:, k]))
        assert scale > 0, name
        assert np.max(np.abs(result[name] - native.outputs()[:, k])) <= EXACT * scale, name
        tier = INDEX3_ROUNDOFF if name in SECOND_ORDER_OUTPUTS else SAME_ALGORITHM
        assert np.max(np.abs(result[name] - python.outputs()[:, k])) <= tier * scale, name
    # The start values took effect: the run differs from the default parameters' one.
    default = engine.simulate(compiled.parameter_vector(), t_end=STEPS * h, step=h, solver=solver)
    angle = compiled.output_index("angle")
    assert np.max(np.abs(default.outputs()[:, angle] - result["angle"])) > 1e-3


@pytest.fixture(scope="module")
def angle_data(model_file, tmp_path_factory) -> Path:
    """Noise-free data of the model with the damping ``TRUE_DAMPING`` (the ``simulate`` command)."""
    path = tmp_path_factory.mktemp("spatial_hinge_data") / "data.csv"
    full = path.with_name("full.csv")
    from fmi_adjoint.cli.main import main

    assert main(["simulate", str(model_file), "--set", f"d_t={TRUE_DAMPING}", "-o", str(full)]) == 0
    rows = np.genfromtxt(full, delimiter=",", names=True)
    write_csv(path, rows["time"][::5], {"angle": rows["angle"][::5], "acc_z": rows["acc_z"][::5]})
    return path


def test_trusted_fmu_adjoint_path_equals_the_model_file(fmus, model_file, angle_data, capsys):
    """``gradient --fmu`` on the exported FMU (both FMI versions) trusts the embedded model and
    runs its native discrete adjoint: cost and gradient equal those of the model file."""
    common = ["--data", angle_data, "--params", "c_t,d_t,m"]
    reference = gradient_json([model_file, *common], capsys)
    assert reference["method"] == "adjoint"
    for version, path in fmus.items():
        result = gradient_json(["--fmu", path, *common], capsys)
        assert result["method"] == "adjoint", version
        assert result["gradient_path"]["method"] == "adjoint", (version, result["gradient_path"])
        assert abs(result["cost"] - reference["cost"]) <= EXACT * abs(reference["cost"]), version
        for name, value in reference["gradient"].items():
            assert value != 0.0, name
            assert abs(result["gradient"][name] - value) <= EXACT * abs(value), (version, name)


# -- gradients with both integrators ---------------------------------------------------------------


SCHEMES = {"hht": HHT(alpha=-0.05), "generalized_alpha": GeneralizedAlpha(rho_inf=0.8)}


@pytest.mark.parametrize("scheme", SCHEMES)
def test_adjoint_equals_forward_sensitivities_and_central_differences(engine, scheme):
    """Parameters in a force law (c_t, d_t), the mass (m) and marker positions (l: the hinge
    point and the initial pose move with it).  Data from other parameter values."""
    compiled = engine.compiled
    solver = SCHEMES[scheme]
    channels = ("angle", "acc_z", "load_fz")
    truth = engine.simulate(compiled.parameter_vector({"c_t": 23.0, "d_t": 0.5, "m": 2.2, "l": 0.63, "u": 0.2}),
                            t_end=0.5, solver=solver)
    times = np.linspace(0.0, 0.5, 51)
    data = Sampler.from_grid(truth.t, times).sample(truth.outputs()[:, [compiled.output_index(c) for c in channels]])
    cost = LeastSquaresCost(times, data, channels, scales=np.sqrt(np.mean(data**2, axis=0)))
    experiment = Experiment(compiled, cost, values={"u": 0.2}, t_end=0.5, solver=solver, engine=engine)
    assert_adjoint_equals_forward_and_central_differences(IdentificationProblem([experiment], GRADIENT_PARAMS))


def test_both_integrators_converge_to_the_same_motion(engine):
    """The joint angle at t = 0.4 s with steps h, h/2, h/4, h/8: generalized-alpha's errors
    (against its own finest run) fall with order 2 (Arnold & Brüls 2007), HHT's with at least
    order 1 (HHT with alpha != 0 on a configuration-dependent mass matrix), and the two finest
    runs agree to their integration error."""
    compiled = engine.compiled
    p = compiled.parameter_vector({"u": 0.5})
    k = compiled.output_index("angle")
    steps = 4e-3 / 2.0 ** np.arange(5)
    finals = {}
    for name, solver in SCHEMES.items():
        finals[name] = np.array([engine.simulate(p, t_end=0.4, step=h, solver=solver).outputs()[-1, k]
                                 for h in steps])
    ga = np.abs(finals["generalized_alpha"][:-1] - finals["generalized_alpha"][-1])
    hht = np.abs(finals["hht"][:-1] - finals["hht"][-1])
    slope_ga = np.polyfit(np.log(steps[:3]), np.log(ga[:3]), 1)[0]
    slope_hht = np.polyfit(np.log(steps[:3]), np.log(hht[:3]), 1)[0]
    assert abs(slope_ga - 2.0) <= ORDER, (slope_ga, ga)
    assert slope_hht >= 1.0 - ORDER, (slope_hht, hht)
    difference = abs(finals["hht"][-1] - finals["generalized_alpha"][-1])
    assert difference <= 4 * max(hht[-1], ga[-1]), (difference, hht, ga)
    assert abs(finals["hht"][-1]) > 0.1  # the rod moved


# -- identification and input design ------------------------------------------------------------------


def test_identify_with_the_default_options_recovers_the_damping(model_file, angle_data, tmp_path, capsys):
    out = tmp_path / "result.json"
    code, _, err = run(["identify", model_file, "--data", angle_data, "--params", "d_t", "-o", out], capsys)
    assert code == 0, err
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["initial"] == {"d_t": 0.4}
    assert abs(result["parameters"]["d_t"] - TRUE_DAMPING) <= NOISE_FREE_RECOVERY * TRUE_DAMPING, result


@pytest.fixture(scope="module")
def design_problem(model) -> DesignProblem:
    spec = DesignSpec(input="u", params=("c_t", "d_t"), knots=6, bounds=(-1.0, 1.0), noise={"angle": 1e-3},
                      t_end=0.5)
    return DesignProblem.build(spec, model)


def test_input_design_gradient_equals_central_differences(design_problem):
    problem = design_problem
    lo, hi = problem.spec.bounds
    z = problem.spec.bound_map.inverse(0.5 * (lo + hi) + 0.35 * (hi - lo) * np.linspace(-0.9, 0.7, problem.spec.knots),
                                       lo, hi)
    value = problem.evaluate(z)
    h = 1e-3 * (hi - lo)
    fd = np.zeros_like(z)
    for k in range(len(z)):
        values = []
        for s in (-2, -1, 1, 2):
            x = z.copy()
            x[k] += s * h
            values.append(problem.evaluate(x, gradient=False).objective)
        fd[k] = (values[0] - 8 * values[1] + 8 * values[2] - values[3]) / (12 * h)
    assert np.abs(fd).max() > 0
    np.testing.assert_allclose(value.gradient, fd, rtol=0, atol=GRADIENT_VS_FD * np.abs(fd).max())


def test_input_design_lowers_the_criterion(design_problem):
    result = run_design(design_problem, max_iterations=5, polish=False)
    assert np.isfinite(result.final.criterion)
    assert result.final.criterion < result.start.criterion
