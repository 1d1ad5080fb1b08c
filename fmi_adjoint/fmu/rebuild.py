"""Rebuild of an FMU exported by fmi-adjoint with identified parameter values compiled in.

Start values in ``modelDescription.xml`` are a hand-back only for importers that apply them;
a host that instantiates the FMU and runs it (a plain ``fmpy.simulate_fmu`` without
``start_values``, SSP masters that apply no parameter binding, hand-written drivers) runs the
defaults compiled into the binary.  For an FMU whose binary provably is its embedded model
(:attr:`~fmi_adjoint.fmu.archive.FmuArchive.native`) those defaults can be changed too:
:func:`rebuild_fmu` regenerates the model's C code with the identified values and compiles it
with the one build of an FMU binary, :func:`~fmi_adjoint.export.build_fmu_binary`.

What changes, and why (everything else is copied byte for byte, same names and order):

* ``sources/model.c``: the generated default parameter array (``fa_default_parameters``),
  printed by the code generator from ``resources/model.toml`` with
  :meth:`~fmi_adjoint.model.Model.with_values` (repr of a float: exact round trip; no user
  text ever reaches the C code).  The values are those the identification ran: the
  export's, then the model description's start values (an importer sets them, and an FMU
  whose start values were edited after export stays trusted), then the identified ones;
* ``sources/fmu_config.h`` and the model description's GUID / instantiation token: the token
  hashes the model file and the export settings, values included
  (:func:`~fmi_adjoint.export.instantiation_token`), so another parameterization is
  another model for every importer that caches by token;
* ``binaries/<this platform>/<modelIdentifier>.so``: compiled from those sources (the one
  binary of every interface the FMU declares: Co-Simulation, Model Exchange or both);
* ``modelDescription.xml``: the identified start values and the new token (its interfaces
  and their model structure stay as exported: the dependencies are structural, and the
  trust check of the rebuilt FMU compares them with its model's);
* ``resources/export.json``: ``values`` and ``binary_sha256``, so that the rebuilt FMU
  passes the same three trust checks as a fresh export (its embedded model reproduces the
  token and builds to that very binary) and is identified on its model again.

Any other generated source that differs is replaced as well and listed in
:attr:`RebuiltFmu.replaced`.  ``sources/`` ends up holding exactly what this fmi-adjoint
generates for the model (issue 31, finding 7): the rebuilt FMU is trusted again, and
``sources/`` is what ``fmpy.build`` or another importer compiles, so a file the archive
carried besides them (an ``evil.c``) is dropped and listed in :attr:`RebuiltFmu.dropped`,
and the FMI 3 ``sources/buildDescription.xml``, which names the sources and the compiler
options, is regenerated as ``export`` writes it (added if missing, dropped from an FMI 2
FMU, which has none from fmi-adjoint).  Binaries for other platforms cannot be rebuilt here: they are
kept unchanged and listed in :attr:`RebuiltFmu.stale_binaries`; for them the start values
are the only hand-back.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tempfile
from collections.abc import Mapping
from pathlib import Path

from ..errors import FmuError
from ..export import build_fmu_binary, export_scheme, export_storage, instantiation_token
from ..export.fmu_export import build_description
from ..files import atomic_output, check_writable
from ..model_file import load_model
from .archive import PLATFORM_DIRS, FmuArchive
from .repack import check_not_the_input, write_fmu_entries
from .start_values import check_parameters, description_with_start_values

__all__ = ["RebuiltFmu", "rebuild_fmu", "rebuild_obstacle"]


@dataclasses.dataclass(frozen=True)
class RebuiltFmu:
    """What :func:`rebuild_fmu` wrote.

    Attributes
    ----------
    path : pathlib.Path
        The new FMU.
    values : dict of str to float
        The parameter values compiled in (the export's ``--set`` values, updated by the
        start values of the model description, updated by the identified ones), as
        recorded in ``resources/export.json``.
    replaced : tuple of str
        The entries whose bytes changed, in archive order (an added buildDescription.xml last).
    stale_binaries : tuple of str
        Binaries for other platforms, kept as they were: they still carry the old values.
    dropped : tuple of str
        Entries of ``sources/`` that this fmi-adjoint does not generate for the model, left out.
    """

    path: Path
    values: dict[str, float]
    replaced: tuple[str, ...]
    stale_binaries: tuple[str, ...]
    dropped: tuple[str, ...] = ()


def rebuild_obstacle(archive: FmuArchive) -> str | None:
    """Why ``archive`` cannot be rebuilt with new values (one line), or None if it can.

    It can if its binary is provably its embedded model (:attr:`FmuArchive.native`, which
    costs one C build on first use) and it ships its ``sources/``.
    """
    if archive.native is None:
        return archive.native_distrust or "it is not an FMU exported by fmi-adjoint"
    if not any(entry.name.startswith("sources/") and not entry.is_dir for entry in archive.entries):
        return "it ships no sources/"
    return None


def rebuild_fmu(archive: FmuArchive, values: Mapping[str, float], output) -> RebuiltFmu:
    """Write ``output``: ``archive`` rebuilt with ``values`` compiled in (see the module
    docstring for what changes).

    Raises
    ------
    FmuError
        ``values`` names no real parameter of the FMU, the FMU cannot be rebuilt
        (:func:`rebuild_obstacle`), or its ``sources/`` are not the files this version of
        fmi-adjoint generates for it.
    CompilerError
        No C compiler, or the regenerated code does not compile.
    OutputFileError
        ``output`` cannot be written.
    """
    check_parameters(archive, values)
    output = Path(output)
    check_not_the_input(archive, output)
    check_writable(output)
    obstacle = rebuild_obstacle(archive)
    if obstacle is not None:
        raise FmuError(f"{archive.path.name} cannot be rebuilt with the identified values: {obstacle}.")
    settings = dict(archive.native or {})
    embedded = load_model(archive.model_file)
    # The model's own parameters: a parameter the export adds (the Model Exchange drift
    # tolerance "me.drift_tolerance") is no model value; its start value stays in the model
    # description (description_with_start_values below writes a handed-back one there).
    own = {p.name for p in embedded.all_parameters}
    # What the identification ran: the export's values, overridden by the start values the
    # model description declares (which the trust check lets differ from them, and which every
    # run sets before initialization), overridden by the identified values.
    declared = {v.name: float(v.start) for v in archive.variables.values()
                if v.causality == "parameter" and v.variability in ("fixed", "tunable") and v.is_real
                and v.start is not None and v.name in own}
    compiled_in = {**(settings["values"] or {}), **declared,
                   **{name: float(value) for name, value in values.items() if name in own}}
    text = archive.model_file.read_text(encoding="utf-8")
    model = embedded.with_values(compiled_in)
    version, step, solver = int(settings["fmi_version"]), float(settings["step"]), export_scheme(settings)
    token = instantiation_token(text, compiled_in, step, solver, version)
    # One binary for every interface the export declares (Co-Simulation, Model Exchange or
    # both: the trust check saw one modelIdentifier); the model description keeps them all.
    interface = archive.description.coSimulation or archive.description.modelExchange
    platform = PLATFORM_DIRS[archive.fmi_version]
    binary_entry = f"binaries/{platform}/{interface.modelIdentifier}.so"
    files = {entry.name for entry in archive.entries if not entry.is_dir}
    replacements: dict[str, bytes] = {}
    generated: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="fmi_adjoint_rebuild_") as tmp:
        binary, c_sources = build_fmu_binary(model, Path(tmp), fmi_version=version, token=token, step=step,
                                             solver=solver, storage=export_storage(settings))
        # Generated files only: the FMU's own sources must be this generator's, file for file.
        for path in sorted((Path(tmp) / "sources").iterdir()):
            name = f"sources/{path.name}"
            if name not in files:
                raise FmuError(f"{archive.path.name}: {name} is missing, so its sources/ are not the ones this "
                               "fmi-adjoint generates for its model; export the model again with `fmi-adjoint "
                               "export` (or hand back through --ssp).")
            generated[name] = path.read_bytes()
        binary_bytes = binary.read_bytes()
    if version == 3:
        generated["sources/buildDescription.xml"] = build_description(interface.modelIdentifier, c_sources)
    for name, data in generated.items():
        if name not in files or data != (archive.directory / name).read_bytes():
            replacements[name] = data
    dropped = tuple(entry.name for entry in archive.entries
                    if not entry.is_dir and entry.name.startswith("sources/") and entry.name not in generated)
    replacements[binary_entry] = binary_bytes
    replacements["modelDescription.xml"] = description_with_start_values(archive, values, token=token)
    record = json.loads((archive.directory / "resources" / "export.json").read_text(encoding="utf-8"))
    record["values"] = compiled_in
    record["binary_sha256"] = hashlib.sha256(binary_bytes).hexdigest()
    replacements["resources/export.json"] = (json.dumps(record, indent=2) + "\n").encode()
    added = {name: data for name, data in replacements.items() if name not in files}
    with atomic_output(output, "wb") as handle:
        write_fmu_entries(archive, handle, {k: v for k, v in replacements.items() if k not in added},
                          dropped=dropped, added=added)
    stale = tuple(entry.name for entry in archive.entries
                  if not entry.is_dir and entry.name.startswith("binaries/")
                  and not entry.name.startswith(f"binaries/{platform}/"))
    replaced = tuple(entry.name for entry in archive.entries if entry.name in replacements) + tuple(added)
    return RebuiltFmu(path=output, values=compiled_in, replaced=replaced, stale_binaries=stale, dropped=dropped)
