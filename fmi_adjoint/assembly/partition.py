"""A model as component instances: every item of the equations with its own local symbols.

The equations of motion of the dissertation, Sec. 2.3.4, eq. (2.47),
``M(q) a + C_q^T lambda = Q(q, v, t)``, ``C(q, t) = 0``, and the outputs ``y`` are sums of
contributions that each touch a few coordinates:

* a **mass block**: the mass-matrix entries of a set of coordinates that only couple among
  themselves (a spatial body's ``4 G^T J G`` over its Euler parameters, eq. (2.36); a point
  mass's diagonal entry), or one *group* of entries that add to the rest
  (:class:`fmi_adjoint.model.MassEntry`: a piece of a floating-frame body's kinetic energy); its
  quadratic velocity terms (Sec. 2.3.4) are formed once per type (:func:`.kernels.derive_type`);
* a **force part**: the generalized forces of one force element, or of one multibody
  component (a bushing, a body's weight; :class:`fmi_adjoint.mbs.elements.GeneralizedForces`);
* a **constraint group**: the rows of one joint (``Constraint.group``), or one constraint;
* an **output**: one row of ``y``, with the multipliers it reads.

:func:`partition` parses the model item by item (:func:`fmi_adjoint.model.parse_items`) and
rewrites each contribution in *local* symbols: the coordinates it touches become ``q_0 ..
q_(k-1)`` (``v_i``, ``a_i`` alike), its constraint rows' multipliers (or the multipliers an
output reads) ``lam_j``, the parameters it reads and the numbers in it (marker positions, axes,
constants: every float except exponents; and the named numbers of a mass group,
``MassEntry.data``, which stay slots where they are zero) the slots ``p_0 ..`` and ``d_0 ..``.
Two instances whose local
expressions are the same tree are one :class:`ComponentType`, derived and compiled once
(:mod:`.kernels`); an :class:`Instance` keeps only index arrays and the numbers of its data
slots.  This is the element / assembly split of finite-element codes: the model's matrices are
the sums of the instances' local matrices scattered by their index arrays (:mod:`.plan`).

Models the local form cannot carry go through the whole-system derivation
(:func:`fmi_adjoint.equations.differentiate`) instead; :func:`partition` returns the reason
(:class:`WholeSystem`): time tables and designed input signals (opaque functions of ``t``),
numeric force elements (opaque Python callables), and massless coordinates held by no
constraint (internal nodes of Maxwell elements, whose initialization rows are built from the
sum of the forces on them, :func:`fmi_adjoint.equations._algebraic_rows`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import sympy as sp
from sympy.core.function import AppliedUndef

from ..cache import fingerprint
from ..equations import canonical_text
from ..forces.numeric import AbstractNumericElement
from ..model import Model, ParsedModel, parse_items
from ..structured import ParsedQuadratic, ParsedTerm
from .structured_types import StructuredType

__all__ = ["KINDS", "ComponentType", "Instance", "Partition", "WholeSystem", "partition"]

#: The kinds of component: equation contributions (mass, forces, constraints) and outputs.
KINDS = ("equations", "outputs")


@dataclasses.dataclass(frozen=True, eq=False)
class ComponentType:
    """One kind of contribution in local symbols (module docstring), derived once.

    Attributes
    ----------
    kind : str
        ``"equations"`` (``M``, ``Q``, ``C``) or ``"outputs"`` (``Y``).
    n, m, n_y, n_p, n_d : int
        Local coordinates, multipliers (its own constraint rows for equations, the
        multipliers read for outputs), outputs, parameter slots (``p_k``: model parameters,
        differentiated) and data slots (``d_k``: numbers of the instance, not differentiated).
    M, Q, C, Y : sympy.Matrix
        Local mass block (``n x n``), generalized forces (``n x 1``; the quadratic velocity terms
        of ``M`` are added when the type is derived), constraint rows (``m x 1``), outputs
        (``n_y x 1``).
    key : str
        Fingerprint of the canonical text of the above: the build cache's key of its kernels.
    """

    kind: str
    n: int
    m: int
    n_y: int
    n_p: int
    n_d: int
    M: sp.Matrix
    Q: sp.Matrix
    C: sp.Matrix
    Y: sp.Matrix
    key: str


@dataclasses.dataclass(frozen=True)
class Instance:
    """One component of a model: its type and where its local symbols live in the model.

    Attributes
    ----------
    type : int
        Index into :attr:`Partition.types`.
    coordinates : tuple of int
        Model coordinate of each local coordinate.
    multipliers : tuple of int
        Model constraint row of each local multiplier.
    outputs : tuple of int
        Model output row of each local output.
    parameters : tuple of int
        Model parameter of each parameter slot.
    data : tuple of float
        The value of each data slot.
    what : str
        What it is, for messages (``constraint group 'joint 'j1' (revolute)'``).
    """

    type: int
    coordinates: tuple[int, ...]
    multipliers: tuple[int, ...]
    outputs: tuple[int, ...]
    parameters: tuple[int, ...]
    data: tuple[float, ...]
    what: str = ""


@dataclasses.dataclass(frozen=True, eq=False)
class Partition:
    """A model as component instances (module docstring).

    Attributes
    ----------
    parsed : ParsedModel
        The model's parsed items (global symbols): the initial guesses ``q0``, ``v0`` are
        generated from it as one small function of the parameters.
    types : tuple of ComponentType or StructuredType
        Types derived from expressions, and structured terms (:mod:`.structured_types`),
        whose kernels are written from their patterns.
    instances : tuple of Instance
    """

    parsed: ParsedModel
    types: tuple[ComponentType | StructuredType, ...]
    instances: tuple[Instance, ...]

    @property
    def model(self) -> Model:
        return self.parsed.model

    @property
    def size(self) -> int:
        """Expression nodes of all instances (each type's local expressions, once per instance):
        what a whole-system derivation would differentiate."""
        per_type = [t.nodes if isinstance(t, StructuredType) else
                    sum(sum(1 for _ in sp.preorder_traversal(e)) for matrix in (t.M, t.Q, t.C, t.Y) for e in matrix)
                    for t in self.types]
        return sum(per_type[i.type] for i in self.instances)

    @property
    def mass_depends_on_q(self) -> bool:
        return any(any(entry.free_symbols & set(local_symbols(t.n, t.m, t.n_p, t.n_d)["q"]) for entry in t.M)
                   for t in self.types if isinstance(t, ComponentType) and t.kind == "equations")


@dataclasses.dataclass(frozen=True)
class WholeSystem:
    """Why a model is derived as a whole instead of by components (module docstring)."""

    reason: str


def local_symbols(n: int, m: int, n_p: int, n_d: int) -> dict[str, tuple[sp.Symbol, ...] | sp.Symbol]:
    """Symbols of the local argument groups, named like the model's (``q_0``, ``p_2``, ``d_1``)."""
    def group(name: str, size: int) -> tuple[sp.Symbol, ...]:
        return tuple(sp.Symbol(f"{name}_{k}", real=True) for k in range(size))

    return {"q": group("q", n), "v": group("v", n), "a": group("a", n), "lam": group("lam", m),
            "t": sp.Symbol("t", real=True), "p": group("p", n_p), "d": group("d", n_d)}


class _Localizer:
    """Rewrites the contributions of one model in local symbols and collects the types."""

    def __init__(self, parsed: ParsedModel, shortcut: bool = True):
        self.parsed = parsed
        self.shortcut = shortcut
        self.coordinate_of = {}
        for i, (q, v, a) in enumerate(zip(parsed.q, parsed.v, parsed.a)):
            self.coordinate_of[q] = self.coordinate_of[v] = self.coordinate_of[a] = i
        self.multiplier_of = {s: k for k, s in enumerate(parsed.lam)}
        self.parameter_of = {s: k for k, s in enumerate(parsed.p)}
        self.data_of = dict(parsed.mass_data)  # named numbers of grouped mass entries
        self.types: list[ComponentType | StructuredType] = []
        self.by_key: dict[str, int] = {}
        self.instances: list[Instance] = []
        # The shortcut past the rewriting (:class:`_Shapes`): a signature seen before -> the
        # type and, for each of its data slots, the index of its float in the signature's.
        self.shapes = _Shapes()
        self.seen: dict[tuple, tuple[int, tuple[int, ...]]] = {}

    def coordinates_in(self, expressions: Iterable[sp.Expr]) -> set[int]:
        found: set[int] = set()
        for expr in expressions:
            found.update(self.coordinate_of[s] for s in expr.free_symbols if s in self.coordinate_of)
        return found

    def add(self, kind: str, what: str, coordinates: Sequence[int], multipliers: Sequence[int],
            outputs: Sequence[int], M: sp.Matrix, Q: sp.Matrix, C: sp.Matrix, Y: sp.Matrix) -> None:
        """Add one instance: ``M, Q, C, Y`` in the model's symbols, over ``coordinates`` (all
        the coordinates it touches, in the order of its local symbols) and ``multipliers``."""
        parsed = self.parsed
        n, m = len(coordinates), len(multipliers)
        # Row by row: a matrix's element-wise iteration goes through __getitem__, which was a
        # tenth of the partition of a 1 000-coordinate model (issue 24).
        expressions = [e for matrix in (M, Q, C, Y) for row in matrix.tolist() for e in row]
        params = sorted({self.parameter_of[s] for e in expressions for s in e.free_symbols if s in self.parameter_of})
        n_p = len(params)
        local = local_symbols(n, m, n_p, 0)
        mapping: dict[sp.Basic, sp.Basic] = {}
        for k, i in enumerate(coordinates):
            mapping[parsed.q[i]] = local["q"][k]
            mapping[parsed.v[i]] = local["v"][k]
            mapping[parsed.a[i]] = local["a"][k]
        for k, j in enumerate(multipliers):
            mapping[parsed.lam[j]] = local["lam"][k]
        for k, j in enumerate(params):
            mapping[parsed.p[j]] = local["p"][k]
        mapping[parsed.t] = local["t"]
        shapes = [(M.rows, M.cols), (Q.rows, 1), (C.rows, 1), (Y.rows, 1)]
        shortcut = (self.shapes.signature(expressions, {g: getattr(s, "name", "") for g, s in mapping.items()})
                    if self.shortcut else None)
        seen_as = None if shortcut is None else (kind, n, m, n_p, repr(shapes), shortcut.key)
        found = None if seen_as is None else self.seen.get(seen_as)
        if shortcut is not None and found is not None:
            type_index, data = found[0], tuple(float(shortcut.floats[k]) for k in found[1])
        else:
            type_index, plain, floats = self._rewrite(kind, (n, m, n_p, shapes), mapping, (M, Q, C, Y))
            data = tuple(float(f) for f in floats)
            if seen_as is not None:
                self._remember(seen_as, type_index, plain, floats)
        self.instances.append(Instance(
            type=type_index, coordinates=tuple(coordinates), multipliers=tuple(multipliers),
            outputs=tuple(outputs), parameters=tuple(params), data=data, what=what))

    def _rewrite(self, kind: str, sizes: tuple[int, int, int, list[tuple[int, int]]], mapping: dict[sp.Basic, sp.Basic],
                 matrices: tuple[sp.Matrix, ...]) -> tuple[int, list[sp.Expr], list[sp.Float]]:
        """The type of one instance rewritten in local symbols (added if new), its local
        expressions before the data slots, and the floats of its data slots."""
        n, m, n_p, shapes = sizes
        # The symbols first, then the numbers: the order of the data slots follows the shape of
        # the *local* expressions, so two instances differing only in their model indices
        # (``q_98`` against ``q_123`` sort differently) and their numbers are one type.
        localized = [matrix.xreplace(mapping) if matrix.rows else matrix for matrix in matrices]
        plain = [e for matrix in localized for e in matrix]
        # Named numbers (MassEntry.data) first, by name (one group per instance: the same order
        # in every instance of a form), then the floats written into the expressions.
        named: list[sp.Basic] = sorted({s for e in plain for s in e.free_symbols if s in self.data_of},
                                       key=lambda s: s.name)
        floats = [*(sp.Float(self.data_of[s]) for s in named), *_data_floats(plain)]
        n_d = len(floats)
        if floats:
            data = dict(zip([*named, *floats[len(named):]], local_symbols(0, 0, 0, n_d)["d"]))
            localized = [matrix.xreplace(data) if matrix.rows else matrix for matrix in localized]
        key = fingerprint("component", kind, repr((n, m, n_p, n_d, shapes)),
                          canonical_text(tuple(tuple(matrix) for matrix in localized)))
        if key not in self.by_key:
            self.by_key[key] = len(self.types)
            M, Q, C, Y = localized
            self.types.append(ComponentType(kind, n, m, Y.rows, n_p, n_d, M, Q, C, Y, key))
        return self.by_key[key], plain, floats

    def _remember(self, seen_as: tuple, type_index: int, plain: list[sp.Expr], floats: list[sp.Float]) -> None:
        """Let later instances of the signature in ``seen_as`` take type ``type_index``.

        The slots are matched by position in the *rewritten* tree's own signature, and only
        where it is the global one: the rewriting may re-sort a tree (sympy takes the sign out
        of sin(-x) by the order of its symbols' names, and q_10 sorts before q_9 but q_0 before
        q_1), and matching by value would then give a later instance's numbers to the wrong
        slots where values repeat up to sign (sin(0.5 x - 0.5 y))."""
        own = self.shapes.signature(plain, {symbol: symbol.name for e in plain for symbol in e.free_symbols})
        if own is None or own.key != seen_as[-1]:
            return
        where = {f: k for k, f in enumerate(own.floats)}
        slots = tuple(where.get(f, -1) for f in floats)
        if len(slots) == len(own.floats) and -1 not in slots:
            self.seen[seen_as] = (type_index, slots)

    def add_structured(self, what: str, ct: StructuredType, coordinates: Sequence[int], multipliers: Sequence[int],
                       parameters: Sequence[int], data: Sequence[float]) -> None:
        """Add one instance of a structured type (its numbers are its data slots)."""
        if ct.key not in self.by_key:
            self.by_key[ct.key] = len(self.types)
            self.types.append(ct)
        self.instances.append(Instance(type=self.by_key[ct.key], coordinates=tuple(coordinates),
                                       multipliers=tuple(multipliers), outputs=(), parameters=tuple(parameters),
                                       data=tuple(float(x) for x in data), what=what))

    def add_term(self, term: ParsedTerm) -> None:
        """A matrix term: its pattern and factor are the type, its values the data."""
        params = sorted({self.parameter_of[s] for s in term.factor.free_symbols if s in self.parameter_of})
        local = local_symbols(0, 0, len(params), 0)["p"]
        factor = term.factor.xreplace({self.parsed.p[j]: local[k] for k, j in enumerate(params)})
        matrix = term.item.matrix
        ct = StructuredType.term(term.item.role, len(term.coordinates), matrix.rows, matrix.cols, factor, len(params))
        self.add_structured(f"{term.item.role.name} matrix '{term.item.name}'", ct, term.coordinates, (), params,
                            matrix.values.tolist())

    def add_quadratic(self, term: ParsedQuadratic) -> None:
        """Quadratic constraints: their patterns are the type; c0, J0 and H the data."""
        item = term.item
        J, H = item.jacobian, item.hessian_matrix
        ct = StructuredType.quadratic(len(term.coordinates), item.m, J.rows, J.cols, H.rows, H.cols)
        self.add_structured(f"quadratic constraints '{item.name}'", ct, term.coordinates, term.multipliers, (),
                            [*item.c0, *J.values, *H.values])


@dataclasses.dataclass(frozen=True)
class _Signature:
    """What decides an instance's type without rewriting it (:class:`_Shapes`): ``key``, and
    its distinct data floats in the order of the signature's walk."""

    key: tuple[tuple[int, ...], tuple[int, ...]]
    floats: tuple[sp.Float, ...]


class _NotLocal(Exception):
    """An expression holds a symbol that is not one of the instance's (no shortcut)."""


class _Shapes:
    """Signatures of instances in their *global* symbols, a shortcut past the rewriting in local
    symbols (``xreplace``: sympy rebuilds and re-sorts every sum and product, most of the
    partition of a large model).

    A node's shape is an interned number for ``class(shapes of its arguments)``, its symbols
    named by their local names and its data floats masked; the arguments of sums and products
    sorted by shape (ties keep sympy's order).  The signature is the shapes of the expressions
    with the pattern of equal floats in the order of a walk over the sorted arguments.  Two
    instances with one signature are the same tree up to renaming, their data floats and the
    order of commuting arguments of equal shape, which differ in their floats only.  So the
    second instance's data are the first one's slots filled from its own walk, matched by
    position in the first one's rewritten tree (:meth:`_Localizer._remember`).  The interned
    numbers are shared by all instances of one partition.
    """

    def __init__(self) -> None:
        self.number: dict[tuple, int] = {}

    def signature(self, expressions: Sequence[sp.Expr], local: dict[sp.Basic, str]) -> _Signature | None:
        shapes: dict[sp.Basic, int] = {}
        number = self.number
        exponents: set[sp.Float] = set()  # float exponents stay numbers (:func:`_data_floats`)

        def shape(node: sp.Basic) -> int:
            known = shapes.get(node)
            if known is not None:
                return known
            if isinstance(node, sp.Float):
                text: tuple = ("F",)
            elif isinstance(node, sp.Pow) and isinstance(node.exp, sp.Float):
                exponents.add(node.exp)
                text = ("Pow", shape(node.base), ("P", node.exp._mpf_))
            elif isinstance(node, sp.Symbol):
                name = local.get(node)
                if name is None:
                    raise _NotLocal
                text = ("S", name)
            elif not node.args:
                text = (type(node).__name__, node._hashable_content())
            else:
                inner = [shape(arg) for arg in node.args]
                if isinstance(node, (sp.Add, sp.Mul)):
                    inner.sort()
                text = (type(node).__name__, *inner)
            found = number.setdefault(text, len(number))
            shapes[node] = found
            return found

        try:
            roots = tuple(shape(e) for e in expressions)
        except _NotLocal:
            return None
        floats: dict[sp.Float, int] = {}
        pattern: list[int] = []

        def walk(node: sp.Basic) -> None:
            if isinstance(node, sp.Float):
                pattern.append(floats.setdefault(node, len(floats)))
                return
            if isinstance(node, sp.Pow) and isinstance(node.exp, sp.Float):
                walk(node.base)
                return
            args = node.args
            if isinstance(node, (sp.Add, sp.Mul)):
                args = tuple(sorted(args, key=shapes.__getitem__))
            for arg in args:
                walk(arg)

        for expr in expressions:
            walk(expr)
        if exponents and not exponents.isdisjoint(floats):
            return None  # a float both exponent and data: the rewriting decides
        return _Signature(key=(roots, tuple(pattern)), floats=tuple(floats))


def _data_floats(expressions: Sequence[sp.Expr]) -> list[sp.Float]:
    """The floats of ``expressions`` that become data slots, in an order that depends on the
    expressions' structure only (not on the values), so that instances differing only in their
    numbers get the same local tree.

    Exponents stay numbers (``x**d`` would turn powers into ``exp(d log x)`` in derivatives).
    The order is that of a depth-first walk that visits the arguments of sums and products
    sorted by their *shape* (their canonical text with every float masked); children of equal
    shape keep sympy's order (they differ in their floats only, which sympy has folded wherever
    it could, so a tie makes two types at worst, never a wrong result).
    """
    protected = {arg.exp for e in expressions for arg in e.atoms(sp.Pow) if isinstance(arg.exp, sp.Float)}
    shapes: dict[sp.Basic, str] = {}

    def shape(node: sp.Basic) -> str:
        known = shapes.get(node)
        if known is not None:
            return known
        if isinstance(node, sp.Float):
            text = "F" if node not in protected else repr(node)
        elif not node.args:
            text = f"{type(node).__name__}{node._hashable_content()!r}"
        else:
            inner = [shape(arg) for arg in node.args]
            if isinstance(node, (sp.Add, sp.Mul)):
                inner.sort()
            text = f"{type(node).__name__}({','.join(inner)})"
        shapes[node] = text
        return text

    order: list[sp.Float] = []
    seen: set[sp.Float] = set()

    def walk(node: sp.Basic) -> None:
        if isinstance(node, sp.Float):
            if node not in protected and node not in seen:
                seen.add(node)
                order.append(node)
            return
        args = node.args
        if isinstance(node, (sp.Add, sp.Mul)):
            args = tuple(sorted(args, key=shape))
        for arg in args:
            walk(arg)

    for expr in expressions:
        walk(expr)
    return order


def partition(model: Model, parsed: ParsedModel | None = None, *, shortcut: bool = True) -> Partition | WholeSystem:
    """The component instances of ``model`` (module docstring), or why it is derived whole.

    ``shortcut=False`` rewrites every instance in its local symbols, where by default an
    instance whose signature was seen before reuses that type (:class:`_Shapes`): the reference
    the shortcut is tested against."""
    parsed = parsed or parse_items(model)
    if parsed.tables:
        return WholeSystem("it reads time tables or designed input signals")
    if any(isinstance(element, AbstractNumericElement) for element, _ in parsed.forces):
        return WholeSystem("it has numeric force elements")
    everything = [*parsed.masses, *(e for _, _, e, _ in parsed.mass_entries),
                  *(f for _, parts in parsed.forces for part in parts for f in part.values()),
                  *parsed.constraints, *parsed.outputs]
    if any(expr.atoms(AppliedUndef) for expr in everything):
        return WholeSystem("its expressions call opaque functions")
    n = len(parsed.q)
    localizer = _Localizer(parsed, shortcut)
    coordinates = model.all_coordinates  # once: the property rebuilds the tuple from every element

    # Mass blocks: coordinates joined by an ungrouped entry, or by the coordinates it depends on;
    # each group of entries its own block, added to the rest (MassEntry).
    ungrouped = [(i, j, value) for i, j, value, group in parsed.mass_entries if not group]
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i: int, j: int) -> None:
        parent[find(i)] = find(j)

    diagonal = {i: mass for i, mass in enumerate(parsed.masses)}
    for i, j, value in ungrouped:
        union(i, j)
        for k in localizer.coordinates_in([value]):
            union(i, k)
    entries: dict[tuple[int, int], sp.Expr] = {(i, i): mass for i, mass in diagonal.items() if not _zero(mass)}
    for i, j, value in ungrouped:
        entries.pop((i, j), None)
        entries.pop((j, i), None)
        if not _zero(value):
            entries[(i, j)] = value
            entries[(j, i)] = value
    blocks: dict[int, list[int]] = {}
    for i in range(n):
        blocks.setdefault(find(i), []).append(i)
    massive: set[int] = set()
    for members in blocks.values():
        inside = [(i, j) for i in members for j in members if (i, j) in entries]
        if not inside:
            continue
        coords = sorted(set(members) | localizer.coordinates_in(entries[e] for e in inside))
        place = {c: k for k, c in enumerate(coords)}
        M = sp.zeros(len(coords), len(coords))
        for i, j in inside:
            M[place[i], place[j]] = entries[(i, j)]
        massive.update(i for i, _ in inside)
        names = ", ".join(coordinates[c].name for c in members)
        localizer.add("equations", f"mass of {names}", coords, (), (), M, sp.zeros(len(coords), 1), sp.zeros(0, 1),
                      sp.zeros(0, 1))
    numbers = {symbol: sp.Float(number) for symbol, number in parsed.mass_data}
    for group, grouped in _mass_groups(parsed.mass_entries).items():
        coords = sorted({c for i, j, _ in grouped for c in (i, j)} | localizer.coordinates_in(v for _, _, v in grouped))
        place = {c: k for k, c in enumerate(coords)}
        M = sp.zeros(len(coords), len(coords))
        for i, j, value in grouped:
            M[place[i], place[j]] += value
            if i != j:
                M[place[j], place[i]] += value
        # A diagonal entry is mass only if it is not zero with its named numbers in place.
        massive.update(i for i, j, value in grouped
                       if i == j and not _zero(value.xreplace(numbers) if numbers else value))
        localizer.add("equations", f"mass of {group}", coords, (), (), M, sp.zeros(len(coords), 1), sp.zeros(0, 1),
                      sp.zeros(0, 1))

    # Force parts.
    for element, parts in parsed.forces:
        for k, part in enumerate(parts):
            forces = {i: f for i, f in part.items() if not _zero(f)}
            if not forces:
                continue
            coords = sorted(set(forces) | localizer.coordinates_in(forces.values()))
            Q = sp.Matrix([forces.get(c, sp.Integer(0)) for c in coords])
            localizer.add("equations", f"{element.where()} part {k}", coords, (), (),
                          sp.zeros(len(coords), len(coords)), Q, sp.zeros(0, 1), sp.zeros(0, 1))

    # Constraint groups (a joint's rows together), in the order of their first row.
    groups: dict[str, list[int]] = {}
    for row, group in enumerate(parsed.constraint_groups):
        groups.setdefault(group, []).append(row)
    constrained: set[int] = set()
    for group, rows in groups.items():
        C = sp.Matrix([parsed.constraints[r] for r in rows])
        coords = sorted(localizer.coordinates_in(C))
        constrained.update(coords)
        localizer.add("equations", f"constraints of {group}", coords, rows, (), sp.zeros(len(coords), len(coords)),
                      sp.zeros(len(coords), 1), C, sp.zeros(0, 1))

    # Structured terms: one instance each, their numbers as data.
    for term in parsed.structured:
        if isinstance(term, ParsedTerm):
            localizer.add_term(term)
            if term.item.role.target == "Ma":
                massive.update(term.coordinates[int(r)] for r in term.item.matrix.rows)
        else:
            localizer.add_quadratic(term)
            constrained.update(term.coordinates)

    loose = [i for i in range(n) if i not in massive and i not in constrained]
    if loose:
        return WholeSystem(f"coordinate '{coordinates[loose[0]].name}' has no mass and no constraint "
                           "(a massless node whose initialization rows come from its force balance)")

    # Outputs, one row each.
    for row, expr in enumerate(parsed.outputs):
        coords = sorted(localizer.coordinates_in([expr]))
        multipliers = sorted({localizer.multiplier_of[s] for s in expr.free_symbols if s in localizer.multiplier_of})
        localizer.add("outputs", f"output '{model.outputs[row].name}'", coords, multipliers, (row,),
                      sp.zeros(len(coords), len(coords)), sp.zeros(len(coords), 1), sp.zeros(0, 1), sp.Matrix([expr]))
    return Partition(parsed=parsed, types=tuple(localizer.types), instances=tuple(localizer.instances))


def _mass_groups(entries: Sequence[tuple[int, int, sp.Expr, str]]) -> dict[str, list[tuple[int, int, sp.Expr]]]:
    """The grouped mass entries (:class:`fmi_adjoint.model.MassEntry`) by group, in the order of
    their first entry; zero entries left out."""
    groups: dict[str, list[tuple[int, int, sp.Expr]]] = {}
    for i, j, value, group in entries:
        if group and not _zero(value):
            groups.setdefault(group, []).append((i, j, value))
    return groups


def _zero(expr: sp.Expr) -> bool:
    """Whether ``expr`` is zero as written (``0`` or ``0.0``: sympy's ``Float(0.0) != 0``)."""
    return not expr.free_symbols and expr.is_zero is True  # symbols first: assumptions are slow
