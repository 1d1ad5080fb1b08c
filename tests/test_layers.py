"""The packages import downward only (STYLE.md: cli / identify -> adjoint -> integrate -> model
-> forces -> errors).  Each component has a rank; a module may import only components of a
strictly lower rank (or its own component)."""

from __future__ import annotations

import ast
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
    "sparsity": 2,
    "expressions": 2,
    "cprint": 2,
    "toolchain": 2,
    "files": 2,
    "forces": 3,
    "scale": 3,
    "data": 3,
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
WORKER_SIDE = ("fmu/me_run.py", "fmu/me_integration.py", "fmu/me_sensitivities.py", "integrate/radau.py")
WORKER_ALLOWED = {"errors", "integrate.radau", "fmu.worker", "fmu.me_integration", "fmu.me_sensitivities"}


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
                                                              "typing", "dataclasses", "math", "time", "warnings"), \
                    f"{name} imports {node.module}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                # time: a built-in module (the run budget's clock), nothing to load
                assert alias.name.split(".")[0] in ("numpy", "scipy", "math", "time", "dataclasses", "warnings"), \
                    f"{name} imports {alias.name}"
