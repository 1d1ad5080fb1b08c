"""RESULT.json is owned by one module (fmi_adjoint.identify.result_file): written and read there.

The command line composes the record and hands it over; ``apply`` and ``validate`` read it back
through the same module (via :mod:`fmi_adjoint.fmu.result_file`, which adds the checks against an
FMU).  These tests write a record and read it back, and check that cli/ writes no JSON file
by hand.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from fmi_adjoint.errors import FmuError
from fmi_adjoint.fmu import result_file as fmu_result_file
from fmi_adjoint.identify.result_file import (read_result, read_result_interface, read_result_parameters,
                                              result_text, write_result)

PACKAGE = Path(__file__).resolve().parents[1] / "fmi_adjoint"


def test_a_written_record_reads_back(tmp_path):
    record = {"parameters": {"c": 2.5, "d": 0.125}, "settings": {"m": 3.0, "c": 1.0}, "interface": "ModelExchange",
              "success": True}
    path = tmp_path / "RESULT.json"
    write_result(path, result_text(record))
    assert path.read_text().endswith("}\n")
    assert read_result(path) == record
    # The identified values win over the settings they were identified from.
    assert read_result_parameters(path) == {"m": 3.0, "c": 2.5, "d": 0.125}
    assert read_result_interface(path) == "ModelExchange"
    # The FMU module reads through the same functions.
    assert fmu_result_file.read_result_parameters is read_result_parameters


def test_a_record_that_is_not_one_is_refused_by_name(tmp_path):
    path = tmp_path / "RESULT.json"
    path.write_text(json.dumps({"parameters": {"c": "two"}}))
    with pytest.raises(FmuError, match="parameter 'c' has the value 'two'"):
        read_result_parameters(path)
    path.write_text(json.dumps({"parameters": {"c": 1.0}, "interface": "Both"}))
    with pytest.raises(FmuError, match="not \"ModelExchange\" or \"CoSimulation\""):
        read_result_interface(path)


def _json_text_not_printed(tree: ast.AST) -> list[int]:
    """Lines of ``json.dump(...)`` calls and of ``json.dumps(...)`` calls whose text is not
    printed directly (``print(json.dumps(...))`` is the console, anything else becomes a file)."""
    printed = {id(arg) for node in ast.walk(tree)
               if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
               for arg in node.args}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "json":
            if node.func.attr == "dump" or (node.func.attr == "dumps" and id(node) not in printed):
                lines.append(node.lineno)
    return lines


#: JSON files cli/ still writes itself (issue 29 moves them to their format's module): none.
WRITTEN_BY_CLI: set[str] = set()


def test_the_command_line_writes_no_json_file_by_hand():
    """cli/ prints JSON on stdout at most; RESULT.json (identify/result_file) and DESIGN.json
    (design/report) go through the module of their format."""
    found = {path.name: _json_text_not_printed(ast.parse(path.read_text(encoding="utf-8")))
             for path in sorted((PACKAGE / "cli").glob("*.py"))}
    assert {name for name, lines in found.items() if lines} == WRITTEN_BY_CLI


def test_the_check_sees_a_file_written_by_hand():
    """A test of the test: the old way of writing RESULT.json is found, printing is not."""
    old = "with atomic_output(path) as handle:\n    handle.write(json.dumps(payload, indent=2) + '\\n')\n"
    assert _json_text_not_printed(ast.parse(old)) == [2]
    assert _json_text_not_printed(ast.parse("text = json.dumps(payload)\n")) == [1]
    assert _json_text_not_printed(ast.parse("json.dump(payload, handle)\n")) == [1]
    assert _json_text_not_printed(ast.parse("print(json.dumps(payload, indent=2))\n")) == []
