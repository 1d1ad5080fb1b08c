"""Checkpoint files of an identification run (issue 14): an append-only, checksummed log.

How a run is resumed
--------------------
``identify --resume RUN.ckpt`` does not restore optimizer internals (scipy's L-BFGS-B and
``least_squares`` expose none that could be restored exactly).  It replays: the checkpoint
is a log of every evaluation of every start (the point ``x`` and what the problem returned
for it, ``J`` and ``g`` or residuals and Jacobian) plus a record per finished start.  On
resume the optimizer runs again from the start and its evaluations are answered from the
log, bit for bit, so it retraces its path without simulating and then continues.  The final
result therefore equals that of an uninterrupted run.  This module is the file format only;
what the records mean (their ``kind`` and ``meta``) is decided by the caller.

File format (version 1)
-----------------------
All integers are little-endian::

    file    = MAGIC record+                      MAGIC = b"FMI-ADJOINT-CHECKPOINT 1\\n"
    record  = b"REC1"  u32 m  u64 n  json[m]  payload[n]  sha256[32]

* ``json`` is UTF-8 JSON (this writer emits ASCII only) of the object
  ``{"kind": str, "meta": object, "arrays": [{"name": str, "shape": [int, ...]}, ...]}``.
  ``NaN``, ``Infinity`` and floats that overflow to infinity are refused on writing and on
  reading, as are duplicate keys.  Everything numeric that must come back bit-exact goes
  into arrays; ``meta`` is for names, counts and flags (Python's float repr round-trips
  too, but that is not the contract).  Tuples in ``meta`` come back as lists.
* ``payload`` is the arrays' values as float64 little-endian in C order, concatenated in
  the order of ``"arrays"``, so ``n = 8 * sum(prod(shape))``.  The dtype is always float64.
* ``sha256`` is the SHA-256 digest of all bytes of the record before it (tag to payload).
* The first record has kind ``"header"`` and no arrays; its ``meta`` is the run's header
  (what the caller needs to check that a resume continues the same run).

Why JSON and never pickle: a checkpoint is untrusted data (it may be copied between
machines or be damaged), and unpickling executes code.  Reading allocates nothing a
hostile length field asks for: ``m <= 16 MiB`` and ``n <= 2 GiB`` (:data:`MAX_META_BYTES`,
:data:`MAX_ARRAY_BYTES`) are checked, and a record is read only once the file is known to
hold all of it; at most :data:`MAX_NDIM` dimensions, and the shapes must account for ``n``
exactly.

Durability and torn tails
-------------------------
A record is written with one ``os.write`` of its whole bytes (repeated only for the rest
if the system writes fewer), then ``os.fsync``; creating a file also syncs its folder.  A
``kill -9`` during an append can therefore leave only the *last* record incomplete.  On
resume such a tail is dropped and the file truncated to the last good record
(:attr:`CheckpointLog.dropped_tail`); so is a complete last record whose checksum fails
and a zero-filled tail (a power loss may extend a file before its data reach the disk).
A tail is accepted as torn only if what is present is a prefix of a well-formed record:
the tag, a JSON prefix of printable text, and, when the JSON is complete, shapes that
agree with the payload length; a damaged length field in the middle of the file thus
raises :class:`~fmi_adjoint.errors.CheckpointError` instead of silently cutting off the
records after it.  Any other damage raises too.  A failed append (disk full) is undone by
truncating the file back to its previous end.

An exclusive ``flock`` (POSIX) is held while a log is open, so two runs never append to
the same file.
"""

from __future__ import annotations

import codecs
import dataclasses
import errno
import hashlib
import json
import math
import os
import stat
import struct
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

import numpy as np

from ..errors import CheckpointError
from ..files import file_kind

__all__ = ["MAGIC", "MAX_META_BYTES", "MAX_ARRAY_BYTES", "MAX_NDIM", "HEADER_KIND", "CheckpointLog", "Record",
           "CheckpointError"]

#: First bytes of every checkpoint file (format version 1).
MAGIC = b"FMI-ADJOINT-CHECKPOINT 1\n"
_MAGIC_STEM = b"FMI-ADJOINT-CHECKPOINT "
_TAG = b"REC1"
#: tag, JSON length m (u32), payload length n (u64).
_FIXED = struct.Struct("<4sIQ")
_DIGEST_SIZE = hashlib.sha256().digest_size

