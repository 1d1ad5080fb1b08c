"""Issue 29 (code health): native runs return their outputs from C, one place validates
engine inputs, and parameter values take one route.

* The C engine computes the outputs of every step of a run (``fa_outputs`` in ``fa_run``) and
  hands them back with the states, so that its simulate / cost / gradient path never loads
  the numpy functions of the model (they are loaded lazily, on first call:
  ``compile_model(..., lazy=True)``).  The outputs equal the numpy ones on the same states to
  round-off (the same expressions printed twice; measured: bit for bit on 13 of the 14 looped
  examples, 2.2e-14 relative on heavy_top).
* The engine front door (``AbstractEngine``, ``prepare_run``) is the only place that checks
  what a caller gives; it makes a frozen :class:`~fmi_adjoint.integrate.inputs.RunInputs`
  that :class:`~fmi_adjoint.native.NativeLibrary` and the C driver trust.  Bad input gives
  one ModelError there, before any C call.
* Parameter values (``--set``) are one value, :class:`~fmi_adjoint.integrate.inputs.ParameterValues`,
  resolved into ``p`` at the front door; an identification starts from it.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap

import numpy as np
import pytest

from fmi_adjoint import HHT, LeastSquaresCost, ModelError, NativeEngine, PythonEngine, load_model
from fmi_adjoint import compiled as compiled_module
from fmi_adjoint.examples import example_path
from fmi_adjoint.identify.data_costs import DataFile
from fmi_adjoint.identify.spec import ExperimentSpec, ProblemSpec
from fmi_adjoint.integrate.inputs import ParameterValues, RunInputs
from fmi_adjoint.model_file import ModelSource
from fmi_adjoint.native import NativeLibrary
from bundled import looped_examples
from tolerances import EXACT


def _short_run(engine):
    s = engine.compiled.model.simulation
    return engine.simulate(t_end=min(round(s.t_end / s.step), 2000) * s.step)


@pytest.mark.parametrize("name", looped_examples())
def test_native_outputs_come_from_c_and_equal_the_numpy_outputs(name, example_engine):
    engine = example_engine(name)
    traj = _short_run(engine)
    assert traj.stored_outputs is not None and traj.stored_outputs.shape == (traj.n_steps + 1, engine.compiled.n_y)
    numpy_outputs = engine.compiled.outputs(traj.q, traj.v, traj.a, traj.lam, traj.t, traj.p)[0]
    scale = np.maximum(np.max(np.abs(numpy_outputs), axis=0), np.finfo(float).tiny)
    assert np.max(np.abs(traj.outputs() - numpy_outputs) / scale) <= EXACT
    assert traj.outputs() is traj.stored_outputs


def test_the_native_cost_path_loads_no_numpy_functions(monkeypatch):
    """Simulate, cost, adjoint and sensitivity gradients of a freshly built (warm) native
    engine: the lazy numpy functions are never loaded.  On the old code ``traj.outputs()``
    loaded them for every cost."""
    model = load_model(example_path("engine_mount"))
    NativeEngine.build(model)  # warm the cache: the engine below is a warm start
    engine = NativeEngine.build(model)
    loaded: list[str] = []

    def refuse(self, name):
        loaded.append(name)
        raise AssertionError(f"the numpy function {name} was loaded on the native engine's cost path")

    monkeypatch.setattr(compiled_module._FunctionLoader, "function", refuse)
    traj = engine.simulate(t_end=0.2)
    channel = engine.compiled.output_names[0]
    cost = LeastSquaresCost(traj.t, np.zeros(traj.t.size), (channel,))
    adjoint = engine.adjoint_gradient(traj, cost)
    forward = engine.sensitivity_gradient(traj, cost)
    assert loaded == [] and np.isfinite(adjoint.J) and adjoint.J == forward.J
    monkeypatch.undo()
    # The Python engine computes the outputs from the states, with the numpy functions.
    python = PythonEngine(engine.compiled).simulate(t_end=0.2)
    assert python.stored_outputs is None and python.outputs().shape == traj.outputs().shape


class _Tripwire:
    """A library that fails the test if the engine calls it: bad input must be refused first."""

    def __getattr__(self, name):
        raise AssertionError(f"NativeLibrary.{name} was called with unchecked input")


@pytest.fixture(scope="module")
def guarded(example_engine):
    """The slider-crank engine with a tripwire for a library, a run of it and a run of sdof."""
    engine = example_engine("slider_crank")
    other = example_engine("sdof").simulate(t_end=0.05)
    return NativeEngine(engine.compiled, _Tripwire()), engine.simulate(t_end=0.05), other


def _cost(traj):
    return LeastSquaresCost(traj.t, np.zeros(traj.t.size), (traj.model.output_names[0],))


BAD_CALLS = {
    "p of the wrong shape": (lambda e, t, o: e.simulate(np.ones(e.compiled.n_p + 1), t_end=0.05), "needs"),
    "a NaN parameter": (lambda e, t, o: e.simulate(np.where(np.arange(e.compiled.n_p) == 0, np.nan, 1.0),
                                                   t_end=0.05), "not finite"),
    "a solver name": (lambda e, t, o: e.simulate(solver="hht", t_end=0.05), "not an integration scheme"),
    "a bad time span": (lambda e, t, o: e.simulate(t_end=-1.0), "t_end"),
    "repeated parameter indices": (lambda e, t, o: e.state_sensitivities(t, np.array([0, 0])), "distinct"),
    "an output channel out of range": (lambda e, t, o: e.output_sensitivities(t, t.t[:3], np.array([e.compiled.n_y])),
                                       "channels"),
    "a trajectory of another model": (lambda e, t, o: e.adjoint_gradient(o, _cost(o)), "not of this"),
}


@pytest.mark.parametrize("case", BAD_CALLS)
def test_bad_input_is_refused_once_at_the_front_door(case, guarded):
    """One ModelError naming the problem, before the library (a tripwire here) is called.
    On the old code an output channel out of range reached the C sweep and then numpy's
    indexing (IndexError)."""
    engine, traj, other = guarded
    call, words = BAD_CALLS[case]
    with pytest.raises(ModelError, match=words):
        call(engine, traj, other)


def test_a_trajectory_with_inconsistent_shapes_is_refused(example_engine):
    """The sweeps (and the C code under them) trust a trajectory's shapes: its constructor
    checks them.  The old Trajectory accepted any arrays."""
    traj = example_engine("slider_crank").simulate(t_end=0.05)
    with pytest.raises(ModelError, match=r"q \(\d+, \d+\) \(needs"):
        dataclasses.replace(traj, q=traj.q[:-1])
    with pytest.raises(ModelError, match="init.z"):
        dataclasses.replace(traj, init=dataclasses.replace(traj.init, z=traj.init.z[:-1]))


@pytest.mark.parametrize("grid", [[0.0], [0.0, 0.0], [0.0, np.inf], [[0.0, 1.0]], [0.0, 0.2, 0.1]])
def test_run_inputs_refuse_a_bad_grid(grid):
    with pytest.raises(ModelError, match="strictly increasing finite"):
        RunInputs.checked(np.ones(1), HHT(), grid, parameter_names=("k",), model_name="m")


def test_run_inputs_are_frozen_copies():
    p, grid = np.ones(2), np.linspace(0.0, 1.0, 5)
    run = RunInputs.checked(p, HHT(), grid, parameter_names=("a", "b"), model_name="m")
    p[0] = 7.0
    assert run.p[0] == 1.0 and not run.p.flags.writeable and not run.grid.flags.writeable
    assert run.p.flags.c_contiguous and run.n_steps == 4


#: The methods the engine calls with checked values: they must not check again.
TRUSTED = ("forward", "recompute", "adjoint_segment", "adjoint_initial", "sensitivities_segment")


@pytest.mark.parametrize("method", TRUSTED)
def test_native_library_trusts_the_checked_values(method):
    """No raise and no ``_check`` call in the library methods of the engine path (the old
    library re-checked every shape and the parameter indices there)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(getattr(NativeLibrary, method))))
    raises = [node for node in ast.walk(tree) if isinstance(node, ast.Raise)]
    checks = [node.func.attr for node in ast.walk(tree) if isinstance(node, ast.Call)
              and isinstance(node.func, ast.Attribute) and node.func.attr.startswith("_check")]
    assert not raises and not checks


