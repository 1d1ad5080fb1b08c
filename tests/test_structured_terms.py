"""Structured model terms (issue 24, part 2): constant or parameter-scaled sparse matrices and
quadratic constraints, evaluated and differentiated as data (:mod:`fmi_adjoint.structured`,
:mod:`fmi_adjoint.assembly.structured_kernels`).

The reference is the same terms written out as expressions and derived symbolically (the
whole-system derivation, ``compile_model(assemble(model))``), an independent implementation:

* the numpy kernels (dense local matrices) equal it to round-off, first and second order;
* the C kernels (loops over the patterns) give the same simulation, adjoint, forward
  sensitivities and second derivatives as the Python engine on the written-out equations;
* the adjoint gradient with respect to every factor parameter equals central differences;
* the oscillator of Oberpeilsteiner (2018), Sec. 3.2.1, built from 1 x 1 matrices, reproduces
  the printed closed forms of J, dJ/dc and dJ/dd;
* the kernels hold no expression per matrix entry: a larger matrix changes the data, not the
  kernels; instances of one pattern share a type;
* bad terms are refused with one error naming the term and the fix.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fmi_adjoint.assembly import AssembledModel, Partition, StructuredType, WholeSystem, assembly_payload, partition
from fmi_adjoint.cache import BuildCache
from fmi_adjoint.compiled import compile_model
from fmi_adjoint.costs import LeastSquaresCost, Sampler
from fmi_adjoint.engines import NativeEngine, PythonEngine
from fmi_adjoint.errors import ModelError
from fmi_adjoint.forces.library import TableLoad
from fmi_adjoint.identify import Experiment, IdentificationProblem
from fmi_adjoint.model import Coordinate, Model, Output, Parameter, SimulationSettings, assemble
from fmi_adjoint.native import build_native, native_second_order
from fmi_adjoint.structured import DAMPING, MASS, STIFFNESS, MatrixTerm, QuadraticConstraints
from structured_models import DEMO_PARAMETERS, structured_demo, structured_sdof
from test_assembly import Pair, _whole_second_order, assert_first_order_equal, assert_same
from gradient_checks import assert_adjoint_equals_forward_and_central_differences
from tolerances import CLOSED_FORM, ENGINES_AGREE, EXACT, INDEX3_ROUNDOFF


@pytest.fixture(scope="module")
def demo_pair() -> Pair:
    return Pair(structured_demo(), BuildCache.default())


@pytest.fixture(scope="module")
def demo_engines() -> tuple[NativeEngine, PythonEngine]:
    """The C engine (structured kernels) and the Python engine on the written-out equations."""
    model = structured_demo()
    whole = compile_model(model)
    return NativeEngine.build(model), PythonEngine(whole)


def test_every_structured_item_is_one_instance_of_a_structured_type(demo_pair):
    part = demo_pair.part
    structured = [i for i in part.instances if isinstance(part.types[i.type], StructuredType)]
    assert len(structured) == len(demo_pair.model.matrix_terms) == 9
    # The two damping terms of the chain have the patterns of its mass and stiffness matrices
    # with other factors: types differ by pattern and factor, never by values.
    values = {i.what: i.data for i in structured}
    assert values["damping matrix 'chain_damping_m'"] == values["mass matrix 'chain_mass'"]


def test_numpy_kernels_equal_the_terms_written_out(demo_pair):
    for batch in ((3,), ()):
        assert_first_order_equal(demo_pair, batch)


def test_numpy_second_order_kernels_equal_the_terms_written_out(demo_pair):
    assembled = AssembledModel(assembly_payload(demo_pair.part, demo_pair.cache, second_order=True))
    whole = _whole_second_order(demo_pair.model)
    _compare_second_order(demo_pair, assembled.function("step_second"), assembled.function("init_second"), whole)


def _compare_second_order(pair: Pair, step_second, init_second, whole) -> None:
    rng = np.random.default_rng(11)
    w = pair.whole
    n, m, n_y, n_p, n_z = w.n, w.m, w.n_y, w.n_p, 3 * w.n + 3 * w.m
    for batch in ((3,), ()):
        state, init = pair.args("residual_terms", batch), pair.args("init_residual", batch)
        extra = tuple(rng.normal(size=batch + (size,)) for size in (n, n, m, n_y, n, n, n, m, n_p))
        assert_same(f"step_second (batch {batch})", step_second(*state, *extra), whole["step_second"](*state, *extra))
        init_extra = (rng.normal(size=batch + (n_z,)), rng.normal(size=batch + (n_z,)), extra[-1])
        assert_same(f"init_second (batch {batch})", init_second(*init, *init_extra),
                    whole["init_second"](*init, *init_extra))


def test_c_second_order_kernels_equal_the_terms_written_out(demo_pair):
    """``fa_step_second`` and ``fa_init_second`` of the C structured kernels (batched over the
    states by their drivers)."""
    c_second = native_second_order(build_native(demo_pair.model, second_order=True))
    whole = _whole_second_order(demo_pair.model)

    def state_rows(function):  # the C drivers take batched states: give the unbatched case a batch of 1
        def call(*args):
            if np.ndim(args[4]) == 0:
                lifted = [np.asarray(a)[None] if k != 5 else a for k, a in enumerate(args)]
                return tuple(np.asarray(x)[0] for x in function(*lifted))
            return function(*args)
        return call

    def init_rows(function):
        def call(*args):
            if np.ndim(args[6]) == 0:
                lifted = [np.asarray(a)[None] if k != 7 else a for k, a in enumerate(args)]
                return tuple(np.asarray(x)[0] for x in function(*lifted))
            return function(*args)
        return call

    _compare_second_order(demo_pair, state_rows(c_second.step_second), init_rows(c_second.init_second), whole)


def test_the_c_engine_equals_the_python_engine_on_the_written_out_equations(demo_engines):
    native, python = demo_engines
    assert native.compiled.n == 5 and native.compiled.m == 2
    a, b = native.simulate(), python.simulate()
    assert a.t.size == b.t.size == 101
    scale = np.abs(b.q).max()
    assert np.abs(a.q - b.q).max() <= ENGINES_AGREE * scale
    for name, x, y in (("a", a.a, b.a), ("lam", a.lam, b.lam)):
        assert np.abs(x - y).max() <= INDEX3_ROUNDOFF * np.abs(y).max(), name
    ya, yb = a.outputs(), b.outputs()
    assert np.abs(ya - yb).max() <= INDEX3_ROUNDOFF * np.abs(yb).max()
    # The pendulum stays on its rod and the chain is coupled to it.
    x, y, u1 = a.q[:, 0], a.q[:, 1], a.q[:, 2]
    assert np.abs(x**2 + y**2 - 1.0).max() <= EXACT
    assert np.abs(0.3 + u1 - 0.5 * x - 0.1 * x * u1).max() <= EXACT  # 1/2 q^T H q, H_01 = -0.2
    assert np.ptp(x) > 0.1 and np.ptp(a.q[:, 4]) > 0.01


def _problem(engine, true: dict) -> IdentificationProblem:
    """Noise-free data of every output simulated at ``true``, scaled per channel."""
    model = engine.compiled
    truth = engine.simulate(model.parameter_vector(true))
    times = np.linspace(0.0, model.model.simulation.t_end, 157)
    channels = model.output_names
    data = Sampler.from_grid(truth.t, times).sample(truth.outputs())
    cost = LeastSquaresCost(times, data, channels, scales=np.sqrt(np.mean(data**2, axis=0)))
    return IdentificationProblem([Experiment(model, cost, engine=engine)], DEMO_PARAMETERS)


@pytest.mark.parametrize("kind", ["native", "python"])
def test_adjoint_equals_forward_sensitivities_and_central_differences(demo_engines, kind):
    """Every parameter scales a matrix: the mass (m, rho), the stiffness (k), the damping
    (alpha rho, beta k) and a load (F0^2 / 2); the outputs include an acceleration and a
    multiplier."""
    engine = demo_engines[0] if kind == "native" else demo_engines[1]
    assert_adjoint_equals_forward_and_central_differences(
        _problem(engine, {"m": 2.3, "k": 44.0, "rho": 1.7, "alpha": 0.4, "beta": 0.02, "F0": 2.5}))


@pytest.fixture(scope="module")
def sdof_matrices_run():
    engine = NativeEngine.build(structured_sdof())
    T = 6 * np.pi
    traj = engine.simulate(step=1e-4, t_end=T)
    times = np.append(np.arange(0.0, T, 1e-3), T)
    return engine, traj, LeastSquaresCost(times, np.zeros(times.size), ("x",))


def test_the_oscillator_from_matrices_reproduces_the_closed_forms(sdof_matrices_run, golden):
    """Oberpeilsteiner (2018), Sec. 3.2.1, eq. (3.14): J, dJ/dc, dJ/dd (the gradient through the
    factors c and d of the 1 x 1 stiffness and damping matrices)."""
    engine, traj, cost = sdof_matrices_run
    part = partition(engine.compiled.model)
    assert isinstance(part, Partition)
    assert sum(isinstance(t, StructuredType) for t in part.types) == 3
    ref = golden("sdof_closed_form")["values"]
    result = engine.adjoint_gradient(traj, cost)
    model = engine.compiled
    got = {"J": result.J, "dJ_dc": result.gradient[model.parameter_index("c")],
           "dJ_dd": result.gradient[model.parameter_index("d")]}
    for key, value in got.items():
        assert value == pytest.approx(ref[key], rel=CLOSED_FORM), (key, value, ref[key])


def test_the_oscillator_from_matrices_equals_the_one_from_elements(sdof_matrices_run, example_engine):
    engine, _, _ = sdof_matrices_run
    a = engine.simulate(t_end=2.0)
    b = example_engine("sdof").simulate(t_end=2.0)
    assert np.abs(a.q - b.q).max() <= ENGINES_AGREE * np.abs(b.q).max()


def _chain(size: int, stiffness: float = 1.0) -> Model:
    """A free-fixed chain of ``size`` coordinates: a lumped mass matrix and a tridiagonal
    stiffness matrix, both as matrix terms."""
    names = tuple(f"u{k}" for k in range(size))
    K = np.diag(np.full(size, 2.0)) - np.diag(np.ones(size - 1), 1) - np.diag(np.ones(size - 1), -1)
    K[-1, -1] = 1.0
    coordinates = tuple(Coordinate(n, mass=0.0, initial_position=0.01 * k) for k, n in enumerate(names))
    terms = (MatrixTerm("mass", MASS, names, np.eye(size), "rho"),
             MatrixTerm("stiffness", STIFFNESS, names, stiffness * K, "k"))
    return Model(f"chain{size}", coordinates, (Parameter("rho", 1.0), Parameter("k", 100.0)),
                 outputs=(Output("tip", names[-1]),), matrix_terms=terms)


def test_the_kernels_hold_no_expression_per_entry():
    """A 40-entry and a 4 000-entry stiffness matrix: the kernels' C bodies are the same text
    up to their sizes (the entries are data and static patterns, not statements)."""
    bodies = {}
    for size in (14, 1334):
        part = partition(_chain(size))
        assert isinstance(part, Partition)
        payload = assembly_payload(part, BuildCache.default())
        kernels = payload.types[part.instances[1].type]
        assert kernels.structure is not None and kernels.structure["role"] == "stiffness"
        bodies[size] = {row.name: row.c for row in kernels.rows if row.name != "factor"}
        assert len(part.instances[1].data) == 3 * size - 2
    for name, small in bodies[14].items():
        assert abs(len(bodies[1334][name]) - len(small)) <= 60, name


def test_instances_of_one_pattern_share_a_type_with_their_own_values():
    """Two chains of the same pattern and factor, one twice as stiff: one stiffness type, two
    instances, and each chain vibrates at its own frequency (the closed form of the lowest
    mode of a fixed-free chain of n unit masses: omega^2 = k (2 - 2 cos(pi / (2 n + 1))))."""
    a, b = _chain(4), _chain(4, stiffness=2.0)
    names_b = tuple(f"w{k}" for k in range(4))
    coordinates = a.coordinates + tuple(dataclasses.replace(c, name=n) for c, n in zip(b.coordinates, names_b))
    terms = a.matrix_terms + tuple(dataclasses.replace(t, name=f"{t.name}_b", coordinates=names_b)
                                   for t in b.matrix_terms)
    model = Model("two_chains", coordinates, a.parameters, outputs=(Output("tip_a", "u3"), Output("tip_b", "w3")),
                  matrix_terms=terms, simulation=SimulationSettings(alpha=0.0))  # M a + K q = 0 at every step
    part = partition(model)
    assert isinstance(part, Partition)
    assert len(part.types) == 3  # mass, stiffness, and one type of output (q_0) for both tips
    assert part.instances[1].type == part.instances[3].type
    assert part.instances[1].data != part.instances[3].data
    # Lowest mode of each chain from its C engine's linearization (M^-1 K, M = rho I).
    K = np.diag([2.0, 2.0, 2.0, 1.0]) - np.diag(np.ones(3), 1) - np.diag(np.ones(3), -1)
    engine = NativeEngine.build(model)
    expected = 100.0 * (2.0 - 2.0 * np.cos(np.pi / 9.0))
    assert np.linalg.eigvalsh(100.0 * K).min() == pytest.approx(expected, rel=EXACT)
    traj = engine.simulate(t_end=0.05, step=1e-4)
    # a = -k K q at every step (no damping): the accelerations are the matrices' own, per chain.
    for chain, factor in ((slice(0, 4), 1.0), (slice(4, 8), 2.0)):
        want = -100.0 * factor * traj.q[:, chain] @ K.T
        assert np.abs(traj.a[:, chain] - want).max() <= ENGINES_AGREE * np.abs(want).max()


def test_a_model_derived_whole_writes_the_terms_out():
    """A time table sends the model to the whole-system derivation: the structured terms are
    written out there, and the run equals the partitioned model's (the table load is zero)."""
    plain = structured_demo()
    table = TableLoad(name="zero", coordinate="u2", times=(0.0, 1.0), values=(0.0, 0.0))
    tabled = dataclasses.replace(plain, name="structured_tabled", forces=(table,))
    assert isinstance(partition(tabled), WholeSystem)
    a, b = NativeEngine.build(tabled).simulate(), NativeEngine.build(plain).simulate()
    assert np.abs(a.q - b.q).max() <= ENGINES_AGREE * np.abs(b.q).max()


