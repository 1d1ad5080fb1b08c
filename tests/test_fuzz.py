"""Generated fuzz suite of issue 10 ("What must be shown", second bullet).

More than 1000 generated inputs -- model files, CSV data files, RESULT.json files and FMU
archives -- each run through the real command line, in-process through
:func:`fmi_adjoint.cli.main.main`.  Every case must end either with exit code 0 and a valid
output (a CSV the tool reads back, gradient JSON with finite numbers, an SSV that parses),
or with exit code 2 and exactly one ``fmi-adjoint: error: ...`` line on stderr and nothing
on stdout.  Any other ending fails the case: a traceback, an ``internal error`` line (the
top-level handler's answer to an unexpected exception), a warning that a real process would
print, another exit code, a hang (a timer stops a case after :data:`CASE_SECONDS`), a file
left in the private temporary folder (``TMPDIR`` and :data:`tempfile.tempdir` point at a
fresh folder per test), a partial or stray output file, a file the injected C code would
create, or an error message that echoes the content of a file the tool must not read.

Which findings of issue 10 the families cover (each family failed on the code before the
issue was worked):

* model files (``simulate MODEL --engine python``): findings 1, 3 and 5 (names, look-alike
  letters, C/XML text, ``table_load`` paths outside the folder), 8 (long and deep
  expressions), 9 (huge integers, complex constants, ``--t-end inf``/``--step 1e-300``,
  control characters) and 10 (BOM, ``1_0``, non-finite constants, negative masses);
* multibody model files (issue 23; bodies, markers, joints, forces between markers,
  sensors; ``simulate MODEL --engine python``): every refusal the issue names alone (a joint
  on one body, two hinges, zero mass and inertia, the triangle inequality, a rotation that is
  not orthonormal, unknown names), then hostile values, references, types, rotations and laws
  mixed with valid edits;
* native engine (``simulate MODEL --engine native``, a handful): finding 1 (a C payload in
  names and descriptions must not compile into the engine) and 10 (negative masses,
  overflowing constants on the C engine);
* CSV files (``gradient MODEL --data X.csv --params c --json``): findings 8 (wide headers)
  and 10 (``1_0``, non-ASCII digits, NaN, unsorted times, BOM, NUL bytes, invalid UTF-8);
* RESULT.json (``apply RESULT.json --fmu X.fmu --ssv OUT.ssv``): finding 9 (huge integers,
  deep nesting) and 7 (nothing half-written);
* FMU archives (``apply`` with a valid RESULT.json): findings 2 (entries that extract over
  the checked ``modelDescription.xml``, DOCTYPE, wrong ``fmiVersion``) and 8 (declared
  sizes, bombs).

Every case is a pure function of ``(SEED, family, index)``: its argv (with ``{dir}``, the
case folder, and ``{shared}``, the module's shared inputs, as the only placeholders) and
its files.  A failure message names the family, index, argv, stderr and the case folder,
which is kept; ``python tests/test_fuzz.py FAMILY INDEX DIR`` writes the same case again.

Each family starts with systematic cases (every hostile expression, name, value, list, text,
CSV cell, header, cost option, JSON value, parameter name and file name of the tables below,
once and alone, at a random place) and continues with random combinations of mutations.
FMU cases mutate the FMU the module exports, whose GUID and time stamp differ per run; the
mutations themselves depend only on (SEED, index).

The families of issue 31 (checkpoints, cache layouts, ``--dask`` addresses, design options,
misbehaving Model Exchange FMUs) live in ``tests/test_fuzz_security.py`` and reuse this
module's machinery through its extension points: :class:`Case` carries environment variables,
the exit codes of a success and the folders a family judges itself, and :data:`PREPARE`,
:data:`VERIFY` and :data:`CHECKS` hold a family's set-up, its own contract checks and its
output checks.

Runtime: about 45 s on two shared cores (the slowest family, CSV, pays a model compile per
case because the data is read after the model is compiled); most mutations are refused at
parse time, simulations are a few steps long, and only 10 cases run the C compiler.  A
legitimately long run (a step of 1e-9 s is allowed) is not generated: it is no hang.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import dataclasses
import faulthandler
import gc
import io
import itertools
import json
import math
import os
import random
import re
import shutil
import signal
import struct
import sys
import tempfile
import traceback
import types
import warnings
import zipfile
from pathlib import Path
from xml.etree import ElementTree

import pytest

from fmi_adjoint.cli.main import main

pytestmark = pytest.mark.slow  # fuzzing: seconds per test; ./run test and CI run it, ./run fast does not

#: The one seed of the suite; a case is reproduced from (SEED, family, index).
SEED = 20_100
#: Cases per family (their sum is at least 1000, the issue's requirement).
COUNTS = types.MappingProxyType({"model": 570, "native": 10, "mbs": 80, "csv": 300, "result": 220,
                                 "fmu": 160})
#: A case that runs longer than this is a hang (the slowest legitimate case takes ~1 s).
CASE_SECONDS = 30
#: After this many hung cases a family stops: the test has failed already.
MAX_HANGS = 2
PREFIX = "fmi-adjoint: error: "
#: A marker only the "outside" file holds: an error message showing it echoed a file it must not read.
SECRET = "ZQX_SECRET_7f3a"
#: A valid table outside every case folder: reading it through a model file must be refused.
SECRET_TABLE = f"time,F,{SECRET}\n0,1,2\n1,2,3\n"
#: The file the injected C payload would create (relative to the working folder).
MARKER = "FUZZ_MARKER"

# ------------------------------------------------------------------------- the inputs --


class Raw(str):
    """TOML text written verbatim (numbers TOML or this serializer would not spell so)."""


def _toml_key(key: str) -> str:
    if key and all(ch.isascii() and (ch.isalnum() or ch in "_-") for ch in key):
        return key
    return _toml_string(key)


def _toml_string(text: str) -> str:
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04x}")
        elif 0xD800 <= code <= 0xDFFF:  # not representable in TOML: written as a replacement
            out.append("\ufffd")
        else:
            out.append(ch)
    return "".join(out) + '"'


def _toml_value(value) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(str(k))} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML spelling for {type(value).__name__}")


def to_toml(doc: dict) -> str:
    """TOML text of ``doc``: top-level values first, then tables, then arrays of tables."""
    head, tables, arrays = [], [], []
    for key, value in doc.items():
        if isinstance(value, dict) and not isinstance(value, Raw):
            tables.append(f"[{_toml_key(key)}]")
            tables += [f"{_toml_key(str(k))} = {_toml_value(v)}" for k, v in value.items()]
            tables.append("")
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for entry in value:
                arrays.append(f"[[{_toml_key(key)}]]")
                arrays += [f"{_toml_key(str(k))} = {_toml_value(v)}" for k, v in entry.items()]
                arrays.append("")
        else:
            head.append(f"{_toml_key(key)} = {_toml_value(value)}")
    return "\n".join(head + [""] + tables + arrays)


def _osc() -> dict:
    return {
        "model": {"name": "osc", "description": "fuzz base: one mass"},
        "simulation": {"t_end": 0.05, "step": 0.01},
        "parameters": {"m": 1.0, "c": {"value": 4.0, "unit": "N/m", "bounds": [1.0, 10.0]}},
        "coordinates": [{"name": "x", "mass": "m"}],
        "forces": [
            {"type": "linear_spring_damper", "name": "spring", "coordinates": ["x"], "stiffness": "c"},
            {"type": "load", "name": "push", "coordinate": "x", "expression": "sin(t)"},
        ],
        "outputs": [{"name": "x", "expression": "x", "unit": "m"}],
    }


def _two() -> dict:
    return {
        "model": {"name": "two", "description": "fuzz base: two masses", "source": "generated"},
        "simulation": {"t_end": "0.04", "step": 0.01, "alpha": -0.05},
        "parameters": {
            "m1": 1.0,
            "m2": {"value": 0.5, "unit": "kg", "bounds": [0.1, 2.0], "description": "second mass"},
            "k": {"value": 50.0, "unit": "N/m"},
            "d": 0.2,
        },
        "coordinates": [
            {"name": "x1", "kind": "translational", "mass": "m1", "initial_position": "0.01"},
            {"name": "x2", "mass": "m2", "initial_velocity": 0.1},
        ],
        "forces": [
            {"type": "linear_spring_damper", "name": "ground", "coordinates": ["x1"], "stiffness": "k",
             "damping": "d"},
            {"type": "linear_spring_damper", "name": "link", "coordinates": ["x1", "x2"], "stiffness": "2*k",
             "damping": "d", "free_length": 0.0},
            {"type": "load", "name": "push", "coordinate": "x2", "expression": "sin(3*t)"},
        ],
        "outputs": [{"name": "y1", "expression": "x1", "unit": "m"},
                    {"name": "v2", "expression": "der(x2)", "unit": "m/s"}],
    }


def _table() -> dict:
    doc = _osc()
    doc["model"]["name"] = "tab"
    doc["parameters"]["g"] = 2.0
    doc["forces"][1] = {"type": "table_load", "name": "shaker", "coordinate": "x", "file": "table.csv",
                        "column": "F", "scale": "g"}
    return doc


BASES = types.MappingProxyType({"osc": _osc, "two": _two, "table": _table})
TABLE_CSV = b"time,F\n0,0\n0.02,1\n0.04,0.5\n0.1,0\n"

#: Names: look-alikes, keywords of C and Python, reserved model names, C and XML syntax.
NAMES = (
    "\uff43", "\u0441", "x\u200b", "x\u0301", "\ufb01", "\u212a", "\u0131", "\u00b5", "int", "for", "class",
    "lambda", "None", "True", "double", "return", "static", "main", "t", "pi", "E", "I", "S", "N", "O", "Q",
    "sin", "time", "der", "der2", "lam", "reaction", "x", "c", "m", "__import__", "_", "__class__", 'a"b', "a'b",
    "a/*b", "*/", "//x", "a\nb", "a\x00b", "a\x1bb", "#define X 1", "../x", "x" * 65, "x" * 5000, "", " ", "1x",
    "a-b", "a b", "a\\b", "\U0001f600", "<x>", "&amp;", "]]>", "%s%n", "{0}", "NaN", "inf", "e", "fmi2Component",
    "fa_model", "__attribute__", "asm", "goto", "restrict", "_Bool", "register", "errno", "exit", "abs", "q_0",
    "p_0", "model", "x\u202e", "a\u2028b", "\ufeffx", "x\x7f",
)
#: Free text for descriptions, units and sources.
TEXTS = (
    'say "hi"', "*/ int evil; /*", "// comment", "line\nbreak", "tab\tend", "bell\x07", "esc\x1b[31m", "nul\x00",
    "<b>&amp;</b>", "]]>", "<!-- x -->", "\u2028", "\u202eevil", "\ufffe", "%s%s%n", "{}", "\\", "??=", "x" * 5000,
    "x" * 100_000, "", "\U0001f600 emoji", "m/s\u00b2", "\x7f", "a\rb",
)
#: A C payload that, compiled, creates MARKER in the working folder.
INJECT = ('x" */\n#include <stdio.h>\n__attribute__((constructor)) static void fuzz_pwn(void) '
          f'{{ FILE *f = fopen("{MARKER}", "w"); if (f) fclose(f); }}\n/* "')
#: Values of every type and size for any key.
VALUES = (
    0, -1, 1, 2**63 - 1, 2**64, -(2**63) - 1, 10**400, Raw("9" * 5000), 1e308, -1e308, 1e-320, 5e-324, math.nan,
    math.inf, -math.inf, -0.0, True, False, "", "abc", [], [1, 2], [1.0, "a"], {}, {"value": 1}, "1e400",
    "10**400", "nan", "inf", "-inf", "1/0", "0/0", "sqrt(-1)", "log(-1)", "log(0)", "exp(1000)", "9" * 500,
    Raw("0x10"), Raw("1_000"), Raw("0o17"), Raw("+inf"), Raw("-nan"), Raw("1979-05-27T07:32:00Z"), Raw("07:32:00"),
    "1_0", "\uff11", "\u0663", "  1  ", "1e308*10", "-m", "x", "t", "pi", "E", "-1e-300",
)
FUNCS = ("sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "exp", "log", "sqrt", "abs",
         "sign", "min", "max")
#: Expressions outside the grammar or its limits.
HOSTILE_EXPRESSIONS = (
    "__import__('os').system('touch FUZZ_MARKER')", "eval('1')", "exec('x=1')", "open('/etc/passwd')",
    "x.real", "x.__class__", "x[0]", "(lambda: 1)()", "[1,2]", "{1: 2}", "'str'", "f'{x}'", "b'x'", "x if t else 1",
    "x and t", "not x", "x == 1", "x < 1", "x // 2", "x % 2", "x @ x", "x << 2", "x ^ 2", "~x", "x := 1", "1j",
    "3 + 2j", "...", "None", "True", "x; x", "x\nx", "#", "", "   ", "foo(x)", "sin()", "sin(x, t)", "atan2(x)",
    "min()", "max(x)", "der(t)", "der(der(x))", "der2(x, x)", "lam(x)", "reaction(t)", "der('x')", "sin(x=1)",
    "sin(*x)", "1e400", "10**400", "2**10000", "9" * 400, "9" * 5000, "1e-400", "sqrt(-1)", "log(-1)", "log(0)",
    "1/0", "0/0", "0**-1", "(-8)**(1/3)", "exp(1000)", "exp(exp(100))", "x**x**x**x**x", "acos(2)", "asin(-3)",
    "((((((((((x))))))))))" * 3, "(" * 300 + "x" + ")" * 300, "-" * 3000 + "x", "+".join(["x"] * 3000),
    "*".join(f"(x+{k})" for k in range(100)), "*".join(["(x+t)"] * 64), "x" + "**2" * 50,
    "sin(" * 250 + "x" + ")" * 250, "x" * 30_000, "\uff58", "\u0445", "x\u200b", "x\x00", "t\x1b", "\\x", "x #c",
    "/* x */", "x // y", "'\"", "sin(x)\u00a0", "\u2212x",
)


def _number(rng: random.Random):
    return rng.choice(VALUES)


def _random_expression(rng: random.Random, names: list[str], depth: int) -> str:
    """A random expression of the grammar (and, now and then, a little outside it)."""
    roll = rng.random()
    if depth <= 0 or roll < 0.25:
        return rng.choice(names + ["t", "pi", "1", "2.5", "1e-3", "0", "1e30", "-1"])
    if roll < 0.55:
        op = rng.choice(["+", "-", "*", "/", "**", "*", "+"])
        return f"({_random_expression(rng, names, depth - 1)} {op} {_random_expression(rng, names, depth - 1)})"
    if roll < 0.65:
        return f"-{_random_expression(rng, names, depth - 1)}"
    func = rng.choice(FUNCS + ("der", "der2", "foo", "lam"))
    arity = 2 if func in ("atan2", "min", "max") else 1
    if rng.random() < 0.1:
        arity = rng.choice([0, 1, 2, 3])
    return f"{func}({', '.join(_random_expression(rng, names, depth - 1) for _ in range(arity))})"


def _paths(node, prefix=()):
    """Every key path of a document (containers included)."""
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for k, value in enumerate(node):
            found += _paths(value, prefix + (k,))
    return found


def _get(doc, path):
    for key in path:
        doc = doc[key]
    return doc


def _names_of(doc: dict) -> list[str]:
    names = []
    for section in ("coordinates", "outputs", "forces"):
        for entry in doc.get(section, []) if isinstance(doc.get(section), list) else []:
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                names.append(entry["name"])
    params = doc.get("parameters")
    return names + (list(params) if isinstance(params, dict) else [])


def _expression_paths(doc: dict) -> list[tuple]:
    keys = {"mass", "stiffness", "damping", "expression", "initial_position", "initial_velocity", "t_end", "step",
            "alpha", "value", "scale", "free_length"}
    return [p for p in _paths(doc) if p and p[-1] in keys]


def _mut_set_value(rng, doc, files):
    path = rng.choice(_paths(doc))
    value = _number(rng)
    _get(doc, path[:-1])[path[-1]] = copy.deepcopy(value)
    return f"set {path} = {value!r:.60}"


def _mut_delete(rng, doc, files):
    path = rng.choice(_paths(doc))
    del _get(doc, path[:-1])[path[-1]]
    return f"delete {path}"


def _mut_extra_key(rng, doc, files):
    tables = [p for p in _paths(doc) if isinstance(_get(doc, p), dict)] + [()]
    path = rng.choice(tables)
    key = rng.choice(["extra", "type", "name", "file", "times", "values", "coordinate", "kind", "unit", "__init__",
                      "bounds", "causality"] + list(NAMES[:10]))
    _get(doc, path)[key] = copy.deepcopy(_number(rng))
    return f"add {path}.{key!r}"


def _mut_name(rng, doc, files):
    holders = [p for p in _paths(doc) if p and p[-1] in ("name", "coordinate", "row", "col")]
    name = rng.choice(NAMES)
    roll = rng.random()
    if roll < 0.25 and isinstance(doc.get("parameters"), dict) and doc["parameters"]:
        old = rng.choice(list(doc["parameters"]))
        doc["parameters"] = {(name if k == old else k): v for k, v in doc["parameters"].items()}
        return f"rename parameter {old!r} to {name!r}"
    if roll < 0.35:
        doc.setdefault("model", {})
        if isinstance(doc["model"], dict):
            doc["model"]["name"] = name
        return f"model name {name!r}"
    path = rng.choice(holders) if holders else ("model", "name")
    _get(doc, path[:-1])[path[-1]] = name
    return f"name {path} = {name!r}"


def _mut_expression(rng, doc, files):
    paths = _expression_paths(doc)
    if not paths:
        return "no expression"
    path = rng.choice(paths)
    names = _names_of(doc) or ["x"]
    roll = rng.random()
    if roll < 0.45:
        text = rng.choice(HOSTILE_EXPRESSIONS)
    elif roll < 0.8:
        text = _random_expression(rng, names, rng.choice([1, 2, 3, 4]))
    else:
        text = rng.choice(NAMES)
    _get(doc, path[:-1])[path[-1]] = text
    return f"expression {path} = {text!r:.80}"


def _mut_duplicate(rng, doc, files):
    arrays = [k for k in ("coordinates", "forces", "outputs") if isinstance(doc.get(k), list) and doc[k]]
    if rng.random() < 0.3 and isinstance(doc.get("parameters"), dict) and arrays:
        section = rng.choice(arrays)
        entry = doc[section][0]
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            doc["parameters"][entry["name"]] = 1.0
            return f"parameter named like {section}[0]"
    if not arrays:
        return "nothing to duplicate"
    section = rng.choice(arrays)
    doc[section].append(copy.deepcopy(rng.choice(doc[section])))
    return f"duplicate an entry of {section}"


def _mut_text(rng, doc, files):
    holders = [p for p in _paths(doc) if p and p[-1] in ("description", "unit", "source")]
    path = rng.choice(holders + [("model", "description"), ("model", "source")])
    text = rng.choice(TEXTS)
    try:
        _get(doc, path[:-1])[path[-1]] = text
    except (TypeError, KeyError):
        return "no text"
    return f"text {path} = {text!r:.60}"


def _mut_table(rng, doc, files):
    forces = doc.get("forces")
    if not isinstance(forces, list):
        return "no forces"
    target = rng.choice(["table.csv", "../outside/secret.csv", "{outside}/secret.csv", "/etc/passwd", "/dev/zero",
                         "/proc/self/environ", "sub/../../outside/secret.csv", "", ".", "sub", "link.csv",
                         "dirlink/secret.csv", "nul\x00.csv", "missing.csv", "bad.csv", "big.csv",
                         "x" * 300 + ".csv", "~/x.csv", "file:///etc/passwd", "table.csv/"])
    column = rng.choice(["F", "F", "time", "G", "", "F\x00"])
    forces.append({"type": "table_load", "name": "tab2", "coordinate": "x", "file": target, "column": column})
    if target == "link.csv":
        files["link.csv"] = ("symlink", "{outside}/secret.csv")
    elif target.startswith("dirlink"):
        files["dirlink"] = ("symlink", "{outside}")
    elif target == "bad.csv":
        files["bad.csv"] = b"time,F\n0,1\n0,nan\n"
    elif target == "big.csv":
        files["big.csv"] = b"time,F\n" + b"".join(b"%d,1\n" % k for k in range(20_000))
    elif target == "sub":
        files["sub/keep"] = b""
    files.setdefault("table.csv", TABLE_CSV)
    return f"table_load file {target!r} column {column!r}"


#: table_load files that lie outside the model file's folder (after symlinks).
OUTSIDE_TABLES = frozenset({"../outside/secret.csv", "{outside}/secret.csv", "/etc/passwd", "/dev/zero",
                            "/proc/self/environ", "sub/../../outside/secret.csv", "link.csv", "dirlink/secret.csv"})


def _reads_outside(doc: dict) -> bool:
    forces = doc.get("forces")
    return isinstance(forces, list) and any(
        isinstance(f, dict) and f.get("type") == "table_load" and isinstance(f.get("file"), str)
        and f["file"] in OUTSIDE_TABLES for f in forces)


def _mut_simulation(rng, doc, files):
    # Steps are invalid or give at most a few hundred steps: a legitimately long run
    # (t_end/step up to the 5e7-step limit) is no hang but would not fit the time budget.
    sim = doc.setdefault("simulation", {})
    if not isinstance(sim, dict):
        return "no simulation"
    key = rng.choice(["t_end", "step", "alpha"])
    sim[key] = rng.choice([0, -1, 1e300, 1e-300, math.inf, math.nan, "inf", "1e9", 1e6, -0.1, 0.5, "1/3", -1,
                           "x", 5, 1e-4, Raw("9" * 400), 10**30])
    return f"simulation.{key} = {sim[key]!r:.40}"


def _mut_section(rng, doc, files):
    roll = rng.randrange(9)
    if roll == 0:
        key = rng.choice(list(doc))
        doc[key] = copy.deepcopy(_number(rng))
        return f"section {key} replaced by a value"
    if roll == 1:
        doc[rng.choice(["unknown", "Model", "model ", "fmu", "__proto__"])] = {"a": 1}
        return "unknown section"
    if roll == 2:
        for key in ("coordinates", "outputs", "forces"):
            if key in doc and rng.random() < 0.5:
                doc[key] = []
        return "emptied arrays"
    if roll == 3:
        doc["constraints"] = [{"name": rng.choice(("lock",) + NAMES[:20]),
                               "expression": _random_expression(rng, _names_of(doc) or ["x"], 2)}]
        return "constraint added"
    if roll == 4:
        doc["prescribed"] = [{"coordinate": rng.choice(["x", "x1", "t", "zz"]), "expression": rng.choice(
            ["sin(t)", "t", "x", "1/0", "der(x)"])}]
        return "prescribed motion added"
    if roll == 5:
        doc["mass_matrix"] = [{"row": rng.choice(["x", "x1", "zz"]), "col": rng.choice(["x", "x2", "zz"]),
                               "value": rng.choice(["m", "-1", "0", "nan", "cos(x)", 1e300])}]
        return "mass matrix entry added"
    if roll == 6:
        kind = rng.choice(["translational", "rotational", "Rotational", "", 1, "spherical"])
        for entry in doc.get("coordinates", []) if isinstance(doc.get("coordinates"), list) else []:
            if isinstance(entry, dict):
                entry["kind"] = kind
        return f"coordinate kind {kind!r}"
    if roll == 7:
        element = rng.choice(["maxwell", "elasto_backlash", "stribeck_friction", "polynomial_spring_damper", "nope",
                              "", "LOAD", "load ", "table_load", "magic_formula", "spline_characteristic", "tvd"])
        forces = doc.get("forces")
        if isinstance(forces, list):
            forces.append({"type": element, "name": "extra", "coordinates": ["x"], "coordinate": "x"})
        return f"element type {element!r}"
    deep = rng.choice([50, 500, 5000])
    doc["zz_deep"] = Raw("[" * deep + "1" + "]" * deep)
    return f"nested array of depth {deep}"


def _mut_mass(rng, doc, files):
    coords = doc.get("coordinates")
    if not isinstance(coords, list) or not coords or not isinstance(coords[0], dict):
        return "no coordinates"
    coords[0]["mass"] = rng.choice([-1.0, 0, "-m", "m*0", "1e400", "nan", "-1e-300", 1e308, "m - 2", Raw("-0")])
    return f"mass {coords[0]['mass']!r}"


#: A valid property set for each element type; the mutation makes one property hostile.
ELEMENTS = types.MappingProxyType({
    "linear_spring_damper": {"stiffness": "10", "damping": "0.1", "free_length": 0.0},
    "polynomial_spring_damper": {"k1": "10", "k3": 100.0, "d1": "0.1"},
    "maxwell": {"stiffness": 100.0, "damping": 1.0},
    "elasto_backlash": {"stiffness": 1000.0, "damping": 1.0, "gap": 0.001, "eps": 1e-5},
    "stribeck_friction": {"coulomb": 1.0, "static": 1.5, "stribeck_velocity": 0.01, "damping": 0.1, "v_eps": 1e-3},
    "magic_formula": {"B": 10.0, "C": 1.9, "D": 1.0, "E": 0.97, "variable": "velocity"},
    "spline_characteristic": {"knots": [-1.0, 0.0, 1.0], "values": [-10.0, 0.0, 10.0], "damping": 0.1},
    "dmf_spring": {"stiffness": [100.0, 200.0], "angles": [0.1]},
    "tvd": {"parallel_stiffness": 100.0, "stiffness": [100.0], "damping": [1.0]},
})
LISTS = ([], [1.0], [1.0, 0.0], [0, 10**400], [0.0, 1.0, 10**400], [0.0, 0.5, 1e300], [0.0, 1.0, math.nan],
         [0.0, 1.0, math.inf], ["a", "b", "c"], [[1.0], [2.0], [3.0]], [1.0, 2.0, "k"], [1.0] * 1000,
         [float(k) for k in range(1000)], [True, False, True], [{}, {}, {}], ["1e400", "2", "3"], ["0", "m", "2*m"],
         [-1.0, 1.0, 3.0], [0.0, 1e-300, 2e-300], [Raw("9" * 400), 1.0, 2.0])


def _mut_element(rng, doc, files):
    """A valid element of a random type with one property made hostile (80 %)."""
    coords = doc.get("coordinates")
    name = coords[0].get("name") if isinstance(coords, list) and coords and isinstance(coords[0], dict) else "x"
    element = rng.choice(list(ELEMENTS) + ["spline_characteristic", "dmf_spring"])
    spec = {"type": element, "name": "extra", "coordinates": [name], **copy.deepcopy(ELEMENTS[element])}
    note = "valid"
    if rng.random() < 0.8:
        lists = [k for k, v in spec.items() if isinstance(v, list) and k != "coordinates"]
        key = rng.choice(lists) if lists and rng.random() < 0.6 else rng.choice(list(spec))
        if isinstance(spec[key], list) and rng.random() < 0.8:
            spec[key] = copy.deepcopy(rng.choice(LISTS))
        else:
            spec[key] = copy.deepcopy(rng.choice([_number(rng), rng.choice(NAMES), rng.choice(HOSTILE_EXPRESSIONS)]))
        note = f"{key} = {spec[key]!r:.50}"
    forces = doc.get("forces")
    if isinstance(forces, list):
        forces.append(spec)
    return f"element {element}: {note}"


MODEL_MUTATIONS = (
    (_mut_set_value, 3), (_mut_delete, 2), (_mut_extra_key, 1), (_mut_name, 3), (_mut_expression, 4),
    (_mut_duplicate, 1), (_mut_text, 2), (_mut_table, 1), (_mut_simulation, 1), (_mut_section, 2), (_mut_mass, 1),
    (_mut_element, 3),
)


def _bytes_mutation(rng: random.Random, raw: bytes) -> tuple[bytes, str]:
    roll = rng.randrange(12)
    if roll == 0:
        return b"\xef\xbb\xbf" + raw, "BOM"
    if roll == 1:
        k = rng.randrange(len(raw) + 1)
        return raw[:k] + rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"]) + raw[k:], "bad UTF-8"
    if roll == 2:
        k = rng.randrange(len(raw) + 1)
        return raw[:k] + b"\x00" + raw[k:], "NUL byte"
    if roll == 3:
        return raw[: rng.randrange(len(raw) + 1)], "truncated"
    if roll == 4:
        return raw.replace(b"\n", b"\r\n"), "CRLF"
    if roll == 5:
        return raw.replace(b"\n", b"\r"), "CR only"
    if roll == 6:
        data = bytearray(raw)
        for _ in range(rng.randrange(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data), "bytes flipped"
    if roll == 7:
        return bytes(rng.randrange(256) for _ in range(rng.choice([1, 64, 4096]))), "random bytes"
    if roll == 8:
        return b"", "empty"
    if roll == 9:
        lines = raw.split(b"\n")
        k = rng.randrange(len(lines))
        return b"\n".join(lines[: k + 1] + lines[k:]), "line repeated"
    if roll == 10:
        return raw.decode("utf-8", "replace").encode("utf-16"), "UTF-16"
    return b"\xef\xbb\xbf\xef\xbb\xbf" + raw, "two BOMs"


def _weighted(rng: random.Random, table):
    return rng.choices([f for f, _ in table], weights=[w for _, w in table])[0]


@dataclasses.dataclass(frozen=True)
class Case:
    """One generated run: files (relative path -> bytes, or ("symlink", target)), argv and
    what a success must have written."""

    family: str
    index: int
    argv: tuple[str, ...]
    files: dict
    description: str
    outputs: tuple[str, ...] = ()       # files (relative to the case folder) written on success
    check: str = ""                     # name of the success check
    must_fail: str = ""                 # why exit 0 would be wrong ("" = either ending is fine)
    env: tuple[tuple[str, str], ...] = ()   # environment variables of the run ({dir}, {shared} expanded)
    success_codes: tuple[int, ...] = (0,)   # exit codes of a successful run (outputs checked)
    judged: tuple[str, ...] = ()        # top-level names in the case folder that VERIFY judges, not the
    #                                     stray-file check (e.g. a cache folder the command may change)


def _rng(family: str, index: int) -> random.Random:
    return random.Random(f"{SEED}/{family}/{index}")


def _match_lengths(spec: dict, key: str) -> None:
    """Give the companion list of ``spec[key]`` the length it must have, so that the
    hostile values themselves are checked (not the lengths)."""
    n = len(spec[key])
    companion, size = {
        ("spline_characteristic", "knots"): ("values", n), ("spline_characteristic", "values"): ("knots", n),
        ("dmf_spring", "stiffness"): ("angles", n - 1), ("dmf_spring", "angles"): ("stiffness", n + 1),
        ("tvd", "stiffness"): ("damping", n), ("tvd", "damping"): ("stiffness", n),
    }[(spec["type"], key)]
    spec[companion] = [0.1 * (k + 1) for k in range(max(size, 0))]


def _place(rng, doc, files, kind: str, item) -> str:
    """Put one hostile ``item`` of ``kind`` at a random place of its kind (the systematic cases)."""
    if kind == "expression":
        path = rng.choice(_expression_paths(doc))
    elif kind == "output":
        path = ("outputs", rng.randrange(len(doc["outputs"])), "expression")
    elif kind == "name":
        if rng.random() < 0.3:
            old = rng.choice(list(doc["parameters"]))
            doc["parameters"] = {(item if k == old else k): v for k, v in doc["parameters"].items()}
            return f"parameter {old!r} renamed {item!r:.60}"
        path = rng.choice([p for p in _paths(doc) if p[-1] in ("name", "coordinate")])
    elif kind == "value":
        path = rng.choice([p for p in _paths(doc) if not isinstance(_get(doc, p), (dict, list))])
    elif kind == "list":
        coords = [c["name"] for c in doc["coordinates"]]
        element = rng.choice(["spline_characteristic", "dmf_spring"] + (["tvd"] if len(coords) > 1 else []))
        spec = {"type": element, "name": "extra", "coordinates": coords[:2] if element == "tvd" else coords[:1],
                **copy.deepcopy(ELEMENTS[element])}
        key = rng.choice([k for k, v in ELEMENTS[element].items() if isinstance(v, list)])
        spec[key] = copy.deepcopy(item)
        _match_lengths(spec, key)
        doc["forces"].append(spec)
        return f"element {element}: {key} = {item!r:.60}"
    else:
        path = rng.choice([("model", "description"), ("model", "source"), ("outputs", 0, "unit"),
                           ("outputs", 0, "description")])
    _get(doc, path[:-1])[path[-1]] = copy.deepcopy(item)
    return f"{kind} {path} = {item!r:.60}"


def model_case(index: int, family: str = "model") -> Case:
    """``simulate`` of a mutated small model (``--engine native`` for the family "native")."""
    rng = _rng(family, index)
    base = rng.choice(list(BASES))
    doc = BASES[base]()
    files: dict = {"table.csv": TABLE_CSV} if base == "table" else {}
    notes = [f"base {base}"]
    must_fail = ""
    if family == "native":
        # Names and free text reach the generated C; a few numbers test the C engine's checks.
        choice = index % 5
        if choice == 4:
            doc["parameters"]["c"]["description"] = INJECT
            doc["parameters"]["c"]["unit"] = "*/" + INJECT
            notes.append("C payload in a parameter's description and unit")
        elif choice == 0:
            doc["model"]["name"] = INJECT
            notes.append("C payload in the model name")
        elif choice == 1:
            doc["model"]["description"] = INJECT
            doc["outputs"][0]["unit"] = INJECT
            notes.append("C payload in description and unit")
        elif choice == 2:
            doc["coordinates"][0]["mass"] = rng.choice(["-1", -2.0, "0-m"])
            must_fail = "a negative mass"
            notes.append("negative mass")
        else:
            doc["parameters"]["m"] = rng.choice([Raw("1" + "0" * 400), "1e400", Raw("-" + "9" * 320)])
            must_fail = "a constant beyond the float range"
            notes.append("huge constant")
    elif index < len(MODEL_SYSTEMATIC):
        notes.append(_place(rng, doc, files, *MODEL_SYSTEMATIC[index]))
    else:
        for _ in range(rng.choice([1, 1, 1, 2, 2, 3])):
            notes.append(_weighted(rng, MODEL_MUTATIONS)(rng, doc, files))
    systematic = family == "model" and index < len(MODEL_SYSTEMATIC)
    text = to_toml(doc)
    raw = text.encode("utf-8", "surrogatepass")
    mutated_bytes = family == "model" and not systematic and rng.random() < 0.15
    if mutated_bytes:
        raw, what = _bytes_mutation(rng, raw)
        notes.append(what)
    files["model.toml"] = raw
    argv = ["simulate", "{dir}/model.toml", "--engine", "native" if family == "native" else "python",
            "-o", "{dir}/out.csv"]
    if family == "model" and not systematic and rng.random() < 0.12:
        option = rng.choice(["--t-end", "--step", "--alpha", "--set", "--set"])
        if option == "--set":
            value = f"{rng.choice(['m', 'c', 'k', 'zz', '', 'x', chr(0xff43), 'm=1'])}=" \
                    f"{rng.choice(['2', 'nan', 'inf', '1_0', '1e400', '', '-1', '0x1', chr(0x663)])}"
        else:
            value = rng.choice(["inf", "nan", "1e300", "1e-300", "-1", "0", "0.02", "1e-3", "-0.1", "1e-2"])
        argv += [option, value]
        notes.append(f"{option} {value}")
    if family == "model" and not mutated_bytes and _reads_outside(doc):
        must_fail = "a table_load file outside the model's folder"
    return Case(family, index, tuple(argv), files, "; ".join(notes), ("out.csv",), "csv", must_fail)


#: The first model cases: every hostile expression, name, value, list and text once, alone.
MODEL_SYSTEMATIC = tuple([("expression", e) for e in HOSTILE_EXPRESSIONS] + [("output", e) for e in HOSTILE_EXPRESSIONS]
                    + [("name", n) for n in NAMES]
                    + [("value", v) for v in VALUES] + [("list", v) for v in LISTS] + [("text", t) for t in TEXTS])


# -- multibody model files (issue 23) -----------------------------------------------------

def _pendulum() -> dict:
    return {
        "model": {"name": "pend", "description": "fuzz base: planar pendulum", "gravity": [0, "-g", 0]},
        "simulation": {"t_end": 0.03, "step": 0.01},
        "parameters": {"m": 1.0, "l": {"value": 1.0, "unit": "m"}, "g": 9.81, "c": 2.0},
        "bodies": [{"name": "rod", "type": "planar", "mass": "m", "inertia": "m*l**2/12", "position": [0, "-l/2"],
                    "angle": 0.0, "angular_velocity": 1.0}],
        "markers": [{"name": "pivot", "body": "ground"}, {"name": "top", "body": "rod", "position": [0, "l/2"]}],
        "joints": [{"name": "hinge", "type": "revolute", "markers": ["pivot", "top"]}],
        "forces": [{"type": "joint_force", "name": "torsion", "joint": "hinge",
                    "law": {"type": "linear_spring_damper", "stiffness": "c", "damping": 0.1}}],
        "sensors": [{"type": "joint_coordinate", "name": "angle", "joint": "hinge"},
                    {"type": "joint_reaction", "name": "cell", "joint": "hinge", "components": ["fx", "fy"]}],
    }


def _mounted() -> dict:
    law = {"type": "linear_spring_damper", "stiffness": "k", "damping": "d"}
    return {
        "model": {"name": "mounted", "description": "fuzz base: a mass on a bushing", "gravity": [0, 0, "-g"]},
        "simulation": {"t_end": 0.02, "step": 0.01},
        "parameters": {"m": 2.0, "g": 9.81, "k": {"value": 1000.0, "unit": "N/m"}, "d": 5.0},
        "bodies": [{"name": "block", "type": "point_mass", "mass": "m", "position": [0, 0, 0.01],
                    "velocity": [0.1, 0, 0]}],
        "markers": [{"name": "base", "body": "ground", "position": [0, 0, -0.1],
                     "orientation": {"cardan": [0.0, 0.1, 0.0]}},
                    {"name": "foot", "body": "block", "position": [0, 0, -0.1]},
                    {"name": "corner", "body": "block", "position": [0.1, 0.1, 0.1],
                     "orientation": {"axis": [0, 0, 1], "angle": 0.5}}],
        "forces": [{"type": "bushing", "name": "mount", "markers": ["base", "foot"],
                    "laws": {"x": dict(law), "y": dict(law), "z": dict(law)}},
                   {"type": "spring_damper", "name": "strap", "markers": ["base", "corner"],
                    "law": {"type": "linear_spring_damper", "stiffness": "k/10", "free_length": 0.2}},
                   {"type": "force", "name": "push", "marker": "corner", "vector": ["sin(t)", 0, 0], "frame": "body"}],
        "sensors": [{"type": "marker_acceleration", "name": "acc", "marker": "corner", "frame": "marker",
                     "gravity": True, "components": ["x", "z"]},
                    {"type": "distance", "name": "gap", "markers": ["base", "corner"]}],
    }


def _top() -> dict:
    """A spatial body (its refusals are found before the model is built: no slow valid case)."""
    return {
        "model": {"name": "top", "description": "fuzz base: a spatial body", "gravity": [0, 0, -9.81]},
        "parameters": {"m": 1.0},
        "bodies": [{"name": "top", "type": "spatial", "mass": "m", "inertia": [0.1, 0.2, 0.25],
                    "rotation": {"cardan": [0.0, 0.1, 0.0]}}],
        "markers": [{"name": "tip", "body": "top", "position": [0, 0, -0.5]}],
        "sensors": [{"type": "orientation", "name": "ori", "marker": "tip"}],
    }


MBS_BASES = types.MappingProxyType({"pendulum": _pendulum, "mounted": _mounted, "top": _top})
#: Rotations that must be refused (not orthonormal, a zero axis, not numbers, wrong shapes).
BAD_ROTATIONS = (
    {"matrix": [[1, 0, 0], [0, 1, 0.1], [0, 0, 1]]}, {"matrix": [[-1, 0, 0], [0, 1, 0], [0, 0, 1]]},
    {"matrix": [[1, 0, 0], [0, 1, 0]]}, {"matrix": [[1, 0], [0, 1], [0, 0]]}, {"axis": [0, 0, 0], "angle": 1.0},
    {"axis": [0, 0, 1], "angle": "nan"}, {"axis": [0, 0, 1], "angle": "t"}, {"cardan": ["x", 0, 0]},
    {"cardan": [0, 0]}, {"axis": [1, 0, 0]}, {"axis": [1, 0, 0], "angle": 1, "cardan": [0, 0, 0]}, {},
    {"matrix": [[math.nan, 0, 0], [0, 1, 0], [0, 0, 1]]}, {"matrix": [[2, 0, 0], [0, 1, 0], [0, 0, 1]]},
)
#: Paths of an entry whose values are expressions or numbers.
_MBS_VALUE_KEYS = {"mass", "inertia", "position", "velocity", "angle", "angular_velocity", "drive", "vector",
                   "gravity", "stiffness", "damping", "free_length", "axis", "axis_j", "derivative"}


def _mbs_value_paths(doc: dict) -> list[tuple]:
    return [p for p in _paths(doc) if p and any(key in _MBS_VALUE_KEYS for key in p if isinstance(key, str))
            and not isinstance(_get(doc, p), (dict, list))]


def _entries(doc: dict, section: str) -> list:
    value = doc.get(section)
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


def _mut_mbs_value(rng, doc, files):
    paths = _mbs_value_paths(doc)
    if not paths:
        return "no multibody value"
    path = rng.choice(paths)
    value = rng.choice([_number(rng), rng.choice(HOSTILE_EXPRESSIONS), rng.choice(NAMES),
                        _random_expression(rng, ["m", "g", "t", "rod_phi", "block_x", "der(rod_phi)"], 2)])
    _get(doc, path[:-1])[path[-1]] = copy.deepcopy(value)
    return f"multibody value {path} = {value!r:.60}"


def _mut_mbs_reference(rng, doc, files):
    holders = [p for p in _paths(doc) if p and (p[-1] in ("body", "joint", "marker")
                                              or (len(p) > 1 and p[-2] == "markers" and isinstance(p[-1], int)))]
    if not holders:
        return "no reference"
    path = rng.choice(holders)
    name = rng.choice(NAMES + ("ground", "nope", "rod", "top", "pivot", "hinge", "block", "foot", "base"))
    _get(doc, path[:-1])[path[-1]] = name
    return f"reference {path} = {name!r:.40}"


def _mut_mbs_type(rng, doc, files):
    section = rng.choice(["bodies", "joints", "sensors", "forces"])
    entries = _entries(doc, section)
    if not entries:
        return f"no {section}"
    kind = rng.choice(["spatial", "planar", "point_mass", "revolute", "spherical", "universal", "fixed", "planar",
                       "prismatic", "cylindrical", "bushing", "spring_damper", "joint_force", "force", "torque",
                       "distance", "orientation", "joint_reaction", "marker_velocity", "rigid", "", "Revolute", 3,
                       "linear_spring_damper", "table_load"])
    rng.choice(entries)["type"] = kind
    return f"{section} type {kind!r}"


def _mut_mbs_rotation(rng, doc, files):
    entries = _entries(doc, "bodies") + _entries(doc, "markers")
    if not entries:
        return "no body or marker"
    rotation = copy.deepcopy(rng.choice(BAD_ROTATIONS))
    entry = rng.choice(entries)
    key = "orientation" if "body" in entry else "rotation"
    entry[key] = rotation
    return f"{key} of {entry.get('name')!r} = {rotation!r:.60}"


def _mut_mbs_law(rng, doc, files):
    forces = [f for f in _entries(doc, "forces") if "law" in f or "laws" in f]
    if not forces:
        return "no law"
    force = rng.choice(forces)
    law = rng.choice([_number(rng), {"type": rng.choice(["maxwell", "nope", "table_load", "bushing", "load", 1])},
                      {"type": "linear_spring_damper", "name": "x"}, {"type": "linear_spring_damper",
                                                                      "coordinates": ["x"]},
                      {"type": "spline_characteristic", "knots": rng.choice(LISTS), "values": [0.0, 1.0, 2.0]},
                      {"type": "linear_spring_damper", "stiffness": rng.choice(HOSTILE_EXPRESSIONS)}])
    if "law" in force:
        force["law"] = copy.deepcopy(law)
    elif isinstance(force["laws"], dict):
        force["laws"][rng.choice(["x", "rz", "ry", "w", ""])] = copy.deepcopy(law)
    return f"law of {force.get('name')!r} = {law!r:.60}"


def _mut_mbs_duplicate(rng, doc, files):
    section = rng.choice(["bodies", "markers", "joints", "sensors", "forces"])
    entries = doc.get(section)
    if not isinstance(entries, list) or not entries:
        return f"no {section} to duplicate"
    entries.append(copy.deepcopy(rng.choice(entries)))
    return f"duplicate an entry of {section}"


#: Valid edits of the bases (the valid paths of the reader), each tried on whichever base it fits.
MBS_VALID_EDITS = (
    lambda doc: doc["joints"][0].update(axis=[0, 0, 1]),
    lambda doc: doc["joints"][0].update(drive="0.1*t"),
    lambda doc: doc["forces"][0].update(law={"type": "maxwell", "damping": 2.0}),
    lambda doc: doc["forces"][0]["laws"].update(x={"type": "maxwell", "damping": 2.0}),
    lambda doc: doc["forces"][1].update(law={"type": "velocity_characteristic", "knots": [-1, 0, 1],
                                             "values": [-2, 0, 3]}),
    lambda doc: doc["bodies"][0].update(fixed_position=True),
    lambda doc: doc["bodies"][0].update(angle="pi/8"),
    lambda doc: doc["model"].update(gravity=[0, -9.81, 0]),
    lambda doc: doc["sensors"].append({"type": "marker_velocity", "name": "vel", "marker": doc["markers"][1]["name"],
                                       "frame": "body"}),
    lambda doc: doc["sensors"].append({"type": "marker_position", "name": "pos", "marker": doc["markers"][1]["name"],
                                       "components": ["y"]}),
    lambda doc: doc["forces"].append({"type": "torque", "name": "drive", "body": doc["bodies"][0]["name"],
                                      "vector": [0, 0, "0.1*sin(t)"]}),
    lambda doc: doc["markers"][1].update(position=[0, "2*m", 0]),
    lambda doc: doc["forces"][2].update(frame="marker"),
)


def _mut_mbs_valid(rng, doc, files):
    k = rng.randrange(len(MBS_VALID_EDITS))
    try:
        MBS_VALID_EDITS[k](doc)
    except (KeyError, IndexError, TypeError, AttributeError):
        return f"valid edit {k} does not fit"
    return f"valid edit {k}"


MBS_MUTATIONS = (
    (_mut_mbs_valid, 6), (_mut_mbs_value, 4), (_mut_mbs_reference, 3), (_mut_mbs_type, 2), (_mut_mbs_rotation, 1),
    (_mut_mbs_law, 2),
    (_mut_mbs_duplicate, 1), (_mut_set_value, 1), (_mut_delete, 2), (_mut_extra_key, 2), (_mut_text, 1),
)
#: Changes a multibody file must be refused for, each alone in the first cases of the family.
MBS_SYSTEMATIC = (
    ("joint on one body", lambda doc: doc["joints"][0].update(markers=["top", "top"])),
    ("two hinges", lambda doc: doc["joints"].append({**doc["joints"][0], "name": "hinge2"})),
    ("zero mass", lambda doc: doc["bodies"][0].update(mass=0)),
    ("negative inertia", lambda doc: doc["bodies"][0].update(inertia="-m")),
    ("unknown marker", lambda doc: doc["joints"][0].update(markers=["pivot", "tpo"])),
    ("unknown body", lambda doc: doc["markers"][1].update(body="rood")),
    ("unknown joint", lambda doc: doc["sensors"][0].update(joint="hinje")),
    ("name used twice", lambda doc: doc["markers"][1].update(name="pivot")),
    ("C payload in a marker name", lambda doc: doc["markers"][1].update(name=INJECT)),
    ("triangle inequality", lambda doc: doc["bodies"][0].update(inertia=[0.1, 0.1, 0.5])),
    ("not orthonormal", lambda doc: doc["bodies"][0].update(rotation={"matrix": [[1, 0, 0], [0, 1, 1e-3],
                                                                                   [0, 0, 1]]})),
    ("expression outside the grammar", lambda doc: doc["markers"][2].update(position=[0, "__import__('os')", 0])),
    ("spherical between planar bodies", lambda doc: doc["joints"][0].update(type="spherical")),
)


def mbs_case(index: int) -> Case:
    """``simulate`` of a mutated multibody model file (bodies, markers, joints, forces, sensors)."""
    rng = _rng("mbs", index)
    notes: list[str] = []
    must_fail = ""
    if index < len(MBS_SYSTEMATIC):
        what, change = MBS_SYSTEMATIC[index]
        base = {"triangle inequality": "top", "not orthonormal": "top",
                "expression outside the grammar": "mounted"}.get(what, "pendulum")
        doc = MBS_BASES[base]()
        change(doc)
        notes += [f"base {base}", what]
        must_fail = what
    else:
        base = rng.choice(["pendulum", "mounted"])  # a valid spatial body takes seconds to build
        doc = MBS_BASES[base]()
        notes.append(f"base {base}")
        for _ in range(rng.choice([1, 1, 2, 2, 3])):
            mutation = _weighted(rng, MBS_MUTATIONS)
            notes.append(mutation(rng, doc, {}))
            # A later mutation may delete the bad rotation: only the last one is sure to be refused.
            bad = mutation is _mut_mbs_rotation and notes[-1] != "no body or marker"
            must_fail = "a rotation that is not a rotation" if bad else ""
    raw = to_toml(doc).encode("utf-8", "surrogatepass")
    if index >= len(MBS_SYSTEMATIC) and rng.random() < 0.1:
        raw, what = _bytes_mutation(rng, raw)
        notes.append(what)
        must_fail = ""  # a BOM or CRLF leaves the file valid
    argv = ["simulate", "{dir}/model.toml", "--engine", "python", "-o", "{dir}/out.csv"]
    return Case("mbs", index, tuple(argv), {"model.toml": raw}, "; ".join(notes), ("out.csv",), "csv", must_fail)


# -- CSV data ------------------------------------------------------------------------------

GRADIENT_MODEL = to_toml(_osc())
_TIMES = [0.0, 0.01, 0.02, 0.03, 0.04, 0.05]


def _csv_rows() -> list[list[str]]:
    return [["time", "x"]] + [[repr(t), f"{0.1 * math.sin(t):.6g}"] for t in _TIMES]


CELLS = (
    "1_0", "\u0661\u066b\u0665", "\uff11", "\u00b2", "nan", "NaN", "-nan", "inf", "-Infinity", "1e999", "-1e999",
    "0x10", "", " ", "1,5", "1e-400", "+.5", ".", "e5", "--1", "1.2.3", "9" * 10_000, "1e", "0.1 ", " 0.1",
    "\t0.1", "1\u00a0", "\u22121", "1d0", "1.0f", "true", "None", "'1'", '"1"', "\x00", "1\x00", "\u200b1", "0b1",
    "1j", "∞", "1E+2", "-0", "+0.0", "00001", "1.", "1e+", "١",
)
HEADERS = (
    ["Time", "x"], [" time ", "x"], ["time", "x", "x"], ["time", "", "x"], ["time;x"], ["\ufefftime", "x"],
    ["\uff54ime", "x"], ["time", "x\u200b"], ["time", "y"], ["x"], ["time"], ["time", "time"], ["x", "time"],
    ["time", "x", "y"], ["time", "X"], ["time", "\uff58"], ["time\x00", "x"], ["time", "x" * 10_000],
    ["TIME", "x"], ["time", "x", ""], ["time", "c"], ["time", "m"],
)


def _csv_text(rows: list[list[str]], rng: random.Random) -> bytes:
    out = io.StringIO()
    quoting = rng.choice([csv.QUOTE_MINIMAL] * 4 + [csv.QUOTE_ALL, csv.QUOTE_NONNUMERIC])
    writer = csv.writer(out, lineterminator=rng.choice(["\n"] * 5 + ["\r\n"]), quoting=quoting)
    try:
        writer.writerows(rows)
    except (csv.Error, ValueError):  # QUOTE_NONNUMERIC on strings: plain rows instead
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue().encode("utf-8", "surrogatepass")


_BAD_CELLS = frozenset({"1_0", "\u0661\u066b\u0665", "\uff11", "\u00b2", "nan", "NaN", "-nan", "inf", "-Infinity",
                        "1e999", "-1e999", "0x10", "1,5", ".", "e5", "--1", "1.2.3", "9" * 10_000, "1e", "\u22121",
                        "1d0", "1.0f",
                        "true",
                        "None", "'1'", "\x00", "1\x00", "\u200b1", "0b1", "1j", "\u221e", "1e+", "\u0661", "1\u00a0"})


def _csv_must_fail(rows: list[list[str]]) -> str:
    """Why the final rows must be refused ("" if they may be accepted)."""
    if len(rows[0]) > 10_000:
        return "more than 10 000 columns"
    for row in rows[1:]:
        for cell in row:
            if cell in _BAD_CELLS:
                return f"the cell {cell!r:.20} (no finite plain decimal)"
    if "time" not in rows[0]:
        return ""
    k = rows[0].index("time")
    try:
        times = [float(row[k]) for row in rows[1:] if row and any(c.strip() for c in row)]
    except (ValueError, IndexError):
        return ""
    if any(b <= a for a, b in itertools.pairwise(times)):
        return "times that do not increase"
    return ""


#: Cost options of ``gradient`` (finding 8: bands and sample counts bounded before allocating).
COST_OPTIONS = (
    ["--weight", "x=nan"], ["--weight", "x=-1"], ["--weight", "zz=1"], ["--scale", "x=0"], ["--scale", "x=1e-320"],
    ["--weight", "x=1e308"], ["--cost", "fourier", "--channel", "x", "--band", "0:1e9"],
    ["--cost", "fourier", "--channel", "x", "--band", "0:1e300"], ["--cost", "fourier", "--channel", "x",
                                                                  "--band", "10:1"],
    ["--cost", "fourier", "--channel", "x", "--frequencies", "1,2,nan"],
    ["--cost", "fourier", "--channel", "x", "--frequencies", ",".join(["1"] * 5000)],
    ["--cost", "fourier", "--channel", "x", "--frequencies", "1e300"], ["--cost", "fourier", "--channel", "x",
                                                                       "--frequencies", "20", "--window", "hann"],
    ["--cost", "fourier", "--channel", "x", "--frequencies", "20", "--window-limits", "0.04:0.01"],
    ["--cost", "fourier", "--channel", "zz", "--frequencies", "20"], ["--cost", "fourier"],
    ["--cost", "pod", "--modes", "1"], ["--cost", "pod", "--modes", "0"], ["--cost", "pod", "--modes", "99999999999"],
    ["--cost", "orders", "--channel", "x", "--order", "6", "--runup", "1000:2000:0:0.05"],
    ["--cost", "orders", "--channel", "x", "--order", "nan", "--runup", "1:1:0:0"],
    ["--cost", "time", "--band", "0:1"],
)


#: The first CSV cases: every hostile cell, header and cost option once, alone.
CSV_SYSTEMATIC = tuple([("cell", c) for c in CELLS] + [("header", h) for h in HEADERS]
                  + [("options", o) for o in COST_OPTIONS])


def csv_case(index: int) -> Case:
    """``gradient`` of the small model against a mutated measurement."""
    rng = _rng("csv", index)
    rows = _csv_rows()
    notes: list[str] = []
    systematic = index < len(CSV_SYSTEMATIC)
    if systematic:
        kind, item = CSV_SYSTEMATIC[index]
        if kind == "cell":
            r, c = rng.randrange(1, len(rows)), rng.randrange(2)
            rows[r][c] = item
            notes.append(f"cell ({r},{c}) = {item!r:.40}")
        elif kind == "header":
            rows[0] = list(item)
            notes.append(f"header {item!r:.60}")
    for _ in range(0 if systematic else rng.choice([1, 1, 2, 3])):
        roll = rng.randrange(12)
        if roll == 0:
            rows[0] = list(rng.choice(HEADERS))
            notes.append(f"header {rows[0]!r:.60}")
        elif roll in (1, 2, 3) and len(rows) > 1:
            r = rng.randrange(1, len(rows))
            if rows[r]:
                c = rng.randrange(len(rows[r]))
                rows[r][c] = rng.choice(CELLS)
                notes.append(f"cell ({r},{c}) = {rows[r][c]!r:.40}")
        elif roll == 4 and len(rows) > 3:
            k = rng.randrange(1, len(rows) - 1)
            rows[k], rows[k + 1] = rows[k + 1], rows[k]
            notes.append("two rows swapped")
        elif roll == 5 and len(rows) > 1:
            k = rng.randrange(1, len(rows))
            rows.insert(k, list(rows[k]))
            notes.append("row repeated")
        elif roll == 6 and len(rows) > 1 and rows[-1]:
            k = len(rows) - 1
            rows[k] = rows[k][: rng.randrange(len(rows[k]))] if rng.random() < 0.5 else rows[k] + ["1"] * \
                rng.choice([1, 2, 100_000])
            notes.append(f"ragged row {k}")
        elif roll == 7:
            width = rng.choice([10_001, 100_000])
            rows[0] = ["time"] + [f"c{k}" for k in range(width)]
            notes.append(f"{width} columns")
        elif roll == 8:
            rows = rows[: rng.randrange(1, 3)]
            notes.append(f"{len(rows) - 1} data rows")
        elif roll == 9:
            t = rng.choice(["1e300", "-1", "1e9", "0.2", "1e-300", "0.051", "5e-324", "0.05000000001"])
            if rows[-1]:
                rows[-1][0] = t
                notes.append(f"last time {t}")
        elif roll == 10:
            rows = [r[::-1] for r in rows]
            notes.append("columns reversed")
        else:
            rows.append([])
            rows.insert(1, ["", ""])
            notes.append("blank rows")
    must_fail = _csv_must_fail(rows)
    raw = _csv_text(rows, rng)
    if not systematic and rng.random() < 0.25:
        roll = rng.randrange(7)
        if roll < 5:
            raw, what = _bytes_mutation(rng, raw)
        elif roll == 5:
            raw, what = raw.replace(b",", b";"), "semicolons"
        else:
            raw, what = raw.rstrip(b"\n") + b"," + b"1" * 2_000_000, "a 2 MB line without newline"
        notes.append(what)
        must_fail = ""
    argv = ["gradient", "{shared}/model.toml", "--data", "{dir}/data.csv", "--params", "c", "--json"]
    roll = 1.0 if systematic else rng.random()
    if systematic and kind == "options":
        argv += item
        notes.append(" ".join(item))
    elif roll < 0.08:
        suffix = rng.choice(["@m=2", "@m=nan", "@m=-1", "@zz=1", "@=", "@c=2", "@m=1_0", "@m=1e400", "@", "@m"])
        argv[3] += suffix
        notes.append(f"data settings {suffix}")
    elif roll < 0.14:
        params = rng.choice(["\uff43", "m", "c,c", "zz", "x", "c,m", "", ","])
        argv[5] = params
        notes.append(f"--params {params!r}")
    elif roll < 0.2:
        argv += ["--t-end", rng.choice(["0.03", "1e300", "inf", "0", "0.05"])]
        notes.append(f"--t-end {argv[-1]}")
    elif roll < 0.3:
        options = rng.choice(COST_OPTIONS)
        argv += options
        notes.append(" ".join(options))
    return Case("csv", index, tuple(argv), {"data.csv": raw}, "; ".join(notes) or "valid", (), "gradient", must_fail)


# -- RESULT.json ---------------------------------------------------------------------------


def _result() -> dict:
    return {"parameters": {"c": 1.25, "d": 0.4}, "initial": {"c": 1.0, "d": 0.5}, "settings": {"m": 1.0},
            "std_errors": {"c": 0.01, "d": 0.02}, "success": True, "iterations": 7, "cost_history": [1.0, 0.5],
            "model": None, "fmu": "sdof.fmu", "data": ["d.csv"]}


JSON_VALUES = (
    None, True, False, 0, -1, 1.5, -0.0, "1.5", "", [], [1.0], {}, {"value": 1.0}, 10**400, "<HUGE_INT>",
    -(10**400), 2**1023 * 2, 1e308, 5e-324, "nan", "NaN", "inf", math.nan, math.inf, -math.inf, [[[[]]]],
    "\x00", "\ud800", "1_0", "\uff11",
)
PARAM_NAMES = ("c", "d", "m", "x", "zz", "\uff43", "", " c", "c ", "C", "time", 'a"b', "<x>", "a&b", "]]>",
               "\x01", "\x00", "a\nb", "\ud800", "x" * 10_000, "\U0001f600", "__proto__", "constructor")


def _json_text(value, rng: random.Random) -> str:
    """JSON with NaN/Infinity literals, huge integers and (sometimes) no indentation."""
    return json.dumps(value, indent=rng.choice([None, 2]), allow_nan=True, ensure_ascii=rng.random() < 0.5)


HUGE = "<HUGE_INT>"  # written as 5000 digits (json.dumps cannot: the int-to-str limit)


def _result_must_fail(doc) -> str:
    """Why the final RESULT must be refused by ``apply`` ("" if it may be accepted)."""
    if not isinstance(doc, dict):
        return "no JSON object"
    params = doc.get("parameters")
    if not isinstance(params, dict) or not params:
        return "no parameters object"
    settings = doc.get("settings") or {}
    if not isinstance(settings, dict):
        return "settings that are no object"
    for name, value in {**settings, **params}.items():
        if name not in ("c", "d", "m"):
            return f"{name!r:.30}, no parameter of the FMU"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"the value {value!r:.30}"
        try:
            if not math.isfinite(float(value)):
                return f"the value {value!r:.30}"
        except OverflowError:
            return "an integer beyond the float range"
    return ""


#: Names of the RESULT file (the SSV's name attribute is made from it).
RESULT_NAMES = ("r<&>.json", "r\x01.json", "r\"'.json", "r\u202e.json", "-r.json", "r\udcff.json", "r\n.json",
                "r" * 200 + ".json", ".json", "r.JSON", "r\x7f.json", "r]]>.json", "r\t.json", "1.json", "r:x.json")
#: The first RESULT cases: every hostile value, parameter name and file name once, alone.
RESULT_SYSTEMATIC = tuple([("value", v) for v in JSON_VALUES] + [("name", n) for n in PARAM_NAMES]
                     + [("file", n) for n in RESULT_NAMES])


def result_case(index: int) -> Case:
    """``apply`` of a mutated RESULT.json to the module's exported FMU."""
    rng = _rng("result", index)
    doc = _result()
    notes: list[str] = []
    raw_text = None
    nested_params = False
    systematic = index < len(RESULT_SYSTEMATIC)
    if systematic:
        kind, item = RESULT_SYSTEMATIC[index]
        if kind == "value":
            section, name = rng.choice([("parameters", "c"), ("parameters", "d"), ("settings", "m")])
            doc[section][name] = copy.deepcopy(item)
            notes.append(f"{section}.{name} = {item!r:.40}")
        elif kind == "name":
            section = rng.choice(["parameters", "settings"])
            doc[section][item] = 1.5
            notes.append(f"{section} gets {item!r:.40}")
    for _ in range(0 if systematic else rng.choice([1, 1, 2, 3])):
        roll = rng.randrange(10)
        if roll in (0, 1, 2):
            section = rng.choice(["parameters", "parameters", "settings"])
            if isinstance(doc.get(section), dict):
                name = rng.choice(list(doc[section]) or ["c"])
                doc[section][name] = copy.deepcopy(rng.choice(JSON_VALUES))
                notes.append(f"{section}.{name} = {doc[section][name]!r:.40}")
        elif roll == 3:
            section = rng.choice(["parameters", "settings"])
            if isinstance(doc.get(section), dict):
                name = rng.choice(PARAM_NAMES)
                doc[section][name] = 1.5
                notes.append(f"{section} gets {name!r:.40}")
        elif roll == 4:
            key = rng.choice(list(doc))
            del doc[key]
            notes.append(f"no {key}")
        elif roll == 5:
            key = rng.choice(list(doc) + ["extra"])
            doc[key] = copy.deepcopy(rng.choice(JSON_VALUES))
            notes.append(f"{key} = {doc[key]!r:.40}")
        elif roll == 6:
            depth = rng.choice([100, 1000, 10_000, 100_000])
            where = rng.choice(["parameters", "extra", "top"])
            nested = "[" * depth + "]" * depth
            raw_text = (nested if where == "top" else
                        json.dumps({**doc, where: "NESTED"}).replace('"NESTED"', nested))
            nested_params = where != "extra"
            notes.append(f"nesting depth {depth} at {where}")
            break
        elif roll == 7:
            doc["parameters"] = {}
            notes.append("empty parameters")
        elif roll == 8:
            doc = copy.deepcopy(rng.choice([[], "x", 1, None, [doc]]))
            notes.append(f"top level {type(doc).__name__}")
            break
        else:
            key = rng.choice(['"c"', '"parameters"'])
            raw_text = _json_text(doc, rng).replace(key, key + ": 1, " + key, 1)
            notes.append(f"duplicate key {key}")
            break
    must_fail = "nested arrays instead of parameters" if nested_params else _result_must_fail(doc)
    if HUGE in json.dumps(doc):
        must_fail = "an integer of 5000 digits"
    text = raw_text if raw_text is not None else _json_text(doc, rng)
    text = text.replace(json.dumps(HUGE), "9" * 5000)
    raw = text.encode("utf-8", "surrogatepass")
    if not systematic and rng.random() < 0.15:
        raw, what = _bytes_mutation(rng, raw)
        notes.append(what)
        must_fail = ""
    if not systematic and rng.random() < 0.04:
        raw = b" " * (16 * 1024 * 1024 + 1) + raw
        notes.append("larger than 16 MiB")
        must_fail = "a RESULT.json beyond the size limit"
    name = "RESULT.json"
    if systematic and kind == "file":
        name = item
        notes.append(f"result file named {name!r}")
    elif not systematic and rng.random() < 0.1:
        name = rng.choice(RESULT_NAMES)
        notes.append(f"result file named {name!r}")
    argv = ["apply", "{dir}/" + name, "--fmu", "{shared}/sdof.fmu", "--ssv", "{dir}/out.ssv"]
    outputs = ["out.ssv"]
    if rng.random() < 0.15:
        argv += ["-o", "{dir}/out.fmu"]
        outputs.append("out.fmu")
    return Case("result", index, tuple(argv), {name: raw}, "; ".join(notes) or "valid", tuple(outputs), "ssv",
                must_fail)


