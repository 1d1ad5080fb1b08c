"""The build cache as an attack surface (issue 31, findings 1, 2, and the cache items of 6 and 7).

* ``cache clear``/``info`` on a folder that is not a cache touch nothing and say why; links
  inside the cache are never followed out of it; only provable entries and exactly named
  leftovers are removed.
* Everything the cache creates is private (0700/0600) whatever the umask.
* A library or generated code planted by another user (or in a folder another user can
  write) is never loaded: the entry is rebuilt in a private folder with one note, and the
  planted library's constructor never runs.  As root the other user is real (``setpriv`` to
  uid 65534); as a normal user no second uid exists, so a foreign owner is simulated by
  reporting another owner for the planted file's inode (the check reads owners from
  ``os.fstat``), and the group-writable variant is real for everybody.
* ``clear`` waits for a held lock with a note and gives up after its timeout with one line.
* ``FMI_ADJOINT_CACHE='~nouser/c'`` is one line naming the variable and the fix.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

from fmi_adjoint.cache import MANIFEST, MARKER, BuildCache, CacheError, default_cache_root, fingerprint
from fmi_adjoint.toolchain import c_compiler

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX owners and modes, /proc")

IS_ROOT = os.geteuid() == 0
OTHER_UID = 65534  # "nobody"
KEY = fingerprint("security test entry")
CC = c_compiler()
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler to build the test libraries")

GOOD_C = "int answer(void) { return 42; }\n"
# The planted library: its constructor runs on load and leaves a marker file.
EVIL_C = """#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen(MARKER_PATH, "w");
    if (f) { fputs("constructor ran", f); fclose(f); }
}
int answer(void) { return 666; }
"""


def _compile(source: str, library: Path, *defines: str) -> None:
    c_file = library.with_suffix(".c")
    c_file.write_text(source)
    subprocess.run([CC, "-shared", "-fPIC", *defines, "-o", str(library), str(c_file)], check=True,
                   capture_output=True, timeout=60)
    c_file.unlink()


def build_good(folder: Path) -> None:
    _compile(GOOD_C, folder / "lib.so")


def _manifest(kind: str, key: str, files: dict[str, bytes]) -> bytes:
    """A manifest as an attacker would write it (the format is public)."""
    return json.dumps({"format": 1, "kind": kind, "key": key, "created": datetime.now(timezone.utc).isoformat(),
                       "files": [{"path": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                                 for name, data in files.items()]}).encode()


def _plant(entry: Path, kind: str, key: str, library: bytes) -> None:
    entry.mkdir(parents=True)
    (entry / "lib.so").write_bytes(library)
    (entry / MANIFEST).write_bytes(_manifest(kind, key, {"lib.so": library}))


@pytest.fixture
def evil(tmp_path) -> tuple[bytes, Path]:
    """The bytes of the planted library and the marker file its constructor would write."""
    marker = tmp_path / "constructor-ran"
    _compile(EVIL_C, tmp_path / "evil.so", f'-DMARKER_PATH="{marker}"')
    return (tmp_path / "evil.so").read_bytes(), marker


def _answer(library) -> int:
    return int(library.answer())


# --- finding 1: clear and info on folders that are not caches ---------------------------------

def _user_data(home: Path) -> list[Path]:
    (home / "photos" / "20" / "2024_holidays").mkdir(parents=True)
    (home / "thesis" / "ab" / ".tmp-draft").mkdir(parents=True)
    files = [home / "photos" / "20" / "2024_holidays" / "beach.jpg", home / "thesis" / "ab" / ".tmp-draft" / "ch1.tex"]
    for path in files:
        path.write_text("the user's data")
    return files


@pytest.mark.parametrize("command", [["cache", "clear"], ["cache", "info"], ["cache", "info", "--json"]])
def test_folder_that_is_not_a_cache_is_refused_and_untouched(tmp_path, monkeypatch, capsys, command):
    from fmi_adjoint.cli.main import main

    home = tmp_path / "H"
    files = _user_data(home)
    monkeypatch.setenv("FMI_ADJOINT_CACHE", str(home))
    assert main(command) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing listed
    assert captured.err.count("\n") == 1 and captured.err.startswith("fmi-adjoint: error: ")
    assert f"{home} is not an fmi-adjoint cache" in captured.err
    assert "point FMI_ADJOINT_CACHE at the cache" in captured.err
    assert all(path.read_text() == "the user's data" for path in files)
    assert sorted(p.name for p in home.iterdir()) == ["photos", "thesis"]  # no marker written either


def test_builds_do_not_write_into_a_folder_that_is_not_a_cache(tmp_path):
    home = tmp_path / "H"
    files = _user_data(home)
    notes: list[str] = []
    folder = BuildCache(home).entry("model", KEY, lambda out: (out / "f").write_text("x"), note=notes.append)
    assert home not in folder.parents
    assert len(notes) == 1 and "is not an fmi-adjoint cache" in notes[0] and "private temporary folder" in notes[0]
    assert sorted(p.name for p in home.iterdir()) == ["photos", "thesis"]
    assert all(path.read_text() == "the user's data" for path in files)


def test_clear_follows_no_link_out_of_the_cache(tmp_path):
    root = tmp_path / "cache"
    cache = BuildCache(root)
    inside = cache.entry("model", KEY, lambda out: (out / "f").write_text("x"))
    # Outside the cache: folders that look like a kind, a shard and an entry with a valid manifest.
    outside = tmp_path / "outside"
    other = fingerprint("outside")
    victims = []
    for kind_dir, shard in ((outside / "model", other[:2]), (outside / "linkedshard", other[:2])):
        entry = kind_dir / shard / other
        entry.mkdir(parents=True)
        (entry / "f").write_text("outside")
        (entry / MANIFEST).write_bytes(_manifest("model", other, {"f": b"outside"}))
        (kind_dir / shard / f".tmp-{other}-abcdefgh").mkdir()
        victims += [entry / "f", entry / MANIFEST, kind_dir / shard / f".tmp-{other}-abcdefgh"]
    (root / "native").symlink_to(outside / "model")  # a linked kind folder
    (root / "model" / other[:2]).symlink_to(outside / "linkedshard" / other[:2])  # a linked shard
    linked_entry = root / "model" / KEY[:2] / f"{KEY[:2]}_linked_entry"
    linked_entry.symlink_to(outside / "model" / other[:2] / other)  # a linked entry
    (root / "model" / KEY[:2] / f".tmp-{KEY}-linked00").symlink_to(outside / "model")  # a linked leftover
    notes: list[str] = []
    assert cache.clear(note=notes.append) == 1  # the real entry only
    assert not inside.exists()
    assert all(path.exists() for path in victims)
    assert (outside / "model" / other[:2] / other / "f").read_text() == "outside"
    for link in (root / "native", root / "model" / other[:2], linked_entry):
        assert any(f"cache clear left {link}: a symbolic link" in n for n in notes)
    assert [e.key for e in cache.info().entries] == []


def test_clear_removes_only_provable_entries_and_exact_leftovers(tmp_path):
    root = tmp_path / "cache"
    cache = BuildCache(root)
    cache.entry("model", KEY, lambda out: (out / "f").write_text("x"))
    shard = root / "model" / KEY[:2]
    kept = [shard / ".tmp-draft", shard / f".tmp-{KEY}-short", shard / f".tmp-{KEY}-abcdefgh-x",
            shard / f".trash-{KEY}-notapid", shard / f"{KEY[:2]}_no_manifest_here", root / "model" / "notes.txt",
            root / "mine"]
    for path in kept:
        path.mkdir() if path.suffix != ".txt" else path.write_text("user")
    (kept[4] / "data").write_text("user")
    removed = [shard / f".tmp-{KEY}-abcdefgh", shard / f".trash-{KEY}-123-456"]
    for path in removed:
        path.mkdir()
    notes: list[str] = []
    assert cache.clear(note=notes.append) == 1
    assert all(path.exists() for path in kept)
    assert not any(path.exists() for path in removed) and not (shard / KEY).exists()
    assert any(str(kept[4]) in n and "not provably a cache entry" in n for n in notes)
    assert any(str(kept[4]) in s for s in cache.info().skipped)


def test_cache_of_the_previous_version_is_adopted(tmp_path):
    """No marker, but only entries with their manifest and lock files: reused, then tagged."""
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    entry = root / "model" / KEY[:2] / KEY
    entry.mkdir(parents=True, mode=0o700)
    for folder in (root / "model", root / "model" / KEY[:2]):
        folder.chmod(0o700)
    (entry / "f").write_bytes(b"old")
    (entry / "f").chmod(0o600)
    (entry / MANIFEST).write_bytes(_manifest("model", KEY, {"f": b"old"}))
    (root / "model" / KEY[:2] / f"{KEY}.lock").touch()
    assert [e.key for e in BuildCache(root).info().entries] == [KEY]
    assert not (root / MARKER).exists()  # info only reads

    def build(out: Path) -> None:
        raise AssertionError("the old entry is intact: no rebuild")

    notes: list[str] = []
    assert BuildCache(root).entry("model", KEY, build, note=notes.append) == entry and notes == []
    assert (root / MARKER).read_bytes().startswith(b"Signature: 8a477f597d28d172789f06886806bc55\n")


# --- finding 2: private modes, owners and modes checked before loading ----------------------

def _modes_below(root: Path) -> dict[str, int]:
    modes = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            modes[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return modes


def _nested_build(out: Path) -> None:
    (out / "lib.bin").write_bytes(b"x" * 100)
    (out / "sub" / "deeper").mkdir(parents=True)
    (out / "sub" / "deeper" / "model.py").write_text("X = 1\n")


def test_everything_the_cache_creates_is_private_under_umask_000(tmp_path):
    existing = tmp_path / "existing"  # the case: an existing 0755 root
    existing.mkdir()
    existing.chmod(0o755)
    new = tmp_path / "new" / "cache"
    old_umask = os.umask(0)
    try:
        for root in (existing, new):
            BuildCache(root).entry("model", KEY, _nested_build)
            BuildCache(root).entry("native", fingerprint("second"), _nested_build)
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(new.stat().st_mode) == 0o700
    for root in (existing, new):
        modes = _modes_below(root)
        wrong = {name: oct(mode) for name, mode in modes.items()
                 if mode != (0o700 if (root / name).is_dir() else 0o600)}
        assert wrong == {}
        assert len(modes) == 1 + 2 * (3 + 1 + 5)  # the marker; per entry: kind, shard, lock, entry, its 5 items


def _victim_load(cache: BuildCache, notes: list[str]):
    return cache.load_library("native", KEY, build_good, "lib.so", note=notes.append)


def _check_refused(cache: BuildCache, root: Path, marker: Path, why: str) -> None:
    notes: list[str] = []
    folder, library = _victim_load(cache, notes)
    assert not marker.exists(), "the planted library was loaded"
    assert _answer(library) == 42 and root not in folder.parents  # rebuilt in the private folder
    assert len(notes) == 1 and why in notes[0] and "private temporary folder" in notes[0]


@needs_cc
def test_planted_library_in_a_folder_others_can_write_is_never_loaded(tmp_path, evil):
    """The issue's attack, with the attacker's rename done by the test (same result)."""
    data, marker = evil
    root = tmp_path / "cache"
    cache = BuildCache(root)
    cache.entry("native", KEY, build_good)  # the victim's entry (built, not loaded in this process)
    native = root / "native"
    native.chmod(0o777)  # as the previous version made it under umask 000
    shard = native / KEY[:2]
    shard.rename(native / "moved")
    _plant(shard / KEY, "native", KEY, data)
    _check_refused(BuildCache(root), root, marker, f"{native} is group and world-writable (mode 777)")


@needs_cc
@pytest.mark.parametrize("where", ["file", "entry", "shard"])
def test_group_writable_or_linked_parts_are_never_loaded(tmp_path, evil, where):
    data, marker = evil
    root = tmp_path / "cache"
    entry = root / "native" / KEY[:2] / KEY
    _plant(entry, "native", KEY, data)  # a planted entry with a valid manifest
    BuildCache(root).entry("model", KEY, lambda out: (out / "f").write_text("x"))  # tags the root
    for folder in (root / "native", entry.parent, entry):
        folder.chmod(0o700)
    (entry / "lib.so").chmod(0o600)
    (entry / MANIFEST).chmod(0o600)
    target = {"file": entry / "lib.so", "entry": entry, "shard": entry.parent}[where]
    target.chmod(0o620 if where == "file" else 0o770)
    _check_refused(BuildCache(root), root, marker, f"{target} is group-writable")


@needs_cc
def test_linked_library_file_is_never_loaded(tmp_path, evil):
    data, marker = evil
    root = tmp_path / "cache"
    cache = BuildCache(root)
    folder = cache.entry("native", KEY, build_good)
    (tmp_path / "elsewhere.so").write_bytes(data)
    good = (folder / "lib.so").read_bytes()
    (folder / "lib.so").unlink()
    (folder / "lib.so").symlink_to(tmp_path / "elsewhere.so")
    (folder / MANIFEST).chmod(0o600)
    (folder / MANIFEST).write_bytes(_manifest("native", KEY, {"lib.so": data}))
    assert good != data
    _check_refused(BuildCache(root), root, marker, "is a symbolic link")


@needs_cc
def test_foreign_owner_is_never_loaded_simulated(tmp_path, evil, monkeypatch):
    """Runs for every user: a normal user cannot give a file to another uid, so the owner of
    the planted file's inode is reported as uid 65534 (the check takes owners from fstat)."""
    data, marker = evil
    root = tmp_path / "cache"
    entry = root / "native" / KEY[:2] / KEY
    BuildCache(root).entry("model", KEY, lambda out: (out / "f").write_text("x"))
    _plant(entry, "native", KEY, data)
    for path in (root / "native", entry.parent, entry):
        path.chmod(0o700)
    for path in (entry / "lib.so", entry / MANIFEST):
        path.chmod(0o600)
    planted = (entry / "lib.so").stat()
    real_fstat = os.fstat

    def fstat(fd):
        info = real_fstat(fd)
        if (info.st_dev, info.st_ino) == (planted.st_dev, planted.st_ino):
            fields = list(info[:10])
            fields[4] = OTHER_UID if os.geteuid() != OTHER_UID else OTHER_UID - 1
            return os.stat_result(fields)
        return info

    monkeypatch.setattr(os, "fstat", fstat)
    _check_refused(BuildCache(root), root, marker, f"{entry / 'lib.so'} is owned by user id")


