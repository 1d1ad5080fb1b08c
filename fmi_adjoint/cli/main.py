"""The ``fmi-adjoint`` command line."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..data import check_csv_columns, write_csv, write_csv_rows
from ..errors import FmiAdjointError, ModelError, OutputFileError
from ..examples import EXAMPLES_DIR, example_names
from ..files import check_not_input, check_writable, same_file
from ..text import excerpt
from ..toolchain import compiler_jobs
from .cache_command import add_cache_parser, cmd_cache
from .design_command import add_design_parser
from .loading import (
    check_time_span,
    data_companions,
    load_problem,
    model_error_in,
    model_inputs,
    model_path,
    parse_assignments,
    parse_bounds,
    parse_names,
    problem_spec,
    resolve_engine,
)
from .parallel_options import add_parallel_options, dask_settings
from .ssp_options import add_master_options, master_settings

if TYPE_CHECKING:
    from ..identify.data_costs import CostOptions
    from ..identify.spec import ProblemSpec
    from ..integrate import AbstractScheme
    from ..scale import AbstractExecutor

# A command imports what only it needs when it runs (and its options' choices when its parser
# is built, build_parser), so that a warm `simulate` does not load the design code, the
# identification strategies, the parallel executors or the reports (issue 24, part 6;
# tests/test_warm_cli_imports.py).

__all__ = ["main", "build_parser"]


def _common_model_options(parser: argparse.ArgumentParser, fmu: bool = False, optional: bool = False) -> None:
    if fmu:
        parser.add_argument("model", metavar="MODEL", nargs="?", help="TOML model file or bundled example name "
                            "(or --fmu)")
        group = parser.add_argument_group("FMU (instead of MODEL; through fmpy)")
        group.add_argument("--fmu", metavar="MODEL.fmu", help="any FMI 2/3 Model Exchange or Co-Simulation FMU")
        group.add_argument("--inputs", metavar="INPUTS.csv", help="input signals: 'time' and one column per FMU input")
        group.add_argument("--gradient", choices=("auto", "adjoint", "sensitivity", "fd"), default="auto",
                           help="auto (default): the path with the fewest model evaluations: adjoint for FMUs "
                           "exported by fmi-adjoint, sensitivity for Model Exchange FMUs, else fd (parallel finite "
                           "differences); the choice and its reason go to the result")
        group.add_argument("--interface", choices=("auto", "me", "cs"), default="auto",
                           help="the FMU interface to run: me (Model Exchange, integrated here with error control) "
                           "or cs (Co-Simulation, the FMU's own solver); auto: cs when the FMU has it, unless the "
                           "gradient path needs me (recorded in the result; validate and apply use it)")
        group.add_argument("--rtol", type=float, help="Model Exchange: relative error tolerance of the adaptive "
                           "Radau IIA integration (default 1e-8)")
        group.add_argument("--atol", type=float, help="Model Exchange: absolute error tolerance, times each state's "
                           "nominal value (default 1e-10)")
        group.add_argument("--max-steps", type=int, metavar="N",
                           help="Model Exchange: most steps one simulation may attempt (default 200000; each step "
                           "holds about 1 kB until the simulation ends)")
        group.add_argument("--max-events", type=int, metavar="N",
                           help="Model Exchange: most events one simulation may handle (default 20000)")
        group.add_argument("--run-timeout", type=float, metavar="SECONDS",
                           help="Model Exchange: longest time one simulation (with its sensitivities) may take "
                           "(default 600; --fmu-timeout bounds each FMI call)")
        group.add_argument("--allow-unidentifiable", action="store_true",
                           help="accept a fit in which a parameter does not affect the outputs (otherwise it is "
                           "reported with success false)")
        _fmu_process_options(group)
    else:
        parser.add_argument("model", metavar="MODEL", nargs="?" if optional else None,
                            help="TOML model file or bundled example name")
    parser.add_argument("--set", action="append", metavar="NAME=VALUE", help="parameter value (repeatable)")
    parser.add_argument("--step", type=float, help="integrator step h [s] (default: the model's)")
    _scheme_options(parser)
    _jobs_option(parser)
    parser.add_argument("--t-end", type=float, help="end time [s] (default: the model's; with data, the last sample, "
                        "which must not lie past the model's end time)")
    _table_option(parser)


def _jobs_option(parser) -> None:
    """--jobs: compiler processes at once when the command builds a model (issue 24)."""
    parser.add_argument("--jobs", type=int, metavar="N",
                        help="C compiler processes to run at once while building the model (default: the CPU "
                        "count; a build compiles one file per component type and function)")


def _scheme_options(parser) -> None:
    """--integrator, --alpha, --rho-inf (the model file's [simulation] settings by default)."""
    from ..integrate.schemes import INTEGRATORS, NEWTON_METHODS  # noqa: PLC0415 (the parser of this command only)

    parser.add_argument("--integrator", choices=INTEGRATORS,
                        help="hht (Lauss et al. 2018) or generalized_alpha (Arnold & Brüls 2007; second order also "
                        "for configuration-dependent mass matrices) (default: the model's)")
    parser.add_argument("--alpha", type=float, help="HHT alpha in [-1/3, 0] (default: the model's)")
    parser.add_argument("--rho-inf", type=float,
                        help="generalized-alpha spectral radius at infinity in [0, 1] (default: the model's, else "
                        "0.8); 1 leaves accelerations and multipliers of constrained models unconverged")
    parser.add_argument("--newton", choices=tuple(NEWTON_METHODS),
                        help="full: refactor the iteration matrix at every Newton iteration (default: the model's "
                        "[simulation] newton, else full); modified: "
                        "keep it over iterations and steps (fewer factorizations, states within about 1e-11 "
                        "relative of full Newton's, the adjoint still exact for the computed run)")


def _parallel_options(parser: argparse.ArgumentParser) -> None:
    """--workers and --dask: where the parallel work runs (experiments, starts, finite differences)."""
    add_parallel_options(parser, "parallel work (experiments, starts, finite-difference columns)", "the work",
                         "the CPU count when there is parallel work")


def _table_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow-external-tables", action="store_true",
                        help="let table_load read CSV files outside the model file's folder (only for model files "
                        "you trust)")


def _fmu_process_options(group) -> None:
    """--fmu-timeout and --verbose: the FMU binary runs in worker processes (fmu/session.py)."""
    group.add_argument("--fmu-timeout", type=float, metavar="SECONDS",
                       help="longest time one FMI call of the FMU binary may take before it is stopped (default 60)")
    group.add_argument("--verbose", action="store_true",
                       help="copy what the FMU binary printed (its log) to stderr after the command")


def _fmu_process_settings(args) -> dict:
    """The keyword arguments ``timeout`` and ``log`` of the FMU functions, from the options."""
    from ..fmu.session import DEFAULT_TIMEOUT, check_timeout

    timeout = DEFAULT_TIMEOUT if args.fmu_timeout is None else check_timeout(args.fmu_timeout)
    return {"timeout": timeout, "log": sys.stderr if args.verbose else None}


def _data_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data", action="append", required=True, metavar="DATA[@NAME=VALUE,...]",
        help="measurements (CSV/TSV, MDF 3/4, MAT, HDF5): a time and one channel per measured output; repeat for "
        "several experiments; settings after '@' apply to that experiment only, window=T0:T1 compares a time "
        "window of the file",
    )
    parser.add_argument("--params", required=True, metavar="P1,P2,...", help="parameters to differentiate/identify")
    parser.add_argument("--weight", action="append", metavar="CHANNEL=W", help="channel weight (default 1)")
    parser.add_argument("--scale", action="append", metavar="CHANNEL=S", help="channel scale (default 1)")
    from .cost_options import add_bench_options  # noqa: PLC0415 (the costs: for the commands that fit data)

    add_bench_options(parser)


class _Parser(argparse.ArgumentParser):
    """argparse with the tool's one-line error (no usage block) and exit code 2."""

    def error(self, message: str):
        print(f"fmi-adjoint: error: {self.prog}: {_one_line(message)}; see '{self.prog} --help'.", file=sys.stderr)
        raise SystemExit(2)


