"""Every command and code block of the tutorials and how-to pages runs (issue 27).

The pages ``docs/tutorials/*.md`` and ``docs/how-to/*.md`` are read as a reader would use
them; the conventions for their authors:

* A page's blocks run **in order, in one fresh temporary folder** (the working directory),
  with the virtual environment's ``bin`` first on ``PATH``, so ``fmi-adjoint`` and ``python``
  are the ones installed with this checkout; the build cache is the suite's.
* A fenced ``bash`` block runs with ``bash -e -o pipefail``: the first failing command fails it.
* A fenced ``python`` block runs as a script of its own (written to ``.docs-block-N.py`` in that
  folder, which is then first on ``sys.path``; a script file, so that multiprocessing can start
  workers from it); blocks do not share variables, files are how they talk.
* A block of any language directly preceded by the line ``<!-- file: NAME -->`` (invisible on
  the site) is **written** to ``NAME`` in that folder instead of being run: a model file that a
  later command reads, shown with its own highlighting.
* ``text``, ``console``, ``toml`` (without a file marker) and every other language are shown,
  never run: use them for output and for commands that must not run here (installing a
  package into the environment).

A failing block fails the page's test naming the page, the block's number and line, its exit
code and the end of its output.  Commands on these pages must be quick (short ``--t-end``, few
iterations, small models): the whole file must stay under two minutes on the 2-core machine.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: The pages whose blocks run (issue 27: "every command and code block in the tutorials").
PAGES = sorted((DOCS / "tutorials").glob("*.md")) + sorted((DOCS / "how-to").glob("*.md"))
#: The tutorial and how-to pages of the site's navigation (mkdocs.yml); each must hold a runnable block.
EXPECTED = (
    "tutorials/first-identification.md", "tutorials/your-own-model.md", "tutorials/multibody-model.md",
    "tutorials/export-fmu-fmpy.md", "tutorials/identify-third-party-fmu.md", "tutorials/input-design.md",
    "tutorials/cluster.md", "how-to/force-element-plugin.md", "how-to/bench-data.md", "how-to/read-bench-data.md",
    "how-to/choose-a-cost.md", "how-to/choose-an-integrator.md", "how-to/matrix-terms.md", "how-to/export-fmu.md",
)
RUN = ("bash", "python")
#: Longest a single block may take before it counts as failed (not a timing assertion: a hang guard).
BLOCK_TIMEOUT = 300.0

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+-]*)[^\n]*$")
_FILE_MARKER = re.compile(r"^[ \t]*<!--[ \t]*file:[ \t]*(?P<name>[\w.\-/]+)[ \t]*-->[ \t]*$")


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced block of a page: its number on the page (1-based), first line, language,
    text (indentation removed) and the file it is written to (``None``: run or shown)."""

    number: int
    line: int
    lang: str
    text: str
    file: str | None


class DocsBlockFailed(AssertionError):
    """A runnable block of a docs page failed (the message names the page and the block)."""


