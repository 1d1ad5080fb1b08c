"""Guards on FMU fits (issue 32, "Guards" and "What must be shown"): each through the command line
(exit code, the warning naming the cause and the fix, ``success`` in RESULT.json), and controls
where no guard may fire.

* a cost that is not smooth at the result: the bouncing ball fitted with ``--gradient fd`` on
  three seconds of data stops next to a jump of the cost (an event crossing a sample time)
  with ``success`` true before; the noise floor of its data was inflated by the velocity's
  jumps (0.56 on one second of data) and no warning fired;
* the bouncing ball's restitution from e = 0.55 with default options reaches the truth (event
  windows, :mod:`fmi_adjoint.fmu.windows`);
* a Co-Simulation FMU holding a fast input over a coarse communication step: the estimated bias
  exceeds a standard error, ``success`` false; the same data through Model Exchange fit clean;
* the optimizer stopping short of the minimum (state_space3 from the identity start);
* an FMU without an identifiable parameter: the refusal names what exists and what to do.

The data are made by fmpy's CVode (the ball, rtol 1e-10) or by fmi-adjoint's own Model Exchange
runs at rtol 1e-12 (inputs: fmpy's CVode fails on a sampled input at rtol 1e-10).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import fmpy
import numpy as np
import pytest

from captured_cli import cli as _cli
from fmi_adjoint import write_csv
from fmi_adjoint.cli.fmu_loading import load_fmu_experiments, run_tolerances
from fmi_adjoint.costs import LeastSquaresCost
from fmi_adjoint.fmu.archive import open_fmu
from fmi_adjoint.fmu.problem import fmu_problem
from fmi_adjoint.identify.data_costs import CostOptions
from fmi_adjoint.toolchain import c_compiler
from handwritten_fmus import build_fmu
from tolerances import FMU_NOISE_FREE_RECOVERY, NOISE_FLOOR_ESTIMATE, NOISE_FREE_RECOVERY, WITHIN_STD_ERRORS

if c_compiler() is None:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: the FMUs cannot be built", allow_module_level=True)

BALL_TRUE_E = 0.8
VDP_TRUE_MU = 1.5
RNG_SEED = 32
#: Noise of the ball's data from e = 0.55 (height in m, velocity in m/s).
BALL_NOISE = (0.002, 0.01)


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fmu_guards")


@pytest.fixture(scope="module")
def fmus(work) -> dict[str, Path]:
    return {name: Path(build_fmu(name, work)) for name in ("bouncing_ball", "van_der_pol_mecs", "state_space3")}


def _identify(argv, output: Path) -> tuple[int, dict, str]:
    code, _, err = _cli(["identify", *argv, "-o", output])
    assert code in (0, 1), err
    return code, json.loads(output.read_text(encoding="utf-8")), err


def _ball_data(fmu: Path, path: Path, t_end: float, samples: int, noise=None) -> Path:
    """fmpy's CVode run (rtol 1e-10) at the true e, without the two rows fmpy records at a bounce."""
    run = fmpy.simulate_fmu(str(fmu), fmi_type="ModelExchange", relative_tolerance=1e-10, stop_time=t_end,
                            output_interval=t_end / (samples - 1), start_values={"e": BALL_TRUE_E}, output=["h", "v"])
    t = run["time"]
    same = np.diff(t) == 0
    keep = ~np.r_[same, False] & ~np.r_[False, same]
    columns = {name: np.asarray(run[name][keep], dtype=float) for name in ("h", "v")}
    if noise is not None:
        rng = np.random.default_rng(RNG_SEED)
        for (name, values), sigma in zip(columns.items(), noise):
            columns[name] = values + sigma * rng.standard_normal(values.size)
    write_csv(path, t[keep], columns)
    return path


def _me_data(fmu: Path, path: Path, times: np.ndarray, outputs: list[str], values: dict[str, float],
             inputs: Path | None = None) -> Path:
    """The FMU's outputs at ``times`` by fmi-adjoint's Model Exchange run at rtol 1e-12."""
    write_csv(path, times, {name: np.zeros(times.size) for name in outputs})
    names = list(values)
    with open_fmu(fmu) as archive:
        experiments = load_fmu_experiments(archive, [str(path)], {}, inputs_file=str(inputs) if inputs else None,
                                           t_end=None, step=None, identified=names, cost=CostOptions())
        problem, _ = fmu_problem(archive, experiments, names, gradient="sensitivity", interface="me",
                                 tolerances=run_tolerances(1e-12, 1e-14, None))
        try:
            y = problem.sampled_outputs(0, np.array([values[n] for n in names]))
        finally:
            problem.close()
    write_csv(path, times, {name: y[:, k] for k, name in enumerate(outputs)})
    return path