def _engine_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine", choices=("auto", "native", "python"), default="auto",
        help="native: the C engine (forward run, adjoint and sensitivities; the engine FMUs carry); python: the "
        "readable reference engine; auto (default): native, or python with a note when there is no C compiler",
    )


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser of ``fmi-adjoint``.

    ``command``: only this command's options are added (every command keeps its name and help),
    so that a command does not import what the other commands' options need (their choices
    come from the identification, the costs, the design); the line's remaining arguments are
    parsed by that command's parser alone, so it parses them as the full parser would.  None:
    every command's options (``fmi-adjoint --help``, the documentation).
    """
    parser = _Parser(
        prog="fmi-adjoint",
        description="Parameter identification of multibody models with exact discrete adjoint gradients.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for name, text, description, options in _COMMAND_PARSERS:
        command_parser = sub.add_parser(name, help=text, description=description)
        if options is not None and command in (None, name):
            options(command_parser)
    add_design_parser(sub, options=command in (None, "design"))
    add_cache_parser(sub)
    return parser


def _simulate_options(sim: argparse.ArgumentParser) -> None:
    _common_model_options(sim, optional=True)
    sim.add_argument("-o", "--output", metavar="OUT.csv", help="CSV file (default: stdout)")
    _engine_option(sim)
    system = sim.add_argument_group("a system of FMUs (SSP 1.0) instead of MODEL")
    system.add_argument("--ssp", metavar="SYSTEM.ssp",
                        help="an .ssp archive or an .ssd file of FMUs; --step is the macro step of a co-simulation "
                        "(the rows' interval of a Model Exchange system, default 500 rows), --set "
                        "COMPONENT.NAME=VALUE sets a component's parameter, the columns are COMPONENT.CONNECTOR of "
                        "every component output and the system's outputs")
    system.add_argument("--interface", choices=("auto", "cs", "me"), default="auto",
                        help="cs: co-simulation of the components' Co-Simulation interfaces by the master (--order, "
                        "--extrapolation); me: the components' Model Exchange interfaces coupled into one ODE, "
                        "integrated with error control (--rtol, --atol; no coupling error); auto (default): cs "
                        "when every component offers it, else me")
    add_master_options(system)
    system.add_argument("--rtol", type=float, help="--interface me: relative error tolerance of the adaptive "
                        "Radau IIA integration (default 1e-8)")
    system.add_argument("--atol", type=float, help="--interface me: absolute error tolerance, times each state's "
                        "nominal value (default 1e-10)")
    system.add_argument("--error-estimate", action="store_true",
                        help="also run at half the macro step (--interface me: at tolerances 100 times tighter) and "
                        "print each column's estimated coupling (integration) error")
    system.add_argument("--inputs", metavar="INPUTS.csv",
                        help="the system's inputs: 'time' and one column per system input connector")
    _fmu_process_options(system)
    group = sim.add_argument_group("measured inputs")
    group.add_argument("--input", action="append", metavar="INPUT=CHANNEL",
                       help="drive the model input INPUT (an [inputs] entry) with the channel CHANNEL of "
                       "--input-data, interpolated linearly and converted to the input's unit (repeat per input)")
    group.add_argument("--input-data", metavar="DATA",
                       help="the file of the --input channels (CSV/TSV, MDF 3/4, MAT, HDF5; its times as recorded)")


def _gradient_options(grad: argparse.ArgumentParser) -> None:
    from ..identify.problem import GRADIENT_METHODS  # noqa: PLC0415 (this command's parser only)
    from .cost_options import add_cost_options  # noqa: PLC0415 (as above)

    _common_model_options(grad, fmu=True)
    _data_options(grad)
    grad.add_argument("--method", choices=GRADIENT_METHODS, default="adjoint")
    grad.add_argument("--json", action="store_true", help="print JSON to stdout")
    _engine_option(grad)
    _parallel_options(grad)
    add_cost_options(grad)


def _identify_options(ident: argparse.ArgumentParser) -> None:
    from ..identify.optimize import OPTIMIZERS  # noqa: PLC0415 (this command's parser only)
    from ..identify.strategies import STRATEGY_NAMES  # noqa: PLC0415 (as above)
    from .cost_options import add_cost_options  # noqa: PLC0415 (as above)

    _common_model_options(ident, fmu=True)
    _data_options(ident)
    system = ident.add_argument_group("a system of FMUs (SSP 1.0) instead of MODEL")
    system.add_argument("--ssp", metavar="SYSTEM.ssp",
                        help="an .ssp archive or an .ssd file of FMUs; --params and --set name COMPONENT.NAME, the "
                        "data columns COMPONENT.CONNECTOR of a component output or a system output's name. "
                        "Co-Simulation (--interface cs, the default when every component offers it): --step is the "
                        "macro step, gradients by central differences of whole system runs, in parallel (--workers, "
                        "--dask); Model Exchange (--interface me): one ODE of all components, --rtol/--atol, exact "
                        "sensitivities")
    add_master_options(system, "--master-order")
    ident.add_argument("--bounds", action="append", metavar="P=LO:HI", help="bounds (default: the model's)")
    ident.add_argument("--method", choices=("auto", *OPTIMIZERS), default="auto",
                       help="'auto' (default): Gauss-Newton (least_squares) for --cost time, L-BFGS-B with the "
                       "adjoint gradient (lbfgsb) for the spectral, order and POD costs")
    _engine_option(ident)
    ident.add_argument("--scaling", choices=("auto", "bounds", "log", "none"), default="auto")
    ident.add_argument("--max-iter", type=int, default=200)
    ident.add_argument("-o", "--output", metavar="RESULT.json", help="result file (default: stdout)")
    ident.add_argument("--json", action="store_true", help="print the result JSON to stdout")
    ident.add_argument("--plot", metavar="FIT.png",
                       help="PNG of measured, initial and identified outputs (spectra, orders, modal coordinates) "
                       "of every channel of every experiment with their residuals, and the convergence over all "
                       "stages")
    ident.add_argument("--report", metavar="REPORT.html",
                       help="self-contained HTML report (opens offline in any browser): summary and warnings, "
                       "parameters with confidence intervals, correlations, every channel of every experiment with "
                       "residuals, convergence")
    _parallel_options(ident)
    starts = ident.add_argument_group("multi-start and checkpoints")
    starts.add_argument("--starts", type=int, default=1, metavar="N",
                        help="run the optimizer from N starts: the start values, then a Sobol sequence inside the "
                        "bounds; the best result is reported, every start in 'multistart' of the result")
    starts.add_argument("--seed", type=int, default=0, help="seed of the Sobol sequence (default 0)")
    starts.add_argument("--strategy", choices=tuple(STRATEGY_NAMES), default="auto",
                        help="how each start reaches its minimum: 'windows' fits growing data windows (an eighth, "
                        "a quarter, half, then all of each record), 'experiments' each experiment alone first (one "
                        "start per experiment), 'single' all data at once; 'auto' (default) uses windows for "
                        "time-domain least squares, else single, and with --starts N cycles the start points "
                        "through every applicable strategy")
    starts.add_argument("--continuation", action="store_true",
                        help="the same as --strategy experiments: with several --data, run each start once per "
                        "experiment, that experiment alone first, then all of them")
    starts.add_argument("--checkpoint", metavar="RUN.ckpt",
                        help="record every evaluation and finished start in this new file, to continue an "
                        "interrupted run with --resume")
    starts.add_argument("--resume", metavar="RUN.ckpt",
                        help="continue the run recorded in RUN.ckpt (same command line; --workers/--dask may "
                        "differ); the result equals an uninterrupted run")
    starts.add_argument("--resume-reevaluate", metavar="RUN.ckpt",
                        help="continue a run recorded by another user or machine, or by an older fmi-adjoint, "
                        "without trusting RUN.ckpt: only its points are used and each is evaluated again (as long as "
                        "a new run); the file is only read, add --checkpoint NEW.ckpt to record the continued run")
    add_cost_options(ident)


def _plugins_options(plugins: argparse.ArgumentParser) -> None:
    plugin_sub = plugins.add_subparsers(dest="plugins_command", required=True, metavar="ACTION")
    plugin_sub.add_parser("list", help="name, distribution and parameters of every element")
    check = plugin_sub.add_parser("check", help="Jacobians, C code, rest and passivity checks")
    check.add_argument("name", nargs="?", metavar="NAME", help="element type name")
    check.add_argument("--all", action="store_true", help="check every registered element")
    check.add_argument("--seed", type=int, default=0, help="random states and parameters")


def _export_options(export: argparse.ArgumentParser) -> None:
    export.add_argument("model", metavar="MODEL", help="TOML model file or bundled example name")
    export.add_argument("--fmi", type=int, choices=(2, 3), default=2, help="FMI version")
    export.add_argument("--set", action="append", metavar="NAME=VALUE", help="parameter start value (repeatable)")
    export.add_argument("--step", type=float, help="internal integrator step [s] (default: the model's)")
    # The choices and default of fmi_adjoint.export (INTERFACES, DEFAULT_INTERFACE), spelled here
    # so that the parser does not import the exporter (tests/test_fmu_both_default.py compares).
    export.add_argument("--interface", choices=("cs", "me", "both"), default="both",
                        help="FMI interfaces: Co-Simulation, Model Exchange or both in one FMU (default; "
                             "Co-Simulation only, with a note, for a model Model Exchange refuses)")
    _scheme_options(export)
    _jobs_option(export)
    _table_option(export)
    export.add_argument("-o", "--output", required=True, metavar="OUT.fmu")


def _apply_options(apply: argparse.ArgumentParser) -> None:
    apply.add_argument("result", metavar="RESULT.json", help="written by `fmi-adjoint identify -o`")
    apply.add_argument("--fmu", metavar="MODEL.fmu", help="the FMU the parameters belong to (or give --system)")
    apply.add_argument("--system", metavar="SYSTEM.ssp",
                       help="the system (.ssp archive or .ssd file) an `identify --ssp` ran on: -o writes a copy of "
                       "it as an .ssp archive with the identified values in its parameter bindings")
    apply.add_argument("-o", "--output", metavar="IDENTIFIED.fmu",
                       help="the FMU with the identified values (compiled in where possible, and as start values); "
                       "with --system: IDENTIFIED.ssp, the system with the values bound")
    apply.add_argument("--ssv", metavar="OUT.ssv", help="SSP 1.0 parameter-values file")
    apply.add_argument("--ssp", metavar="OUT.ssp",
                       help="SSP 1.0 archive: the FMU of -o and a parameter binding of the identified values")


def _validate_options(check: argparse.ArgumentParser) -> None:
    from .ssp_validate import add_ssp_validate_options  # noqa: PLC0415 (this command's parser only)

    check.add_argument("fmu", metavar="IDENTIFIED.fmu", nargs="?", help="the FMU to validate (or give --ssp)")
    check.add_argument("--data", required=True, metavar="DATA.csv",
                       help="'time' and one column per FMU output (--ssp: per COMPONENT.CONNECTOR or system output)")
    check.add_argument("--inputs", metavar="INPUTS.csv",
                       help="input signals: 'time' and one column per FMU input (--ssp: per system input)")
    check.add_argument("-o", "--output", required=True, metavar="REPORT", help="folder for report.json and report.png")
    check.add_argument("--result", metavar="RESULT.json",
                       help="the identification's result: validate through the interface it used")
    check.add_argument("--interface", choices=("auto", "me", "cs"), default="auto",
                       help="me or cs (default: the one RESULT.json records, else cs where the FMU has it)")
    check.add_argument("--report", metavar="REPORT.html",
                       help="self-contained HTML report (opens offline in any browser): per output the measured and "
                       "re-simulated signals and their difference, and the RMS table")
    _fmu_process_options(check)
    add_ssp_validate_options(check)


def _demo_options(demo: argparse.ArgumentParser) -> None:
    from ..identify.optimize import OPTIMIZERS  # noqa: PLC0415 (this command's parser only)

    demo.add_argument("-o", "--output-dir", default="fmi-adjoint-demo",
                      help="folder for result JSON, plot and HTML report")
    demo.add_argument("--method", choices=OPTIMIZERS, default="least_squares")


#: The commands of :func:`build_parser` in the order of ``--help`` (``design`` and ``cache``
#: follow): name, help, description (None: none) and the function adding their options.
_COMMAND_PARSERS: tuple[tuple[str, str, str | None, Callable[[argparse.ArgumentParser], None] | None], ...] = (
    ("examples", "list the bundled example models", None, None),
    ("simulate", "simulate a model and write its outputs as CSV", None, _simulate_options),
    ("gradient", "cost and gradient of a fit to data", None, _gradient_options),
    ("identify", "identify parameters from data", None, _identify_options),
    ("plugins", "list or check the registered force elements", None, _plugins_options),
    ("export", "export a model as a standalone FMU (Co-Simulation, Model Exchange)", None, _export_options),
    ("apply", "hand identified parameters back: an FMU, an SSV file and/or an SSP archive",
     "An FMU exported by fmi-adjoint is rebuilt with the identified values compiled in (needs a C compiler; binaries "
     "for other platforms keep the old values); any other FMU gets them as start values only, which importers that "
     "ignore start values do not see: add --ssp for them. The result of `identify --ssp` goes back into its system: "
     "`apply RESULT.json --system SYSTEM.ssp -o IDENTIFIED.ssp` binds the values in the SSP's parameter bindings.",
     _apply_options),
    ("validate", "re-simulate an FMU through fmpy (or a system of FMUs, --ssp) and compare it with data", None,
     _validate_options),
    ("demo", "identify the engine-mount parameters from the bundled measurement", None, _demo_options),
)


def _check_scheme_options(args) -> None:
    """--alpha and --rho-inf in range (before any work)."""
    from ..integrate.schemes import HHT, GeneralizedAlpha  # noqa: PLC0415 (only when the options are given)

    if args.alpha is not None:
        HHT(alpha=args.alpha)
    if args.rho_inf is not None:
        GeneralizedAlpha(rho_inf=args.rho_inf)


def _check_solver_options(args) -> None:
    _check_scheme_options(args)
    check_time_span(args.t_end, args.step)


def _solver(args, settings) -> AbstractScheme | None:
    """The scheme the options ask for over the model's ``settings`` (None: the model's own)."""
    if args.integrator is None and args.alpha is None and args.rho_inf is None and args.newton is None:
        return None
    from ..integrate.schemes import scheme_from_settings  # noqa: PLC0415 (only when the options are given)

    return scheme_from_settings(settings, integrator=args.integrator, alpha=args.alpha, rho_inf=args.rho_inf,
                                newton=args.newton)


def _check_outputs(outputs: dict[str, str | None], inputs: Sequence[tuple[str, str | os.PathLike | None]]) -> None:
    """Each output (``{option: path}``) writable, no input of the command, and distinct."""
    given = [(option, path) for option, path in outputs.items() if path]
    for k, (option, path) in enumerate(given):
        check_writable(path)
        check_not_input(path, inputs, option)
        for other, earlier in given[:k]:
            if same_file(path, earlier):
                raise OutputFileError(f"{other} and {option} both name {str(path)!r}; give two different file names.")


def _data_inputs(args) -> list[tuple[str, str | None]]:
    """The files of ``--data FILE[@...]`` and ``--inputs``, and ``--fmu``, as (role, path)."""
    files = [("data file", file) for spec in args.data or []
             for file in (spec.partition("@")[0], *data_companions(spec))]
    return files + [("inputs file", getattr(args, "inputs", None)), ("FMU", getattr(args, "fmu", None)),
                    ("system", getattr(args, "ssp", None))]


def cmd_examples(args) -> int:
    from ..model_file import load_model

    names = example_names()
    width = max(map(len, names), default=0)
    for name in names:
        model = load_model(EXAMPLES_DIR / f"{name}.toml")
        print(f"{name:{width}s} {model.description}  [{model.source}]")
    return 0


def cmd_simulate(args) -> int:
    from ..integrate.inputs import ParameterValues  # noqa: PLC0415 (the engine's module, loaded by resolve_engine)

    if args.ssp is not None:
        return _simulate_system(args)
    if args.model is None:
        raise ModelError("give MODEL (a TOML file or example name) or --ssp SYSTEM.ssp.")
    for option, default in (("order", "jacobi"), ("extrapolation", "hold"), ("error_estimate", False),
                            ("inputs", None), ("fmu_timeout", None), ("verbose", False)):
        if getattr(args, option) != default:
            raise ModelError(f"--{option.replace('_', '-')} applies to --ssp; remove it or give --ssp.")
    _check_solver_options(args)
    _check_outputs({"-o": args.output}, [*model_inputs(args.model), ("input data file", args.input_data)])
    engine = resolve_engine(args.model, engine=args.engine, allow_external_tables=args.allow_external_tables)
    model = engine.compiled
    try:
        p = ParameterValues.of(parse_assignments(args.set)).vector(model)
    except ModelError as exc:
        raise model_error_in(str(model_path(args.model)), exc) from None
    settings = model.model.simulation
    t_end = settings.t_end if args.t_end is None else args.t_end
    check_time_span(t_end, settings.step if args.step is None else args.step)
    check_csv_columns(model.output_names)  # before simulating: the CSV could not be read back
    engine = _driven(engine, args, t_end)
    traj = engine.simulate(p, t_end=args.t_end, step=args.step, solver=_solver(args, settings))
    times, outputs = traj.t, traj.outputs()
    bad = np.argwhere(~np.isfinite(outputs))
    if bad.size:
        row, column = bad[0]
        raise ModelError(f"output '{model.output_names[column]}' is not finite (inf or NaN) at t = {times[row]:.9g} s; "
                         "its expression overflows there: check the expression and the parameter values.")
    columns = {name: outputs[:, k] for k, name in enumerate(model.output_names)}
    if args.output:
        write_csv(args.output, times, columns)
        print(f"wrote {len(times)} rows to {args.output}", file=sys.stderr)
    else:
        write_csv_rows(sys.stdout, times, columns)
    return 0


def _simulate_system(args) -> int:
    """``simulate --ssp``: co-simulate an SSP system of FMUs (:mod:`fmi_adjoint.ssp.master`)."""
    from ..data import read_csv  # noqa: PLC0415 (only for --ssp)
    from ..ssp.coupling import all_model_exchange, model_exchange_part, system_grid  # noqa: PLC0415 (only for --ssp)
    from ..ssp.master import (  # noqa: PLC0415
        ErrorEstimate,
        InputTable,
        check_input_span,
        estimate_error,
        held_inputs_note,
        simulate_system,
    )
    from ..ssp.monolithic import simulate_monolithic, system_interface  # noqa: PLC0415 (as above)
    from ..ssp.reading import open_system  # noqa: PLC0415 (as above)
    from .fmu_loading import run_tolerances  # noqa: PLC0415 (as above)

    if args.model is not None:
        raise ModelError(f"give MODEL or --ssp, not both (MODEL {excerpt(args.model)} and --ssp {excerpt(args.ssp)}).")
    for option in ("integrator", "alpha", "rho_inf", "newton", "jobs", "input", "input_data"):
        if getattr(args, option) is not None:
            raise ModelError(f"--{option.replace('_', '-')} applies to a model file, not to --ssp; remove it.")
    if args.engine != "auto" or args.allow_external_tables:
        raise ModelError("--engine and --allow-external-tables apply to a model file, not to --ssp; remove them.")
    check_time_span(args.t_end, args.step)
    _check_outputs({"-o": args.output}, [("system", args.ssp), ("inputs file", args.inputs)])
    values = parse_assignments(args.set)
    table = None
    if args.inputs:
        data = read_csv(args.inputs)
        table = InputTable(data.times, data.columns, data.values)
    process = _fmu_process_settings(args)
    with open_system(args.ssp) as system:
        interface = system_interface(system.structure, system.archives, args.interface)
        if interface == "CoSimulation":
            settings = master_settings(args, args.order, bool(model_exchange_part(system.structure, system.archives)))
        else:
            for option, default in (("order", "jacobi"), ("extrapolation", "hold")):
                if getattr(args, option) != default:
                    raise ModelError(f"--{option} applies to a co-simulation (--interface cs); a Model Exchange "
                                     "system is integrated as one ODE, without macro steps; remove it.")
            tolerances = run_tolerances(args.rtol, args.atol, None)
        t_end = args.t_end if args.t_end is not None else system.structure.stop_time
        if t_end is None:
            raise ModelError(f"{args.ssp} has no DefaultExperiment stopTime; give --t-end.")
        check_time_span(t_end, args.step)
        t0 = float(system.structure.start_time or 0.0)
        if table is not None:
            check_input_span(table.times, t0, t_end, args.inputs)
        elif (held := held_inputs_note(system.structure)) is not None:
            _note(held)
        options = {"values": values, "inputs": table, "timeout": process["timeout"], "log": process["log"]}
        estimate: ErrorEstimate | None = None
        if interface == "ModelExchange":
            times = None if args.step is None else system_grid(t0, t_end, args.step)
            result = simulate_monolithic(system.structure, system.archives, t_end, tolerances=tolerances,
                                         times=times, **options).result
            if args.error_estimate:
                tight = simulate_monolithic(system.structure, system.archives, t_end, tolerances=tolerances.tighter(),
                                            times=result.times, **options).result
                estimate = ErrorEstimate((), result.columns, np.max(np.abs(result.values - tight.values), axis=0),
                                         None, (result, tight))
        elif args.error_estimate:
            estimate = estimate_error(system.structure, system.archives, t_end, settings, **options)
            result = estimate.results[0]
        else:
            if args.interface == "auto" and all_model_exchange(system.structure, system.archives):
                # the default co-simulates: its coupling error is the user's to know of
                _note(f"co-simulated at H = {args.step:g} s, whose coupling error is not estimated (--error-estimate "
                      "estimates it); every component also offers Model Exchange: --interface me integrates the "
                      "system as one ODE, without coupling error.")
            result = simulate_system(system.structure, system.archives, t_end, settings, **options)
    check_csv_columns(result.columns, "column")
    columns = {name: result.values[:, k] for k, name in enumerate(result.columns)}
    if args.output:
        write_csv(args.output, result.times, columns)
        print(f"wrote {len(result.times)} rows to {args.output}", file=sys.stderr)
    else:
        write_csv_rows(sys.stdout, result.times, columns)
    if estimate is not None:
        if interface == "ModelExchange":
            factor = 1.0
            print(f"estimated integration error at rtol = {tolerances.rtol:g}, atol = {tolerances.atol:g} (the "
                  "difference to a run at tolerances 100 times tighter):", file=sys.stderr)
        else:
            factor = 1.0 / (1.0 - 2.0 ** -settings.approximation.order)
            print(f"estimated coupling error at H = {args.step:g} s ({settings.order.name}, "
                  f"{settings.approximation.name}: {factor:g} x the difference to H/2):", file=sys.stderr)
        for name, difference in zip(estimate.columns, estimate.difference):
            print(f"  {name:24s} {factor * difference:.3g}", file=sys.stderr)
    return 0


def _driven(engine, args, t_end: float):
    """``simulate``'s engine with the ``--input`` channels of ``--input-data`` driving inputs
    (:func:`~fmi_adjoint.identify.spec.driven_engine`)."""
    if (args.input is None) != (args.input_data is None):
        raise ModelError("--input INPUT=CHANNEL and --input-data DATA go together: give both, or neither.")
    if args.input is None:
        return engine
    from ..bench.preprocess import Preprocessing  # noqa: PLC0415 (only with --input: a warm start imports less)
    from ..identify.data_costs import DataFile  # noqa: PLC0415 (as above)
    from ..identify.spec import driven_engine  # noqa: PLC0415 (as above)
    from .cost_options import pairs  # noqa: PLC0415 (as above)

    inputs = pairs(args.input, "--input", "INPUT=CHANNEL", "--input z_road=RoadZ", "input")
    data = DataFile.from_path(args.input_data, preprocessing=Preprocessing(inputs=inputs), outputs=())
    return driven_engine(engine, data, t_end=t_end)


class _Setup:
    """The problem of ``gradient``/``identify`` and what must be released afterwards."""

    def __init__(self, problem, options: CostOptions, choice=None, archive=None, spec: ProblemSpec | None = None):
        self.problem, self.options, self.choice, self.archive = problem, options, choice, archive
        #: The problem as model text, data and settings (model files; None for an FMU).
        self.spec = spec
        #: Notes on the setup, printed on stderr with the command's result (identify also adds
        #: them to the result's warnings); not printed when the command ends with an error.
        self.notes: list[str] = []
        #: Warnings of the data guards, printed like the notes (identify: with its own warnings).
        self.warnings: list[str] = []
        #: What was done to the data files (RESULT.json's ``data_preprocessing``).
        self.data_preprocessing: list[dict] = []

    def add_notices(self, notices) -> None:
        """The notes and warnings of the guards (:mod:`fmi_adjoint.identify.guards`)."""
        for notice in notices:
            (self.warnings if notice.warning else self.notes).append(notice.text)

    def print_notes(self, warnings: bool = True) -> None:
        if self.choice is not None:  # an FMU problem: what its runs found (the sensitivity path given way)
            from ..fmu.problem import RunsProblem

            for text in self.problem.notes if isinstance(self.problem, RunsProblem) else ():
                _note(text)
        for text in self.notes:
            _note(text)
        for text in self.warnings if warnings else ():
            print(f"fmi-adjoint: warning: {text}", file=sys.stderr)

    #: The executor of a distributed problem (closed with the setup).
    executor: AbstractExecutor | None = None
    #: Whether the problem is a co-simulated system (``--ssp``; ``archive`` is its SystemArchive).
    system = False

    def close(self) -> None:
        self.problem.close()
        if self.archive is not None:
            self.archive.close()
        if self.executor is not None:
            self.executor.close()


def _problem(args, bounds=None) -> _Setup:
    from ..bench.preprocess import Preprocessing  # noqa: PLC0415 (the data commands' code, when they run)
    from ..identify.data_costs import Target, preprocessing_report  # noqa: PLC0415 (as above)
    from ..identify.guards import data_notices  # noqa: PLC0415 (as above)
    from .cost_options import cost_options_from_args, preprocessing_from_args  # noqa: PLC0415 (as above)

    _check_solver_options(args)
    dask_settings(args)  # a bad address is refused before any loading
    options = cost_options_from_args(
        args, parse_assignments(args.weight, "--weight"), parse_assignments(args.scale, "--scale")
    )
    names = parse_names(args.params)
    preprocessing = preprocessing_from_args(args)
    # The data preparation of model files (refused for an FMU and a system, which read plain files).
    prepared = preprocessing != Preprocessing() or any(key in spec.partition("@")[2] for spec in args.data or []
                                                       for key in ("window=", "with="))
    model_only = "--map, --time-shift, --detrend, --resample, --input, window= and with= apply to model files"
    if getattr(args, "ssp", None) is not None:
        if prepared:
            raise ModelError(f"{model_only}; for --ssp give CSV files with columns named COMPONENT.CONNECTOR (or a "
                             "system output's name), and the system's inputs with --inputs INPUTS.csv.")
        return _system_problem(args, options, names, bounds)
    for option, default in (("master_order", "jacobi"), ("extrapolation", "hold")):
        if getattr(args, option, default) != default:
            raise ModelError(f"--{option.replace('_', '-')} applies to --ssp; remove it or give --ssp.")
    if args.fmu is not None:
        if prepared:
            raise ModelError(f"{model_only}; for an FMU give one CSV file with columns named like its outputs, and "
                             "its input signals with --inputs INPUTS.csv (columns named like the FMU's inputs).")
        return _fmu_problem(args, options, names, bounds)
    if args.model is None:
        raise ModelError("give MODEL (a TOML file or example name) or --fmu MODEL.fmu.")
    for option in ("inputs", "fmu_timeout", "rtol", "atol", "max_steps", "max_events", "run_timeout"):
        if getattr(args, option) is not None:
            raise ModelError(f"--{option.replace('_', '-')} applies to --fmu; remove it or give --fmu.")
    if args.verbose:
        raise ModelError("--verbose shows the log of an FMU binary and applies to --fmu; remove it or give --fmu.")
    if args.gradient != "auto":
        raise ModelError("--gradient applies to --fmu; for a model file use --method.")
    if args.interface != "auto":
        raise ModelError("--interface applies to --fmu; remove it or give --fmu.")
    spec = problem_spec(
        args.model, args.data, parse_assignments(args.set), names, t_end=args.t_end, step=args.step,
        integrator=args.integrator, alpha=args.alpha, rho_inf=args.rho_inf, newton=args.newton, cost=options,
        bounds=bounds,
        allow_external_tables=args.allow_external_tables, engine=args.engine, preprocessing=preprocessing,
    )
    spec, problem = load_problem(spec)
    setup = _Setup(problem, options, spec=spec)
    setup.data_preprocessing, bench_notices = preprocessing_report(
        options, Target.of_model(problem.experiments[0].model), [e.data for e in spec.experiments],
        step=problem.experiments[0].step or problem.experiments[0].model.model.simulation.step)
    setup.add_notices(bench_notices)
    setup.add_notices(data_notices(Target.of_model(problem.experiments[0].model), _data_costs(args, problem),
                                   options=options))
    executor = _executor(args, _parallel_tasks(args, problem))
    if executor is not None:
        from ..identify.parallel import DistributedProblem

        setup.executor = executor
        setup.problem = DistributedProblem(problem, spec, executor)
    return setup


def _parallel_tasks(args, problem) -> int:
    """How many tasks can run at once: starts times experiments, or the finite-difference points."""
    starts = getattr(args, "starts", 1) or 1
    tasks = starts * len(problem.experiments)
    if getattr(args, "method", None) == "fd":
        tasks = max(tasks, 4 * len(problem.names))
    return tasks


def _executor(args, tasks: int):
    """The executor of the options (None: everything in this process).  An explicit
    ``--workers`` wins over ``FMI_ADJOINT_DASK``; ``--dask`` with ``--workers`` is refused."""
    from ..scale.select import choose_executor

    dask, timeout = dask_settings(args)
    # Workers start with the identification code imported (once, in the fork server).
    return choose_executor(workers=args.workers, dask=dask, tasks=tasks, preload=("fmi_adjoint.identify.parallel",),
                           dask_timeout=timeout)


def _fmu_problem(args, options, names, bounds) -> _Setup:
    from ..fmu.archive import open_fmu
    from ..identify.guards import data_notices
    from ..integrate.inputs import ParameterValues
    from ..fmu.problem import fmu_problem
    from ..fmu.loading import fmu_target
    from .fmu_loading import (MODEL_EXCHANGE_OPTIONS, check_model_exchange_options, held_inputs_note,
                              load_fmu_experiments)

    if args.model is not None:
        raise ModelError(f"give either MODEL ({args.model}) or --fmu, not both.")
    for option in ("integrator", "alpha", "rho_inf", "newton"):
        if getattr(args, option) is not None:
            raise ModelError(f"--{option.replace('_', '-')} applies to model files; an FMU brings its own solver "
                             "settings.")
    if args.workers is not None and args.workers < 1:
        raise ModelError(f"--workers {args.workers}: give at least 1.")
    if getattr(args, "starts", 1) > 1:
        raise ModelError(f"--starts {args.starts} applies to model files; an FMU problem runs one start (give other "
                         "start values with --set), or export the model and identify the model file.")
    archive = open_fmu(args.fmu)
    try:
        experiments = load_fmu_experiments(
            archive, args.data, parse_assignments(args.set), inputs_file=args.inputs, t_end=args.t_end,
            step=args.step, identified=names, cost=options,
        )
        # On a Dask cluster the finite-difference columns run there (the FMU travels as its
        # bytes); locally in the problem's own sandboxed worker processes (--workers).
        executor = _executor(args, 2) if dask_settings(args)[0] else None
    except BaseException:
        archive.close()
        raise
    try:
        start = ParameterValues.of(parse_assignments(args.set))
        problem, choice = fmu_problem(archive, experiments, names, start=start, bounds=bounds, gradient=args.gradient,
                                      interface=args.interface, tolerances=_tolerances(args), workers=args.workers,
                                      executor=executor, **_fmu_process_settings(args))
    except BaseException:
        archive.close()
        if executor is not None:
            executor.close()
        raise
    for text in choice.notes:  # said at once, as the problem is made (the library prints nothing)
        _note(text)
    setup = _Setup(problem, options, choice, archive)
    setup.executor = executor
    try:
        check_model_exchange_options(problem, experiments, _tolerances(args),
                                     [f"--{name.replace('_', '-')}" for name in MODEL_EXCHANGE_OPTIONS
                                      if getattr(args, name) is not None])
    except BaseException:
        setup.close()
        raise
    held = held_inputs_note(archive, args.inputs, experiments[0].inputs.columns if experiments[0].inputs else ())
    if held is not None:
        setup.notes.append(held)  # printed with the result (bad input ends with its one error line)
    if choice.fallback:
        setup.notes.append(choice.fallback)  # the finite differences nobody asked for, and their cost
    setup.add_notices(data_notices(fmu_target(archive), _data_costs(args, setup.problem), options=options))
    return setup


def _system_problem(args, options, names, bounds) -> _Setup:
    """``identify --ssp``: the identification problem across a co-simulated system
    (:class:`~fmi_adjoint.ssp.problem.SystemProblem`), its finite-difference runs on the
    executor (a local process pool by default, ``--workers``, or ``--dask``)."""
    from ..data import read_csv  # noqa: PLC0415 (only for --ssp)
    from ..fmu.choice import GradientChoice  # noqa: PLC0415 (as above)
    from ..identify.data_costs import DataFile  # noqa: PLC0415 (as above)
    from ..identify.guards import data_notices  # noqa: PLC0415 (as above)
    from ..integrate.inputs import ParameterValues  # noqa: PLC0415 (as above)
    from ..scale.select import choose_executor  # noqa: PLC0415 (as above)
    from ..fmu.gradients import DifferencePath  # noqa: PLC0415 (as above)
    from ..fmu.loading import default_step  # noqa: PLC0415 (as above)
    from ..ssp.master import MasterSettings, held_inputs_note  # noqa: PLC0415 (as above)
    from ..ssp.monolithic import system_interface  # noqa: PLC0415 (as above)
    from ..ssp.monolithic_problem import MonolithicSystemProblem  # noqa: PLC0415 (as above)
    from ..ssp.problem import (  # noqa: PLC0415 (as above)
        SystemProblem,
        SystemProblemBase,
        system_experiment,
        system_target,
    )
    from ..ssp.reading import open_system  # noqa: PLC0415 (as above)
    from .loading import experiment_settings  # noqa: PLC0415 (as above)

    if args.model is not None or args.fmu is not None:
        given = f"MODEL {excerpt(args.model)}" if args.model is not None else f"--fmu {excerpt(args.fmu)}"
        raise ModelError(f"give MODEL, --fmu or --ssp, one of them ({given} and --ssp {excerpt(args.ssp)}).")
    for option in ("integrator", "alpha", "rho_inf", "newton", "jobs"):
        if getattr(args, option) is not None:
            raise ModelError(f"--{option.replace('_', '-')} does not apply to --ssp (the components run their own "
                             "equations); remove it.")
    if args.engine != "auto" or args.allow_external_tables:
        raise ModelError("--engine and --allow-external-tables apply to a model file, not to --ssp; remove them.")
    settings_values = parse_assignments(args.set)
    inputs = read_csv(args.inputs) if args.inputs else None
    dask, timeout = dask_settings(args)
    process = _fmu_process_settings(args)
    system = open_system(args.ssp)
    executor: AbstractExecutor | None = None
    try:
        interface = system_interface(system.structure, system.archives, args.interface)
        settings = _system_run_settings(args, interface, system.structure, system.archives)
        target = system_target(system.structure, system.archives, interface)
        experiments = []
        for spec in args.data:
            file, values = experiment_settings(spec, settings_values, names)
            data = DataFile.from_path(file, outputs=target.output_names)
            step = args.step
            if step is None and not isinstance(settings, MasterSettings):  # the steps are the error control's
                times = data.read().times if "time" in data.header() else None
                step = default_step(None, times, args.t_end if args.t_end is not None else target.t_end)
            experiments.append(system_experiment(target, data, values, name=Path(file).stem, t_end=args.t_end,
                                                 step=step, cost=options, inputs=inputs,
                                                 inputs_file=args.inputs,
                                                 t_start=float(system.structure.start_time or 0.0)))
        problem: SystemProblemBase
        if isinstance(settings, MasterSettings):
            problem = SystemProblem(system.structure, system.archives, experiments, names, settings, bounds=bounds,
                                    start=ParameterValues.of(settings_values), **process)
            # The stencil's runs in parallel: 2 per parameter and experiment (central differences).
            tasks = 2 * len(names) * len(experiments)
        else:
            problem = MonolithicSystemProblem(system.structure, system.archives, experiments, names, settings,
                                              bounds=bounds, start=ParameterValues.of(settings_values), **process)
            if args.gradient == "fd":
                problem.path, problem.gradient_method = DifferencePath(), "fd"
            tasks = (2 * len(names) if args.gradient == "fd" else 1) * len(experiments)
        executor = choose_executor(workers=args.workers, dask=dask, tasks=tasks,
                                   preload=("fmi_adjoint.ssp.problem", "fmi_adjoint.ssp.monolithic_problem"),
                                   dask_timeout=timeout)
        problem.executor = executor
    except BaseException:
        if executor is not None:
            executor.close()
        system.close()
        raise
    if isinstance(problem, SystemProblem):
        choice = GradientChoice("fd", "Co-Simulation components: central differences of whole system runs, in "
                                "parallel", "CoSimulation", "every component of the system runs its Co-Simulation "
                                "interface under the master")
    else:
        choice = GradientChoice(problem.gradient_method,
                                "Model Exchange components: exact sensitivities of the system integrated as one ODE"
                                if problem.gradient_method == "sensitivity" else "central differences of whole "
                                "system runs (--gradient fd)", "ModelExchange",
                                "the components' Model Exchange interfaces coupled into one ODE")
    setup = _Setup(problem, options, choice, system)
    setup.executor, setup.system = executor, True
    if inputs is None and (held := held_inputs_note(system.structure)) is not None:
        setup.notes.append(held)
    setup.add_notices(data_notices(target, _data_costs(args, problem), options=options))
    return setup


def _system_run_settings(args, interface: str, structure, archives):
    """How ``identify --ssp`` runs the system: the master's settings (Co-Simulation, with the
    tolerances of its Model Exchange part if it has one) or the Model Exchange tolerances, each
    refusing the other interface's options by name."""
    from ..ssp.coupling import model_exchange_part  # noqa: PLC0415 (only for --ssp)
    from .fmu_loading import run_tolerances  # noqa: PLC0415 (as above)

    if interface == "CoSimulation":
        if args.gradient not in ("auto", "fd"):
            raise ModelError("--ssp identifies Co-Simulation components by central differences of whole system runs: "
                             "remove --gradient (or give --gradient fd).")
        return master_settings(args, args.master_order, bool(model_exchange_part(structure, archives)))
    for option, default in (("master_order", "jacobi"), ("extrapolation", "hold")):
        if getattr(args, option) != default:
            raise ModelError(f"--{option.replace('_', '-')} applies to a co-simulation (--interface cs); a Model "
                             "Exchange system is integrated as one ODE, without macro steps; remove it.")
    if args.gradient == "adjoint":
        raise ModelError("--gradient adjoint: a Model Exchange system has exact forward sensitivities (--gradient "
                         "sensitivity, the default) or central differences (--gradient fd).")
    return run_tolerances(args.rtol, args.atol, args.step, max_steps=args.max_steps, max_events=args.max_events,
                          run_timeout=args.run_timeout)


