"""The on-disk build cache: derived models, generated code and compiled libraries, built once.

An entry is a folder of files that a ``build`` callable writes, stored under
``<root>/<kind>/<key[:2]>/<key>`` next to a ``MANIFEST.json`` that lists every file with its
size and SHA-256.  ``key`` is a fingerprint (:func:`fingerprint`) of everything that
determines the files, so an entry never goes stale: a change of input is a new key.  The
root holds a ``CACHEDIR.TAG`` that marks it as a cache made by fmi-adjoint.

Why each rule:

* **Atomic publication.**  ``build`` writes into a fresh temporary folder
  ``.tmp-<key>-<8 random>`` inside the shard (same file system), the manifest is written
  last, and the folder is renamed onto its final name in one step, so no process ever sees
  half an entry under the final name.  A process killed while building leaves only that
  folder, removed by the next build of that key or by :meth:`BuildCache.clear`.
* **One builder per key.**  An exclusive lock file per key (``fcntl.flock`` on POSIX,
  ``msvcrt.locking`` on Windows) makes concurrent processes wait for the one that builds and
  then reuse its entry.  Where the file system refuses locks (some network file systems) the
  cache runs lock-free: every process may build, the first rename wins and the others discard
  their copy, so the result is the same at the price of duplicated work.
* **Checksums instead of fsync.**  Nothing is flushed to disk before the rename; an entry cut
  short by a crash or power loss fails its checksum on the next use and is rebuilt with a note.
* **A marked root.**  ``clear`` removes folders, so it must know that the folder is a cache
  this tool made (``FMI_ADJOINT_CACHE`` may name any folder, by mistake).  The root carries a
  ``CACHEDIR.TAG`` (the cache-directory tag of https://bford.info/cachedir/: its signature
  line, which backup tools also honour, then a line naming fmi-adjoint and the layout).  A
  root the tool creates, and an existing empty one, get the tag.  A folder without the tag
  that holds anything is not a cache: ``clear`` and ``info`` refuse it by name, and builds go
  to the private temporary folder (no tag is written into a user's folder).  A cache of the
  previous version (no tag) is adopted only when every item in it is provably ours: kind
  folders holding shard folders that hold only entries with their manifest, empty
  ``<key>.lock`` files and leftovers named exactly as the cache names them.
* **Only what is provably an entry is removed, and only inside the root.**  ``clear`` and
  ``info`` take an entry to be a folder named by a key in the shard of that key whose
  ``MANIFEST.json`` names that kind and key, and a leftover only by the exact names the cache
  gives them (``.tmp-<key>-<8 random>``, ``.trash-<key>-<pid>-<thread>``).  Every folder is
  opened relative to its parent with ``O_NOFOLLOW`` and removed through that descriptor, so a
  link (or a folder swapped for a link meanwhile) never leads out of the root; links and what
  is kept are reported as notes.
* **Private modes whatever the umask.**  Every folder the cache creates is made 0700 and every
  file 0600 explicitly (``chmod`` after creating; the umask can only remove bits), including
  the files ``build`` writes, which are set before publication: other users can neither read
  the generated code nor put anything into the cache.  Libraries load from 0600 files (the
  dynamic loader needs read access, not the execute bit).
* **Trust before loading, as ssh trusts ``authorized_keys``.**  The cache holds code that is
  loaded into the process, so every folder from the root to a file, and the file, must be
  owned by us and not group/world-writable, and no link is followed inside the root (the
  root itself may be a link: the user chose it; its ancestors are the user's).  Anything else
  (say a folder made 0777 by an older version under ``umask 000``, into which another user
  planted a library) is never loaded: the entry is built in a private temporary folder
  instead, with one note naming the path, why, and the fix.
* **The bytes checked are the bytes used.**  A file is opened once (``O_NOFOLLOW``), its owner,
  mode and type are checked on that descriptor, and it is hashed against the manifest from
  it: generated Python is read from those very bytes, and a library is loaded through
  ``/proc/self/fd/N`` of that descriptor (Linux).  The descriptor stays open for the life of
  the process, because the dynamic loader knows loaded libraries by name: a number reused for
  another library would return the first one.
* **``clear`` waits with a bound.**  It waits for an entry another process is building (with a
  note) for at most ``lock_timeout`` seconds, then stops with an error naming the entry.
* **A private fallback.**  A root that another user could write (not owned by us, or
  group/world-writable), one that cannot be written, and one that is not a cache fall back
  to a private temporary folder for the rest of the process, with one note per reason.
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
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from .errors import FmiAdjointError

if TYPE_CHECKING:
    import ctypes

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
#: The file that marks a cache root (https://bford.info/cachedir/).
MARKER = "CACHEDIR.TAG"
#: Environment variable naming the cache folder.
CACHE_VARIABLE = "FMI_ADJOINT_CACHE"
#: How long ``clear`` waits for an entry another process holds, by default (seconds).
LOCK_TIMEOUT = 60.0

_SIGNATURE = b"Signature: 8a477f597d28d172789f06886806bc55"
_TAG_LINE = b"# This file is a cache directory tag created by fmi-adjoint"
_MARKER_TEXT = (_SIGNATURE + b"\n" + _TAG_LINE + b" (build cache layout " + str(FORMAT_VERSION).encode() + b").\n"
                b"# For information about cache directory tags, see https://bford.info/cachedir/\n")

_KIND = re.compile(r"[a-z][a-z0-9_]{0,31}")
# Lowercase (case-insensitive file systems) and no '-' (it separates the parts of the names of
# temporary folders, '.tmp-<key>-<random>').
_KEY = re.compile(r"[0-9a-z_]{8,128}")
_SHARD = re.compile(r"[0-9a-z_]{2}")
_RANDOM = "abcdefghijklmnopqrstuvwxyz0123456789_"  # tempfile's alphabet, as the previous version used
_TMP_NAME = re.compile(r"\.tmp-([0-9a-z_]{8,128})-[0-9a-z_]{8}")
_TRASH_NAME = re.compile(r"\.trash-([0-9a-z_]{8,128})-[0-9]{1,10}-[0-9]{1,24}")
_LOCK_NAME = re.compile(r"([0-9a-z_]{8,128})\.lock")
_MARKER_TMP = re.compile(r"\.CACHEDIR\.TAG-[0-9a-z_]{8}")
_MANIFEST_LIMIT = 16 << 20  # bytes; a manifest lists a few files
_ADOPT_LIMIT = 100_000  # items looked at before an untagged folder is called "not a cache"
_POLL = 0.05  # seconds between attempts to take a lock with a timeout
_SOURCE_SUFFIXES = (".py", ".c", ".h", ".cpp")
_VERSION_TIMEOUT = 10.0

_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO planted under a file's name must not block open()
_O_BINARY = getattr(os, "O_BINARY", 0)
# Folder descriptors (openat, fstatat, renameat, unlinkat): everything below the root is reached
# relative to an open folder, never by a path that a link could redirect.  Windows has none; there
# paths are used, each checked with lstat (and the owner/mode checks do not apply: ACLs).
_FDS = {os.open, os.stat, os.mkdir, os.rename, os.unlink} <= os.supports_dir_fd and os.scandir in os.supports_fd


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
    skipped : tuple of str
        What was not listed and why (links, folders without a valid manifest).
    """

    root: Path
    entries: tuple[CacheEntry, ...]
    total_bytes: int
    usable: bool
    reason: str
    skipped: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------
