"""Warm starts: a model the build cache has seen starts without symbolic work (issue 24, part 6).

A cold build lowers a :class:`~fmi_adjoint.mbs.MultibodySystem` (or parses a model file) into a
:class:`~fmi_adjoint.model.Model`, differentiates it and compiles it.  The build cache
(:mod:`fmi_adjoint.cache`) already keeps the generated code and the compiled library, but
their keys (:func:`~fmi_adjoint.compiled.model_key`) are computed from the *lowered* model,
so a warm start still paid for the lowering (sympy, about 1 s for 100 spatial bodies, 12 s
for a lattice of 343 point masses) and the canonical text of the model before it could look
anything up.

:func:`prepare_model` keys a small cache entry (kind ``warm``) on what the user gave *before*
lowering or parsing:

* a multibody system: its canonical description (:func:`description_text`: every field of
  every frozen dataclass, force-law instances included, down to numbers, strings and sympy
  trees; a value of any other type has no canonical text, and the system is then simply
  lowered, every time), the source files of the classes in it that are not fmi-adjoint's;
* a model file: its path and text, ``allow_external_tables`` and its data files, the
  ``table_load`` tables, the Matrix Market files of structured terms and the bench files of
  measured inputs (name, resolved path, bytes), read once: a cold start parses those very
  bytes, and a file outside the model's folder is not read unless allowed
  (:func:`model_file_key`);
* a :class:`~fmi_adjoint.model_file.ModelSource` (a model file as parallel workers receive
  it): its text and tables (``digest()``);

and, for all, the installed plugins of the two registries (:func:`registries_text`: entry
point names, values, distributions and their packages' code), fmi-adjoint's own source
(:func:`~fmi_adjoint.cache.source_fingerprint`) and the versions of Python, sympy and numpy.
Any change of a component, a parameter default, a plugin or fmi-adjoint's code is a new key.

The entry holds :class:`ModelFacts`, plain JSON data (no pickle: loading an entry runs no
code; the cache checks its owner, mode and checksum first): the lowered model's
:func:`~fmi_adjoint.compiled.model_key`, its name, parameters, simulation settings, signals
and the names of its coordinates and outputs.  On a hit :func:`prepare_model` returns a
:class:`DeferredModel`, a :class:`~fmi_adjoint.model.Model` that answers those from the facts
and lowers (once, on first use) only when something else is asked for: its force elements,
constraints, coordinates, outputs as expressions or mass-matrix entries (an FMU export, a
Newton failure named by constraint); a source changed meanwhile is then refused, not
mixed in.  Neither engine needs the lowered model to build and run (unless a force element is
numeric: Python code travels on the lowered model).  The engines' build paths
(:func:`~fmi_adjoint.compiled.compile_model`, :func:`~fmi_adjoint.native.build_native`)
then find their entries by the stored key and never lower.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import importlib.util
import inspect
import json
import math
import os
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from .cache import BuildCache, fingerprint, library_versions, source_fingerprint
from .errors import FmiAdjointError, ModelError
from .model import InputSignal, Model, Parameter, SimulationSettings, collection_paused

if TYPE_CHECKING:
    from .mbs.system import MultibodySystem

__all__ = ["MODEL_FILE_LIMIT", "WARM_FORMAT", "DeferredModel", "ModelFacts", "description_text", "model_file_key",
           "prepare_model", "registries_text", "system_key"]

#: Version of the ``warm`` entry's layout; part of every key.
WARM_FORMAT = 2
_FACTS = "facts.json"


class _NotCanonical(Exception):
    """Internal: a value without a canonical text (the system is then lowered every time)."""


@functools.cache
def _package_root() -> str:
    return str(Path(__file__).resolve().parent) + os.sep


def _class_text(cls: type, sources: dict[str, bytes]) -> str:
    """``module.qualname`` of ``cls``; the bytes of its source file go to ``sources`` unless
    it is fmi-adjoint's own (covered by :func:`~fmi_adjoint.cache.source_fingerprint`)."""
    name, path, data = _class_source(cls)
    if path is not None and data is not None:
        sources[path] = data
    return name


