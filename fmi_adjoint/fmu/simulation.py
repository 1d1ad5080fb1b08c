"""Simulations of an FMU experiment as worker requests, and their outputs at the sample times.

Co-Simulation: every ``doStep`` over the communication grid in the worker; the outputs are
interpolated linearly from the grid to the sample times.  Inputs are set at the start of each
step; an FMU that declares ``canInterpolateInputs`` (FMI 2) also gets their derivatives there,
and one that provides intermediate update (FMI 3) gets them at its intermediate update points
(:func:`.me_run.run_interpolated_co_simulation`).  Model Exchange: the adaptive Radau IIA run
of :mod:`.me_run` in the worker, which hits every sample time and returns the outputs there
(left and right limits at events) and, when asked, their exact sensitivities.  Discrete
inputs (:func:`.variables.held_inputs`) are held between their samples under both
interfaces; under Model Exchange each change is a time event (:class:`.me_run.HeldInputs`),
and a sample at a change is the run's right limit there.

A request is plain data built here; a reply is turned into a :class:`RunOutputs` here, so
it does not matter which worker (a local one or one on a Dask cluster) answered it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from ..costs import Sampler
from ..errors import CompilerError, ConvergenceError
from .archive import FmuArchive
from .experiment import FmuExperiment, Tolerances, after_input_change
from .me_integration import ColumnUse
from .me_loop import CompiledLoop, PythonLoop
from .session import FmuSession
from .variables import held_inputs
from .worker import unpack

__all__ = ["FmuSimulator", "RunOutputs", "SensitivityRequest", "can_interpolate_inputs", "intermediate_inputs",
           "at_samples", "interpolates", "state_nominals"]


def can_interpolate_inputs(archive: FmuArchive) -> bool:
    """Whether the FMU's Co-Simulation interface takes inputs that vary within a step: FMI 2.0
    ``canInterpolateInputs="true"`` (``fmi2SetRealInputDerivatives``); FMI 3.0, which has no
    input derivatives for Co-Simulation, ``providesIntermediateUpdate="true"`` (the FMU calls
    the importer back inside ``fmi3DoStep``, and the inputs of :func:`intermediate_inputs` are
    set there)."""
    description = archive.description.coSimulation
    if not archive.co_simulation or description is None:
        return False
    if archive.fmi_version == 2:
        return bool(description.canInterpolateInputs)
    return bool(description.providesIntermediateUpdate)


def intermediate_inputs(archive: FmuArchive) -> frozenset[str]:
    """The inputs an FMI 3 FMU lets the importer set in Intermediate Update Mode
    (``intermediateUpdate="true"``, FMI 3.0 sec. 2.4.7.4; read from the XML: fmpy 0.3 does not
    keep the attribute); empty for FMI 2."""
    if archive.fmi_version != 3:
        return frozenset()
    variables = archive.root.find("ModelVariables")
    return frozenset(element.get("name") for element in ([] if variables is None else variables)
                     if element.get("causality") == "input" and element.get("intermediateUpdate") == "true")


def interpolates(archive: FmuArchive, inputs) -> bool:
    """Whether the Co-Simulation FMU takes the inputs named ``inputs`` varying within a step
    (:func:`can_interpolate_inputs`; under FMI 3 every one of them settable in its intermediate
    updates, :func:`intermediate_inputs`): the one rule of the importer and the SSP master."""
    if not can_interpolate_inputs(archive):
        return False
    return archive.fmi_version == 2 or set(inputs) <= intermediate_inputs(archive)


def state_nominals(archive: FmuArchive) -> np.ndarray:
    """Per state element the scale of its absolute tolerance: its nominal value (FMI: the magnitude
    at which a state's absolute error matters), 1 where none is declared."""
    return np.array([abs(state.nominal) if state.nominal else 1.0
                     for state, _, size in archive.continuous_states for _ in range(size)], dtype=float)


def at_samples(exp: FmuExperiment, right: np.ndarray, left_values: np.ndarray,
               right_values: np.ndarray) -> np.ndarray:
    """A run's values at the sample times of ``exp`` from those at its distinct sample times
    (``exp.stops()``, first axis): the right limit where ``right`` (per sample) says so, else the
    left (equal to the right but at an event)."""
    where = np.searchsorted(exp.stops()[0], np.asarray(exp.cost.sample_times, dtype=float))
    mask = np.asarray(right, dtype=bool).reshape((-1,) + (1,) * (np.ndim(left_values) - 1))
    return np.where(mask, right_values[where], left_values[where])


@dataclasses.dataclass(frozen=True)
class SensitivityRequest:
    """Which parameters to differentiate and how (the replays' steps, FMU columns to try)."""

    names: tuple[str, ...]
    steps: np.ndarray
    directional: tuple[bool, ...]
    probe_tolerance: float


@dataclasses.dataclass(frozen=True, eq=False)
class RunOutputs:
    """Outputs of one run at the experiment's sample times, and what the run reported.

    Attributes
    ----------
    Y : numpy.ndarray, shape (samples, channels)
    dY : numpy.ndarray, shape (samples, channels, parameters), optional
        Exact sensitivities (Model Exchange with a :class:`SensitivityRequest`).
    nodes : numpy.ndarray, optional
        The run's fixed node times (Model Exchange): a run given them as ``nodes`` steps
        exactly the same way (finite differences of the same discrete scheme).
    info : dict
        Steps, rejected steps, events, the parameter columns used.
    """

    Y: np.ndarray
    dY: np.ndarray | None = None
    nodes: np.ndarray | None = None
    info: Mapping = dataclasses.field(default_factory=dict)


class FmuSimulator:
    """Builds the requests of one interface of an FMU and reads their replies.

    Parameters
    ----------
    archive : FmuArchive
    interface : {"ModelExchange", "CoSimulation"}
    tolerances : Tolerances
        Model Exchange error control.
    sources : list of str
        Per state, where its Jacobian column comes from ("fmu" or "fd"); shared with the
        problem and updated from the replies (a refused FMU column turns to "fd" for good).
    """

    def __init__(self, archive: FmuArchive, interface: str, tolerances: Tolerances, sources: list[str]):
        self.archive, self.interface, self.tolerances = archive, interface, tolerances
        self.sources = sources
        #: Which loop takes a Model Exchange run's steps in the worker (:mod:`.me_loop`).
        self.loop: CompiledLoop | PythonLoop = CompiledLoop()
        #: Why the compiled loop is not used, if it cannot be (no C compiler).
        self.loop_note: str | None = None
        #: The FMU's directional derivatives over every Model Exchange run (issue 30, part 7).
        self.column_use = ColumnUse()
        self.state_nominals = state_nominals(archive)

    def _kernel(self) -> tuple[str, bytes] | None:
        """The compiled loop's library for the request (:mod:`.me_loop`); without a C compiler the
        Python loop, said once in :attr:`loop_note`."""
        try:
            return self.loop.kernel()
        except CompilerError as exc:
            self.loop_note = (f"the compiled Model Exchange loop is not available ({exc}); every step runs in Python "
                              "(the same results, several times slower)")
            self.loop = PythonLoop()
            return None

    def _start_values(self, session: FmuSession, values: Mapping[str, float]) -> tuple[list, list]:
        return session._start_values(values, {})

    def job(self, session: FmuSession, exp: FmuExperiment, values: Mapping[str, float], *,
            sensitivity: SensitivityRequest | None = None, nodes: np.ndarray | None = None,
            tolerances: Tolerances | None = None) -> tuple[str, tuple]:
        """The request that simulates ``exp`` with parameter ``values``."""
        exp = self.with_held_inputs(exp)
        interpolated = self.interpolates_inputs(exp)
        if self.interface == "CoSimulation" and not interpolated:
            inputs = exp.input_values if exp.inputs is not None else None
            return session.cs_job(values, exp.grid(), exp.cost.channels, inputs)
        tol = tolerances or self.tolerances
        refs, vals = self._start_values(session, values)
        stops, right = exp.stops()
        names = list(exp.inputs.columns) if exp.inputs is not None else []
        continuous = [k for k, name in enumerate(names) if name not in exp.held]
        held = [k for k, name in enumerate(names) if name in exp.held]
        table = exp.inputs.values if exp.inputs is not None else np.zeros((1, 0))
        times = exp.inputs.times if exp.inputs is not None else np.zeros(1)
        request = {
            "refs": refs, "values": vals, "t0": 0.0, "t_end": float(exp.t_end), "stops": stops,
            "event_stops": exp.event_stops(),
            "outputs": session.refs(exp.cost.channels), "input_refs": session.refs([names[k] for k in continuous]),
            "input_times": times, "input_table": table[:, continuous],
            # Discrete inputs: held, set in Event Mode at each change (:mod:`.me_run`).
            "held_refs": session.refs([names[k] for k in held]), "held_table": table[:, held],
            "held_changes": exp.held_changes(),
        }
        if interpolated:  # Co-Simulation with input derivatives (:func:`.me_run.run_interpolated_co_simulation`)
            request.update({"interface": "CoSimulation", "stops": exp.grid(), "event_stops": np.zeros(0),
                            "sources": []})
            return "run_me_adaptive", (request,)
        request.update({
            "sources": list(self.sources), "rtol": tol.rtol, "atol": tol.atol * self.state_nominals,
            "max_step": tol.max_step,
            "nodes": nodes, "kernel": self._kernel(),
        })
        if sensitivity is not None:
            # Each replay's complete start values (the parameter moved by ±δ): whatever its type
            # or array, the worker sets them as it sets any start values.
            replays = []
            for name, step in zip(sensitivity.names, sensitivity.steps):
                for sign in (1.0, -1.0):
                    replays.append(self._start_values(session, {**values, name: values[name] + sign * float(step)}))
            param_refs = session.refs(list(sensitivity.names))
            request["sensitivity"] = {
                "replays": replays, "steps": [float(d) for d in sensitivity.steps],
                # FMU columns only for real scalars (a directional derivative addresses a whole variable)
                "param_refs": [r if isinstance(r, int) else -1 for r in param_refs],
                # ... and only for parameters: a state's start value (x0, initial="exact") is a
                # known of the FMU only as the state itself, whose column is df/dx, not df/dx0.
                "directional": [d and isinstance(r, int) and self.archive.variables[n].causality == "parameter"
                                if n in self.archive.variables else False
                                for d, r, n in zip(sensitivity.directional, param_refs, sensitivity.names)],
                "probe_tolerance": sensitivity.probe_tolerance}
        return "run_me_adaptive", (request,)

    def interpolates_inputs(self, exp: FmuExperiment) -> bool:
        """Whether a Co-Simulation run of ``exp`` varies its inputs within a step
        (:func:`can_interpolate_inputs`): ``exp`` has continuous inputs, and under FMI 3 the FMU
        lets every one of them be set in its intermediate updates."""
        if self.interface != "CoSimulation" or exp.inputs is None:
            return False
        continuous = [name for name in exp.inputs.columns if name not in exp.held]
        return bool(continuous) and interpolates(self.archive, continuous)

    def with_held_inputs(self, exp: FmuExperiment) -> FmuExperiment:
        """``exp`` with :attr:`~.experiment.FmuExperiment.held` naming its discrete inputs."""
        if exp.inputs is None:
            return exp
        held = held_inputs(self.archive, exp.inputs.columns)
        return exp if held == exp.held else dataclasses.replace(exp, held=held)

    def finish(self, exp: FmuExperiment, reply) -> RunOutputs:
        """The outputs at the sample times from the reply to :meth:`job`."""
        if self.interface == "CoSimulation":
            grid = exp.grid()
            Y = self._finite(unpack(reply["left"]) if isinstance(reply, dict) else np.asarray(reply), grid, exp)
            return RunOutputs(Y=Sampler.from_grid(grid, exp.cost.sample_times).sample(Y))
        self.sources[:] = ["fd" if "fd" in pair else "fmu" for pair in zip(self.sources, reply["sources"])]
        self.column_use.add(reply)
        right = exp.stops()[1] | after_input_change(exp.cost.sample_times, self.with_held_inputs(exp).held_changes())
        Y = at_samples(exp, right, unpack(reply["left"]), unpack(reply["right"]))
        self._finite(Y, np.asarray(exp.cost.sample_times, dtype=float), exp)
        dY = None
        if "dleft" in reply:
            dY = at_samples(exp, right, unpack(reply["dleft"]), unpack(reply["dright"]))
        info = {key: reply[key] for key in ("steps", "rejected", "events", "rhs_evaluations", "columns",
                                            "directional", "sensitivities_unavailable") if key in reply}
        return RunOutputs(Y=Y, dY=dY, nodes=unpack(reply["nodes"]), info=info)

    def _finite(self, Y: np.ndarray, times: np.ndarray, exp: FmuExperiment) -> np.ndarray:
        """``Y`` if finite, else a ConvergenceError naming the output and time (the optimizer steps back)."""
        bad = np.argwhere(~np.isfinite(Y))
        if bad.size:
            k, c = bad[0]
            raise ConvergenceError(f"{self.archive.path.name}: output {exp.cost.channels[c]!r} is not finite at "
                                   f"t = {times[k]:g} s; check the parameter values.")
        return Y
