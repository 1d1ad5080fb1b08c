"""Export a model as a standalone FMI 2.0 or FMI 3.0 FMU for Co-Simulation and Model Exchange.

The FMU runs the C engine (``native/runtime/fa_engine.c``, HHT or generalized-alpha) on the model's generated C code
(:mod:`fmi_adjoint.native.model_code`); no Python is needed on the target.  Contents::

    modelDescription.xml        written with lxml, validated against fmpy's FMI schema
    sources/                    model.c/.h, the runtime, the FMI API layer, fmu_config.h
                                (and buildDescription.xml for FMI 3): everything to rebuild;
                                a model with a matrix stored sparse adds the solver
                                (fa_sparse.cpp/.h), the Eigen headers it includes (Eigen/...)
                                and Eigen's licence (LICENSE-MPL-2.0.txt)
    binaries/linux64/ or binaries/x86_64-linux/<modelIdentifier>.so
    resources/model.toml        the model file; resources/export.json the export settings;
                                the files it reads (Matrix Market files of structured terms,
                                table_load CSVs), at the names the model file gives them

A measured input (an ``[inputs]`` entry with ``file`` and ``channel``, issue 26 part 7) is an
experiment's excitation, not part of the FMU: the export leaves it out
(:func:`without_measured_inputs`) and the FMU exposes the input as an input, for the importer
to drive.  ``resources/model.toml`` is then the model file without the two keys (so the
import's trust check rebuilds the very binary without the data file), ``export.json`` lists
what was left out (``measured_inputs_left_out``: input, file, channel) and the data file is
not carried.

Value references (``fa_fmu_common.h``)::

    0                              time (FMI 3 only)
    1 + k                          parameter or input k (model order), k < n_p
    1 + n_p + j                    output j, j < n_y
    1 + n_p + n_y + i              position q_i of coordinate i ("q.<name>"), i < n
    1 + n_p + n_y + n + i          velocity v_i ("v.<name>")
    1 + n_p + n_y + 2 n + k        Lagrange multiplier lambda_k of constraint row k ("lambda.<row>"), k < m

With Model Exchange (``--interface me``, or ``both``: the default, one binary for both)
the positions and velocities are the continuous states x = (q, v) (``fmi/fa_fmu_me.c``), and::

    1 + n_p + n_y + 2 n + m + i    acceleration der(v_i) ("der(v.<name>)")
    1 + n_p + n_y + 3 n + m        the drift tolerance ("me.drift_tolerance", :data:`DRIFT_TOLERANCE`), m > 0

The drift tolerance is a tunable real parameter (start ``FA_ME_DRIFT_TOLERANCE`` of
``fmi/fa_fmu_me.h``, min ``FA_ME_DRIFT_TOLERANCE_MIN``, unit "1"): after an integrator step
whose constraint violation exceeds it (``max|C(q)| > tol (1 + max|q|)`` or
``max|C_q v + C_t| > tol (1 + max|v|)``), ``CompletedIntegratorStep`` asks for Event Mode,
where q and v are projected back onto the constraints.  Its name holds a dot, which no model
name can (model names are identifiers, :mod:`fmi_adjoint.text`), and starts with none of the
exposed prefixes (``q.``, ``v.``, ``lambda.``, ``der(``): it cannot collide with a model's own
variable.  ``variableNamingConvention="flat"`` makes the dot an ordinary character of the name
(under "structured" it would denote a member of a record ``me``).  Listed only with Model
Exchange and only for a model with constraints (without, nothing drifts); in an FMU with both
interfaces a Co-Simulation instance takes it (range-checked) and returns it without effect: the
index-3 integrator holds the constraints itself.

``<ModelStructure>`` declares the exact structural dependencies of the derivatives and outputs
on the states and inputs (:mod:`fmi_adjoint.export.structure`); directional derivatives (FMI 2
and 3) and adjoint derivatives (FMI 3) are served by Model Exchange instances, and their FMU
states (``canGetAndSetFMUstate``, serializable) hold the core's time, states and parameters.  A model with a
coordinate that has neither mass nor a constraint (massless Maxwell nodes) cannot run as Model
Exchange: ``me`` refuses it by name, ``both`` exports Co-Simulation only.

The coordinates, velocities and multipliers are local continuous variables (read only):
toolchains can plot the model's state; their units are the coordinates' (m or rad, m/s or
rad/s; multipliers carry none, their unit depends on the constraint's scaling).  Units
the model declares get a ``BaseUnit`` where their SI decomposition is known
(:func:`si_decomposition`).

Parameters are tunable between communication steps.  Communication steps may have any
length (``fa_fmu_do_step`` in ``fa_fmu_common.c``): one between two points of the grid
``t0 + i h`` takes the grid steps (the in-process engine's run bit for bit), any other is
divided into ``max(1, round(step / h))`` equal internal steps that land on its end (from a
grid point to an uneven end: the in-process engine's uneven last step), so that a constant
communication step gives a constant internal step and the results converge with the
integrator's order as the communication step shrinks.

Inputs are held over a communication step, or, in FMI 2 after
``fmi2SetRealInputDerivatives`` (order 1; ``canInterpolateInputs``), vary linearly inside it:
``u(t) = u(t_c) + du/dt (t - t_c)`` at the end of every internal step, until the next
``fmi2SetReal`` of the input.  FMI 3 has no input-derivative function for Co-Simulation; an
FMI 3 Co-Simulation FMU with inputs declares ``providesIntermediateUpdate`` and its inputs
``intermediateUpdate``: an importer that passes an ``intermediateUpdate`` callback to
``fmi3InstantiateCoSimulation`` is called back before every internal step with the step's end
time and ``intermediateVariableSetRequested``, and sets the inputs at that time in Intermediate
Update Mode (FMI 3.0, sec. 4.2.3); without the callback the inputs are held.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import re
import shutil
import tempfile
import tomllib
import uuid
import zipfile
from pathlib import Path
from typing import NamedTuple

from lxml import etree

from ..cache import BuildCache, CacheError, compiler_fingerprint, fingerprint
from ..compiled import Derivation
from ..errors import FmiAdjointError, ModelError
from ..files import atomic_output, check_writable
from ..integrate.schemes import AbstractScheme, scheme_from_record, scheme_from_settings
from ..model import Model
from ..model_file import ModelSource, data_files
from ..text import c_string_literal
from ..toolchain import compile_shared
from ..native import ENGINE_RUNTIME, find_c_compiler, model_c_sources, write_sources
from ..native.model_header import uses_sparse_solver
from ..native.solver import FMU_LINK_FLAGS, LICENSE_FILE, SOLVER_SOURCES, SparseSolver, sparse_solver
from ..sparsity import MatrixStorage, forced_storage, storage_named, storage_override
from ..structured import QuadraticConstraints
from .structure import MeStructure, generated_patterns, me_structure, unsupported_coordinates

#: The FMI 2/3 API layer of exported FMUs (compiled only into FMUs, never in-process).
FMI_LAYER_DIR = Path(__file__).resolve().parent / "fmi"

__all__ = ["DEFAULT_INTERFACE", "DRIFT_TOLERANCE", "DriftTolerance", "ExportError", "FMI_LAYER_DIR", "FMI_VERSIONS",
           "INTERFACES", "build_description", "build_fmu_binary", "expected_description", "export_fmu",
           "export_scheme", "export_storage", "instantiation_token", "si_decomposition", "validate_against_schema",
           "without_measured_inputs"]

FMI_VERSIONS = (2, 3)
#: ``export --interface``: Co-Simulation, Model Exchange, or both in one FMU.
INTERFACES = ("cs", "me", "both")
#: The default interface (issue 30, part 1): both in one FMU, one binary for both; Co-Simulation
#: only, with a note, for a model Model Exchange refuses (:func:`me_refusal`).
DEFAULT_INTERFACE = "both"
_VERSION = "0.1.0"


def _me_header_constant(name: str) -> str:
    """The value of ``#define <name> <value>`` in ``fmi/fa_fmu_me.h`` (one source for C and XML)."""
    match = re.search(rf"^#define {name} (\S+)$", (FMI_LAYER_DIR / "fa_fmu_me.h").read_text(encoding="utf-8"), re.M)
    if match is None:
        raise ExportError(f"{name} is missing from {FMI_LAYER_DIR / 'fa_fmu_me.h'}; reinstall fmi-adjoint.")
    return match.group(1)


