"""Multi-start identification with checkpoints that resume to the same result (issue 14).

Start points
------------
Start 0 is the problem's own start (the user's or the paper's values); starts 1..N-1 are
a scrambled Sobol sequence (scipy.stats.qmc, seeded) in the optimizer's scaled space
(:class:`~fmi_adjoint.identify.scaling.ParameterScaling` of the start values): uniform
between bounds with ``bounds`` scaling, log-uniform with ``log`` scaling.  Every parameter
needs finite bounds.

Strategies
----------
Each start runs with a strategy (:mod:`~fmi_adjoint.identify.strategies`): its stages are
ordinary :func:`~fmi_adjoint.identify.identify` runs, the last on the full problem.  The
default, :class:`~fmi_adjoint.identify.strategies.AutomaticStrategy`, gives start 0 (the
given start values) the strategy it chooses for one start (growing data windows for
time-domain least squares, else single shooting) and cycles the start points through every
applicable strategy (:meth:`~fmi_adjoint.identify.strategies.AutomaticStrategy.cycle`:
windows, each experiment first, single shooting): a multi-start samples the start and the
strategy.  An explicit strategy is used by every start (experiment continuation without a
first experiment: each start point once per experiment).

Running them
------------
Each start is a sequence of :func:`~fmi_adjoint.identify.identify` runs (its stages).  On a
:class:`~fmi_adjoint.identify.parallel.DistributedProblem` with more than one worker, the
starts run in optimizer threads of this process and each of their evaluations is a task
on the executor; a start sees only its own evaluations, so its path, and the result, do
not depend on the number of workers or on timing.  A start whose model fails (Newton
divergence at the start point) is reported as failed with its message; the others go on.

Checkpoint and resume: deterministic replay
-------------------------------------------
scipy's optimizers keep their state inside the call, so it cannot be saved.  They are,
however, deterministic functions of the values they are given.  The checkpoint
(:class:`~fmi_adjoint.identify.checkpoint.CheckpointLog`) therefore records every
evaluation of every start as it happens (point, cost, gradient or residuals, bit-exact),
and every finished start.  On resume, finished starts are taken from the file, and the
others are run again from their start with their evaluations answered from the record
(no simulation) until the record ends; from there they continue with real evaluations.
The optimizer retraces its path exactly, so the final result equals an uninterrupted run.
A resumed run that asks for another point than the record holds (the model, the data or
fmi-adjoint changed) stops with an error instead of mixing two runs.

The records are authenticated with the user's key (see the checkpoint module), and every
field of every record is validated before the run starts (:func:`check_replay`: kinds,
parameter names, shapes, finite values within the bounds, types and ranges of counts,
message lengths), so that nothing a file holds reaches a result unchecked.  A checkpoint of
another key (another user or machine) or of format version 1 is continued only with
``reevaluate`` (``identify --resume-reevaluate``, :func:`open_untrusted`): then only the
recorded points are used, each is evaluated again with the model, finished starts run
again, and a start whose optimizer leaves the recorded path goes on without it; the result
is that of an uninterrupted run, computed as such.

Clusters
--------
Finished starts are grouped by final cost: sorted by cost, a start joins the cluster of
the previous one when its cost is within :data:`CLUSTER_RTOL` (relative) of the cluster's
lowest.  The best start's cluster is taken as the global minimum found.
"""

from __future__ import annotations

import abc
import collections
import concurrent.futures
import dataclasses
import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import NoReturn, TextIO

import numpy as np

from ..errors import CheckpointError, ConvergenceError, ExecutorError, FmiAdjointError, IdentificationError
from .checkpoint import CheckpointKey, CheckpointLog, Record, StoredRecord, read_untrusted
from .optimize import OPTIMIZERS, IdentificationResult
from .parallel import DistributedProblem
from .problem import Evaluation, IdentificationProblem, gauss_newton_statistics
from .scaling import ParameterScaling
from .strategies import (
    AbstractStrategy,
    AutomaticStrategy,
    ExperimentContinuation,
    SingleShooting,
    StageSummary,
    run_stages,
)

__all__ = ["CLUSTER_RTOL", "AbstractStartPlan", "AllExperiments", "Cluster", "ExperimentContinuation",
           "MultiStartResult", "SampledStrategies", "Start", "StartResult", "Stopped", "run_starts",
           "sobol_starts", "result_warnings", "open_checkpoint", "open_untrusted", "checkpoint_header", "check_replay",
           "NOT_IN_CHECKPOINT", "files_digest"]

#: Starts whose final costs agree to this relative difference are one cluster (one minimum):
#: converged runs into the same minimum agree to ~1e-10 (the optimizers' tolerances).
CLUSTER_RTOL = 1e-6
#: Longest failure message taken back from a checkpoint (ours are a few hundred characters).
_MAX_MESSAGE = 2000
#: Most starts of one run (each is an optimizer thread and a record stream of the checkpoint).
MAX_STARTS = 4096
#: Largest count (iterations, simulations, evaluations of a start) taken from a checkpoint:
#: far above any real run, far below what overflows a report.
_MAX_COUNT = 10**9
#: Most simulations one recorded evaluation may stand for (experiments x finite-difference points).
_MAX_EVALUATION_SIMULATIONS = 10**6
#: How far a recorded point may lie outside the bounds (relative): the scaling round trip
#: of the optimizer's points may move them by an ulp.
_BOUND_SLACK = 1e-9
_SHOWN_ITEMS = 5  # items of a list read from a file shown in a message
_SHOWN_CHARS = 80  # characters of a value read from a file shown in a message
#: The evaluation kinds :class:`_Recorded` writes.
_EVALUATION_KIND = re.compile(r"evaluate:[a-z_]{1,40}:[-+.0-9a-zA-Z]{1,40}|residuals:(True|False)")


class Stopped(KeyboardInterrupt):
    """Raised in optimizer threads when the run is interrupted (Ctrl-C)."""


