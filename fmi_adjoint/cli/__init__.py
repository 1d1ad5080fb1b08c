"""Command-line interface (``fmi-adjoint`` and ``python -m fmi_adjoint``).

This module imports nothing heavy: :func:`main` installs the signal handling first and
only then imports the commands (numpy, scipy, sympy), so Ctrl-C or SIGTERM at any moment,
the imports included, ends the tool with one line and exit code 130 (143 for SIGTERM).
"""

from __future__ import annotations

import signal
import sys

from .signals import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated, terminate

__all__ = ["build_parser", "main"]


def build_parser():
    """The argument parser of ``fmi-adjoint`` (see :mod:`fmi_adjoint.cli.main`)."""
    from .main import build_parser as build

    return build()


def main() -> None:
    """Console-script entry point."""
    signal.signal(signal.SIGTERM, terminate)
    try:
        from .main import main as run

        code = run()
    except KeyboardInterrupt as exc:  # during the imports; main() handles it afterwards
        terminated = isinstance(exc, Terminated)
        print(f"fmi-adjoint: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        code = EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    sys.exit(code)
