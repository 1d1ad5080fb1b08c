"""FMU archive checks that cannot be bypassed (issue 10, findings 2, 4 and the zip-bomb part
of finding 8).

* Finding 2: a second entry that extracts over the checked ``modelDescription.xml`` (or
  over any other entry) is refused before anything is extracted, in every spelling: ``./``,
  backslashes, exact duplicates, case and Unicode variants, control characters, NUL, empty
  names, and files that other entries use as folders.  fmpy never reads an unchecked XML.
* Finding 8 (zip bomb): entries are streamed out with a per-entry, a total and a
  compression-ratio limit, and ``apply`` copies the checked extraction instead of reading
  whole entries into memory: a 1 GB bomb packed into 1 MB is refused with bounded memory.
* Finding 4: the embedded model of an exported FMU replaces its binary only if the binary
  is the one the embedded model builds to.  A replaced binary, even with a forged
  ``binary_sha256`` in ``export.json``, sends the identification through the binary with a
  note; ``--gradient adjoint`` on it is one error.

One small FMU (sdof, FMI 2) is exported per module; every hostile archive is derived from it.
"""

from __future__ import annotations

import hashlib
import json
import re
import os
import struct
import subprocess
import sys
import warnings
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

import fmi_adjoint.fmu.archive as archive_module
from fmi_adjoint import compile_model, load_model, simulate, write_csv
from fmi_adjoint.examples import example_path
from fmi_adjoint.fmu.archive import FmuError, open_fmu
from fmi_adjoint.export import export_fmu
from fmi_adjoint.toolchain import c_compiler
from test_cli import gradient_json, run
from tolerances import CROSS_IMPLEMENTATION, EXACT

if c_compiler() is None:  # pragma: no cover - depends on the machine
    pytest.skip("no C compiler: the FMUs cannot be built", allow_module_level=True)

BINARY = "binaries/linux64/sdof.so"
T_END = 2.0
#: Peak-RSS growth allowed for ``apply`` on the zip bomb (the old code took 2.2 GB).
BOMB_RSS_LIMIT_KIB = 400 * 1024


# ------------------------------------------------------------------------------ helpers --


