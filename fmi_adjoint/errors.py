"""Project exceptions.

Every error raised on purpose by fmi-adjoint derives from :class:`FmiAdjointError`
and from the builtin that matches its meaning, so callers may catch either.
Messages name the offending argument, file or time step, the value found, and the fix.
"""

from __future__ import annotations

__all__ = [
    "FmiAdjointError",
    "ModelError",
    "ExpressionError",
    "DataError",
    "ConvergenceError",
    "RunBudgetError",
    "MemoryBudgetError",
    "IdentificationError",
    "OutputFileError",
    "CompilerError",
    "NoCCodeError",
    "CheckpointError",
    "ExecutorError",
    "FmuError",
]


class FmiAdjointError(Exception):
    """Base class of all errors raised by fmi-adjoint."""


class ModelError(FmiAdjointError, ValueError):
    """A model definition (Python API or TOML file) is invalid."""


class ExpressionError(ModelError):
    """An expression string is not accepted by the whitelist grammar."""


class DataError(FmiAdjointError, ValueError):
    """Measurement data (CSV) or a cost definition is invalid."""


class ConvergenceError(FmiAdjointError, RuntimeError):
    """A Newton iteration (time step or initialization) did not converge."""


class RunBudgetError(ConvergenceError):
    """A run exceeded its budget of steps, events or wall time (:class:`~fmi_adjoint.integrate.radau.RunBudget`),
    or its events stopped advancing in time; the run did not reach its end."""


class MemoryBudgetError(FmiAdjointError, MemoryError):
    """A run would need more memory than its limit (:mod:`fmi_adjoint.budget`), or a memory
    limit given is not a size; refused before anything large is allocated."""


class IdentificationError(FmiAdjointError, ValueError):
    """An identification problem is set up inconsistently."""


class OutputFileError(FmiAdjointError, OSError):
    """An output file cannot be written."""


class CompilerError(FmiAdjointError, RuntimeError):
    """No C compiler, or generated C code does not compile."""


class NoCCodeError(ModelError):
    """A force element has no C code, so the model runs only in the Python engine."""


class CheckpointError(FmiAdjointError, ValueError):
    """A checkpoint file cannot be written, read or resumed (wrong file, damaged, other run)."""


class ExecutorError(FmiAdjointError, RuntimeError):
    """Parallel work cannot run: a missing optional dependency (Dask), an unreachable
    cluster, or a task that killed its worker on every retry."""


class FmuError(FmiAdjointError, ValueError):
    """An FMU cannot be used (its archive, model description, variables, a RESULT.json or a
    hand-back of it); the message names the problem and the fix."""
