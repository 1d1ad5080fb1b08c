"""Messages that name the cause and the fix (issue 32, part 5; optimizer stops of part 6).

* dependent or over-fixed constraints named by a rank-revealing QR of ``C_q``, at the
  initialization and mid-run, by both engines;
* model-file errors of an element at the line of that element's ``[[section]]`` header;
* the Newton-divergence advice of the scheme in use (HHT: ``--alpha``; generalized-alpha:
  ``--rho-inf``);
* scipy's stops (``ABNORMAL: ``, iteration and evaluation limits) translated into a cause
  and a fix, scipy's words kept as ``optimizer_message``.

Each through the command line where the command line can reach it: exit code 2 and one
``fmi-adjoint: error:`` line (an optimizer stop: exit code 1 and the result file).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from fmi_adjoint.cli.main import main
from fmi_adjoint.errors import ConvergenceError
from fmi_adjoint.identify.optimize import identify
from fmi_adjoint.identify.problem import Evaluation
from fmi_adjoint.integrate.dependence import DEPENDENCE_RTOL, dependent_rows
from fmi_adjoint.integrate.schemes import HHT, GeneralizedAlpha
from fmi_adjoint.toolchain import c_compiler

from tolerances import EXACT
from test_bad_input import BASE_TOML

PREFIX = "fmi-adjoint: error: "
ENGINES = ["python", pytest.param("native", marks=pytest.mark.skipif(c_compiler() is None,
                                                                    reason="no C compiler"))]

_HEAD = """\
[model]
name = "{name}"

[simulation]
t_end = 0.1
step = 0.01

[parameters]
m = 1.0
k = 10.0

[[coordinates]]
name = "x1"
mass = "m"
initial_position = 0.1
{fixed}
[[coordinates]]
name = "x2"
mass = "m"
{fixed}
[[coordinates]]
name = "x3"
mass = "m"
{fixed}
[[forces]]
type = "linear_spring_damper"
name = "s1"
coordinates = ["x1"]
stiffness = "k"
damping = 0.1
"""


def _constraint(name: str, expression: str) -> str:
    return f'\n[[constraints]]\nname = "{name}"\nexpression = "{expression}"\n'


_OUTPUT = '\n[[outputs]]\nname = "y1"\nexpression = "x1"\n'

#: x1 = x2 = x3 written three times: any one is a combination of the other two.
REDUNDANT = (_HEAD.format(name="redundant", fixed="")
             + _constraint("c12", "x1 - x2") + _constraint("c23", "x2 - x3") + _constraint("c13", "x1 - x3") + _OUTPUT)
#: x2 and x3 held by fixed_position: the constraint between them cannot be met by moving x1.
OVER_FIXED = (_HEAD.format(name="overfixed", fixed="").replace('name = "x2"\nmass = "m"\n',
                                                                'name = "x2"\nmass = "m"\nfixed_position = true\n')
              .replace('name = "x3"\nmass = "m"\n', 'name = "x3"\nmass = "m"\nfixed_position = true\n')
              + _constraint("c12", "x1 - x2") + _constraint("c23", "x2 - x3") + _OUTPUT)
#: A constraint holding x3 at 0 and a prescribed motion of x3: the same Jacobian row.
DRIVEN_TWICE = (_HEAD.format(name="driven", fixed="") + _constraint("hold", "x3")
                + '\n[[prescribed]]\ncoordinate = "x3"\nexpression = "sin(t)"\n' + _OUTPUT)
#: The latch constraint (x - |x|) y is x y for x < 0 and identically zero for x > 0: its
#: Jacobian row vanishes when the prescribed x crosses 0 at t = 0.55 s, in the step to t = 0.6 s.
LATCH = """\
[model]
name = "latch"

[simulation]
t_end = 1.0
step = 0.1

[parameters]
m = 1.0
k = 10.0

[[coordinates]]
name = "x"
mass = "m"
initial_position = -0.55

[[coordinates]]
name = "y"
mass = "m"

