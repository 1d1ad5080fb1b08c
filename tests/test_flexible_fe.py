"""Finite-element input of flexible bodies (issue 25, part 1): the built-in beam elements against
closed forms, the checks of :class:`~fmi_adjoint.flexible.FEModel`, and the importers.

Closed forms (Blevins, *Formulas for Natural Frequency and Mode Shape*, 1979, Table 8-1):
bending ``f_n = (beta_n L)^2 / (2 pi L^2) sqrt(E I / (rho A))`` with ``beta_n L`` = 1.87510,
4.69409, 7.85476, 10.99554 (cantilever) and 4.73004, 7.85320, 10.99561 (free-free, plus six
rigid-body modes); axial ``f_n = (2n - 1) / (4 L) sqrt(E / rho)`` and torsion (circle,
``J = Ip``) ``(2n - 1) / (4 L) sqrt(G / rho)`` of a cantilever; static tip deflection
``P L^3 / (3 E I)`` (+ ``P L / (kappa G A)`` for Timoshenko), which both elements reproduce
exactly (Przemieniecki 1968; Friedman and Kosmatka 1993).
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from tolerances import (BEAM_DISCRETIZATION, EIGEN_ROUNDOFF, EXACT, LUMPED_MASS_DISCRETIZATION, ORDER,
                        RIGID_BODY_FREQUENCY)

from fmi_adjoint.errors import ModelError
from fmi_adjoint.flexible import (BeamMesh, BeamSection, FEModel, LumpedMass, Timoshenko, beam_model, line_mesh,
                                  natural_frequencies, read_abaqus, read_dof_map, read_matrix_market,
                                  read_nastran_op4, read_nodes)

E, G, RHO = 2.1e11, 8.1e10, 7850.0
SECTION = BeamSection.rectangle(0.02, 0.03, E=E, G=G, rho=RHO)  # Iz < Iy: the x-y plane bends first
CANTILEVER = np.array([1.875104068711961, 4.694091132974175, 7.854757438237613, 10.99554073487547])
FREE_FREE = np.array([4.730040744862704, 7.853204624095838, 10.99560783800167])
LENGTH = 1.0


def bending(beta_l: np.ndarray, second_moment: float, section: BeamSection = SECTION) -> np.ndarray:
    return beta_l**2 / (2 * np.pi * LENGTH**2) * np.sqrt(section.E * second_moment / (section.rho * section.A))


def plane_frequencies(fe: FEModel, count: int, fixed: tuple[int, ...], plane: int) -> np.ndarray:
    """The lowest ``count`` frequencies of bending in one plane (uy-rz: 1, uz-ry: 2): the other
    DOFs clamped, so that the two planes' modes cannot be confused."""
    keep = {1: (1, 5), 2: (2, 4)}[plane]
    rows = np.flatnonzero(np.isin(fe.dofs[:, 1], keep) & ~np.isin(fe.dofs[:, 0], fixed))
    stiffness, mass = fe.stiffness[rows][:, rows], fe.mass[rows][:, rows]
    sub = FEModel(fe.node_ids, fe.coordinates, fe.dofs[rows], mass, stiffness, source="one plane")
    return natural_frequencies(sub, count)


# -- beams against closed forms -------------------------------------------------------------------

@pytest.mark.parametrize("plane, second", [(1, SECTION.Iz), (2, SECTION.Iy)])
def test_cantilever_bending_frequencies_converge_to_the_closed_form(plane, second):
    errors = []
    for elements in (8, 16, 32):
        fe = beam_model(line_mesh(LENGTH, elements), SECTION).fe
        found = plane_frequencies(fe, 4, (1,), plane)
        errors.append(found / bending(CANTILEVER, second) - 1)
    errors = np.array(errors)
    # Consistent-mass Hermite elements: Rayleigh-Ritz, so from above, and O(h^4).
    assert np.all(errors > 0)
    assert np.all(errors[-1] < BEAM_DISCRETIZATION)
    orders = np.log2(errors[:-1, 1:] / errors[1:, 1:])
    assert np.all(np.abs(orders - 4) < ORDER), orders


