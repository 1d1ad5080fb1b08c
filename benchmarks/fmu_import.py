"""Importing a third-party Model Exchange FMU (issue 30, parts 6 and 7), measured in one run.

On the hand-written Van der Pol FMU (fmus/van_der_pol_me, FMI 2.0 ME, with directional
derivatives), over 0-10 s with the outputs x0, x1 every 0.02 s:

  (1) one Model Exchange run: ours (adaptive Radau IIA in the FMU's worker process, one request,
      as ``identify`` runs it) against fmpy's CVode (``fmpy.simulate_fmu(solver="CVode")``) at
      relative tolerances 1e-6 to 1e-10; the error of each is measured against scipy's DOP853
      at rtol 1e-13 on the same equations; the ratio is our time over the time of the cheapest
      CVode setting that is at least as accurate (matched accuracy);
  (2) the identification of mu and x0_start from noise-free data (DOP853): ours
      (``fmu_problem`` + ``identify``, least squares on the exact sensitivities, rtol 1e-8, the
      default) against a 30-line ``scipy.optimize.least_squares`` + fmpy CVode loop (its
      Jacobian by scipy's differences) with CVode at the rtol that matched ours in (1); the
      parameters' errors are printed;
  (3) ours with and without the FMU's directional derivatives (the same binary, its XML saying
      providesDirectionalDerivative="false"): FMU calls (counted by the worker) and time.

Times are wall seconds, best of 3 (the identifications: one run each).  Run:
    .venv/bin/python benchmarks/fmu_import.py
"""

from __future__ import annotations

import functools
import sys
import tempfile
import zipfile
from pathlib import Path

import fmpy
import numpy as np
from scipy.integrate import solve_ivp
from scipy.optimize import least_squares

from fmi_adjoint.costs import LeastSquaresCost
from fmi_adjoint.fmu.archive import open_fmu
from fmi_adjoint.fmu.experiment import FmuExperiment, Tolerances
from fmi_adjoint.fmu.problem import fmu_problem
from fmi_adjoint.identify.optimize import identify
from _children import best_of  # benchmarks/_children.py (the script folder is on sys.path)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from handwritten_fmus import build_fmu  # noqa: E402  (the tests' FMU builder)

REPEATS = 3
T_END = 10.0
TIMES = np.linspace(0.0, T_END, 501)
OUTPUTS = ("x0", "x1")
TRUE = {"mu": 1.5, "x0_start": 1.8}
START = {"mu": 1.0, "x0_start": 2.0}
OUR_RTOLS = (1e-6, 1e-8, 1e-10)
CVODE_RTOLS = (1e-6, 1e-8, 1e-10, 1e-12, 1e-13, 1e-14)
#: The rtol of our identification (identify's default).
RTOL = 1e-8


def reference(mu: float, x0: float) -> np.ndarray:
    """Van der Pol (fmus/README.md) by DOP853 at rtol 1e-13: (samples, [x0, x1])."""
    solution = solve_ivp(lambda _, y: [y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]], (0.0, T_END), [x0, 0.0],
                         method="DOP853", rtol=1e-13, atol=1e-13, t_eval=TIMES)
    return solution.y.T


def error(Y: np.ndarray, ref: np.ndarray) -> float:
    """Largest error relative to each output's largest value."""
    return float(np.max(np.abs(Y - ref) / np.max(np.abs(ref), axis=0)))


def fmpy_run(folder: str, description, values: dict, rtol: float) -> np.ndarray:
    result = fmpy.simulate_fmu(folder, validate=False, model_description=description, solver="CVode",
                               relative_tolerance=rtol, stop_time=T_END, output_interval=TIMES[1] - TIMES[0],
                               start_values=values, output=list(OUTPUTS))
    return np.column_stack([np.interp(TIMES, result["time"], result[name]) for name in OUTPUTS])


def scipy_fmpy_identification(folder: str, description, data: np.ndarray, rtol: float) -> np.ndarray:
    """What a user writes without fmi-adjoint: least squares over CVode runs of the FMU."""
    def residuals(p: np.ndarray) -> np.ndarray:
        return (fmpy_run(folder, description, {"mu": p[0], "x0_start": p[1]}, rtol) - data).ravel()

    return least_squares(residuals, [START["mu"], START["x0_start"]]).x


def without_directional_derivatives(fmu: Path, folder: Path) -> Path:
    """A copy of ``fmu`` whose XML does not declare directional derivatives (the same binary)."""
    copy = folder / f"{fmu.stem}_no_directional.fmu"
    with zipfile.ZipFile(fmu) as source, zipfile.ZipFile(copy, "w", zipfile.ZIP_DEFLATED) as target:
        for entry in source.infolist():
            data = source.read(entry)
            if entry.filename == "modelDescription.xml":
                data = data.replace(b'providesDirectionalDerivative="true"', b'providesDirectionalDerivative="false"')
            target.writestr(entry, data)
    return copy


