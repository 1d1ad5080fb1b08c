"""Structured model terms against the same equations as elements: build, warm start, step, adjoint (issue 24).

Two forms of the same linear chain (:mod:`fmi_adjoint.examples.chains`: ``n`` masses, fixed-free
tridiagonal stiffness and damping, a harmonic force on the last mass):

* ``elements``: :func:`~fmi_adjoint.examples.chains.chain_model` (``kind = "linear"``), ``n``
  coordinate masses and ``n`` linear spring-damper elements, each an expression derived by the
  component assembly (one type per kind of spring, an instance per spring);
* ``matrices``: :func:`~fmi_adjoint.examples.chains.matrix_chain_model`, the mass, stiffness and
  damping as three matrix terms (:mod:`fmi_adjoint.structured`): data, no expression per entry.

And ``modal``: one dense matrix block as a flexible body reduced to ``n`` modes brings (a
symmetric positive definite mass and stiffness matrix of ``n^2`` entries each, random with a
fixed seed, modal damping, a load), at ``n`` = 50, 100 and 200: the build cost of ``n^2``
non-zeros; and ``entries``, the same block at ``n`` = 20 and 50 written entry by entry as
before structured terms (``mass_matrix`` entries and one expression load per coordinate).

For every model one row: ``n``; ``nnz``: non-zeros of its matrix terms (``-`` for elements);
``cold cpu``: building the native engine in a fresh process with an empty build cache (the
model built in Python, partition, kernels, C code, C compiler: CPU seconds including the
compilers; the sparse solver, compiled once per machine whatever the model, is put into the
cache before and not counted); ``warm cpu``: the same from the filled cache in another process; ``C us/step``:
CPU time per step of a forward run (``--steps`` steps of the model's own step, best of 2);
``adj/fwd``: the adjoint gradient of a least-squares cost of all outputs (all parameters)
over the forward run's time.  Then, per size, how many times cheaper the matrices are than the
elements (cold build, step).  Each phase runs in its own process (``_children.py``) with a time
limit; the children import a copy of the package taken at the start.

Run: ``python benchmarks/structured_terms.py [--sizes 256,1000,5000] [--modes 50,100,200]
[--steps 200] [--budget 600]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _children import (build_cache, child_main, compile_solver, cpu_seconds, exponent, run_phases, snapshot_sources,
                       step_and_adjoint)

SIZES = (256, 1000, 5000)
MODES = (50, 100, 200)
#: Sizes of the modal block also built entry by entry (``--entries``).
ENTRIES = (20, 50)
STEPS = 200
BUDGET = 600.0


def modal_matrices(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The mass, stiffness and damping matrices of :func:`modal_block` (seeded)."""
    rng = np.random.default_rng(24)
    Q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    masses = rng.uniform(0.5, 2.0, n)
    mass = Q @ np.diag(masses) @ Q.T
    root = Q @ np.diag(np.sqrt(masses)) @ Q.T  # M^(1/2)
    omega = 2 * np.pi * np.linspace(10.0, 500.0, n)
    V, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return mass, root @ V @ np.diag(omega**2) @ V.T @ root, 2.0 * root @ V @ np.diag(omega) @ V.T @ root


def modal_entries(n: int):
    """:func:`modal_block` written entry by entry, as a model had to be before structured terms:
    the mass matrix as ``mass_matrix`` entries, ``-E K q - zeta sqrt(E) D v + F0 e_0`` as one
    expression load per coordinate (``n`` terms each)."""
    from fmi_adjoint.forces.library.loads import ExpressionLoad
    from fmi_adjoint.model import Coordinate, MassEntry, Model, Output, Parameter, SimulationSettings

    mass, stiffness, damping = modal_matrices(n)
    names = tuple(f"eta{k}" for k in range(n))
    entries = tuple(MassEntry(names[i], names[j], repr(float(mass[i, j]))) for i in range(n) for j in range(i, n))

    def row(matrix: np.ndarray, i: int, state) -> str:
        return " + ".join(f"({float(matrix[i, j])!r})*{state(names[j])}" for j in range(n))

    loads = tuple(ExpressionLoad(name=f"load{i}", coordinate=names[i], expression=(
        f"-E*({row(stiffness, i, str)}) - zeta*sqrt(E)*({row(damping, i, lambda c: f'der({c})')})"
        + (" + F0" if i == 0 else ""))) for i in range(n))
    return Model(f"modal_entries_{n}", tuple(Coordinate(c, mass=repr(float(mass[k, k])))
                                            for k, c in enumerate(names)),
                 (Parameter("E", 1.0), Parameter("zeta", 0.02), Parameter("F0", 10.0)), forces=loads,
                 outputs=(Output("eta0", "eta0"), Output("eta_last", names[-1])), mass_matrix=entries,
                 simulation=SimulationSettings(t_end=0.1, step=1e-4))