@functools.lru_cache(maxsize=4096)
def _class_source(cls: type) -> tuple[str, str | None, bytes | None]:
    """``(module.qualname, source path, bytes)`` of a class outside fmi-adjoint (path and
    bytes None for fmi-adjoint's and builtins), read once per process: as for
    :func:`~fmi_adjoint.cache.source_fingerprint`, the code that runs is the code imported,
    whatever happens to the file later.  A class without a readable source file has no
    canonical text (it could change unseen)."""
    name = f"{cls.__module__}.{cls.__qualname__}"
    if cls.__module__ == "builtins":
        return name, None, None
    try:
        path = inspect.getsourcefile(cls)
    except (TypeError, OSError):
        path = None
    if path is None:
        raise _NotCanonical(name)
    resolved = str(Path(path).resolve())
    if resolved.startswith(_package_root()):
        return name, None, None
    try:
        return name, resolved, Path(resolved).read_bytes()
    except OSError:
        raise _NotCanonical(name) from None


def description_text(value: object) -> str | None:
    """A text that determines ``value`` (a multibody system as the user gave it) exactly, or
    None if some part of it has no canonical text.

    Numbers as ``repr`` (floats exactly), strings quoted, containers item by item (mappings
    and sets sorted by their items' texts), enumeration members by class and name, every
    field of a dataclass (also those hidden from ``repr``) under the class's module and
    name, sympy expressions as :func:`sympy.srepr` (exact), numpy arrays by dtype, shape and
    bytes.  The source files of classes outside fmi-adjoint follow the text, so a plugin's
    edited code changes it.  Anything else (an object whose ``repr`` might not show all of
    its state) gives None: such a system is lowered on every start, never mistaken for another.
    """
    sources: dict[str, bytes] = {}
    numpy = sys.modules.get("numpy")
    sympy = sys.modules.get("sympy")

    def walk(item: object) -> str:
        # Exact types: a subclass of str or int could carry state its repr does not show.
        if item is None or type(item) in (bool, int, str, bytes):
            return f"{type(item).__name__}:{item!r}"
        if type(item) is float:
            return f"float:{item!r}" if not math.isnan(item) else "float:nan"
        if isinstance(item, enum.Enum):
            return f"enum:{_class_text(type(item), sources)}.{item.name}"
        if isinstance(item, type):
            return f"class:{_class_text(item, sources)}"
        if dataclasses.is_dataclass(item):
            fields = ",".join(f"{f.name}={walk(getattr(item, f.name))}" for f in dataclasses.fields(item))
            return f"{_class_text(type(item), sources)}({fields})"
        if type(item) in (tuple, list):
            return f"{type(item).__name__}[{','.join(walk(x) for x in item)}]"  # type: ignore[attr-defined]
        if type(item) is dict:
            pairs = sorted(f"{walk(k)}:{walk(v)}" for k, v in item.items())
            return f"dict{{{','.join(pairs)}}}"
        if type(item) in (set, frozenset):
            return f"{type(item).__name__}{{{','.join(sorted(walk(x) for x in item))}}}"  # type: ignore[attr-defined]
        if sympy is not None and isinstance(item, sympy.Basic):
            return f"sympy:{sympy.srepr(item)}"
        if numpy is not None and isinstance(item, numpy.ndarray):
            if item.dtype.hasobject:
                raise _NotCanonical("an object array")
            return f"ndarray({item.dtype.str},{item.shape},{item.tobytes().hex()})"
        if numpy is not None and isinstance(item, numpy.generic) and not isinstance(item, numpy.object_):
            return f"numpy.{type(item).__name__}:{item.tobytes().hex()}"
        scipy_sparse = sys.modules.get("scipy.sparse")
        if numpy is not None and scipy_sparse is not None and scipy_sparse.issparse(item):
            # An FE model's matrices (a flexible body's): its entries in one canonical layout,
            # duplicates summed and indices sorted, so equal matrices give one text.
            csr = cast(Any, item).tocsr(copy=True)
            csr.sum_duplicates()
            csr.sort_indices()
            index = [numpy.asarray(a, dtype=numpy.int64) for a in (csr.indptr, csr.indices)]  # int32 or int64
            return (f"{type(item).__name__}({csr.dtype.str},{csr.shape},{walk(index[0])},{walk(index[1])},"
                    f"{walk(csr.data)})")
        raise _NotCanonical(type(item).__qualname__)

    try:
        text = walk(value)
    except (_NotCanonical, RecursionError):
        return None
    return "\n".join([text, *(f"{path}\n{data.hex()}" for path, data in sorted(sources.items()))])


