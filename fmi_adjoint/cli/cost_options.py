"""The command line's ``--cost time|fourier|orders|pod`` options (the costs themselves are
built by :mod:`fmi_adjoint.identify.data_costs`)."""

from __future__ import annotations

import argparse
import math

from ..bench.preprocess import DETRENDS, Preprocessing, TimeShift
from ..costs import RunUp
from ..errors import ModelError
from ..identify.data_costs import COSTS, KINDS, WINDOWS, CostOptions, NoiseWeighting
from ..text import excerpt

__all__ = ["add_bench_options", "add_cost_options", "cost_options_from_args", "pairs", "preprocessing_from_args"]


def _pair(text: str | None, option: str, example: str) -> tuple[float, float] | None:
    if text is None:
        return None
    parts = text.split(":")
    try:
        values = tuple(float(x) for x in parts)
    except ValueError:
        values = ()
    if len(values) != 2 or not all(math.isfinite(v) for v in values) or not values[0] < values[1]:
        raise ModelError(f"{option} {text!r}: expected LO:HI with finite LO < HI, e.g. {option} {example}.")
    return values[0], values[1]


def _floats(text: str | None, option: str, example: str) -> tuple[float, ...]:
    if text is None:
        return ()
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        values = ()
    if not values or not all(math.isfinite(v) for v in values):
        raise ModelError(f"{option} {text!r}: expected a comma-separated list of numbers, e.g. {option} {example}.")
    return values


def add_cost_options(parser: argparse.ArgumentParser) -> None:
    """The ``--cost`` option group of ``gradient`` and ``identify``."""
    group = parser.add_argument_group("cost (default: least squares in the time domain)")
    group.add_argument("--cost", choices=COSTS, default="time",
                       help="time: least squares; fourier: Fourier coefficients/spectrum; orders: engine-order "
                       "amplitudes over a run-up; pod: proper-orthogonal-mode coordinates")
    group.add_argument("--channel", metavar="OUTPUT", help="fourier/orders: the analysed model output")
    group.add_argument("--frequencies", metavar="F1,F2,...", help="fourier: analysed frequencies [Hz]")
    group.add_argument("--band", metavar="LO:HI",
                       help="fourier: frequency band [Hz] compared (harmonics k/T_w in the band if no frequencies "
                       "are given)")
    group.add_argument("--window", choices=WINDOWS, default="rectangular", help="fourier: window (hann: g_c = 2)")
    group.add_argument("--window-limits", metavar="TL:TU", help="fourier: analysed time window [s] (default: all)")
    group.add_argument("--spectrum", choices=KINDS, dest="kind",
                       help="misfit: power = eq. (4.6) (default for fourier), amplitude (default for orders), "
                       "complex (fourier, phase-aware)")
    group.add_argument("--order", type=float, help="orders: engine order, e.g. 6")
    group.add_argument("--runup", metavar="N0:N1:T0:T1", help="orders: linear run-up from N0 rpm at T0 s to N1 at T1")
    group.add_argument("--speeds", metavar="LO:HI", help="orders: speed band [rpm] compared (default: all rows)")
    group.add_argument("--modes", metavar="I,J,...", help="pod: 1-based mode numbers (default 1)")
    group.add_argument("--noise", action="append", metavar="OUTPUT=SIGMA",
                       help="time: the noise standard deviation of a channel in the output's unit; its residuals are "
                       "weighted by 1/SIGMA^2 (repeat per channel; default: estimated from the data where the cost "
                       "compares several channels; --weight/--scale of a channel win)")
    group.add_argument("--channel-weighting", choices=("noise", "unit"), default="noise",
                       help="time: weigh the channels of a cost by their noise levels (noise, default) or all by 1 "
                       "(unit: one pooled residual variance, as before issue 26)")


def _noise(items: list[str] | None) -> dict[str, float]:
    """``--noise OUT=SIGMA`` values (positive, finite, each output once)."""
    noise: dict[str, float] = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not sep or not name.strip() or not math.isfinite(value) or value <= 0:
            raise ModelError(f"--noise {excerpt(item)}: expected OUTPUT=SIGMA with a positive noise standard "
                             "deviation in the output's unit, e.g. --noise a1=0.05.")
        if name.strip() in noise:
            raise ModelError(f"--noise {excerpt(name.strip())} is given twice; give it once.")
        noise[name.strip()] = value
    return noise


