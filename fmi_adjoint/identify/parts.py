"""What one experiment contributes to an identification, and the gradient methods built on it.

Every sum over experiments (cost, gradient, residuals, Fisher information) is formed from
*parts*, one per experiment, in experiment order, wherever they were computed (here, or as
tasks on an executor: :class:`~fmi_adjoint.identify.parallel.PartTask` carries the part object).
A part kind is a small frozen object that knows how to compute its part
(:meth:`AbstractPart.compute`); a gradient method (:class:`AbstractGradientMethod`) knows which
parts or which cost evaluations it needs.  Both are looked up from their names once, at the
front door (:func:`part_kind`, :func:`gradient_method`).

Adding a gradient method: (1) a part whose :meth:`~AbstractGradientPart.gradient` returns the
:class:`~fmi_adjoint.adjoint.GradientResult` of one experiment's run, (2) a
:class:`SweepGradient` subclass naming it, (3) an entry in :data:`GRADIENT_METHOD_CHOICES`;
``tests/test_identification.py`` compares every method with finite differences.
"""

from __future__ import annotations

import abc
import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol

import numpy as np

from ..adjoint import GradientResult, continuous_adjoint_gradient, sampled_outputs
from ..adjoint.discrete import channel_indices
from ..choices import look_up
from ..errors import IdentificationError
from ..integrate import Trajectory
from .experiment import Experiment

__all__ = ["AbstractGradientMethod", "AbstractGradientPart", "AbstractPart", "AdjointGradient", "AdjointPart",
           "ContinuousAdjointGradient", "ContinuousPart", "CostPart", "FiniteDifferenceGradient", "FisherPart",
           "ForwardPart", "ForwardSensitivityGradient", "GRADIENT_METHOD_CHOICES", "PART_KIND_CHOICES",
           "ResidualsPart", "SweepGradient", "gradient_method", "ordered_sum", "part_kind"]


def ordered_sum(terms, start=0.0):
    """``start + t_1 + t_2 + ...`` strictly in the given order: the one way every sum over
    experiments is formed, so serial and parallel runs agree bit for bit."""
    total = start
    for term in terms:
        total = total + term
    return total


# -- parts: the work of one experiment --------------------------------------------------
class AbstractPart(abc.ABC):
    """One experiment's contribution at identified values ``x`` (see the module docstring)."""

    #: The name of the kind (``part(index, x, "adjoint")``, progress and task reprs).
    name: ClassVar[str]

    @abc.abstractmethod
    def compute(self, exp: Experiment, names: tuple[str, ...], x: np.ndarray) -> Any:
        """The part of ``exp`` with the parameters ``names`` at the values ``x``."""


@dataclasses.dataclass(frozen=True)
class CostPart(AbstractPart):
    """The experiment's cost ``J``."""

    name: ClassVar[str] = "cost"

    def compute(self, exp: Experiment, names: tuple[str, ...], x: np.ndarray) -> float:
        traj = exp.simulate(exp.parameters(names, x))
        _, _, Y = sampled_outputs(traj, exp.cost)
        return exp.cost.evaluate(Y, traj.p).J


class AbstractGradientPart(AbstractPart):
    """``(J, dJ/dx, seconds of the forward run)`` of one experiment."""

    def compute(self, exp: Experiment, names: tuple[str, ...], x: np.ndarray) -> tuple[float, np.ndarray, float]:
        started = time.perf_counter()
        traj = exp.simulate(exp.parameters(names, x))
        forward_seconds = time.perf_counter() - started
        idx = exp.indices(names)
        result = self.gradient(exp, traj, idx)
        return result.J, result.gradient[idx], forward_seconds

    @abc.abstractmethod
    def gradient(self, exp: Experiment, traj: Trajectory, idx: np.ndarray) -> GradientResult:
        """The cost and its gradient (full parameter vector; ``idx``: the identified ones)."""


@dataclasses.dataclass(frozen=True)
class AdjointPart(AbstractGradientPart):
    """The discrete adjoint (one backward sweep of the engine)."""

    name: ClassVar[str] = "adjoint"

    def gradient(self, exp: Experiment, traj: Trajectory, idx: np.ndarray) -> GradientResult:
        return exp.engine.adjoint_gradient(traj, exp.cost)