def registries_text() -> str:
    """The installed plugins of the force-element and component registries: every entry
    point's group, name, value and distribution, and a fingerprint of its package's code
    when that lies outside fmi-adjoint (:func:`_plugin_text`; nothing is imported)."""
    from .forces.registry import default_registry as force_registry
    from .mbs.registry import default_registry as component_registry

    lines: list[str] = []
    for registry in (force_registry(), component_registry()):
        lines.append(f"group {registry.group}")
        for name in registry.names():
            entry = registry.entry_point(name)
            value = str(getattr(entry, "value", ""))
            lines.append(f"{name}={value} ({registry.distribution(name)})")
            lines.append(_plugin_text(value.partition(":")[0].strip()))
    return "\n".join(lines)


def _plugin_text(module: str) -> str:
    """A fingerprint of the code of the plugin whose entry point names ``module``: every
    ``*.py`` file of its top-level package (the class may live in any module of it), or the
    module's own file; ``"own"`` for fmi-adjoint's, ``"?"`` if it cannot be found.  Found
    with :func:`importlib.util.find_spec` of the top-level name, which imports nothing."""
    top = module.partition(".")[0]
    if not top or top == "fmi_adjoint":
        return "own"
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return "?"
    if spec is None:
        return "?"
    parts: list[str | bytes] = []
    try:
        if spec.submodule_search_locations:
            for location in spec.submodule_search_locations:
                folder = Path(location)
                for path in sorted(folder.rglob("*.py")):
                    if "__pycache__" not in path.parts:
                        parts += [path.relative_to(folder).as_posix(), path.read_bytes()]
        elif spec.origin:
            parts += [spec.origin, Path(spec.origin).read_bytes()]
        else:
            return "?"
    except OSError:
        return "?"
    return fingerprint(*parts)


def _versions() -> tuple[str, ...]:
    """The versions that shape generated code (:func:`fmi_adjoint.cache.library_versions`)."""
    return library_versions()


def system_key(system: object) -> str | None:
    """The ``warm`` key of a multibody system as given (module docstring), or None if it has
    no canonical description."""
    text = description_text(system)
    if text is None:
        return None
    return fingerprint("warm system", str(WARM_FORMAT), source_fingerprint(), *_versions(), registries_text(), text)


#: Largest model file read for a key (4 MiB, :func:`~fmi_adjoint.model_file.load_model`'s
#: limit; a larger one gets no key, and the cold path refuses it).
MODEL_FILE_LIMIT = 4 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class _FileSnapshot:
    """A model file's text and data files (:func:`~fmi_adjoint.model_file.data_files`: tables,
    Matrix Market files, the bench files of measured inputs; name as written: bytes) as read
    once: the key is taken from these bytes and the model parsed from them, never re-read."""

    key: str
    text: str
    tables: tuple[tuple[str, bytes], ...]


