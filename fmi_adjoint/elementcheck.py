"""``fmi-adjoint plugins check``: verify a force element the way the engine will use it.

For every element, registered or not:

* **Jacobians** -- the element is placed in a probe model (unit masses on its end
  coordinates, every property bound to a model parameter sampled inside its bounds),
  compiled, and the exact ``dF/dq``, ``dF/dv``, ``dF/dp`` are compared with central
  differences of the compiled force at random states (within 1e-6 relative).

For elements with a local law (everything but model-level loads):

* **C code** -- the generated C functions are compiled with the system C compiler and
  must equal the numpy evaluation within 1e-12 relative;
* **zero force at rest** -- with default parameters and all coordinates at rest, for
  elements that declare ``zero_at_rest``;
* **passivity** -- elements that declare ``passive`` must not generate energy: with a
  potential energy ``V``, ``-sum_k f_k v_k - dV/dt >= 0``; for two-point laws without
  ``V``, the velocity-dependent part must oppose the velocity.
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from .codegen import generate_function
from .compiled import compile_model
from .forces.base import AbstractForceElement, AbstractLocalElement, AbstractTwoPointElement
from .forces.ccode import element_c_source, local_law
from .forces.registry import PluginError
from .model import Coordinate, Model, Output, Parameter
from .errors import CompilerError
from .toolchain import c_compiler, compile_shared

__all__ = ["CheckResult", "ElementReport", "check_element", "find_c_compiler", "JACOBIAN_RTOL", "C_CODE_RTOL"]

JACOBIAN_RTOL = 1e-6
C_CODE_RTOL = 1e-12


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """Outcome of one check: name, verdict and the measured figure."""

    name: str
    passed: bool
    detail: str


@dataclasses.dataclass(frozen=True)
class ElementReport:
    """All checks of one element type."""

    type_name: str
    results: tuple[CheckResult, ...]

    @property
    def passed(self) -> bool:
        """True if every check passed."""
        return all(r.passed for r in self.results)


def find_c_compiler() -> str | None:
    """The C compiler for the C-code check (None if there is none)."""
    return c_compiler()


def _sample_range(lo: float, hi: float, default: float) -> tuple[float, float]:
    span = max(abs(default), 1.0)
    low = lo if math.isfinite(lo) else default - span
    high = hi if math.isfinite(hi) else default + span
    return low, high


def _probe_model(element: AbstractForceElement) -> Model:
    """A model holding only ``element``; vector properties bound to fresh parameters."""
    extra: list[Parameter] = []
    changes: dict[str, Any] = {}  # fields of the concrete subclass, unknown to the base's type
    for decl in element.parameters:
        if decl.vector and getattr(element, decl.name, None) is not None:
            names = []
            for k, value in enumerate(getattr(element, decl.name)):
                name = f"{decl.name}_{k}"
                extra.append(Parameter(name, float(value), decl.unit, decl.bounds, decl.description))
                names.append(name)
            changes[decl.name] = tuple(names)
    if changes:
        element = dataclasses.replace(element, **changes)
    ends = list(getattr(element, "coordinates", ()) or ())
    coordinate = getattr(element, "coordinate", None)
    if coordinate:
        ends.append(coordinate)
    coords = tuple(Coordinate(name, mass=1.0) for name in dict.fromkeys(ends))
    return Model(
        name=f"probe_{element.type_name}",
        coordinates=coords,
        parameters=tuple(extra),
        forces=(element,),
        outputs=(Output("y", coords[0].name),),
    )


def _relative_error(exact: np.ndarray, approx: np.ndarray, floor: float) -> float:
    scale = max(float(np.max(np.abs(exact), initial=0.0)), floor)
    return float(np.max(np.abs(exact - approx), initial=0.0)) / scale


def _check_jacobians(element, rng, n_states) -> CheckResult:
    model = compile_model(_probe_model(element))
    params = model.model.all_parameters
    q_scale, v_scale = getattr(type(element), "typical_state", (0.1, 1.0))
    worst = 0.0
    for _ in range(n_states):
        p = np.array([rng.uniform(*_sample_range(*par.bounds, par.value)) for par in params])
        q = rng.uniform(-1, 1, model.n) * q_scale
        v = rng.uniform(-1, 1, model.n) * v_scale
        a, lam, t = np.zeros(model.n), np.zeros(model.m), float(rng.uniform(0.1, 1.9))
        _, K, JV = model.jacobian_terms(q, v, a, lam, t, p)[1:4]
        F_p = model.parameter_terms(q, v, a, lam, t, p)[1]

        def F(qq, vv, pp, a=a, lam=lam, t=t):
            return model.residual_terms(qq, vv, a, lam, t, pp)[1]

        for label, x, exact, typical in (("q", q, K, q_scale), ("v", v, -JV, v_scale), ("p", p, F_p, 1e-3)):
            for j in range(len(x)):
                step = 1e-6 * max(abs(x[j]), typical)
                xp, xm = x.copy(), x.copy()
                xp[j] += step
                xm[j] -= step
                args_p = {"q": (xp, v, p), "v": (q, xp, p), "p": (q, v, xp)}[label]
                args_m = {"q": (xm, v, p), "v": (q, xm, p), "p": (q, v, xm)}[label]
                fp, fm = F(*args_p), F(*args_m)
                fd = (fp - fm) / (2 * step)
                # A central difference cannot resolve less than the round-off of F over the step.
                roundoff = 100 * np.finfo(float).eps * max(np.max(np.abs(fp)), np.max(np.abs(fm))) / step
                column = float(np.max(np.abs(exact[:, j]), initial=0.0))
                error = float(np.max(np.abs(exact[:, j] - fd), initial=0.0))
                worst = max(worst, error / (column + roundoff / JACOBIAN_RTOL + 1e-300))
    passed = bool(worst <= JACOBIAN_RTOL)
    return CheckResult("jacobians", passed, f"max relative difference to central differences {worst:.1e} "
                       f"(limit {JACOBIAN_RTOL:g}, round-off of the differences allowed for) at {n_states} "
                       "random states")


def _local_functions(element: AbstractLocalElement):
    law = local_law(element)
    func = generate_function(
        "local_law", [("q", law.q), ("v", law.v), ("p", law.p), ("t", _dummy_t())],
        [list(law.forces), law.dfdq, law.dfdv, law.dfdp],
    )
    return law, func


def _dummy_t():
    import sympy as sp

    return sp.Symbol("t_unused", real=True)


def _local_parameters(law, rng=None) -> np.ndarray:
    values = []
    for decl, _ in law.layout:
        if rng is None:
            values.append(decl.default)
        else:
            lo, hi = decl.bounds
            values.append(rng.uniform(*_sample_range(lo, hi, decl.default)))
    return np.array(values, dtype=float)


def _vector_defaults(element, law) -> np.ndarray:
    # Vector properties have no default; take the example's bound values.
    values = []
    for decl, k in law.layout:
        if k is None:
            values.append(decl.default)
        else:
            values.append(float(getattr(element, decl.name)[k]))
    return np.array(values, dtype=float)


def _random_local_state(element, law, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random local ``(q, v, p)``: states at the element's typical scales, scalar
    properties inside their bounds, vector properties at the example's values."""
    n = len(law.q)
    q_scale, v_scale = getattr(type(element), "typical_state", (0.1, 1.0))
    q = rng.uniform(-1, 1, n) * q_scale
    v = rng.uniform(-1, 1, n) * v_scale
    p = _vector_defaults(element, law)
    scalars = [i for i, (_, k) in enumerate(law.layout) if k is None]
    p[scalars] = _local_parameters(law, rng)[scalars]
    return q, v, p