def _fmu_result_guards(setup: _Setup, result) -> list[tuple[str, bool]]:
    """The guards of an FMU or system fit's result
    (:meth:`~fmi_adjoint.fmu.problem.FmuProblem.result_guards`,
    :meth:`~fmi_adjoint.ssp.problem.SystemProblem.result_guards`): (warning, untrusted) pairs;
    none for model files and the embedded model's adjoint path."""
    from ..fmu.problem import FmuProblem

    if isinstance(setup.problem, FmuProblem):
        return setup.problem.result_guards(result.parameters, result.std_errors)
    if setup.system:
        from ..ssp.problem import SystemProblemBase  # noqa: PLC0415 (only for --ssp)

        assert isinstance(setup.problem, SystemProblemBase)  # _system_problem made it
        return setup.problem.result_guards(result.parameters, result.std_errors)
    return []


def _data_costs(args, problem) -> list[tuple[str, object]]:
    """Each ``--data`` file with its experiment's cost (for the guards)."""
    return [(spec.partition("@")[0], exp.cost) for spec, exp in zip(args.data or [], problem.experiments)]


def _tolerances(args):
    """``--rtol``/``--atol`` (``--step`` as the largest step) and the run budget (``--max-steps``,
    ``--max-events``, ``--run-timeout``) of a Model Exchange run, checked against their ranges."""
    from .fmu_loading import run_tolerances

    return run_tolerances(args.rtol, args.atol, args.step, max_steps=args.max_steps, max_events=args.max_events,
                          run_timeout=args.run_timeout)


