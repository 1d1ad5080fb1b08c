"""FMU variables of every type: their kinds, FMI 3 array dimensions, and names as addressed.

An FMU variable is numeric or not, scalar or (FMI 3) an array.  Everything the
identification reads or writes is one *number* addressed by name:

* a scalar variable by its name (``c``, or an FMI 2 scalarized name such as ``x[1]``,
  which is an ordinary name there);
* one element of an FMI 3 array variable as ``A[i,j]``: indices 1-based, as Modelica and
  the FMI variable naming convention ("structured") print them, one per dimension, and the
  element is the row-major (C order) position that FMI 3 uses to serialize arrays
  (FMI 3.0, sec. 2.2.11).  fmpy's own result stores a whole array as one column with a
  shape and has no element names; ``A[1,2]`` is the name the modelDescription's
  convention, Modelica and fmpy's GUI listing of array elements use.  An exact variable
  name always wins, so an FMI 2 FMU whose scalar variable is called ``A[1,2]`` keeps it.

Kinds (:data:`FMI2_KINDS`, :data:`FMI3_KINDS`): ``float64``, ``float32``, ``int8`` ...
``uint64``, ``boolean``, ``enumeration``, ``string`` (and FMI 3 ``binary``, ``clock``).
Numeric kinds travel as floats (a Boolean is 0.0 or 1.0) and are written back through the
getter/setter of their own type in the worker (:meth:`~.worker._Instance.get_values`).
Only ``float64`` and ``float32`` parameters can be identified; integers, Booleans and
enumerations may be data columns, inputs and ``--set`` values.

:class:`VariableRef` is the resolved address; on the wire to the worker it is a plain
int (a ``float64`` scalar, what every caller used before) or ``(kind, vr, element,
size)`` (:meth:`VariableRef.wire`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import FmuError
from ..text import excerpt

if TYPE_CHECKING:
    from lxml import etree

__all__ = ["FLOAT_KINDS", "FMI2_KINDS", "FMI3_KINDS", "INTEGER_RANGES", "MAX_ARRAY_ELEMENTS", "NUMERIC_KINDS",
           "DeclaredVariables", "FmuVariable", "VariableRef", "array_shapes", "check_names", "count_error",
           "declared_variable", "element_names", "held_inputs",
           "identifiable_parameters_text", "kind_label", "numeric_names",
           "parse_start", "reference_key", "resolve", "resolve_as", "resolve_parameter", "start_value_refusal",
           "whole_number"]

#: FMI 2 type element -> kind (Integer is 32-bit, enumerations are set as Integer).
FMI2_KINDS = {"Real": "float64", "Integer": "int32", "Boolean": "boolean", "Enumeration": "enumeration",
              "String": "string"}
#: FMI 3 variable element -> kind.
FMI3_KINDS = {"Float64": "float64", "Float32": "float32", "Int8": "int8", "UInt8": "uint8", "Int16": "int16",
              "UInt16": "uint16", "Int32": "int32", "UInt32": "uint32", "Int64": "int64", "UInt64": "uint64",
              "Boolean": "boolean", "Enumeration": "enumeration", "String": "string", "Binary": "binary",
              "Clock": "clock"}
FLOAT_KINDS = frozenset({"float64", "float32"})
#: Value range of each integer kind (enumerations are Integer in FMI 2 and Int64 in FMI 3).
INTEGER_RANGES = {f"{sign}int{bits}": ((0, 2**bits - 1) if sign else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1))
                  for sign in ("", "u") for bits in (8, 16, 32, 64)}
INTEGER_RANGES["enumeration"] = INTEGER_RANGES["int64"]
NUMERIC_KINDS = FLOAT_KINDS | frozenset(INTEGER_RANGES) | {"boolean"}

_LABELS = {"float64": "a Real", "float32": "a Float32", "boolean": "a Boolean", "enumeration": "an Enumeration",
           "string": "a String", "binary": "a Binary", "clock": "a Clock"}
#: Anything that looks like an element address ``base[...]``; the indices are checked apart.
_ELEMENT = re.compile(r"^(?P<base>.+?)\[(?P<indices>[^\[\]]*)\]$")
#: One index as the canonical name prints it: ASCII digits only (``\d`` would take any Unicode
#: digit), at most 9 of them (no array has 10**9 elements per dimension; longer strings would
#: only feed int() a denial of service), no sign, no white space.
_INDEX = re.compile(r"[0-9]{1,9}")
#: FMI 2 value references are unique per base type only (FMI 2.0, sec. 2.2.7: Real,
#: Integer/Enumeration, Boolean, String); FMI 3 ones are unique across all variables.
_FMI2_REFERENCE_CLASS = {"float64": "Real", "int32": "Integer", "enumeration": "Integer", "boolean": "Boolean",
                         "string": "String"}
#: Elements of one FMI 3 array variable, and of all of them together (each element is a name;
#: issue 31, finding 4: bounded before anything is allocated for them).
MAX_ARRAY_ELEMENTS = 1_000_000


@dataclasses.dataclass(frozen=True)
class FmuVariable:
    """One variable of the model description (fields named as in the XML).

    ``kind`` is its type (see the module docstring: ``float64``, ``float32``, ``int8`` ...
    ``uint64``, ``boolean``, ``enumeration``, ``string``, ...); ``shape`` the resolved
    dimensions of an FMI 3 array (``()`` for a scalar); an array's start values are
    ``start_values`` (row-major), its ``start`` is None.  ``type`` is the XML element name.
    """

    name: str
    valueReference: int
    causality: str
    variability: str
    type: str
    start: float | None
    nominal: float | None
    unit: str
    min: float
    max: float
    initial: str | None = None
    kind: str = "float64"
    shape: tuple[int, ...] = ()
    start_values: tuple[float, ...] | None = None

    @property
    def is_real(self) -> bool:
        """A real scalar (Float64 or Float32): what can be identified and set as a real."""
        return self.kind in FLOAT_KINDS and not self.shape


class DeclaredVariables(Protocol):
    """What the functions of this module read of an FMU: its file (for messages), its FMI major
    version and its declared variables by name.  An :class:`~.archive.FmuArchive` is one."""

    @property
    def path(self) -> Path: ...

    @property
    def fmi_version(self) -> int: ...

    @property
    def variables(self) -> Mapping[str, FmuVariable]: ...


def count_error(path: Path | str, what: str, value: int, limit: int) -> FmuError:
    """The one error for a count of the model description above its limit."""
    return FmuError(f"{Path(path).name}: modelDescription.xml declares {what} = {value}, above the limit of {limit} "
                    "this tool accepts; the FMU is refused before anything is allocated for it. Obtain a correct FMU "
                    "from its author.")


def kind_of(type_tag: str, fmi_version: int) -> str:
    """The kind of an FMI type element name (``Real``, ``Float32``, ...); unknown tags pass
    through lower-cased (they are then not numeric)."""
    table = FMI3_KINDS if fmi_version == 3 else FMI2_KINDS
    return table.get(type_tag, type_tag.lower())


def kind_label(kind: str) -> str:
    """``kind`` for a message: "a Real", "an Int32", "a Boolean", ..."""
    if kind in _LABELS:
        return _LABELS[kind]
    if kind in INTEGER_RANGES:
        name = kind.replace("uint", "UInt").replace("int", "Int")
        return ("an " if name.startswith(("I", "U")) else "a ") + ("Integer" if kind == "int32" else name)
    return f"a {kind}"


def parse_start(text: str | None, kind: str, size: int | None) -> tuple[float | None, tuple[float, ...] | None]:
    """A start attribute as a float (scalars, ``size`` None) or a row-major tuple of
    floats (arrays: ``size`` values separated by white space); (None, None) if absent,
    not numeric or of another length.  Booleans give 1.0 / 0.0."""
    if text is None or kind not in NUMERIC_KINDS:
        return None, None
    values: list[float] = []
    for token in text.split():
        if kind == "boolean" and token in ("true", "false"):
            values.append(1.0 if token == "true" else 0.0)
            continue
        try:
            values.append(float(token))
        except ValueError:
            return None, None
    if size is None:
        return (values[0], None) if len(values) == 1 else (None, None)
    return (None, tuple(values)) if len(values) == size else (None, None)


def whole_number(value: float, kind: str) -> int | None:
    """``value`` as an int of an integer kind (or 0/1 of a Boolean), None if it is not a
    whole number in the kind's range."""
    if kind == "boolean":
        return int(value) if value in (0.0, 1.0) else None
    low, high = INTEGER_RANGES[kind]
    if not (math.isfinite(value) and value == int(value) and low <= int(value) <= high):
        return None
    return int(value)


