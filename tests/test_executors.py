"""Executors (issue 14): one contract for serial, local-pool and Dask runs.

Every executor returns the results of the same deterministic tasks in submission order and
bit for bit equal; a task's exception comes back with its own type; a worker killed in the
middle of a task does not change any result; a task that kills every worker it runs on fails
with :class:`ExecutorError`; closing leaves no process behind.  The tasks are ``CallTask`` s of
library functions (math, numpy, os, time), so worker processes can unpickle them without
importing this file.  Clusters are shared per module; no test asserts a duration (timeouts
only stop a hanging test).
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import Future, InvalidStateError
from pathlib import Path

import numpy as np
import pytest

from fmi_adjoint.errors import ExecutorError
from fmi_adjoint.scale import AbstractExecutor, CallTask, DaskExecutor, LocalPool, SerialExecutor, WorkerContext


GUARD = 60.0  # [s] longest wait for a process or a file: only stops a hanging test, never asserted

_A = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.25], [0.5, 0.25, 2.0]])
_B = np.array([1.0, -2.0, 0.5])

#: Deterministic tasks whose results all differ, so that any reordering shows.
TASKS = ([CallTask(math.fsum, [0.1 * i] * (i + 1)) for i in range(10)]
         + [CallTask(math.factorial, 25), CallTask(np.linalg.solve, _A, _B),
            CallTask(np.cumsum, np.linspace(0.0, 1.0, 7)), CallTask(sorted, [3, 1, 2]), CallTask(pow, 2.0, 0.5)])


def _reference() -> list:
    return [task.function(*task.args) for task in TASKS]


def _assert_same(results: list, expected: list) -> None:
    """Bit-for-bit equality, element by element, with equal types."""
    assert len(results) == len(expected)
    for got, want in zip(results, expected):
        assert type(got) is type(want)
        np.testing.assert_array_equal(got, want)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _sleep_then_pid(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


#: A process that says it has started (a new file in STARTED) and then waits until RELEASE
#: exists (or GUARD passes: exit code 3).  Its standard streams go to /dev/null first, so that
#: an orphan never holds a test's pipes open.
_HOLD = textwrap.dedent("""
    import os, sys, tempfile, time
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    started, release, guard = sys.argv[1], sys.argv[2], float(sys.argv[3])
    tempfile.mkstemp(dir=started)
    deadline = time.monotonic() + guard
    while not os.path.exists(release):
        if time.monotonic() > deadline:
            sys.exit(3)
        time.sleep(0.02)
