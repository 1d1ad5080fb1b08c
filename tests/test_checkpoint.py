"""The checkpoint file format (issue 14): round trips, torn tails, damage, hostile files,
concurrent appends.  The log is what a resumed identification replays, so every float must
come back bit for bit and no damage may pass unnoticed."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import struct
import threading
import tracemalloc

import numpy as np
import pytest

from fmi_adjoint.errors import CheckpointError
from fmi_adjoint.identify import checkpoint
from fmi_adjoint.identify.checkpoint import MAGIC, CheckpointKey, CheckpointLog

RNG_SEED = 14

HEADER = {"format": "identify", "problem": "sha256:0123abcd", "starts": 3, "bounds": [[0.0, 1.5], [-2.0, None]],
          "names": ["k", "d", "µ"], "nested": {"flag": True, "none": None}}

SPECIAL = np.array([-0.0, 0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, np.inf, -np.inf,
                    np.nan, 1 / 3, -1e-300, 0.1])


def sample_records() -> list[tuple[str, dict, dict[str, np.ndarray]]]:
    rng = np.random.default_rng(RNG_SEED)
    return [
        ("evaluation", {"start": 0, "n": 1}, {"x": rng.standard_normal(3), "J": np.array(0.5),
                                              "g": rng.standard_normal(3)}),
        ("evaluation", {"start": 0, "n": 2}, {"x": SPECIAL, "r": rng.standard_normal(40),
                                              "jac": rng.standard_normal((40, 3)),
                                              "cube": rng.standard_normal((2, 3, 4)), "empty": np.zeros((0, 5))}),
        ("start_done", {"start": 0, "status": "converged", "nit": 7}, {}),
        ("evaluation", {"start": 1, "n": 1}, {"x": rng.standard_normal(3) * 1e-310}),
    ]


def write_log(path, records=None, header=HEADER) -> None:
    with CheckpointLog.create(path, header) as log:
        for kind, meta, arrays in sample_records() if records is None else records:
            log.append(kind, meta, arrays)


def assert_records_equal(found, expected) -> None:
    assert len(found) == len(expected)
    for record, (kind, meta, arrays) in zip(found, expected):
        assert record.kind == kind
        assert record.meta == json.loads(json.dumps(meta))
        assert list(record.arrays) == list(arrays)
        for name, value in arrays.items():
            got = record.arrays[name]
            want = np.asarray(value, dtype="<f8")
            assert got.shape == want.shape, name
            assert got.dtype == np.float64
            assert got.tobytes() == want.tobytes(), name  # bit-exact, -0.0 and NaN payload included


#: MAGIC, key id, nonce.
PRELUDE = len(MAGIC) + 8 + 32


def user_secret() -> bytes:
    """The suite's checkpoint key (tests/conftest.py points FMI_ADJOINT_CONFIG at a temporary folder)."""
    CheckpointKey.load()
    return (checkpoint.config_folder() / checkpoint.KEY_FILE).read_bytes()


def record_bytes(kind, meta, arrays, *, text=None, tag=b"REC2") -> bytes:
    """A record's bytes before its mac, encoded independently, following the module docstring."""
    specs = [{"name": name, "shape": list(np.shape(a))} for name, a in arrays.items()]
    if text is None:
        text = json.dumps({"kind": kind, "meta": meta, "arrays": specs}).encode()
    payload = b"".join(np.asarray(a, dtype="<f8").tobytes() for a in arrays.values())
    return tag + struct.pack("<IQ", len(text), len(payload)) + text + payload


def file_bytes(*bodies, secret=None, nonce=bytes(range(32))) -> bytes:
    """A version 2 file of the records ``bodies`` (from :func:`record_bytes`), each closed by
    its mac under ``secret`` (default: the user's key)."""
    secret = user_secret() if secret is None else secret
    key_id = hmac.new(secret, b"fmi-adjoint checkpoint key id", hashlib.sha256).digest()[:8]
    out, previous = [MAGIC, key_id, nonce], nonce
    for body in bodies:
        previous = hmac.new(secret, previous + body, hashlib.sha256).digest()
        out += [body, previous]
    return b"".join(out)


