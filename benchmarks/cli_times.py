"""Wall times of whole commands as a user runs them (issue 11), measured here.

Each command runs as a fresh process (``fmi-adjoint ...``) with ``FMI_ADJOINT_CACHE`` set to
a private temporary folder:

* ``simulate engine_tvd --t-end 0.01`` with an empty cache (cold: the model is derived and
  compiled) and again in a new process (warm: the build cache serves it);
* ``demo`` (warm), whose printed identification time is reported too;
* the engine_tvd order identification of docs/how-to/choose-a-cost.md (warm);
* the warm start of the 1 000-coordinate models of issue 24 (``family_toml("lattice", 1000)``
  and ``family_toml("random_tree", 1000)``, part 6): ``simulate MODEL.toml --t-end`` three
  steps after a cold build has filled the cache, the best of 3 fresh processes; its wall and
  CPU seconds, and the share of the imports (a fourth process under ``python -X importtime``:
  the top-level imports' cumulative time over that process's wall time).  Target: <= 1 s wall.

Run: ``python benchmarks/cli_times.py [--skip-identification] [--only-warm-start]``.  The
machine may be shared: wall times include waiting for a core, the CPU seconds do not.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = Path(sys.executable).with_name("fmi-adjoint")
ORDER_FIT = ["identify", "engine_tvd", "--cost", "orders", "--order", "6", "--runup", "2250:3500:0.1:0.6",
             "--channel", "twist", "--data", str(ROOT / "fmi_adjoint/examples/engine_tvd_orders.csv"),
             "--params", "c1_star,c2_star,d1_star,d2_star", "--set", "n0=2250", "--set", "t1=0.6", "--t-end", "0.6",
             "--scaling", "log"]


def timed(args: list[str], env: dict, cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run([str(CLI), *args], capture_output=True, text=True, env=env, cwd=cwd)
    seconds = time.perf_counter() - start
    if proc.returncode not in (0, 1):  # 1: optimizer did not report convergence
        raise SystemExit(f"fmi-adjoint {' '.join(args)} failed: {proc.stderr.strip()[-400:]}")
    return seconds, proc.stdout + proc.stderr


#: Warm command-line start of a 1 000-coordinate model (issue 24, part 6), wall seconds.
WARM_START_TARGET = 1.0
#: Fresh processes timed per model (the best is reported).
WARM_START_REPEATS = 3


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run_checked(command: list[str], env: dict, cwd: Path) -> tuple[float, float, str]:
    """Wall and CPU seconds of ``command`` (a fresh process) and its stderr."""
    cpu, start = _child_cpu(), time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd)
    wall, cpu = time.perf_counter() - start, _child_cpu() - cpu
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {proc.stderr.strip()[-400:]}")
    return wall, cpu, proc.stderr


def _import_share(line: list[str], env: dict, cwd: Path) -> tuple[float, float]:
    """Seconds of the imports (top-level entries of ``-X importtime``) and the wall seconds
    of that process (``python -X importtime -m fmi_adjoint ...``)."""
    wall, _, err = _run_checked([sys.executable, "-X", "importtime", "-m", "fmi_adjoint", *line], env, cwd)
    imports = sum(int(found.group(1)) for found in re.finditer(r"^import time:\s+\d+ \|\s+(\d+) \| \S", err, re.M))
    return imports * 1e-6, wall


def warm_starts(env: dict, work: Path) -> None:
    """The warm command-line start of the 1 000-coordinate lattice and random tree."""
    from fmi_adjoint.examples.families import family_toml

    for family in ("lattice", "random_tree"):
        text = family_toml(family, 1000)
        path = work / f"{family}_1000.toml"
        path.write_text(text)
        doc = tomllib.loads(text)
        size = re.search(r"\((\d+) coordinates", text)  # the generator's header line
        coordinates = size.group(1) if size else "?"
        t_end = 3 * float(doc["simulation"]["step"])
        line = ["simulate", str(path), "--t-end", repr(t_end), "-o", str(work / f"{family}.csv")]
        cold, _, _ = _run_checked([str(CLI), *line], env, work)
        runs = [_run_checked([str(CLI), *line], env, work)[:2] for _ in range(WARM_START_REPEATS)]
        wall, cpu = min(w for w, _ in runs), min(c for _, c in runs)
        imports, traced = _import_share(line, env, work)
        verdict = "met" if wall <= WARM_START_TARGET else "NOT met"
        print(f"warm CLI start, {family} ({coordinates} coordinates; simulate --t-end {t_end:g}, 3 steps): "
              f"{wall:5.2f} s wall, {cpu:5.2f} s CPU (best of {WARM_START_REPEATS} fresh processes; cold build "
              f"{cold:5.1f} s); imports {imports:4.2f} s of {traced:4.2f} s wall under -X importtime "
              f"({100 * imports / traced:3.0f} %) [target: <= {WARM_START_TARGET:g} s wall: {verdict}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-identification", action="store_true", help="only the simulate timings")
    parser.add_argument("--only-warm-start", action="store_true",
                        help="only the warm start of the 1 000-coordinate models (issue 24, part 6)")
    args = parser.parse_args()
    if args.only_warm_start:
        with tempfile.TemporaryDirectory() as folder:
            warm_starts({**os.environ, "FMI_ADJOINT_CACHE": str(Path(folder) / "cache")}, Path(folder))
        return
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "FMI_ADJOINT_CACHE": str(Path(folder) / "cache")}
        work = Path(folder)
        simulate = ["simulate", "engine_tvd", "--t-end", "0.01", "-o", str(work / "tvd.csv")]
        cold, _ = timed(simulate, env, work)
        warm, _ = timed(simulate, env, work)
        print(f"simulate engine_tvd --t-end 0.01: cold {cold:6.2f} s, warm (new process) {warm:6.2f} s "
              f"[target: warm < 3 s]")
        warm_starts(env, work)
        if args.skip_identification:
            return
        timed(["simulate", "engine_mount", "--t-end", "0.001", "-o", str(work / "em.csv")], env, work)  # warm up
        seconds, out = timed(["demo", "-o", str(work / "demo")], env, work)
        found = re.search(r"simulations, ([0-9.]+) s", out)
        inner = f"{float(found.group(1)):.1f} s of identification" if found else "identification time not printed"
        print(f"demo (warm cache): {seconds:6.1f} s wall, {inner} [target: identification <= 10 s]")
        timed(["simulate", "engine_tvd", "--t-end", "0.001", "-o", str(work / "w.csv")], env, work)  # warm up
        seconds, _ = timed([*ORDER_FIT, "-o", str(work / "tvd.json")], env, work)
        print(f"engine_tvd order identification (docs: choose a cost): {seconds:6.1f} s wall [target: <= 60 s]")


if __name__ == "__main__":
    main()
