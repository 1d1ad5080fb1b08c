"""Dask addresses (issue 31, finding 5): ``--dask`` refuses what is not a Dask scheduler in one
line, within the connection timeout, without a traceback at interpreter exit.

Before: a listener that accepts and never speaks hung ``--dask`` past 150 s; a garbage
address, ``inproc://``, or a listener sending garbage, HTTP or a huge frame length printed
the error followed by a ``Client.__del__`` TimeoutError traceback after ~22 s; ``ucx://``
gave "internal error".  The commands run in a subprocess (the traceback came at interpreter
exit); the listeners are threads of this test on 127.0.0.1, port 0.  No test measures time:
the subprocess timeout only stops a hanging command.
"""

from __future__ import annotations

import gc
import os
import socket
import ssl
import struct
import subprocess
import sys
import threading

import pytest

from fmi_adjoint.cli.main import main


GUARD = 60.0  # [s] longest wait for a command or a thread: only stops a hanging test, never asserted
#: [s] FMI_ADJOINT_DASK_TIMEOUT of the commands: short, so that the silent listeners are quick.
TIMEOUT = "2"

HTTP = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 2\r\n\r\nok"
GARBAGE = b"\x00garbage garbage garbage\r\n" * 8
#: Dask's framing (a message length, a frame count, frame lengths) around bytes that are no msgpack.
GARBAGE_FRAME = struct.pack("QQQ", 16 + 64, 1, 64) + b"\xc1" * 64
HUGE_FRAME = struct.pack("Q", 2**62) + b"\x00" * 64


def _dask_handshake() -> bytes:
    """The first message of a Dask scheduler, framed as distributed frames it (comm/tcp.py)."""
    protocol = pytest.importorskip("distributed.protocol")
    from distributed.protocol.utils import pack_frames

    payload = pack_frames(protocol.dumps({"compression": None, "python": tuple(sys.version_info[:3]),
                                          "pickle-protocol": 5}))
    return struct.pack("Q", len(payload)) + payload


class Listener:
    """A TCP listener on 127.0.0.1 that sends ``reply`` (None: nothing) on every connection
    it accepts and keeps the connection open until :meth:`close`."""

    def __init__(self, reply: bytes | None):
        self.reply = reply
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.connections: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="hostile-listener", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while True:
            connection, _ = self.server.accept()
            if self._stop.is_set():
                connection.close()
                return
            self.connections.append(connection)
            if self.reply is not None:
                try:
                    connection.sendall(self.reply)
                except OSError:  # the client gave up first
                    pass

    def close(self) -> None:
        self._stop.set()
        socket.create_connection(("127.0.0.1", self.port), timeout=GUARD).close()  # wakes accept()
        self._thread.join(GUARD)
        for connection in self.connections:
            connection.close()
        self.server.close()


@pytest.fixture
def listen():
    """``listen(reply)``: a started :class:`Listener`, closed with the test."""
    listeners: list[Listener] = []

    def start(reply: bytes | None) -> Listener:
        listeners.append(Listener(reply))
        return listeners[-1]

    yield start
    for listener in listeners:
        listener.close()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A measured output of sdof on [0, 1] (the values do not matter: the command ends before)."""
    path = tmp_path_factory.mktemp("dask-addresses") / "data.csv"
    path.write_text("time,x\n" + "".join(f"{k / 10:g},0\n" for k in range(11)))
    return path


def _gradient(data, address: str, timeout: str | None = TIMEOUT, **env: str) -> subprocess.CompletedProcess:
    """``fmi-adjoint gradient sdof ... --dask ADDRESS`` in a new interpreter."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("FMI_ADJOINT_DASK", "DASK_"))}
    if timeout is not None:
        environ["FMI_ADJOINT_DASK_TIMEOUT"] = timeout
    environ.update(env)
    return subprocess.run([sys.executable, "-m", "fmi_adjoint", "gradient", "sdof", "--data", str(data), "--params",
                           "c", "--t-end", "1", "--step", "1e-2", "--engine", "python", "--dask", address],
                          capture_output=True, text=True, timeout=GUARD, env=environ)


def _assert_refused(process: subprocess.CompletedProcess, *phrases: str) -> str:
    """Exit 2, nothing on stdout, one error line on stderr containing every phrase."""
    assert "Traceback" not in process.stderr, process.stderr
    lines = process.stderr.splitlines()
    assert len(lines) == 1, process.stderr
    assert lines[0].startswith("fmi-adjoint: error: "), process.stderr
    for phrase in phrases:
        assert phrase in lines[0], process.stderr
    assert process.returncode == 2, process.stderr
    assert process.stdout == ""
    return lines[0]


