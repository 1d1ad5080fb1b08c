"""Identification on an executor (issue 14): serial, process pool and a real Dask cluster
give the same numbers bit for bit; a killed worker changes nothing; a run killed with
SIGKILL or stopped with Ctrl-C resumes from its checkpoint to the uninterrupted result;
bad options are one clear error each."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from fmi_adjoint.cli.loading import load_problem, problem_spec
from fmi_adjoint.cli.main import main
from fmi_adjoint.examples import EXAMPLES_DIR
from fmi_adjoint.identify.multistart import run_starts, sobol_starts
from fmi_adjoint.identify.parallel import DistributedProblem
from fmi_adjoint.scale import SerialExecutor
from fmi_adjoint.scale.pool import LocalPool


distributed = pytest.importorskip("distributed")

SWEEP = str(EXAMPLES_DIR / "engine_mount_measured.csv")
SWEEP_300 = str(EXAMPLES_DIR / "engine_mount_measured_A300.csv")
NAMES = "c_E1,d_E"
#: Short identifications: 4 starts of at most 12 iterations each on the 100 N sweep.
COMMON = ["engine_mount", "--data", f"{SWEEP}@A=100", "--params", NAMES, "--method", "lbfgsb", "--max-iter", "12",
          "--bounds", "c_E1=5e4:2e5", "--bounds", "d_E=0.5:20"]


@pytest.fixture(scope="module")
def cluster():
    """A Dask LocalCluster of 2 worker processes (one thread each)."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0") as c:
        with Client(c, set_as_default=False) as client:
            yield c, client


def _run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _identify(tmp_path, capsys, name, *extra):
    out = tmp_path / f"{name}.json"
    code, _, err = _run(["identify", *COMMON, *extra, "-o", out], capsys)
    assert code in (0, 1), err
    return json.loads(out.read_text()), err


def _untimed(stages: list) -> list:
    """Stages of a staged fit without their run times."""
    return [{k: v for k, v in stage.items() if k != "seconds"} for stage in stages]


def _numbers(result: dict) -> dict:
    """Everything of a RESULT.json that the worker count must not change (timings aside)."""
    keep = {k: result[k] for k in ("parameters", "cost", "cost_initial", "cost_history", "gradient_norm_history",
                                   "iterations", "std_errors", "correlation", "success", "message")}
    if "multistart" in result:
        runs = result["multistart"]["results"]
        keep["starts"] = [{k: _untimed(v) if k == "stages" else v for k, v in r.items() if k != "seconds"}
                          for r in runs]
    if "strategy" in result:
        keep["strategy"] = {**result["strategy"], "stages": _untimed(result["strategy"].get("stages", []))}
        keep["clusters"] = result["multistart"]["clusters"]
    return keep


@pytest.mark.slow  # multistarts on three executors
def test_serial_pool_and_dask_multistarts_agree_bit_for_bit(tmp_path, capsys, cluster):
    local, _ = cluster
    serial, _ = _identify(tmp_path, capsys, "serial", "--starts", 4, "--workers", 1)
    pool, _ = _identify(tmp_path, capsys, "pool", "--starts", 4, "--workers", 2)
    dask, _ = _identify(tmp_path, capsys, "dask", "--starts", 4, "--dask", local.scheduler_address)
    assert serial["executor"] == {"executor": "serial", "workers": 1}
    assert pool["executor"]["executor"] == "pool" and pool["executor"]["workers"] == 2
    assert dask["executor"]["executor"] == "dask" and dask["executor"]["workers"] == 2
    assert len(serial["multistart"]["results"]) == 4
    # json round-trips floats exactly: equal dictionaries are equal bits.
    assert _numbers(pool) == _numbers(serial)
    assert _numbers(dask) == _numbers(serial)


@pytest.mark.slow  # three executors
def test_a_multi_experiment_gradient_is_the_same_on_every_executor(capsys, cluster):
    local, _ = cluster
    argv = ["gradient", "engine_mount", "--data", f"{SWEEP}@A=100", "--data", f"{SWEEP_300}@A=300",
            "--params", "c_E1,c_E2,d_E,d_H2", "--json"]
    results = []
    for extra in (["--workers", 1], ["--workers", 2], ["--dask", local.scheduler_address],
                  ["--workers", 2, "--method", "fd"], ["--workers", 1, "--method", "fd"]):
        code, out, err = _run([*argv, *extra], capsys)
        assert code == 0, err
        results.append(json.loads(out))
    adjoint, fd = results[:3], results[3:]
    assert all(r["cost"] == adjoint[0]["cost"] and r["gradient"] == adjoint[0]["gradient"] for r in adjoint)
    assert fd[0]["cost"] == fd[1]["cost"] and fd[0]["gradient"] == fd[1]["gradient"]


