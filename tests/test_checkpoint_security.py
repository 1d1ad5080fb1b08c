"""Checkpoints are untrusted input (issue 31, finding 3): records authenticated with a private
per-user key, every field validated before use, a size limit, bounded memory, and a resume
that re-evaluates a checkpoint it cannot trust.  Each forged or malformed checkpoint of the
red-team campaign is refused with one line naming the file and the record."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
import struct
import subprocess
import sys
import warnings

import numpy as np
import pytest

from captured_cli import cli
from fmi_adjoint.errors import CheckpointError
from fmi_adjoint.identify import checkpoint
from fmi_adjoint.identify.checkpoint import MAGIC, MAGIC_V1, CheckpointKey, CheckpointLog

# L-BFGS-B: its evaluation records carry a cost and a gradient (J, g), the fields forged below;
# the default (Gauss-Newton for this least-squares cost) records residuals and their Jacobian.
RUN = ["--params", "c,d", "--step", "1e-2", "--starts", "3", "--bounds", "c=0.5:3", "--bounds", "d=0.1:2",
       "--max-iter", "6", "--workers", "1", "--method", "lbfgsb"]


# -- writing checkpoints independently of the module (following its docstring) -------------


def body(kind, meta, arrays, tag=b"REC2") -> bytes:
    specs = [{"name": name, "shape": list(np.shape(a))} for name, a in arrays.items()]
    text = json.dumps({"kind": kind, "meta": meta, "arrays": specs}).encode()
    payload = b"".join(np.asarray(a, dtype="<f8").tobytes() for a in arrays.values())
    return tag + struct.pack("<IQ", len(text), len(payload)) + text + payload


def write_v2(path, header, records, secret) -> None:
    """``records``: (kind, meta, arrays) after the header, authenticated with ``secret``."""
    nonce = secrets.token_bytes(32)
    key_id = hmac.new(secret, b"fmi-adjoint checkpoint key id", hashlib.sha256).digest()[:8]
    out, previous = [MAGIC, key_id, nonce], nonce
    for record in [("header", header, {}), *records]:
        data = body(*record)
        previous = hmac.new(secret, previous + data, hashlib.sha256).digest()
        out += [data, previous]
    path.write_bytes(b"".join(out))


def write_v1(path, header, records) -> None:
    """The format before issue 31: unkeyed SHA-256 after each record (anyone can write it)."""
    out = [MAGIC_V1]
    for record in [("header", header, {}), *records]:
        data = body(*record, tag=b"REC1")
        out += [data, hashlib.sha256(data).digest()]
    path.write_bytes(b"".join(out))


def user_secret() -> bytes:
    CheckpointKey.load()
    return (checkpoint.config_folder() / checkpoint.KEY_FILE).read_bytes()


def read_back(path):
    log, header, records = CheckpointLog.resume(path)
    log.close()
    return header, [(r.kind, dict(r.meta), {k: np.array(v) for k, v in r.arrays.items()}) for r in records]


# -- a genuine run to forge from -----------------------------------------------------------


@pytest.fixture(scope="module")
def genuine(tmp_path_factory):
    """sdof data, the uninterrupted run's RESULT.json and its checkpoint's records."""
    folder = tmp_path_factory.mktemp("ckpt-security")
    data = folder / "data.csv"
    code, _, err = cli(["simulate", "sdof", "--step", "1e-2", "--set", "c=1.3", "--set", "d=0.4", "-o", data])
    assert code == 0, err
    ckpt, result = folder / "run.ckpt", folder / "reference.json"
    code, _, err = cli(["identify", "sdof", "--data", data, *RUN, "--checkpoint", ckpt, "-o", result])
    assert code in (0, 1), err  # 1: not converged in --max-iter 6, which is enough here
    header, records = read_back(ckpt)
    return {"data": data, "result": json.loads(result.read_text()), "header": header, "records": records}


def identify(genuine, *extra):
    return cli(["identify", "sdof", "--data", genuine["data"], *RUN, *extra])


def numbers(result: dict) -> dict:
    keep = {k: result[k] for k in ("parameters", "cost", "cost_history", "iterations", "success")}
    keep["starts"] = [{k: v for k, v in r.items() if k != "seconds"} for r in result["multistart"]["results"]]
    for start in keep["starts"]:  # the stages of a staged start, but their times
        start["stages"] = [{k: v for k, v in s.items() if k != "seconds"} for s in start.get("stages", [])]
    return keep


def first(records, kind):
    """The first record of ``kind`` that did not fail; of evaluations, the first with a cost and
    gradient (the default strategy's windowed starts begin with a residuals-only evaluation)."""
    if kind == "residuals":  # an evaluation of residuals (the windows' first, residuals only)
        return next(i for i, r in enumerate(records) if r[0] == "evaluation" and "r" in r[2])
    return next(i for i, r in enumerate(records) if r[0] == kind and not r[1].get("failed")
                and (kind != "evaluation" or "J" in r[2]))


def refused(code, err, path, number=None) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fmi-adjoint: error: "), err
    assert str(path) in err
    if number is not None:
        assert f"record {number} " in err, err
    return err


# -- forged records ------------------------------------------------------------------------


def test_a_forged_start_in_an_unkeyed_version_1_file_is_refused(genuine, tmp_path):
    # The campaign's case: a `start` record with c = 9.5, d = 4.5, cost 0 became the result.
    records = [r for r in genuine["records"] if r[0] != "start" or r[1]["start"] != 0]
    k = first(genuine["records"], "start")
    kind, meta, arrays = genuine["records"][k]
    forged = dict(arrays, parameters=np.array([9.5, 4.5]), numbers=np.array([1.0, 0.0, 1.0]))
    path = tmp_path / "forged.ckpt"
    write_v1(path, genuine["header"], [*records, (kind, dict(meta, start=0), forged)])
    err = refused(*identify(genuine, "--resume", path, "-o", tmp_path / "r.json")[::2], path)
    assert "version 1" in err and f"--resume-reevaluate {path}" in err
    assert not (tmp_path / "r.json").exists()


def test_records_written_with_another_key_are_refused_as_such(genuine, tmp_path):
    path = tmp_path / "foreign.ckpt"
    write_v2(path, genuine["header"], genuine["records"], secrets.token_bytes(32))
    err = refused(*identify(genuine, "--resume", path)[::2], path)
    assert "written with another key (another user or machine)" in err and "damaged" not in err
    assert f"--resume-reevaluate {path}" in err


def test_a_forged_record_in_the_middle_is_refused_and_at_the_end_dropped(genuine, tmp_path):
    secret = user_secret()
    path = tmp_path / "run.ckpt"
    write_v2(path, genuine["header"], genuine["records"], secret)
    raw = path.read_bytes()
    k = first(genuine["records"], "start")
    kind, meta, arrays = genuine["records"][k]
    forged = body(kind, meta, dict(arrays, parameters=np.array([9.5, 4.5]), numbers=np.array([1.0, 0.0, 1.0])))
    # Without the key the attacker can only guess the mac.
    record = forged + hashlib.sha256(forged).digest()
    offset = len(MAGIC) + 40
    ends = []
    while offset < len(raw):
        _, m, n = struct.unpack_from("<4sIQ", raw, offset)
        offset += 16 + m + n + 32
        ends.append(offset)
    middle = raw[:ends[3]] + record + raw[ends[3]:]
    path.write_bytes(middle)
    err = refused(*identify(genuine, "--resume", path)[::2], path, number=5)
    assert "fails its authentication code" in err
    path.write_bytes(raw + record)  # as the last record: taken for a torn write and dropped
    code, out, err = identify(genuine, "--resume", path, "--json")
    assert code in (0, 1), err
    assert numbers(json.loads(out)) == numbers(genuine["result"])
    assert path.read_bytes() == raw


FIELD_CASES = {
    # id: (kind of the record changed, change, words of the error)
    "foreign names": ("start", lambda m, a: m.update(names=["k", "b"]), "parameter names"),
    "short parameter vector": ("start", lambda m, a: a.update(parameters=np.array([1.3])), "'parameters'"),
    "short x": ("evaluation", lambda m, a: a.update(x=np.array([1.0])), "'x'"),
    "x outside the bounds": ("evaluation", lambda m, a: a.update(x=np.array([9.5, 0.4])), "outside its bounds"),
    "success 'no'": ("start", lambda m, a: m.update(success="no"), "'success'"),
    "NaN cost": ("start", lambda m, a: a.update(numbers=np.array([1.0, np.nan, 1.0])), "NaN or infinite"),
    "infinite cost history": ("start", lambda m, a: a.update(cost_history=np.array([1.0, np.inf])),
                              "NaN or infinite"),
    "NaN cost of an evaluation": ("evaluation", lambda m, a: a.update(J=np.array([np.nan])), "NaN or infinite"),
    "start index 0.9": ("evaluation", lambda m, a: m.update(start=0.9), "start index"),
    "start index 'abc'": ("evaluation", lambda m, a: m.update(start="abc"), "start index"),
    "start index of a 4th start": ("start", lambda m, a: m.update(start=3), "start index"),
    "simulations 1e18": ("start", lambda m, a: m.update(simulations=1e18), "'simulations'"),
    "simulations 10**18": ("evaluation", lambda m, a: m.update(simulations=10**18), "'simulations'"),
    "NaN residual": ("residuals", lambda m, a: a.update(r=np.full_like(a["r"], np.nan)), "NaN or infinite"),
    "residuals of the wrong shape": ("residuals", lambda m, a: a.update(r=np.ones((2, 2))), "'r'"),
    "gradient of the wrong shape": ("evaluation", lambda m, a: a.update(g=np.ones((2, 2))), "'g'"),
    "missing x": ("evaluation", lambda m, a: a.pop("x"), "the arrays"),
    "missing J": ("evaluation", lambda m, a: a.pop("J"), "the arrays"),
    "forged failed start": ("start", lambda m, a: (m.clear(), m.update(start=1, failed="yes", message="x")),
                            "a failed start"),
    "huge message": ("start", lambda m, a: m.update(message="x" * 100000), "'message'"),
    "forged stage": ("start", lambda m, a: m.update(stages=[{"stage": "window", "iterations": -1}]), "a stage"),
    "stage cost as text": ("start", lambda m, a: m.update(stages=[dict(m["stages"][0], cost="0.5")]),
                           "a stage's 'cost'"),
    "unknown kind": ("other", None, "the kind"),
}


@pytest.mark.parametrize("case", list(FIELD_CASES), ids=list(FIELD_CASES))
def test_every_field_is_validated_before_use(genuine, tmp_path, case):
    kind, change, words = FIELD_CASES[case]
    records = [(k, dict(m), dict(a)) for k, m, a in genuine["records"]]
    if kind == "other":
        k = 0
        records[0] = ("note", *records[0][1:])
    else:
        k = first(records, kind)
        change(records[k][1], records[k][2])
    path = tmp_path / "run.ckpt"
    write_v2(path, genuine["header"], records, user_secret())  # authenticated: the fields must be checked
    code, _, err = identify(genuine, "--resume", path, "-o", tmp_path / "r.json")
    err = refused(code, err, path, number=k + 2)
    assert words in err and "internal error" not in err
    assert not (tmp_path / "r.json").exists()


# -- re-evaluating a checkpoint that cannot be trusted -------------------------------------


def test_resume_reevaluate_continues_a_foreign_checkpoint_to_the_uninterrupted_result(genuine, tmp_path):
    records = genuine["records"]
    cut = first(records, "start") + 3  # as if killed in the second start
    foreign = tmp_path / "foreign.ckpt"
    write_v2(foreign, genuine["header"], records[:cut], secrets.token_bytes(32))
    before = foreign.read_bytes()
    new = tmp_path / "new.ckpt"
    code, out, err = identify(genuine, "--resume-reevaluate", foreign, "--checkpoint", new, "--json")
    assert code in (0, 1), err
    assert numbers(json.loads(out)) == numbers(genuine["result"])
    assert foreign.read_bytes() == before  # only read
    # The new checkpoint is the user's own: --resume trusts it.
    code, out, err = identify(genuine, "--resume", new, "--json")
    assert code in (0, 1), err
    assert numbers(json.loads(out)) == numbers(genuine["result"])


def test_resume_reevaluate_trusts_no_value_and_leaves_a_forged_path(genuine, tmp_path):
    records = [(k, dict(m), dict(a)) for k, m, a in genuine["records"]]
    s = first(records, "start")
    kind, meta, arrays = records[s]
    records[s] = (kind, meta, dict(arrays, parameters=np.array([2.5, 1.5]), numbers=np.array([1.0, 0.0, 1.0])))
    e = first(records, "evaluation") + 1
    records[e][2].update(x=np.array([2.9, 1.9]), J=np.array([0.0]))  # a forged point: the run leaves it
    path = tmp_path / "v1.ckpt"
    write_v1(path, genuine["header"], records)
    code, out, err = identify(genuine, "--resume-reevaluate", path, "--json")
    assert code in (0, 1), err
    assert numbers(json.loads(out)) == numbers(genuine["result"])
    assert "left the recorded path" in err
    code, _, err = identify(genuine, "--resume-reevaluate", path, "--resume", path)
    assert code == 2 and "either --resume" in err


# -- the key -------------------------------------------------------------------------------


def test_the_key_is_created_private_whatever_the_umask(tmp_path, monkeypatch):
    folder = tmp_path / "config" / "fmi-adjoint"
    monkeypatch.setenv("FMI_ADJOINT_CONFIG", str(folder))
    old = os.umask(0)
    try:
        key = CheckpointKey.load()
    finally:
        os.umask(old)
    path = folder / "checkpoint.key"
    assert key.path == str(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert len(path.read_bytes()) == 32
    assert CheckpointKey.load().key_id == key.key_id  # the same key next time
    assert not [p for p in folder.iterdir() if p.name != "checkpoint.key"]  # no temporary file left


def test_a_key_others_can_read_or_that_is_not_ours_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("FMI_ADJOINT_CONFIG", str(tmp_path))
    CheckpointKey.load()
    path = tmp_path / "checkpoint.key"
    path.chmod(0o644)
    with pytest.raises(CheckpointError, match=r"mode 0644.*chmod 600") as info:
        CheckpointKey.load()
    assert str(path) in str(info.value)
    path.chmod(0o600)
    if os.geteuid() == 0:  # root can give the file away: a key another user owns
        os.chown(path, 65534, -1)
        with pytest.raises(CheckpointError, match="belongs to user id 65534, not to you"):
            CheckpointKey.load()
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(CheckpointError, match="symbolic link"):
        CheckpointKey.load()
    path.unlink()
    path.write_bytes(b"short")
    path.chmod(0o600)
    with pytest.raises(CheckpointError, match="holds 5 bytes instead of 32"):
        CheckpointKey.load()


def test_processes_creating_the_key_at_once_share_one(tmp_path, monkeypatch):
    # Six forked processes wait on one pipe and load the key when it closes: all get the same.
    monkeypatch.setenv("FMI_ADJOINT_CONFIG", str(tmp_path / "config"))
    go_read, go_write = os.pipe()
    children = []
    for _ in range(6):
        result_read, result_write = os.pipe()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (Python 3.12)
            pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(go_write)
                os.read(go_read, 1)  # EOF when the parent closes its end
                os.write(result_write, CheckpointKey.load().key_id.hex().encode())
                code = 0
            finally:
                os._exit(code)
        os.close(result_write)
        children.append((pid, result_read))
    os.close(go_read)
    os.close(go_write)  # release them together
    ids = set()
    for pid, result_read in children:
        with os.fdopen(result_read, "rb") as pipe:
            ids.add(pipe.read())
        assert os.waitpid(pid, 0)[1] == 0
    assert len(ids) == 1 and len(ids.pop()) == 16
    assert sorted(p.name for p in (tmp_path / "config").iterdir()) == ["checkpoint.key"]


# -- size and memory -----------------------------------------------------------------------


def test_a_checkpoint_over_the_size_limit_is_refused_before_reading(genuine, tmp_path, monkeypatch):
    path = tmp_path / "big.ckpt"
    records = genuine["records"]
    padding = ("evaluation", {"start": 0, "sequence": 1, "kind": "residuals:False", "simulations": 0},
               {"x": np.ones(2), "r": np.zeros(2**17)})
    write_v2(path, genuine["header"], [*records, padding], user_secret())
    assert path.stat().st_size > 2**20
    monkeypatch.setenv("FMI_ADJOINT_CHECKPOINT_MAX_MIB", "1")
    err = refused(*identify(genuine, "--resume", path)[::2], path)
    assert "more than the limit of 1 MiB" in err and "FMI_ADJOINT_CHECKPOINT_MAX_MIB=" in err
    monkeypatch.setenv("FMI_ADJOINT_CHECKPOINT_MAX_MIB", "lots")
    code, _, err = identify(genuine, "--resume", path)
    assert code == 2 and "FMI_ADJOINT_CHECKPOINT_MAX_MIB='lots'" in err


MEMORY_SCRIPT = """
import resource, sys, numpy as np
from fmi_adjoint.identify.checkpoint import CheckpointLog
from fmi_adjoint.identify.multistart import check_replay, run_starts

class Problem:
    names, lower, upper = ("c", "d"), np.array([0.5, 0.1]), np.array([3.0, 2.0])

base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
log, header, records = CheckpointLog.open(sys.argv[1])
checked = check_replay(records, Problem, 1)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(len(checked), base * 1024, peak * 1024)
"""


def many_records(path, count) -> None:
    rows = [("evaluation", {"start": 0, "sequence": i + 1, "kind": "evaluate:adjoint:None", "simulations": 1},
             {"x": np.array([1.0, 0.5]), "J": np.array([0.25]), "g": np.array([0.1, -0.2])}) for i in range(count)]
    write_v2(path, {"p": 1}, rows, user_secret())


@pytest.mark.slow  # a subprocess for its own peak memory: ~5 s, more on a loaded machine
def test_resuming_a_checkpoint_of_many_small_records_stays_near_the_file_size(tmp_path):
    # The campaign: 274 MB of 1 M small records took 3.0 GB (11 times the file).  Here 10 k.
    path = tmp_path / "many.ckpt"
    many_records(path, 10_000)
    out = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, path], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    count, base, peak = map(int, out.split())
    assert count == 10_000
    assert peak - base < 10 * path.stat().st_size, (peak - base, path.stat().st_size)


# -- messages (issue 31, second review: findings 3, 5, 6, 7, 10, 11) --------------------------


@pytest.mark.parametrize("where", ["arrays", "meta"])
def test_a_record_of_thousands_of_names_gets_a_short_error(genuine, tmp_path, where):
    # The campaign: 200 000 array names signed with the user's key made a 2 MB error line.
    records = [(k, dict(m), dict(a)) for k, m, a in genuine["records"]]
    k = first(records, "evaluation")
    extra = {f"a{i:05d}": (np.zeros(0) if where == "arrays" else 0) for i in range(3000)}
    records[k][2 if where == "arrays" else 1].update(extra)
    path = tmp_path / "many.ckpt"
    write_v2(path, genuine["header"], records, user_secret())
    err = refused(*identify(genuine, "--resume", path)[::2], path, number=k + 2)
    assert len(err) < 1000, len(err)
    assert "in all)" in err and "'a00000'" in err and "'a02999'" not in err


def test_a_checkpoint_of_another_fmi_adjoint_version_advises_resume_reevaluate(genuine, tmp_path):
    header = json.loads(json.dumps(genuine["header"]))
    header["versions"]["numpy"] = "0.0.1"
    path = tmp_path / "old.ckpt"
    write_v2(path, header, genuine["records"], user_secret())
    err = refused(*identify(genuine, "--resume", path)[::2], path)
    assert "another version of numpy" in err and f"--resume-reevaluate {path}" in err
    assert "command line that wrote it" not in err
    code, out, err = identify(genuine, "--resume-reevaluate", path, "--json")  # the advice works
    assert code in (0, 1), err
    assert numbers(json.loads(out)) == numbers(genuine["result"])


def test_reading_a_large_checkpoint_notes_its_progress(genuine, tmp_path, monkeypatch):
    path = tmp_path / "run.ckpt"
    write_v2(path, genuine["header"], genuine["records"], user_secret())
    monkeypatch.setattr(checkpoint, "NOTE_EVERY", 4)  # 100 000 in use
    notes: list[str] = []
    CheckpointLog.open(path, note=notes.append)[0].close()
    count = len(genuine["records"]) + 1
    assert len(notes) == count // 4 and notes[0].startswith(f"reading {path}: 4 records (")
    assert checkpoint.read_untrusted(path, note=notes.append) and len(notes) == 2 * (count // 4)
    code, _, err = identify(genuine, "--resume", path, "--json")
    assert code in (0, 1), err
    assert f"fmi-adjoint: note: reading {path}: 8 records (" in err


def test_messages_show_numbers_as_python_prints_them(genuine, tmp_path):
    records = [(k, dict(m), dict(a)) for k, m, a in genuine["records"]]
    k = first(records, "evaluation")
    records[k][2]["x"] = np.array([9.5, 0.4])
    path = tmp_path / "run.ckpt"
    write_v2(path, genuine["header"], records, user_secret())
    err = refused(*identify(genuine, "--resume", path)[::2], path, number=k + 2)
    assert "c = 9.5 outside its bounds [0.5, 3.0]" in err and "np." not in err


def test_an_existing_key_in_a_folder_others_may_write_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "config"
    monkeypatch.setenv("FMI_ADJOINT_CONFIG", str(folder))
    CheckpointKey.load()
    folder.chmod(0o777)  # whoever may write there may swap the key (ssh refuses it too)
    with pytest.raises(CheckpointError, match=r"mode 0777.*chmod 700") as info:
        CheckpointKey.load()
    assert str(folder) in str(info.value)
    folder.chmod(0o700)
    CheckpointKey.load()


def test_a_size_limit_out_of_range_names_the_range(monkeypatch):
    for text in ("99999999999999999999", "0"):
        monkeypatch.setenv("FMI_ADJOINT_CHECKPOINT_MAX_MIB", text)
        with pytest.raises(CheckpointError, match=r"whole number from 1 to 1099511627776 \(2\*\*40"):
            checkpoint.size_limit()
    monkeypatch.setenv("FMI_ADJOINT_CHECKPOINT_MAX_MIB", str(2**40))
    assert checkpoint.size_limit() == 2**60


@pytest.mark.parametrize("spec", [{"name": "n" * 100_000, "shape": [-1]}, {"name": ["n"] * 100_000, "shape": [1]},
                                  {"name": "n" * 100_000, "shape": [2**40, 2**40]}])
def test_a_long_array_name_read_from_a_file_is_cut_short_in_the_message(spec):
    # An array name is text of the file (up to MAX_META_BYTES): the message shows its start only.
    text = json.dumps({"kind": "evaluation", "meta": {}, "arrays": [spec]}).encode()
    with pytest.raises(checkpoint._Malformed) as caught:
        checkpoint._parse(text, 8)
    assert len(caught.value.args[0]) < 300, len(caught.value.args[0])
