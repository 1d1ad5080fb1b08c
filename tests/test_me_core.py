"""The Model Exchange core of exported FMUs (issue 30, parts 1-2): fmi_adjoint/export/fmi/fa_fmu_me.c.

The core is compiled with a model's generated C and the engine runtime into a shared library
(the build helpers of fmi_adjoint.native: model_c_sources, write_sources, compile_shared, the
cached sparse solver) and driven through ctypes, before any FMI layer exists.  It is checked
against the in-process engine (same generated functions, index-3 HHT) and against itself:

* the derivatives xdot = (v, a) at the engine's consistent initial state equal the engine's
  a_0 and lambda_0 (both solve M a + C_q^T lambda = Q with the acceleration constraints);
  along a trajectory only where HHT (alpha = 0) solves the same equations (no constraints:
  index-3 HHT does not enforce the acceleration constraints at a step);
* integrating xdot with scipy's DOP853 reproduces the engine's trajectory to its O(h^2);
* directional derivatives equal central differences of xdot and y, for q, v and p seeds;
* adjoint products satisfy w^T (J d) = (J^T w)^T d;
* the declared dependencies equal the non-zeros of the Jacobian found numerically;
* the mass-orthogonal projection brings a perturbed state back onto the constraints, and an
  importer's event loop (completed step, projection) keeps a loose integration on them;
* a massless coordinate without a constraint (a Maxwell node) is refused by name;
* band and sparse storage of the KKT matrix give the dense results.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from tolerances import EXACT, FEW_ULPS, GRADIENT_VS_FD, ME_CORE_VS_ENGINE, ORDER

from fmi_adjoint import NativeEngine, load_model
from fmi_adjoint.compiled import Derivation, compile_model
from fmi_adjoint.examples import example_path
from fmi_adjoint.integrate import HHT, GeneralizedAlpha
from fmi_adjoint.native import model_c_sources
from fmi_adjoint.native.library import ENGINE_RUNTIME, SPARSE_RUNTIME, write_sources
from fmi_adjoint.native.model_header import uses_sparse_solver
from fmi_adjoint.native.solver import IN_PROCESS_LINK_FLAGS, sparse_solver
from fmi_adjoint.sparsity import MatrixStorage, forced_storage
from fmi_adjoint.toolchain import c_compiler, compile_shared

ME_SOURCES = tuple(Path(__file__).resolve().parents[1] / "fmi_adjoint" / "export" / "fmi" / name
                   for name in ("fa_fmu_me.h", "fa_fmu_me.c"))
EXAMPLES = ("sdof", "triple_pendulum", "triple_pendulum_bodies", "slider_crank", "slider_crank_bodies", "heavy_top",
            "engine_mount")
#: Parameters on which the derivatives depend structurally but not numerically: the heavy
#: top's accelerations are independent of its mass (gravity and inertia both scale with m).
CANCELLING_PARAMETERS = {"heavy_top": ("m",)}
#: Examples with a mode the engine does not resolve at h = 1e-4: engine_mount's hydro mass
#: (m_H = 1.9 g on c_H = 3.75e5 N/m, omega = 1.4e4 rad/s, omega h = 1.4).  Its states agree
#: within the tier, but neither the order (measured 2.5, then 1.4) nor the accelerations (the
#: outputs, 3.4e-3) settle, and smaller steps make the index-3 accelerations ill-conditioned
#: (Newton tolerance / h^2): only the states are compared.
UNRESOLVED_MODE = ("engine_mount",)

#: Examples whose constraints do not drift measurably in 0.5 s (Radau, rtol 1e-6): the
#: pendula barely swing (small excitation; max|C| 2.5e-16 and 6.3e-16), engine_mount's lever
#: is linear in q (9.0e-14).  slider_crank drifts to 1.5e-10, heavy_top to 5.1e-8.
NO_DRIFT = ("triple_pendulum", "triple_pendulum_bodies", "engine_mount")
#: FA_ME_DRIFT_TOLERANCE of fa_fmu_me.h (the default a new instance starts with).
DRIFT_TOLERANCE = 1e-8
_DOUBLES = np.ctypeslib.ndpointer(dtype=np.float64, flags="C_CONTIGUOUS")
_BYTES = np.ctypeslib.ndpointer(dtype=np.uint8, flags="C_CONTIGUOUS")


def _optional(array: np.ndarray | None):
    return None if array is None else np.ascontiguousarray(array, dtype=np.float64).ctypes.data_as(
        ctypes.POINTER(ctypes.c_double))


class MeCore:
    """One fa_me instance of a compiled library (sizes from the model)."""

    def __init__(self, lib: ctypes.CDLL, compiled):
        self.lib, self.name, self.parameter_names = lib, compiled.model.name, compiled.parameter_names
        self.n, self.m, self.n_p, self.n_y = compiled.n, compiled.m, compiled.n_p, compiled.n_y
        self.handle = lib.fa_me_new()
        assert self.handle

    def close(self) -> None:
        self.lib.fa_me_free(self.handle)

    def message(self) -> str:
        return self.lib.fa_me_message(self.handle).decode()

    def _check(self, status: int) -> None:
        assert status == 0, self.message()

    def initialize(self, t0: float = 0.0) -> np.ndarray:
        self._check(self.lib.fa_me_initialize(self.handle, ctypes.c_double(t0)))
        return self.states()

    def set(self, t: float, x: np.ndarray, p: np.ndarray | None = None) -> None:
        self.lib.fa_me_set_time(self.handle, ctypes.c_double(t))
        self.lib.fa_me_set_states(self.handle, np.ascontiguousarray(x, dtype=np.float64))
        if p is not None:
            self.lib.fa_me_set_parameters(self.handle, np.ascontiguousarray(p, dtype=np.float64))

    def states(self) -> np.ndarray:
        x = np.empty(2 * self.n)
        self.lib.fa_me_get_states(self.handle, x)
        return x

    def parameters(self) -> np.ndarray:
        pointer = self.lib.fa_me_parameters(self.handle)
        return np.array([pointer[k] for k in range(self.n_p)])

    def derivatives(self) -> tuple[np.ndarray, np.ndarray]:
        xdot, lam = np.empty(2 * self.n), np.empty(max(self.m, 1))
        self._check(self.lib.fa_me_derivatives(self.handle, xdot, lam))
        return xdot, lam[:self.m]

    def outputs(self) -> np.ndarray:
        y = np.empty(self.n_y)
        self._check(self.lib.fa_me_outputs(self.handle, y))
        return y

    def directional(self, dx: np.ndarray | None, dp: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        dxdot, dy = np.empty(2 * self.n), np.empty(self.n_y)
        self._check(self.lib.fa_me_directional(self.handle, _optional(dx), _optional(dp),
                                               _optional(dxdot), _optional(dy)))
        return dxdot, dy

    def adjoint(self, wxdot: np.ndarray | None, wy: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        gx, gp = np.empty(2 * self.n), np.empty(max(self.n_p, 1))
        self._check(self.lib.fa_me_adjoint(self.handle, _optional(wxdot), _optional(wy), _optional(gx),
                                           _optional(gp)))
        return gx, gp[:self.n_p]

    def dependencies(self) -> tuple[np.ndarray, ...]:
        nx = 2 * self.n
        shapes = ((nx, nx), (nx, self.n_p), (self.n_y, nx), (self.n_y, self.n_p))
        arrays = [np.zeros(max(r * c, 1), dtype=np.uint8) for r, c in shapes]
        assert self.lib.fa_me_dependencies(*arrays) == 0
        return tuple(a[:r * c].reshape(r, c).astype(bool) for a, (r, c) in zip(arrays, shapes))

    def drift(self) -> tuple[float, float]:
        c, cv = ctypes.c_double(), ctypes.c_double()
        self.lib.fa_me_drift(self.handle, ctypes.byref(c), ctypes.byref(cv))
        return c.value, cv.value

    def completed_step(self) -> bool:
        flag = ctypes.c_int()
        self.lib.fa_me_completed_step(self.handle, ctypes.byref(flag))
        return bool(flag.value)

    def project(self) -> bool:
        changed = ctypes.c_int()
        self._check(self.lib.fa_me_project(self.handle, ctypes.byref(changed)))
        return bool(changed.value)

    def tolerance(self) -> float:
        return float(self.lib.fa_me_drift_tolerance(self.handle))

    def set_drift_tolerance(self, tolerance: float) -> None:
        self.lib.fa_me_set_drift_tolerance(self.handle, ctypes.c_double(tolerance))


def build_me_core(name: str, folder: Path, storage: MatrixStorage | None = None):
    """Compile example ``name``'s generated C (its matrices in ``storage``, None: the automatic
    choice), the engine runtime and fa_fmu_me.c into one shared library; returns (library,
    model)."""
    if c_compiler() is None:
        pytest.skip("no C compiler")
    model = load_model(example_path(name))
    with forced_storage(storage):
        generated = model_c_sources(Derivation(model))
    solver = sparse_solver(what=f"model '{name}'") if uses_sparse_solver(generated) else None
    runtime = ENGINE_RUNTIME + (SPARSE_RUNTIME if solver else ()) + ME_SOURCES
    sources = write_sources(generated, folder, runtime)
    library = folder / "fa_me.so"
    compile_shared(sources, library, flags=("-DFA_EXPORT_ALL",), what=f"the ME core of '{name}'",
                   archives=(solver.archive,) if solver else (), linker=solver.compiler if solver else None,
                   link_flags=IN_PROCESS_LINK_FLAGS if solver else ())
    lib = ctypes.CDLL(str(library))
    lib.fa_me_new.restype = ctypes.c_void_p
    lib.fa_me_message.restype = ctypes.c_char_p
    lib.fa_me_parameters.restype = ctypes.POINTER(ctypes.c_double)
    lib.fa_me_drift_tolerance.restype = ctypes.c_double
    lib.fa_me_time.restype = ctypes.c_double
    lib.fa_me_supported.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    for fn in ("fa_me_free", "fa_me_message", "fa_me_parameters", "fa_me_drift_tolerance", "fa_me_time"):
        getattr(lib, fn).argtypes = [ctypes.c_void_p]
    for fn in ("fa_me_set_states", "fa_me_get_states", "fa_me_set_parameters"):
        getattr(lib, fn).argtypes = [ctypes.c_void_p, _DOUBLES]
    for fn in ("fa_me_derivatives",):
        getattr(lib, fn).argtypes = [ctypes.c_void_p, _DOUBLES, _DOUBLES]
    lib.fa_me_outputs.argtypes = [ctypes.c_void_p, _DOUBLES]
    lib.fa_me_set_time.argtypes = [ctypes.c_void_p, ctypes.c_double]
    lib.fa_me_set_drift_tolerance.argtypes = [ctypes.c_void_p, ctypes.c_double]
    lib.fa_me_initialize.argtypes = [ctypes.c_void_p, ctypes.c_double]
    lib.fa_me_directional.argtypes = [ctypes.c_void_p] + [ctypes.c_void_p] * 4
    lib.fa_me_adjoint.argtypes = [ctypes.c_void_p] + [ctypes.c_void_p] * 4
    lib.fa_me_dependencies.argtypes = [_BYTES] * 4
    lib.fa_me_dependencies.restype = ctypes.c_int
    lib.fa_me_drift.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    lib.fa_me_completed_step.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.fa_me_project.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    return lib, model


@pytest.fixture(scope="module", params=EXAMPLES)
def core(request, tmp_path_factory):
    lib, model = build_me_core(request.param, tmp_path_factory.mktemp(request.param))
    engine = NativeEngine.build(model)
    me = MeCore(lib, engine.compiled)
    yield me, engine
    me.close()


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b), initial=0.0) / max(np.max(np.abs(b), initial=0.0), 1.0))


def test_derivatives_at_the_consistent_initial_state_equal_the_engines(core):
    """At t0 both solve the same index-1 equations (rows G5, G6 of G(z)) at the same (q, v)."""
    me, engine = core
    n = me.n
    trajectory = engine.simulate(t_end=0.01, step=1e-3, solver=HHT(alpha=0.0))
    x0 = me.initialize(0.0)
    assert _relative(x0, np.concatenate([trajectory.q[0], trajectory.v[0]])) <= EXACT
    xdot, lam = me.derivatives()
    assert _relative(xdot[:n], trajectory.v[0]) == 0.0
    assert _relative(xdot[n:], trajectory.a[0]) <= EXACT
    assert _relative(lam, trajectory.lam[0]) <= EXACT
    assert _relative(me.outputs(), trajectory.outputs()[0]) <= EXACT


def test_unconstrained_accelerations_equal_hht_at_every_step(core):
    """Without constraints, HHT with alpha = 0 satisfies M a = Q exactly at each step's (q, v)."""
    me, engine = core
    if me.m:
        pytest.skip("index-3 HHT does not enforce the acceleration constraints at a step")
    trajectory = engine.simulate(t_end=0.5, step=1e-3, solver=HHT(alpha=0.0))
    for i in range(0, trajectory.t.size, 50):
        me.set(float(trajectory.t[i]), np.concatenate([trajectory.q[i], trajectory.v[i]]))
        assert _relative(me.derivatives()[0][me.n:], trajectory.a[i]) <= EXACT


