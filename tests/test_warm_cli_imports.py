"""A warm command-line start loads only what its command needs (issue 24, part 6).

``fmi-adjoint simulate`` of a model whose build is cached must not import what only the other
commands use: the optimal input design, the parallel executors (multiprocessing, ssl), the
HTML reports, the identification strategies and the cost options.  Checked structurally, in
a fresh interpreter (which modules are loaded, never how long it takes).  The parser of one
command (:func:`~fmi_adjoint.cli.main.build_parser` with ``command``) must read a line as the
full parser does.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import pytest

from fmi_adjoint.cli.main import build_parser
from fmi_adjoint.examples import example_path
from fmi_adjoint.model_file import model_file_inputs

#: Runs the command line in this interpreter, then prints the exit code and sys.modules.
_PROBE = """
import json, sys
from fmi_adjoint.cli.main import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""

#: Modules (and their submodules) a warm ``simulate`` has no use for.
NOT_ON_THE_SIMULATE_PATH = (
    "fmi_adjoint.design",
    "fmi_adjoint.scale",
    "fmi_adjoint.report",
    "fmi_adjoint.identify.strategies",
    "fmi_adjoint.cli.cost_options",
    "multiprocessing",
    "ssl",
    "scipy.linalg",
    "scipy.sparse",
    "sympy",
)

#: Modules that import neither sympy nor scipy's sparse and dense linear algebra: their
#: symbolic work and the multibody components load on first use (issue 24, part 6).
LIGHT_MODULES = ("fmi_adjoint.model", "fmi_adjoint.expressions", "fmi_adjoint.structured", "fmi_adjoint.equations",
                 "fmi_adjoint.forces", "fmi_adjoint.forces.registry", "fmi_adjoint.mbs", "fmi_adjoint.mbs.registry",
                 "fmi_adjoint.model_file", "fmi_adjoint.compiled", "fmi_adjoint.warm")
#: What :data:`LIGHT_MODULES` must not load.
SYMBOLIC = ("sympy", "scipy.sparse", "scipy.linalg")


def _among(modules: list[str], packages: tuple[str, ...]) -> list[str]:
    """The ``modules`` that are one of ``packages`` or a submodule of one."""
    return sorted(name for name in modules if any(name == top or name.startswith(top + ".") for top in packages))


def _simulate_modules(tmp_path, model: str) -> list[str]:
    line = ["simulate", model, "--t-end", "0.01", "-o", str(tmp_path / "out.csv")]
    proc = subprocess.run([sys.executable, "-c", _PROBE, *line], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["code"] == 0, proc.stderr
    return result["modules"]


def test_warm_simulate_imports_no_other_command(tmp_path):
    _simulate_modules(tmp_path, "sdof")  # fills the build cache (the session's own folder)
    modules = _simulate_modules(tmp_path, "sdof")  # warm, in a fresh interpreter
    loaded = _among(modules, NOT_ON_THE_SIMULATE_PATH)
    assert not loaded, f"a warm simulate imported {loaded}"


def test_the_model_modules_import_no_sympy_nor_scipy():
    probe = f"import json, sys\nimport {', '.join(LIGHT_MODULES)}\nprint(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    modules = json.loads(proc.stdout.splitlines()[-1])
    loaded = _among(modules, SYMBOLIC)
    assert not loaded, f"importing the model modules loaded {loaded}"


def test_names_spelled_out_for_lazy_imports_match_their_sources():
    from fmi_adjoint import expressions
    from fmi_adjoint.mbs.forces import BUSHING_DIRECTIONS
    from fmi_adjoint.model_file import MODEL_FILE_KEYS

    assert expressions.FUNCTION_NAMES == set(expressions.FUNCTIONS)
    assert expressions.CONSTANT_NAMES == set(expressions.CONSTANTS)
    assert MODEL_FILE_KEYS["laws"][""] == frozenset(BUSHING_DIRECTIONS)


@pytest.mark.parametrize("line", [
    ["simulate", "sdof", "--t-end", "0.5", "--set", "k=2", "--integrator", "generalized_alpha", "--newton",
     "modified", "--engine", "python", "-o", "out.csv"],
    ["gradient", "sdof", "--data", "d.csv", "--params", "k,d", "--method", "forward", "--json"],
    ["identify", "sdof", "--data", "d.csv", "--params", "k", "--strategy", "single", "--starts", "3"],
    ["export", "sdof", "--fmi", "3", "--alpha", "-0.1", "-o", "m.fmu"],
    ["design", "sdof", "--input", "u", "--params", "k", "--knots", "4", "--bounds", "u=-1:1"],
    ["demo", "--method", "lbfgsb"],
    ["plugins", "check", "--all"],
    ["cache", "info", "--json"],
])
def test_one_command_parser_reads_the_line_as_the_full_parser(line):
    assert vars(build_parser(line[0]).parse_args(line)) == vars(build_parser().parse_args(line))


def test_model_file_inputs_skips_parsing_a_file_that_names_no_data_file(tmp_path, monkeypatch):
    path = tmp_path / "model.toml"
    path.write_text(example_path("sdof").read_text())

    def refuse(text):
        raise AssertionError("parsed although the text names no data file")

    monkeypatch.setattr(tomllib, "loads", refuse)
    assert model_file_inputs(path) == [("model file", path)]
