"""One reusable fmpy instance of an FMU: set parameters, initialize, step or evaluate.

fmpy is the only FMI runtime.  An instance is created once and reset between runs
(``fmi2Reset`` / ``fmi3Reset``) instead of extracting and instantiating the FMU again for
every evaluation.  At every start all real parameters are set to their start values from
the model description, overridden by the caller's values, as an importer should; fixed
parameters are therefore handled exactly like tunable ones, before initialization.

Every failing FMI call becomes one :class:`~fmi_adjoint.fmu.archive.FmuError` naming the
function and the FMU.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .archive import FmuArchive, FmuError

__all__ = ["FmuSession", "INTERFACES"]

INTERFACES = ("ModelExchange", "CoSimulation")


class FmuSession:
    """A live instance of the FMU of ``archive`` for one interface.

    Parameters
    ----------
    archive : FmuArchive
    interface : {"ModelExchange", "CoSimulation"}
    """

    def __init__(self, archive: FmuArchive, interface: str):
        if interface not in INTERFACES:
            raise FmuError(f"interface {interface!r} is not one of {', '.join(INTERFACES)}.")
        available = archive.model_exchange if interface == "ModelExchange" else archive.co_simulation
        if not available:
            raise FmuError(f"{archive.path.name}: the FMU has no {interface} interface with a binary for this platform.")
        self.archive = archive
        self.interface = interface
        self.fmi3 = archive.fmi_version == 3
        from fmpy import instantiate_fmu

        try:
            self.fmu = instantiate_fmu(str(archive.directory), archive.description, fmi_type=interface)
        except Exception as exc:  # fmpy: bare Exception or OSError from the loader
            raise FmuError(f"{archive.path.name}: cannot instantiate the {interface} FMU ({exc}).") from None
        self._used = self._terminated = False
        self.next_event_time: float | None = None
        self._params = [v for v in archive.variables.values()
                        if v.causality == "parameter" and v.variability in ("fixed", "tunable") and v.is_real]
        description = archive.description
        self.state_refs = [int(d.variable.derivative.valueReference) for d in description.derivatives]
        self.derivative_refs = [int(d.variable.valueReference) for d in description.derivatives]
        self.n_states = len(self.state_refs)

    # -- low-level calls ---------------------------------------------------------------
    def _call(self, what: str, function: Callable, *args):
        try:
            return function(*args)
        except Exception as exc:  # fmpy raises FMICallException / OSError
            raise FmuError(
                f"{self.archive.path.name}: {what} failed ({exc}); check the parameter values and inputs, "
                "or the FMU's log (the FMU reported an error)."
            ) from None

    def set_real(self, refs: Sequence[int], values: Sequence[float]) -> None:
        """Set real variables by value reference."""
        if len(refs):
            setter = self.fmu.setFloat64 if self.fmi3 else self.fmu.setReal
            self._call("setting real values", setter, list(refs), [float(v) for v in values])

    def get_real(self, refs: Sequence[int]) -> np.ndarray:
        """Real variables by value reference."""
        if not len(refs):
            return np.zeros(0)
        getter = self.fmu.getFloat64 if self.fmi3 else self.fmu.getReal
        return np.asarray(self._call("getting real values", getter, list(refs)), dtype=float)

    def refs(self, names: Sequence[str]) -> list[int]:
        """Value references of variables given by name."""
        return [self.archive.variable(n).valueReference for n in names]

    # -- runs --------------------------------------------------------------------------
    def start(self, values: Mapping[str, float], inputs: Mapping[str, float], t0: float, t_end: float) -> None:
        """Reset (after a previous run), set parameters and inputs, and initialize at ``t0``.

        Model Exchange instances end in continuous-time mode after the event iteration.
        """
        fmu = self.fmu
        if self._used:
            self._call("fmiReset", fmu.reset)
        self._used, self._terminated = True, False
        if not self.fmi3:
            self._call("fmi2SetupExperiment", fmu.setupExperiment, None, t0, t_end)
        # Parameters and input start values may be set in the instantiated state.
        refs, vals = [], []
        for v in self._params:
            value = values.get(v.name, v.start)
            if value is not None:
                refs.append(v.valueReference)
                vals.append(value)
        for name, value in inputs.items():
            refs.append(self.archive.variables[name].valueReference)
            vals.append(value)
        self.set_real(refs, vals)
        if self.fmi3:
            self._call("fmi3EnterInitializationMode", fmu.enterInitializationMode, None, t0, t_end)
        else:
            self._call("fmi2EnterInitializationMode", fmu.enterInitializationMode)
        self._call("exiting initialization mode", fmu.exitInitializationMode)
        if self.interface == "ModelExchange":
            self._event_iteration()
            self._call("entering continuous-time mode", fmu.enterContinuousTimeMode)

    def _event_iteration(self) -> None:
        for _ in range(1000):
            # fmpy returns (discrete states need update, terminate, nominals changed, values
            # changed, next event time defined, next event time) for FMI 2 and 3 alike.
            update = self.fmu.updateDiscreteStates if self.fmi3 else self.fmu.newDiscreteStates
            info = self._call("the event iteration", update)
            if info[1]:
                raise FmuError(f"{self.archive.path.name}: the FMU asked to terminate during initialization.")
            self.next_event_time = float(info[5]) if info[4] else None
            if not info[0]:
                return
        raise FmuError(f"{self.archive.path.name}: the event iteration at initialization did not settle.")

    def run_cs(
        self,
        values: Mapping[str, float],
        grid: np.ndarray,
        outputs: Sequence[str],
        inputs: Callable[[float], dict[str, float]] | None = None,
    ) -> np.ndarray:
        """Co-simulation over the communication points ``grid``; outputs at every point.

        Inputs are set at the start of each communication step (their value there).
        """
        refs = self.refs(outputs)
        u0 = inputs(float(grid[0])) if inputs else {}
        self.start(values, u0, float(grid[0]), float(grid[-1]))
        out = np.empty((grid.size, len(refs)))
        out[0] = self.get_real(refs)
        input_refs = self.refs(list(u0)) if u0 else []
        for k in range(grid.size - 1):
            t, h = float(grid[k]), float(grid[k + 1] - grid[k])
            if inputs and k > 0:
                self.set_real(input_refs, list(inputs(t).values()))
            if self.fmi3:
                result = self._call(f"fmi3DoStep at t = {t:g} s", self.fmu.doStep, t, h)
                if result and len(result) > 1 and result[1]:  # terminateSimulation
                    raise FmuError(f"{self.archive.path.name}: the FMU asked to terminate at t = {t:g} s.")
            else:
                self._call(f"fmi2DoStep at t = {t:g} s", self.fmu.doStep, t, h)
            out[k + 1] = self.get_real(refs)
        self._call("terminating", self.fmu.terminate)
        self._terminated = True
        return out

    # -- Model Exchange evaluation -------------------------------------------------------
    def initial_states(self) -> np.ndarray:
        """Continuous states after initialization."""
        buffer = (ctypes.c_double * self.n_states)()
        self._call("getting the continuous states", self.fmu.getContinuousStates, buffer, self.n_states)
        return np.array(buffer[:], dtype=float)

    def set_point(self, t: float, x: np.ndarray, input_refs: Sequence[int] = (), u: Sequence[float] = ()) -> None:
        """Set time, states and inputs of a Model Exchange instance."""
        self._call("setting the time", self.fmu.setTime, float(t))
        states = (ctypes.c_double * self.n_states)(*map(float, x))
        self._call("setting the continuous states", self.fmu.setContinuousStates, states, self.n_states)
        self.set_real(input_refs, u)

    def derivatives(self) -> np.ndarray:
        """State derivatives at the current point."""
        buffer = (ctypes.c_double * self.n_states)()
        getter = self.fmu.getContinuousStateDerivatives if self.fmi3 else self.fmu.getDerivatives
        self._call("getting the state derivatives", getter, buffer, self.n_states)
        return np.array(buffer[:], dtype=float)

    def directional(self, unknowns: Sequence[int], known: int, seed: float = 1.0) -> np.ndarray:
        """Directional derivative of ``unknowns`` with respect to one known (a Jacobian column).

        Raises FmuError if the FMU refuses (e.g. a parameter as known in FMI 2).
        """
        # fmpy's FMI 2 and FMI 3 wrappers take (unknowns, knowns, seed) alike.
        values = self._call("fmiGetDirectionalDerivative", self.fmu.getDirectionalDerivative,
                            list(unknowns), [known], [seed])
        return np.asarray(values, dtype=float)

    def completed_step(self, t: float) -> None:
        """Report an accepted integrator step; an FMU that needs an event there is refused."""
        enter_event, terminate = self._call("fmiCompletedIntegratorStep", self.fmu.completedIntegratorStep)
        if enter_event or terminate:
            raise FmuError(
                f"{self.archive.path.name}: the FMU requests an event at t = {t:g} s; the project's integrator "
                "handles no events. Use a Co-Simulation interface of the FMU."
            )

    def close(self) -> None:
        """Free the instance."""
        if self._used and not self._terminated:
            with contextlib.suppress(Exception):
                self.fmu.terminate()
        with contextlib.suppress(Exception):
            self.fmu.freeInstance()
