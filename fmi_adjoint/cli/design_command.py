"""``fmi-adjoint design``: optimal input design (dissertation Ch. 5) from the command line.

The command reads its options into a :class:`~fmi_adjoint.design.DesignSpec`, builds the
:class:`~fmi_adjoint.design.DesignProblem` and runs :func:`~fmi_adjoint.design.run_design_starts`
(several starts on the executor of `--workers`/`--dask`, the best kept; issue 32);
everything it writes comes from :mod:`fmi_adjoint.design.report` (the HTML report of
``--report`` from :mod:`fmi_adjoint.report.design`).  Every check that needs no
model build runs first (options, output files, matplotlib), so a mistake costs no build and
no output file is written; the outputs are written only after the design, each atomically,
and an output that fails removes the ones written before it.  Errors are project errors,
which :func:`fmi_adjoint.cli.main.main` turns into one line and exit code 2.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ModelError, OutputFileError
from ..files import check_not_input, check_writable, same_file
from .loading import model_inputs, model_path, parse_assignments, parse_bounds, parse_names
from .parallel_options import add_parallel_options, dask_settings

if TYPE_CHECKING:
    from ..design import DesignIteration, DesignResult, DesignSpec, StartOutcome

# The design code is imported when the command runs (or its options are added), not when the
# command line starts: another command's warm start does not load it (issue 24, part 6).

__all__ = ["add_design_parser", "cmd_design"]


def add_design_parser(sub, options: bool = True) -> None:
    """Register ``design`` on the subparsers ``sub`` (``options``: with its options, see
    :func:`~fmi_adjoint.cli.main.build_parser`)."""
    design = sub.add_parser(
        "design", help="optimal input design: the input that makes parameters best identifiable",
        description="Design the time course of one model input (an [inputs] entry) within bounds so that the "
        "parameters --params can be identified as precisely as possible from the measured outputs --noise "
        "(criteria on the Fisher information matrix; dissertation Ch. 5).")
    if options:
        _design_options(design)


def _design_options(design: argparse.ArgumentParser) -> None:
    from ..design import BASES, BOUND_MAPS, CRITERIA  # noqa: PLC0415 (this command's parser only)
    from ..design.starts import DEFAULT_SEED, DEFAULT_STARTS  # noqa: PLC0415 (as above)

    design.add_argument("model", metavar="MODEL", help="TOML model file or bundled example name")
    design.add_argument("--input", required=True, metavar="NAME", help="the input to design (an [inputs] entry)")
    design.add_argument("--params", required=True, metavar="P1,P2,...", help="parameters to be identified later")
    design.add_argument("--knots", required=True, type=int, metavar="K",
                        help="number of knots, equally spaced over the run (at least 2)")
    design.add_argument("--bounds", required=True, action="append", metavar="NAME=LO:HI",
                        help="bounds of the input, LO < HI")
    design.add_argument("--criterion", choices=tuple(CRITERIA), default="A",
                        help="A: -trace M (default; the dissertation's), D: -log det M, E: smallest eigenvalue "
                        "(smoothed), A-cov: trace M^-1")
    design.add_argument("--basis", choices=tuple(BASES), default="linear",
                        help="linear (default): polygon through the knots; cubic: natural cubic spline")
    design.add_argument("--bound-map", choices=tuple(BOUND_MAPS), default="box",
                        help="how the input is kept within the bounds: box (default: box constraints of the "
                        "optimizer), arctan (eq. 5.17) or sigmoid (eq. 5.16)")
    design.add_argument("--noise", action="append", metavar="OUT=SIGMA",
                        help="measured output and its noise standard deviation (repeatable; default: every output "
                        "with sigma 1)")
    design.add_argument("--end", action="append", metavar="NAME=VALUE",
                        help="end condition output(T) = VALUE (repeatable)")
    design.add_argument("--limit", action="append", metavar="NAME=MAX",
                        help="amplitude limit |output| <= MAX during the run (repeatable)")
    design.add_argument("--rate", type=float, metavar="R", help="bound on |d input/dt| between knots")
    design.add_argument("--t-end", type=float, metavar="T", help="end time [s] (default: the model's)")
    design.add_argument("--step", type=float, metavar="H", help="integrator step h [s] (default: the model's)")
    design.add_argument("--sample", type=float, metavar="DT",
                        help="sample interval of the measurement [s] (default: the step)")
    design.add_argument("--integral", action="store_true",
                        help="weight the samples by the trapezoidal rule (the integral of eq. 5.8) instead of 1 each")
    design.add_argument("--start", type=float, metavar="VALUE",
                        help="start value of every knot, strictly inside the bounds (default: three quarters of the "
                        "way from LO to HI)")
    design.add_argument("--set", action="append", metavar="NAME=VALUE",
                        help="parameter value (repeatable); the nominal values also scale the Fisher matrix")
    design.add_argument("--monte-carlo", type=int, metavar="RUNS",
                        help="check the predicted standard errors: identify the parameters from RUNS noisy "
                        "simulated experiments with the start and with the designed input (at least 2)")
    design.add_argument("--memory-limit", metavar="SIZE",
                        help="most memory the design may plan to use, e.g. 8G (default: FMI_ADJOINT_MEMORY_LIMIT, "
                        "else half of the physical memory); a larger design is refused before it starts")
    design.add_argument("--max-iterations", type=int, default=200, metavar="N",
                        help="most optimizer iterations of each start (default 200)")
    design.add_argument("--starts", type=int, default=DEFAULT_STARTS, metavar="N",
                        help=f"design from N starts and keep the best (default {DEFAULT_STARTS}): the given start, "
                        "ramps, a chirp, square waves and random switching patterns; a concave criterion has a local "
                        "minimum at every outward vertex, so one start can end far from the best; 1: the given "
                        "start only")
    design.add_argument("--seed", type=int, default=DEFAULT_SEED, metavar="S",
                        help=f"seed of the random switching starts (default {DEFAULT_SEED})")
    add_parallel_options(design, "parallel work (the starts)", "the starts", "1", "this process")
    design.add_argument("-o", "--output", metavar="DESIGN.json",
                        help="the design: knots, criterion history, Fisher matrices, predicted standard errors")
    design.add_argument("--csv", metavar="INPUT.csv",
                        help="the designed input on the step grid: 'time' and the input's column, readable by a "
                        "table_load")
    design.add_argument("--plot", metavar="DESIGN.png", help="PNG of the input, the measured outputs and the "
                        "criterion per iteration")
    design.add_argument("--report", metavar="REPORT.html",
                        help="self-contained HTML report (opens offline in any browser): the input before and after, "
                        "the measured outputs, the predicted standard errors, the constraints met, the criterion "
                        "per iteration")


def _check_outputs(args: argparse.Namespace) -> dict[str, str]:
    """The output files by option: each writable, none an input of the command, all distinct."""
    given = {option: path for option, path in (("--plot", args.plot), ("--report", args.report), ("--csv", args.csv),
                                               ("-o", args.output))
             if path}
    inputs = model_inputs(args.model)
    for k, (option, path) in enumerate(given.items()):
        check_writable(path)
        check_not_input(path, inputs, option)
        for other, earlier in list(given.items())[:k]:
            if same_file(path, earlier):
                raise OutputFileError(f"{other} and {option} both name {path!r}; give two different file names.")
    return given


def _spec(args: argparse.Namespace, outputs: list[str]) -> DesignSpec:
    from ..design import BASES, BOUND_MAPS, DesignSpec, criterion_named  # noqa: PLC0415 (when the command runs)

    """The design spec of the options (checks that need no model build)."""
    params = tuple(parse_names(args.params))
    if len(args.bounds) > 1:
        raise ModelError(f"--bounds is given {len(args.bounds)} times; one input is designed: give --bounds "
                         f"{args.input}=LO:HI once.")
    (name, (lo, hi)), = parse_bounds(args.bounds).items()
    if name != args.input:
        raise ModelError(f"--bounds {args.bounds[0]!r} names '{name}', but the designed input is '{args.input}' "
                         f"(--input); give --bounds {args.input}=LO:HI.")
    noise = parse_assignments(args.noise, "--noise")
    if not noise:
        noise = dict.fromkeys(outputs, 1.0)
        print(f"fmi-adjoint: note: no --noise given: every output ({', '.join(outputs)}) is measured with noise "
              "sigma 1; give --noise OUT=SIGMA to choose.", file=sys.stderr)
    return DesignSpec(
        input=args.input, params=params, knots=args.knots, bounds=(lo, hi), noise=noise,
        criterion=criterion_named(args.criterion), basis=BASES[args.basis](), bound_map=BOUND_MAPS[args.bound_map](),
        end=parse_assignments(args.end, "--end"), limits=parse_assignments(args.limit, "--limit"), rate=args.rate,
        t_end=args.t_end, step=args.step, sample=args.sample, integral=args.integral, start=args.start,
    )


def _progress(entry: DesignIteration) -> None:
    print(f"iteration {entry.iteration:4d}  criterion {entry.criterion: .9e}  penalty {entry.penalty:.3e}  "
          f"|gradient| {entry.gradient_norm:.3e}", file=sys.stderr, flush=True)


def _start_progress(count: int) -> Callable[[int, StartOutcome], None]:
    def report(index: int, outcome: StartOutcome) -> None:
        cause = outcome.stop.cause if outcome.stop is not None else ("converged" if outcome.success else "stopped")
        print(f"start {index + 1}/{count} ({outcome.label}): criterion {outcome.criterion_start: .6e} -> "
              f"{outcome.criterion: .6e}, {outcome.iterations} iterations, {cause}", file=sys.stderr, flush=True)

    return report


def _write(result: DesignResult, outputs: dict[str, str], extra: dict) -> list[str]:
    """Write the requested files (figure, report, table, record: the likeliest failure first);
    a failure removes the files this run wrote before it."""
    from ..design.report import design_record, plot_design, write_design_record, write_input_csv  # noqa: PLC0415
    from ..report.design import design_report, design_signals  # noqa: PLC0415 (as the line above: when it runs)

    written: list[str] = []
    payload = {**design_record(result), **extra}
    try:
        if "--plot" in outputs:
            plot_design(result, outputs["--plot"])
            written.append(outputs["--plot"])
        if "--report" in outputs:
            design_report(payload, design_signals(result)).write(outputs["--report"])
            written.append(outputs["--report"])
        if "--csv" in outputs:
            write_input_csv(result, outputs["--csv"])
            written.append(outputs["--csv"])
        if "-o" in outputs:
            write_design_record(outputs["-o"], payload)
            written.append(outputs["-o"])
    except BaseException:
        for path in written:
            Path(path).unlink(missing_ok=True)
        raise
    return written


def _summary(result: DesignResult, written: list[str]) -> str:
    problem, spec = result.problem, result.problem.spec
    lines = [f"design of input '{spec.input}' of model '{problem.model.name}': {problem.criterion.name}-criterion, "
             f"{spec.basis.name} basis, {spec.knots} knots, {spec.bound_map.name} bound map",
             f"criterion {result.start.criterion:.6e} -> {result.final.criterion:.6e}   "
             f"({len(result.history) - 1} iterations, {result.evaluations} evaluations; {result.message})",
             *_starts_summary(result),
             *_stop_summary(result),
             "predicted standard errors (Cramér-Rao bounds), start -> final:"]
    for name, before, after in zip(spec.params, result.standard_errors_start, result.standard_errors_final):
        ratio = f"x {after / before:.3g}" if math.isfinite(before) and before > 0 else ""
        lines.append(f"  {name:14s} {before:.4e} -> {after:.4e}   {ratio}")
    for name, miss in result.end_misses().items():
        lines.append(f"end condition {name}: y(T) - target = {miss:.3e}")
    for name, excess in result.limit_excess().items():
        lines.append(f"limit {name}: max |y| - limit = {excess:.3e}" + (" (inside)" if excess <= 0 else ""))
    rate = result.rate_excess()
    if rate is not None:
        lines.append(f"rate: max |du/dt| - rate = {rate:.3e}" + (" (inside)" if rate <= 0 else ""))
    lines.extend(f"wrote {path}" for path in written)
    return "\n".join(lines)


def _starts_summary(result: DesignResult) -> list[str]:
    """One line on the starts of a multi-start design (none for a single start)."""
    if len(result.starts) <= 1:
        return []
    winner = result.starts[result.best_start]
    return [f"best of {len(result.starts)} starts: '{winner.label}' (start {result.best_start + 1}); "
            f"{result.reached_best} of {len(result.starts)} reached its criterion"]


def _stop_summary(result: DesignResult) -> list[str]:
    """One line on a stop other than convergence: its cause and whether it is a minimum."""
    stop = result.stop
    if stop is None or stop.cause == "converged":
        return []
    verdict = "a minimum to working precision" if stop.trusted else "not a verified minimum"
    return [f"stop: {stop.cause} ({verdict})"]


def cmd_design(args: argparse.Namespace) -> int:
    """Run ``design``; exit code 0, or 1 if the optimizer stopped before convergence (the
    files then hold the best design found)."""
    from ..budget import parse_size  # noqa: PLC0415 (the command's code when it runs)
    from ..data import check_csv_columns  # noqa: PLC0415 (as above)
    from ..design import DesignProblem, DesignRecipe, StartPlan, run_design_starts  # noqa: PLC0415 (as above)
    from ..design.montecarlo import monte_carlo, monte_carlo_record  # noqa: PLC0415 (as above)
    from ..design.report import check_plotting  # noqa: PLC0415 (as above)
    from ..identify.spec import check_time_span  # noqa: PLC0415 (as above)
    from ..model_file import ModelSource  # noqa: PLC0415 (as above)
    from ..warm import prepare_model  # noqa: PLC0415 (as above)

    if args.max_iterations < 1:
        raise ModelError(f"--max-iterations {args.max_iterations}: give at least 1 iteration (default 200).")
    if args.memory_limit is not None:
        parse_size(args.memory_limit, "--memory-limit")
    check_time_span(args.t_end, args.step)
    outputs = _check_outputs(args)
    if "--csv" in outputs:
        check_csv_columns([args.input], "input")
    if "--plot" in outputs:
        check_plotting()
    plan = StartPlan(args.starts, args.seed)
    if args.workers is not None and args.workers < 1:
        raise ModelError(f"--workers {args.workers}: give at least 1 (1: every start in this process).")
    dask, dask_timeout = dask_settings(args)
    if args.workers is not None and dask:  # before any build (choose_executor says the same later)
        raise ModelError(f"give either --workers {args.workers} (local processes) or --dask {dask} (a cluster), not "
                         "both.")
    path = model_path(args.model)
    settings = parse_assignments(args.set)
    source = ModelSource.from_path(path)
    model = prepare_model(source).with_values(settings)
    check_time_span(model.simulation.t_end if args.t_end is None else args.t_end,
                    model.simulation.step if args.step is None else args.step)
    spec = _spec(args, [output.name for output in model.outputs])
    if args.monte_carlo is not None and (args.monte_carlo < 2 or spec.integral):
        raise ModelError(f"--monte-carlo {args.monte_carlo}: give at least 2 runs, without --integral (the "
                         "Cramér-Rao bounds are those of independent samples).")
    problem = DesignProblem.build(spec, model, memory_limit=args.memory_limit)
    from ..scale.select import choose_executor

    # In this process unless --workers or --dask asks for more: a worker builds the problem again,
    # which small designs do not repay, and the local pool's server outlives the command's work
    # in a process that goes on (its temporary folder stays until that process ends).
    executor = choose_executor(workers=args.workers or 1, dask=dask, tasks=plan.count,
                               preload=("fmi_adjoint.design.multistart",), dask_timeout=dask_timeout)
    try:
        result = run_design_starts(problem, plan, max_iterations=args.max_iterations, executor=executor,
                                   recipe=DesignRecipe.create(source, settings, spec, args.memory_limit),
                                   progress=_start_progress(plan.count) if plan.count > 1 else None,
                                   iteration_progress=_progress)
    finally:
        if executor is not None:
            executor.close()
    extra: dict = {"model_file": str(path), "settings": settings}
    checks = {}
    if args.monte_carlo is not None:
        checks = {label: monte_carlo(result.problem, z, args.monte_carlo)
                  for label, z in (("start", result.z_start), ("final", result.z))}
        extra["monte_carlo"] = {label: monte_carlo_record(check) for label, check in checks.items()}
    written = _write(result, outputs, extra)
    print(_summary(result, written))
    for label, check in checks.items():
        print(f"Monte-Carlo, {label} input: {check.describe()}")
    if not result.success:
        advice = result.stop.advice if result.stop is not None else "raise --max-iterations to continue."
        print(f"fmi-adjoint: note: the optimizer stopped before convergence ({result.message}); the result is the "
              f"best design found but cannot be trusted as a minimum: {advice}", file=sys.stderr)
    return 0 if result.success else 1
