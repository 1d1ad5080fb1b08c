"""The low-level element route: force and Jacobians supplied as numeric code.

For a law that cannot be written symbolically (a lookup, an iterative inner solve,
wrapped legacy code), subclass :class:`AbstractNumericElement` and implement

* :meth:`~AbstractNumericElement.evaluate` ``(q, v, p) -> f``,
* :meth:`~AbstractNumericElement.jacobians` ``(q, v, p) -> (df/dq, df/dv, df/dp)``,
* :meth:`~AbstractNumericElement.c_source` (the same two C functions that
  :func:`fmi_adjoint.forces.ccode.element_c_source` generates for symbolic elements).

``q`` and ``v`` have shape ``(..., n)`` (ends, then internal nodes) and ``p`` shape
``(..., n_p)`` (declared properties in order, vectors expanded); results carry the same
leading axes.  ``fmi-adjoint plugins check`` verifies the Jacobians against central
differences and the C code against :meth:`evaluate`.

Inside the model the element appears as opaque functions whose first derivatives are
the supplied Jacobians.  Second derivatives are not available, so a numeric element
cannot act on a massless coordinate that needs them for its consistent initial state
(compiling such a model raises a ModelError naming the element).
"""

from __future__ import annotations

import abc
import dataclasses
import itertools
from collections.abc import Sequence

import numpy as np
import sympy as sp

from .base import AbstractLocalElement

__all__ = ["AbstractNumericElement", "NUMERIC_FUNCTIONS", "NUMERIC_ELEMENTS"]

#: Registry of the numeric callables behind the opaque sympy functions, by function name
#: (read by the code generator).  Entries are created when a model is assembled.
NUMERIC_FUNCTIONS: dict[str, object] = {}
#: The element behind each tag ``_numericN``: ``(element, n_local, n_parameters)`` (read by
#: the C code generator, which links the element's C functions).
NUMERIC_ELEMENTS: dict[str, tuple] = {}
_ids = itertools.count()


def _stack(values: Sequence) -> np.ndarray:
    return np.stack(np.broadcast_arrays(*[np.asarray(x, dtype=float) for x in values]), axis=-1)


def _make_function(name: str, call, derivative_names: list[str] | None, n_args: int):
    """An opaque sympy function ``name(args)`` whose numeric value is ``call(*args)``."""

    def fdiff(self, argindex=1):
        if derivative_names is None:
            raise sp.ArgumentIndexError(self, argindex)
        return sp.Function(derivative_names[argindex - 1])(*self.args)

    cls = type(name, (sp.Function,), {"nargs": n_args, "fdiff": fdiff, "is_real": True})
    NUMERIC_FUNCTIONS[name] = call
    return cls


@dataclasses.dataclass(frozen=True)
class AbstractNumericElement(AbstractLocalElement):
    """A local element whose law and Jacobians are numeric code (see module docstring)."""

    @abc.abstractmethod
    def evaluate(self, q: np.ndarray, v: np.ndarray, p: np.ndarray) -> np.ndarray:
        """Local generalized forces, shape ``(..., n)``."""

    @abc.abstractmethod
    def jacobians(self, q: np.ndarray, v: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(df/dq, df/dv, df/dp)`` of shapes ``(..., n, n)``, ``(..., n, n)``, ``(..., n, n_p)``."""

    @abc.abstractmethod
    def c_source(self, prefix: str) -> str:
        """C99 source defining ``<prefix>_forces`` and ``<prefix>_jacobian``.

        Raise :class:`NotImplementedError` if the element has no C code: it then works
        in-process but cannot be exported (the exporter says so, naming the element).
        """

    def local_forces(self, q, v, p):
        n = len(q)
        flat: list[sp.Expr] = []
        for decl in self.parameters:
            value = p[decl.name]
            flat.extend(value if isinstance(value, tuple) else (value,))
        args = list(q) + list(v) + flat
        n_q, n_p = n, len(flat)
        tag = f"_numeric{next(_ids)}"
        element = self
        NUMERIC_ELEMENTS[tag] = (self, n_q, n_p)

        def split(values):
            qq = _stack(values[:n_q])
            vv = _stack(values[n_q : 2 * n_q])
            pp = _stack(values[2 * n_q :]) if n_p else np.zeros(qq.shape[:-1] + (0,))
            return qq, vv, pp

        forces = []
        for j in range(n):
            jac_names = [f"{tag}_d{j}_{k}" for k in range(len(args))]
            for k in range(len(args)):
                block, col = (0, k) if k < n_q else (1, k - n_q) if k < 2 * n_q else (2, k - 2 * n_q)

                def jac_entry(*values, j=j, block=block, col=col):
                    return element.jacobians(*split(values))[block][..., j, col]

                _make_function(jac_names[k], jac_entry, None, len(args))

            def force_entry(*values, j=j):
                return element.evaluate(*split(values))[..., j]

            forces.append(_make_function(f"{tag}_f{j}", force_entry, jac_names, len(args))(*args))
        return tuple(forces)
