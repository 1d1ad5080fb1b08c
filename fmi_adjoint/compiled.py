"""The compiled model: exact derivatives of the assembled equations as numpy functions.

:func:`compile_model` differentiates the :class:`~fmi_adjoint.model.SymbolicModel` once
and generates vectorized functions for everything the integrator, the consistent
initialization, the discrete adjoint and the forward sensitivities need.  In the
notation of Lauss et al. 2018, eqs. (15)-(20), with ``F = C_q^T lambda - Q``:

=====================  ==========================================================
``residual_terms``     ``M a``, ``F``, ``C``
``jacobian_terms``     ``M``, ``J_M = d(M a)/dq``, ``K = J_C - J_Q``, ``J_V = dQ/dv``, ``C_q``
``parameter_terms``    ``d(M a)/dp``, ``dF/dp``, ``dC/dp``
``outputs``            ``y``
``output_jacobians``   ``dy/dq``, ``dy/dv``, ``dy/da``, ``dy/dlambda``, ``dy/dp``
``init_residual``      ``G(z)`` of the consistent initialization (see below)
``init_jacobians``     ``dG/dz``, ``dG/dp``
``init_guess``         the given initial positions and velocities (Newton's start)
``step_residual``      scalar variant of ``residual_terms`` (one state, Python floats)
``step_newton``        scalar ``residual_terms`` and ``jacobian_terms`` in one call
=====================  ==========================================================

The vectorized functions accept a leading batch axis (a whole trajectory); the scalar
ones serve the sequential Newton loop of the integrator, where per-call overhead counts.

Consistent initialization solves ``G(z, p) = 0`` for ``z = (q, mu, v, nu, a, lambda)``:
positions closest (least squares) to the given values subject to ``C = 0`` with fixed
coordinates held, velocities likewise subject to ``C_q v + C_t = 0``, then ``a`` and
``lambda`` from the equations of motion and the acceleration constraints
``C_q a + (C_q v)_q v + 2 C_qt v + C_tt = 0``.  Massless coordinates without a
constraint (internal nodes of Maxwell elements) satisfy their algebraic force balance
and its time derivatives instead of the projection (see ``_algebraic_rows``).  Writing it as one system lets the adjoint
carry parameter dependence of the initial state by one linear solve.
"""

from __future__ import annotations

import dataclasses
import json
import marshal
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .cache import BuildCache, fingerprint, library_versions, source_fingerprint
from .errors import ModelError
from .equations import (GUESS_ARGS, INIT_ARGS, SECOND_INIT_ARGS, SECOND_STEP_ARGS, STATE_ARGS, GeneratedFunction,
                        ModelDerivatives, argument_symbols, canonical_text, differentiate, function_table,
                        group_sizes, second_order_table)
from .model import Model, SymbolicModel, assemble

# The symbolic and code-generating modules (sympy, the assembly, the printers) are imported
# where a build or a first call uses them: a warm start of a cached model never does
# (issue 24, part 6).
if TYPE_CHECKING:
    from .assembly import AssemblyPayload, Partition, WholeSystem
    from .cse import ReducedOutputs

__all__ = ["GUESS_ARGS", "INIT_ARGS", "SECOND_INIT_ARGS", "SECOND_STEP_ARGS", "STATE_ARGS",
           "CompiledModel", "Derivation", "GeneratedFunction", "ModelDerivatives", "ModelStructure", "SecondOrder",
           "compile_model", "compile_second_order", "differentiate", "function_table", "group_sizes", "model_key",
           "NUMPY_WHOLE_UP_TO", "numpy_by_components",
           "numpy_sources",
           "second_order_table"]

Function = Callable[..., tuple[np.ndarray, ...]]