class DriftTolerance(NamedTuple):
    """The Model Exchange drift tolerance as a variable (module docstring)."""

    name: str
    start: float
    min: float
    unit: str


#: The drift tolerance of Model Exchange: start and min as the C core defines them
#: (``FA_ME_DRIFT_TOLERANCE``, ``FA_ME_DRIFT_TOLERANCE_MIN``).
DRIFT_TOLERANCE = DriftTolerance("me.drift_tolerance", float(_me_header_constant("FA_ME_DRIFT_TOLERANCE")),
                                 float(_me_header_constant("FA_ME_DRIFT_TOLERANCE_MIN")), "1")


class ExportError(FmiAdjointError, RuntimeError):
    """The FMU could not be produced (the message says why and what to do)."""


def _fmpy_dir() -> Path:
    import fmpy

    return Path(fmpy.__file__).resolve().parent


def _identifier(name: str) -> str:
    # Model names are already ASCII identifiers (fmi_adjoint.text); this keeps the rule local.
    ident = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return ident if ident and not ident[0].isdigit() else f"fmu_{ident}"


def _sub(parent, tag: str, **attrs) -> etree._Element:
    return etree.SubElement(parent, tag, {k: str(v) for k, v in attrs.items() if v is not None and v != ""})


def _units(model: Model, me: bool = False) -> list[str]:
    units = [p.unit for p in model.all_parameters] + [o.unit for o in model.outputs]
    units += [unit for c in model.all_coordinates for unit in (c.unit, f"{c.unit}/s")]
    if me:
        units += [f"{c.unit}/s^2" for c in model.all_coordinates if c.unit]
        units += [DRIFT_TOLERANCE.unit] if _multiplier_names(model) else []
    return sorted({u for u in units if u})


#: SI base-unit exponents (kg, m, s, A, K, mol, cd, rad) and factor of the unit symbols
#: :func:`si_decomposition` knows; "Nm", "Ns", "Nms" are the products written without a space.
_SI_SYMBOLS: dict[str, tuple[dict[str, int], float]] = {
    "kg": ({"kg": 1}, 1.0), "m": ({"m": 1}, 1.0), "s": ({"s": 1}, 1.0), "A": ({"A": 1}, 1.0),
    "K": ({"K": 1}, 1.0), "mol": ({"mol": 1}, 1.0), "cd": ({"cd": 1}, 1.0), "rad": ({"rad": 1}, 1.0),
    "N": ({"kg": 1, "m": 1, "s": -2}, 1.0), "Pa": ({"kg": 1, "m": -1, "s": -2}, 1.0),
    "J": ({"kg": 1, "m": 2, "s": -2}, 1.0), "W": ({"kg": 1, "m": 2, "s": -3}, 1.0),
    "Hz": ({"s": -1}, 1.0), "rpm": ({"rad": 1, "s": -1}, math.pi / 30.0), "1": ({}, 1.0),
}
_SI_PRODUCTS = {"Nm": ("N", "m"), "Ns": ("N", "s"), "Nms": ("N", "m", "s")}
_SI_FACTOR = re.compile(r"([A-Za-z]+|1)(?:\^(-?[0-9]+))?")