# ------------------------------------------------------------- 1. a cost that is not smooth --

@pytest.fixture(scope="module")
def ball_3s(fmus, work) -> Path:
    """Six bounces in 3 s (61 samples): the basin of the truth is e within about 0.002."""
    return _ball_data(fmus["bouncing_ball"], work / "ball_3s.csv", 3.0, 61)


#: The ball's 3 s record: 61 samples, 0.05 s apart; its noise floor with the jumps averaged in.
SAMPLE_INTERVAL = 3.0 / 60
JUMPS_FLOOR = 0.035


def test_noise_floor_leaves_out_the_jumps_of_the_data(ball_3s):
    """The ball's velocity jumps at each bounce; the floor was the jumps' (0.56 on the first
    second), above the cost of a wrong minimum.  Noise-free data: the floor is that of the
    height's curvature only, and the jumps are found next to the bounces."""
    data = np.genfromtxt(ball_3s, delimiter=",", names=True)
    cost = LeastSquaresCost(data["time"], np.column_stack([data["h"], data["v"]]), ("h", "v"))
    # The floor left is the height's curvature between bounces (g h^2 per sample); the jumps'
    # squares gave 0.035 before.  Measured 6.2e-4: a twentieth of the jumps' floor is the bound.
    assert cost.noise_floor() < JUMPS_FLOOR / 20, cost.noise_floor()
    bounces = np.array([0.4515, 1.1741, 1.7520])  # h0 = 1, g = 9.81, e = 0.8
    jumps = cost.jump_times()
    for t in bounces:
        assert np.min(np.abs(jumps - t)) <= SAMPLE_INTERVAL, jumps  # within one sample interval


def test_noise_estimate_of_white_noise_with_jumps():
    """White noise on a step signal: the jumps are left out, the variance is that of the noise
    (before: the jumps' squares were averaged in)."""
    rng = np.random.default_rng(RNG_SEED)
    times = np.linspace(0.0, 9.5, 19_001)
    sigma = 0.01
    clean = np.where(np.floor(times) % 2 == 0, 0.0, 5.0)  # nine jumps of 5, at t = 1, ..., 9
    cost = LeastSquaresCost(times, clean + sigma * rng.standard_normal(times.size), ("y",))
    assert cost.noise_variances()[0] == pytest.approx(sigma**2, rel=NOISE_FLOOR_ESTIMATE)
    assert cost.jump_times().size == 9


def test_fd_fit_that_stops_at_a_jump_is_not_a_success(fmus, ball_3s, work):
    """--gradient fd from e = 0.805: the fit stops at e = 0.8048 with cost 0.40 (the truth: ~1e-19)
    next to a jump of the cost.  Before: exit 0, success true, no warning."""
    code, payload, err = _identify(["--fmu", fmus["bouncing_ball"], "--data", ball_3s, "--params", "e",
                                    "--set", "e=0.805", "--gradient", "fd", "--strategy", "single"],
                                   work / "fd.json")
    assert payload["cost"] > 1e-3  # the wrong answer this guard is for
    assert code == 1 and payload["success"] is False
    text = [w for w in payload["warnings"] if "not smooth" in w]
    assert len(text) == 1 and "--gradient sensitivity" in text[0] and "jump" in text[0], payload["warnings"]
    assert "not smooth" in err
    assert any("times the noise floor" in w for w in payload["warnings"])


# ------------------------------------------------ 2. the bouncing ball from e = 0.55 by default --