# -- FMU archives ---------------------------------------------------------------------------

VALID_RESULT = json.dumps({"parameters": {"c": 1.25, "d": 0.4}, "settings": {"m": 1.0}}).encode()


def _zip(entries: list[tuple], rng: random.Random) -> bytes:
    """A zip of ``(name, data[, mode])`` entries written as given (duplicates included)."""
    out = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Duplicate name": on purpose
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for entry in entries:
                name, data = entry[0], entry[1]
                info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED if rng.random() < 0.8 else zipfile.ZIP_STORED
                if len(entry) > 2:
                    info.create_system = 3
                    info.external_attr = entry[2] << 16
                archive.writestr(info, data)
    return out.getvalue()


def _patch_sizes(raw: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Declared sizes in the central directory or the local headers changed."""
    data = bytearray(raw)
    signature, offsets = rng.choice([(b"PK\x01\x02", (20, 24)), (b"PK\x03\x04", (18, 22))])
    starts = [k for k in range(len(data) - 4) if data[k:k + 4] == signature]
    if not starts:
        return raw, "no header to patch"
    start = rng.choice(starts)
    offset = rng.choice(offsets)
    value = rng.choice([0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 10**9])
    data[start + offset:start + offset + 4] = struct.pack("<I", value)
    return bytes(data), f"declared size {value} at {signature!r}+{offset}"


def _xml_mutation(xml: str, rng: random.Random) -> tuple[bytes, str, str]:
    """A mutated modelDescription.xml: (bytes, what, why exit 0 would be wrong)."""
    roll = rng.randrange(16)
    if roll == 0:
        version = rng.choice(["1.0", "3.0", "2.0.1", "", "x", "2", "2.0 ", "02.0"])
        return xml.replace('fmiVersion="2.0"', f'fmiVersion="{version}"').encode(), f"fmiVersion {version!r}", \
            "a wrong fmiVersion" if version in ("1.0", "3.0", "", "x", "2") else ""
    if roll == 1:
        doctype = rng.choice([
            '<!DOCTYPE fmiModelDescription [<!ENTITY x "5">]>',
            '<!DOCTYPE fmiModelDescription [<!ENTITY x SYSTEM "file:///etc/passwd">]>',
            ('<!DOCTYPE fmiModelDescription [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
             '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY x "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">]>'),
            '<!DOCTYPE fmiModelDescription SYSTEM "http://127.0.0.1:9/x.dtd">',
        ])
        body = xml.replace("?>", "?>" + doctype, 1)
        if rng.random() < 0.6:
            body = body.replace('description="mass"', 'description="&x;"')
        return body.encode(), "DOCTYPE", "a DOCTYPE"
    if roll == 2:
        value = rng.choice(["nan", "inf", "-INF", "1e999", "-0", "abc", "", "1,5", "0x10", "1_0", "\uff11", "1e-400"])
        return xml.replace('start="1.0" unit="N/m"', f'start="{value}" unit="N/m"').encode(), f"start {value!r}", ""
    if roll == 3:
        start = xml.index("<ScalarVariable")
        end = xml.index("</ScalarVariable>", start) + len("</ScalarVariable>")
        return (xml[:end] + xml[start:end] + xml[end:]).encode(), "duplicate variable", "a duplicate variable"
    if roll == 4:
        attribute = rng.choice(["causality", "variability", "valueReference", "initial"])
        value = rng.choice(["parameter", "output", "input", "local", "constant", "fixed", "tunable", "bogus", "",
                            "-1", "4294967296", "1", "exact"])
        return xml.replace(f'{attribute}="', f'{attribute}="{value}" x{attribute}="', 1).encode(), \
            f"{attribute}={value!r}", ""
    if roll == 5:
        name = rng.choice(NAMES)
        escaped = name.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")
        return xml.replace('name="c"', f'name="{escaped}"', 1).encode("utf-8", "surrogatepass"), \
            f"variable c renamed {name!r:.30}", ""
    if roll == 6:
        cut = xml[: rng.randrange(len(xml))]
        return cut.encode(), "XML truncated", "" if "</fmiModelDescription>" in cut else "a truncated XML"
    if roll == 7:
        data = bytearray(xml.encode())
        for _ in range(rng.randrange(1, 5)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data), "XML bytes flipped", ""
    if roll == 8:
        identifier = rng.choice(["../../evil", "/tmp/evil", "sdof/../sdof", "", "a b", "sdof\x00", "SDOF",
                                 "x" * 300, "con", "sdof.so"])
        return xml.replace('modelIdentifier="sdof"', f'modelIdentifier="{identifier}"').encode(
            "utf-8", "surrogatepass"), f"modelIdentifier {identifier!r:.30}", ""
    if roll == 9:
        depth = rng.choice([300, 5000])
        nested = "<Tool name='x'>" + "<a>" * depth + "</a>" * depth + "</Tool>"
        return xml.replace("<ModelVariables>", f"<VendorAnnotations>{nested}</VendorAnnotations><ModelVariables>",
                           1).encode(), f"XML depth {depth}", ""
    if roll == 10:
        return xml.encode("utf-16"), "UTF-16 with the UTF-8 declaration", ""
    if roll == 11:
        return xml.replace("encoding='UTF-8'", rng.choice(["encoding='UTF-16'", "encoding='latin-1'",
                                                           "encoding='bogus'", "encoding='EBCDIC-US'"])).encode(), \
            "encoding declaration changed", ""
    if roll == 12:
        start = xml.index("<ModelVariables>")
        end = xml.index("</ModelVariables>") + len("</ModelVariables>")
        return (xml[:start] + xml[end:]).encode(), "no ModelVariables", "no variables"
    if roll == 13:
        return xml.replace("<ModelVariables>", "<!-- c --><?pi x?><ModelVariables><![CDATA[x]]>").encode(), \
            "comment, PI and CDATA", ""
    if roll == 14:
        return xml.replace('description="mass"', 'description="' + "a" * rng.choice([10_000, 3_000_000]) + '"'
                           ).encode(), "a long description", ""
    return xml.replace("<fmiModelDescription", "<fmiModelDescription xmlns='urn:bogus'", 1).encode(), \
        "default namespace", ""


def fmu_case(index: int, base_entries: list[tuple[str, bytes]]) -> Case:
    """``apply`` of a valid RESULT.json to a mutated copy of the exported FMU."""
    rng = _rng("fmu", index)
    entries = [tuple(e) for e in base_entries]
    names = [e[0] for e in entries]
    xml = dict(entries)["modelDescription.xml"].decode()
    notes: list[str] = []
    must_fail = ""
    raw = None
    roll = rng.randrange(14)
    if roll in (0, 1, 2):
        data, what, why = _xml_mutation(xml, rng)
        entries = [(n, data if n == "modelDescription.xml" else d) for n, d in entries]
        notes.append(what)
        must_fail = why
    elif roll == 3:
        spelling = rng.choice(["modelDescription.xml", "./modelDescription.xml", ".\\modelDescription.xml",
                               "ModelDescription.xml", "modelDescription.xml/", "a/../modelDescription.xml",
                               "/modelDescription.xml", "modelDescription.xml\x00", "modelDescription.xml ",
                               "modelDescription.xml.", "modelDescription\u2024xml",
                               "resources/../modelDescription.xml"])
        other = xml.replace('start="1.0" unit="N/m"', 'start="7.0" unit="N/m"').encode()
        entries.insert(rng.choice([0, len(entries)]), (spelling, other))
        notes.append(f"second XML entry {spelling!r}")
        if spelling not in ("ModelDescription.xml", "modelDescription.xml ", "modelDescription.xml.",
                            "modelDescription\u2024xml"):
            must_fail = "an entry that extracts over modelDescription.xml"
    elif roll == 4:
        name = rng.choice(["../evil.txt", "../../evil.txt", "/tmp/evil.txt", "resources/../../evil.txt", "C:/evil",
                           "C:\\evil", "\\\\server\\share\\x", "resources/\x00x", "", "resources/a\nb", "\u202e",
                           "resources/" + "a" * 300, "resources/" + "d/" * 200 + "x", "..", ".", "resources/."])
        entries.append((name, b"evil"))
        notes.append(f"entry named {name!r:.40}")
        if ".." in name.split("/") or name.startswith("/"):
            must_fail = "an entry outside the extraction folder"
    elif roll == 5:
        target = rng.choice(["/etc/passwd", "../../../etc/passwd", "binaries/linux64/sdof.so", "/", "."])
        name = rng.choice(["modelDescription.xml", "resources/link", "binaries/linux64/sdof.so", "resources",
                           "sources/model.c"])
        if name in names:
            entries = [e for e in entries if e[0] != name]
        entries.append((name, target.encode(), 0o120777))
        notes.append(f"symlink {name} -> {target}")
        if name == "modelDescription.xml":
            must_fail = "a modelDescription.xml that is a symlink"
    elif roll == 6:
        drop = rng.choice(names + ["binaries/", "sources/", "resources/"])
        entries = [e for e in entries if not e[0].startswith(drop)]
        notes.append(f"without {drop}")
        if drop == "modelDescription.xml":
            must_fail = "no modelDescription.xml"
    elif roll == 7:
        key = rng.choice(["binary_sha256", "fmi_version", "step", "values", "model_file", "generator"])
        export = json.loads(dict(entries)["resources/export.json"])
        export[key] = copy.deepcopy(rng.choice(JSON_VALUES[:15] + ("../../etc/passwd", "x" * 100)))
        try:
            data = json.dumps(export).encode()
        except ValueError:
            data = b"{" * 100_000
        if rng.random() < 0.2:
            data = rng.choice([b"", b"{", b"[" * 100_000, b"\xff", b"null"])
        entries = [(n, data if n == "resources/export.json" else d) for n, d in entries]
        notes.append(f"export.json {key} changed")
    elif roll == 8:
        body = dict(entries)["resources/model.toml"]
        data, what = _bytes_mutation(rng, body)
        if rng.random() < 0.5:
            data = body.replace(b'name = "sdof"', b'name = "' + INJECT.encode().replace(b'"', b'\\"').replace(
                b"\n", b"\\n") + b'"')
            what = "C payload in the embedded model's name"
        entries = [(n, data if n == "resources/model.toml" else d) for n, d in entries]
        notes.append(f"embedded model: {what}")
    elif roll == 9:
        size = rng.choice([20 * 1024 * 1024, 200_000, 200_000])
        entries.append((rng.choice(["resources/zeros.bin", "modelDescription.xml"]), bytes(size)))
        notes.append(f"{size} zero bytes compressed")
    elif roll == 10:
        count = rng.choice([50] * 5 + [20_001])  # the long archive takes ~0.7 s to write: rarely
        entries += [(f"resources/f{k}", b"") for k in range(count)]
        notes.append(f"{count} more entries")
        if count > 20_000:
            must_fail = "too many entries"
    if raw is None:
        raw = _zip(entries, rng)
    if roll == 11:
        raw, what = _patch_sizes(raw, rng)
        notes.append(what)
    elif roll == 12:
        k = rng.randrange(len(raw))
        raw = raw[:k]
        notes.append(f"zip truncated at {k}")
        must_fail = "a truncated archive"
    elif roll == 13:
        data = bytearray(raw)
        for _ in range(rng.randrange(1, 6)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        raw = bytes(data)
        notes.append("bits flipped")
    argv = ["apply", "{shared}/RESULT.json", "--fmu", "{dir}/model.fmu", "--ssv", "{dir}/out.ssv"]
    outputs = ["out.ssv"]
    if rng.random() < 0.2:
        argv += ["-o", "{dir}/out.fmu"]
        outputs.append("out.fmu")
    return Case("fmu", index, tuple(argv), {"model.fmu": raw}, "; ".join(notes) or "unchanged", tuple(outputs),
                "ssv", must_fail)


# ----------------------------------------------------------------------------- the runner --


class CaseTimeout(BaseException):
    """A case ran past CASE_SECONDS (a BaseException, so that no handler of the tool turns
    it into an error line)."""


def _on_alarm(signum, frame):
    raise CaseTimeout


# Warnings a normal ``fmi-adjoint`` process would not print (Python's default filters).
_SILENT_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How one ``main(argv)`` ended: exit code (or "exception"), output, shown warnings."""

    code: object
    stdout: str
    stderr: str
    warnings: list
    error: BaseException | None = None


def _invoke(argv: list[str], debug: bool = False) -> Outcome:
    """``main(argv)`` with stdout/stderr captured and the warnings a process would print."""
    out, err = io.StringIO(), io.StringIO()
    previous = os.environ.get("FMI_ADJOINT_DEBUG")
    if debug:
        os.environ["FMI_ADJOINT_DEBUG"] = "1"
    error = None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.resetwarnings()
            warnings.simplefilter("always")
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = main(argv)
                except SystemExit as exc:
                    code = exc.code
                except Exception as exc:  # noqa: BLE001 -- escaped main(): the traceback is the report
                    code, error = "exception", exc
    finally:
        if debug:
            if previous is None:
                os.environ.pop("FMI_ADJOINT_DEBUG", None)
            else:
                os.environ["FMI_ADJOINT_DEBUG"] = previous
    shown = [w for w in caught if not issubclass(w.category, _SILENT_WARNINGS)]
    return Outcome(code, out.getvalue(), err.getvalue(), shown, error)


def _write_files(folder: Path, files: dict, shared: Path) -> None:
    """Write a case's files: bytes, or ``("symlink", target)``, ``("fifo",)``, ``("dir",
    {name: bytes})`` or ``("sparse", size, head)`` (``head``, then a hole up to ``size``)."""
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, tuple):
            kind = content[0]
            if kind == "symlink":
                os.symlink(content[1].replace("{outside}", str(shared / "outside")), path)
            elif kind == "fifo":
                os.mkfifo(path)
            elif kind == "dir":
                path.mkdir()
                for inner, data in content[1].items():
                    (path / inner).write_bytes(data)
            elif kind == "sparse":
                with open(path, "wb") as handle:
                    handle.write(content[2])
                    handle.truncate(content[1])
            else:
                raise ValueError(f"unknown file kind {kind!r}")
        else:
            path.write_bytes(content.replace(b"{outside}", str(shared / "outside").encode()))