[[forces]]
type = "linear_spring_damper"
name = "s"
coordinates = ["y"]
stiffness = "k"
damping = 0.1

[[constraints]]
name = "latch"
expression = "(x - abs(x))*y"

[[prescribed]]
coordinate = "x"
expression = "t - 0.55"

[[outputs]]
name = "y"
expression = "y"
"""

#: A force growing like exp(1000 x) at a coarse step: Newton cannot converge in step 1
#: (tests/test_bad_input.py, DIVERGING_TOML).
DIVERGING = """\
[model]
name = "stiff_exp"

[simulation]
t_end = 1.0
step = 0.1
{integrator}
[parameters]
m = 1.0
k3 = 1e3
F = 1.0

[[coordinates]]
name = "x"
mass = "m"

[[forces]]
type = "load"
name = "hard_push"
coordinate = "x"
expression = "F*exp(k3*x)"

[[outputs]]
name = "x"
expression = "x"
"""


def _run(folder, monkeypatch, capsys, argv) -> tuple[int, str, str]:
    monkeypatch.chdir(folder)
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _error_line(code: int, err: str) -> str:
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(PREFIX), err
    return lines[0]


def _simulate_error(tmp_path, monkeypatch, capsys, text: str, engine: str, *extra: str) -> str:
    (tmp_path / "model.toml").write_text(text)
    code, _, err = _run(tmp_path, monkeypatch, capsys,
                        ["simulate", "model.toml", "--engine", engine, "-o", "out.csv", *extra])
    line = _error_line(code, err)
    assert not (tmp_path / "out.csv").exists()
    return line


# -- dependent constraints ------------------------------------------------------------------
def test_dependent_rows_agree_with_the_svd_rank():
    """The QR rank and the named combinations against numpy's SVD rank (an independent method)."""
    rng = np.random.default_rng(7)
    r0, r1, r3 = rng.normal(size=(3, 6))
    A = np.array([r0, r1, 2.0 * r0 - 0.5 * r1, r3, np.zeros(6)])
    rank, dependent = dependent_rows(A)
    assert rank == np.linalg.matrix_rank(A) == 3
    assert len(dependent) == 2 and dependent[-1] == (4, ())  # the zero row combines nothing
    row, partners = dependent[0]
    # The dependent row is the combination of exactly the rows it was built from.
    assert {row, *partners} == {0, 1, 2}
    coefficients, *_ = np.linalg.lstsq(A[list(partners)].T, A[row], rcond=None)
    assert np.linalg.norm(A[list(partners)].T @ coefficients - A[row]) <= EXACT * np.linalg.norm(A[row])
    # Independent rows: full rank, nothing named; a perturbation above the tolerance counts.
    assert dependent_rows(np.array([r0, r1, r3]))[1] == []
    basis = np.linalg.qr(np.array([r0, r1, r3]).T)[0]
    away = rng.normal(size=6)
    away -= basis @ (basis.T @ away)  # orthogonal to every other row
    A[2] += 1e3 * DEPENDENCE_RTOL * np.linalg.norm(A[2]) * away / np.linalg.norm(away)
    assert dependent_rows(A)[0] == np.linalg.matrix_rank(A) == 4


@pytest.mark.parametrize("engine", ENGINES)
def test_redundant_constraints_are_named(tmp_path, monkeypatch, capsys, engine):
    line = _simulate_error(tmp_path, monkeypatch, capsys, REDUNDANT, engine)
    assert "initialization system is singular" in line
    assert "rank 2 for 3 rows" in line and "is a combination of" in line
    for name in ("c12", "c23", "c13"):
        assert f"constraint '{name}'" in line, line
    assert "Remove or relax one of" in line


def test_large_models_are_not_replayed(tmp_path, monkeypatch, capsys):
    """Above REPLAY_MAX_SIZE the C engine's message stands (the dense Python replay of a
    5 000-coordinate model crashed inside OpenBLAS): singular, but no constraint names."""
    import fmi_adjoint.engines  # noqa: PLC0415

    monkeypatch.setattr(fmi_adjoint.engines, "REPLAY_MAX_SIZE", 2)
    line = _simulate_error(tmp_path, monkeypatch, capsys, REDUNDANT, "native")
    assert "initialization system is singular" in line and "constraint 'c12'" not in line


