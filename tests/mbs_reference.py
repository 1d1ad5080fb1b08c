"""Independent reference implementations for the multibody layer (issue 23, "What must be shown").

Nothing here uses fmi-adjoint: each system is written in *minimal coordinates* (or, for the free
rigid body, Euler's equations with quaternion kinematics) and integrated with
``scipy.integrate.solve_ivp`` at tight tolerances (``RTOL``/``ATOL``).  The closed forms the
physics tests need are here as well, each with its source.

Lagrange's equations are derived symbolically by :class:`LagrangianODE` from a kinetic energy
``T(q, q')``, a potential ``V(q)`` and generalized forces ``Q(t, q, q')`` written in minimal
coordinates: with ``M = d2T/dq'dq'`` (Lagrange, e.g. Goldstein, *Classical Mechanics*, 3rd ed.,
Sec. 1.4, eq. (1.57))

    M(q) q'' = Q + dT/dq - dV/dq - (d2T/dq'dq) q' - d2T/dq'dt.

The systems
-----------
* :class:`PhysicalPendulum`: a rigid body swinging about a fixed horizontal axis; the
  small-amplitude period ``2 pi sqrt(J_O/(m g d))`` and the exact one
  ``4 sqrt(J_O/(m g d)) K(sin(theta0/2))`` (complete elliptic integral of the first kind;
  Landau & Lifshitz, *Mechanics*, Sec. 11, problem 1).
* :func:`triple_pendulum_ode`: the cart with three pendula of ``examples/triple_pendulum.toml``
  in (x_c, phi1, phi2, phi3), the same parameters, gravity, dampers, springs and excitation.
* :func:`slider_crank_ode`: ``examples/slider_crank.toml`` in the crank angle phi alone.
* :func:`revolute_chain_ode`: a serial chain of spatial rigid bodies with revolute joints (any
  axes, torsion springs), hanging from the ground, under gravity; joint angles as coordinates.
  :data:`SPATIAL_CHAIN` (three bodies, non-parallel axes) and :data:`SPHERICAL_DOUBLE_PENDULUM`
  (two rods on spherical joints, each joint three revolutes about z, x, y through one point).
* :class:`FreeRigidBody`: Euler's equations ``I w' + w x (I w) = 0`` (body frame) with the
  quaternion kinematics ``e' = 1/2 e (x) (0, w)``; energy, angular momentum; the torque-free
  precession of a symmetric body.
* :class:`HeavyTop`: the heavy symmetric top with a fixed point in z-x-z Euler angles
  (psi, theta, phi) (Goldstein Sec. 5.7), and the closed-form rates of steady precession.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import dataclasses
from dataclasses import dataclass

import numpy as np
import sympy as sp
from scipy.integrate import solve_ivp
from scipy.special import ellipk

#: Tolerances of every reference integration (DOP853).  The global error they leave is far
#: below the errors of the fixed-step schemes the references are compared with.
RTOL = 1e-11
ATOL = 1e-12
METHOD = "DOP853"


def integrate(rhs: Callable[[float, np.ndarray], np.ndarray], y0: np.ndarray, t_end: float,
              t_eval: np.ndarray | None = None, events=None, rtol: float = RTOL, atol: float = ATOL):
    """``solve_ivp`` with the reference tolerances and dense output; raises if it fails."""
    sol = solve_ivp(rhs, (0.0, t_end), np.asarray(y0, dtype=float), method=METHOD, rtol=rtol, atol=atol,
                    t_eval=t_eval, events=events, dense_output=True)
    if sol.status < 0:
        raise RuntimeError(f"reference integration failed: {sol.message}")
    return sol


# -- Lagrange's equations in minimal coordinates ---------------------------------------------


class LagrangianODE:
    """First-order ODE ``y = (q, q')`` of Lagrange's equations (see the module docstring).

    Parameters
    ----------
    q, qd : sequences of sympy symbols (coordinates and their rates)
    T, V : sympy expressions (kinetic and potential energy); ``T`` may depend on ``t``
    Q : generalized non-conservative forces (one per coordinate), expressions of t, q, qd
    t : the time symbol
    """

    def __init__(self, q: Sequence[sp.Symbol], qd: Sequence[sp.Symbol], T: sp.Expr, V: sp.Expr,
                 Q: Sequence[sp.Expr], t: sp.Symbol):
        q, qd = list(q), list(qd)
        n = len(q)
        p = sp.Matrix(n, 1, [sp.diff(T, v) for v in qd])          # momenta dT/dq'
        M = p.jacobian(qd)
        f = sp.Matrix(n, 1, [Q[k] + sp.diff(T, q[k]) - sp.diff(V, q[k]) for k in range(n)])
        f -= p.jacobian(q) * sp.Matrix(qd) + sp.diff(p, t)
        self.n = n
        self._M = sp.lambdify((t, q, qd), M, modules="numpy", cse=True)
        self._f = sp.lambdify((t, q, qd), f, modules="numpy", cse=True)
        self._T = sp.lambdify((t, q, qd), T, modules="numpy", cse=True)
        self._V = sp.lambdify((t, q, qd), V, modules="numpy", cse=True)

    def accelerations(self, t: float, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        M = np.asarray(self._M(t, q, qd), dtype=float)
        f = np.asarray(self._f(t, q, qd), dtype=float).ravel()
        return np.linalg.solve(M, f)

    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        q, qd = y[:self.n], y[self.n:]
        return np.concatenate([qd, self.accelerations(t, q, qd)])

    def energy(self, t: float, y: np.ndarray) -> float:
        q, qd = y[:self.n], y[self.n:]
        return float(self._T(t, q, qd) + self._V(t, q, qd))


def rotation_about(axis: Sequence[float], angle) -> sp.Matrix:
    """Rodrigues' formula ``R = I + sin a [n]x + (1 - cos a) [n]x^2`` (unit axis ``n``); works on
    sympy and on numbers."""
    n = np.asarray(axis, dtype=float)
    n = n / np.linalg.norm(n)
    K = sp.Matrix([[0, -n[2], n[1]], [n[2], 0, -n[0]], [-n[1], n[0], 0]])
    return sp.eye(3) + sp.sin(angle) * K + (1 - sp.cos(angle)) * K * K


# -- physical pendulum -----------------------------------------------------------------------


@dataclass(frozen=True)
class PhysicalPendulum:
    """A rigid body of mass ``m`` and centroidal inertia ``J_c`` on a fixed horizontal axis, its
    centre of mass at distance ``d`` from the axis; angle ``theta`` from the downward vertical.

    ``J_O theta'' = -m g d sin(theta)``, ``J_O = J_c + m d^2`` (Steiner).  Its period from rest at
    ``theta0`` is ``T = 4 sqrt(J_O/(m g d)) K(k)``, ``k = sin(theta0/2)`` (Landau & Lifshitz,
    *Mechanics*, Sec. 11, problem 1; scipy's ``ellipk`` takes the parameter ``m = k^2``), which tends
    to the small-amplitude period ``2 pi sqrt(J_O/(m g d))`` as ``theta0 -> 0``.
    """

    m: float = 1.0
    J_c: float = 1.0 / 12.0
    d: float = 0.5
    g: float = 9.81

    @property
    def J_O(self) -> float:
        return self.J_c + self.m * self.d**2

    @property
    def omega0(self) -> float:
        """Small-amplitude angular frequency [rad/s]."""
        return float(np.sqrt(self.m * self.g * self.d / self.J_O))

    def small_amplitude_period(self) -> float:
        return 2 * np.pi / self.omega0

    def exact_period(self, theta0: float) -> float:
        return float(4.0 / self.omega0 * ellipk(np.sin(theta0 / 2) ** 2))

    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        return np.array([y[1], -self.omega0**2 * np.sin(y[0])])

    def energy(self, y: np.ndarray) -> float:
        return 0.5 * self.J_O * y[1] ** 2 - self.m * self.g * self.d * np.cos(y[0])

    def period_by_integration(self, theta0: float) -> float:
        """Released at rest at ``theta0 > 0``: theta crosses zero downwards at T/4 and 5T/4."""
        crossing = _event(lambda t, y: y[0], -1)
        sol = integrate(self.rhs, np.array([theta0, 0.0]), 2.0 * self.exact_period(theta0), events=crossing)
        times = sol.t_events[0]
        return float(times[1] - times[0])


def _event(function, direction: int):
    function.direction = direction
    return function


def period_from_samples(t: np.ndarray, x: np.ndarray) -> float:
    """Mean period of a sampled oscillation from its downward zero crossings (linear
    interpolation between samples; for a smooth signal sampled at h the crossing times are
    accurate to O(h^2))."""
    i = np.nonzero((x[:-1] > 0) & (x[1:] <= 0))[0]
    crossings = t[i] + x[i] / (x[i] - x[i + 1]) * (t[i + 1] - t[i])
    if crossings.size < 2:
        raise ValueError("fewer than two downward zero crossings")
    return float((crossings[-1] - crossings[0]) / (crossings.size - 1))


# -- cart with three pendula (examples/triple_pendulum.toml) ---------------------------------

#: The parameter values of examples/triple_pendulum.toml.
TRIPLE_PENDULUM = dict(m_c=1.0, m=0.5, l=1.0, g=9.81, d_c=0.01, d_1=0.02, c_f=10.0, d_f=0.02,
                       F1=0.05, f1=0.4674, F0=0.05, t0=0.5, tau=0.1)


def triple_pendulum_ode(values: dict[str, float] | None = None, *, fixed_cart: bool = False) -> LagrangianODE:
    """The cart with three pendula of ``examples/triple_pendulum.toml`` in minimal coordinates
    ``(x_c, phi1, phi2, phi3)`` (``fixed_cart``: x_c = 0 held, coordinates ``(phi1, phi2, phi3)``).

    Pendulum i (uniform rod, mass m, length l, centroidal inertia m l^2/12, angle phi_i from the
    downward vertical, counter-clockwise) hangs from the bottom of pendulum i-1 (pendulum 1 from
    the cart at (x_c, 0)); its centre of mass is at

        x_i = x_c + l sum_{j<i} sin phi_j + l/2 sin phi_i,   y_i = -l sum_{j<i} cos phi_j - l/2 cos phi_i.

    ``T = 1/2 m_c x_c'^2 + sum_i [1/2 m (x_i'^2 + y_i'^2) + 1/2 m l^2/12 phi_i'^2]``,
    ``V = sum_i m g y_i``.  Generalized forces (the file's force elements, whose virtual work is
    the same in these coordinates because the phi_i are the file's absolute angles):
    ``F(t) - d_c x_c'`` on x_c with ``F = F1 sin(2 pi f1 t) + F0 (t - t0)/tau exp(1/2 - (t - t0)^2/(2 tau^2))``;
    ``-d_1 phi1'`` on phi1; the beam springs ``-c_f (phi_{i+1} - phi_i) - d_f (phi_{i+1}' - phi_i')``
    on phi_{i+1} and the opposite on phi_i (i = 1, 2).
    """
    v = dict(TRIPLE_PENDULUM, **(values or {}))
    t = sp.Symbol("t", real=True)
    x_c, *phi = sp.symbols("x_c phi1 phi2 phi3", real=True)
    xd, *phid = sp.symbols("xd phid1 phid2 phid3", real=True)
    q, qd = [x_c, *phi], [xd, *phid]
    m, l, g = v["m"], v["l"], v["g"]
    T = sp.Rational(1, 2) * v["m_c"] * xd**2
    V = sp.Integer(0)
    for i in range(3):
        x = x_c + l * sum(sp.sin(phi[j]) for j in range(i)) + l / 2 * sp.sin(phi[i])
        y = -l * sum(sp.cos(phi[j]) for j in range(i)) - l / 2 * sp.cos(phi[i])
        xdot = sum(sp.diff(x, c) * cd for c, cd in zip(q, qd))
        ydot = sum(sp.diff(y, c) * cd for c, cd in zip(q, qd))
        T += m / 2 * (xdot**2 + ydot**2) + m * l**2 / 24 * phid[i] ** 2
        V += m * g * y
    F = v["F1"] * sp.sin(2 * sp.pi * v["f1"] * t) + v["F0"] * (t - v["t0"]) / v["tau"] * sp.exp(
        sp.Rational(1, 2) - (t - v["t0"]) ** 2 / (2 * v["tau"] ** 2))
    Q = [F - v["d_c"] * xd, -v["d_1"] * phid[0], sp.Integer(0), sp.Integer(0)]
    for i in range(2):
        torque = -v["c_f"] * (phi[i + 1] - phi[i]) - v["d_f"] * (phid[i + 1] - phid[i])
        Q[i + 2] += torque
        Q[i + 1] -= torque
    if fixed_cart:
        held = {x_c: 0, xd: 0}
        return LagrangianODE(phi, phid, T.subs(held), V.subs(held), [f.subs(held) for f in Q[1:]], t)
    return LagrangianODE(q, qd, T, V, Q, t)


# -- slider-crank (examples/slider_crank.toml) -------------------------------------------------

#: The parameter values of examples/slider_crank.toml.
SLIDER_CRANK = dict(r=0.1, l=0.3, m_c=1.0, m_r=0.5, m_s=0.8, c_s=500.0, d_s=2.0, d_phi=0.01, T0=0.5,
                    omega_T=6.0, phi0=0.3, omega0=1.0)


def slider_crank_ode(values: dict[str, float] | None = None) -> tuple[LagrangianODE, Callable]:
    """``examples/slider_crank.toml`` in the crank angle phi alone.

    Loop closure ``r sin phi + l sin theta = 0`` on the branch ``cos theta > 0`` (the file's
    initial guess xs = r + l): ``theta = -asin(r/l sin phi)``, ``xs = r cos phi + l cos theta``.
    Crank: rod of mass m_c rotating about its end (``J = m_c r^2/3``); connecting rod: uniform,
    mass m_r, from the crank tip to the slider, centre of mass at
    ``r (cos phi, sin phi) + l/2 (cos theta, sin theta)``, centroidal inertia ``m_r l^2/12``;
    slider mass m_s.  Generalized force on phi: ``T0 sin(omega_T t) - d_phi phi'`` plus the slider
    spring-damper ``-(c_s (xs - r - l) + d_s xs') dxs/dphi`` (virtual work).  No gravity.

    Returns the ODE and ``kinematics(phi) -> (theta, xs)``.
    """
    v = dict(SLIDER_CRANK, **(values or {}))
    t = sp.Symbol("t", real=True)
    phi, phid = sp.symbols("phi phid", real=True)
    r, l = v["r"], v["l"]
    theta = -sp.asin(r / l * sp.sin(phi))
    xs = r * sp.cos(phi) + l * sp.cos(theta)
    xg = r * sp.cos(phi) + l / 2 * sp.cos(theta)
    yg = r * sp.sin(phi) + l / 2 * sp.sin(theta)
    rate = lambda e: sp.diff(e, phi) * phid  # noqa: E731
    T = (v["m_c"] * r**2 / 6 * phid**2 + v["m_r"] / 2 * (rate(xg) ** 2 + rate(yg) ** 2)
         + v["m_r"] * l**2 / 24 * rate(theta) ** 2 + v["m_s"] / 2 * rate(xs) ** 2)
    Q = [v["T0"] * sp.sin(v["omega_T"] * t) - v["d_phi"] * phid
         - (v["c_s"] * (xs - r - l) + v["d_s"] * rate(xs)) * sp.diff(xs, phi)]
    kin = sp.lambdify(phi, (theta, xs), modules="numpy")
    return LagrangianODE([phi], [phid], T, sp.Integer(0), Q, t), kin


# -- serial chain of spatial rigid bodies with revolute joints -----------------------------------


@dataclass(frozen=True)
class ChainLink:
    """One body of :func:`revolute_chain_ode`: the joint to its parent (axis ``axis`` in the
    parent's frame at the joint point ``joint`` given in the parent's frame; the ground's frame for
    the first link), its centre of mass ``com`` and the next joint point ``tip`` in its own frame
    (which coincides with the parent's frame at zero joint angle), mass and principal centroidal
    inertia along its own axes, and a torsion spring ``stiffness`` on the joint angle."""

    axis: tuple[float, float, float]
    joint: tuple[float, float, float]
    com: tuple[float, float, float]
    tip: tuple[float, float, float]
    mass: float
    inertia: tuple[float, float, float]
    stiffness: float = 0.0


def revolute_chain_ode(links: Sequence[ChainLink], gravity: Sequence[float]) -> tuple[LagrangianODE, Callable]:
    """A serial chain of spatial rigid bodies joined by revolute joints, hanging from the ground.

    Body i's orientation ``R_i = R_{i-1} Rot(a_i, phi_i)`` (Rodrigues), its joint point
    ``p_i = p_{i-1} + R_{i-1} s_i`` (``s_i = links[i].joint`` in the parent's frame; ``p_0``
    and ``R_0 = I`` of the ground), its centre of mass ``c_i = p_i + R_i d_i``.  Its body-frame
    angular velocity follows recursively, ``w'_i = Rot(a_i, phi_i)^T w'_{i-1} + a_i phi_i'``, and
    ``T = sum 1/2 (m_i |c_i'|^2 + w'_i^T J_i w'_i)``, ``V = sum (-m_i g . c_i + 1/2 k_i phi_i^2)``.

    Returns the ODE (coordinates: the joint angles) and ``poses(phi) -> [(c_i, R_i), ...]``;
    ``poses(phi, phid) -> [(c_i, R_i, c_i', w_i), ...]`` adds the velocity of the centre of mass
    and the global angular velocity ``w_i = R_i w'_i``.

    A massless link with coinciding joint, centre and tip is an intermediate frame: three of them
    in a row with independent axes make a spherical joint (Cardan-type angles, singular where two
    of the three axes align).
    """
    t = sp.Symbol("t", real=True)
    n = len(links)
    q = list(sp.symbols(f"phi1:{n + 1}", real=True))
    qd = list(sp.symbols(f"phid1:{n + 1}", real=True))
    g = sp.Matrix(gravity)
    R = sp.eye(3)
    p = sp.zeros(3, 1)
    w = sp.zeros(3, 1)
    T, V = sp.Integer(0), sp.Integer(0)
    poses = []
    for i, link in enumerate(links):
        p = p + R * sp.Matrix(link.joint) if i == 0 else p + R * sp.Matrix(links[i - 1].tip)
        axis = np.asarray(link.axis, dtype=float) / np.linalg.norm(link.axis)
        Rot = rotation_about(axis, q[i])
        R = R * Rot
        w = Rot.T * w + sp.Matrix(axis) * qd[i]
        c = p + R * sp.Matrix(link.com)
        cdot = c.jacobian(q) * sp.Matrix(qd)
        T += link.mass / 2 * (cdot.T * cdot)[0] + sum(link.inertia[k] * w[k] ** 2 for k in range(3)) / 2
        V += -link.mass * (g.T * c)[0] + link.stiffness / 2 * q[i] ** 2
        poses.append((c, R, cdot, R * w))
    Q = [sp.Integer(0)] * n
    pose_fn = sp.lambdify([q], [(c, R) for c, R, _, _ in poses], modules="numpy", cse=True)
    motion_fn = sp.lambdify([q, qd], [(c, R, v, w) for c, R, v, w in poses], modules="numpy", cse=True)

    def pose(phi, phid=None):
        if phid is None:
            return [(np.asarray(c, dtype=float).ravel(), np.asarray(Rm, dtype=float)) for c, Rm in pose_fn(phi)]
        return [tuple(np.asarray(x, dtype=float) if k == 1 else np.asarray(x, dtype=float).ravel()
                      for k, x in enumerate(item)) for item in motion_fn(phi, phid)]

    return LagrangianODE(q, qd, T, V, Q, t), pose


#: A chain of three spatial bodies with non-parallel revolute axes (z, then x of link 1, then the
#: diagonal of y and z of link 2), offset centres of mass, asymmetric inertia and torsion springs
#: in the second and third joint; gravity along -y.
SPATIAL_CHAIN = (
    ChainLink(axis=(0, 0, 1), joint=(0, 0, 0), com=(0, -0.5, 0), tip=(0, -1.0, 0), mass=1.0,
              inertia=(0.09, 0.01, 0.09)),
    ChainLink(axis=(1, 0, 0), joint=(0, 0, 0), com=(0.1, -0.4, 0.05), tip=(0, -0.8, 0), mass=0.7,
              inertia=(0.05, 0.02, 0.04), stiffness=3.0),
    ChainLink(axis=(0, 1, 1), joint=(0, 0, 0), com=(0, -0.3, 0.1), tip=(0, -0.6, 0), mass=0.4,
              inertia=(0.03, 0.01, 0.025), stiffness=2.0),
)
SPATIAL_CHAIN_GRAVITY = (0.0, -9.81, 0.0)


def _spherical(body: ChainLink) -> tuple[ChainLink, ChainLink, ChainLink]:
    """A spherical joint as revolutes about z, x, y (two massless intermediate frames) carrying
    ``body`` (whose own axis field is replaced by y)."""
    point = dict(joint=body.joint, com=(0.0, 0.0, 0.0), tip=(0.0, 0.0, 0.0), mass=0.0, inertia=(0.0, 0.0, 0.0))
    return (ChainLink(axis=(0, 0, 1), **point), ChainLink(axis=(1, 0, 0), **point),
            dataclasses.replace(body, axis=(0, 1, 0)))


#: A spatial double pendulum: two asymmetric rods on spherical joints (ground - rod 1 at the
#: origin, rod 1's tip - rod 2's top), each joint as three revolutes (:func:`_spherical`); the
#: coordinates are (a1, b1, c1, a2, b2, c2) with the relative rotations Rz(a) Rx(b) Ry(c).
SPHERICAL_RODS = (
    ChainLink(axis=(0, 1, 0), joint=(0, 0, 0), com=(0.0, -0.5, 0.0), tip=(0.0, -1.0, 0.0), mass=1.0,
              inertia=(0.09, 0.01, 0.08)),
    ChainLink(axis=(0, 1, 0), joint=(0, 0, 0), com=(0.05, -0.4, 0.0), tip=(0.0, -0.8, 0.0), mass=0.6,
              inertia=(0.05, 0.02, 0.04)),
)
SPHERICAL_DOUBLE_PENDULUM = _spherical(SPHERICAL_RODS[0]) + _spherical(SPHERICAL_RODS[1])


# -- quaternions (Euler parameters) -------------------------------------------------------------


def quaternion_matrix(e: np.ndarray) -> np.ndarray:
    """Rotation matrix body -> global of the unit quaternion ``e = (e0, e1, e2, e3)``
    (Nikravesh, *Computer-Aided Analysis of Mechanical Systems*, eq. (6.19);
    dissertation 000, eq. (2.15))."""
    e0, e1, e2, e3 = e
    return 2 * np.array([
        [e0**2 + e1**2 - 0.5, e1 * e2 - e0 * e3, e1 * e3 + e0 * e2],
        [e1 * e2 + e0 * e3, e0**2 + e2**2 - 0.5, e2 * e3 - e0 * e1],
        [e1 * e3 - e0 * e2, e2 * e3 + e0 * e1, e0**2 + e3**2 - 0.5],
    ])


def rotation_matrix_xyz(a: float, b: float, c: float) -> np.ndarray:
    """``Rx(a) Ry(b) Rz(c)`` (Cardan angles, body-fixed x-y-z sequence)."""
    ca, sa, cb, sb, cc, sc = np.cos(a), np.sin(a), np.cos(b), np.sin(b), np.cos(c), np.sin(c)
    rx = np.array([[1, 0, 0], [0, ca, -sa], [0, sa, ca]])
    ry = np.array([[cb, 0, sb], [0, 1, 0], [-sb, 0, cb]])
    rz = np.array([[cc, -sc, 0], [sc, cc, 0], [0, 0, 1]])
    return rx @ ry @ rz


def quaternion_of(R: np.ndarray) -> np.ndarray:
    """Unit quaternion (e0 >= 0) of a rotation matrix (Shepperd's method)."""
    tr = np.trace(R)
    k = int(np.argmax([tr, R[0, 0], R[1, 1], R[2, 2]]))
    if k == 0:
        e = np.array([1 + tr, R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    elif k == 1:
        e = np.array([R[2, 1] - R[1, 2], 1 + 2 * R[0, 0] - tr, R[0, 1] + R[1, 0], R[0, 2] + R[2, 0]])
    elif k == 2:
        e = np.array([R[0, 2] - R[2, 0], R[0, 1] + R[1, 0], 1 + 2 * R[1, 1] - tr, R[1, 2] + R[2, 1]])
    else:
        e = np.array([R[1, 0] - R[0, 1], R[0, 2] + R[2, 0], R[1, 2] + R[2, 1], 1 + 2 * R[2, 2] - tr])
    e = e / np.linalg.norm(e)
    return e if e[0] >= 0 else -e


def body_angular_velocity(e: np.ndarray, e_dot: np.ndarray) -> np.ndarray:
    """``w' = 2 G(e) e'`` (dissertation 000, eq. (2.20); Nikravesh eq. (6.95))."""
    e0, e1, e2, e3 = e
    G = np.array([[-e1, e0, e3, -e2], [-e2, -e3, e0, e1], [-e3, e2, -e1, e0]])
    return 2 * G @ e_dot


def quaternion_rate(e: np.ndarray, w_body: np.ndarray) -> np.ndarray:
    """``e' = 1/2 e (x) (0, w')`` (Hamilton product; the inverse of :func:`body_angular_velocity`
    on unit quaternions: ``e' = 1/2 G^T w'``)."""
    e0, e1, e2, e3 = e
    G = np.array([[-e1, e0, e3, -e2], [-e2, -e3, e0, e1], [-e3, e2, -e1, e0]])
    return 0.5 * G.T @ w_body


# -- free rigid body ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FreeRigidBody:
    """Torque-free rigid body with principal inertia ``I = (I1, I2, I3)`` about its centre of mass.

    Euler's equations in the body frame, ``I w' + w x (I w) = 0`` (Goldstein eq. (5.39)), with
    the quaternion kinematics of :func:`quaternion_rate`; state ``y = (e, w')`` (7 values).
    Invariants: the energy ``1/2 w'^T I w'`` and the global angular momentum ``A(e) I w'``.

    Symmetric body (``I1 = I2``): ``w3'`` is constant and ``w'`` precesses about the symmetry axis
    in the *body* frame at the rate ``Omega_b = (I3 - I1)/I1 w3'`` (Goldstein eq. (5.46)); in space
    the symmetry axis precesses about the fixed angular momentum at ``Omega = |L|/I1 =
    I3 w3'/(I1 cos(beta))``, beta the angle between L and the symmetry axis (Goldstein Sec. 5.6;
    Landau & Lifshitz Sec. 33).
    """

    inertia: tuple[float, float, float]

    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        e, w = y[:4], y[4:]
        I = np.asarray(self.inertia)
        return np.concatenate([quaternion_rate(e, w), -np.cross(w, I * w) / I])

    def energy(self, w_body: np.ndarray) -> float:
        return float(0.5 * np.sum(np.asarray(self.inertia) * w_body**2))

    def angular_momentum(self, e: np.ndarray, w_body: np.ndarray) -> np.ndarray:
        return quaternion_matrix(e) @ (np.asarray(self.inertia) * w_body)

    def body_precession_rate(self, w3: float) -> float:
        """``(I3 - I1)/I1 w3'`` (symmetric body, I1 = I2)."""
        I1, _, I3 = self.inertia
        return (I3 - I1) / I1 * w3

    def space_precession_rate(self, w_body: np.ndarray) -> float:
        """``|L|/I1 = I3 w3'/(I1 cos beta)`` (symmetric body)."""
        I1, _, I3 = self.inertia
        L = np.asarray(self.inertia) * w_body
        cos_beta = L[2] / np.linalg.norm(L)
        return float(I3 * w_body[2] / (I1 * cos_beta))

    def simulate(self, e0: np.ndarray, w_body0: np.ndarray, t_end: float, t_eval=None):
        return integrate(self.rhs, np.concatenate([e0, w_body0]), t_end, t_eval=t_eval)


# -- heavy symmetric top ------------------------------------------------------------------------


def zxz_matrix(psi: float, theta: float, phi: float) -> np.ndarray:
    """Rotation body -> global ``Rz(psi) Rx(theta) Rz(phi)`` of the z-x-z Euler angles
    (Goldstein Sec. 4.4: precession psi, nutation theta, spin phi)."""
    def rz(a):
        return np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])

    rx = np.array([[1, 0, 0], [0, np.cos(theta), -np.sin(theta)], [0, np.sin(theta), np.cos(theta)]])
    return rz(psi) @ rx @ rz(phi)


def zxz_body_angular_velocity(theta: float, phi: float, psid: float, thetad: float, phid: float) -> np.ndarray:
    """Body-frame angular velocity of z-x-z Euler angles (Goldstein eq. (4.87))."""
    return np.array([psid * np.sin(theta) * np.sin(phi) + thetad * np.cos(phi),
                     psid * np.sin(theta) * np.cos(phi) - thetad * np.sin(phi),
                     psid * np.cos(theta) + phid])


@dataclass(frozen=True)
class HeavyTop:
    """Heavy symmetric top: mass ``m``, centre of mass at distance ``l`` from the fixed point on the
    symmetry axis (body z), centroidal principal inertia ``(I1c, I1c, I3)``; gravity ``-g e_z``.

    In z-x-z Euler angles (psi, theta, phi), with ``I1 = I1c + m l^2`` about the fixed point
    (Goldstein eq. (5.59)):

        L = 1/2 I1 (theta'^2 + psi'^2 sin^2 theta) + 1/2 I3 (phi' + psi' cos theta)^2 - m g l cos theta.

    Steady precession at nutation theta with spin ``w3 = phi' + psi' cos theta`` (constant): the
    theta equation with theta' = theta'' = 0 gives ``I1 cos(theta) psi'^2 - I3 w3 psi' + m g l = 0``
    (Goldstein eq. (5.76)), whose roots are :meth:`steady_precession_rates`.
    """

    m: float = 1.0
    l: float = 0.1
    I1c: float = 2.0e-3
    I3: float = 4.0e-3
    g: float = 9.81

    @property
    def I1(self) -> float:
        return self.I1c + self.m * self.l**2

    def steady_precession_rates(self, theta: float, w3: float) -> tuple[float, float]:
        """(slow, fast) roots ``psi' = (I3 w3 -/+ sqrt(I3^2 w3^2 - 4 I1 m g l cos theta))/(2 I1 cos theta)``.
        The slow one tends to the gyroscopic ``m g l/(I3 w3)`` for a fast top."""
        a, b, c = self.I1 * np.cos(theta), -self.I3 * w3, self.m * self.g * self.l
        disc = b * b - 4 * a * c
        if disc < 0:
            raise ValueError("no steady precession at this spin (spin too slow)")
        root = np.sqrt(disc)
        # The slow root in the cancellation-free form c / (...) (Vieta).
        slow = 2 * c / (-b + root)
        fast = (-b + root) / (2 * a)
        return float(slow), float(fast)

    def ode(self) -> LagrangianODE:
        t = sp.Symbol("t", real=True)
        psi, theta, phi = sp.symbols("psi theta phi", real=True)
        psid, thetad, phid = sp.symbols("psid thetad phid", real=True)
        T = (self.I1 / 2 * (thetad**2 + psid**2 * sp.sin(theta) ** 2)
             + self.I3 / 2 * (phid + psid * sp.cos(theta)) ** 2)
        V = self.m * self.g * self.l * sp.cos(theta)
        zero = sp.Integer(0)
        return LagrangianODE([psi, theta, phi], [psid, thetad, phid], T, V, [zero, zero, zero], t)

    def com_acceleration(self, y: np.ndarray, y_dot: np.ndarray) -> np.ndarray:
        """``c''`` of the centre of mass ``c = l (sin psi sin theta, -cos psi sin theta, cos theta)``
        (``A(psi, theta, phi) (0, 0, l)``) by the chain rule, ``c'' = J q'' + (dJ/dt) q'``, from the
        state ``y`` and its rate ``y_dot = (q', q'')`` (the ODE's right-hand side: no differencing)."""
        psi, th = y[0], y[1]
        psid, thd = y[3], y[4]
        psidd, thdd = y_dot[3], y_dot[4]
        s, c, sp_, cp = np.sin(th), np.cos(th), np.sin(psi), np.cos(psi)
        # d/dt of (sin psi sin theta, -cos psi sin theta, cos theta), twice
        x = (cp * s * psidd + sp_ * c * thdd - sp_ * s * psid**2 + 2 * cp * c * psid * thd - sp_ * s * thd**2)
        yy = (sp_ * s * psidd - cp * c * thdd + cp * s * psid**2 + 2 * sp_ * c * psid * thd + cp * s * thd**2)
        z = -s * thdd - c * thd**2
        return self.l * np.array([x, yy, z])

    def pose(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Centre of mass, its velocity, the rotation matrix and the global angular velocity of the
        state ``y = (psi, theta, phi, psi', theta', phi')``."""
        psi, theta, phi, psid, thetad, phid = y
        A = zxz_matrix(psi, theta, phi)
        w = A @ zxz_body_angular_velocity(theta, phi, psid, thetad, phid)
        c = A @ np.array([0.0, 0.0, self.l])
        return c, np.cross(w, c), A, w
