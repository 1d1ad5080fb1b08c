"""The C engine of exported FMUs runs the same algorithm as the Python engine.

Both print the same symbolic derivatives (``ModelDerivatives``) and implement the same
HHT step, Newton iteration and consistent initialization; only the dense LU solver and
libm differ, so the outputs agree to round-off.  Accelerations and Lagrange multipliers
of an index-3 scheme amplify round-off through the 1/(beta h^2)-scaled constraint rows
(measured on slider_crank: positions 1e-15, acceleration and multiplier 1.6e-9), so
outputs built from them are compared at that measured floor.
"""

from __future__ import annotations

import numpy as np
import pytest

from fmi_adjoint import HHT, ConvergenceError, compile_model, load_model, simulate
from fmi_adjoint.integrate.schemes import scheme_from_settings
from fmi_adjoint.examples import example_path
from fmi_adjoint.native import build_native, find_c_compiler
from tolerances import INDEX3_ROUNDOFF
from bundled import looped_examples

SAME_ALGORITHM = 1e-9          # issue 5: FMU vs in-process at communication points


def _uses_a_or_lambda(model, name) -> bool:
    expr = next(o for o in model.outputs if o.name == name).expression
    return any(key in str(expr) for key in ("der2(", "lam(", "reaction("))


@pytest.fixture(scope="module", params=looped_examples())
def pair(request):
    try:
        find_c_compiler()
    except Exception:
        pytest.skip("no C compiler")
    model = load_model(example_path(request.param))
    return model, compile_model(model), build_native(model)


def test_outputs_equal_the_python_engine(pair):
    model, compiled, native = pair
    s = model.simulation
    t_end = min(round(s.t_end / s.step), 4000) * s.step
    traj = simulate(compiled, t_end=t_end)
    times, y = native.simulate(t_end=t_end, step=s.step, solver=scheme_from_settings(s))
    assert np.array_equal(times, traj.t)
    reference = traj.outputs()
    for k, name in enumerate(compiled.output_names):
        scale = np.max(np.abs(reference[:, k])) or 1.0
        tol = INDEX3_ROUNDOFF if (compiled.m and _uses_a_or_lambda(model, name)) else SAME_ALGORITHM
        assert np.max(np.abs(y[:, k] - reference[:, k])) / scale <= tol, name


def test_parameters_reach_the_c_engine(pair):
    model, compiled, native = pair
    s = model.simulation
    p = compiled.defaults * (1 + 0.01 * np.arange(1, compiled.n_p + 1) / compiled.n_p)
    t_end = min(round(s.t_end / s.step), 500) * s.step
    traj = simulate(compiled, p, t_end=t_end)
    _, y = native.simulate(p, t_end=t_end, step=s.step, solver=scheme_from_settings(s))
    scale = np.max(np.abs(traj.outputs()), axis=0) + 1e-300
    assert np.max(np.abs(y - traj.outputs()) / scale) <= INDEX3_ROUNDOFF


def test_a_newton_failure_is_reported_not_crashed(pair):
    model, compiled, native = pair
    p = compiled.defaults.copy()
    p[:] = np.nan
    with pytest.raises(ConvergenceError, match="NaN or infinite"):
        native.simulate(p, t_end=10 * model.simulation.step, step=model.simulation.step, solver=HHT(alpha=-0.1))
    # The instance stays usable.
    _, y = native.simulate(t_end=2 * model.simulation.step, step=model.simulation.step, solver=HHT(alpha=-0.1))
    assert np.all(np.isfinite(y))