def modal_block(n: int):
    """A flexible body's reduced matrices (module docstring): dense SPD ``M`` and ``K`` with
    eigenfrequencies of 10 to 500 Hz, modal damping ``D = 2 zeta M^(1/2) (M^-1/2 K M^-1/2)^(1/2)
    M^(1/2)`` scaled by the parameter ``zeta``, a constant load on the first coordinate, the
    stiffness scaled by ``E``."""
    from fmi_adjoint.model import Coordinate, Model, Output, Parameter, SimulationSettings
    from fmi_adjoint.structured import DAMPING, LOAD, MASS, STIFFNESS, MatrixTerm

    mass, stiffness, damping = modal_matrices(n)
    names = tuple(f"eta{k}" for k in range(n))
    load = np.zeros((n, 1))
    load[0, 0] = 1.0
    terms = (MatrixTerm("mass", MASS, names, mass), MatrixTerm("stiffness", STIFFNESS, names, stiffness, "E"),
             MatrixTerm("damping", DAMPING, names, damping, "zeta*sqrt(E)"),
             MatrixTerm("load", LOAD, names, load, "F0"))
    return Model(f"modal_{n}", tuple(Coordinate(c, mass=0.0) for c in names),
                 (Parameter("E", 1.0), Parameter("zeta", 0.02), Parameter("F0", 10.0)),
                 outputs=(Output("eta0", "eta0"), Output("eta_last", names[-1])), matrix_terms=terms,
                 simulation=SimulationSettings(t_end=0.1, step=1e-4))


def model_of(spec: dict):
    from fmi_adjoint.examples.chains import chain_model, matrix_chain_model

    size = spec["size"]
    return {"elements": lambda: chain_model(size, "linear"), "matrices": lambda: matrix_chain_model(size),
            "modal": lambda: modal_block(size), "entries": lambda: modal_entries(size)}[spec["form"]]()


def child_build(spec: dict) -> dict:
    from fmi_adjoint.engines import NativeEngine

    model = model_of(spec)
    compile_solver(spec)  # once per machine, whatever the model: not part of a model's build
    start, cpu = time.perf_counter(), cpu_seconds()
    engine = NativeEngine.build(model, cache=build_cache(spec))
    nnz = sum(term.matrix.nnz for term in model.matrix_terms)
    return {"seconds": time.perf_counter() - start, "cpu": cpu_seconds() - cpu, "n": engine.compiled.n, "nnz": nnz}


def child_measure(spec: dict) -> dict:
    from fmi_adjoint.engines import NativeEngine

    engine = NativeEngine.build(model_of(spec), cache=build_cache(spec))
    return step_and_adjoint(engine, spec["steps"])


def measure(form: str, size: int, tmp: Path, sources: str, steps: int, budget: float) -> dict | str:
    """Cold build, warm build and runs of one model in fresh processes (module docstring)."""
    spec = {"form": form, "size": size, "cache": str(tmp / f"{form}_{size}"), "steps": steps, "sources": sources}
    phases = run_phases(__file__, spec, budget)
    if isinstance(phases, str):
        return phases
    cold, warm, runs = phases
    return {"n": cold["n"], "nnz": cold["nnz"], "cold": cold["cpu"], "warm": warm["cpu"], **runs}


