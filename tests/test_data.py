"""Measurement CSV files (fmi_adjoint.data) and atomic output files (fmi_adjoint.files)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from fmi_adjoint.data import read_csv, write_csv
from fmi_adjoint.errors import DataError, FmiAdjointError
from fmi_adjoint.files import OutputFileError, atomic_output


def _write(path, text: str, encoding: str = "utf-8") -> None:
    path.write_bytes(text.encode(encoding))


def _part_files(folder) -> list:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".part"))


# -- round trip ---------------------------------------------------------------------------


def test_write_read_round_trip_is_bit_exact(tmp_path):
    rng = np.random.default_rng(7)
    n = 257
    times = np.cumsum(rng.uniform(1e-6, 1e-2, n)) + 0.1  # uneven, not representable as short decimals
    columns = {
        "a1": rng.normal(0.0, 1e3, n),
        "tiny": rng.normal(0.0, 1e-300, n),  # near the subnormal range
        "huge": rng.normal(0.0, 1e300, n),
        "third": np.full(n, 1.0 / 3.0),
    }
    columns["a1"][5] = -0.0
    columns["a1"][6] = 5e-324  # smallest subnormal
    path = tmp_path / "round.csv"
    write_csv(path, times, columns)

    measured = read_csv(path)
    assert measured.columns == tuple(columns)
    assert measured.times.dtype == np.float64
    assert np.array_equal(measured.times, times)
    for k, name in enumerate(columns):
        assert np.array_equal(measured.values[:, k], columns[name]), name
        assert np.array_equal(measured.column(name), columns[name]), name
    # Every cell is written as repr(float), i.e. the shortest string that round-trips.
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "time,a1,tiny,huge,third"
    assert lines[1].split(",") == [repr(float(times[0]))] + [repr(float(v[0])) for v in columns.values()]
    assert len(lines) == n + 1
    assert _part_files(tmp_path) == []


def test_read_csv_handles_utf8_bom(tmp_path):
    path = tmp_path / "bom.csv"
    _write(path, "\ufefftime,x\n0.0,1.5\n0.5,2.5\n1.0,-3.25\n")
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    measured = read_csv(path)
    assert measured.columns == ("x",)
    assert np.array_equal(measured.times, [0.0, 0.5, 1.0])
    assert np.array_equal(measured.column("x"), [1.5, 2.5, -3.25])


def test_read_csv_ignores_blank_lines_and_whitespace(tmp_path):
    path = tmp_path / "blank.csv"
    _write(path, "\n time , x \n\n0.0,1.0\n   \n0.5, 2.0\n,\n\n1.0,3.0\n\n")
    measured = read_csv(path)
    assert measured.columns == ("x",)
    assert np.array_equal(measured.times, [0.0, 0.5, 1.0])
    assert np.array_equal(measured.values[:, 0], [1.0, 2.0, 3.0])


def test_read_csv_time_column_need_not_be_first(tmp_path):
    path = tmp_path / "order.csv"
    _write(path, "y,time,x\n10,0.0,1\n20,0.1,2\n30,0.2,3\n")
    measured = read_csv(path)
    assert measured.columns == ("y", "x")
    assert np.array_equal(measured.times, [0.0, 0.1, 0.2])
    assert np.array_equal(measured.values, [[10, 1], [20, 2], [30, 3]])


# -- errors --------------------------------------------------------------------------------

# (label, file text, line number that must be named, further words the message must contain)
ROW_ERRORS = [
    ("nan", "time,x\n0,1\n1,2\n2,nan\n3,4\n", 4, ["'x'", "not finite"]),
    ("inf", "time,x\n0,1\n1,inf\n2,3\n", 3, ["'x'", "not finite"]),
    ("nan_time", "time,x\n0,1\nNaN,2\n2,3\n", 3, ["'time'", "not finite"]),
    ("non_numeric", "time,x\n0,1\n1,2\n2,3\n3,abc\n", 5, ["'abc'", "not a number"]),
    ("empty_cell", "time,x\n0,1\n1,\n2,3\n", 3, ["'x'", "not a number"]),
    ("short_row", "time,x,y\n0,1,2\n1,2\n2,3,4\n", 3, ["2 cells", "3"]),
    ("long_row", "time,x\n0,1\n1,2\n2,3,4\n", 4, ["3 cells"]),
    ("unsorted", "time,x\n0,1\n2,2\n1,3\n3,4\n", 4, ["does not increase", "sort"]),
    ("duplicate", "time,x\n0,1\n1,2\n1,3\n2,4\n", 4, ["does not increase", "duplicate"]),
]


@pytest.mark.parametrize("label,text,line,words", ROW_ERRORS, ids=[c[0] for c in ROW_ERRORS])
def test_row_errors_name_file_and_line(tmp_path, label, text, line, words):
    path = tmp_path / f"{label}.csv"
    _write(path, text)
    with pytest.raises(DataError) as info:
        read_csv(path)
    message = str(info.value)
    assert f"{label}.csv" in message
    assert re.search(rf"\bline {line}\b", message), message
    for word in words:
        assert word in message, (word, message)
    assert isinstance(info.value, FmiAdjointError) and isinstance(info.value, ValueError)


# (label, file text, words) for errors of the file as a whole or of its header.
FILE_ERRORS = [
    ("no_time", "t,x\n0,1\n1,2\n", ["'time'", "add one"]),
    ("empty", "", ["empty"]),
    ("only_blank", "\n\n  \n", ["empty"]),
    ("header_only", "time,x\n", ["at least two data rows", "found 0"]),
    ("one_row", "time,x\n0,1\n", ["at least two data rows", "found 1"]),
    ("dup_header", "time,x,x\n0,1,2\n1,2,3\n", ["unique", "'x'"]),
    ("empty_header", "time,,x\n0,1,2\n1,2,3\n", ["non-empty"]),
]


@pytest.mark.parametrize("label,text,words", FILE_ERRORS, ids=[c[0] for c in FILE_ERRORS])
def test_file_errors_name_file_and_problem(tmp_path, label, text, words):
    path = tmp_path / f"{label}.csv"
    _write(path, text)
    with pytest.raises(DataError) as info:
        read_csv(path)
    message = str(info.value)
    assert f"{label}.csv" in message
    for word in words:
        assert word in message, (word, message)


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match=r"nothere\.csv: file not found"):
        read_csv(tmp_path / "nothere.csv")


def test_directory_is_not_a_file(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        read_csv(tmp_path)


def test_not_utf8(tmp_path):
    path = tmp_path / "latin.csv"
    path.write_bytes("time,x\n0,1\n1,\xe9\n".encode("latin-1"))
    with pytest.raises(DataError, match="UTF-8"):
        read_csv(path)


def test_unknown_column_lookup(tmp_path):
    path = tmp_path / "ok.csv"
    _write(path, "time,x\n0,1\n1,2\n")
    with pytest.raises(DataError, match=r"no column 'y'.*Columns: x"):
        read_csv(path).column("y")


def test_line_numbers_count_the_blank_lines_before_the_bad_row(tmp_path):
    """BUG: read_csv drops blank rows *before* numbering, so the reported line is wrong.

    The file below has the bad cell on physical line 6 (blank lines 2 and 4 are
    skipped); read_csv reports "line 4".
    """
    path = tmp_path / "gaps.csv"
    _write(path, "time,x\n\n0,1\n\n1,2\n2,abc\n")
    assert path.read_text().splitlines()[5] == "2,abc"
    with pytest.raises(DataError) as info:
        read_csv(path)
    message = str(info.value)
    assert "'abc'" in message
    assert re.search(r"\bline 6\b", message), message


def test_time_order_message_shows_plain_numbers(tmp_path):
    """BUG: the message shows numpy reprs ("time np.float64(0.03)") under numpy 2."""
    path = tmp_path / "order.csv"
    _write(path, "time,x\n0.0,1\n0.04,2\n0.03,3\n")
    with pytest.raises(DataError) as info:
        read_csv(path)
    message = str(info.value)
    assert "line 4" in message
    assert "np.float64" not in message, message
    assert "time 0.03 does not increase (previous 0.04)" in message, message


# -- atomic output -------------------------------------------------------------------------


def test_event_data_may_repeat_a_time_once(tmp_path):
    """FMU data (``events=True``): a time twice is an event's left and right limit; three times,
    or twice without ``events``, is refused naming the line."""
    path = tmp_path / "ball.csv"
    path.write_text("time,h\n0,1\n0.5,0\n0.5,0\n1,0.5\n", encoding="utf-8")
    data = read_csv(path, events=True)
    np.testing.assert_array_equal(data.times, [0.0, 0.5, 0.5, 1.0])
    with pytest.raises(DataError, match="line 4: time 0.5 does not increase"):
        read_csv(path)
    path.write_text("time,h\n0,1\n0.5,0\n0.5,0\n0.5,0\n1,0.5\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"line 5: time 0.5 appears a third time; a time may repeat once"):
        read_csv(path, events=True)


def test_atomic_output_writes_on_success(tmp_path):
    target = tmp_path / "out.txt"
    with atomic_output(target) as handle:
        handle.write("hello\n")
        assert not target.exists()  # only renamed into place at the end
        assert len(_part_files(tmp_path)) == 1
    assert target.read_text() == "hello\n"
    assert _part_files(tmp_path) == []


def test_atomic_output_binary_mode(tmp_path):
    target = tmp_path / "out.bin"
    with atomic_output(target, "wb") as handle:
        handle.write(b"\x89PNG\x00\xff")
    assert target.read_bytes() == b"\x89PNG\x00\xff"


class _Boom(Exception):
    pass


def test_atomic_output_leaves_no_file_when_the_block_raises(tmp_path):
    target = tmp_path / "out.csv"
    with pytest.raises(_Boom):
        with atomic_output(target) as handle:
            handle.write("partial content\n" * 1000)
            raise _Boom()
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_atomic_output_keeps_the_old_file_when_the_block_raises(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("old\n")
    with pytest.raises(KeyboardInterrupt):
        with atomic_output(target) as handle:
            handle.write("new, half written")
            raise KeyboardInterrupt
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


def test_atomic_output_replaces_an_existing_file(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("old\n")
    with atomic_output(target) as handle:
        handle.write("new\n")
    assert target.read_text() == "new\n"
    assert _part_files(tmp_path) == []


def test_atomic_output_missing_folder(tmp_path):
    target = tmp_path / "no" / "such" / "out.csv"
    with pytest.raises(OutputFileError) as info:
        with atomic_output(target) as handle:
            handle.write("x")
    message = str(info.value)
    assert "does not exist" in message and "create it" in message
    assert str(tmp_path / "no" / "such") in message
    assert not (tmp_path / "no").exists()
    assert isinstance(info.value, FmiAdjointError) and isinstance(info.value, OSError)


def test_write_csv_failure_leaves_no_file(tmp_path):
    target = tmp_path / "bad.csv"
    with pytest.raises(ValueError):
        write_csv(target, np.arange(5.0), {"x": np.arange(4.0)})  # inconsistent lengths
    assert list(tmp_path.iterdir()) == []
