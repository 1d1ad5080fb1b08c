"""Shared fixtures.  tests/ is put on sys.path so that test modules can
``from tolerances import ...`` however pytest is invoked."""

from __future__ import annotations

import functools
import json
import sys
import tempfile
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

GOLDEN_DIR = TESTS_DIR / "golden"
_CACHE_KEY = pytest.StashKey[str]()
_CONFIG_KEY = pytest.StashKey[str]()


def pytest_configure(config) -> None:
    """One build cache for the whole run, shared by the xdist workers (the cache's per-key
    lock makes them build each model once), inside pytest's temporary folder so that a run
    starts cold and never touches the user's cache.  ``FMI_ADJOINT_CACHE`` set by the caller
    wins (e.g. to keep builds across runs while developing)."""
    import os
    import signal
    import tempfile

    # A suite started in the background of a non-interactive shell (`./run test &`) inherits
    # SIGINT ignored, and so would every process it starts: the tests that press Ctrl-C on a
    # command would then see it ignored.  A Python handler is reset to the default on exec.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # One BLAS thread per test process (the xdist workers inherit the variables and read them
    # when they import numpy): on the shared 2-core machine a threaded OpenBLAS waits for its
    # threads, a 6002 x 13 SVD 0.17 s instead of 1.5 ms (the FMU workers do the same:
    # fmi_adjoint/fmu/session.py, _worker_environment).
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")
    # A checkpoint key for the run, never the user's (~/.config/fmi-adjoint/checkpoint.key);
    # the xdist workers inherit the controller's.
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        config.stash[_CONFIG_KEY] = os.environ["FMI_ADJOINT_CONFIG"] = tempfile.mkdtemp(prefix="fmi-adjoint-config-")
    if os.environ.get("FMI_ADJOINT_CACHE"):
        return
    # The controller runs this before it starts the xdist workers, which inherit the variable.
    folder = tempfile.mkdtemp(prefix="fmi-adjoint-test-cache-")
    os.environ["FMI_ADJOINT_CACHE"] = folder
    config.stash[_CACHE_KEY] = folder


def pytest_unconfigure(config) -> None:
    import shutil

    for key in (_CACHE_KEY, _CONFIG_KEY):
        folder = config.stash.get(key, None)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def run_once(tmp_path_factory):
    """``run_once(key, compute)``: the JSON-able result of ``compute()``, computed once per test
    run however many xdist workers ask (file lock in the run's common temporary folder; the
    others wait and read it).  For long identifications that several workers' module fixtures
    need: pytest-xdist's ``xdist_group`` cannot keep them on one worker under pytest 9 (xdist 3.8
    renames ``item._nodeid``, which pytest 9 no longer reads), so the suite does not use it."""
    import fcntl
    import os

    # Under xdist each worker's basetemp is a subfolder of the run's folder, which the workers
    # share; without xdist basetemp is the run's folder itself (its parent holds every earlier
    # run, whose results must not be reused).
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "run-once"
    root.mkdir(exist_ok=True)

    def run(key: str, compute):
        path = root / f"{key}.json"
        with open(root / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if path.exists():
                return json.loads(path.read_text(encoding="utf-8"))
            value = compute()
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(value), encoding="utf-8")
            os.replace(tmp, path)
            return value

    return run


@functools.cache
def _compiled_example(name: str):
    return _example_engine(name).compiled


@functools.cache
def _example_engine(name: str):
    from fmi_adjoint.engines import NativeEngine
    from fmi_adjoint.examples import example_path
    from fmi_adjoint.model_file import load_model

    return NativeEngine.build(load_model(example_path(name)))


@pytest.fixture(scope="session")
def compiled_example():
    """``compiled_example(name)``: the bundled example ``name``, loaded and compiled once."""
    return _compiled_example


@pytest.fixture(scope="session")
def example_engine():
    """``example_engine(name)``: the native engine of the bundled example ``name``, built once."""
    return _example_engine


@pytest.fixture(scope="session")
def golden():
    """``golden(stem)``: the JSON file ``tests/golden/<stem>.json`` (must record its source)."""

    def load(stem: str) -> dict:
        data = json.loads((GOLDEN_DIR / f"{stem}.json").read_text(encoding="utf-8"))
        assert data.get("source"), f"golden file {stem}.json does not say where its values come from"
        return data

    return load


@pytest.fixture
def private_tmp(tmp_path, monkeypatch) -> Path:
    """A private system temporary folder (tmp_path/tmp), so that extraction can be watched: what an
    FMU or SSP reader extracts lands there and must be gone after use."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder
