"""A torsion bar for fmi-adjoint: an example third-party multibody component.

The component registers through the entry-point group ``fmi_adjoint.components``
(``pyproject.toml``) and is used in a model file as a ``[[forces]]`` entry::

    [[forces]]
    type = "torsion_bar"
    name = "bar"
    markers = ["pivot", "hub"]     # marker_i, marker_j
    stiffness = "k_t"              # N m/rad, a number or an expression of parameters
    damping = 0.02                 # N m s/rad (default 0)
    free_angle = 0.0               # rad (default 0)
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, ClassVar

import sympy as sp

from fmi_adjoint.errors import ModelError
from fmi_adjoint.mbs import Marker, MultibodySystem, PlanarRigidBody, Revolute
from fmi_adjoint.mbs.forces import gradient
from fmi_adjoint.mbs.sensors import JointCoordinate
from fmi_adjoint.model import Parameter, SimulationSettings
from fmi_adjoint.text import check_identifier

if TYPE_CHECKING:
    from fmi_adjoint.mbs import Lowering

__all__ = ["TorsionBar"]

Number = float | int | str


@dataclasses.dataclass(frozen=True)
class TorsionBar:
    """A torsional spring-damper between two markers, about marker i's z axis.

    The twist ``theta`` is the angle from marker i's x axis to marker j's x axis about marker i's
    z axis (counter-clockwise positive).  The bar carries the torque::

        T = k (theta - theta0) + d theta_dot

    on marker j about that axis, ``-T`` on marker i: it resists the twist.  The generalized forces
    are its virtual work, ``Q_k = -T d theta / d q_k`` (the chain rule of
    :mod:`fmi_adjoint.mbs.forces`).

    Between markers that rotate about z only (planar bodies, ground) ``theta`` is the difference
    of their angles, continuous through any number of turns.  Otherwise it is
    ``atan2(y_i . x_j, x_i . x_j)`` and wraps at +-pi: keep the twist within +-pi (a bar
    between two spatial bodies is meant to sit on a common axis, e.g. of a revolute joint).

    Attributes
    ----------
    name : str
    marker_i, marker_j : str
    stiffness : number or expression of parameters [N m/rad]
    damping : number or expression of parameters [N m s/rad]
    free_angle : number or expression of parameters [rad]: the twist at which the torque vanishes
    """

    type_name: ClassVar[str] = "torsion_bar"
    section: ClassVar[str] = "forces"

    name: str
    marker_i: str
    marker_j: str
    stiffness: Number
    damping: Number = 0.0
    free_angle: Number = 0.0

    def __post_init__(self) -> None:
        check_identifier(self.name, "torsion bar")
        for key in ("marker_i", "marker_j"):
            if not isinstance(getattr(self, key), str):
                raise ModelError(f"{self.where(key)}: {getattr(self, key)!r} is not a marker name.")

    def where(self, prop: str = "") -> str:
        """``torsion bar 'bar'`` (``.prop``): how messages name the bar."""
        return f"torsion bar '{self.name}'" + (f".{prop}" if prop else "")

    def twist(self, ctx: Lowering) -> sp.Expr:
        """The twist ``theta`` (name symbols; class docstring)."""
        mi = ctx.marker(self.marker_i, self.where("marker_i"))
        mj = ctx.marker(self.marker_j, self.where("marker_j"))
        if mi.planar_angle is not None and mj.planar_angle is not None:
            return mj.planar_angle - mi.planar_angle
        x_i, y_i, x_j = mi.rotation[:, 0], mi.rotation[:, 1], mj.rotation[:, 0]
        return sp.atan2((y_i.T * x_j)[0, 0], (x_i.T * x_j)[0, 0])

    def lower(self, ctx: Lowering) -> None:
        theta = self.twist(ctx)
        known = set(ctx.coordinate_names)
        coordinates = sorted(s.name for s in theta.free_symbols if isinstance(s, sp.Symbol) and s.name in known)
        if not coordinates:
            raise ModelError(f"{self.where()}: both markers are fixed to ground; connect at least one moving body.")
        k = ctx.parameter_expression(self.stiffness, self.where("stiffness"))
        d = ctx.parameter_expression(self.damping, self.where("damping"))
        theta0 = ctx.parameter_expression(self.free_angle, self.where("free_angle"))
        torque = k * (theta - theta0) + d * ctx.velocity_of(theta)
        for coordinate, slope in gradient(theta, coordinates).items():
            ctx.add_generalized_force(coordinate, -torque * slope)

    @classmethod
    def example(cls) -> MultibodySystem:
        """A disk on a hinge, twisted 0.01 rad and released: a torsional oscillator of period
        ``2 pi sqrt(J / k)`` (1 s with these values)."""
        return MultibodySystem(
            name="torsion_bar_oscillator",
            parameters=(Parameter("J", 0.02, "kg m^2", (1e-6, 10.0)),
                        Parameter("k_t", 0.02 * (2 * 3.141592653589793) ** 2, "N m/rad", (1e-3, 1e3)),
                        Parameter("d_t", 0.0, "N m s/rad", (0.0, 1.0))),
            bodies=(PlanarRigidBody("disk", mass=1.0, inertia="J", angle=0.01),),
            markers=(Marker("pivot", "ground"), Marker("hub", "disk")),
            joints=(Revolute("hinge", "pivot", "hub"),),
            forces=(cls("bar", "pivot", "hub", stiffness="k_t", damping="d_t"),),
            sensors=(JointCoordinate("angle", joint="hinge"),),
            simulation=SimulationSettings(t_end=2.0, step=1e-3, alpha=0.0),
        )
