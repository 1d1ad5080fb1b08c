"""The Dask adapter: tasks run on the workers of a Dask ``distributed`` cluster (issue 14).

Design
------
* **distributed is optional** (``pip install 'fmi-adjoint[dask]'``): it is imported in the
  constructor, so importing this module costs nothing and a missing install is one
  :class:`~fmi_adjoint.errors.ExecutorError` with the command that fixes it.
* **One WorkerContext per Dask worker process** lives in a worker plugin registered under
  :data:`PLUGIN_NAME` (``distributed.WorkerPlugin``, ``Client.register_plugin``); the task
  wrapper :func:`_run` finds it through ``distributed.get_worker().plugins``.  The plugin is
  idempotent: several executors on one cluster share the contexts, a restarted worker gets a
  fresh one.  Its class derives from ``distributed.WorkerPlugin`` and so can only be defined
  once distributed is imported; :func:`_context_plugin` defines it, and its instances pickle
  as a call of that function, so a worker rebuilds one without looking the class up by name.
* **Tasks** are submitted as ``_run(task)`` with ``pure=False`` and a unique key (two equal
  tasks are two runs, never one cached result).  A :class:`concurrent.futures.Future` is
  resolved by a done callback of the Dask future (Dask calls it in its callback thread); the
  exception a task raised is re-raised by ``result()`` with its own type, as Dask rebuilds it.
* **Worker death**: the scheduler runs the task of a worker that died on another worker, up
  to ``distributed.scheduler.allowed-failures`` times (3 by default); then Dask gives up with
  ``KilledWorker``, which becomes an :class:`ExecutorError` with the fix.

Connecting (issue 31)
---------------------
What listens at the address is not trusted to be a Dask scheduler until it has said so, and
every step of the connection ends within the timeout:

1. :func:`parse_address` checks the form before anything is imported or connected: only
   ``tcp://HOST:PORT``, ``tls://HOST:PORT`` and ``HOST:PORT`` (tcp); ``inproc://`` (a
   scheduler inside this process), ``ucx://`` and ``ws(s)://`` are refused by name.
   ``tls://`` needs the client certificates in Dask's configuration, else it is refused.
2. :func:`probe_scheduler` opens a plain socket (TLS-wrapped for ``tls://``) and reads the
   handshake a Dask scheduler sends first, under one deadline whatever the peer does (the
   name lookup runs in a daemon thread that is abandoned at the deadline).  The announced
   length is checked before anything is read into memory (Dask would allocate whatever a
   peer announces), and the msgpack body is decoded without Dask's hooks, which unpickle.
   A listener that stays silent, closes, talks HTTP or sends anything else is refused with
   what it did.
3. The ``distributed.Client`` is made by :func:`_bounded_client_class`, whose start runs
   under Dask's own ``callback_timeout`` (Dask's handshake read has no timeout).  A client
   whose start failed is closed there and marked closed, so that its ``__del__`` has nothing
   left to do at interpreter exit (it would wait 2 x timeout and print a traceback), and
   distributed's loggers are muted while connecting: a failed connection is our one error.

The probe is a second connection, so a peer that answers it and stalls the real one is
still bounded by step 3.  What answers the handshake is trusted from then on: Dask's
protocol carries pickles, so a scheduler (or anything posing as one) can run code in this
process.  Connect only to a cluster you run.
"""

from __future__ import annotations

import functools
import gc
import ipaddress
import logging
import math
import re
import socket
import ssl
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..errors import ExecutorError
from ..text import excerpt
from .base import AbstractExecutor, Task, WorkerContext, settle

__all__ = ["ADDRESS_FORMS", "DEFAULT_TIMEOUT", "DaskExecutor", "DaskSettingError", "PLUGIN_NAME", "SchedulerAddress",
           "parse_address", "parse_timeout", "probe_scheduler"]

#: Name of the worker plugin that holds the WorkerContext of a Dask worker.
PLUGIN_NAME = "fmi-adjoint-worker-context"

