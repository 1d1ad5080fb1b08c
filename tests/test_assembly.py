"""The component assembly (issue 23, item 1): a model's numpy functions assembled from per-type
kernels (:mod:`fmi_adjoint.assembly`) equal the whole-system ones.

* every bundled example that partitions: each first-order function (batched and not) and the
  second-order functions of input design, against the whole-system derivation
  (``compile_model(assemble(model))``: a SymbolicModel bypasses the assembly), at perturbed
  states of a short whole-system run;
* a spatial revolute chain: its types do not grow with its length, and its functions equal the
  whole system's;
* numbers are data: two bushings at different marker positions are one type;
* models the local form cannot carry (Maxwell nodes, time tables, numeric elements) are derived
  whole, with the reason;
* the build cache: a second model of known types derives nothing new; damaged entries are
  rebuilt (checksum) or refused naming 'fmi-adjoint cache clear' (consistent but unreadable).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from bundled import looped_examples
from fmi_adjoint.examples.chains import spatial_chain
from fmi_adjoint import mbs
from fmi_adjoint.assembly import AssembledModel, Partition, WholeSystem, assembly_payload, partition
from fmi_adjoint.assembly.kernels import type_kernels
from fmi_adjoint.cache import BuildCache
from fmi_adjoint.codegen import load_function
from fmi_adjoint.compiled import CompiledModel, Derivation, compile_model, numpy_sources, second_order_table
from fmi_adjoint.errors import ModelError
from fmi_adjoint.examples import example_path
from fmi_adjoint.examples.chains import chain_model
from fmi_adjoint.forces.library import LinearSpringDamper, MaxwellElement, TableLoad
from fmi_adjoint.integrate.hht import simulate
from fmi_adjoint.model import Coordinate, MassEntry, Model, Output, Parameter, SimulationSettings, assemble
from fmi_adjoint.model_file import load_model
from tolerances import EXACT

#: Bundled examples the local form cannot carry, and the coordinate the reason names (their
#: Maxwell branches' nodes are massless: :func:`fmi_adjoint.assembly.partition.partition`).
WHOLE_EXAMPLES = {"engine_tvd": "tvd_node1"}

#: Models whose two builds (kernels and whole system, cold) take more than ~3 s of CPU.
SLOW_EXAMPLES = {"engine_on_mounts", "heavy_top"}
SLOW_SECOND_ORDER = {"two_mounts"}

#: The first-order functions of a CompiledModel (``step_*``: one state, no batch axis).
BATCHED = ("residual_terms", "jacobian_terms", "parameter_terms", "outputs", "output_jacobians", "init_residual",
           "init_jacobians", "init_guess")
SCALAR = ("step_residual", "step_newton")

#: Models whose second-order functions are compared: the examples whose whole-system
#: second-order derivation is quick (it takes 6-8 s on heavy_top, engine_tvd, beam_pod), and the
#: spatial block on two bushings of test 3 (Euler parameters, data slots) in place of heavy_top.
SECOND_ORDER_MODELS = ("sdof", "two_mass", "cart_pendulum", "slider_crank", "strut", "engine_mount",
                       "slider_crank_bodies", "triple_pendulum", "two_mounts")


def _examples(names, slow=frozenset(SLOW_EXAMPLES)) -> list:
    return [pytest.param(name, marks=pytest.mark.slow) if name in slow else name for name in names]


# --------------------------------------------------------------------------- helpers

class Pair:
    """A model's assembled functions and its whole-system ones, and states to compare them at."""

    def __init__(self, model: Model, cache: BuildCache):
        self.model = model
        self.part = partition(model)
        assert isinstance(self.part, Partition), f"{model.name}: derived whole ({self.part})"
        self.cache = cache
        self.assembled = AssembledModel(assembly_payload(self.part, cache))
        self.whole: CompiledModel = compile_model(assemble(model))
        self.states = _states(self.whole, np.random.default_rng(23))

    def args(self, name: str, batch: tuple[int, ...]) -> tuple:
        """The arguments of function ``name`` with batch shape ``batch`` (``()``: none)."""
        s = self.states
        k = slice(None) if batch else 0
        q, v, a, lam, mu, nu = (s[g][k] for g in ("q", "v", "a", "lam", "mu", "nu"))
        t = s["t"] if batch else float(s["t"][0])
        p = s["p"]
        if name == "init_guess":
            return (t, p)
        if name.startswith("init"):
            return (q, mu, v, nu, a, lam, t, p)
        return (q, v, a, lam, t, p)