#: Extension points for families defined in other modules (tests/test_fuzz_security.py), keyed
#: by the case's family: ``PREPARE[family](case, folder, shared)`` runs after the case's files
#: are written (modes, FIFOs, copies of fixtures) and returns a state;
#: ``VERIFY[family](case, folder, shared, state, outcome)`` runs after the command and returns
#: why the ending breaks the contract (None if it does not), whatever the exit code.
#: ``CHECKS[check](case, folder, outcome)`` replaces :func:`_check_success` for that check name.
PREPARE: dict = {}
VERIFY: dict = {}
CHECKS: dict = {}


@contextlib.contextmanager
def _case_environment(case: Case, folder: Path, shared: Path):
    """The case's environment variables, restored afterwards."""
    saved = {name: os.environ.get(name) for name, _ in case.env}
    try:
        for name, value in case.env:
            os.environ[name] = _expand(value, folder, shared)
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} if folder.exists() else set()


def _check_success(case: Case, folder: Path, outcome: Outcome) -> str | None:
    """Why the exit-0 outputs of ``case`` are not valid (None if they are)."""
    if case.check in CHECKS:
        return CHECKS[case.check](case, folder, outcome)
    lines = outcome.stderr.splitlines()
    odd = [line for line in lines if not line.startswith(("wrote ", "fmi-adjoint: note:"))]
    if odd:
        return f"exit 0 with unexpected stderr lines {odd[:3]!r}"
    if case.check == "csv":
        from fmi_adjoint.data import read_csv

        if outcome.stdout:
            return "simulate -o also printed to stdout"
        try:
            data = read_csv(folder / "out.csv")
        except Exception as exc:  # noqa: BLE001 -- the reason is the report
            return f"the written CSV cannot be read back: {type(exc).__name__}: {exc}"
        if len(data.times) < 2:
            return "the written CSV has fewer than two rows"
        return None
    if case.check == "gradient":
        try:
            result = json.loads(outcome.stdout)
        except ValueError as exc:
            return f"stdout is not JSON ({exc})"
        params = [p.strip() for p in case.argv[case.argv.index("--params") + 1].split(",") if p.strip()]
        gradient = result.get("gradient")
        if not isinstance(result.get("cost"), float) or not math.isfinite(result["cost"]):
            return f"cost {result.get('cost')!r} is not a finite number"
        if not isinstance(gradient, dict) or set(gradient) != set(params):
            return f"gradient {gradient!r:.200} is not one finite number per parameter {params}"
        if not all(isinstance(v, float) and math.isfinite(v) for v in gradient.values()):
            return f"gradient {gradient!r:.200} is not finite"
        return None
    if case.check == "ssv":
        if outcome.stdout:
            return "apply printed to stdout"
        try:
            root = ElementTree.parse(folder / "out.ssv").getroot()
        except (ElementTree.ParseError, OSError) as exc:
            return f"the SSV does not parse: {exc}"
        parameters = root.findall(".//{*}Parameter")
        if not parameters:
            return "the SSV has no parameters"
        for parameter in parameters:
            real = parameter.find("{*}Real")
            if real is None or not math.isfinite(float(real.get("value", "nan"))):
                return f"SSV parameter {parameter.get('name')!r} has no finite Real value"
        if "out.fmu" in case.outputs:
            try:
                with zipfile.ZipFile(folder / "out.fmu") as archive:
                    if archive.testzip() is not None or "modelDescription.xml" not in archive.namelist():
                        return "the written FMU is damaged or has no modelDescription.xml"
            except zipfile.BadZipFile as exc:
                return f"the written FMU is no zip: {exc}"
        return None
    raise AssertionError(f"unknown check {case.check!r}")


