"""The bundled examples' FMUs, exported once per test process and shared by the modules that run them.

``exported_fmu(name, version, interface)`` is the one call ``export_fmu(example_path(name), ...,
fmi_version=version, interface=interface)`` per test process (per xdist worker), so the round
trips (tests/test_fmu_round_trip.py) and the Model Exchange runs
(tests/test_fmu_model_exchange_export.py) of one example use one file.  Across processes the
binary comes from the run's build cache (kind "fmu", keyed by the generated sources:
:func:`fmi_adjoint.export.fmu_export.build_fmu_binary`), and the interface is no part of it,
so an export of the same example with another interface is a cache hit too.  The FMUs are read
only; the folder is removed when the process ends.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from fmi_adjoint.examples import example_path
from fmi_adjoint.export import DEFAULT_INTERFACE, export_fmu


#: The examples tested alone (tests/bundled.py) whose FMUs the Model Exchange runs and the
#: round trips build, in one FMI version each, alternating: their FMUs are no part of the
#: per-example loops (macpherson about 24 s of CPU cold, beam_ffrf 5 s; flexible_pendulum's
#: FMI 2 FMU is that of tests/test_flexible_model_file.py).  The flexible MacPherson suspension
#: is left out (tests/test_fmu_model_exchange_export.py says why).
ALONE_VERSIONS = {"macpherson": 3, "beam_ffrf": 2, "flexible_pendulum": 2}


@functools.cache
def _folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="fmi-adjoint-test-fmus-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


@functools.cache
def exported_fmu(name: str, version: int, interface: str = DEFAULT_INTERFACE) -> Path:
    """The bundled example ``name`` exported for FMI ``version`` with ``interface`` (the default
    export's settings otherwise), once per process."""
    return Path(export_fmu(example_path(name), _folder() / f"{name}_fmi{version}_{interface}.fmu",
                           fmi_version=version, interface=interface))
