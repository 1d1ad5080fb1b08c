"""The plugin's own tests: its registration as pyproject.toml declares it, the component check,
and the closed-form period of its example."""

from __future__ import annotations

import importlib.metadata as md
import math
import tomllib
from pathlib import Path

import numpy as np

from fmi_adjoint import NativeEngine
from fmi_adjoint.componentcheck import check_component
from fmi_adjoint.mbs import ComponentRegistry
from fmi_adjoint_torsionbar import TorsionBar
from tolerances import SMALL_AMPLITUDE_PERIOD

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def registry() -> ComponentRegistry:
    """The installed component plugins plus this one, exactly as pyproject.toml declares it."""
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]["fmi_adjoint.components"]
    mine = [md.EntryPoint(name, value, "fmi_adjoint.components") for name, value in declared.items()]
    return ComponentRegistry(list(md.entry_points(group="fmi_adjoint.components")) + mine)


def test_entry_point_loads_the_component():
    assert registry().get("torsion_bar") is TorsionBar


def test_component_check_passes():
    report = check_component(TorsionBar)
    assert report.passed, report.results


def test_example_period_is_the_closed_form():
    engine = NativeEngine.build(TorsionBar.example().to_model())
    traj = engine.simulate()
    p = dict(zip(engine.compiled.parameter_names, engine.compiled.parameter_vector()))
    closed = 2 * math.pi * math.sqrt(p["J"] / p["k_t"])
    y, t = traj.outputs()[:, 0], traj.t
    idx = np.nonzero((y[:-1] < 0) & (y[1:] >= 0))[0]
    crossings = t[idx] - y[idx] * (t[idx + 1] - t[idx]) / (y[idx + 1] - y[idx])
    assert abs(float(np.mean(np.diff(crossings))) - closed) <= SMALL_AMPLITUDE_PERIOD * closed
