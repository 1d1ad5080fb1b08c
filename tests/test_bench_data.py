"""Test-bench data as it comes (issue 26, parts 1-4): readers, channel mapping, preprocessing.

Every reader reads back what the reading library itself wrote (asammdf, scipy.io.savemat,
h5py, a bench-style CSV), the bundled engine-mount measurement gives the same parameters from
an MDF4 file, a MAT v7.3 file and a semicolon CSV in mm/s^2 as from its CSV, and each bad
input is one error (exit 2) without a traceback.
"""

from __future__ import annotations

import json
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from fmi_adjoint.bench import detect_format, read_data
from fmi_adjoint.bench.preprocess import (
    ANTI_ALIAS_ORDER,
    ANTI_ALIAS_SHARE,
    Preprocessing,
    RemoveOffset,
    TimeShift,
    prepare,
)
from fmi_adjoint.cli.loading import load_problem, problem_spec
from fmi_adjoint.cli.main import main
from fmi_adjoint.data import Measurement, read_csv
from fmi_adjoint.errors import DataError
from fmi_adjoint.examples import example_path

from captured_cli import cli, error_line
from tolerances import EXACT, NOISE_FREE_RECOVERY, SAME_DATA_OTHER_FORMAT

asammdf = pytest.importorskip("asammdf")
h5py = pytest.importorskip("h5py")
scipy_io = pytest.importorskip("scipy.io")

#: The known signals of the round trips: uneven times, two channels with units.
TIMES = np.cumsum(np.r_[0.0, 0.01 + 0.001 * np.sin(np.arange(200))])
SIGNALS = {"acc": (np.sin(7 * TIMES) * 3.25, "mm/s^2"), "angle": (np.cos(3 * TIMES) - 0.5, "deg")}
#: The 128-byte header of a MAT v7.3 file (text, subsystem offset, version 0x0200, endianness),
#: padded to its 512-byte user block.
MAT73_HEADER = (b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Sun Nov 29 07:00:00 2026 HDF5 schema "
                b"1.00 .").ljust(116, b" ") + b"\0" * 8 + b"\x00\x02IM"


# -- writers: each file written by the library that reads it ----------------------------------
def write_mdf(path: Path, times, channels: dict, version: str = "4.10") -> Path:
    mdf = asammdf.MDF(version=version)
    mdf.append([asammdf.Signal(np.asarray(v, float), np.asarray(times, float), name=n, unit=u)
                for n, (v, u) in channels.items()])
    mdf.save(path, overwrite=True)
    mdf.close()
    return path


def write_mat73(path: Path, times, channels: dict, extra=None) -> Path:
    """A MAT v7.3 file as MATLAB lays it out: HDF5 after a 512-byte header, 1 x n doubles,
    char variables as uint16 code units."""
    with h5py.File(path, "w", userblock_size=512) as f:
        for name, values in (("time", times), *((n, v) for n, (v, _) in channels.items())):
            f[name] = np.asarray(values, float)[None, :]
            f[name].attrs["MATLAB_class"] = np.bytes_("double")
        for name, (_, unit) in channels.items():
            f[f"{name}_unit"] = np.array([ord(c) for c in unit], dtype=np.uint16)[:, None]
            f[f"{name}_unit"].attrs["MATLAB_class"] = np.bytes_("char")
        if extra:
            extra(f)
    with open(path, "r+b") as handle:
        handle.write(MAT73_HEADER)
    return path


def write_mat5(path: Path, times, channels: dict, **extra) -> Path:
    content = {"time": np.asarray(times, float)}
    for name, (values, unit) in channels.items():
        content[name] = np.asarray(values, float)
        content[f"{name}_unit"] = unit
    content.update(extra)
    scipy_io.savemat(path, content)
    return path


def write_hdf5(path: Path, times, channels: dict, group: str = "run1") -> Path:
    with h5py.File(path, "w") as f:
        f[f"{group}/time"] = np.asarray(times, float)
        f[f"{group}/time"].attrs["unit"] = "s"
        for name, (values, unit) in channels.items():
            f[f"{group}/{name}"] = np.asarray(values, float)
            f[f"{group}/{name}"].attrs["unit"] = unit
    return path