""")


class Gate:
    """Tasks that block until the test opens the gate, and tell when they have begun: a test
    waits for :meth:`wait_started` (an event), not for a time, before it kills a busy worker.
    Each task is ``subprocess.check_call`` of :data:`_HOLD` (a library function, so that Dask
    workers can unpickle it) and returns 0."""

    def __init__(self, folder: Path):
        self.started = folder / "started"
        self.started.mkdir(parents=True)
        self.release = folder / "release"

    def args(self) -> list[str]:
        return [sys.executable, "-c", _HOLD, str(self.started), str(self.release), str(GUARD)]

    def task(self) -> CallTask:
        return CallTask(subprocess.check_call, self.args())

    def count(self) -> int:
        return len(list(self.started.iterdir()))

    def wait_started(self, n: int) -> None:
        _wait_until(lambda: self.count() >= n, f"{n} held tasks to begin")

    def open(self) -> None:
        self.release.touch()


def _wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + GUARD
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


# -- fixtures: one pool, one local Dask cluster, one Dask cluster of separate processes ------------
@pytest.fixture(scope="module")
def pool():
    with LocalPool(2) as pool:
        yield pool


@pytest.fixture(scope="module")
def local_dask():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                    dashboard_address="127.0.0.1:0") as cluster:  # any free port: no warning
        with distributed.Client(cluster, set_as_default=False) as client:
            with DaskExecutor(client=client) as executor:
                yield executor


@pytest.fixture(scope="module")
def dask_processes(tmp_path_factory):
    """A scheduler and two workers (each with its nanny) started like on a cluster, and a
    :class:`DaskExecutor` connected through the scheduler file; every process ends with the module."""
    distributed = pytest.importorskip("distributed")
    folder = tmp_path_factory.mktemp("dask")
    scheduler_file = folder / "scheduler.json"
    log = (folder / "cluster.log").open("wb")
    processes = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                   "--port", "0", "--no-dashboard", "--scheduler-file", str(scheduler_file)],
                                  stdout=log, stderr=subprocess.STDOUT)]
    executor = None
    try:
        _wait_until(lambda: scheduler_file.exists() and scheduler_file.stat().st_size > 0, "the scheduler file")
        processes += [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file",
                                        str(scheduler_file), "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1",
                                        "--local-directory", str(folder), "--death-timeout", "60"],
                                       stdout=log, stderr=subprocess.STDOUT) for _ in range(2)]
        address = json.loads(scheduler_file.read_text())["address"]
        with distributed.Client(address, set_as_default=False, timeout=GUARD) as client:
            client.wait_for_workers(2, timeout=GUARD)
        executor = DaskExecutor(address, timeout=GUARD)
        yield executor
    finally:
        if executor is not None:
            executor.close()
        for process in reversed(processes):  # workers first, so that they leave the scheduler in order
            process.terminate()
        for process in processes:
            try:
                process.wait(GUARD)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()


@pytest.fixture(params=["serial", "pool", "dask"])
def executor(request) -> AbstractExecutor:
    if request.param == "serial":
        return SerialExecutor()
    return request.getfixturevalue({"pool": "pool", "dask": "local_dask"}[request.param])


# -- the contract, for every executor --------------------------------------------------------
def test_results_are_equal_and_in_submission_order(executor):
    _assert_same(executor.map(TASKS), _reference())
    futures = [executor.submit(task) for task in reversed(TASKS)]
    _assert_same([future.result(GUARD) for future in futures], _reference()[::-1])


def test_a_task_exception_comes_back_with_its_type(executor):
    futures = [executor.submit(CallTask(math.sqrt, 4.0)), executor.submit(CallTask(math.sqrt, -1.0)),
               executor.submit(CallTask(math.sqrt, 9.0))]
    with pytest.raises(ValueError, match="math domain error"):
        futures[1].result(GUARD)
    assert [futures[0].result(GUARD), futures[2].result(GUARD)] == [2.0, 3.0]
    with pytest.raises(ValueError, match="math domain error"):  # map raises it after every task ended
        executor.map([CallTask(math.sqrt, -1.0), CallTask(math.sqrt, 16.0)])
    assert executor.map([CallTask(math.sqrt, 25.0)]) == [5.0]


def test_describe_is_json_ready(executor):
    described = executor.describe()
    assert json.loads(json.dumps(described)) == described
    assert described["executor"] == executor.name
    assert described["workers"] == executor.workers


@pytest.mark.parametrize("name", ["pool", "local_dask"])
def test_tasks_run_in_worker_processes(request, name):
    executor = request.getfixturevalue(name)
    pids = executor.map([CallTask(os.getpid) for _ in range(2)])
    assert os.getpid() not in pids
    if name == "pool":
        assert executor.workers == 2
        assert sorted(pids) == sorted(executor.worker_pids())  # one task each: both workers ran
    else:
        assert set(pids) <= set(executor.client.run(os.getpid).values())


def test_map_stops_at_ctrl_c_and_cancels_the_rest():
    """Ctrl-C while map() waits is raised at once; what has not started is cancelled."""
    pending: Future = Future()

    def late_result() -> None:
        try:
            pending.set_result(1)
        except InvalidStateError:
            pass

    class Interrupted(AbstractExecutor):
        workers = 1

        def __init__(self) -> None:
            self.futures = iter([KeyboardInterrupt(), pending])

        def submit(self, task):
            value = next(self.futures)
            if isinstance(value, Future):
                return value
            future: Future = Future()
            future.set_exception(value)
            return future

        def close(self) -> None:
            pass

    timer = threading.Timer(GUARD, late_result)  # only ends the wait of a map() that ignores Ctrl-C
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            Interrupted().map([CallTask(os.getpid), CallTask(os.getpid)])
        assert pending.cancelled()
    finally:
        timer.cancel()


# -- WorkerContext ---------------------------------------------------------------------------
def test_worker_context_builds_once_per_key_under_concurrent_use():
    context = WorkerContext(limit=2)
    built: list[str] = []
    inside = threading.Semaphore(0)

    def build(key: str):
        def make():
            built.append(key)
            time.sleep(0.05)  # widen the window in which a second thread could build too
            return {"key": key, "users": 0}
        return make

    def use(key: str) -> None:
        with context.resident(key, build(key)) as obj:
            obj["users"] += 1
            inside.release()

    threads = [threading.Thread(target=use, args=("a",)) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(GUARD)
    assert built == ["a"] and context.builds == 1
    with context.resident("a", build("a")) as obj:
        assert obj["users"] == 6
    for key in ("b", "c"):  # limit 2: "a" is the least recently used and goes
        with context.resident(key, build(key)):
            pass
    with context.resident("a", build("a")) as obj:
        assert obj["users"] == 0
    assert built == ["a", "b", "c", "a"] and context.builds == 4


# -- the local pool ----------------------------------------------------------------------------
def test_pool_submit_is_thread_safe(pool):
    outcomes: dict[int, list] = {}

    def client(k: int) -> None:
        futures = [pool.submit(CallTask(math.fsum, [k, 0.5 * i])) for i in range(25)]
        outcomes[k] = [future.result(GUARD) for future in futures]

    threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(GUARD)
    assert outcomes == {k: [math.fsum([k, 0.5 * i]) for i in range(25)] for k in range(4)}


def test_pool_reruns_the_task_of_a_killed_worker(pool, tmp_path):
    pool.map([CallTask(os.getpid) for _ in range(2)])  # both workers up and idle
    deaths = pool.worker_deaths
    victim = pool.worker_pids()[0]
    gate = Gate(tmp_path)
    futures = [pool.submit(task) for task in [gate.task(), gate.task()] + TASKS]
    try:
        gate.wait_started(2)  # both workers are in their held task
        os.kill(victim, signal.SIGKILL)
    finally:
        gate.open()
    _assert_same([future.result(GUARD) for future in futures], [0, 0] + _reference())
    assert gate.count() == 3  # the killed worker's task ran again
    assert pool.worker_deaths == deaths + 1
    assert victim not in pool.worker_pids()
    _wait_until(lambda: not _alive(victim), "the killed worker to be reaped")


def test_pool_fails_a_task_that_kills_every_worker(pool):
    deaths = pool.worker_deaths
    others = [pool.submit(CallTask(math.factorial, n)) for n in range(5)]
    with pytest.raises(ExecutorError, match=re.escape("ended its worker process 4 times (last: exit code 3)")) as info:
        pool.submit(CallTask(os._exit, 3)).result(GUARD)
    assert "CallTask('_exit', 1 args)" in str(info.value) and "(--workers 1)" in str(info.value)
    assert pool.worker_deaths == deaths + 1 + pool.max_retries
    assert [future.result(GUARD) for future in others] == [math.factorial(n) for n in range(5)]
    assert pool.map([CallTask(math.sqrt, 49.0)]) == [7.0]  # the pool keeps working


def test_pool_reports_what_cannot_cross_the_process_boundary(pool):
    with pytest.raises(ExecutorError, match="cannot be sent to a worker process"):
        pool.submit(CallTask(lambda: 1)).result(GUARD)
    with pytest.raises(ExecutorError, match="the result of CallTask.* cannot be pickled"):
        pool.submit(CallTask(threading.Lock)).result(GUARD)
    with pytest.raises(ExecutorError, match="raised SystemExit.*never exit the process"):
        pool.submit(CallTask(sys.exit, 3)).result(GUARD)
    assert pool.map([CallTask(math.sqrt, 64.0)]) == [8.0]


def test_an_exception_that_cannot_travel_arrives_as_executor_error():
    import pickle

    from fmi_adjoint.scale.pool import _error_reply

    error = ArithmeticError("x = -1.0")
    error.guard = threading.Lock()  # an attribute that cannot be pickled
    status, sent, text = pickle.loads(_error_reply(CallTask(math.sqrt, -1.0), error))
    assert status == "error" and isinstance(sent, ExecutorError)
    assert "CallTask('sqrt', 1 args) raised ArithmeticError: x = -1.0 (the exception cannot be pickled" in str(sent)
    assert "ArithmeticError: x = -1.0" in text


def test_pool_workers_ignore_ctrl_c(pool):
    # Both workers must be serving (a worker ignores SIGINT from the first line of its main
    # function, not while it starts): tasks that take long enough to occupy both, until each
    # worker has answered one.
    _wait_until(lambda: len(set(pool.map([CallTask(_sleep_then_pid, 0.05) for _ in range(2)]))) == 2,
                "both workers serving")
    pids = sorted(pool.worker_pids())
    assert len(pids) == 2
    deaths = pool.worker_deaths
    for pid in pids:
        os.kill(pid, signal.SIGINT)
    # Tasks that keep both workers busy: a worker that died of the signal would be replaced.
    assert pool.map([CallTask(time.sleep, 0.05) for _ in range(6)]) == [None] * 6
    assert set(pool.map([CallTask(os.getpid) for _ in range(4)])) <= set(pids)
    assert sorted(pool.worker_pids()) == pids and all(_alive(pid) for pid in pids)
    assert pool.worker_deaths == deaths


def test_pool_close_cancels_queued_tasks_and_reaps_every_worker():
    with LocalPool(2, max_retries=0) as pool:
        running = [pool.submit(CallTask(time.sleep, 30.0)) for _ in range(2)]
        queued = [pool.submit(CallTask(math.sqrt, 2.0)) for _ in range(3)]
        _wait_until(lambda: all(future.running() for future in running) and len(pool.worker_pids()) == 2,
                    "two busy workers")
        pids = pool.worker_pids()
    assert all(future.cancelled() for future in queued)
    for future in running:
        with pytest.raises(ExecutorError, match="closed before"):
            future.result(GUARD)
    assert not any(_alive(pid) for pid in pids)
    assert pool.worker_pids() == []
    pool.close()  # idempotent
    with pytest.raises(ExecutorError, match="closed"):
        pool.submit(CallTask(os.getpid))


def test_pool_that_cannot_start_workers_fails_its_futures_and_stays_stopped():
    with LocalPool(1) as pool:
        pool.start_method = "no-such-method"  # the dispatcher cannot make a worker
        with pytest.raises(ExecutorError, match=r"the LocalPool stopped \(ValueError: .*no-such-method"):
            pool.submit(CallTask(os.getpid)).result(GUARD)
        with pytest.raises(ExecutorError, match=r"this LocalPool stopped .*open a new pool"):
            pool.submit(CallTask(os.getpid))


def test_pool_rejects_bad_sizes():
    with pytest.raises(ExecutorError, match="workers=0"):
        LocalPool(0)
    with pytest.raises(ExecutorError, match="max_retries=-1"):
        LocalPool(2, max_retries=-1)
    assert LocalPool().workers == (os.cpu_count() or 1)  # no process starts before a submit


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")
def test_pool_workers_die_with_their_parent(tmp_path):
    """A parent killed by SIGKILL (no cleanup at all) takes its busy workers with it."""
    gate = Gate(tmp_path)
    script = textwrap.dedent("""
        import json, os, signal, subprocess, sys, time
        from fmi_adjoint.scale import CallTask, LocalPool

        if __name__ == "__main__":
            hold, started, guard = json.loads(sys.argv[1]), sys.argv[2], float(sys.argv[3])
            pool = LocalPool(2)
            print(*pool.map([CallTask(os.getpid) for _ in range(2)]), flush=True)
            busy = [pool.submit(CallTask(subprocess.check_call, hold)) for _ in range(2)]
            deadline = time.monotonic() + guard
            while len(os.listdir(started)) < 2:
                if time.monotonic() > deadline:
                    sys.exit("the held tasks did not begin")
                time.sleep(0.01)
            # Both workers are inside their task: end-of-file on the pipe would not stop them.
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    try:
        run = subprocess.run([sys.executable, "-c", script, json.dumps(gate.args()), str(gate.started), str(GUARD)],
                             capture_output=True, text=True, timeout=GUARD)
        assert run.returncode == -signal.SIGKILL, run.stderr
        assert gate.count() == 2
        pids = [int(word) for word in run.stdout.split()]
        assert len(set(pids)) == 2
        try:
            _wait_until(lambda: not any(_alive(pid) for pid in pids), "the orphaned workers to end")
        finally:  # a failed test leaves no busy orphans behind
            for pid in filter(_alive, pids):
                os.kill(pid, signal.SIGKILL)
    finally:
        gate.open()


