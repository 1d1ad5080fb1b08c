"""Run the benchmark scripts and write what they print into docs/reference/benchmarks.md.

``./run bench [NAME ...]`` calls this: every script ``benchmarks/[!_]*.py`` (or the named ones,
e.g. ``schemes``) runs in its own process; its output goes to the terminal as it comes and into
its section of the page, with the date and the machine.  Sections of scripts not run (or that
failed) keep what the page held; the page is replaced atomically, and a new script gets a
section of its own.  Exit status 1 if a script failed.
"""

from __future__ import annotations

import ast
import datetime
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

from fmi_adjoint.files import atomic_output

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "reference" / "benchmarks.md"
HEADER = """# Benchmarks

What the scripts in `benchmarks/` print, measured on the machine that ran them. `./run bench`
runs them all and rewrites each section of this page with the script's output, the date and the
machine (`./run bench schemes cli_times` runs and rewrites only those); the script
`benchmarks/_write_docs.py` does the writing. The first line of each section says where its
figures come from.
"""
NOT_RUN = "Not measured yet: run `./run bench {name}`."
_SECTION = re.compile(r"<!-- benchmark: (\w+) -->\n(.*?)\n<!-- /benchmark: \1 -->", re.S)


def scripts() -> dict[str, Path]:
    """The benchmark scripts by name (helpers start with ``_``)."""
    return {path.stem: path for path in sorted((ROOT / "benchmarks").glob("[!_]*.py"))}


def summary(path: Path) -> str:
    """The first paragraph of a script's docstring, on one line (read, not imported)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return " ".join(doc.split("\n\n")[0].split()).replace("``", "`")


def sections(text: str) -> dict[str, str]:
    """The bodies of the page's sections by script name."""
    return {match.group(1): match.group(2) for match in _SECTION.finditer(text)}


def render(bodies: dict[str, str], names: list[str] | None = None) -> str:
    """The page: the header and one section per script, ``bodies`` where given."""
    parts = [HEADER]
    for name, path in scripts().items() if names is None else ((n, scripts()[n]) for n in names):
        body = bodies.get(name) or NOT_RUN.format(name=name)
        about = summary(path)
        parts.append(f"## `{name}.py` {{ #{name.replace('_', '-')} }}\n\n" + (f"{about}\n\n" if about else "")
                     + f"<!-- benchmark: {name} -->\n{body}\n<!-- /benchmark: {name} -->\n")
    return "\n".join(parts)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}, {platform.system()}"


def run(path: Path) -> tuple[int, str]:
    """Run a script, echoing its standard output line by line; ``(exit status, output)``."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with subprocess.Popen([sys.executable, str(path)], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                          env=env) as process:
        assert process.stdout is not None
        lines = []
        for line in process.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line)
    return process.returncode, "".join(lines)


def write(text: str) -> None:
    """Replace the page atomically (a half-written page never appears)."""
    with atomic_output(PAGE) as handle:  # the umask's mode, no temporary file left on failure
        handle.write(text)


def main(argv: list[str]) -> int:
    known = scripts()
    unknown = [name for name in argv if name.removesuffix(".py") not in known]
    if unknown:
        print(f"bench: unknown benchmark(s) {unknown}; choose from {', '.join(known)}.", file=sys.stderr)
        return 2
    chosen = [name.removesuffix(".py") for name in argv] or list(known)
    measured: dict[str, str] = {}
    failed = []
    for name in chosen:
        print(f"== benchmarks/{name}.py", flush=True)
        status, output = run(known[name])
        if status != 0:
            failed.append(name)
            print(f"bench: benchmarks/{name}.py failed (exit status {status}); its section of {PAGE.name} "
                  "is left as it was.", file=sys.stderr)
            continue
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        measured[name] = (f"Printed by `./run bench` on {stamp} ({machine()}):\n\n"
                          f"```text\n{output.rstrip()}\n```")
        # The page as it is now (another `./run bench` may have written its sections since),
        # with this run's sections: a long run keeps what it has measured.
        current = sections(PAGE.read_text(encoding="utf-8")) if PAGE.exists() else {}
        write(render({**current, **measured}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
