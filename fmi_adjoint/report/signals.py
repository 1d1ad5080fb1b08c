"""Measured, initial and identified signals of every experiment and channel of a fit.

:func:`compare_fit` turns an identification problem and two parameter points into one
:class:`ChannelComparison` per experiment and compared quantity, in the terms of each
experiment's cost: time series for least squares (every column), amplitude spectra for
Fourier costs, order amplitudes over speed for engine-order costs, modal coordinates for POD
costs.  ``identify --plot`` draws them as a grid and ``identify --report`` as interactive
plots; both therefore show the same numbers.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping

import numpy as np

from ..costs import EngineOrderCost, FourierCost, LeastSquaresCost, PODCost
from ..errors import FmiAdjointError
from ..identify.problem import AbstractIdentificationProblem

__all__ = ["ChannelComparison", "KINDS", "compare_fit", "compare_fit_or_identified"]

#: The kinds of compared quantity, with the label of their abscissa.
KINDS = {"time series": "time [s]", "amplitude spectrum": "frequency [Hz]", "order amplitude": "speed [rpm]",
         "modal coordinate": "time [s]"}


@dataclasses.dataclass(frozen=True, eq=False)
class ChannelComparison:
    """One compared quantity of one experiment at the initial and the identified values.

    Attributes
    ----------
    experiment : str
        The experiment's label: its data file's name (numbered where two share a name).
    channel : str
        The output (or cost channel: ``"a1, order 2"``, ``"mode 1"``) compared.
    unit : str
        Unit text of the values ("" when unknown).
    kind : str
        One of :data:`KINDS`: "time series", "amplitude spectrum", "order amplitude" or
        "modal coordinate".
    x_label : str
        The abscissa with its unit ("time [s]", "frequency [Hz]", "speed [rpm]").
    x : numpy.ndarray
    measured : numpy.ndarray or None
        None where the cost holds no measured values of the quantity.
    initial, identified : numpy.ndarray
        The quantity simulated at the start values and at the identified values.
    weights : numpy.ndarray or None
        Per-point weights of the cost where it selects points (a Fourier band: 0 outside the
        compared band); None where every point counts.
    """

    experiment: str
    channel: str
    unit: str
    kind: str
    x_label: str
    x: np.ndarray
    measured: np.ndarray | None
    initial: np.ndarray
    identified: np.ndarray
    weights: np.ndarray | None = None

    @property
    def residual(self) -> np.ndarray | None:
        """``measured - identified`` (None without measured values)."""
        return None if self.measured is None else self.measured - self.identified

    @property
    def y_label(self) -> str:
        """The channel with its unit, for an axis: ``"a1 [m/s^2]"``."""
        return f"{self.channel} [{self.unit}]" if self.unit else self.channel

    @property
    def title(self) -> str:
        """``"experiment: channel (kind)"``, for a panel."""
        return f"{self.experiment}: {self.channel} ({self.kind})"


def experiment_labels(names: list[str]) -> list[str]:
    """The experiments' names, numbered (``"1: sweep"``) where two share one."""
    counts = Counter(names)
    return [f"{k + 1}: {name}" if counts[name] > 1 else name for k, name in enumerate(names)]


def compare_fit(problem: AbstractIdentificationProblem, initial: np.ndarray,
                identified: np.ndarray) -> tuple[ChannelComparison, ...]:
    """Every experiment's every compared quantity at ``initial`` and ``identified``.

    Two runs per experiment (:meth:`~fmi_adjoint.identify.problem.AbstractIdentificationProblem.sampled_outputs`
    at each point); units from :meth:`~fmi_adjoint.identify.problem.AbstractIdentificationProblem.output_units`.
    Ordered by experiment, then by the cost's channels.
    """
    experiments = problem.experiments
    units = problem.output_units()
    labels = experiment_labels([str(exp.name) for exp in experiments])
    out: list[ChannelComparison] = []
    for k, (exp, label) in enumerate(zip(experiments, labels)):
        Y0 = np.asarray(problem.sampled_outputs(k, np.asarray(initial, dtype=float)))
        Y1 = np.asarray(problem.sampled_outputs(k, np.asarray(identified, dtype=float)))
        out.extend(cost_comparisons(exp.cost, Y0, Y1, label, units))
    return tuple(out)


def compare_fit_or_identified(problem: AbstractIdentificationProblem, initial: np.ndarray,
                              identified: np.ndarray) -> tuple[tuple[ChannelComparison, ...], bool]:
    """:func:`compare_fit`, and whether its initial curves are the start values': where the
    start values cannot be simulated over the whole record (a staged fit whose start diverges
    there), the identified values stand in for them and the flag is False (plots and reports
    then leave the initial curves out)."""
    try:
        return compare_fit(problem, initial, identified), True
    except FmiAdjointError:
        return compare_fit(problem, identified, identified), False


def cost_comparisons(cost, Y0: np.ndarray, Y1: np.ndarray, experiment: str,
                     units: Mapping[str, str]) -> list[ChannelComparison]:
    """The quantities ``cost`` compares, from its sampled outputs ``Y0`` (initial) and ``Y1``
    (identified); a cost of another type: its channels' time series without measured values."""

    def make(channel: str, unit: str, kind: str, x, measured, y0, y1, weights=None) -> ChannelComparison:
        return ChannelComparison(experiment, channel, unit, kind, KINDS[kind], np.asarray(x, dtype=float),
                                 None if measured is None else np.asarray(measured, dtype=float),
                                 np.asarray(y0, dtype=float), np.asarray(y1, dtype=float), weights)

    if isinstance(cost, FourierCost):
        weights = np.asarray(cost.weights, dtype=float)
        return [make(cost.channel, units.get(cost.channel, ""), "amplitude spectrum",
                     cost.coefficients.omegas / (2 * np.pi), cost.measured_amplitude,
                     np.hypot(*cost.spectrum(Y0)), np.hypot(*cost.spectrum(Y1)),
                     None if np.all(weights > 0) else weights)]
    if isinstance(cost, EngineOrderCost):
        return [make(f"{cost.channel}, order {cost.order:g}", units.get(cost.channel, ""), "order amplitude",
                     cost.speeds, cost.measured_amplitude, cost.amplitudes(Y0), cost.amplitudes(Y1))]
    if isinstance(cost, PODCost):
        q0, q1 = cost.modal_coordinates(Y0), cost.modal_coordinates(Y1)
        return [make(f"mode {mode}", "", "modal coordinate", cost.sample_times, cost.measured_coordinates[:, j],
                     q0[:, j], q1[:, j]) for j, mode in enumerate(cost.modes)]
    data = cost.data if isinstance(cost, LeastSquaresCost) else None
    return [make(name, units.get(name, ""), "time series", cost.sample_times,
                 None if data is None else data[:, c], Y0[:, c], Y1[:, c])
            for c, name in enumerate(cost.channels)]