@dataclasses.dataclass(frozen=True, eq=False)
class CompiledModel:
    """Numeric functions of one model; immutable and shareable between threads.

    Attributes
    ----------
    model : Model
        The definition it was compiled from.
    n, m, n_p, n_y : int
        Numbers of coordinates, constraints, parameters and outputs.
    coordinate_names, constraint_names, parameter_names, output_names : tuple of str
    defaults : numpy.ndarray
        Nominal parameter values, in the order of ``parameter_names``.
    mass_depends_on_q : bool
    """

    model: Model
    n: int
    m: int
    n_p: int
    n_y: int
    coordinate_names: tuple[str, ...]
    constraint_names: tuple[str, ...]
    parameter_names: tuple[str, ...]
    output_names: tuple[str, ...]
    defaults: np.ndarray
    mass_depends_on_q: bool
    residual_terms: Function
    jacobian_terms: Function
    parameter_terms: Function
    outputs: Function
    output_jacobians: Function
    init_residual: Function
    init_jacobians: Function
    step_residual: Function
    step_newton: Function
    init_guess: Function
    table_spans: tuple[tuple[str, float, float], ...] = ()

    def parameter_vector(self, values: dict[str, float] | None = None) -> np.ndarray:
        """Defaults with some values replaced (unknown names raise ModelError)."""
        p = self.defaults.copy()
        for name, value in (values or {}).items():
            p[self.parameter_index(name)] = float(value)
        return p

    def parameter_index(self, name: str) -> int:
        """Position of parameter ``name`` in the parameter vector."""
        return self._index(self.parameter_names, name, "parameter")

    def output_index(self, name: str) -> int:
        """Position of output ``name``."""
        return self._index(self.output_names, name, "output")

    def _index(self, names: tuple[str, ...], name: str, what: str) -> int:
        try:
            return names.index(name)
        except ValueError:
            raise ModelError(
                f"model '{self.model.name}' has no {what} '{name}'. {what.capitalize()}s: {', '.join(names)}."
            ) from None


def numpy_sources(derivation: Derivation, rows: tuple[GeneratedFunction, ...] | None = None) -> dict[str, str]:
    """Source of every numpy function of the table (or of ``rows``), by attribute name."""
    from .codegen import function_source

    groups = argument_symbols(derivation.derivatives)
    sources: dict[str, str] = {}
    for row in derivation.table if rows is None else rows:
        args = [(g, groups[g]) for g in row.args]
        batch = "t" if "t" in row.args else "p"
        if row.numpy:
            sources[row.name] = function_source(row.name, args, derivation.reduced(row), batch_arg=batch)
        if row.scalar:
            sources[row.scalar] = function_source(row.scalar, args, derivation.reduced(row), batch_arg=batch,
                                                  scalar=True)
    return sources


@dataclasses.dataclass(frozen=True)
class ModelStructure:
    """What the generated code of a model needs besides its definition: sizes and facts
    read off the equations.  Stored in the build cache next to the sources.

    ``tables`` holds ``(function name, times, values)`` of the time tables the code calls.
    """

    n: int
    m: int
    n_y: int
    constraint_names: tuple[str, ...]
    mass_depends_on_q: bool
    table_spans: tuple[tuple[str, float, float], ...]
    tables: tuple[tuple[str, tuple[float, ...], tuple[float, ...]], ...]

    @classmethod
    def of(cls, d: ModelDerivatives) -> ModelStructure:
        sym = d.sym
        q = sym.q
        return cls(
            n=len(q), m=len(sym.lam), n_y=sym.Y.rows, constraint_names=tuple(sym.constraint_names),
            mass_depends_on_q=any(sym.M[i, j].has(*q) for i in range(len(q)) for j in range(len(q))),
            table_spans=tuple((where, float(times[0]), float(times[-1]))
                              for where, (_, times, _) in zip(sym.table_sources, sym.tables)),
            tables=tuple((str(f), tuple(map(float, times)), tuple(map(float, values)))
                         for f, times, values in sym.tables),
        )

    @classmethod
    def of_partition(cls, part: Partition) -> ModelStructure:
        parsed = part.parsed
        return cls(n=len(parsed.q), m=len(parsed.lam), n_y=len(parsed.outputs),
                   constraint_names=parsed.constraint_names, mass_depends_on_q=part.mass_depends_on_q,
                   table_spans=(), tables=())

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> ModelStructure:
        return cls(
            n=int(data["n"]), m=int(data["m"]), n_y=int(data["n_y"]),
            constraint_names=tuple(data["constraint_names"]), mass_depends_on_q=bool(data["mass_depends_on_q"]),
            table_spans=tuple((str(w), float(a), float(b)) for w, a, b in data["table_spans"]),
            tables=tuple((str(n), tuple(map(float, t)), tuple(map(float, v))) for n, t, v in data["tables"]),
        )