def test_all_modes_of_a_cantilever_in_space():
    """The full 3D model: both bending planes interleaved, sorted."""
    fe = beam_model(line_mesh(LENGTH, 32), SECTION).fe
    expected = np.sort(np.concatenate([bending(CANTILEVER[:3], SECTION.Iz), bending(CANTILEVER[:3], SECTION.Iy)]))
    found = natural_frequencies(fe, 6, fixed_nodes=[1])
    assert found == pytest.approx(expected, rel=BEAM_DISCRETIZATION)


def test_free_free_beam_has_six_rigid_body_modes_then_the_closed_form():
    fe = beam_model(line_mesh(LENGTH, 32), SECTION).fe
    found = natural_frequencies(fe, 8)
    expected = bending(FREE_FREE[:1], SECTION.Iz)[0], bending(FREE_FREE[:1], SECTION.Iy)[0]
    assert np.all(found[:6] < RIGID_BODY_FREQUENCY * found[6])
    assert found[6:] == pytest.approx(expected, rel=BEAM_DISCRETIZATION)


def test_free_free_beam_rigid_modes_and_elastic_closed_form():
    fe = beam_model(line_mesh(LENGTH, 32), SECTION).fe
    found = plane_frequencies(fe, 5, (), 1)
    # Two rigid-body modes in the plane (translation uy and rotation rz), then 4.7300, 7.8532, ...
    assert found[2:] == pytest.approx(bending(FREE_FREE, SECTION.Iz), rel=BEAM_DISCRETIZATION)
    assert found[1] < RIGID_BODY_FREQUENCY * found[2]


def test_axial_and_torsion_frequencies_of_a_cantilever():
    circle = BeamSection.circle(0.01, E=E, G=G, rho=RHO)
    fe = beam_model(line_mesh(LENGTH, 200), circle).fe
    for components, wave_speed in (((0,), math.sqrt(E / RHO)), ((3,), math.sqrt(G / RHO))):
        rows = np.flatnonzero(np.isin(fe.dofs[:, 1], components) & (fe.dofs[:, 0] != 1))
        sub = FEModel(fe.node_ids, fe.coordinates, fe.dofs[rows], fe.mass[rows][:, rows],
                      fe.stiffness[rows][:, rows], source="axial or torsion")
        found = natural_frequencies(sub, 2)
        assert found == pytest.approx(np.array([1, 3]) / (4 * LENGTH) * wave_speed, rel=BEAM_DISCRETIZATION)


@pytest.mark.parametrize("elements", [1, 4])
@pytest.mark.parametrize("theory", [None, Timoshenko(5 / 6)], ids=["euler-bernoulli", "timoshenko"])
def test_static_tip_deflection_is_exact(elements, theory):
    fe = beam_model(line_mesh(LENGTH, elements), SECTION, theory=theory).fe
    free = np.flatnonzero(fe.dofs[:, 0] != 1)
    load = np.zeros(fe.size)
    tip = np.flatnonzero((fe.dofs[:, 0] == elements + 1) & (fe.dofs[:, 1] == 1))[0]
    load[tip] = 1000.0
    u = np.zeros(fe.size)
    u[free] = spla.spsolve(fe.stiffness[free][:, free].tocsc(), load[free])
    expected = 1000.0 * LENGTH**3 / (3 * E * SECTION.Iz)
    if theory is not None:
        expected += 1000.0 * LENGTH / (5 / 6 * G * SECTION.A)
    assert u[tip] == pytest.approx(expected, rel=EXACT)