def _source_name(filename: str) -> str:
    """A file name for grouping failures (generated modules are numbered per compile)."""
    return re.sub(r" #\d+", "", Path(filename).name)


def _where_raised(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "fmi_adjoint" in f.filename] or frames
    frame = ours[-1]
    return f"{type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno} ({frame.name})"


@dataclasses.dataclass(frozen=True)
class Failure:
    case: Case
    folder: Path
    problem: str
    key: str           # for grouping: the exception type and location, or the problem kind
    stderr: str

    def report(self, shared: Path) -> str:
        argv = " ".join(_expand(a, self.folder, shared) for a in self.case.argv)
        return (f"[{self.case.family} #{self.case.index}] {self.problem}\n"
                f"    input: {self.case.description}\n"
                f"    argv: fmi-adjoint {argv}\n"
                f"    stderr: {self.stderr.strip()[:600]!r}\n"
                f"    files in {self.folder}" + (
                    f" (regenerate: python tests/test_fuzz.py {self.case.family} {self.case.index} DIR)"
                    if self.case.family in COUNTS else ""))


def _expand(arg: str, folder: Path, shared: Path) -> str:
    return arg.replace("{dir}", str(folder)).replace("{shared}", str(shared))


def _judged_out(case: Case, names: set[str]) -> set[str]:
    """``names`` without the paths under the top-level names the family's VERIFY judges."""
    return {name for name in names if Path(name).parts[0] not in case.judged}


