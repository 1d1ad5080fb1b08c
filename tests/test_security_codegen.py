"""Issue 10: model files never become code, and every failure is one line.

Findings covered (numbers of issue 10): 1 (code injection through the model name), 3
(look-alike names), 8 (expressions that exhaust CSE), 9 (huge integers, complex constants,
control characters on export, Ctrl-C during the imports, a full temporary folder), 10
(10^400 coefficients, negative masses in the C engine, long or odd names, a BOM), and the
one top-level handler.  Each test fails on the code before the issue.
"""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fmi_adjoint.cli.main import main
from fmi_adjoint.errors import ExpressionError, ModelError
from fmi_adjoint.expressions import parse_expression
from fmi_adjoint.model_file import load_model, parse_model
from fmi_adjoint.text import c_string_literal, check_free_text, check_identifier
from fmi_adjoint.toolchain import c_compiler

PREFIX = "fmi-adjoint: error: "
CONSOLE_SCRIPT = Path(sys.executable).parent / "fmi-adjoint"
needs_cc = pytest.mark.skipif(c_compiler() is None, reason="needs a C compiler")

# The attack of finding 1: the name closes the C string and comment it is printed into,
# defines a constructor that runs a shell command, and comments out the rest of the line.
MARKER = "PWNED_MARKER"


def _payload(marker: Path) -> str:
    return (f'x\\" */\n#include <stdlib.h>\n__attribute__((constructor)) static void pwn(void) '
            f'{{ system("touch {marker}"); }}\n/* "')


def _model(name_line: str = 'name = "osc"', description: str = "", extra: str = "") -> str:
    return f"""\
[model]
{name_line}
description = {json.dumps(description)}

[simulation]
t_end = 0.1
step = 1e-2

[parameters]
m = 1.0
c = {{ value = 4.0, bounds = [1.0, 10.0] }}

[[coordinates]]
name = "x"
mass = "m"
initial_position = 0.1

[[forces]]
type = "linear_spring_damper"
name = "spring"
coordinates = ["x"]
stiffness = "c"
{extra}
[[outputs]]
name = "x"
expression = "x"
"""


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_error(code: int, err: str) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(PREFIX), err
    assert "Traceback" not in err
    return lines[0]


# -- finding 1: the model name ----------------------------------------------------------------------


@needs_cc
@pytest.mark.parametrize("command", ["simulate", "export"])
def test_model_name_payload_is_refused_and_runs_nothing(tmp_path, capsys, command):
    """Finding 1: a model name carrying C code ends in one error, and no marker file appears."""
    marker = tmp_path / MARKER
    model = tmp_path / "evil.toml"
    model.write_text(_model(name_line=f'name = """{_payload(marker)}"""'))
    argv = ["simulate", str(model), "--engine", "native"] if command == "simulate" else \
        ["export", str(model), "-o", str(tmp_path / "evil.fmu")]
    line = _one_error(*_run(capsys, *argv)[::2])
    assert "model name" in line and "'_'" in line
    assert not marker.exists()
    assert not (tmp_path / "evil.fmu").exists()


@needs_cc
def test_free_text_payload_travels_escaped_through_export_and_validate(tmp_path, capsys):
    """Finding 1: free text (the description) may hold the payload; it reaches the FMU's XML
    intact, never the C sources, and neither building nor running the FMU runs it."""
    marker = tmp_path / MARKER
    payload = _payload(marker).replace("\\", "")
    model = tmp_path / "text.toml"
    model.write_text(_model(description=payload))
    fmu = tmp_path / "text.fmu"
    code, _, err = _run(capsys, "export", str(model), "-o", str(fmu))
    assert code == 0, err
    with zipfile.ZipFile(fmu) as archive:
        sources = [archive.read(n).decode() for n in archive.namelist() if n.startswith("sources/")]
        description = archive.read("modelDescription.xml").decode()
    assert all("system(" not in text for text in sources)
    from lxml import etree

    assert etree.fromstring(description.encode()).get("description") == payload
    data = tmp_path / "data.csv"
    code, _, err = _run(capsys, "simulate", str(model), "-o", str(data))
    assert code == 0, err
    code, _, err = _run(capsys, "validate", str(fmu), "--data", str(data), "-o", str(tmp_path / "report"))
    assert code == 0, err
    assert not marker.exists()


