"""The on-disk build cache: derived models, generated code and compiled libraries, built once.

An entry is a folder of files that a ``build`` callable writes, stored under
``<root>/<kind>/<key[:2]>/<key>`` next to a ``MANIFEST.json`` that lists every file with its
size and SHA-256.  ``key`` is a fingerprint (:func:`fingerprint`) of everything that
determines the files, so an entry never goes stale: a change of input is a new key.

Why each rule:

* **Atomic publication.**  ``build`` writes into a fresh temporary folder inside the cache
  (same file system), the manifest is written last, and the folder is renamed onto its final
  name in one step, so no process ever sees half an entry under the final name.  A process
  killed while building leaves only a ``.tmp-`` folder, removed by the next build of that key
  or by :meth:`BuildCache.clear`.
* **One builder per key.**  An exclusive lock file per key (``fcntl.flock`` on POSIX,
  ``msvcrt.locking`` on Windows) makes concurrent processes wait for the one that builds and
  then reuse its entry.  Where the file system refuses locks (some network file systems) the
  cache runs lock-free: every process may build, the first rename wins and the others discard
  their copy, so the result is the same at the price of duplicated work.
* **Checksums instead of fsync.**  Nothing is flushed to disk before the rename; an entry cut
  short by a crash or power loss fails its checksum on the next use and is rebuilt with a note.
* **A private cache only.**  The cache holds code that is loaded into the process, so a root
  folder that another user could write (not owned by us, or group/world-writable) is not used:
  another user could plant a library there.  Such a root, and one that cannot be written,
  falls back to a private temporary folder for the rest of the process, with one note.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import functools
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple

from .errors import FmiAdjointError

__all__ = [
    "BuildCache",
    "CacheEntry",
    "CacheError",
    "CacheInfo",
    "CacheUsageError",
    "compiler_fingerprint",
    "default_cache_root",
    "fingerprint",
    "source_fingerprint",
]

#: Version of the entry layout and manifest; entries of another version are rebuilt.
FORMAT_VERSION = 1
#: The file of an entry that lists its other files (a name ``build`` may not write).
MANIFEST = "MANIFEST.json"
#: Environment variable naming the cache folder.
CACHE_VARIABLE = "FMI_ADJOINT_CACHE"

_KIND = re.compile(r"[a-z][a-z0-9_]{0,31}")
# Lowercase (case-insensitive file systems) and no '-' (it separates the parts of the names of
# temporary folders, '.tmp-<key>-<random>').
_KEY = re.compile(r"[0-9a-z_]{8,128}")
_SOURCE_SUFFIXES = (".py", ".c", ".h")
_VERSION_TIMEOUT = 10.0


class CacheError(FmiAdjointError, OSError):
    """The build cache cannot be read or changed, and there is no fallback (e.g. ``clear``)."""


class CacheUsageError(FmiAdjointError, ValueError):
    """A caller of :class:`BuildCache` broke its contract (bad kind or key, reserved file name)."""


class CacheEntry(NamedTuple):
    """One entry as :meth:`BuildCache.info` lists it."""

    kind: str
    key: str
    size_bytes: int
    created: datetime


@dataclass(frozen=True)
class CacheInfo:
    """What the cache folder holds.

    Attributes
    ----------
    root : Path
        The cache folder.
    entries : tuple of CacheEntry
        ``(kind, key, size_bytes, created)`` of every entry, sorted by kind and key.
    total_bytes : int
        Size of all files of the entries (their manifests included).
    usable : bool
        Whether new builds are stored in ``root`` (else in a private temporary folder).
    reason : str
        Why ``root`` is not usable; empty if it is.
    """

    root: Path
    entries: tuple[CacheEntry, ...]
    total_bytes: int
    usable: bool
    reason: str


# ---------------------------------------------------------------------------------------------
# Where the cache lives and what its keys are made of


def default_cache_root() -> Path:
    """The cache folder: ``$FMI_ADJOINT_CACHE`` if set and non-empty, else the platform's
    user cache folder + ``fmi-adjoint``.

    The user cache folder is ``$XDG_CACHE_HOME`` (if absolute, as the XDG specification
    requires) or ``~/.cache`` on Linux and other POSIX systems, ``~/Library/Caches`` on macOS
    and ``%LOCALAPPDATA%`` on Windows.
    """
    override = os.environ.get(CACHE_VARIABLE, "")
    if override:
        return Path(override).expanduser()
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA", "")
        base = Path(local) if local else Path.home() / "AppData" / "Local"
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        xdg = os.environ.get("XDG_CACHE_HOME", "")
        base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "fmi-adjoint"


def fingerprint(*parts: str | bytes) -> str:
    """SHA-256 (hex) of ``parts``, each prefixed with its length.

    The length prefix (8 bytes, big-endian) makes the encoding unambiguous:
    ``("ab", "c")`` and ``("a", "bc")`` hash differently, and so do ``()`` and ``("",)``.
    A ``str`` is hashed as its UTF-8 bytes, so ``"a"`` and ``b"a"`` are the same part.
    """
    digest = hashlib.sha256()
    for part in parts:
        if isinstance(part, str):
            data = part.encode("utf-8")
        elif isinstance(part, bytes):
            data = part
        else:
            raise CacheUsageError(f"fingerprint: part {part!r} is a {type(part).__name__}; give str or bytes.")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


def _package_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("fmi-adjoint")
    except metadata.PackageNotFoundError:
        return "unknown"


def _tree_fingerprint(folder: Path, version: str) -> str:
    """Fingerprint of ``version`` and every ``*.py``, ``*.c``, ``*.h`` file under ``folder``
    (sorted relative paths, each followed by the file's bytes)."""
    files = sorted(
        path.relative_to(folder).as_posix()
        for path in folder.rglob("*")
        if path.suffix in _SOURCE_SUFFIXES and "__pycache__" not in path.parts and path.is_file()
    )
    parts: list[str | bytes] = ["fmi-adjoint", version]
    for name in files:
        parts += [name, (folder / name).read_bytes()]
    return fingerprint(*parts)


@functools.cache
def source_fingerprint() -> str:
    """Fingerprint of fmi-adjoint's own code: every ``*.py``, ``*.c`` and ``*.h`` file of the
    installed package and its version.

    Generated code depends on the generators and the C runtime, so any change of them (an
    editable install being edited included) must give new cache keys.  Computed once per
    process (10-40 ms for the package's ~1 MB of source) and kept: the generators that run
    in this process are the ones imported when it started, so a later edit of the files
    does not change the code this process generates.
    """
    return _tree_fingerprint(Path(__file__).resolve().parent, _package_version())


def compiler_fingerprint(compiler: str, flags: Sequence[str]) -> str:
    """Fingerprint of a C compiler and its flags: the path (as given and resolved), the
    output of ``compiler --version`` and ``flags`` in order.

    ``--version`` runs once, without a shell, for at most 10 s; if it cannot run, fails or
    times out, the path alone identifies the compiler (a compiler replaced in place then
    reuses old entries, which is the best that can be known).
    """
    try:
        proc = subprocess.run([compiler, "--version"], capture_output=True, timeout=_VERSION_TIMEOUT,
                              stdin=subprocess.DEVNULL, env={**os.environ, "LC_ALL": "C"}, check=False)
        version = proc.stdout + proc.stderr if proc.returncode == 0 else b""
    except (OSError, subprocess.SubprocessError, ValueError):
        version = b""
    return fingerprint("compiler", compiler, os.path.realpath(compiler), version, "flags", *flags)


# ---------------------------------------------------------------------------------------------
# Checks of the root folder


def _root_problem(root: Path, *, loading: bool = True) -> str | None:
    """Why ``root`` (an existing path) must not hold code we load, or None if it may.

    With ``loading=False`` (removing entries) a folder that others may write is acceptable;
    a folder that is not ours is not.
    """
    try:
        info = os.stat(root)
    except OSError as exc:
        return f"cannot read it: {exc.strerror or exc}"
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a folder"
    if sys.platform != "win32":  # Windows: the user's profile folder is private by its ACL
        if info.st_uid != os.geteuid():
            return f"it is owned by user id {info.st_uid}, not by you (user id {os.geteuid()})"
        if loading and info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            writers = [who for bit, who in ((stat.S_IWGRP, "group"), (stat.S_IWOTH, "world")) if info.st_mode & bit]
            return (f"it is {' and '.join(writers)}-writable (mode {stat.S_IMODE(info.st_mode):o}), so other users "
                    "could plant code in it; "
                    f"'chmod 700 {root}' makes it private")
    return None


def _create_root(root: Path) -> str | None:
    """Create ``root`` (mode 0o700) if missing; why it cannot hold loadable code, or None."""
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError:
        pass  # a file or a dangling link: _root_problem names it
    except OSError as exc:
        return f"cannot create it: {exc.strerror or exc}"
    return _root_problem(root)


def _os_reason(exc: OSError) -> str:
    where = f" ({exc.filename})" if exc.filename else ""
    return f"{exc.strerror or exc}{where}"


def _write_failure(exc: OSError) -> str:
    return f"cannot write in it: {_os_reason(exc)}"


class _Unusable(Exception):
    """Internal: the cache folder failed while the cache itself wrote to it (not ``build``)."""


# ---------------------------------------------------------------------------------------------
# Locks


@contextlib.contextmanager
def _key_lock(path: Path) -> Iterator[bool]:
    """Hold an exclusive lock on the file ``path`` (created if missing); yields whether a lock
    is held (False where the file system does not support locks: the caller runs lock-free)."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags, 0o600)
    try:
        locked = _lock(fd)
        try:
            yield locked
        finally:
            if locked:
                _unlock(fd)
    finally:
        os.close(fd)


if sys.platform == "win32":
    import msvcrt

    def _lock(fd: int) -> bool:
        # LK_LOCK retries for about 10 s and then fails with EDEADLOCK: keep waiting, as flock does.
        while True:
            try:
                os.lseek(fd, 0, os.SEEK_SET)
                msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
                return True
            except OSError as exc:
                if exc.errno != errno.EDEADLOCK:
                    raise

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                return False
            raise
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


# ---------------------------------------------------------------------------------------------
# Entries: manifest, verification, publication


def _files_of(folder: Path) -> list[str]:
    """Relative POSIX paths of the files under ``folder``, sorted; refuses anything but
    regular files and folders (a link could point the loader outside the entry)."""
    found = []
    for path in sorted(folder.rglob("*")):
        mode = path.lstat().st_mode
        if stat.S_ISDIR(mode):
            continue
        if not stat.S_ISREG(mode):
            raise CacheUsageError(f"the build wrote {path.relative_to(folder).as_posix()!r}, which is not a regular "
                                  "file (a link or special file); write regular files only.")
        found.append(path.relative_to(folder).as_posix())
    return found


def _sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _write_manifest(folder: Path, kind: str, key: str) -> None:
    names = _files_of(folder)
    if MANIFEST in names:
        raise CacheUsageError(f"the build wrote {MANIFEST}, the name the cache keeps for its list of files; "
                              "give that file another name.")
    manifest = {
        "format": FORMAT_VERSION,
        "kind": kind,
        "key": key,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "files": [{"path": name, "size": (folder / name).stat().st_size, "sha256": _sha256(folder / name)}
                  for name in names],
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")


def _read_manifest(folder: Path) -> dict:
    data = json.loads((folder / MANIFEST).read_bytes())
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def _damage(folder: Path, kind: str, key: str) -> str | None:
    """Why the entry ``folder`` is not intact ("missing" if absent), or None if it is.

    Files the manifest does not list are allowed: loading an entry may add some (Python's
    ``__pycache__`` next to generated modules), and they are never what is loaded.
    """
    try:
        manifest = _read_manifest(folder)
    except FileNotFoundError:
        return "missing" if not os.path.lexists(folder) else f"{MANIFEST} is missing"
    except (OSError, ValueError) as exc:
        return f"{MANIFEST} is unreadable: {exc}"
    if manifest.get("format") != FORMAT_VERSION:
        return f"{MANIFEST} has format {manifest.get('format')!r}, this version writes {FORMAT_VERSION}"
    if manifest.get("kind") != kind or manifest.get("key") != key:
        return f"{MANIFEST} names another entry ({manifest.get('kind')!r}, {manifest.get('key')!r})"
    files = manifest.get("files")
    if not isinstance(files, list):
        return f"{MANIFEST} lists no files"
    for item in files:
        try:
            name, size, digest = item["path"], item["size"], item["sha256"]
        except (TypeError, KeyError):
            return f"{MANIFEST} has a malformed file record"
        if not isinstance(name, str) or name.startswith("/") or ".." in name.split("/"):
            return f"{MANIFEST} names the file {name!r} outside the entry"
        path = folder / name
        try:
            actual = os.lstat(path)
        except OSError:
            return f"file {name} is missing"
        if not stat.S_ISREG(actual.st_mode):
            return f"{name} is not a regular file"
        if actual.st_size != size:
            return f"file {name} has {actual.st_size} bytes, the manifest says {size}"
        try:
            if _sha256(path) != digest:
                return f"file {name}: checksum mismatch"
        except OSError as exc:
            return f"file {name} is unreadable: {exc.strerror or exc}"
    return None


def _remove_tree(path: Path) -> None:
    """Remove a folder so that it is never visible half-removed under its name: rename it to
    a hidden trash name next to it first (POSIX ``rmtree`` removes files one by one)."""
    trash = path.with_name(f".trash-{path.name}-{os.getpid()}-{threading.get_ident()}")
    os.rename(path, trash)
    _remove_stale(trash)


def _remove_stale(path: Path) -> None:
    """Remove a hidden leftover (a folder, or a file that took an entry's name)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def _stale_folders(shard: Path, key: str | None = None) -> list[Path]:
    """The leftover ``.tmp-``/``.trash-`` folders in ``shard`` (of ``key`` only, if given)."""
    try:
        names = os.listdir(shard)
    except OSError:
        return []
    found = []
    for name in names:
        prefix, _, rest = name.partition("-")
        if prefix in (".tmp", ".trash") and (key is None or rest.split("-")[0] == key):
            found.append(shard / name)
    return found


def _build_entry(root: Path, kind: str, key: str, build: Callable[[Path], None],
                 note: Callable[[str], None]) -> Path:
    """The intact entry ``kind``/``key`` under ``root``, built if needed.

    Raises ``_Unusable`` when the cache's own writes fail, and whatever ``build`` raises.
    """
    final = root / kind / key[:2] / key
    if _damage(final, kind, key) is None:  # the warm path: no lock, a published entry never changes
        return final
    shard = final.parent
    with contextlib.ExitStack() as stack:
        try:
            shard.mkdir(mode=0o700, parents=True, exist_ok=True)
            locked = stack.enter_context(_key_lock(shard / f"{key}.lock"))
        except OSError as exc:
            raise _Unusable(_write_failure(exc)) from None
        damage = _damage(final, kind, key)  # again: another process may have built it meanwhile
        if damage is None:
            return final
        try:
            if locked:  # a .tmp/.trash of this key while nobody else holds the lock is from a killed process
                for stale in _stale_folders(shard, key):
                    _remove_stale(stale)
            if damage != "missing":
                _remove_tree(final)
            tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=shard))
        except OSError as exc:
            raise _Unusable(_write_failure(exc)) from None
        try:
            build(tmp)
            _write_manifest(tmp, kind, key)
            result = _publish(tmp, final, kind, key)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    if damage != "missing":
        note(f"fmi-adjoint: note: cache entry {kind}/{key[:16]} in {root} was corrupted ({damage}); rebuilt.")
    return result