def write_bench_csv(path: Path, times, channels: dict, *, delimiter: str = ";", unit_row: bool = True) -> Path:
    """A European bench CSV: ``;`` (or tab), decimal commas, units in a row or in brackets."""
    comma = delimiter != ","
    names = ["time", *channels]
    units = ["s", *(u for _, u in channels.values())]
    lines = [delimiter.join(names if unit_row else [f"{n} [{u}]" for n, u in zip(names, units)])]
    if unit_row:
        lines.append(delimiter.join(units))
    columns = [np.asarray(times, float), *(np.asarray(v, float) for v, _ in channels.values())]
    for row in zip(*columns):
        cells = [repr(float(x)) for x in row]
        lines.append(delimiter.join(c.replace(".", ",") if comma else c for c in cells))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


WRITERS = {
    "mdf4": lambda p: write_mdf(p / "run.mf4", TIMES, SIGNALS),
    "mdf3": lambda p: write_mdf(p / "run.mdf", TIMES, SIGNALS, version="3.30"),
    "mat-v5": lambda p: write_mat5(p / "run.mat", TIMES, SIGNALS),
    "mat-v7.3": lambda p: write_mat73(p / "run.mat", TIMES, SIGNALS),
    "hdf5": lambda p: write_hdf5(p / "run.h5", TIMES, SIGNALS, group=""),
    "csv-semicolon-decimal-comma-unit-row": lambda p: write_bench_csv(p / "run.csv", TIMES, SIGNALS),
    "tsv-bracket-units": lambda p: write_bench_csv(p / "run.tsv", TIMES, SIGNALS, delimiter="\t", unit_row=False),
}
FORMAT_OF = {"mdf4": "mdf", "mdf3": "mdf", "mat-v5": "mat-v5", "mat-v7.3": "mat-v7.3", "hdf5": "hdf5",
             "csv-semicolon-decimal-comma-unit-row": "csv", "tsv-bracket-units": "csv"}


def assert_same(a, b) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    assert np.max(np.abs(a - b)) <= EXACT * max(np.max(np.abs(b)), 1.0)


@pytest.mark.parametrize("kind", list(WRITERS))
def test_each_reader_reads_back_what_its_library_wrote(kind, tmp_path):
    path = WRITERS[kind](tmp_path)
    assert detect_format(path).name == FORMAT_OF[kind]
    data = read_data(path, ["acc", "angle"])
    assert data.columns == ("acc", "angle")
    assert data.units == ("mm/s^2", "deg")
    assert_same(data.times, TIMES)
    assert_same(data.values, np.column_stack([SIGNALS["acc"][0], SIGNALS["angle"][0]]))


@pytest.mark.parametrize("kind, renamed", [("mdf4", "run.dat"), ("mat-v7.3", "run.bin"), ("mat-v5", "run.dat"),
                                           ("hdf5", "run.mat")])
def test_the_format_is_told_by_the_file_bytes_not_its_name(kind, renamed, tmp_path):
    path = WRITERS[kind](tmp_path)
    moved = path.rename(tmp_path / renamed)
    assert detect_format(moved).name == FORMAT_OF[kind]
    assert read_data(moved, ["angle"]).columns == ("angle",)


def test_the_mdf_reader_reads_only_the_channels_asked_for(tmp_path):
    path = WRITERS["mdf4"](tmp_path)
    data = read_data(path, ["angle"])
    assert data.columns == ("angle",) and data.values.shape == (TIMES.size, 1)
    assert_same(data.values[:, 0], SIGNALS["angle"][0])


@pytest.mark.slow
def test_a_channel_of_a_large_mdf4_file_is_read_in_bounded_memory(tmp_path):
    # 8 channel groups of 8 channels of 2e6 float64 samples: a 1.15 GB file.  MDF stores a
    # group's samples record by record (all its channels side by side), so reading one channel
    # costs at most its group's records (measured peak 208 MB), never the file.
    samples, groups, per_group = 2_000_000, 8, 8
    times = np.arange(samples) * 1e-4
    path = tmp_path / "large.mf4"
    mdf = asammdf.MDF(version="4.10")
    for g in range(groups):
        mdf.append([asammdf.Signal(np.full(samples, float(g * per_group + k)), times, name=f"ch{g * per_group + k}",
                                   unit="m") for k in range(per_group)])
    mdf.save(path, overwrite=True)
    mdf.close()
    del mdf
    size = path.stat().st_size
    group_records = (per_group + 1) * samples * 8  # the channels and the time stamps
    tracemalloc.start()
    try:
        data = read_data(path, ["ch37"])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert data.columns == ("ch37",) and np.all(data.values == 37.0) and data.times.size == samples
    assert size >= groups * group_records
    assert peak < 2 * group_records < size / 3


# -- the engine-mount measurement from three bench formats -----------------------------------
ENGINE_PARAMS = "c_E1,c_E2,d_E,d_H2"


