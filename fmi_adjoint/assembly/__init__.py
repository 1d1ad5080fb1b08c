"""Models as component instances: per-type derivation, numeric assembly (issue 23, item 1).

:mod:`.partition` splits a model into component instances in local symbols and groups them
by type; :mod:`.kernels` derives and prints each type once (through the build cache);
:mod:`.plan` says where local values go; :mod:`.numpy_assembly` assembles the model's numpy
functions from the kernels (the C engine does the same in C, :mod:`fmi_adjoint.native.model_code`).
"""

from __future__ import annotations

from ..cache import BuildCache
from .kernels import TypeKernels, type_kernels
from .numpy_assembly import AssembledModel, AssemblyPayload
from .partition import ComponentType, Instance, Partition, WholeSystem, partition
from .plan import PlanSizes, guess_kernels
from .structured_kernels import structured_kernels
from .structured_types import StructuredType

__all__ = ["AssembledModel", "AssemblyPayload", "ComponentType", "Instance", "Partition", "StructuredType",
           "TypeKernels", "WholeSystem", "assembly_payload", "partition"]


def assembly_payload(part: Partition, cache: BuildCache, second_order: bool = False) -> AssemblyPayload:
    """The kernels of every type of ``part`` (its second-order rows with ``second_order``), the
    guesses and the instances: everything the numpy and C assemblies need, no sympy left."""
    types = tuple(structured_kernels(ct, second_order) if isinstance(ct, StructuredType)
                  else type_kernels(ct, cache, second_order) for ct in part.types)
    return AssemblyPayload(sizes=PlanSizes.of(part), instances=part.instances, types=types,
                           guess=guess_kernels(part, cache))