def record_ends(path) -> list[int]:
    """Byte offsets where each record (header first) ends, read following the documentation."""
    raw = path.read_bytes()
    assert raw.startswith(MAGIC)
    offset, ends = PRELUDE, []
    while offset < len(raw):
        tag, m, n = struct.unpack_from("<4sIQ", raw, offset)
        assert tag == b"REC2"
        offset += 16 + m + n + 32
        ends.append(offset)
    assert offset == len(raw)
    return ends


# -- round trips ---------------------------------------------------------------------------


def test_round_trip_is_bit_exact(tmp_path):
    path = tmp_path / "run.ckpt"
    write_log(path)
    log, header, records = CheckpointLog.resume(path)
    with log:
        assert not log.dropped_tail and log.dropped_bytes == 0
    assert header == HEADER
    assert_records_equal(records, sample_records())
    assert records[1].arrays["empty"].shape == (0, 5)
    assert records[0].arrays["J"].shape == ()
    assert not records[1].arrays["jac"].flags.writeable  # the log is a frozen value


def test_arrays_of_other_layouts_are_stored_as_float64(tmp_path):
    path = tmp_path / "run.ckpt"
    source = np.arange(24, dtype=float).reshape(4, 6)
    arrays = {"strided": source[:, ::2], "fortran": np.asfortranarray(source), "big_endian": source.astype(">f8"),
              "float32": np.array([0.1, -3.5], dtype=np.float32), "ints": np.array([-(2**53), 7, 2**53]),
              "bools": np.array([True, False]), "list": [[1.5, 2.5]], "scalar": np.float64(-0.0)}
    with CheckpointLog.create(path, {}) as log:
        log.append("layouts", {}, arrays)
    log, _, [record] = CheckpointLog.resume(path)
    log.close()
    for name, value in arrays.items():
        want = np.asarray(value).astype(np.float64)
        assert record.arrays[name].shape == want.shape
        assert record.arrays[name].tobytes() == want.tobytes(), name


def test_header_round_trip_and_json_conversions(tmp_path):
    path = tmp_path / "run.ckpt"
    header = {"tuple": (1, 2.5), "unicode": "Δt → ∞", "float": 0.1, "big": 2**70, "empty": {}}
    CheckpointLog.create(path, header).close()
    log, found, records = CheckpointLog.resume(path)
    log.close()
    assert records == []
    assert found == {"tuple": [1, 2.5], "unicode": "Δt → ∞", "float": 0.1, "big": 2**70, "empty": {}}


def test_file_follows_the_documented_format(tmp_path):
    path = tmp_path / "run.ckpt"
    write_log(path)
    raw = path.read_bytes()
    assert raw.startswith(b"FMI-ADJOINT-CHECKPOINT 2\n")
    secret = user_secret()
    assert raw[len(MAGIC):len(MAGIC) + 8] == hmac.new(secret, b"fmi-adjoint checkpoint key id", "sha256").digest()[:8]
    offset, parsed = PRELUDE, []
    while offset < len(raw):
        tag, m, n = struct.unpack_from("<4sIQ", raw, offset)
        body_end = offset + 16 + m + n
        assert tag == b"REC2"
        # The mac covers the 32 bytes before the record (nonce or previous mac) and the record.
        assert raw[body_end:body_end + 32] == hmac.new(secret, raw[offset - 32:body_end], "sha256").digest()
        obj = json.loads(raw[offset + 16:offset + 16 + m].decode("utf-8"))
        at = offset + 16 + m
        arrays = {}
        for spec in obj["arrays"]:
            count = int(np.prod(spec["shape"]))
            arrays[spec["name"]] = np.frombuffer(raw, "<f8", count, at).reshape(spec["shape"])
            at += 8 * count
        assert at == body_end
        parsed.append((obj["kind"], obj["meta"], arrays))
        offset = body_end + 32
    assert parsed[0] == ("header", json.loads(json.dumps(HEADER)), {})
    assert_records_equal([checkpoint.Record(*p) for p in parsed[1:]], sample_records())


