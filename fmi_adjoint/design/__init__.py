"""Optimal input design (dissertation Ch. 5) for ODE and index-3 DAE models.

An input of the model (an ``[inputs]`` entry) becomes a signal of knot values
(:mod:`.signal`), the criterion is a function of the Fisher information of the discrete
scheme (:mod:`.criteria`, :mod:`.fisher`), its exact gradient comes from the adjoint of the
scheme together with its forward sensitivities (:func:`.fisher.criterion_gradient`), and
:func:`.optimize.run_design` solves the problem (:mod:`.problem`) from one start;
:func:`.multistart.run_design_starts` from the several starts of a :class:`.starts.StartPlan`
(the command's default, issue 32).
"""

from .criteria import CRITERIA, ACovariance, AOptimal, AbstractCriterion, DOptimal, EOptimal, criterion_named
from .fisher import FisherSetup, criterion_gradient, fisher_matrix, sensitivities
from .multistart import DesignRecipe, StartOutcome, run_design_starts
from .optimize import DesignIteration, DesignResult, StopDiagnosis, diagnose_stop, run_design
from .problem import DesignProblem, DesignSpec, DesignValue
from .starts import AbstractStart, Chirp, RandomSwitching, Ramp, SquareWave, StartPlan, UserStart
from .signal import (BASES, BOUND_MAPS, AbstractBasis, AbstractBoundMap, ArctanMap, BoxBounds, CubicSpline,
                     PiecewiseLinear, SigmoidMap, signal_model)

__all__ = ["ACovariance", "AOptimal", "AbstractBasis", "AbstractBoundMap", "AbstractCriterion", "AbstractStart",
           "ArctanMap", "BASES", "BOUND_MAPS", "BoxBounds", "CRITERIA", "Chirp", "CubicSpline", "DOptimal",
           "DesignIteration", "DesignProblem", "DesignRecipe", "DesignResult", "DesignSpec", "DesignValue", "EOptimal",
           "FisherSetup", "PiecewiseLinear", "RandomSwitching", "Ramp", "SigmoidMap", "SquareWave", "StartOutcome",
           "StartPlan", "StopDiagnosis", "UserStart", "criterion_gradient", "criterion_named", "diagnose_stop",
           "fisher_matrix", "run_design", "run_design_starts", "sensitivities", "signal_model"]
