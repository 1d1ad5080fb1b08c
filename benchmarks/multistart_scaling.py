"""Strong scaling of a 16-start identification over worker processes, the overhead per
task, and a paper estimate for 100 workers (issue 14), measured in one run.

The identification: the bundled triple pendulum (Oberpeilsteiner, Sec. 4.2.3) from its
measured phi1, parameters c_f and d_f, 16 starts (the start values and 15 Sobol points in
the bounds, seed 0), trust-region least squares.  It runs

  (a) serially in this process (the reference: every later run must give the same numbers
      bit for bit, which is checked);
  (b) on a local process pool of 1, 2 and 4 workers (4 only where the machine has 4 cores;
      otherwise it is printed as oversubscribed);
  (c) on a Dask LocalCluster of 2 worker processes (if distributed is installed).

Wall times exclude the start-up (worker processes started, the model built in each from
the build cache), which is printed apart: it is paid once per run, not per task.
Overhead per task: empty tasks through each executor, one at a time (latency: pickling,
queue, reply) and 400 in flight (the cost per task at the executor's throughput limit);
from the identification, the mean task time.  The 100-worker estimate for 100 starts takes
the larger of two bounds: every start is a chain of evaluations (the longest start's time
plus its task count times the latency), and the executor passes all tasks at its measured
throughput.
Run:
    .venv/bin/python benchmarks/multistart_scaling.py
"""

from __future__ import annotations

import math
import os
import time

import numpy as np

from fmi_adjoint.cli.loading import load_problem, problem_spec
from fmi_adjoint.examples import EXAMPLES_DIR
from fmi_adjoint.examples.triple_pendulum_data import START_VALUES, TRUE_VALUES
from fmi_adjoint.identify.multistart import run_starts, sobol_starts
from fmi_adjoint.identify.parallel import DistributedProblem, PartTask
from fmi_adjoint.scale import CallTask, SerialExecutor
from fmi_adjoint.scale.pool import LocalPool

STARTS = 16
NAMES = ["c_f", "d_f"]
EMPTY_TASKS = 400
PRELOAD = ("fmi_adjoint.identify.parallel",)


def problem_on(executor):
    spec = problem_spec("triple_pendulum", [str(EXAMPLES_DIR / "triple_pendulum_measured.csv")],
                        {k: v for k, v in START_VALUES.items()}, NAMES, t_end=None, step=None)
    spec, local = load_problem(spec)
    return local if executor is None else DistributedProblem(local, spec, executor)


def run(executor):
    """The multi-start; its wall time and the start-up before it (workers started, model built
    in every worker: tasks until each worker has run one)."""
    problem = problem_on(executor)
    starts = sobol_starts(problem, STARTS, seed=0)
    started = time.perf_counter()
    if executor is not None:
        executor.map([PartTask(problem.spec, problem.key, 0, problem.start, "cost")
                      for _ in range(2 * executor.workers)])
    startup = time.perf_counter() - started
    started = time.perf_counter()
    outcome = run_starts(problem, starts, "least_squares", progress=None, statistics=False)
    return outcome, time.perf_counter() - started, startup


def same(a, b) -> bool:
    return all(sa.result.parameters.tobytes() == sb.result.parameters.tobytes() and sa.result.cost == sb.result.cost
               for sa, sb in zip(a.starts, b.starts))