def test_reader_accepts_an_independently_written_file(tmp_path):
    path = tmp_path / "run.ckpt"
    arrays = {"x": np.array([1.0, -0.0]), "m": np.eye(2)}
    path.write_bytes(file_bytes(record_bytes("header", {"a": 1}, {}), record_bytes("evaluation", {"n": 1}, arrays)))
    log, header, records = CheckpointLog.resume(path)
    log.close()
    assert header == {"a": 1}
    assert_records_equal(records, [("evaluation", {"n": 1}, arrays)])


# -- torn and damaged last records ---------------------------------------------------------


def test_torn_last_record_at_every_length_is_dropped(tmp_path):
    full = tmp_path / "full.ckpt"
    write_log(full)
    raw = full.read_bytes()
    ends = record_ends(full)
    previous_end = ends[-2]
    expected = sample_records()
    extra = ("evaluation", {"start": 1, "n": 2}, {"x": np.array([1.0, -0.0, 5e-324])})
    path = tmp_path / "cut.ckpt"
    for length in range(previous_end, len(raw) + 1):
        path.write_bytes(raw[:length])
        log, header, records = CheckpointLog.resume(path)
        complete = length == len(raw)
        assert header == HEADER
        assert log.dropped_tail == (previous_end < length < len(raw)), length
        assert log.dropped_bytes == (0 if complete else length - previous_end)
        assert path.stat().st_size == (length if complete else previous_end)
        assert_records_equal(records, expected if complete else expected[:-1])
        with log:
            log.append(*extra)
        log, _, records = CheckpointLog.resume(path)
        log.close()
        assert not log.dropped_tail
        assert_records_equal(records, (expected if complete else expected[:-1]) + [extra])


def test_checksum_failing_last_record_is_dropped(tmp_path):
    path = tmp_path / "run.ckpt"
    write_log(path)
    raw = bytearray(path.read_bytes())
    ends = record_ends(path)
    for position in (ends[-2] + 20, len(raw) - 40, len(raw) - 1):  # JSON, payload, digest
        damaged = raw.copy()
        damaged[position] ^= 0x01
        path.write_bytes(damaged)
        log, _, records = CheckpointLog.resume(path)
        log.close()
        assert log.dropped_tail and log.dropped_bytes == len(raw) - ends[-2]
        assert_records_equal(records, sample_records()[:-1])


def test_zero_filled_tail_is_dropped(tmp_path):
    path = tmp_path / "run.ckpt"
    write_log(path)
    raw = path.read_bytes()
    ends = record_ends(path)
    last = raw[ends[-2]:]
    # A power loss: the size grew but the data did not arrive, wholly or after a prefix.
    for tail in (bytes(3), bytes(100), last[:16] + bytes(len(last) - 16), last[:40] + bytes(len(last) - 40),
                 last[:40] + bytes(10)):
        path.write_bytes(raw[:ends[-2]] + tail)
        log, _, records = CheckpointLog.resume(path)
        log.close()
        assert log.dropped_tail and path.stat().st_size == ends[-2]
        assert_records_equal(records, sample_records()[:-1])


def test_torn_header_means_no_checkpoint(tmp_path):
    path = tmp_path / "run.ckpt"
    CheckpointLog.create(path, HEADER).close()
    raw = path.read_bytes()
    for length in (5, len(MAGIC), len(MAGIC) + 10, len(raw) - 1):
        path.write_bytes(raw[:length])
        with pytest.raises(CheckpointError, match="no complete header") as info:
            CheckpointLog.resume(path)
        assert str(path) in str(info.value)
        assert path.read_bytes() == raw[:length]  # an error never modifies the file


# -- damage before the last record ---------------------------------------------------------


def test_any_flipped_bit_in_a_middle_record_is_an_error(tmp_path):
    path = tmp_path / "run.ckpt"
    write_log(path, sample_records()[:1] + sample_records()[2:])  # a small middle record
    raw = path.read_bytes()
    ends = record_ends(path)
    start, end = ends[1], ends[2]
    for position in range(start, end):
        for mask in (0x01, 0x80):
            damaged = bytearray(raw)
            damaged[position] ^= mask
            path.write_bytes(damaged)
            with pytest.raises(CheckpointError) as info:
                CheckpointLog.resume(path)
            message = str(info.value)
            assert str(path) in message and "--checkpoint" in message, (position, mask, message)
            assert path.read_bytes() == damaged  # nothing truncated