def _distributed_problem(executor):
    spec = problem_spec("engine_mount", [f"{SWEEP}@A=100"], {}, ["c_E1", "d_E"], t_end=None, step=None,
                        bounds={"c_E1": (5e4, 2e5), "d_E": (0.5, 20.0)})
    spec, local = load_problem(spec)
    return local, DistributedProblem(local, spec, executor)


def _kill_one_at_evaluation(problem, pids_of, killed: list, at: int = 3) -> None:
    """SIGKILL one worker process when the run asks for its ``at``-th evaluation, or the first
    after it once the workers are up (once).

    Counted, not timed (a sleep before the kill let a fast machine finish the run first): the
    kill happens during the run on any machine, while the other starts' evaluations are on
    the executor (the starts run in threads)."""
    base = type(problem)
    lock = threading.Lock()
    calls = [0]

    class Counted(base):  # type: ignore[misc,valid-type]
        # A subclass, not a patched bound method: the windows of a staged fit are copies of the
        # problem (identify.strategies.windowed), which must count, and evaluate, as themselves.
        def _parts(self, *args, **kwargs):
            with lock:
                calls[0] += 1
                if calls[0] >= at and not killed:
                    pids = pids_of()  # empty while the pool is still starting its workers: the next call
                    if pids:
                        os.kill(pids[0], signal.SIGKILL)
                        killed.append(pids[0])
            return base._parts(self, *args, **kwargs)

    problem.__class__ = Counted


def _multistart(problem, starts):
    return run_starts(problem, starts, "lbfgsb", max_iterations=12, progress=None)


def _same_outcome(a, b):
    assert a.best_start == b.best_start
    for sa, sb in zip(a.starts, b.starts):
        assert sa.result.parameters.tobytes() == sb.result.parameters.tobytes()
        assert sa.result.cost == sb.result.cost and sa.result.cost_history == sb.result.cost_history


@pytest.mark.parametrize("where", ["pool", "dask"])
@pytest.mark.slow  # multistart runs with a killed worker
def test_a_worker_killed_during_a_multistart_changes_nothing(where, cluster):
    local_problem, _ = _distributed_problem(SerialExecutor())
    starts = sobol_starts(local_problem, 4, seed=1)
    reference = _multistart(local_problem, starts)
    if where == "pool":
        executor = LocalPool(2)
        pids = executor.worker_pids
    else:
        from fmi_adjoint.scale.dask import DaskExecutor

        _, client = cluster
        executor = DaskExecutor(client=client)

        def pids():
            return list(client.run(os.getpid).values())
    with executor:
        _, problem = _distributed_problem(executor)
        killed: list[int] = []
        _kill_one_at_evaluation(problem, pids, killed)
        outcome = _multistart(problem, starts)
    assert killed, "the run ended before a worker could be killed"
    _same_outcome(outcome, reference)
    if where == "pool":
        assert executor.worker_deaths >= 1


# Runs the command line and signals its own process (SIGINT or SIGKILL, argv[1]) the moment it
# writes the third progress line of start 1 after start 0 is done: the interruption lands at the
# same point of the run on any machine (the test read those lines and signalled from outside, and
# a fast machine could finish the run before the signal came).
_SIGNAL_AT_SECOND_START = """
import os, signal, sys
HOW = getattr(signal, sys.argv[1])

class Trip:
    def __init__(self, stream):
        self.stream, self.buffer, self.done, self.after = stream, "", False, 0

    def write(self, text):
        count = self.stream.write(text)
        self.buffer += text
        while "\\n" in self.buffer:
            line, self.buffer = self.buffer.split("\\n", 1)
            if line.startswith("start   0 done"):
                self.done = True
            elif self.done and line.startswith("start   1 iter"):
                self.after += 1
                if self.after == 3:
                    self.stream.flush()
                    os.kill(os.getpid(), HOW)
        return count

    def __getattr__(self, name):
        return getattr(self.stream, name)

sys.stderr = Trip(sys.stderr)
sys.argv = ["fmi-adjoint", *sys.argv[2:]]
from fmi_adjoint.cli import main
main()
"""


