"""The time-integration schemes of the index-3 DAE, as one step with seven constants.

Both schemes are Newmark formulas driven by a *pseudo-acceleration* ``abar``, with the
equations of motion and the constraints of step ``i``::

    f1 = q_i - q_{i-1} - h v_{i-1} - h^2 [(1/2 - beta) abar_{i-1} + beta abar_i]
    f2 = v_i - v_{i-1} - h [(1 - gamma) abar_{i-1} + gamma abar_i]
    f5 = abar_i - c_a a_i - c_ao a_{i-1} - c_bo abar_{i-1}
    f3 = c_m (M a)_i + F_i - c_old F_{i-1},          F = C_q^T lambda - Q
    f4 = C(q_i, t_i) / (beta c_a h^2)

**HHT** (Lauss et al. 2018, eq. (15); :class:`HHT`): ``abar = a`` (``c_a = 1``,
``c_ao = c_bo = 0``), ``c_m = 1/(1+alpha)``, ``c_old = alpha/(1+alpha)``,
``beta = (1-alpha)^2/4``, ``gamma = (1-2 alpha)/2``.  With the mass matrix depending on
``q`` and ``alpha != 0`` it is first order (see :mod:`fmi_adjoint.integrate.hht`).

**Generalized-alpha** (Arnold & Brüls, Multibody Syst. Dyn. 18 (2007) 185-202, eqs. (7)
with the coefficients of Chung & Hulbert 1993; :class:`GeneralizedAlpha`): the equations
of motion and the constraints hold at ``t_i`` (``c_m = 1``, ``c_old = 0``; ``a`` is the
true acceleration ``qddot``) and the alpha weighting acts only on the recursion of the
pseudo-acceleration::

    (1 - alpha_m) abar_i + alpha_m abar_{i-1} = (1 - alpha_f) a_i + alpha_f a_{i-1}

so ``c_a = (1-alpha_f)/(1-alpha_m)``, ``c_ao = alpha_f/(1-alpha_m)``,
``c_bo = -alpha_m/(1-alpha_m)``.  From the spectral radius at infinity ``rho_inf`` in
[0, 1] (Chung & Hulbert's optimal high-frequency dissipation, used by Arnold & Brüls)::

    alpha_m = (2 rho_inf - 1)/(rho_inf + 1),   alpha_f = rho_inf/(rho_inf + 1),
    gamma = 1/2 + alpha_f - alpha_m,           beta = (gamma + 1/2)^2 / 4

``gamma = 1/2 + alpha_f - alpha_m`` is the condition for second order; ``abar_i`` then
approximates ``qddot(t_i + Delta_alpha h)`` with ``Delta_alpha = alpha_m - alpha_f``
(Arnold & Brüls, Sec. 3).  ``rho_inf = 1`` gives ``alpha_m = alpha_f = 1/2``,
``beta = 1/4``, ``gamma = 1/2``, ``abar = a`` up to a recursion that keeps
``abar_i + abar_{i-1} = a_i + a_{i-1}``: the trapezoidal Newmark rule.  ``rho_inf = 0``
annihilates the highest frequencies in one step (asymptotic annihilation).

Both engines read these constants (the C engine computes them with the same formulas in
``fa_scheme_coefficients``, in the same order of operations, so they agree bit for bit).

Starting value: ``abar_0 = qddot_0`` (the consistent initial acceleration), the paper's
standard start.  Then ``q`` and ``v`` are second order over the whole run, while ``qddot``
and ``lambda`` of constrained models carry an ``O(h)`` error in the first steps (the
transient phase Arnold & Brüls analyse): the local position defect of the Newmark formula,
``O(h^3)``, is absorbed by the pseudo-acceleration in the constraint directions, and the
error recursion there has the triple root ``-rho_inf``, so the start-up error decays like
``n^2 (-rho_inf)^n`` (measured on a pendulum at ``rho_inf = 0.8``: the multiplier's error
peaks at step 7 and is 61 times smaller by step 40); after it, all four converge with order
2 (``tests/test_generalized_alpha.py``).  ``rho_inf = 1`` is outside what the convergence
analysis covers for constraints (it needs ``alpha_m < alpha_f``, i.e. the root ``-rho_inf``
inside the unit circle): the root ``-1`` is not damped at all and ``qddot`` and ``lambda`` of an
index-3 system keep an ``O(1)`` error that flips sign every step (measured on slider_crank:
28 % of the accelerations' and 9 % of the multiplier's range, at every step size), although ``q`` and ``v`` stay
second order; choose ``rho_inf < 1`` when accelerations or multipliers are measured.  We
did not implement the perturbed starting values of the paper (an estimate of
``qddot(t_0 + Delta_alpha h)``): with the standard start the transient is a handful of
steps, and every derivative stays exact for the computed run.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import ClassVar

from ..errors import ModelError

__all__ = ["AbstractScheme", "GeneralizedAlpha", "HHT", "INTEGRATORS", "NEWTON_ITERATION_LIMIT", "NEWTON_METHODS",
           "NEWTON_MAX_ITERATIONS", "NEWTON_REUSE_CONTRACTION", "NEWTON_ROUNDOFF", "NEWTON_RTOL", "SchemeCoefficients",
           "scheme_from_record", "scheme_from_settings", "with_newton"]

#: Newton defaults of a step (see :class:`AbstractScheme`); the C engine reads them from ``model.h``.
NEWTON_RTOL = 1e-10
NEWTON_MAX_ITERATIONS = 25
#: Largest ``max_iterations`` accepted (an engine state with more is refused as corrupt).
NEWTON_ITERATION_LIMIT = 1000
#: Modified Newton refactors when an update is larger than this fraction of the previous one.
NEWTON_REUSE_CONTRACTION = 0.25
#: The round-off floor of the Newton force test, in units of the forces that cancel in each
#: row, ``|K| (|q| + position scale) + |C_q|^T |lambda|`` (elastic and constraint forces): a
#: model at exact static equilibrium has no inertia and a net force that is a cancelled sum,
#: so the term-scaled test alone asks for less than round-off and never passes (a lattice
#: hanging at rest, issue 24); eight machine epsilons of those forces are round-off, never a
#: physical residual (1e-10 of them is the relative test's own scale).
NEWTON_ROUNDOFF = 8.0 * 2.0**-52


@dataclasses.dataclass(frozen=True)
class SchemeCoefficients:
    """The seven constants of the unified step (module docstring)."""

    beta: float
    gamma: float
    c_m: float
    c_old: float
    c_a: float
    c_ao: float
    c_bo: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class AbstractScheme(abc.ABC):
    """Settings of an integration scheme: its constants and the Newton iteration of a step.

    Attributes
    ----------
    rtol : float
        Newton has converged when every residual is below ``rtol`` times the magnitude
        of its own terms (force rows: ``|inertia| + |F| + |alpha-term|`` plus the largest
        force seen; constraint rows: ``|C_q| (|q| + position scale)``).  Round-off always
        passes this test, whatever the step.  One more Newton update then polishes the
        iterate to round-off, so the computed trajectory is a smooth function of the
        parameters (finite differences of the cost are clean).
    max_iterations : int
        Newton iterations allowed per step.
    reuse_jacobian : bool
        Modified Newton: keep the factored iteration matrix over iterations and steps, and
        refactor (at the current iterate) only when there is none for this step size or
        when an update exceeds ``NEWTON_REUSE_CONTRACTION`` (0.25) times the previous one.
        A mature multibody code's default; on linear models one factorization serves the
        whole run.  The convergence test is the same, but the polishing update then
        contracts linearly, so the converged states differ from full Newton's by about
        ``rtol`` times the contraction (measured below 1e-11 relative).  The adjoint stays
        exact for the computed run: the sweep uses the exact step Jacobian at the converged
        states, whatever matrix the iteration used.
    """

    rtol: float = NEWTON_RTOL
    max_iterations: int = NEWTON_MAX_ITERATIONS
    reuse_jacobian: bool = False

    #: Name in model files and on the command line; code of the C engine (``fa_settings.scheme``).
    name: ClassVar[str]
    code: ClassVar[int]

    def __post_init__(self) -> None:
        if not 0 < self.rtol < 1e-3:
            raise ModelError(f"{self.name} rtol = {self.rtol!r} must lie in (0, 1e-3).")
        if (isinstance(self.max_iterations, bool) or not isinstance(self.max_iterations, int)
                or not 1 <= self.max_iterations <= NEWTON_ITERATION_LIMIT):
            raise ModelError(f"{self.name} max_iterations = {self.max_iterations!r} must be a whole number in "
                             f"[1, {NEWTON_ITERATION_LIMIT}].")

    @property
    @abc.abstractmethod
    def parameter(self) -> float:
        """The scheme's one constant (HHT ``alpha``, generalized-alpha ``rho_inf``)."""

    @abc.abstractmethod
    def coefficients(self) -> SchemeCoefficients:
        """The constants of the unified step."""

    @property
    def beta(self) -> float:
        """Newmark beta."""
        return self.coefficients().beta

    @property
    def gamma(self) -> float:
        """Newmark gamma."""
        return self.coefficients().gamma

    def describe(self) -> str:
        """``hht(alpha=-0.05)``-style label for messages and result files (``, newton=modified``
        added for modified Newton)."""
        newton = ", newton=modified" if self.reuse_jacobian else ""
        return f"{self.name}({self.parameter_name}={self.parameter!r}{newton})"

    @property
    def newton(self) -> str:
        """The Newton variant's name (``--newton``): ``full`` or ``modified`` (:data:`NEWTON_METHODS`)."""
        return "modified" if self.reuse_jacobian else "full"

    def divergence_advice(self) -> str:
        """What to change when Newton does not converge in a step (the end of that error):
        the step, the parameter values, and this scheme's own numerical damping
        (:meth:`damping_advice`), never another scheme's constant."""
        return ("Remedies: a different step (--step; smaller where the motion is fast), parameter values that are "
                f"physically meaningful (positive masses and stiffnesses), or {self.damping_advice()}.")

    @abc.abstractmethod
    def damping_advice(self) -> str:
        """How to give this scheme more numerical damping (its constant, its option, its value now)."""

    def record(self) -> dict[str, str | float]:
        """The scheme as a record (an FMU's ``export.json``): ``integrator`` and its constant,
        and ``newton = "modified"`` for modified Newton (absent for full Newton, so records of
        full Newton read as before); :func:`scheme_from_record` reads it back."""
        record: dict[str, str | float] = {"integrator": self.name, self.parameter_name: self.parameter}
        if self.reuse_jacobian:
            record["newton"] = self.newton
        return record

    @classmethod
    @abc.abstractmethod
    def from_parameter(cls, value: float) -> AbstractScheme:
        """The scheme with its one constant ``value`` (and default Newton settings)."""

    @abc.abstractmethod
    def token_fields(self) -> tuple:
        """What an FMU's instantiation token hashes of the scheme
        (:func:`fmi_adjoint.export.instantiation_token`)."""

    parameter_name: ClassVar[str]

    def _newton_field(self) -> tuple:
        """Modified Newton's field of :meth:`token_fields` (none for full Newton: old tokens stay)."""
        return ("newton", self.newton) if self.reuse_jacobian else ()


