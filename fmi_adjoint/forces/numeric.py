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
the supplied Jacobians; the callables travel on those function classes (see
:func:`_make_function`), so the numpy and C generators find them in the
expressions.  Second derivatives are not available, so a numeric element
cannot act on a massless coordinate that needs them for its consistent initial state
(compiling such a model raises a ModelError naming the element).
"""

from __future__ import annotations

import abc
import dataclasses
import hashlib
from collections.abc import Sequence

import numpy as np
import sympy as sp
from sympy.core.function import ArgumentIndexError

from .base import AbstractLocalElement

__all__ = ["AbstractNumericElement", "numeric_elements"]


def _stack(values: Sequence) -> np.ndarray:
    return np.stack(np.broadcast_arrays(*[np.asarray(x, dtype=float) for x in values]), axis=-1)


def _make_function(name: str, call, derivatives: list | None, n_args: int, element_info: tuple | None = None):
    """An opaque sympy function ``name(args)`` whose numeric value is ``call(*args)``.

    The callable, the derivative functions and the element travel on the class
    (``numeric_call``, ``numeric_derivatives``, ``numeric_element``): the code generators
    find them in the expressions, with no registry to keep in sync."""

    def fdiff(self, argindex=1):
        if derivatives is None:
            raise ArgumentIndexError(self, argindex)  # sympy then keeps an unevaluated Derivative
        return derivatives[argindex - 1](*self.args)

    namespace = {"nargs": n_args, "fdiff": fdiff, "is_real": True, "numeric_call": staticmethod(call),
                 "numeric_derivatives": tuple(derivatives or ()), "numeric_element": element_info}
    return type(name, (sp.Function,), namespace)


def numeric_elements(expressions) -> dict[str, tuple]:
    """``tag -> (element, n_local, n_parameters)`` of the numeric elements whose functions
    appear in ``expressions`` (sympy objects)."""
    found: dict[str, tuple] = {}
    for expr in expressions:
        for call in expr.atoms(sp.Function):
            info = getattr(type(call), "numeric_element", None)
            if info is not None:
                found[info[0]] = info[1:]
    return found


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
        # Deterministic per model (element names are unique in a model) so generated code
        # can be cached; a hash keeps user text out of the generated source.
        tag = f"_numeric{hashlib.sha256(self.name.encode()).hexdigest()[:12]}"
        element = self

        def split(values):
            qq = _stack(values[:n_q])
            vv = _stack(values[n_q : 2 * n_q])
            pp = _stack(values[2 * n_q :]) if n_p else np.zeros(qq.shape[:-1] + (0,))
            return qq, vv, pp

        forces = []
        for j in range(n):
            derivatives = []
            for k in range(len(args)):
                block, col = (0, k) if k < n_q else (1, k - n_q) if k < 2 * n_q else (2, k - 2 * n_q)

                def jac_entry(*values, j=j, block=block, col=col):
                    return element.jacobians(*split(values))[block][..., j, col]

                derivatives.append(_make_function(f"{tag}_d{j}_{k}", jac_entry, None, len(args)))

            def force_entry(*values, j=j):
                return element.evaluate(*split(values))[..., j]

            function = _make_function(f"{tag}_f{j}", force_entry, derivatives, len(args), (tag, self, n_q, n_p))
            forces.append(function(*args))
        return tuple(forces)