def _states(whole: CompiledModel, rng: np.random.Generator, count: int = 3) -> dict[str, np.ndarray]:
    """``count`` states of a short whole-system run, perturbed so that no term vanishes by
    accident (a run from rest has v = 0), and parameters near the defaults.  The perturbation is
    small (1 %) so that positions stay valid (Euler parameters nearly normalized, springs away
    from zero length)."""
    step = whole.model.simulation.step
    traj = simulate(whole, t_end=(count + 1) * step)
    rows = np.arange(1, count + 1)

    def near(values: np.ndarray, size: float) -> np.ndarray:
        return values + size * (1.0 + np.abs(values)) * rng.normal(size=values.shape)

    m = whole.m
    return {"q": near(traj.q[rows], 1e-2), "v": near(traj.v[rows], 0.5), "a": near(traj.a[rows], 0.5),
            "lam": near(traj.lam[rows], 0.5), "mu": rng.normal(size=(count, m)), "nu": rng.normal(size=(count, m)),
            "t": traj.t[rows] + step * rng.uniform(size=count),
            "p": whole.defaults * (1.0 + 0.05 * rng.normal(size=whole.n_p))}


def assert_same(what: str, got: tuple, want: tuple) -> None:
    """Every output of ``got`` equals ``want`` to round-off relative to its largest entry, and
    neither holds a NaN or an infinity."""
    assert len(got) == len(want), f"{what}: {len(got)} outputs, the whole system has {len(want)}"
    for k, (x, y) in enumerate(zip(got, want)):
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        assert x.shape == y.shape, f"{what}[{k}]: shape {x.shape}, the whole system's {y.shape}"
        assert np.all(np.isfinite(y)), f"{what}[{k}]: the whole system gives non-finite values"
        assert np.all(np.isfinite(x)), f"{what}[{k}]: the assembly gives non-finite values"
        scale = max(np.abs(x).max(initial=0.0), np.abs(y).max(initial=0.0))
        error = np.abs(x - y).max(initial=0.0)
        assert error <= EXACT * scale, f"{what}[{k}]: max |assembled - whole| = {error:.3e}, largest entry {scale:.3e}"


def assert_first_order_equal(pair: Pair, batch: tuple[int, ...]) -> None:
    for name in BATCHED:
        got = pair.assembled.function(name)(*pair.args(name, batch))
        want = getattr(pair.whole, name)(*pair.args(name, batch))
        assert_same(f"{pair.model.name}.{name} (batch {batch})", got, want)
    if not batch:
        for name in SCALAR:
            got = pair.assembled.function(name)(*pair.args(name, ()))
            want = getattr(pair.whole, name)(*pair.args(name, ()))
            assert_same(f"{pair.model.name}.{name}", got, want)


@pytest.fixture(scope="module")
def pairs() -> Callable[[str], Pair]:
    """``pairs(name)``: the Pair of a bundled example (or of a model of this file), built once per
    module (the session's build cache holds the kernels)."""
    built: dict[str, Pair] = {}

    def get(name: str) -> Pair:
        if name not in built:
            model = _two_mounts() if name == "two_mounts" else load_model(example_path(name))
            built[name] = Pair(model, BuildCache.default())
        return built[name]

    return get


# --------------------------------------------------------------------------- 1. bundled examples