@pytest.mark.parametrize("how", ["SIGKILL", "SIGINT"])
@pytest.mark.slow  # whole-process runs with signals
def test_an_interrupted_identification_resumes_to_the_uninterrupted_result(tmp_path, capsys, how):
    reference, _ = _identify(tmp_path, capsys, "reference", "--starts", 4, "--workers", 1)
    ckpt = tmp_path / "run.ckpt"
    process = subprocess.run([sys.executable, "-c", _SIGNAL_AT_SECOND_START, how, "identify", *map(str, COMMON),
                              "--starts", "4", "--workers", "1", "--checkpoint", str(ckpt)],
                             capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert "start   0 done" in process.stderr, process.stderr[-2000:]
    if how == "SIGINT":
        assert process.returncode == 130, process.stderr[-2000:]
        assert f"--resume {ckpt}" in process.stderr  # the message says how to continue
    else:
        assert process.returncode == -signal.SIGKILL, process.stderr[-2000:]
    resumed, err = _identify(tmp_path, capsys, "resumed", "--starts", 4, "--workers", 2, "--resume", ckpt)
    assert _numbers(resumed) == _numbers(reference)
    assert resumed["checkpoint"] == str(ckpt)


def test_checkpoint_misuse_is_one_clear_error(tmp_path, capsys):
    ckpt = tmp_path / "run.ckpt"
    _identify(tmp_path, capsys, "first", "--checkpoint", ckpt, "--max-iter", 2)
    code, _, err = _run(["identify", *COMMON, "--checkpoint", ckpt], capsys)
    assert code == 2 and "already exists; resume it with --resume" in err
    code, _, err = _run(["identify", *COMMON, "--starts", 3, "--resume", ckpt], capsys)
    assert code == 2 and "was written by another identification (options differ)" in err
    code, _, err = _run(["identify", *COMMON, "--checkpoint", ckpt, "--resume", ckpt], capsys)
    assert code == 2 and "either --checkpoint" in err
    code, _, err = _run(["identify", *COMMON, "--resume", tmp_path / "missing.ckpt"], capsys)
    assert code == 2 and "missing.ckpt" in err and "Traceback" not in err


@pytest.mark.parametrize("extra, message", [
    (["--starts", 0], "--starts 0: give at least 1 start"),
    (["--workers", 0], "--workers 0: give at least 1"),
    (["--starts", 3, "--bounds", "d_E=0.5:inf"], "d_E has no finite bounds; give them with --bounds"),
    (["--dask", "tcp://127.0.0.1:1"], "tcp://127.0.0.1:1"),
    (["--starts", 2, "--seed", -1], "--seed -1: give a whole number >= 0"),
    (["--starts", 100000], "--starts 100000: at most 4096 starts"),
    (["--workers", 2, "--dask", "tcp://127.0.0.1:1"], "give either --workers 2 (local processes) or --dask"),
    (["--continuation"], "--continuation fits each experiment alone first and needs two or more --data"),
])
def test_bad_parallel_options_are_one_clear_error(tmp_path, capsys, extra, message):
    code, out, err = _run(["identify", *COMMON, *extra, "-o", tmp_path / "r.json"], capsys)
    assert code == 2, err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "r.json").exists()


def test_missing_dask_names_the_extra_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    code, _, err = _run(["identify", *COMMON, "--dask", "tcp://127.0.0.1:8786"], capsys)
    assert code == 2 and "pip install 'fmi-adjoint[dask]'" in err
    monkeypatch.setenv("FMI_ADJOINT_DASK", "tcp://127.0.0.1:8786")
    code, _, err = _run(["identify", *COMMON], capsys)
    assert code == 2 and "pip install 'fmi-adjoint[dask]'" in err


def test_the_best_of_several_starts_is_flagged_when_it_sits_on_a_bound(tmp_path, capsys):
    result, err = _identify(tmp_path, capsys, "bound", "--bounds", "d_E=0.5:2", "--max-iter", 40)
    assert result["active_bounds"] == ["d_E"]
    assert any("d_E ended on a bound" in w for w in result["warnings"])
    assert "fmi-adjoint: warning: d_E ended on a bound" in err
    assert any("times the noise floor" in w for w in result["warnings"])


