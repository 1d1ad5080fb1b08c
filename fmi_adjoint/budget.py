"""Memory budgets checked before the big arrays are allocated (issue 31).

A design or an identification stores arrays whose sizes follow from numbers known before
any of them exists: the steps of a run, the coordinates, outputs and parameters of the
model, the knots of a designed input.  :class:`MemoryEstimate` adds up the dominant ones
(an upper bound: arrays that live one after the other are counted together) and
:meth:`MemoryEstimate.check` refuses a run that would exceed the limit, with the figure,
its largest part and the fix, instead of letting it grow to tens of gigabytes and die.

The limit is ``--memory-limit``, else the environment variable ``FMI_ADJOINT_MEMORY_LIMIT``,
else :data:`DEFAULT_FRACTION` of the machine's physical memory (``os.sysconf``), else 8 GiB
where that is unknown.  Sizes are bytes or a number with a unit: ``512M``, ``8G``, ``1.5GB``, ``4GiB``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re

from .errors import MemoryBudgetError

__all__ = ["DEFAULT_FRACTION", "MEMORY_LIMIT_ENV", "MemoryBudgetError", "MemoryEstimate", "format_bytes",
           "memory_limit", "parse_size", "physical_memory"]

#: Environment variable with the memory limit (a size, :func:`parse_size`).
MEMORY_LIMIT_ENV = "FMI_ADJOINT_MEMORY_LIMIT"
#: Share of the physical memory a run may plan to use by default: the rest is left to the
#: operating system, the build (sympy, the C compiler) and other programs.
DEFAULT_FRACTION = 0.5
#: The limit where the physical memory cannot be read.
FALLBACK_LIMIT = 8 << 30

_UNITS = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
          "KI": 1 << 10, "MI": 1 << 20, "GI": 1 << 30, "TI": 1 << 40}
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*((?:[KMGT]i?)?)B?\s*", re.ASCII | re.IGNORECASE)


def parse_size(text: str | int | float, where: str) -> int:
    """Bytes of ``text``: a number of bytes, or with a unit K, M, G, T (powers of 1000, as
    the messages print sizes) or Ki, Mi, Gi, Ti (powers of 1024); a trailing ``B`` and lower
    case are accepted (``8G``, ``8GB``, ``512MiB``).

    Raises
    ------
    MemoryBudgetError
        Not a size, or not positive, naming ``where`` and the value.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        number, unit = float(text), ""
    else:
        match = _SIZE.fullmatch(str(text))
        if not match:
            raise MemoryBudgetError(f"{where} {str(text)[:40]!r}: not a size; give bytes or a number with a unit, "
                                    "e.g. 512M or 8G.")
        number, unit = float(match.group(1)), match.group(2).upper()
    size = number * _UNITS[unit]
    if not (math.isfinite(size) and 10**6 <= size < 2**63):
        raise MemoryBudgetError(f"{where} {text!r}: give a size from 1M to 9E18 bytes, e.g. 512M or 8G.")
    return int(size)


def physical_memory() -> int | None:
    """Bytes of physical memory of this machine, or None where ``os.sysconf`` does not say."""
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    return pages * size if pages > 0 and size > 0 else None


def memory_limit(option: str | int | None = None) -> tuple[int, str]:
    """The memory limit in bytes and where it comes from (for messages): ``option``
    (``--memory-limit``), else :data:`MEMORY_LIMIT_ENV`, else the machine's default."""
    if option is not None:
        return parse_size(option, "--memory-limit"), "--memory-limit"
    text = os.environ.get(MEMORY_LIMIT_ENV)
    if text:
        return parse_size(text, MEMORY_LIMIT_ENV), MEMORY_LIMIT_ENV
    physical = physical_memory()
    if physical is None:
        return FALLBACK_LIMIT, "the default limit"
    return int(DEFAULT_FRACTION * physical), f"the default limit (half of this machine's {format_bytes(physical)})"


def format_bytes(size: float) -> str:
    """``10.8 GB``-style size (powers of 1000, as people read them)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{int(size)} bytes"


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
    """The dominant arrays of a run: ``(description, bytes)`` pairs.

    Attributes
    ----------
    what : str
        The run, for messages ("this design", "experiment 'a' of this identification").
    parts : tuple of (str, int)
        Each array group, described with its shape ("forward sensitivities of 4e+07 steps x
        6 states x 1 parameters").
    fix : str
        What lowers the need (options of the command).
    raise_with : str
        How this command's limit is raised (the options it accepts).
    """

    what: str
    parts: tuple[tuple[str, int], ...]
    fix: str
    raise_with: str = f"--memory-limit or {MEMORY_LIMIT_ENV}"

    @property
    def total(self) -> int:
        return sum(size for _, size in self.parts)

    def check(self, limit: int | str | None = None) -> None:
        """Refuse the run if :attr:`total` exceeds the limit (:func:`memory_limit` of ``limit``).

        Raises
        ------
        MemoryBudgetError
            With the figure, its largest part and the fix.
        """
        allowed, source = memory_limit(limit)
        total = self.total
        if total <= allowed:
            return
        label, largest = max(self.parts, key=lambda part: part[1])
        raise MemoryBudgetError(
            f"{self.what} needs about {format_bytes(total)} of memory, more than {source} of "
            f"{format_bytes(allowed)}; the largest part is {format_bytes(largest)} for the {label}. {self.fix}, "
            f"or raise the limit with {self.raise_with} (e.g. 16G) if the machine has the memory.")


def doubles(*shape: float) -> int:
    """Bytes of a float64 array of ``shape``."""
    return int(8 * math.prod(shape))