# Where the cache lives and what its keys are made of


def default_cache_root() -> Path:
    """The cache folder: ``$FMI_ADJOINT_CACHE`` if set and non-empty, else the platform's
    user cache folder + ``fmi-adjoint``.

    The user cache folder is ``$XDG_CACHE_HOME`` (if absolute, as the XDG specification
    requires) or ``~/.cache`` on Linux and other POSIX systems, ``~/Library/Caches`` on macOS
    and ``%LOCALAPPDATA%`` on Windows.

    Raises
    ------
    CacheError
        ``$FMI_ADJOINT_CACHE`` cannot name a folder (a NUL character, ``~user`` of an
        unknown user).
    """
    override = os.environ.get(CACHE_VARIABLE, "")
    if override:
        return _checked_root(override, CACHE_VARIABLE)
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA", "")
        base = Path(local) if local else Path.home() / "AppData" / "Local"
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        xdg = os.environ.get("XDG_CACHE_HOME", "")
        base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "fmi-adjoint"


def _checked_root(value: str, source: str) -> Path:
    """``value`` as a folder path, ``~`` and ``~user`` expanded; a CacheError naming ``source``
    (the variable or argument it came from) if it cannot name a folder."""
    fix = (f"set {source} to a folder path such as $HOME/.cache/fmi-adjoint (relative paths are fine)"
           if source == CACHE_VARIABLE else "give a folder path")
    if "\0" in value:
        raise CacheError(f"{source}={value!r} contains a NUL character, which no path can hold; {fix}.")
    if not value.startswith("~"):
        return Path(value)
    try:
        expanded = os.path.expanduser(value)
    except (RuntimeError, KeyError, OSError):
        expanded = value
    if expanded.startswith("~"):
        user = re.split(r"[/\\]", value[1:], maxsplit=1)[0]
        who = f"there is no user '{user}'" if user else "the home folder is unknown (HOME is not set)"
        raise CacheError(f"{source}={value!r}: '~{user}' cannot be expanded ({who}); {fix}.")
    return Path(expanded)


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
def library_versions() -> tuple[str, ...]:
    """Python's version and those of the libraries that shape generated code: sympy (derivatives),
    numpy, scipy and pymetis (the storage and ordering of the generated matrices), from the
    installed metadata (nothing is imported); part of the build keys."""
    from importlib import metadata  # noqa: PLC0415 (on use: only a key needs it)

    found = []
    for name in ("sympy", "numpy", "scipy", "pymetis"):
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} ?")
    return (sys.version, *found)


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
    reuses old entries, which is the best that can be known).  The result is kept for the
    process while the resolved file keeps its identity (device, inode, size, modification
    time): a warm start then runs no process (issue 24, part 6), and a compiler replaced
    meanwhile is asked again.
    """
    resolved = os.path.realpath(compiler)
    try:
        info = os.stat(resolved)
    except OSError:
        return _compiler_fingerprint(compiler, tuple(flags))
    memo = (compiler, resolved, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, tuple(flags))
    known = _COMPILERS.get(memo)
    if known is None:
        known = _compiler_fingerprint(compiler, tuple(flags))
        # As git's "racy clean" rule: a file changed within the timestamps' granularity of
        # now could change again unseen (same size and time), so it is not kept.
        if time.time_ns() - info.st_mtime_ns > _RACY_NS:
            _COMPILERS[memo] = known
    return known


#: :func:`compiler_fingerprint` by the compiler file's identity, for the process.
_COMPILERS: dict[tuple, str] = {}
_RACY_NS = 2_000_000_000


def _compiler_fingerprint(compiler: str, flags: tuple[str, ...]) -> str:
    try:
        proc = subprocess.run([compiler, "--version"], capture_output=True, timeout=_VERSION_TIMEOUT,
                              stdin=subprocess.DEVNULL, env={**os.environ, "LC_ALL": "C"}, check=False)
        version = proc.stdout + proc.stderr if proc.returncode == 0 else b""
    except (OSError, subprocess.SubprocessError, ValueError):
        version = b""
    return fingerprint("compiler", compiler, os.path.realpath(compiler), version, "flags", *flags)


# ---------------------------------------------------------------------------------------------
# Folders reached through descriptors, and what may be trusted


class _Refused(Exception):
    """Internal: a path in the cache that must not be trusted or followed (the text names it,
    why, and the fix)."""


class _Damaged(Exception):
    """Internal: an entry that is not intact (the text says why; "missing" if it is absent)."""


class _Unusable(Exception):
    """Internal: the cache folder failed while the cache itself wrote to it (not ``build``)."""


def _named(exc: OSError, path: Path) -> OSError:
    """``exc`` naming the full ``path`` (calls relative to a folder descriptor name only the last part)."""
    exc.filename = str(path)
    return exc


class _Dir:
    """An open folder inside the cache: every operation is relative to it, and opening a
    sub-folder never follows a link, so nothing reached from it is outside the root."""

    __slots__ = ("path", "fd")

    def __init__(self, path: Path, fd: int | None):
        self.path = path
        self.fd = fd

    @classmethod
    def open(cls, path: Path) -> _Dir:
        """The folder ``path`` (a link to a folder is followed: this is the root, the user's choice)."""
        if not _FDS:
            if not os.path.isdir(path):
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path))
            return cls(path, None)
        return cls(path, os.open(path, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC))

    def __enter__(self) -> _Dir:
        return self

    def __exit__(self, *exc_info) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def _at(self, name: str) -> tuple[str, dict]:
        return (name, {"dir_fd": self.fd}) if self.fd is not None else (str(self.path / name), {})

    def stat(self) -> os.stat_result:
        return os.fstat(self.fd) if self.fd is not None else os.stat(self.path)

    def lstat(self, name: str) -> os.stat_result:
        where, kw = self._at(name)
        try:
            return os.stat(where, follow_symlinks=False, **kw)
        except OSError as exc:
            raise _named(exc, self.path / name) from None

    def sub(self, name: str) -> _Dir:
        """The sub-folder ``name``; ``_Refused`` for a link, NotADirectoryError for anything else."""
        path = self.path / name
        mode = self.lstat(name).st_mode
        if stat.S_ISLNK(mode):
            raise _Refused(f"{path} is a symbolic link (the cache never follows links inside it); remove it")
        if not stat.S_ISDIR(mode):
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path))
        if self.fd is None:
            return _Dir(path, None)
        try:
            return _Dir(path, os.open(name, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=self.fd))
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # replaced by a link since the lstat
                raise _Refused(f"{path} is a symbolic link (the cache never follows links inside it); "
                               "remove it") from None
            raise _named(exc, path) from None

    def private_folder(self, name: str) -> _Dir:
        """The sub-folder ``name``, created with mode 0700 if missing; ``_Refused`` if it is not
        private (our own, not group/world-writable, no link)."""
        where, kw = self._at(name)
        created = True
        try:
            os.mkdir(where, 0o700, **kw)
        except FileExistsError:
            created = False
        except OSError as exc:
            raise _named(exc, self.path / name) from None
        folder = self.sub(name)
        try:
            if created:
                _chmod(folder.fd, folder.path, 0o700)  # the umask may have taken bits we need
            _check(folder.path, folder.stat())
        except BaseException:
            folder.__exit__()
            raise
        return folder

    def open_file(self, name: str, flags: int, mode: int = 0o600) -> int:
        """A descriptor of the file ``name`` (never through a link: ``_Refused``)."""
        where, kw = self._at(name)
        try:
            return os.open(where, flags | _O_NOFOLLOW | _O_CLOEXEC | _O_BINARY, mode, **kw)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _Refused(f"{self.path / name} is a symbolic link (the cache never follows links inside "
                               "it); remove it") from None
            raise _named(exc, self.path / name) from None

    def items(self) -> list[os.DirEntry]:
        """The folder's items, sorted by name (``is_dir(follow_symlinks=False)`` tells folders)."""
        with os.scandir(self.fd if self.fd is not None else self.path) as found:
            return sorted(found, key=lambda item: item.name)

    def rename(self, old: str, new: str) -> None:
        try:
            if self.fd is not None:
                os.rename(old, new, src_dir_fd=self.fd, dst_dir_fd=self.fd)
            else:
                os.rename(self.path / old, self.path / new)
        except OSError as exc:
            raise _named(exc, self.path / old) from None

    def remove(self, name: str) -> None:
        """Remove the item ``name`` (a folder with everything in it, never following a link)."""
        where, kw = self._at(name)
        if stat.S_ISDIR(self.lstat(name).st_mode):
            shutil.rmtree(where, ignore_errors=True, **kw)  # the descriptor-based rmtree: no links followed
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(where, **kw)


