"""``--newton full|modified`` (issue 24, part 7): modified Newton on the command line.

Modified Newton keeps the factored iteration matrix over iterations and steps
(:attr:`~fmi_adjoint.integrate.schemes.AbstractScheme.reuse_jacobian`).  The option reaches
the scheme of ``simulate``, ``identify`` (its RESULT.json names it) and ``export`` (the FMU's
``export.json`` records it and its instantiation token differs), and an unknown variant is
refused with the choices.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from captured_cli import cli
from tolerances import MODIFIED_NEWTON

from fmi_adjoint.engines import AbstractEngine
from fmi_adjoint.errors import ModelError
from fmi_adjoint.export.fmu_export import instantiation_token
from fmi_adjoint.integrate.schemes import (
    HHT,
    NEWTON_METHODS,
    GeneralizedAlpha,
    scheme_from_record,
    scheme_from_settings,
    with_newton,
)
from fmi_adjoint.data import read_csv
from fmi_adjoint.examples import example_path
from fmi_adjoint.model_file import load_model


def test_variants_set_reuse_jacobian():
    settings = load_model(example_path("slider_crank")).simulation
    assert scheme_from_settings(settings, newton="modified").reuse_jacobian is True
    assert scheme_from_settings(settings, newton="full").reuse_jacobian is False
    assert scheme_from_settings(settings).reuse_jacobian is False
    assert set(NEWTON_METHODS) == {"full", "modified"}
    generalized = scheme_from_settings(settings, integrator="generalized_alpha", newton="modified")
    assert isinstance(generalized, GeneralizedAlpha) and generalized.reuse_jacobian


def test_unknown_variant_names_the_choices():
    with pytest.raises(ModelError, match="choose one of full, modified"):
        with_newton(HHT(), "quasi")


@pytest.mark.parametrize("scheme", [HHT(alpha=-0.1), GeneralizedAlpha(rho_inf=0.7)])
def test_record_round_trip_and_token(scheme):
    modified = with_newton(scheme, "modified")
    # Full Newton's record is the record of before (no key), modified Newton's names it.
    assert "newton" not in scheme.record()
    assert modified.record()["newton"] == "modified"
    assert scheme_from_record(modified.record()) == modified
    assert scheme_from_record(scheme.record()) == scheme
    assert "newton=modified" in modified.describe() and "newton" not in scheme.describe()
    # An FMU exported with modified Newton has another instantiation token.
    tokens = {instantiation_token("text", {}, 1e-3, s, 2) for s in (scheme, modified)}
    assert len(tokens) == 2


def test_simulate_runs_modified_newton(tmp_path, monkeypatch):
    seen = []
    original = AbstractEngine.simulate

    def spy(self, *args, **kwargs):
        seen.append(kwargs.get("solver"))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(AbstractEngine, "simulate", spy)
    paths = {}
    for variant in ("full", "modified"):
        paths[variant] = tmp_path / f"{variant}.csv"
        code, _, err = cli(["simulate", "slider_crank", "--t-end", "0.2", "--newton", variant, "-o", paths[variant]])
        assert code == 0, err
    assert [s.reuse_jacobian for s in seen] == [False, True]
    full, modified = (read_csv(paths[v]) for v in ("full", "modified"))
    # The documented trade-off: the states agree to the Newton tolerance, not bit for bit.
    scale = np.abs(full.values).max()
    np.testing.assert_allclose(modified.values, full.values, rtol=0, atol=MODIFIED_NEWTON * scale)


def test_bad_variant_exits_2():
    with pytest.raises(SystemExit) as stop:
        cli(["simulate", "sdof", "--newton", "quasi"])
    assert stop.value.code == 2


def test_gradient_reports_modified_newton(tmp_path):
    """The problem of ``gradient`` / ``identify`` (one ``problem_spec``) runs modified Newton,
    and its gradient is the same to the Newton tolerance (the adjoint is exact for each run)."""
    data = tmp_path / "sdof.csv"
    assert cli(["simulate", "sdof", "--step", "1e-2", "--set", "c=1.3", "-o", data])[0] == 0
    reports = {}
    for variant in ("full", "modified"):
        code, out, err = cli(["gradient", "sdof", "--data", data, "--params", "c,d", "--step", "1e-2",
                              "--newton", variant, "--json"])
        assert code == 0, err
        reports[variant] = json.loads(out)
    assert reports["modified"]["integrator"].endswith("newton=modified)")
    assert "newton" not in reports["full"]["integrator"]
    for name in ("c", "d"):
        full, modified = reports["full"]["gradient"][name], reports["modified"]["gradient"][name]
        assert abs(modified - full) <= MODIFIED_NEWTON * abs(full), name


def test_newton_with_fmu_is_refused(tmp_path):
    code, _, err = cli(["identify", "--fmu", tmp_path / "missing.fmu", "--data", tmp_path / "d.csv", "--params", "k",
                        "--newton", "modified"])
    assert code == 2 and "--newton applies to model files" in err


@pytest.mark.slow
def test_export_with_modified_newton_runs_it_and_is_trusted(tmp_path):
    """``export --newton modified``: export.json records it, the binary runs modified Newton
    (its outputs are the in-process engine's modified-Newton run, bit for bit, and differ from
    full Newton's), and the import's trust rebuild reproduces the binary."""
    import fmpy  # noqa: PLC0415

    from fmi_adjoint.engines import NativeEngine  # noqa: PLC0415
    from fmi_adjoint.fmu.archive import open_fmu  # noqa: PLC0415

    fmu = tmp_path / "crank.fmu"
    code, _, err = cli(["export", "slider_crank", "--newton", "modified", "-o", fmu])
    assert code == 0, err
    archive = open_fmu(fmu)
    try:
        settings = archive.native
        assert settings is not None and settings["newton"] == "modified"
    finally:
        archive.close()
    model = load_model(example_path("slider_crank"))
    engine = NativeEngine.build(model)
    h = model.simulation.step
    n = 200
    modified = engine.simulate(t_end=n * h, solver=with_newton(scheme_from_settings(model.simulation), "modified"))
    full = engine.simulate(t_end=n * h)
    result = fmpy.simulate_fmu(str(fmu), stop_time=n * h, output_interval=h)
    name = engine.compiled.output_names[0]
    column = engine.compiled.output_names.index(name)
    assert np.array_equal(result[name], modified.outputs()[:, column])
    assert not np.array_equal(result[name], full.outputs()[:, column])
