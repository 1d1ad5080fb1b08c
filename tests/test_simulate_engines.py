"""`fmi-adjoint simulate` runs the native C engine (the code inside exported FMUs) when it can,
so an exported FMU reproduces it exactly; `--engine python` runs the reference engine used for
gradients (compared with the C engine in tests/test_native_engine.py)."""

from __future__ import annotations

import numpy as np
import pytest

from fmi_adjoint import load_model, read_csv
from fmi_adjoint.cli.main import main
from fmi_adjoint.examples import example_path
from fmi_adjoint.export import export_fmu
from fmi_adjoint.native import find_c_compiler
from tolerances import EXACT
from bundled import looped_examples

SAME_ALGORITHM = 1e-9  # issue 5: FMU vs `fmi-adjoint simulate` at the communication points

try:
    find_c_compiler()
    HAVE_CC = True
except Exception:
    HAVE_CC = False
pytestmark = pytest.mark.skipif(not HAVE_CC, reason="needs a C compiler")


@pytest.mark.slow  # FMU builds of the bundled models
@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("name", looped_examples())
def test_fmu_equals_fmi_adjoint_simulate(tmp_path, name, version, capsys):
    import fmpy

    settings = load_model(example_path(name)).simulation
    n = min(round(settings.t_end / settings.step), 2000)
    t_end = n * settings.step
    csv = tmp_path / "sim.csv"
    assert main(["simulate", name, "--t-end", repr(t_end), "-o", str(csv)]) == 0
    assert "Python engine" not in capsys.readouterr().err  # the native engine ran
    reference = read_csv(csv)
    fmu = export_fmu(example_path(name), tmp_path / f"{name}.fmu", fmi_version=version)
    every = 5
    result = fmpy.simulate_fmu(str(fmu), start_time=0.0, stop_time=t_end, output_interval=every * settings.step,
                               output=list(reference.columns))
    rows = np.arange(0, n + 1, every)
    assert np.allclose(result["time"], reference.times[rows], rtol=0, atol=EXACT * t_end)
    for k, column in enumerate(reference.columns):
        expected = reference.values[rows, k]
        scale = np.max(np.abs(reference.values[:, k])) or 1.0
        assert np.max(np.abs(result[column] - expected)) / scale <= SAME_ALGORITHM, column


def test_engine_choice(tmp_path, capsys):
    # sdof runs to 6 pi, not a whole number of steps: both engines end with the same uneven
    # last step (issue 11 made the native engine run the time grid of the Python engine).
    for engine in ("auto", "native", "python"):
        assert main(["simulate", "sdof", "--step", "1e-2", "--engine", engine,
                     "-o", str(tmp_path / f"{engine}.csv")]) == 0
        assert "using the Python engine" not in capsys.readouterr().err
    auto, native, python = (read_csv(tmp_path / f"{e}.csv") for e in ("auto", "native", "python"))
    assert np.array_equal(native.times, python.times) and native.times[-1] == 6 * np.pi
    assert np.array_equal(auto.values, native.values)
    assert np.max(np.abs(native.values - python.values)) <= EXACT