class Derivation:
    """The symbolic work of one build, done at most once and shared by the backends
    (numpy functions and C library) built in the same call: the derivatives, the table of
    generated functions and each function's common subexpressions (eliminated once,
    printed by every backend)."""

    def __init__(self, model: Model | SymbolicModel):
        self.model = model
        self._derivatives: ModelDerivatives | None = None
        self._table: tuple[GeneratedFunction, ...] | None = None
        self._reduced: dict[str, ReducedOutputs] = {}
        self._partition: Partition | WholeSystem | None = None
        self._payloads: dict[bool, AssemblyPayload] = {}

    @property
    def partition(self) -> Partition | WholeSystem:
        """The model as component instances, or why it is derived as a whole
        (:func:`fmi_adjoint.assembly.partition.partition`; a SymbolicModel is always whole)."""
        if self._partition is None:
            from .assembly import WholeSystem, partition

            if isinstance(self.model, SymbolicModel):
                self._partition = WholeSystem("it is given as assembled equations")
            else:
                self._partition = partition(self.model)
        return self._partition

    def assembly(self, cache: BuildCache, second_order: bool = False) -> AssemblyPayload | None:
        """The kernels and scatter plan of a model derived by components (None if derived whole)."""
        from .assembly import Partition, assembly_payload

        part = self.partition
        if not isinstance(part, Partition):
            return None
        if second_order not in self._payloads:
            self._payloads[second_order] = assembly_payload(part, cache, second_order)
        return self._payloads[second_order]

    @property
    def derivatives(self) -> ModelDerivatives:
        if self._derivatives is None:
            self._derivatives = differentiate(self.model)
        return self._derivatives

    @property
    def table(self) -> tuple[GeneratedFunction, ...]:
        if self._table is None:
            self._table = function_table(self.derivatives)
        return self._table

    def reduced(self, row: GeneratedFunction) -> ReducedOutputs:
        """``row``'s outputs after common-subexpression elimination."""
        if row.name not in self._reduced:
            from .cse import reduce_outputs

            outputs = [list(matrix) if vector else matrix for _, matrix, vector in row.outputs]
            self._reduced[row.name] = reduce_outputs(row.name, outputs)
        return self._reduced[row.name]


#: Models whose component instances hold at most this many expression nodes in all
#: (``Partition.size``) get whole-system numpy functions (:func:`numpy_by_components`).
NUMPY_WHOLE_UP_TO = 2000


def numpy_by_components(part: Partition | WholeSystem) -> bool:
    """Whether the numpy functions of a model are assembled from its component kernels.

    The C engine assembles every model that partitions (:mod:`fmi_adjoint.native.sources`).
    The Python engine evaluates one state per call in its Newton loop, where the whole-system
    *scalar* functions (Python floats, :func:`fmi_adjoint.codegen.function_source`) cost a few
    microseconds and the assembled vectorized ones (one numpy call per operation of every type,
    a sparse product per output) about a millisecond: on the bundled examples 4-7 us against
    0.8-2.9 ms per Newton evaluation.  The whole-system derivation of a model with small
    expressions is cheap, so a model of at most :data:`NUMPY_WHOLE_UP_TO` expression nodes
    keeps the whole-system numpy functions (the reference engine then also derives its
    equations independently of the C engine's kernels: every scalar bundled example, 15 to
    1302 nodes, and heavy_top, 836); a larger one (a spatial chain of 4 bodies has 2835, the
    engine on mounts 7707, the MacPherson suspension 10023), whose whole-system derivation is
    what the assembly exists to avoid, gets the assembled ones.
    """
    from .assembly import Partition

    return isinstance(part, Partition) and part.size > NUMPY_WHOLE_UP_TO


def model_key(model: Model) -> str:
    """Build-cache key of everything that determines a model's generated code.

    The canonical text of the definition (:func:`fmi_adjoint.equations.canonical_text`) with parameter *values*
    neutralized (the generated functions take ``p`` as an argument, so a ``--set`` must not
    rebuild), the classes and source files of its force elements (plugins change without a
    version bump during development), fmi-adjoint's own code, the versions of the
    interpreter (the entry holds byte code), sympy (derivatives, printers) and numpy.
    Computed once per model object (a build asks for it once per backend).
    """
    import inspect

    facts = getattr(model, "warm_facts", None)
    if facts is not None:  # a warm start (fmi_adjoint.warm): the key of the model it stands for
        return facts.key
    known = _KEYS.get(id(model))
    if known is not None and known[0]() is model:
        return known[1]
    # Model(...) rather than dataclasses.replace: a subclass's copy (a lowered
    # fmi_adjoint.warm.DeferredModel) has the key of the same Model.
    fields = {f.name: getattr(model, f.name) for f in dataclasses.fields(Model)}
    neutral = Model(**{**fields, "parameters": tuple(dataclasses.replace(par, value=0.0) for par in model.parameters),
                       "description": "", "source": ""})
    parts: list[str | bytes] = ["model", source_fingerprint(), *library_versions(), canonical_text(neutral)]
    for cls in sorted({type(e) for e in model.forces}, key=lambda c: (c.__module__, c.__qualname__)):
        parts.append(f"{cls.__module__}.{cls.__qualname__}")
        try:
            path = inspect.getsourcefile(cls)
            parts.append(Path(path).read_bytes() if path else b"")
        except (OSError, TypeError):
            parts.append(b"")
    key = fingerprint(*parts)
    ident = id(model)

    def forget(_: object) -> None:
        _KEYS.pop(ident, None)

    try:
        _KEYS[ident] = (weakref.ref(model, forget), key)
    except TypeError:  # not weakly referenceable: not remembered
        pass
    return key


