"""Warm starts without symbolic work (issue 24, part 6; :mod:`fmi_adjoint.warm`).

* a warm start of a multibody system or a model file lowers/parses nothing and creates no
  sympy object, and its engine gives the cold engine's results;
* the ``warm`` key changes with every component, parameter default, plugin and fmi-adjoint's
  code (and the model file's text and tables), so no change is ever served stale;
* the deferred model behaves as the lowered one once something needs it.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
from sympy.core.basic import Basic

from fmi_adjoint import compiled, data, mbs, model_file, warm
from fmi_adjoint.cache import BuildCache, compiler_fingerprint
from fmi_adjoint.compiled import compile_model, model_key
from fmi_adjoint.errors import ModelError
from fmi_adjoint.engines import NativeEngine, PythonEngine
from fmi_adjoint.examples.chains import chain_toml
from fmi_adjoint.forces import registry as force_registry
from fmi_adjoint.model import Model, Parameter
from fmi_adjoint.model_file import ModelSource
from fmi_adjoint.toolchain import c_compiler
from fmi_adjoint.warm import DeferredModel, model_file_key, prepare_model, system_key

from tolerances import EXACT

needs_cc = pytest.mark.skipif(c_compiler() is None, reason="no C compiler")


def _system(stiffness: str = "k", mass: float = 1.0, x1: float = 1.0) -> mbs.MultibodySystem:
    """Two point masses on springs (a 2x1x1 lattice): ground -- a -- b."""
    law = {"type": "linear_spring_damper", "stiffness": stiffness, "damping": "d", "free_length": 1.0}
    return mbs.MultibodySystem(
        name="pair",
        parameters=(Parameter("m", mass, "kg"), Parameter("k", 100.0, "N/m"), Parameter("d", 0.5, "N*s/m"),
                    Parameter("g", 9.81, "m/s^2")),
        gravity=(0, "-g", 0),
        bodies=(mbs.PointMass("a", mass="m", position=(x1, 0.0, 0.0)),
                mbs.PointMass("b", mass="m", position=(2.0, 0.0, 0.0))),
        markers=(mbs.Marker("g0", "ground"), mbs.Marker("pa", "a"), mbs.Marker("pb", "b")),
        forces=(mbs.SpringDamper("s0", "g0", "pa", law), mbs.SpringDamper("s1", "pa", "pb", law)),
        sensors=(mbs.MarkerPosition("yb", "pb"),),
    )


class _Counts:
    """Calls of the symbolic front ends and sympy objects created, while installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.lowered = self.parsed = self.created = 0
        to_model, parse_model = mbs.MultibodySystem.to_model, model_file.parse_model
        new = Basic.__new__

        def lowering(system):
            self.lowered += 1
            return to_model(system)

        def parsing(*args, **kwargs):
            self.parsed += 1
            return parse_model(*args, **kwargs)

        def creating(cls, *args, **kwargs):
            self.created += 1
            return new(cls, *args, **kwargs)

        monkeypatch.setattr(mbs.MultibodySystem, "to_model", lowering)
        monkeypatch.setattr(model_file, "parse_model", parsing)
        monkeypatch.setattr(Basic, "__new__", creating)


# -- a warm start does no symbolic work and gives the cold start's results ---------------------
@needs_cc
def test_warm_system_start_lowers_nothing_and_equals_the_cold_engine(monkeypatch):
    cache = BuildCache.default()
    system = _system()
    cold_model = system.to_model()
    cold = NativeEngine.build(cold_model, cache=cache)
    prepare_model(system, cache=cache)  # fills the warm entry (the engine entries are there)

    counts = _Counts(monkeypatch)
    model = prepare_model(_system(), cache=cache)  # an equal system, another object
    engine = NativeEngine.build(model, cache=cache)
    trajectory = engine.simulate(t_end=0.05)
    outputs = trajectory.outputs()
    assert (counts.lowered, counts.parsed, counts.created) == (0, 0, 0)
    assert isinstance(model, DeferredModel) and not model.lowered
    monkeypatch.undo()

    reference = cold.simulate(t_end=0.05)
    assert engine.compiled.parameter_names == cold.compiled.parameter_names
    assert engine.compiled.coordinate_names == cold.compiled.coordinate_names
    assert engine.compiled.output_names == cold.compiled.output_names
    np.testing.assert_array_equal(engine.compiled.defaults, cold.compiled.defaults)
    scale = np.abs(reference.q).max()
    np.testing.assert_allclose(trajectory.q, reference.q, rtol=0, atol=EXACT * scale)
    np.testing.assert_allclose(outputs, reference.outputs(), rtol=0, atol=EXACT * np.abs(outputs).max())


