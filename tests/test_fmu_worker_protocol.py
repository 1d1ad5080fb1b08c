"""The FMU worker protocol and the counts of an FMU's XML (issue 31, parts of findings 4, 6 and 7).

* counts read from ``modelDescription.xml`` (event indicators, states, array sizes) are
  bounded when the FMU is opened, before the worker or fmpy allocates from them, and the
  state derivatives of ``ModelStructure`` must be derivatives (finding 4);
* ``validate`` of a Model Exchange FMU whose next time event lies in the past ends with one
  error line instead of looping in fmpy's Python loop (finding 4);
* every reply of the worker is checked against the request (types, shapes, finite values
  where the protocol needs them): forged replies are one error naming the FMU and the call,
  and the worker is ended (finding 6).  The replies travel on a pipe of their own: what the
  binary prints goes to the log file (tests/test_fmu_isolation.py, the "print" FMU);
* a binary that forks leaves no process behind when its session ends normally, is killed,
  or times out: the worker's whole process group is killed (finding 7).

Hand-made FMUs are variants of ``fmus/`` built into the test's folder (tests/handwritten_fmus.py).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import pickle
import shutil
import signal
import struct
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import fmi_adjoint.fmu.session as session_module
import handwritten_fmus
from fmi_adjoint.cli.main import main
from fmi_adjoint.fmu.archive import MAX_ARRAY_ELEMENTS, MAX_EVENT_INDICATORS, FmuError, open_fmu
from fmi_adjoint.fmu.session import FmuSession
from fmi_adjoint.fmu.worker import pack
from fmi_adjoint.toolchain import c_compiler
from handwritten_fmus import build_fmu

if c_compiler() is None:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: the FMUs cannot be built", allow_module_level=True)

CLI = Path(sys.executable).with_name("fmi-adjoint")
GUARD = 120  # [s] subprocess timeout: only stops a hanging test, never asserted


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fmu_worker_protocol")


def _variant(work: Path, base: str, name: str, edit: Callable[[str], str] = lambda text: text,
             extra: dict[str, str] | None = None, defines: tuple[str, ...] = ()) -> Path:
    """``fmus/<base>`` with its C file edited by ``edit`` and ``extra`` C files added, built as ``name``."""
    folder = work / "fmus" / name
    folder.mkdir(parents=True)
    for path in (handwritten_fmus.FMUS_DIR / base).iterdir():
        text = path.read_text(encoding="utf-8")
        (folder / path.name).write_text(edit(text) if path.suffix == ".c" else text, encoding="utf-8")
    for file, text in (extra or {}).items():
        (folder / file).write_text(text, encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(handwritten_fmus, "FMUS_DIR", work / "fmus")
        return build_fmu(name, work, defines)


def _with_xml(fmu: Path, out: Path, edit: Callable[[str], str]) -> Path:
    """A copy of ``fmu`` whose modelDescription.xml is ``edit``-ed."""
    with zipfile.ZipFile(fmu) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "modelDescription.xml":
                data = edit(data.decode("utf-8")).encode("utf-8")
            target.writestr(info, data)
    return out


def _replace(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def _one_error_line(code: int, err: str, *words: str) -> str:
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("fmi-adjoint: error: "), (code, err)
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def _cli(argv) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, err.getvalue()


@pytest.fixture(scope="module")
def decay_data(work) -> Path:
    """x(t) = exp(-t) on [0, 1] s: faulty_decay_cs at its start values."""
    path = work / "decay.csv"
    lines = ["time,x"] + [f"{t!r},{math.exp(-t)!r}" for t in (k / 20 for k in range(21))]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ------------------------------------------------------------ 1. counts in the XML (finding 4) --


def _fmi2_event_indicators(text: str) -> str:
    return _replace(text, 'numberOfEventIndicators="1"', 'numberOfEventIndicators="1000000000"')


def _fmi2_derivative_of_nothing(text: str) -> str:
    # Derivatives lists the state x0 (index 1) instead of der(x0) (index 2).
    return _replace(text, '<Unknown index="2" dependencies="3"', '<Unknown index="1" dependencies="3"')


def _fmi3_huge_array(text: str) -> str:
    return _replace(text, "</ModelVariables>", '<Float64 name="huge" valueReference="900" causality="local" '
                    'variability="continuous"><Dimension start="1000000000"/></Float64></ModelVariables>')


def _fmi3_array_event_indicators(text: str) -> str:
    text = _replace(text, "</ModelVariables>", '<Float64 name="z" valueReference="900" causality="local" '
                    'variability="continuous"><Dimension start="200000"/></Float64></ModelVariables>')
    return _replace(text, "</ModelStructure>", '<EventIndicator valueReference="900"/></ModelStructure>')


COUNT_CASES = {
    "fmi2_event_indicators": ("bouncing_ball", _fmi2_event_indicators,
                              ("numberOfEventIndicators = 1000000000", f"limit of {MAX_EVENT_INDICATORS}")),
    "fmi2_derivative_of_nothing": ("van_der_pol_me", _fmi2_derivative_of_nothing,
                                   ("ModelStructure/Derivatives", "'x0'", "no state derivative")),
    "fmi3_huge_array": ("state_space3", _fmi3_huge_array,
                        ("dimension 1 of the array variable 'huge' = 1000000000", f"limit of {MAX_ARRAY_ELEMENTS}")),
    "fmi3_array_event_indicators": ("state_space3", _fmi3_array_event_indicators,
                                    ("event indicators (ModelStructure/EventIndicator", "= 200000",
                                     f"limit of {MAX_EVENT_INDICATORS}")),
}


@pytest.mark.parametrize("case", sorted(COUNT_CASES))
def test_counts_of_the_xml_are_bounded_when_the_fmu_is_opened(case, work):
    """1e9 event indicators made the worker allocate 6 GB before anything checked them."""
    base, edit, words = COUNT_CASES[case]
    fmu = _with_xml(build_fmu(base, work), work / f"{case}.fmu", edit)
    with pytest.raises(FmuError) as caught:
        open_fmu(fmu).close()
    message = str(caught.value)
    assert message.startswith(f"{case}.fmu: ") and "the FMU is refused" in message
    for word in words:
        assert word in message, (word, message)


def test_a_billion_event_indicators_is_one_line_from_the_command(work, decay_data):
    fmu = _with_xml(build_fmu("bouncing_ball", work), work / "indicators.fmu", _fmi2_event_indicators)
    data = work / "ball.csv"
    data.write_text("time,h\n0,1\n0.1,0.95\n", encoding="utf-8")
    run = subprocess.run([str(CLI), "validate", fmu, "--data", data, "-o", work / "report_indicators"],
                         capture_output=True, text=True, timeout=GUARD)
    _one_error_line(run.returncode, run.stderr, "indicators.fmu", "numberOfEventIndicators = 1000000000")


# ------------------------------------------------- 2. validate: a time event in the past (4) --


@pytest.fixture(scope="module")
def past_event(work) -> Path:
    """stair (FMI 2 ME) announcing its next time event 1 ms before the current time."""
    return _variant(work, "stair", "stair_past", lambda text: _replace(
        text, "eventInfo->nextEventTime = nextEventTime(d);", "eventInfo->nextEventTime = d->time - 1e-3;"))


def test_validate_of_a_time_event_in_the_past_ends_with_one_line(past_event, work):
    """It looped in fmpy's simulation loop (every step announced itself, so --fmu-timeout never
    fired) until killed."""
    data = work / "stair.csv"
    data.write_text("time,level\n" + "".join(f"{k / 10!r},1.0\n" for k in range(31)), encoding="utf-8")
    report = work / "report_past"
    run = subprocess.run([str(CLI), "validate", past_event, "--data", data, "--interface", "me", "-o", report],
                         capture_output=True, text=True, timeout=GUARD)
    _one_error_line(run.returncode, run.stderr, "stair_past.fmu", "fmpy.simulate_fmu went back in time",
                    "time event before the current time")
    assert run.stdout == "" and not report.exists()


def test_fmpys_loop_may_not_stall_or_crawl(monkeypatch):
    """The other two ways fmpy's Python loop never ends: a time event announced at the current
    time again and again, and events a hair apart (measured: 100 000 steps of 1e-7 s end in 10 s)."""
    from fmi_adjoint.fmu.worker import _Advance, _Failure

    guard = _Advance("x.fmu", {"start_time": 0.0, "stop_time": 1.0, "output_interval": 0.1})
    guard.check(0.5)
    with pytest.raises(_Failure, match=r"x.fmu: fmpy.simulate_fmu stayed at t = 0.5 s for 101 steps in a row"):
        for _ in range(_Advance.STALLED + 1):
            guard.check(0.5)
    monkeypatch.setattr(_Advance, "EVENTS", 10)
    guard = _Advance("x.fmu", {"start_time": 0.0, "stop_time": 1.0, "output_interval": 0.1})
    with pytest.raises(_Failure, match=r"took 31 steps and reached only t = 3.1e-06 s of 1 s"):
        for k in range(1, 100):
            guard.check(k * 1e-7)


# ----------------------------------------------------------- 3. forged replies (finding 6) --

FAKE_WORKER = r'''
"""Stands in for worker.py: answers 'instantiate', then sends the forged reply to everything
(FA_FORGED_REPLY in hex, or the file FA_FORGED_PATH); with FA_RAW=1 the forged bytes are the
whole frame, header included, written as they are, after which the worker stalls."""
import os, pickle, signal, sys
from multiprocessing.connection import Connection

requests = Connection(int(sys.argv[1]), writable=False)
replies = Connection(int(sys.argv[2]), readable=False)
if "FA_FORGED_REPLY" in os.environ:
    forged = bytes.fromhex(os.environ["FA_FORGED_REPLY"])
else:
    with open(os.environ["FA_FORGED_PATH"], "rb") as file:
        forged = file.read()
while True:
    try:
        op, args = pickle.loads(requests.recv_bytes())
    except EOFError:
        break
    if op == "exit":
        break
    if op == "instantiate":
        replies.send_bytes(pickle.dumps(("ok", ("value", None))))
    elif os.environ.get("FA_RAW") == "1":
        os.write(int(sys.argv[2]), forged)
        signal.pause()
    else:
        replies.send_bytes(forged)
'''

GRID = np.linspace(0.0, 1.0, 11)
ME_REQUEST = {"stops": [0.5, 1.0], "outputs": [0], "sources": ["fd", "fd"]}


def _me_reply(**changes) -> dict:
    reply = {"left": pack(np.zeros((2, 1))), "right": pack(np.zeros((2, 1))), "sources": ["fd", "fd"],
             "nodes": pack(np.array([0.0, 0.5, 1.0])), "steps": 2, "rejected": 0, "events": [],
             "rhs_evaluations": 10}
    reply.update(changes)
    return reply


# case: (FMU, request made, forged reply, label of the call in the error)
FORGED = {
    "run_cs_wrong_shape": ("cs", "run_cs", ("ok", ("array", ((3,), bytes(24)))), "the Co-Simulation run"),
    "run_cs_wildcard_shape": ("cs", "run_cs", ("ok", ("array", ((-1, 1), bytes(88)))), "the Co-Simulation run"),
    "run_cs_lying_shape": ("cs", "run_cs", ("ok", ("array", ((11, 1), bytes(8)))), "the Co-Simulation run"),
    "run_cs_tuple": ("cs", "run_cs", ("ok", ("value", (1.0, 2.0))), "the Co-Simulation run"),
    "not_a_tuple": ("cs", "run_cs", [1, 2], "the Co-Simulation run"),
    "error_of_no_kind": ("cs", "run_cs", ("error", "bogus", 3), "the Co-Simulation run"),
    "start_nan_event_time": ("me", "start", ("ok", ("value", math.nan)), "the call 'start'"),
    "derivatives_of_three_states": ("me", "derivatives", ("ok", ("array", pack(np.zeros(3)))),
                                    "the call 'derivatives'"),
    "me_nan_nodes": ("me", "run_me", ("ok", ("value", _me_reply(nodes=pack(np.array([0.0, math.nan]))))),
                     "the Model Exchange run"),
    "me_missing_outputs": ("me", "run_me", ("ok", ("value", {k: v for k, v in _me_reply().items() if k != "left"})),
                           "the Model Exchange run"),
    "me_step_count_text": ("me", "run_me", ("ok", ("value", _me_reply(steps="2"))), "the Model Exchange run"),
    "me_unasked_sensitivities": ("me", "run_me", ("ok", ("value", _me_reply(dleft=pack(np.zeros((2, 1, 1))),
                                                                            dright=pack(np.zeros((2, 1, 1)))))),
                                 "the Model Exchange run"),
    "fmpy_time_backwards": ("cs", "simulate_fmu", ("ok", ("value", {"time": pack(np.array([0.0, 1.0, 0.5])),
                                                                    "x": pack(np.zeros(3))})),
                            "fmpy.simulate_fmu"),
}


@pytest.fixture
def forge(work, monkeypatch) -> Callable[[object], None]:
    """Sessions started after ``forge(reply)`` talk to a fake worker sending ``reply``."""
    script = work / "fake_worker.py"
    script.write_text(FAKE_WORKER, encoding="utf-8")
    monkeypatch.setattr(session_module, "_WORKER_SCRIPT", str(script))
    return lambda reply: monkeypatch.setenv("FA_FORGED_REPLY", pickle.dumps(reply).hex())


@pytest.fixture
def forge_bytes(forge, tmp_path, monkeypatch) -> Callable[..., None]:
    """``forge_bytes(data, raw=False)``: the fake worker sends ``data`` as the reply's body
    (or, raw, as the whole frame, then stalls); for replies ``pickle.dumps`` cannot make or
    that are too long for an environment variable."""

    def apply(data: bytes, raw: bool = False) -> None:
        path = tmp_path / "forged.bin"
        path.write_bytes(data)
        monkeypatch.delenv("FA_FORGED_REPLY", raising=False)
        monkeypatch.setenv("FA_FORGED_PATH", str(path))
        monkeypatch.setenv("FA_RAW", "1" if raw else "0")

    return apply


@contextlib.contextmanager
def _guard(seconds: float = GUARD):
    """TimeoutError if the block runs longer than ``seconds``: only stops a test that would
    hang (the code before the fix waited forever), never asserted as a measurement."""

    def expire(signum, frame):
        raise TimeoutError(f"still waiting after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def archives(work):
    with open_fmu(build_fmu("faulty_decay_cs", work)) as cs, open_fmu(build_fmu("van_der_pol_me", work)) as me:
        yield {"cs": cs, "me": me}


def _request(session: FmuSession, request: str):
    if request == "run_cs":
        return session.run_cs({}, GRID, ["x"])
    if request == "start":
        return session.start({}, {}, 0.0, 1.0)
    if request == "derivatives":
        return session.derivatives()
    if request == "run_me":
        return session.run(("run_me_adaptive", (ME_REQUEST,)))
    return session.simulate_fmu(start_time=0.0, stop_time=1.0, output=["x"])


@pytest.mark.parametrize("case", sorted(FORGED))
def test_a_forged_reply_is_one_error_naming_the_fmu_and_the_call(case, forge, archives):
    """The restricted unpickler held, but a reply's structure was used unchecked: a wrong
    shape, a -1 extent, a tuple or NaN went on into the identification."""
    which, request, reply, call = FORGED[case]
    forge(reply)
    archive = archives[which]
    session = FmuSession(archive, None if request == "simulate_fmu" else
                         ("CoSimulation" if which == "cs" else "ModelExchange"))
    try:
        with pytest.raises(FmuError) as caught:
            _request(session, request)
        message = str(caught.value)
        assert message.startswith(f"{archive.path.name}: the FMU's process answered {call} with a malformed reply")
        assert "Have the FMU fixed" in message
        assert not session.alive  # the worker is not trusted with another request
    finally:
        session.kill()


def test_nan_where_it_is_the_fmus_value_passes(forge, archives):
    """Values read from the FMU may be NaN (judged downstream): only their shape is checked."""
    forge(("ok", ("array", pack(np.array([math.nan])))))
    session = FmuSession(archives["cs"], "CoSimulation")
    try:
        values = session.get_real([0])
        assert values.shape == (1,) and math.isnan(values[0]) and session.alive
    finally:
        session.kill()


# ---------------------------------------------------------- 4. a forking binary (finding 7) --

FORK_C = r"""
#define _POSIX_C_SOURCE 200809L
#include <unistd.h>

