"""FMU export: a model file as a standalone FMI 2/3 FMU for Co-Simulation, Model Exchange or both.

Needs only the compiled model: its generated C code, the engine runtime of
:mod:`fmi_adjoint.native` (``native/runtime``) and the FMI API layer here (``fmi/``).
"""

from .fmu_export import (DEFAULT_INTERFACE, FMI_VERSIONS, INTERFACES, ExportError, build_fmu_binary,
                         expected_description, export_fmu, export_scheme, export_storage, instantiation_token,
                         validate_against_schema)

__all__ = ["DEFAULT_INTERFACE", "ExportError", "FMI_VERSIONS", "INTERFACES", "build_fmu_binary",
           "expected_description", "export_fmu", "export_scheme", "export_storage", "instantiation_token",
           "validate_against_schema"]
