"""FMU binaries run in worker processes (issue 10, finding 6; the FD extraction of finding 8;
the leftovers of finding 11).

The hand-written FMU ``fmus/faulty_decay_cs`` (FMI 2.0 Co-Simulation) is compiled with switches
that make ``fmi2DoStep`` segfault, hang, print or dawdle.  The command line runs as a real
process (signals, file descriptors and exit codes are what is tested) with a private TMPDIR,
which must be empty afterwards; no test asserts a duration, subprocess timeouts only guard
against a hang of the test itself.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from fmi_adjoint.fmu.archive import open_fmu
from fmi_adjoint.fmu.experiment import FmuExperiment
from fmi_adjoint.fmu.problem import FmuProblem
from fmi_adjoint.toolchain import c_compiler
from handwritten_fmus import build_fmu
from tolerances import EXACT

if c_compiler() is None:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: the FMUs cannot be built", allow_module_level=True)

CLI = Path(sys.executable).with_name("fmi-adjoint")
GUARD = 120  # [s] subprocess timeout: only stops a hanging test, never asserted
pytestmark = pytest.mark.slow  # whole-process runs of faulty binaries: ./run test runs them, ./run fast does not


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fmu_isolation")


@pytest.fixture(scope="module")
def fmus(work) -> dict[str, Path]:
    variants = {"good": (), "crash": ("FA_CRASH_AT=0.5",), "hang": ("FA_HANG_AT=0.5",), "print": ("FA_PRINT",),
                "slow": ("FA_SLOW_US=20000",)}
    return {key: build_fmu("faulty_decay_cs", work, defines) for key, defines in variants.items()}


@pytest.fixture(scope="module")
def data(work) -> Path:
    """x(t) = exp(-1.3 t) on [0, 1] s: the FMU's output at k = 1.3."""
    path = work / "decay.csv"
    lines = ["time,x"] + [f"{t!r},{math.exp(-1.3 * t)!r}" for t in (k / 100 for k in range(101))]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _start(args, private: Path, cwd: Path, extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    private.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TMPDIR": str(private), **(extra_env or {})}
    return subprocess.Popen([str(CLI), *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=cwd)


def _finish(process: subprocess.Popen) -> tuple[str, str]:
    """The output of ``process``; killed (and the test failed) if it runs past the guard."""
    try:
        return process.communicate(timeout=GUARD)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        pytest.fail(f"{process.args} did not end within {GUARD} s")


def _run(args, private: Path, cwd: Path) -> tuple[int, str, str]:
    process = _start(args, private, cwd)
    out, err = _finish(process)
    return process.returncode, out, err


def _processes_using(folder: Path) -> list[int]:
    """Processes whose command line names ``folder`` (the workers name their call buffer in it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(folder).encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _assert_clean(private: Path) -> None:
    assert list(private.iterdir()) == [], "temporary files left behind"
    assert _processes_using(private) == [], "worker processes left behind"


def _one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fmi-adjoint: error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_a_segfaulting_binary_is_one_error_naming_fmu_signal_and_call(fmus, data, work):
    """Finding 6: a doStep that segfaults killed the tool (exit 139, extraction left behind)."""
    private = work / "tmp_crash"
    code, out, err = _run(["gradient", "--fmu", fmus["crash"], "--data", data, "--params", "k", "--workers", 1],
                          private, work)
    line = _one_error_line(err)
    assert code == 2 and out == ""
    assert fmus["crash"].name in line and "SIGSEGV" in line and "fmi2DoStep at t = 0.5" in line
    _assert_clean(private)


def test_a_hanging_binary_times_out(fmus, data, work):
    """Finding 6: a doStep that never returns hung the tool forever."""
    private = work / "tmp_hang"
    # 5 s: the calls before the hang (loading the binary, instantiating) must not meet the timeout on
    # a loaded machine, or the error would name them
    code, out, err = _run(["gradient", "--fmu", fmus["hang"], "--data", data, "--params", "k", "--fmu-timeout", 5],
                          private, work)
    line = _one_error_line(err)
    assert code == 2 and out == ""
    assert fmus["hang"].name in line and "fmi2DoStep at t = 0.5" in line and "did not return within 5 s" in line
    assert "--fmu-timeout" in line
    _assert_clean(private)


def test_validate_runs_fmpy_in_the_worker_with_the_timeout(fmus, data, work):
    """Finding 6 for validate: fmpy.simulate_fmu ran the binary in the tool's process."""
    private = work / "tmp_validate"
    report = work / "report_hang"
    code, out, err = _run(["validate", fmus["hang"], "--data", data, "--fmu-timeout", 5, "-o", report],
                          private, work)
    line = _one_error_line(err)
    assert code == 2 and out == "" and "fmpy.simulate_fmu" in line and "did not return within 5 s" in line
    assert not report.exists()
    _assert_clean(private)


def test_a_printing_binary_leaves_json_intact_and_verbose_shows_its_log(fmus, data, work):
    """Finding 6: a binary printing to stdout corrupted ``--json``."""
    private = work / "tmp_print"
    args = ["gradient", "--fmu", fmus["print"], "--data", data, "--params", "k", "--json", "--workers", 1]
    code, out, err = _run(args, private, work)
    assert code == 0 and err == ""
    result = json.loads(out)
    assert math.isfinite(result["gradient"]["k"])
    code, out, err = _run([*args, "--verbose"], private, work)
    assert code == 0 and json.loads(out)["gradient"] == result["gradient"]
    assert f"[{fmus['print'].name}] faulty_decay says on stdout: doStep at t = 0.5" in err
    assert f"[{fmus['print'].name}] faulty_decay says on stderr: doStep at t = 0.5" in err
    _assert_clean(private)


def test_interrupts_during_fmu_identification_leave_nothing(fmus, data, work):
    """Findings 6 and 11: Ctrl-C did nothing during a hanging doStep, and SIGTERM or Ctrl-C left
    the extraction folder behind.  SIGINT after the first doStep of a slow FMU, and once the
    slow FMU steps in two processes (differences on two workers); SIGINT and SIGTERM once a
    doStep hangs.  All four run at once; each signal waits for the FMU's own mark of that state
    (``FAULTY_DECAY_MARKS``), never for a time."""
    cases = {"int_first_step": ("slow", "step", 1, signal.SIGINT),
             "int_two_workers": ("slow", "step", 2, signal.SIGINT),
             "int_hang": ("hang", "hang", 1, signal.SIGINT),
             "term_hang": ("hang", "hang", 1, signal.SIGTERM)}
    running = {}
    try:
        for name, (fmu, _, _, _) in cases.items():
            folder = work / f"interrupt_{name}"
            (folder / "marks").mkdir(parents=True)
            process = _start(["identify", "--fmu", fmus[fmu], "--data", data, "--params", "k", "--workers", 2,
                              "-o", folder / "out.json"], folder / "tmp", folder,
                             {"FAULTY_DECAY_MARKS": str(folder / "marks")})
            running[name] = (process, folder)
        waiting = set(cases)
        deadline = time.monotonic() + GUARD
        while waiting:
            for name in sorted(waiting):
                process, folder = running[name]
                _, what, count, signum = cases[name]
                if len(list((folder / "marks").glob(f"{what}.*"))) >= count:
                    assert process.poll() is None, f"{name}: ended before the signal"
                    process.send_signal(signum)
                    waiting.discard(name)
                else:
                    assert process.poll() is None, f"{name}: ended before the FMU marked {count} x {what}"
            if time.monotonic() > deadline:
                pytest.fail(f"no mark within {GUARD} s: {sorted(waiting)}")
            time.sleep(0.05)  # polling interval
    except BaseException:
        for process, _ in running.values():
            process.kill()
            process.communicate()
        raise
    for name, (process, folder) in running.items():
        _, err = _finish(process)
        terminated = cases[name][3] == signal.SIGTERM
        assert process.returncode == (143 if terminated else 130), (name, err)
        assert err.splitlines()[-1] == f"fmi-adjoint: {'terminated' if terminated else 'interrupted'}", (name, err)
        assert "Traceback" not in err
        assert not (folder / "out.json").exists()
        _assert_clean(folder / "tmp")


def test_parallel_differences_share_one_extraction(fmus, data, work, monkeypatch):
    """Finding 8: each finite-difference worker re-extracted the archive (5.4 GB with two)."""
    from fmi_adjoint.identify.data_costs import CostOptions, build_cost
    from fmi_adjoint.fmu.loading import fmu_target

    private = work / "tmp_parallel"
    private.mkdir()
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr(tempfile, "tempdir", None)  # recomputed from TMPDIR
    with open_fmu(fmus["good"]) as archive:
        cost, t_end = build_cost(CostOptions(), fmu_target(archive), str(data), t_end=None, step=0.01)
        experiment = FmuExperiment(cost, t_end=t_end, step=0.01)
        problems = [FmuProblem(archive, [experiment], ["k", "x_start"], "fd", workers=w) for w in (1, 2)]
        try:
            x = np.array([1.1, 0.9])
            serial, parallel = (p.finite_differences(x) for p in problems)
            assert len(problems[1].instances._pool) == 1  # really ran on a second worker
            extractions = [p for p in private.iterdir() if p.name.startswith("fmi_adjoint_fmu_")]
        finally:
            for p in problems:
                p.close()
    assert len(extractions) == 1
    assert np.all(serial != 0.0)
    assert np.max(np.abs(parallel - serial) / np.abs(serial)) <= EXACT
    _assert_clean(private)