/* Forks when the binary is loaded: the child waits forever, outside the worker's control. */
__attribute__((constructor)) static void fork_a_child(void) {
    if (fork() == 0) {
        for (;;) {
            pause();
        }
    }
}
"""


@pytest.fixture(scope="module")
def forking(work) -> dict[str, Path]:
    """faulty_decay_cs that forks when loaded: well-behaved, and hanging in fmi2DoStep at t = 0.5."""
    return {hang: _variant(work, "faulty_decay_cs", f"forking_{hang}", extra={"fork.c": FORK_C},
                           defines=("FA_HANG_AT=0.5",) if hang == "hang" else ())
            for hang in ("good", "hang")}


def _processes_naming(folder: Path) -> list[int]:
    """Live processes whose command line names ``folder`` (a worker and its forks name their
    call buffer there; a killed, unreaped process has an empty command line)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if str(folder).encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found


def _poll(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Whether ``condition`` holds within ``timeout`` seconds (polled; a killed process
    disappears from /proc when it is reaped, which the kernel does asynchronously)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("end", ["close", "kill", "timeout"])
def test_a_forking_binary_leaves_no_process_behind(end, forking):
    """The worker was killed alone, so the child the binary forked survived every session."""
    with open_fmu(forking["hang" if end == "timeout" else "good"]) as archive:
        # a short per-call timeout only where the test waits for it: the start's calls (reading the
        # model description, loading the binary) must not meet it on a loaded machine
        session = FmuSession(archive, "CoSimulation", timeout=1.0 if end == "timeout" else 30.0)
        try:
            assert len(_processes_naming(archive.directory)) == 2  # the worker and the child it forked
            if end == "close":
                session.close()
            elif end == "kill":
                session.kill()
            else:
                with pytest.raises(FmuError, match="did not return within 1 s"):
                    session.run_cs({}, GRID, ["x"])
            gone = _poll(lambda: not _processes_naming(archive.directory))
        finally:
            session.kill()
            for pid in _processes_naming(archive.directory):  # a failed test cleans up after itself
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        assert gone, "a process forked by the FMU binary outlived its session"


# --------------------------------------------------- 5. validate --result (finding 7) --


@pytest.mark.parametrize("case", ["another_fmu", "bad_interface", "bad_interface_apply"])
def test_validate_refuses_a_result_of_another_fmu_or_interface(case, work, decay_data, tmp_path):
    """validate ran a RESULT.json of another FMU (apply refused it), and an invalid interface
    was ignored by both (the SSP got implementation "any")."""
    fmu = build_fmu("faulty_decay_cs", work)
    result = {"parameters": {"k": 1.0}, "fmu": str(fmu)}
    if case == "another_fmu":
        result.update(fmu="other.fmu", fmu_token="{00000000-0000-0000-0000-000000000000}")
        words: tuple[str, ...] = ("other.fmu", "guid", "give --fmu the FMU the identification ran on")
    else:
        result["interface"] = "Bogus"
        words = ("'interface' is 'Bogus'", "ModelExchange")
    path = tmp_path / "result.json"
    path.write_text(json.dumps(result), encoding="utf-8")
    if case == "bad_interface_apply":
        argv = ["apply", path, "--fmu", fmu, "--ssp", tmp_path / "out.ssp"]
    else:
        argv = ["validate", fmu, "--data", decay_data, "--result", path, "-o", tmp_path / "report"]
    code, err = _cli(argv)
    _one_error_line(code, err, *words)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]


