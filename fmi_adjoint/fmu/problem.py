"""Identification problems on FMUs (issues 6 and 15): the identification-problem contract
(:class:`~fmi_adjoint.identify.problem.AbstractProblem`) on an FMU run through fmpy.

The work is split into units, each in its own module:

* :mod:`.choice`: the gradient path and the interface, and why;
* :mod:`.instances`: the worker processes (local or on an executor);
* :mod:`.simulation` + :mod:`.me_run`: a simulation as a worker request, outputs at the
  sample times (the adaptive Model Exchange integration runs in the worker,
  :mod:`.me_integration`);
* :mod:`.me_sensitivities`: exact sensitivities of that run, with the probing of the FMU's
  parameter columns against replays;
* :mod:`.gradients` + :mod:`.differences`: the gradient paths as strategy objects, which run
  the problem through :class:`~.gradients.Simulations` and return why they cannot
  (:class:`~.gradients.Unavailable`) instead of changing it;
* :mod:`.guards`, :mod:`.windows`: the checks of a fit's result and the event windows;
* here: costs, gradients, least-squares residuals and statistics, and the estimate of the
  discretization error of a Model Exchange fit.

Nothing here prints: what the user should know travels as values (:attr:`.GradientChoice.notes`,
:attr:`FmuProblem.notes`), which the command line prints.

An FMU exported by fmi-adjoint takes the ``adjoint`` path: :func:`fmu_problem` then returns an
ordinary :class:`~fmi_adjoint.identify.IdentificationProblem` on its embedded model.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ..costs import LeastSquaresCost
from ..errors import FmuError, IdentificationError
from ..identify import Evaluation, Experiment, IdentificationProblem
from ..identify.problem import AbstractIdentificationProblem, costs_noise_floor, gauss_newton_statistics
from ..integrate.inputs import ParameterValues
from ..scale import AbstractExecutor
from .archive import FmuArchive
from .choice import choose_gradient, choose_interface
from .experiment import FmuExperiment, Tolerances
from .gradients import AbstractGradientPath, DifferencePath, SensitivityPath, Unavailable
from .guards import at_result, convergence_warning, discretization_warning, held_input_warning, smoothness_warning
from .instances import FmuInstances
from .session import DEFAULT_TIMEOUT, check_timeout
from .simulation import FmuSimulator, RunOutputs, SensitivityRequest
from .variables import check_names, declared_variable, resolve
from .windows import EventWindows

__all__ = ["FmuProblem", "RunsProblem", "declared_parameter", "fmu_problem", "reference_change"]


def fmu_problem(
    archive: FmuArchive,
    experiments: Sequence[FmuExperiment],
    names: Sequence[str],
    *,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    start: ParameterValues | Mapping[str, float] | None = None,
    gradient: str = "auto",
    interface: str = "auto",
    tolerances: Tolerances | None = None,
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
    start : ParameterValues or mapping of str to float, optional
        Start values of the identified parameters (``--set``: :mod:`fmi_adjoint.integrate.inputs`);
        a name not given starts from the first experiment's value, else the FMU's start value.
    gradient : {"auto", "adjoint", "sensitivity", "fd"}
    interface : {"auto", "me", "cs"}
        ``--interface``; the choice is recorded in the returned :class:`GradientChoice`.
    tolerances : Tolerances, optional
        Model Exchange error control (``--rtol``, ``--atol``).
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
    check_timeout(timeout)
    if not experiments:
        raise IdentificationError("give at least one experiment (--data).")
    check_names(archive, names, experiments)
    has_inputs = any(exp.inputs is not None for exp in experiments)
    choice = choose_gradient(archive, gradient, interface, has_inputs, len(names))
    if choice.method == "adjoint":
        if interface != "auto":
            raise FmuError(f"--interface {interface} applies to the FMU's binary; the adjoint path runs the model "
                           "embedded in the FMU: use --gradient fd or sensitivity with --interface.")
        return _native_problem(archive, experiments, names, bounds, start), choice
    chosen, why = choose_interface(archive, interface, choice.method, _event_row(experiments))
    choice = choice.with_interface(chosen, why)
    problem = FmuProblem(archive, experiments, names, choice.method, bounds=bounds, start=start, workers=workers,
                         interface=chosen, tolerances=tolerances, timeout=timeout, log=log, executor=executor)
    # After the binary loaded: a binary that cannot run gives its one error line, no note.
    if gradient == "auto" and archive.native_distrust:
        choice = dataclasses.replace(choice, notes=(*choice.notes, f"{archive.path.name}: {archive.native_distrust}; "
                                                    "identifying the FMU through its binary."))
    return problem, choice


def _event_row(experiments: Sequence[FmuExperiment]) -> float | None:
    """The first time some experiment's data repeats (an event's left and right limit), or None."""
    for exp in experiments:
        times = np.asarray(exp.cost.sample_times, dtype=float)
        repeated = np.flatnonzero(times[1:] == times[:-1])
        if repeated.size:
            return float(times[repeated[0]])
    return None


def _native_problem(archive, experiments, names, bounds, start) -> IdentificationProblem:
    """The in-process problem on the embedded model, with the FMU's start values."""
    from ..engines import NativeEngine
    from ..model_file import load_model
    from ..export import export_scheme

    settings = archive.native
    # The embedded model's C engine: the FMU's own engine, in-process with its adjoint (the
    # archive was trusted only after rebuilding its binary, so a compiler is present).
    engine = NativeEngine.build(load_model(archive.model_file))
    model = engine.compiled
    declared = {p.name for p in model.model.all_parameters}
    # One route for the values (issue 29): the export's, then the FMU's start values, then each
    # experiment's, passed along as values (the model keeps its declared ones).
    values = ParameterValues.of(settings.get("values")).updated(
        {v.name: v.start for v in archive.variables.values()
         if v.causality == "parameter" and v.name in declared and v.start is not None})
    solver = export_scheme(settings)
    step = float(settings.get("step", model.model.simulation.step))
    runs = [Experiment(model, exp.cost, values=values.updated(exp.values).as_dict(), t_end=exp.t_end, step=step,
                       solver=solver, name=exp.name, engine=engine) for exp in experiments]
    return IdentificationProblem(runs, names, bounds=bounds, start=start)