def _check_c_code(element, law, func, rng, n_states, compiler) -> CheckResult:
    if compiler is None:
        return CheckResult("c_code", False, "no C compiler found: install gcc (or clang) or set CC")
    source = element_c_source(element, prefix="element")
    with tempfile.TemporaryDirectory(prefix="fmi_adjoint_check_") as folder:
        src = Path(folder) / "element.c"
        lib = Path(folder) / "element.so"
        src.write_text(source)
        try:
            compile_shared([src], lib, what="the element's generated C code", compiler=compiler)
        except CompilerError as exc:
            return CheckResult("c_code", False, str(exc))
        dll = ctypes.CDLL(str(lib))
        n, n_p = len(law.q), len(law.p)
        ptr = ctypes.POINTER(ctypes.c_double)
        worst = 0.0
        for _ in range(n_states):
            q, v, p = _random_local_state(element, law, rng)
            f_ref, dq_ref, dv_ref, dp_ref = func(q, v, p, 0.0)
            out = [np.zeros(n), np.zeros(n * n), np.zeros(n * n), np.zeros(max(n * n_p, 1))]
            args = [np.ascontiguousarray(x).ctypes.data_as(ptr) for x in (q, v, p)]
            dll.element_forces(*args, out[0].ctypes.data_as(ptr))
            dll.element_jacobian(*args, *(o.ctypes.data_as(ptr) for o in out[1:]))
            for ref, got in ((f_ref, out[0]), (dq_ref.ravel(), out[1]), (dv_ref.ravel(), out[2]),
                             (dp_ref.ravel(), out[3][: n * n_p])):
                worst = max(worst, _relative_error(ref, got, 1e-300))
    return CheckResult("c_code", bool(worst <= C_CODE_RTOL),
                       f"max relative difference C vs numpy {worst:.1e} (limit {C_CODE_RTOL:g})")