def cmd_gradient(args) -> int:
    setup = _problem(args)
    try:
        problem = setup.problem
        method = args.method
        if setup.choice is not None:
            if method not in ("adjoint", "fd"):
                raise ModelError(f"--method {method} applies to model files; with --fmu choose --gradient.")
            method = "fd" if method == "fd" else problem.gradient_method
        ev = problem.evaluate(problem.start, method)
        result = {
            "cost": ev.J,
            "gradient": dict(zip(problem.names, map(float, ev.gradient))),
            "method": ev.method,
            "forward_seconds": ev.forward_seconds,
            "gradient_seconds": ev.gradient_seconds,
            "cost_function": args.cost,
        }
        result.update(problem.solver_info())
        if setup.choice is not None:
            result["gradient_path"] = _gradient_path(setup)
        setup.print_notes()
    finally:
        setup.close()
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"cost J = {ev.J:.12e}   ({ev.method}; forward {ev.forward_seconds:.3f} s, "
              f"gradient {ev.gradient_seconds:.3f} s)")
        for name, value in result["gradient"].items():
            print(f"  dJ/d{name:12s} = {value: .12e}")
    return 0


def _gradient_path(setup: _Setup) -> dict:
    return {**setup.choice.to_json(), **setup.problem.gradient_details()}