#: ``id(model) -> (weak reference, key)`` of :func:`model_key`.
_KEYS: dict[int, tuple[weakref.ref, str]] = {}


#: The numpy functions of a CompiledModel (its fields after the metadata).
FUNCTION_NAMES = ("residual_terms", "jacobian_terms", "parameter_terms", "outputs", "output_jacobians",
                  "init_residual", "init_jacobians", "step_residual", "step_newton", "init_guess")
#: The layout of the ``model`` entry (part of its key): 2 adds ``structure.json``.
_NUMPY_LAYOUT = "numpy entry 2"
_STRUCTURE = "structure.json"


def compile_model(model: Model | SymbolicModel, *, cache: BuildCache | None = None,
                  derivation: Derivation | None = None, lazy: bool = False) -> CompiledModel:
    """Differentiate a model and generate its numpy functions, through the build cache.

    Parameters
    ----------
    model : Model or SymbolicModel
        A ``SymbolicModel`` is compiled directly, without the cache.
    cache : BuildCache, optional
        Default: :meth:`BuildCache.default` (``FMI_ADJOINT_CACHE`` or the user's cache folder).
    derivation : Derivation, optional
        Shares the symbolic work with a C build of the same model.
    lazy : bool
        Load the numpy functions on their first call (the sizes and names are read at once
        from the entry's small ``structure.json``).  The C engine calls them only for a
        trajectory's outputs, so its warm start (:mod:`fmi_adjoint.warm`) skips decoding
        and loading the generated code (most of the rest of a warm start of a large model);
        a first call pays it once, under a lock.  Eager (the default) for the Python engine,
        whose Newton loop calls them directly.

    Returns
    -------
    CompiledModel
    """
    if isinstance(model, SymbolicModel):
        symbolic = Derivation(model)
        d = symbolic.derivatives
        return _assemble_compiled(model.model, ModelStructure.of(d), numpy_sources(symbolic), d.sym)
    derivation = derivation or Derivation(model)
    cache = cache or BuildCache.default()

    def build(folder: Path) -> None:
        from .assembly import Partition
        from .codegen import compile_source

        assembled = derivation.assembly(cache) if numpy_by_components(derivation.partition) else None
        if assembled is not None:
            part = derivation.partition
            assert isinstance(part, Partition)
            structure = ModelStructure.of_partition(part).to_json()
            payload = {"format": 1, "structure": structure, "sources": {}, "assembly": assembled.to_json()}
            (folder / "numpy.json").write_text(json.dumps(payload))
            (folder / "numpy.marshal").write_bytes(marshal.dumps({}))
            (folder / _STRUCTURE).write_text(json.dumps(structure))
            return
        d = derivation.derivatives
        sources = numpy_sources(derivation)
        structure = ModelStructure.of(d).to_json()
        payload = {"format": 1, "structure": structure, "sources": sources}
        (folder / "numpy.json").write_text(json.dumps(payload))
        # Byte code too (the key includes the interpreter's version): a warm load then skips
        # compiling the sources, the bulk of its time on large models.
        codes = {name: compile_source(name, source) for name, source in sources.items()}
        (folder / "numpy.marshal").write_bytes(marshal.dumps(codes))
        (folder / _STRUCTURE).write_text(json.dumps(structure))

    def load() -> tuple[ModelStructure, dict[str, Function]]:
        return _numpy_functions(model, cache, derivation, build)

    if not lazy:
        structure, functions = load()
        return _compiled(model, structure, functions)
    key = fingerprint(model_key(model), _NUMPY_LAYOUT)
    entry, files = cache.read("model", key, build, (_STRUCTURE,))
    try:
        structure = ModelStructure.from_json(json.loads(files[_STRUCTURE]))
    except (ValueError, KeyError, TypeError) as exc:
        raise ModelError(f"the build cache entry {entry} of model '{model.name}' is unreadable ({exc}); "
                         "run 'fmi-adjoint cache clear'.") from None
    loader = _FunctionLoader(load)
    return _compiled(model, structure, {name: _DeferredFunction(loader, name) for name in FUNCTION_NAMES})