def declared_parameter(archive: FmuArchive, name: str) -> tuple[float | None, float, float, float | None]:
    """(start, min, max, nominal) of the parameter ``name``, an array element ``A[i,j]`` included."""
    ref = resolve(archive, name)
    # By name: FMI 2 value references are unique per base type only (an Integer may share one).
    variable = declared_variable(archive, name)
    start = variable.start
    if ref.element is not None:
        start = variable.start_values[ref.element] if variable.start_values is not None else None
    return start, variable.min, variable.max, variable.nominal


_declared = declared_parameter  # the name tests/test_fmu_variable_types.py imports


def reference_change(problem: RunsProblem, x: np.ndarray, reference: Callable[[FmuExperiment], RunOutputs],
                     factor: float = 1.0) -> dict:
    """How the fit at ``x`` changes when every experiment is run as ``reference`` runs it (tighter
    tolerances, half the macro step), times ``factor`` (Richardson's, 1 for a reference far more
    accurate than the runs): the change of the cost, the largest change of a compared output and,
    for least-squares costs, the parameter bias it implies, identified minus reference values,
    ``(JᵀJ)⁻¹ Jᵀ δr`` with ``δr = r_reference - r`` (minus the Gauss-Newton step the reference's
    residuals would take from ``x``)."""
    cost, cost_reference, biggest = 0.0, 0.0, 0.0
    delta_r = []
    for exp in problem.experiments:
        run, ref = problem.run(exp, x), reference(exp)
        cost += exp.cost.evaluate(run.Y, np.zeros(0)).J
        cost_reference += exp.cost.evaluate(ref.Y, np.zeros(0)).J
        biggest = max(biggest, float(np.max(np.abs(ref.Y - run.Y), initial=0.0)))
        if isinstance(exp.cost, LeastSquaresCost):
            delta_r.append(exp.cost.residuals(ref.Y)[0] - exp.cost.residuals(run.Y)[0])
    out: dict = {"cost": factor * abs(cost_reference - cost), "largest_output_change": factor * biggest}
    if len(delta_r) == len(problem.experiments):
        _, Jr = problem.residuals(x)
        bias = factor * np.linalg.lstsq(Jr, np.concatenate(delta_r), rcond=None)[0]
        out["parameter_bias"] = dict(zip(problem.names, map(float, bias)))
    return out


