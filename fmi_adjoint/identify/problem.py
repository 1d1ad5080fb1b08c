"""Identification problems: experiments sharing parameters, and their gradients."""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

from ..adjoint import sampled_outputs
from ..adjoint.discrete import channel_indices
from ..costs.base import AbstractCost
from ..costs.least_squares import LeastSquaresCost
from ..costs.sensors import GAIN_RANGE, MAX_DELAY_SHARE, SENSOR_PARAMETERS, SensorCost, sensor_parameter
from ..errors import IdentificationError
from ..integrate import Trajectory, time_grid
from ..integrate.inputs import ParameterValues
from .experiment import Experiment
from .parts import (
    GRADIENT_METHOD_CHOICES,
    PART_KIND_CHOICES,
    AbstractGradientMethod,
    AbstractPart,
    gradient_method,
    ordered_sum,
    part_kind,
)

__all__ = ["AbstractProblem", "Experiment", "IdentificationProblem", "Evaluation", "GRADIENT_METHODS", "PART_KINDS",
           "gauss_newton_statistics", "ordered_sum"]

#: Gradient method names (``fmi-adjoint gradient --method``; the objects:
#: :data:`~fmi_adjoint.identify.parts.GRADIENT_METHOD_CHOICES`).
GRADIENT_METHODS = tuple(GRADIENT_METHOD_CHOICES)
#: What :meth:`IdentificationProblem.part` computes for one experiment (the objects:
#: :data:`~fmi_adjoint.identify.parts.PART_KIND_CHOICES`).
PART_KINDS = tuple(PART_KIND_CHOICES)


