"""Steps per second of an exported FMU against the in-process engines, measured in one run.

For every bundled example (engine_mount first; engine_tvd too when it exists), over the
model's simulation horizon rounded to whole steps:

  (a) the exported Co-Simulation FMU (FMI 2 and FMI 3) run by fmpy.simulate_fmu on the
      extracted FMU folder (loading, instantiation and initialization included, unzipping
      not), with a communication step of one internal step (fmpy records every step) and
      of 100 steps (the FMU sub-steps in C; fmpy's per-call overhead is amortized);
  (b) the same C engine in-process (fmi_adjoint.native.build_native, one ctypes call);
  (c) the Python engine (fmi_adjoint.simulate).

Each time is the best of 3; ratios are relative to the Python engine.  The FMU's outputs
are checked against (b) (bit-identical) before timing.  Run:
    .venv/bin/python benchmarks/fmu_vs_inprocess.py [EXAMPLE ...]
"""

from __future__ import annotations

import functools
import sys
import tempfile
from pathlib import Path

import fmpy
import numpy as np

from fmi_adjoint import compile_model, load_model, simulate
from fmi_adjoint.examples import example_names, example_path
from fmi_adjoint.export import export_fmu
from fmi_adjoint.native import build_native
from fmi_adjoint.integrate import HHT
from _timing import best_of  # benchmarks/_timing.py (the script folder is on sys.path)

REPEATS = 3
COARSE = 100  # internal steps per communication step in the second FMU run


def bench(name: str, folder: Path) -> None:
    model = load_model(example_path(name))
    settings = model.simulation
    h, alpha = settings.step, settings.alpha
    n = int(round(settings.t_end / h)) // COARSE * COARSE
    t_end = n * h
    compiled = compile_model(model)
    native = build_native(model)

    t_py, traj = best_of(REPEATS, lambda: simulate(compiled, t_end=t_end, step=h, solver=HHT(alpha=alpha)))
    t_c, (_, y_c) = best_of(REPEATS, lambda: native.simulate(t_end=t_end, step=h, solver=HHT(alpha=alpha)))
    print(f"{name}: {compiled.n} coordinates, {compiled.m} constraints, {n} steps of h = {h:g} s, alpha = {alpha:g}")
    print(f"  (c) Python engine            {n / t_py:12,.0f} steps/s   ({t_py:7.3f} s)   1.00")
    print(f"  (b) C engine in-process      {n / t_c:12,.0f} steps/s   ({t_c:7.3f} s)   {t_py / t_c:7.1f} x Python")
    deviation = np.max(np.abs(y_c - traj.outputs()) / (np.max(np.abs(traj.outputs()), axis=0) + 1e-300))
    for version in (2, 3):
        path = export_fmu(example_path(name), folder / f"{name}_fmi{version}.fmu", fmi_version=version)
        unzipped = fmpy.extract(str(path), str(folder / f"{name}_fmi{version}"))
        for k in (1, COARSE):
            t_fmu, result = best_of(REPEATS, functools.partial(fmpy.simulate_fmu, unzipped, stop_time=t_end,
                                                               output_interval=k * h))
            same = all(np.array_equal(result[o], y_c[::k, j]) for j, o in enumerate(compiled.output_names))
            print(f"  (a) FMU FMI {version}, comm. {k:3d} h  {n / t_fmu:12,.0f} steps/s   ({t_fmu:7.3f} s)   "
                  f"{t_py / t_fmu:7.1f} x Python, {t_c / t_fmu:5.2f} x C in-process"
                  f"{'' if same else '   (outputs DIFFER from the C engine!)'}")
    print(f"  max relative deviation C engine vs Python engine over all outputs: {deviation:.1e}")


def main(argv: list[str]) -> None:
    names = argv or sorted(example_names(), key=lambda n: (n != "engine_mount", n != "engine_tvd", n))
    with tempfile.TemporaryDirectory(prefix="fmu_bench_") as tmp:
        for name in names:
            bench(name, Path(tmp))


if __name__ == "__main__":
    main(sys.argv[1:])