def _make_removable(folder: Path) -> None:
    """Owner read/write/search on every folder under ``folder`` (a case may remove them)."""
    if not folder.is_dir() or folder.is_symlink():
        return
    with contextlib.suppress(OSError):
        folder.chmod(0o700)
    for path in folder.rglob("*"):
        if path.is_dir() and not path.is_symlink():
            with contextlib.suppress(OSError):
                path.chmod(0o700)


def _empty(folder: Path) -> None:
    for entry in folder.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def run_case(case: Case, folder: Path, shared: Path, private_tmp: Path, cwd: Path) -> Failure | None:
    """Run one case; None if it ended as the contract says."""
    folder.mkdir(parents=True)
    _write_files(folder, case.files, shared)
    state = PREPARE[case.family](case, folder, shared) if case.family in PREPARE else None
    before = _judged_out(case, _listing(folder))
    argv = [_expand(a, folder, shared) for a in case.argv]
    signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
    try:
        with _case_environment(case, folder, shared):
            outcome = _invoke(argv)
    except CaseTimeout:
        if case.family in VERIFY:  # the hook's clean-up (restored hooks, stopped helpers)
            with contextlib.suppress(Exception):
                VERIFY[case.family](case, folder, shared, state, Outcome("exception", "", "", []))
        _empty(private_tmp)
        _empty(cwd)
        return Failure(case, folder, f"hang: still running after {CASE_SECONDS} s", "hang", "")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)

    def fail(problem: str, key: str | None = None) -> Failure:
        return Failure(case, folder, problem, key or problem.split(":")[0], outcome.stderr)

    problems = []
    if case.family in VERIFY:
        reason = VERIFY[case.family](case, folder, shared, state, outcome)
        if reason:
            problems.append(fail(reason, reason.split(":")[0][:60]))
    after = _judged_out(case, _listing(folder))
    leftovers = _listing(private_tmp)
    if leftovers:  # the native engine's build folder goes with its library object
        gc.collect()
        leftovers = _listing(private_tmp)
    if leftovers:
        problems.append(fail(f"files left in the private TMPDIR: {sorted(leftovers)[:5]}", "TMPDIR leftovers"))
        _empty(private_tmp)  # so that the next case starts clean
    stray = _listing(cwd)
    if stray:
        problems.append(fail(f"files written in the working folder: {sorted(stray)[:5]}", "stray files in cwd"))
        if MARKER in stray:
            problems.append(fail("the injected C code ran (marker file created)", "C injection"))
        _empty(cwd)
    if SECRET in outcome.stderr or SECRET in outcome.stdout:
        problems.append(fail("the output echoes the content of a file outside the model's folder",
                             "echoes a file's content"))
    if outcome.warnings:
        w = outcome.warnings[0]
        problems.append(fail(f"a warning would be printed on stderr: {w.category.__name__}: {w.message} "
                             f"({Path(w.filename).name}:{w.lineno})",
                             f"warning {w.category.__name__} at {_source_name(w.filename)}"))
    lines = outcome.stderr.splitlines()
    if "Traceback" in outcome.stderr:
        problems.append(fail("a traceback on stderr", "traceback"))
    if outcome.code in case.success_codes:
        if case.must_fail:
            problems.append(fail(f"exit {outcome.code} although the input has {case.must_fail}",
                                 f"accepted: {case.must_fail}"))
        missing = [name for name in case.outputs if name not in after]
        if missing:
            problems.append(fail(f"exit {outcome.code} but no output {missing}", "exit 0 without output"))
        else:
            reason = _check_success(case, folder, outcome)
            if reason:
                problems.append(fail(f"invalid output: {reason}", f"invalid output: {reason[:50]}"))
        extra = after - before - set(case.outputs)
    elif outcome.code == 2:
        if len(lines) != 1 or not lines[0].startswith(PREFIX):
            problems.append(fail(f"exit 2 but stderr is not exactly one '{PREFIX}...' line ({len(lines)} lines)",
                                 "not one error line"))
        elif "internal error" in lines[0]:
            where, message = _rerun_for_traceback(case, folder, shared)
            problems.append(fail(f"internal error: {where}: {message}", f"internal error: {where}"))
        if outcome.stdout:
            problems.append(fail(f"exit 2 but stdout has {outcome.stdout[:80]!r}", "stdout on error"))
        extra = after - before
    elif outcome.error is not None:
        where = _where_raised(outcome.error)
        problems.append(fail(f"uncaught {where}: {str(outcome.error)[:160]}", f"uncaught {where}"))
        extra = set()
    else:
        problems.append(fail(f"exit code {outcome.code!r} (expected 0 or 2)", f"exit code {outcome.code!r}"))
        extra = set()
    if extra:
        problems.append(fail(f"partial or stray files in the case folder: {sorted(extra)[:5]}", "stray output"))
    if problems:
        first = problems[0]
        return dataclasses.replace(first, problem="; ".join(p.problem for p in problems))
    _make_removable(folder)
    shutil.rmtree(folder)
    return None


