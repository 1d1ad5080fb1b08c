"""Rules of the suite itself (issue 32, part 4): a suite that passes on any machine.

* No test sleeps to synchronise.  A test waits for an event (a file, a pipe, a mark a child
  writes, a future) by polling with a generous deadline; a sleep is allowed only inside such a
  polling loop (a ``while``), or where listed below with the reason it is not synchronisation.
* No test asserts a duration: no clock reading inside an ``assert``.
* No literal tolerance in an assertion: ``rtol=``, ``atol=``, ``rel=``, ``abs=`` of
  ``pytest.approx``, ``np.allclose``, ``np.testing.assert_allclose``, ``math.isclose`` and the
  upper bound of an ``assert error < bound`` use a named tier of ``tests/tolerances.py``
  (``EXACT * scale`` is fine; ``1e-9 * scale`` is not).  A new tier states why it exists and
  what was measured.  Lower bounds (``assert change > 1e-3``: an effect that must show) are not
  tolerances and are not checked.

The checks read the test files' syntax trees (and the Python scripts tests embed as strings),
so they do not depend on formatting.  Each check is shown to fail on a sample.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent
ROOT = TESTS_DIR.parent
FILES = sorted(TESTS_DIR.glob("*.py")) + sorted(ROOT.glob("plugins/*/tests/*.py"))

FIX_SLEEP = ("wait for an event instead (a file or mark the other side writes, a pipe, a future), polled in a "
             "`while` loop with a generous deadline (see Gate in tests/test_executors.py)")
FIX_TOLERANCE = ("use a named tier of tests/tolerances.py (add one there, with the reason it exists and the "
                 "margin measured, if none fits; never loosen one)")

#: Sleeps outside a polling loop that do not synchronise: (file, enclosing function) -> reason.
SLEEP_ALLOWED = {
    ("test_executors.py", "_sleep_then_pid"):
        "a task that lasts 50 ms so that both pool workers take one; the test polls until both have answered",
    ("test_executors.py", "make"):
        "widens the window in which a second thread could build too; the assertion holds whatever the timing",
}

#: Literal bounds in assertions that are not tolerances, or not yet a named tier:
#: (file, the line's text) -> reason.
NOT_A_TOLERANCE = "a physical, statistical or counting bound of this test (see its comment), not a numerical tolerance"
MODEL_ERROR = ("a modelling or discretization error of this test (smoothing width, step size, truncation order), "
               "estimated in its comment; not round-off")
TOLERANCE_ALLOWED: dict[tuple[str, str], str] = {
    ('test_beam_pod.py', 'assert 1e-4 < np.abs(w).max() < 1e-2  # mm-scale displacements: small angles, no buckling'):
        NOT_A_TOLERANCE,
    ('test_beam_pod.py', 'assert np.abs(w[-1]).max() < 0.1 * np.abs(w).max()  # the response has decayed by t_end'):
        NOT_A_TOLERANCE,
    ('test_elements.py', 'assert f(0.0, v) == pytest.approx(expected, rel=1e-5)'):
        MODEL_ERROR,
    ('test_elements.py', 'assert f(0.0, 1.0) == pytest.approx(10.0, rel=1e-7)  # Coulomb level far above v_s'):
        MODEL_ERROR,
    ('test_elements.py',
     'assert f(0.0, 1e-2 * 1e-2) == pytest.approx(15.0 * 1e-4 / math.sqrt(2e-8), rel=1e-3)  # v = v_ep'
     's'):
        MODEL_ERROR,
    ('test_elements.py', 'assert f(0.0, -1.0) == pytest.approx(-10.0, rel=1e-7)'):
        MODEL_ERROR,
    ('test_elements.py', 'assert abs(f(phi, 0.0) - torque) <= smoothing_error(phi) * (1 + 1e-6) + 1e-12 * abs(torque)'):
        MODEL_ERROR,
    ('test_elements.py', 'assert abs(f(2e-4, 0.0)) < 1e-3  # inside the 1 mm gap'):
        MODEL_ERROR,
    ('test_elements.py', 'assert f(1.5e-3, 0.0) == pytest.approx(1e5 * 1e-3, rel=1e-4)'):
        MODEL_ERROR,
    ('test_elements.py', 'assert f(-1.5e-3, 0.0) == pytest.approx(-1e5 * 1e-3, rel=1e-4)'):
        MODEL_ERROR,
    ('test_elements.py', 'assert np.max(np.abs(ref[0] - traj.q[:, 0])) < 1e-5 * 0.01 * 20'):
        MODEL_ERROR,
    ('test_elements.py', 'assert np.max(np.abs(ref[2] - traj.q[:, 1])) < 1e-5 * 0.01 * 20 * 10'):
        MODEL_ERROR,
    ('test_engine_tvd.py', 'assert np.diff(np.sort(firing)) == pytest.approx(period, rel=0.05)'):
        NOT_A_TOLERANCE,
    ('test_engine_tvd.py', 'assert -Q[:, col["q19"]].min() == pytest.approx(64e5 * p["A_p"], rel=0.02)'):
        NOT_A_TOLERANCE,
    ('test_engine_tvd.py', 'assert lo < n_res < hi and 0.05 < zeta[1] < 0.2'):
        NOT_A_TOLERANCE,
    ('test_engine_tvd.py', 'assert abs(n_peak - n_res) < 0.05 * n_res'):
        NOT_A_TOLERANCE,
    ('test_engine_tvd.py', 'assert change[2] < 0.005 and change[4] < 0.005 and change[8] < 0.25'):
        NOT_A_TOLERANCE,
    ('test_fmu_import.py',
     'assert abs(payload["parameters"]["c_E1"] - TRUE_VALUES["c_E1"]) < 0.1 * TRUE_VALUES["c_E1"]'):
        NOT_A_TOLERANCE,
    ('test_fmu_import.py',
     'assert abs(payload["parameters"][name] - true) < 1e-2 * abs(payload["initial"][name] - true), na'
     'me'):
        NOT_A_TOLERANCE,
    ('test_fmu_import.py', 'assert identified["rms_error"] < 1e-2 * original["rms_error"], name'):
        NOT_A_TOLERANCE,
    ('test_fmu_import.py', 'assert identified["max_abs_error"] < 1e-2 * original["max_abs_error"], name'):
        NOT_A_TOLERANCE,
    ('test_generalized_alpha.py', 'assert alpha_m <= alpha_f <= 0.5'):
        NOT_A_TOLERANCE,
    ('test_generalized_alpha.py', 'assert errors[1] < 1e-6'):
        MODEL_ERROR,
    ('test_handwritten_fmus.py', 'assert partial < 2.0 * constant * 0.01 ** 4, (partial, constant)'):
        MODEL_ERROR,
    ('test_handwritten_fmus.py',
     'assert default < 2.0 * constant * 1e-3 ** 4 + reference_error, (default, constant, reference_err'
     'or)'):
        MODEL_ERROR,
    ('test_hht_robustness.py', 'assert speed2 == pytest.approx(2 * 9.81 * abs(traj.q[-1, 1]), rel=1e-3)'):
        MODEL_ERROR,
    ('test_hht_robustness.py',
     'assert np.max(traj.q[:, 0]) == pytest.approx(0.1, rel=1e-3)  # v0/sqrt(k) on the stiff side'):
        MODEL_ERROR,
    ('test_hht_robustness.py',
     'assert np.min(traj.q[:, 0]) == pytest.approx(-1.0, rel=1e-3)  # v0/sqrt(1) on the soft side'):
        MODEL_ERROR,
    ('test_linalg_kernels.py', 'assert layout.factor_flops < 0.01 * dense.factor_flops'):
        NOT_A_TOLERANCE,
    ('test_linalg_kernels.py', 'assert layout.solve_flops < 0.1 * dense.solve_flops'):
        NOT_A_TOLERANCE,
    ('test_prescribed.py', 'assert np.all(np.abs(orders - 2.0) < 0.2), orders'):
        NOT_A_TOLERANCE,
    ('test_radau.py', 'assert np.max(np.abs(D - analytic)) <= 10.0 * 1e-10 * np.max(np.abs(analytic))'):
        "ten times the run's own rtol (1e-10): a bound stated through the solver setting of the line above",
    ('test_strut.py', 'assert v.max() > 0.2 and v.min() < -0.2'):
        NOT_A_TOLERANCE,
}

CLOCKS = {"time", "monotonic", "perf_counter", "process_time", "monotonic_ns", "perf_counter_ns", "time_ns"}
TOLERANCE_KEYWORDS = {"rtol", "atol", "rel", "abs", "rel_tol", "abs_tol", "decimal"}


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _enclosing_function(node: ast.AST, parents: dict) -> str:
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node.name
    return "<module>"


def _in_loop(node: ast.AST, parents: dict) -> bool:
    """Inside a ``while`` loop of the same function (a polling loop)."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.While):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return False
    return False


