"""Every cost and the identification work with generalized-alpha (issue 13, part 3); the C
engine computes the schemes' constants exactly as Python does, refuses crafted states, and
the sweeps are exact also over an uneven last step.

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

from fmi_adjoint import HHT, ConvergenceError, Experiment, GeneralizedAlpha, IdentificationProblem
from fmi_adjoint.engines import PythonEngine
from fmi_adjoint.costs import EngineOrderCost, FourierCoefficients, FourierCost, LeastSquaresCost, PODCost, RunUp
from fmi_adjoint.identify import identify
from tolerances import ADJOINT_VS_FORWARD, EXACT, GRADIENT_VS_FD, NOISE_FREE_RECOVERY, ZERO_RESIDUAL_SAME_ENGINE

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
    assert at_truth.J <= ZERO_RESIDUAL_SAME_ENGINE  # data of the same scheme: zero residual at the truth
    hht = IdentificationProblem([Experiment(engine.compiled, cost, t_end=T_END, engine=engine)], PARAMS)
    assert hht.evaluate(x, "adjoint").J > 1e6 * max(at_truth.J, 1e-30)


def test_identification_with_generalized_alpha_recovers_the_parameters(crank):
    engine, truth = crank
    problem = _problem(engine, _costs(engine, truth)["time"])
    result = identify(problem, "least_squares", progress=None)
    for name, value in zip(PARAMS, result.parameters):
        assert value == pytest.approx(TRUE[name], rel=NOISE_FREE_RECOVERY), name


class _Coefficients(ctypes.Structure):
    """``fa_coefficients`` of fa_engine.h, field for field."""

    _fields_ = [(name, ctypes.c_double) for name in ("beta", "gamma", "c_m", "c_old", "c_a", "c_ao", "c_bo")]


def _coefficients_function(engine):
    """``fa_scheme_coefficients`` of the engine's library, with a prototype of its own (the
    shared library object is left as it is)."""
    prototype = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_double, ctypes.POINTER(_Coefficients))
    return prototype(("fa_scheme_coefficients", engine.library.library))


@pytest.mark.parametrize("solver", [HHT(alpha=0.0), HHT(alpha=-0.05), HHT(alpha=-1 / 3), GeneralizedAlpha(rho_inf=0.0),
                                    GeneralizedAlpha(rho_inf=0.37), GeneralizedAlpha(rho_inf=0.9),
                                    GeneralizedAlpha(rho_inf=1.0)], ids=lambda s: s.describe())
def test_c_and_python_compute_the_same_constants_bit_for_bit(crank, solver):
    """One formula per constant, written twice (schemes.py and fa_scheme_coefficients): the
    engines can only agree to round-off if these agree exactly."""
    engine, _ = crank
    function = _coefficients_function(engine)
    got = _Coefficients()
    assert function(solver.code, solver.parameter, ctypes.byref(got)) == 0
    want = solver.coefficients()
    for name, _ in _Coefficients._fields_:
        assert getattr(got, name) == getattr(want, name), name


@pytest.mark.parametrize("code, parameter", [(0, 0.1), (0, -0.34), (1, -0.01), (1, 1.01), (2, 0.5), (1, math.nan)])
def test_c_refuses_constants_out_of_range(crank, code, parameter):
    engine, _ = crank
    assert _coefficients_function(engine)(code, parameter, ctypes.byref(_Coefficients())) == -1


@pytest.mark.parametrize("field, value", [(14, 0.5), (14, 2.0), (14, -1.0), (15, 1.5), (15, -0.2), (15, math.nan)])
def test_crafted_checkpoint_states_are_refused(crank, field, value):
    """The engine state carries the scheme code (field 14) and rho_inf (15): a state with a
    code that is not a scheme or a constant out of range is refused before any conversion."""
    engine, _ = crank
    grid = np.linspace(0.0, 0.01, 11)
    _, states, _ = engine.library.run_checkpointed(grid, engine.compiled.defaults.copy(), SOLVER, every=5)
    state = states[0].copy()
    state[14] = 1.0 if field == 15 else state[14]  # a generalized-alpha state, so that rho_inf is read
    engine.library.recompute(grid, 0, 3, state)  # the untouched state is accepted
    state[field] = value
    with pytest.raises(ConvergenceError, match="checkpoint state is invalid"):
        engine.library.recompute(grid, 0, 3, state)


@pytest.mark.parametrize("kind", ["native", "python"])
def test_sweeps_are_exact_over_an_uneven_last_step(crank, kind):
    """t_end = (N + 0.3) h: the last step is 1.3 h, so h_{i+1} != h_i in the couplings of the
    last two steps (f1, f2 and the pseudo-acceleration recursion): adjoint = forward
    sensitivities = central differences there too."""
    engine, truth = crank
    engine = engine if kind == "native" else PythonEngine(engine.compiled)
    t_end = 0.2 + 0.3e-3
    model = engine.compiled
    channels = ("xs", "slider_acc", "rod_force_x")
    reference = engine.simulate(model.parameter_vector(TRUE), t_end=t_end, solver=SOLVER)
    assert reference.t[-1] - reference.t[-2] == pytest.approx(1.3e-3, rel=EXACT)
    Y = reference.outputs()[:, [model.output_index(c) for c in channels]]
    cost = LeastSquaresCost(reference.t[-40:], Y[-40:], channels, scales=np.abs(Y).max(axis=0))
    problem = IdentificationProblem([Experiment(model, cost, t_end=t_end, solver=SOLVER, engine=engine)], PARAMS)
    x = problem.start.copy()
    adjoint = problem.evaluate(x, "adjoint").gradient
    forward = problem.evaluate(x, "forward").gradient
    fd = problem.finite_differences(x, rel=1e-3, order=4)
    scale = np.max(np.abs(fd))
    assert np.max(np.abs(adjoint - forward)) <= ADJOINT_VS_FORWARD * scale
    assert np.max(np.abs(adjoint - fd)) <= GRADIENT_VS_FD * scale, (adjoint, fd)
