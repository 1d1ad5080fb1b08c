"""Units of measured channels against the units of model outputs (issue 26, part 3;
:mod:`fmi_adjoint.bench.units`): converted where they are of one dimension, refused by name
where they are not, a warning where a unit is unknown, an error where a string is no unit."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from fmi_adjoint.bench.preprocess import Preprocessing, prepare
from fmi_adjoint.bench.units import convert_unit, time_factor
from fmi_adjoint.cli.main import main
from fmi_adjoint.data import Measurement, read_csv
from fmi_adjoint.errors import DataError
from fmi_adjoint.examples import example_path

from tolerances import EXACT

pytest.importorskip("pint")


def conversion(data_unit: str, output_unit: str):
    return convert_unit(data_unit, output_unit, channel="ch", output="y", source="run.csv", model="'m'")


@pytest.mark.parametrize("data_unit, output_unit, factor, offset", [
    ("deg", "rad", math.pi / 180, 0.0),
    ("°", "1", math.pi / 180, 0.0),
    ("mm/s^2", "m/s^2", 1e-3, 0.0),
    ("mm/s²", "m/s**2", 1e-3, 0.0),
    ("g", "kg", 1e-3, 0.0),
    ("kN", "N", 1e3, 0.0),
    ("degC", "K", 1.0, 273.15),
])
def test_units_of_one_dimension_are_converted(data_unit, output_unit, factor, offset):
    c = conversion(data_unit, output_unit)
    assert c.status == "converted" and not c.notice
    assert abs(c.factor - factor) <= EXACT * factor and abs(c.offset - offset) <= EXACT * max(offset, 1.0)


@pytest.mark.parametrize("data_unit, output_unit, status", [("m/s^2", "m/s^2", "same"), ("", "m", "unchecked"),
                                                            ("m", "", "unchecked")])
def test_equal_or_missing_units_are_not_converted(data_unit, output_unit, status):
    c = conversion(data_unit, output_unit)
    assert (c.status, c.factor, c.offset) == (status, 1.0, 0.0)


def test_units_of_different_dimensions_are_refused_naming_both():
    with pytest.raises(DataError, match=r"'ch' is in 'm', the output 'y' of 'm' in 'N': incompatible units"):
        conversion("m", "N")


def test_an_unknown_unit_is_a_warning_not_a_refusal():
    c = conversion("counts_per_rev", "m")
    assert c.status == "unknown" and (c.factor, c.offset) == (1.0, 0.0)
    assert "'counts_per_rev'" in c.notice and "not a known unit" in c.notice


@pytest.mark.parametrize("text", ["m/s^^2", "2 m", "m**"])
def test_a_string_that_is_no_unit_is_an_error(text):
    with pytest.raises(DataError, match=re.escape(f"'{text}' is not a unit")):
        conversion(text, "m")


def test_a_time_vector_in_milliseconds_becomes_seconds():
    assert time_factor("ms", "f") == 1e-3 and time_factor("", "f") == 1.0
    measured = Measurement(np.array([0.0, 500.0, 1000.0]), ("x",), np.zeros((3, 1)), "f", ("m",), "ms")
    prepared = prepare(measured, Preprocessing(), output_names=("x",), output_units=("m",), model="'m'", step=0.1)
    assert prepared.measurement.times.tolist() == [0.0, 0.5, 1.0]
    with pytest.raises(DataError, match="not a unit of time"):
        time_factor("m", "f")


# -- the command line --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def angle_model(tmp_path_factory):
    """sdof with its output declared in radians, and its response at c = 2 written in rad and deg."""
    work = tmp_path_factory.mktemp("units")
    text = example_path("sdof").read_text(encoding="utf-8")
    assert text.rstrip().endswith('unit = "m"')
    model = work / "angle.toml"
    model.write_text(text.rstrip()[: -len('unit = "m"')] + 'unit = "rad"\n', encoding="utf-8")
    assert main(["simulate", str(model), "--set", "c=2", "-o", str(work / "sim.csv")]) == 0
    sim = read_csv(work / "sim.csv")

    def write(name: str, unit: str, scale: float):
        path = work / name
        rows = [f"{float(t)!r},{float(v * scale)!r}" for t, v in zip(sim.times, sim.column("x"))]
        path.write_text(f"time,x [{unit}]\n" + "\n".join(rows) + "\n", encoding="utf-8")
        return path

    return model, write("rad.csv", "rad", 1.0), write("deg.csv", "deg", 180 / math.pi), write("N.csv", "N", 1.0)


def run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out, captured.err


def cost_and_gradient(out: str) -> np.ndarray:
    return np.array([float(v) for v in re.findall(r"= ([-+0-9.e]+)", out)])


def test_a_channel_in_degrees_against_an_output_in_radians_is_converted(angle_model, capsys):
    model, rad, deg, _ = angle_model
    code, out_rad, _ = run(["gradient", model, "--data", rad, "--params", "c,d", "--set", "c=1.5"], capsys)
    assert code == 0
    code, out_deg, err = run(["gradient", model, "--data", deg, "--params", "c,d", "--set", "c=1.5"], capsys)
    assert code == 0 and "warning" not in err
    a, b = cost_and_gradient(out_rad), cost_and_gradient(out_deg)
    assert a.size == 3 and np.max(np.abs(a - b)) <= EXACT * np.max(np.abs(a))


def test_a_channel_in_newtons_against_an_output_in_metres_is_refused_by_name(angle_model, capsys):
    model, *_, newton = angle_model
    code, _, err = run(["gradient", "sdof", "--data", newton, "--params", "c"], capsys)
    assert code == 2
    assert "channel 'x' is in 'N', the output 'x' of 'sdof' in 'm': incompatible units" in err


def test_an_unknown_unit_in_a_file_is_warned_and_the_run_goes_on(angle_model, tmp_path, capsys):
    _, rad, *_ = angle_model
    odd = tmp_path / "odd.csv"
    odd.write_text(rad.read_text(encoding="utf-8").replace("x [rad]", "x [lsb]"), encoding="utf-8")
    code, _, err = run(["gradient", "sdof", "--data", odd, "--params", "c"], capsys)
    assert code == 0
    assert re.search(r"fmi-adjoint: warning: the unit 'lsb' of channel 'x' of .*odd.csv is not a known unit", err)
