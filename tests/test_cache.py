"""The build cache (issue 11, part 1): warm hits, one build among concurrent processes,
corrupted entries rebuilt, unusable roots replaced by a private folder, build errors that
leave nothing behind, the fingerprints, and ``fmi-adjoint cache info|clear``.

Every check compares with an independent computation (hashlib, os.walk) or with counts the
build function itself records (marker files), never with the cache's own bookkeeping.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fmi_adjoint.cache import (
    MANIFEST,
    BuildCache,
    CacheError,
    CacheUsageError,
    compiler_fingerprint,
    default_cache_root,
    fingerprint,
    source_fingerprint,
)
from fmi_adjoint.errors import FmiAdjointError

POSIX = sys.platform != "win32"
IS_ROOT = POSIX and os.geteuid() == 0
KEY = fingerprint("test entry")
PAYLOAD = bytes(range(256)) * 64  # 16 KiB with every byte value


class Counter:
    """A build function that writes two files and counts its calls."""

    def __init__(self, payload: bytes = PAYLOAD):
        self.calls = 0
        self.payload = payload

    def __call__(self, folder: Path) -> None:
        self.calls += 1
        (folder / "lib.bin").write_bytes(self.payload)
        (folder / "sub").mkdir()
        (folder / "sub" / "model.py").write_text("X = 1\n", encoding="utf-8")


def assert_intact(folder: Path, payload: bytes = PAYLOAD) -> None:
    assert (folder / "lib.bin").read_bytes() == payload
    assert (folder / "sub" / "model.py").read_text(encoding="utf-8") == "X = 1\n"


def entry_folders(root: Path) -> list[Path]:
    """Entry folders (non-hidden folders three levels down), found without the cache's code."""
    return sorted(p for p in root.glob("*/*/*") if p.is_dir() and not p.name.startswith("."))


def leftovers(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob(".*") if p.is_dir())


# --- fingerprints ---------------------------------------------------------------------------

def test_fingerprint_is_a_length_prefixed_sha256():
    expected = hashlib.sha256()
    for data in (b"ab", b"c"):
        expected.update(len(data).to_bytes(8, "big") + data)
    assert fingerprint("ab", "c") == expected.hexdigest()
    assert fingerprint("ab", "c") != fingerprint("a", "bc")
    assert fingerprint() != fingerprint("")
    assert fingerprint("\u00e9", "x") == fingerprint("\u00e9".encode(), b"x")
    with pytest.raises(CacheUsageError):
        fingerprint("a", 1)


def test_source_fingerprint_follows_the_source_files(tmp_path):
    from fmi_adjoint.cache import _tree_fingerprint

    fp = source_fingerprint()
    assert len(fp) == 64 and int(fp, 16) >= 0
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "engine.c").write_bytes(b"int x = 1;\n")
    (tmp_path / "pkg" / "mod.py").write_text("y = 2\n", encoding="utf-8")
    base = _tree_fingerprint(tmp_path, "1.0")
    (tmp_path / "notes.txt").write_text("not source")
    (tmp_path / "pkg" / "__pycache__").mkdir()
    (tmp_path / "pkg" / "__pycache__" / "mod.py").write_text("cached")
    assert _tree_fingerprint(tmp_path, "1.0") == base  # other files do not count
    assert _tree_fingerprint(tmp_path, "1.1") != base  # the version does
    (tmp_path / "pkg" / "engine.c").write_bytes(b"int x = 2;\n")
    changed = _tree_fingerprint(tmp_path, "1.0")
    assert changed != base
    (tmp_path / "pkg" / "engine.c").rename(tmp_path / "pkg" / "engine2.c")
    assert _tree_fingerprint(tmp_path, "1.0") not in (base, changed)
    (tmp_path / "pkg" / "fa.h").write_text("#define N 1\n")
    assert _tree_fingerprint(tmp_path, "1.0") != changed