def test_pool_ctrl_c_in_the_parent_ends_busy_workers(tmp_path):
    """Ctrl-C while map() waits: KeyboardInterrupt in the parent, busy workers end with it
    (the pool was never closed explicitly), nothing else is printed."""
    gate = Gate(tmp_path)
    script = textwrap.dedent("""
        import json, os, signal, subprocess, sys
        from fmi_adjoint.scale import CallTask, LocalPool

        if __name__ == "__main__":
            signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started in the background
            pool = LocalPool(2)
            print(*pool.map([CallTask(os.getpid) for _ in range(2)]), flush=True)
            pool.map([CallTask(subprocess.check_call, json.loads(sys.argv[1])) for _ in range(4)])
    """)
    process = subprocess.Popen([sys.executable, "-X", "dev", "-c", script, json.dumps(gate.args())],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    pids = [int(word) for word in process.stdout.readline().split()]
    try:
        gate.wait_started(2)  # both workers are busy: map() is waiting for them
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=GUARD)
        assert process.returncode == -signal.SIGINT
        assert err.rstrip().endswith("KeyboardInterrupt") and "Warning" not in err and "Exception in thread" not in err
        assert len(set(pids)) == 2
        _wait_until(lambda: not any(_alive(pid) for pid in pids), "the workers to end")
    finally:
        gate.open()
        process.kill()
        process.communicate()
        for pid in filter(_alive, pids):
            os.kill(pid, signal.SIGKILL)