def array_shapes(root: etree._Element, path: Path | str) -> dict[str, tuple[int, ...]]:
    """The shape of every FMI 3 array variable of the model description ``root``.

    A ``<Dimension>`` has a literal ``start`` or the ``valueReference`` of a structural
    parameter (or constant) of an integer type whose start value is the size.  A dimension
    that resolves to nothing usable raises FmuError naming the variable; so does an array of
    more than :data:`MAX_ARRAY_ELEMENTS` elements, or all arrays together above it
    (every element gets a name, :func:`element_names`, so the count is bounded before that).
    """
    name_of = Path(path).name
    variables = list(root.iterfind("ModelVariables/*"))
    by_reference = {element.get("valueReference"): element for element in variables}
    shapes: dict[str, tuple[int, ...]] = {}
    total = 0
    for element in variables:
        dimensions = element.findall("Dimension")
        if not dimensions:
            continue
        name = element.get("name", "")
        shape = []
        for k, dimension in enumerate(dimensions, start=1):
            size = _dimension_size(dimension, by_reference)
            if isinstance(size, str):
                raise FmuError(f"{name_of}: dimension {k} of the array variable {name!r} {size}; the FMU is "
                               "refused. Obtain an FMU whose array dimensions resolve (FMI 3.0, sec. 2.4.7.8).")
            shape.append(size)
            # Checked per dimension too: a product with a zero extent hides any other extent.
            if size > MAX_ARRAY_ELEMENTS:
                raise count_error(path, f"the size of dimension {k} of the array variable {excerpt(name, 80)}", size,
                                  MAX_ARRAY_ELEMENTS)
            if math.prod(shape) > MAX_ARRAY_ELEMENTS:
                raise count_error(path, f"the number of elements of the array variable {excerpt(name, 80)}",
                                  math.prod(shape), MAX_ARRAY_ELEMENTS)
        shapes[name] = tuple(shape)
        total += math.prod(shape)
        if total > MAX_ARRAY_ELEMENTS:
            raise count_error(path, f"the number of array elements of all variables up to {excerpt(name, 80)}",
                              total, MAX_ARRAY_ELEMENTS)
    return shapes


