"""The structure of the FMU worker's replies, checked before anything uses them (issue 31, finding 6).

The worker runs a third-party binary, which can write into the worker's reply pipe (it
runs in the same process and the descriptor is in its command line): a reply is untrusted
data.  :func:`~.worker.decode_reply` makes sure no class is ever looked up (no code runs);
this module makes sure the plain data it yields has the shape of the answer to the request
that was sent: the envelope, the types, the array shapes (from the request), and finite
values where the protocol needs them (times, node times, counts, sensitivities).  NaN is
legitimate where it is the FMU's own value and is judged downstream: outputs (the run's
outputs become a :class:`~fmi_adjoint.errors.ConvergenceError` there, so the optimizer
steps back), state derivatives, directional derivatives and the values of ``get``.

:func:`expectation` gives, per request, the label of the call (for the error) and the
function that checks an ``("ok", ...)`` reply's payload and returns the value the caller
gets; :func:`split` checks the envelope.  Every violation is a :class:`MalformedReply`
whose text says what was wrong; :class:`~.session.FmuSession` turns it into one
:class:`~.archive.FmuError` naming the FMU and the call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .worker import unpack

__all__ = ["MAX_DEPTH", "MAX_MESSAGE", "MAX_REPLY_BYTES", "MalformedReply", "expectation", "one_line",
           "reply_limit", "split"]

#: Longest error text a worker may send back (characters): longer ones are cut, so that a
#: hostile binary cannot flood the one error line.
MAX_MESSAGE = 2000
#: Largest reply frame of a run or a simulation [bytes], checked on the frame's header before
#: its body is read.  The largest legitimate replies are trajectories (fmpy's result, the
#: outputs of a run): 1 GiB is 134 million float64 values, the default memory cap of a whole
#: recorded run (:attr:`~fmi_adjoint.integrate.radau.RunBudget.max_memory`), far above any
#: data set the identification handles.
MAX_REPLY_BYTES = 1 << 30
#: Room in a reply besides its array [bytes]: the envelope, or an error text (a legitimate one
#: is a few hundred characters; longer ones are cut to :data:`MAX_MESSAGE` anyway).
_REPLY_SLACK = 1 << 20
#: Deepest nesting of containers a reply may have: a legitimate one nests at most 6 deep
#: (``("ok", ("value", {"events": [(t, kind)]}))``); a forged one 200 000 deep made ``repr``
#: and comparisons raise RecursionError.
MAX_DEPTH = 32
_ERROR_KINDS = ("fmu", "convergence", "internal")
_CALL_LABELS = {"instantiate": "instantiating the FMU", "instantiate_system": "instantiating the system's FMUs",
                "simulate_fmu": "fmpy.simulate_fmu",
                "run_cs": "the Co-Simulation run", "run_me_adaptive": "the Model Exchange run"}


class MalformedReply(Exception):
    """A reply that is not what the protocol allows; the text says what is wrong."""


def _describe(value: object) -> str:
    """A short text for a value of a reply, never a whole ``repr``: a forged reply may hold a
    container of a million references to one long text, whose ``repr`` would take gigabytes."""
    if isinstance(value, (bytes, bytearray)):
        return f"{len(value)} bytes"
    if isinstance(value, (tuple, list, dict, set, frozenset)):
        if len(value) > 4 or not all(isinstance(v, (str, int, float, type(None))) for v in value):
            return f"a {type(value).__name__} of {len(value)} elements"
    if isinstance(value, str):
        value = value[:60]
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def one_line(text: str) -> str:
    """``text`` as one line for the one error line: control characters (newlines included)
    and other unprintable characters escaped, cut to :data:`MAX_MESSAGE` characters.  The
    text comes from the process that runs the binary, which must not be able to write lines
    that pose as the tool's own (``fmi-adjoint: error: ...``)."""
    line = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return line if len(line) <= MAX_MESSAGE else line[: MAX_MESSAGE - 3] + "..."


