"""Sensor models as identifiable cost parameters (issue 26, part 6): a delay, a gain and a bias
per measured channel.

A sensor reads the model output ``y_c`` late by ``tau_c``, scaled by ``g_c`` and offset by
``b_c``: the compared sample is ``yhat_c(t_s) = g_c y_c(t_s - tau_c) + b_c``.  The three are
parameters of the *cost*, named ``<channel>.delay``, ``<channel>.gain``, ``<channel>.bias``
(``--params x_acc.delay,x_acc.gain``); the model never sees them.  Their gradient is the
cost's own partial derivative; the model parameters' gradient goes through the adjoint with
the transformed output derivative ``dJ/dy = g_c (transpose of the interpolation) dJ/dyhat``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import numpy as np

from ..errors import DataError
from .base import AbstractCost, CostValue
from .least_squares import LeastSquaresCost
from .sampling import Sampler

__all__ = ["SENSOR_PARAMETERS", "SensorCost", "SensorModel", "sensor_parameter"]

#: The sensor parameters of a channel, their defaults (no delay, unit gain, no bias) and
#: default bounds.  The delay is bounded by :data:`MAX_DELAY_SHARE` of the record (a larger
#: one compares little of the record with the model's response); the gain by a factor
#: :data:`GAIN_RANGE` either way (a sensor off by more is a unit error, not a calibration);
#: the bias is free.
SENSOR_PARAMETERS: dict[str, float] = {"delay": 0.0, "gain": 1.0, "bias": 0.0}
MAX_DELAY_SHARE = 0.1
GAIN_RANGE = 10.0


def sensor_parameter(name: str, channels: tuple[str, ...]) -> tuple[str, str] | None:
    """``(channel, kind)`` if ``name`` is ``<channel>.delay|gain|bias`` of one of ``channels``,
    else None."""
    channel, dot, kind = name.rpartition(".")
    if dot and kind in SENSOR_PARAMETERS and channel in channels:
        return channel, kind
    return None


@dataclasses.dataclass(frozen=True)
class SensorModel:
    """``yhat(t) = gain * y(t - delay) + bias`` (delay in s, gain 1, bias in the output's unit)."""

    delay: float = 0.0
    gain: float = 1.0
    bias: float = 0.0

    def __post_init__(self) -> None:
        for name in ("delay", "gain", "bias"):
            if not math.isfinite(getattr(self, name)):
                raise DataError(f"sensor {name} = {getattr(self, name)!r} is not finite; give a finite value.")

    def replaced(self, kind: str, value: float) -> SensorModel:
        """The same sensor with ``kind`` (delay, gain or bias) set to ``value``."""
        return dataclasses.replace(self, **{kind: float(value)})


@dataclasses.dataclass(frozen=True, eq=False)
class SensorCost(AbstractCost):
    """A least-squares cost ``inner`` of the sensor readings ``yhat`` of the outputs.

    ``J(Y) = inner.J(Yhat)``, ``Yhat_sc = g_c ytilde_c(t_s - tau_c) + b_c`` with ``ytilde_c``
    the piecewise-linear interpolant of the outputs ``Y`` on ``grid`` (the integrator's steps:
    the cost's ``sample_times`` are the grid, so the adjoint receives ``dJ/dY`` at every step),
    held constant outside the grid (a read before ``t0`` sees the initial output).  The
    interpolant is the one of :class:`~fmi_adjoint.costs.sampling.Sampler`, so with no delay,
    unit gain and no bias ``J`` is ``inner``'s cost of the outputs at its sample times.

    Derivatives (all exact for the computed ``J``): ``dJ/dY`` is ``g_c`` times the transpose
    of the interpolation applied to ``dJ/dYhat`` (:meth:`evaluate`); ``dYhat_sc/dg_c =
    ytilde_c(t_s - tau_c)``, ``dYhat_sc/db_c = 1`` and ``dYhat_sc/dtau_c = -g_c
    ytilde_c'(t_s - tau_c)``, the slope ``(Y_{k+1} - Y_k)/(t_{k+1} - t_k)`` of the segment
    ``k`` holding ``t_s - tau_c`` (:meth:`sensor_derivatives`).  That is the derivative of the
    interpolant that was evaluated, not of the model's continuous output: the computed ``J``
    is piecewise quadratic in ``tau`` with kinks where ``t_s - tau`` crosses a step time, and
    between kinks this slope is its exact derivative; at a kink (a set of measure zero) the
    segment to the right is taken, as the interpolation does (``searchsorted(side="right")``).
    Outside the grid the read is held, so the derivative there is 0.

    Attributes
    ----------
    inner : LeastSquaresCost
        The data and their weighting.
    grid : numpy.ndarray
        The step times of the runs (strictly increasing).
    sensors : tuple of SensorModel
        One per channel of ``inner`` (default: none, ideal sensors).
    """

    sum_of_squares: ClassVar[bool] = True

    inner: LeastSquaresCost
    grid: np.ndarray
    sensors: tuple[SensorModel, ...] = ()

    def __post_init__(self) -> None:
        grid = np.asarray(self.grid, dtype=float)
        if grid.ndim != 1 or grid.size < 2 or not np.all(np.isfinite(grid)) or np.any(np.diff(grid) <= 0):
            raise DataError("a sensor cost needs the step times as a strictly increasing grid of at least two times.")
        sensors = tuple(self.sensors) or tuple(SensorModel() for _ in self.inner.channels)
        if len(sensors) != len(self.inner.channels):
            raise DataError(f"{len(sensors)} sensor model(s) for {len(self.inner.channels)} channel(s); give one "
                            "per channel.")
        object.__setattr__(self, "grid", grid)
        object.__setattr__(self, "sensors", sensors)

    @property
    def sample_times(self) -> np.ndarray:  # type: ignore[override]  # the grid, read-only
        return self.grid

    @property
    def channels(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.inner.channels

    @property
    def data(self) -> np.ndarray:
        """The measured samples (at ``inner.sample_times``)."""
        return self.inner.data

    def with_sensors(self, sensors: tuple[SensorModel, ...]) -> SensorCost:
        """The same cost with other sensor models."""
        return dataclasses.replace(self, sensors=tuple(sensors))

    def noise_floor(self) -> float | None:
        """``inner``'s noise floor (:meth:`~fmi_adjoint.costs.LeastSquaresCost.noise_floor`)."""
        return self.inner.noise_floor()

    def _segments(self, c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(k, theta, inside)`` of channel ``c``'s reads ``t_s - tau_c`` on the grid."""
        g = self.grid
        u = self.inner.sample_times - self.sensors[c].delay
        inside = (u >= g[0]) & (u <= g[-1])
        u = np.clip(u, g[0], g[-1])
        k = np.clip(np.searchsorted(g, u, side="right") - 1, 0, g.size - 2)
        theta = (u - g[k]) / (g[k + 1] - g[k])
        return k, theta, inside

    def _samplers(self) -> list[Sampler]:
        return [Sampler(k=k, theta=theta, n_grid=self.grid.size) for k, theta, _ in map(self._segments,
                                                                                        range(len(self.sensors)))]

    def readings(self, Y: np.ndarray) -> np.ndarray:
        """``Yhat`` (n_samples, n_channels) of the outputs ``Y`` on the grid (n_grid, n_channels)."""
        Y = np.asarray(Y, dtype=float)
        out = np.empty((self.inner.sample_times.size, len(self.sensors)))
        for c, (sensor, sampler) in enumerate(zip(self.sensors, self._samplers())):
            out[:, c] = sensor.gain * sampler.sample(Y[:, c]) + sensor.bias
        return out

    def evaluate(self, Y: np.ndarray, p: np.ndarray) -> CostValue:
        value = self.inner.evaluate(self.readings(Y), p)
        dJ_dY = np.empty((self.grid.size, len(self.sensors)))
        for c, (sensor, sampler) in enumerate(zip(self.sensors, self._samplers())):
            dJ_dY[:, c] = sampler.scatter(sensor.gain * value.dJ_dY[:, c])
        return CostValue(J=value.J, dJ_dY=dJ_dY, dJ_dp=value.dJ_dp)

    def residuals(self, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``inner``'s residuals of the readings and their factors ``dr/dYhat`` (diagonal in
        ``Yhat``, not in ``Y``: :meth:`output_jacobian` maps output sensitivities to ``Yhat``)."""
        return self.inner.residuals(self.readings(Y))

    def output_jacobian(self, dY: np.ndarray) -> np.ndarray:
        """``dYhat/dp`` (n_samples, n_channels, n_p) of output sensitivities ``dY/dp`` on the grid
        (n_grid, n_channels, n_p): ``g_c`` times the interpolated sensitivities."""
        out = np.empty((self.inner.sample_times.size,) + dY.shape[1:])
        for c, (sensor, sampler) in enumerate(zip(self.sensors, self._samplers())):
            out[:, c] = sensor.gain * sampler.sample(dY[:, c])
        return out

    def sensor_derivatives(self, Y: np.ndarray, c: int) -> dict[str, np.ndarray]:
        """``dYhat_{:,c}/d(delay, gain, bias)`` of channel ``c``, each of shape (n_samples,)
        (class docstring)."""
        Y = np.asarray(Y, dtype=float)
        k, theta, inside = self._segments(c)
        y = Y[:, c]
        slope = (y[k + 1] - y[k]) / (self.grid[k + 1] - self.grid[k])
        return {"delay": np.where(inside, -self.sensors[c].gain * slope, 0.0),
                "gain": (1.0 - theta) * y[k] + theta * y[k + 1],
                "bias": np.ones(k.size)}

    def sensor_gradient(self, Y: np.ndarray, p: np.ndarray) -> tuple[float, dict[tuple[str, str], float]]:
        """``J`` and ``dJ/d(channel, kind)`` for every channel's delay, gain and bias."""
        value = self.inner.evaluate(self.readings(Y), p)
        out: dict[tuple[str, str], float] = {}
        for c, channel in enumerate(self.channels):
            for kind, derivative in self.sensor_derivatives(Y, c).items():
                out[(channel, kind)] = float(value.dJ_dY[:, c] @ derivative)
        return value.J, out
