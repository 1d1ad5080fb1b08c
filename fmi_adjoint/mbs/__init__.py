"""Multibody models from bodies, markers, joints, forces and sensors (issue 23;
Oberpeilsteiner, dissertation 2018, Ch. 2).

Components are frozen dataclasses that *lower* themselves into an ordinary
:class:`fmi_adjoint.model.Model` through :class:`Lowering` (:mod:`.system`), so every engine,
the adjoint, the sensitivities, costs, identification and FMU export work on them unchanged.

Example::

    from fmi_adjoint import mbs
    from fmi_adjoint.model import Parameter
    system = mbs.MultibodySystem(
        name="pendulum",
        parameters=(Parameter("m", 1.0, "kg"), Parameter("l", 1.0, "m"), Parameter("g", 9.81, "m/s^2")),
        gravity=(0, "-g", 0),
        bodies=(mbs.PlanarRigidBody("rod", mass="m", inertia="m*l**2/12", position=(0, "-l/2"), angle=0),),
        markers=(mbs.Marker("pivot", "ground"), mbs.Marker("top", "rod", position=(0, "l/2", 0))),
        joints=(mbs.Revolute("hinge", "pivot", "top"),),
        sensors=(mbs.JointCoordinate("angle", "hinge"),),
    )
    model = system.to_model()
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_names

if TYPE_CHECKING:  # the names for type checkers and the API reference (griffe); loaded by __getattr__
    from .applied import Force, Torque
    from .bodies import (
        GROUND,
        AxisAngle,
        Body,
        BodyKinematics,
        Cardan,
        Ground,
        PlanarRigidBody,
        PointMass,
        RotationMatrix,
        SpatialRigidBody,
    )
    from .elements import GeneralizedForces
    from .ffrf import FloatingFrameBody, PlanarFloatingFrameBody
    from .flexible import FlexibleBody, NodeMarker
    from .forces import Bushing, JointForce, SpringDamper, scalar_law
    from .joints import (
        Cylindrical,
        Fixed,
        Joint,
        Planar,
        Prismatic,
        RedundantJointsError,
        Revolute,
        Spherical,
        Universal,
    )
    from .markers import Marker, MarkerFrame
    from .registry import ComponentRegistry
    from .sensors import (
        BeamStrain,
        AngularAcceleration,
        AngularVelocity,
        Distance,
        JointCoordinate,
        JointReaction,
        MarkerAcceleration,
        MarkerPosition,
        MarkerVelocity,
        Orientation,
        RelativeDisplacement,
    )
    from .context import Lowering
    from .system import Component, MultibodySystem, SystemLowering

_LOCATIONS = {
    "AngularAcceleration": "sensors",
    "AngularVelocity": "sensors",
    "AxisAngle": "bodies",
    "BeamStrain": "sensors",
    "Body": "bodies",
    "BodyKinematics": "bodies",
    "Bushing": "forces",
    "Cardan": "bodies",
    "Component": "system",
    "ComponentRegistry": "registry",
    "Cylindrical": "joints",
    "Distance": "sensors",
    "Fixed": "joints",
    "FlexibleBody": "flexible",
    "FloatingFrameBody": "ffrf",
    "Force": "applied",
    "GROUND": "bodies",
    "GeneralizedForces": "elements",
    "Ground": "bodies",
    "Joint": "joints",
    "JointCoordinate": "sensors",
    "JointForce": "forces",
    "JointReaction": "sensors",
    "Lowering": "context",
    "Marker": "markers",
    "MarkerAcceleration": "sensors",
    "MarkerFrame": "markers",
    "MarkerPosition": "sensors",
    "MarkerVelocity": "sensors",
    "MultibodySystem": "system",
    "NodeMarker": "flexible",
    "Orientation": "sensors",
    "Planar": "joints",
    "PlanarFloatingFrameBody": "ffrf",
    "PlanarRigidBody": "bodies",
    "PointMass": "bodies",
    "Prismatic": "joints",
    "RedundantJointsError": "joints",
    "RelativeDisplacement": "sensors",
    "Revolute": "joints",
    "RotationMatrix": "bodies",
    "SpatialRigidBody": "bodies",
    "Spherical": "joints",
    "SpringDamper": "forces",
    "SystemLowering": "system",
    "Torque": "applied",
    "Universal": "joints",
    "scalar_law": "forces",
}

__all__ = [
    "GROUND",
    "AngularAcceleration",
    "AngularVelocity",
    "AxisAngle",
    "Bushing",
    "Distance",
    "JointCoordinate",
    "JointForce",
    "JointReaction",
    "MarkerAcceleration",
    "MarkerPosition",
    "MarkerVelocity",
    "Orientation",
    "RelativeDisplacement",
    "SpringDamper",
    "scalar_law",
    "Body",
    "BodyKinematics",
    "Cardan",
    "Component",
    "ComponentRegistry",
    "Cylindrical",
    "Fixed",
    "FlexibleBody",
    "FloatingFrameBody",
    "PlanarFloatingFrameBody",
    "BeamStrain",
    "Force",
    "GeneralizedForces",
    "Ground",
    "Joint",
    "Lowering",
    "SystemLowering",
    "Marker",
    "MarkerFrame",
    "NodeMarker",
    "MultibodySystem",
    "Planar",
    "PlanarRigidBody",
    "PointMass",
    "Prismatic",
    "RedundantJointsError",
    "Revolute",
    "RotationMatrix",
    "SpatialRigidBody",
    "Spherical",
    "Torque",
    "Universal",
]


#: The submodules, also reachable as attributes (``fmi_adjoint.mbs.applied``).
_SUBMODULES = (
    "applied", "bodies", "context", "elements", "ffrf", "flexible", "forces", "frames", "joints", "markers", "names",
    "registry", "rotations", "sensors", "system",
)

__getattr__, __dir__ = lazy_names(__name__, _LOCATIONS, __all__, _SUBMODULES)