@pytest.mark.parametrize("name", _examples(n for n in looped_examples() if n not in WHOLE_EXAMPLES))
def test_assembled_functions_equal_the_whole_system_on_every_example(pairs, name):
    pair = pairs(name)
    assert len(pair.part.types) <= len(pair.part.instances)
    for batch in ((3,), ()):
        assert_first_order_equal(pair, batch)


def _whole_second_order(model: Model) -> dict[str, Callable]:
    """The second-order functions of the whole-system derivation (compile_second_order takes a
    Model and would assemble it)."""
    derivation = Derivation(assemble(model))
    sources = numpy_sources(derivation, second_order_table(derivation.derivatives))
    return {name: load_function(name, source, {}, {}) for name, source in sources.items()}


@pytest.mark.parametrize("name", _examples(SECOND_ORDER_MODELS, SLOW_EXAMPLES | SLOW_SECOND_ORDER))
def test_assembled_second_order_functions_equal_the_whole_system(pairs, name):
    pair = pairs(name)
    assembled = AssembledModel(assembly_payload(pair.part, pair.cache, second_order=True))
    whole = _whole_second_order(pair.model)
    rng = np.random.default_rng(7)
    w = pair.whole
    n, m, n_y, n_p, n_z = w.n, w.m, w.n_y, w.n_p, 3 * w.n + 3 * w.m
    for batch in ((3,), ()):
        state = pair.args("residual_terms", batch)
        init = pair.args("init_residual", batch)
        # Weights wM, wF, wC, wY and the direction dq, dv, da, dlam, dp carry the state's batch axes.
        step_extra = tuple(rng.normal(size=batch + (size,)) for size in (n, n, m, n_y, n, n, n, m, n_p))
        got = assembled.function("step_second")(*state, *step_extra)
        want = whole["step_second"](*state, *step_extra)
        assert_same(f"{name}.step_second (batch {batch})", got, want)

        init_extra = (rng.normal(size=batch + (n_z,)), rng.normal(size=batch + (n_z,)), step_extra[-1])
        got = assembled.function("init_second")(*init, *init_extra)
        want = whole["init_second"](*init, *init_extra)
        assert_same(f"{name}.init_second (batch {batch})", got, want)


# --------------------------------------------------------------------------- 2. chains

@pytest.mark.slow
def test_a_chain_has_as_many_types_at_any_length_and_equals_the_whole_system():
    short, long = (partition(spatial_chain(n).to_model()) for n in (3, 8))
    assert isinstance(short, Partition) and isinstance(long, Partition)
    assert len(long.instances) > len(short.instances)
    assert len(short.types) == len(long.types)
    assert {t.key for t in short.types} == {t.key for t in long.types}
    pair = Pair(short.model, BuildCache.default())
    for batch in ((3,), ()):
        assert_first_order_equal(pair, batch)


# --------------------------------------------------------------------------- 3. numbers are data

def _two_mounts() -> Model:
    """A spatial block on two bushings at different (numeric) points: the same element between
    the same kinds of bodies, only the marker positions differ."""
    def law():
        return mbs.scalar_law("linear_spring_damper", stiffness="k", damping="d")

    where = {"a": (0.21, 0.13, -0.07), "b": (-0.17, 0.29, -0.11)}
    markers = []
    for mount, position in where.items():
        markers += [mbs.Marker(f"base_{mount}", "ground", position=position),
                    mbs.Marker(f"top_{mount}", "block", position=position)]
    return mbs.MultibodySystem(
        name="two_mounts",
        parameters=(Parameter("m", 3.0), Parameter("k", 1e4), Parameter("d", 5.0), Parameter("g", 9.81)),
        gravity=(0, 0, "-g"),
        bodies=(mbs.SpatialRigidBody("block", mass="m", inertia=(0.3, 0.4, 0.5)),),
        markers=tuple(markers),
        forces=tuple(mbs.Bushing(f"mount_{mount}", f"base_{mount}", f"top_{mount}", {"x": law(), "z": law()})
                     for mount in where),
        outputs=(Output("z", "block_z"),),
        simulation=SimulationSettings(t_end=1.0, step=1e-3, alpha=-0.05)).to_model()