def sobol_starts(problem: IdentificationProblem, count: int, seed: int = 0, scaling: str = "auto"
                 ) -> list[np.ndarray]:
    """``count`` start points: the problem's start, then a scrambled Sobol sequence in the
    scaled parameter space (see the module docstring)."""
    if count < 1:
        raise IdentificationError(f"--starts {count}: give at least 1 start.")
    if count > MAX_STARTS:
        raise IdentificationError(f"--starts {count}: at most {MAX_STARTS} starts; run several identifications "
                                  "with different --seed for more.")
    if seed < 0:
        raise IdentificationError(f"--seed {seed}: give a whole number >= 0.")
    if count > 1:
        open_ = [n for n, lo, hi in zip(problem.names, problem.lower, problem.upper)
                 if not (np.isfinite(lo) and np.isfinite(hi))]
        if open_:
            raise IdentificationError(
                f"--starts {count} draws start points between the bounds, but {', '.join(open_)} "
                f"{'has' if len(open_) == 1 else 'have'} no finite bounds; give them with --bounds NAME=LO:HI."
            )
    scale = ParameterScaling.create(problem.names, problem.start, problem.lower, problem.upper, scaling)
    starts = [problem.start.copy()]
    if count == 1:
        return starts
    lo_u = np.array([b[0] for b in scale.scaled_bounds()], dtype=float)
    hi_u = np.array([b[1] for b in scale.scaled_bounds()], dtype=float)
    from scipy.stats import qmc  # noqa: PLC0415 (scipy.stats: imported on use, not by the command line's start)

    sampler = qmc.Sobol(len(problem.names), scramble=True, rng=seed)
    draws = sampler.random_base2(int(np.ceil(np.log2(count - 1))) if count > 2 else 0)[: count - 1]
    for point in draws:
        x = scale.to_physical(lo_u + point * (hi_u - lo_u))
        starts.append(np.clip(x, problem.lower, problem.upper))
    return starts


@dataclasses.dataclass(frozen=True)
class Start:
    """A start point and the (concrete) strategy it runs with."""

    point: np.ndarray
    strategy: AbstractStrategy = SingleShooting()

    @property
    def first(self) -> int | None:
        """The experiment fitted alone first (experiment continuation), else None."""
        return self.strategy.first if isinstance(self.strategy, ExperimentContinuation) else None


class AbstractStartPlan(abc.ABC):
    """How start points become starts (a strategy object of :func:`run_starts`)."""

    @abc.abstractmethod
    def starts(self, points: Sequence[np.ndarray], problem: IdentificationProblem) -> list[Start]:
        """The starts of ``points`` on ``problem``."""


class AllExperiments(AbstractStartPlan):
    """Every start fits all experiments at once (single shooting)."""

    def starts(self, points: Sequence[np.ndarray], problem: IdentificationProblem) -> list[Start]:
        return [Start(np.asarray(p, dtype=float)) for p in points]


@dataclasses.dataclass(frozen=True)
class SampledStrategies(AbstractStartPlan):
    """The starts of ``strategy`` (module docstring, "Strategies"): the automatic strategy's
    choice for a single start, its :meth:`~fmi_adjoint.identify.strategies.AutomaticStrategy.cycle`
    over several start points; another strategy's variants at every point."""

    strategy: AbstractStrategy = AutomaticStrategy()

    def starts(self, points: Sequence[np.ndarray], problem: IdentificationProblem) -> list[Start]:
        reason = self.strategy.unavailable(problem)
        if reason is not None:
            raise IdentificationError(f"--strategy {self.strategy.name}: {reason}; use --strategy auto or single.")
        points = [np.asarray(p, dtype=float) for p in points]
        if isinstance(self.strategy, AutomaticStrategy):
            cycle = self.strategy.cycle(problem) if len(points) > 1 else (self.strategy.choose(problem),)
            return [Start(p, cycle[k % len(cycle)]) for k, p in enumerate(points)]
        return [Start(p, v) for p in points for v in self.strategy.variants(problem)]


@dataclasses.dataclass(frozen=True)
class StartResult:
    """One start of a multi-start: its result, or why it failed."""

    index: int
    start: np.ndarray
    result: IdentificationResult | None
    error: str | None = None
    resumed: bool = False
    strategy: AbstractStrategy = SingleShooting()
    #: What each stage of the strategy did (empty for a failed start).
    stages: tuple[StageSummary, ...] = ()

    @property
    def first(self) -> int | None:
        """The experiment fitted alone first (experiment continuation), else None."""
        return self.strategy.first if isinstance(self.strategy, ExperimentContinuation) else None

    def to_json(self) -> dict:
        out: dict = {"start": self.index, "initial": self.start.tolist(), "strategy": self.strategy.name}
        if self.first is not None:
            out["first_experiment"] = self.first
        if len(self.stages) > 1:
            out["stages"] = [s.to_json() for s in self.stages]
        if self.result is None:
            out.update(failed=True, message=self.error)
            return out
        r = self.result
        out.update(failed=False, cost=r.cost, parameters=r.parameters.tolist(), success=r.success,
                   iterations=r.iterations, simulations=r.simulations, message=r.message,
                   active_bounds=list(r.active_bounds), seconds=r.seconds)
        return out


@dataclasses.dataclass(frozen=True)
class Cluster:
    """Starts that ended at the same cost (see the module docstring)."""

    cost: float
    starts: tuple[int, ...]
    parameters: np.ndarray

    def to_json(self) -> dict:
        return {"cost": self.cost, "count": len(self.starts), "starts": list(self.starts),
                "parameters": self.parameters.tolist()}