def _dimension_size(dimension, by_reference: Mapping[str | None, Any]) -> int | str:
    """The size of one ``<Dimension>``, or why there is none (a message fragment)."""
    literal, reference = dimension.get("start"), dimension.get("valueReference")
    if literal is not None:
        try:
            size = int(literal)
        except ValueError:
            return f"has start={literal!r}, not a whole number"
        return size if size >= 0 else f"has the negative size {size}"
    if reference is None:
        return "has neither start nor valueReference"
    target = by_reference.get(reference)
    if target is None:
        return f"refers to valueReference {reference}, which no variable has"
    who = f"refers to {target.get('name')!r} (valueReference {reference})"
    if target.tag not in FMI3_KINDS or kind_of(target.tag, 3) not in INTEGER_RANGES:
        return f"{who}, which is not an integer variable"
    if target.get("causality") != "structuralParameter" and target.get("variability") != "constant":
        return f"{who}, which is neither a structural parameter nor a constant"
    try:
        size = int(target.get("start", ""))
    except ValueError:
        return f"{who}, which has no whole-number start value"
    return size if size >= 0 else f"{who}, whose start value {size} is negative"


@dataclasses.dataclass(frozen=True)
class VariableRef:
    """One number of an FMU, as addressed by name.

    Attributes
    ----------
    name : str
        As addressed (``c``, ``A[1,2]``).
    valueReference : int
    kind : str
        ``float64``, ``int32``, ``boolean``, ... (see the module docstring).
    element : int or None
        Row-major position in an array variable (0-based), None for a scalar.
    size : int
        Number of elements of the whole variable (1 for a scalar).
    """

    name: str
    valueReference: int
    kind: str
    element: int | None = None
    size: int = 1

    def wire(self) -> int | tuple[str, int, int | None, int]:
        """The reference as the worker takes it: an int for a float64 scalar, else
        ``(kind, valueReference, element, size)``."""
        if self.kind == "float64" and self.element is None:
            return self.valueReference
        return (self.kind, self.valueReference, self.element, self.size)