def test_timoshenko_frequencies_lie_below_euler_bernoulli_for_a_stubby_beam():
    stubby = BeamSection.rectangle(0.3, 0.3, E=E, G=G, rho=RHO)  # L / h = 3.3
    euler = natural_frequencies(beam_model(line_mesh(LENGTH, 16), stubby).fe, 4, fixed_nodes=[1])
    timoshenko = natural_frequencies(beam_model(line_mesh(LENGTH, 16), stubby, theory=Timoshenko()).fe, 4,
                                     fixed_nodes=[1])
    # Shear flexibility and rotary inertia: the first bending pair drops by several per cent.
    assert np.all(euler[:2] - timoshenko[:2] > 0.03 * euler[:2])  # measured 6.4 %


def test_timoshenko_approaches_euler_bernoulli_when_slender():
    slender = BeamSection.rectangle(0.002, 0.003, E=E, G=G, rho=RHO)  # L / h = 333
    euler = natural_frequencies(beam_model(line_mesh(LENGTH, 16), slender).fe, 2, fixed_nodes=[1])
    timoshenko = natural_frequencies(beam_model(line_mesh(LENGTH, 16), slender, theory=Timoshenko()).fe, 2,
                                     fixed_nodes=[1])
    assert timoshenko == pytest.approx(euler, rel=BEAM_DISCRETIZATION)


def test_lumped_mass_keeps_the_total_mass_and_converges():
    lumped = beam_model(line_mesh(LENGTH, 128), SECTION, mass=LumpedMass()).fe
    consistent = beam_model(line_mesh(LENGTH, 128), SECTION).fe
    assert sp.issparse(lumped.mass) and lumped.mass.nnz == lumped.size  # diagonal
    ux = lumped.dofs[:, 1] == 0
    assert lumped.mass.diagonal()[ux].sum() == pytest.approx(RHO * SECTION.A * LENGTH, rel=EXACT)
    found = plane_frequencies(lumped, 2, (1,), 1)
    reference = plane_frequencies(consistent, 2, (1,), 1)
    # Lumping removes mass coupling: O(h^2) instead of O(h^4), from below.
    assert np.all(found < reference)
    assert found == pytest.approx(bending(CANTILEVER[:2], SECTION.Iz), rel=LUMPED_MASS_DISCRETIZATION)


# -- parameter-linear parts -----------------------------------------------------------------------

def test_euler_bernoulli_stiffness_is_linear_in_e_and_g():
    model = beam_model(line_mesh(LENGTH, 5, orientation=(0.3, 1.0, 0.2), direction=(1.0, 0.4, -0.2)), SECTION)
    total = sum(term.term() for term in model.stiffness_terms)
    assert abs(total - model.fe.stiffness).max() <= EXACT * abs(model.fe.stiffness).max()
    assert [term.parameter for term in model.stiffness_terms] == ["E", "G"]
    doubled = beam_model(line_mesh(LENGTH, 5, orientation=(0.3, 1.0, 0.2), direction=(1.0, 0.4, -0.2)),
                         BeamSection(2 * E, G, SECTION.A, SECTION.Iy, SECTION.Iz, SECTION.J, RHO))
    expected = 2 * model.stiffness_terms[0].term() + model.stiffness_terms[1].term()
    assert abs(doubled.fe.stiffness - expected).max() <= EXACT * abs(expected).max()
    (mass,) = model.mass_terms
    assert mass.parameter == "rho"
    assert abs(mass.term() - model.fe.mass).max() <= EXACT * abs(model.fe.mass).max()


def test_timoshenko_stiffness_scales_only_with_e_and_g_together():
    def stiffness(e: float, g: float) -> sp.csr_matrix:
        section = BeamSection(e, g, SECTION.A, SECTION.Iy, SECTION.Iz, SECTION.J, RHO)
        return beam_model(line_mesh(0.2, 2), section, theory=Timoshenko()).fe.stiffness

    model = beam_model(line_mesh(0.2, 2), SECTION, theory=Timoshenko())
    assert [term.parameter for term in model.stiffness_terms] == ["E", "G", None]
    base = stiffness(E, G)
    assert abs(stiffness(3 * E, 3 * G) - 3 * base).max() <= EXACT * abs(base).max()
    # E alone: the bending term is not linear in E (Phi holds E / G).
    bending_only = model.stiffness_terms[2].term()
    e_part = model.stiffness_terms[0].term()
    linear_guess = 3 * e_part + 3 * bending_only + model.stiffness_terms[1].term()
    assert abs(stiffness(3 * E, G) - linear_guess).max() > 1e-3 * abs(base).max()


