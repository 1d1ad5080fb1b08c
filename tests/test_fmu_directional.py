"""The importer uses the directional derivatives an FMU offers, after checking them (issue 30, part 7).

* the hand-written Duffing FMU ``fmus/lying_derivatives_me`` (FMI 3.0 ME) tells the truth with
  ``lie=0``: its columns of ``df/dx`` and ``dg/dx`` are used and equal central differences (as
  the Van der Pol FMI 2.0 FMU's);
* each lie (a state column, a parameter column, an output row, a refused known) is detected by
  the check at the run's first point, named once, and the Jacobians are then those of central
  differences; an identification through the lying FMU gives the truthful one's parameters;
* a parameter column once believed replaces its parameter's replays (the same sensitivities with
  fewer than half the FMU calls), a lying one is named and differenced every time;
* the FMU calls are counted both ways (a differenced column against an FMU column), and a
  problem's runs add up to one note and the calls saved (:class:`~fmi_adjoint.fmu.me_integration.ColumnUse`);
* the worker's reply carries the counts and the check, checked like every reply.

The columns are read from an FMU instance of the worker's kind (``worker._Instance``) opened in
this process, so that the system and its counters can be looked at directly.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fmi_adjoint.costs import LeastSquaresCost
from fmi_adjoint.fmu import replies, worker
from fmi_adjoint.fmu.archive import open_fmu
from fmi_adjoint.fmu.experiment import FmuExperiment
from fmi_adjoint.fmu.me_integration import ColumnUse, FmuOdeSystem
from fmi_adjoint.fmu.me_sensitivities import run_sensitivities
from fmi_adjoint.fmu.problem import fmu_problem
from fmi_adjoint.integrate.radau import integrate_radau
from fmi_adjoint.toolchain import c_compiler
from captured_cli import cli
from handwritten_fmus import build_fmu
from tolerances import FMU_NOISE_FREE_RECOVERY, GRADIENT_VS_FD

if c_compiler() is None:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: the FMUs cannot be built", allow_module_level=True)

#: The lying FMU's parameters and outputs (fmus/README.md).
OUTPUTS = ("x", "v", "a")
TRUE = {"k": 4.5, "d": 0.25}
#: The parameters of the sensitivities (x_start: its column is zero after initialization, so its
#: sensitivity comes from dx0/dp alone).
PARAMS = {**TRUE, "x_start": 1.2}


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("directional")


@pytest.fixture(scope="module")
def lying(work) -> Path:
    return build_fmu("lying_derivatives_me", work)


@pytest.fixture(scope="module")
def vdp(work) -> Path:
    return build_fmu("van_der_pol_me", work)


class _Opened:
    """An instance of the worker's kind, in this process, started with ``values``."""

    def __init__(self, path: Path, folder: Path, values: dict):
        self.path, self.folder, self.values = path, folder, values

    def __enter__(self):
        self.archive = open_fmu(self.path).__enter__()
        archive = self.archive
        states = [s.valueReference for s, _, _ in archive.continuous_states]
        derivatives = [d.valueReference for _, d, _ in archive.continuous_states]
        self.folder.mkdir(parents=True, exist_ok=True)
        progress = worker.Progress(str(self.folder / "progress"), create=True)
        self.instance = worker._Instance(progress, self.path.name, str(archive.directory), "ModelExchange",
                                         len(states), states, derivatives, archive.number_of_event_indicators)
        self.refs = {name: archive.variables[name].valueReference for name in archive.variables}
        names = list(self.values)
        self.instance.start([self.refs[n] for n in names], [float(self.values[n]) for n in names], 0.0, 5.0)
        return self

    def system(self, outputs=OUTPUTS, partials: bool = False, stops=(0.0, 5.0)) -> FmuOdeSystem:
        n = self.instance.n_states
        return FmuOdeSystem(self.instance, [], np.zeros(1), np.zeros((1, 0)), [self.refs[o] for o in outputs],
                            np.asarray(stops, dtype=float), ["fmu"] * n, partials=partials)

    def __exit__(self, *exc):
        self.instance.close()
        self.archive.__exit__(*exc)


def _differences(function, x: np.ndarray) -> np.ndarray:
    """Central differences of ``function`` by the states, written again here (step 1e-6 (1 + |x|))."""
    columns = []
    for j in range(x.size):
        d = 1e-6 * (1.0 + abs(x[j]))
        e = np.zeros(x.size)
        e[j] = d
        columns.append((function(x + e) - function(x - e)) / (2 * d))
    return np.array(columns).T


def _relative(a, b) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


POINTS = [np.array([1.0, 0.0]), np.array([-0.7, 1.3]), np.array([1.9, -0.4])]


