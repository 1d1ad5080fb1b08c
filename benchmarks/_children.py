"""Shared helper of the build benchmarks (``mbs_chains.py``, ``large_models.py``): each phase of
a measurement (cold build, warm build, runs) in a fresh interpreter with a private build
cache, a copy of the package and a time limit, and the timers and fits they report with."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

#: Prefix of the one line a child prints with its JSON result.
RESULT = "RESULT "


def cpu_seconds() -> float:
    """CPU time of this process and of the children it waited for (the C compilers)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def best_of(repeats: int, func) -> tuple[float, float, object]:
    """``(shortest wall time, CPU time of that call, value of the last call)`` of ``repeats`` calls."""
    best, value = (float("inf"), float("inf")), None
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        value = func()
        best = min(best, (time.perf_counter() - wall, time.process_time() - cpu))
    return best[0], best[1], value


def step_and_adjoint(engine, steps: int, newton: str | None = None) -> dict:
    """CPU seconds per step of a forward run of ``steps`` steps at the model's step (best of two),
    the adjoint gradient's wall time over the forward run's (a least-squares cost on every
    output), and the mean Newton iterations per step; ``newton``: the Newton variant
    (``--newton``; None: the model's)."""
    from fmi_adjoint.costs import LeastSquaresCost
    from fmi_adjoint.integrate.schemes import scheme_from_settings

    compiled = engine.compiled
    step = compiled.model.simulation.step
    solver = scheme_from_settings(compiled.model.simulation, newton=newton)
    p = compiled.parameter_vector()
    t_fwd, cpu_fwd, traj = best_of(2, lambda: engine.simulate(p, t_end=steps * step, step=step, solver=solver))
    y = np.asarray(traj.outputs())
    cost = LeastSquaresCost(np.asarray(traj.t), np.zeros_like(y), tuple(compiled.output_names))
    t_adj, _, _ = best_of(1, lambda: engine.adjoint_gradient(traj, cost))
    return {"cpu_step": cpu_fwd / traj.n_steps, "adjoint_ratio": t_adj / t_fwd,
            "newton": float(np.mean(traj.newton_iterations))}


def compile_solver(spec: dict) -> float:
    """Compile the sparse solver into the size's empty cache (once per machine and compiler,
    whatever the model: timed apart from a model's cold build); its CPU seconds."""
    from fmi_adjoint.native.solver import sparse_solver

    cpu = cpu_seconds()
    sparse_solver(build_cache(spec))
    return cpu_seconds() - cpu


def build_cache(spec: dict):
    """The private build cache of a measured size (``spec["cache"]``)."""
    from fmi_adjoint.cache import BuildCache

    return BuildCache(Path(spec["cache"]))


def exponent(xs: list[float], values: list[float]) -> float:
    """Slope of log(value) over log(x), least squares."""
    return float(np.polyfit(np.log(xs), np.log(values), 1)[0])


def snapshot_sources(folder: Path) -> str:
    """Copy the fmi_adjoint package into ``folder`` and return the folder for ``PYTHONPATH``.

    The build-cache keys hash fmi-adjoint's own sources (:func:`fmi_adjoint.cache.source_fingerprint`),
    so an edit of them during a run (a working tree being edited) would turn a warm build into
    a cold one; the children import this copy instead, the code as it was at the start."""
    import shutil

    import fmi_adjoint

    package = Path(fmi_adjoint.__file__).resolve().parent
    shutil.copytree(package, folder / "fmi_adjoint", ignore=shutil.ignore_patterns("__pycache__"))
    return str(folder)


def run_child(script: str | Path, spec: dict, timeout: float, *, report_on_sigterm: bool = False) -> dict:
    """Run ``script --child SPEC`` (one phase) in a fresh interpreter with a time limit; its
    JSON result, or ``{"error": ...}`` / ``{"timeout": seconds}``.

    The child runs in its own process group, so that the compiler processes it started end
    with it when the time is up.  ``report_on_sigterm``: the child (a profiler) prints what it
    has on SIGTERM, which is asked for before it is killed."""
    env = dict(os.environ, FMI_ADJOINT_CACHE=spec["cache"])
    if spec.get("sources"):
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (spec["sources"], os.environ.get("PYTHONPATH"))))
    script = Path(script).resolve()
    proc = subprocess.Popen([sys.executable, str(script), "--child", json.dumps(spec)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=script.parent, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=max(timeout, 1.0))
    except subprocess.TimeoutExpired:
        stdout = ""
        if report_on_sigterm:
            proc.send_signal(signal.SIGTERM)
            try:
                stdout, _ = proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                pass
        if proc.poll() is None or report_on_sigterm:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the child's own group: this script started it
            except ProcessLookupError:
                pass
            proc.communicate()
        results = [line for line in stdout.splitlines() if line.startswith(RESULT)]
        return json.loads(results[-1][len(RESULT):]) if results else {"timeout": timeout}
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT):
            return json.loads(line[len(RESULT):])
    lines = [line for line in stderr.splitlines() if line.strip()]
    return {"error": lines[-1] if lines else f"exit code {proc.returncode}"}


def run_phases(script: str | Path, spec: dict, budget: float,
               phases: tuple[str, ...] = ("build", "build", "measure")) -> list[dict] | str:
    """Each of ``phases`` of ``spec`` in a fresh child (:func:`run_child`) within ``budget``
    seconds in all: their results, or the first error or time-out as one line."""
    deadline = time.monotonic() + budget
    results = []
    for phase in phases:
        left = deadline - time.monotonic()
        result = run_child(script, spec | {"phase": phase}, left) if left > 0 else {"timeout": budget}
        if "timeout" in result or "error" in result:
            return result.get("error") or f"not done within the budget ({budget:g} s)"
        results.append(result)
    return results


def child_main(spec_text: str, phases: dict) -> int:
    """A child's whole job: run phase ``spec["phase"]`` of ``phases`` and print its JSON result
    (the library's own errors as one line)."""
    from fmi_adjoint.errors import FmiAdjointError

    spec = json.loads(spec_text)
    try:
        result = phases[spec["phase"]](spec)
    except FmiAdjointError as exc:
        result = {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())}"}
    print(RESULT + json.dumps(result), flush=True)
    return 0