def _note(text: str) -> None:
    """One note line on stderr (also the progress of a long step, hence flushed)."""
    print(f"fmi-adjoint: note: {text}", file=sys.stderr, flush=True)


def cmd_identify(args) -> int:
    from ..identify.guards import sensitivity_notices
    from ..identify.result_file import result_text, write_result

    _check_identify_options(args)
    ckpt = args.checkpoint or args.resume
    _check_outputs({"-o": args.output, "--plot": args.plot, "--report": args.report, "--checkpoint": args.checkpoint},
                   [*(model_inputs(args.model) if args.model else []), *_data_inputs(args),
                    ("checkpoint", args.resume), ("checkpoint", args.resume_reevaluate)])
    setup = _problem(args, parse_bounds(args.bounds))
    log = None
    try:
        problem = setup.problem
        method, strategy_name = _identify_method(args, problem)
        # The guard of issue 26, part 8: parameters the compared outputs do not see, said before the fit.
        unseen = sensitivity_notices(problem)
        for notice in unseen:
            print(f"fmi-adjoint: warning: {notice.text}", file=sys.stderr)
        outcome, log = _run_identification(args, setup, method, strategy_name, ckpt)
        warnings, untrusted = _fit_warnings(args, setup, outcome)
        setup.print_notes(warnings=False)
        for text in warnings:
            print(f"fmi-adjoint: warning: {text}", file=sys.stderr)
        payload = _identification_payload(args, setup, outcome, method, strategy_name, ckpt,
                                          [*setup.notes, *(n.text for n in unseen), *warnings], untrusted)
        text = result_text(payload)
        table = _parameter_table(problem, outcome.best)
        written = _write_figures(args, problem, outcome, payload)
    finally:
        if log is not None:
            log.close()
        setup.close()
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    # The parameter table on stdout, unless RESULT.json goes there (`identify > RESULT.json`).
    print(table, file=sys.stderr if args.json or not args.output else sys.stdout)
    if args.output:
        try:
            write_result(args.output, text)
        except BaseException:
            _remove(written)  # no figure or report of a run whose RESULT.json could not be written
            raise
        print(f"wrote {args.output}", file=sys.stderr)
    if args.json or not args.output:
        print(text)
    return 0 if payload["success"] else 1


