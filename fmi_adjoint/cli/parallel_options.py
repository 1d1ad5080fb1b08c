"""``--workers`` and ``--dask``: where the parallel work of a command runs (``identify``,
``gradient``, ``design``), and the one reading of ``--dask`` / ``FMI_ADJOINT_DASK``."""

from __future__ import annotations

import argparse
import os

__all__ = ["add_parallel_options", "dask_settings"]


def add_parallel_options(parser: argparse.ArgumentParser, title: str, work: str, default: str,
                         without_dask: str = "local processes") -> None:
    """Add ``--workers`` and ``--dask`` in a group ``title``; ``work`` names what runs in
    parallel ("the starts"), ``default`` the default worker count, ``without_dask`` where the
    work runs without a cluster."""
    group = parser.add_argument_group(title)
    group.add_argument("--workers", type=int, metavar="N",
                       help=f"local worker processes for {work} (default: {default}; 1: all in this process); "
                       "results do not depend on it")
    group.add_argument("--dask", metavar="ADDRESS",
                       help=f"run {work} on an existing Dask cluster, at tcp://HOST:PORT, tls://HOST:PORT or "
                       f"HOST:PORT, e.g. tcp://scheduler:8786 (default: $FMI_ADJOINT_DASK, else {without_dask}); "
                       "each connection step waits at most $FMI_ADJOINT_DASK_TIMEOUT s (default 10); the cluster runs "
                       "code sent to it, so give only your own; needs pip install 'fmi-adjoint[dask]'")


def dask_settings(args: argparse.Namespace) -> tuple[str | None, float | None]:
    """The Dask scheduler address of ``--dask`` or ``FMI_ADJOINT_DASK`` (None: no Dask),
    checked for form, and the connection timeout of ``FMI_ADJOINT_DASK_TIMEOUT`` (None: the
    default).  Nothing is imported or connected here."""
    from ..scale.dask import parse_address, parse_timeout

    if getattr(args, "dask", None) is not None:  # --dask "" is an error, not "no Dask"
        text, what = args.dask, "--dask"
    elif args.workers is None and os.environ.get("FMI_ADJOINT_DASK"):
        text, what = os.environ["FMI_ADJOINT_DASK"], "FMI_ADJOINT_DASK"
    else:
        return None, None
    address = str(parse_address(text, what))
    timeout = os.environ.get("FMI_ADJOINT_DASK_TIMEOUT")
    return address, parse_timeout(timeout, "FMI_ADJOINT_DASK_TIMEOUT") if timeout else None
