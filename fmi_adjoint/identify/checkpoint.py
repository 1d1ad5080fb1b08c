"""Checkpoint files of an identification run (issues 14 and 31): an append-only log whose
records are authenticated with a per-user key.

How a run is resumed
--------------------
``identify --resume RUN.ckpt`` does not restore optimizer internals (scipy's L-BFGS-B and
``least_squares`` expose none that could be restored exactly).  It replays: the checkpoint
is a log of every evaluation of every start (the point ``x`` and what the problem returned
for it, ``J`` and ``g`` or residuals and Jacobian) plus a record per finished start.  On
resume the optimizer runs again from the start and its evaluations are answered from the
log, bit for bit, so it retraces its path without simulating and then continues.  The final
result therefore equals that of an uninterrupted run.  This module is the file format and
the key; what the records mean (their ``kind`` and ``meta``) is decided, and every field of
them validated, by the caller (:mod:`fmi_adjoint.identify.multistart`).

File format (version 2)
-----------------------
All integers are little-endian::

    file    = MAGIC key_id[8] nonce[32] record+       MAGIC = b"FMI-ADJOINT-CHECKPOINT 2\\n"
    record  = b"REC2"  u32 m  u64 n  json[m]  payload[n]  mac[32]

* ``key_id`` names the key that wrote the file: the first 8 bytes of
  ``HMAC-SHA256(key, b"fmi-adjoint checkpoint key id")`` (it tells nothing about the key).
  ``nonce`` is 32 random bytes chosen when the file is created.
* ``json`` is UTF-8 JSON (this writer emits ASCII only) of the object
  ``{"kind": str, "meta": object, "arrays": [{"name": str, "shape": [int, ...]}, ...]}``.
  ``NaN``, ``Infinity`` and floats that overflow to infinity are refused on writing and on
  reading, as are duplicate keys.  Everything numeric that must come back bit-exact goes
  into arrays; ``meta`` is for names, counts and flags.  Tuples in ``meta`` come back as lists.
* ``payload`` is the arrays' values as float64 little-endian in C order, concatenated in
  the order of ``"arrays"``, so ``n = 8 * sum(prod(shape))``.  The dtype is always float64.
* ``mac`` is ``HMAC-SHA256(key, P + R)``: ``R`` is the record before its ``mac`` (tag to
  payload) and ``P`` the 32 bytes that precede the record in the file (the ``nonce`` for
  the first record, the previous record's ``mac`` after that).  The records thus form a
  chain: none can be changed, removed from the middle, reordered or copied in from another
  checkpoint without the key.
* The first record has kind ``"header"`` and no arrays; its ``meta`` is the run's header
  (what the caller needs to check that a resume continues the same run).

Version 1 (fmi-adjoint before issue 31: ``REC1`` records closed by an unkeyed SHA-256) is
refused by :meth:`CheckpointLog.resume`; :func:`read_untrusted` still reads it.

The key
-------
32 random bytes in ``checkpoint.key`` of the user's configuration folder
(:func:`config_folder`: ``$FMI_ADJOINT_CONFIG``, else ``$XDG_CONFIG_HOME/fmi-adjoint`` or
``~/.config/fmi-adjoint``; ``%APPDATA%\\fmi-adjoint`` on Windows), created on first use
with mode 0600 in a folder of mode 0700 whatever the umask.  It is written to a private
temporary file and published with ``link``, which fails if the name exists, so two
processes starting at once end up with one key.  A key file that is not a regular file,
belongs to another user or can be read or written by group or others is refused (as ssh
refuses a private key), naming the file and the fix.  A checkpoint written with another
key (another user or machine) is refused as such, not as damaged; ``identify
--resume-reevaluate`` continues it without trusting it.

Why
---
A checkpoint is untrusted input: it may be copied between machines or users, be damaged,
or be written by someone else, and what it holds becomes the result of a resumed run.
Unkeyed checksums only detect damage (anyone can compute them), so the records are
authenticated with a key only the user can read; their fields are validated by the caller
all the same.  JSON and never pickle: unpickling executes code.  Reading allocates nothing
a hostile length asks for: ``m <= 16 MiB`` and ``n <= 2 GiB`` (:data:`MAX_META_BYTES`,
:data:`MAX_ARRAY_BYTES`) are checked, and a record is read only once the file is known to
hold all of it; at most :data:`MAX_NDIM` dimensions, and the shapes must account for ``n``
exactly.  The file size is limited (:func:`size_limit`: 1 GiB, or
``$FMI_ADJOINT_CHECKPOINT_MAX_MIB``) and checked before reading; the file is read in
chunks, record by record, and :meth:`CheckpointLog.open` keeps each record as its bytes
(:class:`StoredRecord`, decoded when used), so memory stays near the file size.

Durability and torn tails
-------------------------
A record is written with one ``os.write`` of its whole bytes (repeated only for the rest
if the system writes fewer), then ``os.fsync``; creating a file also syncs its folder.  A
``kill -9`` during an append can therefore leave only the *last* record incomplete.  On
resume such a tail is dropped and the file truncated to the last good record
(:attr:`CheckpointLog.dropped_tail`); so is a complete last record whose ``mac`` fails
and a zero-filled tail (a power loss may extend a file before its data reach the disk).
A tail is accepted as torn only if what is present is a prefix of a well-formed record:
the tag, a JSON prefix of printable text, and, when the JSON is complete, shapes that
agree with the payload length; a damaged length field in the middle of the file thus
raises :class:`~fmi_adjoint.errors.CheckpointError` instead of silently cutting off the
records after it.  A record in the middle whose ``mac`` fails raises too.  A failed append
(disk full) is undone by truncating the file back to its previous end.

An exclusive ``flock`` (POSIX) is held while a log is open, so two runs never append to
the same file.
"""

from __future__ import annotations

