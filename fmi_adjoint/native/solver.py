"""The sparse direct solver of the C engine, compiled once: Eigen's SparseLU behind ``fa_sparse.h``.

Models whose Newton or initialization matrix is stored sparse (:mod:`fmi_adjoint.sparsity`,
``MatrixStorage.SPARSE``) link ``runtime/fa_sparse.cpp``, a C interface over Eigen 3.4's
``SparseLU``, ordered by COLAMD or by the symmetric order the generator gives
(:func:`fmi_adjoint.sparsity.nested_dissection_order`).  Compiling it takes about 11 s (Eigen's
templates), so it is compiled once per (C++ compiler, flags, Eigen version, shim source) into the build cache
(kind ``"sparse"``: a static archive ``fa_sparse.a`` and the list of the Eigen headers it
includes) and linked into every model library and FMU binary that needs it; it is never
compiled per model.

Why Eigen (issue 24): header-only, so nothing but headers has to be installed, and they come
from PyPI (the ``cmeel-eigen`` wheel, no root needed); MPL-2.0 (file-level copyleft: the
headers may be shipped unmodified in an FMU's ``sources/`` next to the licence text;
``EIGEN_MPL2_ONLY`` keeps the LGPL parts out); what Exudyn uses for the same matrices.
SuiteSparse's KLU/UMFPACK were not taken: PyPI has no package with their headers and static
libraries (only Debian's ``libsuitesparse-dev``, which needs root), and KLU is LGPL.

An FMU links the archive statically with ``-static-libstdc++ -static-libgcc`` and hides its
symbols (``-Wl,--exclude-libs,ALL``): the binary needs neither Eigen nor a matching
``libstdc++`` where it runs, and still exports only the FMI functions.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import platform
import shutil
import sysconfig
from pathlib import Path

from ..cache import BuildCache, compiler_fingerprint, fingerprint
from ..errors import CompilerError
from ..sparsity import STORAGE_VARIABLE
from ..toolchain import cxx_compiler, run_tool

__all__ = ["EIGEN_DISTRIBUTION", "FMU_LINK_FLAGS", "IN_PROCESS_LINK_FLAGS", "LICENSE_FILE", "SOLVER_SOURCES",
           "SparseSolver", "eigen_include", "eigen_version", "solver_key_part", "sparse_solver"]

#: The PyPI distribution that carries Eigen's headers (``cmeel.prefix/include/eigen3``).
EIGEN_DISTRIBUTION = "cmeel-eigen"
#: The shim's files in ``runtime/`` (an FMU's ``sources/`` carries both).
SOLVER_SOURCES = ("fa_sparse.h", "fa_sparse.cpp")
#: Eigen's licence, shipped with the headers in an FMU's ``sources/``.
LICENSE_FILE = Path(__file__).resolve().parent / "licenses" / "MPL-2.0.txt"
_RUNTIME = Path(__file__).resolve().parent / "runtime"
_EIGEN_SUBFOLDER = "cmeel.prefix/include/eigen3"
_ARCHIVE = "fa_sparse.a"
_HEADERS = "headers.txt"
# -fvisibility=hidden: Eigen's instantiations stay internal; the C interface is marked visible.
_CXX_FLAGS = ("-std=c++14", "-O2", "-fPIC", "-fvisibility=hidden", "-fvisibility-inlines-hidden", "-DEIGEN_MPL2_ONLY",
              "-DNDEBUG")
#: Link flags of an in-process model library (the interpreter's libstdc++ is loaded anyway).
IN_PROCESS_LINK_FLAGS = ("-lstdc++",)
#: Link flags of an FMU binary: the C++ runtime inside, every archive symbol hidden, unused
#: sections dropped (0.9 instead of 1.5 MB for a small model, and no reference to parts of
#: libstdc++ that need a newer glibc than the engine does, e.g. arc4random, glibc 2.36).
FMU_LINK_FLAGS = ("-static-libstdc++", "-static-libgcc", "-Wl,--exclude-libs,ALL", "-Wl,--gc-sections")


@dataclasses.dataclass(frozen=True)
class SparseSolver:
    """The compiled solver in the build cache.

    Attributes
    ----------
    archive : Path
        ``fa_sparse.a`` (one object, position independent) in its cache entry.
    compiler : str
        The C++ compiler it was built with; it also links the libraries that use it.
    include : Path
        Eigen's include folder (``.../eigen3``).
    headers : tuple of str
        The Eigen headers ``fa_sparse.cpp`` includes, relative to ``include`` (an FMU's
        ``sources/`` carries these).
    """

    archive: Path
    compiler: str
    include: Path
    headers: tuple[str, ...]


def eigen_include() -> Path:
    """Eigen's include folder from the installed ``cmeel-eigen`` distribution.

    Raises
    ------
    CompilerError
        The distribution is not installed (the message names the fix).
    """
    try:
        folder = Path(str(importlib.metadata.distribution(EIGEN_DISTRIBUTION).locate_file(_EIGEN_SUBFOLDER)))
    except importlib.metadata.PackageNotFoundError:
        folder = None
    if folder is None or not (folder / "Eigen" / "SparseLU").is_file():
        raise CompilerError(f"the sparse solver needs Eigen's headers from the '{EIGEN_DISTRIBUTION}' package, which "
                            f"is not installed; run 'pip install {EIGEN_DISTRIBUTION}' (a dependency of "
                            f"fmi-adjoint), or force dense or band storage with {STORAGE_VARIABLE}=band.")
    return folder


def eigen_version() -> str | None:
    """The installed ``cmeel-eigen`` version, None if it is not installed."""
    try:
        return importlib.metadata.version(EIGEN_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def _shim_digest() -> str:
    digest = hashlib.sha256()
    for name in SOLVER_SOURCES:
        digest.update(name.encode() + b"\0" + (_RUNTIME / name).read_bytes())
    return digest.hexdigest()


def solver_key_part() -> str:
    """What a model library's cache key must include about the solver it may link: the Eigen
    version, the shim's sources and the C++ compiler's path (no compiler runs here, so models
    without sparse storage never need one)."""
    return fingerprint("sparse solver", str(eigen_version()), _shim_digest(), str(cxx_compiler()))


def _find_cxx(what: str) -> str:
    compiler = cxx_compiler()
    if compiler is None:
        raise CompilerError(f"{what} stores a matrix sparse, which needs a C++ compiler for the sparse solver "
                            "(Eigen SparseLU); none found (tried $CXX, c++, g++, clang++): install g++ or set CXX, "
                            f"or force dense or band storage with {STORAGE_VARIABLE}=band.")
    return compiler


def sparse_solver(cache: BuildCache | None = None, *, what: str = "the model") -> SparseSolver:
    """The solver archive from the build cache, compiled on the first call for this C++
    compiler, its flags, the Eigen version and the shim's source.

    Raises
    ------
    CompilerError
        No C++ compiler (``what`` names the model in the message), Eigen missing, or the
        shim does not compile.
    """
    compiler = _find_cxx(what)
    include = eigen_include()
    cache = cache or BuildCache.default()
    key = fingerprint("sparse", compiler_fingerprint(compiler, _CXX_FLAGS), str(eigen_version()), _shim_digest(),
                      platform.machine(), sysconfig.get_platform())

    def build(folder: Path) -> None:
        src = folder / "src"
        src.mkdir()
        for name in SOLVER_SOURCES:
            shutil.copy(_RUNTIME / name, src / name)
        obj, deps = src / "fa_sparse.o", src / "fa_sparse.d"
        run_tool([compiler, *_CXX_FLAGS, f"-I{include}", "-MD", "-MF", str(deps), "-c", "-o", str(obj),
                  str(src / "fa_sparse.cpp")], "the sparse solver (Eigen SparseLU)", compiler)
        run_tool(["ar", "rcsD", str(folder / _ARCHIVE), str(obj)], "the sparse solver archive", "ar")
        (folder / _HEADERS).write_text("\n".join(_eigen_headers(deps.read_text(), include)) + "\n")
        shutil.rmtree(src)

    folder = cache.entry("sparse", key, build)
    headers = tuple(line for line in (folder / _HEADERS).read_text().splitlines() if line)
    return SparseSolver(archive=folder / _ARCHIVE, compiler=compiler, include=include, headers=headers)


def _eigen_headers(deps: str, include: Path) -> list[str]:
    """The headers under ``include`` named in a make dependency file, relative and sorted."""
    text = deps.replace("\\\n", " ")
    _, _, body = text.partition(":")
    root = include.resolve()
    found = set()
    for word in body.split():
        path = Path(word).resolve()
        if path.is_relative_to(root):
            found.add(path.relative_to(root).as_posix())
    return sorted(found)