def test_enlarged_length_field_is_not_taken_for_a_torn_tail(tmp_path):
    # A damaged length that points beyond the end of the file must not cut off the records after it.
    path = tmp_path / "run.ckpt"
    write_log(path)
    raw = path.read_bytes()
    start = record_ends(path)[1]  # the second evaluation record: JSON and arrays
    for field, fmt, delta in ((4, "<I", 2**20), (8, "<Q", 2**20), (8, "<Q", 8 * 10**6)):
        damaged = bytearray(raw)
        (value,) = struct.unpack_from(fmt, damaged, start + field)
        struct.pack_into(fmt, damaged, start + field, value + delta)
        path.write_bytes(damaged)
        with pytest.raises(CheckpointError, match="extends beyond the end of the file"):
            CheckpointLog.resume(path)


def test_well_checksummed_but_malformed_records_are_errors(tmp_path):
    path = tmp_path / "run.ckpt"
    head = record_bytes("header", {}, {})
    good = record_bytes("evaluation", {}, {"x": np.ones(2)})
    cases = {
        "NaN in meta": record_bytes("e", {}, {}, text=b'{"kind":"e","meta":{"J":NaN},"arrays":[]}'),
        "overflowing float": record_bytes("e", {}, {}, text=b'{"kind":"e","meta":{"J":1e999},"arrays":[]}'),
        "repeated key": record_bytes("e", {}, {}, text=b'{"kind":"e","kind":"f","meta":{},"arrays":[]}'),
        "shape and payload disagree": record_bytes("e", {}, {"x": np.ones(2)}, text=b'{"kind":"e","meta":{},'
                                                   b'"arrays":[{"name":"x","shape":[3]}]}'),
        "negative dimension": record_bytes("e", {}, {}, text=b'{"kind":"e","meta":{},"arrays":'
                                                            b'[{"name":"x","shape":[-1]}]}'),
        "bool dimension": record_bytes("e", {}, {}, text=b'{"kind":"e","meta":{},"arrays":'
                                                        b'[{"name":"x","shape":[true]}]}'),
        "huge empty shape": record_bytes("e", {}, {}, text=b'{"kind":"e","meta":{},"arrays":'
                                                          b'[{"name":"x","shape":[0,4294967296,4294967296]}]}'),
        "name not a str": record_bytes("e", {}, {}, text=b'{"kind":"e","meta":{},"arrays":'
                                                        b'[{"name":1,"shape":[]}]}'),
        "meta a list": record_bytes("e", {}, {}, text=b'{"kind":"e","meta":[],"arrays":[]}'),
        "extra key": record_bytes("e", {}, {}, text=b'{"kind":"e","meta":{},"arrays":[],"code":"x"}'),
        "not UTF-8": record_bytes("e", {}, {}, text=b'{"kind":"\xff","meta":{},"arrays":[]}'),
        "deep nesting": record_bytes("e", {}, {}, text=b'{"kind":"e","meta":' + b"[" * 100000 + b"]" * 100000
                                     + b',"arrays":[]}'),
        "second header": record_bytes("header", {}, {}),
    }
    for name, record in cases.items():
        for layout in (file_bytes(head, record), file_bytes(head, record, good)):  # last record or not: both fail
            path.write_bytes(layout)
            with pytest.raises(CheckpointError, match="not a file fmi-adjoint wrote") as info:
                CheckpointLog.resume(path)
            assert str(path) in str(info.value), name
    path.write_bytes(file_bytes(good))
    with pytest.raises(CheckpointError, match="is not a header"):
        CheckpointLog.resume(path)


