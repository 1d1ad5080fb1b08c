"""The gradient paths of an FMU problem as values (issue 29): they run their problem only through
:class:`~fmi_adjoint.fmu.gradients.Simulations`, never change it, and say why they have no
derivatives (:class:`~fmi_adjoint.fmu.gradients.Unavailable`) instead of calling back into it
(the problem decides to continue with differences: ``FmuProblem.path_outputs``, exercised on
the stair FMU in test_fmu_model_exchange.py).  No FMU here: a fake problem whose outputs are
quadratic in the parameters, so that the derivative is known in closed form."""

from __future__ import annotations

import numpy as np
from tolerances import EXACT, FMU_GRADIENT_VS_FD

from fmi_adjoint.fmu.gradients import DifferencePath, SensitivityPath, Unavailable
from fmi_adjoint.fmu.simulation import RunOutputs

X = np.array([0.3, -1.2, 2.0])


class FakeSimulations:
    """Two experiments, 4 samples of 2 channels each: ``Y_e(x) = A_e x + |x|^2 / 2`` and its exact
    ``dY_e/dx = A_e + x``.  Central differences of a quadratic are exact up to round-off.  Only
    the members of the Simulations protocol exist: any other call back into it fails."""

    def __init__(self, info=None):
        rng = np.random.default_rng(29)
        self.experiments = ("first", "second")
        self.names = ("a", "b", "c")
        self.nominal = np.ones(3)
        self.lower, self.upper = np.full(3, -10.0), np.full(3, 10.0)
        self.slopes = {exp: rng.standard_normal((4, 2, 3)) for exp in self.experiments}
        self.info = dict(info or {})
        self.calls: list[tuple] = []

    def outputs(self, exp, x):
        return np.einsum("scp,p->sc", self.slopes[exp], x) + 0.5 * float(x @ x)

    def jacobian(self, exp, x):
        return self.slopes[exp] + x[None, None, :]

    def run(self, exp, x, *, sensitivity=None):
        self.calls.append(("run", exp, sensitivity))
        dY = self.jacobian(exp, x) if sensitivity is not None else None
        return RunOutputs(Y=self.outputs(exp, x), dY=dY, nodes=np.array([0.0, 0.5, 1.0]), info=dict(self.info))

    def run_points(self, points, nodes=None):
        self.calls.append(("points", len(points), nodes))
        return [[RunOutputs(Y=self.outputs(exp, p)) for exp in self.experiments] for p in points]


def test_difference_path_differentiates_through_the_batch_runs():
    fake = FakeSimulations()
    runs = DifferencePath().outputs(fake, X)
    assert len(runs) == 2
    for exp, run in zip(fake.experiments, runs):
        assert np.array_equal(run.Y, fake.outputs(exp, X))
        exact = fake.jacobian(exp, X)
        assert np.max(np.abs(run.dY - exact)) <= FMU_GRADIENT_VS_FD * np.max(np.abs(exact))
    # One nominal run per experiment, then one parallel batch of the 2 x 3 stencil points that
    # replays each experiment's nominal nodes.
    assert [c[0] for c in fake.calls] == ["run", "run", "points"]
    assert fake.calls[2][1] == 6 and [list(n) for n in fake.calls[2][2]] == [[0.0, 0.5, 1.0]] * 2


def test_sensitivity_path_returns_the_runs_sensitivities():
    fake = FakeSimulations(info={"columns": ["fmu column", "replays", "replays"]})
    path = SensitivityPath(fake.names, trust_columns=True)
    runs = path.outputs(fake, X)
    assert not isinstance(runs, Unavailable)
    for exp, run in zip(fake.experiments, runs):
        assert np.max(np.abs(run.dY - fake.jacobian(exp, X))) <= EXACT
    assert [c[0] for c in fake.calls] == ["run", "run"] and all(c[2] is not None for c in fake.calls)
    assert path.columns == {"a": "fmu column", "b": "replays", "c": "replays"}


def test_sensitivity_path_says_why_instead_of_falling_back():
    """The old path called ``problem.fall_back_to_differences``, which swapped the problem's path
    and recursed; now the reason comes back as a value and nothing else runs."""
    fake = FakeSimulations(info={"sensitivities_unavailable": "the parameter 'period' moves a time event"})
    found = SensitivityPath(fake.names, trust_columns=False).outputs(fake, X)
    assert found == Unavailable("the parameter 'period' moves a time event")
    assert [c[0] for c in fake.calls] == ["run", "run"]  # no differences taken behind the problem's back