def our_problem(archive, data: np.ndarray, rtol: float):
    exp = FmuExperiment(LeastSquaresCost(TIMES, data, OUTPUTS), t_end=T_END, step=TIMES[1] - TIMES[0])
    problem, _ = fmu_problem(archive, [exp], list(TRUE), start=START, gradient="sensitivity",
                             tolerances=Tolerances(rtol=rtol, atol=rtol), workers=1)
    return problem


def our_identification(fmu: Path, data: np.ndarray, rtol: float) -> tuple[float, np.ndarray, int, dict]:
    """(seconds, parameters, FMU calls, the gradient path's columns) of one identification."""
    with open_fmu(fmu) as archive:
        problem = our_problem(archive, data, rtol)
        try:
            seconds, _, result = best_of(1, lambda: identify(problem, "least_squares", progress=None))
            return seconds, result.parameters, problem.instances.fmu_calls(), problem.columns
        finally:
            problem.close()


def model_exchange_runs(fmu: Path) -> dict[float, float]:
    """Part (1); returns, per rtol of ours, the CVode rtol of matched accuracy."""
    ref = reference(1.0, 2.0)
    ours, theirs = {}, {}
    with open_fmu(fmu) as archive:
        description = archive.description
        folder = str(archive.directory)
        for rtol in OUR_RTOLS:
            problem = our_problem(archive, ref, rtol)
            try:
                seconds, _, Y = best_of(REPEATS, functools.partial(problem.sampled_outputs, 0, np.array([1.0, 2.0])))
            finally:
                problem.close()
            ours[rtol] = (seconds, error(Y, ref))
        for rtol in CVODE_RTOLS:
            seconds, _, Y = best_of(REPEATS, functools.partial(fmpy_run, folder, description, {}, rtol))
            theirs[rtol] = (seconds, error(Y, ref))
    print(f"(1) one Model Exchange run of {fmu.name}, 0-{T_END:g} s, {TIMES.size} samples; error against DOP853 "
          "at rtol 1e-13 (largest, relative to each output's largest value)")
    print("  fmpy CVode:  " + "   ".join(f"rtol {r:.0e} {s:.4f} s {e:.1e}" for r, (s, e) in theirs.items()))
    print("   rtol   ours: time     error      matched CVode (the cheapest as accurate): rtol   time      error"
          "     ours / CVode")
    matched = {}
    for rtol, (seconds, err) in ours.items():
        good = [r for r, (_, e) in theirs.items() if e <= err]
        if not good:
            print(f"  {rtol:6.0e}  {seconds:8.4f} s  {err:9.2e}   CVode is never as accurate")
            continue
        best = min(good, key=lambda r: theirs[r][0])
        matched[rtol] = best
        print(f"  {rtol:6.0e}  {seconds:8.4f} s  {err:9.2e}   {'':30s}{best:6.0e}  {theirs[best][0]:8.4f} s  "
              f"{theirs[best][1]:9.2e}   {seconds / theirs[best][0]:8.1f} x")
    return matched


def identifications(fmu: Path, folder: Path, cvode_rtol: float) -> None:
    """Parts (2) and (3): ours at :data:`RTOL`, the scipy loop at ``cvode_rtol``."""
    data = reference(TRUE["mu"], TRUE["x0_start"])
    truth = np.array(list(TRUE.values()))
    ours, p_ours, calls, columns = our_identification(fmu, data, RTOL)
    with open_fmu(fmu) as archive:
        theirs, _, p_theirs = best_of(1, lambda: scipy_fmpy_identification(str(archive.directory),
                                                                           archive.description, data, cvode_rtol))
    print(f"(2) identification of mu and x0_start from {TIMES.size} noise-free samples of x0 and x1: ours at rtol "
          f"{RTOL:g}, CVode at rtol {cvode_rtol:g} (matched accuracy, (1))")
    print(f"  ours (least squares, exact sensitivities)    {ours:8.2f} s   parameter error "
          f"{np.max(np.abs(p_ours - truth) / truth):9.2e}")
    print(f"  scipy least_squares + fmpy CVode            {theirs:8.2f} s   parameter error "
          f"{np.max(np.abs(p_theirs - truth) / truth):9.2e}")
    print(f"  ours / scipy + fmpy                          {ours / theirs:8.1f} x")
    plain = without_directional_derivatives(fmu, folder)
    slow, p_plain, plain_calls, plain_columns = our_identification(plain, data, RTOL)
    print("(3) our identification with and without the FMU's directional derivatives")
    print(f"  with    ({columns['state 0']}): {calls:10,d} FMU calls   {ours:8.2f} s")
    print(f"  without ({plain_columns['state 0']}): {plain_calls:10,d} FMU calls   {slow:8.2f} s")
    print(f"  calls saved {1 - calls / plain_calls:6.1%}, time saved {1 - ours / slow:6.1%}; the same parameters to "
          f"{np.max(np.abs(p_ours - p_plain) / truth):.1e}")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="fmi_adjoint_bench_") as tmp:
        folder = Path(tmp)
        fmu = build_fmu("van_der_pol_me", folder)
        matched = model_exchange_runs(fmu)
        identifications(fmu, folder, matched.get(RTOL, min(CVODE_RTOLS)))


if __name__ == "__main__":
    main()