def blocks(text: str) -> list[Block]:
    """The fenced blocks of a Markdown page, in order (also inside lists and admonitions)."""
    lines = text.splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, lang = match["indent"], match["fence"], match["lang"].lower()
        previous = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        marker = _FILE_MARKER.match(previous)
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not re.match(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", lines[j]):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        if j == len(lines):
            raise DocsBlockFailed(f"the block opened on line {i + 1} ({fence}{lang}) is never closed")
        found.append(Block(len(found) + 1, i + 1, lang, "\n".join(body) + "\n", marker["name"] if marker else None))
        i = j + 1
    return found


def environment() -> dict[str, str]:
    """The environment of a block: this interpreter's ``bin`` first on PATH (``fmi-adjoint``)."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.pop("PYTHONPATH", None)
    return env


def run_page(page: Path, folder: Path, *, name: str | None = None) -> int:
    """Run the blocks of ``page`` in ``folder``; the number of blocks run (files written excluded).

    Raises
    ------
    DocsBlockFailed
        A block failed: the message names the page, the block number and line, and its output.
    """
    name = name or str(page.relative_to(DOCS) if page.is_relative_to(DOCS) else page)
    env = environment()
    ran = 0
    for block in blocks(page.read_text(encoding="utf-8")):
        where = f"{name}, block {block.number} (```{block.lang} on line {block.line})"
        if block.file is not None:
            target = (folder / block.file).resolve()
            if not target.is_relative_to(folder.resolve()):
                raise DocsBlockFailed(f"{where}: the file marker {block.file!r} leaves the page's folder")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text, encoding="utf-8")
            continue
        if block.lang not in RUN:
            continue
        if block.lang == "bash":
            argv, stdin = ["bash", "-e", "-o", "pipefail", "-s"], block.text
        else:
            # A script file, not stdin: multiprocessing (Dask's workers) re-imports the main module.
            script = folder / f".docs-block-{block.number}.py"
            script.write_text(block.text, encoding="utf-8")
            argv, stdin = [sys.executable, script.name], ""
        try:
            done = subprocess.run(argv, input=stdin, cwd=folder, env=env, capture_output=True, text=True,
                                  timeout=BLOCK_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise DocsBlockFailed(f"{where} did not finish within {BLOCK_TIMEOUT:.0f} s") from None
        ran += 1
        if done.returncode != 0:
            output = (done.stdout + done.stderr)[-3000:]
            raise DocsBlockFailed(f"{where} failed with exit code {done.returncode}:\n{block.text}\n--- output ---\n"
                                  f"{output}")
    return ran


# ------------------------------------------------------------------------------- the pages --

def test_every_tutorial_and_how_to_page_is_there_with_runnable_blocks():
    names = {str(p.relative_to(DOCS)) for p in PAGES}
    missing = [e for e in EXPECTED if e not in names]
    assert not missing, f"pages of the site's navigation missing under docs/: {missing}"
    empty = [e for e in EXPECTED
             if not any(b.lang in RUN and b.file is None for b in blocks((DOCS / e).read_text(encoding="utf-8")))]
    assert not empty, f"pages without a runnable ```bash or ```python block: {empty}"


def tier_rows_missing(page_text: str) -> list[str]:
    """The tiers of tests/tolerances.py whose row ``| `NAME` | value |`` the page lacks."""
    import ast

    source = (ROOT / "tests" / "tolerances.py").read_text(encoding="utf-8")
    lines = source.splitlines()
    missing = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            value = lines[node.lineno - 1].split("=", 1)[1].strip()
            if f"| `{node.targets[0].id}` | {value} |" not in page_text:
                missing.append(f"{node.targets[0].id} = {value}")
    return missing


def test_tolerance_page_lists_every_tier_with_its_value():
    missing = tier_rows_missing((DOCS / "explanation" / "tolerances.md").read_text(encoding="utf-8"))
    assert not missing, (f"docs/explanation/tolerances.md lacks the rows of: {missing} "
                         "(copy them from tests/tolerances.py)")


def test_tier_check_notices_a_changed_value():
    page = (DOCS / "explanation" / "tolerances.md").read_text(encoding="utf-8")
    assert tier_rows_missing(page.replace("| `EXACT` | 1e-12 |", "| `EXACT` | 1e-11 |")) == ["EXACT = 1e-12"]


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_page_blocks_run(page, tmp_path):
    run_page(page, tmp_path)


# ----------------------------------------------------------------- the harness (test of the test) --

SAMPLE = """# A page

<!-- file: model.txt -->
```toml
answer = 42
```

```bash
grep -q "answer = 42" model.txt
echo ran > first.txt
```

```text
exit 1
```

- In a list:

    ```python
    from pathlib import Path
    assert Path("first.txt").read_text() == "ran\\n"
    ```

```python
raise SystemExit("this block fails")
```
"""


def test_harness_runs_blocks_in_order_and_reports_the_failing_one(tmp_path):
    page = tmp_path / "sample.md"
    page.write_text(SAMPLE, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(DocsBlockFailed) as failed:
        run_page(page, work, name="how-to/sample.md")
    message = str(failed.value)
    assert "how-to/sample.md, block 5 (```python on line 24) failed with exit code 1" in message
    assert "this block fails" in message
    # The file marker wrote the toml block, the bash block read it, the indented python block ran.
    assert (work / "model.txt").read_text(encoding="utf-8") == "answer = 42\n"
    assert (work / "first.txt").exists()


def test_harness_fails_a_bash_block_at_its_first_failing_command(tmp_path):
    page = tmp_path / "sample.md"
    page.write_text("```bash\nfalse\necho after > after.txt\n```\n", encoding="utf-8")
    with pytest.raises(DocsBlockFailed, match="block 1"):
        run_page(page, tmp_path)
    assert not (tmp_path / "after.txt").exists()


def test_harness_runs_the_installed_command(tmp_path):
    page = tmp_path / "sample.md"
    page.write_text("```bash\ncommand -v fmi-adjoint > where.txt\n```\n", encoding="utf-8")
    assert run_page(page, tmp_path) == 1
    assert Path((tmp_path / "where.txt").read_text(encoding="utf-8").strip()).parent == Path(sys.executable).parent


def test_harness_refuses_an_unclosed_block(tmp_path):
    page = tmp_path / "sample.md"
    page.write_text("```bash\necho never closed\n", encoding="utf-8")
    with pytest.raises(DocsBlockFailed, match="never closed"):
        run_page(page, tmp_path)