def _rerun_for_traceback(case: Case, folder: Path, shared: Path) -> tuple[str, str]:
    """The exception behind an 'internal error' line: the case again with FMI_ADJOINT_DEBUG=1,
    in a fresh copy of its folder."""
    again = folder.with_name(folder.name + "-debug")
    shutil.rmtree(again, ignore_errors=True)
    again.mkdir()
    _write_files(again, case.files, shared)
    state = PREPARE[case.family](case, again, shared) if case.family in PREPARE else None
    argv = [_expand(a, again, shared) for a in case.argv]
    signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
    try:
        with _case_environment(case, again, shared):
            outcome = _invoke(argv, debug=True)
    except CaseTimeout:
        return "hang", "the debug re-run hung"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        if case.family in VERIFY:  # the hook's clean-up (restored hooks, stopped helpers)
            with contextlib.suppress(Exception):
                VERIFY[case.family](case, again, shared, state, Outcome("exception", "", "", []))
        _make_removable(again)
        shutil.rmtree(again, ignore_errors=True)
    if outcome.error is None:
        return "not reproduced", "no exception with FMI_ADJOINT_DEBUG=1"
    return _where_raised(outcome.error), str(outcome.error)[:160]


def run_family(cases, root: Path, shared: Path, private_tmp: Path, cwd: Path) -> list[Failure]:
    """Run the cases in order; the per-case timer stops a hang, a watchdog the whole run."""
    failures: list[Failure] = []
    handler = signal.signal(signal.SIGALRM, _on_alarm)
    # Last resort if a case hangs inside C code that the timer cannot interrupt: dump the
    # stacks and exit instead of blocking CI.
    faulthandler.dump_traceback_later(CASE_SECONDS * (MAX_HANGS + 4), exit=True, file=sys.__stderr__)
    hangs = 0
    try:
        for case in cases:
            failure = run_case(case, root / f"{case.family}-{case.index:04d}", shared, private_tmp, cwd)
            faulthandler.dump_traceback_later(CASE_SECONDS * (MAX_HANGS + 4), exit=True, file=sys.__stderr__)
            if failure is not None:
                failures.append(failure)
                hangs += failure.key == "hang"
                if hangs >= MAX_HANGS:
                    break
    finally:
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGALRM, handler)
    return failures


