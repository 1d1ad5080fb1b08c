"""Consistent initial state of the index-3 DAE (see :mod:`fmi_adjoint.compiled`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from ..compiled import CompiledModel
from ..errors import ConvergenceError, ModelError
from .dependence import describe_dependence

__all__ = ["INIT_MAX_ITERATIONS", "INIT_TOLERANCE", "InitialState", "constraint_labels", "initial_state"]

#: Newton of the consistent initialization: converged when every correction is below
#: ``INIT_TOLERANCE (1 + |z|)``, or those of the positions and velocities in two iterations in a
#: row (see :func:`initial_state`); at most ``INIT_MAX_ITERATIONS`` iterations.  Both engines
#: read these (the C engine through the generated ``model.h``).
INIT_TOLERANCE = 1e-12
INIT_MAX_ITERATIONS = 50


@dataclasses.dataclass(frozen=True, eq=False)
class InitialState:
    """Solution ``z = (q, mu, v, nu, a, lambda)`` of the initialization system.

    ``mu`` and ``nu`` are the multipliers of the position and velocity projections;
    the adjoint needs the whole ``z`` to differentiate the initial state.
    """

    z: np.ndarray
    n: int
    m: int
    iterations: int

    def split(self) -> tuple[np.ndarray, ...]:
        """``(q, mu, v, nu, a, lam)``."""
        n, m = self.n, self.m
        bounds = np.cumsum([0, n, m, n, m, n, m])
        return tuple(self.z[bounds[k] : bounds[k + 1]] for k in range(6))

    @property
    def state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(q, v, a, lam)``."""
        q, _, v, _, a, lam = self.split()
        return q, v, a, lam


def state_selection(n: int, m: int) -> np.ndarray:
    """Indices of ``(q, v, a, lam)`` inside ``z``."""
    bounds = np.cumsum([0, n, m, n, m, n, m])
    return np.concatenate([np.arange(bounds[k], bounds[k + 1]) for k in (0, 2, 4, 5)])


def _args(z: np.ndarray, n: int, m: int) -> tuple[np.ndarray, ...]:
    bounds = np.cumsum([0, n, m, n, m, n, m])
    return tuple(z[bounds[k] : bounds[k + 1]] for k in range(6))


def initial_state(model: CompiledModel, p: np.ndarray, t0: float = 0.0, *, tol: float = INIT_TOLERANCE,
                  max_iterations: int = INIT_MAX_ITERATIONS) -> InitialState:
    """Solve the consistent-initialization system by Newton's method.

    The start point is the model's given initial positions and velocities with zero
    multipliers and accelerations; the positions and velocities enter nonlinearly (Q(q, v)), the rest linearly.

    Raises
    ------
    ConvergenceError
        If the system is singular (e.g. too many coordinates marked fixed, redundant
        constraints, a mass matrix singular on the constraint manifold) or Newton fails.
    """
    n, m = model.n, model.m
    z = np.zeros(3 * n + 3 * m)
    z[:n], z[n + m : 2 * n + m] = model.init_guess(t0, p)
    M = model.jacobian_terms(z[:n], z[n + m : 2 * n + m], np.zeros(n), np.zeros(m), t0, p)[0]
    negative = [model.coordinate_names[k] for k in range(n) if M[k, k] < 0]
    if negative:
        raise ModelError(
            f"model '{model.model.name}': the mass matrix has negative diagonal entries for {negative} at the "
            "initial state; masses and inertias must be >= 0 (check the parameter values)."
        )
    name = model.model.name
    nonlinear = np.r_[0:n, n + m:2 * n + m]  # q and v in z = (q, mu, v, nu, a, lambda)
    settled_before = False
    for iteration in range(1, max_iterations + 1):
        G = model.init_residual(*_args(z, n, m), t0, p)[0]
        Gz, _ = model.init_jacobians(*_args(z, n, m), t0, p)
        if not np.all(np.isfinite(G)) or not np.all(np.isfinite(Gz)):
            raise ConvergenceError(
                f"model '{name}': the initial state gives non-finite values (NaN or inf); check the initial "
                "positions and the parameter values."
            )
        try:
            dz = np.linalg.solve(Gz, -G)
        except np.linalg.LinAlgError:
            named = _dependent_constraints(model, Gz)
            raise ConvergenceError(
                f"model '{name}': the initialization system is singular at the initial state: {named}." if named else
                f"model '{name}': the initialization system is singular, although the constraint Jacobian C_q has "
                "full row rank (also on the coordinates not marked fixed): the mass matrix is singular on the "
                "constraint manifold (a massless coordinate without stiffness). Give that coordinate a mass, a "
                "stiffness or a constraint."
            ) from None
        z += dz
        # Converged when every correction is below tolerance, or when the positions and velocities
        # (the only unknowns entering nonlinearly) have been for two iterations in a row: given
        # them, (a, lambda) solve a linear system (mu, nu enter linearly), so after one more
        # iteration their corrections are the round-off of that solve, which for stiff flexible
        # bodies (issue 25) exceeds tol relative to the accelerations and never falls below it.
        settled = bool(np.all(np.abs(dz[nonlinear]) <= tol * (1.0 + np.abs(z[nonlinear]))))
        if settled and (settled_before or np.all(np.abs(dz) <= tol * (1.0 + np.abs(z)))):
            return InitialState(z=z, n=n, m=m, iterations=iteration)
        settled_before = settled
    named = _dependent_constraints(model, Gz)
    raise ConvergenceError(
        f"model '{name}': the initial positions could not be made consistent with the constraints in "
        f"{max_iterations} Newton iterations (last correction {np.max(np.abs(dz)):.3g})"
        + (f", and at the last iterate {named}." if named else
           ". Give initial positions closer to an assembled configuration.")
    )


def constraint_labels(model: CompiledModel) -> tuple[str, ...]:
    """How messages name the rows of ``C``: ``constraint 'c'`` for the model's constraints,
    ``the prescribed motion of 'x'`` for the drives (:func:`fmi_adjoint.model.assemble`)."""
    user = len(model.model.constraints)
    return tuple(f"constraint '{name}'" if k < user else f"the prescribed motion of '{name[len('drive_'):]}'"
                 for k, name in enumerate(model.constraint_names))


def _dependent_constraints(model: CompiledModel, Gz: np.ndarray) -> str | None:
    """The dependent or over-fixed constraints at the iterate of ``Gz``, named
    (:func:`~fmi_adjoint.integrate.dependence.describe_dependence`); None if there are none.

    ``Gz``'s rows ``n..n+m`` are ``C``'s and its columns ``0..n`` the positions, so that
    block is ``C_q`` at the iterate.  The position projection holds ``fixed_position``
    coordinates, the velocity projection ``fixed_velocity`` ones (:mod:`fmi_adjoint.compiled`).
    """
    n, m = model.n, model.m
    if m == 0 or not np.all(np.isfinite(Gz)):
        return None
    Cq = np.asarray(Gz)[n:n + m, :n]
    coordinates = model.model.all_coordinates
    labels = constraint_labels(model)
    for flag in ("fixed_position", "fixed_velocity"):
        named = describe_dependence(Cq, labels, model.coordinate_names,
                                    tuple(bool(getattr(c, flag)) for c in coordinates), flag)
        if named:
            return named
    return None
