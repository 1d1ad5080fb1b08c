"""``--jobs N`` (issue 24, part 3): how many compiler processes a build runs at once."""

from __future__ import annotations

import concurrent.futures

import pytest
from captured_cli import cli

from fmi_adjoint import toolchain
from fmi_adjoint.errors import CompilerError


class _Pool(concurrent.futures.ThreadPoolExecutor):
    """A thread pool that records the number of workers it was made with."""

    made: list[int] = []

    def __init__(self, workers: int):
        _Pool.made.append(workers)
        super().__init__(workers)


@pytest.fixture
def pools(monkeypatch):
    _Pool.made = []
    monkeypatch.setattr(toolchain.concurrent.futures, "ThreadPoolExecutor", _Pool)
    monkeypatch.setattr(toolchain, "_run", lambda command, what, compiler: None)  # no compiler runs
    return _Pool.made


def _compile(tmp_path, count: int) -> None:
    sources = []
    for k in range(count):
        sources.append(tmp_path / f"f{k}.c")
        sources[-1].write_text("int f(void) { return 0; }\n")
    try:
        toolchain.compile_shared(sources, tmp_path / "lib.so", compiler="cc")
    except CompilerError:
        pass  # the link is not run either (its objects were never written): only the pool counts


def test_jobs_bound_the_compiler_processes(tmp_path, pools, monkeypatch):
    monkeypatch.setattr(toolchain.os, "cpu_count", lambda: 8)
    _compile(tmp_path, 5)
    with toolchain.compiler_jobs(2):
        _compile(tmp_path, 5)
        assert toolchain.parallel_jobs() == 2
    with toolchain.compiler_jobs(3):
        _compile(tmp_path, 2)
    assert pools == [5, 2, 2]  # the CPU count (8) bounded by the sources, then --jobs 2, then the sources
    assert toolchain.parallel_jobs() == 8  # the block ended


@pytest.mark.parametrize("jobs", [0, -1, True, 2.5])
def test_bad_jobs_are_refused(jobs):
    with pytest.raises(CompilerError, match="--jobs"):
        with toolchain.compiler_jobs(jobs):
            pass


def test_the_command_line_takes_jobs(tmp_path):
    code, _, err = cli(["simulate", "sdof", "--jobs", "0", "-o", tmp_path / "x.csv"])
    assert code == 2 and "--jobs 0: give a whole number of at least 1" in err
    assert not (tmp_path / "x.csv").exists()
    code, _, err = cli(["simulate", "sdof", "--jobs", "1", "--t-end", "0.5", "-o", tmp_path / "x.csv"])
    assert code == 0, err