def _chmod(fd: int | None, path: Path, mode: int) -> None:
    if fd is not None and hasattr(os, "fchmod"):
        os.fchmod(fd, mode)
    else:
        os.chmod(path, mode)


def _trust_problem(path: Path, info: os.stat_result) -> str | None:
    """Why ``path`` (with the status ``info``) must not hold or be code we load, or None."""
    if sys.platform == "win32":  # the user's profile folder is private by its ACL
        return None
    if info.st_uid != os.geteuid():
        return (f"{path} is owned by user id {info.st_uid}, not by you (user id {os.geteuid()}), so it may hold "
                "another user's code; remove it")
    writers = _writers(info.st_mode)
    if writers:
        return (f"{path} is {writers}-writable (mode {stat.S_IMODE(info.st_mode):o}), so other users "
                f"could plant code in it; 'chmod go-w {path}' makes it private")
    return None


def _writers(mode: int) -> str:
    """Who besides the owner may write a file of ``mode``: "group", "world", "group and world" or ""."""
    return " and ".join(who for bit, who in ((stat.S_IWGRP, "group"), (stat.S_IWOTH, "world")) if mode & bit)


def _check(path: Path, info: os.stat_result) -> None:
    problem = _trust_problem(path, info)
    if problem is not None:
        raise _Refused(problem)


def _root_problem(root: Path, info: os.stat_result, *, loading: bool = True) -> str | None:
    """Why the root folder ``root`` (status ``info``, links followed) must not hold code we
    load, or None if it may.

    With ``loading=False`` (removing entries) a folder that others may write is acceptable;
    a folder that is not ours is not.
    """
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a folder"
    if sys.platform != "win32":
        if info.st_uid != os.geteuid():
            return f"it is owned by user id {info.st_uid}, not by you (user id {os.geteuid()})"
        writers = _writers(info.st_mode)
        if loading and writers:
            return (f"it is {writers}-writable (mode {stat.S_IMODE(info.st_mode):o}), so other users "
                    "could plant code in it; "
                    f"'chmod 700 {root}' makes it private")
    return None


def _os_reason(exc: OSError) -> str:
    where = f" ({exc.filename})" if exc.filename else ""
    return f"{exc.strerror or exc}{where}"


def _broken_link(root: Path) -> str | None:
    """Why ``root`` is a symbolic link that leads nowhere (dangling, or a loop), else None."""
    try:
        target = os.readlink(root)
    except OSError:  # not a link (or gone)
        return None
    try:
        os.stat(root)
    except FileNotFoundError:
        return f"it is a dangling symbolic link (to {target!r}, which does not exist)"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"it is a symbolic link (to {target!r}) that loops back on itself"
        return None
    return None


def _link_fix(root: Path) -> str:
    return (f"remove the link ('rm {root}'; a cache folder is then created there) or point it at a folder, or set "
            f"{CACHE_VARIABLE} to another folder")


def _write_failure(exc: OSError) -> str:
    return f"cannot write in it: {_os_reason(exc)}"


def _random_name() -> str:
    return "".join(secrets.choice(_RANDOM) for _ in range(8))


# ---------------------------------------------------------------------------------------------
# The marker of a cache root


def _has_marker(root: _Dir) -> bool:
    """Whether ``root`` holds fmi-adjoint's ``CACHEDIR.TAG`` (a regular file, no link)."""
    try:
        fd = root.open_file(MARKER, os.O_RDONLY | _O_NONBLOCK)
    except (OSError, _Refused):
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        data = os.read(fd, 4096)
    except OSError:
        return False
    finally:
        os.close(fd)
    return data.startswith(_SIGNATURE + b"\n") and _TAG_LINE in data


