"""``fmi-adjoint validate --ssp SYSTEM.ssp --step H --data DATA.csv -o FOLDER`` (issue 28, part 4):
re-simulate a system of FMUs (co-simulated by the master, or integrated as one Model Exchange
ODE) and compare it with measured data, writing what ``validate`` writes for one FMU
(``report.json``, ``report.png`` and, with ``--report``, the HTML page; :mod:`.validation_files`).

The data's columns are named like those of ``simulate --ssp``: ``COMPONENT.CONNECTOR`` of a
component output, or a system output connector's own name; the library part is
:func:`fmi_adjoint.ssp.validation.resimulate_system`.  Every refusal (an option of the FMU's
validation, a data column no component outputs, units of another dimension, data before the
system's start time) is one error line, raised before any FMU runs and before anything is
written.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import ModelError
from ..text import excerpt
from .loading import check_time_span, parse_assignments
from .ssp_options import add_master_options, master_settings
from .validation_files import check_html_report, check_report_folder, write_reports

__all__ = ["add_ssp_validate_options", "check_no_system_options", "validate_system"]

#: The options of a system's validation that an FMU's validation does not take, with their defaults.
SYSTEM_OPTIONS = (("step", None), ("set", None), ("order", "jacobi"), ("extrapolation", "hold"), ("rtol", None),
                  ("atol", None))


def add_ssp_validate_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``validate --ssp`` beyond those of an FMU's validation (``--data``,
    ``--inputs``, ``-o``, ``--report``, ``--fmu-timeout``, ``--verbose`` serve both)."""
    system = parser.add_argument_group("a system of FMUs (SSP 1.0) instead of IDENTIFIED.fmu")
    system.add_argument("--ssp", metavar="SYSTEM.ssp",
                        help="an .ssp archive or an .ssd file of FMUs, run from its start time to the data's last "
                        "sample (co-simulated, or with --interface me integrated as one Model Exchange ODE); the "
                        "data's columns are COMPONENT.CONNECTOR of component outputs or the system's outputs, "
                        "--inputs' columns the system's inputs")
    system.add_argument("--step", type=float, metavar="H", help="the macro step of the co-simulation [s]")
    system.add_argument("--rtol", type=float, help="--interface me: relative error tolerance of the adaptive "
                        "Radau IIA integration (default 1e-8)")
    system.add_argument("--atol", type=float, help="--interface me: absolute error tolerance, times each state's "
                        "nominal value (default 1e-10)")
    system.add_argument("--set", action="append", metavar="COMPONENT.NAME=VALUE",
                        help="a component's parameter value (repeatable), after the SSP's parameter bindings")
    add_master_options(system)


def check_no_system_options(args) -> None:
    """``validate IDENTIFIED.fmu``: ModelError if an option of ``--ssp`` is given without it."""
    for option, default in SYSTEM_OPTIONS:
        if getattr(args, option, default) != default:
            raise ModelError(f"--{option} applies to --ssp SYSTEM.ssp; remove it or give --ssp.")


def _check_options(args) -> None:
    """``validate --ssp``: no FMU and none of the FMU's options; a positive macro step (if given:
    :func:`.ssp_options.master_settings` requires it)."""
    if args.fmu is not None:
        raise ModelError(f"give IDENTIFIED.fmu or --ssp, not both (IDENTIFIED.fmu {excerpt(args.fmu)} and --ssp "
                         f"{excerpt(args.ssp)}).")
    if args.result is not None:
        raise ModelError("--result applies to an FMU's validation, not to --ssp; remove it.")
    check_time_span(None, args.step)


def validate_system(args) -> int:
    """``validate --ssp`` (module docstring); the exit code (0)."""
    from ..data import read_csv  # noqa: PLC0415 (as every command: what it needs, when it runs)
    from ..fmu.session import DEFAULT_TIMEOUT, check_timeout  # noqa: PLC0415 (as above)
    from ..ssp.monolithic import system_interface  # noqa: PLC0415 (as above)
    from ..ssp.reading import open_system  # noqa: PLC0415 (as above)
    from ..ssp.validation import resimulate_system  # noqa: PLC0415 (as above)

    _check_options(args)
    inputs = [("data file", args.data), ("inputs file", args.inputs), ("system", args.ssp)]
    check_report_folder(args.output, inputs)
    if args.report:
        check_html_report(args.report, args.output, inputs)
    values = parse_assignments(args.set)
    timeout = DEFAULT_TIMEOUT if args.fmu_timeout is None else check_timeout(args.fmu_timeout)
    data = read_csv(args.data)
    table = read_csv(args.inputs) if args.inputs else None
    with open_system(args.ssp) as system:
        interface = system_interface(system.structure, system.archives, args.interface)
        settings = _run_settings(args, interface, system.structure, system.archives)
        validation, notes = resimulate_system(system.structure, system.archives, data, settings, values=values,
                                              inputs=table, timeout=timeout,
                                              log=sys.stderr if args.verbose else None)
    for text in notes:
        print(f"fmi-adjoint: note: {text}", file=sys.stderr, flush=True)
    write_reports(validation, args.output, args.report, notes)
    return 0


def _run_settings(args, interface: str, structure, archives):
    """The master's settings (Co-Simulation: ``--step`` required) or the Model Exchange tolerances,
    each refusing the other interface's options by name."""
    from ..ssp.coupling import model_exchange_part  # noqa: PLC0415 (only here)
    from .fmu_loading import run_tolerances  # noqa: PLC0415 (as above)

    if interface == "CoSimulation":
        return master_settings(args, args.order, bool(model_exchange_part(structure, archives)))
    for option, default in (("step", None), ("order", "jacobi"), ("extrapolation", "hold")):
        if getattr(args, option) != default:
            raise ModelError(f"--{option} applies to a co-simulation (--interface cs); a Model Exchange system is "
                             "integrated as one ODE to every sample time; remove it.")
    return run_tolerances(args.rtol, args.atol, None)
