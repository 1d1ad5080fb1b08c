"""The partition's shortcut past the rewriting in local symbols (issue 24, builds that grow
linearly): an instance whose signature was seen before reuses that type and fills its data
slots from its own floats (:class:`fmi_adjoint.assembly.partition._Shapes`).

Checked against the rewriting of every instance (``partition(..., shortcut=False)``): every
instance's contribution (its type's local ``M, Q, C, Y`` with its data, at random local values)
is the same number either way, on every bundled example that partitions, on both model families
and on outputs whose sums hold terms that differ in their floats only (the order of such terms is
not decided by their shape).  A shortcut that gave an instance another's numbers, or its own
numbers in the wrong slots, fails here.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from bundled import looped_examples
from fmi_adjoint.assembly import Partition, partition
from fmi_adjoint.assembly.partition import ComponentType, Instance, local_symbols
from fmi_adjoint.examples.families import lattice_model, random_tree_model
from fmi_adjoint.model import Coordinate, Model, Output, Parameter
from fmi_adjoint.model_file import load_model
from fmi_adjoint.examples import example_path
from tolerances import EXACT

#: Bundled examples derived whole (massless Maxwell nodes: test_assembly).
WHOLE = {"engine_tvd"}


def _values(part: Partition, instance: Instance, rng: np.random.Generator) -> np.ndarray:
    """The instance's local M, Q, C, Y with its data, at random values of its local symbols (the
    same values for the same local symbols: ``rng`` seeded alike for both partitions)."""
    ct = part.types[instance.type]
    assert isinstance(ct, ComponentType)
    groups = local_symbols(ct.n, ct.m, ct.n_p, ct.n_d)
    values: dict[sp.Basic, sp.Basic] = {}
    for name in ("q", "v", "a", "lam", "p"):
        symbols = groups[name]
        assert isinstance(symbols, tuple)
        values.update({s: sp.Float(x) for s, x in zip(symbols, rng.uniform(0.5, 1.5, len(symbols)))})
    values[groups["t"]] = sp.Float(0.25)
    data = groups["d"]
    assert isinstance(data, tuple)
    values.update({s: sp.Float(x) for s, x in zip(data, instance.data)})
    entries = [e for matrix in (ct.M, ct.Q, ct.C, ct.Y) for e in matrix]
    # complex: a square root of a random value may be (both partitions alike)
    return np.array([complex(e.xreplace(values).evalf()) for e in entries], dtype=complex)


def assert_same_contributions(model: Model) -> tuple[Partition, Partition]:
    fast, reference = partition(model), partition(model, shortcut=False)
    assert isinstance(fast, Partition) and isinstance(reference, Partition)
    assert len(fast.instances) == len(reference.instances)
    assert len(fast.types) <= len(reference.types)
    for k, (a, b) in enumerate(zip(fast.instances, reference.instances)):
        assert (a.coordinates, a.multipliers, a.outputs, a.parameters, a.what) == \
            (b.coordinates, b.multipliers, b.outputs, b.parameters, b.what)
        got, want = _values(fast, a, np.random.default_rng(k)), _values(reference, b, np.random.default_rng(k))
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=EXACT, atol=EXACT, err_msg=f"{model.name}: {a.what}")
    return fast, reference


@pytest.mark.parametrize("name", [n for n in looped_examples() if n not in WHOLE])
def test_the_shortcut_gives_every_instance_of_an_example_its_own_contribution(name):
    assert_same_contributions(load_model(example_path(name)))


def test_the_shortcut_reuses_types_on_the_families_with_each_instance_s_numbers():
    for model in (lattice_model(3, 3, 3), random_tree_model(12)):
        fast, reference = assert_same_contributions(model)
        # The families' instances differ in numbers and indices only: the shortcut finds the
        # types the rewriting finds, and the data of every instance (no tie in these).
        assert [t.key for t in fast.types] == [t.key for t in reference.types]
        assert [i.data for i in fast.instances] == [i.data for i in reference.instances]
        assert len(fast.instances) > 3 * len(fast.types)


def test_terms_that_differ_in_their_floats_only_get_their_own_numbers():
    """Sums of terms of one shape: sympy orders them by their numbers, which differ between the
    instances, so the second instance's walk meets its floats in another order."""
    outputs = (Output("y1", "sin(0.3*x) + sin(0.7*x) + 0.2*x"), Output("y2", "sin(0.9*x) + sin(0.1*x) + 0.4*x"),
               Output("y3", "2.5*sin(0.9*x) + 1.5*sin(0.1*x)"), Output("y4", "1.5*sin(0.9*x) + 2.5*sin(0.1*x)"),
               Output("y5", "k*(x - 0.3)**1.5 + 0.3*x"), Output("y6", "k*(x - 0.7)**1.5 + 0.3*x"))
    model = Model(name="ties", coordinates=(Coordinate("x", mass="m", initial_position=0.9),),
                  parameters=(Parameter("m", 1.0), Parameter("k", 3.0)), outputs=outputs)
    fast, _ = assert_same_contributions(model)
    ys = [i for i in fast.instances if i.outputs]
    # y1/y2 and y3/y4 share a type each (shapes equal, numbers data).
    assert ys[0].type == ys[1].type and ys[2].type == ys[3].type


def test_a_tree_the_rewriting_re_sorts_is_not_a_shortcut_to_wrong_numbers():
    """sympy takes the sign out of sin(-x) by the order of its symbols' names: globally
    ``-sin(0.5 q_10 - 0.5 q_9)`` (q_10 sorts before q_9), rewritten ``sin(0.5 q_0 - 0.5 q_1)``.
    The first instance's numbers repeat up to sign, so matching its slots by value would pass,
    and the second instance (0.7, -0.2) would get its numbers swapped (the reviewer's case: y2
    came out -0.435 where it is +0.435)."""
    coordinates = tuple(Coordinate(f"x{i}", mass="m", initial_position=0.9) for i in range(12))
    outputs = (Output("y1", "sin(0.5*x9 - 0.5*x10)"), Output("y2", "sin(0.7*x9 - 0.2*x10)"),
               Output("y3", "cos(0.3*x9 - 0.3*x10) + abs(0.4*x10 - 0.4*x9)"),
               Output("y4", "cos(0.8*x9 - 0.1*x10) + abs(0.6*x10 - 0.2*x9)"))
    model = Model(name="resorted", coordinates=coordinates, parameters=(Parameter("m", 1.0),), outputs=outputs)
    fast, _ = assert_same_contributions(model)
    y = {i.what: i for i in fast.instances if i.outputs}
    ct = fast.types[y["output 'y2'"].type]
    assert isinstance(ct, ComponentType)
    groups = local_symbols(ct.n, ct.m, ct.n_p, ct.n_d)
    values = {s: sp.Float(0.9) for s in groups["q"]}  # type: ignore[union-attr]
    values.update(zip(groups["d"], map(sp.Float, y["output 'y2'"].data)))  # type: ignore[arg-type]
    assert float(ct.Y[0].xreplace(values)) == pytest.approx(np.sin(0.7 * 0.9 - 0.2 * 0.9), rel=EXACT)
