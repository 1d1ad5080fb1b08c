"""The FMU of the flexible MacPherson suspension (issue 25, "What must be shown": an FMU of the
flexible suspension runs in fmpy bit-identically to the in-process engine).

``macpherson_flexible`` (Vanpaemel et al., seed 003, Sec. 5.1: flexible control arm and
knuckle in flexible natural coordinates) is exported by :func:`fmi_adjoint.export.export_fmu`
(FMI 3, its mesh files carried in ``resources/``) and run by ``fmpy.simulate_fmu`` as a
Co-Simulation FMU (the engine's own scheme inside) for a few steps of the model's own step;
the in-process native engine (the suite's shared one: ``example_engine`` of tests/conftest.py,
built once through the run's build cache, as tests/test_macpherson_flexible.py uses it) runs
the same steps with the same scheme.  Same C code and scheme: the times and every output agree to EXACT relative to the
output's largest value, and bit for bit (as the other FMU-against-engine tests,
tests/test_flexible_model_file.py and tests/test_fmu_export.py); the import of the FMU is
trusted (``archive.native``: its embedded model rebuilds to the same binary).

The suspension is left out of the per-example FMU loops (tests/bundled.py: its build is too
costly to repeat); this file is its FMU test.
"""

from __future__ import annotations

import numpy as np
import pytest
from tolerances import EXACT

from fmi_adjoint.examples import example_path
from fmi_adjoint.integrate.schemes import scheme_from_settings
from fmi_adjoint.toolchain import c_compiler

if c_compiler() is None:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: the FMU cannot be built", allow_module_level=True)

fmpy = pytest.importorskip("fmpy")

NAME = "macpherson_flexible"
#: Steps of the model's step (1 ms) in the compared run: the strut load and the flexible
#: bodies' static modes act from the first step.
STEPS = 20


@pytest.mark.slow  # the suspension's build and its FMU's compilation (minutes of CPU cold)
def test_the_flexible_suspensions_fmu_runs_in_fmpy_as_the_in_process_engine(example_engine, tmp_path):
    from fmi_adjoint.export import export_fmu
    from fmi_adjoint.fmu.archive import open_fmu

    engine = example_engine(NAME)
    settings = engine.compiled.model.simulation
    fmu = export_fmu(example_path(NAME), tmp_path / f"{NAME}.fmu", fmi_version=3)
    result = fmpy.simulate_fmu(str(fmu), fmi_type="CoSimulation", stop_time=STEPS * settings.step,
                               output_interval=settings.step)
    t, y = engine.library.simulate(t_end=STEPS * settings.step, step=settings.step,
                                   solver=scheme_from_settings(settings))
    assert len(result) == len(t) == STEPS + 1
    assert np.max(np.abs(result["time"] - t)) <= EXACT * t[-1]
    for k, name in enumerate(engine.compiled.output_names):
        scale = np.max(np.abs(y[:, k]))
        assert scale > 0, name
        assert np.max(np.abs(result[name] - y[:, k])) <= EXACT * scale, name
        assert np.array_equal(result[name], y[:, k]), f"{name}: the FMU and the in-process engine differ"
    with open_fmu(fmu) as archive:
        assert archive.native is not None, archive.native_distrust