def _file_snapshot(path: Path, allow_external_tables: bool) -> _FileSnapshot | None:
    """The model file's snapshot and ``warm`` key; None when :func:`load_model` would refuse
    or fail (not a regular UTF-8 file within the limit, invalid TOML, a data file outside the
    folder without ``allow_external_tables``, an unreadable data file): the cold path reports
    it.

    Data files are found by :func:`~fmi_adjoint.model_file.data_files`, the list
    :func:`~fmi_adjoint.model_file.model_file_inputs` and the reader use, and read with the
    reader's limits (:func:`~fmi_adjoint.model_file.read_data_file`); the TOML is parsed only
    if the text could name one (:func:`~fmi_adjoint.model_file.may_name_data_files`), and a
    file outside the model's folder is not read unless allowed (a model file must not make the
    tool read other files).
    """
    import tomllib

    from .files import decode_text, read_regular
    from .model_file import data_files, may_name_data_files, read_data_file

    try:
        text = decode_text(read_regular(path, MODEL_FILE_LIMIT, "a TOML model file", ModelError))
    except (ModelError, UnicodeDecodeError):
        return None
    tables: dict[str, bytes] = {}
    if may_name_data_files(text):
        try:
            doc = tomllib.loads(text)
        except ValueError:
            return None
        folder = path.parent.resolve()
        forces = doc.get("forces", [])
        for force in forces if isinstance(forces, list) else []:  # the reader refuses these: cold path
            if isinstance(force, dict) and force.get("type") == "table_load" and not (
                    isinstance(force.get("file"), str) and "\0" not in force["file"]):
                return None
        for role, name in data_files(doc):
            file = path.parent / name
            if not allow_external_tables and not file.resolve().is_relative_to(folder):
                return None
            try:
                tables[name] = read_data_file(role, file)
            except (FmiAdjointError, OSError):
                return None
    parts: list[str | bytes] = ["warm file", str(WARM_FORMAT), source_fingerprint(), *_versions(), registries_text(),
                                str(path), os.path.realpath(path), f"external tables: {allow_external_tables}", text]
    for name, data in sorted(tables.items()):
        parts += [name, os.path.realpath(path.parent / name), data]
    return _FileSnapshot(fingerprint(*parts), text, tuple(sorted(tables.items())))


def model_file_key(path: Path, *, allow_external_tables: bool = False) -> str | None:
    """The ``warm`` key of a model file: its path (as given and resolved) and text,
    ``allow_external_tables``, its data files (name, resolved path, bytes) and the
    rest as for :func:`system_key`; None if :func:`load_model` would refuse or fail
    (:func:`_file_snapshot`)."""
    snapshot = _file_snapshot(Path(path), allow_external_tables)
    return None if snapshot is None else snapshot.key


# -- what a warm start knows about the model without lowering it -------------------------------
def _parameter_json(p: Parameter) -> dict:
    return {"name": p.name, "value": p.value, "unit": p.unit, "bounds": list(p.bounds),
            "description": p.description, "causality": p.causality}


def _parameter(data: Mapping[str, Any]) -> Parameter:
    return Parameter(str(data["name"]), float(data["value"]), str(data["unit"]),
                     (float(data["bounds"][0]), float(data["bounds"][1])), str(data["description"]),
                     str(data["causality"]))


def _signal_json(s: InputSignal) -> dict:
    return {"input": s.input, "tables": [[list(t), list(v)] for t, v in s.tables],
            "knots": [_parameter_json(k) for k in s.knots], "source": s.source}


def _signal(data: Mapping[str, Any]) -> InputSignal:
    # A measured input (issue 26, part 7) has no knots and names its data in ``source``.
    return InputSignal(str(data["input"]),
                       tuple((tuple(map(float, t)), tuple(map(float, v))) for t, v in data["tables"]),
                       tuple(_parameter(k) for k in data["knots"]), str(data["source"]))


