"""Shared fixtures.  tests/ is put on sys.path so that test modules can
``from tolerances import ...`` however pytest is invoked."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

GOLDEN_DIR = TESTS_DIR / "golden"


@functools.cache
def _compiled_example(name: str):
    from fmi_adjoint.compiled import compile_model
    from fmi_adjoint.examples import example_path
    from fmi_adjoint.model_file import load_model

    return compile_model(load_model(example_path(name)))


@pytest.fixture(scope="session")
def compiled_example():
    """``compiled_example(name)``: the bundled example ``name``, loaded and compiled once."""
    return _compiled_example


@pytest.fixture(scope="session")
def golden():
    """``golden(stem)``: the JSON file ``tests/golden/<stem>.json`` (must record its source)."""

    def load(stem: str) -> dict:
        data = json.loads((GOLDEN_DIR / f"{stem}.json").read_text(encoding="utf-8"))
        assert data.get("source"), f"golden file {stem}.json does not say where its values come from"
        return data

    return load
