"""Strategies as objects, one engine chooser, no probing of Protocol members (issue 29).

* Gradient methods, per-experiment parts, optimizers and engine choices are small frozen
  objects, looked up from the user's string once, at the front door, with an error that lists
  the choices; the names the command line offers are the names of those objects.
* One engine chooser (:func:`fmi_adjoint.engines.choose_engine`): ``auto`` falls back to the
  Python engine with a note that travels as a value (never silently), ``native`` fails naming
  the fix.
* No ``getattr``/``hasattr`` probing of what the problem and engine contracts declare: callers
  use the Protocol members (a grep of the package's syntax trees, below).
* ``fmi_adjoint.identify`` is the function, however the subpackage was imported, without
  swapping the package module's class.
"""

from __future__ import annotations

import ast
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fmi_adjoint import engines
from fmi_adjoint.engines import (
    AutomaticEngine,
    NativeOnly,
    PythonEngine,
    PythonOnly,
    choose_engine,
    default_engine,
    engine_choice,
)
from fmi_adjoint.errors import CompilerError, IdentificationError, ModelError
from fmi_adjoint.identify import GRADIENT_METHODS, OPTIMIZERS
from fmi_adjoint.identify.optimize import LBFGSB, LeastSquares, optimizer
from fmi_adjoint.identify.parts import (
    GRADIENT_METHOD_CHOICES,
    PART_KIND_CHOICES,
    AdjointGradient,
    FisherPart,
    gradient_method,
    part_kind,
)
from fmi_adjoint.identify.spec import ENGINES, ProblemSpec, build_engine
from fmi_adjoint.identify.strategies import stage_starts

PACKAGE = Path(__file__).resolve().parent.parent / "fmi_adjoint"


# -- the lookups at the front door ----------------------------------------------------------
@pytest.mark.parametrize("lookup, names, kind", [
    (gradient_method, GRADIENT_METHODS, "gradient method"),
    (part_kind, tuple(PART_KIND_CHOICES), "part"),
    (optimizer, OPTIMIZERS, "optimizer"),
])
def test_each_name_gives_its_object_and_an_unknown_name_lists_the_choices(lookup, names, kind):
    for name in names:
        chosen = lookup(name)
        assert chosen.name == name
        assert lookup(chosen) is chosen  # an object passes through unchanged
    with pytest.raises(IdentificationError, match=kind) as caught:
        lookup("newton")
    assert all(name in str(caught.value) for name in names)


def test_the_command_line_names_are_the_objects_names():
    assert GRADIENT_METHODS == ("adjoint", "forward", "fd", "continuous") == tuple(GRADIENT_METHOD_CHOICES)
    assert OPTIMIZERS == ("lbfgsb", "least_squares")
    assert ENGINES == ("auto", "native", "python")
    assert [engine_choice(n).name for n in ENGINES] == list(ENGINES)
    with pytest.raises(ModelError, match="auto, native, python"):
        engine_choice("fortran")


def test_strategy_objects_are_frozen_values_that_travel_to_workers():
    """Parts travel in tasks to other processes: they pickle and compare by value."""
    fisher = part_kind("fisher", {"y": 0.1, "x": 0.2})
    assert fisher == FisherPart((("x", 0.2), ("y", 0.1)))  # sorted: the same task whatever the dict order
    for value in (fisher, AdjointGradient(), LBFGSB(), LeastSquares(), AutomaticEngine(), *PART_KIND_CHOICES.values()):
        assert pickle.loads(pickle.dumps(value)) == value
        hash(value)
    assert part_kind("jacobian").name == "jacobian" and part_kind("residuals").name == "residuals"


def test_stage_boundaries_come_from_the_optimizer_object():
    """L-BFGS-B records its start and each iteration, least squares each Jacobian: the
    optimizer says so (``start_entries``), not a comparison with its name."""
    assert stage_starts([3, 4, 2], "lbfgsb") == stage_starts([3, 4, 2], LBFGSB()) == (0, 4, 9)
    assert stage_starts([3, 4, 2], "least_squares") == (0, 3, 7)


# -- one engine chooser ---------------------------------------------------------------------
@pytest.fixture
def failing_compiler(monkeypatch):
    """A C build that fails as a broken compiler does."""
    def fail(*args, **kwargs):
        raise CompilerError("compiling the model failed: cc1: internal compiler error")

    monkeypatch.setattr(engines, "build_native", fail)
    monkeypatch.setattr(engines.NativeEngine, "build", classmethod(lambda cls, model, **kw: fail()))


def _sdof():
    from fmi_adjoint import load_model
    from fmi_adjoint.examples import example_path

    return load_model(example_path("sdof"))


def test_auto_falls_back_with_a_note_naming_the_cause(failing_compiler):
    from fmi_adjoint import compile_model

    model = _sdof()
    for compiled in (None, compile_model(model)):
        built = choose_engine(model, "auto", compiled=compiled)
        assert isinstance(built.engine, PythonEngine)
        assert built.note is not None and "internal compiler error" in built.note and "Python engine" in built.note
    engine, note = build_engine(model)  # the spec's entry point is the same chooser
    assert isinstance(engine, PythonEngine) and note == built.note


def test_native_fails_naming_the_fix(failing_compiler):
    with pytest.raises(ModelError, match="--engine native: .*internal compiler error.*use --engine python"):
        choose_engine(_sdof(), NativeOnly())


def test_python_is_built_without_a_compiler(failing_compiler):
    built = choose_engine(_sdof(), PythonOnly())
    assert isinstance(built.engine, PythonEngine) and built.note is None


