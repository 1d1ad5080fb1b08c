"""Wall times of whole commands as a user runs them (issue 11), measured here.

Each command runs as a fresh process (``fmi-adjoint ...``) with ``FMI_ADJOINT_CACHE`` set to
a private temporary folder:

* ``simulate engine_tvd --t-end 0.01`` with an empty cache (cold: the model is derived and
  compiled) and again in a new process (warm: the build cache serves it);
* ``demo`` (warm), whose printed identification time is reported too;
* the engine_tvd order identification of docs/how-to/choose-a-cost.md (warm).

Run: ``python benchmarks/cli_times.py [--skip-identification]``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-identification", action="store_true", help="only the simulate timings")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "FMI_ADJOINT_CACHE": str(Path(folder) / "cache")}
        work = Path(folder)
        simulate = ["simulate", "engine_tvd", "--t-end", "0.01", "-o", str(work / "tvd.csv")]
        cold, _ = timed(simulate, env, work)
        warm, _ = timed(simulate, env, work)
        print(f"simulate engine_tvd --t-end 0.01: cold {cold:6.2f} s, warm (new process) {warm:6.2f} s "
              f"[target: warm < 3 s]")
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
