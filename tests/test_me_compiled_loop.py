"""The compiled Model Exchange loop (issue 30, part 6) against the Python loop it mirrors.

``integrate/fa_radau.c`` takes the plain steps of a run and ``fmu/fa_me_system.c`` makes the FMU
calls they need; ``integrate/radau.py`` and ``fmu/me_integration.py`` are the reference.  The two
loops take the same decisions on the same numbers, so on hand-written FMUs of every kind (FMI 2
and 3, the FMU's directional derivatives or differences, inputs interpolated in time, state events,
time events, step events) they must take the same steps and meet the same events, and give outputs
and exact sensitivities that differ only by round-off (``LOOPS_AGREE``).  (Their FMU calls differ a
little: a Newton iteration more or less where the update sits at the stopping test, and a trial step
repeated in Python where an indicator changes its domain.)  A frozen replay through the compiled loop
reproduces its run bit for bit; an FMI call that fails inside the compiled loop ends in the Python
loop's error, without another call to the FMU.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from fmi_adjoint.cache import BuildCache
from fmi_adjoint.data import Measurement
from fmi_adjoint.errors import CompilerError, FmuError
from fmi_adjoint.fmu.archive import open_fmu
from fmi_adjoint.fmu.experiment import FmuExperiment, Tolerances
from fmi_adjoint.fmu.me_kernel import load_library
from fmi_adjoint.fmu.me_loop import CompiledLoop, PythonLoop, loop_library
from fmi_adjoint.fmu.session import FmuSession
from fmi_adjoint.fmu.simulation import FmuSimulator, SensitivityRequest
from fmi_adjoint.fmu.worker import unpack
from handwritten_fmus import build_fmu
from tolerances import LOOPS_AGREE, LOOPS_AGREE_SENSITIVITIES


class _Cost:
    def __init__(self, channels, times):
        self.channels = tuple(channels)
        self.sample_times = np.asarray(times, dtype=float)


#: name: (FMU, outputs, t_end, samples, values, parameters differentiated, inputs[, defines, FMU columns of p])
CASES = {
    "van_der_pol_fmi2_parameter_columns": ("van_der_pol_me", ("x0", "x1"), 4.0, 201, {"mu": 1.5}, ("mu",), True, (),
                                           True),
    "dahlquist_step_events": ("dahlquist", ("x",), 2.0, 41, {"k": 3.0}, ("k",), False, ("FA_STEP_EVENT_EVERY=7",)),
    "van_der_pol_fmi2_directional_input": ("van_der_pol_me", ("x0", "x1"), 4.0, 201, {"mu": 1.5}, ("mu",), True),
    "van_der_pol_fmi3": ("van_der_pol_me3", ("x0", "x1"), 4.0, 201, {"mu": 1.5}, ("mu",), False),
    "dahlquist_fmi3_differences": ("dahlquist", ("x",), 2.0, 41, {"k": 3.0}, ("k",), False),
    "bouncing_ball_state_events": ("bouncing_ball", ("h", "v"), 2.5, 126, {"e": 0.8}, ("e",), False),
    "stair_time_events": ("stair", ("level",), 2.2, 45, {"c": 0.7}, ("c",), False),
}


@pytest.fixture(scope="module")
def fmus(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("compiled_loop_fmus")
    return {_key(case): build_fmu(case[0], folder, _defines(case)) for case in CASES.values()}


def _defines(case: tuple) -> tuple[str, ...]:
    return case[7] if len(case) > 7 else ()


def _key(case: tuple) -> str:
    return "__".join([case[0], *_defines(case)])


def _run(fmu: Path, case: tuple, loop, *, sensitivity: bool = True, nodes=None, mode: int | None = None) -> dict:
    """One Model Exchange request through ``loop``: the worker's raw reply and the FMU calls."""
    _, outputs, t_end, samples, values, params, with_input = case[:7]
    columns_of_p = len(case) > 8 and case[8]
    archive = open_fmu(fmu)
    session = FmuSession(archive, "ModelExchange")
    try:
        times = np.linspace(0.0, t_end, samples)
        inputs = None
        if with_input:
            grid = np.linspace(0.0, t_end, 37)
            inputs = Measurement(times=grid, columns=("u",), values=np.sin(3.0 * grid)[:, None], source="u.csv")
        exp = FmuExperiment(_Cost(outputs, times), t_end=t_end, step=times[1] - times[0],  # type: ignore[arg-type]
                            inputs=inputs)
        columns = archive.provides_directional_derivatives and archive.scalar_states
        simulator = FmuSimulator(archive, "ModelExchange", Tolerances(rtol=1e-8, atol=1e-8),
                                 ["fmu" if columns else "fd"] * session.n_states)
        simulator.loop = loop
        request = None
        if sensitivity:
            request = SensitivityRequest(params, np.full(len(params), 1e-6), (columns_of_p,) * len(params), 1e-6)
        point = dict(values) if mode is None else {**values, "mode": mode}
        return session.run(simulator.job(session, exp, point, sensitivity=request, nodes=nodes))
    finally:
        session.close()
        archive.close()


def _largest_difference(a: np.ndarray, b: np.ndarray) -> float:
    """Largest difference relative to each channel's largest value."""
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b).max(axis=0), 1e-300)))