#: Largest JSON part of one record.
MAX_META_BYTES = 16 * 2**20
#: Largest array payload of one record.
MAX_ARRAY_BYTES = 2 * 2**30
#: Most dimensions of one array.
MAX_NDIM = 32
#: Kind of the first record, reserved for it.
HEADER_KIND = "header"

_READ_CHUNK = 64 * 2**20
_OPEN_FLAGS = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOCTTY", 0)
_DAMAGED = "the file is damaged; restore a copy, or remove it and start the run again with --checkpoint"


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
    """

    kind: str
    meta: dict[str, Any]
    arrays: dict[str, np.ndarray]


class _Malformed(Exception):
    """Internal: the JSON part of a record is not what this format allows (reason in args[0])."""


class CheckpointLog:
    """An open checkpoint file to which records are appended.

    Open one with :meth:`create` (new file) or :meth:`resume` (existing file, records
    read back).  :meth:`append` is thread-safe.  Use as a context manager or call
    :meth:`close`.

    Attributes
    ----------
    path : pathlib.Path
    dropped_tail : bool
        True if :meth:`resume` dropped an incomplete or damaged last record.
    dropped_bytes : int
        How many bytes it dropped.
    """

    def __init__(self, path: Path, fd: int, end: int, dropped_bytes: int = 0):
        # Use create() or resume(); the constructor takes an fd that is open and locked.
        self.path = path
        self.dropped_bytes = dropped_bytes
        self.dropped_tail = dropped_bytes > 0
        self._fd = fd
        self._end = end
        self._broken: str | None = None
        self._lock = threading.Lock()

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def create(cls, path: str | os.PathLike, header: dict[str, Any]) -> CheckpointLog:
        """Create the checkpoint ``path`` with ``header`` as its first record.

        Raises
        ------
        CheckpointError
            If ``path`` exists (whatever it is), its folder does not, ``header`` is not
            JSON data, or the file cannot be written.
        """
        target = Path(path)
        where = str(path)
        data = MAGIC + _encode(HEADER_KIND, header, {}, what="the checkpoint header")
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
        return cls(target, fd, len(data))

    @classmethod
    def resume(cls, path: str | os.PathLike) -> tuple[CheckpointLog, dict[str, Any], list[Record]]:
        """Open the checkpoint ``path``, validate it and read it back.

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
            If ``path`` is missing, not a regular file, not a checkpoint, of another format
            version, damaged anywhere but in its last record, or in use by another run.
            The file is modified (truncated) only when everything else is valid.
        """
        target = Path(path)
        where = str(path)
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
            fd = os.open(target, os.O_RDWR | os.O_APPEND | getattr(os, "O_NONBLOCK", 0) | _OPEN_FLAGS)
        except OSError as exc:
            raise CheckpointError(f"{where}: cannot open it for reading and appending ({exc.strerror or exc}); make "
                                  "it readable and writable, or start a new run with another --checkpoint file."
                                  ) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise CheckpointError(f"{where}: it is {file_kind(info.st_mode)}, not a checkpoint file; {fix}.")
            if hasattr(os, "set_blocking"):
                os.set_blocking(fd, True)
            _lock(fd, where)
            header, records, end = _read_log(fd, os.fstat(fd).st_size, where)
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
        return cls(target, fd, end, dropped), header, records

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
        data = _encode(kind, meta, {} if arrays is None else arrays, what=f"the {kind!r} record")
        where = str(self.path)
        with self._lock:
            if self._fd < 0:
                raise CheckpointError(f"{where}: the checkpoint log is closed; append before closing it.")
            if self._broken is not None:
                raise CheckpointError(f"{where}: an earlier append failed ({self._broken}) and the file could not "
                                      f"be repaired; resume it with --resume {where}.")
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


# -- encoding ------------------------------------------------------------------------------


def _encode(kind: Any, meta: Any, arrays: Mapping[str, Any], what: str) -> bytes:
    """The bytes of one record (validated so that the reader accepts it)."""
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
    head = _FIXED.pack(_TAG, len(text), total)
    digest = hashlib.sha256(head)
    digest.update(text)
    parts: list[Any] = [head, text]
    for array in values:
        if array.size:  # memoryviews of empty arrays cannot be cast to bytes
            raw = array.reshape(-1).data.cast("B")
            digest.update(raw)
            parts.append(raw)
    parts.append(digest.digest())
    return b"".join(parts)


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


def _read_log(fd: int, size: int, where: str) -> tuple[dict[str, Any], list[Record], int]:
    """Header meta, the records after it, and the end of the last good record."""
    fix = "give the --checkpoint file of the run to resume"
    head = _read_at(fd, min(size, len(MAGIC)), 0, where)
    if head != MAGIC:
        if not head:
            raise CheckpointError(f"{where}: the file is empty, not a checkpoint; {fix}, or remove it and start "
                                  "again with --checkpoint.")
        if MAGIC.startswith(head):
            _no_header(where)
        if head.startswith(_MAGIC_STEM):
            version = head[len(_MAGIC_STEM):].split(b"\n")[0].decode("ascii", "replace")
            raise CheckpointError(f"{where}: checkpoint format version {version!r}; this fmi-adjoint reads version "
                                  "1: resume it with the fmi-adjoint that wrote it, or start a new run.")
        raise CheckpointError(f"{where}: not an fmi-adjoint checkpoint (it does not start with "
                              f"{MAGIC.decode().strip()!r}); {fix}.")
    records: list[Record] = []
    offset = len(MAGIC)
    while offset < size:
        number = len(records) + 1
        at = f"record {number} (at byte {offset})"
        remaining = size - offset
        fixed = _read_at(fd, min(remaining, _FIXED.size), offset, where)
        if len(fixed) < _FIXED.size:
            if _TAG.startswith(fixed[:4]) or not any(fixed):
                break  # cut inside the fixed part: a torn last record
            raise CheckpointError(f"{where}: {at} does not start with {_TAG!r}; {_DAMAGED}.")
        tag, meta_len, payload_len = _FIXED.unpack(fixed)
        if tag != _TAG:
            if tag == b"\0\0\0\0" and _all_zero(fd, offset, size, where):
                break  # zero-filled tail
            raise CheckpointError(f"{where}: {at} does not start with {_TAG!r}; {_DAMAGED}.")
        if meta_len > MAX_META_BYTES or payload_len > MAX_ARRAY_BYTES:
            raise CheckpointError(f"{where}: {at} claims {meta_len} bytes of JSON and {payload_len} bytes of arrays, "
                                  f"more than the limits ({MAX_META_BYTES} and {MAX_ARRAY_BYTES}); {_DAMAGED}.")
        full = _FIXED.size + meta_len + payload_len + _DIGEST_SIZE
        if full > remaining:
            _check_torn(fd, offset, remaining, meta_len, payload_len, where, at)
            break
        raw = _read_at(fd, full, offset, where)
        view = memoryview(raw)
        if hashlib.sha256(view[:-_DIGEST_SIZE]).digest() != view[-_DIGEST_SIZE:]:
            if full == remaining:
                break  # a damaged last record (the write did not reach the disk whole)
            raise CheckpointError(f"{where}: {at} fails its checksum and more records follow it; {_DAMAGED}.")
        try:
            record = _decode(raw, meta_len, payload_len)
        except _Malformed as exc:
            raise CheckpointError(f"{where}: {at} passes its checksum but {exc.args[0]}; this is not a file "
                                  f"fmi-adjoint wrote: {fix}.") from None
        if (record.kind == HEADER_KIND) != (number == 1) or (number == 1 and record.arrays):
            problem = "is not a header" if number == 1 else "is a second header"
            raise CheckpointError(f"{where}: {at} {problem}; this is not a file fmi-adjoint wrote: {fix}.")
        records.append(record)
        offset += full
    if not records:
        _no_header(where)
    return records[0].meta, records[1:], offset


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


def _decode(raw: bytes | bytearray, meta_len: int, payload_len: int) -> Record:
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
    return Record(kind=kind, meta=meta, arrays=arrays)


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
            raise _Malformed(f"the array name {name!r} is not a str or is repeated")
        if (not isinstance(shape, list) or len(shape) > MAX_NDIM
                or not all(type(d) is int and d >= 0 for d in shape)):
            raise _Malformed(f"array {name!r} has the invalid shape {shape!r:.80}")
        if _nominal_bytes(shape) > MAX_ARRAY_BYTES:
            raise _Malformed(f"array {name!r} has a shape larger than the limit")
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