def test_validate_still_accepts_its_own_result(work, decay_data, tmp_path):
    fmu = build_fmu("faulty_decay_cs", work)
    with open_fmu(fmu) as archive:
        token = archive.description.guid
    path = tmp_path / "result.json"
    path.write_text(json.dumps({"parameters": {"k": 1.0}, "fmu": str(fmu), "fmu_token": token,
                                "interface": "CoSimulation"}), encoding="utf-8")
    code, err = _cli(["validate", fmu, "--data", decay_data, "--result", path, "-o", tmp_path / "report"])
    assert code == 0, err
    assert json.loads((tmp_path / "report" / "report.json").read_text())["interface"] == "CoSimulation"
    shutil.rmtree(tmp_path / "report")


# ------------------------------------------- 6. the reply frame itself (issue 31, red team) --

_FRAME_CASES = {
    # a header claiming ~2 GB, one byte, then nothing: recv_bytes waited forever
    "huge_header": (struct.pack("!i", 2**31 - 1) + b"x", "announced as 2147483647 bytes"),
    # the 8-byte header of large messages, claiming 2**60 bytes
    "huge_long_header": (struct.pack("!i", -1) + struct.pack("!Q", 2**60) + b"x", f"announced as {2**60} bytes"),
    "negative_header": (struct.pack("!i", -7) + b"x", "announced as -7 bytes"),
}