def test_c_string_literal_reproduces_every_byte(tmp_path):
    """The one escaping function: every byte value 1..255 survives a C compiler unchanged,
    and the literal holds only printable ASCII with nothing that could end it or start a
    comment or a trigraph."""
    data = bytes(range(1, 256)) + b'"*/ /* // ??= \\" \\\\ 0123'
    literal = c_string_literal(data)
    body = literal[1:-1]
    assert literal[0] == literal[-1] == '"'
    assert all(0x20 <= ord(ch) < 0x7F for ch in literal)
    assert '"' not in body and "?" not in body and "/*" not in body and "*/" not in body
    compiler = c_compiler()
    if compiler is None:
        pytest.skip("needs a C compiler")
    source = tmp_path / "bytes.c"
    source.write_text("#include <stdio.h>\nstatic const char s[] = " + literal + ";\n"
                      "int main(void) { fwrite(s, 1, sizeof s - 1, stdout); return 0; }\n")
    program = tmp_path / "bytes"
    subprocess.run([compiler, "-std=c99", "-Wall", "-Werror", "-trigraphs", "-o", str(program), str(source)],
                   check=True, capture_output=True)
    assert subprocess.run([str(program)], capture_output=True, check=True).stdout == data


def test_c_string_literal_round_trips_unicode_and_refuses_nul():
    rng = random.Random(10)
    for _ in range(200):
        text = "".join(chr(rng.choice([rng.randrange(1, 0x80), rng.randrange(0x80, 0xD800),
                                       rng.randrange(0xE000, 0x110000)])) for _ in range(rng.randrange(0, 30)))
        literal = c_string_literal(text)
        decoded = bytes(int(literal[k + 1:k + 4], 8) if literal[k] == "\\" else ord(literal[k])
                        for k in _literal_positions(literal[1:-1]))
        assert decoded == text.encode()
    with pytest.raises(ModelError, match="NUL"):
        c_string_literal("a\0b")


def _literal_positions(body: str):
    k = 0
    while k < len(body):
        yield k + 1  # offset into the literal with its opening quote
        k += 4 if body[k] == "\\" else 1


# -- finding 3 and 10: names ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ｃ", "c\u200b", "café", "Ｃ_1", "a b", "1x", "x-y", "int", "while", "x" * 65, ""])
def test_identifiers_are_ascii_and_not_keywords(name):
    """Findings 3 and 10: look-alike, non-ASCII, C-keyword, long and odd names are refused."""
    with pytest.raises(ModelError, match="name"):
        check_identifier(name, "parameter")


def test_lookalike_letter_in_an_expression_does_not_mean_the_ascii_name():
    """Finding 3: Python's parser folds a full-width 'ｃ' into 'c' (NFKC); the expression is refused."""
    import sympy as sp

    c = sp.Symbol("c")
    assert parse_expression("2*c", {"c": c}) == 2 * c
    with pytest.raises(ExpressionError, match="U\\+FF43.*not ASCII"):
        parse_expression("2*ｃ", {"c": c})


def test_lookalike_parameter_in_model_file_and_set(tmp_path, capsys):
    """Finding 3: a full-width parameter name in the file, and `--set ｃ=5`, are errors."""
    model = tmp_path / "m.toml"
    model.write_text(_model().replace("c = {", '"ｃ" = {').replace('stiffness = "c"', 'stiffness = "ｃ"'))
    line = _one_error(*_run(capsys, "simulate", str(model), "--engine", "python")[::2])
    assert "U+FF43" in line
    model.write_text(_model())
    line = _one_error(*_run(capsys, "simulate", str(model), "--engine", "python", "--set", "ｃ=5")[::2])
    assert "no parameter" in line


def test_element_names_are_identifiers():
    with pytest.raises(ModelError, match="force element name"):
        parse_model(_model().replace('name = "spring"', 'name = "spr ing"'))


def test_output_named_time_is_refused():
    """Finding 10: an output named `time` would write a CSV the tool itself rejects."""
    with pytest.raises(ModelError, match="reserved"):
        parse_model(_model().replace('[[outputs]]\nname = "x"', '[[outputs]]\nname = "time"'))


@pytest.mark.parametrize("field", ["description", "unit"])
@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b", "\x7f", "\x85", "\ufffe"])
def test_control_characters_in_free_text_are_refused(field, char):
    """Finding 9: control characters in names or units ended in a traceback on export (lxml)."""
    with pytest.raises(ModelError, match="control or non-character"):
        check_free_text(f"a{char}b", field)
    assert check_free_text("line one\n\tline two – ü 🙂", field)


def test_control_character_in_unit_is_one_error_on_export(tmp_path, capsys):
    model = tmp_path / "m.toml"
    model.write_text(_model().replace("c = { value = 4.0,", 'c = { value = 4.0, unit = "N\\u001b[31m/m",'))
    line = _one_error(*_run(capsys, "export", str(model), "-o", str(tmp_path / "m.fmu"))[::2])
    assert "U+001B" in line
    assert not (tmp_path / "m.fmu").exists()


