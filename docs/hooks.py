"""MkDocs hooks of the documentation site: the generated reference pages.

Registered in ``mkdocs.yml`` (``hooks:``).  While the site is built, ``on_page_markdown``
replaces a marker line of a page by text generated from the code, so the reference cannot
drift from what the program accepts:

* ``<!-- generated: cli -->`` (``reference/cli.md``): every command and option of
  ``fmi_adjoint.cli.main.build_parser``;
* ``<!-- generated: model-file-keys -->`` (``reference/model-file.md``): every key of
  ``fmi_adjoint.model_file.MODEL_FILE_KEYS`` (the table the reader refuses unknown keys with)
  and of the registered force elements, with the meanings of ``reference/model-file-keys.toml``.
  A key without a meaning stops the build.

Generating at build time (rather than committing generated Markdown that a test compares) was
chosen because there is nothing to regenerate and forget: the built site always shows the
parser and the reader of the checked-out code.  The functions are plain, so
``tests/test_docs_site.py`` calls them without building the site.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

DOCS = Path(__file__).resolve().parent
KEY_DOCS = DOCS / "reference" / "model-file-keys.toml"
CLI_MARKER = "<!-- generated: cli -->"
MODEL_FILE_MARKER = "<!-- generated: model-file-keys -->"
#: The distribution whose registered force elements the reference documents (plugins of other
#: distributions document themselves).
DISTRIBUTION = "fmi-adjoint"


class ReferenceError(Exception):
    """A reference page cannot be generated (an undocumented key, a missing marker)."""


def _cell(text: str) -> str:
    """Text for a Markdown table cell: one line, pipes escaped, and angle brackets outside code
    spans (``<name>`` would be read as an HTML tag there)."""
    parts = " ".join(text.split()).replace("|", "\\|").split("`")
    parts[::2] = [part.replace("<", "&lt;").replace(">", "&gt;") for part in parts[::2]]
    return "`".join(parts)


def _code(text: str) -> str:
    return "`" + text.replace("|", "\\|") + "`"


# -- the command line ---------------------------------------------------------------------

def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """``(name, help, parser)`` of the subcommands of ``parser``."""
    result = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                result.append((name, helps.get(name, ""), sub))
    return result


def commands(parser: argparse.ArgumentParser | None = None, prefix: str = "fmi-adjoint"
             ) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """Every command of the parser, nested ones included: ``(command line, help, parser)``."""
    if parser is None:
        from fmi_adjoint.cli.main import build_parser
        parser = build_parser()
    result = []
    for name, help_text, sub in _subcommands(parser):
        result.append((f"{prefix} {name}", help_text, sub))
        result.extend(commands(sub, f"{prefix} {name}"))
    return result


def _argument_row(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    formatter = parser._get_formatter()
    if action.option_strings:
        *others, last = action.option_strings
        if action.nargs != 0:  # the argument's metavar, or its choices {a,b,c}
            last += " " + formatter._format_args(action, action.dest.upper())
        name = ", ".join(_code(option) for option in (*others, last))
    else:
        name = _code(formatter._format_args(action, action.dest))
    help_text = formatter._expand_help(action) if action.help else ""
    notes = []
    if (action.option_strings and action.nargs != 0 and action.default not in (None, argparse.SUPPRESS)
            and "default" not in help_text):
        notes.append("default " + _code(str(action.default)))
    if action.required and action.option_strings:
        notes.append("required")
    meaning = _cell(help_text)
    if notes:
        meaning = (meaning + " " if meaning else "") + "(" + "; ".join(notes) + ")"
    return f"| {name} | {meaning} |"


def cli_reference(parser: argparse.ArgumentParser | None = None) -> str:
    """Markdown of every command, its usage and every option, from the argparse parser."""
    if parser is None:
        from fmi_adjoint.cli.main import build_parser
        parser = build_parser()
    lines = [f"`{parser.prog}`: {parser.description or ''}", "", "| command | what it does |", "|---|---|"]
    every = commands(parser, parser.prog)
    for command, help_text, _ in every:
        anchor = command.replace(" ", "-")
        lines.append(f"| [{_code(command)}](#{anchor}) | {_cell(help_text)} |")
    for command, help_text, sub in every:
        anchor = command.replace(" ", "-")
        lines += ["", f"## {command} {{ #{anchor} }}", ""]
        if help_text:
            lines += [_cell(help_text[:1].upper() + help_text[1:]) + ".", ""]
        lines += ["```text", sub.format_usage().strip(), "```", ""]
        if sub.description and sub.description != help_text:
            lines += [_cell(sub.description), ""]
        for group in sub._action_groups:
            actions = [a for a in group._group_actions
                       if a.help != argparse.SUPPRESS and not isinstance(a, argparse._SubParsersAction)
                       and not isinstance(a, argparse._HelpAction)]
            if not actions:
                continue
            title = group.title or "options"
            lines += [f"**{_cell(title[:1].upper() + title[1:])}**", ""]
            if group.description:
                lines += [_cell(group.description), ""]
            lines += ["| argument | meaning |", "|---|---|"]
            lines += [_argument_row(sub, action) for action in actions]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# -- the model file -----------------------------------------------------------------------

def key_docs(path: Path = KEY_DOCS) -> dict:
    """The meanings of the model-file keys (``reference/model-file-keys.toml``)."""
    with open(path, "rb") as file:
        return tomllib.load(file)


def element_keys(names: Iterable[str] | None = None) -> dict[str, tuple[type, dict[str, str]]]:
    """The registered force elements of this distribution and the keys the reader accepts for
    each: ``{type: (class, {key: "parameter" | "field"})}`` (``table_load``: ``file`` and
    ``column`` in place of ``times`` and ``values``, as the reader reads them)."""
    from fmi_adjoint.forces.registry import default_registry

    registry = default_registry()
    result = {}
    for name in names if names is not None else registry.names():
        if names is None and not registry.distribution(name).startswith(DISTRIBUTION + " "):
            continue
        cls = registry.get(name)
        declared = {decl.name for decl in cls.parameters}
        keys = {field.name: "parameter" if field.name in declared else "field"
                for field in dataclasses.fields(cls)}
        if name == "table_load":
            keys = {key: kind for key, kind in keys.items() if key not in ("times", "values")}
            keys.update(file="field", column="field")
        result[name] = (cls, {"type": "field", **keys})
    return result


def undocumented_keys(keys: Mapping[str, Mapping[str, Iterable[str]]] | None = None,
                      docs: Mapping | None = None) -> list[str]:
    """Every key the reader accepts that the documentation lacks, as ``section.key`` or
    ``section.type:<type>`` (empty: all documented).  ``keys`` defaults to the reader's
    :data:`~fmi_adjoint.model_file.MODEL_FILE_KEYS`, ``docs`` to ``model-file-keys.toml``."""
    if keys is None:
        from fmi_adjoint.model_file import MODEL_FILE_KEYS as keys
    if docs is None:
        docs = key_docs()
    missing = []
    for section, kinds in keys.items():
        entry = docs.get(section, {})
        for kind, names in kinds.items():
            if kind and kind not in entry.get("types", {}):
                missing.append(f"{section}.type:{kind}")
            missing += [f"{section}.{key}" for key in sorted(names)
                        if key not in entry.get("keys", {})]
    fields = docs.get("element_fields", {})
    for name, (_, element) in element_keys().items():
        missing += [f"forces.{name}.{key}" for key, kind in element.items()
                    if kind == "field" and key != "type" and key not in fields]
    return sorted(set(missing))


def _summary(cls: type) -> str:
    """The first paragraph of a class docstring, reST literals made Markdown."""
    doc = inspect.getdoc(cls) or ""
    first = doc.split("\n\n")[0].strip()
    if first.endswith("::"):
        first = first[:-2].rstrip(",;: ") + "."
    return _cell(first.replace("``", "`"))


def _number(value: float) -> str:
    return f"{value:g}".replace("inf", "∞")


def model_file_reference(keys: Mapping[str, Mapping[str, Iterable[str]]] | None = None,
                         docs: Mapping | None = None) -> str:
    """Markdown tables of every section, entry type and key of the model-file format.

    Raises
    ------
    ReferenceError
        If a key or type the reader accepts has no meaning in ``model-file-keys.toml``.
    """
    if keys is None:
        from fmi_adjoint.model_file import MODEL_FILE_KEYS as keys
    if docs is None:
        docs = key_docs()
    missing = undocumented_keys(keys, docs)
    if missing:
        raise ReferenceError(
            f"model-file keys the reader accepts but {KEY_DOCS.relative_to(DOCS.parent)} does not document: "
            f"{', '.join(missing)}. Add their meaning there.")
    lines: list[str] = []
    for section, kinds in keys.items():
        entry = docs[section]
        lines += [f"## {_code(entry.get('heading', section))} {{ #{section} }}", "", entry.get("about", ""), ""]
        typed = [kind for kind in kinds if kind]
        if typed:
            lines += ["| type | what it is |", "|---|---|"]
            lines += [f"| {_code(kind)} | {_cell(entry['types'][kind])} |" for kind in typed]
            lines.append("")
        every = sorted(set().union(*kinds.values()), key=list(entry["keys"]).index)
        if typed:
            lines += ["| key | types | meaning |", "|---|---|---|"]
            for key in every:
                where = [kind for kind in typed if key in kinds[kind]]
                label = "all" if len(where) == len(typed) else ", ".join(_code(kind) for kind in where)
                lines.append(f"| {_code(key)} | {label} | {_cell(entry['keys'][key])} |")
        else:
            lines += ["| key | meaning |", "|---|---|"]
            lines += [f"| {_code(key)} | {_cell(entry['keys'][key])} |" for key in every]
        lines.append("")
    lines += _element_reference(docs)
    return "\n".join(lines).rstrip() + "\n"


def _element_reference(docs: Mapping) -> list[str]:
    fields = docs["element_fields"]
    lines = ["## Force element types { #force-element-types }", "",
             "The registered element types of fmi-adjoint, for `[[forces]]` entries (and, the two-end ones, for "
             "multibody `law` tables, which take their name and ends from the force). Properties left out of "
             "an entry become parameters `<name>_<property>` with the default shown; vector properties must "
             "be given.", ""]
    for name, (cls, keys) in element_keys().items():
        declared = {decl.name: decl for decl in cls.parameters}
        lines += [f"### {_code(name)} {{ #element-{name.replace('_', '-')} }}", "", _summary(cls), "",
                  "| key | unit | meaning |", "|---|---|---|",
                  f"| `type` | | Required: {_code(name)}. |"]
        for key, kind in keys.items():
            if key == "type":
                continue
            if kind == "field":
                lines.append(f"| {_code(key)} | | {_cell(fields[key])} |")
                continue
            decl = declared[key]
            lo, hi = decl.bounds
            extra = ("a list of values" if decl.vector else f"default {_number(decl.default)}")
            extra += f", bounds [{_number(lo)}, {_number(hi)}]"
            lines.append(f"| {_code(key)} | {_cell(decl.unit)} | {_cell(decl.description)} ({extra}) |")
        lines.append("")
    return lines


# -- the hook -----------------------------------------------------------------------------

def on_page_markdown(markdown: str, page, config, files) -> str:
    """Replace the markers of the reference pages by the generated text."""
    from mkdocs.exceptions import PluginError

    try:
        if CLI_MARKER in markdown:
            markdown = markdown.replace(CLI_MARKER, cli_reference())
        if MODEL_FILE_MARKER in markdown:
            markdown = markdown.replace(MODEL_FILE_MARKER, model_file_reference())
    except ReferenceError as exc:
        raise PluginError(f"{page.file.src_uri}: {exc}") from None
    return markdown