def _integrate(me: MeCore, samples: np.ndarray) -> np.ndarray:
    """xdot of the core integrated by DOP853 from the consistent initial state; rows: samples."""
    def rhs(t, x):
        me.set(t, x)
        return me.derivatives()[0]

    solution = solve_ivp(rhs, (samples[0], samples[-1]), me.initialize(samples[0]), method="DOP853", rtol=1e-11,
                         atol=1e-13, t_eval=samples)
    assert solution.success, solution.message
    return solution.y.T


def test_integrating_the_derivatives_reproduces_the_engine(core):
    """DOP853 on xdot against the engine's index-3 generalized-alpha (rho_inf = 0.9, second
    order in q and v; HHT with alpha = 0 is too, but its Newton fails on the heavy top, and
    with alpha < 0 the engine's HHT converges at order 1 in v).  The states differ by the
    engine's O(h^2) (h = 2e-4 and 1e-4: within the tier and at the order 2), the outputs,
    which hold accelerations or multipliers, likewise at h = 1e-4.  The drift of the
    unprojected integration stays within the tolerance."""
    me, engine = core
    t_end, every = 0.5, 0.05
    errors, outputs = [], []
    for step in (2e-4, 1e-4):
        trajectory = engine.simulate(t_end=t_end, step=step, solver=GeneralizedAlpha(rho_inf=0.9))
        k = round(every / step)
        states = _integrate(me, trajectory.t[::k])
        errors.append(_relative(states, np.hstack([trajectory.q[::k], trajectory.v[::k]])))
    for t, x in zip(trajectory.t[::k], states):
        me.set(t, x)
        outputs.append(me.outputs())
    assert errors[1] <= ME_CORE_VS_ENGINE
    if me.name not in UNRESOLVED_MODE:
        assert abs(np.log2(errors[0] / errors[1]) - 2.0) <= ORDER, errors
        assert _relative(np.array(outputs), trajectory.outputs()[::k]) <= ME_CORE_VS_ENGINE
    position, velocity = me.drift()
    assert position <= me.tolerance() and velocity <= me.tolerance()