@dataclasses.dataclass(frozen=True)
class MultiStartResult:
    """All starts, their clusters, and the best result."""

    best: IdentificationResult
    best_start: int
    starts: tuple[StartResult, ...]
    clusters: tuple[Cluster, ...]
    seed: int
    seconds: float

    def warnings(self) -> list[str]:
        """:func:`result_warnings` of the best result, and whether only one start reached it."""
        texts = result_warnings(self.best)
        if len(self.starts) > 1 and self.global_minimum_starts == 1:
            texts.append(f"only 1 of {len(self.starts)} starts reached the best cost: the global minimum may not be "
                         "found yet; run more --starts.")
        return texts

    @property
    def global_minimum_starts(self) -> int:
        """How many starts reached the best cluster."""
        return len(self.clusters[0].starts)

    def to_json(self) -> dict:
        return {
            "starts": len(self.starts), "seed": self.seed, "best_start": self.best_start,
            "best_strategy": self.starts[self.best_start].strategy.name,
            "reached_best_cluster": self.global_minimum_starts,
            "strategies_reaching_best": sorted({self.starts[k].strategy.name for k in self.clusters[0].starts}),
            "failed_starts": [s.index for s in self.starts if s.result is None],
            "clusters": [c.to_json() for c in self.clusters],
            "results": [s.to_json() for s in self.starts],
            "seconds": self.seconds,
        }


def result_warnings(result: IdentificationResult) -> list[str]:
    """Warnings on a (best) fit that the fit itself reports: parameters the outputs do not
    determine.  A parameter on a bound and a cost far above the noise floor are guards of the
    identification (:func:`fmi_adjoint.identify.guards.bound_notices`,
    :func:`~fmi_adjoint.identify.guards.cost_notices`)."""
    warnings = []
    if result.unidentifiable:
        warnings.append(f"{', '.join(result.unidentifiable)}: the outputs do not determine "
                        f"{'it' if len(result.unidentifiable) == 1 else 'them'} (zero or near-singular Fisher "
                        "information): fix such a parameter with --set NAME=VALUE and drop it from --params, or "
                        "measure an output that depends on it (--allow-unidentifiable accepts the fit as it is).")
    return warnings


# -- recording and replaying evaluations -------------------------------------------------
class _Recorded:
    """One start's problem whose evaluations are written to the checkpoint, or answered
    from it on resume (the interface :func:`identify` uses)."""

    def __init__(self, problem: IdentificationProblem, index: int, log: CheckpointLog | None,
                 replay: collections.deque, stop: threading.Event, reevaluate: bool = False,
                 progress: TextIO | None = None, label: str = ""):
        self.problem, self.index, self.log, self.replay, self.stop = problem, index, log, replay, stop
        #: Re-evaluate every recorded point instead of trusting the record (the file is untrusted).
        self.reevaluate, self.progress, self.label = reevaluate, progress, label
        self.names, self.start, self.lower, self.upper = problem.names, problem.start, problem.lower, problem.upper
        self.gradient_method = problem.gradient_method
        self.sequence = 0
        #: Simulations of the evaluations answered from the checkpoint (counted as if run, so
        #: a resumed result reports what the uninterrupted run did).
        self.replayed = 0

    @property
    def simulations(self) -> int:
        return self.problem.simulations + self.replayed

    def _recorded(self, kind: str, x: np.ndarray) -> Record | None:
        if self.stop.is_set():
            raise Stopped
        self.sequence += 1
        if not self.replay:
            return None
        stored = self.replay.popleft()
        record = _decoded(stored)
        if record.meta["kind"] != kind or record.arrays["x"].tobytes() != np.asarray(x, float).tobytes():
            where = f"{record.source}: record {record.number}" if record.source else "the checkpoint"
            if self.reevaluate:
                # Untrusted records only guide: the run goes on by itself from here.
                self.replay.clear()
                if self.progress is not None:
                    self.progress.write(f"{self.label}left the recorded path at evaluation {self.sequence} ({where}); "
                                        "continuing without the checkpoint\n")
                    self.progress.flush()
                return None
            raise CheckpointError(
                f"{where}: start {self.index}, evaluation {self.sequence}: the resumed run asks for another point "
                "than the checkpoint recorded (the model, the data or fmi-adjoint changed since it was written); "
                "start anew without --resume."
            )
        if self.reevaluate:
            return None  # the point is the recorded one; its values are computed again
        self.replayed += int(record.meta["simulations"])
        if record.meta.get("failed"):
            raise ConvergenceError(_recorded_text(record.meta.get("message", "recorded failure")))
        return record

    def _write(self, kind: str, x: np.ndarray, arrays: dict, failed: Exception | None = None,
               simulations: int = 0) -> None:
        if self.log is None:
            return
        meta: dict = {"start": self.index, "sequence": self.sequence, "kind": kind, "simulations": simulations}
        if failed is not None:
            # str() only here: a native engine's message may be worked out by a replay (engines.py).
            meta.update(failed=True, message=str(failed))
        self.log.append("evaluation", meta, {"x": np.asarray(x, dtype=float), **arrays})

    def evaluate(self, x: np.ndarray, method: str = "adjoint", fd_rel_step: float | None = None) -> Evaluation:
        # The problem's own finite-difference step unless one is given (FMU problems use 1e-4).
        kind = f"evaluate:{method}:{fd_rel_step!r}"
        record = self._recorded(kind, x)
        if record is not None:
            return Evaluation(J=float(record.arrays["J"][0]), gradient=record.arrays["g"].copy(), method=method,
                              forward_seconds=0.0, gradient_seconds=0.0, simulations=0)
        before = self.problem.simulations
        try:
            ev = (self.problem.evaluate(x, method) if fd_rel_step is None
                  else self.problem.evaluate(x, method, fd_rel_step))
        except ConvergenceError as exc:
            self._write(kind, x, {}, failed=exc, simulations=self.problem.simulations - before)
            raise
        self._write(kind, x, {"J": np.array([ev.J]), "g": np.asarray(ev.gradient, dtype=float)},
                    simulations=self.problem.simulations - before)
        return ev

    @property
    def has_residuals(self) -> bool:
        return self.problem.has_residuals

    def residuals(self, x: np.ndarray, jacobian: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
        kind = f"residuals:{bool(jacobian)}"
        record = self._recorded(kind, x)
        if record is not None:
            return record.arrays["r"].copy(), (record.arrays["jac"].copy() if jacobian else None)
        before = self.problem.simulations
        try:
            r, jac = self.problem.residuals(x, jacobian)
        except ConvergenceError as exc:
            self._write(kind, x, {}, failed=exc, simulations=self.problem.simulations - before)
            raise
        arrays = {"r": np.asarray(r, dtype=float)}
        if jac is not None:
            arrays["jac"] = np.asarray(jac, dtype=float)
        self._write(kind, x, arrays, simulations=self.problem.simulations - before)
        return r, jac

    def statistics(self, x: np.ndarray) -> dict:
        r, jac = self.residuals(x, jacobian=True)
        assert jac is not None
        return gauss_newton_statistics(r, jac)


_RESULT_ARRAYS = ("initial", "parameters", "cost_history", "gradient_norm_history")
#: Fields stored as numbers in arrays (bit exact, NaN and None allowed), not in the JSON part.
_RESULT_NUMBERS = ("cost_initial", "cost", "seconds", "std_errors", "correlation")


def _result_record(result: IdentificationResult) -> tuple[dict, dict]:
    meta = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)
            if f.name not in _RESULT_ARRAYS + _RESULT_NUMBERS}
    meta["names"] = list(result.names)
    meta["active_bounds"] = list(result.active_bounds)
    arrays = {name: np.asarray(getattr(result, name), dtype=float) for name in _RESULT_ARRAYS}
    arrays["numbers"] = np.array([result.cost_initial, result.cost, result.seconds])
    if result.std_errors is not None:  # None entries (undetermined parameters) as NaN
        arrays["std_errors"] = np.array([np.nan if v is None else v for v in result.std_errors], dtype=float)
    if result.correlation is not None:
        arrays["correlation"] = np.array(result.correlation, dtype=float)
    return meta, arrays