@dataclasses.dataclass(frozen=True)
class ModelFacts:
    """What the engines need of a lowered model to start (stored in the ``warm`` entry).

    Attributes
    ----------
    key : str
        :func:`~fmi_adjoint.compiled.model_key` of the lowered model: the keys of its
        generated code and libraries derive from it.
    name, description, source : str
    parameters : tuple of Parameter
        The declared ones (``Model.parameters``).
    automatic : tuple of Parameter
        Those the force elements add (``all_parameters`` = declared + automatic + knots).
    signals : tuple of InputSignal
    simulation : SimulationSettings
    coordinate_names, output_names : tuple of str
        ``all_coordinates`` and ``outputs`` by name.
    numeric : bool
        Whether a force element is numeric (Python code: its callables need the lowered model).
    """

    key: str
    name: str
    description: str
    source: str
    parameters: tuple[Parameter, ...]
    automatic: tuple[Parameter, ...]
    signals: tuple[InputSignal, ...]
    simulation: SimulationSettings
    coordinate_names: tuple[str, ...]
    output_names: tuple[str, ...]
    numeric: bool

    @classmethod
    def of(cls, model: Model) -> ModelFacts:
        """The facts of a lowered model (computes its key)."""
        from .compiled import model_key
        from .forces.numeric import AbstractNumericElement

        declared = len(model.parameters)
        knots = sum(len(s.knots) for s in model.signals)
        every = model.all_parameters
        return cls(
            key=model_key(model), name=model.name, description=model.description, source=model.source,
            parameters=model.parameters, automatic=every[declared:len(every) - knots], signals=model.signals,
            simulation=model.simulation, coordinate_names=tuple(c.name for c in model.all_coordinates),
            output_names=tuple(o.name for o in model.outputs),
            numeric=any(isinstance(e, AbstractNumericElement) for e in model.forces))

    def to_json(self) -> dict:
        return {"format": WARM_FORMAT, "key": self.key, "name": self.name, "description": self.description,
                "source": self.source, "parameters": [_parameter_json(p) for p in self.parameters],
                "automatic": [_parameter_json(p) for p in self.automatic],
                "signals": [_signal_json(s) for s in self.signals],
                "simulation": dataclasses.asdict(self.simulation), "coordinate_names": list(self.coordinate_names),
                "output_names": list(self.output_names), "numeric": self.numeric}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelFacts:
        if data.get("format") != WARM_FORMAT:
            raise ValueError(f"format {data.get('format')!r}, expected {WARM_FORMAT}")
        return cls(
            key=str(data["key"]), name=str(data["name"]), description=str(data["description"]),
            source=str(data["source"]), parameters=tuple(_parameter(p) for p in data["parameters"]),
            automatic=tuple(_parameter(p) for p in data["automatic"]),
            signals=tuple(_signal(s) for s in data["signals"]),
            simulation=SimulationSettings(**{k: data["simulation"][k] for k in
                                             (f.name for f in dataclasses.fields(SimulationSettings))}),
            coordinate_names=tuple(map(str, data["coordinate_names"])),
            output_names=tuple(map(str, data["output_names"])), numeric=bool(data["numeric"]))


#: The fields of a Model a DeferredModel answers from its facts; the others lower it.
_STORED = ("name", "parameters", "simulation", "description", "source", "signals")


