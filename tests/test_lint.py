"""The linter and type-checker configuration in pyproject.toml is one the code passes.

Both tools run as ``python -m <tool>`` from the repository root, so they read the
``[tool.ruff]`` and ``[tool.mypy]`` sections (what to check, which rules) exactly as a
developer's plain ``ruff check`` / ``mypy`` would.  mypy keeps its incremental cache in
the repository's ``.mypy_cache`` (it writes a ``.gitignore`` of its own there): a cold
run takes 15-20 s, an incremental one about a second.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_passes():
    """Issue 10 brief: a ruff configuration (E, F, W, B; line length 120) that the code passes.
    Fails before the change: there was no [tool.ruff] section, and the code had 41 findings."""
    pytest.importorskip("ruff")
    proc = _run("ruff", "check", "--no-fix", "--output-format", "concise")
    assert proc.returncode == 0, f"ruff check found problems:\n{proc.stdout}{proc.stderr}"


@pytest.mark.slow  # ~10 s; run by ./run test and CI
def test_mypy_passes():
    """Issue 10 brief: a mypy configuration (files = fmi_adjoint) that the code passes.
    Fails before the change: there was no [tool.mypy] section, and mypy reported 99 errors."""
    pytest.importorskip("mypy")
    proc = _run("mypy")
    assert proc.returncode == 0, f"mypy found problems:\n{proc.stdout}{proc.stderr}"