import codecs
import dataclasses
import errno
import hashlib
import hmac
import json
import math
import os
import secrets
import stat
import struct
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

import numpy as np

from ..errors import CheckpointError
from ..files import file_kind

__all__ = ["MAGIC", "MAGIC_V1", "MAX_META_BYTES", "MAX_ARRAY_BYTES", "MAX_NDIM", "HEADER_KIND", "CONFIG_VARIABLE",
           "LIMIT_VARIABLE", "KEY_FILE", "CheckpointKey", "CheckpointLog", "Record", "StoredRecord",
           "CheckpointError", "config_folder", "read_untrusted", "size_limit"]

#: First bytes of every checkpoint file (format version 2).
MAGIC = b"FMI-ADJOINT-CHECKPOINT 2\n"
#: First bytes of a version 1 file (unkeyed checksums).
MAGIC_V1 = b"FMI-ADJOINT-CHECKPOINT 1\n"
_MAGIC_STEM = b"FMI-ADJOINT-CHECKPOINT "
_TAG = b"REC2"
_TAG_V1 = b"REC1"
#: tag, JSON length m (u32), payload length n (u64).
_FIXED = struct.Struct("<4sIQ")
_MAC_SIZE = hashlib.sha256().digest_size
_KEY_ID_SIZE = 8
_NONCE_SIZE = 32
_PRELUDE_SIZE = len(MAGIC) + _KEY_ID_SIZE + _NONCE_SIZE

#: Largest JSON part of one record.
MAX_META_BYTES = 16 * 2**20
#: Largest array payload of one record.
MAX_ARRAY_BYTES = 2 * 2**30
#: Most dimensions of one array.
MAX_NDIM = 32
#: Kind of the first record, reserved for it.
HEADER_KIND = "header"
#: Largest checkpoint read, unless :data:`LIMIT_VARIABLE` says otherwise.
DEFAULT_MAX_FILE_BYTES = 2**30
#: Environment variable: the largest checkpoint read, in MiB.
LIMIT_VARIABLE = "FMI_ADJOINT_CHECKPOINT_MAX_MIB"
#: Largest value of ``$FMI_ADJOINT_CHECKPOINT_MAX_MIB`` (1 EiB).
MAX_LIMIT_MIB = 2**40
#: Records read between two progress notes (100 000 records take a few seconds).
NOTE_EVERY = 100_000
#: Environment variable: the folder of the checkpoint key (default: see :func:`config_folder`).
CONFIG_VARIABLE = "FMI_ADJOINT_CONFIG"
#: Name of the key file in that folder.
KEY_FILE = "checkpoint.key"
_KEY_SIZE = 32

_READ_CHUNK = 4 * 2**20
_OPEN_FLAGS = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOCTTY", 0)
_DAMAGED = "the file is damaged; restore a copy, or remove it and start the run again with --checkpoint"
_ALTERED = ("the file was damaged or altered; restore a copy, start the run again with --checkpoint, or continue it "
            "with --resume-reevaluate (which re-evaluates every recorded point instead of trusting it)")


# -- the key -------------------------------------------------------------------------------


def config_folder() -> Path:
    """The folder of the checkpoint key: ``$FMI_ADJOINT_CONFIG`` if set and non-empty, else
    ``$XDG_CONFIG_HOME`` (if absolute) or ``~/.config``, + ``fmi-adjoint`` (``%APPDATA%`` on
    Windows)."""
    override = os.environ.get(CONFIG_VARIABLE, "")
    try:
        if override:
            return Path(override).expanduser()
        if sys.platform == "win32":
            appdata = os.environ.get("APPDATA", "")
            base = Path(appdata) if appdata else Path.home() / "AppData" / "Roaming"
        else:
            xdg = os.environ.get("XDG_CONFIG_HOME", "")
            base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".config"
    except (RuntimeError, KeyError):  # "~nouser", or no HOME and no password entry
        where = f"{CONFIG_VARIABLE}={override!r}" if override else "your home folder"
        raise CheckpointError(f"{where}: cannot find the folder for the checkpoint key; set {CONFIG_VARIABLE} to "
                              "a private folder of yours.") from None
    return base / "fmi-adjoint"


class CheckpointKey:
    """The secret that authenticates checkpoint records (see the module docstring).

    Parameters
    ----------
    secret : bytes
        32 bytes.
    path : str
        Where it came from (for messages).
    """

    __slots__ = ("_secret", "path", "key_id")

    def __init__(self, secret: bytes, path: str = "<memory>"):
        if not isinstance(secret, bytes) or len(secret) != _KEY_SIZE:
            raise CheckpointError(f"a checkpoint key is {_KEY_SIZE} bytes; give secrets.token_bytes({_KEY_SIZE}).")
        self._secret = secret
        self.path = path
        self.key_id = hmac.new(secret, b"fmi-adjoint checkpoint key id", hashlib.sha256).digest()[:_KEY_ID_SIZE]

    @classmethod
    def load(cls, folder: str | os.PathLike | None = None) -> CheckpointKey:
        """The user's key in ``folder`` (default :func:`config_folder`), created on first use.

        Raises
        ------
        CheckpointError
            If the key file or its folder is not private to the user, or cannot be created.
        """
        base = Path(folder) if folder is not None else config_folder()
        path = base / KEY_FILE
        secret = _read_key(path)
        # Checked at every use, not only when the key is created (as ssh does): whoever may
        # write to the folder may swap the key for one they know.
        _private_folder(base)
        if secret is None:
            _create_key(path)
            secret = _read_key(path)
            if secret is None:
                raise CheckpointError(f"{path}: the checkpoint key vanished right after it was created; make sure "
                                      "no other program removes files there, then run again.")
        return cls(secret, str(path))

    def _mac(self, previous: bytes | bytearray | memoryview) -> Any:
        return hmac.new(self._secret, previous, hashlib.sha256)

    def __repr__(self) -> str:
        return f"CheckpointKey({self.path!r}, id {self.key_id.hex()})"


