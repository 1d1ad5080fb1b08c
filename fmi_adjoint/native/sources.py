"""The generated C code of a model: derived as a whole, or by components.

:func:`model_c_sources` is the one entry point of the C backends (the in-process engine,
:func:`fmi_adjoint.native.library.build_native`, and exported FMUs): a model the component
assembly can carry (:attr:`fmi_adjoint.compiled.Derivation.partition`) gets its functions
assembled from per-type kernels (:mod:`.assembly_code`), any other model the whole-system
code (:mod:`.model_code`).  Both give the same ``model.h`` contract.
"""

from __future__ import annotations

from ..cache import BuildCache
from ..compiled import Derivation, second_order_table
from ..model import Model
from .assembly_code import assembled_c_sources
from .model_code import whole_system_c_sources

__all__ = ["model_c_sources"]


def model_c_sources(derivation: Derivation, *, defaults: bool = True, second_order: bool = False,
                    cache: BuildCache | None = None) -> dict[str, str]:
    """``{file name: text}`` of the generated C code of ``derivation``'s model.

    ``defaults=False`` prints zeros as the default parameter values (the in-process library is
    cached under a key without the values).  ``second_order`` adds the second-order functions
    and their batch drivers (:func:`fmi_adjoint.compiled.second_order_table`).  ``cache`` holds
    the kernels of component types (default: :meth:`BuildCache.default`).
    """
    cache = cache or BuildCache.default()
    assembled = derivation.assembly(cache)
    if assembled is not None:
        model = derivation.model
        assert isinstance(model, Model)
        second = derivation.assembly(cache, second_order=True) if second_order else None
        return assembled_c_sources(model, assembled, second, defaults=defaults)
    extra = second_order_table(derivation.derivatives) if second_order else ()
    return whole_system_c_sources(derivation, defaults=defaults, extra_rows=extra)