def _finite_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and value == value


@dataclasses.dataclass(frozen=True)
class HHT(AbstractScheme):
    """HHT-alpha (Lauss et al. 2018, eq. (15)).

    Attributes
    ----------
    alpha : float
        Numerical damping, in [-1/3, 0]; 0 gives the trapezoidal Newmark rule.
    """

    alpha: float = -0.05

    name: ClassVar[str] = "hht"
    code: ClassVar[int] = 0
    parameter_name: ClassVar[str] = "alpha"

    def __post_init__(self) -> None:
        if not _finite_number(self.alpha) or not -1.0 / 3.0 <= self.alpha <= 0.0:
            raise ModelError(f"HHT alpha = {self.alpha!r} is outside [-1/3, 0], where the method is stable.")
        object.__setattr__(self, "alpha", float(self.alpha))  # one value in records and tokens
        super().__post_init__()

    @property
    def parameter(self) -> float:
        return float(self.alpha)

    @classmethod
    def from_parameter(cls, value: float) -> HHT:
        return cls(alpha=value)

    def token_fields(self) -> tuple:
        # The tuple of the exports made before generalized-alpha existed (modified Newton adds a field).
        return (self.parameter,) + self._newton_field()

    def damping_advice(self) -> str:
        return (f"more numerical damping: HHT's alpha towards -1/3 (--alpha, or alpha in [simulation]; now "
                f"{self.alpha:g})")

    def coefficients(self) -> SchemeCoefficients:
        alpha = float(self.alpha)
        return SchemeCoefficients(beta=(1.0 - alpha) * (1.0 - alpha) / 4.0, gamma=(1.0 - 2.0 * alpha) / 2.0,
                                  c_m=1.0 / (1.0 + alpha), c_old=alpha / (1.0 + alpha), c_a=1.0, c_ao=0.0, c_bo=0.0)