@pytest.mark.parametrize("name", list(CASES))
def test_the_compiled_loop_takes_the_python_loops_steps(fmus, name):
    """The same steps, rejections and events; outputs equal to round-off (a single step taken
    otherwise would move them by the local error, ~1e-8 here), sensitivities to the round-off of
    the replays' differences."""
    case = CASES[name]
    python = _run(fmus[_key(case)], case, PythonLoop())
    compiled = _run(fmus[_key(case)], case, CompiledLoop())
    assert (python["loop"], compiled["loop"]) == ("python", "compiled")
    # The loop ran in C: most steps committed there, the replays' steps between events too.
    assert compiled["compiled_steps"] >= compiled["steps"] // 2 and compiled["compiled_replayed"] > 0
    assert "compiled_steps" not in python or python["compiled_steps"] == 0
    assert (compiled["steps"], compiled["rejected"]) == (python["steps"], python["rejected"])
    assert [kind for _, kind in compiled["events"]] == [kind for _, kind in python["events"]]
    # State events are roots and time events given: their times agree.  A step event sits at a step's
    # end, which the controller placed from an error estimate with round-off of its own.
    located = [k for k, (_, kind) in enumerate(python["events"]) if kind != "step"]
    if located:
        times = np.array([python["events"][k][0] for k in located])
        assert np.all(np.abs(np.array([compiled["events"][k][0] for k in located]) - times)
                      <= LOOPS_AGREE * times.max())
    for key in ("left", "right"):
        assert _largest_difference(unpack(compiled[key]), unpack(python[key])) <= LOOPS_AGREE, key
    for key in ("dleft", "dright"):
        assert _largest_difference(unpack(compiled[key]), unpack(python[key])) <= LOOPS_AGREE_SENSITIVITIES, key
    assert np.any(unpack(compiled["dleft"]) != 0.0)


@pytest.mark.parametrize("name", ["van_der_pol_fmi2_directional_input", "bouncing_ball_state_events"])
def test_a_frozen_replay_through_the_compiled_loop_is_its_run_bit_for_bit(fmus, name):
    """``nodes=`` (the finite differences of the same discrete scheme): the compiled run's own node
    times give back the same outputs and sensitivities exactly."""
    case = CASES[name]
    first = _run(fmus[_key(case)], case, CompiledLoop())
    again = _run(fmus[_key(case)], case, CompiledLoop(), nodes=unpack(first["nodes"]))
    assert again["loop"] == "compiled" and again["events"] == first["events"]
    for key in ("left", "right", "dleft", "dright"):
        assert np.array_equal(unpack(again[key]), unpack(first[key])), key


def _names_the_loop(fd: str) -> bool:
    try:  # the descriptor listdir used is gone by now
        return os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:fmi_adjoint_me_loop")
    except FileNotFoundError:
        return False


def test_the_compiled_loop_is_the_default_and_its_library_is_checked():
    """A job carries the library's bytes and their digest; the worker refuses bytes that do not
    match their digest."""
    digest, data = loop_library(BuildCache.default())
    assert digest == hashlib.sha256(data).hexdigest() and data[:4] == b"\x7fELF"
    with pytest.raises(ValueError, match="does not match its digest"):
        load_library(("0" * 64, data))
    assert load_library((digest, data)) is load_library((digest, data))  # loaded once per process
    # Its in-memory file stays open (a closed /proc/self/fd/N would name the next file opened as N
    # to the dynamic loader) and is sealed against writes.
    open_files = [int(fd) for fd in os.listdir("/proc/self/fd") if _names_the_loop(fd)]
    assert open_files
    seals = fcntl.fcntl(open_files[0], fcntl.F_GET_SEALS)
    assert seals & fcntl.F_SEAL_WRITE and seals & fcntl.F_SEAL_SEAL


def test_without_a_c_compiler_the_python_loop_runs_and_says_so(fmus, monkeypatch):
    """The compiled loop's library cannot be built: every step in Python, the same outputs, and a
    note naming why (FmuProblem.notes prints it)."""
    def no_compiler(self):
        raise CompilerError("no C compiler found (tried $CC, cc, gcc, clang); install gcc or set CC.")

    monkeypatch.setattr(CompiledLoop, "kernel", no_compiler)
    case = CASES["dahlquist_fmi3_differences"]
    archive = open_fmu(fmus[_key(case)])
    session = FmuSession(archive, "ModelExchange")
    try:
        times = np.linspace(0.0, case[2], case[3])
        exp = FmuExperiment(_Cost(case[1], times), t_end=case[2], step=times[1] - times[0])  # type: ignore[arg-type]
        simulator = FmuSimulator(archive, "ModelExchange", Tolerances(rtol=1e-8, atol=1e-8), ["fd"])
        reply = session.run(simulator.job(session, exp, dict(case[4])))
    finally:
        session.close()
        archive.close()
    assert reply["loop"] == "python" and isinstance(simulator.loop, PythonLoop)
    assert simulator.loop_note is not None and "no C compiler" in simulator.loop_note
    assert "every step runs in Python" in simulator.loop_note
    expected = _run(fmus[_key(case)], case, PythonLoop(), sensitivity=False)
    assert np.array_equal(unpack(reply["left"]), unpack(expected["left"]))


@pytest.mark.parametrize("sensitivity", [False, True])
def test_a_failed_fmi_call_in_the_compiled_loop_is_the_python_loops_error(tmp_path, sensitivity):
    """dahlquist whose GetDerivatives returns Error after t = 0.5 and which then refuses every call
    but Reset (FMI 2.0 sec. 2.1.3): the compiled loop names the call that failed, as the Python
    loop does, instead of repeating the attempt (which would meet "setting the time failed")."""
    case = ("dahlquist", ("x",), 2.0, 41, {"k": 3.0}, ("k",), False)
    fmu = build_fmu("dahlquist", tmp_path, ("FA_ERROR_STATE_AT=0.5",))
    messages = []
    for loop in (PythonLoop(), CompiledLoop()):
        with pytest.raises(FmuError) as caught:
            _run(fmu, case, loop, sensitivity=sensitivity)
        messages.append(str(caught.value))
    assert "getting the state derivatives failed (fmi3GetContinuousStateDerivatives failed with status 3" \
        in messages[0]
    assert messages[1] == messages[0]