@pytest.mark.parametrize("build, message", [
    (lambda: MatrixTerm("k", "spring", ("x",), [[1.0]]), "role 'spring' is not one of mass, stiffness"),
    (lambda: MatrixTerm("k", STIFFNESS, ("x", "y"), np.eye(3)), "it is 3 x 3, but 2 x 2 is needed"),
    (lambda: MatrixTerm("k", STIFFNESS, ("x",), [[np.nan]]), "not finite"),
    (lambda: MatrixTerm("k", STIFFNESS, ("x", "x"), np.eye(2)), "a coordinate is named twice"),
    (lambda: MatrixTerm("k", DAMPING, ("x",), [[1.0]], float("inf")), "is not a finite number"),
    (lambda: QuadraticConstraints("c", ("x",), [], [[1.0]]), "c0 is empty"),
    (lambda: QuadraticConstraints("c", ("x",), [0.0], [[1.0]], [(0, 0, 3, 1.0)]), "outside 1 rows and 1 coord"),
    (lambda: QuadraticConstraints("c", ("x",), [0.0], [[1.0]], [(0, 0)]), "give the Hessian entries as"),
])
def test_bad_terms_are_refused_naming_the_fix(build, message):
    with pytest.raises(ModelError, match=message.replace("(", r"\(")):
        build()