def si_decomposition(unit: str) -> dict[str, float] | None:
    """The ``BaseUnit`` attributes of ``unit`` (FMI 2.0 Sec. 2.2.2, FMI 3.0 Sec. 2.4.3:
    exponents of kg, m, s, A, K, mol, cd, rad and the ``factor`` to SI), or None when the
    unit is not a product of known symbols.

    The grammar: factors separated by spaces or ``*``, each a symbol of :data:`_SI_SYMBOLS`
    with an optional integer power ``^k``, and at most one ``/`` whose right-hand factors
    are divided (``N*s/m``, ``kg m^2``, ``Ns^3/m^3``, ``1/s``).  In ``Nm^2`` (a product
    written without a space) the power belongs to the last symbol, as it reads.
    """
    parts = unit.split("/")
    if len(parts) > 2 or not all(part.strip() for part in parts):
        return None
    exponents: dict[str, int] = {}
    factor = 1.0
    for sign, part in zip((1, -1), parts):
        for token in part.replace("*", " ").split():
            match = _SI_FACTOR.fullmatch(token)
            if match is None:
                return None
            symbols = _SI_PRODUCTS.get(match.group(1), (match.group(1),))
            power = int(match.group(2) or 1)
            for position, symbol in enumerate(symbols):
                if symbol not in _SI_SYMBOLS:
                    return None
                base, scale = _SI_SYMBOLS[symbol]
                k = sign * (power if position == len(symbols) - 1 else 1)
                factor *= scale**k
                for name, e in base.items():
                    exponents[name] = exponents.get(name, 0) + e * k
    attributes: dict[str, float] = {name: e for name, e in exponents.items() if e}
    if factor != 1.0:
        attributes["factor"] = factor
    return attributes


def _multiplier_names(model: Model) -> list[str]:
    """The constraint rows in the order of the multipliers (model.py: constraints, drives of
    prescribed coordinates, rows of quadratic constraints)."""
    return ([c.name for c in model.constraints] + [f"drive_{m.coordinate}" for m in model.prescribed]
            + [r for item in model.matrix_terms if isinstance(item, QuadraticConstraints) for r in item.row_names()])


def _exposed_states(model: Model) -> list[tuple[str, str, str]]:
    """(name, unit, description) of the local variables after the outputs: q, v, lambda."""
    coordinates = model.all_coordinates
    return ([(f"q.{c.name}", c.unit, f"position of coordinate {c.name}") for c in coordinates]
            + [(f"v.{c.name}", f"{c.unit}/s", f"velocity of coordinate {c.name}") for c in coordinates]
            + [(f"lambda.{row}", "", f"Lagrange multiplier of constraint {row}") for row in _multiplier_names(model)])


def _model_description(model: Model, version: int, identifier: str, token: str, step: float, sources: list[str],
                       me: MeStructure | None = None, co_simulation: bool = True):
    """The model description; ``me``: Model Exchange with these dependencies, ``co_simulation``
    (with ``me`` only): Co-Simulation too."""
    params = model.all_parameters
    n_p = len(params)
    root = etree.Element("fmiModelDescription")
    attrs = {
        "fmiVersion": "2.0" if version == 2 else "3.0",
        "modelName": model.name,
        ("guid" if version == 2 else "instantiationToken"): token,
        "description": model.description,
        "generationTool": f"fmi-adjoint {_VERSION}",
        "generationDateAndTime": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "variableNamingConvention": "flat",
    }
    if version == 2:
        attrs["numberOfEventIndicators"] = "0"
    for key, value in attrs.items():
        if value:
            root.set(key, value)
    if me is not None:
        exchange = _sub(root, "ModelExchange", modelIdentifier=identifier)
        if version == 2:
            exchange.set("canGetAndSetFMUstate", "true")  # fa_fmu_get_state: with the core's t, x and p
            exchange.set("canSerializeFMUstate", "true")
            exchange.set("providesDirectionalDerivative", "true")
            _sub_files(exchange, sources)
        else:
            exchange.set("needsCompletedIntegratorStep", "true")
            exchange.set("canGetAndSetFMUState", "true")
            exchange.set("canSerializeFMUState", "true")
            exchange.set("providesDirectionalDerivatives", "true")
            exchange.set("providesAdjointDerivatives", "true")
    if co_simulation or me is None:
        _co_simulation(root, model, version, identifier, step, sources)
    units = _units(model, me is not None)
    if units:
        definitions = _sub(root, "UnitDefinitions")
        for unit in units:
            element = _sub(definitions, "Unit", name=unit)
            base = si_decomposition(unit)
            if base is not None:
                _sub(element, "BaseUnit", **{key: value if key == "factor" else int(value)
                                             for key, value in base.items()})
    categories = _sub(root, "LogCategories")
    _sub(categories, "Category", name="logEvents", description="information and warnings")
    _sub(categories, "Category", name="logStatusError", description="errors")
    # The default experiment must be runnable: its stop time is a whole number of steps.
    stop = max(1, round(model.simulation.t_end / step)) * step
    _sub(root, "DefaultExperiment", startTime="0.0", stopTime=repr(stop), stepSize=repr(step))
    variables = _sub(root, "ModelVariables")
    output_refs = []
    if version == 3:
        _sub(variables, "Float64", name="time", valueReference=0, causality="independent", variability="continuous",
             description="simulation time")
    for k, par in enumerate(params):
        causality = par.causality
        variability = "tunable" if causality == "parameter" else "continuous"
        # The model's bounds travel as min/max, so an importer (and identification through the
        # binary) works in the same box as the model file (finite bounds only).
        lo, hi = getattr(par, "bounds", (-math.inf, math.inf))
        limits = {"min": repr(float(lo)) if math.isfinite(lo) else None,
                  "max": repr(float(hi)) if math.isfinite(hi) else None}
        if version == 2:
            var = _sub(variables, "ScalarVariable", name=par.name, valueReference=1 + k, causality=causality,
                       variability=variability, description=par.description)
            _sub(var, "Real", start=repr(float(par.value)), unit=par.unit or None, **limits)
        else:
            # An input may be set in Intermediate Update Mode (fmi3DoStep calls the importer back).
            _sub(variables, "Float64", name=par.name, valueReference=1 + k, causality=causality,
                 variability=variability, description=par.description, start=repr(float(par.value)),
                 unit=par.unit or None, **limits,
                 intermediateUpdate="true" if causality == "input" and (co_simulation or me is None) else None)
    for j, out in enumerate(model.outputs):
        vr = 1 + n_p + j
        if version == 2:
            var = _sub(variables, "ScalarVariable", name=out.name, valueReference=vr, causality="output",
                       variability="continuous", initial="calculated", description=out.description)
            _sub(var, "Real", unit=out.unit or None)
            output_refs.append(n_p + j + 1)  # FMI 2 indexes ScalarVariables from 1
        else:
            _sub(variables, "Float64", name=out.name, valueReference=vr, causality="output",
                 variability="continuous", initial="calculated", description=out.description, unit=out.unit or None)
            output_refs.append(vr)
    first = 1 + n_p + len(model.outputs)
    names = {par.name for par in params} | {out.name for out in model.outputs}
    if me is not None and _multiplier_names(model):
        names.add(DRIFT_TOLERANCE.name)
    for i, (name, unit, description) in enumerate(_exposed_states(model)):
        if name in names:
            raise ExportError(f"model '{model.name}': the exposed variable '{name}' is named twice; rename the "
                              "coordinate or constraint.")
        names.add(name)
        if version == 2:
            var = _sub(variables, "ScalarVariable", name=name, valueReference=first + i, causality="local",
                       variability="continuous", initial="calculated", description=description)
            _sub(var, "Real", unit=unit or None)
        else:
            _sub(variables, "Float64", name=name, valueReference=first + i, causality="local",
                 variability="continuous", initial="calculated", description=description, unit=unit or None)
    if me is not None:
        _me_variables(model, version, variables, first, first + len(_exposed_states(model)))
        _me_structure(model, version, _sub(root, "ModelStructure"), me, output_refs, first)
        return root
    structure = _sub(root, "ModelStructure")
    if version == 2:
        outputs = _sub(structure, "Outputs")
        for index in output_refs:
            _sub(outputs, "Unknown", index=index)
        initial = _sub(structure, "InitialUnknowns")
        for index in output_refs:
            _sub(initial, "Unknown", index=index)
    else:
        for vr in output_refs:
            _sub(structure, "Output", valueReference=vr)
        for vr in output_refs:
            _sub(structure, "InitialUnknown", valueReference=vr)
    return root