def test_rotated_mesh_gives_the_same_frequencies():
    straight = natural_frequencies(beam_model(line_mesh(LENGTH, 8), SECTION).fe, 6, fixed_nodes=[1])
    tilted = beam_model(line_mesh(LENGTH, 8, direction=(1.0, 2.0, 3.0), orientation=(-1.0, 0.5, 0.0)), SECTION)
    assert natural_frequencies(tilted.fe, 6, fixed_nodes=[1]) == pytest.approx(straight, rel=EIGEN_ROUNDOFF)


# -- FEModel checks -------------------------------------------------------------------------------

def small_model() -> FEModel:
    return beam_model(line_mesh(LENGTH, 2), SECTION).fe


def rebuild(fe: FEModel, **changes) -> FEModel:
    values = dict(node_ids=fe.node_ids, coordinates=fe.coordinates, dofs=fe.dofs, mass=fe.mass,
                  stiffness=fe.stiffness, source="test model")
    values.update(changes)
    return FEModel(**values)


def test_fe_model_is_a_value():
    fe = small_model()
    with pytest.raises(AttributeError):
        fe.source = "other"  # type: ignore[misc]
    with pytest.raises(ValueError):
        fe.coordinates[0, 0] = 1.0
    assert fe.fingerprint() == small_model().fingerprint()
    assert fe.fingerprint() != beam_model(line_mesh(LENGTH, 3), SECTION).fe.fingerprint()


def test_dof_lookup():
    fe = small_model()
    assert fe.dof_index(2, 4) == 10 and fe.dof_label(10) == "node 2 ry"
    assert fe.dof_indices([3]).tolist() == list(range(12, 18))
    with pytest.raises(ModelError, match="there is no DOF node 4 ux"):
        fe.dof_index(4, 0)


def test_asymmetric_stiffness_is_named():
    fe = small_model()
    stiffness = fe.stiffness.tolil()
    stiffness[7, 1] += 1e3 * abs(fe.stiffness).max()
    with pytest.raises(ModelError, match=r"stiffness matrix is not symmetric: entry \(1, 7\) differs"):
        rebuild(fe, stiffness=stiffness.tocsr())


def test_a_dof_without_mass_is_named_with_its_node():
    fe = small_model()
    mass = fe.mass.tolil()
    mass[9, :] = 0
    mass[:, 9] = 0
    with pytest.raises(ModelError, match="DOF node 2 rx has no mass.*remove the DOF"):
        rebuild(fe, mass=mass.tocsr())


def test_indefinite_stiffness_is_refused():
    fe = small_model()
    with pytest.raises(ModelError, match="not positive semi-definite.*sign and units"):
        rebuild(fe, stiffness=-fe.stiffness)


def test_dof_numbering_mismatches_are_named():
    fe = small_model()
    dofs = fe.dofs.copy()
    dofs[4] = (7, 4)
    with pytest.raises(ModelError, match="node 7, which has no coordinates"):
        rebuild(fe, dofs=dofs)
    dofs = fe.dofs.copy()
    dofs[4] = dofs[3]
    with pytest.raises(ModelError, match="DOF node 1 rx appears twice"):
        rebuild(fe, dofs=dofs)
    dofs = fe.dofs.copy()
    dofs[4, 1] = 6
    with pytest.raises(ModelError, match="node 1 has DOF component 6"):
        rebuild(fe, dofs=dofs)
    with pytest.raises(ModelError, match="mass matrix is 18 x 18, the DOF table has 12"):
        rebuild(fe, dofs=fe.dofs[:12])
    with pytest.raises(ModelError, match="node 2 is listed twice"):
        rebuild(fe, node_ids=np.array([1, 2, 2]))