def _write_marker(root: _Dir) -> None:
    """Write the marker atomically (a partial one must never be read as "not a cache")."""
    name = f".CACHEDIR.TAG-{_random_name()}"
    fd = root.open_file(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        _chmod(fd, root.path / name, 0o600)
        os.write(fd, _MARKER_TEXT)
    finally:
        os.close(fd)
    root.rename(name, MARKER)


def _not_a_cache(root: Path, item: str) -> str:
    return (f"{root} is not an fmi-adjoint cache: no {MARKER} from fmi-adjoint in it, and it holds other things "
            f"({item}); point {CACHE_VARIABLE} at the cache folder, or at a new or empty folder")


def _shard_item(shard: _Dir, item: os.DirEntry, kind: str) -> str | None:
    """What ``item`` of ``shard`` (in the kind folder ``kind``) provably is: "entry", "lock",
    "leftover", or None (not something the cache makes)."""
    name, prefix = item.name, shard.path.name
    if item.is_symlink():
        return None
    if _KEY.fullmatch(name) and name[:2] == prefix and item.is_dir(follow_symlinks=False):
        return "entry" if _entry_manifest(shard, name, kind) is not None else None
    lock = _LOCK_NAME.fullmatch(name)
    if lock and lock.group(1)[:2] == prefix and item.is_file(follow_symlinks=False):
        return "lock" if item.stat(follow_symlinks=False).st_size == 0 else None  # lock files stay empty
    return "leftover" if _leftover_key(shard, item) is not None else None


def _untagged(root: _Dir) -> str | None:
    """None if ``root`` is tagged, or an untagged folder that may be tagged (empty, or a cache
    of the previous version); else an item that shows it is not a cache."""
    if _has_marker(root):
        return None
    foreign = _foreign_item(root)
    # Another process may have tagged a new root while it was looked at (and started building).
    return None if foreign is None or _has_marker(root) else foreign


def _foreign_item(root: _Dir) -> str | None:
    """An item of the untagged folder ``root`` that shows it is not a cache (made by this or
    the previous version), or None if it is empty or provably such a cache."""
    proven, budget = False, _ADOPT_LIMIT
    for item in root.items():
        if _MARKER_TMP.fullmatch(item.name) and item.is_file(follow_symlinks=False):
            continue  # a marker being written by another process
        if item.is_symlink() or not (_KIND.fullmatch(item.name) and item.is_dir(follow_symlinks=False)):
            return item.name
        with root.sub(item.name) as kind_dir:
            for shard_item in kind_dir.items():
                where = f"{item.name}/{shard_item.name}"
                if shard_item.is_symlink() or not (_SHARD.fullmatch(shard_item.name)
                                                   and shard_item.is_dir(follow_symlinks=False)):
                    return where
                with kind_dir.sub(shard_item.name) as shard:
                    for inner in shard.items():
                        budget -= 1
                        what = _shard_item(shard, inner, item.name) if budget > 0 else None
                        if what is None:
                            return f"{where}/{inner.name}" if budget > 0 else f"more than {_ADOPT_LIMIT} items"
                        proven = proven or what != "leftover"
        if not proven:
            return f"{item.name}, which holds no cache entry"
    return None


# ---------------------------------------------------------------------------------------------
# Locks


class _LockTimeout(Exception):
    """Internal: a lock was not free within the timeout."""


@contextlib.contextmanager
def _key_lock(shard: _Dir, name: str, *, timeout: float | None = None,
              waiting: Callable[[], None] | None = None) -> Iterator[bool]:
    """Hold an exclusive lock on the file ``name`` in ``shard`` (created if missing); yields
    whether a lock is held (False where the file system does not support locks: the caller
    runs lock-free).  If the lock is taken, ``waiting()`` is called once; after ``timeout``
    seconds (None: no limit) ``_LockTimeout`` is raised."""
    fd = shard.open_file(name, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        locked = _try_lock(fd)
        if locked is False:
            if waiting is not None:
                waiting()
            locked = _wait_lock(fd, timeout)
        try:
            yield locked is not None
        finally:
            if locked:
                _unlock(fd)
    finally:
        os.close(fd)


def _wait_lock(fd: int, timeout: float | None) -> bool | None:
    if timeout is None and sys.platform != "win32":
        return _block_lock(fd)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        remaining = _POLL if deadline is None else deadline - time.monotonic()
        if remaining <= 0:
            raise _LockTimeout
        time.sleep(min(_POLL, remaining))
        locked = _try_lock(fd)
        if locked is not False:
            return locked


if sys.platform == "win32":
    import msvcrt

    def _try_lock(fd: int) -> bool | None:
        """True: locked; False: another process holds it; None: no locks on this file system."""
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EDEADLOCK):
                return False
            raise
        return True

    def _block_lock(fd: int) -> bool | None:  # pragma: no cover - _wait_lock polls on Windows
        raise AssertionError("unreachable")

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    _NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS)

    def _try_lock(fd: int) -> bool | None:
        """True: locked; False: another process holds it; None: no locks on this file system."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError as exc:
            if exc.errno in _NO_LOCKS:
                return None
            raise
        return True

    def _block_lock(fd: int) -> bool | None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            if exc.errno in _NO_LOCKS:
                return None
            raise
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


# ---------------------------------------------------------------------------------------------
# Entries: manifest, verification, publication


class _Verified(NamedTuple):
    """A file of an entry as checked: its bytes and the open descriptor they were read from."""

    data: bytes
    fd: int


def _read_fd(fd: int, keep: bool) -> tuple[str, bytes]:
    """SHA-256 (hex) of the file ``fd`` from its start, and its bytes if ``keep``."""
    digest, chunks = hashlib.sha256(), []
    os.lseek(fd, 0, os.SEEK_SET)
    while chunk := os.read(fd, 1 << 20):
        digest.update(chunk)
        if keep:
            chunks.append(chunk)
    return digest.hexdigest(), b"".join(chunks)


def _open_regular(folder: _Dir, name: str, label: str, *, trust: bool) -> tuple[int, os.stat_result]:
    """``(fd, fstat)`` of the file ``name`` in ``folder``, opened without following a link;
    ``_Damaged`` (named ``label``) if it is missing or unreadable, ``_Refused`` if it is not a
    regular file or (``trust``) not private.  The caller closes ``fd``."""
    path = folder.path / name
    try:
        fd = folder.open_file(name, os.O_RDONLY | _O_NONBLOCK)
    except FileNotFoundError:
        raise _Damaged(f"{label} is missing") from None
    except OSError as exc:
        raise _Damaged(f"{label} is unreadable: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _Refused(f"{path} is not a regular file; remove it")
        if trust:
            _check(path, info)
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def _read_manifest(folder: _Dir, *, trust: bool) -> dict:
    """The manifest of the entry ``folder``; ``_Damaged`` if it is missing or unreadable,
    ``_Refused`` if it is a link, not a regular file, or (``trust``) not private."""
    fd, info = _open_regular(folder, MANIFEST, MANIFEST, trust=trust)
    try:
        if info.st_size > _MANIFEST_LIMIT:
            raise _Damaged(f"{MANIFEST} is unreadable: larger than {_MANIFEST_LIMIT} bytes")
        data = os.read(fd, _MANIFEST_LIMIT + 1)
    except OSError as exc:
        raise _Damaged(f"{MANIFEST} is unreadable: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    try:
        manifest = json.loads(data)
    except ValueError as exc:
        raise _Damaged(f"{MANIFEST} is unreadable: {exc}") from None
    if not isinstance(manifest, dict):
        raise _Damaged(f"{MANIFEST} is unreadable: not a JSON object")
    return manifest


def _entry_manifest(shard: _Dir, key: str, kind: str) -> dict | None:
    """The manifest of the folder ``key`` in ``shard`` if it names ``kind`` and ``key`` (so the
    folder is provably an entry), else None.  Checks no file: ``clear`` and ``info`` only."""
    try:
        with shard.sub(key) as folder:
            manifest = _read_manifest(folder, trust=False)
    except (OSError, _Refused, _Damaged):
        return None
    if manifest.get("kind") != kind or manifest.get("key") != key or not isinstance(manifest.get("files"), list):
        return None
    return manifest


def _open_parts(folder: _Dir, parts: list[str], stack: contextlib.ExitStack, name: str) -> _Dir:
    """The sub-folder ``parts`` of ``folder``, each part checked private; ``_Damaged`` if missing."""
    for part in parts:
        try:
            folder = stack.enter_context(folder.sub(part))
        except (FileNotFoundError, NotADirectoryError):
            raise _Damaged(f"file {name} is missing") from None
        _check(folder.path, folder.stat())
    return folder


def _verify(root: _Dir, kind: str, key: str, keep: Collection[str] = ()) -> dict[str, _Verified]:
    """Check the entry ``kind``/``key`` under ``root`` and return the files named in ``keep``
    with their bytes and open descriptors (the caller closes them).

    Every folder from ``root`` down and every listed file must be private (``_Refused``), and
    the files must match the manifest (``_Damaged``).  Files the manifest does not list are
    allowed: loading an entry may add some (Python's ``__pycache__``), and they are never
    what is loaded.
    """
    found: dict[str, _Verified] = {}
    try:
        with contextlib.ExitStack() as stack:
            folder = root
            for part in (kind, key[:2], key):
                try:
                    folder = stack.enter_context(folder.sub(part))
                except FileNotFoundError:
                    raise _Damaged("missing") from None
                except NotADirectoryError:
                    if part == key:
                        raise _Damaged("it is not a folder") from None
                    raise _Refused(f"{folder.path / part} is not a folder; remove it") from None
                _check(folder.path, folder.stat())
            manifest = _read_manifest(folder, trust=True)
            if manifest.get("format") != FORMAT_VERSION:
                raise _Damaged(f"{MANIFEST} has format {manifest.get('format')!r}, this version writes "
                               f"{FORMAT_VERSION}")
            if manifest.get("kind") != kind or manifest.get("key") != key:
                raise _Damaged(f"{MANIFEST} names another entry ({manifest.get('kind')!r}, {manifest.get('key')!r})")
            files = manifest.get("files")
            if not isinstance(files, list):
                raise _Damaged(f"{MANIFEST} lists no files")
            for item in files:
                _verify_file(folder, item, found, keep)
            missing = sorted(set(keep) - set(found))
            if missing:
                raise _Damaged(f"{MANIFEST} does not list {missing[0]}")
            return found
    except BaseException:
        for verified in found.values():
            os.close(verified.fd)
        raise


def _verify_file(folder: _Dir, item: object, found: dict[str, _Verified], keep: Collection[str]) -> None:
    try:
        name, size, digest = item["path"], item["size"], item["sha256"]  # type: ignore[index]
    except (TypeError, KeyError):
        raise _Damaged(f"{MANIFEST} has a malformed file record") from None
    parts = name.split("/") if isinstance(name, str) else [""]
    if any(part in ("", ".", "..") or "\\" in part or "\0" in part for part in parts):
        raise _Damaged(f"{MANIFEST} names the file {name!r} outside the entry")
    with contextlib.ExitStack() as stack:
        where = _open_parts(folder, parts[:-1], stack, name)
        fd, info = _open_regular(where, parts[-1], f"file {name}", trust=True)
        try:
            if info.st_size != size:
                raise _Damaged(f"file {name} has {info.st_size} bytes, the manifest says {size}")
            try:
                actual, data = _read_fd(fd, name in keep)
            except OSError as exc:
                raise _Damaged(f"file {name} is unreadable: {exc.strerror or exc}") from None
            if actual != digest:
                raise _Damaged(f"file {name}: checksum mismatch")
            if name in keep:
                found[name] = _Verified(data, fd)
                fd = -1
        finally:
            if fd >= 0:
                os.close(fd)


def _seal(folder: _Dir, kind: str, key: str) -> None:
    """Make everything ``build`` wrote into ``folder`` private (0700/0600 whatever the umask)
    and write the manifest, from the same descriptors."""
    records: list[dict] = []
    _seal_folder(folder, "", records)
    if any(record["path"] == MANIFEST for record in records):
        raise CacheUsageError(f"the build wrote {MANIFEST}, the name the cache keeps for its list of files; "
                              "give that file another name.")
    manifest = {
        "format": FORMAT_VERSION,
        "kind": kind,
        "key": key,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "files": sorted(records, key=lambda record: record["path"]),
    }
    fd = folder.open_file(MANIFEST, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        _chmod(fd, folder.path / MANIFEST, 0o600)
        data = (json.dumps(manifest, indent=1) + "\n").encode("utf-8")
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)


def _seal_folder(folder: _Dir, prefix: str, records: list[dict]) -> None:
    _chmod(folder.fd, folder.path, 0o700)
    for item in folder.items():
        relative = prefix + item.name
        mode = folder.lstat(item.name).st_mode
        if stat.S_ISDIR(mode):
            with folder.sub(item.name) as sub:
                _seal_folder(sub, relative + "/", records)
            continue
        fd = -1
        if stat.S_ISREG(mode):
            with contextlib.suppress(_Refused):
                fd = folder.open_file(item.name, os.O_RDONLY | _O_NONBLOCK)
        try:
            if fd < 0 or not stat.S_ISREG(os.fstat(fd).st_mode):
                raise CacheUsageError(f"the build wrote {relative!r}, which is not a regular file (a link or special "
                                      "file); write regular files only.")
            _chmod(fd, folder.path / item.name, 0o600)
            digest, _ = _read_fd(fd, keep=False)
            records.append({"path": relative, "size": os.fstat(fd).st_size, "sha256": digest})
        finally:
            if fd >= 0:
                os.close(fd)


def _remove_tree(shard: _Dir, name: str) -> None:
    """Remove the item ``name`` of ``shard`` so that it is never visible half-removed under its
    name: rename it to a hidden trash name next to it first (``rmtree`` removes files one by one)."""
    trash = f".trash-{name}-{os.getpid()}-{threading.get_ident()}"
    shard.rename(name, trash)
    shard.remove(trash)


def _leftover_key(shard: _Dir, item: os.DirEntry) -> str | None:
    """The key of ``item`` if it is a leftover of a killed build or removal in ``shard``
    (exactly the names the cache gives them, no link), else None."""
    if item.is_symlink():
        return None
    tmp = _TMP_NAME.fullmatch(item.name)
    trash = _TRASH_NAME.fullmatch(item.name)
    match = tmp or trash
    if match is None or match.group(1)[:2] != shard.path.name:
        return None
    # A .tmp- is always a folder; a .trash- may be a file that had taken an entry's name.
    if item.is_dir(follow_symlinks=False) or (trash is not None and item.is_file(follow_symlinks=False)):
        return match.group(1)
    return None


def _build_entry(root: _Dir, kind: str, key: str, build: Callable[[Path], None],
                 note: Callable[[str], None], keep: Collection[str], damaged: str | None = None
                 ) -> tuple[Path, dict[str, _Verified]]:
    """The intact entry ``kind``/``key`` under ``root``, built if needed, and its files ``keep``.
    ``damaged``: why the entry there, intact by its checksums, is damaged all the same (it is
    rebuilt).

    Raises ``_Unusable`` when the cache's own writes fail or something in it is not to be
    trusted, and whatever ``build`` raises.
    """
    final = root.path / kind / key[:2] / key
    damage = damaged or ""
    if damaged is None:
        try:  # the warm path: no lock, a published entry never changes
            return final, _verify(root, kind, key, keep)
        except _Damaged as exc:
            damage = str(exc)
        except _Refused as exc:
            raise _Unusable(str(exc)) from None
        except OSError as exc:
            raise _Unusable(f"cannot read it: {_os_reason(exc)}") from None
    with contextlib.ExitStack() as stack:
        try:
            kind_dir = stack.enter_context(root.private_folder(kind))
            shard = stack.enter_context(kind_dir.private_folder(key[:2]))
            locked = stack.enter_context(_key_lock(shard, f"{key}.lock"))
        except _Refused as exc:
            raise _Unusable(str(exc)) from None
        except OSError as exc:
            raise _Unusable(_write_failure(exc)) from None
        if damaged is None:
            try:  # again: another process may have built it meanwhile
                return final, _verify(root, kind, key, keep)
            except _Damaged as exc:
                damage = str(exc)
            except _Refused as exc:
                raise _Unusable(str(exc)) from None
        tmp = f".tmp-{key}-{_random_name()}"
        try:
            if locked:  # a .tmp/.trash of this key while nobody else holds the lock is from a killed process
                for item in shard.items():
                    if _leftover_key(shard, item) == key:
                        shard.remove(item.name)
            if damage != "missing":
                _remove_tree(shard, key)
        except _Refused as exc:
            raise _Unusable(str(exc)) from None
        except OSError as exc:
            raise _Unusable(_write_failure(exc)) from None
        # The folder's creation is inside the guard: a signal (Ctrl-C, SIGTERM) that lands just
        # after the mkdir, before the build starts, must not leave the folder behind.
        try:
            try:
                shard.private_folder(tmp).__exit__()
            except _Refused as exc:
                raise _Unusable(str(exc)) from None
            except OSError as exc:
                raise _Unusable(_write_failure(exc)) from None
            build(shard.path / tmp)  # what it raises propagates unchanged
        except BaseException:
            with contextlib.suppress(OSError):
                shard.remove(tmp)
            raise
        try:
            with shard.sub(tmp) as folder:
                _seal(folder, kind, key)
            _publish(root, shard, tmp, kind, key)
            result = _verify(root, kind, key, keep)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                shard.remove(tmp)
            if isinstance(exc, (_Refused, _Damaged)):
                raise _Unusable(f"the entry just built does not check: {exc}") from None
            if isinstance(exc, OSError) and not isinstance(exc, FmiAdjointError):
                raise _Unusable(_write_failure(exc)) from None
            raise
    if damage != "missing":
        note(f"fmi-adjoint: note: cache entry {kind}/{key[:16]} in {root.path} was corrupted ({damage}); rebuilt.")
    return final, result


def _publish(root: _Dir, shard: _Dir, tmp: str, kind: str, key: str) -> None:
    """Rename the finished ``tmp`` onto ``key``; if another process got there first (only
    possible without locks) keep its intact entry and discard ours."""
    for _ in range(2):
        try:
            shard.rename(tmp, key)
            return
        except OSError as exc:
            try:
                shard.lstat(key)
            except FileNotFoundError:
                raise _Unusable(_write_failure(exc)) from None
        try:
            _verify(root, kind, key)
            shard.remove(tmp)
            return
        except _Damaged:
            pass
        try:
            _remove_tree(shard, key)
        except OSError as exc:
            raise _Unusable(_write_failure(exc)) from None
    raise _Unusable(f"{shard.path / key} is replaced by a damaged entry again and again")


def _entry_size(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*"):  # "**" does not descend into links
        with contextlib.suppress(OSError):
            info = path.lstat()
            if stat.S_ISREG(info.st_mode):
                total += info.st_size
    return total


def _entry_created(folder: Path, manifest: dict) -> datetime:
    with contextlib.suppress(ValueError, TypeError, KeyError):
        created = datetime.fromisoformat(manifest["created"])
        return created if created.tzinfo else created.replace(tzinfo=timezone.utc)
    try:
        return datetime.fromtimestamp(folder.lstat().st_mtime, timezone.utc)
    except OSError:
        return datetime.fromtimestamp(0, timezone.utc)


def _subfolders(parent: _Dir, pattern: re.Pattern, skipped: list[str]) -> Iterator[tuple[str, _Dir]]:
    """``(name, folder)`` of every sub-folder of ``parent`` whose name matches ``pattern``,
    opened without following links; links and folders that cannot be opened are reported in
    ``skipped``.  Each folder is closed when the caller asks for the next one."""
    for item in parent.items():
        if not pattern.fullmatch(item.name):
            continue
        if item.is_symlink():
            skipped.append(f"{parent.path / item.name}: a symbolic link (the cache never follows links)")
            continue
        if not item.is_dir(follow_symlinks=False):
            continue
        try:
            folder = parent.sub(item.name)
        except (_Refused, NotADirectoryError, FileNotFoundError) as exc:
            skipped.append(f"{parent.path / item.name}: {exc}")
            continue
        with folder:
            yield item.name, folder


def _shards(root: _Dir, skipped: list[str]) -> Iterator[tuple[str, _Dir]]:
    """``(kind, shard folder)`` of every shard under ``root``; links are not followed but
    reported in ``skipped``."""
    for kind, kind_dir in _subfolders(root, _KIND, skipped):
        for _, shard in _subfolders(kind_dir, _SHARD, skipped):
            yield kind, shard


def _entries(shard: _Dir, kind: str, skipped: list[str]) -> Iterator[tuple[str, dict]]:
    """``(key, manifest)`` of every provable entry of ``shard``; other key-named folders and
    links are reported in ``skipped``."""
    for item in shard.items():
        if not (_KEY.fullmatch(item.name) and item.name[:2] == shard.path.name):
            continue
        if item.is_symlink():
            skipped.append(f"{shard.path / item.name}: a symbolic link (the cache never follows links)")
        elif item.is_dir(follow_symlinks=False):
            manifest = _entry_manifest(shard, item.name, kind)
            if manifest is None:
                skipped.append(f"{shard.path / item.name}: no valid {MANIFEST} naming it, so it is not provably a "
                               "cache entry; remove it by hand if it is yours")
            else:
                yield item.name, manifest


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
        self._noted: set[str] = set()

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
            if reason not in self._noted:  # one note per reason (each names its path and fix)
                self._noted.add(reason)
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


def _open_root(root: Path) -> tuple[_Dir | None, str | None]:
    """The root folder, created (0700, tagged) if missing, and checked: ``(folder, None)``
    if builds may go there, else ``(None, why not)``."""
    created = False
    if not os.path.lexists(root):
        try:
            os.makedirs(root.parent, exist_ok=True)  # the user's folders: their usual modes
            os.mkdir(root, 0o700)
            created = True
        except FileExistsError:
            if not os.path.lexists(root):
                return None, f"cannot create it: {root.parent} is not a folder"
        except OSError as exc:
            return None, f"cannot create it: {_os_reason(exc)}"
    try:
        folder = _Dir.open(root)
    except NotADirectoryError:
        return None, "it is not a folder"
    except OSError as exc:
        return None, _broken_link(root) or f"cannot read it: {exc.strerror or exc}"
    try:
        if created:
            _chmod(folder.fd, root, 0o700)
        problem = _root_problem(root, folder.stat())
        if problem is None and not _has_marker(folder):
            foreign = _untagged(folder)
            if foreign is not None:
                problem = _not_a_cache(root, foreign)
            elif not _has_marker(folder):
                _write_marker(folder)
    except _Refused as exc:
        problem = str(exc)
    except OSError as exc:
        problem = _write_failure(exc)
    if problem is not None:
        folder.__exit__()
        return None, problem
    return folder, None


_LOADED: dict[tuple[int, int], int] = {}  # (device, inode) of each library loaded -> its descriptor
_LOADED_LOCK = threading.Lock()


def _dlopen(path: Path, fd: int) -> ctypes.CDLL:
    """Load the library whose checked bytes ``fd`` holds (on Linux through that descriptor)."""
    import ctypes

    if not (sys.platform.startswith("linux") and os.path.isdir("/proc/self/fd")):  # looked at on use, not import
        os.close(fd)
        return ctypes.CDLL(str(path))
    info = os.fstat(fd)
    with _LOADED_LOCK:
        kept = _LOADED.get((info.st_dev, info.st_ino))
        if kept is not None:  # the same file again: the loader returns the library it holds
            os.close(fd)
            return ctypes.CDLL(f"/proc/self/fd/{kept}")
        try:
            library = ctypes.CDLL(f"/proc/self/fd/{fd}")
        except BaseException:
            os.close(fd)
            raise
        # Kept open for good: the loader knows the library by this name, and a later
        # library must not get the same number (and so this name).
        _LOADED[(info.st_dev, info.st_ino)] = fd
        return library


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
        root = _checked_root(os.fspath(self.root), "BuildCache root")
        object.__setattr__(self, "root", Path(os.path.abspath(root)))

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
            Receives the one-line notes (entry corrupted and rebuilt, cache or entry not
            usable); default: printed to stderr.

        Returns
        -------
        Path
            The entry folder.  Its files must not be changed; a concurrent ``clear`` (a
            user's command) may remove it.  To use a file, take it from :meth:`read` or
            :meth:`load_library`, which hand over the very bytes that were checked.

        Raises
        ------
        CacheUsageError
            ``kind`` or ``key`` is malformed, or ``build`` wrote a link or ``MANIFEST.json``.
        CacheError
            Neither the cache nor a private temporary folder can be written.
        """
        return self._entry(kind, key, build, note, ())[0]

    def read(self, kind: str, key: str, build: Callable[[Path], None], names: Sequence[str], *,
             note: Callable[[str], None] | None = None) -> tuple[Path, dict[str, bytes]]:
        """:meth:`entry`, and the bytes of its files ``names`` exactly as they were checked
        (owner, mode and checksum, read through one descriptor each).

        Returns
        -------
        (Path, dict)
            The entry folder and ``{name: bytes}``.

        Raises
        ------
        CacheError
            The entry cannot be written or read (an :class:`OSError` of the file system, or of
            ``build``), with the fix: free space or another ``FMI_ADJOINT_CACHE``.
        """
        try:
            folder, files = self._entry(kind, key, build, note, tuple(names))
        except FmiAdjointError:
            raise
        except OSError as exc:
            raise CacheError(f"writing the build cache {self.root} failed ({exc.strerror or exc}); free space there "
                             "or set FMI_ADJOINT_CACHE to a writable folder.") from None
        for verified in files.values():
            os.close(verified.fd)
        return folder, {name: verified.data for name, verified in files.items()}

    def load_library(self, kind: str, key: str, build: Callable[[Path], None], name: str, *,
                     symbols: Sequence[str] = (), note: Callable[[str], None] | None = None
                     ) -> tuple[Path, ctypes.CDLL]:
        """:meth:`entry`, and its shared library ``name`` loaded with :mod:`ctypes`.

        The file is checked (owner, mode, checksum) through the descriptor the library is
        then loaded from (``/proc/self/fd/N`` on Linux), so the bytes checked are the bytes
        loaded.  The descriptor stays open for the life of the process, as the library does.
        A library that lacks one of ``symbols`` is a damaged entry: it is rebuilt (with a
        note), as one that fails its checksum is.

        Returns
        -------
        (Path, ctypes.CDLL)
            The entry folder and the library.

        Raises
        ------
        CacheError
            The library rebuilt still lacks one of ``symbols``.
        """
        folder, files = self._entry(kind, key, build, note, (name,))
        library = _dlopen(folder / name, files[name].fd)
        missing = [symbol for symbol in symbols if not hasattr(library, symbol)]
        if missing:
            # Its checksum matches its manifest, yet it is not what ``build`` writes (the
            # file was replaced and the manifest rewritten): damaged all the same.
            damage = f"its {name} lacks the function {missing[0]}"
            folder, files = self._entry(kind, key, build, note, (name,), damage)
            library = _dlopen(folder / name, files[name].fd)
            missing = [symbol for symbol in symbols if not hasattr(library, symbol)]
            if missing:
                raise CacheError(f"the cache entry {folder}: its {name}, just built, lacks the function "
                                 f"{missing[0]}; run 'fmi-adjoint cache clear' and try again, else report it.")
        return folder, library

    def _entry(self, kind: str, key: str, build: Callable[[Path], None], note: Callable[[str], None] | None,
               keep: tuple[str, ...], damage: str | None = None) -> tuple[Path, dict[str, _Verified]]:
        _check_name(kind, key)
        emit = _print_note if note is None else note
        root, reason = _open_root(self.root)
        if root is not None:
            with root:
                try:
                    return _build_entry(root, kind, key, build, emit, keep, damage)
                except _Unusable as exc:
                    reason = str(exc)
        assert reason is not None
        private = self._fallback.folder(self.root, reason, emit)
        try:
            with _Dir.open(private) as folder:
                return _build_entry(folder, kind, key, build, emit, keep, damage)
        except _Unusable as exc:
            raise CacheError(f"the private build folder {private} failed ({exc}); set {CACHE_VARIABLE} to a "
                             "writable folder with free space.") from None
        except OSError as exc:
            raise CacheError(f"the private build folder {private} failed ({_os_reason(exc)}); set {CACHE_VARIABLE} "
                             "to a writable folder with free space.") from None

    def info(self) -> CacheInfo:
        """The entries of the cache and whether new builds can be stored in it.

        Reads only: creates no folder, writes no marker and verifies no checksum
        (:meth:`entry` does).  Lists only provable entries (see the module docstring).

        Raises
        ------
        CacheError
            The root exists but cannot be listed (a dangling link among others), is a file,
            or is a folder that is not a cache.
        """
        root = self.root
        if not os.path.lexists(root):
            ancestor = root.parent
            while not os.path.lexists(ancestor) and ancestor != ancestor.parent:
                ancestor = ancestor.parent
            reason = ("" if os.path.isdir(ancestor) and os.access(ancestor, os.W_OK | os.X_OK) else
                      f"cannot create it: {ancestor} is {'not writable' if os.path.isdir(ancestor) else 'no folder'}")
            return CacheInfo(root, (), 0, not reason, reason)
        entries, skipped = [], list[str]()
        with self._open_existing() as folder:
            try:
                problem = _root_problem(root, folder.stat())
                foreign = _untagged(folder)
                if foreign is not None:
                    raise CacheError(f"{_not_a_cache(root, foreign)}.")
                if problem is None and not os.access(root, os.W_OK | os.X_OK):
                    read_only = hasattr(os, "statvfs") and os.statvfs(root).f_flag & os.ST_RDONLY
                    problem = f"cannot write in it: {os.strerror(errno.EROFS if read_only else errno.EACCES)}"
                for kind, shard in _shards(folder, skipped):
                    for key, manifest in _entries(shard, kind, skipped):
                        path = shard.path / key
                        entries.append(CacheEntry(kind, key, _entry_size(path), _entry_created(path, manifest)))
            except CacheError:
                raise
            except (OSError, _Refused) as exc:
                raise self._unreadable(exc) from None
        return CacheInfo(root, tuple(entries), sum(e.size_bytes for e in entries), problem is None, problem or "",
                         tuple(skipped))

    def _open_existing(self) -> _Dir:
        """The existing root folder, opened (``info`` and ``clear``); a CacheError if it is a
        file, a broken link or unreadable."""
        try:
            return _Dir.open(self.root)
        except NotADirectoryError:
            # A file is not a cache (nor a folder to build in).
            raise CacheError(f"the build cache {self.root} is a file, not a folder, so not a cache; set "
                             f"{CACHE_VARIABLE} to a cache folder, or remove the file (a cache folder is then created "
                             "there).") from None
        except OSError as exc:
            raise self._unreadable(exc) from None

    def _unreadable(self, exc: BaseException) -> CacheError:
        link = _broken_link(self.root)
        if link is not None:
            return CacheError(f"the build cache {self.root}: {link}; {_link_fix(self.root)}.")
        why = _os_reason(exc) if isinstance(exc, OSError) else str(exc)
        return CacheError(f"cannot read the build cache {self.root}: {why}; make it readable ('chmod u+rwx') or set "
                          f"{CACHE_VARIABLE} to another folder.")

    def clear(self, *, note: Callable[[str], None] | None = None, lock_timeout: float = LOCK_TIMEOUT) -> int:
        """Remove every entry (and leftovers of killed builds); returns the number of entries removed.

        Only provable entries and leftovers are removed (see the module docstring), nothing
        outside the root, and nothing at all from a folder that is not a cache.  Each entry is
        removed while its lock is held, so a build of the same key in another process
        finishes first.  The root folder and the (empty) lock files stay: removing a lock file
        another process waits on would let two processes build at once.

        Parameters
        ----------
        note : callable, optional
            Receives the one-line notes (waiting for another process, links skipped, folders
            kept); default: printed to stderr.
        lock_timeout : float
            Seconds to wait for an entry another process holds before giving up.

        Raises
        ------
        CacheError
            The root is not a folder, is another user's, is not a cache, an entry cannot be
            removed, or another process holds an entry longer than ``lock_timeout``.
        """
        emit = _print_note if note is None else note
        root = self.root
        if not os.path.lexists(root):
            return 0
        removed, skipped = 0, list[str]()
        with self._open_existing() as folder:
            try:
                problem = _root_problem(root, folder.stat(), loading=False)
                if problem is not None:
                    raise CacheError(f"cannot clear the build cache {root}: {problem}; set {CACHE_VARIABLE} to the "
                                     "cache folder to clear.")
                foreign = _untagged(folder)
                if foreign is not None:
                    raise CacheError(f"cannot clear: {_not_a_cache(root, foreign)}. Nothing was removed.")
                if not _has_marker(folder):
                    if not folder.items():
                        return 0
                    _write_marker(folder)  # a cache of the previous version, provably ours
                for kind, shard in _shards(folder, skipped):
                    removed += self._clear_shard(kind, shard, skipped, emit, lock_timeout)
            except CacheError:
                raise
            except (OSError, _Refused) as exc:
                why = _os_reason(exc) if isinstance(exc, OSError) else str(exc)
                raise CacheError(f"cannot clear the build cache {root}: {why}; make it writable ('chmod u+rwx' on "
                                 "the folders) or remove it by hand.") from None
        for text in skipped:
            emit(f"fmi-adjoint: note: cache clear left {text}.")
        return removed

    def _clear_shard(self, kind: str, shard: _Dir, skipped: list[str], note: Callable[[str], None],
                     timeout: float) -> int:
        removed = 0
        for key, _ in list(_entries(shard, kind, skipped)):
            owner = shard.lstat(key).st_uid
            if sys.platform != "win32" and owner != os.geteuid():
                skipped.append(f"{shard.path / key}: owned by user id {owner}, not by you; remove it by hand")
                continue
            with self._clear_lock(kind, key, shard, note, timeout):
                if _entry_manifest(shard, key, kind) is not None:  # still there, still an entry
                    _remove_tree(shard, key)
                    removed += 1
        for item in shard.items():
            owner_key = _leftover_key(shard, item)
            if owner_key is None:
                continue
            with self._clear_lock(kind, owner_key, shard, note, timeout):
                with contextlib.suppress(FileNotFoundError):
                    if not stat.S_ISLNK(shard.lstat(item.name).st_mode):
                        shard.remove(item.name)
        return removed

    @contextlib.contextmanager
    def _clear_lock(self, kind: str, key: str, shard: _Dir, note: Callable[[str], None],
                    timeout: float) -> Iterator[None]:
        def waiting() -> None:
            note(f"fmi-adjoint: note: waiting for another fmi-adjoint process building {kind}/{key[:16]} "
                 f"(up to {timeout:g} s) ...")

        try:
            with _key_lock(shard, f"{key}.lock", timeout=timeout, waiting=waiting):
                yield
        except _LockTimeout:
            raise CacheError(f"cannot clear the build cache entry {kind}/{key[:16]} in {self.root}: another "
                             f"fmi-adjoint process has held it for {timeout:g} s (it is building or removing it); "
                             "let that process finish or stop it, then run 'fmi-adjoint cache clear' again.") from None


@functools.lru_cache(maxsize=8)
def _default_cache(root: Path) -> BuildCache:
    """:meth:`BuildCache.default` by root (a pure function of the root: the cache object
    holds no state but its fallback folder)."""
    return BuildCache(root)
