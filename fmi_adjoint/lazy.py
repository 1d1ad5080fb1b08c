"""A package's public names imported on first use (PEP 562), so that importing it is cheap.

``__getattr__, __dir__ = lazy_names(__name__, locations, __all__)`` in a package's
``__init__``: ``locations`` maps each name to the submodule that defines it; the name is
imported from there when first asked for and then kept as an attribute of the package.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Collection, Mapping

__all__ = ["lazy_names"]


def lazy_names(package: str, locations: Mapping[str, str], public: Collection[str],
               submodules: Collection[str] = ()) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package`` (module docstring);
    ``submodules``: names that are the package's submodules themselves (``fmi_adjoint.mbs``)."""

    def __getattr__(name: str) -> object:  # noqa: N807 (the PEP 562 name)
        if name in submodules:
            return importlib.import_module(f".{name}", package)
        module = locations.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:  # noqa: N807
        return sorted(set(vars(sys.modules[package])) | set(public))

    return __getattr__, __dir__
