"""The plain steps of :func:`~fmi_adjoint.integrate.radau.integrate_radau` in compiled code (issue 30, part 6).

``fa_radau.c`` (next to this file) takes the steps of a run that have no event inside them: the
trial end, the attempt (simplified Newton on the stage equations, the filtered error estimate),
rejection and acceptance, the step-size controller, held stops, frozen nodes and time-event
clipping, exactly as :mod:`.radau` does and in the same order; :mod:`.radau` stays the
specification and the reference.  Whatever is not a plain step it hands back, and Python takes the
next attempt: an indicator that changes its domain (the event search), a step size below the
smallest step, a frozen step that fails, and any failure of the system (Python repeats the call
and raises its own error).  A step that ends at a time event or a step event is committed in C and
its event iteration run here (:meth:`CompiledWalk.advance`).

The system is C too: a :class:`CompiledSystem` hands over an :class:`FaOde` (its right-hand side,
Jacobian, indicators and the two hooks of an accepted step) and keeps the part of the record that
is its own (an FMU's stage Jacobians: :mod:`fmi_adjoint.fmu.me_kernel`).

The scheme's constants are :mod:`.radau`'s, passed in; the LU factorizations are LAPACK's
``dgetrf``/``dgetrs`` from :mod:`scipy.linalg.cython_lapack`, the routines ``scipy.linalg.lu_factor``
and ``lu_solve`` call.  A compiled run is not bit for bit the Python run (sums are formed in another
order), but it is deterministic: a frozen replay in C reproduces a compiled run bit for bit.
"""

from __future__ import annotations

import ctypes
import functools
import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import scipy.linalg.cython_lapack

from .radau import RadauStep, scheme_constants

__all__ = ["CompiledSystem", "CompiledWalk", "FaOde", "lapack_routines", "pointer"]

_double_p = ctypes.POINTER(ctypes.c_double)
_long_p = ctypes.POINTER(ctypes.c_long)

#: What fa_radau_walk returns (its enum).
_DONE, _CHECK, _PYTHON, _PENDING, _FULL, _START, _NO_MEMORY = range(7)
#: The record of one call is at most this many bytes (steps, and the system's per-step record).
_RECORD_BYTES = 32 << 20
_RECORD_STEPS = 4096


class FaOde(ctypes.Structure):
    """``fa_ode`` of fa_radau.c: the system's functions and their first argument."""

    _fields_ = [("self", ctypes.c_void_p), ("rhs", ctypes.c_void_p), ("jacobian", ctypes.c_void_p),
                ("indicators", ctypes.c_void_p), ("accepted", ctypes.c_void_p), ("completed", ctypes.c_void_p)]


class FaWalk(ctypes.Structure):
    """``fa_walk`` of fa_radau.c (the same fields in the same order)."""

    _fields_ = [
        ("A", ctypes.c_double * 9), ("c", ctypes.c_double * 3), ("gamma0", ctypes.c_double),
        ("error_weights", ctypes.c_double * 3), ("newton_tol", ctypes.c_double),
        ("newton_stagnation", ctypes.c_double), ("newton_max", ctypes.c_long), ("safety", ctypes.c_double),
        ("fac_min", ctypes.c_double), ("fac_max", ctypes.c_double), ("stretch", ctypes.c_double),
        ("step_ulps", ctypes.c_double), ("min_step_relative", ctypes.c_double), ("progress_window", ctypes.c_long),
        ("dgetrf", ctypes.c_void_p), ("dgetrs", ctypes.c_void_p),
        ("n", ctypes.c_long), ("n_indicators", ctypes.c_long), ("frozen", ctypes.c_long),
        ("t0", ctypes.c_double), ("t_end", ctypes.c_double), ("rtol", ctypes.c_double),
        ("max_step", ctypes.c_double), ("deadline", ctypes.c_double), ("atol", _double_p),
        ("targets", _double_p), ("n_targets", ctypes.c_long), ("target_index", ctypes.c_long),
        ("hold", ctypes.c_double), ("time_event", ctypes.c_double), ("h_proposed", ctypes.c_double),
        ("max_attempts", ctypes.c_long),
        ("t", ctypes.c_double), ("x", _double_p), ("f0", _double_p), ("J0", _double_p), ("z", _double_p),
        ("attempts", ctypes.c_long), ("rhs", ctypes.c_long), ("jacobians", ctypes.c_long),
        ("newton", ctypes.c_long), ("rejected", ctypes.c_long), ("unsolved", ctypes.c_long),
        ("capacity", ctypes.c_long), ("count", ctypes.c_long),
        ("rec_t", _double_p), ("rec_x0", _double_p), ("rec_Z", _double_p), ("rec_F", _double_p),
        ("rec_err", _double_p), ("rec_iterations", _long_p), ("pending", ctypes.c_long),
    ]