def test_terms_on_unknown_coordinates_or_with_state_dependent_factors_are_refused():
    model = structured_demo()
    unknown = dataclasses.replace(model, matrix_terms=(MatrixTerm("k", STIFFNESS, ("z",), [[1.0]]),))
    with pytest.raises(ModelError, match="matrix term 'k': unknown coordinate 'z'"):
        assemble(unknown)
    moving = dataclasses.replace(model, matrix_terms=model.matrix_terms + (
        MatrixTerm("k2", STIFFNESS, ("u1",), [[1.0]], "k*u2"),))
    with pytest.raises(ModelError, match="k2"):
        assemble(moving)
    with pytest.raises(ModelError, match=r"constraint name\(s\) \['rod_0'\] used more than once"):
        dataclasses.replace(model, matrix_terms=model.matrix_terms + (
            QuadraticConstraints("rod", ("x",), [0.0], [[1.0]]),))


def test_the_chain_from_matrices_equals_the_chain_from_elements():
    """:func:`~fmi_adjoint.examples.chains.matrix_chain_model`: the linear chain's mass,
    stiffness and damping as three matrix terms give the run of its spring elements."""
    from fmi_adjoint.examples.chains import chain_model, matrix_chain_model

    matrices, elements = matrix_chain_model(12), chain_model(12, "linear")
    part = partition(matrices)
    assert isinstance(part, Partition) and sum(isinstance(t, StructuredType) for t in part.types) == 3
    a, b = NativeEngine.build(matrices).simulate(t_end=0.05), NativeEngine.build(elements).simulate(t_end=0.05)
    assert np.abs(a.q - b.q).max() <= ENGINES_AGREE * np.abs(b.q).max()
    assert np.abs(a.outputs() - b.outputs()).max() <= ENGINES_AGREE * np.abs(b.outputs()).max()


