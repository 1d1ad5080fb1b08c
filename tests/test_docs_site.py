"""The documentation site (issue 27): it builds with ``mkdocs build --strict``, and its reference
pages are generated from the code (docs/hooks.py) so they cannot drift: every command and option
of the parser, every key the model-file reader accepts (a key the reader accepts without a
meaning fails), and a section per benchmark script (benchmarks/_write_docs.py)."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fmi_adjoint import model_file
from fmi_adjoint.cli.main import build_parser
from fmi_adjoint.errors import ModelError

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def hooks():
    return _load("fmi_adjoint_docs_hooks", DOCS / "hooks.py")


@pytest.fixture(scope="module")
def bench_writer():
    return _load("fmi_adjoint_bench_writer", ROOT / "benchmarks" / "_write_docs.py")


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return [option for action in parser._actions if action.help != argparse.SUPPRESS
            for option in action.option_strings]


def _section(text: str, command: str) -> str:
    """The part of the CLI reference under ``## command``, up to the next command."""
    start = text.index(f"## {command} {{")
    following = text.find("\n## ", start + 1)
    return text[start:following if following >= 0 else len(text)]


# -- the command line ----------------------------------------------------------------------

def test_cli_reference_lists_every_command_and_option(hooks):
    parser = build_parser()
    text = hooks.cli_reference(parser)
    commands = hooks.commands(parser)
    names = {command.split()[1] for command, _, _ in commands}
    assert {"identify", "simulate", "design", "validate", "export", "apply", "demo", "cache", "plugins"} <= names
    assert "fmi-adjoint plugins check" in {command for command, _, _ in commands}  # nested commands too
    for command, _, sub in commands:
        section = _section(text, command)
        for option in _options(sub):
            if option in ("-h", "--help"):
                continue
            assert re.search(rf"`{re.escape(option)}[ `]", section), f"{command}: {option} is not documented"


