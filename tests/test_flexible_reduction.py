"""Craig-Bampton and free-interface reductions (issue 25, part 2; Vanpaemel et al., seed 003,
Sec. 5.1; Craig and Bampton 1968).

* Craig-Bampton frequencies converge to the full FE model's from above as modes are added
  (Rayleigh-Ritz), and equal them when every mode is kept;
* rigid-body modes: none among the fixed-interface modes, six in the reduced free body, found
  from the null space of ``K`` by the free-interface reduction;
* singular reductions (an interface that leaves the body free, a limit that keeps no mode,
  repeated frequencies) are errors or notes;
* damping terms, the cache, and FE models imported from every supported format.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_flexible_fe import SECTION, export_abaqus, export_matrix_market, write_mapping, write_nodes
from tolerances import EIGEN_ROUNDOFF, EXACT, RIGID_BODY_FREQUENCY

from fmi_adjoint.cache import BuildCache
from fmi_adjoint.errors import ModelError
from fmi_adjoint.flexible import (BeamMesh, BeamSection, CraigBampton, FEModel, FreeInterfaceModes, FrequencyLimit,
                                  ModalDamping, ModeCount, RayleighDamping, beam_model, line_mesh,
                                  natural_frequencies, read_abaqus, read_matrix_market, read_nastran_op4, reduce)
from fmi_adjoint.flexible import reduction as reduction_module
from fmi_adjoint.flexible.fe import lowest_modes

LENGTH = 1.0


@pytest.fixture
def cache(tmp_path):
    return BuildCache(tmp_path / "cache")


@pytest.fixture(scope="module")
def beam() -> FEModel:
    return beam_model(line_mesh(LENGTH, 20), SECTION).fe


def clamped_frequencies(reduced, count: int) -> np.ndarray:
    """Frequencies of a Craig-Bampton model with its first interface node (the first six
    coordinates, node 1) clamped."""
    values, _ = lowest_modes(reduced.stiffness[6:, 6:], reduced.mass[6:, 6:], count)
    return np.sqrt(values) / (2 * np.pi)


def test_craig_bampton_converges_from_above_as_modes_are_added(beam, cache):
    reference = natural_frequencies(beam, 8, fixed_nodes=[1])
    errors = []
    for count in (2, 4, 8, 16, 32):
        reduced = reduce(beam, CraigBampton((1, 21), ModeCount(count)), cache=cache)
        assert reduced.size == 12 + count
        errors.append(clamped_frequencies(reduced, 8) / reference - 1)
    errors = np.array(errors)
    assert np.all(errors > -EIGEN_ROUNDOFF)                       # from above
    assert np.all(np.diff(errors, axis=0) <= EIGEN_ROUNDOFF)       # monotonically
    assert errors[0, 0] > 1e-6 and errors[-1, 0] < errors[0, 0] / 100  # and really converging


def test_craig_bampton_with_every_mode_is_the_full_model(beam, cache):
    internal = beam.size - 12
    reduced = reduce(beam, CraigBampton((1, 21), ModeCount(internal)), cache=cache)
    assert clamped_frequencies(reduced, 10) == pytest.approx(natural_frequencies(beam, 10, fixed_nodes=[1]),
                                                             rel=EIGEN_ROUNDOFF)


def test_fixed_interface_modes_are_the_clamped_modes(beam, cache):
    """Interface = the root: the fixed-interface modes are the cantilever's, and the free body
    keeps its six rigid-body modes in the constraint modes, none in the normal modes."""
    reduced = reduce(beam, CraigBampton((1,), ModeCount(6)), cache=cache)
    assert reduced.frequencies == pytest.approx(natural_frequencies(beam, 6, fixed_nodes=[1]), rel=EIGEN_ROUNDOFF)
    assert reduced.frequencies[0] > 1.0
    assert reduced.rigid_body_modes == 6
    system = reduced.system_frequencies()
    assert np.all(system[:6] < RIGID_BODY_FREQUENCY * system[6])
    free = natural_frequencies(beam, 8)
    assert np.all(system[6:8] >= free[6:8] * (1 - EIGEN_ROUNDOFF))


def test_a_supported_model_has_no_rigid_body_modes(cache):
    fe = beam_model(line_mesh(LENGTH, 6), SECTION).fe
    free = np.flatnonzero(fe.dofs[:, 0] != 1)  # clamped in the FE model itself
    supported = FEModel(fe.node_ids[1:], fe.coordinates[1:], fe.dofs[free], fe.mass[free][:, free],
                        fe.stiffness[free][:, free], source="supported")
    assert reduce(supported, CraigBampton((7,), ModeCount(2)), cache=cache).rigid_body_modes == 0


def test_free_interface_modes_find_the_rigid_body_modes(beam, cache):
    reduced = reduce(beam, FreeInterfaceModes(ModeCount(4)), cache=cache)
    assert reduced.rigid_body_modes == 6
    assert reduced.size == 10
    assert reduced.coordinates[:6] == tuple(f"rigid-body mode {k}" for k in range(1, 7))
    assert reduced.frequencies[6:] == pytest.approx(natural_frequencies(beam, 10)[6:], rel=EIGEN_ROUNDOFF)
    assert reduced.mass == pytest.approx(np.eye(10), abs=EIGEN_ROUNDOFF)
    dropped = reduce(beam, FreeInterfaceModes(ModeCount(4), keep_rigid_body_modes=False), cache=cache)
    assert dropped.size == 4 and "rigid-body modes are dropped" in dropped.notes[-1]
    limited = reduce(beam, FreeInterfaceModes(FrequencyLimit(200.0)), cache=cache)
    assert limited.size == 6 + int(np.sum(natural_frequencies(beam, 12)[6:] < 200.0))


def test_an_interface_that_leaves_the_body_free_is_refused(cache):
    fe = two_beams()  # the interface holds only the first
    with pytest.raises(ModelError, match=r"interface nodes \[1\] leave the body free .*\(6 fixed-interface "
                                         r"mechanism modes.*Add interface nodes"):
        reduce(fe, CraigBampton((1,), ModeCount(2)), cache=cache)
    assert reduce(fe, CraigBampton((1, 4), ModeCount(2)), cache=cache).rigid_body_modes == 12


def test_a_frequency_limit_below_the_first_mode_is_guyan_with_a_note(beam, cache):
    reduced = reduce(beam, CraigBampton((1, 21), FrequencyLimit(1.0)), cache=cache)
    assert reduced.size == 12
    assert "no mode below 1 Hz (the first is at 106.3 Hz); the reduction is Guyan's static condensation" \
        in reduced.notes[0]
    limited = reduce(beam, CraigBampton((1,), FrequencyLimit(300.0)), cache=cache)
    assert np.all(limited.frequencies < 300.0)
    assert limited.frequencies.size == int(np.sum(natural_frequencies(beam, 10, fixed_nodes=[1]) < 300.0))


def test_repeated_frequencies_are_noted(cache):
    square = BeamSection.rectangle(0.02, 0.02, E=SECTION.E, G=SECTION.G, rho=SECTION.rho)
    fe = beam_model(line_mesh(LENGTH, 8), square).fe
    reduced = reduce(fe, CraigBampton((1,), ModeCount(4)), cache=cache)
    assert any("modes 1 and 2 share the frequency" in note for note in reduced.notes)
    split = reduce(fe, CraigBampton((1,), ModeCount(1)), cache=cache)
    assert any("keeps mode 1 but not mode 2 of the same frequency" in note and "keep 2 modes" in note
               for note in split.notes)


def test_bad_reduction_arguments(beam, cache):
    with pytest.raises(ModelError, match=r"ModeCount\(500\) but the model has only 120 modes"):
        reduce(beam, CraigBampton((1,), ModeCount(500)), cache=cache)
    with pytest.raises(ModelError, match="node 99 is not in the model"):
        reduce(beam, CraigBampton((99,), ModeCount(2)), cache=cache)
    with pytest.raises(ModelError, match="give ModeCount"):
        CraigBampton((1,), 5)  # type: ignore[arg-type]
    with pytest.raises(ModelError, match="FrequencyLimit: hz = -1"):
        FrequencyLimit(-1.0)
    with pytest.raises(ModelError, match="give NoDamping"):
        reduce(beam, CraigBampton((1,), ModeCount(2)), damping="rayleigh", cache=cache)  # type: ignore[arg-type]


def test_rayleigh_damping(beam, cache):
    reduced = reduce(beam, CraigBampton((1, 21), ModeCount(4)), damping=RayleighDamping(0.5, 1e-5), cache=cache)
    expected = 0.5 * reduced.mass + 1e-5 * reduced.stiffness
    assert reduced.damping == pytest.approx(expected, rel=EXACT, abs=EXACT * np.abs(expected).max())
    assert [term.parameter for term in reduced.damping_terms] == ["alpha", "beta"]


def test_modal_damping_gives_the_ratios_of_the_reduced_modes(beam, cache):
    reduced = reduce(beam, CraigBampton((1, 21), ModeCount(6)), damping=ModalDamping(0.02), cache=cache)
    values, vectors = lowest_modes(reduced.stiffness, reduced.mass, reduced.size)
    modal = vectors.T @ reduced.damping @ vectors
    omega = np.sqrt(np.clip(values, 0, None))
    elastic = slice(6, None)
    assert np.diag(modal)[elastic] == pytest.approx(2 * 0.02 * omega[elastic], rel=EIGEN_ROUNDOFF)
    assert np.abs(modal[:6]).max() < EIGEN_ROUNDOFF * np.abs(modal).max()  # rigid-body modes undamped
    per_mode = reduce(beam, CraigBampton((1, 21), ModeCount(6)), damping=ModalDamping((0.01, 0.03)), cache=cache)
    assert [term.parameter for term in per_mode.damping_terms] == ["zeta_1", "zeta_2"]
    modal = vectors.T @ per_mode.damping @ vectors
    assert np.diag(modal)[6:8] == pytest.approx(2 * np.array([0.01, 0.03]) * omega[6:8], rel=EIGEN_ROUNDOFF)
    assert any("modes 3 to 12 are undamped" in note for note in per_mode.notes)


def test_fe_damping_is_projected(cache):
    fe = beam_model(line_mesh(LENGTH, 4), SECTION).fe
    damped = FEModel(fe.node_ids, fe.coordinates, fe.dofs, fe.mass, fe.stiffness, damping=2e-4 * fe.stiffness)
    reduced = reduce(damped, CraigBampton((1,), ModeCount(3)), cache=cache)
    assert reduced.damping == pytest.approx(2e-4 * reduced.stiffness, abs=EXACT * np.abs(reduced.stiffness).max())
    assert reduced.damping_terms[-1].parameter is None


def test_a_second_reduction_is_a_cache_read(beam, cache, monkeypatch):
    method = CraigBampton((1, 21), ModeCount(5))
    first = reduce(beam, method, cache=cache)
    entries = len(cache.info().entries)

    def refuse(*args):
        raise AssertionError("reduced again instead of reading the cache")

    monkeypatch.setattr(reduction_module, "_compute", refuse)
    second = reduce(beam, method, damping=RayleighDamping(0.1, 0.0), cache=cache)
    for name in ("mass", "stiffness", "transformation", "frequencies", "interface_dofs"):
        assert np.array_equal(getattr(first, name), getattr(second, name))
    assert second.coordinates == first.coordinates and second.rigid_body_modes == first.rigid_body_modes
    assert len(cache.info().entries) == entries
    with pytest.raises(AssertionError, match="reduced again"):
        reduce(beam, CraigBampton((1, 21), ModeCount(6)), cache=cache)  # other options: a new key


def reduced_modes(fe: FEModel, cache: BuildCache) -> np.ndarray:
    reduced = reduce(fe, CraigBampton((1, 5), ModeCount(6)), cache=cache)
    return reduced.system_frequencies()[6:]


def test_imported_models_reduce_to_the_modes_of_the_built_in_path(tmp_path, cache):
    fe = beam_model(line_mesh(LENGTH, 4, orientation=(0.0, 1.0, 1.0)), SECTION).fe
    expected = reduced_modes(fe, cache)
    (tmp_path / "mm").mkdir()
    (tmp_path / "abaqus").mkdir()
    imported = [read_matrix_market(**export_matrix_market(fe, tmp_path / "mm")),
                read_abaqus(**export_abaqus(fe, tmp_path / "abaqus"))]
    for model in imported:
        assert reduced_modes(model, cache) == pytest.approx(expected, rel=EIGEN_ROUNDOFF)


def test_op4_model_reduces_to_the_modes_of_the_built_in_path(tmp_path, cache):
    pytest.importorskip("pyNastran", reason="the fe extra (pyNastran) is not installed")
    import scipy.sparse as sp
    from pyNastran.op2.result_objects.matrix import Matrix
    from pyNastran.op4.op4 import write_op4

    fe = beam_model(line_mesh(LENGTH, 4, orientation=(0.0, 1.0, 1.0)), SECTION).fe
    write_mapping(fe, tmp_path / "fe.mapping")
    write_nodes(fe, tmp_path / "nodes.inp")
    write_op4(tmp_path / "fe.op4", {"MAA": Matrix("MAA", 6, sp.coo_matrix(fe.mass)),
                                    "KAA": Matrix("KAA", 6, sp.coo_matrix(fe.stiffness))}, is_binary=False)
    model = read_nastran_op4(tmp_path / "fe.op4", tmp_path / "fe.mapping", tmp_path / "nodes.inp")
    assert reduced_modes(model, cache) == pytest.approx(reduced_modes(fe, cache), rel=EIGEN_ROUNDOFF)


def two_beams() -> FEModel:
    mesh = BeamMesh(np.arange(1, 7), np.array([[0, 0, 0], [0.5, 0, 0], [1, 0, 0], [0, 1, 0], [0.5, 1, 0], [1, 1, 0]]),
                    np.array([[1, 2], [2, 3], [4, 5], [5, 6]]), np.array([0.0, 0.0, 1.0]))
    return beam_model(mesh, SECTION).fe


def test_free_interface_modes_of_two_free_parts_count_twelve_rigid_modes(cache):
    reduced = reduce(two_beams(), FreeInterfaceModes(ModeCount(2)), cache=cache)
    assert reduced.rigid_body_modes == 12
    assert reduced.size == 14
    assert reduced.frequencies[12] > 1.0


def test_sparse_eigensolver_path_agrees_with_the_dense_one(beam, cache, monkeypatch):
    from fmi_adjoint.flexible import fe as fe_module

    dense_clamped = natural_frequencies(beam, 6, fixed_nodes=[1])
    dense = reduce(beam, CraigBampton((1, 21), ModeCount(6)), cache=cache)
    dense_free = reduce(beam, FreeInterfaceModes(FrequencyLimit(400.0)), cache=cache)
    monkeypatch.setattr(fe_module, "DENSE_LIMIT", 10)  # Lanczos shift-invert (scipy eigsh) from here on
    assert natural_frequencies(beam, 6, fixed_nodes=[1]) == pytest.approx(dense_clamped, rel=EIGEN_ROUNDOFF)
    sparse = reduce(beam, CraigBampton((1, 21), ModeCount(6)), cache=BuildCache(cache.root / "sparse"))
    assert sparse.frequencies == pytest.approx(dense.frequencies, rel=EIGEN_ROUNDOFF)
    sparse_free = reduce(beam, FreeInterfaceModes(FrequencyLimit(400.0)), cache=BuildCache(cache.root / "sparse"))
    assert sparse_free.rigid_body_modes == 6
    assert sparse_free.frequencies[6:] == pytest.approx(dense_free.frequencies[6:], rel=EIGEN_ROUNDOFF)
    with pytest.raises(ModelError, match="not positive semi-definite"):
        FEModel(beam.node_ids, beam.coordinates, beam.dofs, beam.mass, -beam.stiffness)
