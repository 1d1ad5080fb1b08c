"""Generated code is the same in every process.

Common-subexpression elimination takes the terms in sympy's own argument order
(``order="none"``, :func:`fmi_adjoint.cse.reduce_outputs`) instead of sorting them: that order
must not depend on the interpreter's string hashing, which differs from process to process
(``PYTHONHASHSEED``).  Two processes with different seeds must
print the same numpy and C text for a whole-system model and for the component types of a
spatial chain, and the same C sources (``model.h``, ``model.c``, the types' files) for an
assembled model: its matrices' patterns were once declared in the order of a set of strings.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SCRIPT = """
import hashlib
from fmi_adjoint.assembly.kernels import derive_type, print_rows
from fmi_adjoint.assembly.partition import partition
from fmi_adjoint.compiled import Derivation, numpy_sources
from fmi_adjoint.examples.chains import spatial_chain
from fmi_adjoint.examples import EXAMPLES_DIR
from fmi_adjoint.model_file import load_model

digest = hashlib.sha256()
for text in numpy_sources(Derivation(load_model(f"{EXAMPLES_DIR}/engine_mount.toml"))).values():
    digest.update(text.encode())
for ct in partition(spatial_chain(2, 1e-3).to_model()).types:
    derived = derive_type(ct)
    for row in print_rows(derived.rows, derived.groups):
        digest.update(row.c.encode())
        digest.update(row.numpy.encode())
from fmi_adjoint.examples.families import lattice_model
from fmi_adjoint.native.sources import model_c_sources
for name, text in sorted(model_c_sources(Derivation(lattice_model(2, 2, 2))).items()):
    digest.update(name.encode())
    digest.update(text.encode())
print(digest.hexdigest())
"""


def _digest(seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.slow
def test_generated_code_does_not_depend_on_string_hashing():
    first, second = _digest("1"), _digest("4242")
    assert len(first) == 64
    assert first == second


def test_an_unevaluated_derivative_is_refused_naming_it_and_shared_subtrees_are_walked_once():
    """:func:`fmi_adjoint.cse.reduce_outputs` refuses an entry that still holds a derivative no
    element supplies (a numeric element's second derivative), naming it, wherever it sits in the
    entries' shared subtrees; entries without one are reduced."""
    import sympy as sp

    from fmi_adjoint.cse import reduce_outputs
    from fmi_adjoint.errors import ModelError

    x, y = sp.symbols("x y", real=True)
    f = sp.Function("f")(x)
    shared = sp.sin(x * y) + sp.cos(x) ** 2
    deep = shared
    for _ in range(30):  # a deep chain of shared subtrees: the walk visits each node once
        deep = deep * shared + deep
    reduced = reduce_outputs("step", [[deep, deep + 1]])
    assert len(reduced.reduced) == 2
    hidden = deep + sp.exp(y * sp.Derivative(f, x, 2))
    with pytest.raises(ModelError, match=r"step: an expression needs a derivative that no element supplies "
                                         r"\(Derivative\(f\(x\), \(x, 2\)\)\)"):
        reduce_outputs("step", [[deep], sp.Matrix([[x, hidden]])])