_MISSING = "--dask needs the optional dependency Dask distributed; install it with: pip install 'fmi-adjoint[dask]'"

#: [s] Default bound of each connection step (probe, client start, waiting for a worker).
DEFAULT_TIMEOUT = 10.0
#: [s] Largest timeout accepted: longer waits are a hang by another name.
MAX_TIMEOUT = 600.0
#: The address forms accepted, for messages.
ADDRESS_FORMS = "tcp://HOST:PORT, tls://HOST:PORT or HOST:PORT (e.g. tcp://scheduler:8786)"
#: [bytes] Largest first message accepted from a scheduler: its handshake is a few hundred bytes.
HANDSHAKE_LIMIT = 64 * 1024
#: [s] How long a client whose start failed gets to close before it is abandoned.
_CLOSE_TIMEOUT = 2.0

_TLS_SETTINGS = ("give the client certificates in Dask's configuration: DASK_DISTRIBUTED__COMM__TLS__CA_FILE=ca.pem "
                 "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT=client.pem DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY="
                 "client.key (or distributed.comm.tls.* in a Dask config file)")
#: Why other schemes are refused (the scheme is Dask's; the reason is ours).
_REFUSED_SCHEMES = {
    "inproc": "reaches a scheduler inside this very process, never a cluster",
    "ucx": "needs UCX and GPUs; fmi-adjoint's tasks connect over tcp:// or tls://",
    "ws": "is not supported by fmi-adjoint; start the scheduler with --protocol tcp (or tls)",
    "wss": "is not supported by fmi-adjoint; start the scheduler with --protocol tls (or tcp)",
}
_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")


class DaskSettingError(ExecutorError, ValueError):
    """A Dask scheduler address or connection timeout that cannot be used (refused before
    connecting)."""