def _result_from_record(record: Record) -> IdentificationResult:
    meta = dict(record.meta)
    meta.pop("start", None)
    meta.pop("stages", None)
    a = record.arrays
    std = a.get("std_errors")
    try:
        return IdentificationResult(
            names=tuple(meta.pop("names")), initial=a["initial"].copy(), parameters=a["parameters"].copy(),
            cost_initial=float(a["numbers"][0]), cost=float(a["numbers"][1]), seconds=float(a["numbers"][2]),
            cost_history=a["cost_history"].tolist(), gradient_norm_history=a["gradient_norm_history"].tolist(),
            std_errors=None if std is None else [None if np.isnan(v) else float(v) for v in std],
            correlation=a["correlation"].tolist() if "correlation" in a else None,
            active_bounds=tuple(meta.pop("active_bounds")), **meta,
        )
    except (KeyError, TypeError, IndexError) as exc:
        raise CheckpointError(
            f"a finished start in the checkpoint cannot be read ({type(exc).__name__}: {exc}); it was written by "
            "another version of fmi-adjoint: start anew with --checkpoint."
        ) from None


# -- validating a checkpoint's records ---------------------------------------------------
_START_META = frozenset(f.name for f in dataclasses.fields(IdentificationResult)
                        if f.name not in _RESULT_ARRAYS + _RESULT_NUMBERS) | {"start"}
_FAILED_START_META = frozenset({"start", "failed", "message"})
_EVALUATION_META = frozenset({"start", "sequence", "kind", "simulations"})
_STAGE_FIELDS = frozenset(f.name for f in dataclasses.fields(StageSummary))
#: Most stages a finished start may record (ours: at most a handful of windows).
_MAX_STAGES = 64
_EVALUATION_ARRAYS = {"evaluate": {"x", "J", "g"}, "residuals:True": {"x", "r", "jac"}, "residuals:False": {"x", "r"}}


def check_replay(replay: Sequence[Record | StoredRecord], problem: IdentificationProblem, count: int, *,
                 reevaluate: bool = False) -> list[tuple[Record | StoredRecord, int]]:
    """Validate every field of every record of a checkpoint before it is used: ``(record,
    start index)`` for each (a :class:`StoredRecord` is decoded for the check and kept as bytes).

    Checked: the kinds; start indices (whole numbers below ``count``, no record of a start
    after its end); evaluation kinds and sequence numbers; points ``x`` of the problem's
    length, finite and within its bounds; costs, gradients, residuals and Jacobians of the
    right shapes and finite; a finished start's parameter names (the problem's), types
    (``success`` a bool, messages bounded str), counts (whole numbers in range), cost
    histories and statistics (finite).  With ``reevaluate``, only what is used is checked
    (kinds, start indices, sequence numbers and points).

    Raises
    ------
    CheckpointError
        One error naming the file, the record, the field and the fix.
    """
    checker = _ReplayChecker(problem, count, reevaluate)
    out = []
    for stored in replay:
        record = _decoded(stored)
        out.append((stored, checker.check(record)))
    return out