def test_an_experiment_keeps_the_fallback_note(failing_compiler):
    """The library's default engine is the same chooser: a failing compiler is a fallback with a
    note on the experiment (it was an error there, and a fallback in the command line)."""
    from fmi_adjoint import Experiment, LeastSquaresCost, compile_model

    compiled = compile_model(_sdof())
    times = np.linspace(0.0, 1.0, 11)
    exp = Experiment(compiled, LeastSquaresCost(times, np.zeros(times.size), ("x",)))
    assert isinstance(exp.engine, PythonEngine)
    assert exp.engine_note is not None and "internal compiler error" in exp.engine_note
    assert isinstance(default_engine(compiled), PythonEngine)


def test_optimal_input_design_uses_the_same_chooser(failing_compiler):
    """Design built its engine by a third rule (a failing compiler an error, no C code a silent
    fallback): now the same chooser, its note kept on the problem."""
    from fmi_adjoint import load_model
    from fmi_adjoint.design import DesignProblem, DesignSpec
    from fmi_adjoint.examples import example_path

    spec = DesignSpec(input="u", params=("c",), bounds=(-1.0, 1.0), noise={"x": 0.05}, knots=6)
    problem = DesignProblem.build(spec, load_model(example_path("single_mass")))
    assert isinstance(problem.engine, PythonEngine)
    assert problem.engine_note is not None and "internal compiler error" in problem.engine_note
    with pytest.raises(ModelError, match="use --engine python"):
        DesignProblem.build(spec, load_model(example_path("single_mass")), engine=NativeOnly())


def test_a_spec_looks_its_engine_name_up_once_and_digests_as_before():
    spec = ProblemSpec.create(None, (), ("c",), engine="python")  # type: ignore[arg-type]
    assert spec.engine is engine_choice("python")
    with pytest.raises(ModelError, match="not one of auto, native, python"):
        ProblemSpec.create(None, (), ("c",), engine="gpu")  # type: ignore[arg-type]


# -- no probing of Protocol members ---------------------------------------------------------
def _contract_members() -> set[str]:
    """What the problem and engine contracts declare (their public members)."""
    from fmi_adjoint.engines import AbstractEngine
    from fmi_adjoint.identify.problem import AbstractIdentificationProblem, AbstractProblem
    from fmi_adjoint.identify.strategies import ProblemWithWindows

    members: set[str] = set()
    for contract in (AbstractProblem, AbstractIdentificationProblem, AbstractEngine, ProblemWithWindows):
        for klass in contract.__mro__:
            members |= {n for n in vars(klass) if not n.startswith("_")}
            members |= {n for n in getattr(klass, "__annotations__", {}) if not n.startswith("_")}
    return members


#: Members callers probed for although no contract declared them (issue 29): what a caller
#: uses must be on the contract.
PROBED_BEFORE = {"executor", "thread_safe", "workers", "columns", "memory_budget", "window_strategy", "windowed",
                 "result_guards", "interface", "noise_floor"}

#: Probes of contract members still in modules of other owners (issue 29, to be removed there;
#: each is a (module, attribute) pair; remove an entry when its probe is gone).  Nothing else
#: may join this list.
PENDING: set[tuple[str, str]] = set()


def _probes():
    """``(module, attribute, object text)`` of every getattr/hasattr with a literal name."""
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2
                    and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
                yield path.relative_to(PACKAGE).as_posix(), node.args[1].value, ast.unparse(node.args[0])


def _is_contract_probe(attribute: str, obj: str, members: set[str]) -> bool:
    # A contract member asked of a problem, an engine or a gradient path, or one of the members
    # that were probed before.  Other getattr calls are not probes of these contracts: optional
    # os functions and flags, argparse namespaces, dataclass fields by name, plugin classes
    # validated on load (registries), fmpy's model-description objects, ctypes symbols.
    holder = any(word in obj for word in ("problem", "engine", "path", "executor"))
    return attribute in PROBED_BEFORE or (attribute in members and holder)


def test_no_getattr_probing_of_contract_members():
    members = _contract_members()
    found = {(module, attribute) for module, attribute, obj in _probes()
             if _is_contract_probe(attribute, obj, members)}
    assert found - PENDING == set(), "use the contract's member (declare it on the Protocol) instead of probing"


def test_the_probe_finder_finds_a_probe():
    """A test of the test: the probes removed by issue 29 are found in their old form."""
    members = _contract_members()
    old = ('workers = getattr(getattr(problem, "executor", None), "workers", 1)\n'
           'ok = getattr(problem, "thread_safe", False)\n'
           'cap = getattr(engine, "memory_budget", None)\n')
    calls = [n for n in ast.walk(ast.parse(old)) if isinstance(n, ast.Call) and isinstance(n.args[1], ast.Constant)]
    assert all(_is_contract_probe(c.args[1].value, ast.unparse(c.args[0]), members) for c in calls)
    assert not _is_contract_probe("O_NOFOLLOW", "os", members)


# -- fmi_adjoint.identify ---------------------------------------------------------------------
@pytest.mark.slow  # a fresh interpreter
def test_identify_is_the_function_however_the_subpackage_was_imported():
    """In a fresh interpreter: the package module keeps its class (no swap), the subpackage
    imports as modules, and ``fmi_adjoint.identify`` stays the function."""
    code = (
        "import sys, types\n"
        "import fmi_adjoint\n"
        "assert 'numpy' not in sys.modules, 'import fmi_adjoint loads numpy'\n"
        "import fmi_adjoint.identify.spec\n"
        "from fmi_adjoint.identify.multistart import run_starts\n"
        "from fmi_adjoint import Experiment, identify\n"
        "from fmi_adjoint.identify import identify as same\n"
        "assert type(sys.modules['fmi_adjoint']) is types.ModuleType\n"
        "assert callable(identify) and identify is same is fmi_adjoint.identify\n"
        "assert sys.modules['fmi_adjoint.identify'].Experiment is Experiment\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
