"""The way back into FMI toolchains, and the validation of an identified FMU: an index of the
modules that do each job, whose names stay importable from here.

* :func:`~.apply.hand_back` (``fmi-adjoint apply``, :mod:`.apply`): the front door; writes an
  FMU, an SSV file and/or an SSP archive together or not at all, and says what an importer
  will see;
* :mod:`.result_file`: RESULT.json as ``apply`` and ``validate`` read it;
* :mod:`.start_values`: the identified values as ``start`` attributes of the model description
  (:func:`~.start_values.write_reparameterized_fmu`), :mod:`.repack` the changed copy of the FMU;
* :mod:`.rebuild`: an FMU exported by fmi-adjoint rebuilt with the values compiled in;
* :mod:`.ssv`, :mod:`.ssp`: the SSP 1.0 parameter set and the archive that binds it to the FMU;
* :mod:`.validation`: re-simulation through fmpy against measured data (``fmi-adjoint validate``).
"""

from __future__ import annotations

from ..errors import FmuError
from .apply import HandBack, hand_back
from .repack import write_fmu_entries
from .result_file import check_result_fmu, differing_start_values, read_result_interface, read_result_parameters
from .ssv import SSV_NAMESPACE, write_ssv
from .start_values import write_reparameterized_fmu
from .validation import (FmuValidation, resimulate_against_data, simulate_with_fmpy, validate_fmu_against_data,
                         write_validation)

__all__ = ["SSV_NAMESPACE", "FmuError", "HandBack", "hand_back", "write_ssv", "write_reparameterized_fmu",
           "write_fmu_entries", "simulate_with_fmpy", "validate_fmu_against_data", "FmuValidation",
           "resimulate_against_data", "write_validation", "read_result_interface", "read_result_parameters",
           "check_result_fmu", "differing_start_values"]