def test_pool_falls_back_to_spawn():
    with LocalPool(1) as pool:
        pool.start_method = "spawn"  # what a platform without forkserver gets
        _assert_same(pool.map(TASKS[:3]), _reference()[:3])
        assert pool.describe()["start_method"] == "spawn"


# -- Dask ----------------------------------------------------------------------------------------
def test_dask_workers_keep_one_context_each(local_dask):
    from fmi_adjoint.scale.dask import PLUGIN_NAME

    client = local_dask.client

    def contexts() -> dict:
        return client.run(lambda dask_worker: id(dask_worker.plugins[PLUGIN_NAME].context))

    before = contexts()
    assert len(set(before.values())) == 2
    with DaskExecutor(client=client) as second:  # registers the plugin again: the contexts stay
        assert second.map([CallTask(math.sqrt, 36.0)]) == [6.0]
    assert contexts() == before
    assert client.submit(math.sqrt, 81.0).result(GUARD) == 9.0  # the client given is not closed
    with pytest.raises(ExecutorError, match="closed"):
        second.submit(CallTask(os.getpid))


def test_dask_on_separate_scheduler_and_worker_processes(dask_processes):
    assert dask_processes.workers == 2
    assert dask_processes.describe()["scheduler"].startswith("tcp://127.0.0.1:")
    _assert_same(dask_processes.map(TASKS), _reference())
    with pytest.raises(ZeroDivisionError):
        dask_processes.submit(CallTask(divmod, 1, 0)).result(GUARD)