def test_cli_reference_follows_the_parser(hooks):
    """A test of the test above: an option added to the parser appears without editing any page."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["simulate"]
    sub.add_argument("--brand-new-option", metavar="X", help="an option no page mentions")
    section = _section(hooks.cli_reference(parser), "fmi-adjoint simulate")
    assert "`--brand-new-option X`" in section and "an option no page mentions" in section


# -- the model file ------------------------------------------------------------------------

def test_every_model_file_key_is_documented(hooks):
    assert hooks.undocumented_keys() == []
    text = hooks.model_file_reference()
    for section, kinds in model_file.MODEL_FILE_KEYS.items():
        assert f"{{ #{section} }}" in text
        for kind, keys in kinds.items():
            for key in keys:
                assert f"| `{key}` |" in text, f"{section}.{key}"
            if kind:
                assert f"| `{kind}` |" in text, f"{section} type {kind}"
    for name, (_, keys) in hooks.element_keys().items():
        assert f"### `{name}`" in text
        for key in keys:
            assert f"| `{key}` |" in text.split(f"### `{name}`")[1].split("\n### ")[0], f"{name}.{key}"


def test_documentation_names_only_keys_the_reader_accepts(hooks):
    docs = hooks.key_docs()
    for section, entry in docs.items():
        if section == "element_fields":
            continue
        kinds = model_file.MODEL_FILE_KEYS[section]  # KeyError: a documented section the reader lacks
        accepted = set().union(*kinds.values())
        assert set(entry.get("keys", {})) <= accepted, section
        assert set(entry.get("types", {})) <= set(kinds), section


MINIMAL = """
[model]
name = "m1"
{extra}
[parameters]
k = 1.0
[[coordinates]]
name = "x"
mass = 1.0
[[forces]]
type = "linear_spring_damper"
name = "spring"
coordinates = ["x"]
stiffness = "k"
[[outputs]]
name = "x"
expression = "x"
"""


def test_a_key_added_to_the_reader_without_documentation_fails(hooks, monkeypatch):
    """The test of the test: an extra key in the reader's table is accepted by the reader
    (the table is the reader's own) and reported as undocumented, and the page refuses to build."""
    with pytest.raises(ModelError, match=r"unknown key\(s\) \['colour'\]"):
        model_file.parse_model(MINIMAL.format(extra='colour = "red"'))
    monkeypatch.setitem(model_file.MODEL_FILE_KEYS["model"], "", model_file.MODEL_FILE_KEYS["model"][""] | {"colour"})
    model_file.parse_model(MINIMAL.format(extra='colour = "red"'))  # accepted now
    assert hooks.undocumented_keys() == ["model.colour"]
    with pytest.raises(hooks.ReferenceError, match="model.colour"):
        hooks.model_file_reference()


def test_a_new_entry_type_without_documentation_fails(hooks, monkeypatch):
    kinds = dict(model_file.MODEL_FILE_KEYS["joints"], gear=frozenset({"name", "type", "markers"}))
    monkeypatch.setitem(model_file.MODEL_FILE_KEYS, "joints", kinds)
    assert hooks.undocumented_keys() == ["joints.type:gear"]


def test_model_file_page_example_is_a_valid_model():
    text = (DOCS / "reference" / "model-file.md").read_text(encoding="utf-8")
    example = re.search(r"```toml\n(.*?)```", text, re.S)
    assert example is not None
    model = model_file.parse_model(example.group(1))
    assert model.name == "sdof" and [c.name for c in model.coordinates] == ["x"]


def test_reference_pages_carry_their_markers(hooks):
    assert hooks.CLI_MARKER in (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    assert hooks.MODEL_FILE_MARKER in (DOCS / "reference" / "model-file.md").read_text(encoding="utf-8")


# -- the benchmark page --------------------------------------------------------------------

def test_benchmark_page_has_a_section_per_script(bench_writer):
    page = (DOCS / "reference" / "benchmarks.md").read_text(encoding="utf-8")
    assert set(bench_writer.sections(page)) == set(bench_writer.scripts())
    assert page == bench_writer.render(bench_writer.sections(page))  # as ./run bench writes it


def test_bench_writes_each_scripts_output_into_its_section(bench_writer, tmp_path, monkeypatch, capsys):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "docs" / "reference").mkdir(parents=True)
    (tmp_path / "benchmarks" / "fast.py").write_text('"""A fast benchmark."""\nprint("model | 1.25 us/step")\n')
    (tmp_path / "benchmarks" / "broken.py").write_text('import sys\nprint("half a table")\nsys.exit(3)\n')
    (tmp_path / "benchmarks" / "_helper.py").write_text("raise SystemExit(1)\n")
    page = tmp_path / "docs" / "reference" / "benchmarks.md"
    monkeypatch.setattr(bench_writer, "ROOT", tmp_path)
    monkeypatch.setattr(bench_writer, "PAGE", page)
    page.write_text(bench_writer.render({"broken": "figures of an earlier run"}))
    assert bench_writer.main([]) == 1  # broken.py failed
    sections = bench_writer.sections(page.read_text())
    assert set(sections) == {"fast", "broken"}  # helpers (_*.py) are no benchmarks
    assert "```text\nmodel | 1.25 us/step\n```" in sections["fast"]
    assert sections["broken"] == "figures of an earlier run"
    assert "model | 1.25 us/step" in capsys.readouterr().out  # the terminal sees the output too
    assert bench_writer.main(["nonexistent"]) == 2


def test_two_bench_runs_at_once_keep_each_others_sections(bench_writer, tmp_path, monkeypatch):
    """``./run bench a`` and ``./run bench b`` at the same time: each writes its own section
    into the page as it is when it writes, not as it was when it started."""
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "docs" / "reference").mkdir(parents=True)
    page = tmp_path / "docs" / "reference" / "benchmarks.md"
    monkeypatch.setattr(bench_writer, "ROOT", tmp_path)
    monkeypatch.setattr(bench_writer, "PAGE", page)
    for name in ("slow", "other"):
        (tmp_path / "benchmarks" / f"{name}.py").write_text(f'print("{name} figures")\n')
    page.write_text(bench_writer.render({}))

    def run(path):  # while "slow" runs, the other run writes its section
        page.write_text(bench_writer.render({"other": "written meanwhile"}))
        return 0, "slow figures"

    monkeypatch.setattr(bench_writer, "run", run)
    assert bench_writer.main(["slow"]) == 0
    sections = bench_writer.sections(page.read_text())
    assert sections["other"] == "written meanwhile"
    assert "slow figures" in sections["slow"]


# -- the site ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built once with ``mkdocs build --strict`` (warnings are errors)."""
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                         cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    assert "WARNING" not in run.stderr, run.stderr[-4000:]
    return out


@pytest.mark.slow
def test_site_builds_strict_with_generated_reference(site):
    cli = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    for command, _, sub in _load("fmi_adjoint_docs_hooks_site", DOCS / "hooks.py").commands(build_parser()):
        assert f'id="{command.replace(" ", "-")}"' in cli
        for option in _options(sub):
            if option in ("-h", "--help"):  # left out of the page on purpose (every command has them)
                continue
            assert f"<code>{option}" in cli, f"{command} {option}"
    keys = (site / "reference" / "model-file.html").read_text(encoding="utf-8")
    assert 'id="force-element-types"' in keys and "<code>angular_velocity_frame</code>" in keys
    api = (site / "reference" / "api.html").read_text(encoding="utf-8")
    assert 'id="fmi_adjoint.model_file.load_model"' in api and 'id="fmi_adjoint.design.run_design"' in api


@pytest.mark.slow
def test_site_loads_nothing_from_the_network(site):
    """Offline: no web fonts, no script, style or image from another host."""
    for page in site.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        external = re.findall(r'<(?:script|link|img|iframe)\b[^>]*?(?:src|href)="((?:https?:)?//[^"]*)"', html)
        assert external == [], f"{page.relative_to(site)}: {external}"
        assert "fonts.googleapis" not in html
