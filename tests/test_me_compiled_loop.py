"""The compiled Model Exchange loop (issue 30, part 6) against the Python loop it mirrors.

``integrate/fa_radau.c`` takes the plain steps of a run and ``fmu/fa_me_system.c`` makes the FMU
calls they need; ``integrate/radau.py`` and ``fmu/me_integration.py`` are the reference.  The two
loops take the same decisions on the same numbers, so on hand-written FMUs of every kind (FMI 2
and 3, the FMU's directional derivatives or differences, inputs interpolated in time, state events,
time events) they must take the same steps, meet the same events, make the same number of FMU
calls, and give outputs and exact sensitivities that differ only by round-off (``LOOPS_AGREE``).
A frozen replay through the compiled loop reproduces its run bit for bit; failures inside the
compiled loop end in the Python loop's errors.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from fmi_adjoint.cache import BuildCache
from fmi_adjoint.data import Measurement
from fmi_adjoint.errors import CompilerError
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


#: name: (FMU, outputs, t_end, samples, values, parameters differentiated, inputs)
CASES = {
    "van_der_pol_fmi2_directional_input": ("van_der_pol_me", ("x0", "x1"), 4.0, 201, {"mu": 1.5}, ("mu",), True),
    "van_der_pol_fmi3": ("van_der_pol_me3", ("x0", "x1"), 4.0, 201, {"mu": 1.5}, ("mu",), False),
    "dahlquist_fmi3_differences": ("dahlquist", ("x",), 2.0, 41, {"k": 3.0}, ("k",), False),
    "bouncing_ball_state_events": ("bouncing_ball", ("h", "v"), 2.5, 126, {"e": 0.8}, ("e",), False),
    "stair_time_events": ("stair", ("level",), 2.2, 45, {"c": 0.7}, ("c",), False),
}


@pytest.fixture(scope="module")
def fmus(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("compiled_loop_fmus")
    return {name: build_fmu(name, folder) for name in {case[0] for case in CASES.values()}}


def _run(fmu: Path, case: tuple, loop, *, sensitivity: bool = True, nodes=None, mode: int | None = None) -> dict:
    """One Model Exchange request through ``loop``: the worker's raw reply and the FMU calls."""
    _, outputs, t_end, samples, values, params, with_input = case
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
            request = SensitivityRequest(params, np.full(len(params), 1e-6), (False,) * len(params), 1e-6)
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
    python = _run(fmus[case[0]], case, PythonLoop())
    compiled = _run(fmus[case[0]], case, CompiledLoop())
    assert (python["loop"], compiled["loop"]) == ("python", "compiled")
    assert (compiled["steps"], compiled["rejected"]) == (python["steps"], python["rejected"])
    assert [kind for _, kind in compiled["events"]] == [kind for _, kind in python["events"]]
    if python["events"]:
        times = np.array([t for t, _ in python["events"]])
        assert np.all(np.abs(np.array([t for t, _ in compiled["events"]]) - times) <= LOOPS_AGREE * times.max())
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
    first = _run(fmus[case[0]], case, CompiledLoop())
    again = _run(fmus[case[0]], case, CompiledLoop(), nodes=unpack(first["nodes"]))
    assert again["loop"] == "compiled" and again["events"] == first["events"]
    for key in ("left", "right", "dleft", "dright"):
        assert np.array_equal(unpack(again[key]), unpack(first[key])), key


def test_the_compiled_loop_is_the_default_and_its_library_is_checked():
    """A job carries the library's bytes and their digest; the worker refuses bytes that do not
    match their digest."""
    digest, data = loop_library(BuildCache.default())
    assert digest == hashlib.sha256(data).hexdigest() and data[:4] == b"\x7fELF"
    with pytest.raises(ValueError, match="does not match its digest"):
        load_library(("0" * 64, data))
    assert load_library((digest, data)) is load_library((digest, data))  # loaded once per process


def test_without_a_c_compiler_the_python_loop_runs_and_says_so(fmus, monkeypatch):
    """The compiled loop's library cannot be built: every step in Python, the same outputs, and a
    note naming why (FmuProblem.notes prints it)."""
    def no_compiler(self):
        raise CompilerError("no C compiler found (tried $CC, cc, gcc, clang); install gcc or set CC.")

    monkeypatch.setattr(CompiledLoop, "kernel", no_compiler)
    case = CASES["dahlquist_fmi3_differences"]
    archive = open_fmu(fmus[case[0]])
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
    expected = _run(fmus[case[0]], case, PythonLoop(), sensitivity=False)
    assert np.array_equal(unpack(reply["left"]), unpack(expected["left"]))