class RunsProblem:
    """What an identification problem computes from whole runs (one :class:`RunOutputs` per
    experiment at its sample times) and its gradient path: costs, gradients, least-squares
    residuals and their Jacobian, Gauss-Newton statistics and the noise floor.  A subclass
    runs the simulations (:meth:`run`, :meth:`run_points`) and names its gradient path
    (:attr:`path`, :meth:`path_outputs`): :class:`FmuProblem` (one FMU) and
    :class:`~fmi_adjoint.ssp.problem.SystemProblem` (a co-simulated system, issue 28)."""

    experiments: tuple[FmuExperiment, ...]
    names: tuple[str, ...]
    #: Per identified parameter: the scale of its difference steps, and its bounds.
    nominal: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    simulations: int
    path: AbstractGradientPath

    def run(self, exp: FmuExperiment, x: np.ndarray, *, sensitivity: SensitivityRequest | None = None,
            tolerances: Tolerances | None = None) -> RunOutputs:
        raise NotImplementedError

    def run_points(self, points: Sequence[np.ndarray],
                   nodes: Sequence[np.ndarray | None] | None = None) -> list[list[RunOutputs]]:
        raise NotImplementedError

    def path_outputs(self, x: np.ndarray) -> list[RunOutputs]:
        raise NotImplementedError

    @property
    def notes(self) -> tuple[str, ...]:
        """What the user should know about the runs so far (e.g. the sensitivity path gave way to
        differences), one line each without the ``fmi-adjoint: note:`` prefix; the command line
        prints them.  None by default."""
        return ()

    def sampled_outputs(self, index: int, x: np.ndarray) -> np.ndarray:
        """Outputs of experiment ``index`` at its sample times, at identified values ``x``."""
        return self.run(self.experiments[index], np.asarray(x, dtype=float)).Y

    def cost(self, x: np.ndarray) -> float:
        """Total cost at the identified values ``x``."""
        return sum(exp.cost.evaluate(self.run(exp, x).Y, np.zeros(0)).J for exp in self.experiments)

    # -- gradients -----------------------------------------------------------------------
    def evaluate(self, x: np.ndarray, method: str = "adjoint") -> Evaluation:
        """Cost and gradient; ``method`` "fd" forces finite differences, anything else uses the
        problem's own path (``gradient_method``)."""
        x = np.asarray(x, dtype=float)
        sims0 = self.simulations
        started = time.perf_counter()
        if method == "fd":
            runs, used = DifferencePath().outputs(self, x), "fd"
        else:
            runs = self.path_outputs(x)
            used = self.path.method  # the sensitivity path may have given way
        J, gradient = 0.0, np.zeros(len(self.names))
        for exp, run in zip(self.experiments, runs):
            value = exp.cost.evaluate(run.Y, np.zeros(0))
            assert run.dY is not None  # a gradient path always fills it
            J += value.J
            gradient += np.einsum("sc,scp->p", value.dJ_dY, run.dY)
        elapsed = time.perf_counter() - started
        return Evaluation(J=J, gradient=gradient, method=used, forward_seconds=elapsed / (1 + len(x)),
                          gradient_seconds=elapsed, simulations=self.simulations - sims0)

    def finite_differences(self, x: np.ndarray) -> np.ndarray:
        """The gradient by central differences of whole simulations (in parallel)."""
        return self.evaluate(x, "fd").gradient

    # -- least squares and statistics ----------------------------------------------------------
    @property
    def has_residuals(self) -> bool:
        """Whether every experiment's cost is a least-squares cost (:meth:`residuals` answers)."""
        return all(e.cost.sum_of_squares for e in self.experiments)

    def residuals(self, x: np.ndarray, jacobian: bool = True):
        """Stacked least-squares residuals and their Jacobian (from the problem's gradient path)."""
        x = np.asarray(x, dtype=float)
        for exp in self.experiments:
            if not isinstance(exp.cost, LeastSquaresCost):
                raise IdentificationError(f"experiment '{exp.name}': {type(exp.cost).__name__} is not a sum of "
                                          "squares; use the lbfgsb method.")
        runs = self.path_outputs(x) if jacobian else [self.run(exp, x) for exp in self.experiments]
        rs, jacs = [], []
        for exp, run in zip(self.experiments, runs):
            r, factors = exp.cost.residuals(run.Y)
            rs.append(r)
            if jacobian:
                assert run.dY is not None
                jacs.append((factors[:, :, None] * run.dY).reshape(-1, len(x)))
        return np.concatenate(rs), (np.vstack(jacs) if jacobian else None)

    def statistics(self, x: np.ndarray) -> dict:
        """Standard errors and correlations from the Gauss-Newton Hessian."""
        r, Jr = self.residuals(x)
        return gauss_newton_statistics(r, Jr)

    def noise_floor(self) -> float | None:
        return costs_noise_floor(exp.cost for exp in self.experiments)