def _identify(tmp_path, name: str, *data_args) -> dict:
    out = tmp_path / f"{name}.json"
    code = main(["identify", "engine_mount", *map(str, data_args), "--params", ENGINE_PARAMS, "-o", str(out)])
    assert code == 0
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_engine_mount_identified_from_mdf4_mat73_and_a_semicolon_csv_in_mm(tmp_path, capsys):
    source = example_path("engine_mount").with_name("engine_mount_measured.csv")
    measured = read_csv(source)
    t, a1 = measured.times, measured.column("a1")
    mm = {"AccZ_mount": (a1 * 1000.0, "mm/s^2")}
    reference = _identify(tmp_path, "csv", "--data", source)
    runs = {
        "mdf4": _identify(tmp_path, "mdf4", "--data", write_mdf(tmp_path / "bench.mf4", t, mm), "--map",
                          "a1=AccZ_mount"),
        "mat73": _identify(tmp_path, "mat73", "--data", write_mat73(tmp_path / "bench.mat", t,
                                                                    {"a1": (a1, "m/s^2")})),
        "csv_mm": _identify(tmp_path, "csv_mm", "--data",
                            write_bench_csv(tmp_path / "bench.csv", t, {"a1": (a1 * 1000.0, "mm/s^2")})),
    }
    capsys.readouterr()
    for name, payload in runs.items():
        for p, value in reference["parameters"].items():
            assert abs(payload["parameters"][p] - value) <= SAME_DATA_OTHER_FORMAT * abs(value), (name, p)
        assert payload["success"] == reference["success"]
    assert runs["mdf4"]["data_preprocessing"][0]["format"] == "mdf"
    assert runs["mdf4"]["data_preprocessing"][0]["mapping"] == {"a1": "AccZ_mount"}
    assert runs["mdf4"]["data_preprocessing"][0]["units"]["a1"]["factor"] == 1e-3
    assert runs["csv_mm"]["data_preprocessing"][0]["units"]["a1"]["status"] == "converted"
    assert "data_preprocessing" not in reference


# -- mapping, windows, bench clock, end time --------------------------------------------------
@pytest.fixture(scope="module")
def sdof_measured(tmp_path_factory):
    """sdof at c = 2, d = 0.3 over its 6 pi s, the 'measurement' of the CLI tests."""
    work = tmp_path_factory.mktemp("bench")
    assert main(["simulate", "sdof", "--set", "c=2", "--set", "d=0.3", "-o", str(work / "sim.csv")]) == 0
    return read_csv(work / "sim.csv")


def test_two_windows_of_one_file_are_two_experiments_from_t0(sdof_measured, tmp_path):
    path = write_hdf5(tmp_path / "long.h5", sdof_measured.times, {"pos": (sdof_measured.column("x"), "m")})
    specs = [f"{path}@window=2:8", f"{path}@window=10:16,c=2"]
    spec = problem_spec("sdof", specs, {}, ["d"], t_end=None, step=None,
                        preprocessing=Preprocessing(mapping=(("x", "run1/pos"),)))
    _, problem = load_problem(spec)
    assert len(problem.experiments) == 2
    for experiment, (t0, t1) in zip(problem.experiments, [(2.0, 8.0), (10.0, 16.0)]):
        inside = (sdof_measured.times >= t0) & (sdof_measured.times <= t1)
        assert experiment.cost.sample_times[0] == 0.0
        assert_same(experiment.cost.sample_times, sdof_measured.times[inside] - t0)
        assert_same(experiment.cost.data[:, 0], sdof_measured.column("x")[inside])
    assert dict(problem.experiments[1].values) == {"c": 2.0}


def test_data_on_the_bench_clock_are_refused_and_shifted_on_request(sdof_measured, tmp_path):
    path = write_mdf(tmp_path / "clock.mf4", sdof_measured.times + 1234.5, {"x": (sdof_measured.column("x"), "m")})
    code, _, err = cli(["identify", "sdof", "--data", path, "--params", "c,d"])
    assert code == 2 and "far from the start" in error_line(err) and "1234.5" in error_line(err)
    for shift in ("start", "1234.5"):
        out = tmp_path / f"shift_{shift}.json"
        code, _, err = cli(["identify", "sdof", "--data", path, "--params", "c,d", "--time-shift", shift, "-o", out])
        payload = json.loads(out.read_text(encoding="utf-8"))
        assert code == 0 and payload["success"] is True
        assert payload["data_preprocessing"][0]["time_shift"] == 1234.5
        assert abs(payload["parameters"]["c"] - 2.0) <= NOISE_FREE_RECOVERY * 2.0


