"""The generated non-banded model families (fmi_adjoint.examples.families, issue 24).

Shapes (coordinates and constraints against the counts of the module docstring), one model per
seed, the TOML round trip (the text parsed back, written to a file and loaded, and the
multibody system lowered: one model), the Newton pattern (wide after any band ordering, unlike
a chain of the same size), and the lattice's analytic statics and vertical modes: while the
corner force is zero every column of the lattice is a hanging fixed-free spring chain, so the
static deflection ``delta_k`` of the docstring is an equilibrium and the column's vertical
motion is that of the linear chain ``m z'' = k (z_(i+1) - 2 z_i + z_(i-1)) - m g``, solved
here by scipy.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from fmi_adjoint.assembly import assembly_payload, partition
from fmi_adjoint.assembly.partition import Partition
from fmi_adjoint.assembly.plan import AXES, index_array
from fmi_adjoint.cache import BuildCache, default_cache_root
from fmi_adjoint.compiled import compile_model, model_key
from fmi_adjoint.errors import ModelError
from fmi_adjoint.examples.families import (FAMILY_SIZES, family_toml, lattice_deflection, lattice_dimensions,
                                           lattice_model, lattice_size, lattice_system, lattice_toml,
                                           random_tree_model, random_tree_size, random_tree_system,
                                           random_tree_toml, tree_bodies)
from fmi_adjoint.integrate import simulate
from fmi_adjoint.integrate.initialization import initial_state
from fmi_adjoint.model_file import load_model
from fmi_adjoint.sparsity import MatrixStorage, plan_layout
from tolerances import CLOSED_FORM, NEWTON_LEVEL


@functools.cache
def _lattice(nx: int, ny: int, nz: int, deflected: bool = False):
    return lattice_model(nx, ny, nz, deflected=deflected)


def test_lattice_has_the_counted_coordinates_and_constraints():
    model = _lattice(3, 2, 2)
    n, m = lattice_size(3, 2, 2)
    # 12 masses (36 coordinates), 20 springs and 6 anchors, one auxiliary coordinate each.
    assert (n, m) == (36 + 20 + 6, 20 + 6)
    assert (len(model.all_coordinates), len(model.constraints)) == (n, m)
    assert [o.name for o in model.outputs] == ["corner_x", "corner_y", "corner_z"]


def test_random_tree_has_the_counted_coordinates_and_constraints_and_closes_loops():
    model = random_tree_model(40, seed=3)
    n, m = random_tree_size(40, seed=3)
    assert (len(model.all_coordinates), len(model.constraints)) == (n, m) and n == 8 * 40
    loops = [c for c in model.constraints if c.group and "loop" in c.group]
    assert len(loops) == 3 * 2  # 40 // 20 loops, three rows each
    rows = m - 2 * 40 - len(loops)  # normalization and spring rows: one each per body
    assert 3 * 40 <= rows <= 5 * 40


def test_a_size_and_a_seed_give_one_tree():
    assert random_tree_toml(30, seed=7) == random_tree_toml(30, seed=7)
    assert random_tree_toml(30, seed=7) != random_tree_toml(30, seed=8)


def test_family_sizes_are_near_the_asked_number_of_coordinates():
    # The nearest near-cubic lattices and whole numbers of 8-coordinate bodies.
    assert [lattice_dimensions(size) for size in FAMILY_SIZES] == [(3, 3, 2), (6, 6, 5), (10, 10, 9)]
    assert [lattice_size(*lattice_dimensions(size))[0] for size in FAMILY_SIZES] == [96, 1020, 5220]
    assert [tree_bodies(size) for size in FAMILY_SIZES] == [12, 125, 625]
    assert family_toml("lattice", 100) == lattice_toml(3, 3, 2)
    with pytest.raises(ModelError, match="not a model family"):
        family_toml("chain", 100)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [(0, 2, 2), (13, 2, 2), (2.0, 2, 2), (1, 1, 1)])
def test_lattice_sides_out_of_range_are_refused(bad):
    with pytest.raises(ModelError, match="lattice|whole number"):
        lattice_toml(*bad)


def test_the_toml_text_the_file_and_the_system_give_one_model(tmp_path):
    for toml, system, model in ((lattice_toml(2, 2, 2), lattice_system(2, 2, 2), _lattice(2, 2, 2)),
                                (random_tree_toml(6, seed=1), random_tree_system(6, seed=1),
                                 random_tree_model(6, seed=1))):
        path = tmp_path / f"{model.name}.toml"
        path.write_text(toml)
        assert model_key(load_model(path)) == model_key(model) == model_key(system.to_model())


def _newton_pattern(model) -> tuple[int, list[tuple[int, int]]]:
    """``(n + m, entries)`` of the Newton matrix ``[[S, C_q^T], [C_q, 0]]`` from the local
    patterns of the component types scattered by the instances' index arrays."""
    part = partition(model)
    assert isinstance(part, Partition)
    payload = assembly_payload(part, BuildCache(default_cache_root()))
    n = payload.sizes.n
    entries: set[tuple[int, int]] = set()
    for instance in payload.instances:
        for row in payload.types[instance.type].rows:
            if row.name != "jacobian_terms":
                continue
            for name, _, pattern in row.outputs:
                rows = index_array(AXES[name][0], instance, payload.sizes)
                cols = index_array(AXES[name][1], instance, payload.sizes)
                for r, c in pattern:
                    if name == "Cq":
                        entries.update({(n + rows[r], cols[c]), (cols[c], n + rows[r])})
                    else:
                        entries.add((rows[r], cols[c]))
    return n + payload.sizes.m, sorted(entries)


