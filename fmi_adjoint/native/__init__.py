"""The native C engine: generated model code, runtime, build through the cache, ctypes binding."""

from .library import (ENGINE_RUNTIME, RUNTIME_DIR, NativeLibrary, build_native, find_c_compiler, native_second_order,
                      write_sources)
from .sources import model_c_sources

__all__ = ["ENGINE_RUNTIME", "RUNTIME_DIR", "NativeLibrary", "build_native", "find_c_compiler", "model_c_sources",
           "native_second_order", "write_sources"]