@dataclass(frozen=True)
class SchedulerAddress:
    """A checked scheduler address: ``scheme`` ``"tcp"`` or ``"tls"``, ``host`` (a name, an
    IPv4 or an IPv6 address without brackets) and ``port`` in 1..65535."""

    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def parse_address(text: str, what: str = "the Dask address") -> SchedulerAddress:
    """The scheduler address ``text`` checked for form (nothing is imported or connected).

    ``what`` names where the text came from in the message (``--dask``,
    ``FMI_ADJOINT_DASK``).  Accepted: ``tcp://HOST:PORT``, ``tls://HOST:PORT`` and
    ``HOST:PORT`` (tcp); HOST a name, an IPv4 address or a bracketed IPv6 address.

    Raises
    ------
    DaskSettingError
        Any other scheme (``inproc``, ``ucx``, ``ws`` by name), an empty or malformed host,
        a missing or out-of-range port, whitespace, a path, user or query part.
    """
    if not isinstance(text, str):
        raise DaskSettingError(f"{what} {text!r} is not text; give {ADDRESS_FORMS}.")

    def refuse(why: str) -> DaskSettingError:
        return DaskSettingError(f"{what} {excerpt(text, 80)}: {why}; give the scheduler's address as "
                                f"{ADDRESS_FORMS}, or drop --dask to run locally.")

    if not text:
        raise refuse("the address is empty")
    if len(text) > 300:
        raise refuse(f"{len(text)} characters is not an address")
    if any(c.isspace() or not c.isprintable() for c in text):
        raise refuse("it contains whitespace or control characters")
    scheme, sep, rest = text.partition("://")
    if not sep:
        if text.endswith(".json") or "/" in text:
            raise refuse("this looks like a file, not an address (for a scheduler file, give the 'address' it "
                         "holds)")
        scheme, rest = "tcp", text
    scheme = scheme.lower()
    if scheme in _REFUSED_SCHEMES:
        raise refuse(f"{scheme}:// {_REFUSED_SCHEMES[scheme]}")
    if scheme not in ("tcp", "tls"):
        raise refuse(f"the scheme {scheme!r} is not one of tcp, tls")
    if any(c in rest for c in "/?#@"):
        raise refuse("an address has no path, query or user part")
    if rest.startswith("["):
        host, bracket, port_text = rest[1:].partition("]")
        if not bracket or not port_text.startswith(":"):
            raise refuse("an IPv6 host needs its port after the bracket, as [::1]:8786")
        port_text = port_text[1:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise refuse(f"{host!r} is not an IPv6 address") from None
    else:
        host, colon, port_text = rest.rpartition(":")
        if not colon:
            raise refuse("the port is missing (a scheduler listens on 8786 by default)")
        if not host:
            raise refuse("the host is missing")
        if ":" in host:
            raise refuse("an IPv6 host goes in brackets, as [::1]:8786")
        labels = host.rstrip(".").split(".")
        if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
            raise refuse(f"{host!r} is not a host name or IP address")
        if labels[-1].isdigit():  # no top-level domain is numeric: this is meant as an IPv4 address
            try:
                ipaddress.IPv4Address(host)
            except ValueError:
                raise refuse(f"{host!r} is not an IPv4 address") from None
    if not (port_text.isascii() and port_text.isdigit()) or len(port_text) > 5 or not 1 <= int(port_text) <= 65535:
        raise refuse(f"the port {port_text!r} is not a number in 1..65535")
    return SchedulerAddress(scheme, host, int(port_text))


def parse_timeout(text: str, what: str = "the Dask connection timeout") -> float:
    """A connection timeout in seconds from ``text`` (e.g. ``FMI_ADJOINT_DASK_TIMEOUT``): a
    finite number in (0, :data:`MAX_TIMEOUT`]."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0.0 < value <= MAX_TIMEOUT):
        raise DaskSettingError(f"{what} {excerpt(text, 80)}: give the seconds to wait for the scheduler, a number "
                               f"greater than 0 and at most {MAX_TIMEOUT:g} (default {DEFAULT_TIMEOUT:g}).")
    return value


def _client_tls_context(address: SchedulerAddress) -> ssl.SSLContext:
    """The TLS context of Dask's client settings (``distributed.comm.tls.*``), or why not."""
    from distributed import Security

    try:
        context = Security().get_connection_args("client")["ssl_context"]
    except (OSError, ValueError, ssl.SSLError) as exc:
        raise DaskSettingError(f"{address}: the TLS settings of Dask's configuration cannot be used ({exc}); "
                               f"{_TLS_SETTINGS}.") from None
    if context is None:
        raise DaskSettingError(f"{address}: tls:// needs client certificates and Dask's configuration has none; "
                               f"{_TLS_SETTINGS}, or connect with tcp:// on a network you trust.")
    return context


def _resolve(address: SchedulerAddress, deadline: float) -> list:
    """``getaddrinfo`` of the address under the deadline.  The lookup cannot be interrupted,
    so it runs in a daemon thread that is left behind if it outlives the deadline (it ends
    with the lookup and never holds up the interpreter's exit)."""
    box: dict[str, Any] = {}

    def lookup() -> None:
        try:
            box["infos"] = socket.getaddrinfo(address.host, address.port, type=socket.SOCK_STREAM)
        except OSError as exc:
            box["error"] = exc

    thread = threading.Thread(target=lookup, name="fmi-adjoint-dask-lookup", daemon=True)
    thread.start()
    thread.join(max(0.0, deadline - time.monotonic()))
    if thread.is_alive():
        raise ExecutorError(f"looking up the host {address.host!r} of {address} took longer than the connection "
                            "timeout; check the name, give the scheduler's IP address, or drop --dask to run locally.")
    if "error" in box:
        raise ExecutorError(f"the host {address.host!r} of {address} is not known ({box['error']}); check the "
                            "name, give the scheduler's IP address, or drop --dask to run locally.")
    return box["infos"]


def _connect_socket(address: SchedulerAddress, deadline: float) -> socket.socket:
    """A connected TCP socket to the address, trying every resolved address in turn."""
    errors: list[OSError] = []
    for family, kind, proto, _, sockaddr in _resolve(address, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(remaining)
            sock.connect(sockaddr)
        except OSError as exc:
            sock.close()
            errors.append(exc)
            continue
        return sock
    if errors and all(isinstance(exc, ConnectionRefusedError) for exc in errors):
        why = "nothing listens there (connection refused)"
    elif not errors or all(isinstance(exc, socket.timeout) for exc in errors):
        why = "no answer within the timeout (a host that is down or a firewall)"
    else:
        why = errors[-1].strerror or str(errors[-1])
    raise ExecutorError(f"cannot connect to the Dask scheduler at {address}: {why}; start the scheduler ('dask "
                        f"scheduler --port {address.port}') and its workers, check the address, or drop --dask to "
                        "run locally.")


class _Silence(Exception):
    """The peer sent nothing (or not all) before the deadline."""


class _Closed(Exception):
    """The peer closed the connection."""


def _receive(sock: socket.socket, count: int, deadline: float) -> bytes:
    """Exactly ``count`` bytes from ``sock`` before the deadline."""
    chunks: list[bytes] = []
    missing = count
    while missing:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Silence(b"".join(chunks))
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(min(missing, 65536))
        except (socket.timeout, ssl.SSLWantReadError):
            raise _Silence(b"".join(chunks)) from None
        except OSError as exc:  # reset by the peer, or a broken TLS record
            raise _Closed(b"".join(chunks)) from exc
        if not chunk:
            raise _Closed(b"".join(chunks))
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)


def _decode_handshake(payload: bytes) -> dict:
    """The scheduler's handshake from the first message's bytes (Dask's framing: a count of
    frames, their lengths, then the frames; the first frame is msgpack), decoded without
    Dask's msgpack hooks, which would unpickle."""
    import msgpack

    (count,) = struct.unpack_from("Q", payload)
    if not 1 <= count <= 64 or 8 * (count + 1) > len(payload):
        raise ValueError(f"{count} frames")
    lengths = struct.unpack_from(f"{count}Q", payload, 8)
    start = 8 * (count + 1)
    if lengths[0] > len(payload) - start:
        raise ValueError("a frame longer than the message")
    info = msgpack.unpackb(payload[start:start + lengths[0]], raw=False, use_list=False, strict_map_key=False)
    if not isinstance(info, dict) or "compression" not in info:
        raise ValueError("not a handshake")
    return info


def probe_scheduler(address: SchedulerAddress, timeout: float, tls: ssl.SSLContext | None = None) -> dict:
    """Connect to ``address`` and read the handshake a Dask scheduler sends first; return it.

    Everything (name lookup, connection, TLS handshake, reading) ends within ``timeout``
    seconds: each socket operation gets the time left until one deadline as its timeout
    (CPython bounds a whole ``recv``, ``connect`` or TLS handshake by it), so a peer that
    trickles bytes cannot stretch it.  The socket is closed on return.

    Raises
    ------
    ExecutorError
        Naming the address and what the peer did: refused, silent, closed, HTTP, a first
        message too long for a handshake, or bytes that are not Dask's.
    """
    deadline = time.monotonic() + timeout
    sock = _connect_socket(address, deadline)
    received = b""
    try:
        try:
            if tls is not None:
                sock.settimeout(max(1e-3, deadline - time.monotonic()))
                sock = tls.wrap_socket(sock, server_hostname=address.host)
            header = _receive(sock, 8, deadline)
            received = header
            (length,) = struct.unpack("Q", header)
            if header.startswith(b"HTTP/"):
                raise _NotDask("answered in HTTP, so it is a web server (the Dask dashboard?), not the scheduler; give "
                               "the scheduler's port (8786 by default, the dashboard's is 8787)")
            if not 16 <= length <= HANDSHAKE_LIMIT:
                raise _NotDask(f"announced a first message of {length} bytes where a Dask scheduler's handshake has "
                               "a few hundred, so it is not a Dask scheduler")
            received += _receive(sock, length, deadline)
            try:
                return _decode_handshake(received[8:])
            except Exception:  # noqa: BLE001 -- whatever the bytes are, they are not a handshake
                raise _NotDask(f"sent {_bytes(received)}, which is not a Dask scheduler's handshake") from None
        except ssl.SSLError as exc:
            raise _NotDask(f"failed the TLS handshake ({exc.reason or exc}); check that the scheduler was started "
                           "with TLS and that Dask's client certificates match its CA") from None
        except _Silence as exc:
            got = f" ({_bytes(received + exc.args[0])} only)" if received or exc.args[0] else ""
            raise _NotDask(f"accepted the connection but sent no Dask handshake within {timeout:g} s{got}, so it is "
                           "not a Dask scheduler, or one that is overloaded or uses tls://; check the address (a "
                           "scheduler listens on 8786 by default) or raise FMI_ADJOINT_DASK_TIMEOUT") from None
        except _Closed as exc:
            got = f" after {_bytes(received + exc.args[0])}" if received or exc.args[0] else ""
            raise _NotDask(f"closed the connection{got} before a Dask handshake, so it is not a Dask scheduler, or one "
                           "that refuses this client (TLS settings?)") from None
    except _NotDask as exc:
        raise ExecutorError(f"cannot connect to the Dask scheduler at {address}: it {exc}; or drop --dask to run "
                            "locally.") from None
    finally:
        sock.close()


class _NotDask(Exception):
    """What the peer did instead of a Dask handshake (completed into an ExecutorError)."""


def _bytes(data: bytes) -> str:
    """Received bytes for a message: their count and first bytes."""
    return f"{len(data)} bytes ({data[:16]!r}{'...' if len(data) > 16 else ''})"


@contextmanager
def _muted_distributed_logs() -> Iterator[None]:
    """Mute distributed's, tornado's and asyncio's loggers while connecting: a failed
    connection ends as our one error line, not as their tracebacks on stderr.  Loggers are
    disabled one by one (and restored), so other loggers of the process keep working."""
    manager = logging.Logger.manager
    names = ["distributed", "tornado", "asyncio"] + [
        name for name in list(manager.loggerDict) if name.startswith(("distributed.", "tornado."))]
    loggers = [logging.getLogger(name) for name in names]
    before = [logger.disabled for logger in loggers]
    for logger in loggers:
        logger.disabled = True
    try:
        yield
    finally:
        for logger, disabled in zip(loggers, before):
            logger.disabled = disabled


@functools.cache
def _bounded_client_class() -> type:
    """``distributed.Client`` whose start (connection, Dask's handshake, the scheduler's first
    replies) ends within its timeout, and that cleans up after itself when it fails."""
    from distributed import Client

    class FmiAdjointClient(Client):
        def start(self, **kwargs: Any) -> None:
            # Client.start hands its keywords to distributed.utils.sync, whose callback_timeout
            # cancels _start in the client's loop: the handshake read has no timeout of its own.
            kwargs.setdefault("callback_timeout", self._timeout)
            try:
                super().start(**kwargs)
            except BaseException:
                _discard(self)
                raise

    return FmiAdjointClient


def _discard(client: Any) -> None:
    """Close a client whose start failed, now, while its loop runs; then mark it closed so
    that its ``__del__`` does nothing (at interpreter exit it would wait and raise)."""
    try:
        client.close(timeout=_CLOSE_TIMEOUT)
    except Exception:  # noqa: BLE001 -- a half-made client may fail to close; it is abandoned either way
        pass
    finally:
        client.status = "closed"
        try:
            client._loop_runner.stop()
        except Exception:  # noqa: BLE001 -- a loop that is already stopped
            pass


def _context_plugin() -> Any:
    """A new worker plugin holding one :class:`WorkerContext` (made in ``setup``, on the worker)."""
    from distributed import WorkerPlugin

    class ContextPlugin(WorkerPlugin):
        idempotent = True  # a second executor on the same cluster keeps the contexts

        def __init__(self) -> None:
            self.context: WorkerContext | None = None

        def setup(self, worker: Any) -> None:
            self.context = WorkerContext()

        def teardown(self, worker: Any) -> None:
            if self.context is not None:
                self.context.close()
            self.context = None

        def __reduce__(self) -> tuple:
            return (_context_plugin, ())

    return ContextPlugin()


def _run(task: Task) -> Any:
    """What a Dask worker runs: ``task.run`` with the worker's context."""
    from distributed import get_worker

    try:
        plugin = get_worker().plugins.get(PLUGIN_NAME)
    except ValueError:  # not inside a worker (a client's local fallback): nothing to keep
        plugin = None
    context = getattr(plugin, "context", None)
    return task.run(context if context is not None else WorkerContext())


def _local_client(distributed: Any, timeout: float) -> Any:
    """A client of a local cluster that Dask starts (``DaskExecutor()`` without an address)."""
    try:
        return distributed.Client(None, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise ExecutorError(f"cannot start a local Dask cluster ({exc}); drop --dask to run locally.") from None


def _connect(address: SchedulerAddress, timeout: float) -> Any:
    """A client connected to the Dask scheduler at ``address`` (the steps of the module
    docstring); one :class:`ExecutorError` naming the address otherwise."""
    tls = _client_tls_context(address) if address.scheme == "tls" else None
    probe_scheduler(address, timeout, tls)
    with _muted_distributed_logs():
        try:
            return _bounded_client_class()(str(address), timeout=timeout, set_as_default=False)
        except Exception as exc:  # noqa: BLE001 -- whatever a broken or posing peer provokes is one error
            if isinstance(exc, TimeoutError):
                why = f"it answered the handshake but did not accept this client within {timeout:g} s"
            else:
                why = f"{type(exc).__name__}: {str(exc)[:160]}"
        # Raised outside the except block, so that no traceback keeps the failed client's
        # comms alive; collected here, so that their finalizers' warnings are muted too.
        gc.collect()
    raise ExecutorError(f"cannot connect to the Dask scheduler at {address} ({why}); check that the address is a "
                        "Dask scheduler (not a worker) of the same distributed version, raise "
                        "FMI_ADJOINT_DASK_TIMEOUT, or drop --dask to run locally.")


class DaskExecutor(AbstractExecutor):
    """Runs tasks on a Dask cluster.

    ``address`` is the scheduler (``tcp://host:8786``, any form :func:`parse_address`
    accepts; ``None``: a local cluster that Dask starts and this executor closes), or
    ``client`` an existing ``distributed.Client`` (never closed here).  ``timeout`` [s]
    bounds each connection step: the probe of the address (:func:`probe_scheduler`), the
    client's start, the wait for a first worker.  :attr:`workers` is the number of worker
    threads when the executor connected.

    Raises
    ------
    DaskSettingError
        An address of a refused form, or ``tls://`` without certificates, before connecting.
    ExecutorError
        Distributed is missing, or the address is not a reachable Dask scheduler with workers
        (one message naming the address, what answered and the fix).
    """

    name = "dask"

    def __init__(self, address: str | None = None, *, client: Any = None, timeout: float = DEFAULT_TIMEOUT):
        checked = parse_address(address) if address is not None else None
        if not (isinstance(timeout, (int, float)) and math.isfinite(timeout) and 0 < timeout <= MAX_TIMEOUT):
            raise DaskSettingError(f"DaskExecutor timeout={timeout!r}: give seconds, greater than 0 and at most "
                                   f"{MAX_TIMEOUT:g}.")
        try:
            import distributed
        except ImportError:
            raise ExecutorError(_MISSING) from None
        if client is not None and address is not None:
            raise ExecutorError(f"DaskExecutor got both address={address!r} and a client; give one of them.")
        self._lock = threading.Lock()
        self._running: dict[str, tuple[Task, Any, Future]] = {}
        self._closed = False
        self._own_client = client is None
        if client is None:
            client = _connect(checked, timeout) if checked is not None else _local_client(distributed, timeout)
        self.client = client
        try:
            client.register_plugin(_context_plugin(), name=PLUGIN_NAME)
            # Worker processes, not threads: a worker runs the tasks of one problem one after
            # another (WorkerContext).  A cluster whose workers are still starting is waited for.
            try:
                client.wait_for_workers(1, timeout=timeout)
            except (TimeoutError, OSError):
                raise ExecutorError(f"the Dask scheduler at {client.scheduler.address} has no workers after "
                                    f"{timeout:g} s; start some ('dask worker {client.scheduler.address} --nthreads "
                                    "1'), or drop --dask to run locally.") from None
            self._workers = max(1, len(client.nthreads()))
            #: The scheduler's address (for reports).
            self.address: str = client.scheduler.address
        except BaseException:
            self.close()
            raise

    @property
    def workers(self) -> int:
        return self._workers

    def describe(self) -> dict:
        return {"executor": self.name, "workers": self._workers, "scheduler": self.address}

    def submit(self, task: Task) -> Future:
        future: Future = Future()
        key = f"{type(task).__name__}-{uuid.uuid4().hex}"
        with self._lock:
            if self._closed:
                raise ExecutorError("this DaskExecutor is closed; submit tasks before close() (or the end of its "
                                    "'with' block), or connect a new one.")
            try:
                dask_future = self.client.submit(_run, task, key=key, pure=False)
            except Exception as exc:  # noqa: BLE001 -- carried by the future, like the task's own errors
                future.set_exception(ExecutorError(
                    f"{task!r} cannot be sent to the Dask cluster ({type(exc).__name__}: {exc}); a task must be "
                    "picklable: module-level classes and functions, no lambdas, open files or locks."))
                return future
            self._running[key] = (task, dask_future, future)
        dask_future.add_done_callback(functools.partial(self._resolve, key))
        future.add_done_callback(functools.partial(self._forward_cancel, key))
        return future

    def _resolve(self, key: str, dask_future: Any) -> None:
        """Done callback of a Dask future: resolve its concurrent future."""
        from distributed import KilledWorker

        with self._lock:
            entry = self._running.pop(key, None)
        if entry is None:  # cancelled (by its owner or by close)
            return
        task, _, future = entry
        try:
            if dask_future.status == "finished":
                settle(future, result=dask_future.result())
                return
            if dask_future.status == "cancelled":
                future.cancel()
                return
            error = dask_future.exception()
        except BaseException as exc:  # noqa: BLE001 -- the results could not be fetched; the future carries why
            error = exc
        if isinstance(error, KilledWorker):
            error = ExecutorError(f"{task!r} ended every Dask worker that ran it ({error}); the task crashes its "
                                  "worker; run it serially (--workers 1, without --dask) to see the error.")
        settle(future, error=error)

    def _forward_cancel(self, key: str, future: Future) -> None:
        """Done callback of a concurrent future: a cancelled one cancels its Dask task."""
        if not future.cancelled():
            return
        with self._lock:
            entry = self._running.pop(key, None)
        if entry is not None:
            try:
                entry[1].cancel()
            except Exception:  # noqa: BLE001 -- the client is closing: the task goes with it
                pass

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            entries = list(self._running.values())
            self._running.clear()
        if entries:
            try:
                self.client.cancel([dask_future for _, dask_future, _ in entries])
            except Exception:  # noqa: BLE001 -- a client that is already gone has nothing to cancel
                pass
        for _, _, future in entries:
            future.cancel()
        if self._own_client:
            self.client.close()
