"""Smooth replacements of non-smooth functions for friction, backlash and stops.

Every function takes a regularization width ``eps`` (same unit as ``x``) and converges
to its non-smooth counterpart as ``eps -> 0``; the difference is below ``eps`` in value.
The algebraic forms (``sqrt``) keep C code and derivatives simple; :func:`blend` uses
``tanh`` because its weight must decay fast.
Gradients computed by fmi-adjoint are exact for the *smoothed* model; choose ``eps`` well
below the velocities or gaps that matter in the measurement.
"""

from __future__ import annotations

import sympy as sp

__all__ = ["smooth_sign", "smooth_step", "smooth_abs", "smooth_ramp", "blend"]


def smooth_sign(x: sp.Expr, eps: sp.Expr) -> sp.Expr:
    """``x / sqrt(x^2 + eps^2)``: -1 ... 1, equals sign(x) for ``|x| >> eps``."""
    return x / sp.sqrt(x**2 + eps**2)


def smooth_step(x: sp.Expr, eps: sp.Expr) -> sp.Expr:
    """``(1 + smooth_sign(x)) / 2``: 0 for ``x << -eps``, 1 for ``x >> eps``."""
    return (1 + smooth_sign(x, eps)) / 2


def smooth_abs(x: sp.Expr, eps: sp.Expr) -> sp.Expr:
    """``sqrt(x^2 + eps^2) - eps``: zero at 0, ``|x| - eps`` far from it."""
    return sp.sqrt(x**2 + eps**2) - eps


def smooth_ramp(x: sp.Expr, eps: sp.Expr) -> sp.Expr:
    """``(x + sqrt(x^2 + eps^2)) / 2``: smooth ``max(x, 0)``."""
    return (x + sp.sqrt(x**2 + eps**2)) / 2


def blend(x: sp.Expr, positive: sp.Expr, negative: sp.Expr, eps: sp.Expr) -> sp.Expr:
    """``positive`` for ``x >> eps``, ``negative`` for ``x << -eps``, smooth in between.

    The weight ``(1 + tanh(x/eps))/2`` decays exponentially, so a steep branch does not
    leak into the other side beyond a few ``eps`` (an algebraic weight would leak as
    ``(eps/x)^2``).
    """
    w = (1 + sp.tanh(x / eps)) / 2
    return w * positive + (1 - w) * negative