def test_data_beyond_an_explicit_t_end_are_refused(sdof_measured, tmp_path):
    path = write_mat5(tmp_path / "long.mat", sdof_measured.times, {"x": (sdof_measured.column("x"), "m")})
    code, _, err = cli(["gradient", "sdof", "--data", path, "--params", "c", "--t-end", "5"])
    assert code == 2 and "ends before the last sample" in error_line(err) and "--t-end" in error_line(err)


def test_gaps_are_masked_not_refused(sdof_measured, tmp_path):
    x = sdof_measured.column("x").copy()
    x[100:140] = np.nan
    path = write_hdf5(tmp_path / "gaps.h5", sdof_measured.times, {"x": (x, "m")}, group="")
    spec = problem_spec("sdof", [str(path)], {}, ["c"], t_end=None, step=None)
    _, problem = load_problem(spec)
    cost = problem.experiments[0].cost
    assert cost.sample_times.size == sdof_measured.times.size - 40
    assert not np.any((cost.sample_times >= sdof_measured.times[100]) & (cost.sample_times <= sdof_measured.times[139]))


#: The amplitude of the component above the grid's Nyquist frequency in the resampling test.
FAST_AMPLITUDE = 0.5


def test_offset_removal_and_anti_aliased_resampling_are_recorded():
    # 1 kHz samples of a 2 Hz and a 40 Hz sine onto a 0.02 s grid (Nyquist 25 Hz, cut-off
    # 20 Hz): the 40 Hz component is filtered out before the decimation, the 2 Hz one kept.
    times = np.arange(0, 4.0 + 1e-9, 1e-3)
    slow, fast = np.sin(2 * np.pi * 2 * times), FAST_AMPLITUDE * np.sin(2 * np.pi * 40 * times)
    measured = Measurement(times, ("x",), (1.0 + slow + fast)[:, None], "synthetic", ("m",))
    prepared = prepare(measured, Preprocessing(detrend=RemoveOffset(), resample=True), output_names=("x",),
                       output_units=("m",), model="'m'", step=0.02)
    grid = prepared.measurement.times
    assert_same(np.diff(grid), np.full(grid.size - 1, 0.02))
    record = prepared.record
    assert record["detrend"] == "offset" and record["resampled"]["step"] == 0.02
    assert record["resampled"]["anti_alias"]["cutoff_hz"] == ANTI_ALIAS_SHARE * 25.0
    # Away from the ends, what is left of the 40 Hz sine is its amplitude times the filter's
    # gain there (forward-backward Butterworth: |H|^2 = 1 / (1 + (f/fc)^(2 order)), 0.0039),
    # twice that as the bound; without the filter it would alias at full amplitude.
    inner = (grid > 1.0) & (grid < 3.0)
    expected = np.sin(2 * np.pi * 2 * grid[inner]) - (1.0 + slow + fast).mean() + 1.0
    residual = prepared.measurement.values[inner, 0] - expected
    gain = 1 / (1 + (40.0 / (ANTI_ALIAS_SHARE * 25.0)) ** (2 * ANTI_ALIAS_ORDER))
    assert np.max(np.abs(residual)) < 2 * gain * FAST_AMPLITUDE


def test_time_shift_start_subtracts_the_first_sample():
    measured = Measurement(np.array([5.0, 5.5, 6.0]), ("x",), np.zeros((3, 1)), "m")
    prepared = prepare(measured, Preprocessing(time_shift=TimeShift()), output_names=("x",), output_units=("",),
                       model="'m'", step=0.1)
    assert prepared.measurement.times.tolist() == [0.0, 0.5, 1.0] and prepared.record["time_shift"] == 5.0


# -- bad input: one error each, exit 2, no traceback -------------------------------------------
def _struct_mat(tmp_path):
    return write_mat5(tmp_path / "struct.mat", TIMES, {}, x={"values": np.ones(3), "unit": "m"})


def _string_hdf5(tmp_path):
    path = tmp_path / "strings.h5"
    with h5py.File(path, "w") as f:
        f["time"] = TIMES
        f.create_dataset("x", data=np.array([b"1.0"] * TIMES.size))
    return path


def _unsorted_hdf5(tmp_path):
    times = TIMES.copy()
    times[50], times[51] = times[51], times[50]
    return write_hdf5(tmp_path / "unsorted.h5", times, {"x": (np.zeros(times.size), "m")}, group="")