@pytest.mark.parametrize("case", sorted(_FRAME_CASES))
def test_a_reply_announced_larger_than_its_request_allows_is_refused_from_its_header(case, forge_bytes, archives):
    """The header's size was believed: the parent waited, without deadline, for 2 GB that
    never came (the run hung, --fmu-timeout notwithstanding)."""
    frame, words = _FRAME_CASES[case]
    forge_bytes(frame, raw=True)
    session = FmuSession(archives["cs"], "CoSimulation", timeout=5.0)
    try:
        with _guard(), pytest.raises(FmuError) as caught:
            session.get_real([0])
        message = str(caught.value)
        assert message.startswith("faulty_decay_cs.fmu: the FMU's process answered the call 'get_values' with "
                                  "a malformed reply"), message
        assert words in message and "Have the FMU fixed" in message
        assert not session.alive
    finally:
        session.kill()


def test_a_reply_larger_than_its_request_allows_is_not_read(forge_bytes, archives):
    """A reply was read in full, however large (400 MB), before it was refused: now the
    header of 2 MiB for one value is enough."""
    forge_bytes(bytes(2 << 20))
    session = FmuSession(archives["cs"], "CoSimulation")
    try:
        with _guard(), pytest.raises(FmuError, match=r"a malformed reply \(a reply announced as 2097152 bytes"):
            session.get_real([0])
        assert not session.alive
    finally:
        session.kill()


