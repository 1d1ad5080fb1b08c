"""Identification across a co-simulated system (issue 28, part 3, the co-simulation master):
parameters of any component identified from measurements of the system's outputs.  (A system of
Model Exchange components integrated as one ODE, with exact sensitivities:
:mod:`.monolithic_problem`.)

API
---
::

    from fmi_adjoint.ssp.problem import SystemProblem, system_experiment, system_target

    target = system_target(system.structure, system.archives)     # outputs COMPONENT.CONNECTOR
    experiments = [system_experiment(target, DataFile.from_path("run1.csv"), {}, name="run1",
                                     t_end=None, step=1e-3, cost=CostOptions())]
    problem = SystemProblem(system.structure, system.archives, experiments, ["A.k", "B.c"],
                            MasterSettings(step=1e-3), executor=LocalPool(2))
    result = identify(problem, method="least_squares")            # then problem.close()

What
----
An experiment is a :class:`~fmi_adjoint.fmu.experiment.FmuExperiment` of the system: its
cost compares the columns of the master's result (:class:`~.master.SystemResult`: every
component output as ``COMPONENT.CONNECTOR``, every system output by its name) with the data;
``step`` is the macro step H, ``values`` the ``--set COMPONENT.NAME=VALUE`` settings, and
``inputs`` the system's input connectors over time.  One simulation is one run of the master
(:func:`~.master.simulate_system`), its result interpolated linearly from the communication
points to the sample times (:class:`~fmi_adjoint.costs.Sampler`, as for a Co-Simulation FMU).

The identified names are ``COMPONENT.NAME``: a real parameter of that component's FMU, fixed or
tunable (:func:`~fmi_adjoint.fmu.variables.check_names` on the component's FMU; the master sets
every parameter before initialization, so fixed ones are identifiable).  Bounds: the FMU's
``min``/``max``; start: ``--set``, else the SSD's parameter binding, else the FMU's start value.

Gradients are central differences of whole system runs (the FMU ``fd`` path:
:class:`~fmi_adjoint.fmu.gradients.DifferencePath`, stencils inside the bounds of
:mod:`~fmi_adjoint.fmu.differences`); the runs of a stencil go to the executor as
:class:`SystemRunTask` (the structure and the FMUs' bytes; a worker opens them once, with the
importer's checks, and keeps them for the next task), so a local process pool and a Dask cluster
compute the same numbers as a serial run.  Costs, residuals, Gauss-Newton statistics and the
noise floor are those of any problem computed from runs (:class:`~fmi_adjoint.fmu.problem.RunsProblem`).

Coupling error (:meth:`SystemProblem.discretization_error`): the runs repeated at H/2; their
difference times ``1 / (1 - 2^-p)`` (``p`` the order of the input approximation; Richardson,
as :func:`~.master.estimate_error`) estimates the coupling error of the runs at H, and the
Gauss-Newton step it implies, ``(JᵀJ)⁻¹ Jᵀ δr``, the parameters' bias from it.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO, cast

import numpy as np

from ..costs import Sampler
from ..data import Measurement
from ..errors import ConvergenceError, FmuError, IdentificationError
from ..fmu.archive import FmuArchive, open_fmu
from ..fmu.differences import FD_REL_STEP
from ..fmu.experiment import FmuExperiment, Tolerances
from ..fmu.gradients import DifferencePath, Unavailable
from ..fmu.guards import FitProblem, at_result, beyond_standard_errors, convergence_warning
from ..fmu.problem import RunsProblem, declared_parameter, reference_change
from ..fmu.session import DEFAULT_TIMEOUT, check_timeout
from ..fmu.simulation import RunOutputs, SensitivityRequest
from ..fmu.tasks import FmuBytes
from ..fmu.variables import check_names, declared_variable
from ..identify.data_costs import CostOptions, DataFile, Target, build_cost
from ..identify.problem import AbstractIdentificationProblem
from ..identify.spec import check_time_span
from ..integrate.inputs import ParameterValues
from ..scale import AbstractExecutor, WorkerContext
from ..text import excerpt
from .coupling import InputTable, SystemResult, all_model_exchange, check_input_span, system_columns
from .master import MasterSettings, simulate_system
from .structure import SystemStructure, system_identity

__all__ = ["ResidentSystem", "SystemBytes", "SystemProblem", "SystemProblemBase", "SystemRunTask", "system_experiment",
           "system_target"]


def system_target(structure: SystemStructure, archives: Mapping[str, FmuArchive],
                  interface: str = "CoSimulation") -> Target:
    """The system's outputs as data may name them (a run's result columns), with their units (the
    connector's, else the FMU variable's) and end time (``DefaultExperiment`` ``stopTime``, else
    1 s as for an FMU without one).  Refuses a component without ``interface`` before any data are
    read."""
    columns = system_columns(structure, archives, interface)
    units = []
    for column in columns:
        element, dot, connector = column.partition(".")
        if dot and element in archives:
            found = structure.component(element).connector(connector)
            units.append(found.unit or declared_variable(archives[element], connector).unit or "")
        else:
            units.append(next((c.unit for c in structure.connectors if c.name == column), ""))
    stop = structure.stop_time
    return Target(structure.name, columns, float(stop) if stop is not None else 1.0, tuple(units), stop is not None)


def system_experiment(target: Target, data: DataFile, values: Mapping[str, float], *, name: str,
                      t_end: float | None, step: float, cost: CostOptions,
                      inputs: Measurement | None = None, inputs_file: str | None = None,
                      t_start: float = 0.0) -> FmuExperiment:
    """One experiment on the system from the measurement ``data`` (columns named like the
    ``target``'s outputs), with the settings ``values`` and macro step ``step``; ``inputs``
    (read from ``inputs_file``, named in messages) drive the system's input connectors and must
    cover the simulated span from ``t_start`` (the system's start time)."""
    experiment_cost, end = build_cost(cost, target, data, t_end=t_end, step=step)
    check_time_span(end, step, t_end_option="--t-end (or the last sample time)")
    if inputs is not None:
        check_input_span(inputs.times, t_start, end, str(inputs_file))
    return FmuExperiment(experiment_cost, t_end=end, step=step, inputs=inputs, values=dict(values), name=name)


# -- runs on an executor ----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class SystemBytes:
    """A system as it travels to workers: its structure (bindings resolved) and each
    component's FMU as its bytes."""

    structure: SystemStructure
    fmus: tuple[tuple[str, FmuBytes], ...]
    digest: str

    @classmethod
    def of(cls, structure: SystemStructure, archives: Mapping[str, FmuArchive]) -> SystemBytes:
        fmus = tuple((c.name, FmuBytes.of(archives[c.name])) for c in structure.components)
        digest = hashlib.sha256(repr((structure, [(n, f.digest) for n, f in fmus])).encode()).hexdigest()
        return cls(structure, fmus, digest)


class ResidentSystem:
    """A system opened in a worker: its private folder and one archive per component (a
    component's FMU checked and extracted by :func:`~fmi_adjoint.fmu.archive.open_fmu`)."""

    def __init__(self, system: SystemBytes):
        self.folder = Path(tempfile.mkdtemp(prefix="fmi_adjoint_ssp_task_"))
        self.archives: dict[str, FmuArchive] = {}
        try:
            for k, (name, fmu) in enumerate(system.fmus):
                path = self.folder / f"{k}.fmu"
                path.write_bytes(fmu.raw)
                self.archives[name] = open_fmu(path)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        try:
            for archive in self.archives.values():
                archive.close()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


@dataclasses.dataclass(frozen=True, eq=False)
class SystemRunTask:
    """One run of the master (:func:`~.master.simulate_system`) in a worker; every component
    in its own sandboxed worker process there, as here."""

    system: SystemBytes
    t_end: float
    settings: MasterSettings
    values: tuple[tuple[str, float], ...]
    inputs: InputTable | None
    timeout: float

    def run(self, context: WorkerContext) -> SystemResult:
        with context.resident(f"ssp:{self.system.digest}", lambda: ResidentSystem(self.system)) as resident:
            return simulate_system(self.system.structure, resident.archives, self.t_end, self.settings,
                                   values=dict(self.values), inputs=self.inputs, timeout=self.timeout)

    def __repr__(self) -> str:
        return f"SystemRunTask({self.system.structure.name}, H={self.settings.step:g})"


# -- the problem --------------------------------------------------------------------------------
def _split(name: str, structure: SystemStructure) -> tuple[str, str]:
    """``COMPONENT.NAME`` as (component, name); FmuError naming the form and the components."""
    component, dot, variable = name.partition(".")
    if not dot or not variable or not component:
        raise FmuError(f"parameter {excerpt(name)}: name a component's parameter as COMPONENT.NAME (components: "
                       f"{', '.join(c.name for c in structure.components)}).")
    structure.component(component)  # raises, listing the components
    return component, variable


class SystemProblemBase(RunsProblem):
    """What the identification problems of a system share, whichever way its runs are made: the
    identified parameters ``names`` (``COMPONENT.NAME``; module docstring), their bounds, start and
    scales, the experiments' values and inputs, the memo of the gradient path's runs, the units.

    Parameters
    ----------
    structure, archives
        What :func:`~.reading.open_system` returns as ``.structure`` and ``.archives`` (the
        caller closes them).
    experiments : sequence of FmuExperiment
        Of :func:`system_experiment`.
    bounds : mapping of str to (float, float), optional
        Overrides the FMUs' ``min``/``max``.
    start : ParameterValues or mapping of str to float, optional
        ``--set`` values (module docstring).
    executor : AbstractExecutor, optional
        Runs the finite-difference stencils (a local process pool or a Dask cluster); default:
        one after another here.
    timeout : float
        Longest one FMI call may take [s] (``--fmu-timeout``).
    log : text stream, optional
        Where the FMU binaries' output is copied (``--verbose``; runs here only).
    """

    #: The interface every component runs.
    interface: str
    #: The starts of a multi-start run one after another (each run opens its own workers).
    thread_safe = False

    def __init__(self, structure: SystemStructure, archives: Mapping[str, FmuArchive],
                 experiments: Sequence[FmuExperiment], names: Sequence[str], *,
                 bounds: Mapping[str, tuple[float, float]] | None = None,
                 start: ParameterValues | Mapping[str, float] | None = None,
                 executor: AbstractExecutor | None = None, timeout: float = DEFAULT_TIMEOUT,
                 log: TextIO | None = None):
        self.structure, self.archives = structure, archives
        self.executor, self.timeout, self.log = executor, check_timeout(timeout), log
        self.experiments: tuple[FmuExperiment, ...] = tuple(experiments)
        if not self.experiments:
            raise IdentificationError("give at least one experiment (--data).")
        self.names: tuple[str, ...] = tuple(names)
        if len(set(self.names)) != len(self.names) or not self.names:
            raise IdentificationError(f"parameters {list(self.names)}: give distinct names (--params).")
        system_columns(structure, archives, self.interface)  # a component without the interface, before any run
        parts = [_split(name, structure) for name in self.names]
        for component in dict.fromkeys(c for c, _ in parts):
            try:
                check_names(archives[component], [v for c, v in parts if c == component], [])
            except FmuError as exc:
                raise FmuError(f"component {excerpt(component)}: {exc}") from None
        for name in bounds or {}:
            if name not in self.names:
                raise IdentificationError(f"bounds given for '{name}', which is not identified; add it to --params.")
        declared = [declared_parameter(archives[c], v) for c, v in parts]
        self.lower = np.array([(bounds or {}).get(n, (d[1], d[2]))[0] for n, d in zip(self.names, declared)],
                              dtype=float)
        self.upper = np.array([(bounds or {}).get(n, (d[1], d[2]))[1] for n, d in zip(self.names, declared)],
                              dtype=float)
        given = ParameterValues.of(start).as_dict()
        bound = {f"{p.component}.{p.name}": float(p.value) for p in structure.parameters}
        shared = self.experiments[0].values
        self.start = np.array([given.get(n, shared.get(n, bound.get(n, d[0] if d[0] is not None else 0.0)))
                               for n, d in zip(self.names, declared)], dtype=float)
        # Difference scale: the nominal value, else |start|, else FMI's default nominal 1.
        self.nominal = np.array([abs(d[3]) if d[3] else (abs(s) if s else 1.0)
                                 for d, s in zip(declared, self.start)])
        self.simulations = 0
        self._system: SystemBytes | None = None
        # The last difference runs and coupling-error estimate, by point: the statistics, the
        # guards and RESULT.json all ask at the result (the runs are deterministic).
        self._memo: dict[tuple[str, bytes], object] = {}

    def with_start(self, start: np.ndarray) -> SystemProblemBase:
        """This problem from another start point (a start of a multi-start; each run opens and
        ends its own component workers, so a copy owns nothing); it counts its own simulations."""
        other = copy.copy(self)
        other.start = np.array(start, dtype=float)
        other.simulations = 0
        other._memo = {}
        return other

    # -- simulation ----------------------------------------------------------------------------
    def values(self, exp: FmuExperiment, x: np.ndarray) -> dict[str, float]:
        return {**exp.values, **dict(zip(self.names, map(float, x)))}

    def _inputs(self, exp: FmuExperiment) -> InputTable | None:
        if exp.inputs is None:
            return None
        return InputTable(exp.inputs.times, tuple(exp.inputs.columns), exp.inputs.values)

    def path_outputs(self, x: np.ndarray) -> list[RunOutputs]:
        """The runs of the gradient path at ``x``, ``dY`` filled (memoized: the statistics, the
        guards and RESULT.json all ask at the result)."""
        x = np.asarray(x, dtype=float)
        key = ("path", x.tobytes())
        if key not in self._memo:
            found = self._path_outputs(x)
            self._memo = {k: v for k, v in self._memo.items() if k[0] != "path"}
            self._memo[key] = found
        return cast(list[RunOutputs], self._memo[key])

    def _path_outputs(self, x: np.ndarray) -> list[RunOutputs]:
        found = self.path.outputs(self, x)
        assert not isinstance(found, Unavailable)  # differences always answer
        return found

    def result_guards(self, x: np.ndarray, std_errors) -> list[tuple[str, bool]]:
        """Warnings on the fit at ``x``, each with whether it makes the result untrustworthy."""
        raise NotImplementedError

    def parameter_units(self) -> dict[str, str]:
        """The unit text of the identified parameters (the component FMU's ``unit``)."""
        out = {}
        for name in self.names:
            component, variable = _split(name, self.structure)
            out[name] = declared_variable(self.archives[component], variable).unit or ""
        return out

    def output_units(self) -> dict[str, str]:
        target = system_target(self.structure, self.archives, self.interface)
        return dict(zip(target.output_names, target.units))

    def close(self) -> None:
        """Nothing to release: every run ends its own component workers (the caller closes the
        archives and the executor)."""


class SystemProblem(SystemProblemBase):
    """Experiments on a system of FMUs co-simulated by the master (:mod:`.master`), sharing the
    identified parameters ``names`` (``COMPONENT.NAME``; module docstring); the gradient by central
    differences of whole system runs, on the executor.

    Parameters
    ----------
    structure, archives, experiments
        As for :class:`SystemProblemBase`.
    settings : MasterSettings
        The master's macro step, order and input approximation.
    bounds, start, executor, timeout, log
        As for :class:`SystemProblemBase`.
    """

    gradient_method = "fd"
    interface = "CoSimulation"

    def __init__(self, structure: SystemStructure, archives: Mapping[str, FmuArchive],
                 experiments: Sequence[FmuExperiment], names: Sequence[str], settings: MasterSettings, **options):
        super().__init__(structure, archives, experiments, names, **options)
        self.settings = settings
        self.path = DifferencePath(FD_REL_STEP)

    def _outputs(self, exp: FmuExperiment, result: SystemResult) -> RunOutputs:
        """The result's columns the cost compares, at its sample times."""
        try:
            Y = np.column_stack([result.column(c) for c in exp.cost.channels])
        except FmuError as exc:
            raise FmuError(f"experiment '{exp.name}': {exc}") from None
        bad = np.argwhere(~np.isfinite(Y))
        if bad.size:
            k, c = bad[0]
            raise ConvergenceError(f"{self.structure.source}: {exp.cost.channels[c]!r} is not finite at "
                                   f"t = {result.times[k]:g} s; check the parameter values.")
        return RunOutputs(Y=Sampler.from_grid(result.times, exp.cost.sample_times).sample(Y))

    def simulate(self, exp: FmuExperiment, x: np.ndarray, settings: MasterSettings | None = None) -> SystemResult:
        """The master's run of ``exp`` at the identified values ``x`` (here)."""
        self.simulations += 1
        return simulate_system(self.structure, self.archives, exp.t_end, settings or self.settings,
                               values=self.values(exp, np.asarray(x, dtype=float)), inputs=self._inputs(exp),
                               timeout=self.timeout, log=self.log)

    def run(self, exp: FmuExperiment, x: np.ndarray, *, sensitivity: SensitivityRequest | None = None,
            tolerances: Tolerances | None = None) -> RunOutputs:
        """One run of ``exp`` at ``x`` (finite differences only: ``sensitivity`` is refused)."""
        if sensitivity is not None or tolerances is not None:
            raise IdentificationError("a co-simulated system has no exact sensitivities nor tolerances here; its "
                                      "gradient is central differences of whole runs.")
        return self._outputs(exp, self.simulate(exp, x))

    def run_points(self, points: Sequence[np.ndarray],
                   nodes: Sequence[np.ndarray | None] | None = None) -> list[list[RunOutputs]]:
        """Every experiment at each of ``points``: on the executor in parallel, else one after
        another here; per point, one :class:`RunOutputs` per experiment (``nodes`` unused)."""
        pairs = [(exp, np.asarray(p, dtype=float)) for p in points for exp in self.experiments]
        if self.executor is None:
            results = [self.simulate(exp, p) for exp, p in pairs]
        else:
            if self._system is None:
                self._system = SystemBytes.of(self.structure, self.archives)
            tasks = [SystemRunTask(self._system, float(exp.t_end), self.settings,
                                   tuple(sorted(self.values(exp, p).items())), self._inputs(exp), self.timeout)
                     for exp, p in pairs]
            results = list(self.executor.map(tasks))
            self.simulations += len(tasks)
        outputs = [self._outputs(exp, result) for (exp, _), result in zip(pairs, results)]
        n = len(self.experiments)
        return [outputs[i * n:(i + 1) * n] for i in range(len(points))]

    def coupling_factor(self) -> float:
        """``1 / (1 - 2^-p)``: the coupling error of a run at H over its difference to H/2."""
        return 1.0 / (1.0 - 2.0 ** -self.settings.approximation.order)

    def discretization_error(self, x: np.ndarray) -> dict | None:
        """The coupling error of the fit at ``x``, estimated by step halving (module docstring):
        the change of the cost and the largest change of a compared output between the runs at
        H and H/2, and the parameters' bias (identified minus the values the runs at H/2 would
        give), all times :meth:`coupling_factor`."""
        x = np.asarray(x, dtype=float)
        key = ("coupling", x.tobytes())
        if key not in self._memo:
            self._memo[key] = self._coupling_error(x)
        return dict(cast(dict, self._memo[key]))

    def _coupling_error(self, x: np.ndarray) -> dict:
        half = dataclasses.replace(self.settings, step=self.settings.step / 2)
        factor = self.coupling_factor()
        return {"method": f"step halving (macro step {self.settings.step:g} s against {half.step:g} s, times "
                          f"{factor:g})",
                "macro_step": self.settings.step, "reference_step": half.step,
                **reference_change(self, x, lambda exp: self._outputs(exp, self.simulate(exp, x, half)), factor)}

    def result_guards(self, x: np.ndarray, std_errors) -> list[tuple[str, bool]]:
        """Warnings on the fit at ``x``, each with whether it makes the result untrustworthy:
        the optimizer stopped short of the minimum (:func:`~fmi_adjoint.fmu.guards.convergence_warning`),
        or the coupling error of the macro step biases the parameters by more than a standard
        error (:meth:`coupling_warning`)."""
        # at_result and convergence_warning read only the Simulations part of FitProblem.
        at = at_result(cast(FitProblem, self), x)
        if at is None:
            return []
        out = []
        text = convergence_warning(cast(FitProblem, self), at, std_errors)
        if text is not None:
            out.append((text, True))
        text = self.coupling_warning(x, std_errors)
        if text is not None:
            out.append((text, True))
        return out

    def coupling_warning(self, x: np.ndarray, std_errors) -> str | None:
        """The warning that the coupling error biases the result by more than
        ``UNCONVERGED_SE`` standard errors (and more than ``UNCONVERGED_RELATIVE`` of the
        parameter), as :func:`~fmi_adjoint.fmu.guards.discretization_warning` for Model Exchange."""
        if std_errors is None:
            return None
        estimate = self.discretization_error(x)
        if estimate is None or "parameter_bias" not in estimate:
            return None
        bias = np.array([estimate["parameter_bias"][n] for n in self.names], dtype=float)
        shown = beyond_standard_errors(bias, x, std_errors, self.nominal, self.names)
        if shown is None:
            return None
        return (f"the coupling error of the macro step ({self.settings.step:g} s, {self.settings.order.name}, "
                f"{self.settings.approximation.name}; estimated by step halving) biases the result by about {shown}: "
                f"the standard errors do not cover it; give a smaller --step (e.g. {self.settings.step / 4:g})"
                + (" or --extrapolation linear" if self.settings.approximation.order == 1 else "")
                + (", or integrate the system as one ODE, without coupling error (--interface me: every component "
                   "offers Model Exchange)" if all_model_exchange(self.structure, self.archives) else "") + ".")

    def solver_info(self) -> dict:
        """The system and how the master runs it (RESULT.json); ``system_identity`` lets ``apply
        --system`` refuse a result of another system (:func:`~.structure.system_identity`)."""
        return {"interface": "CoSimulation", "system": self.structure.source,
                "system_identity": system_identity(self.structure, self.archives),
                "integrator": {"master": "fmi-adjoint co-simulation master", "macro_step": self.settings.step,
                               "order": self.settings.order.name,
                               "input_approximation": self.settings.approximation.name,
                               "components": "each FMU's own solver"}}

    def gradient_details(self) -> dict:
        return {"columns": {name: "central differences of whole system runs" for name in self.names}}

    def run_details(self) -> dict[str, str]:
        return {"engine": "the component FMUs' binaries (Co-Simulation, each in a worker process) under the "
                          f"co-simulation master ({self.settings.order.name}, {self.settings.approximation.name})",
                "step": f"{self.settings.step:.6g} s (macro step)"}


def _implements_the_contract(problem: SystemProblem) -> AbstractIdentificationProblem:
    """mypy checks here that :class:`SystemProblem` implements the identification-problem contract."""
    return problem

