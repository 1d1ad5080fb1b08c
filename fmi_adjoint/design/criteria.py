"""Design criteria on the (scaled) Fisher information matrix ``M``, to be minimized.

Each criterion is an object with ``evaluate(M) -> (Psi, dPsi/dM)``; ``dPsi/dM`` is exact
and symmetric, so :func:`fmi_adjoint.design.fisher.criterion_gradient` turns it into the
exact gradient with respect to the input.

* A-optimal (dissertation eq. (5.8), the one it uses): ``Psi = -trace M``.
* D-optimal: ``Psi = -log det M`` (the volume of the confidence ellipsoid).
* E-optimal: the smallest eigenvalue, smoothed: ``Psi = (1/rho) log trace exp(-rho M)``,
  i.e. minus a soft minimum of the eigenvalues.  A smooth matrix function, so its
  gradient ``-exp(-rho M)/trace exp(-rho M)`` is exact even where eigenvalues cross (the
  plain smallest eigenvalue is not differentiable there).  ``rho`` is fixed when the design
  starts (``10/lambda_min`` of the first input's ``M``), so the criterion does not change
  during the iteration.
* A-optimal on the covariance: ``Psi = trace M^-1``, the sum of the squared Cramér-Rao
  bounds of the scaled parameters.

The dissertation (Sec. 5.1.2) names D- and E-optimality but drops them because they "do not
allow to apply straightforward variational calculus"; on the discrete scheme they need
nothing more than ``dPsi/dM``.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

import numpy as np

from ..errors import ModelError

__all__ = ["AbstractCriterion", "AOptimal", "DOptimal", "EOptimal", "ACovariance", "CRITERIA", "criterion_named"]


class AbstractCriterion(abc.ABC):
    """A scalar function of the information matrix, smaller is better."""

    name: ClassVar[str]
    needs_regular: ClassVar[bool] = True

    @abc.abstractmethod
    def evaluate(self, M: np.ndarray) -> tuple[float, np.ndarray]:
        """``(Psi, dPsi/dM)``."""

    def calibrated(self, M: np.ndarray) -> AbstractCriterion:
        """The criterion with constants fixed at the first input's ``M`` (default: itself)."""
        return self


@dataclasses.dataclass(frozen=True)
class AOptimal(AbstractCriterion):
    """``-trace M`` (eq. (5.8)); defined for a singular ``M`` too."""

    name: ClassVar[str] = "A"
    needs_regular: ClassVar[bool] = False

    def evaluate(self, M: np.ndarray) -> tuple[float, np.ndarray]:
        return -float(np.trace(M)), -np.eye(len(M))


@dataclasses.dataclass(frozen=True)
class DOptimal(AbstractCriterion):
    """``-log det M``."""

    name: ClassVar[str] = "D"

    def evaluate(self, M: np.ndarray) -> tuple[float, np.ndarray]:
        sign, logdet = np.linalg.slogdet(M)
        if sign <= 0:
            return np.inf, np.zeros_like(M)
        return -float(logdet), -np.linalg.inv(M)


@dataclasses.dataclass(frozen=True)
class EOptimal(AbstractCriterion):
    """Minus the soft minimum of the eigenvalues, ``(1/rho) log trace exp(-rho M)``."""

    rho: float = 0.0
    name: ClassVar[str] = "E"

    def calibrated(self, M: np.ndarray) -> EOptimal:
        smallest = float(np.linalg.eigvalsh(0.5 * (M + M.T))[0])
        if not smallest > 0:
            raise ModelError("the information matrix of the start input is singular; the E-criterion needs every "
                             "parameter visible at the start (use the A-criterion first).")
        return EOptimal(rho=10.0 / smallest)

    def evaluate(self, M: np.ndarray) -> tuple[float, np.ndarray]:
        if not self.rho > 0:
            raise ModelError("EOptimal needs rho > 0; build it with calibrated(M).")
        lam, V = np.linalg.eigh(0.5 * (M + M.T))
        shifted = np.exp(-self.rho * (lam - lam[0]))  # shift by the minimum: no overflow
        total = float(shifted.sum())
        value = -float(lam[0]) + float(np.log(total)) / self.rho
        return value, -(V * (shifted / total)) @ V.T


@dataclasses.dataclass(frozen=True)
class ACovariance(AbstractCriterion):
    """``trace M^-1``."""

    name: ClassVar[str] = "A-cov"

    def evaluate(self, M: np.ndarray) -> tuple[float, np.ndarray]:
        try:
            inverse = np.linalg.inv(M)
        except np.linalg.LinAlgError:
            return np.inf, np.zeros_like(M)
        return float(np.trace(inverse)), -inverse @ inverse


#: Criteria by their command-line name.
CRITERIA: Mapping[str, type[AbstractCriterion]] = MappingProxyType(
    {c.name: c for c in (AOptimal, DOptimal, EOptimal, ACovariance)})


def criterion_named(name: str) -> AbstractCriterion:
    """The criterion called ``name`` (``A``, ``D``, ``E``, ``A-cov``)."""
    if name not in CRITERIA:
        raise ModelError(f"criterion {name!r} is unknown; choose one of {', '.join(CRITERIA)}.")
    return CRITERIA[name]()
