"""A module imported on first use of one of its attributes, so that importing the module
that names it is cheap (issue 24, part 6: a warm ``simulate`` never loads sympy).

``sp = deferred("sympy")`` at a module's top (``import sympy as sp`` under
``typing.TYPE_CHECKING`` for the type checker): ``sp.Symbol`` imports sympy then, and is
the real ``sympy.Symbol``.  Unlike :class:`importlib.util.LazyLoader`, nothing enters
``sys.modules`` before the first use, so "is sympy loaded" keeps its plain meaning.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["DeferredModule", "deferred", "sympy"]


class DeferredModule:
    """Stands for the module ``name``, imported (:func:`importlib.import_module`) when one
    of its attributes is first asked for."""

    __slots__ = ("_name", "_module")

    def __init__(self, name: str):
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> object:
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attribute)

    def __repr__(self) -> str:
        return f"<deferred module {self._name!r}>"


def deferred(name: str) -> DeferredModule:
    """The module ``name``, imported on first use (:class:`DeferredModule`)."""
    return DeferredModule(name)


#: sympy, imported on first use.
sympy = deferred("sympy")