def test_dask_reruns_the_task_of_a_killed_worker(dask_processes, tmp_path):
    client = dask_processes.client
    victim = next(iter(client.run(os.getpid).values()))
    gate = Gate(tmp_path)
    futures = [dask_processes.submit(task) for task in [gate.task(), gate.task()] + TASKS]
    try:
        gate.wait_started(2)  # one held task on each (single-threaded) worker
        os.kill(victim, signal.SIGKILL)
    finally:
        gate.open()
    _assert_same([future.result(GUARD) for future in futures], [0, 0] + _reference())
    assert gate.count() == 3  # the killed worker's task ran again
    _wait_until(lambda: not _alive(victim), "the killed worker to be reaped")
    # The nanny's new worker has joined (a cluster closed while a nanny restarts its worker
    # fails to stop it, and the module's teardown would wait for the guard).
    _wait_until(lambda: len(set(client.run(os.getpid).values()) - {victim}) == 2, "the replacement worker")


def test_dask_fails_a_task_that_kills_every_worker(local_dask):
    """Dask's KilledWorker (after allowed-failures deaths) becomes an ExecutorError with the fix."""
    with pytest.raises(ExecutorError, match=r"CallTask\('_exit', 1 args\) ended every Dask worker.*--workers 1"):
        local_dask.submit(CallTask(os._exit, 3)).result(GUARD)
    assert local_dask.map([CallTask(math.sqrt, 100.0)]) == [10.0]  # the nannies restarted the workers


def test_dask_missing_is_one_error_with_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # "import distributed" fails
    with pytest.raises(ExecutorError) as info:
        DaskExecutor("tcp://127.0.0.1:8786")
    assert str(info.value) == ("--dask needs the optional dependency Dask distributed; install it with: "
                               "pip install 'fmi-adjoint[dask]'")


def test_dask_unreachable_scheduler_is_one_error_with_the_fix():
    pytest.importorskip("distributed")
    with pytest.raises(ExecutorError, match=r"tcp://127\.0\.0\.1:1.*drop --dask to run locally"):
        DaskExecutor("tcp://127.0.0.1:1", timeout=1.0)