class FmuProblem(RunsProblem):
    """Experiments on one FMU sharing the identified parameters ``names`` (see the module docstring).

    It owns worker processes: close it (also after an error or an interrupt).
    """

    def __init__(self, archive: FmuArchive, experiments, names, method: str, *, bounds=None, start=None,
                 workers: int | None = None, interface: str | None = None, tolerances: Tolerances | None = None,
                 timeout: float = DEFAULT_TIMEOUT, log=None, executor: AbstractExecutor | None = None):
        self.archive = archive
        self.experiments: tuple[FmuExperiment, ...] = tuple(experiments)
        self.names: tuple[str, ...] = tuple(names)
        if len(set(self.names)) != len(self.names) or not self.names:
            raise IdentificationError(f"parameters {list(self.names)}: give distinct names (--params).")
        self.gradient_method = method
        for name in bounds or {}:
            if name not in self.names:
                raise IdentificationError(f"bounds given for '{name}', which is not identified; add it to --params.")
        declared = [declared_parameter(archive, name) for name in self.names]
        self.lower = np.array([(bounds or {}).get(n, (d[1], d[2]))[0] for n, d in zip(self.names, declared)],
                              dtype=float)
        self.upper = np.array([(bounds or {}).get(n, (d[1], d[2]))[1] for n, d in zip(self.names, declared)],
                              dtype=float)
        # Start: the start values (--set), else the first experiment's settings, else the FMU's.
        given = ParameterValues.of(start).as_dict()
        shared = self.experiments[0].values if self.experiments else {}
        self.start = np.array([given.get(n, shared.get(n, d[0] if d[0] is not None else 0.0))
                               for n, d in zip(self.names, declared)], dtype=float)
        # Difference scale: the nominal value, else |start|, else FMI's default nominal 1.
        self.nominal = np.array([abs(d[3]) if d[3] else (abs(d[0]) if d[0] else 1.0) for d in declared])
        if interface is None:
            interface = "ModelExchange" if (method == "sensitivity" or not archive.co_simulation) else "CoSimulation"
        self.interface = interface
        self.tolerances = tolerances or Tolerances()
        self.instances = FmuInstances(archive, interface, workers=workers, executor=executor, timeout=timeout,
                                      log=log)
        n_states = self.instances.session.n_states
        # FMU columns where the FMU has them and addresses every state by its own reference.
        columns = archive.provides_directional_derivatives and archive.scalar_states
        self._sources = ["fmu" if columns else "fd"] * n_states
        self.simulator = FmuSimulator(archive, interface, self.tolerances, self._sources)
        self.path: AbstractGradientPath = (SensitivityPath(self.names, columns)
                                           if method == "sensitivity" else DifferencePath())
        self.simulations = 0
        #: Why the sensitivity path gave way to differences (None while it holds).
        self.fallback: str | None = None
        # The notes of the runs (:attr:`notes`); one list shared with the views (windowed,
        # copies), so that what a view's runs found is said too.
        self._notes: list[str] = []

    @property
    def columns(self) -> dict[str, str]:
        """Where each Jacobian column came from (sensitivity path; RESULT.json)."""
        out = dict(self.path.columns)
        if self.interface == "ModelExchange" and self.gradient_method == "sensitivity":
            for j, source in enumerate(self._sources):
                out[f"state {j}"] = ("directional derivative" if source == "fmu"
                                     else "finite differences of the right-hand side")
        return out

    def with_start(self, start: np.ndarray) -> FmuProblem:
        """This problem, started from ``start``.  Not a copy: the problem owns worker processes,
        which a copy would leave unclosed; so an FMU problem runs one start (the command line
        refuses ``--starts`` above 1 with ``--fmu``)."""
        self.start = np.array(start, dtype=float)
        return self

    def windowed(self, ends: Mapping[int, float]) -> FmuProblem:
        """This problem with the experiments at positions ``ends`` cut to their samples at
        ``t <= ends[k]`` and simulated up to there (a data window of :mod:`.windows`).  A view:
        it shares the worker processes (close the problem, not the view) and counts its own
        simulations.  A Co-Simulation run ends at the first communication point at or past the
        window's end (the outputs are interpolated to the sample times)."""
        other = copy.copy(self)
        cut = []
        for k, exp in enumerate(self.experiments):
            if k not in ends:
                cut.append(exp)
                continue
            window = getattr(exp.cost, "window", None)
            if window is None:
                raise IdentificationError(f"experiment '{exp.name}': a data window needs a time-domain "
                                          "least-squares cost (--cost time).")
            t_end = float(ends[k])
            if self.interface == "CoSimulation":
                t_end = min(exp.t_end, math.ceil(t_end / exp.step - 1e-9) * exp.step)
            cut.append(dataclasses.replace(exp, cost=window(float(ends[k])), t_end=t_end))
        other.experiments = tuple(cut)
        other.simulations = 0
        return other

    def window_strategy(self):
        """The data-window continuation of an FMU problem: :class:`~.windows.EventWindows`
        (windows that grow event by event), or None where the data have no jumps."""
        strategy = EventWindows()
        return strategy if strategy.unavailable(self) is None else None

    # -- simulation ----------------------------------------------------------------------
    def values(self, exp: FmuExperiment, x: np.ndarray) -> dict[str, float]:
        return {**exp.values, **dict(zip(self.names, map(float, x)))}

    def job(self, exp: FmuExperiment, x: np.ndarray, *, sensitivity: SensitivityRequest | None = None,
            nodes=None, tolerances: Tolerances | None = None) -> tuple[str, tuple]:
        op, args = self.simulator.job(self.instances.session, exp, self.values(exp, x), sensitivity=sensitivity,
                                      nodes=nodes, tolerances=tolerances)
        if op == "run_me_adaptive":  # the run's budget (issue 31); belongs in FmuSimulator.job's request
            args[0]["budget"] = (tolerances or self.tolerances).budget.to_wire()
        return op, args

    def run(self, exp: FmuExperiment, x: np.ndarray, *, sensitivity: SensitivityRequest | None = None,
            tolerances: Tolerances | None = None) -> RunOutputs:
        """One simulation of ``exp`` at ``x`` in the problem's own worker."""
        self.simulations += 1
        reply = self.instances.run(self.job(exp, np.asarray(x, dtype=float), sensitivity=sensitivity,
                                            tolerances=tolerances))
        return self.simulator.finish(exp, reply)

    def run_points(self, points: Sequence[np.ndarray],
                   nodes: Sequence[np.ndarray | None] | None = None) -> list[list[RunOutputs]]:
        """Every experiment at each of ``points``, in parallel (:meth:`.FmuInstances.run_many`):
        per point, one :class:`RunOutputs` per experiment.  ``nodes``: per experiment, the node
        times a Model Exchange run replays (None: each run chooses its own steps)."""
        jobs = [self.job(exp, p, nodes=None if nodes is None else nodes[e])
                for p in points for e, exp in enumerate(self.experiments)]
        replies = self.instances.run_many(jobs)
        self.simulations += len(jobs)
        n_exp = len(self.experiments)
        return [[self.simulator.finish(exp, replies[i * n_exp + e]) for e, exp in enumerate(self.experiments)]
                for i in range(len(points))]

    def discretization_error(self, x: np.ndarray) -> dict | None:
        """Estimated discretization error of a Model Exchange fit at ``x`` (None for
        Co-Simulation, whose solver is the FMU's own).

        The runs are repeated with tolerances 100 times tighter; their difference estimates the
        error of the runs at the chosen tolerances (the error control keeps the error about
        proportional to the tolerance, so the tighter run's own error is ~1 % of it).  Reported:
        the change of the cost, the largest change of an output, and the parameter bias that
        change implies: identified minus accurate values, ``(JᵀJ)⁻¹ Jᵀ δr`` with
        ``δr = r_tight - r`` (minus the Gauss-Newton step that the tighter residuals would take
        from the identified values).
        """
        if self.interface != "ModelExchange":
            return None
        x = np.asarray(x, dtype=float)
        fine = self.tolerances.tighter()
        return {"tolerances": self.tolerances.to_json(), "reference_tolerances": fine.to_json(),
                **reference_change(self, x, lambda exp: self.run(exp, x, tolerances=fine))}

    def result_guards(self, x: np.ndarray, std_errors) -> list[tuple[str, bool]]:
        """Warnings on the fit at ``x`` (issue 32), each with whether it makes the result
        untrustworthy (``success`` false): the cost not smooth there
        (:func:`~.guards.smoothness_warning`, always untrustworthy: the fit stopped at a jump),
        else the optimizer stopped short of the minimum (:func:`~.guards.convergence_warning`)
        or the discretization error exceeds the standard errors
        (:func:`~.guards.discretization_warning`); and held Co-Simulation inputs
        (:func:`~.guards.held_input_warning`, untrustworthy when the bias exceeds a standard
        error)."""
        at = at_result(self, x)
        if at is None:  # the guards need least-squares residuals
            return []
        out: list[tuple[str, bool]] = []
        smooth = smoothness_warning(self, at, std_errors)
        if smooth is not None:
            out.append((smooth, True))
        else:  # at a jump the Gauss-Newton step says nothing more
            for guard in (convergence_warning, discretization_warning):
                text = guard(self, at, std_errors)
                if text is not None:
                    out.append((text, True))
        held = held_input_warning(self, at, std_errors)
        if held is not None:
            out.append(held)
        return out

    def solver_info(self) -> dict:
        if self.interface == "CoSimulation":
            return {"interface": "CoSimulation", "integrator": "the FMU's own solver"}
        return {"interface": "ModelExchange", "integrator": {"scheme": "Radau IIA (order 5), adaptive",
                                                             **self.tolerances.to_json()}}

    def parameter_units(self) -> dict[str, str]:
        """The unit text of the identified parameters by name (modelDescription.xml's ``unit``)."""
        variables = self.archive.variables
        return {name: variables[name].unit for name in self.names if name in variables}

    def output_units(self) -> dict[str, str]:
        """The unit text of the variables a cost may compare by name (modelDescription.xml's
        ``unit``): every variable, as an FMU's variable names are unique."""
        return {name: variable.unit for name, variable in self.archive.variables.items()}

    def run_details(self) -> dict[str, str]:
        """The FMU's binary in worker processes, and the communication step (Co-Simulation) or
        the integrator's adaptive step (Model Exchange)."""
        engine = f"the FMU's binary ({self.interface}, in worker processes)"
        if self.interface == "CoSimulation":
            return {"engine": engine, "step": f"{self.experiments[0].step:.6g} s (communication step)"}
        return {"engine": engine, "step": "adaptive (error control: see the integrator)"}

    def gradient_details(self) -> dict:
        details: dict = {"columns": self.columns} if self.columns else {}
        calls = self.simulator.column_use.to_json()
        if calls:
            details["fmu_calls"] = calls
        if self.fallback is not None:
            details["sensitivity_fallback"] = self.fallback
        return details

    def path_outputs(self, x: np.ndarray) -> list[RunOutputs]:
        """The runs of the problem's own gradient path at ``x``, ``dY`` filled.

        Where the sensitivity path has no exact sensitivities (:class:`~.gradients.Unavailable`,
        the worker's reason: a parameter moves a time event, a reinitialisation is not smooth),
        the problem continues with whole-run differences from here on, at ``x`` too; recorded in
        :attr:`fallback` (:meth:`gradient_details`) and said in :attr:`notes`.
        """
        found = self.path.outputs(self, x)
        if not isinstance(found, Unavailable):
            return found
        self.fallback = found.reason
        self.gradient_method = "fd"
        differences = DifferencePath()
        self.path = differences
        self._notes.append(f"{self.archive.path.name}: no exact sensitivities: {found.reason}; taking central "
                           "differences of whole runs (--gradient fd) from here on.")
        return differences.outputs(self, x)

    @property
    def notes(self) -> tuple[str, ...]:
        """What the user should know about the runs so far (the sensitivity path gave way to
        differences), one line each without the ``fmi-adjoint: note:`` prefix, each once; the
        command line prints them."""
        columns = self.simulator.column_use.note()
        loop = self.simulator.loop_note
        return tuple(dict.fromkeys([*self._notes, *([f"{self.archive.path.name}: {columns}"] if columns else []),
                                    *([f"{self.archive.path.name}: {loop}"] if loop else [])]))

    def close(self) -> None:
        """Free the instances and end every worker process."""
        self.instances.close()


def _implements_the_contract(problem: FmuProblem) -> AbstractIdentificationProblem:
    """mypy checks here that :class:`FmuProblem` implements the identification-problem contract."""
    return problem