def _is_call_of(node: ast.AST, names: set[str], module: str | None = None) -> bool:
    if not isinstance(node, ast.Call):
        return False
    function = node.func
    if isinstance(function, ast.Attribute):
        return function.attr in names and (module is None or (isinstance(function.value, ast.Name)
                                                              and function.value.id == module))
    return isinstance(function, ast.Name) and function.id in names and module is None


def _embedded_scripts(tree: ast.AST):
    """String constants that are Python scripts (``textwrap.dedent(\"\"\"...\"\"\")`` run in a child)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "\n" in node.value:
            try:
                yield node, ast.parse(textwrap.dedent(node.value))
            except SyntaxError:
                continue


def _fails(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Raise) or (isinstance(statement, ast.Expr)
                                                and _is_call_of(statement.value, {"fail", "exit"}))


def _fails_after(loop: ast.While, parents: dict) -> bool:
    """The loop's ``else`` or the statement after ``loop`` fails (``raise``, ``pytest.fail``,
    ``sys.exit``): a wait that left its loop only through a return or a break when the event came."""
    if loop.orelse and _fails(loop.orelse[0]):
        return True
    body = next((getattr(parents[loop], field) for field in ("body", "orelse", "finalbody")
                 if loop in getattr(parents[loop], field, ())), [])
    after = body[body.index(loop) + 1:] if loop in body else []
    return bool(after) and _fails(after[0])


def sleep_violations(source: str, name: str) -> list[str]:
    """``name:line: ...`` for each sleep that is neither in a polling loop nor allowed."""
    found = []

    def check(tree: ast.AST, line0: int, where: str) -> None:
        parents = _parents(tree)
        for node in ast.walk(tree):
            if _is_call_of(node, {"sleep"}) and not _in_loop(node, parents):
                function = _enclosing_function(node, parents)
                if (name, function) not in SLEEP_ALLOWED:
                    found.append(f"{name}:{line0 + node.lineno - 1}: sleep outside a polling loop{where} "
                                 f"(in {function}): {FIX_SLEEP}")
            if (isinstance(node, ast.While) and any(_is_call_of(sub, CLOCKS, "time") for sub in ast.walk(node.test))
                    and not _fails_after(node, parents)):
                found.append(f"{name}:{line0 + node.lineno - 1}: a deadline in a polling loop's condition{where} "
                             "ends the wait silently and the test goes on as if the event had come (a missed "
                             "window passed unnoticed this way); end the wait inside the loop with pytest.fail "
                             "(or an error exit in a child) naming what did not come")
            if isinstance(node, ast.Assert) and any(_is_call_of(sub, CLOCKS, "time") for sub in ast.walk(node)):
                found.append(f"{name}:{line0 + node.lineno - 1}: a clock reading in an assertion{where}: no test "
                             "asserts a duration (a deadline that ends a wait calls pytest.fail)")

    tree = ast.parse(source)
    check(tree, 1, "")
    for constant, script in _embedded_scripts(tree):
        check(script, constant.lineno, " of an embedded script")
    return sorted(found, key=lambda v: int(v.split(":")[1]))


def _top(node: ast.AST) -> list[ast.AST]:
    """The operands of a bound's arithmetic (``1e-9 * abs(y) + c``: 1e-9, abs(y), c), not looking
    into calls or subscripts (``abs(t - t1) > 0.05`` inside an index is not the bound)."""
    if isinstance(node, ast.BinOp):
        return _top(node.left) + _top(node.right)
    if isinstance(node, ast.UnaryOp):
        return _top(node.operand)
    return [node]


def _literals(node: ast.AST) -> list[float]:
    return [sub.value for sub in _top(node) if isinstance(sub, ast.Constant)
            and isinstance(sub.value, (int, float)) and not isinstance(sub.value, bool)]


def _names_a_tier(node: ast.AST) -> bool:
    """Mentions an UPPER_CASE name (a tier of tests/tolerances.py or a module constant built on one)."""
    return any(isinstance(sub, ast.Name) and sub.id.isupper() for sub in _top(node))


def _is_literal_tolerance(node: ast.AST) -> bool:
    """A bound made of literals (``1e-9``, ``1e-9 * scale``), not naming a tier; 0 is exact, not a tolerance."""
    values = _literals(node)
    return not _names_a_tier(node) and any(0 < abs(v) < 1 for v in values)


def _bound_of_comparison(compare: ast.Compare):
    """The upper bounds of ``error < bound`` / ``bound > error`` (chains included)."""
    operands = [compare.left, *compare.comparators]
    for k, op in enumerate(compare.ops):
        if isinstance(op, (ast.Lt, ast.LtE)):
            yield operands[k + 1]
        elif isinstance(op, (ast.Gt, ast.GtE)):
            yield operands[k]


ASSERTING = {"assert_allclose", "assert_array_almost_equal", "assert_almost_equal", "assert_approx_equal"}


def tolerance_violations(source: str, name: str) -> list[str]:
    tree = ast.parse(source)
    lines = source.splitlines()
    found = []
    checked: set[int] = set()

    def report(node: ast.AST, what: str) -> None:
        text = lines[node.lineno - 1].strip()
        if (name, text) not in TOLERANCE_ALLOWED and id(node) not in checked:
            checked.add(id(node))
            found.append(f"{name}:{node.lineno}: literal tolerance ({what}) in an assertion: {FIX_TOLERANCE}")

    def check(scope: ast.AST) -> None:
        for node in ast.walk(scope):
            if isinstance(node, ast.Call):
                for keyword in node.keywords:
                    if keyword.arg in TOLERANCE_KEYWORDS and _is_literal_tolerance(keyword.value):
                        report(keyword.value, f"{keyword.arg}={ast.unparse(keyword.value)}")
            if isinstance(node, ast.Compare):
                for bound in _bound_of_comparison(node):
                    if _is_literal_tolerance(bound):
                        report(bound, f"bound {ast.unparse(bound)}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            check(node)
        elif isinstance(node, ast.Expr) and _is_call_of(node.value, ASSERTING):
            check(node.value)
    return sorted(found, key=lambda v: int(v.split(":")[1]))


def test_no_test_sleeps_to_synchronise():
    found = [v for path in FILES if path.name != Path(__file__).name  # its samples sleep on purpose
             for v in sleep_violations(path.read_text(encoding="utf-8"), path.name)]
    assert found == [], "\n".join(found)


def test_no_literal_tolerances_in_assertions():
    found = [v for path in FILES for v in tolerance_violations(path.read_text(encoding="utf-8"), path.name)]
    assert found == [], "\n".join(found)


def test_the_allow_lists_name_existing_code():
    """An allow-list entry whose code is gone is removed, so that the lists only shrink."""
    texts = {path.name: path.read_text(encoding="utf-8") for path in FILES}
    stale = [key for key in TOLERANCE_ALLOWED if key[0] not in texts or key[1] not in texts[key[0]]]
    stale += [key for key in SLEEP_ALLOWED if key[0] not in texts or f"def {key[1]}(" not in texts[key[0]]]
    assert stale == []


SLEEPY = '''
import time, textwrap

def test_waits():
    start()
    time.sleep(0.3)  # probably ready
    assert done()

def test_polls():
    while not done():
        time.sleep(0.01)

SCRIPT = textwrap.dedent("""
    import time
    time.sleep(0.2)
    kill()