def _key_problem(path: Path, info: os.stat_result) -> str | None:
    if not stat.S_ISREG(info.st_mode):
        return f"it is {file_kind(info.st_mode)}, not a key file; remove it (a new key is then created)"
    if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        return (f"it belongs to user id {info.st_uid}, not to you (user id {os.geteuid()}), who could know it; "
                "remove it (a new key is then created)")
    if sys.platform != "win32" and info.st_mode & 0o077:
        return (f"group or other users may read or write it (mode {stat.S_IMODE(info.st_mode):04o}); run "
                f"'chmod 600 {path}' (or remove it for a new key if others may have read it)")
    return None


def _read_key(path: Path) -> bytes | None:
    """The key at ``path``, None if there is none; raises if it is not private."""
    flags = os.O_RDONLY | _OPEN_FLAGS | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP or os.path.islink(path):
            raise CheckpointError(f"{path}: the checkpoint key is a symbolic link; it must be a private regular "
                                  "file: remove the link (a new key is then created).") from None
        raise CheckpointError(f"{path}: cannot read the checkpoint key ({exc.strerror or exc}); make it readable "
                              f"by you, or set {CONFIG_VARIABLE} to another private folder.") from None
    try:
        problem = _key_problem(path, os.fstat(fd))
        if problem is not None:
            raise CheckpointError(f"{path}: refused as checkpoint key: {problem}.")
        data = os.read(fd, _KEY_SIZE + 1)
    finally:
        os.close(fd)
    if len(data) != _KEY_SIZE:
        raise CheckpointError(f"{path}: the checkpoint key holds {len(data)} bytes instead of {_KEY_SIZE}, so it is "
                              "damaged; remove it (a new key is then created; checkpoints of the old key continue "
                              "only with --resume-reevaluate).")
    return data


def _private_folder(folder: Path) -> None:
    """Create ``folder`` with mode 0700 (whatever the umask) if missing; refuse one that is
    not the user's or that others may write to."""
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(folder, 0o700)
            os.chmod(folder, 0o700)  # mkdir's mode is masked by the umask
        except FileExistsError:
            pass
        info = os.stat(folder)
    except OSError as exc:
        raise CheckpointError(f"{folder}: cannot create the folder of the checkpoint key ({exc.strerror or exc}); "
                              f"set {CONFIG_VARIABLE} to a private folder of yours.") from None
    if not stat.S_ISDIR(info.st_mode):
        raise CheckpointError(f"{folder}: it is {file_kind(info.st_mode)}, not a folder for the checkpoint key; "
                              f"remove it or set {CONFIG_VARIABLE} to a private folder.")
    if sys.platform != "win32":
        if info.st_uid != os.geteuid() or info.st_mode & 0o022:
            raise CheckpointError(f"{folder}: the folder of the checkpoint key belongs to user id {info.st_uid} with "
                                  f"mode {stat.S_IMODE(info.st_mode):04o}; it must be yours and writable only by you: "
                                  f"run 'chmod 700 {folder}', or set {CONFIG_VARIABLE} to a private folder.")


def _create_key(path: Path) -> None:
    """Publish a new key at ``path`` unless another process does so first (race-free)."""
    tmp = path.with_name(f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(8)}.tmp")
    excl = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN_FLAGS | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(tmp, excl, 0o600)
        try:
            if hasattr(os, "fchmod"):
                os.fchmod(fd, 0o600)  # exact, whatever the umask
            _write_all(fd, secrets.token_bytes(_KEY_SIZE))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            # link() fails if the name exists: the first of several processes wins, and the
            # key is never seen half-written.
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:
            # A file system without hard links: create the name exclusively and write.
            try:
                fd = os.open(path, excl, 0o600)
            except FileExistsError:
                pass
            else:
                try:
                    if hasattr(os, "fchmod"):
                        os.fchmod(fd, 0o600)
                    _write_all(fd, secrets.token_bytes(_KEY_SIZE))
                    os.fsync(fd)
                finally:
                    os.close(fd)
        _fsync_folder(path.parent)
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot create the checkpoint key ({exc.strerror or exc}); make the folder "
                              f"writable, or set {CONFIG_VARIABLE} to a private folder of yours.") from None
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def size_limit() -> int:
    """The largest checkpoint file read: ``$FMI_ADJOINT_CHECKPOINT_MAX_MIB`` MiB, else 1 GiB."""
    text = os.environ.get(LIMIT_VARIABLE, "").strip()
    if not text:
        return DEFAULT_MAX_FILE_BYTES
    try:
        mib = int(text)
    except ValueError:
        mib = 0
    if not 1 <= mib <= MAX_LIMIT_MIB:
        raise CheckpointError(f"{LIMIT_VARIABLE}={text[:40]!r}: give the largest checkpoint to read in MiB, a whole "
                              f"number from 1 to {MAX_LIMIT_MIB} (2**40; default 1024).")
    return mib * 2**20


# -- records -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class Record:
    """One record of a checkpoint.

    Attributes
    ----------
    kind : str
        What the record is (chosen by the caller, e.g. ``"evaluation"``).
    meta : dict
        JSON data of the record.
    arrays : dict of str to numpy.ndarray
        float64 arrays with their shapes, bit-exact; read-only when read from a file.
    number : int
        Its place in the file (the header is record 1); 0 if not read from a file.
    source : str
        The file it was read from ("" if none).
    """

    kind: str
    meta: dict[str, Any]
    arrays: dict[str, np.ndarray]
    number: int = 0
    source: str = ""


