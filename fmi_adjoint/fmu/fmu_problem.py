"""Identification problems on FMUs through fmpy, with the gradient path chosen from what
the FMU offers (issue 6).

* ``adjoint``: an FMU exported by fmi-adjoint (``resources/model.toml`` and
  ``resources/export.json``) is identified on its embedded model with the native
  discrete adjoint: an ordinary :class:`~fmi_adjoint.identify.IdentificationProblem`,
  so the numbers are those of in-process identification.
* ``sensitivity``: a Model Exchange FMU with directional derivatives is integrated by
  the project's trapezoidal rule (:mod:`fmi_adjoint.integrate.ode`) and differentiated
  by forward sensitivities built from the FMU's Jacobian columns ``d(f, g)/d(x, p)``.
  On the first evaluation each parameter column is compared with differences of the
  right-hand side along the whole trajectory (state columns at up to 64 points); a column
  the FMU cannot give or gets wrong is replaced by those differences (per column, reported
  in the result).
* ``fd``: any other FMU: central finite differences of whole simulations (Co-Simulation
  through ``doStep``; Model Exchange through the trapezoidal rule), steps scaled by the
  nominal values, kept inside the bounds, evaluated in parallel over the parameters by
  several FMU worker processes that share the one extraction folder of the archive.

Every FMU instance lives in a worker process (:mod:`.session`, :mod:`.worker`): a crash, a
hang (``timeout``) or an interrupt of the binary ends in one error, the workers killed.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Mapping, Sequence

import numpy as np

from ..costs import LeastSquaresCost, Sampler
from ..costs.base import AbstractCost
from ..data import Measurement
from ..errors import ConvergenceError, IdentificationError
from ..identify import Evaluation, Experiment, IdentificationProblem
from ..identify.problem import gauss_newton_statistics
from ..integrate import time_grid
from ..integrate.ode import trapezoidal_sensitivities
from .archive import FmuArchive, FmuError
from ..scale import AbstractExecutor
from .session import DEFAULT_TIMEOUT, FmuSession, check_timeout, run_parallel
from .tasks import FmuBytes, FmuJobTask
from .worker import PROBE_STEP as _PROBE_STEP
from .worker import state_jacobian

__all__ = ["GRADIENT_PATHS", "FmuExperiment", "FmuProblem", "GradientChoice", "fmu_problem"]

GRADIENT_PATHS = ("auto", "adjoint", "sensitivity", "fd")

#: A Jacobian column of the FMU agrees with central differences when the difference is
#: below this, relative to the column's magnitude (the FD truncation of a smooth model is
#: ~1e-9 at the probe step; a wrong column is off by far more).
PROBE_TOLERANCE = 1e-6
_FD_REL_STEP = 1e-4


@dataclasses.dataclass(frozen=True, eq=False)
class FmuExperiment:
    """One measurement of an FMU: the cost with its data, inputs and settings.

    Attributes
    ----------
    cost : AbstractCost
        Its channels are FMU output names.
    t_end : float
    step : float
        Communication step (Co-Simulation) or integration step (Model Exchange).
    inputs : Measurement, optional
        Input signals by FMU input name, interpolated linearly in time (Co-Simulation: the
        value at the start of each communication step, held over the step).
    values : mapping of str to float
        Parameter values of this experiment (identified parameters override them).
    name : str
    """

    cost: AbstractCost
    t_end: float
    step: float
    inputs: Measurement | None = None
    values: Mapping[str, float] = dataclasses.field(default_factory=dict)
    name: str = "experiment"

    def grid(self) -> np.ndarray:
        """Communication points / integration steps on ``[0, t_end]`` (the last may be uneven)."""
        return time_grid(0.0, self.t_end, self.step)

    def input_values(self, t: float) -> dict[str, float]:
        if self.inputs is None:
            return {}
        return {c: float(np.interp(t, self.inputs.times, self.inputs.column(c))) for c in self.inputs.columns}


@dataclasses.dataclass(frozen=True)
class GradientChoice:
    """Which gradient path is used, and why (written to RESULT.json)."""

    method: str
    reason: str

    def to_json(self) -> dict:
        return {"method": self.method, "reason": self.reason}


def _check_names(archive: FmuArchive, names: Sequence[str], experiments: Sequence[FmuExperiment]) -> None:
    params = {v.name for v in archive.variables.values() if v.causality == "parameter" and v.is_real}
    for name in names:
        if name not in params:
            raise FmuError(
                f"{archive.path.name}: no real parameter named {name!r}. Parameters: {', '.join(sorted(params))}."
            )
        if archive.variables[name].variability not in ("fixed", "tunable"):
            raise FmuError(f"{archive.path.name}: parameter {name!r} has variability "
                           f"{archive.variables[name].variability!r}; only fixed or tunable ones can be identified.")
    outputs = set(archive.names("output"))
    inputs = set(archive.names("input"))
    for exp in experiments:
        for channel in exp.cost.channels:
            if channel not in outputs:
                raise FmuError(
                    f"data column {channel!r} of '{exp.name}' matches no output of {archive.path.name}. "
                    f"Outputs: {', '.join(sorted(outputs)) or 'none'}. Rename or drop the column."
                )
        for name in exp.values:
            if name not in params:
                raise FmuError(f"'{exp.name}': {name!r} is not a parameter of {archive.path.name}.")
        if exp.inputs is not None:
            for column in exp.inputs.columns:
                if column not in inputs:
                    raise FmuError(
                        f"input column {column!r} of '{exp.name}' matches no input of {archive.path.name}. "
                        f"Inputs: {', '.join(sorted(inputs)) or 'none'}."
                    )


def _choose(archive: FmuArchive, requested: str, experiments) -> GradientChoice:
    has_inputs = any(exp.inputs is not None for exp in experiments)
    sens_ok = archive.provides_directional_derivatives and archive.number_of_event_indicators == 0
    if requested == "adjoint":
        if archive.native is None and archive.native_distrust:
            raise FmuError(f"{archive.path.name}: --gradient adjoint: {archive.native_distrust}, so the embedded "
                           "model is not trusted; use --gradient auto or fd (through the binary), or re-export it.")
        if archive.native is None:
            raise FmuError(f"{archive.path.name}: --gradient adjoint needs an FMU exported by fmi-adjoint "
                           "(with resources/model.toml); use --gradient auto, sensitivity or fd.")
        if has_inputs:
            raise FmuError("--gradient adjoint: the embedded model treats inputs as constants and cannot follow "
                           "time-varying --inputs; use --gradient fd.")
        return GradientChoice("adjoint", "requested: native discrete adjoint of the model embedded in the FMU")
    if requested == "sensitivity":
        if not archive.model_exchange:
            raise FmuError(f"{archive.path.name}: --gradient sensitivity needs a Model Exchange interface; "
                           "use --gradient fd.")
        if archive.number_of_event_indicators:
            raise FmuError(f"{archive.path.name}: has {archive.number_of_event_indicators} event indicators; the "
                           "sensitivity path integrates without events. Use --gradient fd.")
        return GradientChoice("sensitivity", "requested: forward sensitivities from the FMU's Jacobian columns")
    if not archive.co_simulation and archive.number_of_event_indicators:
        raise FmuError(f"{archive.path.name}: a Model Exchange FMU with {archive.number_of_event_indicators} event "
                       "indicators; the project's integrator handles no state events. Use a Co-Simulation FMU.")
    if requested == "fd":
        return GradientChoice("fd", "requested: central finite differences of simulations")
    # archive.native builds the embedded model to check the binary: only asked when it matters.
    if not has_inputs and archive.native is not None:
        return GradientChoice("adjoint", f"exported by {archive.native.get('generator')} (resources/model.toml): "
                              "native discrete adjoint of the embedded model, exact and as in-process")
    if sens_ok:
        return GradientChoice("sensitivity", "Model Exchange FMU with directional derivatives: forward "
                              "sensitivities of the trapezoidal rule from the FMU's Jacobian columns (probed)")
    why = ("inputs vary in time, which the embedded model cannot follow" if archive.native is not None else
           "state events (event indicators)" if archive.number_of_event_indicators and archive.model_exchange else
           "no Model Exchange interface with directional derivatives")
    return GradientChoice("fd", f"{why}: central finite differences of simulations in parallel")


def fmu_problem(
    archive: FmuArchive,
    experiments: Sequence[FmuExperiment],
    names: Sequence[str],
    *,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    start: Mapping[str, float] | None = None,
    gradient: str = "auto",
    workers: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    log=None,
    executor: AbstractExecutor | None = None,
):
    """The identification problem of an FMU, and the gradient path chosen.

    Parameters
    ----------
    archive : FmuArchive
        From :func:`~fmi_adjoint.fmu.archive.open_fmu`; the caller closes it.
    timeout : float
        Longest one FMI call may take [s] (``--fmu-timeout``); see :mod:`.session`.
    log : text stream, optional
        Where the FMU binary's captured output is copied when the problem closes (``--verbose``).
    executor : AbstractExecutor, optional
        Runs the finite-difference columns (a Dask cluster); default: the problem's own
        sandboxed worker processes (``workers``).

    Returns
    -------
    (problem, choice)
        ``problem`` is an :class:`IdentificationProblem` on the embedded model for the
        adjoint path, else an :class:`FmuProblem` (close it when done).
    """
    if gradient not in GRADIENT_PATHS:
        raise FmuError(f"--gradient {gradient!r} is not one of {', '.join(GRADIENT_PATHS)}.")
    check_timeout(timeout)
    if not experiments:
        raise IdentificationError("give at least one experiment (--data).")
    _check_names(archive, names, experiments)
    choice = _choose(archive, gradient, experiments)
    if choice.method == "adjoint":
        return _native_problem(archive, experiments, names, bounds, start), choice
    problem = FmuProblem(archive, experiments, names, choice.method, bounds=bounds, start=start, workers=workers,
                         timeout=timeout, log=log, executor=executor)
    # After the binary loaded: a binary that cannot run gives its one error line, no note.
    if gradient == "auto" and archive.native_distrust:
        print(f"fmi-adjoint: note: {archive.path.name}: {archive.native_distrust}; identifying the FMU through its "
              "binary.", file=sys.stderr)
    return problem, choice


def _native_problem(archive, experiments, names, bounds, start) -> IdentificationProblem:
    """The in-process problem on the embedded model, with the FMU's start values."""
    from ..engines import NativeEngine
    from ..model_file import load_model
    from .export import export_scheme

    settings = archive.native
    # The embedded model's C engine: the FMU's own engine, in-process with its adjoint (the
    # archive was trusted only after rebuilding its binary, so a compiler is present).
    engine = NativeEngine.build(load_model(archive.model_file).with_values(settings.get("values") or {}))
    model = engine.compiled
    declared = {p.name for p in model.model.all_parameters}
    fmu_values = {v.name: v.start for v in archive.variables.values()
                  if v.causality == "parameter" and v.name in declared and v.start is not None}
    solver = export_scheme(settings)
    step = float(settings.get("step", model.model.simulation.step))
    runs = [Experiment(model, exp.cost, values={**fmu_values, **exp.values}, t_end=exp.t_end, step=step,
                       solver=solver, name=exp.name, engine=engine) for exp in experiments]
    return IdentificationProblem(runs, names, bounds=bounds, start=start)


