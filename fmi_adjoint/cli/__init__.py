"""Command-line interface (``fmi-adjoint`` and ``python -m fmi_adjoint``)."""

import sys

from .main import build_parser
from .main import main as _main

__all__ = ["build_parser", "main"]


def main() -> None:
    """Console-script entry point."""
    sys.exit(_main())
