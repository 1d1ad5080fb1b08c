"""Runs of Model Exchange FMUs bounded in time and memory (issue 31, finding 4 FMU items, finding 6).

Every case is a command line on the hand-built ``fmus/misbehaving_me`` (its parameter ``mode``
selects the defect) or ``fmus/stair``, run as a subprocess: it must end with exit code 2,
nothing on stdout and ONE line on stderr naming the FMU, the time and the fix.  Before the run
budget these commands ran for minutes (time events every 1e-300 s or at ``nextafter(t)``: past
300 s and 1.3 GB; noisy derivatives: past 100 s; ``--step 1e-300``: past 120 s) or ended in
"internal error" (a next time event in the past, NaN; ``--atol 1e-320``): the subprocess
timeouts below are generous bounds for a hang, not measurements.  The run budget's own
counters (memory, the events' chatter) are checked in-process on small test systems.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from fmi_adjoint.errors import ConvergenceError, RunBudgetError
from fmi_adjoint.integrate.radau import RunBudget, integrate_radau, record_bytes_per_step
from fmi_adjoint.toolchain import c_compiler
from handwritten_fmus import build_fmu

if c_compiler() is None:
    pytest.skip("no C compiler: the hand-written FMUs cannot be built", allow_module_level=True)

#: A hang on the code before the budget; every case here ends in a few seconds.
HANG = 60


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fmu_budgets")
    decay = folder / "decay.csv"
    decay.write_text("time,x\n" + "".join(f"{0.05 * i:.2f},{math.exp(-0.05 * i)!r}\n" for i in range(21)))
    stair = folder / "stair.csv"
    stair.write_text("time,level\n" + "".join(f"{0.1 * i:.1f},{2 * int(0.2 * i + 1e-9) + math.exp(-0.1 * i)!r}\n"
                                              for i in range(21)))
    return {"misbehaving": build_fmu("misbehaving_me", folder), "stair": build_fmu("stair", folder),
            "decay": decay, "stair_data": stair, "folder": folder}


def _run(files, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fmi_adjoint", *argv], cwd=files["folder"], capture_output=True,
                          text=True, timeout=HANG, env={**os.environ, "PYTHONWARNINGS": "error"})


def _misbehaving(files, command: str, *options: str) -> subprocess.CompletedProcess:
    return _run(files, command, "--fmu", str(files["misbehaving"]), "--data", str(files["decay"]), "--params", "k",
                "--set", "k=1.1", *options)


def _one_line(proc: subprocess.CompletedProcess) -> str:
    """The single error line of a refused command (exit 2, nothing on stdout, no traceback)."""
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and proc.stdout == "" and len(lines) == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert lines[0].startswith("fmi-adjoint: error: ") and "internal error" not in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("settings, expected", [
    # every 1e-300 s from t = 0: advancing, but by far less than an ulp of 1
    (("mode=1", "t_bad=0"), r"misbehaving_me\.fmu: the time events do not advance: the next time event is 1e-300 s "
                            r"after t = 1e-299 s, the 10th in a row"),
    # every 1e-300 s from t = 0.25: t + 1e-300 == t
    (("mode=1",), r"misbehaving_me\.fmu: the next time event announced at t = 0\.25 s is 0\.25, which is the current "
                  r"time again; .*defect of the model \(FMU\)"),
    (("mode=2",), r"misbehaving_me\.fmu: the time events do not advance: the next time event is 5\.55e-17 s after "
                  r"t = 0\.25\d* s"),
    (("mode=3",), r"misbehaving_me\.fmu: the next time event announced at t = 0\.25 s is -0\.75, which lies 1 s in "
                  r"the past"),
    (("mode=4",), r"misbehaving_me\.fmu: the next time event announced at t = 0\.25 s is nan, which is not a finite "
                  r"time"),
    (("mode=8",), r"misbehaving_me\.fmu: the next time event announced at t = 0\.25 s is inf, which is not a finite "
                  r"time"),
], ids=["every-1e-300-from-0", "every-1e-300-equal", "nextafter", "past", "nan", "inf"])
def test_defective_time_events_end_the_gradient_with_one_line(files, settings, expected):
    """Time events that do not advance ran for minutes, ones in the past or NaN ended in an
    internal error with advice for developers: now one line names the FMU, the time and the value."""
    options = [item for setting in settings for item in ("--set", setting)]
    assert re.search(expected, _one_line(_misbehaving(files, "gradient", *options)))


def test_time_events_at_nextafter_end_the_identification(files):
    line = _one_line(_misbehaving(files, "identify", "--set", "mode=2", "--max-iter", "3"))
    assert "time events do not advance" in line and "have it fixed" in line


def test_noisy_derivatives_end_the_gradient_within_its_step_budget(files):
    """Derivatives with 1e-6 noise: Newton never reaches round-off, the steps shrink to ~1e-6 s
    and most are rejected; the run ends at the first progress check (1000 steps) that shows it
    cannot finish within the step budget, naming the noise, instead of running past 100 s."""
    line = _one_line(_misbehaving(files, "gradient", "--set", "mode=5"))
    assert "misbehaving_me.fmu: the integration rejected" in line and "beyond the step budget" in line
    assert "could not be solved to round-off" in line and "noise?" in line and "fix the model (FMU)" in line


@pytest.mark.parametrize("option, expected", [
    (("--max-steps", "5"), r"max_steps = 5 steps .* reached t = 0\.\d+ s of \[0, 1\] s .*raise --max-steps"),
    # mode 9: every derivative takes 1 ms, so the 1e5 samples take minutes on any CPU (the run
    # outlasted the budget only on a machine as slow as ours before)
    (("--run-timeout", "0.5", "--step", "1e-5", "--set", "mode=9"),
     r"exceeded its wall-time budget of 0\.5 s at t = [0-9.e+-]+ s; raise --run-timeout"),
])
def test_a_run_over_its_budget_ends_naming_the_budget_and_the_option(files, option, expected):
    line = _one_line(_misbehaving(files, "gradient", *option))
    assert line.startswith("fmi-adjoint: error: misbehaving_me.fmu: ")
    assert re.search(expected, line), line


def test_the_event_budget_ends_a_run_with_more_events(files):
    line = _one_line(_run(files, "gradient", "--fmu", str(files["stair"]), "--data", str(files["stair_data"]),
                          "--params", "c", "--max-events", "2"))
    assert "stair.fmu: the run reached max_events = 2 events at t = 1.5 s" in line and "raise --max-events" in line


def test_a_run_within_its_budget_is_unchanged(files):
    """The budget options reach the worker without changing a run that keeps within them."""
    base = _misbehaving(files, "gradient")
    bounded = _misbehaving(files, "gradient", "--max-steps", "1000", "--max-events", "5", "--run-timeout", "30")
    assert base.returncode == bounded.returncode == 0, (base.stderr, bounded.stderr)

    def values(out: str) -> list[str]:  # without the timings
        return [line.split("(")[0] for line in out.splitlines()]

    assert values(base.stdout) == values(bounded.stdout) and "dJ/dk" in base.stdout


@pytest.mark.parametrize("option, expected", [
    (("--step", "1e-300"), "--step 1e-300 gives 1e+300 steps, more than the limit of 5e+07"),
    (("--step", "1e-7"), "--step 1e-07: a Model Exchange run of 1 s with steps of at most --step needs at least "
                         "1e+07 steps, more than --max-steps 200000; give --step 5e-06 or larger"),
    (("--atol", "1e-320"), "--atol 1e-320: give a tolerance in [1e-30, 1)"),
    (("--rtol", "1e-15"), "--rtol 1e-15: give a tolerance in [1e-14, 1)"),
    (("--rtol", "1"), "--rtol 1.0: give a tolerance in [1e-14, 1)"),
    (("--max-steps", "0"), "--max-steps 0: give a whole number of at least 1"),
    (("--run-timeout", "nan"), "--run-timeout nan: give the longest time one simulation may take"),
], ids=["step-1e-300", "step-over-budget", "atol-subnormal", "rtol-tiny", "rtol-one", "max-steps", "run-timeout"])
def test_run_options_out_of_range_are_refused_at_the_front_door(files, option, expected):
    assert expected in _one_line(_misbehaving(files, "gradient", *option))


def test_tolerances_for_a_co_simulation_run_are_refused_naming_the_fix(files):
    """--rtol/--atol did nothing on Co-Simulation (the FMU's own solver) and said nothing."""
    line = _one_line(_run(files, "gradient", "--fmu", str(files["stair"]), "--data", str(files["stair_data"]),
                          "--params", "c", "--interface", "cs", "--rtol", "1e-6"))
    assert "--rtol applies to Model Exchange runs only" in line and "give --interface me" in line


# -- the budget's counters in-process -------------------------------------------------------
class _Decay:
    """x' = -x with a time-event schedule ``announce(t)`` and step events on request."""

    n_states = 1
    n_indicators = 0

    def __init__(self, announce=lambda t: None, step_events: bool = False):
        self.announce, self.step_events, self.t = announce, step_events, 0.0

    def rhs(self, t, x):
        return -x

    def jacobian(self, t, x):
        return -np.eye(1)

    def indicators(self, t, x):
        return np.zeros(0)

    def next_time_event(self):
        return self.announce(self.t)

    def event(self, t, x, kind):
        self.t = t
        return x

    def accepted(self, step):
        pass

    def completed_step(self, t, x):
        return self.step_events


def test_the_memory_budget_bounds_the_recorded_run():
    budget = RunBudget(max_memory=50 * record_bytes_per_step(1))
    with pytest.raises(RunBudgetError, match=r"record reached 50 steps .* memory budget"):
        integrate_radau(_Decay(), np.ones(1), 0.0, 1.0, max_step=1e-3, budget=budget)


def test_time_events_a_few_ulp_apart_are_a_budget_error():
    """Time events 1e-15 s apart advance, but would need 5e14 steps to reach the end."""
    system = _Decay(lambda t: t + 1e-15 if t >= 0.5 else 0.5)
    with pytest.raises(RunBudgetError, match=r"time events do not advance: the next time event is \d\.\d*e-1[56] s "
                                             r"after t = 0\.50000000000000\d* s, the 10th in a row"):
        integrate_radau(system, np.ones(1), 0.0, 1.0)


def test_the_step_floor_comes_from_the_budget():
    """A step-size underflow names the time, the floor and the cause."""
    class Kink(_Decay):
        def rhs(self, t, x):
            return np.array([1e6 * (t > 0.5)]) - x

    with pytest.raises(ConvergenceError, match=r"step size at t = 0\.4\d* s fell to .* below the smallest step .*"
                                               r"not smooth"):
        integrate_radau(Kink(), np.ones(1), 0.0, 1.0, rtol=1e-12, atol=1e-14,
                        budget=RunBudget(min_step_relative=1e-4))