class FmuProblem:
    """Experiments on one FMU sharing the identified parameters ``names``.

    The interface of :class:`~fmi_adjoint.identify.IdentificationProblem` (``evaluate``,
    ``cost``, ``residuals``, ``statistics``), so :func:`~fmi_adjoint.identify.identify`
    runs on it; ``gradient_method`` is the path it uses.  It owns worker processes: close it
    (also after an error or an interrupt).
    """

    def __init__(self, archive: FmuArchive, experiments, names, method: str, *, bounds=None, start=None,
                 workers: int | None = None, interface: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 log=None, executor: AbstractExecutor | None = None):
        self.archive = archive
        #: Where the finite-difference columns run when given (a Dask cluster: the FMU travels
        #: as its bytes, :mod:`.tasks`); else in this problem's own sandboxed worker processes.
        self.executor = executor
        self._bytes: FmuBytes | None = None
        self.experiments = tuple(experiments)
        self.names = tuple(names)
        if len(set(self.names)) != len(self.names) or not self.names:
            raise IdentificationError(f"parameters {list(self.names)}: give distinct names (--params).")
        self.gradient_method = method
        variables = [archive.variables[n] for n in self.names]
        for name in bounds or {}:
            if name not in self.names:
                raise IdentificationError(f"bounds given for '{name}', which is not identified; add it to --params.")
        self.lower = np.array([(bounds or {}).get(v.name, (v.min, v.max))[0] for v in variables], dtype=float)
        self.upper = np.array([(bounds or {}).get(v.name, (v.min, v.max))[1] for v in variables], dtype=float)
        # Start: explicit start values, else the first experiment's settings (--set), else the FMU's.
        shared = self.experiments[0].values if self.experiments else {}
        self.start = np.array([(start or {}).get(v.name, shared.get(v.name, v.start if v.start is not None else 0.0))
                               for v in variables], dtype=float)
        # Finite-difference scale: the nominal value, else |start|, else FMI's default nominal 1.
        self.nominal = np.array([abs(v.nominal) if v.nominal else (abs(v.start) if v.start else 1.0)
                                 for v in variables])
        if interface is None:
            interface = "ModelExchange" if (method == "sensitivity" or not archive.co_simulation) else "CoSimulation"
        self.interface = interface
        self.timeout, self.log = check_timeout(timeout), log
        self.session = FmuSession(archive, interface, timeout=self.timeout, log=log)
        self._aux: FmuSession | None = None
        self.workers = workers if workers is not None else (os.cpu_count() or 1)
        self._pool: list[FmuSession] | None = None  # further workers of the parallel differences
        self.simulations = 0
        self.columns: dict[str, str] = {}
        self._state_sources = ["fmu" if archive.provides_directional_derivatives else "fd"] * self.session.n_states
        if archive.number_of_event_indicators and interface == "ModelExchange":
            self.session.close()
            raise FmuError(f"{archive.path.name}: the Model Exchange interface has event indicators, which the "
                           "project's integrator does not handle; use the Co-Simulation interface.")
        self._probed = False

    def with_start(self, start: np.ndarray) -> FmuProblem:
        """This problem, started from ``start``.  Not a copy: the problem owns worker processes
        and the Jacobian probing of its first evaluation, which a copy would start again and
        leave unclosed; so an FMU problem runs one start (the command line refuses ``--starts``
        above 1 with ``--fmu``)."""
        self.start = np.array(start, dtype=float)
        return self

    # -- simulation ----------------------------------------------------------------------
    def _values(self, exp: FmuExperiment, x: np.ndarray) -> dict[str, float]:
        return {**exp.values, **dict(zip(self.names, map(float, x)))}

    def _aux_session(self) -> FmuSession:
        # A second worker process, so FMUs instantiable only once per process work too.
        if self._aux is None:
            self._aux = FmuSession(self.archive, self.interface, timeout=self.timeout, log=self.log)
        return self._aux

    def _me_functions(self, session: FmuSession, exp: FmuExperiment):
        input_names = list(exp.inputs.columns) if exp.inputs is not None else []
        input_refs = session.refs(input_names)

        def at(t, x):
            u = exp.input_values(t)
            session.set_point(t, x, input_refs, [u[n] for n in input_names])

        def f(t, x):
            at(t, x)
            return session.derivatives()

        def jacobian(t, x):
            return self._state_jacobian(session, at, t, x)[: session.n_states]

        return at, f, jacobian

    def _state_jacobian(self, session, at, t, x, outputs: Sequence[int] = (), sources=None) -> np.ndarray:
        """``d(f, g)/dx`` at (t, x): FMU columns where trusted (``sources[j] == "fmu"``), else
        central differences of the right-hand side (:func:`.worker.state_jacobian`, the code the
        workers integrate with)."""
        return state_jacobian(session, at, t, x, outputs, self._state_sources if sources is None else sources)

    def _job(self, exp: FmuExperiment, x: np.ndarray) -> tuple[str, tuple]:
        """The worker request that simulates ``exp`` at ``x`` (a whole run: every doStep, or
        the trapezoidal rule of :mod:`~fmi_adjoint.integrate.ode` in the worker)."""
        grid, values = exp.grid(), self._values(exp, x)
        if self.interface == "CoSimulation":
            inputs = exp.input_values if exp.inputs is not None else None
            return self.session.cs_job(values, grid, exp.cost.channels, inputs)
        return self.session.me_job(values, grid, exp.cost.channels, exp.inputs, self._state_sources)

    def _finish(self, exp: FmuExperiment, reply):
        """(grid, outputs at the grid, ME trajectory or None) from the reply to :meth:`_job`."""
        grid = exp.grid()
        if self.interface == "CoSimulation":
            return grid, self._finite(reply, grid, exp), None
        if "sources" in reply:  # the worker replaced refused Jacobian columns by differences
            self._state_sources[:] = ["fd" if "fd" in pair else "fmu" for pair in zip(self._state_sources,
                                                                                        reply["sources"])]
        Y, traj, event = FmuSession.me_result(grid, reply)
        if event is not None:
            raise FmuError(f"{self.archive.path.name}: the FMU has a time event at t = {event:g} s; "
                           "the project's integrator handles no events. Use a Co-Simulation FMU.")
        return grid, self._finite(Y, grid, exp), traj

    def _run(self, exp: FmuExperiment, x: np.ndarray):
        """(grid, outputs at the grid, ME trajectory or None)."""
        self.simulations += 1
        return self._finish(exp, self.session.run(self._job(exp, x)))

    def _finite(self, Y: np.ndarray, grid: np.ndarray, exp: FmuExperiment) -> np.ndarray:
        """``Y`` if finite, else a ConvergenceError naming the output and time (the optimizer steps back)."""
        bad = np.argwhere(~np.isfinite(Y))
        if bad.size:
            k, c = bad[0]
            raise ConvergenceError(f"{self.archive.path.name}: output {exp.cost.channels[c]!r} is not finite at "
                                   f"t = {grid[k]:g} s; check the parameter values.")
        return Y

    def _sampled(self, exp, grid, Y) -> tuple[Sampler, np.ndarray]:
        sampler = Sampler.from_grid(grid, exp.cost.sample_times)
        return sampler, sampler.sample(Y)

    def sampled_outputs(self, index: int, x: np.ndarray) -> np.ndarray:
        """Outputs of experiment ``index`` at its sample times, at identified values ``x``."""
        exp = self.experiments[index]
        grid, Y, _ = self._run(exp, np.asarray(x, dtype=float))
        return self._sampled(exp, grid, Y)[1]

    def cost(self, x: np.ndarray) -> float:
        """Total cost at the identified values ``x``."""
        total = 0.0
        for exp in self.experiments:
            grid, Y, _ = self._run(exp, np.asarray(x, dtype=float))
            total += exp.cost.evaluate(self._sampled(exp, grid, Y)[1], np.zeros(0)).J
        return total

    # -- gradients -----------------------------------------------------------------------
    def evaluate(self, x: np.ndarray, method: str = "adjoint", fd_rel_step: float = _FD_REL_STEP) -> Evaluation:
        """Cost and gradient; ``method`` "fd" forces finite differences, anything else uses the
        problem's own path (``gradient_method``)."""
        x = np.asarray(x, dtype=float)
        sims0 = self.simulations
        started = time.perf_counter()
        path = "fd" if method == "fd" else self.gradient_method
        if path == "sensitivity":
            J, gradient, forward = 0.0, np.zeros(len(self.names)), 0.0
            for exp in self.experiments:
                t0 = time.perf_counter()
                grid, Y, traj = self._run(exp, x)
                forward += time.perf_counter() - t0
                sampler, Ys = self._sampled(exp, grid, Y)
                value = exp.cost.evaluate(Ys, np.zeros(0))
                dY = self._output_sensitivities(exp, x, traj)
                J += value.J
                gradient += np.einsum("gc,gcp->p", sampler.scatter(value.dJ_dY), dY)
            return Evaluation(J=J, gradient=gradient, method="sensitivity",
                              forward_seconds=forward / len(self.experiments),
                              gradient_seconds=time.perf_counter() - started, simulations=self.simulations - sims0)
        t0 = time.perf_counter()
        J = self.cost(x)
        forward = (time.perf_counter() - t0) / len(self.experiments)
        gradient = self.finite_differences(x, fd_rel_step)
        return Evaluation(J=J, gradient=gradient, method="fd", forward_seconds=forward,
                          gradient_seconds=time.perf_counter() - started, simulations=self.simulations - sims0)

    def fd_steps(self, x: np.ndarray, rel: float) -> np.ndarray:
        """Steps scaled by the nominal values (or the magnitude of the value)."""
        return rel * np.maximum(np.abs(x), self.nominal)

    def _stencil(self, x: np.ndarray, rel: float) -> tuple[list[np.ndarray], list[tuple]]:
        """Trial points of the central differences and how to combine them, inside the bounds."""
        steps = self.fd_steps(x, rel)
        points: list[np.ndarray] = []
        recipes: list[tuple] = []
        for k in range(len(x)):
            # An interval narrower than the stencil shrinks the step so that every point
            # stays inside the bounds (the FMU may reject values outside them).
            d = min(steps[k], (self.upper[k] - self.lower[k]) / 2)
            if not d > 0:
                raise IdentificationError(f"parameter {self.names[k]!r}: its bounds leave no room for finite "
                                          "differences; widen them.")
            offsets: tuple[float, ...]
            weights: tuple[float, ...]
            if x[k] - d >= self.lower[k] and x[k] + d <= self.upper[k]:
                offsets, weights = (d, -d), (1 / (2 * d), -1 / (2 * d))
            elif x[k] + 2 * d <= self.upper[k] or x[k] - self.lower[k] < self.upper[k] - x[k]:
                d = min(d, (self.upper[k] - x[k]) / 2)
                offsets, weights = (0.0, d, 2 * d), (-3 / (2 * d), 4 / (2 * d), -1 / (2 * d))
            else:
                d = min(d, (x[k] - self.lower[k]) / 2)
                offsets, weights = (0.0, -d, -2 * d), (3 / (2 * d), -4 / (2 * d), 1 / (2 * d))
            first = len(points)
            for off in offsets:
                xk = x.copy()
                xk[k] += off
                points.append(xk)
            recipes.append((first, weights))
        return points, recipes

    def _parallel_costs(self, points: list[np.ndarray]) -> list[float]:
        """Costs at ``points``: the simulations spread over the problem's worker and up to
        ``workers - 1`` more, all on the archive's one extraction folder."""
        if self.executor is None and (self.workers <= 1 or len(points) <= 1):
            return [self.cost(p) for p in points]
        jobs = [self._job(exp, p) for p in points for exp in self.experiments]
        if self.executor is not None:
            if self._bytes is None:
                self._bytes = FmuBytes.of(self.archive)
            fmu = self._bytes
            replies = iter(self.executor.map([FmuJobTask(fmu, self.interface, self.timeout, job) for job in jobs]))
            self.simulations += len(jobs)
            return [self._point_cost(replies) for _ in points]
        wanted = min(self.workers, len(jobs)) - 1
        # Workers that died (a crash or a timeout already reported) are replaced.
        self._pool = [s for s in self._pool or [] if s.alive]
        if len(self._pool) < wanted:
            self._pool += FmuSession.open_many(self.archive, self.interface, wanted - len(self._pool),
                                               timeout=self.timeout, log=self.log)
        replies = iter(run_parallel([self.session, *self._pool[:wanted]], jobs))
        self.simulations += len(jobs)
        return [self._point_cost(replies) for _ in points]

    def _point_cost(self, replies) -> float:
        """The cost of one point from the next replies (one per experiment, in order)."""
        total = 0.0
        for exp in self.experiments:
            grid, Y, _ = self._finish(exp, next(replies))
            total += exp.cost.evaluate(self._sampled(exp, grid, Y)[1], np.zeros(0)).J
        return total

    def finite_differences(self, x: np.ndarray, rel: float = _FD_REL_STEP) -> np.ndarray:
        """Central differences of the cost (one-sided next to a bound), in parallel."""
        points, recipes = self._stencil(np.asarray(x, dtype=float), rel)
        values = self._parallel_costs(points)
        return np.array([sum(w * values[first + i] for i, w in enumerate(weights)) for first, weights in recipes])

    def _offsets(self, x: np.ndarray, k: int, d: float) -> tuple[float, float]:
        """Offsets of a difference quotient for parameter ``k``: central, or one-sided at a bound."""
        if x[k] - d >= self.lower[k] and x[k] + d <= self.upper[k]:
            return d, -d
        return (d, 0.0) if x[k] + d <= self.upper[k] else (0.0, -d)

    def _perturbed_rhs(self, exp, x, k, d, traj, refs) -> np.ndarray:
        """Differences of (f, g) along the trajectory for parameter ``k`` (re-initialized
        instances, so fixed parameters work too; one-sided at a bound)."""
        aux = self._aux_session()
        out = []
        offsets = self._offsets(x, k, d)
        for offset in offsets:
            xs = x.copy()
            xs[k] += offset
            aux.start(self._values(exp, xs), exp.input_values(0.0), 0.0, float(traj.t[-1]))
            at, _, _ = self._me_functions(aux, exp)
            rows = []
            for i, t in enumerate(traj.t):
                at(float(t), traj.x[i])
                rows.append(aux.rhs(refs))
            out.append(np.array(rows))
        return (out[0] - out[1]) / (offsets[0] - offsets[1])

    def _initial_sensitivity(self, exp, x) -> np.ndarray:
        """``dx0/dp`` by central differences of the initialization."""
        aux = self._aux_session()
        n = self.session.n_states
        S0 = np.zeros((n, len(x)))
        steps = self.fd_steps(x, _PROBE_STEP)
        for k in range(len(x)):
            states = []
            offsets = self._offsets(x, k, steps[k])
            for offset in offsets:
                xs = x.copy()
                xs[k] += offset
                aux.start(self._values(exp, xs), exp.input_values(0.0), 0.0, exp.t_end)
                states.append(aux.initial_states())
            S0[:, k] = (states[0] - states[1]) / (offsets[0] - offsets[1])
        return S0

    @staticmethod
    def _mismatch(got: np.ndarray, expected: np.ndarray) -> float:
        """Largest row-wise relative difference of two column histories (points x rows).

        Each row is compared with its own largest magnitude (floored at 1e-6 of the whole
        column's, where finite differences carry only noise); a column that is zero in both
        agrees."""
        scale = np.maximum(np.abs(expected).max(axis=0), np.abs(got).max(axis=0))
        floor = 1e-6 * float(scale.max()) if scale.size else 0.0
        if floor == 0.0:
            return 0.0
        return float(np.max(np.abs(got - expected).max(axis=0) / np.maximum(scale, floor)))

    def _probe(self, exp, x, traj, refs) -> None:
        """Compare every FMU Jacobian column with differences of the right-hand side: parameter
        columns along the whole first trajectory (a column that vanishes at a few points
        cannot pass by chance), state columns at up to 64 points spread over it."""
        session = self.session
        n = session.n_states
        at, _, _ = self._me_functions(session, exp)
        unknowns = list(session.derivative_refs) + list(refs)
        steps = self.fd_steps(x, _PROBE_STEP)
        use_fmu = self.archive.provides_directional_derivatives
        for k, name in enumerate(self.names):
            if not use_fmu:
                self.columns[name] = ("finite differences of the right-hand side (the FMU provides no "
                                      "directional derivatives)")
                continue
            ref = self.archive.variables[name].valueReference
            try:
                got = []
                for i, t in enumerate(traj.t):
                    at(float(t), traj.x[i])
                    got.append(session.directional(unknowns, ref))
            except FmuError:
                self.columns[name] = "finite differences of the right-hand side (the FMU refused the column)"
                continue
            worst = self._mismatch(np.array(got), self._perturbed_rhs(exp, x, k, steps[k], traj, refs))
            if worst > PROBE_TOLERANCE:
                self.columns[name] = (f"finite differences of the right-hand side (the FMU's column differs from "
                                      f"finite differences by {worst:.2e} relative)")
            else:
                self.columns[name] = f"directional derivative (agrees with finite differences to {worst:.1e})"
        if use_fmu:
            points = np.unique(np.linspace(0, traj.t.size - 1, min(64, traj.t.size)).astype(int))
            sources = ["fmu"] * n
            jac = np.array([self._state_jacobian(session, at, float(traj.t[p]), traj.x[p], refs, sources)
                            for p in points])
            fd = np.array([self._state_jacobian(session, at, float(traj.t[p]), traj.x[p], refs, ["fd"] * n)
                           for p in points])
            for j in range(n):
                refused = sources[j] == "fd"
                if refused or self._mismatch(jac[:, :, j], fd[:, :, j]) > PROBE_TOLERANCE:
                    self._state_sources[j] = "fd"
        for j in range(n):
            self.columns[f"state {j}"] = ("directional derivative" if self._state_sources[j] == "fmu"
                                          else "finite differences of the right-hand side")
        self._probed = True

    def _output_sensitivities(self, exp: FmuExperiment, x: np.ndarray, traj) -> np.ndarray:
        """``dY/dp`` at the grid points, shape (n_grid, n_channels, n_params)."""
        session = self.session
        n = session.n_states
        refs = session.refs(exp.cost.channels)
        if not self._probed:
            self._probe(exp, x, traj, refs)
        at, _, _ = self._me_functions(session, exp)
        unknowns = list(session.derivative_refs) + list(refs)
        m = len(unknowns)
        G = np.empty((traj.t.size, m, n))
        P = np.empty((traj.t.size, m, len(x)))
        fmu_params = [k for k, name in enumerate(self.names) if self.columns[name].startswith("directional")]
        for i, t in enumerate(traj.t):
            G[i] = self._state_jacobian(session, at, float(t), traj.x[i], refs)
            at(float(t), traj.x[i])
            for k in fmu_params:
                P[i, :, k] = session.directional(unknowns, self.archive.variables[self.names[k]].valueReference)
        steps = self.fd_steps(x, _PROBE_STEP)
        for k in range(len(x)):
            if k not in fmu_params:
                P[:, :, k] = self._perturbed_rhs(exp, x, k, steps[k], traj, refs)
        S = trapezoidal_sensitivities(traj.t, G[:, :n, :], P[:, :n, :], self._initial_sensitivity(exp, x))
        return np.einsum("gcn,gnp->gcp", G[:, n:, :], S) + P[:, n:, :]

    # -- least squares and statistics ----------------------------------------------------------
    def residuals(self, x: np.ndarray, jacobian: bool = True):
        """Stacked least-squares residuals and their Jacobian (sensitivities or finite differences)."""
        x = np.asarray(x, dtype=float)
        rs, jacs = [], []
        for exp in self.experiments:
            if not isinstance(exp.cost, LeastSquaresCost):
                raise IdentificationError(f"experiment '{exp.name}': {type(exp.cost).__name__} is not a sum of "
                                          "squares; use the lbfgsb method.")
            grid, Y, traj = self._run(exp, x)
            sampler, Ys = self._sampled(exp, grid, Y)
            r, factors = exp.cost.residuals(Ys)
            rs.append(r)
            if not jacobian:
                continue
            if self.gradient_method == "sensitivity":
                dY = sampler.sample(self._output_sensitivities(exp, x, traj))
            else:
                points, recipes = self._stencil(x, _FD_REL_STEP)
                samples = []
                for point in points:
                    g, Yp, _ = self._run(exp, point)
                    samples.append(self._sampled(exp, g, Yp)[1])
                dY = np.stack([sum(w * samples[first + i] for i, w in enumerate(weights))
                               for first, weights in recipes], axis=-1)
            jacs.append((factors[:, :, None] * dY).reshape(-1, len(x)))
        return np.concatenate(rs), (np.vstack(jacs) if jacobian else None)

    def statistics(self, x: np.ndarray) -> dict:
        """Standard errors and correlations from the Gauss-Newton Hessian."""
        r, Jr = self.residuals(x)
        return gauss_newton_statistics(r, Jr)

    def close(self) -> None:
        """Free the instances and end every worker process."""
        sessions = [self.session, *(self._pool or []), *([self._aux] if self._aux is not None else [])]
        try:
            for session in sessions:
                session.close()
        finally:
            for session in sessions:  # an interrupt during a graceful close: kill the rest
                session.kill()
