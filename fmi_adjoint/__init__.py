"""fmi-adjoint: parameter identification of multibody models with exact discrete adjoints.

The data flow is one-way: a :class:`Model` is compiled (:func:`compile_model`),
simulated with HHT (:func:`simulate`) into a frozen :class:`Trajectory`; a cost of the
sampled outputs (:class:`LeastSquaresCost`) is differentiated by the discrete adjoint
(:func:`adjoint_gradient`) or forward sensitivities (:func:`sensitivity_gradient`), and
:func:`identify` drives scipy's optimizers over one or several :class:`Experiment` s.
"""

from .adjoint import (
    GradientResult,
    adjoint_gradient,
    continuous_adjoint_gradient,
    output_sensitivities,
    sensitivity_gradient,
)
from .compiled import CompiledModel, compile_model
from .costs import AbstractCost, CostValue, LeastSquaresCost
from .data import Measurement, read_csv, write_csv
from .errors import (
    ConvergenceError,
    DataError,
    ExpressionError,
    FmiAdjointError,
    IdentificationError,
    ModelError,
    OutputFileError,
)
from .forces import (
    AbstractForceElement,
    AbstractTwoPointElement,
    ExpressionLoad,
    LinearSpringDamper,
    PolynomialSpringDamper,
    TableLoad,
)
from .identify import Experiment, IdentificationProblem, IdentificationResult, ParameterScaling, identify
from .integrate import HHT, Trajectory, initial_state, simulate
from .model import (
    Constraint,
    Coordinate,
    MassEntry,
    Model,
    Output,
    Parameter,
    PrescribedMotion,
    SimulationSettings,
)
from .model_file import load_model, parse_model

__all__ = [
    "AbstractCost",
    "AbstractForceElement",
    "AbstractTwoPointElement",
    "CompiledModel",
    "Constraint",
    "ConvergenceError",
    "Coordinate",
    "CostValue",
    "DataError",
    "Experiment",
    "ExpressionError",
    "ExpressionLoad",
    "FmiAdjointError",
    "GradientResult",
    "HHT",
    "IdentificationError",
    "IdentificationProblem",
    "IdentificationResult",
    "LeastSquaresCost",
    "LinearSpringDamper",
    "MassEntry",
    "Measurement",
    "Model",
    "ModelError",
    "Output",
    "OutputFileError",
    "Parameter",
    "ParameterScaling",
    "PolynomialSpringDamper",
    "PrescribedMotion",
    "SimulationSettings",
    "TableLoad",
    "Trajectory",
    "adjoint_gradient",
    "continuous_adjoint_gradient",
    "compile_model",
    "identify",
    "initial_state",
    "load_model",
    "output_sensitivities",
    "parse_model",
    "read_csv",
    "sensitivity_gradient",
    "simulate",
    "write_csv",
]