class _ReplayChecker:
    def __init__(self, problem: IdentificationProblem, count: int, reevaluate: bool):
        self.names = list(problem.names)
        self.lower = np.asarray(problem.lower, dtype=float)
        self.upper = np.asarray(problem.upper, dtype=float)
        span = np.where(np.isfinite(self.upper - self.lower), self.upper - self.lower, 0.0)
        scale = np.maximum.reduce([np.where(np.isfinite(self.lower), abs(self.lower), 0.0),
                                   np.where(np.isfinite(self.upper), abs(self.upper), 0.0), span])
        self.slack = _BOUND_SLACK * scale
        self.count, self.reevaluate = count, reevaluate
        self.sequence: dict[int, int] = {}
        self.ended: set[int] = set()

    def refuse(self, record: Record, field: str, problem: str) -> NoReturn:
        where = record.source or "the checkpoint"
        if self.reevaluate:
            fix = "this is not a checkpoint fmi-adjoint wrote: start the run again with --checkpoint NEW.ckpt"
        else:
            fix = ("it is authenticated with your key yet not what this fmi-adjoint writes (another version, or a "
                   "program that has your key): start the run again with --checkpoint NEW.ckpt")
        raise CheckpointError(f"{where}: record {record.number} ({_shown(record.kind)}): {field} {problem}; {fix}.")

    def check(self, record: Record) -> int:
        if record.kind not in ("evaluation", "start"):
            self.refuse(record, "the kind", "is not 'evaluation' or 'start'")
        meta, arrays = record.meta, record.arrays
        index = meta.get("start")
        if not _whole(index, 0, self.count - 1):
            self.refuse(record, "the start index", f"{_shown(index)} is not a whole number from 0 to "
                        f"{self.count - 1} (this run has {self.count} starts; resume with the options that wrote it)")
        assert isinstance(index, int)
        if index in self.ended:
            self.refuse(record, "the start index", f"{index} names a start recorded as finished before")
        if record.kind == "start":
            self.ended.add(index)
            if not self.reevaluate:
                self.check_start(record, meta, arrays)
            return index
        if not _EVALUATION_META <= set(meta) <= _EVALUATION_META | {"failed", "message"}:
            self.refuse(record, "the fields", f"{_listed(meta)} are not {sorted(_EVALUATION_META)} (and 'failed', "
                        "'message')")
        sequence = meta["sequence"]
        if not _whole(sequence, 1, _MAX_COUNT) or sequence not in (1, self.sequence.get(index, 0) + 1):
            self.refuse(record, "the sequence number", f"{_shown(sequence)} does not follow "
                        f"{self.sequence.get(index, 0)} of start {index}")
        self.sequence[index] = sequence
        kind = meta["kind"]
        if not isinstance(kind, str) or not _EVALUATION_KIND.fullmatch(kind):
            self.refuse(record, "the evaluation kind", f"{_shown(kind)} is not one fmi-adjoint records")
        failed = "failed" in meta or "message" in meta
        if failed:
            expected = {"x"}
        else:
            expected = _EVALUATION_ARRAYS["evaluate" if kind.startswith("evaluate:") else kind]
        if set(arrays) != expected and not (self.reevaluate and "x" in arrays):
            self.refuse(record, "the arrays", f"{_listed(arrays)} are not {sorted(expected)}")
        self.point(record, "x", arrays["x"])
        if self.reevaluate:
            return index  # nothing else of the record is used
        self.whole(record, "simulations", meta["simulations"], _MAX_EVALUATION_SIMULATIONS)
        if failed:
            if meta.get("failed") is not True:
                self.refuse(record, "'failed'", f"{_shown(meta.get('failed'))} is not true")
            self.text(record, "'message'", meta.get("message"))
            return index
        n = len(self.names)
        if "J" in arrays:
            self.finite(record, "J", arrays["J"], (1,))
            self.finite(record, "g", arrays["g"], (n,))
        else:
            r = arrays["r"]
            if r.ndim != 1 or r.size == 0:
                self.refuse(record, "array 'r'", f"has shape {r.shape}, not (m,) with m >= 1")
            self.finite(record, "r", r, r.shape)
            if "jac" in arrays:
                self.finite(record, "jac", arrays["jac"], (r.size, n))
        return index

    def check_start(self, record: Record, meta: dict, arrays: dict) -> None:
        if "failed" in meta:
            if set(meta) != _FAILED_START_META or meta["failed"] is not True or arrays:
                self.refuse(record, "a failed start", f"holds {_listed(meta)} and arrays {_listed(arrays)}, not "
                            "'start', 'failed': true and 'message' only")
            self.text(record, "'message'", meta["message"])
            return
        if set(meta) - {"stages"} != _START_META:
            self.refuse(record, "the fields", f"{_listed(meta)} are not {sorted(_START_META)} (and 'stages')")
        if "stages" in meta:
            self.stages(record, meta["stages"])
        if meta["names"] != self.names:
            self.refuse(record, "the parameter names", f"{_shown(meta['names'])} are not this run's "
                        f"{_listed(self.names, sort=False)}")
        for field in ("iterations", "simulations", "failed_simulations"):
            self.whole(record, field, meta[field], _MAX_COUNT)
        if type(meta["success"]) is not bool:
            self.refuse(record, "'success'", f"{_shown(meta['success'])} is not true or false")
        self.text(record, "'message'", meta["message"])
        if meta["method"] not in OPTIMIZERS:
            self.refuse(record, "'method'", f"{_shown(meta['method'])} is not one of {', '.join(OPTIMIZERS)}")
        for field in ("active_bounds", "unidentifiable"):
            value = meta[field]
            if (not isinstance(value, list) or len(set(map(str, value))) != len(value)
                    or not all(isinstance(v, str) and v in self.names for v in value)):
                self.refuse(record, f"{field!r}", f"{_shown(value)} is not a list of distinct parameter names")
        required = set(_RESULT_ARRAYS) | {"numbers"}
        if not required <= set(arrays) <= required | {"std_errors", "correlation"}:
            self.refuse(record, "the arrays", f"{_listed(arrays)} are not {sorted(required)} (and 'std_errors', "
                        "'correlation')")
        n = len(self.names)
        self.point(record, "initial", arrays["initial"])
        self.point(record, "parameters", arrays["parameters"])
        for name in ("cost_history", "gradient_norm_history"):
            if arrays[name].ndim != 1:
                self.refuse(record, f"array {name!r}", f"has shape {arrays[name].shape}, not (k,)")
            self.finite(record, name, arrays[name], arrays[name].shape)
        # cost_initial may be NaN: a staged fit whose start values do not simulate over the whole
        # record (run_stages); the final cost and the run time are always finite.
        numbers = arrays["numbers"]
        self.finite(record, "numbers", np.where(np.isnan(numbers) & (np.arange(numbers.size) == 0), 0.0, numbers)
                    if numbers.shape == (3,) else numbers, (3,))
        if arrays["numbers"][2] < 0:
            self.refuse(record, "the run time", f"{_number(arrays['numbers'][2])} s is negative")
        if "std_errors" in arrays:
            std = arrays["std_errors"]
            if std.shape != (n,) or np.any(np.isinf(std)) or np.any(std < 0):
                self.refuse(record, "array 'std_errors'", f"of shape {std.shape} is not {n} values >= 0 (NaN: "
                            "undetermined)")
        if "correlation" in arrays:
            self.finite(record, "correlation", arrays["correlation"], (n, n))

    def stages(self, record: Record, stages: object) -> None:
        """The stage summaries of a finished start (:class:`~fmi_adjoint.identify.strategies.StageSummary`)."""
        if not isinstance(stages, list) or not 1 <= len(stages) <= _MAX_STAGES:
            self.refuse(record, "'stages'", f"{_shown(stages)} is not a list of 1 to {_MAX_STAGES} stages")
        for stage in stages:
            if not isinstance(stage, dict) or set(stage) != _STAGE_FIELDS:
                self.refuse(record, "a stage", f"{_shown(stage)} does not hold exactly {sorted(_STAGE_FIELDS)}")
            self.text(record, "a stage's name", stage["stage"])
            self.whole(record, "iterations", stage["iterations"], _MAX_COUNT)
            self.whole(record, "simulations", stage["simulations"], _MAX_COUNT)
            if type(stage["success"]) is not bool:
                self.refuse(record, "a stage's 'success'", f"{_shown(stage['success'])} is not true or false")
            for field in ("cost_initial", "cost", "seconds"):
                value = stage[field]
                if type(value) is not float or not np.isfinite(value) or (field == "seconds" and value < 0):
                    self.refuse(record, f"a stage's {field!r}", f"{_shown(value)} is not a finite number"
                                + (" >= 0" if field == "seconds" else ""))

    def point(self, record: Record, name: str, x: np.ndarray) -> None:
        self.finite(record, name, x, (len(self.names),))
        outside = (x < self.lower - self.slack) | (x > self.upper + self.slack)
        if np.any(outside):
            k = int(np.argmax(outside))
            self.refuse(record, f"array {name!r}", f"puts {self.names[k]} = {_number(x[k])} outside its bounds "
                        f"[{_number(self.lower[k])}, {_number(self.upper[k])}]")

    def whole(self, record: Record, field: str, value: object, most: int) -> None:
        if not _whole(value, 0, most):
            self.refuse(record, repr(field), f"{_shown(value)} is not a whole number from 0 to {most}")

    def finite(self, record: Record, name: str, value: np.ndarray, shape: tuple[int, ...]) -> None:
        if value.shape != shape:
            self.refuse(record, f"array {name!r}", f"has shape {value.shape}, not {shape}")
        if not np.all(np.isfinite(value)):
            self.refuse(record, f"array {name!r}", "holds NaN or infinite values")

    def text(self, record: Record, field: str, value: object) -> None:
        if not isinstance(value, str) or len(value) > _MAX_MESSAGE:
            self.refuse(record, field, f"{_shown(value)} is not a text of at most {_MAX_MESSAGE} characters")