@needs_cc
def test_warm_model_file_start_parses_nothing(monkeypatch, tmp_path):
    cache = BuildCache.default()
    path = tmp_path / "chain.toml"
    path.write_text(chain_toml(3, "linear"))
    cold = NativeEngine.build(prepare_model(path, cache=cache), cache=cache)

    counts = _Counts(monkeypatch)
    model = prepare_model(path, cache=cache)
    engine = NativeEngine.build(model.with_values({"k": 2e4}), cache=cache)
    trajectory = engine.simulate(t_end=0.01)
    assert (counts.lowered, counts.parsed, counts.created) == (0, 0, 0)
    monkeypatch.undo()

    reference = cold.simulate(cold.compiled.parameter_vector({"k": 2e4}), t_end=0.01)
    np.testing.assert_allclose(trajectory.q, reference.q, rtol=0, atol=EXACT * np.abs(reference.q).max())


def test_a_model_source_starts_warm_and_misses_on_a_changed_text(monkeypatch, tmp_path):
    cache = BuildCache(tmp_path / "cache")
    path = tmp_path / "chain.toml"
    path.write_text(chain_toml(2, "linear"))
    source = ModelSource.from_path(path)
    cold = prepare_model(source, cache=cache)
    counts = _Counts(monkeypatch)
    again = prepare_model(pickle.loads(pickle.dumps(source)), cache=cache)  # as a worker receives it
    assert isinstance(again, DeferredModel) and counts.parsed == 0
    assert model_key(again) == model_key(cold)
    monkeypatch.undo()
    changed = dataclasses.replace(source, text=source.text.replace("value = 1.0e4", "value = 2.0e4"), _parsed=None)
    assert changed.text != source.text
    assert type(prepare_model(changed, cache=cache)) is Model


def test_the_python_engine_runs_a_deferred_model_and_lowers_it_once_on_need(monkeypatch, tmp_path):
    cache = BuildCache(tmp_path / "cache")
    system = _system()
    cold = prepare_model(system, cache=cache)
    assert type(cold) is Model
    b = PythonEngine(compile_model(cold, cache=cache)).simulate(t_end=0.02)
    lowerings = []
    to_model = mbs.MultibodySystem.to_model
    monkeypatch.setattr(mbs.MultibodySystem, "to_model", lambda s: lowerings.append(s) or to_model(s))
    deferred = prepare_model(system, cache=cache)
    assert isinstance(deferred, DeferredModel) and not deferred.lowered
    assert model_key(deferred) == model_key(cold)
    assert deferred.all_parameters == cold.all_parameters
    python = PythonEngine.build(deferred, cache=cache)
    assert not lowerings  # the numpy functions come from the cache
    a = python.simulate(t_end=0.02)
    assert not lowerings and not deferred.lowered  # a regular run needs no lowering either
    np.testing.assert_allclose(a.q, b.q, rtol=0, atol=EXACT * np.abs(b.q).max())
    assert deferred.all_coordinates == cold.all_coordinates and deferred.mass_matrix == cold.mass_matrix
    assert deferred.lowered and len(lowerings) == 1  # on first need, once


# -- the deferred model is the lowered one where it matters --------------------------------------
def test_a_deferred_model_lowers_on_first_need_and_matches(tmp_path):
    cache = BuildCache(tmp_path / "cache")
    cold = prepare_model(_system(), cache=cache)
    deferred = prepare_model(_system(), cache=cache)
    assert isinstance(deferred, DeferredModel)
    changed = deferred.with_values({"k": 250.0})
    assert isinstance(changed, DeferredModel) and not changed.lowered
    assert changed.parameter("k").value == 250.0 and deferred.parameter("k").value == 100.0
    assert model_key(changed) == model_key(cold)
    assert deferred.forces == cold.forces and deferred.lowered  # lowered on first need
    assert deferred.all_coordinates == cold.all_coordinates
    copy = dataclasses.replace(changed, description="copied")  # an ordinary, lowered model
    assert copy.warm_facts is None and copy.parameter("k").value == 250.0
    assert model_key(copy) == model_key(cold)
    assert changed.constraints == cold.constraints