def element_names(variable: FmuVariable) -> list[str]:
    """The addressable names of a variable: itself, or ``A[1,1]``, ``A[1,2]``, ... (row-major)."""
    shape = variable.shape
    if not shape:
        return [variable.name]
    names = []
    for flat in range(math.prod(shape)):
        indices, rest = [], flat
        for extent in reversed(shape):
            indices.append(rest % extent + 1)
            rest //= extent
        names.append(f"{variable.name}[{','.join(map(str, reversed(indices)))}]")
    return names


def numeric_names(archive: DeclaredVariables, causality: str, kinds: Iterable[str] = NUMERIC_KINDS) -> list[str]:
    """Addressable names (array elements expanded) of the variables of ``causality`` whose
    kind is one of ``kinds``, in model-description order."""
    wanted = frozenset(kinds)
    return [name for v in archive.variables.values() if v.causality == causality and v.kind in wanted
            for name in element_names(v)]


def _array_text(shape: tuple[int, ...]) -> str:
    """'an array of 3 elements' (one dimension), 'a 2x3 array' (several)."""
    if len(shape) == 1:
        return f"an array of {shape[0]} element{'' if shape[0] == 1 else 's'}"
    return f"a {'x'.join(map(str, shape))} array"


def _address_hint(variable: FmuVariable) -> str:
    """'A[i,j] with i in 1..2, j in 1..3' (or 'with i,j in 1..2' for equal extents)."""
    letters = "ijklmnopqrstuvwxyz"[: len(variable.shape)]
    address = f"{variable.name}[{','.join(letters)}]"
    if len(set(variable.shape)) == 1:
        return f"{address} with {','.join(letters)} in 1..{variable.shape[0]}"
    return f"{address} with " + ", ".join(f"{c} in 1..{n}" for c, n in zip(letters, variable.shape))


def _role(variable: FmuVariable) -> str:
    return variable.causality if variable.causality in ("parameter", "input", "output") else "variable"


def resolve(archive: DeclaredVariables, name: str) -> VariableRef:
    """The number addressed by ``name``: a scalar variable, or an element ``A[i,j]`` of an
    FMI 3 array (1-based indices, row-major; see the module docstring).

    An element has exactly one name, ``A[i,j]`` as :func:`element_names` prints it: ASCII
    digits, no leading zeros, no white space.  Other spellings of the same element
    (``A[ 1,2]``, ``A [1,2]``, ``A[01,2]``) are refused with the canonical name, since a
    second name for one number would make it two parameters (one of them without effect
    on the outputs) or let a ``--set`` value silently replace an identified one.

    Raises
    ------
    FmuError
        Unknown name; an array addressed without (or with wrong, or wrongly spelled)
        indices, naming its dimensions and how to address an element; indices on a
        scalar; a String (or Binary, Clock) variable.
    """
    fmu = archive.path.name
    variable = archive.variables.get(name)
    element: int | None = None
    if variable is None:
        variable, element = _element(archive, name)
    if variable.kind not in NUMERIC_KINDS:
        raise FmuError(f"{fmu}: {_role(variable)} {variable.name!r} is {kind_label(variable.kind)}; only numeric "
                       "variables can be outputs, inputs or parameters here. Use a numeric variable.")
    if variable.shape and element is None:
        raise FmuError(f"{fmu}: {_role(variable)} {variable.name!r} is {_array_text(variable.shape)}: address "
                       f"one element as {_address_hint(variable)}.")
    size = math.prod(variable.shape) if variable.shape else 1
    return VariableRef(name=name, valueReference=variable.valueReference, kind=variable.kind, element=element,
                       size=size)