class StoredRecord:
    """A record as its bytes, decoded on demand (:meth:`decode`): a checkpoint of a million
    records is kept in little more memory than the file takes.

    Attributes
    ----------
    kind : str
    number : int
        Its place in the file (the header is record 1).
    source : str
        The file it was read from.
    """

    __slots__ = ("kind", "number", "source", "_raw", "_meta_len", "_payload_len")

    def __init__(self, kind: str, number: int, source: str, raw: bytes | bytearray, meta_len: int,
                 payload_len: int):
        self.kind, self.number, self.source = kind, number, source
        self._raw, self._meta_len, self._payload_len = raw, meta_len, payload_len

    def decode(self) -> Record:
        """The record (a new value on each call; arrays are read-only views of the bytes)."""
        return _decode(self._raw, self._meta_len, self._payload_len, self.number, self.source)

    @property
    def meta(self) -> dict[str, Any]:
        return self.decode().meta

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        return self.decode().arrays

    def __repr__(self) -> str:
        return f"StoredRecord({self.kind!r}, record {self.number} of {self.source!r})"


class _Malformed(Exception):
    """Internal: the JSON part of a record is not what this format allows (reason in args[0])."""


class CheckpointLog:
    """An open checkpoint file to which records are appended.

    Open one with :meth:`create` (new file), :meth:`resume` (existing file, records read
    back) or :meth:`open` (the same, records kept as bytes).  :meth:`append` is
    thread-safe.  Use as a context manager or call :meth:`close`.

    Attributes
    ----------
    path : pathlib.Path
    key : CheckpointKey
    dropped_tail : bool
        True if :meth:`resume` dropped an incomplete or damaged last record.
    dropped_bytes : int
        How many bytes it dropped.
    """

    def __init__(self, path: Path, fd: int, end: int, key: CheckpointKey, previous: bytes, dropped_bytes: int = 0):
        # Use create(), resume() or open(); the constructor takes an fd that is open and locked.
        self.path = path
        self.key = key
        self.dropped_bytes = dropped_bytes
        self.dropped_tail = dropped_bytes > 0
        self._fd = fd
        self._end = end
        self._previous = previous  # the last 32 bytes of the file: what the next mac covers first
        self._broken: str | None = None
        self._lock = threading.Lock()

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def create(cls, path: str | os.PathLike, header: dict[str, Any], *, key: CheckpointKey | None = None
               ) -> CheckpointLog:
        """Create the checkpoint ``path`` with ``header`` as its first record.

        Parameters
        ----------
        key : CheckpointKey, optional
            Default: the user's key (:meth:`CheckpointKey.load`).

        Raises
        ------
        CheckpointError
            If ``path`` exists (whatever it is), its folder does not, ``header`` is not
            JSON data, the key is not private, or the file cannot be written.
        """
        target = Path(path)
        where = str(path)
        parts = _encode(HEADER_KIND, header, {}, what="the checkpoint header")
        key = CheckpointKey.load() if key is None else key
        nonce = secrets.token_bytes(_NONCE_SIZE)
        mac = _mac_of(key, nonce, parts)
        data = b"".join([MAGIC, key.key_id, nonce, *parts, mac])
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | _OPEN_FLAGS, 0o666)
        except FileExistsError:
            raise CheckpointError(f"{where}: the file already exists; resume it with --resume {where}, or remove "
                                  "it / choose another --checkpoint file.") from None
        except FileNotFoundError:
            raise CheckpointError(f"{where}: its folder {str(_folder(target))!r} does not exist; create it or "
                                  "choose another --checkpoint file.") from None
        except OSError as exc:
            raise CheckpointError(f"{where}: cannot create it ({exc.strerror or exc}); choose another --checkpoint "
                                  "file in a writable folder.") from None
        try:
            _lock(fd, where)
            _write_all(fd, data)
            os.fsync(fd)
            _fsync_folder(_folder(target))
        except BaseException as exc:
            os.close(fd)
            try:
                os.unlink(target)
            except OSError:
                pass
            if isinstance(exc, OSError):
                raise CheckpointError(f"{where}: cannot write it ({exc.strerror or exc}); free disk space or choose "
                                      "another --checkpoint file.") from None
            raise
        return cls(target, fd, len(data), key, mac)

    @classmethod
    def resume(cls, path: str | os.PathLike, *, key: CheckpointKey | None = None, max_bytes: int | None = None,
               note: Callable[[str], None] | None = None) -> tuple[CheckpointLog, dict[str, Any], list[Record]]:
        """Open the checkpoint ``path``, authenticate and validate it, and read it back.

        Returns
        -------
        log : CheckpointLog
            Open for appending after the last good record.
        header : dict
            The ``meta`` of the header record.
        records : list of Record
            The records after the header, in file order.

        Raises
        ------
        CheckpointError
            If ``path`` is missing, not a regular file, larger than ``max_bytes`` (default
            :func:`size_limit`), not a checkpoint, of another format version, written with
            another key, damaged or altered anywhere but in its last record, or in use by
            another run.  The file is modified (truncated) only when everything else is valid.

        ``note``, if given, is called with a progress line every :data:`NOTE_EVERY` records
        read (a large checkpoint takes a minute to read).
        """
        log, header, stored = cls.open(path, key=key, max_bytes=max_bytes, note=note)
        return log, header, [s.decode() for s in stored]

    @classmethod
    def open(cls, path: str | os.PathLike, *, key: CheckpointKey | None = None, max_bytes: int | None = None,
             note: Callable[[str], None] | None = None) -> tuple[CheckpointLog, dict[str, Any], list[StoredRecord]]:
        """:meth:`resume`, with the records kept as bytes (:class:`StoredRecord`)."""
        target = Path(path)
        where = str(path)
        key = CheckpointKey.load() if key is None else key
        limit = size_limit() if max_bytes is None else max_bytes
        fd = _open_checked(target, os.O_RDWR | os.O_APPEND, where, "for reading and appending")
        try:
            _lock(fd, where)
            header, records, end, previous = _read_log(fd, os.fstat(fd).st_size, where, key, limit, note)
            dropped = os.fstat(fd).st_size - end
            if dropped:
                os.ftruncate(fd, end)
                os.fsync(fd)
        except BaseException as exc:
            os.close(fd)
            if isinstance(exc, OSError) and not isinstance(exc, CheckpointError):
                raise CheckpointError(f"{where}: cannot read or repair it ({exc.strerror or exc}); check the disk "
                                      "and the file's permissions, then resume again.") from None
            raise
        return cls(target, fd, end, key, previous, dropped), header, records

    # -- writing ---------------------------------------------------------------------------

    def append(self, kind: str, meta: dict[str, Any], arrays: Mapping[str, Any] | None = None) -> None:
        """Append one record and make it durable (``fsync``) before returning.

        Parameters
        ----------
        kind : str
            Not ``"header"`` (reserved for the first record).
        meta : dict
            JSON data: str keys; str, int, finite float, bool, None, lists and dicts.
        arrays : mapping of str to array_like, optional
            Stored as float64; floating-point arrays of at most 64 bits, and integer or
            bool arrays whose values float64 holds exactly.

        Raises
        ------
        CheckpointError
            If the record is invalid or too large, the log is closed, or the write fails
            (the file is then truncated back to its previous end).
        """
        if kind == HEADER_KIND:
            raise CheckpointError(f"record kind {HEADER_KIND!r} is reserved for the first record of a checkpoint; "
                                  "choose another kind.")
        parts = _encode(kind, meta, {} if arrays is None else arrays, what=f"the {kind!r} record")
        where = str(self.path)
        with self._lock:
            if self._fd < 0:
                raise CheckpointError(f"{where}: the checkpoint log is closed; append before closing it.")
            if self._broken is not None:
                raise CheckpointError(f"{where}: an earlier append failed ({self._broken}) and the file could not "
                                      f"be repaired; resume it with --resume {where}.")
            mac = _mac_of(self.key, self._previous, parts)
            data = b"".join([*parts, mac])
            try:
                _write_all(self._fd, data)
                os.fsync(self._fd)
            except OSError as exc:
                reason = exc.strerror or str(exc)
                try:
                    os.ftruncate(self._fd, self._end)
                    os.fsync(self._fd)
                except OSError:
                    self._broken = reason
                raise CheckpointError(f"{where}: cannot append to it ({reason}); free disk space, then resume with "
                                      f"--resume {where}.") from None
            self._end += len(data)
            self._previous = mac

    def close(self) -> None:
        """Close the file (and release its lock); further appends raise."""
        with self._lock:
            if self._fd >= 0:
                fd, self._fd = self._fd, -1
                os.close(fd)

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def __enter__(self) -> CheckpointLog:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self._end} bytes"
        return f"CheckpointLog({str(self.path)!r}, {state})"