def _co_simulation(root, model: Model, version: int, identifier: str, step: float, sources: list[str]) -> None:
    cs = _sub(root, "CoSimulation", modelIdentifier=identifier, canHandleVariableCommunicationStepSize="true")
    if version == 2:
        if any(par.causality == "input" for par in model.all_parameters):  # fmi2SetRealInputDerivatives, order 1
            cs.set("canInterpolateInputs", "true")
        cs.set("canGetAndSetFMUstate", "true")
        cs.set("canSerializeFMUstate", "true")
        _sub_files(cs, sources)
    else:
        cs.set("canGetAndSetFMUState", "true")
        cs.set("canSerializeFMUState", "true")
        cs.set("fixedInternalStepSize", repr(step))
        if any(par.causality == "input" for par in model.all_parameters):  # the inputs' intermediate update
            cs.set("providesIntermediateUpdate", "true")


def _sub_files(parent, sources: list[str]) -> None:
    files = _sub(parent, "SourceFiles")
    for name in sources:
        _sub(files, "File", name=name)


def _me_variables(model: Model, version: int, variables, first: int, first_a: int) -> None:
    """Model Exchange: v.<c> is the derivative of q.<c>, and der(v.<c>) (vr ``FA_VR_A + i``,
    ``fa_fmu_common.h``) the derivative of v.<c> (FMI 2.0 Sec. 2.2.7, FMI 3.0 Sec. 2.4.7.4);
    then, for a model with constraints, the drift tolerance (vr ``FA_VR_DRIFT_TOLERANCE``), a
    tunable parameter (initial exact: FMI 2.0 Sec. 2.2.7 Table, FMI 3.0 Sec. 2.4.7.4), which no
    derivative or output depends on (nothing in ``<ModelStructure>``)."""
    coordinates = model.all_coordinates
    n = len(coordinates)
    elements = list(variables)
    offset = 1 if version == 3 else 0  # the time variable
    for i in range(n):
        v = elements[offset + first - 1 + n + i]
        (v.find("Real") if version == 2 else v).set("derivative", str(first + i))
    for i, c in enumerate(coordinates):
        name, unit = f"der(v.{c.name})", f"{c.unit}/s^2" if c.unit else None
        description = f"acceleration of coordinate {c.name}"
        if version == 2:
            var = _sub(variables, "ScalarVariable", name=name, valueReference=first_a + i, causality="local",
                       variability="continuous", initial="calculated", description=description)
            _sub(var, "Real", unit=unit, derivative=first + n + i)
        else:
            _sub(variables, "Float64", name=name, valueReference=first_a + i, causality="local",
                 variability="continuous", initial="calculated", description=description, unit=unit,
                 derivative=first + n + i)
    if not _multiplier_names(model):
        return
    tolerance = {"start": repr(DRIFT_TOLERANCE.start), "min": repr(DRIFT_TOLERANCE.min),
                 "unit": DRIFT_TOLERANCE.unit}
    common = {"name": DRIFT_TOLERANCE.name, "valueReference": first_a + n, "causality": "parameter",
              "variability": "tunable", "description": _DRIFT_DESCRIPTION}
    if version == 2:
        _sub(_sub(variables, "ScalarVariable", **common), "Real", **tolerance)
    else:
        _sub(variables, "Float64", **common, **tolerance)