def _decoded(record: Record | StoredRecord) -> Record:
    return record.decode() if isinstance(record, StoredRecord) else record


def _whole(value: object, lo: int, hi: int) -> bool:
    return type(value) is int and lo <= value <= hi  # not bool, not float (0.9, 1e18)


def _shown(value: object) -> str:
    """A value read from a file, for a message: its repr, cut short (a long list or text
    read from a file must not make a message of megabytes: only its start is formatted)."""
    if isinstance(value, (list, tuple, dict, set)) and len(value) > _SHOWN_ITEMS:
        return _listed(value, sort=False)
    if isinstance(value, str) and len(value) > _SHOWN_CHARS:
        value = value[:_SHOWN_CHARS]  # repr of the start only, then cut
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS - 3] + "..."


def _listed(items: Iterable, sort: bool = True, bare: bool = False) -> str:
    """Names (keys) read from a file, for a message: at most a few, each cut short, and the
    count when some are left out; ``bare``: without brackets and quotes."""
    names = list(items)
    if sort:
        names = sorted(names, key=str)
    cut = [str(n)[:_SHOWN_CHARS] if bare else _shown(n) for n in names[:_SHOWN_ITEMS]]
    shown = ", ".join(cut) + (f", ... ({len(names)} in all)" if len(names) > _SHOWN_ITEMS else "")
    return shown if bare else f"[{shown}]"


def _number(value: float) -> str:
    """A number for a message, as Python prints a float (not numpy's np.float64(...))."""
    return repr(float(value))  # the shortest text that reads back as the same float


#: Options of ``identify`` that do not change the result (where the work runs, where it is
#: written), and the input files, which enter the checkpoint by their content (a moved folder
#: still resumes): left out of a checkpoint's identity.
NOT_IN_CHECKPOINT = frozenset({"workers", "dask", "checkpoint", "resume", "resume_reevaluate", "output", "json",
                               "plot", "report", "verbose", "fmu_timeout", "max_steps", "max_events", "run_timeout",
                               "model", "data", "fmu", "inputs"})


