"""Strategies chosen by name: one look-up for every kind (engines, optimizers, gradient methods,
part kinds).

Each strategy is an object of its own class, with its behaviour; the user names it once, at
the boundary (``--engine``, ``--method``, a keyword argument), and :func:`look_up` turns the
name into the object or refuses it with the list of choices.  An object given in place of a
name is taken as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

__all__ = ["look_up"]

T = TypeVar("T")


def look_up(choices: Mapping[str, T], choice: str | T, what: str, kind: type,
            error: type[Exception]) -> T:
    """The strategy ``choice`` names in ``choices`` (``choice`` itself if it is a ``kind``).

    Raises
    ------
    error
        ``"<what> 'x' is not one of a, b, c."``
    """
    if isinstance(choice, kind):
        return choice  # type: ignore[return-value]
    if not isinstance(choice, str) or choice not in choices:
        raise error(f"{what} {choice!r} is not one of {', '.join(choices)}.")
    return choices[choice]