def test_bad_meshes_are_refused():
    with pytest.raises(ModelError, match="orientation vector .* is along the element"):
        beam_model(line_mesh(LENGTH, 2, orientation=(2.0, 0.0, 0.0)), SECTION)
    with pytest.raises(ModelError, match="element 0 uses node 9"):
        BeamMesh(np.array([1, 2]), np.zeros((2, 3)), np.array([[1, 9]]), np.array([0.0, 1.0, 0.0]))
    with pytest.raises(ModelError, match="two nodes coincide"):
        beam_model(BeamMesh(np.array([1, 2]), np.zeros((2, 3)), np.array([[1, 2]]), np.array([0.0, 1.0, 0.0])),
                   SECTION)
    with pytest.raises(ModelError, match="BeamSection: A = -1"):
        BeamSection(E, G, -1, 1.0, 1.0, 1.0, RHO)


# -- importers ------------------------------------------------------------------------------------

ANSYS_LABELS = ("UX", "UY", "UZ", "ROTX", "ROTY", "ROTZ")


def write_nodes(fe: FEModel, path) -> None:
    lines = ["*NODE"] + [f"{int(n)}, {float(x)!r}, {float(y)!r}, {float(z)!r}"
                         for n, (x, y, z) in zip(fe.node_ids, fe.coordinates)]
    path.write_text("\n".join(lines) + "\n")


def write_mapping(fe: FEModel, path) -> None:
    lines = ["Matrix Eqn   Node   DOF"] + [f"{k + 1:8d} {int(n):8d} {ANSYS_LABELS[c]:>6}"
                                           for k, (n, c) in enumerate(fe.dofs)]
    path.write_text("\n".join(lines) + "\n")


def write_abaqus(fe: FEModel, matrix: sp.csr_matrix, path) -> None:
    upper = sp.triu(matrix).tocoo()  # Abaqus writes one triangle
    lines = ["** written by the tests, FORMAT=COORDINATE"]
    for i, j, value in zip(upper.row, upper.col, upper.data):
        lines.append(f"{fe.dofs[i, 0]},{fe.dofs[i, 1] + 1}, {fe.dofs[j, 0]},{fe.dofs[j, 1] + 1}, {float(value)!r}")
    path.write_text("\n".join(lines) + "\n")


def export_matrix_market(fe: FEModel, folder) -> dict:
    scipy.io.mmwrite(folder / "mass.mtx", sp.tril(fe.mass).tocoo(), symmetry="symmetric")
    scipy.io.mmwrite(folder / "stiffness.mtx", fe.stiffness)
    write_mapping(fe, folder / "stiffness.mapping")
    write_nodes(fe, folder / "nodes.inp")
    return dict(mass=folder / "mass.mtx", stiffness=folder / "stiffness.mtx", dof_map=folder / "stiffness.mapping",
                nodes=folder / "nodes.inp")


def export_abaqus(fe: FEModel, folder) -> dict:
    write_abaqus(fe, fe.mass, folder / "job_MASS1.mtx")
    write_abaqus(fe, fe.stiffness, folder / "job_STIF1.mtx")
    write_nodes(fe, folder / "nodes.inp")
    return dict(mass=folder / "job_MASS1.mtx", stiffness=folder / "job_STIF1.mtx", nodes=folder / "nodes.inp")


def same_model(found: FEModel, expected: FEModel) -> None:
    assert np.array_equal(found.dofs, expected.dofs)
    assert np.array_equal(found.node_ids, expected.node_ids)
    assert np.array_equal(found.coordinates, expected.coordinates)
    for a, b in ((found.mass, expected.mass), (found.stiffness, expected.stiffness)):
        assert abs(a - b).max() <= EXACT * abs(b).max()