# -- listeners that are not a Dask scheduler ----------------------------------------------------
@pytest.mark.parametrize("reply, phrases", [
    (None, ("accepted the connection but sent no Dask handshake within 2 s", "FMI_ADJOINT_DASK_TIMEOUT")),
    (GARBAGE, ("announced a first message of", "so it is not a Dask scheduler")),
    (GARBAGE_FRAME, ("sent 88 bytes", "which is not a Dask scheduler's handshake")),
    (HTTP, ("answered in HTTP", "8786")),
    (HUGE_FRAME, (f"announced a first message of {2**62} bytes",)),
], ids=["silent", "garbage", "garbage-frame", "http", "huge-frame"])
def test_a_listener_that_is_no_dask_scheduler_is_refused_in_one_line(listen, data, reply, phrases):
    pytest.importorskip("distributed")
    listener = listen(reply)
    # Only the silent listener needs the short timeout; one that replies gets a long one, so that a
    # loaded machine's slow reply (the listener is a thread of this process) is not taken for silence.
    process = _gradient(data, listener.address, timeout=TIMEOUT if reply is None else "30")
    line = _assert_refused(process, listener.address, *phrases)
    assert "drop --dask" in line


@pytest.mark.parametrize("after", [None, HUGE_FRAME], ids=["then-silent", "then-huge-frame"])
def test_a_listener_that_answers_the_handshake_and_then_misbehaves_is_refused_in_one_line(listen, data, after):
    """Past the probe: the distributed Client's own start is bounded (its handshake read has no
    timeout of its own) and its failed half is closed before the interpreter exits."""
    listener = listen(_dask_handshake() + (after or b""))
    _assert_refused(_gradient(data, listener.address), f"cannot connect to the Dask scheduler at {listener.address}")


@pytest.mark.slow
def test_a_silent_listener_is_refused_within_the_default_timeout(listen, data):
    pytest.importorskip("distributed")
    listener = listen(None)
    _assert_refused(_gradient(data, listener.address, timeout=None), "sent no Dask handshake within 10 s")


# -- addresses refused before connecting ---------------------------------------------------------
@pytest.mark.parametrize("address, phrase", [
    ("garbage", "the port is missing"),
    ("inproc://127.0.0.1/1/1", "inproc:// reaches a scheduler inside this very process"),
    ("ucx://127.0.0.1:1", "ucx:// needs UCX"),
])
def test_a_malformed_address_is_refused_in_one_line(data, address, phrase):
    line = _assert_refused(_gradient(data, address), f"--dask {address!r}", phrase,
                           "tcp://HOST:PORT, tls://HOST:PORT or HOST:PORT")
    assert "drop --dask" in line


def _main(argv, capsys) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert captured.out == ""
    return code, captured.err


@pytest.mark.parametrize("address, phrase", [
    ("ws://127.0.0.1:1", "ws:// is not supported"),
    ("tcp://:8786", "the host is missing"),
    ("tcp://127.0.0.1:0", "the port '0' is not a number in 1..65535"),
    ("tcp://127.0.0.1:1 ", "whitespace"),
    ("", "the address is empty"),
    ("scheduler.json", "for a scheduler file, give the 'address' it holds"),
])
def test_more_malformed_addresses_are_refused_before_loading_anything(data, capsys, monkeypatch, address, phrase):
    monkeypatch.delenv("FMI_ADJOINT_DASK", raising=False)
    code, err = _main(["gradient", "sdof", "--data", data, "--params", "c", "--dask", address], capsys)
    assert code == 2 and err.count("\n") == 1 and f"--dask {address!r}: " in err and phrase in err, err


def test_the_address_of_the_environment_is_named_when_malformed(data, capsys, monkeypatch):
    monkeypatch.setenv("FMI_ADJOINT_DASK", "inproc://x")
    code, err = _main(["gradient", "sdof", "--data", data, "--params", "c"], capsys)
    assert code == 2 and "FMI_ADJOINT_DASK 'inproc://x': inproc://" in err, err
    code, err = _main(["gradient", "sdof", "--data", data, "--params", "c", "--dask", "ucx://h:1"], capsys)
    assert code == 2 and "--dask 'ucx://h:1'" in err, err  # --dask wins over the variable