def _element(archive: DeclaredVariables, name: str) -> tuple[FmuVariable, int]:
    """The array variable and row-major position addressed by ``name`` (no variable's own
    name), or FmuError naming the fix."""
    fmu = archive.path.name
    match = _ELEMENT.match(name)
    variable = archive.variables.get(match["base"].strip()) if match else None
    if match is None or variable is None:
        raise FmuError(f"{fmu}: no variable named {excerpt(name, 80)}; check the spelling against the FMU's "
                       "modelDescription.xml.")
    if not variable.shape:
        raise FmuError(f"{fmu}: {_role(variable)} {variable.name!r} is a scalar, not an array: address it as "
                       f"{variable.name} (without [{excerpt(match['indices'], 40)[1:-1]}]).")
    tokens = [token.strip() for token in match["indices"].split(",")]
    wrong = FmuError(f"{fmu}: {excerpt(name, 80)} is not an element of {_role(variable)} {variable.name!r}, "
                     f"{_array_text(variable.shape)}: address one element as {_address_hint(variable)}.")
    if not all(_INDEX.fullmatch(token) for token in tokens):
        raise wrong
    indices = [int(token) for token in tokens]
    if len(indices) != len(variable.shape) or not all(1 <= i <= n for i, n in zip(indices, variable.shape)):
        raise wrong
    canonical = f"{variable.name}[{','.join(map(str, indices))}]"
    if name != canonical:
        raise FmuError(f"{fmu}: {name!r} is element {canonical} of {_role(variable)} {variable.name!r}; write it as "
                       f"{canonical} (no spaces, no leading zeros), the one name of that element.")
    element = 0
    for i, n in zip(indices, variable.shape):
        element = element * n + (i - 1)
    return variable, element


def held_inputs(archive: DeclaredVariables, names: Iterable[str]) -> frozenset[str]:
    """Those of the input ``names`` that are discrete: not a continuous Real (FMI 2.0, sec.
    2.2.7: Integer, Boolean and Enumeration variables are discrete; a Real may be declared
    discrete).  Such an input is piecewise constant, and a Model Exchange FMU accepts it only
    in Initialization and Event Mode (FMI 2.0, sec. 3.2.3; FMI 3.0, sec. 3.2.1)."""
    declared = {name: declared_variable(archive, name) for name in names}
    return frozenset(name for name, v in declared.items() if v.kind not in FLOAT_KINDS or v.variability != "continuous")


def declared_variable(archive: DeclaredVariables, name: str) -> FmuVariable:
    """The declared variable addressed by ``name`` (the array of an element ``A[i,j]``;
    FmuError as :func:`resolve`): found by name, never by value reference, which FMI 2
    shares between base types (:func:`reference_key`)."""
    resolve(archive, name)
    variable = archive.variables.get(name)
    return variable if variable is not None else _element(archive, name)[0]


def reference_key(archive: DeclaredVariables, ref: VariableRef) -> tuple[str, int, int | None]:
    """What makes two addressed numbers the same number of the FMU: (base type class, value
    reference, element).  FMI 2 value references are unique per base type only (FMI 2.0,
    sec. 2.2.7: Real, Integer and Enumeration, Boolean, String), so a Real and an Integer
    with valueReference 6 are two numbers; two FMI 2 variables of one class sharing a
    reference are aliases (one number).  FMI 3 references are unique across all types."""
    group = _FMI2_REFERENCE_CLASS.get(ref.kind, ref.kind) if archive.fmi_version == 2 else ""
    return group, ref.valueReference, ref.element


def resolve_as(archive: DeclaredVariables, name: str, causality: str) -> tuple[VariableRef, FmuVariable] | None:
    """``(ref, variable)`` if ``name`` addresses a variable of ``causality`` (FmuError for
    such a variable addressed wrongly or not numeric), None if it names no such variable."""
    variable = archive.variables.get(name)
    if variable is None:
        match = _ELEMENT.match(name)
        variable = archive.variables.get(match["base"].strip()) if match else None
    if variable is None or variable.causality != causality:
        return None
    return resolve(archive, name), declared_variable(archive, name)