def test_model_file_with_bom_loads(tmp_path):
    """Finding 10: a model file starting with a byte-order mark was reported as a syntax error."""
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + _model().encode())
    assert load_model(path).name == "osc"


# -- findings 8, 9, 10: expressions ---------------------------------------------------------------


def _balanced_product(n: int) -> str:
    factors = [f"(x+{k})" for k in range(1, n + 1)]
    while len(factors) > 1:
        factors = [f"({factors[i]}*{factors[i + 1]})" if i + 1 < len(factors) else factors[i]
                   for i in range(0, len(factors), 2)]
    return factors[0]


def test_large_product_is_refused_before_cse():
    """Finding 8: a 1 KB balanced product of 100 factors spent 91 s in CSE; it is refused."""
    import sympy as sp

    text = _balanced_product(100)
    assert len(text) < 1200
    with pytest.raises(ExpressionError, match="product of more than"):
        parse_expression(text, {"x": sp.Symbol("x")})


def test_expression_node_limit():
    import sympy as sp

    terms = [f"{k}*x" for k in range(600)]
    while len(terms) > 1:  # balanced, so that the nesting limit does not trigger first
        terms = [f"({terms[i]}+{terms[i + 1]})" if i + 1 < len(terms) else terms[i] for i in range(0, len(terms), 2)]
    text = terms[0]
    with pytest.raises(ExpressionError, match="more than 1000 terms"):
        parse_expression(text, {"x": sp.Symbol("x")})


@pytest.mark.parametrize("text, match", [
    ("sqrt(-1)*x", "not a finite real"),
    ("log(-1)", "not a finite real"),
    ("x + log(0)", "not a finite real"),
    ("1" + "0" * 400 + "*x", "not finite as a double"),
    ("10**200*10**200*x", "not a finite double"),
    ("exp(1000)*x", "'exp' of these constants is not a finite real"),
    ("exp(exp(exp(100)))", "'exp' of these constants is not a finite real"),
    ("acos(2) + x", "'acos' of these constants is not a finite real"),
    ("exp(700)*exp(700)*x", "not a finite double"),
])
def test_constants_must_be_real_finite_doubles(text, match):
    """Findings 9 and 10: complex constants gave tracebacks; 10^400 ran in C as a wrong finite constant."""
    import sympy as sp

    with pytest.raises(ExpressionError, match=match):
        parse_expression(text, {"x": sp.Symbol("x")})


def test_huge_integer_in_model_file_is_one_error(tmp_path, capsys):
    model = tmp_path / "m.toml"
    model.write_text(_model().replace("m = 1.0", "m = " + "9" * 400))
    line = _one_error(*_run(capsys, "simulate", str(model))[::2])
    assert "too large" in line or "finite" in line


def test_large_exact_integers_become_the_double_C_would_use():
    import sympy as sp

    x = sp.Symbol("x")
    expr = parse_expression("123456789012345678901*x", {"x": x})
    assert float(expr.coeff(x)) == 123456789012345678901.0
    assert not any(a.is_Integer and abs(a) > 2**53 for a in expr.atoms(sp.Number))


# -- finding 10: engines refuse the same inputs ------------------------------------------------------


@needs_cc
def test_negative_mass_refused_by_both_engines(capsys):
    """Finding 10: the C engine accepted a negative mass that the Python engine refuses."""
    lines = []
    for engine in ("native", "python"):
        lines.append(_one_error(*_run(capsys, "simulate", "sdof", "--set", "m=-1", "--t-end", "0.01",
                                      "--engine", engine)[::2]))
    for line in lines:
        assert "negative diagonal" in line and "'x'" in line


# -- the top-level handler -------------------------------------------------------------------------