@needs_cc
@pytest.mark.skipif(not IS_ROOT or shutil.which("setpriv") is None, reason="a second uid needs root and setpriv")
def test_planted_by_another_user_is_never_loaded(evil):
    """A real second user (uid 65534 via setpriv) renames the victim's shard away and plants a
    library with a valid manifest in a kind folder left world-writable (finding 2)."""
    data, marker = evil
    base = Path(tempfile.mkdtemp(prefix="fmi-adjoint-plant-"))  # /tmp/pytest-of-root is 0700: not reachable
    try:
        base.chmod(0o755)
        root = base / "cache"
        root.mkdir()
        root.chmod(0o755)
        BuildCache(root).entry("native", KEY, build_good)  # the victim's entry
        (root / "native").chmod(0o777)
        stage = base / "stage"
        stage.mkdir()
        (stage / "lib.so").write_bytes(data)
        (stage / MANIFEST).write_bytes(_manifest("native", KEY, {"lib.so": data}))
        for path in (stage, stage / "lib.so", stage / MANIFEST):
            path.chmod(0o755 if path.is_dir() else 0o644)
        shard = root / "native" / KEY[:2]
        script = (f"set -e; mv '{shard}' '{shard}.moved'; mkdir -p '{shard}/{KEY}'; "
                  f"cp '{stage}/lib.so' '{stage}/{MANIFEST}' '{shard}/{KEY}/'")
        subprocess.run(["setpriv", f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups", "sh", "-c",
                        script], check=True, capture_output=True, timeout=60)
        assert (shard / KEY / "lib.so").stat().st_uid == OTHER_UID
        _check_refused(BuildCache(root), root, marker, f"{root / 'native'} is group and world-writable")
        # With the kind folder private again, the other user's shard is what is refused.
        (root / "native").chmod(0o700)
        _check_refused(BuildCache(root), root, marker, f"{shard} is owned by user id {OTHER_UID}")
        # clear removes nothing that is not provably the victim's own: the planted entry stays, named.
        notes: list[str] = []
        assert BuildCache(root).clear(note=notes.append) == 0
        assert (shard / KEY / "lib.so").exists() and (root / "native" / f"{KEY[:2]}.moved").is_dir()
        assert any(f"{shard / KEY}: owned by user id {OTHER_UID}" in n for n in notes)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@needs_cc