def test_two_bushings_at_different_points_are_one_type_with_their_numbers_as_data():
    part = partition(_two_mounts())
    assert isinstance(part, Partition)
    mounts = [i for i in part.instances if i.what.startswith("constraints of bushing")]
    assert len(mounts) == 2
    a, b = mounts
    assert a.type == b.type
    # The marker positions are data slots of the instances, not part of the type.
    assert a.data != b.data
    assert 0.21 in a.data and -0.07 in a.data and -0.17 in b.data and -0.11 in b.data


def test_a_type_shared_by_instances_with_different_numbers_gives_each_its_own_values(pairs):
    """The data slots are ordered by the shape of the expression, not by the values: a wrong
    order would give both bushings one type and the wrong numbers to one of them."""
    pair = pairs("two_mounts")
    for batch in ((3,), ()):
        assert_first_order_equal(pair, batch)


def _grouped_masses() -> Model:
    """Two coordinates whose mass matrix is a sum: the diagonal masses, an ungrouped entry that
    overrides the diagonal of ``y``, and two groups that add (one of them to the ungrouped
    entry's place), depending on positions (quadratic velocity terms) and parameters."""
    return Model(
        name="grouped_masses",
        coordinates=(Coordinate("x", mass="m", initial_position=0.1), Coordinate("y", mass="m", initial_position=0.2)),
        parameters=(Parameter("m", 1.5), Parameter("c", 0.3), Parameter("k", 50.0)),
        forces=(LinearSpringDamper("s", coordinates=("x",), stiffness="k", damping="c"),
                LinearSpringDamper("r", coordinates=("y",), stiffness="k", damping="c")),
        mass_matrix=(MassEntry("y", "y", "2 * m"),
                     MassEntry("x", "x", "c * y**2", group="a"), MassEntry("x", "y", "c * cos(x)", group="a"),
                     MassEntry("y", "y", "c * x**2 + c", group="b"),
                     # Two groups of one form with named numbers, one of them zero: one type.
                     MassEntry("x", "x", "u * y**2 + w", group="n1", data=(("u", 0.0), ("w", 0.7))),
                     MassEntry("x", "y", "w * sin(y)", group="n1", data=(("w", 0.7),)),
                     MassEntry("x", "x", "u * y**2 + w", group="n2", data=(("u", 0.4), ("w", 0.2))),
                     MassEntry("x", "y", "w * sin(y)", group="n2", data=(("w", 0.2),))),
        outputs=(Output("x", "x"), Output("y", "y")),
        simulation=SimulationSettings(t_end=0.01, step=1e-3))


def test_grouped_mass_entries_add_and_each_group_is_one_instance():
    model = _grouped_masses()
    x, y, m, c = sp.symbols("x y m c", real=True)
    M = assemble(model, velocity_terms=False).M
    q0, q1 = assemble(model).q
    p0, p1 = assemble(model).p[:2]
    want = sp.Matrix([[m + c * y**2 + 0.7 + 0.4 * y**2 + 0.2, c * sp.cos(x) + 0.9 * sp.sin(y)],
                      [c * sp.cos(x) + 0.9 * sp.sin(y), 2 * m + c * x**2 + c]])
    for point in ({q0: 0.3, q1: -1.1, p0: 1.5, p1: 0.3}, {q0: 2.0, q1: 0.5, p0: 0.7, p1: -0.2}):
        got = np.array(M.subs(point), dtype=float)
        expected = np.array(want.subs({x: q0, y: q1, m: p0, c: p1}).subs(point), dtype=float)
        assert np.abs(got - expected).max() <= EXACT * np.abs(expected).max(), (got, expected)
    part = partition(model)
    assert isinstance(part, Partition)
    masses = {i.what: i for i in part.instances if i.what.startswith("mass of")}
    assert sorted(masses) == ["mass of a", "mass of b", "mass of n1", "mass of n2", "mass of x", "mass of y"]
    n1, n2 = masses["mass of n1"], masses["mass of n2"]
    assert n1.type == n2.type and n1.data == (0.0, 0.7) and n2.data == (0.4, 0.2), (n1, n2)
    pair = Pair(model, BuildCache.default())
    for batch in ((3,), ()):
        assert_first_order_equal(pair, batch)