@pytest.mark.parametrize("which", ["lying_derivatives_me (FMI 3, lie=0)", "van_der_pol_me (FMI 2)"])
def test_a_truthful_fmus_columns_are_used_and_equal_central_differences(which, lying, vdp, work):
    path, outputs = (lying, OUTPUTS) if which.startswith("lying") else (vdp, ("x0", "x1"))
    with _Opened(path, work / f"truthful_{path.stem}", {}) as opened:
        system = opened.system(outputs)
        for x in POINTS:
            J = system.jacobian(0.3, x)
            G = system._output_jacobian(0.3, x)
            assert _relative(J, _differences(lambda y: system.rhs(0.3, y), x)) < GRADIENT_VS_FD
            assert _relative(G, _differences(lambda y: system.outputs_at(0.3, y), x)) < GRADIENT_VS_FD
        assert system.sources == ["fmu", "fmu"] and system.output_columns and system.column_check == []
        assert system.calls.state_columns == 2 * len(POINTS) and system.calls.output_columns == 2 * len(POINTS)


#: lie -> (sources after the check, output columns kept, the phrases of the one note)
LIES = {
    1: (["fd", "fmu"], True, ["der(v) by x", "a by x"]),
    3: (["fmu", "fmu"], False, ["a by v"]),
    4: (["fd", "fmu"], True, ["every derivative by x (refused)"]),
}


@pytest.mark.parametrize("lie", sorted(LIES))
def test_a_lying_column_is_detected_named_and_differenced(lie, lying, work):
    sources, kept, named = LIES[lie]
    with _Opened(lying, work / f"lie{lie}", {"lie": lie}) as opened:
        system = opened.system()
        first = system.jacobian(0.0, POINTS[0])  # the run's first point: the check
        assert system.sources == sources and system.output_columns == kept
        assert [phrase.split(" (")[0] if "refused" not in phrase else phrase for phrase in system.column_check] \
            == named
        assert all("off)" in phrase for phrase in system.column_check if "refused" not in phrase)
        for x in POINTS:  # what the run uses afterwards: the true derivatives
            J = first if x is POINTS[0] else system.jacobian(0.0, x)
            G = system._output_jacobian(0.0, x)
            assert _relative(J, _differences(lambda y: system.rhs(0.0, y), x)) < GRADIENT_VS_FD
            assert _relative(G, _differences(lambda y: system.outputs_at(0.0, y), x)) < GRADIENT_VS_FD
        assert len(system.column_check) == len(named)  # checked once, not at every point


def test_the_calls_are_counted_both_ways(lying, work):
    with _Opened(lying, work / "calls", {}) as opened:
        counter = opened.instance.progress
        system = opened.system()
        system.check_columns(0.0, POINTS[0])
        before = counter.count
        system.jacobian(0.0, POINTS[1])
        with_fmu = counter.count - before
        system.sources[:] = ["fd", "fd"]
        before = counter.count
        system.jacobian(0.0, POINTS[1])
        differenced = counter.count - before
        # one Jacobian: the point set once, then per state one call or one central difference
        assert differenced - with_fmu == 2 * (system.calls.fd_state - system.calls.fmu)
        assert system.calls.fd_state == 8.0  # set time, set states, get derivatives at x +- d, then back at x
        before = counter.count - with_fmu - differenced
        report = system.column_report(before)
        assert report == {"fmu_calls": with_fmu + differenced, "fmu_calls_saved": 2 * 7}


def _sensitivities(opened: _Opened) -> tuple[dict, FmuOdeSystem, int]:
    """One recorded run of the lying FMU at PARAMS over 0-2 s and its sensitivities by them, as
    the worker's Model Exchange request forms them: (the reply's part, the system, FMU calls)."""
    instance, refs = opened.instance, opened.refs
    names = list(PARAMS)
    start_refs = [refs[n] for n in [*names, "lie"]]
    start_values = [PARAMS[n] for n in names] + [float(opened.values.get("lie", 0))]
    instance.start(start_refs, start_values, 0.0, 2.0)
    system = opened.system(partials=True, stops=np.linspace(0.0, 2.0, 11))
    x0 = instance.initial_states()
    system.record_outputs(0.0, x0)
    run = integrate_radau(system, x0, 0.0, 2.0, stops=tuple(system.stops), rtol=1e-8, atol=1e-10)
    steps = [1e-6 * PARAMS[n] for n in names]
    replays = []
    for j in range(len(names)):
        for sign in (1.0, -1.0):
            moved = list(start_values)
            moved[j] += sign * steps[j]
            replays.append((start_refs, moved))
    sensitivity = {"replays": replays, "steps": steps, "param_refs": [refs[n] for n in names],
                   "directional": [True] * len(names), "probe_tolerance": 1e-6}
    before = instance.progress.count
    reply = run_sensitivities(instance, system, run, start_refs, start_values, 0.0, 2.0, sensitivity, {})
    return reply, system, instance.progress.count - before


def test_checked_parameter_columns_replace_their_replays(lying, work):
    with _Opened(lying, work / "trusted", {}) as opened:
        first, _, first_calls = _sensitivities(opened)
        assert all(note.startswith("directional derivative (agrees") for note in first["columns"])
        refs = opened.refs
        assert opened.instance.trusted_columns == {refs[name]: True for name in PARAMS}
        second, system, second_calls = _sensitivities(opened)
    assert all("replays saved" in note for note in second["columns"]) and all(second["directional"])
    assert second_calls < first_calls / 2 and system.calls.skipped_replays > 0
    for key in ("dleft", "dright"):
        assert _relative(worker.unpack(second[key]), worker.unpack(first[key])) < GRADIENT_VS_FD