@dataclasses.dataclass(frozen=True)
class GeneralizedAlpha(AbstractScheme):
    """Generalized-alpha with pseudo-accelerations (Arnold & Brüls 2007).

    Attributes
    ----------
    rho_inf : float
        Spectral radius of the amplification matrix for ``h omega -> infinity``, in [0, 1]:
        1 is the undamped trapezoidal rule, smaller values damp high frequencies more.
        Default 0.8: round-off in the accelerations and multipliers of constrained models is
        carried on by the recursion's root ``-rho_inf`` (``a_i`` follows from ``abar`` as
        ``(abar_i - c_bo abar_{i-1})/c_a - rho_inf a_{i-1}``, where HHT solves ``a_i``
        afresh) and grows like ``(1 - rho_inf)^-3``: C against Python on slider_crank's
        ``slider_acc``, 300 steps, 1.1e-9 at 0.5, 1.2e-8 at 0.8, 1.8e-8 at 0.9, 2.7e-7 at 0.99
        (HHT(-0.1): 3.8e-9).  A property of the scheme, not of an engine: the Python engine
        against itself with one parameter moved by one ulp differs as much (2.5e-8 at 0.8).
        Mid frequencies are also damped less than by HHT: engine_mount's hydro-mass mode
        (``h omega = 1.36``) keeps 0.9985 of its amplitude per step at 0.8 against 0.9914
        with HHT(-0.05), so perturbations survive a 300-step run 8.5 times more.  Finite
        differences of costs on accelerations or multipliers are as noisy.  The engine-agreement
        tests therefore run generalized-alpha at 0.5, where the tiers of HHT hold unchanged.
    """

    rho_inf: float = 0.8

    name: ClassVar[str] = "generalized_alpha"
    code: ClassVar[int] = 1
    parameter_name: ClassVar[str] = "rho_inf"

    def __post_init__(self) -> None:
        if not _finite_number(self.rho_inf) or not 0.0 <= self.rho_inf <= 1.0:
            raise ModelError(f"generalized-alpha rho_inf = {self.rho_inf!r} is outside [0, 1]; 1 is undamped, 0 "
                             "damps the highest frequencies in one step.")
        object.__setattr__(self, "rho_inf", float(self.rho_inf))
        super().__post_init__()

    @property
    def parameter(self) -> float:
        return float(self.rho_inf)

    @classmethod
    def from_parameter(cls, value: float) -> GeneralizedAlpha:
        return cls(rho_inf=value)

    def token_fields(self) -> tuple:
        # One field more than HHT's: the tokens cannot coincide.
        return (self.name, self.parameter) + self._newton_field()

    def damping_advice(self) -> str:
        return (f"more numerical damping: a smaller rho_inf (--rho-inf, or rho_inf in [simulation]; now "
                f"{self.rho_inf:g}; 0 damps the highest frequencies in one step)")

    @property
    def alpha_m(self) -> float:
        """alpha_m = (2 rho_inf - 1)/(rho_inf + 1)."""
        rho = float(self.rho_inf)
        return (2.0 * rho - 1.0) / (rho + 1.0)

    @property
    def alpha_f(self) -> float:
        """alpha_f = rho_inf/(rho_inf + 1)."""
        rho = float(self.rho_inf)
        return rho / (rho + 1.0)

    def coefficients(self) -> SchemeCoefficients:
        am, af = self.alpha_m, self.alpha_f
        gamma = 0.5 + af - am
        return SchemeCoefficients(beta=0.25 * (gamma + 0.5) * (gamma + 0.5), gamma=gamma, c_m=1.0, c_old=0.0,
                                  c_a=(1.0 - af) / (1.0 - am), c_ao=af / (1.0 - am), c_bo=-am / (1.0 - am))