def start_value_refusal(variable: FmuVariable) -> str | None:
    """Why the start value of a non-parameter ``variable`` cannot be identified or set (None:
    it can: a continuous real output or local with ``initial="exact"``).

    FMI 2.0, sec. 3.2.3 (and FMI 3.0, sec. 3.2.1 alike): before Initialization Mode an importer
    may set a variable that is not constant and has ``initial="exact"`` or ``"approx"``, in
    Initialization Mode one with ``initial="exact"``; only ``"exact"`` makes the value the one
    the simulation starts from (``"approx"`` is a guess the FMU's initialization may change,
    ``"calculated"`` is computed by the FMU).  A state's start value (VanDerPol's ``x0``) is
    such a variable, and acts as a fixed parameter: set before initialization like one.
    """
    where = f"causality {variable.causality!r}"
    if variable.causality not in ("output", "local"):
        return f"it is no parameter and no output or local variable ({where}): it has no start value to set"
    if variable.kind not in FLOAT_KINDS or variable.shape:
        return f"it is {kind_label(variable.kind)}{' array' if variable.shape else ''} variable, not a real scalar"
    if variable.variability not in ("continuous", "discrete"):
        return f"its variability is {variable.variability!r}: the FMU does not let it be set"
    if variable.initial != "exact":
        how = {"calculated": "the FMU computes it during initialization (initial=\"calculated\")",
               "approx": "its start value is only a guess the FMU's initialization may change (initial=\"approx\")",
               None: "it declares no initial=\"exact\" start value"}.get(variable.initial,
                                                                          f"initial={variable.initial!r}")
        return f"{how}, so setting it does not set the simulation's start"
    if variable.start is None:
        return "it declares no start value"
    return None


def resolve_parameter(archive: DeclaredVariables, name: str) -> tuple[VariableRef, FmuVariable] | None:
    """``(ref, variable)`` if ``name`` is a parameter or a start value that acts as one (a real
    output or local with ``initial="exact"``: :func:`start_value_refusal`), None if neither."""
    found = resolve_as(archive, name, "parameter")
    if found is not None:
        return found
    variable = archive.variables.get(name)
    if variable is not None and variable.causality != "parameter" and start_value_refusal(variable) is None:
        return resolve(archive, name), variable
    return None


def _not_a_parameter(archive: DeclaredVariables, name: str) -> str:
    """The end of the refusal of ``name`` as a parameter: why, when it names another variable."""
    variable = archive.variables.get(name)
    if variable is None or variable.causality == "parameter":
        return ""
    return f" {name!r} is a variable whose start value cannot be identified: {start_value_refusal(variable)}."


def identifiable_parameters_text(archive: DeclaredVariables) -> str:
    """What can be identified in ``archive`` and, where nothing can, what exists and what to
    do instead (issue 32: the refusal once listed "Parameters: ." for an FMU whose parameters
    are all structural or discrete)."""
    real = [name for v in archive.variables.values()
            if v.causality == "parameter" and v.kind in FLOAT_KINDS and v.variability in ("fixed", "tunable")
            for name in element_names(v)]
    starts = sorted(v.name for v in archive.variables.values()
                    if v.causality != "parameter" and start_value_refusal(v) is None)
    also = f" Start values (initial=\"exact\"): {', '.join(starts[:40])}." if starts else ""
    if real:
        shown = ", ".join(sorted(real)[:40]) + (f" and {len(real) - 40} more" if len(real) > 40 else "")
        return f"Parameters: {shown}.{also}"
    if starts:
        return also.strip()
    others = []
    for v in archive.variables.values():
        if v.causality == "structuralParameter":
            others.append(f"{v.name} (structural parameter: it sizes arrays, fix it with --set {v.name}=VALUE)")
        elif v.causality == "parameter" and v.kind not in FLOAT_KINDS:
            others.append(f"{v.name} ({kind_label(v.kind)} parameter: fix it with --set {v.name}=VALUE)")
        elif v.causality in ("parameter", "calculatedParameter"):
            others.append(f"{v.name} ({v.causality}, variability {v.variability}: not settable for a fit)")
    listed = "; ".join(others[:20]) + (f"; and {len(others) - 20} more" if len(others) > 20 else "")
    return (f"It has no real (Float32/Float64) parameter of variability fixed or tunable, so nothing of it can "
            f"be identified{': its parameters are ' + listed if others else ' (it declares no parameter at all)'}. "
            "Export the model with the quantity declared as a real parameter (causality \"parameter\", "
            "variability \"fixed\" or \"tunable\"), or, for a model file, identify that file instead of the FMU.")