def test_a_lying_parameter_column_is_named_and_replaced(lying, work):
    with _Opened(lying, work / "truth", {}) as opened:
        truth, _, _ = _sensitivities(opened)
    with _Opened(lying, work / "lie2", {"lie": 2}) as opened:
        refs = opened.refs
        for _ in range(2):  # the second time k's replays are saved, d's column is checked again
            reply, system, _ = _sensitivities(opened)
            assert reply["directional"] == [True, False, True] and "differs" in reply["columns"][1]
            assert system.column_check == [f"der(x), der(v) by the parameter d ({reply['columns'][1]})"]
            assert opened.instance.trusted_columns == {refs["k"]: True, refs["d"]: False, refs["x_start"]: True}
            for key in ("dleft", "dright"):
                assert _relative(worker.unpack(reply[key]), worker.unpack(truth[key])) < GRADIENT_VS_FD
        assert "replays saved" in reply["columns"][0] and "replays saved" in reply["columns"][2]


def test_a_problems_runs_give_one_note_and_the_calls_saved():
    use = ColumnUse()
    check = ["der(v) by x (9.1e-02 off)", "a by x (9.1e-02 off)"]
    for _ in range(3):
        use.add({"fmu_calls": 100, "fmu_calls_saved": 30, "column_check": check})
    use.add({"steps": 4})  # Co-Simulation: nothing counted
    assert use.to_json() == {"runs": 3, "fmu_calls": 300, "fmu_calls_saved_by_directional_derivatives": 90,
                             "fmu_calls_without_directional_derivatives": 390}
    note = use.note()
    assert note is not None and note.count("der(v) by x") == 1 and note.count("a by x") == 1
    assert ColumnUse().note() is None and ColumnUse().to_json() == {}


def _run_request(states: int = 2, parameters: int = 0) -> dict:
    request = {"stops": [0.0, 1.0], "outputs": [1], "sources": ["fmu"] * states}
    if parameters:
        request["sensitivity"] = {"steps": [1e-6] * parameters}
    return request


def _reply(**extra) -> tuple:
    return ("value", {"left": worker.pack(np.zeros((2, 1))), "right": worker.pack(np.zeros((2, 1))),
                      "sources": ["fmu", "fd"], "nodes": worker.pack(np.array([0.0, 1.0])), "steps": 1,
                      "rejected": 0, "events": [], "rhs_evaluations": 4, **extra})


def test_the_reply_carries_the_counts_and_the_check_and_they_are_checked():
    _, check = replies.expectation("run_me_adaptive", (_run_request(),), 2)
    good = check(_reply(fmu_calls=10, fmu_calls_saved=-3, column_check=["der(v) by x (1.0e-01 off)"]))
    assert good["fmu_calls_saved"] == -3  # the parameter columns' replay may cost more than they save
    for bad in ({"fmu_calls": -1}, {"fmu_calls": 1.5}, {"fmu_calls_saved": "7"}, {"column_check": "x"},
                {"column_check": ["a", "b", "c", "d", "e"]}):
        with pytest.raises(replies.MalformedReply):
            check(_reply(**bad))


def _identified(lying: Path, data: Path, lie: int, output: Path) -> dict:
    code, _, err = cli(["identify", "--fmu", lying, "--data", data, "--params", "k,d", "--set", f"lie={lie}",
                        "--set", "k=4", "--set", "d=0.3", "--method", "least_squares", "-o", output])
    assert code == 0, err
    return json.loads(output.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_an_identification_through_a_lying_fmu_equals_the_truthful_one(lying, work):
    t = np.linspace(0.0, 5.0, 126)
    with open_fmu(lying) as archive:
        exp = FmuExperiment(LeastSquaresCost(t, np.zeros((t.size, 2)), ("x", "a")), t_end=5.0, step=1e-2)
        problem, _ = fmu_problem(archive, [exp], ["k", "d"], gradient="sensitivity")
        try:
            Y = problem.sampled_outputs(0, np.array([TRUE["k"], TRUE["d"]]))
        finally:
            problem.close()
    data = work / "duffing.csv"
    from fmi_adjoint import write_csv

    write_csv(data, t, {"x": Y[:, 0], "a": Y[:, 1]})
    truthful = _identified(lying, data, 0, work / "lie0.json")
    for lie in (1, 2):
        lied = _identified(lying, data, lie, work / f"lie{lie}.json")
        for name in TRUE:
            assert lied["parameters"][name] == pytest.approx(truthful["parameters"][name], rel=FMU_NOISE_FREE_RECOVERY)
            assert truthful["parameters"][name] == pytest.approx(TRUE[name], rel=FMU_NOISE_FREE_RECOVERY)
        columns = lied["gradient_method"]["columns"]
        if lie == 1:
            assert columns["state 0"] == "finite differences of the right-hand side"
        else:
            assert "differs" in columns["d"] and columns["k"].startswith("directional derivative")
    assert truthful["gradient_method"]["columns"]["state 0"] == "directional derivative"
