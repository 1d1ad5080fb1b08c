"""Multi-start runs, their clusters and failures, and checkpoints that resume to the same
result (issue 14), on a two-parameter least-squares problem with two minima whose every
evaluation is counted: fast, and exact to the bit."""

from __future__ import annotations

import copy
import threading

import numpy as np
import pytest

from fmi_adjoint.errors import CheckpointError, ConvergenceError, IdentificationError
from fmi_adjoint.identify import Evaluation
from fmi_adjoint.identify.checkpoint import CheckpointLog
from fmi_adjoint.identify.guards import bound_notices, cost_notices
from fmi_adjoint.identify.multistart import (
    CLUSTER_RTOL,
    open_checkpoint,
    result_warnings,
    run_starts,
    sobol_starts,
)
from fmi_adjoint.identify.problem import gauss_newton_statistics
from tolerances import NOISE_FREE_RECOVERY


class TwoMinima:
    """``r(x) = [(x0 - 1)(x0 + 2), 0.3 (x0 + 2), x1 - 0.5]``: the global minimum J = 0 at
    x = (-2, 0.5) and a local one near x0 = 1 with J ~ 0.4; simulation "fails" (Newton
    divergence) for x0 > ``fail_above``.  Counts its evaluations in ``calls`` (shared by its
    copies) and raises KeyboardInterrupt at evaluation ``interrupt_at``."""

    names = ("x0", "x1")
    gradient_method = "adjoint"
    thread_safe = True  # its counters are under a lock

    def __init__(self, start=(0.0, 0.0), fail_above: float = 2.5, interrupt_at: int | None = None, shift=0.0):
        self.start = np.array(start, dtype=float)
        self.lower = np.array([-3.0, -1.0])
        self.upper = np.array([3.0, 2.0])
        self.fail_above = fail_above
        self.interrupt_at = interrupt_at
        self.shift = shift
        self.calls = [0]
        self.lock = threading.Lock()
        self.simulations = 0

    def with_start(self, start):
        other = copy.copy(self)
        other.start = np.array(start, dtype=float)
        other.simulations = 0
        return other

    def _count(self, x):
        with self.lock:
            self.calls[0] += 1
            if self.interrupt_at is not None and self.calls[0] >= self.interrupt_at:
                raise KeyboardInterrupt
        self.simulations += 1
        if x[0] > self.fail_above:
            raise ConvergenceError(f"Newton iteration diverged at x0 = {x[0]:.3g}")

    def residuals(self, x, jacobian=True):
        self._count(x)
        x0, x1 = x
        r = np.array([(x0 - 1) * (x0 + 2), 0.3 * (x0 + 2), x1 - 0.5 + self.shift])
        jac = np.array([[2 * x0 + 1, 0.0], [0.3, 0.0], [0.0, 1.0]])
        return r, (jac if jacobian else None)

    def evaluate(self, x, method="adjoint", fd_rel_step=1e-3):
        r, jac = self.residuals(np.asarray(x, dtype=float))
        return Evaluation(J=0.5 * float(r @ r), gradient=jac.T @ r, method=method, forward_seconds=0.0,
                          gradient_seconds=0.0, simulations=1)

    def statistics(self, x):
        return gauss_newton_statistics(*self.residuals(x))


STARTS = [np.array([0.0, 0.0]), np.array([1.5, 1.0]), np.array([-1.8, -0.5]), np.array([2.8, 0.2]),
          np.array([0.5, 1.5])]


def _same(a, b):
    """Two multi-start results equal to the bit (timings aside)."""
    assert a.best_start == b.best_start
    for sa, sb in zip(a.starts, b.starts):
        assert (sa.result is None) == (sb.result is None)
        assert sa.error == sb.error
        if sa.result is not None:
            assert sa.result.parameters.tobytes() == sb.result.parameters.tobytes()
            assert sa.result.cost == sb.result.cost
            assert sa.result.cost_history == sb.result.cost_history
            assert sa.result.iterations == sb.result.iterations
            # Evaluations answered from a checkpoint count the simulations they stood for.
            assert sa.result.simulations == sb.result.simulations