class _Lowered:
    """The fields of a :class:`DeferredModel` that need the lowered model: a non-data
    descriptor, so a value in the instance's ``__dict__`` (after lowering, or set by
    ``Model.__init__`` when ``dataclasses.replace`` makes a copy) takes precedence."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: DeferredModel | None, owner: type) -> Any:
        if instance is None:
            return self
        instance._lower()
        return instance.__dict__[self.name]


class DeferredModel(Model):
    """A :class:`~fmi_adjoint.model.Model` from a warm start: lowered on first need.

    ``name``, ``parameters``, ``simulation``, ``description``, ``source``, ``signals``,
    ``all_parameters`` and :meth:`with_values` (of declared parameters) come from the
    stored :class:`ModelFacts`; anything else (coordinates, force elements, constraints,
    outputs, mass-matrix entries, ``all_coordinates``) lowers the model once (thread-safe)
    and is the lowered model's from then on.  :func:`~fmi_adjoint.compiled.model_key` is the
    stored key (:attr:`warm_facts`).  A copy made by ``dataclasses.replace`` is an ordinary,
    fully lowered model of this class (it has no facts).
    """

    coordinates = _Lowered()
    forces = _Lowered()
    constraints = _Lowered()
    prescribed = _Lowered()
    outputs = _Lowered()
    mass_matrix = _Lowered()

    @classmethod
    def deferred(cls, facts: ModelFacts, lower: Callable[[], Model]) -> DeferredModel:
        """The model of ``facts``; ``lower()`` gives the lowered model when it is needed."""
        self = object.__new__(cls)
        for name in _STORED:
            object.__setattr__(self, name, getattr(facts, name))
        object.__setattr__(self, "_facts", facts)
        object.__setattr__(self, "_lower_model", lower)
        object.__setattr__(self, "_lock", threading.Lock())
        return self

    @property
    def warm_facts(self) -> ModelFacts | None:
        """The stored facts while they describe this object (None for a copy)."""
        return self.__dict__.get("_facts")

    @property
    def lowered(self) -> bool:
        """Whether the model has been lowered (its every field is at hand)."""
        return "forces" in self.__dict__

    def _lower(self) -> None:
        if self.lowered:
            return
        with self.__dict__["_lock"]:
            if self.lowered:
                return
            model = self.__dict__["_lower_model"]()
            for field in dataclasses.fields(Model):
                if field.name not in _STORED:
                    object.__setattr__(self, field.name, getattr(model, field.name))

    @property
    def all_parameters(self) -> tuple[Parameter, ...]:
        facts = self.warm_facts
        if facts is None:
            return Model.all_parameters.fget(self)  # type: ignore[attr-defined]
        return self.parameters + facts.automatic + tuple(k for s in self.signals for k in s.knots)

    def with_values(self, values: Mapping[str, float]) -> Model:
        """As :meth:`Model.with_values`; new values of declared parameters keep the model
        deferred (the generated code takes parameters as arguments: same key)."""
        facts = self.warm_facts
        declared = {p.name for p in self.parameters}
        if facts is None or self.lowered or not set(values) <= declared:
            return super().with_values(values)
        values = dict(values)
        parameters = tuple(dataclasses.replace(p, value=float(values[p.name])) if p.name in values else p
                           for p in self.parameters)
        lower = self.__dict__["_lower_model"]
        return DeferredModel.deferred(dataclasses.replace(facts, parameters=parameters),
                                      lambda: lower().with_values(values))

    def __reduce__(self) -> tuple:
        # Pickled (to another process) and copied as the lowered Model it stands for: the
        # thunk and the lock do not travel.
        return Model, tuple(getattr(self, field.name) for field in dataclasses.fields(Model))

    def __repr__(self) -> str:
        if not self.lowered:
            return f"DeferredModel(name={self.name!r}, not lowered yet)"
        return super().__repr__()


def prepare_model(source: object, *, allow_external_tables: bool = False,
                  cache: BuildCache | None = None) -> Model:
    """The model of ``source`` through the build cache's ``warm`` entries: lowered (or
    parsed) on a cold start, a :class:`DeferredModel` on a warm one.

    Parameters
    ----------
    source : MultibodySystem, ModelSource, Model, str or path-like
        A multibody system, a model file read already
        (:class:`~fmi_adjoint.model_file.ModelSource`: keyed by its text and tables), a model
        (returned as it is) or the path of a TOML model file
        (:func:`~fmi_adjoint.model_file.load_model`; the installed registries in both cases).
    allow_external_tables : bool
        As for :func:`~fmi_adjoint.model_file.load_model` (part of the key).
    cache : BuildCache, optional
        Default: :meth:`BuildCache.default`.

    Raises
    ------
    ModelError
        Whatever lowering or parsing raises (on a cold start; nothing is stored then), or a
        ``source`` of another type.
    CacheError
        The cache cannot be written (as for every build).
    """
    from .model_file import ModelSource

    if isinstance(source, Model):
        return source
    lower: Callable[[], Model]
    rekey: Callable[[], str | None]
    what = "the multibody system"
    if isinstance(source, ModelSource):  # a model file as text and tables (parallel workers); immutable
        text = source

        def rekey() -> str | None:
            return fingerprint("warm source", str(WARM_FORMAT), source_fingerprint(), *_versions(), registries_text(),
                               text.digest())

        lower = text.load
    elif isinstance(source, (str, os.PathLike)):
        from .model_file import load_model, parse_model

        path = Path(source)
        what = f"the model file {path}"
        read: list[_FileSnapshot | None] = []

        def rekey() -> str | None:
            read[:] = [_file_snapshot(path, allow_external_tables)]
            return None if read[0] is None else read[0].key

        def lower() -> Model:
            snapshot = read[0] if read else None
            if snapshot is None:  # load_model reports why
                return load_model(path, allow_external_tables=allow_external_tables)
            # Parsed from the very bytes the key was taken from (the tables' place was checked).
            return parse_model(snapshot.text, str(path), path.parent, allow_external_tables=allow_external_tables,
                               tables=dict(snapshot.tables))
    elif isinstance(source, _multibody_system()):
        system = source

        def rekey() -> str | None:
            return system_key(system)

        lower = system.to_model
    else:
        raise ModelError(f"prepare_model: {source!r} is a {type(source).__name__}; give a MultibodySystem, a "
                         "ModelSource, a Model or the path of a TOML model file.")
    key = rekey()
    if key is None:
        return lower()
    return _through_cache(key, lower, cache or BuildCache.default(), _unchanged(key, rekey, lower, what))


def _multibody_system() -> type[MultibodySystem]:
    """:class:`~fmi_adjoint.mbs.system.MultibodySystem`, imported when a source is neither a
    model file nor its text (the components import sympy, which a warm start of a file never
    needs; issue 24, part 6)."""
    from .mbs.system import MultibodySystem

    return MultibodySystem


def _unchanged(key: str, rekey: Callable[[], str | None], lower: Callable[[], Model], what: str
               ) -> Callable[[], Model]:
    """``lower`` for a deferred model, refusing a source that changed since its key was taken
    (a model file edited, a mutable part of a system changed): the engines were built for
    the model of ``key``."""

    def checked() -> Model:
        if rekey() != key:
            raise ModelError(f"{what} changed after prepare_model read it, and the engines of the earlier version were "
                             "built from it; call prepare_model again and rebuild the engines.")
        return lower()

    return checked


def _through_cache(key: str, lower: Callable[[], Model], cache: BuildCache, deferred: Callable[[], Model]) -> Model:
    """The lowered model (cold: ``lower()``, its facts stored under ``key``) or a
    :class:`DeferredModel` of the stored facts that lowers by ``deferred()``."""
    built: list[Model] = []

    def build(folder: Path) -> None:
        with collection_paused():  # the key of a large model walks all its expressions (issue 24)
            model = lower()
            built.append(model)
            facts = ModelFacts.of(model).to_json()
        (folder / _FACTS).write_text(json.dumps(facts))

    entry, files = cache.read("warm", key, build, (_FACTS,))
    if built:
        return built[0]
    try:
        facts = ModelFacts.from_json(json.loads(files[_FACTS]))
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise ModelError(f"the build cache entry {entry} is unreadable ({exc}); run 'fmi-adjoint cache clear'.") \
            from None
    return DeferredModel.deferred(facts, deferred)
