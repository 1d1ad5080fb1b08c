"""fmi-adjoint: parameter identification of multibody models with exact discrete adjoints.

The data flow is one-way: a :class:`Model` is compiled (:func:`compile_model`),
simulated with HHT (:func:`simulate`) into a frozen :class:`Trajectory`; a cost of the
sampled outputs (:class:`LeastSquaresCost`) is differentiated by the discrete adjoint
(:func:`adjoint_gradient`) or forward sensitivities (:func:`sensitivity_gradient`), and
:func:`identify` drives scipy's optimizers over one or several :class:`Experiment` s.
"""

import importlib

from .lazy import lazy_names

# Public names are imported on first use (PEP 562), so that ``import fmi_adjoint`` (and the
# command line, which must answer Ctrl-C at any moment) does not load numpy, scipy and sympy
# before they are needed.
_LOCATIONS = {
    "AbstractCost": "costs",
    "AbstractEngine": "engines",
    "BuildCache": "cache",
    "CacheError": "cache",
    "AbstractForceElement": "forces",
    "AbstractScheme": "integrate",
    "AbstractTwoPointElement": "forces",
    "CompiledModel": "compiled",
    "Constraint": "model",
    "ConvergenceError": "errors",
    "Coordinate": "model",
    "CostValue": "costs",
    "DataError": "errors",
    "Experiment": "identify",
    "identify": "identify",
    "ExpressionError": "errors",
    "ExpressionLoad": "forces",
    "FmiAdjointError": "errors",
    "GeneralizedAlpha": "integrate",
    "GradientResult": "adjoint",
    "HHT": "integrate",
    "IdentificationError": "errors",
    "IdentificationProblem": "identify",
    "IdentificationResult": "identify",
    "LeastSquaresCost": "costs",
    "LinearSpringDamper": "forces",
    "MassEntry": "model",
    "Measurement": "data",
    "Model": "model",
    "NativeEngine": "engines",
    "ModelError": "errors",
    "Output": "model",
    "OutputFileError": "errors",
    "Parameter": "model",
    "ParameterScaling": "identify",
    "PolynomialSpringDamper": "forces",
    "PrescribedMotion": "model",
    "PythonEngine": "engines",
    "SimulationSettings": "model",
    "TableLoad": "forces",
    "Trajectory": "integrate",
    "adjoint_gradient": "adjoint",
    "compile_model": "compiled",
    "prepare_model": "warm",
    "continuous_adjoint_gradient": "adjoint",
    "initial_state": "integrate",
    "load_model": "model_file",
    "output_sensitivities": "adjoint",
    "parse_model": "model_file",
    "read_csv": "data",
    "sensitivity_gradient": "adjoint",
    "simulate": "integrate",
    "write_csv": "data",
}


__all__ = [
    "AbstractCost",
    "AbstractEngine",
    "BuildCache",
    "CacheError",
    "AbstractForceElement",
    "AbstractScheme",
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
    "GeneralizedAlpha",
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
    "NativeEngine",
    "Output",
    "OutputFileError",
    "Parameter",
    "ParameterScaling",
    "PolynomialSpringDamper",
    "PrescribedMotion",
    "PythonEngine",
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
    "prepare_model",
]


# ``identify`` is both a public function and a subpackage.  Importing a subpackage binds it as
# an attribute of its parent the first time it is imported, which would hide the function; the
# subpackage is therefore imported here, once (it is cheap: its names load on first use), and
# its name is then freed, so that ``fmi_adjoint.identify`` is the function (from __getattr__
# below) while ``fmi_adjoint.identify.spec`` and the like import as modules.
importlib.import_module(".identify", __name__)
del globals()["identify"]


# mbs: multibody components, a namespace of their own (fmi_adjoint.mbs.Revolute, ...).
__getattr__, __dir__ = lazy_names(__name__, _LOCATIONS, __all__, submodules=("mbs",))
