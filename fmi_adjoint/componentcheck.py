"""``fmi-adjoint plugins check`` for a multibody component plugin (issue 23, item 1).

A component (:mod:`fmi_adjoint.mbs.registry`) is checked the way a model file will use it,
on the small system its classmethod ``example()`` returns:

* **example** -- it is a :class:`~fmi_adjoint.mbs.MultibodySystem` with an instance of the
  component in the section the class names;
* **lowering** -- the system lowers to a :class:`~fmi_adjoint.model.Model`;
* **build** -- the model builds with the default engine (the C engine, or the Python engine
  on a machine without a C compiler);
* **simulate** -- a few steps from the consistent initial state stay finite;
* **assembly** -- :func:`fmi_adjoint.assembly.partition` derives the model by components (a
  :class:`~fmi_adjoint.assembly.Partition`, not the whole-system fallback); the report gives the
  number of component types, each derived once however many instances a model has.

A failed check skips the ones after it.  The checks catch any exception of the plugin's own
code (``example``, ``lower``) and report it as a failure naming the component.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .assembly import Partition, partition
from .compiled import compile_model
from .elementcheck import CheckResult
from .engines import choose_engine
from .errors import FmiAdjointError
from .mbs import MultibodySystem
from .model import Model
from .text import excerpt

__all__ = ["ComponentReport", "check_component", "CHECK_STEPS"]

#: Steps of the simulation check.
CHECK_STEPS = 5


@dataclasses.dataclass(frozen=True)
class ComponentReport:
    """All checks of one component type; ``component_types``: the number of component types of
    its example's partition (None if the checks did not get that far)."""

    type_name: str
    results: tuple[CheckResult, ...]
    component_types: int | None = None

    @property
    def passed(self) -> bool:
        """True if every check passed."""
        return all(r.passed for r in self.results)


def _uses(system: MultibodySystem, cls: type) -> bool:
    items = getattr(system, getattr(cls, "section", ""), ())
    return any(isinstance(item, cls) for item in items)


def check_component(cls: type, *, steps: int = CHECK_STEPS) -> ComponentReport:
    """Run the checks of the module docstring on the component class ``cls`` (validated by the
    registry: :func:`fmi_adjoint.mbs.registry.validate_component_class`)."""
    name = getattr(cls, "type_name", cls.__name__)
    results: list[CheckResult] = []

    def report(types: int | None = None) -> ComponentReport:
        return ComponentReport(name, tuple(results), types)

    def fail(check: str, exc: BaseException) -> ComponentReport:
        text = str(exc) if len(str(exc)) <= 300 else str(exc)[:297] + "..."
        results.append(CheckResult(check, False, f"{type(exc).__name__}: {text}"))
        return report()

    try:
        system = cls.example()  # type: ignore[attr-defined]
    except Exception as exc:  # third-party code
        return fail("example", exc)
    if not isinstance(system, MultibodySystem) or not _uses(system, cls):
        results.append(CheckResult("example", False, f"{cls.__qualname__}.example() returned {excerpt(repr(system))}; "
                                   f"return a MultibodySystem with a {name} in its {cls.section}"  # type: ignore
                                   ))
        return report()
    results.append(CheckResult("example", True, f"system '{system.name}' with a {name} in its "
                               f"{cls.section}"))  # type: ignore[attr-defined]
    try:
        model: Model = system.to_model()
    except Exception as exc:  # third-party code
        return fail("lowering", exc)
    results.append(CheckResult("lowering", True, f"{len(model.coordinates)} coordinates, {len(model.constraints)} "
                               f"constraints, {len(model.forces)} force elements, {len(model.outputs)} outputs"))
    try:
        compiled = compile_model(model)
        built = choose_engine(model, compiled=compiled)
    except FmiAdjointError as exc:
        return fail("build", exc)
    engine = built.engine
    results.append(CheckResult("build", True, f"{engine.name} engine" + (f"; {built.note}" if built.note else "")))
    h = model.simulation.step
    try:
        traj = engine.simulate(t_end=steps * h, step=h)
    except FmiAdjointError as exc:
        return fail("simulate", exc)
    finite = bool(np.all(np.isfinite(traj.q)) and np.all(np.isfinite(traj.v)))
    results.append(CheckResult("simulate", finite, f"{traj.n_steps} steps of {h:g} s, states "
                               f"{'finite' if finite else 'NOT finite'}"))
    if not finite:
        return report()
    part = partition(model)
    if not isinstance(part, Partition):
        results.append(CheckResult("assembly", False, f"derived as a whole system: {part.reason}"))
        return report()
    results.append(CheckResult("assembly", True, f"derived by components: {len(part.types)} component types, "
                               f"{len(part.instances)} instances"))
    return report(len(part.types))
