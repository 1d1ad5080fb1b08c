"""Strain of a beam element recovered from its nodal displacements (issue 25, part 5: strain
gauges on flexible parts as sensors).

A two-node beam element (:mod:`.beams`: local ``x`` from the first node to the second, local
``y`` the part of the orientation vector normal to ``x``, ``z = x x y``) interpolates the axial
displacement linearly and the bending displacements by cubic Hermite polynomials
(Przemieniecki, *Theory of Matrix Structural Analysis*, Sec. 5.6).  The axial strain of the
fibre at ``(y, z)`` of the section, a fraction ``xi`` along the element, is then (Euler-Bernoulli:
plane sections stay normal to the axis)

    eps = du/dx - y d2v/dx2 - z d2w/dx2                               (1)

with ``v`` (``uy``, rotation ``rz = dv/dx``) and ``w`` (``uz``, ``ry = -dw/dx``) the bending
displacements and, for an element of length ``L``,

    d2v/dx2 = [(12 xi - 6) / L^2, (6 xi - 4) / L, (6 - 12 xi) / L^2, (6 xi - 2) / L] . [v1, rz1, v2, rz2]

(the second derivatives of the Hermite shape functions; for ``w`` the rotations enter as
``-ry``).  So the strain is a constant row times the element's 12 nodal displacements in the
body frame (``u = T^T u_local``), and through the reduced basis ``u = Psi q`` a constant row
times the deformation coordinates: strain is *linear* in them, and an output with exact
derivatives.  The bending strain at a fibre is ``-y M_z / (E I_z)`` for the bending moment of
the beam (``M c / E I``, ``c`` the fibre's distance from the neutral axis).

Hermite elements reproduce a cubic displacement exactly: under end loads (a cantilever with a
tip load) the curvature of every element is exact, so the root strain equals ``P L c / (E I)``
to round-off.  Under distributed loads the curvature is the element's linear best fit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ModelError

__all__ = ["beam_strain_row"]


def _local_axes(first: np.ndarray, second: np.ndarray, orientation: np.ndarray,
                where: str) -> tuple[float, np.ndarray]:
    """Length and rotation (rows: local x, y, z in body axes) of the element (module docstring)."""
    axis = second - first
    length = float(np.linalg.norm(axis))
    if not length > 0:
        raise ModelError(f"{where}: the element's two nodes coincide; give the two end nodes of a beam element.")
    x = axis / length
    y = orientation - (orientation @ x) * x
    if np.linalg.norm(y) <= 1e-9 * np.linalg.norm(orientation):
        raise ModelError(f"{where}: the orientation {orientation.tolist()} is along the element; give the beam's "
                         "orientation vector (a vector in the local x-y plane, e.g. [0, 1, 0] for a beam along x).")
    y = y / np.linalg.norm(y)
    return length, np.array([x, y, np.cross(x, y)])


def beam_strain_row(first: Sequence[float], second: Sequence[float], *, xi: float, fibre: Sequence[float],
                    orientation: Sequence[float] = (0.0, 1.0, 0.0), where: str = "strain") -> np.ndarray:
    """The row ``r`` (12,) with ``eps = r . [u1, u2]`` (eq. (1)): ``u1``, ``u2`` the six DOFs
    ``ux uy uz rx ry rz`` of the element's first and second node in the body frame.

    Parameters
    ----------
    first, second : 3 floats
        The nodes' positions in the body frame.
    xi : float
        Where along the element, 0 (first node) to 1 (second node).
    fibre : 2 floats
        ``(y, z)`` of the fibre in the section's local axes [m].
    orientation : 3 floats
        The beam's orientation vector (:class:`~fmi_adjoint.flexible.BeamMesh`).
    """
    if not 0.0 <= float(xi) <= 1.0:
        raise ModelError(f"{where}: position {xi!r} along the element; give a fraction from 0 (first node) to 1.")
    if len(tuple(fibre)) != 2:
        raise ModelError(f"{where}: fibre {tuple(fibre)!r}; give the (y, z) of the fibre in the section [m].")
    length, rotation = _local_axes(np.asarray(first, float), np.asarray(second, float),
                                   np.asarray(orientation, float), where)
    y, z = (float(c) for c in fibre)
    xi = float(xi)
    hermite = np.array([(12 * xi - 6) / length**2, (6 * xi - 4) / length, (6 - 12 * xi) / length**2,
                        (6 * xi - 2) / length])
    local = np.zeros(12)  # on [u1, r1, u2, r2] in local axes (each 3 components)
    local[[0, 6]] = [-1.0 / length, 1.0 / length]  # du/dx
    local[[1, 5, 7, 11]] += -y * hermite  # v1, rz1, v2, rz2
    local[[2, 4, 8, 10]] += -z * hermite * np.array([1.0, -1.0, 1.0, -1.0])  # w1, -ry1, w2, -ry2
    # u_local = R u_body per 3-vector, so r_body = R^T r_local block by block.
    return np.concatenate([rotation.T @ local[3 * k:3 * k + 3] for k in range(4)])