@pytest.mark.parametrize(("entry", "message"), [
    (MassEntry("x", "x", "u", data=(("u", 1.0),)), "give the entry a group"),
    (MassEntry("x", "x", "m * y", group="g", data=(("m", 1.0),)), "'m' is a name of the model"),
    (MassEntry("x", "x", "u", group="g", data=(("u", float("nan")),)), "not finite"),
    (MassEntry("x", "y", "u", group="a", data=(("u", 2.0),)), "one name has one number in a group"),
], ids=["no group", "model name", "nan", "two numbers"])
def test_named_mass_data_are_refused_naming_the_problem(entry, message):
    model = dataclasses.replace(_grouped_masses(), mass_matrix=(MassEntry("x", "x", "u", group="a", data=(("u", 1.0),)),
                                                                 entry))
    with pytest.raises(ModelError, match=message):
        assemble(model)


def test_a_grouped_diagonal_entry_that_is_zero_with_its_numbers_is_no_mass():
    """``u * y**2`` with ``u = 0`` gives ``x`` no mass, as ``0.0 * y**2`` would: the massless
    coordinate is derived whole, naming it (a named zero is still a data slot of the type)."""
    model = dataclasses.replace(
        _grouped_masses(),
        coordinates=(Coordinate("x", mass=0.0, initial_position=0.1), Coordinate("y", mass="m", initial_position=0.2)),
        mass_matrix=(MassEntry("x", "x", "u * y**2", group="g", data=(("u", 0.0),)),))
    part = partition(model)
    assert isinstance(part, WholeSystem) and "'x'" in part.reason, part


# --------------------------------------------------------------------------- 4. derived whole

def _one_mass(*forces) -> Model:
    return Model(name="one_mass", coordinates=(Coordinate("x", mass="m", initial_position=0.01),),
                 parameters=(Parameter("m", 1.0), Parameter("k", 100.0), Parameter("d", 2.0)),
                 forces=forces, outputs=(Output("x", "x"),))


def test_a_maxwell_node_is_derived_whole_naming_the_coordinate():
    part = partition(_one_mass(MaxwellElement("mx", coordinates=("x",), stiffness="k", damping="d")))
    assert isinstance(part, WholeSystem), "a massless Maxwell node was partitioned"
    assert "'mx_node'" in part.reason and "no mass and no constraint" in part.reason


@pytest.mark.parametrize("name", sorted(WHOLE_EXAMPLES))
def test_bundled_examples_with_maxwell_nodes_are_derived_whole(name):
    part = partition(load_model(example_path(name)))
    assert isinstance(part, WholeSystem)
    assert f"'{WHOLE_EXAMPLES[name]}'" in part.reason


def test_the_control_model_without_the_node_is_partitioned():
    """The same model with a plain spring-damper: the reasons above come from the node."""
    assert isinstance(partition(_one_mass(LinearSpringDamper("s", coordinates=("x",), stiffness="k", damping="d"))),
                      Partition)


def test_a_time_table_is_derived_whole():
    part = partition(_one_mass(TableLoad("shaker", coordinate="x", times=(0.0, 1.0, 2.0), values=(0.0, 2.0, -1.0))))
    assert isinstance(part, WholeSystem)
    assert "time tables" in part.reason


def test_a_numeric_element_is_derived_whole():
    from test_numeric_element import NumericCubicSpring, model_with

    part = partition(model_with(NumericCubicSpring("spring", coordinates=("x", "base"), k1="k1", k3="k3", d="d")))
    assert isinstance(part, WholeSystem)
    assert "numeric force elements" in part.reason