def _rezip(source: Path, target: Path, *, replace=None, extra=(), drop=()) -> Path:
    """A copy of ``source`` with entries replaced, dropped, and ``extra`` (name, bytes) added
    after the originals (duplicate names are written on purpose)."""
    replace = replace or {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate names we want
        with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
            for info in src.infolist():
                if info.filename in drop:
                    continue
                dst.writestr(info.filename, replace.get(info.filename, src.read(info)))
            for name, data in extra:
                dst.writestr(zipfile.ZipInfo(name), data, compress_type=zipfile.ZIP_DEFLATED)
    return target


def _patch_name(path: Path, placeholder: bytes, name: bytes) -> None:
    """Replace an entry name in the local and central headers (same length): how a NUL
    byte gets into a name, which zipfile cannot write."""
    assert len(placeholder) == len(name)
    data = path.read_bytes()
    assert data.count(placeholder) == 2
    path.write_bytes(data.replace(placeholder, name))


def _patch_header(path: Path, name: str, *, method: int, crc: int, size: int) -> None:
    """Set compression method, CRC-32 and uncompressed size of entry ``name`` in its local
    and central headers (the entry was written STORED with the packed bytes as content)."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(name)
        local, central = info.header_offset, archive.start_dir
    while bytes(data[central + 46: central + 46 + len(name)]) != name.encode():
        central = data.index(b"PK\x01\x02", central + 4)
    struct.pack_into("<H", data, local + 8, method)
    struct.pack_into("<II", data, local + 14, crc, info.compress_size)
    struct.pack_into("<I", data, local + 22, size)
    struct.pack_into("<H", data, central + 10, method)
    struct.pack_into("<II", data, central + 16, crc, info.compress_size)
    struct.pack_into("<I", data, central + 24, size)
    path.write_bytes(bytes(data))


def _zip_bomb(source: Path, target: Path, megabytes: int, *, claimed: int | None = None) -> Path:
    """``source`` plus ``resources/zeros.bin``: ``megabytes`` MiB of zeros deflated to ~1 KB
    per MiB.  Built without deflating the gigabyte: after a full flush deflate restarts from
    scratch, so one compressed MiB repeated is a valid stream.  ``claimed`` makes the
    headers lie about the unpacked size."""
    chunk = bytes(1024**2)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)
    packed = block * megabytes + compressor.flush(zlib.Z_FINISH)
    crc = 0
    for _ in range(megabytes):
        crc = zlib.crc32(chunk, crc)
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
        dst.writestr(zipfile.ZipInfo("resources/zeros.bin"), packed, compress_type=zipfile.ZIP_STORED)
    _patch_header(target, "resources/zeros.bin", method=zipfile.ZIP_DEFLATED, crc=crc,
                  size=megabytes * 1024**2 if claimed is None else claimed)
    return target


def _one_error(code: int, out: str, err: str, *words: str) -> str:
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1, (code, out, err)
    assert lines[0].startswith("fmi-adjoint: error:"), err
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------------------------ fixtures --


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fmu_archive_security")


@pytest.fixture(scope="module")
def exported(work) -> Path:
    return export_fmu(example_path("sdof"), work / "sdof.fmu", fmi_version=2)


@pytest.fixture(scope="module")
def data(work) -> Path:
    """sdof at c = 1.3, x every 0.01 s on [0, 2] s (a whole number of FMU steps)."""
    model = compile_model(load_model(example_path("sdof")).with_values({"c": 1.3}))
    traj = simulate(model, t_end=T_END)
    path = work / "sdof.csv"
    write_csv(path, traj.t[::10], {"x": traj.outputs()[::10, model.output_index("x")]})
    return path


@pytest.fixture(scope="module")
def description(exported) -> str:
    with zipfile.ZipFile(exported) as archive:
        return archive.read("modelDescription.xml").decode("utf-8")


@pytest.fixture(scope="module")
def variant(work) -> Path:
    """sdof with the excitation doubled: same name, parameters and outputs, other dynamics."""
    text = Path(example_path("sdof")).read_text(encoding="utf-8")
    assert text.count('expression = "sin(t)"') == 1
    path = work / "sdof_variant" / "sdof.toml"
    path.parent.mkdir()
    path.write_text(text.replace('expression = "sin(t)"', 'expression = "2*sin(t)"'), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tampered(work, exported, variant) -> dict:
    """The exported FMU with its binary replaced by one built from ``variant`` with the
    original instantiation token (so fmpy instantiates it): ``resources/`` untouched."""
    from fmi_adjoint.export import build_fmu_binary, export_scheme

    with open_fmu(exported) as archive:
        token = archive.description.guid
        settings = archive.native
    assert settings is not None
    binary, _ = build_fmu_binary(load_model(variant), work / "variant_build", fmi_version=2, token=token,
                                 step=settings["step"], solver=export_scheme(settings))
    replaced = binary.read_bytes()
    assert _sha256(binary) != settings["binary_sha256"]
    fmu = _rezip(exported, work / "tampered.fmu", replace={BINARY: replaced})
    forged_settings = {**settings, "binary_sha256": hashlib.sha256(replaced).hexdigest()}
    forged = _rezip(exported, work / "forged.fmu", replace={
        BINARY: replaced, "resources/export.json": json.dumps(forged_settings, indent=2).encode()})
    zeros = _rezip(exported, work / "zeros.fmu", replace={BINARY: bytes(len(replaced))})
    return {"binary": fmu, "forged": forged, "zeros": zeros}


@pytest.fixture
def fmpy_reads(monkeypatch) -> list:
    """fmpy's read_model_description, recording the arguments of every call."""
    import fmpy

    calls = []
    original = fmpy.read_model_description

    def recorder(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(fmpy, "read_model_description", recorder)
    return calls


# ----------------------------------------------- finding 2: colliding or unsafe entry names --


def _second_description(description: str, kind: str) -> bytes:
    """A modelDescription.xml that was never checked: other start values, a DOCTYPE, FMI 1.0."""
    if kind == "start values":
        assert 'start="1.0"' in description
        return description.replace('start="1.0"', 'start="7.0"').encode()
    if kind == "doctype":
        head, _, rest = description.partition("?>")
        return f'{head}?>\n<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>{rest}'.encode()
    if kind == "fmi 1.0":
        return description.replace('fmiVersion="2.0"', 'fmiVersion="1.0"').encode()
    raise AssertionError(kind)


#: A second entry (name) that lands on modelDescription.xml, or on another file, somewhere.
COLLIDING = {
    "dot slash": "./modelDescription.xml",
    "dot slash, backslash": ".\\modelDescription.xml",
    "double slash": ".//modelDescription.xml",
    "exact duplicate": "modelDescription.xml",
    "case variant": "ModelDescription.XML",
    "case fold (long s)": "modelDe\u017fcription.xml",
    "trailing dot (Windows)": "modelDescription.xml.",
}


@pytest.mark.parametrize("label", list(COLLIDING))
def test_second_model_description_is_refused_before_fmpy_reads_it(label, exported, description, data, work,
                                                                    fmpy_reads, capsys):
    """Finding 2: each spelling of a second modelDescription.xml (with other start values,
    so that it changed the cost before) is refused, by open_fmu and by the CLI (one line,
    exit 2), and fmpy never reads an XML."""
    bad = _rezip(exported, work / f"second_{list(COLLIDING).index(label)}.fmu",
                 extra=[(COLLIDING[label], _second_description(description, "start values"))])
    with pytest.raises(FmuError, match="extract to the same file"):
        open_fmu(bad)
    code, out, err = run(["gradient", "--fmu", bad, "--data", data, "--params", "c"], capsys)
    _one_error(code, out, err, "same file", repr(COLLIDING[label]))
    assert fmpy_reads == []


@pytest.mark.parametrize("kind", ["doctype", "fmi 1.0", "start values"])
def test_unchecked_description_never_reaches_fmpy(kind, exported, description, work, fmpy_reads):
    """Finding 2: the bypass of the report (``./modelDescription.xml`` after the real one)
    with a DOCTYPE, an FMI 1.0 description or other start values: refused, fmpy not called."""
    bad = _rezip(exported, work / f"unchecked_{kind.replace(' ', '_')}.fmu",
                 extra=[("./modelDescription.xml", _second_description(description, kind))])
    with pytest.raises(FmuError, match="extract to the same file"):
        open_fmu(bad)
    assert fmpy_reads == []


UNSAFE = {
    # label: (extra entries, words of the error)
    "unicode normalization (NFC vs NFD)": ([("resources/caf\u00e9.txt", b"1"), ("resources/cafe\u0301.txt", b"2")],
                                           ("same file",)),
    "case variant of a folder": ([("Resources/model.toml", b"[model]\n")], ("same file", "Resources/model.toml")),
    "file used as a folder": ([("sources", b"not a folder")], ("use it as a folder", "'sources'")),
    "folder entry over a file": ([("resources/model.toml/", b"")], ("same file",)),
    "control character": ([("resources/\x1b[31mred.txt", b"1")], ("control or invisible",)),
    "bidi override": ([("resources/gpj.\u202eexe", b"1")], ("control or invisible",)),
    "empty name": ([("", b"1")], ("empty name",)),
}


@pytest.mark.parametrize("label", list(UNSAFE))
def test_unsafe_entry_names_are_refused(label, exported, data, work, capsys, tmp_path, monkeypatch):
    """Finding 2: names that collide on case-insensitive or normalizing file systems, files
    that are also folders, control characters and empty names: one error naming the entry,
    nothing left in the temporary folder."""
    extra, words = UNSAFE[label]
    bad = _rezip(exported, work / f"unsafe_{list(UNSAFE).index(label)}.fmu", extra=extra)
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(private))
    code, out, err = run(["gradient", "--fmu", bad, "--data", data, "--params", "c"], capsys)
    _one_error(code, out, err, *words)
    assert list(private.iterdir()) == []


def test_nul_in_an_entry_name_is_refused(exported, work):
    """Finding 2: a NUL byte hides the rest of a name (zipfile truncates it there):
    ``modelDescription.xml<NUL>evil`` would be read as a second modelDescription.xml."""
    bad = _rezip(exported, work / "nul.fmu", extra=[("modelDescription.xml#evil", b"<x/>")])
    _patch_name(bad, b"modelDescription.xml#evil", b"modelDescription.xml\x00evil")
    with pytest.raises(FmuError, match="NUL character") as caught:
        open_fmu(bad)
    assert "evil" not in str(caught.value)


def test_model_identifier_must_not_leave_the_binaries_folder(exported, description, work):
    """Finding 2: ``modelIdentifier`` names the library fmpy loads; ``../linux64/sdof`` (which
    the old checks let through, since the file exists) could as well point outside the FMU."""
    assert description.count('modelIdentifier="sdof"') == 2  # Co-Simulation and Model Exchange (the default)
    bad = _rezip(exported, work / "identifier.fmu", replace={
        "modelDescription.xml": description.replace('modelIdentifier="sdof"',
                                                    'modelIdentifier="../linux64/sdof"').encode()})
    with pytest.raises(FmuError, match="not a C identifier") as caught:
        open_fmu(bad)
    assert "'../linux64/sdof'" in str(caught.value)


def test_checked_description_is_the_one_fmpy_reads(exported, description, fmpy_reads):
    """Finding 2: the model description is checked from the extracted file, and fmpy reads
    exactly that file (not whatever a folder or the archive holds under the name)."""
    with open_fmu(exported) as archive:
        checked = archive.directory / "modelDescription.xml"
        assert checked.read_bytes() == description.encode()
        assert [args[0] for args in fmpy_reads] == [str(checked)]
        assert archive.variables["c"].start == 1.0


# -------------------------------------------------------------- finding 8: the zip bomb --


def test_zip_bomb_is_refused_by_open_fmu(exported, work):
    """Finding 8: 1000 MiB of zeros packed into 1 MB is refused, from its header, before
    any byte is unpacked; a header that lies about the size is still one error."""
    bomb = _zip_bomb(exported, work / "bomb.fmu", 1000)
    assert bomb.stat().st_size < 2 * 1024**2
    with pytest.raises(FmuError, match="zip bomb") as caught:
        open_fmu(bomb)
    assert "resources/zeros.bin" in str(caught.value)
    liar = _zip_bomb(exported, work / "liar.fmu", 1000, claimed=4 * 1024**2)
    with pytest.raises(FmuError, match="resources/zeros.bin"):
        open_fmu(liar)


@pytest.mark.parametrize("limit", ["entry", "total", "ratio"])
def test_each_size_limit_is_one_error_naming_the_entry(limit, exported, work, monkeypatch):
    """Finding 8: the per-entry, total and compression-ratio limits, each counted on the bytes
    really unpacked (limits scaled down so that the archives stay small)."""
    with zipfile.ZipFile(exported) as archive:
        sizes = [i.file_size for i in archive.infolist()]
    noise = np.random.default_rng(10).bytes(max(sizes) + 64 * 1024)  # incompressible
    entry_limit = max(sizes) + 32 * 1024 if limit == "entry" else 1024**3
    monkeypatch.setattr(archive_module, "_MAX_ENTRY_BYTES", entry_limit)
    total_limit = sum(sizes) + len(noise) + 1 if limit == "total" else 2 * 1024**3
    monkeypatch.setattr(archive_module, "_MAX_TOTAL_BYTES", total_limit)
    monkeypatch.setattr(archive_module, "_RATIO_FLOOR", 64 * 1024)
    extra = {"entry": [("resources/noise.bin", noise)],
             "total": [("resources/noise1.bin", noise), ("resources/noise2.bin", noise)],
             "ratio": [("resources/zeros.bin", bytes(2 * 1024**2))]}[limit]
    bad = _rezip(exported, work / f"limit_{limit}.fmu", extra=extra)
    words = {"entry": "limit per entry", "total": "unpacks to more than", "ratio": "zip bomb"}[limit]
    with pytest.raises(FmuError, match=words) as caught:
        open_fmu(bad)
    if limit != "total":
        assert repr(extra[-1][0]) in str(caught.value)


_MEASURE = """
import json, resource, sys
import fmpy, lxml.etree, numpy  # imported before the baseline: only the command is measured
from fmi_adjoint.cli.main import main
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
code = main(sys.argv[1:])
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"code": code, "growth_kib": after - before}))
"""


def test_apply_on_a_zip_bomb_is_refused_with_bounded_memory(exported, work, tmp_path):
    """Finding 8: ``apply`` on a 1 MB zip bomb took 2.2 GB; now one error line, exit 2, no
    output file, nothing left in TMPDIR, and the peak memory grows by less than 400 MB
    (measured with getrusage in a separate process)."""
    bomb = _zip_bomb(exported, work / "bomb_apply.fmu", 1000)
    result = tmp_path / "RESULT.json"
    result.write_text(json.dumps({"parameters": {"c": 1.5}}), encoding="utf-8")
    private = tmp_path / "tmp"
    private.mkdir()
    output = tmp_path / "identified.fmu"
    proc = subprocess.run([sys.executable, "-c", _MEASURE, "apply", str(result), "--fmu", str(bomb), "-o",
                           str(output)], capture_output=True, text=True, env={**os.environ, "TMPDIR": str(private)})
    measured = json.loads(proc.stdout.strip().splitlines()[-1])
    _one_error(measured["code"], "", proc.stderr, "zip bomb")
    assert measured["growth_kib"] < BOMB_RSS_LIMIT_KIB, measured
    assert not output.exists()
    assert list(private.iterdir()) == []


def test_apply_copies_the_checked_entries(exported, work, tmp_path, capsys):
    """Findings 2 and 8: ``apply`` writes the checked extraction (streamed, never a whole
    entry in memory): every entry but those the rebuild with the identified values changes
    (the description, the binary, the regenerated sources, the export settings) byte for byte,
    under the normalized name that was checked (a backslash name is written with a slash)."""
    source = _rezip(exported, work / "backslash.fmu", extra=[("resources\\notes.txt", b"notes")])
    result = tmp_path / "RESULT.json"
    result.write_text(json.dumps({"parameters": {"c": 1.5}}), encoding="utf-8")
    output = tmp_path / "identified.fmu"
    code, _, err = run(["apply", result, "--fmu", source, "-o", output], capsys)
    assert code == 0, err
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(output) as new:
        assert [i.filename.replace("\\", "/") for i in old.infolist()] == [i.filename for i in new.infolist()]
        rebuilt = {"modelDescription.xml", BINARY, "sources/model.c", "sources/fmu_config.h",
                   "resources/export.json"}
        changed = {info.filename for info in old.infolist()
                   if new.read(info.filename.replace("\\", "/")) != old.read(info)}
        assert changed == rebuilt, changed
    with open_fmu(output) as archive:
        assert archive.variables["c"].start == 1.5
        assert archive.native is not None  # the rebuilt FMU is trusted again


# ------------------------------------------------------ finding 4: the binary is checked --


def test_untouched_export_is_trusted(exported, data, capsys):
    """Finding 4: an untouched exported FMU is still identified on its embedded model (the
    adjoint path, the same J and gradient as in process, no note)."""
    with open_fmu(exported) as archive:
        assert archive.native is not None and archive.native_distrust is None
        assert archive.native["binary_sha256"] == _sha256(archive.directory / BINARY)
    common = ["--data", data, "--params", "c,d"]
    via_fmu = gradient_json(["--fmu", exported, *common], capsys)
    in_process = gradient_json(["sdof", *common, "--t-end", T_END], capsys)
    assert via_fmu["gradient_path"]["method"] == "adjoint"
    assert abs(via_fmu["cost"] - in_process["cost"]) <= EXACT * abs(in_process["cost"])


def test_replaced_binary_is_identified_through_the_binary(tampered, exported, variant, data, capsys):
    """Finding 4: the binary replaced (resources kept) is not trusted: a note, the path of the
    binary (not "adjoint"), and the J the binary gives (that of the variant model), not the
    embedded model's; ``--gradient adjoint`` on it is one error."""
    common = ["--data", data, "--params", "c", "--workers", 1]
    code, out, err = run(["gradient", "--fmu", tampered["binary"], *common, "--json"], capsys)
    assert code == 0, err
    via_binary = json.loads(out)
    notes = err.strip().splitlines()
    assert len(notes) == 1 and notes[0].startswith("fmi-adjoint: note:"), err
    assert "does not match the embedded model" in notes[0] and "through its binary" in notes[0]
    assert via_binary["gradient_path"]["method"] != "adjoint"
    embedded = gradient_json(["sdof", "--data", data, "--params", "c", "--t-end", T_END], capsys)
    binary = gradient_json([variant, "--data", data, "--params", "c", "--t-end", T_END], capsys)
    assert abs(via_binary["cost"] - binary["cost"]) <= CROSS_IMPLEMENTATION * abs(binary["cost"])
    assert abs(via_binary["cost"] - embedded["cost"]) > 0.1 * abs(embedded["cost"])
    code, out, err = run(["gradient", "--fmu", tampered["binary"], *common, "--gradient", "adjoint"], capsys)
    _one_error(code, out, err, "--gradient adjoint", "does not match the embedded model")


@pytest.mark.parametrize("kind", ["forged", "zeros"])
def test_forged_hash_or_broken_binary_is_not_trusted(kind, tampered, data, capsys):
    """Finding 4: export.json edited to record the replaced binary's sha256 is still not
    trusted (the embedded model rebuilds to another binary); a binary of zeros neither, and
    identifying through it ends in one error line (no note: the binary never ran)."""
    with open_fmu(tampered[kind]) as archive:
        assert archive.native is None
        assert "does not match the embedded model" in archive.native_distrust
        if kind == "forged":
            assert "building resources/model.toml gives another" in archive.native_distrust
    code, out, err = run(["gradient", "--fmu", tampered[kind], "--data", data, "--params", "c", "--workers", 1], capsys)
    if kind == "zeros":
        _one_error(code, out, err, "zeros.fmu")
    else:
        assert code == 0 and "fmi-adjoint: note: forged.fmu: the binary does not match" in err, err


@pytest.mark.parametrize("edit", ["swap_value_references", "output_on_a_parameter", "alias_parameter"])
def test_edited_description_is_not_trusted(edit, exported, description, work, data, capsys):
    """Finding 4 (red-team follow-up): binary and resources untouched, but modelDescription.xml
    edited so that the variables the identification addresses are not the binary's: the
    embedded model must not be trusted (the adjoint path would give J of another model)."""
    xml = description
    if edit == "swap_value_references":
        xml = re.sub(r'(name="c"[^>]*valueReference=")(\d+)"', r'\g<1>XX"', xml, count=1)
        xml = re.sub(r'(name="d"[^>]*valueReference=")(\d+)"', r'\g<1>2"', xml, count=1)
        xml = xml.replace('valueReference="XX"', 'valueReference="3"')
    elif edit == "output_on_a_parameter":
        xml = re.sub(r'(name="x"[^>]*valueReference=")(\d+)"', r'\g<1>2"', xml, count=1)
    else:
        # Appended, so that the FMI 2 indices of ModelStructure (the Model Exchange states) still hold.
        variable = re.search(r'<ScalarVariable name="c".*?</ScalarVariable>', xml, re.S).group(0)
        xml = xml.replace("</ModelVariables>", variable.replace('name="c"', 'name="k"') + "</ModelVariables>", 1)
    assert xml != description
    fmu = _rezip(exported, work / f"{edit}.fmu", replace={"modelDescription.xml": xml.encode()})
    with open_fmu(fmu) as archive:
        assert archive.native is None
        assert "differs from the one exported" in archive.native_distrust


def test_applied_start_values_keep_the_export_trusted(exported, work, tmp_path, capsys):
    """`apply` changes start values only: the FMU it writes is still identified on its model."""
    result = tmp_path / "result.json"
    result.write_text(json.dumps({"parameters": {"c": 1.25, "d": 0.4}}))
    applied = tmp_path / "applied.fmu"
    code, out, err = run(["apply", result, "--fmu", exported, "-o", applied], capsys)
    assert code == 0, err
    with open_fmu(applied) as archive:
        assert archive.variables["c"].start == 1.25
        assert archive.native is not None, archive.native_distrust


# ------------------------------------------------------------ rewritten archives, forgeries --


def test_apply_keeps_the_system_that_made_each_entry(exported, work, tmp_path, capsys):
    """A Windows-made FMU (create_system 0, DOS attribute 0x20 "archive", no Unix mode):
    the rewritten entries keep create_system, the versions, extra field and comment, so that
    unzip reads the attributes as DOS ones (rewritten as Unix, they were mode 0000)."""
    windows = work / "windows.fmu"
    with zipfile.ZipFile(exported) as src, zipfile.ZipFile(windows, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            made = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            made.compress_type, made.external_attr, made.comment = zipfile.ZIP_DEFLATED, 0x20, b"from Windows"
            made.extra = struct.pack("<HH", 0xCAFE, 4) + b"abcd"  # a private extra record
            dst.writestr(made, src.read(info))
    data = bytearray(windows.read_bytes())
    offset = 0
    while (offset := data.find(b"PK\x01\x02", offset)) >= 0:  # zipfile writes this OS: "version made by" := 0
        data[offset + 5] = 0
        offset += 4
    windows.write_bytes(bytes(data))
    with zipfile.ZipFile(windows) as check:
        assert {i.create_system for i in check.infolist()} == {0}
    result = tmp_path / "RESULT.json"
    result.write_text(json.dumps({"parameters": {"c": 1.5}}), encoding="utf-8")
    output = tmp_path / "identified.fmu"
    code, _, err = run(["apply", result, "--fmu", windows, "-o", output], capsys)
    assert code == 0, err
    with zipfile.ZipFile(windows) as old, zipfile.ZipFile(output) as new:
        for a, b in zip(old.infolist(), new.infolist(), strict=True):
            for field in ("create_system", "create_version", "extract_version", "external_attr", "extra", "comment"):
                assert getattr(a, field) == getattr(b, field), (a.filename, field)


def test_export_json_with_a_huge_integer_is_distrusted_not_a_crash(exported, work):
    """A forged export.json whose value is a 401-digit integer (token forged to match): not
    trusted, with a reason; never an OverflowError."""
    from fmi_adjoint.export import export_scheme, instantiation_token

    with zipfile.ZipFile(exported) as archive:
        record = json.loads(archive.read("resources/export.json"))
        model = archive.read("resources/model.toml").decode("utf-8")
        xml = archive.read("modelDescription.xml").decode("utf-8")
    with open_fmu(exported) as archive:
        old_token = archive.description.guid
    record["values"] = {"m": 10**400}
    token = instantiation_token(model, record["values"], record["step"], export_scheme(record), record["fmi_version"])
    forged = _rezip(exported, work / "huge_value.fmu", replace={
        "resources/export.json": json.dumps(record).encode(),
        "modelDescription.xml": xml.replace(old_token, token).encode()})
    with open_fmu(forged) as archive:
        assert archive.native is None
        assert "records a parameter value that is not a finite number" in archive.native_distrust