def test_hostile_lengths_are_refused_without_allocating(tmp_path):
    path = tmp_path / "run.ckpt"
    head = file_bytes(record_bytes("header", {}, {}))
    cases = [struct.pack("<4sIQ", b"REC1", 2**32 - 1, 0), struct.pack("<4sIQ", b"REC1", 10, 2**64 - 1),
             struct.pack("<4sIQ", b"REC1", 10, 2**40), struct.pack("<4sIQ", b"REC1", 2**24 + 1, 8)]
    for fixed in cases:
        for filler in (b"", b"{" + bytes(range(256)) * 4):
            path.write_bytes(head + fixed.replace(b"REC1", b"REC2") + filler)
            tracemalloc.start()
            try:
                with pytest.raises(CheckpointError, match="more than the limits") as info:
                    CheckpointLog.resume(path)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert str(path) in str(info.value)
            assert peak < 2**20


def test_a_plausible_length_beyond_the_end_reads_only_what_is_there(tmp_path):
    path = tmp_path / "run.ckpt"
    head = file_bytes(record_bytes("header", {}, {}))
    # 16 MiB of JSON and 2 GiB of arrays announced, 32 random bytes present: not a prefix of JSON.
    path.write_bytes(head + struct.pack("<4sIQ", b"REC2", 2**24, 2**31) + np.random.default_rng(1).bytes(32))
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointError, match="extends beyond the end of the file"):
            CheckpointLog.resume(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20


# -- wrong files ---------------------------------------------------------------------------


def test_files_that_are_not_checkpoints(tmp_path):
    cases = {"text.ckpt": (b"time,x\n0,1\n", "not an fmi-adjoint checkpoint"),
             "empty.ckpt": (b"", "empty"),
             "binary.ckpt": (bytes(range(256)), "not an fmi-adjoint checkpoint"),
             "v3.ckpt": (b"FMI-ADJOINT-CHECKPOINT 3\n" + record_bytes("header", {}, {}), "version '3'"),
             "garbage_after.ckpt": (file_bytes(record_bytes("header", {}, {})) + b"hello world, not a record",
                                    "does not start with")}
    for name, (content, problem) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(CheckpointError, match=problem) as info:
            CheckpointLog.resume(path)
        assert str(path) in str(info.value)
        assert path.read_bytes() == content


def test_missing_folder_and_fifo_are_errors(tmp_path):
    with pytest.raises(CheckpointError, match="file not found") as info:
        CheckpointLog.resume(tmp_path / "missing.ckpt")
    assert str(tmp_path / "missing.ckpt") in str(info.value)
    with pytest.raises(CheckpointError, match="a folder") as info:
        CheckpointLog.resume(tmp_path)
    assert str(tmp_path) in str(info.value)
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "fifo.ckpt"
        os.mkfifo(fifo)
        with pytest.raises(CheckpointError, match="a FIFO") as info:  # and it does not block
            CheckpointLog.resume(fifo)
        assert str(fifo) in str(info.value)


def test_create_refuses_existing_paths(tmp_path):
    path = tmp_path / "run.ckpt"
    write_log(path)
    before = path.read_bytes()
    folder = tmp_path / "folder"
    folder.mkdir()
    for existing in (path, folder):
        with pytest.raises(CheckpointError, match="already exists") as info:
            CheckpointLog.create(existing, HEADER)
        message = str(info.value)
        assert str(existing) in message and f"--resume {existing}" in message and "--checkpoint" in message
    assert path.read_bytes() == before
    with pytest.raises(CheckpointError, match="does not exist"):
        CheckpointLog.create(tmp_path / "no" / "run.ckpt", HEADER)


def test_a_checkpoint_in_use_is_refused(tmp_path):
    path = tmp_path / "run.ckpt"
    with CheckpointLog.create(path, HEADER):
        with pytest.raises(CheckpointError, match="another run is using"):
            CheckpointLog.resume(path)
    log, _, _ = CheckpointLog.resume(path)
    with log, pytest.raises(CheckpointError, match="another run is using"):
        CheckpointLog.resume(path)


# -- appending -----------------------------------------------------------------------------


def test_invalid_records_are_refused_before_writing(tmp_path):
    path = tmp_path / "run.ckpt"
    invalid = [("header", {}, None, "reserved"),
               ("", {}, None, "non-empty str"),
               ("e", {"J": float("nan")}, None, "JSON cannot hold"),
               ("e", {"J": [1.0, float("inf")]}, None, "JSON cannot hold"),
               ("e", {1: "a"}, None, "JSON keys are str"),
               ("e", {"n": np.int64(3)}, None, "not JSON data"),
               ("e", {"x": np.ones(2)}, None, "not JSON data"),
               ("e", [1], None, "must be a dict"),
               ("e", {}, {"z": np.ones(2, dtype=complex)}, "checkpoint arrays are float64"),
               ("e", {}, {"o": np.array([1.0, None])}, "checkpoint arrays are float64"),
               ("e", {}, {"q": np.ones(2, dtype=np.longdouble)}, "checkpoint arrays are float64"),
               ("e", {}, {"i": np.array([2**53 + 1])}, "beyond 2\\*\\*53"),
               ("e", {}, {"u": np.array([2**64 - 1], dtype=np.uint64)}, "beyond 2\\*\\*53"),
               ("e", {}, {1: np.ones(2)}, "names must be str")]
    if np.dtype(np.longdouble).itemsize == 8:
        invalid = [case for case in invalid if case[2] is None or "q" not in case[2]]
    with CheckpointLog.create(path, HEADER) as log:
        size = path.stat().st_size
        for kind, meta, arrays, problem in invalid:
            with pytest.raises(CheckpointError, match=problem):
                log.append(kind, meta, arrays)
        assert path.stat().st_size == size
        log.append("e", {"ok": True})
    with pytest.raises(CheckpointError, match="closed"):
        log.append("e", {})
    log, _, records = CheckpointLog.resume(path)
    log.close()
    assert [(r.kind, r.meta) for r in records] == [("e", {"ok": True})]
    with pytest.raises(CheckpointError, match="JSON cannot hold"):
        CheckpointLog.create(tmp_path / "other.ckpt", {"x": float("nan")})
    assert not (tmp_path / "other.ckpt").exists()


def test_a_failed_append_is_undone(tmp_path, monkeypatch):
    path = tmp_path / "run.ckpt"
    real_write_all = checkpoint._write_all

    def disk_full(fd, data):
        os.write(fd, data[:len(data) // 2])
        raise OSError(28, "No space left on device")

    with CheckpointLog.create(path, HEADER) as log:
        log.append("a", {"n": 1}, {"x": np.ones(3)})
        size = path.stat().st_size
        monkeypatch.setattr(checkpoint, "_write_all", disk_full)
        with pytest.raises(CheckpointError, match="No space left on device") as info:
            log.append("b", {"n": 2}, {"x": np.ones(300)})
        assert "--resume" in str(info.value)
        assert path.stat().st_size == size
        monkeypatch.setattr(checkpoint, "_write_all", real_write_all)
        log.append("c", {"n": 3})
    log, _, records = CheckpointLog.resume(path)
    log.close()
    assert not log.dropped_tail
    assert [r.kind for r in records] == ["a", "c"]


def test_concurrent_appends_from_eight_threads(tmp_path):
    path = tmp_path / "run.ckpt"
    n_threads, per_thread = 8, 25
    barrier = threading.Barrier(n_threads)

    def values(t, i):
        return np.random.default_rng([RNG_SEED, t, i]).standard_normal((i % 4 + 1, 17))

    with CheckpointLog.create(path, HEADER) as log:
        def work(t):
            barrier.wait()
            for i in range(per_thread):
                log.append("evaluation", {"thread": t, "i": i}, {"v": values(t, i), "t": np.full(50, float(t))})

        threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    log, _, records = CheckpointLog.resume(path)
    log.close()
    assert not log.dropped_tail
    assert len(records) == n_threads * per_thread
    seen: dict[int, list[int]] = {t: [] for t in range(n_threads)}
    for record in records:
        t, i = record.meta["thread"], record.meta["i"]
        seen[t].append(i)
        assert record.arrays["v"].tobytes() == values(t, i).tobytes()
        assert np.all(record.arrays["t"] == t)
    assert all(order == list(range(per_thread)) for order in seen.values())
