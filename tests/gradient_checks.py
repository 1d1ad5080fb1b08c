"""The gradient check shared by tests of model kinds: the discrete adjoint against forward
sensitivities and fourth-order central differences at a problem's start."""

from __future__ import annotations

import numpy as np

from tolerances import ADJOINT_VS_FORWARD, GRADIENT_VS_FD


def assert_adjoint_equals_forward_and_central_differences(problem) -> None:
    """Every component non-zero; adjoint = forward sensitivities (``ADJOINT_VS_FORWARD``) =
    central differences of relative step 1e-3, fourth order (``GRADIENT_VS_FD``)."""
    x = problem.start.copy()
    adjoint, forward = problem.evaluate(x, "adjoint"), problem.evaluate(x, "forward")
    assert np.all(adjoint.gradient != 0.0), adjoint.gradient
    assert np.all(np.abs(adjoint.gradient - forward.gradient) <= ADJOINT_VS_FORWARD * np.abs(forward.gradient)), (
        adjoint.gradient, forward.gradient)
    fd = problem.finite_differences(x, rel=1e-3, order=4)
    assert np.all(np.abs(adjoint.gradient - fd) <= GRADIENT_VS_FD * np.abs(fd)), (adjoint.gradient, fd)