# -- every kind of change misses -------------------------------------------------------------------
def test_the_warm_key_changes_with_every_component_and_default():
    base = system_key(_system())
    assert base is not None and system_key(_system()) == base
    changed = {
        "a force law's parameter": system_key(_system(stiffness="2*k")),
        "a parameter default": system_key(_system(mass=2.0)),
        "a body's position": system_key(_system(x1=1.5)),
        "a component added": system_key(dataclasses.replace(
            _system(), markers=_system().markers + (mbs.Marker("extra", "b"),))),
    }
    assert all(key not in (None, base) for key in changed.values()), changed
    assert len(set(changed.values())) == len(changed)


def test_a_changed_system_misses_the_cache(tmp_path):
    cache = BuildCache(tmp_path / "cache")
    prepare_model(_system(), cache=cache)
    assert isinstance(prepare_model(_system(), cache=cache), DeferredModel)
    other = prepare_model(_system(mass=3.0), cache=cache)
    assert type(other) is Model and other.parameter("m").value == 3.0


def test_the_warm_key_changes_with_the_installed_plugins(monkeypatch):
    base = system_key(_system())

    class Plugin:
        name, value, dist = "extra_spring", "some_plugin.elements:ExtraSpring", None

        def load(self):
            raise ImportError("not installed")

    installed = list(metadata.entry_points(group=force_registry.GROUP))
    monkeypatch.setattr(force_registry, "_DEFAULT", force_registry.Registry([*installed, Plugin()]))
    assert system_key(_system()) not in (None, base)
    monkeypatch.setattr(force_registry, "_DEFAULT", force_registry.Registry(installed))
    assert system_key(_system()) == base