def test_matrix_market_with_ansys_mapping_round_trip(tmp_path):
    fe = beam_model(line_mesh(LENGTH, 4, orientation=(0.0, 0.0, 1.0)), SECTION).fe
    same_model(read_matrix_market(**export_matrix_market(fe, tmp_path)), fe)


def test_abaqus_coordinate_round_trip(tmp_path):
    fe = beam_model(line_mesh(LENGTH, 4), SECTION).fe
    same_model(read_abaqus(**export_abaqus(fe, tmp_path)), fe)


def test_abaqus_accepts_both_triangles(tmp_path):
    fe = beam_model(line_mesh(LENGTH, 2), SECTION).fe
    files = export_abaqus(fe, tmp_path)
    full = fe.stiffness.tocoo()
    files["stiffness"].write_text("\n".join(f"{fe.dofs[i, 0]},{fe.dofs[i, 1] + 1},{fe.dofs[j, 0]},"
                                            f"{fe.dofs[j, 1] + 1},{float(v)!r}"
                                            for i, j, v in zip(full.row, full.col, full.data)) + "\n")
    same_model(read_abaqus(**files), fe)


def test_nastran_op4_round_trip(tmp_path):
    pytest.importorskip("pyNastran", reason="the fe extra (pyNastran) is not installed")
    from pyNastran.op2.result_objects.matrix import Matrix
    from pyNastran.op4.op4 import write_op4

    fe = beam_model(line_mesh(LENGTH, 4), SECTION).fe
    write_mapping(fe, tmp_path / "fe.mapping")
    write_nodes(fe, tmp_path / "nodes.inp")
    # ASCII OUTPUT4 (pyNastran 1.4.1 writes binary dense matrices wrongly under numpy 2).
    write_op4(tmp_path / "fe.op4", {"MAA": Matrix("MAA", 6, sp.coo_matrix(fe.mass)),
                                    "KAA": Matrix("KAA", 6, sp.coo_matrix(fe.stiffness))}, is_binary=False)
    same_model(read_nastran_op4(tmp_path / "fe.op4", tmp_path / "fe.mapping", tmp_path / "nodes.inp"), fe)
    with pytest.raises(ModelError, match=r"no matrix 'MGG' \(the file holds"):
        read_nastran_op4(tmp_path / "fe.op4", tmp_path / "fe.mapping", tmp_path / "nodes.inp", mass_name="MGG")


def test_a_damaged_op4_file_is_one_error(tmp_path):
    pytest.importorskip("pyNastran", reason="the fe extra (pyNastran) is not installed")
    (tmp_path / "bad.op4").write_bytes(b"\x00\x01garbage" * 10)
    with pytest.raises(ModelError, match="bad.op4: not a readable OUTPUT4 file"):
        read_nastran_op4(tmp_path / "bad.op4", tmp_path / "map", tmp_path / "nodes")


def test_op4_without_the_extra_names_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyNastran", None)
    monkeypatch.setitem(sys.modules, "pyNastran.op4.op4", None)
    (tmp_path / "fe.op4").write_text("")
    with pytest.raises(ModelError, match=r"needs pyNastran: pip install 'fmi-adjoint\[fe\]'"):
        read_nastran_op4(tmp_path / "fe.op4", tmp_path / "map", tmp_path / "nodes")


@pytest.fixture
def exported(tmp_path):
    fe = beam_model(line_mesh(LENGTH, 2), SECTION).fe
    return fe, export_matrix_market(fe, tmp_path), export_abaqus(fe, tmp_path)