class _FunctionLoader:
    """The numpy functions of one model, loaded once on first use (thread-safe)."""

    def __init__(self, load: Callable[[], tuple[ModelStructure, dict[str, Function]]]):
        self._load = load
        self._lock = threading.Lock()
        self._functions: dict[str, Function] | None = None

    def function(self, name: str) -> Function:
        functions = self._functions
        if functions is None:
            with self._lock:
                if self._functions is None:
                    self._functions = self._load()[1]
                functions = self._functions
        return functions[name]


@dataclasses.dataclass(frozen=True)
class _DeferredFunction:
    """One numpy function of a lazily compiled model (:func:`compile_model`, ``lazy=True``)."""

    loader: _FunctionLoader
    name: str

    def __call__(self, *args: np.ndarray) -> tuple[np.ndarray, ...]:
        return self.loader.function(self.name)(*args)


def _numeric_elements(model: Model) -> bool:
    """Whether a force element of ``model`` is numeric (Python code), without lowering a warm
    start's model (:class:`fmi_adjoint.warm.DeferredModel`)."""
    facts = getattr(model, "warm_facts", None)
    if facts is not None:
        return bool(facts.numeric)
    from .forces.numeric import AbstractNumericElement

    return any(isinstance(e, AbstractNumericElement) for e in model.forces)


def _numpy_functions(model: Model, cache: BuildCache, derivation: Derivation, build: Callable[[Path], None]
                     ) -> tuple[ModelStructure, dict[str, Function]]:
    """The structure and numpy functions of the ``model`` entry of ``model`` (built by ``build``)."""
    from .assembly import AssembledModel, AssemblyPayload


    def extra(files: dict[str, bytes], sources: dict[str, str]) -> tuple[dict, AssemblyPayload | None]:
        codes = marshal.loads(files["numpy.marshal"])
        if not isinstance(codes, dict) or set(codes) != set(sources):
            raise ValueError("the byte code does not match the sources")
        stored = json.loads(files["numpy.json"]).get("assembly")
        return codes, (AssemblyPayload.from_json(stored) if stored is not None else None)

    structure, sources, stored = _cached_sources(model, cache, "model", ("numpy.json", "numpy.marshal"), build, extra,
                                                 layout=_NUMPY_LAYOUT)
    codes: dict = stored[0]  # type: ignore[index]
    kernels: AssemblyPayload | None = stored[1]  # type: ignore[index]
    if kernels is not None:
        assembled = AssembledModel(kernels)
        return structure, {name: assembled.function(name) for name in FUNCTION_NAMES}
    numeric = None
    if _numeric_elements(model):
        # Numeric elements are Python code: their callables come from the assembled model.
        numeric = derivation.derivatives.sym if derivation._derivatives is not None else assemble(model)
    return structure, _load_functions(structure, sources, numeric, codes)


def _cached_sources(model: Model, cache: BuildCache, kind: str, names: tuple[str, ...], build: Callable[[Path], None],
                    extra: Callable[[dict[str, bytes], dict[str, str]], object], layout: str | None = None,
                    ) -> tuple[ModelStructure, dict[str, str], object]:
    """``(structure, sources, extra(files, sources))`` of the cache entry ``kind`` of ``model``
    (built by ``build`` when missing; ``layout``, if given, is part of the key), from the files
    ``names`` (the first holds the structure and sources) exactly as the cache checked them
    (owner, mode, checksum: the code that runs is the code checked); an unwritable cache or an
    unreadable entry is one error naming the fix."""
    key = model_key(model) if layout is None else fingerprint(model_key(model), layout)
    entry, files = cache.read(kind, key, build, names)
    try:
        payload = json.loads(files[names[0]])
        structure = ModelStructure.from_json(payload["structure"])
        sources = {str(k): str(v) for k, v in payload["sources"].items()}
        return structure, sources, extra(files, sources)
    except (OSError, ValueError, KeyError, TypeError, EOFError) as exc:
        raise ModelError(f"the build cache entry {entry} of model '{model.name}' is unreadable ({exc}); "
                         "run 'fmi-adjoint cache clear'.") from None