@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "inf", "1e9", "soon"])
def test_a_bad_connection_timeout_is_refused_in_one_line(data, capsys, monkeypatch, timeout):
    monkeypatch.setenv("FMI_ADJOINT_DASK_TIMEOUT", timeout)
    code, err = _main(["gradient", "sdof", "--data", data, "--params", "c", "--dask", "tcp://127.0.0.1:1"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert f"FMI_ADJOINT_DASK_TIMEOUT {timeout!r}: " in err and "at most 600" in err, err


def test_tls_without_certificates_is_refused_naming_the_settings(data, capsys, monkeypatch):
    pytest.importorskip("distributed")
    import dask

    for name in [n for n in os.environ if n.startswith("DASK_")]:
        monkeypatch.delenv(name)
    with dask.config.set({"distributed.comm.tls.ca-file": None, "distributed.comm.tls.client.cert": None}):
        code, err = _main(["gradient", "sdof", "--data", data, "--params", "c", "--t-end", "1", "--step", "1e-2",
                           "--engine", "python", "--dask", "tls://127.0.0.1:1"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "tls://127.0.0.1:1: tls:// needs client certificates" in err and "TLS__CA_FILE" in err, err


# -- the library -----------------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("tcp://127.0.0.1:8786", "tcp://127.0.0.1:8786"),
    ("127.0.0.1:8786", "tcp://127.0.0.1:8786"),
    ("scheduler:8786", "tcp://scheduler:8786"),
    ("TCP://Scheduler.example.org.:1", "tcp://Scheduler.example.org.:1"),
    ("tls://dask_scheduler-1:65535", "tls://dask_scheduler-1:65535"),
    ("[::1]:8786", "tcp://[::1]:8786"),
    ("tls://[2001:db8::1]:8786", "tls://[2001:db8::1]:8786"),
])
def test_the_accepted_address_forms(text, expected):
    from fmi_adjoint.scale.dask import parse_address

    assert str(parse_address(text)) == expected


@pytest.mark.parametrize("text", [
    "tcp://127.0.0.1", "tcp://127.0.0.1:", "tcp://127.0.0.1:65536", "tcp://127.0.0.1:\u0661", "tcp://127.0.0.1:+1",
    "tcp://127.0.0.1:1/x", "tcp://u@127.0.0.1:1", "tcp://::1:1", "tcp://[::1]", "tcp://[zz]:1", "tcp://1.2.3:1",
    "tcp://0x7f.1:1", "tcp://127.0.0.256:1", "tcp://h\u00e9:1", "tcp://-h:1", "udp://127.0.0.1:1", "wss://h:1",
    "tcp://127.0.0.1:1\x00", "\ufefftcp://127.0.0.1:1", "scheduler.json", "x" * 10_000,
])
def test_malformed_addresses_are_refused_before_connecting(text):
    from fmi_adjoint.scale.dask import DaskSettingError, parse_address

    with pytest.raises(DaskSettingError, match="give the scheduler's address as tcp://HOST:PORT") as info:
        parse_address(text, "--dask")
    assert isinstance(info.value, ValueError)
    assert "\n" not in str(info.value) and len(str(info.value)) < 400


def test_a_failed_connection_leaves_no_thread_and_nothing_for_the_collector(listen):
    """In process: the half-made client is closed, its loop thread ended, and nothing raises
    at garbage collection (pytest turns an unraisable exception into a failure)."""
    pytest.importorskip("distributed")
    from fmi_adjoint.errors import ExecutorError
    from fmi_adjoint.scale.dask import DaskExecutor

    def connect(address: str, errors: list) -> None:
        try:
            DaskExecutor(address, timeout=1.0)
        except BaseException as exc:  # noqa: BLE001 -- checked by the test
            errors.append(exc)

    before = set(threading.enumerate())
    for reply in (None, _dask_handshake()):
        listener = listen(reply)
        errors: list[BaseException] = []
        # In a thread only so that a connection that hangs fails the test instead of hanging it.
        attempt = threading.Thread(target=connect, args=(listener.address, errors), daemon=True)
        attempt.start()
        attempt.join(GUARD)
        assert not attempt.is_alive(), f"DaskExecutor({listener.address!r}) still connecting after {GUARD} s"
        assert len(errors) == 1 and isinstance(errors[0], ExecutorError), errors
        assert listener.address in str(errors[0])
        del errors
    gc.collect()
    left = [t for t in threading.enumerate() if t not in before and t.name != "hostile-listener" and t.is_alive()]
    assert not [t for t in left if not t.daemon or "loop" in t.name.lower()], left


def test_the_tls_probe_refuses_a_plain_listener(listen):
    """``tls://`` to a listener that talks plain bytes: the TLS handshake fails, in one error."""
    from fmi_adjoint.errors import ExecutorError
    from fmi_adjoint.scale.dask import parse_address, probe_scheduler

    listener = listen(GARBAGE)
    address = parse_address(f"tls://127.0.0.1:{listener.port}")
    with pytest.raises(ExecutorError, match=r"failed the TLS handshake"):
        probe_scheduler(address, 5.0, ssl.create_default_context())