@pytest.mark.slow
def test_the_families_newton_matrices_are_not_narrow_bands():
    """After reverse Cuthill-McKee a chain's Newton matrix is a band a few entries wide (tests of
    fmi_adjoint.sparsity); a lattice's is at least as wide as a layer of the grid, and so is a
    random tree's with loops."""
    widths = {}
    for name, model in (("lattice", _lattice(4, 4, 3)), ("tree", random_tree_model(30, seed=0))):
        size, entries = _newton_pattern(model)
        band = plan_layout(size, entries, MatrixStorage.BAND)
        widths[name] = band.kl + band.ku + 1
    assert widths["lattice"] >= 4 * 4 and widths["tree"] >= 4 * 4, widths


def test_the_lattice_at_its_static_deflection_is_in_equilibrium():
    """At ``delta_k`` (module docstring) gravity and the springs balance: the consistent initial
    accelerations vanish to the Newton tolerance and the positions stay where they were given;
    started at the free lengths the same lattice falls with ``g``."""
    nx, ny, nz = 2, 2, 3
    deflected = compile_model(_lattice(nx, ny, nz, deflected=True))
    p = deflected.parameter_vector({"F0": 0.0})  # the corner force off: every column hangs alike
    names = deflected.parameter_names
    g = p[names.index("g")]
    q, _, _, _, a, _ = initial_state(deflected, p).split()
    masses = [deflected.coordinate_names.index(f"m_{i}_{j}_{k}_{axis}") for i in range(nx) for j in range(ny)
              for k in range(nz) for axis in "xyz"]
    assert np.max(np.abs(a[masses])) <= NEWTON_LEVEL * g
    unit = p[names.index("m")] * g / p[names.index("k")]
    for k in range(nz):
        z = q[deflected.coordinate_names.index(f"m_1_1_{k}_z")]
        assert z == pytest.approx(0.3 + k * p[names.index("L")] - lattice_deflection(nz, k) * unit,
                                  abs=NEWTON_LEVEL)
    free = compile_model(_lattice(nx, ny, nz))
    a_free = initial_state(free, free.parameter_vector({"F0": 0.0})).split()[4]
    vertical = [free.coordinate_names.index(f"m_{i}_{j}_{k}_z") for i in range(nx) for j in range(ny)
                for k in range(nz)]
    assert np.allclose(a_free[vertical], -g, rtol=CLOSED_FORM)  # nothing stretched yet: free fall


@pytest.mark.slow
def test_a_lattice_column_moves_as_the_linear_hanging_chain():
    """A 1 x 1 x 3 column (corner force off) released at the free lengths: its vertical motion
    is that of the fixed-free chain under gravity, exactly (the springs stay vertical)."""
    nz = 3
    compiled = compile_model(_lattice(1, 1, nz))
    p = compiled.parameter_vector({"F0": 0.0})
    m, k, d, g = (p[compiled.parameter_names.index(name)] for name in ("m", "k", "d", "g"))
    traj = simulate(compiled, p, t_end=0.2, step=1e-4)

    def rhs(t, y):
        z, w = y[:nz], y[nz:]  # displacements of layers 0 (bottom) .. nz-1 from the free lengths
        above = np.append(z[1:], 0.0)  # the anchor does not move
        below = np.insert(z[:-1], 0, np.nan)
        above_w = np.append(w[1:], 0.0)
        below_w = np.insert(w[:-1], 0, np.nan)
        force = k * (above - z) + d * (above_w - w)
        force[1:] += k * (below[1:] - z[1:]) + d * (below_w[1:] - w[1:])
        return np.concatenate((w, force / m - g))

    reference = solve_ivp(rhs, (0.0, 0.2), np.zeros(2 * nz), t_eval=np.asarray(traj.t), rtol=1e-11, atol=1e-13)
    q = np.asarray(traj.q)
    z = q[:, compiled.coordinate_names.index("m_0_0_0_z")] - 0.3  # the bottom layer starts at z = 0.3 m
    assert np.max(np.abs(z - reference.y[0])) <= CLOSED_FORM * np.max(np.abs(reference.y[0]))
    x = q[:, compiled.coordinate_names.index("m_0_0_0_x")] - 0.1
    assert np.max(np.abs(x)) <= NEWTON_LEVEL


@pytest.mark.slow
def test_the_closed_loops_of_a_random_tree_are_independent():
    """Seed 1 of a 40-body tree draws a loop between two siblings (bodies 33 and 37 on one
    parent's tip): two spherical joints at one point move the meeting point in a plane only,
    so closing that loop would make the constraints dependent (a singular initialization)
    although its mobility count allows it.  The generator leaves such loops open: the
    consistent initialization converges and meets every constraint."""
    model = random_tree_model(40, seed=1)
    compiled = compile_model(model)
    state = initial_state(compiled, compiled.parameter_vector())
    q = state.split()[0]
    assert np.all(np.isfinite(state.z))
    assert any(c.group and "loop" in c.group for c in model.constraints)
    residual = compiled.residual_terms(q, np.zeros_like(q), np.zeros_like(q), np.zeros(compiled.m), 0.0,
                                       compiled.parameter_vector())[2]
    assert np.max(np.abs(residual)) <= NEWTON_LEVEL
