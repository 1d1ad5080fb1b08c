"""User text on its way into generated code, XML and messages: one gate for each use.

A model file is data.  Three kinds of text leave it:

* **Identifiers** (model, parameter, coordinate, constraint, output and element names) must
  match ``[A-Za-z_][A-Za-z0-9_]*``, at most :data:`MAX_IDENTIFIER` characters, and be neither
  a Python nor a C keyword.  ASCII only: Python's parser folds look-alike letters by NFKC
  (a full-width ``ｃ`` in an expression would silently mean the parameter ``c``), so
  non-ASCII names are refused rather than normalized.  Generated code never uses these
  names as symbols (symbols are ``q_0``, ``p_3``, ...); they appear in C only as string
  literals printed by :func:`c_string_literal`.
* **Free text** (descriptions, units, sources) may hold any printable Unicode, but no
  control character other than tab and newline, no surrogate and no non-character
  (:func:`check_free_text`), so it can go into XML; into C it goes only through
  :func:`c_string_literal`, never into a comment.
* **Excerpts in messages** (:func:`excerpt`): repr-escaped and capped, so an error never
  echoes a file's content or a terminal control sequence.
"""

from __future__ import annotations

import keyword
import re
import unicodedata

from .errors import ModelError

__all__ = [
    "C_KEYWORDS",
    "MAX_IDENTIFIER",
    "MAX_FREE_TEXT",
    "c_string_literal",
    "check_free_text",
    "check_identifier",
    "excerpt",
    "is_identifier",
]

#: Longest accepted identifier: it becomes part of file names (the FMU's
#: ``<modelIdentifier>.so``) and symbol names, whose limits are 255 bytes.
MAX_IDENTIFIER = 64

#: Longest accepted free text (a description, unit or source).
MAX_FREE_TEXT = 4096

#: C99/C11 keywords and the names the generated C code reserves for itself.
C_KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if inline int "
    "long register restrict return short signed sizeof static struct switch typedef union unsigned void "
    "volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn _Static_assert "
    "_Thread_local".split()
)

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Characters that are printed as themselves inside a C string literal; everything else, the
# two that are special there ('"', '\\'), '?' (which starts trigraphs) and, so that no
# literal can ever close or open a comment, '*' and '/', is written as a three-digit octal
# escape, which cannot run into a following digit.
_C_PLAIN = frozenset(range(0x20, 0x7F)) - {ord(c) for c in "\"\\?*/"}


def is_identifier(name: object) -> bool:
    """Whether ``name`` is an accepted identifier (see the module docstring)."""
    return (
        isinstance(name, str)
        and len(name) <= MAX_IDENTIFIER
        and _IDENTIFIER.match(name) is not None
        and not keyword.iskeyword(name)
        and name not in C_KEYWORDS
    )


def check_identifier(name: object, what: str) -> str:
    """Return ``name`` if it is an accepted identifier, else raise a ModelError naming the rule."""
    if is_identifier(name):
        return name  # type: ignore[return-value]
    shown = excerpt(name)
    if not isinstance(name, str):
        problem = f"is a {type(name).__name__}, not a string"
    elif not name:
        problem = "is empty"
    elif len(name) > MAX_IDENTIFIER:
        problem = f"is {len(name)} characters long (the limit is {MAX_IDENTIFIER})"
    elif not name.isascii():
        bad = next(ch for ch in name if not ch.isascii())
        problem = (f"contains the non-ASCII character {bad!r} (U+{ord(bad):04X}); names are ASCII so that "
                   "look-alike letters cannot stand for another name")
    elif keyword.iskeyword(name) or name in C_KEYWORDS:
        problem = "is a reserved word of Python or C"
    else:
        problem = "is not an identifier"
    raise ModelError(f"{what} name {shown} {problem}; use ASCII letters, digits and '_', not starting with a digit.")


def check_free_text(text: object, what: str) -> str:
    """Return ``text`` if it may go into XML and (escaped) into C, else raise a ModelError."""
    if not isinstance(text, str):
        raise ModelError(f"{what}: expected a string, got {type(text).__name__}.")
    if len(text) > MAX_FREE_TEXT:
        raise ModelError(f"{what}: the text is {len(text)} characters long; the limit is {MAX_FREE_TEXT}.")
    for position, ch in enumerate(text, start=1):
        code = ord(ch)
        category = unicodedata.category(ch)
        if (category == "Cc" and ch not in "\t\n") or category == "Cs" or (code & 0xFFFE) == 0xFFFE \
                or 0xFDD0 <= code <= 0xFDEF:
            raise ModelError(
                f"{what}: the character U+{code:04X} at position {position} is a control or non-character; "
                "remove it (only printable text, tabs and line breaks are allowed)."
            )
    return text


def c_string_literal(text: str | bytes) -> str:
    """A C string literal whose bytes are exactly ``text`` (UTF-8 encoded if a str).

    Every byte outside printable ASCII, and ``" \\ ? * /``, becomes a three-digit octal
    escape; the result therefore holds only printable ASCII and no character that
    could end the literal, start a comment or form a trigraph.  NUL cannot be represented
    (it would end the C string) and is refused.
    """
    data = text if isinstance(text, bytes) else text.encode("utf-8", errors="strict")
    if b"\0" in data:
        raise ModelError(f"the text {excerpt(text)} contains a NUL character, which C strings cannot hold.")
    return '"' + "".join(chr(b) if b in _C_PLAIN else f"\\{b:03o}" for b in data) + '"'


def excerpt(value: object, limit: int = 40) -> str:
    """``repr`` of ``value`` capped to about ``limit`` characters, for error messages."""
    text = repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text
