"""``fmi-adjoint demo``: identify the engine mount from the bundled noisy measurement."""

from __future__ import annotations

import sys
from pathlib import Path

from ..examples import EXAMPLES_DIR, example_path
from ..examples.engine_mount_data import AMPLITUDES, CSV_NAMES, TRUE_VALUES
from ..files import OutputFileError
from ..identify.result_file import result_text, write_result
from ..identify.strategies import AutomaticStrategy, identify_staged, stage_starts
from ..identify.table import parameter_table
from ..report.identification import identification_report
from ..report.signals import compare_fit
from .loading import load_problem, problem_spec
from .plotting import plot_comparisons

__all__ = ["run_demo"]


def run_demo(output_dir: str, method: str = "least_squares") -> int:
    """Run the demo; writes ``engine_mount_result.json``, ``engine_mount_fit.png`` and
    ``engine_mount_report.html`` into ``output_dir``."""
    folder = Path(output_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputFileError(f"cannot create the output folder {str(folder)!r}: {exc.strerror}.") from None
    files = [EXAMPLES_DIR / CSV_NAMES[amplitude] for amplitude in AMPLITUDES]
    names = list(TRUE_VALUES)
    print(f"Engine mount (Lauss et al. 2018, Sec. 5): identifying {', '.join(names)} from two sweeps, "
          f"A = {' N and '.join(f'{a:g}' for a in AMPLITUDES)} N", file=sys.stderr)
    print("(a1 sampled at 5 kHz over 1 s, 1 % noise each; one line per iteration follows)", file=sys.stderr)
    specs = [f"{f}@A={a!r}" for f, a in zip(files, AMPLITUDES)]
    _, joint = load_problem(problem_spec(str(example_path("engine_mount")), specs, {}, names, t_end=None,
                                         step=None))
    # The default strategy: from the paper's start values the joint fit of all data at once
    # ends in a wrong local minimum; growing data windows (an eighth, a quarter, half, then all
    # of each sweep) lead into the joint minimum (fmi_adjoint.identify.strategies).
    strategy = AutomaticStrategy().choose(joint)
    print(f"strategy: {strategy.name} (the default; stages: "
          f"{'; '.join(stage.text for stage in strategy.stages(joint))})", file=sys.stderr)
    staged = identify_staged(joint, strategy, method, progress=sys.stderr)
    result = staged.result
    for text in staged.notices:
        print(f"fmi-adjoint: warning: {text}", file=sys.stderr)

    # Table of true, initial and identified values (the one identify prints).
    print(parameter_table(names, result.initial, result.parameters, result.std_errors, true_values=TRUE_VALUES,
                          active_bounds=result.active_bounds, units=joint.parameter_units()))
    print("; ".join(f"{s.stage}: cost {s.cost_initial:.4e} -> {s.cost:.4e} in {s.iterations} iterations"
                    for s in staged.stages))
    print(f"both sweeps: cost {result.cost_initial:.4e} at the start values -> {result.cost:.4e}; "
          f"{result.iterations} iterations, {result.simulations} simulations, {result.seconds:.1f} s ({method}, "
          f"strategy {staged.strategy.name})")

    # Plot first, then the result JSON: a failure leaves neither file half-written.  Every
    # channel of both sweeps, as identify --plot draws them, with the stages marked.
    comparisons = compare_fit(joint, result.initial, result.parameters)
    png_path = folder / "engine_mount_fit.png"
    plot_comparisons(png_path, comparisons, result.cost_history, stages=list(zip(
        stage_starts([s.iterations for s in staged.stages], result.method), (s.stage for s in staged.stages))))
    payload = result.to_json()
    payload.update({"model": "engine_mount", "data": specs, "true_values": TRUE_VALUES,
                    "strategy": {"requested": "auto", "used": staged.strategy.name,
                                 "stages": [s.to_json() for s in staged.stages]}})
    payload["warnings"] = list(staged.notices)
    payload.update({k: v for k, v in joint.solver_info().items() if k != "engine"})
    # The HTML report, also before the result JSON (identify --report).
    report_path = folder / "engine_mount_report.html"
    identification_report(payload, comparisons, title="Engine mount (Lauss et al. 2018, Sec. 5): identification "
                          "from two sweeps", units=joint.parameter_units(),
                          details=joint.run_details()).write(report_path)
    json_path = folder / "engine_mount_result.json"
    try:
        write_result(json_path, result_text(payload))
    except BaseException:
        report_path.unlink(missing_ok=True)
        raise
    print(f"wrote {json_path}, {png_path} and {report_path}")
    return 0 if result.success else 1