def _check_rest(element, law, func) -> CheckResult:
    n = len(law.q)
    f = func(np.zeros(n), np.zeros(n), _vector_defaults(element, law), 0.0)[0]
    size = float(np.max(np.abs(f), initial=0.0))
    return CheckResult("zero_at_rest", bool(size <= 1e-12), f"|f| at rest with default parameters = {size:.1e}")


def _check_passivity(element, law, func, rng, n_states) -> CheckResult:
    import sympy as sp

    n = len(law.q)
    p_syms = {}
    idx = 0
    for decl in element.parameters:
        if decl.vector:
            length = len(getattr(element, decl.name) or ())
            p_syms[decl.name] = tuple(law.p[idx : idx + length])
            idx += length
        else:
            p_syms[decl.name] = law.p[idx]
            idx += 1
    energy = element.potential_energy(law.q, p_syms)
    power_func = None
    if energy is not None:
        dV = sp.Matrix([energy]).jacobian(sp.Matrix(law.q))
        power_func = generate_function("energy_rate", [("q", law.q), ("p", law.p), ("t", _dummy_t())], [dV])
    elif not isinstance(element, AbstractTwoPointElement):
        return CheckResult("passivity", True, "not checked: the element gives no potential energy")
    worst = math.inf
    for _ in range(n_states):
        q, v, p = _random_local_state(element, law, rng)
        f = func(q, v, p, 0.0)[0]
        if power_func is not None:
            dissipated = -float(f @ v) - float(power_func(q, p, 0.0)[0][0] @ v)
            scale = float(np.abs(f) @ np.abs(v)) + 1e-300
        else:
            f_static = func(q, np.zeros(n), p, 0.0)[0]
            # Two-point law: force on the first end is -f, so f = -(local force 0).
            dissipated = -float((f[0] - f_static[0]) * (v[0] - (v[1] if n > 1 else 0.0)))
            scale = abs(float(f[0] - f_static[0])) * abs(v[0]) + 1e-300
        worst = min(worst, dissipated / scale)
    return CheckResult("passivity", bool(worst >= -1e-9),
                       f"min dissipated power / |power| = {worst:.2e} at {n_states} random states (must be >= 0)")


def check_element(cls: type[AbstractForceElement], *, seed: int = 0, n_states: int = 6,
                  compiler: str | None = "auto") -> ElementReport:
    """Run every applicable check on the element type ``cls`` (see module docstring)."""
    rng = np.random.default_rng(seed)
    example = getattr(cls, "example", None)
    if example is None:
        # Only AbstractLocalElement supplies a default; a model-level element must bring its own.
        raise PluginError(
            f"plugins check: element '{cls.type_name}' ({cls.__module__}.{cls.__qualname__}) has no classmethod "
            "example(); add one returning a representative instance."
        )
    element = example()
    results = [_check_jacobians(element, rng, n_states)]
    if isinstance(element, AbstractLocalElement):
        law, func = _local_functions(element)
        results.append(_check_c_code(element, law, func, rng, n_states,
                                     find_c_compiler() if compiler == "auto" else compiler))
        if type(element).zero_at_rest:
            results.append(_check_rest(element, law, func))
        if type(element).passive:
            results.append(_check_passivity(element, law, func, rng, n_states))
    else:
        results.append(CheckResult("c_code", True, "model-level element: its C code is generated with the model"))
    return ElementReport(cls.type_name, tuple(results))