_DRIFT_DESCRIPTION = ("Model Exchange: relative tolerance of the constraint drift; after an integrator step with "
                      "max|C(q)| > tol (1 + max|q|) or max|C_q v + C_t| > tol (1 + max|v|) the FMU asks for Event "
                      "Mode and projects q and v onto the constraints (no effect under Co-Simulation)")


def _me_structure(model: Model, version: int, structure, me: MeStructure, output_refs: list[int],
                  first: int) -> None:
    """``<ModelStructure>`` of a Model Exchange FMU: outputs and derivatives (in the state order
    x = (q, v)) with their exact dependencies on the states and inputs, then the initial
    unknowns.  FMI 2 indexes variables from 1 and FMI 3 by value reference; here both equal the
    value reference (FMI 2 has no time variable)."""
    n = len(model.all_coordinates)
    states = [first + i for i in range(2 * n)]
    derivatives = [first + n + i for i in range(n)] + [first + len(_exposed_states(model)) + i for i in range(n)]
    inputs = [k for k, par in enumerate(model.all_parameters) if par.causality == "input"]

    def depends(on_x, on_p) -> str:
        return " ".join(str(r) for r in sorted([states[i] for i in on_x.nonzero()[0]]
                                                + [1 + k for k in inputs if on_p[k]]))

    outputs = [(vr, depends(me.y_x[j], me.y_p[j])) for j, vr in enumerate(output_refs)]
    rates = [(vr, depends(me.xdot_x[i], me.xdot_p[i])) for i, vr in enumerate(derivatives)]
    initial = sorted(set(output_refs + states + derivatives))
    if version == 2:
        for tag, rows in (("Outputs", outputs), ("Derivatives", rates)):
            element = _sub(structure, tag)
            for vr, dependencies in rows:
                etree.SubElement(element, "Unknown", index=str(vr), dependencies=dependencies)
        element = _sub(structure, "InitialUnknowns")
        for vr in initial:
            _sub(element, "Unknown", index=vr)
    else:
        for tag, rows in (("Output", outputs), ("ContinuousStateDerivative", rates)):
            for vr, dependencies in rows:
                etree.SubElement(structure, tag, valueReference=str(vr), dependencies=dependencies)
        for vr in initial:
            _sub(structure, "InitialUnknown", valueReference=vr)


def model_structure(model: Model, model_c: str, model_h: str, interface: str) -> MeStructure | None:
    """The Model Exchange dependencies of an export with ``interface`` from the generated
    ``model.c``/``model.h``, or None for Co-Simulation only (``cs``, or ``both`` for a model
    Model Exchange refuses: :func:`me_refusal`).

    Raises
    ------
    ExportError
        ``me`` for a model Model Exchange refuses (the coordinates by name).
    """
    if interface not in INTERFACES:
        raise ModelError(f"--interface {interface!r}: choose one of {', '.join(INTERFACES)}.")
    if interface == "cs":
        return None
    patterns = generated_patterns(model_c, model_h)
    why = me_refusal(model, patterns)
    if why:
        if interface == "me":
            raise ExportError(f"{why} Export it with --interface cs.")
        return None
    n = len(model.all_coordinates)
    return me_structure(patterns, n, len(_multiplier_names(model)), len(model.all_parameters), len(model.outputs))


def me_refusal(model: Model, patterns: dict[str, list[tuple[int, int]]]) -> str:
    """Why ``model`` cannot run as Model Exchange ("" if it can): ``fa_me_supported``'s rule."""
    names = unsupported_coordinates(patterns, [c.name for c in model.all_coordinates])
    if not names:
        return ""
    return (f"model '{model.name}' cannot run as Model Exchange: the coordinates {', '.join(repr(c) for c in names)} "
            "have neither mass nor a constraint (massless Maxwell nodes make the index-1 matrix "
            "[[M, C_q^T], [C_q, 0]] singular).")


def expected_description(model: Model, version: int, token: str, step: float, sources: list[str],
                         interface: str, sources_dir: Path):
    """The model description :func:`export_fmu` writes for ``model`` (the import side compares
    an exported FMU's XML with it before trusting the embedded model); ``interface`` as
    recorded in ``export.json`` (exports before it existed, and ``both`` for a model Model
    Exchange refuses, record none: ``cs``); ``sources_dir`` the ``sources/`` that
    :func:`build_fmu_binary` wrote for ``model`` (its ``model.c``/``model.h`` give the Model
    Exchange dependencies, as at export)."""
    me = None
    if interface != "cs":
        model_c, model_h = ((sources_dir / name).read_text(encoding="utf-8") for name in ("model.c", "model.h"))
        me = model_structure(model, model_c, model_h, interface)
    return _model_description(model, version, _identifier(model.name), token, step, sources, me, interface != "me")


def build_description(identifier: str, sources: list[str]) -> bytes:
    """The FMI 3 ``sources/buildDescription.xml`` an export writes for ``sources`` (the rebuild
    of a handed-back FMU regenerates it from here)."""
    root = etree.Element("fmiBuildDescription", fmiVersion="3.0")
    config = _sub(root, "BuildConfiguration", modelIdentifier=identifier)
    files = _sub(config, "SourceFileSet", language="C99")
    for name in sources:
        _sub(files, "SourceFile", name=name)
    return _xml_bytes(root)


def validate_against_schema(xml: bytes, version: int, schema: str = "fmi{v}ModelDescription.xsd") -> list[str]:
    """Problems of an FMI XML document against the XSD shipped with fmpy (empty if valid)."""
    path = _fmpy_dir() / "schema" / f"fmi{version}" / schema.format(v=version)
    validator = etree.XMLSchema(etree.parse(str(path)))
    document = etree.fromstring(xml)
    return [] if validator.validate(document) else [str(e) for e in validator.error_log]


def _xml_bytes(root) -> bytes:
    return etree.tostring(root, pretty_print=True, xml_declaration=True, encoding="UTF-8")


