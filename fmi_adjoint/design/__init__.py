"""Optimal input design (dissertation Ch. 5) for ODE and index-3 DAE models.

An input of the model (an ``[inputs]`` entry) becomes a signal of knot values
(:mod:`.signal`), the criterion is a function of the Fisher information of the discrete
scheme (:mod:`.criteria`, :mod:`.fisher`), its exact gradient comes from the adjoint of the
scheme together with its forward sensitivities (:func:`.fisher.criterion_gradient`), and
:func:`.optimize.run_design` solves the problem (:mod:`.problem`).
"""

from .criteria import CRITERIA, ACovariance, AOptimal, AbstractCriterion, DOptimal, EOptimal, criterion_named
from .fisher import FisherSetup, criterion_gradient, fisher_matrix, sensitivities
from .optimize import DesignIteration, DesignResult, run_design
from .problem import DesignProblem, DesignSpec, DesignValue
from .signal import (BASES, BOUND_MAPS, AbstractBasis, AbstractBoundMap, ArctanMap, BoxBounds, CubicSpline,
                     PiecewiseLinear, SigmoidMap, signal_model)

__all__ = ["ACovariance", "AOptimal", "AbstractBasis", "AbstractBoundMap", "AbstractCriterion", "ArctanMap", "BASES",
           "BOUND_MAPS", "BoxBounds", "CRITERIA", "CubicSpline", "DOptimal", "DesignIteration", "DesignProblem",
           "DesignResult", "DesignSpec", "DesignValue", "EOptimal", "FisherSetup", "PiecewiseLinear", "SigmoidMap",
           "criterion_gradient", "criterion_named", "fisher_matrix", "run_design", "sensitivities", "signal_model"]
