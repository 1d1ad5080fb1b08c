"""Identification across a system of Model Exchange FMUs integrated as one ODE (issue 28, part 3,
Model Exchange components): parameters of any component identified from measurements of the
system's outputs, with exact sensitivities through the couplings.

API
---
::

    from fmi_adjoint.ssp.monolithic_problem import MonolithicSystemProblem

    target = system_target(system.structure, system.archives, "ModelExchange")
    experiments = [system_experiment(target, DataFile.from_path("run1.csv"), {}, name="run1",
                                     t_end=None, step=math.inf, cost=CostOptions())]
    problem = MonolithicSystemProblem(system.structure, system.archives, experiments, ["A.k", "B.c"],
                                      Tolerances(rtol=1e-8))
    result = identify(problem, method="least_squares")

What
----
As :class:`~.problem.SystemProblem` (the same experiments, names, bounds, start values, costs,
statistics and RESULT.json), but one run is the system integrated as one ODE by the adaptive
Radau IIA scheme (:func:`~.monolithic.simulate_monolithic`), at every sample time of the data (the
error control's steps hit them, as for one Model Exchange FMU), and the gradient path is
:class:`~fmi_adjoint.fmu.gradients.SensitivityPath`: the exact sensitivities of each run, one run
per experiment (its ``2 p`` replays of the whole system in the same worker).  Where a run has no
exact sensitivities (a parameter moves a time event, a reinitialisation is not smooth), the
problem continues with central differences of whole runs on the nominal run's nodes, said once
(:attr:`MonolithicSystemProblem.notes`).  The runs of a difference stencil go to the executor as
:class:`MonolithicRunTask`.

Discretization error (:meth:`MonolithicSystemProblem.discretization_error`): the runs repeated at
tolerances 100 times tighter, as for one Model Exchange FMU
(:meth:`fmi_adjoint.fmu.problem.FmuProblem.discretization_error`); there is no coupling error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from ..errors import ConvergenceError, FmuError
from ..fmu.archive import FmuArchive
from ..fmu.experiment import FmuExperiment, Tolerances
from ..fmu.gradients import AbstractGradientPath, DifferencePath, SensitivityPath, Unavailable
from ..fmu.guards import at_result, convergence_warning, discretization_warning
from ..fmu.problem import reference_change
from ..fmu.simulation import RunOutputs, SensitivityRequest, at_samples
from ..identify.problem import AbstractIdentificationProblem
from ..scale import WorkerContext
from .coupling import InputTable
from .monolithic import MonolithicPlan, MonolithicRun, simulate_monolithic
from .problem import ResidentSystem, SystemBytes, SystemProblemBase
from .structure import SystemStructure, system_identity

__all__ = ["MonolithicRunTask", "MonolithicSystemProblem"]


@dataclasses.dataclass(frozen=True, eq=False)
class MonolithicRunTask:
    """One run of a Model Exchange system (:func:`~.monolithic.simulate_monolithic`) in a worker of
    the executor (a difference stencil's point); its components in one sandboxed worker process
    there, as here."""

    system: SystemBytes
    t_end: float
    tolerances: Tolerances
    times: np.ndarray
    event_times: np.ndarray
    values: tuple[tuple[str, float], ...]
    inputs: InputTable | None
    nodes: np.ndarray | None
    timeout: float

    def run(self, context: WorkerContext) -> MonolithicRun:
        with context.resident(f"ssp:{self.system.digest}", lambda: ResidentSystem(self.system)) as resident:
            return simulate_monolithic(self.system.structure, resident.archives, self.t_end,
                                       tolerances=self.tolerances, times=self.times, event_times=self.event_times,
                                       values=dict(self.values), inputs=self.inputs, nodes=self.nodes,
                                       timeout=self.timeout)

    def __repr__(self) -> str:
        return f"MonolithicRunTask({self.system.structure.name}, rtol={self.tolerances.rtol:g})"


class MonolithicSystemProblem(SystemProblemBase):
    """Experiments on a system of Model Exchange FMUs integrated as one ODE, sharing the identified
    parameters ``names`` (``COMPONENT.NAME``; module docstring).

    Parameters
    ----------
    structure, archives, experiments, names
        As for :class:`~.problem.SystemProblemBase` (an experiment's ``step`` is not used: the
        steps are the error control's).
    tolerances : Tolerances, optional
        Of the Radau IIA integration (``--rtol``, ``--atol``) and each run's budget.
    bounds, start, executor, timeout, log
        As for :class:`~.problem.SystemProblemBase`.
    """

    gradient_method = "sensitivity"
    interface = "ModelExchange"

    def __init__(self, structure: SystemStructure, archives: Mapping[str, FmuArchive],
                 experiments: Sequence[FmuExperiment], names: Sequence[str], tolerances: Tolerances | None = None,
                 **options):
        super().__init__(structure, archives, experiments, names, **options)
        for exp in self.experiments:  # loops and discrete connections, before any run
            MonolithicPlan(structure, archives, None if exp.inputs is None else tuple(exp.inputs.columns))
        self.tolerances = tolerances or Tolerances()
        self.path: AbstractGradientPath = SensitivityPath(self.names, False)
        #: Why the sensitivity path gave way to differences (None while it holds).
        self.fallback: str | None = None

    # -- simulation ----------------------------------------------------------------------------
    def simulate(self, exp: FmuExperiment, x: np.ndarray, *, sensitivity: SensitivityRequest | None = None,
                 tolerances: Tolerances | None = None, nodes: np.ndarray | None = None) -> MonolithicRun:
        """The run of ``exp`` at the identified values ``x`` (here), at its distinct sample times."""
        self.simulations += 1
        return simulate_monolithic(
            self.structure, self.archives, exp.t_end, tolerances=tolerances or self.tolerances, times=exp.stops()[0],
            event_times=exp.event_stops(),
            values=self.values(exp, np.asarray(x, dtype=float)), inputs=self._inputs(exp),
            sensitivities=() if sensitivity is None else sensitivity.names,
            steps=None if sensitivity is None else sensitivity.steps, nodes=nodes, timeout=self.timeout, log=self.log)

    def _outputs(self, exp: FmuExperiment, run: MonolithicRun) -> RunOutputs:
        """The run's columns the cost compares, at its sample times: the right limit at the second
        of two equal time stamps (an event in the data), with their sensitivities if any."""
        columns = run.result.columns
        missing = [c for c in exp.cost.channels if c not in columns]
        if missing:
            raise FmuError(f"experiment '{exp.name}': the system has no output {missing[0]!r}; outputs: "
                           f"{', '.join(columns)}.")
        pick = [columns.index(c) for c in exp.cost.channels]
        right = exp.stops()[1]
        Y = at_samples(exp, right, run.result.values[:, pick], run.right[:, pick])
        bad = np.argwhere(~np.isfinite(Y))
        if bad.size:
            k, c = bad[0]
            raise ConvergenceError(f"{self.structure.source}: {exp.cost.channels[c]!r} is not finite at "
                                   f"t = {exp.cost.sample_times[k]:g} s; check the parameter values.")
        dY = None
        if run.sensitivities is not None and run.right_sensitivities is not None:
            dY = at_samples(exp, right, run.sensitivities[:, pick], run.right_sensitivities[:, pick])
        info = dict(run.info)
        if run.unavailable is not None:
            info["sensitivities_unavailable"] = run.unavailable
        return RunOutputs(Y=Y, dY=dY, nodes=run.nodes, info=info)

    def run(self, exp: FmuExperiment, x: np.ndarray, *, sensitivity: SensitivityRequest | None = None,
            tolerances: Tolerances | None = None) -> RunOutputs:
        """One run of ``exp`` at ``x`` (with exact sensitivities when asked)."""
        return self._outputs(exp, self.simulate(exp, x, sensitivity=sensitivity, tolerances=tolerances))

    def run_points(self, points: Sequence[np.ndarray],
                   nodes: Sequence[np.ndarray | None] | None = None) -> list[list[RunOutputs]]:
        """Every experiment at each of ``points`` (``nodes``: per experiment, the node times the runs
        replay): on the executor in parallel, else one after another here."""
        pairs = [(e, exp, np.asarray(p, dtype=float)) for p in points for e, exp in enumerate(self.experiments)]

        def replayed(e: int) -> np.ndarray | None:
            return None if nodes is None else nodes[e]

        if self.executor is None:
            runs = [self.simulate(exp, p, nodes=replayed(e)) for e, exp, p in pairs]
        else:
            if self._system is None:
                self._system = SystemBytes.of(self.structure, self.archives)
            tasks = []
            for e, exp, p in pairs:
                tasks.append(MonolithicRunTask(self._system, float(exp.t_end), self.tolerances, exp.stops()[0],
                                               exp.event_stops(),
                                               tuple(sorted(self.values(exp, p).items())), self._inputs(exp),
                                               replayed(e), self.timeout))
            runs = list(self.executor.map(tasks))
            self.simulations += len(tasks)
        outputs = [self._outputs(exp, run) for (_, exp, _), run in zip(pairs, runs)]
        n = len(self.experiments)
        return [outputs[i * n:(i + 1) * n] for i in range(len(points))]

    def _path_outputs(self, x: np.ndarray) -> list[RunOutputs]:
        """The exact sensitivities; where a run has none, central differences of whole runs from
        here on (:attr:`fallback`, said in :attr:`notes`), at ``x`` too."""
        found = self.path.outputs(self, x)
        if not isinstance(found, Unavailable):
            return found
        self.fallback = found.reason
        self.gradient_method = "fd"
        self.path = DifferencePath()
        return self.path.outputs(self, x)

    @property
    def notes(self) -> tuple[str, ...]:
        """What the user should know about the runs so far (one line each, without the prefix)."""
        if self.fallback is None:
            return ()
        return (f"{self.structure.source}: no exact sensitivities: {self.fallback}; taking central differences of "
                "whole system runs from here on.",)

    # -- the contract's reports --------------------------------------------------------------------
    def discretization_error(self, x: np.ndarray) -> dict | None:
        """The integration error of the fit at ``x``: the runs repeated at tolerances 100 times
        tighter (module docstring)."""
        x = np.asarray(x, dtype=float)
        key = ("tolerance", x.tobytes())
        if key not in self._memo:
            fine = self.tolerances.tighter()
            self._memo[key] = {"tolerances": self.tolerances.to_json(), "reference_tolerances": fine.to_json(),
                               **reference_change(self, x, lambda exp: self.run(exp, x, tolerances=fine))}
        return dict(self._memo[key])  # type: ignore[call-overload]

    def result_guards(self, x: np.ndarray, std_errors) -> list[tuple[str, bool]]:
        """Warnings on the fit at ``x``, each with whether it makes the result untrustworthy: the
        optimizer stopped short of the minimum, or the integration error biases the parameters by
        more than a standard error (:func:`~fmi_adjoint.fmu.guards.discretization_warning`)."""
        at = at_result(self, x)  # type: ignore[arg-type]  # reads only the Simulations part
        if at is None:
            return []
        out = []
        for guard in (convergence_warning, discretization_warning):
            text = guard(self, at, std_errors)  # type: ignore[arg-type]
            if text is not None:
                out.append((text, True))
        return out

    def solver_info(self) -> dict:
        """The system and how it is integrated (RESULT.json; ``system_identity`` as for
        :meth:`~.problem.SystemProblem.solver_info`)."""
        return {"interface": "ModelExchange", "system": self.structure.source,
                "system_identity": system_identity(self.structure, self.archives),
                "integrator": {"scheme": "Radau IIA (order 5), adaptive", **self.tolerances.to_json(),
                               "coupling": "every component's Model Exchange interface in one ODE"}}

    def gradient_details(self) -> dict:
        how = ("exact sensitivities of the coupled system (state columns by central differences of its right-hand "
               "side, parameter columns by replays of the whole system)" if self.fallback is None
               else "central differences of whole system runs")
        details: dict = {"columns": dict.fromkeys(self.names, how)}
        if self.fallback is not None:
            details["sensitivity_fallback"] = self.fallback
        return details

    def run_details(self) -> dict[str, str]:
        return {"engine": "the component FMUs' binaries (Model Exchange, all in one worker process), coupled into "
                          "one ODE",
                "step": "adaptive (error control: see the integrator)"}


def _implements_the_contract(problem: MonolithicSystemProblem) -> AbstractIdentificationProblem:
    """mypy checks here that :class:`MonolithicSystemProblem` implements the identification-problem contract."""
    return problem