""")

def test_times():
    t0 = time.monotonic()
    run()
    assert time.monotonic() - t0 < 2.0

def test_deadline_in_the_condition():
    deadline = time.monotonic() + 60
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)
    kill()

def test_deadline_then_fail():
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if done():
            return
        time.sleep(0.01)
    raise AssertionError("not done")

def test_deadline_else_fail():
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if done():
            break
        time.sleep(0.01)
    else:
        pytest.fail("not done")
'''


def test_the_sleep_check_fails_on_sleeps_that_synchronise():
    found = sleep_violations(SLEEPY, "sample.py")
    assert [v.split(":")[1] for v in found] == ["6", "15", "22", "26"], found
    assert all("sleep outside a polling loop" in v or "clock reading" in v for v in found[:3])
    assert "ends the wait silently" in found[3]
    assert "wait for an event" in found[0]


LITERAL = '''
import math, numpy as np, pytest
from tolerances import EXACT

def test_values(x, y, scale):
    assert x == pytest.approx(y, rel=1e-9)
    assert np.allclose(x, y, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(x, y, rtol=1e-7)
    assert abs(x - y) <= 1e-10 * abs(y)
    assert math.isclose(x, y, rel_tol=1e-6)
    assert 1e-3 > abs(x - y)
    assert x == pytest.approx(y, rel=EXACT)
    assert np.allclose(x, y, rtol=0, atol=EXACT * scale)
    assert abs(x - y) <= EXACT * scale and x > 1e-3 and len(y) < 10
    assert np.array_equal(x, y) and x == pytest.approx(y, abs=0)
'''


def test_the_tolerance_check_fails_on_literal_tolerances():
    found = tolerance_violations(LITERAL, "sample.py")
    assert [int(v.split(":")[1]) for v in found] == [6, 7, 8, 9, 10, 11], found
    assert all("use a named tier of tests/tolerances.py" in v for v in found)



def _logger_proxies(source: str) -> list[int]:
    """Lines that call fmpy's ``addLoggerProxy``."""
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and (getattr(node.func, "id", None) == "addLoggerProxy"
                                               or getattr(node.func, "attr", None) == "addLoggerProxy")]


def test_no_test_installs_fmpys_logger_proxy():
    """fmpy's ``addLoggerProxy`` keeps the logger in a process-wide global of its C library: after
    the test that installed it frees its callbacks, every later FMU of the worker process that
    logs through fmpy's default callbacks calls freed memory (a segmentation fault in another,
    later test: seen with an FMU's error message)."""
    found = [f"{path.name}:{line}" for path in FILES if path.name != Path(__file__).name
             for line in _logger_proxies(path.read_text(encoding="utf-8"))]
    assert found == [], "do not call addLoggerProxy in tests; give the logger your own callbacks only"
    assert _logger_proxies("from fmpy.logging import addLoggerProxy\naddLoggerProxy(byref(cb))\n") == [2]