def read_untrusted(path: str | os.PathLike, *, max_bytes: int | None = None,
                   note: Callable[[str], None] | None = None) -> tuple[dict[str, Any], list[StoredRecord]]:
    """Header and records of the checkpoint ``path`` whatever key wrote it, version 1 or 2,
    without authenticating them (``identify --resume-reevaluate``): the caller must trust
    nothing in them.  The file is only read (never locked, truncated or written); a torn
    tail is left out.  ``note``: as for :meth:`CheckpointLog.resume`.

    Raises
    ------
    CheckpointError
        If ``path`` is not a readable regular file of at most ``max_bytes``, or not a
        well-formed checkpoint.
    """
    where = str(path)
    limit = size_limit() if max_bytes is None else max_bytes
    fd = _open_checked(Path(path), os.O_RDONLY, where, "for reading")
    try:
        header, records, _, _ = _read_log(fd, os.fstat(fd).st_size, where, None, limit, note)
    except OSError as exc:
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(f"{where}: cannot read it ({exc.strerror or exc}); check the disk and the file's "
                              "permissions.") from None
    finally:
        os.close(fd)
    return header, records


def _open_checked(target: Path, flags: int, where: str, purpose: str) -> int:
    """An fd of the regular file ``target`` (checked before and after opening)."""
    fix = "give the --checkpoint file of the run to resume"
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        raise CheckpointError(f"{where}: file not found; {fix}, or start a new run with --checkpoint "
                              f"{where}.") from None
    except OSError as exc:
        raise CheckpointError(f"{where}: cannot read it ({exc.strerror or exc}); {fix}.") from None
    if not stat.S_ISREG(mode):
        raise CheckpointError(f"{where}: it is {file_kind(mode)}, not a checkpoint file; {fix}.")
    try:
        # Non-blocking: a FIFO swapped in after the check cannot block the open.
        fd = os.open(target, flags | getattr(os, "O_NONBLOCK", 0) | _OPEN_FLAGS)
    except OSError as exc:
        raise CheckpointError(f"{where}: cannot open it {purpose} ({exc.strerror or exc}); check its permissions, "
                              "or start a new run with another --checkpoint file.") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise CheckpointError(f"{where}: it is {file_kind(info.st_mode)}, not a checkpoint file; {fix}.")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


# -- encoding ------------------------------------------------------------------------------


def _mac_of(key: CheckpointKey, previous: bytes | bytearray | memoryview, parts: list[Any]) -> bytes:
    h = key._mac(previous)
    for part in parts:
        h.update(part)
    return h.digest()