@pytest.mark.parametrize("method", ["lbfgsb", "least_squares"])
def test_starts_find_both_minima_cluster_them_and_report_a_failed_start(method):
    outcome = run_starts(TwoMinima(), STARTS, method, progress=None)
    failed = [s for s in outcome.starts if s.result is None]
    assert [s.index for s in failed] == [3]  # x0 = 2.8 cannot be simulated: reported, the others went on
    assert "Newton iteration diverged" in failed[0].error
    assert len(outcome.clusters) == 2
    best, local = outcome.clusters
    assert best.cost <= NOISE_FREE_RECOVERY**2  # J = 0 at the exact minimum
    np.testing.assert_allclose(best.parameters, [-2.0, 0.5], atol=NOISE_FREE_RECOVERY)
    assert local.cost > 0.1
    assert sorted(best.starts + local.starts) == [0, 1, 2, 4]
    assert outcome.best.cost == best.cost and outcome.best_start == best.starts[0]
    assert outcome.global_minimum_starts == len(best.starts)
    summary = outcome.to_json()
    assert summary["failed_starts"] == [3] and summary["reached_best_cluster"] == len(best.starts)
    for cluster in outcome.clusters:  # every member lies within CLUSTER_RTOL of its cluster's cost
        for k in cluster.starts:
            assert outcome.starts[k].result.cost - cluster.cost <= CLUSTER_RTOL * max(cluster.cost, 1e-300)


def test_every_start_failing_is_one_error_naming_the_starts():
    with pytest.raises(IdentificationError, match="every start failed: start 0: ConvergenceError"):
        run_starts(TwoMinima(fail_above=-10.0), STARTS[:2], "lbfgsb", progress=None)


def test_threads_give_the_serial_result_bit_for_bit():
    serial = run_starts(TwoMinima(), STARTS, "least_squares", progress=None)
    threaded = run_starts(TwoMinima(), STARTS, "least_squares", progress=None, threads=4)
    _same(serial, threaded)