def test_bad_files_one_error_each(exported, tmp_path):
    fe, mm, abaqus = exported
    cases = []

    def case(path_key, files, text, pattern, reader):
        target = tmp_path / f"bad_{len(cases)}"
        target.write_text(text)
        cases.append((reader, {**files, path_key: target}, pattern))

    mapping = (tmp_path / "stiffness.mapping").read_text().splitlines()
    case("mass", mm, "hello\n", "not a Matrix Market file", read_matrix_market)
    case("mass", mm, "%%MatrixMarket matrix coordinate complex general\n3 3 1\n1 1 1 0\n",
         "'coordinate complex general' matrix", read_matrix_market)
    case("mass", mm, "%%MatrixMarket matrix coordinate real general\n3000000 3000000 1\n1 1 1\n",
         "3000000 DOFs, more than", read_matrix_market)
    case("mass", mm, "%%MatrixMarket matrix coordinate real general\n18 18 99999999999\n",
         "99999999999 entries, more than max_entries", read_matrix_market)
    case("mass", mm, "%%MatrixMarket matrix coordinate real general\n12 12 1\n1 1 1\n",
         "mass.mtx is 12 x 12 but|is 12 x 12 but", read_matrix_market)
    case("dof_map", mm, "\n".join(mapping[:-1]) + "\n", "17 equations, the matrices have 18", read_matrix_market)
    case("dof_map", mm, "\n".join(mapping[:6] + ["6 1 TEMP"] + mapping[7:]) + "\n",
         "line 7: DOF 'TEMP' of node 1 is not a structural DOF", read_matrix_market)
    case("dof_map", mm, "\n".join(mapping[:6] + ["5 1 ROTZ"] + mapping[7:]) + "\n",
         "line 7: equation 5 is mapped twice", read_matrix_market)
    case("nodes", mm, "1, 0, 0, 0\n2, 0.5, 0, 0\n", "node 3 has DOFs in the matrices but no coordinates",
         read_matrix_market)
    case("nodes", mm, "1, 0, 0, 0\n2, 0.5, 0, __import__('os')\n", "coordinate \"__import__\\('os'\\)\" is not a "
         "number|is not a number", read_matrix_market)
    case("stiffness", abaqus, "1,1, 1,1\n", "line 1: 4 fields; a COORDINATE line", read_abaqus)
    case("stiffness", abaqus, "1,1, 1,1, 1e3\n1,8, 1,8, 2.0\n", "node 1 has DOF 8; only the structural DOFs",
         read_abaqus)
    case("stiffness", abaqus, "1,1, 1,1, nan\n", "value 'nan' is not finite", read_abaqus)
    case("stiffness", abaqus, "** nothing\n", "no matrix entries", read_abaqus)
    case("mass", abaqus, "1,1,1,1,1.0\n1,2,1,2,-1.0\n", "DOF node 1 uy has negative mass|no mass", read_abaqus)
    for reader, files, pattern in cases:
        with pytest.raises(ModelError, match=pattern):
            reader(**files)


def test_special_and_large_files_are_refused(exported, tmp_path):
    fe, mm, abaqus = exported
    with pytest.raises(ModelError, match="it is a folder|file not found"):
        read_abaqus(**{**abaqus, "stiffness": tmp_path})
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ModelError, match="a FIFO, not a regular file"):
        read_abaqus(**{**abaqus, "stiffness": fifo})
    with pytest.raises(ModelError, match="larger than 100 bytes"):
        read_abaqus(**abaqus, max_bytes=100)
    with pytest.raises(ModelError, match="more than max_entries=3"):
        read_abaqus(**abaqus, max_entries=3)


def test_node_and_map_readers_accept_their_documented_forms(tmp_path):
    (tmp_path / "nodes.csv").write_text("id,x,y,z\n# comment\n3, 1.5, 2, -1\n4 0 0 1e-3\n")
    assert read_nodes(tmp_path / "nodes.csv") == {3: (1.5, 2.0, -1.0), 4: (0.0, 0.0, 1e-3)}
    (tmp_path / "map.txt").write_text("2 3 6\n1 4 1\n")
    assert read_dof_map(tmp_path / "map.txt").tolist() == [[4, 0], [3, 5]]