def cost_options_from_args(args: argparse.Namespace, weights: dict, scales: dict) -> CostOptions:
    """Validate the cost options of a parsed command line."""
    cost = args.cost
    noise = _noise(getattr(args, "noise", None))
    weighting = None if getattr(args, "channel_weighting", "noise") == "unit" else NoiseWeighting()
    runup = None
    if args.runup is not None:
        numbers = _floats(args.runup.replace(":", ","), "--runup", "1000:5000:1:11")
        if len(numbers) != 4:
            raise ModelError(f"--runup {args.runup!r}: expected N0:N1:T0:T1 (rpm, rpm, s, s), e.g. --runup "
                             "1000:5000:1:11.")
        runup = RunUp(*numbers)
    modes: tuple[int, ...] = (1,)
    if args.modes is not None:
        numbers = _floats(args.modes, "--modes", "1,2")
        if any(m != int(m) or m < 1 for m in numbers):
            raise ModelError(f"--modes {excerpt(args.modes)}: mode numbers are integers from 1.")
        modes = tuple(int(m) for m in numbers)
    options = CostOptions(
        cost=cost, channel=args.channel,
        frequencies=_floats(args.frequencies, "--frequencies", "1.5,1.6,1.7"),
        band=_pair(args.band, "--band", "1.4:1.9"),
        window=args.window,
        window_limits=_pair(args.window_limits, "--window-limits", "0.5:10"),
        kind=args.kind, order=args.order, runup=runup,
        speeds=_pair(args.speeds, "--speeds", "2000:4000"),
        modes=modes, weights=weights, scales=scales, noise=noise, weighting=weighting,
    )
    specific = {
        "fourier": ("--frequencies", "--band", "--window-limits"),
        "orders": ("--order", "--runup", "--speeds"),
        "pod": ("--modes",),
    }
    given = {"--frequencies": args.frequencies, "--band": args.band, "--window-limits": args.window_limits,
             "--order": args.order, "--runup": args.runup, "--speeds": args.speeds, "--modes": args.modes}
    for owner, names in specific.items():
        for name in names:
            if given[name] is not None and cost != owner:
                raise ModelError(f"{name} applies to --cost {owner}, not --cost {cost}; remove it or change --cost.")
    if cost != "time" and (weights or scales or noise):
        raise ModelError(f"--weight/--scale/--noise apply to --cost time only, not --cost {cost}.")
    if args.window != "rectangular" and cost != "fourier":
        raise ModelError(f"--window applies to --cost fourier, not --cost {cost}.")
    if args.channel is not None and cost in ("time", "pod"):
        raise ModelError(f"--channel applies to --cost fourier|orders; --cost {cost} compares every data column.")
    if args.kind is not None and cost not in ("fourier", "orders"):
        raise ModelError(f"--spectrum applies to --cost fourier|orders, not --cost {cost}.")
    if cost == "orders":
        if options.order is None or not options.order > 0:
            raise ModelError("--cost orders needs --order O (a positive engine order, e.g. --order 6).")
        if runup is None:
            raise ModelError("--cost orders needs --runup N0:N1:T0:T1 (the run-up of the simulation).")
        if options.spectrum_kind not in ("amplitude", "power"):
            raise ModelError("--cost orders compares amplitudes: --spectrum amplitude or power.")
    return options



def add_bench_options(parser: argparse.ArgumentParser) -> None:
    """The options of test-bench data (issue 26: :mod:`fmi_adjoint.bench.preprocess`) of
    ``gradient`` and ``identify``; a file's time window is ``--data FILE@window=T0:T1``."""
    group = parser.add_argument_group("test-bench data (MDF, MAT, HDF5, CSV; see the how-to 'read bench data')")
    group.add_argument("--map", action="append", metavar="OUTPUT=CHANNEL",
                       help="compare the model output OUTPUT with the data channel CHANNEL (repeat per output; "
                       "with --map only mapped channels are compared)")
    group.add_argument("--time-shift", metavar="S|start",
                       help="subtract S seconds from the data's times, or the first sample's time with 'start' "
                       "(data on the test bench's clock)")
    group.add_argument("--detrend", choices=tuple(DETRENDS),
                       help="remove each channel's mean (offset) or least-squares line (linear) before comparing")
    group.add_argument("--resample", action="store_true",
                       help="resample the data onto the integrator's step grid (low-pass filtered first where "
                       "they are denser)")
    group.add_argument("--input", action="append", metavar="INPUT=CHANNEL",
                       help="drive the model input INPUT (an [inputs] entry) with the data channel CHANNEL of each "
                       "experiment's file, interpolated linearly and converted to the input's unit (a force, a "
                       "prescribed displacement or any expression naming the input; repeat per input)")


def preprocessing_from_args(args: argparse.Namespace) -> Preprocessing:
    """The :class:`~fmi_adjoint.bench.preprocess.Preprocessing` of a parsed command line
    (without the per-file window)."""
    mapping = pairs(args.map, "--map", "OUTPUT=CHANNEL", "--map a1=AccZ_Mount", "output")
    inputs = pairs(getattr(args, "input", None), "--input", "INPUT=CHANNEL", "--input z_road=RoadZ", "input")
    shift = None
    if args.time_shift is not None:
        if args.time_shift.strip() == "start":
            shift = TimeShift()
        else:
            try:
                seconds = float(args.time_shift)
            except ValueError:
                seconds = math.nan
            if not math.isfinite(seconds):
                raise ModelError(f"--time-shift {excerpt(args.time_shift)}: give the seconds subtracted from the "
                                 "data's times (e.g. 1234.5) or 'start' (the first sample's time).")
            shift = TimeShift(seconds)
    return Preprocessing(mapping=mapping, time_shift=shift,
                         detrend=DETRENDS[args.detrend] if args.detrend else None, resample=bool(args.resample),
                         inputs=inputs)


def pairs(items: list[str] | None, option: str, form: str, example: str, what: str) -> tuple[tuple[str, str], ...]:
    """``NAME=CHANNEL`` items of a repeatable option, each name once."""
    pairs: list[tuple[str, str]] = []
    for item in items or []:
        name, sep, channel = item.partition("=")
        if not sep or not name.strip() or not channel.strip():
            raise ModelError(f"{option} {excerpt(item)}: expected {form}, e.g. {example}.")
        if name.strip() in (n for n, _ in pairs):
            raise ModelError(f"{option}: the {what} {excerpt(name.strip())} is given twice; give it once.")
        pairs.append((name.strip(), channel.strip()))
    return tuple(pairs)
