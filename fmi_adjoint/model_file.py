"""Reading TOML model files into :class:`~fmi_adjoint.model.Model` values.

A model file is data: it is parsed with :mod:`tomllib`, its expressions with the
whitelist grammar of :mod:`fmi_adjoint.expressions`; nothing in it is executed.
The format (all sections but ``model``, ``coordinates`` and ``outputs`` optional)::

    [model]
    name = "sdof"
    description = "..."
    source = "where the model and its values come from"

    [simulation]                 # defaults for simulate / identify
    t_end = "6*pi"               # number, or expression of constants
    step = 1e-4
    alpha = -0.05                # HHT damping in [-1/3, 0]
    integrator = "hht"           # or "generalized_alpha" (Arnold & Bruels 2007)
    rho_inf = 0.8                # generalized-alpha spectral radius at infinity, [0, 1]

    [parameters]
    m = 1.0                                                  # value only
    c = { value = 1.0, unit = "N/m", bounds = [0.1, 10.0], description = "stiffness" }

    [inputs]                     # excitations an FMU exposes as inputs; the value is
    F_ext = { value = 0.0, unit = "N" }   # used while unconnected; usable like parameters

    [[coordinates]]
    name = "x"
    kind = "translational"       # or "rotational"
    mass = "m"                   # diagonal mass entry; 0 for a massless node
    initial_position = 0.0       # expressions of parameters
    initial_velocity = 0.0
    fixed_position = false       # hold it while the initial state is made consistent

    [[mass_matrix]]              # extra or configuration-dependent entries
    row = "phi"
    col = "theta"
    value = "m_r*r*l/2*cos(phi - theta)"

    [[forces]]
    type = "linear_spring_damper"    # element type registered under fmi_adjoint.forces
    name = "spring"
    coordinates = ["x"]              # one (to ground) or two (relative)
    stiffness = "c"                  # properties left out become parameters
    damping = "2*d"                  # named <element>_<property>

    [[forces]]
    type = "table_load"              # a load F(t) from a CSV file
    name = "shaker"
    coordinate = "x"
    file = "force.csv"               # relative to the model file; 'time' column
    column = "F"
    scale = "gain"

    [[constraints]]
    name = "lever"
    expression = "x2*(a + b) - x3*b - x4*a"

    [[prescribed]]
    coordinate = "phi"
    expression = "omega*t"

    [[outputs]]
    name = "a1"
    expression = "der2(x1)"          # der(x): velocity, der2(x): acceleration,
    unit = "m/s^2"                   # lam(c): multiplier, reaction(x): constraint force
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tomllib
import hashlib
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from .data import parse_csv, read_csv_bytes
from .errors import DataError, ExpressionError, ModelError
from .expressions import parse_expression
from .files import decode_text, read_regular
from .forces import Registry, TableLoad, element_type
from .model import (
    assemble,
    Constraint,
    Coordinate,
    MassEntry,
    Model,
    Output,
    Parameter,
    PrescribedMotion,
    SimulationSettings,
)
from .text import excerpt

__all__ = ["ModelSource", "load_model", "parse_model"]

_MAX_BYTES = 4 * 1024 * 1024
#: Most entries of a list-valued element property (dmf_spring stages, tvd branches, spline
#: knots): a dmf_spring of 100 stages takes 16 s to build, of 1000 stages over 11 minutes.
_MAX_LIST = 64
#: Most entries per section: each coordinate, element, constraint and mass entry adds
#: equations that are differentiated and compiled (a chain of 300 coordinates takes minutes).
_MAX_ENTRIES = {"coordinates": 500, "forces": 2000, "constraints": 500, "prescribed": 500, "mass_matrix": 5000,
                "outputs": 1000, "parameters": 5000, "inputs": 1000}
_SECTIONS = {
    "model",
    "simulation",
    "parameters",
    "inputs",
    "coordinates",
    "mass_matrix",
    "forces",
    "constraints",
    "prescribed",
    "outputs",
}


def load_model(path: str | os.PathLike, registry: Registry | None = None, *,
               allow_external_tables: bool = False) -> Model:
    """Read a TOML model file.

    ``registry`` resolves element types (default: the installed entry points).
    ``table_load`` files must lie inside the model file's folder (after resolving symlinks
    and ``..``), because a model file is untrusted data and must not make the tool read,
    or report on, any other file of the machine; ``allow_external_tables=True``
    (``--allow-external-tables``) lifts this for models the user trusts.

    Raises
    ------
    ModelError
        For a missing, non-regular (FIFO, device) or malformed file or any invalid entry;
        the message names the file, the line where it can be located, and the fix.
    """
    path = Path(path)
    return parse_model(_model_text(path), source=str(path), directory=path.parent, registry=registry,
                       allow_external_tables=allow_external_tables)


def _model_text(path: Path) -> str:
    raw = read_regular(path, _MAX_BYTES, "a TOML model file or the name of a bundled example", ModelError)
    try:
        return decode_text(raw)  # a byte-order mark is not a syntax error
    except UnicodeDecodeError:
        raise ModelError(f"{path}: not a UTF-8 text file; save the model file as UTF-8 TOML.") from None


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """A model file as it travels to parallel workers: its text and the bytes of the table
    files it reads, never a compiled object (issue 14).

    :meth:`from_path` reads and checks the file as :func:`load_model` does (table files
    inside the model's folder unless ``allow_external_tables``); :meth:`load` parses the text
    again anywhere, taking the tables from :attr:`tables` instead of the disk, so a worker on
    another machine builds the same model (through its build cache).

    Attributes
    ----------
    text : str
    source : str
        The file's path, named in messages.
    directory : str
        The file's folder (table file names are relative to it).
    tables : tuple of (str, bytes)
        Table file name as written in the model file, and its bytes.
    """

    text: str
    source: str = "<model>"
    directory: str = "."
    tables: tuple[tuple[str, bytes], ...] = ()
    #: The model :meth:`from_path` parsed, returned by :meth:`load` in this process instead of
    #: parsing the text again; not pickled (a worker parses the text).
    _parsed: Model | None = dataclasses.field(default=None, compare=False, repr=False)

    @classmethod
    def from_path(cls, path: str | os.PathLike, registry: Registry | None = None, *,
                  allow_external_tables: bool = False) -> ModelSource:
        """Read and check the model file ``path`` (see :func:`load_model`)."""
        path = Path(path)
        text = _model_text(path)
        tables: dict[str, bytes] = {}
        model = _parse(text, str(path), path.parent, registry, allow_external_tables, None, tables)
        return cls(text, str(path), str(path.parent), tuple(sorted(tables.items())),
                   model if registry is None else None)

    def load(self, registry: Registry | None = None) -> Model:
        """The model (tables from :attr:`tables`)."""
        if self._parsed is not None and registry is None:
            return self._parsed
        return parse_model(self.text, self.source, Path(self.directory), registry, tables=dict(self.tables))

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_parsed"}

    def __setstate__(self, state: dict) -> None:
        for key, value in {**state, "_parsed": None}.items():
            object.__setattr__(self, key, value)

    def digest(self) -> str:
        """SHA-256 of the text and the tables (what a worker builds from)."""
        h = hashlib.sha256()
        for part in (self.text.encode(), self.source.encode(), self.directory.encode()):
            h.update(len(part).to_bytes(8, "little") + part)
        for name, raw in self.tables:
            h.update(len(name.encode()).to_bytes(8, "little") + name.encode() + hashlib.sha256(raw).digest())
        return h.hexdigest()


def parse_model(
    text: str, source: str = "<model>", directory: Path | None = None, registry: Registry | None = None, *,
    allow_external_tables: bool = False, tables: Mapping[str, bytes] | None = None,
) -> Model:
    """Build a :class:`Model` from the text of a TOML model file.

    ``table_load`` files are read relative to ``directory`` (default: the current folder)
    and, unless ``allow_external_tables``, only from inside it (see :func:`load_model`).
    ``tables`` (file name as written in the model file to its bytes) replaces the disk.
    """
    return _parse(text, source, directory, registry, allow_external_tables, tables, None)


def _parse(text: str, source: str, directory: Path | None, registry: Registry | None, allow_external_tables: bool,
           tables: Mapping[str, bytes] | None, read: dict[str, bytes] | None) -> Model:
    """:func:`parse_model`; the table files read are added to ``read``."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ModelError(f"{source}: malformed TOML: {exc}. Fix the syntax at that line.") from None
    except ValueError:  # an integer of more than 4300 digits (Python's conversion limit)
        raise ModelError(f"{source}: a number has too many digits to be read; write it as a float, "
                         "e.g. 1.5e300.") from None
    reader = _Reader(doc, text, source, directory or Path("."), registry, allow_external_tables)
    reader.tables, reader.read_tables = tables, read
    model = reader.model()
    # Expressions are parsed with the model's names when the equations are assembled;
    # doing it here reports them against the file instead of later from compile_model.
    try:
        assemble(model)
    except ModelError as exc:
        text_of = str(exc)
        special = reader.output_of_special(text_of)
        named = f"output '{special[1]}': " if special is not None else ""
        raise type(exc)(f"{source} ({reader.line_for_message(text_of)}): {named}{text_of}") from None
    return model


class _Reader:
    def __init__(self, doc: dict, text: str, source: str, directory: Path, registry: Registry | None,
                 allow_external_tables: bool = False):
        self.allow_external_tables = allow_external_tables
        self.registry = registry
        self.doc = doc
        # TOML ends lines at \n only (str.splitlines also splits at U+2028, U+0085, ..., which
        # a comment or string may hold, and would shift every later line number).
        self.lines = text.split("\n")
        self.source = source
        self.directory = directory
        #: Table files given as bytes (a :class:`ModelSource`), else None: read from disk.
        self.tables: Mapping[str, bytes] | None = None
        #: Where the table files read from disk are recorded, if anywhere.
        self.read_tables: dict[str, bytes] | None = None
        self._headers: list[tuple[int, bool, tuple[str, ...]]] | None = None

    # -- locating entries in the text for messages ---------------------------------
    #: What an element's error says (``assemble``, ``Model``, the force elements), mapped to
    #: its section and the key whose value the quoted name is; the first match in the message
    #: (after the model's own name) wins.
    _MENTIONS = (
        (re.compile(r"^model (?:name|'[^']*': (?:description|source))\b"), "model", None),
        (re.compile(r"force element (?:name )?'([^']*)'"), "forces", "name"),
        (re.compile(r"prescribed motion of '([^']*)'"), "prescribed", "coordinate"),
        (re.compile(r"\bconstraint '([^']*)'"), "constraints", "name"),
        (re.compile(r"\boutput '([^']*)'"), "outputs", "name"),
        (re.compile(r"\bmass_matrix\[(\d+)\]"), "mass_matrix", None),
        (re.compile(r"\bcoordinate '([^']*)'"), "coordinates", "name"),
        (re.compile(r"\bparameter '([^']*)'"), "parameters", None),
        (re.compile(r"\binput '([^']*)'"), "inputs", None),
    )

    def line_for_message(self, message: str) -> str:
        """Line of the entry an error of the assembled model is about.

        The message names the entry (``constraint 'c3'``, ``force element 'spring'``,
        ``mass_matrix[2]``, ...); the line is that of its ``[[section]]`` header (of its key
        for ``[parameters]``/``[inputs]``), found through the parsed document, so that names
        used elsewhere (the model's own name, a coordinate named in a constraint's message)
        do not mislead.  Messages naming no entry fall back to the first ``name = ...`` line
        that defines a quoted name.
        """
        special = self.output_of_special(message)
        if special is not None:
            return self.line_of("outputs", special[0])
        body = message if re.match(r"^model '[^']*': (description|source)\b", message) else \
            re.sub(r"^model '[^']*':\s*", "", message)
        found = sorted((match.start(), k, match) for k, (pattern, _, _) in enumerate(self._MENTIONS)
                       if (match := pattern.search(body)))
        for _, k, match in found:
            _, section, field = self._MENTIONS[k]
            if section == "model":
                key = "name" if "name" in match.group(0) else match.group(0).rsplit(" ", 1)[-1]
                return self.line_of("model", key=key)
            value = match.group(1)
            if section in ("parameters", "inputs"):
                if isinstance(self.doc.get(section), dict) and value in self.doc[section]:
                    return self.line_of(section, key=value)
                continue
            entries = self.doc.get(section)
            if not isinstance(entries, list):
                continue
            if field is None:
                if int(value) < len(entries):
                    return self.line_of(section, int(value))
                continue
            for index, entry in enumerate(entries):
                if isinstance(entry, dict) and entry.get(field) == value:
                    return self.line_of(section, index)
        model_name = (self.doc.get("model") or {}).get("name") if isinstance(self.doc.get("model"), dict) else None
        for name in re.findall(r"'([A-Za-z_][A-Za-z0-9_]*)'", body):
            if name == model_name:
                continue
            pattern = re.compile(rf"^\s*(name|coordinate)\s*=\s*[\"']{re.escape(name)}[\"']")
            for number, line in enumerate(self.lines, start=1):
                if pattern.match(line):
                    return f"line {number}"
        return "unknown line"

    def output_of_special(self, message: str) -> tuple[int, str] | None:
        """``(index, name)`` of the output whose ``der(x)``, ``der2(x)``, ``lam(c)`` or
        ``reaction(x)`` the message is about: their handlers raise without the output's name."""
        special = re.match(r"^(der2?|lam|reaction)\((\w+)\):", message)
        outputs = self.doc.get("outputs")
        if special is None or not isinstance(outputs, list):
            return None
        call = special.group(0)[:-1]
        for index, entry in enumerate(outputs):
            if isinstance(entry, dict) and call in re.sub(r"\s+", "", str(entry.get("expression", ""))):
                return index, str(entry.get("name", ""))
        return None

    def headers(self) -> list[tuple[int, bool, tuple[str, ...]]]:
        """The table headers of the text: ``(line number, is [[array]], dotted key)``.

        Lines inside multi-line strings are skipped (a line of an expression written in
        triple quotes is not a header); quoted keys are unquoted.
        """
        if self._headers is None:
            self._headers = []
            open_quote: str | None = None
            for number, line in enumerate(self.lines, start=1):
                stripped = line.strip()
                if open_quote is None and stripped.startswith("["):
                    array = stripped.startswith("[[")
                    close = stripped.find("]]" if array else "]")
                    inner = stripped[2 if array else 1:close] if close > 0 else ""
                    self._headers.append((number, array, tuple(part.strip().strip("\"'") for part in inner.split("."))))
                    continue
                for quote in ('"""', "'''"):
                    if open_quote in (None, quote) and line.count(quote) % 2 == 1:
                        open_quote = quote if open_quote is None else None
        return self._headers

    def line_of(self, section: str, index: int | None = None, key: str | None = None) -> str:
        """Line of the ``index``-th ``[[section]]`` header, or of ``[section]`` (of its ``key``)."""
        headers = self.headers()
        if index is not None:
            entries = [number for number, array, name in headers if array and name == (section,)]
            if index < len(entries):
                return f"line {entries[index]}"
            return self.key_line(section, 1, headers[0][0] - 1 if headers else len(self.lines)) or "unknown line"
        for position, (number, array, name) in enumerate(headers):
            if name[:1] != (section,) or array:
                continue
            if key is None:
                return f"line {number}"
            if name == (section, key):
                return f"line {number}"
            if name == (section,):
                end = headers[position + 1][0] - 1 if position + 1 < len(headers) else len(self.lines)
                return self.key_line(key, number + 1, end) or f"line {number}"
        # A section written as a key of the root table (``constraints = [...]``).
        return self.key_line(section, 1, headers[0][0] - 1 if headers else len(self.lines)) or "unknown line"

    def key_line(self, key: str, first: int, last: int) -> str | None:
        """Line of ``key = ...`` between lines ``first`` and ``last``, if any."""
        pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
        for number in range(first, last + 1):
            if pattern.match(self.lines[number - 1]):
                return f"line {number}"
        return None

    def where(self, section: str, index: int | None = None, key: str | None = None) -> str:
        label = section if index is None else f"{section}[{index}]"
        if key is not None:
            label += f".{key}"
        return f"{self.source} ({self.line_of(section, index, key if index is None else None)}), {label}"

    # -- generic checks --------------------------------------------------------------
    def table(self, value: Any, where: str, allowed: AbstractSet[str],
              required: AbstractSet[str] = frozenset()) -> dict:
        if not isinstance(value, dict):
            raise ModelError(f"{where}: expected a table, got {type(value).__name__}.")
        unknown = sorted(set(value) - allowed)
        if unknown:
            raise ModelError(f"{where}: unknown key(s) {unknown}. Allowed: {', '.join(sorted(allowed))}.")
        missing = sorted(required - set(value))
        if missing:
            raise ModelError(f"{where}: missing key(s) {missing}.")
        return value

    def array(self, section: str) -> list:
        value = self.doc.get(section, [])
        if not isinstance(value, list):
            raise ModelError(f"{self.where(section)}: write this section as [[{section}]] entries.")
        return value

    def text(self, value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise ModelError(f"{where}: expected a string, got {value!r}.")
        return value

    def expr(self, value: Any, where: str) -> str | float:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ModelError(f"{where}: expected a number or an expression string, got {value!r}.")
        return value

    def constant(self, value: Any, where: str) -> float:
        expr = parse_expression(self.expr(value, where), {}, where=where)
        if not expr.is_number:
            raise ModelError(f"{where}: {value!r} must be a constant.")
        result = float(expr)
        if not math.isfinite(result):
            raise ModelError(f"{where}: {value!r} is not finite.")
        return result

    def bound(self, value: Any, where: str) -> float:
        # Open bounds: TOML's inf/-inf literals or the strings "inf"/"-inf".
        if isinstance(value, float) and math.isinf(value):
            return value
        if value in ("inf", "-inf", "+inf"):
            return float(value)
        return self.constant(value, where)

    # -- sections --------------------------------------------------------------------
    def model(self) -> Model:
        unknown = sorted(set(self.doc) - _SECTIONS)
        if unknown:
            raise ModelError(f"{self.source}: unknown section(s) {unknown}. Sections: {', '.join(sorted(_SECTIONS))}.")
        head = self.table(self.doc.get("model", {}), self.where("model"), {"name", "description", "source"}, {"name"})
        for section, limit in _MAX_ENTRIES.items():
            entries = self.doc.get(section, ())
            if isinstance(entries, (list, dict)) and len(entries) > limit:
                raise ModelError(f"{self.where(section)}: {len(entries)} entries; the limit is {limit}, which bounds "
                                 "the time to build the model. Split the model or reduce it.")
        try:
            return Model(
                name=self.text(head["name"], self.where("model", key="name")),
                description=self.text(head.get("description", ""), self.where("model", key="description")),
                source=self.text(head.get("source", ""), self.where("model", key="source")),
                simulation=self.simulation(),
                parameters=self.parameters(),
                coordinates=self.coordinates(),
                mass_matrix=self.mass_matrix(),
                forces=self.forces(),
                constraints=self.constraints(),
                prescribed=self.prescribed(),
                outputs=self.outputs(),
            )
        except ExpressionError:
            raise
        except ModelError as exc:
            if self.source in str(exc):
                raise
            raise ModelError(f"{self.source} ({self.line_for_message(str(exc))}): {exc}") from None

    def simulation(self) -> SimulationSettings:
        where = self.where("simulation")
        sim = self.table(self.doc.get("simulation", {}), where, {"t_end", "step", "alpha", "integrator", "rho_inf"})
        values: dict[str, object] = {}
        for key, val in sim.items():
            if key == "integrator":
                if not isinstance(val, str):
                    raise ModelError(f"{self.where('simulation', key=key)}: {excerpt(repr(val))} is not an integrator; "
                                     "write \"hht\" or \"generalized_alpha\".")
                values[key] = val
            else:
                values[key] = self.constant(val, self.where("simulation", key=key))
        return SimulationSettings(**values)  # type: ignore[arg-type]

    def parameters(self) -> tuple[Parameter, ...]:
        return self.parameter_section("parameters", "parameter") + self.parameter_section("inputs", "input")

    def parameter_section(self, section: str, causality: str) -> tuple[Parameter, ...]:
        section_value = self.doc.get(section, {})
        if not isinstance(section_value, dict):
            raise ModelError(f"{self.where(section)}: write this section as a table [{section}] of name = value.")
        params = self.table(section_value, self.where(section), set(section_value))
        result = []
        for name, spec in params.items():
            where = self.where(section, key=name)
            if not isinstance(spec, dict):
                spec = {"value": spec}
            spec = self.table(spec, where, {"value", "unit", "bounds", "description"}, {"value"})
            bounds = spec.get("bounds", [-math.inf, math.inf])
            if not isinstance(bounds, list) or len(bounds) != 2:
                raise ModelError(f"{where}.bounds: expected [lower, upper], got {bounds!r}.")
            try:
                result.append(
                    Parameter(
                        name=name,
                        value=self.constant(spec["value"], f"{where}.value"),
                        unit=self.text(spec.get("unit", ""), f"{where}.unit"),
                        bounds=(self.bound(bounds[0], f"{where}.bounds"), self.bound(bounds[1], f"{where}.bounds")),
                        description=self.text(spec.get("description", ""), f"{where}.description"),
                        causality=causality,
                    )
                )
            except ExpressionError:
                raise
            except ModelError as exc:
                raise ModelError(f"{where}: {exc}") from None
        return tuple(result)

    def coordinates(self) -> tuple[Coordinate, ...]:
        allowed = {"name", "kind", "mass", "initial_position", "initial_velocity", "fixed_position", "fixed_velocity"}
        result = []
        for k, spec in enumerate(self.array("coordinates")):
            where = self.where("coordinates", k)
            spec = self.table(spec, where, allowed, {"name"})
            for flag in ("fixed_position", "fixed_velocity"):
                if not isinstance(spec.get(flag, False), bool):
                    raise ModelError(f"{where}.{flag}: expected true or false.")
            for key in ("mass", "initial_position", "initial_velocity"):
                if key in spec:
                    self.expr(spec[key], f"{where}.{key}")
            try:
                result.append(Coordinate(**spec))
            except ModelError as exc:
                raise ModelError(f"{where}: {exc}") from None
        return tuple(result)

    def mass_matrix(self) -> tuple[MassEntry, ...]:
        result = []
        for k, spec in enumerate(self.array("mass_matrix")):
            where = self.where("mass_matrix", k)
            spec = self.table(spec, where, {"row", "col", "value"}, {"row", "col", "value"})
            result.append(MassEntry(self.text(spec["row"], where), self.text(spec["col"], where),
                                    self.expr(spec["value"], where)))
        return tuple(result)

    def forces(self) -> tuple:
        result = []
        for k, spec in enumerate(self.array("forces")):
            where = self.where("forces", k)
            if not isinstance(spec, dict) or "type" not in spec or "name" not in spec:
                raise ModelError(f"{where}: every force element needs 'type' and 'name'.")
            cls = element_type(self.text(spec["type"], f"{where}.type"), where, self.registry)
            fields = {key: value for key, value in spec.items() if key != "type"}
            if cls is TableLoad:
                fields = self.table_fields(fields, where)
            allowed = {f.name for f in dataclasses.fields(cls)}
            unknown = sorted(set(fields) - allowed)
            if unknown:
                raise ModelError(
                    f"{where}: unknown key(s) {unknown} for element type '{cls.type_name}'. "
                    f"Allowed: {', '.join(sorted(allowed | {'type'}))}."
                )
            for key, value in fields.items():
                # Each entry of a list property (stages, branches, knots) adds terms to the law
                # and to its derivatives: bound the list so a model builds in bounded time.
                if isinstance(value, list) and len(value) > _MAX_LIST:
                    raise ModelError(f"{where}.{key}: {len(value)} entries; the limit is {_MAX_LIST}. Split the "
                                     "characteristic into several elements.")
            fields = {key: tuple(value) if isinstance(value, list) else value for key, value in fields.items()}
            try:
                result.append(cls(**fields))
            except ModelError as exc:
                raise ModelError(f"{where}: {exc}") from None
            except (TypeError, ValueError, OverflowError) as exc:
                raise ModelError(f"{where}: invalid values for element type '{cls.type_name}': {exc}.") from None
        return tuple(result)

    def table_fields(self, fields: dict, where: str) -> dict:
        """``file``/``column`` of a ``table_load`` to its ``times``/``values``.

        The file must resolve (symlinks and ``..`` followed) to a place inside the model
        file's folder unless external tables are allowed: a model file must not make the
        tool read other files.  Errors name the entry and never echo the file's content.
        """
        fields = dict(fields)
        if "file" not in fields or "column" not in fields:
            raise ModelError(f"{where}: a table_load needs 'file' (CSV with a 'time' column) and 'column'.")
        name = self.text(fields.pop("file"), f"{where}.file")
        column = self.text(fields.pop("column"), f"{where}.column")
        if "\0" in name:
            raise ModelError(f"{where}.file: {excerpt(name)} holds a NUL character; give a file name.")
        file = self.directory / name
        if self.tables is not None:
            if name not in self.tables:
                raise ModelError(f"{where}.file: {excerpt(name)} is not among the tables sent with the model; "
                                 "build the model source with ModelSource.from_path.")
            raw = self.tables[name]
        if self.tables is None and not self.allow_external_tables:
            folder = self.directory.resolve()
            if not file.resolve().is_relative_to(folder):
                raise ModelError(
                    f"{where}.file: {excerpt(name)} lies outside the model file's folder {str(folder)!r}; "
                    "put the table next to the model file, or pass --allow-external-tables if you trust "
                    "this model file."
                )
        try:
            if self.tables is None:
                raw = read_csv_bytes(file)
            if self.read_tables is not None:
                self.read_tables[name] = raw
            table = parse_csv(raw, str(file))
            values = table.column(column)
        except DataError as exc:
            raise ModelError(f"{where}: {exc}") from None
        fields["times"] = tuple(table.times)
        fields["values"] = tuple(values)
        return fields

    def constraints(self) -> tuple[Constraint, ...]:
        result = []
        for k, spec in enumerate(self.array("constraints")):
            where = self.where("constraints", k)
            spec = self.table(spec, where, {"name", "expression"}, {"name", "expression"})
            try:
                result.append(Constraint(self.text(spec["name"], where), self.expr(spec["expression"], where)))
            except ModelError as exc:
                raise ModelError(f"{where}: {exc}") from None
        return tuple(result)

    def prescribed(self) -> tuple[PrescribedMotion, ...]:
        result = []
        for k, spec in enumerate(self.array("prescribed")):
            where = self.where("prescribed", k)
            spec = self.table(spec, where, {"coordinate", "expression"}, {"coordinate", "expression"})
            result.append(PrescribedMotion(self.text(spec["coordinate"], where), self.expr(spec["expression"], where)))
        return tuple(result)

    def outputs(self) -> tuple[Output, ...]:
        result = []
        for k, spec in enumerate(self.array("outputs")):
            where = self.where("outputs", k)
            spec = self.table(spec, where, {"name", "expression", "unit", "description"}, {"name", "expression"})
            try:
                result.append(
                    Output(
                        name=self.text(spec["name"], f"{where}.name"),
                        expression=self.expr(spec["expression"], f"{where}.expression"),
                        unit=self.text(spec.get("unit", ""), f"{where}.unit"),
                        description=self.text(spec.get("description", ""), f"{where}.description"),
                    )
                )
            except ModelError as exc:
                raise ModelError(f"{where}: {exc}") from None
        return tuple(result)