def _check_identify_options(args) -> None:
    """The identify options that contradict each other or themselves, before any loading."""
    if args.max_iter < 1:
        raise ModelError(f"--max-iter {args.max_iter}: give at least 1 iteration (default 200).")
    if args.starts < 1:
        raise ModelError(f"--starts {args.starts}: give at least 1 start (default 1).")
    if args.checkpoint and args.resume:
        raise ModelError("give either --checkpoint (a new run) or --resume (continue one), not both.")
    if args.resume and args.resume_reevaluate:
        raise ModelError("give either --resume (your own checkpoint) or --resume-reevaluate (one you do not trust), "
                         "not both.")


def _identify_method(args, problem) -> tuple[str, str]:
    """The optimizer and the strategy's name for ``problem``, checked against what it offers."""
    from ..identify.optimize import default_optimizer
    from ..identify.problem import IdentificationProblem

    if args.method == "least_squares" and not problem.has_residuals:
        raise ModelError(
            f"--method least_squares needs residuals, which --cost {args.cost} does not have; use --method lbfgsb."
        )
    method = default_optimizer(problem) if args.method == "auto" else args.method
    if args.continuation and args.strategy not in ("auto", "experiments"):
        raise ModelError(f"--continuation is --strategy experiments; remove it or --strategy {args.strategy}.")
    strategy_name = "experiments" if args.continuation else args.strategy
    option = "--continuation" if args.continuation else "--strategy experiments"
    if strategy_name == "experiments" and not isinstance(problem, IdentificationProblem):
        raise ModelError(f"{option} applies to model files (and FMUs exported by fmi-adjoint); remove it.")
    if strategy_name == "experiments" and len(problem.experiments) < 2:
        raise ModelError(f"{option} fits each experiment alone first and needs two or more --data files; "
                         "remove it or add --data.")
    return method, strategy_name


def _run_identification(args, setup: _Setup, method: str, strategy_name: str, ckpt: str | None):
    """The starts run (with the checkpoint opened, replayed or re-evaluated): the outcome and
    the open checkpoint log (the caller closes it)."""
    from ..identify.multistart import (
        SampledStrategies,
        checkpoint_header,
        open_checkpoint,
        open_untrusted,
        run_starts,
        sobol_starts,
    )
    from ..identify.strategies import strategy_named

    problem = setup.problem
    plan = SampledStrategies(strategy_named(strategy_name))
    starts = plan.starts(sobol_starts(problem, args.starts, args.seed, args.scaling), problem)
    replay: list = []
    log = None
    if args.resume_reevaluate:
        replay = open_untrusted(args.resume_reevaluate, _checkpoint_header(args, setup, checkpoint_header),
                                note=_note)
    if ckpt:
        log, own = open_checkpoint(ckpt, _checkpoint_header(args, setup, checkpoint_header),
                                   resume=bool(args.resume), note=_note)
        replay = replay or own
    try:
        outcome = run_starts(problem, starts, method, scaling=args.scaling, max_iterations=args.max_iter,
                             seed=args.seed, progress=sys.stderr, checkpoint=log, replay=replay,
                             reevaluate=bool(args.resume_reevaluate))
    except BaseException as exc:
        if log is not None:
            log.close()
        if isinstance(exc, KeyboardInterrupt) and ckpt:
            print(f"fmi-adjoint: note: {ckpt} holds the run so far; continue it with the same command, "
                  f"--resume {ckpt} in place of --checkpoint {ckpt}.", file=sys.stderr)
        raise
    return outcome, log