class AbstractProblem(Protocol):
    """The contract :func:`~fmi_adjoint.identify.identify` and
    :func:`~fmi_adjoint.identify.multistart.run_starts` work on: :class:`IdentificationProblem`
    (model files), :class:`~fmi_adjoint.identify.parallel.DistributedProblem` (on an
    executor) and the FMU problem implement it."""

    names: tuple[str, ...]
    start: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    gradient_method: str

    @property
    def simulations(self) -> int:
        """Simulations run so far."""
        ...

    def evaluate(self, x: np.ndarray, method: str = ...) -> Evaluation:
        """Cost and gradient at ``x`` (physical values)."""
        ...

    @property
    def has_residuals(self) -> bool:
        """Whether every cost is a least-squares cost, so :meth:`residuals` answers."""
        ...

    def residuals(self, x: np.ndarray, jacobian: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
        """Least-squares residuals and their Jacobian at ``x``."""
        ...

    def statistics(self, x: np.ndarray) -> dict:
        """Standard errors and correlations at ``x``."""
        ...


class MeasuredExperiment(Protocol):
    """What plots and reports read of an experiment: its name and its cost (with the data)."""

    @property
    def name(self) -> str:
        ...

    @property
    def cost(self) -> AbstractCost:
        ...


class AbstractIdentificationProblem(AbstractProblem, Protocol):
    """What the commands (``gradient``, ``identify``) also ask of a problem: outputs for plots,
    the noise floor, how runs are computed, where the gradient comes from, the discretization
    error, and releasing workers.  :class:`IdentificationProblem` and
    :class:`~fmi_adjoint.fmu.problem.FmuProblem` implement it, so the CLI never probes."""

    @property
    def experiments(self) -> Sequence[MeasuredExperiment]:
        """The experiments, in the order :meth:`sampled_outputs` counts them."""
        ...

    def sampled_outputs(self, index: int, x: np.ndarray) -> np.ndarray:
        """Outputs of experiment ``index`` at its sample times, at identified values ``x``."""
        ...

    def noise_floor(self) -> float | None:
        """The cost measurement noise alone would leave (None where it cannot be estimated)."""
        ...

    def solver_info(self) -> dict:
        """How the runs are computed (engine and integrator, or FMU interface and tolerances)."""
        ...

    def gradient_details(self) -> dict:
        """Where the gradient's parts come from, for RESULT.json (empty if nothing to say)."""
        ...

    def discretization_error(self, x: np.ndarray) -> dict | None:
        """Estimated discretization error of the fit at ``x`` where the runs have error control
        (FMU Model Exchange); None where the scheme and its step are part of the model."""
        ...

    def parameter_units(self) -> dict[str, str]:
        """The unit text of each identified parameter by name ("" where none is declared), for
        the parameter table and the report."""
        ...

    def output_units(self) -> dict[str, str]:
        """The unit text of each output by name ("" where none is declared), for the plots of
        the signals (an output may share its name with a parameter of another unit)."""
        ...

    def run_details(self) -> dict[str, str]:
        """What RESULT.json does not record of how the runs were computed, in words for the
        report: ``"engine"`` and ``"step"``."""
        ...

    def close(self) -> None:
        """Release worker processes (a no-op for in-process problems)."""
        ...


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """Cost and gradient over all experiments, in physical parameter units."""

    J: float
    gradient: np.ndarray
    method: str
    forward_seconds: float
    gradient_seconds: float
    simulations: int


class IdentificationProblem:
    """Experiments sharing the identified parameters ``names``.

    Not thread-safe (:attr:`thread_safe`): its compiled engines are not re-entrant.

    Sensor models (issue 26, part 6): a name ``<channel>.delay``, ``<channel>.gain`` or
    ``<channel>.bias`` that is not a model parameter identifies that sensor parameter of every
    experiment measuring ``channel`` (:class:`~fmi_adjoint.costs.sensors.SensorCost`: start 0,
    1, 0; default bounds: a delay within 10 % of the record, a gain within a factor 10, a free
    bias).  Their costs must be least-squares costs; they are then compared on the step grid of
    each experiment (:class:`~fmi_adjoint.costs.sensors.SensorCost`) and their gradient is the
    cost's partial derivative, the model parameters' that of the adjoint with the transformed
    output derivative (:meth:`part`).

    Parameters
    ----------
    experiments : sequence of Experiment
    names : sequence of str
        Parameters to identify; each must exist in every experiment's model, or be a sensor
        parameter (above).
    bounds : mapping of str to (float, float), optional
        Overrides the bounds declared in the model.
    start : ParameterValues or mapping of str to float, optional
        Start values: the problem's values (:attr:`~fmi_adjoint.identify.spec.ProblemSpec.values`,
        ``--set``); a name not in it starts from the first experiment's value (its declared
        value unless that experiment sets it).
    """

    #: Its evaluations may not run in several threads at once (compiled engines are not
    #: re-entrant); a :class:`~fmi_adjoint.identify.parallel.DistributedProblem` may.
    thread_safe = False

    def __init__(
        self,
        experiments: Sequence[Experiment],
        names: Sequence[str],
        *,
        bounds: Mapping[str, tuple[float, float]] | None = None,
        start: ParameterValues | Mapping[str, float] | None = None,
    ):
        if not experiments:
            raise IdentificationError("give at least one experiment.")
        names = tuple(names)
        if not names:
            raise IdentificationError("give at least one parameter to identify (--params).")
        if len(set(names)) != len(names):
            raise IdentificationError(f"parameters {list(names)} contain duplicates.")
        first = experiments[0]
        declared = {p.name: p for p in first.model.model.all_parameters}
        measured = tuple(dict.fromkeys(c for exp in experiments for c in exp.cost.channels))
        parsed = {n: sensor_parameter(n, measured) for n in names if n not in declared}
        sensors = {n: v for n, v in parsed.items() if v is not None}
        model_names = tuple(n for n in names if n not in sensors)
        for exp in experiments:
            for name in model_names:
                exp.model.parameter_index(name)
            channel_indices(exp.model, exp.cost)
        for name in bounds or {}:
            if name not in names:
                raise IdentificationError(f"bounds given for '{name}', which is not identified; add it to --params.")
        if sensors:
            experiments = [_with_sensor_cost(exp) for exp in experiments]
        self.experiments = tuple(experiments)
        self.names = names
        #: ``(channel, kind)`` of each identified sensor parameter by name (issue 26, part 6).
        self.sensors: dict[str, tuple[str, str]] = sensors
        self._model_names = model_names
        defaults: dict[str, tuple[float, float]] = {n: _sensor_bounds(kind, self.experiments)
                                                     for n, (_, kind) in sensors.items()}
        defaults.update({n: declared[n].bounds for n in model_names})
        self.lower = np.array([(bounds or {}).get(n, defaults[n])[0] for n in names], dtype=float)
        self.upper = np.array([(bounds or {}).get(n, defaults[n])[1] for n in names], dtype=float)
        base = first.parameters((), np.array([]))
        given = ParameterValues.of(start).as_dict()
        self.start = np.array(
            [given.get(n, SENSOR_PARAMETERS[sensors[n][1]] if n in sensors
                               else base[first.model.parameter_index(n)]) for n in names], dtype=float
        )
        self.simulations = 0
        #: The gradient method :func:`~fmi_adjoint.identify.identify` uses with L-BFGS-B.
        self.gradient_method = "adjoint"
        #: Position of each experiment in the problem this one was restricted from.
        self.indices: tuple[int, ...] = tuple(range(len(self.experiments)))

    def with_start(self, start: np.ndarray) -> IdentificationProblem:
        """The same problem from another start point (a start of a multi-start); it counts its
        own simulations."""
        other = copy.copy(self)
        other.start = np.array(start, dtype=float)
        other.simulations = 0
        return other

    def restricted(self, keep: Sequence[int]) -> IdentificationProblem:
        """The problem of the experiments ``keep`` only (positions in this problem), with the
        same parameters, bounds and start (the first stage of a continuation)."""
        if not keep or any(not 0 <= k < len(self.experiments) for k in keep):
            raise IdentificationError(f"experiments {list(keep)}: give positions among 0..{len(self.experiments) - 1}.")
        other = copy.copy(self)
        other.experiments = tuple(self.experiments[k] for k in keep)
        other.indices = tuple(self.indices[k] for k in keep)
        other.simulations = 0
        return other

    # -- the work of one experiment (what a parallel task runs) -----------------------
    def part(self, index: int, x: np.ndarray, kind: str | AbstractPart,
             noise_std: Mapping[str, float] | None = None):
        """The contribution of experiment ``index`` at identified values ``x``.

        ``kind``: a part object (:mod:`~fmi_adjoint.identify.parts`) or its name: ``cost`` (J),
        ``adjoint``/``forward``/``continuous`` ((J, gradient, seconds of the forward run)),
        ``residuals`` ((r, None)), ``jacobian`` ((r, dr/dx)), ``fisher`` (its Fisher
        information for the noise levels ``noise_std``).  Every sum over experiments is formed
        from these parts in experiment order (:meth:`_parts`), wherever they were computed.

        With sensor parameters (class docstring) the parts are computed here
        (:meth:`_sensor_part`); ``continuous`` and ``fisher`` are refused.
        """
        if self.sensors:
            return self._sensor_part(index, np.asarray(x, dtype=float), part_kind(kind, noise_std))
        return part_kind(kind, noise_std).compute(self.experiments[index], self.names, np.asarray(x, dtype=float))

    def _sensor_part(self, index: int, x: np.ndarray, kind: AbstractPart):
        """:meth:`part` of a problem with sensor parameters.

        ``J`` and the sensor parameters' gradient come from the sensor cost itself
        (:meth:`~fmi_adjoint.costs.sensors.SensorCost.sensor_gradient`); the model parameters'
        gradient from the engine's adjoint sweep of the same cost, whose ``dJ/dY`` is the
        transformed output derivative (``g_c`` times the transposed interpolation of
        ``dJ/dYhat``); the residual Jacobian from the output sensitivities on the grid mapped by
        :meth:`~fmi_adjoint.costs.sensors.SensorCost.output_jacobian` and the columns
        ``dr/dYhat * dYhat/dtheta`` of the sensor parameters.
        """
        exp = self.experiments[index]
        cost = exp.cost
        assert isinstance(cost, SensorCost)  # _with_sensor_cost wrapped every cost
        positions = {n: k for k, n in enumerate(self.names)}
        sensors = list(cost.sensors)
        for name, (channel, what) in self.sensors.items():
            if channel in cost.channels:
                c = cost.channels.index(channel)
                sensors[c] = sensors[c].replaced(what, x[positions[name]])
        cost = cost.with_sensors(tuple(sensors))
        run = dataclasses.replace(exp, cost=cost)
        model_pos = [positions[n] for n in self._model_names]
        started = time.perf_counter()
        traj = run.simulate(run.parameters(self._model_names, x[model_pos]))
        forward_seconds = time.perf_counter() - started
        _, channels, Y = sampled_outputs(traj, cost)
        name = kind.name
        if name == "cost":
            return cost.evaluate(Y, traj.p).J
        idx = np.array([run.model.parameter_index(n) for n in self._model_names], dtype=int)
        if name in ("adjoint", "forward"):
            gradient = np.zeros(len(self.names))
            J, partial = cost.sensor_gradient(Y, traj.p)
            if idx.size:
                model_gradient = (run.engine.adjoint_gradient(traj, cost) if name == "adjoint"
                                  else run.engine.sensitivity_gradient(traj, cost, idx))
                gradient[model_pos] = model_gradient.gradient[idx]
            for pname, key in self.sensors.items():
                gradient[positions[pname]] = partial.get(key, 0.0)
            return J, gradient, forward_seconds
        if name in ("residuals", "jacobian"):
            r, factors = cost.residuals(Y)
            if name == "residuals":
                return r, None
            Jr = np.zeros((r.size, len(self.names)))
            if idx.size:
                dY = run.engine.output_sensitivities(traj, cost.sample_times, channels, idx)
                Jr[:, model_pos] = (factors[:, :, None] * cost.output_jacobian(dY)).reshape(-1, idx.size)
            for pname, (channel, what) in self.sensors.items():
                if channel in cost.channels:
                    c = cost.channels.index(channel)
                    column = np.zeros_like(factors)
                    column[:, c] = factors[:, c] * cost.sensor_derivatives(Y, c)[what]
                    Jr[:, positions[pname]] = column.ravel()
            return r, Jr
        raise IdentificationError(f"sensor parameters ({', '.join(self.sensors)}) do not support the part "
                                  f"'{name}'; leave them out of --params for it.")

    def _parts(self, x: np.ndarray, kind: str | AbstractPart, noise_std: Mapping[str, float] | None = None) -> list:
        """:meth:`part` of every experiment, in experiment order (here: one after another;
        :class:`~fmi_adjoint.identify.parallel.DistributedProblem` runs them as tasks)."""
        kind = part_kind(kind, noise_std)
        parts = [self.part(i, x, kind) for i in range(len(self.experiments))]
        self.simulations += len(parts)
        return parts

    def _costs(self, points: Sequence[np.ndarray]) -> list[float]:
        """:meth:`cost` at several points (the finite-difference stencil), in order."""
        return [self.cost(x) for x in points]

    # -- evaluation -------------------------------------------------------------------
    def trajectories(self, x: np.ndarray) -> list[Trajectory]:
        """Forward runs of all experiments at identified values ``x``."""
        runs = []
        x = np.asarray(x, dtype=float)
        keep = [k for k, n in enumerate(self.names) if n not in self.sensors]  # the model's parameters
        for exp in self.experiments:
            runs.append(exp.simulate(exp.parameters(self._model_names, x[keep])))
            self.simulations += 1
        return runs

    def cost(self, x: np.ndarray) -> float:
        """Total cost at ``x`` (summed in experiment order)."""
        return ordered_sum(self._parts(np.asarray(x, dtype=float), PART_KIND_CHOICES["cost"]))

    def evaluate(self, x: np.ndarray, method: str | AbstractGradientMethod = "adjoint",
                 fd_rel_step: float = 1e-3) -> Evaluation:
        """Cost and gradient with respect to the identified parameters.

        Parameters
        ----------
        x : numpy.ndarray
            Physical values of the identified parameters.
        method : {"adjoint", "forward", "fd", "continuous"} or AbstractGradientMethod
            Discrete adjoint, forward sensitivities, or central finite differences of
            the same discrete cost; or the continuous adjoint (BDF, Sec. 3.3.4), which
            approximates the gradient of the continuous cost and converges to the
            others as the step goes to zero (least-squares costs only).  A name is looked
            up once, here (:func:`~fmi_adjoint.identify.parts.gradient_method`).
        fd_rel_step : float
            Relative step of the (fourth-order central) finite differences.
        """
        chosen = gradient_method(method)
        x = np.asarray(x, dtype=float)
        sims0 = self.simulations
        start = time.perf_counter()
        J, gradient, forward_seconds = chosen.evaluate(self, x, fd_rel_step)
        return Evaluation(
            J=J,
            gradient=gradient,
            method=chosen.name,
            forward_seconds=forward_seconds,
            gradient_seconds=time.perf_counter() - start,
            simulations=self.simulations - sims0,
        )

    def fd_steps(self, x: np.ndarray, rel: float) -> np.ndarray:
        """Finite-difference steps: relative to the value, or to the bound span at 0."""
        span = np.where(np.isfinite(self.upper - self.lower), (self.upper - self.lower) / 2, 1.0)
        return rel * np.where(np.abs(x) > 0, np.abs(x), span)

    def finite_differences(self, x: np.ndarray, rel: float = 1e-3, order: int = 4) -> np.ndarray:
        """Central differences of the discrete cost.

        ``order=4`` uses the five-point stencil ``(-J(+2d) + 8 J(+d) - 8 J(-d) + J(-2d)) / (12 d)``,
        ``order=2`` the three-point one.  Round-off in the discrete cost, amplified by the
        dynamics, reaches about 1e-12 relative on nonlinear models; a step of 1e-3
        relative with the fourth-order stencil keeps round-off and truncation errors
        near 1e-7 of the gradient (measured on the bundled examples).  Where a bound is closer than two steps
        the stencil is shifted (one-sided second order).  All stencil points are evaluated
        at once (:meth:`_costs`: in parallel on a distributed problem).
        """
        if order not in (2, 4):
            raise IdentificationError(f"finite-difference order {order!r} is not 2 or 4.")
        x = np.asarray(x, dtype=float)
        steps = self.fd_steps(x, rel)
        reach = 2 if order == 4 else 1
        stencils: list[tuple[tuple[float, ...], tuple[float, ...], float]] = []
        for k in range(len(x)):
            d = steps[k]
            if x[k] - reach * d >= self.lower[k] and x[k] + reach * d <= self.upper[k]:
                if order == 4:
                    stencils.append(((2 * d, d, -d, -2 * d), (-1.0, 8.0, -8.0, 1.0), 12 * d))
                else:
                    stencils.append(((d, -d), (1.0, -1.0), 2 * d))
            elif x[k] + 2 * d <= self.upper[k]:
                stencils.append(((0.0, d, 2 * d), (-3.0, 4.0, -1.0), 2 * d))
            else:
                stencils.append(((0.0, -d, -2 * d), (3.0, -4.0, 1.0), 2 * d))
        points = []
        for k, (offsets, _, _) in enumerate(stencils):
            for offset in offsets:
                xk = x.copy()
                xk[k] += offset
                points.append(xk)
        costs = iter(self._costs(points))
        gradient = np.zeros(len(x))
        for k, (offsets, weights, divisor) in enumerate(stencils):
            values = [next(costs) for _ in offsets]
            total = 0.0
            for w, value in zip(weights, values):
                total += w * value
            gradient[k] = total / divisor
        return gradient

    @property
    def has_residuals(self) -> bool:
        """Whether every experiment's cost is a least-squares cost (:meth:`residuals` answers)."""
        return all(e.cost.sum_of_squares for e in self.experiments)

    def residuals(self, x: np.ndarray, jacobian: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
        """Stacked least-squares residuals and, optionally, their Jacobian ``dr/dx``.

        Raises
        ------
        IdentificationError
            If a cost is not a least-squares cost.
        """
        parts = self._parts(np.asarray(x, dtype=float), PART_KIND_CHOICES["jacobian" if jacobian else "residuals"])
        r = np.concatenate([r_k for r_k, _ in parts])
        return r, (np.vstack([J_k for _, J_k in parts]) if jacobian else None)

    def fisher_information(self, x: np.ndarray, noise_std: Mapping[str, float]) -> np.ndarray:
        """Fisher information matrix of the identified parameters for Gaussian noise.

        ``F = sum_experiments sum_samples S_s^T diag(1/sigma_c^2) S_s`` with the output
        sensitivities ``S_s = dY/dp`` at the sample times (forward sensitivities of the
        discrete scheme) and the noise standard deviation ``sigma_c`` of each channel.

        Parameters
        ----------
        x : numpy.ndarray
            Physical values of the identified parameters.
        noise_std : mapping of str to float
            Noise standard deviation per measured channel (output name).
        """
        parts = self._parts(np.asarray(x, dtype=float), part_kind("fisher", noise_std))
        return ordered_sum(parts, np.zeros((len(self.names), len(self.names))))

    def statistics(self, x: np.ndarray) -> dict:
        """Standard errors and correlations from the Gauss-Newton Hessian (see
        :func:`gauss_newton_statistics`)."""
        r, Jr = self.residuals(x, jacobian=True)
        assert Jr is not None  # jacobian=True always returns the Jacobian
        return gauss_newton_statistics(r, Jr)

    def noise_floor(self) -> float | None:
        """The cost that measurement noise alone would leave at a perfect fit, estimated from
        the data (:func:`costs_noise_floor`)."""
        return costs_noise_floor(exp.cost for exp in self.experiments)

    def sampled_outputs(self, index: int, x: np.ndarray) -> np.ndarray:
        """Outputs of experiment ``index`` at its sample times, at identified values ``x`` (with
        sensor parameters: the model's outputs on the step grid, the sensor cost's sample times)."""
        exp = self.experiments[index]
        x = np.asarray(x, dtype=float)
        if self.sensors:
            keep = [k for k, n in enumerate(self.names) if n not in self.sensors]
            return sampled_outputs(exp.simulate(exp.parameters(self._model_names, x[keep])), exp.cost)[2]
        return sampled_outputs(exp.simulate(exp.parameters(self.names, x)), exp.cost)[2]

    def solver_info(self) -> dict:
        """The engine and the integration scheme of the first experiment."""
        exp = self.experiments[0]
        return {"engine": exp.engine.name, "integrator": exp.scheme.describe()}

    def gradient_details(self) -> dict:
        return {}

    def discretization_error(self, x: np.ndarray) -> None:
        """None: the scheme and its step are part of the model file (the HHT or generalized-α
        solution is the model's response, exactly differentiated)."""
        return None

    def parameter_units(self) -> dict[str, str]:
        """The unit text of the first experiment's model's parameters by name, and of the sensor
        parameters (a delay in s, a gain without unit, a bias in its output's unit)."""
        units = {p.name: p.unit for p in self.experiments[0].model.model.all_parameters}
        outputs = self.output_units()
        for name, (channel, kind) in self.sensors.items():
            units[name] = {"delay": "s", "gain": ""}.get(kind, outputs.get(channel, ""))
        return units

    def output_units(self) -> dict[str, str]:
        """The unit text of the first experiment's model's outputs by name."""
        return {o.name: o.unit for o in self.experiments[0].model.model.outputs}

    def run_details(self) -> dict[str, str]:
        """The engine and the first experiment's fixed step."""
        exp = self.experiments[0]
        step = exp.step if exp.step is not None else exp.model.model.simulation.step
        return {"engine": str(exp.engine.name), "step": f"{step:.6g} s (fixed)"}

    def close(self) -> None:
        """Nothing to release: the engines live in this process."""


def costs_noise_floor(costs) -> float | None:
    """The cost that measurement noise alone would leave at a perfect fit, summed over
    ``costs`` (:meth:`~fmi_adjoint.costs.LeastSquaresCost.noise_floor`); None if a cost is
    not a least-squares cost of a time series."""
    total = 0.0
    for cost in costs:
        value = cost.noise_floor() if isinstance(cost, LeastSquaresCost | SensorCost) else None
        if value is None:
            return None
        total += value
    return total


def _with_sensor_cost(exp: Experiment) -> Experiment:
    """``exp`` with its least-squares cost compared through ideal sensors on its step grid
    (:class:`~fmi_adjoint.costs.sensors.SensorCost`); IdentificationError for another cost."""
    if not isinstance(exp.cost, LeastSquaresCost):
        raise IdentificationError(f"experiment '{exp.name}': sensor parameters (<channel>.delay, .gain, .bias) need a "
                                  f"least-squares cost in the time domain, not {type(exp.cost).__name__}.")
    settings = exp.model.model.simulation
    t_end = exp.t_end if exp.t_end is not None else settings.t_end
    step = exp.step if exp.step is not None else settings.step
    return dataclasses.replace(exp, cost=SensorCost(exp.cost, time_grid(0.0, float(t_end), float(step))))


def _sensor_bounds(kind: str, experiments: Sequence[Experiment]) -> tuple[float, float]:
    """Default bounds of a sensor parameter (:mod:`~fmi_adjoint.costs.sensors`)."""
    if kind == "delay":
        span = max(float(np.ptp(exp.cost.inner.sample_times)) for exp in experiments
                   if isinstance(exp.cost, SensorCost))
        return -MAX_DELAY_SHARE * span, MAX_DELAY_SHARE * span
    if kind == "gain":
        return 1.0 / GAIN_RANGE, GAIN_RANGE
    return -math.inf, math.inf


def gauss_newton_statistics(r: np.ndarray, Jr: np.ndarray) -> dict:
    """Standard errors and correlations of a least-squares fit.

    ``Cov = s^2 (J_r^T J_r)^{-1}`` with the residual variance ``s^2 = r.r/(N_r - n_p)``.
    Parameters that the data cannot determine (singular Hessian) get ``None``; the others
    then get their standard errors with those held at their values (the covariance of the
    identifiable block), and there is no correlation matrix.
    """
    n_res, n_par = Jr.shape
    dof = max(n_res - n_par, 1)
    s2 = float(r @ r) / dof
    H = Jr.T @ Jr
    scale = np.sqrt(np.diag(H))
    scale[scale == 0] = 1.0
    Hs = H / np.outer(scale, scale)
    cond = float(np.linalg.cond(Hs))
    unidentifiable = unidentifiable_parameters(H)
    std: list[float | None] = [None] * n_par
    corr = None
    if math.isfinite(cond) and cond <= _SINGULAR_CONDITION:
        cov = s2 * np.linalg.inv(Hs) / np.outer(scale, scale)
        sd = np.sqrt(np.abs(np.diag(cov)))
        std = [float(v) for v in sd]
        # At an exact fit (zero residual) the covariance vanishes and has no correlation.
        corr = (cov / np.outer(sd, sd)).tolist() if np.all(sd > 0) else None
    elif unidentifiable and len(unidentifiable) < n_par:
        keep = np.array([i for i in range(n_par) if i not in unidentifiable])
        block = Hs[np.ix_(keep, keep)]
        if float(np.linalg.cond(block)) <= _SINGULAR_CONDITION:
            sd = np.sqrt(np.abs(np.diag(s2 * np.linalg.inv(block)))) / scale[keep]
            for i, v in zip(keep, sd):
                std[int(i)] = float(v)
    return {"std_errors": std, "correlation": corr, "residual_variance": s2, "n_residuals": n_res,
            "hessian_condition": float(cond), "unidentifiable": unidentifiable}


#: The scaled Gauss-Newton Hessian is not inverted above this condition number.
_SINGULAR_CONDITION = 1e14


#: The Fisher information (Gauss-Newton Hessian scaled to unit diagonal) is taken as singular
#: in a direction whose eigenvalue is below this times the largest.
SINGULAR_FISHER = 1e-12


def unidentifiable_parameters(H: np.ndarray) -> list[int]:
    """Indices of parameters the outputs cannot determine: a zero column of the Fisher
    information ``H = JᵀJ`` (the outputs do not depend on it), or a large share (> 10 %) in an
    eigenvector of the scaled information whose eigenvalue is below :data:`SINGULAR_FISHER`
    of the largest (a combination the data cannot separate)."""
    diag = np.diag(H).copy()
    peak = float(diag.max(initial=0.0))
    dead = diag <= 1e-300 + SINGULAR_FISHER**2 * peak
    out = set(np.flatnonzero(dead).tolist())
    live = np.flatnonzero(~dead)
    if live.size > 1:
        scale = np.sqrt(diag[live])
        w, V = np.linalg.eigh(H[np.ix_(live, live)] / np.outer(scale, scale))
        for k in np.flatnonzero(w < SINGULAR_FISHER * max(float(w.max()), 1e-300)):
            out.update(live[np.abs(V[:, k]) ** 2 > 0.1].tolist())
    return sorted(int(i) for i in out)


def _implements_the_contract(problem: IdentificationProblem) -> AbstractIdentificationProblem:
    """mypy checks here that :class:`IdentificationProblem` implements the contract the commands use."""
    return problem