@pytest.mark.parametrize("engine", ENGINES)
def test_over_fixed_coordinates_are_named(tmp_path, monkeypatch, capsys, engine):
    line = _simulate_error(tmp_path, monkeypatch, capsys, OVER_FIXED, engine)
    assert "fixed_position ('x2' and 'x3') over-fix the constraints" in line
    assert "constraint 'c23' acts only on held coordinates" in line
    assert "Remove fixed_position from one of 'x2' and 'x3'" in line and "constraint 'c12'" not in line


def test_a_prescribed_motion_is_named_as_such(tmp_path, monkeypatch, capsys):
    line = _simulate_error(tmp_path, monkeypatch, capsys, DRIVEN_TWICE, "python")
    assert "constraint 'hold'" in line and "the prescribed motion of 'x3'" in line and "drive_x3" not in line
    assert "rank 1 for 2 rows" in line


@pytest.mark.parametrize("engine", ENGINES)
def test_a_constraint_that_degenerates_mid_run_is_named(tmp_path, monkeypatch, capsys, engine):
    line = _simulate_error(tmp_path, monkeypatch, capsys, LATCH, engine)
    assert "t = 0.6 s (step 6 of 10" in line and "iteration matrix is singular" in line
    assert "constraint 'latch' has a zero Jacobian row" in line and "Remove or relax constraint 'latch'" in line


# -- model-file lines -----------------------------------------------------------------------
def _header_line(text: str, section: str, index: int) -> int:
    """Line (1-based) of the ``index``-th ``[[section]]`` header, counted independently."""
    numbers = [k for k, line in enumerate(text.split("\n"), start=1) if line == f"[[{section}]]"]
    return numbers[index]


_LINE_CASES = {
    # (file text, section, entry index, words); the 3rd and 2nd constraints, an output, a force
    # element, a prescribed motion, a coordinate, a mass-matrix entry
    "third_constraint": (REDUNDANT.replace('expression = "x1 - x3"', 'expression = "x1 - y"'), "constraints", 2,
                         ["constraint 'c13'", "unknown name 'y'"]),
    "second_constraint": (REDUNDANT.replace('expression = "x2 - x3"', 'expression = "k"'), "constraints", 1,
                          ["constraint 'c23' does not depend on any coordinate"]),
    "output": (REDUNDANT.replace('expression = "x1"\n', 'expression = "der(x9)"\n'), "outputs", 0,
               ["output 'y1'", "'x9'"]),
    "force_element": (REDUNDANT.replace('stiffness = "k"', 'stiffness = "k*q"'), "forces", 0,
                      ["force element 's1'", "'q'"]),
    "prescribed": (DRIVEN_TWICE.replace('expression = "sin(t)"', 'expression = "sin(w*t)"'), "prescribed", 0,
                   ["prescribed motion of 'x3'", "'w'"]),
    "coordinate": (REDUNDANT.replace('name = "x2"\nmass = "m"', 'name = "x2"\nmass = "m2"'), "coordinates", 1,
                   ["coordinate 'x2'.mass", "'m2'"]),
    "mass_matrix": (REDUNDANT.replace("\n[[forces]]", '\n[[mass_matrix]]\nrow = "x1"\ncol = "x2"\nvalue = "0"\n\n'
                                      '[[mass_matrix]]\nrow = "x1"\ncol = "x9"\nvalue = "1"\n\n[[forces]]'),
                    "mass_matrix", 1, ["mass_matrix[1]", "unknown coordinate 'x9'"]),
    # A line separator in a comment is no line end in TOML (str.splitlines counts it).
    "line_separator_in_a_comment": (REDUNDANT.replace("[parameters]", "# a note\u2028 on the parameters\n"
                                                      "[parameters]").replace('"x1 - x3"', '"x1 - y"'),
                                    "constraints", 2, ["constraint 'c13'"]),
    # A header-like line inside a multi-line string is text, not an entry.
    "header_in_a_string": (REDUNDANT.replace('name = "redundant"\n', 'name = "redundant"\ndescription = """\n'
                                             'three equal coordinates\n[[constraints]]\n"""\n')
                           .replace('name = "c13"\nexpression = "x1 - x3"\n', 'name = "c13"\n'),
                           "constraints", 2, ["constraints[2]", "missing key(s) ['expression']"]),
}