@pytest.mark.skipif(not POSIX, reason="the fake compiler is a shell script")
def test_compiler_fingerprint_covers_version_path_and_flags(tmp_path):
    compiler = tmp_path / "cc"
    compiler.write_text("#!/bin/sh\necho 'fakecc 1.0'\n")
    compiler.chmod(0o755)
    first = compiler_fingerprint(str(compiler), ["-O2", "-fPIC"])
    assert first == compiler_fingerprint(str(compiler), ["-O2", "-fPIC"])
    assert first != compiler_fingerprint(str(compiler), ["-fPIC", "-O2"])
    assert first != compiler_fingerprint(str(compiler), ["-O2"])
    compiler.write_text("#!/bin/sh\necho 'fakecc 1.1'\n")
    assert compiler_fingerprint(str(compiler), ["-O2", "-fPIC"]) != first
    # A compiler that does not run is identified by its path alone.
    missing_a = compiler_fingerprint(str(tmp_path / "no-cc"), ["-O2"])
    assert missing_a == compiler_fingerprint(str(tmp_path / "no-cc"), ["-O2"])
    assert missing_a != compiler_fingerprint(str(tmp_path / "other-cc"), ["-O2"])


def test_cache_root_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("FMI_ADJOINT_CACHE", str(tmp_path / "mine"))
    assert default_cache_root() == tmp_path / "mine"
    assert BuildCache.default().root == tmp_path / "mine"
    assert BuildCache.default() == BuildCache(tmp_path / "mine")
    monkeypatch.setenv("FMI_ADJOINT_CACHE", "")
    if sys.platform.startswith("linux"):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert default_cache_root() == tmp_path / "xdg" / "fmi-adjoint"
        monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
        assert default_cache_root() == Path.home() / ".cache" / "fmi-adjoint"
    assert default_cache_root().name == "fmi-adjoint"


# --- building, warm hits ----------------------------------------------------------------------

def test_build_once_then_warm_hit(tmp_path):
    root = tmp_path / "cache"
    final = root / "model" / KEY[:2] / KEY
    seen_during_build = []

    def build(folder: Path) -> None:
        seen_during_build.append(os.path.lexists(final))  # never visible before it is complete
        counter(folder)

    counter = Counter()
    cache = BuildCache(root)
    folder = cache.entry("model", KEY, build)
    assert folder == final and counter.calls == 1 and seen_during_build == [False]
    assert_intact(folder)
    if POSIX:
        assert stat.S_IMODE(root.stat().st_mode) == 0o700
    manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    listed = {item["path"]: item for item in manifest["files"]}
    assert set(listed) == {"lib.bin", "sub/model.py"}
    for name, item in listed.items():
        data = (folder / name).read_bytes()
        assert item["size"] == len(data) and item["sha256"] == hashlib.sha256(data).hexdigest()
    assert manifest["kind"] == "model" and manifest["key"] == KEY

    assert cache.entry("model", KEY, build) == folder
    assert BuildCache(root).entry("model", KEY, build) == folder  # another object, same files
    assert counter.calls == 1
    # Files that loading adds (Python's __pycache__) do not spoil the entry.
    (folder / "sub" / "__pycache__").mkdir()
    (folder / "sub" / "__pycache__" / "model.pyc").write_bytes(b"\0")
    assert cache.entry("model", KEY, build) == folder and counter.calls == 1
    # Another key or kind is another entry.
    assert cache.entry("native", KEY, build) != folder and counter.calls == 2


def _build_in_process(root: str, log: str, barrier, result: str) -> None:
    """Run by each spawned process: wait for the others, then ask for the same entry.  The
    build waits until all four have announced that they are asking (a file each), so that the
    others ask while it runs: an event, not a guessed duration."""
    arrived = Path(log).with_name("arrived")

    def build(folder: Path) -> None:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\n")
        deadline = time.monotonic() + 60
        while len(list(arrived.iterdir())) < 4:
            if time.monotonic() > deadline:
                raise AssertionError("the other processes did not ask for the entry within 60 s")
            time.sleep(0.01)  # polling interval
        Counter()(folder)

    barrier.wait(timeout=60)
    arrived.mkdir(exist_ok=True)
    (arrived / str(os.getpid())).touch()
    folder = BuildCache(Path(root)).entry("native", KEY, build, note=lambda text: None)
    assert_intact(folder)
    Path(result).write_text(str(folder), encoding="utf-8")


