"""Models go through the build cache (issue 11, part 1), tried with real builds.

* four processes that build one model at once all succeed, with one build between them;
* a warm process reuses the entries (no new entry, the same bytes);
* a corrupted library is detected by its checksum and rebuilt, with one note;
* a parameter value (``--set``) does not change the key, a model change does.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fmi_adjoint.compiled import model_key
from fmi_adjoint.examples import example_path
from fmi_adjoint.model_file import load_model
from fmi_adjoint.toolchain import c_compiler

CONSOLE_SCRIPT = Path(sys.executable).with_name("fmi-adjoint")
needs_cc = pytest.mark.skipif(c_compiler() is None, reason="no C compiler")


def _run(cache: Path, out: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "FMI_ADJOINT_CACHE": str(cache)}
    return subprocess.Popen([str(CONSOLE_SCRIPT), "simulate", "sdof", "--t-end", "0.05", "-o", str(out), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _entries(cache: Path, kind: str) -> list[Path]:
    folder = cache / kind
    return sorted(p for shard in folder.iterdir() if shard.is_dir() for p in shard.iterdir()
                  if p.is_dir() and not p.name.startswith(".")) if folder.exists() else []


@needs_cc
@pytest.mark.slow  # ~6 s of C builds
def test_concurrent_builds_warm_reuse_and_corruption(tmp_path):
    cache = tmp_path / "cache"
    procs = [_run(cache, tmp_path / f"out{k}.csv") for k in range(4)]
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        assert "note" not in err, err
    outputs = {(tmp_path / f"out{k}.csv").read_bytes() for k in range(4)}
    assert len(outputs) == 1
    assert len(_entries(cache, "model")) == 1 and len(_entries(cache, "native")) == 1
    (native,) = _entries(cache, "native")
    library = native / "fa_native.so"
    built = library.stat().st_mtime_ns

    # Warm: the same entry, untouched.
    proc = _run(cache, tmp_path / "warm.csv")
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0 and "note" not in err, err
    assert library.stat().st_mtime_ns == built and len(_entries(cache, "native")) == 1
    assert (tmp_path / "warm.csv").read_bytes() in outputs

    # Corrupted: detected, rebuilt, the same result.
    data = bytearray(library.read_bytes())
    data[len(data) // 2] ^= 0xFF
    library.write_bytes(bytes(data))
    proc = _run(cache, tmp_path / "rebuilt.csv")
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert "corrupted" in err and "rebuilt" in err and len(err.strip().splitlines()) == 2, err
    assert (tmp_path / "rebuilt.csv").read_bytes() in outputs


def test_parameter_values_do_not_change_the_key_a_model_change_does():
    model = load_model(example_path("sdof"))
    assert model_key(model) == model_key(model.with_values({"c": 123.0}))
    first = model.outputs[0]
    changed = dataclasses.replace(model, outputs=(dataclasses.replace(first, expression=f"2*({first.expression})"),
                                                  *model.outputs[1:]))
    assert model_key(changed) != model_key(model)