def _encode(kind: Any, meta: Any, arrays: Mapping[str, Any], what: str) -> list[Any]:
    """The parts of one record before its mac (validated so that the reader accepts it)."""
    if not isinstance(kind, str) or not kind:
        raise CheckpointError(f"{what}: the record kind must be a non-empty str, got {kind!r}.")
    if not isinstance(meta, dict):
        raise CheckpointError(f"{what}: meta must be a dict of JSON data, got {type(meta).__name__}.")
    _check_json(meta, "meta", what)
    specs: list[dict[str, Any]] = []
    values: list[np.ndarray] = []
    total = 0
    for name, value in arrays.items():
        if not isinstance(name, str):
            raise CheckpointError(f"{what}: array names must be str, got {name!r}; name the array with a str.")
        array = _as_float64(name, value, what)
        total += array.nbytes
        if total > MAX_ARRAY_BYTES:
            raise CheckpointError(f"{what}: the arrays hold more than {MAX_ARRAY_BYTES // 2**30} GiB; split them "
                                  "over several records.")
        specs.append({"name": name, "shape": list(array.shape)})
        values.append(array)
    try:
        text = json.dumps({"kind": kind, "meta": meta, "arrays": specs}, ensure_ascii=True, allow_nan=False,
                          separators=(",", ":")).encode("ascii")
    except (TypeError, ValueError, RecursionError) as exc:  # _check_json caught the usual cases already
        raise CheckpointError(f"{what}: meta is not JSON data ({exc}); use str, int, float, bool, None, lists and "
                              "dicts.") from None
    if len(text) > MAX_META_BYTES:
        raise CheckpointError(f"{what}: its JSON part has {len(text)} bytes, more than {MAX_META_BYTES // 2**20} "
                              "MiB; put bulk numbers into arrays.")
    parts: list[Any] = [_FIXED.pack(_TAG, len(text), total), text]
    for array in values:
        if array.size:  # memoryviews of empty arrays cannot be cast to bytes
            parts.append(array.reshape(-1).data.cast("B"))
    return parts


def _check_json(value: Any, at: str, what: str, depth: int = 0) -> None:
    """Refuse what JSON would change or cannot hold (non-str keys, NaN, other types)."""
    if depth > 100:
        raise CheckpointError(f"{what}: {at} is nested more than 100 levels deep; flatten it.")
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CheckpointError(f"{what}: {at} is {value}, which JSON cannot hold; put numbers that may be "
                                  "non-finite into arrays.")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise CheckpointError(f"{what}: {at} has the key {key!r} of type {type(key).__name__}; JSON keys "
                                      "are str: convert the key with str().")
            _check_json(item, f"{at}[{key!r}]", what, depth + 1)
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_json(item, f"{at}[{i}]", what, depth + 1)
        return
    raise CheckpointError(f"{what}: {at} is of type {type(value).__name__}, which is not JSON data; convert it with "
                          "int(), float(), str() or list(), or put numbers into arrays.")


def _as_float64(name: str, value: Any, what: str) -> np.ndarray:
    array = np.asarray(value)
    dtype = array.dtype
    if dtype.kind in "biu":
        # float64 holds integers exactly up to 2**53.
        if array.size and (np.any(array > 2**53) or (dtype.kind == "i" and np.any(array < -(2**53)))):
            raise CheckpointError(f"{what}: array {name!r} holds integers beyond 2**53, which float64 does not "
                                  "hold exactly; store them in meta.")
    elif not (dtype.kind == "f" and dtype.itemsize <= 8):
        raise CheckpointError(f"{what}: array {name!r} has dtype {dtype}; checkpoint arrays are float64: convert it "
                              "(real floating-point or integer values only).")
    if array.ndim > MAX_NDIM:
        raise CheckpointError(f"{what}: array {name!r} has {array.ndim} dimensions, more than {MAX_NDIM}; reshape "
                              "it.")
    if _nominal_bytes(array.shape) > MAX_ARRAY_BYTES:
        raise CheckpointError(f"{what}: array {name!r} of shape {array.shape} is larger than "
                              f"{MAX_ARRAY_BYTES // 2**30} GiB; split it over several records.")
    return np.asarray(array, dtype="<f8", order="C")  # ascontiguousarray would make 0-d arrays 1-d


def _nominal_bytes(shape: tuple[int, ...] | list[int]) -> int:
    """Bytes of a float64 array of ``shape`` with empty dimensions counted as 1 (bounds every
    dimension, so that numpy can build the shape)."""
    return 8 * math.prod(max(d, 1) for d in shape)


# -- decoding ------------------------------------------------------------------------------


class _Reader:
    """Reads a file front to back in chunks of :data:`_READ_CHUNK` (one system call per
    chunk, not two per record)."""

    def __init__(self, fd: int, size: int, where: str):
        self.fd, self.size, self.where = fd, size, where
        self.start, self.buffer = 0, b""

    def read(self, offset: int, n: int) -> bytes:
        """Exactly ``n`` bytes from ``offset`` (n was checked against the file size)."""
        inside = offset - self.start
        if 0 <= inside and inside + n <= len(self.buffer):
            return self.buffer[inside:inside + n]
        if n >= _READ_CHUNK:
            return bytes(_read_at(self.fd, n, offset, self.where))
        self.start = offset
        self.buffer = bytes(_read_at(self.fd, min(_READ_CHUNK, self.size - offset), offset, self.where))
        return self.buffer[:n]


