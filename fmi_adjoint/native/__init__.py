"""The native C engine: generated model code, runtime, build through the cache, ctypes binding.

The names below are imported on first use (PEP 562): a warm start loads the binding
(:mod:`.library`) but not the code generators (:mod:`.sources`, sympy; issue 24, part 6).
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_names

if TYPE_CHECKING:  # the names for type checkers and the API reference (griffe); loaded by __getattr__
    from .library import (ENGINE_RUNTIME, RUNTIME_DIR, NativeLibrary, build_native, find_c_compiler,
                          native_second_order, write_sources)
    from .sources import model_c_sources

_LOCATIONS = {
    "ENGINE_RUNTIME": "library",
    "RUNTIME_DIR": "library",
    "NativeLibrary": "library",
    "build_native": "library",
    "find_c_compiler": "library",
    "model_c_sources": "sources",
    "native_second_order": "library",
    "write_sources": "library",
}

__all__ = ["ENGINE_RUNTIME", "RUNTIME_DIR", "NativeLibrary", "build_native", "find_c_compiler", "model_c_sources",
           "native_second_order", "write_sources"]

__getattr__, __dir__ = lazy_names(__name__, _LOCATIONS, __all__)
