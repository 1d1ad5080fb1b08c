"""How an interrupted run ends: the exit codes and the exception SIGTERM raises.

Shared by the console-script entry point (:func:`fmi_adjoint.cli.main`, which installs the
handler before the heavy imports) and the command dispatcher (:func:`fmi_adjoint.cli.main.main`).
"""

from __future__ import annotations

__all__ = ["EXIT_INTERRUPTED", "EXIT_TERMINATED", "Terminated", "terminate"]

#: Exit codes of an interrupted run (128 + signal number, as shells report them).
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that every cleanup path for an interruption runs."""


def terminate(signum, frame) -> None:
    """The SIGTERM handler."""
    raise Terminated
