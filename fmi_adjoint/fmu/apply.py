"""The front door of the hand-back (``fmi-adjoint apply``): identified values written back as an
FMU, an SSV file and/or an SSP archive, together or not at all, with what an importer will see.

The jobs themselves: :mod:`.start_values` (the values as start attributes), :mod:`.rebuild`
(an FMU exported by fmi-adjoint rebuilt with the values compiled in), :mod:`.ssv` (the SSV
parameter set) and :mod:`.ssp` (the SSP archive that binds it to the FMU).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import CompilerError, FmuError, OutputFileError
from ..files import check_writable
from ..toolchain import c_compiler
from . import ssp as ssp_archive
from .archive import FmuArchive
from .repack import check_not_the_input
from .ssv import write_ssv
from .start_values import check_parameters, write_reparameterized_fmu

if TYPE_CHECKING:
    from .rebuild import RebuiltFmu

__all__ = ["HandBack", "hand_back", "staged_outputs"]


@dataclasses.dataclass(frozen=True)
class HandBack:
    """What :func:`hand_back` wrote, and what the user must know about it.

    Attributes
    ----------
    fmu, ssv, ssp : pathlib.Path or None
        The files written.
    rebuilt : RebuiltFmu or None
        The rebuild (:func:`~fmi_adjoint.fmu.rebuild.rebuild_fmu`) if the handed-back FMU
        carries the values compiled in; None if it carries them as start values only.
    notes, warnings : tuple of str
        One line each (without the ``fmi-adjoint: note:`` prefix).
    """

    fmu: Path | None
    ssv: Path | None
    ssp: Path | None
    rebuilt: RebuiltFmu | None
    notes: tuple[str, ...]
    warnings: tuple[str, ...]


@contextlib.contextmanager
def staged_outputs(targets: Mapping[str, Path | None]) -> Iterator[dict[str, Path]]:
    """A temporary file next to each target (None: skipped); all are moved onto their targets
    (``os.replace``) only when the block succeeds, else removed: no half-written output."""
    given = {key: target for key, target in targets.items() if target is not None}
    staged: dict[str, Path] = {}
    try:
        for key, target in given.items():
            folder = target.parent if str(target.parent) else Path(".")
            try:
                fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=folder)
            except OSError as exc:
                raise OutputFileError(f"cannot write {str(target)!r}: {exc.strerror or exc}; choose a writable "
                                      "folder.") from None
            os.close(fd)
            staged[key] = Path(name)
        yield staged
        for key, path in staged.items():
            check_writable(given[key])  # still absent or a regular file
            os.replace(path, given[key])
    finally:
        for path in staged.values():
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)


def hand_back(archive: FmuArchive, values: Mapping[str, float], *, fmu=None, ssv=None, ssp=None,
              name: str = "identified", interface: str | None = None) -> HandBack:
    """Hand identified parameter values back (``fmi-adjoint apply``): an FMU, an SSV file
    and/or an SSP archive, written together or not at all.

    The FMU (``fmu``; also the one embedded in ``ssp``) is

    * for an FMU exported by fmi-adjoint whose binary provably is its embedded model and
      that ships its sources: rebuilt with the values compiled in
      (:func:`~fmi_adjoint.fmu.rebuild.rebuild_fmu`), so that importers that never apply
      start values run the identified model too; binaries for other platforms cannot be
      rebuilt here, are kept, and a warning says so;
    * otherwise: a copy with the values as start values (:func:`write_reparameterized_fmu`),
      with a note that importers ignoring start values keep the old values, and the SSP
      archive (``ssp``, whose parameter binding SSP masters apply) as the remedy.

    Each output is written to a temporary file in its target folder and moved into place
    only when every requested output succeeded.

    Raises
    ------
    FmuError
        No output requested, an output naming the FMU itself, a value that is no fixed or
        tunable numeric parameter of the FMU (or no whole number for an integer one), or an
        SSP ``implementation`` (the RESULT.json's interface) the FMU does not have.
    CompilerError
        An FMU exported by fmi-adjoint that cannot be rebuilt (or checked) without a C
        compiler, or regenerated code that does not compile.
    OutputFileError
        An output cannot be written.
    """
    # The rebuild needs the exporter (code generation, the C build): loaded only when handing back.
    from .rebuild import rebuild_fmu, rebuild_obstacle

    targets = {key: None if path is None else Path(path) for key, path in (("fmu", fmu), ("ssv", ssv), ("ssp", ssp))}
    if not any(targets.values()):
        raise FmuError("apply: give -o IDENTIFIED.fmu, --ssv OUT.ssv and/or --ssp OUT.ssp.")
    check_parameters(archive, values)
    if ssp is not None:
        ssp_archive.check_implementation(archive, interface)  # before anything is rebuilt or written
    for path in targets.values():
        if path is not None:
            check_not_the_input(archive, path)
            check_writable(path)
    label = archive.path.name
    notes: list[str] = []
    warnings: list[str] = []
    rebuilt = None
    with staged_outputs(targets) as staged, tempfile.TemporaryDirectory(prefix="fmi_adjoint_apply_") as tmp:
        if fmu is not None or ssp is not None:
            handed = staged.get("fmu") or Path(tmp) / "handed_back.fmu"
            obstacle = rebuild_obstacle(archive)
            if obstacle is None:
                rebuilt = dataclasses.replace(rebuild_fmu(archive, values, handed), path=targets["fmu"] or handed)
                if rebuilt.dropped:
                    notes.append(f"{label}: {', '.join(rebuilt.dropped)} left out of the rebuilt FMU: its sources/ "
                                 "hold only what fmi-adjoint generates for the embedded model (the FMU is trusted "
                                 "again, and an importer may compile sources/).")
                if rebuilt.stale_binaries:
                    warnings.append(f"{label}: {', '.join(rebuilt.stale_binaries)} cannot be rebuilt on this platform "
                                    "and still carry the old parameter values; for importers using them the start "
                                    "values in modelDescription.xml are the only hand-back.")
            else:
                if archive.native_distrust is not None and c_compiler() is None:
                    raise CompilerError(f"{label} was exported by fmi-adjoint and is rebuilt with the identified "
                                        "values compiled in, which needs a C compiler: none found (tried $CC, cc, "
                                        "gcc, clang); install gcc or set CC.")
                write_reparameterized_fmu(archive, values, handed)
                remedy = "the parameter binding of the SSP archive carries them to SSP importers" if ssp else \
                    "hand back with --ssp OUT.ssp as well (an SSP parameter binding)"
                notes.append(f"{label} cannot be rebuilt with the identified values compiled in: {obstacle}. They "
                             "are handed back as start values only; importers that ignore start values (e.g. "
                             f"fmpy.simulate_fmu without start_values) still run the old values: {remedy}.")
        if ssv is not None:
            write_ssv(archive, values, staged["ssv"], name=name)
        if ssp is not None:
            ssp_archive.write_ssp(archive, values, handed, staged["ssp"],
                                  fmu_name=(targets["fmu"] or archive.path).name, name=name, interface=interface)
            said, warned = ssp_archive.importer_interface(archive, interface)
            notes.extend(said)
            warnings.extend(warned)
            if archive.co_simulation and archive.fmi_version == 3:
                notes.append(f"{label} is an FMI 3 FMU: the SSP archive is complete, but fmpy's SSP simulation "
                             "(fmpy.ssp.simulation.simulate_ssp, fmpy 0.3) runs FMI 1 and 2 FMUs only.")
    return HandBack(fmu=targets["fmu"], ssv=targets["ssv"], ssp=targets["ssp"], rebuilt=rebuilt,
                    notes=tuple(notes), warnings=tuple(warnings))
