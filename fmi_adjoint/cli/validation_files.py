"""What every ``validate`` writes, checked before and written after the work: the ``-o`` folder
(``report.json``, ``report.png``) and the ``--report`` HTML page, for an FMU and for a system
of FMUs (``validate --ssp``, :mod:`.ssp_validate`) alike.

The checks run before anything is simulated, so that a refusal leaves nothing behind; the
writing puts the HTML page first (as ``identify`` writes its report before RESULT.json) and
removes it again if ``report.json`` or ``report.png`` cannot be written.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ..errors import OutputFileError
from ..files import check_not_input, check_writable, same_file
from ..fmu.validation import Validation

__all__ = ["REPORT_FILES", "check_html_report", "check_report_folder", "write_reports"]

#: The files ``validate -o FOLDER`` writes into the folder.
REPORT_FILES = ("report.json", "report.png")


def check_report_folder(folder: str, inputs: Sequence[tuple[str, str | os.PathLike | None]]) -> None:
    """``validate -o``: a folder (existing or to be made) that is no input (``inputs``: role
    and path of each input file) and whose report files would overwrite no input."""
    path = Path(folder)
    if os.path.lexists(path) and not path.is_dir():
        raise OutputFileError(f"-o {folder!r}: it exists and is not a folder; give a folder for report.json and "
                              "report.png.")
    check_not_input(path, inputs)
    for name in REPORT_FILES:
        check_not_input(path / name, inputs, f"-o {folder!r}: the report file")
        if path.is_dir():
            check_writable(path / name)


def check_html_report(report: str, folder: str, inputs: Sequence[tuple[str, str | os.PathLike | None]]) -> None:
    """``validate --report``: writable, no input of the command, and neither report.json nor
    report.png of the ``-o`` folder."""
    check_writable(report)
    check_not_input(report, inputs, "--report")
    for name in REPORT_FILES:
        if same_file(report, Path(folder) / name):
            raise OutputFileError(f"--report {report!r} is the {name} that -o {folder!r} writes; give another file "
                                  "name (REPORT.html).")


def write_reports(validation: Validation, folder: str, report: str | None, notes: Sequence[str] = ()) -> None:
    """Write the HTML page ``report`` (if given; ``notes`` shown in its summary), then
    ``report.json`` and ``report.png`` into ``folder``, and print each output's errors (stdout)
    and the files written (stderr)."""
    from ..fmu.validation import write_validation  # noqa: PLC0415 (looked up at the call, as cmd_validate did)

    if report:
        from ..report.validation import validation_report  # noqa: PLC0415 (only with --report)

        validation_report(validation, notes=notes).write(report)
    try:
        write_validation(validation, folder)
    except BaseException:
        if report:
            Path(report).unlink(missing_ok=True)
        raise
    for name, stats in validation.summary["outputs"].items():
        rel = stats["relative_rms_error"]
        print(f"{name:16s} RMS error {stats['rms_error']:.6g}   max {stats['max_abs_error']:.6g}"
              + (f"   ({100 * rel:.3g} % of the signal RMS)" if rel is not None else ""))
    print(f"wrote {Path(folder) / 'report.json'} and {Path(folder) / 'report.png'}", file=sys.stderr)
    if report:
        print(f"wrote {report}", file=sys.stderr)