def test_bouncing_ball_from_0_55_with_default_options(fmus, work):
    """Noisy data on [0, 1.5] s (bounces at 0.45 and 1.17 s).  Before: the single start stopped
    at e = 0.560 (ABNORMAL); on the first second alone at a wrong minimum 0.534 with success
    true.  The event windows fit [0, 0.8] s first."""
    data = _ball_data(fmus["bouncing_ball"], work / "ball_noisy.csv", 1.5, 31, noise=BALL_NOISE)
    code, payload, err = _identify(["--fmu", fmus["bouncing_ball"], "--data", data, "--params", "e",
                                    "--set", "e=0.55"], work / "ball_default.json")
    assert code == 0 and payload["success"], err
    e, se = payload["parameters"]["e"], payload["std_errors"]["e"]
    assert abs(e - BALL_TRUE_E) <= WITHIN_STD_ERRORS * se, (e, se)
    assert payload["warnings"] == []


def test_smooth_fit_raises_no_guard(fmus, work):
    """Control: the ball on its first second from e = 0.7 with exact sensitivities reaches the
    truth; no guard fires."""
    data = _ball_data(fmus["bouncing_ball"], work / "ball_1s.csv", 1.0, 21)
    code, payload, err = _identify(["--fmu", fmus["bouncing_ball"], "--data", data, "--params", "e", "--set",
                                    "e=0.75", "--gradient", "sensitivity", "--method", "least_squares"],
                                   work / "ball_1s.json")
    assert code == 0 and payload["success"] and payload["warnings"] == [], err
    assert abs(payload["parameters"]["e"] - BALL_TRUE_E) <= NOISE_FREE_RECOVERY * BALL_TRUE_E


# ------------------------------------------------------------------- 4. held inputs (CS) --

@pytest.fixture(scope="module")
def vdp_forced(fmus, work) -> dict[str, Path]:
    """Van der Pol driven by u = sin(2 pi 1.5 t) sampled every 0.01 s; outputs every 0.1 s on [0, 4]."""
    t = np.linspace(0.0, 4.0, 401)
    inputs = work / "u.csv"
    write_csv(inputs, t, {"u": np.sin(2 * np.pi * 1.5 * t)})
    data = _me_data(fmus["van_der_pol_mecs"], work / "vdp.csv", np.linspace(0.0, 4.0, 41), ["x0", "x1"],
                    {"mu": VDP_TRUE_MU}, inputs)
    return {"inputs": inputs, "data": data}


def test_held_input_that_varies_within_a_step_makes_success_false(fmus, vdp_forced, work):
    """Co-Simulation at the data's step 0.1 s holds the 1.5 Hz input over each step (it changes
    by 45 % of its range within one): mu = 1.506, about 3 standard errors off; the estimated
    bias (+0.009) is 4.  Before: success true, no warning."""
    code, payload, err = _identify(["--fmu", fmus["van_der_pol_mecs"], "--data", vdp_forced["data"], "--inputs",
                                    vdp_forced["inputs"], "--params", "mu", "--set", "mu=1.3", "--interface", "cs"],
                                   work / "held.json")
    assert code == 1 and payload["success"] is False
    text = [w for w in payload["warnings"] if "holds each input" in w]
    assert len(text) == 1, payload["warnings"]
    assert "--step" in text[0] and "--interface me" in text[0] and "standard errors" in text[0]
    assert "holds each input" in err


def test_input_held_over_a_fine_step_raises_no_guard(fmus, vdp_forced, work):
    """Control: a 0.005 s step holds the input for at most 5 % of its range: mu within standard
    errors, no warning.  (Model Exchange, which interpolates the input, is never checked.)"""
    code, payload, err = _identify(["--fmu", fmus["van_der_pol_mecs"], "--data", vdp_forced["data"], "--inputs",
                                    vdp_forced["inputs"], "--params", "mu", "--set", "mu=1.3", "--interface", "cs",
                                    "--step", "0.005"], work / "vdp_fine.json")
    assert code == 0 and payload["success"] and payload["warnings"] == [], err
    mu, se = payload["parameters"]["mu"], payload["std_errors"]["mu"]
    assert abs(mu - VDP_TRUE_MU) <= WITHIN_STD_ERRORS * se + 1e-6 * VDP_TRUE_MU, (mu, se)


# -------------------------------------------------------- 3. stopped short of the minimum --