def _fit_warnings(args, setup: _Setup, outcome) -> tuple[list[str], bool]:
    """The guards of the fit (issue 26, part 8; issue 32) and the run's own warnings, as texts,
    and whether the result cannot be trusted."""
    from ..identify.guards import (bound_notices, cost_notices, lag_notices, movement_notices,
                                   noise_resolved)
    from ..identify.strategies import stage_notices

    problem, result = setup.problem, outcome.best
    best = outcome.starts[outcome.best_start]
    # An FMU problem runs one start: its warnings advise other start values, not --starts.
    starts_available = setup.choice is None or setup.system
    # A parameter on a bound, a cost far above the noise floor, a channel best matched with a
    # time lag, a fit that did not move.
    bounds = bound_notices(problem, result, starts_available=starts_available)
    fitted = (*bounds, *cost_notices(result, _noise_floor(problem), noise_resolved=noise_resolved(problem),
                                     starts_available=starts_available),
              *lag_notices(problem, result))
    unmoved = movement_notices(problem, result)
    warnings = [*setup.warnings, *(n.text for n in bounds), *outcome.warnings(),
                *(n.text for n in fitted[len(bounds):]), *(n.text for n in unmoved)]
    warnings += stage_notices(best.stages)  # a stage that lost the continuation (strategies.run_stages)
    fmu_guards = _fmu_result_guards(setup, result)  # FMU only: a cost not smooth there, held inputs
    warnings += [text for text, _ in fmu_guards]
    untrusted = (((result.unidentifiable or any(n.untrusted for n in unmoved)) and not args.allow_unidentifiable)
                 or any(flag for _, flag in fmu_guards) or any(n.untrusted for n in fitted))
    return warnings, untrusted


def _identification_payload(args, setup: _Setup, outcome, method: str, strategy_name: str, ckpt: str | None,
                            warnings: list[str], untrusted: bool) -> dict:
    """RESULT.json's content (:func:`~fmi_adjoint.identify.result_file.identification_record`)."""
    from ..identify.result_file import RunContext, identification_record

    gradient_method: str | dict = (_gradient_path(setup) if setup.choice is not None
                                   else "adjoint" if method == "lbfgsb" else "forward sensitivities")
    context = RunContext(
        strategy=strategy_name, model=args.model if args.fmu is None else None,
        settings=parse_assignments(args.set), data=args.data, cost_function=setup.options.describe(),
        gradient_method=gradient_method,
        executor=setup.executor.describe() if setup.executor is not None else {"executor": "serial", "workers": 1},
        fmu=args.fmu, fmu_token=setup.archive.description.guid if args.fmu is not None else None,
        inputs=args.inputs if args.fmu is not None else None,
        interface=setup.choice.interface if setup.choice is not None else None, checkpoint=ckpt,
        data_preprocessing=setup.data_preprocessing)
    return identification_record(outcome, setup.problem, context, warnings=warnings, untrusted=untrusted)


def _parameter_table(problem, result) -> str:
    from ..identify.table import parameter_table

    return parameter_table(result.names, result.initial, result.parameters, result.std_errors,
                           active_bounds=result.active_bounds, units=problem.parameter_units())


def _write_figures(args, problem, outcome, payload: dict) -> list[str]:
    """The figure (--plot) and the report (--report), before the result file; a failure of any of
    them removes the files written before it (no half output)."""
    from ..identify.strategies import stage_starts

    result, best = outcome.best, outcome.starts[outcome.best_start]
    written: list[str] = []
    try:
        if args.plot or args.report:
            from ..report.signals import compare_fit_or_identified

            comparisons, initial_shown = compare_fit_or_identified(problem, result.initial, result.parameters)
        if args.plot:
            from .plotting import plot_comparisons

            boundaries = stage_starts([s.iterations for s in best.stages], result.method)
            plot_comparisons(args.plot, comparisons, result.cost_history, initial_shown=initial_shown,
                             stages=list(zip(boundaries, (s.stage for s in best.stages))))
            written.append(args.plot)
        if args.report:
            from ..report.identification import write_identification_report

            write_identification_report(args.report, problem, payload, comparisons=comparisons,
                                        initial_shown=initial_shown)
            written.append(args.report)
    except BaseException:
        _remove(written)
        raise
    return written

def _remove(paths: list[str]) -> None:
    """Remove the files this run wrote (after a later output failed)."""
    for path in paths:
        Path(path).unlink(missing_ok=True)


def _checkpoint_header(args, setup: _Setup, header) -> dict:
    """What a checkpoint must match to be resumed (see
    :func:`~fmi_adjoint.identify.multistart.checkpoint_header`)."""
    from ..identify.multistart import files_digest

    options = {**vars(args), "data_settings": [spec.partition("@")[2] for spec in args.data or []]}
    if setup.spec is not None:
        content = setup.spec.content_digest()
    else:
        content = files_digest([path for _, path in _data_inputs(args) if path])
    return header(content, options)


def _noise_floor(problem) -> float | None:
    return problem.noise_floor()


def cmd_plugins(args) -> int:
    import dataclasses
    from typing import Any

    from ..forces import default_registry, element_type
    from ..mbs.registry import default_registry as component_registry

    registry, components = default_registry(), component_registry()
    if args.plugins_command == "list":
        for name in registry.names():
            cls = registry.get(name)
            print(f"{name}  ({registry.distribution(name)}; {cls.__module__}.{cls.__qualname__})")
            for decl in cls.parameters:
                bounds = f"[{decl.bounds[0]:g}, {decl.bounds[1]:g}]"
                default = "list" if decl.vector else f"{decl.default:g}"
                print(f"    {decl.name:20s} {default:>10s} {decl.unit:10s} {bounds:22s} {decl.description}")
        for name in components.names():
            comp: Any = components.get(name)
            print(f"{name}  ({components.distribution(name)}; {comp.__module__}.{comp.__qualname__}; "
                  f"component of [[{comp.section}]])")
            print(f"    keys: {', '.join(f.name for f in dataclasses.fields(comp))}")
        return 0
    from ..componentcheck import check_component
    from ..elementcheck import check_element

    if args.all == bool(args.name):
        raise ModelError("plugins check: give either an element NAME or --all.")
    names = registry.names() + components.names() if args.all else [args.name]
    failed = []
    for name in names:
        report: Any
        if name in registry.names() or name not in components.names():
            if name not in registry.names() and components.names():
                raise ModelError(f"plugins check: unknown plugin {name!r}. Force elements: "
                                 f"{', '.join(registry.names())}; components: {', '.join(components.names())}.")
            report = check_element(element_type(name, "plugins check", registry), seed=args.seed)
        else:
            report = check_component(components.get(name))
        print(f"{name}: {'ok' if report.passed else 'FAILED'}")
        for result in report.results:
            print(f"    {'ok  ' if result.passed else 'FAIL'} {result.name:13s} {result.detail}")
        if not report.passed:
            failed.append(name)
    if failed:
        print(f"fmi-adjoint: error: plugin check failed for {', '.join(failed)}; see the lines marked FAIL.",
              file=sys.stderr)
        return 1
    return 0


def cmd_export(args) -> int:
    from ..export import export_fmu
    from ..model_file import load_model

    check_time_span(None, args.step)
    _check_scheme_options(args)
    _check_outputs({"-o": args.output}, model_inputs(args.model))
    path = model_path(args.model)
    settings = load_model(path, allow_external_tables=args.allow_external_tables).simulation
    notes: list[str] = []
    path = export_fmu(path, args.output, fmi_version=args.fmi, values=parse_assignments(args.set),
                      step=args.step, solver=_solver(args, settings),
                      allow_external_tables=args.allow_external_tables, interface=args.interface, notes=notes)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    kinds = {"cs": "Co-Simulation", "me": "Model Exchange", "both": "Co-Simulation and Model Exchange"}
    print(f"wrote {path} (FMI {args.fmi}.0 {kinds['cs' if notes else args.interface]})", file=sys.stderr)
    return 0