def overhead(executor, slots: int) -> tuple[float, float]:
    """Seconds per empty task: the latency of one task at a time (submit, run, reply), and the
    cost per task with many in flight (the executor's throughput limit)."""
    executor.map([CallTask(math.fsum, [1.0]) for _ in range(2 * slots)])  # workers started
    started = time.perf_counter()
    for _ in range(EMPTY_TASKS // 4):
        executor.submit(CallTask(math.fsum, [1.0])).result()
    latency = (time.perf_counter() - started) / (EMPTY_TASKS // 4)
    started = time.perf_counter()
    executor.map([CallTask(math.fsum, [1.0]) for _ in range(EMPTY_TASKS)])
    return latency, (time.perf_counter() - started) / EMPTY_TASKS


def main() -> None:
    cores = os.cpu_count() or 1
    serial, t_serial, _ = run(None)
    best = serial.best
    found = dict(zip(NAMES, best.parameters))
    print(f"triple pendulum, {STARTS} starts, least squares: {serial.global_minimum_starts} of {STARTS} starts reached "
          f"the best cost {best.cost:.6e}; c_f = {found['c_f']:.6g} (true {TRUE_VALUES['c_f']:g}), "
          f"d_f = {found['d_f']:.6g} (true {TRUE_VALUES['d_f']:g})")
    evaluations = sum(s.result.simulations for s in serial.starts)
    per_start = [s.result.seconds for s in serial.starts]
    print(f"serial in this process: {t_serial:.2f} s ({evaluations} simulations, "
          f"{t_serial / evaluations * 1e3:.1f} ms per task)")
    print(f"{'executor':22s} {'start-up [s]':>12s} {'wall [s]':>9s} {'speed-up':>9s} {'efficiency':>10s}  same numbers")
    rows = []
    for workers in (1, 2, 4):
        with LocalPool(workers, preload=PRELOAD) as pool:
            outcome, wall, startup = run(pool)
            rows.append((f"pool, {workers} worker{'s' if workers > 1 else ''}", startup, wall, workers,
                         same(outcome, serial)))
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        LocalCluster = None
    if LocalCluster is not None:
        from fmi_adjoint.scale.dask import DaskExecutor

        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address="127.0.0.1:0") as cluster, \
                Client(cluster) as client, DaskExecutor(client=client) as dask:
            outcome, wall, startup = run(dask)
            rows.append(("dask LocalCluster, 2", startup, wall, 2, same(outcome, serial)))
            dask_latency, dask_cost = overhead(dask, 2)
    for label, startup, wall, workers, equal in rows:
        note = "  (oversubscribed: {cores} cores)".format(cores=cores) if workers > cores else ""
        print(f"{label:22s} {startup:12.2f} {wall:9.2f} {t_serial / wall:9.2f} {t_serial / wall / workers:10.2f}  "
              f"{'yes' if equal else 'NO'}{note}")
    with SerialExecutor() as inline:
        serial_latency, _ = overhead(inline, 1)
    with LocalPool(2) as pool:
        pool_latency, pool_cost = overhead(pool, 2)
    print(f"overhead per empty task: serial {serial_latency * 1e6:.1f} us; pool (2 workers) {pool_latency * 1e3:.3f} "
          f"ms one at a time, {pool_cost * 1e3:.3f} ms each with many in flight" +
          (f"; dask LocalCluster (2 workers) {dask_latency * 1e3:.3f} ms one at a time, {dask_cost * 1e3:.3f} ms each "
           "with many in flight" if LocalCluster is not None else ""))
    # Paper estimate for 100 starts on 100 workers: a start is a chain of tasks, so the run
    # lasts at least the longest start plus its tasks' latency; and the executor passes at
    # most one task per "cost with many in flight", which bounds it from below too.
    task = t_serial / evaluations
    longest = max(per_start)
    chain = max(s.result.simulations for s in serial.starts)
    latency, cost = (dask_latency, dask_cost) if LocalCluster is not None else (pool_latency, pool_cost)
    total = 100 / STARTS * evaluations
    by_chain = longest + chain * latency
    by_throughput = total * cost
    estimate = max(by_chain, by_throughput)
    serial_100 = 100 / STARTS * t_serial
    limit = "the longest start" if by_chain >= by_throughput else "the executor's throughput"
    print(f"estimate for 100 starts on 100 workers: {estimate:.2f} s against {serial_100:.1f} s serial (speed-up "
          f"{serial_100 / estimate:.1f}); limited by {limit}: longest start {longest:.2f} s of {chain} tasks of "
          f"{task * 1e3:.1f} ms + "
          f"{latency * 1e3:.2f} ms latency each = {by_chain:.2f} s; {total:.0f} tasks x {cost * 1e3:.2f} ms = "
          f"{by_throughput:.2f} s")
    assert all(equal for *_, equal in rows), "an executor changed the numbers"
    assert np.isfinite(estimate)


if __name__ == "__main__":
    main()
