"""The cost contract: a function of outputs sampled at the measurement times."""

from __future__ import annotations

import abc
import dataclasses
from typing import ClassVar

import numpy as np

__all__ = ["CostValue", "AbstractCost"]


@dataclasses.dataclass(frozen=True)
class CostValue:
    """Value of a cost and its partial derivatives.

    Attributes
    ----------
    J : float
    dJ_dY : numpy.ndarray, shape (n_samples, n_channels)
    dJ_dp : numpy.ndarray or None
        Explicit dependence on the model parameters (None if there is none).
    """

    J: float
    dJ_dY: np.ndarray
    dJ_dp: np.ndarray | None = None


class AbstractCost(abc.ABC):
    """A cost ``J = Phi(Y, p)`` of model outputs ``Y`` sampled at ``sample_times``.

    To add a cost: subclass, expose ``sample_times`` (sorted, shape ``(n_samples,)``)
    and ``channels`` (output names, the columns of ``Y``), and implement
    :meth:`evaluate`.  Least-squares costs also implement :meth:`residuals` so that
    Gauss-Newton methods and standard errors can use them.
    """

    sample_times: np.ndarray
    channels: tuple[str, ...]
    #: True where :meth:`residuals` answers (a sum of squares): Gauss-Newton is then the
    #: default optimizer (:func:`~fmi_adjoint.identify.optimize.default_optimizer`).
    sum_of_squares: ClassVar[bool] = False

    @abc.abstractmethod
    def evaluate(self, Y: np.ndarray, p: np.ndarray) -> CostValue:
        """J, dJ/dY and dJ/dp for sampled outputs ``Y`` of shape ``(n_samples, n_channels)``."""

    def residuals(self, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Residual vector ``r`` with ``J = r.r/2`` and ``dr/dY`` as elementwise factors.

        Returns ``(r, factors)`` where ``r`` has shape ``(n_samples * n_channels,)`` and
        ``factors`` the shape of ``Y`` (``dr/dY`` is diagonal).  Costs that are not sums
        of squares raise :class:`NotImplementedError`.
        """
        raise NotImplementedError(f"{type(self).__name__} is not a least-squares cost")