@pytest.mark.slow
def test_state_space_from_the_identity_start(fmus, work):
    """state_space3 (FMI 3 arrays) from A = I (unstable: a large start cost) on noise-free data
    over 1.5 s.  L-BFGS-B's stopping test is relative to that cost: it stopped about 1e-6
    relative, 9 standard errors, from the truth (noise-free data: the standard errors shrink with
    the residuals), and the Model Exchange runs' own discretization bias at the default rtol
    (1e-8) is of the same size.  Before: success true.  Now success false, the fixes named; with
    them (least squares, rtol 1e-10, the tolerance the warning names) the truth to the accuracy
    of noise-free FMU fits.  (The record is shorter than the issue's 5 s, its input sampled every
    0.02 s, to keep the suite fast: 48 s of CPU instead of 98 s for 2.5 s sampled every 0.01 s;
    the behaviour is the same: 6.1 instead of 8.8 standard errors off, the same warning, the
    fixed fit 9e-9 relative from the truth.  The bias comes from the corners of the linearly
    interpolated input: 2.5 s of it sampled every 0.05 s, the default fit lands within 2 standard
    errors.)"""
    t = np.linspace(0.0, 1.5, 76)
    inputs = work / "ss_u.csv"
    write_csv(inputs, t, {"u": np.sin(2 * t) + 0.5 * np.sin(0.7 * t)})
    truth = {"A[1,1]": -1.0, "A[2,2]": -2.0}
    data = _me_data(fmus["state_space3"], work / "ss.csv", np.linspace(0.0, 1.5, 31), ["y64"], truth, inputs)
    common = ["--fmu", fmus["state_space3"], "--data", data, "--inputs", inputs, "--params", "A[1,1],A[2,2]",
              "--set", "A[1,1]=1", "--set", "A[2,2]=1"]
    code, payload, err = _identify(common, work / "ss_default.json")
    off = {n: abs(payload["parameters"][n] - v) / payload["std_errors"][n] for n, v in truth.items()}
    assert max(off.values()) > WITHIN_STD_ERRORS  # the case of the issue
    assert code == 1 and payload["success"] is False, off
    text = [w for w in payload["warnings"] if "stopped before the minimum" in w or "discretization error" in w]
    assert text, payload["warnings"]
    assert any("--method least_squares" in w for w in text) or any("--rtol" in w for w in text), text
    code, payload, err = _identify([*common, "--method", "least_squares", "--rtol", "1e-10"], work / "ss_fixed.json")
    assert code == 0 and payload["success"] and payload["warnings"] == [], err
    for name, value in truth.items():
        assert abs(payload["parameters"][name] - value) <= FMU_NOISE_FREE_RECOVERY * abs(value), payload["parameters"]


# ------------------------------------------------ 5. an FMU with nothing to identify --

NOTHING_TO_IDENTIFY = """<?xml version="1.0" encoding="UTF-8"?>
<fmiModelDescription fmiVersion="3.0" modelName="counts" instantiationToken="{aaaaaaaa-3232-3333-4444-555555555555}">
  <ModelExchange modelIdentifier="counts"/>
  <ModelVariables>
    <Float64 name="time" valueReference="0" causality="independent" variability="continuous"/>
    <UInt64 name="n" valueReference="1" causality="structuralParameter" variability="fixed" start="2"/>
    <Int32 name="level" valueReference="2" causality="parameter" variability="fixed" start="3"/>
    <Float64 name="y" valueReference="3" causality="output" variability="continuous"/>
  </ModelVariables>
  <ModelStructure><Output valueReference="3"/></ModelStructure>
</fmiModelDescription>
"""


def test_fmu_without_identifiable_parameters_names_what_exists(work):
    """The refusal listed "Parameters: ." (empty); it now names the structural and the Integer
    parameter, how to fix them, and what to do instead."""
    fmu = work / "counts.fmu"
    with zipfile.ZipFile(fmu, "w") as archive:
        archive.writestr("modelDescription.xml", NOTHING_TO_IDENTIFY)
        archive.writestr("binaries/x86_64-linux/counts.so", b"not a binary")
    data = work / "counts.csv"
    write_csv(data, np.linspace(0.0, 1.0, 5), {"y": np.zeros(5)})
    code, out, err = _cli(["identify", "--fmu", fmu, "--data", data, "--params", "k", "-o", work / "counts.json"])
    assert code == 2 and out == "", err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fmi-adjoint: error:"), err
    assert "Parameters: ." not in lines[0]
    for word in ("no real", "n (structural parameter", "--set n=VALUE", "level (an Integer parameter",
                 "--set level=VALUE", "causality \"parameter\""):
        assert word in lines[0], (word, lines[0])
    assert not (work / "counts.json").exists()