@pytest.mark.parametrize("case", sorted(_LINE_CASES))
def test_element_errors_name_the_line_of_their_entry(tmp_path, monkeypatch, capsys, case):
    text, section, index, words = _LINE_CASES[case]
    if case == "header_in_a_string":
        expected = [k for k, line in enumerate(text.split("\n"), start=1) if line == "[[constraints]]"][index + 1]
    else:
        expected = _header_line(text, section, index)
    line = _simulate_error(tmp_path, monkeypatch, capsys, text, "python")
    assert f"model.toml (line {expected})" in line, (expected, line)
    assert len(re.findall(r"\(line \d+\)", line)) == 1, line
    for word in words:
        assert word in line, (word, line)


def test_model_name_error_names_its_line(tmp_path, monkeypatch, capsys):
    text = REDUNDANT.replace('name = "redundant"', 'name = "switch"')
    line = _simulate_error(tmp_path, monkeypatch, capsys, text, "python")
    assert "model.toml (line 2)" in line and "'switch'" in line


# -- Newton-divergence advice of the scheme -----------------------------------------------
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("integrator, own, other", [
    ('integrator = "generalized_alpha"\nrho_inf = 0.8\n', "--rho-inf", "--alpha"),
    ('integrator = "hht"\nalpha = -0.05\n', "--alpha", "--rho-inf"),
])
def test_newton_divergence_advice_is_the_schemes(tmp_path, monkeypatch, capsys, engine, integrator, own, other):
    line = _simulate_error(tmp_path, monkeypatch, capsys, DIVERGING.format(integrator=integrator), engine)
    assert "Newton did not converge at t = 0.1 s" in line and "a different step (--step" in line
    assert own in line and other not in line, line
    assert ("now 0.8" if own == "--rho-inf" else "now -0.05") in line


def test_schemes_own_their_advice():
    for scheme, own, other in ((HHT(alpha=-0.1), "alpha", "rho_inf"), (GeneralizedAlpha(rho_inf=0.5), "rho_inf",
                                                                       "alpha towards")):
        advice = scheme.divergence_advice()
        assert own in advice and other not in advice and f"{scheme.parameter:g}" in advice


# -- optimizer stops ---------------------------------------------------------------------------
class _Problem:
    """A cost ``f(x) -> (J, gradient)`` behind the identification contract."""

    gradient_method = "adjoint"

    def __init__(self, f, start):
        self.f = f
        self.start = np.array(start, dtype=float)
        self.names = tuple(f"p{k}" for k in range(len(start)))
        self.lower = np.full(len(start), -np.inf)
        self.upper = np.full(len(start), np.inf)
        self.simulations = 0

    def evaluate(self, x, method="adjoint"):
        self.simulations += 1
        J, g = self.f(np.asarray(x, dtype=float))
        return Evaluation(J=J, gradient=np.asarray(g, dtype=float), method=method, forward_seconds=0.0,
                          gradient_seconds=0.0, simulations=1)

    def residuals(self, x, jacobian=True):
        raise NotImplementedError

    def statistics(self, x):
        return {"std_errors": None, "correlation": None}


def _bowl(x):
    return 1.0 + (x[0] - 1.0) ** 2 + (x[1] - 2.0) ** 2, np.array([2.0 * (x[0] - 1.0), 2.0 * (x[1] - 2.0)])


