"""The command line with captured output, for tests and their module-scoped fixtures (not a
test module itself)."""

from __future__ import annotations

import contextlib
import io

from fmi_adjoint.cli.main import main

__all__ = ["cli", "error_line"]


def cli(argv) -> tuple[int, str, str]:
    """``main(argv)`` with captured stdout and stderr: (exit code, stdout, stderr); never a
    traceback on stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    assert "Traceback" not in err.getvalue()
    return code, out.getvalue(), err.getvalue()


def error_line(err: str) -> str:
    """The one error line of a refusal (exactly one ``fmi-adjoint: error:`` line on stderr)."""
    lines = [line for line in err.splitlines() if line.startswith("fmi-adjoint: error:")]
    assert len(lines) == 1, err
    return lines[0]