@pytest.mark.skipif(not IS_ROOT, reason="giving a file to another user needs root")
def test_planted_native_engine_of_a_model_is_never_loaded(tmp_path, evil, capsys):
    """The issue's victim command in-process: build_native of sdof with another user's
    library planted under the model's key (computable by anyone)."""
    from fmi_adjoint import load_model
    from fmi_adjoint.examples import example_path
    from fmi_adjoint.native import build_native, find_c_compiler
    from fmi_adjoint.native.library import native_key

    data, marker = evil
    model = load_model(example_path("sdof"))
    key = native_key(model, find_c_compiler())
    root = tmp_path / "cache"
    BuildCache(root).entry("model", KEY, lambda out: (out / "f").write_text("x"))  # the victim's cache
    entry = root / "native" / key[:2] / key
    entry.mkdir(parents=True)
    (entry / "fa_native.so").write_bytes(data)
    (entry / MANIFEST).write_bytes(_manifest("native", key, {"fa_native.so": data}))
    for path in (entry, entry / "fa_native.so", entry / MANIFEST):
        os.chown(path, OTHER_UID, OTHER_UID)
    library = build_native(model, cache=BuildCache(root))
    assert not marker.exists()
    assert root not in library.folder.parents and library.n == 1
    notes = capsys.readouterr().err.splitlines()
    assert len(notes) == 1 and f"{entry} is owned by user id {OTHER_UID}" in notes[0]