HEADER = (f"{'model':<16} {'n':>5} {'nnz':>7} {'cold cpu':>8} {'warm cpu':>8} {'C us/step':>9} {'Newton':>6} "
          f"{'adj/fwd':>7}")


def row(name: str, r: dict) -> str:
    nnz = r["nnz"] or "-"
    return (f"{name:<16} {r['n']:>5} {nnz:>7} {r['cold']:>8.2f} {r['warm']:>8.2f} {1e6 * r['cpu_step']:>9.1f} "
            f"{r['newton']:>6.2f} {r['adjoint_ratio']:>7.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="chain lengths, default %(default)s")
    parser.add_argument("--modes", default=",".join(map(str, MODES)), help="modal block sizes, default %(default)s")
    parser.add_argument("--entries", default=",".join(map(str, ENTRIES)),
                        help="modal block sizes also built entry by entry, default %(default)s")
    parser.add_argument("--steps", type=int, default=STEPS, help="steps of a measured run (default %(default)d)")
    parser.add_argument("--budget", type=float, default=BUDGET, help="seconds per model (default %(default)g)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(args.child, {"build": child_build, "measure": child_measure})
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
        modes = [int(s) for s in args.modes.split(",") if s.strip()]
        entries = [int(s) for s in args.entries.split(",") if s.strip()]
    except ValueError:
        parser.error("--sizes and --modes: whole numbers separated by commas")
    print(f"engine: fmi_adjoint.engines.NativeEngine (C), HHT, {args.steps} steps per run; {os.cpu_count()} CPUs; "
          f"load average at start {', '.join(f'{x:.1f}' for x in os.getloadavg())}; Python {sys.version.split()[0]}")
    print(HEADER, flush=True)
    status = 0
    results: dict[tuple[str, int], dict] = {}
    with tempfile.TemporaryDirectory(prefix="fmi_adjoint_structured_bench_") as tmp:
        sources = snapshot_sources(Path(tmp) / "src")
        runs = [(form, size) for size in sizes for form in ("elements", "matrices")] + [("modal", n) for n in modes]
        runs += [("entries", n) for n in entries]
        for form, size in runs:
            name = f"{form}_{size}"
            result = measure(form, size, Path(tmp), sources, args.steps, args.budget)
            if isinstance(result, str):
                print(f"{name:<16} {result}", flush=True)
                status = 1
                continue
            results[(form, size)] = result
            print(row(name, result), flush=True)
    for size in sizes:
        if ("elements", size) in results and ("matrices", size) in results:
            e, m = results[("elements", size)], results[("matrices", size)]
            print(f"chain of {size}: matrices vs elements: cold build {e['cold'] / m['cold']:.1f}x cheaper, "
                  f"warm {e['warm'] / m['warm']:.1f}x, step {e['cpu_step'] / m['cpu_step']:.2f}x")
    for n in entries:
        if ("entries", n) in results and ("modal", n) in results:
            e, m = results[("entries", n)], results[("modal", n)]
            print(f"modal block of {n}: matrices vs entries as expressions: cold build {e['cold'] / m['cold']:.1f}x "
                  f"cheaper, step {e['cpu_step'] / m['cpu_step']:.2f}x")
    for form, values in (("matrices", sizes), ("modal", modes)):
        done = [v for v in values if (form, v) in results]
        if len(done) >= 2:
            nnz = [results[(form, v)]["nnz"] for v in done]
            cold = exponent(nnz, [results[(form, v)]["cold"] for v in done])
            step = exponent(nnz, [results[(form, v)]["cpu_step"] for v in done])
            print(f"{form}: growth over nnz = {nnz[0]}..{nnz[-1]}: cold build ~ nnz^{cold:.2f}, "
                  f"C us/step ~ nnz^{step:.2f}")
    print(f"load average at the end {', '.join(f'{x:.1f}' for x in os.getloadavg())} (a shared machine: the "
          "CPU times are upper bounds)")
    return status


if __name__ == "__main__":
    sys.exit(main())