def _publish(tmp: Path, final: Path, kind: str, key: str) -> Path:
    """Rename the finished ``tmp`` onto ``final``; if another process got there first (only
    possible without locks) keep its intact entry and discard ours."""
    for _ in range(2):
        try:
            os.rename(tmp, final)
            return final
        except OSError as exc:
            if not os.path.lexists(final):
                raise _Unusable(_write_failure(exc)) from None
        if _damage(final, kind, key) is None:
            shutil.rmtree(tmp, ignore_errors=True)
            return final
        try:
            _remove_tree(final)
        except OSError as exc:
            raise _Unusable(_write_failure(exc)) from None
    raise _Unusable(f"{final} is replaced by a damaged entry again and again")


def _entry_size(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*"):
        with contextlib.suppress(OSError):
            info = path.lstat()
            if stat.S_ISREG(info.st_mode):
                total += info.st_size
    return total


def _entry_created(folder: Path) -> datetime:
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        return datetime.fromisoformat(_read_manifest(folder)["created"])
    try:
        return datetime.fromtimestamp(folder.stat().st_mtime, timezone.utc)
    except OSError:
        return datetime.fromtimestamp(0, timezone.utc)


def _remove_private(path: str, owner: int) -> None:
    if os.getpid() == owner:  # a forked child inherits the atexit handlers; only the owner removes
        shutil.rmtree(path, ignore_errors=True)


class _Fallback:
    """The private temporary folder of a :class:`BuildCache` whose root is not usable.

    Made on first need and kept, with its entries, until the interpreter exits (``atexit``,
    not the cache object's lifetime: a library loaded from it must outlive the object)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._folder: Path | None = None

    def __reduce__(self) -> tuple:
        # A copy in another process (pickled with its BuildCache) makes its own folder.
        return (_Fallback, ())

    def folder(self, root: Path, reason: str, note: Callable[[str], None]) -> Path:
        with self._lock:
            if self._folder is None:
                try:
                    made = tempfile.mkdtemp(prefix="fmi-adjoint-build-")
                except OSError as exc:
                    raise CacheError(
                        f"the build cache {root} is not usable ({reason}), and no private temporary folder can be "
                        f"made ({_os_reason(exc)}); set {CACHE_VARIABLE} to a writable folder."
                    ) from None
                atexit.register(_remove_private, made, os.getpid())
                self._folder = Path(made)
                note(f"fmi-adjoint: note: the build cache {root} is not usable ({reason}); building in a private "
                     f"temporary folder. Set {CACHE_VARIABLE} to a writable folder.")
            return self._folder


def _print_note(text: str) -> None:
    print(text, file=sys.stderr)


def _check_name(kind: str, key: str) -> None:
    if not isinstance(kind, str) or not _KIND.fullmatch(kind):
        raise CacheUsageError(f"cache entry kind {kind!r}: give a short lowercase label such as 'model' or 'native' "
                              "(a letter, then up to 31 letters, digits or '_').")
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise CacheUsageError(f"cache entry key {key!r}: give a lowercase fingerprint (8 to 128 characters 0-9, a-z "
                              "or '_'), such as fingerprint() returns.")


# ---------------------------------------------------------------------------------------------
# The front door


@dataclass(frozen=True)
class BuildCache:
    """A build cache in the folder ``root`` (see the module docstring for its rules).

    Use :meth:`default` for the user's cache (``$FMI_ADJOINT_CACHE`` or the platform's cache
    folder).  The object is a value (compared and hashed by ``root``); it carries only the
    private fallback folder, made the first time ``root`` turns out unusable, so keep one
    object per process to build there once and note it once.

    Examples
    --------
    >>> cache = BuildCache.default()
    >>> key = fingerprint(source_fingerprint(), model_text)  # doctest: +SKIP
    >>> folder = cache.entry("model", key, lambda out: (out / "model.py").write_text(code))  # doctest: +SKIP
    """

    root: Path
    _fallback: _Fallback = field(default_factory=_Fallback, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Absolute now: a relative root must not move with later changes of the working folder.
        object.__setattr__(self, "root", Path(os.path.abspath(Path(self.root).expanduser())))

    @classmethod
    def default(cls) -> BuildCache:
        """The cache in :func:`default_cache_root`: one object per root and process, so an
        unusable root falls back to one private folder, with one note."""
        return _default_cache(default_cache_root())

    def entry(self, kind: str, key: str, build: Callable[[Path], None], *,
              note: Callable[[str], None] | None = None) -> Path:
        """The folder of the entry ``kind``/``key``, built by ``build`` if it is missing or damaged.

        Parameters
        ----------
        kind : str
            Short label of what is stored ("model", "native"): the first level of folders.
        key : str
            Fingerprint of everything that determines the files (:func:`fingerprint`).
        build : callable
            ``build(folder)`` writes the files (regular files, any sub-folders, not
            ``MANIFEST.json``) into the empty ``folder``; called at most once per call, and
            not at all when the entry is intact.  What it raises propagates unchanged, and
            nothing of the attempt is left behind.
        note : callable, optional
            Receives the one-line notes (entry corrupted and rebuilt, cache not usable);
            default: printed to stderr.

        Returns
        -------
        Path
            The entry folder.  Its files must not be changed; a concurrent ``clear`` (a
            user's command) may remove it, so load what is needed right away.

        Raises
        ------
        CacheUsageError
            ``kind`` or ``key`` is malformed, or ``build`` wrote a link or ``MANIFEST.json``.
        CacheError
            Neither the cache nor a private temporary folder can be written.
        """
        _check_name(kind, key)
        emit = _print_note if note is None else note
        reason = _create_root(self.root)
        if reason is None:
            try:
                return _build_entry(self.root, kind, key, build, emit)
            except _Unusable as exc:
                reason = str(exc)
        private = self._fallback.folder(self.root, reason, emit)
        try:
            return _build_entry(private, kind, key, build, emit)
        except _Unusable as exc:
            raise CacheError(f"the private build folder {private} failed ({exc}); set {CACHE_VARIABLE} to a "
                             "writable folder with free space.") from None

    def info(self) -> CacheInfo:
        """The entries of the cache and whether new builds can be stored in it.

        Reads only: creates no folder and verifies no checksum (:meth:`entry` does).

        Raises
        ------
        CacheError
            The root exists but cannot be listed.
        """
        root = self.root
        if not os.path.lexists(root):
            ancestor = root.parent
            while not os.path.lexists(ancestor) and ancestor != ancestor.parent:
                ancestor = ancestor.parent
            reason = ("" if os.path.isdir(ancestor) and os.access(ancestor, os.W_OK | os.X_OK) else
                      f"cannot create it: {ancestor} is {'not writable' if os.path.isdir(ancestor) else 'no folder'}")
            return CacheInfo(root, (), 0, not reason, reason)
        problem = _root_problem(root)
        if problem is None and not os.access(root, os.W_OK | os.X_OK):
            read_only = hasattr(os, "statvfs") and os.statvfs(root).f_flag & os.ST_RDONLY
            problem = f"cannot write in it: {os.strerror(errno.EROFS if read_only else errno.EACCES)}"
        entries: tuple[CacheEntry, ...] = ()
        if os.path.isdir(root):
            entries = tuple(CacheEntry(kind, key, _entry_size(folder), _entry_created(folder))
                            for kind, key, folder in self._entry_folders())
        return CacheInfo(root, entries, sum(e.size_bytes for e in entries), problem is None, problem or "")

    def clear(self) -> int:
        """Remove every entry (and leftovers of killed builds); returns the number of entries removed.

        Each entry is removed while its lock is held, so a build of the same key in another
        process finishes first.  The root folder and the (empty) lock files stay: removing a
        lock file another process waits on would let two processes build at once.

        Raises
        ------
        CacheError
            The root is not a folder, is another user's, or an entry cannot be removed.
        """
        root = self.root
        if not os.path.lexists(root):
            return 0
        problem = _root_problem(root, loading=False)
        if problem is not None:
            raise CacheError(f"cannot clear the build cache {root}: {problem}; set {CACHE_VARIABLE} to the cache "
                             "folder to clear.")
        removed = 0
        entries = self._entry_folders()
        shards = {folder.parent for _, _, folder in entries}
        with contextlib.suppress(OSError):
            shards |= {shard for kind_dir in root.iterdir() if kind_dir.is_dir() and _KIND.fullmatch(kind_dir.name)
                       for shard in kind_dir.iterdir() if shard.is_dir()}
        try:
            for _, key, folder in entries:
                with _key_lock(folder.parent / f"{key}.lock"):
                    if os.path.lexists(folder):
                        _remove_tree(folder)
                        removed += 1
            for shard in sorted(shards):
                for stale in _stale_folders(shard):
                    key = stale.name.split("-")[1]
                    if _KEY.fullmatch(key):
                        with _key_lock(shard / f"{key}.lock"):
                            _remove_stale(stale)
                    else:
                        _remove_stale(stale)
        except OSError as exc:
            raise CacheError(f"cannot clear the build cache {root}: {_os_reason(exc)}; make it writable "
                             f"('chmod u+rwx' on the folders) or remove it by hand.") from None
        return removed

    def _entry_folders(self) -> list[tuple[str, str, Path]]:
        """``(kind, key, folder)`` of every entry folder under the root (no checks of contents)."""
        found = []
        try:
            for kind_dir in sorted(self.root.iterdir()):
                if not (_KIND.fullmatch(kind_dir.name) and kind_dir.is_dir()):
                    continue
                for shard in sorted(kind_dir.iterdir()):
                    if len(shard.name) != 2 or not shard.is_dir():
                        continue
                    for folder in sorted(shard.iterdir()):
                        if (_KEY.fullmatch(folder.name) and folder.name[:2] == shard.name
                                and folder.is_dir() and not folder.is_symlink()):
                            found.append((kind_dir.name, folder.name, folder))
        except OSError as exc:
            raise CacheError(f"cannot read the build cache {self.root}: {_os_reason(exc)}; make it readable "
                             f"('chmod u+rwx') or set {CACHE_VARIABLE} to another folder.") from None
        return found


@functools.lru_cache(maxsize=8)
def _default_cache(root: Path) -> BuildCache:
    """:meth:`BuildCache.default` by root (a pure function of the root: the cache object
    holds no state but its fallback folder)."""
    return BuildCache(root)