def _not_a_unit_csv(tmp_path):
    return write_bench_csv(tmp_path / "unit.csv", TIMES, {"x": (np.zeros(TIMES.size), "m/s^^2")})


BAD_INPUT = {
    "mdf4 missing channel": (lambda p: write_mdf(p / "run.mf4", TIMES, SIGNALS), ["--map", "x=wheel_speed"],
                             ["no channel 'wheel_speed'", "acc", "--map"]),
    "mat struct": (_struct_mat, [], ["'x'", "struct", "numeric vector"]),
    "hdf5 strings": (_string_hdf5, [], ["'x'", "strings", "numeric"]),
    "non-monotonic time": (_unsorted_hdf5, [], ["does not increase", "sort"]),
    "not a unit": (_not_a_unit_csv, [], ["'m/s^^2'", "not a unit"]),
}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_bench_input_is_one_clear_error(case, tmp_path):
    write, extra, phrases = BAD_INPUT[case]
    path = write(tmp_path)
    code, _, err = cli(["gradient", "sdof", "--data", path, "--params", "c", *extra])
    line = error_line(err)
    assert code == 2 and str(path) in line
    for phrase in phrases:
        assert phrase in line, (phrase, line)


def test_a_missing_optional_library_is_one_error_naming_the_extra(tmp_path, monkeypatch):
    path = WRITERS["mdf4"](tmp_path)
    monkeypatch.setitem(sys.modules, "asammdf", None)  # import asammdf raises ImportError
    code, _, err = cli(["gradient", "sdof", "--data", path, "--params", "c", "--map", "x=acc"])
    assert code == 2 and "pip install fmi-adjoint[bench]" in error_line(err) and "asammdf" in error_line(err)


def test_a_mapping_to_no_output_is_refused(tmp_path):
    measured = read_data(WRITERS["hdf5"](tmp_path))
    with pytest.raises(DataError, match="'speed' is not an output"):
        prepare(measured, Preprocessing(mapping=(("speed", "acc"),)), output_names=("x",), output_units=("m",),
                model="'sdof'", step=0.01)


@pytest.mark.parametrize("kind", ["mdf4", "hdf5", "mat-v7.3"])
def test_a_channel_beyond_the_sample_limit_is_refused_before_it_is_read(kind, tmp_path, monkeypatch):
    from fmi_adjoint.bench import contract

    path = WRITERS[kind](tmp_path)
    monkeypatch.setattr(contract, "MAX_SAMPLES", TIMES.size - 1)
    with pytest.raises(DataError, match=f"has {TIMES.size} samples, more than the limit"):
        read_data(path, ["acc"])


@pytest.mark.parametrize("argv, phrases", [
    (["--data", "{mdf}", "--params", "c"], ["no channel is named like an output (x)", "AccZ", "--map OUTPUT=CHANNEL"]),
    (["--data", "{mdf}@window=3:1", "--params", "c"], ["window=T0:T1 with finite T0 < T1"]),
    (["--data", "{mdf}", "--params", "c", "--map", "x=AccZ", "--time-shift", "soon"], ["'soon'", "'start'"]),
    (["--data", "{mdf}", "--params", "c", "--map", "x"], ["expected OUTPUT=CHANNEL"]),
    (["--fmu", "none.fmu", "--data", "{mdf}", "--params", "c", "--map", "x=AccZ"], ["apply to model files"]),
])
def test_bench_options_are_checked_at_the_front_door(argv, phrases, tmp_path):
    mdf = write_mdf(tmp_path / "run.mf4", TIMES, {"AccZ": (np.zeros(TIMES.size), "m")})
    args = [a.replace("{mdf}", str(mdf)) for a in argv]
    code, _, err = cli(["gradient", *([] if "--fmu" in args else ["sdof"]), *args])
    assert code == 2
    for phrase in phrases:
        assert phrase in error_line(err), (phrase, err)


def test_a_window_is_taken_on_the_clock_after_the_time_shift():
    measured = Measurement(1000.0 + np.arange(0.0, 10.0, 0.5), ("x",), np.arange(20.0)[:, None], "m")
    prepared = prepare(measured, Preprocessing(window=(2.0, 4.0), time_shift=TimeShift()), output_names=("x",),
                       output_units=("",), model="'m'", step=0.1)
    assert prepared.measurement.times.tolist() == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert prepared.measurement.values[:, 0].tolist() == [4.0, 5.0, 6.0, 7.0, 8.0]
    assert prepared.record["time_shift"] == 1002.0 and prepared.record["window"] == [2.0, 4.0]