def _write_xml(root, path: Path) -> bytes:
    data = _xml_bytes(root)
    path.write_bytes(data)
    return data


def instantiation_token(text: str, values: dict | None, step: float, solver: AbstractScheme, fmi_version: int) -> str:
    """The instantiation token of an export: a hash of the model file and the export
    settings, the scheme's by :meth:`~fmi_adjoint.integrate.schemes.AbstractScheme.token_fields`
    (an HHT export hashes the tuple of the exports made before generalized-alpha existed)."""
    digest = hashlib.sha256((text + repr((values, step, *solver.token_fields(), fmi_version))).encode()).digest()
    return "{" + str(uuid.UUID(bytes=digest[:16], version=4)) + "}"


def export_storage(settings: dict) -> MatrixStorage | None:
    """The matrix storage recorded in ``export.json`` (``matrix_storage``, written only when
    ``$FMI_ADJOINT_MATRIX_STORAGE`` forced one at export; None: the automatic choice).

    Raises
    ------
    ModelError
        A value that names no storage.
    """
    value = settings.get("matrix_storage", "auto")
    if not isinstance(value, str):
        raise ModelError(f"export.json matrix_storage = {value!r} is not a storage name.")
    return storage_named(value, "export.json matrix_storage")


def export_scheme(settings: dict) -> AbstractScheme:
    """The integration scheme recorded in ``export.json`` (see
    :func:`~fmi_adjoint.integrate.schemes.scheme_from_record`)."""
    return scheme_from_record(settings)


def build_fmu_binary(model: Model, root: Path, *, fmi_version: int, token: str, step: float,
                     solver: AbstractScheme, storage: MatrixStorage | None = None) -> tuple[Path, list[str]]:
    """Write ``root/sources/`` and compile ``root/binaries/<platform>/<modelIdentifier>.so``.

    The one build of an FMU binary: :func:`export_fmu` uses it, and so does the import side
    (:attr:`fmi_adjoint.fmu.archive.FmuArchive.native`) to check that an FMU's binary is
    the one its embedded model builds to.  With the same compiler the build is bit-identical
    in any folder (no debug information, no paths or dates end up in the binary), so equal
    sha256 hashes decide.

    ``storage`` is the matrix storage the export recorded (:func:`export_storage`; None: the
    automatic choice, whatever ``$FMI_ADJOINT_MATRIX_STORAGE`` says).

    Returns
    -------
    (binary, c_sources)
        The binary's path and the names of the compiled C sources (for the model description).

    Raises
    ------
    ModelError
        An element without C code.
    CompilerError
        No C compiler, or the generated code does not compile.
    """
    with forced_storage(storage):
        generated = model_c_sources(Derivation(model))
    find_c_compiler()  # before any work: no compiler is the one error then
    identifier = _identifier(model.name)
    layer = f"fa_fmi{fmi_version}.c"
    if not (FMI_LAYER_DIR / layer).exists():
        raise ExportError(f"the FMI {fmi_version} layer {layer} is missing from {FMI_LAYER_DIR}; reinstall "
                          "fmi-adjoint.")
    # A matrix stored sparse: the solver, compiled once into the build cache, is linked
    # statically; sources/ carries its source, the Eigen headers it includes and their licence.
    sparse = sparse_solver(what=f"model '{model.name}'") if uses_sparse_solver(generated) else None
    runtime: tuple[str | Path, ...] = (*ENGINE_RUNTIME, *(SOLVER_SOURCES if sparse else ()), FMI_LAYER_DIR / layer,
                                        *sorted(FMI_LAYER_DIR.glob("fa_fmu_common.*")), FMI_LAYER_DIR / "fa_fmu_me.h",
                                        FMI_LAYER_DIR / "fa_fmu_me.c")
    src = root / "sources"
    src.mkdir(parents=True)
    c_sources = [path.name for path in write_sources(generated, src, runtime)]
    if sparse is not None:
        for header in sparse.headers:
            (src / header).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(sparse.include / header, src / header)
        shutil.copyfile(LICENSE_FILE, src / "LICENSE-MPL-2.0.txt")
        c_sources.append("fa_sparse.cpp")
    (src / "fmu_config.h").write_text(
        "/* export settings of this FMU (fmi-adjoint) */\n#ifndef FMU_CONFIG_H\n#define FMU_CONFIG_H\n"
        f'#define FA_INSTANTIATION_TOKEN "{token}"\n#define FA_STEP {step!r}\n#define FA_SCHEME {solver.code}\n'
        f"#define FA_SCHEME_PARAMETER {solver.parameter!r}\n"
        # The inputs (fa_fmu_set_input_derivatives), only where the model has some.
        + (f"#define FA_IS_INPUT {{{', '.join(str(int(p.causality == 'input')) for p in model.all_parameters)}}}\n"
           if any(p.causality == "input" for p in model.all_parameters) else "")
        # Modified Newton only (full Newton keeps the file of earlier exports byte for byte).
        + ("#define FA_REUSE_JACOBIAN 1\n" if solver.reuse_jacobian else "") +
        f"#define FA_MODEL_IDENTIFIER {c_string_literal(identifier)}\n#endif\n"
    )
    platform = "linux64" if fmi_version == 2 else "x86_64-linux"
    binary = root / "binaries" / platform / f"{identifier}.so"
    binary.parent.mkdir(parents=True)
    binary.write_bytes(_cached_binary(src, c_sources, sparse))
    binary.chmod(0o755)
    return binary, c_sources