def _stop(f, start=(0.0, 1.0)):
    result = identify(_Problem(f, start), progress=None, statistics=False)
    assert not result.success
    assert result.optimizer_message.startswith("ABNORMAL"), result.optimizer_message
    assert result.to_json()["optimizer_message"] == result.optimizer_message
    assert result.message.startswith("the line search found no decrease because"), result.message
    return result.message


def test_line_search_failure_with_a_wrong_gradient():
    message = _stop(lambda x: (_bowl(x)[0], -_bowl(x)[1]))
    assert "the gradient is inaccurate" in message and "--method fd" in message
    assert "--method least_squares" in message


def test_line_search_failure_at_a_jump():
    # A step of 5 in the cost at x0 = 0.5, between the start and the minimum at (1, 2).
    message = _stop(lambda x: (_bowl(x)[0] + 5.0 * (x[0] > 0.5), _bowl(x)[1]))
    assert "the cost is not smooth here" in message and "kink or jump" in message
    assert "--method least_squares" in message and "--starts" in message


def test_line_search_failure_on_a_flat_cost():
    # The cost wiggles at round-off (1e-14) and the gradient is as small: a plateau.
    message = _stop(lambda x: (1.0 + 1e-14 * np.sin(1e6 * x[0] + 3e5 * x[1]), np.array([1e-11, 0.0])))
    assert "the cost is flat here" in message and "--starts" in message and "--params" in message


def test_line_search_failure_at_the_edge_of_what_simulates():
    def cost(x):
        if x[0] > 0.5:
            raise ConvergenceError("Newton did not converge")
        return _bowl(x)

    message = _stop(cost)
    assert "cannot be simulated just past this point" in message and "--bounds" in message


SMALL = BASE_TOML  # the small, fast model of tests/test_bad_input.py


@pytest.mark.parametrize("method, words", [
    ("lbfgsb", ["stopped at the iteration limit", "1 iterations (--max-iter 1)", "--max-iter 2"]),
    ("least_squares", ["stopped at the evaluation limit", "--max-iter 1", "--max-iter 2"]),
])
def test_an_iteration_limit_says_to_raise_it(tmp_path, monkeypatch, capsys, method, words):
    (tmp_path / "model.toml").write_text(SMALL)
    code, _, err = _run(tmp_path, monkeypatch, capsys, ["simulate", "model.toml", "-o", "data.csv"])
    assert code == 0, err
    code, _, err = _run(tmp_path, monkeypatch, capsys, [
        "identify", "model.toml", "--data", "data.csv", "--params", "c", "--set", "c=9", "--method", method,
        "--max-iter", "1", "--strategy", "single", "--engine", "python", "-o", "result.json"])
    result = json.loads((tmp_path / "result.json").read_text())
    assert code == 1 and result["success"] is False, err
    for word in words:
        assert word in result["message"], (word, result["message"])
    assert result["optimizer_message"] and result["optimizer_message"] in result["message"]


@pytest.mark.skipif(c_compiler() is None, reason="needs a C compiler")
def test_the_native_engines_explanation_is_worked_out_only_when_read(tmp_path):
    """The native engine's singular-matrix error names the constraints by a replay in the Python
    engine; an optimizer that catches a failed trial point never reads the message, so the
    replay is deferred until str() (and done before the error is pickled to another process)."""
    import pickle

    from fmi_adjoint.engines import NativeEngine
    from fmi_adjoint.model_file import load_model

    (tmp_path / "model.toml").write_text(LATCH)
    engine = NativeEngine.build(load_model(tmp_path / "model.toml"))
    with pytest.raises(ConvergenceError) as caught:
        engine.simulate()
    exc = caught.value
    # Raised with the C runtime's own words: nothing replayed yet.
    assert "iteration matrix is singular" in exc.args[0] and "constraint 'latch'" not in exc.args[0]
    shipped = pickle.loads(pickle.dumps(exc))
    for text in (str(exc), str(shipped)):
        assert "constraint 'latch' has a zero Jacobian row" in text, text
    assert type(shipped) is ConvergenceError
