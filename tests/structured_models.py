"""Models with structured terms (:mod:`fmi_adjoint.structured`), shared by the tests.

:func:`structured_demo` has every kind: a pendulum in Cartesian coordinates (a mass matrix,
a gravity load and the rod as a quadratic constraint ``x^2 + y^2 - 1 = 0``), a chain of three
coordinates with a consistent mass matrix, a tridiagonal stiffness matrix and Rayleigh damping
``alpha M + beta K`` (each a parameter-scaled matrix), a load with a nonlinear factor, and a
bilinear constraint ``0.3 + u1 - 0.5 x - 0.1 x u1 = 0`` (``H_0[u1, x] = -0.2``) coupling the chain to the pendulum.
:func:`structured_sdof` is the oscillator of Oberpeilsteiner (2018), Sec. 3.1.1, with its mass,
stiffness and damping as 1 x 1 matrix terms.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fmi_adjoint.examples import example_path
from fmi_adjoint.model import Coordinate, Model, Output, Parameter, SimulationSettings
from fmi_adjoint.model_file import load_model
from fmi_adjoint.structured import DAMPING, LOAD, MASS, STIFFNESS, MatrixTerm, QuadraticConstraints

#: The chain's consistent mass matrix (linear bar elements) and stiffness matrix.
CHAIN_MASS = np.array([[2.0, 1.0, 0.0], [1.0, 4.0, 1.0], [0.0, 1.0, 2.0]]) / 6.0
CHAIN_STIFFNESS = np.array([[2.0, -1.0, 0.0], [-1.0, 2.0, -1.0], [0.0, -1.0, 1.0]])

#: Parameters of :func:`structured_demo` that scale its matrices.
DEMO_PARAMETERS = ("m", "k", "rho", "alpha", "beta", "F0")


def structured_demo(name: str = "structured_demo") -> Model:
    coordinates = (Coordinate("x", mass=0.0, initial_position=0.6), Coordinate("y", mass=0.0, initial_position=-0.8),
                   Coordinate("u1", mass=0.0), Coordinate("u2", mass=0.0),
                   Coordinate("u3", mass=0.0, initial_velocity=0.3))
    parameters = (Parameter("m", 2.0), Parameter("k", 50.0), Parameter("rho", 1.5), Parameter("alpha", 0.3),
                  Parameter("beta", 0.01), Parameter("F0", 2.0))
    chain = ("u1", "u2", "u3")
    terms = (
        MatrixTerm("pendulum_mass", MASS, ("x", "y"), np.eye(2), "m"),
        MatrixTerm("pendulum_weight", LOAD, ("x", "y"), [[0.0], [-9.81]], "m"),
        QuadraticConstraints("rod", ("x", "y"), [-1.0], np.zeros((1, 2)), [(0, 0, 0, 2.0), (0, 1, 1, 2.0)]),
        MatrixTerm("chain_mass", MASS, chain, CHAIN_MASS, "rho"),
        MatrixTerm("chain_stiffness", STIFFNESS, chain, CHAIN_STIFFNESS, "k"),
        MatrixTerm("chain_damping_m", DAMPING, chain, CHAIN_MASS, "alpha*rho"),
        MatrixTerm("chain_damping_k", DAMPING, chain, CHAIN_STIFFNESS, "beta*k"),
        MatrixTerm("chain_load", LOAD, chain, [[0.0], [0.0], [1.0]], "F0**2/2"),
        QuadraticConstraints("link", ("u1", "x"), [0.3], [[1.0, -0.5]], [(0, 0, 1, -0.2)]),
    )
    outputs = (Output("y_out", "y"), Output("u3_out", "u3"), Output("u2_acc", "der2(u2)"),
               Output("rod_force", "lam(rod_0)"), Output("u1_reaction", "reaction(u1)"))
    return Model(name, coordinates, parameters, outputs=outputs, matrix_terms=terms,
                 simulation=SimulationSettings(t_end=1.0, step=0.01))


def structured_sdof() -> Model:
    """The bundled ``sdof`` with ``m``, ``c`` and ``2 d`` as 1 x 1 mass, stiffness and damping
    matrices (the excitation ``sin(t)`` stays a load element)."""
    sdof = load_model(example_path("sdof"))
    x = sdof.coordinates[0].name
    terms = (MatrixTerm("mass", MASS, (x,), [[1.0]], "m"), MatrixTerm("spring", STIFFNESS, (x,), [[1.0]], "c"),
             MatrixTerm("damper", DAMPING, (x,), [[2.0]], "d"))
    return dataclasses.replace(sdof, name="sdof_matrices",
                               coordinates=(dataclasses.replace(sdof.coordinates[0], mass=0.0),),
                               forces=tuple(f for f in sdof.forces if f.name != "spring_damper"), matrix_terms=terms)
