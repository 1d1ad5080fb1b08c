"""Shared names of the multibody layer: the value type of component fields and the name
symbols that built expressions are written in (:mod:`fmi_adjoint.mbs.system`)."""

from __future__ import annotations

from typing import TypeAlias

import sympy as sp

from ..expressions import special

__all__ = ["Number", "symbol", "der"]

#: A component field's value: a number, an expression string of parameters (the grammar of
#: :mod:`fmi_adjoint.expressions`) or a sympy expression built in name symbols.
Number: TypeAlias = "str | float | int | sp.Expr"


def symbol(name: str) -> sp.Symbol:
    """The name symbol of a model name (coordinate, parameter, ``t``)."""
    return sp.Symbol(name, real=True)


def der(name: str) -> sp.Expr:
    """``der(name)``: the velocity of coordinate ``name`` in a built expression."""
    return special("der", name)