def _dense_block() -> Model:
    """24 coordinates: a dense mass matrix (24 entries a row) and a tridiagonal stiffness."""
    size = 24
    rng = np.random.default_rng(11)
    basis = rng.normal(size=(size, size))
    mass = basis @ basis.T / size + np.eye(size)
    stiffness = 100.0 * (2 * np.eye(size) - np.eye(size, k=1) - np.eye(size, k=-1))
    names = tuple(f"u{k}" for k in range(size))
    return Model("dense_block", tuple(Coordinate(n, mass=0.0, initial_velocity=0.1 * (k % 3)) for k, n in
                                      enumerate(names)),
                 (Parameter("rho", 1.2), Parameter("k", 1.0)), outputs=(Output("tip", names[-1]),),
                 matrix_terms=(MatrixTerm("block_mass", MASS, names, mass, "rho"),
                               MatrixTerm("band", STIFFNESS, names, stiffness, "k")),
                 simulation=SimulationSettings(t_end=0.05, step=1e-3))


def test_a_dense_term_sums_its_rows_in_a_register_and_a_band_entry_by_entry():
    """A dense 24 x 24 mass matrix (a reduced body's block: 24 entries a row) is summed row by row
    in a register, a tridiagonal stiffness (3 a row) entry by entry
    (:data:`fmi_adjoint.assembly.structured_kernels.ROW_LOOP_LENGTH`); the C engine on both
    equals the Python engine on the written-out equations."""
    model = _dense_block()
    part = partition(model)
    assert isinstance(part, Partition)
    payload = assembly_payload(part, BuildCache.default())
    kernels = {k.structure["role"]: k for k in (payload.types[i.type] for i in part.instances) if k.structure}
    residual = {role: next(r.c for r in k.rows if r.name == "residual_terms") for role, k in kernels.items()}
    assert "double sum" in residual["mass"] and "double sum" not in residual["stiffness"], residual
    a, b = NativeEngine.build(model).simulate(), PythonEngine(compile_model(model)).simulate()
    assert np.ptp(a.q[:, -1]) > 1e-4
    assert np.abs(a.q - b.q).max() <= ENGINES_AGREE * np.abs(b.q).max()
    assert np.abs(a.a - b.a).max() <= ENGINES_AGREE * np.abs(b.a).max()


def test_the_row_loop_gives_the_entry_loops_bits(tmp_path, monkeypatch):
    """The row loop sums each row in a register in the entries' order: the same sums as the entry
    loop, so the C engine's run is the same bit for bit whichever loop the dense term takes (both
    built here, each into a cache of its own)."""
    import sys

    kernels = sys.modules["fmi_adjoint.assembly.structured_kernels"]  # the package's name is the function
    runs = []
    for length in (kernels.ROW_LOOP_LENGTH, 10**9):
        monkeypatch.setattr(kernels, "ROW_LOOP_LENGTH", length)
        run = NativeEngine.build(_dense_block(), cache=BuildCache(tmp_path / str(length))).simulate()
        runs.append((run.q, run.v, run.a))
    for name, row_loop, entry_loop in zip("qva", *runs):
        assert np.array_equal(row_loop, entry_loop), f"{name}: {np.abs(row_loop - entry_loop).max()}"