# --- finding 7: clear waits for a lock with a note and a bound ------------------------------

def test_clear_waits_with_a_note_and_gives_up_after_its_timeout(tmp_path, monkeypatch, capsys):
    from fmi_adjoint.cli.main import main

    root = tmp_path / "cache"
    cache = BuildCache(root)
    folder = cache.entry("model", KEY, lambda out: (out / "f").write_text("x"))
    # Another process's lock: flock locks belong to the open file description, so a second
    # descriptor of this process conflicts with the cache's own.
    held = os.open(folder.parent / f"{KEY}.lock", os.O_RDWR)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        notes: list[str] = []
        with pytest.raises(CacheError) as caught:
            cache.clear(note=notes.append, lock_timeout=0.2)
        assert notes == [f"fmi-adjoint: note: waiting for another fmi-adjoint process building model/{KEY[:16]} "
                         "(up to 0.2 s) ..."]
        assert f"model/{KEY[:16]}" in str(caught.value) and "'fmi-adjoint cache clear' again" in str(caught.value)
        assert (folder / "f").read_text() == "x"

        monkeypatch.setenv("FMI_ADJOINT_CACHE", str(root))
        assert main(["cache", "clear", "--wait", "0.2"]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 2 and err[0].startswith("fmi-adjoint: note: waiting for another fmi-adjoint process")
        assert err[1].startswith(f"fmi-adjoint: error: cannot clear the build cache entry model/{KEY[:16]} in {root}")
    finally:
        os.close(held)
    assert cache.clear(note=notes.append, lock_timeout=0.2) == 1


# --- finding 6: unusable FMI_ADJOINT_CACHE values -----------------------------------------

@pytest.mark.parametrize("value", ["~nouser_fmi_adjoint/c", "~nouser_fmi_adjoint"])
@pytest.mark.parametrize("command", [["cache", "info"], ["cache", "clear"]])
def test_unexpandable_cache_variable_is_one_line(monkeypatch, capsys, value, command):
    from fmi_adjoint.cli.main import main

    monkeypatch.setenv("FMI_ADJOINT_CACHE", value)
    assert main(command) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error" not in err
    assert err.startswith(f"fmi-adjoint: error: FMI_ADJOINT_CACHE={value!r}: '~nouser_fmi_adjoint' cannot be expanded")
    assert "set FMI_ADJOINT_CACHE to a folder path" in err
    with pytest.raises(CacheError):
        default_cache_root()


def test_cache_root_with_nul_is_a_cache_error(monkeypatch, tmp_path):
    with pytest.raises(CacheError, match="NUL"):
        BuildCache(Path("cache\0x"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FMI_ADJOINT_CACHE", "relative/cache")  # relative paths are fine
    assert BuildCache.default().root == tmp_path / "relative" / "cache"


# --- second review: findings 4 and 9 --------------------------------------------------------

@needs_cc
def test_same_user_library_without_the_needed_functions_is_rebuilt(tmp_path):
    # Checksummed and ours, yet not what the build writes (file replaced, manifest rewritten):
    # damaged like a failed checksum, rebuilt with one note (was "internal error (AttributeError)").
    root = tmp_path / "cache"
    cache = BuildCache(root)
    folder, _ = cache.load_library("native", KEY, build_good, "lib.so", symbols=("answer",))
    other = tmp_path / "other.so"
    _compile("int question(void) { return 6 * 9; }\n", other)
    data = other.read_bytes()
    (folder / "lib.so").chmod(0o600)
    (folder / "lib.so").write_bytes(data)
    (folder / MANIFEST).chmod(0o600)
    (folder / MANIFEST).write_bytes(_manifest("native", KEY, {"lib.so": data}))
    notes: list[str] = []
    again, library = BuildCache(root).load_library("native", KEY, build_good, "lib.so", symbols=("answer",),
                                                   note=notes.append)
    assert again == folder and _answer(library) == 42
    assert len(notes) == 1 and "corrupted (its lib.so lacks the function answer); rebuilt" in notes[0]
    assert (folder / "lib.so").read_bytes() != data
    with pytest.raises(CacheError, match=r"just built, lacks the function nothere.*fmi-adjoint cache clear"):
        cache.load_library("native", KEY, build_good, "lib.so", symbols=("answer", "nothere"), note=notes.append)


@pytest.mark.parametrize("root_kind", ["dangling", "loop"])
@pytest.mark.parametrize("command", [["cache", "info"], ["cache", "clear"]])
def test_a_root_that_is_a_broken_link_is_named_as_such(tmp_path, monkeypatch, capsys, root_kind, command):
    from fmi_adjoint.cli.main import main

    root = tmp_path / "cache"
    if root_kind == "dangling":
        root.symlink_to(tmp_path / "gone")
    else:
        root.symlink_to(tmp_path / "other")
        (tmp_path / "other").symlink_to(root)
    monkeypatch.setenv("FMI_ADJOINT_CACHE", str(root))
    assert main(command) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"fmi-adjoint: error: the build cache {root}: it is a ")
    assert ("dangling symbolic link" if root_kind == "dangling" else "loops back") in err
    assert f"remove the link ('rm {root}'" in err and "chmod" not in err
    notes: list[str] = []
    BuildCache(root).entry("model", KEY, lambda out: (out / "f").write_text("x"), note=notes.append)
    assert len(notes) == 1 and "symbolic link" in notes[0]


@pytest.mark.parametrize("command", [["cache", "info"], ["cache", "info", "--json"], ["cache", "clear"]])
def test_a_root_that_is_a_file_is_an_error_for_info_as_for_clear(tmp_path, monkeypatch, capsys, command):
    from fmi_adjoint.cli.main import main

    root = tmp_path / "file"
    root.write_text("not a cache")
    monkeypatch.setenv("FMI_ADJOINT_CACHE", str(root))
    assert main(command) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith(f"fmi-adjoint: error: the build cache {root} is a file, not a folder")
    assert root.read_text() == "not a cache"
