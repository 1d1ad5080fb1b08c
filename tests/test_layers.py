"""The packages import downward only (STYLE.md: cli / identify -> adjoint -> integrate -> model
-> forces -> errors).  Each component has a rank; a module may import only components of a
strictly lower rank (or its own component)."""

from __future__ import annotations

import ast
import functools
from collections.abc import Collection
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fmi_adjoint"

RANK = {
    "errors": 0,
    "text": 1,
    "linesearch": 1,
    "budget": 1,
    "cache": 2,
    "cse": 1,
    # calculus: partial derivatives by the rules on the expression tree (issue 23, build time)
    "calculus": 1,
    # choices: strategies looked up by name (engines, optimizers, gradient methods; issue 29)
    "choices": 0,
    # lazy: a package's public names imported on first use (PEP 562)
    "lazy": 0,
    # deferred: a module (sympy) imported on first use of an attribute (issue 24, part 6)
    "deferred": 0,
    "sparsity": 2,
    "expressions": 2,
    "cprint": 2,
    "toolchain": 2,
    "files": 2,
    "forces": 3,
    # structured (issue 24, part 2): constant or parameter-scaled sparse matrices, quadratic constraints
    "structured": 3,
    "scale": 3,
    "data": 3,
    # bench (issue 26): readers of test-bench files, units, preprocessing into a cost's data
    "bench": 4,
    # flexible (issue 25): finite-element models, beam elements, importers, Craig-Bampton reduction
    "flexible": 4,
    "model": 4,
    "codegen": 4,
    # equations: the derivatives of a model's (or a component type's) equations, the function table
    "equations": 5,
    # mbs (issue 23): components lowered to a Model; model files build them (model_file above)
    "mbs": 5,
    # assembly (issue 23, item 1): component types derived once, assembled numerically
    "assembly": 6,
    "model_file": 6,
    "costs": 6,
    "compiled": 7,
    "integrate": 8,
    # warm (issue 24, part 6): warm starts keyed before lowering; imports compiled, mbs, model_file
    "warm": 8,
    "elementcheck": 8,
    "adjoint": 9,
    "native": 9,
    "engines": 10,
    "identify": 11,
    # componentcheck (issue 23): `plugins check` of a multibody component builds and simulates it
    "componentcheck": 11,
    "export": 11,
    "design": 12,
    "examples": 12,
    "fmu": 12,
    # ssp (issue 28): systems of FMUs from SSP 1.0 files and the co-simulation master that runs them
    "ssp": 13,
    # report (issue 27): HTML reports of identifications, designs and validations
    "report": 13,
    "cli": 14,
    "__init__": 15,
    "__main__": 15,
}


