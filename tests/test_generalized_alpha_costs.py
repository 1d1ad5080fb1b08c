"""Every cost and the identification work with generalized-alpha (issue 13, part 3), and the
C engine computes the schemes' constants exactly as Python does.

On slider_crank (mass matrix M(q, p), two constraints, parameters in M, C and the initial
state) run with :class:`~fmi_adjoint.integrate.GeneralizedAlpha`: the native discrete
adjoint of each cost kind (time series, Fourier coefficients, engine orders, POD modal
coordinates) equals fourth-order central differences of the same discrete cost, and an
identification from noise-free generalized-alpha data recovers the parameters.  The
costs read only the sampled outputs, so the scheme enters through the trajectory and the
sweeps; these tests would fail if any of them still assumed HHT (e.g. dropped the adjoint of
the pseudo-acceleration recursion).
"""

from __future__ import annotations

import ctypes
import math

import numpy as np
import pytest

from fmi_adjoint import HHT, Experiment, GeneralizedAlpha, IdentificationProblem
from fmi_adjoint.costs import EngineOrderCost, FourierCoefficients, FourierCost, LeastSquaresCost, PODCost, RunUp
from fmi_adjoint.identify import identify
from tolerances import ADJOINT_VS_FORWARD, GRADIENT_VS_FD

SOLVER = GeneralizedAlpha(rho_inf=0.8)
T_END = 0.6
PARAMS = ("m_r", "r", "c_s", "phi0")  # mass matrix, constraint, force, initial state
TRUE = {"m_r": 0.55, "r": 0.105, "c_s": 550.0, "phi0": 0.35}


@pytest.fixture(scope="module")
def crank(example_engine):
    engine = example_engine("slider_crank")
    model = engine.compiled
    truth = engine.simulate(model.parameter_vector(TRUE), t_end=T_END, solver=SOLVER)
    return engine, truth


def _problem(engine, cost) -> IdentificationProblem:
    experiment = Experiment(engine.compiled, cost, t_end=T_END, solver=SOLVER, engine=engine)
    return IdentificationProblem([experiment], PARAMS)


def _costs(engine, truth) -> dict:
    model = engine.compiled
    t = truth.t
    Y = truth.outputs()
    xs, speed = Y[:, model.output_index("xs")], Y[:, model.output_index("crank_speed")]
    coefficients = FourierCoefficients(t, 2 * np.pi * np.arange(1, 6) / t[-1], window="hann")
    A, B = coefficients(xs)
    runup = RunUp(3000.0, 6000.0, 0.0, T_END)  # windows of +-2 revolutions inside [0, T]
    speeds = np.array([3600.0, 4500.0, 5400.0])
    orders = EngineOrderCost(t, "xs", 1.0, speeds, np.full(speeds.size, 1e-3), runup)
    channels = ("xs", "slider_acc", "rod_force_x")
    data = Y[::4][:, [model.output_index(c) for c in channels]]
    scales = np.sqrt(np.mean(data**2, axis=0))
    return {
        "time": LeastSquaresCost(t[::4], data, channels, scales=scales),
        "fourier": FourierCost(coefficients, "xs", measured_A=A, measured_B=B, kind="power"),
        "orders": orders,
        "pod": PODCost(t[::4], np.column_stack([xs[::4], speed[::4]]), ("xs", "crank_speed"), modes=(1, 2)),
    }


@pytest.mark.parametrize("kind", ["time", "fourier", "orders", "pod"])
def test_adjoint_of_every_cost_equals_central_differences(crank, kind):
    engine, truth = crank
    problem = _problem(engine, _costs(engine, truth)[kind])
    x = problem.start.copy()  # the model's defaults: off the truth, so every cost is non-zero
    adjoint = problem.evaluate(x, "adjoint")
    forward = problem.evaluate(x, "forward")
    fd = problem.finite_differences(x, rel=1e-3, order=4)
    scale = np.max(np.abs(fd))
    assert adjoint.J > 0 and scale > 0
    assert np.max(np.abs(adjoint.gradient - fd)) <= GRADIENT_VS_FD * scale, (adjoint.gradient, fd)
    assert np.max(np.abs(adjoint.gradient - forward.gradient)) <= ADJOINT_VS_FORWARD * scale


def test_the_gradient_is_of_the_generalized_alpha_cost(crank):
    """The same data fitted with HHT gives another cost: the scheme really reaches the run."""
    engine, truth = crank
    cost = _costs(engine, truth)["time"]
    x = np.array([TRUE[name] for name in PARAMS])
    at_truth = _problem(engine, cost).evaluate(x, "adjoint")
    assert at_truth.J <= 1e-20  # data of the same scheme: zero residual at the truth
    hht = IdentificationProblem([Experiment(engine.compiled, cost, t_end=T_END, engine=engine)], PARAMS)
    assert hht.evaluate(x, "adjoint").J > 1e6 * max(at_truth.J, 1e-30)


def test_identification_with_generalized_alpha_recovers_the_parameters(crank):
    engine, truth = crank
    problem = _problem(engine, _costs(engine, truth)["time"])
    result = identify(problem, "least_squares", progress=None)
    for name, value in zip(PARAMS, result.parameters):
        assert value == pytest.approx(TRUE[name], rel=1e-6), name


class _Coefficients(ctypes.Structure):
    """``fa_coefficients`` of fa_engine.h, field for field."""

    _fields_ = [(name, ctypes.c_double) for name in ("beta", "gamma", "c_m", "c_old", "c_a", "c_ao", "c_bo")]


@pytest.mark.parametrize("solver", [HHT(alpha=0.0), HHT(alpha=-0.05), HHT(alpha=-1 / 3), GeneralizedAlpha(rho_inf=0.0),
                                    GeneralizedAlpha(rho_inf=0.37), GeneralizedAlpha(rho_inf=0.9),
                                    GeneralizedAlpha(rho_inf=1.0)], ids=lambda s: s.describe())
def test_c_and_python_compute_the_same_constants_bit_for_bit(crank, solver):
    """One formula per constant, written twice (schemes.py and fa_scheme_coefficients): the
    engines can only agree to round-off if these agree exactly."""
    engine, _ = crank
    function = engine.library.library.fa_scheme_coefficients
    function.argtypes = [ctypes.c_int, ctypes.c_double, ctypes.POINTER(_Coefficients)]
    got = _Coefficients()
    assert function(solver.code, solver.parameter, ctypes.byref(got)) == 0
    want = solver.coefficients()
    for name, _ in _Coefficients._fields_:
        assert getattr(got, name) == getattr(want, name), name


@pytest.mark.parametrize("code, parameter", [(0, 0.1), (0, -0.34), (1, -0.01), (1, 1.01), (2, 0.5), (1, math.nan)])
def test_c_refuses_constants_out_of_range(crank, code, parameter):
    engine, _ = crank
    function = engine.library.library.fa_scheme_coefficients
    function.argtypes = [ctypes.c_int, ctypes.c_double, ctypes.POINTER(_Coefficients)]
    assert function(code, parameter, ctypes.byref(_Coefficients())) == -1