@dataclasses.dataclass(frozen=True)
class ForwardPart(AbstractGradientPart):
    """Forward sensitivities of the identified parameters."""

    name: ClassVar[str] = "forward"

    def gradient(self, exp: Experiment, traj: Trajectory, idx: np.ndarray) -> GradientResult:
        return exp.engine.sensitivity_gradient(traj, exp.cost, idx)


@dataclasses.dataclass(frozen=True)
class ContinuousPart(AbstractGradientPart):
    """The continuous adjoint (BDF, Sec. 3.3.4; least-squares costs only)."""

    name: ClassVar[str] = "continuous"

    def gradient(self, exp: Experiment, traj: Trajectory, idx: np.ndarray) -> GradientResult:
        try:
            return continuous_adjoint_gradient(traj, exp.cost)
        except NotImplementedError as exc:
            raise IdentificationError(f"continuous adjoint: {exc}") from None


@dataclasses.dataclass(frozen=True)
class ResidualsPart(AbstractPart):
    """Least-squares residuals ``(r, None)``, or with ``jacobian`` ``(r, dr/dx)`` (forward
    sensitivities)."""

    jacobian: bool = False

    @property
    def name(self) -> str:  # type: ignore[override]  # two kinds share the class
        return "jacobian" if self.jacobian else "residuals"

    def compute(self, exp: Experiment, names: tuple[str, ...],
                x: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        traj = exp.simulate(exp.parameters(names, x))
        _, channels, Y = sampled_outputs(traj, exp.cost)
        try:
            r, factors = exp.cost.residuals(Y)
        except NotImplementedError:
            raise IdentificationError(
                f"experiment '{exp.name}': {type(exp.cost).__name__} is not a sum of squares; use the lbfgsb method."
            ) from None
        if not self.jacobian:
            return r, None
        idx = exp.indices(names)
        dY = exp.engine.output_sensitivities(traj, exp.cost.sample_times, channels, idx)
        return r, (factors[:, :, None] * dY).reshape(-1, len(idx))


@dataclasses.dataclass(frozen=True)
class FisherPart(AbstractPart):
    """The experiment's Fisher information for the noise standard deviations ``noise_std``
    (``(channel, sigma)`` pairs; see
    :meth:`~fmi_adjoint.identify.IdentificationProblem.fisher_information`)."""

    noise_std: tuple[tuple[str, float], ...] = ()
    name: ClassVar[str] = "fisher"

    def compute(self, exp: Experiment, names: tuple[str, ...], x: np.ndarray) -> np.ndarray:
        noise = dict(self.noise_std)
        channels = channel_indices(exp.model, exp.cost)
        missing = [c for c in exp.cost.channels if c not in noise]
        if missing:
            raise IdentificationError(f"noise_std: give a standard deviation for channel(s) {missing}.")
        sigma = np.array([float(noise[c]) for c in exp.cost.channels])
        if np.any(sigma <= 0) or not np.all(np.isfinite(sigma)):
            raise IdentificationError(f"noise_std: {sigma.tolist()} must be positive and finite.")
        traj = exp.simulate(exp.parameters(names, x))
        idx = exp.indices(names)
        dY = exp.engine.output_sensitivities(traj, exp.cost.sample_times, channels, idx)
        return np.einsum("scp,c,scq->pq", dY, 1.0 / sigma**2, dY)


#: The part kinds by name (``fisher`` takes its noise levels: :func:`part_kind`).
PART_KIND_CHOICES: dict[str, AbstractPart] = {
    "cost": CostPart(), "adjoint": AdjointPart(), "forward": ForwardPart(), "continuous": ContinuousPart(),
    "residuals": ResidualsPart(), "jacobian": ResidualsPart(jacobian=True), "fisher": FisherPart(),
}


def part_kind(kind: str | AbstractPart, noise_std: Mapping[str, float] | None = None) -> AbstractPart:
    """The part of a name (a part object is returned as it is); ``noise_std`` goes with ``fisher``."""
    part = look_up(PART_KIND_CHOICES, kind, "part", AbstractPart, IdentificationError)
    if kind == "fisher":
        return FisherPart(tuple(sorted((str(c), float(s)) for c, s in (noise_std or {}).items())))
    return part


# -- gradient methods --------------------------------------------------------------------
class PartsProblem(Protocol):
    """What a gradient method asks of a problem: its experiments' parts and its cost."""

    @property
    def experiments(self) -> Sequence[Experiment]: ...

    def _parts(self, x: np.ndarray, kind: AbstractPart) -> list: ...

    def cost(self, x: np.ndarray) -> float: ...

    def finite_differences(self, x: np.ndarray, rel: float = ..., order: int = ...) -> np.ndarray: ...


class AbstractGradientMethod(abc.ABC):
    """How :meth:`~fmi_adjoint.identify.IdentificationProblem.evaluate` gets the gradient."""

    #: The ``--method`` name of ``fmi-adjoint gradient``.
    name: ClassVar[str]

    @abc.abstractmethod
    def evaluate(self, problem: PartsProblem, x: np.ndarray, fd_rel_step: float) -> tuple[float, np.ndarray, float]:
        """``(J, dJ/dx, mean seconds of one experiment's forward run)`` at ``x``."""


class SweepGradient(AbstractGradientMethod):
    """A gradient summed from one gradient part per experiment (:attr:`part`)."""

    part: ClassVar[AbstractGradientPart]

    def evaluate(self, problem: PartsProblem, x: np.ndarray, fd_rel_step: float) -> tuple[float, np.ndarray, float]:
        parts = problem._parts(x, self.part)
        J = ordered_sum(J_k for J_k, _, _ in parts)
        gradient = ordered_sum((g_k for _, g_k, _ in parts), np.zeros(len(x)))
        return J, gradient, sum(seconds for _, _, seconds in parts) / len(parts)


@dataclasses.dataclass(frozen=True)
class AdjointGradient(SweepGradient):
    """The discrete adjoint: the exact gradient of the computed cost, one sweep per experiment."""

    name: ClassVar[str] = "adjoint"
    part: ClassVar[AbstractGradientPart] = AdjointPart()


@dataclasses.dataclass(frozen=True)
class ForwardSensitivityGradient(SweepGradient):
    """Forward sensitivities of the same discrete cost (one column per identified parameter)."""

    name: ClassVar[str] = "forward"
    part: ClassVar[AbstractGradientPart] = ForwardPart()


@dataclasses.dataclass(frozen=True)
class ContinuousAdjointGradient(SweepGradient):
    """The continuous adjoint (BDF, Sec. 3.3.4): approximates the gradient of the continuous
    cost and converges to the others as the step goes to zero (least-squares costs only)."""

    name: ClassVar[str] = "continuous"
    part: ClassVar[AbstractGradientPart] = ContinuousPart()


@dataclasses.dataclass(frozen=True)
class FiniteDifferenceGradient(AbstractGradientMethod):
    """Central finite differences of the same discrete cost
    (:meth:`~fmi_adjoint.identify.IdentificationProblem.finite_differences`)."""

    name: ClassVar[str] = "fd"

    def evaluate(self, problem: PartsProblem, x: np.ndarray, fd_rel_step: float) -> tuple[float, np.ndarray, float]:
        started = time.perf_counter()
        J = problem.cost(x)
        forward_seconds = (time.perf_counter() - started) / len(problem.experiments)
        return J, problem.finite_differences(x, fd_rel_step), forward_seconds


#: The gradient methods by name, in the order ``--method`` lists them.
GRADIENT_METHOD_CHOICES: dict[str, AbstractGradientMethod] = {
    m.name: m for m in (AdjointGradient(), ForwardSensitivityGradient(), FiniteDifferenceGradient(),
                        ContinuousAdjointGradient())
}


def gradient_method(method: str | AbstractGradientMethod) -> AbstractGradientMethod:
    """The gradient method of a name (a method object is returned as it is)."""
    return look_up(GRADIENT_METHOD_CHOICES, method, "gradient method", AbstractGradientMethod, IdentificationError)
