"""The value every guard returns, and the protocols of what the guards read.

:mod:`fmi_adjoint.identify.guards` explains each rule and its threshold.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol


from ...text import excerpt


#: Longest name or unit shown as it is in a warning.
SHOWN = 40


class GuardedTarget(Protocol):
    """What the data guards read of a model or FMU (:class:`~fmi_adjoint.identify.data_costs.Target`,
    which imports this module for :func:`check_data_start`)."""

    @property
    def name(self) -> str: ...
    @property
    def output_names(self) -> tuple[str, ...]: ...
    @property
    def units(self) -> tuple[str, ...]: ...
    @property
    def t_end(self) -> float: ...
    @property
    def t_end_declared(self) -> bool: ...


class GuardedOptions(Protocol):
    """What the data guards read of the cost options (:class:`~fmi_adjoint.identify.data_costs.CostOptions`)."""

    @property
    def cost(self) -> str: ...
    @property
    def weights(self) -> dict[str, float]: ...
    @property
    def scales(self) -> dict[str, float]: ...


@dataclasses.dataclass(frozen=True)
class Notice:
    """What a guard found.

    Attributes
    ----------
    text : str
        One sentence naming the cause and the fix (printed after ``fmi-adjoint: note:`` or
        ``fmi-adjoint: warning:``).
    warning : bool
        A warning (the result may be wrong) rather than a note (a fact the user should know).
    untrusted : bool
        The result cannot be trusted: the command reports ``success: false``.
    """

    text: str
    warning: bool = False
    untrusted: bool = False

    def __post_init__(self) -> None:
        if self.untrusted and not self.warning:
            raise ValueError("an untrusted result is a warning: give warning=True with untrusted=True.")


def plain(text: str) -> str:
    """A name or unit read from a model file or an FMU as shown in a warning: as it is when short
    and printable, else quoted and cut (an FMU's unit is not checked on reading)."""
    return text if len(text) <= SHOWN and text.isprintable() else excerpt(text, SHOWN)


def listed(names: Sequence[str]) -> str:
    return ", ".join(plain(name) for name in names)