def _load_functions(structure: ModelStructure, sources: dict[str, str], sym: SymbolicModel | None,
                    codes: dict | None = None) -> dict[str, Function]:
    from .codegen import load_function, numeric_calls

    tables = {name: (times, values) for name, times, values in structure.tables}
    calls = numeric_calls(sym) if sym is not None else {}
    return {name: load_function(name, source, tables, calls, (codes or {}).get(name))
            for name, source in sources.items()}


def _assemble_compiled(definition: Model, structure: ModelStructure, sources: dict[str, str],
                       sym: SymbolicModel | None, codes: dict | None = None) -> CompiledModel:
    return _compiled(definition, structure, _load_functions(structure, sources, sym, codes))


def _names(definition: Model) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Coordinate and output names, from a warm start's facts when it has them (no lowering)."""
    facts = getattr(definition, "warm_facts", None)
    if facts is not None:
        return facts.coordinate_names, facts.output_names
    return tuple(c.name for c in definition.all_coordinates), tuple(o.name for o in definition.outputs)


def _compiled(definition: Model, structure: ModelStructure, functions: dict[str, Function]) -> CompiledModel:
    parameters = definition.all_parameters
    coordinate_names, output_names = _names(definition)
    return CompiledModel(
        model=definition, n=structure.n, m=structure.m, n_p=len(parameters), n_y=structure.n_y,
        coordinate_names=coordinate_names, constraint_names=structure.constraint_names,
        parameter_names=tuple(par.name for par in parameters), output_names=output_names,
        defaults=np.array([par.value for par in parameters], dtype=float),
        mass_depends_on_q=structure.mass_depends_on_q, table_spans=structure.table_spans,
        **functions,
    )


@dataclasses.dataclass(frozen=True, eq=False)
class SecondOrder:
    """The numpy functions of :func:`second_order_table` of one model (vectorized: every
    argument may carry leading batch axes; ``t`` gives the batch shape)."""

    step_second: Function
    init_second: Function


def compile_second_order(model: Model, *, cache: BuildCache | None = None,
                         derivation: Derivation | None = None) -> SecondOrder:
    """Generate (or load from the build cache) the second-order functions of ``model``."""
    from .assembly import AssembledModel, AssemblyPayload, Partition
    from .codegen import load_function, numeric_calls

    derivation = derivation or Derivation(model)
    cache = cache or BuildCache.default()

    def build(folder: Path) -> None:
        assembled = (derivation.assembly(cache, second_order=True) if numpy_by_components(derivation.partition)
                     else None)
        if assembled is not None:
            part = derivation.partition
            assert isinstance(part, Partition)
            payload = {"format": 1, "structure": ModelStructure.of_partition(part).to_json(), "sources": {},
                       "assembly": assembled.to_json()}
            (folder / "second.json").write_text(json.dumps(payload))
            return
        d = derivation.derivatives
        sources = numpy_sources(derivation, second_order_table(d))
        payload = {"format": 1, "structure": ModelStructure.of(d).to_json(), "sources": sources}
        (folder / "second.json").write_text(json.dumps(payload))

    def check(files: dict[str, bytes], sources: dict[str, str]) -> AssemblyPayload | None:
        stored = json.loads(files["second.json"]).get("assembly")
        if stored is not None:
            return AssemblyPayload.from_json(stored)
        if set(sources) != {"step_second", "init_second"}:
            raise ValueError("unexpected functions")
        return None

    structure, sources, assembled = _cached_sources(model, cache, "second", ("second.json",), build, check)
    if assembled is not None:
        second = AssembledModel(assembled)  # type: ignore[arg-type]
        return SecondOrder(step_second=second.function("step_second"), init_second=second.function("init_second"))
    tables = {name: (times, values) for name, times, values in structure.tables}
    numeric = None
    if _numeric_elements(model):
        numeric = derivation.derivatives.sym if derivation._derivatives is not None else assemble(model)
    calls = numeric_calls(numeric) if numeric is not None else {}
    functions = {name: load_function(name, source, tables, calls) for name, source in sources.items()}
    return SecondOrder(**functions)