def _state_away_from_equilibrium(me: MeCore, seed: int) -> np.ndarray:
    """A consistent state, projected from the initial one with random positions and
    velocities added, so that no term (or its derivative) vanishes by the symmetry of the
    initial state."""
    rng = np.random.default_rng(seed)
    x = me.initialize(0.0)
    x += rng.normal(scale=[0.05] * me.n + [0.3] * me.n)
    me.set(0.1, x)
    me.project()
    return me.states()


def _jacobians(me: MeCore, x: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """d(xdot, y)/dx and d(xdot, y)/dp from unit seeds of fa_me_directional."""
    me.set(0.1, x, p)
    nx = x.size
    jx = np.column_stack([np.concatenate(me.directional(e, None)) for e in np.eye(nx)])
    jp = np.column_stack([np.concatenate(me.directional(None, e)) for e in np.eye(me.n_p)]) if me.n_p else \
        np.zeros((nx + me.n_y, 0))
    return jx, jp


def _evaluate(me: MeCore, x: np.ndarray, p: np.ndarray) -> np.ndarray:
    me.set(0.1, x, p)
    return np.concatenate([me.derivatives()[0], me.outputs()])


def _check_column(f, x: np.ndarray, k: int, column: np.ndarray, what: str) -> None:
    """Column k of a Jacobian against the fourth-order central difference of f along x[k]
    (relative step 1e-3, of 1e-3 below |x[k]| = 1e-3): within GRADIENT_VS_FD of the column's
    size, plus the round-off floor of the difference (a few ulps of f over the step)."""
    h = 1e-3 * max(abs(x[k]), 1e-3)
    e = np.zeros_like(x)
    e[k] = h
    difference = (f(x - 2 * e) - 8 * f(x - e) + 8 * f(x + e) - f(x + 2 * e)) / (12 * h)
    floor = FEW_ULPS * np.max(np.abs(f(x))) / h
    error = np.max(np.abs(column - difference))
    assert error <= GRADIENT_VS_FD * max(np.max(np.abs(difference)), 1.0) + floor, f"column {what}: {error}"


def test_directional_derivatives_equal_central_differences(core):
    me, _ = core
    x = _state_away_from_equilibrium(me, 1)
    p = me.parameters()
    jx, jp = _jacobians(me, x, p)
    for k in range(x.size):
        _check_column(lambda xk: _evaluate(me, xk, p), x, k, jx[:, k], f"x[{k}]")
    for k in range(me.n_p):
        _check_column(lambda pk: _evaluate(me, x, pk), p, k, jp[:, k], f"p[{k}] ({me.parameter_names[k]})")


def test_adjoint_products_are_the_transposed_directional_derivatives(core):
    me, _ = core
    x = _state_away_from_equilibrium(me, 2)
    rng = np.random.default_rng(3)
    dx, dp = rng.normal(size=x.size), rng.normal(size=me.n_p)
    wxdot, wy = rng.normal(size=x.size), rng.normal(size=me.n_y)
    me.set(0.1, x)
    dxdot, dy = me.directional(dx, dp)
    gx, gp = me.adjoint(wxdot, wy)
    forward = wxdot @ dxdot + wy @ dy
    backward = gx @ dx + gp @ dp
    assert abs(forward - backward) <= EXACT * (abs(wxdot) @ abs(dxdot) + abs(wy) @ abs(dy) + 1.0)


def _non_zeros(jacobian: np.ndarray) -> np.ndarray:
    """Entries above round-off of their row (rows mix units: a, lambda, outputs)."""
    scale = np.max(np.abs(jacobian), axis=1, initial=0.0)[:, None]
    return np.abs(jacobian) > EXACT * np.maximum(scale, 1.0)


def test_declared_dependencies_equal_the_numerical_non_zeros(core):
    """The structural pattern (fa_me_dependencies) against unit-seed Jacobians at a generic
    state: never a non-zero outside it (ModelStructure must not omit a dependency), and no
    declared entry that is zero, except parameters whose effect cancels physically."""
    me, _ = core
    x = _state_away_from_equilibrium(me, 4)
    rng = np.random.default_rng(5)
    p = me.parameters() * (1.0 + 0.1 * rng.random(me.n_p))  # no accidental zero at round values
    jx, jp = _jacobians(me, x, p)
    xdot_x, xdot_p, y_x, y_p = me.dependencies()
    declared_x, declared_p = np.vstack([xdot_x, y_x]), np.vstack([xdot_p, y_p])
    found_x, found_p = _non_zeros(jx), _non_zeros(jp * np.maximum(np.abs(p), 1.0))
    assert not np.any(found_x & ~declared_x), np.argwhere(found_x & ~declared_x)
    assert not np.any(found_p & ~declared_p), np.argwhere(found_p & ~declared_p)
    assert np.array_equal(found_x, declared_x), np.argwhere(found_x != declared_x)
    # Cancelling parameters: declared for the accelerations, numerically zero there.
    cancelled = np.zeros_like(declared_p)
    cancelled[me.n:2 * me.n, [me.parameter_names.index(name) for name in CANCELLING_PARAMETERS.get(me.name, ())]] = 1
    assert not np.any(found_p & cancelled)
    assert np.array_equal(found_p | cancelled, declared_p | cancelled), np.argwhere(found_p != declared_p)


def test_projection_returns_a_drifted_state_to_the_constraints(core):
    me, _ = core
    if not me.m:
        pytest.skip("no constraints")
    x = me.initialize(0.0)
    me.set(0.0, x)
    assert not me.completed_step() and not me.project()
    rng = np.random.default_rng(6)
    drifted = x + 1e-4 * rng.normal(size=x.size)
    me.set(0.0, drifted)
    assert me.completed_step()
    assert me.project()
    position, velocity = me.drift()
    assert position <= me.tolerance() and velocity <= me.tolerance()
    assert not me.completed_step()
    projected = me.states()
    assert not me.project() and np.array_equal(me.states(), projected)  # a projection, idempotent
    # The derivatives at the projected state are the index-1 solution there: they do not
    # depend on how the state was reached (cache invalidated by the projection).
    xdot, _ = me.derivatives()
    me.set(0.0, projected)
    assert np.array_equal(me.derivatives()[0], xdot)


def test_an_event_loop_keeps_a_loose_integration_on_the_constraints(core):
    """The importer's loop (FMI: completedIntegratorStep, then event mode with the projection
    in NewDiscreteStates / UpdateDiscreteStates): Radau IIA at rtol 1e-6, with the core's
    exact d xdot/dx as its Jacobian, drifts beyond a drift tolerance of 1e-12, the core asks
    for event mode, and after each projection both violations are back within it."""
    me, _ = core
    if not me.m:
        pytest.skip("no constraints")
    me.set_drift_tolerance(1e-12)
    x, projections = me.initialize(0.0), 0

    def rhs(t, state):
        me.set(t, state)
        return me.derivatives()[0]

    def jacobian(t, state):
        me.set(t, state)
        return np.column_stack([me.directional(e, None)[0] for e in np.eye(state.size)])

    try:
        for t0 in np.arange(0.0, 0.5, 0.01):
            solution = solve_ivp(rhs, (t0, t0 + 0.01), x, method="Radau", jac=jacobian, rtol=1e-6, atol=1e-9)
            assert solution.success, solution.message
            me.set(t0 + 0.01, solution.y[:, -1])
            if me.completed_step():
                assert me.project()
                projections += 1
            position, velocity = me.drift()
            assert position <= me.tolerance() and velocity <= me.tolerance()
            x = me.states()
    finally:
        me.set_drift_tolerance(DRIFT_TOLERANCE)
    assert projections > 0 or me.name in NO_DRIFT


def test_a_massless_unconstrained_coordinate_is_refused_by_name(tmp_path):
    lib, model = build_me_core("engine_tvd", tmp_path)
    message = ctypes.create_string_buffer(1024)
    assert lib.fa_me_supported(message, len(message)) == -1
    text = message.value.decode()
    massless = [c.name for c in model.all_coordinates if c.mass == 0]
    assert massless and all(f"'{name}'" in text for name in massless), text
    assert "Model Exchange" in text


@pytest.mark.parametrize("storage", [MatrixStorage.BAND, MatrixStorage.SPARSE])
def test_every_matrix_storage_gives_the_same_derivatives(storage, tmp_path):
    """The KKT path in band and sparse storage (fa_kkt_factor / fa_kkt_solve, as the engine
    plans it for large models) against dense storage: values, directional and adjoint
    products agree to round-off."""
    results = []
    for kind in (MatrixStorage.DENSE, storage):
        lib, model = build_me_core("triple_pendulum_bodies", tmp_path / kind.name, kind)
        me = MeCore(lib, compile_model(model))
        x = _state_away_from_equilibrium(me, 7)
        rng = np.random.default_rng(8)
        dx, wxdot = rng.normal(size=x.size), rng.normal(size=x.size)
        results.append(np.concatenate([me.derivatives()[0], me.outputs(), *me.directional(dx, None),
                                       *me.adjoint(wxdot, None)]))
        me.close()
    assert _relative(results[1], results[0]) <= EXACT