def files_digest(paths: Sequence[str | os.PathLike]) -> str:
    """A digest of the content of ``paths``, in order (their names left out)."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(hashlib.sha256(Path(path).read_bytes()).digest())
    return digest.hexdigest()


def checkpoint_header(content: str, options: Mapping) -> dict:
    """The header of a checkpoint: what a resumed run must match.  ``content``: a digest of
    the inputs' content (model text, tables, data; paths left out, so a moved folder still
    resumes: :meth:`~fmi_adjoint.identify.spec.ProblemSpec.content_digest`,
    :func:`files_digest`); ``options``: the run's options, of which those in
    :data:`NOT_IN_CHECKPOINT` are left out.  fmi-adjoint's code (its fingerprint) and the
    numpy and scipy versions are part of it: another version may take another path."""
    import scipy

    from ..cache import source_fingerprint

    kept = {k: v for k, v in sorted(options.items()) if k not in NOT_IN_CHECKPOINT}
    return {"format": "fmi-adjoint identify", "content": content, "options": kept,
            "versions": {"fmi-adjoint": source_fingerprint(), "numpy": np.__version__, "scipy": scipy.__version__}}


def open_checkpoint(path: str, header: dict, *, resume: bool, key: CheckpointKey | None = None,
                    note: Callable[[str], None] | None = None) -> tuple[CheckpointLog, list[StoredRecord]]:
    """A new checkpoint with ``header``, or (``resume``) the one at ``path`` and its records.

    A checkpoint is resumed only by the run that wrote it: every entry of ``header`` (the
    problem's digest and the options the result depends on) must equal the stored one, and
    its records must be authenticated with ``key`` (default: the user's key).  ``note``, if
    given, receives a progress line now and then while a large checkpoint is read.
    """
    expected = json.loads(json.dumps(header))
    if not resume:
        return CheckpointLog.create(path, expected, key=key), []
    log, stored, records = CheckpointLog.open(path, key=key, note=note)
    differing = _differing(expected, stored)
    if differing:
        log.close()
        if differing == ["versions"]:
            # The same problem and options: only another fmi-adjoint, numpy or scipy wrote
            # it, whose recorded path this one need not take; no command line of this
            # installation matches, but re-evaluating the recorded points does.
            ours, theirs = _mapping(expected.get("versions")), _mapping(stored.get("versions"))
            changed = [str(name) for name in sorted(set(ours) | set(theirs), key=str)
                       if ours.get(name) != theirs.get(name)]
            raise CheckpointError(
                f"{path} was written by another version of {_listed(changed or ['fmi-adjoint'], bare=True)} than "
                f"this one; continue it with --resume-reevaluate {path} (every recorded point is evaluated "
                "again), or start anew with --checkpoint NEW.ckpt."
            )
        raise CheckpointError(
            f"{path} was written by another identification ({_listed(differing, bare=True)} differ); resume it with "
            "the command line that wrote it, or start anew with --checkpoint NEW.ckpt."
        )
    return log, records


def open_untrusted(path: str, header: dict, note: Callable[[str], None] | None = None) -> list[StoredRecord]:
    """The records of the checkpoint ``path`` written with any key or format version, to be
    re-evaluated (``run_starts(..., reevaluate=True)``); the file is only read.  Its header
    must name the same problem and options (the fmi-adjoint, numpy and scipy versions may
    differ: a run that leaves the recorded path goes on without it).  ``note``: as for
    :func:`open_checkpoint`."""
    expected = json.loads(json.dumps(header))
    stored, records = read_untrusted(path, note=note)
    differing = [k for k in _differing(expected, stored) if k != "versions"]
    if differing:
        raise CheckpointError(
            f"{path} was written by another identification ({_listed(differing, bare=True)} differ); continue it "
            "with the command line that wrote it, or start anew with --checkpoint NEW.ckpt."
        )
    return records


def _mapping(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _differing(expected: dict, stored: dict) -> list[str]:
    return sorted(str(k) for k in set(expected) | set(stored) if stored.get(k) != expected.get(k))


# -- the run -----------------------------------------------------------------------------
def run_starts(
    problem: IdentificationProblem,
    starts: Sequence[np.ndarray | Start],
    method: str = "lbfgsb",
    *,
    scaling: str = "auto",
    max_iterations: int = 200,
    seed: int = 0,
    progress: TextIO | None = None,
    statistics: bool = True,
    checkpoint: CheckpointLog | None = None,
    replay: Sequence[Record | StoredRecord] = (),
    threads: int | None = None,
    reevaluate: bool = False,
) -> MultiStartResult:
    """Run :func:`identify` from each of ``starts`` (see the module docstring).

    Parameters
    ----------
    problem : IdentificationProblem
        Possibly a :class:`~fmi_adjoint.identify.parallel.DistributedProblem`.
    starts : sequence of numpy.ndarray or Start
        Start points (physical values), e.g. from :func:`sobol_starts`, or starts of a
        :class:`AbstractStartPlan` (an experiment fitted alone first).  Bare points run with the
        automatic strategy, as on the command line (``--strategy auto``): a list of bare points
        gets the starts of ``SampledStrategies()`` (:meth:`AutomaticStrategy.cycle
        <fmi_adjoint.identify.strategies.AutomaticStrategy.cycle>` over several points), a bare
        point among :class:`Start` objects :meth:`AutomaticStrategy.choose
        <fmi_adjoint.identify.strategies.AutomaticStrategy.choose>`'s strategy.  Single shooting
        only: ``AllExperiments().starts(points, problem)``.
    checkpoint : CheckpointLog, optional
        Where evaluations and finished starts are recorded.
    replay : sequence of Record or StoredRecord
        The records of the checkpoint being resumed (validated by :func:`check_replay`).
    threads : int, optional
        Starts run at once (default: two per worker of a distributed problem's executor,
        else one: the starts run one after another).
    reevaluate : bool
        Do not trust ``replay``: use only its points, evaluate each again, run finished
        starts again (``--resume-reevaluate``).
    """
    started = time.perf_counter()
    plan = _start_plan(problem, starts)
    finished, pending_records = _resumed(replay, problem, plan, reevaluate)
    stop = threading.Event()
    lock = threading.Lock()

    def one(index: int) -> StartResult:
        x0, strategy = plan[index].point, plan[index].strategy
        records = pending_records.pop(index, collections.deque())
        label = f"start {index:3d} " if len(starts) > 1 else ""

        def view(stage: IdentificationProblem, x: np.ndarray, text: str) -> _Recorded:
            # One record stream per start: the stages' evaluations follow each other in it.
            return _Recorded(stage.with_start(x), index, checkpoint, records, stop, reevaluate, progress, text)

        try:
            staged = run_stages(strategy, problem, x0, method, scaling=scaling, max_iterations=max_iterations,
                                progress=progress, statistics=statistics, label=label, view=view)
        except (FmiAdjointError, np.linalg.LinAlgError) as exc:
            if isinstance(exc, (CheckpointError, ExecutorError)):
                # Not the start's fault: the run stops (and can be resumed) instead of
                # recording the start as failed for good.
                raise
            outcome = StartResult(index, x0, None, f"{type(exc).__name__}: {exc}", strategy=strategy)
            meta: dict = {"start": index, "failed": True, "message": outcome.error}
            arrays: dict = {}
        else:
            result = staged.result
            outcome = StartResult(index, x0, result, strategy=strategy, stages=staged.stages)
            meta, arrays = _result_record(result)
            meta["start"] = index
            meta["stages"] = [s.to_json() for s in staged.stages]
        if checkpoint is not None:
            checkpoint.append("start", meta, arrays)
        if progress is not None and len(starts) > 1:
            with lock:
                text = (f"failed: {outcome.error}" if outcome.result is None else
                        f"J={outcome.result.cost:.6e} after {outcome.result.iterations} iterations")
                progress.write(f"start {index:3d} done: {text}\n")
                progress.flush()
        return outcome

    todo = [k for k in range(len(starts)) if k not in finished]
    if threads is not None and threads > 1 and not problem.thread_safe:
        raise IdentificationError("threads > 1 needs a thread-safe problem (a DistributedProblem on an executor): the "
                                  "compiled engines of one process are not re-entrant.")
    count = threads if threads is not None else concurrent_starts(problem)
    finished.update(_run_each(one, todo, count, stop))
    return _outcome(tuple(finished[k] for k in range(len(starts))), seed, started)


def _start_plan(problem: IdentificationProblem, starts: Sequence[np.ndarray | Start]) -> list[Start]:
    """The starts of :func:`run_starts` (bare points get the automatic strategy, see there)."""
    if not any(isinstance(s, Start) for s in starts):
        return SampledStrategies().starts(list(starts), problem)  # type: ignore[arg-type]
    return [s if isinstance(s, Start) else Start(np.asarray(s, dtype=float), AutomaticStrategy().choose(problem))
            for s in starts]


def _resumed(replay: Sequence[Record | StoredRecord], problem: IdentificationProblem, plan: Sequence[Start],
             reevaluate: bool) -> tuple[dict[int, StartResult], dict[int, collections.deque]]:
    """From the (validated) records of a resumed run: the finished starts (none when
    ``reevaluate``), and each unfinished start's recorded evaluations in order."""
    finished: dict[int, StartResult] = {}
    pending: dict[int, collections.deque] = collections.defaultdict(collections.deque)
    for stored, index in check_replay(replay, problem, len(plan), reevaluate=reevaluate):
        if stored.kind == "start":
            if not reevaluate:
                finished[index] = _finished_from_record(_decoded(stored), plan[index])
        else:
            pending[index].append(stored)
    return finished, pending


def _run_each(one: Callable[[int], StartResult], todo: Sequence[int], count: int,
              stop: threading.Event) -> dict[int, StartResult]:
    """``one(k)`` for each start ``k`` of ``todo``: one after another, or in ``count`` threads.
    A failing start (disk full, a lost cluster) stops the run at once (``stop`` tells the other
    threads), not when the starts before it in index order have ended."""
    if count <= 1 or len(todo) <= 1:
        return {k: one(k) for k in todo}
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(count, len(todo)),
                                                 thread_name_prefix="fmi-adjoint-start")
    try:
        futures = {k: pool.submit(one, k) for k in todo}
        done, _ = concurrent.futures.wait(futures.values(), return_when=concurrent.futures.FIRST_EXCEPTION)
        for future in done:
            future.result()
        results = {k: future.result() for k, future in futures.items()}
    except BaseException:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return results


def _outcome(ordered: tuple[StartResult, ...], seed: int, started: float) -> MultiStartResult:
    """The multi-start result of the finished starts: clusters and the best start, or the error
    naming why every start failed."""
    clusters = cluster_starts(ordered)
    if not clusters:
        if len(ordered) == 1:  # the start's own message (it names its fix), without its type name
            kind, _, message = str(ordered[0].error).partition(": ")
            raise IdentificationError(message if kind.isidentifier() and kind.endswith("Error") and message
                                      else str(ordered[0].error))
        raise IdentificationError(
            "every start failed: " + "; ".join(f"start {s.index}: {str(s.error).rstrip('.')}" for s in ordered[:3])
            + ("" if len(ordered) <= 3 else "; ...") + ". Narrow the bounds or check the model at those points."
        )
    best_index = clusters[0].starts[0]
    best = ordered[best_index].result
    assert best is not None
    return MultiStartResult(best, best_index, ordered, clusters, seed, time.perf_counter() - started)


def concurrent_starts(problem: object) -> int:
    """How many starts run at once by default: two per worker of a distributed problem's
    executor (each start waits for its tasks half of the time), else one.  A type test, not a
    probe: only a :class:`~fmi_adjoint.identify.parallel.DistributedProblem` has workers
    (model-file, FMU and test problems run their starts one after another)."""
    workers = problem.executor.workers if isinstance(problem, DistributedProblem) else 1
    return 2 * workers if workers > 1 else 1


def _recorded_text(value: object) -> str:
    """A message read back from a checkpoint file (data, not trusted): as text, capped at the
    length our own messages never reach, so a hostile file cannot flood a report."""
    return str(value)[:_MAX_MESSAGE]


def _finished_from_record(record: Record, start: Start) -> StartResult:
    index = int(record.meta["start"])
    if record.meta.get("failed"):
        return StartResult(index, start.point, None, _recorded_text(record.meta.get("message")), resumed=True,
                           strategy=start.strategy)
    stages = tuple(StageSummary(**s) for s in record.meta.get("stages", ()))
    return StartResult(index, start.point, _result_from_record(record), resumed=True, strategy=start.strategy,
                       stages=stages)


def cluster_starts(starts: Sequence[StartResult]) -> tuple[Cluster, ...]:
    """Clusters of the finished starts by final cost, the lowest first (ties: lower index)."""
    done = sorted((s for s in starts if s.result is not None),
                  key=lambda s: (not np.isfinite(s.result.cost), s.result.cost, s.index))  # type: ignore
    clusters: list[list[StartResult]] = []
    for s in done:
        assert s.result is not None
        if clusters:
            low = clusters[-1][0].result.cost  # type: ignore[union-attr]
            if s.result.cost - low <= CLUSTER_RTOL * max(abs(low), 1e-300):
                clusters[-1].append(s)
                continue
        clusters.append([s])
    return tuple(Cluster(c[0].result.cost, tuple(s.index for s in c), c[0].result.parameters.copy())  # type: ignore
                 for c in clusters)