def _read_log(fd: int, size: int, where: str, key: CheckpointKey | None, limit: int,
              note: Callable[[str], None] | None = None) -> tuple[dict[str, Any], list[StoredRecord], int, bytes]:
    """Header meta, the records after it, the end of the last good record and its mac.
    ``key`` None: any key and version 1 are read, and macs are not checked."""
    fix = "give the --checkpoint file of the run to resume"
    if size > limit:
        raise CheckpointError(f"{where}: the file has {size} bytes, more than the limit of {limit // 2**20} MiB for a "
                              f"checkpoint; if you trust its size, raise the limit with {LIMIT_VARIABLE}="
                              f"{-(-size // 2**20)}, else start the run again with --checkpoint.")
    reader = _Reader(fd, size, where)
    head = reader.read(0, min(size, _PRELUDE_SIZE))
    if head.startswith(MAGIC):
        if len(head) < _PRELUDE_SIZE:
            _no_header(where)
        version, tag = 2, _TAG
        if key is not None and head[len(MAGIC):len(MAGIC) + _KEY_ID_SIZE] != key.key_id:
            raise CheckpointError(f"{where}: the checkpoint was written with another key (another user or machine) "
                                  f"than yours ({key.path}), so its records cannot be trusted; continue it with "
                                  f"--resume-reevaluate {where} (every recorded point is evaluated again), or start "
                                  "the run again with --checkpoint.")
        offset = _PRELUDE_SIZE
        previous = head[offset - _NONCE_SIZE:offset]
    elif head.startswith(MAGIC_V1):
        if key is not None:
            raise CheckpointError(f"{where}: a version 1 checkpoint (written before fmi-adjoint authenticated its "
                                  "records), so its records cannot be trusted; continue it with --resume-reevaluate "
                                  f"{where} (every recorded point is evaluated again), or start the run again with "
                                  "--checkpoint.")
        version, tag, offset, previous = 1, _TAG_V1, len(MAGIC_V1), b""
    else:
        if not head:
            raise CheckpointError(f"{where}: the file is empty, not a checkpoint; {fix}, or remove it and start "
                                  "again with --checkpoint.")
        if MAGIC.startswith(head) or MAGIC_V1.startswith(head):
            _no_header(where)
        if head.startswith(_MAGIC_STEM):
            version_text = head[len(_MAGIC_STEM):].split(b"\n")[0].decode("ascii", "replace")
            raise CheckpointError(f"{where}: checkpoint format version {version_text!r}; this fmi-adjoint reads "
                                  "version 2: resume it with the fmi-adjoint that wrote it, or start a new run.")
        raise CheckpointError(f"{where}: not an fmi-adjoint checkpoint (it does not start with "
                              f"{MAGIC.decode().strip()!r}); {fix}.")
    records: list[StoredRecord] = []
    header: dict[str, Any] | None = None
    number = 0
    while offset < size:
        number += 1
        at = f"record {number} (at byte {offset})"
        remaining = size - offset
        fixed = reader.read(offset, min(remaining, _FIXED.size))
        if len(fixed) < _FIXED.size:
            if tag.startswith(fixed[:4]) or not any(fixed):
                break  # cut inside the fixed part: a torn last record
            raise CheckpointError(f"{where}: {at} does not start with {tag!r}; {_DAMAGED}.")
        found, meta_len, payload_len = _FIXED.unpack(fixed)
        if found != tag:
            if found == b"\0\0\0\0" and _all_zero(fd, offset, size, where):
                break  # zero-filled tail
            raise CheckpointError(f"{where}: {at} does not start with {tag!r}; {_DAMAGED}.")
        if meta_len > MAX_META_BYTES or payload_len > MAX_ARRAY_BYTES:
            raise CheckpointError(f"{where}: {at} claims {meta_len} bytes of JSON and {payload_len} bytes of arrays, "
                                  f"more than the limits ({MAX_META_BYTES} and {MAX_ARRAY_BYTES}); {_DAMAGED}.")
        full = _FIXED.size + meta_len + payload_len + _MAC_SIZE
        if full > remaining:
            _check_torn(fd, offset, remaining, meta_len, payload_len, where, at)
            break
        raw = reader.read(offset, full)
        body, trailer = memoryview(raw)[:-_MAC_SIZE], raw[-_MAC_SIZE:]
        if version == 1:
            good = hashlib.sha256(body).digest() == trailer
        elif key is not None:
            good = hmac.compare_digest(_mac_of(key, previous, [body]), trailer)
        else:
            good = True
        if not good:
            if full == remaining:
                break  # a damaged last record (the write did not reach the disk whole)
            what = "checksum" if version == 1 else "authentication code (HMAC with your key)"
            raise CheckpointError(f"{where}: {at} fails its {what} and more records follow it; "
                                  f"{_DAMAGED if version == 1 else _ALTERED}.")
        try:
            # The JSON part only: arrays are views made when the record is used.
            kind, meta, specs = _parse(raw[_FIXED.size:_FIXED.size + meta_len], payload_len)
        except _Malformed as exc:
            raise CheckpointError(f"{where}: {at} passes its {'checksum' if version == 1 else 'authentication'} but "
                                  f"{exc.args[0]}; this is not a file fmi-adjoint wrote: {fix}.") from None
        if (kind == HEADER_KIND) != (number == 1) or (number == 1 and specs):
            problem = "is not a header" if number == 1 else "is a second header"
            raise CheckpointError(f"{where}: {at} {problem}; this is not a file fmi-adjoint wrote: {fix}.")
        if number == 1:
            header = meta
        else:
            # Kept as bytes: a decoded record takes several times its size in Python objects.
            records.append(StoredRecord(sys.intern(kind), number, where, raw, meta_len, payload_len))
        previous = trailer
        offset += full
        if note is not None and number % NOTE_EVERY == 0:
            note(f"reading {where}: {number:,} records ({offset * 100 // size}% of the file) ...".replace(",", " "))
    if header is None:
        _no_header(where)
    return header, records, offset, previous


def _no_header(where: str) -> NoReturn:
    raise CheckpointError(f"{where}: the checkpoint has no complete header (the run stopped while creating it); "
                          "remove it and start again with --checkpoint.")


def _check_torn(fd: int, offset: int, remaining: int, meta_len: int, payload_len: int, where: str, at: str) -> None:
    """Accept a last record that ends beyond the end of the file as torn only if what is
    present is a prefix of a well-formed record; raise otherwise."""
    start = offset + _FIXED.size
    present = _read_at(fd, min(remaining - _FIXED.size, meta_len), start, where)
    stripped = present.rstrip(b"\0")
    if len(stripped) < len(present) and _all_zero(fd, start + len(stripped), offset + remaining, where):
        present = stripped  # zero fill after a power loss
    elif len(present) == meta_len:
        try:
            _parse(present, payload_len)
        except _Malformed as exc:
            raise CheckpointError(f"{where}: {at} extends beyond the end of the file and {exc.args[0]}; "
                                  f"{_DAMAGED}.") from None
        return
    # A JSON prefix is UTF-8 (its last character may be cut) without control characters;
    # a length field that reaches over later records takes in their binary parts.
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(present, final=False)
    except UnicodeDecodeError:
        text = "\0"
    if text[:1] not in ("", "{") or any(ch < " " for ch in text):
        raise CheckpointError(f"{where}: {at} extends beyond the end of the file and is not the beginning of a "
                              f"record (a length field is damaged); {_DAMAGED}.")