def cmd_apply(args) -> int:
    from ..fmu.archive import open_fmu
    from ..fmu.apply import hand_back
    from ..fmu.result_file import check_result_fmu, read_result_interface, read_result_parameters
    from ..ssp.handback import result_subject

    if args.system is not None:
        return _apply_system(args)
    if args.fmu is None:
        raise ModelError("apply: give --fmu MODEL.fmu (the FMU identified) or --system SYSTEM.ssp (the system "
                         "`identify --ssp` ran on).")
    if not (args.output or args.ssv or args.ssp):
        raise ModelError("apply: give -o IDENTIFIED.fmu, --ssv OUT.ssv and/or --ssp OUT.ssp.")
    _check_outputs({"-o": args.output, "--ssv": args.ssv, "--ssp": args.ssp},
                   [("RESULT.json", args.result), ("FMU", args.fmu)])
    kind, subject = result_subject(args.result)
    if kind == "system":
        raise ModelError(f"{args.result} is the result of `identify --ssp` on the system {excerpt(subject)}, whose "
                         f"parameters are COMPONENT.NAME: hand it back with `fmi-adjoint apply {args.result} --system "
                         f"{excerpt(subject)} -o IDENTIFIED.ssp`.")
    values = read_result_parameters(args.result)
    interface = read_result_interface(args.result)
    with open_fmu(args.fmu) as archive:
        other = check_result_fmu(args.result, archive)
        if other is not None:
            _note(other)
        report = hand_back(archive, values, fmu=args.output, ssv=args.ssv, ssp=args.ssp, name=Path(args.result).stem,
                           interface=interface)
    for text in report.warnings:
        print(f"fmi-adjoint: warning: {text}", file=sys.stderr)
    for text in report.notes:
        _note(text)
    names = ", ".join(values)
    if report.fmu:
        how = "compiled in and as start values" if report.rebuilt else "as start values"
        print(f"wrote {report.fmu} ({names} {how})", file=sys.stderr)
    if report.ssv:
        print(f"wrote {report.ssv} ({len(values)} parameters)", file=sys.stderr)
    if report.ssp:
        print(f"wrote {report.ssp} (SSP 1.0: the FMU and a parameter binding of {len(values)} parameters)",
              file=sys.stderr)
    return 0


def _apply_system(args) -> int:
    """``apply RESULT.json --system SYSTEM.ssp -o IDENTIFIED.ssp``: the identified values of an
    ``identify --ssp`` bound in a copy of the system (:func:`~fmi_adjoint.ssp.handback.hand_back_system`)."""
    from ..fmu.result_file import read_result_parameters
    from ..ssp.handback import check_result_system, hand_back_system, result_subject
    from ..ssp.reading import open_system

    if args.fmu is not None:
        raise ModelError(f"give --fmu or --system, not both (--fmu {excerpt(args.fmu)} and --system "
                         f"{excerpt(args.system)}).")
    if args.ssv or args.ssp:
        raise ModelError("--ssv and --ssp write the hand-back of one FMU; with --system, -o IDENTIFIED.ssp is the "
                         "system with the values in its parameter bindings: remove them.")
    if not args.output:
        raise ModelError("apply --system: give -o IDENTIFIED.ssp, the system with the identified values bound.")
    if Path(args.output).suffix.lower() != ".ssp":
        raise ModelError(f"apply --system writes an .ssp archive (the SSD, its FMUs and parameter files; also for an "
                         f".ssd), not -o {excerpt(args.output)}: give -o IDENTIFIED.ssp.")
    _check_outputs({"-o": args.output}, [("RESULT.json", args.result), ("system", args.system)])
    kind, subject = result_subject(args.result)
    if kind == "fmu":
        raise ModelError(f"{args.result} is the result of an identification of the FMU {excerpt(subject)}, not of a "
                         f"system: hand it back with `fmi-adjoint apply {args.result} --fmu {excerpt(subject)} -o "
                         "IDENTIFIED.fmu`.")
    if kind == "model":
        raise ModelError(f"{args.result} is the result of a model file's identification, not of a system (`identify "
                         "--ssp`): export the model with the values instead (`fmi-adjoint export MODEL --set "
                         "NAME=VALUE -o OUT.fmu`).")
    values = read_result_parameters(args.result)
    with open_system(args.system) as system:
        other = check_result_system(args.result, system)
        if other is not None:
            _note(other)
        report = hand_back_system(system, args.system, values, args.output, name=Path(args.result).stem)
    for text in report.notes:
        _note(text)
    files = ", ".join(dict.fromkeys(file for _, file in report.added))
    parts = [f"{', '.join(n for n, _ in report.updated)} updated in their bindings" if report.updated else "",
             f"{', '.join(n for n, _ in report.added)} bound by new bindings to {files}" if report.added else ""]
    print(f"wrote {report.path} (SSP 1.0: {'; '.join(p for p in parts if p)})", file=sys.stderr)
    return 0


def cmd_validate(args) -> int:
    from ..data import read_csv
    from ..fmu.archive import open_fmu
    from ..fmu.result_file import check_result_fmu
    from ..fmu.validation import resimulate_against_data
    from .ssp_validate import check_no_system_options, validate_system
    from .validation_files import check_html_report, check_report_folder, write_reports

    if args.ssp is not None:
        return validate_system(args)
    if args.fmu is None:
        raise ModelError("give IDENTIFIED.fmu or --ssp SYSTEM.ssp.")
    check_no_system_options(args)
    settings = _fmu_process_settings(args)
    files = [("data file", args.data), ("inputs file", args.inputs), ("FMU", args.fmu)]
    check_report_folder(args.output, files)
    if args.report:
        check_html_report(args.report, args.output, [*files, ("result file", args.result)])
    data = read_csv(args.data, events=True)
    inputs = read_csv(args.inputs) if args.inputs else None
    interface = _validate_interface(args)
    notes: list[str] = []  # printed, and in the HTML report's summary
    with open_fmu(args.fmu) as archive:
        if args.result:
            # As `apply`: a RESULT.json of another FMU (another guid / instantiationToken) is refused.
            other = check_result_fmu(args.result, archive)
            if other is not None:
                notes.append(other)
            other_values = _note_other_values(args, archive)
            if other_values is not None:
                notes.append(other_values)
            for text in notes:
                _note(text)
        validation = resimulate_against_data(archive, data, inputs, interface=interface, **settings)
    for text in validation.notes:
        _note(text)
    write_reports(validation, args.output, args.report, [*notes, *validation.notes])
    return 0


def _note_other_values(args, archive) -> str | None:
    """The note that the FMU validated does not carry RESULT.json's values (``--result``
    chooses the interface only; the values are the FMU's own: it is validated as it is), or
    None where they agree."""
    from ..fmu.result_file import differing_start_values, read_result_parameters

    differing = differing_start_values(archive, read_result_parameters(args.result))
    if not differing:
        return None
    names = ", ".join(differing[:5]) + (f" and {len(differing) - 5} more" if len(differing) > 5 else "")
    return (f"{args.fmu} does not carry the values of {args.result} ({names} differ; it is validated with its own "
            f"start values): to validate the identified model, validate the FMU written by "
            f"`fmi-adjoint apply {args.result} --fmu {args.fmu} -o IDENTIFIED.fmu`.")


def _validate_interface(args) -> str | None:
    """The interface ``validate`` runs: ``--interface``, else the one RESULT.json recorded
    (``--result``), else Co-Simulation where the FMU has it."""
    from ..fmu.result_file import read_result_interface

    chosen = {"me": "ModelExchange", "cs": "CoSimulation"}.get(args.interface)
    recorded = read_result_interface(args.result) if args.result else None
    if chosen and recorded and chosen != recorded:
        raise ModelError(f"--interface {args.interface} differs from the {recorded} interface {args.result} was "
                         "identified with; drop --interface to validate as identified.")
    return chosen or recorded


def cmd_design(args) -> int:
    from .design_command import cmd_design as run

    return run(args)


def cmd_demo(args) -> int:
    from .demo import run_demo

    return run_demo(args.output_dir, args.method)


_COMMANDS = {
    "examples": cmd_examples,
    "simulate": cmd_simulate,
    "gradient": cmd_gradient,
    "identify": cmd_identify,
    "demo": cmd_demo,
    "plugins": cmd_plugins,
    "export": cmd_export,
    "apply": cmd_apply,
    "validate": cmd_validate,
    "cache": cmd_cache,
    "design": cmd_design,
}


def _one_line(text: str) -> str:
    """A message as one printable line (messages may quote values with line breaks)."""
    return " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())


def _error(text: str) -> int:
    print(f"fmi-adjoint: error: {_one_line(text)}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 not converged, 2 error,
    130 interrupted, 143 terminated).

    This is the one place where failures become messages: every project error and the
    builtin failures an input can provoke end as one ``fmi-adjoint: error: ...`` line.
    """
    from .signals import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated

    try:
        line = sys.argv[1:] if argv is None else list(argv)
        # The options of the command on the line only (the first argument; the top-level parser
        # has no other options than --help): see build_parser.
        args = build_parser(line[0] if line and line[0] in _COMMANDS else None).parse_args(line)
        with compiler_jobs(getattr(args, "jobs", None)):  # only the commands that build have --jobs
            return _COMMANDS[args.command](args)
    except FmiAdjointError as exc:
        return _error(str(exc))
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, Terminated)
        print(f"fmi-adjoint: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of stdout went away (e.g. `| head`); stop quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except MemoryError:
        return _error("out of memory; the input asks for more memory than this machine has (a long run, a fine "
                      "step, a large data file or a wide frequency band): reduce it.")
    except RecursionError:
        return _error("the input is nested too deeply to be processed; simplify it.")
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        return _error(f"{exc.strerror or exc}{where}; check the path, free disk space, or set TMPDIR to a "
                      "writable folder with space.")
    except Exception as exc:  # noqa: BLE001 -- the last line of defence: never a traceback
        if os.environ.get("FMI_ADJOINT_DEBUG"):
            raise
        return _error(f"internal error ({type(exc).__name__}: {excerpt(str(exc), 200)}); this is a bug in "
                      "fmi-adjoint: please report it with the command line (FMI_ADJOINT_DEBUG=1 shows the traceback).")