def component(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def imported_components(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package_parts = path.relative_to(PACKAGE).parts[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if node.module and node.module.startswith("fmi_adjoint"):
                    parts = node.module.split(".")[1:]
                    found.add(parts[0] if parts else "__init__")
                continue
            base = list(package_parts[: len(package_parts) - (node.level - 1)])
            target = base + (node.module.split(".") if node.module else [])
            if target:
                found.add(target[0])
            else:  # "from . import x" at the top level
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("fmi_adjoint."):
                    found.add(alias.name.split(".")[1])
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_component_has_a_rank():
    assert {component(p) for p in MODULES} <= set(RANK)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path):
    own = component(path)
    for other in imported_components(path) - {own}:
        assert other in RANK, f"{path.name} imports unknown component {other}"
        assert RANK[other] < RANK[own], f"{path.relative_to(PACKAGE)} ({own}) imports {other}: upward import"


def module_graph(package: Path) -> dict[str, set[str]]:
    """Which module of ``package`` imports which (dotted names relative to the package's parent;
    a package is its ``__init__``).  Every import counts: module-level, function-local and
    ``TYPE_CHECKING`` ones, since each holds the two modules' code together (a cycle kept
    open by a function-local import is still a cycle)."""
    modules = {_module_name(path, package): path for path in sorted(package.rglob("*.py"))}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        own = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = own[: len(own) - (node.level - 1)] if node.level else []
                parts = base + (node.module.split(".") if node.module else [])
                # "from .pkg import sub" imports the module pkg.sub; "from .mod import name" mod.
                targets = [".".join([*parts, alias.name]) for alias in node.names]
                targets = [t if t in modules else ".".join(parts) for t in targets]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            for target in targets:
                while target not in modules and "." in target:  # "import a.b.c" of a package's names
                    target = target.rsplit(".", 1)[0]
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def _module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The strongly connected components of ``graph`` with more than one module, each sorted:
    every set of modules that import each other in a circle (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(tuple(sorted(component)))
    return sorted(cycles)


#: Module cycles outside fmi_adjoint/fmu/ that are known and not yet broken (STYLE.md: layers
#: point down, also between the modules of one package).  Each entry is one whole cycle; a new
#: cycle, a cycle that grows, and an entry that is no cycle any more all fail the test.
KNOWN_CYCLES: set[tuple[str, ...]] = set()  # mbs (issue 29): broken by mbs.context and mbs.frames


def check_no_import_cycles(graph: dict[str, set[str]], known: Collection[tuple[str, ...]] = ()) -> None:
    """AssertionError naming every module cycle of ``graph`` (:func:`module_graph`) that is not in
    ``known``, and every entry of ``known`` that is no cycle any more."""
    cycles = import_cycles(graph)
    new = [cycle for cycle in cycles if cycle not in known]
    assert not new, "modules that import each other (directly or around a circle; function-local and " \
        "TYPE_CHECKING imports count): " + "; ".join(" <-> ".join(cycle) for cycle in new) + \
        ". Move what both need into a lower module, or pass values instead of calling back."
    gone = [cycle for cycle in known if cycle not in cycles]
    assert not gone, f"no longer import cycles, drop them from KNOWN_CYCLES: {gone}"


@functools.cache
def _package_graph() -> dict[str, frozenset[str]]:
    return {name: frozenset(targets) for name, targets in module_graph(PACKAGE).items()}


def test_no_import_cycles_between_modules():
    check_no_import_cycles({name: set(targets) for name, targets in _package_graph().items()}, KNOWN_CYCLES)


def _write_package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


@pytest.mark.parametrize("how", ["top level", "function-local", "TYPE_CHECKING", "absolute", "around a circle"])
def test_the_cycle_check_refuses_a_module_cycle(tmp_path, how):
    """A test of the test: a synthetic package whose modules import each other in each way the
    checker must see is refused, naming the modules; without the back edge it passes."""
    back = {
        "top level": "from .a import A\n",
        "function-local": "def f():\n    from .a import A\n    return A\n",
        "TYPE_CHECKING": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\n",
        "absolute": "import pkg.a\n",
        "around a circle": "from .sub import c\n",
    }[how]
    files = {"pkg/__init__.py": "", "pkg/a.py": "from .b import B\nA = 1\n", "pkg/sub/__init__.py": "",
             "pkg/sub/c.py": "from ..a import A\n", "pkg/b.py": "B = 2\n"}
    clean = module_graph(_write_package(tmp_path / "clean", files))
    check_no_import_cycles(clean)
    graph = module_graph(_write_package(tmp_path / "cycle", {**files, "pkg/b.py": back + "B = 2\n"}))
    with pytest.raises(AssertionError, match="pkg.a <-> pkg.b"):
        check_no_import_cycles(graph)
    # Known, the cycle passes; a known entry that is no cycle fails.
    expected = ("pkg.a", "pkg.b", "pkg.sub.c") if how == "around a circle" else ("pkg.a", "pkg.b")
    check_no_import_cycles(graph, {expected})
    with pytest.raises(AssertionError, match="no longer import cycles"):
        check_no_import_cycles(clean, {expected})


@pytest.mark.parametrize("edge", [("fmu.variables", "fmu.archive"), ("fmu.gradients", "fmu.problem"),
                                  ("fmu.rebuild", "fmu.handback")])
def test_the_cycle_check_refuses_the_fmu_cycles_it_replaced(edge):
    """The real graph with one of the back edges that issue 29 removed put back is refused."""
    graph = {name: set(targets) for name, targets in _package_graph().items()}
    graph[f"fmi_adjoint.{edge[0]}"].add(f"fmi_adjoint.{edge[1]}")
    with pytest.raises(AssertionError, match=f"fmi_adjoint.{edge[1]}"):
        check_no_import_cycles(graph, KNOWN_CYCLES)


#: Packages whose modules never write to the console: what the user should know travels as values
#: (notes on the result, :attr:`~fmi_adjoint.fmu.choice.GradientChoice.notes`, ...) to cli/, which
#: prints them (issue 29).  Writing to a stream the caller passes (``log=``) is fine.
QUIET_COMPONENTS = ("fmu", "ssp")


def console_writes(path: Path) -> list[str]:
    """Where the module at ``path`` writes to the console: a ``print`` without ``file=``, or any
    use of ``sys.stdout`` / ``sys.stderr``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr", "__stdout__", "__stderr__") \
                and isinstance(node.value, ast.Name) and node.value.id == "sys":
            found.append(f"{path.name}:{node.lineno}: sys.{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print" \
                and not any(keyword.arg == "file" for keyword in node.keywords):
            found.append(f"{path.name}:{node.lineno}: print to stdout")
    return sorted(found, key=lambda where: int(where.split(":")[1]))


@pytest.mark.parametrize("name", QUIET_COMPONENTS)
def test_library_packages_do_not_write_to_the_console(name):
    offenders = [where for path in sorted((PACKAGE / name).rglob("*.py")) for where in console_writes(path)]
    assert offenders == [], f"{offenders}: return the note as a value (see QUIET_COMPONENTS) for cli/ to print"


def test_the_console_check_sees_a_note_printed_on_stderr(tmp_path):
    """A test of the test: the way fmu/problem.py printed its notes before issue 29 is found."""
    module = tmp_path / "noisy.py"
    module.write_text("import sys\n\ndef f(log):\n    print('kept', file=log)\n"
                      "    print('fmi-adjoint: note: ...', file=sys.stderr)\n    print('plain')\n", encoding="utf-8")
    assert console_writes(module) == ["noisy.py:5: sys.stderr", "noisy.py:6: print to stdout"]


def test_no_eval_of_model_content():
    # The only exec is the generated-code compiler, fed by sympy's printer.
    offenders = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("eval", "exec"):
                offenders.append(f"{path.name}:{node.lineno}:{node.func.id}")
    assert offenders == [f"codegen.py:{_exec_line()}:exec"]


def _exec_line() -> int:
    for node in ast.walk(ast.parse((PACKAGE / "codegen.py").read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "exec":
            return node.lineno
    return -1


#: The modules the FMU worker process loads (fmu/worker.py's _project_module): they run next to
#: a third-party binary that must start fast, so they may import only numpy, scipy and these.
WORKER_SIDE = ("fmu/me_run.py", "fmu/me_integration.py", "fmu/me_sensitivities.py", "fmu/me_kernel.py",
               "fmu/me_system.py", "integrate/radau.py", "integrate/radau_walk.py")
WORKER_ALLOWED = {"errors", "integrate.radau", "integrate.radau_walk", "fmu.worker", "fmu.me_integration",
                  "fmu.me_sensitivities", "fmu.me_kernel"}


@pytest.mark.parametrize("name", WORKER_SIDE)
def test_worker_side_modules_import_only_what_the_worker_loads(name):
    path = PACKAGE / name
    package = ".".join(path.relative_to(PACKAGE).parts[:-1])
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)] if package else []
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
                assert target in WORKER_ALLOWED, f"{name} imports {target}"
            else:
                assert (node.module or "").split(".")[0] in ("numpy", "scipy", "__future__", "collections",
                                                              "typing", "dataclasses", "math", "time", "warnings",
                                                              "ctypes"), \
                    f"{name} imports {node.module}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                # time: a built-in module (the run budget's clock), nothing to load
                # ctypes, fcntl, functools, hashlib, os: built in or loaded at start-up already (the
                # compiled loop: radau_walk, me_kernel)
                assert alias.name.split(".")[0] in ("numpy", "scipy", "math", "time", "dataclasses", "warnings",
                                                    "ctypes", "fcntl", "functools", "hashlib", "os"), \
                    f"{name} imports {alias.name}"