# -- one route for parameter values (part 3) ---------------------------------------------------
def test_parameter_values_are_one_checked_value(example_engine):
    compiled = example_engine("sdof").compiled
    values = ParameterValues.of({"c": 2.0}).updated({"d": 0.3})
    assert values.items == (("c", 2.0), ("d", 0.3)) and hash(values) == hash(ParameterValues((("c", 2), ("d", 0.3))))
    p = values.vector(compiled)
    assert p[compiled.parameter_index("c")] == 2.0 and p[compiled.parameter_index("d")] == 0.3
    assert values.updated({"c": 3.0}).as_dict() == {"c": 3.0, "d": 0.3}
    with pytest.raises(ModelError, match="given twice"):
        ParameterValues((("c", 1.0), ("c", 2.0)))
    with pytest.raises(ModelError, match="no parameter 'nope'"):
        ParameterValues.of({"nope": 1.0}).vector(compiled)


@pytest.fixture(scope="module")
def sdof_data(tmp_path_factory, example_engine):
    """A measurement of sdof at c = 2, d = 0.3 (CSV), as the command line's tests make it."""
    engine = example_engine("sdof")
    traj = engine.simulate(ParameterValues.of({"c": 2.0, "d": 0.3}).vector(engine.compiled), t_end=2.0)
    path = tmp_path_factory.mktemp("health29") / "measured.csv"
    x = traj.outputs()[:, engine.compiled.output_index("x")]
    np.savetxt(path, np.column_stack([traj.t, x])[::10], delimiter=",", header="time,x", comments="")
    return str(path)


def test_the_problem_values_reach_every_experiment_and_give_the_start(sdof_data):
    """``ProblemSpec.values`` (``--set``) is every experiment's values under its own, and the
    start of the identified parameters, whatever experiment 0 sets (on the old code the start
    was read back out of experiment 0, and a spec had no values: TypeError)."""
    source = ModelSource.from_path(example_path("sdof"))
    data = DataFile.from_path(sdof_data)
    experiments = [ExperimentSpec(data, (("c", 5.0),), "first"), ExperimentSpec(data, (("d", 0.5),), "second")]
    spec = ProblemSpec.create(source, experiments, ("c",), values={"c": 2.0, "d": 0.3}, engine="native")
    _, problem, _ = spec.resolved()
    assert problem.start.tolist() == [2.0]
    assert [dict(e.values) for e in problem.experiments] == [{"c": 5.0, "d": 0.3}, {"c": 2.0, "d": 0.5}]
    without = ProblemSpec.create(source, experiments, ("c",), engine="native")
    assert spec.digest() != without.digest() and spec.content_digest() != without.content_digest()