def _decode(raw: bytes | bytearray, meta_len: int, payload_len: int, number: int = 0, source: str = "") -> Record:
    start = _FIXED.size
    kind, meta, specs = _parse(bytes(raw[start:start + meta_len]), payload_len)
    offset = start + meta_len
    arrays: dict[str, np.ndarray] = {}
    for name, shape in specs:
        count = math.prod(shape)
        if count:
            # A view of the record's buffer, not a copy (records may hold large Jacobians).
            array = np.frombuffer(raw, dtype="<f8", count=count, offset=offset).reshape(shape)
        else:
            array = np.zeros(shape, dtype="<f8")
        array.flags.writeable = False
        arrays[name] = array
        offset += 8 * count
    return Record(kind=kind, meta=meta, arrays=arrays, number=number, source=source)


def _parse(text: bytes | bytearray, payload_len: int) -> tuple[str, dict[str, Any], list[tuple[str, tuple[int, ...]]]]:
    """Kind, meta and array specs from the JSON part; raises _Malformed with the reason."""
    try:
        obj = json.loads(text.decode("utf-8"), parse_constant=_refuse_constant, parse_float=_finite_float,
                         object_pairs_hook=_unique_keys)
    except UnicodeDecodeError:
        raise _Malformed("its JSON part is not UTF-8") from None
    except RecursionError:
        raise _Malformed("its JSON part is nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError and the refusals below
        raise _Malformed(f"its JSON part is invalid ({exc})") from None
    if not isinstance(obj, dict) or set(obj) != {"kind", "meta", "arrays"}:
        raise _Malformed('its JSON part is not an object with the keys "kind", "meta" and "arrays"')
    kind, meta, arrays = obj["kind"], obj["meta"], obj["arrays"]
    if not isinstance(kind, str) or not kind:
        raise _Malformed("its kind is not a non-empty string")
    if not isinstance(meta, dict):
        raise _Malformed("its meta is not an object")
    if not isinstance(arrays, list):
        raise _Malformed("its array list is not a list")
    specs: list[tuple[str, tuple[int, ...]]] = []
    names: set[str] = set()
    total = 0
    for spec in arrays:
        if not isinstance(spec, dict) or set(spec) != {"name", "shape"}:
            raise _Malformed('an array entry is not an object with the keys "name" and "shape"')
        name, shape = spec["name"], spec["shape"]
        if not isinstance(name, str) or name in names:
            raise _Malformed(f"the array name {name!r:.80} is not a str or is repeated")
        if (not isinstance(shape, list) or len(shape) > MAX_NDIM
                or not all(type(d) is int and d >= 0 for d in shape)):
            raise _Malformed(f"array {name!r:.80} has the invalid shape {shape!r:.80}")
        if _nominal_bytes(shape) > MAX_ARRAY_BYTES:
            raise _Malformed(f"array {name!r:.80} has a shape larger than the limit")
        names.add(name)
        total += 8 * math.prod(shape)
        specs.append((name, tuple(shape)))
    if total != payload_len:
        raise _Malformed(f"its array shapes need {total} bytes while it has {payload_len}")
    return kind, meta, specs


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not allowed")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text:.40} overflows a float")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("an object repeats a key")
    return result


# -- files ---------------------------------------------------------------------------------


def _folder(target: Path) -> Path:
    return target.parent if str(target.parent) else Path(".")


def _read_at(fd: int, n: int, offset: int, where: str) -> bytearray:
    """Exactly ``n`` bytes from ``offset`` (n was checked against the file size)."""
    buffer = bytearray(n)
    os.lseek(fd, offset, os.SEEK_SET)
    got = 0
    while got < n:
        chunk = os.read(fd, min(n - got, _READ_CHUNK))
        if not chunk:
            raise CheckpointError(f"{where}: the file became shorter while it was read; make sure no other "
                                  "program changes it, then resume again.")
        buffer[got:got + len(chunk)] = chunk
        got += len(chunk)
    return buffer


def _all_zero(fd: int, start: int, stop: int, where: str) -> bool:
    for offset in range(start, stop, _READ_CHUNK):
        if any(_read_at(fd, min(_READ_CHUNK, stop - offset), offset, where)):
            return False
    return True


def _write_all(fd: int, data: bytes) -> None:
    # One write for the whole record; a regular file takes fewer bytes only when interrupted
    # or near a limit (Linux writes at most 2 GiB - 4 KiB per call): then write the rest.
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _fsync_folder(folder: Path) -> None:
    """Make a new directory entry durable (POSIX; Windows cannot open folders)."""
    if sys.platform == "win32":
        return
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _OPEN_FLAGS)
    try:
        os.fsync(fd)
    except OSError as exc:
        # Some file systems do not sync folders; the file's own fsync is all they offer.
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF):
            raise
    finally:
        os.close(fd)


if sys.platform == "win32":

    def _lock(fd: int, where: str) -> None:
        """No lock on Windows (msvcrt byte locks would also block reading the file)."""

else:
    import fcntl

    def _lock(fd: int, where: str) -> None:
        """Hold an exclusive lock for the life of ``fd``, so two runs never append to one file."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CheckpointError(f"{where}: another run is using this checkpoint; wait for it to end, or choose "
                                  "another --checkpoint file.") from None
        except OSError as exc:
            if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                raise
