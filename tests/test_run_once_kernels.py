"""Kernels run once per simulation compile without optimization (issue 24: cold builds).

The initialization kernels of a component type (``init_residual``, ``init_jacobians``) and the
initial guesses are by far the largest functions of a spatial multibody model and run once
per simulation; :mod:`fmi_adjoint.native.assembly_code` marks them ``FA_RUN_ONCE`` (GCC's
``optimize("O0")``), which cut the C compiler's time of a 1 000-coordinate random tree to a
third.  Their results stay the same bits only if nothing in them depends on the
optimization level: the one such construct in generated code, ``pow(x, 2)`` (an optimizing
compiler writes ``x*x``, an unoptimized one calls the C library), is printed as a product.
"""

from __future__ import annotations

import re

import sympy as sp

from fmi_adjoint.assembly.kernels import print_rows
from fmi_adjoint.cache import BuildCache
from fmi_adjoint.compiled import Derivation
from fmi_adjoint.equations import GeneratedFunction
from fmi_adjoint.examples.chains import spatial_chain
from fmi_adjoint.native.assembly_code import RUN_ONCE_ROWS
from fmi_adjoint.native.sources import model_c_sources

_DEFINITION = re.compile(r"^(FA_RUN_ONCE )?(?:static )?void (?:FA_KERNEL\((\w+)\)|fa_g_(\w+))\(", re.MULTILINE)


def test_squares_print_as_products() -> None:
    q = sp.symbols("q_0 q_1", real=True)
    row = GeneratedFunction("residual_terms", ("q",), (("R", sp.Matrix([q[0] ** 2 + 3 / (q[0] + q[1]) ** 2]), True),))
    (printed,) = print_rows((row,), {"q": q})
    assert "pow(" not in printed.c
    assert "(q[0]*q[0])" in printed.c and "((q[0] + q[1])*(q[0] + q[1]))" in printed.c


def test_only_the_kernels_run_once_are_compiled_unoptimized(tmp_path) -> None:
    files = model_c_sources(Derivation(spatial_chain(3).to_model()), defaults=False, cache=BuildCache(tmp_path))
    kernels = {name: text for name, text in files.items() if name.startswith(("model_type", "model_guess"))}
    assert kernels
    marked, plain = set(), set()
    for text in kernels.values():
        assert not re.search(r"pow\([^()]*, 2\)", text)
        for once, kernel, guess in _DEFINITION.findall(text):
            (marked if once else plain).add(kernel or guess)
    assert marked == set(RUN_ONCE_ROWS)
    assert {"residual_terms", "newton", "jacobian_terms"} <= plain
    assert not marked & plain
