"""``fmi-adjoint demo``: identify the engine mount from the bundled noisy measurement."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

from ..data import read_csv
from ..examples import EXAMPLES_DIR, example_path
from ..examples.engine_mount_data import AMPLITUDES, CSV_NAMES, TRUE_VALUES
from ..files import OutputFileError, atomic_output
from ..identify import IdentificationProblem, identify
from .loading import load_problem, problem_spec
from .plotting import plot_identification

__all__ = ["run_demo"]


def run_demo(output_dir: str, method: str = "least_squares") -> int:
    """Run the demo; writes ``engine_mount_result.json`` and ``engine_mount_fit.png``."""
    folder = Path(output_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputFileError(f"cannot create the output folder {str(folder)!r}: {exc.strerror}.") from None
    files = [EXAMPLES_DIR / CSV_NAMES[amplitude] for amplitude in AMPLITUDES]
    data_file = files[0]
    names = list(TRUE_VALUES)
    print(f"Engine mount (Lauss et al. 2018, Sec. 5): identifying {', '.join(names)} from two sweeps, "
          f"A = {' N and '.join(f'{a:g}' for a in AMPLITUDES)} N", file=sys.stderr)
    print("(a1 sampled at 5 kHz over 1 s, 1 % noise each; one line per iteration follows)", file=sys.stderr)
    specs = [f"{f}@A={a!r}" for f, a in zip(files, AMPLITUDES)]
    _, joint = load_problem(problem_spec(str(example_path("engine_mount")), specs, {}, names, t_end=None,
                                         step=None))
    experiments = list(joint.experiments)
    # Continuation: the 100 N sweep alone converges from the paper's start values; the 300 N
    # sweep, far more nonlinear, joins once the parameters are close (from the start values
    # directly, the joint fit finds a wrong local minimum).
    print("stage 1: the 100 N sweep alone, from the paper's initial values", file=sys.stderr)
    first = identify(IdentificationProblem(experiments[:1], names), method, statistics=False)
    print("stage 2: both sweeps, from the stage-1 result", file=sys.stderr)
    problem = IdentificationProblem(experiments, names, start=dict(zip(names, first.parameters)))
    second = identify(problem, method)
    result = dataclasses.replace(
        second,
        initial=first.initial,
        cost_initial=first.cost_initial,
        cost_history=first.cost_history + second.cost_history,
        gradient_norm_history=first.gradient_norm_history + second.gradient_norm_history,
        iterations=first.iterations + second.iterations,
        simulations=first.simulations + second.simulations,
        seconds=first.seconds + second.seconds,
        success=first.success and second.success,
    )

    # Table of true, initial and identified values.
    std = result.std_errors or [None] * len(names)
    lines = [f"{'parameter':10s} {'true':>12s} {'initial':>12s} {'identified':>14s} {'std error':>11s} "
             f"{'|err|/std':>9s}"]
    for k, name in enumerate(names):
        true, ident, s = TRUE_VALUES[name], result.parameters[k], std[k]
        ratio = f"{abs(ident - true) / s:9.2f}" if s else "        -"
        s_text = f"{s:11.3e}" if s else "          -"
        lines.append(f"{name:10s} {true:12.5g} {result.initial[k]:12.5g} {ident:14.7g} {s_text} {ratio}")
    if result.active_bounds:
        lines.append(f"on a bound (standard error only indicative): {', '.join(result.active_bounds)}")
    table = "\n".join(lines)
    print(table)
    print(f"stage 1 (100 N): cost {first.cost_initial:.4e} -> {first.cost:.4e} in {first.iterations} iterations; "
          f"stage 2 (both sweeps): {second.cost_initial:.4e} -> {second.cost:.4e} in {second.iterations} "
          f"iterations; {result.simulations} simulations, {result.seconds:.1f} s ({method})")

    # Plot first, then the result JSON: a failure leaves neither file half-written.
    exp = experiments[0]
    measured = read_csv(data_file)
    channel = exp.model.output_index("a1")

    def a1_at(values: np.ndarray) -> np.ndarray:
        traj = exp.simulate(exp.parameters(names, values))
        return np.interp(measured.times, traj.t, traj.outputs()[:, channel])

    png_path = folder / "engine_mount_fit.png"
    plot_identification(
        png_path, measured.times, measured.column("a1"), a1_at(result.initial), a1_at(result.parameters),
        result.cost_history, "a1", "m/s^2",
    )
    payload = result.to_json()
    payload.update({"model": "engine_mount", "data": specs, "true_values": TRUE_VALUES})
    json_path = folder / "engine_mount_result.json"
    with atomic_output(json_path) as handle:
        handle.write(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {json_path} and {png_path}")
    return 0 if result.success else 1
