"""The low-level element route: numeric force, Jacobians and C code supplied by hand are
verified by the element check and work in models like symbolic elements."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np
import pytest

from fmi_adjoint import (
    Coordinate,
    Experiment,
    IdentificationProblem,
    LeastSquaresCost,
    Model,
    ModelError,
    Output,
    Parameter,
    SimulationSettings,
    compile_model,
    simulate,
)
from fmi_adjoint.elementcheck import check_element, find_c_compiler
from fmi_adjoint.forces import ElementParameter, PolynomialSpringDamper
from fmi_adjoint.forces.numeric import AbstractNumericElement
from tolerances import ADJOINT_VS_FORWARD, EXACT, GRADIENT_VS_FD

C_SOURCE = """
#include <math.h>
void {prefix}_forces(const double *q, const double *v, const double *p, double *f)
{{
    const double s = q[0] - q[1], w = v[0] - v[1];
    const double g = p[0]*s + p[1]*s*s*s + p[2]*w;
    f[0] = -g; f[1] = g;
}}
void {prefix}_jacobian(const double *q, const double *v, const double *p,
                       double *dfdq, double *dfdv, double *dfdp)
{{
    const double s = q[0] - q[1], w = v[0] - v[1];
    const double k = p[0] + 3.0*p[1]*s*s{jac_error};
    dfdq[0] = -k; dfdq[1] = k; dfdq[2] = k; dfdq[3] = -k;
    dfdv[0] = -p[2]; dfdv[1] = p[2]; dfdv[2] = p[2]; dfdv[3] = -p[2];
    dfdp[0] = -s; dfdp[1] = -s*s*s; dfdp[2] = -w;
    dfdp[3] = s; dfdp[4] = s*s*s; dfdp[5] = w;
}}
"""


@dataclasses.dataclass(frozen=True)
class NumericCubicSpring(AbstractNumericElement):
    """f = k1 s + k3 s^3 + d s_dot between two coordinates, coded by hand."""

    type_name: ClassVar[str] = "numeric_cubic_spring"
    parameters: ClassVar[tuple[ElementParameter, ...]] = (
        ElementParameter("k1", "N/m", 100.0, (0.0, 1e4)),
        ElementParameter("k3", "N/m^3", 50.0, (0.0, 1e4)),
        ElementParameter("d", "Ns/m", 2.0, (0.0, 100.0)),
    )
    ends: ClassVar[tuple[int, ...]] = (2,)
    k1: float | str | None = None
    k3: float | str | None = None
    d: float | str | None = None
    jacobian_error: ClassVar[float] = 0.0
    c_error: ClassVar[str] = ""

    def evaluate(self, q, v, p):
        s, w = q[..., 0] - q[..., 1], v[..., 0] - v[..., 1]
        g = p[..., 0] * s + p[..., 1] * s**3 + p[..., 2] * w
        return np.stack([-g, g], axis=-1)

    def jacobians(self, q, v, p):
        s, w = q[..., 0] - q[..., 1], v[..., 0] - v[..., 1]
        k = (p[..., 0] + 3 * p[..., 1] * s**2) * (1 + self.jacobian_error)
        one = np.array([[-1.0, 1.0], [1.0, -1.0]])
        dfdq = k[..., None, None] * one
        dfdv = p[..., 2][..., None, None] * one
        dfdp = np.stack([np.stack([-s, -(s**3), -w], -1), np.stack([s, s**3, w], -1)], -2)
        return dfdq, dfdv, dfdp

    def c_source(self, prefix):
        return C_SOURCE.format(prefix=prefix, jac_error=self.c_error)


@dataclasses.dataclass(frozen=True)
class WrongJacobian(NumericCubicSpring):
    jacobian_error: ClassVar[float] = 1e-4  # relative; the check resolves 1e-6


@dataclasses.dataclass(frozen=True)
class WrongC(NumericCubicSpring):
    c_error: ClassVar[str] = " + 1e-9"


@dataclasses.dataclass(frozen=True)
class NoCCodeSpring(NumericCubicSpring):
    """The same law without C code: it runs in-process but cannot be exported."""

    type_name: ClassVar[str] = "numeric_cubic_spring_no_c"

    def c_source(self, prefix):
        raise NotImplementedError("no C code")


@pytest.mark.skipif(find_c_compiler() is None, reason="the element check compiles C code")
def test_a_correct_numeric_element_passes_every_check():
    report = check_element(NumericCubicSpring, seed=2)
    assert report.passed, [r.detail for r in report.results if not r.passed]


def test_a_wrong_jacobian_is_detected():
    report = check_element(WrongJacobian, seed=2, compiler=None)
    jac = next(r for r in report.results if r.name == "jacobians")
    assert not jac.passed


@pytest.mark.skipif(find_c_compiler() is None, reason="the element check compiles C code")
def test_wrong_c_code_is_detected():
    report = check_element(WrongC, seed=2)
    c_code = next(r for r in report.results if r.name == "c_code")
    assert not c_code.passed


def model_with(element, massless=False) -> Model:
    return Model(
        name="numeric",
        coordinates=(Coordinate("x", mass=0.0 if massless else "m", initial_position=0.02),
                     Coordinate("base", mass=5.0)),
        parameters=(Parameter("m", 1.5), Parameter("k1", 400.0), Parameter("k3", 2e5), Parameter("d", 1.5)),
        forces=(element, PolynomialSpringDamper("mount", coordinates=("base",), k1=1e4, k2=0, k3=0, d1=20.0,
                                                d2=0, d3=0, free_length=0)),
        outputs=(Output("x", "x"), Output("acc", "der2(x)")),
        simulation=SimulationSettings(t_end=1.0, step=1e-3, alpha=-0.05),
    )


def test_numeric_and_symbolic_laws_give_the_same_trajectory_and_gradient():
    numeric = compile_model(model_with(NumericCubicSpring("spring", coordinates=("x", "base"), k1="k1", k3="k3",
                                                          d="d")))
    symbolic = compile_model(model_with(PolynomialSpringDamper("spring", coordinates=("x", "base"), k1="k1", k2=0,
                                                               k3="k3", d1="d", d2=0, d3=0, free_length=0)))
    a, b = simulate(numeric), simulate(symbolic)
    assert np.allclose(a.q, b.q, rtol=EXACT, atol=EXACT * 0.02)
    truth = simulate(numeric, numeric.parameter_vector({"k1": 500.0, "k3": 1e5}))
    cost = LeastSquaresCost(truth.t[::4], truth.outputs()[::4], ("x", "acc"), scales=[0.01, 10.0])
    problem = IdentificationProblem([Experiment(numeric, cost)], ["k1", "k3", "d", "m"])
    adjoint = problem.evaluate(problem.start, "adjoint").gradient
    forward = problem.evaluate(problem.start, "forward").gradient
    fd = problem.finite_differences(problem.start)
    assert np.allclose(adjoint, forward, rtol=ADJOINT_VS_FORWARD, atol=0)
    assert np.allclose(adjoint, fd, rtol=GRADIENT_VS_FD, atol=0)


def test_numeric_element_on_a_massless_free_node_is_refused_clearly():
    element = NumericCubicSpring("spring", coordinates=("x", "base"), k1="k1", k3="k3", d="d")
    with pytest.raises(ModelError, match="first derivatives"):
        compile_model(model_with(element, massless=True))