def _check_depth(reply: object) -> None:
    """MalformedReply if containers nest deeper than :data:`MAX_DEPTH` (checked without
    recursion, before anything recurses into the reply)."""
    stack = [(reply, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (tuple, list, set, frozenset, dict)):
            if depth >= MAX_DEPTH:
                raise MalformedReply(f"a reply nested more than {MAX_DEPTH} levels deep")
            items = [*value, *value.values()] if isinstance(value, dict) else value
            stack.extend((item, depth + 1) for item in items)


def reply_limit(op: str, args: tuple, n_states: int) -> int:
    """Largest reply frame [bytes] the worker may send for the request ``(op, args)``: the
    array it answers with (known from the request) plus room for the envelope or an error;
    :data:`MAX_REPLY_BYTES` for runs whose length only the run knows."""
    values = 0
    if op == "call":
        _, method, method_args = args
        values = _call_size(method, method_args, n_states) or 0
    elif op == "run_cs":
        values = unpack(args[2]).size * len(args[3])
    elif op not in ("instantiate", "instantiate_system"):
        return MAX_REPLY_BYTES
    return min(MAX_REPLY_BYTES, 8 * values + _REPLY_SLACK)


def split(reply: object) -> tuple[str, object]:
    """``("ok", payload)`` or ``("error", (kind, message))`` from a decoded reply (MalformedReply
    for any other envelope or containers nested deeper than :data:`MAX_DEPTH`; an error message
    is cut to :data:`MAX_MESSAGE` characters)."""
    _check_depth(reply)
    if not isinstance(reply, tuple) or not reply or reply[0] not in ("ok", "error"):
        raise MalformedReply(f"a reply {_describe(reply)} instead of ('ok', ...) or ('error', ...)")
    if reply[0] == "ok":
        if len(reply) != 2:
            raise MalformedReply(f"an 'ok' reply of {len(reply)} elements instead of 2")
        return "ok", reply[1]
    if len(reply) != 3 or reply[1] not in _ERROR_KINDS or not isinstance(reply[2], str):
        raise MalformedReply(f"an error reply {_describe(reply)} instead of (kind, message text)")
    message = reply[2] if len(reply[2]) <= MAX_MESSAGE else reply[2][: MAX_MESSAGE - 3] + "..."
    return "error", (reply[1], message)


def _payload(value: object, kind: str) -> object:
    if not (isinstance(value, tuple) and len(value) == 2 and value[0] == kind):
        raise MalformedReply(f"the result {_describe(value)} instead of ({kind!r}, ...)")
    return value[1]


def _array(packed: object, shape: Sequence[int | None], what: str, *, finite: bool = False) -> np.ndarray:
    """The array of ``packed``, of ``shape`` (None: any extent), finite if asked."""
    array = unpack_any(packed, what)
    if array.ndim != len(shape) or any(n is not None and n != m for n, m in zip(shape, array.shape)):
        wanted = "(" + ", ".join("any" if n is None else str(n) for n in shape) + ")"
        raise MalformedReply(f"{what} of shape {array.shape} instead of {wanted}")
    if finite and not np.all(np.isfinite(array)):
        raise MalformedReply(f"{what} with values that are not finite")
    return array


def _count(value: object, what: str) -> int:
    if type(value) is not int or value < 0:
        raise MalformedReply(f"{what} {_describe(value)} instead of a count")
    return value


def _texts(value: object, what: str, allowed: Sequence[str] | None = None, length: int | None = None) -> list:
    if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise MalformedReply(f"{what} {_describe(value)} instead of a list of texts")
    if allowed is not None and any(v not in allowed for v in value):
        raise MalformedReply(f"{what} {_describe(value)} with entries other than {', '.join(allowed)}")
    if length is not None and len(value) != length:
        raise MalformedReply(f"{what} of {len(value)} entries instead of {length}")
    return value


def _none(payload: object) -> None:
    if _payload(payload, "value") is not None:
        raise MalformedReply(f"the result {_describe(payload)} instead of ('value', None)")


def _next_event_time(payload: object) -> float | None:
    value = _payload(payload, "value")
    if value is None:
        return None
    if type(value) is not float or not math.isfinite(value):
        raise MalformedReply(f"the next time event {_describe(value)} instead of a finite number or None")
    return value


def _values(size: int, what: str) -> Callable[[object], np.ndarray]:
    return lambda payload: _array(_payload(payload, "array"), (size,), what)


#: What the array answering a call holds (the calls :func:`_call_size` knows).
_CALL_ARRAYS = {"initial_states": "the states", "derivatives": "the state derivatives",
                "rhs": "the derivatives and outputs", "get_real": "the values", "get_values": "the values",
                "directional": "the directional derivative", "step": "the outputs", "exchange": "the outputs"}
#: The co-simulation master's calls (:mod:`fmi_adjoint.ssp.master`): the argument holding the
#: output references, one float answered per reference.
_OUTPUT_ARGUMENT = {"step": 5, "exchange": 2}


def _call_size(method: str, method_args: tuple, n_states: int) -> int | None:
    """The length of the array answering the call ``method`` (None: it answers with no array)."""
    if method in ("initial_states", "derivatives"):
        return n_states
    if method == "rhs":
        return n_states + len(method_args[0] if method_args else ())
    if method in ("get_real", "get_values", "directional"):
        return len(method_args[0])
    if method in _OUTPUT_ARGUMENT:
        return len(method_args[_OUTPUT_ARGUMENT[method]])
    return None


def _call(method: str, method_args: tuple, n_states: int) -> Callable[[object], Any]:
    if method == "start":
        return _next_event_time
    if method in ("set_real", "set_values"):
        return _none
    size = _call_size(method, method_args, n_states)
    if size is None:
        raise MalformedReply(f"a reply to the unknown call {method!r}")
    return _values(size, _CALL_ARRAYS[method])


def _simulate_fmu(options: dict) -> Callable[[object], dict[str, np.ndarray]]:
    wanted = ["time", *options.get("output", ())]

    def check(payload: object) -> dict[str, np.ndarray]:
        columns = _payload(payload, "value")
        if not (isinstance(columns, dict) and all(isinstance(name, str) for name in columns)):
            raise MalformedReply(f"the result {_describe(columns)} instead of columns by name")
        missing = [name for name in wanted if name not in columns]
        if missing:
            raise MalformedReply(f"a result without the column {missing[0]!r}")
        time = _array(columns["time"], (None,), "the time column", finite=True)
        if time.size == 0 or np.any(np.diff(time) < 0):
            raise MalformedReply("a time column that is empty or goes back in time")
        out = {"time": time}
        for name in wanted[1:]:
            column = unpack_any(columns[name], f"the column {name!r}")
            if column.ndim == 0 or column.shape[0] != time.size:
                raise MalformedReply(f"the column {name!r} of shape {column.shape}, not {time.size} rows as time")
            out[name] = column
        return out

    return check


def unpack_any(packed: object, what: str) -> np.ndarray:
    """An array of any shape (MalformedReply if it is no packed array)."""
    try:
        return unpack(packed)
    except ValueError as exc:
        raise MalformedReply(f"{what}: {exc}") from None


def _run_me(request: dict) -> Callable[[object], dict]:
    stops, outputs = len(request["stops"]), len(request["outputs"])
    states = len(request["sources"])
    sensitivity = request.get("sensitivity")
    parameters = len(sensitivity["steps"]) if sensitivity is not None else 0

    def check(payload: object) -> dict:
        reply = _payload(payload, "value")
        if not (isinstance(reply, dict) and all(isinstance(key, str) for key in reply)):
            raise MalformedReply(f"the result {_describe(reply)} instead of a record by name")
        for key in ("left", "right", "sources", "nodes", "steps", "rejected", "events", "rhs_evaluations"):
            if key not in reply:
                raise MalformedReply(f"a result without {key!r}")
        for key in ("left", "right"):  # NaN outputs are the FMU's: a ConvergenceError downstream
            _array(reply[key], (stops, outputs), f"the outputs {key!r}")
        _texts(reply["sources"], "the Jacobian sources", ("fd", "fmu"), states)
        nodes = _array(reply["nodes"], (None,), "the node times", finite=True)
        if np.any(np.diff(nodes) < 0):
            raise MalformedReply("node times that go back in time")
        for key in ("steps", "rejected", "rhs_evaluations"):
            _count(reply[key], f"the count {key!r}")
        events = reply["events"]
        if not (isinstance(events, list) and all(
                isinstance(e, tuple) and len(e) == 2 and type(e[0]) is float and math.isfinite(e[0])
                and isinstance(e[1], str) for e in events)):
            raise MalformedReply(f"the events {_describe(events)} instead of a list of (time, kind)")
        if ("dleft" in reply) != ("dright" in reply) or ("dleft" in reply and sensitivity is None):
            raise MalformedReply("output sensitivities that were not asked for, or only one side of them")
        for key in ("dleft", "dright"):
            if key in reply:
                _array(reply[key], (stops, outputs, parameters), f"the output sensitivities {key!r}", finite=True)
        if "columns" in reply:
            _texts(reply["columns"], "the parameter columns", length=parameters)
        if "directional" in reply:
            use = reply["directional"]
            if not (isinstance(use, list) and len(use) == parameters and all(type(u) is bool for u in use)):
                raise MalformedReply(f"the directional flags {_describe(use)} instead of one bool per parameter")
        if "fmu_calls" in reply:
            _count(reply["fmu_calls"], "the count 'fmu_calls'")
        if "fmu_calls_saved" in reply and type(reply["fmu_calls_saved"]) is not int:  # negative: columns cost more
            raise MalformedReply(f"the count 'fmu_calls_saved' {_describe(reply['fmu_calls_saved'])} instead of "
                                 "a whole number")
        if "column_check" in reply:  # at most two phrases per state (derivatives, outputs), one per parameter
            checked = _texts(reply["column_check"], "the column check")
            if len(checked) > 2 * states + parameters:
                raise MalformedReply(f"the column check of {len(checked)} entries for {states} states and "
                                     f"{parameters} parameters")
        if "sensitivities_unavailable" in reply and not isinstance(reply["sensitivities_unavailable"], str):
            raise MalformedReply("a reason for unavailable sensitivities that is no text")
        return reply

    return check


def expectation(op: str, args: tuple, n_states: int) -> tuple[str, Callable[[object], Any]]:
    """(label of the call, check of an ``("ok", payload)`` reply's payload returning the
    caller's value) for the request ``(op, args)`` of a session with ``n_states`` states."""
    if op == "call":
        _, method, method_args = args
        return f"the call {method!r}", _call(method, method_args, n_states)
    label = _CALL_LABELS.get(op, f"the request {op!r}")
    if op in ("instantiate", "instantiate_system"):
        return label, _none
    if op == "simulate_fmu":
        return label, _simulate_fmu(args[1])
    if op == "run_cs":
        rows, outputs = unpack(args[2]).size, len(args[3])
        return label, lambda payload: _array(_payload(payload, "array"), (rows, outputs), "the outputs")
    if op == "run_me_adaptive":
        return label, _run_me(args[0])

    def unknown(payload: object) -> None:
        raise MalformedReply(f"an 'ok' reply to {label}, which the worker does not answer")

    return label, unknown