@functools.cache
def lapack_routines() -> tuple[int, int]:
    """The addresses of LAPACK's ``dgetrf`` and ``dgetrs`` as scipy calls them (its
    ``cython_lapack`` capsules)."""
    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    capsules = scipy.linalg.cython_lapack.__pyx_capi__
    addresses = []
    for name in ("dgetrf", "dgetrs"):
        capsule = capsules[name]
        addresses.append(int(api.PyCapsule_GetPointer(capsule, api.PyCapsule_GetName(capsule))))
    return addresses[0], addresses[1]


def pointer(array: np.ndarray, kind=_double_p):
    """A ctypes pointer to the (C-contiguous) ``array``'s data."""
    return array.ctypes.data_as(kind)


class CompiledSystem(Protocol):
    """The system side of a compiled walk (an FMU: :class:`fmi_adjoint.fmu.me_kernel.FmuKernel`)."""

    #: The library with ``fa_radau_walk`` and the system's functions.
    library: ctypes.CDLL

    def ode(self) -> FaOde:
        """The system's functions for the coming call."""

    def step_bytes(self) -> int:
        """What the system records per accepted step, in bytes."""

    def prepare(self, capacity: int) -> None:
        """Before a call that may accept ``capacity`` steps: the system's buffers, and its state
        as Python left it (which columns are differenced, whether a state event just happened)."""

    def collect(self, steps: Sequence[RadauStep]) -> None:
        """After the call: the system's record of the steps it accepted (in order), and its state."""