@pytest.mark.parametrize("method", ["lbfgsb", "least_squares"])
@pytest.mark.parametrize("threads", [1, 3])
def test_an_interrupted_run_resumes_to_the_uninterrupted_result(tmp_path, method, threads):
    reference_problem = TwoMinima()
    reference = run_starts(reference_problem, STARTS, method, progress=None)
    total = reference_problem.calls[0]
    path = tmp_path / "run.ckpt"
    header = {"problem": "two minima", "method": method}
    log, replay = open_checkpoint(str(path), header, resume=False)
    assert replay == []
    with pytest.raises(KeyboardInterrupt):
        run_starts(TwoMinima(interrupt_at=total // 2), STARTS, method, progress=None, checkpoint=log, threads=threads)
    log.close()
    log, replay = open_checkpoint(str(path), header, resume=True)
    recorded = sum(1 for r in replay if r.kind == "evaluation")
    assert 0 < recorded < total
    resumed_problem = TwoMinima()
    with log:
        resumed = run_starts(resumed_problem, STARTS, method, progress=None, checkpoint=log, replay=replay,
                             threads=threads)
    _same(reference, resumed)
    # The recorded evaluations were answered from the file: only the rest was computed.  Finished
    # starts were not run at all, so at most the remaining evaluations were made.
    assert resumed_problem.calls[0] <= total - recorded + threads
    # Starts finished before the interruption are taken from the file, not run again.
    finished_before = sorted(int(r.meta["start"]) for r in replay if r.kind == "start")
    assert [s.index for s in resumed.starts if s.resumed] == finished_before
    # A second resume of the completed file computes nothing and gives the same result again.
    log, replay = open_checkpoint(str(path), header, resume=True)
    again_problem = TwoMinima()
    with log:
        again = run_starts(again_problem, STARTS, method, progress=None, checkpoint=log, replay=replay)
    assert again_problem.calls[0] == 0
    _same(reference, again)


def test_a_checkpoint_of_another_run_is_refused(tmp_path):
    path = str(tmp_path / "run.ckpt")
    log, _ = open_checkpoint(path, {"content": "abc", "options": {"starts": 4}}, resume=False)
    log.close()
    with pytest.raises(CheckpointError, match=r"another identification \(options differ\).*--checkpoint NEW.ckpt"):
        open_checkpoint(path, {"content": "abc", "options": {"starts": 8}}, resume=True)
    with pytest.raises(CheckpointError, match="already exists; resume it with --resume"):
        open_checkpoint(path, {"content": "abc"}, resume=False)


def test_a_resumed_run_that_asks_for_other_points_stops(tmp_path):
    path = str(tmp_path / "run.ckpt")
    log, _ = open_checkpoint(path, {"p": 1}, resume=False)
    with log:
        run_starts(TwoMinima(), STARTS[:2], "lbfgsb", progress=None, checkpoint=log)
    log, replay = open_checkpoint(path, {"p": 1}, resume=True)
    replay = [r for r in replay if r.kind != "start"]  # force re-running the starts
    with log, pytest.raises(CheckpointError, match="asks for another point than the checkpoint recorded"):
        run_starts(TwoMinima(start=(0.1, 0.0)), [np.array([0.1, 0.0]), STARTS[1]], "lbfgsb", progress=None,
                   replay=replay)


def test_sobol_starts_lie_in_the_bounds_and_depend_only_on_the_seed():
    problem = TwoMinima(start=(0.25, 0.75))
    starts = sobol_starts(problem, 9, seed=3)
    assert len(starts) == 9
    assert starts[0].tobytes() == problem.start.tobytes()  # start 0: the given start values
    for x in starts:
        assert np.all(x >= problem.lower) and np.all(x <= problem.upper)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(starts, sobol_starts(problem, 9, seed=3)))
    assert starts[1].tobytes() != sobol_starts(problem, 9, seed=4)[1].tobytes()
    assert len({x.tobytes() for x in starts}) == 9
    # Spread: the Sobol points cover every quarter of each interval.
    for k in range(2):
        u = (np.array(starts[1:])[:, k] - problem.lower[k]) / (problem.upper[k] - problem.lower[k])
        assert set(np.floor(4 * u).astype(int)) == {0, 1, 2, 3}


def test_sobol_starts_need_finite_bounds():
    problem = TwoMinima()
    problem.upper = np.array([np.inf, 2.0])
    assert len(sobol_starts(problem, 1)) == 1  # one start needs no bounds
    with pytest.raises(IdentificationError, match=r"x0 has no finite bounds; give them with --bounds NAME=LO:HI"):
        sobol_starts(problem, 4)
    with pytest.raises(IdentificationError, match="--starts 0: give at least 1 start"):
        sobol_starts(problem, 0)


def test_warnings_name_a_bound_and_a_cost_far_above_the_noise_floor():
    """The guards of a fit (fmi_adjoint.identify.guards) on the best result of the starts."""
    outcome = run_starts(TwoMinima(shift=5.0), STARTS[:1], "least_squares", progress=None)
    result = outcome.best  # x1 wants 0.5 - 5 = -4.5, below its bound -1
    assert result.active_bounds == ("x1",)
    bounds = [n.text for n in bound_notices(TwoMinima(shift=5.0), result)]
    assert len(bounds) == 1 and "x1 ended on a bound" in bounds[0] and "its lower bound -1" in bounds[0], bounds
    far = cost_notices(result, 0.01)
    assert len(far) == 1 and "times the noise floor" in far[0].text and "try --starts" in far[0].text
    assert cost_notices(result, result.cost) == () and cost_notices(result, None) == ()
    assert result_warnings(result) == []  # neither is a warning of the fit itself any more


def test_checkpoint_log_holds_every_evaluation_of_every_start(tmp_path):
    path = str(tmp_path / "run.ckpt")
    problem = TwoMinima()
    with CheckpointLog.create(path, {"p": 1}) as log:
        outcome = run_starts(problem, STARTS, "least_squares", progress=None, checkpoint=log)
    log, header, records = CheckpointLog.resume(path)
    log.close()
    assert header == {"p": 1}
    evaluations = [r for r in records if r.kind == "evaluation"]
    assert len(evaluations) == problem.calls[0]
    assert sorted(int(r.meta["start"]) for r in records if r.kind == "start") == list(range(len(STARTS)))
    failed = [r for r in evaluations if r.meta.get("failed")]
    assert failed and all(int(r.meta["start"]) == 3 for r in failed)
    assert outcome.starts[3].result is None


def test_a_pickled_model_source_leaves_its_parsed_model_behind():
    """Workers get the text and parse it; the parsed model stays in the process that read the file."""
    import pickle

    from fmi_adjoint.examples import example_path
    from fmi_adjoint.model_file import ModelSource

    source = ModelSource.from_path(example_path("sdof"))
    assert source.load() is source.load()  # parsed once, by from_path
    copy_ = pickle.loads(pickle.dumps(source))
    assert copy_ == source and copy_._parsed is None
    assert copy_.load() is not source.load() and copy_.load().name == source.load().name
