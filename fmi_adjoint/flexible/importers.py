"""Mass and stiffness matrices with node coordinates from FE tools' export files.

Every file is untrusted data: it is read only if it is a regular file no larger than
``max_bytes`` (:func:`fmi_adjoint.files.read_regular`), its declared sizes are checked against
:data:`MAX_DOFS` and ``max_entries`` before anything is allocated, numbers are parsed as
numbers (never evaluated), and every problem is one :class:`~fmi_adjoint.errors.ModelError`
naming the file, the line and the fix.  The result is a checked
:class:`~fmi_adjoint.flexible.fe.FEModel` (symmetry, definiteness, node and DOF numbering).

What is accepted
----------------
Node coordinates (:func:`read_nodes`), for every format:
    One node a line, ``id x y z`` separated by commas and/or blanks (an Abaqus ``*NODE``
    block, an Ansys ``NLIST`` table, a CSV); lines starting with ``*``, ``#``, ``!`` or ``%``
    and blank lines are skipped, as is a first line of column titles.  Or a mapping
    ``{id: (x, y, z)}`` given directly.

Matrix Market (Ansys, :func:`read_matrix_market`):
    ``M`` and ``K`` as Matrix Market files (``*SMAT`` / ``*EXPORT,,MMF`` of APDL Math, or any
    tool), ``coordinate`` or ``array``, ``real`` or ``integer``, ``general`` or ``symmetric``,
    read by :func:`scipy.io.mmread`.  Matrix Market has no node numbers, so a DOF map names the
    DOF of each equation: the Ansys ``.mapping`` file written next to the matrices (title line
    ``Matrix Eqn  Node  DOF``, then ``equation node label`` with the labels
    ``UX UY UZ ROTX ROTY ROTZ``), or the same three columns with the component as a number
    ``1..6``.  Equations are numbered from 1, each exactly once.

Abaqus (:func:`read_abaqus`):
    The ``*MATRIX GENERATE, STIFFNESS, MASS`` output in ``FORMAT=COORDINATE``
    (``<job>_STIF1.mtx``, ``<job>_MASS1.mtx``): one entry a line,
    ``row node, row dof, column node, column dof, value``, with dofs ``1..6``.  Abaqus writes
    one triangle of a symmetric matrix: an entry whose transposed partner is absent is
    mirrored; where both are present they must agree.  The DOFs are those that occur in
    either matrix, ordered by node and component.

Nastran OUTPUT4 (:func:`read_nastran_op4`, the ``fe`` extra: ``pip install fmi-adjoint[fe]``):
    Text or binary OP4 files read by pyNastran (``KAA``/``MAA`` by default, any names
    given), with the DOF map of the Matrix Market reader (from the USET / EQEXIN tables of
    the run; OP4 carries no node numbers).  pyNastran 1.4 requires numpy < 2.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Mapping, Sequence

import numpy as np
import scipy.io
import scipy.sparse as sp

from ..errors import ModelError
from ..files import decode_text, read_regular
from .fe import MAX_DOFS, FEModel

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_ENTRIES", "read_abaqus", "read_dof_map", "read_matrix_market",
           "read_nastran_op4", "read_nodes"]

#: Largest file read by default (bytes); a larger export is refused before it is read.
DEFAULT_MAX_BYTES = 1 << 30
#: Largest number of matrix entries read by default (declared or counted, before allocating).
DEFAULT_MAX_ENTRIES = 30_000_000

_ANSYS_LABELS = {"UX": 0, "UY": 1, "UZ": 2, "ROTX": 3, "ROTY": 4, "ROTZ": 5}
_SKIPPED = ("*", "#", "!", "%")
_SPLIT = re.compile(r"[,\s]+")

PathLike = str | os.PathLike


def _text(path: PathLike, what: str, max_bytes: int) -> str:
    raw = read_regular(path, max_bytes, what, ModelError)
    try:
        return decode_text(raw)
    except UnicodeDecodeError as exc:
        raise ModelError(f"{path}: byte {exc.start} is not UTF-8 text; give {what} as a text file.") from None


def _data_lines(text: str) -> list[tuple[int, list[str]]]:
    """``(line number, fields)`` of the data lines (comments, keywords and blanks skipped)."""
    result = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith(_SKIPPED):
            continue
        result.append((number, [field for field in _SPLIT.split(stripped) if field]))
    return result


def _integer(token: str, path: PathLike, number: int, what: str) -> int:
    try:
        return int(token)
    except ValueError:
        raise ModelError(f"{path}, line {number}: {what} {token[:40]!r} is not an integer; give whole numbers "
                         "there.") from None


def _number(token: str, path: PathLike, number: int, what: str) -> float:
    try:
        value = float(token)
    except ValueError:
        raise ModelError(f"{path}, line {number}: {what} {token[:40]!r} is not a number.") from None
    if not np.isfinite(value):
        raise ModelError(f"{path}, line {number}: {what} {token[:40]!r} is not finite; export finite values.")
    return value


def read_nodes(path: PathLike, *, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[int, tuple[float, float, float]]:
    """Node coordinates from a text file (module docstring): ``{id: (x, y, z)}``."""
    lines = _data_lines(_text(path, "a node list (id x y z per line)", max_bytes))
    if lines and not _is_int(lines[0][1][0]):
        lines = lines[1:]  # column titles
    nodes: dict[int, tuple[float, float, float]] = {}
    for number, fields in lines:
        if len(fields) != 4:
            raise ModelError(f"{path}, line {number}: {len(fields)} fields; a node line is 'id, x, y, z'.")
        node = _integer(fields[0], path, number, "node id")
        if node in nodes:
            raise ModelError(f"{path}, line {number}: node {node} is listed twice; give each node once.")
        if len(nodes) >= MAX_DOFS:
            raise ModelError(f"{path}: more than {MAX_DOFS} nodes; reduce the model in the FE tool first.")
        x, y, z = (_number(field, path, number, "coordinate") for field in fields[1:])
        nodes[node] = (x, y, z)
    if not nodes:
        raise ModelError(f"{path}: no node lines; give one 'id, x, y, z' line per node.")
    return nodes


def _is_int(token: str) -> bool:
    try:
        int(token)
    except ValueError:
        return False
    return True


def read_dof_map(path: PathLike, size: int | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES) -> np.ndarray:
    """The DOF table ``(node id, component 0..5)`` per equation from an Ansys ``.mapping``
    file or the same three columns with numeric components (module docstring).

    ``size`` (the matrices' dimension), when given, must equal the number of equations.
    """
    lines = _data_lines(_text(path, "a DOF map (equation node DOF per line)", max_bytes))
    if lines and not _is_int(lines[0][1][0]):
        lines = lines[1:]  # "Matrix Eqn  Node  DOF"
    if len(lines) > MAX_DOFS:
        raise ModelError(f"{path}: more than {MAX_DOFS} equations; reduce the model in the FE tool first.")
    table = np.zeros((len(lines), 2), dtype=np.int64)
    seen = np.zeros(len(lines), dtype=bool)
    for number, fields in lines:
        if len(fields) != 3:
            raise ModelError(f"{path}, line {number}: {len(fields)} fields; a DOF map line is 'equation node DOF' "
                             "(DOF UX UY UZ ROTX ROTY ROTZ or 1..6).")
        equation = _integer(fields[0], path, number, "equation number")
        node = _integer(fields[1], path, number, "node id")
        label = fields[2].upper()
        if label in _ANSYS_LABELS:
            component = _ANSYS_LABELS[label]
        elif label in {"1", "2", "3", "4", "5", "6"}:
            component = int(label) - 1
        else:
            raise ModelError(f"{path}, line {number}: DOF {fields[2][:20]!r} of node {node} is not a structural DOF; "
                             "give UX UY UZ ROTX ROTY ROTZ or 1..6 (export the structural matrices only).")
        if not 1 <= equation <= len(lines):
            raise ModelError(f"{path}, line {number}: equation {equation} is outside 1..{len(lines)} (the number of "
                             "lines); number the equations from 1 without gaps.")
        if seen[equation - 1]:
            raise ModelError(f"{path}, line {number}: equation {equation} is mapped twice; give each equation once.")
        seen[equation - 1] = True
        table[equation - 1] = (node, component)
    if not lines:
        raise ModelError(f"{path}: no DOF lines; give one 'equation node DOF' line per equation.")
    if size is not None and len(lines) != size:
        raise ModelError(f"{path}: {len(lines)} equations, the matrices have {size}; give the mapping file written "
                         "with these matrices.")
    return table


def _nodes(nodes: PathLike | Mapping[int, Sequence[float]], max_bytes: int) -> dict[int, tuple[float, float, float]]:
    if isinstance(nodes, Mapping):
        return {int(node): tuple(float(c) for c in xyz) for node, xyz in nodes.items()}  # type: ignore[misc]
    return read_nodes(nodes, max_bytes=max_bytes)


def _fe_model(table: np.ndarray, nodes: Mapping[int, tuple[float, float, float]], mass: sp.spmatrix,
              stiffness: sp.spmatrix, source: str) -> FEModel:
    used = sorted({int(node) for node in table[:, 0]})
    missing = [node for node in used if node not in nodes]
    if missing:
        raise ModelError(f"{source}: node {missing[0]} has DOFs in the matrices but no coordinates in the node list; "
                         "export the node list of the same model.")
    ids = np.array(used, dtype=np.int64)
    xyz = np.array([nodes[node] for node in used], dtype=float)
    return FEModel(ids, xyz, table, mass, stiffness, source=source)


def _mm_header(text: str, path: PathLike, max_entries: int) -> None:
    """Check the Matrix Market banner and declared size before :func:`scipy.io.mmread` allocates."""
    lines = iter(text.splitlines())
    banner = next(lines, "").split()
    if len(banner) != 5 or banner[0].lower() != "%%matrixmarket" or banner[1].lower() != "matrix":
        raise ModelError(f"{path}, line 1: not a Matrix Market file (it must start with '%%MatrixMarket matrix'); "
                         "export the matrix in Matrix Market format.")
    layout, field, symmetry = (word.lower() for word in banner[2:])
    if layout not in {"coordinate", "array"} or field not in {"real", "integer", "double"} \
            or symmetry not in {"general", "symmetric"}:
        raise ModelError(f"{path}, line 1: a '{layout} {field} {symmetry}' matrix; give a real general or symmetric "
                         "matrix (coordinate or array).")
    for number, line in enumerate(lines, start=2):
        if not line.strip() or line.lstrip().startswith("%"):
            continue
        fields = line.split()
        sizes = [_integer(token, path, number, "size") for token in fields]
        if len(sizes) != (3 if layout == "coordinate" else 2) or min(sizes) < 0:
            expected = "rows columns entries" if layout == "coordinate" else "rows columns"
            raise ModelError(f"{path}, line {number}: the size line must be '{expected}'.")
        rows, cols = sizes[:2]
        if rows != cols:
            raise ModelError(f"{path}: the matrix is {rows} x {cols}; give a square mass or stiffness matrix.")
        if rows > MAX_DOFS:
            raise ModelError(f"{path}: {rows} DOFs, more than {MAX_DOFS}; reduce the model in the FE tool first.")
        entries = sizes[2] if layout == "coordinate" else rows * cols
        if entries > max_entries:
            raise ModelError(f"{path}: {entries} entries, more than max_entries={max_entries}; raise the limit if the "
                             "file is trusted.")
        return
    raise ModelError(f"{path}: no size line after the banner; the file is cut short.")


def _read_mm(path: PathLike, max_bytes: int, max_entries: int) -> sp.csr_matrix:
    text = _text(path, "a Matrix Market matrix", max_bytes)
    _mm_header(text, path, max_entries)
    try:
        matrix = scipy.io.mmread(io.StringIO(text))
    except (ValueError, IndexError, TypeError, OverflowError) as exc:
        raise ModelError(f"{path}: not a readable Matrix Market matrix ({str(exc)[:200]}); export it again.") from None
    return sp.csr_matrix(matrix, dtype=float)


def read_matrix_market(mass: PathLike, stiffness: PathLike, dof_map: PathLike,
                       nodes: PathLike | Mapping[int, Sequence[float]], *, max_bytes: int = DEFAULT_MAX_BYTES,
                       max_entries: int = DEFAULT_MAX_ENTRIES) -> FEModel:
    """An FE model from Matrix Market ``mass`` and ``stiffness`` files, the DOF map of their
    equations and the node coordinates (module docstring)."""
    mass_matrix = _read_mm(mass, max_bytes, max_entries)
    stiffness_matrix = _read_mm(stiffness, max_bytes, max_entries)
    if mass_matrix.shape != stiffness_matrix.shape:
        raise ModelError(f"{mass} is {mass_matrix.shape[0]} x {mass_matrix.shape[1]} but {stiffness} is "
                         f"{stiffness_matrix.shape[0]} x {stiffness_matrix.shape[1]}; give the matrices of one model.")
    table = read_dof_map(dof_map, mass_matrix.shape[0], max_bytes=max_bytes)
    return _fe_model(table, _nodes(nodes, max_bytes), mass_matrix, stiffness_matrix,
                     f"Matrix Market {os.fspath(stiffness)}")


def _read_abaqus_entries(path: PathLike, max_bytes: int, max_entries: int) -> tuple[np.ndarray, np.ndarray]:
    """``(keys (entries, 4) int, values)`` of an Abaqus COORDINATE matrix file."""
    text = _text(path, "an Abaqus *MATRIX OUTPUT file in COORDINATE format", max_bytes)
    rows: list[str] = []
    numbers: list[int] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped and not stripped.startswith(_SKIPPED):
            rows.append(stripped)
            numbers.append(number)
            if len(rows) > max_entries:
                raise ModelError(f"{path}: more than max_entries={max_entries} entries; raise the limit if the file "
                                 "is trusted.")
    if not rows:
        raise ModelError(f"{path}: no matrix entries; give the COORDINATE output of *MATRIX GENERATE.")
    keys = np.zeros((len(rows), 4), dtype=np.int64)
    values = np.zeros(len(rows))
    for k, (row, number) in enumerate(zip(rows, numbers)):
        fields = [field for field in _SPLIT.split(row) if field]
        if len(fields) != 5:
            raise ModelError(f"{path}, line {number}: {len(fields)} fields; a COORDINATE line is 'row node, row dof, "
                             "column node, column dof, value' (FORMAT=COORDINATE of *MATRIX OUTPUT).")
        for j in range(4):
            keys[k, j] = _integer(fields[j], path, number, ("row node", "row dof", "column node", "column dof")[j])
        values[k] = _number(fields[4], path, number, "value")
        for j in (1, 3):
            if not 1 <= keys[k, j] <= 6:
                raise ModelError(f"{path}, line {number}: node {keys[k, j - 1]} has DOF {keys[k, j]}; only the "
                                 "structural DOFs 1..6 are accepted (drop warping, temperature or pressure DOFs).")
    return keys, values


def _abaqus_matrix(keys: np.ndarray, values: np.ndarray, index: dict[tuple[int, int], int], n: int,
                   path: PathLike) -> sp.csr_matrix:
    rows = np.array([index[(int(a), int(b) - 1)] for a, b in keys[:, :2]], dtype=np.int64)
    cols = np.array([index[(int(a), int(b) - 1)] for a, b in keys[:, 2:]], dtype=np.int64)
    matrix = sp.coo_matrix((values, (rows, cols)), shape=(n, n)).tocsr()
    matrix.sum_duplicates()
    pattern = (matrix != 0).astype(np.int8)
    # One triangle written: mirror the entries whose transposed partner is absent.
    lonely = (pattern - pattern.multiply(pattern.T)).tocsr()
    lonely.eliminate_zeros()
    mirrored = matrix.multiply(lonely).T
    return (matrix + mirrored).tocsr()


def read_abaqus(mass: PathLike, stiffness: PathLike, nodes: PathLike | Mapping[int, Sequence[float]], *,
                max_bytes: int = DEFAULT_MAX_BYTES, max_entries: int = DEFAULT_MAX_ENTRIES) -> FEModel:
    """An FE model from the Abaqus ``*MATRIX GENERATE`` COORDINATE files of ``mass`` and
    ``stiffness`` and the node coordinates (module docstring)."""
    mass_keys, mass_values = _read_abaqus_entries(mass, max_bytes, max_entries)
    stiffness_keys, stiffness_values = _read_abaqus_entries(stiffness, max_bytes, max_entries)
    every = np.vstack([mass_keys[:, :2], mass_keys[:, 2:], stiffness_keys[:, :2], stiffness_keys[:, 2:]])
    unique = np.unique(every, axis=0)
    if unique.shape[0] > MAX_DOFS:
        raise ModelError(f"{stiffness}: more than {MAX_DOFS} DOFs; reduce the model in Abaqus first.")
    table = np.column_stack([unique[:, 0], unique[:, 1] - 1])
    index = {(int(node), int(component)): k for k, (node, component) in enumerate(table)}
    n = table.shape[0]
    return _fe_model(table, _nodes(nodes, max_bytes), _abaqus_matrix(mass_keys, mass_values, index, n, mass),
                     _abaqus_matrix(stiffness_keys, stiffness_values, index, n, stiffness),
                     f"Abaqus {os.fspath(stiffness)}")


def read_nastran_op4(path: PathLike, dof_map: PathLike, nodes: PathLike | Mapping[int, Sequence[float]], *,
                     mass_name: str = "MAA", stiffness_name: str = "KAA",
                     max_bytes: int = DEFAULT_MAX_BYTES) -> FEModel:
    """An FE model from the matrices ``mass_name`` and ``stiffness_name`` of a Nastran OUTPUT4
    file (through pyNastran, the ``fe`` extra), the DOF map and the node coordinates."""
    try:
        from cpylog import SimpleLogger
        from pyNastran.op4.op4 import read_op4
    except ImportError:
        raise ModelError("reading Nastran OUTPUT4 needs pyNastran: pip install 'fmi-adjoint[fe]'.") from None
    # The size and kind of the file are checked before pyNastran opens it by name.
    read_regular(path, max_bytes, "a Nastran OUTPUT4 file", ModelError)
    try:
        matrices = read_op4(os.fspath(path), log=SimpleLogger(level="critical"))
    except Exception as exc:  # noqa: BLE001 - a third-party parser of untrusted bytes: any failure is a bad file
        raise ModelError(f"{path}: not a readable OUTPUT4 file ({type(exc).__name__}: {str(exc)[:200]}); export it "
                         "again (OUTPUT4 with FORM 6 or 1 matrices).") from None
    found = {}
    for name in (mass_name, stiffness_name):
        key = next((key for key in matrices if key.strip().upper() == name.upper()), None)
        if key is None:
            raise ModelError(f"{path}: no matrix {name!r} (the file holds {sorted(matrices)}); give mass_name and "
                             "stiffness_name.")
        data = matrices[key].data
        found[name] = sp.csr_matrix(data, dtype=float)  # a numpy array or a scipy COO matrix
    mass_matrix, stiffness_matrix = found[mass_name], found[stiffness_name]
    if mass_matrix.shape != stiffness_matrix.shape or mass_matrix.shape[0] != mass_matrix.shape[1]:
        raise ModelError(f"{path}: {mass_name} is {mass_matrix.shape}, {stiffness_name} {stiffness_matrix.shape}; "
                         "give square matrices of one model.")
    table = read_dof_map(dof_map, mass_matrix.shape[0], max_bytes=max_bytes)
    return _fe_model(table, _nodes(nodes, max_bytes), mass_matrix, stiffness_matrix, f"OUTPUT4 {os.fspath(path)}")