#: Names of the schemes (model files' ``[simulation] integrator``, ``--integrator``).
INTEGRATORS = (HHT.name, GeneralizedAlpha.name)

#: The Newton variants of ``--newton`` and whether each keeps the factored iteration matrix
#: over iterations and steps (:attr:`AbstractScheme.reuse_jacobian`).  ``full`` refactors at
#: every iteration; ``modified`` refactors only when convergence slows or the step changes:
#: fewer factorizations (one per run on linear models), states that differ from full Newton's
#: by about ``rtol`` times the contraction (below 1e-11 relative where measured), and an
#: adjoint that stays exact for the computed run.
NEWTON_METHODS: dict[str, bool] = {"full": False, "modified": True}


def with_newton(scheme: AbstractScheme, newton: str | None) -> AbstractScheme:
    """``scheme`` with the Newton variant named ``newton`` (:data:`NEWTON_METHODS`; None keeps it).

    Raises
    ------
    ModelError
        An unknown name, naming the choices.
    """
    if newton is None:
        return scheme
    if newton not in NEWTON_METHODS:
        raise ModelError(f"newton {newton!r} is unknown; choose one of {', '.join(NEWTON_METHODS)}.")
    return dataclasses.replace(scheme, reuse_jacobian=NEWTON_METHODS[newton])