class CompiledWalk:
    """:class:`~fmi_adjoint.integrate.radau.CompiledSteps` over a :class:`CompiledSystem`."""

    def __init__(self, system: CompiledSystem):
        self.system = system
        self._function = system.library.fa_radau_walk
        self._function.restype = ctypes.c_int
        self._function.argtypes = [ctypes.POINTER(FaWalk), ctypes.POINTER(FaOde)]
        self._walk = FaWalk()
        w = self._walk
        for name, value in scheme_constants().items():
            if isinstance(value, list):
                getattr(w, name)[:] = value
            else:
                setattr(w, name, value)
        w.dgetrf, w.dgetrs = lapack_routines()

    def advance(self, walk) -> bool:
        """Plain steps from ``walk``'s point (a :class:`~fmi_adjoint.integrate.radau._Walk`),
        recorded into it; True when the next attempt is Python's."""
        n = walk.x.size
        remaining = walk.max_accepted - len(walk.steps)
        if n == 0 or remaining <= 0:
            return True
        per_step = 8 * (2 + 7 * n + 1) + 8 + self.system.step_bytes()
        capacity = int(max(1, min(remaining, _RECORD_STEPS, _RECORD_BYTES // per_step)))
        w = self._walk
        arrays = self._bind(walk, capacity)
        self.system.prepare(capacity)
        code = self._function(ctypes.byref(w), ctypes.byref(self.system.ode()))
        if code == _NO_MEMORY:
            raise MemoryError("the compiled Radau IIA loop could not allocate its workspace")
        self._read_back(walk, arrays)
        steps = self._record(walk, arrays, int(w.count))
        self.system.collect(steps)
        if code == _PENDING:
            walk.event_at_end("time" if w.pending == 1 else "step")
        elif code == _START:
            walk.start_derivatives()
        return code == _PYTHON

    def _bind(self, walk, capacity: int) -> dict[str, np.ndarray]:
        """The walk's state into the C structure (arrays the call reads and writes)."""
        w, n = self._walk, walk.x.size
        budget = walk.budget
        arrays = {
            "atol": np.ascontiguousarray(walk.atol, dtype=float), "targets": np.ascontiguousarray(walk.targets),
            "x": np.array(walk.x, dtype=float), "f0": np.array(walk.f0, dtype=float),
            "J0": np.array(walk.J0, dtype=float, order="C"), "z": np.array(walk.z, dtype=float),
            "rec_t": np.empty((capacity, 2)), "rec_x0": np.empty((capacity, n)), "rec_Z": np.empty((capacity, 3, n)),
            "rec_F": np.empty((capacity, 3, n)), "rec_err": np.empty(capacity),
            "rec_iterations": np.empty(capacity, dtype=np.int64),
        }
        w.n, w.n_indicators, w.frozen = n, walk.z.size, int(walk.frozen)
        w.t0, w.t_end, w.rtol, w.max_step = walk.t0, walk.t_end, walk.rtol, walk.max_step
        w.deadline = walk.deadline
        w.min_step_relative = budget.min_step_relative
        w.max_attempts = budget.max_steps
        w.n_targets, w.target_index = walk.targets.size, walk.target_index
        w.hold = math.nan if walk.hold is None else walk.hold
        w.time_event = math.nan if walk.time_event is None else walk.time_event
        w.h_proposed = walk.h_proposed
        w.t = walk.t
        counts = walk.counts
        w.attempts, w.rhs, w.jacobians = counts.attempts, counts.rhs, counts.jacobians
        w.newton, w.rejected, w.unsolved = counts.newton, counts.rejected, counts.unsolved
        w.capacity, w.count, w.pending = capacity, 0, 0
        for name in ("atol", "targets", "x", "f0", "J0", "z", "rec_t", "rec_x0", "rec_Z", "rec_F", "rec_err"):
            setattr(w, name, pointer(arrays[name]))
        w.rec_iterations = pointer(arrays["rec_iterations"], _long_p)
        return arrays

    def _read_back(self, walk, arrays: dict[str, np.ndarray]) -> None:
        w, counts = self._walk, walk.counts
        counts.attempts, counts.rhs, counts.jacobians = int(w.attempts), int(w.rhs), int(w.jacobians)
        counts.newton, counts.rejected, counts.unsolved = int(w.newton), int(w.rejected), int(w.unsolved)
        walk.target_index = int(w.target_index)
        walk.hold = None if math.isnan(w.hold) else float(w.hold)
        walk.h_proposed = float(w.h_proposed)
        if w.count:
            walk.t, walk.x = float(w.t), arrays["x"]
            walk.f0, walk.J0, walk.z = arrays["f0"], arrays["J0"], arrays["z"]

    @staticmethod
    def _record(walk, arrays: dict[str, np.ndarray], count: int) -> list[RadauStep]:
        """The accepted steps into the walk's record (``_Walk.accept`` of a plain step)."""
        steps = []
        rec_t, rec_x0, rec_Z = arrays["rec_t"], arrays["rec_x0"], arrays["rec_Z"]
        for k in range(count):
            step = RadauStep(float(rec_t[k, 0]), float(rec_t[k, 1]), rec_x0[k], rec_Z[k], arrays["rec_F"][k],
                             float(arrays["rec_err"][k]), int(arrays["rec_iterations"][k]))
            steps.append(step)
            walk.commit(step, rec_x0[k] + rec_Z[k, 2])
        return steps