def test_a_reply_that_stalls_within_its_frame_ends_after_the_timeout(forge_bytes, archives):
    """A plausible header (100 bytes), one byte, then nothing: one deadline covers the frame."""
    forge_bytes(struct.pack("!i", 100) + b"x", raw=True)
    session = FmuSession(archives["cs"], "CoSimulation", timeout=1.0)
    try:
        with _guard(), pytest.raises(FmuError) as caught:
            session.get_real([0])
        message = str(caught.value)
        assert message.startswith("faulty_decay_cs.fmu: the FMU's process began its answer to the call "
                                  "'get_values' but did not finish it within 1 s"), message
        assert "--fmu-timeout" in message and not session.alive
    finally:
        session.kill()


def test_a_stalled_frame_is_one_line_from_the_command(forge_bytes, work, decay_data):
    forge_bytes(struct.pack("!i", 2**31 - 1) + b"x", raw=True)
    fmu = build_fmu("faulty_decay_cs", work)
    with _guard():
        code, err = _cli(["gradient", "--fmu", fmu, "--data", decay_data, "--params", "k", "--fmu-timeout", "5"])
    _one_error_line(code, err, "faulty_decay_cs.fmu", "the Co-Simulation run", "announced as 2147483647 bytes")


_DEPTH = 200_000
_DEEP = {
    # [[[...]]] as the whole reply: repr in the error's description recursed
    "envelope": b"\x80\x02" + b"]" * _DEPTH + b"a" * (_DEPTH - 1) + b".",
    # ("ok", ("array", (((...),), b""))): the shape's repr in unpack recursed
    "shape": (b"\x80\x03X\x02\x00\x00\x00okX\x05\x00\x00\x00array)" + b"\x85" * _DEPTH
              + b"C\x00\x86\x86\x86."),
    # ("error", "fmu", [[[...]]])
    "error": (b"\x80\x03X\x05\x00\x00\x00errorX\x03\x00\x00\x00fmu]" + b"]" * _DEPTH + b"a" * _DEPTH
              + b"\x87."),
}