def test_argument_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["simulate", "sdof", "--engine", "bogus"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith(PREFIX) and "--help" in err


def test_unexpected_failure_is_one_line_naming_a_bug(capsys, monkeypatch):
    from fmi_adjoint.cli import main as cli_main

    def broken(args):
        raise TypeError("boom\nsecond line")

    monkeypatch.setitem(cli_main._COMMANDS, "examples", broken)
    line = _one_error(*_run(capsys, "examples")[::2])
    assert "internal error (TypeError: 'boom second line')" in line or "internal error (TypeError:" in line
    assert "report" in line


def _private_env(tmp_path: Path) -> dict:
    """A private temporary folder and an empty build cache (so the model is really built)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp), "PYTHONDONTWRITEBYTECODE": "1",
            "FMI_ADJOINT_CACHE": str(tmp_path / "cache")}


def _half_built(cache: Path) -> list[Path]:
    """Temporary entry folders, or entries without their manifest (never published)."""
    if not cache.exists():
        return []
    leftovers = [p for p in cache.rglob(".tmp-*")]
    entries = [p for kind in cache.iterdir() if kind.is_dir() for shard in kind.iterdir() if shard.is_dir()
               for p in shard.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return leftovers + [p for p in entries if not (p / "MANIFEST.json").exists()]


# Sends SIGINT to its own process the moment the module TARGET is first imported: the
# interruption lands inside the package's imports, deterministically.
_TRIP = """
import importlib.abc, os, signal, sys
TARGET = sys.argv[1]
class Trip(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == TARGET:
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, Trip())
sys.argv = ["fmi-adjoint", "simulate", "sdof", "--engine", "python"]
from fmi_adjoint.cli import main
main()
"""


@pytest.mark.parametrize("module", ["numpy", "sympy", "scipy.sparse", "scipy.linalg", "fmi_adjoint.cli.main",
                                    "fmi_adjoint.model"])
def test_ctrl_c_during_imports_is_exit_130(tmp_path, module):
    """Finding 9: Ctrl-C while the package imports gave a traceback.  ``scipy.linalg`` is
    imported on use, in the run's first factorization (issue 24: not at the command line's
    start): an interruption there is the same exit."""
    proc = subprocess.run([sys.executable, "-c", _TRIP, module], capture_output=True, text=True,
                          env=_private_env(tmp_path), timeout=120)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip() == "fmi-adjoint: interrupted", proc.stderr
    assert list((tmp_path / "tmp").iterdir()) == []


# Sends SIGTERM to its own process at one point of a model's build, deterministically (no
# race with a polling test): STAGE names the function whose call it lands in.  'mkdir': just
# after the build's temporary entry folder (.tmp-*) is made in the cache; 'generate': as the
# code generators start; 'compile': as the first compiler process starts (in a compiler
# thread, so the signal reaches the main thread while it waits for the compilers).
_TERM_AT = """
import os, signal, sys, threading
STAGE = sys.argv[1]
sent, lock = [], threading.Lock()
def term():  # once: compiler threads running after the first would each signal again
    with lock:
        if sent:
            return
        sent.append(True)
    os.kill(os.getpid(), signal.SIGTERM)
def before(module, name):  # module.name signals as it is called
    real = getattr(module, name)
    def tripped(*args, **kwargs):
        term()
        return real(*args, **kwargs)
    setattr(module, name, tripped)
if STAGE == "mkdir":
    real_mkdir = os.mkdir
    def mkdir(path, *args, **kwargs):
        real_mkdir(path, *args, **kwargs)
        if os.path.basename(os.fspath(path)).startswith(".tmp-"):
            term()
    os.mkdir = mkdir
elif STAGE == "generate":
    import fmi_adjoint.native.sources as sources
    before(sources, "model_c_sources")
elif STAGE == "compile":
    import fmi_adjoint.toolchain as toolchain
    before(toolchain, "_run")
sys.argv = ["fmi-adjoint", "simulate", "sdof", "--t-end", "0.01", "--engine", "native"]
from fmi_adjoint.cli import main
main()
"""


@needs_cc
@pytest.mark.parametrize("stage", ["mkdir", "generate", "compile"])
def test_sigterm_during_a_build_leaves_no_build_folder(tmp_path, stage):
    """Finding 11: SIGTERM during code generation left temporary build folders.  The signal
    lands at a chosen point of the build (no polling for a window, which missed it on a fast
    machine); 'mkdir' found the window between making the temporary folder and the guarded
    build, where a signal left the folder behind."""
    proc = subprocess.run([sys.executable, "-c", _TERM_AT, stage], capture_output=True, text=True,
                          env=_private_env(tmp_path), timeout=300)
    assert proc.returncode == 143, proc.stderr
    assert proc.stderr.strip().endswith("fmi-adjoint: terminated"), proc.stderr
    assert list((tmp_path / "tmp").iterdir()) == []
    assert (tmp_path / "cache").exists()  # the build had begun
    assert _half_built(tmp_path / "cache") == []


@needs_cc
def test_full_temporary_folder_during_native_build_is_one_error(tmp_path):
    """Finding 9: a full temporary folder during the native build gave a traceback.  The
    disk is 'full' through a file-size limit (writes fail with EFBIG instead of ENOSPC); the
    build now writes into the build cache, so the error names FMI_ADJOINT_CACHE."""
    env = _private_env(tmp_path)

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))

    proc = subprocess.run([str(CONSOLE_SCRIPT), "simulate", "sdof", "--t-end", "0.01", "--engine", "native"],
                          capture_output=True, text=True, env=env, preexec_fn=limit, timeout=300)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(PREFIX) and "FMI_ADJOINT_CACHE" in lines[0], proc.stderr
    assert list((tmp_path / "tmp").iterdir()) == []
    assert _half_built(tmp_path / "cache") == []