def _cached_binary(src: Path, c_sources: list[str], solver: SparseSolver | None = None) -> bytes:
    """The FMU binary compiled from ``src`` through the build cache (kind "fmu"), as the
    cache checked it (owner, mode, checksum).  ``solver``: the sparse solver's archive is
    linked (statically, with the C++ runtime, every symbol of it hidden) instead of compiling
    ``fa_sparse.cpp`` again; its bytes are part of the key.

    The key is the compiler with its flags, fmpy's version (its FMI headers) and the bytes of
    every file in ``src``: the build is deterministic (no debug information, no paths in the
    output), so equal sources give the same binary, and the trust check of an exported FMU
    (which rebuilds it) and ``apply -o`` (which rebuilds it with new values) compile once.
    """
    import fmpy

    compiler = find_c_compiler()
    # Only the FMI functions are exported (the headers mark them); internal symbols of two
    # fmi-adjoint FMUs in one process must never bind to each other.
    flags = ["-fvisibility=hidden", f"-I{_fmpy_dir() / 'c-code'}", f"-I{src}"]
    contents = [part for path in sorted(src.rglob("*")) if path.is_file()
                for part in (path.relative_to(src).as_posix(), path.read_bytes())]
    linked = ("sparse solver", solver.archive.read_bytes(), *FMU_LINK_FLAGS) if solver else ()
    key = fingerprint(compiler_fingerprint(compiler, flags[:1]), "fmpy", fmpy.__version__, *contents, *linked)

    def build(folder: Path) -> None:
        compile_shared([src / name for name in c_sources if name.endswith(".c")], folder / "binary.so", flags=flags,
                       what="the FMU binary", compiler=compiler, archives=(solver.archive,) if solver else (),
                       linker=solver.compiler if solver else None, link_flags=FMU_LINK_FLAGS if solver else ())

    try:
        return BuildCache.default().read("fmu", key, build, ("binary.so",))[1]["binary.so"]
    except CacheError as exc:
        raise ExportError(f"building the FMU binary through the build cache failed ({exc}); free space in the "
                          "cache folder (FMI_ADJOINT_CACHE) or run 'fmi-adjoint cache clear'.") from None


#: A ``key = "string"`` pair of a TOML line: the key bare or quoted, possibly dotted
#: (``z.file``, ``inputs.z.file``), the value a basic or literal one-line string.  Group 1 is
#: the last part of the key.
_STRING_PAIR = re.compile(r"""(?:(?:[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*')\s*\.\s*)*["']?([A-Za-z0-9_-]+)["']?\s*=\s*"""
                          r"""(?:"(?:[^"\\\n]|\\.)*"|'[^'\n]*')""")


def without_measured_inputs(text: str, source: str = "model file") -> tuple[str, list[dict]]:
    """The model file ``text`` without the ``file`` and ``channel`` keys of its measured inputs
    (module docstring), and what was left out (``{"input", "file", "channel"}`` each).

    Each key is removed from the text itself (comments and layout kept): the candidate cuts of
    a ``file = "..."`` pair (with the comma before or after it in an inline table, or its whole
    line) are tried, and a cut is taken only if the file then parses to the same TOML document
    less exactly that key.

    Raises
    ------
    ExportError
        A key written in a way no cut removes alone (the fix: write the input as an inline
        table on one line).
    """
    doc = tomllib.loads(text)
    inputs = doc.get("inputs")
    left_out = [{"input": name, "file": spec.get("file"), "channel": spec.get("channel")}
                for name, spec in (inputs.items() if isinstance(inputs, dict) else ())
                if isinstance(spec, dict) and ("file" in spec or "channel" in spec)]
    for entry in left_out:
        for key in ("file", "channel"):
            if key in doc["inputs"][entry["input"]]:
                del doc["inputs"][entry["input"]][key]
                text = _cut_key(text, key, repr(doc), f"{source}: inputs.{entry['input']}.{key}")
    return text, left_out


def _cut_key(text: str, key: str, expected: str, where: str) -> str:
    """``text`` with one ``key = "..."`` pair removed such that it parses to the document whose
    ``repr`` is ``expected`` (:func:`without_measured_inputs`)."""
    for match in _STRING_PAIR.finditer(text):
        if match.group(1) != key:
            continue
        start, end = match.span()
        line_start = text.rfind("\n", 0, start) + 1
        line_end = text.find("\n", end)
        line_end = len(text) if line_end < 0 else line_end + 1
        before = re.search(r",\s*$", text[line_start:start])
        after = re.match(r"\s*,\s*", text[end:line_end])
        cuts = [(line_start, line_end)]
        if before:
            cuts.append((line_start + before.start(), end))
        if after:
            cuts.append((start, end + after.end()))
        for first, last in cuts:
            candidate = text[:first] + text[last:]
            try:
                if repr(tomllib.loads(candidate)) == expected:
                    return candidate
            except ValueError:  # TOMLDecodeError: not this cut
                continue
    raise ExportError(f"{where}: the export leaves measured data out of the FMU, but cannot remove this key from "
                      "the model file's text; write the input as one inline table, e.g. "
                      "z = { value = 0.0, unit = \"m\", file = \"data.csv\", channel = \"z\" }.")


def _carry_data_files(read: ModelSource, resources: Path) -> None:
    """Write the files the model file reads (the Matrix Market files of its structured terms,
    the CSV files of its ``table_load`` elements, the node, matrix and DOF-map files of its
    flexible bodies' ``fe`` tables; not the data of measured inputs, which the export leaves
    out of ``read.text``) into ``resources/`` at the names the model file gives them, so that
    the import's trust check (:attr:`~fmi_adjoint.fmu.archive.FmuArchive.native`), which rebuilds
    ``resources/model.toml``, finds them as the export did.  Their values are
    compiled into the binary: the FMU runs without them.  A file named outside the model's
    folder (``--allow-external-tables``) cannot be placed so and is not carried: such an
    FMU runs, but is not trusted for exact gradients."""
    try:
        doc = tomllib.loads(read.text)
    except ValueError:  # parsed already by ModelSource.from_path; not reached
        return
    tables = dict(read.tables)
    for role, name in data_files(doc):
        normal = os.path.normpath(name)
        if name not in tables or os.path.isabs(normal) or normal.split(os.sep)[0] == "..":
            continue
        if normal in ("model.toml", "export.json"):
            raise ExportError(f"the {role} {name!r} would replace resources/{normal} of the FMU; rename it.")
        target = resources / normal
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(tables[name])