# --------------------------------------------------------------------------- 5. build cache

def _component_entries(root: Path) -> dict[str, dict]:
    """``{entry folder name: its kernels.json}`` of the cache's component entries."""
    entries = {}
    for folder in sorted((root / "component").glob("*/*")):
        if folder.is_dir() and not folder.name.startswith("."):
            entries[folder.name] = json.loads((folder / "kernels.json").read_text(encoding="utf-8"))
    return entries


def _entry_of(root: Path, type_key: str, second_order: bool = False) -> Path:
    """The entry folder holding the first-order kernels of the type with key ``type_key``."""
    for folder in (root / "component").glob("*/*"):
        if folder.is_dir() and not folder.name.startswith("."):
            data = json.loads((folder / "kernels.json").read_text(encoding="utf-8"))
            if data["key"] == type_key and ("step_second" in {r["name"] for r in data["rows"]}) == second_order:
                return folder
    raise AssertionError(f"no entry of type {type_key}")


def _rewrite(folder: Path, text: str) -> None:
    """Replace the entry's kernels.json and make its manifest agree (size, checksum): damage
    the checksum cannot see."""
    data = text.encode()
    (folder / "kernels.json").write_bytes(data)
    manifest_path = folder / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    for item in manifest["files"]:
        if item["path"] == "kernels.json":
            item["size"], item["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")


def test_a_second_model_of_known_types_derives_no_new_component(tmp_path):
    root = tmp_path / "cache"
    cache = BuildCache(root)
    small, large = partition(chain_model(2, "linear")), partition(chain_model(3, "linear"))
    assert isinstance(small, Partition) and isinstance(large, Partition)
    assert {t.key for t in large.types} <= {t.key for t in small.types}
    assembly_payload(small, cache)
    before = _component_entries(root)
    assert {e["key"] for e in before.values() if e["kind"] != "guess"} == {t.key for t in small.types}
    assembly_payload(large, cache)
    new = {name: e for name, e in _component_entries(root).items() if name not in before}
    # Only the initial guesses are the model's own (its q0, v0); every type came from the cache.
    assert [e["kind"] for e in new.values()] == ["guess"]


def test_a_component_entry_that_fails_its_checksum_is_rebuilt_with_a_note(tmp_path, capsys):
    root = tmp_path / "cache"
    cache = BuildCache(root)
    part = partition(chain_model(2, "linear"))
    assert isinstance(part, Partition)
    ct = part.types[0]
    kernels = type_kernels(ct, cache)
    folder = _entry_of(root, ct.key)
    data = bytearray((folder / "kernels.json").read_bytes())
    data[len(data) // 2] ^= 0x01  # same size: only the checksum can tell
    (folder / "kernels.json").write_bytes(bytes(data))
    capsys.readouterr()
    assert type_kernels(ct, cache) == kernels
    notes = capsys.readouterr().err.splitlines()
    assert len(notes) == 1 and "was corrupted (" in notes[0] and notes[0].endswith("rebuilt.")


@pytest.mark.parametrize("damage, message", [
    ("{not json", "of a component type is unreadable"),
    (json.dumps({"format": 2}), "of a component type is unreadable"),
    ("another type", "of a component type does not match it"),
])
def test_a_consistent_but_wrong_component_entry_is_refused_naming_the_fix(tmp_path, damage, message):
    root = tmp_path / "cache"
    cache = BuildCache(root)
    part = partition(chain_model(2, "linear"))
    assert isinstance(part, Partition)
    ct, other = part.types[0], part.types[1]
    type_kernels(ct, cache)
    if damage == "another type":
        type_kernels(other, cache)
        damage = (_entry_of(root, other.key) / "kernels.json").read_text(encoding="utf-8")
    _rewrite(_entry_of(root, ct.key), damage)
    with pytest.raises(ModelError, match=message) as caught:
        type_kernels(ct, cache)
    text = str(caught.value)
    assert "run 'fmi-adjoint cache clear'" in text and "\n" not in text