@pytest.mark.parametrize("case", sorted(_DEEP))
def test_a_deeply_nested_reply_is_a_malformed_reply(case, forge_bytes, archives):
    """A reply nested 200 000 deep raised RecursionError, which went out as a generic error,
    and the worker was left running."""
    forge_bytes(_DEEP[case])
    session = FmuSession(archives["cs"], "CoSimulation")
    try:
        with pytest.raises(FmuError) as caught:
            session.get_real([0])
        message = str(caught.value)
        assert message.startswith("faulty_decay_cs.fmu: the FMU's process answered the call 'get_values' with "
                                  "a malformed reply (a reply nested more than"), message
        assert not session.alive
    finally:
        session.kill()


def test_the_fmus_error_text_cannot_pose_as_the_tools_own_line(forge, work, decay_data):
    """The binary wrote the whole error text: without the FMU's name, and with lines of its own."""
    forge(("error", "fmu", "all is well\nfmi-adjoint: error: \x1b[2Jsomething else\r"))
    fmu = build_fmu("faulty_decay_cs", work)
    code, err = _cli(["gradient", "--fmu", fmu, "--data", decay_data, "--params", "k"])
    line = _one_error_line(code, err)
    assert line == ('fmi-adjoint: error: faulty_decay_cs.fmu: the Co-Simulation run failed; the FMU\'s process '
                    'reported: "all is well\\nfmi-adjoint: error: \\x1b[2Jsomething else\\r"'), line