def export_fmu(
    source: str | os.PathLike,
    output: str | os.PathLike,
    *,
    fmi_version: int = 2,
    values: dict[str, float] | None = None,
    step: float | None = None,
    solver: AbstractScheme | None = None,
    allow_external_tables: bool = False,
    interface: str = DEFAULT_INTERFACE,
    notes: list[str] | None = None,
) -> Path:
    """Export the model file ``source`` as an FMU ``output`` (Co-Simulation, Model Exchange or both).

    Parameters
    ----------
    source : path
        TOML model file (it is embedded in ``resources/``, with the Matrix Market files of its
        structured terms: :func:`_carry_data_files`; measured inputs are left out:
        :func:`without_measured_inputs`).
    output : path
        The ``.fmu`` to write; it appears only when everything succeeded.
    fmi_version : {2, 3}
    values : dict, optional
        Parameter start values (``--set``).
    step : float, optional
        Internal step (default: the model's simulation settings).
    solver : AbstractScheme, optional
        The FMU's integrator, HHT or generalized-alpha (default: the model's simulation
        settings).
    allow_external_tables : bool
        Let ``table_load`` read files outside the model file's folder (trusted models only).
    interface : {"cs", "me", "both"}
        The FMI interfaces of the FMU (default :data:`DEFAULT_INTERFACE`; ``both``:
        Co-Simulation only, with a note, for a model Model Exchange refuses).
    notes : list, optional
        Receives the reason when ``both`` was asked and Co-Simulation only was exported.

    Raises
    ------
    ModelError
        Invalid model, unknown parameter, unknown interface, or an element without C code.
    ExportError
        ``interface="me"`` for a model Model Exchange refuses (massless unconstrained coordinates).
    CompilerError
        No C compiler, or the generated code does not compile.
    OutputFileError
        The output cannot be written.
    """
    if fmi_version not in FMI_VERSIONS:
        raise ModelError(f"--fmi {fmi_version!r}: choose 2 or 3.")
    if interface not in INTERFACES:
        raise ModelError(f"--interface {interface!r}: choose one of {', '.join(INTERFACES)}.")
    source = Path(source)
    output = Path(output)
    check_writable(output)
    # Read once: the Matrix Market files carried into resources/ are the bytes the model was built from.
    read = ModelSource.from_path(source, allow_external_tables=allow_external_tables)
    # The FMU is the model without its measured inputs, as the embedded model file says (the
    # import's trust check rebuilds that file).
    text, left_out = without_measured_inputs(read.text, str(source))
    if left_out:
        read = ModelSource(text, read.source, read.directory, read.tables)
    model = read.load().with_values(values or {})
    settings = model.simulation
    step = settings.step if step is None else float(step)
    solver = scheme_from_settings(settings) if solver is None else solver
    if not isinstance(solver, AbstractScheme):
        raise ModelError(f"solver = {solver!r} is not an integration scheme; give HHT(...) or GeneralizedAlpha(...).")
    if not step > 0:
        raise ModelError(f"--step {step}: the step must be positive.")
    identifier = _identifier(model.name)

    with tempfile.TemporaryDirectory(prefix="fmi_adjoint_export_") as tmp:
        embedded = Path(tmp) / "model.toml"
        if left_out:
            embedded.write_bytes(text.encode("utf-8"))
        else:
            shutil.copy(source, embedded)
        # The importer derives the token from resources/model.toml as read_text reads it.
        token = instantiation_token(embedded.read_text(encoding="utf-8"), values, step, solver, fmi_version)
        root = Path(tmp) / "fmu"
        storage = storage_override()
        binary, c_sources = build_fmu_binary(model, root, fmi_version=fmi_version, token=token, step=step,
                                             solver=solver, storage=storage)
        src = root / "sources"
        model_c, model_h = ((src / name).read_text(encoding="utf-8") for name in ("model.c", "model.h"))
        me = model_structure(model, model_c, model_h, interface)
        if me is None and interface == "both" and notes is not None:
            notes.append(me_refusal(model, generated_patterns(model_c, model_h)) + " Exported for Co-Simulation only.")
        description = _model_description(model, fmi_version, identifier, token, step, c_sources, me,
                                         interface != "me")
        xml = _write_xml(description, root / "modelDescription.xml")
        problems = validate_against_schema(xml, fmi_version)
        if problems:
            raise ExportError(f"internal error: the model description does not validate: {problems[:3]}")
        if fmi_version == 3:
            (src / "buildDescription.xml").write_bytes(build_description(identifier, c_sources))
        resources = root / "resources"
        resources.mkdir()
        _carry_data_files(read, resources)
        shutil.copy(embedded, resources / "model.toml")
        # binary_sha256: an importer trusts the embedded model only for this very binary,
        # and only if the model rebuilds to it (fmi_adjoint.fmu.archive.FmuArchive.native).
        (resources / "export.json").write_text(json.dumps(
            {"generator": f"fmi-adjoint {_VERSION}", "fmi_version": fmi_version, "step": step,
             **solver.record(), "values": values or {},
             **({"matrix_storage": storage.name.lower()} if storage is not None else {}),
             "model_file": source.name, **({"interface": interface} if me is not None else {}),
             **({"measured_inputs_left_out": left_out} if left_out else {}),
             "binary_sha256": hashlib.sha256(binary.read_bytes()).hexdigest()}, indent=2) + "\n")
        # Zip next to the target, then rename: no partial .fmu on any failure.
        with atomic_output(output, "wb") as handle:
            with zipfile.ZipFile(handle, "w", zipfile.ZIP_DEFLATED) as archive:
                for path in sorted(root.rglob("*")):
                    if path.is_file():
                        archive.write(path, path.relative_to(root).as_posix())
    return output