def test_serial_distributed_problem_equals_the_local_problem_bit_for_bit():
    local, problem = _distributed_problem(SerialExecutor())
    x = local.start * np.array([1.1, 0.9])
    for method in ("adjoint", "forward", "fd"):
        a, b = local.evaluate(x, method), problem.evaluate(x, method)
        assert a.J == b.J and a.gradient.tobytes() == b.gradient.tobytes(), method
    ra, ja = local.residuals(x)
    rb, jb = problem.residuals(x)
    assert ra.tobytes() == rb.tobytes() and ja.tobytes() == jb.tobytes()
    noise = {"a1": 0.1}
    assert local.fisher_information(x, noise).tobytes() == problem.fisher_information(x, noise).tobytes()


# -- multi-start recovers what a single start misses ----------------------------------------

ENGINE_JOINT = ["engine_mount", "--data", f"{SWEEP}@A=100", "--data", f"{SWEEP_300}@A=300",
                "--params", "c_E1,c_E2,d_E,d_H2", "--method", "least_squares"]
#: The joint fit's minimum: the demo's hand continuation reaches it (cost 0.6309, its
#: parameters within 1.1 standard errors of the true values).
STD_ERRORS = 3.0


@pytest.mark.slow
def test_continuation_recovers_the_engine_mount_joint_fit_that_a_single_start_misses(tmp_path, capsys):
    from fmi_adjoint.examples.engine_mount_data import TRUE_VALUES

    out = tmp_path / "single.json"
    code, _, err = _run(["identify", *ENGINE_JOINT, "--strategy", "single", "--workers", 1, "-o", out], capsys)
    single = json.loads(out.read_text())
    out = tmp_path / "continued.json"
    code, _, err = _run(["identify", *ENGINE_JOINT, "--continuation", "--workers", 2, "-o", out], capsys)
    assert code == 0, err
    continued = json.loads(out.read_text())
    runs = continued["multistart"]["results"]
    assert [r["first_experiment"] for r in runs] == [0, 1]  # the paper's start, each sweep alone first
    assert continued["multistart"]["best_start"] == 0  # the 100 N sweep first leads into the basin
    for name, value in continued["parameters"].items():
        assert abs(value - TRUE_VALUES[name]) <= STD_ERRORS * continued["std_errors"][name], name
    assert continued["warnings"] == [w for w in continued["warnings"] if "only 1 of 2" in w]
    # From the same start values the joint fit alone ends in a wrong minimum, flagged as such.
    assert single["cost"] > 1000 * continued["cost"]
    assert any("times the noise floor" in w for w in single["warnings"])
    assert not any("noise floor" in w for w in continued["warnings"])


def test_two_samples_identify_without_a_noise_floor(tmp_path, capsys):
    """Too few samples to estimate the noise: the fit ends normally, without the warning."""
    data = tmp_path / "two.csv"
    rows = Path(SWEEP).read_text().splitlines()[:3]  # header and two samples
    data.write_text("\n".join(rows) + "\n")
    out = tmp_path / "r.json"
    code, _, err = _run(["identify", "engine_mount", "--data", f"{data}@A=100", "--params", "c_E1", "--max-iter", 2,
                         "-o", out], capsys)
    assert code in (0, 1), err
    assert not any("noise floor" in w for w in json.loads(out.read_text())["warnings"])


@pytest.mark.slow  # a Dask cluster
def test_an_fmus_finite_difference_columns_on_dask_equal_the_local_ones(tmp_path, capsys, cluster):
    """The FMU travels as its bytes; each Dask worker opens it in its own sandboxed session."""
    local, _ = cluster
    fmu = tmp_path / "em.fmu"
    code, _, err = _run(["export", "engine_mount", "--fmi", 2, "-o", fmu], capsys)
    assert code == 0, err
    argv = ["gradient", "--fmu", fmu, "--data", f"{SWEEP}@A=100", "--params", "c_E1,d_E", "--gradient", "fd",
            "--json"]
    results = []
    for extra in (["--workers", 1], ["--workers", 2], ["--dask", local.scheduler_address]):
        code, out, err = _run([*argv, *extra], capsys)
        assert code == 0, err
        results.append(json.loads(out))
    assert results[0]["gradient_path"]["method"] == "fd"
    for other in results[1:]:
        assert other["cost"] == results[0]["cost"] and other["gradient"] == results[0]["gradient"]
    # One start per FMU problem: several are refused by name, before any worker starts.
    code, _, err = _run(["identify", "--fmu", fmu, "--data", f"{SWEEP}@A=100", "--params", "c_E1", "--starts", 2],
                        capsys)
    assert code == 2 and "--starts 2 applies to model files" in err