def check_names(archive: DeclaredVariables, names: Sequence[str], experiments: Sequence[Any]) -> None:
    """Check the identified parameters ``names`` and every experiment's data columns,
    ``--set`` values and input columns against the FMU (FmuError naming the fix).

    * identified parameters: ``float64``/``float32`` parameters (scalars or array elements),
      fixed or tunable; an integer, Boolean or enumeration parameter is refused by name;
    * data columns: any numeric output, array elements included;
    * ``--set`` values: any numeric parameter; integers must be whole numbers in range;
    * input columns: any numeric input.

    ``experiments`` are :class:`~.experiment.FmuExperiment` (``name``, ``cost.channels``,
    ``values``, ``inputs``).
    """
    fmu = archive.path.name
    identified: dict[tuple[str, int, int | None], str] = {}
    for name in names:
        found = resolve_parameter(archive, name)
        if found is None:
            raise FmuError(f"{fmu}: no real parameter named {name!r}.{_not_a_parameter(archive, name)} "
                           f"{identifiable_parameters_text(archive)}")
        ref, variable = found
        if ref.kind not in FLOAT_KINDS:
            raise FmuError(f"{fmu}: {name!r} is {kind_label(ref.kind)} parameter; only real parameters can be "
                           f"identified — fix it with --set {name}=VALUE instead.")
        if variable.causality == "parameter" and variable.variability not in ("fixed", "tunable"):
            raise FmuError(f"{fmu}: parameter {name!r} has variability {variable.variability!r}; only fixed or "
                           "tunable ones can be identified.")
        key = reference_key(archive, ref)
        if key in identified:
            raise FmuError(f"{fmu}: {identified[key]!r} and {name!r} are the same parameter (valueReference "
                           f"{ref.valueReference}); identify it once: drop {name!r} from --params.")
        identified[key] = name
    for exp in experiments:
        for channel in exp.cost.channels:
            if resolve_as(archive, channel, "output") is None:
                outputs = numeric_names(archive, "output")
                raise FmuError(
                    f"data column {channel!r} of '{exp.name}' matches no output of {fmu}. "
                    f"Outputs: {', '.join(outputs) or 'none'}. Rename or drop the column."
                )
        for name, value in exp.values.items():
            found = resolve_parameter(archive, name)
            if found is None:
                raise FmuError(f"'{exp.name}': {name!r} is not a parameter of {fmu}.{_not_a_parameter(archive, name)}")
            ref = found[0]
            twin = identified.get(reference_key(archive, ref))
            if twin is not None and twin != name:
                raise FmuError(f"'{exp.name}': --set {name}: {name!r} is the identified parameter {twin!r} under "
                               f"another name (valueReference {ref.valueReference}), so the set value would replace "
                               f"the identified one; drop --set {name} or identify {name!r} instead.")
            if ref.kind not in FLOAT_KINDS and whole_number(float(value), ref.kind) is None:
                low, high = (0, 1) if ref.kind == "boolean" else INTEGER_RANGES[ref.kind]
                raise FmuError(f"'{exp.name}': --set {name}={value!r}: {name!r} is {kind_label(ref.kind)} parameter; "
                               f"give a whole number in [{low}, {high}]" + (" (0 = false, 1 = true)."
                                                                           if ref.kind == "boolean" else "."))
        if exp.inputs is not None:
            for column in exp.inputs.columns:
                if resolve_as(archive, column, "input") is None:
                    inputs = numeric_names(archive, "input")
                    raise FmuError(
                        f"input column {column!r} of '{exp.name}' matches no input of {fmu}. "
                        f"Inputs: {', '.join(inputs) or 'none'}."
                    )