def test_the_warm_key_changes_with_a_plugins_code(monkeypatch, tmp_path):
    package = tmp_path / "site" / "fakeplugin"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from .impl import ExtraSpring\n")
    (package / "impl.py").write_text("class ExtraSpring:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))

    class Plugin:
        name, value, dist = "extra_spring", "fakeplugin:ExtraSpring", None

    installed = list(metadata.entry_points(group=force_registry.GROUP))
    monkeypatch.setattr(force_registry, "_DEFAULT", force_registry.Registry([*installed, Plugin()]))
    before = system_key(_system())
    (package / "impl.py").write_text("class ExtraSpring:\n    stiffer = True\n")  # not the entry module
    assert system_key(_system()) not in (None, before)


def test_the_warm_key_changes_with_fmi_adjoints_sources(monkeypatch, tmp_path):
    path = tmp_path / "chain.toml"
    path.write_text(chain_toml(2, "linear"))
    before = system_key(_system()), model_file_key(path)
    monkeypatch.setattr(warm, "source_fingerprint", lambda: "edited")
    after = system_key(_system()), model_file_key(path)
    assert before[0] != after[0] and before[1] != after[1]


def test_the_model_file_key_changes_with_its_text_tables_and_options(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "load.csv").write_text("time,F\n0,0\n1,1\n")
    path = folder / "model.toml"
    path.write_text(chain_toml(2, "linear"))
    base = model_file_key(path)
    assert model_file_key(path, allow_external_tables=True) != base
    path.write_text(chain_toml(2, "linear") + '\n[[forces]]\ntype = "table_load"\nname = "L"\n'
                    'coordinate = "x1"\nfile = "load.csv"\ncolumn = "F"\n')
    with_table = model_file_key(path)
    (folder / "load.csv").write_text("time,F\n0,0\n1,2\n")
    assert len({base, with_table, model_file_key(path)}) == 3


def test_a_system_without_a_canonical_description_is_lowered_every_time(tmp_path):
    class Opaque:  # a force component whose state its repr would not show
        name = "opaque"

        def lower(self, ctx):
            pass

    system = dataclasses.replace(_system(), forces=_system().forces + (Opaque(),))
    assert system_key(system) is None
    cache = BuildCache(tmp_path / "cache")
    assert type(prepare_model(system, cache=cache)) is Model
    assert type(prepare_model(system, cache=cache)) is Model
    assert not (tmp_path / "cache" / "warm").exists()


def test_prepare_model_refuses_other_sources():
    with pytest.raises(ModelError, match="give a MultibodySystem"):
        prepare_model(42)
    model = _system().to_model()
    assert prepare_model(model) is model


def test_a_refused_model_file_stores_nothing(tmp_path):
    cache = BuildCache(tmp_path / "cache")
    path = tmp_path / "bad.toml"
    path.write_text("name = 'bad'\n")
    for _ in range(2):
        with pytest.raises(ModelError):
            prepare_model(path, cache=cache)
    assert not any((tmp_path / "cache" / "warm").glob("*/*/facts.json"))


def test_facts_round_trip_through_json():
    facts = warm.ModelFacts.of(_system().to_model())
    assert warm.ModelFacts.from_json(facts.to_json()) == facts
    with pytest.raises(ValueError, match="format"):
        warm.ModelFacts.from_json({**facts.to_json(), "format": 0})


def test_description_text_is_exact_for_floats_and_sorted_for_mappings():
    text = warm.description_text
    assert text(0.1) != text(0.1 + 2 ** -56)  # the next float
    assert text({"a": 1, "b": 2}) == text({"b": 2, "a": 1})
    assert text(1) != text(1.0) and text(True) != text(1)
    assert text(object()) is None


def test_description_text_of_a_sparse_matrix_is_its_entries_in_any_layout():
    """A flexible body's FE matrices (scipy sparse) have a text, so a system built in Python with
    one starts warm: the same entries in another layout give the same text, another entry not."""
    import scipy.sparse

    text = warm.description_text
    dense = np.array([[2.0, 0.0, 1.0], [0.0, 3.0, 0.0], [1.0, 0.0, 4.0]])
    csr = scipy.sparse.csr_matrix(dense)
    rows, cols = np.nonzero(dense)
    unsorted = scipy.sparse.csr_matrix((dense[rows, cols][::-1], (rows[::-1], cols[::-1])), shape=(3, 3))
    assert text(csr) is not None
    assert text(csr) == text(unsorted) == text(scipy.sparse.csc_matrix(dense).tocsr())
    wide = scipy.sparse.csr_matrix((csr.data, csr.indices.astype(np.int64), csr.indptr.astype(np.int64)), shape=(3, 3))
    assert text(wide) == text(csr)  # the index arrays' integer type is not part of the matrix
    changed = dense.copy()
    changed[2, 2] = np.nextafter(4.0, 5.0)
    assert text(csr) != text(scipy.sparse.csr_matrix(changed))
    assert text(csr) != text(scipy.sparse.csr_matrix(dense.T[::-1]))


def test_a_deferred_model_pickles_as_the_lowered_model(tmp_path):
    cache = BuildCache(tmp_path / "cache")
    cold = prepare_model(_system(), cache=cache)
    deferred = prepare_model(_system(), cache=cache).with_values({"k": 300.0})
    copy = pickle.loads(pickle.dumps(deferred))
    assert type(copy) is Model and copy == cold.with_values({"k": 300.0})
    assert model_key(copy) == model_key(cold)


@pytest.mark.skipif(os.name != "posix", reason="the fake compiler is a shell script")
def test_the_compiler_is_asked_once_per_process_while_its_file_is_unchanged(tmp_path):
    log = tmp_path / "runs"
    compiler = tmp_path / "cc"
    compiler.write_text(f"#!/bin/sh\necho run >> '{log}'\necho 'fakecc 1.0'\n")
    compiler.chmod(0o755)
    os.utime(compiler, ns=(10**18, 10**18))  # settled long ago (not "racy")
    first = compiler_fingerprint(str(compiler), ["-O2"])
    assert compiler_fingerprint(str(compiler), ["-O2"]) == first
    assert log.read_text().count("run") == 1  # the warm start runs no process
    compiler.write_text(f"#!/bin/sh\necho run >> '{log}'\necho 'fakecc 1.1'\n")
    os.utime(compiler, ns=(10**18 + 10**9, 10**18 + 10**9))  # replaced: another time
    assert compiler_fingerprint(str(compiler), ["-O2"]) != first
    assert log.read_text().count("run") == 2


def test_a_model_file_edited_after_a_warm_start_is_refused_when_lowered(tmp_path):
    cache = BuildCache(tmp_path / "cache")
    path = tmp_path / "chain.toml"
    path.write_text(chain_toml(2, "linear"))
    prepare_model(path, cache=cache)
    deferred = prepare_model(path, cache=cache)
    path.write_text(chain_toml(3, "linear"))
    with pytest.raises(ModelError, match="changed after prepare_model"):
        _ = deferred.forces


def test_a_table_outside_the_model_folder_is_not_read_for_a_key(monkeypatch, tmp_path):
    outside = tmp_path / "secret.csv"
    outside.write_text("time,F\n0,0\n1,1\n")
    folder = tmp_path / "m"
    folder.mkdir()
    path = folder / "model.toml"
    path.write_text(chain_toml(2, "linear") + '\n[[forces]]\ntype = "table_load"\nname = "L"\n'
                    'coordinate = "x1"\nfile = "../secret.csv"\ncolumn = "F"\n')
    read = []
    original = data.read_csv_bytes
    monkeypatch.setattr(data, "read_csv_bytes", lambda file: read.append(Path(file).name) or original(file))
    assert model_file_key(path) is None
    with pytest.raises(ModelError, match="outside the model file's folder"):
        prepare_model(path, cache=BuildCache(tmp_path / "cache"))
    assert read == []
    assert model_file_key(path, allow_external_tables=True) is not None and read == ["secret.csv"]


def test_a_lazy_compiled_model_loads_its_functions_once_on_first_call(monkeypatch, tmp_path):
    cache = BuildCache(tmp_path / "cache")
    model = _system().to_model()
    eager = compile_model(model, cache=cache)
    loads = []
    original = compiled._numpy_functions
    monkeypatch.setattr(compiled, "_numpy_functions", lambda *args: loads.append(1) or original(*args))
    lazy = compile_model(model, cache=cache, lazy=True)
    assert not loads
    assert (lazy.n, lazy.m, lazy.n_y, lazy.constraint_names, lazy.output_names) == \
        (eager.n, eager.m, eager.n_y, eager.constraint_names, eager.output_names)
    q = np.linspace(0.5, 1.5, eager.n)
    args = (q, 0.1 * q, 0.0 * q, np.zeros(eager.m), 0.0, eager.defaults)
    for _ in range(2):
        for got, expected in zip(lazy.outputs(*args), eager.outputs(*args)):
            np.testing.assert_array_equal(got, expected)
    assert len(loads) == 1


def test_a_numeric_element_lowers_the_deferred_model_for_its_python_code(monkeypatch, tmp_path):
    from test_numeric_element import NumericCubicSpring

    from fmi_adjoint.forces import PolynomialSpringDamper
    from fmi_adjoint.model import Coordinate, Output

    system = mbs.MultibodySystem(
        name="numeric", parameters=(Parameter("m", 1.5), Parameter("k1", 400.0), Parameter("k3", 2e5),
                                    Parameter("d", 1.5)),
        coordinates=(Coordinate("x", mass="m", initial_position=0.02), Coordinate("base", mass=5.0)),
        forces=(NumericCubicSpring("spring", coordinates=("x", "base"), k1="k1", k3="k3", d="d"),
                PolynomialSpringDamper("mount", coordinates=("base",), k1=1e4, k2=0, k3=0, d1=20.0, d2=0, d3=0,
                                       free_length=0)),
        outputs=(Output("x", "x"),))
    cache = BuildCache(tmp_path / "cache")
    reference = PythonEngine.build(prepare_model(system, cache=cache), cache=cache).simulate(t_end=0.05)
    deferred = prepare_model(system, cache=cache)
    assert isinstance(deferred, DeferredModel) and deferred.warm_facts.numeric
    trajectory = PythonEngine.build(deferred, cache=cache).simulate(t_end=0.05)
    assert deferred.lowered  # the element's Python callables travel on the lowered model
    np.testing.assert_allclose(trajectory.q, reference.q, rtol=0, atol=EXACT * np.abs(reference.q).max())
