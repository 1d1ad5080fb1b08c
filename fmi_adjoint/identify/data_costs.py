"""Costs built from data files and the cost options (``--cost time|fourier|orders|pod``).

What ``--data`` holds depends on the cost:

* ``time``: a time series (``time`` column, one column per measured output);
  least squares in the time domain.
* ``fourier``: either a time series, whose Fourier coefficients at the analysed
  frequencies are the measurement, or a measured spectrum (``frequency`` column in Hz,
  an ``amplitude`` column, optionally ``A`` and ``B`` coefficient columns and a
  ``weight`` column).  The frequencies are the spectrum's rows, ``--frequencies``, or
  the harmonics ``k / T_w`` inside ``--band``.
* ``orders``: a measured order spectrum (``speed`` column in rpm, ``amplitude``,
  optionally ``weight``) of engine order ``--order`` over the run-up ``--runup``.
* ``pod``: a time series; the proper orthogonal modes of its channels define the modal
  coordinates compared (``--modes``).

Costs without time samples in their data (spectra, order spectra) sample the simulated
output at every integrator step up to the end time.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ..costs import (
    AbstractCost,
    EngineOrderCost,
    FourierCoefficients,
    FourierCost,
    LeastSquaresCost,
    PODCost,
    RunUp,
)
from ..costs.fourier import KINDS, WINDOWS
from ..bench import detect_format
from ..bench.merge import merge_measurements
from ..bench.contract import MissingChannel
from ..bench.inputs import MeasuredChannel, missing_input_channel
from ..bench.preprocess import Prepared, Preprocessing, input_channels, prepare
from ..data import Measurement, name_list, parse_csv, read_csv_bytes, sniff_delimiter, split_unit
from ..errors import DataError
from ..integrate import time_grid
from ..text import excerpt
from .guards import Notice, check_data_end, check_data_start

__all__ = ["COSTS", "KINDS", "WINDOWS", "CostOptions", "DataFile", "Target", "build_cost", "input_courses",
           "prepared_data", "preprocessing_report", "step_grid"]

COSTS = ("time", "fourier", "orders", "pod")
_HEADER_BYTES = 4 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class CostOptions:
    """The cost chosen on the command line, with its options (see the module docstring).

    Frequencies and bands are in Hz, speeds in rpm, times in s.
    """

    cost: str = "time"
    channel: str | None = None
    frequencies: tuple[float, ...] = ()
    band: tuple[float, float] | None = None
    window: str = "rectangular"
    window_limits: tuple[float, float] | None = None
    kind: str | None = None
    order: float | None = None
    runup: RunUp | None = None
    speeds: tuple[float, float] | None = None
    modes: tuple[int, ...] = (1,)
    weights: dict[str, float] = dataclasses.field(default_factory=dict)
    scales: dict[str, float] = dataclasses.field(default_factory=dict)
    #: ``--noise OUT=SIGMA``: the noise standard deviation of a channel, in the output's unit.
    noise: dict[str, float] = dataclasses.field(default_factory=dict)
    #: The channel weighting of a time-domain cost with several channels (issue 26, part 5;
    #: :func:`channel_scales`): :class:`NoiseWeighting` by default, None for unit weights.
    weighting: NoiseWeighting | None = dataclasses.field(default_factory=lambda: NoiseWeighting())

    def describe(self) -> dict:
        """JSON-ready summary for result files."""
        out: dict = {"cost": self.cost}
        if self.cost in ("fourier", "orders"):
            out["channel"] = self.channel
            out["kind"] = self.spectrum_kind
        if self.cost == "fourier":
            out.update(window=self.window, band_hz=self.band, window_limits=self.window_limits,
                       frequencies_hz=list(self.frequencies) or None)
        if self.cost == "orders":
            out.update(order=self.order, runup=dataclasses.asdict(self.runup) if self.runup else None,
                       speeds_rpm=self.speeds)
        if self.cost == "pod":
            out["modes"] = list(self.modes)
        return out

    @property
    def spectrum_kind(self) -> str:
        """Misfit of amplitudes: eq. (4.6) "power" for spectra, "amplitude" for orders by default."""
        if self.kind is not None:
            return self.kind
        return "amplitude" if self.cost == "orders" else "power"


@dataclasses.dataclass(frozen=True)
class NoiseWeighting:
    """Weigh each channel of a time-domain cost by ``1/sigma_c**2``, ``sigma_c`` its noise
    standard deviation (issue 26, part 5): the cost's scale of the channel is ``sigma_c``
    (:class:`~fmi_adjoint.costs.LeastSquaresCost`), so every channel's residuals are of unit
    variance and the standard errors of
    :func:`~fmi_adjoint.identify.problem.gauss_newton_statistics` (one pooled residual
    variance) are right for channels of mixed units and noise levels.

    The rule, per channel, first match wins:

    1. ``--weight`` or ``--scale`` given for the channel: those (default 1 for the other);
    2. ``--noise OUT=SIGMA`` given: scale ``SIGMA`` (also for a single channel);
    3. no ``--weight``/``--scale`` for any channel (with them the user weighs the channels, and
       the others keep 1, as before) and a cost of at least ``min_channels`` channels:
       ``sigma_c`` estimated from the data by
       :meth:`~fmi_adjoint.costs.LeastSquaresCost.noise_variances` (the estimate of the noise
       floor, per channel), provided every such channel's noise is resolved
       (:meth:`~fmi_adjoint.costs.LeastSquaresCost.noise_resolved`: its pseudo-residuals are
       correlated as white noise's, so the estimate is within 12 % of the noise); otherwise
       (noise-free or coarsely sampled data, where the estimate is the signal's curvature) all
       keep scale 1, recorded as ``"unit (noise not resolved)"``; a channel whose estimate is
       0 keeps scale 1;
    4. otherwise unit weight and scale.

    A single channel keeps unit weight by default: its weight scales the cost by a constant,
    which changes neither its minimum nor the standard errors (``s**2`` and ``J_r^T J_r`` scale
    together), so single-channel results stay as they were.
    """

    min_channels: int = 2


@dataclasses.dataclass(frozen=True)
class Target:
    """What the data are compared with: a model or an FMU, by its output names.

    ``units`` are the outputs' declared units ("" where none is declared), ``t_end_declared``
    whether ``t_end`` is the model's own end time (False: an FMU without a ``DefaultExperiment``
    stop time, for which ``t_end`` is a stand-in); both are read by the guards
    (:mod:`fmi_adjoint.identify.guards`).
    """

    name: str
    output_names: tuple[str, ...]
    t_end: float
    units: tuple[str, ...] = ()
    t_end_declared: bool = True

    @classmethod
    def of_model(cls, model) -> Target:
        """The target of a compiled model."""
        units = {output.name: output.unit for output in model.model.outputs}
        return cls(model.model.name, tuple(model.output_names), float(model.model.simulation.t_end),
                   tuple(units.get(name, "") for name in model.output_names))


@dataclasses.dataclass(frozen=True)
class DataFile:
    """A data file as it travels to parallel workers: its name (for messages) and its content.

    A CSV file travels as its bytes: :meth:`from_path` reads them with the checks of
    :func:`~fmi_adjoint.data.read_csv` (a regular file of at most 512 MiB) and :meth:`read`
    parses them as ``read_csv`` would (any delimiter, decimal commas, units: issue 26).  A
    binary file (MDF, MAT, HDF5: :mod:`fmi_adjoint.bench`) is read in the parent, only the
    channels used, and travels as its ``measurement``.  ``preprocessing`` is what
    :func:`~fmi_adjoint.bench.preprocess.prepare` does to the samples before a time-domain
    cost compares them.
    """

    name: str
    raw: bytes
    #: A time may repeat once (left and right limits at an event): data for FMUs.
    events: bool = False
    measurement: Measurement | None = None
    format: str = "csv"
    preprocessing: Preprocessing = Preprocessing()

    @classmethod
    def from_path(cls, path: str, *, events: bool = False, preprocessing: Preprocessing | None = None,
                  outputs: tuple[str, ...] | None = None) -> DataFile:
        """Read the file ``path``: a CSV file's bytes, or the channels of a binary file that
        ``preprocessing`` maps, else those named like ``outputs`` (None: every channel)."""
        preprocessing = preprocessing or Preprocessing()
        fmt = detect_format(path)
        if fmt.name == "csv":
            return cls(str(path), read_csv_bytes(path), events, None, "csv", preprocessing)
        mapped = preprocessing.channels()
        channels = _with_inputs(mapped if mapped is not None else outputs, preprocessing)
        measurement = fmt.read(Path(path), channels, present_only=mapped is None and channels is not None)
        _check_inputs_read(fmt, [Path(path)], measurement, preprocessing)
        return cls(str(path), b"", events, measurement, fmt.name, preprocessing)

    @classmethod
    def from_paths(cls, paths: Sequence[str], *, preprocessing: Preprocessing | None = None,
                   outputs: tuple[str, ...] | None = None) -> DataFile:
        """One experiment recorded in several files on one clock (multi-rate channels): each
        file read for the channels ``preprocessing`` maps, else those named like ``outputs``
        (those it has; None: every channel), merged on the union of their times with each
        channel's gaps NaN (:func:`~fmi_adjoint.bench.merge.merge_measurements`).  One path is
        :meth:`from_path`."""
        if len(paths) == 1:
            return cls.from_path(paths[0], preprocessing=preprocessing, outputs=outputs)
        preprocessing = preprocessing or Preprocessing()
        mapped = preprocessing.channels()
        channels = _with_inputs(mapped if mapped is not None else outputs, preprocessing)
        parts = [detect_format(path).read(Path(path), channels, present_only=channels is not None)
                 for path in paths]
        merged = merge_measurements(parts)
        _check_inputs_read(detect_format(paths[0]), [Path(p) for p in paths], merged, preprocessing)
        return cls(merged.source, b"", False, merged, "merged", preprocessing)

    def header(self) -> list[str]:
        """The header cells without units ([] if there is no readable first line; :meth:`read`
        names the problem); a binary file's channels."""
        if self.measurement is not None:
            return ["time", *self.measurement.columns]
        delimiter = sniff_delimiter(self.raw)
        for line in self.raw[:_HEADER_BYTES].splitlines():
            if line.strip():
                try:
                    text = line.decode("utf-8").lstrip("\ufeff")
                except UnicodeDecodeError:
                    return []
                return [split_unit(cell)[0] for cell in text.split(delimiter)]
        return []

    def read(self, *, time_column: str = "time", unit: str = "seconds", min_rows: int = 2) -> Measurement:
        """The samples (see :func:`~fmi_adjoint.data.read_csv`)."""
        if self.measurement is not None:
            return self.measurement
        return parse_csv(self.raw, self.name, time_column=time_column, unit=unit, min_rows=min_rows,
                         events=self.events)

    def content_digest(self) -> bytes:
        """SHA-256 of the content (bytes, or a binary file's channels) and the preprocessing
        (of the bytes alone for a CSV file without preprocessing, as before issue 26)."""
        h = hashlib.sha256(self.raw)
        if self.measurement is None and self.preprocessing == Preprocessing():
            return h.digest()
        if self.measurement is not None:
            m = self.measurement
            h.update(np.ascontiguousarray(m.times).tobytes() + np.ascontiguousarray(m.values).tobytes())
            h.update(repr((m.columns, m.units, m.time_unit)).encode())
        h.update(repr(self.preprocessing).encode())
        return h.digest()

    def digest(self) -> str:
        """SHA-256 of the name and the content."""
        if self.measurement is None and self.preprocessing == Preprocessing():
            return hashlib.sha256(self.name.encode() + b"\0" + self.raw).hexdigest()
        return hashlib.sha256(self.name.encode() + b"\0" + self.content_digest()).hexdigest()


def _with_inputs(channels: Sequence[str] | None, preprocessing: Preprocessing) -> tuple[str, ...] | None:
    """The channels to read: the compared ones and those that drive inputs (None: all)."""
    if channels is None:
        return None
    return tuple(channels) + tuple(c for c in preprocessing.input_channels() if c not in channels)


def _check_inputs_read(fmt, paths: Sequence[Path], measurement: Measurement, preprocessing: Preprocessing) -> None:
    """A channel that drives an input and is in none of the files: the reader's own error,
    which names the file's channels (the compared channels were read with ``present_only``)."""
    missing = [c for c in preprocessing.input_channels() if c not in measurement.columns]
    if missing:
        name = next(n for n, c in preprocessing.inputs if c == missing[0])
        try:
            fmt.read(paths[0], missing)
        except MissingChannel as error:
            raise missing_input_channel(error, name) from None
        raise DataError(f"{paths[0]}: no channel {excerpt(missing[0])} to drive the input {excerpt(name)}.")


def input_courses(data: DataFile, *, units: Mapping[str, str], model: str) -> tuple[MeasuredChannel, ...]:
    """The channels of ``data`` that drive model inputs (``--input INPUT=CHANNEL``), on the
    compared clock and in the inputs' ``units`` (:func:`~fmi_adjoint.bench.preprocess.input_channels`);
    a merged record (``with=``) keeps each channel's own samples."""
    if not data.preprocessing.inputs:
        return ()
    return input_channels(data.read(), data.preprocessing, units=dict(units), model=model,
                          merged=data.format == "merged")


def _check_channel(options: CostOptions, model: Target, file: str, columns: tuple[str, ...]) -> str:
    channel = options.channel
    if channel is None:
        if len(columns) == 1 and columns[0] in model.output_names:
            return columns[0]
        raise DataError(
            f"--cost {options.cost}: name the analysed output with --channel (outputs of model "
            f"'{model.name}': {', '.join(model.output_names)})."
        )
    if channel not in model.output_names:
        raise DataError(
            f"--channel {channel!r} is not an output of '{model.name}'. "
            f"Outputs: {', '.join(model.output_names)}."
        )
    return channel


def _check_columns(measurement: Measurement, model: Target, file: str) -> None:
    if not measurement.columns:
        raise DataError(
            f"{file}: no measured column besides 'time'; add columns named like the model's outputs "
            f"({', '.join(model.output_names)})."
        )
    for name in measurement.columns:
        if name not in model.output_names:
            raise DataError(
                f"{file}: column {excerpt(name)} matches no output of '{model.name}'. "
                f"Outputs: {', '.join(model.output_names)}. Rename or drop the column."
            )


def _spectrum_columns(measurement: Measurement, required: tuple[str, ...], file: str, what: str) -> None:
    allowed = {"amplitude", "A", "B", "weight"}
    unknown = [c for c in measurement.columns if c not in allowed]
    missing = [c for c in required if c not in measurement.columns]
    if unknown or missing:
        raise DataError(
            f"{file}: a {what} has the columns {', '.join(required)} (optional: weight); "
            f"{'unknown: ' + name_list(unknown) if unknown else 'missing: ' + ', '.join(missing)}."
        )


def step_grid(t_end: float, step: float) -> np.ndarray:
    """The integrator's step times on ``[0, t_end]`` (sample times of spectral data)."""
    return time_grid(0.0, t_end, step)


def _check_end(file: str, times: np.ndarray, t_end: float | None, window: tuple[float, float] | None) -> None:
    """Refuse ``--t-end`` before the last sample the cost compares (the last of the window
    for Fourier coefficients): one message naming both times, at the front door, instead
    of a failure deep in the sampler or the FMU's integrator."""
    if t_end is None:
        return
    last = float(times[-1]) if window is None else float(window[1])
    if t_end < last - 1e-9 * max(abs(last), abs(float(times[-1] - times[0])), 1e-300):
        what = "the end of the --window-limits" if window is not None else "the last sample"
        raise DataError(f"--t-end {t_end:g} s ends before {what} of {file} at {last:g} s; give --t-end {last:g} or "
                        "more, or trim the data (without --t-end the run ends at the last sample, which must not lie "
                        "past the model's end time).")


def build_cost(
    options: CostOptions, model: Target, data: DataFile | str, *, t_end: float | None, step: float
) -> tuple[AbstractCost, float]:
    """The cost of one ``--data`` file and the end time of its simulation.

    ``t_end`` is the ``--t-end`` option (None: the last sample of a time series, which must
    not lie past the model's end time (:func:`~fmi_adjoint.identify.guards.check_data_end`), or
    the model's end time for spectra).
    """
    if isinstance(data, str):
        data = DataFile.from_path(data)
    file = data.name
    cost = options.cost
    if cost == "orders" or (cost == "fourier" and "frequency" in data.header()):
        return _spectral_cost(options, model, data, t_end=t_end, step=step)
    measurement = prepared_data(model, data, step=step).measurement
    _check_columns(measurement, model, file)
    model_t_end = model.t_end if model.t_end_declared else None
    check_data_start(file, measurement.times, model_t_end=model_t_end, t_end=t_end)
    check_data_end(file, measurement.times, target=model.name, model_t_end=model_t_end, t_end=t_end)
    end = t_end if t_end is not None else float(measurement.times[-1])
    _check_end(file, measurement.times, t_end, options.window_limits if cost == "fourier" else None)
    if cost == "time":
        for name in list(options.weights) + list(options.scales) + list(options.noise):
            if name not in measurement.columns:
                raise DataError(f"--weight/--scale/--noise {name!r}: no such data column in {file}.")
        return time_domain_cost(options, measurement), end
    if cost == "pod":
        return PODCost(measurement.times, measurement.values, measurement.columns, modes=options.modes), end
    # Fourier coefficients of a measured time series.
    channel = _check_channel(options, model, file, measurement.columns)
    if channel not in measurement.columns:
        raise DataError(f"{file}: no column {channel!r} for --channel; columns: {', '.join(measurement.columns)}.")
    times = measurement.times
    lo, hi = options.window_limits or (float(times[0]), float(times[-1]))
    omegas = _omegas(options, times, lo, hi, file)
    coefficients = FourierCoefficients(times, omegas, window=options.window, t_lower=lo, t_upper=hi)
    A, B = coefficients(measurement.column(channel))
    cost_obj = _fourier_cost(options, coefficients, channel, A=A, B=B, amplitude=None, weights=None)
    return cost_obj, end


def time_domain_cost(options: CostOptions, measurement: Measurement) -> LeastSquaresCost:
    """The least-squares cost of a time series with its channel weighting
    (:class:`NoiseWeighting`) and its gaps (NaN samples of a channel) given sample weight 0:
    removed from that channel only (:class:`~fmi_adjoint.costs.LeastSquaresCost`)."""
    columns = measurement.columns
    values = np.asarray(measurement.values, dtype=float)
    finite = np.isfinite(values)
    sample_weights = None if finite.all() else finite.astype(float)
    weights = np.array([options.weights.get(c, 1.0) for c in columns])
    scales = np.array([options.scales.get(c, 1.0) for c in columns])
    sources = ["--weight/--scale" if c in options.weights or c in options.scales else "unit" for c in columns]
    for k, c in enumerate(columns):
        if sources[k] == "unit" and c in options.noise:
            scales[k], sources[k] = options.noise[c], "noise given"
    plain = LeastSquaresCost(measurement.times, values, columns, weights=weights, scales=scales,
                             sample_weights=sample_weights, weighting=tuple(sources))
    estimate = [k for k, source in enumerate(sources) if source == "unit"]
    weighting = options.weighting
    chosen = bool(options.weights or options.scales)  # the user weighs the channels: no estimate
    if (weighting is None or chosen or len(columns) < weighting.min_channels or not estimate
            or measurement.times.size < 3):
        return plain
    resolved = plain.noise_resolved()
    if not all(resolved[k] for k in estimate):
        # Noise-free (or too coarsely sampled) data: the estimate is the signal's curvature, not
        # its noise; unit weights for every estimated channel, and RESULT.json says why.
        for k in estimate:
            sources[k] = "unit (noise not resolved)"
        return dataclasses.replace(plain, weighting=tuple(sources))
    sigma = np.sqrt(plain.noise_variances())
    for k in estimate:
        if np.isfinite(sigma[k]) and sigma[k] > 0:
            scales[k], sources[k] = sigma[k], "noise estimated"
    return dataclasses.replace(plain, scales=scales, weighting=tuple(sources))


def prepared_data(model: Target, data: DataFile, *, step: float) -> Prepared:
    """The time series of ``data`` after its preprocessing (mapping, window, time shift,
    units converted to the outputs', gaps dropped, detrending, resampling:
    :func:`~fmi_adjoint.bench.preprocess.prepare`), with its record for RESULT.json.

    The last few are kept: the problem's costs and RESULT.json's record read the same file,
    so a large CSV file is parsed once."""
    return _prepared(model, data, step)


@functools.lru_cache(maxsize=8)
def _prepared(model: Target, data: DataFile, step: float) -> Prepared:
    units = model.units if len(model.units) == len(model.output_names) else ("",) * len(model.output_names)
    measurement = data.read()
    gaps = ~np.isfinite(measurement.values)
    if data.format != "csv" and gaps.any() and data.preprocessing.detrend is None and not data.preprocessing.resample:
        return _masked(model, data, measurement, gaps, units, step)
    return prepare(measurement, data.preprocessing, output_names=model.output_names, output_units=units,
                   model=f"'{model.name}'", step=step, fmt=data.format)


def _masked(model: Target, data: DataFile, measurement: Measurement, gaps: np.ndarray, units: tuple[str, ...],
            step: float) -> Prepared:
    """:func:`~fmi_adjoint.bench.preprocess.prepare` keeping the NaN gaps of each channel
    (issue 26, part 4: masked with zero weight in that channel only, instead of dropping the
    row in every channel): the gaps are filled for the preprocessing and put back after it, at
    the same places (the mapping, window and shift select and reorder samples; the unit
    conversion is per value).  Rows without a value in any compared channel are dropped.
    Detrending and resampling need every value, so with them the rows are dropped
    (:func:`~fmi_adjoint.bench.preprocess.prepare`)."""
    filled = dataclasses.replace(measurement, values=np.where(gaps, 0.0, measurement.values))
    indicator = dataclasses.replace(measurement, values=gaps.astype(float), units=())
    prepared = prepare(filled, data.preprocessing, output_names=model.output_names, output_units=units,
                       model=f"'{model.name}'", step=step, fmt=data.format)
    located = prepare(indicator, data.preprocessing, output_names=model.output_names, output_units=("",) * len(units),
                      model=f"'{model.name}'", step=step, fmt=data.format).measurement
    out = prepared.measurement
    where = data.name
    mask = located.values > 0.5
    empty = [out.columns[c] for c in range(len(out.columns)) if mask[:, c].all()]
    if empty:
        raise DataError(f"{where}: channel {excerpt(empty[0])} has no finite sample; record it or leave it out.")
    keep = ~mask.all(axis=1)
    if np.count_nonzero(keep) < 2:
        raise DataError(f"{where}: fewer than two samples have a value; give more samples.")
    record = dict(prepared.record)
    record["masked_samples"] = {out.columns[c]: int(mask[:, c].sum()) for c in range(len(out.columns))
                                if mask[:, c].any()}
    values = np.where(mask, np.nan, out.values)[keep]
    return Prepared(dataclasses.replace(out, times=out.times[keep], values=values), record, prepared.notices)


def preprocessing_report(options: CostOptions, model: Target, files: Sequence[DataFile], *, step: float
                         ) -> tuple[list[dict], tuple[Notice, ...]]:
    """What the preprocessing did to each time series of ``files`` (RESULT.json's
    ``data_preprocessing``; only files with something to report: a binary format, a mapping,
    units, a window, a shift, gaps, detrending or resampling) and its warnings (unknown units)."""
    records: list[dict] = []
    notices: list[Notice] = []
    for data in files:
        if options.cost == "orders" or (options.cost == "fourier" and "frequency" in data.header()):
            continue
        prepared = prepared_data(model, data, step=step)
        notices.extend(Notice(text, warning=True) for text in prepared.notices)
        if data.format != "csv" or set(prepared.record) - {"file", "format"}:
            records.append(prepared.record)
    return records, tuple(notices)


def _omegas(options: CostOptions, times: np.ndarray, lo: float, hi: float, file: str) -> np.ndarray:
    """The analysed angular frequencies of a time series, bounded before anything is allocated.

    Frequencies above the Nyquist frequency of the samples in the window (half their mean
    rate) only alias, and a band reaching far above it would ask for millions of harmonics
    (``--band 0:1e9``: 16 GB), so both are refused with the limit.
    """
    window_length = hi - lo
    inside = int(np.count_nonzero((times >= lo) & (times <= hi)))
    nyquist = max(inside - 1, 1) / (2.0 * window_length) if window_length > 0 else 0.0
    if options.frequencies:
        top = max(options.frequencies)
        if top > nyquist * (1 + 1e-9):
            raise DataError(
                f"--frequencies: {top:g} Hz is above the Nyquist frequency {nyquist:.6g} Hz of the samples of "
                f"{file} in the window; give frequencies up to {nyquist:.6g} Hz."
            )
        return 2 * np.pi * np.asarray(options.frequencies)
    if options.band is None:
        raise DataError(
            f"{file}: a time series needs the analysed frequencies: --frequencies F1,F2,... or --band LO:HI (Hz)."
        )
    low, high = options.band
    if high > nyquist * (1 + 1e-9):
        raise DataError(
            f"--band {low:g}:{high:g} Hz reaches above the Nyquist frequency {nyquist:.6g} Hz of the samples of "
            f"{file} in the window (the limit of the band); choose HI <= {nyquist:.6g}."
        )
    df = 1.0 / window_length
    k = np.arange(math.ceil(low / df - 1e-9), math.floor(high / df + 1e-9) + 1)
    k = k[k >= 1]
    if k.size == 0:
        raise DataError(
            f"--band {low:g}:{high:g} Hz holds no harmonic k/T_w of the {window_length:g} s "
            "window; widen the band or give --frequencies."
        )
    return 2 * np.pi * k * df


def _fourier_cost(options, coefficients, channel, *, A, B, amplitude, weights) -> FourierCost:
    kind = options.spectrum_kind
    band = options.band
    select = np.ones(coefficients.omegas.size) if weights is None else weights
    if band is not None:
        hz = coefficients.omegas / (2 * np.pi)
        inside = (hz >= band[0] * (1 - 1e-12)) & (hz <= band[1] * (1 + 1e-12))
        if not inside.any():
            raise DataError(f"--band {band[0]:g}:{band[1]:g} Hz holds none of the spectrum's frequencies.")
        select = select * inside
    if kind == "complex" and (A is None or B is None):
        raise DataError("--spectrum complex needs the measured coefficients: a time series, or A and B columns.")
    return FourierCost(coefficients, channel, measured_A=A, measured_B=B, measured_amplitude=amplitude,
                       kind=kind, weights=select)


def _spectral_cost(options, model, data: DataFile, *, t_end, step) -> tuple[AbstractCost, float]:
    """A cost on a measured spectrum or order spectrum (no time samples in the data)."""
    file = data.name
    end = t_end if t_end is not None else model.t_end
    grid = step_grid(end, step)
    channel = _check_channel(options, model, file, ())
    if options.cost == "orders":
        spectrum = data.read(time_column="speed", unit="rpm", min_rows=1)
        _spectrum_columns(spectrum, ("amplitude",), file, "measured order spectrum")
        speeds = spectrum.times
        amplitude = spectrum.column("amplitude")
        weights = spectrum.column("weight") if "weight" in spectrum.columns else np.ones(speeds.size)
        if options.speeds is not None:
            inside = (speeds >= options.speeds[0]) & (speeds <= options.speeds[1])
            if not inside.any():
                raise DataError(f"--speeds {options.speeds[0]:g}:{options.speeds[1]:g} holds no row of {file}.")
            speeds, amplitude, weights = speeds[inside], amplitude[inside], weights[inside]
        return EngineOrderCost(grid, channel, options.order, speeds, amplitude, options.runup,
                               kind=options.spectrum_kind, weights=weights), end
    if options.frequencies:
        raise DataError(f"{file} is a spectrum: its 'frequency' rows are the analysed frequencies; drop --frequencies.")
    spectrum = data.read(time_column="frequency", unit="Hz", min_rows=1)
    complex_kind = options.spectrum_kind == "complex"
    _spectrum_columns(spectrum, ("A", "B") if complex_kind else ("amplitude",), file, "measured spectrum")
    lo, hi = options.window_limits or (0.0, end)
    if hi > end * (1 + 1e-12):
        raise DataError(f"--window-limits end at {hi:g} s, after the simulation end {end:g} s; use --t-end.")
    coefficients = FourierCoefficients(grid, 2 * np.pi * spectrum.times, window=options.window, t_lower=lo, t_upper=hi)
    A = spectrum.column("A") if "A" in spectrum.columns else None
    B = spectrum.column("B") if "B" in spectrum.columns else None
    measured = spectrum.column("amplitude") if "amplitude" in spectrum.columns else None
    weight_column = spectrum.column("weight") if "weight" in spectrum.columns else None
    if weight_column is not None and np.any(weight_column < 0):
        raise DataError(f"{file}: the weight column must be >= 0.")
    return _fourier_cost(options, coefficients, channel, A=A, B=B, amplitude=measured, weights=weight_column), end