def _summary(failures: list[Failure], total: int, shared: Path) -> str:
    groups: dict[str, list[Failure]] = {}
    for failure in failures:
        groups.setdefault(failure.key, []).append(failure)
    lines = [f"{len(failures)} of {total} cases failed, {len(groups)} distinct problems:"]
    for key, members in sorted(groups.items(), key=lambda item: -len(item[1])):
        lines.append(f"\n== {key} ({len(members)} cases; first:)")
        lines.append(members[0].report(shared))
    return "\n".join(lines)


# ---------------------------------------------------------------------------- fixtures --


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """A private TMPDIR (environment and :data:`tempfile.tempdir`), an empty working folder,
    and the root of the case folders."""
    return make_sandbox(tmp_path, monkeypatch)


def make_sandbox(tmp_path: Path, monkeypatch) -> tuple[Path, Path, Path]:
    """:func:`sandbox` for other modules' fixtures."""
    private = tmp_path / "TMPDIR"
    cwd = tmp_path / "cwd"
    root = tmp_path / "cases"
    for folder in (private, cwd, root):
        folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    monkeypatch.chdir(cwd)
    return private, cwd, root


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """The inputs every case may use: the small gradient model, the exported sdof FMU, a
    valid RESULT.json and an 'outside' folder holding a secret table."""
    return make_shared(tmp_path_factory.mktemp("fuzz_shared"))