def test_four_processes_build_one_key_once(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(4)
    log = tmp_path / "builds.log"
    processes = [ctx.Process(target=_build_in_process,
                             args=(str(tmp_path / "cache"), str(log), barrier, str(tmp_path / f"result{k}")))
                 for k in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [p.exitcode for p in processes] == [0, 0, 0, 0]
    assert len(log.read_text(encoding="utf-8").split()) == 1  # built exactly once
    folders = {(tmp_path / f"result{k}").read_text(encoding="utf-8") for k in range(4)}
    assert len(folders) == 1
    assert_intact(Path(folders.pop()))
    assert leftovers(tmp_path / "cache") == []


# --- corrupted entries ------------------------------------------------------------------------

def _truncate(folder: Path) -> None:
    path = folder / "lib.bin"
    path.write_bytes(path.read_bytes()[:100])


def _flip(folder: Path) -> None:
    path = folder / "lib.bin"
    data = bytearray(path.read_bytes())
    data[5000] ^= 0x01  # same size: only the checksum can tell
    path.write_bytes(bytes(data))


def _delete(folder: Path) -> None:
    (folder / "sub" / "model.py").unlink()


def _garble_manifest(folder: Path) -> None:
    (folder / MANIFEST).write_bytes(b'{"format": 1, "files": [')


@pytest.mark.parametrize("damage, reason", [(_truncate, "bytes"), (_flip, "checksum"), (_delete, "missing"),
                                            (_garble_manifest, "unreadable")])
def test_corrupted_entry_is_rebuilt(tmp_path, damage, reason):
    counter, notes = Counter(), []
    cache = BuildCache(tmp_path / "cache")
    folder = cache.entry("model", KEY, counter, note=notes.append)
    damage(folder)
    assert cache.entry("model", KEY, counter, note=notes.append) == folder
    assert counter.calls == 2
    assert_intact(folder)
    assert len(notes) == 1 and notes[0].startswith("fmi-adjoint: note: cache entry model/")
    assert "was corrupted (" in notes[0] and reason in notes[0] and notes[0].endswith("rebuilt.")
    assert cache.entry("model", KEY, counter, note=notes.append) == folder and counter.calls == 2
    assert leftovers(tmp_path / "cache") == []


def test_corruption_note_goes_to_stderr_by_default(tmp_path, capsys):
    cache = BuildCache(tmp_path / "cache")
    _flip(cache.entry("model", KEY, Counter()))
    cache.entry("model", KEY, Counter())
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("fmi-adjoint: note: cache entry") and "rebuilt." in err


# --- unusable roots ---------------------------------------------------------------------------

def _check_private_build(cache: BuildCache, root: Path, expected_reason: str) -> None:
    counter, notes = Counter(), list[str]()
    folder = cache.entry("model", KEY, counter, note=notes.append)
    assert_intact(folder)
    assert root not in folder.parents and counter.calls == 1
    assert len(notes) == 1 and expected_reason in notes[0]
    assert notes[0].startswith(f"fmi-adjoint: note: the build cache {root} is not usable (")
    assert notes[0].endswith("building in a private temporary folder. Set FMI_ADJOINT_CACHE to a writable folder.")
    # Once: the private folder keeps its entries for the process, without a second note.
    assert cache.entry("model", KEY, counter, note=notes.append) == folder
    assert counter.calls == 1 and len(notes) == 1
    assert not entry_folders(root) if root.is_dir() else True
    assert cache.info().usable is False and expected_reason in cache.info().reason


@pytest.mark.skipif(not POSIX, reason="POSIX permission bits")
def test_group_writable_root_is_not_used(tmp_path):
    root = tmp_path / "cache"
    root.mkdir()
    root.chmod(0o770)
    _check_private_build(BuildCache(root), root, "group-writable")


@pytest.mark.skipif(not POSIX or IS_ROOT, reason="POSIX permission bits; root may write anywhere")
def test_read_only_root_is_not_used(tmp_path):
    root = tmp_path / "cache"
    root.mkdir()
    root.chmod(0o500)
    try:
        _check_private_build(BuildCache(root), root, "cannot write in it: Permission denied")
    finally:
        root.chmod(0o700)


@pytest.mark.skipif(not IS_ROOT, reason="giving a folder to another user needs root")
def test_root_of_another_user_is_not_used(tmp_path):
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    os.chown(root, 65534, 65534)
    _check_private_build(BuildCache(root), root, "not by you")


def test_root_that_cannot_be_created_is_not_used(tmp_path):
    (tmp_path / "file").write_text("a file, not a folder")
    root = tmp_path / "file" / "cache"
    _check_private_build(BuildCache(root), root, "cannot create it")


@pytest.mark.skipif(not POSIX, reason="POSIX permission bits")
def test_private_folder_is_removed_at_exit(tmp_path):
    root = tmp_path / "cache"
    root.mkdir()
    root.chmod(0o777)
    script = ("import sys; from pathlib import Path; from fmi_adjoint.cache import BuildCache, fingerprint\n"
              f"folder = BuildCache(Path({str(root)!r})).entry('model', fingerprint('x'), "
              "lambda d: (d / 'f').write_text('x'), note=lambda t: None)\n"
              "print(folder)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    folder = Path(proc.stdout.strip())
    assert folder.name == fingerprint("x") and root not in folder.parents
    assert not folder.exists() and not folder.parents[2].exists()  # the whole private folder


# --- failing builds ---------------------------------------------------------------------------

@pytest.mark.parametrize("error", [ValueError("bad model"), KeyboardInterrupt(), OSError(28, "No space left")])
def test_failing_build_leaves_nothing(tmp_path, error):
    def build(folder: Path) -> None:
        (folder / "half.bin").write_bytes(b"half")
        raise error

    cache = BuildCache(tmp_path / "cache")
    with pytest.raises(type(error)) as caught:
        cache.entry("model", KEY, build)
    assert caught.value is error  # unchanged, and no fallback for the build's own OSError
    assert entry_folders(tmp_path / "cache") == [] and leftovers(tmp_path / "cache") == []
    counter = Counter()
    assert_intact(cache.entry("model", KEY, counter))
    assert counter.calls == 1


def test_leftover_of_a_killed_build_is_removed(tmp_path):
    shard = tmp_path / "cache" / "model" / KEY[:2]
    shard.mkdir(parents=True)
    # What a killed build leaves: its lock file and its temporary folder (8 random characters).
    (shard / f"{KEY}.lock").touch()
    (shard / f".tmp-{KEY}-k1lled_0").mkdir()
    (shard / f".tmp-{KEY}-k1lled_0" / "half.bin").write_bytes(b"half")
    assert_intact(BuildCache(tmp_path / "cache").entry("model", KEY, Counter()))
    assert leftovers(tmp_path / "cache") == []


@pytest.mark.parametrize("kind, key", [("Model", KEY), ("../x", KEY), ("model", "../../etc"), ("model", "ab"),
                                       ("model", KEY.upper()), ("model", "a-b-c-d-e-f")])
def test_malformed_kind_or_key_is_refused(tmp_path, kind, key):
    with pytest.raises(CacheUsageError, match="cache entry (kind|key)") as caught:
        BuildCache(tmp_path / "cache").entry(kind, key, Counter())
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, FmiAdjointError)
    assert not (tmp_path / "cache").exists() or entry_folders(tmp_path / "cache") == []


@pytest.mark.parametrize("write", [lambda d: (d / MANIFEST).write_text("{}"),
                                   lambda d: (d / "link").symlink_to("/etc/passwd")])
def test_build_may_not_write_manifest_or_links(tmp_path, write):
    if not POSIX:
        pytest.skip("symbolic links need privileges on Windows")
    with pytest.raises(CacheUsageError):
        BuildCache(tmp_path / "cache").entry("model", KEY, write)
    assert entry_folders(tmp_path / "cache") == [] and leftovers(tmp_path / "cache") == []


# --- info and clear ---------------------------------------------------------------------------

def test_clear_waits_for_a_running_build(tmp_path):
    cache = BuildCache(tmp_path / "cache")
    started, release, results = threading.Event(), threading.Event(), {}

    def build(folder: Path) -> None:
        Counter()(folder)
        started.set()
        assert release.wait(timeout=30)
        (folder / "late.txt").write_text("written after clear started")

    builder = threading.Thread(target=lambda: results.setdefault("folder", cache.entry("model", KEY, build)))
    builder.start()
    assert started.wait(timeout=30)
    waiting, notes = threading.Event(), []

    def note(text: str) -> None:
        notes.append(text)
        if "waiting for another fmi-adjoint process building" in text:
            waiting.set()

    clearer = threading.Thread(target=lambda: results.setdefault("removed", cache.clear(note=note)))
    clearer.start()
    # an event, not a guessed time: clear() found the key's lock taken and waits for it, instead
    # of removing the half-built folder (the build is held until then)
    assert waiting.wait(timeout=30), notes
    assert clearer.is_alive()
    release.set()
    builder.join(timeout=30)
    clearer.join(timeout=30)
    assert results["removed"] == 0
    assert_intact(results["folder"])
    assert (results["folder"] / "late.txt").exists()


def _disk_bytes(root: Path) -> int:
    return sum(p.stat().st_size for folder in entry_folders(root) for p in folder.rglob("*") if p.is_file())


def test_cli_cache_info_and_clear(tmp_path, monkeypatch, capsys):
    from fmi_adjoint.cli.main import main

    root = tmp_path / "cache"
    monkeypatch.setenv("FMI_ADJOINT_CACHE", str(root))
    assert main(["cache", "info", "--json"]) == 0
    empty = json.loads(capsys.readouterr().out)
    assert empty["entries"] == [] and empty["usable"] is True and empty["root"] == str(root)

    cache = BuildCache.default()
    cache.entry("model", KEY, Counter())
    cache.entry("native", fingerprint("other"), Counter(b"x" * 1000))
    expected_bytes = _disk_bytes(root)
    assert main(["cache", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert sorted((e["kind"], e["key"]) for e in info["entries"]) == [("model", KEY), ("native", fingerprint("other"))]
    assert info["total_bytes"] == expected_bytes == sum(e["size_bytes"] for e in info["entries"])

    assert main(["cache", "info"]) == 0
    text = capsys.readouterr().out
    assert f"cache folder: {root}" in text and "usable: yes" in text and "entries: 2," in text
    assert f"model    {KEY[:16]}" in text

    assert main(["cache", "clear"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("removed 2 entries (") and str(root) in out
    assert entry_folders(root) == [] and root.is_dir()
    assert cache.info().entries == () and cache.info().total_bytes == 0
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out.startswith("removed 0 entries (0 B)")


def test_cli_cache_clear_of_a_file_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    from fmi_adjoint.cli.main import main

    (tmp_path / "file").write_text("not a cache")
    monkeypatch.setenv("FMI_ADJOINT_CACHE", str(tmp_path / "file"))
    assert main(["cache", "clear"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("fmi-adjoint: error: the build cache ")
    assert "is a file, not a folder, so not a cache; set FMI_ADJOINT_CACHE" in err
    with pytest.raises(CacheError, match="is a file, not a folder, so not a cache"):
        BuildCache.default().clear()
    assert main(["cache", "info"]) == 2  # a file is not a cache (issue 31, second review)