def scheme_from_settings(settings, *, integrator: str | None = None, alpha: float | None = None,
                         rho_inf: float | None = None, newton: str | None = None) -> AbstractScheme:
    """The scheme of a model's simulation settings (``integrator``, ``alpha``, ``rho_inf``,
    ``newton``), with the command line's overrides (``--integrator``, ``--alpha``, ``--rho-inf``,
    ``--newton``: :func:`with_newton`).

    Raises
    ------
    ModelError
        An unknown integrator, a constant out of range, or a constant of the other scheme
        (``--alpha`` with generalized-alpha, ``--rho-inf`` with HHT).
    """
    name = settings.integrator if integrator is None else integrator
    newton = getattr(settings, "newton", None) if newton is None else newton
    if name not in INTEGRATORS:
        raise ModelError(f"integrator {name!r} is unknown; choose one of {', '.join(INTEGRATORS)}.")
    if name == GeneralizedAlpha.name:
        if alpha is not None:
            raise ModelError("--alpha is HHT's constant; damp generalized-alpha by --rho-inf in [0, 1], or give "
                             "--integrator hht with --alpha.")
        return with_newton(GeneralizedAlpha(rho_inf=settings.rho_inf if rho_inf is None else float(rho_inf)), newton)
    if rho_inf is not None:
        raise ModelError("--rho-inf is generalized-alpha's constant; add --integrator generalized_alpha, or damp "
                         "HHT by --alpha in [-1/3, 0].")
    return with_newton(HHT(alpha=settings.alpha if alpha is None else float(alpha)), newton)


def scheme_from_record(record: dict) -> AbstractScheme:
    """The scheme of a record written by :meth:`AbstractScheme.record` (a record without
    ``integrator`` is HHT: FMUs exported before generalized-alpha existed).

    Raises
    ------
    KeyError, TypeError, ValueError, ModelError
        A malformed record.
    """
    integrator = record.get("integrator", HHT.name)
    for cls in (HHT, GeneralizedAlpha):
        if integrator == cls.name:
            return with_newton(cls.from_parameter(float(record[cls.parameter_name])), record.get("newton", "full"))
    raise ValueError(f"unknown integrator {integrator!r}")