def make_shared(folder: Path) -> Path:
    """:func:`shared` in ``folder``, for other modules' fixtures."""
    (folder / "model.toml").write_text(GRADIENT_MODEL, encoding="utf-8")
    (folder / "RESULT.json").write_bytes(VALID_RESULT)
    (folder / "outside").mkdir()
    (folder / "outside" / "secret.csv").write_text(SECRET_TABLE, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def exported_fmu(shared, tmp_path_factory):
    """sdof exported once (FMI 2) through the command line, in its own private TMPDIR."""
    from fmi_adjoint.toolchain import c_compiler

    if c_compiler() is None:  # pragma: no cover - depends on the machine
        pytest.skip("no C compiler: the FMU cannot be built")
    private = tmp_path_factory.mktemp("fuzz_export_tmp")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(private))
        patch.setattr(tempfile, "tempdir", str(private))
        outcome = _invoke(["export", "sdof", "--fmi", "2", "-o", str(shared / "sdof.fmu")])
    assert outcome.code == 0, outcome.stderr
    with zipfile.ZipFile(shared / "sdof.fmu") as archive:
        return [(info.filename, archive.read(info)) for info in archive.infolist()]


def _assert_family(cases, sandbox, shared) -> None:
    private, cwd, root = sandbox
    failures = run_family(cases, root, shared, private, cwd)
    assert not failures, _summary(failures, len(cases), shared)


# ------------------------------------------------------------------------------- tests --


def test_cases_are_reproducible_and_enough():
    """Every case is a pure function of (SEED, family, index), and there are >= 1000 of them."""
    assert sum(COUNTS.values()) >= 1000
    entries = [("modelDescription.xml", (b"<?xml version='1.0' encoding='UTF-8'?><fmiModelDescription "
                                         b'fmiVersion="2.0"><ModelVariables><ScalarVariable name="c"><Real '
                                         b'start="1.0" unit="N/m"/></ScalarVariable></ModelVariables>'
                                         b"</fmiModelDescription>")),
               ("resources/export.json", b"{}"), ("resources/model.toml", b'name = "sdof"')]
    for make in (model_case, mbs_case, csv_case, result_case, lambda k: fmu_case(k, entries)):
        for index in (0, 7, 123):
            first, second = make(index), make(index)
            assert first.argv == second.argv and first.files == second.files


def test_fuzz_model_files(sandbox, shared):
    """Findings 1, 3, 5, 8, 9, 10: mutated model files through ``simulate --engine python``."""
    _assert_family([model_case(k) for k in range(COUNTS["model"])], sandbox, shared)


def test_fuzz_native_engine(sandbox, shared):
    """Findings 1 and 10 on the C engine: C payloads in names and text, negative masses and
    constants beyond the float range through ``simulate --engine native``."""
    from fmi_adjoint.toolchain import c_compiler

    if c_compiler() is None:  # pragma: no cover - depends on the machine
        pytest.skip("no C compiler")
    _assert_family([model_case(k, "native") for k in range(COUNTS["native"])], sandbox, shared)


def test_fuzz_multibody_files(sandbox, shared):
    """Issue 23: mutated multibody model files (bodies, markers, joints, forces between
    markers, sensors) through ``simulate --engine python``: refusals named in one line, hostile
    expressions through the grammar, every refusal of the issue alone in the first cases."""
    _assert_family([mbs_case(k) for k in range(COUNTS["mbs"])], sandbox, shared)


def test_fuzz_csv_files(sandbox, shared):
    """Findings 8 and 10: mutated measurements through ``gradient MODEL --data X.csv --json``."""
    _assert_family([csv_case(k) for k in range(COUNTS["csv"])], sandbox, shared)


def test_fuzz_result_files(sandbox, shared, exported_fmu):
    """Findings 7 and 9: mutated RESULT.json files through ``apply --ssv`` (and ``-o``)."""
    _assert_family([result_case(k) for k in range(COUNTS["result"])], sandbox, shared)


def test_fuzz_fmu_archives(sandbox, shared, exported_fmu):
    """Findings 2 and 8: mutated copies of the exported FMU through ``apply --ssv``."""
    _assert_family([fmu_case(k, exported_fmu) for k in range(COUNTS["fmu"])], sandbox, shared)


if __name__ == "__main__":  # pragma: no cover - a developer's helper
    # python tests/test_fuzz.py FAMILY INDEX DIR: write the case's files into DIR (the shared
    # inputs into DIR/shared; fmu cases need the FMU exported there first) and print its argv.
    family, index, target = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    shared_dir = target / "shared"
    (shared_dir / "outside").mkdir(parents=True, exist_ok=True)
    (shared_dir / "model.toml").write_text(GRADIENT_MODEL, encoding="utf-8")
    (shared_dir / "RESULT.json").write_bytes(VALID_RESULT)
    (shared_dir / "outside" / "secret.csv").write_text(SECRET_TABLE, encoding="utf-8")
    if family == "fmu":
        if not (shared_dir / "sdof.fmu").exists():
            main(["export", "sdof", "--fmi", "2", "-o", str(shared_dir / "sdof.fmu")])
        with zipfile.ZipFile(shared_dir / "sdof.fmu") as fmu:
            case = fmu_case(index, [(i.filename, fmu.read(i)) for i in fmu.infolist()])
    else:
        case = {"model": model_case, "native": lambda k: model_case(k, "native"), "mbs": mbs_case, "csv": csv_case,
                "result": result_case}[family](index)
    folder = target / f"{family}-{index:04d}"
    folder.mkdir(parents=True, exist_ok=True)
    _write_files(folder, case.files, shared_dir)
    print(case.description)
    print("fmi-adjoint " + " ".join(repr(_expand(a, folder, shared_dir)) for a in case.argv))
